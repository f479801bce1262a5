/*
kernels_matmul.cuh: the CUDA backend's matmuls and LM head (split out of kernels.cuh by topic and included by it
after kernels_layers.cuh, whose GELU the unfused paths use; not a standalone header). Linear layers through
cuBLASLt, a plan per shape made once, with the BIAS, GELU_AUX(_BIAS), DGELU and BGRADB epilogues and the unfused
ops where cuBLASLt has no algorithm; the bias gradient's own two-pass reduction; the LM head's logits, softmax,
cross-entropy and gradient in place over a chunk of rows.
*/
#ifndef KERNELS_MATMUL_CUH
#define KERNELS_MATMUL_CUH

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

// What a plan's descriptors and algorithm depend on (ints only: compared, and written to the algorithm file, whole).
typedef struct {
    int m, n, k, lda, ldb, transA, transB, has_bias, d_f32, beta_nonzero, epi, tf32;
    uint32_t al[5]; // the alignments of A, B, D, the bias and the auxiliary matrix the algorithm was chosen for
} KernelsLtKey;

// Where a plan's algorithm came from: the heuristic's first choice (the default), the fastest of the heuristic's
// first --matmul-tune candidates timed on this GPU, or the algorithm file (--matmul-algos).
enum { KERNELS_ALGO_HEURISTIC = 0, KERNELS_ALGO_TUNED = 1, KERNELS_ALGO_FILE = 2 };

// The descriptors and the algorithm of one matmul shape, made once: the heuristic query costs tens of microseconds
// of CPU time, and a training step runs a few hundred matmuls of a dozen shapes.
typedef struct {
    KernelsLtKey key;
    int usable; // 0: cuBLASLt has no algorithm for this epilogue here (the caller takes the unfused path)
    int source; // KERNELS_ALGO_*
    int found;  // the candidates the heuristic offered (1 unless --matmul-tune asked for more)
    float first_ms, best_ms; // (tuned, or from the file) a call with the heuristic's first algorithm, and with this one
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

#include "kernels_lt_tune.cuh" // --matmul-tune (timing the heuristic's candidates) and --matmul-algos (the file of choices)

// bias and aux: the pointers of the first call, set before the heuristic query, which reads them to learn their
// alignment (it would assume 256 bytes of NULL); a plan serves only pointers aligned as those were (al[3], al[4]).
static KernelsLtPlan* kernels__lt_plan(const KernelCtx* ctx, int d_f32, int transA, int lda, int transB, int ldb, const void* bias,
                                       int epi, const void* aux, int m, int n, int k, float beta, const uint32_t al[5]) {
    int has_bias = bias != NULL;
    KernelsLtKey key = {m, n, k, lda, ldb, transA, transB, has_bias, d_f32, beta != 0.0f, epi, ctx->tf32, {al[0], al[1], al[2], al[3], al[4]}};
    for (int i = 0; i < kernels__lt_num_plans; i++) {
        if (memcmp(&kernels__lt_plans[i].key, &key, sizeof(key)) == 0) { return &kernels__lt_plans[i]; }
    }
    if (kernels__lt_num_plans == kernels__lt_cap_plans) {
        kernels__lt_cap_plans = kernels__lt_cap_plans ? 2 * kernels__lt_cap_plans : 64;
        kernels__lt_plans = (KernelsLtPlan*)realloc(kernels__lt_plans, sizeof(KernelsLtPlan) * kernels__lt_cap_plans);
        if (!kernels__lt_plans) { fatal("cuBLASLt: out of host memory for %d matmul plans", kernels__lt_cap_plans); }
    }
    KernelsLtPlan* p = &kernels__lt_plans[kernels__lt_num_plans];
    memset(p, 0, sizeof(*p));
    p->key = key;
    cudaDataType_t ab_type = kernels__cuda_type(0), d_type = kernels__cuda_type(d_f32);
    // fp32 accumulation always; with --tf32 1 (fp32 storage only, kernels_set_tf32) the operands enter as TF32
    gpuCheck(cublasLtMatmulDescCreate(&p->op, ctx->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
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
    kernels__lt_num_plans++;
    // an algorithm the file holds for this key, if cuBLASLt still takes it for these descriptors
    if (kernels__lt_from_file(ctx, p)) { return p; }
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
    // the heuristic's candidates, best first by its own model: one, or --matmul-tune's count to time
    int want = ctx->matmul_tune > 1 ? (ctx->matmul_tune < KERNELS_TUNE_MAX ? ctx->matmul_tune : KERNELS_TUNE_MAX) : 1;
    cublasLtMatmulHeuristicResult_t heur[KERNELS_TUNE_MAX];
    int found = 0;
    // no algorithm is reported as CUBLAS_STATUS_NOT_SUPPORTED (with no result), not as success with zero results
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->op, p->la, p->lb, p->ld, p->ld, pref, want, heur, &found);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED) { found = 0; }
    else { gpuCheck(hs); }
    cublasLtMatmulPreferenceDestroy(pref);
    p->usable = found > 0;
    if (found == 0 && epi != KERNELS_EPI_NONE) { // remembered, so the query is not repeated every step
        fprintf(stderr, "cuBLASLt: no algorithm for the %s epilogue of a %d x %d x %d matmul: unfused ops instead\n",
                kernels__epi_names[epi], m, n, k);
        return p;
    }
    if (found == 0) {
        fatal("cuBLASLt: no algorithm for a %d x %d x %d matmul (transA %d, transB %d, bias %d, epilogue %d, fp32 out %d, alignments %u/%u/%u/%u)",
              m, n, k, transA, transB, has_bias, epi, d_f32, al[0], al[1], al[2], al[3]);
    }
    p->algo = heur[0].algo;
    p->found = found;
    if (found > 1) { kernels__lt_tune(ctx, p, heur, found); }
    return p;
}

// D (m x n, ldd = m) = alpha op(A) op(B) + beta D, column-major; A is (m x k) after op, B (k x n) after op. With
// bias (length m, floatX) the BIAS epilogue adds it to every column. epi KERNELS_EPI_GELU_AUX: D = GELU(product +
// bias) and aux (m x n, floatX) receives product + bias; KERNELS_EPI_DGELU: D = GELU'(aux) * product;
// KERNELS_EPI_BGRADB: bias (length n, D's type) receives the column sums of op(B), overwritten. Returns 0, having done
// nothing, when cuBLASLt offers no algorithm for that epilogue or refuses it when run (the caller then runs the
// unfused ops).
static int kernels__matmul_lt(const KernelCtx* ctx, void* d, int d_f32, const floatX* a, int transA, int lda, const floatX* b,
                               int transB, int ldb, const void* bias, int m, int n, int k, float beta, int epi = KERNELS_EPI_NONE,
                               const floatX* aux = NULL) {
    uint32_t al[5] = {kernels__alignment(a), kernels__alignment(b), kernels__alignment(d), kernels__alignment(bias), kernels__alignment(aux)};
    KernelsLtPlan* p = kernels__lt_plan(ctx, d_f32, transA, lda, transB, ldb, bias, epi, aux, m, n, k, beta, al);
    if (!p->usable) { return 0; }
    if (bias) { gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias))); }
    if (aux) { gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux))); }
    float alpha = 1.0f;
    cublasStatus_t cublasLtMatmul_status = cublasLtMatmul(ctx->lt, p->op, &alpha, a, p->la, b, p->lb, &beta, d, p->ld, d, p->ld,
                                                          &p->algo, ctx->lt_workspace, KERNELS_LT_WORKSPACE, ctx->stream);
    // cuBLASLt may refuse an epilogue its heuristic offered only when the product is asked for (checks it makes then):
    // nothing ran, so the caller's unfused ops take over, for this plan from now on
    if (cublasLtMatmul_status == CUBLAS_STATUS_NOT_SUPPORTED && epi != KERNELS_EPI_NONE) {
        p->usable = 0;
        fprintf(stderr, "cuBLASLt: the %s epilogue of a %d x %d x %d matmul was refused when run: unfused ops instead\n",
                kernels__epi_names[epi], m, n, k);
        return 0;
    }
    gpuCheck(cublasLtMatmul_status);
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

// The partials of kernels__bias_grad: a row of OC sums for each row group (the BGRADB epilogue's one row is fewer).
static size_t kernels__bias_partial_floats(int OC) { return (size_t)KERNELS_BIAS_ROW_GROUPS * OC; }

// dbias (+)= the column sums of dout (BT, OC): the bias gradient of matmul_backward.
static void kernels__bias_grad(const KernelCtx* ctx, float* dbias, const floatX* dout, int BT, int OC, int acc) {
    float* part = kernels__col_partials(ctx, kernels__bias_partial_floats(OC));
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
// LM head + softmax + cross-entropy. CPU twin: classifier_forward_backward. Per chunk of rows: logits by cuBLASLt
// into the chunk (floatX), then one block per row turns them into the loss and, in place, into dlogits =
// dloss_scale (softmax - onehot) (floatX, padded columns zero), never materialising fp32 probabilities; then dx
// and dwte by cuBLASLt.

// (m, s) <- the maximum and the sum of exp(x - max) over the union of two sets given as (m, s) and (m2, s2); an empty
// set is (-inf, 0). Commutative bit for bit, so every lane of a butterfly ends with the same result: both products
// rounded before the sum (__fmul_rn, __fadd_rn), which nvcc would otherwise contract into fma(s, e, s2 * e2), whose
// two partners round differently.
__device__ __forceinline__ void kernels__lse_merge(float& m, float& s, float m2, float s2) {
    if (m2 == -INFINITY) { return; } // (two empty sets would give exp(-inf + inf) = NaN below)
    float M = fmaxf(m, m2);
    s = __fadd_rn(__fmul_rn(s, __expf(m - M)), __fmul_rn(s2, __expf(m2 - M)));
    m = M;
}

// One pack's elements below n (the pack's first element is pack * VEC) added to a thread's running maximum m and sum s
// of exp(x - m): the online softmax, the sum rescaled when the maximum grows.
template <int VEC>
__device__ __forceinline__ void kernels__lse_add_pack(const KernelsVec<floatX, VEC>& zv, int pack, int n, float& m, float& s) {
    KERNELS_UNROLL
    for (int k = 0; k < VEC; k++) {
        if (pack * VEC + k >= n) { break; }
        float x = kernels__f(zv.v[k]);
        if (x > m) { s = s * __expf(m - x) + 1.0f; m = x; }
        else { s += __expf(x - m); }
    }
}

// A butterfly over the warp's lanes: every lane ends with the merge of all 32 (m, s), the same bits in each, since
// kernels__lse_merge is commutative bit for bit (the two partners of an exchange compute the same value).
__device__ __forceinline__ void kernels__warp_lse(float& m, float& s) {
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        kernels__lse_merge(m, s, m2, s2);
    }
}

// The threads' (m, s) combined over the block (blockDim.x a multiple of 32): a butterfly in each warp, then every
// warp merges the warps' results itself by the same butterfly (an empty set, (-inf, 0), past the last warp), so every
// thread receives the result, the same bits in each warp. No thread merges the 32 in turn while the block waits, and
// no second barrier hands a result on: at one block of 1024 threads an SM (the LM head's softmax) nothing hides a
// row's serial steps. Once per block: a second call would overwrite red_m while slower warps still read it.
__device__ void kernels__block_lse(float m, float s, float* m_out, float* s_out) {
    __shared__ float red_m[32], red_s[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    kernels__warp_lse(m, s);
    if (lane == 0) { red_m[warp] = m; red_s[warp] = s; }
    __syncthreads();
    m = lane < nw ? red_m[lane] : -INFINITY;
    s = lane < nw ? red_s[lane] : 0.0f;
    kernels__warp_lse(m, s);
    *m_out = m;
    *s_out = s;
}

// The maximum m of z[0..n) and the sum s of exp(z - m), by the whole block in one pass, each thread taking packs
// threadIdx.x, + blockDim.x, ... in turn. Packs of VEC: z 16-byte aligned and readable up to n rounded up to VEC.
template <int VEC>
__device__ void kernels__row_max_sumexp(const floatX* z, int n, float* m_out, float* s_out) {
    typedef KernelsVec<floatX, VEC> P;
    float m = -INFINITY, s = 0.0f;
    for (int p = threadIdx.x; p < (n + VEC - 1) / VEC; p += blockDim.x) { kernels__lse_add_pack<VEC>(kernels__ldv<P>(z, p), p, n, m, s); }
    kernels__block_lse(m, s, m_out, s_out);
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

// The same with the row held in registers, for rows of at most PPT packs a thread: each thread loads all its packs
// at once (every load of the row in flight together), takes its maximum and sum from them in the order the kernel
// above does (the same bits), and writes the gradient from them. The kernel above reads the row twice, one pack at a
// time per thread, waiting on each: on an H200 it ran at about half the copy bandwidth (5.1% of a GPT-2 124M step
// under ncu). GPT-2's rows of 50304 bf16 logits are 7 packs a thread at 1024 threads (28 registers of data).
template <int VEC, int PPT>
__global__ void __launch_bounds__(1024)
kernels__classifier_softmax_regs(floatX* logits, float* losses, const int32_t* targets, float dloss_scale, int V, int Vp, int want_grad) {
    typedef KernelsVec<floatX, VEC> P;
    int r = blockIdx.x, np = Vp / VEC, nv = (V + VEC - 1) / VEC;
    floatX* z = logits + (size_t)r * Vp;
    int tgt = targets[r];
    P zv[PPT] = {};
    KERNELS_UNROLL
    for (int j = 0; j < PPT; j++) {
        int p = threadIdx.x + j * blockDim.x;
        if (p < np) { zv[j] = kernels__ldv<P>(z, p); }
    }
    float m = -INFINITY, sum = 0.0f;
    KERNELS_UNROLL
    for (int j = 0; j < PPT; j++) {
        int p = threadIdx.x + j * blockDim.x;
        if (p < nv) { kernels__lse_add_pack<VEC>(zv[j], p, V, m, sum); }
    }
    kernels__block_lse(m, sum, &m, &sum);
    float lse = m + logf(sum);
    // the loss from the register that holds z[tgt], by the thread that loaded it (thread 0 writes 0 for a row without
    // a target): the row is not read again from memory, and no barrier waits for that read before the gradient
    // overwrites the row. (At 1024 threads a block holds a whole SM's registers, so a row's serial tail is not hidden.)
    if (tgt < 0) {
        if (threadIdx.x == 0) { losses[r] = 0.0f; }
    } else if ((int)threadIdx.x == tgt / VEC % (int)blockDim.x) {
        KERNELS_UNROLL
        for (int j = 0; j < PPT; j++) { // (indices known at compile time: zv stays in registers)
            int p = threadIdx.x + j * blockDim.x;
            KERNELS_UNROLL
            for (int k = 0; k < VEC; k++) {
                if (p * VEC + k == tgt) { losses[r] = lse - kernels__f(zv[j].v[k]); }
            }
        }
    }
    if (!want_grad) { return; }
    float sc = tgt >= 0 ? dloss_scale : 0.0f;
    KERNELS_UNROLL
    for (int j = 0; j < PPT; j++) {
        int p = threadIdx.x + j * blockDim.x;
        if (p >= np) { continue; }
        KERNELS_UNROLL
        for (int k = 0; k < VEC; k++) { // (in place in zv[j]: no second pack of registers)
            int e = p * VEC + k;
            float g = e < V ? sc * (__expf(kernels__f(zv[j].v[k]) - lse) - (e == tgt ? 1.0f : 0.0f)) : 0.0f;
            zv[j].v[k] = kernels__x(g);
        }
        kernels__stv<P>(z, p, zv[j]);
    }
}
// The softmax over `rows` rows of Vp logits, in packs of VEC: a block per row, a thread per pack (GPT-2: 1024
// threads); kernels__classifier_softmax_regs<VEC, PPT> for the smallest PPT of at least the packs a thread takes (up to
// 8), or the kernel above.
#define KERNELS_SOFTMAX_PPT 8
template <int VEC, int PPT = 1>
static void kernels__classifier_softmax_launch(const KernelCtx* ctx, int rows, floatX* chunk, float* losses, const int32_t* targets,
                                               float dloss_scale, int V, int Vp, int want_grad) {
    unsigned th = kernels__row_threads(Vp / VEC);
    if ((Vp / VEC + th - 1) / th <= PPT) {
        kernels__classifier_softmax_regs<VEC, PPT><<<rows, th, 0, ctx->stream>>>(chunk, losses, targets, dloss_scale, V, Vp, want_grad);
    } else if constexpr (PPT < KERNELS_SOFTMAX_PPT) {
        kernels__classifier_softmax_launch<VEC, PPT + 1>(ctx, rows, chunk, losses, targets, dloss_scale, V, Vp, want_grad);
    } else {
        kernels__classifier_softmax<VEC><<<rows, th, 0, ctx->stream>>>(chunk, losses, targets, dloss_scale, V, Vp, want_grad);
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
            kernels__classifier_softmax_launch<KERNELS_PACK>(ctx, rows, chunk, losses + r0, targets + r0, dloss_scale, V, Vp, dx != NULL);
        } else {
            kernels__classifier_softmax_launch<1>(ctx, rows, chunk, losses + r0, targets + r0, dloss_scale, V, Vp, dx != NULL);
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
        unsigned th = kernels__row_threads(Vp_l / KERNELS_PACK);
        kernels__vp_stats<KERNELS_PACK><<<rows, th, 0, ctx->stream>>>(stats, logits, targets, vocab_lo, Vp_l, real);
    } else {
        kernels__vp_stats<1><<<rows, kernels__row_threads(Vp_l), 0, ctx->stream>>>(stats, logits, targets, vocab_lo, Vp_l, real);
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
        unsigned th = kernels__row_threads(Vp_l / KERNELS_PACK);
        kernels__vp_apply<KERNELS_PACK><<<rows, th, 0, ctx->stream>>>(losses, logits, stats, targets, dloss_scale, vocab_lo, Vp_l, real, want_grad);
    } else {
        kernels__vp_apply<1><<<rows, kernels__row_threads(Vp_l), 0, ctx->stream>>>(losses, logits, stats, targets, dloss_scale, vocab_lo, Vp_l, real, want_grad);
    }
    launchCheck();
}

// CPU twin: classifier_logits_rows. out (R, Vp) fp32 = x (R, C) @ wte^T, through floatX rows as the stored logits are.
static void classifier_logits_rows(const KernelCtx* cctx, float* out, const floatX* x, const floatX* wte, int R, int C, int Vp) {
    KernelCtx* ctx = (KernelCtx*)cctx;
    ctx->row_scratch = (floatX*)kernels__grow(ctx, ctx->row_scratch, &ctx->row_scratch_bytes, (size_t)R * Vp * sizeof(floatX));
    matmul_forward(ctx, ctx->row_scratch, x, wte, NULL, R, C, Vp);
    dev_x_to_f32(ctx, out, ctx->row_scratch, (size_t)R * Vp);
}
#endif // KERNELS_MATMUL_CUH
