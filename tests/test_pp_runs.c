/*
tests/test_pp_runs.c: pipeline parallelism through the real binary under mpirun (oversubscribed), against one process,
on a 4-block model (so that 2 and 4 stages and interleaving fit): --pp 2 with each schedule, --pp 4, --pp 2 x dp 2
(ZeRO 1), interleaved x dp 2 (ZeRO 2), --pp 2 x tp 2 (sequence parallel, --recompute 2) and the interleaved schedule with tp 2: losses, gradient
norms (the first step's is the whole gradient's), validation losses, final parameters per element and samples over
10 steps; the tied embedding identical on the first and last stage; checkpoints that leave the run unchanged;
resume pp 2 -> 1 process, 1 -> pp 2 interleaved, pp 2 x tp 2 -> pp 4; bf16; the trace and the measured bubble;
the refusals of impossible settings. The schedules themselves are tested without a model in tests/test_pp.c.

    make tests/test_pp_runs && ./tests/test_pp_runs       (skipped when mpirun is missing)

Like test_runs, it includes train_gpt.c (TRAIN_GPT_NO_MAIN) only for the file layouts, the model initialisation (to
write the 4-block model) and the RNG of the shards.
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary, run_capture

#define report check
#include "tests/runs_common.h" // defines: write_shard, compare_losses, compare_values, compare_model_files, MPIRUN

static const char* DIR_PP; // the suite's scratch directory (testing.h's test_scratch_dir), set first in main

// Tolerances against one process (fp32), as for tensor parallelism: the stages compute exactly what one process
// does, except that the tied embedding's gradient is summed from its two stages (first + last) and the gradient norm
// from per-stage parts, in another order; observed differences ~1e-7 relative in losses and norms, ~1e-6 absolute
// in parameters. Losses, norms and validation losses 1e-5 relative; parameters 2e-6 absolute + 1e-4 relative (the
// key biases, whose true gradient is zero, 20 lr). A stage that skips a micro-batch, a gradient sent to the wrong
// chunk or a missing half of the tied gradient moves the first loss or norm by far more.
static void test_pp_layouts(const char* common, const char* quiet, const char* ref_log, const char* ref_out) {
    char cmd[8192], out[65536], log[1024], name[256];
    const RunLayout layouts[8] = {
        {"pp 2, 1f1b", 2, "--pp 2 --pp-schedule 1f1b"},
        {"pp 2, gpipe", 2, "--pp 2 --pp-schedule gpipe"},
        {"pp 2, interleaved (2 chunks per rank)", 2, "--pp 2 --pp-schedule interleaved --virtual-stages 2"},
        {"pp 4, 1f1b", 4, "--pp 4"},
        {"pp 2 x dp 2, ZeRO 1", 4, "--pp 2 --zero 1"},
        {"pp 2 interleaved x dp 2, ZeRO 2", 4, "--pp 2 --pp-schedule interleaved --virtual-stages 2 --zero 2"},
        {"pp 2 x tp 2, sequence parallel, --recompute 2", 4, "--pp 2 --tp 2 --sequence-parallel 1 --recompute 2"},
        {"pp 2 interleaved x tp 2", 4, "--pp 2 --pp-schedule interleaved --virtual-stages 2 --tp 2"},
    };
    for (int k = 0; k < 8; k++) {
        const RunLayout* L = &layouts[k];
        snprintf(log, sizeof(log), "%s/pp_%d.jsonl", DIR_PP, k);
        snprintf(cmd, sizeof(cmd), "rm -rf %s/o_%d && timeout 300 " MPIRUN " -np %d ./train_gpt %s %s --log %s --checkpoint-every 5 --out %s/o_%d "
                 "--sample-every 10 --gen-tokens 6" SAMPLE_FILTERS, DIR_PP, k, L->np, common, L->args, log, DIR_PP, k);
        int rc = run_capture(cmd, out, sizeof(out));
        int agree = strstr(out, "tied token embedding after training: identical") != NULL &&
                    (!strstr(L->args, "--zero") || strstr(out, "parameters after training: identical on all 2 data-parallel")) &&
                    (!strstr(L->args, "--tp") || strstr(out, "replicated parameters after training: identical"));
        snprintf(name, sizeof(name), "%s: runs; the tied embedding identical on the first and last stage%s", L->name,
                 strstr(L->args, "--zero") ? ", parameters on every data-parallel rank" : strstr(L->args, "--tp") ? ", replicated ones across tp" : "");
        report(rc == 0 && agree, name, "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
        if (rc != 0) { continue; }
        char pa[1024], pb[1024];
        snprintf(pa, sizeof(pa), "%s/o_ref/model_00000010.bin", DIR_PP);
        snprintf(pb, sizeof(pb), "%s/o_%d/model_00000010.bin", DIR_PP, k);
        compare_run(L->name, ref_log, log, 10, 3, 1e-5, pa, pb, ref_out, out);
        snprintf(name, sizeof(name), "%s: prints the measured bubble next to the theory", L->name);
        report(strstr(out, "pipeline: bubble measured") != NULL, name, "%s", "");
    }
    // a run that writes checkpoints, samples and evaluates equals one that does none of them, bit for bit
    snprintf(log, sizeof(log), "%s/pp_quiet.jsonl", DIR_PP);
    snprintf(cmd, sizeof(cmd), "timeout 300 " MPIRUN " -np 2 ./train_gpt %s --pp 2 --pp-schedule interleaved --virtual-stages 2 --log %s", quiet, log);
    int rc = run_capture(cmd, out, sizeof(out));
    char loud[1024];
    snprintf(loud, sizeof(loud), "%s/pp_2.jsonl", DIR_PP);
    if (rc != 0) { report(0, "pp 2 interleaved: checkpoints, samples and evaluation leave the run unchanged", "exit %d: %.300s", rc, out); }
    else {
        compare_losses("pp 2 interleaved: checkpoints, samples and evaluation leave the run unchanged, bit for bit", loud, 0, log, 10, 0.0);
        compare_values("pp 2 interleaved: ... and the gradient norms", "grad_norm", loud, log, 10, 0.0);
    }
    // the end-of-run check catches a first stage whose copy of the tied wte drifted from the last stage's
    // (TRAIN_GPT_FAULT=drift: after the last update, rank 0 nudges the first element of every tensor it holds)
    snprintf(cmd, sizeof(cmd), "TRAIN_GPT_FAULT=drift:0:9 timeout 300 " MPIRUN " -np 2 ./train_gpt %s --pp 2", quiet);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc != 0 && strstr(out, "tied token embedding after training: DIFFERENT on the first and last pipeline stage") &&
           strstr(out, "the first and last pipeline stages ended with different copies of the tied token embedding"),
           "pp 2: a first stage whose tied wte drifted after the last step fails the run, named", "exit %d%s%.400s", rc, rc ? "" : ": ", rc ? "" : out);
}

// Resume on another layout: the files hold the whole model and the logical optimizer state. Steps 6-10 equal the
// uninterrupted one process's (1e-5, as above).
static void test_pp_resume(const char* common, const char* ref_log) {
    const struct { const char* from; const char* from_name; int np; const char* args; const char* to_name; } cases[3] = {
        {"o_0", "pp 2", 1, "", "1 process"},
        {"o_ref", "1 process", 2, "--pp 2 --pp-schedule interleaved --virtual-stages 2", "pp 2 interleaved"},
        {"o_6", "pp 2 x tp 2", 4, "--pp 4 --pp-schedule gpipe", "pp 4 (gpipe)"},
    };
    for (int k = 0; k < 3; k++) {
        resume_case(DIR_PP, k, cases[k].from, cases[k].from_name, cases[k].np, common, cases[k].args, cases[k].to_name, ref_log, 1e-5);
    }
}

// bf16: pipeline stages change no arithmetic but the tied gradient's and the norm's summation orders; what differs is
// AdamW's stochastic rounding of the compute copy, whose random bits are keyed by an element's index in the rank's
// local flat buffer, which a stage numbers differently: the rounding noise is another draw of the same size. So they
// follow one process in bf16 within 5e-3 relative, as tensor parallelism does (observed 6e-5; one process's bf16 run
// differs from its fp32 run by about as much).
static void test_pp_bf16(const char* common) {
    char cmd[8192], out[65536], log[1024], ref[1024];
    snprintf(ref, sizeof(ref), "%s/b_ref.jsonl", DIR_PP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --dtype bf16 --log %s", common, ref);
    int rc = run_capture(cmd, out, sizeof(out));
    if (rc != 0) { report(0, "bf16: one process", "exit %d: %.300s", rc, out); return; }
    snprintf(log, sizeof(log), "%s/b_pp.jsonl", DIR_PP);
    snprintf(cmd, sizeof(cmd), "timeout 300 " MPIRUN " -np 2 ./train_gpt %s --dtype bf16 --pp 2 --pp-schedule interleaved --virtual-stages 2 --log %s", common, log);
    rc = run_capture(cmd, out, sizeof(out));
    if (rc != 0) { report(0, "bf16, pp 2 interleaved", "exit %d: %.300s", rc, out); return; }
    compare_losses("bf16, pp 2 interleaved: losses follow one process's in bf16 (10 steps)", ref, 0, log, 10, 5e-3);
}

// --trace: a Chrome/Perfetto JSON with every rank's spans.
static void test_pp_trace(const char* common) {
    char cmd[12288], out[65536], path[1024];
    snprintf(path, sizeof(path), "%s/trace.json", DIR_PP);
    char log[1024], plain[1024];
    snprintf(log, sizeof(log), "%s/trace.jsonl", DIR_PP);
    snprintf(plain, sizeof(plain), "%s/pp_0.jsonl", DIR_PP); // the same layout (1f1b) without --trace
    snprintf(cmd, sizeof(cmd), "timeout 300 " MPIRUN " -np 2 ./train_gpt %s --pp 2 --trace %s --log %s", common, path, log);
    int rc = run_capture(cmd, out, sizeof(out));
    FILE* f = fopen(path, "r");
    char* text = (char*)callocCheck(1 << 20, 1);
    size_t n = f ? fread(text, 1, (1 << 20) - 1, f) : 0;
    if (f) { fclose(f); }
    int spans = 0;
    for (const char* q = text; (q = strstr(q, "\"ph\": \"X\"")) != NULL; q++) { spans++; }
    // 3 steps x 4 micro-batches x (forward + backward) per rank, two ranks, plus receives and optimizer steps
    int ok = rc == 0 && n > 0 && strncmp(text, "{\"traceEvents\": [", 17) == 0 && strstr(text, "\"rank 1\"") &&
             strstr(text, "backward chunk 0 mb 3") && strstr(text, "forward chunk 1 mb 0") && strstr(text, "optimizer (step 3)") &&
             spans >= 2 * 3 * 4 * 2 && text[n - 2] == '}';
    report(ok, "--trace writes a Chrome/Perfetto trace of both ranks' forward, backward, receive and optimizer spans", "exit %d, %zu bytes, %d spans", rc, n, spans);
    if (rc == 0) {
        compare_losses("--trace leaves the run unchanged, bit for bit (losses)", plain, 0, log, 10, 0.0);
        compare_values("--trace leaves the run unchanged, bit for bit (gradient norms)", "grad_norm", plain, log, 10, 0.0);
    }
    free(text);
}

// --micro-batches M instead of --total-batch-size: the step is M micro-batches of B x T per data-parallel rank, the
// same run as the 1f1b layout's (64 tokens: 4 micro-batches of 2 x 8), bit for bit.
static void test_pp_micro_batches(const char* model, const char* shard, const char* vshard) {
    char cmd[8192], out[65536], log[1024], plain[1024];
    snprintf(log, sizeof(log), "%s/micro.jsonl", DIR_PP);
    snprintf(plain, sizeof(plain), "%s/pp_0.jsonl", DIR_PP); // --pp 2 (1f1b) with --total-batch-size 64
    snprintf(cmd, sizeof(cmd), "timeout 300 " MPIRUN " -np 2 ./train_gpt --init %s --train %s --batch-size 2 --seq-len 8 --micro-batches 4 "
             "--lr 1e-3 --warmup 2 --weight-decay 0.1 --grad-clip 0.5 --threads 1 --steps 10 --val %s --val-every 5 --val-steps 7 --pp 2 --log %s",
             model, shard, vshard, log);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "4 micro-batches"), "--micro-batches 4 without --total-batch-size: runs, 4 micro-batches a step",
           "exit %d: %.300s", rc, out);
    if (rc == 0) { compare_losses("--micro-batches 4 is --total-batch-size 64 (4 x 2 x 8), bit for bit (losses)", plain, 0, log, 10, 0.0); }
}

// Impossible settings are refused at start with one clear line.
static void test_pp_refusals(const char* model, const char* shard) {
    char cmd[8192], out[65536];
    const struct { const char* name; int np; const char* args; const char* expect; } cases[7] = {
        {"--pp 3 on 2 ranks", 2, "--pp 3", "not divisible by tp*pp"},
        {"more stages than blocks", 8, "--pp 8", "4 blocks cannot fill 8 pipeline chunks"},
        {"interleaved with micro-batches that are not a multiple of pp", 2, "--pp 2 --pp-schedule interleaved --virtual-stages 2 --total-batch-size 48",
         "multiple of --pp 2"},
        {"virtual stages without the interleaved schedule", 2, "--pp 2 --virtual-stages 2", "needs --pp-schedule interleaved"},
        {"an unknown schedule", 2, "--pp 2 --pp-schedule zigzag", "unknown schedule 'zigzag'"},
        {"ZeRO-3 with a pipeline", 2, "--pp 2 --zero 3", "ZeRO-3 shards the parameters of unpipelined runs only"},
        {"--micro-batches that disagree with --total-batch-size", 2, "--pp 2 --micro-batches 4 --total-batch-size 48",
         "--micro-batches 4 and --total-batch-size 48 disagree: 4 micro-batches of 2 x 8 on 1 data-parallel rank(s) are 64 tokens"},
    };
    for (int k = 0; k < 7; k++) {
        snprintf(cmd, sizeof(cmd), "timeout 60 " MPIRUN " -np %d ./train_gpt --init %s --train %s --batch-size 2 --seq-len 8 --steps 1 --threads 1 %s",
                 cases[k].np, model, shard, cases[k].args);
        int rc = run_capture(cmd, out, sizeof(out));
        char name[256];
        snprintf(name, sizeof(name), "refused: %s", cases[k].name);
        report(rc != 0 && rc != 124 && strstr(out, cases[k].expect) != NULL, name, "exit %d: %.300s", rc, out);
    }
}

int main(void) {
    if (!file_exists("./train_gpt")) { fatal("test_pp_runs: ./train_gpt is missing: run make first (from the repository root)"); }
    if (system("command -v mpirun > /dev/null 2>&1") != 0) { printf("SKIP pipeline-parallel runs: mpirun not found\n"); return test_summary(); }
    char cmd[8192], out[65536];
    DIR_PP = test_scratch_dir("test_pp_runs");
    // the model: 4 blocks of the reference model's width (maxT 16, V 101 padded to 128, NH 4, C 32), GPT-2's init
    char model[1024];
    snprintf(model, sizeof(model), "%s/model_l4.bin", DIR_PP);
    write_init_model(model, (GPTConfig){16, 101, 128, 4, 4, 32}, 4242);
    char shard[1024], vshard[1024], common[6144], quiet[4096], ref_log[1024];
    snprintf(shard, sizeof(shard), "%s/train_000000.bin", DIR_PP);
    write_shard(shard, 8000, 101, 21, 20240520, 1, 8000);
    snprintf(vshard, sizeof(vshard), "%s/val_000000.bin", DIR_PP);
    write_shard(vshard, 1000, 101, 22, 20240520, 1, 1000);
    // 64 tokens per step: 4 micro-batches of 2 x 8 (the pipeline's M), 2 with 2 data-parallel ranks
    snprintf(quiet, sizeof(quiet), "--init %s --train %s --batch-size 2 --seq-len 8 --total-batch-size 64 --lr 1e-3 --warmup 2 "
             "--weight-decay 0.1 --grad-clip 0.5 --threads 1 --steps 10", model, shard);
    snprintf(common, sizeof(common), "%s --val %s --val-every 5 --val-steps 7", quiet, vshard); // with evaluation
    snprintf(ref_log, sizeof(ref_log), "%s/ref.jsonl", DIR_PP);
    snprintf(cmd, sizeof(cmd), "./train_gpt %s --log %s --checkpoint-every 5 --out %s/o_ref --sample-every 10 --gen-tokens 6" SAMPLE_FILTERS, common, ref_log, DIR_PP);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "sample: "), "one process, 10 steps (the reference)", "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
    if (rc == 0) {
        test_pp_layouts(common, quiet, ref_log, out);
        test_pp_resume(common, ref_log);
        test_pp_bf16(common);
        test_pp_trace(common);
        test_pp_micro_batches(model, shard, vshard);
    }
    test_pp_refusals(model, shard);
    return test_summary();
}
