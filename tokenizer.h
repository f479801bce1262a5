/*
tokenizer.h: GPT-2 byte-level BPE for the trainer and the `tokenize` tool.

Two parts, one include guard:
  1. The decoder (always compiled): `Tokenizer`, read from llm.c's gpt2_tokenizer.bin. Plain C with no library
     beyond libc, written so that it also compiles as C++ (the trainer is built by nvcc as well). The trainer
     uses it to print samples.
  2. The encoder (only when TOKENIZER_ENCODER is defined before the first include; link -lpcre2-8, OpenMP
     optional): `Encoder`, loaded from OpenAI's encoder.json + vocab.bpe, encodes bytes to ids exactly as
     tiktoken's `gpt2` encoding does, decodes ids to bytes, and writes gpt2_tokenizer.bin.
All functions are static, so any number of translation units may include this header.

Encoding (identical to tiktoken "gpt2" on valid UTF-8):
  - Pre-tokenization by GPT-2's pattern
        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    through PCRE2 with UTF + UCP. \s is spelled \p{White_Space} (the Unicode White_Space property), which is
    what tiktoken's Rust regex means by \s; PCRE2's own \s also matches U+180E, and JavaScript's \s (used by
    js-tiktoken) includes U+FEFF and excludes U+0085, so those three code points are where the
    implementations may disagree. \p{L} and \p{N} come from PCRE2's tables (Unicode 14 for PCRE2 10.42).
  - Each pre-token is encoded by byte-level BPE: start from single bytes and repeatedly merge the adjacent
    pair whose concatenation has the lowest rank (leftmost on ties), where rank = the token's id in
    encoder.json. This is tiktoken's rule; for GPT-2 it is checked at load time that vocab.bpe's merges are
    exactly ids 256.. in order.
  - Invalid UTF-8 (tiktoken only takes valid strings, so this is our rule): the input is split into maximal
    runs of well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), each
    run is pre-tokenized on its own as if it were a separate string, and every byte that does not start a
    well-formed sequence is a pre-token by itself (so it becomes its single-byte token). Hence
    decode(encode(bytes)) == bytes for any byte string, and valid text is unaffected.
  - <|endoftext|> (id 50256) is never produced from text by the ordinary encoder; callers insert it between
    documents (see tokenize.c).

File formats:
  - gpt2_tokenizer.bin (llm.c): 256 x uint32 header: [0] = 20240328 magic, [1] = version (1: no EOT field, EOT
    is 50256; 2: EOT in [3]), [2] = vocab_size, [3] = eot_token; then for each token id in order a uint8 length
    (1..255) followed by that many bytes. Little-endian.
  - Token shards (llm.c, read by dataloader.h): 256 x int32 header: [0] = 20240520 magic, [1] = version,
    [2] = number of tokens; then the tokens. Version 1 stores uint16 tokens (vocabularies up to 65536 ids,
    GPT-2); version 2 stores uint32 tokens, for vocabularies above 65536. Little-endian.

Usage:
  #include "tokenizer.h"                        // decoder only
  Tokenizer t; if (tokenizer_init(&t, "gpt2_tokenizer.bin") != 0) { ... }
  printf("%s", tokenizer_decode(&t, id)); tokenizer_free(&t);

  #define TOKENIZER_ENCODER                     // + encoder; cc ... -lpcre2-8 [-fopenmp]
  #include "tokenizer.h"
  Encoder e; if (encoder_init(&e, "path/to/gpt2") != 0) { ... }  // dir with encoder.json and vocab.bpe
  EncoderScratch s; encoder_scratch_init(&s, &e);
  TokenVec ids = {0}; encoder_encode(&e, &s, bytes, nbytes, &ids);
  ...; tokenvec_free(&ids); encoder_scratch_free(&s); encoder_free(&e);
*/
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENIZER_BIN_MAGIC 20240328
#define SHARD_MAGIC 20240520
#define SHARD_HEADER_INTS 256
#define GPT2_EOT_TOKEN 50256
#define TOKENIZER_MAX_VOCAB (1u << 20) // ids must fit in 20 bits (the pair table packs three of them, one as id + 1)

// ----------------------------------------------------------------------------
// Part 1: decoder (llm.c's gpt2_tokenizer.bin)

typedef struct {
    uint32_t vocab_size;     // number of token ids (50257 for GPT-2)
    uint32_t eot_token;      // <|endoftext|> (50256 for GPT-2)
    char* token_bytes;       // (sum of lengths + vocab_size) every token's bytes followed by a NUL
    uint32_t* token_offset;  // (vocab_size) start of each token in token_bytes
    uint8_t* token_length;   // (vocab_size) byte length of each token (a token may contain a NUL byte)
    int init_ok;             // 1 after a successful tokenizer_init
} Tokenizer;

// Releases everything; safe on a zeroed, failed or already freed Tokenizer.
static void tokenizer_free(Tokenizer* t) {
    free(t->token_bytes);
    free(t->token_offset);
    free(t->token_length);
    memset(t, 0, sizeof(*t));
}

// Loads llm.c's gpt2_tokenizer.bin. Returns 0, or prints one error naming the file and the problem to stderr
// and returns -1 (t is then zeroed and safe to free).
static int tokenizer_init(Tokenizer* t, const char* path) {
    memset(t, 0, sizeof(*t));
    FILE* fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "error: cannot open tokenizer file '%s': %s\n", path, strerror(errno));
        return -1;
    }
    uint32_t header[256];
    const char* problem = NULL;
    long body_start = 0, file_end = 0;
    size_t body_len = 0, pos = 0;
    unsigned char* body = NULL;
    if (fread(header, sizeof(uint32_t), 256, fp) != 256) { problem = "truncated header (need 1024 bytes)"; goto fail; }
    if (header[0] != TOKENIZER_BIN_MAGIC) { problem = "bad magic number (not a gpt2_tokenizer.bin file)"; goto fail; }
    if (header[1] != 1 && header[1] != 2) { problem = "unsupported version (expected 1 or 2)"; goto fail; }
    t->vocab_size = header[2];
    t->eot_token = header[1] == 1 ? GPT2_EOT_TOKEN : header[3];
    if (t->vocab_size == 0 || t->vocab_size > TOKENIZER_MAX_VOCAB) { problem = "vocab_size is 0 or too large"; goto fail; }
    if (t->eot_token >= t->vocab_size) { problem = "eot_token is not below vocab_size"; goto fail; }
    // the body is small (< 1 MB for GPT-2): read it whole, then walk it
    body_start = ftell(fp);
    if (body_start < 0 || fseek(fp, 0, SEEK_END) != 0 || (file_end = ftell(fp)) < body_start ||
        fseek(fp, body_start, SEEK_SET) != 0) {
        problem = "cannot determine the file size";
        goto fail;
    }
    body_len = (size_t)(file_end - body_start);
    // every record takes 2..256 bytes: check the size against vocab_size before allocating for vocab_size tokens
    if (body_len < (size_t)t->vocab_size * 2) { problem = "truncated: fewer tokens than vocab_size"; goto fail; }
    if (body_len > (size_t)t->vocab_size * 256) { problem = "trailing data after the last token"; goto fail; }
    body = (unsigned char*)malloc(body_len + 1);
    t->token_bytes = (char*)malloc(body_len + 1);
    t->token_offset = (uint32_t*)malloc((size_t)t->vocab_size * sizeof(uint32_t));
    t->token_length = (uint8_t*)malloc(t->vocab_size);
    if (!body || !t->token_bytes || !t->token_offset || !t->token_length) { problem = "out of memory"; goto fail; }
    if (fread(body, 1, body_len, fp) != body_len) { problem = "read error"; goto fail; }
    // each record is <len><len bytes>; stored as <len bytes><NUL>, which takes the same space
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        if (pos >= body_len) { problem = "truncated: fewer tokens than vocab_size"; goto fail; }
        unsigned len = body[pos];
        if (len == 0) { problem = "a token has length 0"; goto fail; }
        if (pos + 1 + len > body_len) { problem = "truncated: last token's bytes are missing"; goto fail; }
        t->token_offset[i] = (uint32_t)pos;
        t->token_length[i] = (uint8_t)len;
        memcpy(t->token_bytes + pos, body + pos + 1, len);
        t->token_bytes[pos + len] = '\0';
        pos += 1 + len;
    }
    if (pos != body_len) { problem = "trailing data after the last token"; goto fail; }
    free(body);
    fclose(fp);
    t->init_ok = 1;
    return 0;
fail:
    fprintf(stderr, "error: tokenizer file '%s': %s\n", path, problem);
    free(body);
    fclose(fp);
    tokenizer_free(t);
    return -1;
}

// The bytes of a token as a NUL-terminated string (the token itself may contain NUL: see
// tokenizer_token_length), or NULL for an id outside the vocabulary or an uninitialized tokenizer.
static const char* tokenizer_decode(const Tokenizer* t, uint32_t token) {
    if (!t->init_ok || token >= t->vocab_size) { return NULL; }
    return t->token_bytes + t->token_offset[token];
}

// Byte length of a token, or 0 for an id outside the vocabulary.
static uint32_t tokenizer_token_length(const Tokenizer* t, uint32_t token) {
    if (!t->init_ok || token >= t->vocab_size) { return 0; }
    return t->token_length[token];
}

// ----------------------------------------------------------------------------
// Part 2: encoder (define TOKENIZER_ENCODER; needs PCRE2)
#ifdef TOKENIZER_ENCODER

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "utils.h" // mallocCheck, AtomicFile, fatal
#include "json.h"  // json_parse: cJSON, syntax errors with line and column (link -lcjson)

// GPT-2's pattern with \s spelled as the Unicode White_Space property (see the top of this file).
#define GPT2_SPLIT_PATTERN                                                              \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\p{White_Space}\\p{L}\\p{N}]+" \
    "|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+"

#define ENCODER_NO_RANK UINT32_MAX
#define ENCODER_SHORT_PIECE 64     // pieces up to this many bytes merge by linear scans, longer ones by a heap
#define ENCODER_CACHE_SLOTS (1u << 16)
#define ENCODER_CACHE_MAX_ENTRIES (1u << 15)
#define ENCODER_CACHE_MAX_PIECE 128
#define ENCODER_SCRATCH_KEEP (1u << 20) // merge scratch above this many bytes is released after use

// A growable array of token ids.
typedef struct {
    uint32_t* data;
    size_t len;
    size_t cap;
} TokenVec;

// Makes room for `extra` more ids.
static void tokenvec_reserve(TokenVec* v, size_t extra) {
    if (v->len + extra <= v->cap) { return; }
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->len + extra) { cap = mulSize(cap, 2); }
    uint32_t* p = (uint32_t*)realloc(v->data, mulSize(cap, sizeof(uint32_t)));
    if (p == NULL) { fatal("out of memory growing a token buffer to %zu ids", cap); }
    v->data = p;
    v->cap = cap;
}

static inline void tokenvec_push(TokenVec* v, uint32_t id) {
    if (v->len == v->cap) { tokenvec_reserve(v, 1); }
    v->data[v->len++] = id;
}

static void tokenvec_free(TokenVec* v) {
    free(v->data);
    memset(v, 0, sizeof(*v));
}

// Read-only after encoder_init: one Encoder may be shared by any number of threads, each with its own
// EncoderScratch.
typedef struct {
    uint32_t vocab_size;      // ids 0..vocab_size-1, special tokens included (50257)
    uint32_t eot_token;       // <|endoftext|> (50256)
    uint8_t* token_bytes;     // (total bytes) all tokens' bytes back to back
    uint32_t* token_offset;   // (vocab_size + 1) token i is token_bytes[token_offset[i] .. token_offset[i+1])
    uint8_t* is_special;      // (vocab_size) 1 for tokens never produced by BPE (<|endoftext|>)
    uint32_t byte_token[256]; // id of each single byte
    uint32_t* vocab_slots;    // (vocab_mask + 1) bytes -> id map, open addressing, slot = id + 1, 0 = empty
    uint32_t vocab_mask;
    uint64_t* pair_slots;     // (pair_mask + 1) (left id, right id) -> id of their concatenation, packed
    uint32_t pair_mask;       //   as left << 40 | right << 20 | (id + 1); 0 = empty
    uint32_t num_pairs;
    pcre2_code* re;           // GPT2_SPLIT_PATTERN, JIT-compiled where possible
    int jit;                  // 1 if re is JIT-compiled
    char error[1024];         // the last load error, also printed to stderr
} Encoder;

// Per-thread state for encoding: regex match data, a cache of recently seen pre-tokens, merge scratch.
typedef struct {
    pcre2_match_data* md;
    pcre2_match_context* mctx;
    pcre2_jit_stack* jit_stack;
    // cache: pre-token bytes -> ids
    uint64_t* cache_hash;     // (ENCODER_CACHE_SLOTS) full hash, 0 = empty slot
    uint32_t* cache_entry;    // (ENCODER_CACHE_SLOTS) index into the entry arrays
    uint32_t* entry_key_off;  // (ENCODER_CACHE_MAX_ENTRIES) offset of the key bytes in key_pool
    uint32_t* entry_ids_off;  // (ENCODER_CACHE_MAX_ENTRIES) offset of the ids in ids_pool
    uint16_t* entry_key_len;  // (ENCODER_CACHE_MAX_ENTRIES)
    uint16_t* entry_ids_len;  // (ENCODER_CACHE_MAX_ENTRIES)
    uint32_t num_entries;
    uint8_t* key_pool;        // (ENCODER_CACHE_MAX_ENTRIES * 16) key bytes
    size_t key_pool_len, key_pool_cap;
    uint32_t* ids_pool;       // (ENCODER_CACHE_MAX_ENTRIES * 4) ids
    size_t ids_pool_len, ids_pool_cap;
    // merge scratch, grown to the longest pre-token seen
    size_t cap;
    uint32_t* tok;            // (cap) current part ids
    uint32_t* rank;           // (cap) rank of (part i, part i+1) (short path)
    int32_t* next;            // (cap) linked list (long path)
    int32_t* prev;            // (cap)
    uint64_t* heap;           // (3 * cap) (rank << 32 | position), min-heap (long path)
} EncoderScratch;

// ----------------------------------------------------------------------------
// hashing

// A fast 64-bit hash of a short byte string (never returns 0, so 0 can mark an empty slot).
static inline uint64_t encoder__hash_bytes(const uint8_t* p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) { v |= (uint64_t)p[i] << (8 * i); }
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    return h ? h : 1;
}

static inline uint64_t encoder__hash_pair(uint32_t a, uint32_t b) {
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

// Id of the token whose bytes are exactly p[0..n), or ENCODER_NO_RANK. Special tokens are not found.
static inline uint32_t encoder__lookup(const Encoder* e, const uint8_t* p, size_t n, uint64_t h) {
    uint32_t mask = e->vocab_mask;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        uint32_t slot = e->vocab_slots[i];
        if (slot == 0) { return ENCODER_NO_RANK; }
        uint32_t id = slot - 1;
        uint32_t off = e->token_offset[id];
        if (e->token_offset[id + 1] - off == n && memcmp(e->token_bytes + off, p, n) == 0) { return id; }
    }
}

// Rank (= id) of the concatenation of tokens a and b, or ENCODER_NO_RANK if it is not a token.
static inline uint32_t encoder__pair_rank(const Encoder* e, uint32_t a, uint32_t b) {
    uint64_t key = (uint64_t)a << 20 | b;
    uint32_t mask = e->pair_mask;
    for (uint32_t i = (uint32_t)encoder__hash_pair(a, b) & mask;; i = (i + 1) & mask) {
        uint64_t slot = e->pair_slots[i];
        if (slot == 0) { return ENCODER_NO_RANK; }
        if ((slot >> 20) == key) { return (uint32_t)(slot & 0xFFFFF) - 1; }
    }
}

// ----------------------------------------------------------------------------
// loading: encoder.json + vocab.bpe

// GPT-2's byte <-> printable character table: bytes 33..126, 161..172, 174..255 stand for themselves; the
// remaining 68 bytes, in increasing order, are U+0100.. U+0143. Fills unicode_to_byte[0..324) (-1 = none).
static void encoder__byte_alphabet(int16_t unicode_to_byte[324]) {
    for (int i = 0; i < 324; i++) { unicode_to_byte[i] = -1; }
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        if (printable) {
            unicode_to_byte[b] = (int16_t)b;
        } else {
            unicode_to_byte[256 + n] = (int16_t)b;
            n++;
        }
    }
}

// Formats an error into e->error, prints it, returns -1.
static int __attribute__((format(printf, 2, 3))) encoder__fail(Encoder* e, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof(e->error), fmt, ap);
    va_end(ap);
    fprintf(stderr, "error: %s\n", e->error);
    return -1;
}

// Reads a whole file into a NUL-terminated malloc'd buffer; returns NULL (and sets *err) on failure.
static char* encoder__read_file(const char* path, size_t* len, const char** err) {
    FILE* fp = fopen(path, "rb");
    if (fp == NULL) { *err = strerror(errno); return NULL; }
    size_t cap = 1 << 20, n = 0;
    char* buf = (char*)mallocCheck(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap = mulSize(cap, 2);
            char* nb = (char*)realloc(buf, cap);
            if (nb == NULL) { fatal("out of memory reading '%s'", path); }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, fp);
        n += got;
        if (got == 0) { break; }
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) { free(buf); *err = "read error"; return NULL; }
    buf[n] = '\0';
    *len = n;
    return buf;
}

// Maps one code point of encoder.json / vocab.bpe through GPT-2's byte alphabet: the byte, or -1.
static int encoder__cp_to_byte(const int16_t* u2b, uint32_t cp) {
    return cp < 324 ? u2b[cp] : -1;
}

static inline size_t encoder__utf8_len(const uint8_t* p, size_t n);

// Decodes the well-formed UTF-8 sequence at p[0..n) (RFC 3629, see encoder__utf8_len) into *cp. Returns its length
// (1..4), or 0 if p does not start one (an overlong form, a surrogate, a bad continuation byte, a cut sequence).
static size_t encoder__utf8_decode(const uint8_t* p, size_t n, uint32_t* cp) {
    size_t k = encoder__utf8_len(p, n);
    if (k == 0) { return 0; }
    uint32_t v = k == 1 ? p[0] : (uint32_t)(p[0] & (0x7Fu >> k));
    for (size_t q = 1; q < k; q++) { v = v << 6 | (p[q] & 0x3Fu); }
    *cp = v;
    return k;
}

// Maps a key of encoder.json (UTF-8, escapes already decoded by cJSON) through GPT-2's byte alphabet into out.
// Returns NULL on success or a static description of the problem.
static const char* encoder__key_bytes(const char* key, const int16_t* u2b, uint8_t* out, size_t out_cap, size_t* out_len) {
    size_t n = strlen(key), i = 0, len = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = encoder__utf8_decode((const uint8_t*)key + i, n - i, &cp); // strict: no overlong forms, no surrogates
        if (k == 0) { return "invalid UTF-8 in a key"; }
        i += k;
        int byte = encoder__cp_to_byte(u2b, cp);
        if (byte < 0) { return "a key holds a character outside GPT-2's byte alphabet"; }
        if (len >= out_cap) { return "a key is longer than 255 bytes"; }
        out[len++] = (uint8_t)byte;
    }
    *out_len = len;
    return NULL;
}

// Inserts id into the bytes -> id map (the caller guarantees unique keys).
static void encoder__vocab_insert(Encoder* e, uint32_t id) {
    uint32_t off = e->token_offset[id];
    uint64_t h = encoder__hash_bytes(e->token_bytes + off, e->token_offset[id + 1] - off);
    uint32_t i = (uint32_t)h & e->vocab_mask;
    while (e->vocab_slots[i] != 0) { i = (i + 1) & e->vocab_mask; }
    e->vocab_slots[i] = id + 1;
}

// Parses encoder.json ({"token": id, ...}) into token_bytes/token_offset. Returns 0 or -1 (error set). The JSON
// syntax is cJSON's (json.h reports the line and column of an error); this checks what GPT-2 needs of it: an
// object of string keys in the byte alphabet, each with an integer id, the ids exactly 0..V-1.
static int encoder__load_json(Encoder* e, const char* path) {
    size_t n = 0;
    const char* err = NULL;
    char* s = encoder__read_file(path, &n, &err);
    if (s == NULL) { return encoder__fail(e, "cannot read '%s': %s", path, err); }
    char jerr[256];
    cJSON* root = json_parse(s, n, jerr, sizeof(jerr));
    free(s);
    if (!root) { return encoder__fail(e, "'%s' is not a valid GPT-2 encoder.json: %s", path, jerr); }
    int16_t u2b[324];
    encoder__byte_alphabet(u2b);
    size_t count = (size_t)cJSON_GetArraySize(root), bytes_len = 0;
    uint32_t* ids = (uint32_t*)mallocCheck((count + 1) * sizeof(uint32_t));
    uint32_t* offs = (uint32_t*)mallocCheck((count + 1) * sizeof(uint32_t));
    uint8_t* bytes = (uint8_t*)mallocCheck(count * 255 + 1); // keys are at most 255 bytes (checked below)
    const char* problem = NULL;
    const char* where = "";
    double bad_id = 0;
    size_t k = 0; // (declared before the first goto: the header also compiles as C++, where a jump may not skip it)
    if (!cJSON_IsObject(root)) { problem = "expected an object {\"token\": id, ...}"; goto fail; }
    if (count == 0) { problem = "the object is empty"; goto fail; }
    for (const cJSON* it = root->child; it; it = it->next, k++) {
        where = it->string;
        size_t key_len = 0;
        problem = encoder__key_bytes(it->string, u2b, bytes + bytes_len, 255, &key_len);
        if (problem) { goto fail; }
        if (key_len == 0) { problem = "empty key"; goto fail; }
        bad_id = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0)) { problem = "the id is not a non-negative integer"; goto fail; }
        // the range first: converting a double past an integer type's range (1e26, say) is undefined behaviour
        if (it->valuedouble + 1 >= TOKENIZER_MAX_VOCAB) { problem = "id too large"; goto fail; } // id + 1 fits in 20 bits
        if (it->valuedouble != (double)(uint32_t)it->valuedouble) { problem = "the id is not a non-negative integer"; goto fail; }
        ids[k] = (uint32_t)it->valuedouble;
        offs[k] = (uint32_t)bytes_len;
        bytes_len += key_len;
    }
    cJSON_Delete(root);
    root = NULL;
    offs[count] = (uint32_t)bytes_len;
    {
        // ids must be exactly 0..count-1; place tokens by id
        uint32_t V = (uint32_t)count;
        uint32_t* place = (uint32_t*)mallocCheck((size_t)V * sizeof(uint32_t));
        for (uint32_t q = 0; q < V; q++) { place[q] = UINT32_MAX; }
        for (uint32_t q = 0; q < V; q++) {
            uint32_t id = ids[q];
            int gap = id >= V, twice = !gap && place[id] != UINT32_MAX;
            if (gap || twice) {
                free(place);
                free(ids); free(offs); free(bytes);
                if (gap) { return encoder__fail(e, "'%s': ids are not 0..%u without gaps (found id %u)", path, V - 1, id); }
                return encoder__fail(e, "'%s': id %u appears twice", path, id);
            }
            place[id] = q;
        }
        e->vocab_size = V;
        e->token_bytes = (uint8_t*)mallocCheck(bytes_len + 1);
        e->token_offset = (uint32_t*)mallocCheck(((size_t)V + 1) * sizeof(uint32_t));
        uint32_t pos = 0;
        for (uint32_t id = 0; id < V; id++) {
            uint32_t q = place[id];
            uint32_t len = offs[q + 1] - offs[q];
            e->token_offset[id] = pos;
            memcpy(e->token_bytes + pos, bytes + offs[q], len);
            pos += len;
        }
        e->token_offset[V] = pos;
        free(place);
    }
    free(ids); free(offs); free(bytes);
    return 0;
fail: {
    // name the key (printable ASCII, the rest as \xHH), since a parsed tree has no line numbers
    char shown[80];
    size_t m = 0;
    for (const unsigned char* p = (const unsigned char*)where; *p && m + 5 < sizeof(shown); p++) {
        m += (size_t)snprintf(shown + m, sizeof(shown) - m, (*p >= 0x20 && *p < 0x7f && *p != '"') ? "%c" : "\\x%02x", *p);
    }
    shown[m] = '\0';
    int named = where[0] != '\0';
    cJSON_Delete(root); // `where` points into the tree: not used after this
    free(ids); free(offs); free(bytes);
    if (named) { return encoder__fail(e, "'%s' is not a valid GPT-2 encoder.json: %s (key \"%s\", value %g)", path, problem, shown, bad_id); }
    return encoder__fail(e, "'%s' is not a valid GPT-2 encoder.json: %s", path, problem);
}
}

// Checks vocab.bpe against encoder.json: line k (after the "#version" line) "A B" must be the merge that makes
// token 256 + k, i.e. tiktoken's rank order, and A and B tokens made before it (ids below 256 + k). Returns 0 or
// -1 (error set).
static int encoder__check_merges(Encoder* e, const char* path) {
    size_t n = 0;
    const char* err = NULL;
    char* s = encoder__read_file(path, &n, &err);
    if (s == NULL) { return encoder__fail(e, "cannot read '%s': %s", path, err); }
    int16_t u2b[324];
    encoder__byte_alphabet(u2b);
    size_t i = 0;
    int line = 1;
    uint32_t merges = 0;
    const char* problem = NULL;
    if (strncmp(s, "#version", 8) == 0) {
        while (i < n && s[i] != '\n') { i++; }
        i++;
        line++;
    }
    while (i < n) {
        size_t end = i;
        while (end < n && s[end] != '\n') { end++; }
        size_t line_end = end;
        if (line_end > i && s[line_end - 1] == '\r') { line_end--; }
        if (line_end > i) {
            // split "A B" at the single space; both halves are in the byte alphabet (a space never is)
            uint8_t buf[512];
            size_t len = 0, halves = 1, split = 0;
            size_t k = i;
            while (k < line_end) {
                if (s[k] == ' ') { halves++; split = len; k++; continue; }
                uint32_t cp;
                size_t ul = encoder__utf8_decode((const uint8_t*)s + k, line_end - k, &cp);
                if (ul == 0) { problem = "invalid UTF-8"; break; }
                k += ul;
                int b = encoder__cp_to_byte(u2b, cp);
                if (b < 0) { problem = "a character outside GPT-2's byte alphabet"; break; }
                if (len >= sizeof(buf)) { problem = "merge too long"; break; }
                buf[len++] = (uint8_t)b;
            }
            if (problem) { break; }
            if (halves != 2 || split == 0 || split == len) { problem = "expected two symbols separated by one space"; break; }
            uint32_t id = encoder__lookup(e, buf, len, encoder__hash_bytes(buf, len));
            if (id == ENCODER_NO_RANK) { problem = "the merged token is not in encoder.json"; break; }
            if (id != 256 + merges) { problem = "merge order does not match the ids in encoder.json"; break; }
            uint32_t a = encoder__lookup(e, buf, split, encoder__hash_bytes(buf, split));
            uint32_t b = encoder__lookup(e, buf + split, len - split, encoder__hash_bytes(buf + split, len - split));
            if (a >= id || b >= id) { problem = "a half of the merge is not a token made before it"; break; }
            merges++;
        }
        i = end + 1;
        line++;
    }
    free(s);
    if (problem) { return encoder__fail(e, "'%s' line %d: %s", path, line, problem); }
    if (merges == 0) { return encoder__fail(e, "'%s' holds no merges", path); }
    return 0;
}

static void encoder__pair_insert(Encoder* e, uint32_t a, uint32_t b, uint32_t id) {
    uint64_t key = (uint64_t)a << 20 | b;
    uint32_t i = (uint32_t)encoder__hash_pair(a, b) & e->pair_mask;
    while (e->pair_slots[i] != 0) {
        if ((e->pair_slots[i] >> 20) == key) { return; } // same pair, same concatenation: already there
        i = (i + 1) & e->pair_mask;
    }
    e->pair_slots[i] = key << 20 | (uint64_t)(id + 1);
}

// Releases everything; safe on a zeroed or failed Encoder.
static void encoder_free(Encoder* e) {
    free(e->token_bytes);
    free(e->token_offset);
    free(e->is_special);
    free(e->vocab_slots);
    free(e->pair_slots);
    if (e->re) { pcre2_code_free(e->re); }
    char keep[sizeof(e->error)];
    memcpy(keep, e->error, sizeof(keep));
    memset(e, 0, sizeof(*e));
    memcpy(e->error, keep, sizeof(keep)); // the last error stays readable
}

// Loads <dir>/encoder.json and <dir>/vocab.bpe. Returns 0, or -1 after printing one error naming the file and
// the problem (also left in e->error); e is then safe to free.
static int encoder_init(Encoder* e, const char* dir) {
    memset(e, 0, sizeof(*e));
    char json_path[4096], bpe_path[4096];
    if (snprintf(json_path, sizeof(json_path), "%s/encoder.json", dir) >= (int)sizeof(json_path) ||
        snprintf(bpe_path, sizeof(bpe_path), "%s/vocab.bpe", dir) >= (int)sizeof(bpe_path)) {
        return encoder__fail(e, "vocab directory path too long: '%s'", dir);
    }
    uint32_t V = 0; // (before the first goto, for C++)
    if (encoder__load_json(e, json_path) != 0) { goto fail; }
    V = e->vocab_size;
    // special tokens: <|endoftext|> (and anything else spelled <|...|>) is not a BPE token
    e->is_special = (uint8_t*)callocCheck(V, 1);
    e->eot_token = ENCODER_NO_RANK;
    for (uint32_t id = 0; id < V; id++) {
        const uint8_t* p = e->token_bytes + e->token_offset[id];
        uint32_t len = e->token_offset[id + 1] - e->token_offset[id];
        if (len >= 4 && p[0] == '<' && p[1] == '|' && p[len - 2] == '|' && p[len - 1] == '>') {
            e->is_special[id] = 1;
            if (len == 13 && memcmp(p, "<|endoftext|>", 13) == 0) { e->eot_token = id; }
        }
    }
    if (e->eot_token == ENCODER_NO_RANK) {
        encoder__fail(e, "'%s' has no <|endoftext|> token", json_path);
        goto fail;
    }
    // bytes -> id map, load factor <= 0.5
    e->vocab_mask = 1;
    while (e->vocab_mask < 2 * V) { e->vocab_mask <<= 1; }
    e->vocab_slots = (uint32_t*)callocCheck(e->vocab_mask, sizeof(uint32_t));
    e->vocab_mask -= 1;
    for (int b = 0; b < 256; b++) { e->byte_token[b] = ENCODER_NO_RANK; }
    for (uint32_t id = 0; id < V; id++) {
        if (e->is_special[id]) { continue; }
        uint32_t off = e->token_offset[id], len = e->token_offset[id + 1] - off;
        uint64_t h = encoder__hash_bytes(e->token_bytes + off, len);
        if (encoder__lookup(e, e->token_bytes + off, len, h) != ENCODER_NO_RANK) {
            encoder__fail(e, "'%s': token %u duplicates the bytes of an earlier token", json_path, id);
            goto fail;
        }
        encoder__vocab_insert(e, id);
        if (len == 1) { e->byte_token[e->token_bytes[off]] = id; }
    }
    for (int b = 0; b < 256; b++) {
        if (e->byte_token[b] == ENCODER_NO_RANK) {
            encoder__fail(e, "'%s' has no token for the single byte 0x%02x", json_path, b);
            goto fail;
        }
    }
    if (encoder__check_merges(e, bpe_path) != 0) { goto fail; }
    // pair map: every split of every token into two tokens (tiktoken merges by rank of the concatenation)
    {
        size_t pairs = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                e->pair_mask = 1;
                while (e->pair_mask < 2 * pairs) { e->pair_mask <<= 1; }
                e->pair_slots = (uint64_t*)callocCheck(e->pair_mask, sizeof(uint64_t));
                e->pair_mask -= 1;
                e->num_pairs = (uint32_t)pairs;
            }
            for (uint32_t id = 0; id < V; id++) {
                if (e->is_special[id]) { continue; }
                const uint8_t* p = e->token_bytes + e->token_offset[id];
                uint32_t len = e->token_offset[id + 1] - e->token_offset[id];
                for (uint32_t k = 1; k < len; k++) {
                    uint32_t a = encoder__lookup(e, p, k, encoder__hash_bytes(p, k));
                    if (a == ENCODER_NO_RANK) { continue; }
                    uint32_t b = encoder__lookup(e, p + k, len - k, encoder__hash_bytes(p + k, len - k));
                    if (b == ENCODER_NO_RANK) { continue; }
                    if (pass == 0) { pairs++; } else { encoder__pair_insert(e, a, b, id); }
                }
            }
        }
    }
    {
        int errcode;
        PCRE2_SIZE erroff;
        e->re = pcre2_compile((PCRE2_SPTR)GPT2_SPLIT_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &errcode,
                              &erroff, NULL);
        if (e->re == NULL) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(errcode, msg, sizeof(msg));
            encoder__fail(e, "PCRE2 cannot compile the GPT-2 pattern at offset %zu: %s", (size_t)erroff, (char*)msg);
            goto fail;
        }
        e->jit = pcre2_jit_compile(e->re, PCRE2_JIT_COMPLETE) == 0;
    }
    return 0;
fail:
    encoder_free(e);
    return -1;
}

// ----------------------------------------------------------------------------
// per-thread scratch

static void encoder__scratch_grow(EncoderScratch* s, size_t n) {
    if (n <= s->cap) { return; }
    size_t cap = s->cap ? s->cap : 256;
    while (cap < n) { cap = mulSize(cap, 2); }
    free(s->tok); free(s->rank); free(s->next); free(s->prev); free(s->heap);
    s->tok = (uint32_t*)mallocCheck(mulSize(cap, sizeof(uint32_t)));
    s->rank = (uint32_t*)mallocCheck(mulSize(cap, sizeof(uint32_t)));
    s->next = (int32_t*)mallocCheck(mulSize(cap, sizeof(int32_t)));
    s->prev = (int32_t*)mallocCheck(mulSize(cap, sizeof(int32_t)));
    s->heap = (uint64_t*)mallocCheck(mulSize(mulSize(cap, 3), sizeof(uint64_t)));
    s->cap = cap;
}

static void encoder__cache_clear(EncoderScratch* s) {
    memset(s->cache_hash, 0, ENCODER_CACHE_SLOTS * sizeof(uint64_t));
    s->num_entries = 0;
    s->key_pool_len = 0;
    s->ids_pool_len = 0;
}

// Prepares per-thread state for encoding with e (one per thread; never shared between threads).
static void encoder_scratch_init(EncoderScratch* s, const Encoder* e) {
    memset(s, 0, sizeof(*s));
    s->md = pcre2_match_data_create(1, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    s->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!s->md || !s->mctx || !s->jit_stack) { fatal("out of memory creating PCRE2 match data"); }
    if (e->jit) { pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack); }
    s->cache_hash = (uint64_t*)callocCheck(ENCODER_CACHE_SLOTS, sizeof(uint64_t));
    s->cache_entry = (uint32_t*)mallocCheck(ENCODER_CACHE_SLOTS * sizeof(uint32_t));
    s->entry_key_off = (uint32_t*)mallocCheck(ENCODER_CACHE_MAX_ENTRIES * sizeof(uint32_t));
    s->entry_ids_off = (uint32_t*)mallocCheck(ENCODER_CACHE_MAX_ENTRIES * sizeof(uint32_t));
    s->entry_key_len = (uint16_t*)mallocCheck(ENCODER_CACHE_MAX_ENTRIES * sizeof(uint16_t));
    s->entry_ids_len = (uint16_t*)mallocCheck(ENCODER_CACHE_MAX_ENTRIES * sizeof(uint16_t));
    s->key_pool_cap = (size_t)ENCODER_CACHE_MAX_ENTRIES * 16;
    s->key_pool = (uint8_t*)mallocCheck(s->key_pool_cap);
    s->ids_pool_cap = (size_t)ENCODER_CACHE_MAX_ENTRIES * 4;
    s->ids_pool = (uint32_t*)mallocCheck(s->ids_pool_cap * sizeof(uint32_t));
    encoder__scratch_grow(s, 256);
}

static void encoder_scratch_free(EncoderScratch* s) {
    if (s->md) { pcre2_match_data_free(s->md); }
    if (s->mctx) { pcre2_match_context_free(s->mctx); }
    if (s->jit_stack) { pcre2_jit_stack_free(s->jit_stack); }
    free(s->cache_hash); free(s->cache_entry);
    free(s->entry_key_off); free(s->entry_ids_off); free(s->entry_key_len); free(s->entry_ids_len);
    free(s->key_pool); free(s->ids_pool);
    free(s->tok); free(s->rank); free(s->next); free(s->prev); free(s->heap);
    memset(s, 0, sizeof(*s));
}

// ----------------------------------------------------------------------------
// byte-pair merging of one pre-token

// Short pieces: tiktoken's algorithm. parts[0..m) with rank[i] = rank of (part i, part i+1); merge the lowest
// (leftmost on ties) until no adjacent pair is a token. O(n^2), fast for the usual n < 20.
static size_t encoder__merge_linear(const Encoder* e, EncoderScratch* s, const uint8_t* p, size_t n) {
    uint32_t* tok = s->tok;
    uint32_t* rank = s->rank;
    for (size_t i = 0; i < n; i++) { tok[i] = e->byte_token[p[i]]; }
    for (size_t i = 0; i + 1 < n; i++) { rank[i] = encoder__pair_rank(e, tok[i], tok[i + 1]); }
    size_t m = n;
    while (m > 1) {
        uint32_t best = ENCODER_NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            if (rank[i] < best) { best = rank[i]; bi = i; }
        }
        if (best == ENCODER_NO_RANK) { break; }
        tok[bi] = best; // rank == id of the merged token
        memmove(tok + bi + 1, tok + bi + 2, (m - bi - 2) * sizeof(uint32_t));
        if (m - bi >= 3) { memmove(rank + bi + 1, rank + bi + 2, (m - bi - 3) * sizeof(uint32_t)); }
        m--;
        if (bi > 0) { rank[bi - 1] = encoder__pair_rank(e, tok[bi - 1], tok[bi]); }
        if (bi + 1 < m) { rank[bi] = encoder__pair_rank(e, tok[bi], tok[bi + 1]); }
    }
    return m;
}

static inline void encoder__heap_push(uint64_t* heap, size_t* size, uint64_t v) {
    size_t i = (*size)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (heap[parent] <= v) { break; }
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = v;
}

static inline uint64_t encoder__heap_pop(uint64_t* heap, size_t* size) {
    uint64_t top = heap[0];
    uint64_t v = heap[--(*size)];
    size_t i = 0, n = *size;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) { break; }
        if (c + 1 < n && heap[c + 1] < heap[c]) { c++; }
        if (v <= heap[c]) { break; }
        heap[i] = heap[c];
        i = c;
    }
    if (n > 0) { heap[i] = v; }
    return top;
}

// Long pieces: the same merge order from a min-heap of (rank, position) over a linked list of parts. Stale
// heap entries are skipped by recomputing the pair's rank. O(n log n). Leaves the ids in s->tok[0..m).
static size_t encoder__merge_heap(const Encoder* e, EncoderScratch* s, const uint8_t* p, size_t n) {
    uint32_t* tok = s->tok;
    int32_t* next = s->next;
    int32_t* prev = s->prev;
    uint64_t* heap = s->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        tok[i] = e->byte_token[p[i]];
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = encoder__pair_rank(e, tok[i], tok[i + 1]);
        if (r != ENCODER_NO_RANK) { encoder__heap_push(heap, &hn, (uint64_t)r << 32 | i); }
    }
    while (hn > 0) {
        uint64_t top = encoder__heap_pop(heap, &hn);
        uint32_t r = (uint32_t)(top >> 32);
        int32_t i = (int32_t)(uint32_t)top;
        if (prev[i] == -2) { continue; } // part i was merged into its left neighbour
        int32_t j = next[i];
        if (j < 0 || encoder__pair_rank(e, tok[i], tok[j]) != r) { continue; }
        tok[i] = r;
        next[i] = next[j];
        if (next[j] >= 0) { prev[next[j]] = i; }
        prev[j] = -2;
        if (prev[i] >= 0) {
            uint32_t rl = encoder__pair_rank(e, tok[prev[i]], tok[i]);
            if (rl != ENCODER_NO_RANK) { encoder__heap_push(heap, &hn, (uint64_t)rl << 32 | (uint32_t)prev[i]); }
        }
        if (next[i] >= 0) {
            uint32_t rr = encoder__pair_rank(e, tok[i], tok[next[i]]);
            if (rr != ENCODER_NO_RANK) { encoder__heap_push(heap, &hn, (uint64_t)rr << 32 | (uint32_t)i); }
        }
    }
    size_t m = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) { tok[m++] = tok[i]; }
    return m;
}

// Byte-pair encodes one pre-token p[0..n) into s->tok[0..return). force: 0 = choose by length, 1 = linear,
// 2 = heap (the test compares the two).
static size_t encoder__bpe(const Encoder* e, EncoderScratch* s, const uint8_t* p, size_t n, int force) {
    encoder__scratch_grow(s, n);
    int heap = force ? force == 2 : n > ENCODER_SHORT_PIECE;
    return heap ? encoder__merge_heap(e, s, p, n) : encoder__merge_linear(e, s, p, n);
}

// Appends the ids of one pre-token: a whole-token lookup, then the cache, then BPE (whose result is cached).
static inline void encoder__encode_piece(const Encoder* e, EncoderScratch* s, const uint8_t* p, size_t n, TokenVec* out) {
    if (n == 1) { tokenvec_push(out, e->byte_token[p[0]]); return; }
    uint64_t h = encoder__hash_bytes(p, n);
    uint32_t id = encoder__lookup(e, p, n, h);
    if (id != ENCODER_NO_RANK) { tokenvec_push(out, id); return; }
    int cacheable = n <= ENCODER_CACHE_MAX_PIECE;
    uint32_t slot = (uint32_t)h & (ENCODER_CACHE_SLOTS - 1);
    if (cacheable) {
        for (;; slot = (slot + 1) & (ENCODER_CACHE_SLOTS - 1)) {
            uint64_t sh = s->cache_hash[slot];
            if (sh == 0) { break; }
            if (sh == h) {
                uint32_t k = s->cache_entry[slot];
                if (s->entry_key_len[k] == n && memcmp(s->key_pool + s->entry_key_off[k], p, n) == 0) {
                    size_t m = s->entry_ids_len[k];
                    tokenvec_reserve(out, m);
                    memcpy(out->data + out->len, s->ids_pool + s->entry_ids_off[k], m * sizeof(uint32_t));
                    out->len += m;
                    return;
                }
            }
        }
    }
    size_t m = encoder__bpe(e, s, p, n, 0);
    tokenvec_reserve(out, m);
    memcpy(out->data + out->len, s->tok, m * sizeof(uint32_t));
    out->len += m;
    if (s->cap > ENCODER_SCRATCH_KEEP) { // a huge pre-token (a long run of spaces, say): give its 40 bytes/byte back
        free(s->tok); free(s->rank); free(s->next); free(s->prev); free(s->heap);
        s->tok = s->rank = NULL; s->next = s->prev = NULL; s->heap = NULL;
        s->cap = 0;
        encoder__scratch_grow(s, 256);
    }
    if (!cacheable) { return; }
    if (s->num_entries >= ENCODER_CACHE_MAX_ENTRIES || s->key_pool_len + n > s->key_pool_cap ||
        s->ids_pool_len + m > s->ids_pool_cap) {
        encoder__cache_clear(s);
        slot = (uint32_t)h & (ENCODER_CACHE_SLOTS - 1); // the table is empty now
    }
    uint32_t k = s->num_entries++;
    s->entry_key_off[k] = (uint32_t)s->key_pool_len;
    s->entry_key_len[k] = (uint16_t)n;
    memcpy(s->key_pool + s->key_pool_len, p, n);
    s->key_pool_len += n;
    s->entry_ids_off[k] = (uint32_t)s->ids_pool_len;
    s->entry_ids_len[k] = (uint16_t)m;
    memcpy(s->ids_pool + s->ids_pool_len, s->tok, m * sizeof(uint32_t));
    s->ids_pool_len += m;
    s->cache_hash[slot] = h;
    s->cache_entry[slot] = k;
}

// ----------------------------------------------------------------------------
// encoding

// Length of the well-formed UTF-8 sequence starting at p[0] (1..4), or 0 if p[0] does not start one
// (RFC 3629 / PCRE2's definition: no overlongs, no surrogates, at most U+10FFFF).
static inline size_t encoder__utf8_len(const uint8_t* p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) { return 1; }
    if (c < 0xC2) { return 0; }
    if (c < 0xE0) { return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0; }
    if (c < 0xF0) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) { return 0; }
        if (c == 0xE0 && p[1] < 0xA0) { return 0; } // overlong
        if (c == 0xED && p[1] >= 0xA0) { return 0; } // surrogate
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) { return 0; }
        if (c == 0xF0 && p[1] < 0x90) { return 0; } // overlong
        if (c == 0xF4 && p[1] >= 0x90) { return 0; } // above U+10FFFF
        return 4;
    }
    return 0;
}

// Length of the longest prefix of p[0..n) that is well-formed UTF-8.
static size_t encoder__valid_prefix(const uint8_t* p, size_t n) {
    size_t i = 0;
    while (i < n) {
        // ASCII fast path, 8 bytes at a time
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            if (v & 0x8080808080808080ull) { break; }
            i += 8;
        }
        if (i >= n) { break; }
        size_t k = encoder__utf8_len(p + i, n - i);
        if (k == 0) { break; }
        i += k;
    }
    return i;
}

// Pre-tokenizes one well-formed UTF-8 run with the GPT-2 pattern and appends the ids of every pre-token.
static void encoder__encode_run(const Encoder* e, EncoderScratch* s, const uint8_t* p, size_t n, TokenVec* out) {
    size_t pos = 0;
    while (pos < n) {
        int rc = e->jit ? pcre2_jit_match(e->re, p, n, pos, PCRE2_NO_UTF_CHECK, s->md, s->mctx)
                        : pcre2_match(e->re, p, n, pos, PCRE2_NO_UTF_CHECK, s->md, s->mctx);
        size_t start = n, end = n;
        if (rc > 0) {
            PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s->md);
            start = ov[0];
            end = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            fatal("PCRE2 match failed with code %d at offset %zu of a %zu-byte run", rc, pos, n);
        }
        // the pattern matches every character, so there is never a gap; keep any as a piece all the same
        if (start > pos) { encoder__encode_piece(e, s, p + pos, start - pos, out); }
        if (end <= start) { break; } // no empty matches exist in this pattern; stop rather than loop
        encoder__encode_piece(e, s, p + start, end - start, out);
        pos = end;
    }
}

// Encodes arbitrary bytes text[0..n) as ordinary text (no special tokens), appending ids to out. Valid
// UTF-8 gives exactly tiktoken's ids; see the top of the file for the invalid-UTF-8 rule.
static void encoder_encode(const Encoder* e, EncoderScratch* s, const uint8_t* text, size_t n, TokenVec* out) {
    size_t i = 0;
    while (i < n) {
        size_t run = encoder__valid_prefix(text + i, n - i);
        if (run > 0) {
            encoder__encode_run(e, s, text + i, run, out);
            i += run;
        }
        if (i < n) { // a byte that does not start a well-formed sequence is a pre-token by itself
            tokenvec_push(out, e->byte_token[text[i]]);
            i++;
        }
    }
}

// A cut position c in text[lo..hi) where encoding text[..c) and text[c..) separately gives the same ids as
// encoding the whole: text[c-2] and text[c] are printable non-space ASCII and text[c-1] is '\n'. (The '\n'
// then is a pre-token by itself and the pattern has no look-behind.) Returns 0 if there is none.
static size_t encoder_find_cut(const uint8_t* text, size_t lo, size_t hi) {
    if (lo < 2) { lo = 2; }
    for (size_t c = lo; c < hi; c++) {
        if (text[c - 1] == '\n' && text[c] > 0x20 && text[c] < 0x7F && text[c - 2] > 0x20 && text[c - 2] < 0x7F) {
            return c;
        }
    }
    return 0;
}

// Same as encoder_find_cut but searching backwards from hi: the last safe cut in (lo, hi), or 0.
static size_t encoder_find_cut_last(const uint8_t* text, size_t lo, size_t hi) {
    if (lo < 2) { lo = 2; }
    for (size_t c = hi; c-- > lo;) {
        if (text[c - 1] == '\n' && text[c] > 0x20 && text[c] < 0x7F && text[c - 2] > 0x20 && text[c - 2] < 0x7F) {
            return c;
        }
    }
    return 0;
}

// Encodes text[0..n) on nthreads threads (scratch[0..nthreads), one per thread) by cutting it at safe cuts
// into about chunk_bytes pieces; the ids are identical to encoder_encode's.
static void encoder_encode_parallel(const Encoder* e, EncoderScratch* scratch, int nthreads, const uint8_t* text,
                                    size_t n, size_t chunk_bytes, TokenVec* out) {
    if (nthreads <= 1 || n < 2 * chunk_bytes) {
        encoder_encode(e, &scratch[0], text, n, out);
        return;
    }
    size_t max_chunks = n / chunk_bytes + 2, nchunks = 0;
    size_t* cut = (size_t*)mallocCheck(mulSize(max_chunks + 1, sizeof(size_t)));
    cut[0] = 0;
    size_t pos = 0;
    while (pos < n && nchunks + 1 < max_chunks) {
        size_t c = pos + chunk_bytes < n ? encoder_find_cut(text, pos + chunk_bytes, n) : 0;
        if (c == 0) { break; }
        cut[++nchunks] = c;
        pos = c;
    }
    cut[++nchunks] = n;
    TokenVec* parts = (TokenVec*)callocCheck(nchunks, sizeof(TokenVec));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
    for (long k = 0; k < (long)nchunks; k++) {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        TokenVec v = {0}; // a local vector: neighbouring parts[] share cache lines (false sharing)
        encoder_encode(e, &scratch[tid], text + cut[k], cut[k + 1] - cut[k], &v);
        parts[k] = v;
    }
    for (size_t k = 0; k < nchunks; k++) {
        tokenvec_reserve(out, parts[k].len);
        memcpy(out->data + out->len, parts[k].data, parts[k].len * sizeof(uint32_t));
        out->len += parts[k].len;
        tokenvec_free(&parts[k]);
    }
    free(parts);
    free(cut);
}

// ----------------------------------------------------------------------------
// decoding and export

// The bytes of token id (length in *len), or NULL for an id outside the vocabulary.
static const uint8_t* encoder_token_bytes(const Encoder* e, uint32_t id, size_t* len) {
    if (id >= e->vocab_size) { *len = 0; return NULL; }
    *len = e->token_offset[id + 1] - e->token_offset[id];
    return e->token_bytes + e->token_offset[id];
}

// Decodes ids into bytes appended to *buf (malloc'd, grown as needed; *len updated). Returns 0, or the index + 1
// of the first id outside the vocabulary (nothing is appended for it).
static size_t encoder_decode(const Encoder* e, const uint32_t* ids, size_t n, uint8_t** buf, size_t* len, size_t* cap) {
    for (size_t i = 0; i < n; i++) {
        size_t tl;
        const uint8_t* tb = encoder_token_bytes(e, ids[i], &tl);
        if (tb == NULL) { return i + 1; }
        if (*len + tl > *cap) {
            size_t nc = *cap ? *cap : 4096;
            while (nc < *len + tl) { nc = mulSize(nc, 2); }
            uint8_t* nb = (uint8_t*)realloc(*buf, nc);
            if (nb == NULL) { fatal("out of memory decoding %zu ids", n); }
            *buf = nb;
            *cap = nc;
        }
        memcpy(*buf + *len, tb, tl);
        *len += tl;
    }
    return 0;
}

// The decoder of part 1 for this vocabulary, without a gpt2_tokenizer.bin file: the trainer prints what --prompt
// samples continue with the Encoder it encoded the prompt with.
static void tokenizer_from_encoder(Tokenizer* t, const Encoder* e) {
    memset(t, 0, sizeof(*t));
    t->vocab_size = e->vocab_size;
    t->eot_token = e->eot_token;
    size_t total = e->token_offset[e->vocab_size];
    t->token_bytes = (char*)mallocCheck(total + e->vocab_size);
    t->token_offset = (uint32_t*)mallocCheck(sizeof(uint32_t) * e->vocab_size);
    t->token_length = (uint8_t*)mallocCheck(e->vocab_size);
    size_t at = 0;
    for (uint32_t id = 0; id < e->vocab_size; id++) {
        size_t len;
        const uint8_t* b = encoder_token_bytes(e, id, &len); // (at most 255 bytes: checked when encoder.json loads)
        t->token_offset[id] = (uint32_t)at;
        t->token_length[id] = (uint8_t)len;
        memcpy(t->token_bytes + at, b, len);
        t->token_bytes[at + len] = '\0';
        at += len + 1;
    }
    t->init_ok = 1;
}

// Writes llm.c's gpt2_tokenizer.bin (version 2) for this vocabulary, atomically (exits on I/O errors).
static void encoder_write_bin(const Encoder* e, const char* path) {
    uint32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = TOKENIZER_BIN_MAGIC;
    header[1] = 2;
    header[2] = e->vocab_size;
    header[3] = e->eot_token;
    AtomicFile af;
    atomic_open(&af, path);
    fwriteCheck(header, sizeof(uint32_t), 256, af.fp, path);
    for (uint32_t id = 0; id < e->vocab_size; id++) {
        size_t len;
        const uint8_t* b = encoder_token_bytes(e, id, &len);
        if (len == 0 || len > 255) {
            atomic_abort(&af);
            fatal("cannot write '%s': token %u has %zu bytes (the format allows 1..255)", path, id, len);
        }
        uint8_t l8 = (uint8_t)len;
        fwriteCheck(&l8, 1, 1, af.fp, path);
        fwriteCheck(b, 1, len, af.fp, path);
    }
    atomic_commit(&af);
}

#endif // TOKENIZER_ENCODER
#endif // TOKENIZER_H
