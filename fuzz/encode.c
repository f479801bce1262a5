/*
fuzz/encode.c: fuzzes tokenizer.h's encoder on arbitrary bytes (valid and invalid UTF-8) with a fixed, valid
vocabulary: decode(encode(x)) must give x back, and the parallel encoder (cut at its "safe" cuts) must give the
same ids as the serial one.

  make fuzz-build && fuzz/bin/encode -close_fd_mask=3 fuzz/corpus/encode
  FUZZ_VOCAB_DIR=../shared/data/gpt2 fuzz/bin/encode -close_fd_mask=3 fuzz/corpus/encode   (the full GPT-2 vocabulary)
  fuzz/bin/encode CRASH_FILE                                            (reproduces one input, with messages)

The vocabulary is $FUZZ_VOCAB_DIR, else fuzz/vocab (the first 1024 merges of GPT-2, made by fuzz/make_seeds.py),
looked up from the working directory, then next to the binary (fuzz/bin/../vocab).
Input: the bytes to encode. Invariants (abort = a finding): see encoder_checks.h; serial == parallel ids.
*/
#include "fuzz_common.h"

#define TOKENIZER_ENCODER
#include "tokenizer.h" // defines: Encoder, encoder_init, encoder_encode, encoder_encode_parallel, encoder_decode
#include "fuzz/encoder_checks.h" // defines: check_encoder_roundtrip

static Encoder g_enc;
static EncoderScratch g_scratch[2]; // encoder_encode_parallel takes one per thread

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc;
    char dir[2048] = "fuzz/vocab";
    const char* env = getenv("FUZZ_VOCAB_DIR");
    if (env && env[0]) {
        snprintf(dir, sizeof(dir), "%s", env);
    } else if (access("fuzz/vocab/encoder.json", R_OK) != 0) {
        char exe[1024];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (k > 0) { exe[k] = '\0'; snprintf(dir, sizeof(dir), "%s/../vocab", dirname(exe)); }
        else { snprintf(dir, sizeof(dir), "%s/../vocab", dirname((*argv)[0])); }
    }
    if (encoder_init(&g_enc, dir) != 0) {
        fprintf(stderr, "fuzz/encode: cannot load the vocabulary in '%s' (set FUZZ_VOCAB_DIR)\n", dir);
        (exit)(1);
    }
    encoder_scratch_init(&g_scratch[0], &g_enc);
    encoder_scratch_init(&g_scratch[1], &g_enc);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // no fuzz_call: encoding must never fail, so a fatal() ends the run and is reported as a finding
    encoder__cache_clear(&g_scratch[0]); // each input on its own: a finding must not depend on earlier inputs
    TokenVec ids;
    check_encoder_roundtrip(&g_enc, &g_scratch[0], data, size, 256, &ids);
    TokenVec par = {0};
    encoder__cache_clear(&g_scratch[1]);
    encoder_encode_parallel(&g_enc, g_scratch, 2, data, size, 8, &par);
    if (par.len != ids.len || (ids.len > 0 && memcmp(par.data, ids.data, ids.len * sizeof(uint32_t)) != 0)) {
        fuzz_fail("parallel encoding (8-byte chunks) differs from serial: %zu vs %zu ids", par.len, ids.len);
    }
    tokenvec_free(&par);
    tokenvec_free(&ids);
    return 0;
}
