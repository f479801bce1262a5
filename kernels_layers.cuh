/*
kernels_layers.cuh: the CUDA backend's embedding, LayerNorm and GELU (split out of kernels.cuh by topic and included
by it after its core: the context, memory, packed access and block reductions; not a standalone header). The token
and position embedding forward and its deterministic backward over radix-sorted tokens; LayerNorm one warp per row,
fused with the residual add, forward, apply and backward; GELU (tanh approximation) forward and backward.
*/
#ifndef KERNELS_LAYERS_CUH
#define KERNELS_LAYERS_CUH

// ----------------------------------------------------------------------------
// Encoder. CPU twin: encoder_forward / encoder_backward.

// VEC consecutive channels per step (C a multiple of VEC); tokens outside [vocab_lo, vocab_lo + vocab_n) embed as 0;
// position t's embedding is wpe's row t, or t + *pos0 (a decoding step's position, read here: KernelCtx.dec_pos)
template <int VEC>
__global__ void kernels__encoder_forward(floatX* out, const int32_t* tok, const floatX* wte, const floatX* wpe, const int* pos0,
                                         int vocab_lo, int vocab_n, int B, int T, int C) {
    typedef KernelsVec<floatX, VEC> P;
    size_t packs = (size_t)B * T * C / VEC;
    int cp = C / VEC; // packs per row
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < packs; i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / cp;
        int c = (int)(i % cp), t = (int)(row % T) + (pos0 ? *pos0 : 0), v = tok[row] - vocab_lo;
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
        kernels__encoder_forward<KERNELS_PACK><<<kernels__blocks(n / KERNELS_PACK, 256), 256, 0, ctx->stream>>>(out, tok, wte, wpe, ctx->dec_pos,
                                                                                                          vocab_lo, vocab_n, B, T, C);
    } else {
        kernels__encoder_forward<1><<<kernels__blocks(n, 256), 256, 0, ctx->stream>>>(out, tok, wte, wpe, ctx->dec_pos, vocab_lo, vocab_n, B, T, C);
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

// The token sort's buffers for BT tokens (keys and values, in and out, in one buffer, and cub's scratch, asked for
// with the sort's own arguments), grown like the context's other workspaces (kernels__grow_to): the bytes they add,
// made only with alloc.
static size_t kernels__sort_reserve(KernelCtx* ctx, int BT, int alloc) {
    if (BT <= ctx->sort_capacity) { return 0; }
    size_t temp = 0;
    gpuCheck(cub::DeviceRadixSort::SortPairs(NULL, temp, (const int32_t*)NULL, (int32_t*)NULL, (const int32_t*)NULL,
                                             (int32_t*)NULL, BT, 0, 32, ctx->stream));
    size_t added = kernels__grow_to(ctx, (void**)&ctx->sort_keys_in, &ctx->sort_keys_bytes, 4 * (size_t)BT * sizeof(int32_t), alloc) +
                   kernels__grow_to(ctx, &ctx->sort_temp, &ctx->sort_temp_bytes, temp, alloc);
    if (alloc) {
        int32_t* buf = ctx->sort_keys_in;
        ctx->sort_keys_out = buf + BT; ctx->sort_vals_in = buf + 2 * (size_t)BT; ctx->sort_vals_out = buf + 3 * (size_t)BT;
        ctx->sort_capacity = BT;
    }
    return added;
}

static void encoder_backward(const KernelCtx* cctx, float* dwte, float* dwpe, const floatX* dout, const int32_t* tok,
                             int vocab_lo, int vocab_n, int B, int T, int C) {
    KernelCtx* ctx = (KernelCtx*)cctx; // the sort buffers grow on first use (unless kernels_reserve sized them)
    int BT = B * T;
    kernels__sort_reserve(ctx, BT, 1);
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
// Its partials: 2C floats for each of the 8 warps of a block (kernels_reserve sizes them for the step's rows).
static size_t kernels__ln_partial_floats(const KernelCtx* ctx, int BT, int C) { return (size_t)8 * kernels__ln_blocks(ctx, BT) * 2 * C; }
// One pack's terms of a row's two means (dx = rstd (g - mean(g) - n mean(g n)), g = dout w, n the normalized input),
// added to g_sum and gn_sum in element order.
template <int VEC>
__device__ __forceinline__ void kernels__ln_bwd_sums(const KernelsVec<floatX, VEC>& xv, const KernelsVec<floatX, VEC>& dv,
                                                     const KernelsVec<floatX, VEC>& wv, float m, float s, float& g_sum, float& gn_sum) {
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) {
        float n = (kernels__f(xv.v[k]) - m) * s, g = kernels__f(dv.v[k]) * kernels__f(wv.v[k]);
        g_sum += g;
        gn_sum += g * n;
    }
}
// One pack's dinp, added into dxv, and its terms of dw and db, added to dwv and dbv.
template <int VEC>
__device__ __forceinline__ void kernels__ln_bwd_apply(const KernelsVec<floatX, VEC>& xv, const KernelsVec<floatX, VEC>& dv,
                                                      const KernelsVec<floatX, VEC>& wv, KernelsVec<floatX, VEC>& dxv, float m, float s,
                                                      float g_mean, float gn_mean, KernelsVec<float, VEC>& dwv, KernelsVec<float, VEC>& dbv) {
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) {
        float n = (kernels__f(xv.v[k]) - m) * s, di = kernels__f(dv.v[k]), g = di * kernels__f(wv.v[k]);
        dxv.v[k] = kernels__x(kernels__f(dxv.v[k]) + s * (g - g_mean - n * gn_mean));
        dwv.v[k] += di * n;
        dbv.v[k] += di;
    }
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
            kernels__ln_bwd_sums<VEC>(kernels__ldv<P>(x, p), kernels__ldv<P>(d, p), kernels__ldv<P>(w, p), m, s, g_mean, gn_mean);
        }
        g_mean = kernels__warp_sum(g_mean) / C;
        gn_mean = kernels__warp_sum(gn_mean) / C;
        for (int p = lane; p < np; p += 32) {
            P dxv = kernels__ldv<P>(dx, p);
            F dwv = kernels__ldv<F>(pdw, p), dbv = kernels__ldv<F>(pdb, p);
            kernels__ln_bwd_apply<VEC>(kernels__ldv<P>(x, p), kernels__ldv<P>(d, p), kernels__ldv<P>(w, p), dxv, m, s, g_mean, gn_mean, dwv, dbv);
            kernels__stv<P>(dx, p, dxv);
            kernels__stv<F>(pdw, p, dwv);
            kernels__stv<F>(pdb, p, dbv);
        }
    }
}

// The same with each lane's dw and db sums for its columns in registers, written to the partials once, at the end;
// and the row's dinp loaded with x and dout in the first pass, so a row waits on memory once. WPR warps take a row:
//   WPR 1: rows of at most 32 PPL packs (GPT-2 124M's 768 channels are 3 bf16 packs a lane; 1024 are 4);
//   WPR 2: rows of at most 64 PPL packs (774M's 1280 channels are 160 packs, 3 a lane; 1558M's 1600 are 200, 4 a
//          lane), each warp holding half of the row's packs (the first (np + 1) / 2, the second the rest) and
//          applying dx to its half. Each warp of the pair adds up the row's two sums over the whole row itself, as one
//          warp holding the row would (so both get the same bits, and the same as WPR 1 and the kernel above): it
//          reads its partner's half too, which the partner loads at about the same moment (from the cache, not
//          memory), and no warp ever waits for another. (Exchanging the halves' sums instead needs a barrier per row,
//          which holds the block's eight warps in step: each row's loads would drain at it.)
// The kernel above reads and writes those fp32 partials for every row (12 KB per row of 768, beside the row's 6 KB of
// bf16) and waits on dinp's load in its second pass: it reached 53% of the copy bandwidth on an H200, this one 79%.
// The second pass reads x, dout and w again (from the cache): holding them too would spill (ptxas -v: 128 registers
// and 92 bytes of spills at 3 packs a lane; this way 110 and none, 123 at 4, 128 and 127 with WPR 2; nvcc 13, bf16).
// Each warp adds its rows in the same order as the kernel above, each sum in the same order: dinp has the same bits.
// The partials: a row per group of WPR warps (the group's warps hold different columns). (__launch_bounds__: two
// blocks of 256 threads per SM, the grid kernels__ln_blocks sizes, so at most 128 registers.)
template <int VEC, int PPL, int WPR>
__global__ void __launch_bounds__(256, 2)
kernels__layernorm_backward_regs(floatX* dinp, float* partial, const floatX* dout, const floatX* inp, const floatX* w,
                                 const float* mean, const float* rstd, int BT, int C) {
    typedef KernelsVec<floatX, VEC> P;
    typedef KernelsVec<float, VEC> F;
    constexpr int G = 8 / WPR; // groups of WPR warps in a block
    int lane = threadIdx.x % 32, gb = threadIdx.x / (32 * WPR), half = (threadIdx.x / 32) % WPR;
    int groups = gridDim.x * G, group = blockIdx.x * G + gb;
    int np = C / VEC, hp = (np + WPR - 1) / WPR;
    int p0 = half * hp, pn = half ? np - hp : hp; // this warp's packs: [p0, p0 + pn)
    F dw[PPL], db[PPL];
    KERNELS_UNROLL
    for (int j = 0; j < PPL; j++) {
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { dw[j].v[k] = 0.0f; db[j].v[k] = 0.0f; }
    }
    for (int row = group; row < BT; row += groups) {
        const floatX* x = inp + (size_t)row * C;
        const floatX* d = dout + (size_t)row * C;
        floatX* dx = dinp + (size_t)row * C;
        float m = mean[row], s = rstd[row];
        float g_mean = 0.0f, gn_mean = 0.0f;
        P dxv[PPL] = {};
        KERNELS_UNROLL
        for (int j = 0; j < PPL; j++) {
            if (lane + 32 * j < pn) { dxv[j] = kernels__ldv<P>(dx, p0 + lane + 32 * j); }
        }
        // the sums below load x and dout a pack at a time, each in a branch of its own, which the compiler does not
        // hoist: without this a row would wait on DRAM once per pack (three times at C 768). The later packs are
        // asked into L2 first, so only the first pack waits on DRAM. (No value changes: the same bits.)
        KERNELS_UNROLL
        for (int j = 1; j < WPR * PPL; j++) {
            int p = lane + 32 * j;
            if (p < np) { kernels__prefetch_l2<P>(x, p); kernels__prefetch_l2<P>(d, p); }
        }
        KERNELS_UNROLL
        for (int j = 0; j < WPR * PPL; j++) { // (the whole row: packs lane, lane + 32, ...)
            int p = lane + 32 * j;
            if (p < np) { kernels__ln_bwd_sums<VEC>(kernels__ldv<P>(x, p), kernels__ldv<P>(d, p), kernels__ldv<P>(w, p), m, s, g_mean, gn_mean); }
        }
        g_mean = kernels__warp_sum(g_mean) / C;
        gn_mean = kernels__warp_sum(gn_mean) / C;
        KERNELS_UNROLL
        for (int j = 0; j < PPL; j++) {
            int p = p0 + lane + 32 * j;
            if (lane + 32 * j < pn) {
                kernels__ln_bwd_apply<VEC>(kernels__ldv<P>(x, p), kernels__ldv<P>(d, p), kernels__ldv<P>(w, p), dxv[j], m, s, g_mean, gn_mean, dw[j], db[j]);
                kernels__stv<P>(dx, p, dxv[j]);
            }
        }
    }
    float* pdw = partial + (size_t)group * 2 * C;
    KERNELS_UNROLL
    for (int j = 0; j < PPL; j++) {
        if (lane + 32 * j < pn) {
            kernels__stv<F>(pdw, p0 + lane + 32 * j, dw[j]);
            kernels__stv<F>(pdw + C, p0 + lane + 32 * j, db[j]);
        }
    }
}

// kernels__layernorm_backward_regs<VEC, PPL, WPR> for the smallest PPL of at least ppl[WPR - 1] (the packs a lane
// takes when WPR warps hold a row), one warp a row first, then two; past both, the first kernel (its sums in
// memory). Returns the rows of partials written.
#ifndef KERNELS_LN_REGS_PPL
#define KERNELS_LN_REGS_PPL 4 // (0: always the first kernel)
#endif
// The packs a lane takes of a row of np packs when a warp holds the row (ppl[0]) and when it holds half of it (ppl[1]).
static void kernels__ln_packs_per_lane(int np, int ppl[2]) {
    ppl[0] = (np + 31) / 32;
    ppl[1] = ((np + 1) / 2 + 31) / 32;
}
template <int VEC, int WPR = 1, int PPL = 1>
static int kernels__layernorm_backward_launch(const KernelCtx* ctx, int blocks, const int ppl[2], floatX* dinp, float* part,
                                              const floatX* dout, const floatX* inp, const floatX* w, const float* mean,
                                              const float* rstd, int BT, int C) {
    if (KERNELS_LN_REGS_PPL > 0 && ppl[WPR - 1] <= PPL) {
        kernels__layernorm_backward_regs<VEC, PPL, WPR><<<blocks, 256, 0, ctx->stream>>>(dinp, part, dout, inp, w, mean, rstd, BT, C);
        return 8 / WPR * blocks;
    } else if constexpr (PPL < KERNELS_LN_REGS_PPL) {
        return kernels__layernorm_backward_launch<VEC, WPR, PPL + 1>(ctx, blocks, ppl, dinp, part, dout, inp, w, mean, rstd, BT, C);
    } else if constexpr (WPR == 1) {
        return kernels__layernorm_backward_launch<VEC, 2, 1>(ctx, blocks, ppl, dinp, part, dout, inp, w, mean, rstd, BT, C);
    } else {
        kernels__layernorm_backward<VEC><<<blocks, 256, 0, ctx->stream>>>(dinp, part, dout, inp, w, mean, rstd, BT, C);
        return 8 * blocks;
    }
}

// out[c] (+)= sum over r of part[r * stride + c] (a column sum of partials in a fixed order, so deterministic); columns
// from `split` on go to out2[c - split] instead (LayerNorm's dw and db, adjacent in each partial row, in one launch).
// A block of 32 x 32 threads takes 32 columns: thread (x, y) sums rows y, y + 32, ... of column x (eight loads in
// flight per thread, each warp reading 128 contiguous bytes; the adds stay in row order), then thread (x, 0) adds the
// 32 sums in order. (One thread per column summing every row in turn waited on one load at a time: hundreds of
// microseconds for 2000 rows.)
#define KERNELS_SUM_LANES 32
__global__ void kernels__sum_columns(float* out, float* out2, int split, const float* part, int rows, size_t stride, int cols, int acc) {
    __shared__ float sums[KERNELS_SUM_LANES][33]; // (+1: no bank conflicts when column x reads down its sums)
    int x = threadIdx.x, y = threadIdx.y, c = blockIdx.x * 32 + x;
    float s = 0.0f;
    if (c < cols) {
        KERNELS_UNROLL8
        for (int r = y; r < rows; r += KERNELS_SUM_LANES) { s += part[(size_t)r * stride + c]; }
    }
    sums[y][x] = s;
    __syncthreads();
    if (y == 0 && c < cols) {
        float t = 0.0f;
        for (int k = 0; k < KERNELS_SUM_LANES; k++) { t += sums[k][x]; }
        float* o = c < split ? out + c : out2 + (c - split);
        *o = acc ? *o + t : t;
    }
}

static void kernels__sum_columns_launch(cudaStream_t stream, float* out, const float* part, int rows, size_t stride, int cols, int acc,
                                        float* out2 = NULL, int split = -1) {
    if (split < 0) { split = cols; }
    kernels__sum_columns<<<(cols + 31) / 32, dim3(32, KERNELS_SUM_LANES), 0, stream>>>(out, out2, split, part, rows, stride, cols, acc);
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
    int blocks = kernels__ln_blocks(ctx, BT), rows;
    float* part = kernels__col_partials(ctx, kernels__ln_partial_floats(ctx, BT, C));
    int packed = kernels__rows_packed(C, {dinp, dout, inp, w}), ppl[2];
    kernels__ln_packs_per_lane(packed ? C / KERNELS_PACK : C, ppl);
    if (packed) {
        rows = kernels__layernorm_backward_launch<KERNELS_PACK>(ctx, blocks, ppl, dinp, part, dout, inp, w, mean, rstd, BT, C);
    } else { // (one element a lane at a time)
        rows = kernels__layernorm_backward_launch<1>(ctx, blocks, ppl, dinp, part, dout, inp, w, mean, rstd, BT, C);
    }
    launchCheck();
    kernels__sum_columns_launch(ctx->stream, dw, part, rows, 2 * (size_t)C, 2 * C, acc, db, C); // (dw | db in each row)
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
#endif // KERNELS_LAYERS_CUH
