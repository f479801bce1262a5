/*
tests/cuda_emu/cublaslt_emu.h: the part of cuBLASLt the backend uses, on the CPU (included by cuda_emu.h).

The opaque descriptors of cublasLt.h hold our own structs. The heuristic query checks what the real library checks
for these shapes (and a little more: every layout against the op's m, n, k) and returns one algorithm, which
remembers the alignments the preference promised and those of the bias and auxiliary pointers set when it ran (the
library reads them to learn theirs); cublasLtMatmul checks the pointers against them and each operand's extent
against its allocation, then computes D = epilogue(alpha op(A) op(B) + beta C) with fp32 accumulation, as the GPU
does (the order of the sum differs), and for BGRADA/BGRADB the bias gradient; with 32F_FAST_TF32 the fp32 operands
are first rounded to TF32's 10-bit mantissa. Column-major, as cuBLAS.
*/
#ifndef CUBLASLT_EMU_H
#define CUBLASLT_EMU_H

#ifdef USE_BLAS
#include <cblas.h>
#endif

namespace emu {

struct LtDesc {
    int32_t compute, scale;
    int32_t transa, transb;
    uint32_t epilogue;
    int32_t bias_type, aux_type; // -1: unset (the bias then has D's type)
    int64_t aux_ld;
    const void* bias;
    const void* aux;
};
struct LtLayout { int32_t type; uint64_t rows, cols; int64_t ld; };
struct LtPref { uint64_t workspace; uint32_t align[4]; };
// align: A, B, C, D as the preference promised, then the bias and auxiliary pointers as they were when the heuristic
// ran (it reads their values to learn their alignment; unset counts as 256)
// index: the candidate's place in the heuristic's answer (the algorithms differ in cost only: lt_cost_ms)
struct LtAlgo { uint32_t magic; uint32_t align[6]; uint32_t index; };
#define EMU_LT_MAGIC 0x4c54454du

// The heuristic's candidates: CUDA_EMU_LT_ALGOS of them (4 by default), of which CUDA_EMU_LT_FAST (0 by default) is the
// fastest. They compute the same bits; they differ in the time a product takes on the virtual device clock (cuda_emu.h's
// g_vclock_ms), so that --matmul-tune's choice can be planted and checked. g_lt_runs counts the products run with each.
static int lt_num_algos(void) { const char* v = getenv("CUDA_EMU_LT_ALGOS"); int n = v ? atoi(v) : 4; return n < 1 ? 1 : n > 64 ? 64 : n; }
static uint64_t g_lt_runs[64];
static uint64_t lt_runs_total(void) { uint64_t t = 0; for (uint64_t r : g_lt_runs) { t += r; } return t; }
static double lt_cost_ms(uint32_t index, uint64_t m, uint64_t n, uint64_t k) {
    const char* v = getenv("CUDA_EMU_LT_FAST");
    uint32_t fast = v ? (uint32_t)atoi(v) : 0;
    double flop_ms = 2.0 * m * n * k / 1e8; // (100 GFLOP/s: the scale does not matter, only the ratios)
    return flop_ms * (index == fast ? 1.0 : 1.5 + 0.1 * index);
}

static_assert(sizeof(LtDesc) <= sizeof(cublasLtMatmulDescOpaque_t), "LtDesc");
static_assert(sizeof(LtLayout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "LtLayout");
static_assert(sizeof(LtPref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "LtPref");
static_assert(sizeof(LtAlgo) <= sizeof(cublasLtMatmulAlgo_t), "LtAlgo");

static size_t type_size(int32_t t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF: case CUDA_R_16F: return 2;
    default: fail("cuBLASLt: data type %d is not one the backend uses", (int)t);
    }
    return 0;
}
static float load_as_float(const void* p, int32_t t, size_t i) {
    switch (t) {
    case CUDA_R_32F: return ((const float*)p)[i];
    case CUDA_R_16BF: return __bfloat162float(((const __nv_bfloat16*)p)[i]);
    case CUDA_R_16F: return __half2float(((const __half*)p)[i]);
    }
    return NAN;
}
static void store_float(void* p, int32_t t, size_t i, float v) {
    switch (t) {
    case CUDA_R_32F: ((float*)p)[i] = v; break;
    case CUDA_R_16BF: ((__nv_bfloat16*)p)[i] = __float2bfloat16_rn(v); break;
    case CUDA_R_16F: ((__half*)p)[i] = __float2half_rn(v); break;
    }
}
static uint32_t ptr_alignment(const void* p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) { a /= 2; }
    return a;
}
static int epi_has_aux(uint32_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}
static int epi_has_bias(uint32_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
// the bias gradient epilogues: the bias pointer receives the sums of op(A)'s rows (BGRADA, m of them) or of op(B)'s
// columns (BGRADB, n of them) over k, in D's type; D itself is the plain product
static int epi_is_bgrad(uint32_t e) { return e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB; }
// Whether CUDA_EMU_NO_EPILOGUE equals `when` (1: at the heuristic, 2: at the product) and op has a GELU or
// bias-gradient epilogue, which are then refused.
static int lt_refuse_epilogue(const LtDesc* op, int when) {
    const char* v = getenv("CUDA_EMU_NO_EPILOGUE");
    return v && atoi(v) == when && (epi_has_aux(op->epilogue) || epi_is_bgrad(op->epilogue));
}
// TF32 (CUBLAS_COMPUTE_32F_FAST_TF32): the tensor cores read an fp32 operand with its 23-bit mantissa cut to 10 bits,
// rounded to nearest (ties away from zero, as cvt.rna.tf32.f32 does); products and sums stay fp32. Infinities and
// NaNs pass unchanged.
static float round_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) { return x; }
    u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}
static float gelu_tanh(float x) {
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
static float gelu_tanh_grad(float x) {
    const float k = 0.7978845608028654f;
    float th = tanhf(k * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

// Whether the op's shapes, types and epilogue are ones the library takes; the reason when not (NULL: fine).
static const char* lt_validate(const LtDesc* d, const LtLayout* a, const LtLayout* b, const LtLayout* c, const LtLayout* dd,
                               uint64_t* m_out, uint64_t* n_out, uint64_t* k_out) {
    static char why[256];
    if ((d->compute != CUBLAS_COMPUTE_32F && d->compute != CUBLAS_COMPUTE_32F_FAST_TF32) || d->scale != CUDA_R_32F) {
        return "compute or scale type other than 32F or 32F_FAST_TF32";
    }
    if (a->type != b->type) { return "A and B of different types"; }
    if (d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && (a->type != CUDA_R_32F || dd->type != CUDA_R_32F)) {
        return "32F_FAST_TF32 with A/B or D not fp32 (cuBLASLt offers it for fp32 matrices only)";
    }
    if (c->type != dd->type || c->rows != dd->rows || c->cols != dd->cols || c->ld != dd->ld) { return "C and D laid out differently"; }
    int ab = a->type, out = dd->type;
    int types_ok = (ab == CUDA_R_32F && out == CUDA_R_32F) || (ab == CUDA_R_16BF && (out == CUDA_R_16BF || out == CUDA_R_32F)) ||
                   (ab == CUDA_R_16F && (out == CUDA_R_16F || out == CUDA_R_32F));
    if (!types_ok) { return "an A/B/D type combination cuBLASLt does not offer"; }
    uint64_t m = d->transa ? a->cols : a->rows, k = d->transa ? a->rows : a->cols;
    uint64_t kb = d->transb ? b->cols : b->rows, n = d->transb ? b->rows : b->cols;
    if (k != kb) { snprintf(why, sizeof(why), "op(A) is %llu x %llu but op(B) %llu x %llu", (unsigned long long)m, (unsigned long long)k, (unsigned long long)kb, (unsigned long long)n); return why; }
    if (dd->rows != m || dd->cols != n) { snprintf(why, sizeof(why), "D is %llu x %llu, the product %llu x %llu", (unsigned long long)dd->rows, (unsigned long long)dd->cols, (unsigned long long)m, (unsigned long long)n); return why; }
    if (a->ld < (int64_t)a->rows || b->ld < (int64_t)b->rows || dd->ld < (int64_t)dd->rows) { return "a leading dimension smaller than its rows"; }
    if (epi_has_aux(d->epilogue)) {
        if (d->aux_ld % 8 != 0 || d->aux_ld < (int64_t)m) { snprintf(why, sizeof(why), "GELU auxiliary leading dimension %lld (a multiple of 8, at least m = %llu, is required)", (long long)d->aux_ld, (unsigned long long)m); return why; }
    }
    if (epi_is_bgrad(d->epilogue) && d->bias_type >= 0 && d->bias_type != out) {
        return "a bias gradient of a type other than D's (cublasLt.h: the same type as the output elements)";
    }
    if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_BIAS && !epi_has_aux(d->epilogue) &&
        !epi_is_bgrad(d->epilogue)) {
        return "an epilogue the emulator does not know";
    }
    *m_out = m; *n_out = n; *k_out = k;
    return NULL;
}

static void lt_compute(const LtDesc* op, const LtLayout* a, const LtLayout* b, const LtLayout* c, const LtLayout* dd, float alpha,
                       float beta, const void* A, const void* B, const void* C, void* D, uint64_t m, uint64_t n, uint64_t k,
                       int32_t bias_type, int32_t aux_type);

} // namespace emu

extern "C" {

const char* cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS (cuda_emu: other)";
    }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { *h = (cublasLtHandle_t)malloc(16); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { free((void*)h); return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
    *desc = (cublasLtMatmulDesc_t)calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    emu::LtDesc* d = (emu::LtDesc*)*desc;
    d->compute = compute; d->scale = scale; d->epilogue = CUBLASLT_EPILOGUE_DEFAULT; d->bias_type = -1; d->aux_type = -1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) { free(desc); return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size) {
    emu::LtDesc* d = (emu::LtDesc*)desc;
#define EMU_LT_ATTR(field, type) do { \
        if (size != sizeof(type)) { emu::fail("cublasLtMatmulDescSetAttribute(%d): %zu bytes given, %zu expected", (int)attr, size, sizeof(type)); } \
        type v_; memcpy(&v_, buf, sizeof(type)); d->field = v_; \
    } while (0)
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: EMU_LT_ATTR(transa, int32_t); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: EMU_LT_ATTR(transb, int32_t); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: EMU_LT_ATTR(epilogue, uint32_t); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: EMU_LT_ATTR(bias, const void*); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: EMU_LT_ATTR(aux, const void*); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: EMU_LT_ATTR(aux_ld, int64_t); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: EMU_LT_ATTR(bias_type, int32_t); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: EMU_LT_ATTR(aux_type, int32_t); break;
    default: emu::fail("cublasLtMatmulDescSetAttribute: attribute %d is not emulated", (int)attr);
    }
#undef EMU_LT_ATTR
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    *l = (cublasLtMatrixLayout_t)calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    emu::LtLayout* x = (emu::LtLayout*)*l;
    x->type = type; x->rows = rows; x->cols = cols; x->ld = ld;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { free(l); return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    *p = (cublasLtMatmulPreference_t)calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    emu::LtPref* x = (emu::LtPref*)*p;
    for (int i = 0; i < 4; i++) { x->align[i] = 256; } // the library's assumption when not told
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { free(p); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
    emu::LtPref* x = (emu::LtPref*)p;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        if (size != sizeof(uint64_t)) { emu::fail("MAX_WORKSPACE_BYTES: %zu bytes given, 8 expected", size); }
        memcpy(&x->workspace, buf, 8);
        break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
        if (size != sizeof(uint32_t)) { emu::fail("MIN_ALIGNMENT: %zu bytes given, 4 expected", size); }
        int i = attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES ? 0 : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES ? 1
              : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES ? 2 : 3;
        memcpy(&x->align[i], buf, 4);
        break;
    }
    default: emu::fail("cublasLtMatmulPreferenceSetAttribute: attribute %d is not emulated", (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* found) {
    (void)h;
    if (requested < 1) { return CUBLAS_STATUS_INVALID_VALUE; }
    const emu::LtDesc* op = (const emu::LtDesc*)desc;
    uint64_t m, n, k;
    const char* why = emu::lt_validate(op, (emu::LtLayout*)a, (emu::LtLayout*)b, (emu::LtLayout*)c, (emu::LtLayout*)d, &m, &n, &k);
    if (why) { emu::fail("cublasLtMatmulAlgoGetHeuristic: %s", why); }
    *found = 0;
    // CUDA_EMU_NO_EPILOGUE=1: no algorithm for the GELU and bias-gradient epilogues (the callers' unfused paths)
    if (emu::lt_refuse_epilogue(op, 1)) { return CUBLAS_STATUS_NOT_SUPPORTED; }
    int count = std::min(requested, emu::lt_num_algos());
    for (int i = 0; i < count; i++) {
        memset(&results[i], 0, sizeof(results[i]));
        emu::LtAlgo* algo = (emu::LtAlgo*)&results[i].algo;
        algo->magic = EMU_LT_MAGIC;
        memcpy(algo->align, ((emu::LtPref*)pref)->align, 4 * sizeof(uint32_t));
        algo->align[4] = emu::ptr_alignment(op->bias); // NULL: 256, the most an algorithm may then assume
        algo->align[5] = emu::ptr_alignment(op->aux);
        algo->index = (uint32_t)i;
        results[i].workspaceSize = 0;
        results[i].state = CUBLAS_STATUS_SUCCESS;
        results[i].wavesCount = 1.0f;
    }
    *found = count;
    return CUBLAS_STATUS_SUCCESS;
}

// Whether algo serves these descriptors: one of this emulator's (as a saved algorithm must be one of the library's own
// version), among the candidates the heuristic offers now (CUDA_EMU_LT_ALGOS).
cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                       cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo_p,
                                       cublasLtMatmulHeuristicResult_t* result) {
    (void)h;
    uint64_t m, n, k;
    const char* why = emu::lt_validate((const emu::LtDesc*)desc, (emu::LtLayout*)a, (emu::LtLayout*)b, (emu::LtLayout*)c, (emu::LtLayout*)d, &m, &n, &k);
    if (why) { emu::fail("cublasLtMatmulAlgoCheck: %s", why); }
    const emu::LtAlgo* algo = (const emu::LtAlgo*)algo_p;
    if (algo->magic != EMU_LT_MAGIC || algo->index >= (uint32_t)emu::lt_num_algos()) { return CUBLAS_STATUS_INVALID_VALUE; }
    memset(result, 0, sizeof(*result));
    result->algo = *algo_p;
    result->state = CUBLAS_STATUS_SUCCESS;
    result->wavesCount = 1.0f;
    return CUBLAS_STATUS_SUCCESS;
}

// CUDA_EMU_LT_VERSION: the version the library reports (an algorithm file made under another is not used)
size_t cublasLtGetVersion(void) { const char* v = getenv("CUDA_EMU_LT_VERSION"); return v ? (size_t)atoll(v) : 130000; }

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha_p, const void* A, cublasLtMatrixLayout_t la,
                              const void* B, cublasLtMatrixLayout_t lb, const void* beta_p, const void* C, cublasLtMatrixLayout_t lc,
                              void* D, cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t* algo_p, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
    (void)h;
    const emu::LtDesc* op = (const emu::LtDesc*)desc;
    const emu::LtLayout *a = (const emu::LtLayout*)la, *b = (const emu::LtLayout*)lb, *c = (const emu::LtLayout*)lc, *dd = (const emu::LtLayout*)ld;
    uint64_t m, n, k;
    const char* why = emu::lt_validate(op, a, b, c, dd, &m, &n, &k);
    if (why) { emu::fail("cublasLtMatmul: %s", why); }
    if (!algo_p || ((const emu::LtAlgo*)algo_p)->magic != EMU_LT_MAGIC) { emu::fail("cublasLtMatmul: no algorithm from the heuristic"); }
    // CUDA_EMU_NO_EPILOGUE=2: the heuristic offers them, the product refuses them (before anything is queued)
    if (emu::lt_refuse_epilogue(op, 2)) { return CUBLAS_STATUS_NOT_SUPPORTED; }
    const emu::LtAlgo* algo = (const emu::LtAlgo*)algo_p;
    const int uses_bias = emu::epi_has_bias(op->epilogue) || emu::epi_is_bgrad(op->epilogue);
    const void* ptrs[6] = {A, B, C, D, uses_bias ? op->bias : NULL, emu::epi_has_aux(op->epilogue) ? op->aux : NULL};
    const char* names[6] = {"A", "B", "C", "D", "the bias", "the auxiliary matrix"};
    for (int i = 0; i < 6; i++) {
        if (emu::ptr_alignment(ptrs[i]) < algo->align[i]) {
            emu::fail("cublasLtMatmul: %s at %p is %u-byte aligned, but the heuristic was %s %u", names[i], ptrs[i],
                      emu::ptr_alignment(ptrs[i]), i < 4 ? "promised" : "given a pointer aligned to", algo->align[i]);
        }
    }
    if (workspace_bytes) { emu::mem_check(workspace, workspace_bytes, emu::MEM_DEVICE, "cublasLtMatmul: the workspace"); }
    const emu::LtLayout* ls[4] = {a, b, c, dd};
    for (int i = 0; i < 4; i++) {
        size_t extent = ((ls[i]->cols - 1) * (size_t)ls[i]->ld + ls[i]->rows) * emu::type_size(ls[i]->type);
        char what[64];
        snprintf(what, sizeof(what), "cublasLtMatmul: matrix %s", names[i]);
        emu::mem_check(ptrs[i], extent, emu::MEM_DEVICE, what);
    }
    int32_t bias_type = op->bias_type >= 0 ? op->bias_type : dd->type;
    int32_t aux_type = op->aux_type >= 0 ? op->aux_type : dd->type;
    if (emu::epi_has_bias(op->epilogue)) {
        if (!op->bias) { emu::fail("cublasLtMatmul: a bias epilogue without a bias pointer"); }
        emu::mem_check(op->bias, m * emu::type_size(bias_type), emu::MEM_DEVICE, "cublasLtMatmul: the bias");
    }
    if (emu::epi_is_bgrad(op->epilogue)) {
        if (!op->bias) { emu::fail("cublasLtMatmul: a bias-gradient epilogue without a bias pointer"); }
        // the library's documentation does not say how alpha scales the bias gradient: refuse what cannot be vouched for
        if (*(const float*)alpha_p != 1.0f) { emu::fail("cublasLtMatmul: a bias-gradient epilogue with alpha %g (the emulator knows alpha 1 only)", *(const float*)alpha_p); }
        size_t len = op->epilogue == CUBLASLT_EPILOGUE_BGRADA ? m : n;
        emu::mem_check(op->bias, len * emu::type_size(dd->type), emu::MEM_DEVICE, "cublasLtMatmul: the bias gradient");
    }
    if (emu::epi_has_aux(op->epilogue)) {
        if (!op->aux) { emu::fail("cublasLtMatmul: a GELU epilogue without an auxiliary pointer"); }
        emu::mem_check(op->aux, ((n - 1) * (size_t)op->aux_ld + m) * emu::type_size(aux_type), emu::MEM_DEVICE, "cublasLtMatmul: the auxiliary matrix");
    }
    // the descriptors and scalars are read now (a later call may change the cached descriptor's pointers), the
    // operands when the stream runs the product
    float alpha = *(const float*)alpha_p, beta = *(const float*)beta_p;
    emu::LtDesc opv = *op;
    emu::LtLayout av = *a, bv = *b, cv = *c, dv = *dd;
    emu::EmuRanges watch = emu::unordered_sends(emu::stream_of(stream)); // (the sends it may not write, as issued)
    uint32_t index = algo->index;
    emu::enqueue(stream, [=]() {
        emu::run_watched(watch, "cublasLtMatmul", [&]() {
            emu::lt_compute(&opv, &av, &bv, &cv, &dv, alpha, beta, A, B, C, D, m, n, k, bias_type, aux_type);
        });
        emu::g_vclock_ms += emu::lt_cost_ms(index, m, n, k);
        emu::g_lt_runs[index]++;
    });
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"

namespace emu {
static void lt_compute(const LtDesc* op, const LtLayout* a, const LtLayout* b, const LtLayout* c, const LtLayout* dd, float alpha,
                       float beta, const void* A, const void* B, const void* C, void* D, uint64_t m, uint64_t n, uint64_t k,
                       int32_t bias_type, int32_t aux_type) {
    double t0 = now_s();
    // op(A) as m rows of k, op(B) as n rows of k: each element of D is one contiguous dot product
    std::vector<float> at(m * k), bt(n * k);
    for (uint64_t i = 0; i < m; i++) {
        for (uint64_t l = 0; l < k; l++) { at[i * k + l] = load_as_float(A, a->type, op->transa ? l + i * a->ld : i + l * a->ld); }
    }
    for (uint64_t j = 0; j < n; j++) {
        for (uint64_t l = 0; l < k; l++) { bt[j * k + l] = load_as_float(B, b->type, op->transb ? j + l * b->ld : l + j * b->ld); }
    }
    if (op->compute == CUBLAS_COMPUTE_32F_FAST_TF32) { // the operands as the tensor cores see them (also for BGRADB)
        for (float& v : at) { v = round_tf32(v); }
        for (float& v : bt) { v = round_tf32(v); }
    }
    std::vector<float> out(m * n);
#ifdef USE_BLAS
    // out (n x m, row-major) = op(B)^T-rows times op(A)-rows: one sgemm (the GPU's sum order differs anyway)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)m, (int)k, 1.0f, bt.data(), (int)k, at.data(), (int)k, 0.0f,
                out.data(), (int)m);
#else
    for (uint64_t j = 0; j < n; j++) {
        const float* y = &bt[j * k];
        for (uint64_t i = 0; i < m; i++) {
            const float* x = &at[i * k];
            float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            uint64_t l = 0;
            for (; l + 8 <= k; l += 8) {
                for (int q = 0; q < 8; q++) { s[q] += x[l + q] * y[l + q]; }
            }
            float acc = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            for (; l < k; l++) { acc += x[l] * y[l]; }
            out[j * m + i] = acc;
        }
    }
#endif
    if (epi_is_bgrad(op->epilogue)) { // fp32 sums over k, stored in D's type
        int rows = op->epilogue == CUBLASLT_EPILOGUE_BGRADA;
        const std::vector<float>& src = rows ? at : bt;
        for (uint64_t i = 0; i < (rows ? m : n); i++) {
            float s = 0.0f;
            for (uint64_t l = 0; l < k; l++) { s += src[i * k + l]; }
            store_float((void*)op->bias, dd->type, i, s);
        }
    }
    for (uint64_t j = 0; j < n; j++) {
        for (uint64_t i = 0; i < m; i++) {
            float v = alpha * out[j * m + i];
            if (beta != 0.0f) { v += beta * load_as_float(C, c->type, i + j * c->ld); }
            if (epi_has_bias(op->epilogue)) { v += load_as_float(op->bias, bias_type, i); }
            if (op->epilogue == CUBLASLT_EPILOGUE_GELU_AUX || op->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                store_float((void*)op->aux, aux_type, i + j * op->aux_ld, v);
                v = gelu_tanh(v);
            } else if (op->epilogue == CUBLASLT_EPILOGUE_DGELU) {
                v *= gelu_tanh_grad(load_as_float(op->aux, aux_type, i + j * op->aux_ld));
            }
            store_float(D, dd->type, i + j * dd->ld, v);
        }
    }
    profile_add("cublasLtMatmul", t0);
    mem_check_guards("cublasLtMatmul");
}
} // namespace emu

#endif // CUBLASLT_EMU_H
