/*
hellaswag.h: multiple-choice evaluation files (llm.c's format: the file llm.c's dev/data/hellaswag.py writes loads
here unchanged) and their scoring, for `train_gpt --eval-hellaswag FILE`, `--hellaswag FILE` and the converter
`tokenize hellaswag`. Static functions only; plain C that also compiles as CUDA C++ (train_gpt_cu).

File format (little-endian):
  header  256 x int32: [0] = 20240522 (magic), [1] = 1 (version), [2] = the number of examples,
          [3] = the longest example in bytes (its size as below); the rest 0.
  then each example as a run of uint16 values:
          65535                  <START_EXAMPLE>
          bytes                  the example's size in bytes, these first two values included (2 x the values)
          index                  the example's index in its dataset
          label                  the index of the correct ending
          n                      the number of endings (4 for HellaSwag)
          m, then m tokens       the context
          n times: k, k tokens   an ending
  The file ends after the last example. Token ids are below 65535 (GPT-2's are below 50257).

Scoring (llm.c's hellaswag.py): ending j is scored on the row context + ending j. The model reads the row; the
losses that count are the cross-entropies at the positions whose target is an ending token (the position before
each one). Their sum picks `acc`'s answer (the lowest sum), their mean over the ending's tokens picks `acc_norm`'s
(the lowest mean; the figure llm.c reports). Ties go to the lower index, as argmin does.

    HellaSwag hs; char err[512];
    if (hellaswag_load(&hs, path, vocab_size, max_row, "--seq-len", err, sizeof(err)) != 0) { fatal("%s", err); }
    ... per forward: hellaswag_fill_rows, the model, hellaswag_add_losses; then hellaswag_predict per example
    hellaswag_free(&hs);
*/
#ifndef HELLASWAG_H
#define HELLASWAG_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELLASWAG_MAGIC 20240522
#define HELLASWAG_VERSION 1
#define HELLASWAG_HEADER_INTS 256
#define HELLASWAG_START 65535        // <START_EXAMPLE>; never a token
#define HELLASWAG_MAX_ENDINGS 64     // a bound for the evaluation's batch (HellaSwag has 4)
#define HELLASWAG_MIN_BYTES 12       // <START_EXAMPLE>, bytes, index, label, n, m: the fixed fields

typedef struct {
    int index;          // the example's index field (its position in the dataset)
    int label;          // the correct ending
    int num_endings;    // n
    int ctx_len;        // m
    size_t first;       // offset in HellaSwag.tokens of the context; ending 0 follows it, then ending 1, ...
    size_t lens;        // offset in HellaSwag.ending_len of this example's n ending lengths
} HsExample;

typedef struct {
    int num_examples;
    int max_endings;    // the most endings of any example
    int longest_row;    // tokens of the longest context + ending
    HsExample* ex;      // (num_examples)
    int32_t* tokens;    // every example's context and endings, in file order
    int* ending_len;    // every example's ending lengths, in file order
} HellaSwag;

static void hellaswag_free(HellaSwag* hs) {
    free(hs->ex);
    free(hs->tokens);
    free(hs->ending_len);
    memset(hs, 0, sizeof(*hs));
}

// Tokens of ending j of example e, and its length.
static const int32_t* hellaswag_ending(const HellaSwag* hs, int e, int j, int* len) {
    const HsExample* x = &hs->ex[e];
    const int32_t* p = hs->tokens + x->first + x->ctx_len;
    for (int k = 0; k < j; k++) { p += hs->ending_len[x->lens + k]; }
    *len = hs->ending_len[x->lens + j];
    return p;
}

// The longest row (context + ending) of example e.
static int hellaswag_longest_row(const HellaSwag* hs, int e) {
    const HsExample* x = &hs->ex[e];
    int longest = 0;
    for (int j = 0; j < x->num_endings; j++) {
        int n = x->ctx_len + hs->ending_len[x->lens + j];
        if (n > longest) { longest = n; }
    }
    return longest;
}

// Reads and checks an eval file whole: the header, every example's fields against its declared size and the end of
// the file, tokens below vocab_size, every row (context + ending) at most max_row tokens (limit_name says what sets
// that limit, for the message). Returns 0, or -1 with err naming the file, the example (its position in the file,
// from 0, and its byte offset) and the problem; hs is then empty and safe to free.
static int hellaswag_load(HellaSwag* hs, const char* path, int vocab_size, int max_row, const char* limit_name, char* err, size_t cap) {
    memset(hs, 0, sizeof(*hs));
    uint16_t* body = NULL;
    FILE* fp = fopen(path, "rb");
    if (!fp) { snprintf(err, cap, "cannot open '%s': %s", path, strerror(errno)); return -1; }
    int32_t h[HELLASWAG_HEADER_INTS];
    long end = -1;
    if (fseek(fp, 0, SEEK_END) == 0) { end = ftell(fp); }
    if (end < 0 || fseek(fp, 0, SEEK_SET) != 0) { snprintf(err, cap, "'%s': cannot determine the file's size", path); goto fail; }
    if (end < (long)sizeof(h) || fread(h, sizeof(h), 1, fp) != 1) {
        snprintf(err, cap, "'%s': %ld bytes, shorter than the %zu-byte header of an eval file", path, end, sizeof(h));
        goto fail;
    }
    if (h[0] != HELLASWAG_MAGIC) {
        snprintf(err, cap, "'%s': bad magic %d (an llm.c eval file starts with %d)", path, h[0], HELLASWAG_MAGIC);
        goto fail;
    }
    if (h[1] != HELLASWAG_VERSION) { snprintf(err, cap, "'%s': version %d (this reader knows version %d)", path, h[1], HELLASWAG_VERSION); goto fail; }
    if (h[2] <= 0) { snprintf(err, cap, "'%s': the header says %d examples (at least 1 is needed)", path, h[2]); goto fail; }
    if (h[3] < HELLASWAG_MIN_BYTES || h[3] > 65534 || h[3] % 2 != 0) {
        snprintf(err, cap, "'%s': the header's longest example is %d bytes (an even size from %d to 65534)", path, h[3], HELLASWAG_MIN_BYTES);
        goto fail;
    }
    {
        size_t bytes = (size_t)end - sizeof(h);
        // no example is longer than h[3] bytes: a longer file cannot hold h[2] of them (checked before allocating)
        if (bytes > (size_t)h[2] * (size_t)h[3]) {
            snprintf(err, cap, "'%s': %zu bytes after the header, more than %d examples of at most %d bytes can take", path, bytes, h[2], h[3]);
            goto fail;
        }
        // ... and every example takes at least 12: a shorter file cannot hold them either (nor is the table sized
        // for a count the file cannot back)
        if (bytes < (size_t)h[2] * HELLASWAG_MIN_BYTES) {
            snprintf(err, cap, "'%s': the header says %d examples, but the %zu bytes after it hold at most %zu (truncated)", path, h[2], bytes,
                     bytes / HELLASWAG_MIN_BYTES);
            goto fail;
        }
        if (bytes % 2 != 0) { snprintf(err, cap, "'%s': an odd number of bytes (%zu) after the header: not uint16 values", path, bytes); goto fail; }
        size_t nw = bytes / 2;
        body = (uint16_t*)malloc(nw * sizeof(uint16_t) + 1);
        hs->ex = (HsExample*)malloc(sizeof(HsExample) * (size_t)h[2]);
        hs->tokens = (int32_t*)malloc(sizeof(int32_t) * nw + 1);
        hs->ending_len = (int*)malloc(sizeof(int) * nw + 1);
        if (!body || !hs->ex || !hs->tokens || !hs->ending_len) { snprintf(err, cap, "'%s': out of memory (%zu bytes)", path, bytes); goto fail; }
        if (nw > 0 && fread(body, sizeof(uint16_t), nw, fp) != nw) { snprintf(err, cap, "'%s': read error", path); goto fail; }
        size_t pos = 0, ntok = 0, nlen = 0;
        hs->max_endings = 0;
        hs->longest_row = 0;
        for (int i = 0; i < h[2]; i++) {
            size_t at = sizeof(h) + 2 * pos; // the example's byte offset, for messages
            if (nw - pos < 2) {
                snprintf(err, cap, "'%s': the file ends after %d of the header's %d examples (truncated)", path, i, h[2]);
                goto fail;
            }
            if (body[pos] != HELLASWAG_START) {
                snprintf(err, cap, "'%s': example %d (byte %zu) starts with %u, not the <START_EXAMPLE> mark %d", path, i, at, body[pos], HELLASWAG_START);
                goto fail;
            }
            unsigned nbytes = body[pos + 1];
            if (nbytes < HELLASWAG_MIN_BYTES || nbytes % 2 != 0) {
                snprintf(err, cap, "'%s': example %d (byte %zu) declares %u bytes (an even size of at least %d)", path, i, at, nbytes, HELLASWAG_MIN_BYTES);
                goto fail;
            }
            if (nbytes / 2 > nw - pos) {
                snprintf(err, cap, "'%s': example %d (byte %zu) declares %u bytes but only %zu remain: it overruns the file (truncated or corrupt)",
                         path, i, at, nbytes, 2 * (nw - pos));
                goto fail;
            }
            if ((int)nbytes > h[3]) {
                snprintf(err, cap, "'%s': example %d (byte %zu) is %u bytes, longer than the header's longest example (%d)", path, i, at, nbytes, h[3]);
                goto fail;
            }
            const uint16_t* v = body + pos;
            size_t nv = nbytes / 2, c = 6;
            HsExample* x = &hs->ex[i];
            x->index = v[2];
            x->label = v[3];
            x->num_endings = v[4];
            x->ctx_len = v[5];
            x->first = ntok;
            x->lens = nlen;
            if (x->num_endings < 1 || x->num_endings > HELLASWAG_MAX_ENDINGS) {
                snprintf(err, cap, "'%s': example %d (byte %zu) has %d endings (1 to %d)", path, i, at, x->num_endings, HELLASWAG_MAX_ENDINGS);
                goto fail;
            }
            if (x->label >= x->num_endings) {
                snprintf(err, cap, "'%s': example %d (byte %zu): label %d, but its endings are 0 to %d", path, i, at, x->label, x->num_endings - 1);
                goto fail;
            }
            if (x->ctx_len < 1) {
                snprintf(err, cap, "'%s': example %d (byte %zu) has an empty context (its first ending token would be predicted from nothing)", path, i, at);
                goto fail;
            }
            // the context, then each ending: a length and its tokens, all inside the declared size
            for (int j = -1; j < x->num_endings; j++) {
                int len = x->ctx_len;
                if (j >= 0) {
                    if (c >= nv) {
                        snprintf(err, cap, "'%s': example %d (byte %zu): its %u bytes end before ending %d (%d endings declared)", path, i, at, nbytes, j, x->num_endings);
                        goto fail;
                    }
                    len = v[c++];
                    if (len < 1) { snprintf(err, cap, "'%s': example %d (byte %zu): ending %d has no tokens", path, i, at, j); goto fail; }
                    hs->ending_len[nlen++] = len;
                    int row = x->ctx_len + len;
                    if (row > max_row) {
                        snprintf(err, cap, "'%s': example %d (index %d, byte %zu): context + ending %d = %d + %d = %d tokens, more than %d (%s)",
                                 path, i, x->index, at, j, x->ctx_len, len, row, max_row, limit_name);
                        goto fail;
                    }
                    if (row > hs->longest_row) { hs->longest_row = row; }
                }
                if ((size_t)len > nv - c) {
                    snprintf(err, cap, "'%s': example %d (byte %zu): the %s's %d tokens run past its declared %u bytes", path, i, at,
                             j < 0 ? "context" : "ending", len, nbytes);
                    goto fail;
                }
                for (int t = 0; t < len; t++) {
                    unsigned tok = v[c + t];
                    if ((int)tok >= vocab_size) {
                        snprintf(err, cap, "'%s': example %d (byte %zu): token %u is outside the model's vocabulary (%d ids)", path, i, at, tok, vocab_size);
                        goto fail;
                    }
                    hs->tokens[ntok++] = (int32_t)tok;
                }
                c += (size_t)len;
            }
            if (c != nv) {
                snprintf(err, cap, "'%s': example %d (byte %zu) declares %u bytes, its fields take %zu", path, i, at, nbytes, 2 * c);
                goto fail;
            }
            if (x->num_endings > hs->max_endings) { hs->max_endings = x->num_endings; }
            pos += nv;
        }
        if (pos != nw) {
            snprintf(err, cap, "'%s': %zu bytes after the last of the header's %d examples", path, 2 * (nw - pos), h[2]);
            goto fail;
        }
        hs->num_examples = h[2];
    }
    free(body);
    fclose(fp);
    return 0;
fail:
    free(body);
    fclose(fp);
    hellaswag_free(hs);
    return -1;
}

// ----------------------------------------------------------------------------
// Scoring. An example's endings are evaluated in forwards of up to `rows` rows of Te tokens each (Te: its longest
// row, rounded up); ending j is row j - r0 of the forward that starts at ending r0.

// The inputs and targets ((r1 - r0) x Te, row-major) of endings [r0, r1) of example e: row = context + ending,
// inputs its tokens, targets the next token; the positions past the row are padded with token 0 (their losses are
// computed and never read).
static void hellaswag_fill_rows(const HellaSwag* hs, int e, int r0, int r1, int Te, int32_t* inputs, int32_t* targets) {
    const HsExample* x = &hs->ex[e];
    const int32_t* ctx = hs->tokens + x->first;
    for (int j = r0; j < r1; j++) {
        int len;
        const int32_t* end = hellaswag_ending(hs, e, j, &len);
        int32_t* in = inputs + (size_t)(j - r0) * Te;
        int32_t* tg = targets + (size_t)(j - r0) * Te;
        int n = x->ctx_len + len;
        for (int t = 0; t < Te; t++) {
            in[t] = t < x->ctx_len ? ctx[t] : t < n ? end[t - x->ctx_len] : 0;
            int u = t + 1; // the target: the row's next token
            tg[t] = u < x->ctx_len ? ctx[u] : u < n ? end[u - x->ctx_len] : 0;
        }
    }
}

// Adds to sums[j] (for j in [r0, r1)) ending j's loss: the token losses of its row (losses: (r1 - r0) x Te, as
// filled above) at the positions ctx_len - 1 .. ctx_len + len - 2, whose targets are the ending's tokens.
static void hellaswag_add_losses(const HellaSwag* hs, int e, int r0, int r1, int Te, const float* losses, double* sums) {
    const HsExample* x = &hs->ex[e];
    for (int j = r0; j < r1; j++) {
        int len;
        (void)hellaswag_ending(hs, e, j, &len);
        const float* l = losses + (size_t)(j - r0) * Te;
        double s = 0.0;
        for (int t = x->ctx_len - 1; t < x->ctx_len + len - 1; t++) { s += l[t]; }
        sums[j] += s;
    }
}

// The answers from the endings' summed losses (sums: num_endings of them): the lowest sum (acc) and the lowest mean
// over the ending's tokens (acc_norm), ties to the lower index.
static void hellaswag_predict(const HellaSwag* hs, int e, const double* sums, int* by_sum, int* by_mean) {
    const HsExample* x = &hs->ex[e];
    int bs = 0, bm = 0;
    for (int j = 1; j < x->num_endings; j++) {
        if (sums[j] < sums[bs]) { bs = j; }
        if (sums[j] / hs->ending_len[x->lens + j] < sums[bm] / hs->ending_len[x->lens + bm]) { bm = j; }
    }
    *by_sum = bs;
    *by_mean = bm;
}

// ----------------------------------------------------------------------------
// Writing (tokenize hellaswag): one example after another behind a header whose counts are filled in at the end.

// The uint16 stream of one example into out (room for 32767 values); returns its length in values, or 0 when the
// example cannot be written (why in err): what the reader refuses (no endings, a label out of range, an empty
// context or ending), more than 65534 bytes, or an index or token that does not fit 16 bits.
static size_t hellaswag_encode_example(uint16_t* out, int index, int label, const uint32_t* ctx, int ctx_len,
                                       const uint32_t* const* endings, const int* ending_lens, int n, char* err, size_t cap) {
    if (n < 1 || n > HELLASWAG_MAX_ENDINGS) { snprintf(err, cap, "%d endings (1 to %d)", n, HELLASWAG_MAX_ENDINGS); return 0; }
    if (label < 0 || label >= n) { snprintf(err, cap, "label %d, but the endings are 0 to %d", label, n - 1); return 0; }
    if (ctx_len < 1) { snprintf(err, cap, "the context has no tokens"); return 0; }
    size_t need = 6 + (size_t)ctx_len + (size_t)n;
    for (int j = 0; j < n; j++) {
        if (ending_lens[j] < 1) { snprintf(err, cap, "ending %d has no tokens", j); return 0; }
        need += (size_t)ending_lens[j];
    }
    if (need > 32767) { snprintf(err, cap, "%zu bytes, above the format's 65534 per example", 2 * need); return 0; }
    if (index < 0 || index > 65535) { snprintf(err, cap, "index %d does not fit the format's 16 bits", index); return 0; }
    size_t c = 0;
    out[c++] = HELLASWAG_START;
    out[c++] = (uint16_t)(2 * need);
    out[c++] = (uint16_t)index;
    out[c++] = (uint16_t)label;
    out[c++] = (uint16_t)n;
    out[c++] = (uint16_t)ctx_len;
    for (int t = 0; t < ctx_len; t++) {
        if (ctx[t] >= HELLASWAG_START) { snprintf(err, cap, "token %u does not fit (ids must be below %d)", ctx[t], HELLASWAG_START); return 0; }
        out[c++] = (uint16_t)ctx[t];
    }
    for (int j = 0; j < n; j++) {
        out[c++] = (uint16_t)ending_lens[j];
        for (int t = 0; t < ending_lens[j]; t++) {
            if (endings[j][t] >= HELLASWAG_START) { snprintf(err, cap, "token %u does not fit (ids must be below %d)", endings[j][t], HELLASWAG_START); return 0; }
            out[c++] = (uint16_t)endings[j][t];
        }
    }
    return c;
}

#endif // HELLASWAG_H
