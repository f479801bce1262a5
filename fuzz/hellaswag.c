/*
fuzz/hellaswag.c: fuzzes hellaswag.h's reader of llm.c's multiple-choice eval files (train_gpt --eval-hellaswag,
--hellaswag), and the scoring functions on what it accepts.

  make fuzz-build && fuzz/bin/hellaswag fuzz/corpus/hellaswag        (or: make fuzz FUZZ_TARGETS=hellaswag)
  fuzz/bin/hellaswag CRASH_FILE                                       (reproduces one input, with messages)

Input: 3 bytes of reader settings, then the eval file:
  [0..1] vocab = 1 + uint16 (little-endian)   [2] the longest row allowed = 1 + x
Invariants checked (abort = a finding): a refused file leaves the HellaSwag empty and the message names the file; an
accepted one holds its header's count of examples, each with 1..64 endings, a label below them, a non-empty context
and endings, tokens below vocab and rows no longer than the limit; the longest row and the most endings are what the
examples hold; the rows built for a forward are context + ending then zeros, their targets the row shifted by one;
with every token loss 1, an ending's summed loss is its length and both answers are the first ending.
*/
#include "fuzz_common.h"

#include "hellaswag.h" // defines: HellaSwag, hellaswag_load, hellaswag_fill_rows, hellaswag_add_losses, hellaswag_predict

#define CONFIG_BYTES 3

// Checks one accepted example: its fields, and the rows, losses and answers the scoring makes of it.
static void check_example(const HellaSwag* hs, int e, int vocab, int max_row) {
    const HsExample* x = &hs->ex[e];
    if (x->num_endings < 1 || x->num_endings > HELLASWAG_MAX_ENDINGS || x->label < 0 || x->label >= x->num_endings || x->ctx_len < 1) {
        fuzz_fail("example %d accepted with %d endings, label %d, context %d", e, x->num_endings, x->label, x->ctx_len);
    }
    if (x->num_endings > hs->max_endings) { fuzz_fail("example %d has more endings than max_endings", e); }
    int Te = hellaswag_longest_row(hs, e), n = x->num_endings;
    if (Te > max_row || Te > hs->longest_row) { fuzz_fail("example %d: row of %d tokens (limit %d, longest %d)", e, Te, max_row, hs->longest_row); }
    int32_t* in = (int32_t*)malloc(sizeof(int32_t) * (size_t)n * Te);
    int32_t* tg = (int32_t*)malloc(sizeof(int32_t) * (size_t)n * Te);
    float* losses = (float*)malloc(sizeof(float) * (size_t)n * Te);
    double* sums = (double*)calloc((size_t)n, sizeof(double));
    hellaswag_fill_rows(hs, e, 0, n, Te, in, tg);
    const int32_t* ctx = hs->tokens + x->first;
    for (int j = 0; j < n; j++) {
        int len;
        const int32_t* end = hellaswag_ending(hs, e, j, &len);
        if (len < 1) { fuzz_fail("example %d ending %d is empty", e, j); }
        const int32_t* r = in + (size_t)j * Te;
        for (int t = 0; t < Te; t++) {
            int32_t want = t < x->ctx_len ? ctx[t] : t < x->ctx_len + len ? end[t - x->ctx_len] : 0;
            if (r[t] != want || want < 0 || want >= vocab) { fuzz_fail("example %d row %d position %d: %d, expected %d", e, j, t, r[t], want); }
            int32_t next = t + 1 < Te ? r[t + 1] : 0;
            if (tg[(size_t)j * Te + t] != (t + 1 < x->ctx_len + len ? next : 0)) { fuzz_fail("example %d row %d: target %d is not the next token", e, j, t); }
        }
    }
    for (size_t i = 0; i < (size_t)n * Te; i++) { losses[i] = 1.0f; }
    hellaswag_add_losses(hs, e, 0, n, Te, losses, sums);
    for (int j = 0; j < n; j++) {
        int len;
        (void)hellaswag_ending(hs, e, j, &len);
        if (sums[j] != (double)len) { fuzz_fail("example %d ending %d: %g losses counted for %d tokens", e, j, sums[j], len); }
    }
    // unit losses: the sums are the lengths (by_sum: the shortest), the means all 1 (by_mean: ending 0)
    int by_sum, by_mean, shortest = 0;
    hellaswag_predict(hs, e, sums, &by_sum, &by_mean);
    for (int j = 1; j < n; j++) { if (sums[j] < sums[shortest]) { shortest = j; } }
    if (by_sum != shortest || by_mean != 0) { fuzz_fail("example %d: answers %d, %d (expected %d, 0)", e, by_sum, by_mean, shortest); }
    free(in);
    free(tg);
    free(losses);
    free(sums);
}

static void run(void* arg) {
    const FuzzInput* in = (const FuzzInput*)arg;
    const uint8_t* d = in->data;
    size_t n = in->size;
    int vocab = 1 + (int)fuzz_le(d, n, 0, 2);
    int max_row = 1 + (int)fuzz_le(d, n, 2, 1);
    size_t skip = n < CONFIG_BYTES ? n : CONFIG_BYTES;
    char path[1024], err[1024];
    fuzz_write_file("eval.bin", d + skip, n - skip, path, sizeof(path));
    HellaSwag hs;
    if (hellaswag_load(&hs, path, vocab, max_row, "the fuzz limit", err, sizeof(err)) != 0) {
        if (hs.ex || hs.tokens || hs.ending_len || hs.num_examples) { fuzz_fail("a refused file left memory or examples behind"); }
        if (!strstr(err, path)) { fuzz_fail("the message does not name the file: %s", err); }
        if (fuzz_verbose()) { fprintf(stderr, "hellaswag_load: %s\n", err); }
        return;
    }
    int32_t h[4] = {0, 0, 0, 0};
    if (n - skip >= sizeof(h)) { memcpy(h, d + skip, sizeof(h)); }
    if (hs.num_examples != h[2] || h[0] != HELLASWAG_MAGIC || h[1] != HELLASWAG_VERSION) { fuzz_fail("accepted a header of %d %d %d", h[0], h[1], h[2]); }
    int most = 0, longest = 0;
    for (int e = 0; e < hs.num_examples; e++) {
        check_example(&hs, e, vocab, max_row);
        if (hs.ex[e].num_endings > most) { most = hs.ex[e].num_endings; }
        if (hellaswag_longest_row(&hs, e) > longest) { longest = hellaswag_longest_row(&hs, e); }
    }
    if (most != hs.max_endings || longest != hs.longest_row) { fuzz_fail("max_endings %d / longest_row %d, the examples say %d / %d", hs.max_endings, hs.longest_row, most, longest); }
    if (fuzz_verbose()) { fprintf(stderr, "hellaswag: accepted %d examples, longest row %d\n", hs.num_examples, hs.longest_row); }
    hellaswag_free(&hs);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzInput in = {data, size};
    fuzz_call(run, &in);
    return 0;
}
