/*
kernels.h: the kernel interface of the trainer, one declaration for every operation the orchestration (train_gpt.c,
zero.h, checkpoint.h) performs on buffer memory. Two backends implement it: kernels_cpu.h (this build) and the CUDA
backend (kernels.cuh). A backend defines, before including this header,
  floatX      the element type of activations, activation gradients and the compute copy of the parameters
              (float on the CPU, which emulates bf16/fp16 by rounding; __nv_bfloat16 or half on a GPU);
  KernelCtx   the execution context every call takes first (the CPU's carries the emulated storage type and
              per-thread scratch; a GPU's carries the stream, library handles and workspaces);
and then defines every function declared here with exactly this signature, so a backend that drifts from the
interface fails to compile. Master weights, AdamW moments, parameter gradients, losses and norms are fp32 (float)
in every build. Pointers are device pointers unless the name says host.

Conventions shared by both backends (the contract each kernel's comment refines):
- Row-major tensors; BT rows (B*T tokens), C channels, OC output channels, NH heads, V / Vp real / padded vocabulary.
- Parameter gradients obey `acc`: 0 OVERWRITES them (first micro-step of an optimizer step), 1 ACCUMULATES.
- Activation gradients are overwritten unless the contract says "accumulates into".
- Every floatX output is rounded to the storage type once, when it is stored (round to nearest even); arithmetic
  inside a kernel is fp32.
*/
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>
#include <stdint.h>

// ----------------------------------------------------------------------------
// The backend and its context

// Called first thing in main, before MPI: the CPU backend may re-execute the program once, with its OpenMP threads'
// spin count and better OpenBLAS kernels in the environment the libraries read when they load.
static void kernels_runtime_select(char** argv);
// Once per process after the thread count is set: floating-point mode (the CPU flushes subnormals to zero).
static void kernels_init_fp_mode(void);
// A context for sequences up to max_T tokens and C channels, storing floatX in `dtype`; its scratch, in bytes.
static void kernels_ctx_init(KernelCtx* ctx, int dtype, int max_T, int C);
static void kernels_ctx_free(KernelCtx* ctx);
// --attention IMPL for this context ("auto", "native", "cudnn"): 0, or -1 when this backend cannot.
static int kernels_set_attention(KernelCtx* ctx, const char* impl);
// --deterministic ON for this context: 1 (the default) keeps every kernel's sums in a fixed order; 0 lets a GPU with
// cuDNN's attention run the backward graph that accumulates dQ with atomics (faster; its last bits vary from run to
// run). Set before kernels_reserve, which sizes that graph's workspace. 0, or -1 when this backend has no such kernel
// (the CPU, a GPU build without cuDNN or with fp32 storage).
static int kernels_set_deterministic(KernelCtx* ctx, int on);
// --tf32 ON for this context: 1 runs fp32 matmuls on TF32 tensor cores, 0 exact fp32. 0, or -1 when this backend
// cannot (the CPU; a 16-bit GPU build, which has no fp32 matmuls).
static int kernels_set_tf32(KernelCtx* ctx, int on);
// --matmul-tune CANDIDATES and --matmul-algos PATH for this context: a GPU times the heuristic's first CANDIDATES
// cuBLASLt algorithms for each matmul shape as it first appears and keeps the fastest; PATH ("" or NULL: none) is a
// file of such choices, read now and used before any heuristic, and (write 1) rewritten with each new one. 0, or -1
// when this backend has no algorithms to choose (the CPU).
static int kernels_set_matmul_tune(KernelCtx* ctx, int candidates, const char* algos_path, int write);
// One line on where the matmuls' algorithms came from (the heuristic, timing, the file) and what timing gained.
static void kernels_matmul_algos_summary(char* buf, size_t cap);
// The fp32 matmul rate of a GPU against its bf16 one (cuBLASLt, 8192^3 on data; bench_kernels_cu prints both):
// measured on an H200 at f4d9b17, 51.1 TFLOP/s exact and 414 with TF32 against 885.8 in bf16. The planner times fp32
// layouts with them.
#define KERNELS_FP32_EXACT_RATE 0.058
#define KERNELS_FP32_TF32_RATE 0.467
// The length at which a forward-only pass over t positions (sampling, evaluation of short rows) should run: t, or up
// to t_max where the backend runs fewer distinct shapes faster (a GPU with cuDNN's attention: one plan per shape;
// the native attention of 16-bit CUDA builds: its tensor-core kernels take multiples of 16).
// A causal model's outputs at the first t positions do not depend on the positions after them, so the caller pads
// those with any token and reads the first t.
static int kernels_forward_len(const KernelCtx* ctx, int t, int t_max);
static size_t kernels_ctx_bytes(const KernelCtx* ctx);
// What kernels_ctx_init(max_T, C) allocates with nthreads host threads, without a context (the planner): exactly
// kernels_ctx_bytes on the CPU; on a GPU the start-up workspaces (cuBLASLt, staging, reductions), before any grows.
static size_t kernels_scratch_bytes(int max_T, int C, int nthreads);
// The shapes a training step gives the ops on this rank, for kernels_reserve: B sequences of T tokens; C, the model's
// channels (the LayerNorms'); nh heads of hs channels in the attention (a tensor-parallel rank's share of the heads);
// rows, the LayerNorms' rows (B T, or a sequence-parallel rank's share); oc, the widest matmul output whose bias
// gradient the rank takes; vp, the vocabulary rows it holds (sampling's row of logits).
// (lrows: the rows of logits sampling computes at once, classifier_logits_rows' R: the samples drawn together)
// rest_B[0..n_rest_B): the row counts, each below B, of the shorter micro-steps a batch ramp's steps end with
// (train_gpt.c: ramp_rest_rows). Every workspace but one grows with the rows, so B's covers them; cuDNN's attention
// plans are made per row count, and a plan for fewer rows may take a larger workspace, so those are planned too.
typedef struct {
    int B, T, C, nh, hs, rows, oc, vp, lrows;
    const int* rest_B;
    int n_rest_B;
} KernelsShapes;
// The workspaces the ops grow on demand (a GPU's: the gradient partials, the token sort, cuDNN's attention workspace
// for the context's --attention), sized for s up front, so that a training step allocates nothing: the bytes that
// adds to the context, allocated only with alloc (0: the count, for a check before anything is allocated). None on
// the CPU (its scratch is made with the context): 0.
static size_t kernels_reserve(KernelCtx* ctx, const KernelsShapes* s, int alloc);
// The bytes the ops allocated after kernels_reserve, for shapes it was not given (sampling and evaluation at other
// lengths may; a training step must not).
static size_t kernels_grown_bytes(const KernelCtx* ctx);
// For the start-up table and benchmarks: the matmul engine, why it was chosen, the host threads per process.
static const char* kernels_blas_name(void);
static const char* kernels_blas_reason(void);
static int kernels_num_threads(void);
static const char* kernels_threads_note(void); // how idle host threads wait, and who chose it ("": nothing to say)

// Named ranges around a layer, the LM head, a collective, for a profiler's timeline (NVTX on a GPU; nothing on the CPU).
static void kernels_range_push(const KernelCtx* ctx, const char* name);
static void kernels_range_pop(const KernelCtx* ctx);

// ----------------------------------------------------------------------------
// Memory: the only way the orchestration reaches buffer memory. dev_alloc returns zeroed memory (first touched by
// the threads that will use it on the CPU). Copies are ordered with the context's other work; dev_sync waits for
// all of it (host reads after a device-to-host copy need it on a GPU; the CPU backend is synchronous).
static void* dev_alloc(const KernelCtx* ctx, size_t bytes);
static void dev_free(const KernelCtx* ctx, void* p);
static void dev_zero(const KernelCtx* ctx, void* p, size_t bytes);
static void dev_copy_h2d(const KernelCtx* ctx, void* dst, const void* host_src, size_t bytes);
static void dev_copy_d2h(const KernelCtx* ctx, void* host_dst, const void* src, size_t bytes);
static void dev_copy_d2d(const KernelCtx* ctx, void* dst, const void* src, size_t bytes);
static void dev_sync(const KernelCtx* ctx);
// CUDA graphs, for sampling's decoding steps (sample.h). Between kernels_capture_begin and kernels_capture_end the
// ops issued on the context, and its copies between the device and pinned host memory (dev_host_alloc), are recorded
// instead of run; kernels_graph_launch replays them with one launch, each with the arguments and pointers it was
// recorded with. So what changes from one step to the next is read from memory when the step runs: the tokens
// (copied from pinned host memory) and the position, through the context's dec_pos (device memory, NULL otherwise):
// while it is set, encoder_forward adds it to every row's position (wpe's rows from there), kv_cache_write writes at
// it, and attention_forward_rows takes its queries from there (their pos and q_lo arguments then give only the count
// of rows; the keys may reach ld). kernels_capture_begin returns 0 where there are no graphs (the CPU): the caller
// runs the ops itself. kernels_capture_end returns NULL, with a warning, when the capture failed.
static int kernels_capture_begin(KernelCtx* ctx);
static void* kernels_capture_end(KernelCtx* ctx);
static void kernels_graph_launch(const KernelCtx* ctx, void* graph);
static void kernels_graph_free(const KernelCtx* ctx, void* graph);
// Host memory the device copies to and from fastest (pinned on a GPU; plain aligned memory on the CPU), for staging.
static void* dev_host_alloc(const KernelCtx* ctx, size_t bytes);
static void dev_host_free(const KernelCtx* ctx, void* p);

// The bridges of file I/O. params_from_f32: the compute copy from fp32 host values, rounded to nearest even.
// params_to_f32: its exact fp32 values, into host memory.
static void params_from_f32(const KernelCtx* ctx, floatX* dst, const float* host_src, size_t n);
static void params_to_f32(const KernelCtx* ctx, float* host_dst, const floatX* src, size_t n);

// ----------------------------------------------------------------------------
// Forward and backward of the GPT-2 ops

// out (B,T,C) = wte[tok] + wpe[t].  tok: (B,T) device tokens. wte holds the vocabulary rows [vocab_lo, vocab_lo +
// vocab_n) (all of them: 0 and Vp; a slice under tensor parallelism, where a token outside it contributes zero);
// wpe may be NULL (not added).
static void encoder_forward(const KernelCtx* ctx, floatX* out, const int32_t* tok, const floatX* wte, const floatX* wpe,
                            int vocab_lo, int vocab_n, int B, int T, int C);
// dwte[tok] += dout for the tokens of the slice, dwpe[t] += dout (both accumulate; deterministic; dwpe may be NULL).
static void encoder_backward(const KernelCtx* ctx, float* dwte, float* dwpe, const floatX* dout, const int32_t* tok,
                             int vocab_lo, int vocab_n, int B, int T, int C);
// out = LN(inp) with weight w, bias b; mean, rstd (BT) fp32.
static void layernorm_forward(const KernelCtx* ctx, floatX* out, float* mean, float* rstd, const floatX* inp,
                              const floatX* w, const floatX* b, int BT, int C);
// LN's output from the statistics its forward kept (recomputation): bit for bit the forward's.
static void layernorm_apply(const KernelCtx* ctx, floatX* out, const floatX* inp, const float* mean, const float* rstd,
                            const floatX* w, const floatX* b, int BT, int C);
// res_out = res_in + delta (+ bias), stored; then out = LN(res_out as stored). res_out may alias res_in.
static void residual_layernorm_forward(const KernelCtx* ctx, floatX* res_out, floatX* out, float* mean, float* rstd,
                                       const floatX* res_in, const floatX* delta, const floatX* bias, const floatX* w,
                                       const floatX* b, int BT, int C);
// dinp ACCUMULATES the input gradient; dw, db by acc.
static void layernorm_backward(const KernelCtx* ctx, floatX* dinp, float* dw, float* db, const floatX* dout,
                               const floatX* inp, const floatX* w, const float* mean, const float* rstd, int BT, int C,
                               int acc);
// out (BT,OC) = inp (BT,C) @ w^T (w is (OC,C)) + bias (may be NULL).
static void matmul_forward(const KernelCtx* ctx, floatX* out, const floatX* inp, const floatX* w, const floatX* bias,
                           int BT, int C, int OC);
// dinp = dout @ w (skipped when NULL); dw (+)= dout^T inp; dbias (+)= column sums of dout (skipped when NULL).
static void matmul_backward(const KernelCtx* ctx, floatX* dinp, float* dw, float* dbias, const floatX* dout,
                            const floatX* inp, const floatX* w, int BT, int C, int OC, int acc);
// The MLP's first linear layer with its GELU: pre (BT,OC) = inp @ w^T + bias (may be NULL), out = GELU(pre). The same
// result as matmul_forward into pre, then gelu_forward, except that a GPU fuses the GELU into the matmul's epilogue,
// which takes the sum before it is rounded into pre: in 16-bit storage out may then differ by a rounding.
static void matmul_forward_gelu(const KernelCtx* ctx, floatX* pre, floatX* out, const floatX* inp, const floatX* w,
                                const floatX* bias, int BT, int C, int OC);
// The MLP's second linear layer's backward fused with the GELU's: as matmul_backward with inp = GELU(pre), except
// that dinp = GELU'(pre) * (dout @ w), the gradient at the GELU's input. The same result as matmul_backward, then
// gelu_backward in place on dinp.
static void matmul_backward_gelu(const KernelCtx* ctx, floatX* dinp, float* dw, float* dbias, const floatX* dout,
                                 const floatX* inp, const floatX* w, const floatX* pre, int BT, int C, int OC, int acc);
// out = GELU(inp), tanh approximation.
static void gelu_forward(const KernelCtx* ctx, floatX* out, const floatX* inp, size_t n);
// dinp = dout * GELU'(inp); dinp may alias dout.
static void gelu_backward(const KernelCtx* ctx, floatX* dinp, const floatX* inp, const floatX* dout, size_t n);
// Causal self-attention of qkv (B,T,3C) into out (B,T,C), keeping lse (B,NH,T) fp32 for the backward.
static void attention_forward(const KernelCtx* ctx, floatX* out, float* lse, const floatX* qkv, int B, int T, int C,
                              int NH);
// Sampling with a KV cache of B sequences, each `ld` rows of keys and values (2C: k then v): kv (B, ld, 2C), sequence
// b's rows from kv + b ld 2C. attention_forward_rows: the queries of the forward's new rows, q (B, T - q_lo, 3C) (its
// qkv rows, positions [q_lo, T); only their first C columns are read), attend to the keys [0, i] of their sequence
// (the cached rows before q_lo and the new rows' own, which kv_cache_write put there first; T <= ld): out
// (B, T - q_lo, C), no lse. Row i's output is attention_forward's row i, up to the order of the sums (the same math;
// a backend may run other kernels for it).
static void attention_forward_rows(const KernelCtx* ctx, floatX* out, const floatX* q, const floatX* kv, int B, int T, int ld,
                                   int q_lo, int C, int NH);
// kv_cache_write: the keys and values (columns [C, 3C)) of the qkv rows (S, n, 3C) a forward made for positions
// [pos, pos + n) into every sequence b of the cache (B, ld, 2C), from rows[b % S]: S = B, each sequence its own; S = 1,
// one sequence's (a shared prompt) in all of them.
static void kv_cache_write(const KernelCtx* ctx, floatX* kv, const floatX* rows, int S, int B, int n, int pos, int ld,
                           int C);
// dqkv overwritten; out and lse are the forward's outputs.
static void attention_backward(const KernelCtx* ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                               const floatX* out, const float* lse, int B, int T, int C, int NH);
// LM head + softmax + cross-entropy, chunked over rows (chunk: chunk_rows x Vp floatX of scratch): losses (BT) fp32;
// with dx, also dx = dloss/dx (overwritten) and dwte (+)= by acc, for dlogits = dloss_scale (softmax - onehot).
// targets: (BT) device tokens, -1 for "no loss here".
static void classifier_forward_backward(const KernelCtx* ctx, float* losses, floatX* dx, float* dwte, floatX* chunk,
                                        int chunk_rows, const floatX* x, const floatX* wte, const int32_t* targets,
                                        float dloss_scale, int BT, int C, int V, int Vp, int acc);
// Vocabulary-parallel cross-entropy (tensor parallelism), the two halves around the reductions the caller makes
// across ranks. logits (rows, Vp_l) holds this rank's columns [vocab_lo, vocab_lo + Vp_l) of the vocabulary; columns
// at or past V (padding) take no part. stats: 3 floats per row.
// classifier_vp_stats writes the local statistics: the maximum over the real local columns (-inf if none), the sum of
// exp(z - that maximum), and the target's logit if this rank holds the target (else 0).
static void classifier_vp_stats(const KernelCtx* ctx, float* stats, const floatX* logits, const int32_t* targets, int rows,
                                int vocab_lo, int Vp_l, int V);
// classifier_vp_apply takes the global statistics (the maximum M, the sum S of exp(z - M) over the whole vocabulary,
// the target's logit zt): losses (rows) = M + log S - zt (0 where the target is -1); with want_grad, logits become
// dlogits = dloss_scale (exp(z - M) / S - onehot(target)) in place (padding 0).
static void classifier_vp_apply(const KernelCtx* ctx, float* losses, floatX* logits, const float* stats, const int32_t* targets,
                                float dloss_scale, int rows, int vocab_lo, int Vp_l, int V, int want_grad);
// Rows of logits (sampling: one per sequence drawn): out (R, Vp) fp32 = round(x (R, C) @ wte^T).
static void classifier_logits_rows(const KernelCtx* ctx, float* out, const floatX* x, const floatX* wte, int R, int C, int Vp);

// ----------------------------------------------------------------------------
// Reductions and the optimizer

// *acc += sum of x[0..n) (losses: one device scalar per optimizer step, read back once).
static void sum_accumulate(const KernelCtx* ctx, double* acc, const float* x, size_t n);
// *out += sum of x[i]^2 (the global gradient norm's share of this range).
static void sum_squares_accumulate(const KernelCtx* ctx, double* out, const float* x, size_t n);
// y += x
static void add_inplace(const KernelCtx* ctx, float* y, const float* x, size_t n);

// A range of the flat parameter layout sharing a weight-decay setting (one tensor).
typedef struct {
    size_t offset, size;
    int decay; // 1: AdamW weight decay applies (matrices and embeddings); 0: biases, LayerNorm
} AdamWSegment;

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float grad_scale;   // multiplies every gradient first: clipping factor / loss scale
    int t;              // 1-based count of updates, for the bias correction
    uint64_t sr_seed;   // stochastic rounding of the compute copy (with t and the flat index)
} AdamWHyper;

// AdamW over the flat range [lo, hi), one call for all tensors (segs: the tensors, in any order; elements in
// no segment, the padding, are left alone). params, grads, m, v and master are all indexed from lo (element i of
// the range is at [i - lo]): the caller passes the compute copy of the range, a window of the whole flat buffer or,
// under ZeRO-3, the only part of it this rank keeps. With master (fp32 master weights, 16-bit compute copy) the
// update applies to master and params[i] = stochastic_round(master) (seeded by sr_seed, t, i); without, to
// params in place (fp32 training, where the compute copy is the master).
static void adamw_update(const KernelCtx* ctx, floatX* params, float* master, const float* grads, float* m, float* v,
                         size_t lo, size_t hi, const AdamWSegment* segs, int nseg, const AdamWHyper* hp);

#endif // KERNELS_H
