/*
fuzz/checkpoint.c: fuzzes train_gpt.c's resume path: DIR/latest (checkpoint_latest_step), the state file
DIR/state_XXXXXXXX.bin (checkpoint_load_state: size, header, AdamW moments, checksums) and the data sampler state
it carries (dataloader_set_state, then a few batches), for a tiny model built by the harness (L 1, C 4, V 5), whose
model file the harness writes next to the state.

  make fuzz-build && fuzz/bin/checkpoint -close_fd_mask=3 fuzz/corpus/checkpoint
  fuzz/bin/checkpoint CRASH_FILE                                        (reproduces one input, with messages)

Input: one flag byte, then the contents of `latest`, the separator "\n@@state@@\n", and the state file (written
under the step that `latest` names). Flag bit 0: the harness recomputes the two checksums in the state header
(payload and model) before loading, so mutations get past them to the header words and the sampler state.
Invariants (abort = a finding): a loaded state has the step of `latest`; batches after a restored sampler
position hold tokens < V.
*/
#include "fuzz_common.h"

#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c" // defines: checkpoint_latest_step, checkpoint_load_state, GPT, ZeroOptimizer, DataLoader

#define STATE_SEP "\n@@state@@\n"

static ParallelContext g_pc;
static GPT g_model;
static ZeroOptimizer g_zero;
static DataLoader g_loader[2]; // shuffle 0 and 1 over one tiny shard
static char g_dir[1024];       // the checkpoint directory
static uint8_t* g_model_file;  // (g_model_file_len) the tiny model as an llm.c model file
static size_t g_model_file_len;
static uint64_t g_model_sum[3]; // its checksum of each kind (CHECKSUM_FNV, CHECKSUM_XXH3), as model_load_params_sum returns it

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
    parallel_init(&g_pc, argc, argv);
    parallel_set_layout(&g_pc, 1, 1, 300.0);
    GPTConfig g = { .max_seq_len = 8, .vocab_size = 5, .padded_vocab_size = 8, .num_layers = 1, .num_heads = 1, .channels = 4 };
    gpt_alloc_params(&g_model, &g, 1, DTYPE_FP32, g.max_seq_len); // (CPU: the parameters are host floats)
    for (size_t i = 0; i < g_model.layout.num_params; i++) { g_model.params[i] = 0.001f * (float)i; }
    gpt_zero_init(&g_zero, &g_model, 0, &g_pc.dp_group);
    // the model file of every checkpoint the harness writes: saved and loaded back by train_gpt.c's own code
    char path[1024], err[512];
    snprintf(path, sizeof(path), "%s/model_ref.bin", fuzz_tmpdir());
    model_save(path, &g_model.layout, g_model.params);
    GPTConfig g2;
    int version;
    FILE* fp;
    model_read_header(path, &g2, &version, &fp);
    g_model_sum[CHECKSUM_FNV] = model_load_params_sum(path, fp, version, &g_model.layout, g_model.params, CHECKSUM_FNV);
    model_read_header(path, &g2, &version, &fp);
    g_model_sum[CHECKSUM_XXH3] = model_load_params_sum(path, fp, version, &g_model.layout, g_model.params, CHECKSUM_XXH3);
    g_model_file_len = (size_t)file_size(path);
    g_model_file = (uint8_t*)mallocCheck(g_model_file_len);
    fp = fopenCheck(path, "rb");
    freadCheck(g_model_file, 1, g_model_file_len, fp, path);
    fclose(fp);
    // one shard of 64 tokens (ids 0..4), the data set the states in the corpus were saved for
    uint8_t shard[1024 + 64 * 2];
    memset(shard, 0, sizeof(shard));
    int32_t header[3] = {20240520, 1, 64};
    memcpy(shard, header, sizeof(header));
    for (int i = 0; i < 64; i++) { uint16_t t = (uint16_t)(i % 5); memcpy(shard + 1024 + 2 * i, &t, 2); }
    fuzz_write_file("train_000.bin", shard, sizeof(shard), path, sizeof(path));
    for (int s = 0; s < 2; s++) {
        if (dataloader_init(&g_loader[s], path, 1, 4, 0, 1, s, 1337, 5, err, sizeof(err)) != 0) {
            fprintf(stderr, "fuzz/checkpoint: %s\n", err);
            abort();
        }
    }
    snprintf(g_dir, sizeof(g_dir), "%s/ckpt", fuzz_tmpdir());
    mkdir(g_dir, 0755);
    return 0;
}

typedef struct {
    int fix_checksums;
    const uint8_t *latest, *state;
    size_t latest_len, state_len;
    char model_path[2048], state_path[2048]; // written by run(), removed by the caller
} Input;

// Puts the checksums that checkpoint_load_state expects into a state file of the right size: the payload (m, v and
// in version 5 perhaps the master weights, in chunks as stream_shard_in reads them; in version 6 then PowerSGD's Q
// and error feedback, as stream_powersgd_in reads them; in version 7 then the outlier guard's windows), then the
// header (state_header_sum), and the model file's checksum.
static void fix_checksums(uint8_t* st, size_t len) {
    size_t n = g_model.layout.num_params;
    if (len < (size_t)ST_HEADER_WORDS * 8) { return; }
    uint64_t h[ST_HEADER_WORDS];
    memcpy(h, st, sizeof(h));
    int kind, vectors = 2;
    size_t psgd_q = 0, psgd_ranks = 0, guard_w = 0;
    if (h[ST_VERSION] == STATE_VERSION_FNV) { kind = CHECKSUM_FNV; }
    else if (h[ST_VERSION] == STATE_VERSION_XXH3) { kind = CHECKSUM_XXH3; }
    else if ((h[ST_VERSION] == STATE_VERSION || h[ST_VERSION] == STATE_VERSION_PSGD || h[ST_VERSION] == STATE_VERSION_OUTLIER) &&
             (h[ST_SUM_KIND] == CHECKSUM_FNV || h[ST_SUM_KIND] == CHECKSUM_XXH3) && h[ST_HAS_MASTER] <= 1) {
        kind = (int)h[ST_SUM_KIND];
        vectors += (int)h[ST_HAS_MASTER];
        if (h[ST_VERSION] == STATE_VERSION_OUTLIER) {
            if (h[ST_OUTLIER_WINDOW] < 1 || h[ST_OUTLIER_WINDOW] > OUTLIER_MAX_WINDOW) { return; }
            guard_w = (size_t)h[ST_OUTLIER_WINDOW];
        }
        if (h[ST_VERSION] == STATE_VERSION_PSGD || (h[ST_VERSION] == STATE_VERSION_OUTLIER && h[ST_PSGD_RANK] != 0)) {
            if (h[ST_PSGD_Q] >= n || h[ST_PSGD_RANKS] > 64) { return; } // (sizes the harness can hold)
            psgd_q = (size_t)h[ST_PSGD_Q];
            psgd_ranks = (size_t)h[ST_PSGD_RANKS];
        }
    } else { return; }
    if (len != (size_t)state_file_bytes(n, vectors == 3) + 4 * (psgd_q + psgd_ranks * n) + 16 * (guard_w + (guard_w > 0))) { return; }
    memcpy(st + 8 * ST_MODEL_SUM, &g_model_sum[kind], 8);
    h[ST_MODEL_SUM] = g_model_sum[kind];
    Checksum sum;
    checksum_begin(&sum, kind);
    for (int k = 0; k < vectors; k++) {
        const uint8_t* p = st + (size_t)ST_HEADER_WORDS * 8 + (size_t)k * 4 * n;
        for (size_t off = 0; off < n; off += STATE_CHUNK_FLOATS) {
            size_t cnt = n - off < STATE_CHUNK_FLOATS ? n - off : STATE_CHUNK_FLOATS;
            checksum_add(&sum, p + 4 * off, cnt * 4);
        }
    }
    const uint8_t* p = st + (size_t)ST_HEADER_WORDS * 8 + (size_t)vectors * 4 * n;
    for (size_t k = 0; k < 1 + psgd_ranks && psgd_q + psgd_ranks > 0; k++) { // Q, then each rank's error feedback
        size_t len_k = k == 0 ? psgd_q : n;
        for (size_t off = 0; off < len_k; off += STATE_CHUNK_FLOATS) {
            size_t cnt = len_k - off < STATE_CHUNK_FLOATS ? len_k - off : STATE_CHUNK_FLOATS;
            checksum_add(&sum, p + 4 * off, cnt * 4);
        }
        p += 4 * len_k;
    }
    for (int k = 0; k < 2 && guard_w > 0; k++) { // the outlier guard's windows, as outlier_section_in reads them
        checksum_add(&sum, p, 8 * (guard_w + 1));
        p += 8 * (guard_w + 1);
    }
    uint64_t total = state_header_sum(h, &sum);
    memcpy(st + 8 * ST_STATE_SUM, &total, 8);
}

// Writes one file (the harness's own writes are not tracked). Returns 0 if the path cannot be created.
static int write_file(const char* path, const uint8_t* data, size_t n) {
    FILE* fp = (fopen)(path, "wb");
    if (fp == NULL) { return 0; }
    if (fwrite(data, 1, n, fp) != n) { abort(); }
    (fclose)(fp);
    return 1;
}

static void run(void* arg) {
    Input* in = (Input*)arg;
    char path[2048];
    fuzz_write_file("ckpt/latest", in->latest, in->latest_len, path, sizeof(path));
    int step = checkpoint_latest_step(g_dir); // as main(): the step, then the pair of files it names
    checkpoint_paths(g_dir, step, in->model_path, in->state_path, sizeof(in->state_path));
    uint8_t* st = (uint8_t*)malloc(in->state_len + 1);
    memcpy(st, in->state, in->state_len);
    if (in->fix_checksums) { fix_checksums(st, in->state_len); }
    int ok = write_file(in->model_path, g_model_file, g_model_file_len) && write_file(in->state_path, st, in->state_len);
    free(st);
    if (!ok) { return; }
    TrainState ts;
    memset(&ts, 0, sizeof(ts));
    ts.loss_scale.scale = 1.0f;
    outlier_init(&ts.loss_w, 4); // a run's --outlier-window: a saved window of another size is cut to its newest 4
    outlier_init(&ts.norm_w, 4);
    // as main(): the pair and the state's size and version first, then the model file checksummed with the kind
    // the state names
    int kind = checkpoint_check_files(g_dir, step, g_model.layout.num_params).sum_kind;
    checkpoint_load_state(g_dir, step, &g_model, &g_zero, &ts, g_model_sum[kind]);
    if (ts.step != step) { fuzz_fail("loaded step %d from a checkpoint named %d", ts.step, step); }
    const OutlierWindow* ws[2] = {&ts.loss_w, &ts.norm_w};
    for (int k = 0; k < 2; k++) {
        if (ws[k]->window != 4 || ws[k]->count < 0 || ws[k]->count > 4 || ws[k]->count > step) { fuzz_fail("outlier window %d holds %d values", ws[k]->window, ws[k]->count); }
        for (int i = 0; i < ws[k]->count; i++) {
            if (!isfinite(ws[k]->vals[i])) { fuzz_fail("a loaded outlier-window value is not finite"); }
        }
    }
    DataLoader* dl = &g_loader[ts.data_state[1] == 1];
    dataloader_reset(dl);
    char err[512];
    if (dataloader_set_state(dl, ts.data_state, err, sizeof(err)) != 0) {
        if (fuzz_verbose()) { fprintf(stderr, "dataloader_set_state: %s\n", err); }
        return;
    }
    if (fuzz_verbose()) { fprintf(stderr, "checkpoint: loaded step %d, sampler state restored\n", step); }
    for (int b = 0; b < 3; b++) {
        dataloader_next_batch(dl);
        for (int i = 0; i < dl->B * dl->T; i++) {
            if (dl->inputs[i] < 0 || dl->inputs[i] >= 5 || dl->targets[i] < 0 || dl->targets[i] >= 5) {
                fuzz_fail("batch token out of range after a restored sampler state");
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in;
    memset(&in, 0, sizeof(in));
    in.fix_checksums = size > 0 && (data[0] & 1);
    const uint8_t* part[2];
    size_t len[2];
    size_t skip = size > 0 ? 1 : 0;
    int parts = fuzz_split(data + skip, size - skip, STATE_SEP, part, len, 2);
    in.latest = part[0];
    in.latest_len = len[0];
    in.state = parts > 1 ? part[1] : part[0] + len[0];
    in.state_len = parts > 1 ? len[1] : 0;
    fuzz_call(run, &in);
    if (in.model_path[0]) { unlink(in.model_path); } // one checkpoint at a time, whatever step it was named for
    if (in.state_path[0]) { unlink(in.state_path); }
    return 0;
}
