/*
kernels_attention.cuh: the CUDA backend's causal attention (split out of kernels.cuh by topic and included by it
after its core; not a standalone header). The native kernels (a warp per row; on the tensor cores through wmma in
16-bit builds where the shape allows), cuDNN's fused flash attention (cudnn_att.cuh, where built with cuDNN), and
the ops of kernels.h that choose between them (--attention cudnn|native|auto).
*/
#ifndef KERNELS_ATTENTION_CUH
#define KERNELS_ATTENTION_CUH

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

// The queries at positions [q_lo, T) (0 for a training forward; the rows after the cached ones when sampling with a
// KV cache): out (B, T - q_lo, C), lse (B, NH, T) at those positions when not NULL. Sequence b's query at position i
// is the row q + (b (T - q_lo) + i - q_lo) qs, its key and value at position j the rows k + (b ld + j) kvs and
// v + (b ld + j) kvs: one qkv buffer for training (strides 3C), the new rows' queries and the cache's keys and values
// when sampling (3C and 2C).
__global__ void kernels__attention_forward(floatX* out, float* lse, const floatX* qx, const floatX* kx, const floatX* vx, int qs,
                                           int kvs, int B, int T, int ld, int q_lo, int C, int NH) {
    int hs = C / NH, lane = threadIdx.x % 32, n = T - q_lo;
    long row = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; // over (b, h, i - q_lo)
    if (row >= (long)B * NH * n) { return; }
    int i = q_lo + (int)(row % n), h = (int)((row / n) % NH), b = (int)(row / ((long)n * NH));
    float scale = rsqrtf((float)hs);
    const floatX* kb = kx + (size_t)b * ld * kvs + h * hs;
    const floatX* vb = vx + (size_t)b * ld * kvs + h * hs;
    const floatX* q = qx + ((size_t)b * n + i - q_lo) * qs + h * hs;
    float m = -INFINITY, l = 0.0f, o[KERNELS_ATT_PER_LANE] = {0};
    for (int j0 = 0; j0 <= i; j0 += 32) {
        int j = j0 + lane;
        float s = -INFINITY;
        if (j <= i) { s = scale * kernels__dot(q, kb + (size_t)j * kvs, hs); }
        float mc = kernels__warp_max(s), mn = fmaxf(m, mc);
        float p = j <= i ? __expf(s - mn) : 0.0f;
        float corr = __expf(m - mn); // 0 at the first chunk (m = -inf)
        l = l * corr + kernels__warp_sum(p);
        for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) { o[e] *= corr; }
        int nj = i - j0 + 1 < 32 ? i - j0 + 1 : 32;
        for (int jj = 0; jj < nj; jj++) {
            float pj = __shfl_sync(0xffffffffu, p, jj);
            const floatX* v = vb + (size_t)(j0 + jj) * kvs;
            for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
                int d = lane + 32 * e;
                if (d < hs) { o[e] += pj * kernels__f(v[d]); }
            }
        }
        m = mn;
    }
    floatX* orow = out + ((size_t)b * n + i - q_lo) * C + h * hs;
    for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
        int d = lane + 32 * e;
        if (d < hs) { orow[d] = kernels__x(o[e] / l); }
    }
    if (lane == 0 && lse) { lse[((size_t)b * NH + h) * T + i] = m + logf(l); }
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
    kernels__attention_forward<<<(unsigned)((rows + 7) / 8), 256, 0, ctx->stream>>>(out, lse, qkv, qkv + C, qkv + 2 * C, 3 * C, 3 * C, B, T, T,
                                                                                     0, C, NH);
    launchCheck();
}

// ----------------------------------------------------------------------------
// The rows of a sampling step with a KV cache (CPU twin: attention_forward_rows, kernels_cpu.h). A decoding step has
// one query per sequence and head: too few rows for the tensor-core tiles or cuDNN, and the warp-per-row kernel above
// gave each a single warp that walks every cached key alone, 32 at a time, each lane a whole dot product read one
// element at a time: tens of microseconds a layer at a few hundred positions, for a few megabytes of cache. So the
// keys of a row are split (flash decoding): each warp takes KERNELS_DEC_KEYS consecutive keys of one row and head, and
// within the warp the lanes work in groups of G, G the head's packs (16 bytes: 8 bf16 values, 4 fp32) rounded up to a
// power of two (a head of 64 in bf16: 8 packs, so 4 groups of 8 lanes), each lane one pack of q, k and v. Group g takes
// keys g, g + 32/G, ... of the warp's range, KERNELS_DEC_UNROLL at a time (their loads in flight together): a score
// is the group's partial dot products summed by shuffles, and each group keeps its own online softmax (max m, sum l,
// unnormalised output o). Then the groups merge theirs, pairwise by shuffles, and the warp has its split's (m, l, o).
// A row of one split (a prompt's rows, or a short cache) writes o / l; several write their (m, l, o) to scratch, and
// a second kernel merges each row's splits in order:
//   M = max_s m_s,  O = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s.
// Every sum runs in a fixed order (the shuffles' pattern, the splits in turn): the same bits every run. The splits
// depend on the row's length alone, not on the GPU, so every GPU gives those bits too.
#define KERNELS_DEC_KEYS 64
#define KERNELS_DEC_UNROLL 2
#define KERNELS_DEC_WARPS 4

// (m, l, o) += the state (mo, lo, oo): both rescaled to the larger maximum; an empty state (m = -inf) counts nothing.
template <int VEC>
__device__ __forceinline__ void kernels__dec_merge(float& m, float& l, float* o, float mo, float lo, const float* oo) {
    float M = fmaxf(m, mo);
    if (M == -INFINITY) { return; } // (both empty)
    float a = m == -INFINITY ? 0.0f : __expf(m - M), b = mo == -INFINITY ? 0.0f : __expf(mo - M);
    l = l * a + lo * b;
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) { o[k] = o[k] * a + oo[k] * b; }
    m = M;
}

// One warp per (sequence b, head h, query i in [q_lo, T), split s of `splits`), unit index ((b NH + h) n + i - q_lo)
// splits + s with n = T - q_lo; layouts as kernels__attention_forward's for rows (q strides 3C, the cache 2C, ld rows
// per sequence). splits 1: out (B, n, C) directly; else part[u hs ...] its o and ml[2u], ml[2u + 1] its m and l.
// dpos (KernelCtx.dec_pos): the rows start at *dpos instead of q_lo; the splits then cover ld keys, those past the
// row empty (m = -inf: the merge weighs them 0, so the output has the bits of exactly as many splits as keys).
template <int VEC>
__global__ void __launch_bounds__(32 * KERNELS_DEC_WARPS)
kernels__attention_decode(floatX* out, float* part, float* ml, const floatX* qx, const floatX* kvx, int B, int T, int ld, int q_lo,
                          const int* dpos, int C, int NH, int splits, int G) {
    typedef KernelsVec<floatX, VEC> P;
    int hs = C / NH, np = hs / VEC, n = T - q_lo, lane = threadIdx.x % 32, grp = lane / G, pk = lane % G, NG = 32 / G;
    if (dpos) { q_lo = *dpos; } // (a captured decoding step: its n rows start at the position read now)
    long u = (long)blockIdx.x * KERNELS_DEC_WARPS + threadIdx.x / 32;
    if (u >= (long)B * NH * n * splits) { return; } // (a whole warp: the shuffles below involve none of its lanes)
    int s = (int)(u % splits);
    long r = u / splits;
    int iq = (int)(r % n), h = (int)((r / n) % NH), b = (int)(r / ((long)n * NH)), i = q_lo + iq;
    int on = pk < np; // this lane's pack is in the head (G rounds np up)
    float scale = rsqrtf((float)hs), q[VEC], o[VEC];
    P qv = on ? kernels__ldv<P>(qx + ((size_t)b * n + iq) * 3 * C + (size_t)h * hs, pk) : P{};
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) { q[k] = scale * kernels__f(qv.v[k]); o[k] = 0.0f; }
    float m = -INFINITY, l = 0.0f;
    const floatX* kb = kvx + (size_t)b * ld * 2 * C + (size_t)h * hs;
    // keys [j_lo, j_hi): a split's run of KERNELS_DEC_KEYS (empty past i), or the whole row when it is the only split
    int j_lo = s * KERNELS_DEC_KEYS, j_hi = splits == 1 || j_lo + KERNELS_DEC_KEYS > i + 1 ? i + 1 : j_lo + KERNELS_DEC_KEYS;
    for (int j0 = j_lo; j0 < j_hi; j0 += NG * KERNELS_DEC_UNROLL) { // (the same trip count for every lane: shuffles)
        P kv[KERNELS_DEC_UNROLL], vv[KERNELS_DEC_UNROLL];
        float sc[KERNELS_DEC_UNROLL];
        KERNELS_UNROLL
        for (int x = 0; x < KERNELS_DEC_UNROLL; x++) {
            int j = j0 + x * NG + grp;
            kv[x] = P{};
            vv[x] = P{};
            if (on && j < j_hi) {
                kv[x] = kernels__ldv<P>(kb + (size_t)j * 2 * C, pk);
                vv[x] = kernels__ldv<P>(kb + (size_t)j * 2 * C + C, pk);
            }
        }
        float mn = m;
        KERNELS_UNROLL
        for (int x = 0; x < KERNELS_DEC_UNROLL; x++) {
            float d = 0.0f;
            KERNELS_UNROLL
            for (int k = 0; k < VEC; k++) { d += q[k] * kernels__f(kv[x].v[k]); }
            for (int off = G / 2; off > 0; off >>= 1) { d += __shfl_xor_sync(0xffffffffu, d, off); } // (within the group)
            sc[x] = j0 + x * NG + grp < j_hi ? d : -INFINITY;
            mn = fmaxf(mn, sc[x]);
        }
        if (mn == -INFINITY) { continue; } // this group has no key left
        float corr = __expf(m - mn); // (0 for the first keys: m = -inf)
        l *= corr;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { o[k] *= corr; }
        KERNELS_UNROLL
        for (int x = 0; x < KERNELS_DEC_UNROLL; x++) {
            float p = sc[x] == -INFINITY ? 0.0f : __expf(sc[x] - mn);
            l += p;
            KERNELS_UNROLL
            for (int k = 0; k < VEC; k++) { o[k] += p * kernels__f(vv[x].v[k]); }
        }
        m = mn;
    }
    for (int off = G; off < 32; off <<= 1) { // the groups' states merged: lane pk of every group ends with the warp's
        float mo = __shfl_xor_sync(0xffffffffu, m, off), lo = __shfl_xor_sync(0xffffffffu, l, off), oo[VEC];
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { oo[k] = __shfl_xor_sync(0xffffffffu, o[k], off); }
        kernels__dec_merge<VEC>(m, l, o, mo, lo, oo);
    }
    if (grp != 0 || !on) { return; }
    if (splits == 1) {
        P ov;
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { ov.v[k] = kernels__x(o[k] / l); }
        kernels__stv<P>(out + ((size_t)b * n + iq) * C + (size_t)h * hs, pk, ov);
        return;
    }
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) { part[(size_t)u * hs + (size_t)pk * VEC + k] = o[k]; }
    if (pk == 0) { ml[2 * u] = m; ml[2 * u + 1] = l; }
}

// Each row's splits merged in order, one warp a row, each lane the head's columns lane, lane + 32, ...: out (B, n, C).
__global__ void kernels__attention_decode_merge(floatX* out, const float* part, const float* ml, int rows, int n, int C, int NH,
                                                int splits) {
    long r = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows) { return; }
    int lane = threadIdx.x % 32, hs = C / NH, iq = (int)(r % n), h = (int)((r / n) % NH), b = (int)(r / ((long)n * NH));
    float M = -INFINITY;
    for (int s = 0; s < splits; s++) { M = fmaxf(M, ml[2 * (r * splits + s)]); } // (split 0 holds key 0: finite)
    float L = 0.0f, o[KERNELS_ATT_PER_LANE] = {0};
    for (int s = 0; s < splits; s++) {
        long u = r * splits + s;
        // (exactly 1 for the split holding the maximum, as exp(0) should be whatever __expf's approximation gives: a
        // row whose keys are all in split 0 is then split 0's o / l bit for bit, as when one split is launched)
        float w = ml[2 * u] == -INFINITY ? 0.0f : ml[2 * u] == M ? 1.0f : __expf(ml[2 * u] - M);
        L += w * ml[2 * u + 1];
        for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
            int d = lane + 32 * e;
            if (d < hs) { o[e] += w * part[(size_t)u * hs + d]; }
        }
    }
    floatX* orow = out + ((size_t)b * n + iq) * C + (size_t)h * hs;
    for (int e = 0; e < KERNELS_ATT_PER_LANE; e++) {
        int d = lane + 32 * e;
        if (d < hs) { orow[d] = kernels__x(o[e] / L); }
    }
}

// The splits of a row of keys [0, T): one query per sequence (a decoding step) splits its keys by
// KERNELS_DEC_KEYS; more (a prompt) already have rows enough to fill the GPU, one warp each.
static int kernels__dec_splits(int n, int T) { return n == 1 ? (T + KERNELS_DEC_KEYS - 1) / KERNELS_DEC_KEYS : 1; }
// Its scratch, in floats: (hs + 2) per (row, split).
static size_t kernels__dec_scratch_floats(int B, int NH, int n, int T, int hs) {
    int splits = kernels__dec_splits(n, T);
    return splits > 1 ? (size_t)B * NH * n * splits * (hs + 2) : 0;
}

// The decoding kernels, where a head's packs fit a warp (hs at most 32 packs); 0 where they do not (the caller runs
// the warp-per-row kernel).
static int kernels__attention_decode_launch(const KernelCtx* ctx, floatX* out, const floatX* q, const floatX* kv, int B, int T, int ld,
                                            int q_lo, int C, int NH) {
    int hs = C / NH, n = T - q_lo, vec = kernels__rows_packed(C, {out, q, kv}) && hs % KERNELS_PACK == 0 ? KERNELS_PACK : 1;
    if (hs / vec > 32) { return 0; }
    int G = 1;
    while (G < hs / vec) { G *= 2; }
    int keys = ctx->dec_pos ? ld : T; // (a position read at run time: as many splits as the cache has rows)
    int splits = kernels__dec_splits(n, keys);
    long units = (long)B * NH * n * splits;
    float *part = NULL, *ml = NULL;
    if (splits > 1) { // (the LayerNorm and bias gradients' partials: no backward runs in a sampling step)
        part = kernels__col_partials(ctx, kernels__dec_scratch_floats(B, NH, n, keys, hs));
        ml = part + (size_t)units * hs;
    }
    unsigned grid = (unsigned)((units + KERNELS_DEC_WARPS - 1) / KERNELS_DEC_WARPS);
    if (vec == 1) {
        kernels__attention_decode<1><<<grid, 32 * KERNELS_DEC_WARPS, 0, ctx->stream>>>(out, part, ml, q, kv, B, T, ld, q_lo, ctx->dec_pos, C, NH,
                                                                                       splits, G);
    } else {
        kernels__attention_decode<KERNELS_PACK><<<grid, 32 * KERNELS_DEC_WARPS, 0, ctx->stream>>>(out, part, ml, q, kv, B, T, ld, q_lo,
                                                                                                  ctx->dec_pos, C, NH, splits, G);
    }
    launchCheck();
    if (splits > 1) {
        long rows = (long)B * NH * n;
        kernels__attention_decode_merge<<<(unsigned)((rows + 7) / 8), 256, 0, ctx->stream>>>(out, part, ml, (int)rows, n, C, NH, splits);
        launchCheck();
    }
    return 1;
}

// The warp-per-row kernel over a KV cache's rows (what the decoding kernels replaced: the fallback for heads past 32
// packs, and bench_kernels' comparison).
static void kernels__attention_rows_warp(const KernelCtx* ctx, floatX* out, const floatX* q, const floatX* kv, int B, int T, int ld, int q_lo,
                                         int C, int NH) {
    long rows = (long)B * NH * (T - q_lo);
    kernels__attention_forward<<<(unsigned)((rows + 7) / 8), 256, 0, ctx->stream>>>(out, (float*)nullptr, q, kv, kv + C, 3 * C, 2 * C, B, T, ld,
                                                                                     q_lo, C, NH);
    launchCheck();
}

// CPU twin: attention_forward_rows (kernels_cpu.h). The decoding kernels above; the warp-per-row kernel for heads
// past 32 packs.
static void attention_forward_rows(const KernelCtx* ctx, floatX* out, const floatX* q, const floatX* kv, int B, int T, int ld,
                                   int q_lo, int C, int NH) {
    if (q_lo < 0 || q_lo >= T || T > ld) { fatal("internal: attention_forward_rows of queries [%d, %d) in %d rows", q_lo, T, ld); }
    kernels__attention_check(C, NH);
    if (kernels__attention_decode_launch(ctx, out, q, kv, B, T, ld, q_lo, C, NH)) { return; }
    if (ctx->dec_pos) { // (a captured decoding step: the capture fails, and the steps run op by op with positions as arguments)
        kernels__failed(__FILE__, __LINE__, "attention_forward_rows", "these heads take the warp-per-row kernel, which reads no position at run time");
        return;
    }
    kernels__attention_rows_warp(ctx, out, q, kv, B, T, ld, q_lo, C, NH);
}

// CPU twin: kv_cache_write (kernels_cpu.h). One thread per element of the destination rows (B n 2C of them: a
// decoding step's B rows, or a prompt's n rows copied into every sequence once).
__global__ void kernels__kv_cache_write(floatX* kv, const floatX* rows, int S, int B, int n, int pos, const int* dpos, int ld, int C) {
    long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long)B * n * 2 * C) { return; }
    if (dpos) { pos = *dpos; } // (a captured decoding step: the position read now)
    int c = (int)(e % (2 * C)), t = (int)((e / (2 * C)) % n), b = (int)(e / ((long)2 * C * n));
    kv[((size_t)b * ld + pos + t) * 2 * C + c] = rows[((size_t)(b % S) * n + t) * 3 * C + C + c];
}

static void kv_cache_write(const KernelCtx* ctx, floatX* kv, const floatX* rows, int S, int B, int n, int pos, int ld,
                           int C) {
    if ((S != 1 && S != B) || pos < 0 || pos + n > ld) { fatal("internal: kv_cache_write of %d x %d rows at %d into %d x %d", S, n, pos, B, ld); }
    long total = (long)B * n * 2 * C;
    kernels__kv_cache_write<<<(unsigned)((total + 255) / 256), 256, 0, ctx->stream>>>(kv, rows, S, B, n, pos, ctx->dec_pos, ld, C);
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
#endif // KERNELS_ATTENTION_CUH
