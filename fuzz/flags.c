/*
fuzz/flags.c: fuzzes train_gpt.c's command line: parse_flags (every flag, alias, number and range check, the
combination checks), then config_serialize and config_from_name (--model by name) on what it accepted.

  make fuzz-build && fuzz/bin/flags -close_fd_mask=3 -dict=fuzz/flags.dict fuzz/corpus/flags
  fuzz/bin/flags CRASH_FILE                                             (reproduces one input, with messages)

Input: the arguments after argv[0], separated by NUL bytes (at most 64). `--help` ends in exit(0), which returns
to the harness like fatal(). Invariants (abort = a finding): every accepted number lies in its flag's range,
every accepted string is NUL-terminated within its field.
*/
#include "fuzz_common.h"

#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c" // defines: Config, FLAGS, config_defaults, parse_flags, config_serialize, config_from_name

#define MAX_ARGS 64

typedef struct {
    Config c;
    int argc;
    char** argv;
} Input;

static void run(void* arg) {
    Input* in = (Input*)arg;
    config_defaults(&in->c);
    parse_flags(&in->c, in->argc, in->argv);
    const Config* c = &in->c;
    for (int i = 0; i < NUM_FLAGS; i++) {
        const FlagSpec* f = &FLAGS[i];
        const char* p = (const char*)c + f->offset;
        if (f->type == FLAG_STR) {
            if (memchr(p, '\0', f->str_cap) == NULL) { fuzz_fail("--%s: string not terminated", f->name); }
            continue;
        }
        double x = f->type == FLAG_FLOAT ? (double)*(const float*)p
                 : f->offset == offsetof(Config, total_batch_size) ? (double)*(const long*)p : (double)*(const int*)p;
        int is_default = 0;
        Config d;
        config_defaults(&d);
        is_default = memcmp((const char*)&d + f->offset, p, f->type == FLAG_FLOAT ? sizeof(float)
                            : f->offset == offsetof(Config, total_batch_size) ? sizeof(long) : sizeof(int)) == 0;
        // the one value outside a range on purpose: --eval-hellaswag without --seq-len takes the model's context,
        // marked by seq_len 0 until the model is known
        int hs_context = c->eval_hellaswag[0] && f->offset == offsetof(Config, seq_len) && x == 0.0;
        if (!is_default && !hs_context && !(x >= f->lo && x <= f->hi)) { fuzz_fail("--%s = %g is outside [%g, %g]", f->name, x, f->lo, f->hi); }
    }
    static char buf[1 << 16];
    config_serialize(c, buf, sizeof(buf));
    GPTConfig g;
    if (config_from_name(&g, c->model)) {
        if (g.num_layers < 1 || g.channels < 1 || g.num_heads < 1 || g.channels % g.num_heads != 0) {
            fuzz_fail("--model %s gives an invalid shape", c->model);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    char* text = (char*)malloc(size + 1); // the arguments, NUL-terminated in place
    memcpy(text, data, size);
    text[size] = '\0';
    char* argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char*)"train_gpt";
    for (size_t i = 0; argc <= MAX_ARGS;) {
        argv[argc++] = text + i;
        size_t l = strlen(text + i);
        if (i + l >= size) { break; }
        i += l + 1;
    }
    if (size == 0) { argc = 1; }
    argv[argc] = NULL;
    static Input in; // Config holds several KB of strings
    in.argc = argc;
    in.argv = argv;
    fuzz_call(run, &in);
    free(text);
    return 0;
}
