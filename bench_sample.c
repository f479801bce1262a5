/*
bench_sample.c: the cost of choosing one token from a row of logits on the host (sample_pick, sample.h) at GPT-2's
vocabulary, for each filter, beside the sort that a simpler --top-k or --top-p would use. Every sample's token passes
through sample_pick once per row, so on a GPU, where a cached token's forward takes a few milliseconds, this time
shows in tokens/s.

    make bench_sample && ./bench_sample [ROWS]      (default 200 rows per case; ms per row, the figure last)

Two kinds of rows, drawn from a normal distribution: logits of standard deviation 0.05 (a random model's: --top-p 0.9
then keeps ~90% of the vocabulary, the quickselect's worst case) and 3 (a peaked distribution, a few thousand tokens
in the nucleus). It includes train_gpt.c (TRAIN_GPT_NO_MAIN) for sample_pick, as tests/test_runs does.
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

typedef struct { float w; int id; } BenchPair;

// Descending by weight, ties by ascending id: the order of --top-k's and --top-p's ties.
static int bench__desc(const void* a, const void* b) {
    const BenchPair* x = (const BenchPair*)a;
    const BenchPair* y = (const BenchPair*)b;
    return x->w < y->w ? 1 : x->w > y->w ? -1 : x->id - y->id;
}

// The tokens a sort-based filter keeps (top_k, then top_p, as sample_pick's rule), for the side-by-side time.
static int bench__sorted(const float* row, BenchPair* pr, int V, int top_k, float top_p) {
    float mx = row[0];
    for (int j = 1; j < V; j++) { mx = row[j] > mx ? row[j] : mx; }
    for (int j = 0; j < V; j++) { pr[j].w = expf(row[j] - mx); pr[j].id = j; }
    qsort(pr, (size_t)V, sizeof(BenchPair), bench__desc);
    int K = top_k > 0 && top_k < V ? top_k : V;
    double total = 0.0, before = 0.0;
    for (int k = 0; k < K; k++) { total += pr[k].w; }
    int n = 0;
    while (n < K && (n == 0 || before < (double)top_p * total)) { before += pr[n].w; n++; }
    return n;
}

int main(int argc, char** argv) {
    const int V = 50257;
    int R = argc > 1 ? atoi(argv[1]) : 200;
    if (R < 1) { fprintf(stderr, "usage: ./bench_sample [ROWS >= 1]\n"); return 2; }
    float* rows = (float*)mallocCheck(sizeof(float) * (size_t)V * R);
    float* work = (float*)mallocCheck(sizeof(float) * V);
    float* scratch = (float*)mallocCheck(sizeof(float) * V);
    BenchPair* pr = (BenchPair*)mallocCheck(sizeof(BenchPair) * V);
    const struct { const char* name; int top_k; float top_p, min_p; } cases[] = {
        {"temperature 1, all tokens", 0, 1.0f, 0.0f},
        {"--top-k 40", 40, 1.0f, 0.0f},
        {"--top-p 0.9", 0, 0.9f, 0.0f},
        {"--top-k 40 --top-p 0.9", 40, 0.9f, 0.0f},
        {"--min-p 0.05", 0, 1.0f, 0.05f}, // (a threshold: one more pass, nothing to sort)
    };
    const int ncases = (int)(sizeof(cases) / sizeof(cases[0]));
    printf("sample_pick over %d rows of %d logits per case, one thread (ms per row; kept: the tokens left to draw from)\n", R, V);
    uint64_t s = 1;
    double topp_ms = 0.0, topp_ratio = 0.0; // --top-p 0.9 on the peaked rows: the figure
    for (int dist = 0; dist < 2; dist++) {
        double sd = dist ? 3.0 : 0.05;
        for (size_t i = 0; i < (size_t)V * R; i++) { // Box-Muller
            double u1 = rng_uniform(&s) + 1e-12, u2 = rng_uniform(&s);
            rows[i] = (float)(sd * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        }
        for (int c = 0; c < ncases; c++) {
            SampleOpts so = {1.0f, cases[c].top_k, cases[c].top_p, 0, 0, 0, 1.0f, cases[c].min_p, 0};
            double t_pick = 0.0, t_sort = 0.0, kept = 0.0;
            volatile int sink = 0; // (so the picks are not optimised away)
            for (int r = 0; r < R; r++) {
                const float* row = rows + (size_t)r * V;
                memcpy(work, row, sizeof(float) * V);
                double t0 = now_seconds();
                sink += sample_pick(work, scratch, V, &so, 0.5);
                t_pick += now_seconds() - t0;
                for (int j = 0; j < V; j++) { kept += work[j] > 0.0f; }
                if (cases[c].top_k == 0 && cases[c].top_p >= 1.0f) { continue; } // (nothing to sort for)
                t0 = now_seconds();
                sink += bench__sorted(row, pr, V, cases[c].top_k, cases[c].top_p);
                t_sort += now_seconds() - t0;
            }
            char sorted[64] = "-";
            if (t_sort > 0.0) { snprintf(sorted, sizeof(sorted), "%.3f ms (%.1fx)", 1e3 * t_sort / R, t_sort / t_pick); }
            if (dist == 1 && cases[c].top_k == 0 && cases[c].top_p < 1.0f) { topp_ms = 1e3 * t_pick / R; topp_ratio = t_sort / t_pick; }
            printf("  logits sd %-4g %-26s sample_pick %.3f ms  kept %7.0f  by a sort %s\n", sd, cases[c].name, 1e3 * t_pick / R, kept / R, sorted);
        }
    }
    printf("sample_pick --top-p 0.9 on peaked logits: %.3f ms per row, %.1fx faster than sorting the row\n", topp_ms, topp_ratio);
    free(rows); free(work); free(scratch); free(pr);
    return 0;
}
