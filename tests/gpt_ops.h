/*
tests/gpt_ops.h: every op's forward and backward against naive double references, gradients by central finite
differences; AdamW against its closed form (test_gpt --only small-ops). Split out of test_gpt.c by topic and included
by it where this code stood: it uses the suite's helpers above the include (check_close, check_close_f, rand_d,
fill_rand, to_float, report, g_ctx) and the trainer's code (train_gpt.c); not a standalone header.
*/
#ifndef GPT_OPS_H
#define GPT_OPS_H

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
    matmul_forward(&g_ctx, out, fi, fw, fb, c.BT, c.C, c.OC);
    matmul_ref(&c, ref);
    check_close("matmul_forward", out, ref, no, 1e-5, 1e-5);
    // backward; dw and db start non-zero to check that they accumulate
    float* dinp = (float*)mallocCheck(ni * 4);
    float* dw = (float*)mallocCheck(nw * 4);
    float* db = (float*)mallocCheck(c.OC * 4);
    for (size_t i = 0; i < nw; i++) { dw[i] = 0.25f; }
    for (int i = 0; i < c.OC; i++) { db[i] = -0.5f; }
    matmul_backward(&g_ctx, dinp, dw, db, fR, fi, fw, c.BT, c.C, c.OC, 1);
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
    matmul_backward(&g_ctx, dinp, dw, db, fR, fi, fw, c.BT, c.C, c.OC, 0);
    fd_grad(matmul_loss, &c, c.w, nw, g);
    check_close("matmul_backward dw overwrites (finite differences)", dw, g, nw, FD_ATOL, FD_RTOL);
    fd_grad(matmul_loss, &c, c.b, c.OC, g);
    check_close("matmul_backward dbias overwrites (finite differences)", db, g, c.OC, FD_ATOL, FD_RTOL);
    free(c.inp); free(c.w); free(c.b); free(c.R); free(fi); free(fw); free(fb); free(fR); free(out); free(ref);
    free(dinp); free(dw); free(db); free(g);
}

// --- layernorm (and the fused residual + layernorm forward)
typedef struct { int BT, C; double *inp, *w, *b, *R; } LnCtx;
// A row's mean and 1 / sqrt(variance + 1e-5), in double.
static void ln_stats(const double* x, int C, double* mean, double* rstd) {
    double m = 0, v = 0;
    for (int i = 0; i < C; i++) { m += x[i]; }
    m /= C;
    for (int i = 0; i < C; i++) { v += (x[i] - m) * (x[i] - m); }
    *mean = m;
    *rstd = 1.0 / sqrt(v / C + 1e-5);
}
static void ln_ref(const LnCtx* c, double* out) {
    for (int r = 0; r < c->BT; r++) {
        const double* x = c->inp + r * c->C;
        double m, s;
        ln_stats(x, c->C, &m, &s);
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

// "name, width n": the test names of a test run at several widths (C, or the padded vocabulary)
static const char* at_width(char* buf, const char* name, int n) {
    snprintf(buf, 128, "%s, width %d", name, n);
    return buf;
}

// C 16: whole 16-byte packs on a GPU; C 13: one element at a time there; 264 and 1032: the backward's two kernels
static void test_layernorm(int C) {
    LnCtx c = {6, C, NULL, NULL, NULL, NULL};
    char nm[128];
    size_t n = (size_t)c.BT * c.C;
    c.inp = (double*)mallocCheck(n * 8); c.w = (double*)mallocCheck(c.C * 8); c.b = (double*)mallocCheck(c.C * 8); c.R = (double*)mallocCheck(n * 8);
    fill_rand(c.inp, n, 2.0); fill_rand(c.R, n, 1.0);
    for (int i = 0; i < c.C; i++) { c.w[i] = 1.0 + 0.3 * rand_d(); c.b[i] = 0.3 * rand_d(); }
    float *fi = to_float(c.inp, n), *fw = to_float(c.w, c.C), *fb = to_float(c.b, c.C), *fR = to_float(c.R, n);
    float* out = (float*)mallocCheck(n * 4);
    float mean[6], rstd[6];
    double* ref = (double*)mallocCheck(n * 8);
    layernorm_forward(&g_ctx, out, mean, rstd, fi, fw, fb, c.BT, c.C);
    ln_ref(&c, ref);
    check_close(at_width(nm, "layernorm_forward", C), out, ref, n, 1e-5, 1e-5);
    // fused residual + bias + layernorm, in place (res_out aliases res_in)
    float* res = (float*)mallocCheck(n * 4);
    float* delta = (float*)mallocCheck(n * 4);
    float* bias = (float*)mallocCheck(c.C * 4);
    for (size_t i = 0; i < n; i++) { res[i] = fi[i] * 0.5f; delta[i] = fi[i] * 0.25f; }
    for (int i = 0; i < c.C; i++) { bias[i] = 0.25f * fi[i]; }
    double* sum = (double*)mallocCheck(n * 8);
    for (size_t i = 0; i < n; i++) { sum[i] = (double)res[i] + delta[i] + bias[i % c.C]; }
    double* keep = c.inp;
    c.inp = sum;
    ln_ref(&c, ref);
    c.inp = keep;
    float* out2 = (float*)mallocCheck(n * 4);
    residual_layernorm_forward(&g_ctx, res, out2, mean, rstd, res, delta, bias, fw, fb, c.BT, c.C);
    check_close(at_width(nm, "residual_layernorm_forward residual (in place)", C), res, sum, n, 1e-6, 1e-6);
    check_close(at_width(nm, "residual_layernorm_forward normalized", C), out2, ref, n, 1e-5, 1e-5);
    // backward: dinp accumulates into a non-zero buffer, dw/db accumulate
    layernorm_forward(&g_ctx, out, mean, rstd, fi, fw, fb, c.BT, c.C);
    float* dinp = (float*)mallocCheck(n * 4);
    float* dw = (float*)mallocCheck(c.C * 4);
    float* db = (float*)mallocCheck(c.C * 4);
    for (size_t i = 0; i < n; i++) { dinp[i] = 1.0f; }
    for (int i = 0; i < c.C; i++) { dw[i] = 0.5f; db[i] = -0.5f; }
    layernorm_backward(&g_ctx, dinp, dw, db, fR, fi, fw, mean, rstd, c.BT, c.C, 1);
    double* g = (double*)mallocCheck(n * 8);
    fd_grad(ln_loss, &c, c.inp, n, g);
    for (size_t i = 0; i < n; i++) { g[i] += 1.0; }
    check_close(at_width(nm, "layernorm_backward dinp accumulates (finite differences)", C), dinp, g, n, FD_ATOL, FD_RTOL);
    fd_grad(ln_loss, &c, c.w, c.C, g);
    for (int i = 0; i < c.C; i++) { g[i] += 0.5; }
    check_close(at_width(nm, "layernorm_backward dw accumulates (finite differences)", C), dw, g, c.C, FD_ATOL, FD_RTOL);
    fd_grad(ln_loss, &c, c.b, c.C, g);
    for (int i = 0; i < c.C; i++) { g[i] -= 0.5; }
    check_close(at_width(nm, "layernorm_backward db accumulates (finite differences)", C), db, g, c.C, FD_ATOL, FD_RTOL);
    for (int i = 0; i < c.C; i++) { dw[i] = NAN; db[i] = NAN; }
    layernorm_backward(&g_ctx, dinp, dw, db, fR, fi, fw, mean, rstd, c.BT, c.C, 0);
    fd_grad(ln_loss, &c, c.w, c.C, g);
    check_close(at_width(nm, "layernorm_backward dw overwrites (finite differences)", C), dw, g, c.C, FD_ATOL, FD_RTOL);
    fd_grad(ln_loss, &c, c.b, c.C, g);
    check_close(at_width(nm, "layernorm_backward db overwrites (finite differences)", C), db, g, c.C, FD_ATOL, FD_RTOL);
    free(c.inp); free(c.w); free(c.b); free(c.R); free(fi); free(fw); free(fb); free(fR); free(out); free(ref);
    free(res); free(delta); free(sum); free(out2); free(dinp); free(g); free(bias); free(dw); free(db);
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
    gelu_forward(&g_ctx, out, fx, c.n);
    for (size_t i = 0; i < c.n; i++) { ref[i] = gelu_ref(c.x[i]); }
    check_close("gelu_forward", out, ref, c.n, 1e-6, 1e-5);
    // in place: dinp aliases dout
    gelu_backward(&g_ctx, fR, fx, fR, c.n);
    fd_grad(gelu_loss, &c, c.x, c.n, ref);
    check_close("gelu_backward in place (finite differences)", fR, ref, c.n, FD_ATOL, FD_RTOL);
    free(c.x); free(c.R); free(fx); free(fR); free(out); free(ref);
}

// --- the MLP's matmuls fused with the GELU between them (matmul_forward_gelu, matmul_backward_gelu), on a shape a GPU
// fuses into cuBLASLt's epilogues (C and OC multiples of 8) and on one it computes unfused. The backward's loss is
// sum((GELU(pre) @ w^T + b) * R): dinp is its gradient at pre, through the GELU.
typedef struct { int BT, C, OC; double *pre, *w, *b, *R; } MlpCtx;
static double mlp_loss(void* p) {
    MlpCtx* c = (MlpCtx*)p;
    size_t n = (size_t)c->BT * c->C;
    double* x = (double*)mallocCheck(n * 8);
    for (size_t i = 0; i < n; i++) { x[i] = gelu_ref(c->pre[i]); }
    MatmulCtx mc = {c->BT, c->C, c->OC, x, c->w, c->b, c->R};
    double L = matmul_loss(&mc);
    free(x);
    return L;
}

static void test_matmul_gelu(void) {
    const int shapes[2][3] = {{5, 7, 9}, {6, 16, 24}};
    for (int s = 0; s < 2; s++) {
        int BT = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        char nm[160];
        // forward: pre = inp @ w^T + b, out = GELU(pre)
        MatmulCtx mc = {BT, C, OC, NULL, NULL, NULL, NULL};
        size_t ni = (size_t)BT * C, nw = (size_t)OC * C, no = (size_t)BT * OC;
        mc.inp = (double*)mallocCheck(ni * 8); mc.w = (double*)mallocCheck(nw * 8); mc.b = (double*)mallocCheck(OC * 8);
        fill_rand(mc.inp, ni, 1.0); fill_rand(mc.w, nw, 0.5); fill_rand(mc.b, OC, 0.5);
        float *fi = to_float(mc.inp, ni), *fw = to_float(mc.w, nw), *fb = to_float(mc.b, OC);
        float* pre = (float*)mallocCheck(no * 4);
        float* out = (float*)mallocCheck(no * 4);
        double* ref = (double*)mallocCheck(no * 8);
        for (size_t i = 0; i < no; i++) { pre[i] = NAN; out[i] = NAN; } // every element must be written
        matmul_forward_gelu(&g_ctx, pre, out, fi, fw, fb, BT, C, OC);
        matmul_ref(&mc, ref);
        snprintf(nm, sizeof(nm), "matmul_forward_gelu %d x %d -> %d: pre", BT, C, OC);
        check_close(nm, pre, ref, no, 1e-5, 1e-5);
        for (size_t i = 0; i < no; i++) { ref[i] = gelu_ref(ref[i]); }
        snprintf(nm, sizeof(nm), "matmul_forward_gelu %d x %d -> %d: GELU(pre)", BT, C, OC);
        check_close(nm, out, ref, no, 1e-5, 1e-5);
        // backward of the next layer, whose input is GELU(pre) (BT, C): dinp through the GELU, dw, dbias
        MlpCtx c = {BT, C, OC, NULL, mc.w, mc.b, NULL};
        c.pre = (double*)mallocCheck(ni * 8); c.R = (double*)mallocCheck(no * 8);
        fill_rand(c.pre, ni, 3.0); fill_rand(c.R, no, 1.0);
        double* x = (double*)mallocCheck(ni * 8);
        for (size_t i = 0; i < ni; i++) { x[i] = gelu_ref(c.pre[i]); }
        float *fpre = to_float(c.pre, ni), *fx = to_float(x, ni), *fR = to_float(c.R, no);
        float* dinp = (float*)mallocCheck(ni * 4);
        float* dw = (float*)mallocCheck(nw * 4);
        float* db = (float*)mallocCheck(OC * 4);
        for (size_t i = 0; i < ni; i++) { dinp[i] = NAN; }
        for (size_t i = 0; i < nw; i++) { dw[i] = 0.25f; }
        for (int i = 0; i < OC; i++) { db[i] = -0.5f; }
        matmul_backward_gelu(&g_ctx, dinp, dw, db, fR, fx, fw, fpre, BT, C, OC, 1);
        double* g = (double*)mallocCheck((nw > ni ? nw : ni) * 8);
        fd_grad(mlp_loss, &c, c.pre, ni, g);
        snprintf(nm, sizeof(nm), "matmul_backward_gelu %d x %d -> %d: dinp through the GELU (finite differences)", BT, C, OC);
        check_close(nm, dinp, g, ni, FD_ATOL, FD_RTOL);
        fd_grad(mlp_loss, &c, c.w, nw, g);
        for (size_t i = 0; i < nw; i++) { g[i] += 0.25; }
        snprintf(nm, sizeof(nm), "matmul_backward_gelu %d x %d -> %d: dw accumulates (finite differences)", BT, C, OC);
        check_close(nm, dw, g, nw, FD_ATOL, FD_RTOL);
        fd_grad(mlp_loss, &c, c.b, OC, g);
        for (int i = 0; i < OC; i++) { g[i] -= 0.5; }
        snprintf(nm, sizeof(nm), "matmul_backward_gelu %d x %d -> %d: dbias accumulates (finite differences)", BT, C, OC);
        check_close(nm, db, g, OC, FD_ATOL, FD_RTOL);
        free(mc.inp); free(mc.w); free(mc.b); free(fi); free(fw); free(fb); free(pre); free(out); free(ref);
        free(c.pre); free(c.R); free(x); free(fpre); free(fx); free(fR); free(dinp); free(dw); free(db); free(g);
    }
}

// --- the vectorizable exp and tanh against libm in double (the CPU backend's private helpers)
static void test_fast_math(void) {
#ifdef KERNELS_CUDA
    printf("SKIP the CPU backend's exp, tanh and FTZ mode (CUDA build)\n");
    return;
#else
    double worst_exp = 0, worst_tanh = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * i / 200000.0f;
        double e = exp((double)x);
        double rel = fabs(kernels__expf(x) - e) / e;
        if (!(rel <= worst_exp)) { worst_exp = rel; } // NaN propagates into worst
        float u = -12.0f + 24.0f * i / 200000.0f;
        double ta = fabs(kernels__tanhf(u) - tanh((double)u));
        if (!(ta <= worst_tanh)) { worst_tanh = ta; }
    }
    report(worst_exp <= 4e-7, "kernels__expf relative error on [-87, 88]", "max %.3g (bound 4e-7)", worst_exp);
    report(worst_tanh <= 3e-7, "kernels__tanhf absolute error on [-12, 12]", "max %.3g (bound 3e-7)", worst_tanh);
    report(kernels__expf(-1000.0f) == 0.0f && kernels__expf(-87.5f) == 0.0f && kernels__expf(-INFINITY) == 0.0f && isfinite(kernels__expf(1000.0f)) &&
           kernels__expf(INFINITY) == kernels__expf(88.0f) && kernels__tanhf(-50.0f) == -1.0f && kernels__tanhf(50.0f) == 1.0f,
           "kernels__expf / kernels__tanhf saturate: exactly 0 below -87 (no subnormals), finite above 88", "%s", "");
    report(isnan(kernels__expf(NAN)) && isnan(kernels__tanhf(NAN)), "kernels__expf / kernels__tanhf propagate NaN", "%s", "");
    // FTZ/DAZ: after kernels_init_fp_mode a subnormal product is flushed to zero on every thread
    kernels_init_fp_mode();
    volatile float tiny = 1e-30f;
    int flushed = 1;
    #pragma omp parallel reduction(&& : flushed)
    { volatile float x = tiny * 1e-10f; flushed = flushed && x == 0.0f; }
    report(flushed, "kernels_init_fp_mode flushes subnormals to zero on every thread", "%s", "");
#endif
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
// The attention backward in double for the loss sum(O * R) at GPT-2's shapes, where finite differences would take
// too long: g (B, T, 3C) = d loss / d qkv, given O (B, T, C), the forward's output as the kernels store it (rounded:
// D_i = R_i . O_i comes from it, as in the kernels). lse (B, NH, T) gets the log-sum-exp the kernels take, and
// bound, per element, what the kernels' own roundings may move it: u |g| (the stored output) plus u times the sum of
// the magnitudes of the terms whose 16-bit factor they round (dS before dQ = scale dS K and dK = scale dS^T Q; P
// before dV = P^T dO). fp32 sums over T terms stay within T 2^-24 of those magnitudes: a hundredth of u at T 1024.
static void att_backward_ref(const AttCtx* c, const double* O, double u, double* g, double* bound, float* lse) {
    int hs = c->C / c->NH, C3 = 3 * c->C, T = c->T;
    double scale = 1.0 / sqrt((double)hs);
    size_t n = (size_t)c->B * T * C3;
    double* mag = (double*)mallocCheck(n * 8);
    double* p = (double*)mallocCheck(sizeof(double) * T);
    double* ds = (double*)mallocCheck(sizeof(double) * T);
    for (size_t e = 0; e < n; e++) { g[e] = 0.0; mag[e] = 0.0; }
    for (int b = 0; b < c->B; b++) for (int h = 0; h < c->NH; h++) for (int i = 0; i < T; i++) {
        size_t ri = (size_t)(b * T + i);
        const double* q = c->qkv + ri * C3 + h * hs;
        const double* dO = c->R + ri * c->C + h * hs;
        const double* o = O + ri * c->C + h * hs;
        double m = -INFINITY, sum = 0.0, D = 0.0;
        for (int j = 0; j <= i; j++) {
            const double* k = c->qkv + (size_t)(b * T + j) * C3 + c->C + h * hs;
            double s = 0;
            for (int d = 0; d < hs; d++) { s += q[d] * k[d]; }
            p[j] = s * scale;
            if (p[j] > m) { m = p[j]; }
        }
        for (int j = 0; j <= i; j++) { sum += exp(p[j] - m); }
        double L = m + log(sum);
        lse[((size_t)b * c->NH + h) * T + i] = (float)L;
        for (int d = 0; d < hs; d++) { D += dO[d] * o[d]; }
        for (int j = 0; j <= i; j++) {
            const double* v = c->qkv + (size_t)(b * T + j) * C3 + 2 * c->C + h * hs;
            double dp = 0;
            for (int d = 0; d < hs; d++) { dp += dO[d] * v[d]; }
            p[j] = exp(p[j] - L);
            ds[j] = p[j] * (dp - D);
        }
        double* gq = g + ri * C3 + h * hs;
        double* mq = mag + ri * C3 + h * hs;
        for (int j = 0; j <= i; j++) {
            size_t rj = (size_t)(b * T + j) * C3 + h * hs;
            const double* k = c->qkv + rj + c->C;
            double *gk = g + rj + c->C, *gv = g + rj + 2 * c->C, *mk = mag + rj + c->C, *mv = mag + rj + 2 * c->C;
            for (int d = 0; d < hs; d++) {
                double tq = scale * ds[j] * k[d], tk = scale * ds[j] * q[d], tv = p[j] * dO[d];
                gq[d] += tq; mq[d] += fabs(tq);
                gk[d] += tk; mk[d] += fabs(tk);
                gv[d] += tv; mv[d] += fabs(tv);
            }
        }
    }
    for (size_t e = 0; e < n; e++) { bound[e] = u * (fabs(g[e]) + mag[e]); }
    free(mag); free(p); free(ds);
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

// attention_forward_rows (sampling with a KV cache): the queries [q_lo, T) of qkv against the reference's rows
// (ref: att_ref's (B, T, C)) to atol + rtol |ref|; the output NaN-filled first, so an unwritten element fails. The
// queries come as the new rows' qkv (B, T - q_lo, 3C) with their keys and values NaN, and the keys and values as a
// cache of ld = T + 3 rows of 2C per sequence, the 3 past T NaN: an op that reads a query's key or value from the new
// rows instead of the cache, reads past T, or takes the sequences T rows apart, fails. Two starts: the last row alone
// (a decoding step) and the second half (a prompt after a cached one).
static void check_attention_rows(const KernelCtx* ctx, const char* what, const float* fq, const double* ref, int B, int T,
                                 int C, int NH, double atol, double rtol) {
    int ld = T + 3, starts[2] = {T - 1, T / 2};
    float* kv = (float*)mallocCheck(sizeof(float) * (size_t)B * ld * 2 * C);
    for (size_t i = 0; i < (size_t)B * ld * 2 * C; i++) { kv[i] = NAN; }
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) { memcpy(kv + ((size_t)b * ld + t) * 2 * C, fq + ((size_t)b * T + t) * 3 * C + C, sizeof(float) * 2 * (size_t)C); }
    }
    for (int k = 0; k < 2; k++) {
        int q_lo = starts[k], n = T - q_lo;
        size_t no = (size_t)B * n * C;
        float* out = (float*)mallocCheck(no * 4);
        float* q = (float*)mallocCheck(no * 3 * 4);
        double* want = (double*)mallocCheck(no * 8);
        for (size_t i = 0; i < no; i++) { out[i] = NAN; }
        for (size_t i = 0; i < 3 * no; i++) { q[i] = NAN; }
        for (int b = 0; b < B; b++) {
            memcpy(want + (size_t)b * n * C, ref + ((size_t)b * T + q_lo) * C, sizeof(double) * (size_t)n * C);
            for (int r = 0; r < n; r++) { memcpy(q + ((size_t)b * n + r) * 3 * C, fq + ((size_t)b * T + q_lo + r) * 3 * C, sizeof(float) * (size_t)C); }
        }
        attention_forward_rows(ctx, out, q, kv, B, T, ld, q_lo, C, NH);
        char nm[200];
        snprintf(nm, sizeof(nm), "attention_forward_rows %s: queries [%d, %d) of B %d sequences, keys and values cached %d rows apart, %d heads of %d",
                 what, q_lo, T, B, ld, NH, C / NH);
        check_close(nm, out, want, no, atol, rtol);
        free(out); free(q); free(want);
    }
    free(kv);
}

// attention_forward_rows over longer rows than the op tests' T 5 and 32: a CUDA build splits a decoding step's keys
// into runs of 64 (its flash-decoding kernels, kernels_attention.cuh), so T 150 is three splits, the last partial,
// merged, and the second start (75 queries) one split a row; heads of 64 (whole 16-byte packs in every type) and of
// 48 (bf16: 6 packs, lanes in groups of 8 with 2 idle; fp32: 12 packs, groups of 16). Against the double reference
// as check_attention_rows: atol and rtol from the caller (one rounding of the output).
static void test_attention_rows_long(const KernelCtx* ctx, const char* what, int dt, double atol, double rtol) {
    const int shapes[2][4] = {{2, 150, 128, 2}, {1, 70, 96, 2}}; // B, T, C, NH
    for (int k = 0; k < 2; k++) {
        AttCtx c = {shapes[k][0], shapes[k][1], shapes[k][2], shapes[k][3], NULL, NULL};
        size_t nq = (size_t)c.B * c.T * 3 * c.C;
        c.qkv = (double*)mallocCheck(nq * 8);
        fill_rand(c.qkv, nq, 1.5);
        for (size_t i = 0; i < nq && dt != DTYPE_FP32; i++) { c.qkv[i] = round_dtype((float)c.qkv[i], dt); }
        float* fq = to_float(c.qkv, nq);
        double* ref = (double*)mallocCheck((size_t)c.B * c.T * c.C * 8);
        att_ref(&c, ref);
        check_attention_rows(ctx, what, fq, ref, c.B, c.T, c.C, c.NH, atol, rtol);
        free(c.qkv); free(fq); free(ref);
    }
}

// kv_cache_write: the keys and values of qkv rows into a cache of B 3 sequences of ld 7 rows, from one sequence (a
// shared prompt) and from each its own (a decoding step); every other row of the cache keeps its value, and the
// queries stay out. Values are small integers: exact in every storage type, so the copy must give them bit for bit.
static void test_kv_cache_write(const KernelCtx* ctx) {
    enum { B = 3, LD = 7, C = 2 };
    float cache[B * LD * 2 * C], want[B * LD * 2 * C], rows[B * 2 * 3 * C];
    const int cases[2][3] = {{1, 2, 1}, {B, 1, 5}}; // S, n, pos
    for (int k = 0; k < 2; k++) {
        int S = cases[k][0], n = cases[k][1], pos = cases[k][2];
        for (int i = 0; i < B * LD * 2 * C; i++) { cache[i] = want[i] = (float)(i % 97) - 40.0f; }
        for (int i = 0; i < S * n * 3 * C; i++) { rows[i] = (float)(i % 13) + 100.0f; }
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < n; t++) {
                for (int c = 0; c < 2 * C; c++) { want[((size_t)b * LD + pos + t) * 2 * C + c] = rows[((size_t)(b % S) * n + t) * 3 * C + C + c]; }
            }
        }
        kv_cache_write(ctx, cache, rows, S, B, n, pos, LD, C);
        int bad = (int)bits_differ(cache, want, (size_t)B * LD * 2 * C);
        char nm[200];
        snprintf(nm, sizeof(nm), "kv_cache_write: the keys and values of %d row%s at position %d into %d sequences from %s, the rest untouched", n,
                 n == 1 ? "" : "s", pos, B, S == 1 ? "one (a shared prompt)" : "each its own");
        report(bad == 0, nm, "%d of %d values wrong", bad, B * LD * 2 * C);
    }
}

static void test_attention(void) {
    AttCtx c = {2, 5, 8, 2, NULL, NULL};
    size_t nq = (size_t)c.B * c.T * 3 * c.C, no = (size_t)c.B * c.T * c.C;
    c.qkv = (double*)mallocCheck(nq * 8); c.R = (double*)mallocCheck(no * 8);
    fill_rand(c.qkv, nq, 1.5); fill_rand(c.R, no, 1.0);
    float *fq = to_float(c.qkv, nq), *fR = to_float(c.R, no);
    float* out = (float*)mallocCheck(no * 4);
    float* lse = (float*)mallocCheck(sizeof(float) * c.B * c.NH * c.T);
    double* ref = (double*)mallocCheck(nq * 8);
    attention_forward(&g_ctx, out, lse, fq, c.B, c.T, c.C, c.NH);
    att_ref(&c, ref);
    check_close("attention_forward (causal)", out, ref, no, 1e-5, 1e-5);
    check_attention_rows(&g_ctx, "(fp32)", fq, ref, c.B, c.T, c.C, c.NH, 1e-5, 1e-5);
    test_attention_rows_long(&g_ctx, "(fp32)", DTYPE_FP32, 1e-5, 1e-5);
    test_kv_cache_write(&g_ctx);
    float* dqkv = (float*)mallocCheck(nq * 4);
    for (size_t i = 0; i < nq; i++) { dqkv[i] = NAN; } // must be fully overwritten
    attention_backward(&g_ctx, dqkv, fR, fq, out, lse, c.B, c.T, c.C, c.NH);
    fd_grad(att_loss, &c, c.qkv, nq, ref);
    check_close("attention_backward dqkv (finite differences)", dqkv, ref, nq, FD_ATOL, FD_RTOL);
    free(c.qkv); free(c.R); free(fq); free(fR); free(out); free(lse); free(ref); free(dqkv);
}

// --- encoder
// C 4: whole 16-byte packs of fp32 on a GPU; C 6: one element at a time there
static void test_encoder(int C) {
    enum { B = 2, T = 3, V = 5, MAXC = 8 };
    int32_t tok[6] = {1, 3, 1, 4, 1, 0}; // repeated token 1: gradients must add up, not race
    float wte[V * MAXC], wpe[T * MAXC], out[B * T * MAXC], dout[B * T * MAXC], dwte[V * MAXC] = {0}, dwpe[T * MAXC] = {0};
    double ref[B * T * MAXC], gwte[V * MAXC] = {0}, gwpe[T * MAXC] = {0};
    char nm[128];
    for (int i = 0; i < V * C; i++) { wte[i] = (float)rand_d(); }
    for (int i = 0; i < T * C; i++) { wpe[i] = (float)rand_d(); }
    for (int i = 0; i < B * T * C; i++) { dout[i] = (float)rand_d(); out[i] = NAN; } // out: every element must be written
    ENCODER_FORWARD(&g_ctx, out, tok, wte, wpe, B, T, C, V, T);
    for (int b = 0; b < B; b++) for (int t = 0; t < T; t++) for (int i = 0; i < C; i++) {
        ref[(b * T + t) * C + i] = (double)wte[tok[b * T + t] * C + i] + wpe[t * C + i];
        gwte[tok[b * T + t] * C + i] += dout[(b * T + t) * C + i];
        gwpe[t * C + i] += dout[(b * T + t) * C + i];
    }
    check_close(at_width(nm, "encoder_forward", C), out, ref, (size_t)B * T * C, 1e-6, 1e-6);
    ENCODER_BACKWARD(&g_ctx, dwte, dwpe, dout, tok, B, T, C, V, T);
    check_close(at_width(nm, "encoder_backward dwte (repeated tokens)", C), dwte, gwte, (size_t)V * C, 1e-6, 1e-6);
    check_close(at_width(nm, "encoder_backward dwpe", C), dwpe, gwpe, (size_t)T * C, 1e-6, 1e-6);
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

// Vp 16: whole 16-byte packs of fp32 on a GPU; Vp 13 (a padding that is not a multiple of 4): one element at a time
static void test_classifier(int Vp) {
    int32_t tgt[7] = {0, 10, 3, -1, 10, 7, 1};
    ClsCtx c = {7, 6, 11, Vp, NULL, NULL, tgt, 1.0 / 6.0};
    char nm[128];
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
    classifier_forward_backward(&g_ctx, losses, dx, dwte, chunk, 3, fx, fw, tgt, (float)c.scale, c.BT, c.C, c.V, c.Vp, 0);
    double L = 0;
    for (int r = 0; r < c.BT; r++) { L += losses[r] * c.scale; }
    double Lref = cls_loss(&c);
    report(fabs(L - Lref) <= 1e-5 * (1 + fabs(Lref)), at_width(nm, "classifier loss", Vp), "got %.9g, expected %.9g", L, Lref);
    report(losses[3] == 0.0f, at_width(nm, "classifier masked target has zero loss", Vp), "%s", "");
    double* g = (double*)mallocCheck(nw * 8);
    fd_grad(cls_loss, &c, c.x, nx, g);
    check_close(at_width(nm, "classifier dx (finite differences)", Vp), dx, g, nx, FD_ATOL, FD_RTOL);
    fd_grad(cls_loss, &c, c.wte, nw, g);
    for (size_t i = (size_t)c.V * c.C; i < nw; i++) { g[i] = 0.0; } // padded rows get no gradient
    check_close(at_width(nm, "classifier dwte overwrites, padded rows zero (finite differences)", Vp), dwte, g, nw, FD_ATOL, FD_RTOL);
    // acc = 1 adds a second identical contribution
    classifier_forward_backward(&g_ctx, losses, dx, dwte, chunk, 3, fx, fw, tgt, (float)c.scale, c.BT, c.C, c.V, c.Vp, 1);
    for (size_t i = 0; i < nw; i++) { g[i] *= 2.0; }
    check_close(at_width(nm, "classifier dwte accumulates (finite differences)", Vp), dwte, g, nw, 2 * FD_ATOL, FD_RTOL);
    // evaluation path gives the same losses without touching gradients
    float losses2[7];
    classifier_forward_backward(&g_ctx, losses2, NULL, NULL, chunk, 2, fx, fw, tgt, 0.0f, c.BT, c.C, c.V, c.Vp, 0);
    check_close_f(at_width(nm, "classifier eval losses equal train losses", Vp), losses2, losses, 7, 1e-6, 1e-6);
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
        AdamWSegment seg = {0, N, 1};
        AdamWHyper hp = {lr, b1, b2, eps, wd, gs, t, 0};
        adamw_update(&g_ctx, p, NULL, g, m, v, 0, N, &seg, 1, &hp);
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

#endif // GPT_OPS_H
