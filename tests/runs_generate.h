/*
tests/runs_generate.h: sampling: sample_pick in the process, --generate through the binary against the model's logits (--only generate).
Split out of tests/test_runs.c by topic and included by it where this code stood: it uses the suite's helpers above
the include (TMP, report, run_capture, fresh_shard, the log readers of tests/runs_common.h) and the trainer's code
(train_gpt.c); not a standalone header.
*/
#ifndef RUNS_GENERATE_H
#define RUNS_GENERATE_H

// ----------------------------------------------------------------------------
// Sampling: sample_pick in the process, and --generate through the binary, checked against the model's logits
// computed here.

// order[0..n): the ids of v sorted by value, descending, ties by id, ascending (insertion sort): the order in which
// --top-k and --top-p keep tokens, for the references below.
static void order_desc(const float* v, int n, int* order) {
    for (int i = 0; i < n; i++) {
        int k = i;
        while (k > 0 && (v[order[k - 1]] < v[i] || (v[order[k - 1]] == v[i] && order[k - 1] > i))) { order[k] = order[k - 1]; k--; }
        order[k] = i;
    }
}

// The probability interval [lo, hi) of token j under the softmax of row / temperature restricted to its top_k
// (0: all; ties at the k-th value kept from the lowest id up), then to the fewest most likely of those whose
// probability reaches top_p (1: all; each kept token's predecessors, in the order of the logits with ties by id, hold
// less than top_p of the mass), then to those at least min_p times as likely as the most likely (0: all), computed
// in double apart from sample_pick: the picked token for a draw u must have lo <= u < hi. Returns 0 if j is not one of
// the kept tokens. Where float rounding could decide the other way: *margin, how close a predecessors' mass came to
// top_p (as a share of the total), or a probability ratio to min_p; *gap (when not NULL), the gap between the logits
// on either side of the top-k and top-p edges, and a logit's distance from min-p's (for logits computed in another
// order of sums).
static int pick_interval(const float* row, int V, float temperature, int top_k, float top_p, float min_p, int j, double* lo,
                         double* hi, double* margin, double* gap) {
    int* order = (int*)mallocCheck(sizeof(int) * (size_t)V);
    order_desc(row, V, order);
    int K = top_k > 0 && top_k < V ? top_k : V;
    char* kept = (char*)callocCheck((size_t)V, 1);
    double mx = row[order[0]], total = 0.0, below = 0.0, before = 0.0;
    for (int i = 0; i < K; i++) { total += exp(((double)row[order[i]] - mx) / temperature); }
    *margin = INFINITY;
    if (gap) { *gap = K < V ? (double)row[order[K - 1]] - row[order[K]] : INFINITY; }
    for (int i = 0; i < K; i++) {
        if (top_p >= 1.0f || i == 0 || before < (double)top_p * total) { kept[order[i]] = 1; }
        else if (gap && kept[order[i - 1]]) { *gap = fmin(*gap, (double)row[order[i - 1]] - row[order[i]]); }
        if (top_p < 1.0f && i > 0) { *margin = fmin(*margin, fabs(before / total - (double)top_p)); }
        before += exp(((double)row[order[i]] - mx) / temperature);
    }
    for (int i = 0; i < K && min_p > 0.0f; i++) { // min-p after top-p (Hugging Face's order)
        double d = (double)row[order[i]] - mx, w = exp(d / temperature);
        if (!kept[order[i]]) { continue; }
        if (w < (double)min_p) { kept[order[i]] = 0; }
        *margin = fmin(*margin, fabs(w - (double)min_p));
        if (gap) { *gap = fmin(*gap, fabs(d - (double)temperature * log((double)min_p))); }
    }
    total = 0.0;
    for (int i = 0; i < V; i++) {
        if (!kept[i]) { continue; }
        double p = exp(((double)row[i] - mx) / temperature);
        if (i < j) { below += p; }
        total += p;
    }
    int ok = kept[j];
    *lo = below / total;
    *hi = (below + exp(((double)row[j] - mx) / temperature)) / total;
    free(kept);
    free(order);
    return ok;
}

static int desc_float(const void* a, const void* b) {
    float x = *(const float*)a, y = *(const float*)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void test_sample_pick(void) {
    // select_kth_largest (top-k's threshold) against a sort: 500 rows of 1 to 400 values, many of them equal (drawn
    // from as few as 3 distinct values), some sorted either way, every k from the edges and between
    {
        uint64_t r = 99;
        int wrong = 0;
        char first[200] = "";
        for (int trial = 0; trial < 500; trial++) {
            int n = 1 + (int)(rng_uniform(&r) * 400), distinct = 3 + trial % 50;
            float* x = (float*)mallocCheck(sizeof(float) * n);
            float* sorted = (float*)mallocCheck(sizeof(float) * n);
            for (int i = 0; i < n; i++) { x[i] = (float)(int)(rng_uniform(&r) * distinct) - 7.0f; }
            if (trial % 10 == 1) { qsort(x, (size_t)n, sizeof(float), desc_float); }
            if (trial % 10 == 2) { for (int i = 0; i < n; i++) { x[i] = (float)i; } }
            memcpy(sorted, x, sizeof(float) * n);
            qsort(sorted, (size_t)n, sizeof(float), desc_float);
            int ks[3] = {1, n, 1 + (int)(rng_uniform(&r) * n)};
            for (int j = 0; j < 3; j++) {
                float* work = (float*)mallocCheck(sizeof(float) * n);
                memcpy(work, x, sizeof(float) * n);
                float got = select_kth_largest(work, n, ks[j]);
                if (got != sorted[ks[j] - 1] && wrong++ == 0) {
                    snprintf(first, sizeof(first), "n %d, k %d: %g, the sort's %g", n, ks[j], got, sorted[ks[j] - 1]);
                }
                free(work);
            }
            free(x); free(sorted);
        }
        report(wrong == 0, "select_kth_largest (--top-k's threshold) equals the k-th of a descending sort: 1500 cases, ties, sorted rows", "%d wrong: %s", wrong, first);
    }
    // nucleus_keep (--top-p's tokens) against a sort: 600 rows of 1 to 400 weights, many equal, some zero, every
    // top_p from 0 to 1; the kept tokens must be the sort's prefix whose predecessors hold less than top_p of the
    // mass, and the total returned theirs (the reference sums in double in the sort's order: a case within 1e-9 of
    // the edge could fall either way and is skipped)
    {
        uint64_t r = 7;
        int wrong = 0, cases = 0, skipped = 0;
        char first[200] = "";
        for (int trial = 0; trial < 600; trial++) {
            int n = 1 + (int)(rng_uniform(&r) * 400), distinct = 2 + trial % 40;
            float* w = (float*)mallocCheck(sizeof(float) * n);
            int* ids = (int*)mallocCheck(sizeof(int) * n);
            int* order = (int*)mallocCheck(sizeof(int) * n);
            double total = 0.0;
            for (int i = 0; i < n; i++) {
                w[i] = (float)(int)(rng_uniform(&r) * distinct) / (float)distinct; // (zero among them: not a candidate)
                if (trial % 3 == 0) { w[i] = (float)rng_uniform(&r); }
                total += w[i];
            }
            if (total == 0.0) { w[0] = 1.0f; total = 1.0; }
            float top_p = trial % 7 == 0 ? 0.0f : trial % 7 == 1 ? 1.0f : (float)rng_uniform(&r);
            // the reference: the tokens sorted by weight, descending, ties by id, then the prefix
            order_desc(w, n, order);
            char* want = (char*)callocCheck((size_t)n, 1);
            double before = 0.0, need = (double)top_p * total, closest = INFINITY;
            for (int i = 0; i < n && w[order[i]] > 0.0f; i++) {
                if (i == 0 || before < need) { want[order[i]] = 1; }
                if (i > 0) { closest = fmin(closest, fabs(before - need)); }
                before += w[order[i]];
            }
            float* got = (float*)mallocCheck(sizeof(float) * n);
            memcpy(got, w, sizeof(float) * n);
            double got_total = nucleus_keep(got, ids, n, need), kept_total = 0.0;
            for (int i = 0; i < n; i++) { kept_total += got[i]; }
            if (closest < 1e-9 * total) { skipped++; }
            else {
                cases++;
                int diff = 0, kept = 0;
                for (int i = 0; i < n; i++) { diff += (got[i] != 0.0f) != want[i] || (got[i] != 0.0f && got[i] != w[i]); kept += want[i]; }
                diff += got_total != kept_total;
                if (diff && wrong++ == 0) { snprintf(first, sizeof(first), "n %d, %d distinct, top_p %g: %d tokens differ of %d kept", n, distinct, top_p, diff, kept); }
            }
            free(w); free(ids); free(order); free(want); free(got);
        }
        report(wrong == 0 && cases > 500, "nucleus_keep (--top-p's tokens) equals the prefix of a descending sort whose predecessors hold less than top_p",
               "%d of %d rows wrong (%d at an edge, skipped): %s", wrong, cases, skipped, first);
    }
    // the rule for every (temperature, top-k, top-p), on random rows and draws, against pick_interval; a draw within
    // 1e-6 of an interval's edge, or a row whose top-p edge is within 1e-5 (float weights, double reference), could
    // fall either way under float rounding and is not counted
    const int V = 37;
    float row[37], work[37], scratch[37];
    uint64_t s = 2024;
    const float temps[4] = {1.0f, 0.5f, 2.0f, 0.05f};
    const int ks[4] = {0, 1, 5, 36};
    const float tops[5] = {1.0f, 0.9f, 0.5f, 0.2f, 0.0f}, mins[4] = {0.0f, 0.05f, 0.3f, 0.8f};
    int bad = 0, tested = 0, edge = 0;
    char first[200] = "";
    for (int trial = 0; trial < 800; trial++) {
        for (int i = 0; i < V; i++) { row[i] = 6.0f * rng_uniform(&s) - 3.0f; }
        if (trial % 4 == 0) { row[trial % V] = row[(trial + 3) % V]; } // some ties
        SampleOpts so = {temps[trial % 4], ks[(trial / 4) % 4], tops[(trial / 16) % 5], 0, 0, 0, 1.0f, mins[(trial / 80) % 4], 0};
        double u = rng_uniform(&s);
        memcpy(work, row, sizeof(row));
        int j = sample_pick(work, scratch, V, &so, u);
        double lo = 0, hi = 0, margin = INFINITY;
        int kept = j >= 0 && j < V && pick_interval(row, V, so.temperature, so.top_k, so.top_p, so.min_p, j, &lo, &hi, &margin, NULL);
        if ((kept && (fabs(u - lo) < 1e-6 || fabs(u - hi) < 1e-6)) || margin < 1e-5) { edge++; continue; }
        tested++;
        if (!kept || u < lo || u >= hi) {
            if (bad++ == 0) { snprintf(first, sizeof(first), "trial %d (T %g, top-k %d, top-p %g, min-p %g, u %.9f): picked %d, its interval [%.9f, %.9f)%s", trial, so.temperature, so.top_k, so.top_p, so.min_p, u, j, lo, hi, kept ? "" : " not kept"); }
        }
    }
    report(bad == 0 && tested > 700, "sample_pick draws by the CDF of softmax(logits / T) over the top-k, then the top-p, then the min-p, as computed apart in double",
           "%d of %d draws wrong (%d at an edge, not counted) %s", bad, tested, edge, first);
    // temperature 0 and top-k 1: the argmax, lowest id among equal maxima, whatever the draw
    float tie[37];
    for (int i = 0; i < V; i++) { tie[i] = (float)(i % 5); } // maxima 4 at ids 4, 9, 14, ...
    int g0, g1;
    SampleOpts greedy = {0.0f, 0, 1.0f, 0, 0, 0, 1.0f, 0.0f, 0}, top1 = {1.0f, 1, 1.0f, 0, 0, 0, 1.0f, 0.0f, 0};
    memcpy(work, tie, sizeof(tie));
    g0 = sample_pick(work, scratch, V, &greedy, 0.99);
    memcpy(work, tie, sizeof(tie));
    g1 = sample_pick(work, scratch, V, &top1, 0.99);
    report(g0 == 4 && g1 == 4, "temperature 0 and top-k 1 pick the argmax, the lowest id among equal maxima", "picked %d and %d, expected 4", g0, g1);
    // top-k 2 among eight equal maxima keeps exactly the two lowest ids, whatever the draw
    int seen[37] = {0};
    SampleOpts top2 = {1.0f, 2, 1.0f, 0, 0, 0, 1.0f, 0.0f, 0};
    for (int k = 0; k < 100; k++) {
        memcpy(work, tie, sizeof(tie));
        seen[sample_pick(work, scratch, V, &top2, (k + 0.5) / 100.0)]++;
    }
    report(seen[4] > 0 && seen[9] > 0 && seen[4] + seen[9] == 100, "top-k 2 among equal maxima keeps exactly the two lowest ids", "ids 4: %d, 9: %d of 100", seen[4], seen[9]);
    // top-p among four equal logits (each a quarter, exactly): 0.3 keeps the two lowest ids (the second's predecessor
    // holds 0.25 < 0.3); 0.25 keeps one (0.25 is not below 0.25: Hugging Face's rule); 0 keeps the most likely;
    // 0.8 keeps all four (the fourth's predecessors hold 0.75)
    const float ps[4] = {0.3f, 0.25f, 0.0f, 0.8f};
    const int want_n[4] = {2, 1, 1, 4};
    float four[4] = {0.5f, 0.5f, 0.5f, 0.5f}, w4[4], s4[4];
    for (int c = 0; c < 4; c++) {
        int seen4[4] = {0}, distinct = 0, low = 1;
        SampleOpts tp = {1.0f, 0, ps[c], 0, 0, 0, 1.0f, 0.0f, 0};
        for (int k = 0; k < 200; k++) {
            memcpy(w4, four, sizeof(four));
            seen4[sample_pick(w4, s4, 4, &tp, (k + 0.5) / 200.0)]++;
        }
        for (int i = 0; i < 4; i++) { distinct += seen4[i] > 0; low &= (seen4[i] > 0) == (i < want_n[c]); }
        report(distinct == want_n[c] && low, "top-p among equal logits keeps the fewest whose probability reaches it, the lowest ids first",
               "top-p %g: ids 0-3 drawn %d %d %d %d times of 200, expected ids 0..%d", ps[c], seen4[0], seen4[1], seen4[2], seen4[3], want_n[c] - 1);
    }
    // min-p after top-p, Hugging Face's order, where the order matters: weights 1, 0.6, 0.6 and a tail of 1000 at
    // 0.01 (mass 12.2). Top-p 0.3 keeps ids 0-2 and 143 of the tail (their predecessors hold less than 3.66), then
    // min-p 0.5 drops the tail: ids 0-2 remain, drawn with probabilities 1/2.2, 0.6/2.2, 0.6/2.2. (Min-p first would
    // leave 0-2 with mass 2.2, of which top-p 0.3 keeps id 0 alone.) Min-p 0.7 alone keeps id 0; 0.005 all.
    {
        enum { NV = 1003 };
        float* big = (float*)mallocCheck(sizeof(float) * NV);
        float* wb = (float*)mallocCheck(sizeof(float) * NV);
        float* sb = (float*)mallocCheck(sizeof(float) * NV);
        const float cases[3][2] = {{0.3f, 0.5f}, {1.0f, 0.7f}, {1.0f, 0.005f}}; // (top-p, min-p)
        int seen3[3][4] = {{0}}; // ids 0, 1, 2 and the tail
        for (int c = 0; c < 3; c++) {
            SampleOpts mp = {1.0f, 0, cases[c][0], 0, 0, 0, 1.0f, cases[c][1], 0};
            for (int k = 0; k < 400; k++) {
                big[0] = 0.0f; big[1] = big[2] = logf(0.6f);
                for (int i = 3; i < NV; i++) { big[i] = logf(0.01f); }
                memcpy(wb, big, sizeof(float) * NV);
                int j = sample_pick(wb, sb, NV, &mp, (k + 0.5) / 400.0);
                seen3[c][j < 3 ? j : 3]++;
            }
        }
        int order_ok = seen3[0][0] > 150 && seen3[0][1] > 80 && seen3[0][2] > 80 && seen3[0][3] == 0;
        int alone_ok = seen3[1][0] == 400, all_ok = seen3[2][3] > 300;
        report(order_ok && alone_ok && all_ok, "min-p applies after top-p (Hugging Face's order), keeping the tokens at least min-p times as likely as the most likely",
               "top-p 0.3 then min-p 0.5: ids 0, 1, 2, tail drawn %d %d %d %d of 400 (expected about 182 109 109 0); min-p 0.7: id 0 %d of 400; "
               "min-p 0.005: tail %d of 400 (expected about 328)", seen3[0][0], seen3[0][1], seen3[0][2], seen3[0][3], seen3[1][0], seen3[2][3]);
        free(big); free(wb); free(sb);
    }
}

// The ids of each "--- sample N" block of --generate's output, into ids[sample][...] (at most 4 samples of 64).
static int parse_samples(const char* out, int ids[4][64], int counts[4]) {
    int n = 0;
    for (const char* p = out; (p = strstr(p, "--- sample ")) != NULL && n < 4; n++) {
        p = strchr(p, '\n');
        if (!p) { break; }
        p++;
        counts[n] = 0;
        while (*p && *p != '\n' && counts[n] < 64) {
            char* e;
            long v = strtol(p, &e, 10);
            if (e == p) { break; }
            ids[n][counts[n]++] = (int)v;
            p = e;
            while (*p == ' ') { p++; }
        }
    }
    return n;
}

// From --generate's output: each "--- sample N" line and the line after it (its tokens) into text, and the values of
// the "logprob: S" lines (--logprobs 1), in order, into lp (at most 8); returns how many.
static int generate_parts(const char* out, char* text, size_t cap, double* lp) {
    size_t w = 0;
    int n = 0, take = 0;
    text[0] = '\0';
    for (const char* line = out; *line;) {
        const char* end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "--- sample", 10) == 0) { take = 2; }
        if (take > 0 && w + len < cap) { memcpy(text + w, line, len); w += len; text[w] = '\0'; take--; }
        if (strncmp(line, "logprob: ", 9) == 0 && n < 8) { lp[n++] = strtod(line + 9, NULL); }
        line += len;
    }
    return n;
}

// Whether two runs' log-probabilities agree: the same count (n, at least 1) and each within 1e-6 relative. fp32 sums in
// another order move a sample's total (about -55 over 12 tokens) by ~1e-6 absolute; a forward attending to one wrong
// cached row moves it by ~1e-2 (the near-uniform test model keeps the drawn tokens, not the probabilities).
static int logprobs_agree(const double* a, int na, const double* b, int nb, double* worst) {
    *worst = 0.0;
    if (na != nb || na == 0) { return 0; }
    for (int i = 0; i < na; i++) { *worst = fmax(*worst, fabs(a[i] - b[i]) / fabs(a[i])); }
    return *worst <= 1e-6;
}

// --generate on the reference model: each token the binary drew is checked against this process's logits of the
// prefix it drew it from and the draws of the seed's generator (TrainState's rng, fresh from --seed): the token must
// be the one whose interval (pick_interval) holds the draw; for temperature 0 the argmax, with its lead over the
// runner-up reported (the binary's BLAS and this build's loops sum in other orders: a lead far above 1e-5 makes
// that irrelevant). With stop (--stop-at-eot 1), a sample shorter than ntok must end at its first <|endoftext|>
// (token 0 for this vocabulary) and one that long must hold none before its last token; the draws of the tokens a
// stopped sample did not draw are skipped, as the binary skips them.
static void check_generate_run(const char* name, GPT* m, float temperature, int top_k, float top_p, float min_p, float rep, int seed, int samples, int ntok,
                               int stop) {
    char cmd[2048], out[65536];
    snprintf(cmd, sizeof(cmd), "./train_gpt --init tests/ref/ref_model.bin --generate %d --gen-tokens %d --temperature %g --top-k %d --top-p %.9g --min-p %.9g "
             "--repetition-penalty %.9g --seed %d --threads 1 --logprobs 1 --stop-at-eot %d", samples, ntok, temperature, top_k, top_p, min_p, rep, seed, stop);
    int rc = run_capture(cmd, out, sizeof(out));
    int ids[4][64], counts[4] = {0};
    int n = parse_samples(out, ids, counts);
    if (rc != 0 || n != samples) { report(0, name, "exit %d, %d samples: %.300s", rc, n, out); return; }
    const GPTConfig* g = &m->cfg;
    Config c;
    config_defaults(&c);
    c.seed = seed;
    TrainState ts;
    train_state_fresh(&ts, &c, 1.0f);
    int bad = 0, edge = 0, checked = 0;
    double min_lead = INFINITY;
    char first[300] = "";
    int32_t toks[64];
    float* row = (float*)mallocCheck(sizeof(float) * g->padded_vocab_size);
    char text[8192];
    double lp[8], lp_want[8], lp_worst = 0.0;
    int nlp = generate_parts(out, text, sizeof(text), lp);
    int stopped = 0;
    for (int k = 0; k < samples; k++) {
        int L = counts[k] + 1, eot_at = -1;
        lp_want[k] = 0.0;
        for (int t = 0; t < counts[k] && eot_at < 0; t++) { eot_at = ids[k][t] == 0 ? t : -1; }
        int len_ok = stop ? counts[k] >= 1 && counts[k] <= ntok && (eot_at < 0 ? counts[k] == ntok : eot_at == counts[k] - 1) : counts[k] == ntok;
        stopped += stop && counts[k] < ntok;
        if (!len_ok || L > g->max_seq_len) { bad++; snprintf(first, sizeof(first), "sample %d has %d tokens (its first 0 at %d)", k + 1, counts[k], eot_at); break; }
        toks[0] = 0; // (the prompt: <|endoftext|>, which for a vocabulary without GPT-2's is token 0)
        for (int t = 1; t < L; t++) { toks[t] = ids[k][t - 1]; }
        gpt_forward(m, toks, 1, L); // causal: row t - 1 depends on toks[0..t) only
        for (int t = 1; t < L; t++) {
            classifier_logits_rows(&m->ctx, row, m->acts.lnf + (size_t)(t - 1) * g->channels, m->p.wte, 1, g->channels, g->padded_vocab_size);
            int j = toks[t];
            double mx = -INFINITY, z = 0.0;
            for (int v = 0; v < g->vocab_size; v++) { mx = fmax(mx, row[v]); }
            for (int v = 0; v < g->vocab_size; v++) { z += exp((double)row[v] - mx); }
            if (j >= 0 && j < g->vocab_size) { lp_want[k] += (double)row[j] - mx - log(z); }
            // --repetition-penalty: each distinct token of toks[0..t) (the prompt's too) once, x / rep above 0, x rep below
            for (int q = 0; q < t && rep != 1.0f; q++) {
                int dup = 0;
                for (int q2 = 0; q2 < q; q2++) { dup |= toks[q2] == toks[q]; }
                if (!dup) { row[toks[q]] = row[toks[q]] > 0.0f ? row[toks[q]] / rep : row[toks[q]] * rep; }
            }
            if (temperature == 0.0f) {
                int best = 0, second = -1;
                for (int v = 1; v < g->vocab_size; v++) { if (row[v] > row[best]) { best = v; } }
                for (int v = 0; v < g->vocab_size; v++) { if (v != best && (second < 0 || row[v] > row[second])) { second = v; } }
                min_lead = fmin(min_lead, (double)row[best] - row[second]);
                checked++;
                if (j != best && bad++ == 0) { snprintf(first, sizeof(first), "sample %d token %d: %d, the argmax is %d", k + 1, t, j, best); }
                continue;
            }
            double u = rng_uniform(&ts.rng), lo = 0, hi = 0, margin = INFINITY, gap = INFINITY;
            int kept = j >= 0 && j < g->vocab_size && pick_interval(row, g->vocab_size, temperature, top_k, top_p, min_p, j, &lo, &hi, &margin, &gap);
            if ((kept && (fabs(u - lo) < 1e-6 || fabs(u - hi) < 1e-6)) || margin < 1e-5 || gap < 1e-5) { edge++; continue; }
            checked++;
            if ((!kept || u < lo || u >= hi) && bad++ == 0) {
                snprintf(first, sizeof(first), "sample %d token %d: %d%s, draw %.9f, its interval [%.9f, %.9f)", k + 1, t, j, kept ? "" : " (not in the top-k / top-p / min-p)", u, lo, hi);
            }
        }
        for (int t = counts[k]; temperature != 0.0f && t < ntok; t++) { (void)rng_uniform(&ts.rng); } // (a stopped sample's unused draws)
    }
    free(row);
    char detail[200] = "";
    if (temperature == 0.0f) { snprintf(detail, sizeof(detail), ", smallest lead of the argmax %.3g", min_lead); }
    int tokens = 0;
    for (int k = 0; k < samples; k++) { tokens += counts[k]; }
    report(bad == 0 && checked >= tokens - edge && (temperature != 0.0f || min_lead > 1e-4) && (!stop || stopped > 0), name,
           "%d of %d tokens wrong, %d at an edge, %d sample(s) stopped at <|endoftext|>%s %s", bad, checked, edge, stopped, detail, first);
    char nm[300];
    snprintf(nm, sizeof(nm), "... and --logprobs: each sample's log-probability is the sum of log softmax of the model's logits at its tokens (1e-6 relative)");
    report(logprobs_agree(lp_want, samples, lp, nlp, &lp_worst), nm, "%d values for %d samples, worst relative difference %.3g", nlp, samples, lp_worst);
}

// A model whose next token depends on the context: the reference model trained (2000 steps, about 3 s) on documents
// of <|endoftext|> (token 0) then two random tokens A B repeated, A B A B ... (16 tokens), so that after its first
// two tokens a sample must repeat the token two positions back, which takes the attention to the previous
// position's key and value. Its logits are peaked (a sample's two free tokens cost log 100 each, the rest nearly
// nothing), where the untrained model's are nearly uniform: a forward that reads a wrong cached row, or embeds a
// token at a wrong position, breaks the pattern in the tokens themselves. Returns 0 if the training failed.
static int abab_model(char* path, size_t cap) {
    char dir[512], shard[600], cmd[2048], out[65536];
    snprintf(dir, sizeof(dir), "%s/abab", TMP);
    snprintf(shard, sizeof(shard), "%s/abab_train_000000.bin", dir);
    snprintf(path, cap, "%s/out/model_00002000.bin", dir);
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", dir, dir);
    if (system(cmd) != 0) { report(0, "abab model setup", "%s", cmd); return 0; }
    enum { DOCS = 2400, DOC = 17 };
    FILE* f = fopenCheck(shard, "wb");
    int32_t h[256] = {0};
    h[0] = 20240520; h[1] = 1; h[2] = DOCS * DOC;
    fwriteCheck(h, 4, 256, f, shard);
    uint64_t s = 5;
    for (int d = 0; d < DOCS; d++) {
        uint16_t ab[2] = {(uint16_t)(1 + rng_next(&s) % 100), (uint16_t)(1 + rng_next(&s) % 100)};
        for (int i = 0; i < DOC; i++) {
            uint16_t t = i == 0 ? 0 : ab[(i - 1) % 2];
            fwriteCheck(&t, 2, 1, f, shard);
        }
    }
    fclose(f);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init tests/ref/ref_model.bin --train %s --batch-size 8 --seq-len 16 --steps 2000 --lr 1e-2 --warmup 50 "
             "--threads 2 --out %s/out --checkpoint-every 2000 > %s/train.txt 2>&1", shard, dir, dir);
    int rc = system(cmd);
    snprintf(cmd, sizeof(cmd), "tail -n 3 %s/train.txt", dir);
    run_capture(cmd, out, sizeof(out));
    const char* last = strstr(out, "step  2000/2000 | loss ");
    double loss = last ? atof(last + strlen("step  2000/2000 | loss ")) : -1.0;
    report(rc == 0 && loss > 0 && loss < 1.2, "the ABAB model: the reference model trained on A B A B ... documents learns them (loss below 1.2)",
           "exit %d, final loss %.4f", rc, loss);
    return rc == 0 && loss > 0 && loss < 1.2;
}

// The ABAB pattern in --generate's output: want_samples samples of ntok tokens, in each every token from the third
// on equal to the one two positions back. why: what was found.
static int abab_samples_ok(const char* out, int want_samples, int ntok, char* why, size_t cap) {
    int ids[4][64], counts[4] = {0};
    int n = parse_samples(out, ids, counts);
    if (n != want_samples) { snprintf(why, cap, "%d samples", n); return 0; }
    for (int k = 0; k < n; k++) {
        if (counts[k] != ntok) { snprintf(why, cap, "sample %d has %d tokens", k + 1, counts[k]); return 0; }
        for (int t = 2; t < counts[k]; t++) {
            if (ids[k][t] != ids[k][t - 2]) { snprintf(why, cap, "sample %d token %d: %d, two back %d", k + 1, t + 1, ids[k][t], ids[k][t - 2]); return 0; }
        }
    }
    snprintf(why, cap, "%d samples of %d tokens, each A B A B ...", n, ntok);
    return 1;
}

// `cmd` on `np` ranks with `split` must print one process's samples (text: its "--- sample" lines and tokens, "" if
// that run failed) and log-probabilities (lp, n of them) within 1e-6. name: a format taking np and split.
static void check_split_generate(const char* cmd1, const char* text, const double* lp, int n, const char* np, const char* split, const char* name) {
    char cmd[4096], nm[300];
    static char out[65536], text2[8192];
    double lp2[8], worst = 0.0;
    snprintf(cmd, sizeof(cmd), MPIRUN " -np %s %s %s 2> /dev/null", np, cmd1, split);
    int rc = run_capture(cmd, out, sizeof(out));
    int n2 = generate_parts(out, text2, sizeof(text2), lp2);
    snprintf(nm, sizeof(nm), name, np, split);
    report(rc == 0 && text[0] && strcmp(text, text2) == 0 && logprobs_agree(lp, n, lp2, n2, &worst), nm,
           "log-probabilities %d vs %d, worst relative difference %.3g: %.200s | %.200s", n, n2, worst, text, text2);
}

// Sampling the ABAB model (abab_model): through the KV cache (the default), without it, one sample at a time, and
// split over ranks (tp 2, tp 2 with sequence parallelism, pp 2, tp 2 x pp 2), every sample keeps the pattern, with
// the peaked log-probability it implies (about 2 log 100 for the two free tokens: above -12 a sample), and all print
// the same samples and log-probabilities.
static void test_generate_abab(void) {
    char model[700], cmd[4096], why[200], base[1024];
    if (!abab_model(model, sizeof(model))) { return; }
    static char out[3][65536], text[3][8192];
    double lp[3][8];
    int n[3], abab[3];
    snprintf(base, sizeof(base), "./train_gpt --init %s --generate 4 --gen-tokens 15 --seed 3 --threads 1 --logprobs 1", model);
    const char* how[3] = {"", " --kv-cache 0", " --batch-size 1"};
    const char* what[3] = {"through the KV cache, 4 at once", "--kv-cache 0", "--batch-size 1"};
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof(cmd), "%s%s", base, how[k]);
        int rc = run_capture(cmd, out[k], sizeof(out[k]));
        n[k] = generate_parts(out[k], text[k], sizeof(text[k]), lp[k]);
        abab[k] = rc == 0 && abab_samples_ok(out[k], 4, 15, why, sizeof(why));
        int ok = abab[k] && n[k] == 4;
        for (int s = 0; ok && s < 4; s++) { ok = lp[k][s] > -12.0 && lp[k][s] < -5.0; }
        double worst = 0.0;
        int same = k == 0 || (strcmp(text[k], text[0]) == 0 && logprobs_agree(lp[0], n[0], lp[k], n[k], &worst));
        char nm[300];
        snprintf(nm, sizeof(nm), "the ABAB model, %s: every sample A B A B ..., log-probability between -12 and -5%s", what[k],
                 k ? ", the cached run's samples and log-probabilities (1e-6)" : "");
        report(ok && same, nm, "exit %d; %s; log-probabilities %.3f %.3f %.3f %.3f; %.200s", rc, why, lp[k][0], lp[k][1], lp[k][2], lp[k][3], text[k]);
    }
    if (system("command -v mpirun > /dev/null 2>&1") != 0) { return; }
    const char* splits[4][2] = {{"2", "--tp 2"}, {"2", "--tp 2 --sequence-parallel 1"}, {"2", "--pp 2"}, {"4", "--tp 2 --pp 2"}};
    for (int k = 0; k < 4; k++) {
        check_split_generate(base, abab[0] ? text[0] : "", lp[0], n[0], splits[k][0], splits[k][1],
                             "the ABAB model on %s ranks with %s: one process's A B A B ... samples and log-probabilities (1e-6)");
    }
}

static void test_generate(void) {
    test_sample_pick();
    if (!file_exists("tests/ref/ref_model.bin")) { report(0, "--generate", "tests/ref/ref_model.bin is missing"); return; }
    GPT m;
    GPTConfig g;
    int version;
    FILE* fp;
    model_read_header("tests/ref/ref_model.bin", &g, &version, &fp);
    gpt_alloc_params(&m, &g, 1, DTYPE_FP32, g.max_seq_len);
    model_load_params("tests/ref/ref_model.bin", fp, version, &m.layout, m.params);
    activations_alloc(&m.acts, &m.ctx, &g, 1, g.max_seq_len, 0);
    check_generate_run("--generate (temperature 1): every token is the one the seed's draw picks from the model's softmax", &m, 1.0f, 0, 1.0f, 0.0f, 1.0f, 5, 2, 15, 0);
    check_generate_run("--generate --temperature 0.6 --top-k 5: every token from the top 5 by the draw, over softmax(logits / 0.6)", &m, 0.6f, 5, 1.0f, 0.0f, 1.0f, 9, 3, 15, 0);
    check_generate_run("--generate --temperature 1.5 --top-p 0.3: every token from the fewest most likely holding 30% of softmax(logits / 1.5)", &m, 1.5f, 0, 0.3f, 0.0f, 1.0f, 4, 3, 15, 0);
    check_generate_run("--generate --top-k 40 --top-p 0.6: every token from the top-p of the top 40", &m, 1.0f, 40, 0.6f, 0.0f, 1.0f, 6, 2, 15, 0);
    check_generate_run("--generate --temperature 0.1 --min-p 0.3: every token from those at least 0.3 times as likely as the most likely, by the draw",
                       &m, 0.1f, 0, 1.0f, 0.3f, 1.0f, 3, 3, 15, 0);
    check_generate_run("--generate --temperature 0.2 --top-k 30 --top-p 0.7 --min-p 0.4: every token from the min-p of the top-p of the top 30",
                       &m, 0.2f, 30, 0.7f, 0.4f, 1.0f, 7, 2, 15, 0);
    check_generate_run("--generate --temperature 0: every token the argmax of the model's logits", &m, 0.0f, 0, 1.0f, 0.0f, 1.0f, 1, 1, 15, 0);
    check_generate_run("--generate --temperature 0 --repetition-penalty 100: every token the argmax of the logits with those of the tokens already drawn "
                       "(and the prompt's) divided by 100 when positive, times 100 when not", &m, 0.0f, 0, 1.0f, 0.0f, 100.0f, 1, 1, 15, 0);
    check_generate_run("--generate --temperature 0.8 --top-k 20 --repetition-penalty 1.5: every token the draw's over the penalized logits", &m, 0.8f, 20, 1.0f, 0.0f, 1.5f, 8, 3, 15, 0);
    check_generate_run("--generate --repetition-penalty 0.5 (below 1: repeats encouraged): every token the draw's", &m, 1.0f, 0, 1.0f, 0.0f, 0.5f, 2, 2, 15, 0);
    check_generate_run("--generate --stop-at-eot 1: each sample ends at its first <|endoftext|> (some do here), every token the draw's, the log-probability "
                       "summed to there", &m, 1.0f, 0, 1.0f, 0.0f, 1.0f, 4, 4, 15, 1);
    gpt_free(&m);

    char cmd[4096], a[65536], b[65536];
    // the seed decides the samples; top-k 1 is greedy
    const char* base = "./train_gpt --init tests/ref/ref_model.bin --generate 2 --gen-tokens 12 --threads 1";
    snprintf(cmd, sizeof(cmd), "%s --seed 3 | grep -A1 -e '--- sample'", base);
    int r1 = run_capture(cmd, a, sizeof(a));
    int r2 = run_capture(cmd, b, sizeof(b));
    int same = r1 == 0 && r2 == 0 && strcmp(a, b) == 0;
    snprintf(cmd, sizeof(cmd), "%s --seed 4 | grep -A1 -e '--- sample'", base);
    run_capture(cmd, b, sizeof(b));
    const char* sa = strstr(a, "--- sample"), *sb = strstr(b, "--- sample");
    report(same && sa && sb && strcmp(sa, sb) != 0, "--generate: the same seed gives the same samples, another seed others", "%.200s | %.200s", a, b);
    snprintf(cmd, sizeof(cmd), "%s --top-k 1 | grep -A1 -e '--- sample'", base);
    r1 = run_capture(cmd, a, sizeof(a));
    snprintf(cmd, sizeof(cmd), "%s --temperature 0 | grep -A1 -e '--- sample'", base);
    r2 = run_capture(cmd, b, sizeof(b));
    report(r1 == 0 && r2 == 0 && a[0] && strcmp(a, b) == 0, "--top-k 1 samples what --temperature 0 does (greedy)", "%.200s | %.200s", a, b);
    // the KV cache (on by default; the runs above check its tokens against full forwards) against none: the same
    // samples (fp32: its sums differ from the full forward's by ~1e-7 relative; no draw of these seeds is that close)
    const char* longer = "./train_gpt --init tests/ref/ref_model.bin --generate 2 --gen-tokens 30 --threads 1 --seed 5 --temperature 0.9 --top-k 20";
    char ta[8192], tb[8192];
    double la[8], lb[8], worst = 0.0;
    snprintf(cmd, sizeof(cmd), "%s --logprobs 1", longer);
    r1 = run_capture(cmd, a, sizeof(a));
    int na = generate_parts(a, ta, sizeof(ta), la);
    snprintf(cmd, sizeof(cmd), "%s --logprobs 1 --kv-cache 0", longer);
    r2 = run_capture(cmd, b, sizeof(b));
    int nb = generate_parts(b, tb, sizeof(tb), lb);
    report(r1 == 0 && r2 == 0 && ta[0] && strcmp(ta, tb) == 0 && logprobs_agree(la, na, lb, nb, &worst),
           "--kv-cache 0 (a forward over the whole prefix per token) samples what the KV cache does, with the same log-probabilities",
           "log-probabilities %d vs %d, worst relative difference %.3g: %.200s | %.200s", na, nb, worst, ta, tb);
    // samples drawn together are the samples drawn one at a time: 5 samples at once (the default batch), 2 at a time
    // (a last batch of 1) and 1 at a time
    const char* five = "./train_gpt --init tests/ref/ref_model.bin --generate 5 --gen-tokens 15 --threads 1 --seed 8 --temperature 1.1";
    char c2[65536];
    snprintf(cmd, sizeof(cmd), "%s | grep -A1 -e '--- sample'", five);
    r1 = run_capture(cmd, a, sizeof(a));
    snprintf(cmd, sizeof(cmd), "%s --batch-size 2 | grep -A1 -e '--- sample'", five);
    r2 = run_capture(cmd, b, sizeof(b));
    snprintf(cmd, sizeof(cmd), "%s --batch-size 1 | grep -A1 -e '--- sample'", five);
    int r3 = run_capture(cmd, c2, sizeof(c2));
    int ids5[4][64], counts5[4] = {0};
    int distinct = parse_samples(a, ids5, counts5) == 4 && memcmp(ids5[0], ids5[1], sizeof(int) * 15) != 0;
    report(r1 == 0 && r2 == 0 && r3 == 0 && distinct && strcmp(a, b) == 0 && strcmp(a, c2) == 0,
           "--generate 5: all at once, --batch-size 2 and --batch-size 1 print the same (different) samples", "%.200s | %.200s | %.200s", a, b, c2);
    // the sequences of a batch choose their tokens in parallel over the threads: 5 at once on 2 threads (every filter,
    // the repetition marks per sequence) print what one at a time on 1 thread does, log-probabilities too
    {
        const char* par = "./train_gpt --init tests/ref/ref_model.bin --generate 5 --gen-tokens 15 --seed 8 --temperature 1.1 --top-k 50 "
                          "--top-p 0.95 --min-p 0.02 --repetition-penalty 1.2 --logprobs 1";
        snprintf(cmd, sizeof(cmd), "%s --threads 2", par);
        r1 = run_capture(cmd, a, sizeof(a));
        snprintf(cmd, sizeof(cmd), "%s --threads 1 --batch-size 1", par);
        r2 = run_capture(cmd, b, sizeof(b));
        na = generate_parts(a, ta, sizeof(ta), la);
        nb = generate_parts(b, tb, sizeof(tb), lb);
        report(r1 == 0 && r2 == 0 && na == 5 && strcmp(ta, tb) == 0 && logprobs_agree(la, na, lb, nb, &worst),
               "--generate 5 on 2 threads (the batch's tokens chosen in parallel, every filter) prints the samples of one at a time on 1 thread",
               "exit %d and %d, %d and %d samples, worst relative difference %.3g: %.200s | %.200s", r1, r2, na, nb, worst, ta, tb);
    }

    // --stop-at-eot 1: each sample is --stop-at-eot 0's up to and including its first <|endoftext|> (token 0 here; the
    // draws a stopped sample leaves unused are still its own, so the later samples are the same), and the batch does
    // not change them: all 4 at once (the batch runs until both stopped ones and the others are done) and one at a time
    {
        const char* stopc = "./train_gpt --init tests/ref/ref_model.bin --generate 4 --gen-tokens 15 --threads 1 --seed 4";
        int ids0[4][64], c0[4] = {0}, ids1[4][64], c1[4] = {0};
        snprintf(cmd, sizeof(cmd), "%s --stop-at-eot 0", stopc);
        r1 = run_capture(cmd, a, sizeof(a));
        snprintf(cmd, sizeof(cmd), "%s --stop-at-eot 1", stopc);
        r2 = run_capture(cmd, b, sizeof(b));
        int n0 = parse_samples(a, ids0, c0), n1 = parse_samples(b, ids1, c1), ok = n0 == 4 && n1 == 4, short_ones = 0;
        for (int k = 0; ok && k < 4; k++) {
            int cut = c0[k];
            for (int t = 0; t < c0[k]; t++) { if (ids0[k][t] == 0) { cut = t + 1; break; } }
            ok = c1[k] == cut && memcmp(ids0[k], ids1[k], sizeof(int) * (size_t)cut) == 0;
            short_ones += cut < c0[k];
        }
        report(r1 == 0 && r2 == 0 && ok && short_ones > 0 && short_ones < 4,
               "--stop-at-eot 1: each sample is --stop-at-eot 0's cut after its first <|endoftext|> (some stop, some run to the end)", "%d stopped: %.200s | %.200s",
               short_ones, a, b);
        snprintf(cmd, sizeof(cmd), "%s --stop-at-eot 1 --logprobs 1 | grep -A2 -e '--- sample'", stopc);
        r1 = run_capture(cmd, a, sizeof(a));
        snprintf(cmd, sizeof(cmd), "%s --stop-at-eot 1 --logprobs 1 --batch-size 1 | grep -A2 -e '--- sample'", stopc);
        r2 = run_capture(cmd, b, sizeof(b));
        report(r1 == 0 && r2 == 0 && a[0] && strcmp(a, b) == 0, "--stop-at-eot 1: 4 samples at once print what one at a time do, log-probabilities too",
               "%.200s | %.200s", a, b);
    }

    // a model split over ranks samples what one process does: --tp (each rank caches its heads; sequence parallelism
    // without a cache), --pp (each stage its layers; the last draws), both; data-parallel copies are refused
    if (system("command -v mpirun > /dev/null 2>&1") == 0) {
        // (with --stop-at-eot: this seed's first sample ends at <|endoftext|>, token 0 here, as its 11th token, on the
        // last pipeline stage, whose tokens every rank then holds; the second runs to its 12 tokens)
        const char* one = "./train_gpt --init tests/ref/ref_model.bin --generate 2 --gen-tokens 12 --threads 1 --seed 9 --temperature 0.9 --logprobs 1 "
                          "--stop-at-eot 1";
        r1 = run_capture(one, a, sizeof(a));
        int n1 = generate_parts(a, ta, sizeof(ta), la);
        report(r1 == 0 && strstr(a, "(11 tokens") && strstr(a, "(12 tokens"), "--stop-at-eot 1: the split runs' seed stops one sample early (at 11 of 12 tokens)",
               "exit %d: %.300s", r1, a);
        const char* splits[4][2] = {{"2", "--tp 2"}, {"2", "--tp 2 --sequence-parallel 1"}, {"2", "--pp 2"}, {"4", "--tp 2 --pp 2"}};
        for (int k = 0; k < 4; k++) {
            check_split_generate(one, r1 == 0 ? ta : "", la, n1, splits[k][0], splits[k][1],
                                 "--generate --stop-at-eot 1 on %s ranks with %s prints the samples of one process, once, with its log-probabilities (1e-6)");
        }
        // several layers per stage (the reference model has 2, one a stage): a fresh 4-layer model (d4, GPT-2's
        // vocabulary), whose stages each cache two layers at their local slots
        const char* four = "./train_gpt --model d4 --seq-len 32 --generate 2 --gen-tokens 12 --threads 1 --seed 3 --temperature 0.9 --logprobs 1";
        r1 = run_capture(four, a, sizeof(a));
        n1 = generate_parts(a, ta, sizeof(ta), la);
        const char* splits4[2][2] = {{"2", "--pp 2"}, {"4", "--tp 2 --pp 2"}};
        for (int k = 0; k < 2; k++) {
            check_split_generate(four, r1 == 0 && n1 == 2 ? ta : "", la, n1, splits4[k][0], splits4[k][1],
                                 "--generate on a 4-layer model, %s ranks with %s (2 layers cached a stage): one process's samples and log-probabilities (1e-6)");
        }
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 4 %s --tp 2 --pp 2 2> /dev/null | tail -n 1", one);
        r2 = run_capture(cmd, b, sizeof(b));
        report(r2 == 0 && strstr(b, "(KV cache: one position's forward per token, 2 samples at a time; the cache "), "... and tp 2 x pp 2 samples with the KV cache, 2 at a time", "exit %d: %.200s", r2, b);
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 2 %s", one);
        r2 = run_capture(cmd, b, sizeof(b));
        report(r2 != 0 && strstr(b, "the ranks must split one copy of the model"), "--generate on 2 data-parallel copies is refused", "exit %d: %.200s", r2, b);
    }
    // a prompt, encoded with GPT-2's BPE as ./tokenize encodes it; the sample prints it, then its continuation
    if (file_exists("data/gpt2/encoder.json") && file_exists("./tokenize")) {
        run_capture("printf 'ROMEO: Is it, in 1597?' | ./tokenize encode --vocab data/gpt2", b, sizeof(b));
        for (char* p = b; *p; p++) { if (*p == '\n') { *p = '\0'; break; } }
        snprintf(cmd, sizeof(cmd), "./train_gpt --model d1 --seq-len 32 --generate 1 --gen-tokens 8 --prompt 'ROMEO: Is it, in 1597?' --threads 1");
        int rc = run_capture(cmd, a, sizeof(a));
        char want[600];
        snprintf(want, sizeof(want), "[%.500s]", b);
        const char* body = strstr(a, "--- sample 1\n");
        report(rc == 0 && b[0] && strstr(a, want) && body && strncmp(body + 13, "ROMEO: Is it, in 1597?", 22) == 0,
               "--prompt: encoded as ./tokenize encodes it; the sample prints it as text, then its continuation", "exit %d, tokenize: %s: %.400s", rc, b, a);
        // samples during training continue the prompt too
        char shard[2100];
        if (!fresh_shard("--sample-every with --prompt", "gen", "train.bin", 2000, 77, shard, sizeof(shard))) { return; }
        snprintf(cmd, sizeof(cmd), "./train_gpt --model d1 --train %s --batch-size 1 --seq-len 32 --steps 3 --sample-every 1 --gen-tokens 4 "
                 "--prompt 'ROMEO:' --temperature 0.7 --top-k 5 --top-p 0.9 --min-p 0.05 --repetition-penalty 1.3 --threads 1 --log %s/gen/on.jsonl | grep -a -c '^sample: ROMEO:'", shard, TMP);
        rc = run_capture(cmd, a, sizeof(a));
        report(atoi(a) == 3, "--sample-every with --prompt: each training sample prints the prompt, then its continuation", "exit %d: %.300s", rc, a);
        // on against off: sampling (a forward of its own, the sampler's generator) leaves the training run unchanged
        snprintf(cmd, sizeof(cmd), "./train_gpt --model d1 --train %s --batch-size 1 --seq-len 32 --steps 3 --threads 1 --log %s/gen/off.jsonl > /dev/null",
                 shard, TMP);
        if (system(cmd) == 0) {
            char on[2100], off[2100];
            snprintf(on, sizeof(on), "%s/gen/on.jsonl", TMP);
            snprintf(off, sizeof(off), "%s/gen/off.jsonl", TMP);
            compare_losses("training with --sample-every --prompt --temperature --top-k --top-p --min-p --repetition-penalty logs the losses of the same run without samples, bit for bit", on, 0, off, 3, 0.0);
            compare_values("... and its gradient norms", "grad_norm", on, off, 3, 0.0);
        } else {
            report(0, "training without samples", "%s failed", cmd);
        }
        // a prompt that leaves no room, and a model whose vocabulary is not GPT-2's
        rc = run_capture("./train_gpt --model d1 --seq-len 4 --generate 1 --prompt 'ROMEO: Is it, in 1597?'", a, sizeof(a));
        report(rc == 1 && strstr(a, "--prompt is 10 tokens: no room"), "--prompt longer than the context is refused", "exit %d: %.300s", rc, a);
        rc = run_capture("./train_gpt --init tests/ref/ref_model.bin --generate 1 --prompt 'ROMEO:'", a, sizeof(a));
        report(rc == 1 && strstr(a, "50257 tokens; this model has 101"), "--prompt on a model of another vocabulary is refused", "exit %d: %.300s", rc, a);
        // rank 0 alone reads the vocabulary and sends the prompt's tokens: rank 1 runs a copy of the binary in a
        // directory without data/gpt2 (as on another machine; mpirun's environment, which its local ranks inherit, has
        // no $GPT2_VOCAB_DIR) and the split model still samples one process's text
        if (system("command -v mpirun > /dev/null 2>&1") == 0) {
            const char* gen = "--model d4 --seq-len 32 --generate 2 --gen-tokens 8 --prompt 'ROMEO:' --threads 1 --seed 5 --logprobs 1 --stop-at-eot 1";
            snprintf(cmd, sizeof(cmd), "./train_gpt %s", gen);
            r1 = run_capture(cmd, a, sizeof(a));
            int n1 = generate_parts(a, ta, sizeof(ta), la);
            snprintf(cmd, sizeof(cmd), "rm -rf %s/novocab && mkdir -p %s/novocab && cp train_gpt %s/novocab/ && env -u GPT2_VOCAB_DIR " MPIRUN " -np 1 ./train_gpt %s --tp 2 : "
                     "-np 1 -wdir %s/novocab %s/novocab/train_gpt %s --tp 2 2> /dev/null", TMP, TMP, TMP, gen, TMP, TMP, gen);
            r2 = run_capture(cmd, b, sizeof(b));
            int n2 = generate_parts(b, tb, sizeof(tb), lb);
            report(r1 == 0 && r2 == 0 && n1 == 2 && strstr(ta, "ROMEO:") && strcmp(ta, tb) == 0 && logprobs_agree(la, n1, lb, n2, &worst),
                   "--prompt under --tp 2 with the vocabulary on rank 0 only: one process's samples and log-probabilities (1e-6)",
                   "exit %d and %d, worst relative difference %.3g: %.200s | %.200s", r1, r2, worst, ta, tb);
        }
    } else {
        report(0, "--prompt", "data/gpt2/encoder.json or ./tokenize missing");
    }
    // flags that do nothing without sampling, and training flags with --generate
    const char* misuse[][2] = {
        {"--model d1 --train x --temperature 0.5", "--temperature shapes samples: it needs --generate N or --sample-every N"},
        {"--model d1 --train x --top-k 5", "--top-k shapes samples"},
        {"--model d1 --train x --top-p 0.9", "--top-p shapes samples"},
        {"--model d1 --train x --repetition-penalty 1.2", "--repetition-penalty shapes samples"},
        {"--init tests/ref/ref_model.bin --generate 1 --repetition-penalty 0", "--repetition-penalty: 0 is out of range"},
        {"--init tests/ref/ref_model.bin --generate 1 --top-p 1.5", "--top-p: 1.5 is out of range [0, 1]"},
        {"--model d1 --train x --min-p 0.1", "--min-p shapes samples"},
        {"--init tests/ref/ref_model.bin --generate 1 --min-p -0.1", "--min-p: -0.1 is out of range [0, 1]"},
        {"--model d1 --train x --kv-cache 0", "--kv-cache shapes samples"},
        {"--model d1 --train x --stop-at-eot 1", "--stop-at-eot shapes samples"},
        {"--model d1 --train x --sample-every 5 --logprobs 1", "--logprobs prints the log-probability of --generate's samples"},
        {"--init tests/ref/ref_model.bin --generate 1 --lr 1e-3", "--lr does nothing with it"},
        {"--init tests/ref/ref_model.bin --generate 1 --prompt ''", "--prompt: empty"},
        {"--init tests/ref/ref_model.bin --generate 1 --eval-hellaswag x", "give one"},
        {"--init tests/ref/ref_model.bin --generate 40 --batch-size 20", "at most --seq-len (16) samples are drawn together"},
    };
    for (size_t k = 0; k < sizeof(misuse) / sizeof(misuse[0]); k++) {
        snprintf(cmd, sizeof(cmd), "./train_gpt %s", misuse[k][0]);
        int rc = run_capture(cmd, a, sizeof(a));
        char nm[300];
        snprintf(nm, sizeof(nm), "refused: %s", misuse[k][0]);
        report(rc == 1 && strstr(a, misuse[k][1]), nm, "exit %d: %.200s", rc, a);
    }
}

#endif // RUNS_GENERATE_H
