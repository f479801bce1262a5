/*
tests/gpt_sampling.h: evaluation, the KV cache's forward and sampling, each against a direct computation (test_gpt
--only units). Split out of test_gpt.c by topic and included by it where this code stood: it uses the suite's helpers
above the include (check_close, check_close_f, rand_d, fill_rand, to_float, report, g_ctx; build_model of
tests/gpt_reference.h) and the trainer's code (train_gpt.c); not a standalone header.
*/
#ifndef GPT_SAMPLING_H
#define GPT_SAMPLING_H

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

#endif // GPT_SAMPLING_H
