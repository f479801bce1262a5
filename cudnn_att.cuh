/*
cudnn_att.cuh: causal flash attention (forward and backward) through cuDNN 9's backend (graph) C API, for the CUDA
backend (kernels_attention.cuh includes it when built with -DUSE_CUDNN). The C++ frontend is not installed, so the
graphs are built descriptor by descriptor, mirroring what the frontend builds for causal bf16/fp16 SDPA on cuDNN 9.19: a
composite graph of matmul, pointwise, reduction and reshape operations that cuDNN recognises and runs with its
fused flash-attention engines (the recipe, with its sources: ../shared/notes/cudnn-sdpa.md).

Layout: our qkv is (B, T, 3, NH, HS) with C3 = 3 C, so Q, K and V are strided views of it (no copies), O is
(B, T, NH, HS), and Stats (B, NH, T) fp32 is the natural-log log-sum-exp of each row of scaled, masked scores:
exactly the `lse` the native kernels keep, so the two implementations are interchangeable, even between forward
and backward (a cross-check the GPU tests use).

The graphs are built and finalized without a GPU (cuDNN accepts descriptors and operation graphs without a handle),
so CI checks every tensor, stride, UID and operation here (tests/test_cudnn_graph.cu); only the engine heuristics,
the execution plans and the execution need the GPU. Plans are cached per shape (below); forward-only passes of
varying length (sampling, HellaSwag) run at a few bucketed lengths (kernels_forward_len), so the cache holds a handful.
*/
#ifndef CUDNN_ATT_CUH
#define CUDNN_ATT_CUH

#include <cudnn.h>

static const char* kernels__status(cudnnStatus_t s) {
    static char buf[1200];
    if (s == CUDNN_STATUS_SUCCESS) { return NULL; }
    char last[1024] = "";
    cudnnGetLastErrorString(last, sizeof(last));
    snprintf(buf, sizeof(buf), "%s%s%s", cudnnGetErrorString(s), last[0] ? ": " : "", last);
    return buf;
}

// Unique ids of the graphs' non-virtual tensors (the variant pack binds pointers to them); virtual ones count from
// ATT_UID_VIRTUAL.
enum {
    ATT_UID_Q = 1, ATT_UID_KT, ATT_UID_V, ATT_UID_O, ATT_UID_STATS, ATT_UID_SCALE, ATT_UID_NEG_INF,
    ATT_UID_DO, ATT_UID_DQ, ATT_UID_DK, ATT_UID_DV, ATT_UID_ONE, ATT_UID_SOFTMAX_SUM, ATT_UID_VT, ATT_UID_DQ_ACCUM,
    ATT_UID_VIRTUAL = 100
};

// A backward graph makes 70 descriptors and a forward one 48; a plan search adds at most 18 more (a heuristic, its 16
// configurations, and the engine being read or the plan being tried), dropped again when the search fails
// (tests/test_cudnn_graph checks the sum).
#define ATT_MAX_DESCS 128

// Every descriptor made while building one graph, destroyed together.
typedef struct {
    cudnnBackendDescriptor_t all[ATT_MAX_DESCS];
    int n;
    cudnnBackendDescriptor_t ops[32];
    int nops;
    int64_t next_virtual;
} AttBuild;

static cudnnBackendDescriptor_t att__new(AttBuild* g, cudnnBackendDescriptorType_t type) {
    if (g->n >= ATT_MAX_DESCS) { fatal("cudnn attention: more than %d descriptors in one graph", ATT_MAX_DESCS); }
    cudnnBackendDescriptor_t d;
    gpuCheck(cudnnBackendCreateDescriptor(type, &d));
    g->all[g->n++] = d;
    return d;
}

// Destroys the descriptors made since g held `mark` of them (newest first).
static void att__drop_to(AttBuild* g, int mark) {
    while (g->n > mark) { cudnnBackendDestroyDescriptor(g->all[--g->n]); }
}

static void att__free(AttBuild* g) {
    att__drop_to(g, 0);
    g->nops = 0;
}

// A 4-D tensor. uid 0: a new virtual tensor (an intermediate of the graph).
static cudnnBackendDescriptor_t att__tensor(AttBuild* g, int64_t uid, cudnnDataType_t type, const int64_t dims[4],
                                            const int64_t strides[4], int by_value) {
    cudnnBackendDescriptor_t t = att__new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    bool is_virtual = uid == 0, value = by_value != 0;
    if (is_virtual) { uid = g->next_virtual++; }
    int64_t align = 16;
    gpuCheck(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    gpuCheck(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    gpuCheck(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    gpuCheck(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    gpuCheck(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    gpuCheck(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
    if (value) { gpuCheck(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &value)); }
    gpuCheck(cudnnBackendFinalize(t));
    return t;
}

// y = mode(x [, b] [, t]); axis >= 0 for GEN_INDEX.
static void att__pointwise(AttBuild* g, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                           cudnnBackendDescriptor_t tt, cudnnBackendDescriptor_t y, int64_t axis) {
    cudnnBackendDescriptor_t pw = att__new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnDataType_t prec = mode == CUDNN_POINTWISE_CMP_GE ? CUDNN_DATA_BOOLEAN : CUDNN_DATA_FLOAT;
    gpuCheck(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    gpuCheck(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    if (axis >= 0) { gpuCheck(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis)); }
    gpuCheck(cudnnBackendFinalize(pw));
    cudnnBackendDescriptor_t op = att__new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    float one = 1.0f;
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    if (b) { gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b)); }
    if (tt) { gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tt)); }
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one));
    gpuCheck(cudnnBackendFinalize(op));
    g->ops[g->nops++] = op;
}

// c = a @ b over the last two dimensions (the first two are batch).
static void att__matmul(AttBuild* g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = att__new(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    gpuCheck(cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    gpuCheck(cudnnBackendFinalize(mm));
    cudnnBackendDescriptor_t op = att__new(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm));
    gpuCheck(cudnnBackendFinalize(op));
    g->ops[g->nops++] = op;
}

// y = reduce(x) over the axes where y has size 1.
static void att__reduce(AttBuild* g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t rd = att__new(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    gpuCheck(cudnnBackendSetAttribute(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how));
    gpuCheck(cudnnBackendSetAttribute(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    gpuCheck(cudnnBackendFinalize(rd));
    cudnnBackendDescriptor_t op = att__new(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd));
    gpuCheck(cudnnBackendFinalize(op));
    g->ops[g->nops++] = op;
}

// y = x re-viewed (its own dims, strides and type).
static void att__reshape(AttBuild* g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = att__new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    gpuCheck(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    gpuCheck(cudnnBackendFinalize(op));
    g->ops[g->nops++] = op;
}

static cudnnDataType_t att__io_type(void) {
#if defined(ENABLE_FP16)
    return CUDNN_DATA_HALF;
#else
    return CUDNN_DATA_BFLOAT16;
#endif
}

// The shapes every graph shares: B, T, NH, HS and the strides of the packed qkv. nondet (backward graphs only):
// 1 builds the backward whose dQ cuDNN accumulates with fp32 atomics (--deterministic 0), 0 the deterministic one.
typedef struct { int64_t B, T, NH, HS, nondet; } AttShape;

// Tensors in the layouts of the notes' table: Q-like [B,NH,T,HS] views of qkv, K^T-like [B,NH,HS,T] views, O-like
// [B,NH,T,HS] in (B,T,NH,HS) memory order, score-like [B,NH,T,T], row-like [B,NH,T,1], scalars.
static cudnnBackendDescriptor_t att__qlike(AttBuild* g, const AttShape* s, int64_t uid) {
    int64_t C3 = 3 * s->NH * s->HS;
    int64_t d[4] = {s->B, s->NH, s->T, s->HS}, st[4] = {s->T * C3, s->HS, C3, 1};
    return att__tensor(g, uid, att__io_type(), d, st, 0);
}
static cudnnBackendDescriptor_t att__ktlike(AttBuild* g, const AttShape* s, int64_t uid) {
    int64_t C3 = 3 * s->NH * s->HS;
    int64_t d[4] = {s->B, s->NH, s->HS, s->T}, st[4] = {s->T * C3, s->HS, 1, C3};
    return att__tensor(g, uid, att__io_type(), d, st, 0);
}
static cudnnBackendDescriptor_t att__olike(AttBuild* g, const AttShape* s, int64_t uid) {
    int64_t C = s->NH * s->HS;
    int64_t d[4] = {s->B, s->NH, s->T, s->HS}, st[4] = {s->T * C, s->HS, C, 1};
    return att__tensor(g, uid, att__io_type(), d, st, 0);
}
static cudnnBackendDescriptor_t att__scores(AttBuild* g, const AttShape* s, cudnnDataType_t type, int transposed) {
    int64_t d[4] = {s->B, s->NH, s->T, s->T};
    int64_t st[4] = {s->NH * s->T * s->T, s->T * s->T, transposed ? 1 : s->T, transposed ? s->T : 1};
    return att__tensor(g, 0, type, d, st, 0);
}
static cudnnBackendDescriptor_t att__rows(AttBuild* g, const AttShape* s, int64_t uid) {
    int64_t d[4] = {s->B, s->NH, s->T, 1}, st[4] = {s->NH * s->T, s->T, 1, 1};
    return att__tensor(g, uid, CUDNN_DATA_FLOAT, d, st, 0);
}
static cudnnBackendDescriptor_t att__scalar(AttBuild* g, int64_t uid) {
    int64_t d[4] = {1, 1, 1, 1}, st[4] = {1, 1, 1, 1};
    return att__tensor(g, uid, CUDNN_DATA_FLOAT, d, st, 1);
}

// The causal mask on a score tensor x: keep (row >= col) ? x : -inf. Appends 4 operations; returns the result.
static cudnnBackendDescriptor_t att__causal(AttBuild* g, const AttShape* s, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t neg_inf) {
    int64_t d[4] = {s->B, s->NH, s->T, s->T}, st[4] = {s->NH * s->T * s->T, s->T * s->T, s->T, 1};
    cudnnBackendDescriptor_t row = att__tensor(g, 0, CUDNN_DATA_INT32, d, st, 0);
    cudnnBackendDescriptor_t col = att__tensor(g, 0, CUDNN_DATA_INT32, d, st, 0);
    cudnnBackendDescriptor_t keep = att__tensor(g, 0, CUDNN_DATA_BOOLEAN, d, st, 0);
    cudnnBackendDescriptor_t y = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    att__pointwise(g, CUDNN_POINTWISE_GEN_INDEX, x, NULL, NULL, row, 2);
    att__pointwise(g, CUDNN_POINTWISE_GEN_INDEX, x, NULL, NULL, col, 3);
    att__pointwise(g, CUDNN_POINTWISE_CMP_GE, row, col, NULL, keep, -1);
    att__pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, x, neg_inf, keep, y, -1);
    return y;
}

// Forward: S = Q K^T scale, masked; Stats = max + log(sum exp(S - max)); P = exp(S - max) / sum (io type); O = P V.
static void att_build_forward(AttBuild* g, const AttShape* s) {
    memset(g, 0, sizeof(*g));
    g->next_virtual = ATT_UID_VIRTUAL;
    cudnnBackendDescriptor_t q = att__qlike(g, s, ATT_UID_Q), kt = att__ktlike(g, s, ATT_UID_KT), v = att__qlike(g, s, ATT_UID_V);
    cudnnBackendDescriptor_t o = att__olike(g, s, ATT_UID_O), stats = att__rows(g, s, ATT_UID_STATS);
    cudnnBackendDescriptor_t scale = att__scalar(g, ATT_UID_SCALE), neg_inf = att__scalar(g, ATT_UID_NEG_INF);
    cudnnBackendDescriptor_t S = att__scores(g, s, CUDNN_DATA_FLOAT, 0), S1 = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    att__matmul(g, q, kt, S);
    att__pointwise(g, CUDNN_POINTWISE_MUL, S, scale, NULL, S1, -1);
    cudnnBackendDescriptor_t S2 = att__causal(g, s, S1, neg_inf);
    cudnnBackendDescriptor_t M = att__rows(g, s, 0), S3 = att__scores(g, s, CUDNN_DATA_FLOAT, 0), E = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    cudnnBackendDescriptor_t Z = att__rows(g, s, 0), logZ = att__rows(g, s, 0);
    att__reduce(g, CUDNN_REDUCE_TENSOR_MAX, S2, M);
    att__pointwise(g, CUDNN_POINTWISE_SUB, S2, M, NULL, S3, -1);
    att__pointwise(g, CUDNN_POINTWISE_EXP, S3, NULL, NULL, E, -1);
    att__reduce(g, CUDNN_REDUCE_TENSOR_ADD, E, Z);
    att__pointwise(g, CUDNN_POINTWISE_LOG, Z, NULL, NULL, logZ, -1);
    att__pointwise(g, CUDNN_POINTWISE_ADD, M, logZ, NULL, stats, -1);
    cudnnBackendDescriptor_t P = att__scores(g, s, att__io_type(), 0);
    att__pointwise(g, CUDNN_POINTWISE_DIV, E, Z, NULL, P, -1);
    att__matmul(g, P, v, o);
}

// Backward: D = rowsum(dO * O); P = exp(S scale - Stats) masked; dV = P^T dO; dS = P (dO V^T - D) scale;
// dK = dS^T Q; dQ = dS K.
// dQ two ways. Deterministic (s->nondet 0, the default): dQ = dS K straight into dQ, which cuDNN's Hopper engines run
// by keeping dS (B NH T T 16-bit values: 1.7 GB for GPT-2 1558M at B 32) in the workspace and multiplying it by K in
// a second kernel, in a fixed order. Nondeterministic (s->nondet 1, --deterministic 0): dQ = dS K into an fp32
// accumulator dQ_accum [B,NH,T,HS] (dense, ATT_UID_DQ_ACCUM), which each key tile adds its share to with atomics
// inside the one fused kernel, then IDENTITY into dQ: no T x T buffer and no second pass, but the order of the adds,
// and so the last bits of dQ, change from run to run. (The frontend's two variants, its "dP workspace" switch.)
static void att_build_backward(AttBuild* g, const AttShape* s) {
    memset(g, 0, sizeof(*g));
    g->next_virtual = ATT_UID_VIRTUAL;
    cudnnBackendDescriptor_t q = att__qlike(g, s, ATT_UID_Q), kt = att__ktlike(g, s, ATT_UID_KT), vt = att__ktlike(g, s, ATT_UID_VT);
    cudnnBackendDescriptor_t o = att__olike(g, s, ATT_UID_O), dO = att__olike(g, s, ATT_UID_DO), stats = att__rows(g, s, ATT_UID_STATS);
    cudnnBackendDescriptor_t dq = att__qlike(g, s, ATT_UID_DQ), dk = att__qlike(g, s, ATT_UID_DK), dv = att__qlike(g, s, ATT_UID_DV);
    cudnnBackendDescriptor_t scale = att__scalar(g, ATT_UID_SCALE), neg_inf = att__scalar(g, ATT_UID_NEG_INF), one = att__scalar(g, ATT_UID_ONE);
    cudnnBackendDescriptor_t softmax_sum = att__rows(g, s, ATT_UID_SOFTMAX_SUM);
    // D = rowsum(dO * O) (the * 1 is the frontend's dropout-scale slot)
    int64_t dd[4] = {s->B, s->NH, s->T, s->HS}, ds[4] = {s->NH * s->T * s->HS, s->T * s->HS, s->HS, 1};
    cudnnBackendDescriptor_t X = att__tensor(g, 0, CUDNN_DATA_FLOAT, dd, ds, 0), R = att__rows(g, s, 0);
    att__pointwise(g, CUDNN_POINTWISE_MUL, dO, o, NULL, X, -1);
    att__reduce(g, CUDNN_REDUCE_TENSOR_ADD, X, R);
    att__pointwise(g, CUDNN_POINTWISE_MUL, R, one, NULL, softmax_sum, -1);
    // P, recomputed from Stats (subtracted before the mask, as the frontend does)
    cudnnBackendDescriptor_t S = att__scores(g, s, CUDNN_DATA_FLOAT, 0), S1 = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    cudnnBackendDescriptor_t S2 = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    att__matmul(g, q, kt, S);
    att__pointwise(g, CUDNN_POINTWISE_MUL, S, scale, NULL, S1, -1);
    att__pointwise(g, CUDNN_POINTWISE_SUB, S1, stats, NULL, S2, -1);
    cudnnBackendDescriptor_t S3 = att__causal(g, s, S2, neg_inf);
    cudnnBackendDescriptor_t P = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    att__pointwise(g, CUDNN_POINTWISE_EXP, S3, NULL, NULL, P, -1);
    // dV = P^T dO
    cudnnBackendDescriptor_t Pt = att__scores(g, s, att__io_type(), 1);
    att__reshape(g, P, Pt);
    att__matmul(g, Pt, dO, dv);
    // dS = P (dO V^T - D) scale
    cudnnBackendDescriptor_t dP = att__scores(g, s, CUDNN_DATA_FLOAT, 0), t1 = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    cudnnBackendDescriptor_t t2 = att__scores(g, s, CUDNN_DATA_FLOAT, 0), dS = att__scores(g, s, CUDNN_DATA_FLOAT, 0);
    att__matmul(g, dO, vt, dP);
    att__pointwise(g, CUDNN_POINTWISE_SUB, dP, softmax_sum, NULL, t1, -1);
    att__pointwise(g, CUDNN_POINTWISE_MUL, t1, P, NULL, t2, -1);
    att__pointwise(g, CUDNN_POINTWISE_MUL, t2, scale, NULL, dS, -1);
    // dK = dS^T Q
    cudnnBackendDescriptor_t dSt = att__scores(g, s, att__io_type(), 1);
    att__reshape(g, dS, dSt);
    att__matmul(g, dSt, q, dk);
    // dQ = dS K (K^T re-viewed as K with its own strides)
    int64_t C3 = 3 * s->NH * s->HS;
    int64_t kd[4] = {s->B, s->NH, s->T, s->HS}, kst[4] = {s->T * C3, s->HS, C3, 1};
    cudnnBackendDescriptor_t kview = att__tensor(g, 0, att__io_type(), kd, kst, 0);
    att__reshape(g, kt, kview);
    if (s->nondet) {
        int64_t ad[4] = {s->B, s->NH, s->T, s->HS}, ast[4] = {s->NH * s->T * s->HS, s->T * s->HS, s->HS, 1};
        cudnnBackendDescriptor_t accum = att__tensor(g, ATT_UID_DQ_ACCUM, CUDNN_DATA_FLOAT, ad, ast, 0);
        att__matmul(g, dS, kview, accum);
        att__pointwise(g, CUDNN_POINTWISE_IDENTITY, accum, NULL, NULL, dq, -1);
    } else {
        att__matmul(g, dS, kview, dq);
    }
}

// The operation graph of what was built (handle: NULL to check the graph without a GPU). NULL, with att__why saying
// why, when cuDNN does not finalize it (a cuDNN too old for a pattern, say): --attention auto then runs the native
// kernels rather than ending the run.
// (att__why: why the last graph or plan search failed, for the message that reports it: what failed and cuDNN's own
// reason, cudnnGetLastErrorString, so a first run on a new machine says why without a rerun under ATT_VERBOSE=1)
static char att__why[1400];
static cudnnBackendDescriptor_t att_graph(AttBuild* g, cudnnHandle_t handle) {
    cudnnBackendDescriptor_t graph = att__new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (handle) { gpuCheck(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)); }
    gpuCheck(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops));
    cudnnStatus_t st = cudnnBackendFinalize(graph);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(att__why, sizeof(att__why), "finalizing the operation graph failed: %s", kernels__status(st));
        return NULL;
    }
    return graph;
}

// ----------------------------------------------------------------------------
// Plans (GPU only): heuristics mode A, then FALLBACK; the first configuration whose plan finalizes wins, deterministic
// engines before the others.

// The plan cache: one entry per (shape, direction). A shape cuDNN has no engine for is remembered too, so that its
// attention runs on the native kernels without asking cuDNN again (and without turning cuDNN off for the shapes it
// runs). When the cache is full, the least recently used entry makes room. A training step takes two entries per row
// count, three where the nondeterministic backward graph is refused (its rejection stays beside the deterministic
// plan); sampling and evaluation one per bucketed length. A batch ramp's shorter micro-steps add theirs: a ramp of
// B 64 from 8192 tokens over 8 ranks takes 63 row counts, so cudnn_attention_plan_room (kernels_reserve) makes the
// cache hold them all with ATT_MIN_PLANS to spare. A training plan evicted would be built again in the middle of
// the run (and reserve itself would evict the first row counts it made).
typedef struct {
    AttShape shape;
    int backward;
    int used;                     // 0: a free entry
    int rejected;                 // no engine runs this shape: nothing is built, the native kernels run it
    uint64_t last_use;            // the cache's clock at the entry's last lookup
    AttBuild build;               // keeps the descriptors the plan refers to alive
    cudnnBackendDescriptor_t plan;
    int64_t workspace;            // the plan's workspace, after the dQ accumulator's bytes (att__execute)
    int64_t accum;                // bytes of the dQ accumulator at the workspace's start (a nondeterministic backward
                                  // graph; 0 otherwise), rounded up to 256 so the plan's part stays aligned
    int64_t engine;               // the plan's engine (cuDNN's global index; -1 when cuDNN did not say)
    unsigned notes;               // its numerical notes, 1 << CUDNN_NUMERICAL_NOTE_*
} AttPlan;

#define ATT_MIN_PLANS 64
static AttPlan* att__plans;
static int att__nplans;
static uint64_t att__clock;

// Makes the cache hold at least ATT_MIN_PLANS + extra entries (new ones free). The entries move: no plan pointer is
// kept across calls of att__plan.
static void cudnn_attention_plan_room(int extra) {
    int n = ATT_MIN_PLANS + (extra > 0 ? extra : 0);
    if (n <= att__nplans) { return; }
    att__plans = (AttPlan*)realloc(att__plans, sizeof(AttPlan) * (size_t)n);
    if (!att__plans) { fatal("cudnn attention: out of host memory for %d plans", n); }
    memset(att__plans + att__nplans, 0, sizeof(AttPlan) * (size_t)(n - att__nplans));
    att__nplans = n;
}
static cudnnHandle_t att__handle;

// The entry of (s, backward) among plans[0..n): found (*hit = 1, its use recorded at `now`), or the one to fill
// (*hit = 0): a free entry, else the least recently used, which the caller empties first.
static AttPlan* att__cache_find(AttPlan* plans, int n, const AttShape* s, int backward, uint64_t now, int* hit) {
    AttPlan* victim = NULL;
    for (int i = 0; i < n; i++) {
        AttPlan* p = &plans[i];
        if (p->used && p->backward == backward && memcmp(&p->shape, s, sizeof(*s)) == 0) {
            p->last_use = now;
            *hit = 1;
            return p;
        }
        if (!victim || (victim->used && (!p->used || p->last_use < victim->last_use))) { victim = p; }
    }
    *hit = 0;
    return victim;
}

#define ATT_NONDET (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)

// The configurations among n to try in one pass, given their engines' numerical notes: the deterministic ones
// (nondet 0), the others (nondet 1) or all (nondet 2), in the heuristic's own order (its ranking). Training resumes
// bit for bit and the tests compare runs bit for bit, so for a deterministic graph an engine that may sum in a
// different order each time (cuDNN marks it NONDETERMINISTIC, as a dQ accumulated with atomics would be) is tried
// only after every deterministic one of both heuristics has failed; a graph built nondeterministic (--deterministic
// 0) takes the ranking as it is. Returns how many were picked.
static int att__config_order(const unsigned* notes, int n, int nondet, int* order) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (nondet == 2 || ((notes[i] & ATT_NONDET) != 0) == (nondet != 0)) { order[k++] = i; }
    }
    return k;
}

// The numerical notes as words (for the messages), e.g. "tensor_core, nondeterministic".
static const char* att__notes_str(unsigned notes, char* buf, size_t cap) {
    static const char* names[CUDNN_NUMERICAL_NOTE_TYPE_COUNT] = {
        "tensor_core", "down_convert_inputs", "reduced_precision_reduction", "fft", "nondeterministic",
        "winograd", "winograd_4x4", "winograd_6x6", "winograd_13x13", "strict_nan_prop"};
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT && at < cap; i++) {
        if (notes & (1u << i)) { at += snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", names[i]); }
    }
    if (at == 0) { snprintf(buf, cap, "none"); }
    return buf;
}

// An engine's global index and numerical notes (-1 and 0 where cuDNN does not say: an engine whose notes cannot be
// read counts as deterministic, as cuDNN's own ranking does not look at them either). Engines of a finalized graph
// can be made and read without a GPU (tests/test_cudnn_graph does).
static void att__engine_notes(cudnnBackendDescriptor_t engine, int64_t* index, unsigned* notes) {
    *index = -1;
    *notes = 0;
    int64_t cnt = 0, idx = -1;
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &cnt, &idx) == CUDNN_STATUS_SUCCESS) { *index = idx; }
    cudnnBackendNumericalNote_t got[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &cnt,
                                 got) != CUDNN_STATUS_SUCCESS) { return; }
    for (int64_t i = 0; i < cnt && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++) {
        if ((int)got[i] >= 0 && (int)got[i] < CUDNN_NUMERICAL_NOTE_TYPE_COUNT) { *notes |= 1u << got[i]; }
    }
}

// The same of a configuration's engine, which lives only while it is read.
static void att__engine_info(AttBuild* g, cudnnBackendDescriptor_t cfg, int64_t* index, unsigned* notes) {
    *index = -1;
    *notes = 0;
    int mark = g->n;
    cudnnBackendDescriptor_t engine = att__new(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t cnt = 0;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &engine) == CUDNN_STATUS_SUCCESS) {
        att__engine_notes(engine, index, notes);
    }
    att__drop_to(g, mark);
}

// The first configuration of heuristics `mode` whose plan finalizes, among its deterministic engines (nondet 0), the
// others (nondet 1) or all (nondet 2; att__config_order), with its workspace, engine and notes; NULL when none does (why in
// att__why). What a failed search made is destroyed again (a rejected plan at once), so g keeps only the winning
// plan's descriptors.
static cudnnBackendDescriptor_t att__try_plans(AttBuild* g, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, int nondet,
                                               int64_t* ws, int64_t* engine, unsigned* notes) {
    int mark = g->n;
    const char* mname = mode == CUDNN_HEUR_MODE_A ? (nondet == 1 ? "heuristics A, nondeterministic engines" : "heuristics A")
                                                  : (nondet == 1 ? "fallback heuristics, nondeterministic engines" : "fallback heuristics");
    cudnnBackendDescriptor_t heur = att__new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    gpuCheck(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    gpuCheck(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    cudnnStatus_t hst = cudnnBackendFinalize(heur);
    if (hst != CUDNN_STATUS_SUCCESS) {
        snprintf(att__why, sizeof(att__why), "%s: finalizing the heuristic failed: %s", mname, kernels__status(hst));
        att__drop_to(g, mark);
        return NULL;
    }
    int64_t count = 0;
    gpuCheck(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if (count <= 0) {
        // (cuDNN says why in its own log only: a missing runtime compiler, an engine not enabled for the graph)
        snprintf(att__why, sizeof(att__why), "%s: no engine configuration offered (cuDNN's reasons: run with CUDNN_LOGLEVEL_DBG=2 "
                 "CUDNN_LOGDEST_DBG=stderr)", mname);
        att__drop_to(g, mark);
        return NULL;
    }
    if (count > 16) { count = 16; }
    cudnnBackendDescriptor_t cfgs[16];
    for (int64_t i = 0; i < count; i++) { cfgs[i] = att__new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR); }
    int64_t got = 0;
    gpuCheck(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs));
    int64_t index[16];
    unsigned note[16];
    int order[16];
    for (int64_t i = 0; i < got; i++) { att__engine_info(g, cfgs[i], &index[i], &note[i]); }
    int tries = att__config_order(note, (int)got, nondet, order);
    if (tries == 0) { snprintf(att__why, sizeof(att__why), "%s: none of the %lld configurations offered", mname, (long long)got); }
    for (int k = 0; k < tries; k++) {
        int64_t i = order[k];
        char nb[200];
        cudnnBackendDescriptor_t plan = att__new(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        gpuCheck(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &att__handle));
        gpuCheck(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]));
        cudnnStatus_t st = cudnnBackendFinalize(plan);
        if (st != CUDNN_STATUS_SUCCESS) {
            const char* why = kernels__status(st);
            if (getenv("ATT_VERBOSE")) {
                fprintf(stderr, "cudnn attention: %s config %lld (engine %lld, notes: %s) rejected: %s\n", mname, (long long)i,
                        (long long)index[i], att__notes_str(note[i], nb, sizeof(nb)), why);
            }
            snprintf(att__why, sizeof(att__why), "%s: all %d configurations rejected, the last with %s", mname, tries, why);
            att__drop_to(g, g->n - 1); // the plan just made (the newest descriptor)
            continue;
        }
        int64_t n = 0;
        gpuCheck(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, ws));
        *engine = index[i];
        *notes = note[i];
        return plan;
    }
    att__drop_to(g, mark);
    return NULL;
}

// The cached plan of (s, backward), built on first use; NULL when cuDNN has no engine for the shape and --attention
// auto lets the caller run the native kernels (explicit --attention cudnn stops instead). A nondeterministic backward
// graph no engine runs gives way to the deterministic one, with a warning.
static AttPlan* att__plan(const KernelCtx* ctx, const AttShape* s, int backward) {
    int hit = 0;
    cudnn_attention_plan_room(0);
    AttPlan* p = att__cache_find(att__plans, att__nplans, s, backward, ++att__clock, &hit);
    if (hit && p->rejected && s->nondet) {
        AttShape d = *s;
        d.nondet = 0;
        return att__plan(ctx, &d, backward);
    }
    if (hit) { return p->rejected ? NULL : p; }
    if (p->used) { // evicted: its plan may still be queued on the stream, so it goes once the stream has run it
        if (!p->rejected) {
            gpuCheck(cudaStreamSynchronize(ctx->stream));
            att__free(&p->build);
        }
        p->used = 0;
    }
    memset(p, 0, sizeof(*p));
    p->shape = *s;
    p->backward = backward;
    p->used = 1;
    p->last_use = att__clock;
    char whys[4 * sizeof(att__why)] = "";
    cudnnBackendDescriptor_t graph = NULL;
    cudnnStatus_t cs = att__handle ? CUDNN_STATUS_SUCCESS : cudnnCreate(&att__handle);
    if (cs != CUDNN_STATUS_SUCCESS) { // (no handle: every shape is refused the same way, and tries again)
        att__handle = NULL;
        snprintf(whys, sizeof(whys), "cudnnCreate failed: %s", kernels__status(cs));
    } else {
        gpuCheck(cudnnSetStream(att__handle, ctx->stream));
        if (backward) { att_build_backward(&p->build, s); } else { att_build_forward(&p->build, s); }
        graph = att_graph(&p->build, att__handle);
        if (!graph) { snprintf(whys, sizeof(whys), "%s", att__why); }
    }
    // deterministic engines of heuristics A, then of FALLBACK; only then the nondeterministic ones of each (a
    // nondeterministic graph: every engine of A, then of FALLBACK, in their ranking)
    int passes = !graph ? 0 : s->nondet ? 2 : 4;
    for (int pass = 0; pass < passes && !p->plan; pass++) {
        p->plan = att__try_plans(&p->build, graph, pass % 2 ? CUDNN_HEUR_MODE_FALLBACK : CUDNN_HEUR_MODE_A, s->nondet ? 2 : pass / 2,
                                 &p->workspace, &p->engine, &p->notes);
        size_t at = strlen(whys);
        if (!p->plan) { snprintf(whys + at, sizeof(whys) - at, "%s%s", at ? "; " : "", att__why); }
    }
    if (!p->plan && s->nondet) { // (remembered as rejected: the lookup above then gives the deterministic graph's plan)
        fprintf(stderr, "warning: cudnn attention: no engine runs the nondeterministic backward graph for B %lld, T %lld, NH %lld, HS %lld (%s): "
                "the deterministic one runs (--deterministic 0 changes nothing for this shape)\n", (long long)s->B, (long long)s->T,
                (long long)s->NH, (long long)s->HS, whys);
        att__free(&p->build);
        p->rejected = 1;
        return att__plan(ctx, s, backward);
    }
    if (!p->plan) {
        char what[sizeof(whys) + 200];
        snprintf(what, sizeof(what), "no cuDNN engine runs the %s attention graph for B %lld, T %lld, NH %lld, HS %lld (%s)",
                 backward ? "backward" : "forward", (long long)s->B, (long long)s->T, (long long)s->NH, (long long)s->HS, whys);
        if (!ctx->attention_auto) { fatal("%s (ATT_VERBOSE=1 lists the rejections; --attention native avoids cuDNN)", what); }
        fprintf(stderr, "warning: %s: the native attention kernels run this shape (--attention auto)\n", what);
        att__free(&p->build);
        p->rejected = 1;
        return NULL;
    }
    if (s->nondet) { p->accum = (s->B * s->NH * s->T * s->HS * (int64_t)sizeof(float) + 255) / 256 * 256; }
    if ((p->notes & ATT_NONDET) && !s->nondet) {
        fprintf(stderr, "warning: cudnn attention: no deterministic engine runs the %s graph for B %lld, T %lld, NH %lld, HS %lld; "
                "engine %lld does, nondeterministically: runs will not repeat bit for bit (--attention native does)\n", backward ? "backward" : "forward",
                (long long)s->B, (long long)s->T, (long long)s->NH, (long long)s->HS, (long long)p->engine);
    }
    if (getenv("ATT_VERBOSE")) {
        char nb[200];
        fprintf(stderr, "cudnn attention: %s%s B %lld, T %lld, NH %lld, HS %lld: engine %lld (notes: %s), workspace %lld bytes%s\n",
                backward ? "backward" : "forward", s->nondet ? " (nondeterministic graph)" : "", (long long)s->B, (long long)s->T, (long long)s->NH,
                (long long)s->HS, (long long)p->engine, att__notes_str(p->notes, nb, sizeof(nb)), (long long)p->workspace,
                p->accum ? " after the dQ accumulator's" : "");
    }
    return p;
}

// The bytes of the context's attention workspace a plan takes: the dQ accumulator (if any), then the plan's own.
static size_t att__workspace_bytes(const AttPlan* p) { return (size_t)(p->accum + p->workspace) + 16; }

// Runs plan p on the pointers of uids[0..n) (room for one more: the dQ accumulator's, which lives at the start of the
// context's attention workspace, the plan's workspace after it).
static void att__execute(const KernelCtx* cctx, AttPlan* p, int n, int64_t* uids, void** ptrs) {
    KernelCtx* ctx = (KernelCtx*)cctx;
    ctx->att_workspace = kernels__grow(ctx, ctx->att_workspace, &ctx->att_workspace_bytes, att__workspace_bytes(p));
    void* ws = (char*)ctx->att_workspace + p->accum;
    if (p->accum) {
        uids[n] = ATT_UID_DQ_ACCUM;
        ptrs[n++] = ctx->att_workspace;
        // the engines zero their accumulator themselves from cuDNN 9.6 on (the frontend stopped clearing it there)
        if (cudnnGetVersion() < 90600) { gpuCheck(cudaMemsetAsync(ctx->att_workspace, 0, (size_t)p->accum, ctx->stream)); }
    }
    AttBuild vb;
    memset(&vb, 0, sizeof(vb));
    cudnnBackendDescriptor_t pack = att__new(&vb, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    gpuCheck(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
    gpuCheck(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
    gpuCheck(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws));
    gpuCheck(cudnnBackendFinalize(pack));
    gpuCheck(cudnnSetStream(att__handle, ctx->stream));
    gpuCheck(cudnnBackendExecute(att__handle, p->plan, pack));
    att__free(&vb);
}

// The workspace the forward and backward graphs of a shape take (att__execute's), their plans made now (kernels_reserve:
// a training step's shape, sized before the step). 0 for a graph cuDNN has no plan for (--attention auto runs the
// native kernels there).
static size_t cudnn_attention_workspace(const KernelCtx* ctx, int B, int T, int NH, int HS) {
    size_t ws = 0;
    for (int backward = 0; backward < 2; backward++) {
        AttShape s = {B, T, NH, HS, backward && ctx->att_nondet};
        AttPlan* p = att__plan(ctx, &s, backward);
        if (p && att__workspace_bytes(p) > ws) { ws = att__workspace_bytes(p); }
    }
    return ws;
}

// CPU twin: attention_forward (lse = Stats).
// Returns 0 when cuDNN has no plan for the shape and --attention auto lets the caller fall back to the native kernels.
static int cudnn_attention_forward(const KernelCtx* ctx, floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH) {
    AttShape s = {B, T, NH, C / NH};
    AttPlan* p = att__plan(ctx, &s, 0);
    if (!p) { ((KernelCtx*)ctx)->attention_fallbacks++; return 0; }
    float scale = 1.0f / sqrtf((float)(C / NH)), neg_inf = -INFINITY;
    int64_t uids[8] = {ATT_UID_Q, ATT_UID_KT, ATT_UID_V, ATT_UID_O, ATT_UID_STATS, ATT_UID_SCALE, ATT_UID_NEG_INF, 0};
    void* ptrs[8] = {(void*)qkv, (void*)(qkv + C), (void*)(qkv + 2 * C), out, lse, &scale, &neg_inf, NULL};
    att__execute(ctx, p, 7, uids, ptrs);
    return 1;
}

// CPU twin: attention_backward. softmax_sum (B NH T floats) in the context's partials; with --deterministic 0 the
// graph that accumulates dQ with atomics (its accumulator in the attention workspace: att__execute).
static int cudnn_attention_backward(const KernelCtx* ctx, floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                    const float* lse, int B, int T, int C, int NH) {
    AttShape s = {B, T, NH, C / NH, ctx->att_nondet};
    AttPlan* p = att__plan(ctx, &s, 1);
    if (!p) { ((KernelCtx*)ctx)->attention_fallbacks++; return 0; }
    if (s.nondet && !p->shape.nondet) { ((KernelCtx*)ctx)->att_nondet_refused++; }
    float* softmax_sum = kernels__col_partials(ctx, (size_t)B * NH * T);
    float scale = 1.0f / sqrtf((float)(C / NH)), neg_inf = -INFINITY, one = 1.0f;
    int64_t uids[14] = {ATT_UID_Q, ATT_UID_KT, ATT_UID_VT, ATT_UID_O, ATT_UID_DO, ATT_UID_STATS, ATT_UID_DQ, ATT_UID_DK, ATT_UID_DV,
                        ATT_UID_SCALE, ATT_UID_NEG_INF, ATT_UID_ONE, ATT_UID_SOFTMAX_SUM, 0};
    void* ptrs[14] = {(void*)qkv, (void*)(qkv + C), (void*)(qkv + 2 * C), (void*)out, (void*)dout, (void*)lse, dqkv, dqkv + C,
                      dqkv + 2 * C, &scale, &neg_inf, &one, softmax_sum, NULL};
    att__execute(ctx, p, 13, uids, ptrs);
    return 1;
}

#endif // CUDNN_ATT_CUH
