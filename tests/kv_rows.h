/*
tests/kv_rows.h: the KV-cache forwards that test_gpt.c (one process) and tests/test_tp.c (a tensor-parallel rank's
share of the heads) compare with full forwards. Include after train_gpt.c.
*/
#ifndef KV_ROWS_H
#define KV_ROWS_H

// Runs B sequences through a KV cache the way sampling does: sequence 0's first P tokens (the prompt every sequence
// shares) cached once, then one position of every sequence per forward, up to position N - 1. seqs[b * stride + t]
// is sequence b's token at t (stride >= N: the cache is made for stride positions). Writes each forward's rows of the
// final LayerNorm (the LM head's input) to got[(b * N + t) * C + c]. Returns 0 when kv_alloc refuses the cache.
static int kv_forward_rows(GPT* m, const int32_t* seqs, int B, int stride, int N, int P, float* got) {
    int C = m->cfg.channels;
    float* row = (float*)mallocCheck((size_t)(B > P ? B : P) * C * sizeof(float));
    int32_t* step = (int32_t*)mallocCheck((size_t)B * sizeof(int32_t));
    KvCache kv;
    if (!kv_alloc(&kv, m, B, stride)) { free(row); free(step); return 0; }
    kv.pos = 0; // the prompt, once for all sequences
    m->kv = &kv;
    gpt_forward(m, seqs, 1, P);
    m->kv = NULL;
    dev_copy_d2h(&m->ctx, row, m->acts.lnf, (size_t)P * C * sizeof(float));
    dev_sync(&m->ctx);
    for (int b = 0; b < B; b++) { memcpy(got + (size_t)b * N * C, row, (size_t)P * C * sizeof(float)); }
    for (int t = P; t < N; t++) { // then one position of every sequence per forward
        for (int b = 0; b < B; b++) { step[b] = seqs[(size_t)b * stride + t]; }
        kv.pos = t;
        m->kv = &kv;
        gpt_forward(m, step, B, 1);
        m->kv = NULL;
        dev_copy_d2h(&m->ctx, row, m->acts.lnf, (size_t)B * C * sizeof(float));
        dev_sync(&m->ctx);
        for (int b = 0; b < B; b++) { memcpy(got + ((size_t)b * N + t) * C, row + (size_t)b * C, (size_t)C * sizeof(float)); }
    }
    kv_free(&m->ctx, &kv);
    free(row);
    free(step);
    return 1;
}

#endif // KV_ROWS_H
