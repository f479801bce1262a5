/*
test_gpt.c: tests of the trainer, built from the real train_gpt.c (included with TRAIN_GPT_NO_MAIN) and the real
kernel header, never from pasted copies.

    make test_gpt && ./test_gpt                     all groups
    ./test_gpt --model M.bin --state S.bin          check any llm.c model + debug-state pair (logits, loss, grads)
    ./test_gpt --only NAME                          run the groups whose name contains NAME (small-ops, gpt2-ops,
                                                    reference, units; `--only ops` runs both op groups)
    ./test_gpt --only reference --ref-dir DIR       the reference checks on another make_reference.py output
                                                    (--traj-lr LR if its trajectory used another learning rate)

Groups: finite-difference gradient checks of every op (double precision); the committed PyTorch reference (logits,
loss, every gradient, a 10-step AdamW trajectory, a 12-step trajectory with warmup, cosine decay and strong weight
decay compared step by step and parameter by parameter); units of the training loop against independent closed
forms (learning-rate schedule, weight-decay flags, a decay-only AdamW step, evaluation, sampling). Tests through
the real binary (resume, bad input, data parallel) are in tests/test_runs.c.
Every comparison is atol + rtol * |ref|, NaN/Inf checked first, written as !(diff <= tol); every failure is
recorded; the last line is "N passed, M failed" and the exit status is non-zero if any failed.
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary
#include "tests/kv_rows.h" // defines: kv_forward_rows

// report(): the shared check harness of tests/testing.h
#define report check

static KernelCtx g_ctx; // the kernel tests' execution context (fp32 storage)
#include "tests/stage_ops.h" // CUDA build: the op tests' host arrays staged through device buffers

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
        int bad = 0;
        for (int i = 0; i < B * LD * 2 * C; i++) { bad += memcmp(&cache[i], &want[i], sizeof(float)) != 0; }
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

// --- the forward ops in bf16 and fp16 against the double references: inputs are 16-bit values (as a GPU reads
// them), the output must be a 16-bit value (stored once) within one rounding of the exact result: |got - ref| <=
// u |ref| + the fp32 tolerance, u = 2^-8 (bf16) or 2^-11 (fp16) the unit roundoff. LayerNorm's output is held to
// 2u: its statistics are computed from the stored (rounded) inputs, which the double reference also uses.
static void round_inputs(double* x, size_t n, int dt) { for (size_t i = 0; i < n; i++) { x[i] = round_dtype((float)x[i], dt); } }
static double unit_roundoff(int dt) { return dt == DTYPE_BF16 ? 1.0 / 256 : 1.0 / 2048; } // u of a 16-bit type

// Attention implementation impl for the op tests: 0 native, 1 cuDNN through --attention auto (a shape cuDNN has no
// plan for falls back to native, counted, instead of ending the test binary), 2 the same with --deterministic 0
// (cuDNN's backward accumulating dQ with atomics). 0 when this backend has it.
// Implementation 2 runs only with TEST_GPT_NONDET_ATTENTION=1: scripts/gpu_check.sh runs it as a stage of its own, so
// that cuDNN's newer graph, should it crash on a GPU (a failed call ends the binary), takes no other op test with it.
static int attention_impls(void) {
    const char* e = getenv("TEST_GPT_NONDET_ATTENTION");
    return e && strcmp(e, "1") == 0 ? 3 : 2;
}
static const char* attention_impl_name(int impl) { return impl == 0 ? "native" : impl == 1 ? "cudnn" : "cudnn, --deterministic 0"; }
static int attention_use(KernelCtx* ctx, int impl) {
    if (kernels_set_attention(ctx, impl == 0 ? "native" : "cudnn") != 0 || kernels_set_deterministic(ctx, impl != 2) != 0) {
        kernels_set_deterministic(ctx, 1);
        return -1;
    }
    if (impl >= 1) { kernels_set_attention(ctx, "auto"); }
    return 0;
}
// Back to the defaults after a test's loop over the implementations.
static void attention_reset(KernelCtx* ctx) {
    kernels_set_attention(ctx, "auto");
    kernels_set_deterministic(ctx, 1);
}

static void check_stored(const char* name, const float* got, const double* ref, size_t n, int dt, double atol, double units) {
    size_t unrounded = 0;
    for (size_t i = 0; i < n; i++) { unrounded += round_dtype(got[i], dt) != got[i]; }
    double u = unit_roundoff(dt);
    char nm[160];
    snprintf(nm, sizeof(nm), "%s (%s): every output a %s value", name, dtype_name(dt), dtype_name(dt));
    report(unrounded == 0, nm, "%zu of %zu not representable", unrounded, n);
    snprintf(nm, sizeof(nm), "%s (%s): within %g u of the double reference", name, dtype_name(dt), units);
    check_close(nm, got, ref, n, atol, units * u);
}

// The matmul with bias in the storage type dt, on 16-bit inputs (w and b scaled by wscale, bscale), against the
// double reference: check_stored's two checks, under `name`.
static void check_matmul_stored(const KernelCtx* ctx, int dt, const char* name, int BT, int C, int OC, double wscale,
                                double bscale, double atol) {
    MatmulCtx mc = {BT, C, OC, NULL, NULL, NULL, NULL};
    size_t ni = (size_t)mc.BT * mc.C, nw = (size_t)mc.OC * mc.C, no = (size_t)mc.BT * mc.OC;
    mc.inp = (double*)mallocCheck(ni * 8); mc.w = (double*)mallocCheck(nw * 8); mc.b = (double*)mallocCheck(mc.OC * 8);
    fill_rand(mc.inp, ni, 1.0); fill_rand(mc.w, nw, wscale); fill_rand(mc.b, mc.OC, bscale);
    round_inputs(mc.inp, ni, dt); round_inputs(mc.w, nw, dt); round_inputs(mc.b, mc.OC, dt);
    float *fi = to_float(mc.inp, ni), *fw = to_float(mc.w, nw), *fb = to_float(mc.b, mc.OC);
    float* out = (float*)mallocCheck(no * 4);
    double* ref = (double*)mallocCheck(no * 8);
    for (size_t i = 0; i < no; i++) { out[i] = NAN; } // an element the op leaves unwritten fails
    matmul_forward(ctx, out, fi, fw, fb, mc.BT, mc.C, mc.OC);
    matmul_ref(&mc, ref);
    check_stored(name, out, ref, no, dt, atol, 1.0);
    free(mc.inp); free(mc.w); free(mc.b); free(fi); free(fw); free(fb); free(out); free(ref);
}

// GELU's derivative (tanh approximation) in double.
static double gelu_grad_ref(double x) {
    double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// The fused MLP matmuls in the storage type dt against double references: the forward's pre within 1u, and
// GELU(pre) within 3u of the GELU of either the exact pre (the fused path: the GELU reads the unrounded sum) or the
// stored one (the unfused path; bounding it against the exact pre would not do: in the negative tail GELU(x) is tiny
// while x GELU'(x) is not, so pre's rounding costs the output several u, relative: 5u at x = -2.3), and the
// backward's dinp = GELU'(pre) * (dout @ w) of the next layer (BT, C) <- (BT, OC) within 3u (one rounding of the
// product, one of the result).
static void check_matmul_gelu_stored(const KernelCtx* ctx, int dt, const char* name, int BT, int C, int OC, double wscale, double bscale,
                                     double atol) {
    MatmulCtx mc = {BT, C, OC, NULL, NULL, NULL, NULL};
    size_t ni = (size_t)BT * C, nw = (size_t)OC * C, no = (size_t)BT * OC;
    mc.inp = (double*)mallocCheck(ni * 8); mc.w = (double*)mallocCheck(nw * 8); mc.b = (double*)mallocCheck(OC * 8);
    fill_rand(mc.inp, ni, 1.0); fill_rand(mc.w, nw, wscale); fill_rand(mc.b, OC, bscale);
    round_inputs(mc.inp, ni, dt); round_inputs(mc.w, nw, dt); round_inputs(mc.b, OC, dt);
    float *fi = to_float(mc.inp, ni), *fw = to_float(mc.w, nw), *fb = to_float(mc.b, OC);
    float* pre = (float*)mallocCheck(no * 4);
    float* out = (float*)mallocCheck(no * 4);
    double* ref = (double*)mallocCheck(no * 8);
    for (size_t i = 0; i < no; i++) { pre[i] = NAN; out[i] = NAN; } // an element the op leaves unwritten fails
    char nm[192];
    matmul_forward_gelu(ctx, pre, out, fi, fw, fb, BT, C, OC);
    matmul_ref(&mc, ref);
    snprintf(nm, sizeof(nm), "%s: matmul_forward_gelu %d x %d -> %d: pre", name, BT, C, OC);
    check_stored(nm, pre, ref, no, dt, atol, 1.0);
    for (size_t i = 0; i < no; i++) { // the nearer of GELU(exact pre) and GELU(stored pre)
        double g_exact = gelu_ref(ref[i]), g_stored = gelu_ref(pre[i]);
        ref[i] = fabs(out[i] - g_exact) <= fabs(out[i] - g_stored) ? g_exact : g_stored;
    }
    snprintf(nm, sizeof(nm), "%s: matmul_forward_gelu %d x %d -> %d: GELU(pre or its stored value)", name, BT, C, OC);
    check_stored(nm, out, ref, no, dt, atol, 3.0);
    // backward of the layer (BT, OC) -> (BT, C) whose input is GELU(pre): w (C, OC) here, dout (BT, C)
    double* bpre = (double*)mallocCheck(no * 8);
    double* dout = (double*)mallocCheck(ni * 8);
    fill_rand(bpre, no, 3.0); fill_rand(dout, ni, 1.0);
    round_inputs(bpre, no, dt); round_inputs(dout, ni, dt);
    float *fbpre = to_float(bpre, no), *fdout = to_float(dout, ni);
    float* fx = (float*)mallocCheck(no * 4);
    for (size_t i = 0; i < no; i++) { fx[i] = round_dtype((float)gelu_ref(bpre[i]), dt); }
    float* dinp = (float*)mallocCheck(no * 4);
    float* dw = (float*)mallocCheck(nw * 4);
    for (size_t i = 0; i < no; i++) { dinp[i] = NAN; }
    matmul_backward_gelu(ctx, dinp, dw, NULL, fdout, fx, fw, fbpre, BT, OC, C, 0);
    for (int r = 0; r < BT; r++) {
        for (int j = 0; j < OC; j++) {
            double acc = 0.0;
            for (int k = 0; k < C; k++) { acc += dout[(size_t)r * C + k] * mc.w[(size_t)k * OC + j]; }
            ref[(size_t)r * OC + j] = gelu_grad_ref(bpre[(size_t)r * OC + j]) * acc;
        }
    }
    snprintf(nm, sizeof(nm), "%s: matmul_backward_gelu %d x %d <- %d: dinp", name, BT, OC, C);
    check_stored(nm, dinp, ref, no, dt, atol, 3.0);
    free(mc.inp); free(mc.w); free(mc.b); free(fi); free(fw); free(fb); free(pre); free(out); free(ref);
    free(bpre); free(dout); free(fbpre); free(fdout); free(fx); free(dinp); free(dw);
}

// LayerNorm in the storage type dt against the double reference, held to 2u (see test_ops_dtype).
static void check_layernorm_stored(const KernelCtx* ctx, int dt, const char* name, int BT, int C, double atol) {
    LnCtx lc = {BT, C, NULL, NULL, NULL, NULL};
    size_t n = (size_t)lc.BT * lc.C;
    lc.inp = (double*)mallocCheck(n * 8); lc.w = (double*)mallocCheck(lc.C * 8); lc.b = (double*)mallocCheck(lc.C * 8);
    fill_rand(lc.inp, n, 2.0); fill_rand(lc.w, lc.C, 1.0); fill_rand(lc.b, lc.C, 0.5);
    round_inputs(lc.inp, n, dt); round_inputs(lc.w, lc.C, dt); round_inputs(lc.b, lc.C, dt);
    float *li = to_float(lc.inp, n), *lw = to_float(lc.w, lc.C), *lb = to_float(lc.b, lc.C);
    float* lo = (float*)mallocCheck(n * 4);
    float* mean = (float*)mallocCheck(lc.BT * 4);
    float* rstd = (float*)mallocCheck(lc.BT * 4);
    double* lr = (double*)mallocCheck(n * 8);
    for (size_t i = 0; i < n; i++) { lo[i] = NAN; } // every output element must be written
    for (int r = 0; r < lc.BT; r++) { mean[r] = NAN; rstd[r] = NAN; }
    layernorm_forward(ctx, lo, mean, rstd, li, lw, lb, lc.BT, lc.C);
    ln_ref(&lc, lr);
    check_stored(name, lo, lr, n, dt, atol, 2.0);
    free(lc.inp); free(lc.w); free(lc.b); free(li); free(lw); free(lb); free(lo); free(mean); free(rstd); free(lr);
}

// LayerNorm's backward in the storage type dt, against the double gradient of the double forward: dinp accumulates
// onto 16-bit values and is stored once, so within one rounding of (dinp + the exact gradient), plus 1e-4 for the
// kernel's fp32 arithmetic (sums over C of terms below 10); dw and db (fp32) accumulate onto 0.5 and -0.5 the sums over
// the BT rows, to 1e-4 + 1e-5 relative. The widths walk the GPU's kernels: C 13 one element a lane, C 264 (33 packs),
// 768 (96) and 776 (97) with each lane's packs and sums in registers (2, 3 and 4 packs a lane; lane 0 takes one more
// than the rest at 264 and 776); 1032 (129 packs: halves of 65 and 64) and GPT-2 1558M's 1600 (200: 100 each, 4 a
// lane) with two warps to a row, each holding half; and 2056 (257) past that, with the sums in memory.
static void check_layernorm_backward_stored(const KernelCtx* ctx, int dt, int BT, int C) {
    size_t n = (size_t)BT * C;
    double *x = (double*)mallocCheck(n * 8), *dout = (double*)mallocCheck(n * 8), *dinp0 = (double*)mallocCheck(n * 8);
    double *w = (double*)mallocCheck(C * 8), *ref = (double*)mallocCheck(n * 8), *rdw = (double*)mallocCheck(C * 8);
    double* rdb = (double*)mallocCheck(C * 8);
    fill_rand(x, n, 2.0); fill_rand(dout, n, 1.0); fill_rand(dinp0, n, 0.5); fill_rand(w, C, 1.0);
    round_inputs(x, n, dt); round_inputs(dout, n, dt); round_inputs(dinp0, n, dt); round_inputs(w, C, dt);
    float *fx = to_float(x, n), *fd = to_float(dout, n), *fdi = to_float(dinp0, n), *fw = to_float(w, C);
    float* mean = (float*)mallocCheck(BT * 4);
    float* rstd = (float*)mallocCheck(BT * 4);
    float* lo = (float*)mallocCheck(n * 4);
    layernorm_forward(ctx, lo, mean, rstd, fx, fw, fw, BT, C); // (the statistics; b is any row)
    float* dw = (float*)mallocCheck(C * 4);
    float* db = (float*)mallocCheck(C * 4);
    for (int i = 0; i < C; i++) { dw[i] = 0.5f; db[i] = -0.5f; rdw[i] = 0.5; rdb[i] = -0.5; }
    for (int r = 0; r < BT; r++) {
        const double *xr = x + (size_t)r * C, *dr = dout + (size_t)r * C;
        double m, rs, gm = 0.0, gnm = 0.0;
        ln_stats(xr, C, &m, &rs);
        for (int i = 0; i < C; i++) { gm += dr[i] * w[i]; gnm += dr[i] * w[i] * (xr[i] - m) * rs; }
        gm /= C; gnm /= C;
        for (int i = 0; i < C; i++) {
            double nrm = (xr[i] - m) * rs;
            ref[(size_t)r * C + i] = dinp0[(size_t)r * C + i] + rs * (dr[i] * w[i] - gm - nrm * gnm);
            rdw[i] += dr[i] * nrm;
            rdb[i] += dr[i];
        }
    }
    layernorm_backward(ctx, fdi, dw, db, fd, fx, fw, mean, rstd, BT, C, 1);
    char nm[160];
    snprintf(nm, sizeof(nm), "layernorm_backward, C %d: dinp", C);
    check_stored(nm, fdi, ref, n, dt, 1e-4, 1.0);
    snprintf(nm, sizeof(nm), "layernorm_backward (%s), C %d: dw and db accumulate (fp32)", dtype_name(dt), C);
    double* both = (double*)mallocCheck(2 * C * 8);
    float* fboth = (float*)mallocCheck(2 * C * 4);
    for (int i = 0; i < C; i++) { both[i] = rdw[i]; both[C + i] = rdb[i]; fboth[i] = dw[i]; fboth[C + i] = db[i]; }
    check_close(nm, fboth, both, 2 * (size_t)C, 1e-4, 1e-5);
    free(x); free(dout); free(dinp0); free(w); free(ref); free(rdw); free(rdb); free(fx); free(fd); free(fdi); free(fw);
    free(mean); free(rstd); free(lo); free(dw); free(db); free(both); free(fboth);
}

// The bias gradient over many rows (2500: every row group of the GPU's two-pass column sum holds more rows than it
// has warps) and widths of whole 16-byte packs (24) and not (13): dbias accumulates onto 0.5 the column sums of a
// dout of storage-type values, against the double sums. Tolerance 1e-4 absolute + 1e-5 relative: an fp32 sum of
// 2500 random terms of magnitude <= 1 errs by about sqrt(2500) x 2^-24 x 50 = 1.5e-5 (seen: under 1e-5), while a row
// lost or summed twice moves its columns by that row's values, 0.5 on average. A GPU build runs it twice: dbias from
// cuBLASLt's BGRADB epilogue (where offered), then from the separate reduction.
static void check_bias_grad_as(const KernelCtx* ctx, int dt, const char* how) {
    enum { BT = 2500, C = 4 };
    for (int OC = 24; OC >= 13; OC -= 11) {
        float* dout = (float*)mallocCheck(sizeof(float) * BT * OC);
        float *inp = (float*)mallocCheck(sizeof(float) * BT * C), *w = (float*)mallocCheck(sizeof(float) * OC * C);
        float *dw = (float*)mallocCheck(sizeof(float) * OC * C), *db = (float*)mallocCheck(sizeof(float) * OC);
        double* ref = (double*)mallocCheck(sizeof(double) * OC);
        for (int j = 0; j < OC; j++) { db[j] = 0.5f; ref[j] = 0.5; }
        for (int r = 0; r < BT; r++) {
            for (int j = 0; j < OC; j++) { dout[r * OC + j] = round_dtype((float)rand_d(), dt); ref[j] += dout[r * OC + j]; }
            for (int k = 0; k < C; k++) { inp[r * C + k] = round_dtype((float)rand_d(), dt); }
        }
        for (int i = 0; i < OC * C; i++) { w[i] = round_dtype((float)rand_d(), dt); dw[i] = 0.0f; }
        matmul_backward(ctx, NULL, dw, db, dout, inp, w, BT, C, OC, 1);
        char nm[128];
        snprintf(nm, sizeof(nm), "matmul_backward (%s%s): dbias accumulates the column sums of 2500 x %d", dtype_name(dt), how, OC);
        check_close(nm, db, ref, OC, 1e-4, 1e-5);
        free(dout); free(inp); free(w); free(dw); free(db); free(ref);
    }
}
static void check_bias_grad(KernelCtx* ctx, int dt) {
#ifdef KERNELS_CUDA
    int keep = ctx->bias_grad_fusion;
    ctx->bias_grad_fusion = 1;
    check_bias_grad_as(ctx, dt, ", BGRADB epilogue");
    ctx->bias_grad_fusion = 0;
    check_bias_grad_as(ctx, dt, ", separate reduction");
    ctx->bias_grad_fusion = keep;
#else
    check_bias_grad_as(ctx, dt, "");
#endif
}

// The two-pass sums behind the loss and the global gradient norm (sum_accumulate, sum_squares_accumulate; the same
// kernels in every storage type) add to what *acc holds, in double, at lengths around the CUDA launch's thresholds:
// one warp (n <= 256), a block of 1024 threads of 8 elements each (8192) and one more element, several blocks, and
// past the 1024-block cap (8.4M), where each thread takes more; and starting 1 and 3 floats into a 16-byte pack (a
// ZeRO shard starts anywhere; the CUDA kernel sums whole packs between single floats). Against a serial double sum:
// any order of n double additions is within n u of the exact sum times the sum of the magnitudes (u = 2^-53), so the
// two sums within 2 n u of it of each other.
static void test_sums(void) {
    const KernelCtx* ctx = &g_ctx;
    size_t ns[] = {1, 37, 256, 257, 8192, 8193, 300001, (size_t)1024 * 1024 * 8 + 4097, 2, 6, 37, 8193};
    size_t offs[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 3, 1};
    for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
        size_t n = ns[t], off = offs[t];
        float* buf = (float*)mallocCheck((n + 4) * sizeof(float)); // (malloc: 16-byte aligned)
        float* x = buf + off;
        double ref = 0.5, ref2 = 0.25, mag = 0.5;
        for (size_t i = 0; i < n; i++) { x[i] = (float)rand_d(); ref += x[i]; mag += fabs(x[i]); ref2 += (double)x[i] * x[i]; }
        double s = 0.5, s2 = 0.25, tol = 2.0 * (double)(n + 1) * DBL_EPSILON / 2;
        sum_accumulate(ctx, &s, x, n);
        sum_squares_accumulate(ctx, &s2, x, n);
        char nm[128];
        snprintf(nm, sizeof(nm), "sum_accumulate and sum_squares_accumulate over %zu values%s add to the accumulator", n,
                 off == 1 ? " from float 1 of a 16-byte pack" : off == 3 ? " from float 3 of a 16-byte pack" : "");
        double e = fabs(s - ref) / mag, e2 = fabs(s2 - ref2) / ref2;
        report(e <= tol && e2 <= tol, nm, "errors %.2g and %.2g of the magnitudes' sums (at most %.2g)", e, e2, tol);
        free(buf);
    }
}

// The AdamW shard tests' segments: [243, 250) is in no segment, and the shard [5, 290) cuts through the first and last
static const AdamWSegment ADAMW_TEST_SEGS[4] = {{0, 40, 1}, {40, 3, 0}, {43, 200, 1}, {250, 51, 0}};

// AdamW's step t in double for the elements of the shard [lo, hi) in those segments: the moments md, vd (from the
// gradients g times gs) updated in place, and step[k] = lr m-hat / (sqrt(v-hat) + eps), decayed[k] the decay flag;
// elements in no segment are left alone.
static void adamw_ref_step(size_t lo, size_t hi, const float* g, float gs, float lr, float b1, float b2, float eps, int t,
                           double* md, double* vd, double* step, char* decayed) {
    for (int s = 0; s < 4; s++) {
        const AdamWSegment* sg = &ADAMW_TEST_SEGS[s];
        for (size_t i = sg->offset; i < sg->offset + sg->size; i++) {
            if (i < lo || i >= hi) { continue; }
            size_t k = i - lo;
            double gg = (double)gs * g[k];
            md[k] = b1 * md[k] + (1 - (double)b1) * gg;
            vd[k] = b2 * vd[k] + (1 - (double)b2) * gg * gg;
            double mh = md[k] / (1 - pow(b1, t)), vh = vd[k] / (1 - pow(b2, t));
            step[k] = lr * (mh / (sqrt(vh) + eps));
            decayed[k] = (char)sg->decay;
        }
    }
}

// AdamW in the storage type dt with master weights, on a ZeRO shard [lo, hi) that cuts through tensors (segments at
// odd offsets, a gap that belongs to no segment): two steps against the closed form in double (master, m, v; the
// tolerances of test_adamw), every stored parameter exactly the stochastic rounding of its own master value (keyed
// by its flat index: a pack that mixed up indices fails this), and the gap untouched. A GPU takes the aligned middle
// of each segment in 16-byte packs and the ends one element at a time.
static void check_adamw_shard(const KernelCtx* ctx, int dt) {
    enum { N = 301, LO = 5, HI = 290 };
    size_t n = HI - LO;
    float *p = (float*)mallocCheck(n * 4), *w = (float*)mallocCheck(n * 4), *g = (float*)mallocCheck(n * 4);
    float *m = (float*)mallocCheck(n * 4), *v = (float*)mallocCheck(n * 4), *p0 = (float*)mallocCheck(n * 4);
    double *wd = (double*)mallocCheck(n * 8), *md = (double*)mallocCheck(n * 8), *vd = (double*)mallocCheck(n * 8);
    double* step = (double*)callocCheck(n, 8);
    char* decayed = (char*)callocCheck(n, 1);
    for (size_t k = 0; k < n; k++) {
        p[k] = round_dtype((float)rand_d(), dt); w[k] = p[k]; p0[k] = p[k]; g[k] = (float)rand_d(); m[k] = 0.0f; v[k] = 0.0f;
        wd[k] = p[k]; md[k] = 0.0; vd[k] = 0.0;
    }
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wdecay = 0.1f, gs = 0.5f;
    for (int t = 1; t <= 2; t++) {
        AdamWHyper hp = {lr, b1, b2, eps, wdecay, gs, t, 1234};
        adamw_update(ctx, p, w, g, m, v, LO, HI, ADAMW_TEST_SEGS, 4, &hp);
        adamw_ref_step(LO, HI, g, gs, lr, b1, b2, eps, t, md, vd, step, decayed);
        for (size_t k = 0; k < n; k++) {
            if (k + LO >= 243 && k + LO < 250) { continue; }
            wd[k] -= step[k] + lr * (decayed[k] ? wdecay : 0.0) * wd[k];
        }
    }
    char nm[160];
    snprintf(nm, sizeof(nm), "adamw_update (%s, master weights, a shard through 4 segments): master after 2 steps vs closed form", dtype_name(dt));
    check_close(nm, w, wd, n, 1e-6, 1e-5);
    snprintf(nm, sizeof(nm), "adamw_update (%s, a shard): first moments vs closed form", dtype_name(dt));
    check_close(nm, m, md, n, 1e-7, 1e-5);
    snprintf(nm, sizeof(nm), "adamw_update (%s, a shard): second moments vs closed form", dtype_name(dt));
    check_close(nm, v, vd, n, 1e-9, 1e-5);
    size_t bad = 0, moved = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = k + LO;
        if (i >= 243 && i < 250) { moved += p[k] != p0[k] || w[k] != p0[k] || m[k] != 0.0f || v[k] != 0.0f; continue; }
        float want = round_stochastic(w[k], dt, 1234, 2, i);
        bad += memcmp(&p[k], &want, sizeof(float)) != 0;
    }
    snprintf(nm, sizeof(nm), "adamw_update (%s, a shard): each parameter the stochastic rounding of its master value, at its index", dtype_name(dt));
    report(bad == 0, nm, "%zu of %zu differ", bad, n);
    snprintf(nm, sizeof(nm), "adamw_update (%s, a shard): elements in no segment untouched", dtype_name(dt));
    report(moved == 0, nm, "%zu of 7 changed", moved);
    free(p); free(w); free(g); free(m); free(v); free(p0); free(wd); free(md); free(vd); free(step); free(decayed);
}

// AdamW in the 16-bit storage type dt without master weights (--master-weights 0, llm.c's -w 0), on the same shard:
// each step the stored parameter is the stochastic rounding, keyed by its flat index and the step, of its own update
// x = p - lr (m-hat / (sqrt(v-hat) + eps) + wd p), here computed in double from the stored p and the moments. The
// float x the backend rounds may differ from the double one by ~1e-7 relative, which can flip a rounding only when x
// lies that close to its random threshold (~1e-4 of the elements): at most 2 of the 2 x 285 may differ, where keys
// mixed up between elements, or round-to-nearest, change about half of them.
static void check_adamw_nomaster(const KernelCtx* ctx, int dt) {
    enum { N = 301, LO = 5, HI = 290 };
    size_t n = HI - LO;
    float *p = (float*)mallocCheck(n * 4), *g = (float*)mallocCheck(n * 4), *m = (float*)mallocCheck(n * 4), *v = (float*)mallocCheck(n * 4);
    float* prev = (float*)mallocCheck(n * 4);
    double *md = (double*)mallocCheck(n * 8), *vd = (double*)mallocCheck(n * 8), *step = (double*)callocCheck(n, 8);
    char* decayed = (char*)callocCheck(n, 1);
    for (size_t k = 0; k < n; k++) { p[k] = round_dtype((float)rand_d(), dt); g[k] = (float)rand_d(); m[k] = v[k] = 0.0f; md[k] = vd[k] = 0.0; }
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wdecay = 0.1f, gs = 0.5f;
    size_t differ = 0, unrounded = 0, untouched_bad = 0;
    for (int t = 1; t <= 2; t++) {
        memcpy(prev, p, n * 4);
        AdamWHyper hp = {lr, b1, b2, eps, wdecay, gs, t, 1234};
        adamw_update(ctx, p, NULL, g, m, v, LO, HI, ADAMW_TEST_SEGS, 4, &hp);
        adamw_ref_step(LO, HI, g, gs, lr, b1, b2, eps, t, md, vd, step, decayed);
        for (size_t k = 0; k < n; k++) {
            size_t i = k + LO;
            if (i >= 243 && i < 250) { untouched_bad += p[k] != prev[k] || m[k] != 0.0f; continue; }
            double x = prev[k] - step[k] - lr * (decayed[k] ? wdecay : 0.0) * prev[k];
            float want = round_stochastic((float)x, dt, 1234, (uint64_t)t, i);
            differ += memcmp(&p[k], &want, sizeof(float)) != 0;
            unrounded += round_dtype(p[k], dt) != p[k];
        }
    }
    char nm[200];
    snprintf(nm, sizeof(nm), "adamw_update (%s, no master weights, a shard): each parameter the stochastic rounding of its own update, at its index", dtype_name(dt));
    report(differ <= 2 && unrounded == 0 && untouched_bad == 0, nm, "%zu of %zu differ, %zu not %s values, %zu changed outside the segments",
           differ, 2 * (n - 7), unrounded, dtype_name(dt), untouched_bad);
    free(p); free(g); free(m); free(v); free(prev); free(md); free(vd); free(step); free(decayed);
}

static void test_ops_dtype(void) {
    for (int dt = DTYPE_BF16; dt <= DTYPE_FP16; dt++) {
#ifdef KERNELS_CUDA
        if (dt != KERNELS_DTYPE) { continue; } // a CUDA build stores one type (test_gpt_cu_bf16 tests bf16)
        KernelCtx& ctx = g_ctx;
#else
        KernelCtx ctx;
        kernels_ctx_init(&ctx, dt, 150, 2056); // (T up to 150: the attention shapes below; C up to LayerNorm's 2056)
#endif
        // matmul with bias
        check_matmul_stored(&ctx, dt, "matmul_forward", 5, 7, 9, 0.5, 0.5, 1e-6);
        // the MLP's fused matmuls, on a shape a GPU fuses and on one it does not
        check_matmul_gelu_stored(&ctx, dt, "fused MLP", 6, 16, 24, 0.5, 0.5, 1e-6);
        check_matmul_gelu_stored(&ctx, dt, "fused MLP", 5, 7, 9, 0.5, 0.5, 1e-6);
        // GELU
        enum { NG = 203 }; // not a multiple of a 16-byte pack: the packed kernels' tail runs too
        double gx[NG], gr[NG];
        float gi[NG], go[NG];
        for (int i = 0; i < NG; i++) { gx[i] = round_dtype((float)(-6.0 + 12.0 * i / (NG - 1)), dt); gi[i] = (float)gx[i]; gr[i] = gelu_ref(gx[i]); }
        gelu_forward(&ctx, go, gi, NG);
        check_stored("gelu_forward", go, gr, NG, dt, 1e-6, 1.0);
        // LayerNorm
        check_layernorm_stored(&ctx, dt, "layernorm_forward", 6, 16, 1e-5);
        check_layernorm_stored(&ctx, dt, "layernorm_forward, C 13 (not a whole number of 16-byte packs)", 6, 13, 1e-5);
        check_layernorm_stored(&ctx, dt, "layernorm_forward, C 264 (33 bf16 packs: lane 0 takes two)", 40, 264, 1e-5);
        int ln_widths[] = {13, 264, 768, 776, 1032, 1600, 2056};
        for (int i = 0; i < 7; i++) { check_layernorm_backward_stored(&ctx, dt, 40, ln_widths[i]); }
        // AdamW with master weights on a shard
        check_adamw_shard(&ctx, dt);
        check_adamw_nomaster(&ctx, dt);
        // the bias gradient over many rows
        check_bias_grad(&ctx, dt);
        // the KV cache's rows
        test_kv_cache_write(&ctx);
        test_attention_rows_long(&ctx, dtype_name(dt), dt, 1.5 * unit_roundoff(dt), 1.0 * unit_roundoff(dt));
        // causal attention, forward and backward (head size 16: cuDNN's flash attention needs a multiple of 8), with
        // every implementation the backend has (the CPU: native; a CUDA build with cuDNN: cudnn and native). The
        // backward against finite differences of the double reference, to 8u of the largest gradient: each element
        // sums T terms whose factors carry a rounding each (P is rounded to the storage type inside cuDNN, and in
        // the native tensor-core kernels). Two shapes: T 5 (the CUDA build's native path: its warp-per-row kernels)
        // and T 32 (multiples of 16: its tensor-core kernels, two query tiles, so one tile below the diagonal)
        for (int shape = 0; shape < 2; shape++)
        for (int impl = 0; impl < attention_impls(); impl++) {
            if (attention_use(&ctx, impl) != 0) { continue; } // (a cuDNN fallback is reported below)
#ifdef KERNELS_CUDA
            long fallbacks0 = ctx.attention_fallbacks, refused0 = ctx.att_nondet_refused;
#endif
            AttCtx ac = {2, 5, 32, 2, NULL, NULL};
            if (shape == 1) { ac.B = 1; ac.T = 32; }
            size_t nq = (size_t)ac.B * ac.T * 3 * ac.C, nao = (size_t)ac.B * ac.T * ac.C;
            ac.qkv = (double*)mallocCheck(nq * 8); ac.R = (double*)mallocCheck(nao * 8);
            fill_rand(ac.qkv, nq, 1.5); fill_rand(ac.R, nao, 1.0);
            round_inputs(ac.qkv, nq, dt); round_inputs(ac.R, nao, dt);
            float *fq = to_float(ac.qkv, nq), *fR = to_float(ac.R, nao);
            float* ao = (float*)mallocCheck(nao * 4);
            float* lse = (float*)mallocCheck(sizeof(float) * ac.B * ac.NH * ac.T);
            double* ar = (double*)mallocCheck(nq * 8);
            char nm[160];
            snprintf(nm, sizeof(nm), "attention_forward [%s] (T %d)", attention_impl_name(impl), ac.T);
            attention_forward(&ctx, ao, lse, fq, ac.B, ac.T, ac.C, ac.NH);
            att_ref(&ac, ar);
            // one rounding of the output (u relative), plus, where P is rounded before P V (cuDNN, the tensor-core
            // kernels), up to u of each P_j times |V_j| <= 1.5, P summing to 1: 1.5 u absolute
            double u = unit_roundoff(dt);
            check_stored(nm, ao, ar, nao, dt, 1.5 * u, 1.0);
            // (the rows of a KV-cache step: one rounding of the output; their kernel keeps P in fp32)
            if (impl == 0) { check_attention_rows(&ctx, dtype_name(dt), fq, ar, ac.B, ac.T, ac.C, ac.NH, 1.5 * u, 1.0 * u); }
            float* dq = (float*)mallocCheck(nq * 4);
            for (size_t i = 0; i < nq; i++) { dq[i] = NAN; } // must be fully overwritten
            attention_backward(&ctx, dq, fR, fq, ao, lse, ac.B, ac.T, ac.C, ac.NH);
            fd_grad(att_loss, &ac, ac.qkv, nq, ar);
            double gmax = 0.0;
            for (size_t i = 0; i < nq; i++) { gmax = fmax(gmax, fabs(ar[i])); }
            snprintf(nm, sizeof(nm), "attention_backward [%s] (%s, T %d): dqkv within 8u of the largest (finite differences)",
                     attention_impl_name(impl), dtype_name(dt), ac.T);
            check_close(nm, dq, ar, nq, 8 * u * gmax, 0.0);
            // and again, bit for bit: resumed runs and the tests' bitwise comparisons rely on it (cuDNN's plans take
            // deterministic engines first; a nondeterministic dQ would differ here in its last bits, which
            // --deterministic 0 allows: there the count is printed, not checked)
            float* dq2 = (float*)mallocCheck(nq * 4);
            for (size_t i = 0; i < nq; i++) { dq2[i] = NAN; }
            attention_backward(&ctx, dq2, fR, fq, ao, lse, ac.B, ac.T, ac.C, ac.NH);
            snprintf(nm, sizeof(nm), "attention_backward [%s] (%s, T %d): a second call gives the same bits", attention_impl_name(impl),
                     dtype_name(dt), ac.T);
            size_t ndiff = 0;
            for (size_t i = 0; i < nq; i++) { ndiff += memcmp(&dq[i], &dq2[i], 4) != 0; }
            if (impl < 2) { report(ndiff == 0, nm, "%zu of %zu values differ", ndiff, nq); }
            else { printf("  attention_backward [%s] (%s, T %d): a second call differs in %zu of %zu values\n", attention_impl_name(impl), dtype_name(dt), ac.T, ndiff, nq); }
            free(ac.qkv); free(ac.R); free(fq); free(fR); free(ao); free(lse); free(ar); free(dq); free(dq2);
#ifdef KERNELS_CUDA
            if (impl >= 1) { report(ctx.attention_fallbacks == fallbacks0, "cuDNN planned the attention graphs of this shape", "fell back to native"); }
            // (cuDNN may have no engine for the nondeterministic graph of these tiny shapes: said, not failed; the GPT-2
            // shape below must have one)
            if (impl == 2 && ctx.att_nondet_refused != refused0) {
                printf("  attention_backward [%s] (T %d): cuDNN ran the deterministic graph (no engine for the nondeterministic one)\n", attention_impl_name(impl), ac.T);
            }
#endif
        }
        attention_reset(&ctx);
#ifndef KERNELS_CUDA
        kernels_ctx_free(&ctx);
#endif
    }
}

// --- forward-only lengths (kernels_forward_len): t itself on the CPU and in fp32 CUDA builds; with the native attention
// of 16-bit CUDA builds, t rounded up to a multiple of 16 (the tensor-core kernels' tiles), at most t_max, and t when
// t >= t_max; with cuDNN, buckets (tests/test_cudnn_graph)
static void test_forward_len(void) {
    kernels_set_attention(&g_ctx, "native");
    const int cases[][3] = {{1, 64, 16}, {16, 64, 16}, {17, 64, 32}, {50, 60, 60}, {60, 64, 64}, {70, 64, 70}, {64, 64, 64}};
    int bad = 0;
    char detail[256] = "";
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
#if defined(KERNELS_CUDA) && !defined(ENABLE_FP32)
        int want = cases[i][2];
#else
        int want = cases[i][0];
#endif
        int got = kernels_forward_len(&g_ctx, cases[i][0], cases[i][1]);
        if (got != want) { bad++; snprintf(detail, sizeof(detail), "t %d, t_max %d: got %d, want %d", cases[i][0], cases[i][1], got, want); }
    }
    report(bad == 0, "kernels_forward_len with the native attention: t, or in 16-bit CUDA builds t rounded up to 16 within t_max",
           "%s", bad ? detail : "7 cases");
    kernels_set_attention(&g_ctx, "auto"); // (the test binary's setting, as the other attention tests leave it)
}

// --- the forward ops at GPT-2 124M's shapes in the 16-bit storage type (bf16 on the CPU, the build's type on a GPU):
// T = 1024 attention with 12 heads of 64, C = 768 LayerNorm, the 768 -> 2304 QKV matmul, GELU over a 4C row block,
// and the LM head over the padded 50304-row vocabulary. Inputs are 16-bit values; tolerances: one rounding of the
// output (u relative) plus, where a kernel rounds inside (cuDNN rounds P before P V), u times the largest input that
// the rounded quantity multiplies, as an absolute term.
static void test_ops_gpt2_shapes(void) {
#ifdef KERNELS_CUDA
    if (KERNELS_DTYPE == DTYPE_FP32) { return; }
    int dt = KERNELS_DTYPE;
    KernelCtx& ctx = g_ctx;
#else
    int dt = DTYPE_BF16;
    KernelCtx ctx;
    kernels_ctx_init(&ctx, dt, 1024, 768);
#endif
    double u = unit_roundoff(dt);
    // QKV matmul: (128, 768) -> (128, 2304) with bias
    check_matmul_stored(&ctx, dt, "GPT-2 shape: matmul_forward 128 x 768 -> 2304", 128, 768, 2304, 0.05, 0.1, 1e-4);
    // the MLP: fc (128, 768) -> (128, 3072) with its GELU, and fcproj's backward into the GELU's input
    check_matmul_gelu_stored(&ctx, dt, "GPT-2 shape", 128, 768, 3072, 0.05, 0.1, 1e-4);
    // GELU over (128, 3072)
    size_t ng = (size_t)128 * 3072;
    float* gi = (float*)mallocCheck(ng * 4);
    float* go = (float*)mallocCheck(ng * 4);
    double* gr = (double*)mallocCheck(ng * 8);
    for (size_t k = 0; k < ng; k++) { gi[k] = round_dtype((float)(3.0 * rand_d()), dt); gr[k] = gelu_ref(gi[k]); }
    gelu_forward(&ctx, go, gi, ng);
    check_stored("GPT-2 shape: gelu_forward 128 x 3072", go, gr, ng, dt, 1e-6, 1.0);
    // LayerNorm over (128, 768)
    check_layernorm_stored(&ctx, dt, "GPT-2 shape: layernorm_forward 128 x 768", 128, 768, 1e-4);
    // causal attention, B 1, T 1024, 12 heads of 64, every implementation the backend has (T 256 in the CPU emulation
    // of the CUDA backend, tests/cuda_emu, where each warp shuffle is a rendezvous of 32 fibers: 16x fewer of them)
#ifdef CUDA_EMU
    AttCtx ac = {1, 256, 768, 12, NULL, NULL};
#else
    AttCtx ac = {1, 1024, 768, 12, NULL, NULL};
#endif
    size_t nq = (size_t)ac.B * ac.T * 3 * ac.C, nao = (size_t)ac.B * ac.T * ac.C;
    ac.qkv = (double*)mallocCheck(nq * 8);
    fill_rand(ac.qkv, nq, 1.0);
    round_inputs(ac.qkv, nq, dt);
    float* fq = to_float(ac.qkv, nq);
    float* ao = (float*)mallocCheck(nao * 4);
    float* lse = (float*)mallocCheck(sizeof(float) * ac.B * ac.NH * ac.T);
    double* ar = (double*)mallocCheck(nao * 8);
    att_ref(&ac, ar);
    for (int impl = 0; impl < 2; impl++) { // (impl 2's forward is impl 1's)
        if (attention_use(&ctx, impl) != 0) { continue; }
        attention_forward(&ctx, ao, lse, fq, ac.B, ac.T, ac.C, ac.NH);
        char nm[96];
        snprintf(nm, sizeof(nm), "GPT-2 shape: attention_forward T %d, 12 x 64 [%s]", ac.T, attention_impl_name(impl));
        check_stored(nm, ao, ar, nao, dt, 2 * u, 1.0); // |V| <= 1: a rounded P costs at most u in absolute terms
    }
    kernels_set_attention(&ctx, "auto");
    // the backward at the same shape, each implementation from the same inputs (the reference's O rounded to the
    // storage type, its log-sum-exp), against the double backward, every element within its bound (att_backward_ref:
    // the roundings of dS, P and the output, times 1.25 for the fp32 sums)
    {
        ac.R = (double*)mallocCheck(nao * 8);
        fill_rand(ac.R, nao, 1.0);
        round_inputs(ac.R, nao, dt);
        double* orr = (double*)mallocCheck(nao * 8);
        for (size_t k = 0; k < nao; k++) { orr[k] = round_dtype((float)ar[k], dt); }
        double* gr2 = (double*)mallocCheck(nq * 8);
        double* gb = (double*)mallocCheck(nq * 8);
        att_backward_ref(&ac, orr, u, gr2, gb, lse);
        float *fR = to_float(ac.R, nao), *fo = to_float(orr, nao);
        float* dq = (float*)mallocCheck(nq * 4);
        for (int impl = 0; impl < attention_impls(); impl++) {
            if (attention_use(&ctx, impl) != 0) { continue; }
#ifdef KERNELS_CUDA
            long refused0 = ctx.att_nondet_refused;
#endif
            for (size_t k = 0; k < nq; k++) { dq[k] = NAN; } // must be fully overwritten
            attention_backward(&ctx, dq, fR, fq, fo, lse, ac.B, ac.T, ac.C, ac.NH);
            size_t bad = 0, worst_at = 0;
            double worst = 0.0; // the largest error in units of its bound
            for (size_t k = 0; k < nq; k++) {
                double err = fabs((double)dq[k] - gr2[k]), lim = 1.25 * gb[k] + 1e-7;
                if (!(err <= lim)) { bad++; }
                if (!(err / lim <= worst)) { worst = err / lim; worst_at = k; }
            }
            char nm[128];
            snprintf(nm, sizeof(nm), "GPT-2 shape: attention_backward T %d, 12 x 64 [%s]: dqkv within its rounding bound", ac.T,
                     attention_impl_name(impl));
            report(bad == 0, nm, "%zu of %zu outside; the worst at %.2f of its bound (element %zu: got %.6g, expected %.6g)", bad, nq,
                   worst, worst_at, dq[worst_at], gr2[worst_at]);
#ifdef KERNELS_CUDA
            if (impl == 2) {
                report(ctx.att_nondet_refused == refused0, "GPT-2 shape: cuDNN ran the nondeterministic backward graph (--deterministic 0)",
                       "no engine: the deterministic graph ran");
            }
#endif
        }
        attention_reset(&ctx);
        free(ac.R); free(orr); free(gr2); free(gb); free(fR); free(fo); free(dq);
    }
    // LM head: loss of 8 rows over the padded GPT-2 vocabulary (V 50257 of Vp 50304)
    int32_t tgt[8] = {0, 50256, 17, -1, 31337, 5, 50000, 220};
    ClsCtx cc = {8, 768, 50257, 50304, NULL, NULL, tgt, 1.0};
    size_t nx = (size_t)cc.BT * cc.C, nwte = (size_t)cc.Vp * cc.C;
    cc.x = (double*)mallocCheck(nx * 8); cc.wte = (double*)mallocCheck(nwte * 8);
    fill_rand(cc.x, nx, 1.0); fill_rand(cc.wte, nwte, 0.05);
    for (size_t k = (size_t)cc.V * cc.C; k < nwte; k++) { cc.wte[k] = 0.0; }
    round_inputs(cc.x, nx, dt); round_inputs(cc.wte, nwte, dt);
    float *cx = to_float(cc.x, nx), *cw = to_float(cc.wte, nwte);
    float losses[8];
    float* chunk = (float*)mallocCheck(sizeof(float) * 8 * cc.Vp);
    classifier_forward_backward(&ctx, losses, NULL, NULL, chunk, 8, cx, cw, tgt, 0.0f, cc.BT, cc.C, cc.V, cc.Vp, 0);
    int ok = 1;
    double worst = 0.0;
    for (int r = 0; r < cc.BT; r++) {
        ClsCtx one = cc;
        one.BT = 1; one.x = cc.x + (size_t)r * cc.C; one.tgt = tgt + r;
        double want = cls_loss(&one), tol = 4 * u * (1.0 + fabs(want)); // logits rounded once: loss within a few u
        double d = fabs(losses[r] - want);
        if (!(d <= tol)) { ok = 0; }
        if (d > worst) { worst = d; }
    }
    report(ok && losses[3] == 0.0f, "GPT-2 shape: LM head losses over the padded 50304-row vocabulary (masked target 0)",
           "max abs difference %.3g (tolerance 4u (1 + |loss|))", worst);
    free(gi); free(go); free(gr);
    free(ac.qkv); free(fq); free(ao); free(lse); free(ar);
    free(cc.x); free(cc.wte); free(cx); free(cw); free(chunk);
#ifndef KERNELS_CUDA
    kernels_ctx_free(&ctx);
#endif
}

#if defined(KERNELS_CUDA) && defined(ENABLE_FP32)
// The largest |got - ref| / S over n elements, where S[i] = sum over the dot product of |a||b| (plus |bias|): the error
// of a dot product relative to the size of its terms, which rounding bounds whatever the inputs' signs.
static double worst_rel(const float* got, const double* ref, const double* S, size_t n) {
    double w = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = isfinite(got[i]) ? fabs(got[i] - ref[i]) / (S[i] > 0 ? S[i] : 1.0) : INFINITY;
        if (!(e <= w)) { w = e; }
    }
    return w;
}

// --tf32 (kernels_set_tf32): a linear layer's three products, exact fp32 first, then on TF32 tensor cores, then exact
// again, on inputs with full 24-bit mantissas, against the double reference. Scale-free error: |err| / S (worst_rel).
// Bounds: exact fp32 within (k + 2) 2^-24 (each of k products and additions rounds, and the bias and the store);
// TF32 rounds each operand to a 10-bit mantissa, 2^-11 relative rounded to nearest (2^-10 truncated), so a product
// errs by up to 2 x 2^-10 of |a||b|: within 2^-9 + (k + 2) 2^-24. That TF32 really ran: its error is above 8x the
// exact run's (for these sizes the exact run's worst is ~2^-22, TF32's ~2^-13). The last exact run gives the first
// one's bits: the matmul plans are kept per compute type.
static void test_tf32(void) {
    KernelCtx* ctx = &g_ctx;
    enum { BT = 37, C = 200, OC = 48 }; // k: C forward, OC for dinp, BT for dweight
    MatmulCtx mc = {BT, C, OC, NULL, NULL, NULL, NULL};
    size_t ni = (size_t)BT * C, nw = (size_t)OC * C, no = (size_t)BT * OC;
    mc.inp = (double*)mallocCheck(ni * 8); mc.w = (double*)mallocCheck(nw * 8); mc.b = (double*)mallocCheck(OC * 8);
    double* dout = (double*)mallocCheck(no * 8);
    fill_rand(mc.inp, ni, 1.0); fill_rand(mc.w, nw, 0.5); fill_rand(mc.b, OC, 0.5); fill_rand(dout, no, 1.0);
    float *fi = to_float(mc.inp, ni), *fw = to_float(mc.w, nw), *fb = to_float(mc.b, OC), *fd = to_float(dout, no);
    for (size_t i = 0; i < ni; i++) { mc.inp[i] = fi[i]; } // the reference on the float inputs
    for (size_t i = 0; i < nw; i++) { mc.w[i] = fw[i]; }
    for (int i = 0; i < OC; i++) { mc.b[i] = fb[i]; }
    for (size_t i = 0; i < no; i++) { dout[i] = fd[i]; }
    // references and term sizes: out = inp w^T + b, dinp = dout w, dw = dout^T inp
    double *ro = (double*)mallocCheck(no * 8), *so = (double*)mallocCheck(no * 8);
    double *ri = (double*)mallocCheck(ni * 8), *si = (double*)mallocCheck(ni * 8);
    double *rw = (double*)mallocCheck(nw * 8), *sw = (double*)mallocCheck(nw * 8);
    matmul_ref(&mc, ro);
    for (int r = 0; r < BT; r++) {
        for (int o = 0; o < OC; o++) {
            double a = fabs(mc.b[o]);
            for (int k = 0; k < C; k++) { a += fabs(mc.inp[r * C + k] * mc.w[o * C + k]); }
            so[r * OC + o] = a;
        }
        for (int k = 0; k < C; k++) {
            double v = 0.0, a = 0.0;
            for (int o = 0; o < OC; o++) { v += dout[r * OC + o] * mc.w[o * C + k]; a += fabs(dout[r * OC + o] * mc.w[o * C + k]); }
            ri[r * C + k] = v; si[r * C + k] = a;
        }
    }
    for (int o = 0; o < OC; o++) {
        for (int k = 0; k < C; k++) {
            double v = 0.0, a = 0.0;
            for (int r = 0; r < BT; r++) { v += dout[r * OC + o] * mc.inp[r * C + k]; a += fabs(dout[r * OC + o] * mc.inp[r * C + k]); }
            rw[o * C + k] = v; sw[o * C + k] = a;
        }
    }
    float *out = (float*)mallocCheck(no * 4), *dinp = (float*)mallocCheck(ni * 4), *dw = (float*)mallocCheck(nw * 4);
    float *first = (float*)mallocCheck((no + ni + nw) * 4);
    double worst[3][3]; // [run: exact, TF32, exact again][product: out, dinp, dweight]
    const char* prod[3] = {"forward (k 200)", "dinp (k 48)", "dweight (k 37)"};
    const int ks[3] = {C, OC, BT};
    int same_bits = 1;
    for (int run = 0; run < 3; run++) {
        int tf = run == 1;
        report(kernels_set_tf32(ctx, tf) == 0 && ctx->tf32 == tf, tf ? "kernels_set_tf32: an fp32 CUDA build takes --tf32 1" : "kernels_set_tf32 0",
               "ctx->tf32 %d", ctx->tf32);
        for (size_t i = 0; i < no; i++) { out[i] = NAN; }
        for (size_t i = 0; i < ni; i++) { dinp[i] = NAN; }
        for (size_t i = 0; i < nw; i++) { dw[i] = 0.0f; }
        matmul_forward(ctx, out, fi, fw, fb, BT, C, OC);
        matmul_backward(ctx, dinp, dw, NULL, fd, fi, fw, BT, C, OC, 0);
        worst[run][0] = worst_rel(out, ro, so, no);
        worst[run][1] = worst_rel(dinp, ri, si, ni);
        worst[run][2] = worst_rel(dw, rw, sw, nw);
        if (run == 0) { memcpy(first, out, no * 4); memcpy(first + no, dinp, ni * 4); memcpy(first + no + ni, dw, nw * 4); }
        if (run == 2) {
            same_bits = memcmp(first, out, no * 4) == 0 && memcmp(first + no, dinp, ni * 4) == 0 && memcmp(first + no + ni, dw, nw * 4) == 0;
        }
    }
    for (int q = 0; q < 3; q++) {
        char nm[160];
        double exact_bound = (ks[q] + 2) * ldexp(1.0, -24), tf32_bound = ldexp(1.0, -9) + exact_bound;
        snprintf(nm, sizeof(nm), "matmul %s, exact fp32 (--tf32 0): within (k + 2) 2^-24 of the terms", prod[q]);
        report(worst[0][q] <= exact_bound, nm, "worst |err|/S %.3g, bound %.3g", worst[0][q], exact_bound);
        snprintf(nm, sizeof(nm), "matmul %s, TF32 (--tf32 1): within 2^-9 + (k + 2) 2^-24 of the terms, above 8x the exact run's error", prod[q]);
        report(worst[1][q] <= tf32_bound && worst[1][q] > 8.0 * worst[0][q], nm, "worst |err|/S %.3g (exact %.3g), bound %.3g",
               worst[1][q], worst[0][q], tf32_bound);
    }
    report(same_bits, "matmuls exact again after TF32: the first exact run's bits (plans kept per compute type)",
           "worst |err|/S now %.3g %.3g %.3g", worst[2][0], worst[2][1], worst[2][2]);
    kernels_set_tf32(ctx, 0);
    // the trainer's path: --tf32 1 reaches the model's context through gpt_init_ctx
    GPT m;
    ModelSplit ms = {NULL, 0, NULL, 1, NULL, 0, NULL, 0, NULL, 1, 0, 0, NULL, 0};
    gpt_init_ctx(&m, &ms, DTYPE_FP32, 8, 64);
    report(m.ctx.tf32 == 1, "--tf32 1 reaches the model's kernel context (gpt_init_ctx)", "ctx.tf32 %d", m.ctx.tf32);
    kernels_ctx_free(&m.ctx);
    free(mc.inp); free(mc.w); free(mc.b); free(dout); free(fi); free(fw); free(fb); free(fd);
    free(ro); free(so); free(ri); free(si); free(rw); free(sw); free(out); free(dinp); free(dw); free(first);
}
#endif

#ifdef KERNELS_CUDA
// The bias gradient's two widths (kernels__bias_grad): the same dout read as 16-byte packs from an aligned buffer and
// one element at a time from a buffer one element off must give the same bits, as the kernel's comment promises
// (each column's order depends on the rows only). 1000 rows of 64 columns (not every row group full).
static void test_bias_grad_widths(void) {
    int BT = 1000, OC = 64;
    size_t n = (size_t)BT * OC;
    float* host = (float*)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { host[i] = round_dtype((float)rand_d(), KERNELS_DTYPE); }
    floatX* aligned = (floatX*)dev_alloc(&g_ctx, (n + 1) * sizeof(floatX));
    floatX* offset = (floatX*)dev_alloc(&g_ctx, (n + 1) * sizeof(floatX));
    params_from_f32(&g_ctx, aligned, host, n);
    params_from_f32(&g_ctx, offset + 1, host, n);
    float* db = (float*)dev_alloc(&g_ctx, 2 * OC * sizeof(float));
    kernels__bias_grad(&g_ctx, db, aligned, BT, OC, 0);
    kernels__bias_grad(&g_ctx, db + OC, offset + 1, BT, OC, 0);
    float got[128];
    dev_copy_d2h(&g_ctx, got, db, sizeof(got));
    dev_sync(&g_ctx);
    size_t differ = 0;
    for (int j = 0; j < OC; j++) { differ += memcmp(&got[j], &got[OC + j], sizeof(float)) != 0; }
    check(differ == 0, "bias gradient: 16-byte packs and one element at a time give the same bits (1000 x 64)",
          "%zu of %d columns differ", differ, OC);
    dev_free(&g_ctx, aligned);
    dev_free(&g_ctx, offset);
    dev_free(&g_ctx, db);
    free(host);
}

// --matmul-tune and --matmul-algos (kernels_lt_tune.cuh). The MLP's products, through the ops (GELU_AUX forward,
// DGELU backward, the weight gradient accumulated onto a non-zero dw: beta 1), first with the heuristic's first
// algorithms, then tuned over 4 candidates, then read back from the file the tuning wrote:
//   - tuned, the outputs are the untuned ones: bit for bit under the emulation (its candidates differ in cost only), on
//     a GPU within 1e-4 (fp32) or 2^-6 (16-bit) of the output's norm (other algorithms sum in other orders; a dw
//     accumulated once per candidate run, or an output written by the timing, would be off by its whole size);
//   - every plan with more than one candidate was tuned, and under the emulation each took the candidate planted as
//     the fastest (CUDA_EMU_LT_FAST);
//   - read back, every plan takes the file's algorithm, the same 64 bytes as the tuning chose, no candidate runs
//     again, and the outputs are the tuned run's bit for bit (one algorithm computes the same bits every time);
//   - a file for another cuBLASLt version is not used.
#ifdef KERNELS_CUDA
static void test_matmul_tune(void) {
    KernelCtx* ctx = &g_ctx;
    enum { BT = 40, C = 64, OC = 256 };
    size_t ni = (size_t)BT * C, nw = (size_t)OC * C, nh = (size_t)BT * OC;
    float* in[4]; // inp, w (the fc weight, OC x C), w2 (the projection back, C x OC), dout (BT x C)
    size_t nin[4] = {ni, nw, nw, ni};
    for (int i = 0; i < 4; i++) {
        in[i] = (float*)mallocCheck(nin[i] * sizeof(float));
        for (size_t j = 0; j < nin[i]; j++) { in[i][j] = round_dtype((float)rand_d(), KERNELS_DTYPE); }
    }
    float* bias = (float*)mallocCheck(OC * sizeof(float));
    for (int j = 0; j < OC; j++) { bias[j] = round_dtype(0.1f * (float)rand_d(), KERNELS_DTYPE); }
    // outputs of a run: pre, h (GELU), dh (into the hidden layer, DGELU), dw2 (accumulated onto 1.5), dinp, dw (overwritten)
    size_t nout[6] = {nh, nh, nh, nw, ni, nw};
    float* out[3][6];
    char path[700];
    snprintf(path, sizeof(path), "%s/matmul_algos.txt", test_scratch_dir("test_gpt"));
    remove(path);
#ifdef CUDA_EMU_H
    setenv("CUDA_EMU_LT_FAST", "2", 1);
    uint64_t runs_before_reload = 0, runs_after_reload = 0;
#endif
    cublasLtMatmulAlgo_t tuned_algo[64];
    int ntuned = 0, nplans[3] = {0, 0, 0}, by_source[3][3] = {{0}}, planted = 1, single = 0;
    for (int run = 0; run < 3; run++) {
        kernels_matmul_plans_reset();
        if (run == 0) { kernels_set_matmul_tune(ctx, 0, NULL, 0); }
        if (run == 1) { kernels_set_matmul_tune(ctx, 4, path, 1); }
        if (run == 2) { kernels_set_matmul_tune(ctx, 0, path, 0); }
        for (int i = 0; i < 6; i++) {
            out[run][i] = (float*)mallocCheck(nout[i] * sizeof(float));
            for (size_t j = 0; j < nout[i]; j++) { out[run][i][j] = i == 3 ? 1.5f : NAN; }
        }
#ifdef CUDA_EMU_H
        if (run == 2) { runs_before_reload = emu::lt_runs_total(); }
#endif
        matmul_forward_gelu(ctx, out[run][0], out[run][1], in[0], in[1], bias, BT, C, OC);
        // the projection's backward: dh = (dout @ w2) * GELU'(pre), dw2 += dout^T h
        matmul_backward_gelu(ctx, out[run][2], out[run][3], NULL, in[3], out[run][1], in[2], out[run][0], BT, OC, C, 1);
        matmul_backward(ctx, out[run][4], out[run][5], NULL, out[run][2], in[0], in[1], BT, C, OC, 0);
#ifdef CUDA_EMU_H
        if (run == 2) { runs_after_reload = emu::lt_runs_total(); }
#endif
        for (int i = 0; i < kernels__lt_num_plans; i++) {
            const KernelsLtPlan* pl = &kernels__lt_plans[i];
            if (!pl->usable) { continue; } // (an epilogue cuBLASLt has no algorithm for: the unfused ops ran instead)
            nplans[run]++;
            by_source[run][pl->source]++;
            if (run == 1 && pl->source == KERNELS_ALGO_HEURISTIC && pl->found == 1) { single++; } // (nothing to choose from)
            if (run == 1 && ntuned < 64 && pl->source == KERNELS_ALGO_TUNED) { tuned_algo[ntuned++] = pl->algo; }
            if (run == 2 && pl->source == KERNELS_ALGO_FILE) {
                int same = 0;
                for (int t = 0; t < ntuned; t++) { same |= memcmp(&tuned_algo[t], &pl->algo, sizeof(pl->algo)) == 0; }
                if (!same) { planted = 0; }
            }
#ifdef CUDA_EMU_H
            emu::LtAlgo la;
            memcpy(&la, &pl->algo, sizeof(la));
            if (run >= 1 && la.index != 2) { planted = 0; }
#endif
        }
    }
    const char* names[6] = {"pre (GELU_AUX's input)", "GELU output", "dh (DGELU)", "dw2 (accumulated, beta 1)", "dinp", "dw"};
    double tol = KERNELS_DTYPE == DTYPE_FP32 ? 1e-4 : ldexp(1.0, -6);
    for (int i = 0; i < 6; i++) {
        double d2 = 0.0, r2 = 0.0;
        size_t nbits = 0;
        for (size_t j = 0; j < nout[i]; j++) {
            double d = (double)out[1][i][j] - out[0][i][j];
            d2 += d * d;
            r2 += (double)out[0][i][j] * out[0][i][j];
            nbits += memcmp(&out[1][i][j], &out[0][i][j], sizeof(float)) != 0;
        }
        double rel = sqrt(d2 / (r2 > 0.0 ? r2 : 1.0));
#ifdef CUDA_EMU_H
        check(nbits == 0, "--matmul-tune 4: the tuned products give the untuned bits (emulation)", "%s: %zu of %zu differ", names[i], nbits, nout[i]);
#else
        check(rel <= tol && isfinite(rel), "--matmul-tune 4: the tuned products within the tolerance of the untuned", "%s: |d|/|ref| %.3g, tolerance %.3g",
              names[i], rel, tol);
#endif
        size_t nreload = 0;
        for (size_t j = 0; j < nout[i]; j++) { nreload += memcmp(&out[2][i][j], &out[1][i][j], sizeof(float)) != 0; }
        check(nreload == 0, "--matmul-algos: the file's algorithms give the tuned run's bits", "%s: %zu of %zu differ", names[i], nreload, nout[i]);
    }
    // (on a GPU the heuristic may offer a shape one algorithm only: nothing to time, and nothing written)
    check(by_source[1][KERNELS_ALGO_TUNED] > 0 && by_source[1][KERNELS_ALGO_TUNED] + single == nplans[1],
          "--matmul-tune 4: every matmul shape with candidates to choose from was tuned", "%d of %d plans tuned, %d with one candidate",
          by_source[1][KERNELS_ALGO_TUNED], nplans[1], single);
    check(nplans[2] == nplans[1] && by_source[2][KERNELS_ALGO_FILE] == by_source[1][KERNELS_ALGO_TUNED],
          "--matmul-algos: every tuned shape takes the file's algorithm", "%d of %d plans from the file, %d tuned before",
          by_source[2][KERNELS_ALGO_FILE], nplans[2], by_source[1][KERNELS_ALGO_TUNED]);
    check(planted, "the chosen algorithms: the file holds the tuned ones (emulation: the candidate planted as the fastest)", "%s", "");
#ifdef CUDA_EMU_H
    check(runs_after_reload - runs_before_reload == (uint64_t)nplans[2], "--matmul-algos: read back, no candidate runs again (one product per shape)",
          "%llu products for %d shapes", (unsigned long long)(runs_after_reload - runs_before_reload), nplans[2]);
    // another cuBLASLt version: the file is not used (every plan the heuristic's, the planted fastest not taken)
    setenv("CUDA_EMU_LT_VERSION", "7", 1);
    kernels_matmul_plans_reset();
    kernels_set_matmul_tune(ctx, 0, path, 0);
    matmul_forward_gelu(ctx, out[2][0], out[2][1], in[0], in[1], bias, BT, C, OC);
    check(kernels__lt_num_plans > 0 && kernels__lt_plans[0].source == KERNELS_ALGO_HEURISTIC, "--matmul-algos: a file for another cuBLASLt version is not used",
          "source %d", kernels__lt_plans[0].source);
    unsetenv("CUDA_EMU_LT_VERSION");
    unsetenv("CUDA_EMU_LT_FAST");
#endif
    kernels_matmul_plans_reset();
    kernels_set_matmul_tune(ctx, 0, NULL, 0);
    for (int run = 0; run < 3; run++) { for (int i = 0; i < 6; i++) { free(out[run][i]); } }
    for (int i = 0; i < 4; i++) { free(in[i]); }
    free(bias);
}
#endif

// kernels_reserve: a fresh context's workspaces sized for a shape; then the ops that take workspaces run at that
// shape (the LayerNorm backward over `rows`, the bias gradient unfused and through matmul_backward, the attention
// backward, cuDNN's where this build runs it, the embedding backward's token sort, sampling's row of logits and its
// decoding step's attention) and grow none of them (kernels_grown_bytes 0), the count before allocating is what was
// allocated, and asking again adds nothing. Four shapes in which, in turn, the LayerNorm partials, the unfused bias
// gradient's (row groups x OC), the attention's row sums and the decoding step's splits are the largest need (on the
// emulation's 4 SMs and on a 132-SM H200 alike); the third also names shorter micro-steps of 1 and 3 rows (a batch
// ramp's: rest_B), and the attention forward and backward at those row counts must grow nothing either (cuDNN's
// plans per row count, made by kernels_reserve; elsewhere the workspaces grow with the rows). Then an
// embedding backward over twice the tokens must grow the sort, and the count must say so. Inputs are zeros: only the
// sizes matter here.
// (the kernels themselves on device buffers, not the op tests' stagers of host arrays that stage_ops.h puts in their
// place)
#pragma push_macro("layernorm_backward")
#pragma push_macro("matmul_backward")
#pragma push_macro("attention_backward")
#pragma push_macro("attention_forward_rows")
#pragma push_macro("attention_forward")
#undef layernorm_backward
#undef matmul_backward
#undef attention_backward
#undef attention_forward_rows
#undef attention_forward
static void test_reserve(void) {
    static const int rest[2] = {1, 3};
    const KernelsShapes cases[4] = {
        {4, 128, 64, 2, 32, 512, 32, 64, 1, NULL, 0}, // {B, T, C, nh, hs, rows, oc, vp, lrows, rest_B, n_rest_B}: LayerNorm partials over 512 rows
        {1, 16, 64, 4, 16, 16, 256, 64, 0, NULL, 0},  // the bias gradient of 256 columns
        {4, 128, 64, 4, 16, 8, 8, 64, 6, rest, 2},    // the attention backward's 4 x 4 heads x 128 rows (and 1 and 3 rows); 6 samples' logits
        {1, 256, 64, 4, 16, 8, 8, 64, 16, NULL, 0},   // a decoding step of 16 samples: 4 splits of 256 keys for 16 x 4 heads
    };
    const int V = 16;
    for (int k = 0; k < 4; k++) {
        const KernelsShapes* s = &cases[k];
        KernelCtx ctx;
        kernels_ctx_init(&ctx, KERNELS_DTYPE, s->T, s->C);
        size_t base = kernels_ctx_bytes(&ctx), want = kernels_reserve(&ctx, s, 0), got = kernels_reserve(&ctx, s, 1);
        size_t after = kernels_ctx_bytes(&ctx), again = kernels_reserve(&ctx, s, 0);
        int BT = s->B * s->T, Ca = s->nh * s->hs;
        // zeroed device buffers, each large enough for every operand below (twice the tokens for the last call)
        size_t n = (size_t)2 * BT * 3 * s->C;
        size_t cands[5] = {(size_t)s->rows * s->C, (size_t)BT * s->oc, (size_t)s->oc * s->C, (size_t)s->vp * s->C,
                           (size_t)(s->lrows > 1 ? s->lrows : 1) * s->T * 2 * s->C}; // (the last: the KV cache)
        for (int i = 0; i < 5; i++) { if (cands[i] > n) { n = cands[i]; } }
        floatX* x[4];
        float* f[3];
        for (int i = 0; i < 4; i++) { x[i] = (floatX*)dev_alloc(&ctx, n * sizeof(floatX)); }
        for (int i = 0; i < 3; i++) { f[i] = (float*)dev_alloc(&ctx, n * sizeof(float)); }
        int32_t* tok = (int32_t*)dev_alloc(&ctx, (size_t)2 * BT * sizeof(int32_t));
        size_t held = kernels_ctx_bytes(&ctx);
        layernorm_backward(&ctx, x[0], f[0], f[0] + s->C, x[1], x[2], x[3], f[1], f[2], s->rows, s->C, 0);
        kernels__bias_grad(&ctx, f[0], x[1], BT, s->oc, 0);
        matmul_backward(&ctx, x[0], f[0], f[1], x[1], x[2], x[3], BT, s->C, s->oc, 0);
        attention_forward(&ctx, x[3], f[1], x[2], s->B, s->T, Ca, s->nh);
        attention_backward(&ctx, x[0], x[1], x[2], x[3], f[1], s->B, s->T, Ca, s->nh);
        for (int i = 0; i < s->n_rest_B; i++) { // (a batch ramp's shorter micro-steps)
            attention_forward(&ctx, x[3], f[1], x[2], s->rest_B[i], s->T, Ca, s->nh);
            attention_backward(&ctx, x[0], x[1], x[2], x[3], f[1], s->rest_B[i], s->T, Ca, s->nh);
        }
        encoder_backward(&ctx, f[0], f[1], x[1], tok, 0, V, s->B, s->T, s->C);
        classifier_logits_rows(&ctx, f[0], x[1], x[2], s->lrows > 1 ? s->lrows : 1, s->C, s->vp);
        // a decoding step of the lrows samples at the last position (T 128: two splits of the keys to merge)
        attention_forward_rows(&ctx, x[0], x[1], x[2], s->lrows > 1 ? s->lrows : 1, s->T, s->T, s->T - 1, Ca, s->nh);
        dev_sync(&ctx);
        size_t grown = kernels_grown_bytes(&ctx), held_after = kernels_ctx_bytes(&ctx);
        char name[160];
        snprintf(name, sizeof(name), "kernels_reserve, shape %d of 4: a step's workspaces sized up front; the ops at that shape%s grow none", k + 1,
                 s->n_rest_B ? " and the attention at 1 and 3 rows" : "");
        report(want > 0 && got == want && after == base + got && again == 0 && grown == 0 && held_after == held, name,
               "counted %zu bytes, allocated %zu (context %zu -> %zu), again %zu; grown by the ops %zu", want, got, base, after,
               again, grown);
        // past the reserved shape: the sort grows, and the count says so
        encoder_backward(&ctx, f[0], f[1], x[1], tok, 0, V, 2 * s->B, s->T, s->C);
        dev_sync(&ctx);
        size_t grown2 = kernels_grown_bytes(&ctx);
        snprintf(name, sizeof(name), "kernels_reserve, shape %d of 4: twice the tokens grow the sort, counted", k + 1);
        report(grown2 > 0 && kernels_ctx_bytes(&ctx) == held + grown2, name, "grown %zu bytes", grown2);
        for (int i = 0; i < 4; i++) { dev_free(&ctx, x[i]); }
        for (int i = 0; i < 3; i++) { dev_free(&ctx, f[i]); }
        dev_free(&ctx, tok);
        kernels_ctx_free(&ctx);
    }
}
#pragma pop_macro("attention_forward")
#pragma pop_macro("attention_forward_rows")
#pragma pop_macro("attention_backward")
#pragma pop_macro("matmul_backward")
#pragma pop_macro("layernorm_backward")

#ifdef KERNELS_CUDA
// A graph's capture (kernels.h) in which a call fails: the run goes on, the capture ends with no graph (the caller
// then launches the ops one by one), and the context works after it: a copy makes the round trip. The failed call is
// a status passed to the check directly (what a call CUDA refuses during a capture would return).
static void test_capture_failure(void) {
    float host[4] = {1, 2, 3, 4}, back[4] = {0};
    float* dev = (float*)dev_alloc(&g_ctx, sizeof(host));
    int began = kernels_capture_begin(&g_ctx);
    gpuCheck(cudaErrorInvalidValue);
    void* graph = kernels_capture_end(&g_ctx);
    dev_copy_h2d(&g_ctx, dev, host, sizeof(host));
    dev_copy_d2h(&g_ctx, back, dev, sizeof(back));
    dev_sync(&g_ctx);
    report(began == 1 && graph == NULL && memcmp(host, back, sizeof(host)) == 0 && !kernels__capturing,
           "a call failing during a graph's capture: no graph (the ops run one by one), and the context works after it",
           "began %d, graph %p, round trip %s", began, graph, memcmp(host, back, sizeof(host)) == 0 ? "exact" : "wrong");
    dev_free(&g_ctx, dev);
}
#endif

// The file streams' double buffer (params_from_f32 / params_to_f32): values representable in the storage type make
// the round trip exactly, over several staging chunks and an odd tail, with the two pinned buffers taking turns
// across calls (an upload is still in flight when the next call starts).
static void test_param_streams(void) {
    size_t n = 2 * KERNELS_STAGE_FLOATS + 12345, m = 1000;
    float* host = (float*)mallocCheck(n * sizeof(float));
    float* back = (float*)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { host[i] = round_dtype((float)((double)(i % 1000003) / 1000003.0 - 0.5), KERNELS_DTYPE); }
    floatX* dev = (floatX*)dev_alloc(&g_ctx, n * sizeof(floatX));
    floatX* small = (floatX*)dev_alloc(&g_ctx, m * sizeof(floatX));
    params_from_f32(&g_ctx, dev, host, n);
    params_from_f32(&g_ctx, small, host + 7, m); // the other buffer's turn, right after
    for (size_t i = 0; i < n; i++) { back[i] = NAN; }
    params_to_f32(&g_ctx, back, dev, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) { bad += memcmp(&back[i], &host[i], sizeof(float)) != 0; }
    float sb[1000];
    params_to_f32(&g_ctx, sb, small, m);
    for (size_t i = 0; i < m; i++) { bad += memcmp(&sb[i], &host[7 + i], sizeof(float)) != 0; }
    check(bad == 0, "params_from_f32 / params_to_f32 round trip through the pinned double buffer (3 chunks + a second call)",
          "%zu of %zu values differ", bad, n + m);
    dev_free(&g_ctx, dev);
    dev_free(&g_ctx, small);
    free(host);
    free(back);
}
#endif

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

// The shape of a reference model file, its layout, and its debug state. Returns 0 (a failure recorded) if the state
// cannot be read; on success the caller frees pl (layout_free) and the state's buffers.
static int reference_read(const char* model_path, const char* state_path, GPTConfig* gc, ParamLayout* pl, DebugState* s) {
    int version;
    FILE* fp;
    model_read_header(model_path, gc, &version, &fp);
    fclose(fp);
    layout_build(pl, gc);
    if (!debug_state_read(state_path, pl, s)) { layout_free(pl); return 0; }
    return 1;
}

// Builds a single-process model from a model file, with ZeRO stage 0 and activations for (B,T), in storage type
// dtype with --recompute mode recompute.
static void build_model_as(GPT* m, ZeroOptimizer* z, ParallelContext* pc, const char* path, int B, int T, int dtype, int recompute) {
    GPTConfig gc;
    int version;
    FILE* fp;
    model_read_header(path, &gc, &version, &fp);
    gpt_alloc_params(m, &gc, 1, dtype, T);
    gpt_zero_init(z, m, 0, &pc->dp_group);
    float* host = (float*)mallocCheck(m->layout.num_params * sizeof(float));
    model_load_params(path, fp, version, &m->layout, host);
    gpt_set_params(m, z, host);
    free(host);
    gpt_alloc_grads(m, 0, 1);
    activations_alloc(&m->acts, &m->ctx, &gc, B, T, recompute);
}

static void build_model(GPT* m, ZeroOptimizer* z, ParallelContext* pc, const char* path, int B, int T) {
    build_model_as(m, z, pc, path, B, T, DTYPE_FP32, 0);
}

// A host copy of n floats of device memory (fp32 buffers: gradients, moments); the caller frees it.
static float* host_copy_f32(const KernelCtx* ctx, const float* dev, size_t n) {
    float* h = (float*)mallocCheck(n * sizeof(float));
    dev_copy_d2h(ctx, h, dev, n * sizeof(float));
    dev_sync(ctx);
    return h;
}

// Forward-backward of the last forward against y, returning its mean loss (the device's loss sum, read back).
static float fwd_bwd_loss(GPT* m, const int32_t* y, float dloss_scale, BackwardComm* bc) {
    gpt_clear_loss_sum(m);
    gpt_forward_backward(m, y, dloss_scale, bc);
    return (float)(gpt_take_loss_sum(m) / ((double)m->B * m->T));
}

// Checks logits, loss and every gradient tensor of a model + debug state pair. Tolerances: the reference is
// PyTorch float32 on the CPU; our float32 sums run in another order, so logits and loss agree to ~1e-6 relative,
// and gradients to atol 1e-5 + rtol 1e-3 (tiny gradient elements carry relative rounding noise).
static void check_reference(const char* model_path, const char* state_path, ParallelContext* pc, double grad_atol) {
    GPTConfig gc;
    ParamLayout pl;
    DebugState s;
    if (!reference_read(model_path, state_path, &gc, &pl, &s)) { return; }
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, model_path, s.B, s.T);
    gpt_forward(&m, s.x, s.B, s.T);
    size_t BT = (size_t)s.B * s.T, V = gc.vocab_size, Vp = gc.padded_vocab_size;
    float* logits = (float*)mallocCheck(BT * V * 4);
    float* rows = (float*)mallocCheck(BT * Vp * 4);
    // every row in one product, as sampling reads the rows of the sequences it draws together
    float* dev_rows = (float*)dev_alloc(&m.ctx, BT * Vp * 4);
    classifier_logits_rows(&m.ctx, dev_rows, m.acts.lnf, m.p.wte, (int)BT, gc.channels, (int)Vp);
    dev_copy_d2h(&m.ctx, rows, dev_rows, BT * Vp * 4);
    dev_sync(&m.ctx);
    for (size_t r = 0; r < BT; r++) { memcpy(logits + r * V, rows + r * Vp, V * 4); }
    dev_free(&m.ctx, dev_rows);
    check_close_f("reference logits (classifier_logits_rows, all rows at once)", logits, s.logits, BT * V, 1e-5, 1e-4);
    BackwardComm bc = {NULL, 0, 1, 1};
    float loss = fwd_bwd_loss(&m, s.y, 1.0f / BT, &bc);
    report(fabsf(loss - s.loss) <= 1e-5f * (1 + fabsf(s.loss)), "reference loss", "got %.9g, expected %.9g", loss, s.loss);
    int all_ok = 1;
    float* grads = host_copy_f32(&m.ctx, m.grads, pl.num_params);
    for (int i = 0; i < pl.num_tensors; i++) {
        const ParamEntry* e = &pl.table[i];
        char name[96];
        snprintf(name, sizeof(name), "reference grad %s", e->name);
        size_t n = e->rows * e->cols;
        // float32 gradients of near-zero elements: absolute tolerance; the rest relative
        double maxref = 0;
        for (size_t j = 0; j < n; j++) { maxref = fmax(maxref, fabs(s.grads[e->offset + j])); }
        all_ok &= check_close_f(name, grads + e->offset, s.grads + e->offset, n, grad_atol * (maxref > 1 ? maxref : 1), 1e-3);
    }
    (void)all_ok;
    free(logits); free(rows); free(grads);
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
    ParamLayout pl;
    DebugState s;
    if (!reference_read(mp, sp, &gc, &pl, &s)) { return; }
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, mp, s.B, s.T);
    Config c;
    config_defaults(&c);
    c.lr = g_traj_lr; strcpy(c.lr_schedule, "constant"); c.warmup = 0; c.weight_decay = 0.1f; c.grad_clip = 1.0f; c.steps = 10;
    BackwardComm bc = {NULL, 0, 1, 1};
    int bad = 0;
    char detail[2048] = "";
    size_t dl = 0;
    for (int step = 0; step < 10; step++) {
        gpt_forward(&m, s.x, s.B, s.T);
        float loss = fwd_bwd_loss(&m, s.y, 1.0f / (s.B * s.T), &bc);
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
    float* params = (float*)mallocCheck(m.layout.num_params * sizeof(float));
    gpt_get_params(&m, params);
    for (size_t i = (size_t)gc.vocab_size * gc.channels; i < (size_t)gc.padded_vocab_size * gc.channels; i++) { pad_ok &= params[i] == 0.0f; }
    free(params);
    report(pad_ok, "padded vocabulary rows stay zero through training", "%s", "");
    free(s.x); free(s.y); free(s.logits); free(s.grads);
    zero_free(&z);
    gpt_free(&m);
    layout_free(&pl);
}

#ifndef KERNELS_CUDA // the tests below read model buffers as host memory: CPU build only

// Model file round trip: save in llm.c order and load back bit for bit; bf16 (version 5) loading.
static void test_model_files(const char* dir, ParallelContext* pc) {
    char mp[1024];
    snprintf(mp, sizeof(mp), "%s/ref_model.bin", dir);
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, mp, 1, 4);
    char tmp[1024], tmp5[1024];
    snprintf(tmp, sizeof(tmp), "%s/roundtrip.bin", test_scratch_dir("test_gpt"));
    snprintf(tmp5, sizeof(tmp5), "%s/bf16.bin", test_scratch_dir("test_gpt"));
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
// Units of the training loop, each against an independent expectation (a closed form, a name list, a direct
// computation), not against another run of the same code.

// The schedule of lr_at against its definition, evaluated in double: linear warmup lr * (s + 1) / W for s < W;
// then constant, or a decay from lr to lr_min = lr * final_frac over the steps from the warmup to D (--steps, or
// --lr-decay-steps), after which the rate stays at lr_min, with ratio = min(1, (s - W) / (D - W)): cosine
// lr_min + (lr - lr_min) (1 + cos(pi ratio)) / 2, linear lr - (lr - lr_min) ratio; or wsd (llm.c's): lr until
// Ds = floor(0.8 D), then lr_min + (lr - lr_min) (1 - sqrt(min(1, (s - Ds) / (D - Ds)))).
// Tolerance 1e-6 of the peak: lr_at computes in float.
static double lr_closed_form(double lr, const char* sched, int W, double frac, int D, int s) {
    double lr_min = lr * frac;
    if (s < W) { return lr * (s + 1) / W; }
    if (strcmp(sched, "constant") == 0) { return lr; }
    if (strcmp(sched, "wsd") == 0) {
        int ds = (int)floor(0.8 * D + 1e-9);
        return s < ds ? lr : lr_min + (lr - lr_min) * (1.0 - sqrt(fmin(1.0, (double)(s - ds) / (D - ds))));
    }
    double ratio = D > W ? fmin(1.0, (double)(s - W) / (D - W)) : 1.0;
    if (strcmp(sched, "linear") == 0) { return lr - (lr - lr_min) * ratio; }
    return lr_min + (lr - lr_min) * 0.5 * (1.0 + cos(M_PI * ratio));
}

static void test_lr_schedule(void) {
    struct { int warmup; const char* sched; float frac; int steps; } cases[] = {
        {0, "cosine", 0.0f, 10}, {3, "cosine", 0.1f, 12}, {4, "linear", 0.2f, 10}, {2, "constant", 0.0f, 8},
        {10, "cosine", 0.1f, 10}, {0, "linear", 0.0f, 1}, {1, "cosine", 0.5f, 3},
        {0, "wsd", 0.0f, 10}, {5, "wsd", 0.1f, 20}, {2, "wsd", 0.0f, 7}, {3, "wsd", 0.25f, 33},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        Config c;
        config_defaults(&c);
        c.lr = 6e-4f; c.warmup = cases[k].warmup; c.final_lr_frac = cases[k].frac; c.steps = cases[k].steps;
        strcpy(c.lr_schedule, cases[k].sched);
        double worst = 0.0;
        int ok = 1;
        for (int s = 0; s <= c.steps; s++) {
            double want = lr_closed_form(c.lr, c.lr_schedule, c.warmup, c.final_lr_frac, c.steps, s), got = lr_at(&c, s, 1.0);
            double err = fabs(got - want) / c.lr;
            if (!(err <= 1e-6)) { ok = 0; }
            worst = fmax(worst, err);
        }
        char name[160];
        snprintf(name, sizeof(name), "lr schedule %s, warmup %d, final fraction %g, %d steps: closed form at every step",
                 cases[k].sched, cases[k].warmup, cases[k].frac, cases[k].steps);
        report(ok, name, "max error %.3g of the peak", worst);
    }
    // anchors written out by hand
    Config c;
    config_defaults(&c);
    c.lr = 1.0f; c.warmup = 4; c.final_lr_frac = 0.1f; c.steps = 14; strcpy(c.lr_schedule, "cosine");
    report(lr_at(&c, 0, 1.0) == 0.25f && lr_at(&c, 3, 1.0) == 1.0f && lr_at(&c, 4, 1.0) == 1.0f && fabsf(lr_at(&c, 9, 1.0) - 0.55f) < 1e-6f &&
           fabsf(lr_at(&c, 14, 1.0) - 0.1f) < 1e-6f, "lr schedule anchors: step 0 = lr/W, end of warmup = lr, midpoint, final = lr * frac",
           "%g %g %g %g %g", lr_at(&c, 0, 1.0), lr_at(&c, 3, 1.0), lr_at(&c, 4, 1.0), lr_at(&c, 9, 1.0), lr_at(&c, 14, 1.0));
    // wsd, 10 steps, no warmup: the peak through step 8 (= 0.8 x 10), then 1 - sqrt(1/2) at 9, lr_min at 10
    c.warmup = 0; c.final_lr_frac = 0.0f; c.steps = 10; strcpy(c.lr_schedule, "wsd");
    report(lr_at(&c, 0, 1.0) == 1.0f && lr_at(&c, 7, 1.0) == 1.0f && lr_at(&c, 8, 1.0) == 1.0f && fabsf(lr_at(&c, 9, 1.0) - 0.29289322f) < 1e-6f &&
           lr_at(&c, 10, 1.0) == 0.0f, "lr schedule wsd anchors: constant to 80%, 1 - sqrt(r) after, 0 at the end",
           "%g %g %g %g %g", lr_at(&c, 0, 1.0), lr_at(&c, 7, 1.0), lr_at(&c, 8, 1.0), lr_at(&c, 9, 1.0), lr_at(&c, 10, 1.0));
}

// --lr-decay-steps D: the decay runs from the end of the warmup to D, then the rate stays at lr_min: lr_closed_form
// with D for the schedule's length, against lr_at at every step to past --steps (tolerance as above).
static void test_lr_decay_steps(void) {
    struct { int warmup; const char* sched; float frac; int steps, decay; } cases[] = {
        {3, "cosine", 0.1f, 20, 12}, {0, "linear", 0.0f, 10, 4}, {2, "wsd", 0.1f, 15, 10}, {5, "cosine", 0.0f, 10, 30},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        Config c;
        config_defaults(&c);
        c.lr = 6e-4f; c.warmup = cases[k].warmup; c.final_lr_frac = cases[k].frac; c.steps = cases[k].steps;
        c.lr_decay_steps = cases[k].decay;
        strcpy(c.lr_schedule, cases[k].sched);
        double worst = 0.0;
        for (int s = 0; s <= c.steps + 3; s++) {
            double want = lr_closed_form(c.lr, c.lr_schedule, c.warmup, c.final_lr_frac, c.lr_decay_steps, s);
            worst = fmax(worst, fabs(lr_at(&c, s, 1.0) - want) / c.lr);
        }
        char name[200];
        snprintf(name, sizeof(name), "lr schedule %s, warmup %d, --lr-decay-steps %d of %d steps: closed form at every step, lr_min after the decay",
                 cases[k].sched, cases[k].warmup, cases[k].decay, cases[k].steps);
        report(worst <= 1e-6, name, "max error %.3g of the peak", worst);
    }
}

// The batch ramp (ramp_batch, ramp_walk, lr_of_step) against Megatron-LM's rule computed directly, a step at a time:
// n = F/S - 1 increments, each after R/n tokens; a step after c tokens is S (1 + floor(c / (R/n))) while c < R, then F;
// the last takes what is left of steps x F. Cases: R a multiple of n or not, levels the steps jump over (S large next
// to R/n), a budget that ends inside the ramp, a ramp of one increment.
static void test_batch_ramp(void) {
    struct { long F, S, R; int steps; } cases[] = {
        {64, 16, 96, 4}, {64, 16, 100, 6}, {1024, 32, 4000, 9}, {96, 32, 20, 5}, {64, 16, 10000, 3}, {64, 32, 64, 3}, {512, 8, 777, 2},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        Config c;
        config_defaults(&c);
        c.total_batch_size = cases[k].F; c.batch_ramp_start = cases[k].S; c.batch_ramp_tokens = cases[k].R; c.steps = cases[k].steps;
        long F = c.total_batch_size, S = c.batch_ramp_start, budget = (long)c.steps * F;
        double per_inc = (double)cases[k].R / (double)(F / S - 1);
        long done = 0;
        int n = 0, ok = 1;
        char why[200] = "";
        while (done < budget && ok) {
            long b = done < cases[k].R ? S * (1 + (long)floor((double)done / per_inc + 1e-12)) : F;
            if (b > budget - done) { b = budget - done; }
            int64_t walked, got = ramp_batch(&c, done), before = ramp_walk(&c, n, &walked);
            if (got != b || before != done || walked != n) {
                ok = 0;
                snprintf(why, sizeof(why), "step %d after %ld tokens: batch %lld (want %ld), walk %lld over %lld steps", n, done,
                         (long long)got, b, (long long)before, (long long)walked);
            }
            done += b;
            n++;
        }
        int64_t total_steps, end = ramp_walk(&c, -1, &total_steps);
        ok = ok && end == budget && total_steps == n && ramp_batch(&c, budget) == 0;
        char name[200];
        snprintf(name, sizeof(name), "batch ramp F %ld, S %ld, R %ld, %d x F tokens: every step's batch and the walk to it, %d steps in all",
                 F, S, cases[k].R, c.steps, n);
        report(ok, name, "%s; the run: %lld tokens in %lld steps", why, (long long)end, (long long)total_steps);
    }
    // GPT-3 125M's script (scripts/run_gpt3_125M.sh; run_scripts_tests pins run_lib.sh's count to the same number):
    // 572,204 whole batches of 524,288 tokens, the ramp from 32,768 over 4B tokens: 591,580 steps
    {
        Config g;
        config_defaults(&g);
        g.total_batch_size = 524288; g.batch_ramp_start = 32768; g.batch_ramp_tokens = 4000000000L; g.steps = 572204;
        int64_t n, end = ramp_walk(&g, -1, &n);
        report(n == 591580 && end == (int64_t)572204 * 524288, "batch ramp: GPT-3 125M's script takes 591,580 steps for its 572,204 whole batches",
               "%lld steps, %lld tokens", (long long)n, (long long)end);
    }
    // ramp_rest_rows (the shorter micro-steps' row counts, whose attention workspaces are sized at start-up) against
    // the steps themselves: each step's batch from ramp_batch as rows on each rank, modulo B; the distinct ones from
    // step `from` on, ascending. Cases: test_runs' ramp (F 96, S 32, R 200, 6 x F; T 8) with B 3 on 1 and 2 ranks from
    // the start ({1, 2}: 4 rows = 3 + 1, 8 = 2 x 3 + 2) and from step 8 ({1}: steps of 96 and 32), with B 2 (none); GPT-3 125M
    // on 8 ranks of B 16 (2, 4, ..., 14 rows, and the last step's)
    {
        struct { long F, S, R; int steps, B, T, dp, from, n_want, want[8]; } rc[] = {
            {96, 32, 200, 6, 3, 8, 1, 0, 2, {1, 2}}, {96, 32, 200, 6, 3, 8, 2, 0, 2, {1, 2}}, {96, 32, 200, 6, 3, 8, 1, 8, 1, {1}},
            {96, 32, 200, 6, 2, 8, 1, 0, 0, {0}},    {524288, 32768, 4000000000L, 572204, 16, 2048, 8, 0, -1, {0}},
        };
        for (size_t k = 0; k < sizeof(rc) / sizeof(rc[0]); k++) {
            Config g;
            config_defaults(&g);
            g.total_batch_size = rc[k].F; g.batch_ramp_start = rc[k].S; g.batch_ramp_tokens = rc[k].R; g.steps = rc[k].steps;
            int seen[64] = {0}, n_seen = 0, rows[64];
            int64_t steps, done = ramp_walk(&g, rc[k].from, NULL);
            ramp_walk(&g, -1, &steps);
            for (int64_t st = rc[k].from; st < steps; st++) {
                int64_t b = ramp_batch(&g, done);
                int r = (int)(b / ((int64_t)rc[k].T * rc[k].dp) % rc[k].B);
                if (r > 0 && !seen[r]) { seen[r] = 1; n_seen++; }
                done += b;
            }
            int n = ramp_rest_rows(&g, rc[k].B, rc[k].T, rc[k].dp, rc[k].from, rows), ok = n == n_seen && (rc[k].n_want < 0 || n == rc[k].n_want);
            char got[160] = "";
            for (int i = 0, r = 1; i < n; i++) {
                while (r < rc[k].B && !seen[r]) { r++; }
                ok = ok && rows[i] == r && (rc[k].n_want < 0 || rows[i] == rc[k].want[i]);
                r++;
                snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d", i ? " " : "", rows[i]);
            }
            char name[200];
            snprintf(name, sizeof(name), "batch ramp F %ld, S %ld, B %d x T %d on %d rank(s), from step %d: the shorter micro-steps' rows (ramp_rest_rows)",
                     rc[k].F, rc[k].S, rc[k].B, rc[k].T, rc[k].dp, rc[k].from);
            report(ok, name, "got %d: %s; the steps give %d", n, got, n_seen);
        }
    }
    // the schedule on tokens, by hand: F 64, S 16, R 96, warmup 2, cosine over 4 whole steps; the batches are
    // 16 16 32 48 64 64 16; warmup at the position after each step (0.25 0.5 1 1.75 of 2), the peak for the step that
    // crosses 2, then the cosine at 2.75 and 3.75
    Config c;
    config_defaults(&c);
    c.lr = 1.0f; c.warmup = 2; c.final_lr_frac = 0.0f; c.steps = 4; strcpy(c.lr_schedule, "cosine");
    c.total_batch_size = 64; c.batch_ramp_start = 16; c.batch_ramp_tokens = 96;
    double want[7] = {0.125, 0.25, 0.5, 0.875, 1.0, 0.5 * (1.0 + cos(M_PI * 0.375)), 0.5 * (1.0 + cos(M_PI * 0.875))};
    double worst = 0.0;
    for (int s = 0; s < 7; s++) { worst = fmax(worst, fabs(lr_of_step(&c, s) - want[s])); }
    report(worst <= 1e-6, "batch ramp: the learning rate runs on tokens (warmup after each step, the peak across its end, cosine after)",
           "max error %.3g", worst);
}

// llm.c's model descriptors against the named shapes (a separate table): d12/gpt2:d12 is GPT-2 124M, d24 350M,
// d36 774M, d48 1558M; gpt3:c768 ... gpt3:c2560 are GPT-3 125M ... 2.7B (context 2048); other depths d<N> are N
// layers of 64N channels in N heads; sizes llm.c has not are unknown.
static void test_llmc_descriptors(void) {
    const char* pairs[][2] = {{"d12", "gpt2-124M"}, {"gpt2:d12", "gpt2-124M"}, {"d24", "gpt2-350M"}, {"d36", "gpt2-774M"},
                              {"gpt2:d48", "gpt2-1558M"}, {"gpt3:c768", "gpt3-125M"}, {"gpt3:c1024", "gpt3-350M"},
                              {"gpt3:c1536", "gpt3-760M"}, {"gpt3:c2048", "gpt3-1.3B"}, {"gpt3:c2560", "gpt3-2.7B"}};
    int ok = 1;
    char bad[128] = "";
    for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
        GPTConfig a, b;
        memset(&a, 0, sizeof(a));
        memset(&b, 0, sizeof(b));
        int same = config_from_name(&a, pairs[k][0]) && config_from_name(&b, pairs[k][1]) && memcmp(&a, &b, sizeof(a)) == 0;
        if (!same && ok) { snprintf(bad, sizeof(bad), "%s vs %s", pairs[k][0], pairs[k][1]); }
        ok &= same;
    }
    GPTConfig g;
    int d5 = config_from_name(&g, "d5") && g.num_layers == 5 && g.channels == 320 && g.num_heads == 5 && g.max_seq_len == 1024;
    int d60 = config_from_name(&g, "d60") && g.channels == 1920 && g.num_heads == 30;
    int c12288 = config_from_name(&g, "gpt3:c12288") && g.num_layers == 96 && g.num_heads == 96 && g.max_seq_len == 2048;
    int unknown = !config_from_name(&g, "gpt2:d13") && !config_from_name(&g, "gpt3:c100") && !config_from_name(&g, "d") &&
                  !config_from_name(&g, "gpt3:c") && !config_from_name(&g, "d12x");
    report(ok && d5 && d60 && c12288 && unknown, "llm.c's model descriptors equal the named shapes; other depths 64N; unknown sizes refused",
           "%s d5 %d d60 %d c12288 %d unknown %d", bad, d5, d60, c12288, unknown);
}

// The outlier guard (outlier.h) against a direct two-pass computation over the last W values: mean, then the mean
// squared deviation (a different formula from the guard's sum of squares; they agree to 1e-9 here, the values being
// of order 1 and the variance not small). Also: no z-score while the window fills, 0 for a constant window,
// non-finite values kept out, the skip rule, and the checkpoint round trip (outlier_get/outlier_set), into a smaller
// window too.
static void test_outlier_guard(void) {
    enum { W = 16, N = 200 };
    double xs[N];
    uint64_t rng = 7;
    for (int i = 0; i < N; i++) { xs[i] = 3.0 + (double)(rng_next(&rng) % 1000) / 1000.0; }
    xs[100] = 9.0; // an outlier
    OutlierWindow w;
    outlier_init(&w, W);
    int nan_while_filling = 1, z_ok = 1;
    double worst = 0.0, z100 = 0.0;
    for (int i = 0; i < N; i++) {
        double z = outlier_push(&w, xs[i]);
        if (i < W) { nan_while_filling &= isnan(z); continue; }
        double mean = 0.0, ss = 0.0;
        for (int j = i - W + 1; j <= i; j++) { mean += xs[j]; }
        mean /= W;
        for (int j = i - W + 1; j <= i; j++) { ss += (xs[j] - mean) * (xs[j] - mean); }
        double want = (xs[i] - mean) / sqrt(ss / W);
        if (!(fabs(z - want) <= 1e-9)) { z_ok = 0; }
        worst = fmax(worst, fabs(z - want));
        if (i == 100) { z100 = z; }
    }
    report(nan_while_filling, "outlier guard: no z-score for the values that fill the window", "%s", "");
    report(z_ok, "outlier guard: z-scores equal the two-pass mean and deviation of the last W values", "max error %.3g", worst);
    const char* why = NULL;
    report(z100 > 3.0 && z100 <= sqrt(W - 1.0) && outlier_skip(NAN, z100, 0.0, 3.0, &why) && strcmp(why, "grad_norm") == 0 &&
           outlier_skip(z100, z100, 3.0, 3.0, &why) && strcmp(why, "loss") == 0 && !outlier_skip(z100, z100, 0.0, 0.0, &why) &&
           !outlier_skip(NAN, NAN, 1.0, 1.0, &why) && !outlier_skip(z100, 0.0, z100 + 0.01, 3.0, &why),
           "outlier guard: an outlier's z-score is high (at most sqrt(W - 1)), and skips when above a threshold that is on",
           "z %.4f", z100);
    // non-finite values do not enter; a constant window has z 0
    OutlierWindow c1;
    outlier_init(&c1, 4);
    for (int i = 0; i < 4; i++) { outlier_push(&c1, 2.5); }
    double zn = outlier_push(&c1, NAN), zi = outlier_push(&c1, INFINITY), zc = outlier_push(&c1, 2.5);
    report(isnan(zn) && isnan(zi) && zc == 0.0 && c1.count == 4, "outlier guard: NaN and inf stay out of the window; a constant window gives z 0",
           "%g %g %g, %d held", zn, zi, zc, c1.count);
    // round trip: the values out in arrival order, back into a window of the same size (the same next z-scores)
    // and into a smaller one (its newest values)
    double vals[W], small_vals[8];
    int n = outlier_get(&w, vals);
    OutlierWindow back, small;
    outlier_init(&back, W);
    outlier_set(&back, vals, n);
    outlier_init(&small, 8);
    outlier_set(&small, vals, n);
    int ns = outlier_get(&small, small_vals);
    int same = n == W && vals[W - 1] == xs[N - 1] && vals[0] == xs[N - W] && ns == 8 && small_vals[0] == xs[N - 8];
    for (int k = 0; k < 5 && same; k++) { same = outlier_push(&back, 1.0 + k) == outlier_push(&w, 1.0 + k); }
    report(same, "outlier guard: the windows' values leave and return in arrival order; a smaller window keeps the newest",
           "%d held, %d in the small one", n, ns);
}

// Weight decay applies to matrices and embeddings, never to biases or LayerNorm parameters: checked per tensor
// against a list of names, and by one AdamW step with zero gradients, which must shrink exactly the decayed
// tensors by the factor (1 - lr * wd) and leave every other value bit for bit unchanged.
static void test_weight_decay(const char* model_path, ParallelContext* pc) {
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, model_path, 1, 4);
    const char* decayed[] = {"wte", "wpe", "qkvw.", "attprojw.", "fcw.", "fcprojw."};
    int flags_ok = 1;
    char bad[256] = "";
    for (int i = 0; i < m.layout.num_tensors; i++) {
        const ParamEntry* e = &m.layout.table[i];
        int want = 0;
        for (int k = 0; k < 6; k++) { want |= strncmp(e->name, decayed[k], strlen(decayed[k])) == 0; }
        if (e->decay != want) { flags_ok = 0; snprintf(bad, sizeof(bad), "%s has decay %d", e->name, e->decay); }
    }
    report(flags_ok, "weight-decay flags: matrices and embeddings decay, biases and LayerNorm do not", "%s", bad);
    float* before = (float*)mallocCheck(m.layout.num_params * sizeof(float));
    memcpy(before, m.params, m.layout.num_params * sizeof(float));
    memset(m.grads, 0, m.layout.num_params * sizeof(float));
    const float lr = 0.01f, wd = 0.5f;
    AdamWHyper hp = {lr, 0.9f, 0.95f, 1e-8f, wd, 1.0f, 1, 0};
    zero_adamw_step(&z, m.params, m.grads, &hp);
    int shrink_ok = 1;
    double worst = 0.0;
    for (int i = 0; i < m.layout.num_tensors; i++) {
        const ParamEntry* e = &m.layout.table[i];
        for (size_t j = 0; j < e->rows * e->cols; j++) {
            size_t o = e->offset + j;
            if (e->decay) {
                double want = (double)before[o] * (1.0 - (double)lr * wd);
                double err = fabs(m.params[o] - want);
                if (!(err <= 1e-7 * fabs(want) + 1e-12)) { shrink_ok = 0; }
                worst = fmax(worst, err);
            } else if (m.params[o] != before[o]) {
                shrink_ok = 0;
            }
        }
    }
    report(shrink_ok, "AdamW with zero gradients shrinks exactly the decayed tensors by (1 - lr wd)", "max abs error %.3g", worst);
    free(before);
    zero_free(&z);
    gpt_free(&m);
}

// --adam-beta1, --adam-beta2 and --adam-eps reach the update: two optimizer_update steps with betas and eps far from
// the defaults (0.5, 0.7, 1e-3; no decay, no clipping) against AdamW's moments and step computed in double from the
// same gradients. Gradients ~1e-3, so eps is about as large as sqrt(v-hat) and the first step (where the betas cancel)
// already shows it; the second shows the betas. Each element's error is allowed 2 float32 ulps of the parameter
// (the rounding of the stored result) plus 1e-5 of its step (a few float operations, ~1e-7 each); the defaults would
// change the steps by tens of percent.
static void test_adam_hyper(const char* model_path, ParallelContext* pc) {
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, model_path, 1, 4);
    size_t n = m.layout.num_params;
    Config c;
    config_defaults(&c);
    c.adam_beta1 = 0.5f; c.adam_beta2 = 0.7f; c.adam_eps = 1e-3f; c.weight_decay = 0.0f; c.grad_clip = 0.0f;
    const double lr = 0.01, b1 = 0.5, b2 = 0.7, eps = 1e-3;
    double* mo = (double*)calloc(n, sizeof(double));
    double* vo = (double*)calloc(n, sizeof(double));
    float* before = (float*)mallocCheck(n * sizeof(float));
    if (!mo || !vo) { fatal("out of memory"); }
    uint64_t rng = 77;
    double worst[3] = {0.0, 0.0, 0.0}; // [t]: the largest error / allowance
    for (int t = 1; t <= 2; t++) {
        for (size_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            m.grads[i] = 1e-3f * (2.0f * (float)(rng >> 40) / 16777216.0f - 1.0f);
        }
        memcpy(before, m.params, n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            mo[i] = b1 * mo[i] + (1.0 - b1) * m.grads[i];
            vo[i] = b2 * vo[i] + (1.0 - b2) * (double)m.grads[i] * m.grads[i];
        }
        optimizer_update(&m, &z, &c, 0.0f, (float)lr, t, 1.0f, 0);
        for (size_t i = 0; i < n; i++) {
            double step = lr * (mo[i] / (1.0 - pow(b1, t))) / (sqrt(vo[i] / (1.0 - pow(b2, t))) + eps);
            double want = before[i] - step;
            double allow = 2.0 * FLT_EPSILON * fabs(want) + 1e-5 * fabs(step) + 1e-30;
            worst[t] = fmax(worst[t], fabs(m.params[i] - want) / allow);
        }
    }
    report(worst[1] <= 1.0 && worst[2] <= 1.0, "AdamW takes --adam-beta1, --adam-beta2 and --adam-eps (0.5, 0.7, 1e-3) from the config",
           "largest error / allowance: step 1 %.3g, step 2 %.3g", worst[1], worst[2]);
    free(mo); free(vo); free(before);
    zero_free(&z);
    gpt_free(&m);
}

// Reads the "step loss lr grad_norm" lines of ref_sched_trajectory.txt.
static int read_sched_trajectory(const char* path, double* loss, double* lr, double* norm, int max) {
    FILE* fp = fopen(path, "r");
    if (!fp) { return 0; }
    int n = 0, step;
    while (n < max && fscanf(fp, "%d %lf %lf %lf", &step, &loss[n], &lr[n], &norm[n]) == 4 && step == n) { n++; }
    fclose(fp);
    return n;
}

// The scheduled PyTorch trajectory (make_reference.py, step 4): 12 steps with warmup 3, cosine decay to 0.1 of
// the peak 3e-3, weight decay 0.5, clipping at 1.0. Compared per step (loss, lr, gradient norm) and, after the
// last step, per tensor and per element (parameters). Tolerances, from the observed float32 differences (losses
// ~5e-7, norms ~1e-7 relative, parameters mostly ~1e-7, at most 1.3e-6 absolute on an fcw element with a small,
// Adam-amplified gradient): loss 1e-5 absolute, lr 1e-6 and norm 1e-5 relative, parameters 5e-6 absolute + 1e-4
// relative (room for another BLAS kernel's rounding). These sit well below what one wrong detail moves: decaying one
// bias tensor by mistake moves it by ~lr * wd * |p| ~ 3e-5 per step; a warmup off by one changes the first
// steps' updates by 1/3.
// One exception, by the math: the key bias (qkvb elements [C, 2C)) has an exactly zero gradient, since adding a
// constant to every key adds q.b to all scores of a query alike and the softmax ignores it. Its float gradient is
// rounding noise of either sign, which Adam normalises into full-size steps of either sign, so PyTorch and we move
// it differently by up to sum(lr) = 0.022. It is checked against that bound instead.
static void check_sched_trajectory(const char* dir, ParallelContext* pc) {
    char mp[1024], sp[1024], tp[1024], pp[1024];
    snprintf(mp, sizeof(mp), "%s/ref_model.bin", dir);
    snprintf(sp, sizeof(sp), "%s/ref_state.bin", dir);
    snprintf(tp, sizeof(tp), "%s/ref_sched_trajectory.txt", dir);
    snprintf(pp, sizeof(pp), "%s/ref_sched_params.bin", dir);
    double ref_loss[12], ref_lr[12], ref_norm[12];
    if (read_sched_trajectory(tp, ref_loss, ref_lr, ref_norm, 12) != 12) { report(0, "scheduled reference trajectory", "cannot read 12 steps from '%s'", tp); return; }
    GPTConfig gc;
    ParamLayout pl;
    DebugState s;
    if (!reference_read(mp, sp, &gc, &pl, &s)) { return; }
    GPT m, r;
    ZeroOptimizer z, zr;
    build_model(&m, &z, pc, mp, s.B, s.T);
    build_model(&r, &zr, pc, pp, 1, 1);
    Config c;
    config_defaults(&c);
    c.lr = 3e-3f; strcpy(c.lr_schedule, "cosine"); c.warmup = 3; c.final_lr_frac = 0.1f; c.weight_decay = 0.5f;
    c.grad_clip = 1.0f; c.steps = 12;
    BackwardComm bc = {NULL, 0, 1, 1};
    double worst_loss = 0, worst_lr = 0, worst_norm = 0;
    for (int step = 0; step < 12; step++) {
        gpt_forward(&m, s.x, s.B, s.T);
        float loss = fwd_bwd_loss(&m, s.y, 1.0f / (s.B * s.T), &bc);
        StepStats st = optimizer_step(&m, &z, &c, step);
        worst_loss = fmax(worst_loss, isfinite(loss) ? fabs(loss - ref_loss[step]) : INFINITY);
        worst_lr = fmax(worst_lr, fabs(st.lr - ref_lr[step]) / ref_lr[step]);
        worst_norm = fmax(worst_norm, isfinite(st.grad_norm) ? fabs(st.grad_norm - ref_norm[step]) / ref_norm[step] : INFINITY);
    }
    report(worst_loss <= 1e-5, "scheduled reference trajectory: 12 losses", "max abs difference %.3g (tolerance 1e-5)", worst_loss);
    report(worst_lr <= 1e-6, "scheduled reference trajectory: 12 learning rates", "max relative difference %.3g (tolerance 1e-6)", worst_lr);
    report(worst_norm <= 1e-5, "scheduled reference trajectory: 12 gradient norms", "max relative difference %.3g (tolerance 1e-5)", worst_norm);
    double lr_sum = 0.0;
    for (int step = 0; step < 12; step++) { lr_sum += ref_lr[step]; }
    size_t C = (size_t)gc.channels;
    double worst_kb = 0.0;
    for (int i = 0; i < pl.num_tensors; i++) {
        const ParamEntry* e = &pl.table[i];
        char name[96];
        snprintf(name, sizeof(name), "scheduled reference: parameters %s after 12 steps", e->name);
        const float* got = m.params + e->offset;
        const float* want = r.params + e->offset;
        if (strncmp(e->name, "qkvb.", 5) != 0) { check_close_f(name, got, want, e->rows * e->cols, 5e-6, 1e-4); continue; }
        // query and value biases per element; the key bias against the bound above
        snprintf(name, sizeof(name), "scheduled reference: parameters %s (query part) after 12 steps", e->name);
        check_close_f(name, got, want, C, 5e-6, 1e-4);
        snprintf(name, sizeof(name), "scheduled reference: parameters %s (value part) after 12 steps", e->name);
        check_close_f(name, got + 2 * C, want + 2 * C, C, 5e-6, 1e-4);
        for (size_t j = C; j < 2 * C; j++) { worst_kb = fmax(worst_kb, isfinite(got[j]) ? fabs(got[j] - want[j]) : INFINITY); }
    }
    report(worst_kb <= lr_sum, "scheduled reference: key biases (zero true gradient) within sum(lr) of PyTorch", "max abs difference %.3g, bound %.3g", worst_kb, lr_sum);
    free(s.x); free(s.y); free(s.logits); free(s.grads);
    zero_free(&z); gpt_free(&m);
    zero_free(&zr); gpt_free(&r);
    layout_free(&pl);
}

// Random initialisation against its definition, per tensor: matrices and embeddings normal(0, 0.02) except the
// residual projections (attprojw, fcprojw) normal(0, 0.02 / sqrt(2 L)); LayerNorm weights 1, biases 0, padded
// vocabulary rows 0. The sample std of n values is within ~3/sqrt(2n) of the true one with overwhelming
// probability (n >= 4096 here: 3.3%); the tolerance is 6%, far below the factor sqrt(2 L) = 2 that a missing
// residual scaling makes at L = 2.
static void test_init(void) {
    GPTConfig g = {16, 101, 128, 2, 2, 64};
    ParamLayout pl;
    layout_build(&pl, &g);
    float* p = (float*)mallocCheck(pl.num_params * sizeof(float));
    init_params(p, &pl, 1234);
    int ok = 1;
    char bad[256] = "";
    for (int i = 0; i < pl.num_tensors; i++) {
        const ParamEntry* e = &pl.table[i];
        size_t n = e->rows * e->cols, valid = n;
        if (strcmp(e->name, "wte") == 0) { valid = (size_t)g.vocab_size * g.channels; }
        int lnw = strncmp(e->name, "ln1w", 4) == 0 || strncmp(e->name, "ln2w", 4) == 0 || strcmp(e->name, "lnfw") == 0;
        int is_bias = !e->decay && !lnw;
        double want_std = strncmp(e->name, "attprojw", 8) == 0 || strncmp(e->name, "fcprojw", 7) == 0 ? 0.02 / sqrt(2.0 * g.num_layers) : 0.02;
        double sum = 0, sq = 0;
        int exact = 1;
        for (size_t j = 0; j < n; j++) {
            float x = p[e->offset + j];
            if (j >= valid) { exact &= x == 0.0f; continue; }
            if (lnw) { exact &= x == 1.0f; continue; }
            if (is_bias) { exact &= x == 0.0f; continue; }
            sum += x; sq += (double)x * x;
        }
        int t_ok = exact;
        if (!lnw && !is_bias) {
            double mean = sum / valid, sd = sqrt(sq / valid - mean * mean);
            t_ok = t_ok && fabs(sd / want_std - 1.0) <= 0.06 && fabs(mean) <= 6.0 * want_std / sqrt((double)valid);
            if (!t_ok) { snprintf(bad, sizeof(bad), "%s: std %.5f (want %.5f), mean %.2e", e->name, sd, want_std, mean); }
        } else if (!t_ok) {
            snprintf(bad, sizeof(bad), "%s is not exactly %s", e->name, lnw ? "1" : "0");
        }
        ok &= t_ok;
    }
    report(ok, "random init: per-tensor std (0.02, residual projections 0.02/sqrt(2L)), LayerNorm 1/0, biases and padded rows 0", "%s", bad);
    free(p);
    layout_free(&pl);
}

// Counts the floatX values of the model (every activation the table marks floatX, and the compute copy of the
// parameters) that are not representable in its storage type: the emulation must have rounded every store.
static size_t count_unrounded(GPT* m) {
    size_t sizes[64], bad = 0;
    activations_bytes(&m->cfg, m->acts.B, m->acts.T, m->acts.recompute, sizes);
    int i = 0, dt = m->ctx.dtype;
#define X_CHECK(name, type, fx, kept, size) \
    if (fx) { const float* x_ = (const float*)(const void*)m->acts.name; \
              for (size_t j = 0; j < sizes[i] / sizeof(type); j++) { bad += round_dtype(x_[j], dt) != x_[j]; } } \
    i++;
    GPT_ACTIVATIONS(X_CHECK)
#undef X_CHECK
    for (size_t j = 0; j < m->layout.num_params; j++) { bad += round_dtype(m->params[j], dt) != m->params[j]; }
    return bad;
}

// bf16 and fp16 against fp32: 20 AdamW steps of the reference model on the reference batch in each storage type
// (fp16 with a fixed loss scale of 1024, undone in AdamW). Every stored floatX value must be representable in the
// type (so the mode is really emulated), the 16-bit losses must differ from fp32's by more than fp32 rounding could
// explain, and must follow fp32's within a tolerance derived from the type's unit roundoff u (bf16 2^-8, fp16
// 2^-11): the loss is a smooth function of values that each carry a relative rounding error of at most u; their
// errors have random signs, so to first order the loss moves by a small multiple of u relative (the depth, here
// L = 2, multiplies it; the average over BT tokens shrinks it). We allow u/4 per step relative: measured at worst
// over 20 steps on this model, 1.2e-4 = 0.03u (bf16) and 3.5e-5 = 0.07u (fp16). A mode that loses the loss scale
// or rounds the master weights misses by far more. The master weights stay fp32: they must differ
// from the compute copy somewhere (else the stochastic rounding did nothing).
// bf16's spacing at a (> 0): 2^(e - 7) for a in [2^e, 2^(e+1)).
static double bf16_ulp(float a) { return (double)precision__float(precision__bits(a) & 0x7F800000u) / 128.0; }

// Stochastic rounding over a model's weights, for the weights whose exact update e lies within half an ulp of their
// old bf16 value (round-to-nearest would leave each unchanged): how many moved against the sum of p = |e| / ulp that
// predicts it, and their summed change against the sum of e (variances p (1 - p) and ulp^2 p (1 - p)).
typedef struct { size_t considered, moved; double expect_moved, var_moved, dc, de, var; } SrTally;
static void sr_tally_add(SrTally* s, float before, float after, double e) {
    double ulp = bf16_ulp(fabsf(before));
    if (!(fabs(e) < ulp / 2) || e == 0.0) { return; }
    double p = fabs(e) / ulp;
    s->considered++;
    s->moved += after != before;
    s->expect_moved += p;
    s->var_moved += p * (1 - p);
    s->dc += (double)after - before;
    s->de += e;
    s->var += ulp * ulp * p * (1 - p);
}
// Some of the n weights' updates were that small (a quarter at least), some moved, as many as predicted and with the
// summed change unbiased (5 sigma each).
static int sr_tally_unbiased(const SrTally* s, size_t n) {
    return s->considered > n / 4 && s->moved > 0 && fabs(s->moved - s->expect_moved) <= 5 * sqrt(s->var_moved) && fabs(s->dc - s->de) <= 5 * sqrt(s->var);
}

// One AdamW step of lr 1e-5 (no weight decay; clipping at grad_clip, 0: off) on the reference batch s; before (the
// model's parameter count): the compute copy before it.
static void small_update(GPT* m, ZeroOptimizer* z, const DebugState* s, float grad_clip, float* before) {
    Config c;
    config_defaults(&c);
    c.lr = 1e-5f; c.weight_decay = 0.0f; c.grad_clip = grad_clip;
    BackwardComm bc = {NULL, 0, 1, 1};
    memcpy(before, m->params, m->layout.num_params * sizeof(float));
    gpt_forward(m, s->x, s->B, s->T);
    fwd_bwd_loss(m, s->y, 1.0f / (s->B * s->T), &bc);
    optimizer_update(m, z, &c, grad_norm_reduced(m, z), c.lr, 1, 1.0f, 0x5eedull);
}

static void test_dtypes(const char* mp, const char* sp, ParallelContext* pc) {
    GPTConfig gc;
    ParamLayout pl;
    DebugState s;
    if (!reference_read(mp, sp, &gc, &pl, &s)) { return; }
    enum { STEPS = 20 };
    char name_buf[160];
    double loss[3][STEPS], vsum[3];
    for (int dt = DTYPE_FP32; dt <= DTYPE_FP16; dt++) {
        GPT m;
        ZeroOptimizer z;
        build_model_as(&m, &z, pc, mp, s.B, s.T, dt, 0);
        Config c;
        config_defaults(&c);
        c.lr = 1e-3f; strcpy(c.lr_schedule, "constant"); c.weight_decay = 0.1f; c.grad_clip = 1.0f; c.steps = STEPS;
        BackwardComm bc = {NULL, 0, 1, 1};
        float S = dt == DTYPE_FP16 ? 1024.0f : 1.0f;
        size_t unrounded = 0;
        for (int step = 0; step < STEPS; step++) {
            gpt_forward(&m, s.x, s.B, s.T);
            loss[dt][step] = fwd_bwd_loss(&m, s.y, S / (s.B * s.T), &bc);
            if (step == 0 || step == STEPS - 1) { unrounded += count_unrounded(&m); }
            float norm = grad_norm_reduced(&m, &z) / S;
            optimizer_update(&m, &z, &c, norm, c.lr, step + 1, S, 0x5eedull);
        }
        vsum[dt] = 0.0;
        for (size_t j = 0; j < z.hi - z.lo; j++) { vsum[dt] += z.v[j]; }
        if (dt == DTYPE_FP32) { zero_free(&z); gpt_free(&m); continue; }
        // the moments hold unscaled gradients (fp16's loss scale is divided out before AdamW sees them), so a
        // checkpoint means the same in every storage type: the second moments' sum within 10% of fp32's
        snprintf(name_buf, sizeof(name_buf), "--dtype %s: AdamW's moments are in the units of fp32's (loss scale undone)", dtype_name(dt));
        report(fabs(vsum[dt] / vsum[0] - 1.0) <= 0.1, name_buf, "sum of v %.4g vs fp32 %.4g", vsum[dt], vsum[0]);
        char name[160];
        snprintf(name, sizeof(name), "--dtype %s: every stored activation and parameter is a %s value (forward, backward, update)", dtype_name(dt), dtype_name(dt));
        report(unrounded == 0, name, "%zu values not representable", unrounded);
        size_t differ = 0, S_ = z.hi - z.lo;
        for (size_t j = 0; j < S_ && j < m.layout.num_params; j++) { differ += z.master[j] != m.params[j]; }
        snprintf(name, sizeof(name), "--dtype %s: fp32 master weights differ from the compute copy", dtype_name(dt));
        report(differ > m.layout.num_params / 4, name, "%zu of %zu differ", differ, m.layout.num_params);
        double u = unit_roundoff(dt), worst = 0.0;
        for (int step = 0; step < STEPS; step++) { worst = fmax(worst, fabs(loss[dt][step] - loss[0][step]) / loss[0][step]); }
        snprintf(name, sizeof(name), "--dtype %s: 20 steps follow fp32 within u/4 = %.3g relative, and differ by more than fp32 rounding (1e-6)",
                 dtype_name(dt), u / 4);
        report(worst <= u / 4 && worst > 1e-6, name, "max relative loss difference %.3g; step 20: %.7f vs fp32 %.7f", worst,
               loss[dt][STEPS - 1], loss[0][STEPS - 1]);
        zero_free(&z);
        gpt_free(&m);
    }
    report(loss[0][STEPS - 1] < loss[0][0] && loss[1][STEPS - 1] < loss[1][0] && loss[2][STEPS - 1] < loss[2][0],
           "all three storage types lower the loss over 20 steps", "fp32 %.4f -> %.4f, bf16 %.4f -> %.4f, fp16 %.4f -> %.4f",
           loss[0][0], loss[0][STEPS - 1], loss[1][0], loss[1][STEPS - 1], loss[2][0], loss[2][STEPS - 1]);
    // stochastic rounding reaches the compute copy: one bf16 update with lr 1e-5 moves each weight by ~1e-5. For
    // the weights whose new master value lies within half an ulp of their old compute copy, round-to-nearest would
    // leave the compute copy unchanged; stochastic rounding moves each with probability p = |change| / ulp, and
    // their summed change equals the master weights' summed change up to sampling noise (variance sum ulp^2 p(1-p)).
    // Checked: some of those weights move, as many as sum p predicts (5 sigma), with the summed change unbiased
    // (5 sigma).
    {
        GPT m;
        ZeroOptimizer z;
        build_model_as(&m, &z, pc, mp, s.B, s.T, DTYPE_BF16, 0);
        size_t n = m.layout.num_params;
        float* before = (float*)mallocCheck(n * sizeof(float));
        small_update(&m, &z, &s, 1.0f, before);
        SrTally st = {0, 0, 0.0, 0.0, 0.0, 0.0, 0.0};
        for (size_t j = 0; j < n; j++) {
            if (fabsf(before[j]) >= 1e-30f) { sr_tally_add(&st, before[j], m.params[j], (double)z.master[j] - before[j]); }
        }
        report(sr_tally_unbiased(&st, n), "--dtype bf16: updates below half an ulp reach the compute copy by stochastic rounding, unbiased",
               "%zu weights with an update below half an ulp: %zu moved (expected %.1f +- %.1f); summed change %.4g vs the master's %.4g (5 sigma %.3g)",
               st.considered, st.moved, st.expect_moved, 5 * sqrt(st.var_moved), st.dc, st.de, 5 * sqrt(st.var));
        free(before);
        zero_free(&z);
        gpt_free(&m);
    }
    // --master-weights 0 (llm.c's -w 0): no fp32 masters, AdamW rounds its update of the bf16 compute copy itself
    // stochastically. One update (lr 1e-5, no decay, no clipping) against AdamW's first step computed here in
    // double from the same gradients, x = p - lr g / (|g| + eps): every new value is bf16 and one of the two bf16
    // values around x (a float32 x can lie 1e-7 relative off the double one: allowed for), and, over the weights whose
    // x lies within half an ulp of p, as many move as sum |x - p| / ulp predicts and their summed change is x's
    // (5 sigma each); round-to-nearest would move none of them.
    {
        GPT m;
        ZeroOptimizer z;
        build_model_as(&m, &z, pc, mp, s.B, s.T, DTYPE_BF16, 0);
        zero_free(&z);
        m.no_master = 1;
        gpt_zero_init(&z, &m, 0, &pc->dp_group);
        size_t n = m.layout.num_params;
        float* before = (float*)mallocCheck(n * sizeof(float));
        small_update(&m, &z, &s, 0.0f, before);
        size_t outside = 0, unrounded = 0;
        SrTally st = {0, 0, 0.0, 0.0, 0.0, 0.0, 0.0};
        for (size_t j = 0; j < n; j++) {
            double g = m.grads[j], x = before[j] - 1e-5 * g / (fabs(g) + 1e-8); // (t = 1: m-hat = g, v-hat = g^2)
            float a = fabsf(before[j]);
            unrounded += round_stochastic(m.params[j], DTYPE_BF16, 0, 0, 0) != m.params[j]; // (bf16 values round to themselves)
            if (a < 1e-30f) { continue; }
            double ulp_x = bf16_ulp(fmaxf(a, (float)fabs(x))); // (the grid around x: the spacing of the larger of the two)
            if (fabs(m.params[j] - x) > ulp_x * (1.0 + 1e-3) + 1e-7 * fabs(x)) { outside++; }
            sr_tally_add(&st, before[j], m.params[j], x - before[j]);
        }
        report(z.master == NULL && unrounded == 0 && outside == 0 && sr_tally_unbiased(&st, n),
               "--dtype bf16 --master-weights 0: no master weights; AdamW rounds each update of the compute copy stochastically, unbiased",
               "master %s, %zu values not bf16, %zu off the two values around the update; %zu weights with an update below half an ulp: "
               "%zu moved (expected %.1f +- %.1f); summed change %.4g vs the update's %.4g (5 sigma %.3g)", z.master ? "kept" : "none",
               unrounded, outside, st.considered, st.moved, st.expect_moved, 5 * sqrt(st.var_moved), st.dc, st.de, 5 * sqrt(st.var));
        free(before);
        zero_free(&z);
        gpt_free(&m);
    }
    free(s.x); free(s.y); free(s.logits); free(s.grads);
    layout_free(&pl);
}

#endif // KERNELS_CUDA

// The tests below run on either backend (their buffers are read through host copies).

// --recompute 1 and 2 give the forward's values again, bit for bit: the same loss and every gradient. Mode 2 reruns
// the block's forward, so it equals mode 0. Mode 1 recomputes the GELU from the kept pre-activation; on a GPU, whose
// mode 0 fuses the GELU into the matmul's epilogue (reading the sum before it is rounded), mode 1 computes the GELU
// unfused in the forward too, so there it equals mode 0 with the fusion off (the fourth model; 16-bit storage only
// differs). The CPU never fuses: mode 1 equals mode 0 itself. Tolerance 0; each mode holds fewer activation bytes
// than the one before.
static void test_recompute(const char* model_path, ParallelContext* pc, int dtype) {
    GPT m[4];
    ZeroOptimizer z[4];
    float loss[4];
    size_t bytes[4];
    int32_t x[16], y[16];
    uint64_t r = 77;
    for (int i = 0; i < 16; i++) { x[i] = (int32_t)(rng_next(&r) % 101); y[i] = (int32_t)(rng_next(&r) % 101); }
#ifdef KERNELS_CUDA
    int nmodels = 4;
#else
    int nmodels = 3;
#endif
    for (int k = 0; k < nmodels; k++) {
        build_model_as(&m[k], &z[k], pc, model_path, 2, 8, dtype, k == 3 ? 0 : k);
#ifdef KERNELS_CUDA
        if (k == 3) { m[k].ctx.gelu_fusion = 0; }
#endif
        bytes[k] = m[k].acts.total_bytes;
        BackwardComm bc = {NULL, 0, 1, 1};
        gpt_forward(&m[k], x, 2, 8);
        loss[k] = fwd_bwd_loss(&m[k], y, 1.0f / 16, &bc);
    }
    size_t n = m[0].layout.num_params;
    for (int k = 1; k < 3; k++) {
        int ref = k == 1 && nmodels == 4 ? 3 : 0;
        float* g0 = host_copy_f32(&m[ref].ctx, m[ref].grads, n);
        float* gk = host_copy_f32(&m[k].ctx, m[k].grads, n);
        size_t differ = 0;
        for (size_t i = 0; i < n; i++) { differ += memcmp(&g0[i], &gk[i], sizeof(float)) != 0; }
        free(g0);
        free(gk);
        char name[160];
        snprintf(name, sizeof(name), "--dtype %s --recompute %d: loss and every gradient equal --recompute 0's%s bit for bit", dtype_name(dtype), k,
                 ref == 3 ? " (GELU unfused)" : "");
        report(differ == 0 && memcmp(&loss[ref], &loss[k], sizeof(float)) == 0, name, "loss %.9g vs %.9g, %zu of %zu gradient values differ",
               loss[k], loss[ref], differ, n);
    }
    if (dtype == DTYPE_FP32) { report(bytes[2] < bytes[1] && bytes[1] < bytes[0], "--recompute 1 and 2 hold fewer activation bytes", "%zu, %zu, %zu bytes", bytes[0], bytes[1], bytes[2]); }
    for (int k = 0; k < nmodels; k++) { zero_free(&z[k]); gpt_free(&m[k]); }
}

// A shard of n tokens in [0, V) (llm.c format), for the evaluation test.
static void write_test_shard(const char* path, int n, int V, uint64_t seed) {
    FILE* f = fopenCheck(path, "wb");
    int32_t h[256] = {0};
    h[0] = 20240520; h[1] = 1; h[2] = n;
    fwriteCheck(h, 4, 256, f, path);
    for (int i = 0; i < n; i++) {
        uint16_t t = (uint16_t)(rng_next(&seed) % V);
        fwriteCheck(&t, 2, 1, f, path);
    }
    fclose(f);
}

// evaluate() starts from the first validation batch every time: two calls agree, and both equal the mean of the
// per-batch losses over the first `steps` batches read directly (same kernels, so equal to rounding of the mean).
static void test_evaluate(const char* model_path, ParallelContext* pc) {
    char shard[1024];
    snprintf(shard, sizeof(shard), "%s/val_000000.bin", test_scratch_dir("test_gpt"));
    write_test_shard(shard, 2000, 101, 99);
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, model_path, 2, 8);
    DataLoader val;
    char err[512];
    if (dataloader_init(&val, shard, 2, 8, 0, 1, 0, 0, m.cfg.vocab_size, err, sizeof(err)) != 0) { report(0, "evaluate setup", "%s", err); return; }
    float e1 = evaluate(&m, &val, 5, pc);
    float e2 = evaluate(&m, &val, 5, pc);
    DataLoader direct;
    if (dataloader_init(&direct, shard, 2, 8, 0, 1, 0, 0, m.cfg.vocab_size, err, sizeof(err)) != 0) { report(0, "evaluate setup", "%s", err); return; }
    double sum = 0.0;
    for (int i = 0; i < 5; i++) {
        dataloader_next_batch(&direct);
        gpt_forward(&m, direct.inputs, 2, 8);
        gpt_eval_loss(&m, direct.targets);
        sum += gpt_take_loss_sum(&m) / 16.0;
    }
    float want = (float)(sum / 5);
    report(e1 == e2, "evaluate twice gives the same value (the validation loader restarts)", "%.9g vs %.9g", e1, e2);
    report(fabsf(e1 - want) <= 1e-6f * want, "evaluate equals the mean loss of the first --val-steps batches", "%.9g vs %.9g", e1, want);
    dataloader_free(&val);
    dataloader_free(&direct);
    remove(shard);
    zero_free(&z);
    gpt_free(&m);
}

// Forwards with a KV cache against full forwards, row by row of the final LayerNorm (the LM head's input): a prompt
// of 3 tokens cached once for 3 sequences, then each sequence's own tokens one position per forward, every row
// compared with the same position of that sequence's full forward. fp32: the sums run in other orders (another
// number of rows per product), ~1e-7; a row attending to a wrong or missing cached row is off by far more than the
// tolerance (1e-4 absolute and relative).
static void test_kv_forward(const char* model_path, ParallelContext* pc) {
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, model_path, 1, 16);
    enum { B = 3, N = 12, P = 3, ROOM = 16 };
    int C = m.cfg.channels;
    int32_t toks[B][ROOM];
    uint64_t r = 77;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < ROOM; t++) { toks[b][t] = t < P ? (int32_t)(3 + 4 * t) : (int32_t)(rng_uniform(&r) * m.cfg.vocab_size); }
    }
    size_t nrow = (size_t)B * N * C;
    double* want = (double*)mallocCheck(nrow * sizeof(double));
    float* got = (float*)mallocCheck(nrow * sizeof(float));
    float* row = (float*)mallocCheck((size_t)N * C * sizeof(float));
    for (int b = 0; b < B; b++) { // the references: each sequence's full forward
        gpt_forward(&m, toks[b], 1, N);
        dev_copy_d2h(&m.ctx, row, m.acts.lnf, (size_t)N * C * sizeof(float));
        dev_sync(&m.ctx);
        for (size_t i = 0; i < (size_t)N * C; i++) { want[(size_t)b * N * C + i] = row[i]; }
    }
    if (!kv_forward_rows(&m, &toks[0][0], B, ROOM, N, P, got)) { report(0, "forwards with a KV cache", "kv_alloc refused"); }
    else {
        check_close("forwards with a KV cache (a 3-token prompt cached for 3 sequences, then one position of each per forward) "
                    "equal full forwards, row by row", got, want, nrow, 1e-4, 1e-4);
    }
    free(want); free(got); free(row);
    zero_free(&z);
    gpt_free(&m);
}

// sample_tokens against a reference: one forward over each finished sequence (causal, so position t - 1 sees
// exactly the tokens sampled before t), a double-precision softmax of each row over the real vocabulary, and an
// inverse-CDF draw with the same draws. Without a KV cache the forwards are the reference's own, so the tokens must
// be identical. With one (a prompt of 3 tokens, cached, then one position per forward; one sequence, and 3 drawn
// together, each with its own draws) each row's sums run in another order, ~1e-7 relative in fp32: a draw within
// 1e-5 of the total from an edge of the token's interval is not held against it (counted, and at most 1 per run is
// allowed: a wrong token is off by far more).
static void test_sampling(const char* model_path, ParallelContext* pc) {
    GPT m;
    ZeroOptimizer z;
    build_model(&m, &z, pc, model_path, 1, 16);
    const int n = 12, room = 16;
    // (sample_tokens' slots for 3 sequences, from dev_host_alloc as it asks: a CUDA build's graphs copy into them)
    float* probs = (float*)dev_host_alloc(&m.ctx, sizeof(float) * 3 * 3 * m.cfg.padded_vocab_size);
    int V = m.cfg.vocab_size;
    double* p = (double*)mallocCheck(sizeof(double) * V);
    for (int variant = 0; variant < 3; variant++) {
        int cached = variant > 0, B = variant == 2 ? 3 : 1, np = cached ? 3 : 1;
        int32_t toks[3 * 16] = {0};
        double draws[3 * 16];
        uint64_t rng = 0x1234567ULL + (uint64_t)variant;
        for (int k = 0; k < B * (n - np); k++) { draws[k] = rng_uniform(&rng); }
        for (int b = 0; b < B; b++) { toks[b * room] = 3; toks[b * room + 1] = 7; toks[b * room + 2] = 1; }
        SampleOpts so = {1.0f, 0, 1.0f, cached, 0, 0, 1.0f, 0.0f, 1}; // the defaults: softmax of the logits over the whole vocabulary
        KvCache kv;
        if (cached && !kv_alloc(&kv, &m, B, room)) { report(0, "sampling with a KV cache", "kv_alloc refused"); break; }
        sample_tokens(&m, toks, B, np, n, room, probs, draws, &so, cached ? &kv : NULL, NULL, -1, NULL);
        if (cached) { kv_free(&m.ctx, &kv); }
        int same = 1, first_bad = -1, edges = 0, differ = 0;
        for (int b = 0; b < B; b++) {
            int32_t* tb = toks + b * room;
            differ += b > 0 && memcmp(tb + np, toks + np, sizeof(int32_t) * (n - np)) != 0;
            gpt_forward(&m, tb, 1, n - 1);
            for (int t = np; t < n; t++) {
                classifier_logits_rows(&m.ctx, m.acts.logits_row, m.acts.lnf + (size_t)(t - 1) * m.cfg.channels, m.p.wte, 1, m.cfg.channels, m.cfg.padded_vocab_size);
                dev_copy_d2h(&m.ctx, probs, m.acts.logits_row, sizeof(float) * m.cfg.padded_vocab_size);
                dev_sync(&m.ctx);
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < V; j++) { mx = fmax(mx, probs[j]); }
                for (int j = 0; j < V; j++) { p[j] = exp(probs[j] - mx); sum += p[j]; }
                double coin = draws[b * (n - np) + t - np] * sum, cdf = 0.0, margin = cached ? 1e-5 * sum : 0.0, near = INFINITY;
                int want = V - 1;
                for (int j = 0; j < V; j++) {
                    near = fmin(near, fabs(coin - cdf));
                    cdf += p[j];
                    if (coin < cdf) { want = j; near = fmin(near, cdf - coin); break; }
                }
                if (tb[t] != want && near < margin) { edges++; continue; }
                if (tb[t] != want && same) { same = 0; first_bad = b * 100 + t; }
            }
        }
        char nm[240];
        snprintf(nm, sizeof(nm), "sampling%s draws each token from the softmax at the previous position (reference with the same draws)",
                 variant == 0 ? "" : variant == 1 ? " with a KV cache (a 3-token prompt, then one position per forward)"
                                                  : " with a KV cache, 3 sequences together (each its own draws and tokens)");
        report(same && edges <= 1 && (B == 1 || differ == B - 1), nm, "first mismatch at sequence x 100 + position %d, %d at an edge, %d of %d sequences differ from the first",
               first_bad, edges, differ, B - 1);
    }
    free(p);
    dev_host_free(&m.ctx, probs);
    zero_free(&z);
    gpt_free(&m);
}


// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
    kernels_runtime_select(argv); // the trainer's OpenMP spin count and OpenBLAS kernel choice (may re-execute)
    printf("matmuls: %s kernels (%s)\n", kernels_blas_name(), kernels_blas_reason());
    ParallelContext pc;
    parallel_init(&pc, &argc, &argv);
    parallel_set_layout(&pc, 1, 1, 60.0);
#ifdef KERNELS_CUDA
    kernels_ctx_init(&g_ctx, KERNELS_DTYPE, 64, 1032); // the build's storage type
    printf("device: %s\n", kernels_blas_reason());
#else
    kernels_ctx_init(&g_ctx, DTYPE_FP32, 150, 1032); // the op tests' context: fp32, T up to 150, C up to 1032
#endif
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
        // the op tests on small and odd shapes, then at GPT-2 124M's (a separate group: scripts/gpu_check.sh runs
        // the small ones under compute-sanitizer, where the large shapes would take minutes)
        if (name_selected(only, "small-ops")) {
#ifdef KERNELS_CUDA
            int fp32_ops = KERNELS_DTYPE == DTYPE_FP32; // a 16-bit CUDA build runs only the tests of its type
#else
            int fp32_ops = 1;
#endif
            if (fp32_ops) {
                test_matmul();
                test_layernorm(16);
                test_layernorm(13);
                test_layernorm(264);  // (a GPU's fp32 packs: 66, 3 a lane, in registers)
                test_layernorm(1000); // (250: two warps to a row, 125 packs each, 4 a lane)
                test_layernorm(1032); // (258: the sums in memory)
                test_fast_math();
                test_gelu();
                test_matmul_gelu();
                test_attention();
                test_encoder(4);
                test_encoder(6);
                test_classifier(16);
                test_classifier(13);
                test_adamw();
                test_sums();
            }
            test_ops_dtype();
            test_forward_len();
#ifdef KERNELS_CUDA
#ifdef ENABLE_FP32
            test_tf32();
#else
            report(kernels_set_tf32(&g_ctx, 1) == -1 && kernels_set_tf32(&g_ctx, 0) == 0, "kernels_set_tf32: a 16-bit build refuses --tf32 1",
                   "%s", "");
#endif
            test_param_streams();
            test_bias_grad_widths();
            test_matmul_tune();
            test_reserve();
            test_capture_failure();
#endif
        }
        if (name_selected(only, "gpt2-ops")) { test_ops_gpt2_shapes(); }
        char mp[1024], sp[1024];
        snprintf(mp, sizeof(mp), "%s/ref_model.bin", ref_dir);
        snprintf(sp, sizeof(sp), "%s/ref_state.bin", ref_dir);
#ifdef KERNELS_CUDA
        // the CUDA build (fp32 storage: the same tolerances as the CPU) runs the ops and the whole-model reference;
        // recomputation (bit for bit: the kernels are deterministic), evaluation and sampling in its storage type;
        // the rest reads buffers directly and runs on the CPU build (the GPU check compares the binaries' runs)
        if (KERNELS_DTYPE == DTYPE_FP32 && name_selected(only, "reference")) {
            check_reference(mp, sp, &pc, 1e-5);
            check_trajectory(ref_dir, &pc);
        }
        if (name_selected(only, "units")) {
            test_recompute(mp, &pc, KERNELS_DTYPE);
            if (KERNELS_DTYPE == DTYPE_FP32) { test_evaluate(mp, &pc); test_sampling(mp, &pc); test_kv_forward(mp, &pc); }
        }
        printf("SKIP model files, schedules, units and the dtype comparisons: CPU build only\n");
#endif
#ifndef KERNELS_CUDA
        if (name_selected(only, "reference")) {
            check_reference(mp, sp, &pc, 1e-5);
            check_trajectory(ref_dir, &pc);
            test_model_files(ref_dir, &pc);
            check_sched_trajectory(ref_dir, &pc);
        }
        if (name_selected(only, "units")) {
            test_lr_schedule();
            test_lr_decay_steps();
            test_batch_ramp();
            test_outlier_guard();
            test_llmc_descriptors();
            test_init();
            test_weight_decay(mp, &pc);
            test_adam_hyper(mp, &pc);
            test_evaluate(mp, &pc);
            test_sampling(mp, &pc);
            test_kv_forward(mp, &pc);
            for (int dt = DTYPE_FP32; dt <= DTYPE_FP16; dt++) { test_recompute(mp, &pc, dt); }
        }
        if (name_selected(only, "precision")) { test_dtypes(mp, sp, &pc); }
#endif

    }
    int status = test_summary();
    parallel_finalize(&pc);
    return status;
}
