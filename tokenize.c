/*
tokenize.c: the GPT-2 tokenizer tool: text to token ids and back, llm.c's gpt2_tokenizer.bin, and token shards.

  make tokenize
  ./tokenize encode     --vocab DIR [--allow-special] [--threads N]  < text  > ids
  ./tokenize decode     --vocab DIR | --bin gpt2_tokenizer.bin       < ids   > text
  ./tokenize export-bin --vocab DIR --out FILE
  ./tokenize shards     --vocab DIR --out-dir DIR --name NAME [--shard-size N] [--val-tokens N | --val-docs N]
                        [--split val|train] [--doc-sep STRING [--drop-sep] | --doc-per-file] [--threads N]
                        [FILE...]   (stdin if none)
  ./tokenize bench      --vocab DIR [--threads N] FILE
  ./tokenize hellaswag  --vocab DIR --out FILE [IN.jsonl]   (stdin if none)
  ./tokenize COMMAND --help

DIR holds OpenAI's encoder.json and vocab.bpe; --vocab defaults to $GPT2_VOCAB_DIR. The encoding is the one
described at the top of tokenizer.h (tiktoken's gpt2, plus a rule for invalid UTF-8).

Shards (llm.c's format, see tokenizer.h): every document is preceded by <|endoftext|> (50256); the token stream
is cut into shards of exactly --shard-size tokens (the last one of each split holds the rest). The first
--val-tokens tokens (or the first --val-docs documents) go to NAME_val_000000.bin, ..., the rest to
NAME_train_000000.bin, ... (--split val|train sends everything to one split). Documents are tokenized in parallel (OpenMP) and written in input order, so the
output does not depend on the thread count. Shards are written to a temporary name and renamed when complete;
an interrupted run (error or signal) leaves no partial shard under a final name.

hellaswag: HellaSwag's JSONL (one example per line with "ctx", "endings" and "label", as in the official
hellaswag_val.jsonl) to llm.c's multiple-choice eval file (format in hellaswag.h), tokenized as llm.c's
dev/data/hellaswag.py does: the context and each ending separately, the ending with a space before it
(" " + ending); the example's index is its position among the file's examples (blank lines are skipped).
*/
#define _GNU_SOURCE // memmem
#define TOKENIZER_ENCODER
#include "tokenizer.h" // defines: Encoder, EncoderScratch, TokenVec, encoder_init/encode/encode_parallel/decode/...
#include "utils.h"     // defines: fatal, fopenCheck, freadCheck, fwriteCheck, mallocCheck, AtomicFile, file_exists
#include "hellaswag.h" // defines: hellaswag_encode_example, HELLASWAG_MAGIC (the eval file's format)

#include <ctype.h>
#include <signal.h>
#include <time.h>

// ----------------------------------------------------------------------------
// flags: one table, used for parsing and for --help

enum { CMD_ENCODE = 1, CMD_DECODE = 2, CMD_EXPORT = 4, CMD_SHARDS = 8, CMD_BENCH = 16, CMD_HELLASWAG = 32, CMD_ALL = 63 };

typedef struct {
    const char* name;  // "--vocab"
    const char* arg;   // value placeholder, or NULL for a switch
    unsigned commands; // CMD_* that accept the flag
    const char* help;
} FlagSpec;

static const FlagSpec FLAGS[] = {
    {"--vocab", "DIR", CMD_ALL, "directory with encoder.json and vocab.bpe (default: $GPT2_VOCAB_DIR)"},
    {"--threads", "N", CMD_ENCODE | CMD_SHARDS | CMD_BENCH, "threads for encoding (default: all cores)"},
    {"--bin", "FILE", CMD_DECODE, "decode with llm.c's gpt2_tokenizer.bin instead of --vocab"},
    {"--allow-special", NULL, CMD_ENCODE, "the literal text <|endoftext|> becomes token 50256 (default: ordinary text)"},
    {"--out", "FILE", CMD_EXPORT | CMD_HELLASWAG, "where to write gpt2_tokenizer.bin (export-bin) or the eval file (hellaswag)"},
    {"--out-dir", "DIR", CMD_SHARDS, "directory for the shards (created if missing)"},
    {"--name", "NAME", CMD_SHARDS, "shards are NAME_val_000000.bin, NAME_train_000000.bin, ..."},
    {"--shard-size", "N", CMD_SHARDS, "tokens per shard (default 100000000)"},
    {"--val-tokens", "N", CMD_SHARDS, "the first N tokens go to the validation split"},
    {"--val-docs", "N", CMD_SHARDS, "the first N documents go to the validation split"},
    {"--split", "val|train", CMD_SHARDS, "every token goes to this split (e.g. a dataset's own validation file)"},
    {"--doc-sep", "STRING", CMD_SHARDS, "documents end after each STRING (escapes: \\n \\t \\r \\0 \\\\ \\xHH); the "
                                        "separator stays at the end of its document unless --drop-sep"},
    {"--drop-sep", NULL, CMD_SHARDS, "remove the --doc-sep text instead of keeping it"},
    {"--doc-per-file", NULL, CMD_SHARDS, "each input file (or stdin) is one document (the default)"},
    {"--help", NULL, CMD_ALL, "print this help"},
};
#define NUM_FLAGS (sizeof(FLAGS) / sizeof(FLAGS[0]))

static const struct { const char* name; unsigned bit; const char* usage; const char* what; } COMMANDS[] = {
    {"encode", CMD_ENCODE, "encode --vocab DIR < text", "prints the token ids of stdin, separated by spaces"},
    {"decode", CMD_DECODE, "decode --vocab DIR < ids   (or --bin gpt2_tokenizer.bin)", "writes the bytes of the whitespace-separated ids on stdin"},
    {"export-bin", CMD_EXPORT, "export-bin --vocab DIR --out FILE", "writes llm.c's gpt2_tokenizer.bin"},
    {"shards", CMD_SHARDS, "shards --vocab DIR --out-dir DIR --name NAME [options] [FILE...]",
     "tokenizes documents (from FILEs, or stdin) into llm.c token shards"},
    {"bench", CMD_BENCH, "bench --vocab DIR FILE", "prints encoding MB/s of FILE on 1 thread and on all cores"},
    {"hellaswag", CMD_HELLASWAG, "hellaswag --vocab DIR --out FILE [IN.jsonl]",
     "HellaSwag's JSONL (ctx, endings, label per line; stdin if no file) to llm.c's multiple-choice eval file"},
};
#define NUM_COMMANDS (sizeof(COMMANDS) / sizeof(COMMANDS[0]))

typedef struct {
    const char* vocab;
    const char* bin;
    int threads;
    int allow_special;
    const char* out;
    const char* out_dir;
    const char* name;
    uint64_t shard_size;
    uint64_t val_tokens;
    uint64_t val_docs;
    int have_val_tokens, have_val_docs;
    const char* split; // NULL, "val" or "train"
    char doc_sep[256];
    size_t doc_sep_len;
    int have_doc_sep, drop_sep, doc_per_file;
    const char** inputs; // positional arguments
    int num_inputs;
} Options;

static void print_usage(FILE* fp) {
    fprintf(fp, "usage: tokenize COMMAND [flags]   (tokenize COMMAND --help for its flags)\n");
    for (size_t i = 0; i < NUM_COMMANDS; i++) { fprintf(fp, "  %-11s %s\n", COMMANDS[i].name, COMMANDS[i].what); }
}

static void print_help(unsigned cmd) {
    for (size_t i = 0; i < NUM_COMMANDS; i++) {
        if (COMMANDS[i].bit == cmd) { printf("usage: tokenize %s\n%s\n\nflags:\n", COMMANDS[i].usage, COMMANDS[i].what); }
    }
    for (size_t i = 0; i < NUM_FLAGS; i++) {
        if (!(FLAGS[i].commands & cmd)) { continue; }
        char left[64];
        snprintf(left, sizeof(left), "%s%s%s", FLAGS[i].name, FLAGS[i].arg ? " " : "", FLAGS[i].arg ? FLAGS[i].arg : "");
        printf("  %-22s %s\n", left, FLAGS[i].help);
    }
}

// Parses a decimal integer flag value in [lo, hi], or exits naming the flag.
static uint64_t parse_u64(const char* flag, const char* value, uint64_t lo, uint64_t hi) {
    if (value[0] < '0' || value[0] > '9') { fatal("%s: '%s' is not a non-negative integer", flag, value); }
    errno = 0;
    char* end = NULL;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0') { fatal("%s: '%s' is not a non-negative integer", flag, value); }
    if (v < lo || v > hi) { fatal("%s: %llu is out of range [%llu, %llu]", flag, v, (unsigned long long)lo, (unsigned long long)hi); }
    return (uint64_t)v;
}

// Decodes the backslash escapes of --doc-sep into out; returns the length or exits.
static size_t parse_escapes(const char* s, char* out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        if (c == '\\') {
            char e = s[++i];
            if (e == 'n') { c = '\n'; }
            else if (e == 't') { c = '\t'; }
            else if (e == 'r') { c = '\r'; }
            else if (e == '0') { c = '\0'; }
            else if (e == '\\') { c = '\\'; }
            else if (e == 'x' && isxdigit((unsigned char)s[i + 1]) && isxdigit((unsigned char)s[i + 2])) {
                char hex[3] = {s[i + 1], s[i + 2], 0};
                c = (char)strtol(hex, NULL, 16);
                i += 2;
            } else {
                fatal("--doc-sep: unknown escape '\\%c' in '%s' (use \\n \\t \\r \\0 \\\\ \\xHH)", e ? e : ' ', s);
            }
        }
        if (n + 1 >= cap) { fatal("--doc-sep: '%s' is longer than %zu bytes", s, cap - 1); }
        out[n++] = c;
    }
    if (n == 0) { fatal("--doc-sep: the separator is empty"); }
    return n;
}

static void parse_flags(unsigned cmd, const char* cmd_name, int argc, char** argv, Options* o) {
    memset(o, 0, sizeof(*o));
    o->vocab = getenv("GPT2_VOCAB_DIR");
    o->shard_size = 100000000;
    o->inputs = (const char**)mallocCheck(sizeof(char*) * (size_t)(argc + 1));
    for (int i = 0; i < argc; i++) {
        const char* a = argv[i];
        if (strncmp(a, "--", 2) != 0 || strcmp(a, "-") == 0) { o->inputs[o->num_inputs++] = a; continue; }
        const FlagSpec* f = NULL;
        for (size_t k = 0; k < NUM_FLAGS; k++) {
            if (strcmp(FLAGS[k].name, a) == 0) { f = &FLAGS[k]; }
        }
        if (f == NULL || !(f->commands & cmd)) {
            fatal("%s: unknown flag for '%s' (see tokenize %s --help)", a, cmd_name, cmd_name);
        }
        if (strcmp(a, "--help") == 0) { print_help(cmd); exit(0); }
        const char* v = NULL;
        if (f->arg) {
            if (i + 1 >= argc) { fatal("%s: missing value %s", a, f->arg); }
            v = argv[++i];
        }
        if (strcmp(a, "--vocab") == 0) { o->vocab = v; }
        else if (strcmp(a, "--threads") == 0) { o->threads = (int)parse_u64(a, v, 1, 4096); }
        else if (strcmp(a, "--bin") == 0) { o->bin = v; }
        else if (strcmp(a, "--allow-special") == 0) { o->allow_special = 1; }
        else if (strcmp(a, "--out") == 0) { o->out = v; }
        else if (strcmp(a, "--out-dir") == 0) { o->out_dir = v; }
        else if (strcmp(a, "--name") == 0) { o->name = v; }
        else if (strcmp(a, "--shard-size") == 0) { o->shard_size = parse_u64(a, v, 1, INT32_MAX); }
        else if (strcmp(a, "--val-tokens") == 0) { o->val_tokens = parse_u64(a, v, 0, UINT64_MAX); o->have_val_tokens = 1; }
        else if (strcmp(a, "--val-docs") == 0) { o->val_docs = parse_u64(a, v, 0, UINT64_MAX); o->have_val_docs = 1; }
        else if (strcmp(a, "--split") == 0) {
            if (strcmp(v, "val") != 0 && strcmp(v, "train") != 0) { fatal("--split: '%s' is not val or train", v); }
            o->split = v;
        }
        else if (strcmp(a, "--doc-sep") == 0) { o->doc_sep_len = parse_escapes(v, o->doc_sep, sizeof(o->doc_sep)); o->have_doc_sep = 1; }
        else if (strcmp(a, "--drop-sep") == 0) { o->drop_sep = 1; }
        else if (strcmp(a, "--doc-per-file") == 0) { o->doc_per_file = 1; }
    }
    if ((o->vocab == NULL || o->vocab[0] == '\0') && !o->bin) { fatal("--vocab: no vocabulary directory given (flag or $GPT2_VOCAB_DIR)"); }
    if (o->have_val_tokens && o->have_val_docs) { fatal("--val-docs: give either --val-tokens or --val-docs, not both"); }
    if (o->split && (o->have_val_tokens || o->have_val_docs)) { fatal("--split: cannot be combined with --val-tokens or --val-docs"); }
    if (o->have_doc_sep && o->doc_per_file) { fatal("--doc-per-file: give either --doc-sep or --doc-per-file, not both"); }
    if (o->drop_sep && !o->have_doc_sep) { fatal("--drop-sep: needs --doc-sep"); }
    if (o->threads == 0) {
#ifdef _OPENMP
        o->threads = omp_get_max_threads();
#else
        o->threads = 1;
#endif
    }
    if (cmd == CMD_EXPORT && o->out == NULL) { fatal("--out: export-bin needs an output file"); }
    if (cmd == CMD_HELLASWAG && o->out == NULL) { fatal("--out: hellaswag needs an output file (the eval file)"); }
    if (cmd == CMD_HELLASWAG && o->num_inputs > 1) { fatal("hellaswag: one input file at most (got %d)", o->num_inputs); }
    if (cmd == CMD_SHARDS && o->out_dir == NULL) { fatal("--out-dir: shards needs an output directory"); }
    if (cmd == CMD_SHARDS && o->name == NULL) { fatal("--name: shards needs a dataset name"); }
    if (cmd == CMD_SHARDS && o->name && (o->name[0] == '\0' || strchr(o->name, '/'))) { fatal("--name: '%s' must be a plain file name prefix", o->name); }
    if (cmd == CMD_BENCH && o->num_inputs != 1) { fatal("bench: needs exactly one input FILE (got %d)", o->num_inputs); }
    if ((cmd == CMD_ENCODE || cmd == CMD_DECODE || cmd == CMD_EXPORT) && o->num_inputs > 0) {
        fatal("%s: unexpected argument '%s' (input is read from stdin)", cmd_name, o->inputs[0]);
    }
}

// ----------------------------------------------------------------------------
// helpers

// Reads a whole stream (stdin or a file) into a malloc'd buffer; exits naming `what` on a read error.
static uint8_t* read_stream(FILE* fp, const char* what, size_t* len) {
    size_t cap = 1 << 20, n = 0;
    uint8_t* buf = (uint8_t*)mallocCheck(cap);
    for (;;) {
        if (n == cap) {
            cap = mulSize(cap, 2);
            uint8_t* nb = (uint8_t*)realloc(buf, cap);
            if (nb == NULL) { fatal("out of memory reading %s (%zu bytes so far)", what, n); }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0) { break; }
    }
    if (ferror(fp)) { fatal("read error on %s: %s", what, strerror(errno)); }
    *len = n;
    return buf;
}

static void load_encoder(Encoder* e, const Options* o) {
    if (encoder_init(e, o->vocab) != 0) { exit(1); } // the message is printed already
}

static EncoderScratch* make_scratch(const Encoder* e, int n) {
    EncoderScratch* s = (EncoderScratch*)callocCheck((size_t)n, sizeof(EncoderScratch));
    for (int i = 0; i < n; i++) { encoder_scratch_init(&s[i], e); }
    return s;
}

static void free_scratch(EncoderScratch* s, int n) {
    for (int i = 0; i < n; i++) { encoder_scratch_free(&s[i]); }
    free(s);
}

// ----------------------------------------------------------------------------
// encode, decode, export-bin

static int cmd_encode(const Options* o) {
    Encoder e;
    load_encoder(&e, o);
    EncoderScratch* s = make_scratch(&e, o->threads);
    size_t n = 0;
    uint8_t* text = read_stream(stdin, "stdin", &n);
    TokenVec ids = {0};
    size_t pos = 0;
    static const char EOT[] = "<|endoftext|>";
    while (pos <= n) {
        size_t end = n;
        if (o->allow_special) {
            const uint8_t* hit = (const uint8_t*)memmem(text + pos, n - pos, EOT, sizeof(EOT) - 1);
            if (hit) { end = (size_t)(hit - text); }
        }
        encoder_encode_parallel(&e, s, o->threads, text + pos, end - pos, 1 << 20, &ids);
        if (end == n) { break; }
        tokenvec_push(&ids, e.eot_token);
        pos = end + sizeof(EOT) - 1;
    }
    char buf[16];
    for (size_t i = 0; i < ids.len; i++) {
        int k = snprintf(buf, sizeof(buf), i ? " %u" : "%u", ids.data[i]);
        fwriteCheck(buf, 1, (size_t)k, stdout, "stdout");
    }
    fwriteCheck("\n", 1, 1, stdout, "stdout");
    if (fflush(stdout) != 0) { fatal("write error on stdout: %s", strerror(errno)); }
    tokenvec_free(&ids);
    free(text);
    free_scratch(s, o->threads);
    encoder_free(&e);
    return 0;
}

static int cmd_decode(const Options* o) {
    Encoder e;
    Tokenizer t;
    memset(&e, 0, sizeof(e));
    memset(&t, 0, sizeof(t));
    uint32_t vocab_size;
    if (o->bin) {
        if (tokenizer_init(&t, o->bin) != 0) { exit(1); } // the message names the file
        vocab_size = t.vocab_size;
    } else {
        load_encoder(&e, o);
        vocab_size = e.vocab_size;
    }
    size_t n = 0;
    char* text = (char*)read_stream(stdin, "stdin", &n);
    text = (char*)realloc(text, n + 1);
    if (text == NULL) { fatal("out of memory"); }
    text[n] = '\0';
    size_t item = 0;
    char* p = text;
    for (;;) {
        while (*p && isspace((unsigned char)*p)) { p++; }
        if (*p == '\0') { break; }
        char* start = p;
        while (*p && !isspace((unsigned char)*p)) { p++; }
        char save = *p;
        *p = '\0';
        item++;
        char* end = NULL;
        errno = 0;
        unsigned long long v = strtoull(start, &end, 10);
        if (start[0] < '0' || start[0] > '9' || errno != 0 || *end != '\0') {
            fatal("stdin: '%s' (item %zu) is not a token id", start, item);
        }
        if (v >= vocab_size) { fatal("stdin: token id %s (item %zu) is outside the vocabulary 0..%u", start, item, vocab_size - 1); }
        size_t len;
        const uint8_t* b;
        if (o->bin) {
            b = (const uint8_t*)tokenizer_decode(&t, (uint32_t)v);
            len = tokenizer_token_length(&t, (uint32_t)v);
        } else {
            b = encoder_token_bytes(&e, (uint32_t)v, &len);
        }
        fwriteCheck(b, 1, len, stdout, "stdout");
        *p = save;
    }
    if (fflush(stdout) != 0) { fatal("write error on stdout: %s", strerror(errno)); }
    free(text);
    tokenizer_free(&t);
    encoder_free(&e);
    return 0;
}

static int cmd_export(const Options* o) {
    Encoder e;
    load_encoder(&e, o);
    encoder_write_bin(&e, o->out);
    fprintf(stderr, "wrote %s (%u tokens, eot %u)\n", o->out, e.vocab_size, e.eot_token);
    encoder_free(&e);
    return 0;
}

// ----------------------------------------------------------------------------
// hellaswag: JSONL to llm.c's multiple-choice eval file

// The example's label: a JSON integer, or a string of digits (as some copies of the dataset hold it); -1 if neither.
static int hellaswag_label(const cJSON* v) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        return d >= 0 && d <= 65535 && d == (double)(int)d ? (int)d : -1;
    }
    if (cJSON_IsString(v) && v->valuestring[0]) {
        char* end = NULL;
        errno = 0;
        long x = strtol(v->valuestring, &end, 10);
        if (errno == 0 && *end == '\0' && v->valuestring[0] >= '0' && v->valuestring[0] <= '9' && x <= 65535) { return (int)x; }
    }
    return -1;
}

static int cmd_hellaswag(const Options* o) {
    Encoder e;
    load_encoder(&e, o);
    if (e.vocab_size > HELLASWAG_START) { // (65535 marks an example's start: the format's ids are below it)
        fatal("hellaswag: '%s/encoder.json' has %u ids; llm.c's eval file holds ids below %d", o->vocab, e.vocab_size, HELLASWAG_START);
    }
    const char* what = o->num_inputs && strcmp(o->inputs[0], "-") != 0 ? o->inputs[0] : "stdin";
    FILE* fp = strcmp(what, "stdin") == 0 ? stdin : fopen(what, "rb");
    if (fp == NULL) { fatal("input '%s': %s", what, strerror(errno)); }
    size_t n = 0;
    char* text = (char*)read_stream(fp, what, &n);
    if (fp != stdin) { fclose(fp); }
    EncoderScratch* s = make_scratch(&e, 1);
    TokenVec ctx = {0}, ends[HELLASWAG_MAX_ENDINGS];
    memset(ends, 0, sizeof(ends));
    uint16_t* stream = (uint16_t*)mallocCheck(32768 * sizeof(uint16_t));
    AtomicFile af;
    atomic_open(&af, o->out);
    int32_t header[HELLASWAG_HEADER_INTS] = {0};
    fwriteCheck(header, sizeof(header), 1, af.fp, o->out); // the counts are filled in at the end
    int examples = 0, longest_bytes = 0, longest_row = 0, line_no = 0;
    size_t tokens = 0;
    for (size_t pos = 0; pos < n;) {
        size_t eol = pos;
        while (eol < n && text[eol] != '\n') { eol++; }
        line_no++;
        const char* line = text + pos;
        size_t len = eol - pos;
        pos = eol + 1;
        size_t k = 0;
        while (k < len && isspace((unsigned char)line[k])) { k++; }
        if (k == len) { continue; } // a blank line
        char jerr[256];
        cJSON* root = json_parse(line, len, jerr, sizeof(jerr));
        if (!root) { fatal("%s, line %d: not a JSON object: %s", what, line_no, jerr); }
        const cJSON* jc = cJSON_GetObjectItemCaseSensitive(root, "ctx");
        const cJSON* je = cJSON_GetObjectItemCaseSensitive(root, "endings");
        int label = hellaswag_label(cJSON_GetObjectItemCaseSensitive(root, "label"));
        int ne = cJSON_IsArray(je) ? cJSON_GetArraySize(je) : -1;
        if (!cJSON_IsObject(root) || !cJSON_IsString(jc)) { fatal("%s, line %d: no string \"ctx\"", what, line_no); }
        if (ne < 1 || ne > HELLASWAG_MAX_ENDINGS) { fatal("%s, line %d: \"endings\" must be an array of 1 to %d strings", what, line_no, HELLASWAG_MAX_ENDINGS); }
        if (label < 0) { fatal("%s, line %d: \"label\" must be a non-negative integer", what, line_no); }
        ctx.len = 0;
        encoder_encode(&e, &s[0], (const uint8_t*)jc->valuestring, strlen(jc->valuestring), &ctx);
        const uint32_t* ends_p[HELLASWAG_MAX_ENDINGS];
        int ends_n[HELLASWAG_MAX_ENDINGS];
        for (int j = 0; j < ne; j++) {
            const cJSON* x = cJSON_GetArrayItem(je, j);
            if (!cJSON_IsString(x)) { fatal("%s, line %d: ending %d is not a string", what, line_no, j); }
            size_t xl = strlen(x->valuestring);
            char* spaced = (char*)mallocCheck(xl + 2); // llm.c's rendering: " " + ending, tokenized on its own
            spaced[0] = ' ';
            memcpy(spaced + 1, x->valuestring, xl + 1);
            ends[j].len = 0;
            encoder_encode(&e, &s[0], (const uint8_t*)spaced, xl + 1, &ends[j]);
            free(spaced);
            ends_p[j] = ends[j].data;
            ends_n[j] = (int)ends[j].len;
            if (ctx.len + ends[j].len > (size_t)longest_row) { longest_row = (int)(ctx.len + ends[j].len); }
        }
        char why[256];
        size_t nv = ctx.len > 32767 ? 0 : hellaswag_encode_example(stream, examples, label, ctx.data, (int)ctx.len, ends_p, ends_n, ne, why, sizeof(why));
        if (nv == 0) { fatal("%s, line %d: cannot be written as an eval example: %s", what, line_no, ctx.len > 32767 ? "a context of over 32767 tokens" : why); }
        fwriteCheck(stream, sizeof(uint16_t), nv, af.fp, o->out);
        if ((int)(2 * nv) > longest_bytes) { longest_bytes = (int)(2 * nv); }
        tokens += nv - 6 - (size_t)ne;
        examples++;
        cJSON_Delete(root);
    }
    if (examples == 0) { atomic_abort(&af); fatal("hellaswag: %s holds no examples", what); }
    header[0] = HELLASWAG_MAGIC;
    header[1] = HELLASWAG_VERSION;
    header[2] = examples;
    header[3] = longest_bytes;
    if (fseek(af.fp, 0, SEEK_SET) != 0) { fatal("cannot seek in '%s': %s", af.tmp_path, strerror(errno)); }
    fwriteCheck(header, sizeof(header), 1, af.fp, o->out);
    atomic_commit(&af);
    fprintf(stderr, "hellaswag: %d examples, %zu tokens, longest row %d tokens (context + ending), longest example %d bytes -> %s\n",
            examples, tokens, longest_row, longest_bytes, o->out);
    tokenvec_free(&ctx);
    for (int j = 0; j < HELLASWAG_MAX_ENDINGS; j++) { tokenvec_free(&ends[j]); }
    free(stream);
    free(text);
    free_scratch(s, 1);
    encoder_free(&e);
    return 0;
}

// ----------------------------------------------------------------------------
// bench

static int cmd_bench(const Options* o) {
    Encoder e;
    load_encoder(&e, o);
    const char* path = o->inputs[0];
    FILE* fp = fopenCheck(path, "rb");
    size_t n = 0;
    uint8_t* text = read_stream(fp, path, &n);
    fclose(fp);
    if (n == 0) { fatal("bench: '%s' is empty", path); }
    printf("bench: %s, %zu bytes\n", path, n);
    double mbs[2] = {0, 0};
    size_t ntok[2] = {0, 0};
    TokenVec first = {0};
    for (int pass = 0; pass < 2; pass++) {
        int threads = pass == 0 ? 1 : o->threads;
        double total = 0;
        int runs = 0;
        while (runs < 1 || (total < 1.0 && runs < 20)) {
            EncoderScratch* s = make_scratch(&e, threads); // every run starts with a cold cache
            TokenVec ids = {0};
            tokenvec_reserve(&ids, n / 2 + 1024);
            size_t chunk = n / ((size_t)threads * 8) > (64u << 10) ? n / ((size_t)threads * 8) : (64u << 10);
            double t0 = now_seconds();
            if (threads == 1) {
                encoder_encode(&e, &s[0], text, n, &ids);
            } else {
                encoder_encode_parallel(&e, s, threads, text, n, chunk, &ids);
            }
            total += now_seconds() - t0;
            runs++;
            ntok[pass] = ids.len;
            if (pass == 0 && runs == 1) {
                first = ids;
            } else {
                if (ids.len != first.len || memcmp(ids.data, first.data, ids.len * sizeof(uint32_t)) != 0) {
                    fatal("bench: %d-thread encoding differs from the 1-thread encoding", threads);
                }
                tokenvec_free(&ids);
            }
            free_scratch(s, threads);
        }
        mbs[pass] = (double)n * runs / total / 1e6;
        printf("%d thread%s: %zu tokens, %d run%s, %.3f s/run, %.2f MB/s\n", threads, threads > 1 ? "s" : "",
               ntok[pass], runs, runs > 1 ? "s" : "", total / runs, mbs[pass]);
    }
    printf("encode MB/s: 1 thread %.2f, all cores (%d threads) %.2f\n", mbs[0], o->threads, mbs[1]);
    tokenvec_free(&first);
    free(text);
    encoder_free(&e);
    return 0;
}

// ----------------------------------------------------------------------------
// shards: writers

// Temporary files of shards being written, removed by the signal handler.
static char* volatile g_tmp_paths[2];

static void on_signal(int sig) {
    for (int i = 0; i < 2; i++) {
        char* p = g_tmp_paths[i];
        if (p) { unlink(p); }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

typedef struct {
    const char* dir;
    const char* name;
    const char* split;     // "val" or "train"
    int slot;              // index into g_tmp_paths
    uint64_t shard_size;   // tokens per shard
    int version;           // 1: uint16 tokens, 2: uint32 tokens
    AtomicFile af;
    int open;
    uint64_t count;        // tokens in the open shard
    int index;             // number of the open (or next) shard
    uint64_t total;        // tokens written to this split
    uint16_t buf16[4096];
} ShardWriter;

static void shard_path(const ShardWriter* w, int index, char* path, size_t cap) {
    if (snprintf(path, cap, "%s/%s_%s_%06d.bin", w->dir, w->name, w->split, index) >= (int)cap) {
        fatal("--out-dir and --name: a shard's path would be longer than %zu bytes", cap - 1);
    }
}

static void shard_close(ShardWriter* w) {
    if (!w->open) { return; }
    int32_t header[SHARD_HEADER_INTS];
    memset(header, 0, sizeof(header));
    header[0] = SHARD_MAGIC;
    header[1] = w->version;
    header[2] = (int32_t)w->count;
    fseekCheck(w->af.fp, 0, SEEK_SET, w->af.tmp_path);
    fwriteCheck(header, sizeof(int32_t), SHARD_HEADER_INTS, w->af.fp, w->af.tmp_path);
    atomic_commit(&w->af);
    g_tmp_paths[w->slot] = NULL;
    fprintf(stderr, "wrote %s (%llu tokens)\n", w->af.path, (unsigned long long)w->count);
    w->open = 0;
    w->index++;
}

static void shard_put(ShardWriter* w, const uint32_t* ids, size_t n) {
    while (n > 0) {
        if (!w->open) {
            char path[4096];
            shard_path(w, w->index, path, sizeof(path));
            atomic_open(&w->af, path);
            g_tmp_paths[w->slot] = w->af.tmp_path;
            int32_t header[SHARD_HEADER_INTS];
            memset(header, 0, sizeof(header)); // rewritten with the count when the shard is complete
            fwriteCheck(header, sizeof(int32_t), SHARD_HEADER_INTS, w->af.fp, w->af.tmp_path);
            w->open = 1;
            w->count = 0;
        }
        size_t k = (size_t)(w->shard_size - w->count) < n ? (size_t)(w->shard_size - w->count) : n;
        if (w->version == 1) {
            for (size_t i = 0; i < k;) {
                size_t m = k - i < 4096 ? k - i : 4096;
                for (size_t j = 0; j < m; j++) { w->buf16[j] = (uint16_t)ids[i + j]; }
                fwriteCheck(w->buf16, sizeof(uint16_t), m, w->af.fp, w->af.tmp_path);
                i += m;
            }
        } else {
            fwriteCheck(ids, sizeof(uint32_t), k, w->af.fp, w->af.tmp_path);
        }
        w->count += k;
        w->total += k;
        ids += k;
        n -= k;
        if (w->count == w->shard_size) { shard_close(w); }
    }
}

// Routes the token stream: the first val_tokens tokens (or the tokens of the first val_docs documents) to the
// validation writer, the rest to the training writer.
typedef struct {
    ShardWriter val, train;
    int by_docs;
    uint64_t val_tokens_left;
    uint64_t val_docs;
    uint64_t docs;         // documents started so far
    uint32_t eot;
} Sink;

static void sink_put(Sink* s, const uint32_t* ids, size_t n) {
    if (s->by_docs) {
        shard_put(s->docs <= s->val_docs ? &s->val : &s->train, ids, n);
        return;
    }
    size_t k = s->val_tokens_left < n ? (size_t)s->val_tokens_left : n;
    if (k) { shard_put(&s->val, ids, k); s->val_tokens_left -= k; }
    if (n > k) { shard_put(&s->train, ids + k, n - k); }
}

static void sink_doc_start(Sink* s) {
    s->docs++;
    sink_put(s, &s->eot, 1);
}

// ----------------------------------------------------------------------------
// shards: reading documents and encoding them in parallel batches

#define READ_BLOCK (8u << 20)   // bytes read from an input at a time
#define ITEM_BYTES (1u << 20)   // documents longer than this are cut (at safe cuts) into items of about this size
#define BIG_DOC (64u << 20)     // an unfinished document longer than this is encoded in part before it ends

typedef struct {
    size_t off, len;  // bytes in the batch buffer
    int eot;          // 1 if a new document starts here (<|endoftext|> goes first)
    size_t out_off, out_len;
    int out_thread;
} Item;

typedef struct {
    const Encoder* e;
    EncoderScratch* scratch;
    int threads;
    uint8_t* buf;     // batch text
    size_t len, cap;
    Item* items;
    size_t nitems, items_cap;
    TokenVec* outs;   // (threads) each thread's ids, items refer into them
    size_t batch_bytes;
    Sink* sink;
    uint64_t bytes_in, docs;
} Batch;

static void batch_flush(Batch* b) {
    if (b->nitems == 0) { return; }
    for (int t = 0; t < b->threads; t++) { b->outs[t].len = 0; }
#pragma omp parallel for schedule(dynamic, 1) num_threads(b->threads)
    for (long i = 0; i < (long)b->nitems; i++) {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        Item* it = &b->items[i];
        TokenVec v = b->outs[tid]; // a local copy: neighbouring outs[] share cache lines (false sharing)
        it->out_thread = tid;
        it->out_off = v.len;
        encoder_encode(b->e, &b->scratch[tid], b->buf + it->off, it->len, &v);
        it->out_len = v.len - it->out_off;
        b->outs[tid] = v;
    }
    for (size_t i = 0; i < b->nitems; i++) {
        const Item* it = &b->items[i];
        if (it->eot) { sink_doc_start(b->sink); }
        sink_put(b->sink, b->outs[it->out_thread].data + it->out_off, it->out_len);
    }
    b->nitems = 0;
    b->len = 0;
}

// Adds text (a whole document, or a part of one cut at a safe cut) to the batch; eot marks a document start.
static void batch_add(Batch* b, const uint8_t* text, size_t n, int eot) {
    if (n == 0) { return; } // empty documents are skipped
    if (eot) { b->docs++; }
    b->bytes_in += n;
    size_t pos = 0;
    while (pos < n) {
        size_t end = n;
        if (n - pos > 2 * ITEM_BYTES) {
            size_t c = encoder_find_cut(text, pos + ITEM_BYTES, n);
            if (c) { end = c; }
        }
        if (b->len + (end - pos) > b->cap) {
            size_t cap = b->cap ? b->cap : (16u << 20);
            while (cap < b->len + (end - pos)) { cap = mulSize(cap, 2); }
            b->buf = (uint8_t*)realloc(b->buf, cap);
            if (!b->buf) { fatal("out of memory growing the batch to %zu bytes", cap); }
            b->cap = cap;
        }
        if (b->nitems == b->items_cap) {
            b->items_cap = b->items_cap ? 2 * b->items_cap : 1024;
            b->items = (Item*)realloc(b->items, b->items_cap * sizeof(Item));
            if (!b->items) { fatal("out of memory"); }
        }
        memcpy(b->buf + b->len, text + pos, end - pos);
        Item* it = &b->items[b->nitems++];
        memset(it, 0, sizeof(*it));
        it->off = b->len;
        it->len = end - pos;
        it->eot = eot && pos == 0;
        b->len += end - pos;
        pos = end;
        if (b->len >= b->batch_bytes) { batch_flush(b); }
    }
}

// Splits one input into documents and feeds them to the batch. Documents end after each separator (kept or
// dropped) or at the end of the input; empty documents are skipped.
static void read_documents(Batch* b, const Options* o, FILE* fp, const char* what) {
    size_t cap = READ_BLOCK * 2, len = 0, start = 0, scan = 0;
    uint8_t* buf = (uint8_t*)mallocCheck(cap);
    int started = 0; // the current document's <|endoftext|> and first part were already emitted
    for (;;) {
        if (start > 0) { // compact: keep the unfinished document at the front
            memmove(buf, buf + start, len - start);
            len -= start;
            scan -= start;
            start = 0;
        }
        if (len + READ_BLOCK > cap) {
            cap = mulSize(cap, 2);
            buf = (uint8_t*)realloc(buf, cap);
            if (!buf) { fatal("out of memory reading %s", what); }
        }
        size_t got = fread(buf + len, 1, READ_BLOCK, fp);
        if (got == 0 && ferror(fp)) { fatal("read error on %s: %s", what, strerror(errno)); }
        len += got;
        if (o->have_doc_sep) {
            for (;;) {
                const uint8_t* hit = (const uint8_t*)memmem(buf + scan, len - scan, o->doc_sep, o->doc_sep_len);
                if (hit == NULL) {
                    scan = len >= o->doc_sep_len ? len - o->doc_sep_len + 1 : 0;
                    if (scan < start) { scan = start; }
                    break;
                }
                size_t sep = (size_t)(hit - buf);
                size_t end = o->drop_sep ? sep : sep + o->doc_sep_len;
                if (end > start || started) { batch_add(b, buf + start, end - start, !started); }
                started = 0;
                start = sep + o->doc_sep_len;
                scan = start;
            }
        }
        if (got == 0) { break; }
        // a long unfinished document is encoded up to its last safe cut (the rest waits for more input)
        if (len - start > BIG_DOC) {
            // (with a separator, only before `scan`: no separator can start before it, so none is cut in two)
            size_t c = encoder_find_cut_last(buf, start + 1, o->have_doc_sep ? scan : len);
            if (c > start) {
                batch_add(b, buf + start, c - start, !started);
                started = 1;
                start = c;
                if (scan < start) { scan = start; }
            }
        }
    }
    if (len > start || started) { batch_add(b, buf + start, len - start, !started); }
    free(buf);
}

static int cmd_shards(const Options* o) {
    Encoder e;
    load_encoder(&e, o);
    if (mkdir(o->out_dir, 0755) != 0 && errno != EEXIST) { fatal("--out-dir: cannot create '%s': %s", o->out_dir, strerror(errno)); }
    struct stat st;
    if (stat(o->out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) { fatal("--out-dir: '%s' is not a directory", o->out_dir); }
    // open every input up front, so a missing file is reported before any work
    int ninputs = o->num_inputs ? o->num_inputs : 1;
    FILE** fps = (FILE**)mallocCheck(sizeof(FILE*) * (size_t)ninputs);
    for (int i = 0; i < ninputs; i++) {
        const char* p = o->num_inputs ? o->inputs[i] : "-";
        if (strcmp(p, "-") == 0) { fps[i] = stdin; continue; }
        fps[i] = fopen(p, "rb");
        if (fps[i] == NULL) { fatal("input '%s': %s", p, strerror(errno)); }
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);

    Sink sink;
    memset(&sink, 0, sizeof(sink));
    int version = e.vocab_size > 65536 ? 2 : 1;
    ShardWriter* ws[2] = {&sink.val, &sink.train};
    const char* splits[2] = {"val", "train"};
    for (int k = 0; k < 2; k++) {
        ws[k]->dir = o->out_dir;
        ws[k]->name = o->name;
        ws[k]->split = splits[k];
        ws[k]->slot = k;
        ws[k]->shard_size = o->shard_size;
        ws[k]->version = version;
    }
    sink.by_docs = o->have_val_docs;
    sink.val_docs = o->val_docs;
    sink.val_tokens_left = o->have_val_tokens ? o->val_tokens : 0;
    if (o->split && strcmp(o->split, "val") == 0) { sink.val_tokens_left = UINT64_MAX; }
    sink.eot = e.eot_token;

    Batch b;
    memset(&b, 0, sizeof(b));
    b.e = &e;
    b.threads = o->threads;
    b.scratch = make_scratch(&e, o->threads);
    b.outs = (TokenVec*)callocCheck((size_t)o->threads, sizeof(TokenVec));
    b.batch_bytes = (size_t)o->threads * (8u << 20);
    b.sink = &sink;
    double t0 = now_seconds();
    for (int i = 0; i < ninputs; i++) {
        const char* what = o->num_inputs && strcmp(o->inputs[i], "-") != 0 ? o->inputs[i] : "stdin";
        read_documents(&b, o, fps[i], what);
        if (fps[i] != stdin) { fclose(fps[i]); }
    }
    batch_flush(&b);
    shard_close(&sink.val);
    shard_close(&sink.train);
    double dt = now_seconds() - t0;
    if (b.docs == 0) { fprintf(stderr, "warning: the input held no documents; no shards written\n"); }
    if ((o->have_val_tokens || o->have_val_docs) && sink.train.total == 0 && b.docs > 0) {
        fprintf(stderr, "warning: every token went to the validation split; no training shard written\n");
    }
    for (int k = 0; k < 2; k++) { // a shard from an earlier, longer run would be read as part of this dataset
        char p[4096];
        shard_path(ws[k], ws[k]->index, p, sizeof(p));
        if (file_exists(p)) { fprintf(stderr, "warning: '%s' is left from an earlier run; remove it\n", p); }
    }
    fprintf(stderr, "shards: %llu documents, %llu bytes -> %llu val tokens in %d shard%s, %llu train tokens in %d shard%s; "
            "%.1f s, %.2f MB/s on %d threads\n",
            (unsigned long long)b.docs, (unsigned long long)b.bytes_in, (unsigned long long)sink.val.total,
            sink.val.index, sink.val.index == 1 ? "" : "s", (unsigned long long)sink.train.total, sink.train.index,
            sink.train.index == 1 ? "" : "s", dt, dt > 0 ? (double)b.bytes_in / dt / 1e6 : 0.0, o->threads);
    for (int t = 0; t < o->threads; t++) { tokenvec_free(&b.outs[t]); }
    free(b.outs);
    free(b.buf);
    free(b.items);
    free_scratch(b.scratch, o->threads);
    free(fps);
    encoder_free(&e);
    return 0;
}

// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) { print_version("tokenize"); return 0; }
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    unsigned cmd = 0;
    for (size_t i = 0; i < NUM_COMMANDS; i++) {
        if (strcmp(argv[1], COMMANDS[i].name) == 0) { cmd = COMMANDS[i].bit; }
    }
    if (cmd == 0) {
        fprintf(stderr, "error: unknown command '%s'\n", argv[1]);
        print_usage(stderr);
        return 1;
    }
    Options o;
    parse_flags(cmd, argv[1], argc - 2, argv + 2, &o);
    int rc = 0;
    switch (cmd) {
        case CMD_ENCODE: rc = cmd_encode(&o); break;
        case CMD_DECODE: rc = cmd_decode(&o); break;
        case CMD_EXPORT: rc = cmd_export(&o); break;
        case CMD_SHARDS: rc = cmd_shards(&o); break;
        case CMD_BENCH: rc = cmd_bench(&o); break;
        case CMD_HELLASWAG: rc = cmd_hellaswag(&o); break;
    }
    free(o.inputs);
    return rc;
}
