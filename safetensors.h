/*
safetensors.h: the safetensors tensor file format (Hugging Face's), read and written in plain C. Generic: it knows
tensors, not models (hf_gpt2.h maps GPT-2's names onto the trainer's layout).

Format: an 8-byte little-endian header length N, N bytes of JSON, then the data:
    {"NAME": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
     "__metadata__": {"key": "value", ...}}                                      ("__metadata__" optional)
Offsets are in bytes from the first byte after the header. The JSON may be padded with trailing spaces.

Reading (st_open, st_read_f32): the header is parsed with cJSON and checked before anything is allocated from a
size it claims: the header length against an absolute limit and the file size, every tensor's dtype, shape and
offsets (begin <= end, end within the data, end - begin = element size x the product of the shape, computed with
overflow checks), no two ranges overlapping, no name twice. Every error names the file, and the tensor if there is
one, through fatal() (utils.h). Tensors of F32, F16 and BF16 are read as fp32; the other dtypes are listed (so a
file holding, say, boolean mask buffers opens) but not converted.
Writing (StWriter: begin, put each tensor's values, commit): fp32 tensors, header padded to 8 bytes, "__metadata__": {"format": "pt"}
(what transformers' from_pretrained expects), through an AtomicFile (utils.h): written, synced, renamed.

The host must be little-endian, as the format is (x86-64, AArch64). Needs cJSON (libcjson-dev, link -lcjson).
The JSON tree never outlives the function that parses it, and no fatal() happens while it is alive: under the
fuzz harness (fuzz/fuzz_safetensors.c) fatal() returns to the harness, and a live tree would leak.
Static functions only; any translation unit may include this header.
*/
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json.h" // defines: json_parse (cJSON, errors with line and column)

#include "utils.h" // defines: fatal, fopenCheck, freadCheck, fwriteCheck, mallocCheck, AtomicFile, file_size

#define ST_MAX_HEADER_BYTES ((uint64_t)100000000) // 100 MB, the reference implementation's limit
#define ST_MAX_DIMS 8
#define ST_MAX_JSON_INT 9007199254740992.0        // 2^53: larger integers do not survive a JSON double

typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16, ST_I32, ST_U32, ST_F32, ST_F64,
    ST_I64, ST_U64, ST_NUM_DTYPES
} StDtype;

static const struct { const char* name; int bytes; } ST_DTYPES[ST_NUM_DTYPES] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
};

typedef struct {
    char* name;                  // as in the header
    StDtype dtype;
    int ndim;                    // 0 for a scalar
    uint64_t shape[ST_MAX_DIMS]; // (ndim)
    uint64_t numel;              // product of the shape (1 for a scalar)
    uint64_t begin, end;         // byte range, relative to the start of the data
} StTensor;

typedef struct {
    char path[4096];
    FILE* fp;                    // open from st_open to st_close
    uint64_t file_bytes;
    uint64_t data_start;         // 8 + header length: where offset 0 of the data is in the file
    StTensor* tensors;           // (num_tensors) sorted by name
    int num_tensors;
} StFile;

// ----------------------------------------------------------------------------
// dtype conversions

// IEEE half -> float, exact (subnormals, infinities and NaN included).
static float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0 && man == 0) {
        u = sign;
    } else if (exp == 0) { // subnormal half: a normal float after shifting the mantissa up
        exp = 127 - 15 + 1;
        while (!(man & 0x400u)) { man <<= 1; exp--; }
        u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// bfloat16 -> float: the upper half of the float's bits.
static float st_bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// The dtype called `name`, or -1.
static int st_dtype_from_name(const char* name) {
    for (int i = 0; i < ST_NUM_DTYPES; i++) {
        if (strcmp(name, ST_DTYPES[i].name) == 0) { return i; }
    }
    return -1;
}

// ----------------------------------------------------------------------------
// reading: header

// A JSON number that is an integer in [0, 2^53] into *out; returns 0, or -1 if it is anything else.
static int st__json_uint(const cJSON* v, uint64_t* out) {
    if (!cJSON_IsNumber(v)) { return -1; }
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_JSON_INT) || d != floor(d)) { return -1; }
    *out = (uint64_t)d;
    return 0;
}

// qsort/bsearch order of tensors: by name.
static int st__cmp_name(const void* a, const void* b) {
    return strcmp(((const StTensor*)a)->name, ((const StTensor*)b)->name);
}

// qsort order of tensor pointers: by first byte, then by end.
static int st__cmp_begin(const void* a, const void* b) {
    const StTensor* x = *(const StTensor* const*)a;
    const StTensor* y = *(const StTensor* const*)b;
    if (x->begin != y->begin) { return x->begin < y->begin ? -1 : 1; }
    return x->end < y->end ? -1 : x->end > y->end;
}

// Fills f->tensors from the header's JSON text (NUL-terminated). Returns 0, or -1 with a message in err (which
// st_open prefixes with the file's name). The cJSON tree is freed before returning, whatever happens.
static int st__parse_header(StFile* f, const char* json, char* err, size_t cap) {
    char jerr[256];
    cJSON* root = json_parse(json, strlen(json), jerr, sizeof(jerr));
    if (!root) {
        snprintf(err, cap, "the header is not valid JSON (%s of the header): not a safetensors file, or a damaged one", jerr);
        return -1;
    }
    int rc = -1, n = 0; // (declared before the first goto: the header also compiles as C++, in the CUDA build)
    uint64_t data_bytes = f->file_bytes - f->data_start;
    if (!cJSON_IsObject(root)) { snprintf(err, cap, "the header is JSON but not an object"); goto done; }
    for (const cJSON* it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") != 0) { n++; }
    }
    // n is bounded by the header's length (each entry takes bytes of it), itself bounded by the file's size
    f->tensors = (StTensor*)callocCheck((size_t)n, sizeof(StTensor));
    for (const cJSON* it = root->child; it; it = it->next) {
        const char* nm = it->string;
        if (strcmp(nm, "__metadata__") == 0) {
            if (!cJSON_IsObject(it)) { snprintf(err, cap, "\"__metadata__\" is not an object"); goto done; }
            continue;
        }
        StTensor* t = &f->tensors[f->num_tensors];
        size_t len = strlen(nm);
        t->name = (char*)mallocCheck(len + 1);
        memcpy(t->name, nm, len + 1);
        f->num_tensors++;
        if (!cJSON_IsObject(it)) { snprintf(err, cap, "tensor '%.200s': its entry is not an object", nm); goto done; }
        const cJSON* dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON* sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON* off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt)) { snprintf(err, cap, "tensor '%.200s': \"dtype\" is missing or not a string", nm); goto done; }
        int d = st_dtype_from_name(dt->valuestring);
        if (d < 0) { snprintf(err, cap, "tensor '%.200s': unknown dtype \"%.40s\"", nm, dt->valuestring); goto done; }
        t->dtype = (StDtype)d;
        if (!cJSON_IsArray(sh)) { snprintf(err, cap, "tensor '%.200s': \"shape\" is missing or not an array", nm); goto done; }
        int nd = cJSON_GetArraySize(sh);
        if (nd > ST_MAX_DIMS) { snprintf(err, cap, "tensor '%.200s': %d dimensions (at most %d are supported)", nm, nd, ST_MAX_DIMS); goto done; }
        t->ndim = nd;
        t->numel = 1;
        int k = 0;
        int numel_overflow = 0;
        for (const cJSON* s = sh->child; s; s = s->next, k++) {
            if (st__json_uint(s, &t->shape[k]) != 0) {
                snprintf(err, cap, "tensor '%.200s': shape entry %d is not a non-negative integer", nm, k);
                goto done;
            }
            if (t->shape[k] != 0 && t->numel > UINT64_MAX / t->shape[k]) { numel_overflow = 1; }
            else { t->numel *= t->shape[k]; }
        }
        if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || st__json_uint(off->child, &t->begin) != 0 ||
            st__json_uint(off->child->next, &t->end) != 0) {
            snprintf(err, cap, "tensor '%.200s': \"data_offsets\" is missing or not two non-negative integers [begin, end]", nm);
            goto done;
        }
        if (t->end < t->begin) {
            snprintf(err, cap, "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin", nm, t->begin, t->end);
            goto done;
        }
        if (t->end > data_bytes) {
            snprintf(err, cap, "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the file "
                     "(%" PRIu64 " bytes of data after the header): the file is truncated or its header is wrong",
                     nm, t->begin, t->end, data_bytes);
            goto done;
        }
        uint64_t esize = (uint64_t)ST_DTYPES[d].bytes;
        if (numel_overflow || t->numel > UINT64_MAX / esize || t->numel * esize != t->end - t->begin) {
            char shape[256];
            size_t m = 0;
            shape[0] = '\0';
            for (int j = 0; j < nd && m + 24 < sizeof(shape); j++) {
                m += (size_t)snprintf(shape + m, sizeof(shape) - m, "%s%" PRIu64, j ? ", " : "", t->shape[j]);
            }
            snprintf(err, cap, "tensor '%.200s': %" PRIu64 " bytes of data (offsets [%" PRIu64 ", %" PRIu64 "]) do not "
                     "hold a %s tensor of shape [%s]", nm, t->end - t->begin, t->begin, t->end, ST_DTYPES[d].name, shape);
            goto done;
        }
    }
    // names: sorted (for st_find), each once (cJSON keeps both copies of a repeated key)
    qsort(f->tensors, (size_t)f->num_tensors, sizeof(StTensor), st__cmp_name);
    for (int i = 1; i < f->num_tensors; i++) {
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0) {
            snprintf(err, cap, "tensor '%.200s' appears twice in the header", f->tensors[i].name);
            goto done;
        }
    }
    // ranges: none overlaps another (empty tensors occupy nothing)
    {
        StTensor** by_begin = (StTensor**)mallocCheck(sizeof(StTensor*) * (size_t)(f->num_tensors ? f->num_tensors : 1));
        for (int i = 0; i < f->num_tensors; i++) { by_begin[i] = &f->tensors[i]; }
        qsort(by_begin, (size_t)f->num_tensors, sizeof(StTensor*), st__cmp_begin);
        const StTensor* reach = NULL; // the non-empty tensor whose range ends last so far
        for (int i = 0; i < f->num_tensors; i++) {
            const StTensor* t = by_begin[i];
            if (t->end == t->begin) { continue; }
            if (reach && t->begin < reach->end) {
                snprintf(err, cap, "tensors '%.200s' [%" PRIu64 ", %" PRIu64 ") and '%.200s' [%" PRIu64 ", %" PRIu64 ") overlap",
                         reach->name, reach->begin, reach->end, t->name, t->begin, t->end);
                free(by_begin);
                goto done;
            }
            if (!reach || t->end > reach->end) { reach = t; }
        }
        free(by_begin);
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

// Releases what st_open allocated and closes the file (safe on a zeroed StFile).
static void st_close(StFile* f) {
    for (int i = 0; i < f->num_tensors; i++) { free(f->tensors[i].name); }
    free(f->tensors);
    if (f->fp) { fclose(f->fp); }
    memset(f, 0, sizeof(*f));
}

// Opens a safetensors file and validates its header (see the top of this file); exits naming the file on any
// problem. The file stays open for st_read_f32 until st_close.
static void st_open(StFile* f, const char* path) {
    memset(f, 0, sizeof(*f));
    size_t plen = strlen(path);
    if (plen + 1 > sizeof(f->path)) { fatal("safetensors path too long: '%.200s...'", path); }
    memcpy(f->path, path, plen + 1);
    long long size = file_size(path);
    if (size < 0) { fatal("safetensors file '%s' does not exist or cannot be read", path); }
    if (size < 8) { fatal("safetensors file '%s' is truncated: %lld bytes, shorter than the 8-byte header length", path, size); }
    f->file_bytes = (uint64_t)size;
    f->fp = fopenCheck(path, "rb");
    unsigned char lb[8];
    freadCheck(lb, 1, 8, f->fp, path);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) { n |= (uint64_t)lb[i] << (8 * i); }
    if (n > ST_MAX_HEADER_BYTES) {
        fatal("safetensors file '%s': header length %" PRIu64 " is absurd (the limit is %" PRIu64 " bytes; the file "
              "is %lld bytes): not a safetensors file, or a damaged one", path, n, ST_MAX_HEADER_BYTES, size);
    }
    if (n > f->file_bytes - 8) {
        fatal("safetensors file '%s' is truncated: its header claims %" PRIu64 " bytes but only %" PRIu64 " follow",
              path, n, f->file_bytes - 8);
    }
    f->data_start = 8 + n;
    char* json = (char*)mallocCheck((size_t)n + 1);
    freadCheck(json, 1, (size_t)n, f->fp, path);
    json[n] = '\0';
    if (strlen(json) != (size_t)n) {
        fatal("safetensors file '%s': the header holds a NUL byte at byte %zu: not JSON text", path, strlen(json));
    }
    char err[1024];
    int rc = st__parse_header(f, json, err, sizeof(err));
    free(json);
    if (rc != 0) { fatal("safetensors file '%s': %s", path, err); }
}

// The tensor called `name`, or NULL.
static const StTensor* st_find(const StFile* f, const char* name) {
    StTensor key;
    key.name = (char*)name;
    return (const StTensor*)bsearch(&key, f->tensors, (size_t)f->num_tensors, sizeof(StTensor), st__cmp_name);
}

// The shape as text, "[d0, d1]", into buf.
static const char* st_shape_str(const StTensor* t, char* buf, size_t cap) {
    size_t m = (size_t)snprintf(buf, cap, "[");
    for (int j = 0; j < t->ndim && m + 24 < cap; j++) {
        m += (size_t)snprintf(buf + m, cap - m, "%s%" PRIu64, j ? ", " : "", t->shape[j]);
    }
    snprintf(buf + m, cap - m, "]");
    return buf;
}

// 1 if the tensor's shape is exactly (dims[0], ..., dims[ndim-1]).
static int st_shape_is(const StTensor* t, int ndim, const uint64_t* dims) {
    if (t->ndim != ndim) { return 0; }
    for (int i = 0; i < ndim; i++) {
        if (t->shape[i] != dims[i]) { return 0; }
    }
    return 1;
}

// 1 if st_read_f32 converts this dtype (F32, F16, BF16).
static int st_dtype_is_float(StDtype d) { return d == ST_F32 || d == ST_F16 || d == ST_BF16; }

// ----------------------------------------------------------------------------
// reading: data

// Reads elements [first, first + count) of tensor t (row-major order) into out as fp32, converting F16 and BF16.
// Exits naming the file and the tensor for any other dtype, a range outside the tensor, or a short read.
static void st_read_f32(const StFile* f, const StTensor* t, uint64_t first, uint64_t count, float* out) {
    if (!st_dtype_is_float(t->dtype)) {
        fatal("safetensors file '%s': tensor '%.200s' has dtype %s; only F32, F16 and BF16 can be read as floats",
              f->path, t->name, ST_DTYPES[t->dtype].name);
    }
    if (first > t->numel || count > t->numel - first) {
        fatal("internal: reading elements [%" PRIu64 ", +%" PRIu64 ") of tensor '%.200s' (%" PRIu64 " elements) in '%s'",
              first, count, t->name, t->numel, f->path);
    }
    uint64_t esize = (uint64_t)ST_DTYPES[t->dtype].bytes;
    uint64_t pos = f->data_start + t->begin + first * esize;
    if (pos > (uint64_t)INT64_MAX || fseeko(f->fp, (off_t)pos, SEEK_SET) != 0) {
        fatal("safetensors file '%s': cannot seek to tensor '%.200s' (byte %" PRIu64 ")", f->path, t->name, pos);
    }
    if (t->dtype == ST_F32) {
        freadCheck(out, sizeof(float), (size_t)count, f->fp, f->path);
        return;
    }
    uint16_t buf[8192];
    for (uint64_t done = 0; done < count;) {
        size_t m = count - done < 8192 ? (size_t)(count - done) : 8192;
        freadCheck(buf, sizeof(uint16_t), m, f->fp, f->path);
        if (t->dtype == ST_F16) { for (size_t j = 0; j < m; j++) { out[done + j] = st_f16_to_f32(buf[j]); } }
        else { for (size_t j = 0; j < m; j++) { out[done + j] = st_bf16_to_f32(buf[j]); } }
        done += m;
    }
}

// ----------------------------------------------------------------------------
// writing

typedef struct {
    const char* name;
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
} StSpec;

typedef struct {
    AtomicFile af;
    const StSpec* specs;  // (n) the tensors, in the order their data is written
    int n;
    int next;             // index of the next tensor st_writer_put expects
} StWriter;

// Appends a JSON string literal of s to buf (quotes and escapes included); returns the new length or exits.
static size_t st__json_str(char* buf, size_t cap, size_t m, const char* s) {
    if (m + 1 >= cap) { fatal("internal: safetensors header buffer too small"); }
    buf[m++] = '"';
    for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
        if (m + 8 >= cap) { fatal("internal: safetensors header buffer too small"); }
        if (*p == '"' || *p == '\\') { buf[m++] = '\\'; buf[m++] = (char)*p; }
        else if (*p < 0x20) { m += (size_t)snprintf(buf + m, cap - m, "\\u%04x", *p); }
        else { buf[m++] = (char)*p; }
    }
    buf[m++] = '"';
    buf[m] = '\0';
    return m;
}

// Elements of a tensor to write (product of its shape; exits on overflow).
static uint64_t st__spec_numel(const StSpec* s) {
    uint64_t n = 1;
    for (int k = 0; k < s->ndim; k++) { n = (uint64_t)mulSize(n, s->shape[k]); }
    return n;
}

// Starts writing an fp32 safetensors file at `path` holding specs[0..n) (data in that order): writes the header to
// a temporary file. Then st_writer_put each tensor in order, and st_writer_commit.
static void st_writer_begin(StWriter* w, const char* path, const StSpec* specs, int n) {
    memset(w, 0, sizeof(*w));
    w->specs = specs;
    w->n = n;
    size_t cap = 256;
    for (int i = 0; i < n; i++) { cap += 6 * strlen(specs[i].name) + 128 + 24 * (size_t)specs[i].ndim; }
    char* h = (char*)mallocCheck(cap + 8);
    size_t m = (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const StSpec* s = &specs[i];
        if (s->ndim < 0 || s->ndim > ST_MAX_DIMS) { fatal("internal: tensor '%s' has %d dimensions", s->name, s->ndim); }
        uint64_t bytes = (uint64_t)mulSize(st__spec_numel(s), 4);
        h[m++] = ',';
        m = st__json_str(h, cap, m, s->name);
        m += (size_t)snprintf(h + m, cap - m, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int k = 0; k < s->ndim; k++) { m += (size_t)snprintf(h + m, cap - m, "%s%" PRIu64, k ? "," : "", s->shape[k]); }
        m += (size_t)snprintf(h + m, cap - m, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + bytes);
        off += bytes;
    }
    h[m++] = '}';
    while (m % 8 != 0) { h[m++] = ' '; } // the data starts 8-byte aligned, as the reference writer does it
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) { lb[i] = (unsigned char)((uint64_t)m >> (8 * i)); }
    atomic_open(&w->af, path);
    fwriteCheck(lb, 1, 8, w->af.fp, path);
    fwriteCheck(h, 1, m, w->af.fp, path);
    free(h);
}

// Writes the data of the next tensor (`count` fp32 values, which must be its element count).
static void st_writer_put(StWriter* w, const float* data, uint64_t count) {
    if (w->next >= w->n) { fatal("internal: more tensors written than declared in '%s'", w->af.path); }
    const StSpec* s = &w->specs[w->next];
    if (count != st__spec_numel(s)) {
        fatal("internal: tensor '%s' of '%s' declared with %" PRIu64 " elements, given %" PRIu64, s->name, w->af.path,
              st__spec_numel(s), count);
    }
    fwriteCheck(data, sizeof(float), (size_t)count, w->af.fp, w->af.path);
    w->next++;
}

// Finishes the file: every declared tensor must have been written; then synced and renamed into place.
static void st_writer_commit(StWriter* w) {
    if (w->next != w->n) { fatal("internal: %d of %d tensors written to '%s'", w->next, w->n, w->af.path); }
    atomic_commit(&w->af);
}

#endif // SAFETENSORS_H
