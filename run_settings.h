/*
run_settings.h: the run's settings in a checkpoint's state header and what a resume does with them
(--resume-settings), split out of checkpoint.h by topic and included by it after the header's word indices (it uses
the configuration, the learning-rate schedule lr_at and the PowerSGD spec of train_gpt.c; it is not a standalone
header).
*/
#ifndef RUN_SETTINGS_H
#define RUN_SETTINGS_H

// The run's settings, recorded in every state header so that a resume names each one it changes (--resume-settings
// note, the default: this run's flags apply), stops on any (refuse), or takes the checkpoint's (checkpoint). They
// are the flags that shape the trajectory beside the model, its state and the data order: the optimizer's, the
// schedule's (--steps is the schedule's length unless it is constant), the sequence length, the global batch, the
// precision and the gradient compression. The layout (processes, --zero, --tp, --pp, --batch-size, --recompute,
// --comm) is not among them: continuing a run on another layout is what resuming is for. Files written before the
// settings were recorded hold only the sequence length, the global batch (0: unknown) and, from version 5, the
// precision; the rest reads as not recorded.

static const char* const LR_SCHEDULES[] = {"cosine", "linear", "constant", "wsd"};
#define NUM_LR_SCHEDULES 4

typedef struct {
    int recorded;            // the ST_SET_* words are set
    float lr, final_lr_frac, weight_decay, grad_clip, beta1, beta2, eps;
    int warmup, steps;
    int decay_steps;         // --lr-decay-steps (0: the decay ends at --steps)
    long ramp_start, ramp_tokens; // --batch-ramp-start, --batch-ramp-tokens (0: no ramp)
    char schedule[32];       // --lr-schedule
    char grad_compress[24];  // none | bf16 | powersgd:R
    int seq_len;             // 0: not recorded (states converted from llm.c's)
    long total_batch;        // 0: not recorded
    int dtype;               // -1: not recorded (versions 3 and 4)
    int master;              // fp32 master weights beside a 16-bit compute copy (-1: not recorded)
} RunSettings;

static uint64_t float_word(float x) { uint32_t b; memcpy(&b, &x, 4); return b; }
static float word_float(uint64_t w) { uint32_t b = (uint32_t)w; float x; memcpy(&x, &b, 4); return x; }

// --grad-compress as one word: 1 none, 2 bf16, 3 + 256 R powersgd:R (0 stays "not recorded")
static uint64_t compress_word(const char* spec) {
    char err[256];
    int r = powersgd_spec_rank(spec, err, sizeof(err));
    return r > 0 ? 3 + 256 * (uint64_t)r : strcmp(spec, "bf16") == 0 ? 2 : 1;
}

static void settings_of_run(const Config* c, RunSettings* s) {
    memset(s, 0, sizeof(*s));
    s->recorded = 1;
    s->lr = c->lr; s->final_lr_frac = c->final_lr_frac; s->weight_decay = c->weight_decay; s->grad_clip = c->grad_clip;
    s->beta1 = c->adam_beta1; s->beta2 = c->adam_beta2; s->eps = c->adam_eps;
    s->warmup = c->warmup; s->steps = c->steps;
    s->decay_steps = c->lr_decay_steps; s->ramp_start = c->batch_ramp_start; s->ramp_tokens = c->batch_ramp_tokens;
    snprintf(s->schedule, sizeof(s->schedule), "%s", c->lr_schedule);
    snprintf(s->grad_compress, sizeof(s->grad_compress), "%s", c->grad_compress);
    s->seq_len = c->seq_len; s->total_batch = c->total_batch_size;
    s->dtype = dtype_parse(c->dtype);
    s->master = s->dtype != DTYPE_FP32 && c->master_weights;
}

static void settings_to_header(uint64_t* h, const Config* c) {
    int sched = 0;
    while (sched < NUM_LR_SCHEDULES && strcmp(LR_SCHEDULES[sched], c->lr_schedule) != 0) { sched++; }
    h[ST_SETTINGS] = 1;
    h[ST_SET_LR] = float_word(c->lr); h[ST_SET_SCHEDULE] = (uint64_t)sched + 1; h[ST_SET_WARMUP] = (uint64_t)c->warmup;
    h[ST_SET_FINAL_FRAC] = float_word(c->final_lr_frac); h[ST_SET_STEPS] = (uint64_t)c->steps;
    h[ST_SET_WD] = float_word(c->weight_decay); h[ST_SET_CLIP] = float_word(c->grad_clip);
    h[ST_SET_BETA1] = float_word(c->adam_beta1); h[ST_SET_BETA2] = float_word(c->adam_beta2); h[ST_SET_EPS] = float_word(c->adam_eps);
    h[ST_SET_COMPRESS] = compress_word(c->grad_compress);
    h[ST_SET_DECAY_STEPS] = (uint64_t)c->lr_decay_steps;
    h[ST_SET_RAMP_START] = (uint64_t)c->batch_ramp_start; h[ST_SET_RAMP_TOKENS] = (uint64_t)c->batch_ramp_tokens;
}

// The settings a state header records (h: the whole header, its version checked); exits on words no writer makes.
static RunSettings settings_from_header(const char* path, const uint64_t* h) {
    RunSettings s;
    memset(&s, 0, sizeof(s));
    s.seq_len = (int)h[ST_T];
    s.total_batch = (long)h[ST_TOTAL_BATCH];
    int v5 = h[ST_VERSION] >= STATE_VERSION;
    s.dtype = v5 ? (int)h[ST_DTYPE] : -1;
    s.master = v5 ? (int)h[ST_HAS_MASTER] : -1;
    if (h[ST_SETTINGS] == 0) { return s; }
    uint64_t sched = h[ST_SET_SCHEDULE], comp = h[ST_SET_COMPRESS], psgd_r = comp >= 3 ? (comp - 3) / 256 : 0;
    int ok = h[ST_SETTINGS] == 1 && sched >= 1 && sched <= NUM_LR_SCHEDULES && h[ST_SET_WARMUP] <= 1000000000ull &&
             h[ST_SET_STEPS] <= 1000000000ull && h[ST_SET_DECAY_STEPS] <= 1000000000ull && h[ST_SET_RAMP_START] <= 1000000000000ull &&
             h[ST_SET_RAMP_TOKENS] <= 10000000000000ull && (h[ST_SET_RAMP_START] == 0) == (h[ST_SET_RAMP_TOKENS] == 0) && (comp == 1 || comp == 2 || (comp >= 3 && (comp - 3) % 256 == 0 && psgd_r >= 1 && psgd_r <= POWERSGD_MAX_RANK));
    for (int w = ST_SET_LR; ok && w <= ST_SET_EPS; w++) {
        if (w != ST_SET_SCHEDULE && w != ST_SET_WARMUP && w != ST_SET_STEPS) { ok = isfinite(word_float(h[w])) && word_float(h[w]) >= 0.0f && h[w] >> 32 == 0; }
    }
    // (the ranges the flags accept, so that --resume-settings checkpoint can take them as they are)
    ok = ok && word_float(h[ST_SET_FINAL_FRAC]) <= 1.0f && word_float(h[ST_SET_BETA1]) < 1.0f && word_float(h[ST_SET_BETA2]) < 1.0f &&
         word_float(h[ST_SET_EPS]) > 0.0f;
    if (!ok) { fatal("checkpoint state '%s': corrupt header (its run's settings, words %d to %d)", path, ST_SETTINGS, ST_SET_LAST); }
    s.recorded = 1;
    s.lr = word_float(h[ST_SET_LR]); s.final_lr_frac = word_float(h[ST_SET_FINAL_FRAC]);
    s.weight_decay = word_float(h[ST_SET_WD]); s.grad_clip = word_float(h[ST_SET_CLIP]);
    s.beta1 = word_float(h[ST_SET_BETA1]); s.beta2 = word_float(h[ST_SET_BETA2]); s.eps = word_float(h[ST_SET_EPS]);
    s.warmup = (int)h[ST_SET_WARMUP]; s.steps = (int)h[ST_SET_STEPS];
    s.decay_steps = (int)h[ST_SET_DECAY_STEPS]; s.ramp_start = (long)h[ST_SET_RAMP_START]; s.ramp_tokens = (long)h[ST_SET_RAMP_TOKENS];
    snprintf(s.schedule, sizeof(s.schedule), "%s", LR_SCHEDULES[sched - 1]);
    if (comp >= 3) { snprintf(s.grad_compress, sizeof(s.grad_compress), "powersgd:%d", (int)psgd_r); }
    else { snprintf(s.grad_compress, sizeof(s.grad_compress), "%s", comp == 2 ? "bf16" : "none"); }
    return s;
}

// The shortest decimal text that reads back as x (as it would have been typed).
static void float_text(float x, char* buf, size_t cap) {
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, cap, "%.*g", p, (double)x);
        if (strtof(buf, NULL) == x) { return; }
    }
}

// Appends "--flag was A, now B" lines (each ending in '\n') to out for every setting of `now` that differs from a
// recorded one of `then` (taken: "--flag A from the checkpoint, not B", for settings the checkpoint's replace).
// Returns how many.
static int settings_changes(const RunSettings* then, const RunSettings* now, int taken, char* out, size_t cap) {
    int n = 0;
    size_t len = strlen(out);
    char a[48], b[48];
#define SETTING_LINE(flag, A, B, why) do { \
        if (len < cap) { \
            len += (size_t)(taken ? snprintf(out + len, cap - len, "--%s %s from the checkpoint, not %s%s\n", flag, A, B, why) \
                                  : snprintf(out + len, cap - len, "--%s was %s, now %s%s\n", flag, A, B, why)); \
        } \
        n++; \
    } while (0)
#define SETTING_INT(flag, x, why) do { if (then->x != now->x) { \
        snprintf(a, sizeof(a), "%ld", (long)then->x); snprintf(b, sizeof(b), "%ld", (long)now->x); SETTING_LINE(flag, a, b, why); } } while (0)
#define SETTING_FLOAT(flag, x) do { if (float_word(then->x) != float_word(now->x)) { \
        float_text(then->x, a, sizeof(a)); float_text(now->x, b, sizeof(b)); SETTING_LINE(flag, a, b, ""); } } while (0)
#define SETTING_TEXT(flag, x) do { if (strcmp(then->x, now->x) != 0) { SETTING_LINE(flag, then->x, now->x, ""); } } while (0)
    if (then->seq_len != 0) { SETTING_INT("seq-len", seq_len, ""); } // (0: not recorded, as in states converted from llm.c's)
    if (then->total_batch != 0) { SETTING_INT("total-batch-size", total_batch, " tokens per step (without the flag: B x T x processes)"); }
    if (then->dtype >= 0 && then->dtype != now->dtype) { SETTING_LINE("dtype", dtype_name(then->dtype), dtype_name(now->dtype), ""); }
    if (then->master >= 0 && then->dtype != DTYPE_FP32 && now->dtype != DTYPE_FP32) { SETTING_INT("master-weights", master, ""); }
    if (then->recorded) {
        SETTING_FLOAT("lr", lr);
        SETTING_TEXT("lr-schedule", schedule);
        SETTING_INT("warmup", warmup, "");
        SETTING_FLOAT("final-lr-frac", final_lr_frac);
        // (a constant schedule does not depend on its length: then --steps is only how long the run goes)
        int sched_len = strcmp(then->schedule, "constant") != 0 || strcmp(now->schedule, "constant") != 0;
        if (sched_len) { SETTING_INT("steps", steps, " (the schedule's length)"); }
        SETTING_INT("lr-decay-steps", decay_steps, "");
        SETTING_INT("batch-ramp-start", ramp_start, " tokens");
        SETTING_INT("batch-ramp-tokens", ramp_tokens, "");
        SETTING_FLOAT("weight-decay", weight_decay);
        SETTING_FLOAT("grad-clip", grad_clip);
        SETTING_FLOAT("adam-beta1", beta1);
        SETTING_FLOAT("adam-beta2", beta2);
        SETTING_FLOAT("adam-eps", eps);
        SETTING_TEXT("grad-compress", grad_compress);
    }
#undef SETTING_LINE
#undef SETTING_INT
#undef SETTING_FLOAT
#undef SETTING_TEXT
    return n;
}

// The checkpoint's optimizer and schedule settings in place of c's (--resume-settings checkpoint); --steps only when
// the checkpoint's schedule depends on it (under a constant one it is only how long this run goes).
static void settings_take(Config* c, const RunSettings* then) {
    c->lr = then->lr; c->warmup = then->warmup; c->final_lr_frac = then->final_lr_frac;
    if (strcmp(then->schedule, "constant") != 0) { c->steps = then->steps; }
    c->lr_decay_steps = then->decay_steps; c->batch_ramp_start = then->ramp_start; c->batch_ramp_tokens = then->ramp_tokens;
    snprintf(c->lr_schedule, sizeof(c->lr_schedule), "%s", then->schedule);
    c->weight_decay = then->weight_decay; c->grad_clip = then->grad_clip;
    c->adam_beta1 = then->beta1; c->adam_beta2 = then->beta2; c->adam_eps = then->eps;
}

// Prints each line of list as a note on --resume DIR.
static void resume_notes(const char* dir, const char* list) {
    for (const char* line = list; *line; ) {
        const char* end = strchr(line, '\n');
        printf("note: --resume %s: %.*s\n", dir, (int)(end - line), line);
        line = end + 1;
    }
}

// On --resume of a training run (c resolved: its steps, sequence length and global batch), against the settings
// `then` the checkpoint of `step` recorded. --resume-settings:
// - refuse stops on any change, naming each;
// - checkpoint puts the checkpoint's optimizer and schedule settings (settings_take) in place of c's, naming each
//   one that differed, then goes on as note for the rest (--seq-len, the batch, the precision, the compression,
//   which the run was built for before the state is read);
// - note (the default) names each change on rank 0, and the learning rate the next step takes under both schedules
//   when they differ.
static void resume_settings_check(Config* c, const RunSettings* then, int step, int master) {
    RunSettings now;
    settings_of_run(c, &now);
    char list[4096] = {0};
    if (strcmp(c->resume_settings, "checkpoint") == 0 && then->recorded) {
        // the lines of what is replaced: the changes with the other settings as the checkpoint has them
        RunSettings mine = now;
        mine.seq_len = then->seq_len; mine.total_batch = then->total_batch; mine.dtype = then->dtype; mine.master = then->master;
        snprintf(mine.grad_compress, sizeof(mine.grad_compress), "%s", then->grad_compress);
        if (strcmp(then->schedule, "constant") == 0) { mine.steps = then->steps; } // (not taken: settings_take)
        settings_changes(then, &mine, 1, list, sizeof(list));
        settings_take(c, then);
        if (master) { resume_notes(c->resume, list); }
        llmc_check_adam(c, ", the checkpoint's: --resume-settings checkpoint");
        settings_of_run(c, &now);
        list[0] = '\0';
    }
    int n = settings_changes(then, &now, 0, list, sizeof(list));
    int refuse = strcmp(c->resume_settings, "refuse") == 0;
    if (refuse && n > 0) {
        fatal("--resume %s with --resume-settings refuse: this run changes %d setting(s) of the checkpoint's run:\n%s"
              "(give the checkpoint's values, --resume-settings checkpoint to take its optimizer and schedule settings, or "
              "--resume-settings note to go on with this run's)", c->resume, n, list);
    }
    if (!master) { return; }
    if (strcmp(c->resume_settings, "note") != 0 && !then->recorded) {
        printf("note: --resume %s: the checkpoint records no optimizer or schedule settings (written before they were recorded, "
               "or converted from llm.c's): only --seq-len, --total-batch-size and --dtype were compared, and this run's flags apply\n", c->resume);
    }
    resume_notes(c->resume, list);
    if (!then->recorded) { return; }
    Config tc = *c; // the checkpoint's schedule, its length included
    settings_take(&tc, then);
    tc.steps = then->steps;
    float lr_then = lr_of_step(&tc, step), lr_now = lr_of_step(c, step);
    if (float_word(lr_then) != float_word(lr_now)) {
        char a[48], b[48];
        float_text(lr_now, a, sizeof(a));
        float_text(lr_then, b, sizeof(b));
        printf("note: --resume %s: step %d's learning rate is %s (it would be %s under the checkpoint's settings)\n", c->resume, step + 1, a, b);
    }
}

#endif // RUN_SETTINGS_H
