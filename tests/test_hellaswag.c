/*
tests/test_hellaswag.c: the multiple-choice evaluation (hellaswag.h; train_gpt --eval-hellaswag, --hellaswag;
tokenize hellaswag), through the real binaries as a user runs them, and its parts in-process:
  format     the reader on hand-made files: fields, rows, the losses that count, the answers and their ties; every
             malformed file refused with a message naming the file and the problem (also through ./train_gpt)
  convert    ./tokenize hellaswag on tests/data/hellaswag_tiny.jsonl: the header, labels and indices, every context and
             ending decoding back to the JSONL's text (endings with llm.c's leading space); scripts/prepare_hellaswag.sh
             with a local file gives the same bytes; malformed JSONL refused
  construct  answers known by construction: a model trained on the tiny set's correct rows (context + right ending)
             answers all 16 (acc and acc_norm 1.0000); the untrained model does not (at most 0.5); 3 ranks say the same
  reference  the reference model (tests/ref/ref_model.bin) on tests/ref/hellaswag_ref.bin against PyTorch's evaluation
             in float64 (tests/ref/hellaswag_ref.txt, scripts/make_hellaswag_reference.py): the same answers, the same
             accuracies, each ending's summed and mean loss within 1e-5 relative
  ranks      the same evaluation on 3 data-parallel ranks, with --pp 2, and on 5 with ZeRO-3 (a 4-block model): identical
             to one process, bit for bit; --tp 2 and --tp 2 --sequence-parallel 1 --zero 3: the same answers, losses
             within 1e-5 relative
  training   --hellaswag FILE --hellaswag-every 5 logs both accuracies and leaves the run unchanged, bit for bit
             (one process; a 4-block model on one process, on 3 ranks with ZeRO-3, whose step-0 accuracies equal
             the one process's, with --tp 2 and with --pp 2); rows longer than --seq-len and flag mistakes refused

    make tests/test_hellaswag && ./tests/test_hellaswag [--only GROUP]     (mpirun cases skipped without mpirun)

Like test_runs it includes train_gpt.c (TRAIN_GPT_NO_MAIN) for the reader (hellaswag.h) and the RNG of the shards;
it is built without MPI and BLAS, since the runs happen in child processes. The last line is "N passed, M failed".
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c"

#include <sys/wait.h>
#include "tests/testing.h" // defines: check, test_summary, run_capture

#define report check
#include "tests/runs_common.h" // defines: write_shard, read_log_values, compare_losses, compare_values, MPIRUN

static const char* DIR_HS; // the suite's scratch directory (testing.h's test_scratch_dir), set first in main
static const char* REF_MODEL = "tests/ref/ref_model.bin";
static const char* REF_EVAL = "tests/ref/hellaswag_ref.bin";
static const char* REF_TXT = "tests/ref/hellaswag_ref.txt";
static const char* TINY_JSONL = "tests/data/hellaswag_tiny.jsonl";
static char g_model_l4[1024]; // the reference model's width with 4 blocks (written by main)
static int g_have_mpi = 0;

// ----------------------------------------------------------------------------
// Helpers: hand-made eval files, the details files, the last line of a run.

// Writes an eval file: header (magic, version, count, longest) then the raw uint16 values of the examples.
static void write_eval(const char* path, int magic, int version, int count, int longest, const uint16_t* v, size_t nv) {
    FILE* f = fopenCheck(path, "wb");
    int32_t h[256] = {0};
    h[0] = magic; h[1] = version; h[2] = count; h[3] = longest;
    fwriteCheck(h, 4, 256, f, path);
    if (nv) { fwriteCheck(v, 2, nv, f, path); }
    fclose(f);
}

// Appends one example (index, label, context, endings) to v as the format lays it out; returns the new length.
static size_t put_example(uint16_t* v, size_t n, int index, int label, const int* ctx, int m, const int* const* ends, const int* lens, int ne) {
    size_t start = n;
    v[n++] = 65535; v[n++] = 0; v[n++] = (uint16_t)index; v[n++] = (uint16_t)label; v[n++] = (uint16_t)ne; v[n++] = (uint16_t)m;
    for (int t = 0; t < m; t++) { v[n++] = (uint16_t)ctx[t]; }
    for (int j = 0; j < ne; j++) {
        v[n++] = (uint16_t)lens[j];
        for (int t = 0; t < lens[j]; t++) { v[n++] = (uint16_t)ends[j][t]; }
    }
    v[start + 1] = (uint16_t)(2 * (n - start));
    return n;
}

// One example of a details file (train_gpt --hellaswag-details) or of the PyTorch reference.
typedef struct {
    int pos, index, label, by_sum, by_mean, n;
    double sums[8], means[8];
} Detail;

// Reads a details file into d (at most max); returns the number of examples, -1 if the file is missing or malformed.
static int read_details(const char* path, Detail* d, int max) {
    FILE* f = fopen(path, "r");
    if (!f) { return -1; }
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || strncmp(line, "acc ", 4) == 0) { continue; }
        if (n >= max) { fclose(f); return -1; }
        Detail* x = &d[n];
        int used = 0;
        if (sscanf(line, "%d %d %d %d %d |%n", &x->pos, &x->index, &x->label, &x->by_sum, &x->by_mean, &used) != 5) { fclose(f); return -1; }
        char* p = line + used;
        x->n = 0;
        while (x->n < 8) {
            char* end = NULL;
            double v = strtod(p, &end);
            if (end == p) { break; }
            x->sums[x->n++] = v;
            p = end;
        }
        while (*p == ' ') { p++; }
        if (*p != '|') { fclose(f); return -1; }
        p++;
        for (int j = 0; j < x->n; j++) {
            char* end = NULL;
            x->means[j] = strtod(p, &end);
            if (end == p) { fclose(f); return -1; }
            p = end;
        }
        n++;
    }
    fclose(f);
    return n;
}

// The "hellaswag: N examples, acc A, acc_norm B" line of a run's output (empty if none).
static void result_line(const char* out, char* line, size_t cap) {
    line[0] = '\0';
    const char* p = NULL;
    for (const char* q = out; (q = strstr(q, "hellaswag: ")) != NULL; q++) {
        if (strstr(q, " examples, acc ") == q + 11 + strspn(q + 11, "0123456789")) { p = q; }
    }
    if (!p) { return; }
    size_t n = strcspn(p, "\n");
    if (n >= cap) { n = cap - 1; }
    memcpy(line, p, n);
    line[n] = '\0';
}

// Whether the output's last line is the result line.
static int ends_with_result(const char* out) {
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '\n') { n--; }
    size_t s = n;
    while (s > 0 && out[s - 1] != '\n') { s--; }
    return strncmp(out + s, "hellaswag: ", 11) == 0 && strstr(out + s, " examples, acc ") != NULL;
}

// Compares two details files: the same examples and answers; each summed and mean loss within rtol relative
// (0: identical). Returns the worst relative difference through *worst.
static int compare_details(const char* name, const char* a_path, const char* b_path, double rtol) {
    static Detail a[256], b[256];
    int na = read_details(a_path, a, 256), nb = read_details(b_path, b, 256);
    int ok = na > 0 && na == nb, answers = 0, bad = 0;
    double worst = 0.0;
    for (int i = 0; ok && i < na; i++) {
        if (a[i].pos != b[i].pos || a[i].index != b[i].index || a[i].label != b[i].label || a[i].n != b[i].n) { ok = 0; break; }
        if (a[i].by_sum != b[i].by_sum || a[i].by_mean != b[i].by_mean) { answers++; }
        for (int j = 0; j < a[i].n; j++) {
            double v[2][2] = {{a[i].sums[j], b[i].sums[j]}, {a[i].means[j], b[i].means[j]}};
            for (int k = 0; k < 2; k++) {
                double d = fabs(v[k][0] - v[k][1]) / fabs(v[k][0]);
                if (!isfinite(v[k][1]) || !(d <= rtol)) { bad++; }
                if (d > worst) { worst = d; }
            }
        }
    }
    report(ok && answers == 0 && bad == 0, name, "%d vs %d examples%s, %d different answers, %d losses out of tolerance "
           "(max relative difference %.3g, tolerance %g)", na, nb, ok ? "" : " (or their fields differ)", answers, bad, worst, rtol);
    return ok && answers == 0 && bad == 0;
}

// ----------------------------------------------------------------------------
// format: the reader and the scoring functions in-process; malformed files refused

static void test_format(void) {
    char path[1024], err[1024];
    // three examples: 4 endings; 2 endings; 3 endings with a tie
    static uint16_t v[4096];
    int c0[3] = {5, 6, 7}, e00[2] = {8, 9}, e01[1] = {10}, e02[3] = {11, 12, 13}, e03[2] = {14, 15};
    const int* ends0[4] = {e00, e01, e02, e03};
    int lens0[4] = {2, 1, 3, 2};
    int c1[1] = {20}, e10[4] = {21, 22, 23, 24}, e11[2] = {25, 26};
    const int* ends1[2] = {e10, e11};
    int lens1[2] = {4, 2};
    int c2[2] = {30, 31}, e20[1] = {32}, e21[1] = {33}, e22[2] = {34, 35};
    const int* ends2[3] = {e20, e21, e22};
    int lens2[3] = {1, 1, 2};
    size_t n = put_example(v, 0, 0, 2, c0, 3, ends0, lens0, 4);
    size_t n1 = put_example(v, n, 1, 1, c1, 1, ends1, lens1, 2);
    size_t n2 = put_example(v, n1, 7, 0, c2, 2, ends2, lens2, 3);
    snprintf(path, sizeof(path), "%s/good.bin", DIR_HS);
    write_eval(path, 20240522, 1, 3, (int)(2 * n), v, n2);
    HellaSwag hs;
    int rc = hellaswag_load(&hs, path, 101, 16, "test limit", err, sizeof(err));
    int len = 0;
    const int32_t* e02p = rc == 0 ? hellaswag_ending(&hs, 0, 2, &len) : NULL;
    report(rc == 0 && hs.num_examples == 3 && hs.max_endings == 4 && hs.longest_row == 6 && hs.ex[2].index == 7 && hs.ex[0].label == 2 &&
           hs.ex[1].num_endings == 2 && hs.ex[1].ctx_len == 1 && len == 3 && e02p[0] == 11 && e02p[2] == 13,
           "format: a hand-made file reads back (counts, index, label, lengths, the tokens of an ending)", "%s", rc ? err : "");
    if (rc != 0) { return; }
    // the rows of example 0, endings 1..3, at Te 7: inputs are the row then 0s, targets the next token then 0s
    int32_t in[3 * 7], tg[3 * 7];
    hellaswag_fill_rows(&hs, 0, 1, 4, 7, in, tg);
    const int32_t want_in[3 * 7] = {5, 6, 7, 10, 0, 0, 0, 5, 6, 7, 11, 12, 13, 0, 5, 6, 7, 14, 15, 0, 0};
    const int32_t want_tg[3 * 7] = {6, 7, 10, 0, 0, 0, 0, 6, 7, 11, 12, 13, 0, 0, 6, 7, 14, 15, 0, 0, 0};
    report(memcmp(in, want_in, sizeof(in)) == 0 && memcmp(tg, want_tg, sizeof(tg)) == 0,
           "format: rows are context + ending padded with 0, targets the next token", "%s", "");
    // losses 100 r + t at row r, position t: ending j's sum is over t = m-1 .. m+len-2 of its row
    float losses[3 * 7];
    for (int r = 0; r < 3; r++) { for (int t = 0; t < 7; t++) { losses[r * 7 + t] = (float)(100 * r + t); } }
    double sums[4] = {0, 0, 0, 0};
    hellaswag_add_losses(&hs, 0, 1, 4, 7, losses, sums);
    // ending 1 (row 0, len 1): t = 2 -> 2; ending 2 (row 1, len 3): t = 2,3,4 -> 309; ending 3 (row 2, len 2): t = 2,3 -> 405
    report(sums[0] == 0 && sums[1] == 2 && sums[2] == 309 && sums[3] == 405, "format: the losses that count are those predicting the ending's tokens",
           "sums %g %g %g %g (expected 0 2 309 405)", sums[0], sums[1], sums[2], sums[3]);
    // answers: lowest sum and lowest mean, ties to the lower index
    int bs, bm;
    double s0[4] = {6.0, 4.0, 4.5, 5.0}; // lengths 2,1,3,2: means 3, 4, 1.5, 2.5
    hellaswag_predict(&hs, 0, s0, &bs, &bm);
    double s2[3] = {3.0, 3.0, 6.0};      // lengths 1,1,2: sums tie 0/1; means 3, 3, 3 tie all
    int ts, tm;
    hellaswag_predict(&hs, 2, s2, &ts, &tm);
    report(bs == 1 && bm == 2 && ts == 0 && tm == 0, "format: acc takes the lowest sum, acc_norm the lowest mean, ties the lower index",
           "by sum %d (1), by mean %d (2); ties: %d, %d (0, 0)", bs, bm, ts, tm);
    hellaswag_free(&hs);

    // malformed files: refused by the reader and by the trainer, naming the file and the problem
    int long_ctx[14];
    for (int t = 0; t < 14; t++) { long_ctx[t] = t; }
    int zero_lens[1] = {0};
    static uint16_t w[4096];
    struct { const char* name; int magic, version, count, longest; int kind; const char* expect; } cases[] = {
        {"a bad magic", 20240520, 1, 3, 200, 0, "bad magic 20240520"},
        {"a wrong version", 20240522, 2, 3, 200, 0, "version 2"},
        {"an example overrunning the file (truncated)", 20240522, 1, 3, 200, 1, "overruns the file"},
        {"more tokens than the context", 20240522, 1, 1, 200, 2, "14 + 3 = 17 tokens, more than 16 (the model's context)"},
        {"a label out of range", 20240522, 1, 1, 200, 3, "label 4, but its endings are 0 to 3"},
        {"zero endings", 20240522, 1, 1, 200, 4, "has 0 endings"},
        {"an ending of no tokens", 20240522, 1, 1, 200, 5, "ending 0 has no tokens"},
        {"fewer examples than the header says", 20240522, 1, 4, 200, 0, "ends after 3 of the header's 4 examples"},
        {"bytes after the last example", 20240522, 1, 2, 200, 0, "after the last of the header's 2 examples"},
        {"a token outside the vocabulary", 20240522, 1, 1, 200, 6, "token 101 is outside the model's vocabulary"},
        {"a missing <START_EXAMPLE> mark", 20240522, 1, 1, 200, 7, "not the <START_EXAMPLE> mark"},
        {"fields that do not fill the declared size", 20240522, 1, 1, 200, 8, "its fields take"},
        {"an example longer than the header's longest", 20240522, 1, 3, 40, 0, "longer than the header's longest example"},
        {"no examples", 20240522, 1, 0, 200, 0, "at least 1 is needed"},
        {"a file shorter than the header", 0, 0, 0, 0, 9, "shorter than the 1024-byte header"},
        {"an odd longest-example size in the header", 20240522, 1, 3, 201, 0, "the header's longest example is 201 bytes (an even size"},
        {"more bytes than the header's examples can take", 20240522, 1, 1, 60, 0,
         "102 bytes after the header, more than 1 examples of at most 60 bytes can take"},
        {"fewer bytes than the header's examples need", 20240522, 1, 9, 200, 0,
         "the header says 9 examples, but the 102 bytes after it hold at most 8 (truncated)"},
        {"an example declaring an odd size", 20240522, 1, 1, 200, 10, "example 0 (byte 1024) declares 43 bytes (an even size"},
        {"an empty context", 20240522, 1, 1, 200, 11, "example 0 (byte 1024) has an empty context"},
        {"fewer endings than declared", 20240522, 1, 1, 200, 12, "its 42 bytes end before ending 4 (5 endings declared)"},
        {"a context running past the example's size", 20240522, 1, 1, 200, 13, "the context's 30 tokens run past its declared 42 bytes"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        size_t nw = n2;
        memcpy(w, v, n2 * sizeof(uint16_t));
        int ends3[3] = {40, 41, 42};
        const int* lend[1] = {ends3};
        int l3[1] = {3};
        switch (cases[k].kind) {
            case 1: nw = n2 - 2; break;                                                  // the last example cut short
            case 2: nw = put_example(w, 0, 0, 0, long_ctx, 14, lend, l3, 1); break;     // 14 + 3 tokens
            case 3: nw = put_example(w, 0, 0, 4, c0, 3, ends0, lens0, 4); break;       // label 4 of 4 endings
            case 4: nw = put_example(w, 0, 0, 0, c0, 3, ends0, lens0, 0); break;       // no endings
            case 5: { const int* z[1] = {e01}; nw = put_example(w, 0, 0, 0, c0, 3, z, zero_lens, 1); break; } // an empty ending
            case 6: { int tok[1] = {101}, one[1] = {1}; const int* z[1] = {tok}; nw = put_example(w, 0, 0, 0, c0, 3, z, one, 1); break; }
            case 7: nw = put_example(w, 0, 0, 0, c0, 3, ends0, lens0, 4); w[0] = 65534; break;
            case 8: nw = put_example(w, 0, 0, 0, c0, 3, ends0, lens0, 4); w[nw++] = 0; w[1] = (uint16_t)(2 * nw); break;
            case 10: nw = put_example(w, 0, 0, 0, c0, 3, ends0, lens0, 4); w[1] = 43; break;  // (42 bytes, declared 43)
            case 11: nw = put_example(w, 0, 0, 0, c0, 0, ends0, lens0, 4); break;           // no context tokens
            case 12: nw = put_example(w, 0, 0, 0, c0, 3, ends0, lens0, 4); w[4] = 5; break;  // 5 endings declared, 4 written
            case 13: nw = put_example(w, 0, 0, 0, c0, 3, ends0, lens0, 4); w[5] = 30; break; // a context of 30 tokens declared
            default: break;
        }
        char bad_path[1024];
        snprintf(bad_path, sizeof(bad_path), "%s/bad_%zu.bin", DIR_HS, k);
        if (cases[k].kind == 9) { FILE* f = fopenCheck(bad_path, "wb"); fwriteCheck("short", 1, 5, f, bad_path); fclose(f); }
        else { write_eval(bad_path, cases[k].magic, cases[k].version, cases[k].count, cases[k].longest, w, nw); }
        HellaSwag bad;
        int brc = hellaswag_load(&bad, bad_path, 101, 16, "the model's context", err, sizeof(err));
        char name[256], cmd[4096], out[65536];
        snprintf(name, sizeof(name), "format: %s is refused by the reader, naming the file", cases[k].name);
        report(brc != 0 && strstr(err, bad_path) && strstr(err, cases[k].expect), name, "%s", brc ? err : "accepted");
        hellaswag_free(&bad);
        snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --eval-hellaswag %s --threads 1", REF_MODEL, bad_path);
        int trc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "format: %s is refused by train_gpt --eval-hellaswag with one clear line", cases[k].name);
        report(trc == 1 && strstr(out, "error: --eval-hellaswag: ") && strstr(out, bad_path) && strstr(out, cases[k].expect), name, "exit %d: %.400s", trc, out);
    }
}

// ----------------------------------------------------------------------------
// convert: ./tokenize hellaswag and scripts/prepare_hellaswag.sh

// Reads a JSON string starting at the quote p into out (UTF-8; the escapes \" \\ \/ \n \t \uXXXX of the BMP);
// returns the position after the closing quote, or NULL.
static const char* json_string(const char* p, char* out, size_t cap) {
    if (*p != '"') { return NULL; }
    size_t n = 0;
    for (p++; *p && *p != '"'; p++) {
        unsigned cp = (unsigned char)*p;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                char hex[5] = {p[1], p[2], p[3], p[4], 0};
                cp = (unsigned)strtoul(hex, NULL, 16);
                p += 4;
            } else {
                cp = *p == 'n' ? '\n' : *p == 't' ? '\t' : (unsigned char)*p;
            }
        }
        if (n + 4 >= cap) { return NULL; }
        if (cp < 0x80) { out[n++] = (char)cp; }
        else if (cp < 0x800) { out[n++] = (char)(0xC0 | (cp >> 6)); out[n++] = (char)(0x80 | (cp & 63)); }
        else { out[n++] = (char)(0xE0 | (cp >> 12)); out[n++] = (char)(0x80 | ((cp >> 6) & 63)); out[n++] = (char)(0x80 | (cp & 63)); }
    }
    out[n] = '\0';
    return *p == '"' ? p + 1 : NULL;
}

static void test_convert(void) {
    char cmd[8192], out[65536], path[1024], err[1024];
    snprintf(path, sizeof(path), "%s/tiny.bin", DIR_HS);
    snprintf(cmd, sizeof(cmd), "./tokenize hellaswag --vocab data/gpt2 --out %s %s", path, TINY_JSONL);
    int rc = run_capture(cmd, out, sizeof(out));
    HellaSwag hs;
    int lrc = rc == 0 ? hellaswag_load(&hs, path, 50257, 1024, "the model's context", err, sizeof(err)) : -1;
    FILE* hf = fopen(path, "rb");
    int32_t h[4] = {0, 0, 0, 0};
    if (hf) { if (fread(h, 4, 4, hf) != 4) { h[0] = 0; } fclose(hf); }
    report(rc == 0 && lrc == 0 && h[0] == 20240522 && h[1] == 1 && h[2] == 16 && hs.num_examples == 16 && hs.max_endings == 4,
           "convert: tokenize hellaswag writes an llm.c eval file (magic 20240522, version 1, 16 examples of 4 endings)",
           "exit %d%s%.300s", rc, lrc ? ": " : "", lrc ? (rc ? out : err) : "");
    if (rc != 0 || lrc != 0) { return; }
    // the longest example in bytes, in the header, is the largest example's size
    int longest = 0;
    for (int i = 0; i < hs.num_examples; i++) {
        int words = 6 + hs.ex[i].ctx_len + hs.ex[i].num_endings;
        for (int j = 0; j < hs.ex[i].num_endings; j++) { words += hs.ending_len[hs.ex[i].lens + j]; }
        if (2 * words > longest) { longest = 2 * words; }
    }
    report(h[3] == longest, "convert: the header's longest example is the largest example's size in bytes", "%d vs %d", h[3], longest);
    // every context and ending decodes to the JSONL's text, the endings with llm.c's leading space; labels and
    // indices as in the file (the label of example 4 is the string "0" there)
    char ids_path[1024], text_path[1024];
    snprintf(ids_path, sizeof(ids_path), "%s/ids.txt", DIR_HS);
    snprintf(text_path, sizeof(text_path), "%s/decoded.txt", DIR_HS);
    FILE* f = fopenCheck(ids_path, "w");
    for (int i = 0; i < hs.num_examples; i++) {
        const HsExample* x = &hs.ex[i];
        for (int t = 0; t < x->ctx_len; t++) { fprintf(f, "%d ", hs.tokens[x->first + t]); }
        for (int j = 0; j < x->num_endings; j++) {
            int len;
            const int32_t* e = hellaswag_ending(&hs, i, j, &len);
            fprintf(f, "50256 ");
            for (int t = 0; t < len; t++) { fprintf(f, "%d ", e[t]); }
        }
        fprintf(f, "50256 ");
    }
    fclose(f);
    snprintf(cmd, sizeof(cmd), "./tokenize decode --vocab data/gpt2 < %s > %s", ids_path, text_path);
    rc = system(cmd);
    FILE* tf = fopen(text_path, "rb");
    FILE* jf = fopen(TINY_JSONL, "r");
    static char decoded[1 << 16], line[1 << 14];
    size_t dn = tf ? fread(decoded, 1, sizeof(decoded) - 1, tf) : 0;
    decoded[dn] = '\0';
    if (tf) { fclose(tf); }
    int mismatches = 0, examples = 0;
    char first_bad[512] = "";
    const char* d = decoded;
    const char* sep = "<|endoftext|>";
    while (jf && fgets(line, sizeof(line), jf) && examples < hs.num_examples) {
        char want[2048], got[2048];
        const char* p = strstr(line, "\"ctx\": ");
        const char* q = strstr(line, "\"endings\": [");
        const char* lab = strstr(line, "\"label\": ");
        int label = lab ? atoi(lab + 9 + (lab[9] == '"')) : -1;
        if (!p || !q || !json_string(p + 7, want, sizeof(want))) { mismatches++; break; }
        q += 12;
        for (int j = -1; j < 4; j++) {
            if (j >= 0) {
                want[0] = ' ';
                q = json_string(q, want + 1, sizeof(want) - 1);
                if (!q) { mismatches++; break; }
                q += strspn(q, ", ");
            }
            const char* s = strstr(d, sep);
            if (!s) { mismatches++; break; }
            size_t gl = (size_t)(s - d) < sizeof(got) - 1 ? (size_t)(s - d) : sizeof(got) - 1;
            memcpy(got, d, gl);
            got[gl] = '\0';
            d = s + strlen(sep);
            if (strcmp(got, want) != 0) {
                if (!mismatches) { snprintf(first_bad, sizeof(first_bad), "example %d part %d: '%.200s' vs '%.200s'", examples, j, got, want); }
                mismatches++;
            }
        }
        if (hs.ex[examples].label != label || hs.ex[examples].index != examples) {
            if (!mismatches) { snprintf(first_bad, sizeof(first_bad), "example %d: label %d index %d (JSONL label %d)", examples, hs.ex[examples].label, hs.ex[examples].index, label); }
            mismatches++;
        }
        examples++;
    }
    if (jf) { fclose(jf); }
    report(rc == 0 && examples == 16 && mismatches == 0, "convert: every context and \" \" + ending decodes to the JSONL's text (JSON escapes included); labels and indices match",
           "%d examples, %d mismatches %s", examples, mismatches, first_bad);
    hellaswag_free(&hs);
    // scripts/prepare_hellaswag.sh on the local copy writes the same bytes
    snprintf(cmd, sizeof(cmd), "rm -rf %s/prep && HELLASWAG_JSONL=%s bash scripts/prepare_hellaswag.sh %s/prep && cmp %s %s/prep/hellaswag_val.bin",
             DIR_HS, TINY_JSONL, DIR_HS, path, DIR_HS);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "convert: HELLASWAG_JSONL=FILE scripts/prepare_hellaswag.sh writes the same file offline", "exit %d: %.300s", rc, out);
    // malformed JSONL: refused naming the line, and no output left behind
    struct { const char* name; const char* text; const char* expect; } bad[] = {
        {"a line that is not JSON", "{\"ctx\": \"a\", \"endings\": [\"b\"], \"label\": 0}\n{\"ctx\": oops}\n", "line 2"},
        {"a label out of range", "{\"ctx\": \"a\", \"endings\": [\"b\", \"c\", \"d\", \"e\"], \"label\": 4}\n", "label 4, but the endings are 0 to 3"},
        {"a missing \"endings\"", "{\"ctx\": \"a\", \"label\": 0}\n", "\\\"endings\\\" must be an array"},
        {"an empty context", "{\"ctx\": \"\", \"endings\": [\"b\"], \"label\": 0}\n", "the context has no tokens"},
        {"no examples", "\n\n", "holds no examples"},
        {"a string label with trailing characters", "{\"ctx\": \"a\", \"endings\": [\"b\", \"c\"], \"label\": \"1x\"}\n", "line 1: \\\"label\\\" must be a non-negative integer"},
        {"a fractional label", "{\"ctx\": \"a\", \"endings\": [\"b\", \"c\"], \"label\": 0.5}\n", "line 1: \\\"label\\\" must be a non-negative integer"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char in[1024], outp[1024], name[256];
        snprintf(in, sizeof(in), "%s/bad_%zu.jsonl", DIR_HS, k);
        snprintf(outp, sizeof(outp), "%s/bad_jsonl_%zu.bin", DIR_HS, k);
        f = fopenCheck(in, "w");
        fputs(bad[k].text, f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "./tokenize hellaswag --vocab data/gpt2 --out %s %s", outp, in);
        rc = run_capture(cmd, out, sizeof(out));
        snprintf(cmd, sizeof(cmd), "ls %s* 2>/dev/null | wc -l", outp);
        char left[64];
        run_capture(cmd, left, sizeof(left));
        const char* want = bad[k].expect;
        char unq[128];
        size_t u = 0;
        for (const char* s = want; *s && u + 1 < sizeof(unq); s++) { if (*s != '\\') { unq[u++] = *s; } }
        unq[u] = '\0';
        snprintf(name, sizeof(name), "convert: %s is refused, naming the input, and leaves no file", bad[k].name);
        report(rc == 1 && strstr(out, unq) && strstr(out, in) && atoi(left) == 0, name, "exit %d, %d files left: %.300s", rc, atoi(left), out);
    }
    // a vocabulary of 65535 ids (GPT-2's and made-up tokens up to id 65534, which no merge makes) gives GPT-2's file;
    // one of 65536 is refused naming its encoder.json (id 65535 marks an example's start in the format), no file left
    size_t n = (size_t)file_size("data/gpt2/encoder.json");
    char* gpt2 = (char*)mallocCheck(n + 1);
    FILE* gf = fopenCheck("data/gpt2/encoder.json", "rb");
    freadCheck(gpt2, 1, n, gf, "data/gpt2/encoder.json");
    fclose(gf);
    while (n > 0 && gpt2[n - 1] != '}') { n--; } // (the object's closing brace, the extra tokens before it)
    for (int V = 65535; V <= 65536; V++) {
        char dir[1024], enc[1200], outp[1200], left[64], want[1400];
        snprintf(dir, sizeof(dir), "%s/vocab_%d", DIR_HS, V);
        snprintf(enc, sizeof(enc), "%s/encoder.json", dir);
        snprintf(outp, sizeof(outp), "%s/vocab_%d.bin", DIR_HS, V);
        snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp data/gpt2/vocab.bpe %s/", dir, dir);
        if (run_capture(cmd, out, sizeof(out)) != 0) { report(0, "convert: a vocabulary of 65535 or 65536 ids", "%.300s", out); free(gpt2); return; }
        FILE* ef = fopenCheck(enc, "wb");
        fwriteCheck(gpt2, 1, n - 1, ef, enc);
        for (int id = 50257; id < V; id++) { fprintf(ef, ", \"qzx%d\": %d", id, id); }
        fputs("}", ef);
        fclose(ef);
        snprintf(cmd, sizeof(cmd), "./tokenize hellaswag --vocab %s --out %s %s", dir, outp, TINY_JSONL);
        rc = run_capture(cmd, out, sizeof(out));
        if (V == 65535) {
            snprintf(cmd, sizeof(cmd), "cmp %s %s", outp, path);
            int same = rc == 0 ? run_capture(cmd, left, sizeof(left)) : -1;
            report(rc == 0 && same == 0, "convert: a vocabulary of 65535 ids (the most the format holds) gives GPT-2's file",
                   "exit %d, cmp %d: %.300s", rc, same, out);
        } else {
            snprintf(cmd, sizeof(cmd), "ls %s* 2>/dev/null | wc -l", outp);
            run_capture(cmd, left, sizeof(left));
            snprintf(want, sizeof(want), "'%s' has 65536 ids", enc);
            report(rc == 1 && strstr(out, want) && atoi(left) == 0,
                   "convert: a vocabulary of 65536 ids is refused, naming its encoder.json, and leaves no file",
                   "exit %d, %d files left: %.300s", rc, atoi(left), out);
        }
    }
    free(gpt2);
    // what copies of the dataset hold and the format allows: a label as a string of digits, lines of spaces between
    // examples; the same file as with an integer label and no blank lines
    const char* same[2] = {"{\"ctx\": \"a b\", \"endings\": [\"c\", \"d\"], \"label\": 1}\n{\"ctx\": \"e\", \"endings\": [\"f\", \"g\"], \"label\": 0}\n",
                           "{\"ctx\": \"a b\", \"endings\": [\"c\", \"d\"], \"label\": \"1\"}\n   \t \n{\"ctx\": \"e\", \"endings\": [\"f\", \"g\"], \"label\": \"0\"}\n"};
    for (int k = 0; k < 2; k++) {
        char in[1024];
        snprintf(in, sizeof(in), "%s/same_%d.jsonl", DIR_HS, k);
        f = fopenCheck(in, "w");
        fputs(same[k], f);
        fclose(f);
    }
    snprintf(cmd, sizeof(cmd), "./tokenize hellaswag --vocab data/gpt2 --out %s/same_0.bin %s/same_0.jsonl && "
             "./tokenize hellaswag --vocab data/gpt2 --out %s/same_1.bin %s/same_1.jsonl && cmp %s/same_0.bin %s/same_1.bin",
             DIR_HS, DIR_HS, DIR_HS, DIR_HS, DIR_HS, DIR_HS);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "convert: labels as strings of digits and lines of spaces between examples give the file integer labels give",
           "exit %d: %.300s", rc, out);
}

// ----------------------------------------------------------------------------
// construct: answers known by construction

static void test_construct(void) {
    char cmd[8192], out[65536], path[1024], err[1024], name[256], line[256], line3[256];
    snprintf(path, sizeof(path), "%s/tiny.bin", DIR_HS);
    if (!file_exists(path)) {
        snprintf(cmd, sizeof(cmd), "./tokenize hellaswag --vocab data/gpt2 --out %s %s", path, TINY_JSONL);
        if (run_capture(cmd, out, sizeof(out)) != 0) { report(0, "construct: convert the tiny set", "%.300s", out); return; }
    }
    HellaSwag hs;
    if (hellaswag_load(&hs, path, 50257, 1024, "the model's context", err, sizeof(err)) != 0) { report(0, "construct: read the tiny set", "%s", err); return; }
    // the training text: each example's context + right ending, after <|endoftext|>, 60 times in shuffled orders
    char shard[1024];
    snprintf(shard, sizeof(shard), "%s/construct_train.bin", DIR_HS);
    FILE* f = fopenCheck(shard, "wb");
    int32_t hdr[256] = {0};
    fwriteCheck(hdr, 4, 256, f, shard);
    uint64_t s = 5;
    int order[64], total = 0;
    for (int rep = 0; rep < 60; rep++) {
        for (int i = 0; i < hs.num_examples; i++) { order[i] = i; }
        for (int i = hs.num_examples - 1; i > 0; i--) { int k = (int)(rng_next(&s) % (uint64_t)(i + 1)), t = order[i]; order[i] = order[k]; order[k] = t; }
        for (int i = 0; i < hs.num_examples; i++) {
            const HsExample* x = &hs.ex[order[i]];
            int len;
            const int32_t* e = hellaswag_ending(&hs, order[i], x->label, &len);
            uint16_t t = 50256;
            fwriteCheck(&t, 2, 1, f, shard);
            for (int k = 0; k < x->ctx_len; k++) { t = (uint16_t)hs.tokens[x->first + k]; fwriteCheck(&t, 2, 1, f, shard); }
            for (int k = 0; k < len; k++) { t = (uint16_t)e[k]; fwriteCheck(&t, 2, 1, f, shard); }
            total += 1 + x->ctx_len + len;
        }
    }
    hdr[0] = 20240520; hdr[1] = 1; hdr[2] = total;
    fseek(f, 0, SEEK_SET);
    fwriteCheck(hdr, 4, 256, f, shard);
    fclose(f);
    hellaswag_free(&hs);
    // d1 (1 layer, 64 channels, GPT-2's vocabulary) memorises the 16 rows in 200 steps (training loss ~0.7; the
    // right endings' mean loss ~0.5-0.8 against 12-15 for the wrong ones, which are 4 random words, so both answers
    // are right by a wide margin; seeds 7 and 42 also give 1.0000 and 1.0000)
    snprintf(cmd, sizeof(cmd), "rm -rf %s/construct && ./train_gpt --model d1 --seed 1337 --train %s --batch-size 4 --seq-len 48 --steps 200 "
             "--lr 5e-3 --warmup 10 --threads 1 --checkpoint-every 200 --out %s/construct", DIR_HS, shard, DIR_HS);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0, "construct: d1 trains on the right rows of the tiny set (200 steps)", "exit %d%s%.300s", rc, rc ? ": " : "", rc ? out : "");
    if (rc != 0) { return; }
    char model[1024];
    snprintf(model, sizeof(model), "%s/construct/model_00000200.bin", DIR_HS);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --eval-hellaswag %s --threads 1 --hellaswag-details %s/construct_1.txt", model, path, DIR_HS);
    rc = run_capture(cmd, out, sizeof(out));
    result_line(out, line, sizeof(line));
    report(rc == 0 && ends_with_result(out) && strcmp(line, "hellaswag: 16 examples, acc 1.0000, acc_norm 1.0000") == 0,
           "construct: the trained model answers every example (acc 1.0000, acc_norm 1.0000), last line", "exit %d: '%s'", rc, line);
    // the untrained model of the same shape prefers short endings (sum) and nothing (mean): well below
    snprintf(cmd, sizeof(cmd), "./train_gpt --model d1 --seed 1337 --eval-hellaswag %s --threads 1", path);
    rc = run_capture(cmd, out, sizeof(out));
    double a = -1, b = -1;
    result_line(out, line3, sizeof(line3));
    int parsed = sscanf(line3, "hellaswag: 16 examples, acc %lf, acc_norm %lf", &a, &b) == 2;
    report(rc == 0 && parsed && a <= 0.5 && b <= 0.5, "construct: the untrained model scores at most 0.5 on both (the test can fail)", "'%s'", line3);
    if (!g_have_mpi) { return; }
    snprintf(cmd, sizeof(cmd), "timeout 120 " MPIRUN " -np 3 ./train_gpt --init %s --eval-hellaswag %s --threads 1 --hellaswag-details %s/construct_3.txt",
             model, path, DIR_HS);
    rc = run_capture(cmd, out, sizeof(out));
    result_line(out, line3, sizeof(line3));
    snprintf(name, sizeof(name), "construct: 3 ranks print the same last line");
    report(rc == 0 && ends_with_result(out) && strcmp(line, line3) == 0, name, "exit %d: '%s' vs '%s'", rc, line3, line);
    char d1[1024], d3[1024];
    snprintf(d1, sizeof(d1), "%s/construct_1.txt", DIR_HS);
    snprintf(d3, sizeof(d3), "%s/construct_3.txt", DIR_HS);
    compare_details("construct: 3 ranks give every example's losses bit for bit", d1, d3, 0.0);
}

// ----------------------------------------------------------------------------
// reference: against PyTorch

static void test_reference(void) {
    char cmd[8192], out[65536], line[256], det[1024];
    snprintf(det, sizeof(det), "%s/ref_1.txt", DIR_HS);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --eval-hellaswag %s --threads 1 --hellaswag-details %s", REF_MODEL, REF_EVAL, det);
    int rc = run_capture(cmd, out, sizeof(out));
    result_line(out, line, sizeof(line));
    report(rc == 0 && ends_with_result(out), "reference: the reference model evaluates hellaswag_ref.bin (written by the PyTorch script)", "exit %d: %.300s", rc, rc ? out : line);
    if (rc != 0) { return; }
    // tolerance: the trainer computes in fp32 (token losses ~4.6, rows of up to 16 tokens), PyTorch in float64;
    // observed differences ~4e-8 relative. The examples were drawn so that each one's best ending leads by at least
    // 0.01 nats in sum and in mean, so any difference in an answer is a bug, not rounding.
    compare_details("reference: the same answers as PyTorch's evaluation; each ending's summed and mean loss within 1e-5 relative", REF_TXT, det, 1e-5);
    // the accuracies: the reference's last line "acc A acc_norm B" (%.9g) against the printed ones (%.4f)
    FILE* f = fopen(REF_TXT, "r");
    char buf[512], want[256] = "";
    double ra = -1, rb = -1;
    while (f && fgets(buf, sizeof(buf), f)) { if (sscanf(buf, "acc %lf acc_norm %lf", &ra, &rb) == 2) { break; } }
    if (f) { fclose(f); }
    static Detail dd[256];
    int n = read_details(REF_TXT, dd, 256);
    snprintf(want, sizeof(want), "hellaswag: %d examples, acc %.4f, acc_norm %.4f", n, ra, rb);
    report(n > 0 && strcmp(line, want) == 0, "reference: accuracies equal PyTorch's", "'%s' vs '%s'", line, want);
}

// ----------------------------------------------------------------------------
// ranks: the same evaluation on other layouts

static void test_ranks(void) {
    if (!g_have_mpi) { printf("SKIP ranks: mpirun not found\n"); return; }
    char cmd[8192], out[65536], line[256], ref_line[256], det1[1024];
    snprintf(det1, sizeof(det1), "%s/ref_1.txt", DIR_HS);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --eval-hellaswag %s --threads 1 --hellaswag-details %s", REF_MODEL, REF_EVAL, det1);
    int rc = run_capture(cmd, out, sizeof(out));
    result_line(out, ref_line, sizeof(ref_line));
    if (rc != 0) { report(0, "ranks: one process", "exit %d: %.300s", rc, out); return; }
    char l4_line[256], det_l4[1024];
    snprintf(det_l4, sizeof(det_l4), "%s/l4_1.txt", DIR_HS);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --eval-hellaswag %s --threads 1 --hellaswag-details %s", g_model_l4, REF_EVAL, det_l4);
    rc = run_capture(cmd, out, sizeof(out));
    result_line(out, l4_line, sizeof(l4_line));
    if (rc != 0) { report(0, "ranks: one process, 4-block model", "exit %d: %.300s", rc, out); return; }
    // data parallel (24 examples over 3 ranks) and the pipeline compute every example exactly as one process: bit for
    // bit. ZeRO-3 on the 4-block model, whose two layer slots take turns so that every forward gathers: over 5 ranks
    // the last round leaves one rank without an example, which must run an uncounted forward. Tensor parallelism
    // splits the matmuls (another summation order): the same answers, losses within 1e-5 relative.
    const struct { const char* name; int np; const char* args; int l4; double rtol; } cases[] = {
        {"3 data-parallel ranks", 3, "", 0, 0.0},
        {"pp 2", 2, "--pp 2", 0, 0.0},
        {"5 ranks, ZeRO-3 (4 blocks)", 5, "--zero 3", 1, 0.0},
        {"tp 2", 2, "--tp 2", 0, 1e-5},
        {"tp 2 x dp 2, sequence parallel, ZeRO-3 (4 blocks)", 4, "--tp 2 --sequence-parallel 1 --zero 3", 1, 1e-5},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char det[1024], name[256];
        const char* base_line = cases[k].l4 ? l4_line : ref_line;
        snprintf(det, sizeof(det), "%s/ranks_%zu.txt", DIR_HS, k);
        snprintf(cmd, sizeof(cmd), "timeout 120 " MPIRUN " -np %d ./train_gpt --init %s --eval-hellaswag %s --threads 1 --hellaswag-details %s %s",
                 cases[k].np, cases[k].l4 ? g_model_l4 : REF_MODEL, REF_EVAL, det, cases[k].args);
        rc = run_capture(cmd, out, sizeof(out));
        result_line(out, line, sizeof(line));
        snprintf(name, sizeof(name), "ranks: %s print the last line of one process", cases[k].name);
        report(rc == 0 && ends_with_result(out) && strcmp(line, base_line) == 0, name, "exit %d: '%s' vs '%s'%s%.300s", rc, line, base_line,
               rc ? ": " : "", rc ? out : "");
        snprintf(name, sizeof(name), cases[k].rtol == 0.0 ? "ranks: %s: every example's losses equal one process's, bit for bit"
                                                          : "ranks: %s: the same answers, losses within 1e-5 relative", cases[k].name);
        compare_details(name, cases[k].l4 ? det_l4 : det1, det, cases[k].rtol);
    }
}

// ----------------------------------------------------------------------------
// training: --hellaswag during a run

static void test_training(void) {
    char cmd[8192], out[65536], shard[1024], common[4096], quiet_log[1024], loud_log[1024], eval_line[256];
    snprintf(shard, sizeof(shard), "%s/train_000000.bin", DIR_HS);
    write_shard(shard, 4000, 101, 31, 20240520, 1, 4000);
    // B 2 x T 16: 32 tokens of activations, so an example of 4 rows of 16 needs two forwards, one of 5 endings three
    snprintf(common, sizeof(common), "--init %s --train %s --batch-size 2 --seq-len 16 --steps 10 --lr 1e-3 --threads 1", REF_MODEL, shard);
    // the initial model's accuracies, exactly: the shares of right answers in --eval-hellaswag's details
    char det[1024];
    snprintf(det, sizeof(det), "%s/train_eval.txt", DIR_HS);
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --eval-hellaswag %s --threads 1 --hellaswag-details %s", REF_MODEL, REF_EVAL, det);
    run_capture(cmd, out, sizeof(out));
    result_line(out, eval_line, sizeof(eval_line));
    static Detail dd[256];
    int nd = read_details(det, dd, 256), right_sum = 0, right_mean = 0;
    for (int i = 0; i < nd; i++) { right_sum += dd[i].by_sum == dd[i].label; right_mean += dd[i].by_mean == dd[i].label; }
    double ea = nd > 0 ? (double)right_sum / nd : -1, eb = nd > 0 ? (double)right_mean / nd : -1;
    // the 4-block model under ZeRO-3 (its layer slots take turns: every forward gathers), against one process with the
    // same flags (3 micro-steps of gradient accumulation)
    char common_l4[4096];
    snprintf(common_l4, sizeof(common_l4), "--init %s --train %s --batch-size 2 --seq-len 16 --steps 10 --lr 1e-3 --threads 1 --total-batch-size 96",
             g_model_l4, shard);
    // ... and with tensor and pipeline parallelism, whose evaluation forwards take the collectives of their groups
    const struct { const char* name; int np; const char* common; const char* args; } layouts[5] = {
        {"one process", 1, common, ""},
        {"4 blocks, one process", 1, common_l4, ""},
        {"4 blocks, 3 ranks, ZeRO-3", 3, common_l4, "--zero 3"},
        {"4 blocks, tp 2", 2, common_l4, "--tp 2"},
        {"4 blocks, pp 2", 2, common_l4, "--pp 2"},
    };
    for (int k = 0; k < 5; k++) {
        if (layouts[k].np > 1 && !g_have_mpi) { printf("SKIP training: %s: mpirun not found\n", layouts[k].name); continue; }
        char launch[256] = "";
        if (layouts[k].np > 1) { snprintf(launch, sizeof(launch), "timeout 120 %s -np %d", MPIRUN, layouts[k].np); }
        char name[256];
        snprintf(quiet_log, sizeof(quiet_log), "%s/quiet_%d.jsonl", DIR_HS, k);
        snprintf(loud_log, sizeof(loud_log), "%s/loud_%d.jsonl", DIR_HS, k);
        snprintf(cmd, sizeof(cmd), "%s ./train_gpt %s %s --log %s", launch, layouts[k].common, layouts[k].args, quiet_log);
        int rc = run_capture(cmd, out, sizeof(out));
        // every 4 steps of 10: at 0, 4, 8 and at the last step, which is not a multiple of 4; one process also keeps
        // llm.c's main.log (--out), whose "eval:" lines are acc_norm, as llm.c writes them
        char outdir[1024] = "";
        if (k == 0) { snprintf(outdir, sizeof(outdir), " --out %s/out_%d", DIR_HS, k); }
        snprintf(cmd, sizeof(cmd), "%s ./train_gpt %s %s --log %s --hellaswag %s --hellaswag-every 4%s", launch, layouts[k].common, layouts[k].args,
                 loud_log, REF_EVAL, outdir);
        int rc2 = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "training (%s): runs with and without --hellaswag", layouts[k].name);
        report(rc == 0 && rc2 == 0 && strstr(out, "| hellaswag acc "), name, "exit %d, %d%s%.300s", rc, rc2, rc2 ? ": " : "", rc2 ? out : "");
        if (rc != 0 || rc2 != 0) { continue; }
        snprintf(name, sizeof(name), "training (%s): the evaluation leaves the run unchanged, bit for bit (losses)", layouts[k].name);
        compare_losses(name, quiet_log, 0, loud_log, 10, 0.0);
        snprintf(name, sizeof(name), "training (%s): ... and the gradient norms", layouts[k].name);
        compare_values(name, "grad_norm", quiet_log, loud_log, 10, 0.0);
        char acc[8][32], accn[8][32], steps_seen[64] = "";
        int na = read_log_values(loud_log, "hellaswag_acc", acc, 8), nn = read_log_values(loud_log, "hellaswag_acc_norm", accn, 8);
        FILE* f = fopen(loud_log, "r");
        char buf[1024];
        while (f && fgets(buf, sizeof(buf), f)) {
            int st;
            if (strstr(buf, "\"hellaswag_acc\"") && sscanf(buf, "{\"step\": %d,", &st) == 1) {
                size_t l = strlen(steps_seen);
                snprintf(steps_seen + l, sizeof(steps_seen) - l, "%s%d", l ? " " : "", st);
            }
        }
        if (f) { fclose(f); }
        snprintf(name, sizeof(name), "training (%s): the log holds hellaswag_acc and hellaswag_acc_norm at steps 0, 4, 8 and the last, 10",
                 layouts[k].name);
        report(na == 4 && nn == 4 && strcmp(steps_seen, "0 4 8 10") == 0, name, "%d and %d values at steps '%s'", na, nn, steps_seen);
        if (k == 0) {
            // main.log: "s:STEP eval:ACC_NORM" (4 decimals) at the same steps
            char mpath[1200], want[256] = "", got[256] = "";
            snprintf(mpath, sizeof(mpath), "%s/out_%d/main.log", DIR_HS, k);
            const int at[4] = {0, 4, 8, 10};
            for (int i = 0; i < 4 && nn == 4; i++) {
                size_t l = strlen(want);
                snprintf(want + l, sizeof(want) - l, "s:%d eval:%.4f\n", at[i], atof(accn[i]));
            }
            FILE* mf = fopen(mpath, "r");
            while (mf && fgets(buf, sizeof(buf), mf)) {
                if (strstr(buf, " eval:") && strlen(got) + strlen(buf) < sizeof(got)) { strcat(got, buf); }
            }
            if (mf) { fclose(mf); }
            snprintf(name, sizeof(name), "training (%s): llm.c's main.log holds acc_norm as its eval lines, at the same steps", layouts[k].name);
            report(want[0] && strcmp(want, got) == 0, name, "'%s' (want '%s')", got, want);
            // step 0 is the initial model: its accuracies are --eval-hellaswag's (other forward shapes; the reference
            // examples' answers lead by 0.01 nats, so the same answers)
            snprintf(name, sizeof(name), "training (%s): step 0's accuracies equal --eval-hellaswag's of the same model", layouts[k].name);
            report(na == 4 && fabs(atof(acc[0]) - ea) < 1e-8 && fabs(atof(accn[0]) - eb) < 1e-8, name, "%s, %s vs %.9g, %.9g ('%s')",
                   na ? acc[0] : "-", nn ? accn[0] : "-", ea, eb, eval_line);
        } else if (k == 2) {
            // the same model and forward shapes as the one process: the same accuracies at step 0, exactly
            char ref_log[1024], ra[8][32], rn[8][32];
            snprintf(ref_log, sizeof(ref_log), "%s/loud_1.jsonl", DIR_HS);
            int nra = read_log_values(ref_log, "hellaswag_acc", ra, 8), nrn = read_log_values(ref_log, "hellaswag_acc_norm", rn, 8);
            snprintf(name, sizeof(name), "training (%s): step 0's accuracies equal one process's", layouts[k].name);
            report(na == 4 && nra == 4 && nrn == 4 && strcmp(acc[0], ra[0]) == 0 && strcmp(accn[0], rn[0]) == 0, name, "%s, %s vs %s, %s",
                   na ? acc[0] : "-", nn ? accn[0] : "-", nra ? ra[0] : "-", nrn ? rn[0] : "-");
        }
    }
    // refusals: rows longer than --seq-len, and flags that do nothing
    const struct { const char* name; const char* args; const char* expect; } bad[] = {
        {"rows longer than --seq-len", "--hellaswag tests/ref/hellaswag_ref.bin --hellaswag-every 5 --seq-len 8",
         "'tests/ref/hellaswag_ref.bin': example 2 (index 2, byte 1132): context + ending 0 = 9 + 6 = 15 tokens, more than 8 (--seq-len)"},
        {"--hellaswag without --hellaswag-every", "--hellaswag tests/ref/hellaswag_ref.bin", "needs --hellaswag-every N"},
        {"--hellaswag-every without --hellaswag", "--hellaswag-every 5", "needs --hellaswag FILE"},
        {"--eval-hellaswag with training flags", "--eval-hellaswag tests/ref/hellaswag_ref.bin", "--train does nothing with it"},
        {"--hellaswag-details without --eval-hellaswag", "--hellaswag-details x.txt", "needs --eval-hellaswag FILE"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        char name[256];
        snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --train %s --batch-size 2 --steps 1 --threads 1 %s%s", REF_MODEL, shard, bad[k].args,
                 strstr(bad[k].args, "--seq-len") ? "" : " --seq-len 16");
        int rc = run_capture(cmd, out, sizeof(out));
        snprintf(name, sizeof(name), "training: refused: %s", bad[k].name);
        report(rc == 1 && strstr(out, bad[k].expect), name, "exit %d: %.300s", rc, out);
    }
    // --eval-hellaswag --seq-len below the rows: the same refusal, naming the limit
    snprintf(cmd, sizeof(cmd), "./train_gpt --init %s --eval-hellaswag %s --seq-len 8 --threads 1", REF_MODEL, REF_EVAL);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc == 1 && strstr(out, "error: --eval-hellaswag: 'tests/ref/hellaswag_ref.bin': example 2") && strstr(out, "more than 8 (--seq-len)"),
           "training: --eval-hellaswag --seq-len 8 refuses the rows above 8 tokens", "exit %d: %.300s", rc, out);
}

int main(int argc, char** argv) {
    const char* only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) { only = argv[++i]; }
        else { fatal("test_hellaswag: unknown flag '%s' (--only GROUP: format, convert, construct, reference, ranks, training)", argv[i]); }
    }
    if (!file_exists("./train_gpt")) { fatal("test_hellaswag: ./train_gpt is missing: run make first (from the repository root)"); }
    g_have_mpi = system("command -v mpirun > /dev/null 2>&1") == 0;
    DIR_HS = test_scratch_dir("test_hellaswag");
    // the reference model's width (maxT 16, V 101 padded to 128, NH 4, C 32) with 4 blocks, GPT-2's initialisation
    snprintf(g_model_l4, sizeof(g_model_l4), "%s/model_l4.bin", DIR_HS);
    write_init_model(g_model_l4, (GPTConfig){16, 101, 128, 4, 4, 32}, 4242);
    int have_tokenize = file_exists("./tokenize");
    if (!only || strstr("format", only)) { test_format(); }
    if ((!only || strstr("convert", only)) && have_tokenize) { test_convert(); }
    if ((!only || strstr("construct", only)) && have_tokenize) { test_construct(); }
    if (!have_tokenize) { printf("SKIP convert, construct: ./tokenize is not built (needs PCRE2 and cJSON)\n"); }
    if (!only || strstr("reference", only)) { test_reference(); }
    if (!only || strstr("ranks", only)) { test_ranks(); }
    if (!only || strstr("training", only)) { test_training(); }
    return test_summary();
}
