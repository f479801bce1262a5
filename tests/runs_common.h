/*
tests/runs_common.h: what the tests that drive ./train_gpt in child processes share (tests/test_runs.c,
tests/test_tp_runs.c): test shards, reading the JSON logs, and comparing two runs' logs and model files with stated
tolerances, freshly initialised model files, and the comparisons of a parallel run (and of a resume on another layout) against one process. Include
after train_gpt.c (TRAIN_GPT_NO_MAIN) and tests/testing.h, with `report` defined as `check`.
*/
#ifndef RUNS_COMMON_H
#define RUNS_COMMON_H

// The sampling flags of the runs that sample mid-training (the one-process references and the parallel layouts
// compared with them): every filter on, so each layout's samples go through all of them
#define SAMPLE_FILTERS " --temperature 0.8 --top-k 5 --top-p 0.9 --min-p 0.05 --repetition-penalty 1.3"

// Writes a model file of shape g, freshly initialised as the trainer does (GPT-2's scheme, init_params) from seed.
static void write_init_model(const char* path, GPTConfig g, uint64_t seed) {
    ParamLayout pl;
    layout_build(&pl, &g);
    float* params = (float*)mallocCheck(pl.num_params * sizeof(float));
    init_params(params, &pl, seed);
    model_save(path, &pl, params);
    free(params);
    layout_free(&pl);
}

// Writes an llm.c shard with n tokens drawn from [0, V) (a fixed pseudo-random text with some structure).
static void write_shard(const char* path, int n, int V, uint64_t seed, int magic, int version, int header_count) {
    FILE* f = fopenCheck(path, "wb");
    int32_t h[256] = {0};
    h[0] = magic; h[1] = version; h[2] = header_count;
    fwriteCheck(h, 4, 256, f, path);
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        uint16_t t = (uint16_t)(i % 7 == 0 ? 0 : (rng_next(&s) % V));
        fwriteCheck(&t, 2, 1, f, path);
    }
    fclose(f);
}

// Reads the values of "key" in a JSON log into vals; returns how many.
static int read_log_values(const char* path, const char* key, char vals[][32], int max) {
    FILE* f = fopen(path, "r");
    if (!f) { return 0; }
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof(line), f) && n < max) {
        char pat[64];
        snprintf(pat, sizeof(pat), "\"%s\": ", key);
        char* p = strstr(line, pat);
        if (!p) { continue; }
        p += strlen(pat);
        int k = 0;
        while (*p && *p != ',' && *p != '}' && k < 31) { vals[n][k++] = *p++; }
        vals[n][k] = '\0';
        n++;
    }
    fclose(f);
    return n;
}

static int read_log_losses(const char* path, char losses[][32], int max) { return read_log_values(path, "loss", losses, max); }

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x TRAIN_GPT_FAULT"


// Compares the first expect_n losses of log_b with those of log_a after skip_a of them (each within rtol, relative).
static int compare_losses(const char* name, const char* log_a, int skip_a, const char* log_b, int expect_n, double rtol) {
    char la[64][32], lb[64][32];
    int na = read_log_losses(log_a, la, 64), nb = read_log_losses(log_b, lb, 64);
    int ok = na - skip_a >= expect_n && nb == expect_n;
    double worst = 0;
    for (int i = 0; ok && i < expect_n; i++) {
        double a = atof(la[skip_a + i]), b = atof(lb[i]);
        double d = fabs(a - b) / fabs(a);
        if (!(d <= rtol)) { ok = 0; }
        if (d > worst) { worst = d; }
    }
    report(ok, name, "%d vs %d losses, max relative difference %.3g (tolerance %g)", na - skip_a, nb, worst, rtol);
    return ok;
}

// Compares every value of `key` in two logs (same count, each within rtol).
static void compare_values(const char* name, const char* key, const char* log_a, const char* log_b, int expect_n, double rtol) {
    char la[64][32], lb[64][32];
    int na = read_log_values(log_a, key, la, 64), nb = read_log_values(log_b, key, lb, 64);
    int ok = na == expect_n && nb == expect_n;
    double worst = 0;
    for (int i = 0; ok && i < expect_n; i++) {
        double a = atof(la[i]), b = atof(lb[i]);
        double d = fabs(a - b) / fabs(a);
        if (!(d <= rtol)) { ok = 0; }
        if (d > worst) { worst = d; }
    }
    report(ok, name, "%d vs %d values, max relative difference %.3g (tolerance %g)", na, nb, worst, rtol);
}

// Compares two model files of the same shape per element (atol + rtol |a|), naming the worst tensor. The key
// biases (qkvb elements [C, 2C)) are held to key_atol instead: their true gradient is exactly zero (a constant
// added to every key leaves each softmax unchanged), so their float gradient is rounding noise that Adam turns
// into steps of up to ~lr whose sign depends on the summation order.
static void compare_model_files(const char* name, const char* path_a, const char* path_b, double atol, double rtol, double key_atol) {
    long long na = file_size(path_a), nb = file_size(path_b);
    if (na <= 1024 || na != nb) { report(0, name, "'%s' (%lld bytes) and '%s' (%lld bytes) cannot be compared", path_a, na, path_b, nb); return; }
    FILE* fa = fopen(path_a, "rb");
    FILE* fb = fopen(path_b, "rb");
    if (!fa || !fb) { if (fa) { fclose(fa); } if (fb) { fclose(fb); } report(0, name, "cannot open the files"); return; }
    int32_t ha[256], hb[256];
    int ok = fread(ha, 4, 256, fa) == 256 && fread(hb, 4, 256, fb) == 256 && memcmp(ha, hb, sizeof(ha)) == 0;
    GPTConfig g = {ha[2], ha[3], ha[7], ha[4], ha[5], ha[6]};
    ParamLayout pl;
    layout_build(&pl, &g);
    double worst = 0.0;
    size_t bad = 0;
    char worst_name[64] = "-";
    for (int i = 0; ok && i < pl.num_tensors; i++) {
        const ParamEntry* e = &pl.table[i];
        size_t n = e->rows * e->cols;
        float* a = (float*)mallocCheck(n * 4);
        float* b = (float*)mallocCheck(n * 4);
        ok = fread(a, 4, n, fa) == n && fread(b, 4, n, fb) == n;
        int key_bias = strncmp(e->name, "qkvb.", 5) == 0;
        for (size_t j = 0; ok && j < n; j++) {
            double d = fabs((double)a[j] - b[j]);
            if (key_bias && j >= (size_t)g.channels && j < 2 * (size_t)g.channels) {
                if (!(d <= key_atol)) { bad++; }
                continue;
            }
            if (!(d <= atol + rtol * fabs(a[j]))) { bad++; }
            if (!(d <= worst)) { worst = d; snprintf(worst_name, sizeof(worst_name), "%s[%zu]", e->name, j); }
        }
        free(a);
        free(b);
    }
    fclose(fa);
    fclose(fb);
    layout_free(&pl);
    report(ok && bad == 0, name, "%s%zu of %zu values out of tolerance (atol %g, rtol %g; key biases %g); max abs difference %.3g at %s",
           ok ? "" : "headers or sizes differ; ", bad, pl.num_params, atol, rtol, key_atol, worst, worst_name);
}

// The "sample: ..." line of a run's output (empty if none).
static void sample_line(const char* out, char* line, size_t cap) {
    line[0] = '\0';
    const char* p = strstr(out, "sample: ");
    if (!p) { return; }
    size_t n = strcspn(p, "\n");
    if (n >= cap) { n = cap - 1; }
    memcpy(line, p, n);
    line[n] = '\0';
}

// A parallel layout to run: its name, ranks, and flags.
typedef struct {
    const char* name;
    int np;
    const char* args;
} RunLayout;

// A parallel run against one process's (both writing a checkpoint at step `steps` and a sample at the end): losses,
// gradient norms (the first one is the whole first step's gradient), validation losses (nval of them) within rtol
// relative, learning rates identical, the checkpoint's model file per element (2e-6 absolute + 1e-4 relative; the key
// biases, whose true gradient is zero, 20 lr of 1e-3), the same sample.
static void compare_run(const char* what, const char* ref_log, const char* log, int steps, int nval, double rtol,
                        const char* ref_model, const char* model, const char* ref_out, const char* out) {
    char name[256], a[512], b[512];
    snprintf(name, sizeof(name), "%s: losses equal one process's (%d steps)", what, steps);
    compare_losses(name, ref_log, 0, log, steps, rtol);
    snprintf(name, sizeof(name), "%s: gradient norms equal one process's (the first: the whole first-step gradient)", what);
    compare_values(name, "grad_norm", ref_log, log, steps, rtol);
    snprintf(name, sizeof(name), "%s: validation losses equal one process's", what);
    compare_values(name, "val_loss", ref_log, log, nval, rtol);
    snprintf(name, sizeof(name), "%s: learning rates identical to one process's", what);
    compare_values(name, "lr", ref_log, log, steps, 0.0);
    snprintf(name, sizeof(name), "%s: the checkpoint's model file (gathered, llm.c's layout) equals one process's, per element", what);
    compare_model_files(name, ref_model, model, 2e-6, 1e-4, 20 * 1e-3);
    sample_line(ref_out, a, sizeof(a));
    sample_line(out, b, sizeof(b));
    snprintf(name, sizeof(name), "%s: samples the same tokens as one process", what);
    report(b[0] && strcmp(a, b) == 0, name, "'%s' vs '%s'", b, a);
}

// Resumes a copy of checkpoint directory dir/from, rewound to step 5, on another layout (np ranks, args) to step 10:
// the losses of steps 6-10 must equal the uninterrupted one process's (rtol).
static void resume_case(const char* dir, int k, const char* from, const char* from_name, int np, const char* common,
                        const char* args, const char* to_name, const char* ref_log, double rtol) {
    char cmd[8192], out[65536], log[1024], name[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s/r_%d && cp -r %s/%s %s/r_%d && cd %s/r_%d && rm -f model_00000010.bin state_00000010.bin && echo 5 > latest",
             dir, k, dir, from, dir, k, dir, k);
    if (system(cmd) != 0) { report(0, "resume setup", "%s", cmd); return; }
    snprintf(log, sizeof(log), "%s/res_%d.jsonl", dir, k);
    snprintf(cmd, sizeof(cmd), "timeout 300 " MPIRUN " -np %d ./train_gpt %s %s --resume %s/r_%d --log %s", np, common, args, dir, k, log);
    int rc = run_capture(cmd, out, sizeof(out));
    snprintf(name, sizeof(name), "resume %s -> %s: continues as the uninterrupted run (steps 6-10)", from_name, to_name);
    if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); return; }
    compare_losses(name, ref_log, 5, log, 5, rtol);
}

#endif // RUNS_COMMON_H
