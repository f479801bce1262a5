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

Status: every op of kernels.h; attention through cuDNN's flash graphs (cudnn_att.cuh) or the native kernels below;
cuBLASLt matmuls with the BIAS, GELU_AUX_BIAS and DGELU epilogues; the bandwidth-bound kernels in 16-byte packs
(see "Packed access"). Compiled and linked in CI, and run there on the
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

#define gpuCheck(call) do { \
        const char* gpu_err_ = kernels__status(call); \
        if (gpu_err_) { fatal("%s:%d: %s failed: %s", __FILE__, __LINE__, #call, gpu_err_); } \
    } while (0)

// After a launch: a bad configuration shows here, not at the next unrelated call.
#define launchCheck() gpuCheck(cudaGetLastError())

// ----------------------------------------------------------------------------
// The execution context

#define KERNELS_STAGE_FLOATS ((size_t)1 << 22)   // host <-> device conversion chunk (16 MB of fp32)
#define KERNELS_REDUCE_BLOCKS 1024               // partial sums of the two-pass reductions
#define KERNELS_MAX_RETIRED 64                   // outgrown context buffers kept (kernels__retire)
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
    int32_t *sort_keys_in, *sort_keys_out, *sort_vals_in, *sort_vals_out;
    void* sort_temp;
    size_t sort_temp_bytes;
    floatX* row_scratch;       // (Vp) one row of logits (sampling), grown on demand
    size_t row_scratch_bytes;
    int attention_cudnn;       // 1: attention through cuDNN's fused flash attention; 0: the native kernels below
    int attention_auto;        // --attention auto: fall back to the native kernels where cuDNN has no plan
    long attention_fallbacks;  // attention calls cuDNN had no plan for, run by the native kernels instead
    int gelu_fusion;           // 1 (the default): matmul_forward_gelu fuses the GELU into cuBLASLt's epilogue where it can
    int bias_grad_fusion;      // 1 (the default): matmul_backward takes dbias from the weight gradient's BGRADB epilogue
                               // where cuBLASLt offers it (0: always the separate reduction, kernels__bias_grad)
    void* att_workspace;       // cuDNN's attention workspace (grown on demand)
    size_t att_workspace_bytes;
    void* retired[KERNELS_MAX_RETIRED]; // outgrown buffers of the above, freed with the context (kernels__grow)
    int nretired;
    size_t bytes;              // device bytes held by the context
} KernelCtx;

#include "kernels.h"  // declares: every op below, with the signature both backends share

static void kernels_blas_select(char** argv) { (void)argv; }
static void kernels_init_fp_mode(void) {}
static const char* kernels_blas_name(void) { return "cuBLASLt"; }
static char kernels__reason[320] = "no device yet";
static const char* kernels_blas_reason(void) { return kernels__reason; }
static int kernels_num_threads(void) { return 1; }

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
#ifdef USE_CUDNN
    ctx->attention_cudnn = KERNELS_DTYPE != DTYPE_FP32; // cuDNN's flash attention takes 16-bit inputs only
#endif
    ctx->attention_auto = 1;
    ctx->gelu_fusion = 1;
    ctx->bias_grad_fusion = 1;
}

// --attention: cudnn (a build with cuDNN, 16-bit storage), native (the kernels below), auto (cudnn when possible).
static int kernels_set_attention(KernelCtx* ctx, const char* impl) {
    int can_cudnn = 0;
#ifdef USE_CUDNN
    can_cudnn = KERNELS_DTYPE != DTYPE_FP32;
#endif
    ctx->attention_auto = strcmp(impl, "auto") == 0;
    if (strcmp(impl, "native") == 0) { ctx->attention_cudnn = 0; return 0; }
    if (strcmp(impl, "auto") == 0) { ctx->attention_cudnn = can_cudnn; return 0; }
    if (strcmp(impl, "cudnn") == 0 && can_cudnn) { ctx->attention_cudnn = 1; return 0; }
    return -1;
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
static void* kernels__grow(KernelCtx* ctx, void* p, size_t* have, size_t need) {
    if (need <= *have) { return p; }
    kernels__retire(ctx, p);
    void* q;
    gpuCheck(cudaMalloc(&q, need));
    ctx->bytes += need;
    *have = need;
    return q;
}

static unsigned kernels__blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 32u ? 65535u * 32u : (b ? b : 1));
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
    gpuCheck(cudaStreamSynchronize(ctx->stream)); // the host buffer may be reused as soon as this returns
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
#else
#define KERNELS_UNROLL
#define KERNELS_UNROLL4
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
// Encoder. CPU twin: encoder_forward / encoder_backward.

// VEC consecutive channels per step (C a multiple of VEC); tokens outside [vocab_lo, vocab_lo + vocab_n) embed as 0
template <int VEC>
__global__ void kernels__encoder_forward(floatX* out, const int32_t* tok, const floatX* wte, const floatX* wpe, int vocab_lo,
                                         int vocab_n, int B, int T, int C) {
    typedef KernelsVec<floatX, VEC> P;
    size_t packs = (size_t)B * T * C / VEC;
    int cp = C / VEC; // packs per row
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < packs; i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / cp;
        int c = (int)(i % cp), t = (int)(row % T), v = tok[row] - vocab_lo;
        int in = v >= 0 && v < vocab_n;
        P e = in ? kernels__ldv<P>(wte, (size_t)v * cp + c) : P(), p = wpe ? kernels__ldv<P>(wpe, (size_t)t * cp + c) : P(), y;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) {
            float s = in ? kernels__f(e.v[k]) : 0.0f;
            y.v[k] = kernels__x(wpe ? s + kernels__f(p.v[k]) : s);
        }
        kernels__stv<P>(out, i, y);
    }
}

static void encoder_forward(const KernelCtx* ctx, floatX* out, const int32_t* tok, const floatX* wte, const floatX* wpe,
                            int vocab_lo, int vocab_n, int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    if (kernels__rows_packed(C, {out, wte, wpe})) {
        kernels__encoder_forward<KERNELS_PACK><<<kernels__blocks(n / KERNELS_PACK, 256), 256, 0, ctx->stream>>>(out, tok, wte, wpe, vocab_lo, vocab_n, B, T, C);
    } else {
        kernels__encoder_forward<1><<<kernels__blocks(n, 256), 256, 0, ctx->stream>>>(out, tok, wte, wpe, vocab_lo, vocab_n, B, T, C);
    }
    launchCheck();
}

// dwpe[t,c] += sum_b dout[b,t,c], in b order
__global__ void kernels__encoder_backward_wpe(float* dwpe, const floatX* dout, int B, int T, int C) {
    size_t n = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) { s += kernels__f(dout[(size_t)b * n + i]); }
        dwpe[i] += s;
    }
}

// dwte[token] += the dout rows of that token. The positions come sorted by token (a stable radix sort, so within a
// token in position order); block k handles the run of equal tokens that starts at sorted index k, if one does,
// its threads striding over the channels: every sum is in a fixed order, and no two blocks touch the same row.
__global__ void kernels__encoder_backward_wte(float* dwte, const floatX* dout, const int32_t* sorted_tok, const int32_t* sorted_pos,
                                              int vocab_lo, int vocab_n, int BT, int C) {
    int k = blockIdx.x;
    if (k >= BT || (k > 0 && sorted_tok[k] == sorted_tok[k - 1])) { return; }
    int tokv = sorted_tok[k];
    if (tokv < vocab_lo || tokv >= vocab_lo + vocab_n) { return; } // another rank's slice of the vocabulary
    int end = k + 1;
    while (end < BT && sorted_tok[end] == tokv) { end++; }
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = 0.0f;
        for (int j = k; j < end; j++) { s += kernels__f(dout[(size_t)sorted_pos[j] * C + c]); }
        dwte[(size_t)(tokv - vocab_lo) * C + c] += s;
    }
}

__global__ void kernels__iota(int32_t* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) { x[i] = i; }
}

static void encoder_backward(const KernelCtx* cctx, float* dwte, float* dwpe, const floatX* dout, const int32_t* tok,
                             int vocab_lo, int vocab_n, int B, int T, int C) {
    KernelCtx* ctx = (KernelCtx*)cctx; // the sort buffers grow on first use
    int BT = B * T;
    if (BT > ctx->sort_capacity) {
        kernels__retire(ctx, ctx->sort_keys_in);
        kernels__retire(ctx, ctx->sort_temp);
        int32_t* buf;
        gpuCheck(cudaMalloc((void**)&buf, 4 * (size_t)BT * sizeof(int32_t)));
        ctx->sort_keys_in = buf; ctx->sort_keys_out = buf + BT; ctx->sort_vals_in = buf + 2 * (size_t)BT; ctx->sort_vals_out = buf + 3 * (size_t)BT;
        ctx->sort_temp_bytes = 0;
        gpuCheck(cub::DeviceRadixSort::SortPairs(NULL, ctx->sort_temp_bytes, ctx->sort_keys_in, ctx->sort_keys_out,
                                                 ctx->sort_vals_in, ctx->sort_vals_out, BT));
        gpuCheck(cudaMalloc(&ctx->sort_temp, ctx->sort_temp_bytes));
        ctx->bytes += 4 * (size_t)BT * sizeof(int32_t) + ctx->sort_temp_bytes;
        ctx->sort_capacity = BT;
    }
    if (dwpe) {
        kernels__encoder_backward_wpe<<<kernels__blocks((size_t)T * C, 256), 256, 0, ctx->stream>>>(dwpe, dout, B, T, C);
        launchCheck();
    }
    gpuCheck(cudaMemcpyAsync(ctx->sort_keys_in, tok, (size_t)BT * sizeof(int32_t), cudaMemcpyDeviceToDevice, ctx->stream));
    kernels__iota<<<kernels__blocks(BT, 256), 256, 0, ctx->stream>>>(ctx->sort_vals_in, BT);
    launchCheck();
    size_t temp = ctx->sort_temp_bytes;
    gpuCheck(cub::DeviceRadixSort::SortPairs(ctx->sort_temp, temp, ctx->sort_keys_in, ctx->sort_keys_out, ctx->sort_vals_in,
                                             ctx->sort_vals_out, BT, 0, 32, ctx->stream));
    kernels__encoder_backward_wte<<<BT, 256, 0, ctx->stream>>>(dwte, dout, ctx->sort_keys_out, ctx->sort_vals_out, vocab_lo, vocab_n, BT, C);
    launchCheck();
}

// ----------------------------------------------------------------------------
// LayerNorm: one warp per row, statistics in fp32. CPU twins: layernorm_forward, layernorm_apply,
// residual_layernorm_forward, layernorm_backward. Each lane takes packs lane, lane + 32, ... of VEC channels; VEC =
// KERNELS_PACK when C is a multiple of it and every row pointer 16-byte aligned (kernels__rows_packed), else 1.
// The row sums' order follows VEC, so the bits of the statistics do too. Recomputation must reproduce the forward's
// bits; it does because the trainer's buffers make VEC a function of C alone: activations are tensors of 64-byte
// multiples, parameters start at multiples of a (shard of a) row of C, all 16-byte aligned whenever C is a multiple
// of the pack.


// y = (x - mean) * rstd * w + b over one row held at x (floatX), by one warp; writes mean and rstd when asked.
template <int VEC>
__device__ void kernels__ln_row(floatX* y, float* mean_out, float* rstd_out, const floatX* x, const floatX* w, const floatX* b, int C) {
    typedef KernelsVec<floatX, VEC> P;
    int lane = threadIdx.x % 32, np = C / VEC;
    float s = 0.0f;
    for (int p = lane; p < np; p += 32) {
        P xv = kernels__ldv<P>(x, p);
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { s += kernels__f(xv.v[k]); }
    }
    float m = kernels__warp_sum(s) / C;
    float v = 0.0f;
    for (int p = lane; p < np; p += 32) {
        P xv = kernels__ldv<P>(x, p);
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { float d = kernels__f(xv.v[k]) - m; v += d * d; }
    }
    v = kernels__warp_sum(v) / C;
    float r = rsqrtf(v + 1e-5f);
    for (int p = lane; p < np; p += 32) {
        P xv = kernels__ldv<P>(x, p), wv = kernels__ldv<P>(w, p), bv = kernels__ldv<P>(b, p), yv;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { yv.v[k] = kernels__x((kernels__f(xv.v[k]) - m) * r * kernels__f(wv.v[k]) + kernels__f(bv.v[k])); }
        kernels__stv<P>(y, p, yv);
    }
    if (lane == 0 && mean_out) { *mean_out = m; *rstd_out = r; }
}

template <int VEC>
__global__ void kernels__layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* w, const floatX* b,
                                           int BT, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= BT) { return; }
    kernels__ln_row<VEC>(out + (size_t)row * C, mean + row, rstd + row, inp + (size_t)row * C, w, b, C);
}

static void layernorm_forward(const KernelCtx* ctx, floatX* out, float* mean, float* rstd, const floatX* inp,
                              const floatX* w, const floatX* b, int BT, int C) {
    if (kernels__rows_packed(C, {out, inp, w, b})) {
        kernels__layernorm_forward<KERNELS_PACK><<<(BT + 7) / 8, 256, 0, ctx->stream>>>(out, mean, rstd, inp, w, b, BT, C);
    } else {
        kernels__layernorm_forward<1><<<(BT + 7) / 8, 256, 0, ctx->stream>>>(out, mean, rstd, inp, w, b, BT, C);
    }
    launchCheck();
}

template <int VEC>
__global__ void kernels__layernorm_apply(floatX* out, const floatX* inp, const float* mean, const float* rstd, const floatX* w,
                                         const floatX* b, int BT, int C) {
    typedef KernelsVec<floatX, VEC> P;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= BT) { return; }
    const floatX* x = inp + (size_t)row * C;
    floatX* y = out + (size_t)row * C;
    float m = mean[row], r = rstd[row];
    for (int p = threadIdx.x % 32; p < C / VEC; p += 32) {
        P xv = kernels__ldv<P>(x, p), wv = kernels__ldv<P>(w, p), bv = kernels__ldv<P>(b, p), yv;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { yv.v[k] = kernels__x((kernels__f(xv.v[k]) - m) * r * kernels__f(wv.v[k]) + kernels__f(bv.v[k])); }
        kernels__stv<P>(y, p, yv);
    }
}

static void layernorm_apply(const KernelCtx* ctx, floatX* out, const floatX* inp, const float* mean, const float* rstd,
                            const floatX* w, const floatX* b, int BT, int C) {
    if (kernels__rows_packed(C, {out, inp, w, b})) {
        kernels__layernorm_apply<KERNELS_PACK><<<(BT + 7) / 8, 256, 0, ctx->stream>>>(out, inp, mean, rstd, w, b, BT, C);
    } else {
        kernels__layernorm_apply<1><<<(BT + 7) / 8, 256, 0, ctx->stream>>>(out, inp, mean, rstd, w, b, BT, C);
    }
    launchCheck();
}

// The residual is stored first; the warp then normalises what it stored (each lane reads back only the packs it
// wrote, so no barrier is needed).
template <int VEC>
__global__ void kernels__residual_layernorm_forward(floatX* res_out, floatX* out, float* mean, float* rstd, const floatX* res_in,
                                                    const floatX* delta, const floatX* bias, const floatX* w, const floatX* b,
                                                    int BT, int C) {
    typedef KernelsVec<floatX, VEC> P;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= BT) { return; }
    floatX* ro = res_out + (size_t)row * C;
    const floatX* ri = res_in + (size_t)row * C;
    const floatX* d = delta + (size_t)row * C;
    for (int p = threadIdx.x % 32; p < C / VEC; p += 32) {
        P rv = kernels__ldv<P>(ri, p), dv = kernels__ldv<P>(d, p), bv = bias ? kernels__ldv<P>(bias, p) : P(), yv;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) {
            yv.v[k] = kernels__x(kernels__f(rv.v[k]) + kernels__f(dv.v[k]) + (bias ? kernels__f(bv.v[k]) : 0.0f));
        }
        kernels__stv<P>(ro, p, yv);
    }
    __syncwarp();
    kernels__ln_row<VEC>(out + (size_t)row * C, mean + row, rstd + row, ro, w, b, C);
}

static void residual_layernorm_forward(const KernelCtx* ctx, floatX* res_out, floatX* out, float* mean, float* rstd,
                                       const floatX* res_in, const floatX* delta, const floatX* bias, const floatX* w,
                                       const floatX* b, int BT, int C) {
    if (kernels__rows_packed(C, {res_out, out, res_in, delta, bias, w, b})) {
        kernels__residual_layernorm_forward<KERNELS_PACK><<<(BT + 7) / 8, 256, 0, ctx->stream>>>(res_out, out, mean, rstd, res_in, delta, bias, w, b, BT, C);
    } else {
        kernels__residual_layernorm_forward<1><<<(BT + 7) / 8, 256, 0, ctx->stream>>>(res_out, out, mean, rstd, res_in, delta, bias, w, b, BT, C);
    }
    launchCheck();
}

// Backward: warp w of the grid takes rows w, w + W, ...; its dw/db partial sums go to its own slice of
// col_partials (W x 2C floats), summed over W in order by kernels__sum_columns. W: 16 warps per SM (two blocks of 8
// on each, every SM busy: a bandwidth-bound kernel), fewer when there are fewer rows than that.
static int kernels__ln_blocks(const KernelCtx* ctx, int BT) {
    int blocks = 2 * (ctx->num_sms > 0 ? ctx->num_sms : 1), need = (BT + 7) / 8;
    return need < blocks ? (need > 0 ? need : 1) : blocks;
}
template <int VEC>
__global__ void kernels__layernorm_backward(floatX* dinp, float* partial, const floatX* dout, const floatX* inp, const floatX* w,
                                            const float* mean, const float* rstd, int BT, int C) {
    typedef KernelsVec<floatX, VEC> P;
    typedef KernelsVec<float, VEC> F;
    int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, nwarps = gridDim.x * (blockDim.x / 32), lane = threadIdx.x % 32;
    int np = C / VEC;
    float* pdw = partial + (size_t)warp * 2 * C;
    float* pdb = pdw + C;
    for (int p = lane; p < np; p += 32) {
        F z;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { z.v[k] = 0.0f; }
        kernels__stv<F>(pdw, p, z);
        kernels__stv<F>(pdb, p, z);
    }
    for (int row = warp; row < BT; row += nwarps) {
        const floatX* x = inp + (size_t)row * C;
        const floatX* d = dout + (size_t)row * C;
        floatX* dx = dinp + (size_t)row * C;
        float m = mean[row], s = rstd[row];
        float g_mean = 0.0f, gn_mean = 0.0f;
        for (int p = lane; p < np; p += 32) {
            P xv = kernels__ldv<P>(x, p), dv = kernels__ldv<P>(d, p), wv = kernels__ldv<P>(w, p);
            KERNELS_UNROLL
            for (int k = 0; k < VEC; k++) {
                float n = (kernels__f(xv.v[k]) - m) * s, g = kernels__f(dv.v[k]) * kernels__f(wv.v[k]);
                g_mean += g;
                gn_mean += g * n;
            }
        }
        g_mean = kernels__warp_sum(g_mean) / C;
        gn_mean = kernels__warp_sum(gn_mean) / C;
        for (int p = lane; p < np; p += 32) {
            P xv = kernels__ldv<P>(x, p), dv = kernels__ldv<P>(d, p), wv = kernels__ldv<P>(w, p), dxv = kernels__ldv<P>(dx, p);
            F dwv = kernels__ldv<F>(pdw, p), dbv = kernels__ldv<F>(pdb, p);
            KERNELS_UNROLL
            for (int k = 0; k < VEC; k++) {
                float n = (kernels__f(xv.v[k]) - m) * s, di = kernels__f(dv.v[k]), g = di * kernels__f(wv.v[k]);
                dxv.v[k] = kernels__x(kernels__f(dxv.v[k]) + s * (g - g_mean - n * gn_mean));
                dwv.v[k] += di * n;
                dbv.v[k] += di;
            }
            kernels__stv<P>(dx, p, dxv);
            kernels__stv<F>(pdw, p, dwv);
            kernels__stv<F>(pdb, p, dbv);
        }
    }
}

// out[c] (+)= sum over r of part[r * stride + c] (a column sum of partials in a fixed order, so deterministic). A
// block of 32 x 32 threads takes 32 columns: thread (x, y) sums rows y, y + 32, ... of column x (32 loads in flight
// per column, each warp reading 128 contiguous bytes), then thread (x, 0) adds the 32 sums in order. (One thread
// per column summing every row in turn waited on one load at a time: hundreds of microseconds for 2000 rows.)
#define KERNELS_SUM_LANES 32
__global__ void kernels__sum_columns(float* out, const float* part, int rows, size_t stride, int cols, int acc) {
    __shared__ float sums[KERNELS_SUM_LANES][33]; // (+1: no bank conflicts when column x reads down its sums)
    int x = threadIdx.x, y = threadIdx.y, c = blockIdx.x * 32 + x;
    float s = 0.0f;
    if (c < cols) {
        for (int r = y; r < rows; r += KERNELS_SUM_LANES) { s += part[(size_t)r * stride + c]; }
    }
    sums[y][x] = s;
    __syncthreads();
    if (y == 0 && c < cols) {
        float t = 0.0f;
        for (int k = 0; k < KERNELS_SUM_LANES; k++) { t += sums[k][x]; }
        out[c] = acc ? out[c] + t : t;
    }
}

static void kernels__sum_columns_launch(cudaStream_t stream, float* out, const float* part, int rows, size_t stride, int cols, int acc) {
    kernels__sum_columns<<<(cols + 31) / 32, dim3(32, KERNELS_SUM_LANES), 0, stream>>>(out, part, rows, stride, cols, acc);
    launchCheck();
}

static float* kernels__col_partials(const KernelCtx* cctx, size_t floats) {
    KernelCtx* ctx = (KernelCtx*)cctx;
    ctx->col_partials = (float*)kernels__grow(ctx, ctx->col_partials, &ctx->col_partials_bytes, floats * sizeof(float));
    return ctx->col_partials;
}

static void layernorm_backward(const KernelCtx* ctx, floatX* dinp, float* dw, float* db, const floatX* dout,
                               const floatX* inp, const floatX* w, const float* mean, const float* rstd, int BT, int C,
                               int acc) {
    int blocks = kernels__ln_blocks(ctx, BT), warps = 8 * blocks;
    float* part = kernels__col_partials(ctx, (size_t)warps * 2 * C);
    if (kernels__rows_packed(C, {dinp, dout, inp, w})) {
        kernels__layernorm_backward<KERNELS_PACK><<<blocks, 256, 0, ctx->stream>>>(dinp, part, dout, inp, w, mean, rstd, BT, C);
    } else {
        kernels__layernorm_backward<1><<<blocks, 256, 0, ctx->stream>>>(dinp, part, dout, inp, w, mean, rstd, BT, C);
    }
    launchCheck();
    kernels__sum_columns_launch(ctx->stream, dw, part, warps, 2 * (size_t)C, C, acc);
    kernels__sum_columns_launch(ctx->stream, db, part + C, warps, 2 * (size_t)C, C, acc);
}

// ----------------------------------------------------------------------------
// Matmuls through cuBLASLt. Row-major (BT, C) @ (OC, C)^T is, in cuBLAS's column-major terms, the (OC, BT) product
// W^T-view times X-view: the three products of a linear layer are
//   forward  out^T (OC x BT)  = op(W: C x OC, T) * X (C x BT)                 [+ bias epilogue]
//   dinp     dinp^T (C x BT)  = W (C x OC) * dout^T (OC x BT)
//   dweight  dW^T (C x OC)    = X (C x BT) * op(dout^T: OC x BT, T)           [fp32 output, beta = acc]
// A and B are floatX; D is floatX or fp32 (parameter gradients); compute fp32.

static cudaDataType_t kernels__cuda_type(int is_f32) {
    if (is_f32) { return CUDA_R_32F; }
#if defined(ENABLE_FP32)
    return CUDA_R_32F;
#elif defined(ENABLE_FP16)
    return CUDA_R_16F;
#else
    return CUDA_R_16BF;
#endif
}

// The largest power of two (at most 256) that divides a pointer's address.
static uint32_t kernels__alignment(const void* p) {
    uintptr_t u = (uintptr_t)p;
    uint32_t a = 256;
    while (a > 1 && u % a != 0) { a /= 2; }
    return a;
}

// The descriptors and the algorithm of one matmul shape, made once: the heuristic query costs tens of microseconds
// of CPU time, and a training step runs a few hundred matmuls of a dozen shapes.
typedef struct {
    int m, n, k, lda, ldb, transA, transB, has_bias, d_f32, beta_nonzero, epi;
    int usable; // 0: cuBLASLt has no algorithm for this epilogue here (the caller takes the unfused path)
    uint32_t al[5]; // the alignments of A, B, D, the bias and the auxiliary matrix the algorithm was chosen for
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} KernelsLtPlan;

static KernelsLtPlan* kernels__lt_plans; // grown as new shapes appear (a step has a dozen; the op tests, hundreds)
static int kernels__lt_num_plans, kernels__lt_cap_plans;

// The epilogues beyond the bias: GELU with its input kept as the auxiliary output (the MLP's forward), GELU's
// derivative applied to the product from that auxiliary input (the backward into the MLP's hidden layer), and the bias
// gradient of the weight-gradient product (BGRADB: the sums over k of op(B)'s columns, which the product reads anyway,
// written to the bias pointer in D's type, fp32 here).
enum { KERNELS_EPI_NONE = 0, KERNELS_EPI_GELU_AUX = 1, KERNELS_EPI_DGELU = 2, KERNELS_EPI_BGRADB = 3 };
static const char* const kernels__epi_names[] = {"no", "GELU_AUX", "DGELU", "BGRADB"};

// bias and aux: the pointers of the first call, set before the heuristic query, which reads them to learn their
// alignment (it would assume 256 bytes of NULL); a plan serves only pointers aligned as those were (al[3], al[4]).
static KernelsLtPlan* kernels__lt_plan(const KernelCtx* ctx, int d_f32, int transA, int lda, int transB, int ldb, const void* bias,
                                       int epi, const void* aux, int m, int n, int k, float beta, const uint32_t al[5]) {
    int has_bias = bias != NULL;
    for (int i = 0; i < kernels__lt_num_plans; i++) {
        KernelsLtPlan* p = &kernels__lt_plans[i];
        if (p->m == m && p->n == n && p->k == k && p->lda == lda && p->ldb == ldb && p->transA == transA && p->transB == transB &&
            p->has_bias == has_bias && p->epi == epi && p->d_f32 == d_f32 && p->beta_nonzero == (beta != 0.0f) &&
            memcmp(p->al, al, sizeof(p->al)) == 0) { return p; }
    }
    if (kernels__lt_num_plans == kernels__lt_cap_plans) {
        kernels__lt_cap_plans = kernels__lt_cap_plans ? 2 * kernels__lt_cap_plans : 64;
        kernels__lt_plans = (KernelsLtPlan*)realloc(kernels__lt_plans, sizeof(KernelsLtPlan) * kernels__lt_cap_plans);
        if (!kernels__lt_plans) { fatal("cuBLASLt: out of host memory for %d matmul plans", kernels__lt_cap_plans); }
    }
    KernelsLtPlan* p = &kernels__lt_plans[kernels__lt_num_plans];
    p->m = m; p->n = n; p->k = k; p->lda = lda; p->ldb = ldb; p->transA = transA; p->transB = transB; p->has_bias = has_bias; p->epi = epi;
    p->d_f32 = d_f32; p->beta_nonzero = beta != 0.0f; memcpy(p->al, al, sizeof(p->al));
    cudaDataType_t ab_type = kernels__cuda_type(0), d_type = kernels__cuda_type(d_f32);
    gpuCheck(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtEpilogue_t lt_epi = epi == KERNELS_EPI_GELU_AUX ? (has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                              : epi == KERNELS_EPI_DGELU ? CUBLASLT_EPILOGUE_DGELU
                              : epi == KERNELS_EPI_BGRADB ? CUBLASLT_EPILOGUE_BGRADB
                              : has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epi, sizeof(lt_epi)));
    if (has_bias) { // an input bias is floatX; a bias gradient has D's type, which it is left to take
        if (epi != KERNELS_EPI_BGRADB) {
            cudaDataType_t bias_type = kernels__cuda_type(0);
            gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
        }
        gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias))); // (for its alignment)
    }
    if (epi == KERNELS_EPI_GELU_AUX || epi == KERNELS_EPI_DGELU) { // the GELU's input (floatX, laid out as D: m rows, leading dimension m)
        int64_t aux_ld = m;
        cudaDataType_t aux_type = kernels__cuda_type(0);
        gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
        gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type)));
        gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux))); // (the same)
    }
    gpuCheck(cublasLtMatrixLayoutCreate(&p->la, ab_type, transA ? k : m, transA ? m : k, lda));
    gpuCheck(cublasLtMatrixLayoutCreate(&p->lb, ab_type, transB ? n : k, transB ? k : n, ldb));
    gpuCheck(cublasLtMatrixLayoutCreate(&p->ld, d_type, m, n, m));
    cublasLtMatmulPreference_t pref;
    gpuCheck(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = KERNELS_LT_WORKSPACE;
    gpuCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // the heuristic assumes 256-byte aligned pointers unless told: tell it what these are (a tensor inside the
    // flat parameter buffer, or a chunk of rows, may be less aligned), so it never picks an algorithm that needs more
    gpuCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof(al[0])));
    gpuCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof(al[1])));
    gpuCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof(al[2])));
    gpuCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], sizeof(al[2])));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    // no algorithm is reported as CUBLAS_STATUS_NOT_SUPPORTED (with no result), not as success with zero results
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &heur, &found);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED) { found = 0; }
    else { gpuCheck(hs); }
    cublasLtMatmulPreferenceDestroy(pref);
    p->usable = found > 0;
    kernels__lt_num_plans++;
    if (found == 0 && epi != KERNELS_EPI_NONE) { // remembered, so the query is not repeated every step
        fprintf(stderr, "cuBLASLt: no algorithm for the %s epilogue of a %d x %d x %d matmul: unfused ops instead\n",
                kernels__epi_names[epi], m, n, k);
        return p;
    }
    if (found == 0) {
        fatal("cuBLASLt: no algorithm for a %d x %d x %d matmul (transA %d, transB %d, bias %d, epilogue %d, fp32 out %d, alignments %u/%u/%u/%u)",
              m, n, k, transA, transB, has_bias, epi, d_f32, al[0], al[1], al[2], al[3]);
    }
    p->algo = heur.algo;
    return p;
}

// D (m x n, ldd = m) = alpha op(A) op(B) + beta D, column-major; A is (m x k) after op, B (k x n) after op. With
// bias (length m, floatX) the BIAS epilogue adds it to every column. epi KERNELS_EPI_GELU_AUX: D = GELU(product +
// bias) and aux (m x n, floatX) receives product + bias; KERNELS_EPI_DGELU: D = GELU'(aux) * product;
// KERNELS_EPI_BGRADB: bias (length n, D's type) receives the column sums of op(B), overwritten. Returns 0, having done
// nothing, when cuBLASLt offers no algorithm for that epilogue (the caller then runs the unfused ops).
static int kernels__matmul_lt(const KernelCtx* ctx, void* d, int d_f32, const floatX* a, int transA, int lda, const floatX* b,
                               int transB, int ldb, const void* bias, int m, int n, int k, float beta, int epi = KERNELS_EPI_NONE,
                               const floatX* aux = NULL) {
    uint32_t al[5] = {kernels__alignment(a), kernels__alignment(b), kernels__alignment(d), kernels__alignment(bias), kernels__alignment(aux)};
    KernelsLtPlan* p = kernels__lt_plan(ctx, d_f32, transA, lda, transB, ldb, bias, epi, aux, m, n, k, beta, al);
    if (!p->usable) { return 0; }
    if (bias) { gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias))); }
    if (aux) { gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux))); }
    float alpha = 1.0f;
    gpuCheck(cublasLtMatmul(ctx->lt, p->op, &alpha, a, p->la, b, p->lb, &beta, d, p->ld, d, p->ld, &p->algo, ctx->lt_workspace,
                            KERNELS_LT_WORKSPACE, ctx->stream));
    return 1;
}

// CPU twin: matmul_forward. out (BT,OC) = inp (BT,C) @ w^T + bias.
static void matmul_forward(const KernelCtx* ctx, floatX* out, const floatX* inp, const floatX* w, const floatX* bias,
                           int BT, int C, int OC) {
    kernels__matmul_lt(ctx, out, 0, w, 1, C, inp, 0, C, bias, OC, BT, C, 0.0f);
}

// dbias[j] (+)= sum over rows of dout[:, j], in two fixed-order passes. The rows are cut into G groups; block (x, g)
// takes 32 VEC columns (a lane per VEC of them, 16-byte loads when VEC = KERNELS_PACK) over group g's rows, its 8
// warps taking every 8th row, and adds the warps' sums in warp order into part[g][columns]; then kernels__sum_columns
// adds the G partials in order. Each column's order depends on the rows only, not on VEC: both widths give the same
// bits. About 128 x 8 warps per 256 columns keep enough loads in flight to stream dout at memory speed.
#define KERNELS_BIAS_ROW_GROUPS 128
#define KERNELS_BIAS_WARPS 8
template <int VEC>
__global__ void kernels__bias_partials(float* part, const floatX* dout, int BT, int OC) {
    typedef KernelsVec<floatX, VEC> P;
    __shared__ float sums[KERNELS_BIAS_WARPS][32 * VEC];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = blockIdx.y;
    int c0 = (blockIdx.x * 32 + lane) * VEC; // this lane's first column (OC is a multiple of VEC)
    int r0 = (int)((long)BT * g / KERNELS_BIAS_ROW_GROUPS), r1 = (int)((long)BT * (g + 1) / KERNELS_BIAS_ROW_GROUPS);
    float s[VEC];
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) { s[k] = 0.0f; }
    if (c0 < OC) {
        KERNELS_UNROLL4
        for (int r = r0 + warp; r < r1; r += KERNELS_BIAS_WARPS) {
            P d = kernels__ldv<P>(dout + (size_t)r * OC, c0 / VEC);
            KERNELS_UNROLL
            for (int k = 0; k < VEC; k++) { s[k] += kernels__f(d.v[k]); }
        }
    }
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) { sums[warp][lane * VEC + k] = s[k]; }
    __syncthreads();
    for (int i = threadIdx.x; i < 32 * VEC; i += blockDim.x) {
        int c = blockIdx.x * 32 * VEC + i;
        if (c >= OC) { continue; }
        float t = 0.0f;
        for (int w = 0; w < KERNELS_BIAS_WARPS; w++) { t += sums[w][i]; }
        part[(size_t)g * OC + c] = t;
    }
}

// dbias (+)= the column sums of dout (BT, OC): the bias gradient of matmul_backward.
static void kernels__bias_grad(const KernelCtx* ctx, float* dbias, const floatX* dout, int BT, int OC, int acc) {
    float* part = kernels__col_partials(ctx, (size_t)KERNELS_BIAS_ROW_GROUPS * OC);
    if (kernels__rows_packed(OC, {dout})) {
        dim3 grid((OC + 32 * KERNELS_PACK - 1) / (32 * KERNELS_PACK), KERNELS_BIAS_ROW_GROUPS);
        kernels__bias_partials<KERNELS_PACK><<<grid, 32 * KERNELS_BIAS_WARPS, 0, ctx->stream>>>(part, dout, BT, OC);
    } else {
        dim3 grid((OC + 31) / 32, KERNELS_BIAS_ROW_GROUPS);
        kernels__bias_partials<1><<<grid, 32 * KERNELS_BIAS_WARPS, 0, ctx->stream>>>(part, dout, BT, OC);
    }
    launchCheck();
    kernels__sum_columns_launch(ctx->stream, dbias, part, KERNELS_BIAS_ROW_GROUPS, (size_t)OC, OC, acc);
}

// CPU twin: matmul_backward. dbias comes from the weight-gradient product's BGRADB epilogue where cuBLASLt offers one
// (op(B) there is dout, its columns summed over the BT rows the product reads anyway: no second pass over dout), into
// a scratch vector (the epilogue overwrites, and a 256-byte aligned pointer keeps the plans few) then added (acc) or
// copied into dbias; elsewhere from kernels__bias_grad.
static void matmul_backward(const KernelCtx* ctx, floatX* dinp, float* dw, float* dbias, const floatX* dout,
                            const floatX* inp, const floatX* w, int BT, int C, int OC, int acc) {
    if (dinp) { kernels__matmul_lt(ctx, dinp, 0, w, 0, C, dout, 0, OC, NULL, C, BT, OC, 0.0f); }
    if (dbias && ctx->bias_grad_fusion) {
        float* sums = kernels__col_partials(ctx, (size_t)OC);
        if (kernels__matmul_lt(ctx, dw, 1, inp, 0, C, dout, 1, OC, sums, C, OC, BT, acc ? 1.0f : 0.0f, KERNELS_EPI_BGRADB)) {
            kernels__sum_columns_launch(ctx->stream, dbias, sums, 1, (size_t)OC, OC, acc);
            return;
        }
    }
    kernels__matmul_lt(ctx, dw, 1, inp, 0, C, dout, 1, OC, NULL, C, OC, BT, acc ? 1.0f : 0.0f);
    if (dbias) { kernels__bias_grad(ctx, dbias, dout, BT, OC, acc); }
}

// cuBLASLt's GELU epilogues need the auxiliary matrix's leading dimension (its rows, m) divisible by 8; we also ask
// for 16-byte aligned auxiliary pointers. Other shapes take the unfused path (the same ops one after the other).
static int kernels__gelu_epilogue_ok(int m, const void* aux) { return m % 8 == 0 && kernels__alignment(aux) >= 16; }

// CPU twin: matmul_forward_gelu. pre = inp @ w^T + bias, out = GELU(pre), in one matmul with the GELU_AUX(_BIAS)
// epilogue (cuBLASLt's GELU is the tanh approximation; it reads the fp32 sum before it is rounded into pre, so the
// GELU's input carries one rounding less than the unfused path's).
static void matmul_forward_gelu(const KernelCtx* ctx, floatX* pre, floatX* out, const floatX* inp, const floatX* w,
                                const floatX* bias, int BT, int C, int OC) {
    if (ctx->gelu_fusion && kernels__gelu_epilogue_ok(OC, pre) &&
        kernels__matmul_lt(ctx, out, 0, w, 1, C, inp, 0, C, bias, OC, BT, C, 0.0f, KERNELS_EPI_GELU_AUX, pre)) { return; }
    matmul_forward(ctx, pre, inp, w, bias, BT, C, OC);
    gelu_forward(ctx, out, pre, (size_t)BT * OC);
}

// CPU twin: matmul_backward_gelu. dinp = GELU'(pre) * (dout @ w) in one matmul with the DGELU epilogue; dw and
// dbias as matmul_backward.
static void matmul_backward_gelu(const KernelCtx* ctx, floatX* dinp, float* dw, float* dbias, const floatX* dout,
                                 const floatX* inp, const floatX* w, const floatX* pre, int BT, int C, int OC, int acc) {
    if (kernels__gelu_epilogue_ok(C, pre) &&
        kernels__matmul_lt(ctx, dinp, 0, w, 0, C, dout, 0, OC, NULL, C, BT, OC, 0.0f, KERNELS_EPI_DGELU, pre)) {
        matmul_backward(ctx, NULL, dw, dbias, dout, inp, w, BT, C, OC, acc);
        return;
    }
    matmul_backward(ctx, dinp, dw, dbias, dout, inp, w, BT, C, OC, acc);
    gelu_backward(ctx, dinp, pre, dinp, (size_t)BT * C);
}

// ----------------------------------------------------------------------------
// GELU (tanh approximation). CPU twins: gelu_forward, gelu_backward.

#define KERNELS_GELU_K 0.7978845608028654f
__device__ __forceinline__ float kernels__gelu(float x) { return 0.5f * x * (1.0f + tanhf(KERNELS_GELU_K * (x + 0.044715f * x * x * x))); }
__device__ __forceinline__ float kernels__gelu_grad(float x) {
    float th = tanhf(KERNELS_GELU_K * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * KERNELS_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

// Elements [from, n) one per thread (the unaligned case, and the tail after the packs).
__global__ void kernels__gelu_forward(floatX* out, const floatX* inp, size_t from, size_t n) {
    for (size_t i = from + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = kernels__x(kernels__gelu(kernels__f(inp[i])));
    }
}
__global__ void kernels__gelu_forward_packed(floatX* out, const floatX* inp, size_t packs) {
    typedef KernelsVec<floatX, KERNELS_PACK> P;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < packs; i += (size_t)gridDim.x * blockDim.x) {
        P x = kernels__ldv<P>(inp, i), y;
        KERNELS_UNROLL
        for (int e = 0; e < KERNELS_PACK; e++) { y.v[e] = kernels__x(kernels__gelu(kernels__f(x.v[e]))); }
        kernels__stv<P>(out, i, y);
    }
}
static void gelu_forward(const KernelCtx* ctx, floatX* out, const floatX* inp, size_t n) {
    size_t packs = kernels__aligned16(out) && kernels__aligned16(inp) ? n / KERNELS_PACK : 0;
    if (packs) { kernels__gelu_forward_packed<<<kernels__blocks(packs, 256), 256, 0, ctx->stream>>>(out, inp, packs); launchCheck(); }
    size_t from = packs * KERNELS_PACK;
    if (from < n) { kernels__gelu_forward<<<kernels__blocks(n - from, 256), 256, 0, ctx->stream>>>(out, inp, from, n); launchCheck(); }
}

__global__ void kernels__gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t from, size_t n) {
    for (size_t i = from + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dinp[i] = kernels__x(kernels__gelu_grad(kernels__f(inp[i])) * kernels__f(dout[i]));
    }
}
__global__ void kernels__gelu_backward_packed(floatX* dinp, const floatX* inp, const floatX* dout, size_t packs) {
    typedef KernelsVec<floatX, KERNELS_PACK> P;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < packs; i += (size_t)gridDim.x * blockDim.x) {
        P x = kernels__ldv<P>(inp, i), d = kernels__ldv<P>(dout, i), y;
        KERNELS_UNROLL
        for (int e = 0; e < KERNELS_PACK; e++) { y.v[e] = kernels__x(kernels__gelu_grad(kernels__f(x.v[e])) * kernels__f(d.v[e])); }
        kernels__stv<P>(dinp, i, y);
    }
}
// dinp may alias dout: each element is read before it is written, by the same thread
static void gelu_backward(const KernelCtx* ctx, floatX* dinp, const floatX* inp, const floatX* dout, size_t n) {
    size_t packs = kernels__aligned16(dinp) && kernels__aligned16(inp) && kernels__aligned16(dout) ? n / KERNELS_PACK : 0;
    if (packs) { kernels__gelu_backward_packed<<<kernels__blocks(packs, 256), 256, 0, ctx->stream>>>(dinp, inp, dout, packs); launchCheck(); }
    size_t from = packs * KERNELS_PACK;
    if (from < n) { kernels__gelu_backward<<<kernels__blocks(n - from, 256), 256, 0, ctx->stream>>>(dinp, inp, dout, from, n); launchCheck(); }
}

// ----------------------------------------------------------------------------
// Causal attention, native kernels (the fallback and cross-check of the cuDNN path). CPU twins: attention_forward,
// attention_backward (same math: S = scale Q K^T masked, P = softmax, O = P V, lse kept; backward recomputes P).
// One warp per query row (forward, dQ) or key row (dK, dV); the 32 lanes take 32 keys (queries) at a time, each
// computing a full dot product over the head, then the warp accumulates the head vector, each lane owning
// head dims lane, lane + 32, ... (hs <= 128). Online softmax: no T x T matrix in memory. O(T^2 hs) work per head,
// deterministic.

#define KERNELS_ATT_MAX_HS 128
#define KERNELS_ATT_PER_LANE (KERNELS_ATT_MAX_HS / 32)

__device__ __forceinline__ float kernels__dot(const floatX* a, const floatX* b, int hs) {
    float s = 0.0f;
    for (int d = 0; d < hs; d++) { s += kernels__f(a[d]) * kernels__f(b[d]); }
    return s;
}

__global__ void kernels__attention_forward(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH) {
    int hs = C / NH, lane = threadIdx.x % 32;
    long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; // over (b, h, i)
    if (row >= (long)B * NH * T) { return; }
    int i = (int)(row % T), h = (int)((row / T) % NH), b = (int)(row / ((long)T * NH));
    float scale = rsqrtf((float)hs);
    const floatX* base = qkv + (size_t)b * T * 3 * C;
    const floatX* q = base + (size_t)i * 3 * C + h * hs;
    float m = -INFINITY, l = 0.0f, o[KERNELS_ATT_PER_LANE] = {0};
    for (int j0 = 0; j0 <= i; j0 += 32) {
        int j = j0 + lane;
        float s = -INFINITY;
        if (j <= i) { s = scale * kernels__dot(q, base + (size_t)j * 3 * C + C + h * hs, hs); }
        float mc = kernels__warp_max(s), mn = fmaxf(m, mc);
        float p = j <= i ? __expf(s - mn) : 0.0f;
        float corr = __expf(m - mn); // 0 at the first chunk (m = -inf)
        l = l * corr + kernels__warp_sum(p);
        for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) { o[e] *= corr; }
        int nj = i - j0 + 1 < 32 ? i - j0 + 1 : 32;
        for (int jj = 0; jj < nj; jj++) {
            float pj = __shfl_sync(0xffffffffu, p, jj);
            const floatX* v = base + (size_t)(j0 + jj) * 3 * C + 2 * C + h * hs;
            for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
                int d = lane + 32 * e;
                if (d < hs) { o[e] += pj * kernels__f(v[d]); }
            }
        }
        m = mn;
    }
    floatX* orow = out + ((size_t)b * T + i) * C + h * hs;
    for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
        int d = lane + 32 * e;
        if (d < hs) { orow[d] = kernels__x(o[e] / l); }
    }
    if (lane == 0) { lse[((size_t)b * NH + h) * T + i] = m + logf(l); }
}

// ----------------------------------------------------------------------------
// Causal attention on the tensor cores (wmma): the native path for 16-bit storage where the shape allows it (T, C and
// the head size multiples of 16, the head size at most 128, buffers 32-byte aligned: kernels__att_tc_ok); the
// kernels above run the rest, and fp32 storage. Same math and CPU twins as above. Each warp owns one 16-row tile
// (query rows for the forward and dQ, key rows for dK and dV) and walks the 16 x 16 tiles of S = scale Q K^T that its
// rows need: the products on the tensor cores with fp32 accumulation, the softmax between them in fp32 through a
// 16 x 16 scratch tile in shared memory, and P (or dS) rounded to the storage type for the second product, as cuDNN
// does. The warps of a block are independent: no __syncthreads, a __syncwarp
// around each use of a warp's scratch tiles. Deterministic: a fixed order, no atomics.
// The forward takes two passes over the keys, the row maximum and sum first (the log-sum-exp L), then
// O = sum_j exp(S_j - L) V_j, so that O never needs rescaling and stays in the tensor cores' accumulators (whose
// layout across lanes CUDA leaves unspecified): one product more per tile than a one-pass online softmax.
// The backward as the kernels above: dQ by query tiles, dK and dV by key tiles, each recomputing P from L.

#if !defined(ENABLE_FP32)
#include <mma.h>
#define KERNELS_TC_ATT 1
#define KERNELS_TC_WARPS 4
namespace kwmma = nvcuda::wmma;
typedef kwmma::fragment<kwmma::matrix_a, 16, 16, 16, floatX, kwmma::row_major> KernelsFragA;
typedef kwmma::fragment<kwmma::matrix_b, 16, 16, 16, floatX, kwmma::row_major> KernelsFragB;  // B from rows (k, n)
typedef kwmma::fragment<kwmma::matrix_b, 16, 16, 16, floatX, kwmma::col_major> KernelsFragBt; // B = (rows (n, k))^T
typedef kwmma::fragment<kwmma::accumulator, 16, 16, 16, float> KernelsFragC;

// This warp's 16-row tile: batch b, head h, first row t0 (false past the last tile).
__device__ __forceinline__ bool kernels__tc_tile(int B, int T, int NH, int* b, int* h, int* t0) {
    long g = (long)blockIdx.x * KERNELS_TC_WARPS + threadIdx.x / 32, per = T / 16;
    if (g >= (long)B * NH * per) { return false; }
    *t0 = (int)(g % per) * 16;
    *h = (int)((g / per) % NH);
    *b = (int)(g / per / NH);
    return true;
}

// The warp's scratch tile t (16 x 16 fp32, shared) = A R^T over the head: A the 16 x HS tile held as NK fragments, R
// the 16 rows at `rows` (leading dimension ld). S = Q K^T with A = Q, R = K; dP = dO V^T; and the transposed
// S^T = K Q^T, dP^T = V dO^T. Each lane stores its part: a __syncwarp before other lanes read it.
template <int NK, class Tile>
__device__ __forceinline__ void kernels__tc_abt(Tile t, const KernelsFragA* a, const floatX* rows, unsigned ld) {
    KernelsFragC acc;
    kwmma::fill_fragment(acc, 0.0f);
    KERNELS_UNROLL
    for (int k = 0; k < NK; k++) {
        KernelsFragBt rt;
        kwmma::load_matrix_sync(rt, rows + 16 * k, ld);
        kwmma::mma_sync(acc, a[k], rt, acc);
    }
    kwmma::store_matrix_sync(&t[0][0], acc, 16, kwmma::mem_row_major);
}

template <int NK> __device__ __forceinline__ void kernels__tc_zero(KernelsFragC* acc) {
    KERNELS_UNROLL
    for (int k = 0; k < NK; k++) { kwmma::fill_fragment(acc[k], 0.0f); }
}

// f[k] = the k-th 16 columns of the 16 rows at `rows` (a 16 x HS tile of Q, K, V or dO as NK A fragments)
template <int NK>
__device__ __forceinline__ void kernels__tc_load_rows(KernelsFragA* f, const floatX* rows, unsigned ld) {
    KERNELS_UNROLL
    for (int k = 0; k < NK; k++) { kwmma::load_matrix_sync(f[k], rows + 16 * k, ld); }
}

// acc[k] += P R over the 16 rows at `rows`: P a 16 x 16 tile in shared memory (P V, dS K, P^T dO, dS^T Q)
template <int NK>
__device__ __forceinline__ void kernels__tc_accumulate(KernelsFragC* acc, const KernelsFragA& p, const floatX* rows, unsigned ld) {
    KERNELS_UNROLL
    for (int k = 0; k < NK; k++) {
        KernelsFragB rb;
        kwmma::load_matrix_sync(rb, rows + 16 * k, ld);
        kwmma::mma_sync(acc[k], p, rb, acc[k]);
    }
}

// The element-wise work on a 16 x 16 scratch tile: lane l takes column l % 16 of rows l / 16 + 2 q, q = 0..7, so
// each step q reads 32 consecutive floats (no shared-memory bank conflicts), and a row's 16 columns lie in the 16
// lanes of one half-warp (reduced with 4 xor shuffles).
#define KERNELS_TC_ROW(q) (lane / 16 + 2 * (q))

// dst rows (16 x HS, leading dimension ld) = scale * acc, rounded to floatX, through the warp's scratch tile s
template <int NK, class S>
__device__ __forceinline__ void kernels__tc_write(floatX* dst, size_t ld, const KernelsFragC* acc, float scale, S s, int lane) {
    int col = lane % 16;
    KERNELS_UNROLL
    for (int k = 0; k < NK; k++) {
        __syncwarp(); // the tile's last readers are done
        kwmma::store_matrix_sync(&s[0][0], acc[k], 16, kwmma::mem_row_major);
        __syncwarp();
        KERNELS_UNROLL
        for (int q = 0; q < 8; q++) { dst[(size_t)KERNELS_TC_ROW(q) * ld + 16 * k + col] = kernels__x(scale * s[KERNELS_TC_ROW(q)][col]); }
    }
}

template <int HS>
__global__ void kernels__attention_forward_tc(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH) {
    constexpr int NK = HS / 16;
    __shared__ __align__(32) float tc_s[KERNELS_TC_WARPS][16][16];
    __shared__ __align__(32) floatX tc_p[KERNELS_TC_WARPS][16][16];
    int b, h, i0;
    if (!kernels__tc_tile(B, T, NH, &b, &h, &i0)) { return; } // (a whole warp: no block-wide synchronisation below)
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, col = lane % 16;
    unsigned ld = 3 * C;
    const floatX* base = qkv + (size_t)b * T * ld + h * HS;
    float scale = rsqrtf((float)HS);
    KernelsFragA q[NK];
    kernels__tc_load_rows<NK>(q, base + (size_t)i0 * ld, ld);
    // pass 1: each lane's running maximum and sum of its column in its 8 rows, then merged over the half-warp
    float m[8], l[8];
    KERNELS_UNROLL
    for (int e = 0; e < 8; e++) { m[e] = -INFINITY; l[e] = 0.0f; }
    for (int j0 = 0; j0 <= i0; j0 += 16) {
        kernels__tc_abt<NK>(tc_s[w], q, base + C + (size_t)j0 * ld, ld);
        __syncwarp();
        KERNELS_UNROLL
        for (int e = 0; e < 8; e++) {
            int r = KERNELS_TC_ROW(e);
            if (j0 + col > i0 + r) { continue; } // causal (the diagonal tile only)
            float x = scale * tc_s[w][r][col];
            if (x > m[e]) { l[e] = l[e] * __expf(m[e] - x) + 1.0f; m[e] = x; }
            else { l[e] += __expf(x - m[e]); }
        }
        __syncwarp();
    }
    float L[8];
    KERNELS_UNROLL
    for (int e = 0; e < 8; e++) {
        for (int o = 1; o < 16; o <<= 1) { // (a lane whose column is masked in every tile so far has m = -inf, l = 0)
            float m2 = __shfl_xor_sync(0xffffffffu, m[e], o), l2 = __shfl_xor_sync(0xffffffffu, l[e], o), M = fmaxf(m[e], m2);
            l[e] = (m[e] == -INFINITY ? 0.0f : l[e] * __expf(m[e] - M)) + (m2 == -INFINITY ? 0.0f : l2 * __expf(m2 - M));
            m[e] = M;
        }
        L[e] = m[e] + logf(l[e]); // (key 0 is in every row: m finite)
    }
    // pass 2: O = sum_j P_j V_j with P = exp(scale S - L), rounded to floatX for the product
    KernelsFragC o[NK];
    kernels__tc_zero<NK>(o);
    for (int j0 = 0; j0 <= i0; j0 += 16) {
        kernels__tc_abt<NK>(tc_s[w], q, base + C + (size_t)j0 * ld, ld);
        __syncwarp();
        KERNELS_UNROLL
        for (int e = 0; e < 8; e++) {
            int r = KERNELS_TC_ROW(e);
            tc_p[w][r][col] = kernels__x(j0 + col <= i0 + r ? __expf(scale * tc_s[w][r][col] - L[e]) : 0.0f);
        }
        __syncwarp();
        KernelsFragA pa;
        kwmma::load_matrix_sync(pa, &tc_p[w][0][0], 16);
        kernels__tc_accumulate<NK>(o, pa, base + 2 * C + (size_t)j0 * ld, ld);
    }
    kernels__tc_write<NK>(out + ((size_t)b * T + i0) * C + h * HS, (size_t)C, o, 1.0f, tc_s[w], lane);
    if (col == 0) {
        KERNELS_UNROLL
        for (int e = 0; e < 8; e++) { lse[((size_t)b * NH + h) * T + i0 + KERNELS_TC_ROW(e)] = L[e]; }
    }
}

// dQ_i = scale sum_j dS_ij K_j, dS = P (dP - D), dP = dO V^T, by query tiles
template <int HS>
__global__ void kernels__attention_dq_tc(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* Dbuf,
                                         int B, int T, int C, int NH) {
    constexpr int NK = HS / 16;
    __shared__ __align__(32) float tc_s[KERNELS_TC_WARPS][16][16], tc_d[KERNELS_TC_WARPS][16][16];
    __shared__ __align__(32) floatX tc_p[KERNELS_TC_WARPS][16][16];
    int b, h, i0;
    if (!kernels__tc_tile(B, T, NH, &b, &h, &i0)) { return; }
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, col = lane % 16;
    unsigned ld = 3 * C;
    const floatX* base = qkv + (size_t)b * T * ld + h * HS;
    const floatX* dob = dout + (size_t)b * T * C + h * HS;
    float scale = rsqrtf((float)HS);
    KernelsFragA q[NK], dO[NK];
    kernels__tc_load_rows<NK>(q, base + (size_t)i0 * ld, ld);
    kernels__tc_load_rows<NK>(dO, dob + (size_t)i0 * C, (unsigned)C);
    float L[8], D[8];
    KERNELS_UNROLL
    for (int e = 0; e < 8; e++) {
        size_t si = ((size_t)b * NH + h) * T + i0 + KERNELS_TC_ROW(e);
        L[e] = lse[si];
        D[e] = Dbuf[si];
    }
    KernelsFragC dq[NK];
    kernels__tc_zero<NK>(dq);
    for (int j0 = 0; j0 <= i0; j0 += 16) {
        kernels__tc_abt<NK>(tc_s[w], q, base + C + (size_t)j0 * ld, ld);      // S
        kernels__tc_abt<NK>(tc_d[w], dO, base + 2 * C + (size_t)j0 * ld, ld); // dP
        __syncwarp();
        KERNELS_UNROLL
        for (int e = 0; e < 8; e++) {
            int r = KERNELS_TC_ROW(e);
            float p = j0 + col <= i0 + r ? __expf(scale * tc_s[w][r][col] - L[e]) : 0.0f;
            tc_p[w][r][col] = kernels__x(p * (tc_d[w][r][col] - D[e]));
        }
        __syncwarp();
        KernelsFragA dsa;
        kwmma::load_matrix_sync(dsa, &tc_p[w][0][0], 16);
        kernels__tc_accumulate<NK>(dq, dsa, base + C + (size_t)j0 * ld, ld);
    }
    kernels__tc_write<NK>(dqkv + ((size_t)b * T + i0) * ld + h * HS, (size_t)ld, dq, scale, tc_s[w], lane);
}

// dV_j = sum_i P_ij dO_i, dK_j = scale sum_i dS_ij Q_i, by key tiles (S^T = K Q^T and dP^T = V dO^T: rows are keys,
// columns queries, so each lane needs one query's L and D per tile)
template <int HS>
__global__ void kernels__attention_dkv_tc(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* Dbuf,
                                          int B, int T, int C, int NH) {
    constexpr int NK = HS / 16;
    __shared__ __align__(32) float tc_s[KERNELS_TC_WARPS][16][16], tc_d[KERNELS_TC_WARPS][16][16];
    __shared__ __align__(32) floatX tc_p[KERNELS_TC_WARPS][16][16], tc_g[KERNELS_TC_WARPS][16][16];
    int b, h, j0;
    if (!kernels__tc_tile(B, T, NH, &b, &h, &j0)) { return; }
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, col = lane % 16;
    unsigned ld = 3 * C;
    const floatX* base = qkv + (size_t)b * T * ld + h * HS;
    const floatX* dob = dout + (size_t)b * T * C + h * HS;
    float scale = rsqrtf((float)HS);
    KernelsFragA kf[NK], vf[NK];
    kernels__tc_load_rows<NK>(kf, base + C + (size_t)j0 * ld, ld);
    kernels__tc_load_rows<NK>(vf, base + 2 * C + (size_t)j0 * ld, ld);
    KernelsFragC dk[NK], dv[NK];
    kernels__tc_zero<NK>(dk);
    kernels__tc_zero<NK>(dv);
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = Dbuf + ((size_t)b * NH + h) * T;
    for (int i0 = j0; i0 < T; i0 += 16) {
        kernels__tc_abt<NK>(tc_s[w], kf, base + (size_t)i0 * ld, ld);      // S^T
        kernels__tc_abt<NK>(tc_d[w], vf, dob + (size_t)i0 * C, (unsigned)C); // dP^T
        float Li = lse_bh[i0 + col], Di = D_bh[i0 + col]; // this lane's query
        __syncwarp();
        KERNELS_UNROLL
        for (int e = 0; e < 8; e++) { // row r: key j0 + r
            int r = KERNELS_TC_ROW(e);
            float p = 0.0f, ds = 0.0f;
            if (j0 + r <= i0 + col) {
                p = __expf(scale * tc_s[w][r][col] - Li);
                ds = p * (tc_d[w][r][col] - Di);
            }
            tc_p[w][r][col] = kernels__x(p);
            tc_g[w][r][col] = kernels__x(ds);
        }
        __syncwarp();
        KernelsFragA pa, ga;
        kwmma::load_matrix_sync(pa, &tc_p[w][0][0], 16);
        kwmma::load_matrix_sync(ga, &tc_g[w][0][0], 16);
        kernels__tc_accumulate<NK>(dv, pa, dob + (size_t)i0 * C, (unsigned)C);
        kernels__tc_accumulate<NK>(dk, ga, base + (size_t)i0 * ld, ld);
    }
    floatX* dkrow = dqkv + ((size_t)b * T + j0) * ld + C + h * HS;
    kernels__tc_write<NK>(dkrow, (size_t)ld, dk, scale, tc_s[w], lane);
    kernels__tc_write<NK>(dkrow + C, (size_t)ld, dv, 1.0f, tc_s[w], lane);
}

// Whether the tensor-core kernels take this shape (the pointers: every tile a wmma load or store touches must be
// 32-byte aligned, which the multiples of 16 keep once the buffers are)
static int kernels__att_tc_ok(int T, int C, int NH, std::initializer_list<const void*> bufs) {
    int hs = C / NH;
    if (T % 16 != 0 || C % 16 != 0 || C % NH != 0 || hs % 16 != 0 || hs > 128) { return 0; }
    for (const void* p : bufs) { if ((uintptr_t)p % 32 != 0) { return 0; } }
    return 1;
}

// Calls launch(std::integral_constant<int, HS>) for the head size hs (16, 32, ..., 128): the kernels are templates
// on it, so each warp's fragments are arrays of known length (registers, not local memory).
template <int HS, class F> static void kernels__tc_dispatch(F launch, int hs) {
    if (hs == HS) { launch(std::integral_constant<int, HS>()); return; }
    if constexpr (HS < 128) { kernels__tc_dispatch<HS + 16>(launch, hs); }
}
static unsigned kernels__tc_grid(int B, int T, int NH) {
    long warps = (long)B * NH * (T / 16);
    return (unsigned)((warps + KERNELS_TC_WARPS - 1) / KERNELS_TC_WARPS);
}
#endif // !ENABLE_FP32

#ifdef USE_CUDNN
#include "cudnn_att.cuh" // defines: cudnn_attention_forward, cudnn_attention_backward (and the graph builders)
#endif

static void kernels__attention_check(int C, int NH) {
    if (C % NH != 0 || C / NH > KERNELS_ATT_MAX_HS) { fatal("attention: head size %d is not supported (at most %d)", C / NH, KERNELS_ATT_MAX_HS); }
}

static void attention_forward(const KernelCtx* ctx, floatX* out, float* lse, const floatX* qkv, int B, int T, int C,
                              int NH) {
#ifdef USE_CUDNN
    if (ctx->attention_cudnn && cudnn_attention_forward(ctx, out, lse, qkv, B, T, C, NH)) { return; }
#endif
    kernels__attention_check(C, NH);
#ifdef KERNELS_TC_ATT
    if (kernels__att_tc_ok(T, C, NH, {out, qkv})) {
        kernels__tc_dispatch<16>([&](auto hs) {
            constexpr int HS = decltype(hs)::value;
            kernels__attention_forward_tc<HS><<<kernels__tc_grid(B, T, NH), 32 * KERNELS_TC_WARPS, 0, ctx->stream>>>(out, lse, qkv, B, T, C, NH);
        }, C / NH);
        launchCheck();
        return;
    }
#endif
    long rows = (long)B * NH * T;
    kernels__attention_forward<<<(unsigned)((rows + 7) / 8), 256, 0, ctx->stream>>>(out, lse, qkv, B, T, C, NH);
    launchCheck();
}

// D_i = sum_d dO_i[d] O_i[d], one warp per (b, h, i)
__global__ void kernels__attention_D(float* Dbuf, const floatX* dout, const floatX* out, int B, int T, int C, int NH) {
    int hs = C / NH, lane = threadIdx.x % 32;
    long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= (long)B * NH * T) { return; }
    int i = (int)(row % T), h = (int)((row / T) % NH), b = (int)(row / ((long)T * NH));
    const floatX* o = out + ((size_t)b * T + i) * C + h * hs;
    const floatX* dO = dout + ((size_t)b * T + i) * C + h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32) { s += kernels__f(o[d]) * kernels__f(dO[d]); }
    s = kernels__warp_sum(s);
    if (lane == 0) { Dbuf[((size_t)b * NH + h) * T + i] = s; }
}

// dQ_i = scale sum_{j<=i} dS_ij K_j, dS_ij = P_ij (dO_i . V_j - D_i), P_ij = exp(scale Q_i . K_j - lse_i)
__global__ void kernels__attention_dq(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* Dbuf,
                                      int B, int T, int C, int NH) {
    int hs = C / NH, lane = threadIdx.x % 32;
    long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= (long)B * NH * T) { return; }
    int i = (int)(row % T), h = (int)((row / T) % NH), b = (int)(row / ((long)T * NH));
    float scale = rsqrtf((float)hs);
    const floatX* base = qkv + (size_t)b * T * 3 * C;
    const floatX* q = base + (size_t)i * 3 * C + h * hs;
    const floatX* dO = dout + ((size_t)b * T + i) * C + h * hs;
    size_t si = ((size_t)b * NH + h) * T + i;
    float l = lse[si], Di = Dbuf[si], acc[KERNELS_ATT_PER_LANE] = {0};
    for (int j0 = 0; j0 <= i; j0 += 32) {
        int j = j0 + lane;
        float ds = 0.0f;
        if (j <= i) {
            const floatX* k = base + (size_t)j * 3 * C + C + h * hs;
            const floatX* v = k + C;
            float p = __expf(scale * kernels__dot(q, k, hs) - l);
            ds = p * (kernels__dot(dO, v, hs) - Di);
        }
        int nj = i - j0 + 1 < 32 ? i - j0 + 1 : 32;
        for (int jj = 0; jj < nj; jj++) {
            float dsj = __shfl_sync(0xffffffffu, ds, jj);
            const floatX* k = base + (size_t)(j0 + jj) * 3 * C + C + h * hs;
            for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
                int d = lane + 32 * e;
                if (d < hs) { acc[e] += dsj * kernels__f(k[d]); }
            }
        }
    }
    floatX* dq = dqkv + (size_t)b * T * 3 * C + (size_t)i * 3 * C + h * hs;
    for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
        int d = lane + 32 * e;
        if (d < hs) { dq[d] = kernels__x(scale * acc[e]); }
    }
}

// dV_j = sum_{i>=j} P_ij dO_i;  dK_j = scale sum_{i>=j} dS_ij Q_i
__global__ void kernels__attention_dkv(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* Dbuf,
                                       int B, int T, int C, int NH) {
    int hs = C / NH, lane = threadIdx.x % 32;
    long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= (long)B * NH * T) { return; }
    int j = (int)(row % T), h = (int)((row / T) % NH), b = (int)(row / ((long)T * NH));
    float scale = rsqrtf((float)hs);
    const floatX* base = qkv + (size_t)b * T * 3 * C;
    const floatX* k = base + (size_t)j * 3 * C + C + h * hs;
    const floatX* v = k + C;
    float dk[KERNELS_ATT_PER_LANE] = {0}, dv[KERNELS_ATT_PER_LANE] = {0};
    for (int i0 = j; i0 < T; i0 += 32) {
        int i = i0 + lane;
        float p = 0.0f, ds = 0.0f;
        if (i < T) {
            const floatX* q = base + (size_t)i * 3 * C + h * hs;
            const floatX* dO = dout + ((size_t)b * T + i) * C + h * hs;
            size_t si = ((size_t)b * NH + h) * T + i;
            p = __expf(scale * kernels__dot(q, k, hs) - lse[si]);
            ds = p * (kernels__dot(dO, v, hs) - Dbuf[si]);
        }
        int ni = T - i0 < 32 ? T - i0 : 32;
        for (int ii = 0; ii < ni; ii++) {
            float pi = __shfl_sync(0xffffffffu, p, ii), dsi = __shfl_sync(0xffffffffu, ds, ii);
            const floatX* q = base + (size_t)(i0 + ii) * 3 * C + h * hs;
            const floatX* dO = dout + ((size_t)b * T + i0 + ii) * C + h * hs;
            for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
                int d = lane + 32 * e;
                if (d < hs) { dv[e] += pi * kernels__f(dO[d]); dk[e] += dsi * kernels__f(q[d]); }
            }
        }
    }
    floatX* dkr = dqkv + (size_t)b * T * 3 * C + (size_t)j * 3 * C + C + h * hs;
    floatX* dvr = dkr + C;
    for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
        int d = lane + 32 * e;
        if (d < hs) { dkr[d] = kernels__x(scale * dk[e]); dvr[d] = kernels__x(dv[e]); }
    }
}

static void attention_backward(const KernelCtx* ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                               const floatX* out, const float* lse, int B, int T, int C, int NH) {
#ifdef USE_CUDNN
    if (ctx->attention_cudnn && cudnn_attention_backward(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH)) { return; }
#endif
    kernels__attention_check(C, NH);
    long rows = (long)B * NH * T;
    float* Dbuf = kernels__col_partials(ctx, (size_t)rows);
    unsigned grid = (unsigned)((rows + 7) / 8);
    kernels__attention_D<<<grid, 256, 0, ctx->stream>>>(Dbuf, dout, out, B, T, C, NH);
    launchCheck();
#ifdef KERNELS_TC_ATT
    if (kernels__att_tc_ok(T, C, NH, {dqkv, dout, qkv})) {
        unsigned tg = kernels__tc_grid(B, T, NH);
        kernels__tc_dispatch<16>([&](auto hs) {
            constexpr int HS = decltype(hs)::value;
            kernels__attention_dq_tc<HS><<<tg, 32 * KERNELS_TC_WARPS, 0, ctx->stream>>>(dqkv, dout, qkv, lse, Dbuf, B, T, C, NH);
        }, C / NH);
        launchCheck();
        kernels__tc_dispatch<16>([&](auto hs) {
            constexpr int HS = decltype(hs)::value;
            kernels__attention_dkv_tc<HS><<<tg, 32 * KERNELS_TC_WARPS, 0, ctx->stream>>>(dqkv, dout, qkv, lse, Dbuf, B, T, C, NH);
        }, C / NH);
        launchCheck();
        return;
    }
#endif
    kernels__attention_dq<<<grid, 256, 0, ctx->stream>>>(dqkv, dout, qkv, lse, Dbuf, B, T, C, NH);
    launchCheck();
    kernels__attention_dkv<<<grid, 256, 0, ctx->stream>>>(dqkv, dout, qkv, lse, Dbuf, B, T, C, NH);
    launchCheck();
}

// ----------------------------------------------------------------------------
// LM head + softmax + cross-entropy. CPU twin: classifier_forward_backward. Per chunk of rows: logits by cuBLASLt
// into the chunk (floatX), then one block per row turns them into the loss and, in place, into dlogits =
// dloss_scale (softmax - onehot) (floatX, padded columns zero), never materialising fp32 probabilities; then dx
// and dwte by cuBLASLt.

// (m, s) <- the maximum and the sum of exp(x - max) over the union of two sets given as (m, s) and (m2, s2); an empty
// set is (-inf, 0). Commutative bit for bit, so every lane of a butterfly ends with the same result.
__device__ __forceinline__ void kernels__lse_merge(float& m, float& s, float m2, float s2) {
    if (m2 == -INFINITY) { return; } // (two empty sets would give exp(-inf + inf) = NaN below)
    float M = fmaxf(m, m2);
    s = s * __expf(m - M) + s2 * __expf(m2 - M);
    m = M;
}

// The maximum m of z[0..n) and the sum s of exp(z - m), by the whole block (blockDim.x a multiple of 32) in one
// pass (the online softmax: the running sum is rescaled when the maximum grows), each combined over the warps in a
// fixed order; every thread receives both. Packs of VEC: z 16-byte aligned and readable up to n rounded up to VEC.
template <int VEC>
__device__ void kernels__row_max_sumexp(const floatX* z, int n, float* m_out, float* s_out) {
    typedef KernelsVec<floatX, VEC> P;
    __shared__ float red_m[32], red_s[32];
    __shared__ float bcast_m, bcast_s;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    float m = -INFINITY, s = 0.0f;
    for (int p = threadIdx.x; p < (n + VEC - 1) / VEC; p += blockDim.x) {
        P zv = kernels__ldv<P>(z, p);
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) {
            if (p * VEC + k >= n) { break; }
            float x = kernels__f(zv.v[k]);
            if (x > m) { s = s * __expf(m - x) + 1.0f; m = x; }
            else { s += __expf(x - m); }
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        kernels__lse_merge(m, s, m2, s2);
    }
    if (lane == 0) { red_m[warp] = m; red_s[warp] = s; }
    __syncthreads();
    if (threadIdx.x == 0) {
        float tm = -INFINITY, ts = 0.0f;
        for (int w = 0; w < nw; w++) { kernels__lse_merge(tm, ts, red_m[w], red_s[w]); }
        bcast_m = tm;
        bcast_s = ts;
    }
    __syncthreads();
    *m_out = bcast_m;
    *s_out = bcast_s;
}

// Packs of VEC over the row (Vp a multiple of VEC, logits 16-byte aligned: kernels__rows_packed).
template <int VEC>
__global__ void kernels__classifier_softmax(floatX* logits, float* losses, const int32_t* targets, float dloss_scale, int V, int Vp,
                                            int want_grad) {
    typedef KernelsVec<floatX, VEC> P;
    int r = blockIdx.x;
    floatX* z = logits + (size_t)r * Vp;
    int tgt = targets[r];
    float m, sum;
    kernels__row_max_sumexp<VEC>(z, V, &m, &sum);
    float lse = m + logf(sum);
    if (threadIdx.x == 0) { losses[r] = tgt >= 0 ? lse - kernels__f(z[tgt]) : 0.0f; }
    __syncthreads(); // z[tgt] is read above before any thread overwrites it
    if (!want_grad) { return; }
    float sc = tgt >= 0 ? dloss_scale : 0.0f;
    for (int p = threadIdx.x; p < Vp / VEC; p += blockDim.x) {
        P zv = kernels__ldv<P>(z, p), gv;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) {
            int j = p * VEC + k;
            float g = j < V ? sc * (__expf(kernels__f(zv.v[k]) - lse) - (j == tgt ? 1.0f : 0.0f)) : 0.0f;
            gv.v[k] = kernels__x(g);
        }
        kernels__stv<P>(z, p, gv);
    }
}

static void classifier_forward_backward(const KernelCtx* ctx, float* losses, floatX* dx, float* dwte, floatX* chunk,
                                        int chunk_rows, const floatX* x, const floatX* wte, const int32_t* targets,
                                        float dloss_scale, int BT, int C, int V, int Vp, int acc) {
    for (int r0 = 0; r0 < BT; r0 += chunk_rows) {
        int rows = BT - r0 < chunk_rows ? BT - r0 : chunk_rows;
        const floatX* xr = x + (size_t)r0 * C;
        matmul_forward(ctx, chunk, xr, wte, NULL, rows, C, Vp);
        if (kernels__rows_packed(Vp, {chunk})) {
            kernels__classifier_softmax<KERNELS_PACK><<<rows, 1024, 0, ctx->stream>>>(chunk, losses + r0, targets + r0, dloss_scale, V, Vp, dx != NULL);
        } else {
            kernels__classifier_softmax<1><<<rows, 1024, 0, ctx->stream>>>(chunk, losses + r0, targets + r0, dloss_scale, V, Vp, dx != NULL);
        }
        launchCheck();
        if (dx) {
            // dx_r (rows, C) = dlogits (rows, Vp) @ wte (Vp, C);  dwte (Vp, C) (+)= dlogits^T @ x_r
            kernels__matmul_lt(ctx, dx + (size_t)r0 * C, 0, wte, 0, C, chunk, 0, Vp, NULL, C, rows, Vp, 0.0f);
            kernels__matmul_lt(ctx, dwte, 1, xr, 0, C, chunk, 1, Vp, NULL, C, Vp, rows, (acc || r0 > 0) ? 1.0f : 0.0f);
        }
    }
}

// CPU twins: classifier_vp_stats, classifier_vp_apply (vocabulary-parallel cross-entropy), one block per row.
template <int VEC>
__global__ void kernels__vp_stats(float* stats, const floatX* logits, const int32_t* targets, int vocab_lo, int Vp_l, int real) {
    int r = blockIdx.x;
    const floatX* z = logits + (size_t)r * Vp_l;
    float m, s;
    kernels__row_max_sumexp<VEC>(z, real, &m, &s);
    if (threadIdx.x == 0) {
        int tg = targets[r] - vocab_lo;
        stats[3 * r] = m;
        stats[3 * r + 1] = real > 0 ? s : 0.0f;
        stats[3 * r + 2] = targets[r] >= 0 && tg >= 0 && tg < real ? kernels__f(z[tg]) : 0.0f;
    }
}

static void classifier_vp_stats(const KernelCtx* ctx, float* stats, const floatX* logits, const int32_t* targets, int rows,
                                int vocab_lo, int Vp_l, int V) {
    int real = V - vocab_lo < Vp_l ? V - vocab_lo : Vp_l;
    if (real < 0) { real = 0; }
    if (kernels__rows_packed(Vp_l, {logits})) {
        kernels__vp_stats<KERNELS_PACK><<<rows, 1024, 0, ctx->stream>>>(stats, logits, targets, vocab_lo, Vp_l, real);
    } else {
        kernels__vp_stats<1><<<rows, 1024, 0, ctx->stream>>>(stats, logits, targets, vocab_lo, Vp_l, real);
    }
    launchCheck();
}

template <int VEC>
__global__ void kernels__vp_apply(float* losses, floatX* logits, const float* stats, const int32_t* targets, float dloss_scale,
                                  int vocab_lo, int Vp_l, int real, int want_grad) {
    typedef KernelsVec<floatX, VEC> P;
    int r = blockIdx.x, tgt = targets[r];
    float M = stats[3 * r], S = stats[3 * r + 1], zt = stats[3 * r + 2];
    if (threadIdx.x == 0) { losses[r] = tgt >= 0 ? M + logf(S) - zt : 0.0f; }
    if (!want_grad) { return; }
    floatX* z = logits + (size_t)r * Vp_l;
    float sc = tgt >= 0 ? dloss_scale : 0.0f, inv = 1.0f / S;
    int t = tgt - vocab_lo;
    for (int p = threadIdx.x; p < Vp_l / VEC; p += blockDim.x) {
        P zv = kernels__ldv<P>(z, p), gv;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) {
            int j = p * VEC + k;
            float g = j < real ? sc * (__expf(kernels__f(zv.v[k]) - M) * inv - (j == t ? 1.0f : 0.0f)) : 0.0f;
            gv.v[k] = kernels__x(g);
        }
        kernels__stv<P>(z, p, gv);
    }
}

static void classifier_vp_apply(const KernelCtx* ctx, float* losses, floatX* logits, const float* stats, const int32_t* targets,
                                float dloss_scale, int rows, int vocab_lo, int Vp_l, int V, int want_grad) {
    int real = V - vocab_lo < Vp_l ? V - vocab_lo : Vp_l;
    if (real < 0) { real = 0; }
    if (kernels__rows_packed(Vp_l, {logits})) {
        kernels__vp_apply<KERNELS_PACK><<<rows, 1024, 0, ctx->stream>>>(losses, logits, stats, targets, dloss_scale, vocab_lo, Vp_l, real, want_grad);
    } else {
        kernels__vp_apply<1><<<rows, 1024, 0, ctx->stream>>>(losses, logits, stats, targets, dloss_scale, vocab_lo, Vp_l, real, want_grad);
    }
    launchCheck();
}

// CPU twin: classifier_logits_row. out (Vp) fp32 = x (C) @ wte^T, through a floatX row as the stored logits are.
static void classifier_logits_row(const KernelCtx* cctx, float* out, const floatX* x, const floatX* wte, int C, int Vp) {
    KernelCtx* ctx = (KernelCtx*)cctx;
    ctx->row_scratch = (floatX*)kernels__grow(ctx, ctx->row_scratch, &ctx->row_scratch_bytes, (size_t)Vp * sizeof(floatX));
    matmul_forward(ctx, ctx->row_scratch, x, wte, NULL, 1, C, Vp);
    dev_x_to_f32(ctx, out, ctx->row_scratch, (size_t)Vp);
}

// ----------------------------------------------------------------------------
// Reductions (two passes over fixed partials, so the sums are reproducible). CPU twins: sum_accumulate,
// sum_squares_accumulate, add_inplace.

__global__ void kernels__partial_sums(double* part, const float* x, size_t n, int squares) {
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double v = x[i];
        s += squares ? v * v : v;
    }
    s = kernels__block_sum_d(s);
    if (threadIdx.x == 0) { part[blockIdx.x] = s; }
}
__global__ void kernels__finish_sum(double* acc, const double* part, int nparts) {
    double s = 0.0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) { s += part[i]; }
    s = kernels__block_sum_d(s);
    if (threadIdx.x == 0) { *acc += s; }
}

static void kernels__sum(const KernelCtx* ctx, double* acc, const float* x, size_t n, int squares) {
    unsigned blocks = (unsigned)((n + 1023) / 1024);
    if (blocks > KERNELS_REDUCE_BLOCKS) { blocks = KERNELS_REDUCE_BLOCKS; }
    if (blocks == 0) { blocks = 1; }
    kernels__partial_sums<<<blocks, 1024, 0, ctx->stream>>>(ctx->partials, x, n, squares);
    launchCheck();
    kernels__finish_sum<<<1, 1024, 0, ctx->stream>>>(acc, ctx->partials, (int)blocks);
    launchCheck();
}

static void sum_accumulate(const KernelCtx* ctx, double* acc, const float* x, size_t n) { kernels__sum(ctx, acc, x, n, 0); }
static void sum_squares_accumulate(const KernelCtx* ctx, double* out, const float* x, size_t n) { kernels__sum(ctx, out, x, n, 1); }

__global__ void kernels__add(float* y, const float* x, size_t n) {
    size_t packs = n / 4;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < packs; i += (size_t)gridDim.x * blockDim.x) {
        float4 a = ((float4*)y)[i], b = ((const float4*)x)[i];
        a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
        ((float4*)y)[i] = a;
    }
    if (blockIdx.x == 0 && threadIdx.x < n - packs * 4) { y[packs * 4 + threadIdx.x] += x[packs * 4 + threadIdx.x]; }
}
__global__ void kernels__add_scalar(float* y, const float* x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { y[i] += x[i]; }
}
static void add_inplace(const KernelCtx* ctx, float* y, const float* x, size_t n) {
    if (kernels__aligned16(y) && kernels__aligned16(x)) {
        kernels__add<<<kernels__blocks(n / 4 + 1, 256), 256, 0, ctx->stream>>>(y, x, n);
    } else {
        kernels__add_scalar<<<kernels__blocks(n, 256), 256, 0, ctx->stream>>>(y, x, n);
    }
    launchCheck();
}

// ----------------------------------------------------------------------------
// AdamW. CPU twin: adamw_update (the same update in the same fp32 operations, the same stochastic rounding).
// One launch per segment (tensor): its elements from the first index a where every array is 16-byte aligned go in
// packs of KERNELS_PACK (16 bytes of floatX, KERNELS_PACK floats of each fp32 array), the few before a and after the
// last whole pack one per thread.

typedef struct { float lr, b1, b2, eps, wd, gs, bc1, bc2; int t, dtype; uint64_t seed; } KernelsAdamW;

// One element: updates its moments in place and writes the parameter (the master copy and the rounded compute copy
// with master weights; the parameter itself without). i is the element's flat index, the stochastic rounding's key.
__device__ __forceinline__ void kernels__adamw_elem(const KernelsAdamW& h, size_t i, float g, float& m, float& v, float& master_p,
                                                    floatX& p, int has_master) {
    g = h.gs * g;
    m = h.b1 * m + (1.0f - h.b1) * g;
    v = h.b2 * v + (1.0f - h.b2) * g * g;
    float mhat = m / h.bc1, vhat = v / h.bc2;
    float x = has_master ? master_p : kernels__f(p);
    x -= h.lr * (mhat / (sqrtf(vhat) + h.eps) + h.wd * x);
    if (has_master) {
        master_p = x;
        p = kernels__x(round_stochastic(x, h.dtype, h.seed, (uint64_t)h.t, i)); // exact: already representable
    } else {
        p = kernels__x(x);
    }
}

// Elements [s, a) and [b, e) one per thread, packs of KERNELS_PACK over [a, b). Arrays are indexed from lo.
__global__ void kernels__adamw(floatX* params, float* master, const float* grads, float* m, float* v, size_t lo, size_t s, size_t a,
                               size_t b, size_t e, KernelsAdamW h) {
    const int VEC = KERNELS_PACK;
    typedef KernelsVec<floatX, VEC> P;
    typedef KernelsVec<float, VEC> F;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, nth = (size_t)gridDim.x * blockDim.x;
    for (int part = 0; part < 2; part++) { // the head, then the tail (all of it when a = b = e: no common alignment)
        for (size_t i = (part == 0 ? s : b) + tid; i < (part == 0 ? a : e); i += nth) {
            size_t k = i - lo;
            float unused = 0.0f;
            kernels__adamw_elem(h, i, grads[k], m[k], v[k], master ? master[k] : unused, params[k], master != NULL);
        }
    }
    size_t ka = a - lo;
    for (size_t j = tid; j < (b - a) / VEC; j += nth) {
        P pv = kernels__ldv<P>(params + ka, j);
        F gv = kernels__ldv<F>(grads + ka, j), mv = kernels__ldv<F>(m + ka, j), vv = kernels__ldv<F>(v + ka, j);
        F wv = master ? kernels__ldv<F>(master + ka, j) : F();
        KERNELS_UNROLL
        for (int q = 0; q < VEC; q++) { kernels__adamw_elem(h, a + j * VEC + q, gv.v[q], mv.v[q], vv.v[q], wv.v[q], pv.v[q], master != NULL); }
        kernels__stv<P>(params + ka, j, pv);
        kernels__stv<F>(m + ka, j, mv);
        kernels__stv<F>(v + ka, j, vv);
        if (master) { kernels__stv<F>(master + ka, j, wv); }
    }
}

// The first index in [s, e) where every array is 16-byte aligned (within one period of the alignments: the floatX
// array repeats every KERNELS_PACK elements, the fp32 ones every 4), or e when there is none.
static size_t kernels__adamw_aligned_start(const floatX* params, const float* master, const float* grads, const float* m,
                                           const float* v, size_t lo, size_t s, size_t e) {
    for (size_t a = s; a < e && a < s + 2 * KERNELS_PACK; a++) {
        size_t k = a - lo;
        if (kernels__aligned16(params + k) && kernels__aligned16(grads + k) && kernels__aligned16(m + k) && kernels__aligned16(v + k) &&
            (!master || kernels__aligned16(master + k))) { return a; }
    }
    return e;
}

static void adamw_update(const KernelCtx* ctx, floatX* params, float* master, const float* grads, float* m, float* v,
                         size_t lo, size_t hi, const AdamWSegment* segs, int nseg, const AdamWHyper* hp) {
    KernelsAdamW h = {hp->lr, hp->beta1, hp->beta2, hp->eps, 0.0f, hp->grad_scale, 1.0f - powf(hp->beta1, (float)hp->t),
                      1.0f - powf(hp->beta2, (float)hp->t), hp->t, ctx->dtype, hp->sr_seed};
    for (int i = 0; i < nseg; i++) {
        size_t s = segs[i].offset > lo ? segs[i].offset : lo;
        size_t e = segs[i].offset + segs[i].size < hi ? segs[i].offset + segs[i].size : hi;
        if (s >= e) { continue; }
        h.wd = segs[i].decay ? hp->weight_decay : 0.0f;
        size_t a = kernels__adamw_aligned_start(params, master, grads, m, v, lo, s, e);
        size_t b = a + (e - a) / KERNELS_PACK * KERNELS_PACK;
        size_t threads = (b - a) / KERNELS_PACK > (a - s) + (e - b) ? (b - a) / KERNELS_PACK : (a - s) + (e - b);
        kernels__adamw<<<kernels__blocks(threads, 256), 256, 0, ctx->stream>>>(params, master, grads, m, v, lo, s, a, b, e, h);
        launchCheck();
    }
}

#endif // KERNELS_CUDA_CUH
