/*
model_files.h: parameters in and out of the model, split out of train_gpt.c by topic and included by it after the
layout (it uses layout.h, comm.h and utils.h; not a standalone header): a fresh model's random initialisation, llm.c's
model files (read with every value checked, written atomically), the streams that carry parameters a chunk at a time,
and the logical stream that slices on load and gathers on save under tensor and pipeline parallelism.
*/
#ifndef MODEL_FILES_H
#define MODEL_FILES_H

// ----------------------------------------------------------------------------
// Random initialisation: normal(0, 0.02); residual projections (attprojw, fcprojw) scaled by 1/sqrt(2L);
// LayerNorm weights 1, biases 0, padded vocabulary rows 0. Each tensor is drawn in chunks of 64K values, chunk k
// of tensor i from its own stream seeded by (seed, i, k), so the result depends neither on the in-memory layout
// nor on the number of threads, and big models initialise on all cores.

static uint64_t rng_next(uint64_t* s) { // xorshift64*
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}
static float rng_uniform(uint64_t* s) { return (rng_next(s) >> 40) / 16777216.0f; } // [0, 1)

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// Fills p[0..n) with std * normal(0,1) from stream s (Box-Muller, both values of each pair used).
static void fill_normal(float* p, size_t n, float std, uint64_t s) {
    for (size_t j = 0; j < n; j += 2) {
        float u1 = rng_uniform(&s), u2 = rng_uniform(&s);
        if (u1 < 1e-7f) { u1 = 1e-7f; }
        float r = sqrtf(-2.0f * logf(u1)), a = 6.2831853f * u2;
        p[j] = std * r * cosf(a);
        if (j + 1 < n) { p[j + 1] = std * r * sinf(a); }
    }
}

// A fresh model's parameters as the table's init column says, into a stream (declared with the model files below)
// a block of chunks at a time. Deterministic whatever the thread count: each 64k-element chunk of a tensor draws
// from its own stream.
typedef struct ParamStream ParamStream;
static void param_stream_put(ParamStream* s, size_t off, const float* x, size_t n);

static void init_params_stream(ParamStream* dst, const ParamLayout* pl, uint64_t seed) {
    const GPTConfig* g = &pl->cfg;
    float resid_std = 0.02f / sqrtf(2.0f * g->num_layers);
    const size_t CHUNK = 1 << 16, BLOCK = 16 * CHUNK; // a put of 16 chunks, generated in parallel
    float* buf = (float*)mallocCheck(BLOCK * sizeof(float));
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        size_t n = e->rows * e->cols;
        float std = e->init == INIT_RESIDUAL ? resid_std : 0.02f;
        size_t valid = n; // the padded vocabulary rows stay zero
        if (e->tp_split == TP_VOCAB) { valid = (size_t)g->vocab_size * g->channels; }
        for (size_t b0 = 0; b0 < n; b0 += BLOCK) {
            size_t cnt = n - b0 < BLOCK ? n - b0 : BLOCK;
            if (e->init == INIT_ONES || e->init == INIT_ZEROS) {
                float v = e->init == INIT_ONES ? 1.0f : 0.0f;
                for (size_t j = 0; j < cnt; j++) { buf[j] = v; }
            } else {
                long nchunks = (long)((cnt + CHUNK - 1) / CHUNK);
                #pragma omp parallel for schedule(static)
                for (long c = 0; c < nchunks; c++) {
                    size_t lo = b0 + (size_t)c * CHUNK, hi = lo + CHUNK < b0 + cnt ? lo + CHUNK : b0 + cnt;
                    size_t k = lo / CHUNK; // the chunk's index in the tensor keys its stream
                    size_t vhi = hi < valid ? hi : valid;
                    if (lo < vhi) {
                        uint64_t s = splitmix64(seed ^ splitmix64(((uint64_t)i << 40) ^ (uint64_t)k)) | 1;
                        fill_normal(buf + (lo - b0), vhi - lo, std, s);
                    }
                    for (size_t j = (vhi > lo ? vhi : lo); j < hi; j++) { buf[j - b0] = 0.0f; }
                }
            }
            param_stream_put(dst, e->offset + b0, buf, cnt);
        }
    }
    free(buf);
}

// ----------------------------------------------------------------------------
// Model files (llm.c format): 256 int32 header {20240326, version, maxT, V, L, NH, C, Vp}, then the parameters in
// llm.c's order, fp32 (version 3) or bf16 (version 5).

#define MODEL_MAGIC 20240326

// Reads the header of a model file into g, validating it. Exits with a message naming the file on any problem.
static void model_read_header(const char* path, GPTConfig* g, int* version, FILE** fp_out) {
    if (!file_exists(path)) { fatal("model file '%s' does not exist", path); }
    FILE* fp = fopenCheck(path, "rb");
    int32_t h[256];
    if (fread(h, sizeof(int32_t), 256, fp) != 256) { fclose(fp); fatal("model file '%s' is truncated: shorter than its 1024-byte header", path); }
    if (h[0] != MODEL_MAGIC) { fclose(fp); fatal("model file '%s': bad magic number %d (expected %d)", path, h[0], MODEL_MAGIC); }
    if (h[1] != 3 && h[1] != 5) { fclose(fp); fatal("model file '%s': unsupported version %d (3 = fp32, 5 = bf16)", path, h[1]); }
    g->max_seq_len = h[2]; g->vocab_size = h[3]; g->num_layers = h[4]; g->num_heads = h[5]; g->channels = h[6];
    g->padded_vocab_size = h[7];
    if (g->max_seq_len < 1 || g->vocab_size < 1 || g->num_layers < 1 || g->num_heads < 1 || g->channels < 1 ||
        g->channels % g->num_heads != 0 || g->padded_vocab_size < g->vocab_size || g->max_seq_len > (1 << 20) ||
        g->vocab_size > (1 << 24) || g->num_layers > 4096 || g->channels > (1 << 16) || g->padded_vocab_size > (1 << 24)) {
        fclose(fp);
        fatal("model file '%s': invalid header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d)", path, g->max_seq_len,
              g->vocab_size, g->num_layers, g->num_heads, g->channels, g->padded_vocab_size);
    }
    // the file's size follows from the header: check it before anything is allocated for the model
    long long expect = 1024 + (long long)gpt_num_params(g) * (h[1] == 3 ? 4 : 2);
    long long actual = file_size(path);
    if (actual != expect) {
        fclose(fp);
        fatal("model file '%s' is %s: %lld bytes, expected %lld for its header (L %d, C %d, Vp %d, maxT %d)", path,
              actual < expect ? "truncated" : "too long", actual, expect, g->num_layers, g->channels,
              g->padded_vocab_size, g->max_seq_len);
    }
    *version = h[1];
    *fp_out = fp;
}

static float bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Weights of a GPT are O(1) (trained GPT-2 weights stay below ~100); one of 1e8 or more is a damaged file, not a
// model: its matmul outputs saturate every softmax, and training "runs" with a loss of 1e29 while learning nothing.
#define MODEL_MAX_ABS_WEIGHT 1e8f

// Exits naming the file, the tensor and the element if x (elements [first, first + n) of tensor e) holds a NaN, an
// infinity or an absurd magnitude.
static void check_finite_range(const char* path, const ParamEntry* e, const float* x, size_t first, size_t n) {
    for (size_t j = 0; j < n; j++) {
        size_t k = first + j;
        if (!isfinite(x[j])) {
            fatal("model file '%s': tensor '%s' holds a non-finite value (%g) at row %zu, column %zu", path, e->name,
                  x[j], k / e->cols, k % e->cols);
        }
        if (fabsf(x[j]) >= MODEL_MAX_ABS_WEIGHT) {
            fatal("model file '%s': tensor '%s' holds %g at row %zu, column %zu: no trained GPT weight is that large "
                  "(limit %g): the file is damaged", path, e->name, x[j], k / e->cols, k % e->cols, MODEL_MAX_ABS_WEIGHT);
        }
    }
}

static void check_finite_tensor(const char* path, const ParamEntry* e, const float* x) {
    check_finite_range(path, e, x, 0, e->rows * e->cols);
}

// Parameters move between files and their buffer a chunk at a time, so no copy of the whole model is ever held in
// host memory: a ParamStream takes loaded fp32 values (put) or hands out the values to save (get), n at flat offset
// off. The host-array stream below serves the tests and the tools; the trainer's streams into and out of the model's
// device buffers (and master weights) are defined with the model.
struct ParamStream {
    void (*put)(void* self, size_t off, const float* x, size_t n);
    void (*get)(void* self, size_t off, float* x, size_t n);
    void* self;
};
static void param_stream_put(ParamStream* s, size_t off, const float* x, size_t n) { s->put(s->self, off, x, n); }

#define PARAM_CHUNK ((size_t)1 << 20) // elements per chunk (a multiple of 8 bytes in fp32 and bf16: see model_load)

static void host_stream_put(void* self, size_t off, const float* x, size_t n) { memcpy((float*)self + off, x, n * sizeof(float)); }
static void host_stream_get(void* self, size_t off, float* x, size_t n) { memcpy(x, (const float*)self + off, n * sizeof(float)); }
static ParamStream host_stream(float* params) { ParamStream s = {host_stream_put, host_stream_get, params}; return s; }

// A fresh model into a host array (tests, tools).
static void init_params(float* params, const ParamLayout* pl, uint64_t seed) {
    ParamStream s = host_stream(params);
    init_params_stream(&s, pl, seed);
}

// Loads parameters from a model file into a stream, checking its exact size and that every value is finite. Reads
// chunk by chunk; the checksum (of kind sum_kind) covers the whole file, header and payload, as a checkpoint records
// it. The chunks are multiples of 8 bytes, so the word-wise FNV kind hashes them as it hashes whole tensors.
static uint64_t model_load_stream(const char* path, FILE* fp, int version, const ParamLayout* pl, ParamStream* dst, int sum_kind) {
    size_t elem = version == 3 ? 4 : 2;
    long long expect = 1024 + (long long)(pl->num_params * elem);
    long long actual = file_size(path);
    if (actual != expect) {
        fclose(fp);
        fatal("model file '%s' is %s: %lld bytes, expected %lld for this header", path, actual < expect ? "truncated" : "too long", actual, expect);
    }
    int32_t header[256];
    fseekCheck(fp, 0, SEEK_SET, path);
    freadCheck(header, sizeof(int32_t), 256, fp, path);
    Checksum sum;
    checksum_begin(&sum, sum_kind);
    checksum_add(&sum, header, sizeof(header));
    float* buf = (float*)mallocCheck(PARAM_CHUNK * sizeof(float));
    uint16_t* raw = version == 3 ? NULL : (uint16_t*)mallocCheck(PARAM_CHUNK * sizeof(uint16_t));
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        size_t n = e->rows * e->cols;
        for (size_t k = 0; k < n; k += PARAM_CHUNK) {
            size_t cnt = n - k < PARAM_CHUNK ? n - k : PARAM_CHUNK;
            if (version == 3) {
                freadCheck(buf, sizeof(float), cnt, fp, path);
                checksum_add(&sum, buf, cnt * sizeof(float));
            } else {
                freadCheck(raw, sizeof(uint16_t), cnt, fp, path);
                checksum_add(&sum, raw, cnt * sizeof(uint16_t));
                for (size_t j = 0; j < cnt; j++) { buf[j] = bf16_to_float(raw[j]); }
            }
            check_finite_range(path, e, buf, k, cnt);
            dst->put(dst->self, e->offset + k, buf, cnt);
        }
    }
    free(buf);
    free(raw);
    fclose(fp);
    return checksum_end(&sum);
}

// The same into a host array (already allocated for this layout).
static uint64_t model_load_params_sum(const char* path, FILE* fp, int version, const ParamLayout* pl, float* params, int sum_kind) {
    ParamStream s = host_stream(params);
    return model_load_stream(path, fp, version, pl, &s, sum_kind);
}

// The same with the checksum kind new checkpoints use.
static uint64_t model_load_params(const char* path, FILE* fp, int version, const ParamLayout* pl, float* params) {
    return model_load_params_sum(path, fp, version, pl, params, CHECKSUM_DEFAULT);
}

// Saves an llm.c model file atomically from a stream, chunk by chunk in llm.c's file order: version 3 (fp32), or 5
// (bf16, each value rounded to nearest-even as PyTorch's .to(torch.bfloat16) does for llm.c's *_bf16.bin files);
// returns the checksum of the whole file (header and payload, as written). path NULL: reads the stream in the same
// order and writes nothing (the other ranks of a tensor-parallel group, whose gets are collective).
static uint64_t model_save_stream_version(const char* path, const ParamLayout* pl, ParamStream* src, int version) {
    if (version != 3 && version != 5) { fatal("model file '%s': cannot write version %d (3 = fp32, 5 = bf16)", path ? path : "?", version); }
    AtomicFile af;
    if (path) { atomic_open(&af, path); }
    int32_t h[256] = {0};
    const GPTConfig* g = &pl->cfg;
    h[0] = MODEL_MAGIC; h[1] = version; h[2] = g->max_seq_len; h[3] = g->vocab_size; h[4] = g->num_layers;
    h[5] = g->num_heads; h[6] = g->channels; h[7] = g->padded_vocab_size;
    if (path) { fwriteCheck(h, sizeof(int32_t), 256, af.fp, path); }
    Checksum sum;
    checksum_begin(&sum, CHECKSUM_DEFAULT);
    checksum_add(&sum, h, sizeof(h));
    float* buf = (float*)mallocCheck(PARAM_CHUNK * sizeof(float));
    uint16_t* half = version == 5 ? (uint16_t*)mallocCheck(PARAM_CHUNK * sizeof(uint16_t)) : NULL;
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        size_t n = e->rows * e->cols;
        for (size_t k = 0; k < n; k += PARAM_CHUNK) {
            size_t cnt = n - k < PARAM_CHUNK ? n - k : PARAM_CHUNK;
            src->get(src->self, e->offset + k, buf, cnt);
            const void* out = buf;
            size_t width = sizeof(float);
            if (half) {
                for (size_t j = 0; j < cnt; j++) { half[j] = bf16_bits(buf[j]); }
                out = half;
                width = sizeof(uint16_t);
            }
            if (path) { fwriteCheck(out, width, cnt, af.fp, path); }
            checksum_add(&sum, out, cnt * width);
        }
    }
    free(buf);
    free(half);
    if (path) { atomic_commit(&af); }
    return checksum_end(&sum);
}

// Version 3 (fp32): what checkpoints hold.
static uint64_t model_save_stream(const char* path, const ParamLayout* pl, ParamStream* src) {
    return model_save_stream_version(path, pl, src, 3);
}

static uint64_t model_save(const char* path, const ParamLayout* pl, const float* params) {
    ParamStream s = host_stream((float*)params);
    return model_save_stream(path, pl, &s);
}

// A logical (whole-model) stream over a rank's local stream under tensor and pipeline parallelism: offsets and counts
// are the logical layout's (what files hold), each call within one tensor. put keeps the elements this rank holds
// (files load on every rank and each keeps its share; tensors of other pipeline stages are skipped). get is a
// collective over the ranks of data-parallel rank 0: the pipeline stage holding the tensor gathers it over its
// tensor-parallel group (every rank hands in the contiguous part of the range it holds, an all-gather shares them,
// each reassembles the logical range by walking its runs; a replicated tensor comes from rank 0), and that stage's
// tensor-parallel rank 0 sends it to pipeline rank 0: world rank 0 ends with the values.
typedef struct {
    const ParamLayout* pl;   // this rank's layout (tp, tp_rank, pipeline stage, both offsets of every tensor)
    const ParamLayout* gl;   // the logical layout
    ParamStream* local;
    CommGroup* tp_group;
    CommGroup* pp_group;
    float* buf;              // scratch: this rank's part, then the gathered parts
    size_t cap;
} ShareStream;

#define SHARE_TAG_PARAM 13 // pipeline messages of parameters being saved

// The tensor of layout pl that holds logical range [off, off + n); NULL when none does (another stage's).
static const ParamEntry* layout_tensor_at(const ParamLayout* pl, size_t off, size_t n) {
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        if (off >= e->goffset && off < e->goffset + e->grows * e->gcols) {
            if (off + n > e->goffset + e->grows * e->gcols) { fatal("internal: logical range [%zu, %zu) crosses tensor '%s'", off, off + n, e->name); }
            return e;
        }
    }
    return NULL;
}

static float* share_stream_scratch(ShareStream* s, size_t n) {
    if (n > s->cap) {
        free(s->buf);
        s->buf = (float*)mallocCheck(n * sizeof(float));
        s->cap = n;
    }
    return s->buf;
}

static void share_stream_put(void* self, size_t off, const float* x, size_t n) {
    ShareStream* s = (ShareStream*)self;
    const ParamEntry* e = layout_tensor_at(s->pl, off, n);
    if (!e) { return; } // another pipeline stage's
    float* part = share_stream_scratch(s, n);
    size_t k0 = off - e->goffset, first;
    size_t count = pack_runs(e, s->pl->tp, s->pl->tp_rank, 0, k0, k0 + n, 0, SIZE_MAX, (float*)x, part, 1, &first);
    if (count) { s->local->put(s->local->self, first, part, count); }
}

static void share_stream_get(void* self, size_t off, float* x, size_t n) {
    ShareStream* s = (ShareStream*)self;
    const ParamLayout* pl = s->pl;
    const ParamEntry* ge = layout_tensor_at(s->gl, off, n);
    if (!ge) { fatal("internal: logical range [%zu, %zu) outside the model", off, off + n); }
    int holder = layout_holder_stage(pl, ge);
    if (pl->pp_rank == holder) {
        const ParamEntry* e = layout_tensor_at(pl, off, n);
        if (!e) { fatal("internal: stage %d does not hold '%s'", holder, ge->name); }
        int tp = pl->tp;
        size_t k0 = off - e->goffset, lo;
        if (tp == 1) {
            s->local->get(s->local->self, e->offset + k0, x, n);
        } else {
            size_t counts[TP_MAX], start[TP_MAX];
            for (int t = 0; t < tp; t++) { counts[t] = tp_local_span(e, tp, t, k0, k0 + n, 1, &start[t]); }
            float* mine = share_stream_scratch(s, 2 * n);
            float* all = mine + n;
            size_t cnt = tp_local_span(e, tp, pl->tp_rank, k0, k0 + n, 1, &lo);
            if (cnt) { s->local->get(s->local->self, e->offset + lo, mine, cnt); }
            comm_allgatherv_f32(s->tp_group, mine, all, counts);
            // rank t's part starts after those of ranks below it; its runs come in logical order
            size_t cursor[TP_MAX];
            for (int t = 0; t < tp; t++) { cursor[t] = t == 0 ? 0 : cursor[t - 1] + counts[t - 1]; }
            for (size_t k = k0; k < k0 + n;) {
                TpRun run = tp_run(e, tp, k, k0 + n - k);
                int t = run.owner < 0 ? 0 : run.owner;
                memcpy(x + (k - k0), all + cursor[t], run.len * sizeof(float));
                cursor[t] += run.len;
                k += run.len;
            }
        }
    }
    if (holder != 0 && pl->tp_rank == 0) {
        if (pl->pp_rank == holder) { comm_send(s->pp_group, x, n * sizeof(float), 0, SHARE_TAG_PARAM); }
        if (pl->pp_rank == 0) { comm_recv(s->pp_group, x, n * sizeof(float), holder, SHARE_TAG_PARAM); }
    }
}

// The logical stream over `local` (free with share_stream_free); without tensor or pipeline parallelism the local
// stream itself is logical.
static ParamStream share_stream(ShareStream* s, const ParamLayout* pl, const ParamLayout* gl, ParamStream* local,
                                CommGroup* tp_group, CommGroup* pp_group) {
    memset(s, 0, sizeof(*s));
    if (pl->tp == 1 && pl->pp == 1) { return *local; }
    s->pl = pl; s->gl = gl; s->local = local; s->tp_group = tp_group; s->pp_group = pp_group;
    ParamStream out = {share_stream_put, share_stream_get, s};
    return out;
}

static void share_stream_free(ShareStream* s) { free(s->buf); s->buf = NULL; s->cap = 0; }

#endif // MODEL_FILES_H
