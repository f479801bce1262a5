/*
tests/runs_ramp.h: GPT-3's batch-size ramp (--batch-ramp-start, --batch-ramp-tokens) and the decay's horizon (--lr-decay-steps) through whole runs (--only ramp).
Split out of tests/test_runs.c by topic and included by it where this code stood: it uses the suite's helpers above
the include (TMP, report, run_capture, fresh_shard, the log readers of tests/runs_common.h) and the trainer's code
(train_gpt.c); not a standalone header.
*/
#ifndef RUNS_RAMP_H
#define RUNS_RAMP_H

// ----------------------------------------------------------------------------
// GPT-3's batch-size ramp (--batch-ramp-start, --batch-ramp-tokens) and the decay's horizon (--lr-decay-steps),
// through whole runs. The rule itself is checked a step at a time against Megatron-LM's in test_gpt (units).

// Whether a log's integer values of `key` are want[0..n) (and no more).
static int log_ints_are(const char* log, const char* key, const long* want, int n, char* got, size_t cap) {
    char v[64][32];
    int k = read_log_values(log, key, v, 64), ok = k == n;
    got[0] = '\0';
    for (int i = 0; i < k; i++) {
        ok = ok && atol(v[i]) == want[i];
        snprintf(got + strlen(got), cap - strlen(got), "%s%s", i ? " " : "", v[i]);
    }
    return ok;
}

static void test_batch_ramp_runs(void) {
    char cmd[8192], out[65536], shard[1024], got[512], name[256];
    if (!fresh_shard("batch ramp setup", "ramp", "train_000000.bin", 20000, 5, shard, sizeof(shard))) { return; }
    // 96 tokens a step (1 rank: 6 micro-steps of 2 x 8), the ramp from 32 over 200 tokens, 6 x 96 tokens in all:
    // 32 until 128 tokens (floor(c 2 / 200) = 0), 64 until 200, then 96; the last step takes the 32 left
    const long batches[10] = {32, 32, 32, 32, 64, 64, 96, 96, 96, 32};
    long tokens[10];
    for (int i = 0; i < 10; i++) { tokens[i] = batches[i] + (i ? tokens[i - 1] : 0); }
    char common[4200], ramp[256] = "--total-batch-size 96 --batch-ramp-start 32 --batch-ramp-tokens 200 --steps 6";
    // (--batch-size 2 unless a case gives its own)
    char base[4096];
    snprintf(base, sizeof(base), "--init tests/ref/ref_model.bin --train %s --seq-len 8 --lr 1e-3 --weight-decay 0.1 --grad-clip 0.5 --threads 1", shard);
    snprintf(common, sizeof(common), "%s --batch-size 2", base);
    char ref[1024];
    snprintf(ref, sizeof(ref), "%s/ramp/r1.jsonl", TMP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s %s --warmup 2 --log %s --checkpoint-every 2 --keep-checkpoints 0 --out %s/ramp/o1", common, ramp, ref, TMP);
    int rc = run_capture(cmd, out, sizeof(out));
    int ok = rc == 0 && strstr(out, "done: 10 steps") && strstr(out, "step    10/10 |") && strstr(out, "| batch 32 |") &&
             strstr(out, "| batch ramp           | 32 tokens a step (2 micro-step(s) per process) growing by as many to 96 over the first 200 tokens: "
                         "10 steps for the run's 6 x 96 tokens; the learning-rate"); // (no shorter micro-steps: B 2 divides every step)
    report(ok && log_ints_are(ref, "batch_tokens", batches, 10, got, sizeof(got)),
           "batch ramp: 10 steps of 32 32 32 32 64 64 96 96 96 32 tokens (6 x 96 in all), each in the log and on the step's line; the start-up table's row",
           "exit %d, batches %s: %.300s", rc, got, out);
    report(log_ints_are(ref, "tokens", tokens, 10, got, sizeof(got)), "batch ramp: the log's running count of tokens", "%s", got);
    // scripts/plot_log.sh puts each step at those tokens (without them it would take every step as the last one's)
    snprintf(cmd, sizeof(cmd), "bash scripts/plot_log.sh --table %s", ref);
    rc = run_capture(cmd, out, sizeof(out));
    int at_tokens = rc == 0, points = 0;
    for (const char* q = out; at_tokens && (q = strstr(q, "train r1 ")) != NULL; q++, points++) { at_tokens = points < 10 && atol(q + 9) == tokens[points]; }
    report(at_tokens && points == 10, "batch ramp: plot_log.sh --table puts the training losses at the logged tokens", "exit %d, %d points: %.300s", rc, points, out);
    // the learning rates: the schedule on tokens (lr_of_step, whose rule test_gpt checks by hand), as logged
    Config c;
    config_defaults(&c);
    c.lr = 1e-3f; c.warmup = 2; c.steps = 6; c.total_batch_size = 96; c.batch_ramp_start = 32; c.batch_ramp_tokens = 200;
    char lr[64][32];
    int n = read_log_values(ref, "lr", lr, 64);
    ok = n == 10;
    for (int i = 0; ok && i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "%.9g", lr_of_step(&c, i));
        ok = strcmp(want, lr[i]) == 0;
    }
    report(ok, "batch ramp: each step's logged learning rate is the schedule's at the tokens before it", "%d rates", n);
    // each step's logged rate is its own batch over its own time: tokens_per_s x ms / 1000 = batch_tokens, within the
    // rounding of the two printed values (ms to 0.0005, tokens/s to 0.05), so a rate computed from the whole batch
    // (96) on the ramp's smaller steps shows
    char ms[64][32], tps[64][32];
    int nm = read_log_values(ref, "ms", ms, 64), nt = read_log_values(ref, "tokens_per_s", tps, 64), off = 0;
    for (int i = 0; i < nm && i < nt && i < 10; i++) {
        double m = atof(ms[i]), t = atof(tps[i]), slack = 0.0005 * t / 1e3 + 0.05 * m / 1e3 + 1e-9;
        if (!(fabs(t * m / 1e3 - (double)batches[i]) <= slack)) { off++; }
    }
    report(nm == 10 && nt == 10 && off == 0, "batch ramp: each step's logged tokens/s is its own batch over its own time",
           "%d and %d values, %d off", nm, nt, off);
    // step 1 of the ramp is a step of 32 tokens: the same bits as a run of --total-batch-size 32 (without a warmup,
    // whose rate depends on the whole batch: both start at the peak)
    char a[1024], b[1024];
    snprintf(cmd, sizeof(cmd), "./train_gpt %s %s --warmup 0 --log %s/ramp/w.jsonl --checkpoint-every 1 --keep-checkpoints 0 --out %s/ramp/w", common, ramp, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --total-batch-size 32 --steps 1 --warmup 0 --log %s/ramp/p.jsonl --checkpoint-every 1 --out %s/ramp/p",
             common, TMP, TMP);
    int rc2 = run_capture(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/ramp/w/model_00000001.bin", TMP);
    snprintf(b, sizeof(b), "%s/ramp/p/model_00000001.bin", TMP);
    report(rc == 0 && rc2 == 0 && files_equal_from(a, b, 0), "batch ramp: its first step equals a step of --total-batch-size 32, bit for bit (the parameters after it)",
           "exits %d %d", rc, rc2);
    // resumed at step 4 (inside the ramp) by one process and by two: the rest of the run, bit for bit on one and
    // within the data-parallel tolerance on two (test_parallel's: partial sums in another order)
    snprintf(cmd, sizeof(cmd), "cd %s/ramp/o1 && rm -f *_00000006.bin *_00000008.bin *_00000010.bin DONE_* && echo 4 > latest", TMP);
    if (system(cmd) != 0) { report(0, "batch ramp resume setup", "%s", cmd); return; }
    snprintf(cmd, sizeof(cmd), "rm -rf %s/ramp/o1b && cp -r %s/ramp/o1 %s/ramp/o1b", TMP, TMP, TMP);
    if (system(cmd) != 0) { report(0, "batch ramp resume setup", "%s", cmd); return; }
    snprintf(cmd, sizeof(cmd), "./train_gpt %s %s --warmup 2 --log %s/ramp/res1.jsonl --resume %s/ramp/o1", common, ramp, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/ramp/res1.jsonl", TMP);
    snprintf(name, sizeof(name), "batch ramp: resumed at step 4, the rest of the run (6 steps) equals the uninterrupted one, bit for bit");
    if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); } else { compare_losses(name, ref, 4, a, 6, 0.0); }
    report(log_ints_are(a, "batch_tokens", batches + 4, 6, got, sizeof(got)), "batch ramp: the resumed run takes the ramp's remaining batches", "%s", got);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) { printf("SKIP batch ramp under mpirun: mpirun not found\n"); return; }
    snprintf(cmd, sizeof(cmd), MPIRUN " -np 2 ./train_gpt %s %s --warmup 2 --zero 1 --log %s/ramp/res2.jsonl --resume %s/ramp/o1b", common, ramp, TMP, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/ramp/res2.jsonl", TMP);
    snprintf(name, sizeof(name), "batch ramp: resumed at step 4 on 2 ranks (--zero 1), the rest equals one process's");
    if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); } else { compare_losses(name, ref, 4, a, 6, 2e-6); }
    // 2 data-parallel ranks (ZeRO 0 and 2) and 2 pipeline stages (1F1B and GPipe: 2, 4 or 6 micro-batches a step) from
    // the start: the losses, norms and rates of one process
    const char* layouts[4][2] = {{"--zero 0", "2 ranks, --zero 0"}, {"--zero 2", "2 ranks, --zero 2"}, {"--pp 2", "2 pipeline stages (1F1B)"},
                                 {"--pp 2 --pp-schedule gpipe", "2 pipeline stages (GPipe)"}};
    for (int k = 0; k < 4; k++) {
        snprintf(a, sizeof(a), "%s/ramp/l%d.jsonl", TMP, k);
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 2 ./train_gpt %s %s --warmup 2 %s --log %s", common, ramp, layouts[k][0], a);
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "batch ramp on %s: losses equal one process's", layouts[k][1]);
        if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); continue; }
        compare_losses(name, ref, 0, a, 10, 2e-6);
        snprintf(name, sizeof(name), "batch ramp on %s: gradient norms equal one process's", layouts[k][1]);
        compare_values(name, "grad_norm", ref, a, 10, 2e-6);
        snprintf(name, sizeof(name), "batch ramp on %s: learning rates identical to one process's", layouts[k][1]);
        compare_values(name, "lr", ref, a, 10, 0.0);
    }
    // checkpoints leave a ramped run unchanged, bit for bit: one process (against the run above, which wrote them
    // every 2 steps, the same run writing none), 2 ranks under ZeRO 2 and 2 pipeline stages (writing them every 2
    // steps, against the runs above, which wrote none)
    snprintf(a, sizeof(a), "%s/ramp/nock.jsonl", TMP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s %s --warmup 2 --log %s", common, ramp, a);
    rc = run_capture(cmd, out, sizeof(out));
    if (rc != 0) { report(0, "batch ramp: a run writing checkpoints equals one writing none", "exit %d: %.300s", rc, out); }
    else { compare_losses("batch ramp: a run writing checkpoints equals one writing none, bit for bit", a, 0, ref, 10, 0.0); }
    for (int k = 1; k <= 2; k++) {
        snprintf(b, sizeof(b), "%s/ramp/l%d_ck.jsonl", TMP, k);
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 2 ./train_gpt %s %s --warmup 2 %s --log %s --checkpoint-every 2 --out %s/ramp/l%d_ck", common, ramp,
                 layouts[k][0], b, TMP, k);
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(a, sizeof(a), "%s/ramp/l%d.jsonl", TMP, k);
        snprintf(name, sizeof(name), "batch ramp on %s: a run writing checkpoints equals one writing none, bit for bit", layouts[k][1]);
        if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); } else { compare_losses(name, a, 0, b, 10, 0.0); }
    }
    // Micro-steps of fewer rows than --batch-size: B 3. On 1 rank (micro-steps of 24 tokens) a step of 32 tokens is
    // a micro-step of 3 rows and one of 1, a step of 64 two of 3 and one of 2; on 2 ranks (micro-steps of 48) a step of
    // 32 is one micro-step of 2 rows on each rank, a step of 64 one of 3 and one of 1. The same sequences reach each
    // step in the same order (the stream does not depend on the micro-batches), so each run is one process's with B 2
    // within the data-parallel tolerance; the first resumes inside the ramp bit for bit
    for (int np = 1; np <= 2; np++) {
        snprintf(a, sizeof(a), "%s/ramp/b4_%d.jsonl", TMP, np);
        snprintf(cmd, sizeof(cmd), "%s%s ./train_gpt %s --batch-size 3 %s --warmup 2 --log %s --checkpoint-every 2 --keep-checkpoints 0 --out %s/ramp/b4_%d",
                 np > 1 ? MPIRUN " -np " : "", np > 1 ? "2" : "", base, ramp, a, TMP, np);
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "batch ramp with --batch-size 3 on %d rank(s) (micro-steps of fewer rows): losses equal B 2's", np);
        if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); continue; }
        compare_losses(name, ref, 0, a, 10, 2e-6);
        snprintf(name, sizeof(name), "batch ramp with --batch-size 3 on %d rank(s): gradient norms equal B 2's", np);
        compare_values(name, "grad_norm", ref, a, 10, 2e-6);
        snprintf(name, sizeof(name), "batch ramp with --batch-size 3 on %d rank(s): the start-up table lists the shorter micro-steps' 1 and 2 rows", np);
        report(strstr(out, "10 steps for the run's 6 x 96 tokens; steps end in micro-steps of 1, 2 sequence(s); the learning-rate") != NULL, name,
               "%.600s", strstr(out, "| batch ramp") ? strstr(out, "| batch ramp") : out);
    }
    // micro-steps of fewer rows under ZeRO-3 (each micro-step's forward and backward gather the layers) and under
    // tensor parallelism with sequence parallelism (a micro-step of r rows is r T / 2 rows of the residual stream on
    // each rank): B 3 on 2 ranks against B 2
    const char* b3[2] = {"--zero 3", "--tp 2 --sequence-parallel 1"};
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof(a), "%s/ramp/b3_%d.jsonl", TMP, k);
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 2 ./train_gpt %s --batch-size 3 %s --warmup 2 %s --log %s", base, ramp, b3[k], a);
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "batch ramp with --batch-size 3 on 2 ranks, %s (micro-steps of fewer rows): losses equal B 2's", b3[k]);
        if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); } else { compare_losses(name, ref, 0, a, 10, 2e-6); }
    }
    // the same under the sampler (--shuffle 1, the reproduction scripts' order): B 3 on 1 and 2 ranks against B 2
    char s1[1024];
    snprintf(s1, sizeof(s1), "%s/ramp/s1_b2.jsonl", TMP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s %s --shuffle 1 --warmup 2 --log %s", common, ramp, s1);
    rc = run_capture(cmd, out, sizeof(out));
    if (rc != 0) { report(0, "batch ramp under --shuffle 1 (B 2)", "exit %d: %.300s", rc, out); }
    for (int np = 1; np <= 2 && rc == 0; np++) {
        snprintf(a, sizeof(a), "%s/ramp/s1_b3_%d.jsonl", TMP, np);
        snprintf(cmd, sizeof(cmd), "%s%s ./train_gpt %s --batch-size 3 %s --shuffle 1 --warmup 2 --log %s", np > 1 ? MPIRUN " -np " : "",
                 np > 1 ? "2" : "", base, ramp, a);
        int rc3 = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "batch ramp under --shuffle 1 with --batch-size 3 on %d rank(s): losses equal B 2's (the same sampled sequences)", np);
        if (rc3 != 0) { report(0, name, "exit %d: %.300s", rc3, out); } else { compare_losses(name, s1, 0, a, 10, 2e-6); }
    }
    snprintf(cmd, sizeof(cmd), "cd %s/ramp/b4_1 && rm -f *_00000006.bin *_00000008.bin *_00000010.bin DONE_* && echo 4 > latest", TMP);
    if (system(cmd) != 0) { report(0, "batch ramp resume setup", "%s", cmd); return; }
    snprintf(b, sizeof(b), "%s/ramp/b4_res.jsonl", TMP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --batch-size 3 %s --warmup 2 --log %s --resume %s/ramp/b4_1", base, ramp, b, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/ramp/b4_1.jsonl", TMP);
    snprintf(name, sizeof(name), "batch ramp with --batch-size 3: resumed at step 4, the rest equals the uninterrupted run bit for bit");
    if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); } else { compare_losses(name, a, 4, b, 6, 0.0); }
    // a resume on a layout the ramp's first batch does not fit: accepted once the rest of the run fits (an elastic
    // restart on 4 ranks after the ramp), refused while a step to come does not. F 96, S 48, R 96: 48 48 96 96 96;
    // 4 ranks of B 1 hold 8 x 4 = 32 tokens a row, which 48 is not a multiple of
    char el[1024];
    snprintf(el, sizeof(el), "%s/ramp/el.jsonl", TMP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --total-batch-size 96 --batch-ramp-start 48 --batch-ramp-tokens 96 --steps 4 --warmup 2 --log %s "
             "--checkpoint-every 1 --keep-checkpoints 0 --out %s/ramp/el", common, el, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "cd %s/ramp && rm -rf el1 && cp -r el el1 && cd el && rm -f *_00000003.bin *_00000004.bin *_00000005.bin DONE_* && echo 2 > latest "
             "&& cd ../el1 && rm -f *_0000000[2-5].bin DONE_* && echo 1 > latest", TMP);
    if (rc != 0 || system(cmd) != 0) { report(0, "batch ramp elastic setup", "exit %d: %.300s", rc, out); return; }
    snprintf(a, sizeof(a), "%s/ramp/el4.jsonl", TMP);
    snprintf(cmd, sizeof(cmd), MPIRUN " -np 4 ./train_gpt %s --batch-size 1 --total-batch-size 96 --batch-ramp-start 48 --batch-ramp-tokens 96 --steps 4 "
             "--warmup 2 --log %s --resume %s/ramp/el", base, a, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    snprintf(name, sizeof(name), "batch ramp: resumed after the ramp on 4 ranks (its first batch no longer fits): the rest equals one process's");
    if (rc != 0) { report(0, name, "exit %d: %.300s", rc, out); } else { compare_losses(name, el, 2, a, 3, 2e-6); }
    snprintf(cmd, sizeof(cmd), MPIRUN " -np 4 ./train_gpt %s --batch-size 1 --total-batch-size 96 --batch-ramp-start 48 --batch-ramp-tokens 96 --steps 4 "
             "--warmup 2 --resume %s/ramp/el1", base, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc != 0 && strstr(out, "--batch-ramp-start 48 (step 2 of the run takes 48 tokens) is not a multiple of seq-len x data-parallel ranks = 8 x 4 = 32"),
           "batch ramp: a resume on 4 ranks inside the ramp is refused, naming the step that does not fit", "exit %d: %.400s", rc, out);
    // refusals: each names the flag and the reason
    struct { const char* args; int np; const char* expect; } bad[] = {
        {"--batch-ramp-start 40 --batch-ramp-tokens 200 --steps 6", 1, "--batch-ramp-start 40 must divide --total-batch-size 96"},
        {"--batch-ramp-start 96 --batch-ramp-tokens 200 --steps 6", 1, "--batch-ramp-start 96 must divide --total-batch-size 96 and be smaller"},
        {"--batch-ramp-start 12 --batch-ramp-tokens 200 --steps 6", 1, "--batch-ramp-start 12 is not a multiple of seq-len x data-parallel ranks = 8 x 1 = 8"},
        {"--batch-ramp-start 24 --batch-ramp-tokens 200 --steps 6", 2, "--batch-ramp-start 24 is not a multiple of seq-len x data-parallel ranks = 8 x 2 = 16"},
        {"--batch-ramp-start 16 --batch-ramp-tokens 200 --steps 6 --pp 2 --batch-size 4", 2, "= 4 x 8 x 1 = 32: a pipeline's micro-batches are all --batch-size sequences"},
        {"--batch-ramp-start 16 --batch-ramp-tokens 200 --steps 6 --shuffle 2 --batch-size 4", 1, "= 4 x 8 x 1 = 32: llm.c's shuffled order (--shuffle 2) reads whole"},
        {"--batch-ramp-start 32 --steps 6", 1, "a batch ramp needs both"},
        {"--batch-ramp-tokens 200 --steps 6", 1, "a batch ramp needs both"},
        {"--batch-ramp-start 32 --batch-ramp-tokens 200 --bench 1", 1, "--bench times steps of the whole batch"},
        {"--batch-ramp-start 32 --batch-ramp-tokens 200 --steps 6 --llmc-checkpoints 1 --checkpoint-every 2 --out /tmp/x --shuffle 2", 1, "llm.c trains every step on the same batch"},
        {"--lr-schedule constant --lr-decay-steps 4 --steps 6", 1, "--lr-decay-steps 4: the constant schedule does not decay"},
        {"--warmup 4 --lr-decay-steps 4 --steps 6", 1, "ends the decay before --warmup 4 steps have passed"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        const char* with = strstr(bad[k].args, "--batch-size") ? base : common;
        if (bad[k].np > 1) { snprintf(cmd, sizeof(cmd), MPIRUN " -np %d ./train_gpt %s --total-batch-size 96 %s", bad[k].np, with, bad[k].args); }
        else { snprintf(cmd, sizeof(cmd), "./train_gpt %s --total-batch-size 96 %s", with, bad[k].args); }
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "refused with one clear line: %s%s", bad[k].args, bad[k].np > 1 ? " on 2 ranks" : "");
        report(rc != 0 && strstr(out, bad[k].expect) != NULL, name, "exit %d: %.300s", rc, out);
    }
    // a run of more tokens than 64 bits count with room (steps x total-batch-size above 4e18) is refused before the
    // ramp is walked over them
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --batch-size 512 --total-batch-size 4294967296 --batch-ramp-start 4096 --batch-ramp-tokens 8192 "
             "--steps 1000000000", base);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 1 && strstr(out, "--steps 1000000000 x --total-batch-size 4294967296 tokens: more than this trainer counts (4e18)"),
           "refused with one clear line: a run of more than 4e18 tokens, with a ramp", "exit %d: %.300s", rc, out);
    // a resume that changes the ramp or the horizon names each change (--resume-settings note)
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --total-batch-size 96 --batch-ramp-start 32 --batch-ramp-tokens 300 --lr-decay-steps 5 --steps 6 --warmup 2 --resume %s/ramp/o1",
             common, TMP);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "note: --resume") && strstr(out, "--batch-ramp-tokens was 200, now 300") && strstr(out, "--lr-decay-steps was 0, now 5"),
           "a resume that changes --batch-ramp-tokens and --lr-decay-steps names both changes", "exit %d: %.400s", rc, out);
    // --lr-decay-steps 4 of 8 steps: cosine from the peak after the warmup to 0 at step 4, 0 after (logged rates)
    snprintf(a, sizeof(a), "%s/ramp/decay.jsonl", TMP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --total-batch-size 96 --steps 8 --warmup 1 --lr-decay-steps 4 --log %s", common, a);
    rc = run_capture(cmd, out, sizeof(out));
    n = read_log_values(a, "lr", lr, 64);
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double want = i < 1 ? 1e-3 : 0.5e-3 * (1.0 + cos(M_PI * fmin(1.0, (i - 1) / 3.0)));
        worst = fmax(worst, fabs(atof(lr[i]) - want) / 1e-3);
    }
    report(rc == 0 && n == 8 && worst <= 1e-6, "--lr-decay-steps 4 of 8: the logged rates decay to 0 by step 4 and stay there",
           "exit %d, %d rates, max error %.3g of the peak", rc, n, worst);
}

#endif // RUNS_RAMP_H
