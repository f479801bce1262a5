/*
tests/test_tokenizer.c: tests of tokenizer.h (GPT-2 BPE encoder and decoder) and of the `tokenize` tool.

  make tests/test_tokenizer && ./tests/test_tokenizer [VOCAB_DIR]     (run from the repository root)

VOCAB_DIR holds encoder.json and vocab.bpe: argv[1], else $GPT2_VOCAB_DIR, else data/gpt2 (committed).
Expected ids are in tests/data/tokenizer_cases.txt (made by scripts/make_tokenizer_cases.mjs from js-tiktoken);
the whole-corpus check reads $DATA_MIRROR/tinyshakespeare.txt (default data, committed) when it exists. The
checks of the command line tool run ./tokenize when it has been built.

Prints one line per check, "PASS name" or "FAIL name: detail" ("SKIP name: why" for checks that cannot run
here), and last "N passed, M failed"; exits non-zero if any check failed.
*/
#define TOKENIZER_ENCODER
#include "tokenizer.h" // defines: Tokenizer, tokenizer_init/decode/free, Encoder, encoder_init/encode/decode/...

#include <dirent.h>
#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary

// check(), test_summary(): tests/testing.h

static void skip(const char* name, const char* why) { printf("SKIP %s: %s\n", name, why); }

// ----------------------------------------------------------------------------
// helpers

static char g_tmpdir[256];

// Writes bytes to <tmpdir>/<name> and returns the full path in a static rotating buffer.
static const char* write_tmp(const char* name, const void* data, size_t n) {
    static char paths[8][512];
    static int next = 0;
    char* path = paths[next++ % 8];
    snprintf(path, 512, "%s/%s", g_tmpdir, name);
    FILE* fp = fopenCheck(path, "wb");
    fwriteCheck(data, 1, n, fp, path);
    fcloseCheck(fp, path);
    return path;
}

static char* read_all(const char* path, size_t* n) {
    const char* err = NULL;
    return encoder__read_file(path, n, &err);
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// Formats the first difference between two id arrays for a failure message.
static void describe_diff(char* buf, size_t cap, const uint32_t* got, size_t ngot, const uint32_t* want, size_t nwant) {
    size_t i = 0;
    while (i < ngot && i < nwant && got[i] == want[i]) { i++; }
    snprintf(buf, cap, "got %zu ids, want %zu; first difference at %zu (got %ld, want %ld)", ngot, nwant, i,
             i < ngot ? (long)got[i] : -1L, i < nwant ? (long)want[i] : -1L);
}

// Encodes bytes with the shared scratch (its cache warm from earlier cases) and compares with want.
static int encode_matches(const Encoder* e, EncoderScratch* s, const uint8_t* in, size_t n, const uint32_t* want,
                          size_t nwant, char* detail, size_t cap) {
    TokenVec got = {0};
    encoder_encode(e, s, in, n, &got);
    int ok = got.len == nwant && (nwant == 0 || memcmp(got.data, want, nwant * sizeof(uint32_t)) == 0);
    if (!ok) { describe_diff(detail, cap, got.data, got.len, want, nwant); }
    tokenvec_free(&got);
    return ok;
}

static int decode_matches(const Encoder* e, const uint32_t* ids, size_t n, const uint8_t* want, size_t nwant,
                          char* detail, size_t cap) {
    uint8_t* buf = NULL;
    size_t len = 0, bcap = 0;
    size_t bad = encoder_decode(e, ids, n, &buf, &len, &bcap);
    int ok = bad == 0 && len == nwant && (nwant == 0 || memcmp(buf, want, nwant) == 0);
    if (!ok) { snprintf(detail, cap, "decode gave %zu bytes (bad id at %zu), want %zu", len, bad, nwant); }
    free(buf);
    return ok;
}

// ----------------------------------------------------------------------------
// fixtures from js-tiktoken

static void test_cases(const Encoder* e, EncoderScratch* s, const char* cases_path, const char* mirror) {
    size_t n = 0;
    char* text = read_all(cases_path, &n);
    if (text == NULL) {
        check(0, "cases_file", "cannot read '%s' (run from the repository root)", cases_path);
        return;
    }
    int ncases = 0;
    char detail[512];
    char* save = NULL;
    for (char* line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0') { continue; }
        char* fields[6] = {0};
        int nf = 0;
        char* rest = line;
        while (rest && nf < 6) { fields[nf++] = strsep(&rest, "\t"); } // empty fields are kept
        if (nf == 4 && strcmp(fields[0], "case") == 0) {
            const char* name = fields[1];
            const char* hex = fields[2];
            const char* idstr = fields[3];
            size_t nb = strlen(hex) / 2;
            uint8_t* bytes = (uint8_t*)mallocCheck(nb + 1);
            for (size_t i = 0; i < nb; i++) { bytes[i] = (uint8_t)(hexval(hex[2 * i]) * 16 + hexval(hex[2 * i + 1])); }
            TokenVec want = {0};
            for (const char* p = idstr; *p;) {
                char* end;
                unsigned long v = strtoul(p, &end, 10);
                if (end == p) { break; }
                tokenvec_push(&want, (uint32_t)v);
                p = end;
            }
            char cname[300];
            snprintf(cname, sizeof(cname), "encode_%s", name);
            check(encode_matches(e, s, bytes, nb, want.data, want.len, detail, sizeof(detail)), cname, "%s", detail);
            snprintf(cname, sizeof(cname), "decode_%s", name);
            check(decode_matches(e, want.data, want.len, bytes, nb, detail, sizeof(detail)), cname, "%s", detail);
            tokenvec_free(&want);
            free(bytes);
            ncases++;
        } else if (nf >= 5 && strcmp(fields[0], "corpus") == 0) {
            char path[1024], cname[300];
            snprintf(path, sizeof(path), "%s/%s", mirror, fields[1]);
            snprintf(cname, sizeof(cname), "corpus_%s", fields[1]);
            size_t len = 0;
            char* data = read_all(path, &len);
            if (data == NULL) {
                skip(cname, "corpus file not found (set DATA_MIRROR)");
                continue;
            }
            TokenVec got = {0};
            encoder_encode(e, s, (const uint8_t*)data, len, &got);
            uint64_t h = FNV1A64_INIT;
            for (size_t i = 0; i < got.len; i++) {
                uint8_t le[4] = {(uint8_t)got.data[i], (uint8_t)(got.data[i] >> 8), (uint8_t)(got.data[i] >> 16),
                                 (uint8_t)(got.data[i] >> 24)};
                h = fnv1a64(le, 4, h);
            }
            char hs[32];
            snprintf(hs, sizeof(hs), "%016llx", (unsigned long long)h);
            int ok = len == strtoull(fields[2], NULL, 10) && got.len == strtoull(fields[3], NULL, 10) &&
                     strcmp(hs, fields[4]) == 0;
            check(ok, cname, "%zu bytes -> %zu ids hash %s; want %s bytes -> %s ids hash %s", len, got.len, hs,
                  fields[2], fields[3], fields[4]);
            // the same corpus cut into pieces at safe cuts and encoded on several threads gives the same ids
            EncoderScratch ss[4];
            for (int k = 0; k < 4; k++) { encoder_scratch_init(&ss[k], e); }
            TokenVec par = {0};
            encoder_encode_parallel(e, ss, 4, (const uint8_t*)data, len, 4096, &par);
            snprintf(cname, sizeof(cname), "corpus_parallel_%s", fields[1]);
            int same = par.len == got.len && memcmp(par.data, got.data, got.len * sizeof(uint32_t)) == 0;
            describe_diff(detail, sizeof(detail), par.data, par.len, got.data, got.len);
            check(same, cname, "%s", detail);
            for (int k = 0; k < 4; k++) { encoder_scratch_free(&ss[k]); }
            tokenvec_free(&par);
            tokenvec_free(&got);
            free(data);
        }
    }
    check(ncases >= 250, "cases_count", "only %d cases in '%s'", ncases, cases_path);
    free(text);
}

// ----------------------------------------------------------------------------
// properties

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

// Random byte strings (a mix of ASCII, valid multi-byte characters and arbitrary bytes) round-trip exactly, and
// their encoding follows the invalid-UTF-8 rule: equal to encoding the valid runs apart plus single bytes.
static void test_random_roundtrip(const Encoder* e, EncoderScratch* s) {
    static const char* pieces[] = {"a", "b", "Z", " ", "  ", "\n", "\t", "'s", "'", "1", "42", ".", ",", "\xc3\xa9",
                                   "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xcc\x81", "\xc2\xa0", "\xe3\x80\x80"};
    int bad_roundtrip = 0, bad_rule = 0, bad_range = 0;
    char first[256] = "";
    uint8_t buf[512];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0, target = rnd() % 200;
        while (n < target) {
            uint32_t r = rnd() % 10;
            if (r < 4) {
                buf[n++] = (uint8_t)(rnd() & 0xFF);
            } else {
                const char* p = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
                size_t l = strlen(p);
                if (n + l > sizeof(buf)) { break; }
                memcpy(buf + n, p, l);
                n += l;
            }
        }
        TokenVec ids = {0}, rule = {0};
        encoder_encode(e, s, buf, n, &ids);
        for (size_t i = 0; i < ids.len; i++) { bad_range += ids.data[i] >= e->vocab_size || ids.data[i] == e->eot_token; }
        uint8_t* out = NULL;
        size_t len = 0, cap = 0;
        if (encoder_decode(e, ids.data, ids.len, &out, &len, &cap) != 0 || len != n || (n && memcmp(out, buf, n) != 0)) {
            if (!bad_roundtrip++) { snprintf(first, sizeof(first), "iteration %d: %zu bytes decoded to %zu", iter, n, len); }
        }
        // the rule, spelled out: valid runs encoded separately, invalid bytes as single-byte tokens
        size_t i = 0;
        while (i < n) {
            size_t run = encoder__valid_prefix(buf + i, n - i);
            if (run) { encoder_encode(e, s, buf + i, run, &rule); }
            i += run;
            if (i < n) { tokenvec_push(&rule, e->byte_token[buf[i]]); i++; }
        }
        if (rule.len != ids.len || (ids.len && memcmp(rule.data, ids.data, ids.len * sizeof(uint32_t)) != 0)) { bad_rule++; }
        free(out);
        tokenvec_free(&ids);
        tokenvec_free(&rule);
    }
    check(bad_roundtrip == 0, "random_bytes_roundtrip", "%d of 3000 failed; %s", bad_roundtrip, first);
    check(bad_rule == 0, "random_bytes_invalid_utf8_rule", "%d of 3000 differ from the documented rule", bad_rule);
    check(bad_range == 0, "random_bytes_ids_in_range", "%d ids out of range or <|endoftext|>", bad_range);
}

// Well-formedness at the edges of RFC 3629 (the table of its section 4), each between "x" and "y": the length of the
// valid prefix of the sequence alone is spelled out per case (not derived from the code under test), and an ill-formed
// sequence encodes as "x", then each of its bytes as a single-byte token, then "y" (the invalid-UTF-8 rule), where a
// well-formed one encodes as the three characters' text. The random strings above rarely hit these edges: an
// overlong 3-byte form needs E0 followed by 80..9F.
static void test_utf8_edges(const Encoder* e, EncoderScratch* s) {
    static const struct { const char* bytes; size_t valid; const char* what; } cases[] = {
        {"\xC2\x80", 2, "U+0080, the first 2-byte"},
        {"\xC1\xBF", 0, "overlong 2-byte (C1)"},
        {"\xC0\xAF", 0, "overlong 2-byte (C0)"},
        {"\xE0\xA0\x80", 3, "U+0800, the first 3-byte"},
        {"\xE0\x9F\xBF", 0, "overlong 3-byte (E0 9F)"},
        {"\xE0\x80\xAF", 0, "overlong 3-byte (E0 80)"},
        {"\xED\x9F\xBF", 3, "U+D7FF, below the surrogates"},
        {"\xED\xA0\x80", 0, "surrogate U+D800"},
        {"\xED\xBF\xBF", 0, "surrogate U+DFFF"},
        {"\xEE\x80\x80", 3, "U+E000, above the surrogates"},
        {"\xF0\x90\x80\x80", 4, "U+10000, the first 4-byte"},
        {"\xF0\x8F\xBF\xBF", 0, "overlong 4-byte (F0 8F)"},
        {"\xF4\x8F\xBF\xBF", 4, "U+10FFFF, the last"},
        {"\xF4\x90\x80\x80", 0, "above U+10FFFF (F4 90)"},
        {"\xF5\x80\x80\x80", 0, "above U+10FFFF (F5)"},
    };
    int bad = 0;
    char first[200] = "";
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const uint8_t* q = (const uint8_t*)cases[k].bytes;
        size_t n = strlen(cases[k].bytes);
        uint8_t text[8];
        text[0] = 'x';
        memcpy(text + 1, q, n);
        text[n + 1] = 'y';
        TokenVec got = {0}, want = {0};
        encoder_encode(e, s, text, n + 2, &got);
        if (cases[k].valid) { encoder_encode(e, s, text, n + 2, &want); } // (checked by the prefix below)
        else {
            encoder_encode(e, s, text, 1, &want);
            for (size_t i = 0; i < n; i++) { tokenvec_push(&want, e->byte_token[q[i]]); }
            encoder_encode(e, s, text + n + 1, 1, &want);
        }
        size_t prefix = encoder__valid_prefix(q, n);
        int ok = prefix == cases[k].valid && got.len == want.len && memcmp(got.data, want.data, got.len * sizeof(uint32_t)) == 0;
        if (!ok && !bad++) { snprintf(first, sizeof(first), "%s: valid prefix %zu (want %zu), %zu ids (want %zu)", cases[k].what, prefix, cases[k].valid, got.len, want.len); }
        tokenvec_free(&got);
        tokenvec_free(&want);
    }
    check(bad == 0, "utf8_edges_rfc3629", "%d of %zu cases wrong; first: %s", bad, sizeof(cases) / sizeof(cases[0]), first);
}

// The heap merge (long pieces) and the linear merge (short pieces) give the same ids on any piece.
static void test_merge_paths(const Encoder* e, EncoderScratch* s) {
    static const char alphabet[] = "aabbcdeeffghiijklmnoopqrssttuvwxyz  THE'0123";
    int bad = 0;
    uint8_t piece[300];
    uint32_t lin[300];
    for (int iter = 0; iter < 2000; iter++) {
        size_t n = 1 + rnd() % 250;
        int mode = iter % 3; // letters, repeated letter, random bytes
        for (size_t i = 0; i < n; i++) {
            piece[i] = mode == 0 ? (uint8_t)alphabet[rnd() % (sizeof(alphabet) - 1)]
                     : mode == 1 ? (uint8_t)(i % 7 == 6 ? 'b' : 'a') : (uint8_t)(rnd() & 0xFF);
        }
        size_t m1 = encoder__bpe(e, s, piece, n, 1);
        memcpy(lin, s->tok, m1 * sizeof(uint32_t));
        size_t m2 = encoder__bpe(e, s, piece, n, 2);
        if (m1 != m2 || memcmp(lin, s->tok, m1 * sizeof(uint32_t)) != 0) { bad++; }
    }
    check(bad == 0, "merge_heap_equals_linear", "%d of 2000 random pieces differ", bad);
}

// A long run of whitespace or a long word is one pre-token; it must encode and round-trip (heap path, cache
// bypass) without trouble. At 1.5 MiB the merge scratch outgrows what is kept between pieces (1 Mi entries) and is
// given back after each: the text after such a piece must encode as with a fresh scratch.
static void test_long_pieces(const Encoder* e, EncoderScratch* s) {
    size_t n = (size_t)3 << 19;
    uint8_t* buf = (uint8_t*)mallocCheck(n);
    const char* names[3] = {"long_space_run_1.5MiB", "long_letter_run_1.5MiB", "long_newline_run_1.5MiB"};
    const uint8_t fill[3] = {' ', 'q', '\n'};
    for (int k = 0; k < 3; k++) {
        memset(buf, fill[k], n);
        TokenVec ids = {0};
        encoder_encode(e, s, buf, n, &ids);
        uint8_t* out = NULL;
        size_t len = 0, cap = 0;
        int ok = encoder_decode(e, ids.data, ids.len, &out, &len, &cap) == 0 && len == n && memcmp(out, buf, n) == 0;
        check(ok && ids.len > 0 && ids.len <= n, names[k], "%zu ids, decoded to %zu bytes", ids.len, len);
        free(out);
        tokenvec_free(&ids);
    }
    free(buf);
    const char* after = "Hello world, and then some more words.";
    TokenVec a = {0}, b = {0};
    encoder_encode(e, s, (const uint8_t*)after, strlen(after), &a);
    EncoderScratch fresh;
    encoder_scratch_init(&fresh, e);
    encoder_encode(e, &fresh, (const uint8_t*)after, strlen(after), &b);
    encoder_scratch_free(&fresh);
    check(a.len == b.len && a.len > 0 && memcmp(a.data, b.data, a.len * sizeof(uint32_t)) == 0, "long_pieces_then_text_as_fresh",
          "%zu ids after the long pieces, %zu with a fresh scratch", a.len, b.len);
    tokenvec_free(&a);
    tokenvec_free(&b);
}

// The cache of encoded pieces holds 32768 of them: a text of more distinct words than that clears it, and goes on
// caching. Every word (" w" and a letter-spelled number: a pre-token of its own) must encode as it does alone, in a
// fresh scratch whose cache never fills.
static void test_cache_overflow(const Encoder* e, EncoderScratch* s) {
    const int words = 80000;
    char* text = (char*)mallocCheck((size_t)words * 16);
    size_t* start = (size_t*)mallocCheck(sizeof(size_t) * (words + 1));
    size_t len = 0;
    for (int i = 0; i < words; i++) {
        start[i] = len;
        text[len++] = ' ';
        text[len++] = 'w';
        for (int v = i; ; v /= 26) { text[len++] = (char)('a' + v % 26); if (v < 26) { break; } }
    }
    start[words] = len;
    TokenVec all = {0}, one = {0};
    encoder_encode(e, s, (const uint8_t*)text, len, &all);
    EncoderScratch fresh;
    encoder_scratch_init(&fresh, e);
    size_t at = 0;
    int bad = -1;
    for (int i = 0; i < words && bad < 0; i++) {
        one.len = 0;
        encoder_encode(e, &fresh, (const uint8_t*)text + start[i], start[i + 1] - start[i], &one);
        if (at + one.len > all.len || memcmp(all.data + at, one.data, one.len * sizeof(uint32_t)) != 0) { bad = i; }
        at += one.len;
        if (fresh.num_entries > 1000) { encoder_scratch_free(&fresh); encoder_scratch_init(&fresh, e); } // (never fills)
    }
    encoder_scratch_free(&fresh);
    check(bad < 0 && at == all.len, "cache_overflow_80000_distinct_words", "first word that differs: %d (-1: none); %zu ids, %zu from the words alone",
          bad, all.len, at);
    tokenvec_free(&all);
    tokenvec_free(&one);
    free(start);
    free(text);
}

// Known ids: the byte tokens and <|endoftext|> of GPT-2.
static void test_known_ids(const Encoder* e) {
    check(e->vocab_size == 50257, "vocab_size", "got %u, want 50257", e->vocab_size);
    check(e->eot_token == 50256, "eot_token", "got %u, want 50256", e->eot_token);
    size_t len;
    const uint8_t* b = encoder_token_bytes(e, 50256, &len);
    check(b && len == 13 && memcmp(b, "<|endoftext|>", 13) == 0, "eot_bytes", "token 50256 is not <|endoftext|>");
    check(e->byte_token['!'] == 0 && e->byte_token[' '] == 220 && e->byte_token['\n'] == 198, "byte_tokens",
          "'!' %u ' ' %u '\\n' %u, want 0 220 198", e->byte_token['!'], e->byte_token[' '], e->byte_token['\n']);
    check(encoder_token_bytes(e, 50257, &len) == NULL, "token_bytes_out_of_range", "id 50257 returned bytes");
    uint32_t bad_ids[3] = {15496, 50257, 11};
    uint8_t* out = NULL;
    size_t olen = 0, cap = 0;
    size_t at = encoder_decode(e, bad_ids, 3, &out, &olen, &cap);
    check(at == 2 && olen == 5, "decode_rejects_bad_id", "returned %zu after %zu bytes, want 2 after 5", at, olen);
    free(out);
}

// ----------------------------------------------------------------------------
// gpt2_tokenizer.bin

static void test_tokenizer_bin(const Encoder* e) {
    char path[512];
    snprintf(path, sizeof(path), "%s/gpt2_tokenizer.bin", g_tmpdir);
    encoder_write_bin(e, path);
    Tokenizer t;
    int rc = tokenizer_init(&t, path);
    check(rc == 0, "bin_roundtrip_load", "tokenizer_init returned %d", rc);
    if (rc == 0) {
        check(t.vocab_size == e->vocab_size && t.eot_token == e->eot_token, "bin_roundtrip_header",
              "vocab %u eot %u", t.vocab_size, t.eot_token);
        uint32_t bad = 0;
        for (uint32_t id = 0; id < e->vocab_size; id++) {
            size_t len;
            const uint8_t* want = encoder_token_bytes(e, id, &len);
            const char* got = tokenizer_decode(&t, id);
            if (!got || tokenizer_token_length(&t, id) != len || memcmp(got, want, len) != 0 || got[len] != '\0') { bad++; }
        }
        check(bad == 0, "bin_roundtrip_tokens", "%u tokens differ", bad);
        check(tokenizer_decode(&t, e->vocab_size) == NULL && tokenizer_decode(&t, UINT32_MAX) == NULL,
              "bin_decode_out_of_range", "out-of-range id did not give NULL");
        check(strcmp(tokenizer_decode(&t, 50256), "<|endoftext|>") == 0 && strcmp(tokenizer_decode(&t, 15496), "Hello") == 0,
              "bin_decode_known", "token 50256 or 15496 decoded wrongly");
    }
    // a version 1 file (no EOT field) gets EOT 50256
    size_t n = 0;
    char* data = read_all(path, &n);
    if (data && n > 1024) {
        uint32_t* hdr = (uint32_t*)data;
        hdr[1] = 1;
        hdr[3] = 0;
        Tokenizer t1;
        int rc1 = tokenizer_init(&t1, write_tmp("v1.bin", data, n));
        check(rc1 == 0 && t1.eot_token == 50256, "bin_version1", "rc %d eot %u", rc1, t1.eot_token);
        tokenizer_free(&t1);
    }
    tokenizer_free(&t);
    tokenizer_free(&t); // freeing twice is harmless
    free(data);
}

// Bad .bin files give -1, a message, and a Tokenizer that is safe to free.
static void test_tokenizer_bin_errors(void) {
    char path[512];
    snprintf(path, sizeof(path), "%s/gpt2_tokenizer.bin", g_tmpdir);
    size_t n = 0;
    char* good = read_all(path, &n);
    if (good == NULL) { check(0, "bin_errors", "no bin file to corrupt"); return; }
    char* bad = (char*)mallocCheck(n + 16);
    struct { const char* name; int kind; } cases[] = {
        {"bin_missing_file", 0}, {"bin_empty_file", 1}, {"bin_truncated_header", 2}, {"bin_wrong_magic", 3},
        {"bin_bad_version", 4}, {"bin_truncated_body", 5}, {"bin_zero_length_token", 6}, {"bin_trailing_data", 7},
        {"bin_eot_out_of_range", 8}, {"bin_huge_vocab", 9}, {"bin_truncated_last_token", 10},
        {"bin_zero_length_last_token", 11}, // (the file's size still adds up: only the length check can refuse it)
    };
    size_t last = 1024; // where the last token's record starts
    for (size_t pos = 1024, i = 0; pos < n && i < ((uint32_t*)good)[2]; i++) { last = pos; pos += 1 + (unsigned char)good[pos]; }
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        memcpy(bad, good, n);
        size_t len = n;
        uint32_t* hdr = (uint32_t*)bad;
        const char* p = NULL;
        switch (cases[k].kind) {
            case 0: p = "/nonexistent/dir/gpt2_tokenizer.bin"; break;
            case 1: len = 0; break;
            case 2: len = 500; break;
            case 3: hdr[0] = 20240326; break;
            case 4: hdr[1] = 7; break;
            case 5: len = n / 2; break;
            case 6: bad[1024] = 0; break;
            case 7: len = n + 3; memset(bad + n, 'x', 3); break;
            case 8: hdr[3] = hdr[2]; break;
            case 9: hdr[2] = 0xFFFFFFFFu; break;
            case 10: len = n - 1; break;
            case 11: bad[last] = 0; len = last + 1; break;
        }
        if (p == NULL) { p = write_tmp("bad.bin", bad, len); }
        Tokenizer t;
        memset(&t, 0x5A, sizeof(t)); // garbage in, as from an uninitialized variable
        int rc = tokenizer_init(&t, p);
        int clean = t.token_bytes == NULL && t.init_ok == 0 && tokenizer_decode(&t, 0) == NULL;
        check(rc == -1 && clean, cases[k].name, "tokenizer_init returned %d (clean %d)", rc, clean);
        tokenizer_free(&t);
    }
    free(bad);
    free(good);
}

// ----------------------------------------------------------------------------
// bad vocab directories

static void test_encoder_errors(const char* vocab_dir) {
    Encoder e;
    int rc = encoder_init(&e, "/nonexistent/vocab");
    check(rc == -1 && strstr(e.error, "/nonexistent/vocab/encoder.json") != NULL, "vocab_missing_dir",
          "rc %d, message '%s'", rc, e.error);
    encoder_free(&e);

    char src[1024];
    size_t njson = 0, nbpe = 0;
    snprintf(src, sizeof(src), "%s/encoder.json", vocab_dir);
    char* json = read_all(src, &njson);
    snprintf(src, sizeof(src), "%s/vocab.bpe", vocab_dir);
    char* bpe = read_all(src, &nbpe);
    if (!json || !bpe) { check(0, "vocab_error_setup", "cannot read the vocab files in '%s'", vocab_dir); free(json); free(bpe); return; }

    char dir[512];
    snprintf(dir, sizeof(dir), "%s/vocab", g_tmpdir);
    mkdir(dir, 0755);
    char jpath[600], bpath[600];
    snprintf(jpath, sizeof(jpath), "%s/encoder.json", dir);
    snprintf(bpath, sizeof(bpath), "%s/vocab.bpe", dir);
    char* buf = (char*)mallocCheck(njson + nbpe + 64);
    struct { const char* name; int kind; const char* want; } cases[] = {
        {"vocab_missing_bpe", 0, "vocab.bpe"},
        {"json_truncated", 1, "encoder.json"},
        {"json_empty", 2, "encoder.json' is not a valid GPT-2 encoder.json: line 1, column 1: the text is empty"},
        {"json_not_object", 3, "encoder.json"},
        {"json_bad_escape", 4, "encoder.json"},
        {"json_lone_surrogate", 5, "encoder.json"},
        {"json_duplicate_id", 6, "encoder.json"},
        {"json_char_outside_alphabet", 7, "encoder.json"},
        {"bpe_wrong_order", 8, "vocab.bpe"},
        {"bpe_unknown_merge", 9, "vocab.bpe"},
        {"json_negative_id", 10, "encoder.json"},
        {"json_trailing_garbage", 11, "encoder.json"},
        {"json_overlong_utf8", 12, "invalid UTF-8"},
        {"json_id_past_20_bits", 13, "id too large"},
        {"bpe_empty_half", 14, "expected two symbols"},
        {"bpe_bad_continuation_byte", 15, "invalid UTF-8"},
        {"json_syntax_error_names_line_and_column", 16, "line 3, column 6: syntax error"},
        {"json_fractional_id", 17, "not a non-negative integer"},
        {"json_id_past_every_integer_type", 18, "id too large"}, // a fuzz finding: 1.1e26 was cast to uint64_t (UB)
        {"json_ids_with_a_gap", 19, "without gaps"},
        {"json_two_tokens_of_the_same_bytes", 20, "duplicates the bytes of an earlier token"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        remove(jpath);
        remove(bpath);
        size_t jl = njson;
        memcpy(buf, json, njson);
        const char* jdata = buf;
        const char* bdata = bpe;
        size_t bl = nbpe;
        char* b2 = NULL;
        switch (cases[k].kind) {
            case 0: bdata = NULL; break;
            case 1: jl = njson / 3; break;
            case 2: jl = 0; break;
            case 3: jdata = "[1, 2, 3]"; jl = 9; break;
            case 4: jdata = "{\"a\\q\": 0}"; jl = strlen(jdata); break;
            case 5: jdata = "{\"\\udc00\": 0}"; jl = strlen(jdata); break;
            case 6: jdata = "{\"a\": 0, \"b\": 0}"; jl = strlen(jdata); break;
            case 7: jdata = "{\"\\u4e2d\": 0}"; jl = strlen(jdata); break;
            case 8: { // swap the first two merges
                b2 = (char*)mallocCheck(nbpe + 1);
                const char* l1 = strchr(bpe, '\n') + 1;
                const char* l2 = strchr(l1, '\n') + 1;
                const char* l3 = strchr(l2, '\n') + 1;
                size_t h = (size_t)(l1 - bpe);
                memcpy(b2, bpe, h);
                memcpy(b2 + h, l2, (size_t)(l3 - l2));
                memcpy(b2 + h + (l3 - l2), l1, (size_t)(l2 - l1));
                memcpy(b2 + (l3 - bpe), l3, nbpe - (size_t)(l3 - bpe));
                bdata = b2;
                break;
            }
            case 9: b2 = (char*)mallocCheck(nbpe + 32); bl = (size_t)snprintf(b2, nbpe + 32, "#version: 0.2\nzq zq\n"); bdata = b2; break;
            case 10: jdata = "{\"a\": -1}"; jl = strlen(jdata); break;
            case 11: memcpy(buf + njson, " x", 2); jl = njson + 2; break;
            case 12: jdata = "{\"\xC0\xA1\": 0}"; jl = strlen(jdata); break; // '!' spelled in two bytes
            case 13: jdata = "{\"a\": 1048575}"; jl = strlen(jdata); break;   // the pair table keeps id + 1 in 20 bits
            case 14: b2 = (char*)mallocCheck(nbpe + 32); bl = (size_t)snprintf(b2, nbpe + 32, "#version: 0.2\n\xC4\xA0t \n"); bdata = b2; break;
            case 15: b2 = (char*)mallocCheck(nbpe + 32); bl = (size_t)snprintf(b2, nbpe + 32, "#version: 0.2\n\xC4\x20 t\n"); bdata = b2; break;
            case 16: jdata = "{\"a\": 0,\n \"b\": 1,\n \"c\" 2}"; jl = strlen(jdata); break; // the ':' is missing
            case 17: jdata = "{\"a\": 0.5}"; jl = strlen(jdata); break;
            case 18: jdata = "{\"a\": 110000000000000000000000000}"; jl = strlen(jdata); break;
            case 19: jdata = "{\"a\": 0, \"b\": 2}"; jl = strlen(jdata); break;
            case 20: jdata = "{\"a\": 0, \"a\": 1, \"<|endoftext|>\": 2}"; jl = strlen(jdata); break; // (a repeated key)
        }
        FILE* fp = fopenCheck(jpath, "wb");
        fwriteCheck(jdata, 1, jl, fp, jpath);
        fcloseCheck(fp, jpath);
        if (bdata) {
            fp = fopenCheck(bpath, "wb");
            fwriteCheck(bdata, 1, bl, fp, bpath);
            fcloseCheck(fp, bpath);
        }
        memset(&e, 0, sizeof(e));
        rc = encoder_init(&e, dir);
        check(rc == -1 && strstr(e.error, cases[k].want) != NULL, cases[k].name, "rc %d, message '%s'", rc, e.error);
        encoder_free(&e);
        free(b2);
    }
    remove(jpath);
    remove(bpath);
    rmdir(dir);
    free(buf);
    free(json);
    free(bpe);
}

// ----------------------------------------------------------------------------
// the tokenize tool (when built)

// Runs a shell command, captures stdout+stderr into out (truncated), returns the exit status (-1 if killed).
static int run_cmd(const char* cmd, char* out, size_t cap) {
    FILE* p = popen(cmd, "r");
    if (p == NULL) { snprintf(out, cap, "popen failed"); return -1; }
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Reads a shard: returns its tokens (malloc'd) and count, or NULL with the problem in why.
static uint32_t* read_shard(const char* path, size_t* count, const char** why) {
    size_t n = 0;
    char* d = read_all(path, &n);
    if (d == NULL) { *why = "missing"; return NULL; }
    int32_t hdr[256];
    if (n < sizeof(hdr)) { free(d); *why = "short"; return NULL; }
    memcpy(hdr, d, sizeof(hdr));
    size_t width = hdr[1] == 1 ? 2 : 4;
    if (hdr[0] != SHARD_MAGIC || (hdr[1] != 1 && hdr[1] != 2) || hdr[2] < 0 || n != sizeof(hdr) + (size_t)hdr[2] * width) {
        free(d);
        *why = "bad header or size";
        return NULL;
    }
    uint32_t* t = (uint32_t*)mallocCheck((size_t)hdr[2] * sizeof(uint32_t) + 4);
    for (int32_t i = 0; i < hdr[2]; i++) {
        if (width == 2) { uint16_t v; memcpy(&v, d + sizeof(hdr) + 2 * (size_t)i, 2); t[i] = v; }
        else { memcpy(&t[i], d + sizeof(hdr) + 4 * (size_t)i, 4); }
    }
    *count = (size_t)hdr[2];
    free(d);
    return t;
}

static void test_cli(const Encoder* e, EncoderScratch* s, const char* vocab_dir) {
    if (!file_exists("./tokenize")) {
        skip("cli", "./tokenize not built (make tokenize)");
        return;
    }
    char cmd[8192], out[8192];
    // encode / decode
    const char* text = "Hello world!\n\nIt's  a test.\n";
    const char* in = write_tmp("in.txt", text, strlen(text));
    snprintf(cmd, sizeof(cmd), "./tokenize encode --vocab '%s' < '%s' 2>&1", vocab_dir, in);
    int rc = run_cmd(cmd, out, sizeof(out));
    TokenVec want = {0};
    encoder_encode(e, s, (const uint8_t*)text, strlen(text), &want);
    char expect[1024] = "";
    size_t el = 0;
    for (size_t i = 0; i < want.len; i++) { el += (size_t)snprintf(expect + el, sizeof(expect) - el, i ? " %u" : "%u", want.data[i]); }
    snprintf(expect + el, sizeof(expect) - el, "\n");
    check(rc == 0 && strcmp(out, expect) == 0, "cli_encode", "rc %d, output '%s', want '%s'", rc, out, expect);
    const char* ids = write_tmp("ids.txt", expect, strlen(expect));
    snprintf(cmd, sizeof(cmd), "./tokenize decode --vocab '%s' < '%s' 2>&1", vocab_dir, ids);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && strcmp(out, text) == 0, "cli_decode", "rc %d, output '%s'", rc, out);
    // decode with an exported gpt2_tokenizer.bin gives the same bytes; a corrupt one is an error naming it
    char bin[600], badbin[600];
    snprintf(bin, sizeof(bin), "%s/cli_tokenizer.bin", g_tmpdir);
    snprintf(cmd, sizeof(cmd), "./tokenize export-bin --vocab '%s' --out '%s' 2>&1", vocab_dir, bin);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && file_size(bin) > 1024, "cli_export_bin", "rc %d: %s", rc, out);
    snprintf(cmd, sizeof(cmd), "./tokenize decode --bin '%s' < '%s' 2>&1", bin, ids);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && strcmp(out, text) == 0, "cli_decode_bin", "rc %d, output '%s'", rc, out);
    snprintf(badbin, sizeof(badbin), "%s", write_tmp("cli_bad.bin", "not a tokenizer file", 20));
    snprintf(cmd, sizeof(cmd), "./tokenize decode --bin '%s' < '%s' 2>&1 >/dev/null", badbin, ids);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc != 0 && rc != -1 && strstr(out, badbin) != NULL, "cli_decode_bad_bin", "rc %d, stderr '%s'", rc, out);
    remove(bin);
    tokenvec_free(&want);
    // encode --allow-special: the literal <|endoftext|> becomes token 50256, the text around it encodes as itself;
    // without the flag it is ordinary text
    {
        const char* sp = "Hello<|endoftext|> world<|endoftext|>";
        const char* spin = write_tmp("special.txt", sp, strlen(sp));
        TokenVec w = {0};
        encoder_encode(e, s, (const uint8_t*)"Hello", 5, &w);
        tokenvec_push(&w, e->eot_token);
        encoder_encode(e, s, (const uint8_t*)" world", 6, &w);
        tokenvec_push(&w, e->eot_token);
        char want_sp[512] = "", want_plain[512] = "";
        size_t wl = 0;
        for (size_t i = 0; i < w.len; i++) { wl += (size_t)snprintf(want_sp + wl, sizeof(want_sp) - wl, i ? " %u" : "%u", w.data[i]); }
        snprintf(want_sp + wl, sizeof(want_sp) - wl, "\n");
        w.len = 0;
        encoder_encode(e, s, (const uint8_t*)sp, strlen(sp), &w);
        wl = 0;
        int has_eot = 0;
        for (size_t i = 0; i < w.len; i++) {
            wl += (size_t)snprintf(want_plain + wl, sizeof(want_plain) - wl, i ? " %u" : "%u", w.data[i]);
            has_eot |= w.data[i] == e->eot_token;
        }
        snprintf(want_plain + wl, sizeof(want_plain) - wl, "\n");
        tokenvec_free(&w);
        snprintf(cmd, sizeof(cmd), "./tokenize encode --vocab '%s' --allow-special < '%s' 2>&1", vocab_dir, spin);
        rc = run_cmd(cmd, out, sizeof(out));
        check(rc == 0 && strcmp(out, want_sp) == 0, "cli_encode_allow_special", "rc %d, output '%s', want '%s'", rc, out, want_sp);
        snprintf(cmd, sizeof(cmd), "./tokenize encode --vocab '%s' < '%s' 2>&1", vocab_dir, spin);
        rc = run_cmd(cmd, out, sizeof(out));
        check(rc == 0 && strcmp(out, want_plain) == 0 && !has_eot, "cli_encode_special_text_is_ordinary_by_default", "rc %d, output '%s', want '%s'",
              rc, out, want_plain);
        remove(spin);
    }

    // shards: 3 documents split at blank lines, 5 val tokens, shards of 8 tokens
    const char* doc = "one two three\n\nfour five six seven\n\neight nine\n";
    in = write_tmp("docs.txt", doc, strlen(doc));
    snprintf(cmd, sizeof(cmd), "./tokenize shards --vocab '%s' --out-dir '%s' --name t --shard-size 8 --val-tokens 5 "
             "--doc-sep '\\n\\n' '%s' 2>&1", vocab_dir, g_tmpdir, in);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0, "cli_shards_run", "rc %d: %s", rc, out);
    // expected stream: EOT doc1 EOT doc2 EOT doc3 (separators stay with the preceding document)
    TokenVec all = {0};
    const char* docs[3] = {"one two three\n\n", "four five six seven\n\n", "eight nine\n"};
    for (int k = 0; k < 3; k++) {
        tokenvec_push(&all, e->eot_token);
        encoder_encode(e, s, (const uint8_t*)docs[k], strlen(docs[k]), &all);
    }
    TokenVec got = {0};
    const char* why = "";
    int shard_ok = 1;
    char names[8][64];
    int nnames = 0;
    snprintf(names[nnames++], 64, "t_val_000000.bin");
    for (int k = 0; k < 8; k++) {
        snprintf(names[nnames], 64, "t_train_%06d.bin", k);
        char p[700];
        snprintf(p, sizeof(p), "%s/%s", g_tmpdir, names[nnames]);
        if (!file_exists(p)) { break; }
        nnames++;
    }
    size_t sizes[8] = {0};
    for (int k = 0; k < nnames; k++) {
        char p[700];
        snprintf(p, sizeof(p), "%s/%s", g_tmpdir, names[k]);
        size_t c = 0;
        uint32_t* t = read_shard(p, &c, &why);
        if (t == NULL) { shard_ok = 0; break; }
        sizes[k] = c;
        for (size_t i = 0; i < c; i++) { tokenvec_push(&got, t[i]); }
        free(t);
        remove(p);
    }
    int stream_ok = shard_ok && got.len == all.len && memcmp(got.data, all.data, all.len * sizeof(uint32_t)) == 0;
    check(stream_ok, "cli_shards_content", "shards %s; %zu tokens, want %zu", shard_ok ? "read" : why, got.len, all.len);
    int sizes_ok = nnames >= 2 && sizes[0] == 5;
    for (int k = 1; k < nnames; k++) { sizes_ok &= k + 1 < nnames ? sizes[k] == 8 : sizes[k] >= 1 && sizes[k] <= 8; }
    check(sizes_ok, "cli_shards_sizes", "%d shards, val %zu tokens, first train %zu", nnames, sizes[0], sizes[1]);
    tokenvec_free(&all);
    tokenvec_free(&got);

    // --val-docs 2: the first two documents (each after its <|endoftext|>) are the validation split, the third the
    // training split, whole (one shard each)
    snprintf(cmd, sizeof(cmd), "./tokenize shards --vocab '%s' --out-dir '%s' --name vd --val-docs 2 --doc-sep '\\n\\n' '%s' 2>&1",
             vocab_dir, g_tmpdir, in);
    rc = run_cmd(cmd, out, sizeof(out));
    TokenVec want_val = {0}, want_train = {0};
    for (int k = 0; k < 3; k++) {
        TokenVec* w = k < 2 ? &want_val : &want_train;
        tokenvec_push(w, e->eot_token);
        encoder_encode(e, s, (const uint8_t*)docs[k], strlen(docs[k]), w);
    }
    int vd_ok = rc == 0;
    for (int k = 0; k < 2 && vd_ok; k++) {
        char p[700];
        snprintf(p, sizeof(p), "%s/vd_%s_000000.bin", g_tmpdir, k == 0 ? "val" : "train");
        size_t c = 0;
        uint32_t* t = read_shard(p, &c, &why);
        const TokenVec* w = k == 0 ? &want_val : &want_train;
        vd_ok = t != NULL && c == w->len && memcmp(t, w->data, c * sizeof(uint32_t)) == 0;
        free(t);
        remove(p);
    }
    check(vd_ok, "cli_shards_val_docs", "rc %d%s%s", rc, rc ? ": " : "", rc ? out : "");
    tokenvec_free(&want_val);
    tokenvec_free(&want_train);

    // one document of 2.5 MiB (lines of words: the tool encodes it in items of about 1 MiB, cut where the encoding
    // cannot change): its tokens are the whole text's, after one <|endoftext|>
    size_t big_n = (size_t)5 << 19;
    char* big = (char*)mallocCheck(big_n + 16);
    size_t bl = 0;
    for (int line = 0; bl + 16 < big_n; line++) { bl += (size_t)snprintf(big + bl, 16, "w%d x%d\n", line % 97, line % 13); }
    in = write_tmp("big.txt", big, bl);
    snprintf(cmd, sizeof(cmd), "./tokenize shards --vocab '%s' --out-dir '%s' --name big --split train '%s' 2>&1", vocab_dir, g_tmpdir, in);
    rc = run_cmd(cmd, out, sizeof(out));
    TokenVec want_big = {0};
    tokenvec_push(&want_big, e->eot_token);
    encoder_encode(e, s, (const uint8_t*)big, bl, &want_big);
    char bp[700];
    snprintf(bp, sizeof(bp), "%s/big_train_000000.bin", g_tmpdir);
    size_t bc = 0;
    uint32_t* bt = rc == 0 ? read_shard(bp, &bc, &why) : NULL;
    size_t eots = 0;
    for (size_t i = 0; bt && i < bc; i++) { eots += bt[i] == e->eot_token; }
    check(bt != NULL && bc == want_big.len && memcmp(bt, want_big.data, bc * sizeof(uint32_t)) == 0, "cli_shards_long_document",
          "rc %d; %zu tokens (want %zu), %zu <|endoftext|> (want 1)", rc, bc, want_big.len, eots);
    free(bt);
    remove(bp);
    remove(in);
    free(big);
    tokenvec_free(&want_big);

    // --doc-sep with a \xHH escape (the ASCII record separator, dropped), and --doc-per-file over two files: the
    // documents, each after one <|endoftext|>
    {
        const char* two_docs[2] = {"First document.", " And the second one."};
        TokenVec w = {0};
        for (int d = 0; d < 2; d++) {
            tokenvec_push(&w, e->eot_token);
            encoder_encode(e, s, (const uint8_t*)two_docs[d], strlen(two_docs[d]), &w);
        }
        char joined[128], f1[700], f2[700];
        snprintf(joined, sizeof(joined), "%s\x1e%s\x1e", two_docs[0], two_docs[1]);
        snprintf(f1, sizeof(f1), "%s", write_tmp("doc1.txt", two_docs[0], strlen(two_docs[0])));
        snprintf(f2, sizeof(f2), "%s", write_tmp("doc2.txt", two_docs[1], strlen(two_docs[1])));
        const char* rs = write_tmp("rs.txt", joined, strlen(joined));
        for (int k = 0; k < 2; k++) {
            if (k == 0) {
                snprintf(cmd, sizeof(cmd), "./tokenize shards --vocab '%s' --out-dir '%s' --name sep --split train --doc-sep '\\x1e' --drop-sep '%s' 2>&1",
                         vocab_dir, g_tmpdir, rs);
            } else {
                snprintf(cmd, sizeof(cmd), "./tokenize shards --vocab '%s' --out-dir '%s' --name sep --split train --doc-per-file '%s' '%s' 2>&1",
                         vocab_dir, g_tmpdir, f1, f2);
            }
            rc = run_cmd(cmd, out, sizeof(out));
            snprintf(bp, sizeof(bp), "%s/sep_train_000000.bin", g_tmpdir);
            bc = 0;
            bt = rc == 0 ? read_shard(bp, &bc, &why) : NULL;
            check(bt != NULL && bc == w.len && memcmp(bt, w.data, bc * sizeof(uint32_t)) == 0,
                  k == 0 ? "cli_shards_doc_sep_hex_escape" : "cli_shards_doc_per_file", "rc %d; %zu tokens (want %zu)%s%.200s", rc, bc, w.len,
                  rc ? ": " : "", rc ? out : "");
            free(bt);
            remove(bp);
        }
        remove(rs);
        remove(f1);
        remove(f2);
        tokenvec_free(&w);
    }

    // a document longer than 64 MiB that has not ended when the reader holds 64 MiB of it: the tool encodes it up to
    // its last safe cut before reading on (encoder_find_cut_last), twice in 140 MiB, alone and followed by a separator
    // and another document; the tokens are the whole text's either way, after one <|endoftext|> (words of letters: a
    // cut anywhere else would most likely split one, and change its tokens)
    size_t huge_n = (size_t)140 << 20;
    char* huge = (char*)mallocCheck(huge_n + 64);
    size_t hl = 0;
    for (int line = 0; hl + 64 < huge_n; line++) {
        hl += (size_t)snprintf(huge + hl, 64, "line %d of a wonderfully unending document\n", line % 997);
    }
    TokenVec want_huge = {0};
    tokenvec_push(&want_huge, e->eot_token);
    encoder_encode(e, s, (const uint8_t*)huge, hl, &want_huge);
    size_t huge_tokens = want_huge.len;
    const char tail_doc[] = "And the last one.";
    tokenvec_push(&want_huge, e->eot_token);
    encoder_encode(e, s, (const uint8_t*)tail_doc, sizeof(tail_doc) - 1, &want_huge);
    huge[hl] = '\0'; // with --doc-sep '\0' --drop-sep: the huge document, a NUL (dropped), the short one
    memcpy(huge + hl + 1, tail_doc, sizeof(tail_doc) - 1);
    for (int sep = 0; sep <= 1; sep++) {
        in = write_tmp("huge.txt", huge, sep ? hl + sizeof(tail_doc) : hl);
        snprintf(cmd, sizeof(cmd), "./tokenize shards --vocab '%s' --out-dir '%s' --name huge --split train%s '%s' 2>&1", vocab_dir, g_tmpdir,
                 sep ? " --doc-sep '\\0' --drop-sep" : "", in);
        rc = run_cmd(cmd, out, sizeof(out));
        snprintf(bp, sizeof(bp), "%s/huge_train_000000.bin", g_tmpdir);
        bc = 0;
        bt = rc == 0 ? read_shard(bp, &bc, &why) : NULL;
        size_t want_n = sep ? want_huge.len : huge_tokens;
        check(bt != NULL && bc == want_n && memcmp(bt, want_huge.data, bc * sizeof(uint32_t)) == 0,
              sep ? "cli_shards_document_past_64_mib_then_another" : "cli_shards_document_past_64_mib",
              "rc %d; %zu tokens (want %zu)%s%.200s", rc, bc, want_n, rc ? ": " : "", rc ? out : "");
        free(bt);
        remove(bp);
        remove(in);
    }
    free(huge);
    tokenvec_free(&want_huge);
    // nothing is left under a temporary name
    int leftovers = 0;
    DIR* dp = opendir(g_tmpdir);
    for (struct dirent* de = dp ? readdir(dp) : NULL; de; de = readdir(dp)) { leftovers += strstr(de->d_name, ".tmp.") != NULL; }
    if (dp) { closedir(dp); }
    check(leftovers == 0, "cli_shards_no_temporaries", "%d temporary files left", leftovers);

    // bad input: each exits non-zero with a message naming the flag or file
    struct { const char* name; const char* args; const char* want; } bad[] = {
        {"cli_bad_command", "frobnicate", "frobnicate"},
        {"cli_missing_vocab", "encode --vocab /nonexistent/v < /dev/null", "/nonexistent/v/encoder.json"},
        {"cli_bad_shard_size", "shards --vocab VOCAB --out-dir TMP --name x --shard-size 12abc /dev/null", "--shard-size"},
        {"cli_zero_shard_size", "shards --vocab VOCAB --out-dir TMP --name x --shard-size 0 /dev/null", "--shard-size"},
        {"cli_unknown_flag", "encode --vocab VOCAB --bogus < /dev/null", "--bogus"},
        {"cli_missing_flag_value", "export-bin --vocab VOCAB --out", "--out"},
        {"cli_missing_input", "shards --vocab VOCAB --out-dir TMP --name x /nonexistent/input.txt", "/nonexistent/input.txt"},
        {"cli_decode_bad_id", "decode --vocab VOCAB <<< '15496 99999'", "99999"},
        {"cli_decode_garbage", "decode --vocab VOCAB <<< '15496 abc'", "abc"},
        {"cli_decode_id_past_vocab", "decode --vocab VOCAB <<< '50256 50257'", "token id 50257 (item 2) is outside the vocabulary 0..50256"},
        {"cli_decode_negative_id", "decode --vocab VOCAB <<< '-1'", "'-1' (item 1) is not a token id"},
        {"cli_decode_signed_id", "decode --vocab VOCAB <<< '+5'", "'+5' (item 1) is not a token id"},
        {"cli_val_both", "shards --vocab VOCAB --out-dir TMP --name x --val-tokens 1 --val-docs 1 /dev/null", "--val-docs"},
        {"cli_doc_sep_bad_escape", "shards --vocab VOCAB --out-dir TMP --name x --doc-sep '\\q' /dev/null", "--doc-sep: unknown escape '\\q'"},
        {"cli_encode_extra_argument", "encode --vocab VOCAB extra.txt < /dev/null", "encode: unexpected argument 'extra.txt' (input is read from stdin)"},
        {"cli_name_too_long", "shards --vocab VOCAB --out-dir TMP --name $(printf 'n%.0s' $(seq 4100)) <<< 'hello world'", "a shard's path would be longer than 4095 bytes"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char args[1024] = "", *w = args;
        for (const char* a = bad[k].args; *a;) {
            if (strncmp(a, "VOCAB", 5) == 0) { w += sprintf(w, "'%s'", vocab_dir); a += 5; }
            else if (strncmp(a, "TMP", 3) == 0) { w += sprintf(w, "'%s'", g_tmpdir); a += 3; }
            else { *w++ = *a++; *w = '\0'; }
        }
        snprintf(cmd, sizeof(cmd), "bash -c \"./tokenize %s\" 2>&1 >/dev/null", args);
        rc = run_cmd(cmd, out, sizeof(out));
        check(rc != 0 && rc != -1 && strstr(out, bad[k].want) != NULL && strncmp(out, "error: ", 7) == 0, bad[k].name,
              "rc %d, stderr '%s'", rc, out);
    }
    snprintf(cmd, sizeof(cmd), "./tokenize shards --help 2>&1");
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "--shard-size") != NULL, "cli_help", "rc %d", rc);
    snprintf(cmd, sizeof(cmd), "./tokenize 2>&1");
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strncmp(out, "usage: tokenize COMMAND", 23) == 0, "cli_no_command_prints_usage", "rc %d: %.200s", rc, out);
    // stdin past read_stream's first 1 MiB: 3 MB of text through encode and back through decode, byte for byte
    char rt[600];
    snprintf(rt, sizeof(rt), "%s/roundtrip", g_tmpdir);
    snprintf(cmd, sizeof(cmd), "for i in $(seq 60000); do echo \"line $i: the quick brown fox, jumps over the lazy dog.\"; done > '%s.txt' && "
             "./tokenize encode --vocab '%s' < '%s.txt' > '%s.ids' && ./tokenize decode --vocab '%s' < '%s.ids' > '%s.out' && "
             "cmp '%s.txt' '%s.out' && wc -c < '%s.txt'", rt, vocab_dir, rt, rt, vocab_dir, rt, rt, rt, rt, rt);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && atol(out) > 3000000, "cli_encode_decode_3MB_stdin", "rc %d: %.200s", rc, out);
    // every token in the validation split: a warning, and no training shard
    const char* small = write_tmp("small.txt", "hello world. ", 13);
    snprintf(cmd, sizeof(cmd), "./tokenize shards --vocab '%s' --out-dir '%s' --name allval --val-tokens 1000000 '%s' 2>&1 && ls '%s' | grep -c '^allval_'",
             vocab_dir, g_tmpdir, small, g_tmpdir);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "warning: every token went to the validation split; no training shard written") && strstr(out, "\n1\n"),
          "cli_shards_all_validation_warns", "rc %d: %.300s", rc, out);
    // a SIGTERM while a shard is being written (20 MB of one-line documents on stdin, then a line every 0.2 s until
    // the tokenizer is gone; one thread, so the first 8 MB batch is written while the rest waits): the shard in
    // progress, a temporary file, is removed; the whole shards stay
    snprintf(cmd, sizeof(cmd), "D='%s'; { yes 'doc, some words.' | head -c 20000000; while sleep 0.2; do echo more || exit; done; } | "
             "./tokenize shards --vocab '%s' --out-dir \"$D\" --name sig --doc-sep '\\n' --shard-size 100000 --threads 1 > /dev/null 2>&1 & p=$!; i=0; "
             "while [ $i -lt 600 ] && ! ls \"$D\" | grep -q '^sig_.*tmp'; do sleep 0.1; i=$((i + 1)); done; ls \"$D\" | grep -c '^sig_.*tmp'; "
             "kill -TERM $p; wait $p; echo \"rc $?\"; ls \"$D\" | grep -c '^sig_.*tmp'; ls \"$D\" | grep -c '^sig_train_.*[.]bin$'", g_tmpdir, vocab_dir);
    rc = run_cmd(cmd, out, sizeof(out));
    const char* after = strstr(out, "rc 143\n0\n");
    check(strncmp(out, "1\nrc 143\n0\n", 11) == 0 && after && atoi(after + 9) >= 1, "cli_shards_sigterm_removes_the_shard_in_progress",
          "rc %d; temporary files before, the exit, temporary files after, whole shards: %.200s", rc, out);
    // the benchmark command runs (its own check: the 2-thread encoding, cut at safe places, equals the 1-thread one);
    // an empty file is refused
    snprintf(cmd, sizeof(cmd), "./tokenize bench --vocab '%s' --threads 2 tests/data/tokenizer_cases.txt 2>&1", vocab_dir);
    rc = run_cmd(cmd, out, sizeof(out));
    const char* t1 = strstr(out, "1 thread: "), *t2 = strstr(out, "2 threads: ");
    check(rc == 0 && t1 && t2 && atol(t1 + 10) > 1000 && atol(t1 + 10) == atol(t2 + 11) && strstr(out, "encode MB/s: 1 thread "),
          "cli_bench_runs_and_agrees", "rc %d: %.300s", rc, out);
    snprintf(cmd, sizeof(cmd), "./tokenize bench --vocab '%s' /dev/null 2>&1", vocab_dir);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "error: bench: '/dev/null' is empty"), "cli_bench_empty_file_refused", "rc %d: %.200s", rc, out);
    snprintf(cmd, sizeof(cmd), "rm -f '%s'/sig_* '%s'/allval_* '%s'/roundtrip.*", g_tmpdir, g_tmpdir, g_tmpdir);
    if (system(cmd) != 0) { check(0, "cli cleanup", "%s", cmd); }
}

// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
    const char* vocab_dir = argc > 1 ? argv[1] : getenv("GPT2_VOCAB_DIR");
    if (vocab_dir == NULL || vocab_dir[0] == '\0') { vocab_dir = "data/gpt2"; }
    const char* mirror = getenv("DATA_MIRROR");
    if (mirror == NULL || mirror[0] == '\0') { mirror = "data"; }
    snprintf(g_tmpdir, sizeof(g_tmpdir), "/tmp/test_tokenizer.XXXXXX");
    if (mkdtemp(g_tmpdir) == NULL) { fatal("cannot create a temporary directory under /tmp: %s", strerror(errno)); }

    test_encoder_errors(vocab_dir);
    Encoder e;
    int rc = encoder_init(&e, vocab_dir);
    check(rc == 0, "encoder_init", "cannot load the vocabulary from '%s' (set GPT2_VOCAB_DIR or pass it as argv[1]): %s",
          vocab_dir, e.error);
    if (rc == 0) {
        EncoderScratch s;
        encoder_scratch_init(&s, &e);
        test_known_ids(&e);
        test_cases(&e, &s, "tests/data/tokenizer_cases.txt", mirror);
        test_random_roundtrip(&e, &s);
        test_utf8_edges(&e, &s);
        test_merge_paths(&e, &s);
        test_long_pieces(&e, &s);
        test_cache_overflow(&e, &s);
        test_tokenizer_bin(&e);
        test_tokenizer_bin_errors();
        test_cli(&e, &s, vocab_dir);
        encoder_scratch_free(&s);
    }
    encoder_free(&e);

    // clean up the temporary directory (only files this test made live there)
    DIR* dp = opendir(g_tmpdir);
    for (struct dirent* de = dp ? readdir(dp) : NULL; de; de = readdir(dp)) {
        if (de->d_name[0] == '.') { continue; }
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", g_tmpdir, de->d_name);
        remove(p);
    }
    if (dp) { closedir(dp); }
    rmdir(g_tmpdir);
    return test_summary();
}
