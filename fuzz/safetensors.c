/*
fuzz/safetensors.c: fuzzes the safetensors reader, the path of --init model.safetensors: safetensors.h's st_open
(header length, JSON header parsed by cJSON, dtype/shape/offset validation) and st_read_f32 (F32/F16/BF16 to fp32),
then hf_gpt2.h's GPT-2 mapping on the same file (hf_open: names, prefixes, shapes, dtypes, mask buffers, lm_head;
hf_load_params: transposes, padding, finiteness, the tied lm_head) for a fixed tiny config.json written by the
harness (n_embd 4, n_layer 1, n_head 1, n_positions 4, vocab_size 8).

  make fuzz-build && fuzz/bin/safetensors -close_fd_mask=3 fuzz/corpus/safetensors
  fuzz/bin/safetensors CRASH_FILE                                       (reproduces one input, with messages)

Needs cJSON: the harness defines USE_CJSON itself, and links with -lcjson (FUZZ_LIBS).
Input: the whole model.safetensors. Seeds (fuzz/corpus/safetensors/): complete checkpoints of the tiny config in
F32 ("transformer." names, BOOL mask buffers, lm_head), F16 and BF16 (the hub's unprefixed names, F32 masks and a
scalar masked_bias), and broken ones (overlapping ranges, offsets past the end, a shape that does not match its
bytes, a repeated name, non-JSON, an absurd header length, an empty header).
Invariants (abort = a finding): a file that opens has every tensor inside the file, its byte count equal to
dtype size x shape, no two non-empty ranges overlapping, names sorted and distinct; reading every float tensor
allocates at most twice the input's size.
*/
#include <cjson/cJSON.h> // a system header: before fuzz_common.h's allocation macros (see there)

#include "fuzz_common.h"

#define USE_CJSON
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c" // defines: st_open, st_read_f32, st_close, hf_open, hf_load_params, gpt_alloc_params, gpt_free

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc; (void)argv;
    static const char cfg[] = "{\"model_type\": \"gpt2\", \"activation_function\": \"gelu_new\", \"n_embd\": 4, "
                              "\"n_layer\": 1, \"n_head\": 1, \"n_positions\": 4, \"vocab_size\": 8, "
                              "\"layer_norm_epsilon\": 1e-05, \"tie_word_embeddings\": true}\n";
    char path[1024];
    fuzz_write_file("config.json", (const uint8_t*)cfg, sizeof(cfg) - 1, path, sizeof(path));
    return 0;
}

static int cmp_by_begin(const void* a, const void* b) {
    const StTensor* x = *(const StTensor* const*)a;
    const StTensor* y = *(const StTensor* const*)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

// The invariants of a file st_open accepted, checked independently of its code.
static void check_opened(const StFile* f, size_t size) {
    if (f->file_bytes != size || f->data_start > size) { fuzz_fail("file size %zu, recorded %" PRIu64 ", data at %" PRIu64, size, f->file_bytes, f->data_start); }
    const StTensor** by = (const StTensor**)mallocCheck(sizeof(StTensor*) * (size_t)(f->num_tensors + 1));
    for (int i = 0; i < f->num_tensors; i++) {
        const StTensor* t = &f->tensors[i];
        if (t->begin > t->end || f->data_start + t->end > size) { fuzz_fail("tensor '%s' [%" PRIu64 ", %" PRIu64 ") outside the file", t->name, t->begin, t->end); }
        uint64_t n = 1;
        for (int k = 0; k < t->ndim; k++) { n *= t->shape[k]; }
        if (n != t->numel || n * (uint64_t)ST_DTYPES[t->dtype].bytes != t->end - t->begin) { fuzz_fail("tensor '%s': size does not match dtype x shape", t->name); }
        if (i > 0 && strcmp(f->tensors[i - 1].name, t->name) >= 0) { fuzz_fail("names not sorted and distinct at '%s'", t->name); }
        by[i] = t;
    }
    qsort(by, (size_t)f->num_tensors, sizeof(StTensor*), cmp_by_begin);
    uint64_t reach = 0;
    for (int i = 0; i < f->num_tensors; i++) {
        if (by[i]->end == by[i]->begin) { continue; }
        if (by[i]->begin < reach) { fuzz_fail("tensor '%s' overlaps another", by[i]->name); }
        reach = by[i]->end;
    }
    free(by);
}

static void run(void* arg) {
    const FuzzInput* in = (const FuzzInput*)arg;
    char path[1024];
    fuzz_write_file("model.safetensors", in->data, in->size, path, sizeof(path));
    // the generic reader: open, check, read every float tensor
    StFile f;
    st_open(&f, path);
    check_opened(&f, in->size);
    for (int i = 0; i < f.num_tensors; i++) {
        const StTensor* t = &f.tensors[i];
        if (!st_dtype_is_float(t->dtype)) { continue; }
        if (t->numel * 4 > 2 * (uint64_t)in->size + 8) { fuzz_fail("tensor '%s' would need %" PRIu64 " bytes from a %zu-byte input", t->name, t->numel * 4, in->size); }
        float* v = (float*)mallocCheck((size_t)t->numel * 4);
        st_read_f32(&f, t, 0, t->numel, v);
        free(v);
    }
    st_close(&f);
    // the GPT-2 mapping, for the harness's config.json
    HfCheckpoint ck;
    GPTConfig g;
    hf_open(&ck, path, &g);
    ParamLayout pl; // as main(): the layout, a host buffer of fp32 values, then the loader
    layout_build(&pl, &g);
    float* host = (float*)mallocCheck(pl.num_params * sizeof(float));
    hf_load_params(&ck, &pl, host);
    for (size_t i = 0; i < pl.num_params; i++) {
        if (!isfinite(host[i])) { fuzz_fail("a loaded parameter is not finite (index %zu)", i); }
    }
    free(host);
    layout_free(&pl);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzInput in = {data, size};
    fuzz_call(run, &in);
    return 0;
}
