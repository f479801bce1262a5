/*
checkpoint.h: checkpoints of train_gpt.c, split out of it by topic and included by it after the optimizer step
(it uses the model, the ZeRO optimizer, the configuration and model_save of train_gpt.c; it is not a standalone
header). Saving (a collective: rank 0 writes, the others stream their optimizer shards to it), housekeeping of a
checkpoint directory, and loading with every byte checked.
*/
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

// ----------------------------------------------------------------------------
// Checkpoints: DIR/model_XXXXXXXX.bin (an llm.c model file) + DIR/state_XXXXXXXX.bin + DIR/latest (the step).
// The state holds the step, the AdamW moments m then v (n floats each, in the flat parameter layout, which depends
// only on the model's shape: logical and unsharded), then, when the compute copy is 16-bit (--dtype bf16/fp16), the
// fp32 master weights (n floats; the model file holds the compute copy's values), the data sampler state, the
// sampling RNG, the loss scaler and the stochastic-rounding seed. Every byte of
// both files is under a checksum: the state's header records the checksum of the whole model file, and its own
// checksum covers its payload and then its header (with the checksum word read as 0). The moments are streamed:
// each data-parallel rank sends its shard to rank 0, which writes them in order, and on resume each rank reads the
// file through a small buffer keeping only its own range, so no rank ever holds all the moments of a sharded
// optimizer.
// A checkpoint is the PAIR model + state of one step, committed in this order: model, state, then `latest`. Each
// file is written to a temporary name, synced and renamed; until the state is committed the new model file is
// registered for removal on any error, so a failed save leaves no unpaired file, and `latest` moves last, so a
// crash at any point leaves the previous checkpoint intact and current. An unpaired file (from a kill -9 between
// the two renames) is never taken for a checkpoint and is removed by the next pruning.
// With --grad-compress powersgd:R the state also holds PowerSGD's state after the optimizer's vectors (version 6):
// the Q factors (the same on every rank, written once) and every data-parallel rank's error feedback, n floats each
// in rank order (PowerSGD runs without tensor and pipeline parallelism, so the flat layout is the logical one).
// With the outlier guard on (--skip-loss-z, --skip-grad-z) the state ends with the guard's two windows (version 7):
// the recent losses, then the recent gradient norms, each as a count and W doubles (the held values oldest first,
// zeros after them), W = ST_OUTLIER_WINDOW.
// The header also records the run's settings (RunSettings, run_settings.h: the optimizer's, the schedule's, the
// gradient compression), which a resume compares with its own. They were added without a new version: older files hold
// zeros there, which read as "not recorded".

#define STATE_MAGIC 20240331
// 3: header under the checksum, model checksum over the whole file, AdamW update count; word-wise FNV checksums
// 4: the same with XXH3-64 checksums (xxHash).
// 5: the checksum kind in the header (ST_SUM_KIND); the storage type, master weights after the moments when it is
//    16-bit, the loss scaler (scale and clean-step count) and the stochastic-rounding seed.
// 6: version 5 followed by the PowerSGD section (ST_PSGD_*: its rank R, the number of error-feedback vectors, the
//    Q floats); written only by runs that compress with PowerSGD, so every other checkpoint stays version 5.
// 7: version 6 (its PowerSGD section present when ST_PSGD_RANK > 0) followed by the outlier guard's section
//    (ST_OUTLIER_WINDOW); written only by runs with the guard on.
// All five are read (3 and 4 as having no master weights and a fresh loss scaler); 5, 6 and 7 are written.
#define STATE_VERSION_FNV 3
#define STATE_VERSION_XXH3 4
#define STATE_VERSION 5
#define STATE_VERSION_PSGD 6
#define STATE_VERSION_OUTLIER 7
#define STATE_PSGD_MAX_RANKS (1 << 20)
#define STATE_CHUNK_FLOATS ((size_t)1 << 22)
enum {
    ST_MAGIC = 0, ST_VERSION, ST_STEP, ST_NUM_PARAMS, ST_MODEL_SUM, ST_STATE_SUM, ST_RNG, ST_LOSS_SCALE,
    ST_MAXT, ST_V, ST_L, ST_NH, ST_C, ST_VP, ST_ZERO, ST_WORLD, ST_B, ST_T, ST_ADAM_T, ST_SKIPPED,
    ST_SUM_KIND, ST_DTYPE, ST_HAS_MASTER, ST_SCALE_CLEAN, ST_SR_SEED, // version 5
    ST_PSGD_RANK, ST_PSGD_RANKS, ST_PSGD_Q, // version 6
    ST_TOTAL_BATCH, // tokens per optimizer step of the run that wrote it (0 in files written before it was recorded)
    ST_OUTLIER_WINDOW, // version 7: W of the outlier guard's section
    ST_DATA = 32, // DATALOADER_STATE_WORDS words
    // the run's settings (run_settings.h; all 0 in files written before they were recorded, in any version):
    // ST_SETTINGS 1, then the floats' bits, the schedule's index + 1 and the gradient compression's code; then the
    // decay's length and the batch ramp (0 in files written before they were recorded: no such setting)
    ST_SETTINGS = 40, ST_SET_LR, ST_SET_SCHEDULE, ST_SET_WARMUP, ST_SET_FINAL_FRAC, ST_SET_STEPS, ST_SET_WD, ST_SET_CLIP,
    ST_SET_BETA1, ST_SET_BETA2, ST_SET_EPS, ST_SET_COMPRESS, ST_SET_DECAY_STEPS, ST_SET_RAMP_START, ST_SET_RAMP_TOKENS,
    ST_SET_LAST = ST_SET_RAMP_TOKENS,
    ST_HEADER_WORDS = 64
};
typedef char state_header_words_fit[ST_DATA + DATALOADER_STATE_WORDS <= ST_SETTINGS && ST_SET_LAST < ST_HEADER_WORDS ? 1 : -1];

typedef struct {
    int step;               // optimizer steps taken (skipped ones included)
    int adam_t;             // AdamW updates applied so far (the bias correction's t is adam_t + 1)
    int skipped_in_a_row;   // --nan-policy skip: consecutive non-finite steps just before `step`
    LossScale loss_scale;   // --dtype fp16: the dynamic loss scale and its clean-step count
    uint64_t sr_seed;       // stochastic rounding of the compute copy (with the update count and the flat index)
    uint64_t rng;
    uint64_t data_state[DATALOADER_STATE_WORDS];
    OutlierWindow loss_w, norm_w; // the outlier guard's recent losses and gradient norms (outlier.h)
} TrainState;

// The state a fresh run starts from: its sampling RNG and stochastic-rounding seed from --seed, the loss scale, empty
// outlier windows.
static void train_state_fresh(TrainState* ts, const Config* c, float loss_scale) {
    memset(ts, 0, sizeof(*ts));
    ts->rng = (uint64_t)c->seed * 0x2545F4914F6CDD1DULL + 7;
    outlier_init(&ts->loss_w, c->outlier_window);
    outlier_init(&ts->norm_w, c->outlier_window);
    ts->sr_seed = splitmix64((uint64_t)c->seed ^ 0x5352ull); // "SR": its own stream, independent of the others
    ts->loss_scale.scale = loss_scale;
}

#include "run_settings.h" // defines: RunSettings, settings_to_header, settings_from_header, resume_settings_check

static void checkpoint_paths(const char* dir, int step, char* model_path, char* state_path, size_t cap) {
    snprintf(model_path, cap, "%s/model_%08d.bin", dir, step);
    snprintf(state_path, cap, "%s/state_%08d.bin", dir, step);
}

static long long state_file_bytes(size_t num_params, int has_master) {
    return (long long)(ST_HEADER_WORDS * 8 + (2 + (has_master != 0)) * 4 * (long long)num_params);
}

// The state's checksum: the payload's running checksum, continued over the header with its checksum word as 0.
static uint64_t state_header_sum(const uint64_t* h, Checksum* payload_sum) {
    uint64_t copy[ST_HEADER_WORDS];
    memcpy(copy, h, sizeof(copy));
    copy[ST_STATE_SUM] = 0;
    checksum_add(payload_sum, copy, sizeof(copy));
    return checksum_end(payload_sum);
}

// The part [*lo, *hi) of the flat range of n parameters (padded to dp shards of S) that data-parallel rank r owns
// (stage 0 of ZeRO: rank 0 "owns" everything).
static void shard_range_of(int stage, size_t S, size_t n, int r, size_t* lo, size_t* hi) {
    if (stage == 0) { *lo = 0; *hi = n; return; }
    size_t a = (size_t)r * S, b = a + S;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

// The same for this rank's optimizer: the part of data-parallel rank r's owned range that holds real parameters.
static void shard_range(const ZeroOptimizer* z, int r, size_t* lo, size_t* hi) { shard_range_of(z->stage, z->shard, z->n, r, lo, hi); }

static int all_finite(const float* x, size_t n) {
    int ok = 1;
    #pragma omp parallel for reduction(&& : ok)
    for (size_t i = 0; i < n; i++) { ok = ok && isfinite(x[i]); }
    return ok;
}

// Rank 0 writes one optimizer vector (m, v or the master weights: device memory, this rank's shard `mine` of its
// share of the model) in the logical flat layout, adding it to the checksum; the other ranks send their parts.
// The logical vector goes out in chunks of STATE_CHUNK_FLOATS, each cut at tensor boundaries. A tensor lives on one
// pipeline stage (the tied wte: its copy on the first stage), whose layout `stages[s]` every rank can build; the
// elements of a tensor piece held by tensor-parallel rank t form a contiguous local range of that layout, of which
// data-parallel rank d holds the part inside its shard. Every rank walks the same pieces in the same order: the
// holder (d, s, t) copies its part into `part` and sends it, rank 0 receives it there (or copies its own) and puts
// each element in place. buf and part: STATE_CHUNK_FLOATS floats of host memory on every rank.
static void stream_shard_out(FILE* fp, const char* path, const float* mine, ZeroOptimizer* z, const GPT* m,
                             const ParamLayout* stages, ParallelContext* pc, float* buf, float* part, Checksum* h) {
    const ParamLayout* gl = &m->glayout;
    int owners = z->stage == 0 ? 1 : z->size; // stage 0: data-parallel rank 0 holds everything
    int me = pc->world_rank, tp = m->layout.tp;
    size_t n = gl->logical_params;
    for (size_t c0 = 0; c0 < n; c0 += STATE_CHUNK_FLOATS) {
        size_t cnt = n - c0 < STATE_CHUNK_FLOATS ? n - c0 : STATE_CHUNK_FLOATS;
        for (int i = 0; i < gl->num_tensors; i++) {
            const ParamEntry* ge = &gl->table[i];
            size_t g0 = ge->goffset, g1 = g0 + ge->grows * ge->gcols;
            if (g1 <= c0 || g0 >= c0 + cnt) { continue; }
            size_t ka = (c0 > g0 ? c0 : g0) - g0, kb = (c0 + cnt < g1 ? c0 + cnt : g1) - g0;
            int st = layout_holder_stage(&m->layout, ge);
            const ParamLayout* sl = &stages[st];
            const ParamEntry* e = layout_tensor_at(sl, g0, 1);
            size_t S = zero_padded_size(sl->num_params, z->size) / z->size;
            for (int t = 0; t < tp; t++) {
                for (int d = 0; d < owners; d++) {
                    size_t lo, hi, first;
                    shard_range_of(z->stage, S, sl->num_params, d, &lo, &hi);
                    int src = d * pc->tp * pc->pp + st * pc->tp + t; // the world rank of (dp d, pp st, tp t)
                    float* piece = buf + (g0 + ka - c0);
                    if (me == src) {
                        size_t k = pack_runs(e, tp, t, 1, ka, kb, lo, hi, piece, NULL, 1, &first);
                        if (k) {
                            dev_copy_d2h(z->ctx, part, mine + (first - z->lo), k * sizeof(float));
                            dev_sync(z->ctx);
                            if (me != 0) { comm_send(&pc->world, part, k * sizeof(float), 0, 7); }
                        }
                    }
                    if (me == 0) {
                        size_t k = pack_runs(e, tp, t, 1, ka, kb, lo, hi, piece, NULL, 1, &first);
                        if (k && src != 0) { comm_recv(&pc->world, part, k * sizeof(float), src, 7); }
                        pack_runs(e, tp, t, 1, ka, kb, lo, hi, piece, part, 0, &first);
                    }
                }
            }
        }
        if (me == 0) {
            fwriteCheck(buf, sizeof(float), cnt, fp, path);
            checksum_add(h, buf, cnt * sizeof(float));
        }
    }
}

// Whether a device vector is all finite: read through the host buffer buf (at least min(n, STATE_CHUNK_FLOATS)).
static int device_all_finite(const KernelCtx* ctx, const float* x, size_t n, float* buf) {
    for (size_t off = 0; off < n; off += STATE_CHUNK_FLOATS) {
        size_t cnt = n - off < STATE_CHUNK_FLOATS ? n - off : STATE_CHUNK_FLOATS;
        dev_copy_d2h(ctx, buf, x + off, cnt * sizeof(float));
        dev_sync(ctx);
        if (!all_finite(buf, cnt)) { return 0; }
    }
    return 1;
}

// Parses a checkpoint file name "model_XXXXXXXX.bin" / "state_XXXXXXXX.bin" (or llm.c's "DONE_XXXXXXXX", suffix ""):
// returns the step, or -1.
static int checkpoint_name_step_in(const char* name, const char* prefix, const char* suffix) {
    size_t pl = strlen(prefix), sl = strlen(suffix);
    if (strncmp(name, prefix, pl) != 0 || strlen(name) != pl + 8 + sl || strcmp(name + pl + 8, suffix) != 0) { return -1; }
    int step = 0;
    for (int i = 0; i < 8; i++) {
        char ch = name[pl + i];
        if (ch < '0' || ch > '9') { return -1; }
        step = step * 10 + (ch - '0');
    }
    return step;
}

static int checkpoint_name_step(const char* name, const char* prefix) { return checkpoint_name_step_in(name, prefix, ".bin"); }

// llm.c's per-process state files (llmc_state.h): its magic, and the word of their 256-int header where the ones this
// trainer writes (--llmc-checkpoints) carry LLMC_OURS_MARK ("TGPT"); llm.c leaves it 0.
#define LLMC_STATE_MAGIC 20240527
#define LLMC_HDR_OURS 100
#define LLMC_OURS_MARK 0x54475054

// Who wrote step's llm.c state files in dir: 0 none, 1 llm.c (an llm.c run continued here, whose model file, state
// files and DONE_ marker pruning never removes: the import adds only our state file beside them), 2 this trainer.
static int checkpoint_llmc_owner(const char* dir, int step) {
    char p[2200];
    snprintf(p, sizeof(p), "%s/state_%08d_00000.bin", dir, step);
    FILE* fp = fopen(p, "rb");
    if (!fp) { return 0; }
    int32_t h[256] = {0};
    size_t got = fread(h, sizeof(int32_t), 256, fp);
    fclose(fp);
    return got == 256 && h[0] == LLMC_STATE_MAGIC && h[LLMC_HDR_OURS] == LLMC_OURS_MARK ? 2 : 1;
}

static int checkpoint_is_llmc(const char* dir, int step) { return checkpoint_llmc_owner(dir, step) == 1; }

// Removes the llm.c state files this trainer wrote beside its checkpoint of step (--llmc-checkpoints; the caller
// checked their owner).
static int checkpoint_remove_llmc_export(const char* dir, int step) {
    int removed = 0;
    char p[2200];
    for (int r = 0;; r++) {
        snprintf(p, sizeof(p), "%s/state_%08d_%05d.bin", dir, step, r);
        if (unlink(p) != 0) { break; }
        removed++;
    }
    return removed;
}

static int cmp_int_desc(const void* a, const void* b) { return *(const int*)b - *(const int*)a; }

// Tidies a checkpoint directory (rank 0): removes temporary files of dead writers, every unpaired model or state
// file, and, when keep > 0, all but the newest `keep` checkpoints at or before `latest` (those after it belong to a
// run the user rewound, and stay); checkpoints at multiples of `major` (> 0) are neither removed nor counted
// (llm.c's major checkpoints, -nm). DONE_ markers go with their checkpoint. The files of an llm.c checkpoint (an
// llm.c run's directory continued here, llmc_state.h) stay: only our state file beside them may go. Returns the
// number of files removed.
static int checkpoint_prune(const char* dir, int keep, int major, int latest) {
    int removed = atomic_clean_stale(dir);
    DIR* d = opendir(dir);
    if (!d) { return removed; }
    int cap = 64, nm = 0, ns = 0;
    int* ms = (int*)mallocCheck(sizeof(int) * cap);
    int* ss = (int*)mallocCheck(sizeof(int) * cap);
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        int sm = checkpoint_name_step(ent->d_name, "model_"), st = checkpoint_name_step(ent->d_name, "state_");
        if (sm < 0 && st < 0) { continue; }
        if (nm == cap || ns == cap) {
            cap *= 2;
            ms = (int*)realloc(ms, sizeof(int) * cap);
            ss = (int*)realloc(ss, sizeof(int) * cap);
            if (!ms || !ss) { fatal("out of memory listing '%s'", dir); }
        }
        if (sm >= 0) { ms[nm++] = sm; } else { ss[ns++] = st; }
    }
    closedir(d);
    qsort(ms, nm, sizeof(int), cmp_int_desc);
    int kept = 0;
    char mp[2048], sp[2048];
    for (int i = 0; i < nm; i++) {
        int paired = 0;
        for (int j = 0; j < ns; j++) { paired |= ss[j] == ms[i]; }
        checkpoint_paths(dir, ms[i], mp, sp, sizeof(mp));
        int owner = checkpoint_llmc_owner(dir, ms[i]), llmc = owner == 1; // (read once: its header)
        if (!paired) { removed += !llmc && unlink(mp) == 0; removed += owner == 2 ? checkpoint_remove_llmc_export(dir, ms[i]) : 0; continue; }
        if (ms[i] > latest) { continue; }
        if (major > 0 && ms[i] % major == 0) { continue; } // a major checkpoint: kept, and not counted
        if (keep > 0 && kept >= keep) {
            removed += !llmc && unlink(mp) == 0;
            removed += unlink(sp) == 0;
            removed += owner == 2 ? checkpoint_remove_llmc_export(dir, ms[i]) : 0;
            continue;
        }
        kept++;
    }
    for (int j = 0; j < ns; j++) {
        int paired = 0;
        for (int i = 0; i < nm; i++) { paired |= ms[i] == ss[j]; }
        checkpoint_paths(dir, ss[j], mp, sp, sizeof(mp));
        if (!paired) { removed += unlink(sp) == 0; }
    }
    free(ms);
    free(ss);
    // llm.c's DONE_XXXXXXXX markers go with their checkpoint (they are not counted as removed files)
    if ((d = opendir(dir)) != NULL) {
        while ((ent = readdir(d)) != NULL) {
            int sd = checkpoint_name_step_in(ent->d_name, "DONE_", "");
            if (sd < 0) { continue; }
            checkpoint_paths(dir, sd, mp, sp, sizeof(mp));
            if ((!file_exists(mp) || !file_exists(sp)) && !checkpoint_is_llmc(dir, sd)) {
                char done[2100];
                snprintf(done, sizeof(done), "%s/%s", dir, ent->d_name);
                unlink(done);
            }
        }
        closedir(d);
    }
    return removed;
}

// The PowerSGD section (collective over the data-parallel group; rank 0 writes): Q, then the error feedback of
// every rank in rank order, n floats each, the other ranks' sent to rank 0 a chunk at a time (buf: rank 0's).
static void stream_powersgd_out(FILE* fp, const char* path, const PowerSgd* ps, size_t n, float* buf, Checksum* h) {
    CommGroup* g = ps->group;
    if (g->rank == 0) {
        fwriteCheck(ps->q, sizeof(float), ps->q_floats, fp, path);
        checksum_add(h, ps->q, ps->q_floats * sizeof(float));
    }
    for (int d = 0; d < g->size; d++) {
        for (size_t c0 = 0; c0 < n; c0 += STATE_CHUNK_FLOATS) {
            size_t cnt = n - c0 < STATE_CHUNK_FLOATS ? n - c0 : STATE_CHUNK_FLOATS;
            const float* part = ps->error + c0;
            if (g->rank == d && d != 0) { comm_send(g, part, cnt * sizeof(float), 0, 8); }
            if (g->rank != 0) { continue; }
            if (d != 0) { comm_recv(g, buf, cnt * sizeof(float), d, 8); part = buf; }
            fwriteCheck(part, sizeof(float), cnt, fp, path);
            checksum_add(h, part, cnt * sizeof(float));
        }
    }
}

// The outlier guard's section (version 7): for the losses, then the gradient norms, the count of held values and W
// doubles, the held values oldest first and zeros after them; under the state's checksum.
static void outlier_section_out(FILE* fp, const char* path, const TrainState* ts, Checksum* sum) {
    const OutlierWindow* ws[2] = {&ts->loss_w, &ts->norm_w};
    for (int k = 0; k < 2; k++) {
        int W = ws[k]->window;
        double* words = (double*)calloc((size_t)W + 1, sizeof(double)); // the count's word, then the values
        if (!words) { fatal("out of memory writing '%s'", path); }
        uint64_t n = (uint64_t)outlier_get(ws[k], words + 1);
        memcpy(words, &n, sizeof(n));
        fwriteCheck(words, sizeof(double), (size_t)W + 1, fp, path);
        checksum_add(sum, words, sizeof(double) * ((size_t)W + 1));
        free(words);
    }
}

// Reads the outlier guard's section of a state (W values per window) into vals (2 x W doubles: losses, then norms)
// and counts, under the checksum; exits on a count above W or a non-finite value.
static void outlier_section_in(FILE* fp, const char* path, int W, double* vals, int counts[2], Checksum* sum) {
    uint64_t* words = (uint64_t*)mallocCheck(sizeof(uint64_t) * ((size_t)W + 1));
    for (int k = 0; k < 2; k++) {
        freadCheck(words, sizeof(uint64_t), (size_t)W + 1, fp, path);
        checksum_add(sum, words, sizeof(uint64_t) * ((size_t)W + 1));
        if (words[0] > (uint64_t)W) { fatal("checkpoint state '%s': corrupt outlier-guard section (%llu values in a window of %d)", path, (unsigned long long)words[0], W); }
        counts[k] = (int)words[0];
        memcpy(vals + (size_t)k * W, words + 1, sizeof(double) * (size_t)W);
        for (int i = 0; i < counts[k]; i++) {
            if (!isfinite(vals[(size_t)k * W + i])) { fatal("checkpoint state '%s': corrupt outlier-guard section (a value is not finite)", path); }
        }
    }
    free(words);
}

// (llmc_state.h) writes llm.c's per-process state files of a checkpoint just saved
static void llmc_export(const char* dir, int step, const GPTConfig* g, const TrainState* ts, const DataLoader* train, int N, int zero);

// Collective over the data-parallel group; rank 0 writes. Refuses (exits) to write a state that is not finite.
// train: the training data's loader (NULL without), whose orders --llmc-checkpoints writes for llm.c.
static void checkpoint_save(const char* dir, GPT* m, ZeroOptimizer* z, const TrainState* ts, ParallelContext* pc,
                            const Config* c, const DataLoader* train) {
    int writer = pc->world_rank == 0;
    size_t S = z->hi - z->lo;
    float* buf = (float*)mallocCheck(STATE_CHUNK_FLOATS * sizeof(float)); // a chunk of the file (rank 0)
    float* part = (float*)mallocCheck(STATE_CHUNK_FLOATS * sizeof(float)); // the host staging of every device read
    double bad = !device_all_finite(z->ctx, z->m, S, buf) || !device_all_finite(z->ctx, z->v, S, buf) ||
                 (z->master && !device_all_finite(z->ctx, z->master, S, buf)) || !gpt_params_finite(m) ||
                 (z->psgd && !powersgd_state_finite(z->psgd));
    comm_allreduce_max_f64(&pc->world, &bad, 1);
    if (bad) { fatal("step %d: the model or optimizer state holds non-finite values: no checkpoint written (the last one in '%s' is intact)", ts->step, dir); }
    char mp[2048], sp[2048], lp[2048];
    checkpoint_paths(dir, ts->step, mp, sp, sizeof(mp));
    AtomicFile af;
    uint64_t h[ST_HEADER_WORDS] = {0};
    if (pc->dp_rank == 0 || m->z3) {
        // the compute copy, a chunk at a time in the whole model's layout: the ranks of data-parallel rank 0 gather it
        // (the stream's gets are collective over its tensor- and pipeline-parallel ranks, and under ZeRO-3 over the
        // data-parallel ranks too, which hold its parts), rank 0 writes
        GptStreamTarget t;
        ParamStream local = gpt_stream(m, NULL, &t);
        ShareStream shs;
        ParamStream from_model = share_stream(&shs, &m->layout, &m->glayout, &local, &pc->tp_group, &pc->pp_group);
        h[ST_MODEL_SUM] = model_save_stream(writer ? mp : NULL, &m->glayout, &from_model);
        share_stream_free(&shs);
    }
    if (writer) {
        utils_tmp_register(mp); // unpaired until the state is committed: removed if anything fails before that
        atomic_open(&af, sp);
        // the payload checksum is only known after writing: write the header, the payload, then the header again
        fwriteCheck(h, sizeof(uint64_t), ST_HEADER_WORDS, af.fp, sp);
    }
    Checksum sum;
    checksum_begin(&sum, CHECKSUM_DEFAULT);
    // every pipeline stage's layout (their offsets and shards), as the stages built them
    ParamLayout* stages = (ParamLayout*)mallocCheck(sizeof(ParamLayout) * (size_t)m->layout.pp);
    for (int st = 0; st < m->layout.pp; st++) {
        layout_build_3d(&stages[st], &m->cfg, m->layout.tp, 0, m->layout.pp, st, m->layout.V, m->layout.chunk_first);
    }
    stream_shard_out(writer ? af.fp : NULL, sp, z->m, z, m, stages, pc, buf, part, &sum);
    stream_shard_out(writer ? af.fp : NULL, sp, z->v, z, m, stages, pc, buf, part, &sum);
    if (z->master) { stream_shard_out(writer ? af.fp : NULL, sp, z->master, z, m, stages, pc, buf, part, &sum); }
    if (z->psgd) { stream_powersgd_out(writer ? af.fp : NULL, sp, z->psgd, m->layout.logical_params, buf, &sum); }
    int guard = c->skip_loss_z > 0.0f || c->skip_grad_z > 0.0f;
    if (guard && writer) { outlier_section_out(af.fp, sp, ts, &sum); }
    for (int st = 0; st < m->layout.pp; st++) { layout_free(&stages[st]); }
    free(stages);
    if (writer) {
        const GPTConfig* g = &m->cfg;
        h[ST_MAGIC] = STATE_MAGIC; h[ST_STEP] = ts->step;
        h[ST_VERSION] = guard ? STATE_VERSION_OUTLIER : z->psgd ? STATE_VERSION_PSGD : STATE_VERSION;
        h[ST_OUTLIER_WINDOW] = guard ? (uint64_t)ts->loss_w.window : 0;
        h[ST_NUM_PARAMS] = m->layout.logical_params; h[ST_RNG] = ts->rng;
        h[ST_MAXT] = g->max_seq_len; h[ST_V] = g->vocab_size; h[ST_L] = g->num_layers; h[ST_NH] = g->num_heads;
        h[ST_C] = g->channels; h[ST_VP] = g->padded_vocab_size; h[ST_ZERO] = z->stage; h[ST_WORLD] = pc->world_size;
        h[ST_B] = c->batch_size; h[ST_T] = c->seq_len; h[ST_ADAM_T] = ts->adam_t; h[ST_SKIPPED] = ts->skipped_in_a_row;
        h[ST_TOTAL_BATCH] = (uint64_t)c->total_batch_size;
        settings_to_header(h, c);
        h[ST_SUM_KIND] = CHECKSUM_DEFAULT; h[ST_DTYPE] = m->ctx.dtype; h[ST_HAS_MASTER] = z->master != NULL;
        uint32_t scale_bits;
        memcpy(&scale_bits, &ts->loss_scale.scale, 4);
        h[ST_LOSS_SCALE] = scale_bits; h[ST_SCALE_CLEAN] = ts->loss_scale.clean; h[ST_SR_SEED] = ts->sr_seed;
        if (z->psgd) { h[ST_PSGD_RANK] = z->psgd->rank; h[ST_PSGD_RANKS] = z->psgd->group->size; h[ST_PSGD_Q] = z->psgd->q_floats; }
        for (int i = 0; i < DATALOADER_STATE_WORDS; i++) { h[ST_DATA + i] = ts->data_state[i]; }
        h[ST_STATE_SUM] = state_header_sum(h, &sum);
        fseekCheck(af.fp, 0, SEEK_SET, sp);
        fwriteCheck(h, sizeof(uint64_t), ST_HEADER_WORDS, af.fp, sp);
        atomic_commit(&af);
        utils_tmp_unregister(mp);
        snprintf(lp, sizeof(lp), "%s/latest", dir);
        atomic_open(&af, lp);
        fprintf(af.fp, "%d\n", ts->step);
        atomic_commit(&af);
        if (c->llmc_checkpoints) { llmc_export(dir, ts->step, &m->cfg, ts, train, pc->dp, z->stage); }
        // llm.c's sign that the checkpoint of this step is whole, which its scripts' restart loops wait for
        snprintf(lp, sizeof(lp), "%s/DONE_%08d", dir, ts->step);
        atomic_open(&af, lp);
        atomic_commit(&af);
        int pruned = checkpoint_prune(dir, c->keep_checkpoints, c->major_checkpoint_every, ts->step);
        printf("checkpoint: wrote %s and %s%s\n", mp, sp, pruned ? " (older ones pruned, --keep-checkpoints)" : "");
    }
    free(buf);
    free(part);
    comm_barrier(&pc->world);
}

// Reads DIR/latest, which must hold a step number and nothing else (a newline may end it). Exits with a clear
// message if it is missing or malformed.
static int checkpoint_latest_step(const char* dir) {
    char lp[2048];
    snprintf(lp, sizeof(lp), "%s/latest", dir);
    if (!file_exists(lp)) { fatal("--resume %s: no checkpoint there ('%s' is missing)", dir, lp); }
    FILE* fp = fopenCheck(lp, "rb");
    char text[32];
    size_t n = fread(text, 1, sizeof(text) - 1, fp);
    fclose(fp);
    text[n] = '\0';
    size_t digits = 0;
    while (digits < n && text[digits] >= '0' && text[digits] <= '9') { digits++; }
    int well_formed = digits >= 1 && digits <= 9 && (digits == n || (digits + 1 == n && text[digits] == '\n'));
    if (!well_formed) { fatal("'%s' is corrupt: expected a step number and a newline", lp); }
    return atoi(text);
}

// What the first words of a state file say: its checksum kind, whether master weights follow the moments, the
// PowerSGD section's sizes (version 6; psgd_rank 0: none), the outlier guard's window, and the run's settings.
typedef struct { int sum_kind; int has_master; int psgd_rank; int psgd_ranks; size_t psgd_q; int outlier_window; RunSettings then; } StateKind;

// Reads and checks the version words and the settings of a state file's header h (all ST_HEADER_WORDS); exits on an
// unknown version or checksum kind, or settings no writer makes.
static StateKind state_kind(const char* path, const uint64_t* h) {
    StateKind k;
    memset(&k, 0, sizeof(k));
    k.sum_kind = CHECKSUM_FNV;
    if (h[ST_VERSION] == STATE_VERSION_FNV) { k.then = settings_from_header(path, h); return k; }
    if (h[ST_VERSION] == STATE_VERSION_XXH3) { k.sum_kind = CHECKSUM_XXH3; }
    else if (h[ST_VERSION] == STATE_VERSION || h[ST_VERSION] == STATE_VERSION_PSGD || h[ST_VERSION] == STATE_VERSION_OUTLIER) {
        if (h[ST_SUM_KIND] != CHECKSUM_FNV && h[ST_SUM_KIND] != CHECKSUM_XXH3) {
            fatal("checkpoint state '%s': unknown checksum kind %llu", path, (unsigned long long)h[ST_SUM_KIND]);
        }
        if (h[ST_HAS_MASTER] > 1) { fatal("checkpoint state '%s': corrupt header (master-weights flag %llu)", path, (unsigned long long)h[ST_HAS_MASTER]); }
        k.sum_kind = (int)h[ST_SUM_KIND];
        k.has_master = (int)h[ST_HAS_MASTER];
        // version 7: a PowerSGD section only when its rank is set (its words all 0 otherwise), then the guard's
        int psgd = h[ST_VERSION] == STATE_VERSION_PSGD || (h[ST_VERSION] == STATE_VERSION_OUTLIER && h[ST_PSGD_RANK] != 0);
        if (h[ST_VERSION] == STATE_VERSION_OUTLIER) {
            if (h[ST_OUTLIER_WINDOW] < 1 || h[ST_OUTLIER_WINDOW] > OUTLIER_MAX_WINDOW || (!psgd && (h[ST_PSGD_RANKS] || h[ST_PSGD_Q]))) {
                fatal("checkpoint state '%s': corrupt header (outlier-guard window %llu, PowerSGD words %llu %llu %llu)", path,
                      (unsigned long long)h[ST_OUTLIER_WINDOW], (unsigned long long)h[ST_PSGD_RANK], (unsigned long long)h[ST_PSGD_RANKS],
                      (unsigned long long)h[ST_PSGD_Q]);
            }
            k.outlier_window = (int)h[ST_OUTLIER_WINDOW];
        }
        if (psgd) {
            if (h[ST_PSGD_RANK] < 1 || h[ST_PSGD_RANK] > POWERSGD_MAX_RANK || h[ST_PSGD_RANKS] < 1 || h[ST_PSGD_RANKS] > STATE_PSGD_MAX_RANKS) {
                fatal("checkpoint state '%s': corrupt header (PowerSGD rank %llu, %llu error-feedback vectors)", path,
                      (unsigned long long)h[ST_PSGD_RANK], (unsigned long long)h[ST_PSGD_RANKS]);
            }
            k.psgd_rank = (int)h[ST_PSGD_RANK];
            k.psgd_ranks = (int)h[ST_PSGD_RANKS];
            k.psgd_q = (size_t)h[ST_PSGD_Q];
        }
    } else {
        fatal("checkpoint state '%s': unsupported version %llu (this trainer reads versions 3 to 7)", path, (unsigned long long)h[ST_VERSION]);
    }
    k.then = settings_from_header(path, h);
#ifndef USE_XXHASH
    if (k.sum_kind == CHECKSUM_XXH3) {
        fatal("checkpoint state '%s' uses XXH3 checksums, and this build has no xxHash: apt-get install libxxhash-dev, then make", path);
    }
#endif
    return k;
}

// Before any big allocation: the checkpoint of `step` must be a complete pair with a state of the right size.
// Returns what its state's header says: the checksum kind (the model file's checksum must be computed with it) and
// whether master weights follow the moments.
static StateKind checkpoint_check_files(const char* dir, int step, size_t num_params) {
    char mp[2048], sp[2048];
    checkpoint_paths(dir, step, mp, sp, sizeof(mp));
    if (!file_exists(mp)) { fatal("checkpoint model '%s' does not exist (named by '%s/latest')", mp, dir); }
    if (!file_exists(sp)) { fatal("checkpoint state '%s' does not exist (named by '%s/latest')", sp, dir); }
    long long actual = file_size(sp);
    if (actual < (long long)ST_HEADER_WORDS * 8) { fatal("checkpoint state '%s' is truncated: %lld bytes, shorter than its header", sp, actual); }
    FILE* fp = fopenCheck(sp, "rb");
    uint64_t h[ST_HEADER_WORDS];
    freadCheck(h, sizeof(uint64_t), ST_HEADER_WORDS, fp, sp);
    fclose(fp);
    if (h[ST_MAGIC] != STATE_MAGIC) { fatal("checkpoint state '%s': bad magic number %llu", sp, (unsigned long long)h[ST_MAGIC]); }
    StateKind k = state_kind(sp, h);
    // Q is smaller than the matrices it factors ((n + m) R < n m for each), so below num_params
    if (k.psgd_rank && k.psgd_q >= num_params) { fatal("checkpoint state '%s': corrupt header (%zu PowerSGD Q floats for %zu parameters)", sp, k.psgd_q, num_params); }
    long long expect = state_file_bytes(num_params, k.has_master) + 4 * ((long long)k.psgd_q + (long long)k.psgd_ranks * (long long)num_params) +
                       16 * ((long long)k.outlier_window + (k.outlier_window > 0));
    if (actual != expect) { fatal("checkpoint state '%s' is %s: %lld bytes, expected %lld", sp, actual < expect ? "truncated" : "too long", actual, expect); }
    return k;
}

// Reads one optimizer vector (the logical layout's n floats) through a chunk buffer, keeping what this rank holds:
// of each tensor piece, its tensor-parallel share's elements inside its owned range go to `mine` (device) in one
// copy. With `params` instead (master weights into a run that keeps none), every element of the rank's share becomes
// the compute copy's value, checked finite on the way. part: STATE_CHUNK_FLOATS floats of host scratch.
static void stream_shard_in(FILE* fp, const char* path, float* mine, GPT* params, const ZeroOptimizer* z, const GPT* m,
                            float* chunk, float* part, Checksum* h) {
    const ParamLayout* pl = &m->layout;
    size_t own_lo, own_hi;
    shard_range(z, z->rank, &own_lo, &own_hi);
    if (params && !m->z3) { own_lo = 0; own_hi = pl->num_params; } // (under ZeRO-3 the rank keeps its owned range)
    size_t n = pl->logical_params;
    for (size_t c0 = 0; c0 < n; c0 += STATE_CHUNK_FLOATS) {
        size_t cnt = n - c0 < STATE_CHUNK_FLOATS ? n - c0 : STATE_CHUNK_FLOATS;
        freadCheck(chunk, sizeof(float), cnt, fp, path);
        checksum_add(h, chunk, cnt * sizeof(float));
        if (params) {
            for (size_t i = 0; i < cnt; i++) {
                if (!isfinite(chunk[i])) { fatal("checkpoint state '%s': master weight %zu is not finite", path, c0 + i); }
            }
        }
        if (!mine && !params) { continue; }
        for (int i = 0; i < pl->num_tensors; i++) {
            const ParamEntry* e = &pl->table[i];
            size_t g0 = e->goffset, g1 = g0 + e->grows * e->gcols;
            if (g1 <= c0 || g0 >= c0 + cnt) { continue; }
            size_t ka = (c0 > g0 ? c0 : g0) - g0, kb = (c0 + cnt < g1 ? c0 + cnt : g1) - g0, first;
            size_t k = pack_runs(e, pl->tp, pl->tp_rank, 0, ka, kb, own_lo, own_hi, chunk + (g0 + ka - c0), part, 1, &first);
            if (k == 0) { continue; }
            if (params) { params_from_f32(&params->ctx, params->params + (first - (m->z3 ? z->lo : 0)), part, k); }
            else { dev_copy_h2d(z->ctx, mine + (first - z->lo), part, k * sizeof(float)); }
        }
    }
}

// What reading a PowerSGD section did, for the note printed once the state's checksum is verified.
enum { PSGD_LOADED = 0, PSGD_NEW_Q = 1, PSGD_FOLDED = 2, PSGD_DROPPED = 4, PSGD_ABSENT = 8 };

// Reads the PowerSGD section of a state (k: its sizes; n floats per error-feedback vector) into ps: Q when this run
// has the same rank R and the same factor sizes (else Q keeps its seeded start), and saved rank s's error feedback
// added into this run's rank s mod W (with the same W each rank gets its own back, bit for bit; with another W the
// sum over the ranks, which is all PowerSGD's next step depends on, is kept). ps NULL (a run without PowerSGD):
// the section is read past, still under the checksum. Returns PSGD_* flags. chunk: STATE_CHUNK_FLOATS host floats.
static int stream_powersgd_in(FILE* fp, const char* path, PowerSgd* ps, const StateKind* k, size_t n, float* chunk, Checksum* h) {
    int take_q = ps && ps->rank == k->psgd_rank && ps->q_floats == k->psgd_q;
    int W = ps ? ps->group->size : 1, me = ps ? ps->group->rank : -1;
    int flags = !ps ? PSGD_DROPPED : (take_q ? 0 : PSGD_NEW_Q) | (W != k->psgd_ranks ? PSGD_FOLDED : 0);
    for (int s = -1; s < k->psgd_ranks; s++) { // -1: Q
        size_t len = s < 0 ? k->psgd_q : n;
        for (size_t c0 = 0; c0 < len; c0 += STATE_CHUNK_FLOATS) {
            size_t cnt = len - c0 < STATE_CHUNK_FLOATS ? len - c0 : STATE_CHUNK_FLOATS;
            freadCheck(chunk, sizeof(float), cnt, fp, path);
            checksum_add(h, chunk, cnt * sizeof(float));
            if (!all_finite(chunk, cnt)) { fatal("checkpoint state '%s': a PowerSGD %s value is not finite", path, s < 0 ? "Q" : "error-feedback"); }
            if (s < 0 && take_q) { memcpy(ps->q + c0, chunk, cnt * sizeof(float)); }
            if (s < 0 || !ps || s % W != me) { continue; }
            float* e = ps->error + c0;
            if (s == me) { memcpy(e, chunk, cnt * sizeof(float)); }
            else { for (size_t i = 0; i < cnt; i++) { e[i] += chunk[i]; } }
        }
    }
    return flags;
}

// Loads the moments (this rank's shard), the master weights and the train state, and verifies both checksums.
// model_sum is the checksum of the checkpoint's model file as loaded (model_load_params), compared with the one the
// state recorded. Master weights: a state that has them gives them to a run that keeps them, and to an fp32 run as
// its parameters (more precise than the 16-bit compute copy in the model file); a state without them (fp32, or
// versions 3 and 4) leaves the masters a 16-bit run took from the model file. The outlier guard's windows (version 7)
// go to ts's, within their --outlier-window. Returns whether the state had them.
static int checkpoint_load_state(const char* dir, int step, GPT* m, ZeroOptimizer* z, TrainState* ts, uint64_t model_sum) {
    char mp[2048], sp[2048];
    checkpoint_paths(dir, step, mp, sp, sizeof(mp));
    size_t n = m->layout.logical_params;
    StateKind sk = checkpoint_check_files(dir, step, n); // the pair, the size, magic and version
    int kind = sk.sum_kind;
    FILE* fp = fopenCheck(sp, "rb");
    uint64_t h[ST_HEADER_WORDS];
    freadCheck(h, sizeof(uint64_t), ST_HEADER_WORDS, fp, sp);
    float* chunk = (float*)mallocCheck(STATE_CHUNK_FLOATS * sizeof(float));
    float* part = (float*)mallocCheck(STATE_CHUNK_FLOATS * sizeof(float));
    Checksum sum;
    checksum_begin(&sum, kind);
    stream_shard_in(fp, sp, z->m, NULL, z, m, chunk, part, &sum);
    stream_shard_in(fp, sp, z->v, NULL, z, m, chunk, part, &sum);
    if (sk.has_master) { stream_shard_in(fp, sp, z->master, z->master ? NULL : m, z, m, chunk, part, &sum); }
    int psgd = sk.psgd_rank ? stream_powersgd_in(fp, sp, z->psgd, &sk, n, chunk, &sum) : z->psgd ? PSGD_ABSENT : PSGD_LOADED;
    int W = sk.outlier_window, counts[2] = {0, 0};
    double* guard_vals = W ? (double*)mallocCheck(sizeof(double) * 2 * (size_t)W) : NULL;
    if (W) { outlier_section_in(fp, sp, W, guard_vals, counts, &sum); }
    free(chunk);
    free(part);
    fclose(fp);
    // (a corrupt state exits here: whatever it put into the parameters above is never used)
    if (state_header_sum(h, &sum) != h[ST_STATE_SUM]) { fatal("checkpoint state '%s' is corrupt: %s checksum mismatch", sp, checksum_name(kind)); }
    if (h[ST_NUM_PARAMS] != n || h[ST_STEP] != (uint64_t)step) {
        fatal("checkpoint state '%s' does not match its model file (parameters %llu vs %zu, step %llu vs %d)", sp,
              (unsigned long long)h[ST_NUM_PARAMS], n, (unsigned long long)h[ST_STEP], step);
    }
    if (model_sum != h[ST_MODEL_SUM]) { fatal("checkpoint model '%s' is corrupt: checksum mismatch with '%s'", mp, sp); }
    if (h[ST_ADAM_T] > (uint64_t)step || h[ST_SKIPPED] > (uint64_t)step) { fatal("checkpoint state '%s': inconsistent update counts", sp); }
    if (psgd != PSGD_LOADED && z->group->pc && z->group->pc->world_rank == 0) {
        if (psgd & PSGD_ABSENT) { printf("resume: '%s' holds no PowerSGD state: the error feedback starts at zero, Q from its seed\n", sp); }
        if (psgd & PSGD_DROPPED) {
            printf("resume: this run does not compress with PowerSGD: the error feedback in '%s' (rank %d, %d data-parallel ranks) is dropped\n",
                   sp, sk.psgd_rank, sk.psgd_ranks);
        }
        if (psgd & PSGD_NEW_Q) { printf("resume: '%s' holds PowerSGD Q factors of rank %d, this run's rank is %d: Q starts afresh from its seed\n", sp, sk.psgd_rank, z->psgd->rank); }
        if (psgd & PSGD_FOLDED) {
            printf("resume: the PowerSGD error feedback of %d data-parallel ranks goes to this run's %d (saved rank s to rank s mod %d; their sum is kept)\n",
                   sk.psgd_ranks, z->psgd->group->size, z->psgd->group->size);
        }
    }
    ts->step = step;
    ts->adam_t = (int)h[ST_ADAM_T];
    ts->skipped_in_a_row = (int)h[ST_SKIPPED];
    ts->rng = h[ST_RNG];
    if (h[ST_VERSION] >= STATE_VERSION) {
        uint32_t scale_bits = (uint32_t)h[ST_LOSS_SCALE];
        float scale;
        memcpy(&scale, &scale_bits, 4);
        if (!(scale > 0.0f) || !isfinite(scale) || h[ST_SCALE_CLEAN] > (uint64_t)step || h[ST_DTYPE] > DTYPE_FP16) {
            fatal("checkpoint state '%s': corrupt header (loss scale %g, clean steps %llu, storage type %llu)", sp, scale,
                  (unsigned long long)h[ST_SCALE_CLEAN], (unsigned long long)h[ST_DTYPE]);
        }
        // the scaler carries over only between fp16 runs (any other run starts one fresh, if it needs one)
        if (h[ST_DTYPE] == DTYPE_FP16 && m->ctx.dtype == DTYPE_FP16) {
            ts->loss_scale.scale = scale;
            ts->loss_scale.clean = (int)h[ST_SCALE_CLEAN];
        }
        ts->sr_seed = h[ST_SR_SEED];
    }
    for (int i = 0; i < DATALOADER_STATE_WORDS; i++) { ts->data_state[i] = h[ST_DATA + i]; }
    if (W) {
        if (counts[0] > step || counts[1] > step) { fatal("checkpoint state '%s': corrupt outlier-guard section (more values than steps)", sp); }
        outlier_set(&ts->loss_w, guard_vals, counts[0]);
        outlier_set(&ts->norm_w, guard_vals + W, counts[1]);
        free(guard_vals);
    }
    return W > 0;
}

#endif // CHECKPOINT_H
