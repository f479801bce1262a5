/*
kernels_cpu.h: the CPU kernels of the GPT-2 trainer, forward and backward of every op, and AdamW.
They are the reference the CUDA kernels (kernels.cuh, same signatures) are checked against.

Conventions (read these before any kernel):
- Row-major tensors; "BT" is the number of token rows (B*T), C channels, OC output channels.
- Parameter gradients are written according to the `acc` flag of each backward kernel: acc = 0 OVERWRITES them
  (the first micro-step of an optimizer step, so nothing has to zero gradients between steps), acc = 1
  ACCUMULATES (+=, the later micro-steps of gradient accumulation).
- Activation gradients are OVERWRITTEN unless the kernel's contract says "accumulates into".
- Matmuls go through cblas_sgemm when built with -DUSE_BLAS (OpenBLAS), else through plain OpenMP loops.
- Only static functions: any translation unit may include this header.
*/
#ifndef KERNELS_CPU_H
#define KERNELS_CPU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef USE_BLAS
#include <cblas.h>
#endif

#ifndef GELU_SCALING_FACTOR
#define GELU_SCALING_FACTOR 0.7978845608028654f // sqrt(2/pi)
#endif

static int kernels_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int kernels_thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

// Flush subnormals to zero (FTZ) and read them as zero (DAZ) on every OpenMP thread. A diverging run pushes
// values into the subnormal range, where each x86 float operation takes a ~100-cycle microcode assist: one such
// run went from 0.6 s to 36 s a step. Call once at start, after the thread count is set (the pool persists).
static void kernels_init_fp_mode(void) {
#if defined(__SSE__) || defined(__x86_64__)
    #pragma omp parallel
    { __builtin_ia32_ldmxcsr(__builtin_ia32_stmxcsr() | 0x8040); } // bit 15 FTZ, bit 6 DAZ
#endif
}

// Which matmul engine runs, for the start-up table and benchmarks (OpenBLAS names the kernel family it picked).
static const char* kernels_blas_name(void) {
#if defined(USE_BLAS) && defined(OPENBLAS_VERSION)
    return openblas_get_corename();
#elif defined(USE_BLAS)
    return "cblas";
#else
    return "built-in loops (no BLAS)";
#endif
}

// ----------------------------------------------------------------------------
// OpenBLAS kernel choice. OpenBLAS picks its kernel family by cpuid when the library loads, and a release that
// does not know a CPU (0.3.21 and Sapphire/Emerald Rapids, say) silently falls back to a generic family such as
// Prescott (SSE3): the GPT-2 124M step took 3.7 s instead of 1.2 s. So at the very start of main, before anything
// else (MPI included), kernels_blas_select() checks the family OpenBLAS chose; when it is generic and the CPU's
// features allow better, it sets OPENBLAS_CORETYPE to that family and re-executes the program, which then loads
// OpenBLAS with it. A family set by the user (OPENBLAS_CORETYPE) is always kept. kernels_blas_reason() says why
// the family in use was chosen.

#define KERNELS_BLAS_MARK "GPT_TRAINER_BLAS_CHOICE" // set on re-execution: the reason, and that we chose it

static char kernels__blas_reason[256] = "detected by OpenBLAS";

static const char* kernels_blas_reason(void) { return kernels__blas_reason; }

// The best OpenBLAS x86-64 family this CPU's features allow (NULL: nothing better than a generic one), and the
// features that justify it.
static const char* kernels__blas_family_for_cpu(const char** why) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq")) {
        // Cooperlake adds bf16 kernels (sbgemm) to SkylakeX's; its sgemm is SkylakeX's
        if (__builtin_cpu_supports("avx512bf16")) { *why = "AVX-512 F/BW/VL/DQ and AVX512-BF16"; return "Cooperlake"; }
        *why = "AVX-512 F/BW/VL/DQ";
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) { *why = "AVX2 and FMA"; return "Haswell"; }
#endif
    (void)why;
    return NULL;
}

static int kernels__blas_generic(const char* name) {
    const char* generic[] = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai", "coppermine",
                             "northwood", "banias", "unknown", "generic"};
    for (size_t i = 0; i < sizeof(generic) / sizeof(generic[0]); i++) {
        if (strcasecmp(name, generic[i]) == 0) { return 1; }
    }
    return 0;
}

static void kernels_blas_select(char** argv) {
#if defined(USE_BLAS) && defined(OPENBLAS_VERSION)
    const char* mark = getenv(KERNELS_BLAS_MARK);
    const char* user = getenv("OPENBLAS_CORETYPE");
    if (mark && user) { snprintf(kernels__blas_reason, sizeof(kernels__blas_reason), "%s", mark); return; }
    if (user) { snprintf(kernels__blas_reason, sizeof(kernels__blas_reason), "set by OPENBLAS_CORETYPE=%s", user); return; }
    const char* found = openblas_get_corename();
    const char* why = "";
    const char* better = kernels__blas_family_for_cpu(&why);
    if (!kernels__blas_generic(found) || !better) { return; }
    char reason[256];
    snprintf(reason, sizeof(reason), "chosen by the trainer:%sreported '%s' for this CPU, which has %s",
             OPENBLAS_VERSION, found, why); // OPENBLAS_VERSION is " OpenBLAS 0.3.21 "
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv(KERNELS_BLAS_MARK, reason, 1);
    execv("/proc/self/exe", argv);
    // re-execution failed: carry on with the generic kernels, saying so
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(KERNELS_BLAS_MARK);
    snprintf(kernels__blas_reason, sizeof(kernels__blas_reason), "generic: OpenBLAS reported '%s'; re-executing with %s failed", found, better);
#else
    (void)argv;
    (void)kernels__blas_family_for_cpu;
    (void)kernels__blas_generic;
#endif
}

// ----------------------------------------------------------------------------
// GEMM: C (M,N) = alpha * op(A) @ op(B) + beta * C, row-major, op = transpose when the flag is set.
// A is (M,K) or (K,M) when transA; B is (K,N) or (N,K) when transB.

static void gemm(int transA, int transB, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* Cm, int ldc) {
#ifdef USE_BLAS
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
#else
    #pragma omp parallel for collapse(2) if ((size_t)M * N * K > 100000)
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                float a = transA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = transB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                acc += a * b;
            }
            float* c = &Cm[(size_t)i * ldc + j];
            *c = alpha * acc + (beta == 0.0f ? 0.0f : beta * *c);
        }
    }
#endif
}

// ----------------------------------------------------------------------------
// exp and tanh that vectorize: libm's expf/tanhf are scalar calls, and GELU plus the softmaxes spent ~10% of a
// GPT-2 step in them. exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2 / 2, exp(r) by its Taylor polynomial
// to r^7 (truncation error < 2e-8 relative, about 1 ulp overall). Inputs below -87 give exactly 0 (never a
// subnormal: those make every later multiply ~100x slower), above 88 give 88's value, NaN gives NaN. The clamp
// runs before the float-to-int conversion, which is undefined for NaN and out-of-range values.
static inline float fast_expf(float x) {
    float xc = x >= -87.0f ? (x > 88.0f ? 88.0f : x) : -87.0f; // NaN fails the first test and becomes -87
    float n = floorf(xc * 1.44269504f + 0.5f);
    float r = xc - n * 0.693145752f - n * 1.42860677e-6f; // ln 2 split in two for an exact n * ln2_hi
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f +
              r * (0.00138888892f + r * 0.000198412701f))))));
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    float y = p * scale;
    y = x < -87.0f ? 0.0f : y;
    return x != x ? x : y;
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7, which is what GELU needs (it uses 0.5 (1 + tanh)).
static inline float fast_tanhf(float u) {
    return 1.0f - 2.0f / (fast_expf(2.0f * u) + 1.0f);
}

// ----------------------------------------------------------------------------
// encoder: x[b,t,:] = wte[tok[b,t],:] + wpe[t,:]

static void encoder_forward(float* out, const int32_t* tok, const float* wte, const float* wpe, int B, int T, int C) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* o = out + ((size_t)b * T + t) * C;
            const float* e = wte + (size_t)tok[b * T + t] * C;
            const float* p = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) { o[i] = e[i] + p[i]; }
        }
    }
}

// dwte[tok] += dout, dwpe[t] += dout. Threads split the channels, so repeated tokens never race.
static void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tok, int B, int T, int C) {
    #pragma omp parallel
    {
        int nt = kernels_num_threads(), id = kernels_thread_id();
        int c0 = (int)((long)C * id / nt), c1 = (int)((long)C * (id + 1) / nt);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float* d = dout + ((size_t)b * T + t) * C;
                float* we = dwte + (size_t)tok[b * T + t] * C;
                float* pe = dwpe + (size_t)t * C;
                for (int i = c0; i < c1; i++) { we[i] += d[i]; pe[i] += d[i]; }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// LayerNorm: y = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + 1e-5), over the C channels of each row.

static void layernorm_row(float* y, float* mean_out, float* rstd_out, const float* x, const float* w, const float* b, int C) {
    float m = 0.0f;
    for (int i = 0; i < C; i++) { m += x[i]; }
    m /= C;
    float v = 0.0f;
    for (int i = 0; i < C; i++) { float d = x[i] - m; v += d * d; }
    v /= C;
    float s = 1.0f / sqrtf(v + 1e-5f);
    for (int i = 0; i < C; i++) { y[i] = (x[i] - m) * s * w[i] + b[i]; }
    mean_out[0] = m;
    rstd_out[0] = s;
}

static void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b, int BT, int C) {
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        layernorm_row(out + (size_t)r * C, mean + r, rstd + r, inp + (size_t)r * C, w, b, C);
    }
}

// LayerNorm's output recomputed from the statistics its forward kept (activation recomputation): the same
// arithmetic as layernorm_row, so the result is the forward's, bit for bit.
static void layernorm_apply(float* out, const float* inp, const float* mean, const float* rstd, const float* w,
                            const float* b, int BT, int C) {
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        const float* x = inp + (size_t)r * C;
        float* y = out + (size_t)r * C;
        float m = mean[r], s = rstd[r];
        for (int i = 0; i < C; i++) { y[i] = (x[i] - m) * s * w[i] + b[i]; }
    }
}

// Fused residual + bias + LayerNorm: res_out = res_in + delta + bias (bias may be NULL), then out = LN(res_out).
// res_out may alias res_in. One pass per row instead of three.
static void residual_layernorm_forward(float* res_out, float* out, float* mean, float* rstd, const float* res_in,
                                       const float* delta, const float* bias, const float* w, const float* b, int BT, int C) {
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        float* ro = res_out + (size_t)r * C;
        const float* ri = res_in + (size_t)r * C;
        const float* d = delta + (size_t)r * C;
        if (bias) {
            for (int i = 0; i < C; i++) { ro[i] = ri[i] + d[i] + bias[i]; }
        } else {
            for (int i = 0; i < C; i++) { ro[i] = ri[i] + d[i]; }
        }
        layernorm_row(out + (size_t)r * C, mean + r, rstd + r, ro, w, b, C);
    }
}

// Backward of LayerNorm. With n = (x - mean) * rstd and g = dout * w:
//   dx = rstd * (g - mean(g) - n * mean(g * n))        (ACCUMULATES into dinp: the residual stream's gradient)
//   dw (+)= sum_rows dout * n,  db (+)= sum_rows dout   (overwritten when acc is 0)
// scratch: at least 2*C*kernels_num_threads() floats, for per-thread partial sums of dw and db.
static void layernorm_backward(float* dinp, float* dw, float* db, float* scratch, const float* dout, const float* inp,
                               const float* w, const float* mean, const float* rstd, int BT, int C, int acc) {
    int nt = kernels_num_threads();
    memset(scratch, 0, sizeof(float) * 2 * (size_t)C * nt);
    #pragma omp parallel
    {
        float* pdw = scratch + (size_t)2 * C * kernels_thread_id();
        float* pdb = pdw + C;
        #pragma omp for
        for (int r = 0; r < BT; r++) {
            const float* x = inp + (size_t)r * C;
            const float* d = dout + (size_t)r * C;
            float* dx = dinp + (size_t)r * C;
            float m = mean[r], s = rstd[r];
            float g_mean = 0.0f, gn_mean = 0.0f;
            for (int i = 0; i < C; i++) {
                float n = (x[i] - m) * s;
                float g = d[i] * w[i];
                g_mean += g;
                gn_mean += g * n;
            }
            g_mean /= C;
            gn_mean /= C;
            for (int i = 0; i < C; i++) {
                float n = (x[i] - m) * s;
                float g = d[i] * w[i];
                dx[i] += s * (g - g_mean - n * gn_mean);
                pdw[i] += d[i] * n;
                pdb[i] += d[i];
            }
        }
    }
    if (!acc) {
        memset(dw, 0, sizeof(float) * C);
        memset(db, 0, sizeof(float) * C);
    }
    for (int t = 0; t < nt; t++) {
        const float* pdw = scratch + (size_t)2 * C * t;
        for (int i = 0; i < C; i++) { dw[i] += pdw[i]; db[i] += pdw[C + i]; }
    }
}

// ----------------------------------------------------------------------------
// Linear layer: out (BT,OC) = inp (BT,C) @ W^T + bias, W is (OC,C) as in PyTorch. bias may be NULL.

static void add_bias_rows(float* out, const float* bias, int BT, int OC) {
    #pragma omp parallel for
    for (int r = 0; r < BT; r++) {
        float* o = out + (size_t)r * OC;
        for (int j = 0; j < OC; j++) { o[j] += bias[j]; }
    }
}

static void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int BT, int C, int OC) {
    gemm(0, 1, BT, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC);
    if (bias) { add_bias_rows(out, bias, BT, OC); }
}

// dinp = dout @ W (overwritten; skipped when dinp is NULL), dW (+)= dout^T @ inp, dbias (+)= sum_rows dout
// (parameter gradients overwritten when acc is 0, accumulated when 1).
static void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                            int BT, int C, int OC, int acc) {
    if (dinp) { gemm(0, 0, BT, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C); }
    gemm(1, 0, OC, C, BT, 1.0f, dout, OC, inp, C, acc ? 1.0f : 0.0f, dw, C);
    if (dbias) {
        // columns split across threads; each thread walks all rows of its 16-column strips
        #pragma omp parallel for
        for (int j0 = 0; j0 < OC; j0 += 16) {
            int j1 = j0 + 16 < OC ? j0 + 16 : OC;
            float sums[16] = {0};
            for (int r = 0; r < BT; r++) {
                const float* d = dout + (size_t)r * OC;
                for (int j = j0; j < j1; j++) { sums[j - j0] += d[j]; }
            }
            for (int j = j0; j < j1; j++) { dbias[j] = (acc ? dbias[j] : 0.0f) + sums[j - j0]; }
        }
    }
}

// ----------------------------------------------------------------------------
// GELU, tanh approximation: y = 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2/pi)

static void gelu_forward(float* out, const float* inp, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + fast_tanhf(u));
    }
}

// dinp = dout * y'(x), with y'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 * 0.044715 x^2).
// dinp may alias dout (in place).
static void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x);
        float th = fast_tanhf(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = grad * dout[i];
    }
}

// ----------------------------------------------------------------------------
// Causal self-attention, one (batch, head) at a time, with only a T x T scratch per thread (never B x NH x T x T).
// qkv is (B,T,3C): q, k, v side by side, head h owns channels [h*hs, (h+1)*hs) of each. With scale = 1/sqrt(hs):
//   S = scale * Q K^T (masked j > i),  P = softmax_rows(S),  O = P V,  lse_i = log sum_j exp(S_ij)
// Forward keeps only O (into out, (B,T,C)) and lse (B,NH,T); backward recomputes P from lse:
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),  dQ = scale dS K,  dK = scale dS^T Q
// scratch: attention_scratch_floats(T) floats per thread.

static size_t attention_scratch_floats(int T) { return (size_t)2 * T * T; }

static void attention_forward(float* out, float* lse, float* scratch, const float* qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t per_thread = attention_scratch_floats(T);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float* S = scratch + per_thread * kernels_thread_id();
            const float* q = qkv + (size_t)b * T * 3 * C + h * hs;
            const float* k = q + C;
            const float* v = q + 2 * C;
            gemm(0, 1, T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, S, T);
            float* l = lse + ((size_t)b * NH + h) * T;
            for (int i = 0; i < T; i++) {
                float* s = S + (size_t)i * T;
                float m = -INFINITY;
                for (int j = 0; j <= i; j++) { m = s[j] > m ? s[j] : m; }
                float sum = 0.0f;
                #pragma omp simd reduction(+ : sum)
                for (int j = 0; j <= i; j++) { s[j] = fast_expf(s[j] - m); sum += s[j]; }
                float inv = 1.0f / sum;
                for (int j = 0; j <= i; j++) { s[j] *= inv; }
                for (int j = i + 1; j < T; j++) { s[j] = 0.0f; }
                l[i] = m + logf(sum);
            }
            gemm(0, 0, T, hs, T, 1.0f, S, T, v, 3 * C, 0.0f, out + (size_t)b * T * C + h * hs, C);
        }
    }
}

// dqkv is overwritten. out and lse are the forward's outputs.
static void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                               const float* lse, int B, int T, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t per_thread = attention_scratch_floats(T);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float* P = scratch + per_thread * kernels_thread_id();
            float* dP = P + (size_t)T * T;
            size_t base = (size_t)b * T * 3 * C + h * hs;
            const float* q = qkv + base;
            const float* k = q + C;
            const float* v = q + 2 * C;
            float* dq = dqkv + base;
            float* dk = dq + C;
            float* dv = dq + 2 * C;
            const float* o = out + (size_t)b * T * C + h * hs;
            const float* dO = dout + (size_t)b * T * C + h * hs;
            const float* l = lse + ((size_t)b * NH + h) * T;
            // recompute P = exp(S - lse) on the causal triangle
            gemm(0, 1, T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, P, T);
            for (int i = 0; i < T; i++) {
                float* p = P + (size_t)i * T;
                #pragma omp simd
                for (int j = 0; j <= i; j++) { p[j] = fast_expf(p[j] - l[i]); }
                for (int j = i + 1; j < T; j++) { p[j] = 0.0f; }
            }
            gemm(1, 0, T, hs, T, 1.0f, P, T, dO, C, 0.0f, dv, 3 * C);      // dV = P^T dO
            gemm(0, 1, T, T, hs, 1.0f, dO, C, v, 3 * C, 0.0f, dP, T);      // dP = dO V^T
            for (int i = 0; i < T; i++) {
                const float* oi = o + (size_t)i * C;
                const float* doi = dO + (size_t)i * C;
                float D = 0.0f;
                for (int d = 0; d < hs; d++) { D += oi[d] * doi[d]; }
                float* p = P + (size_t)i * T;
                float* dp = dP + (size_t)i * T;
                for (int j = 0; j <= i; j++) { dp[j] = p[j] * (dp[j] - D); }  // dS
                for (int j = i + 1; j < T; j++) { dp[j] = 0.0f; }
            }
            gemm(0, 0, T, hs, T, scale, dP, T, k, 3 * C, 0.0f, dq, 3 * C);   // dQ = scale dS K
            gemm(1, 0, T, hs, T, scale, dP, T, q, 3 * C, 0.0f, dk, 3 * C);   // dK = scale dS^T Q
        }
    }
}

// ----------------------------------------------------------------------------
// Fused LM head + softmax + cross-entropy (+ its backward), chunked over rows so no (BT,Vp) logits buffer lives:
//   logits = x @ wte^T over the real vocabulary V (padded rows V..Vp-1 get no probability mass),
//   loss_r = logsumexp(logits_r) - logits_r[target_r],
//   dlogits = dloss_scale * (softmax(logits) - onehot(target)), computed in place in the chunk buffer, then
//   dx = dlogits @ wte (overwritten) and dwte (+)= dlogits^T @ x (overwritten when acc is 0, every row, the padded
//   rows getting zero).
// With dx == NULL only the losses are computed (evaluation). chunk: rows * Vp floats of scratch.
// targets may hold -1 to mean "no loss at this position" (loss 0, no gradient).

static void classifier_chunk_softmax(float* logits, float* losses, const int32_t* targets, float dloss_scale,
                                     int rows, int V, int Vp, int want_grad) {
    #pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        float* z = logits + (size_t)r * Vp;
        int tgt = targets[r];
        float m = -INFINITY;
        for (int j = 0; j < V; j++) { m = z[j] > m ? z[j] : m; }
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (int j = 0; j < V; j++) { sum += fast_expf(z[j] - m); }
        float lse = m + logf(sum);
        losses[r] = tgt >= 0 ? lse - z[tgt] : 0.0f;
        if (want_grad) {
            float s = tgt >= 0 ? dloss_scale : 0.0f;
            #pragma omp simd
            for (int j = 0; j < V; j++) { z[j] = s * fast_expf(z[j] - lse); }
            if (tgt >= 0) { z[tgt] -= s; }
            for (int j = V; j < Vp; j++) { z[j] = 0.0f; }
        }
    }
}

static void classifier_forward_backward(float* losses, float* dx, float* dwte, float* chunk, int chunk_rows,
                                        const float* x, const float* wte, const int32_t* targets, float dloss_scale,
                                        int BT, int C, int V, int Vp, int acc) {
    for (int r0 = 0; r0 < BT; r0 += chunk_rows) {
        int rows = BT - r0 < chunk_rows ? BT - r0 : chunk_rows;
        const float* xr = x + (size_t)r0 * C;
        gemm(0, 1, rows, Vp, C, 1.0f, xr, C, wte, C, 0.0f, chunk, Vp);
        classifier_chunk_softmax(chunk, losses + r0, targets + r0, dloss_scale, rows, V, Vp, dx != NULL);
        if (dx) {
            gemm(0, 0, rows, C, Vp, 1.0f, chunk, Vp, wte, C, 0.0f, dx + (size_t)r0 * C, C);
            gemm(1, 0, Vp, C, rows, 1.0f, chunk, Vp, xr, C, (acc || r0 > 0) ? 1.0f : 0.0f, dwte, C);
        }
    }
}

// Logits of one row (sampling): out (Vp) = x (C) @ wte^T.
static void classifier_logits_row(float* out, const float* x, const float* wte, int C, int Vp) {
    gemm(0, 1, 1, Vp, C, 1.0f, x, C, wte, C, 0.0f, out, Vp);
}

// ----------------------------------------------------------------------------
// AdamW with decoupled weight decay (Loshchilov & Hutter), bias-corrected moments, on a contiguous range:
//   g = grad_scale * grad;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
// grad_scale carries the gradient-clipping factor. t is the 1-based step. The gradient is only read: the next
// step's first micro-step overwrites it (see `acc` above), so no pass over memory zeroes it.

static void adamw_update(float* p, const float* grad, float* m, float* v, size_t n, float lr, float b1, float b2,
                         float eps, float wd, float grad_scale, int t) {
    float bc1 = 1.0f - powf(b1, (float)t);
    float bc2 = 1.0f - powf(b2, (float)t);
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) {
        float g = grad_scale * grad[i];
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1;
        float vhat = vi / bc2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}

// Sum of squares in double (the global gradient norm is the sqrt of the sum over all ranges and ranks).
static double sum_squares(const float* x, size_t n) {
    double acc = 0.0;
    #pragma omp parallel for simd reduction(+ : acc)
    for (size_t i = 0; i < n; i++) { acc += (double)x[i] * x[i]; }
    return acc;
}

// x[i] = 0 for a big buffer, in parallel (memset on one core leaves bandwidth unused).
static void zero_floats(float* x, size_t n) {
    #pragma omp parallel
    {
        int nt = kernels_num_threads(), id = kernels_thread_id();
        size_t lo = n * id / nt, hi = n * (id + 1) / nt;
        memset(x + lo, 0, (hi - lo) * sizeof(float));
    }
}

// y[i] += x[i]
static void add_floats(float* y, const float* x, size_t n) {
    #pragma omp parallel for simd
    for (size_t i = 0; i < n; i++) { y[i] += x[i]; }
}

#endif // KERNELS_CPU_H
