/*
kernels_optim.cuh: the CUDA backend's reductions and optimizer (split out of kernels.cuh by topic and included by
it last; not a standalone header): the two-pass sums behind the loss and the global gradient norm, and AdamW with
fp32 master weights and stochastic rounding into the compute copy.
*/
#ifndef KERNELS_OPTIM_CUH
#define KERNELS_OPTIM_CUH

// ----------------------------------------------------------------------------
// Reductions (two passes over fixed partials, so the sums are reproducible). CPU twins: sum_accumulate,
// sum_squares_accumulate, add_inplace.

// Thread i sums the 16-byte packs i, i + threads, ... of the floats from x's first 16-byte boundary: four floats a
// load, the loads of four packs issued before their sums wait for them. (One float a load reached half the copy
// bandwidth on an H200: too few bytes in flight.) The floats before that boundary (at most 3: a ZeRO shard starts
// anywhere) and after the last whole pack are taken one each by the first threads. The order depends on n and x's
// place in a pack alone, so the sums are reproducible.
__global__ void kernels__partial_sums(double* part, const float* x, size_t n, int squares) {
    typedef KernelsVec<float, 4> F4;
    size_t head = (size_t)((16 - ((uintptr_t)x & 15)) & 15) / sizeof(float);
    if (head > n) { head = n; }
    size_t packs = (n - head) / 4, rest = head + 4 * packs;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    double s = 0.0;
    KERNELS_UNROLL4
    for (size_t i = tid; i < packs; i += stride) {
        F4 v = kernels__ldv<F4>(x + head, i);
        KERNELS_UNROLL
        for (int k = 0; k < 4; k++) {
            double d = v.v[k];
            s += squares ? d * d : d;
        }
    }
    if (tid < head) {
        double d = x[tid];
        s += squares ? d * d : d;
    }
    if (tid < n - rest) {
        double d = x[rest + tid];
        s += squares ? d * d : d;
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

// Each thread sums at least KERNELS_SUM_PER_THREAD elements (two packs: loads in flight, instead of one each and a
// block reduction per 1024 elements), in blocks of up to 1024 threads, at most KERNELS_REDUCE_BLOCKS of them:
// the gradient norm of GPT-2 124M (124M floats) fills all 1024 blocks, 118 elements (30 packs) a thread; a loss
// over 128 tokens takes one warp.
#define KERNELS_SUM_PER_THREAD 8
static void kernels__sum(const KernelCtx* ctx, double* acc, const float* x, size_t n, int squares) {
    unsigned threads = kernels__row_threads((n + KERNELS_SUM_PER_THREAD - 1) / KERNELS_SUM_PER_THREAD);
    size_t per_block = (size_t)threads * KERNELS_SUM_PER_THREAD;
    unsigned blocks = (unsigned)((n + per_block - 1) / per_block);
    if (blocks > KERNELS_REDUCE_BLOCKS) { blocks = KERNELS_REDUCE_BLOCKS; }
    if (blocks == 0) { blocks = 1; }
    kernels__partial_sums<<<blocks, threads, 0, ctx->stream>>>(ctx->partials, x, n, squares);
    launchCheck();
    kernels__finish_sum<<<1, kernels__row_threads(blocks), 0, ctx->stream>>>(acc, ctx->partials, (int)blocks);
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
// with master weights; the parameter itself without, stochastically rounded to a 16-bit compute copy as llm.c's -w 0
// does, exact in fp32). i is the element's flat index, the stochastic rounding's key.
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
        p = kernels__x(round_stochastic(x, h.dtype, h.seed, (uint64_t)h.t, i)); // (fp32: x itself)
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
#endif // KERNELS_OPTIM_CUH
