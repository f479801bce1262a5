/*
fuzz/llmc_state.c: fuzzes the import of llm.c's checkpoints (llmc_state.h: llmc_newest_step, llmc_import): llm.c's
per-process state files DIR/state_00000004_RRRRR.bin beside DIR/DONE_00000004 and a valid model file of the tiny
model (L 1, C 4, V 5, Vp 8, maxT 8, 316 parameters), which the harness writes.

  make fuzz-build && fuzz/bin/llmc_state -close_fd_mask=3 fuzz/corpus/llmc_state
  fuzz/bin/llmc_state CRASH_FILE                                        (reproduces one input, with messages)

Input: the state files of processes 0, 1, ... separated by "\n@@rank@@\n" (at most 4).
Invariants (abort = a finding): whatever the import accepts, this trainer's strict loader accepts too (the
converted state's size, checksums and header pass checkpoint_check_files and checkpoint_load_state) with the step 4,
AdamW's update count 4 and no data position of ours (data word 0 is 0).
*/
#include "fuzz_common.h"

#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c" // defines: llmc_newest_step, llmc_import, checkpoint_load_state, GPT, ZeroOptimizer

#define RANK_SEP "\n@@rank@@\n"
#define MAX_RANKS 4

static ParallelContext g_pc;
static GPT g_model;
static ZeroOptimizer g_zero;
static char g_dir[1024];      // llm.c's output directory
static Config g_config;       // the seed of a fresh run (train_state_fresh)

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
    parallel_init(&g_pc, argc, argv);
    parallel_set_layout(&g_pc, 1, 1, 300.0);
    GPTConfig g = { .max_seq_len = 8, .vocab_size = 5, .padded_vocab_size = 8, .num_layers = 1, .num_heads = 1, .channels = 4 };
    gpt_alloc_params(&g_model, &g, 1, DTYPE_FP32, g.max_seq_len); // (CPU: the parameters are host floats)
    for (size_t i = 0; i < g_model.layout.num_params; i++) { g_model.params[i] = 0.001f * (float)i; }
    gpt_zero_init(&g_zero, &g_model, 0, &g_pc.dp_group);
    snprintf(g_dir, sizeof(g_dir), "%s/llmc", fuzz_tmpdir());
    mkdir(g_dir, 0755);
    char path[1200];
    snprintf(path, sizeof(path), "%s/model_00000004.bin", g_dir);
    model_save(path, &g_model.layout, g_model.params);
    snprintf(path, sizeof(path), "%s/DONE_00000004", g_dir);
    FILE* fp = (fopen)(path, "wb");
    if (!fp) { abort(); }
    (fclose)(fp);
    g_config.seed = 1337;
    g_config.outlier_window = 4;
    return 0;
}

typedef struct {
    const uint8_t* part[MAX_RANKS];
    size_t len[MAX_RANKS];
    int parts;
    int imported;      // set once llmc_import returned: from then on nothing may fail
} Input;

static void run(void* arg) {
    Input* in = (Input*)arg;
    char path[1200];
    for (int r = 0; r < MAX_RANKS; r++) {
        snprintf(path, sizeof(path), "%s/state_00000004_%05d.bin", g_dir, r);
        if (r >= in->parts) { unlink(path); continue; }
        FILE* fp = (fopen)(path, "wb");
        if (!fp) { return; }
        if (in->len[r] && fwrite(in->part[r], 1, in->len[r], fp) != in->len[r]) { abort(); }
        (fclose)(fp);
    }
    int step = llmc_newest_step(g_dir);
    if (step != (in->parts > 0 ? 4 : -1)) { fuzz_fail("llmc_newest_step found %d with %d state files", step, in->parts); }
    if (step < 0) { return; }
    TrainState fresh;
    train_state_fresh(&fresh, &g_config, 1.0f);
    llmc_import(g_dir, step, &fresh);
    in->imported = 1;
    if (fuzz_verbose()) { fprintf(stderr, "llmc_state: imported; loading it as a checkpoint of ours\n"); }
    // as main(): the model file checksummed with the kind the state names, then the state
    int kind = checkpoint_check_files(g_dir, step, g_model.layout.num_params).sum_kind;
    GPTConfig g2;
    int version;
    FILE* fp;
    snprintf(path, sizeof(path), "%s/model_00000004.bin", g_dir);
    model_read_header(path, &g2, &version, &fp);
    float* host = (float*)malloc(g_model.layout.num_params * sizeof(float));
    uint64_t model_sum = model_load_params_sum(path, fp, version, &g_model.layout, host, kind);
    free(host);
    TrainState ts;
    train_state_fresh(&ts, &g_config, 1.0f);
    checkpoint_load_state(g_dir, step, &g_model, &g_zero, &ts, model_sum);
    if (ts.step != 4 || ts.adam_t != 4 || ts.data_state[0] != 0) {
        fuzz_fail("the converted state loads as step %d, %d updates, data word 0 %llu", ts.step, ts.adam_t, (unsigned long long)ts.data_state[0]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in;
    memset(&in, 0, sizeof(in));
    in.parts = size ? fuzz_split(data, size, RANK_SEP, in.part, in.len, MAX_RANKS) : 0;
    int ok = fuzz_call(run, &in);
    if (in.imported && !ok) { fuzz_fail("llmc_import accepted a checkpoint that this trainer's loader then refused"); }
    char path[1200];
    snprintf(path, sizeof(path), "%s/state_00000004.bin", g_dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/latest", g_dir);
    unlink(path);
    return 0;
}
