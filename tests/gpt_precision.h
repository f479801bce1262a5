/*
tests/gpt_precision.h: bf16 and fp16 storage through the whole model against fp32 (stochastic rounding, master
weights), and recomputation bit for bit (test_gpt --only precision, --only units). Split out of test_gpt.c by topic
and included by it where this code stood: it uses the suite's helpers above the include (check_close, check_close_f,
rand_d, fill_rand, to_float, report, g_ctx; unit_roundoff of tests/gpt_ops_stored.h; reference_read, build_model_as,
fwd_bwd_loss and host_copy_f32 of tests/gpt_reference.h) and the trainer's code (train_gpt.c); not a standalone
header.
*/
#ifndef GPT_PRECISION_H
#define GPT_PRECISION_H

#ifndef KERNELS_CUDA // the dtype comparisons read model buffers as host memory: CPU build only

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
        size_t differ = bits_differ(g0, gk, n);
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

#endif // GPT_PRECISION_H
