/*
tests/test_cuda_emu.cu: the CPU emulation of the CUDA backend (tests/cuda_emu) is itself tested here, since the
GPU check's --emu mode and make test trust it: built like test_gpt_emu (launches rewritten, then g++), never by nvcc.

    make tests/test_cuda_emu && ./tests/test_cuda_emu

What it checks:
  - kernels: thread and block indices over 2D grids and blocks, shared memory with __syncthreads, the shuffles
    (xor, broadcast, down) against their definitions, a 1024-thread block reduction;
  - cuBLASLt: every transpose combination, beta, the BIAS, GELU_AUX_BIAS and DGELU epilogues, bf16 storage, against
    a double-precision product;
  - cub's pair sort: stable, by value;
  - CUDA_EMU_ORDER: blocks, and a block's threads, in index order and reversed (a chain of each reading its
    neighbour's write comes out as that order makes it);
  - stream semantics: a pinned buffer refilled before its copy ran, and a stream reading another's result without
    waiting on its event, give stale data as on a GPU; with the synchronisation they do not; an NCCL send's buffer
    rewritten on another stream with nothing ordering the write after the send is caught, and allowed when an event
    wait (direct or through a third stream) or a host synchronisation orders it;
  - that it catches bugs: each case below runs in a child process that must stop with the named complaint (a write
    past an allocation, a host pointer passed to a kernel, __syncthreads after a thread returned, a full-mask
    shuffle waiting for a returned lane, a copy in the wrong direction, a pointer less aligned than promised to
    cuBLASLt, lanes of a warp at different operations, a misaligned 16-byte vector access), and an invalid launch
    configuration must be reported by cudaGetLastError as on a GPU;
  - wmma: a product against its definition; a stored tile read across lanes without __syncwarp, a misaligned or
    overrunning tile, half a warp at a wmma operation, lanes passing different pointers, and a tile in a shared
    array declared without __align__(32) are caught; so is a read ordered only by a __syncwarp of other lanes;
  - shared memory read before any thread of the block wrote the element (what an earlier block left there): caught
    when no write follows it in the barrier epoch, and when a write follows ordered after it (the reader's own);
    where another thread's write follows unordered, the race is named instead.
*/
#include <sys/wait.h>
#include <cub/cub.cuh> // the emulator's (tests/cuda_emu/include)
#include <mma.h>         // the emulator's wmma (tests/cuda_emu/include)
#include "../tests/testing.h"

// --- kernels under test ------------------------------------------------------------------------------------------

__global__ void k_ids(int* out, int W) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    out[y * W + x] = 1000 * (int)(threadIdx.y * blockDim.x + threadIdx.x) + (int)(blockIdx.y * gridDim.x + blockIdx.x);
}

// order-dependent on purpose (CUDA_EMU_ORDER): block b copies block b - 1's value, plus one, with nothing that orders
// the two (a GPU may run b first); thread t of one block does the same with thread t + 1's value
__global__ void k_block_chain(int* x) {
    if (threadIdx.x == 0) { x[blockIdx.x] = blockIdx.x == 0 ? 1 : x[blockIdx.x - 1] + 1; }
}
__global__ void k_thread_chain(int* x) {
    int t = threadIdx.x;
    x[t] = t + 1 < (int)blockDim.x ? x[t + 1] + 1 : 1;
}

// each block sums its 256 values through shared memory, a tree with __syncthreads between levels
__global__ void k_block_sum(float* out, const float* in) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (t < s) { buf[t] += buf[t + s]; }
        __syncthreads();
    }
    if (t == 0) { out[blockIdx.x] = buf[0]; }
}

// per lane: the xor-butterfly sum of the warp, lane 5's value, and the value 3 lanes down
__global__ void k_shuffles(float* sum, float* bcast, float* down, const float* in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i], s = v;
    for (int o = 16; o > 0; o >>= 1) { s += __shfl_xor_sync(0xffffffffu, s, o); }
    sum[i] = s;
    bcast[i] = __shfl_sync(0xffffffffu, v, 5);
    down[i] = __shfl_down_sync(0xffffffffu, v, 3);
}

// a 1024-thread block: warp sums, then the first warp sums the 32 partials
__global__ void k_big_block(double* out, const double* in) {
    __shared__ double part[32];
    int t = threadIdx.x;
    double v = in[t];
    for (int o = 16; o > 0; o >>= 1) { v += __shfl_xor_sync(0xffffffffu, v, o); }
    if (t % 32 == 0) { part[t / 32] = v; }
    __syncthreads();
    if (t < 32) {
        double w = part[t];
        for (int o = 16; o > 0; o >>= 1) { w += __shfl_xor_sync(0xffffffffu, w, o); }
        if (t == 0) { *out = w; }
    }
}

__global__ void k_fill(float* x, float v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { x[i] = v; } }
__global__ void k_copy(float* y, const float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { y[i] = x[i]; } }

// --- kernels with bugs, each run in a child that must fail ----------------------------------------------------------

__global__ void k_overrun(float* x, int n) { int i = threadIdx.x; if (i <= n) { x[i] = 1.0f; } } // one past the end
__global__ void k_touch(float* x) { x[threadIdx.x] = 0.0f; }
__global__ void k_early_return(float* x) {
    __shared__ float s[64];
    if (threadIdx.x >= 32) { return; }
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    x[threadIdx.x] = s[threadIdx.x];
}
__global__ void k_lane_gone(float* x) {
    if (threadIdx.x == 7) { return; }
    x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}
// a 16-byte load one float past an aligned address, announced through the hook kernels.cuh's packed access calls
__global__ void k_vector_misaligned(float* x) {
    const float4* p = (const float4*)(x + 1);
    KERNELS_ALIGNED_ACCESS(p, 16);
    x[threadIdx.x] = p->x;
}
__global__ void k_divergent(float* x) {
    if (threadIdx.x < 16) { x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1); }
    else { __syncwarp(); }
}

// shared-memory races: a value read from another warp's thread with no __syncthreads between the write and the read
__global__ void k_race_blocks(float* x) {
    __shared__ float s[64];
    s[threadIdx.x] = (float)threadIdx.x;
    x[threadIdx.x] = s[63 - threadIdx.x];
}
// ... within one warp, with no __syncwarp (lane 0 reads lane 1's element before lane 1 writes it, as the fibers run)
__global__ void k_race_lanes(float* x, int sync) {
    __shared__ float s[32];
    s[threadIdx.x] = (float)threadIdx.x;
    if (sync) { __syncwarp(); }
    x[threadIdx.x] = s[threadIdx.x ^ 1];
}
// a block whose first `written` threads fill their elements, then every thread reads its own after the barrier: past
// `written`, a read of what an earlier block left there (by the same thread that reads it, with `rewrite`: a read
// first, then that thread's own write, ordered after it)
__global__ void k_unwritten(float* x, int written, int rewrite) {
    __shared__ float s[64];
    if (rewrite) {
        x[threadIdx.x] = s[threadIdx.x];
        s[threadIdx.x] = 2.0f;
        return;
    }
    if ((int)threadIdx.x < written) { s[threadIdx.x] = (float)threadIdx.x; }
    __syncthreads();
    x[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}
// ... two threads writing one element in the same barrier interval
__global__ void k_race_writes(float* x) {
    __shared__ float total;
    if (threadIdx.x % 32 == 0) { total = (float)threadIdx.x; }
    __syncthreads();
    x[threadIdx.x] = total;
}
// ... a read of a shared element after the barrier, overwritten by another thread before the next one: thread 0
// re-reads s[1] in the second interval after thread 1 rewrote it there
__global__ void k_race_after_barrier(float* x) {
    __shared__ float s[64];
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    s[threadIdx.x] = s[threadIdx.x] + 1.0f; // each its own element: no race
    x[threadIdx.x] = s[(threadIdx.x + 32) % 64]; // another warp's element, rewritten in this interval: a race
}
// every thread reads s[0], a __syncwarp, then thread 3 rewrites it: ordered within one warp (as after a wmma load,
// which every lane reads whole), a race when the readers span two warps
__global__ void k_readers_then_write(float* x) {
    __shared__ float s[1];
    if (threadIdx.x == 0) { s[0] = 1.0f; }
    __syncthreads();
    x[threadIdx.x] = s[0];
    __syncwarp();
    if (threadIdx.x == 3) { s[0] = 2.0f; }
}
// an index past the end of a shared array
__global__ void k_shared_overrun(float* x) {
    __shared__ float s[32];
    s[threadIdx.x + 1] = 1.0f;
    __syncthreads();
    x[threadIdx.x] = s[threadIdx.x];
}

// wmma (tests/cuda_emu/include/mma.h): one warp, C = A B + C0 with A row-major from global memory, B column-major
// from shared memory (staged by the lanes, a __syncwarp, then loaded), C through shared memory back to global; with
// `nosync` the lanes read the stored tile with no __syncwarp (a race: each lane stored only its own elements)
__global__ void k_wmma(float* c, const __nv_bfloat16* a, const __nv_bfloat16* b, int nosync) {
    __shared__ __align__(32) __nv_bfloat16 sb[16][16];
    __shared__ __align__(32) float sc[16][16];
    int lane = threadIdx.x;
    for (int e = lane; e < 256; e += 32) { sb[e / 16][e % 16] = b[e]; }
    __syncwarp();
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> fb;
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
    nvcuda::wmma::fill_fragment(fc, 0.5f);
    nvcuda::wmma::load_matrix_sync(fa, a, 16);
    nvcuda::wmma::load_matrix_sync(fb, &sb[0][0], 16);
    nvcuda::wmma::mma_sync(fc, fa, fb, fc);
    nvcuda::wmma::store_matrix_sync(&sc[0][0], fc, 16, nvcuda::wmma::mem_row_major);
    if (!nosync) { __syncwarp(); }
    for (int e = lane; e < 256; e += 32) { c[e] = sc[(e + 16) % 256 / 16][e % 16]; } // a row another lane stored
}
// a wmma load of the 16 x 16 tile at a + off (leading dimension 16)
__global__ void k_wmma_load(const __nv_bfloat16* a, int off) {
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::load_matrix_sync(fa, a + off, 16);
}
// a wmma load whose pointer differs between the lanes (CUDA requires the same in all)
__global__ void k_wmma_lane_ptr(const __nv_bfloat16* a) {
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::load_matrix_sync(fa, a + (threadIdx.x / 16) * 16, 16);
}
// a wmma load from a shared array declared without __align__(32): a GPU promises it no more than 2-byte alignment
__global__ void k_wmma_shared_unaligned(void) {
    __shared__ __nv_bfloat16 sb[256];
    for (int e = threadIdx.x; e < 256; e += 32) { sb[e] = __float2bfloat16(1.0f); }
    __syncwarp();
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::load_matrix_sync(fa, &sb[0], 16);
}
// lanes 0-15 write, synchronise among themselves only, and lanes 16-31 read what they wrote: no ordering for lanes
// the __syncwarp's mask leaves out
__global__ void k_partial_syncwarp(float* x) {
    __shared__ float s[16];
    int lane = threadIdx.x;
    if (lane < 16) { s[lane] = (float)lane; __syncwarp(0x0000ffffu); }
    else { x[lane] = s[lane - 16]; }
}
// a wmma operation reached by half a warp
__global__ void k_wmma_diverged(const __nv_bfloat16* a) {
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fa;
    if (threadIdx.x < 16) { nvcuda::wmma::load_matrix_sync(fa, a, 16); }
}

static float* dev_floats(size_t n) {
    float* d = NULL;
    cudaMalloc((void**)&d, n * sizeof(float));
    return d;
}

// runs f in a child process: it must end abnormally with `want` in what it wrote to stderr
static void expect_caught(const char* name, void (*f)(void), const char* want) {
    char path[] = "/tmp/test_cuda_emu.XXXXXX";
    int fd = mkstemp(path);
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        f();
        fprintf(stderr, "(returned normally)\n");
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char buf[4096] = {0};
    lseek(fd, 0, SEEK_SET);
    ssize_t r = read(fd, buf, sizeof(buf) - 1);
    (void)r;
    close(fd);
    unlink(path);
    char* nl = strchr(buf, '\n');
    if (nl) { *nl = 0; }
    check(!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && strstr(buf, want) != NULL, name, "%s", buf);
}

// runs f in a child process: it must return normally (a complaint of the emulator would stop the child)
static void expect_allowed(const char* name, void (*f)(void)) {
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) { f(); _exit(0); }
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, name, "exit status %d", status);
}

// An NCCL send's buffer (emu::pending_send, what nccl_emu.h's ncclSend records) rewritten by a copy on another stream
// that neither waited for an event recorded after the send nor came after a host synchronisation with its stream.
// ordered_send_writes: the three ways to order it, none of which may stop the program.
static void send_then_write(int how) {
    float* buf = dev_floats(64);
    float* src = dev_floats(64);
    cudaStream_t link, mid, compute;
    cudaStreamCreate(&link); cudaStreamCreate(&mid); cudaStreamCreate(&compute);
    cudaEvent_t sent, passed;
    cudaEventCreate(&sent); cudaEventCreate(&passed);
    emu::pending_send(buf, 64 * sizeof(float), emu::stream_of(link));
    cudaEventRecord(sent, link);
    if (how == 1) { cudaStreamWaitEvent(compute, sent, 0); }                                  // waits directly
    if (how == 2) { cudaStreamWaitEvent(mid, sent, 0); cudaEventRecord(passed, mid); cudaStreamWaitEvent(compute, passed, 0); }
    if (how == 3) { cudaStreamSynchronize(link); }                                           // the host saw it done
    cudaMemcpyAsync(buf, src, 64 * sizeof(float), cudaMemcpyDeviceToDevice, compute);
    cudaDeviceSynchronize();
}
static void bug_send_overwritten(void) { send_then_write(0); }
static void ordered_send_writes(void) { for (int how = 1; how <= 3; how++) { send_then_write(how); } }

// The same with a kernel as the writer (k_touch zeroes 32 floats of the 64 being sent, which start as the emulated
// device's NaN garbage): caught unless ordered after the send (how 1: an event wait; 2: the send's own stream).
static void send_then_kernel(int how) {
    float* buf = dev_floats(64);
    cudaStream_t link, compute;
    cudaStreamCreate(&link); cudaStreamCreate(&compute);
    cudaEvent_t sent;
    cudaEventCreate(&sent);
    emu::pending_send(buf, 64 * sizeof(float), emu::stream_of(link));
    cudaEventRecord(sent, link);
    if (how == 1) { cudaStreamWaitEvent(compute, sent, 0); }
    k_touch<<<1, 32, 0, how == 2 ? link : compute>>>(buf + 16);
    cudaDeviceSynchronize();
}
static void bug_send_kernel_overwrite(void) { send_then_kernel(0); }
static void ordered_send_kernels(void) { send_then_kernel(1); send_then_kernel(2); }

static void bug_overrun(void) { float* x = dev_floats(31); k_overrun<<<1, 32>>>(x, 31); cudaDeviceSynchronize(); }
static void bug_race_blocks(void) { float* x = dev_floats(64); k_race_blocks<<<1, 64>>>(x); cudaDeviceSynchronize(); }
static void bug_race_lanes(void) { float* x = dev_floats(32); k_race_lanes<<<1, 32>>>(x, 0); cudaDeviceSynchronize(); }
static void bug_race_writes(void) { float* x = dev_floats(64); k_race_writes<<<1, 64>>>(x); cudaDeviceSynchronize(); }
static void bug_race_after_barrier(void) { float* x = dev_floats(64); k_race_after_barrier<<<1, 64>>>(x); cudaDeviceSynchronize(); }
static void bug_unwritten(void) { float* x = dev_floats(128); k_unwritten<<<2, 64>>>(x, 40, 0); cudaDeviceSynchronize(); }
static void bug_unwritten_own(void) { float* x = dev_floats(64); k_unwritten<<<1, 64>>>(x, 64, 1); cudaDeviceSynchronize(); }
static void bug_shared_overrun(void) { float* x = dev_floats(32); k_shared_overrun<<<1, 32>>>(x); cudaDeviceSynchronize(); }
static void bug_host_arg(void) { static float host[32]; k_touch<<<1, 32>>>(host); cudaDeviceSynchronize(); }
static void bug_early_return(void) { float* x = dev_floats(64); k_early_return<<<1, 64>>>(x); cudaDeviceSynchronize(); }
static void bug_lane_gone(void) { float* x = dev_floats(32); k_lane_gone<<<1, 32>>>(x); cudaDeviceSynchronize(); }
static void bug_divergent(void) { float* x = dev_floats(32); k_divergent<<<1, 32>>>(x); cudaDeviceSynchronize(); }
static void bug_vector_misaligned(void) { float* x = dev_floats(32); k_vector_misaligned<<<1, 4>>>(x); cudaDeviceSynchronize(); }
static __nv_bfloat16* dev_bf16(size_t n) {
    __nv_bfloat16* d = NULL;
    cudaMalloc((void**)&d, n * sizeof(__nv_bfloat16));
    cudaMemset(d, 0, n * sizeof(__nv_bfloat16));
    return d;
}
static void bug_readers_two_warps(void) { float* x = dev_floats(64); k_readers_then_write<<<1, 64>>>(x); cudaDeviceSynchronize(); }
static void bug_wmma_race(void) {
    float* c = dev_floats(256);
    __nv_bfloat16 *a = dev_bf16(256), *b = dev_bf16(256);
    k_wmma<<<1, 32>>>(c, a, b, 1);
    cudaDeviceSynchronize();
}
static void bug_wmma_misaligned(void) { __nv_bfloat16* a = dev_bf16(512); k_wmma_load<<<1, 32>>>(a, 8); cudaDeviceSynchronize(); }
static void bug_wmma_past_end(void) { __nv_bfloat16* a = dev_bf16(240); k_wmma_load<<<1, 32>>>(a, 0); cudaDeviceSynchronize(); }
static void bug_wmma_lane_ptr(void) { __nv_bfloat16* a = dev_bf16(512); k_wmma_lane_ptr<<<1, 32>>>(a); cudaDeviceSynchronize(); }
static void bug_wmma_shared_unaligned(void) { k_wmma_shared_unaligned<<<1, 32>>>(); cudaDeviceSynchronize(); }
static void bug_partial_syncwarp(void) { float* x = dev_floats(32); k_partial_syncwarp<<<1, 32>>>(x); cudaDeviceSynchronize(); }
static void bug_wmma_diverged(void) { __nv_bfloat16* a = dev_bf16(256); k_wmma_diverged<<<1, 32>>>(a); cudaDeviceSynchronize(); }
static void bug_copy_direction(void) {
    float* a = dev_floats(8);
    float* b = dev_floats(8);
    cudaMemcpyAsync(a, b, 8 * sizeof(float), cudaMemcpyHostToDevice, 0);
    cudaDeviceSynchronize();
}

// --- cuBLASLt against double precision --------------------------------------------------------------------------

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad_d(double x) {
    double th = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

static uint32_t g_rng = 12345;
static float urand(void) { g_rng = g_rng * 1664525u + 1013904223u; return ((g_rng >> 8) / 16777216.0f) * 2.0f - 1.0f; }

// One matmul through the emulated cuBLASLt: D (m x n) = epi(op(A) op(B) + beta C [+ bias]), column-major, with A/B/D
// of type t (fp32 or bf16), against the same in double on the stored inputs; with BGRADA/BGRADB, the bias gradient
// too (op(A)'s row sums or op(B)'s column sums, in D's type). misalign 1: A less aligned than the preference says;
// 2: the bias pointer set only after the heuristic ran (which then took it as 256-byte aligned), and 2 bytes off.
static void lt_case(int ta, int tb, float beta, cublasLtEpilogue_t epi, cudaDataType_t t, int misalign) {
    const int m = 24, n = 5, k = 7;
    size_t es = t == CUDA_R_32F ? 4 : 2;
    int lda = ta ? k + 1 : m + 2, ldb = tb ? n + 3 : k, ldd = m;
    size_t na = (size_t)lda * (ta ? m : k), nb = (size_t)ldb * (tb ? k : n), nd = (size_t)ldd * n;
    std::vector<float> ha(na), hb(nb), hd(nd), hbias(m), haux(nd);
    for (auto& v : ha) { v = urand(); }
    for (auto& v : hb) { v = urand(); }
    for (auto& v : hd) { v = urand(); }
    for (auto& v : hbias) { v = urand(); }
    for (auto& v : haux) { v = 2.0f * urand(); }
    auto round_t = [&](float v) { return t == CUDA_R_32F ? v : __bfloat162float(__float2bfloat16_rn(v)); };
    for (auto* vec : {&ha, &hb, &hd, &hbias, &haux}) { for (auto& v : *vec) { v = round_t(v); } }
    auto up = [&](const std::vector<float>& h, int extra) {
        char* d = NULL;
        cudaMalloc((void**)&d, h.size() * es + 16);
        d += extra;
        for (size_t i = 0; i < h.size(); i++) { emu::store_float(d, t, i, h[i]); }
        return d;
    };
    char *da = up(ha, misalign == 1 ? 2 : 0), *db = up(hb, 0), *dd = up(hd, 0), *dbias = up(hbias, misalign == 2 ? 2 : 0), *daux = up(haux, 0);
    const int bgrad = epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB;
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    if ((epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || bgrad) && misalign != 2) {
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof(dbias));
    }
    if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DGELU) {
        int64_t ld = m;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &daux, sizeof(daux));
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, t, ta ? k : m, ta ? m : k, lda);
    cublasLtMatrixLayoutCreate(&lb, t, tb ? n : k, tb ? k : n, ldb);
    cublasLtMatrixLayoutCreate(&ld, t, m, n, ldd);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint32_t al = 16;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof(al));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heur, &found);
    if (misalign == 2) { cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof(dbias)); }
    float alpha = 1.0f;
    cublasLtMatmul(lt, op, &alpha, da, la, db, lb, &beta, dd, ld, dd, ld, &heur.algo, NULL, 0, 0);
    cudaDeviceSynchronize(); // the product runs when the stream does
    // op(A)[i][l] and op(B)[l][j] of the stored inputs
    auto a_at = [&](int i, int l) { return (double)ha[ta ? l + (size_t)i * lda : i + (size_t)l * lda]; };
    auto b_at = [&](int l, int j) { return (double)hb[tb ? j + (size_t)l * ldb : l + (size_t)j * ldb]; };
    double worst = 0.0, worst_aux = 0.0;
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int l = 0; l < k; l++) { s += a_at(i, l) * b_at(l, j); }
            s += beta * hd[i + (size_t)j * ldd];
            if (epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) { s += hbias[i]; }
            double want = s;
            if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                want = gelu_d(s);
                worst_aux = fmax(worst_aux, fabs(emu::load_as_float(daux, t, i + (size_t)j * m) - s) / (1.0 + fabs(s)));
            }
            if (epi == CUBLASLT_EPILOGUE_DGELU) { want = s * gelu_grad_d(haux[i + (size_t)j * m]); }
            worst = fmax(worst, fabs(emu::load_as_float(dd, t, i + (size_t)j * ldd) - want) / (1.0 + fabs(want)));
        }
    }
    if (bgrad) { // "auxiliary" below: the bias gradient
        int rows = epi == CUBLASLT_EPILOGUE_BGRADA;
        for (int i = 0; i < (rows ? m : n); i++) {
            double s = 0.0;
            for (int l = 0; l < k; l++) { s += rows ? a_at(i, l) : b_at(l, i); }
            worst_aux = fmax(worst_aux, fabs(emu::load_as_float(dbias, t, i) - s) / (1.0 + fabs(s)));
        }
    }
    double tol = t == CUDA_R_32F ? 1e-5 : 1e-2;
    const char* en = epi == CUBLASLT_EPILOGUE_BIAS ? "BIAS" : epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? "GELU_AUX_BIAS"
                   : epi == CUBLASLT_EPILOGUE_DGELU ? "DGELU" : epi == CUBLASLT_EPILOGUE_BGRADA ? "BGRADA"
                   : epi == CUBLASLT_EPILOGUE_BGRADB ? "BGRADB" : "DEFAULT";
    char name[160];
    snprintf(name, sizeof(name), "cuBLASLt %s, transA %d, transB %d, beta %g, %s", en, ta, tb, beta, t == CUDA_R_32F ? "fp32" : "bf16");
    check(found == 1 && worst <= tol && worst_aux <= tol, name, "worst relative error %.3g, auxiliary %.3g (tolerance %g)", worst, worst_aux, tol);
}

static void bug_misaligned(void) { lt_case(0, 0, 0.0f, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F, 1); }
static void bug_bias_after_heuristic(void) { lt_case(1, 0, 0.0f, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF, 2); }

// Graphs by stream capture: a captured stream's work runs at each launch, not at the capture, with the arguments of
// the capture; a copy from pinned host memory reads it when the graph runs. The refusals: what CUDA refuses while a
// stream captures.
__global__ void k_add_at(float* x, const int* at, float v) { x[*at] += v; }
static void graph_replays(float* got, int* at_host, int* at_dev, float* x, cudaStream_t s) {
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    cudaMemcpyAsync(at_dev, at_host, sizeof(int), cudaMemcpyHostToDevice, s);
    k_add_at<<<1, 1, 0, s>>>(x, at_dev, 1.0f);
    cudaStreamEndCapture(s, &g);
    cudaStreamSynchronize(s); // (nothing ran: the capture only recorded)
    cudaMemcpy(got, x, 4 * sizeof(float), cudaMemcpyDeviceToHost);
    cudaGraphInstantiate(&e, g, 0);
    for (int k = 0; k < 3; k++) { *at_host = k; cudaGraphLaunch(e, s); cudaStreamSynchronize(s); }
    cudaMemcpy(got + 4, x, 4 * sizeof(float), cudaMemcpyDeviceToHost);
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
}
static cudaStream_t capturing(void) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    return s;
}
static void bug_capture_sync(void) { cudaStreamSynchronize(capturing()); }
static void bug_capture_pageable(void) {
    cudaStream_t s = capturing();
    static int host;
    int* d = NULL;
    cudaMalloc((void**)&d, sizeof(int));
    cudaMemcpyAsync(d, &host, sizeof(int), cudaMemcpyHostToDevice, s);
}
static void bug_capture_blocking_copy(void) {
    capturing();
    float* d = dev_floats(4);
    float h[4];
    cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
}

int main(void) {
    // indices over a 2D grid of 2D blocks
    {
        const int W = 16, H = 6;
        int* d = NULL;
        cudaMalloc((void**)&d, W * H * sizeof(int));
        k_ids<<<dim3(2, 3), dim3(8, 2)>>>(d, W);
        std::vector<int> h(W * H);
        cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost);
        int ok = 1;
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) { ok &= h[y * W + x] == 1000 * ((y % 2) * 8 + x % 8) + (y / 2) * 2 + x / 8; }
        }
        check(ok, "threadIdx, blockIdx, blockDim and gridDim over a 2 x 3 grid of 8 x 2 blocks", "%s", ok ? "every element" : "mismatch");
    }
    // CUDA_EMU_ORDER=reverse: blocks and the threads of a block from the last to the first (set here directly), so a
    // kernel that depends on the order they run in, which a GPU does not keep, comes out otherwise
    {
        const int n = 8;
        int* d = NULL;
        cudaMalloc((void**)&d, n * sizeof(int));
        int got[2][2][n];
        for (int rev = 0; rev < 2; rev++) {
            emu::g_reverse = rev;
            cudaMemset(d, 0, n * sizeof(int));
            k_block_chain<<<n, 32>>>(d);
            cudaMemcpy(got[rev][0], d, sizeof(got[rev][0]), cudaMemcpyDeviceToHost);
            cudaMemset(d, 0, n * sizeof(int));
            k_thread_chain<<<1, n>>>(d);
            cudaMemcpy(got[rev][1], d, sizeof(got[rev][1]), cudaMemcpyDeviceToHost);
        }
        emu::g_reverse = -1; // (read from the environment again)
        int blocks_fwd = 1, blocks_rev = 1, threads_fwd = 1, threads_rev = 1;
        for (int i = 0; i < n; i++) {
            blocks_fwd &= got[0][0][i] == i + 1;               // each block after its predecessor
            blocks_rev &= got[1][0][i] == 1;                   // each block before it: the predecessor's 0, plus one
            threads_fwd &= got[0][1][i] == 1;                  // each thread before its successor wrote (the last: 1)
            threads_rev &= got[1][1][i] == n - i;              // each thread after it
        }
        check(blocks_fwd && blocks_rev, "blocks run in index order, and from the last to the first under CUDA_EMU_ORDER=reverse",
              "forward %d %d .. %d, reversed %d %d .. %d", got[0][0][0], got[0][0][1], got[0][0][n - 1], got[1][0][0], got[1][0][1], got[1][0][n - 1]);
        check(threads_fwd && threads_rev, "a block's threads run in index order, and from the last to the first under CUDA_EMU_ORDER=reverse",
              "forward %d %d .. %d, reversed %d %d .. %d", got[0][1][0], got[0][1][1], got[0][1][n - 1], got[1][1][0], got[1][1][1], got[1][1][n - 1]);
    }
    // shared memory and __syncthreads
    {
        const int nb = 5;
        std::vector<float> h(nb * 256);
        for (auto& v : h) { v = (float)(int)(urand() * 100); }
        float *in = dev_floats(h.size()), *out = dev_floats(nb);
        cudaMemcpy(in, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
        k_block_sum<<<nb, 256>>>(out, in);
        float got[nb];
        cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost);
        int ok = 1;
        for (int b = 0; b < nb; b++) {
            float s = 0.0f;
            for (int t = 0; t < 256; t++) { s += h[b * 256 + t]; }
            ok &= got[b] == s; // integers: exact in any order
        }
        check(ok, "a shared-memory tree sum with __syncthreads between levels, 5 blocks of 256", "%s", ok ? "exact" : "wrong");
    }
    // every element written before the barrier, over two blocks: no unwritten read reported, the values right
    {
        float* x = dev_floats(128);
        k_unwritten<<<2, 64>>>(x, 64, 0);
        float h[128];
        cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
        int ok = 1;
        for (int i = 0; i < 128; i++) { ok &= h[i] == (float)(i % 64); }
        check(ok, "shared elements written, then read after a barrier, in two blocks: no unwritten read reported", "%s", ok ? "right" : "wrong");
    }
    // the same exchange between lanes with a __syncwarp between the writes and the reads: ordered, no race
    {
        float* x = dev_floats(32);
        k_race_lanes<<<1, 32>>>(x, 1);
        float h[32];
        cudaMemcpy(h, x, sizeof(h), cudaMemcpyDeviceToHost);
        int ok = 1;
        for (int i = 0; i < 32; i++) { ok &= h[i] == (float)(i ^ 1); }
        check(ok, "lanes exchanging values through shared memory after a __syncwarp: no race reported, the values right", "%s", ok ? "right" : "wrong");
    }
    // shuffles
    {
        const int n = 64;
        std::vector<float> h(n);
        for (int i = 0; i < n; i++) { h[i] = (float)(i * 3 % 17); }
        float *in = dev_floats(n), *s = dev_floats(n), *b = dev_floats(n), *d = dev_floats(n);
        cudaMemcpy(in, h.data(), n * 4, cudaMemcpyHostToDevice);
        k_shuffles<<<1, n>>>(s, b, d, in);
        std::vector<float> hs(n), hb(n), hd(n);
        cudaMemcpy(hs.data(), s, n * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(hd.data(), d, n * 4, cudaMemcpyDeviceToHost);
        int ok = 1;
        for (int i = 0; i < n; i++) {
            int w = i / 32 * 32, lane = i % 32;
            float sum = 0.0f;
            for (int l = 0; l < 32; l++) { sum += h[w + l]; }
            ok &= hs[i] == sum && hb[i] == h[w + 5] && hd[i] == (lane + 3 < 32 ? h[i + 3] : h[i]);
        }
        check(ok, "__shfl_xor_sync butterfly sum, __shfl_sync broadcast, __shfl_down_sync, 2 warps", "%s", ok ? "as defined" : "wrong");
    }
    {
        std::vector<double> h(1024);
        double want = 0.0;
        for (int i = 0; i < 1024; i++) { h[i] = i % 7; want += h[i]; }
        double *in = NULL, *out = NULL;
        cudaMalloc((void**)&in, 1024 * 8);
        cudaMalloc((void**)&out, 8);
        cudaMemcpy(in, h.data(), 1024 * 8, cudaMemcpyHostToDevice);
        k_big_block<<<1, 1024>>>(out, in);
        double got = 0.0;
        cudaMemcpy(&got, out, 8, cudaMemcpyDeviceToHost);
        check(got == want, "a 1024-thread block reduction (warp shuffles, shared memory, __syncthreads)", "got %g, want %g", got, want);
    }
    // cub's sort
    {
        const int n = 100;
        std::vector<int32_t> keys(n), vals(n);
        for (int i = 0; i < n; i++) { keys[i] = (i * 37) % 11 - 3; vals[i] = i; }
        int32_t* d = NULL;
        cudaMalloc((void**)&d, 4 * n * sizeof(int32_t));
        cudaMemcpy(d, keys.data(), n * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(d + 2 * n, vals.data(), n * 4, cudaMemcpyHostToDevice);
        size_t temp_bytes = 0;
        cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, d, d + n, d + 2 * n, d + 3 * n, n);
        void* temp = NULL;
        cudaMalloc(&temp, temp_bytes);
        cub::DeviceRadixSort::SortPairs(temp, temp_bytes, d, d + n, d + 2 * n, d + 3 * n, n);
        std::vector<int32_t> k2(n), v2(n);
        cudaMemcpy(k2.data(), d + n, n * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(v2.data(), d + 3 * n, n * 4, cudaMemcpyDeviceToHost);
        int ok = 1;
        for (int i = 1; i < n; i++) { ok &= k2[i - 1] < k2[i] || (k2[i - 1] == k2[i] && v2[i - 1] < v2[i]); }
        for (int i = 0; i < n; i++) { ok &= keys[v2[i]] == k2[i]; }
        check(ok, "cub::DeviceRadixSort::SortPairs: sorted by value (negative keys too), stable", "%s", ok ? "yes" : "no");
    }
    // cuBLASLt
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) { lt_case(ta, tb, ta ? 0.5f : 0.0f, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F, 0); }
    }
    lt_case(1, 0, 0.0f, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 0);
    lt_case(1, 0, 0.0f, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_32F, 0);
    lt_case(0, 0, 0.0f, CUBLASLT_EPILOGUE_DGELU, CUDA_R_32F, 0);
    lt_case(1, 0, 0.0f, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_16BF, 0);
    lt_case(0, 1, 1.0f, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_16BF, 0);
    lt_case(0, 1, 1.0f, CUBLASLT_EPILOGUE_BGRADB, CUDA_R_32F, 0); // the weight gradient's shape (B transposed, beta 1)
    lt_case(0, 0, 0.0f, CUBLASLT_EPILOGUE_BGRADB, CUDA_R_16BF, 0);
    lt_case(1, 0, 0.0f, CUBLASLT_EPILOGUE_BGRADA, CUDA_R_32F, 0);
    // an invalid launch configuration is reported by cudaGetLastError, as on a GPU
    {
        float* x = dev_floats(8);
        k_touch<<<1, 2048>>>(x);
        cudaError_t e = cudaGetLastError();
        check(e == cudaErrorInvalidConfiguration && cudaGetLastError() == cudaSuccess, "a 2048-thread block: cudaGetLastError reports it once",
              "%s", cudaGetErrorString(e));
    }
    // stream ordering: work runs when the host must see it, so the races a GPU can have show here too
    {
        const int n = 8;
        float *pin = NULL, *d = dev_floats(n), back[n];
        cudaMallocHost((void**)&pin, n * sizeof(float));
        cudaStream_t s1, s2;
        cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
        cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
        for (int i = 0; i < n; i++) { pin[i] = 1.0f; }
        cudaMemcpyAsync(d, pin, n * sizeof(float), cudaMemcpyHostToDevice, s1);
        for (int i = 0; i < n; i++) { pin[i] = 2.0f; } // too early: the copy has not run
        cudaStreamSynchronize(s1);
        cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost);
        check(back[0] == 2.0f, "a pinned buffer refilled before its copy ran: the device gets the new contents (the race shows)",
              "device has %g", back[0]);
        for (int i = 0; i < n; i++) { pin[i] = 3.0f; }
        cudaMemcpyAsync(d, pin, n * sizeof(float), cudaMemcpyHostToDevice, s1);
        cudaStreamSynchronize(s1);
        for (int i = 0; i < n; i++) { pin[i] = 4.0f; }
        cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost);
        check(back[0] == 3.0f, "... and refilled after cudaStreamSynchronize: the device has what was copied", "device has %g", back[0]);
        float pageable[n];
        for (int i = 0; i < n; i++) { pageable[i] = 5.0f; }
        cudaMemcpyAsync(d, pageable, sizeof(pageable), cudaMemcpyHostToDevice, s1);
        for (int i = 0; i < n; i++) { pageable[i] = 6.0f; } // fine: CUDA took pageable data at the call
        cudaStreamSynchronize(s1);
        cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost);
        check(back[0] == 5.0f, "a copy from pageable memory takes the data at the call, as CUDA does", "device has %g", back[0]);
        // a stream that uses another stream's result without waiting reads stale data; with the event it does not
        float* y = dev_floats(n);
        cudaMemset(d, 0, n * sizeof(float));
        cudaMemset(y, 0, n * sizeof(float));
        k_fill<<<1, 32, 0, s1>>>(d, 7.0f, n);
        k_copy<<<1, 32, 0, s2>>>(y, d, n);
        cudaStreamSynchronize(s2);
        cudaMemcpy(back, y, sizeof(back), cudaMemcpyDeviceToHost);
        check(back[0] == 0.0f, "stream 2 reading stream 1's result without an event reads stale data (the race shows)", "got %g", back[0]);
        cudaEvent_t ev;
        cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        k_fill<<<1, 32, 0, s1>>>(d, 8.0f, n);
        cudaEventRecord(ev, s1);
        k_fill<<<1, 32, 0, s1>>>(d, 9.0f, n); // after the record: the wait must not include it
        cudaStreamWaitEvent(s2, ev, 0);
        k_copy<<<1, 32, 0, s2>>>(y, d, n);
        cudaStreamSynchronize(s2);
        cudaMemcpy(back, y, sizeof(back), cudaMemcpyDeviceToHost);
        check(back[0] == 8.0f, "... and with cudaEventRecord / cudaStreamWaitEvent, the value as of the record", "got %g", back[0]);
        cudaEventDestroy(ev);
        cudaStreamDestroy(s1);
        cudaStreamDestroy(s2);
        cudaFreeHost(pin);
    }
    { // wmma: one 16 x 16 x 16 product against its definition (bf16 inputs: the products are exact in fp32)
        __nv_bfloat16 ha[256], hb[256];
        for (int e = 0; e < 256; e++) {
            ha[e] = __float2bfloat16((float)((e * 7) % 13 - 6) / 8.0f);
            hb[e] = __float2bfloat16((float)((e * 5) % 11 - 5) / 4.0f);
        }
        __nv_bfloat16 *a = dev_bf16(256), *b = dev_bf16(256);
        float* c = dev_floats(256);
        cudaMemcpy(a, ha, sizeof(ha), cudaMemcpyHostToDevice);
        cudaMemcpy(b, hb, sizeof(hb), cudaMemcpyHostToDevice);
        k_wmma<<<1, 32>>>(c, a, b, 0);
        float hc[256];
        cudaMemcpy(hc, c, sizeof(hc), cudaMemcpyDeviceToHost);
        int bad = 0;
        for (int e = 0; e < 256; e++) {
            int r = (e + 16) % 256 / 16, col = e % 16; // the element the kernel read back for e
            double want = 0.5;
            for (int k = 0; k < 16; k++) { // A row-major (a[r][k]); B column-major: b holds column col at b[col * 16 ...]
                want += (double)__bfloat162float(ha[r * 16 + k]) * __bfloat162float(hb[col * 16 + k]);
            }
            bad += fabs(hc[e] - want) > 1e-6;
        }
        check(bad == 0, "wmma: C = A B + C0 (A row-major in global memory, B column-major in shared memory) as defined",
              "%d of 256 wrong", bad);
    }
    { // lanes of one warp read an element, a __syncwarp, one lane rewrites it: no race (it would stop this binary)
        float* x = dev_floats(32);
        k_readers_then_write<<<1, 32>>>(x);
        float hx[32];
        cudaMemcpy(hx, x, sizeof(hx), cudaMemcpyDeviceToHost);
        int bad = 0;
        for (int i = 0; i < 32; i++) { bad += hx[i] != 1.0f; }
        check(bad == 0, "one warp's lanes reading an element, a __syncwarp, then one lane rewriting it: no race reported, "
              "every lane read the value before the rewrite", "%d lanes read another value", bad);
    }
    // a send's buffer rewritten after an event wait (directly, or through another stream), or after the host
    // synchronised with the send's stream, by a copy or by a kernel: not a bug
    expect_allowed("an NCCL send's buffer rewritten after waiting for the send (an event, directly or through another "
                   "stream) or after the host synchronised with its stream: allowed", ordered_send_writes);
    expect_allowed("a kernel writing an NCCL send's buffer after an event wait for the send, or on the send's own stream: "
                   "allowed", ordered_send_kernels);
    // the bugs it must catch (a race reported above would have stopped this binary)
    expect_caught("an NCCL send's buffer rewritten on another stream with nothing ordering it after the send is caught",
                  bug_send_overwritten, "that an NCCL send on another stream may still be reading");
    expect_caught("a kernel writing into an NCCL send's buffer on another stream, with nothing ordering it after the send, "
                  "is caught", bug_send_kernel_overwrite, "kernel k_touch: a write into device memory");
    expect_caught("two warps reading an element, then a __syncwarp (not __syncthreads) before a rewrite: a race is caught",
                  bug_readers_two_warps, "shared-memory race on s[0]: this thread writes it after thread");
    expect_caught("wmma: reading a stored accumulator tile across lanes with no __syncwarp is caught", bug_wmma_race,
                  "shared-memory race on sc[");
    expect_caught("wmma: a load from a pointer that is not 32-byte aligned is caught", bug_wmma_misaligned, "is not 32-byte aligned");
    expect_caught("wmma: a tile running past its allocation is caught", bug_wmma_past_end,
                  "wmma::load_matrix_sync: 512 bytes at offset 0 run past the end of a 480-byte device allocation");
    expect_caught("wmma: an operation reached by half a warp is caught", bug_wmma_diverged, "warp operation");
    expect_caught("wmma: lanes passing different pointers to one load are caught", bug_wmma_lane_ptr, "with different arguments");
    expect_caught("wmma: a tile in a shared array declared without __align__(32) is caught", bug_wmma_shared_unaligned,
                  "is not 32-byte aligned");
    expect_caught("a __syncwarp of half the warp does not order the other half's reads (a race is caught)", bug_partial_syncwarp,
                  "shared-memory race on s[");
    expect_caught("a write one past the end of an allocation is caught", bug_overrun, "wrote past the end of a 124-byte device allocation");
    expect_caught("a shared-memory read of another warp's element with no __syncthreads is caught", bug_race_blocks,
                  "shared-memory race on s[");
    expect_caught("a shared-memory read of another lane's element with no __syncwarp is caught", bug_race_lanes,
                  "shared-memory race on s[");
    expect_caught("two threads writing one shared variable between barriers are caught", bug_race_writes,
                  "shared-memory race on total[0]: this thread writes it after thread 0 wrote it");
    expect_caught("a read of a shared element no thread of the block wrote (what an earlier block left) is caught",
                  bug_unwritten, "read of s[40] before any thread of the block wrote it");
    expect_caught("a read of a shared element before the reading thread's own first write to it is caught", bug_unwritten_own,
                  "read of s[0] before any thread of the block wrote it");
    expect_caught("a read of an element another warp rewrites after the barrier is caught", bug_race_after_barrier,
                  "shared-memory race on s[");
    expect_caught("an index past the end of a shared array is caught", bug_shared_overrun, "index 32 past the end of a dimension of 32 of shared array s");
    expect_caught("a host pointer passed to a kernel is caught", bug_host_arg, "is host memory, not device memory");
    expect_caught("__syncthreads after some threads returned is caught", bug_early_return, "__syncthreads() reached by 32 threads while 32 have returned");
    expect_caught("a full-mask shuffle waiting for a returned lane is caught", bug_lane_gone, "waits for lane 7, which has returned");
    expect_caught("lanes of a warp at different warp operations are caught", bug_divergent, "different warp operations");
    expect_caught("a misaligned 16-byte vector access is caught (a GPU faults on it)", bug_vector_misaligned, "which is not 16-byte aligned");
    expect_caught("a host-to-device copy from device memory is caught", bug_copy_direction, "is device memory, where host memory was expected");
    expect_caught("a pointer less aligned than promised to cuBLASLt is caught", bug_misaligned, "the heuristic was promised 16");
    expect_caught("a bias pointer set after cuBLASLt's heuristic, less aligned than the one it saw (none: 256), is caught",
                  bug_bias_after_heuristic, "is 2-byte aligned, but the heuristic was given a pointer aligned to 256");
    {
        float* x = dev_floats(4);
        int *at_host = NULL, *at_dev = NULL;
        cudaMallocHost((void**)&at_host, sizeof(int));
        cudaMalloc((void**)&at_dev, sizeof(int));
        cudaMemset(x, 0, 4 * sizeof(float));
        *at_host = 3;
        cudaStream_t s;
        cudaStreamCreate(&s);
        float got[8];
        graph_replays(got, at_host, at_dev, x, s);
        int ok = got[0] == 0 && got[1] == 0 && got[2] == 0 && got[3] == 0 && got[4] == 1 && got[5] == 1 && got[6] == 1 && got[7] == 0;
        check(ok, "a captured graph runs nothing at the capture; each launch runs it, reading the pinned index when it runs",
              "after the capture %g %g %g %g, after 3 launches %g %g %g %g", got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7]);
    }
    expect_caught("a synchronisation of a stream capturing a graph is caught", bug_capture_sync, "cudaStreamSynchronize while a stream captures a graph");
    expect_caught("a copy from pageable host memory into a graph is caught", bug_capture_pageable, "pageable host memory on a stream capturing a graph");
    expect_caught("a blocking copy during a capture is caught", bug_capture_blocking_copy, "cudaMemcpy (blocking) while a stream captures a graph");
    return test_summary();
}
