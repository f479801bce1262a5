/*
parquet.h: reads the values of one string column of a parquet file held in memory (parquet_text, fuzz/parquet.c).
Self-contained: the thrift compact protocol, the RLE/bit-packed hybrid, PLAIN and dictionary encodings, and a
snappy decoder are all here; GZIP goes through zlib when it was found at build time (else define NO_ZLIB).

  int pq_read_column(const uint8_t* file, size_t size, const char* name, const char* column,
                     pq_value_fn fn, void* user, char* err, size_t err_size);

calls fn(user, bytes, length) for every non-null value of the top-level BYTE_ARRAY column `column`, in file
order, and returns PQ_OK; PQ_STOPPED when fn returned non-zero (the caller asked to stop); PQ_ERROR with
"NAME: <what>" in err for anything it refuses: a malformed file (every read is bounds-checked, nothing is
trusted), or a valid one using what this reader does not implement (ZSTD, LZ4, BROTLI, LZO codecs; DELTA and
BYTE_STREAM_SPLIT encodings; nested or repeated columns), named with the column and the codec or encoding.

Only static functions: any translation unit may include it.

--- The format, briefly (what the code below relies on) -------------------------------------------------------
A file is "PAR1", the column chunks, the footer (FileMetaData), the footer's length (uint32 LE), "PAR1". The
footer is a thrift struct in the compact protocol: the schema (a flattened tree, root first, each element
followed by its children), then the row groups; each row group holds one column chunk per leaf column, with the
chunk's codec, value count and byte range. Reading starts at the end because the writer only knows the
metadata after writing the data.

A column chunk is a sequence of pages, each a thrift PageHeader followed by its (compressed) payload: at most
one dictionary page first (the distinct values, PLAIN), then data pages. Writers such as pyarrow try dictionary
encoding first and fall back to PLAIN pages when the dictionary grows too large, so one chunk can hold both.
  data page v1: the whole payload is compressed; inside: definition levels (4-byte length + RLE hybrid) when the
                column is optional, then the values.
  data page v2: the levels come first, uncompressed, with their lengths in the header; only the values are
                compressed (unless is_compressed is false).
Definition levels say which rows are null (level 0) for an optional column (level 1 = present). Values are
PLAIN (uint32 LE length + bytes each) or dictionary indices: one byte of bit width, then the RLE/bit-packed
hybrid (runs of one repeated value, or groups of 8 values bit-packed LSB first).
*/
#ifndef PARQUET_H
#define PARQUET_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef NO_ZLIB
#include <zlib.h>
#endif

enum { PQ_OK = 0, PQ_ERROR = 1, PQ_STOPPED = 2 };
// when set, every column chunk and page read is described there, one line each (parquet_text --pages)
static FILE* pq_trace;
typedef int (*pq_value_fn)(void* user, const uint8_t* value, size_t len);

// a decompressed page may not be larger than this (pyarrow writes pages of ~1 MB; dictionaries up to 1 MB)
#ifndef PQ_MAX_PAGE
#define PQ_MAX_PAGE ((int64_t)1 << 30)
#endif
#define PQ_MAX_DEPTH 32 // nesting of thrift structs and lists (a real footer uses 4-5)

// ----------------------------------------------------------------------------
// names of the format's enums, for messages

static const char* pq__codec_name(int64_t c) {
    static const char* names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return c >= 0 && c < 8 ? names[c] : "unknown";
}
static const char* pq__encoding_name(int64_t e) {
    static const char* names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
                                  "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return e >= 0 && e < 10 ? names[e] : "unknown";
}
static const char* pq__type_name(int64_t t) {
    static const char* names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return t >= 0 && t < 8 ? names[t] : "unknown";
}
enum { PQ__PLAIN = 0, PQ__PLAIN_DICTIONARY = 2, PQ__RLE = 3, PQ__RLE_DICTIONARY = 8 };
enum { PQ__UNCOMPRESSED = 0, PQ__SNAPPY = 1, PQ__GZIP = 2 };
enum { PQ__DATA_PAGE = 0, PQ__INDEX_PAGE = 1, PQ__DICTIONARY_PAGE = 2, PQ__DATA_PAGE_V2 = 3 };
enum { PQ__BYTE_ARRAY = 6 };

// ----------------------------------------------------------------------------
// the reader's state: errors longjmp to pq_read_column, which frees what the state owns

typedef struct {
    int64_t codec, num_values, data_off, dict_off, size; // from ColumnMetaData
    int has_dict_off, has_path;
} PqChunk;

typedef struct {
    const uint8_t* file;
    size_t size;
    const char* name;
    const char* column;
    jmp_buf jmp;
    char* err;
    size_t err_size;
    int max_def; // 1: optional column (definition levels present), 0: required
    // owned buffers (freed on every exit)
    uint8_t* page;  // the decompressed current data page
    size_t page_cap;
    uint8_t* dict_bytes; // the decompressed dictionary page (the dictionary's values point into it)
    const uint8_t** dict_val;
    uint32_t* dict_len;
    int64_t dict_n; // -1: this chunk has no dictionary
    PqChunk* chunks;
    size_t num_chunks, chunks_cap;
    // the callback
    pq_value_fn fn;
    void* user;
} PqCtx;

static void __attribute__((noreturn, format(printf, 2, 3))) pq__fail(PqCtx* c, const char* fmt, ...) {
    int n = snprintf(c->err, c->err_size, "%s: ", c->name);
    if (n >= 0 && (size_t)n < c->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->err_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    longjmp(c->jmp, PQ_ERROR);
}

static void* pq__alloc(PqCtx* c, void* p, size_t n) {
    void* q = realloc(p, n ? n : 1);
    if (!q) { pq__fail(c, "out of memory allocating %zu bytes", n); }
    return q;
}

// ----------------------------------------------------------------------------
// thrift compact protocol: varints (LEB128), zigzag integers, field headers with delta-encoded ids

enum { TC_STOP = 0, TC_TRUE = 1, TC_FALSE = 2, TC_BYTE = 3, TC_I16 = 4, TC_I32 = 5, TC_I64 = 6, TC_DOUBLE = 7,
       TC_BINARY = 8, TC_LIST = 9, TC_SET = 10, TC_MAP = 11, TC_STRUCT = 12 };

typedef struct {
    PqCtx* c;
    const uint8_t* p;
    const uint8_t* end;
    const char* what; // "the footer" or "a page header"
    int depth;
} PqThrift;

static uint8_t tc_byte(PqThrift* t) {
    if (t->p >= t->end) { pq__fail(t->c, "%s is truncated (thrift)", t->what); }
    return *t->p++;
}
static uint64_t tc_varint(PqThrift* t) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b = tc_byte(t);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { return v; }
    }
    pq__fail(t->c, "%s: bad thrift (varint longer than 10 bytes)", t->what);
}
static int64_t tc_i64(PqThrift* t) {
    uint64_t u = tc_varint(t);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}
static int64_t tc_i32(PqThrift* t) {
    int64_t v = tc_i64(t);
    if (v < INT32_MIN || v > INT32_MAX) { pq__fail(t->c, "%s: bad thrift (i32 out of range)", t->what); }
    return v;
}
// a binary/string: its bytes stay in the buffer
static const uint8_t* tc_binary(PqThrift* t, size_t* len) {
    uint64_t n = tc_varint(t);
    if (n > (uint64_t)(t->end - t->p)) { pq__fail(t->c, "%s: bad thrift (string of %llu bytes past the end)", t->what, (unsigned long long)n); }
    const uint8_t* s = t->p;
    t->p += n;
    *len = (size_t)n;
    return s;
}
// a list/set header: the element count (bounded by the bytes left: every element takes at least one, bools too)
static int64_t tc_list(PqThrift* t, int* elem_type) {
    uint8_t h = tc_byte(t);
    uint64_t n = h >> 4;
    if (n == 15) { n = tc_varint(t); }
    *elem_type = h & 15;
    if (n > (uint64_t)(t->end - t->p)) { pq__fail(t->c, "%s: bad thrift (list of %llu elements in %zu bytes)", t->what, (unsigned long long)n, (size_t)(t->end - t->p)); }
    return (int64_t)n;
}
// the next field of a struct: returns its type (TC_STOP at the end) and sets *id; *last carries the previous id
static int tc_field(PqThrift* t, int* last, int* id) {
    uint8_t h = tc_byte(t);
    int type = h & 15;
    if (type == TC_STOP) { return TC_STOP; }
    int delta = h >> 4;
    if (delta) {
        *id = *last + delta;
    } else {
        int64_t v = tc_i64(t); // an i16
        if (v < INT16_MIN || v > INT16_MAX) { pq__fail(t->c, "%s: bad thrift (field id %lld)", t->what, (long long)v); }
        *id = (int)v;
    }
    if (*id > INT16_MAX) { pq__fail(t->c, "%s: bad thrift (field id %d)", t->what, *id); }
    *last = *id;
    if (type > TC_STRUCT) { pq__fail(t->c, "%s: bad thrift (field type %d)", t->what, type); }
    return type;
}

// Skips a value of a type this reader does not look at (unknown fields of newer writers, statistics, ...).
static void tc_skip(PqThrift* t, int type) {
    if (++t->depth > PQ_MAX_DEPTH) { pq__fail(t->c, "%s: bad thrift (nested deeper than %d)", t->what, PQ_MAX_DEPTH); }
    switch (type) {
    case TC_TRUE: case TC_FALSE: break; // the value is in the type (fields); list elements are handled below
    case TC_BYTE: tc_byte(t); break;
    case TC_I16: case TC_I32: case TC_I64: tc_varint(t); break;
    case TC_DOUBLE:
        if (t->end - t->p < 8) { pq__fail(t->c, "%s is truncated (thrift)", t->what); }
        t->p += 8;
        break;
    case TC_BINARY: { size_t n; tc_binary(t, &n); break; }
    case TC_LIST: case TC_SET: {
        int et;
        int64_t n = tc_list(t, &et);
        for (int64_t i = 0; i < n; i++) {
            if (et == TC_TRUE || et == TC_FALSE) { tc_byte(t); } else { tc_skip(t, et); }
        }
        break;
    }
    case TC_MAP: {
        uint64_t n = tc_varint(t);
        if (n > (uint64_t)(t->end - t->p)) { pq__fail(t->c, "%s: bad thrift (map of %llu entries)", t->what, (unsigned long long)n); }
        if (n) {
            uint8_t kv = tc_byte(t);
            for (uint64_t i = 0; i < n; i++) {
                int kt = kv >> 4, vt = kv & 15;
                if (kt == TC_TRUE || kt == TC_FALSE) { tc_byte(t); } else { tc_skip(t, kt); }
                if (vt == TC_TRUE || vt == TC_FALSE) { tc_byte(t); } else { tc_skip(t, vt); }
            }
        }
        break;
    }
    case TC_STRUCT: {
        int last = 0, id, ft;
        while ((ft = tc_field(t, &last, &id)) != TC_STOP) { tc_skip(t, ft); }
        break;
    }
    default: pq__fail(t->c, "%s: bad thrift (type %d)", t->what, type);
    }
    t->depth--;
}

// a field's value as an integer (i32 or i64 fields), with a type check
static int64_t tc_int_field(PqThrift* t, int type, const char* field) {
    if (type == TC_I32 || type == TC_I16 || type == TC_I64) { return type == TC_I64 ? tc_i64(t) : tc_i32(t); }
    if (type == TC_BYTE) { return (int8_t)tc_byte(t); }
    pq__fail(t->c, "%s: bad thrift (%s has type %d, not an integer)", t->what, field, type);
}
static void tc_expect(PqThrift* t, int type, int want, const char* field) {
    if (type != want) { pq__fail(t->c, "%s: bad thrift (%s has type %d, expected %d)", t->what, field, type, want); }
}

// ----------------------------------------------------------------------------
// the footer: the schema (to find the column and whether it is optional) and the column chunks

typedef struct {
    const uint8_t* name;
    size_t name_len;
    int64_t type, repetition, num_children;
    int has_type;
} PqSchemaElem;

static void pq__schema_elem(PqThrift* t, PqSchemaElem* e) {
    memset(e, 0, sizeof(*e));
    e->type = -1;
    e->repetition = 0;
    int last = 0, id, type;
    while ((type = tc_field(t, &last, &id)) != TC_STOP) {
        switch (id) {
        case 1: e->type = tc_int_field(t, type, "SchemaElement.type"); e->has_type = 1; break;
        case 3: e->repetition = tc_int_field(t, type, "SchemaElement.repetition_type"); break;
        case 4: tc_expect(t, type, TC_BINARY, "SchemaElement.name"); e->name = tc_binary(t, &e->name_len); break;
        case 5: e->num_children = tc_int_field(t, type, "SchemaElement.num_children"); break;
        default: tc_skip(t, type);
        }
    }
}

static int pq__is_column(PqCtx* c, const uint8_t* s, size_t n) { return n == strlen(c->column) && memcmp(s, c->column, n) == 0; }

// ColumnMetaData: keeps the chunk when its path is exactly [column]
static void pq__column_meta(PqThrift* t, PqChunk* k) {
    int last = 0, id, type;
    while ((type = tc_field(t, &last, &id)) != TC_STOP) {
        switch (id) {
        case 3: {
            tc_expect(t, type, TC_LIST, "ColumnMetaData.path_in_schema");
            int et;
            int64_t n = tc_list(t, &et);
            int match = n == 1;
            for (int64_t i = 0; i < n; i++) {
                if (et != TC_BINARY) { pq__fail(t->c, "%s: bad thrift (path_in_schema element type %d)", t->what, et); }
                size_t len;
                const uint8_t* s = tc_binary(t, &len);
                match = match && pq__is_column(t->c, s, len);
            }
            k->has_path = match;
            break;
        }
        case 4: k->codec = tc_int_field(t, type, "ColumnMetaData.codec"); break;
        case 5: k->num_values = tc_int_field(t, type, "ColumnMetaData.num_values"); break;
        case 7: k->size = tc_int_field(t, type, "ColumnMetaData.total_compressed_size"); break;
        case 9: k->data_off = tc_int_field(t, type, "ColumnMetaData.data_page_offset"); break;
        case 11: k->dict_off = tc_int_field(t, type, "ColumnMetaData.dictionary_page_offset"); k->has_dict_off = 1; break;
        default: tc_skip(t, type);
        }
    }
}

static void pq__row_group(PqThrift* t) {
    PqCtx* c = t->c;
    int last = 0, id, type;
    while ((type = tc_field(t, &last, &id)) != TC_STOP) {
        if (id != 1) { tc_skip(t, type); continue; }
        tc_expect(t, type, TC_LIST, "RowGroup.columns");
        int et;
        int64_t n = tc_list(t, &et);
        if (et != TC_STRUCT) { pq__fail(c, "%s: bad thrift (RowGroup.columns element type %d)", t->what, et); }
        for (int64_t i = 0; i < n; i++) { // ColumnChunk
            PqChunk k;
            memset(&k, 0, sizeof(k));
            k.codec = k.num_values = k.data_off = k.size = -1;
            int has_meta = 0, external = 0, l2 = 0, id2, ty2;
            while ((ty2 = tc_field(t, &l2, &id2)) != TC_STOP) {
                if (id2 == 1 && ty2 == TC_BINARY) { size_t len; tc_binary(t, &len); external = len > 0; }
                else if (id2 == 3) { tc_expect(t, ty2, TC_STRUCT, "ColumnChunk.meta_data"); pq__column_meta(t, &k); has_meta = 1; }
                else { tc_skip(t, ty2); }
            }
            if (!has_meta || !k.has_path) { continue; }
            if (external) { pq__fail(c, "column %s: the chunk is in another file (ColumnChunk.file_path), not supported", c->column); }
            if (c->num_chunks == c->chunks_cap) {
                c->chunks_cap = c->chunks_cap ? 2 * c->chunks_cap : 16;
                c->chunks = (PqChunk*)pq__alloc(c, c->chunks, c->chunks_cap * sizeof(PqChunk));
            }
            c->chunks[c->num_chunks++] = k;
        }
    }
}

// Parses FileMetaData: finds the column among the schema's top-level fields and collects its chunks.
static void pq__footer(PqCtx* c, const uint8_t* p, size_t n) {
    PqThrift t = {c, p, p + n, "the footer", 0};
    int last = 0, id, type, found = 0;
    char names[512];
    size_t names_len = 0;
    names[0] = '\0';
    while ((type = tc_field(&t, &last, &id)) != TC_STOP) {
        if (id == 2) { // schema: root first, then a pre-order walk; top-level fields are the root's children
            tc_expect(&t, type, TC_LIST, "FileMetaData.schema");
            int et;
            int64_t n_el = tc_list(&t, &et);
            if (et != TC_STRUCT || n_el < 1) { pq__fail(c, "the footer: bad schema (%lld elements of type %d)", (long long)n_el, et); }
            PqSchemaElem root, e;
            pq__schema_elem(&t, &root);
            int64_t pending = 0; // elements still to skip under the current top-level field (its descendants)
            for (int64_t i = 1; i < n_el; i++) {
                pq__schema_elem(&t, &e);
                if (pending > 0) { pending += e.num_children - 1; continue; }
                if (e.num_children < 0 || e.num_children > n_el) { pq__fail(c, "the footer: bad schema (%lld children)", (long long)e.num_children); }
                pending = e.num_children;
                if (names_len + e.name_len + 3 < sizeof(names)) { // the names as printable text: the message is one line
                    if (names_len) { names[names_len++] = ','; names[names_len++] = ' '; }
                    for (size_t j = 0; j < e.name_len; j++) { names[names_len++] = e.name[j] < 0x20 || e.name[j] == 0x7f ? '?' : (char)e.name[j]; }
                    names[names_len] = '\0';
                }
                if (!pq__is_column(c, e.name, e.name_len)) { continue; }
                found = 1;
                if (e.num_children > 0) { pq__fail(c, "column %s is a group (nested), not a string column", c->column); }
                if (e.type != PQ__BYTE_ARRAY) { pq__fail(c, "column %s has type %s, not BYTE_ARRAY (a string)", c->column, pq__type_name(e.type)); }
                if (e.repetition == 2) { pq__fail(c, "column %s is repeated (a list), not supported", c->column); }
                if (e.repetition != 0 && e.repetition != 1) { pq__fail(c, "column %s: bad repetition type %lld", c->column, (long long)e.repetition); }
                c->max_def = e.repetition == 1;
            }
        } else if (id == 4) {
            tc_expect(&t, type, TC_LIST, "FileMetaData.row_groups");
            int et;
            int64_t n_rg = tc_list(&t, &et);
            if (et != TC_STRUCT) { pq__fail(c, "the footer: bad thrift (row_groups element type %d)", et); }
            for (int64_t i = 0; i < n_rg; i++) { pq__row_group(&t); }
        } else {
            tc_skip(&t, type);
        }
    }
    if (!found) { pq__fail(c, "no column '%s' (the file has: %s)", c->column, names); }
}

// ----------------------------------------------------------------------------
// decompression

// Snappy (raw, as parquet stores it): a varint of the uncompressed length, then elements. The low 2 bits of a tag
// byte say which: 00 a literal (its length in the tag, or in 1-4 following bytes), 01/10/11 a copy of earlier
// output at an offset of 11/16/32 bits. A copy may overlap its own output (offset < length repeats a pattern).
static void pq__snappy(PqCtx* c, const uint8_t* src, size_t n, uint8_t* dst, size_t want) {
    const uint8_t* end = src + n;
    uint64_t len = 0;
    for (int shift = 0;; shift += 7) {
        if (src >= end || shift > 28) { pq__fail(c, "column %s: bad snappy data (length header)", c->column); }
        len |= (uint64_t)(*src & 0x7f) << shift;
        if (!(*src++ & 0x80)) { break; }
    }
    if (len != want) { pq__fail(c, "column %s: snappy data of %llu bytes, the page header says %zu", c->column, (unsigned long long)len, want); }
    size_t o = 0;
    while (src < end) {
        uint8_t tag = *src++;
        size_t l, off;
        if ((tag & 3) == 0) {
            l = tag >> 2;
            if (l >= 60) {
                size_t nb = l - 59;
                if ((size_t)(end - src) < nb) { pq__fail(c, "column %s: bad snappy data (truncated literal)", c->column); }
                l = 0;
                for (size_t i = 0; i < nb; i++) { l |= (size_t)src[i] << (8 * i); }
                src += nb;
            }
            l += 1;
            if ((size_t)(end - src) < l || want - o < l) { pq__fail(c, "column %s: bad snappy data (literal of %zu bytes out of range)", c->column, l); }
            memcpy(dst + o, src, l);
            src += l;
            o += l;
            continue;
        }
        if ((tag & 3) == 1) {
            if (src >= end) { pq__fail(c, "column %s: bad snappy data (truncated copy)", c->column); }
            l = 4 + ((tag >> 2) & 7);
            off = ((size_t)(tag >> 5) << 8) | *src++;
        } else if ((tag & 3) == 2) {
            if (end - src < 2) { pq__fail(c, "column %s: bad snappy data (truncated copy)", c->column); }
            l = (size_t)(tag >> 2) + 1;
            off = (size_t)src[0] | (size_t)src[1] << 8;
            src += 2;
        } else {
            if (end - src < 4) { pq__fail(c, "column %s: bad snappy data (truncated copy)", c->column); }
            l = (size_t)(tag >> 2) + 1;
            off = (size_t)src[0] | (size_t)src[1] << 8 | (size_t)src[2] << 16 | (size_t)src[3] << 24;
            src += 4;
        }
        if (off == 0 || off > o) { pq__fail(c, "column %s: bad snappy data (copy offset %zu with %zu bytes written)", c->column, off, o); }
        if (want - o < l) { pq__fail(c, "column %s: bad snappy data (copy past the page's %zu bytes)", c->column, want); }
        if (off >= l) {
            memcpy(dst + o, dst + o - off, l);
        } else {
            for (size_t i = 0; i < l; i++) { dst[o + i] = dst[o + i - off]; }
        }
        o += l;
    }
    if (o != want) { pq__fail(c, "column %s: snappy data decodes to %zu bytes, the page header says %zu", c->column, o, want); }
}

// Decompresses a payload into exactly `want` bytes.
static void pq__decompress(PqCtx* c, int64_t codec, const uint8_t* src, size_t n, uint8_t* dst, size_t want) {
    if (codec == PQ__UNCOMPRESSED) {
        if (n != want) { pq__fail(c, "column %s: uncompressed page of %zu bytes, the header says %zu", c->column, n, want); }
        memcpy(dst, src, n);
    } else if (codec == PQ__SNAPPY) {
        pq__snappy(c, src, n, dst, want);
    } else if (codec == PQ__GZIP) {
#ifdef NO_ZLIB
        (void)src; (void)dst;
        pq__fail(c, "column %s: codec GZIP needs zlib, which this build of parquet_text was made without", c->column);
#else
        z_stream z;
        memset(&z, 0, sizeof(z));
        if (inflateInit2(&z, 15 + 32) != Z_OK) { pq__fail(c, "column %s: zlib: inflateInit2 failed", c->column); } // 15+32: gzip or zlib header
        size_t o = 0;
        int rc = Z_OK;
        z.next_in = (Bytef*)src;
        z.avail_in = (uInt)n;
        if (n > UINT32_MAX || want > UINT32_MAX) { inflateEnd(&z); pq__fail(c, "column %s: gzip page too large", c->column); }
        while (rc == Z_OK && o < want) {
            z.next_out = dst + o;
            z.avail_out = (uInt)(want - o);
            rc = inflate(&z, Z_NO_FLUSH);
            o = want - z.avail_out;
            // several gzip members back to back: start the next one
            if (rc == Z_STREAM_END && o < want && z.avail_in > 0) { rc = inflateReset(&z); }
        }
        int left_over = z.avail_in > 0 && rc != Z_STREAM_END;
        inflateEnd(&z);
        if ((rc != Z_OK && rc != Z_STREAM_END) || o != want || left_over) {
            pq__fail(c, "column %s: bad gzip data (zlib status %d, %zu of %zu bytes)", c->column, rc, o, want);
        }
#endif
    } else {
        pq__fail(c, "column %s: codec %s (%lld) is not supported (only UNCOMPRESSED, SNAPPY, GZIP)", c->column, pq__codec_name(codec), (long long)codec);
    }
}

// ----------------------------------------------------------------------------
// the RLE/bit-packed hybrid (definition levels, dictionary indices)

typedef struct {
    const uint8_t* p;
    const uint8_t* end;
    const uint8_t* next; // where the next run starts (after a bit-packed one)
    int width;
    int64_t run;      // values left in the current run
    int packed;       // the run is bit-packed (else: RLE, `value` repeated)
    uint32_t value;
    uint64_t bitpos;  // bit-packed: position in bits from p
} PqRle;

static void pq__rle_init(PqRle* r, const uint8_t* p, const uint8_t* end, int width) {
    memset(r, 0, sizeof(*r));
    r->p = p;
    r->end = end;
    r->width = width;
}

// Starts the next run; 0 at the end of the data.
static int pq__rle_next_run(PqCtx* c, PqRle* r) {
    if (r->packed) { r->p = r->next; } // a bit-packed run is whole groups of 8 values: it ends on a byte boundary
    r->packed = 0;
    r->bitpos = 0;
    if (r->p >= r->end) { return 0; }
    uint64_t h = 0;
    for (int shift = 0;; shift += 7) {
        if (r->p >= r->end || shift > 35) { pq__fail(c, "column %s: bad RLE data (run header)", c->column); }
        h |= (uint64_t)(*r->p & 0x7f) << shift;
        if (!(*r->p++ & 0x80)) { break; }
    }
    if (h & 1) { // bit-packed: h>>1 groups of 8 values, width bytes per group
        uint64_t bytes = (h >> 1) * (uint64_t)r->width;
        if (bytes > (uint64_t)(r->end - r->p)) {
            // the last group of a page may be cut short by writers; keep what is there
            bytes = (uint64_t)(r->end - r->p);
        }
        r->packed = 1;
        r->next = r->p + bytes;
        r->run = r->width ? (int64_t)(bytes * 8 / (uint64_t)r->width) : (int64_t)((h >> 1) * 8);
        if (r->run == 0) { pq__fail(c, "column %s: bad RLE data (empty bit-packed run)", c->column); }
    } else {
        int nb = (r->width + 7) / 8;
        if (r->end - r->p < nb) { pq__fail(c, "column %s: bad RLE data (truncated run value)", c->column); }
        uint32_t v = 0;
        for (int i = 0; i < nb; i++) { v |= (uint32_t)r->p[i] << (8 * i); }
        r->p += nb;
        r->value = v;
        r->run = (int64_t)(h >> 1);
        if (r->run == 0) { pq__fail(c, "column %s: bad RLE data (empty run)", c->column); }
    }
    return 1;
}

static uint32_t pq__rle_packed_value(PqRle* r) {
    uint32_t v = 0;
    for (int b = 0; b < r->width; b++, r->bitpos++) {
        v |= (uint32_t)((r->p[r->bitpos >> 3] >> (r->bitpos & 7)) & 1) << b;
    }
    return v;
}

// ----------------------------------------------------------------------------
// pages

typedef struct {
    int64_t type, usize, csize;
    int64_t num_values, encoding, def_encoding, num_nulls;
    int64_t def_len, rep_len; // v2
    int is_compressed;        // v2 (default true)
    int has_data, has_dict, has_v2;
} PqPage;

static void pq__page_sub(PqThrift* t, PqPage* pg, int which) {
    int last = 0, id, type;
    while ((type = tc_field(t, &last, &id)) != TC_STOP) {
        if (which == 5) { // DataPageHeader
            if (id == 1) { pg->num_values = tc_int_field(t, type, "DataPageHeader.num_values"); }
            else if (id == 2) { pg->encoding = tc_int_field(t, type, "DataPageHeader.encoding"); }
            else if (id == 3) { pg->def_encoding = tc_int_field(t, type, "DataPageHeader.definition_level_encoding"); }
            else { tc_skip(t, type); }
        } else if (which == 7) { // DictionaryPageHeader
            if (id == 1) { pg->num_values = tc_int_field(t, type, "DictionaryPageHeader.num_values"); }
            else if (id == 2) { pg->encoding = tc_int_field(t, type, "DictionaryPageHeader.encoding"); }
            else { tc_skip(t, type); }
        } else { // DataPageHeaderV2
            if (id == 1) { pg->num_values = tc_int_field(t, type, "DataPageHeaderV2.num_values"); }
            else if (id == 2) { pg->num_nulls = tc_int_field(t, type, "DataPageHeaderV2.num_nulls"); }
            else if (id == 4) { pg->encoding = tc_int_field(t, type, "DataPageHeaderV2.encoding"); }
            else if (id == 5) { pg->def_len = tc_int_field(t, type, "DataPageHeaderV2.definition_levels_byte_length"); }
            else if (id == 6) { pg->rep_len = tc_int_field(t, type, "DataPageHeaderV2.repetition_levels_byte_length"); }
            else if (id == 7 && (type == TC_TRUE || type == TC_FALSE)) { pg->is_compressed = type == TC_TRUE; }
            else { tc_skip(t, type); }
        }
    }
}

// Parses a PageHeader at p (at most up to end); returns the header's length.
static size_t pq__page_header(PqCtx* c, const uint8_t* p, const uint8_t* end, PqPage* pg) {
    memset(pg, 0, sizeof(*pg));
    pg->type = pg->usize = pg->csize = pg->num_values = pg->encoding = -1;
    pg->def_encoding = PQ__RLE;
    pg->is_compressed = 1;
    PqThrift t = {c, p, end, "a page header", 0};
    int last = 0, id, type;
    while ((type = tc_field(&t, &last, &id)) != TC_STOP) {
        switch (id) {
        case 1: pg->type = tc_int_field(&t, type, "PageHeader.type"); break;
        case 2: pg->usize = tc_int_field(&t, type, "PageHeader.uncompressed_page_size"); break;
        case 3: pg->csize = tc_int_field(&t, type, "PageHeader.compressed_page_size"); break;
        case 5: case 7: case 8:
            tc_expect(&t, type, TC_STRUCT, "PageHeader's page header");
            pq__page_sub(&t, pg, id);
            if (id == 5) { pg->has_data = 1; } else if (id == 7) { pg->has_dict = 1; } else { pg->has_v2 = 1; }
            break;
        default: tc_skip(&t, type);
        }
    }
    if (pg->usize < 0 || pg->csize < 0) { pq__fail(c, "column %s: a page header without sizes (or negative ones)", c->column); }
    if (pg->usize > PQ_MAX_PAGE) { pq__fail(c, "column %s: a page of %lld bytes (limit %lld)", c->column, (long long)pg->usize, (long long)PQ_MAX_PAGE); }
    return (size_t)(t.p - p);
}

static void pq__reserve_page(PqCtx* c, size_t n) {
    if (n > c->page_cap) {
        c->page = (uint8_t*)pq__alloc(c, c->page, n);
        c->page_cap = n;
    }
}

// Checks that a payload can decompress to usize bytes at all (snappy expands at most ~22x, deflate ~1032x), so
// that a tiny corrupt page cannot make the reader allocate a gigabyte.
static void pq__check_ratio(PqCtx* c, int64_t codec, int64_t csize, int64_t usize) {
    int64_t most = codec == PQ__SNAPPY ? 22 * csize + 16 : codec == PQ__GZIP ? 1040 * csize + 64 : csize;
    if (codec != PQ__UNCOMPRESSED && codec != PQ__SNAPPY && codec != PQ__GZIP) { return; } // refused later, by name
    if (usize > most) { pq__fail(c, "column %s: a page of %lld bytes cannot decompress to %lld (%s)", c->column, (long long)csize, (long long)usize, pq__codec_name(codec)); }
}

// Reads a PLAIN BYTE_ARRAY value at *p (bounded by end): uint32 LE length, then the bytes.
static const uint8_t* pq__plain_value(PqCtx* c, const uint8_t** p, const uint8_t* end, uint32_t* len) {
    if (end - *p < 4) { pq__fail(c, "column %s: PLAIN value truncated (length)", c->column); }
    uint32_t n = (uint32_t)(*p)[0] | (uint32_t)(*p)[1] << 8 | (uint32_t)(*p)[2] << 16 | (uint32_t)(*p)[3] << 24;
    *p += 4;
    if ((uint64_t)n > (uint64_t)(end - *p)) { pq__fail(c, "column %s: PLAIN value of %u bytes, %zu left in the page", c->column, n, (size_t)(end - *p)); }
    const uint8_t* v = *p;
    *p += n;
    *len = n;
    return v;
}

static void pq__emit(PqCtx* c, const uint8_t* v, size_t n) {
    if (c->fn(c->user, v, n)) { longjmp(c->jmp, PQ_STOPPED); }
}

// The dictionary page: PLAIN values, kept (pointers into dict_bytes) for the data pages of this chunk.
static void pq__dictionary(PqCtx* c, const PqPage* pg, int64_t codec, const uint8_t* payload) {
    if (c->dict_n >= 0) { pq__fail(c, "column %s: a second dictionary page in one column chunk", c->column); }
    if (pg->encoding != PQ__PLAIN && pg->encoding != PQ__PLAIN_DICTIONARY) {
        pq__fail(c, "column %s: dictionary page encoding %s (%lld) is not supported", c->column, pq__encoding_name(pg->encoding), (long long)pg->encoding);
    }
    if (pg->num_values < 0 || pg->num_values > pg->usize / 4) { pq__fail(c, "column %s: dictionary of %lld values in %lld bytes", c->column, (long long)pg->num_values, (long long)pg->usize); }
    c->dict_bytes = (uint8_t*)pq__alloc(c, c->dict_bytes, (size_t)pg->usize);
    pq__decompress(c, codec, payload, (size_t)pg->csize, c->dict_bytes, (size_t)pg->usize);
    c->dict_val = (const uint8_t**)pq__alloc(c, (void*)c->dict_val, (size_t)pg->num_values * sizeof(*c->dict_val));
    c->dict_len = (uint32_t*)pq__alloc(c, c->dict_len, (size_t)pg->num_values * sizeof(*c->dict_len));
    const uint8_t* p = c->dict_bytes;
    const uint8_t* end = c->dict_bytes + pg->usize;
    for (int64_t i = 0; i < pg->num_values; i++) { c->dict_val[i] = pq__plain_value(c, &p, end, &c->dict_len[i]); }
    c->dict_n = pg->num_values;
}

// The values of one data page (after the levels): `present` non-null values, PLAIN or dictionary indices.
typedef struct {
    int dict;
    const uint8_t* p;
    const uint8_t* end;
    PqRle idx;
} PqValues;

static void pq__values_init(PqCtx* c, PqValues* v, int64_t encoding, const uint8_t* p, const uint8_t* end) {
    memset(v, 0, sizeof(*v));
    v->p = p;
    v->end = end;
    if (encoding == PQ__PLAIN) { return; }
    if (encoding != PQ__PLAIN_DICTIONARY && encoding != PQ__RLE_DICTIONARY) {
        pq__fail(c, "column %s: encoding %s (%lld) is not supported (only PLAIN and dictionary)", c->column, pq__encoding_name(encoding), (long long)encoding);
    }
    if (c->dict_n < 0) { pq__fail(c, "column %s: a dictionary-encoded page without a dictionary page", c->column); }
    v->dict = 1;
    if (p >= end) { pq__fail(c, "column %s: dictionary indices truncated (bit width)", c->column); }
    int width = *p;
    if (width > 32) { pq__fail(c, "column %s: dictionary index bit width %d", c->column, width); }
    pq__rle_init(&v->idx, p + 1, end, width);
}

// Emits the next `count` values of the page.
static void pq__values_emit(PqCtx* c, PqValues* v, int64_t count) {
    while (count > 0) {
        if (!v->dict) {
            uint32_t len;
            const uint8_t* s = pq__plain_value(c, &v->p, v->end, &len);
            pq__emit(c, s, len);
            count--;
            continue;
        }
        if (v->idx.run == 0 && !pq__rle_next_run(c, &v->idx)) { pq__fail(c, "column %s: dictionary indices end before the page's values", c->column); }
        uint32_t i = v->idx.packed ? pq__rle_packed_value(&v->idx) : v->idx.value;
        if ((int64_t)i >= c->dict_n) { pq__fail(c, "column %s: dictionary index %u out of range (%lld values)", c->column, i, (long long)c->dict_n); }
        pq__emit(c, c->dict_val[i], c->dict_len[i]);
        v->idx.run--;
        count--;
    }
}

// One data page (v1 or v2): walks the definition levels, emitting the values of the rows that are present.
static void pq__data_page(PqCtx* c, const PqPage* pg, int64_t codec, const uint8_t* payload) {
    int v2 = pg->type == PQ__DATA_PAGE_V2;
    if (v2 ? !pg->has_v2 : !pg->has_data) { pq__fail(c, "column %s: a data page without its header", c->column); }
    if (pg->num_values < 0) { pq__fail(c, "column %s: a data page of %lld values", c->column, (long long)pg->num_values); }
    const uint8_t *levels, *lev_end, *vals, *vals_end;
    if (!v2) { // everything compressed together
        pq__reserve_page(c, (size_t)pg->usize);
        pq__decompress(c, codec, payload, (size_t)pg->csize, c->page, (size_t)pg->usize);
        const uint8_t* p = c->page;
        const uint8_t* end = c->page + pg->usize;
        levels = lev_end = p;
        if (c->max_def > 0) {
            if (pg->def_encoding != PQ__RLE) { pq__fail(c, "column %s: definition level encoding %s is not supported", c->column, pq__encoding_name(pg->def_encoding)); }
            if (end - p < 4) { pq__fail(c, "column %s: definition levels truncated (length)", c->column); }
            uint32_t n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            p += 4;
            if (n > (uint64_t)(end - p)) { pq__fail(c, "column %s: definition levels of %u bytes, %zu left in the page", c->column, n, (size_t)(end - p)); }
            levels = p;
            lev_end = p + n;
            p += n;
        }
        vals = p;
        vals_end = end;
    } else { // levels uncompressed, then the (maybe compressed) values
        if (pg->def_len < 0 || pg->rep_len < 0 || pg->def_len + pg->rep_len > pg->csize || pg->def_len + pg->rep_len > pg->usize) {
            pq__fail(c, "column %s: level lengths %lld + %lld do not fit the page", c->column, (long long)pg->rep_len, (long long)pg->def_len);
        }
        if (pg->rep_len > 0) { pq__fail(c, "column %s: repetition levels in a non-repeated column", c->column); }
        if (c->max_def == 0 && pg->def_len > 0) { pq__fail(c, "column %s: definition levels in a required column", c->column); }
        levels = payload;
        lev_end = payload + pg->def_len;
        size_t cvals = (size_t)(pg->csize - pg->def_len), uvals = (size_t)(pg->usize - pg->def_len);
        pq__reserve_page(c, uvals);
        pq__decompress(c, pg->is_compressed ? codec : PQ__UNCOMPRESSED, payload + pg->def_len, cvals, c->page, uvals);
        vals = c->page;
        vals_end = c->page + uvals;
    }
    PqValues v;
    pq__values_init(c, &v, pg->encoding, vals, vals_end);
    if (c->max_def == 0) {
        pq__values_emit(c, &v, pg->num_values);
        return;
    }
    PqRle def;
    pq__rle_init(&def, levels, lev_end, 1);
    int64_t left = pg->num_values;
    while (left > 0) {
        if (def.run == 0 && !pq__rle_next_run(c, &def)) { pq__fail(c, "column %s: definition levels end before the page's %lld values", c->column, (long long)pg->num_values); }
        if (!def.packed) { // a run of nulls is skipped at once, a run of present values emitted
            int64_t n = def.run < left ? def.run : left;
            if (def.value > 1) { pq__fail(c, "column %s: definition level %u (max 1)", c->column, def.value); }
            if (def.value == 1) { pq__values_emit(c, &v, n); }
            def.run -= n;
            left -= n;
        } else {
            uint32_t d = pq__rle_packed_value(&def);
            if (d) { pq__values_emit(c, &v, 1); }
            def.run--;
            left--;
        }
    }
}

// Reads every page of one column chunk.
static void pq__chunk(PqCtx* c, const PqChunk* k, size_t data_end) {
    if (k->codec < 0 || k->num_values < 0 || k->data_off < 0 || k->size < 0) { pq__fail(c, "column %s: a column chunk without codec, value count, offset or size", c->column); }
    if (k->codec != PQ__UNCOMPRESSED && k->codec != PQ__SNAPPY && k->codec != PQ__GZIP) {
        pq__fail(c, "column %s: codec %s (%lld) is not supported (only UNCOMPRESSED, SNAPPY, GZIP)", c->column, pq__codec_name(k->codec), (long long)k->codec);
    }
#ifdef NO_ZLIB
    if (k->codec == PQ__GZIP) { pq__fail(c, "column %s: codec GZIP needs zlib, which this build of parquet_text was made without", c->column); }
#endif
    // the chunk starts at its dictionary page when it has one (some writers leave dictionary_page_offset 0)
    int64_t start = k->data_off;
    if (k->has_dict_off && k->dict_off > 0 && k->dict_off < start) { start = k->dict_off; }
    if (start < 4 || (uint64_t)start > data_end || (uint64_t)k->size > data_end - (uint64_t)start) {
        pq__fail(c, "column %s: column chunk at %lld of %lld bytes is outside the data (%zu bytes)", c->column, (long long)start, (long long)k->size, data_end);
    }
    const uint8_t* p = c->file + start;
    const uint8_t* end = p + k->size;
    c->dict_n = -1;
    if (pq_trace) { fprintf(pq_trace, "chunk: column %s, codec %s, %lld values, bytes %lld..%lld\n", c->column, pq__codec_name(k->codec), (long long)k->num_values, (long long)start, (long long)(start + k->size)); }
    int64_t seen = 0;
    while (seen < k->num_values) {
        if (p >= end) { pq__fail(c, "column %s: the column chunk ends after %lld of its %lld values", c->column, (long long)seen, (long long)k->num_values); }
        PqPage pg;
        p += pq__page_header(c, p, end, &pg);
        if ((uint64_t)pg.csize > (uint64_t)(end - p)) { pq__fail(c, "column %s: a page of %lld bytes overruns the column chunk (%zu bytes left)", c->column, (long long)pg.csize, (size_t)(end - p)); }
        if (pq_trace) {
            static const char* types[] = {"DATA_PAGE", "INDEX_PAGE", "DICTIONARY_PAGE", "DATA_PAGE_V2"};
            fprintf(pq_trace, "page: %s, encoding %s, %lld values, %lld -> %lld bytes%s\n", pg.type >= 0 && pg.type < 4 ? types[pg.type] : "unknown",
                    pq__encoding_name(pg.encoding), (long long)pg.num_values, (long long)pg.csize, (long long)pg.usize,
                    pg.type == PQ__DATA_PAGE_V2 && !pg.is_compressed ? ", values not compressed (is_compressed false)" : "");
        }
        if (pg.type == PQ__DICTIONARY_PAGE) {
            if (!pg.has_dict) { pq__fail(c, "column %s: a dictionary page without its header", c->column); }
            pq__check_ratio(c, k->codec, pg.csize, pg.usize);
            pq__dictionary(c, &pg, k->codec, p);
        } else if (pg.type == PQ__DATA_PAGE || pg.type == PQ__DATA_PAGE_V2) {
            pq__check_ratio(c, pg.type == PQ__DATA_PAGE_V2 && !pg.is_compressed ? PQ__UNCOMPRESSED : k->codec, pg.csize, pg.usize);
            pq__data_page(c, &pg, k->codec, p);
            if (pg.num_values > k->num_values - seen) { pq__fail(c, "column %s: pages hold more values than the chunk's %lld", c->column, (long long)k->num_values); }
            seen += pg.num_values;
        } else if (pg.type != PQ__INDEX_PAGE) {
            pq__fail(c, "column %s: page type %lld", c->column, (long long)pg.type);
        }
        p += pg.csize;
    }
}

// ----------------------------------------------------------------------------
// the entry point

static int pq_read_column(const uint8_t* file, size_t size, const char* name, const char* column, pq_value_fn fn, void* user, char* err, size_t err_size) {
    // on the heap, so that what the parse changed is certainly in memory after longjmp returns here
    PqCtx* c = (PqCtx*)calloc(1, sizeof(PqCtx));
    if (!c) { snprintf(err, err_size, "%s: out of memory", name); return PQ_ERROR; }
    c->file = file;
    c->size = size;
    c->name = name;
    c->column = column;
    c->err = err;
    c->err_size = err_size;
    c->fn = fn;
    c->user = user;
    c->dict_n = -1;
    if (err_size) { err[0] = '\0'; }
    int rc = setjmp(c->jmp);
    if (rc == 0) {
        if (size < 12) { pq__fail(c, "not a parquet file (%zu bytes, too short)", size); }
        if (memcmp(file, "PAR1", 4) != 0) { pq__fail(c, "not a parquet file (no PAR1 at the start)"); }
        if (memcmp(file + size - 4, "PAR1", 4) != 0) {
            pq__fail(c, memcmp(file + size - 4, "PARE", 4) == 0 ? "encrypted parquet (PARE) is not supported" : "no PAR1 at the end (truncated or not a parquet file)");
        }
        const uint8_t* f = file + size - 8;
        uint32_t flen = (uint32_t)f[0] | (uint32_t)f[1] << 8 | (uint32_t)f[2] << 16 | (uint32_t)f[3] << 24;
        if (flen == 0 || (uint64_t)flen > size - 12) { pq__fail(c, "footer length %u out of range (file of %zu bytes)", flen, size); }
        size_t data_end = size - 8 - flen;
        pq__footer(c, file + data_end, flen);
        for (size_t i = 0; i < c->num_chunks; i++) { pq__chunk(c, &c->chunks[i], data_end); }
        rc = PQ_OK;
    }
    free(c->page);
    free(c->dict_bytes);
    free((void*)c->dict_val);
    free(c->dict_len);
    free(c->chunks);
    free(c);
    return rc;
}

#endif // PARQUET_H
