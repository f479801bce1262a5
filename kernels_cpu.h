/*
kernels_cpu.h: the CPU backend of the kernel interface (kernels.h): memory, the forward and backward of every
GPT-2 op, the reductions and AdamW. They are the reference the CUDA kernels (kernels.cuh, same interface) are
checked against. bf16 and fp16 are emulated: storage stays fp32, and every value a GPU would store in 16 bits is
rounded to the type when it is stored (precision.h).

Conventions (read these before any kernel):
- Row-major tensors; "BT" is the number of token rows (B*T), C channels, OC output channels.
- Parameter gradients are written according to the `acc` flag of each backward kernel: acc = 0 OVERWRITES them
  (the first micro-step of an optimizer step, so nothing has to zero gradients between steps), acc = 1
  ACCUMULATES (+=, the later micro-steps of gradient accumulation).
- Activation gradients are OVERWRITTEN unless the kernel's contract says "accumulates into".
- Matmuls go through cblas_sgemm when built with -DUSE_BLAS (OpenBLAS), else through plain OpenMP loops.
- Only static functions: any translation unit may include this header.
*/
#ifndef KERNELS_CPU_H
#define KERNELS_CPU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef USE_BLAS
#include <cblas.h>
#endif
#include "precision.h"  // defines: DTYPE_*, round_dtype, round_buffer, round_stochastic
#include "utils.h"      // defines: fatal, alignedMallocCheck, mulSize

#ifndef GELU_SCALING_FACTOR
#define GELU_SCALING_FACTOR 0.7978845608028654f // sqrt(2/pi)
#endif

static int kernels_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int kernels_thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

// Flush subnormals to zero (FTZ) and read them as zero (DAZ) on every OpenMP thread. A diverging run pushes
// values into the subnormal range, where each x86 float operation takes a ~100-cycle microcode assist: one such
// run went from 0.6 s to 36 s a step. Call once at start, after the thread count is set (the pool persists).
static void kernels_init_fp_mode(void) {
#if defined(__SSE__) || defined(__x86_64__)
    #pragma omp parallel
    { __builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() | 0x8040); } // bit 15 FTZ, bit 6 DAZ
#endif
}

// Which matmul engine runs, for the start-up table and benchmarks (OpenBLAS names the kernel family it picked).
static const char* kernels_blas_name(void) {
#if defined(USE_BLAS) && defined(OPENBLAS_VERSION)
    return openblas_get_corename();
#elif defined(USE_BLAS)
    return "cblas";
#else
    return "built-in loops (no BLAS)";
#endif
}

// ----------------------------------------------------------------------------
// OpenBLAS kernel choice. OpenBLAS picks its kernel family by cpuid when the library loads, and a release that
// does not know a CPU (0.3.21 and Sapphire/Emerald Rapids, say) silently falls back to a generic family such as
// Prescott (SSE3): the GPT-2 124M step took 3.7 s instead of 1.2 s. So at the very start of main, before anything
// else (MPI included), kernels_runtime_select() checks the family OpenBLAS chose; when it is generic and the CPU's
// features allow better, it sets OPENBLAS_CORETYPE to that family and re-executes the program, which then loads
// OpenBLAS with it. A family set by the user (OPENBLAS_CORETYPE) is always kept. kernels_blas_reason() says why
// the family in use was chosen.

#define KERNELS_BLAS_MARK "GPT_TRAINER_BLAS_CHOICE" // set on re-execution: the reason, and that we chose it

static char kernels__blas_reason[256] = "detected by OpenBLAS";

static const char* kernels_blas_reason(void) { return kernels__blas_reason; }

// The best OpenBLAS x86-64 family this CPU's features allow (NULL: nothing better than a generic one), and the
// features that justify it.
static const char* kernels__blas_family_for_cpu(const char** why) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq")) {
        // Cooperlake adds bf16 kernels (sbgemm) to SkylakeX's; its sgemm is SkylakeX's
        if (__builtin_cpu_supports("avx512bf16")) { *why = "AVX-512 F/BW/VL/DQ and AVX512-BF16"; return "Cooperlake"; }
        *why = "AVX-512 F/BW/VL/DQ";
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) { *why = "AVX2 and FMA"; return "Haswell"; }
#endif
    (void)why;
    return NULL;
}

static int kernels__blas_generic(const char* name) {
    const char* generic[] = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai", "coppermine",
                             "northwood", "banias", "unknown", "generic"};
    for (size_t i = 0; i < sizeof(generic) / sizeof(generic[0]); i++) {
        if (strcasecmp(name, generic[i]) == 0) { return 1; }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// How OpenMP's idle threads wait. Between parallel regions and at their barriers, libgomp's threads spin 300,000
// times before they sleep (its default while OMP_WAIT_POLICY is unset: milliseconds). On a machine whose cores run
// nothing but our threads that costs nothing. Where another program holds a core (a laptop's browser, a second
// run), a spinning thread keeps its core while the thread its barrier waits for shares the busy one, and each
// region waits for the scheduler's time slices. 1000 spins (tens of microseconds) is as fast as the default on an
// idle machine and much faster beside a busy core: on the 2-core CI machine with a shell loop on one core, a GPT-2
// 124M step took 2.65 s with the default and 1.90 s with 1000 spins (0.97 s idle, either way); the default job's d4
// 0.80 s and 0.62 s (scripts/bench_threads.sh; README, "OpenMP's idle threads"). Shorter counts and
// OMP_WAIT_POLICY=passive help a tiny model more under load but cost it up to 2x on an idle machine. libgomp reads
// the count once, when it loads, so it must be in the environment the program started with:
// kernels_runtime_select() sets it and re-executes the program (together with the OpenBLAS choice, one
// re-execution). OMP_WAIT_POLICY or GOMP_SPINCOUNT given by the user are kept.

#define KERNELS_OMP_SPIN "1000"
#define KERNELS_OMP_MARK "GPT_TRAINER_OMP_SPIN" // set on re-execution: the count we chose

static char kernels__omp_note[256] = "";

// For the start-up table: how the idle threads wait, and who chose it ("" without OpenMP).
static const char* kernels_threads_note(void) { return kernels__omp_note; }

// 1 if NAME was in the environment this program image started with, its value in val. That environment is what
// libgomp read when it loaded; setenv() after the start changes only the process's own copy (/proc/self/environ
// keeps the original; where /proc is missing, getenv is the best there is).
static int kernels__startup_env(const char* name, char* val, size_t cap) {
    FILE* f = fopen("/proc/self/environ", "rb");
    if (!f) {
        const char* v = getenv(name);
        if (v) { snprintf(val, cap, "%s", v); }
        return v != NULL;
    }
    size_t n = strlen(name), len = 0;
    char entry[512];
    int found = 0, c;
    do { // entries "NAME=value", each ended by a NUL
        c = fgetc(f);
        if (c == 0 || c == EOF) {
            entry[len < sizeof(entry) ? len : sizeof(entry) - 1] = 0;
            if (len > n && len < sizeof(entry) && strncmp(entry, name, n) == 0 && entry[n] == '=') {
                snprintf(val, cap, "%s", entry + n + 1);
                found = 1;
            }
            len = 0;
        } else if (len < sizeof(entry)) {
            entry[len++] = (char)c;
        } else {
            len++;
        }
    } while (c != EOF && !found);
    fclose(f);
    return found;
}

// Called first thing in main, before MPI: the OpenMP spin count and the OpenBLAS kernel family (both above). When
// either needs setting, sets it and re-executes the program once; a failed re-execution carries on, saying so.
static void kernels_runtime_select(char** argv) {
#ifdef __linux__
    // a program re-executed through /proc/self/exe is named "exe" (ps, top, pgrep): it takes its own name back
    char comm[32] = "";
    FILE* cf = fopen("/proc/self/comm", "r");
    if (cf) {
        if (!fgets(comm, sizeof(comm), cf)) { comm[0] = 0; }
        fclose(cf);
    }
    const char* base = argv && argv[0] ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : argv && argv[0] ? argv[0] : "";
    if (strcmp(comm, "exe\n") == 0 && base[0]) { prctl(PR_SET_NAME, base, 0, 0, 0); }
#endif
    int reexec = 0, omp_set = 0;
#ifdef _OPENMP
    char v[64];
    if (kernels__startup_env("OMP_WAIT_POLICY", v, sizeof(v))) {
        snprintf(kernels__omp_note, sizeof(kernels__omp_note), "wait as OMP_WAIT_POLICY=%s says (from the environment)", v);
    } else if (kernels__startup_env("GOMP_SPINCOUNT", v, sizeof(v))) {
        const char* mark = getenv(KERNELS_OMP_MARK);
        snprintf(kernels__omp_note, sizeof(kernels__omp_note), "spin %s times, then sleep (GOMP_SPINCOUNT=%s, %s)", v, v,
                 mark && strcmp(mark, v) == 0 ? "set by the trainer" : "from the environment");
    } else if (getenv(KERNELS_OMP_MARK)) { // (already re-executed for it, and the count did not arrive: never loop)
        snprintf(kernels__omp_note, sizeof(kernels__omp_note), "spin as long as libgomp's default (%s=%s in the environment, GOMP_SPINCOUNT not)",
                 KERNELS_OMP_MARK, getenv(KERNELS_OMP_MARK));
    } else {
        setenv("GOMP_SPINCOUNT", KERNELS_OMP_SPIN, 1);
        setenv(KERNELS_OMP_MARK, KERNELS_OMP_SPIN, 1);
        reexec = omp_set = 1; // (libgomp reads the count only when it loads)
    }
#endif
#if defined(USE_BLAS) && defined(OPENBLAS_VERSION)
    const char* mark = getenv(KERNELS_BLAS_MARK);
    const char* user = getenv("OPENBLAS_CORETYPE");
    const char* found = openblas_get_corename();
    const char* why = "";
    const char* better = NULL;
    if (mark && user) {
        snprintf(kernels__blas_reason, sizeof(kernels__blas_reason), "%s", mark);
    } else if (user) {
        snprintf(kernels__blas_reason, sizeof(kernels__blas_reason), "set by OPENBLAS_CORETYPE=%s", user);
    } else if (kernels__blas_generic(found) && (better = kernels__blas_family_for_cpu(&why)) != NULL) {
        char reason[256];
        snprintf(reason, sizeof(reason), "chosen by the trainer:%sreported '%s' for this CPU, which has %s",
                 OPENBLAS_VERSION, found, why); // OPENBLAS_VERSION is " OpenBLAS 0.3.21 "
        setenv("OPENBLAS_CORETYPE", better, 1);
        setenv(KERNELS_BLAS_MARK, reason, 1);
        reexec = 1;
    }
#else
    (void)kernels__blas_family_for_cpu;
    (void)kernels__blas_generic;
#endif
    if (!reexec) { return; }
    execv("/proc/self/exe", argv);
    // re-execution failed: carry on with what the libraries chose, saying so
    if (omp_set) {
        unsetenv("GOMP_SPINCOUNT");
        unsetenv(KERNELS_OMP_MARK);
        snprintf(kernels__omp_note, sizeof(kernels__omp_note), "spin as long as libgomp's default (re-executing with GOMP_SPINCOUNT=%s failed)", KERNELS_OMP_SPIN);
    }
#if defined(USE_BLAS) && defined(OPENBLAS_VERSION)
    if (better) {
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv(KERNELS_BLAS_MARK);
        snprintf(kernels__blas_reason, sizeof(kernels__blas_reason), "generic: OpenBLAS reported '%s'; re-executing with %s failed", found, better);
    }
#endif
}

// ----------------------------------------------------------------------------
// The execution context and element type of the CPU backend (kernels.h). floatX is float in every mode: bf16 and
// fp16 are emulated by rounding each stored floatX value to the type (precision.h), so the numerics are the GPU's
// and the arithmetic is the CPU's fp32. The context owns the per-thread scratch some kernels need (the T x T
// attention matrix, LayerNorm's partial sums), so that no scratch lives in the model's activation table.

typedef float floatX;
#define KERNELS_DEFAULT_DTYPE DTYPE_FP32 // --dtype's default: fp32 (bf16 and fp16 are emulated)
#define KERNELS_CUDNN_ATTENTION 0        // no cuDNN: native attention only (kernels.cuh)
#define KERNELS_LOGITS_CHUNK_BYTES ((size_t)128 << 20) // the LM head's logits chunk (see classifier_chunk_rows)

typedef struct {
    int dtype;          // DTYPE_FP32 / BF16 / FP16: the storage type floatX outputs are rounded to
    int nthreads;
    float* att_scratch; // (nthreads, 2 T T) attention probabilities and their gradient, per thread
    float* ln_scratch;  // (nthreads, 2 C) LayerNorm backward partial sums of dw and db, per thread
    size_t att_per_thread, ln_per_thread;
    const int* dec_pos; // the decoding position, when the ops read it at run time (kernels.h: a captured sampling step)
} KernelCtx;

#include "kernels.h"  // declares: every op below, with the signature both backends share

static size_t kernels__attention_scratch_floats(int T) { return (size_t)2 * T * T; }

// Sets up a context for sequences up to max_T and up to C channels; storage type dtype.
static void kernels_ctx_init(KernelCtx* ctx, int dtype, int max_T, int C) {
    ctx->dtype = dtype;
    ctx->dec_pos = NULL;
    ctx->nthreads = kernels_num_threads();
    ctx->att_per_thread = kernels__attention_scratch_floats(max_T);
    ctx->ln_per_thread = (size_t)2 * C;
    ctx->att_scratch = (float*)alignedMallocCheck(mulSize(mulSize(ctx->att_per_thread, ctx->nthreads), sizeof(float)));
    ctx->ln_scratch = (float*)alignedMallocCheck(mulSize(mulSize(ctx->ln_per_thread, ctx->nthreads), sizeof(float)));
}

// The CPU has one attention implementation (the reference).
static int kernels_set_attention(KernelCtx* ctx, const char* impl) {
    (void)ctx;
    return strcmp(impl, "auto") == 0 || strcmp(impl, "native") == 0 ? 0 : -1;
}

// Every CPU kernel is deterministic: nothing faster to allow.
static int kernels_set_deterministic(KernelCtx* ctx, int on) {
    (void)ctx;
    return on ? 0 : -1;
}

// The CPU's fp32 matmuls (OpenBLAS sgemm) have no TF32 mode.
static int kernels_set_tf32(KernelCtx* ctx, int on) {
    (void)ctx;
    return on ? -1 : 0;
}

// The CPU's matmuls have one algorithm each (OpenBLAS's choice): nothing to time or read.
static int kernels_set_matmul_tune(KernelCtx* ctx, int candidates, const char* algos_path, int write) {
    (void)ctx; (void)write;
    return candidates > 1 || (algos_path && algos_path[0]) ? -1 : 0;
}
static void kernels_matmul_algos_summary(char* buf, size_t cap) { snprintf(buf, cap, "OpenBLAS's own choices"); }

// Forward-only passes run at the length asked for (kernels.h).
static int kernels_forward_len(const KernelCtx* ctx, int t, int t_max) {
    (void)ctx; (void)t_max;
    return t;
}

static void kernels_ctx_free(KernelCtx* ctx) {
    free(ctx->att_scratch);
    free(ctx->ln_scratch);
    ctx->att_scratch = ctx->ln_scratch = NULL;
}

// Bytes of the context's scratch (for the memory table).
static size_t kernels_ctx_bytes(const KernelCtx* ctx) {
    return (ctx->att_per_thread + ctx->ln_per_thread) * ctx->nthreads * sizeof(float);
}

static size_t kernels_scratch_bytes(int max_T, int C, int nthreads) {
    return (kernels__attention_scratch_floats(max_T) + (size_t)2 * C) * (size_t)nthreads * sizeof(float);
}

// The CPU's scratch is sized for max_T and C when the context is made: nothing grows later.
static size_t kernels_reserve(KernelCtx* ctx, const KernelsShapes* s, int alloc) { (void)ctx; (void)s; (void)alloc; return 0; }
static size_t kernels_grown_bytes(const KernelCtx* ctx) { (void)ctx; return 0; }

// The store of n floatX values computed in fp32: round them to the storage type. kernels__store_rows is the
// serial version for a row inside a parallel loop.
static void kernels__store(const KernelCtx* ctx, floatX* x, size_t n) { round_buffer(x, n, ctx->dtype); }
static inline void kernels__store_row(const KernelCtx* ctx, floatX* x, size_t n) {
    if (ctx->dtype == DTYPE_FP32) { return; }
    for (size_t i = 0; i < n; i++) { x[i] = round_dtype(x[i], ctx->dtype); }
}

// ----------------------------------------------------------------------------
// Memory (kernels.h): plain host memory, 64-byte aligned, zeroed in parallel so pages are first touched by the
// threads that use them.

static void kernels__zero_parallel(void* p, size_t bytes) {
    #pragma omp parallel
    {
        int nt = kernels_num_threads(), id = kernels_thread_id();
        size_t lo = bytes * id / nt, hi = bytes * (id + 1) / nt;
        memset((char*)p + lo, 0, hi - lo);
    }
}

static void* dev_alloc(const KernelCtx* ctx, size_t bytes) {
    (void)ctx;
    void* p = alignedMallocCheck(bytes ? bytes : 1);
    kernels__zero_parallel(p, bytes);
    return p;
}
static void dev_free(const KernelCtx* ctx, void* p) { (void)ctx; free(p); }
static void dev_zero(const KernelCtx* ctx, void* p, size_t bytes) { (void)ctx; kernels__zero_parallel(p, bytes); }
static void dev_copy_h2d(const KernelCtx* ctx, void* dst, const void* host_src, size_t bytes) { (void)ctx; memmove(dst, host_src, bytes); }
static void dev_copy_d2h(const KernelCtx* ctx, void* host_dst, const void* src, size_t bytes) { (void)ctx; memmove(host_dst, src, bytes); }
static void dev_copy_d2d(const KernelCtx* ctx, void* dst, const void* src, size_t bytes) { (void)ctx; memmove(dst, src, bytes); }
static void dev_sync(const KernelCtx* ctx) { (void)ctx; }
static void kernels_range_push(const KernelCtx* ctx, const char* name) { (void)ctx; (void)name; }
static void kernels_range_pop(const KernelCtx* ctx) { (void)ctx; }
// No graphs on the CPU: the caller runs the ops (kernels.h).
static int kernels_capture_begin(KernelCtx* ctx) { (void)ctx; return 0; }
static void* kernels_capture_end(KernelCtx* ctx) { (void)ctx; return NULL; }
static void kernels_graph_launch(const KernelCtx* ctx, void* graph) { (void)ctx; (void)graph; fatal("internal: a CUDA graph launched on the CPU"); }
static void kernels_graph_free(const KernelCtx* ctx, void* graph) { (void)ctx; (void)graph; }
static void* dev_host_alloc(const KernelCtx* ctx, size_t bytes) { return dev_alloc(ctx, bytes); }
static void dev_host_free(const KernelCtx* ctx, void* p) { dev_free(ctx, p); }

static void params_from_f32(const KernelCtx* ctx, floatX* dst, const float* host_src, size_t n) {
    if (dst != host_src) { memmove(dst, host_src, n * sizeof(float)); }
    kernels__store(ctx, dst, n);
}
static void params_to_f32(const KernelCtx* ctx, float* host_dst, const floatX* src, size_t n) {
    (void)ctx;
    if (host_dst != src) { memmove(host_dst, src, n * sizeof(float)); }
}

// ----------------------------------------------------------------------------
// GEMM: C (M,N) = alpha * op(A) @ op(B) + beta * C, row-major, op = transpose when the flag is set.
// A is (M,K) or (K,M) when transA; B is (K,N) or (N,K) when transB.

static void kernels__gemm(int transA, int transB, int M, int N, int K, float alpha, const float* A, int lda,
                          const float* B, int ldb, float beta, float* Cm, int ldc) {
#ifdef USE_BLAS
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
#else
    #pragma omp parallel for collapse(2) if ((size_t)M * N * K > 100000)
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                float a = transA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = transB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                acc += a * b;
            }
            float* c = &Cm[(size_t)i * ldc + j];
            *c = alpha * acc + (beta == 0.0f ? 0.0f : beta * *c);
        }
    }
#endif
}

// ----------------------------------------------------------------------------
// exp and tanh that vectorize: libm's expf/tanhf are scalar calls, and GELU plus the softmaxes spent ~10% of a
// GPT-2 step in them. Every branch below is a select the compiler turns into a vector blend, which it may do only
// when evaluating both sides cannot trap: GCC needs -fno-trapping-math for that (the Makefile's FP_FLAGS set it;
// clang assumes it). Without it these loops run one element at a time, and the LM head's softmax took a quarter of the
// default job's step. exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2 / 2, exp(r) by its Taylor polynomial
// to r^7 (truncation error < 2e-8 relative, about 1 ulp overall). Inputs below -87 give exactly 0 (never a
// subnormal: those make every later multiply ~100x slower), above 88 give 88's value, NaN gives NaN. The clamp
// runs before the float-to-int conversion, which is undefined for NaN and out-of-range values.
static inline float kernels__expf(float x) {
    float xc = x >= -87.0f ? (x > 88.0f ? 88.0f : x) : -87.0f; // NaN fails the first test and becomes -87
    float n = floorf(xc * 1.44269504f + 0.5f);
    float r = xc - n * 0.693145752f - n * 1.42860677e-6f; // ln 2 split in two for an exact n * ln2_hi
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f +
              r * (0.00138888892f + r * 0.000198412701f))))));
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    float y = p * scale;
    y = x < -87.0f ? 0.0f : y;
    return x != x ? x : y;
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7, which is what GELU needs (it uses 0.5 (1 + tanh)).
static inline float kernels__tanhf(float u) {
    return 1.0f - 2.0f / (kernels__expf(2.0f * u) + 1.0f);
}

// ----------------------------------------------------------------------------
// encoder: x[b,t,:] = wte[tok[b,t],:] + wpe[t,:]

static void encoder_forward(const KernelCtx* ctx, floatX* out, const int32_t* tok, const floatX* wte, const floatX* wpe,
                            int vocab_lo, int vocab_n, int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* o = out + ((size_t)b * T + t) * C;
            int v = tok[b * T + t] - vocab_lo;
            const float* e = v >= 0 && v < vocab_n ? wte + (size_t)v * C : NULL;
            const float* p = wpe ? wpe + (size_t)(t + (ctx->dec_pos ? *ctx->dec_pos : 0)) * C : NULL;
            for (int i = 0; i < C; i++) { o[i] = e && p ? e[i] + p[i] : e ? e[i] : p ? p[i] : 0.0f; }
            kernels__store_row(ctx, o, C);
        }
    }
}

// dwte[tok - vocab_lo] += dout for tokens of the slice, dwpe[t] += dout. Threads split the channels, so repeated
// tokens never race.
static void encoder_backward(const KernelCtx* ctx, float* dwte, float* dwpe, const floatX* dout, const int32_t* tok,
                             int vocab_lo, int vocab_n, int B, int T, int C) {
    (void)ctx;
    #pragma omp parallel
    {
        int nt = kernels_num_threads(), id = kernels_thread_id();
        int c0 = (int)((long)C * id / nt), c1 = (int)((long)C * (id + 1) / nt);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float* d = dout + ((size_t)b * T + t) * C;
                int v = tok[b * T + t] - vocab_lo;
                if (v >= 0 && v < vocab_n) {
                    float* we = dwte + (size_t)v * C;
                    for (int i = c0; i < c1; i++) { we[i] += d[i]; }
                }
                if (dwpe) {
                    float* pe = dwpe + (size_t)t * C;
                    for (int i = c0; i < c1; i++) { pe[i] += d[i]; }
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// LayerNorm: y = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + 1e-5), over the C channels of each row.

static void kernels__layernorm_row(const KernelCtx* ctx, float* y, float* mean_out, float* rstd_out, const float* x,
                                   const float* w, const float* b, int C) {
    float m = 0.0f;
    for (int i = 0; i < C; i++) { m += x[i]; }
    m /= C;
    float v = 0.0f;
    for (int i = 0; i < C; i++) { float d = x[i] - m; v += d * d; }
    v /= C;
    float s = 1.0f / sqrtf(v + 1e-5f);
    for (int i = 0; i < C; i++) { y[i] = (x[i] - m) * s * w[i] + b[i]; }
    kernels__store_row(ctx, y, C);
    mean_out[0] = m;
    rstd_out[0] = s;
}

static void layernorm_forward(const KernelCtx* ctx, floatX* out, float* mean, float* rstd, const floatX* inp,
                              const floatX* w, const floatX* b, int BT, int C) {
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        kernels__layernorm_row(ctx, out + (size_t)r * C, mean + r, rstd + r, inp + (size_t)r * C, w, b, C);
    }
}

// LayerNorm's output recomputed from the statistics its forward kept (activation recomputation): the same
// arithmetic as kernels__layernorm_row, so the result is the forward's, bit for bit.
static void layernorm_apply(const KernelCtx* ctx, floatX* out, const floatX* inp, const float* mean, const float* rstd,
                            const floatX* w, const floatX* b, int BT, int C) {
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        const float* x = inp + (size_t)r * C;
        float* y = out + (size_t)r * C;
        float m = mean[r], s = rstd[r];
        for (int i = 0; i < C; i++) { y[i] = (x[i] - m) * s * w[i] + b[i]; }
        kernels__store_row(ctx, y, C);
    }
}

// Fused residual + bias + LayerNorm: res_out = res_in + delta + bias (bias may be NULL), stored (rounded), then
// out = LN(res_out) of the stored values, as a GPU kernel normalises what it wrote. res_out may alias res_in.
static void residual_layernorm_forward(const KernelCtx* ctx, floatX* res_out, floatX* out, float* mean, float* rstd,
                                       const floatX* res_in, const floatX* delta, const floatX* bias, const floatX* w,
                                       const floatX* b, int BT, int C) {
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        float* ro = res_out + (size_t)r * C;
        const float* ri = res_in + (size_t)r * C;
        const float* d = delta + (size_t)r * C;
        if (bias) {
            for (int i = 0; i < C; i++) { ro[i] = ri[i] + d[i] + bias[i]; }
        } else {
            for (int i = 0; i < C; i++) { ro[i] = ri[i] + d[i]; }
        }
        kernels__store_row(ctx, ro, C);
        kernels__layernorm_row(ctx, out + (size_t)r * C, mean + r, rstd + r, ro, w, b, C);
    }
}

// Backward of LayerNorm. With n = (x - mean) * rstd and g = dout * w:
//   dx = rstd * (g - mean(g) - n * mean(g * n))        (ACCUMULATES into dinp: the residual stream's gradient)
//   dw (+)= sum_rows dout * n,  db (+)= sum_rows dout   (overwritten when acc is 0)
// Per-thread partial sums of dw and db in the context's scratch, added in thread order (deterministic).
static void layernorm_backward(const KernelCtx* ctx, floatX* dinp, float* dw, float* db, const floatX* dout,
                               const floatX* inp, const floatX* w, const float* mean, const float* rstd, int BT, int C,
                               int acc) {
    int nt = ctx->nthreads;
    float* scratch = ctx->ln_scratch;
    if ((size_t)2 * C > ctx->ln_per_thread || kernels_num_threads() > nt) { fatal("internal: LayerNorm scratch too small"); }
    memset(scratch, 0, sizeof(float) * ctx->ln_per_thread * nt);
    #pragma omp parallel
    {
        float* pdw = scratch + ctx->ln_per_thread * kernels_thread_id();
        float* pdb = pdw + C;
        #pragma omp for
        for (int r = 0; r < BT; r++) {
            const float* x = inp + (size_t)r * C;
            const float* d = dout + (size_t)r * C;
            float* dx = dinp + (size_t)r * C;
            float m = mean[r], s = rstd[r];
            float g_mean = 0.0f, gn_mean = 0.0f;
            for (int i = 0; i < C; i++) {
                float n = (x[i] - m) * s;
                float g = d[i] * w[i];
                g_mean += g;
                gn_mean += g * n;
            }
            g_mean /= C;
            gn_mean /= C;
            for (int i = 0; i < C; i++) {
                float n = (x[i] - m) * s;
                float g = d[i] * w[i];
                dx[i] += s * (g - g_mean - n * gn_mean);
                pdw[i] += d[i] * n;
                pdb[i] += d[i];
            }
            kernels__store_row(ctx, dx, C);
        }
    }
    if (!acc) {
        memset(dw, 0, sizeof(float) * C);
        memset(db, 0, sizeof(float) * C);
    }
    for (int t = 0; t < nt; t++) {
        const float* pdw = scratch + ctx->ln_per_thread * t;
        for (int i = 0; i < C; i++) { dw[i] += pdw[i]; db[i] += pdw[C + i]; }
    }
}

// ----------------------------------------------------------------------------
// Linear layer: out (BT,OC) = inp (BT,C) @ W^T + bias, W is (OC,C) as in PyTorch. bias may be NULL. The bias is
// added to the fp32 product before the one rounding, as a GPU's GEMM epilogue does.

static void matmul_forward(const KernelCtx* ctx, floatX* out, const floatX* inp, const floatX* w, const floatX* bias,
                           int BT, int C, int OC) {
    kernels__gemm(0, 1, BT, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC);
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        float* o = out + (size_t)r * OC;
        if (bias) { for (int j = 0; j < OC; j++) { o[j] += bias[j]; } }
        kernels__store_row(ctx, o, OC);
    }
}

// dinp = dout @ W (overwritten; skipped when dinp is NULL), dW (+)= dout^T @ inp, dbias (+)= sum_rows dout
// (parameter gradients, fp32, overwritten when acc is 0, accumulated when 1).
static void matmul_backward(const KernelCtx* ctx, floatX* dinp, float* dw, float* dbias, const floatX* dout,
                            const floatX* inp, const floatX* w, int BT, int C, int OC, int acc) {
    if (dinp) {
        kernels__gemm(0, 0, BT, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
        kernels__store(ctx, dinp, (size_t)BT * C);
    }
    kernels__gemm(1, 0, OC, C, BT, 1.0f, dout, OC, inp, C, acc ? 1.0f : 0.0f, dw, C);
    if (dbias) {
        // columns split across threads; each thread walks all rows of its 16-column strips
        #pragma omp parallel for
        for (int j0 = 0; j0 < OC; j0 += 16) {
            int j1 = j0 + 16 < OC ? j0 + 16 : OC;
            float sums[16] = {0};
            for (int r = 0; r < BT; r++) {
                const float* d = dout + (size_t)r * OC;
                for (int j = j0; j < j1; j++) { sums[j - j0] += d[j]; }
            }
            for (int j = j0; j < j1; j++) { dbias[j] = (acc ? dbias[j] : 0.0f) + sums[j - j0]; }
        }
    }
}

// ----------------------------------------------------------------------------
// GELU, tanh approximation: y = 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2/pi)

static void gelu_forward(const KernelCtx* ctx, floatX* out, const floatX* inp, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + kernels__tanhf(u));
    }
    kernels__store(ctx, out, n);
}

// dinp = dout * y'(x), with y'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 * 0.044715 x^2).
// dinp may alias dout (in place).
static void gelu_backward(const KernelCtx* ctx, floatX* dinp, const floatX* inp, const floatX* dout, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x);
        float th = kernels__tanhf(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = grad * dout[i];
    }
    kernels__store(ctx, dinp, n);
}

// The MLP's linear layers fused with the GELU between them (kernels.h): on the CPU the plain sequence of ops, so a
// fused and an unfused run are the same bit for bit; a GPU puts the GELU into the matmul's epilogue.
static void matmul_forward_gelu(const KernelCtx* ctx, floatX* pre, floatX* out, const floatX* inp, const floatX* w,
                                const floatX* bias, int BT, int C, int OC) {
    matmul_forward(ctx, pre, inp, w, bias, BT, C, OC);
    gelu_forward(ctx, out, pre, (size_t)BT * OC);
}

static void matmul_backward_gelu(const KernelCtx* ctx, floatX* dinp, float* dw, float* dbias, const floatX* dout,
                                 const floatX* inp, const floatX* w, const floatX* pre, int BT, int C, int OC, int acc) {
    matmul_backward(ctx, dinp, dw, dbias, dout, inp, w, BT, C, OC, acc);
    gelu_backward(ctx, dinp, pre, dinp, (size_t)BT * C);
}

// ----------------------------------------------------------------------------
// Causal self-attention, one (batch, head) at a time, with only a T x T scratch per thread (never B x NH x T x T).
// qkv is (B,T,3C): q, k, v side by side, head h owns channels [h*hs, (h+1)*hs) of each. With scale = 1/sqrt(hs):
//   S = scale * Q K^T (masked j > i),  P = softmax_rows(S),  O = P V,  lse_i = log sum_j exp(S_ij)
// Forward keeps only O (into out, (B,T,C)) and lse (B,NH,T); backward recomputes P from lse:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),  dQ = scale dS K,  dK = scale dS^T Q
// P and dP stay fp32 (a fused GPU kernel keeps them in registers; only O, dQ, dK, dV are stored).

static void kernels__attention_check(const KernelCtx* ctx, int T) {
    if (kernels__attention_scratch_floats(T) > ctx->att_per_thread || kernels_num_threads() > ctx->nthreads) {
        fatal("internal: attention scratch sized for a shorter sequence than T = %d", T);
    }
}

// The queries at positions [q_lo, T) of each sequence against its keys [0, i]: out (B, T - q_lo, C), and lse
// (B, NH, T) at those positions when not NULL. Sequence b's query at position i is the row q + (b (T - q_lo) + i - q_lo)
// qs, its key and value at position j the rows k + (b ld + j) kvs and v + (b ld + j) kvs (columns h hs.. of head h).
// attention_forward is one qkv buffer: q_lo 0, ld T, strides 3C; attention_forward_rows (sampling with a KV cache)
// the new rows' queries against the cache's keys and values (strides 3C and 2C).
static void kernels__attention_rows(const KernelCtx* ctx, floatX* out, float* lse, const floatX* q, size_t qs, const floatX* k,
                                    const floatX* v, size_t kvs, int B, int T, int ld, int q_lo, int C, int NH) {
    kernels__attention_check(ctx, T);
    int hs = C / NH, n = T - q_lo;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float* S = ctx->att_scratch + ctx->att_per_thread * kernels_thread_id(); // (n, T): row r is query q_lo + r
            const float* qb = q + (size_t)b * n * qs + h * hs;
            const float* kb = k + (size_t)b * ld * kvs + h * hs;
            const float* vb = v + (size_t)b * ld * kvs + h * hs;
            kernels__gemm(0, 1, n, T, hs, scale, qb, (int)qs, kb, (int)kvs, 0.0f, S, T);
            float* l = lse ? lse + ((size_t)b * NH + h) * T : NULL;
            for (int i = q_lo; i < T; i++) {
                float* s = S + (size_t)(i - q_lo) * T;
                float m = -INFINITY;
                #pragma omp simd reduction(max : m)
                for (int j = 0; j <= i; j++) { m = s[j] > m ? s[j] : m; }
                float sum = 0.0f;
                #pragma omp simd reduction(+ : sum)
                for (int j = 0; j <= i; j++) { s[j] = kernels__expf(s[j] - m); sum += s[j]; }
                float inv = 1.0f / sum;
                for (int j = 0; j <= i; j++) { s[j] *= inv; }
                for (int j = i + 1; j < T; j++) { s[j] = 0.0f; }
                if (l) { l[i] = m + logf(sum); }
            }
            float* o = out + (size_t)b * n * C + h * hs;
            kernels__gemm(0, 0, n, hs, T, 1.0f, S, T, vb, (int)kvs, 0.0f, o, C);
            for (int r = 0; r < n; r++) { kernels__store_row(ctx, o + (size_t)r * C, hs); }
        }
    }
}

static void attention_forward(const KernelCtx* ctx, floatX* out, float* lse, const floatX* qkv, int B, int T, int C,
                              int NH) {
    kernels__attention_rows(ctx, out, lse, qkv, 3 * (size_t)C, qkv + C, qkv + 2 * C, 3 * (size_t)C, B, T, T, 0, C, NH);
}

static void attention_forward_rows(const KernelCtx* ctx, floatX* out, const floatX* q, const floatX* kv, int B, int T, int ld,
                                   int q_lo, int C, int NH) {
    if (q_lo < 0 || q_lo >= T || T > ld) { fatal("internal: attention_forward_rows of queries [%d, %d) in %d rows", q_lo, T, ld); }
    if (ctx->dec_pos) { T = *ctx->dec_pos + T - q_lo; q_lo = *ctx->dec_pos; } // (the same rows, at the position read now)
    kernels__attention_rows(ctx, out, NULL, q, 3 * (size_t)C, kv, kv + C, 2 * (size_t)C, B, T, ld, q_lo, C, NH);
}

static void kv_cache_write(const KernelCtx* ctx, floatX* kv, const floatX* rows, int S, int B, int n, int pos, int ld,
                           int C) {
    if ((S != 1 && S != B) || pos < 0 || pos + n > ld) { fatal("internal: kv_cache_write of %d x %d rows at %d into %d x %d", S, n, pos, B, ld); }
    if (ctx->dec_pos) { pos = *ctx->dec_pos; }
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < n; t++) {
            memcpy(kv + ((size_t)b * ld + pos + t) * 2 * C, rows + ((size_t)(b % S) * n + t) * 3 * C + C, sizeof(floatX) * 2 * (size_t)C);
        }
    }
}

// dqkv is overwritten. out and lse are the forward's outputs.
static void attention_backward(const KernelCtx* ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                               const floatX* out, const float* lse, int B, int T, int C, int NH) {
    kernels__attention_check(ctx, T);
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float* P = ctx->att_scratch + ctx->att_per_thread * kernels_thread_id();
            float* dP = P + (size_t)T * T;
            size_t base = (size_t)b * T * 3 * C + h * hs;
            const float* q = qkv + base;
            const float* k = q + C;
            const float* v = q + 2 * C;
            float* dq = dqkv + base;
            float* dk = dq + C;
            float* dv = dq + 2 * C;
            const float* o = out + (size_t)b * T * C + h * hs;
            const float* dO = dout + (size_t)b * T * C + h * hs;
            const float* l = lse + ((size_t)b * NH + h) * T;
            // recompute P = exp(S - lse) on the causal triangle
            kernels__gemm(0, 1, T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, P, T);
            for (int i = 0; i < T; i++) {
                float* p = P + (size_t)i * T;
                #pragma omp simd
                for (int j = 0; j <= i; j++) { p[j] = kernels__expf(p[j] - l[i]); }
                for (int j = i + 1; j < T; j++) { p[j] = 0.0f; }
            }
            kernels__gemm(1, 0, T, hs, T, 1.0f, P, T, dO, C, 0.0f, dv, 3 * C);      // dV = P^T dO
            kernels__gemm(0, 1, T, T, hs, 1.0f, dO, C, v, 3 * C, 0.0f, dP, T);      // dP = dO V^T
            for (int i = 0; i < T; i++) {
                const float* oi = o + (size_t)i * C;
                const float* doi = dO + (size_t)i * C;
                float D = 0.0f;
                for (int d = 0; d < hs; d++) { D += oi[d] * doi[d]; }
                float* p = P + (size_t)i * T;
                float* dp = dP + (size_t)i * T;
                for (int j = 0; j <= i; j++) { dp[j] = p[j] * (dp[j] - D); }  // dS
                for (int j = i + 1; j < T; j++) { dp[j] = 0.0f; }
            }
            kernels__gemm(0, 0, T, hs, T, scale, dP, T, k, 3 * C, 0.0f, dq, 3 * C);   // dQ = scale dS K
            kernels__gemm(1, 0, T, hs, T, scale, dP, T, q, 3 * C, 0.0f, dk, 3 * C);   // dK = scale dS^T Q
            for (int i = 0; i < T; i++) {
                kernels__store_row(ctx, dq + (size_t)i * 3 * C, hs);
                kernels__store_row(ctx, dk + (size_t)i * 3 * C, hs);
                kernels__store_row(ctx, dv + (size_t)i * 3 * C, hs);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// Fused LM head + softmax + cross-entropy (+ its backward), chunked over rows so no (BT,Vp) logits buffer lives:
//   logits = x @ wte^T over the real vocabulary V (padded rows V..Vp-1 get no probability mass), stored (rounded),
//   loss_r = logsumexp(logits_r) - logits_r[target_r]   (fp32, from the stored logits),
//   dlogits = dloss_scale * (softmax(logits) - onehot(target)), computed in place in the chunk buffer and stored
//   (rounded), then dx = dlogits @ wte (overwritten) and dwte (+)= dlogits^T @ x (overwritten when acc is 0, every
//   row, the padded rows getting zero).
// With dx == NULL only the losses are computed (evaluation). chunk: rows * Vp floats of scratch.
// targets may hold -1 to mean "no loss at this position" (loss 0, no gradient).

static void kernels__classifier_softmax(const KernelCtx* ctx, float* logits, float* losses, const int32_t* targets,
                                        float dloss_scale, int rows, int V, int Vp, int want_grad) {
    #pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        float* z = logits + (size_t)r * Vp;
        kernels__store_row(ctx, z, Vp);
        int tgt = targets[r];
        float m = -INFINITY;
        #pragma omp simd reduction(max : m)
        for (int j = 0; j < V; j++) { m = z[j] > m ? z[j] : m; }
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (int j = 0; j < V; j++) { sum += kernels__expf(z[j] - m); }
        float lse = m + logf(sum);
        losses[r] = tgt >= 0 ? lse - z[tgt] : 0.0f;
        if (want_grad) {
            float s = tgt >= 0 ? dloss_scale : 0.0f;
            #pragma omp simd
            for (int j = 0; j < V; j++) { z[j] = s * kernels__expf(z[j] - lse); }
            if (tgt >= 0) { z[tgt] -= s; }
            for (int j = V; j < Vp; j++) { z[j] = 0.0f; }
            kernels__store_row(ctx, z, V);
        }
    }
}

static void classifier_forward_backward(const KernelCtx* ctx, float* losses, floatX* dx, float* dwte, floatX* chunk,
                                        int chunk_rows, const floatX* x, const floatX* wte, const int32_t* targets,
                                        float dloss_scale, int BT, int C, int V, int Vp, int acc) {
    for (int r0 = 0; r0 < BT; r0 += chunk_rows) {
        int rows = BT - r0 < chunk_rows ? BT - r0 : chunk_rows;
        const float* xr = x + (size_t)r0 * C;
        kernels__gemm(0, 1, rows, Vp, C, 1.0f, xr, C, wte, C, 0.0f, chunk, Vp);
        kernels__classifier_softmax(ctx, chunk, losses + r0, targets + r0, dloss_scale, rows, V, Vp, dx != NULL);
        if (dx) {
            kernels__gemm(0, 0, rows, C, Vp, 1.0f, chunk, Vp, wte, C, 0.0f, dx + (size_t)r0 * C, C);
            kernels__store(ctx, dx + (size_t)r0 * C, (size_t)rows * C);
            kernels__gemm(1, 0, Vp, C, rows, 1.0f, chunk, Vp, xr, C, (acc || r0 > 0) ? 1.0f : 0.0f, dwte, C);
        }
    }
}

// Vocabulary-parallel cross-entropy (kernels.h): local statistics, then the loss and dlogits from the global ones.
static void classifier_vp_stats(const KernelCtx* ctx, float* stats, const floatX* logits, const int32_t* targets, int rows,
                                int vocab_lo, int Vp_l, int V) {
    (void)ctx;
    int real = V - vocab_lo < Vp_l ? V - vocab_lo : Vp_l; // this rank's columns that are real vocabulary
    #pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        const float* z = logits + (size_t)r * Vp_l;
        float m = -INFINITY, s = 0.0f;
        #pragma omp simd reduction(max : m)
        for (int j = 0; j < real; j++) { m = z[j] > m ? z[j] : m; }
        #pragma omp simd reduction(+ : s)
        for (int j = 0; j < real; j++) { s += kernels__expf(z[j] - m); }
        int t = targets[r] - vocab_lo;
        stats[3 * r] = m;
        stats[3 * r + 1] = real > 0 ? s : 0.0f;
        stats[3 * r + 2] = targets[r] >= 0 && t >= 0 && t < real ? z[t] : 0.0f;
    }
}

static void classifier_vp_apply(const KernelCtx* ctx, float* losses, floatX* logits, const float* stats, const int32_t* targets,
                                float dloss_scale, int rows, int vocab_lo, int Vp_l, int V, int want_grad) {
    int real = V - vocab_lo < Vp_l ? V - vocab_lo : Vp_l;
    if (real < 0) { real = 0; }
    #pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        float M = stats[3 * r], S = stats[3 * r + 1], zt = stats[3 * r + 2];
        int tgt = targets[r];
        losses[r] = tgt >= 0 ? M + logf(S) - zt : 0.0f;
        if (!want_grad) { continue; }
        float* z = logits + (size_t)r * Vp_l;
        float sc = tgt >= 0 ? dloss_scale : 0.0f, inv = 1.0f / S;
        int t = tgt - vocab_lo;
        for (int j = 0; j < real; j++) { z[j] = sc * (kernels__expf(z[j] - M) * inv - (j == t ? 1.0f : 0.0f)); }
        for (int j = real; j < Vp_l; j++) { z[j] = 0.0f; }
        kernels__store_row(ctx, z, Vp_l);
    }
}

// Logits of one row (sampling): out (Vp) = x (C) @ wte^T, rounded as the stored logits are.
static void classifier_logits_rows(const KernelCtx* ctx, float* out, const floatX* x, const floatX* wte, int R, int C, int Vp) {
    kernels__gemm(0, 1, R, Vp, C, 1.0f, x, C, wte, C, 0.0f, out, Vp);
    kernels__store_row(ctx, out, (size_t)R * Vp);
}

// ----------------------------------------------------------------------------
// Reductions

static void sum_accumulate(const KernelCtx* ctx, double* acc, const float* x, size_t n) {
    (void)ctx;
    double s = 0.0;
    for (size_t i = 0; i < n; i++) { s += x[i]; } // serial: the order is fixed, so the sum is reproducible
    *acc += s;
}

// Sum of squares in double (the global gradient norm is the sqrt of the sum over all ranges and ranks).
static void sum_squares_accumulate(const KernelCtx* ctx, double* out, const float* x, size_t n) {
    (void)ctx;
    double acc = 0.0;
    #pragma omp parallel for simd reduction(+ : acc)
    for (size_t i = 0; i < n; i++) { acc += (double)x[i] * x[i]; }
    *out += acc;
}

static void add_inplace(const KernelCtx* ctx, float* y, const float* x, size_t n) {
    (void)ctx;
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) { y[i] += x[i]; }
}

// ----------------------------------------------------------------------------
// AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected moments, on a contiguous range:
//   g = grad_scale * grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
// grad_scale carries the gradient-clipping factor (and 1 / loss scale). The gradient is only read: the next
// step's first micro-step overwrites it (see `acc`), so no pass over memory zeroes it. With master weights p is the
// fp32 master and the compute copy receives its stochastic rounding (precision.h), keyed by (seed, t, flat index);
// without them (--master-weights 0) a 16-bit compute copy receives the stochastic rounding of its own update.

// (Its loop vectorizes only where sqrtf needs no errno: the Makefile's -fno-math-errno. Under GCC's default each
// element branched to check the argument's sign, and the optimizer took 2.5x as long.)
static void kernels__adamw_range(const KernelCtx* ctx, floatX* params, float* master, const float* grads, float* m,
                                 float* v, size_t lo, size_t s, size_t e, float wd, const AdamWHyper* hp) {
    float b1 = hp->beta1, b2 = hp->beta2, lr = hp->lr, eps = hp->eps, gs = hp->grad_scale;
    float bc1 = 1.0f - powf(b1, (float)hp->t);
    float bc2 = 1.0f - powf(b2, (float)hp->t);
    float* p = master ? master : params; // what the update applies to (everything is indexed from lo)
    #pragma omp parallel for simd
    for (size_t i = s; i < e; i++) {
        size_t k = i - lo;
        float g = gs * grads[k];
        float mi = b1 * m[k] + (1.0f - b1) * g;
        float vi = b2 * v[k] + (1.0f - b2) * g * g;
        m[k] = mi;
        v[k] = vi;
        float mhat = mi / bc1;
        float vhat = vi / bc2;
        p[k] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[k]);
    }
    // the 16-bit compute copy: rounded stochastically from the master, or (--master-weights 0) from the update just
    // applied to the copy itself, as llm.c's -w 0 does; fp32 storage has nothing to round
    if (master || ctx->dtype != DTYPE_FP32) {
        #pragma omp parallel for
        for (size_t i = s; i < e; i++) { params[i - lo] = round_stochastic(p[i - lo], ctx->dtype, hp->sr_seed, (uint64_t)hp->t, i); }
    }
}

static void adamw_update(const KernelCtx* ctx, floatX* params, float* master, const float* grads, float* m, float* v,
                         size_t lo, size_t hi, const AdamWSegment* segs, int nseg, const AdamWHyper* hp) {
    for (int i = 0; i < nseg; i++) {
        size_t s = segs[i].offset > lo ? segs[i].offset : lo;
        size_t e = segs[i].offset + segs[i].size < hi ? segs[i].offset + segs[i].size : hi;
        if (s >= e) { continue; }
        kernels__adamw_range(ctx, params, master, grads, m, v, lo, s, e, segs[i].decay ? hp->weight_decay : 0.0f, hp);
    }
}

#endif // KERNELS_CPU_H
