/*
kernels.cuh: the CUDA backend of the kernel interface (kernels.h), for train_gpt_cu and test_gpt_cu (nvcc compiles
train_gpt.c as CUDA with this header instead of kernels_cpu.h). Every op keeps its CPU twin's contract (named in its
comment) and comes in three layers: the __global__ kernel, a launcher taking a stream (kernels__*_launch), and the
op function of kernels.h, which validates shapes and picks the launch. Matmuls go through cuBLASLt.

    make train_gpt_cu test_gpt_cu [CUDA_ARCH=90]      build (PRECISION=BF16 default; FP32 or FP16 for the others)

Storage type: floatX is fixed at compile time (bf16 by default; -DENABLE_FP32 or -DENABLE_FP16), and --dtype must
name it. Arithmetic is fp32; each floatX store rounds to nearest even (__float2bfloat16_rn / __float2half_rn, the
same bits as precision.h's round_bf16 / round_fp16), and AdamW writes the compute copy with precision.h's
stochastic rounding, bit for bit what the CPU backend writes from the same master value. (The fp32 arithmetic itself
is not bit for bit the CPU's: nvcc contracts a * b + c into fused multiply-adds, the CPU build does not, so master
weights may differ in their last bits; the GPU check compares trajectories within a tolerance.)

Determinism: no float atomics anywhere. Every reduction (LayerNorm's dw/db, bias gradients, the embedding
gradient, the loss sum, the gradient norm) is a fixed-order sum over per-block partials, so two runs give the same
bits.

Files: this one holds the storage type, the call checks, the execution context, memory, packed access and the
block reductions; the ops follow by topic in kernels_layers.cuh (embedding, LayerNorm, GELU), kernels_matmul.cuh
(cuBLASLt, the LM head), kernels_attention.cuh (native, tensor-core and cuDNN attention) and kernels_optim.cuh
(reductions, AdamW), included at the end.

Status: every op of kernels.h; attention through cuDNN's flash graphs (cudnn_att.cuh) or the native kernels;
cuBLASLt matmuls with the BIAS, GELU_AUX_BIAS, DGELU and BGRADB epilogues; the bandwidth-bound kernels in 16-byte
packs (see "Packed access"). Compiled and linked in CI, and run there on the
CPU through tests/cuda_emu (scripts/gpu_check.sh --emu: every op and the whole trainer, logic only); not yet run
on a GPU: the GPU check (scripts/gpu_check.sh) is what proves it there.
*/
#ifndef KERNELS_CUDA_CUH
#define KERNELS_CUDA_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <cub/cub.cuh>
#include <nvtx3/nvToolsExt.h>  // header-only NVTX: ranges for Nsight's timeline
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <initializer_list>
#include <type_traits>
#include "precision.h"  // defines: DTYPE_*, round_stochastic (host and device)
#include "utils.h"      // defines: fatal, mallocCheck

#define KERNELS_CUDA 1

// ----------------------------------------------------------------------------
// The storage type, fixed by the build

#if defined(ENABLE_FP32)
typedef float floatX;
#define KERNELS_DTYPE DTYPE_FP32
#elif defined(ENABLE_FP16)
typedef __half floatX;
#define KERNELS_DTYPE DTYPE_FP16
#else
typedef __nv_bfloat16 floatX;
#define KERNELS_DTYPE DTYPE_BF16
#endif
#define KERNELS_DEFAULT_DTYPE KERNELS_DTYPE
#define KERNELS_LOGITS_CHUNK_BYTES ((size_t)512 << 20) // the LM head's logits chunk: big matmuls, few launches
// Whether this build has cuDNN's flash attention: built with cuDNN, and 16-bit storage (its only inputs). It is also
// the one nondeterministic kernel --deterministic 0 can choose (flags.h notes the builds where it changes nothing).
#if defined(USE_CUDNN) && !defined(ENABLE_FP32)
#define KERNELS_CUDNN_ATTENTION 1
#else
#define KERNELS_CUDNN_ATTENTION 0
#endif

__device__ __forceinline__ float kernels__f(float x) { return x; }
__device__ __forceinline__ float kernels__f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float kernels__f(__half x) { return __half2float(x); }
// fp32 -> floatX, round to nearest even
__device__ __forceinline__ floatX kernels__x(float x) {
#if defined(ENABLE_FP32)
    return x;
#elif defined(ENABLE_FP16)
    return __float2half_rn(x);
#else
    return __float2bfloat16_rn(x);
#endif
}

// ----------------------------------------------------------------------------
// One check for every CUDA and cuBLASLt call: names the call, the file and the line (overloaded on the status type;
// cuDNN and NCCL join when their paths land).

static const char* kernels__status(cudaError_t e) { return e == cudaSuccess ? NULL : cudaGetErrorString(e); }
static const char* kernels__status(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(s); }

// While a graph is captured (kernels_capture_begin .. _end) a failed call does not end the run: the first is kept, the
// capture is dropped at its end with a warning that names it, and the caller runs the step's ops one by one, where the
// same failure, unless it was the capture's, ends the run as it would anywhere.
static int kernels__capturing = 0; // (one stream at a time: the context's, in kernels_capture_begin .. _end)
static char kernels__capture_err[512];
static void kernels__failed(const char* file, int line, const char* call, const char* err) {
    if (!kernels__capturing) { fatal("%s:%d: %s failed: %s", file, line, call, err); }
    if (!kernels__capture_err[0]) { // (each part cut to a length that fits: a warning, not a record)
        snprintf(kernels__capture_err, sizeof(kernels__capture_err), "%.80s:%d: %.200s failed: %.150s", file, line, call, err);
    }
}
#define gpuCheck(call) do { \
        const char* gpu_err_ = kernels__status(call); \
        if (gpu_err_) { kernels__failed(__FILE__, __LINE__, #call, gpu_err_); } \
    } while (0)

// After a launch: a bad configuration shows here, not at the next unrelated call.
#define launchCheck() gpuCheck(cudaGetLastError())

// ----------------------------------------------------------------------------
// The execution context

#define KERNELS_STAGE_FLOATS ((size_t)1 << 22)   // host <-> device conversion chunk (16 MB of fp32)
#define KERNELS_REDUCE_BLOCKS 1024               // partial sums of the two-pass reductions
#define KERNELS_MAX_RETIRED 64                   // outgrown context buffers kept (kernels__retire)
#define KERNELS_MAX_CAPTURE_GROWN 16             // buffers grown during one graph's capture, zeroed at its end
#define KERNELS_LT_WORKSPACE ((size_t)32 << 20)  // cuBLASLt workspace (32 MB, as Hopper kernels want)

typedef struct {
    int dtype;                 // == KERNELS_DTYPE
    int device, num_sms;
    char device_name[256];
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void* lt_workspace;
    float* stage_dev;          // (KERNELS_STAGE_FLOATS) fp32 staging on the device
    float* stage_host[2];      // (KERNELS_STAGE_FLOATS each) pinned host staging, used in turn (the file streams'
                               // double buffer)
    cudaEvent_t stage_free[2]; // recorded after the copy out of stage_host[i]: the CPU may fill it again
    int stage_next;            // which of the two the next chunk fills
    double* partials;          // (KERNELS_REDUCE_BLOCKS) per-block partial sums
    float* col_partials;       // LayerNorm dw/db, bias-gradient and attention partials (grown on demand)
    size_t col_partials_bytes;
    // the embedding gradient's token sort (grown on demand to the largest B*T seen)
    int sort_capacity;
    int32_t *sort_keys_in, *sort_keys_out, *sort_vals_in, *sort_vals_out; // (one buffer of sort_keys_bytes)
    size_t sort_keys_bytes;
    void* sort_temp;
    size_t sort_temp_bytes;
    floatX* row_scratch;       // (R, Vp) rows of logits (sampling), grown on demand
    size_t row_scratch_bytes;
    int attention_cudnn;       // 1: attention through cuDNN's fused flash attention; 0: the native kernels below
    int attention_auto;        // --attention auto: fall back to the native kernels where cuDNN has no plan
    int att_nondet;            // --deterministic 0: cuDNN's attention backward accumulates dQ with atomics
                               // (cudnn_att.cuh); 0 (the default): its deterministic graph
    long att_nondet_refused;   // such backward calls cuDNN had no engine for, run by the deterministic graph instead
    long attention_fallbacks;  // attention calls cuDNN had no plan for, run by the native kernels instead
    int gelu_fusion;           // 1 (the default): matmul_forward_gelu fuses the GELU into cuBLASLt's epilogue where it can
    int bias_grad_fusion;      // 1: matmul_backward takes dbias from the weight gradient's BGRADB epilogue where
                               // cuBLASLt offers it; 0 (the default): the separate reduction, kernels__bias_grad. On
                               // an H200 the epilogue ran as a kernel of its own (globalKernelBgradAB, 4.3% of a 124M
                               // step under ncu), and the backward with it was 3% slower in both runs of bench_kernels_cu
    int tf32;                  // --tf32 1 (fp32 builds): the matmuls run on the TF32 tensor cores
                               // (CUBLAS_COMPUTE_32F_FAST_TF32: operands cut to a 10-bit mantissa, fp32 sums); 0 (the
                               // default): exact fp32
    int matmul_tune;           // --matmul-tune N: the heuristic's first N algorithms timed for each matmul shape, the
                               // fastest kept (kernels_lt_tune.cuh); 0 or 1 (the default): its first
    void* att_workspace;       // cuDNN's attention workspace (grown on demand)
    size_t att_workspace_bytes;
    void* retired[KERNELS_MAX_RETIRED]; // outgrown buffers of the above, freed with the context (kernels__grow)
    int nretired;
    void* capture_grown[KERNELS_MAX_CAPTURE_GROWN]; // buffers grown during the capture in progress, and their sizes:
    size_t capture_grown_bytes[KERNELS_MAX_CAPTURE_GROWN]; // kernels_capture_end zeroes them (kernels__grow)
    int ncapture_grown;
    size_t bytes;              // device bytes held by the context
    int reserved;              // kernels_reserve has sized the workspaces for a training step
    size_t grown;              // device bytes the workspaces grew by after that (kernels_grown_bytes)
    const int* dec_pos;        // device memory: the decoding position, read by the kernels at run time (kernels.h)
} KernelCtx;

#include "kernels.h"  // declares: every op below, with the signature both backends share

static void kernels_runtime_select(char** argv) { (void)argv; }
static void kernels_init_fp_mode(void) {}
static const char* kernels_blas_name(void) { return "cuBLASLt"; }
static char kernels__reason[320] = "no device yet";
static const char* kernels_blas_reason(void) { return kernels__reason; }
static int kernels_num_threads(void) { return 1; }
static const char* kernels_threads_note(void) { return ""; }

static void kernels_ctx_init(KernelCtx* ctx, int dtype, int max_T, int C) {
    (void)max_T; (void)C;
    memset(ctx, 0, sizeof(*ctx));
    if (dtype != KERNELS_DTYPE) {
        fatal("--dtype %s: this CUDA build stores activations and parameters in %s (rebuild with PRECISION=%s for %s)",
              dtype_name(dtype), dtype_name(KERNELS_DTYPE), dtype == DTYPE_FP32 ? "FP32" : dtype == DTYPE_FP16 ? "FP16" : "BF16",
              dtype_name(dtype));
    }
    ctx->dtype = dtype;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        fatal("no usable CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    }
    // one GPU per process on a machine: the launcher's local rank picks it (several processes share a GPU when there
    // are more of them than GPUs, as the tests do)
    const char* lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!lr) { lr = getenv("MPI_LOCALRANKID"); }
    if (!lr) { lr = getenv("SLURM_LOCALID"); }
    if (lr) { gpuCheck(cudaSetDevice(atoi(lr) % count)); }
    gpuCheck(cudaGetDevice(&ctx->device));
    cudaDeviceProp prop;
    gpuCheck(cudaGetDeviceProperties(&prop, ctx->device));
    ctx->num_sms = prop.multiProcessorCount;
    snprintf(ctx->device_name, sizeof(ctx->device_name), "%s", prop.name);
    snprintf(kernels__reason, sizeof(kernels__reason), "%s, sm_%d%d, %d SMs, %.0f GB", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    gpuCheck(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    gpuCheck(cublasLtCreate(&ctx->lt));
    gpuCheck(cudaMalloc(&ctx->lt_workspace, KERNELS_LT_WORKSPACE));
    gpuCheck(cudaMalloc((void**)&ctx->stage_dev, KERNELS_STAGE_FLOATS * sizeof(float)));
    for (int i = 0; i < 2; i++) {
        gpuCheck(cudaMallocHost((void**)&ctx->stage_host[i], KERNELS_STAGE_FLOATS * sizeof(float)));
        gpuCheck(cudaEventCreateWithFlags(&ctx->stage_free[i], cudaEventDisableTiming));
    }
    gpuCheck(cudaMalloc((void**)&ctx->partials, KERNELS_REDUCE_BLOCKS * sizeof(double)));
    ctx->bytes = KERNELS_LT_WORKSPACE + KERNELS_STAGE_FLOATS * sizeof(float) + KERNELS_REDUCE_BLOCKS * sizeof(double);
    ctx->attention_cudnn = KERNELS_CUDNN_ATTENTION;
    ctx->attention_auto = 1;
    ctx->gelu_fusion = 1;
    ctx->bias_grad_fusion = 0;
}

// --attention: cudnn (a build with cuDNN, 16-bit storage), native (the kernels below), auto (cudnn when possible).
static int kernels_set_attention(KernelCtx* ctx, const char* impl) {
    int can_cudnn = KERNELS_CUDNN_ATTENTION;
    ctx->attention_auto = strcmp(impl, "auto") == 0;
    if (strcmp(impl, "native") == 0) { ctx->attention_cudnn = 0; return 0; }
    if (strcmp(impl, "auto") == 0) { ctx->attention_cudnn = can_cudnn; return 0; }
    if (strcmp(impl, "cudnn") == 0 && can_cudnn) { ctx->attention_cudnn = 1; return 0; }
    return -1;
}

// --deterministic (kernels.h): only cuDNN's attention backward has a nondeterministic variant.
static int kernels_set_deterministic(KernelCtx* ctx, int on) {
    ctx->att_nondet = !on && KERNELS_CUDNN_ATTENTION;
    return on || KERNELS_CUDNN_ATTENTION ? 0 : -1;
}

// --tf32: 1 runs the fp32 matmuls on the TF32 tensor cores, about 8x the fp32 rate on an H100/H200 at about 2^-11
// relative error per operand (llm.c's -f 1, its default; PyTorch's allow_tf32); 0 keeps them exact. Only fp32 storage
// has fp32 matmuls: -1 for a 16-bit build. The matmul plans remember the compute type they were made with.
static int kernels_set_tf32(KernelCtx* ctx, int on) {
    if (on && KERNELS_DTYPE != DTYPE_FP32) { return -1; }
    ctx->tf32 = on != 0;
    return 0;
}

// The shortest of 64, 128, 256, ... that holds t positions, at most t_max (t itself when t > t_max).
static int kernels__bucket_len(int t, int t_max) {
    long b = 64;
    while (b < t) { b *= 2; }
    return t >= t_max ? t : (int)(b < t_max ? b : t_max);
}

// With cuDNN's attention, forward-only passes run at bucketed lengths: cuDNN builds an execution plan per shape (tens
// of milliseconds each, cached), and sampling alone would ask for a new length at every token. With the native
// attention of 16-bit builds, at a multiple of 16 (at most t_max), which the tensor-core kernels take.
static int kernels_forward_len(const KernelCtx* ctx, int t, int t_max) {
    if (ctx->attention_cudnn) { return kernels__bucket_len(t, t_max); }
#if !defined(ENABLE_FP32)
    int r = (t + 15) / 16 * 16;
    return t >= t_max ? t : (r < t_max ? r : t_max);
#else
    return t;
#endif
}

static void kernels_ctx_free(KernelCtx* ctx) {
    if (!ctx->stream) { return; }
    gpuCheck(cudaStreamSynchronize(ctx->stream));
    cudaFree(ctx->lt_workspace);
    cudaFree(ctx->stage_dev);
    for (int i = 0; i < 2; i++) {
        cudaFreeHost(ctx->stage_host[i]);
        cudaEventDestroy(ctx->stage_free[i]);
    }
    cudaFree(ctx->partials);
    cudaFree(ctx->col_partials);
    cudaFree(ctx->sort_keys_in);
    cudaFree(ctx->sort_temp);
    cudaFree(ctx->row_scratch);
    cudaFree(ctx->att_workspace);
    for (int i = 0; i < ctx->nretired; i++) { cudaFree(ctx->retired[i]); }
    ctx->nretired = 0;
    cublasLtDestroy(ctx->lt);
    cudaStreamDestroy(ctx->stream);
    ctx->stream = NULL;
}

static size_t kernels_ctx_bytes(const KernelCtx* ctx) { return ctx->bytes; }

static size_t kernels_scratch_bytes(int max_T, int C, int nthreads) {
    (void)max_T; (void)C; (void)nthreads;
    return KERNELS_LT_WORKSPACE + KERNELS_STAGE_FLOATS * sizeof(float) + KERNELS_REDUCE_BLOCKS * sizeof(double);
}

// Keeps an outgrown context buffer until the context ends. cudaFree waits for the whole device: in the middle of a
// step that could be a pipeline stage's NCCL send waiting for its peer, whose host waits for this rank (a deadlock),
// and the first steps grow several buffers (the bias-gradient partials, the attention workspace from the forward's
// size to the backward's). Only past KERNELS_MAX_RETIRED growths are they freed, after the device has finished.
static void kernels__retire(KernelCtx* ctx, void* p) {
    if (!p) { return; }
    if (ctx->nretired == KERNELS_MAX_RETIRED) {
        gpuCheck(cudaDeviceSynchronize());
        for (int i = 0; i < ctx->nretired; i++) { gpuCheck(cudaFree(ctx->retired[i])); }
        ctx->nretired = 0;
    }
    ctx->retired[ctx->nretired++] = p;
}

// Grows a device buffer owned by the context, only when a larger shape first appears (the old one is retired: work
// already queued may still use it).
// During a graph's capture a growth that cannot be made fails the capture and keeps the old buffer (the captured
// launches never run: the caller drops the graph and runs the step op by op, where the same growth is made or ends
// the run): the allocation failing, the retired list full, whose flush waits for the device, or the list of buffers
// to zero at the capture's end full.
// A grown buffer is zeroed once: at once, or, during a capture, right after it ends (kernels_capture_end). A memset
// queued in the capture would be a node of the graph, zeroing the buffer again at every replay, and never at all when
// the capture fails and the step runs op by op.
static void* kernels__grow(KernelCtx* ctx, void* p, size_t* have, size_t need) {
    if (need <= *have) { return p; }
    if (kernels__capturing && p && ctx->nretired == KERNELS_MAX_RETIRED) {
        kernels__failed(__FILE__, __LINE__, "kernels__grow", "the outgrown buffers' list is full, and freeing them waits for the device");
        return p;
    }
    if (kernels__capturing && ctx->ncapture_grown == KERNELS_MAX_CAPTURE_GROWN) {
        kernels__failed(__FILE__, __LINE__, "kernels__grow", "too many buffers grew during one capture");
        return p;
    }
    void* q = NULL;
    const char* err = kernels__status(cudaMalloc(&q, need));
    if (err) { // (gpuCheck's report; outside a capture kernels__failed ends the run)
        kernels__failed(__FILE__, __LINE__, "cudaMalloc(&q, need)", err);
        return p;
    }
    kernels__retire(ctx, p);
    // zeroed, as dev_alloc's buffers are: every device byte the trainer holds starts defined. The sampling row's scratch
    // is written only by cuBLASLt, whose stores compute-sanitizer's initcheck did not see on the H200 (the logits were
    // right: the sampling tests against the references passed); a grown buffer costs one memset, at start-up.
    if (kernels__capturing) {
        ctx->capture_grown[ctx->ncapture_grown] = q;
        ctx->capture_grown_bytes[ctx->ncapture_grown++] = need;
    } else {
        gpuCheck(cudaMemsetAsync(q, 0, need, ctx->stream));
    }
    ctx->bytes += need;
    if (ctx->reserved) { ctx->grown += need; }
    *have = need;
    return q;
}

// The bytes kernels__grow(have, need) would add (alloc 0), or adds (alloc 1).
static size_t kernels__grow_to(KernelCtx* ctx, void** p, size_t* have, size_t need, int alloc) {
    if (need <= *have) { return 0; }
    if (alloc) { *p = kernels__grow(ctx, *p, have, need); }
    return need;
}

static unsigned kernels__blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 32u ? 65535u * 32u : (b ? b : 1));
}

// The threads of a block that works through `items` items together (a row of packs, a list of partial sums): one
// per item, rounded up to whole warps, at most 1024. GPT-2's rows of 50304 / 8 packs get 1024 threads; a small
// vocabulary's row gets a warp or two instead of 1024 threads that mostly wait at the block's barriers.
static unsigned kernels__row_threads(size_t items) {
    size_t t = (items + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

// ----------------------------------------------------------------------------
// Memory (kernels.h). All work is ordered on the context's stream; dev_sync waits for it.

static void* dev_alloc(const KernelCtx* ctx, size_t bytes) {
    void* p = NULL;
    gpuCheck(cudaMalloc(&p, bytes ? bytes : 1));
    gpuCheck(cudaMemsetAsync(p, 0, bytes, ctx->stream));
    return p;
}
static void dev_free(const KernelCtx* ctx, void* p) {
    if (!p) { return; }
    gpuCheck(cudaStreamSynchronize(ctx->stream));
    gpuCheck(cudaFree(p));
}
static void dev_zero(const KernelCtx* ctx, void* p, size_t bytes) { gpuCheck(cudaMemsetAsync(p, 0, bytes, ctx->stream)); }
static void dev_copy_h2d(const KernelCtx* ctx, void* dst, const void* host_src, size_t bytes) {
    gpuCheck(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    // the host buffer may be reused as soon as this returns; in a graph's capture (pinned memory) the copy reads it at
    // each replay instead, and nothing runs now to wait for
    if (!kernels__capturing) { gpuCheck(cudaStreamSynchronize(ctx->stream)); }
}
static void dev_copy_d2h(const KernelCtx* ctx, void* host_dst, const void* src, size_t bytes) {
    gpuCheck(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
}
static void dev_copy_d2d(const KernelCtx* ctx, void* dst, const void* src, size_t bytes) {
    gpuCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
}
static void dev_sync(const KernelCtx* ctx) { gpuCheck(cudaStreamSynchronize(ctx->stream)); }
static void kernels_range_push(const KernelCtx* ctx, const char* name) { (void)ctx; nvtxRangePushA(name); }
static void kernels_range_pop(const KernelCtx* ctx) { (void)ctx; nvtxRangePop(); }
// CUDA graphs (kernels.h): the stream's work between the two calls is captured (relaxed mode: a workspace that must
// grow may still cudaMalloc), then instantiated once and replayed by one launch per step.
static int kernels_capture_begin(KernelCtx* ctx) {
    gpuCheck(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeRelaxed));
    kernels__capturing = 1;
    kernels__capture_err[0] = 0;
    return 1;
}
static void* kernels_capture_end(KernelCtx* ctx) {
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaStreamEndCapture(ctx->stream, &g);
    kernels__capturing = 0;
    // the buffers grown during the capture, zeroed before anything queued after it (a replay, or the ops one by one)
    for (int i = 0; i < ctx->ncapture_grown; i++) { gpuCheck(cudaMemsetAsync(ctx->capture_grown[i], 0, ctx->capture_grown_bytes[i], ctx->stream)); }
    ctx->ncapture_grown = 0;
    if (e == cudaSuccess && !kernels__capture_err[0]) { e = cudaGraphInstantiate(&x, g, 0); }
    if (g) { cudaGraphDestroy(g); }
    if (e != cudaSuccess || kernels__capture_err[0]) {
        (void)cudaGetLastError(); // (cleared: the caller runs the ops one by one instead)
        fprintf(stderr, "warning: capturing a CUDA graph failed (%s): the steps launch their kernels one by one\n",
                kernels__capture_err[0] ? kernels__capture_err : cudaGetErrorString(e));
        return NULL;
    }
    return (void*)x;
}
static void kernels_graph_launch(const KernelCtx* ctx, void* graph) { gpuCheck(cudaGraphLaunch((cudaGraphExec_t)graph, ctx->stream)); }
static void kernels_graph_free(const KernelCtx* ctx, void* graph) {
    (void)ctx;
    if (graph) { gpuCheck(cudaGraphExecDestroy((cudaGraphExec_t)graph)); }
}
static void* dev_host_alloc(const KernelCtx* ctx, size_t bytes) {
    (void)ctx;
    void* p = NULL;
    gpuCheck(cudaMallocHost(&p, bytes ? bytes : 1));
    memset(p, 0, bytes);
    return p;
}
static void dev_host_free(const KernelCtx* ctx, void* p) { (void)ctx; if (p) { gpuCheck(cudaFreeHost(p)); } }

// fp32 <-> floatX conversions of the file-I/O bridges (model files and checkpoints stream through these a chunk at a
// time: no host copy of the whole model)
__global__ void kernels__f32_to_x(floatX* dst, const float* src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { dst[i] = kernels__x(src[i]); }
}
__global__ void kernels__x_to_f32(float* dst, const floatX* src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { dst[i] = kernels__f(src[i]); }
}

// Device-to-device conversions (the file streams' staging below, the LM head's logits row, the fp32 side of the NCCL
// tensor-parallel reductions in comm_nccl.h)
static void dev_x_to_f32(const KernelCtx* ctx, float* dst, const floatX* src, size_t n) {
    if (n == 0) { return; }
    kernels__x_to_f32<<<kernels__blocks(n, 256), 256, 0, ctx->stream>>>(dst, src, n);
    launchCheck();
}
static void dev_f32_to_x(const KernelCtx* ctx, floatX* dst, const float* src, size_t n) {
    if (n == 0) { return; }
    kernels__f32_to_x<<<kernels__blocks(n, 256), 256, 0, ctx->stream>>>(dst, src, n);
    launchCheck();
}

// CPU twin: params_from_f32 (memmove + round_buffer). A double buffer: each chunk is copied into one of two pinned
// buffers, in turn, and its upload and conversion are queued without waiting, so the device takes chunk k while the
// caller reads chunk k + 1 from the file and this copies it into the other buffer; a buffer is refilled only after
// the copy out of it has finished (its event). The caller's host_src is free again when this returns.
static void params_from_f32(const KernelCtx* cctx, floatX* dst, const float* host_src, size_t n) {
    KernelCtx* ctx = (KernelCtx*)cctx; // the turn of the two buffers
    for (size_t off = 0; off < n; off += KERNELS_STAGE_FLOATS) {
        size_t cnt = n - off < KERNELS_STAGE_FLOATS ? n - off : KERNELS_STAGE_FLOATS;
        int b = ctx->stage_next;
        ctx->stage_next ^= 1;
        gpuCheck(cudaEventSynchronize(ctx->stage_free[b])); // its previous upload has finished
        memcpy(ctx->stage_host[b], host_src + off, cnt * sizeof(float));
        // one device staging buffer is enough: on one stream, the next upload into it follows this conversion
        gpuCheck(cudaMemcpyAsync(ctx->stage_dev, ctx->stage_host[b], cnt * sizeof(float), cudaMemcpyHostToDevice, ctx->stream));
        gpuCheck(cudaEventRecord(ctx->stage_free[b], ctx->stream));
        dev_f32_to_x(ctx, dst + off, ctx->stage_dev, cnt);
    }
}

// CPU twin: params_to_f32. Chunk k + 1's conversion and download are queued into the other pinned buffer before
// chunk k is copied out to host_dst, so the device works while the CPU copies.
static void params_to_f32(const KernelCtx* cctx, float* host_dst, const floatX* src, size_t n) {
    KernelCtx* ctx = (KernelCtx*)cctx;
    size_t chunks = (n + KERNELS_STAGE_FLOATS - 1) / KERNELS_STAGE_FLOATS;
    int first = ctx->stage_next;
    for (size_t c = 0; c <= chunks; c++) {
        if (c < chunks) { // queue chunk c
            size_t off = c * KERNELS_STAGE_FLOATS, cnt = n - off < KERNELS_STAGE_FLOATS ? n - off : KERNELS_STAGE_FLOATS;
            int b = (first + (int)c) & 1;
            gpuCheck(cudaEventSynchronize(ctx->stage_free[b])); // an earlier upload out of it has finished
            dev_x_to_f32(ctx, ctx->stage_dev, src + off, cnt);
            gpuCheck(cudaMemcpyAsync(ctx->stage_host[b], ctx->stage_dev, cnt * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
            gpuCheck(cudaEventRecord(ctx->stage_free[b], ctx->stream));
        }
        if (c > 0) { // copy chunk c - 1 out
            size_t off = (c - 1) * KERNELS_STAGE_FLOATS, cnt = n - off < KERNELS_STAGE_FLOATS ? n - off : KERNELS_STAGE_FLOATS;
            int b = (first + (int)c - 1) & 1;
            gpuCheck(cudaEventSynchronize(ctx->stage_free[b]));
            memcpy(host_dst + off, ctx->stage_host[b], cnt * sizeof(float));
        }
    }
    ctx->stage_next = (first + (int)chunks) & 1;
}

// ----------------------------------------------------------------------------
// Packed access: element-wise and row kernels move 16 bytes per thread per load (8 bf16 values, 4 fp32), which is
// what it takes to approach the copy bandwidth (one 2-byte load per thread leaves most of each memory transaction's
// width unused). A kernel templated on VEC takes VEC consecutive elements at a time: VEC = KERNELS_PACK when every
// pointer it packs is 16-byte aligned (and, for rows, the row length a multiple of the pack), else VEC = 1, the same
// code one element at a time. An fp32 array beside a floatX pack is read as VEC floats (32 bytes for bf16, two
// 16-byte loads).

#define KERNELS_PACK ((int)(16 / sizeof(floatX)))
template <typename T, int N> struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) KernelsVec { T v[N]; };

// The device faults on a misaligned vector access; the CPU emulation (tests/cuda_emu) defines this hook to check it.
#ifndef KERNELS_ALIGNED_ACCESS
#define KERNELS_ALIGNED_ACCESS(p, bytes) ((void)0)
#endif
// ... and this one, to check that a prefetch's bytes lie in device memory (a prefetch changes no value, so nothing
// else would show one aimed past a row's end).
#ifndef KERNELS_PREFETCH_ACCESS
#define KERNELS_PREFETCH_ACCESS(p, bytes) ((void)0)
#endif

// Element i of the VEC-element packs at p, as 16-byte loads where the pack is 16-byte aligned.
template <typename V> __device__ __forceinline__ V kernels__ldv(const void* base, size_t i) {
    const V* p = (const V*)base + i;
    KERNELS_ALIGNED_ACCESS(p, alignof(V));
    V x;
    if (alignof(V) == 16) {
        for (int k = 0; k < (int)(sizeof(V) / 16); k++) { ((uint4*)&x)[k] = ((const uint4*)p)[k]; }
    } else {
        x = *p;
    }
    return x;
}
// Asks for pack i of the packs at base to be brought into L2 (prefetch.global.L2: a hint, no value changes; nothing
// in the emulation but the hook's check). For a kernel whose loads cannot all be in flight at once (each in a branch
// of its own, and holding their values would spill): the later loads then wait on L2 rather than on DRAM.
template <typename V> __device__ __forceinline__ void kernels__prefetch_l2(const void* base, size_t i) {
    const V* p = (const V*)base + i;
    KERNELS_PREFETCH_ACCESS(p, sizeof(V));
#ifdef __CUDA_ARCH__
    asm volatile("prefetch.global.L2 [%0];" : : "l"(p));
#endif
}
template <typename V> __device__ __forceinline__ void kernels__stv(void* base, size_t i, const V& x) {
    V* p = (V*)base + i;
    KERNELS_ALIGNED_ACCESS(p, alignof(V));
    if (alignof(V) == 16) {
        for (int k = 0; k < (int)(sizeof(V) / 16); k++) { ((uint4*)p)[k] = ((const uint4*)&x)[k]; }
    } else {
        *p = x;
    }
}

static int kernels__aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// Whether rows of C elements can be taken in whole packs: C a multiple of the pack and every given pointer (NULL ones
// skipped) 16-byte aligned, so that every row of every array starts on a pack.
static int kernels__rows_packed(int C, std::initializer_list<const void*> ptrs) {
    if (C % KERNELS_PACK != 0) { return 0; }
    for (const void* p : ptrs) { if (p && !kernels__aligned16(p)) { return 0; } }
    return 1;
}

// The loops over a pack's elements are unrolled, so that each element stays in a register: an array indexed by a
// run-time index would be placed in local memory (slow, and a "stack frame" in ptxas -v's report).
#ifdef __CUDACC__
#define KERNELS_UNROLL _Pragma("unroll")
#define KERNELS_UNROLL4 _Pragma("unroll 4") // a loop over rows: four loads in flight before their sums wait for them
#define KERNELS_UNROLL8 _Pragma("unroll 8")
#else
#define KERNELS_UNROLL
#define KERNELS_UNROLL4
#define KERNELS_UNROLL8
#endif

// ----------------------------------------------------------------------------
// Warp and block reductions (fixed order: the same bits every run)

__device__ __forceinline__ float kernels__warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, o); }
    return v;
}
__device__ __forceinline__ float kernels__warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) { v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o)); }
    return v;
}
__device__ __forceinline__ double kernels__warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, o); }
    return v;
}
// Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in thread 0.
__device__ double kernels__block_sum_d(double v) {
    __shared__ double warp_sums[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = kernels__warp_sum_d(v);
    if (lane == 0) { warp_sums[warp] = v; }
    __syncthreads();
    double t = 0.0;
    if (warp == 0) {
        t = lane < nw ? warp_sums[lane] : 0.0;
        t = kernels__warp_sum_d(t);
    }
    __syncthreads();
    return t;
}

// ----------------------------------------------------------------------------
// The ops, by topic (each file names the CPU twin of every op it defines)
#include "kernels_layers.cuh"    // defines: encoder_*, layernorm_*, residual_layernorm_forward, gelu_*
#include "kernels_matmul.cuh"    // defines: matmul_*, classifier_* (the LM head), the bias gradient's reduction
#include "kernels_attention.cuh" // defines: attention_forward, attention_backward (native, tensor cores, cuDNN)
#include "kernels_optim.cuh"     // defines: sum_accumulate, sum_squares_accumulate, add_inplace, adamw_update

// ----------------------------------------------------------------------------
// The workspaces sized up front (kernels.h). The ops grow them on demand, which in a training step would mean a
// cudaMalloc (the device synchronised) in the first step and a layout that passed the start-up memory check
// (model.h: gpt__check_device_memory) running out in its first backward. Each need below is the one its op
// asks for: the LayerNorm backward's column partials (its warps x 2C), the bias gradient's (row groups x OC; the
// BGRADB epilogue takes OC of them), the attention backward's row sums (B NH T, cuDNN's and the native kernels'),
// the token sort of the embedding backward (B T), sampling's row of logits (Vp) and its decoding step's attention
// splits (kernels_attention.cuh), and cuDNN's workspaces for the forward and backward graphs of the step's shape and
// of each shorter micro-step's row count (a batch ramp's: s->rest_B), their plans made now and cached for the steps:
// without them a ramp's first shorter micro-step would build its plans in the middle of the run and might grow the
// workspace there. The plan cache grows to hold all of them beside 64 entries for sampling's and evaluation's lengths
// (cudnn_att.cuh), so none of the step's plans is evicted and built again mid-run.
static size_t kernels_reserve(KernelCtx* ctx, const KernelsShapes* s, int alloc) {
    size_t floats = kernels__ln_partial_floats(ctx, s->rows, s->C);
    size_t bias = kernels__bias_partial_floats(s->oc), att = (size_t)s->B * s->nh * s->T;
    if (bias > floats) { floats = bias; }
    if (att > floats) { floats = att; }
    // a sampling step's rows through the KV cache (lrows sequences, one query each, keys up to T): the splits' states
    size_t dec = kernels__dec_scratch_floats(s->lrows > 1 ? s->lrows : 1, s->nh, 1, s->T, s->hs);
    if (dec > floats) { floats = dec; }
    size_t added = kernels__grow_to(ctx, (void**)&ctx->col_partials, &ctx->col_partials_bytes, floats * sizeof(float), alloc);
    added += kernels__sort_reserve(ctx, s->B * s->T, alloc);
    added += kernels__grow_to(ctx, (void**)&ctx->row_scratch, &ctx->row_scratch_bytes, (size_t)(s->lrows > 1 ? s->lrows : 1) * s->vp * sizeof(floatX),
                              alloc);
#ifdef USE_CUDNN
    if (ctx->attention_cudnn) {
        cudnn_attention_plan_room(3 * (1 + s->n_rest_B)); // (every row count's plans stay: none is built mid-run)
        size_t ws = cudnn_attention_workspace(ctx, s->B, s->T, s->nh, s->hs);
        for (int i = 0; i < s->n_rest_B; i++) {
            size_t w = cudnn_attention_workspace(ctx, s->rest_B[i], s->T, s->nh, s->hs);
            if (w > ws) { ws = w; }
        }
        added += kernels__grow_to(ctx, &ctx->att_workspace, &ctx->att_workspace_bytes, ws, alloc);
    }
#endif
    if (alloc) { ctx->reserved = 1; }
    return added;
}

static size_t kernels_grown_bytes(const KernelCtx* ctx) { return ctx->grown; }

#endif // KERNELS_CUDA_CUH
