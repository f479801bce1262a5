/*
tests/runs_llmc.h: llm.c's command line, main.log, and llm.c's checkpoints both ways (--only llmc).
Split out of tests/test_runs.c by topic and included by it where this code stood: it uses the suite's helpers above
the include (TMP, report, run_capture, fresh_shard, the log readers of tests/runs_common.h) and the trainer's code
(train_gpt.c); not a standalone header.
*/
#ifndef RUNS_LLMC_H
#define RUNS_LLMC_H

// llm.c's command line (train_gpt2.cu's flags, README "Coming from llm.c"): llm.c's GPT-2 124M command
// (scripts/run_gpt2_124M.sh's flags, sizes scaled down, the model from a file) against the same run in long flags:
// losses and validation losses identical as text (the same run: nothing may differ); then -y 1 (re-running the same
// command) continues from its newest checkpoint bit for bit, and starts fresh where there is none. Then each flag
// that is not a plain alias: -r 2 is --recompute 1, -x -1 one epoch (4000 tokens make (4000 - 1) / 16 = 249 batches
// of 16 tokens, 2 to a step of -d 32: 124 steps), -a 1 trains on one batch (with -l 0 every step's loss is the
// first's; without -a they differ), -nk 1 -nm 3 keeps checkpoints 3 and 6 for good and the newest, -e d6 is llm.c's d6 shape, -h 1 reads llm.c's HellaSwag path
// (missing here: an error naming it and how to make it), -h alone is the help; -f, -ge, -lg print notes; -w 0 and
// llm.c's start-up without MPI are refused.
static void test_llmc_flags(void) {
    char cmd[8192], out[65536], tr[1024], va[1024];
    if (!fresh_shard("llm.c flags setup", "lc", "train_000000.bin", 4000, 7, tr, sizeof(tr))) { return; }
    snprintf(va, sizeof(va), "%s/lc/val_000000.bin", TMP);
    write_shard(va, 1000, 101, 8, 20240520, 1, 1000);
    char llmc[4096], longf[4096];
    snprintf(llmc, sizeof(llmc), "./train_gpt -i %s -j %s -o %s/lc/A -v 2 -s 0 -g 16 -h 0 -b 2 -t 8 -d 32 -r 0 -z 1 -c 0.1 -l 0.0006 "
             "-q 0.0 -u 2 -n 4 -y 1 -e tests/ref/ref_model.bin -x 8 -k cosine -nk 0 -sl 0 -sg 0 --threads 1 --log %s/lc/", tr, va, TMP, TMP);
    snprintf(longf, sizeof(longf), "./train_gpt --train %s --val %s --out %s/lc/B --val-every 2 --batch-size 2 --seq-len 8 "
             "--total-batch-size 32 --recompute 0 --zero 1 --weight-decay 0.1 --lr 0.0006 --final-lr-frac 0 --warmup 2 "
             "--checkpoint-every 4 --init tests/ref/ref_model.bin --steps 8 --lr-schedule cosine --keep-checkpoints 0 --threads 1 --log %s/lc/b.jsonl",
             tr, va, TMP, TMP);
    snprintf(cmd, sizeof(cmd), "%sa.jsonl", llmc);
    int rc1 = run_capture(cmd, out, sizeof(out));
    int fresh = strstr(out, "auto-resume: no checkpoint in --out yet: starting fresh") != NULL;
    int rc2 = run_capture(longf, out, sizeof(out));
    const char* keys[2] = {"loss", "val_loss"};
    int same = rc1 == 0 && rc2 == 0;
    char la[64][32], lb[64][32], a[1024], b[1024];
    snprintf(a, sizeof(a), "%s/lc/a.jsonl", TMP);
    snprintf(b, sizeof(b), "%s/lc/b.jsonl", TMP);
    for (int k = 0; k < 2 && same; k++) {
        int na = read_log_values(a, keys[k], la, 64), nb = read_log_values(b, keys[k], lb, 64);
        same = na == nb && na == (k == 0 ? 8 : 5);
        for (int i = 0; same && i < na; i++) { same = strcmp(la[i], lb[i]) == 0; }
    }
    report(same && fresh, "llm.c's 124M command line (scaled down) equals the long flags' run: losses and val losses identical",
           "exits %d %d, starting fresh %d: %.300s", rc1, rc2, fresh, out);
    // llm.c's main.log in -o: "s:N tel:X" before step N, "s:N trl:X lr:Y norm:Z" for step N (from 0), the values
    // those of the JSON log to llm.c's 4 decimals; DONE_XXXXXXXX beside each whole checkpoint
    char mlog[1024], line[256], want[256];
    snprintf(mlog, sizeof(mlog), "%s/lc/A/main.log", TMP);
    FILE* mf = fopen(mlog, "r");
    int lines = 0, good = mf != NULL, tl = 0, vl = 0;
    int na0 = read_log_values(a, "loss", la, 64), nv0 = read_log_values(a, "val_loss", lb, 64);
    while (good && fgets(line, sizeof(line), mf)) {
        int s = -1;
        double lr = 0, nrm = 0;
        float x = 0;
        if (sscanf(line, "s:%d trl:%f lr:%lf norm:%lf", &s, &x, &lr, &nrm) == 4) {
            snprintf(want, sizeof(want), "s:%d trl:%.4f ", tl, (float)atof(la[tl < na0 ? tl : 0]));
            good = s == tl && strncmp(line, want, strlen(want)) == 0;
            tl++;
        } else {
            snprintf(want, sizeof(want), "s:%d tel:%.4f\n", 2 * vl, (float)atof(lb[vl < nv0 ? vl : 0]));
            good = strcmp(line, want) == 0;
            vl++;
        }
        lines++;
    }
    if (mf) { fclose(mf); }
    snprintf(cmd, sizeof(cmd), "cp %s %s.first && ls %s/lc/A | grep DONE_ | tr '\\n' ' '", mlog, mlog, TMP);
    int rc = run_capture(cmd, out, sizeof(out));
    report(good && tl == 8 && vl == 5 && na0 == 8 && nv0 == 5 && rc == 0 && strcmp(out, "DONE_00000004 DONE_00000008 ") == 0,
           "llm.c's main.log in -o: 5 'tel' and 8 'trl' lines in its format, the JSON log's values; DONE_ at steps 4 and 8",
           "%d lines, %d trl, %d tel, at '%.80s' (wanted '%.80s'); DONE files: %.100s", lines, tl, vl, line, want, out);
    // -y 1 again after rewinding the checkpoint to step 4: continues, steps 5-8 as before
    snprintf(cmd, sizeof(cmd), "echo 4 > %s/lc/A/latest && %sc.jsonl", TMP, llmc);
    rc = run_capture(cmd, out, sizeof(out));
    int cont = strstr(out, "auto-resume: continuing from the newest checkpoint") != NULL;
    snprintf(b, sizeof(b), "%s/lc/c.jsonl", TMP);
    int na = read_log_values(a, "loss", la, 64), nc = read_log_values(b, "loss", lb, 64);
    same = rc == 0 && cont && na == 8 && nc == 4;
    for (int i = 0; same && i < 4; i++) { same = strcmp(la[4 + i], lb[i]) == 0; }
    report(same, "llm.c's -y 1 run again continues from the newest checkpoint in -o: steps 5-8 bit for bit", "exit %d, %d and %d losses: %.300s", rc, na, nc, out);
    // the resumed run's main.log: what the first run wrote up to step 4, then steps 4-7 again, each once
    snprintf(cmd, sizeof(cmd), "cmp %s %s.first", mlog, mlog);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "llm.c's main.log after -y 1 from step 4 is the uninterrupted run's, line for line (the lines after step 4 replaced, not repeated)",
           "cmp exit %d: %.300s", rc, out);
    // the flags that are not plain aliases
    char base[2048];
    snprintf(base, sizeof(base), "./train_gpt -i %s -b 2 -t 8 -e tests/ref/ref_model.bin --threads 1", tr);
    snprintf(cmd, sizeof(cmd), "%s -x 1 -r 2 --log %s/lc/r.jsonl && grep -c '\"recompute\": 1,' %s/lc/r.jsonl", base, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "llm.c's -r 2 (GELU and LayerNorm) runs --recompute 1", "exit %d: %.300s", rc, out);
    snprintf(cmd, sizeof(cmd), "%s -x -1 -d 32", base);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "one epoch of the training data is 124 optimizer steps") && strstr(out, "step   124/124"),
           "llm.c's -x -1 trains one epoch (249 batches of 16 tokens in 4000, 2 per step: 124 steps)", "exit %d: %.300s", rc, out);
    double l[2][8] = {{0}}; // the losses with -a 0 and -a 1
    int nl[2] = {0, 0};
    for (int ov = 0; ov <= 1; ov++) {
        snprintf(cmd, sizeof(cmd), "%s -x 4 -l 0 -a %d --log %s/lc/ov%d.jsonl", base, ov, TMP, ov);
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(a, sizeof(a), "%s/lc/ov%d.jsonl", TMP, ov);
        nl[ov] = rc == 0 ? read_log_values(a, "loss", la, 8) : 0;
        for (int i = 0; i < nl[ov]; i++) { l[ov][i] = atof(la[i]); }
    }
    int one = nl[1] == 4 && nl[0] == 4 && l[1][1] == l[1][0] && l[1][3] == l[1][0] && l[0][1] != l[0][0];
    report(one, "llm.c's -a 1: every step trains on the same batch (learning rate 0: the same loss each step; without -a not)",
           "%d and %d losses; -a 1: %g %g %g %g; -a 0: %g %g", nl[1], nl[0], l[1][0], l[1][1], l[1][2], l[1][3], l[0][0], l[0][1]);
    snprintf(cmd, sizeof(cmd), "%s -x 7 -n 1 -nk 1 -nm 3 -o %s/lc/M > /dev/null && ls %s/lc/M | tr '\\n' ' '", base, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strcmp(out, "DONE_00000003 DONE_00000006 DONE_00000007 latest main.log model_00000003.bin model_00000006.bin model_00000007.bin "
                                  "state_00000003.bin state_00000006.bin state_00000007.bin ") == 0,
           "llm.c's -nk 1 -nm 3: the newest checkpoint and those at multiples of 3 stay, each with its DONE_ marker", "exit %d: %.300s", rc, out);
    // -o without -n is llm.c's log directory: main.log and no checkpoint; writing it leaves the run unchanged (the
    // losses equal, as text, those of the same run without -o), in one process and in two (ZeRO-1; rank 0 writes)
    for (int np = 1; np <= 2; np++) {
        if (np == 2 && system("command -v mpirun > /dev/null 2>&1") != 0) { break; }
        char launch[256] = "", lg[2][600];
        if (np == 2) { snprintf(launch, sizeof(launch), "timeout 300 %s -np 2 ", MPIRUN); }
        for (int o = 0; o < 2; o++) { snprintf(lg[o], sizeof(lg[o]), "%s/lc/L%d_%d.jsonl", TMP, np, o); }
        snprintf(cmd, sizeof(cmd), "rm -rf %s/lc/L && %s%s -x 3 -z 1 --log %s -o %s/lc/L > /dev/null && %s%s -x 3 -z 1 --log %s > /dev/null && "
                 "ls %s/lc/L | tr '\\n' ' ' && grep -c trl: %s/lc/L/main.log", TMP, launch, base, lg[1], TMP, launch, base, lg[0], TMP, TMP);
        rc = run_capture(cmd, out, sizeof(out));
        char lo[2][8][32];
        int n1 = read_log_values(lg[1], "loss", lo[1], 8), n0 = read_log_values(lg[0], "loss", lo[0], 8), eq = n1 == 3 && n0 == 3;
        for (int i = 0; eq && i < 3; i++) { eq = strcmp(lo[0][i], lo[1][i]) == 0; }
        char name[200];
        snprintf(name, sizeof(name), "llm.c's -o without -n writes main.log only (3 training lines), no checkpoint, and the run (%d process%s) "
                 "is the one without -o", np, np > 1 ? "es" : "");
        report(rc == 0 && strstr(out, "main.log 3\n") && eq, name, "exit %d, %d and %d losses: %.300s", rc, n1, n0, out);
    }
    snprintf(cmd, sizeof(cmd), "./train_gpt -i %s -b 2 -t 8 -e d6 -x 0 --threads 1", tr);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "L 6, C 384, NH 6, maxT 1024, V 50257"), "llm.c's -e d6 builds its d6 shape (no file of that name)", "exit %d: %.300s", rc, out);
    snprintf(cmd, sizeof(cmd), "%s -x 2 -v 1 -j %s -h 1", base, va);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 1 && strstr(out, "dev/data/hellaswag/hellaswag_val.bin") && strstr(out, "prepare_hellaswag.sh"),
           "llm.c's -h 1 reads its HellaSwag path; missing, an error names it and how to make it", "exit %d: %.300s", rc, out);
    snprintf(cmd, sizeof(cmd), "%s -x 2 -h 1", base);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 1 && strstr(out, "it needs -v N"), "llm.c's -h 1 without -v is refused (it evaluates at the validation steps)", "exit %d: %.300s", rc, out);
    rc = run_capture("./train_gpt -h", out, sizeof(out));
    report(rc == 0 && strstr(out, "usage: train_gpt"), "-h alone is the help", "exit %d: %.200s", rc, out);
    snprintf(cmd, sizeof(cmd), "%s -x 1 -f 1 -ge 2 -lg 5 -w 1 -pi mpi", base);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "note: --tf32 1 changes nothing in this build") && strstr(out, "note: -ge 2") && strstr(out, "note: -lg 5"),
           "llm.c's -f (--tf32), -ge, -lg, -w 1, -pi mpi are accepted, with a note for each that changes nothing on the CPU",
           "exit %d: %.300s", rc, out);
    snprintf(cmd, sizeof(cmd), "%s -x 1 --deterministic 0", base);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "note: --deterministic 0 changes nothing in this build: its kernels are all deterministic"),
           "--deterministic 0 is accepted on the CPU, with a note that every CPU kernel is deterministic", "exit %d: %.300s", rc, out);
    rc = run_capture("./train_gpt --init tests/ref/ref_model.bin --generate 1 --gen-tokens 2 --seq-len 8 --cuda-graphs 0", out, sizeof(out));
    report(rc == 0 && strstr(out, "note: --cuda-graphs 0 changes nothing in this build: the CPU launches no kernels"),
           "--cuda-graphs 0 is accepted on the CPU, with a note that it has no graphs", "exit %d: %.300s", rc, out);
    // --bench's summary names the model it timed: the --init file, or the --resume checkpoint's directory (not
    // --model's default)
    rc = run_capture("./train_gpt --init tests/ref/ref_model.bin --bench 1 --bench-steps 1 --batch-size 2 --seq-len 8 --threads 1", out, sizeof(out));
    report(rc == 0 && strstr(out, "bench: tests/ref/ref_model.bin, B 2, T 8,"), "--bench 1 --init FILE: the summary names the file",
           "exit %d: %.300s", rc, out);
    // --bench's figures agree with one another and with the FLOPs per token, which the GPU check turns into MFU: the
    // reference model (N = 30,080 parameters, L 2, C 32) at T 8 does 6 N + 12 L C T = 186,624 FLOPs per token, and a
    // step of 2048 tokens (128 micro-steps of 2 x 8, long enough that the printed rounding of ms/step stays below
    // 1%). Tolerances: 3% for tokens/s x ms/step against the batch (ms has one decimal), 1% for GFLOP/s against
    // tokens/s x FLOPs (the printed rounding only)
    rc = run_capture("./train_gpt --init tests/ref/ref_model.bin --bench 1 --bench-steps 3 --batch-size 2 --seq-len 8 "
                     "--total-batch-size 2048 --threads 1", out, sizeof(out));
    {
        double ms = 0, tps = 0, gfs = 0;
        const char* figs = strstr(out, "\nbench: ");
        while (figs && sscanf(figs + 1, "bench: %lf ms/step | %lf tokens/s | %lf GFLOP/s", &ms, &tps, &gfs) != 3) { figs = strstr(figs + 1, "\nbench: "); }
        int ok = rc == 0 && figs && ms > 0 && tps > 0 && fabs(tps * ms / 1e3 / 2048.0 - 1.0) < 0.03 && fabs(gfs * 1e9 / (tps * 186624.0) - 1.0) < 0.01;
        report(ok, "--bench: tokens/s x ms/step is the step's 2048 tokens, and GFLOP/s is tokens/s x 186,624 FLOPs per token",
               "exit %d: %.1f ms/step, %.0f tokens/s, %.1f GFLOP/s%s%.300s", rc, ms, tps, gfs, figs ? "" : ": no figures line: ", figs ? "" : out);
        // the step's parts add up to it: forward + (LM head + backward) + (optimizer and the rest) = ms/step, within
        // the four printed roundings (0.05 ms each)
        double fwd = -1, bwd = -1, rest = -1;
        const char* parts = strstr(out, "bench: per step: forward ");
        int have = parts && sscanf(parts, "bench: per step: forward %lf ms, LM head + backward %lf ms, optimizer and the rest %lf ms",
                                   &fwd, &bwd, &rest) == 3;
        report(rc == 0 && figs && have && fwd > 0 && bwd > 0 && rest >= 0 && fabs(fwd + bwd + rest - ms) <= 0.2,
               "--bench: the step's parts (forward, LM head + backward, optimizer and the rest) add up to its ms/step",
               "exit %d: %.1f + %.1f + %.1f ms against %.1f ms/step%s", rc, fwd, bwd, rest, ms, have ? "" : " (no parts line)");
    }
    snprintf(cmd, sizeof(cmd), "./train_gpt --resume %s/lc/B --bench 1 --bench-steps 1 --batch-size 2 --seq-len 8 --threads 1", TMP);
    rc = run_capture(cmd, out, sizeof(out));
    snprintf(want, sizeof(want), "bench: %s/lc/B, B 2, T 8,", TMP);
    report(rc == 0 && strstr(out, want), "--bench 1 --resume DIR: the summary names the checkpoint's directory", "exit %d: %.300s", rc, out);
    const char* refused[][2] = {{"-n 1 -o DIR --llmc-checkpoints 1 --dtype bf16 -w 0", "which --master-weights 0 does not keep"}, {"-pi tcp", "without MPI (tcp, fs) is not supported"},
                                {"-pn 2", "mpirun gives every process its rank"}, {"-y 1", "resumes from --out DIR"},
                                {"--llmc-checkpoints 1", "it needs --checkpoint-every N"},
                                {"-n 1 -o DIR --llmc-checkpoints 1 --shuffle 1", "no equivalent of the sampler"},
                                {"-n 1 -o DIR --llmc-checkpoints 1 --dtype fp16", "does not resume fp16 runs"},
                                {"-n 1 -o DIR --llmc-checkpoints 1 --tp 2", "no tensor or pipeline parallelism"}};
    for (int k = 0; k < 8; k++) {
        const char* dir = strstr(refused[k][0], "DIR"); // (DIR: an output directory in the scratch directory)
        snprintf(cmd, sizeof(cmd), "%s -x 1 %.*s%s%s%s", base, dir ? (int)(dir - refused[k][0]) : (int)strlen(refused[k][0]),
                 refused[k][0], dir ? TMP : "", dir ? "/lc/X" : "", dir ? dir + 3 : "");
        rc = run_capture(cmd, out, sizeof(out));
        char name[200];
        snprintf(name, sizeof(name), "'%s' is refused with its reason", refused[k][0]);
        report(rc == 1 && strstr(out, refused[k][1]), name, "exit %d: %.300s", rc, out);
    }
}

// Writes llm.c's checkpoint of `step` into dst (its model file, one state_S_RRRRR.bin per process of N, DONE_S) from
// ours in src, as llm.c's train_gpt2.cu writes one: written here from llm.c's save_state and gpt2_update, apart
// from llmc_state.h's reader. Our state holds m, v (and master weights) in our layout, each layer's tensors
// together; llm.c's flat order stacks each of the 16 kinds over the layers, and under ZeRO-1 (zero 1) process r
// keeps, kind after kind and layer after layer, the r-th N-th of each layer's tensor. shuffle 1 appends a data
// loader section (permutations and a 2520-byte mt19937 state; its contents are not read); the data position is
// (shard, sample). Returns 0 on success.
static int write_llmc_checkpoint(const char* src, int step, const char* dst, int N, int zero, int shuffle, size_t shard, size_t sample) {
    char path[8192];
    snprintf(path, sizeof(path), "mkdir -p %s && cp %s/model_%08d.bin %s/ && touch %s/DONE_%08d", dst, src, step, dst, dst, step);
    if (system(path) != 0) { return -1; }
    snprintf(path, sizeof(path), "%s/model_%08d.bin", src, step);
    FILE* f = fopen(path, "rb");
    int32_t mh[256];
    if (!f || fread(mh, 4, 256, f) != 256) { if (f) { fclose(f); } return -1; }
    fclose(f);
    size_t maxT = (size_t)mh[2], L = (size_t)mh[4], C = (size_t)mh[6], Vp = (size_t)mh[7];
    size_t ks[16] = {Vp * C, maxT * C, C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C, C, C};
    size_t per_layer = 0, n = 0;
    for (int k = 2; k <= 13; k++) { per_layer += ks[k]; }
    for (int k = 0; k < 16; k++) { n += ks[k] * (k >= 2 && k <= 13 ? L : 1); }
    snprintf(path, sizeof(path), "%s/state_%08d.bin", src, step);
    f = fopen(path, "rb");
    if (!f) { return -1; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    int vecs = (int)((size - 512) / (4 * (long)n)); // 2, or 3 with master weights
    float* ours = (float*)malloc(4 * n * (size_t)vecs);
    fseek(f, 512, SEEK_SET);
    size_t got = fread(ours, 4, n * (size_t)vecs, f);
    fclose(f);
    if (got != n * (size_t)vecs || (vecs != 2 && vecs != 3)) { free(ours); return -1; }
    for (int r = 0; r < N; r++) {
        snprintf(path, sizeof(path), "%s/state_%08d_%05d.bin", dst, step, r);
        f = fopen(path, "wb");
        int32_t h[256] = {0};
        h[0] = 20240527; h[1] = 1; h[2] = N; h[3] = r; h[4] = vecs == 3; h[5] = shuffle; h[10] = step;
        size_t pos[2] = {shard, sample};
        memcpy(&h[30], pos, sizeof(pos));
        fwrite(h, 4, 256, f);
        for (int v = 0; v < vecs; v++) {
            const float* vec = ours + (size_t)v * n;
            for (int k = 0; k < 16; k++) {
                int layered = k >= 2 && k <= 13;
                size_t in_layer = 0; // offset of kind k inside one of our layers
                for (int j = 2; j < k && layered; j++) { in_layer += ks[j]; }
                for (size_t l = 0; l < (layered ? L : 1); l++) {
                    size_t at = k == 0 ? 0 : k == 1 ? Vp * C : layered ? Vp * C + maxT * C + l * per_layer + in_layer
                                                                       : Vp * C + maxT * C + L * per_layer + (size_t)(k - 14) * C;
                    size_t piece = zero ? ks[k] / (size_t)N : ks[k];
                    fwrite(vec + at + (zero ? (size_t)r * piece : 0), 4, piece, f);
                }
            }
        }
        if (shuffle) {
            size_t cnt = 1;
            int32_t idx[3] = {0, 2, 1};
            char mt[2520] = {0};
            fwrite(&cnt, sizeof(cnt), 1, f); fwrite(idx, 4, 1, f);
            cnt = 3;
            fwrite(&cnt, sizeof(cnt), 1, f); fwrite(idx, 4, 3, f);
            fwrite(mt, 1, sizeof(mt), f);
        }
        fclose(f);
    }
    free(ours);
    return 0;
}

// An llm.c run continues here: our run of 8 steps writes a checkpoint at 4; llm.c's checkpoint of that step is made
// from it (write_llmc_checkpoint), and -y 1 on that directory converts it and trains steps 5-8 with the same losses as
// ours, bit for bit: the moments, master weights and update count come over, and the data position follows from the
// step, replayed in llm.c's own order and checked against the position llm.c's state records. Two cases: as llm.c's
// GPT-2 runs, bf16 with master weights, 2 processes (mpirun) under ZeRO-1, llm.c's shuffled order (--shuffle 2;
// 4 steps of one group of 2 x 2 x 8 tokens per rank: group 4 of the one shard); and fp32, one process without ZeRO,
// unshuffled (--shuffle 0: 8 calls of 16 tokens, group 8). A position that disagrees is warned about. llm.c's files
// are left as they were, and pruning keeps them. Damaged llm.c checkpoints are refused naming the file.
static void test_llmc_import(void) {
    char cmd[8192], out[65536], tr[1024];
    if (!fresh_shard("llm.c import setup", "li", "train_000000.bin", 4000, 11, tr, sizeof(tr))) { return; }
    int have_mpi = system("command -v mpirun > /dev/null 2>&1") == 0;
    struct { const char* dtype; int N, zero, shuffle; size_t group; } cases[2] = {{"bf16", 2, 1, 2, 4}, {"fp32", 1, 0, 0, 8}};
    for (int k = have_mpi ? 0 : 1; k < 2; k++) {
        char common[2048], a[512], b[512], src[512], dst[512];
        snprintf(common, sizeof(common), "%s./train_gpt -e tests/ref/ref_model.bin -i %s -b 2 -t 8 -d 32 -x 8 -n 4 --threads 1 "
                 "--dtype %s --shuffle %d -z %d", cases[k].N > 1 ? "timeout 300 " MPIRUN " -np 2 " : "", tr, cases[k].dtype,
                 cases[k].shuffle, cases[k].zero);
        snprintf(src, sizeof(src), "%s/li/ours%d", TMP, k);
        snprintf(dst, sizeof(dst), "%s/li/llmc%d", TMP, k);
        snprintf(a, sizeof(a), "%s/li/a%d.jsonl", TMP, k);
        snprintf(b, sizeof(b), "%s/li/b%d.jsonl", TMP, k);
        snprintf(cmd, sizeof(cmd), "%s -nk 0 -o %s --log %s", common, src, a);
        int rc = run_capture(cmd, out, sizeof(out));
        if (rc != 0 || write_llmc_checkpoint(src, 4, dst, cases[k].N, cases[k].zero, cases[k].shuffle != 0, 0, cases[k].group) != 0) {
            report(0, "llm.c import setup", "exit %d: %.300s", rc, out);
            return;
        }
        if (strcmp(cases[k].dtype, "bf16") == 0) {
            // llm.c's bf16 build writes its model file in bf16 (version 5), from which the import takes the run's dtype:
            // our compute copy is bf16 already, so the export is exact
            snprintf(cmd, sizeof(cmd), "./train_gpt --init %s/model_00000004.bin --export-llmc %s/model_00000004.bin --dtype bf16", src, dst);
            rc = run_capture(cmd, out, sizeof(out));
            if (rc != 0) { report(0, "llm.c import setup (a version-5 model file)", "exit %d: %.300s", rc, out); return; }
        }
        // an older llm.c checkpoint beside it (step 2, whose files are copies of step 4's): its model file has no state
        // of ours beside it, and pruning must leave it alone all the same
        snprintf(cmd, sizeof(cmd), "cd %s && cp model_00000004.bin model_00000002.bin && for f in state_00000004_*; do cp $f state_00000002_${f#state_00000004_}; done "
                 "&& touch DONE_00000002", dst);
        if (system(cmd) != 0) { report(0, "llm.c import setup (older checkpoint)", "%s", cmd); return; }
        snprintf(cmd, sizeof(cmd), "cp -r %s %s.orig && %s -nk 1 -o %s -y 1 --log %s", dst, dst, common, dst, b);
        rc = run_capture(cmd, out, sizeof(out));
        int converted = strstr(out, "holds llm.c's checkpoint of step 4") != NULL;
        char at[128];
        snprintf(at, sizeof(at), "replayed to step 4 reaches shard 0, group %zu, as llm.c's state records", cases[k].group);
        int data = strstr(out, at) != NULL;
        char la[16][32], lb[16][32];
        int na = read_log_values(a, "loss", la, 16), nb = read_log_values(b, "loss", lb, 16);
        // (llm.c's states record no settings, and not the sequence length: nothing to note with the same flags)
        int same = rc == 0 && converted && data && na == 8 && nb == 4 && !strstr(out, "note: --resume");
        for (int i = 0; same && i < 4; i++) { same = strcmp(la[4 + i], lb[i]) == 0; }
        char name[300];
        snprintf(name, sizeof(name), "llm.c's checkpoint (%s, %d process%s, ZeRO-%d, %s order) continues here with -y 1 at llm.c's data position: "
                 "steps 5-8 equal the uninterrupted run's bit for bit", cases[k].dtype, cases[k].N, cases[k].N > 1 ? "es" : "",
                 cases[k].zero, cases[k].shuffle ? "shuffled" : "sequential");
        const char* note = strstr(out, "note: --resume");
        report(same, name, "exit %d, converted %d, data %d, %d and %d losses (step 5: %s vs %s)%s: %.400s", rc, converted, data, na, nb,
               na > 4 ? la[4] : "-", nb > 0 ? lb[0] : "-", note ? ", a settings note" : "", note ? note : out);
        // llm.c's files are as they were (the model, the state files, DONE_4), beside ours (-nk 1 pruned ours at 4)
        snprintf(cmd, sizeof(cmd), "for f in $(ls %s.orig); do cmp %s.orig/$f %s/$f || exit 1; done; ls %s | tr '\\n' ' '", dst, dst, dst, dst);
        rc = run_capture(cmd, out, sizeof(out));
        report(rc == 0 && strstr(out, "state_00000008.bin") && !strstr(out, "state_00000004.bin ") && strstr(out, "DONE_00000008"),
               "after the import and -nk 1, llm.c's files (checkpoints 2 and 4) are unchanged; our state at 4 was pruned, the checkpoint at 8 is ours",
               "exit %d: %.300s", rc, out);
    }
    // an imported checkpoint is an ordinary state of ours: the fp32 one (llm.c's layout: 1 process, no ZeRO) resumes
    // under tensor parallelism (2 ranks, --tp 2; the data-parallel size, and so the unshuffled order, stays 1),
    // steps 5-8 within the tensor-parallel tolerance of the uninterrupted run's (1e-5 relative, tests/test_tp_runs)
    if (have_mpi) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s/li/tp && cp -r %s/li/llmc1.orig %s/li/tp && timeout 300 " MPIRUN " -np 2 ./train_gpt -e tests/ref/ref_model.bin "
                 "-i %s -b 2 -t 8 -d 32 -x 8 -n 4 --threads 1 --dtype fp32 --shuffle 0 --tp 2 -o %s/li/tp -y 1 --log %s/li/tp.jsonl", TMP, TMP, TMP, tr, TMP, TMP);
        int rct = run_capture(cmd, out, sizeof(out));
        char la[16][32], lb[16][32], a[600], b[600];
        snprintf(a, sizeof(a), "%s/li/a1.jsonl", TMP);
        snprintf(b, sizeof(b), "%s/li/tp.jsonl", TMP);
        int na = read_log_values(a, "loss", la, 16), nb = read_log_values(b, "loss", lb, 16);
        double worst = na == 8 && nb == 4 ? 0.0 : 1.0;
        for (int i = 0; i < 4 && na == 8 && nb == 4; i++) { worst = fmax(worst, fabs(atof(la[4 + i]) - atof(lb[i])) / fabs(atof(la[4 + i]))); }
        report(rct == 0 && worst <= 1e-5 && strstr(out, "holds llm.c's checkpoint of step 4") && strstr(out, "as llm.c's state records"),
               "llm.c's checkpoint continues under --tp 2 (2 ranks): steps 5-8 within 1e-5 of the uninterrupted run's, at llm.c's data position",
               "exit %d, %d and %d losses, worst relative difference %.3g: %.400s", rct, na, nb, worst, out);
    }
    // llm.c continued the run after us: its own checkpoint at 8 is newer than our `latest` (4), and -y 1 takes it
    if (cases[1].N == 1) {
        char m[512];
        snprintf(m, sizeof(m), "%s/li/newer", TMP);
        snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s && cp %s/li/ours1/model_00000004.bin %s/li/ours1/state_00000004.bin %s/ && echo 4 > %s/latest",
                 m, m, TMP, TMP, m, m);
        char o1[512];
        snprintf(o1, sizeof(o1), "%s/li/ours1", TMP);
        int rcs = system(cmd) == 0 && write_llmc_checkpoint(o1, 8, m, 1, 0, 0, 0, 16) == 0;
        snprintf(cmd, sizeof(cmd), "./train_gpt -e tests/ref/ref_model.bin -i %s -b 2 -t 8 -d 32 -x 10 -n 4 --threads 1 --dtype fp32 -o %s -y 1 && cat %s/latest", tr, m, m);
        int rcn = rcs ? run_capture(cmd, out, sizeof(out)) : -1;
        report(rcn == 0 && strstr(out, "holds llm.c's checkpoint of step 8") && strstr(out, "step     9/10") && strstr(out, "\n10\n"),
               "-y 1 takes llm.c's own checkpoint when it is newer than our latest (llm.c continued the run): steps 9-10 from its step 8",
               "exit %d: %.400s", rcn, out);
    }
    // llm.c's position disagrees with the replay (as if its run had another batch): a warning, and training goes on
    char osrc[512], odst[512];
    snprintf(osrc, sizeof(osrc), "%s/li/ours1", TMP);
    snprintf(odst, sizeof(odst), "%s/li/off", TMP);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", odst);
    if (system(cmd) != 0 || write_llmc_checkpoint(osrc, 4, odst, 1, 0, 0, 0, 5) != 0) { report(0, "llm.c import: position setup", "%s", cmd); return; }
    snprintf(cmd, sizeof(cmd), "./train_gpt -e tests/ref/ref_model.bin -i %s -b 2 -t 8 -d 32 -x 6 -n 4 --threads 1 --dtype fp32 -o %s/li/off -y 1", tr, TMP);
    int rc0 = run_capture(cmd, out, sizeof(out));
    report(rc0 == 0 && strstr(out, "warning: llm.c's unshuffled order (--shuffle 0) replayed to step 4 reaches shard 0, group 8, but llm.c's state records shard 0, group 5"),
           "llm.c's recorded data position differing from the replay is warned about, naming both", "exit %d: %.400s", rc0, out);
    // an llm.c run had no batch ramp: continuing one with a ramp is refused (its data position is llm.c's whole batches)
    snprintf(odst, sizeof(odst), "%s/li/offramp", TMP);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", odst);
    if (system(cmd) != 0 || write_llmc_checkpoint(osrc, 4, odst, 1, 0, 0, 0, 8) != 0) { report(0, "llm.c import: ramp setup", "%s", cmd); return; }
    snprintf(cmd, sizeof(cmd), "./train_gpt -e tests/ref/ref_model.bin -i %s -b 2 -t 8 -d 32 -x 6 -n 4 --threads 1 --dtype fp32 -o %s -y 1 "
             "--batch-ramp-start 16 --batch-ramp-tokens 32", tr, odst);
    rc0 = run_capture(cmd, out, sizeof(out));
    report(rc0 == 1 && strstr(out, "an llm.c run's checkpoint continues with llm.c's whole batches, not a batch ramp (--batch-ramp-start 16)"),
           "an llm.c run continued with a batch ramp is refused, naming the ramp", "exit %d: %.400s", rc0, out);
    // the other way: --llmc-checkpoints 1 writes llm.c's state files beside each checkpoint: as above, bf16 with 2
    // processes under ZeRO-1 in llm.c's shuffled order, and fp32 in one process without ZeRO, unshuffled. Their m and v
    // (and a bf16 run's master weights) equal, byte for byte, what write_llmc_checkpoint makes of the same checkpoint;
    // an fp32 run's master weights are its parameters, the model file's payload (llm.c keeps master weights by default
    // and refuses a state without them). With our state removed the directory is an llm.c run's, and -y 1 continues it
    // here at llm.c's data position, bit for bit; -nk 1 prunes llm.c's files with their checkpoint.
    for (int k = have_mpi ? 0 : 1; k < 2; k++) {
        char e[512], w[512], f[512], common[2048];
        snprintf(e, sizeof(e), "%s/li/export%d", TMP, k);
        snprintf(w, sizeof(w), "%s/li/export_writer%d", TMP, k);
        snprintf(f, sizeof(f), "%s/li/export_llmc%d", TMP, k);
        snprintf(common, sizeof(common), "%s./train_gpt -e tests/ref/ref_model.bin -i %s -b 2 -t 8 -d 32 -x 8 -n 4 --threads 1 --dtype %s "
                 "--shuffle %d -z %d", k == 0 ? "timeout 300 " MPIRUN " -np 2 " : "", tr, cases[k].dtype, cases[k].shuffle, cases[k].zero);
        snprintf(cmd, sizeof(cmd), "rm -rf %s %s %s && %s --llmc-checkpoints 1 -nk 0 -o %s --log %s/li/e%d.jsonl", e, w, f, common, e, TMP, k);
        int rc = run_capture(cmd, out, sizeof(out));
        char want[200];
        snprintf(want, sizeof(want), "llm.c's state files for %d process%s written beside it (llm.c's %s build continues it with -y 1 -z %d", cases[k].N,
                 cases[k].N > 1 ? "es" : "", cases[k].dtype, cases[k].zero);
        int wrote = rc == 0 && strstr(out, want);
        int ok = wrote && write_llmc_checkpoint(e, 4, w, cases[k].N, cases[k].zero, 0, 0, 0) == 0;
        for (int r = 0; r < cases[k].N && ok; r++) {
            char a[1024], b[1024];
            snprintf(a, sizeof(a), "%s/state_00000004_%05d.bin", e, r);
            snprintf(b, sizeof(b), "%s/state_00000004_%05d.bin", w, r);
            long long vec = file_size(b) - 1024;
            snprintf(cmd, sizeof(cmd), "cmp -i 1024 -n %lld %s %s", vec, a, b);
            ok = vec > 0 && system(cmd) == 0;
            if (ok && k == 1) { // fp32: the third vector is the model file's payload
                snprintf(cmd, sizeof(cmd), "cmp -i %lld:1024 -n %lld %s %s/model_00000004.bin", 1024 + vec, vec / 2, a, e);
                ok = system(cmd) == 0 && file_size(a) == 1024 + vec + vec / 2;
            }
        }
        char name[300];
        snprintf(name, sizeof(name), "--llmc-checkpoints 1 (%s, %d process%s) writes llm.c's state files: m, v and master weights as llm.c lays them out (ZeRO-%d)",
                 cases[k].dtype, cases[k].N, cases[k].N > 1 ? "es" : "", cases[k].zero);
        report(ok, name, "exit %d, wrote %d: %.300s", rc, wrote, out);
        // writing them changes nothing: the run's losses equal, as text, the same run's without (the import's run A)
        char le[16][32], la0[16][32], ea[600], aa[600];
        snprintf(ea, sizeof(ea), "%s/li/e%d.jsonl", TMP, k);
        snprintf(aa, sizeof(aa), "%s/li/a%d.jsonl", TMP, k);
        int ne = read_log_values(ea, "loss", le, 16), n0 = read_log_values(aa, "loss", la0, 16);
        int same0 = ne == 8 && n0 == 8;
        for (int i = 0; same0 && i < 8; i++) { same0 = strcmp(le[i], la0[i]) == 0; }
        snprintf(name, sizeof(name), "--llmc-checkpoints 1 (%s, %d process%s) leaves the run unchanged: its 8 losses equal the run's without it",
                 cases[k].dtype, cases[k].N, cases[k].N > 1 ? "es" : "");
        report(same0, name, "%d and %d losses (step 8: %s vs %s)", ne, n0, ne == 8 ? le[7] : "-", n0 == 8 ? la0[7] : "-");
        snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp %s/model_00000004.bin %s/state_00000004_0000?.bin %s/DONE_00000004 %s/ && %s -o %s -y 1 --log %s/li/f%d.jsonl",
                 f, e, e, e, f, common, f, TMP, k);
        rc = run_capture(cmd, out, sizeof(out));
        char la[16][32], lb[16][32], a[600], b[600], at[160];
        snprintf(a, sizeof(a), "%s/li/e%d.jsonl", TMP, k);
        snprintf(b, sizeof(b), "%s/li/f%d.jsonl", TMP, k);
        snprintf(at, sizeof(at), "replayed to step 4 reaches shard 0, group %zu, as llm.c's state records", cases[k].group);
        int na = read_log_values(a, "loss", la, 16), nb = read_log_values(b, "loss", lb, 16);
        int same = rc == 0 && na == 8 && nb == 4 && strstr(out, at);
        for (int i = 0; same && i < 4; i++) { same = strcmp(la[4 + i], lb[i]) == 0; }
        snprintf(name, sizeof(name), "llm.c's state files written here (%s), alone with the model file and DONE_, continue with -y 1 at their data position, bit for bit",
                 cases[k].dtype);
        report(same, name, "exit %d, %d and %d losses: %.400s", rc, na, nb, out);
        snprintf(cmd, sizeof(cmd), "rm -rf %s && %s --llmc-checkpoints 1 -nk 1 -o %s > /dev/null && ls %s | tr '\\n' ' '", e, common, e, e);
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(want, sizeof(want), "DONE_00000008 latest main.log model_00000008.bin state_00000008.bin state_00000008_00000.bin %s",
                 cases[k].N > 1 ? "state_00000008_00001.bin " : "");
        report(rc == 0 && strstr(out, want) && !strstr(out, "_00000004"),
               "--llmc-checkpoints with -nk 1: llm.c's state files are pruned with their checkpoint", "exit %d: %.300s", rc, out);
    }
    // damaged llm.c checkpoints: an error naming the file and the problem, before anything is trained
    char base[2048];
    snprintf(base, sizeof(base), "./train_gpt -e tests/ref/ref_model.bin -i %s -b 2 -t 8 -d 32 -x 8 -n 4 --threads 1 --dtype bf16 --shuffle 2 -y 1", tr);
    struct { const char* name; const char* edit; const char* expect; } bad[] = {
        {"a missing process's state file", "rm state_00000004_00001.bin", "state_00000004_00001.bin' is missing"},
        {"a state file cut short", "truncate -s -4 state_00000004_00001.bin", "state_00000004_00001.bin' is"},
        {"a state file of another rank", "printf '\\007' | dd of=state_00000004_00001.bin bs=1 seek=12 conv=notrunc 2>/dev/null", "corrupt header"},
        {"a bad magic number", "printf 'X' | dd of=state_00000004_00000.bin bs=1 seek=0 conv=notrunc 2>/dev/null", "bad magic number"},
        {"a NaN moment", "printf '\\000\\000\\300\\177' | dd of=state_00000004_00001.bin bs=1 seek=1040 conv=notrunc 2>/dev/null", "m 4 of its shard is not finite"},
        {"a process count that disagrees with rank 0's", "printf '\\003' | dd of=state_00000004_00001.bin bs=1 seek=8 conv=notrunc 2>/dev/null",
         "state_00000004_00001.bin' disagrees with rank 0's (processes 3 vs 2"},
        {"rank 0's state file cut short", "truncate -s -4 state_00000004_00000.bin",
         "state_00000004_00000.bin' is 184052 bytes: neither the size of a run without ZeRO nor the 184056 of ZeRO-1 over 2 processes"},
        {"rank 0's state file cut inside its moments", "truncate -s 2000 state_00000004_00000.bin",
         "state_00000004_00000.bin' is 2000 bytes: read as a run without ZeRO or as ZeRO-1 over the processes it records, its data loader section"},
    };
    for (int k = 0; k < 8; k++) {
        if (!have_mpi) { break; } // (llmc0 is made by the mpirun case)
        snprintf(cmd, sizeof(cmd), "rm -rf %s/li/bad && cp -r %s/li/llmc0.orig %s/li/bad && cd %s/li/bad && %s", TMP, TMP, TMP, TMP, bad[k].edit);
        if (system(cmd) != 0) { report(0, "llm.c import: damaged setup", "%s", cmd); return; }
        snprintf(cmd, sizeof(cmd), "%s -o %s/li/bad; test ! -e %s/li/bad/latest", base, TMP, TMP);
        int rc = run_capture(cmd, out, sizeof(out));
        char name[256];
        snprintf(name, sizeof(name), "llm.c import refuses %s, naming it (no checkpoint of ours is left)", bad[k].name);
        report(rc == 0 && strstr(out, bad[k].expect) != NULL, name, "exit %d: %.300s", rc, out);
    }
    // continued with the distributed sampler (--shuffle 1) instead of llm.c's order: it runs, and says where the data
    // continue from (its own sampler after step 4, not llm.c's recorded position)
    if (have_mpi) {
        char base1[2048];
        snprintf(base1, sizeof(base1), "./train_gpt -e tests/ref/ref_model.bin -i %s -b 2 -t 8 -d 32 -x 8 -n 4 --threads 1 --dtype bf16 --shuffle 1 -y 1", tr);
        snprintf(cmd, sizeof(cmd), "rm -rf %s/li/sh1 && cp -r %s/li/llmc0.orig %s/li/sh1 && %s -o %s/li/sh1", TMP, TMP, TMP, base1, TMP);
        int rc = run_capture(cmd, out, sizeof(out));
        report(rc == 0 && strstr(out, "note: the data continue where this run's sampler (--shuffle 1) is after step 4, not at llm.c's position "
                                      "(in llm.c's shuffled order (--shuffle 2), which this run does not use)") != NULL,
               "an llm.c checkpoint continued with --shuffle 1 says its data continue from this run's sampler, not llm.c's position",
               "exit %d: %.300s", rc, out);
    }
}

#endif // RUNS_LLMC_H
