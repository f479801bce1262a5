/*
tests/test_hf.c: Hugging Face GPT-2 checkpoints in and out (safetensors.h, hf_gpt2.h, ./train_gpt --export-hf).

    make tests/test_hf && ./tests/test_hf        (from the repository root, after `make train_gpt`)

Groups:
  - formats: fp16 -> fp32 for every one of the 65536 halves against ldexp; bf16 spot values.
  - PyTorch-written checkpoints (tests/ref/hf*, made by scripts/make_reference.py from the parameters of
    tests/ref/ref_model.bin): F32 with the "transformer." prefix, mask buffers and a tied lm_head; F16; the hub's
    unprefixed layout in BF16; two shards with an index, reached by the index, a shard-less directory and the
    directory. Each loads to the llm.c file's parameters (bit for bit, or bit for bit after the same rounding
    PyTorch applied), and the F32 one gives the same logits as the llm.c file, which match PyTorch's.
  - round trip: ours -> safetensors -> ours, bit-exact; the written header (names, shapes, dtypes, contiguous
    offsets, Conv1D transposed) and config.json checked by parsing them.
  - malformed input refused with the file (and tensor) named: absurd header length, truncated file, offsets past
    the end, overlaps, end < begin, byte size vs dtype x shape, unknown dtype, non-JSON, a NUL in the header,
    duplicate names, wrong dtype or shape for the model, missing and unexpected tensors, an untied lm_head, NaN,
    unsupported config.json settings, broken shard indexes.
  - the real binary: --export-hf from an llm.c file, from HF (sharded) and back, bit-identical files; a
    GPT-2-vocabulary model exports the tokenizer files; flag misuse refused; training from an HF checkpoint logs
    the same losses as from the llm.c file.
  - --export-llmc: version 3 byte-identical to the llm.c file (also from PyTorch's F32 safetensors); version 5
    (--dtype bf16) with every value rounded to nearest even, against a rounding computed apart and against
    PyTorch's own (its BF16 safetensors of the same parameters export to the same file); ties, carries,
    subnormals; the bf16 file loads back exactly; misuse refused.
Every check prints "PASS name (detail)" or "FAIL name: detail"; the last line is "N passed, M failed".
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary

#ifndef USE_CJSON
#error "tests/test_hf needs cJSON: build with -DUSE_CJSON -lcjson (make tests/test_hf does when libcjson-dev is installed)"
#endif

static char TMP[256]; // a private directory under /tmp, removed at the end

static const char* REF_BIN = "tests/ref/ref_model.bin";
static const char* REF_STATE = "tests/ref/ref_state.bin";

// ----------------------------------------------------------------------------
// helpers

// Runs a shell command (testing.h's run_capture) with its output flattened to one line, without trailing
// newlines, for the PASS/FAIL detail. Returns the exit status.
static int run_capture_line(const char* cmd, char* out, size_t cap) {
    int rc = run_capture(cmd, out, cap);
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '\n') { out[--n] = '\0'; }
    for (size_t i = 0; i < n; i++) { if (out[i] == '\n') { out[i] = ' '; } }
    return rc;
}

static int sh(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char* fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

// Loads an llm.c model file into m (parameters only).
static void load_llmc(GPT* m, const char* path) {
    GPTConfig g;
    int version;
    FILE* fp;
    model_read_header(path, &g, &version, &fp);
    gpt_alloc_params(m, &g, 1, DTYPE_FP32, g.max_seq_len); // fp32: the CPU's parameters are host floats
    model_load_params(path, fp, version, &m->layout, m->params);
}

// Loads a Hugging Face checkpoint (file, index or directory) into m (parameters only).
static void load_hf(GPT* m, const char* path) {
    HfCheckpoint ck;
    GPTConfig g;
    hf_open(&ck, path, &g);
    gpt_alloc_params(m, &g, 1, DTYPE_FP32, g.max_seq_len); // fp32: the CPU's parameters are host floats
    hf_load_params(&ck, &m->layout, m->params);
}

static int same_config(const GPTConfig* a, const GPTConfig* b) {
    return a->max_seq_len == b->max_seq_len && a->vocab_size == b->vocab_size && a->padded_vocab_size == b->padded_vocab_size &&
           a->num_layers == b->num_layers && a->num_heads == b->num_heads && a->channels == b->channels;
}

// Number of parameters whose bits differ between a and b (same layout); *first gets the first one's index.
static size_t count_bit_diffs(const GPT* a, const GPT* b, size_t* first) {
    size_t n = a->layout.num_params, bad = 0;
    *first = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a->params[i], &b->params[i], 4) != 0) { if (!bad) { *first = i; } bad++; }
    }
    return bad;
}

// float -> IEEE half, round to nearest even (what torch's .half() does), for the expected values of the F16 file.
static uint16_t f32_to_f16_rne(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) { return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u); }
    if (ax >= 0x477ff000u) { return sign | 0x7c00u; } // 65520 and above round to infinity
    if (ax < 0x38800000u) {                           // below 2^-14: a subnormal half, k * 2^-24
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)rintf(a * 16777216.0f);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

// float -> bfloat16, round to nearest even (torch's .bfloat16()).
static uint16_t f32_to_bf16_rne(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Logits (B, T, V) of the model on tokens x (B, T), the real vocabulary only.
static float* model_logits(GPT* m, const int32_t* x, int B, int T) {
    const GPTConfig* g = &m->cfg;
    activations_alloc(&m->acts, &m->ctx, g, B, T, 0);
    gpt_forward(m, x, B, T);
    float* row = (float*)mallocCheck(sizeof(float) * g->padded_vocab_size);
    float* out = (float*)mallocCheck(sizeof(float) * (size_t)B * T * g->vocab_size);
    for (int r = 0; r < B * T; r++) {
        classifier_logits_rows(&m->ctx, row, m->acts.lnf + (size_t)r * g->channels, m->p.wte, 1, g->channels, g->padded_vocab_size);
        memcpy(out + (size_t)r * g->vocab_size, row, sizeof(float) * g->vocab_size);
    }
    free(row);
    return out;
}

// The reference batch and PyTorch's logits from tests/ref/ref_state.bin.
typedef struct { int B, T; int32_t* x; float* logits; } RefState;

static void ref_state_load(RefState* s, int V) {
    FILE* fp = fopenCheck(REF_STATE, "rb");
    int32_t h[256];
    freadCheck(h, 4, 256, fp, REF_STATE);
    s->B = h[2]; s->T = h[3];
    size_t BT = (size_t)s->B * s->T;
    s->x = (int32_t*)mallocCheck(BT * 4);
    int32_t* y = (int32_t*)mallocCheck(BT * 4);
    s->logits = (float*)mallocCheck(BT * V * 4);
    freadCheck(s->x, 4, BT, fp, REF_STATE);
    freadCheck(y, 4, BT, fp, REF_STATE);
    freadCheck(s->logits, 4, BT * V, fp, REF_STATE);
    free(y);
    fclose(fp);
}

// Runs fn(arg) in a child process; the check passes if it exits with status 1 and its stderr holds every one of
// the (up to three) expected strings. The message is shown in the PASS line, so the log documents each refusal.
static void expect_fatal(const char* name, void (*fn)(const void*), const void* arg, const char* w1, const char* w2, const char* w3) {
    int pfd[2];
    if (pipe(pfd) != 0) { check(0, name, "pipe failed"); return; }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) { dup2(devnull, 1); }
        fn(arg);
        _exit(0);
    }
    close(pfd[1]);
    char out[8192];
    size_t n = 0;
    ssize_t got;
    while ((got = read(pfd[0], out + n, sizeof(out) - 1 - n)) > 0) { n += (size_t)got; }
    out[n] = '\0';
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    while (n > 0 && out[n - 1] == '\n') { out[--n] = '\0'; }
    for (size_t i = 0; i < n; i++) { if (out[i] == '\n') { out[i] = ' '; } }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    int ok = code == 1 && (!w1 || strstr(out, w1)) && (!w2 || strstr(out, w2)) && (!w3 || strstr(out, w3));
    check(ok, name, "exit %d: %s", code, out);
}

static void do_load_hf(const void* path) { GPT m; load_hf(&m, (const char*)path); }
static void do_st_open(const void* path) { StFile f; st_open(&f, (const char*)path); }

// The safetensors file src with its header text edited (the first `find` replaced by `repl`, which may change its
// length: the length word is rewritten) and data unchanged, written to dst.
static int edit_header(const char* src, const char* dst, const char* find, const char* repl) {
    long long size = file_size(src);
    FILE* fp = fopenCheck(src, "rb");
    unsigned char* b = (unsigned char*)mallocCheck((size_t)size);
    freadCheck(b, 1, (size_t)size, fp, src);
    fclose(fp);
    uint64_t n;
    memcpy(&n, b, 8);
    char* h = (char*)mallocCheck(n + 1);
    memcpy(h, b + 8, n);
    h[n] = '\0';
    char* at = strstr(h, find);
    if (!at) { free(h); free(b); return -1; }
    size_t fl = strlen(find), rl = strlen(repl);
    uint64_t n2 = n - fl + rl;
    char* h2 = (char*)mallocCheck(n2 + 1);
    size_t pre = (size_t)(at - h);
    memcpy(h2, h, pre);
    memcpy(h2 + pre, repl, rl);
    memcpy(h2 + pre + rl, at + fl, n - pre - fl);
    FILE* out = fopenCheck(dst, "wb");
    fwriteCheck(&n2, 8, 1, out, dst);
    fwriteCheck(h2, 1, n2, out, dst);
    fwriteCheck(b + 8 + n, 1, (size_t)(size - 8 - (long long)n), out, dst);
    fcloseCheck(out, dst);
    free(h); free(h2); free(b);
    return 0;
}

// Overwrites `len` bytes at `offset` of a file.
static void patch_bytes(const char* path, long offset, const void* bytes, size_t len) {
    FILE* fp = fopenCheck(path, "r+b");
    fseekCheck(fp, offset, SEEK_SET, path);
    fwriteCheck(bytes, 1, len, fp, path);
    fcloseCheck(fp, path);
}

// A fresh case directory TMP/<tag> holding a copy of tests/ref/hf (model.safetensors + config.json); path of its
// model.safetensors into model.
static void case_dir(const char* tag, char* dir, size_t dcap, char* model, size_t mcap) {
    snprintf(dir, dcap, "%s/%s", TMP, tag);
    sh("rm -rf '%s' && mkdir -p '%s' && cp tests/ref/hf/model.safetensors tests/ref/hf/config.json '%s'/", dir, dir, dir);
    snprintf(model, mcap, "%s/model.safetensors", dir);
}

// ----------------------------------------------------------------------------
// formats

static void test_formats(void) {
    int bad = 0;
    uint16_t first_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int e = (h >> 10) & 31, man = h & 1023;
        double sign = (h & 0x8000) ? -1.0 : 1.0, want;
        if (e == 0) { want = sign * ldexp(man, -24); }
        else if (e < 31) { want = sign * ldexp(1024 + man, e - 25); }
        else { want = man ? NAN : sign * INFINITY; }
        float got = st_f16_to_f32((uint16_t)h);
        int ok = isnan(want) ? isnan(got) : (double)got == want && !!signbit(got) == !!signbit(want);
        if (!ok && !bad++) { first_bad = (uint16_t)h; }
    }
    check(bad == 0, "fp16 -> fp32: all 65536 halves (subnormals, infinities, NaN) equal ldexp's value", "%d wrong, first 0x%04x", bad, first_bad);
    int rt = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) { rt += f32_to_f16_rne(st_f16_to_f32((uint16_t)h)) == h; }
    check(rt == 0x7c00, "the test's fp32 -> fp16 rounding inverts fp16 -> fp32 on every finite half", "%d of %d", rt, 0x7c00);
    check(st_bf16_to_f32(0x3f80) == 1.0f && st_bf16_to_f32(0xc040) == -3.0f && isinf(st_bf16_to_f32(0x7f80)),
          "bf16 -> fp32: 1, -3, +inf", "0x3f80 0xc040 0x7f80");
}

// ----------------------------------------------------------------------------
// checkpoints written by PyTorch (scripts/make_reference.py)

static void test_pytorch_files(void) {
    GPT ref, m;
    load_llmc(&ref, REF_BIN);
    size_t first;

    // F32, prefixed, mask buffers (BOOL), lm_head equal to wte
    load_hf(&m, "tests/ref/hf/model.safetensors");
    size_t d = count_bit_diffs(&ref, &m, &first);
    check(same_config(&ref.cfg, &m.cfg) && d == 0, "PyTorch F32 safetensors (transformer.*, attn.bias, lm_head) == the llm.c file, bit for bit",
          "V %d Vp %d C %d L %d; %zu of %zu parameters differ (first %zu)", m.cfg.vocab_size, m.cfg.padded_vocab_size,
          m.cfg.channels, m.cfg.num_layers, d, ref.layout.num_params, first);
    // logits: the same parameters give the same logits, and they are PyTorch's (test_gpt's tolerance: our float32
    // sums run in another order than PyTorch's, ~1e-6 relative)
    RefState s;
    ref_state_load(&s, ref.cfg.vocab_size);
    float* la = model_logits(&ref, s.x, s.B, s.T);
    float* lb = model_logits(&m, s.x, s.B, s.T);
    size_t nl = (size_t)s.B * s.T * ref.cfg.vocab_size, same = 0, close = 0;
    double worst = 0.0;
    for (size_t i = 0; i < nl; i++) {
        same += memcmp(&la[i], &lb[i], 4) == 0;
        double diff = fabs((double)lb[i] - s.logits[i]);
        if (diff > worst || isnan(diff)) { worst = diff; }
        close += diff <= 1e-5 + 1e-4 * fabs(s.logits[i]);
    }
    check(same == nl, "logits from the F32 safetensors == logits from the llm.c file, bit for bit", "%zu of %zu", same, nl);
    check(close == nl, "logits from the F32 safetensors match PyTorch's (|d| <= 1e-5 + 1e-4|ref|)", "%zu of %zu, worst %.3g", close, nl, worst);
    free(lb);
    gpt_free(&m);

    // F16: the llm.c parameters rounded to half (round to nearest even, as torch's .half()), exactly
    load_hf(&m, "tests/ref/hf_fp16/model.safetensors");
    size_t bad = 0;
    for (size_t i = 0; i < ref.layout.num_params; i++) {
        float want = st_f16_to_f32(f32_to_f16_rne(ref.params[i]));
        bad += memcmp(&want, &m.params[i], 4) != 0;
    }
    check(same_config(&ref.cfg, &m.cfg) && bad == 0, "PyTorch F16 safetensors == the llm.c parameters rounded to fp16", "%zu differ", bad);
    // fp16 weights move the logits by about 2^-11 relative per weight: the tolerance is 10x the observed 1.7e-4
    lb = model_logits(&m, s.x, s.B, s.T);
    worst = 0.0;
    for (size_t i = 0; i < nl; i++) {
        double diff = fabs((double)lb[i] - s.logits[i]);
        if (!(diff <= worst)) { worst = diff; }
    }
    check(worst <= 2e-3, "logits from the F16 safetensors are PyTorch's within fp16 rounding (|d| <= 2e-3)", "worst %.3g", worst);
    free(lb);
    gpt_free(&m);

    // the hub's layout: no prefix, F32 attn.bias and scalar masked_bias buffers, no lm_head; BF16
    load_hf(&m, "tests/ref/hf_noprefix/model.safetensors");
    bad = 0;
    for (size_t i = 0; i < ref.layout.num_params; i++) {
        float want = st_bf16_to_f32(f32_to_bf16_rne(ref.params[i]));
        bad += memcmp(&want, &m.params[i], 4) != 0;
    }
    check(same_config(&ref.cfg, &m.cfg) && bad == 0, "unprefixed BF16 safetensors (the hub's names, mask buffers) == the llm.c parameters rounded to bf16", "%zu differ", bad);
    gpt_free(&m);

    // two shards, by the index and by the directory
    const char* sharded[] = {"tests/ref/hf_sharded/model.safetensors.index.json", "tests/ref/hf_sharded"};
    for (int k = 0; k < 2; k++) {
        load_hf(&m, sharded[k]);
        d = count_bit_diffs(&ref, &m, &first);
        check(same_config(&ref.cfg, &m.cfg) && d == 0, k == 0 ? "sharded F32 checkpoint through its index == the llm.c file" :
              "sharded F32 checkpoint through its directory == the llm.c file", "%zu differ", d);
        gpt_free(&m);
    }
    load_hf(&m, "tests/ref/hf");
    d = count_bit_diffs(&ref, &m, &first);
    check(d == 0, "--init DIR (holding model.safetensors) == the llm.c file", "%zu differ", d);
    gpt_free(&m);
    free(la);
    free(s.x); free(s.logits);
    gpt_free(&ref);
}

// ----------------------------------------------------------------------------
// round trip and the written files

// Checks that dir holds the export of `ref`: every tensor named as save_pretrained names it, with HF's shape, F32,
// contiguous offsets, the values of ref (Conv1D transposed, no padded rows), and a config.json to match.
static void check_export_dir(const char* what, const char* dir, const GPT* ref) {
    char path[1024], name[200];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    StFile f;
    st_open(&f, path);
    const ParamLayout* pl = &ref->layout;
    const GPTConfig* g = &ref->cfg;
    int bad_names = 0, bad_shapes = 0, bad_values = 0, bad_dtype = 0;
    uint64_t bytes = 0;
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        // expected name and shape, written out here rather than taken from hf_gpt2.h
        static const char* const hf_layer[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
            "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
            "mlp.c_proj.weight", "mlp.c_proj.bias"};
        int tr = e->kind == 2 || e->kind == 4 || e->kind == 8 || e->kind == 10;
        if (e->layer >= 0) { snprintf(name, sizeof(name), "transformer.h.%d.%s", e->layer, hf_layer[e->kind]); }
        else {
            snprintf(name, sizeof(name), "transformer.%s", strcmp(e->name, "wte") == 0 ? "wte.weight" : strcmp(e->name, "wpe") == 0 ?
                     "wpe.weight" : strcmp(e->name, "lnfw") == 0 ? "ln_f.weight" : "ln_f.bias");
        }
        const StTensor* t = st_find(&f, name);
        if (!t) { bad_names++; continue; }
        uint64_t rows = strcmp(e->name, "wte") == 0 ? (uint64_t)g->vocab_size : e->rows;
        uint64_t dims[2] = {tr ? e->cols : rows, tr ? rows : e->cols};
        int ok_shape = e->rows == 1 ? st_shape_is(t, 1, &dims[1]) : st_shape_is(t, 2, dims);
        if (!ok_shape) { bad_shapes++; continue; }
        if (t->dtype != ST_F32) { bad_dtype++; continue; }
        bytes += t->end - t->begin;
        float* v = (float*)mallocCheck(t->numel * 4);
        st_read_f32(&f, t, 0, t->numel, v);
        const float* src = ref->params + e->offset;
        for (uint64_t r = 0; r < rows; r++) {
            for (uint64_t c = 0; c < e->cols; c++) {
                float want = src[r * e->cols + c];
                float got = tr ? v[c * rows + r] : v[r * e->cols + c];
                bad_values += memcmp(&want, &got, 4) != 0;
            }
        }
        free(v);
    }
    char msg[300];
    snprintf(msg, sizeof(msg), "%s: %d tensors written (expected %d)", what, f.num_tensors, pl->num_tensors);
    check(f.num_tensors == pl->num_tensors && bad_names == 0 && bad_shapes == 0 && bad_dtype == 0, msg,
          "%d names missing, %d shapes wrong, %d not F32", bad_names, bad_shapes, bad_dtype);
    snprintf(msg, sizeof(msg), "%s: values equal ours (Conv1D weights transposed, padded rows dropped)", what);
    check(bad_values == 0, msg, "%d differ", bad_values);
    snprintf(msg, sizeof(msg), "%s: data is exactly the tensors, back to back", what);
    check(bytes == (uint64_t)((long long)f.file_bytes - (long long)f.data_start) && f.data_start % 8 == 0, msg,
          "%" PRIu64 " tensor bytes, %" PRIu64 " data bytes, header ends at %" PRIu64, bytes, f.file_bytes - f.data_start, f.data_start);
    st_close(&f);

    snprintf(path, sizeof(path), "%s/config.json", dir);
    cJSON* c = hf__read_json(path, "config.json", 1 << 20);
    const cJSON* arch = cJSON_GetObjectItemCaseSensitive(c, "architectures");
    const char* mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "model_type"));
    const char* act = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "activation_function"));
    const char* a0 = cJSON_IsArray(arch) ? cJSON_GetStringValue(cJSON_GetArrayItem(arch, 0)) : NULL;
#define NUMV(k) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, k))
    int ok = mt && strcmp(mt, "gpt2") == 0 && act && strcmp(act, "gelu_new") == 0 && a0 && strcmp(a0, "GPT2LMHeadModel") == 0 &&
             NUMV("n_embd") == g->channels && NUMV("n_layer") == g->num_layers && NUMV("n_head") == g->num_heads &&
             NUMV("n_positions") == g->max_seq_len && NUMV("n_ctx") == g->max_seq_len && NUMV("vocab_size") == g->vocab_size &&
             NUMV("layer_norm_epsilon") == 1e-5 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "tie_word_embeddings"));
#undef NUMV
    cJSON_Delete(c);
    snprintf(msg, sizeof(msg), "%s: config.json (gpt2, GPT2LMHeadModel, gelu_new, shape, eps 1e-5, tied)", what);
    check(ok, msg, "%s", path);
}

static void test_round_trip(void) {
    GPT ref, m;
    load_llmc(&ref, REF_BIN);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/rt", TMP);
    int saved = dup(1), devnull = open("/dev/null", O_WRONLY);
    fflush(stdout);
    dup2(devnull, 1); // hf_export's progress lines
    hf_export(dir, &ref.layout, ref.params);
    fflush(stdout);
    dup2(saved, 1);
    close(devnull); close(saved);
    load_hf(&m, dir);
    size_t first;
    size_t d = count_bit_diffs(&ref, &m, &first);
    check(same_config(&ref.cfg, &m.cfg) && d == 0, "round trip: llm.c -> safetensors -> ours, bit for bit", "%zu differ (first %zu)", d, first);
    gpt_free(&m);
    check_export_dir("export of ref_model.bin", dir, &ref);
    char path[600];
    snprintf(path, sizeof(path), "%s/vocab.json", dir);
    check(!file_exists(path), "no tokenizer files for a 101-token vocabulary", "%s absent", path);
    gpt_free(&ref);
}

// ----------------------------------------------------------------------------
// malformed input

typedef struct { const char* tag; const char* find; const char* repl; const char* w1; const char* w2; const char* desc; } HeaderEdit;

static void test_malformed(void) {
    char dir[512], model[600], path[700];
    // header edits of the PyTorch F32 file: each must be refused naming the file (and the tensor)
    static const HeaderEdit edits[] = {
        {"past_end", "\"data_offsets\":[0,12928]", "\"data_offsets\":[0,999999999]", "run past the end", "'transformer.wte.weight'", "offsets past the end of the file"},
        {"overlap", "\"data_offsets\":[12928,14976]", "\"data_offsets\":[12800,14848]", "overlap", "'transformer.wpe.weight'", "overlapping data ranges"},
        {"end_before_begin", "\"data_offsets\":[0,12928]", "\"data_offsets\":[12928,0]", "end before they begin", "'transformer.wte.weight'", "end < begin"},
        {"size_mismatch", "\"shape\":[101,32]", "\"shape\":[101,31]", "do not hold a F32 tensor of shape [101, 31]", "'transformer.wte.weight'", "byte size != dtype x shape"},
        {"unknown_dtype", "\"dtype\":\"F32\"", "\"dtype\":\"F33\"", "unknown dtype \"F33\"", "'transformer.wte.weight'", "unknown dtype"},
        {"not_json", "\"dtype\":\"F32\"", "dtype:\"F32\"", "not valid JSON", NULL, "non-JSON header"},
        {"shape_not_int", "\"shape\":[101,32]", "\"shape\":[101,32.5]", "shape entry 1 is not a non-negative integer", "'transformer.wte.weight'", "fractional dimension"},
        {"no_offsets", "\"data_offsets\":[0,12928]", "\"data_offsetz\":[0,12928]", "\"data_offsets\" is missing", "'transformer.wte.weight'", "missing data_offsets"},
        {"duplicate", "\"transformer.wpe.weight\"", "\"transformer.wte.weight\"", "appears twice", "'transformer.wte.weight'", "a name twice"},
        {"wrong_dtype", "\"dtype\":\"F32\"", "\"dtype\":\"I32\"", "has dtype I32", "'transformer.wte.weight'", "integer weights"},
        {"wrong_shape", "\"shape\":[32],\"data_offsets\":[14976,15104]", "\"shape\":[2,16],\"data_offsets\":[14976,15104]", "has shape [2, 16]", "needs [32]", "a shape the config does not allow"},
        {"missing", "\"transformer.ln_f.bias\"", "\"transformer.ln_f.biax\"", "has no tensor 'ln_f.bias'", NULL, "a missing tensor"},
        {"unexpected", "\"lm_head.weight\"", "\"score.weight\"", "unexpected tensor 'score.weight'", NULL, "an unknown tensor"},
        {"prefix_twice", "\"lm_head.weight\"", "\"wte.weight\"", "holds tensor 'wte.weight' twice", NULL, "a tensor with and without the prefix"},
        {"lm_head_shape", "\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[101,32]", "\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[32,101]", "lm_head.weight' is F32 [32, 101]", NULL, "an lm_head of the wrong shape"},
    };
    for (size_t k = 0; k < sizeof(edits) / sizeof(edits[0]); k++) {
        const HeaderEdit* e = &edits[k];
        case_dir(e->tag, dir, sizeof(dir), model, sizeof(model));
        char name[300];
        snprintf(name, sizeof(name), "refused: %s", e->desc);
        if (edit_header("tests/ref/hf/model.safetensors", model, e->find, e->repl) != 0) { check(0, name, "'%s' not in the header", e->find); continue; }
        expect_fatal(name, do_load_hf, model, e->w1, e->w2, model);
    }

    // byte-level damage
    long long size = file_size("tests/ref/hf/model.safetensors");
    case_dir("absurd_len", dir, sizeof(dir), model, sizeof(model));
    uint64_t huge = (uint64_t)1 << 62;
    patch_bytes(model, 0, &huge, 8);
    expect_fatal("refused: absurd header length (2^62)", do_load_hf, model, "is absurd", model, NULL);
    case_dir("len_past_end", dir, sizeof(dir), model, sizeof(model));
    uint64_t past = (uint64_t)size;
    patch_bytes(model, 0, &past, 8);
    expect_fatal("refused: header length past the end of the file", do_load_hf, model, "is truncated", model, NULL);
    case_dir("truncated", dir, sizeof(dir), model, sizeof(model));
    if (truncate(model, size / 2) != 0) { check(0, "truncate", "%s", strerror(errno)); }
    expect_fatal("refused: file truncated in its data", do_load_hf, model, "run past the end", "truncated", model);
    case_dir("truncated_by_one", dir, sizeof(dir), model, sizeof(model)); // (the last tensor's last byte missing)
    if (truncate(model, size - 1) != 0) { check(0, "truncate", "%s", strerror(errno)); }
    expect_fatal("refused: file one byte short", do_load_hf, model, "run past the end", "truncated", model);
    case_dir("tiny", dir, sizeof(dir), model, sizeof(model));
    if (truncate(model, 5) != 0) { check(0, "truncate", "%s", strerror(errno)); }
    expect_fatal("refused: a 5-byte file", do_load_hf, model, "is truncated", model, NULL);
    case_dir("nul", dir, sizeof(dir), model, sizeof(model));
    patch_bytes(model, 20, "\0", 1);
    expect_fatal("refused: a NUL byte inside the header", do_load_hf, model, "NUL byte", model, NULL);
    case_dir("empty_obj", dir, sizeof(dir), model, sizeof(model));
    {
        FILE* fp = fopenCheck(model, "wb");
        uint64_t n = 2;
        fwriteCheck(&n, 8, 1, fp, model);
        fwriteCheck("[]", 1, 2, fp, model);
        fcloseCheck(fp, model);
    }
    expect_fatal("refused: a header that is JSON but not an object", do_st_open, model, "not an object", model, NULL);

    // values: NaN in wte, an lm_head that differs from wte
    StFile f;
    st_open(&f, "tests/ref/hf/model.safetensors");
    const StTensor* wte = st_find(&f, "transformer.wte.weight");
    const StTensor* lm = st_find(&f, "lm_head.weight");
    long wte_at = (long)(f.data_start + wte->begin), lm_at = (long)(f.data_start + lm->begin);
    st_close(&f);
    case_dir("nan", dir, sizeof(dir), model, sizeof(model));
    float nanv = NAN;
    patch_bytes(model, wte_at + 4 * (3 * 32 + 5), &nanv, 4);
    expect_fatal("refused: NaN in a weight (check_finite_tensor)", do_load_hf, model, "tensor 'wte' holds a non-finite value", "row 3, column 5", model);
    case_dir("huge_weight", dir, sizeof(dir), model, sizeof(model));
    float big = 3e9f;
    patch_bytes(model, wte_at + 4 * 7, &big, 4);
    expect_fatal("refused: an absurd weight (3e9)", do_load_hf, model, "no trained GPT weight is that large", model, NULL);
    case_dir("untied", dir, sizeof(dir), model, sizeof(model));
    float other = 0.5f;
    patch_bytes(model, lm_at + 4 * (2 * 32 + 1), &other, 4);
    expect_fatal("refused: lm_head.weight that differs from wte", do_load_hf, model, "lm_head.weight differs from the token embedding", "row 2, column 1", model);

    // config.json
    static const struct { const char* tag; const char* find; const char* repl; const char* want; } cfg_edits[] = {
        {"act", "\"gelu_new\"", "\"relu\"", "activation_function \"relu\" is not supported"},
        {"eps", "1e-05", "1e-06", "layer_norm_epsilon 1e-06 is not supported"},
        {"heads", "\"n_head\": 4", "\"n_head\": 5", "n_embd 32 is not a multiple of n_head 5"},
        {"vocab", "\"vocab_size\": 101", "\"vocab_size\": 100", "has shape [101, 32], but config.json"},
        {"no_layers", "\"n_layer\": 2,", "", "\"n_layer\" is missing"},
        {"type", "\"model_type\": \"gpt2\"", "\"model_type\": \"llama\"", "model_type \"llama\" is not supported"},
        {"inner", "\"n_inner\": null", "\"n_inner\": 64", "n_inner 64 is not supported"},
        {"not_json", "{", "{{", "is not valid JSON"},
        {"string_int", "\"n_embd\": 32", "\"n_embd\": \"32\"", "\"n_embd\" must be an integer"},
        {"string_eps", "\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": \"1e-05\"", "\"layer_norm_epsilon\" must be a number"},
        {"no_context", "\"n_ctx\": 16,\n  \"n_embd\": 32,\n  \"n_head\": 4,\n  \"n_inner\": null,\n  \"n_layer\": 2,\n  \"n_positions\": 16,",
         "\"n_embd\": 32,\n  \"n_head\": 4,\n  \"n_inner\": null,\n  \"n_layer\": 2,", "\"n_positions\" is missing"},
        {"no_vocab", ",\n  \"vocab_size\": 101", "", "\"vocab_size\" is missing"},
    };
    for (size_t k = 0; k < sizeof(cfg_edits) / sizeof(cfg_edits[0]); k++) {
        char tag[64], name[300];
        snprintf(tag, sizeof(tag), "cfg_%s", cfg_edits[k].tag);
        case_dir(tag, dir, sizeof(dir), model, sizeof(model));
        snprintf(path, sizeof(path), "%s/config.json", dir);
        // the edit by python3 -c would need Python; sed with fixed strings is enough here
        char sedcmd[2048];
        snprintf(sedcmd, sizeof(sedcmd), "perl -0pi -e 's/\\Q%s\\E/%s/' '%s'", cfg_edits[k].find, cfg_edits[k].repl, path);
        int rc = system(sedcmd);
        snprintf(name, sizeof(name), "refused: config.json with %s", cfg_edits[k].tag);
        if (rc != 0) { check(0, name, "edit failed: %s", sedcmd); continue; }
        expect_fatal(name, do_load_hf, model, cfg_edits[k].want, cfg_edits[k].tag[0] == 'v' ? model : "config.json", NULL);
    }
    // tie_word_embeddings false with no lm_head.weight (the hub's layout, which has none): this trainer cannot untie
    snprintf(dir, sizeof(dir), "%s/untied_no_head", TMP);
    sh("rm -rf '%s' && cp -r tests/ref/hf_noprefix '%s' && perl -0pi -e 's/\"tie_word_embeddings\": true/\"tie_word_embeddings\": false/' '%s/config.json'",
       dir, dir, dir);
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    expect_fatal("refused: tie_word_embeddings false without an lm_head.weight", do_load_hf, path, "says tie_word_embeddings false",
                 "has no lm_head.weight", NULL);
    case_dir("no_config", dir, sizeof(dir), model, sizeof(model));
    snprintf(path, sizeof(path), "%s/config.json", dir);
    unlink(path);
    expect_fatal("refused: no config.json beside the weights", do_load_hf, model, "no config.json beside it", path, NULL);
    expect_fatal("refused: --init config.json", do_load_hf, "tests/ref/hf/config.json", "that is the configuration", NULL, NULL);
    snprintf(path, sizeof(path), "%s/emptydir", TMP);
    sh("mkdir -p '%s'", path);
    expect_fatal("refused: a directory without weights", do_load_hf, path, "holds neither model.safetensors nor model.safetensors.index.json", NULL, NULL);

    // shard index
    snprintf(dir, sizeof(dir), "%s/shard_missing", TMP);
    sh("rm -rf '%s' && cp -r tests/ref/hf_sharded '%s' && rm '%s/model-00002-of-00002.safetensors'", dir, dir, dir);
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    expect_fatal("refused: an index naming a missing shard", do_load_hf, path, "model-00002-of-00002.safetensors', which does not exist", path, NULL);
    snprintf(dir, sizeof(dir), "%s/shard_wrong", TMP);
    sh("rm -rf '%s' && cp -r tests/ref/hf_sharded '%s' && perl -0pi -e 's/(\"transformer.wte.weight\": \"model-0000)1/${1}2/' '%s/model.safetensors.index.json'", dir, dir, dir);
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    expect_fatal("refused: an index putting a tensor in the wrong shard", do_load_hf, path, "puts tensor 'transformer.wte.weight' in", "which holds no such tensor", NULL);
    snprintf(dir, sizeof(dir), "%s/shard_escape", TMP);
    sh("rm -rf '%s' && cp -r tests/ref/hf_sharded '%s' && perl -0pi -e 's/\"model-00001/\"..\\/model-00001/' '%s/model.safetensors.index.json'", dir, dir, dir);
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    expect_fatal("refused: an index naming a file outside its directory", do_load_hf, path, "not a file name in the index's directory", path, NULL);
}

// ----------------------------------------------------------------------------
// the real binary

// Writes a shard of n tokens in [0, V) (llm.c format) for the training comparison.
static void write_shard(const char* path, int n, int V) {
    FILE* f = fopenCheck(path, "wb");
    int32_t h[256] = {0};
    h[0] = DATALOADER_SHARD_MAGIC; h[1] = 1; h[2] = n;
    fwriteCheck(h, 4, 256, f, path);
    uint64_t s = 99;
    for (int i = 0; i < n; i++) {
        uint16_t t = (uint16_t)(rng_next(&s) % (uint64_t)V);
        fwriteCheck(&t, 2, 1, f, path);
    }
    fcloseCheck(f, path);
}

static void test_binary(void) {
    if (!file_exists("./train_gpt")) { check(0, "the binary", "./train_gpt is not built (make train_gpt)"); return; }
    char cmd[4096], out[65536];
    GPT ref;
    load_llmc(&ref, REF_BIN);

    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --export-hf %s/bin1", REF_BIN, TMP);
    int rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "model.safetensors"), "./train_gpt --init ref_model.bin --export-hf DIR exits 0", "exit %d: %.300s", rc, out);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/bin1", TMP);
    check_export_dir("./train_gpt --export-hf", dir, &ref);
    snprintf(cmd, sizeof(cmd), "cmp %s/bin1/model.safetensors %s/rt/model.safetensors && cmp %s/bin1/config.json %s/rt/config.json", TMP, TMP, TMP, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0, "the binary's export is byte-identical to hf_export's", "%s", out);
    // HF in, HF out: the exported directory, and PyTorch's shards, export to the same bytes
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s/bin1 --export-hf %s/bin2 >/dev/null && cmp %s/bin1/model.safetensors %s/bin2/model.safetensors && "
             "./train_gpt --init tests/ref/hf_sharded/model.safetensors.index.json --export-hf %s/bin3 >/dev/null && cmp %s/bin1/model.safetensors %s/bin3/model.safetensors",
             TMP, TMP, TMP, TMP, TMP, TMP, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0, "export of the export, and of PyTorch's sharded checkpoint, are byte-identical to the first export", "exit %d: %.300s", rc, out);
    snprintf(dir, sizeof(dir), "%s/bin1", TMP);
    // no temporary files left behind by the atomic writes
    snprintf(cmd, sizeof(cmd), "ls -A %s/bin1 | tr '\\n' ' '", TMP);
    run_capture_line(cmd, out, sizeof(out));
    check(strcmp(out, "config.json model.safetensors ") == 0, "the export directory holds exactly config.json and model.safetensors", "'%s'", out);

    // GPT-2's vocabulary: the tokenizer files come along, copies of data/gpt2's
    GPTConfig g = {8, 50257, 50304, 1, 1, 8};
    GPT big;
    gpt_alloc_params(&big, &g, 1, DTYPE_FP32, g.max_seq_len);
    init_params(big.params, &big.layout, 7);
    char path[600];
    snprintf(path, sizeof(path), "%s/v50257.bin", TMP);
    model_save(path, &big.layout, big.params);
    snprintf(cmd, sizeof(cmd), "GPT2_VOCAB_DIR=data/gpt2 ./train_gpt --init %s --export-hf %s/tok && cmp %s/tok/vocab.json data/gpt2/encoder.json && "
             "cmp %s/tok/merges.txt data/gpt2/vocab.bpe && test -s %s/tok/tokenizer_config.json", path, TMP, TMP, TMP, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0, "a 50257-token model exports vocab.json, merges.txt (copies of encoder.json, vocab.bpe), tokenizer_config.json", "exit %d: %.400s", rc, out);
    snprintf(dir, sizeof(dir), "%s/tok", TMP);
    check_export_dir("export of a GPT-2-vocabulary model", dir, &big);
    GPT back;
    load_hf(&back, dir);
    size_t first;
    size_t d = count_bit_diffs(&big, &back, &first);
    check(back.cfg.padded_vocab_size == 50304 && d == 0, "loading it back pads 50257 -> 50304 with zero rows, all parameters equal", "Vp %d, %zu differ", back.cfg.padded_vocab_size, d);
    gpt_free(&back);
    gpt_free(&big);

    // flag misuse
    snprintf(cmd, sizeof(cmd), "./train_gpt --export-hf %s/x", TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "--export-hf") && strstr(out, "needs --init FILE"), "--export-hf without --init is refused", "exit %d: %.200s", rc, out);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --export-hf %s/x --steps 3", REF_BIN, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "--steps does nothing"), "--export-hf with a training flag is refused", "exit %d: %.200s", rc, out);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s/nope.safetensors --export-hf %s/x", TMP, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "nope.safetensors' does not exist"), "--init of a missing .safetensors is refused naming it", "exit %d: %.200s", rc, out);

    // training from the HF checkpoint logs the same losses as from the llm.c file (same parameters, same run)
    char shard[600];
    snprintf(shard, sizeof(shard), "%s/shard_train_000.bin", TMP);
    write_shard(shard, 2000, ref.cfg.vocab_size);
    const char* inits[2] = {REF_BIN, "tests/ref/hf_sharded"};
    char logs[2][65536];
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --train %s --batch-size 2 --seq-len 8 --steps 3 --lr 1e-3 --threads 1 "
                 "--log %s/train%d.jsonl >/dev/null && cat %s/train%d.jsonl", inits[k], shard, TMP, k, TMP, k);
        rc = run_capture_line(cmd, logs[k], sizeof(logs[k]));
        if (rc != 0) { check(0, "training from a Hugging Face checkpoint", "exit %d: %.300s", rc, logs[k]); gpt_free(&ref); return; }
    }
    // the logs differ only in the ms and tokens/s fields: compare the losses and gradient norms
    char a[2][2048];
    for (int k = 0; k < 2; k++) {
        size_t m = 0;
        for (const char* p = logs[k]; (p = strstr(p, "\"loss\": ")) != NULL; p++) {
            const char* e = strstr(p, ", \"ms\"");
            if (!e || m + (size_t)(e - p) + 2 >= sizeof(a[k])) { break; }
            memcpy(a[k] + m, p, (size_t)(e - p));
            m += (size_t)(e - p);
            a[k][m++] = ';';
        }
        a[k][m] = '\0';
    }
    check(a[0][0] && strcmp(a[0], a[1]) == 0, "training from the sharded HF checkpoint logs the llm.c file's losses and norms, bit for bit",
          "%s| vs |%s", a[0], a[1]);
    gpt_free(&ref);
}

// ----------------------------------------------------------------------------
// --export-llmc: llm.c model files out, fp32 (version 3) and bf16 (version 5)

// bf16 by round-to-nearest-even, computed apart from precision.h: of the two bf16 values around x (its bits cut to
// the top 16, and the next one away from zero), the nearer in double, a tie going to the even one.
static uint16_t bf16_nearest_even(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, 4);
    memcpy(&fhi, &hi, 4);
    double dlo = fabs((double)x - (double)flo), dhi = fabs((double)fhi - (double)x);
    if (dlo < dhi) { return (uint16_t)(lo >> 16); }
    if (dhi < dlo) { return (uint16_t)(hi >> 16); }
    return (uint16_t)(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

// Reads a whole file into a malloc'd buffer; *n its size (0 and NULL if it cannot be read).
static unsigned char* slurp(const char* path, size_t* n) {
    *n = 0;
    FILE* f = fopen(path, "rb");
    if (!f) { return NULL; }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* b = (unsigned char*)malloc(sz > 0 ? (size_t)sz : 1);
    if (b && fread(b, 1, (size_t)sz, f) == (size_t)sz) { *n = (size_t)sz; } else { free(b); b = NULL; }
    fclose(f);
    return b;
}

static void test_export_llmc(void) {
    if (!file_exists("./train_gpt")) { check(0, "--export-llmc", "./train_gpt is not built (make train_gpt)"); return; }
    char cmd[4096], out[65536], p3[600], p5[600], back[600];
    snprintf(p3, sizeof(p3), "%s/e3.bin", TMP);
    snprintf(p5, sizeof(p5), "%s/e5_bf16.bin", TMP);
    snprintf(back, sizeof(back), "%s/e5_back.bin", TMP);
    // fp32: the llm.c file itself, byte for byte
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --export-llmc %s && cmp %s %s", REF_BIN, p3, REF_BIN, p3);
    int rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "version 3"), "--export-llmc without --dtype writes version 3, byte-identical to the llm.c file it read", "exit %d: %.300s", rc, out);
    // fp32 from PyTorch's F32 safetensors (Conv1D transposed back, vocabulary padded): the same bytes
    snprintf(cmd, sizeof(cmd), "./train_gpt --init tests/ref/hf --export-llmc %s/e3hf.bin >/dev/null && cmp %s %s/e3hf.bin", TMP, REF_BIN, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0, "from PyTorch's safetensors (F32) to an llm.c file: byte-identical to the llm.c file of the same parameters", "exit %d: %.300s", rc, out);

    // bf16: header, size, and every value rounded to nearest even (checked against bf16_nearest_even)
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --export-llmc %s --dtype bf16", REF_BIN, p5);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "version 5"), "--export-llmc --dtype bf16 exits 0, saying version 5", "exit %d: %.300s", rc, out);
    size_t n3, n5;
    unsigned char* b3 = slurp(REF_BIN, &n3);
    unsigned char* b5 = slurp(p5, &n5);
    size_t np = n3 > 1024 ? (n3 - 1024) / 4 : 0;
    int hdr_ok = b3 && b5 && n5 == 1024 + 2 * np;
    if (hdr_ok) {
        int32_t h3[256], h5[256];
        memcpy(h3, b3, 1024);
        memcpy(h5, b5, 1024);
        hdr_ok = h5[1] == 5 && h3[1] == 3;
        h5[1] = 3;
        hdr_ok = hdr_ok && memcmp(h3, h5, 1024) == 0;
    }
    check(hdr_ok, "the bf16 file: llm.c's header with version 5 (the rest as the fp32 file's), 1024 + 2 bytes per parameter", "%zu bytes for %zu parameters", n5, np);
    size_t bad = 0, first = 0;
    for (size_t i = 0; hdr_ok && i < np; i++) {
        float x;
        uint16_t got;
        memcpy(&x, b3 + 1024 + 4 * i, 4);
        memcpy(&got, b5 + 1024 + 2 * i, 2);
        if (got != bf16_nearest_even(x) && bad++ == 0) { first = i; }
    }
    check(hdr_ok && bad == 0, "every parameter of the bf16 file is its fp32 value rounded to nearest even", "%zu of %zu differ, first at %zu", bad, np, first);
    free(b3);
    free(b5);
    // PyTorch's own rounding: its BF16 safetensors of the same parameters (.to(torch.bfloat16)) export to the same file
    snprintf(cmd, sizeof(cmd), "./train_gpt --init tests/ref/hf_noprefix --export-llmc %s/e5hf.bin --dtype bf16 >/dev/null && cmp %s %s/e5hf.bin", TMP, p5, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0, "PyTorch's BF16 safetensors of the same parameters export to the same bf16 file (our rounding is PyTorch's)", "exit %d: %.300s", rc, out);
    // the bf16 file loads (llm.c's version 5) and widens exactly: exported again as fp32, each value is its bf16
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --export-llmc %s", p5, back);
    rc = run_capture_line(cmd, out, sizeof(out));
    b5 = slurp(p5, &n5);
    unsigned char* bb = slurp(back, &n3);
    bad = rc != 0 || !b5 || !bb || n3 != 1024 + 4 * np;
    for (size_t i = 0; !bad && i < np; i++) {
        uint16_t h;
        uint32_t w;
        memcpy(&h, b5 + 1024 + 2 * i, 2);
        memcpy(&w, bb + 1024 + 4 * i, 4);
        bad += w != ((uint32_t)h << 16);
    }
    check(!bad, "the bf16 file loads back (version 5) to exactly its bf16 values", "exit %d, %zu differ: %.200s", rc, bad, out);
    free(b5);
    free(bb);

    // the cases random weights miss: ties both ways and of both signs, carries into the exponent, subnormals (a model
    // file holds no weight of 1e8 or more: the loader refuses it)
    GPT m;
    load_llmc(&m, REF_BIN);
    const uint32_t special[] = {0x3F808000u, 0x3F818000u, 0xBF808000u, 0xBF818000u, 0x3F7FFFFFu, 0x3FFF8000u, 0x3FFFFFFFu,
                                0x00018000u, 0x00008000u, 0x80008000u, 0x4B7FFFFFu, 0x42F6E979u, 0x3F808001u, 0x3F807FFFu};
    size_t ns = sizeof(special) / sizeof(special[0]);
    for (size_t i = 0; i < ns; i++) { memcpy(&m.params[m.layout.table[0].offset + i], &special[i], 4); }
    char sp[600], sp5[600];
    snprintf(sp, sizeof(sp), "%s/special.bin", TMP);
    snprintf(sp5, sizeof(sp5), "%s/special_bf16.bin", TMP);
    model_save(sp, &m.layout, m.params);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --export-llmc %s --dtype bf16", sp, sp5);
    rc = run_capture_line(cmd, out, sizeof(out));
    b5 = slurp(sp5, &n5);
    const uint16_t expect[] = {0x3F80, 0x3F82, 0xBF80, 0xBF82, 0x3F80, 0x4000, 0x4000, 0x0002, 0x0000, 0x8000, 0x4B80, 0x42F7, 0x3F81, 0x3F80};
    bad = rc != 0 || !b5 || n5 < 1024 + 2 * ns;
    char detail[256] = "";
    for (size_t i = 0; !bad && i < ns; i++) {
        uint16_t got;
        memcpy(&got, b5 + 1024 + 2 * i, 2);
        float x;
        memcpy(&x, &special[i], 4);
        if (got != expect[i] || got != bf16_nearest_even(x)) {
            bad = 1;
            snprintf(detail, sizeof(detail), "0x%08X -> 0x%04X, expected 0x%04X", special[i], got, expect[i]);
        }
    }
    check(!bad, "bf16 rounding of ties (to even, both signs), carries into the exponent, subnormals", "exit %d %s %.200s", rc, detail, out);
    free(b5);
    gpt_free(&m);

    // misuse: each refused (exit 1) with a message holding the expected words
    const struct { const char* args; const char* expect; const char* name; } misuse[] = {
        {"--init %s --export-llmc %s/x.bin --dtype fp16", "no fp16 file", "--export-llmc --dtype fp16 is refused (llm.c has no fp16 model file)"},
        {"--export-llmc %s/x.bin", "needs --init FILE", "--export-llmc without --init is refused"},
        {"--init %s --export-llmc %s/x.bin --lr 1e-3", "--lr does nothing", "--export-llmc with a training flag is refused"},
        {"--init %s --export-hf %s/x --dtype bf16", "--dtype does nothing", "--export-hf with --dtype is refused (safetensors out are fp32)"},
        {"--init %s --export-llmc %s/no/such/dir/x.bin", "no/such/dir/x.bin", "--export-llmc into a missing directory fails naming the file"},
    };
    for (size_t k = 0; k < sizeof(misuse) / sizeof(misuse[0]); k++) {
        char args[1024];
        if (strncmp(misuse[k].args, "--init", 6) == 0) { snprintf(args, sizeof(args), misuse[k].args, REF_BIN, TMP); }
        else { snprintf(args, sizeof(args), misuse[k].args, TMP); }
        snprintf(cmd, sizeof(cmd), "./train_gpt %s", args);
        rc = run_capture_line(cmd, out, sizeof(out));
        check(rc == 1 && strstr(out, misuse[k].expect) && !file_exists("x.bin"), misuse[k].name, "exit %d: %.200s", rc, out);
    }
    // both at once: one load, two files
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --export-hf %s/both --export-llmc %s/both.bin --dtype bf16 >/dev/null && "
             "cmp %s/both.bin %s && cmp %s/both/model.safetensors %s/bin1/model.safetensors", REF_BIN, TMP, TMP, TMP, p5, TMP, TMP);
    rc = run_capture_line(cmd, out, sizeof(out));
    check(rc == 0, "--export-hf and --export-llmc together write both, each as alone", "exit %d: %.300s", rc, out);
}

int main(void) {
#ifdef _OPENMP
    // one thread: expect_fatal forks, and a child of a process that has started libgomp's thread pool can hang in
    // its first parallel region (the pool's threads do not survive fork); the models here are tiny anyway
    omp_set_num_threads(1);
#endif
    snprintf(TMP, sizeof(TMP), "/tmp/test_hf.XXXXXX");
    if (!mkdtemp(TMP)) { fprintf(stderr, "mkdtemp failed: %s\n", strerror(errno)); return 1; }
    test_formats();
    test_pytorch_files();
    test_round_trip();
    test_malformed();
    test_binary();
    test_export_llmc();
    sh("rm -rf '%s'", TMP);
    return test_summary();
}
