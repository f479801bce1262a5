/*
tests/gpt_ops_cuda.h: what only the CUDA backend has: TF32, the bias gradient's two widths, LayerNorm's backward and
the LM head's softmax kernels against each other, --matmul-tune and its file, kernels_reserve, a failed graph
capture, the parameter file streams (test_gpt --only small-ops, CUDA builds).
Split out of test_gpt.c by topic and included by it where this code stood: it uses the suite's helpers above the
include (check_close, check_close_f, rand_d, fill_rand, to_float, report, g_ctx; matmul_ref of tests/gpt_ops.h) and
the trainer's code (train_gpt.c); not a standalone header.
*/
#ifndef GPT_OPS_CUDA_H
#define GPT_OPS_CUDA_H

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
    size_t differ = bits_differ(got, got + OC, OC);
    check(differ == 0, "bias gradient: 16-byte packs and one element at a time give the same bits (1000 x 64)",
          "%zu of %d columns differ", differ, OC);
    dev_free(&g_ctx, aligned);
    dev_free(&g_ctx, offset);
    dev_free(&g_ctx, db);
    free(host);
}

// LayerNorm's backward kernels add each row's two sums in one order, whichever holds the row: one warp with its packs
// in registers (WPR 1), two warps each holding half and each summing the whole row (WPR 2), or the kernel with its
// sums in memory. dinp (accumulated onto random values) must have the same bits from every one that takes the width
// (kernels_layers.cuh), here 40 rows of 768, 1024 and 1600 channels, the launcher made to pick each in turn (dw and db
// are summed over other row groups in each: the op tests hold their values).
static void test_ln_backward_variants(void) {
    enum { BT = 40 };
    const int widths[3] = {768, 1024, 1600};
    int ran = 0;
    size_t differ = 0;
    char which[160] = "";
    for (int wi = 0; wi < 3; wi++) {
        int C = widths[wi], own[2], ppl[3][2]; // the launcher's choice for WPR 1, 2 and the memory kernel: no fit below
        kernels__ln_packs_per_lane(C / KERNELS_PACK, own);
        ppl[0][0] = own[0]; ppl[0][1] = own[1];
        ppl[1][0] = 99;     ppl[1][1] = own[1];
        ppl[2][0] = 99;     ppl[2][1] = 99;
        int takes[3] = {own[0] <= KERNELS_LN_REGS_PPL, own[1] <= KERNELS_LN_REGS_PPL, 1};
        size_t n = (size_t)BT * C;
        float* h = (float*)mallocCheck((3 * n + C) * sizeof(float)); // dout, inp, dinp's start, w
        for (size_t i = 0; i < 3 * n + C; i++) { h[i] = round_dtype((float)rand_d(), KERNELS_DTYPE); }
        float st[2 * BT];
        for (int r = 0; r < BT; r++) { st[r] = 0.01f * r; st[BT + r] = 1.0f + 0.01f * r; } // (any mean and rstd do)
        floatX* d = (floatX*)dev_alloc(&g_ctx, (5 * n + C) * sizeof(floatX)); // dout, inp, w, then dinp of each kernel
        floatX *dout = d, *inp = d + n, *w = d + 2 * n, *dx[3] = {w + C, w + C + n, w + C + 2 * n};
        params_from_f32(&g_ctx, dout, h, n);
        params_from_f32(&g_ctx, inp, h + n, n);
        params_from_f32(&g_ctx, w, h + 3 * n, C);
        float* stats = (float*)dev_alloc(&g_ctx, 2 * BT * sizeof(float));
        dev_copy_h2d(&g_ctx, stats, st, sizeof(st));
        int blocks = kernels__ln_blocks(&g_ctx, BT);
        float* part = (float*)dev_alloc(&g_ctx, (size_t)8 * blocks * 2 * C * sizeof(float));
        float* got[3];
        for (int v = 0; v < 3; v++) { got[v] = (float*)mallocCheck(n * sizeof(float)); }
        for (int o = 0; o < 3; o++) {
            int v = (o + 2) % 3; // (the memory kernel first: the others are compared with it)
            if (!takes[v]) { continue; }
            params_from_f32(&g_ctx, dx[v], h + 2 * n, n);
            kernels__layernorm_backward_launch<KERNELS_PACK>(&g_ctx, blocks, ppl[v], dx[v], part, dout, inp, w, stats, stats + BT, BT, C);
            params_to_f32(&g_ctx, got[v], dx[v], n);
            dev_sync(&g_ctx);
            if (v < 2) {
                differ += bits_differ(got[v], got[2], n);
                ran++;
                size_t at = strlen(which);
                snprintf(which + at, sizeof(which) - at, "%sC %d WPR %d", at ? ", " : "", C, v + 1);
            }
        }
        free(h);
        for (int v = 0; v < 3; v++) { free(got[v]); }
        dev_free(&g_ctx, d); dev_free(&g_ctx, stats); dev_free(&g_ctx, part);
    }
    check(ran >= 2 && differ == 0, "LayerNorm backward: dinp from one warp a row, two warps a row and the sums in memory, the same bits",
          "%zu elements differ; compared %s", differ, which);
}

// The LM head's two softmax kernels (kernels_matmul.cuh) add each row's maximum and sum of exponentials in one order:
// the loss and the gradient written in place must have the same bits from the one that holds the row in registers
// (the launcher's choice here: 3 packs a thread in 16-bit storage, 5 in fp32) and the one that reads it twice, with
// the loss read from memory before a barrier. Five rows of 19,993 logits padded to 20,000: a target in the row's
// first and last pack, one past the first 1024 packs (a thread's second pack), a masked row, and the losses buffer
// filled with NaN first, so a loss not written shows. Also without the gradient (validation): the same losses, the
// logits left as they were.
static void test_softmax_variants(void) {
    enum { R = 5, V = 19993, Vp = 20000 };
    const int32_t tgt[R] = {0, V - 1, 1100 * KERNELS_PACK + 3, -1, 4321};
    size_t n = (size_t)R * Vp;
    float* h = (float*)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) { h[i] = round_dtype((float)(4.0 * rand_d()), KERNELS_DTYPE); }
    floatX* z = (floatX*)dev_alloc(&g_ctx, 2 * n * sizeof(floatX)); // the row set for each kernel
    float* loss = (float*)dev_alloc(&g_ctx, 2 * R * sizeof(float));
    int32_t* t = (int32_t*)dev_alloc(&g_ctx, sizeof(tgt));
    dev_copy_h2d(&g_ctx, t, tgt, sizeof(tgt));
    float* got = (float*)mallocCheck(2 * n * sizeof(float));
    float gl[2][2][R]; // [want_grad][kernel][row]
    size_t differ = 0, untouched = 0;
    unsigned th = kernels__row_threads(Vp / KERNELS_PACK);
    int ppt = (int)((Vp / KERNELS_PACK + th - 1) / th);
    for (int want = 0; want < 2; want++) {
        for (int k = 0; k < 2; k++) { params_from_f32(&g_ctx, z + k * n, h, n); }
        gpuCheck(cudaMemsetAsync(loss, 0xff, 2 * R * sizeof(float), g_ctx.stream));
        kernels__classifier_softmax_launch<KERNELS_PACK>(&g_ctx, R, z, loss, t, 0.25f, V, Vp, want); // (registers)
        kernels__classifier_softmax<KERNELS_PACK><<<R, th, 0, g_ctx.stream>>>(z + n, loss + R, t, 0.25f, V, Vp, want);
        launchCheck();
        params_to_f32(&g_ctx, got, z, 2 * n);
        dev_copy_d2h(&g_ctx, gl[want], loss, 2 * R * sizeof(float));
        dev_sync(&g_ctx);
        differ += bits_differ(gl[want][0], gl[want][1], R) + bits_differ(got, got + n, n);
        if (!want) { untouched = bits_differ(got, h, n); }
    }
    size_t eval = bits_differ(gl[0][0], gl[1][0], R);
    check(ppt > 1 && ppt <= KERNELS_SOFTMAX_PPT && differ == 0 && untouched == 0 && eval == 0 && gl[1][0][3] == 0.0f && isfinite(gl[1][0][0]),
          "LM head softmax: losses and gradients from the row in registers and the row read twice, the same bits (5 x 19993, a masked row)",
          "%d packs a thread; %zu values differ; %zu logits changed without the gradient; %zu losses differ with and without it; "
          "masked row's loss %g, first %g", ppt, differ, untouched, eval, gl[1][0][3], gl[1][0][0]);
    free(h); free(got);
    dev_free(&g_ctx, z); dev_free(&g_ctx, loss); dev_free(&g_ctx, t);
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
//   - a file for another cuBLASLt version, or for a GPU of the same name with another SM count, is not used.
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
    // a GPU of the same name with fewer SMs (a MIG slice): not used either
    int sms = ctx->num_sms;
    ctx->num_sms = sms - 1;
    kernels_matmul_plans_reset();
    kernels_set_matmul_tune(ctx, 0, path, 0);
    matmul_forward_gelu(ctx, out[2][0], out[2][1], in[0], in[1], bias, BT, C, OC);
    check(kernels__lt_num_plans > 0 && kernels__lt_plans[0].source == KERNELS_ALGO_HEURISTIC, "--matmul-algos: a file for another SM count is not used",
          "source %d", kernels__lt_plans[0].source);
    ctx->num_sms = sms;
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
    // a buffer that cannot grow during a capture (1 TB: more than any GPU holds) keeps the old one and its size, and
    // fails the capture; outside a capture the same allocation would end the run
    size_t have = 1024;
    void* old = dev_alloc(&g_ctx, have);
    int retired = g_ctx.nretired, began2 = kernels_capture_begin(&g_ctx);
    void* kept = kernels__grow(&g_ctx, old, &have, (size_t)1 << 40);
    void* graph2 = kernels_capture_end(&g_ctx);
    report(began2 == 1 && kept == old && have == 1024 && g_ctx.nretired == retired && graph2 == NULL,
           "a context buffer that cannot grow during a graph's capture: the old buffer and its size are kept (not retired), and the capture fails",
           "kept %s, size %zu, retired %d -> %d, graph %p", kept == old ? "the old buffer" : "another pointer", have, retired, g_ctx.nretired,
           graph2);
    dev_free(&g_ctx, old);
    // a buffer grown during a capture is zeroed once, when the capture ends: before the graph's first replay, and
    // before the ops run one by one when the capture failed (fresh device memory is garbage: 0xff in the emulation)
    for (int fail = 0; fail < 2; fail++) {
        size_t bytes = 256, grown_to = 4096;
        void* buf = dev_alloc(&g_ctx, bytes);
        float* other = (float*)dev_alloc(&g_ctx, 64);
        int began3 = kernels_capture_begin(&g_ctx);
        dev_zero(&g_ctx, other, 64); // (some work in the graph)
        buf = kernels__grow(&g_ctx, buf, &bytes, grown_to);
        if (fail) { gpuCheck(cudaErrorInvalidValue); }
        void* graph3 = kernels_capture_end(&g_ctx);
        unsigned char* back3 = (unsigned char*)mallocCheck(grown_to);
        memset(back3, 0xab, grown_to);
        dev_copy_d2h(&g_ctx, back3, buf, grown_to);
        dev_sync(&g_ctx);
        size_t nonzero = 0;
        for (size_t i = 0; i < grown_to; i++) { nonzero += back3[i] != 0; }
        report(began3 == 1 && bytes == grown_to && (graph3 == NULL) == fail && nonzero == 0 && g_ctx.ncapture_grown == 0,
               fail ? "a buffer grown during a graph's capture that fails is zeroed when the capture ends (the ops then run one by one)"
                    : "a buffer grown during a graph's capture is zeroed when the capture ends, before any replay (not at each replay)",
               "size %zu, graph %p, %zu of %zu bytes not zero", bytes, graph3, nonzero, grown_to);
        free(back3);
        kernels_graph_free(&g_ctx, graph3);
        dev_free(&g_ctx, other);
        dev_free(&g_ctx, buf);
    }
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
    size_t bad = bits_differ(back, host, n);
    float sb[1000];
    params_to_f32(&g_ctx, sb, small, m);
    bad += bits_differ(sb, host + 7, m);
    check(bad == 0, "params_from_f32 / params_to_f32 round trip through the pinned double buffer (3 chunks + a second call)",
          "%zu of %zu values differ", bad, n + m);
    dev_free(&g_ctx, dev);
    dev_free(&g_ctx, small);
    free(host);
    free(back);
}
#endif

#endif // GPT_OPS_CUDA_H
