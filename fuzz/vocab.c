/*
fuzz/vocab.c: fuzzes tokenizer.h's encoder loader, encoder.json (a JSON object token -> id) and vocab.bpe (the
merge list) checked against each other by encoder_init, and the encoder on the vocabularies it accepts.

  make fuzz-build && fuzz/bin/vocab -close_fd_mask=3 -dict=fuzz/vocab.dict fuzz/corpus/vocab
  fuzz/bin/vocab CRASH_FILE                                             (reproduces one input, with messages)

Two kinds of input, told apart by the first byte:
  - raw (first byte not 0): encoder.json, the separator "\n@@vocab.bpe@@\n", then vocab.bpe (without the
    separator vocab.bpe is empty). Finds what the two parsers do with malformed files.
  - generated (first byte 0): the bytes drive a generator of VALID vocabularies, since mutations of raw files
    almost never stay valid: [1] odd multiplier and [2] offset of the byte -> id permutation of the 256 byte
    tokens, [3] number of merges M (<= 64), [4] format bits (bit 0: \u escapes for some characters, bit 1: keys
    in reverse order, bit 2: CRLF line ends), then M pairs of uint16 choosing the two tokens each merge joins
    (a merge whose bytes repeat an earlier token or pass 255 bytes is dropped), then the text to encode.
    encoder_init must accept every generated vocabulary.
Invariants (abort = a finding): a generated vocabulary loads; on every loaded vocabulary, the checks of
encoder_checks.h (ids in range, decode(encode(x)) == x, linear and heap merges agree) on a fixed text and on the
input's text.
*/
#include "fuzz_common.h"

#define TOKENIZER_ENCODER
#include "tokenizer.h" // defines: Encoder, encoder_init, encoder_encode, encoder_decode, encoder_free
#include "fuzz/encoder_checks.h" // defines: check_encoder_roundtrip

#define VOCAB_SEP "\n@@vocab.bpe@@\n"
#define GEN_MAX_MERGES 64
#define GEN_HEADER 5

static const char SAMPLE[] = "Hello world! It's 2024: ünïcödé, 日本語, emoji \xF0\x9F\x98\x80, tabs\t\tand   spaces\n\n"
                             "bad \xFF\xC0\x80 bytes \xED\xA0\x80 surrogate, 12345 numbers'll've";

// ----------------------------------------------------------------------------
// a growable byte buffer for the generated files

typedef struct {
    char* p;
    size_t len, cap;
} Buf;

static void buf_put(Buf* b, const void* s, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) { cap *= 2; }
        b->p = (char*)realloc(b->p, cap);
        if (b->p == NULL) { abort(); }
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_str(Buf* b, const char* s) { buf_put(b, s, strlen(s)); }

// Writes token bytes in GPT-2's byte alphabet (each byte a code point, see encoder__byte_alphabet): as JSON string
// content when json (quote and backslash escaped, \u escapes where escape_bits says so), else raw UTF-8.
static void put_alphabet(Buf* b, const uint8_t* t, size_t n, const uint16_t* byte_cp, int json, uint32_t escape_bits) {
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = byte_cp[t[i]];
        char tmp[16];
        if (json && ((escape_bits >> (i % 32)) & 1)) {
            snprintf(tmp, sizeof(tmp), "\\u%04X", (unsigned)cp);
            buf_str(b, tmp);
        } else if (json && (cp == '"' || cp == '\\')) {
            tmp[0] = '\\'; tmp[1] = (char)cp;
            buf_put(b, tmp, 2);
        } else if (cp < 0x80) {
            tmp[0] = (char)cp;
            buf_put(b, tmp, 1);
        } else { // cp < 0x800 for the whole alphabet
            tmp[0] = (char)(0xC0 | (cp >> 6)); tmp[1] = (char)(0x80 | (cp & 0x3F));
            buf_put(b, tmp, 2);
        }
    }
}

// Builds encoder.json and vocab.bpe from a generated input (layout in the top comment) into the temp directory.
// Returns the offset of the text to encode.
static size_t generate(const uint8_t* d, size_t n) {
    uint16_t byte_cp[256]; // GPT-2's byte -> code point table
    {
        int16_t u2b[324];
        encoder__byte_alphabet(u2b);
        for (int cp = 0; cp < 324; cp++) { if (u2b[cp] >= 0) { byte_cp[u2b[cp]] = (uint16_t)cp; } }
    }
    unsigned mult = 2 * (unsigned)fuzz_le(d, n, 1, 1) + 1, add = (unsigned)fuzz_le(d, n, 2, 1);
    int merges_wanted = (int)(fuzz_le(d, n, 3, 1) % (GEN_MAX_MERGES + 1));
    int flags = (int)fuzz_le(d, n, 4, 1);
    // tokens: 256 single bytes in a permuted id order, then the merges, then <|endoftext|>
    static uint8_t tok[256 + GEN_MAX_MERGES][255];
    static size_t tlen[256 + GEN_MAX_MERGES];
    static int left[GEN_MAX_MERGES], right[GEN_MAX_MERGES];
    for (unsigned i = 0; i < 256; i++) { tok[i][0] = (uint8_t)((i * mult + add) & 255); tlen[i] = 1; }
    int V = 256;
    size_t pos = GEN_HEADER;
    for (int k = 0; k < merges_wanted; k++, pos += 4) {
        int a = (int)(fuzz_le(d, n, pos, 2) % (uint64_t)V), b = (int)(fuzz_le(d, n, pos + 2, 2) % (uint64_t)V);
        if (tlen[a] + tlen[b] > 255) { continue; }
        uint8_t cat[255];
        memcpy(cat, tok[a], tlen[a]);
        memcpy(cat + tlen[a], tok[b], tlen[b]);
        size_t cl = tlen[a] + tlen[b];
        int dup = 0;
        for (int j = 256; j < V && !dup; j++) { dup = tlen[j] == cl && memcmp(tok[j], cat, cl) == 0; }
        if (dup) { continue; }
        memcpy(tok[V], cat, cl);
        tlen[V] = cl;
        left[V - 256] = a;
        right[V - 256] = b;
        V++;
    }
    size_t text_at = pos < n ? pos : n;
    uint32_t esc = (flags & 1) ? (uint32_t)fuzz_le(d, n, 1, 4) * 2654435761u : 0;
    Buf js = {0}, bpe = {0};
    buf_str(&js, "{");
    for (int k = 0; k <= V; k++) {
        int id = (flags & 2) ? V - k : k; // id V is <|endoftext|>
        char num[32];
        buf_str(&js, k ? ", \"" : "\"");
        if (id == V) { buf_str(&js, "<|endoftext|>"); } else { put_alphabet(&js, tok[id], tlen[id], byte_cp, 1, esc ^ (uint32_t)id); }
        snprintf(num, sizeof(num), "\": %d", id);
        buf_str(&js, num);
    }
    buf_str(&js, "}\n");
    buf_str(&bpe, (flags & 4) ? "#version: 0.2\r\n" : "#version: 0.2\n");
    for (int k = 0; k < V - 256; k++) {
        put_alphabet(&bpe, tok[left[k]], tlen[left[k]], byte_cp, 0, 0);
        buf_str(&bpe, " ");
        put_alphabet(&bpe, tok[right[k]], tlen[right[k]], byte_cp, 0, 0);
        buf_str(&bpe, (flags & 4) ? "\r\n" : "\n");
    }
    if (V == 256) { buf_str(&bpe, "\n"); } // no merges: encoder_init refuses it (checked below)
    char path[1024];
    fuzz_write_file("encoder.json", (const uint8_t*)js.p, js.len, path, sizeof(path));
    fuzz_write_file("vocab.bpe", (const uint8_t*)bpe.p, bpe.len, path, sizeof(path));
    free(js.p);
    free(bpe.p);
    return text_at;
}

static void run(void* arg) {
    const FuzzInput* in = (const FuzzInput*)arg;
    int generated = in->size > 0 && in->data[0] == 0;
    const uint8_t* text = in->data;
    size_t text_len = in->size;
    if (generated) {
        size_t at = generate(in->data, in->size);
        text = in->data + at;
        text_len = in->size - at;
    } else {
        const uint8_t* part[2];
        size_t len[2];
        int parts = fuzz_split(in->data, in->size, VOCAB_SEP, part, len, 2);
        char path[1024];
        fuzz_write_file("encoder.json", part[0], len[0], path, sizeof(path));
        fuzz_write_file("vocab.bpe", parts > 1 ? part[1] : part[0], parts > 1 ? len[1] : 0, path, sizeof(path));
    }
    Encoder e;
    if (encoder_init(&e, fuzz_tmpdir()) != 0) {
        if (e.token_bytes || e.token_offset || e.vocab_slots || e.pair_slots || e.re) { fuzz_fail("a refused vocabulary left state behind"); }
        if (generated && strstr(e.error, "holds no merges") == NULL) { fuzz_fail("a valid generated vocabulary was refused: %s", e.error); }
        encoder_free(&e);
        return;
    }
    if (e.eot_token >= e.vocab_size || !e.is_special[e.eot_token]) { fuzz_fail("bad eot token %u", e.eot_token); }
    EncoderScratch s;
    encoder_scratch_init(&s, &e);
    check_encoder_roundtrip(&e, &s, (const uint8_t*)SAMPLE, sizeof(SAMPLE) - 1, 64, NULL);
    check_encoder_roundtrip(&e, &s, text, text_len < 1024 ? text_len : 1024, 256, NULL);
    encoder_scratch_free(&s);
    encoder_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzInput in = {data, size};
    fuzz_call(run, &in);
    return 0;
}
