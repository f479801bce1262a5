/*
run_data.h: the data of a training run in train_gpt (split out of train_gpt.c, which includes it in its main-only part):
the training stream, the validation sets and the HellaSwag file, opened before the big allocations so that bad input
is reported first, and the evaluations during training with their printed and logged lines. Not a standalone
header: it uses the trainer's Config, GPT and ParallelContext, and evaluate.h.
*/
#ifndef RUN_DATA_H
#define RUN_DATA_H

// The data a training run reads: the training stream; --val's data sets (one, or a blend, each evaluated on its own;
// the reported loss is their weighted mean); the HellaSwag file evaluated every --hellaswag-every steps (or
// --eval-hellaswag's, evaluated once: main loads that one itself).
typedef struct {
    DataLoader train;
    int have_train;
    DataLoader val[DATALOADER_MAX_SOURCES];
    double val_weights[DATALOADER_MAX_SOURCES]; // (normalised to sum 1)
    int have_val;                               // the number of validation data sets
    HellaSwag hs;
    int have_hs;
} RunData;

// Opens a training run's data for this rank's micro-batches of B x T (grad_accum of them a step): --train (required),
// --val, --hellaswag. --steps -1 becomes one epoch of the training data.
static void run_data_open(RunData* d, Config* c, const GPTConfig* gc, ParallelContext* pc, int B, int T, int grad_accum) {
    int master = pc->world_rank == 0;
    char err[1024], err_hs[1024];
    if (!c->train[0]) { fatal("--train: no training data given (a glob pattern of llm.c shards; see scripts/prepare_tinyshakespeare.sh)"); }
    if (dataloader_init(&d->train, c->train, B, T, pc->dp_rank, pc->dp, c->shuffle, (uint64_t)c->seed, gc->vocab_size, err, sizeof(err)) != 0) {
        fatal("--train: %s", err);
    }
    d->have_train = 1;
    sharedfs_check_data(pc, d->train.fingerprint, c->train);
    if (master && d->train.nsources > 1) {
        // each data set's share of the stream, and how often the run goes through it
        printf("train: a blend of %d data sets, each in its own shuffled epochs:\n", d->train.nsources);
        double per_step = (double)B * pc->dp * grad_accum; // samples of T+1 tokens per optimizer step
        for (int k = 0; k < d->train.nsources; k++) {
            const DataSource* ds = &d->train.sources[k];
            double share = (double)ds->weight / d->train.weight_total;
            printf("  %5.1f%%  %s: %d shard(s), %llu samples of %d tokens; an epoch of it every %.0f steps\n", 100.0 * share,
                   ds->pattern, ds->count, (unsigned long long)ds->samples_per_epoch, T + 1,
                   (double)ds->samples_per_epoch / (share * per_step));
        }
    }
    if (c->steps < 0) {
        // llm.c's default: one epoch, the optimizer steps in which every rank reads each of its batches once
        uint64_t per_rank = dataloader_num_batches(&d->train), n = per_rank / (uint64_t)grad_accum;
        if (n < 1 || n > 1000000000ull) {
            fatal("--steps -1 (one epoch): the training data makes %llu batches per rank, and an optimizer step takes %d",
                  (unsigned long long)per_rank, grad_accum);
        }
        c->steps = (int)n;
        if (master) { printf("steps: one epoch of the training data is %d optimizer steps (--steps -1)\n", c->steps); }
    }
    if (c->val[0] && c->val_every > 0) {
        char* patterns[DATALOADER_MAX_SOURCES];
        int nv = dataloader_parse_blend(c->val, d->val_weights, patterns, err, sizeof(err));
        if (nv < 0) { fatal("--val: %s", err); }
        double wsum = 0.0;
        for (int k = 0; k < nv; k++) { wsum += d->val_weights[k]; }
        for (int k = 0; k < nv; k++) {
            d->val_weights[k] /= wsum;
            if (dataloader_init(&d->val[k], patterns[k], B, T, 0, 1, 0, 0, gc->vocab_size, err, sizeof(err)) != 0) { fatal("--val: %s", err); }
        }
        d->have_val = nv;
        if (master && nv > 1) {
            printf("val: %d data sets, each evaluated on its first %d batches; the val loss is their weighted mean:\n", nv, c->val_steps);
            for (int k = 0; k < nv; k++) { printf("  %d  %5.1f%%  %s\n", k + 1, 100.0 * d->val_weights[k], patterns[k]); }
        }
        for (int k = 0; k < nv; k++) { free(patterns[k]); }
    }
    if (c->hellaswag[0] && c->hellaswag_every > 0) {
        // every row must fit one sequence of the run
        if (hellaswag_load(&d->hs, c->hellaswag, gc->vocab_size, T, "--seq-len", err_hs, sizeof(err_hs)) != 0) {
            fatal("--hellaswag: %s%s", err_hs, c->llmc_hellaswag ? " (llm.c's -h 1 reads this path: make it with scripts/prepare_hellaswag.sh "
                  "dev/data/hellaswag, or give --hellaswag FILE --hellaswag-every N)" : "");
        }
        d->have_hs = 1;
    }
}

static void run_data_free(RunData* d) {
    if (d->have_train) { dataloader_free(&d->train); }
    for (int k = 0; k < d->have_val; k++) { dataloader_free(&d->val[k]); }
    if (d->have_hs) { hellaswag_free(&d->hs); }
    memset(d, 0, sizeof(*d));
}

// The evaluations due at `step` (every --val-every and --hellaswag-every steps, and at the last): the validation loss
// (each data set's, and their weighted mean) and HellaSwag's accuracy, printed by rank 0, in the JSON log and in
// llm.c's main.log.
static void run_data_evaluate(RunData* d, GPT* m, ParallelContext* pc, const Config* c, int step, int last, FILE* logf, FILE* mainlog) {
    int master = pc->world_rank == 0;
    if (d->have_val && (step % c->val_every == 0 || last)) {
        float set_loss[DATALOADER_MAX_SOURCES];
        double mean = 0.0;
        for (int k = 0; k < d->have_val; k++) {
            set_loss[k] = evaluate(m, &d->val[k], c->val_steps, pc);
            mean += d->val_weights[k] * set_loss[k];
        }
        float val = (float)mean; // (one data set: weight 1, its loss exactly)
        if (master) {
            // a blend's data sets: "val_loss_K" beside the mean in the JSON log, K from 1 in --val's order
            char sets[DATALOADER_MAX_SOURCES * 24] = "", json[DATALOADER_MAX_SOURCES * 32] = "";
            for (int k = 0; k < d->have_val && d->have_val > 1; k++) {
                snprintf(sets + strlen(sets), sizeof(sets) - strlen(sets), "%s%d: %.6f", k ? ", " : " (data sets ", k + 1, set_loss[k]);
                snprintf(json + strlen(json), sizeof(json) - strlen(json), ", \"val_loss_%d\": %.9g", k + 1, set_loss[k]);
            }
            printf("step %5d | val loss %.6f%s%s\n", step, val, sets, d->have_val > 1 ? ")" : "");
            if (logf) { fprintf(logf, "{\"step\": %d, \"val_loss\": %.9g%s}\n", step, val, json); fflush(logf); }
            if (mainlog) { fprintf(mainlog, "s:%d tel:%.4f\n", step, val); fflush(mainlog); }
        }
    }
    if (d->have_hs && (step % c->hellaswag_every == 0 || last)) {
        HsResult hr = evaluate_hellaswag(m, &d->hs, pc);
        if (master) {
            printf("step %5d | hellaswag acc %.4f acc_norm %.4f (%d examples)\n", step, hr.acc, hr.acc_norm, hr.examples);
            if (logf) { fprintf(logf, "{\"step\": %d, \"hellaswag_acc\": %.9g, \"hellaswag_acc_norm\": %.9g}\n", step, hr.acc, hr.acc_norm); fflush(logf); }
            if (mainlog) { fprintf(mainlog, "s:%d eval:%.4f\n", step, hr.acc_norm); fflush(mainlog); }
        }
        free(hr.sums);
    }
}

#endif // RUN_DATA_H
