/*
evaluate.h: evaluation in train_gpt.c, split out of it by topic and included by it after the pipeline stages and the
planner (it uses the model's forward and LM head, gpt_forward_any, the data loader and the process groups of
train_gpt.c; it is not a standalone header). The mean validation loss, and multiple-choice eval files such as
HellaSwag (hellaswag.h holds the format), both the same whatever the number of ranks and the layout.
*/
#ifndef EVALUATE_H
#define EVALUATE_H

// Mean validation loss over `steps` batches; batch i is evaluated by data-parallel rank i % dp, so the batches
// and their order are the same whatever the number of ranks. Under ZeRO-3 a forward gathers layers from every
// data-parallel rank, so all of them must run as many forwards: when steps does not divide by dp, the ranks left
// without a batch in the last round run one more forward whose loss is not counted.
static float evaluate(GPT* m, DataLoader* val, int steps, ParallelContext* pc) {
    dataloader_reset(val);
    gpt_clear_loss_sum(m);
    int rounds = (steps + pc->dp - 1) / pc->dp;
    for (int i = 0; i < rounds * pc->dp; i++) {
        if (i < steps) { dataloader_next_batch(val); }
        if (i % pc->dp != pc->dp_rank) { continue; }
        if (i >= steps) {
            if (m->z3) { gpt_forward_any(m, val->inputs, val->B, val->T); } // (keeps the gathers in step; not counted)
            continue;
        }
        gpt_forward_any(m, val->inputs, val->B, val->T);
        if (m->layout.has_lnf) { gpt_eval_loss(m, val->targets); } // the last pipeline stage holds the LM head
    }
    double sum = gpt_take_loss_sum(m) / ((double)val->B * val->T); // one read-back: the sum of the batch means
    comm_allreduce_sum_f64(&pc->dp_group, &sum, 1);
    if (m->pp_group) { comm_allreduce_sum_f64(m->pp_group, &sum, 1); } // (zero on the other stages)
    return (float)(sum / steps);
}

// HellaSwag and other multiple-choice eval files (hellaswag.h): each example's endings run as rows of one or more
// forwards; the token losses of the last stage are read back once per forward and the endings' losses summed on the
// host. Example i is evaluated by data-parallel rank i % dp; every rank then holds every example's sums (an all-reduce
// in which one rank contributes each value and the others zeros, so exactly), and every rank derives the same answers
// from them: the result is the same whatever the number of ranks.
typedef struct {
    int examples;
    double acc, acc_norm;    // shares of the examples answered right by the lowest summed / mean loss
    double* sums;            // (examples, max_endings) each ending's summed loss (caller frees)
} HsResult;

// The forward shape of example e: rows of *Te tokens (its longest row, rounded up to a multiple of tp under sequence
// parallelism, which splits every forward's tokens over the group), *rows endings per forward (as many as the
// activations hold, at most all of them), *forwards forwards.
static void hellaswag_shape(const GPT* m, const HellaSwag* hs, int e, int* Te, int* rows, int* forwards) {
    int mult = m->sp ? m->tp : 1;
    int te = kernels_forward_len(&m->ctx, hellaswag_longest_row(hs, e), m->acts0.T); // (padded rows mask their targets)
    te = (te + mult - 1) / mult * mult;
    int cap = m->acts0.B * m->acts0.T / te, n = hs->ex[e].num_endings;
    *Te = te;
    *rows = cap < n ? cap : n;
    *forwards = (n + *rows - 1) / *rows;
}

// Evaluates every example (collective over the world: every rank calls it). The rows were checked against the
// activations' T when the file was loaded. Changes nothing a training step reads: the activations are overwritten
// by its next forward, the device's loss sum is cleared at its start (and here), no RNG is drawn, no data read.
// Under ZeRO-3 each forward gathers layers from every data-parallel rank, so in each round all of them run as many
// forwards as the one with the most (uncounted forwards of one token for the others), as `evaluate` does.
static HsResult evaluate_hellaswag(GPT* m, const HellaSwag* hs, ParallelContext* pc) {
    int N = hs->num_examples, W = hs->max_endings, dp = pc->dp;
    size_t cap = (size_t)m->acts0.B * m->acts0.T;
    int32_t* inputs = (int32_t*)callocCheck(cap, sizeof(int32_t));
    int32_t* targets = (int32_t*)callocCheck(cap, sizeof(int32_t));
    float* losses = (float*)mallocCheck(cap * sizeof(float));
    HsResult r;
    r.examples = N;
    r.sums = (double*)callocCheck((size_t)N * W, sizeof(double));
    int rounds = (N + dp - 1) / dp;
    for (int round = 0; round < rounds; round++) {
        int e = round * dp + pc->dp_rank, Te = 0, rows = 0, mine = 0, most = 0;
        if (e < N) { hellaswag_shape(m, hs, e, &Te, &rows, &mine); }
        most = mine;
        for (int k = 0; m->z3 && k < dp && round * dp + k < N; k++) {
            int t, rw, f;
            hellaswag_shape(m, hs, round * dp + k, &t, &rw, &f);
            if (f > most) { most = f; }
        }
        for (int f = 0; f < most; f++) {
            if (f >= mine) { // (ZeRO-3: keeps the gathers in step; not counted)
                memset(inputs, 0, sizeof(int32_t) * (size_t)m->tp);
                gpt_forward_any(m, inputs, 1, m->sp ? m->tp : 1);
                continue;
            }
            int r0 = f * rows, r1 = r0 + rows < hs->ex[e].num_endings ? r0 + rows : hs->ex[e].num_endings;
            hellaswag_fill_rows(hs, e, r0, r1, Te, inputs, targets);
            gpt_forward_any(m, inputs, r1 - r0, Te);
            if (!m->layout.has_lnf) { continue; } // the last pipeline stage holds the LM head
            gpt_eval_loss(m, targets);
            dev_copy_d2h(&m->ctx, losses, m->acts.losses, sizeof(float) * (size_t)(r1 - r0) * Te);
            dev_sync(&m->ctx);
            hellaswag_add_losses(hs, e, r0, r1, Te, losses, r.sums + (size_t)e * W);
        }
    }
    gpt_clear_loss_sum(m);
    comm_allreduce_sum_f64(&pc->dp_group, r.sums, (size_t)N * W);
    if (m->pp_group) { comm_allreduce_sum_f64(m->pp_group, r.sums, (size_t)N * W); } // (zeros on the other stages)
    int right_sum = 0, right_mean = 0;
    for (int i = 0; i < N; i++) {
        int by_sum, by_mean;
        hellaswag_predict(hs, i, r.sums + (size_t)i * W, &by_sum, &by_mean);
        right_sum += by_sum == hs->ex[i].label;
        right_mean += by_mean == hs->ex[i].label;
    }
    r.acc = (double)right_sum / N;
    r.acc_norm = (double)right_mean / N;
    free(inputs);
    free(targets);
    free(losses);
    return r;
}

// --hellaswag-details: one line per example: its position in the file, its index, label, the answers by summed
// and by mean loss, then each ending's summed loss and mean loss ('%.9g').
static void hellaswag_write_details(const char* path, const HellaSwag* hs, const HsResult* r) {
    AtomicFile af;
    atomic_open(&af, path);
    fprintf(af.fp, "# position index label answer_by_sum answer_by_mean | summed loss of each ending | mean loss of each ending\n");
    for (int i = 0; i < hs->num_examples; i++) {
        const HsExample* x = &hs->ex[i];
        const double* s = r->sums + (size_t)i * hs->max_endings;
        int by_sum, by_mean;
        hellaswag_predict(hs, i, s, &by_sum, &by_mean);
        fprintf(af.fp, "%d %d %d %d %d |", i, x->index, x->label, by_sum, by_mean);
        for (int j = 0; j < x->num_endings; j++) { fprintf(af.fp, " %.9g", s[j]); }
        fprintf(af.fp, " |");
        for (int j = 0; j < x->num_endings; j++) { fprintf(af.fp, " %.9g", s[j] / hs->ending_len[x->lens + j]); }
        fprintf(af.fp, "\n");
    }
    atomic_commit(&af);
}

#endif // EVALUATE_H
