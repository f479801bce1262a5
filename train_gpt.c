/*
train_gpt.c: trains GPT-2 / GPT-3 style models from llm.c token shards, on the CPU (this build) and later on GPUs
(the same file built by nvcc with kernels.cuh). Everything here that is not arithmetic (model layout, parallel
groups, sharding, data, checkpoints, logging) is shared by both backends.

Build and run:
    make train_gpt
    ./train_gpt --help
    ./train_gpt --model d6 --train 'data/tinyshakespeare/tiny_shakespeare_train_*.bin' --val 'data/tinyshakespeare/tiny_shakespeare_val_*.bin'
    mpirun -np 2 ./train_gpt --zero 1 ...          (data parallel; see README)
    ./train_gpt --bench --model d12 --batch-size 4 --seq-len 64
    ./train_gpt --init gpt2/model.safetensors --train ...   (from Hugging Face GPT-2 weights; config.json beside them)
    ./train_gpt --init out/model_00001000.bin --export-hf gpt2-mine   (write a Hugging Face checkpoint, exit)
    ./train_gpt --init gpt2-mine --export-llmc gpt2_mine_bf16.bin --dtype bf16   (an llm.c model file, exit)
    ./train_gpt --init gpt2-mine --generate 3 --prompt "ROMEO:" --temperature 0.8 --top-k 40   (print samples, exit)

Sections: flags, model layout (layout.h: the parameter table, a rank's share under tensor and pipeline parallelism),
model files (model_files.h: llm.c's and the parameter streams; Hugging Face's in hf_gpt2.h), the model in memory
(model.h: activations, parameters, gradients), forward/backward (forward_backward.h; tensor parallel through tp.h),
optimizer step, checkpoints (checkpoint.h), pipeline stages (pipeline.h, pipeline_train.h), the planner (plan.h),
evaluation (evaluate.h) and sampling (sample.h), then here: one training step and the training loop (main).
*/
#include <ctype.h>
#include <signal.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "utils.h"        // defines: fatal, fopenCheck, freadCheck, mallocCheck, mulSize, AtomicFile, Checksum
#if defined(__CUDACC__) || defined(CUDA_EMU) // CUDA_EMU: the same backend on the CPU (tests/cuda_emu)
#include "kernels.cuh"    // the CUDA backend of kernels.h (train_gpt_cu): floatX, KernelCtx, dev_*, every op
#else
#include "kernels_cpu.h"  // the CPU backend of kernels.h: floatX, KernelCtx, dev_*, encoder_*, layernorm_*, matmul_*, ...
#endif
#include "comm.h"         // defines: ParallelContext, CommGroup, parallel_init, comm_allreduce_*, comm_broadcast, ...
#include "zero.h"         // defines: ZeroOptimizer, zero_init, zero_bucket_ready, zero_wait_all, zero_adamw_step (and
                          // through powersgd.h: PowerSgd, powersgd_init, powersgd_spec_rank, powersgd_payload)
#include "tp.h"           // defines: tp_cross_entropy, tp_allreduce_x, tp_allgather_rows_x, tp_reduce_scatter_rows_x
#include "dataloader.h"   // defines: DataLoader, dataloader_init, dataloader_next_batch, dataloader_get/set_state, dataloader_parse_blend
#ifdef USE_ENCODER
#define TOKENIZER_ENCODER         // GPT-2's BPE encoder for --prompt (the Makefile defines USE_ENCODER when it finds PCRE2 and cJSON)
#endif
#include "tokenizer.h"    // defines: Tokenizer, tokenizer_init, tokenizer_decode, tokenizer_free (and Encoder, encoder_encode)
#include "hellaswag.h"    // defines: HellaSwag, hellaswag_load, hellaswag_fill_rows, hellaswag_add_losses, hellaswag_predict
#include "outlier.h"      // defines: OutlierWindow, outlier_init, outlier_push, outlier_get, outlier_set, outlier_skip
// hf_gpt2.h (Hugging Face checkpoints) is included after the model-file section below: it uses the model layout

// ----------------------------------------------------------------------------
// The model layout (the parameter table, one rank's share, the tensor-parallel runs, views, named sizes)
#include "layout.h"       // defines: GPTConfig, ParamEntry, ParamLayout, layout_build_3d, tp_run, views_bind, config_from_name

// ----------------------------------------------------------------------------
// The command line: the configuration, the flag table with llm.c's aliases, --help, parse_flags and its checks
#include "flags.h"        // defines: Config, FLAGS, config_defaults, print_help, parse_flags, config_serialize, flag_named

// ----------------------------------------------------------------------------
// Parameters in and out: initialisation, llm.c model files, parameter streams (the logical one across tp and pp)
#include "model_files.h"  // defines: init_params_stream, model_read_header, model_load_stream, model_save_stream, ShareStream
// Hugging Face GPT-2 checkpoints (safetensors + config.json), in and out: needs the layout and check_finite_tensor
#include "hf_gpt2.h"      // defines: hf_is_checkpoint_path, hf_supported, HfCheckpoint, hf_open, hf_load_params, hf_export

// ----------------------------------------------------------------------------
// The model in memory: activations, parameters, gradients, the views into them, their allocation under every layout
#include "model.h"        // defines: GPT_ACTIVATIONS, Activations, GPT, KvCache, gpt_alloc_params, gpt_alloc_grads, gpt_zero_init, gpt_free

// ----------------------------------------------------------------------------
// The forward and backward passes (tensor parallel inside, data-parallel reductions started as buckets finish)
#include "forward_backward.h" // defines: gpt_forward, gpt_forward_chunk, gpt_backward_chunk, gpt_forward_backward, gpt_lm_head, gpt_eval_loss

// ----------------------------------------------------------------------------
// Learning-rate schedule: linear warmup over `warmup` steps, then cosine / linear decay to lr * final_frac, or
// constant, or wsd (warmup-stable-decay, Hägele et al. 2024, as llm.c has it): constant until 80% of the decay's
// length, then lr_min + (1 - sqrt(r)) (lr - lr_min) with r going from 0 to 1 over the last 20%. The decay's length is
// --lr-decay-steps, or --steps without it; after it the rate stays at lr_min (GPT-3 decays over 260B of its 300B
// tokens). pos is the 0-based step, in steps of --total-batch-size tokens, and share the step's own size in them:
// pos an integer and share 1, except under a batch ramp, whose smaller steps advance pos by their share of a whole
// batch (the schedule runs on tokens, as GPT-3's and Megatron-LM's do). The warmup's rate is that of the position
// after the step (step 0 trains with lr / W, as llm.c), the decay's that of the position before it; a ramp's step that
// straddles the end of the warmup takes the peak. For an integer pos and share 1 every operation is the float one of
// an int step.

static float lr_at(const Config* c, double pos, double share) {
    float lr = c->lr, lr_min = c->lr * c->final_lr_frac;
    int D = c->lr_decay_steps > 0 ? c->lr_decay_steps : c->steps;
    if (pos + share <= c->warmup) { return lr * (float)(pos + share) / c->warmup; }
    if (strcmp(c->lr_schedule, "constant") == 0) { return lr; }
    if (strcmp(c->lr_schedule, "wsd") == 0) {
        int decay_start = (int)(0.8f * D);
        if (pos < decay_start) { return lr; }
        float r = D > decay_start ? (float)(pos - decay_start) / (D - decay_start) : 1.0f;
        if (r > 1.0f) { r = 1.0f; }
        return lr_min + (1.0f - sqrtf(r)) * (lr - lr_min);
    }
    int decay_steps = D - c->warmup;
    float ratio = decay_steps > 0 ? (float)(pos - c->warmup) / decay_steps : 1.0f;
    if (ratio > 1.0f) { ratio = 1.0f; }
    if (ratio < 0.0f) { ratio = 0.0f; } // (a ramp's step across the warmup's end)
    if (strcmp(c->lr_schedule, "linear") == 0) { return lr - (lr - lr_min) * ratio; }
    float coeff = 0.5f * (1.0f + cosf((float)M_PI * ratio));
    return lr_min + coeff * (lr - lr_min);
}

// ----------------------------------------------------------------------------
// Batch-size ramp (--batch-ramp-start S --batch-ramp-tokens R; GPT-3's, with Megatron-LM's --rampup-batch-size rule).
// The run trains on a budget of N = steps x F tokens (F: --total-batch-size). A step's batch depends on the tokens
// trained on before it, c: while c < R it is S (1 + k) with k = floor(c n / R) and n = F/S - 1 increments, so the
// batch grows by S at every R/n tokens, from S to F - S; after R tokens it is F. The last step takes only what is left
// of the budget. Every batch is a multiple of S; train_step splits it into micro-steps of B x T on each rank and one
// of fewer sequences for what is left (ramp_check: whole sequences on every rank). Without a ramp every step is F,
// and the functions below give c = step x F.

// The tokens of the step that starts after `consumed` tokens of the run (0 once the budget is spent).
static int64_t ramp_batch(const Config* c, int64_t consumed) {
    int64_t F = c->total_batch_size, S = c->batch_ramp_start, R = c->batch_ramp_tokens, budget = (int64_t)c->steps * F;
    int64_t b = F;
    if (S > 0 && consumed < R) {
        uint64_t n = (uint64_t)(F / S - 1);
        b = S * (int64_t)(1 + (uint64_t)((unsigned __int128)(uint64_t)consumed * n / (uint64_t)R)); // (c n < 2^64 x 2^20)
    }
    return b < budget - consumed ? b : budget - consumed;
}

// Walks the run's steps from the first, a level of the ramp at a time (at most F/S levels, then the whole batches in
// one): returns the tokens trained on before step `step` (step < 0: by the end of the run) and, in *steps, the steps
// counted (step, or the run's number of steps). With `visit`, calls it with the first step (0-based) and the batch of
// every run of equal batches from step `from` on, the last step's own (what is left of the budget) included.
typedef void (*RampVisit)(void* ctx, int64_t step, int64_t batch);
static int64_t ramp_walk_visit(const Config* c, int64_t step, int64_t* steps, int64_t from, RampVisit visit, void* ctx) {
    int64_t F = c->total_batch_size, S = c->batch_ramp_start, R = c->batch_ramp_tokens, budget = (int64_t)c->steps * F;
    int64_t n_inc = S > 0 ? F / S - 1 : 0, done = 0, n = 0;
    for (int64_t k = 0; k <= n_inc && done < budget; k++) {
        int64_t b = k < n_inc ? S * (k + 1) : F;
        // where level k ends: the fewest tokens c with floor(c n / R) >= k + 1 (the last level ends with the budget)
        int64_t end = k < n_inc ? (int64_t)(((unsigned __int128)(uint64_t)R * (uint64_t)(k + 1) + (uint64_t)n_inc - 1) / (uint64_t)n_inc) : budget;
        if (end > budget) { end = budget; }
        if (done >= end) { continue; } // (a step that overshot its level can skip the next ones)
        int64_t m = (end - done + b - 1) / b; // this level's steps, the last of them crossing `end`
        if (step >= 0 && n + m >= step) { m = step - n; }
        if (visit && n + m > from) {
            visit(ctx, n > from ? n : from, b);
            if (done + m * b > budget) { visit(ctx, n + m - 1, budget - done - (m - 1) * b); }
        }
        done += m * b;
        n += m;
        if (done > budget) { done = budget; } // (the last step took what was left)
        if (step >= 0 && n == step) { break; }
    }
    if (steps) { *steps = n; }
    return done;
}

static int64_t ramp_walk(const Config* c, int64_t step, int64_t* steps) { return ramp_walk_visit(c, step, steps, 0, NULL, NULL); }

// A step of `batch` tokens over dp ranks as micro-steps: *full of B sequences on each rank, then one of *rest
// sequences (0: none) for what is left (a batch ramp's steps; ramp_check makes it whole sequences).
static void micro_steps_of(int64_t batch, int B, int T, int dp, int* full, int* rest) {
    int64_t micro = (int64_t)B * T * dp;
    *full = (int)(batch / micro);
    *rest = (int)(batch % micro / ((int64_t)T * dp));
}

// The row counts, each below B, of the shorter micro-steps that the steps from `from` on end with (a batch ramp's
// batches that are not whole micro-batches on each rank): distinct and ascending in rows[0..n), which has room for B - 1;
// returns n (0 without a ramp). The kernels size their workspaces for these too at start-up (cuDNN's attention plans
// are per row count: kernels_reserve), and the start-up table lists them.
typedef struct {
    int B, T, dp, n;
    int* rows;
} RampRests;

static void ramp_rest_visit(void* ctx, int64_t step, int64_t b) {
    RampRests* r = (RampRests*)ctx;
    (void)step;
    int full, rest;
    micro_steps_of(b, r->B, r->T, r->dp, &full, &rest);
    if (rest == 0) { return; }
    int i = 0;
    while (i < r->n && r->rows[i] < rest) { i++; }
    if (i < r->n && r->rows[i] == rest) { return; }
    memmove(r->rows + i + 1, r->rows + i, sizeof(int) * (size_t)(r->n - i));
    r->rows[i] = rest;
    r->n++;
}

static int ramp_rest_rows(const Config* c, int B, int T, int dp, int from, int* rows) {
    if (c->batch_ramp_start == 0 || c->bench) { return 0; }
    RampRests r = {B, T, dp, 0, rows};
    ramp_walk_visit(c, -1, NULL, from, ramp_rest_visit, &r);
    return r.n;
}

// Step `step`'s learning rate: at the step, or under a batch ramp at the whole batches' worth of tokens trained on
// before it, with the step's share of a whole batch.
static float lr_of_step(const Config* c, int step) {
    if (c->batch_ramp_start == 0) { return lr_at(c, (double)step, 1.0); }
    int64_t before = ramp_walk(c, step, NULL);
    double F = (double)c->total_batch_size;
    return lr_at(c, (double)before / F, (double)ramp_batch(c, before) / F);
}

// ----------------------------------------------------------------------------
// Optimizer step: wait for the gradient reductions, global norm, clipping, sharded AdamW, parameter gather.

typedef struct {
    float grad_norm;   // before clipping (of the unscaled gradient)
    float lr;
} StepStats;

// Waits for the gradient reductions and returns the global norm of the gradients as they are held (the same value
// on every rank; non-finite if any element anywhere is).
static float grad_norm_reduced(GPT* m, ZeroOptimizer* z) {
    kernels_range_push(&m->ctx, "gradient reductions and norm");
    zero_wait_all(z);
    double sumsq = zero_grad_sumsq(z, m->grads, (const size_t(*)[2])m->norm_ranges, m->num_norm_ranges);
    if (m->tp_group) { comm_allreduce_sum_f64(m->tp_group, &sumsq, 1); } // the split tensors' parts, and rank 0's rest
    if (m->pp_group) { comm_allreduce_sum_f64(m->pp_group, &sumsq, 1); } // every stage's tensors
    float norm = (float)sqrt(sumsq);
    kernels_range_pop(&m->ctx);
    return norm;
}

// Clipping and the AdamW update (t: 1-based count of updates, for the bias correction), then the parameter gather.
// norm is the unscaled gradient's; the held gradients are loss_scale times it (1 outside fp16).
static void optimizer_update(GPT* m, ZeroOptimizer* z, const Config* c, float norm, float lr, int t, float loss_scale,
                             uint64_t sr_seed) {
    // clip as torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1
    float clip = 1.0f;
    if (c->grad_clip > 0.0f) {
        float coef = c->grad_clip / (norm + 1e-6f);
        if (coef < 1.0f) { clip = coef; }
    }
    AdamWHyper hp = {lr, c->adam_beta1, c->adam_beta2, c->adam_eps, c->weight_decay, clip / loss_scale, t, sr_seed};
    kernels_range_push(&m->ctx, "AdamW and parameter gather");
    zero_adamw_step(z, m->params, m->grads, &hp);
    z3_invalidate(m); // ZeRO-3: the gathered copies are stale
    kernels_range_pop(&m->ctx);
}

// Both of the above, for a step that is never skipped, without loss scaling (tests).
static StepStats optimizer_step(GPT* m, ZeroOptimizer* z, const Config* c, int step) {
    StepStats st;
    st.grad_norm = grad_norm_reduced(m, z);
    st.lr = lr_at(c, (double)step, 1.0);
    optimizer_update(m, z, c, st.grad_norm, st.lr, step + 1, 1.0f, 0);
    return st;
}

// ----------------------------------------------------------------------------
// Dynamic loss scaling (--dtype fp16), with the semantics of PyTorch's torch.cuda.amp.GradScaler. The loss gradient
// is multiplied by `scale` so that small activation gradients survive fp16 (whose smallest subnormal is 2^-24);
// parameter gradients are fp32 and are divided by it inside AdamW. After each step, with found_inf meaning some
// gradient on some rank is inf or NaN (the global norm is):
//   found_inf:  the update is skipped, scale *= backoff, clean = 0
//   else:       clean += 1; when clean reaches the window, scale *= growth (if that is finite) and clean = 0
// A skipped step does not advance AdamW's update count (its bias correction), while the learning-rate schedule
// follows the step number, as PyTorch's scheduler.step() does when GradScaler skips optimizer.step().

typedef struct {
    float scale;        // the loss scale of the next step (1 when not fp16)
    int clean;          // steps without overflow since the scale last changed (GradScaler's growth tracker)
} LossScale;

static void loss_scale_update(LossScale* ls, const Config* c, int found_inf) {
    if (found_inf) {
        ls->scale *= c->loss_scale_backoff;
        ls->clean = 0;
        return;
    }
    ls->clean++;
    if (ls->clean == c->loss_scale_window) {
        float grown = ls->scale * c->loss_scale_growth;
        if (isfinite(grown)) { ls->scale = grown; }
        ls->clean = 0;
    }
}

// ----------------------------------------------------------------------------
// Checkpoints: save, tidy, load (checkpoint.h, split out by topic; it uses everything above)
#include "checkpoint.h"   // defines: TrainState, checkpoint_save, checkpoint_prune, checkpoint_latest_step, checkpoint_check_files, checkpoint_load_state
#include "llmc_state.h"   // defines: llmc_newest_step, llmc_import
#include "sharedfs.h"     // defines: sharedfs_check_out, sharedfs_fetch_resume, sharedfs_drop_copy, sharedfs_check_data

// ----------------------------------------------------------------------------
// Pipeline parallelism: messages between stages, activation slots, the forward-only pass, the trace
#include "pipeline_train.h" // defines: Pipeline, pipeline_init, pp_send, pp_recv, pp_forward_only, pp_write_trace

// ----------------------------------------------------------------------------
// The per-rank memory of a layout, and the planner that searches layouts with it
#include "plan.h"         // defines: PlanLayout, plan_partition, plan_rank_memory, plan_run

// ----------------------------------------------------------------------------
// Evaluation and sampling

// A forward of (B,T) tokens through the whole model: on this rank, or through every pipeline stage.
static void gpt_forward_any(GPT* m, const int32_t* host_tokens, int B, int T) {
    if (m->pipe) { pp_forward_only(m->pipe, m, host_tokens, B, T); }
    else { gpt_forward(m, host_tokens, B, T); }
}

#include "evaluate.h"     // defines: evaluate, HsResult, evaluate_hellaswag, hellaswag_write_details
#include "sample.h"       // defines: SampleOpts, kv_alloc, kv_free, sample_pick, sample_tokens, generate, encode_prompt

// ----------------------------------------------------------------------------
// Printing

static void fmt_bytes(char* buf, size_t cap, double bytes) {
    if (bytes >= 1e9) { snprintf(buf, cap, "%.2f GB", bytes / 1e9); }
    else { snprintf(buf, cap, "%.1f MB", bytes / 1e6); }
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// FLOPs per token of a training step: 6 per parameter (forward 2, backward 4) plus attention's QK^T and PV,
// 12 * L * C * T (forward and backward, the full T x T as is the custom).
static double flops_per_token(const GPT* m, int T) {
    const GPTConfig* g = &m->cfg;
    return 6.0 * (double)m->glayout.num_params + 12.0 * g->num_layers * (double)g->channels * T;
}

// ----------------------------------------------------------------------------
// main

#ifndef TRAIN_GPT_NO_MAIN

// Fault injection for the failure tests: TRAIN_GPT_FAULT="die:RANK:STEP" kills that rank at the start of that
// step (as a crash would); "hang:RANK:STEP" makes it sleep forever (as a stuck process would); "stop:RANK:STEP"
// stops the whole process (SIGSTOP, as a debugger or a frozen machine would); "gone:RANK:STEP" makes it look gone
// to the monitor while the job goes on (as under a launcher that does not end the job when a process dies; mpirun
// does): its record takes the pid of a child that has exited and is never reaped, and it sleeps forever. STEP -1:
// at start-up, before the NCCL communicators are made (--comm nccl).
static void maybe_inject_fault(const ParallelContext* pc, int step) {
    int rank = pc->world_rank;
    const char* f = getenv("TRAIN_GPT_FAULT");
    if (!f) { return; }
    char kind[16];
    int r, s;
    if (sscanf(f, "%15[a-z]:%d:%d", kind, &r, &s) != 3 || r != rank || s != step) { return; }
    fprintf(stderr, "rank %d: injected fault '%s' at step %d\n", rank, kind, step);
    fflush(stderr);
    if (strcmp(kind, "die") == 0) { raise(SIGKILL); }
    if (strcmp(kind, "hang") == 0) { for (;;) { sleep(1000); } }
    if (strcmp(kind, "stop") == 0) { raise(SIGSTOP); } // every thread stops (the monitor's server too), as kill -STOP
    if (strcmp(kind, "gone") == 0) {
        comm_monitor_pretend_gone(pc); // (without a monitor it just hangs)
        for (;;) { sleep(1000); }
    }
}

// TRAIN_GPT_FAULT="KIND:RANK:STEP[:COUNT]" for KIND nan (that rank's loss and gradients become NaN, as a
// divergence would), overflow (its gradients become inf/NaN and its loss stays finite, as an fp16 overflow
// would), lossspike (the loss it reports is 4 times its own, as a bad batch's would be; its gradients stay) or
// gradspike (its loss gradient is 100 times larger: so are its parameter gradients; its loss stays), in COUNT steps
// (default 1) from STEP on; miscount:RANK:0 (at start-up that rank counts 64 bytes of memory more than it allocated,
// which the check of every rank's memory against the planner's must catch). Several faults are separated by commas. (A pipeline's loss and loss gradient are its
// last stage's: the spikes take effect on a last-stage rank.)
static int fault_injected(const char* kind, int rank, int step) {
    const char* f = getenv("TRAIN_GPT_FAULT");
    for (; f && *f; f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL) {
        char k[16];
        int r, s, count = 1;
        if (sscanf(f, "%15[a-z]:%d:%d:%d", k, &r, &s, &count) < 3 || strcmp(k, kind) != 0) { continue; }
        if (r == rank && step >= s && step < s + count) { return 1; }
    }
    return 0;
}

// TRAIN_GPT_FAULT="drift:RANK:STEP": after that step's update, that rank's copy of the parameters drifts (the first
// element of every tensor it holds is nudged, as silent memory corruption or a kernel that is not deterministic would
// change it), so that the end-of-run checks that the ranks agree (check_ranks_agree) have something to catch: a
// data-parallel rank, a tensor-parallel rank's replicated tensors, a pipeline's first or last stage's copy of the tied
// wte. Not under ZeRO-3, whose ranks hold only their shards (and are not compared).
static void maybe_drift_params(GPT* m, int rank, int step) {
    if (!fault_injected("drift", rank, step) || m->z3) { return; }
    GptStreamTarget t;
    ParamStream s = gpt_stream(m, NULL, &t);
    for (int i = 0; i < m->layout.num_tensors; i++) {
        float v;
        s.get(s.self, m->layout.table[i].offset, &v, 1);
        v = v * 1.0625f + 1e-3f; // (a change that survives rounding to any storage type, zeros included)
        s.put(s.self, m->layout.table[i].offset, &v, 1);
    }
    fprintf(stderr, "rank %d: injected fault 'drift' after step %d\n", rank, step);
    fflush(stderr);
}

// Creates --out (and its parents) if missing and proves it writable, at start rather than at the first checkpoint
// hours in. Rank 0 only.
static void prepare_out_dir(const char* dir) {
    make_dirs("--out", dir);
    char probe[2200];
    snprintf(probe, sizeof(probe), "%s/.write_test.%d", dir, (int)getpid());
    FILE* fp = fopen(probe, "wb");
    if (!fp) { fatal("--out %s: not writable: %s", dir, strerror(errno)); }
    fclose(fp);
    unlink(probe);
}

// llm.c's main.log in --out (rank 0), the file its dev/vislog.ipynb plots. One line per event, steps counted from 0
// as llm.c counts them: "s:N trl:LOSS lr:LR norm:NORM" for training step N (printed here as step N+1),
// "s:N tel:LOSS" for the validation loss before step N, "s:N eval:ACC" for HellaSwag's acc_norm before step N.
// A fresh run starts it empty. A run resumed at step S keeps what the interrupted run wrote up to its checkpoint
// (the training lines of steps before S, the evaluations at S and before) and drops the rest, which would otherwise
// appear twice; llm.c keeps everything and leaves its reader to take the last value of each step.
static int mainlog_keep(const char* line, int resume_step) {
    int s = 0, n = 0;
    char key[8];
    if (sscanf(line, "s:%d %7[a-z]:%n", &s, key, &n) != 2 || n == 0) { return 1; } // not ours to judge: kept
    return strcmp(key, "trl") == 0 ? s < resume_step : s <= resume_step;
}

static FILE* mainlog_open(const char* dir, int resume_step) {
    char path[2100];
    snprintf(path, sizeof(path), "%s/main.log", dir);
    if (resume_step >= 0 && file_exists(path)) {
        FILE* in = fopenCheck(path, "rb");
        AtomicFile af;
        atomic_open(&af, path);
        char line[512];
        while (fgets(line, sizeof(line), in)) {
            if (mainlog_keep(line, resume_step)) { fputs(line, af.fp); }
        }
        fclose(in);
        atomic_commit(&af);
    }
    FILE* fp = fopen(path, resume_step >= 0 ? "a" : "w");
    if (!fp) { fatal("--out %s: cannot open '%s': %s", dir, path, strerror(errno)); }
    return fp;
}

// Checks that every rank of `group` holds the same parameters (they must, after each optimizer step): all of them
// across a data-parallel group; the replicated tensors (LayerNorms, biases after a row-parallel layer, wpe) across a
// tensor-parallel group, whose ranks update them from identical gradients.
static int params_agree(GPT* m, CommGroup* group, int replicated_only) {
    GptStreamTarget t;
    ParamStream s = gpt_stream(m, NULL, &t);
    float* buf = (float*)mallocCheck(PARAM_CHUNK * sizeof(float));
    Checksum c;
    checksum_begin(&c, CHECKSUM_DEFAULT);
    for (int i = 0; i < m->layout.num_tensors; i++) {
        const ParamEntry* e = &m->layout.table[i];
        if (replicated_only && e->tp_split != TP_NONE) { continue; }
        size_t n = e->rows * e->cols;
        for (size_t off = 0; off < n; off += PARAM_CHUNK) {
            size_t cnt = n - off < PARAM_CHUNK ? n - off : PARAM_CHUNK;
            s.get(s.self, e->offset + off, buf, cnt);
            checksum_add(&c, buf, cnt * sizeof(float));
        }
    }
    free(buf);
    uint64_t sum = checksum_end(&c);
    uint64_t root = sum;
    comm_broadcast(group, &root, sizeof(root), 0);
    double bad = root != sum ? 1.0 : 0.0;
    comm_allreduce_max_f64(group, &bad, 1);
    return bad == 0.0;
}

static void check_config_agreement(ParallelContext* pc, const Config* c) {
    char mine[16384], root[16384];
    config_serialize(c, mine, sizeof(mine));
    memcpy(root, mine, sizeof(mine));
    comm_broadcast(&pc->world, root, sizeof(root), 0);
    double bad = strcmp(mine, root) != 0 ? 1.0 : 0.0;
    if (bad) {
        // name the first flag that differs
        char *a = mine, *b = root;
        while (*a && *b) {
            char* ea = strchr(a, '\n');
            char* eb = strchr(b, '\n');
            if (!ea || !eb) { break; }
            *ea = '\0'; *eb = '\0';
            if (strcmp(a, b) != 0) {
                fprintf(stderr, "error: rank %d: configuration differs from rank 0: --%s here, --%s on rank 0\n", pc->world_rank, a, b);
                break;
            }
            a = ea + 1; b = eb + 1;
        }
    }
    comm_allreduce_max_f64(&pc->world, &bad, 1);
    if (bad) {
        if (pc->world_rank == 0) { fprintf(stderr, "error: ranks disagree on the configuration (see above); all ranks must get the same flags\n"); }
        parallel_finalize(pc);
        exit(1);
    }
}

// ----------------------------------------------------------------------------
// The parts of main: the reports (run_report.h), PowerSGD's set-up, one training step

#include "run_report.h"   // defines: rank_memory, print_run_plan, print_powersgd_plan, CommCounts, device_memory, bench_report
#include "run_data.h"     // defines: RunData, run_data_open, run_data_free, run_data_evaluate
#include "run_modes.h"    // defines: ModelSource, model_source_open, model_source_load, run_export, run_plan, run_generate,
                          // run_eval_hellaswag, check_ranks_agree, pipeline_report_end

// --grad-compress powersgd:R: PowerSGD over the data-parallel group on this rank's flat layout (every tensor is
// offered; the matrices that gain are compressed), Q seeded from `seed`; zero.h hands it every final bucket.
static void gpt_powersgd_init(PowerSgd* ps, const GPT* m, ZeroOptimizer* z, int R, uint64_t seed) {
    const ParamLayout* pl = &m->layout;
    PowerSgdTensor* ts = (PowerSgdTensor*)mallocCheck(sizeof(PowerSgdTensor) * (size_t)pl->num_tensors);
    for (int i = 0; i < pl->num_tensors; i++) {
        ts[i].offset = pl->table[i].offset; ts[i].rows = pl->table[i].rows; ts[i].cols = pl->table[i].cols;
    }
    powersgd_init(ps, z->group, R, z->n_pad, ts, pl->num_tensors, seed);
    free(ts);
    zero_set_powersgd(z, ps);
}

// A batch ramp's settings against the layout. Every batch of the ramp is a multiple of its first, which must divide
// the whole batch. A step is micro-steps of B x T on each of the dp ranks, and what is left (a step smaller than one,
// or between two multiples) one micro-step of fewer rows: so every batch the run will take must be whole sequences on
// every rank, a multiple of T x dp. Through a pipeline (whose slots and messages are B rows) and in llm.c's data
// order (defined by B) every micro-step is B rows, so there it must be a multiple of B x T x dp, and a pipeline's
// schedule must take that many micro-batches (ramp_step_fits, in plan.h: the planner asks it too). The batches checked
// are those from step `from` on (ramp_walk_visit): a resume on another layout, elastic restarts among them, needs
// only the rest of the run to fit.
typedef struct {
    const Config* c;
    int B, T, dp, pp_kind, L;
} RampFit;

static void ramp_fits(void* ctx, int64_t step, int64_t b) {
    const RampFit* f = (const RampFit*)ctx;
    const Config* c = f->c;
    char who[160], err[600];
    int n = snprintf(who, sizeof(who), "--batch-ramp-start %ld", c->batch_ramp_start);
    if (step > 0) { snprintf(who + n, sizeof(who) - n, " (step %lld of the run takes %lld tokens)", (long long)step + 1, (long long)b); }
    if (!ramp_step_fits(c, who, b, f->B, f->T, f->dp, c->pp, f->pp_kind, c->virtual_stages, f->L, err, sizeof(err))) { fatal("%s", err); }
}

static void ramp_check(const Config* c, int B, int T, int dp, int pp_kind, int L, int from) {
    if (c->batch_ramp_start == 0) { return; }
    if (c->batch_ramp_start >= c->total_batch_size || c->total_batch_size % c->batch_ramp_start != 0) {
        fatal("--batch-ramp-start %ld must divide --total-batch-size %ld and be smaller: the batch grows by it, step by step, to the whole batch",
              c->batch_ramp_start, c->total_batch_size);
    }
    RampFit f = {c, B, T, dp, pp_kind, L};
    ramp_walk_visit(c, -1, NULL, from, ramp_fits, &f);
}

// One optimizer step: grad_accum micro-steps of forward and backward (reductions started as buckets finish), the
// gradient norm, the decision (update; skip for the fp16 loss scaler; --nan-policy; the outlier guard), the update.
// Returns what the step prints and logs.
typedef struct {
    StepStats stats;
    float loss;              // mean over all ranks' tokens
    int finite;              // 0: the step was skipped (overflow under fp16 loss scaling, or --nan-policy skip)
    int overflow;            // fp16: skipped because a gradient was inf/NaN (the loss scale was halved)
    double z_loss, z_norm;   // the z-scores of the loss and the gradient norm (outlier.h; NaN while undefined)
    const char* outlier;     // finite, but skipped by the outlier guard: "loss" or "grad_norm" (NULL otherwise)
    float loss_scale;        // fp16: the scale this step ran with
    double seconds, forward_seconds, backward_seconds;
    double wait_seconds;     // blocked in waits for gradient reductions
} StepResult;

// The forwards and backwards of one optimizer step on a pipeline stage: the rank's schedule over the step's M
// micro-batches (every stage reads all of them: the first needs the inputs, the last the targets), each forward in a
// free activation slot, each backward in its forward's slot; messages to and from the neighbouring stages; then the
// tied wte's two gradients summed and the embedding bucket reduced. tf, tb: seconds of forward and backward compute.
static void pipeline_micro_steps(GPT* m, BackwardComm* bc, const Config* c, ParallelContext* pc, DataLoader* loader,
                                 const int32_t* bench_tokens, int M, float dloss_scale, double* tf, double* tb) {
    Pipeline* p = m->pipe;
    int B = c->batch_size, T = c->seq_len, BT = B * T;
    pipeline_set_micro_batches(p, M);
    for (int mb = 0; mb < M; mb++) {
        const int32_t* x = bench_tokens;
        const int32_t* y = bench_tokens ? bench_tokens + 1 : NULL;
        if (!bench_tokens) { dataloader_next_batch(loader); x = loader->inputs; y = loader->targets; }
        memcpy(p->inputs + (size_t)mb * BT, x, sizeof(int32_t) * BT);
        memcpy(p->targets + (size_t)mb * BT, y, sizeof(int32_t) * BT);
    }
    int reduces = c->zero >= 1 || pc->dp > 1;
    double t_start = now_seconds(), busy = 0.0;
    for (int i = 0; i < p->nops; i++) {
        PpOp o = p->ops[i];
        int g = o.v * p->pp + p->rank, key = o.v * M + o.mb;
        if (o.fwd) {
            int slot = p->free_slots[--p->nfree];
            p->slot_of[key] = slot;
            m->acts = activations_slot(&m->acts0, slot);
            m->B = B; m->T = T;
            if (g > 0) { pp_recv(p, m, m->acts.encoded, pp_msg_bytes(m), (g - 1) % p->pp, PP_TAG_ACT, g, o.mb); }
            pp_post_next(p, m, i);
            double t0 = now_seconds();
            gpt_forward_chunk(m, g, p->inputs + (size_t)o.mb * BT, B, T);
            double t1 = now_seconds();
            busy += t1 - t0; *tf += t1 - t0;
            pp_span(p, "forward", g, o.mb, t0, t1);
            if (g < p->G - 1) { pp_send(p, m, pp_chunk_output(m), pp_msg_bytes(m), (g + 1) % p->pp, PP_TAG_ACT); }
        } else {
            int slot = p->slot_of[key];
            m->acts = activations_slot(&m->acts0, slot);
            m->B = B; m->T = T;
            if (g < p->G - 1) { pp_recv(p, m, m->acts.dres, pp_msg_bytes(m), (g + 1) % p->pp, PP_TAG_GRAD, g, o.mb); }
            pp_post_next(p, m, i);
            bc->first_micro = o.mb == 0;
            bc->last_micro = o.mb == M - 1;
            bc->reduce = reduces && zero_reduces_on(bc->z, o.mb == M - 1);
            double t0 = now_seconds();
            gpt_backward_chunk(m, g, p->targets + (size_t)o.mb * BT, dloss_scale, bc);
            double t1 = now_seconds();
            busy += t1 - t0; *tb += t1 - t0;
            pp_span(p, "backward", g, o.mb, t0, t1);
            if (g > 0) { pp_send(p, m, m->acts.dres, pp_msg_bytes(m), (g - 1) % p->pp, PP_TAG_GRAD); }
            p->slot_of[key] = -1;
            p->free_slots[p->nfree++] = slot;
        }
    }
    pp_wait_sends(p);
    p->busy_seconds += busy;
    p->step_seconds += now_seconds() - t_start;
    pp_sum_tied_wte(p, m);
    if (m->layout.embed_size > 0) {
        bc->first_micro = 1; // (stage 2: the whole step's embedding gradient, reduced once: it overwrites the shard)
        bc->reduce = reduces;
        grad_bucket_release(m, bc, 0);
    }
    m->acts = activations_slot(&m->acts0, 0);
}

// batch: this step's tokens over all ranks: micro-steps of B x T on each rank, and under a batch ramp one more of
// fewer rows for what is left (micro_steps_of); lr: the step's learning rate (lr_of_step).
static StepResult train_step(GPT* mp, ZeroOptimizer* zp, BackwardComm* bcp, const Config* cp, ParallelContext* pcp,
                             TrainState* tsp, DataLoader* train_loader, const int32_t* bench_tokens, int64_t batch, int step, float lr) {
    StepResult r;
    int B = cp->batch_size, T = cp->seq_len, fp16 = mp->ctx.dtype == DTYPE_FP16;
    int full, rest;
    micro_steps_of(batch, B, T, pcp->dp, &full, &rest);
    int grad_accum = full + (rest > 0);
    double t0 = now_seconds();
    double wait0 = zp->wait_seconds;
    double tb = 0.0, tf = 0.0;
    float scale = fp16 ? tsp->loss_scale.scale : 1.0f;
    float dloss_scale = scale / (float)(double)batch; // (the mean over the step's tokens on all ranks)
    int poison = fault_injected("nan", pcp->world_rank, step);
    if (poison) { dloss_scale = NAN; }
    if (fault_injected("overflow", pcp->world_rank, step)) { dloss_scale = INFINITY; } // gradients overflow, loss fine
    if (fault_injected("gradspike", pcp->world_rank, step)) { dloss_scale *= 100.0f; }
    gpt_clear_loss_sum(mp);
    if (mp->pipe) { pipeline_micro_steps(mp, bcp, cp, pcp, train_loader, cp->bench ? bench_tokens : NULL, grad_accum, dloss_scale, &tf, &tb); }
    else {
        for (int micro_i = 0; micro_i < grad_accum; micro_i++) {
            const int32_t* x;
            const int32_t* y;
            if (cp->bench) { x = bench_tokens; y = bench_tokens + 1; }
            else { dataloader_next_rows(train_loader, micro_i < full ? B : rest); x = train_loader->inputs; y = train_loader->targets; }
            double tf0 = now_seconds();
            gpt_forward(mp, x, micro_i < full ? B : rest, T);
            tf += now_seconds() - tf0;
            bcp->first_micro = micro_i == 0;
            bcp->last_micro = micro_i == grad_accum - 1;
            bcp->reduce = (cp->zero >= 1 || pcp->dp > 1) && zero_reduces_on(zp, micro_i == grad_accum - 1);
            double tb0 = now_seconds();
            gpt_forward_backward(mp, y, dloss_scale, bcp);
            tb += now_seconds() - tb0;
        }
    }
    // the mean loss and the gradient norm are the same on every rank (a NaN or inf anywhere reaches all of them
    // through the reductions), so every rank takes the same decision below
    double loss_sum = gpt_take_loss_sum(mp) / (double)(batch / pcp->dp);
    if (poison) { loss_sum = NAN; }
    if (fault_injected("lossspike", pcp->world_rank, step)) { loss_sum *= 4.0; }
    if (mp->pp_group) { comm_allreduce_sum_f64(mp->pp_group, &loss_sum, 1); } // the last stage's (a NaN anywhere too)
    StepStats st;
    st.grad_norm = grad_norm_reduced(mp, zp) / scale;
    st.lr = lr;
    comm_allreduce_sum_f64(&pcp->dp_group, &loss_sum, 1);
    float mean_loss = (float)(loss_sum / pcp->dp);
    int loss_ok = isfinite(mean_loss), grads_ok = isfinite(st.grad_norm);
    // fp16: inf/NaN gradients with a finite loss are the loss scaler's business (too large a scale), not divergence
    int overflow = fp16 && loss_ok && !grads_ok;
    // the outlier guard's windows take every finite value (a skipped update's too); the same on every rank
    r.z_loss = outlier_push(&tsp->loss_w, mean_loss);
    r.z_norm = outlier_push(&tsp->norm_w, st.grad_norm);
    r.outlier = NULL;
    if (!loss_ok || (!grads_ok && !fp16)) {
        if (strcmp(cp->nan_policy, "stop") == 0) {
            fatal("step %d: the %s is not finite (loss %g, gradient norm %g): stopping before the update (--nan-policy stop); "
                  "no checkpoint of this state is written%s%s", step + 1, loss_ok ? "gradient norm" : "loss",
                  mean_loss, st.grad_norm, cp->out[0] ? ", the last one in " : "", cp->out);
        }
        tsp->skipped_in_a_row++;
    } else if (!overflow && !outlier_skip(r.z_loss, r.z_norm, cp->skip_loss_z, cp->skip_grad_z, &r.outlier)) {
        double to = now_seconds();
        optimizer_update(mp, zp, cp, st.grad_norm, st.lr, tsp->adam_t + 1, scale, tsp->sr_seed);
        if (mp->pipe) { pp_span(mp->pipe, "optimizer", -1, -1, to, now_seconds()); }
        tsp->adam_t++;
        tsp->skipped_in_a_row = 0;
    }
    if (fp16) { loss_scale_update(&tsp->loss_scale, cp, !(loss_ok && grads_ok)); }
    if (mp->pipe) { mp->pipe->step++; }
    double dt = now_seconds() - t0;
    r.stats = st;
    r.loss = mean_loss;
    r.finite = loss_ok && grads_ok;
    r.overflow = overflow;
    r.loss_scale = scale;
    r.seconds = dt;
    r.forward_seconds = tf;
    r.backward_seconds = tb;
    r.wait_seconds = zp->wait_seconds - wait0;
    return r;
}

// What rank 0 prints and logs of a training step: the step's line (with llm.c's z-scores of the outlier guard and the
// reason of a skip), the JSON log's line (--log) and llm.c's main.log line.
typedef struct {
    int step, steps;          // the 0-based step, and the run's steps
    const StepResult* sr;
    double seconds, eta;      // the step's time, the run's time left
    int64_t batch, tokens;    // the step's tokens, and the run's through it (printed and logged under a batch ramp)
    int ramp, guard, fp16;    // a batch ramp, the outlier guard, the fp16 loss scaler
    double flops_per_token;
} StepReport;

static void report_step(const Config* c, const StepReport* r, FILE* logf, FILE* mainlog) {
    const StepResult* sr = r->sr;
    const StepStats* st = &sr->stats;
    double tok_s = r->batch / r->seconds;
    char scale_note[64] = "", z_note[160] = "";
    if (r->fp16) { snprintf(scale_note, sizeof(scale_note), " | scale %g", sr->loss_scale); }
    if (r->guard) {
        // llm.c's "(+1.23z)" after the loss and the norm; "-" while the window fills
        char zl[16] = "-", zn[16] = "-";
        if (isfinite(sr->z_loss)) { snprintf(zl, sizeof(zl), "%+.2f", sr->z_loss); }
        if (isfinite(sr->z_norm)) { snprintf(zn, sizeof(zn), "%+.2f", sr->z_norm); }
        snprintf(z_note, sizeof(z_note), " | z loss %s norm %s", zl, zn);
        if (sr->outlier) {
            int by_loss = strcmp(sr->outlier, "loss") == 0;
            snprintf(z_note + strlen(z_note), sizeof(z_note) - strlen(z_note), " | skipped: %s z-score above --%s %g",
                     by_loss ? "loss" : "gradient norm", by_loss ? "skip-loss-z" : "skip-grad-z", by_loss ? c->skip_loss_z : c->skip_grad_z);
        }
    }
    char ramp_note[48] = "";
    if (r->ramp) { snprintf(ramp_note, sizeof(ramp_note), " | batch %lld", (long long)r->batch); }
    printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e%s | %.1f ms | %.0f tok/s | %.1f GFLOP/s | eta %dm%02ds%s%s%s\n",
           r->step + 1, r->steps, sr->loss, st->grad_norm, st->lr, ramp_note, r->seconds * 1e3, tok_s, tok_s * r->flops_per_token / 1e9,
           (int)r->eta / 60, (int)r->eta % 60, scale_note, z_note,
           sr->finite ? "" : sr->overflow ? " | skipped: gradient overflow, loss scale halved" : " | skipped: not finite (--nan-policy skip)");
    fflush(stdout);
    if (logf) {
        // JSON has no NaN: a skipped step logs null for what was not finite
        char lv[32] = "null", nv[32] = "null";
        if (isfinite(sr->loss)) { snprintf(lv, sizeof(lv), "%.9g", sr->loss); }
        if (isfinite(st->grad_norm)) { snprintf(nv, sizeof(nv), "%.9g", st->grad_norm); }
        char sc[120] = "", zj[128] = "";
        if (r->fp16) { snprintf(sc, sizeof(sc), ", \"loss_scale\": %.9g", sr->loss_scale); }
        if (r->ramp) { // (the batch's tokens, and the run's through this step)
            snprintf(sc + strlen(sc), sizeof(sc) - strlen(sc), ", \"batch_tokens\": %lld, \"tokens\": %lld", (long long)r->batch, (long long)r->tokens);
        }
        if (r->guard) {
            char zl[32] = "null", zn[32] = "null";
            if (isfinite(sr->z_loss)) { snprintf(zl, sizeof(zl), "%.9g", sr->z_loss); }
            if (isfinite(sr->z_norm)) { snprintf(zn, sizeof(zn), "%.9g", sr->z_norm); }
            snprintf(zj, sizeof(zj), ", \"loss_z\": %s, \"grad_norm_z\": %s", zl, zn);
            if (sr->outlier) { snprintf(zj + strlen(zj), sizeof(zj) - strlen(zj), ", \"skipped\": true, \"outlier\": \"%s\"", sr->outlier); }
        }
        fprintf(logf, "{\"step\": %d, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, \"ms\": %.3f, \"tokens_per_s\": %.1f%s%s%s}\n",
                r->step + 1, lv, st->lr, nv, r->seconds * 1e3, tok_s, sc, zj, sr->finite ? "" : ", \"skipped\": true");
        fflush(logf);
    }
    if (mainlog) { fprintf(mainlog, "s:%d trl:%.4f lr:%.6f norm:%.2f\n", r->step, sr->loss, st->lr, st->grad_norm); fflush(mainlog); }
}

// ----------------------------------------------------------------------------
// The training loop, from the state's step to the run's last: at each step the evaluation, the sample and the
// checkpoint their intervals call for, then one optimizer step (train_step) and its report; at the end the measured
// gradient traffic, the benchmark's figures or the ranks' agreement, and the run's memory.

typedef struct {
    const Config* c;
    ParallelContext* pc;
    GPT* m;
    ZeroOptimizer* z;
    TrainState* ts;         // the step to start from, the sampling RNG, the loss scale; advanced step by step
    RunData* data;          // the training stream, and what evaluates
    const SampleSource* ss; // the samples' decoder, <|endoftext|> and prompt
    const SampleOpts* so;
    FILE* logf;             // --log's JSON lines, llm.c's main.log: rank 0's, or NULL
    FILE* mainlog;
    int resumed;            // the state came from a checkpoint, whose step's evaluation and sample were done
} TrainLoop;

static void train_loop(const TrainLoop* L) {
    const Config* c = L->c;
    ParallelContext* pc = L->pc;
    GPT* m = L->m;
    ZeroOptimizer* z = L->z;
    TrainState* ts = L->ts;
    RunData* data = L->data;
    const SampleSource* ss = L->ss;
    const SampleOpts* so = L->so;
    FILE *logf = L->logf, *mainlog = L->mainlog;
    int master = pc->world_rank == 0, resumed = L->resumed;
    int B = c->batch_size, T = c->seq_len;
    BackwardComm bc;
    bc.z = z;
    int32_t* bench_tokens = NULL;
    int steps = c->steps;
    if (c->bench) {
        steps = c->bench_steps + 1; // the first step warms up and is not timed
        bench_tokens = (int32_t*)mallocCheck(sizeof(int32_t) * (B * T + 1));
        uint64_t s = 42 + pc->dp_rank;
        for (int i = 0; i <= B * T; i++) { bench_tokens[i] = (int32_t)(rng_next(&s) % m->cfg.vocab_size); }
    } else {
        // the run's steps: --steps, or more under a batch ramp, whose first steps are smaller (ramp_walk)
        int64_t n;
        ramp_walk(c, -1, &n);
        if (n > 1000000000) { fatal("--batch-ramp-start %ld: the run would take %lld steps, above the limit 1e9", c->batch_ramp_start, (long long)n); }
        steps = (int)n;
    }
    int ramp = c->batch_ramp_start > 0 && !c->bench;
    int64_t budget = (int64_t)c->steps * c->total_batch_size;
    double fpt = flops_per_token(m, T);
    double t_train = 0.0, t_bench = 0.0, t_backward = 0.0, t_forward = 0.0, wait_bench = 0.0;
    int timed_steps = 0;
    CommCounts comm0;
    memset(&comm0, 0, sizeof(comm0));
    int start_step = ts->step;
    int64_t consumed = c->bench ? 0 : ramp_walk(c, start_step, NULL), consumed0 = consumed; // tokens trained on before a step
    int guard = c->skip_loss_z > 0.0f || c->skip_grad_z > 0.0f; // the outlier guard (outlier.h) is on
    for (int step = start_step; step <= steps; step++) {
        int last = step == steps;
        // a resumed run starts where the checkpoint was written: the evaluation and the sample of that step were
        // done (and the sample's RNG draws recorded) before the checkpoint, so they are not repeated
        int again = resumed && step == start_step;
        if (!again) { run_data_evaluate(data, m, pc, c, step, last, logf, mainlog); } // (--val-every, --hellaswag-every)
        // (every rank of data-parallel rank 0's tensor-parallel group: their forwards are collective; rank 0 prints;
        // under ZeRO-3 every rank, since the forward gathers the parameters from all data-parallel ranks)
        if ((pc->dp_rank == 0 || m->z3) && c->sample_every > 0 && step > start_step && (step % c->sample_every == 0 || last) && !c->bench) {
            (void)generate(m, ss->tok, ss->have_tok, ss->eot, ss->prompt, ss->n_prompt, c->gen_tokens, T, 1, 1, &ts->rng, master, so, "sample: ", NULL);
        }
        if (c->out[0] && c->checkpoint_every > 0 && step > start_step && (step % c->checkpoint_every == 0 || last) && !c->bench) {
            TrainState cur = *ts;
            cur.step = step;
            if (data->have_train) { dataloader_get_state(&data->train, cur.data_state); }
            checkpoint_save(c->out, m, z, &cur, pc, c, data->have_train ? &data->train : NULL);
        }
        if (last) { break; }
        maybe_inject_fault(pc, step);
        if (c->bench && step == start_step + 1) { comm_counts_take(&comm0, pc); z->gather_seconds = 0.0; } // the timed steps begin
        if (c->overfit_batch && data->have_train) { dataloader_reset(&data->train); } // --overfit-batch: the same batches again

        // this step's batch (the whole one, or a batch ramp's), and where the learning-rate schedule is
        int64_t batch = c->bench ? c->total_batch_size : ramp_batch(c, consumed);
        StepResult sr = train_step(m, z, &bc, c, pc, ts, data->have_train ? &data->train : NULL, bench_tokens,
                                   batch, step, lr_of_step(c, step));
        maybe_drift_params(m, pc->world_rank, step);
        consumed += batch;
        double dt = sr.seconds;
        t_train += dt;
        if (c->bench && step > 0) {
            t_bench += dt; t_backward += sr.backward_seconds; t_forward += sr.forward_seconds; wait_bench += sr.wait_seconds;
            timed_steps++;
        }
        ts->step = step + 1;
        if (master) {
            int done = step + 1 - start_step;
            double eta = done > 0 ? t_train / done * (steps - step - 1) : 0.0;
            if (ramp) { eta = t_train / (double)(consumed - consumed0) * (double)(budget - consumed); } // (the steps grow)
            StepReport rep = {step, steps, &sr, dt, eta, batch, consumed, ramp, guard, m->ctx.dtype == DTYPE_FP16, fpt};
            report_step(c, &rep, logf, mainlog);
            if (step == start_step && (c->matmul_tune > 1 || c->matmul_algos[0])) { // (every shape has met its first call)
                char mm[512];
                kernels_matmul_algos_summary(mm, sizeof(mm));
                printf("matmul algorithms: %s\n", mm);
                fflush(stdout);
            }
        }
        if (ts->skipped_in_a_row >= c->max_skipped_steps) {
            fatal("step %d: %d steps in a row had a non-finite loss or gradient norm (--max-skipped-steps %d): training diverged",
                  step + 1, ts->skipped_in_a_row, c->max_skipped_steps);
        }
    }

    if (master && z->grad_bytes_fp32 > 0 && steps > start_step) {
        // measured: what this rank sent for the gradient reductions, per step, against plain fp32 reductions
        double k = steps - start_step;
        char sb[32], fb[32];
        fmt_bytes(sb, sizeof(sb), z->grad_bytes / k);
        fmt_bytes(fb, sizeof(fb), z->grad_bytes_fp32 / k);
        printf("gradient bytes per step: %s sent per rank (uncompressed %s, ratio %.4f; --grad-compress %s) [%.0f of %.0f bytes]\n",
               sb, fb, z->grad_bytes / z->grad_bytes_fp32, c->grad_compress, z->grad_bytes / k, z->grad_bytes_fp32 / k);
    }
    if (c->bench) {
        bench_report(c, m, z, pc, t_bench, t_forward, t_backward, wait_bench, timed_steps, &comm0);
    } else {
        check_ranks_agree(m, pc, c->zero); // (every group's verdict, gathered over the world)
    }
    if (m->pipe) { pipeline_report_end(m->pipe, pc, c->trace); } // (the measured bubble)
    if (!c->bench) {
        DeviceMemory dm;
        int have_dm = device_memory(m, z, pc, &dm);
        if (master) {
            char rs[32], dmt[320], gm[330] = "";
            fmt_bytes(rs, sizeof(rs), (double)peak_rss_kb() * 1024.0);
            if (have_dm) {
                device_memory_text(dmt, sizeof(dmt), &dm, pc->world_size);
                snprintf(gm, sizeof(gm), "; %s", dmt);
            }
            printf("done: %d steps, peak RSS %s%s\n", steps, rs, gm);
        }
    }
    free(bench_tokens);
}

int main(int argc, char** argv) {
    kernels_runtime_select(argv); // first: may re-execute the program (OpenMP's spin count, better OpenBLAS kernels)
    ParallelContext pc;
    parallel_init(&pc, &argc, &argv);
    Config c;
    config_defaults(&c);
    // until the run's big allocations every rank checks the same flags, model and data: an error there is printed
    // once, by rank 0, not once per rank (utils.h)
    utils_fatal_alike_rank = pc.world_rank;
    parse_flags(&c, argc, argv);
    utils_fatal_alike_wait_s = fmin(utils_fatal_alike_wait_s, 0.5 * c.comm_timeout);
    parallel_set_layout(&pc, c.tp, c.pp, c.comm_timeout); // a world that does not divide by tp x pp ends here, one message
    int master = pc.world_rank == 0;
#ifdef _OPENMP
    if (c.threads > 0) { omp_set_num_threads(c.threads); }
#endif
    kernels_init_fp_mode();
    check_config_agreement(&pc, &c);
    if (master && g_flag_notes[0]) { printf("%s", g_flag_notes); }
    if (c.auto_resume) {
        // rank 0 looks (ranks on other machines may not see --out), and every rank follows it
        char lp[2048];
        snprintf(lp, sizeof(lp), "%s/latest", c.out);
        double found = master && (file_exists(lp) || llmc_newest_step(c.out) >= 0); // ours, or an llm.c run's
        comm_allreduce_max_f64(&pc.world, &found, 1);
        if (found) { snprintf(c.resume, sizeof(c.resume), "%s", c.out); }
        if (master) { printf("auto-resume: %s\n", found ? "continuing from the newest checkpoint in --out" : "no checkpoint in --out yet: starting fresh"); }
    }
    if (c.resume[0]) {
        // an llm.c run's directory (DONE_XXXXXXXX beside its per-process state files, and no `latest` of ours or one
        // older than llm.c's newest): rank 0 converts that checkpoint into ours in place, and the resume below reads
        // it (llmc_state.h)
        double llmc_step = master ? llmc_step_to_import(c.resume) : -1;
        comm_allreduce_max_f64(&pc.world, &llmc_step, 1);
        if (llmc_step >= 0) {
            if (master) {
                TrainState fresh;
                train_state_fresh(&fresh, &c, 1.0f);
                llmc_import(c.resume, (int)llmc_step, &fresh);
            }
            comm_barrier(&pc.world);
        }
    }
#ifdef KERNELS_CUDA
    if (strcmp(c.comm, "nccl") == 0) {
        if (!comm_nccl_available()) { fatal("--comm nccl: this build has no NCCL (make found none; --comm mpi stages device buffers through pinned host memory)"); }
    }
#else
    if (strcmp(c.comm, "nccl") == 0) { fatal("--comm nccl: GPU builds only (this is the CPU trainer)"); }
#endif

    // model configuration: from the checkpoint, an --init file, or a name
    GPTConfig gc;
    int resume_step = -1;
    // (ranks on hosts that do not see the checkpoint get a local copy of it from rank 0 first: sharedfs.h)
    char resume_scratch[2100] = {0};
    const char* resume_dir = c.resume[0] ? sharedfs_fetch_resume(&pc, c.resume, resume_scratch, sizeof(resume_scratch)) : c.resume;
    if (c.resume[0]) { resume_step = checkpoint_latest_step(resume_dir); }
    ModelSource src;
    model_source_open(&src, &c, resume_dir, resume_step, &gc);
    int resume_sum_kind = CHECKSUM_DEFAULT;
    StateKind resume_kind;
    memset(&resume_kind, 0, sizeof(resume_kind));
    if (resume_step >= 0) {
        resume_kind = checkpoint_check_files(resume_dir, resume_step, gpt_num_params(&gc));
        resume_sum_kind = resume_kind.sum_kind;
    }
    if (c.export_hf[0] || c.export_llmc[0]) { // --init FILE --export-hf DIR / --export-llmc FILE: load, write, exit
        run_export(&c, &gc, &src, pc.world_size);
        parallel_finalize(&pc);
        return 0;
    }
    // --eval-hellaswag: the eval file first (bad input before the big allocations); the rows may be as long as
    // --seq-len, or the model's context; the activations hold one example's endings at the longest row's length
    RunData data; // (the run's data: opened below, before the big allocations; --eval-hellaswag's file now)
    memset(&data, 0, sizeof(data));
    int eval_only = c.eval_hellaswag[0] != 0;
    if (eval_only) {
        int limit = c.seq_len > 0 ? c.seq_len : gc.max_seq_len;
        if (limit > gc.max_seq_len) { fatal("--seq-len %d is above the model's context length %d", limit, gc.max_seq_len); }
        char err_hs[1024];
        if (hellaswag_load(&data.hs, c.eval_hellaswag, gc.vocab_size, limit, c.seq_len > 0 ? "--seq-len" : "the model's context", err_hs, sizeof(err_hs)) != 0) {
            fatal("--eval-hellaswag: %s", err_hs);
        }
        data.have_hs = 1;
        int mult = c.tp > 1 && c.sequence_parallel ? c.tp : 1;
        c.batch_size = data.hs.max_endings;
        c.seq_len = (data.hs.longest_row + mult - 1) / mult * mult;
    }
    // --generate: one sequence at a time, as long as --seq-len or the model's context
    int gen_only = c.generate > 0, ctx_is_model = gen_only && c.seq_len == 0, gen_batch = 1;
    if (gen_only) {
        // the ranks hold one copy of the model, split by --tp and --pp; copies would draw the same samples
        if (pc.dp > 1) {
            fatal("--generate on %d ranks: --tp %d x --pp %d is %d; the ranks must split one copy of the model (data-parallel copies would print the same samples)",
                  pc.world_size, c.tp, c.pp, c.tp * c.pp);
        }
        // the samples drawn together (--batch-size, else up to 8): each decoding step is a forward of that many rows,
        // which the activations of one sequence of seq_len rows hold
        gen_batch = c.batch_size > 0 ? c.batch_size : c.generate < 8 ? c.generate : 8;
        c.batch_size = 1;
        if (c.seq_len == 0) { c.seq_len = gc.max_seq_len; }
        if (gen_batch > c.seq_len) { fatal("--generate with --batch-size %d: at most --seq-len (%d) samples are drawn together", gen_batch, c.seq_len); }
    }
    int B = c.batch_size, T = c.seq_len;
    if (T > gc.max_seq_len) { fatal("--seq-len %d is above the model's context length %d", T, gc.max_seq_len); }
    // the samples' prompt (bad input before the big allocations), and with it GPT-2's decoder when no --tokenizer
    // is given; --generate also looks for the decoder without a prompt, to print text rather than ids. Rank 0 alone
    // reads the vocabulary, which only it needs (it prints), and sends the other ranks the prompt's tokens: on
    // several machines only rank 0's may have the files, or its $GPT2_VOCAB_DIR
    Tokenizer tokenizer;
    int have_tok = 0, n_prompt = 0;
    int32_t* prompt = NULL;
    if (master && (c.prompt[0] || (gen_only && !c.tokenizer[0]))) {
        prompt = encode_prompt(c.prompt[0] ? c.prompt : NULL, &gc, &tokenizer, &have_tok, &n_prompt);
        if (n_prompt >= T) {
            fatal("--prompt is %d tokens: no room to sample within %d tokens (%s)", n_prompt, T,
                  ctx_is_model ? "the model's context" : "--seq-len");
        }
    }
    if (pc.world_size > 1 && c.prompt[0]) {
        comm_broadcast(&pc.world, &n_prompt, sizeof(n_prompt), 0);
        if (!master) { prompt = (int32_t*)mallocCheck(sizeof(int32_t) * (size_t)(n_prompt + 1)); }
        comm_broadcast(&pc.world, prompt, sizeof(int32_t) * (size_t)n_prompt, 0);
    }
    if (c.plan) { // --plan: search the layouts of the machine the flags describe, print the best, exit
        run_plan(&c, &gc, pc.world_size);
        parallel_finalize(&pc);
        return 0;
    }
    if (c.tp > 1) {
        char tperr[200];
        if (!layout_tp_valid(&gc, c.tp, tperr, sizeof(tperr))) { fatal("--tp %d: %s", c.tp, tperr); }
        if (c.sequence_parallel && T % c.tp != 0) {
            fatal("--sequence-parallel: --seq-len %d does not divide by --tp %d (each rank holds 1/tp of every sequence's tokens)", T, c.tp);
        }
    }
    // every derived count in 64 bits, range-checked before it is narrowed
    const int64_t MAX_MICRO_TOKENS = (int64_t)1 << 30, MAX_GRAD_ACCUM = 1 << 20;
    if ((int64_t)B * T > MAX_MICRO_TOKENS) {
        fatal("--batch-size %d x --seq-len %d = %lld tokens per micro-step, above the limit %lld", B, T, (long long)B * T, (long long)MAX_MICRO_TOKENS);
    }
    int64_t tokens_per_micro = (int64_t)B * T * pc.dp;
    if (c.micro_batches > 0) {
        if (c.total_batch_size == 0) { c.total_batch_size = tokens_per_micro * c.micro_batches; }
        if (c.total_batch_size != tokens_per_micro * c.micro_batches) {
            fatal("--micro-batches %d and --total-batch-size %ld disagree: %d micro-batches of %d x %d on %d data-parallel rank(s) are %lld tokens",
                  c.micro_batches, c.total_batch_size, c.micro_batches, B, T, pc.dp, (long long)tokens_per_micro * c.micro_batches);
        }
    }
    if (c.total_batch_size == 0) { c.total_batch_size = tokens_per_micro; }
    if (c.total_batch_size % tokens_per_micro != 0) {
        fatal("--total-batch-size %ld is not a multiple of batch-size x seq-len x processes = %d x %d x %d = %lld",
              c.total_batch_size, B, T, pc.dp, (long long)tokens_per_micro);
    }
    int64_t accum64 = c.total_batch_size / tokens_per_micro;
    if (accum64 > MAX_GRAD_ACCUM) {
        fatal("--total-batch-size %ld needs %lld micro-steps of %d x %d x %d tokens per optimizer step, above the limit %lld: "
              "lower it or raise --batch-size", c.total_batch_size, (long long)accum64, B, T, pc.dp, (long long)MAX_GRAD_ACCUM);
    }
    int grad_accum = (int)accum64;
    int room = T - (n_prompt > 0 ? n_prompt : 1); // tokens a sample can add after its prompt
    if (c.gen_tokens > room && (c.sample_every > 0 || gen_only)) {
        if (master && gen_only) { printf("note: --gen-tokens %d: %d fit after the prompt within %d tokens\n", c.gen_tokens, room, T); }
        c.gen_tokens = room;
    }
    // the pipeline: its schedule over grad_accum micro-batches, and the blocks of each chunk, balanced by cost (a
    // block's FLOPs per token, the LM head's on the last chunk)
    int pp_kind = pp_schedule_parse(c.pp_schedule);
    if (pp_kind < 0) { fatal("--pp-schedule: unknown schedule '%s' (gpipe, 1f1b, interleaved)", c.pp_schedule); }
    int V = pp_kind == PP_INTERLEAVED ? c.virtual_stages : 1;
    // (the layout as the planner sees it: its memory table is the trainer's; see print_run_plan)
    PlanLayout run = {pc.dp, c.tp, c.pp, c.tp > 1 && c.sequence_parallel, c.zero, B, T, grad_accum, c.recompute, dtype_parse(c.dtype),
                      pp_kind, V, kernels_num_threads(), 0, 0, strcmp(c.grad_compress, "bf16") == 0, 0, !c.master_weights}; // (nccl, pp_nccl: set once decided)
    // the samples' KV cache, allocated with the rest so that a run that starts has the memory its samples need: the
    // ranks that sample during training (data-parallel rank 0's group; under ZeRO-3 every rank, whose forwards
    // gather from all) cache one sequence, --generate the samples it draws together
    if (c.kv_cache && !run.sp) {
        if (gen_only) { run.kv_B = gen_batch; }
        else if (c.sample_every > 0 && !c.bench && (pc.dp_rank == 0 || c.zero == 3)) { run.kv_B = 1; }
    }
    int* chunk_first = NULL;
    if (c.pp > 1) {
        char pperr[300];
        if (!pp_schedule_valid(pp_kind, c.pp, grad_accum, c.virtual_stages, gc.num_layers, pperr, sizeof(pperr))) {
            fatal("--pp %d --pp-schedule %s: %s", c.pp, c.pp_schedule, pperr);
        }
        chunk_first = (int*)mallocCheck(sizeof(int) * (size_t)(c.pp * V + 1));
        plan_partition(&gc, &run, chunk_first);
    } else if (c.virtual_stages != 1) {
        fatal("--virtual-stages %d needs --pp 2 or more and --pp-schedule interleaved", c.virtual_stages);
    }
    if (c.zero == 3 && c.pp > 1) {
        // (as in DeepSpeed: each micro-batch's forward and backward of a stage would gather its layers again)
        fatal("--zero 3 with --pp %d: ZeRO-3 shards the parameters of unpipelined runs only; use --zero 1 or 2 with a pipeline", c.pp);
    }

    // data first: bad input is reported before the big allocations
    char err[1024];
    if (!c.bench && !eval_only && !gen_only) { run_data_open(&data, &c, &gc, &pc, B, T, grad_accum); }
    // a training run that resumes names each setting it changes, or stops (--resume-settings), before the big
    // allocations; a different global batch (a batch-size ramp), for one, is allowed but never silent: without
    // --total-batch-size it follows the number of processes, so a resume on fewer ranks would shrink it unnoticed
    if (resume_step >= 0 && data.have_train) { resume_settings_check(&c, &resume_kind.then, resume_step, master); }
    // the run's tokens, steps x total-batch-size, counted in 64 bits (ramp_walk), checked before anything counts them
    if ((double)c.steps * (double)c.total_batch_size > 4e18) {
        fatal("--steps %d x --total-batch-size %ld tokens: more than this trainer counts (4e18)", c.steps, c.total_batch_size);
    }
    ramp_check(&c, B, T, pc.dp, pp_kind, gc.num_layers, resume_step > 0 ? resume_step : 0); // (after the checkpoint's settings, which may bring a ramp)
    utils_fatal_alike_rank = 0; // (from here on, errors may be of one rank alone: a device, a disk)

    // model, optimizer, gradients, activations: one allocation per family; the parameters stream in as fp32 and
    // become the compute copy (rounded to --dtype) and the master weights of each rank's shard
    GPT model;
    // --matmul-algos: given, or <--out>/matmul_algos.txt when tuning; each process keeps its own (<file>.rank<R> when
    // there are several), so that each resumes with the algorithms it chose
    char algos_path[1200] = "";
    if (c.matmul_algos[0] || (c.matmul_tune > 1 && c.out[0] && !c.bench)) {
        if (c.matmul_algos[0]) { snprintf(algos_path, sizeof(algos_path), "%s", c.matmul_algos); }
        else { snprintf(algos_path, sizeof(algos_path), "%s/matmul_algos.txt", c.out); }
        if (pc.world_size > 1) {
            size_t n = strlen(algos_path);
            snprintf(algos_path + n, sizeof(algos_path) - n, ".rank%d", pc.world_rank);
        }
    }
    // (a batch ramp's shorter micro-steps: their row counts, whose attention workspaces are sized at start-up too)
    int* rest_rows = (int*)mallocCheck(sizeof(int) * (size_t)B);
    int n_rest = ramp_rest_rows(&c, B, T, pc.dp, resume_step > 0 ? resume_step : 0, rest_rows);
    ModelSplit split = {&pc.tp_group, c.sequence_parallel, &pc.pp_group, V, chunk_first, c.zero == 3, NULL, B, c.attention, c.tf32, run.kv_B,
                        c.matmul_tune, algos_path, !c.deterministic, rest_rows, n_rest};
    gpt_init_ctx(&model, &split, dtype_parse(c.dtype), T, gc.channels);
#ifdef KERNELS_CUDA
    // NCCL refuses a communicator whose ranks share a GPU of one host (as the tests' processes on one GPU do, unless
    // each names a host of its own: comm_nccl_shared_device). --comm nccl stops here on such data- or tensor-parallel
    // ranks, in our words and with the ways out; --comm auto takes NCCL when this build has it, there is more than one
    // process and there are none, and MPI through pinned host memory otherwise.
    // Every rank takes the same decision (the largest "shared" over the world).
    int comm_auto = strcmp(c.comm, "auto") == 0;
    if ((comm_auto || strcmp(c.comm, "nccl") == 0) && comm_nccl_available() && pc.world_size > 1) {
        CommGroup* groups[2] = {&pc.tp_group, &pc.dp_group};
        double shared = 0.0;
        for (int k = 0; k < 2; k++) {
            int a, b;
            if (groups[k]->size > 1 && comm_nccl_shared_device(groups[k], &model.ctx, &a, &b)) {
                if (!comm_auto) {
                    fatal("--comm nccl: ranks %d and %d of the %s group share a GPU, which NCCL refuses (one GPU per process; "
                          "--comm mpi runs processes that share GPUs; to test NCCL on one GPU, give each process an "
                          "NCCL_HOSTID of its own: scripts/nccl_rank_host.sh)", a, b, groups[k]->name);
                }
                shared = 1.0;
            }
        }
        if (comm_auto) {
            comm_allreduce_max_f64(&pc.world, &shared, 1);
            if (shared == 0.0) { snprintf(c.comm, sizeof(c.comm), "nccl"); }
        }
    }
    if (strcmp(c.comm, "auto") == 0) { snprintf(c.comm, sizeof(c.comm), "mpi"); }
#endif
    // the pipeline's messages go device to device through NCCL pairs, unless stages share a GPU (pp_shared: two of them)
    int pp_shared[2] = {-1, -1};
    if (c.pp > 1 && strcmp(c.comm, "nccl") == 0) {
        run.pp_nccl = !comm_nccl_shared_device(&pc.pp_group, &model.ctx, &pp_shared[0], &pp_shared[1]);
    }
    // the planner's count of what this rank will allocate, for the path just decided, checked against the device
    // before any allocation
    run.nccl = strcmp(c.comm, "nccl") == 0;
    double planned[4];
    plan_rank_memory(&gc, &run, pc.pp_rank, chunk_first, sizeof(floatX), planned);
    split.planned = planned;
    gpt_alloc_params_split(&model, &gc, pc.dp, &split, T);
    ZeroOptimizer zopt;
    model.no_master = !c.master_weights;
    gpt_zero_init_staged(&zopt, &model, c.zero, &pc.dp_group, comm_is_staged(c.comm));
    static CommNccl nccl, nccl_tp; // --comm nccl: the data-parallel group's communicator (the optimizer's reductions)
                                   // and the tensor-parallel group's (tp.h's collectives); both ended at exit
    if (strcmp(c.comm, "nccl") == 0) {
        maybe_inject_fault(&pc, -1); // (the failure tests: a rank that never reaches the communicators' init)
        if (pc.tp > 1) { // every rank joins its tp group's communicator, then its dp group's: the same order everywhere
            comm_nccl_init(&nccl_tp, &pc.tp_group);
            pc.tp_group.nccl = &nccl_tp;
            comm_nccl_reserve(&nccl_tp, (size_t)B * T * model.cfg.channels); // (tp.h's largest collective: a (B, T, C) activation)
        }
        comm_nccl_init(&nccl, &pc.dp_group);
        zero_set_nccl(&zopt, &nccl);
    }
    if (strcmp(c.grad_compress, "bf16") == 0) { zero_set_compress(&zopt); }
    PowerSgd psgd;
    char gcerr[256];
    int psgd_rank = powersgd_spec_rank(c.grad_compress, gcerr, sizeof(gcerr)); // (checked by parse_flags)
    int have_psgd = psgd_rank > 0 && pc.dp > 1; // one data-parallel rank reduces nothing: there is nothing to compress
    if (have_psgd) { gpt_powersgd_init(&psgd, &model, &zopt, psgd_rank, splitmix64((uint64_t)c.seed ^ 0x50534744ull)); }
    // parameters stream into the model a chunk at a time (model_source_load). Files and the initialisation are in
    // the whole model's layout; under tensor parallelism each rank keeps its share (the stream slices), so a fresh
    // model is the same whatever --tp.
    GptStreamTarget target;
    ParamStream into_local = gpt_stream(&model, &zopt, &target);
    ShareStream shs;
    ParamStream into_model = share_stream(&shs, &model.layout, &model.glayout, &into_local, &pc.tp_group, &pc.pp_group);
    uint64_t model_sum = model_source_load(&src, &model.glayout, &into_model, (uint64_t)c.seed, resume_sum_kind);
    share_stream_free(&shs);
    gpt_alloc_grads(&model, c.zero, pc.dp);
    // activations: one slot (every block) without a pipeline; with one, a slot per micro-batch the schedule keeps
    // alive on this rank, each for its largest chunk
    Pipeline pipe;
    ActShape shape = {model.tp, model.sp, gc.num_layers, 1, 1};
    if (c.pp > 1) {
        pipeline_init(&pipe, &model, pp_kind, grad_accum, V, B, T, c.trace[0] ? 3 : 0);
        model.pipe = &pipe;
        if (run.pp_nccl) { pipeline_use_nccl(&pipe, &model); }
        else if (strcmp(c.comm, "nccl") == 0 && master) {
            printf("note: --comm nccl: pipeline stages %d and %d share a GPU, which NCCL refuses: the pipeline's messages "
                   "go through MPI on pinned host copies\n", pp_shared[0], pp_shared[1]);
        }
        shape.layers = 0;
        for (int v = 0; v < V; v++) {
            int g = v * c.pp + pc.pp_rank, nb = chunk_first[g + 1] - chunk_first[g];
            if (nb > shape.layers) { shape.layers = nb; }
        }
        shape.head = model.layout.has_lnf;
        shape.nslots = pipe.nslots;
    }
    activations_alloc_shape(&model.acts, &model.ctx, &gc, &shape, B, T, c.recompute);
    model.acts0 = model.acts;
    if (run.kv_B > 0) { kv_alloc(&model.kv_held, &model, run.kv_B, T); }
    char why[160];
    if (run.nccl && (pc.tp > 1 || run.pp_nccl) && !comm_nccl_launch_order(why, sizeof(why)) && master) {
        // several communicators in this process: the tensor-parallel group's or the pipeline's pairs beside the
        // data-parallel group's
        fprintf(stderr, "warning: --comm nccl: %s: the communicators of several groups in flight at once may deadlock "
                        "(NCCL 2.26 or later orders them when NCCL_LAUNCH_ORDER_IMPLICIT=1, which this program sets unless told otherwise)\n", why);
    }

    TrainState ts;
    train_state_fresh(&ts, &c, model.ctx.dtype == DTYPE_FP16 ? c.loss_scale : 1.0f);
    if (resume_step >= 0) {
        int had_windows = checkpoint_load_state(resume_dir, resume_step, &model, &zopt, &ts, model_sum);
        if (master && !had_windows && (c.skip_loss_z > 0.0f || c.skip_grad_z > 0.0f)) {
            printf("note: --resume %s: the checkpoint holds no outlier-guard windows (its run had no --skip-loss-z or --skip-grad-z): "
                   "they fill afresh, and no update is skipped for the next %d steps\n", c.resume, c.outlier_window);
        }
        sharedfs_drop_copy(resume_scratch);
        if (data.have_train && ts.data_state[0] == 0) {
            // a state that records no data position (converted from llm.c's): where this run's sampler is after
            // resume_step steps of grad_accum micro-batches (llm.c's run had no batch ramp)
            if (c.batch_ramp_start > 0) {
                fatal("--resume %s: an llm.c run's checkpoint continues with llm.c's whole batches, not a batch ramp (--batch-ramp-start %ld)",
                      c.resume, c.batch_ramp_start);
            }
            dataloader_skip(&data.train, (uint64_t)resume_step * (uint64_t)grad_accum);
            if (master) { llmc_data_note(&data.train, ts.data_state, resume_step); }
        } else if (data.have_train && dataloader_set_state(&data.train, ts.data_state, err, sizeof(err)) != 0) { fatal("--resume: %s", err); }
    }
    if (master && c.out[0] && !c.bench) {
        prepare_out_dir(c.out);
        // what dead writers left: temporary files, and when resuming into the same directory unpaired files too
        if (resume_step >= 0 && strcmp(c.out, c.resume) == 0) { checkpoint_prune(c.out, 0, 0, resume_step); }
        else { atomic_clean_stale(c.out); }
    }
    if (c.out[0] && !c.bench) { sharedfs_check_out(&pc, c.out); } // (hosts without a filesystem shared with rank 0 are named)
    if (c.tokenizer[0] && master) { // (it replaces the decoder of --prompt's vocabulary)
        if (have_tok) { tokenizer_free(&tokenizer); }
        if (tokenizer_init(&tokenizer, c.tokenizer) != 0) { fatal("--tokenizer: cannot load '%s'", c.tokenizer); }
        have_tok = 1;
    }
    // the samples' <|endoftext|> (their start without a prompt, and --stop-at-eot's token): the decoder's, else GPT-2's
    // 50256, or token 0 for a smaller vocabulary; rank 0's on every rank, which must all stop a sample together
    int eot = have_tok ? (int)tokenizer.eot_token : (gc.vocab_size > 50256 ? 50256 : 0);
    if (pc.world_size > 1 && (gen_only || c.sample_every > 0)) { comm_broadcast(&pc.world, &eot, sizeof(eot), 0); }

    if (!gen_only) {
        print_run_plan(&c, &model, &zopt, &pc, &run, chunk_first, grad_accum, data.have_train ? dataloader_num_tokens(&data.train) : 0, rest_rows, n_rest);
    }
    free(rest_rows);
    if (master && psgd_rank > 0) { print_powersgd_plan(have_psgd ? &psgd : NULL, &model, &zopt, psgd_rank); }
    SampleOpts so = {c.temperature, c.top_k, c.top_p, c.kv_cache, c.logprobs, c.stop_at_eot, c.repetition_penalty, c.min_p, c.cuda_graphs};
    SampleSource ss = {&tokenizer, have_tok, eot, prompt, n_prompt};
    if (eval_only || gen_only) {
        // --eval-hellaswag or --generate: evaluate or sample the model, then exit
        if (eval_only) {
            run_eval_hellaswag(&c, &model, &data.hs, &pc);
            run_data_free(&data);
        } else {
            run_generate(&c, &gc, &model, &zopt, &pc, &ss, &so, T, gen_batch, &ts.rng);
        }
        free(prompt);
        if (have_tok) { tokenizer_free(&tokenizer); }
        zero_free(&zopt);
        comm_nccl_free(&nccl);
        comm_nccl_free(&nccl_tp);
        if (model.pipe) { pipeline_free(&pipe, &model); }
        free(chunk_first);
        gpt_free(&model);
        parallel_finalize(&pc);
        return 0;
    }

    FILE* logf = NULL;
    if (master && c.log[0]) {
        logf = fopen(c.log, ts.step > 0 ? "a" : "w");
        if (!logf) { fatal("--log: cannot open '%s': %s", c.log, strerror(errno)); }
        // one line saying what ran (readers of step lines skip it: it has no "step")
        fprintf(logf, "{\"run\": {\"start_step\": %d, \"dtype\": \"%s\", \"recompute\": %d, \"zero\": %d, \"processes\": %d, "
                "\"dp\": %d, \"tp\": %d, \"sequence_parallel\": %d, \"tokens_per_step\": %ld, \"activation_bytes\": %.0f}}\n",
                ts.step, dtype_name(model.ctx.dtype), c.recompute, c.zero, pc.world_size, pc.dp, pc.tp, model.sp,
                c.total_batch_size, (double)model.acts.total_bytes);
        fflush(logf);
    }
    FILE* mainlog = master && c.out[0] && !c.bench ? mainlog_open(c.out, resume_step) : NULL; // llm.c's main.log

    TrainLoop loop = {&c, &pc, &model, &zopt, &ts, &data, &ss, &so, logf, mainlog, resume_step >= 0};
    train_loop(&loop);

    if (logf) { fclose(logf); }
    if (mainlog) { fclose(mainlog); }
    run_data_free(&data);
    if (have_tok) { tokenizer_free(&tokenizer); }
    free(prompt);
    zero_free(&zopt);
    comm_nccl_free(&nccl);
    comm_nccl_free(&nccl_tp);
    if (have_psgd) { powersgd_free(&psgd); }
    if (model.pipe) { pipeline_free(&pipe, &model); }
    free(chunk_first);
    gpt_free(&model);
    parallel_finalize(&pc);
    return 0;
}
#endif // TRAIN_GPT_NO_MAIN
