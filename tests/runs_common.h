/*
tests/runs_common.h: what the tests that drive ./train_gpt in child processes share (tests/test_runs.c,
tests/test_tp_runs.c): test shards, reading the JSON logs, and comparing two runs' logs and model files with stated
tolerances. Include after train_gpt.c (TRAIN_GPT_NO_MAIN) and tests/testing.h, with `report` defined as `check`.
*/
#ifndef RUNS_COMMON_H
#define RUNS_COMMON_H

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

#endif // RUNS_COMMON_H
