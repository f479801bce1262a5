/*
tests/gpt_ops_stored.h: the ops in 16-bit storage against the double references (one rounding of the exact result),
forward-only lengths, and the ops at GPT-2 124M's shapes (test_gpt --only small-ops, --only gpt2-ops). Split out of
test_gpt.c by topic and included by it where this code stood: it uses the suite's helpers above the include
(check_close, check_close_f, rand_d, fill_rand, to_float, report, g_ctx; the double references of tests/gpt_ops.h) and
the trainer's code (train_gpt.c); not a standalone header.
*/
#ifndef GPT_OPS_STORED_H
#define GPT_OPS_STORED_H

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
            size_t ndiff = bits_differ(dq, dq2, nq);
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

#endif // GPT_OPS_STORED_H
