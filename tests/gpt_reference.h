/*
tests/gpt_reference.h: the whole model against the committed PyTorch reference: logits, loss, every gradient, the
10-step and the scheduled 12-step trajectories; model files (test_gpt --only reference). Split out of test_gpt.c by
topic and included by it where this code stood: it uses the suite's helpers above the include (check_close,
check_close_f, rand_d, fill_rand, to_float, report, g_ctx) and the trainer's code (train_gpt.c); not a standalone
header.
*/
#ifndef GPT_REFERENCE_H
#define GPT_REFERENCE_H

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
            uint32_t w = (uint32_t)bf << 16; // (the expectation spelled out here, not the loader's bf16_to_float)
            memcpy(&expect[e->offset + j], &w, 4);
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

#endif // KERNELS_CUDA

#endif // GPT_REFERENCE_H
