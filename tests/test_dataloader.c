/*
tests/test_dataloader.c: tests of dataloader.h (shards, the sequential order, the distributed sampler, resumable
state, input validation). Writes its own small shards into a fresh directory under /tmp and removes it after.

Build and run:  make tests/test_dataloader && ./tests/test_dataloader
Output: one line per check, "PASS name" or "FAIL name: detail"; the last line is "N passed, M failed"; the exit
status is non-zero if any check failed.

Shard tokens are chosen so a token identifies where it came from: in the main data set token value = global
token index (shard offset + position), so the first input of a row names the window it was read from.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>

#include "dataloader.h"
#include "tests/testing.h" // defines: check, test_summary

// ----------------------------------------------------------------------------
// the check harness

// check(), test_summary(): tests/testing.h

// ----------------------------------------------------------------------------
// writing shards

static char g_dir[256];

// Writes a shard with explicit header fields: magic, version, header count; then n tokens of bpt bytes each.
static void write_shard_raw(const char* path, int32_t magic, int32_t version, int32_t count,
                            const uint32_t* tokens, size_t n, int bpt) {
    FILE* fp = fopenCheck(path, "wb");
    int32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = magic;
    header[1] = version;
    header[2] = count;
    fwriteCheck(header, sizeof(int32_t), 256, fp, path);
    for (size_t i = 0; i < n; i++) {
        if (bpt == 2) {
            uint16_t t = (uint16_t)tokens[i];
            fwriteCheck(&t, 2, 1, fp, path);
        } else {
            fwriteCheck(&tokens[i], 4, 1, fp, path);
        }
    }
    fcloseCheck(fp, path);
}

// Writes a valid shard of the given version (1: uint16, 2: uint32).
static void write_shard(const char* path, int version, const uint32_t* tokens, size_t n) {
    write_shard_raw(path, 20240520, version, (int32_t)n, tokens, n, version == 1 ? 2 : 4);
}

// Writes shard files dir/<prefix>_NN.bin with the given sizes, token value = base + global index.
// Returns in offsets[k] the global index of each shard's first token.
static void write_dataset(const char* prefix, int version, const size_t* sizes, int nshards, uint32_t base, uint64_t* offsets) {
    uint64_t off = 0;
    for (int k = 0; k < nshards; k++) {
        uint32_t* toks = (uint32_t*)mallocCheck(sizes[k] * sizeof(uint32_t));
        for (size_t i = 0; i < sizes[k]; i++) { toks[i] = base + (uint32_t)(off + i); }
        char path[512];
        snprintf(path, sizeof(path), "%s/%s_%02d.bin", g_dir, prefix, k);
        write_shard(path, version, toks, sizes[k]);
        free(toks);
        offsets[k] = off;
        off += sizes[k];
    }
}

static void remove_dir(const char* dir) {
    DIR* d = opendir(dir);
    if (d == NULL) { return; }
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) { continue; }
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(dir);
}

// ----------------------------------------------------------------------------
// the main data set: 3 shards of uneven sizes, B=2, T=4

#define NSH 3
static const size_t MAIN_SIZES[NSH] = {101, 77, 130};
static uint64_t g_off[NSH];
static char g_pattern[512];
#define VOCAB 50257
#define BB 2
#define TT 4

// Opens the main data set or records a failure; returns 0 on success.
static int open_main(DataLoader* dl, int rank, int world, int shuffle, uint64_t seed, const char* name) {
    char err[512];
    if (dataloader_init(dl, g_pattern, BB, TT, rank, world, shuffle, seed, VOCAB, err, sizeof(err)) != 0) {
        check(0, name, "dataloader_init failed: %s", err);
        return -1;
    }
    return 0;
}

// Checks the row structure of the current batch: each row of T inputs is consecutive tokens and targets are
// inputs + 1 (the data set's tokens are consecutive integers). rows = number of independent windows.
static int batch_is_windows(const DataLoader* dl, int rows) {
    int len = dl->B * dl->T / rows;
    for (int r = 0; r < rows; r++) {
        const int32_t* in = dl->inputs + (size_t)r * len;
        const int32_t* tg = dl->targets + (size_t)r * len;
        for (int t = 0; t < len; t++) {
            if (in[t] != in[0] + t || tg[t] != in[t] + 1) { return 0; }
        }
    }
    return 1;
}

// ----------------------------------------------------------------------------
// shuffle = 0: the llm.c sequential order

// Reference: for R ranks, enumerate group starts per epoch as in the spec (group g of a shard is valid iff
// (g+1)*B*T*R + 1 <= ntok) and compare every rank's batch against start = off + (g*R + r)*B*T.
static void test_sequential(int world) {
    char name[128];
    snprintf(name, sizeof(name), "sequential_order_world%d", world);
    DataLoader dls[3];
    for (int r = 0; r < world; r++) {
        if (open_main(&dls[r], r, world, 0, 0, name) != 0) { return; }
    }
    uint64_t BT = BB * TT;
    int ok = 1, steps = 0;
    char detail[256] = "";
    for (int epoch = 0; epoch < 3 && ok; epoch++) {
        for (int k = 0; k < NSH && ok; k++) {
            for (uint64_t g = 0; (g + 1) * BT * world + 1 <= MAIN_SIZES[k] && ok; g++) {
                for (int r = 0; r < world && ok; r++) {
                    dataloader_next_batch(&dls[r]);
                    uint64_t start = g_off[k] + (g * world + r) * BT;
                    if ((uint64_t)dls[r].inputs[0] != start || !batch_is_windows(&dls[r], 1)) {
                        snprintf(detail, sizeof(detail), "epoch %d shard %d group %llu rank %d: got first token %d, want %llu",
                                 epoch, k, (unsigned long long)g, r, dls[r].inputs[0], (unsigned long long)start);
                        ok = 0;
                    }
                }
                steps++;
            }
        }
    }
    check(ok, name, "%s", detail);

    // number of batches per epoch
    uint64_t expect = 0;
    for (int k = 0; k < NSH; k++) { expect += (MAIN_SIZES[k] - 1) / (BT * world); }
    snprintf(name, sizeof(name), "sequential_num_batches_world%d", world);
    check(dataloader_num_batches(&dls[0]) == expect && steps == 3 * (int)expect, name, "num_batches %llu, expected %llu (steps %d)",
          (unsigned long long)dataloader_num_batches(&dls[0]), (unsigned long long)expect, steps);

    // state identical over ranks
    uint64_t s0[DATALOADER_STATE_WORDS], s1[DATALOADER_STATE_WORDS];
    int same = 1;
    dataloader_get_state(&dls[0], s0);
    for (int r = 1; r < world; r++) {
        dataloader_get_state(&dls[r], s1);
        if (memcmp(s0, s1, sizeof(s0)) != 0) { same = 0; }
    }
    snprintf(name, sizeof(name), "sequential_state_rank_independent_world%d", world);
    check(same, name, "ranks report different states");

    // reset goes back to the very start
    dataloader_reset(&dls[0]);
    dataloader_next_batch(&dls[0]);
    snprintf(name, sizeof(name), "sequential_reset_world%d", world);
    check(dls[0].inputs[0] == 0 && dls[0].epoch == 0, name, "after reset first token %d, epoch %llu",
          dls[0].inputs[0], (unsigned long long)dls[0].epoch);
    for (int r = 0; r < world; r++) { dataloader_free(&dls[r]); }
}

// get_state after k steps, a fresh loader with set_state continues identically (through the epoch wrap);
// a state from 2 ranks resumed on 3 ranks continues from the same group position.
static void test_sequential_resume(void) {
    DataLoader a, b;
    if (open_main(&a, 0, 1, 0, 0, "sequential_resume") != 0) { return; }
    int ok = 1;
    for (int k = 0; k < 35 && ok; k++) {
        dataloader_next_batch(&a);
    }
    uint64_t st[DATALOADER_STATE_WORDS];
    dataloader_get_state(&a, st);
    if (open_main(&b, 0, 1, 0, 0, "sequential_resume") != 0) { dataloader_free(&a); return; }
    char err[512] = "";
    ok = dataloader_set_state(&b, st, err, sizeof(err)) == 0;
    int steps = 0;
    for (; steps < 50 && ok; steps++) { // crosses the end of the 37-batch epoch
        dataloader_next_batch(&a);
        dataloader_next_batch(&b);
        if (memcmp(a.inputs, b.inputs, BB * TT * sizeof(int32_t)) != 0 ||
            memcmp(a.targets, b.targets, BB * TT * sizeof(int32_t)) != 0) { ok = 0; }
    }
    check(ok, "sequential_resume", "mismatch at step %d after resume (err '%s')", steps, err);
    check(a.epoch == 2 && b.epoch == 2, "sequential_resume_epoch", "epochs %llu %llu, want 2",
          (unsigned long long)a.epoch, (unsigned long long)b.epoch);
    dataloader_free(&a);
    dataloader_free(&b);

    // 2 ranks -> 3 ranks: after 2 groups of 2 ranks (position 32 in shard 0), 3 ranks need 32+24+1 <= 101: fits
    DataLoader two[2], three[3];
    for (int r = 0; r < 2; r++) { if (open_main(&two[r], r, 2, 0, 0, "sequential_resume_world2to3") != 0) { return; } }
    for (int s = 0; s < 2; s++) { for (int r = 0; r < 2; r++) { dataloader_next_batch(&two[r]); } }
    dataloader_get_state(&two[1], st);
    ok = 1;
    for (int r = 0; r < 3; r++) {
        if (open_main(&three[r], r, 3, 0, 0, "sequential_resume_world2to3") != 0) { return; }
        if (dataloader_set_state(&three[r], st, err, sizeof(err)) != 0) { ok = 0; }
        dataloader_next_batch(&three[r]);
        if (three[r].inputs[0] != 32 + r * BB * TT || !batch_is_windows(&three[r], 1)) { ok = 0; }
        dataloader_next_batch(&three[r]); // 56 + 24 + 1 <= 101: fits
        if (three[r].inputs[0] != 56 + r * BB * TT) { ok = 0; }
        dataloader_next_batch(&three[r]); // 80 + 24 + 1 > 101: next shard
        if ((uint64_t)three[r].inputs[0] != g_off[1] + (uint64_t)r * BB * TT) { ok = 0; }
    }
    check(ok, "sequential_resume_world2to3", "3 ranks did not continue from group position 32 (err '%s')", err);
    for (int r = 0; r < 2; r++) { dataloader_free(&two[r]); }
    for (int r = 0; r < 3; r++) { dataloader_free(&three[r]); }
}

// ----------------------------------------------------------------------------
// shuffle = 1: the distributed sampler

// The sample index (0 .. samples_per_epoch-1, in shard-major natural order) of a window starting at global
// token g, or -1 if g is not a valid sample start.
static int64_t sample_id(int64_t g) {
    int64_t base = 0;
    for (int k = 0; k < NSH; k++) {
        int64_t n = (int64_t)((MAIN_SIZES[k] - 1) / TT);
        int64_t local = g - (int64_t)g_off[k];
        if (local >= 0 && local < (int64_t)MAIN_SIZES[k]) {
            if (local % TT != 0 || local / TT >= n) { return -1; }
            return base + local / TT;
        }
        base += n;
    }
    return -1;
}

static int64_t main_samples_per_epoch(void) {
    int64_t n = 0;
    for (int k = 0; k < NSH; k++) { n += (int64_t)((MAIN_SIZES[k] - 1) / TT); }
    return n;
}

// Runs R loaders (ranks of one world) for `steps` micro-steps starting at global stream position first, and
// writes into stream[] the sample id found at every stream position it covers (stream[pos] for pos < cap).
// Returns 0 if every row was a well-formed window at a valid sample start.
static int run_stream(DataLoader* dls, int world, int steps, int64_t first, int64_t* stream, int64_t cap) {
    int ok = 1;
    for (int s = 0; s < steps; s++) {
        for (int r = 0; r < world; r++) {
            dataloader_next_batch(&dls[r]);
            if (!batch_is_windows(&dls[r], BB)) { ok = 0; }
            for (int b = 0; b < BB; b++) {
                int64_t pos = first + (int64_t)s * BB * world + (int64_t)r * BB + b;
                int64_t id = sample_id(dls[r].inputs[b * TT]);
                if (id < 0) { ok = 0; }
                if (pos < cap) { stream[pos] = id; }
            }
        }
    }
    return ok;
}

// Checks stream[lo, lo+n) is a permutation of [0, n). Returns 1 if so; puts a description in detail if not.
static int is_permutation(const int64_t* stream, int64_t lo, int64_t n, char* detail, size_t len) {
    int* seen = (int*)callocCheck((size_t)n, sizeof(int));
    int ok = 1;
    for (int64_t i = lo; i < lo + n; i++) {
        if (stream[i] < 0 || stream[i] >= n) { snprintf(detail, len, "position %lld holds invalid sample %lld", (long long)i, (long long)stream[i]); ok = 0; break; }
        if (seen[stream[i]]++) { snprintf(detail, len, "sample %lld repeated at position %lld", (long long)stream[i], (long long)i); ok = 0; break; }
    }
    free(seen);
    return ok;
}

// Ranks are disjoint and together cover each of the first two epochs exactly once; all ranks report the same
// state; and the global stream does not depend on the world size.
static void test_shuffle_coverage(void) {
    int64_t N = main_samples_per_epoch(); // 76
    int64_t cap = 2 * N;
    int64_t* streams[4];
    for (int world = 1; world <= 3; world++) {
        char name[128];
        snprintf(name, sizeof(name), "shuffle_cover_epochs_world%d", world);
        DataLoader dls[3];
        int opened = 1;
        for (int r = 0; r < world; r++) { if (open_main(&dls[r], r, world, 1, 1234, name) != 0) { opened = 0; } }
        if (!opened) { streams[world] = NULL; continue; }
        int64_t* stream = (int64_t*)mallocCheck((size_t)cap * sizeof(int64_t));
        for (int64_t i = 0; i < cap; i++) { stream[i] = -1; }
        int steps = (int)((cap + BB * world - 1) / (BB * world));
        int ok = run_stream(dls, world, steps, 0, stream, cap);
        char detail[256] = "";
        int p0 = is_permutation(stream, 0, N, detail, sizeof(detail));
        int p1 = p0 && is_permutation(stream, N, N, detail, sizeof(detail));
        check(ok && p0 && p1, name, "rows ok %d; %s", ok, detail);

        uint64_t s0[DATALOADER_STATE_WORDS], s1[DATALOADER_STATE_WORDS];
        int same = 1;
        dataloader_get_state(&dls[0], s0);
        for (int r = 1; r < world; r++) { dataloader_get_state(&dls[r], s1); if (memcmp(s0, s1, sizeof(s0)) != 0) { same = 0; } }
        snprintf(name, sizeof(name), "shuffle_state_rank_independent_world%d", world);
        check(same && s0[5] == (uint64_t)steps * BB * world, name, "ranks disagree or cursor %llu != %llu",
              (unsigned long long)s0[5], (unsigned long long)steps * BB * world);
        streams[world] = stream;
        for (int r = 0; r < world; r++) { dataloader_free(&dls[r]); }
    }
    int same = streams[1] && streams[2] && streams[3] &&
               memcmp(streams[1], streams[2], (size_t)cap * sizeof(int64_t)) == 0 &&
               memcmp(streams[1], streams[3], (size_t)cap * sizeof(int64_t)) == 0;
    check(same, "shuffle_stream_independent_of_world", "worlds 1, 2, 3 saw different global streams");

    // the order is shuffled at all, and differs between the two epochs
    int64_t fixed = 0, diff = 0;
    if (streams[1]) {
        for (int64_t i = 0; i < N; i++) { fixed += streams[1][i] == i; diff += streams[1][i] != streams[1][N + i]; }
    }
    check(streams[1] && fixed < N / 4, "shuffle_is_shuffled", "%lld of %lld samples in natural order", (long long)fixed, (long long)N);
    check(streams[1] && diff > N / 2, "shuffle_epochs_differ", "epochs 0 and 1 agree at %lld of %lld positions", (long long)(N - diff), (long long)N);
    for (int w = 1; w <= 3; w++) { free(streams[w]); }
}

// The same seed gives the same order; another seed another order.
static void test_shuffle_seeds(void) {
    int64_t N = main_samples_per_epoch();
    int64_t* st[3];
    uint64_t seeds[3] = {7, 7, 8};
    for (int i = 0; i < 3; i++) {
        DataLoader dl;
        st[i] = (int64_t*)mallocCheck((size_t)N * sizeof(int64_t));
        if (open_main(&dl, 0, 1, 1, seeds[i], "shuffle_seeds") != 0) { memset(st[i], 0, (size_t)N * sizeof(int64_t)); continue; }
        run_stream(&dl, 1, (int)(N / BB), 0, st[i], N);
        dataloader_free(&dl);
    }
    int64_t diff = 0;
    for (int64_t i = 0; i < N; i++) { diff += st[0][i] != st[2][i]; }
    check(memcmp(st[0], st[1], (size_t)N * sizeof(int64_t)) == 0, "shuffle_same_seed_same_order", "seed 7 gave two different orders");
    check(diff > N / 2, "shuffle_seed_changes_order", "seeds 7 and 8 agree at %lld of %lld positions", (long long)(N - diff), (long long)N);
    for (int i = 0; i < 3; i++) { free(st[i]); }
}

// get_state after k steps; a fresh loader with set_state continues identically (same world).
static void test_shuffle_resume_same(void) {
    DataLoader a, b;
    if (open_main(&a, 1, 2, 1, 99, "shuffle_resume") != 0) { return; }
    for (int k = 0; k < 11; k++) { dataloader_next_batch(&a); }
    uint64_t st[DATALOADER_STATE_WORDS];
    dataloader_get_state(&a, st);
    if (open_main(&b, 1, 2, 1, 99, "shuffle_resume") != 0) { dataloader_free(&a); return; }
    char err[512] = "";
    int ok = dataloader_set_state(&b, st, err, sizeof(err)) == 0;
    int steps = 0;
    for (; steps < 60 && ok; steps++) {
        dataloader_next_batch(&a);
        dataloader_next_batch(&b);
        if (memcmp(a.inputs, b.inputs, BB * TT * sizeof(int32_t)) != 0 ||
            memcmp(a.targets, b.targets, BB * TT * sizeof(int32_t)) != 0) { ok = 0; }
    }
    check(ok, "shuffle_resume", "mismatch at step %d after resume (err '%s')", steps, err);
    dataloader_free(&a);
    dataloader_free(&b);
}

// 2 ranks run k steps, the state is restored on w2 ranks, which run past the end of the epoch: the samples
// seen before and after cover epoch 0 exactly once.
static void test_shuffle_resume_world(int w2) {
    char name[128];
    snprintf(name, sizeof(name), "shuffle_resume_world2to%d", w2);
    int64_t N = main_samples_per_epoch();
    int64_t cap = N + 16;
    int64_t* stream = (int64_t*)mallocCheck((size_t)cap * sizeof(int64_t));
    for (int64_t i = 0; i < cap; i++) { stream[i] = -1; }
    DataLoader before[2], after[3];
    for (int r = 0; r < 2; r++) { if (open_main(&before[r], r, 2, 1, 4242, name) != 0) { free(stream); return; } }
    int k = 7; // 28 samples
    int ok = run_stream(before, 2, k, 0, stream, cap);
    uint64_t st[DATALOADER_STATE_WORDS];
    dataloader_get_state(&before[0], st);
    char err[512] = "";
    for (int r = 0; r < w2; r++) {
        if (open_main(&after[r], r, w2, 1, 4242, name) != 0) { free(stream); return; }
        if (dataloader_set_state(&after[r], st, err, sizeof(err)) != 0) { ok = 0; }
    }
    int64_t first = (int64_t)k * 2 * BB;
    int steps = (int)((N - first + BB * w2 - 1) / (BB * w2));
    ok = run_stream(after, w2, steps, first, stream, cap) && ok;
    char detail[256] = "";
    int perm = is_permutation(stream, 0, N, detail, sizeof(detail));
    check(ok && perm, name, "rows ok %d, err '%s'; %s", ok, err, detail);
    for (int r = 0; r < 2; r++) { dataloader_free(&before[r]); }
    for (int r = 0; r < w2; r++) { dataloader_free(&after[r]); }
    free(stream);
}

// The state is independent of B: a state saved with B=2 resumes with B=3 at the same stream position.
static void test_shuffle_resume_batch(void) {
    DataLoader a, b, c;
    char err[512] = "";
    if (open_main(&a, 0, 1, 1, 5, "shuffle_resume_other_B") != 0) { return; }
    for (int k = 0; k < 6; k++) { dataloader_next_batch(&a); } // 12 samples
    uint64_t st[DATALOADER_STATE_WORDS];
    dataloader_get_state(&a, st);
    if (dataloader_init(&b, g_pattern, 3, TT, 0, 1, 1, 5, VOCAB, err, sizeof(err)) != 0 ||
        dataloader_set_state(&b, st, err, sizeof(err)) != 0) {
        check(0, "shuffle_resume_other_B", "%s", err);
        dataloader_free(&a);
        return;
    }
    dataloader_next_batch(&b); // stream samples 12, 13, 14
    if (open_main(&c, 0, 1, 1, 5, "shuffle_resume_other_B") != 0) { dataloader_free(&a); dataloader_free(&b); return; }
    for (int k = 0; k < 6; k++) { dataloader_next_batch(&c); }
    dataloader_next_batch(&c); // samples 12, 13
    int ok = memcmp(b.inputs, c.inputs, 2 * TT * sizeof(int32_t)) == 0 && memcmp(b.targets, c.targets, 2 * TT * sizeof(int32_t)) == 0;
    dataloader_next_batch(&c); // samples 14, 15
    ok = ok && memcmp(b.inputs + 2 * TT, c.inputs, TT * sizeof(int32_t)) == 0;
    check(ok, "shuffle_resume_other_B", "B=3 after a B=2 state did not continue the stream");
    dataloader_free(&a);
    dataloader_free(&b);
    dataloader_free(&c);
}

// The distributed sampler's order itself, pinned: the first 96 windows (their first tokens, = global token index) of
// the main data set for seed 1234, B 2, world 1, and its fingerprint, as the loader before blends gave them (commit
// 82943a1's dataloader.h). A checkpoint's data position is only a cursor: an order or a fingerprint that changed
// between versions would resume old checkpoints onto other data, or refuse them. The same for "1:GLOB".
static void test_shuffle_order_pinned(void) {
    static const int32_t want[96] = {
        64, 72, 60, 36, 28, 52, 20, 12, 16, 84, 68, 44, 96, 88, 4, 92, 8, 80, 0, 40, 32, 24, 48, 76,
        56, 238, 290, 282, 254, 278, 234, 262, 270, 286, 250, 226, 294, 178, 218, 298, 206, 202, 302, 186, 242, 246, 222, 214,
        210, 198, 274, 190, 230, 258, 266, 182, 194, 161, 153, 125, 169, 113, 117, 133, 157, 129, 105, 137, 149, 145, 101, 109,
        141, 165, 121, 173, 88, 80, 16, 0, 32, 20, 24, 8, 44, 36, 96, 64, 72, 48, 4, 56, 60, 84, 12, 92};
    for (int blend = 0; blend < 2; blend++) {
        char spec[1200], err[512] = "", name[96];
        snprintf(spec, sizeof(spec), "%s%s", blend ? "1:" : "", g_pattern);
        snprintf(name, sizeof(name), "shuffle_order_pinned%s", blend ? " (as the blend 1:GLOB)" : "");
        DataLoader dl;
        if (dataloader_init(&dl, spec, BB, TT, 0, 1, 1, 1234, VOCAB, err, sizeof(err)) != 0) { check(0, name, "%s", err); continue; }
        int first_bad = -1;
        for (int k = 0; k < 48 && first_bad < 0; k++) {
            dataloader_next_batch(&dl);
            for (int b = 0; b < BB; b++) { if (dl.inputs[b * TT] != want[2 * k + b] && first_bad < 0) { first_bad = 2 * k + b; } }
        }
        check(first_bad < 0 && dl.fingerprint == 0x638faba4b59af9ccULL, name, "first window that differs: %d (-1: none); fingerprint %016llx (want 638faba4b59af9cc)",
              first_bad, (unsigned long long)dl.fingerprint);
        dataloader_free(&dl);
    }
}

// ----------------------------------------------------------------------------
// shuffle = 1: a blend of data sets ("W1:GLOB1,W2:GLOB2")

// The second data set of the blends: 2 shards, tokens from 20000 (so a token says which data set it came from).
#define NSB 2
static const size_t SECOND_SIZES[NSB] = {45, 61};
static uint64_t g_off_b[NSB];
static char g_pattern_b[512];

// A window's data set (0 main, 1 second) and its sample index there (natural order), or -1 if not a sample start.
static int64_t blend_sample_id(int64_t g, int* source) {
    *source = g >= 20000;
    if (!*source) { return sample_id(g); }
    int64_t base = 0;
    for (int k = 0; k < NSB; k++) {
        int64_t n = (int64_t)((SECOND_SIZES[k] - 1) / TT), local = g - 20000 - (int64_t)g_off_b[k];
        if (local >= 0 && local < (int64_t)SECOND_SIZES[k]) { return local % TT != 0 || local / TT >= n ? -1 : base + local / TT; }
        base += n;
    }
    return -1;
}

// Runs world loaders over spec for `steps` micro-steps from stream position first (restored from st when st is not
// NULL): src[pos] and id[pos] receive the data set and sample of every stream position (pos < cap). Returns 0 on a
// setup failure or a malformed row, 1 otherwise.
static int run_blend(const char* spec, int world, uint64_t seed, const uint64_t* st, int64_t first, int steps, int* src,
                     int64_t* id, int64_t cap, char* err, size_t errlen) {
    DataLoader dls[3];
    int ok = 1, opened = 0;
    for (int r = 0; r < world && ok; r++, opened++) {
        ok = dataloader_init(&dls[r], spec, BB, TT, r, world, 1, seed, VOCAB, err, errlen) == 0;
        if (ok && st) { ok = dataloader_set_state(&dls[r], st, err, errlen) == 0; }
        if (!ok) { break; }
    }
    for (int s = 0; s < steps && ok; s++) {
        for (int r = 0; r < world; r++) {
            dataloader_next_batch(&dls[r]);
            if (!batch_is_windows(&dls[r], BB)) { ok = 0; }
            for (int b = 0; b < BB; b++) {
                int64_t pos = first + (int64_t)s * BB * world + (int64_t)r * BB + b;
                int which;
                int64_t sid = blend_sample_id(dls[r].inputs[b * TT], &which);
                if (sid < 0) { ok = 0; }
                if (pos < cap) { src[pos] = which; id[pos] = sid; }
            }
        }
    }
    for (int r = 0; r < opened && r < world; r++) { dataloader_free(&dls[r]); }
    return ok;
}

// A 3:1 blend of the main data set (76 samples an epoch) and the second (26): the share of every prefix of the
// stream is within one sample of 3/4 and 1/4; each data set's samples, in the order the blend meets them, are its
// own epochs, each a permutation (here the first two of each set); the global stream is the same for 1, 2 and 3
// ranks; the main set's samples come in its unblended order (the same seed); "1:GLOB" is GLOB itself (stream and
// fingerprint); other weights give another fingerprint, which a restore refuses.
static void test_blend(void) {
    char spec[1200], err[512] = "";
    snprintf(spec, sizeof(spec), "3:%s,1:%s", g_pattern, g_pattern_b);
    enum { CAP = 300 };
    int src[3][CAP];
    int64_t id[3][CAP];
    int ok = 1;
    for (int w = 1; w <= 3; w++) {
        for (int i = 0; i < CAP; i++) { src[w - 1][i] = -1; id[w - 1][i] = -1; }
        int steps = (CAP + BB * w - 1) / (BB * w);
        ok = run_blend(spec, w, 77, NULL, 0, steps, src[w - 1], id[w - 1], CAP, err, sizeof(err)) && ok;
    }
    check(ok, "blend_rows", "a malformed row or setup failure: %s", err);
    int64_t worst = 0, n1 = 0;
    for (int i = 0; i < CAP; i++) {
        n1 += src[0][i] == 1;
        int64_t dev = 4 * n1 - (int64_t)(i + 1); // 4 x (count - share), share (i + 1) / 4
        if (dev < 0) { dev = -dev; }
        if (dev > worst) { worst = dev; }
    }
    check(worst < 4, "blend_shares_within_one_sample", "a prefix's count of the 1/4 data set is %.2f samples from its share", worst / 4.0);
    check(memcmp(src[0], src[1], sizeof(src[0])) == 0 && memcmp(src[0], src[2], sizeof(src[0])) == 0 &&
          memcmp(id[0], id[1], sizeof(id[0])) == 0 && memcmp(id[0], id[2], sizeof(id[0])) == 0,
          "blend_stream_independent_of_world", "worlds 1, 2, 3 saw different blended streams");
    // each data set's own stream: its epochs are permutations of its samples
    int64_t per[2][CAP], np[2] = {0, 0};
    for (int i = 0; i < CAP; i++) { per[src[0][i]][np[src[0][i]]++] = id[0][i]; }
    char detail[256] = "";
    int64_t NB = 0;
    for (int k = 0; k < NSB; k++) { NB += (int64_t)((SECOND_SIZES[k] - 1) / TT); }
    int perm = np[1] >= 2 * NB && is_permutation(per[1], 0, NB, detail, sizeof(detail)) &&
               is_permutation(per[1], NB, NB, detail, sizeof(detail));
    int64_t NM = main_samples_per_epoch();
    perm = perm && np[0] >= 2 * NM && is_permutation(per[0], 0, NM, detail, sizeof(detail)) &&
           is_permutation(per[0], NM, NM, detail, sizeof(detail));
    check(perm, "blend_each_set_whole_epochs", "main %lld draws, second %lld: %s", (long long)np[0], (long long)np[1], detail);
    // the main set in its unblended order (seed 77)
    int64_t plain[CAP];
    DataLoader dl;
    int same = 0;
    if (open_main(&dl, 0, 1, 1, 77, "blend_first_set_in_its_own_order") == 0) {
        run_stream(&dl, 1, (int)(np[0] / BB), 0, plain, np[0]);
        same = memcmp(plain, per[0], sizeof(int64_t) * (size_t)(np[0] / BB * BB)) == 0;
        dataloader_free(&dl);
    }
    check(same, "blend_first_set_in_its_own_order", "the main set's draws differ from its unblended stream");
    // "1:GLOB" is GLOB
    DataLoader a, b;
    snprintf(spec, sizeof(spec), "1:%s", g_pattern);
    int single = dataloader_init(&a, spec, BB, TT, 0, 1, 1, 5, VOCAB, err, sizeof(err)) == 0;
    if (single && open_main(&b, 0, 1, 1, 5, "blend_single_is_plain") == 0) {
        single = a.fingerprint == b.fingerprint && a.nsources == 1;
        for (int k = 0; k < 40 && single; k++) {
            dataloader_next_batch(&a);
            dataloader_next_batch(&b);
            single = memcmp(a.inputs, b.inputs, sizeof(int32_t) * BB * TT) == 0;
        }
        dataloader_free(&b);
    }
    if (single || a.sources) { dataloader_free(&a); }
    check(single, "blend_single_is_plain", "'1:GLOB' differs from GLOB: %s", err);
    // the weights are part of the data set: a 3:1 state does not restore into 1:1
    DataLoader c, d;
    snprintf(spec, sizeof(spec), "3:%s,1:%s", g_pattern, g_pattern_b);
    char spec2[1200];
    snprintf(spec2, sizeof(spec2), "1:%s,1:%s", g_pattern, g_pattern_b);
    int refused = 0;
    if (dataloader_init(&c, spec, BB, TT, 0, 1, 1, 5, VOCAB, err, sizeof(err)) == 0) {
        if (dataloader_init(&d, spec2, BB, TT, 0, 1, 1, 5, VOCAB, err, sizeof(err)) == 0) {
            uint64_t st[DATALOADER_STATE_WORDS];
            dataloader_next_batch(&c);
            dataloader_get_state(&c, st);
            refused = dataloader_set_state(&d, st, err, sizeof(err)) == -1 && strstr(err, "different data set") != NULL;
            dataloader_free(&d);
        }
        dataloader_free(&c);
    }
    check(refused, "blend_weights_in_fingerprint", "a 3:1 state restored into 1:1: '%s'", err);
}

// A blend resumes: 2 ranks run 9 steps, the state goes to 3 ranks (and to a loader that had run further, which must
// go back), and the stream continues as the uninterrupted one-rank stream does.
static void test_blend_resume(void) {
    char spec[1200], err[512] = "";
    snprintf(spec, sizeof(spec), "2:%s,1:%s", g_pattern, g_pattern_b);
    enum { CAP = 200 };
    int src[CAP], src2[CAP];
    int64_t id[CAP], id2[CAP];
    for (int i = 0; i < CAP; i++) { src[i] = src2[i] = -1; id[i] = id2[i] = -1; }
    int ok = run_blend(spec, 1, 11, NULL, 0, CAP / BB, src, id, CAP, err, sizeof(err));
    DataLoader a[2];
    uint64_t st[DATALOADER_STATE_WORDS];
    int opened = 0;
    for (int r = 0; r < 2; r++) { opened += dataloader_init(&a[r], spec, BB, TT, r, 2, 1, 11, VOCAB, err, sizeof(err)) == 0; }
    if (opened == 2) {
        for (int k = 0; k < 9; k++) { for (int r = 0; r < 2; r++) { dataloader_next_batch(&a[r]); } }
        dataloader_get_state(&a[0], st);
        int64_t first = 9 * 2 * BB; // 36
        ok = run_blend(spec, 3, 11, st, first, (CAP - (int)first) / (BB * 3), src2, id2, CAP, err, sizeof(err)) && ok;
        int same = 1;
        for (int i = (int)first; i < CAP && same; i++) { if (src2[i] >= 0 && (src2[i] != src[i] || id2[i] != id[i])) { same = 0; } }
        check(ok && same, "blend_resume_other_world", "the resumed stream differs (%s)", err);
        // backwards: a loader 30 steps on restores the state of step 9 and reads position 36 onwards again
        DataLoader b;
        int back = dataloader_init(&b, spec, BB, TT, 0, 1, 1, 11, VOCAB, err, sizeof(err)) == 0;
        if (back) {
            for (int k = 0; k < 30; k++) { dataloader_next_batch(&b); }
            back = dataloader_set_state(&b, st, err, sizeof(err)) == 0;
            for (int k = 0; k < 10 && back; k++) {
                dataloader_next_batch(&b);
                for (int j = 0; j < BB; j++) {
                    int which;
                    int64_t sid = blend_sample_id(b.inputs[j * TT], &which);
                    int pos = (int)first + k * BB + j;
                    if (which != src[pos] || sid != id[pos]) { back = 0; }
                }
            }
            dataloader_free(&b);
        }
        check(back, "blend_restore_backwards", "after restoring an earlier state the stream differs (%s)", err);
    } else {
        check(0, "blend_resume_other_world", "setup: %s", err);
    }
    for (int r = 0; r < opened; r++) { dataloader_free(&a[r]); }
}

// Past the blend's period of 65536 positions (70000 positions of the 3:1 blend): the second set has exactly 16384 of
// the first 65536; every prefix stays within one sample of the shares; each set's draws are still whole epochs
// (the main set's 690, the second's 672), which they would not be if a period restarted the sets' streams; and a
// loader restored at position 65540 (a jump to the second period) reads what the uninterrupted stream read there.
static void test_blend_periods(void) {
    char spec[1200], err[512] = "";
    snprintf(spec, sizeof(spec), "3:%s,1:%s", g_pattern, g_pattern_b);
    enum { L = 70000 };
    int* src = (int*)mallocCheck(sizeof(int) * L);
    int64_t* id = (int64_t*)mallocCheck(sizeof(int64_t) * L);
    int64_t* per = (int64_t*)mallocCheck(sizeof(int64_t) * L);
    int ok = run_blend(spec, 1, 21, NULL, 0, L / BB, src, id, L, err, sizeof(err));
    int64_t n1 = 0, worst = 0, at_period = -1;
    for (int i = 0; i < L; i++) {
        n1 += src[i] == 1;
        int64_t dev = 4 * n1 - (int64_t)(i + 1);
        if (dev < 0) { dev = -dev; }
        if (dev > worst) { worst = dev; }
        if (i == 65535) { at_period = n1; }
    }
    check(ok && at_period == 16384 && worst < 4, "blend_period_exact_shares", "rows ok %d; the second set had %lld of the first 65536 "
          "(want 16384), worst prefix %.2f samples from its share (%s)", ok, (long long)at_period, worst / 4.0, err);
    int64_t sets_n[2] = {main_samples_per_epoch(), 0};
    for (int k = 0; k < NSB; k++) { sets_n[1] += (int64_t)((SECOND_SIZES[k] - 1) / TT); }
    int whole = 1;
    char detail[256] = "";
    for (int k = 0; k < 2 && whole; k++) {
        int64_t np = 0;
        for (int i = 0; i < L; i++) { if (src[i] == k) { per[np++] = id[i]; } }
        for (int64_t e = 0; (e + 1) * sets_n[k] <= np && whole; e++) { whole = is_permutation(per, e * sets_n[k], sets_n[k], detail, sizeof(detail)); }
    }
    check(whole, "blend_period_sets_keep_their_epochs", "%s", detail);
    DataLoader a, b;
    int same = 0;
    if (dataloader_init(&a, spec, BB, TT, 0, 1, 1, 21, VOCAB, err, sizeof(err)) == 0) {
        for (int k = 0; k < 65540 / BB; k++) { dataloader_next_batch(&a); }
        uint64_t st[DATALOADER_STATE_WORDS];
        dataloader_get_state(&a, st);
        if (dataloader_init(&b, spec, BB, TT, 0, 1, 1, 21, VOCAB, err, sizeof(err)) == 0) {
            same = dataloader_set_state(&b, st, err, sizeof(err)) == 0;
            for (int k = 0; k < 20 && same; k++) {
                dataloader_next_batch(&b);
                for (int j = 0; j < BB; j++) {
                    int which;
                    int64_t sid = blend_sample_id(b.inputs[j * TT], &which);
                    if (which != src[65540 + k * BB + j] || sid != id[65540 + k * BB + j]) { same = 0; }
                }
            }
            dataloader_free(&b);
        }
        dataloader_free(&a);
    }
    check(same, "blend_restore_in_second_period", "a loader restored at position 65540 read other samples (%s)", err);
    free(src); free(id); free(per);
}

// The blend's rule itself (dataloader__blend_choose) on 100 random mixes of 2 to 64 data sets, their weights made
// as dataloader_init makes them: one period of weight_total choices gives each data set exactly its weight (what
// the loader's O(period) positioning rests on, and what init checks), and every prefix stays within 2 samples of
// each share (the README's figure; 1 for two data sets, tested above). Worst seen is printed.
static void test_blend_rule(void) {
    uint64_t rng = 99;
    DataLoader dl;
    memset(&dl, 0, sizeof(dl));
    DataSource srcs[DATALOADER_MAX_SOURCES];
    dl.sources = srcs;
    int periodic = 1;
    double worst = 0.0;
    for (int mix = 0; mix < 100; mix++) {
        rng = dataloader__mix64(rng);
        int K = 2 + (int)(rng % 63);
        double raw[DATALOADER_MAX_SOURCES], sum = 0.0;
        for (int k = 0; k < K; k++) {
            rng = dataloader__mix64(rng);
            // uniform, two-valued (1000:1) and log-uniform over 5 decades, by turns
            raw[k] = mix % 3 == 0 ? 1.0 + (double)(rng % 1000) : mix % 3 == 1 ? (rng & 1 ? 1000.0 : 1.0) : pow(10.0, (double)(rng % 50) / 10.0);
            sum += raw[k];
        }
        memset(srcs, 0, sizeof(srcs));
        dl.nsources = K;
        dl.weight_total = 0;
        for (int k = 0; k < K; k++) {
            srcs[k].weight = (uint32_t)llround(raw[k] / sum * DATALOADER_WEIGHT_UNITS);
            if (srcs[k].weight == 0) { srcs[k].weight = 1; }
            dl.weight_total += srcs[k].weight;
        }
        for (uint64_t i = 0; i < dl.weight_total; i++) {
            srcs[dataloader__blend_choose(&dl, i)].drawn++;
            for (int k = 0; k < K; k++) {
                double dev = fabs((double)srcs[k].drawn - (double)(i + 1) * srcs[k].weight / dl.weight_total);
                if (dev > worst) { worst = dev; }
            }
        }
        for (int k = 0; k < K; k++) { if (srcs[k].drawn != srcs[k].weight) { periodic = 0; } }
    }
    check(periodic && worst < 2.0, "blend_rule_periodic_and_close", "exact per period %d; worst prefix %.3f samples from a share",
          periodic, worst);
}

static void expect_init_error(const char* name, const char* pattern, int B, int T, int world, int shuffle, int vocab,
                              const char* want1, const char* want2); // (below, with the other errors)

// Malformed blends, each refused with a message naming the problem.
static void test_blend_errors(void) {
    char spec[1400];
    snprintf(spec, sizeof(spec), "0:%s", g_pattern);
    expect_init_error("blend_error_zero_weight", spec, BB, TT, 1, 1, VOCAB, "expected WEIGHT:GLOB with a positive weight", NULL);
    snprintf(spec, sizeof(spec), "1:%s,", g_pattern);
    expect_init_error("blend_error_trailing_comma", spec, BB, TT, 1, 1, VOCAB, "trailing comma", NULL);
    snprintf(spec, sizeof(spec), "1:%s,2:", g_pattern);
    expect_init_error("blend_error_no_glob", spec, BB, TT, 1, 1, VOCAB, "no glob pattern after the weight", NULL);
    snprintf(spec, sizeof(spec), "1:%s,%s", g_pattern, g_pattern_b);
    expect_init_error("blend_error_item_without_weight", spec, BB, TT, 1, 1, VOCAB, "expected WEIGHT:GLOB", NULL);
    snprintf(spec, sizeof(spec), "1:%s,1e-9:%s", g_pattern, g_pattern_b);
    expect_init_error("blend_error_weight_too_small", spec, BB, TT, 1, 1, VOCAB, "below 1/65536 of the blend", g_pattern_b);
    snprintf(spec, sizeof(spec), "1:%s,1:%s/none_*.bin", g_pattern, g_dir);
    expect_init_error("blend_error_no_match", spec, BB, TT, 1, 1, VOCAB, "none_*.bin", "no file matches");
    snprintf(spec, sizeof(spec), "1:%s,1:%s", g_pattern, g_pattern_b);
    expect_init_error("blend_error_sequential_order", spec, BB, TT, 1, 0, VOCAB, "needs the distributed sampler (--shuffle 1)", NULL);
    expect_init_error("blend_error_llmc_order", spec, BB, TT, 1, 2, VOCAB, "needs the distributed sampler (--shuffle 1)", NULL);
    // each data set holds B*world samples: the second one's 26 are too few for B 2 x 14 ranks
    expect_init_error("blend_error_set_too_small", spec, BB, TT, 14, 1, VOCAB, g_pattern_b, "fewer than B*world");
    // more data sets than a blend holds (64), and an item longer than the parser's 1023 characters
    char* many = (char*)mallocCheck(65 * (strlen(g_pattern) + 8) + 1);
    size_t at = 0;
    for (int k = 0; k < 65; k++) { at += (size_t)sprintf(many + at, "%s1:%s", k ? "," : "", g_pattern); }
    expect_init_error("blend_error_more_than_64_sets", many, BB, TT, 1, 1, VOCAB, "more than 64 data sets in one blend", NULL);
    free(many);
    char longitem[1200];
    snprintf(longitem, sizeof(longitem), "1:%s,1:%s", g_pattern, g_dir);
    size_t l = strlen(longitem);
    while (l < 1150) { longitem[l++] = '/'; }
    snprintf(longitem + l, sizeof(longitem) - l, "none_*.bin");
    expect_init_error("blend_error_item_too_long", longitem, BB, TT, 1, 1, VOCAB, "blend item 2 is longer than 1023 characters (in '", "...')");
}

// ----------------------------------------------------------------------------
// version 2 (uint32 tokens)

static void test_uint32(void) {
    size_t sizes[2] = {90, 70};
    uint64_t off[2];
    write_dataset("v2", 2, sizes, 2, 70000, off);
    char pat[512], err[512] = "";
    snprintf(pat, sizeof(pat), "%s/v2_*.bin", g_dir);
    DataLoader dl;
    int ok = dataloader_init(&dl, pat, 2, 4, 0, 1, 0, 0, 100000, err, sizeof(err)) == 0;
    check(ok && dataloader_num_tokens(&dl) == 160, "uint32_init", "%s", err);
    if (ok) {
        int good = 1;
        for (int k = 0; k < 25; k++) { // 11 + 8 batches per epoch: crosses the shard and epoch boundaries
            dataloader_next_batch(&dl);
            uint64_t idx = (uint64_t)(k % 19);
            uint64_t want = idx < 11 ? 70000 + idx * 8 : 70000 + off[1] + (idx - 11) * 8;
            if ((uint64_t)dl.inputs[0] != want || !batch_is_windows(&dl, 1)) { good = 0; }
        }
        check(good, "uint32_sequential", "tokens above 65535 read wrongly");
        dataloader_free(&dl);
    }
    ok = dataloader_init(&dl, pat, 2, 4, 0, 1, 1, 3, 100000, err, sizeof(err)) == 0;
    if (ok) {
        int good = 1;
        for (int k = 0; k < 30; k++) {
            dataloader_next_batch(&dl);
            for (int b = 0; b < 2; b++) {
                int64_t g = (int64_t)dl.inputs[b * 4] - 70000; // shard 0: 22 samples at 4i; shard 1: 17 at 90 + 4i
                int valid = (g >= 0 && g < 88 && g % 4 == 0) || (g >= 90 && g < 90 + 68 && (g - 90) % 4 == 0);
                if (!valid) { good = 0; }
            }
            if (!batch_is_windows(&dl, 2)) { good = 0; }
        }
        check(good, "uint32_shuffle", "bad windows");
        dataloader_free(&dl);
    } else {
        check(0, "uint32_shuffle", "%s", err);
    }
    // a vocabulary of 70100 rejects token 70100 (shard 1 holds 70090..70159)
    ok = dataloader_init(&dl, pat, 2, 4, 0, 1, 0, 0, 70100, err, sizeof(err));
    check(ok == -1 && strstr(err, "v2_01.bin") && strstr(err, "token 70100 at position 10 "), "uint32_token_over_vocab", "rc %d, err '%s'", ok, err);
}

// ----------------------------------------------------------------------------
// errors

// Expects dataloader_init to fail with a message containing want1 and want2.
static void expect_init_error(const char* name, const char* pattern, int B, int T, int world, int shuffle, int vocab,
                              const char* want1, const char* want2) {
    DataLoader dl;
    char err[512];
    strcpy(err, "(no message)");
    int rc = dataloader_init(&dl, pattern, B, T, 0, world, shuffle, 1, vocab, err, sizeof(err));
    int ok = rc == -1 && strstr(err, want1) != NULL && (want2 == NULL || strstr(err, want2) != NULL) && strchr(err, '\n') == NULL;
    check(ok, name, "rc %d, message '%s' (want '%s'%s%s)", rc, err, want1, want2 ? " and " : "", want2 ? want2 : "");
    if (rc == 0) { dataloader_free(&dl); }
}

static void test_errors(void) {
    char path[512], pat[512];
    uint32_t* toks = (uint32_t*)mallocCheck(200000 * sizeof(uint32_t));
    for (size_t i = 0; i < 200000; i++) { toks[i] = (uint32_t)(i % 50000); }

    snprintf(pat, sizeof(pat), "%s/nothing_*.bin", g_dir);
    expect_init_error("error_no_match", pat, 2, 4, 1, 0, VOCAB, "nothing_*.bin", "no file matches");

    snprintf(path, sizeof(path), "%s/badmagic.bin", g_dir);
    write_shard_raw(path, 20240521, 1, 100, toks, 100, 2);
    expect_init_error("error_bad_magic", path, 2, 4, 1, 0, VOCAB, "badmagic.bin", "bad magic 20240521");

    snprintf(path, sizeof(path), "%s/badversion.bin", g_dir);
    write_shard_raw(path, 20240520, 3, 100, toks, 100, 2);
    expect_init_error("error_bad_version", path, 2, 4, 1, 0, VOCAB, "badversion.bin", "version 3");

    snprintf(path, sizeof(path), "%s/truncated.bin", g_dir);
    write_shard_raw(path, 20240520, 1, 100, toks, 99, 2);
    expect_init_error("error_size_mismatch_short", path, 2, 4, 1, 0, VOCAB, "truncated.bin", "100 tokens");

    snprintf(path, sizeof(path), "%s/long.bin", g_dir);
    write_shard_raw(path, 20240520, 1, 100, toks, 101, 2);
    expect_init_error("error_size_mismatch_long", path, 2, 4, 1, 0, VOCAB, "long.bin", "1226 bytes");

    snprintf(path, sizeof(path), "%s/v1as4.bin", g_dir); // version 1 header over uint32 data
    write_shard_raw(path, 20240520, 1, 100, toks, 100, 4);
    expect_init_error("error_size_mismatch_version", path, 2, 4, 1, 0, VOCAB, "v1as4.bin", "file is 1424 bytes");

    snprintf(path, sizeof(path), "%s/noheader.bin", g_dir);
    {
        FILE* fp = fopenCheck(path, "wb");
        fwriteCheck(toks, 4, 10, fp, path);
        fcloseCheck(fp, path);
    }
    expect_init_error("error_shorter_than_header", path, 2, 4, 1, 0, VOCAB, "noheader.bin", "smaller than the 1024-byte");

    snprintf(path, sizeof(path), "%s/negative.bin", g_dir);
    write_shard_raw(path, 20240520, 1, -5, toks, 0, 2);
    expect_init_error("error_negative_count", path, 2, 4, 1, 0, VOCAB, "negative.bin", "negative token count");

    // too small: shuffle 0 needs B*T*world+1 tokens; a second, good shard before it in sorted order
    snprintf(path, sizeof(path), "%s/small_a.bin", g_dir);
    write_shard_raw(path, 20240520, 1, 100, toks, 100, 2);
    snprintf(path, sizeof(path), "%s/small_b.bin", g_dir);
    write_shard_raw(path, 20240520, 1, 24, toks, 24, 2);
    snprintf(pat, sizeof(pat), "%s/small_*.bin", g_dir);
    expect_init_error("error_too_small_sequential", pat, 2, 4, 3, 0, VOCAB, "small_b.bin", "B*T*world+1");
    {
        DataLoader dl;
        char err[512] = "";
        int rc = dataloader_init(&dl, pat, 2, 4, 0, 2, 0, 0, VOCAB, err, sizeof(err)); // 24 >= 2*4*2+1
        check(rc == 0, "too_small_rule_boundary_ok", "world 2 should accept 24 tokens: %s", err);
        if (rc == 0) { dataloader_free(&dl); }
    }
    // shuffle 1: every shard needs T+1 tokens; the data set needs B*world samples
    snprintf(path, sizeof(path), "%s/tiny_a.bin", g_dir);
    write_shard_raw(path, 20240520, 1, 4, toks, 4, 2);
    snprintf(pat, sizeof(pat), "%s/tiny_*.bin", g_dir);
    expect_init_error("error_too_small_shuffle_shard", pat, 2, 4, 1, 1, VOCAB, "tiny_a.bin", "one sample");
    snprintf(path, sizeof(path), "%s/few_a.bin", g_dir);
    write_shard_raw(path, 20240520, 1, 13, toks, 13, 2); // 3 samples of T=4
    snprintf(pat, sizeof(pat), "%s/few_*.bin", g_dir);
    expect_init_error("error_too_few_samples_shuffle", pat, 2, 4, 2, 1, VOCAB, "few_*.bin", "fewer than B*world");
    {
        DataLoader dl;
        char err[512] = "";
        int rc = dataloader_init(&dl, pat, 3, 4, 0, 1, 1, 0, VOCAB, err, sizeof(err)); // 3 samples, B*world = 3
        check(rc == 0, "shuffle_small_rule_boundary_ok", "3 samples with B=3 world=1 should be accepted: %s", err);
        if (rc == 0) { dataloader_free(&dl); }
    }

    // token id >= vocab: first bad position reported, across scan chunks (bad tokens at 150000 and 70000)
    snprintf(path, sizeof(path), "%s/badtok.bin", g_dir);
    toks[150000] = 60000;
    toks[70000] = 50999;
    write_shard_raw(path, 20240520, 1, 200000, toks, 200000, 2);
    expect_init_error("error_token_over_vocab", path, 2, 4, 1, 0, VOCAB, "badtok.bin", "token 50999 at position 70000 is >= vocab size 50257");
    toks[150000] = 0;
    toks[70000] = 0;
    toks[1234] = 50257;
    write_shard_raw(path, 20240520, 1, 200000, toks, 200000, 2);
    expect_init_error("error_token_equal_vocab", path, 2, 4, 1, 0, VOCAB, "badtok.bin", "token 50257 at position 1234 ");

    // a bad shard among good ones is named
    snprintf(path, sizeof(path), "%s/mix_00.bin", g_dir);
    write_shard_raw(path, 20240520, 1, 100, toks, 100, 2);
    snprintf(path, sizeof(path), "%s/mix_01.bin", g_dir);
    write_shard_raw(path, 20240520, 2, 100, toks, 100, 2);
    snprintf(pat, sizeof(pat), "%s/mix_*.bin", g_dir);
    expect_init_error("error_names_bad_shard", pat, 2, 4, 1, 0, VOCAB, "mix_01.bin", "header says 100 tokens");

    // argument errors
    {
        DataLoader dl;
        char err[512] = "";
        int rc = dataloader_init(&dl, g_pattern, 2, 4, 2, 2, 0, 0, VOCAB, err, sizeof(err));
        check(rc == -1 && strstr(err, "rank 2") != NULL, "error_rank_out_of_range", "rc %d '%s'", rc, err);
    }
    free(toks);
}

// set_state refuses base with word w set to value, with a message containing expect.
static void state_refused(DataLoader* dl, const uint64_t* base, int w, uint64_t value, const char* expect, const char* name) {
    uint64_t bad[DATALOADER_STATE_WORDS];
    char err[512] = "";
    memcpy(bad, base, sizeof(bad));
    bad[w] = value;
    int rc = dataloader_set_state(dl, bad, err, sizeof(err));
    check(rc == -1 && strstr(err, expect), name, "rc %d '%s'", rc, err);
}

// set_state refuses states that do not belong to the loader.
static void test_state_errors(void) {
    DataLoader seq, shuf;
    if (open_main(&seq, 0, 1, 0, 0, "state_errors") != 0) { return; }
    if (open_main(&shuf, 0, 1, 1, 11, "state_errors") != 0) { dataloader_free(&seq); return; }
    dataloader_next_batch(&seq);
    dataloader_next_batch(&shuf);
    uint64_t s[DATALOADER_STATE_WORDS], q[DATALOADER_STATE_WORDS], bad[DATALOADER_STATE_WORDS];
    dataloader_get_state(&seq, s);
    dataloader_get_state(&shuf, q);
    char err[512] = "";
    int rc;

    check(s[0] == DATALOADER_STATE_MAGIC && s[1] == 0 && s[4] == 0 && s[5] == 0 && s[6] == BB * TT, "state_layout_sequential",
          "words %llu %llu %llu %llu", (unsigned long long)s[1], (unsigned long long)s[4], (unsigned long long)s[5], (unsigned long long)s[6]);
    check(q[1] == 1 && q[2] == 11 && q[3] == TT && q[4] == 0 && q[5] == BB && q[6] == 0, "state_layout_shuffle",
          "words %llu %llu %llu %llu %llu", (unsigned long long)q[1], (unsigned long long)q[2], (unsigned long long)q[3],
          (unsigned long long)q[4], (unsigned long long)q[5]);

    state_refused(&seq, s, 0, s[0] ^ 1, "magic", "state_error_magic");
    rc = dataloader_set_state(&seq, q, err, sizeof(err));
    check(rc == -1 && strstr(err, "shuffle=1"), "state_error_mode", "rc %d '%s'", rc, err);
    state_refused(&shuf, q, 2, 12, "seed 12", "state_error_seed");
    state_refused(&shuf, q, 3, 8, "T=8", "state_error_T");
    state_refused(&shuf, q, 7, q[7] ^ 0x10, "different data set", "state_error_dataset");
    state_refused(&seq, s, 5, 3, "shard index 3", "state_error_shard_index");
    state_refused(&seq, s, 6, 101, "main_00.bin", "state_error_position");
    state_refused(&shuf, q, 5, 1000, "epoch", "state_error_epoch"); // (its epoch word still 0)
    // llm.c's shuffled order (shuffle 2): a state of another layout, and an epoch word its call count contradicts
    DataLoader llmc;
    if (open_main(&llmc, 0, 1, 2, 0, "state_errors") == 0) {
        dataloader_next_batch(&llmc);
        uint64_t w[DATALOADER_STATE_WORDS];
        dataloader_get_state(&llmc, w);
        state_refused(&llmc, w, 3, 8, "llm.c's shuffled order (--shuffle 2) was saved with 1 processes, T=8", "state_error_llmc_layout");
        state_refused(&llmc, w, 4, 5, "epoch 5 disagrees with 1 calls", "state_error_llmc_epoch");
        rc = dataloader_set_state(&llmc, w, err, sizeof(err));
        check(rc == 0, "state_llmc_own_state_accepted", "rc %d '%s'", rc, err);
        dataloader_free(&llmc);
    }
    // a failed set_state leaves the loader where it was
    dataloader_get_state(&seq, bad);
    check(memcmp(bad, s, sizeof(bad)) == 0, "state_error_leaves_loader", "state changed by a refused set_state");
    dataloader_free(&seq);
    dataloader_free(&shuf);
}

// The evaluation use: the trainer opens the val pattern with rank 0, world 1, shuffle 0 on every rank and
// picks batch indices itself; batch i must be tokens [i*B*T, (i+1)*B*T + 1) of the concatenated usable chunks.
static void test_validation_use(void) {
    DataLoader dl;
    if (open_main(&dl, 0, 1, 0, 0, "validation_loader") != 0) { return; }
    uint64_t n = dataloader_num_batches(&dl);
    int ok = n == 37;
    for (uint64_t pass = 0; pass < 2; pass++) {
        dataloader_reset(&dl);
        for (uint64_t i = 0; i < n; i++) {
            dataloader_next_batch(&dl);
            uint64_t k = i < 12 ? 0 : i < 21 ? 1 : 2;
            uint64_t j = i < 12 ? i : i < 21 ? i - 12 : i - 21;
            if ((uint64_t)dl.inputs[0] != g_off[k] + j * BB * TT) { ok = 0; }
        }
    }
    check(ok && dataloader_num_tokens(&dl) == 308, "validation_loader", "num_batches %llu (want 37), tokens %llu (want 308)",
          (unsigned long long)n, (unsigned long long)dataloader_num_tokens(&dl));
    dataloader_free(&dl);
}

// The Feistel permutation is a bijection for many sizes, including 1, 2 and powers of two.
static void test_permutation_bijective(void) {
    int ok = 1;
    uint64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 1000, 4096, 12345};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]) && ok; si++) {
        uint64_t n = sizes[si];
        char* seen = (char*)callocCheck(n, 1);
        for (uint64_t x = 0; x < n; x++) {
            uint64_t y = dataloader__permute(x, n, 0xABCDEFULL + n);
            if (y >= n || seen[y]++) { ok = 0; break; }
        }
        free(seen);
    }
    check(ok, "permutation_bijective", "not a bijection");
}

// ----------------------------------------------------------------------------

// --shuffle 2 reads llm.c's batches: for worlds 1-3 and every rank, the first token of each of 60 calls (about 3
// epochs) equals what llm.c's own loader read from the same data (tests/ref/llmc_data_order.txt, see its header), and
// each batch is one window of B*T+1 consecutive tokens, as llm.c reads it.
static void test_llmc_order(void) {
    FILE* f = fopen("tests/ref/llmc_data_order.txt", "r");
    if (!f) { check(0, "llmc order", "tests/ref/llmc_data_order.txt is missing (run from the repository root)"); return; }
    char line[4096];
    int lines = 0;
    while (fgets(line, sizeof(line), f)) {
        int w, r, used = 0;
        if (line[0] == '#' || sscanf(line, "world %d rank %d:%n", &w, &r, &used) != 2 || used == 0) { continue; } // (not the state lines)
        DataLoader dl;
        char name[64];
        snprintf(name, sizeof(name), "llm.c's shuffled order, world %d rank %d", w, r);
        if (open_main(&dl, r, w, 2, 1234, name) != 0) { break; }
        const char* p = line + used;
        int ok = 1, call = 0, want = -1, n = 0;
        for (; call < 60 && ok; call++) {
            ok = sscanf(p, "%d%n", &want, &n) == 1;
            p += n;
            dataloader_next_batch(&dl);
            ok = ok && dl.inputs[0] == want && batch_is_windows(&dl, 1);
        }
        check(ok && call == 60, name, "call %d: first token %d, llm.c's %d", call, dl.inputs[0], want);
        dataloader_free(&dl);
        lines++;
    }
    fclose(f);
    check(lines == 6, "llm.c's shuffled order: the reference's 6 rank lines read", "%d lines", lines);
}

// What llm.c's save_state writes for its loader (the shard and group position, the generator, the orders) equals
// dataloader_llmc_state's replay for each (world, rank, calls) of the reference (tests/ref/llmc_data_order.txt).
static void test_llmc_state(void) {
    FILE* f = fopen("tests/ref/llmc_data_order.txt", "r");
    if (!f) { check(0, "llmc state", "tests/ref/llmc_data_order.txt is missing"); return; }
    char line[4096];
    int lines = 0;
    while (fgets(line, sizeof(line), f)) {
        int w, r, calls, left, next, used = 0;
        unsigned long long shard, sample, fnv, groups;
        if (sscanf(line, "world %d rank %d calls %d: shard %llu sample %llu left %d next %d mt_fnv %llx shards%n", &w, &r, &calls, &shard,
                   &sample, &left, &next, &fnv, &used) != 8) { continue; }
        DataLoader dl;
        char name[96];
        snprintf(name, sizeof(name), "llm.c's loader state, world %d rank %d after %d calls", w, r, calls);
        if (open_main(&dl, 0, w, 2, 0, name) != 0) { break; }
        int order[NSH], groups_at[64];
        LlmcLoaderState st;
        dataloader_llmc_state(&dl, r, (uint64_t)calls, &st, order, groups_at);
        uint64_t h = 1469598103934665603ULL;
        for (int i = 0; i < 624; i++) { for (int b = 0; b < 4; b++) { h ^= (st.mt[i] >> (8 * b)) & 255u; h *= 1099511628211ULL; } }
        int ok = st.shard_idx == shard && st.sample_idx == sample && st.mt_left == left && st.mt_next == next && h == fnv;
        const char* p = line + used;
        int n = 0, v = 0;
        for (int i = 0; i < NSH && ok; i++) { ok = sscanf(p, "%d%n", &v, &n) == 1 && v == order[i]; p += n; }
        ok = ok && sscanf(p, " groups %llu:%n", &groups, &n) == 1 && groups == st.groups;
        p += n;
        for (uint64_t i = 0; i < st.groups && ok; i++) { ok = sscanf(p, "%d%n", &v, &n) == 1 && v == groups_at[i]; p += n; }
        check(ok, name, "replay: shard %llu sample %llu left %d next %d fnv %016llx groups %llu",
              (unsigned long long)st.shard_idx, (unsigned long long)st.sample_idx, st.mt_left, st.mt_next, (unsigned long long)h,
              (unsigned long long)st.groups);
        dataloader_free(&dl);
        lines++;
    }
    fclose(f);
    check(lines == 3, "llm.c's loader states: the reference's 3 lines read", "%d lines", lines);
}

// --shuffle 2 resumes by replaying its calls: a state taken after 23 calls continues identically in a fresh loader;
// a state from another world size is refused, naming the three things the order depends on.
static void test_llmc_order_resume(void) {
    DataLoader a, b, c;
    if (open_main(&a, 1, 2, 2, 0, "llmc order resume") != 0) { return; }
    for (int k = 0; k < 23; k++) { dataloader_next_batch(&a); }
    uint64_t st[DATALOADER_STATE_WORDS];
    dataloader_get_state(&a, st);
    if (open_main(&b, 1, 2, 2, 0, "llmc order resume") != 0) { dataloader_free(&a); return; }
    char err[512] = "";
    int ok = dataloader_set_state(&b, st, err, sizeof(err)) == 0, k = 0;
    for (; k < 40 && ok; k++) {
        dataloader_next_batch(&a);
        dataloader_next_batch(&b);
        ok = memcmp(a.inputs, b.inputs, BB * TT * sizeof(int32_t)) == 0 && a.epoch == b.epoch;
    }
    check(ok, "llmc order resume: 23 calls, then 40 more identical after a restore", "at call %d (err '%s')", 23 + k, err);
    if (open_main(&c, 0, 3, 2, 0, "llmc order resume") == 0) {
        int rc = dataloader_set_state(&c, st, err, sizeof(err));
        check(rc != 0 && strstr(err, "saved with 2 processes") != NULL, "llmc order: a state of 2 processes is refused by 3", "rc %d, '%s'", rc, err);
        dataloader_free(&c);
    }
    dataloader_free(&a);
    dataloader_free(&b);
}

// dataloader_skip(n) leaves the loader exactly where n calls of dataloader_next_batch from the start do: the same
// state words and the same next batch, in all three orders, for rank 1 of 2 and rank 0 of 3, for n from 0 across several
// epochs (the main data set holds 18 and 12 groups per epoch in order 0 for these worlds, 76 samples in order 1).
static void test_skip(void) {
    for (int shuffle = 0; shuffle <= 2; shuffle++) {
        for (int w = 2; w <= 3; w++) {
            DataLoader a, b;
            char name[96];
            snprintf(name, sizeof(name), "skip (shuffle %d, world %d)", shuffle, w);
            if (open_main(&a, w - 2, w, shuffle, 7, name) != 0) { return; }
            if (open_main(&b, w - 2, w, shuffle, 7, name) != 0) { dataloader_free(&a); return; }
            int ok = 1, n = 0;
            for (; n <= 70 && ok; n++) {
                uint64_t sa[DATALOADER_STATE_WORDS], sb[DATALOADER_STATE_WORDS];
                dataloader_skip(&b, (uint64_t)n);
                dataloader_get_state(&a, sa);
                dataloader_get_state(&b, sb);
                ok = memcmp(sa, sb, sizeof(sa)) == 0 && a.epoch == b.epoch;
                dataloader_next_batch(&a);
                dataloader_next_batch(&b);
                ok = ok && memcmp(a.inputs, b.inputs, BB * TT * sizeof(int32_t)) == 0;
            }
            check(ok, name, "after %d calls the skipped loader differs (epoch %llu vs %llu)", n - 1,
                  (unsigned long long)a.epoch, (unsigned long long)b.epoch);
            dataloader_free(&a);
            dataloader_free(&b);
        }
    }
}

int main(void) {
    snprintf(g_dir, sizeof(g_dir), "/tmp/test_dataloader_XXXXXX");
    if (mkdtemp(g_dir) == NULL) { fatal("cannot create a temporary directory under /tmp: %s", strerror(errno)); }
    write_dataset("main", 1, MAIN_SIZES, NSH, 0, g_off);
    snprintf(g_pattern, sizeof(g_pattern), "%s/main_*.bin", g_dir);
    write_dataset("second", 1, SECOND_SIZES, NSB, 20000, g_off_b);
    snprintf(g_pattern_b, sizeof(g_pattern_b), "%s/second_*.bin", g_dir);

    test_sequential(1);
    test_sequential(3);
    test_sequential_resume();
    test_validation_use();
    test_permutation_bijective();
    test_shuffle_coverage();
    test_shuffle_seeds();
    test_shuffle_resume_same();
    test_shuffle_resume_world(1);
    test_shuffle_resume_world(3);
    test_shuffle_resume_batch();
    test_shuffle_order_pinned();
    test_blend();
    test_blend_resume();
    test_blend_periods();
    test_blend_rule();
    test_uint32();
    test_errors();
    test_blend_errors();
    test_state_errors();
    test_skip();
    test_llmc_order();
    test_llmc_order_resume();
    test_llmc_state();

    remove_dir(g_dir);
    return test_summary();
}
