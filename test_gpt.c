/*
test_gpt.c: tests of the trainer, built from the real train_gpt.c (included with TRAIN_GPT_NO_MAIN) and the real
kernel header, never from pasted copies.

    make test_gpt && ./test_gpt                     all single-process tests (needs ./train_gpt built)
    ./test_gpt --model M.bin --state S.bin          check any llm.c model + debug-state pair (logits, loss, grads)
    ./test_gpt --only NAME                          run the groups whose name contains NAME
    ./test_gpt --only reference --ref-dir DIR       the reference checks on another make_reference.py output
                                                    (--traj-lr LR if its trajectory used another learning rate)

Groups: finite-difference gradient checks of every op (double precision), the committed PyTorch reference
(logits, loss, every gradient, a 10-step AdamW trajectory), bit-exact checkpoint resume through the real binary,
bad input through the real binary, and data parallel (every ZeRO stage, resume across world sizes, failures)
through mpirun.
Every comparison is atol + rtol * |ref|, NaN/Inf checked first, written as !(diff <= tol); every failure is
recorded; the last line is "N passed, M failed" and the exit status is non-zero if any failed.
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary

// report(): the shared check harness of tests/testing.h
#define report check

// Compares got (float) with ref (double): NaN/Inf first, then |got - ref| <= atol + rtol |ref| per element.
static int check_close(const char* name, const float* got, const double* ref, size_t n, double atol, double rtol) {
    double max_err = 0.0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) {
            if (bad == 0) { worst = i; }
            bad++;
            max_err = INFINITY;
            continue;
        }
        double diff = fabs((double)got[i] - ref[i]);
        double tol = atol + rtol * fabs(ref[i]);
        if (!(diff <= tol)) { if (bad == 0) { worst = i; } bad++; }
        if (diff > max_err) { max_err = diff; if (bad == 0) { worst = i; } }
    }
    if (bad) {
        report(0, name, "%zu of %zu elements out of tolerance (atol %g, rtol %g); element %zu: got %.9g, expected %.9g; max abs err %.3g",
               bad, n, atol, rtol, worst, got[worst], ref[worst], max_err);
        return 0;
    }
    report(1, name, "max abs err %.3g over %zu elements", max_err, n);
    return 1;
}

static int check_close_f(const char* name, const float* got, const float* ref, size_t n, double atol, double rtol) {
    double* r = (double*)mallocCheck(n * sizeof(double));
    for (size_t i = 0; i < n; i++) { r[i] = ref[i]; }
    int ok = check_close(name, got, r, n, atol, rtol);
    free(r);
    return ok;
}

static int name_selected(const char* only, const char* group) { return !only || strstr(group, only) != NULL; }

static uint64_t g_rng = 12345;
static double rand_d(void) { return rng_uniform(&g_rng) * 2.0 - 1.0; }
static void fill_rand(double* x, size_t n, double scale) { for (size_t i = 0; i < n; i++) { x[i] = scale * rand_d(); } }
static float* to_float(const double* x, size_t n) {
    float* f = (float*)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { f[i] = (float)x[i]; }
    return f;
}

// ----------------------------------------------------------------------------
// Finite differences in double precision. Each op has a naive double reference forward in this file; the loss is
// sum(out * R) for a fixed random R, so the analytic backward is the kernel's backward with dout = R. Central
// differences with h = 1e-6 in double are accurate to ~1e-9, far below float32 rounding, so the tolerances below
// (atol 2e-5 + rtol 1e-3) only have to absorb the float32 kernels' own rounding on these tiny shapes.

typedef double (*LossFn)(void* ctx);

static void fd_grad(LossFn f, void* ctx, double* x, size_t n, double* grad) {
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + h;
        double lp = f(ctx);
        x[i] = save - h;
        double lm = f(ctx);
        x[i] = save;
        grad[i] = (lp - lm) / (2 * h);
    }
}

#define FD_ATOL 2e-5
#define FD_RTOL 1e-3

// --- matmul
typedef struct { int BT, C, OC; double *inp, *w, *b, *R; } MatmulCtx;
static void matmul_ref(const MatmulCtx* c, double* out) {
    for (int r = 0; r < c->BT; r++) {
        for (int o = 0; o < c->OC; o++) {
            double s = c->b ? c->b[o] : 0.0;
            for (int k = 0; k < c->C; k++) { s += c->inp[r * c->C + k] * c->w[o * c->C + k]; }
            out[r * c->OC + o] = s;
        }
    }
}
static double matmul_loss(void* p) {
    MatmulCtx* c = (MatmulCtx*)p;
    double* out = (double*)mallocCheck(sizeof(double) * c->BT * c->OC);
    matmul_ref(c, out);
    double L = 0.0;
    for (int i = 0; i < c->BT * c->OC; i++) { L += out[i] * c->R[i]; }
    free(out);
    return L;
}

static void test_matmul(void) {
    MatmulCtx c = {5, 7, 9, NULL, NULL, NULL, NULL};
    size_t ni = c.BT * c.C, nw = c.OC * c.C, no = c.BT * c.OC;
    c.inp = (double*)mallocCheck(ni * 8); c.w = (double*)mallocCheck(nw * 8); c.b = (double*)mallocCheck(c.OC * 8); c.R = (double*)mallocCheck(no * 8);
    fill_rand(c.inp, ni, 1.0); fill_rand(c.w, nw, 0.5); fill_rand(c.b, c.OC, 0.5); fill_rand(c.R, no, 1.0);
    float *fi = to_float(c.inp, ni), *fw = to_float(c.w, nw), *fb = to_float(c.b, c.OC), *fR = to_float(c.R, no);
    float* out = (float*)mallocCheck(no * 4);
    double* ref = (double*)mallocCheck(no * 8);
    matmul_forward(out, fi, fw, fb, c.BT, c.C, c.OC);
    matmul_ref(&c, ref);
    check_close("matmul_forward", out, ref, no, 1e-5, 1e-5);
    // backward; dw and db start non-zero to check that they accumulate
    float* dinp = (float*)mallocCheck(ni * 4);
    float* dw = (float*)mallocCheck(nw * 4);
    float* db = (float*)mallocCheck(c.OC * 4);
    for (size_t i = 0; i < nw; i++) { dw[i] = 0.25f; }
    for (int i = 0; i < c.OC; i++) { db[i] = -0.5f; }
    matmul_backward(dinp, dw, db, fR, fi, fw, c.BT, c.C, c.OC, 1);
    double* g = (double*)mallocCheck(nw * 8 > ni * 8 ? nw * 8 : ni * 8);
    fd_grad(matmul_loss, &c, c.inp, ni, g);
    check_close("matmul_backward dinp (finite differences)", dinp, g, ni, FD_ATOL, FD_RTOL);
    fd_grad(matmul_loss, &c, c.w, nw, g);
    for (size_t i = 0; i < nw; i++) { g[i] += 0.25; }
    check_close("matmul_backward dw accumulates (finite differences)", dw, g, nw, FD_ATOL, FD_RTOL);
    fd_grad(matmul_loss, &c, c.b, c.OC, g);
    for (int i = 0; i < c.OC; i++) { g[i] -= 0.5; }
    check_close("matmul_backward dbias accumulates (finite differences)", db, g, c.OC, FD_ATOL, FD_RTOL);
    // acc = 0 overwrites: stale values (NaN here) must not leak through
    for (size_t i = 0; i < nw; i++) { dw[i] = NAN; }
    for (int i = 0; i < c.OC; i++) { db[i] = NAN; }
    matmul_backward(dinp, dw, db, fR, fi, fw, c.BT, c.C, c.OC, 0);
    fd_grad(matmul_loss, &c, c.w, nw, g);
    check_close("matmul_backward dw overwrites (finite differences)", dw, g, nw, FD_ATOL, FD_RTOL);
    fd_grad(matmul_loss, &c, c.b, c.OC, g);
    check_close("matmul_backward dbias overwrites (finite differences)", db, g, c.OC, FD_ATOL, FD_RTOL);
    free(c.inp); free(c.w); free(c.b); free(c.R); free(fi); free(fw); free(fb); free(fR); free(out); free(ref);
    free(dinp); free(dw); free(db); free(g);
}

// --- layernorm (and the fused residual + layernorm forward)
typedef struct { int BT, C; double *inp, *w, *b, *R; } LnCtx;
static void ln_ref(const LnCtx* c, double* out) {
    for (int r = 0; r < c->BT; r++) {
        const double* x = c->inp + r * c->C;
        double m = 0, v = 0;
        for (int i = 0; i < c->C; i++) { m += x[i]; }
        m /= c->C;
        for (int i = 0; i < c->C; i++) { v += (x[i] - m) * (x[i] - m); }
        v /= c->C;
        double s = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < c->C; i++) { out[r * c->C + i] = (x[i] - m) * s * c->w[i] + c->b[i]; }
    }
}
static double ln_loss(void* p) {
    LnCtx* c = (LnCtx*)p;
    size_t n = (size_t)c->BT * c->C;
    double* out = (double*)mallocCheck(n * 8);
    ln_ref(c, out);
    double L = 0.0;
    for (size_t i = 0; i < n; i++) { L += out[i] * c->R[i]; }
    free(out);
    return L;
}

static void test_layernorm(void) {
    LnCtx c = {6, 16, NULL, NULL, NULL, NULL};
    size_t n = (size_t)c.BT * c.C;
    c.inp = (double*)mallocCheck(n * 8); c.w = (double*)mallocCheck(c.C * 8); c.b = (double*)mallocCheck(c.C * 8); c.R = (double*)mallocCheck(n * 8);
    fill_rand(c.inp, n, 2.0); fill_rand(c.R, n, 1.0);
    for (int i = 0; i < c.C; i++) { c.w[i] = 1.0 + 0.3 * rand_d(); c.b[i] = 0.3 * rand_d(); }
    float *fi = to_float(c.inp, n), *fw = to_float(c.w, c.C), *fb = to_float(c.b, c.C), *fR = to_float(c.R, n);
    float* out = (float*)mallocCheck(n * 4);
    float mean[6], rstd[6];
    double* ref = (double*)mallocCheck(n * 8);
    layernorm_forward(out, mean, rstd, fi, fw, fb, c.BT, c.C);
    ln_ref(&c, ref);
    check_close("layernorm_forward", out, ref, n, 1e-5, 1e-5);
    // fused residual + bias + layernorm, in place (res_out aliases res_in)
    float* res = (float*)mallocCheck(n * 4);
    float* delta = (float*)mallocCheck(n * 4);
    float bias[16];
    for (size_t i = 0; i < n; i++) { res[i] = fi[i] * 0.5f; delta[i] = fi[i] * 0.25f; }
    for (int i = 0; i < c.C; i++) { bias[i] = 0.25f * fi[i]; }
    double* sum = (double*)mallocCheck(n * 8);
    for (size_t i = 0; i < n; i++) { sum[i] = (double)res[i] + delta[i] + bias[i % c.C]; }
    double* keep = c.inp;
    c.inp = sum;
    ln_ref(&c, ref);
    c.inp = keep;
    float* out2 = (float*)mallocCheck(n * 4);
    residual_layernorm_forward(res, out2, mean, rstd, res, delta, bias, fw, fb, c.BT, c.C);
    check_close("residual_layernorm_forward residual (in place)", res, sum, n, 1e-6, 1e-6);
    check_close("residual_layernorm_forward normalized", out2, ref, n, 1e-5, 1e-5);
    // backward: dinp accumulates into a non-zero buffer, dw/db accumulate
    layernorm_forward(out, mean, rstd, fi, fw, fb, c.BT, c.C);
    float* dinp = (float*)mallocCheck(n * 4);
    float dw[16], db[16];
    for (size_t i = 0; i < n; i++) { dinp[i] = 1.0f; }
    for (int i = 0; i < c.C; i++) { dw[i] = 0.5f; db[i] = -0.5f; }
    float* scratch = (float*)mallocCheck(sizeof(float) * 2 * c.C * kernels_num_threads());
    layernorm_backward(dinp, dw, db, scratch, fR, fi, fw, mean, rstd, c.BT, c.C, 1);
    double* g = (double*)mallocCheck(n * 8);
    fd_grad(ln_loss, &c, c.inp, n, g);
    for (size_t i = 0; i < n; i++) { g[i] += 1.0; }
    check_close("layernorm_backward dinp accumulates (finite differences)", dinp, g, n, FD_ATOL, FD_RTOL);
    fd_grad(ln_loss, &c, c.w, c.C, g);
    for (int i = 0; i < c.C; i++) { g[i] += 0.5; }
    check_close("layernorm_backward dw accumulates (finite differences)", dw, g, c.C, FD_ATOL, FD_RTOL);
    fd_grad(ln_loss, &c, c.b, c.C, g);
    for (int i = 0; i < c.C; i++) { g[i] -= 0.5; }
    check_close("layernorm_backward db accumulates (finite differences)", db, g, c.C, FD_ATOL, FD_RTOL);
    for (int i = 0; i < c.C; i++) { dw[i] = NAN; db[i] = NAN; }
    layernorm_backward(dinp, dw, db, scratch, fR, fi, fw, mean, rstd, c.BT, c.C, 0);
    fd_grad(ln_loss, &c, c.w, c.C, g);
    check_close("layernorm_backward dw overwrites (finite differences)", dw, g, c.C, FD_ATOL, FD_RTOL);
    fd_grad(ln_loss, &c, c.b, c.C, g);
    check_close("layernorm_backward db overwrites (finite differences)", db, g, c.C, FD_ATOL, FD_RTOL);
    free(c.inp); free(c.w); free(c.b); free(c.R); free(fi); free(fw); free(fb); free(fR); free(out); free(ref);
    free(res); free(delta); free(sum); free(out2); free(dinp); free(scratch); free(g);
}

// --- GELU
typedef struct { size_t n; double *x, *R; } GeluCtx;
static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double gelu_loss(void* p) {
    GeluCtx* c = (GeluCtx*)p;
    double L = 0.0;
    for (size_t i = 0; i < c->n; i++) { L += gelu_ref(c->x[i]) * c->R[i]; }
    return L;
}

static void test_gelu(void) {
    GeluCtx c = {64, NULL, NULL};
    c.x = (double*)mallocCheck(c.n * 8); c.R = (double*)mallocCheck(c.n * 8);
    fill_rand(c.x, c.n, 4.0); fill_rand(c.R, c.n, 1.0);
    float *fx = to_float(c.x, c.n), *fR = to_float(c.R, c.n);
    float* out = (float*)mallocCheck(c.n * 4);
    double* ref = (double*)mallocCheck(c.n * 8);
    gelu_forward(out, fx, c.n);
    for (size_t i = 0; i < c.n; i++) { ref[i] = gelu_ref(c.x[i]); }
    check_close("gelu_forward", out, ref, c.n, 1e-6, 1e-5);
    // in place: dinp aliases dout
    gelu_backward(fR, fx, fR, c.n);
    fd_grad(gelu_loss, &c, c.x, c.n, ref);
    check_close("gelu_backward in place (finite differences)", fR, ref, c.n, FD_ATOL, FD_RTOL);
    free(c.x); free(c.R); free(fx); free(fR); free(out); free(ref);
}

// --- the vectorizable exp and tanh against libm in double
static void test_fast_math(void) {
    double worst_exp = 0, worst_tanh = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * i / 200000.0f;
        double e = exp((double)x);
        double rel = fabs(fast_expf(x) - e) / e;
        if (!(rel <= worst_exp)) { worst_exp = rel; } // NaN propagates into worst
        float u = -12.0f + 24.0f * i / 200000.0f;
        double ta = fabs(fast_tanhf(u) - tanh((double)u));
        if (!(ta <= worst_tanh)) { worst_tanh = ta; }
    }
    report(worst_exp <= 4e-7, "fast_expf relative error on [-87, 88]", "max %.3g (bound 4e-7)", worst_exp);
    report(worst_tanh <= 3e-7, "fast_tanhf absolute error on [-12, 12]", "max %.3g (bound 3e-7)", worst_tanh);
    report(fast_expf(-1000.0f) == 0.0f && fast_expf(-87.5f) == 0.0f && fast_expf(-INFINITY) == 0.0f && isfinite(fast_expf(1000.0f)) &&
           fast_expf(INFINITY) == fast_expf(88.0f) && fast_tanhf(-50.0f) == -1.0f && fast_tanhf(50.0f) == 1.0f,
           "fast_expf / fast_tanhf saturate: exactly 0 below -87 (no subnormals), finite above 88", "%s", "");
    report(isnan(fast_expf(NAN)) && isnan(fast_tanhf(NAN)), "fast_expf / fast_tanhf propagate NaN", "%s", "");
    // FTZ/DAZ: after kernels_init_fp_mode a subnormal product is flushed to zero on every thread
    kernels_init_fp_mode();
    volatile float tiny = 1e-30f;
    int flushed = 1;
    #pragma omp parallel reduction(&& : flushed)
    { volatile float x = tiny * 1e-10f; flushed = flushed && x == 0.0f; }
    report(flushed, "kernels_init_fp_mode flushes subnormals to zero on every thread", "%s", "");
}

// --- causal attention
typedef struct { int B, T, C, NH; double *qkv, *R; } AttCtx;
static void att_ref(const AttCtx* c, double* out) {
    int hs = c->C / c->NH, C3 = 3 * c->C;
    double scale = 1.0 / sqrt((double)hs);
    double* p = (double*)mallocCheck(sizeof(double) * c->T);
    for (int b = 0; b < c->B; b++) for (int h = 0; h < c->NH; h++) for (int t = 0; t < c->T; t++) {
        const double* q = c->qkv + (b * c->T + t) * C3 + h * hs;
        double m = -INFINITY;
        for (int j = 0; j <= t; j++) {
            const double* k = c->qkv + (b * c->T + j) * C3 + c->C + h * hs;
            double s = 0;
            for (int d = 0; d < hs; d++) { s += q[d] * k[d]; }
            p[j] = s * scale;
            if (p[j] > m) { m = p[j]; }
        }
        double sum = 0;
        for (int j = 0; j <= t; j++) { p[j] = exp(p[j] - m); sum += p[j]; }
        for (int d = 0; d < hs; d++) {
            double o = 0;
            for (int j = 0; j <= t; j++) { o += p[j] / sum * c->qkv[(b * c->T + j) * C3 + 2 * c->C + h * hs + d]; }
            out[(b * c->T + t) * c->C + h * hs + d] = o;
        }
    }
    free(p);
}
static double att_loss(void* pv) {
    AttCtx* c = (AttCtx*)pv;
    size_t n = (size_t)c->B * c->T * c->C;
    double* out = (double*)mallocCheck(n * 8);
    att_ref(c, out);
    double L = 0;
    for (size_t i = 0; i < n; i++) { L += out[i] * c->R[i]; }
    free(out);
    return L;
}

static void test_attention(void) {
    AttCtx c = {2, 5, 8, 2, NULL, NULL};
    size_t nq = (size_t)c.B * c.T * 3 * c.C, no = (size_t)c.B * c.T * c.C;
    c.qkv = (double*)mallocCheck(nq * 8); c.R = (double*)mallocCheck(no * 8);
    fill_rand(c.qkv, nq, 1.5); fill_rand(c.R, no, 1.0);
    float *fq = to_float(c.qkv, nq), *fR = to_float(c.R, no);
    float* out = (float*)mallocCheck(no * 4);
    float* lse = (float*)mallocCheck(sizeof(float) * c.B * c.NH * c.T);
    float* scratch = (float*)mallocCheck(sizeof(float) * attention_scratch_floats(c.T) * kernels_num_threads());
    double* ref = (double*)mallocCheck(nq * 8);
    attention_forward(out, lse, scratch, fq, c.B, c.T, c.C, c.NH);
    att_ref(&c, ref);
    check_close("attention_forward (causal)", out, ref, no, 1e-5, 1e-5);
    float* dqkv = (float*)mallocCheck(nq * 4);
    for (size_t i = 0; i < nq; i++) { dqkv[i] = NAN; } // must be fully overwritten
    attention_backward(dqkv, scratch, fR, fq, out, lse, c.B, c.T, c.C, c.NH);
    fd_grad(att_loss, &c, c.qkv, nq, ref);
    check_close("attention_backward dqkv (finite differences)", dqkv, ref, nq, FD_ATOL, FD_RTOL);
    free(c.qkv); free(c.R); free(fq); free(fR); free(out); free(lse); free(scratch); free(ref); free(dqkv);
}

// --- encoder
static void test_encoder(void) {
    int B = 2, T = 3, C = 4, V = 5;
    int32_t tok[6] = {1, 3, 1, 4, 1, 0}; // repeated token 1: gradients must add up, not race
    float wte[20], wpe[12], out[24], dout[24], dwte[20] = {0}, dwpe[12] = {0};
    double ref[24], gwte[20] = {0}, gwpe[12] = {0};
    for (int i = 0; i < 20; i++) { wte[i] = (float)rand_d(); }
    for (int i = 0; i < 12; i++) { wpe[i] = (float)rand_d(); }
    for (int i = 0; i < 24; i++) { dout[i] = (float)rand_d(); }
    encoder_forward(out, tok, wte, wpe, B, T, C);
    for (int b = 0; b < B; b++) for (int t = 0; t < T; t++) for (int i = 0; i < C; i++) {
        ref[(b * T + t) * C + i] = (double)wte[tok[b * T + t] * C + i] + wpe[t * C + i];
        gwte[tok[b * T + t] * C + i] += dout[(b * T + t) * C + i];
        gwpe[t * C + i] += dout[(b * T + t) * C + i];
    }
    check_close("encoder_forward", out, ref, 24, 1e-6, 1e-6);
    encoder_backward(dwte, dwpe, dout, tok, B, T, C);
    check_close("encoder_backward dwte (repeated tokens)", dwte, gwte, (size_t)V * C, 1e-6, 1e-6);
    check_close("encoder_backward dwpe", dwpe, gwpe, 12, 1e-6, 1e-6);
}

// --- fused classifier (LM head + softmax + cross-entropy), padded vocabulary and a masked target
typedef struct { int BT, C, V, Vp; double *x, *wte; const int32_t* tgt; double scale; } ClsCtx;
static double cls_loss(void* p) {
    ClsCtx* c = (ClsCtx*)p;
    double L = 0;
    double* z = (double*)mallocCheck(sizeof(double) * c->V);
    for (int r = 0; r < c->BT; r++) {
        if (c->tgt[r] < 0) { continue; }
        double m = -INFINITY, s = 0;
        for (int j = 0; j < c->V; j++) {
            double acc = 0;
            for (int k = 0; k < c->C; k++) { acc += c->x[r * c->C + k] * c->wte[j * c->C + k]; }
            z[j] = acc;
            if (acc > m) { m = acc; }
        }
        for (int j = 0; j < c->V; j++) { s += exp(z[j] - m); }
        L += (m + log(s) - z[c->tgt[r]]) * c->scale;
    }
    free(z);
    return L;
}

static void test_classifier(void) {
    int32_t tgt[7] = {0, 10, 3, -1, 10, 7, 1};
    ClsCtx c = {7, 6, 11, 16, NULL, NULL, tgt, 1.0 / 6.0};
    size_t nx = (size_t)c.BT * c.C, nw = (size_t)c.Vp * c.C;
    c.x = (double*)mallocCheck(nx * 8); c.wte = (double*)mallocCheck(nw * 8);
    fill_rand(c.x, nx, 1.0); fill_rand(c.wte, nw, 1.0);
    for (size_t i = (size_t)c.V * c.C; i < nw; i++) { c.wte[i] = 0.0; }
    float *fx = to_float(c.x, nx), *fw = to_float(c.wte, nw);
    float losses[7], dx[42];
    float* dwte = (float*)mallocCheck(nw * 4);
    for (size_t i = 0; i < nw; i++) { dwte[i] = NAN; } // acc = 0 overwrites every row, padded ones included
    float* chunk = (float*)mallocCheck(sizeof(float) * 3 * c.Vp);
    // chunks of 3 rows: 7 rows = 3 + 3 + 1 exercises the chunk loop's tail
    classifier_forward_backward(losses, dx, dwte, chunk, 3, fx, fw, tgt, (float)c.scale, c.BT, c.C, c.V, c.Vp, 0);
    double L = 0;
    for (int r = 0; r < c.BT; r++) { L += losses[r] * c.scale; }
    double Lref = cls_loss(&c);
    report(fabs(L - Lref) <= 1e-5 * (1 + fabs(Lref)), "classifier loss", "got %.9g, expected %.9g", L, Lref);
    report(losses[3] == 0.0f, "classifier masked target has zero loss", "%s", "");
    double* g = (double*)mallocCheck(nw * 8);
    fd_grad(cls_loss, &c, c.x, nx, g);
    check_close("classifier dx (finite differences)", dx, g, nx, FD_ATOL, FD_RTOL);
    fd_grad(cls_loss, &c, c.wte, nw, g);
    for (size_t i = (size_t)c.V * c.C; i < nw; i++) { g[i] = 0.0; } // padded rows get no gradient
    check_close("classifier dwte overwrites, padded rows zero (finite differences)", dwte, g, nw, FD_ATOL, FD_RTOL);
    // acc = 1 adds a second identical contribution
    classifier_forward_backward(losses, dx, dwte, chunk, 3, fx, fw, tgt, (float)c.scale, c.BT, c.C, c.V, c.Vp, 1);
    for (size_t i = 0; i < nw; i++) { g[i] *= 2.0; }
    check_close("classifier dwte accumulates (finite differences)", dwte, g, nw, 2 * FD_ATOL, FD_RTOL);
    // evaluation path gives the same losses without touching gradients
    float losses2[7];
    classifier_forward_backward(losses2, NULL, NULL, chunk, 2, fx, fw, tgt, 0.0f, c.BT, c.C, c.V, c.Vp, 0);
    check_close_f("classifier eval losses equal train losses", losses2, losses, 7, 1e-6, 1e-6);
    free(c.x); free(c.wte); free(fx); free(fw); free(dwte); free(chunk); free(g);
}

// --- AdamW against the closed form in double
static void test_adamw(void) {
    enum { N = 37 };
    float p[N], g[N], m[N], v[N];
    double pd[N], md[N], vd[N];
    for (int i = 0; i < N; i++) { p[i] = (float)rand_d(); g[i] = (float)rand_d(); m[i] = 0; v[i] = 0; pd[i] = p[i]; md[i] = 0; vd[i] = 0; }
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    float g0[N];
    memcpy(g0, g, sizeof(g));
    for (int t = 1; t <= 3; t++) {
        memcpy(g, g0, sizeof(g));
        adamw_update(p, g, m, v, N, lr, b1, b2, eps, wd, gs, t);
        for (int i = 0; i < N; i++) {
            double gg = (double)gs * g0[i];
            md[i] = b1 * md[i] + (1 - (double)b1) * gg;
            vd[i] = b2 * vd[i] + (1 - (double)b2) * gg * gg;
            double mh = md[i] / (1 - pow(b1, t)), vh = vd[i] / (1 - pow(b2, t));
            pd[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pd[i]);
        }
    }
    check_close("adamw_update 3 steps vs closed form", p, pd, N, 1e-6, 1e-5);
}

// ----------------------------------------------------------------------------
// Whole-model reference (llm.c format model + debug state made by scripts/make_reference.py with PyTorch).

// Reads a flat buffer written in llm.c's file order (the inverse of write_in_file_order); returns the checksum.
static uint64_t read_in_file_order(FILE* fp, const ParamLayout* pl, float* flat, const char* what, uint64_t h) {
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        size_t n = e->rows * e->cols;
        freadCheck(flat + e->offset, sizeof(float), n, fp, what);
        h = checksum64(flat + e->offset, n * sizeof(float), h);
    }
    return h;
}

typedef struct { int B, T; int32_t* x; int32_t* y; float* logits; float loss; float* grads; } DebugState;

// Reads an llm.c debug state for a model of this layout; grads come back in our flat layout.
static int debug_state_read(const char* path, const ParamLayout* pl, DebugState* s) {
    FILE* fp = fopen(path, "rb");
    if (!fp) { report(0, "read debug state", "cannot open '%s'", path); return 0; }
    int32_t h[256];
    if (fread(h, 4, 256, fp) != 256 || h[0] != 20240327 || h[1] != 2) {
        fclose(fp);
        report(0, "read debug state", "'%s': bad header (magic 20240327, version 2 expected)", path);
        return 0;
    }
    s->B = h[2]; s->T = h[3];
    size_t BT = (size_t)s->B * s->T, V = pl->cfg.vocab_size;
    long long expect = 1024 + (long long)(BT * 4 * 2 + BT * V * 4 + 4 + pl->num_params * 4);
    if (file_size(path) != expect) {
        fclose(fp);
        report(0, "read debug state", "'%s' is %lld bytes, expected %lld for this model", path, file_size(path), expect);
        return 0;
    }
    s->x = (int32_t*)mallocCheck(BT * 4); s->y = (int32_t*)mallocCheck(BT * 4);
    s->logits = (float*)mallocCheck(BT * V * 4); s->grads = (float*)callocCheck(pl->num_params, 4);
    freadCheck(s->x, 4, BT, fp, path);
    freadCheck(s->y, 4, BT, fp, path);
    freadCheck(s->logits, 4, BT * V, fp, path);
    freadCheck(&s->loss, 4, 1, fp, path);
    read_in_file_order(fp, pl, s->grads, path, 0);
    fclose(fp);
    return 1;
}

// Builds a single-process model from a model file, with ZeRO stage 0 and activations for (B,T).
static void build_model(GPT* m, ZeroOptimizer* z, ParallelContext* pc, const char* path, int B, int T) {
    GPTConfig gc;
    int version;
    FILE* fp;
    memset(m, 0, sizeof(*m));
    model_read_header(path, &gc, &version, &fp);
    gpt_alloc_params(m, &gc, 1);
    model_load_params(path, fp, version, &m->layout, m->params);
    ZeroSegment* segs = (ZeroSegment*)mallocCheck(sizeof(ZeroSegment) * m->layout.num_tensors);
    for (int i = 0; i < m->layout.num_tensors; i++) {
        segs[i].offset = m->layout.table[i].offset;
        segs[i].size = m->layout.table[i].rows * m->layout.table[i].cols;
        segs[i].decay = m->layout.table[i].decay;
    }
    zero_init(z, 0, &pc->dp_group, m->layout.num_params, segs, m->layout.num_tensors);
    free(segs);
    gpt_alloc_grads(m, 0, 1);
    activations_alloc(&m->acts, &gc, B, T);
    m->inputs = (int32_t*)mallocCheck(sizeof(int32_t) * B * T);
}

// Checks logits, loss and every gradient tensor of a model + debug state pair. Tolerances: the reference is
// PyTorch float32 on the CPU; our float32 sums run in another order, so logits and loss agree to ~1e-6 relative,
// and gradients to atol 1e-5 + rtol 1e-3 (tiny gradient elements carry relative rounding noise).
static void check_reference(const char* model_path, const char* state_path, ParallelContext* pc, double grad_atol) {
    GPTConfig gc;
    int version;
    FILE* fp;
    model_read_header(model_path, &gc, &version, &fp);
    fclose(fp);
    ParamLayout pl;
    layout_build(&pl, &gc);
    DebugState s;
    if (!debug_state_read(state_path, &pl, &s)) { layout_free(&pl); return; }
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, model_path, s.B, s.T);
    gpt_forward(&m, s.x, s.B, s.T);
    size_t BT = (size_t)s.B * s.T, V = gc.vocab_size, Vp = gc.padded_vocab_size;
    float* logits = (float*)mallocCheck(BT * V * 4);
    float* row = (float*)mallocCheck(Vp * 4);
    for (size_t r = 0; r < BT; r++) {
        classifier_logits_row(row, m.acts.lnf + r * gc.channels, m.p.wte, gc.channels, (int)Vp);
        memcpy(logits + r * V, row, V * 4);
    }
    check_close_f("reference logits", logits, s.logits, BT * V, 1e-5, 1e-4);
    BackwardComm bc = {NULL, 0, 1};
    float loss = gpt_forward_backward(&m, s.y, 1.0f / BT, &bc);
    report(fabsf(loss - s.loss) <= 1e-5f * (1 + fabsf(s.loss)), "reference loss", "got %.9g, expected %.9g", loss, s.loss);
    int all_ok = 1;
    for (int i = 0; i < pl.num_tensors; i++) {
        const ParamEntry* e = &pl.table[i];
        char name[96];
        snprintf(name, sizeof(name), "reference grad %s", e->name);
        size_t n = e->rows * e->cols;
        // float32 gradients of near-zero elements: absolute tolerance; the rest relative
        double maxref = 0;
        for (size_t j = 0; j < n; j++) { maxref = fmax(maxref, fabs(s.grads[e->offset + j])); }
        all_ok &= check_close_f(name, m.grads + e->offset, s.grads + e->offset, n, grad_atol * (maxref > 1 ? maxref : 1), 1e-3);
    }
    (void)all_ok;
    free(logits); free(row);
    free(s.x); free(s.y); free(s.logits); free(s.grads);
    zero_free(&z);
    gpt_free(&m);
    layout_free(&pl);
}

// The committed 10-step AdamW trajectory (lr 1e-3 constant, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices
// and embeddings, clipping at 1.0, the same batch every step). Tolerance: 1e-4 absolute on the loss and 1e-4
// relative on the pre-clip norm: per-step float32 differences (~1e-6) are amplified by Adam's division by sqrt(v)
// on near-zero gradient elements, and still stay two orders of magnitude below the loss changes being checked.
static float g_traj_lr = 1e-3f; // --traj-lr: for trajectories made with another learning rate

static void check_trajectory(const char* dir, ParallelContext* pc) {
    char mp[1024], sp[1024], tp[1024];
    snprintf(mp, sizeof(mp), "%s/ref_model.bin", dir);
    snprintf(sp, sizeof(sp), "%s/ref_state.bin", dir);
    snprintf(tp, sizeof(tp), "%s/ref_trajectory.txt", dir);
    FILE* fp = fopen(tp, "r");
    if (!fp) { report(0, "reference trajectory", "cannot open '%s'", tp); return; }
    double ref_loss[10], ref_norm[10];
    for (int i = 0; i < 10; i++) {
        int step;
        if (fscanf(fp, "%d %lf %lf", &step, &ref_loss[i], &ref_norm[i]) != 3 || step != i) {
            fclose(fp);
            report(0, "reference trajectory", "'%s' is malformed at line %d", tp, i + 1);
            return;
        }
    }
    fclose(fp);
    GPTConfig gc;
    int version;
    model_read_header(mp, &gc, &version, &fp);
    fclose(fp);
    ParamLayout pl;
    layout_build(&pl, &gc);
    DebugState s;
    if (!debug_state_read(sp, &pl, &s)) { layout_free(&pl); return; }
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, mp, s.B, s.T);
    Config c;
    config_defaults(&c);
    c.lr = g_traj_lr; strcpy(c.lr_schedule, "constant"); c.warmup = 0; c.weight_decay = 0.1f; c.grad_clip = 1.0f; c.steps = 10;
    BackwardComm bc = {NULL, 0, 1};
    int bad = 0;
    char detail[2048] = "";
    size_t dl = 0;
    for (int step = 0; step < 10; step++) {
        gpt_forward(&m, s.x, s.B, s.T);
        float loss = gpt_forward_backward(&m, s.y, 1.0f / (s.B * s.T), &bc);
        StepStats st = optimizer_step(&m, &z, &c, step);
        int ok = isfinite(loss) && fabs(loss - ref_loss[step]) <= 1e-4 && fabs(st.grad_norm - ref_norm[step]) <= 1e-4 * ref_norm[step];
        if (!ok) { bad++; }
        if (dl < sizeof(detail)) {
            dl += snprintf(detail + dl, sizeof(detail) - dl, "%s%d: %.6f/%.6f (norm %.5g/%.5g)", step ? ", " : "", step, loss,
                           ref_loss[step], st.grad_norm, ref_norm[step]);
        }
    }
    report(bad == 0, "reference 10-step AdamW trajectory (loss, grad norm)", "%s", detail);
    // padded vocabulary rows stay exactly zero
    int pad_ok = 1;
    for (size_t i = (size_t)gc.vocab_size * gc.channels; i < (size_t)gc.padded_vocab_size * gc.channels; i++) { pad_ok &= m.params[i] == 0.0f; }
    report(pad_ok, "padded vocabulary rows stay zero through training", "%s", "");
    free(s.x); free(s.y); free(s.logits); free(s.grads);
    zero_free(&z);
    gpt_free(&m);
    layout_free(&pl);
}

// Model file round trip: save in llm.c order and load back bit for bit; bf16 (version 5) loading.
static void test_model_files(const char* dir, ParallelContext* pc) {
    char mp[1024];
    snprintf(mp, sizeof(mp), "%s/ref_model.bin", dir);
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, mp, 1, 4);
    const char* tmp = "/tmp/test_gpt_roundtrip.bin";
    model_save(tmp, &m.layout, m.params);
    FILE* a = fopen(mp, "rb");
    FILE* b = fopen(tmp, "rb");
    int same = a && b;
    if (same) {
        // headers may differ only beyond the llm.c fields; compare payloads and the first 8 header ints
        int32_t ha[256], hb[256];
        same = fread(ha, 4, 256, a) == 256 && fread(hb, 4, 256, b) == 256 && memcmp(ha, hb, 8 * 4) == 0;
        int ca, cb;
        while (same && (ca = fgetc(a)) != EOF) { cb = fgetc(b); same = ca == cb; }
        same = same && fgetc(b) == EOF;
    }
    if (a) { fclose(a); }
    if (b) { fclose(b); }
    report(same, "model file save reproduces the llm.c file byte for byte", "%s", "");
    // bf16 version 5: write the parameters rounded to bf16, load, compare with the rounded values
    const char* tmp5 = "/tmp/test_gpt_bf16.bin";
    FILE* f = fopenCheck(tmp5, "wb");
    int32_t h[256] = {0};
    h[0] = MODEL_MAGIC; h[1] = 5; h[2] = m.cfg.max_seq_len; h[3] = m.cfg.vocab_size; h[4] = m.cfg.num_layers;
    h[5] = m.cfg.num_heads; h[6] = m.cfg.channels; h[7] = m.cfg.padded_vocab_size;
    fwriteCheck(h, 4, 256, f, tmp5);
    float* expect = (float*)mallocCheck(m.layout.num_params * 4);
    for (int i = 0; i < m.layout.num_tensors; i++) {
        const ParamEntry* e = &m.layout.table[i];
        for (size_t j = 0; j < e->rows * e->cols; j++) {
            uint32_t u;
            memcpy(&u, &m.params[e->offset + j], 4);
            uint16_t bf = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16); // round to nearest even
            fwriteCheck(&bf, 2, 1, f, tmp5);
            expect[e->offset + j] = bf16_to_float(bf);
        }
    }
    fclose(f);
    GPT m5;
    ZeroOptimizer z5;
    build_model(&m5, &z5, pc, tmp5, 1, 4);
    check_close_f("bf16 (version 5) model file loads", m5.params, expect, m.layout.num_params, 0, 0);
    remove(tmp); remove(tmp5);
    free(expect);
    zero_free(&z); gpt_free(&m);
    zero_free(&z5); gpt_free(&m5);
}

// ----------------------------------------------------------------------------
// Tests through the real binary: checkpoint resume and bad input.

// Runs a shell command, capturing stdout+stderr into out (truncated to cap); returns the exit status, or
// 128 + signal when it was killed by a signal.
static int run_capture(const char* cmd, char* out, size_t cap) {
    // This process is an MPI singleton: its OMPI_/PMIX_ variables would make a child mpirun (or a child singleton)
    // try to join this job, so the child shell drops them first.
    char full[14000];
    snprintf(full, sizeof(full), "unset $(env | sed -n 's/^\\(OMPI_[A-Za-z0-9_]*\\|PMIX_[A-Za-z0-9_]*\\|OPAL_[A-Za-z0-9_]*\\)=.*/\\1/p'); (%s) 2>&1", cmd);
    FILE* p = popen(full, "r");
    if (!p) { return -1; }
    size_t n = 0;
    int ch;
    while ((ch = fgetc(p)) != EOF) { if (n + 1 < cap) { out[n++] = (char)ch; } }
    out[n] = '\0';
    int st = pclose(p);
    if (WIFEXITED(st)) { return WEXITSTATUS(st); }
    if (WIFSIGNALED(st)) { return 128 + WTERMSIG(st); }
    return -1;
}

// Writes an llm.c shard with n tokens drawn from [0, V) (a fixed pseudo-random text with some structure).
static void write_shard(const char* path, int n, int V, uint64_t seed, int magic, int version, int header_count) {
    FILE* f = fopenCheck(path, "wb");
    int32_t h[256] = {0};
    h[0] = magic; h[1] = version; h[2] = header_count;
    fwriteCheck(h, 4, 256, f, path);
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        uint16_t t = (uint16_t)(i % 7 == 0 ? 0 : (rng_next(&s) % V));
        fwriteCheck(&t, 2, 1, f, path);
    }
    fclose(f);
}

// Reads the values of "key" in a JSON log into vals; returns how many.
static int read_log_values(const char* path, const char* key, char vals[][32], int max) {
    FILE* f = fopen(path, "r");
    if (!f) { return 0; }
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof(line), f) && n < max) {
        char pat[64];
        snprintf(pat, sizeof(pat), "\"%s\": ", key);
        char* p = strstr(line, pat);
        if (!p) { continue; }
        p += strlen(pat);
        int k = 0;
        while (*p && *p != ',' && *p != '}' && k < 31) { vals[n][k++] = *p++; }
        vals[n][k] = '\0';
        n++;
    }
    fclose(f);
    return n;
}

static int read_log_losses(const char* path, char losses[][32], int max) { return read_log_values(path, "loss", losses, max); }

static const char* TMP = "/tmp/test_gpt_run";

static void test_checkpoint_resume(void) {
    char cmd[4096], out[65536];
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", TMP, TMP);
    if (system(cmd) != 0) { report(0, "checkpoint setup", "cannot make %s", TMP); return; }
    char shard[1024];
    snprintf(shard, sizeof(shard), "%s/train_000000.bin", TMP);
    write_shard(shard, 4000, 101, 7, 20240520, 1, 4000);
    const char* common = "--init tests/ref/ref_model.bin --batch-size 2 --seq-len 8 --lr 1e-3 --weight-decay 0.1 "
                         "--warmup 3 --lr-schedule cosine --threads 2";
    // A: 20 steps straight, checkpoint at 10
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --checkpoint-every 10 --out %s/ckpt --log %s/a.jsonl", common, shard, TMP, TMP);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "train 20 steps with a checkpoint at step 10", "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
    // B: resume from the step-10 checkpoint (remove the later one so 'latest' points at 10)
    snprintf(cmd, sizeof(cmd), "cd %s/ckpt && rm -f model_00000020.bin state_00000020.bin && echo 10 > latest", TMP);
    if (system(cmd) != 0) { report(0, "checkpoint rewind", "%s", ""); }
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --resume %s/ckpt --log %s/b.jsonl", common, shard, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "resume from the step-10 checkpoint", "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
    // C: resume once more from the same checkpoint: must equal B as well
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --resume %s/ckpt --log %s/c.jsonl", common, shard, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    char la[32][32], lb[32][32], lc[32][32];
    snprintf(cmd, sizeof(cmd), "%s/a.jsonl", TMP);
    int na = read_log_losses(cmd, la, 32);
    snprintf(cmd, sizeof(cmd), "%s/b.jsonl", TMP);
    int nb = read_log_losses(cmd, lb, 32);
    snprintf(cmd, sizeof(cmd), "%s/c.jsonl", TMP);
    int nc = read_log_losses(cmd, lc, 32);
    int same = na == 20 && nb == 10 && nc == 10;
    for (int i = 0; same && i < 10; i++) { same = strcmp(la[10 + i], lb[i]) == 0 && strcmp(lb[i], lc[i]) == 0; }
    report(same, "resumed losses equal the uninterrupted run bit for bit (steps 11-20)", "%d/%d/%d losses; step 11: %s vs %s; step 20: %s vs %s",
           na, nb, nc, na > 10 ? la[10] : "-", nb > 0 ? lb[0] : "-", na == 20 ? la[19] : "-", nb == 10 ? lb[9] : "-");
    int decreasing = na == 20 && atof(la[19]) < atof(la[0]);
    report(decreasing, "training lowers the loss", "step 1 %s, step 20 %s", na ? la[0] : "-", na == 20 ? la[19] : "-");
    // a corrupt checkpoint is refused with a clear message, and the previous files are untouched
    snprintf(cmd, sizeof(cmd), "cp %s/ckpt/state_00000010.bin %s/ckpt/state.bak && printf 'XXXX' | dd of=%s/ckpt/state_00000010.bin bs=1 seek=2000 conv=notrunc 2>/dev/null", TMP, TMP, TMP);
    if (system(cmd) != 0) { report(0, "corrupt setup", "%s", ""); }
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --resume %s/ckpt", common, shard, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 1 && strstr(out, "state_00000010.bin") && strstr(out, "corrupt"), "corrupt checkpoint state is refused naming the file", "exit %d: %.200s", rc, out);
}

typedef struct { const char* name; const char* args; const char* expect; } BadCase;

static void test_bad_input(void) {
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", TMP);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); return; }
    char p[16][1024];
    snprintf(p[0], 1024, "%s/train_000000.bin", TMP);
    write_shard(p[0], 4000, 101, 7, 20240520, 1, 4000);
    snprintf(p[1], 1024, "%s/short_000000.bin", TMP);
    write_shard(p[1], 10, 101, 7, 20240520, 1, 10);
    snprintf(p[2], 1024, "%s/badtok_000000.bin", TMP);
    write_shard(p[2], 4000, 200, 7, 20240520, 1, 4000); // ids up to 199 against V = 101
    snprintf(p[3], 1024, "%s/truncated_model.bin", TMP);
    snprintf(cmd, sizeof(cmd), "head -c 50000 tests/ref/ref_model.bin > %s", p[3]);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); }
    snprintf(p[4], 1024, "%s/magic_model.bin", TMP);
    snprintf(cmd, sizeof(cmd), "cp tests/ref/ref_model.bin %s && printf '\\x01\\x02\\x03\\x04' | dd of=%s bs=1 seek=0 conv=notrunc 2>/dev/null", p[4], p[4]);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); }
    snprintf(p[5], 1024, "%s/version_model.bin", TMP);
    snprintf(cmd, sizeof(cmd), "cp tests/ref/ref_model.bin %s && printf '\\x09\\x00\\x00\\x00' | dd of=%s bs=1 seek=4 conv=notrunc 2>/dev/null", p[5], p[5]);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); }
    snprintf(p[6], 1024, "%s/badmagic_000000.bin", TMP);
    write_shard(p[6], 4000, 101, 7, 12345, 1, 4000);
    snprintf(p[7], 1024, "%s/badcount_000000.bin", TMP);
    write_shard(p[7], 4000, 101, 7, 20240520, 1, 5000);
    char args[16][4096];
    const char* base = "--batch-size 2 --seq-len 8 --steps 2";
    snprintf(args[0], 4096, "--init %s/missing.bin --train %s %s", TMP, p[0], base);
    snprintf(args[1], 4096, "--init %s --train %s %s", p[3], p[0], base);
    snprintf(args[2], 4096, "--init %s --train %s %s", p[4], p[0], base);
    snprintf(args[3], 4096, "--init %s --train %s %s", p[5], p[0], base);
    snprintf(args[4], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[1], base);
    snprintf(args[5], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[2], base);
    snprintf(args[6], 4096, "--init tests/ref/ref_model.bin --train %s --batch-size 2 --seq-len 32 --steps 2", p[0]);
    snprintf(args[7], 4096, "--init tests/ref/ref_model.bin --train %s --batch-size abc", p[0]);
    snprintf(args[8], 4096, "--init tests/ref/ref_model.bin --train %s --lr -5", p[0]);
    snprintf(args[9], 4096, "--init tests/ref/ref_model.bin --train %s --zero 7", p[0]);
    snprintf(args[10], 4096, "--init tests/ref/ref_model.bin --train %s --no-such-flag 1", p[0]);
    snprintf(args[11], 4096, "--init tests/ref/ref_model.bin --train %s/nothing_*.bin %s", TMP, base);
    snprintf(args[12], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[6], base);
    snprintf(args[13], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[7], base);
    snprintf(args[14], 4096, "--init tests/ref/ref_model.bin --train %s %s --resume %s/nockpt", p[0], base, TMP);
    snprintf(args[15], 4096, "--model nonsense --train %s %s", p[0], base);
    BadCase cases[16] = {
        {"missing model file", args[0], "missing.bin"},
        {"truncated model file", args[1], "truncated_model.bin"},
        {"wrong model magic", args[2], "magic"},
        {"wrong model version", args[3], "version"},
        {"shard shorter than one batch", args[4], "short_000000.bin"},
        {"token id >= vocabulary size", args[5], "badtok_000000.bin"},
        {"sequence length above the context", args[6], "--seq-len"},
        {"non-numeric flag value", args[7], "--batch-size"},
        {"out-of-range flag value", args[8], "--lr"},
        {"out-of-range ZeRO stage", args[9], "--zero"},
        {"unknown flag", args[10], "--no-such-flag"},
        {"no shard matches the pattern", args[11], "nothing_"},
        {"wrong shard magic", args[12], "badmagic_000000.bin"},
        {"shard token count disagrees with its size", args[13], "badcount_000000.bin"},
        {"resume from a directory without a checkpoint", args[14], "nockpt"},
        {"unknown model name", args[15], "nonsense"},
    };
    for (int i = 0; i < 16; i++) {
        snprintf(cmd, sizeof(cmd), "./train_gpt %s --out %s/out_%d --log %s/log_%d.jsonl --checkpoint-every 1", cases[i].args, TMP, i, TMP, i);
        int rc = run_capture(cmd, out, sizeof(out));
        // exactly one clear error line naming the input, status 1 (not a crash), and no output files left behind
        int lines = 0;
        for (char* q = out; (q = strstr(q, "error:")) != NULL; q++) { lines++; }
        char path[1200];
        snprintf(path, sizeof(path), "%s/out_%d", TMP, i);
        int no_out = !file_exists(path);
        snprintf(path, sizeof(path), "%s/log_%d.jsonl", TMP, i);
        no_out = no_out && !file_exists(path);
        int ok = rc == 1 && lines == 1 && strstr(out, cases[i].expect) != NULL && no_out;
        char name[128];
        snprintf(name, sizeof(name), "bad input: %s", cases[i].name);
        char* nl = strchr(out, '\n');
        if (nl && ok) { *nl = '\0'; }
        report(ok, name, "exit %d, %d error line(s), outputs %s: %.240s", rc, lines, no_out ? "none" : "LEFT BEHIND", out);
    }
}

// ----------------------------------------------------------------------------
// Data parallel through mpirun (skipped when mpirun is missing). Tolerance for losses between layouts: 1e-5
// relative. The reduction is a sum over ranks of per-rank partial gradients, which in float32 can differ from the
// single process's accumulation order in the last bits; over 10 Adam steps such differences stay below 1e-6
// relative on this model (in practice the 2-rank sums come out bit-identical).

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x TRAIN_GPT_FAULT"

static int compare_losses(const char* name, const char* log_a, int skip_a, const char* log_b, int expect_n, double rtol) {
    char la[64][32], lb[64][32];
    int na = read_log_losses(log_a, la, 64), nb = read_log_losses(log_b, lb, 64);
    int ok = na - skip_a >= expect_n && nb == expect_n;
    double worst = 0;
    for (int i = 0; ok && i < expect_n; i++) {
        double a = atof(la[skip_a + i]), b = atof(lb[i]);
        double d = fabs(a - b) / fabs(a);
        if (!(d <= rtol)) { ok = 0; }
        if (d > worst) { worst = d; }
    }
    report(ok, name, "%d vs %d losses, max relative difference %.3g (tolerance %g)", na - skip_a, nb, worst, rtol);
    return ok;
}

// Compares every value of `key` in two logs (same count, each within rtol).
static void compare_values(const char* name, const char* key, const char* log_a, const char* log_b, int expect_n, double rtol) {
    char la[64][32], lb[64][32];
    int na = read_log_values(log_a, key, la, 64), nb = read_log_values(log_b, key, lb, 64);
    int ok = na == expect_n && nb == expect_n;
    double worst = 0;
    for (int i = 0; ok && i < expect_n; i++) {
        double a = atof(la[i]), b = atof(lb[i]);
        double d = fabs(a - b) / fabs(a);
        if (!(d <= rtol)) { ok = 0; }
        if (d > worst) { worst = d; }
    }
    report(ok, name, "%d vs %d values, max relative difference %.3g (tolerance %g)", na, nb, worst, rtol);
}

static void test_parallel(void) {
    char cmd[12288], out[65536];
    if (system("command -v mpirun > /dev/null 2>&1") != 0) { printf("SKIP parallel tests: mpirun not found\n"); return; }
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", TMP, TMP);
    if (system(cmd) != 0) { report(0, "parallel setup", "%s", ""); return; }
    char shard[1024];
    snprintf(shard, sizeof(shard), "%s/ptrain_000000.bin", TMP);
    write_shard(shard, 8000, 101, 11, 20240520, 1, 8000);
    char vshard[1024];
    snprintf(vshard, sizeof(vshard), "%s/pval_000000.bin", TMP);
    write_shard(vshard, 1000, 101, 12, 20240520, 1, 1000);
    // 96 tokens per step: 1 rank x 6 micro-steps, 2 ranks x 3, 3 ranks x 2 (B 2, T 8)
    char common[4096];
    snprintf(common, sizeof(common), "--init tests/ref/ref_model.bin --train %s --val %s --val-every 5 --val-steps 7 --batch-size 2 "
             "--seq-len 8 --total-batch-size 96 --lr 1e-3 --warmup 2 --weight-decay 0.1 --grad-clip 0.5 --threads 1", shard, vshard);
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        snprintf(cmd, sizeof(cmd), "./train_gpt %s --shuffle %d --steps 20 --log %s/p1_%d.jsonl", common, shuffle, TMP, shuffle);
        int rc = run_capture(cmd, out, sizeof(out));
        report(rc == 0, shuffle ? "single process, 20 steps (shuffled)" : "single process, 20 steps", "exit %d%s%.200s", rc, rc ? ": " : "", rc ? out : "");
    }
    char ref0[1024], ref1[1024], log[1024], name[256];
    snprintf(ref0, sizeof(ref0), "%s/p1_0.jsonl", TMP);
    snprintf(ref1, sizeof(ref1), "%s/p1_1.jsonl", TMP);
    // 2 ranks, each ZeRO stage, same tokens per step: same losses as one process, identical parameters on all ranks
    for (int z = 0; z <= 2; z++) {
        snprintf(log, sizeof(log), "%s/p2_z%d.jsonl", TMP, z);
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 2 ./train_gpt %s --steps 20 --zero %d --log %s", common, z, log);
        int rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "2 ranks --zero %d: parameters identical on all ranks", z);
        report(rc == 0 && strstr(out, "parameters after training: identical on all 2") != NULL, name, "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
        snprintf(name, sizeof(name), "2 ranks --zero %d: losses equal one process with gradient accumulation (20 steps)", z);
        compare_losses(name, ref0, 0, log, 20, 1e-5);
        snprintf(name, sizeof(name), "2 ranks --zero %d: validation losses (same batches whatever the ranks) equal one process", z);
        compare_values(name, "val_loss", ref0, log, 5, 1e-5);
    }
    // one process with sharded optimizer state (a group of one): stage 1 accumulates exactly as stage 0, so the
    // losses are bit-identical; stage 2 adds each micro-step's gradients to the running shard in another order
    // (per-thread LayerNorm partial sums, then the shard), so float32 rounding may differ in the last bits
    for (int z = 1; z <= 2; z++) {
        snprintf(log, sizeof(log), "%s/p1_z%d.jsonl", TMP, z);
        snprintf(cmd, sizeof(cmd), "./train_gpt %s --steps 20 --zero %d --log %s", common, z, log);
        int rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "1 process --zero %d: same losses as --zero 0", z);
        if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); continue; }
        compare_losses(name, ref0, 0, log, 20, z == 1 ? 0.0 : 1e-5);
    }
    // resume across world sizes: 2 ranks train with a checkpoint at step 10; 1 and 3 ranks continue from it to
    // step 20. The cases cover saving from every ZeRO stage and loading into every stage, in both data orders.
    const int cases[3][4] = { // shuffle, saving stage (2 ranks), loading stage on 1 rank, loading stage on 3 ranks
        {0, 1, 0, 2}, {1, 2, 1, 0}, {0, 0, 2, 1},
    };
    for (int k = 0; k < 3; k++) {
        int shuffle = cases[k][0];
        snprintf(cmd, sizeof(cmd), "rm -rf %s/pck && " MPIRUN " -np 2 ./train_gpt %s --shuffle %d --steps 20 --zero %d --checkpoint-every 10 --out %s/pck"
                 " && cd %s/pck && rm -f model_00000020.bin state_00000020.bin && echo 10 > latest", TMP, common, shuffle, cases[k][1], TMP, TMP);
        int rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "2 ranks (ZeRO-%d%s) write a checkpoint at step 10", cases[k][1], shuffle ? ", shuffled" : "");
        report(rc == 0, name, "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
        int sizes[2] = {1, 3};
        for (int j = 0; j < 2; j++) {
            snprintf(log, sizeof(log), "%s/pr_%d_%d.jsonl", TMP, sizes[j], k);
            snprintf(cmd, sizeof(cmd), MPIRUN " -np %d ./train_gpt %s --shuffle %d --steps 20 --zero %d --resume %s/pck --log %s",
                     sizes[j], common, shuffle, cases[k][2 + j], TMP, log);
            rc = run_capture(cmd, out, sizeof(out));
            snprintf(name, sizeof(name), "resume ZeRO-%d x 2 ranks -> ZeRO-%d x %d rank(s)%s: continues as the uninterrupted run (steps 11-20)",
                     cases[k][1], cases[k][2 + j], sizes[j], shuffle ? " (shuffled)" : "");
            if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); continue; }
            compare_losses(name, shuffle ? ref1 : ref0, 10, log, 10, 1e-5);
        }
    }
    // ranks that disagree on the configuration stop with a clear error naming the flag
    snprintf(cmd, sizeof(cmd), "timeout 60 mpirun --allow-run-as-root --oversubscribe -np 1 ./train_gpt %s --steps 2 --seed 1 : -np 1 ./train_gpt %s --steps 2 --seed 2", common, common);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc != 0 && rc != 124 && strstr(out, "configuration differs from rank 0: --seed=2 here, --seed=1 on rank 0") != NULL,
           "configuration mismatch between ranks is refused naming the flag", "exit %d: %.300s", rc, out);
    // a rank that dies, and a rank that hangs: the job ends with an error naming the rank, within the timeout
    snprintf(cmd, sizeof(cmd), "export TRAIN_GPT_FAULT=die:1:3; timeout 60 " MPIRUN " -np 2 ./train_gpt %s --steps 10 --comm-timeout 10", common);
    rc = run_capture(cmd, out, sizeof(out));
    char* tail = strstr(out, "injected fault");
    report(rc != 0 && rc != 124 && tail && strstr(tail, "rank 1 with PID") != NULL, "a killed rank ends the job with an error naming it",
           "exit %d: %.300s", rc, tail ? tail : out);
    snprintf(cmd, sizeof(cmd), "export TRAIN_GPT_FAULT=hang:1:3; timeout 60 " MPIRUN " -np 2 ./train_gpt %s --steps 10 --comm-timeout 5", common);
    rc = run_capture(cmd, out, sizeof(out));
    tail = strstr(out, "injected fault");
    report(rc != 0 && rc != 124 && tail && strstr(tail, "did not complete within 5 s") != NULL && strstr(tail, "rank(s) 1") != NULL,
           "a hung rank ends the job at the collective timeout naming it", "exit %d: %.400s", rc, tail ? tail : out);
}

// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
    ParallelContext pc;
    parallel_init(&pc, &argc, &argv);
    parallel_set_layout(&pc, 1, 1, 60.0);
    const char* only = NULL;
    const char* model_path = NULL;
    const char* state_path = NULL;
    const char* ref_dir = "tests/ref";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--only") == 0) { only = argv[i + 1]; }
        else if (strcmp(argv[i], "--model") == 0) { model_path = argv[i + 1]; }
        else if (strcmp(argv[i], "--state") == 0) { state_path = argv[i + 1]; }
        else if (strcmp(argv[i], "--ref-dir") == 0) { ref_dir = argv[i + 1]; }
        else if (strcmp(argv[i], "--traj-lr") == 0) { g_traj_lr = (float)atof(argv[i + 1]); }
        else { fatal("test_gpt: unknown flag '%s' (--only NAME, --model M.bin --state S.bin, --ref-dir DIR, --traj-lr LR)", argv[i]); }
    }
    if (model_path || state_path) {
        if (!model_path || !state_path) { fatal("test_gpt: --model and --state go together"); }
        check_reference(model_path, state_path, &pc, 1e-4);
    } else {
        if (name_selected(only, "ops")) {
            test_matmul();
            test_layernorm();
            test_fast_math();
            test_gelu();
            test_attention();
            test_encoder();
            test_classifier();
            test_adamw();
        }
        char mp[1024], sp[1024];
        snprintf(mp, sizeof(mp), "%s/ref_model.bin", ref_dir);
        snprintf(sp, sizeof(sp), "%s/ref_state.bin", ref_dir);
        if (name_selected(only, "reference")) {
            check_reference(mp, sp, &pc, 1e-5);
            check_trajectory(ref_dir, &pc);
            test_model_files(ref_dir, &pc);
        }
        if (name_selected(only, "checkpoint")) { test_checkpoint_resume(); }
        if (name_selected(only, "badinput")) { test_bad_input(); }
        if (name_selected(only, "parallel")) { test_parallel(); }
    }
    int status = test_summary();
    parallel_finalize(&pc);
    return status;
}
