/*
tests/test_runs.c: tests of the trainer through the real binary (./train_gpt, built first), as a user runs it:
bit-exact checkpoint resume, checkpoint corruption and housekeeping, bad input and absurd flags, the NaN policy,
the logged learning rate, sampling across a resume, and data parallel through mpirun (every ZeRO stage on 1, 2
and 3 ranks: losses, gradient norms, validation losses and final parameters against one process; checkpointing
runs against uninterrupted ones; resume across world sizes; failures).

    make tests/test_runs && ./tests/test_runs          all groups (mpirun groups skipped when mpirun is missing)
    ./tests/test_runs --only NAME                      the groups whose name contains NAME
                                                        (checkpoint, badinput, nan, schedule, sample, parallel)

It includes train_gpt.c (TRAIN_GPT_NO_MAIN) only for the file layouts (reading model files to compare parameters)
and the RNG that makes test shards; it is built without MPI and BLAS, since the runs happen in child processes.
Every comparison states its tolerance and why; the last line is "N passed, M failed".
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary

#define report check

static int name_selected(const char* only, const char* group) { return !only || strstr(group, only) != NULL; }

// ----------------------------------------------------------------------------
// Tests through the real binary: checkpoint resume and bad input.

// Runs a shell command, capturing stdout+stderr into out (truncated to cap); returns the exit status, or
// 128 + signal when it was killed by a signal.
static int run_capture(const char* cmd, char* out, size_t cap) {
    // This process is an MPI singleton: its OMPI_/PMIX_ variables would make a child mpirun (or a child singleton)
    // try to join this job, so the child shell drops them first.
    char full[14000];
    snprintf(full, sizeof(full), "unset $(env | sed -n 's/^\\(OMPI_[A-Za-z0-9_]*\\|PMIX_[A-Za-z0-9_]*\\|OPAL_[A-Za-z0-9_]*\\)=.*/\\1/p'); (%s) 2>&1", cmd);
    FILE* p = popen(full, "r");
    if (!p) { return -1; }
    size_t n = 0;
    int ch;
    while ((ch = fgetc(p)) != EOF) { if (n + 1 < cap) { out[n++] = (char)ch; } }
    out[n] = '\0';
    int st = pclose(p);
    if (WIFEXITED(st)) { return WEXITSTATUS(st); }
    if (WIFSIGNALED(st)) { return 128 + WTERMSIG(st); }
    return -1;
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

static const char* TMP = "/tmp/test_gpt_run";

static void test_checkpoint_resume(void) {
    char cmd[4096], out[65536];
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", TMP, TMP);
    if (system(cmd) != 0) { report(0, "checkpoint setup", "cannot make %s", TMP); return; }
    char shard[1024];
    snprintf(shard, sizeof(shard), "%s/train_000000.bin", TMP);
    write_shard(shard, 4000, 101, 7, 20240520, 1, 4000);
    const char* common = "--init tests/ref/ref_model.bin --batch-size 2 --seq-len 8 --lr 1e-3 --weight-decay 0.1 "
                         "--warmup 3 --lr-schedule cosine --threads 2";
    // A: 20 steps straight, checkpoint at 10
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --checkpoint-every 10 --out %s/ckpt --log %s/a.jsonl", common, shard, TMP, TMP);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "train 20 steps with a checkpoint at step 10", "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
    // B: resume from the step-10 checkpoint (remove the later one so 'latest' points at 10)
    snprintf(cmd, sizeof(cmd), "cd %s/ckpt && rm -f model_00000020.bin state_00000020.bin && echo 10 > latest", TMP);
    if (system(cmd) != 0) { report(0, "checkpoint rewind", "%s", ""); }
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --resume %s/ckpt --log %s/b.jsonl", common, shard, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "resume from the step-10 checkpoint", "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
    // C: resume once more from the same checkpoint: must equal B as well
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --resume %s/ckpt --log %s/c.jsonl", common, shard, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    char la[32][32], lb[32][32], lc[32][32];
    snprintf(cmd, sizeof(cmd), "%s/a.jsonl", TMP);
    int na = read_log_losses(cmd, la, 32);
    snprintf(cmd, sizeof(cmd), "%s/b.jsonl", TMP);
    int nb = read_log_losses(cmd, lb, 32);
    snprintf(cmd, sizeof(cmd), "%s/c.jsonl", TMP);
    int nc = read_log_losses(cmd, lc, 32);
    int same = na == 20 && nb == 10 && nc == 10;
    for (int i = 0; same && i < 10; i++) { same = strcmp(la[10 + i], lb[i]) == 0 && strcmp(lb[i], lc[i]) == 0; }
    report(same, "resumed losses equal the uninterrupted run bit for bit (steps 11-20)", "%d/%d/%d losses; step 11: %s vs %s; step 20: %s vs %s",
           na, nb, nc, na > 10 ? la[10] : "-", nb > 0 ? lb[0] : "-", na == 20 ? la[19] : "-", nb == 10 ? lb[9] : "-");
    int decreasing = na == 20 && atof(la[19]) < atof(la[0]);
    report(decreasing, "training lowers the loss", "step 1 %s, step 20 %s", na ? la[0] : "-", na == 20 ? la[19] : "-");
    // a corrupt checkpoint is refused with a clear message, and the previous files are untouched
    snprintf(cmd, sizeof(cmd), "cp %s/ckpt/state_00000010.bin %s/ckpt/state.bak && printf 'XXXX' | dd of=%s/ckpt/state_00000010.bin bs=1 seek=2000 conv=notrunc 2>/dev/null", TMP, TMP, TMP);
    if (system(cmd) != 0) { report(0, "corrupt setup", "%s", ""); }
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --train %s --steps 20 --resume %s/ckpt", common, shard, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 1 && strstr(out, "state_00000010.bin") && strstr(out, "corrupt"), "corrupt checkpoint state is refused naming the file", "exit %d: %.200s", rc, out);
}

typedef struct { const char* name; const char* args; const char* expect; } BadCase;

static void test_bad_input(void) {
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", TMP);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); return; }
    char p[16][1024];
    snprintf(p[0], 1024, "%s/train_000000.bin", TMP);
    write_shard(p[0], 4000, 101, 7, 20240520, 1, 4000);
    snprintf(p[1], 1024, "%s/short_000000.bin", TMP);
    write_shard(p[1], 10, 101, 7, 20240520, 1, 10);
    snprintf(p[2], 1024, "%s/badtok_000000.bin", TMP);
    write_shard(p[2], 4000, 200, 7, 20240520, 1, 4000); // ids up to 199 against V = 101
    snprintf(p[3], 1024, "%s/truncated_model.bin", TMP);
    snprintf(cmd, sizeof(cmd), "head -c 50000 tests/ref/ref_model.bin > %s", p[3]);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); }
    snprintf(p[4], 1024, "%s/magic_model.bin", TMP);
    snprintf(cmd, sizeof(cmd), "cp tests/ref/ref_model.bin %s && printf '\\x01\\x02\\x03\\x04' | dd of=%s bs=1 seek=0 conv=notrunc 2>/dev/null", p[4], p[4]);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); }
    snprintf(p[5], 1024, "%s/version_model.bin", TMP);
    snprintf(cmd, sizeof(cmd), "cp tests/ref/ref_model.bin %s && printf '\\x09\\x00\\x00\\x00' | dd of=%s bs=1 seek=4 conv=notrunc 2>/dev/null", p[5], p[5]);
    if (system(cmd) != 0) { report(0, "bad input setup", "%s", ""); }
    snprintf(p[6], 1024, "%s/badmagic_000000.bin", TMP);
    write_shard(p[6], 4000, 101, 7, 12345, 1, 4000);
    snprintf(p[7], 1024, "%s/badcount_000000.bin", TMP);
    write_shard(p[7], 4000, 101, 7, 20240520, 1, 5000);
    char args[16][4096];
    const char* base = "--batch-size 2 --seq-len 8 --steps 2";
    snprintf(args[0], 4096, "--init %s/missing.bin --train %s %s", TMP, p[0], base);
    snprintf(args[1], 4096, "--init %s --train %s %s", p[3], p[0], base);
    snprintf(args[2], 4096, "--init %s --train %s %s", p[4], p[0], base);
    snprintf(args[3], 4096, "--init %s --train %s %s", p[5], p[0], base);
    snprintf(args[4], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[1], base);
    snprintf(args[5], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[2], base);
    snprintf(args[6], 4096, "--init tests/ref/ref_model.bin --train %s --batch-size 2 --seq-len 32 --steps 2", p[0]);
    snprintf(args[7], 4096, "--init tests/ref/ref_model.bin --train %s --batch-size abc", p[0]);
    snprintf(args[8], 4096, "--init tests/ref/ref_model.bin --train %s --lr -5", p[0]);
    snprintf(args[9], 4096, "--init tests/ref/ref_model.bin --train %s --zero 7", p[0]);
    snprintf(args[10], 4096, "--init tests/ref/ref_model.bin --train %s --no-such-flag 1", p[0]);
    snprintf(args[11], 4096, "--init tests/ref/ref_model.bin --train %s/nothing_*.bin %s", TMP, base);
    snprintf(args[12], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[6], base);
    snprintf(args[13], 4096, "--init tests/ref/ref_model.bin --train %s %s", p[7], base);
    snprintf(args[14], 4096, "--init tests/ref/ref_model.bin --train %s %s --resume %s/nockpt", p[0], base, TMP);
    snprintf(args[15], 4096, "--model nonsense --train %s %s", p[0], base);
    BadCase cases[16] = {
        {"missing model file", args[0], "missing.bin"},
        {"truncated model file", args[1], "truncated_model.bin"},
        {"wrong model magic", args[2], "magic"},
        {"wrong model version", args[3], "version"},
        {"shard shorter than one batch", args[4], "short_000000.bin"},
        {"token id >= vocabulary size", args[5], "badtok_000000.bin"},
        {"sequence length above the context", args[6], "--seq-len"},
        {"non-numeric flag value", args[7], "--batch-size"},
        {"out-of-range flag value", args[8], "--lr"},
        {"out-of-range ZeRO stage", args[9], "--zero"},
        {"unknown flag", args[10], "--no-such-flag"},
        {"no shard matches the pattern", args[11], "nothing_"},
        {"wrong shard magic", args[12], "badmagic_000000.bin"},
        {"shard token count disagrees with its size", args[13], "badcount_000000.bin"},
        {"resume from a directory without a checkpoint", args[14], "nockpt"},
        {"unknown model name", args[15], "nonsense"},
    };
    for (int i = 0; i < 16; i++) {
        snprintf(cmd, sizeof(cmd), "./train_gpt %s --out %s/out_%d --log %s/log_%d.jsonl --checkpoint-every 1", cases[i].args, TMP, i, TMP, i);
        int rc = run_capture(cmd, out, sizeof(out));
        // exactly one clear error line naming the input, status 1 (not a crash), and no output files left behind
        int lines = 0;
        for (char* q = out; (q = strstr(q, "error:")) != NULL; q++) { lines++; }
        char path[1200];
        snprintf(path, sizeof(path), "%s/out_%d", TMP, i);
        int no_out = !file_exists(path);
        snprintf(path, sizeof(path), "%s/log_%d.jsonl", TMP, i);
        no_out = no_out && !file_exists(path);
        int ok = rc == 1 && lines == 1 && strstr(out, cases[i].expect) != NULL && no_out;
        char name[128];
        snprintf(name, sizeof(name), "bad input: %s", cases[i].name);
        char* nl = strchr(out, '\n');
        if (nl && ok) { *nl = '\0'; }
        report(ok, name, "exit %d, %d error line(s), outputs %s: %.240s", rc, lines, no_out ? "none" : "LEFT BEHIND", out);
    }
}

// ----------------------------------------------------------------------------
// Data parallel through mpirun (skipped when mpirun is missing). Tolerance for losses between layouts: 1e-5
// relative. The reduction is a sum over ranks of per-rank partial gradients, which in float32 can differ from the
// single process's accumulation order in the last bits; over 10 Adam steps such differences stay below 1e-6
// relative on this model (in practice the 2-rank sums come out bit-identical).

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x TRAIN_GPT_FAULT"

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

static void test_parallel(void) {
    char cmd[12288], out[65536];
    if (system("command -v mpirun > /dev/null 2>&1") != 0) { printf("SKIP parallel tests: mpirun not found\n"); return; }
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", TMP, TMP);
    if (system(cmd) != 0) { report(0, "parallel setup", "%s", ""); return; }
    char shard[1024];
    snprintf(shard, sizeof(shard), "%s/ptrain_000000.bin", TMP);
    write_shard(shard, 8000, 101, 11, 20240520, 1, 8000);
    char vshard[1024];
    snprintf(vshard, sizeof(vshard), "%s/pval_000000.bin", TMP);
    write_shard(vshard, 1000, 101, 12, 20240520, 1, 1000);
    // 96 tokens per step: 1 rank x 6 micro-steps, 2 ranks x 3, 3 ranks x 2 (B 2, T 8)
    char common[4096];
    snprintf(common, sizeof(common), "--init tests/ref/ref_model.bin --train %s --val %s --val-every 5 --val-steps 7 --batch-size 2 "
             "--seq-len 8 --total-batch-size 96 --lr 1e-3 --warmup 2 --weight-decay 0.1 --grad-clip 0.5 --threads 1", shard, vshard);
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        snprintf(cmd, sizeof(cmd), "./train_gpt %s --shuffle %d --steps 20 --log %s/p1_%d.jsonl", common, shuffle, TMP, shuffle);
        int rc = run_capture(cmd, out, sizeof(out));
        report(rc == 0, shuffle ? "single process, 20 steps (shuffled)" : "single process, 20 steps", "exit %d%s%.200s", rc, rc ? ": " : "", rc ? out : "");
    }
    char ref0[1024], ref1[1024], log[1024], name[256];
    snprintf(ref0, sizeof(ref0), "%s/p1_0.jsonl", TMP);
    snprintf(ref1, sizeof(ref1), "%s/p1_1.jsonl", TMP);
    // 2 ranks, each ZeRO stage, same tokens per step: same losses as one process, identical parameters on all ranks
    for (int z = 0; z <= 2; z++) {
        snprintf(log, sizeof(log), "%s/p2_z%d.jsonl", TMP, z);
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 2 ./train_gpt %s --steps 20 --zero %d --log %s", common, z, log);
        int rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "2 ranks --zero %d: parameters identical on all ranks", z);
        report(rc == 0 && strstr(out, "parameters after training: identical on all 2") != NULL, name, "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
        snprintf(name, sizeof(name), "2 ranks --zero %d: losses equal one process with gradient accumulation (20 steps)", z);
        compare_losses(name, ref0, 0, log, 20, 1e-5);
        snprintf(name, sizeof(name), "2 ranks --zero %d: validation losses (same batches whatever the ranks) equal one process", z);
        compare_values(name, "val_loss", ref0, log, 5, 1e-5);
    }
    // one process with sharded optimizer state (a group of one): stage 1 accumulates exactly as stage 0, so the
    // losses are bit-identical; stage 2 adds each micro-step's gradients to the running shard in another order
    // (per-thread LayerNorm partial sums, then the shard), so float32 rounding may differ in the last bits
    for (int z = 1; z <= 2; z++) {
        snprintf(log, sizeof(log), "%s/p1_z%d.jsonl", TMP, z);
        snprintf(cmd, sizeof(cmd), "./train_gpt %s --steps 20 --zero %d --log %s", common, z, log);
        int rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "1 process --zero %d: same losses as --zero 0", z);
        if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); continue; }
        compare_losses(name, ref0, 0, log, 20, z == 1 ? 0.0 : 1e-5);
    }
    // resume across world sizes: 2 ranks train with a checkpoint at step 10; 1 and 3 ranks continue from it to
    // step 20. The cases cover saving from every ZeRO stage and loading into every stage, in both data orders.
    const int cases[3][4] = { // shuffle, saving stage (2 ranks), loading stage on 1 rank, loading stage on 3 ranks
        {0, 1, 0, 2}, {1, 2, 1, 0}, {0, 0, 2, 1},
    };
    for (int k = 0; k < 3; k++) {
        int shuffle = cases[k][0];
        snprintf(cmd, sizeof(cmd), "rm -rf %s/pck && " MPIRUN " -np 2 ./train_gpt %s --shuffle %d --steps 20 --zero %d --checkpoint-every 10 --out %s/pck"
                 " && cd %s/pck && rm -f model_00000020.bin state_00000020.bin && echo 10 > latest", TMP, common, shuffle, cases[k][1], TMP, TMP);
        int rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "2 ranks (ZeRO-%d%s) write a checkpoint at step 10", cases[k][1], shuffle ? ", shuffled" : "");
        report(rc == 0, name, "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
        int sizes[2] = {1, 3};
        for (int j = 0; j < 2; j++) {
            snprintf(log, sizeof(log), "%s/pr_%d_%d.jsonl", TMP, sizes[j], k);
            snprintf(cmd, sizeof(cmd), MPIRUN " -np %d ./train_gpt %s --shuffle %d --steps 20 --zero %d --resume %s/pck --log %s",
                     sizes[j], common, shuffle, cases[k][2 + j], TMP, log);
            rc = run_capture(cmd, out, sizeof(out));
            snprintf(name, sizeof(name), "resume ZeRO-%d x 2 ranks -> ZeRO-%d x %d rank(s)%s: continues as the uninterrupted run (steps 11-20)",
                     cases[k][1], cases[k][2 + j], sizes[j], shuffle ? " (shuffled)" : "");
            if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); continue; }
            compare_losses(name, shuffle ? ref1 : ref0, 10, log, 10, 1e-5);
        }
    }
    // ranks that disagree on the configuration stop with a clear error naming the flag
    snprintf(cmd, sizeof(cmd), "timeout 60 mpirun --allow-run-as-root --oversubscribe -np 1 ./train_gpt %s --steps 2 --seed 1 : -np 1 ./train_gpt %s --steps 2 --seed 2", common, common);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc != 0 && rc != 124 && strstr(out, "configuration differs from rank 0: --seed=2 here, --seed=1 on rank 0") != NULL,
           "configuration mismatch between ranks is refused naming the flag", "exit %d: %.300s", rc, out);
    // a rank that dies, and a rank that hangs: the job ends with an error naming the rank, within the timeout
    snprintf(cmd, sizeof(cmd), "export TRAIN_GPT_FAULT=die:1:3; timeout 60 " MPIRUN " -np 2 ./train_gpt %s --steps 10 --comm-timeout 10", common);
    rc = run_capture(cmd, out, sizeof(out));
    char* tail = strstr(out, "injected fault");
    report(rc != 0 && rc != 124 && tail && strstr(tail, "rank 1 with PID") != NULL, "a killed rank ends the job with an error naming it",
           "exit %d: %.300s", rc, tail ? tail : out);
    snprintf(cmd, sizeof(cmd), "export TRAIN_GPT_FAULT=hang:1:3; timeout 60 " MPIRUN " -np 2 ./train_gpt %s --steps 10 --comm-timeout 5", common);
    rc = run_capture(cmd, out, sizeof(out));
    tail = strstr(out, "injected fault");
    report(rc != 0 && rc != 124 && tail && strstr(tail, "did not complete within 5 s") != NULL && strstr(tail, "rank(s) 1") != NULL,
           "a hung rank ends the job at the collective timeout naming it", "exit %d: %.400s", rc, tail ? tail : out);
}

// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
    const char* only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) { only = argv[++i]; }
        else { fatal("test_runs: unknown flag '%s' (--only NAME)", argv[i]); }
    }
    if (!file_exists("./train_gpt")) { fatal("test_runs: ./train_gpt is missing: run make first (from the repository root)"); }
    if (name_selected(only, "checkpoint")) { test_checkpoint_resume(); }
    if (name_selected(only, "badinput")) { test_bad_input(); }
    if (name_selected(only, "parallel")) { test_parallel(); }
    return test_summary();
}
