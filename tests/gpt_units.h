/*
tests/gpt_units.h: units of the training loop against independent closed forms: the learning-rate schedule and its
horizon, the batch ramp, llm.c's descriptors, the outlier guard, weight-decay flags, Adam's hyperparameters,
initialisation (test_gpt --only units). Split out of test_gpt.c by topic and included by it where this code stood: it
uses the suite's helpers above the include (check_close, check_close_f, rand_d, fill_rand, to_float, report, g_ctx;
build_model and fwd_bwd_loss of tests/gpt_reference.h) and the trainer's code (train_gpt.c); not a standalone header.
*/
#ifndef GPT_UNITS_H
#define GPT_UNITS_H

#ifndef KERNELS_CUDA // the tests below read model buffers as host memory: CPU build only

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


// flops_per_token, the numerator of every MFU this project reports (the step lines' and --bench's GFLOP/s, the GPU
// check's goals), against its closed form for GPT-2 124M at T 1024: 6 N for the matmuls' forward and backward over
// the N = 124,475,904 parameters (wte at the padded 50304 rows: it is also the LM head) plus 12 L C T for attention's
// two T x T products, forward and backward: 746,855,424 + 113,246,208 = 860,101,632.
static void test_flops_per_token(void) {
    GPT m;
    memset(&m, 0, sizeof(m));
    if (!config_from_name(&m.cfg, "gpt2-124M")) { report(0, "flops_per_token: set-up", "%s", "no gpt2-124M"); return; }
    layout_build(&m.glayout, &m.cfg);
    double f = flops_per_token(&m, 1024);
    report(m.glayout.num_params == 124475904 && f == 860101632.0, "flops_per_token: GPT-2 124M at T 1024 is 6 N + 12 L C T = 860,101,632",
           "%zu parameters, %.0f FLOPs per token", m.glayout.num_params, f);
    layout_free(&m.glayout);
}

// atomic_commit when the write fails only at its flush (the data sat in stdio's buffer until then: the last part of a
// checkpoint on a disk that just filled up): the process ends with an error naming the file, the previous file at the
// path is left whole, and no temporary file remains. A child process writes 1000 bytes under a 100-byte RLIMIT_FSIZE
// (the fwrite stays in the buffer; the fflush fails with EFBIG) over a file that already holds "previous".
static void test_atomic_commit_failure(void) {
    char dir[] = "/tmp/test_gpt_atomic.XXXXXX", path[64], err[64];
    if (!mkdtemp(dir)) { report(0, "atomic_commit: set-up", "mkdtemp: %s", strerror(errno)); return; }
    snprintf(path, sizeof(path), "%s/state.bin", dir);
    snprintf(err, sizeof(err), "%s/stderr.txt", dir);
    AtomicFile af;
    atomic_open(&af, path);
    fwriteCheck("previous", 1, 8, af.fp, path);
    atomic_commit(&af);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(err, "w", stderr)) { _exit(3); }
        struct rlimit rl = {100, 100};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) { _exit(4); }
        char block[1000];
        memset(block, 'x', sizeof(block));
        AtomicFile bad;
        atomic_open(&bad, path);
        fwriteCheck(block, 1, sizeof(block), bad.fp, path); // (buffered: nothing reaches the file yet)
        atomic_commit(&bad); // must fail and exit 1
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char got[64] = "", msg[512] = "";
    FILE* f = fopen(path, "rb");
    size_t n = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
    if (f) { fclose(f); }
    got[n] = '\0';
    f = fopen(err, "r");
    if (f) { n = fread(msg, 1, sizeof(msg) - 1, f); msg[n] = '\0'; fclose(f); }
    int temps = 0;
    DIR* d = opendir(dir);
    for (struct dirent* e = d ? readdir(d) : NULL; e; e = readdir(d)) { temps += strstr(e->d_name, ".tmp.") != NULL; }
    if (d) { closedir(d); }
    report(WIFEXITED(status) && WEXITSTATUS(status) == 1 && strcmp(got, "previous") == 0 && strstr(msg, path) && temps == 0,
           "atomic_commit: a write that fails at its flush exits naming the file and leaves the previous file whole",
           "exit status %d, file '%.20s', %d temporary file(s), stderr: %.200s", WIFEXITED(status) ? WEXITSTATUS(status) : -1, got, temps, msg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) { printf("note: could not remove %s\n", dir); }
}
#endif // KERNELS_CUDA

#endif // GPT_UNITS_H
