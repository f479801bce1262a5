/*
llmc_state.h: llm.c's checkpoints, both ways: an llm.c run continued here (llmc_import), and llm.c's state files
written beside our checkpoints so that llm.c continues a run of ours (llmc_export, --llmc-checkpoints). Included by
train_gpt.c after checkpoint.h (it uses this trainer's state format, the layout and model files, and dataloader.h's
llm.c order; not a standalone header).

llm.c's checkpoint of step S in its output directory (train_gpt2.cu's -o) is model_S.bin (an llm.c model file, which
this trainer reads as it is), one state_S_RRRRR.bin per process, and an empty DONE_S once they are all written
(XXXXXXXX steps, RRRRR ranks, zero-padded). A state file (llm.c's save_state) is:
  a header of 256 int32: [0] 20240527, [1] version 1, [2] processes N, [3] this rank, [4] fp32 master weights kept
  (0/1), [5] data shuffled (0/1), [10] the step, [20..23] its stochastic-rounding RNG (two uint64), [30..33] its data
  position (shard index and sample index, two size_t);
  AdamW's m, then v, then (when [4]) the master weights: `shard` floats each;
  when [5], its data loader's shuffle: a size_t shard count and that many int32, a size_t sample count and that
  many int32, and its mt19937 state (2520 bytes).
The vectors follow llm.c's flat parameter order (the model file's). Without ZeRO (-z 0) every process holds all of
them (shard = every parameter). Under ZeRO-1 (-z 1), shard = parameters / N, cut tensor by tensor and layer by layer
as llm.c's gpt2_update walks them: for each of the 16 tensor kinds (flat offset O, per-layer size s, L layers for the
12 layer kinds, one "layer" for wte, wpe, lnfw, lnfb), for each layer l, process r holds elements [r s/N, (r+1) s/N)
of that layer's tensor at O/N + l s/N of its shard. Which of the two a checkpoint is follows from its files' size.

The import: when --resume DIR (or -y 1's --out) holds no `latest` of ours but a DONE_S beside llm.c's state files,
rank 0 converts the newest such checkpoint into this trainer's, in place: it writes state_S.bin (our format) beside
llm.c's model_S.bin, which stays as it was, and `latest`; the ordinary resume then reads them, and llm.c's files are
left untouched. What comes over: the step, the moments, the master weights (a state without them, llm.c's -w 0:
then the model file's values are the masters, as for any fp32 checkpoint), and AdamW's update count (llm.c's bias
correction uses t = step + 1 at every step: S updates done). The data: the converted state's data words are zero,
which tells the resume to place the loader where this run's order is after S steps (dataloader_skip); in llm.c's
own orders (--shuffle 2 or 0, with llm.c's B, T and processes) that is llm.c's position, which the state keeps to
compare (llmc_data_note). Not carried over: llm.c's rounding RNG (our stochastic rounding hashes the seed, the update
count and the index), so the state gets the seed-derived words of a fresh run.
*/
#ifndef LLMC_STATE_H
#define LLMC_STATE_H

#define LLMC_STATE_HEADER_BYTES 1024
#define LLMC_MT19937_BYTES 2520 // sizeof(mt19937_state): a uint64 seed, an int, a uint32, 624 + 2 uint32
#define LLMC_MAX_PROCESSES 65536
// The data words of a converted state (word 0, the loader's magic, is 0: the position follows from the step):
enum { LLMC_DATA_RECORDED = 1, LLMC_DATA_SHUFFLED, LLMC_DATA_SHARD, LLMC_DATA_SAMPLE };

// The newest step S of an llm.c checkpoint in dir: the largest S with DONE_S and state_S_00000.bin (our checkpoints
// leave DONE_S too, and llm.c's state files only with --llmc-checkpoints, which then import as llm.c's do); -1 if
// there is none.
static int llmc_newest_step(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) { return -1; }
    int best = -1;
    struct dirent* ent;
    char sp[2200];
    while ((ent = readdir(d)) != NULL) {
        int s = checkpoint_name_step_in(ent->d_name, "DONE_", "");
        if (s <= best) { continue; }
        snprintf(sp, sizeof(sp), "%s/state_%08d_00000.bin", dir, s);
        if (file_exists(sp)) { best = s; }
    }
    closedir(d);
    return best;
}

// The step of the llm.c checkpoint in dir that a resume from dir converts first, or -1: the newest one
// (llmc_newest_step) when dir has no `latest` of ours; when it has, the newest one of llm.c's own (not written by
// --llmc-checkpoints) if it is newer than `latest`: llm.c continued the run after us.
static int llmc_step_to_import(const char* dir) {
    int step = llmc_newest_step(dir);
    char lp[2100];
    snprintf(lp, sizeof(lp), "%s/latest", dir);
    if (step < 0 || !file_exists(lp)) { return step; }
    return checkpoint_is_llmc(dir, step) && step > checkpoint_latest_step(dir) ? step : -1;
}

// Whether llm.c's ZeRO-1 can split the model of layout el over N processes: llm.c needs every tensor of a layer
// (and so the whole) to divide by N, else it runs without ZeRO.
static int llmc_can_shard(const ParamLayout* el, int N) {
    int ok = N > 1 && el->num_params % (size_t)N == 0;
    for (int i = 0; i < el->num_tensors && ok; i++) { ok = (el->table[i].rows * el->table[i].cols) % (size_t)N == 0; }
    return ok;
}

// One process's state file, opened and checked against the header of rank 0's (h0; NULL for rank 0 itself). The
// import holds one open at a time (a run of thousands of processes would exhaust the descriptors otherwise).
typedef struct {
    char path[2200];
    FILE* fp;
    int32_t h[256];
} LlmcRankFile;

static void llmc_open_rank(LlmcRankFile* f, const char* dir, int step, int rank, const int32_t* h0) {
    snprintf(f->path, sizeof(f->path), "%s/state_%08d_%05d.bin", dir, step, rank);
    if (!file_exists(f->path)) { fatal("llm.c checkpoint of step %d in '%s': '%s' is missing (its DONE_%08d says all %d processes wrote theirs)", step, dir, f->path, step, h0 ? h0[2] : 1); }
    if (file_size(f->path) < LLMC_STATE_HEADER_BYTES) { fatal("llm.c state '%s' is truncated: shorter than its 1024-byte header", f->path); }
    f->fp = fopenCheck(f->path, "rb");
    freadCheck(f->h, sizeof(int32_t), 256, f->fp, f->path);
    const int32_t* h = f->h;
    if (h[0] != LLMC_STATE_MAGIC) { fatal("llm.c state '%s': bad magic number %d (expected %d)", f->path, h[0], LLMC_STATE_MAGIC); }
    if (h[1] != 1) { fatal("llm.c state '%s': unsupported version %d (llm.c writes 1)", f->path, h[1]); }
    if (h[2] < 1 || h[2] > LLMC_MAX_PROCESSES || h[3] != rank || (h[4] != 0 && h[4] != 1) || (h[5] != 0 && h[5] != 1) || h[10] != step) {
        fatal("llm.c state '%s': corrupt header (processes %d, rank %d, master weights %d, shuffle %d, step %d; expected rank %d, step %d)",
              f->path, h[2], h[3], h[4], h[5], h[10], rank, step);
    }
    if (h0 && (h[2] != h0[2] || h[4] != h0[4] || h[5] != h0[5])) {
        fatal("llm.c state '%s' disagrees with rank 0's (processes %d vs %d, master weights %d vs %d, shuffle %d vs %d)",
              f->path, h[2], h0[2], h[4], h0[4], h[5], h0[5]);
    }
}

// The size a state file must have when each vector holds `shard` floats: the header, the vectors, and the shuffle
// section, whose two counts are read from the file itself (-1 when they cannot be: the file is too short).
static long long llmc_expected_bytes(LlmcRankFile* f, size_t shard) {
    long long at = LLMC_STATE_HEADER_BYTES + 4LL * (2 + f->h[4]) * (long long)shard, size = file_size(f->path);
    if (!f->h[5]) { return at; }
    for (int k = 0; k < 2; k++) { // the shard indices, then the sample indices: a size_t count and that many int32
        uint64_t count = 0;
        if (at + 8 > size) { return -1; }
        fseekCheck(f->fp, (long)at, SEEK_SET, f->path);
        freadCheck(&count, 8, 1, f->fp, f->path);
        if (count > (uint64_t)size) { return -1; }
        at += 8 + 4LL * (long long)count;
    }
    return at + LLMC_MT19937_BYTES;
}

// Copies `count` floats from f (starting at float `from` of its first vector `vec`: 0 m, 1 v, 2 master weights) to
// out at float `to` of our state's vector `vec`, checking every value is finite. buf: STATE_CHUNK_FLOATS floats.
static void llmc_copy(LlmcRankFile* f, size_t shard, int vec, size_t from, FILE* out, const char* out_path, size_t n, size_t to,
                      size_t count, float* buf) {
    static const char* names[3] = {"m", "v", "master weight"};
    for (size_t k = 0; k < count; k += STATE_CHUNK_FLOATS) {
        size_t cnt = count - k < STATE_CHUNK_FLOATS ? count - k : STATE_CHUNK_FLOATS;
        fseekCheck(f->fp, (long)(LLMC_STATE_HEADER_BYTES + 4 * ((size_t)vec * shard + from + k)), SEEK_SET, f->path);
        freadCheck(buf, sizeof(float), cnt, f->fp, f->path);
        for (size_t i = 0; i < cnt; i++) {
            if (!isfinite(buf[i])) { fatal("llm.c state '%s': %s %zu of its shard is not finite", f->path, names[vec], from + k + i); }
        }
        fseekCheck(out, (long)(ST_HEADER_WORDS * 8 + 4 * ((size_t)vec * n + to + k)), SEEK_SET, out_path);
        fwriteCheck(buf, sizeof(float), cnt, out, out_path);
    }
}

static void llmc_discard_put(void* self, size_t off, const float* x, size_t n) { (void)self; (void)off; (void)x; (void)n; }

// After the loader was placed by step (dataloader_skip) for a state converted from llm.c's (data words d): says
// whether the data continue as llm.c's would. llm.c's position is (stream position of the shard, group in it), rank
// 0's: in llm.c's own orders (its shuffled one is --shuffle 2, its unshuffled one --shuffle 0) the replay reaches it
// exactly when B, T and the processes are llm.c's; the sampler (--shuffle 1) has no such position. Rank 0 prints.
static void llmc_data_note(const DataLoader* dl, const uint64_t* d, int step) {
    if (d[LLMC_DATA_RECORDED] != 1) { return; }
    int shuffled = d[LLMC_DATA_SHUFFLED] != 0;
    uint64_t group = (uint64_t)dl->B * (uint64_t)dl->T * (uint64_t)dl->world;
    const char* mine = shuffled ? "llm.c's shuffled order (--shuffle 2)" : "llm.c's unshuffled order (--shuffle 0)";
    if (dl->shuffle != (shuffled ? 2 : 0)) {
        printf("note: the data continue where this run's %s is after step %d, not at llm.c's position (in %s, which this run "
               "does not use)\n", dl->shuffle == 1 ? "sampler (--shuffle 1)" : "order", step, mine);
        return;
    }
    uint64_t sample = shuffled ? dl->position : dl->position / group;
    if ((uint64_t)dl->shard_index == d[LLMC_DATA_SHARD] && sample == d[LLMC_DATA_SAMPLE]) {
        printf("data: %s replayed to step %d reaches shard %d, group %llu, as llm.c's state records: the data continue as in llm.c\n",
               mine, step, dl->shard_index, (unsigned long long)sample);
    } else {
        printf("warning: %s replayed to step %d reaches shard %d, group %llu, but llm.c's state records shard %llu, group %llu: "
               "its run had other B, T or processes than this one (or did not start at step 0), and the data continue from the "
               "replay\n", mine, step, dl->shard_index, (unsigned long long)sample, (unsigned long long)d[LLMC_DATA_SHARD],
               (unsigned long long)d[LLMC_DATA_SAMPLE]);
    }
}

// Rank 0: converts llm.c's checkpoint of `step` in dir into this trainer's (state_XXXXXXXX.bin and `latest` beside
// its model file; see the header comment). `fresh` holds the words a fresh run of this configuration starts with (its
// RNG and stochastic-rounding seed). Every problem exits naming the file; nothing of llm.c's is changed.
static void llmc_import(const char* dir, int step, const TrainState* fresh) {
    char mp[2048], sp[2048];
    checkpoint_paths(dir, step, mp, sp, sizeof(mp));
    GPTConfig g;
    int version = 0;
    FILE* mfp = NULL;
    model_read_header(mp, &g, &version, &mfp); // (exits if the model file is missing or malformed)
    ParamLayout el;
    layout_build(&el, &g);
    size_t n = el.num_params;
    // the model file's checksum, as the resume will compute it while loading it
    ParamStream discard = {llmc_discard_put, NULL, NULL};
    uint64_t model_sum = model_load_stream(mp, mfp, version, &el, &discard, CHECKSUM_DEFAULT);

    LlmcRankFile first, f;
    llmc_open_rank(&first, dir, step, 0, NULL);
    int N = first.h[2], master = first.h[4];
    int can_shard = llmc_can_shard(&el, N), stage = -1;
    long long e0 = llmc_expected_bytes(&first, n), e1 = can_shard ? llmc_expected_bytes(&first, n / (size_t)N) : -2;
    long long size0 = file_size(first.path);
    fclose(first.fp);
    if (size0 == e0) { stage = 0; } else if (size0 == e1) { stage = 1; }
    if (stage < 0 && e0 < 0 && e1 < 0) {
        fatal("llm.c state '%s' is %lld bytes: read as %s, its data loader section (after the moments) is cut short or holds "
              "impossible counts (for the model in '%s', %zu parameters)", first.path, size0,
              can_shard ? "a run without ZeRO or as ZeRO-1 over the processes it records" : "a run without ZeRO", mp, n);
    }
    if (stage < 0 && can_shard) {
        // (an expected size of -1: read as that layout, the file is too short to hold its data loader section's counts)
        char w0[64] = "the size", w1[64] = "the size";
        if (e0 >= 0) { snprintf(w0, sizeof(w0), "the %lld", e0); }
        if (e1 >= 0) { snprintf(w1, sizeof(w1), "the %lld", e1); }
        fatal("llm.c state '%s' is %lld bytes: neither %s of a run without ZeRO nor %s of ZeRO-1 over %d processes "
              "(for the model in '%s', %zu parameters)", first.path, size0, w0, w1, N, mp, n);
    }
    if (stage < 0) {
        fatal("llm.c state '%s' is %lld bytes, expected %lld for the model in '%s' (%zu parameters%s)", first.path, size0, e0, mp, n,
              N > 1 ? ", whole: ZeRO-1 cannot split it over these processes" : "");
    }
    size_t shard = stage == 0 ? n : n / (size_t)N;
    for (int r = 1; r < N; r++) { // every process's file, before anything is written
        llmc_open_rank(&f, dir, step, r, first.h);
        long long want = llmc_expected_bytes(&f, shard), have = file_size(f.path);
        fclose(f.fp);
        if (have != want) { fatal("llm.c state '%s' is %lld bytes, expected %lld (as rank 0's: ZeRO-%d, %zu floats per vector)", f.path, have, want, stage, shard); }
    }

    AtomicFile af;
    atomic_open(&af, sp);
    uint64_t h[ST_HEADER_WORDS] = {0};
    fwriteCheck(h, sizeof(uint64_t), ST_HEADER_WORDS, af.fp, sp);
    float* buf = (float*)mallocCheck(STATE_CHUNK_FLOATS * sizeof(float));
    // process by process (all of them under ZeRO-1, rank 0's whole vectors without), walk the tensors in llm.c's flat
    // order (the table's order): F is the flat offset of table entry i, which is layer l of its kind, whose layers
    // follow one another from the kind's offset F - l * size
    for (int r = 0; r < (stage ? N : 1); r++) {
        llmc_open_rank(&f, dir, step, r, first.h);
        for (int vec = 0; vec < 2 + master; vec++) {
            size_t F = 0;
            for (int i = 0; i < el.num_tensors; i++) {
                const ParamEntry* e = &el.table[i];
                size_t ne = e->rows * e->cols, l = e->layer < 0 ? 0 : (size_t)e->layer;
                if (stage == 0) {
                    llmc_copy(&f, shard, vec, F, af.fp, sp, n, e->offset, ne, buf);
                } else {
                    size_t piece = ne / (size_t)N, kind_offset = F - l * ne;
                    llmc_copy(&f, shard, vec, kind_offset / (size_t)N + l * piece, af.fp, sp, n, e->offset + (size_t)r * piece, piece, buf);
                }
                F += ne;
            }
        }
        fclose(f.fp);
    }
    // the payload's checksum, read back in file order (it was written tensor by tensor)
    if (fflush(af.fp) != 0) { fatal("writing '%s' failed: %s", sp, strerror(errno)); }
    FILE* back = fopenCheck(af.tmp_path, "rb");
    fseekCheck(back, ST_HEADER_WORDS * 8, SEEK_SET, af.tmp_path);
    Checksum sum;
    checksum_begin(&sum, CHECKSUM_DEFAULT);
    size_t total = (size_t)(2 + master) * n;
    for (size_t k = 0; k < total; k += STATE_CHUNK_FLOATS) {
        size_t cnt = total - k < STATE_CHUNK_FLOATS ? total - k : STATE_CHUNK_FLOATS;
        freadCheck(buf, sizeof(float), cnt, back, af.tmp_path);
        checksum_add(&sum, buf, cnt * sizeof(float));
    }
    fclose(back);
    free(buf);
    uint32_t one;
    float f1 = 1.0f;
    memcpy(&one, &f1, 4);
    h[ST_MAGIC] = STATE_MAGIC; h[ST_VERSION] = STATE_VERSION; h[ST_STEP] = (uint64_t)step; h[ST_NUM_PARAMS] = n;
    h[ST_MODEL_SUM] = model_sum; h[ST_RNG] = fresh->rng; h[ST_LOSS_SCALE] = one;
    h[ST_MAXT] = g.max_seq_len; h[ST_V] = g.vocab_size; h[ST_L] = g.num_layers; h[ST_NH] = g.num_heads; h[ST_C] = g.channels;
    h[ST_VP] = g.padded_vocab_size; h[ST_ZERO] = (uint64_t)stage; h[ST_WORLD] = (uint64_t)N;
    h[ST_ADAM_T] = (uint64_t)step; // llm.c updates with t = step + 1 at every step: `step` updates are done
    h[ST_SUM_KIND] = CHECKSUM_DEFAULT; h[ST_DTYPE] = version == 5 ? DTYPE_BF16 : DTYPE_FP32; h[ST_HAS_MASTER] = (uint64_t)master;
    h[ST_SR_SEED] = fresh->sr_seed;
    // data word 0 stays 0: "placed by step" (dataloader_skip); words 1-4 keep llm.c's rank-0 position to check that
    // against (LLMC_DATA_*); h[ST_TOTAL_BATCH] 0: not recorded
    size_t pos[2];
    memcpy(pos, &first.h[30], sizeof(pos)); // (rank 0's)
    h[ST_DATA + LLMC_DATA_RECORDED] = 1; h[ST_DATA + LLMC_DATA_SHUFFLED] = (uint64_t)first.h[5];
    h[ST_DATA + LLMC_DATA_SHARD] = pos[0]; h[ST_DATA + LLMC_DATA_SAMPLE] = pos[1];
    h[ST_STATE_SUM] = state_header_sum(h, &sum);
    fseekCheck(af.fp, 0, SEEK_SET, sp);
    fwriteCheck(h, sizeof(uint64_t), ST_HEADER_WORDS, af.fp, sp);
    atomic_commit(&af);
    char lp[2100];
    snprintf(lp, sizeof(lp), "%s/latest", dir);
    atomic_open(&af, lp);
    fprintf(af.fp, "%d\n", step);
    atomic_commit(&af);
    layout_free(&el);
    printf("resume: '%s' holds llm.c's checkpoint of step %d (%d process%s, %s, %s model file, %s): converted to this trainer's '%s' "
           "beside its model file (llm.c's files unchanged)\n", dir, step, N, N == 1 ? "" : "es", stage ? "ZeRO-1" : "no ZeRO",
           version == 5 ? "bf16" : "fp32", master ? "fp32 master weights" : "no master weights", sp);
    fflush(stdout);
}

// Copies `count` floats from byte `at` of `in` to the end of an llm.c state file.
static void llmc_copy_out(FILE* in, const char* in_path, size_t at, size_t count, FILE* out, const char* out_path, float* buf) {
    fseekCheck(in, (long)at, SEEK_SET, in_path);
    for (size_t k = 0; k < count; k += STATE_CHUNK_FLOATS) {
        size_t cnt = count - k < STATE_CHUNK_FLOATS ? count - k : STATE_CHUNK_FLOATS;
        freadCheck(buf, sizeof(float), cnt, in, in_path);
        fwriteCheck(buf, sizeof(float), cnt, out, out_path);
    }
}

// Rank 0, once a checkpoint of `step` is committed (--llmc-checkpoints 1): llm.c's state_XXXXXXXX_RRRRR.bin for
// each of the N data-parallel processes, read from our state file, so that llm.c's train_gpt2cu -y 1 with N
// processes (and this run's B and T) continues the run. The model file is already llm.c's format (fp32, version 3;
// llm.c's bf16 build, keeping master weights, takes only the header from it and rounds the masters), and the state
// always carries master weights as llm.c's default (-w 1) expects: an fp32 run's are its parameters. ZeRO-1 (llm.c's -z 1) when this
// run shards its optimizer and every tensor divides by N, else -z 0. The data: llm.c's shuffled order (--shuffle 2)
// replayed for each process (its orders and generator), or the unshuffled position (--shuffle 0). The header word
// LLMC_HDR_OURS marks the files as ours, so pruning removes them with the checkpoint (llm.c ignores it).
static void llmc_export(const char* dir, int step, const GPTConfig* g, const TrainState* ts, const DataLoader* dl, int N, int zero) {
    char mp[2048], sp[2048];
    checkpoint_paths(dir, step, mp, sp, sizeof(mp));
    ParamLayout el;
    layout_build(&el, g);
    size_t n = el.num_params;
    FILE* in = fopenCheck(sp, "rb");
    uint64_t h[ST_HEADER_WORDS];
    freadCheck(h, sizeof(uint64_t), ST_HEADER_WORDS, in, sp);
    if (h[ST_NUM_PARAMS] != n) { fatal("--llmc-checkpoints: '%s' holds %llu parameters, the model %zu", sp, (unsigned long long)h[ST_NUM_PARAMS], n); }
    // llm.c keeps master weights unless told -w 0, also in its fp32 build, and then refuses a state without them: an
    // fp32 run's are its parameters, the model file's fp32 values, which are in llm.c's flat order already
    int master = h[ST_HAS_MASTER] != 0, shuffled = dl && dl->shuffle == 2;
    FILE* model = master ? NULL : fopenCheck(mp, "rb");
    int stage = zero >= 1 && llmc_can_shard(&el, N);
    float* buf = (float*)mallocCheck(STATE_CHUNK_FLOATS * sizeof(float));
    int* order = shuffled ? (int*)mallocCheck(sizeof(int) * (size_t)dl->nshards) : NULL;
    int* groups = shuffled ? (int*)mallocCheck(sizeof(int) * (size_t)dl->most_groups) : NULL;
    for (int r = 0; r < N; r++) {
        char path[2200];
        snprintf(path, sizeof(path), "%s/state_%08d_%05d.bin", dir, step, r);
        LlmcLoaderState st;
        memset(&st, 0, sizeof(st));
        if (shuffled) {
            dataloader_llmc_state(dl, r, ts->data_state[5], &st, order, groups); // (word 5: the calls made)
        } else if (dl) { // the unshuffled order: shard index and group (the position counts tokens)
            st.shard_idx = ts->data_state[5];
            st.sample_idx = ts->data_state[6] / ((uint64_t)dl->B * (uint64_t)dl->T * (uint64_t)dl->world);
        }
        int32_t lh[256] = {0};
        lh[0] = LLMC_STATE_MAGIC; lh[1] = 1; lh[2] = N; lh[3] = r; lh[4] = 1; lh[5] = shuffled; lh[10] = step;
        lh[LLMC_HDR_OURS] = LLMC_OURS_MARK;
        uint64_t rng = splitmix64(ts->sr_seed + (uint64_t)step); // llm.c's rounding RNG: any value serves
        memcpy(&lh[20], &rng, 8); memcpy(&lh[22], &rng, 8);
        size_t pos[2] = {(size_t)st.shard_idx, (size_t)st.sample_idx};
        memcpy(&lh[30], pos, sizeof(pos));
        AtomicFile af;
        atomic_open(&af, path);
        fwriteCheck(lh, sizeof(int32_t), 256, af.fp, path);
        for (int vec = 0; vec < 3; vec++) {
            size_t F = 0; // llm.c's flat offset of table entry i
            for (int i = 0; i < el.num_tensors; i++) { // llm.c's flat order; under ZeRO-1 the r-th N-th of each
                const ParamEntry* e = &el.table[i];
                size_t ne = e->rows * e->cols, piece = stage ? ne / (size_t)N : ne, skip = stage ? (size_t)r * piece : 0;
                if (vec < 2 || master) { llmc_copy_out(in, sp, ST_HEADER_WORDS * 8 + 4 * ((size_t)vec * n + e->offset + skip), piece, af.fp, path, buf); }
                else { llmc_copy_out(model, mp, 1024 + 4 * (F + skip), piece, af.fp, path, buf); }
                F += ne;
            }
        }
        if (shuffled) {
            uint64_t count = (uint64_t)dl->nshards;
            fwriteCheck(&count, 8, 1, af.fp, path);
            fwriteCheck(order, sizeof(int32_t), (size_t)dl->nshards, af.fp, path);
            fwriteCheck(&st.groups, 8, 1, af.fp, path);
            fwriteCheck(groups, sizeof(int32_t), (size_t)st.groups, af.fp, path);
            // its mt19937_state: seed_ (unused), left_, next_, state_[624], MATRIX_A (which it checks, else it reseeds)
            uint64_t seed_word = 0;
            uint32_t next = (uint32_t)st.mt_next, matrix[2] = {0u, 0x9908b0dfu};
            fwriteCheck(&seed_word, 8, 1, af.fp, path);
            fwriteCheck(&st.mt_left, 4, 1, af.fp, path);
            fwriteCheck(&next, 4, 1, af.fp, path);
            fwriteCheck(st.mt, 4, 624, af.fp, path);
            fwriteCheck(matrix, 4, 2, af.fp, path);
        }
        atomic_commit(&af);
    }
    fclose(in);
    if (model) { fclose(model); }
    free(buf);
    free(order);
    free(groups);
    layout_free(&el);
    printf("checkpoint: llm.c's state files for %d process%s written beside it (llm.c's %s build continues it with -y 1 -z %d and this run's B and T)\n",
           N, N == 1 ? "" : "es", master ? "bf16" : "fp32", stage);
}

#endif // LLMC_STATE_H
