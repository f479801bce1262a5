/*
hf_gpt2.h: GPT-2 checkpoints in Hugging Face's layout, in (--init) and out (--export-hf). Included by train_gpt.c
after its model-file section: it uses GPTConfig, ParamEntry, ParamLayout and check_finite_tensor from there, and
safetensors.h for the files themselves.

In:  ./train_gpt --init DIR/model.safetensors ...        (or DIR/model.safetensors.index.json, or DIR)
     config.json beside it gives the shape: n_embd, n_layer, n_head, n_positions (or n_ctx), vocab_size. Settings
     this trainer does not implement are refused by name (activation_function other than gelu_new, a
     layer_norm_epsilon other than 1e-5, n_inner other than 4 n_embd, scale_attn_weights false, ...).
     Tensor names with the "transformer." prefix (GPT2LMHeadModel.save_pretrained) or without it (the hub's
     original GPT-2 files); fp32, fp16 or bf16 (converted to fp32); one file, or shards listed by the weight_map of
     model.safetensors.index.json. The causal-mask buffers of old files (h.N.attn.bias, h.N.attn.masked_bias) are
     ignored; lm_head.weight is accepted only if it equals wte (the trainer ties them); any other tensor is refused.
     HF's Conv1D weights are (in, out): c_attn.weight is (C, 3C) where our qkvw is (3C, C), so the four matrices
     of each block are transposed on load. The vocabulary is padded to Vp (a multiple of 128) with zero rows.
     Every value goes through check_finite_tensor, as llm.c model files do.
Out: ./train_gpt --init FILE --export-hf DIR               (FILE: any model --init takes)
     DIR/model.safetensors (fp32, "transformer."-prefixed names as save_pretrained writes them, no lm_head.weight:
     from_pretrained ties it, padded vocabulary rows dropped, Conv1D weights transposed back), DIR/config.json
     (model_type gpt2, GPT2LMHeadModel, gelu_new, tie_word_embeddings true), and for GPT-2's 50257-token
     vocabulary the tokenizer: vocab.json and merges.txt (copies of OpenAI's encoder.json and vocab.bpe, which are
     the same files) plus tokenizer_config.json. Each file is written atomically (utils.h AtomicFile).

Built without cJSON (no -DUSE_CJSON), hf_open and hf_export exit with "built without cJSON" instead.
Static functions only; include guard.
*/
#ifndef HF_GPT2_H
#define HF_GPT2_H

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// 1 if an --init path names a Hugging Face checkpoint rather than an llm.c model file: a .safetensors file, a
// .json file (the shard index), or a directory. Needs no library, so a build without cJSON can still say why not.
static int hf_is_checkpoint_path(const char* path) {
    size_t n = strlen(path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) { return 1; }
    return (n >= 12 && strcmp(path + n - 12, ".safetensors") == 0) || (n >= 5 && strcmp(path + n - 5, ".json") == 0);
}

// 1 if this build reads and writes Hugging Face checkpoints (built with cJSON).
static int hf_supported(void) {
#ifdef USE_CJSON
    return 1;
#else
    return 0;
#endif
}

#define HF_NO_CJSON_MESSAGE "built without cJSON, so Hugging Face safetensors checkpoints are not supported: apt-get install libcjson-dev, then rebuild (make)"

#ifdef USE_CJSON

#include "safetensors.h" // defines: StFile, st_open, st_find, st_read_f32, st_close, StSpec, StWriter, st_writer_*

#define HF_MAX_CONFIG_BYTES ((long long)1 << 20)   // a config.json is about 1 KB
#define HF_MAX_INDEX_BYTES ((long long)64 << 20)   // an index lists every tensor name once: tens of KB

// ----------------------------------------------------------------------------
// Names: our tensor kinds and Hugging Face's names for them (per layer: "h.<l>." + hf).

static const struct { const char* ours; const char* hf; int transposed; } HF_LAYER_NAMES[] = {
    {"ln1w", "ln_1.weight", 0},        {"ln1b", "ln_1.bias", 0},
    {"qkvw", "attn.c_attn.weight", 1}, {"qkvb", "attn.c_attn.bias", 0},
    {"attprojw", "attn.c_proj.weight", 1}, {"attprojb", "attn.c_proj.bias", 0},
    {"ln2w", "ln_2.weight", 0},        {"ln2b", "ln_2.bias", 0},
    {"fcw", "mlp.c_fc.weight", 1},     {"fcb", "mlp.c_fc.bias", 0},
    {"fcprojw", "mlp.c_proj.weight", 1}, {"fcprojb", "mlp.c_proj.bias", 0},
};
#define HF_NUM_LAYER_NAMES ((int)(sizeof(HF_LAYER_NAMES) / sizeof(HF_LAYER_NAMES[0])))

// Hugging Face's name of a table entry, without the "transformer." prefix, into buf; *transposed says whether HF
// stores it as (cols, rows). Exits on an entry it does not know (a table that grew without this list).
static void hf__entry_name(const ParamEntry* e, char* buf, size_t cap, int* transposed) {
    *transposed = 0;
    if (e->layer < 0) {
        const char* hf = strcmp(e->name, "wte") == 0 ? "wte.weight" : strcmp(e->name, "wpe") == 0 ? "wpe.weight" :
                         strcmp(e->name, "lnfw") == 0 ? "ln_f.weight" : strcmp(e->name, "lnfb") == 0 ? "ln_f.bias" : NULL;
        if (!hf) { fatal("internal: no Hugging Face name for tensor '%s'", e->name); }
        snprintf(buf, cap, "%s", hf);
        return;
    }
    size_t base = strcspn(e->name, ".");
    for (int k = 0; k < HF_NUM_LAYER_NAMES; k++) {
        if (strlen(HF_LAYER_NAMES[k].ours) == base && strncmp(e->name, HF_LAYER_NAMES[k].ours, base) == 0) {
            snprintf(buf, cap, "h.%d.%s", e->layer, HF_LAYER_NAMES[k].hf);
            *transposed = HF_LAYER_NAMES[k].transposed;
            return;
        }
    }
    fatal("internal: no Hugging Face name for tensor '%s'", e->name);
}

// Hugging Face's shape of a table entry into dims; returns the number of dimensions. wte has V rows there (no
// padding), vectors are 1-D, Conv1D weights are (in, out).
static int hf__entry_shape(const ParamEntry* e, const GPTConfig* g, int transposed, uint64_t* dims) {
    if (strcmp(e->name, "wte") == 0) { dims[0] = (uint64_t)g->vocab_size; dims[1] = e->cols; return 2; }
    if (e->rows == 1) { dims[0] = e->cols; return 1; }
    dims[0] = transposed ? e->cols : e->rows;
    dims[1] = transposed ? e->rows : e->cols;
    return 2;
}

// 1 if `name` (prefix removed) is a causal-mask buffer of old GPT-2 files: h.<n>.attn.bias or h.<n>.attn.masked_bias.
static int hf__is_mask_buffer(const char* name) {
    if (strncmp(name, "h.", 2) != 0 || !isdigit((unsigned char)name[2])) { return 0; }
    const char* p = name + 2;
    while (isdigit((unsigned char)*p)) { p++; }
    return strcmp(p, ".attn.bias") == 0 || strcmp(p, ".attn.masked_bias") == 0;
}

// ----------------------------------------------------------------------------
// JSON files (config.json, model.safetensors.index.json)

// Reads and parses a JSON file of at most max_bytes; exits naming it if it is missing, too large or not JSON.
// The caller owns the tree (cJSON_Delete) and must not call fatal() while it holds it (see safetensors.h).
static cJSON* hf__read_json(const char* path, const char* what, long long max_bytes) {
    long long size = file_size(path);
    if (size < 0) { fatal("%s '%s' does not exist or cannot be read", what, path); }
    if (size > max_bytes) { fatal("%s '%s' is %lld bytes, above the %lld a real one could need", what, path, size, max_bytes); }
    FILE* fp = fopenCheck(path, "rb");
    char* text = (char*)mallocCheck((size_t)size + 1);
    freadCheck(text, 1, (size_t)size, fp, path);
    fclose(fp);
    text[size] = '\0';
    if (strlen(text) != (size_t)size) { free(text); fatal("%s '%s' holds a NUL byte: not JSON text", what, path); }
    char jerr[256];
    cJSON* root = json_parse(text, (size_t)size, jerr, sizeof(jerr));
    free(text);
    if (!root) { fatal("%s '%s' is not valid JSON: %s", what, path, jerr); }
    if (!cJSON_IsObject(root)) { cJSON_Delete(root); fatal("%s '%s' is JSON but not an object", what, path); }
    return root;
}

// The integer config.json value of `key` into *out: 1 if present, 0 if absent or null, -1 (message in err) if it
// is not an integer in [lo, hi].
static int hf__config_int(const cJSON* root, const char* key, long lo, long hi, long* out, char* err, size_t cap) {
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) { return 0; }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        if (!err[0]) { snprintf(err, cap, "\"%s\" must be an integer in [%ld, %ld]", key, lo, hi); }
        return -1;
    }
    *out = (long)d;
    return 1;
}

// The string value of `key` into out (empty if absent or null); a non-string sets err.
static void hf__config_str(const cJSON* root, const char* key, char* out, size_t out_cap, char* err, size_t cap) {
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(root, key);
    out[0] = '\0';
    if (!v || cJSON_IsNull(v)) { return; }
    if (!cJSON_IsString(v)) { if (!err[0]) { snprintf(err, cap, "\"%s\" must be a string", key); } return; }
    snprintf(out, out_cap, "%s", v->valuestring);
}

// The boolean value of `key`: 1, 0, or `dflt` if absent or null; a non-boolean sets err.
static int hf__config_bool(const cJSON* root, const char* key, int dflt, char* err, size_t cap) {
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) { return dflt; }
    if (!cJSON_IsBool(v)) { if (!err[0]) { snprintf(err, cap, "\"%s\" must be true or false", key); } return dflt; }
    return cJSON_IsTrue(v) ? 1 : 0;
}

// Reads a GPT-2 config.json into g (Vp = V rounded up to a multiple of 128) and *tie (tie_word_embeddings, default
// true). Exits naming the file and the setting for anything missing, malformed or not supported by this trainer.
static void hf_read_config(const char* path, GPTConfig* g, int* tie) {
    cJSON* root = hf__read_json(path, "config.json", HF_MAX_CONFIG_BYTES);
    char err[512] = "";
    long C = 0, L = 0, NH = 0, npos = 0, nctx = 0, V = 0, n_inner = 0;
    int has_C = hf__config_int(root, "n_embd", 1, 1 << 16, &C, err, sizeof(err));
    int has_L = hf__config_int(root, "n_layer", 1, 4096, &L, err, sizeof(err));
    int has_NH = hf__config_int(root, "n_head", 1, 1 << 16, &NH, err, sizeof(err));
    int has_npos = hf__config_int(root, "n_positions", 1, 1 << 20, &npos, err, sizeof(err));
    int has_nctx = hf__config_int(root, "n_ctx", 1, 1 << 20, &nctx, err, sizeof(err));
    int has_V = hf__config_int(root, "vocab_size", 1, (1 << 24) - 128, &V, err, sizeof(err));
    int has_inner = hf__config_int(root, "n_inner", 1, 1L << 30, &n_inner, err, sizeof(err));
    char model_type[64], act[64];
    hf__config_str(root, "model_type", model_type, sizeof(model_type), err, sizeof(err));
    hf__config_str(root, "activation_function", act, sizeof(act), err, sizeof(err));
    double eps = 1e-5;
    const cJSON* ev = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    if (ev && !cJSON_IsNull(ev)) {
        if (cJSON_IsNumber(ev)) { eps = ev->valuedouble; }
        else if (!err[0]) { snprintf(err, sizeof(err), "\"layer_norm_epsilon\" must be a number"); }
    }
    *tie = hf__config_bool(root, "tie_word_embeddings", 1, err, sizeof(err));
    int scale_attn = hf__config_bool(root, "scale_attn_weights", 1, err, sizeof(err));
    int scale_by_idx = hf__config_bool(root, "scale_attn_by_inverse_layer_idx", 0, err, sizeof(err));
    int cross = hf__config_bool(root, "add_cross_attention", 0, err, sizeof(err));
    cJSON_Delete(root);
    if (err[0]) { fatal("config.json '%s': %s", path, err); }
    if (model_type[0] && strcmp(model_type, "gpt2") != 0) {
        fatal("config.json '%s': model_type \"%s\" is not supported (only \"gpt2\")", path, model_type);
    }
    const char* missing = has_C < 1 ? "n_embd" : has_L < 1 ? "n_layer" : has_NH < 1 ? "n_head" :
                          has_npos < 1 && has_nctx < 1 ? "n_positions" : has_V < 1 ? "vocab_size" : NULL;
    if (missing) { fatal("config.json '%s': \"%s\" is missing (a GPT-2 config gives n_embd, n_layer, n_head, n_positions, vocab_size)", path, missing); }
    if (C % NH != 0) { fatal("config.json '%s': n_embd %ld is not a multiple of n_head %ld", path, C, NH); }
    if (act[0] && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0) {
        fatal("config.json '%s': activation_function \"%s\" is not supported: this trainer's GELU is GPT-2's tanh "
              "approximation (\"gelu_new\")", path, act);
    }
    if (eps != 1e-5) {
        fatal("config.json '%s': layer_norm_epsilon %g is not supported: this trainer's LayerNorm uses 1e-5", path, eps);
    }
    if (has_inner == 1 && n_inner != 4 * C) {
        fatal("config.json '%s': n_inner %ld is not supported: this trainer's MLP is 4 x n_embd = %ld wide", path, n_inner, 4 * C);
    }
    if (!scale_attn) { fatal("config.json '%s': scale_attn_weights false is not supported (attention is scaled by 1/sqrt(head size))", path); }
    if (scale_by_idx) { fatal("config.json '%s': scale_attn_by_inverse_layer_idx true is not supported", path); }
    if (cross) { fatal("config.json '%s': add_cross_attention true is not supported (GPT-2 LM checkpoints only)", path); }
    g->channels = (int)C;
    g->num_layers = (int)L;
    g->num_heads = (int)NH;
    g->max_seq_len = (int)(has_npos == 1 ? npos : nctx);
    g->vocab_size = (int)V;
    g->padded_vocab_size = (int)((V + 127) / 128 * 128);
}

// ----------------------------------------------------------------------------
// Reading a checkpoint

typedef struct {
    char* name;         // as the checkpoint names it, "transformer." prefix removed (lm_head.weight never has one)
    int shard;          // index in HfCheckpoint.shards
    const StTensor* t;
    int used;           // claimed by a parameter, lm_head or a mask buffer
} HfRef;

typedef struct {
    char dir[4096];         // the directory of config.json and every shard
    char source[4200];      // the .safetensors or .index.json file the checkpoint was read from
    StFile* shards;         // (num_shards)
    int num_shards;
    HfRef* refs;            // (num_refs) sorted by name
    int num_refs;
    const HfRef* lm_head;   // or NULL
    GPTConfig cfg;
} HfCheckpoint;

// qsort/bsearch order of references: by name (prefix removed).
static int hf__cmp_ref(const void* a, const void* b) { return strcmp(((const HfRef*)a)->name, ((const HfRef*)b)->name); }

// The reference called `name` (prefix removed), or NULL.
static HfRef* hf__find(const HfCheckpoint* ck, const char* name) {
    HfRef key;
    key.name = (char*)name;
    return (HfRef*)bsearch(&key, ck->refs, (size_t)ck->num_refs, sizeof(HfRef), hf__cmp_ref);
}

// Adds a reference to tensor t of shard s under its name without the "transformer." prefix.
static void hf__add_ref(HfCheckpoint* ck, int s, const StTensor* t) {
    const char* nm = strncmp(t->name, "transformer.", 12) == 0 ? t->name + 12 : t->name;
    size_t len = strlen(nm);
    HfRef* r = &ck->refs[ck->num_refs++];
    r->name = (char*)mallocCheck(len + 1);
    memcpy(r->name, nm, len + 1);
    r->shard = s;
    r->t = t;
    r->used = 0;
}

// Reads a shard index: the distinct shard file names of its weight_map into ck->shards (opened) and a reference
// per listed tensor into ck->refs. Shard names must be plain file names in the index's directory.
static void hf__open_index(HfCheckpoint* ck, const char* index_path) {
    cJSON* root = hf__read_json(index_path, "shard index", HF_MAX_INDEX_BYTES);
    const cJSON* wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) { cJSON_Delete(root); fatal("shard index '%s' has no \"weight_map\" object", index_path); }
    int n = cJSON_GetArraySize(wm);
    // copy what is needed out of the tree, so that errors below can exit without leaking it
    char** names = (char**)callocCheck((size_t)n, sizeof(char*));
    int* file_of = (int*)callocCheck((size_t)n, sizeof(int));
    char** files = (char**)callocCheck((size_t)n, sizeof(char*));
    int nfiles = 0, k = 0;
    char err[600] = "";
    for (const cJSON* it = wm->child; it; it = it->next, k++) {
        if (!cJSON_IsString(it)) { snprintf(err, sizeof(err), "weight_map entry '%.200s' is not a file name", it->string); break; }
        const char* fn = it->valuestring;
        if (!fn[0] || strchr(fn, '/') || strcmp(fn, ".") == 0 || strcmp(fn, "..") == 0 || strlen(fn) > 255) {
            snprintf(err, sizeof(err), "weight_map maps '%.200s' to \"%.200s\", not a file name in the index's directory", it->string, fn);
            break;
        }
        int f = 0;
        while (f < nfiles && strcmp(files[f], fn) != 0) { f++; }
        if (f == nfiles) { files[nfiles] = (char*)mallocCheck(strlen(fn) + 1); strcpy(files[nfiles++], fn); }
        file_of[k] = f;
        names[k] = (char*)mallocCheck(strlen(it->string) + 1);
        strcpy(names[k], it->string);
    }
    cJSON_Delete(root);
    if (err[0]) { fatal("shard index '%s': %s", index_path, err); }
    if (n == 0) { fatal("shard index '%s': the weight_map is empty", index_path); }
    ck->shards = (StFile*)callocCheck((size_t)nfiles, sizeof(StFile));
    for (int f = 0; f < nfiles; f++) {
        char p[8400];
        snprintf(p, sizeof(p), "%s/%s", ck->dir, files[f]);
        if (!file_exists(p)) { fatal("shard index '%s' lists '%s', which does not exist", index_path, p); }
        st_open(&ck->shards[f], p);
        ck->num_shards++;
    }
    ck->refs = (HfRef*)callocCheck((size_t)n, sizeof(HfRef));
    for (int i = 0; i < n; i++) {
        const StTensor* t = st_find(&ck->shards[file_of[i]], names[i]);
        if (!t) {
            fatal("shard index '%s' puts tensor '%.200s' in '%s', which holds no such tensor", index_path, names[i],
                  ck->shards[file_of[i]].path);
        }
        hf__add_ref(ck, file_of[i], t);
    }
    for (int i = 0; i < n; i++) { free(names[i]); }
    for (int f = 0; f < nfiles; f++) { free(files[f]); }
    free(names); free(file_of); free(files);
}

// Releases everything hf_open allocated (safe on a zeroed HfCheckpoint).
static void hf_close(HfCheckpoint* ck) {
    for (int s = 0; s < ck->num_shards; s++) { st_close(&ck->shards[s]); }
    free(ck->shards);
    for (int i = 0; i < ck->num_refs; i++) { free(ck->refs[i].name); }
    free(ck->refs);
    memset(ck, 0, sizeof(*ck));
}

// Opens a Hugging Face GPT-2 checkpoint (a .safetensors file, a .index.json shard index, or a directory holding
// model.safetensors or model.safetensors.index.json) and its config.json, and checks, before any large allocation,
// that it holds exactly the tensors of the configured model with the right shapes and float dtypes. Sets *g.
static void hf_open(HfCheckpoint* ck, const char* path, GPTConfig* g) {
    memset(ck, 0, sizeof(*ck));
    struct stat st;
    if (stat(path, &st) != 0) { fatal("--init: '%s' does not exist", path); }
    char src[4200];
    if (S_ISDIR(st.st_mode)) {
        snprintf(ck->dir, sizeof(ck->dir), "%s", path);
        snprintf(src, sizeof(src), "%s/model.safetensors", path);
        if (!file_exists(src)) { snprintf(src, sizeof(src), "%s/model.safetensors.index.json", path); }
        if (!file_exists(src)) {
            fatal("--init: directory '%s' holds neither model.safetensors nor model.safetensors.index.json", path);
        }
    } else {
        snprintf(src, sizeof(src), "%s", path);
        char copy[4200];
        snprintf(copy, sizeof(copy), "%s", path);
        snprintf(ck->dir, sizeof(ck->dir), "%s", dirname(copy));
    }
    size_t slen = strlen(src);
    if (slen >= 11 && strcmp(src + slen - 11, "config.json") == 0) {
        fatal("--init %s: that is the configuration; give the weights (model.safetensors, "
              "model.safetensors.index.json) or their directory", path);
    }
    snprintf(ck->source, sizeof(ck->source), "%s", src);
    char cfg_path[4200];
    snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", ck->dir);
    if (!file_exists(cfg_path)) {
        fatal("--init %s: no config.json beside it ('%s'): a Hugging Face checkpoint needs its config.json (n_embd, "
              "n_layer, n_head, n_positions, vocab_size)", path, cfg_path);
    }
    int tie = 1;
    hf_read_config(cfg_path, g, &tie);
    ck->cfg = *g;

    if (slen >= 5 && strcmp(src + slen - 5, ".json") == 0) {
        hf__open_index(ck, src);
    } else {
        ck->shards = (StFile*)callocCheck(1, sizeof(StFile));
        st_open(&ck->shards[0], src);
        ck->num_shards = 1;
        ck->refs = (HfRef*)callocCheck((size_t)ck->shards[0].num_tensors, sizeof(HfRef));
        for (int i = 0; i < ck->shards[0].num_tensors; i++) { hf__add_ref(ck, 0, &ck->shards[0].tensors[i]); }
    }
    qsort(ck->refs, (size_t)ck->num_refs, sizeof(HfRef), hf__cmp_ref);
    for (int i = 1; i < ck->num_refs; i++) {
        if (strcmp(ck->refs[i - 1].name, ck->refs[i].name) == 0) {
            fatal("'%s' holds tensor '%.200s' twice (with and without the \"transformer.\" prefix)", ck->source, ck->refs[i].name);
        }
    }

    // every parameter: present, a float dtype, the shape config.json implies
    ParamLayout pl;
    layout_build(&pl, g);
    for (int i = 0; i < pl.num_tensors; i++) {
        const ParamEntry* e = &pl.table[i];
        char nm[96], want[96], have[96];
        int tr;
        hf__entry_name(e, nm, sizeof(nm), &tr);
        HfRef* r = hf__find(ck, nm);
        if (!r) { layout_free(&pl); fatal("'%s' has no tensor '%s' (nor 'transformer.%s'): not a complete GPT-2 checkpoint", ck->source, nm, nm); }
        r->used = 1;
        StTensor wt;
        memset(&wt, 0, sizeof(wt));
        wt.ndim = hf__entry_shape(e, g, tr, wt.shape);
        if (!st_shape_is(r->t, wt.ndim, wt.shape)) {
            st_shape_str(&wt, want, sizeof(want));
            st_shape_str(r->t, have, sizeof(have));
            layout_free(&pl);
            fatal("'%s': tensor '%s' has shape %s, but config.json '%s' (n_embd %d, n_layer %d, n_positions %d, "
                  "vocab_size %d) needs %s", ck->shards[r->shard].path, r->t->name, have, cfg_path, g->channels,
                  g->num_layers, g->max_seq_len, g->vocab_size, want);
        }
        if (!st_dtype_is_float(r->t->dtype)) {
            layout_free(&pl);
            fatal("'%s': tensor '%s' has dtype %s; weights must be F32, F16 or BF16", ck->shards[r->shard].path,
                  r->t->name, ST_DTYPES[r->t->dtype].name);
        }
    }
    layout_free(&pl);
    HfRef* lm = hf__find(ck, "lm_head.weight");
    if (lm) {
        uint64_t dims[2] = {(uint64_t)g->vocab_size, (uint64_t)g->channels};
        char have[96];
        if (!st_shape_is(lm->t, 2, dims) || !st_dtype_is_float(lm->t->dtype)) {
            fatal("'%s': tensor 'lm_head.weight' is %s %s; a tied LM head is F32/F16/BF16 [%d, %d] like wte",
                  ck->shards[lm->shard].path, ST_DTYPES[lm->t->dtype].name, st_shape_str(lm->t, have, sizeof(have)),
                  g->vocab_size, g->channels);
        }
        lm->used = 1;
        ck->lm_head = lm;
    } else if (!tie) {
        fatal("config.json '%s' says tie_word_embeddings false but '%s' has no lm_head.weight: this trainer ties the "
              "LM head to wte", cfg_path, ck->source);
    }
    for (int i = 0; i < ck->num_refs; i++) {
        const HfRef* r = &ck->refs[i];
        if (!r->used && !hf__is_mask_buffer(r->name)) {
            fatal("'%s': unexpected tensor '%.200s': not part of a GPT-2 language model (GPT2LMHeadModel) with this "
                  "config", ck->shards[r->shard].path, r->t->name);
        }
    }
}

// Loads the parameters (already allocated and zeroed for a layout of ck->cfg) from an opened checkpoint:
// transposes the Conv1D weights, zeroes the padded vocabulary rows, checks every value (check_finite_tensor) and
// that lm_head.weight, if present, equals wte. Closes the checkpoint.
static void hf_load_params(HfCheckpoint* ck, const ParamLayout* pl, float* params) {
    size_t C = (size_t)pl->cfg.channels;
    float* tmp = (float*)mallocCheck(mulSize(mulSize(4 * C, C), sizeof(float))); // the largest transposed tensor
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        char nm[96];
        int tr;
        hf__entry_name(e, nm, sizeof(nm), &tr);
        const HfRef* r = hf__find(ck, nm);
        const StFile* f = &ck->shards[r->shard];
        float* dst = params + e->offset;
        size_t n = e->rows * e->cols;
        if (!tr) {
            uint64_t have = r->t->numel; // wte: V rows of Vp
            st_read_f32(f, r->t, 0, have, dst);
            memset(dst + have, 0, (n - (size_t)have) * sizeof(float));
        } else {
            st_read_f32(f, r->t, 0, n, tmp); // (cols, rows) = (in, out)
            for (size_t o = 0; o < e->rows; o++) {
                for (size_t in = 0; in < e->cols; in++) { dst[o * e->cols + in] = tmp[in * e->rows + o]; }
            }
        }
        check_finite_tensor(f->path, e, dst);
    }
    free(tmp);
    if (ck->lm_head) {
        const HfRef* r = ck->lm_head;
        const float* wte = params; // wte is first in the flat layout
        uint64_t total = r->t->numel;
        const uint64_t CHUNK = 1 << 16;
        float* buf = (float*)mallocCheck(CHUNK * sizeof(float));
        for (uint64_t at = 0; at < total; at += CHUNK) {
            uint64_t m = total - at < CHUNK ? total - at : CHUNK;
            st_read_f32(&ck->shards[r->shard], r->t, at, m, buf);
            for (uint64_t j = 0; j < m; j++) {
                if (buf[j] != wte[at + j]) {
                    uint64_t idx = at + j;
                    float a = buf[j], b = wte[idx];
                    free(buf);
                    fatal("'%s': lm_head.weight differs from the token embedding wte (row %" PRIu64 ", column %" PRIu64
                          ": %g vs %g): this trainer ties the LM head to wte, so an untied checkpoint cannot be loaded",
                          ck->shards[r->shard].path, idx / C, idx % C, a, b);
                }
            }
        }
        free(buf);
    }
    hf_close(ck);
}

// ----------------------------------------------------------------------------
// Writing a checkpoint

// Copies file src to dst atomically.
static void hf__copy_file(const char* src, const char* dst) {
    FILE* in = fopenCheck(src, "rb");
    AtomicFile af;
    atomic_open(&af, dst);
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), in)) > 0) { fwriteCheck(buf, 1, got, af.fp, dst); }
    if (ferror(in)) { fatal("read error on '%s'", src); }
    fclose(in);
    atomic_commit(&af);
}

// The directory holding GPT-2's encoder.json and vocab.bpe, into out: $GPT2_VOCAB_DIR, data/gpt2, or data/gpt2
// beside the executable. Returns 0 if none has both files.
static int hf_find_gpt2_vocab(char* out, size_t cap) {
    char exe[4096], cand[3][4200];
    int nc = 0;
    const char* env = getenv("GPT2_VOCAB_DIR");
    if (env && env[0]) { snprintf(cand[nc++], sizeof(cand[0]), "%s", env); }
    snprintf(cand[nc++], sizeof(cand[0]), "data/gpt2");
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) { exe[n] = '\0'; snprintf(cand[nc++], sizeof(cand[0]), "%s/data/gpt2", dirname(exe)); }
    for (int i = 0; i < nc; i++) {
        char a[4300], b[4300];
        snprintf(a, sizeof(a), "%.4100s/encoder.json", cand[i]);
        snprintf(b, sizeof(b), "%.4100s/vocab.bpe", cand[i]);
        if (file_exists(a) && file_exists(b)) { snprintf(out, cap, "%.4100s", cand[i]); return 1; }
    }
    return 0;
}

// Writes the model (parameters in the layout pl) as a Hugging Face GPT-2 checkpoint in dir (created if missing):
// model.safetensors, config.json, and for GPT-2's vocabulary vocab.json, merges.txt, tokenizer_config.json.
static void hf_export(const char* dir, const ParamLayout* pl, const float* params) {
    const GPTConfig* g = &pl->cfg;
    make_dirs("--export-hf", dir);
    atomic_clean_stale(dir);
    // the tensors in model order (wte, wpe, h.0.*, ..., ln_f.*), as save_pretrained names them
    int n = pl->num_tensors;
    StSpec* specs = (StSpec*)callocCheck((size_t)n, sizeof(StSpec));
    const ParamEntry** order = (const ParamEntry**)callocCheck((size_t)n, sizeof(ParamEntry*));
    char (*names)[112] = (char (*)[112])callocCheck((size_t)n, 112);
    int k = 0;
    for (int pass = 0; pass < 3; pass++) { // pass 0: wte, wpe; 1: layers, layer by layer; 2: ln_f
        for (int l = 0; l < (pass == 1 ? g->num_layers : 1); l++) {
            for (int i = 0; i < n; i++) {
                const ParamEntry* e = &pl->table[i];
                int is_lnf = strcmp(e->name, "lnfw") == 0 || strcmp(e->name, "lnfb") == 0;
                int want = pass == 0 ? (e->layer < 0 && !is_lnf) : pass == 1 ? e->layer == l : is_lnf;
                if (want) { order[k++] = e; }
            }
        }
    }
    if (k != n) { fatal("internal: export ordered %d of %d tensors", k, n); }
    size_t max_tr = 0;
    for (int i = 0; i < n; i++) {
        const ParamEntry* e = order[i];
        char nm[96];
        int tr;
        hf__entry_name(e, nm, sizeof(nm), &tr);
        snprintf(names[i], 112, "transformer.%s", nm);
        specs[i].name = names[i];
        specs[i].ndim = hf__entry_shape(e, g, tr, specs[i].shape);
        if (tr && e->rows * e->cols > max_tr) { max_tr = e->rows * e->cols; }
    }
    char path[4300];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    float* tmp = (float*)mallocCheck(mulSize(max_tr ? max_tr : 1, sizeof(float)));
    StWriter w;
    st_writer_begin(&w, path, specs, n);
    for (int i = 0; i < n; i++) {
        const ParamEntry* e = order[i];
        const float* src = params + e->offset;
        char nm[96];
        int tr;
        hf__entry_name(e, nm, sizeof(nm), &tr);
        if (strcmp(e->name, "wte") == 0) {
            st_writer_put(&w, src, (uint64_t)g->vocab_size * e->cols); // the padded rows are dropped
        } else if (!tr) {
            st_writer_put(&w, src, e->rows * e->cols);
        } else { // ours (out, in) -> HF (in, out)
            for (size_t o = 0; o < e->rows; o++) {
                for (size_t in = 0; in < e->cols; in++) { tmp[in * e->rows + o] = src[o * e->cols + in]; }
            }
            st_writer_put(&w, tmp, e->rows * e->cols);
        }
    }
    st_writer_commit(&w);
    free(tmp);
    free(specs);
    free(order);
    free(names);
    printf("export-hf: wrote %s (%d tensors, fp32)\n", path, n);

    // config.json: GPT-2's, with this model's shape
    int gpt2_vocab = g->vocab_size == 50257;
    snprintf(path, sizeof(path), "%s/config.json", dir);
    AtomicFile af;
    atomic_open(&af, path);
    fprintf(af.fp,
            "{\n"
            "  \"activation_function\": \"gelu_new\",\n"
            "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
            "  \"attn_pdrop\": 0.1,\n");
    if (g->vocab_size > 50256) { fprintf(af.fp, "  \"bos_token_id\": 50256,\n"); }
    fprintf(af.fp, "  \"embd_pdrop\": 0.1,\n");
    if (g->vocab_size > 50256) { fprintf(af.fp, "  \"eos_token_id\": 50256,\n"); }
    fprintf(af.fp,
            "  \"initializer_range\": 0.02,\n"
            "  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"model_type\": \"gpt2\",\n"
            "  \"n_ctx\": %d,\n"
            "  \"n_embd\": %d,\n"
            "  \"n_head\": %d,\n"
            "  \"n_inner\": null,\n"
            "  \"n_layer\": %d,\n"
            "  \"n_positions\": %d,\n"
            "  \"reorder_and_upcast_attn\": false,\n"
            "  \"resid_pdrop\": 0.1,\n"
            "  \"scale_attn_by_inverse_layer_idx\": false,\n"
            "  \"scale_attn_weights\": true,\n"
            "  \"summary_activation\": null,\n"
            "  \"summary_first_dropout\": 0.1,\n"
            "  \"summary_proj_to_labels\": true,\n"
            "  \"summary_type\": \"cls_index\",\n"
            "  \"summary_use_proj\": true,\n"
            "  \"tie_word_embeddings\": true,\n"
            "  \"torch_dtype\": \"float32\",\n"
            "  \"use_cache\": true,\n"
            "  \"vocab_size\": %d\n"
            "}\n",
            g->max_seq_len, g->channels, g->num_heads, g->num_layers, g->max_seq_len, g->vocab_size);
    if (ferror(af.fp)) { fatal("write error on '%s'", path); }
    atomic_commit(&af);
    printf("export-hf: wrote %s\n", path);

    // the tokenizer, when the vocabulary is GPT-2's and its files are at hand
    char vdir[4200];
    if (gpt2_vocab && hf_find_gpt2_vocab(vdir, sizeof(vdir))) {
        char src[4300];
        snprintf(src, sizeof(src), "%s/encoder.json", vdir);
        snprintf(path, sizeof(path), "%s/vocab.json", dir);
        hf__copy_file(src, path);
        snprintf(src, sizeof(src), "%s/vocab.bpe", vdir);
        snprintf(path, sizeof(path), "%s/merges.txt", dir);
        hf__copy_file(src, path);
        snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
        atomic_open(&af, path);
        fprintf(af.fp, "{\n  \"model_max_length\": %d,\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n"
                       "  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|endoftext|>\",\n"
                       "  \"unk_token\": \"<|endoftext|>\",\n  \"add_prefix_space\": false\n}\n", g->max_seq_len);
        if (ferror(af.fp)) { fatal("write error on '%s'", path); }
        atomic_commit(&af);
        printf("export-hf: wrote %s/vocab.json, merges.txt, tokenizer_config.json (GPT-2's tokenizer, from %s)\n", dir, vdir);
    } else if (gpt2_vocab) {
        printf("export-hf: tokenizer files not written: encoder.json and vocab.bpe not found in $GPT2_VOCAB_DIR or data/gpt2\n");
    } else {
        printf("export-hf: tokenizer files not written: the vocabulary (%d tokens) is not GPT-2's\n", g->vocab_size);
    }
}

#else // !USE_CJSON: the same entry points, refusing

typedef struct { int unused; } HfCheckpoint;

static void hf_open(HfCheckpoint* ck, const char* path, GPTConfig* g) {
    (void)ck; (void)g;
    fatal("--init %s: %s", path, HF_NO_CJSON_MESSAGE);
}

static void hf_load_params(HfCheckpoint* ck, const ParamLayout* pl, float* params) {
    (void)ck; (void)pl; (void)params;
    fatal("%s", HF_NO_CJSON_MESSAGE);
}

static void hf_export(const char* dir, const ParamLayout* pl, const float* params) {
    (void)pl; (void)params;
    fatal("--export-hf %s: %s", dir, HF_NO_CJSON_MESSAGE);
}

#endif // USE_CJSON
#endif // HF_GPT2_H
