/*
test_gpt.c: tests of the trainer, built from the real train_gpt.c (included with TRAIN_GPT_NO_MAIN) and the real
kernel header, never from pasted copies.

    make test_gpt && ./test_gpt                     all groups
    ./test_gpt --model M.bin --state S.bin          check any llm.c model + debug-state pair (logits, loss, grads)
    ./test_gpt --only NAME                          run the groups whose name contains NAME (small-ops, gpt2-ops,
                                                    reference, units; `--only ops` runs both op groups)
    ./test_gpt --only reference --ref-dir DIR       the reference checks on another make_reference.py output
                                                    (--traj-lr LR if its trajectory used another learning rate)

Groups: finite-difference gradient checks of every op (double precision); the committed PyTorch reference (logits,
loss, every gradient, a 10-step AdamW trajectory, a 12-step trajectory with warmup, cosine decay and strong weight
decay compared step by step and parameter by parameter); units of the training loop against independent closed
forms (learning-rate schedule, weight-decay flags, a decay-only AdamW step, evaluation, sampling). Tests through
the real binary (resume, bad input, data parallel) are in tests/test_runs.c.
The groups live in tests/gpt_*.h by topic (the list above main); this file holds the shared helpers and main.
Every comparison is atol + rtol * |ref|, NaN/Inf checked first, written as !(diff <= tol); every failure is
recorded; the last line is "N passed, M failed" and the exit status is non-zero if any failed.
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

#include <sys/resource.h>
#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary
#include "tests/kv_rows.h" // defines: kv_forward_rows

// report(): the shared check harness of tests/testing.h
#define report check

static KernelCtx g_ctx; // the kernel tests' execution context (fp32 storage)
#include "tests/stage_ops.h" // CUDA build: the op tests' host arrays staged through device buffers

// Compares got (float) with ref (double): NaN/Inf first, then |got - ref| <= atol + rtol |ref| per element.
static int check_close(const char* name, const float* got, const double* ref, size_t n, double atol, double rtol) {
    double max_err = 0.0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) {
            if (bad == 0) { worst = i; }
            bad++;
            max_err = INFINITY;
            continue;
        }
        double diff = fabs((double)got[i] - ref[i]);
        double tol = atol + rtol * fabs(ref[i]);
        if (!(diff <= tol)) { if (bad == 0) { worst = i; } bad++; }
        if (diff > max_err) { max_err = diff; if (bad == 0) { worst = i; } }
    }
    if (bad) {
        report(0, name, "%zu of %zu elements out of tolerance (atol %g, rtol %g); element %zu: got %.9g, expected %.9g; max abs err %.3g",
               bad, n, atol, rtol, worst, got[worst], ref[worst], max_err);
        return 0;
    }
    report(1, name, "max abs err %.3g over %zu elements", max_err, n);
    return 1;
}

static int check_close_f(const char* name, const float* got, const float* ref, size_t n, double atol, double rtol) {
    double* r = (double*)mallocCheck(n * sizeof(double));
    for (size_t i = 0; i < n; i++) { r[i] = ref[i]; }
    int ok = check_close(name, got, r, n, atol, rtol);
    free(r);
    return ok;
}

static int name_selected(const char* only, const char* group) { return !only || strstr(group, only) != NULL; }

static uint64_t g_rng = 12345;
static double rand_d(void) { return rng_uniform(&g_rng) * 2.0 - 1.0; }
static void fill_rand(double* x, size_t n, double scale) { for (size_t i = 0; i < n; i++) { x[i] = scale * rand_d(); } }
static float* to_float(const double* x, size_t n) {
    float* f = (float*)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { f[i] = (float)x[i]; }
    return f;
}
// How many of n floats differ in their bits between a and b (the "same bits" checks: -0 against 0 or two NaNs' payloads
// count, as a value comparison would not).
static size_t bits_differ(const float* a, const float* b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) { d += memcmp(&a[i], &b[i], sizeof(float)) != 0; }
    return d;
}


// The groups, by topic (each a header of tests/, included here in this order: each uses the helpers above it)
#include "tests/gpt_ops.h"         // finite differences of every op; AdamW
#include "tests/gpt_ops_stored.h"  // the ops in 16-bit storage, and at GPT-2 124M's shapes
#include "tests/gpt_ops_cuda.h"    // TF32, --matmul-tune, kernels_reserve, graphs, file streams (CUDA builds)
#include "tests/gpt_reference.h"   // the PyTorch reference: gradients, trajectories, model files
#include "tests/gpt_units.h"       // units of the training loop
#include "tests/gpt_precision.h"   // bf16/fp16 through the whole model; recomputation
#include "tests/gpt_sampling.h"    // evaluation, the KV cache, sampling

// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
    kernels_runtime_select(argv); // the trainer's OpenMP spin count and OpenBLAS kernel choice (may re-execute)
    printf("matmuls: %s kernels (%s)\n", kernels_blas_name(), kernels_blas_reason());
    ParallelContext pc;
    parallel_init(&pc, &argc, &argv);
    parallel_set_layout(&pc, 1, 1, 60.0);
#ifdef KERNELS_CUDA
    kernels_ctx_init(&g_ctx, KERNELS_DTYPE, 64, 1032); // the build's storage type
    printf("device: %s\n", kernels_blas_reason());
#else
    kernels_ctx_init(&g_ctx, DTYPE_FP32, 150, 1032); // the op tests' context: fp32, T up to 150, C up to 1032
#endif
    const char* only = NULL;
    const char* model_path = NULL;
    const char* state_path = NULL;
    const char* ref_dir = "tests/ref";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--only") == 0) { only = argv[i + 1]; }
        else if (strcmp(argv[i], "--model") == 0) { model_path = argv[i + 1]; }
        else if (strcmp(argv[i], "--state") == 0) { state_path = argv[i + 1]; }
        else if (strcmp(argv[i], "--ref-dir") == 0) { ref_dir = argv[i + 1]; }
        else if (strcmp(argv[i], "--traj-lr") == 0) { g_traj_lr = (float)atof(argv[i + 1]); }
        else { fatal("test_gpt: unknown flag '%s' (--only NAME, --model M.bin --state S.bin, --ref-dir DIR, --traj-lr LR)", argv[i]); }
    }
    if (model_path || state_path) {
        if (!model_path || !state_path) { fatal("test_gpt: --model and --state go together"); }
        check_reference(model_path, state_path, &pc, 1e-4);
    } else {
        // the op tests on small and odd shapes, then at GPT-2 124M's (a separate group: scripts/gpu_check.sh runs
        // the small ones under compute-sanitizer, where the large shapes would take minutes)
        if (name_selected(only, "small-ops")) {
#ifdef KERNELS_CUDA
            int fp32_ops = KERNELS_DTYPE == DTYPE_FP32; // a 16-bit CUDA build runs only the tests of its type
#else
            int fp32_ops = 1;
#endif
            if (fp32_ops) {
                test_matmul();
                test_layernorm(16);
                test_layernorm(13);
                test_layernorm(264);  // (a GPU's fp32 packs: 66, 3 a lane, in registers)
                test_layernorm(1000); // (250: two warps to a row, 125 packs each, 4 a lane)
                test_layernorm(1032); // (258: the sums in memory)
                test_fast_math();
                test_gelu();
                test_matmul_gelu();
                test_attention();
                test_encoder(4);
                test_encoder(6);
                test_classifier(16);
                test_classifier(13);
                test_adamw();
                test_sums();
            }
            test_ops_dtype();
            test_forward_len();
#ifdef KERNELS_CUDA
#ifdef ENABLE_FP32
            test_tf32();
#else
            report(kernels_set_tf32(&g_ctx, 1) == -1 && kernels_set_tf32(&g_ctx, 0) == 0, "kernels_set_tf32: a 16-bit build refuses --tf32 1",
                   "%s", "");
#endif
            test_param_streams();
            test_bias_grad_widths();
            test_ln_backward_variants();
            test_softmax_variants();
            test_matmul_tune();
            test_reserve();
            test_capture_failure();
#endif
        }
        if (name_selected(only, "gpt2-ops")) { test_ops_gpt2_shapes(); }
        char mp[1024], sp[1024];
        snprintf(mp, sizeof(mp), "%s/ref_model.bin", ref_dir);
        snprintf(sp, sizeof(sp), "%s/ref_state.bin", ref_dir);
#ifdef KERNELS_CUDA
        // the CUDA build (fp32 storage: the same tolerances as the CPU) runs the ops and the whole-model reference;
        // recomputation (bit for bit: the kernels are deterministic), evaluation and sampling in its storage type;
        // the rest reads buffers directly and runs on the CPU build (the GPU check compares the binaries' runs)
        if (KERNELS_DTYPE == DTYPE_FP32 && name_selected(only, "reference")) {
            check_reference(mp, sp, &pc, 1e-5);
            check_trajectory(ref_dir, &pc);
        }
        if (name_selected(only, "units")) {
            test_recompute(mp, &pc, KERNELS_DTYPE);
            if (KERNELS_DTYPE == DTYPE_FP32) { test_evaluate(mp, &pc); test_sampling(mp, &pc); test_kv_forward(mp, &pc); }
        }
        printf("SKIP model files, schedules, units and the dtype comparisons: CPU build only\n");
#endif
#ifndef KERNELS_CUDA
        if (name_selected(only, "reference")) {
            check_reference(mp, sp, &pc, 1e-5);
            check_trajectory(ref_dir, &pc);
            test_model_files(ref_dir, &pc);
            check_sched_trajectory(ref_dir, &pc);
        }
        if (name_selected(only, "units")) {
            test_lr_schedule();
            test_lr_decay_steps();
            test_batch_ramp();
            test_outlier_guard();
            test_atomic_commit_failure();
            test_flops_per_token();
            test_llmc_descriptors();
            test_init();
            test_weight_decay(mp, &pc);
            test_adam_hyper(mp, &pc);
            test_evaluate(mp, &pc);
            test_sampling(mp, &pc);
            test_kv_forward(mp, &pc);
            for (int dt = DTYPE_FP32; dt <= DTYPE_FP16; dt++) { test_recompute(mp, &pc, dt); }
        }
        if (name_selected(only, "precision")) { test_dtypes(mp, sp, &pc); }
#endif

    }
    int status = test_summary();
    parallel_finalize(&pc);
    return status;
}
