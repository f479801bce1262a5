/*
fuzz/tokenizer_bin.c: fuzzes tokenizer.h's decoder file loader, llm.c's gpt2_tokenizer.bin (tokenizer_init), and
decodes every id of an accepted file.

  make fuzz-build && fuzz/bin/tokenizer_bin -close_fd_mask=3 fuzz/corpus/tokenizer_bin
  fuzz/bin/tokenizer_bin CRASH_FILE                                   (reproduces one input, with messages)

Input: the whole file. Invariants (abort = a finding): an accepted file has 0 < eot < vocab_size, every id decodes
to 1..255 bytes followed by a NUL, ids >= vocab_size decode to NULL; a refused file leaves the Tokenizer zeroed.
*/
#include "fuzz_common.h"

#include "tokenizer.h" // defines: Tokenizer, tokenizer_init, tokenizer_decode, tokenizer_token_length, tokenizer_free

static void run(void* arg) {
    const FuzzInput* in = (const FuzzInput*)arg;
    char path[1024];
    fuzz_write_file("gpt2_tokenizer.bin", in->data, in->size, path, sizeof(path));
    Tokenizer t;
    if (tokenizer_init(&t, path) != 0) {
        if (t.init_ok || t.token_bytes || t.token_offset || t.token_length) { fuzz_fail("a refused file left state behind"); }
        tokenizer_free(&t);
        return;
    }
    if (t.vocab_size == 0 || t.eot_token >= t.vocab_size) { fuzz_fail("accepted vocab %u eot %u", t.vocab_size, t.eot_token); }
    for (uint32_t id = 0; id < t.vocab_size; id++) {
        const char* s = tokenizer_decode(&t, id);
        uint32_t len = tokenizer_token_length(&t, id);
        if (s == NULL || len == 0 || len > 255 || s[len] != '\0') { fuzz_fail("token %u: bad decode (length %u)", id, len); }
    }
    if (tokenizer_decode(&t, t.vocab_size) != NULL || tokenizer_decode(&t, UINT32_MAX) != NULL ||
        tokenizer_token_length(&t, t.vocab_size) != 0) {
        fuzz_fail("an id outside the vocabulary decodes");
    }
    tokenizer_free(&t);
    if (tokenizer_decode(&t, 0) != NULL) { fuzz_fail("a freed tokenizer decodes"); }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzInput in = {data, size};
    fuzz_call(run, &in);
    return 0;
}
