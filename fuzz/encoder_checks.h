/*
fuzz/encoder_checks.h: the invariants of tokenizer.h's encoder that the vocab and encode harnesses check on any
loaded vocabulary. Include after fuzz_common.h and tokenizer.h (with TOKENIZER_ENCODER).
*/
#ifndef FUZZ_ENCODER_CHECKS_H
#define FUZZ_ENCODER_CHECKS_H

// Encodes text[0..n) and checks: every id is an ordinary (non-special) token of the vocabulary and decoding the
// ids gives text back byte for byte; for n <= max_piece, byte-pair merging the whole text as one piece gives the
// same ids with the linear and the heap algorithm (one rule, two implementations), which also decode to text.
// Returns the ids in *out (caller frees) if out is not NULL.
static void check_encoder_roundtrip(const Encoder* e, EncoderScratch* s, const uint8_t* text, size_t n,
                                    size_t max_piece, TokenVec* out) {
    TokenVec ids = {0};
    encoder_encode(e, s, text, n, &ids);
    for (size_t i = 0; i < ids.len; i++) {
        if (ids.data[i] >= e->vocab_size || e->is_special[ids.data[i]]) {
            fuzz_fail("id %u at %zu is outside the vocabulary (%u) or special", ids.data[i], i, e->vocab_size);
        }
    }
    uint8_t* buf = NULL;
    size_t len = 0, cap = 0;
    if (encoder_decode(e, ids.data, ids.len, &buf, &len, &cap) != 0) { fuzz_fail("decode refused the encoder's ids"); }
    if (len != n || (n > 0 && memcmp(buf, text, n) != 0)) {
        fuzz_fail("decode(encode(x)) != x: %zu bytes in, %zu bytes out, %zu ids", n, len, ids.len);
    }
    if (n >= 2 && n <= max_piece) {
        size_t m1 = encoder__bpe(e, s, text, n, 1);
        uint32_t* lin = (uint32_t*)malloc(m1 * sizeof(uint32_t));
        memcpy(lin, s->tok, m1 * sizeof(uint32_t));
        size_t m2 = encoder__bpe(e, s, text, n, 2);
        if (m1 != m2 || memcmp(lin, s->tok, m1 * sizeof(uint32_t)) != 0) {
            fuzz_fail("linear and heap merges differ on a %zu-byte piece (%zu vs %zu ids)", n, m1, m2);
        }
        len = 0;
        if (encoder_decode(e, lin, m1, &buf, &len, &cap) != 0 || len != n || memcmp(buf, text, n) != 0) {
            fuzz_fail("the merged piece does not decode to its bytes");
        }
        free(lin);
    }
    free(buf);
    if (out) { *out = ids; } else { tokenvec_free(&ids); }
}

#endif // FUZZ_ENCODER_CHECKS_H
