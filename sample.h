/*
sample.h: sampling in train_gpt.c, split out of it by topic and included by it after evaluate.h (it uses the model's
forward, its KV cache path in block_forward and the process groups of train_gpt.c; it is not a standalone header).
The KV cache's storage, choosing a token from a row of logits (temperature, top-k, top-p, min-p), drawing a batch of samples
through every layout (tensor and pipeline parallel, ZeRO-3), printing them, and encoding --prompt.
*/
#ifndef SAMPLE_H
#define SAMPLE_H

// How samples draw their tokens (--temperature, --top-k, --top-p, --kv-cache, --logprobs, --stop-at-eot,
// --repetition-penalty, --min-p).
typedef struct {
    float temperature; // softmax(logits / temperature); 0: the most likely token
    int top_k;         // only the top_k most likely tokens (0: all)
    float top_p;       // then only the fewest most likely tokens whose probability reaches top_p (1: all)
    int kv_cache;      // 1: each token's forward runs over that position alone, the earlier ones' keys and values
                       // cached (KvCache); 0: over the whole prefix, as llm.c's sampler does
    int logprobs;      // --generate --logprobs 1: print each sample's log-probability under the model
    int stop_at_eot;   // --stop-at-eot 1: a sample ends at the first <|endoftext|> it draws
    float repetition_penalty; // the logits of the tokens already in a sequence, before the rest (1: off; penalize_repeats)
    float min_p;       // last, only the tokens at least min_p times as likely as the most likely one (0: off)
    int cuda_graphs;   // --cuda-graphs 1: a GPU replays each decoding step through the KV cache as one CUDA graph
} SampleOpts;

// A KV cache for up to B sequences of positions [0, T_max) of the layers this rank holds (its pipeline chunks), or
// none (returns 0) where the layout cannot use one: sequence parallelism splits a forward's tokens over the
// tensor-parallel group, which one token cannot be. Its size is gpt_kv_bytes'.
static int kv_alloc(KvCache* kv, GPT* m, int B, int T_max) {
    memset(kv, 0, sizeof(*kv));
    if (m->sp) { return 0; }
    kv->B = B;
    kv->T_max = T_max;
    size_t parts[2];
    gpt_kv_bytes(m, B, T_max, parts);
    kv->base = (floatX*)dev_alloc(&m->ctx, parts[0]);
    kv->logits = parts[1] ? (float*)dev_alloc(&m->ctx, parts[1]) : NULL;
    return 1;
}

// The k-th largest of x[0..n) (1 <= k <= n; equal values counted each, so the value sorting x in descending order
// would put at [k - 1]), reordering x: quickselect with Hoare's partition, expected O(n) (a sort is O(n log n): at
// GPT-2's 50257 tokens it took longer than a cached token's forward on a GPU).
static float select_kth_largest(float* x, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = x[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) { // afterwards [lo, j] >= pivot >= [i, hi], and any element between them equals the pivot
            while (x[i] > pivot) { i++; }
            while (x[j] < pivot) { j--; }
            if (i <= j) { float t = x[i]; x[i] = x[j]; x[j] = t; i++; j--; }
        }
        if (want <= j) { hi = j; }
        else if (want >= i) { lo = i; }
        else { return x[want]; }
    }
    return x[want];
}

// --top-p's order: token a before token b when it is more likely, or as likely with a lower id (the rule --top-k
// keeps ties by). w: the tokens' unnormalised probabilities.
static int nucleus_before(const float* w, int a, int b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

// --top-p's buckets: a weight's float bits from the exponent down to 4 bits of mantissa (16 buckets per power of
// two), which order positive floats as their values do; weights above 1 share the top bucket (sample_pick's are at
// most 1, the most likely token's exp(0))
#define NUCLEUS_BUCKETS ((0x3F800000u >> 19) + 1)
static int nucleus_bucket(float w) {
    uint32_t bits;
    memcpy(&bits, &w, 4);
    bits >>= 19;
    return bits < NUCLEUS_BUCKETS ? (int)bits : (int)NUCLEUS_BUCKETS - 1;
}

// --top-p (nucleus sampling, Hugging Face's top_p): of the tokens with w > 0, taken in nucleus_before's order, keeps
// each whose predecessors' probability is below top_p, that is the fewest whose probability reaches top_p (at least
// the most likely one; top_p 0 keeps only it), and zeroes the others' w. need = top_p x the total of w. Returns the
// total of the kept w, summed in the order of ids as sample_pick's draw sums it.
// A sort would find them in O(V log V); this takes three passes over the row and a quickselect over a small part:
//   1. the mass of each bucket of weights (nucleus_bucket: every token of a higher bucket is more likely than every
//      token of a lower one), then from the top bucket down the first whose mass reaches `need` with the buckets
//      above it: the last kept token is in it, every token above kept, every one below not;
//   2. the ids of that bucket's tokens, and among them a quickselect weighed by probability: partition around a pivot
//      token, and if the tokens before it (with the buckets above, acc) already hold `need`, the last kept token is
//      among them, else (once the pivot is counted too) among those after it, their predecessors' mass carried in acc;
//   3. every token after the last kept one zeroed, the kept ones summed.
// ids: V ints of scratch.
static double nucleus_keep(float* w, int* ids, int V, double need) {
    double mass[NUCLEUS_BUCKETS] = {0.0};
    for (int j = 0; j < V; j++) { if (w[j] > 0.0f) { mass[nucleus_bucket(w[j])] += w[j]; } }
    int top = NUCLEUS_BUCKETS - 1, lowest = 0;
    while (top > 0 && mass[top] == 0.0) { top--; }
    while (lowest < top && mass[lowest] == 0.0) { lowest++; }
    int bk = top;
    double acc = 0.0; // the mass of the buckets above bk (all kept); acc < need, or bk is the top
    while (bk > lowest && acc + mass[bk] < need) { acc += mass[bk]; bk--; while (bk > lowest && mass[bk] == 0.0) { bk--; } }
    int n = 0;
    for (int j = 0; j < V; j++) { if (w[j] > 0.0f && nucleus_bucket(w[j]) == bk) { ids[n++] = j; } }
    if (n == 0) { return 0.0; } // (no token with w > 0)
    int lo = 0, hi = n - 1, last = ids[0]; // acc: the mass of the tokens before ids[lo..hi], all kept
    while (lo <= hi) {
        if (lo == hi) { last = ids[lo]; break; }
        int mid = lo + (hi - lo) / 2, pv = ids[mid], i = lo;
        ids[mid] = ids[hi]; ids[hi] = pv;
        double m = 0.0; // the mass of the tokens before the pivot
        for (int k = lo; k < hi; k++) {
            if (nucleus_before(w, ids[k], pv)) { int t = ids[i]; ids[i] = ids[k]; ids[k] = t; m += w[ids[i]]; i++; }
        }
        ids[hi] = ids[i]; ids[i] = pv; // [lo, i) before the pivot, i the pivot, (i, hi] after it
        if (i > lo && acc + m >= need) { hi = i - 1; } // the pivot is not kept: the last kept one is before it
        else if (i == hi || acc + m + w[pv] >= need || (i == lo && acc >= need)) { last = pv; break; }
        else { acc += m + w[pv]; lo = i + 1; }
    }
    double kept = 0.0;
    for (int j = 0; j < V; j++) {
        if (w[j] > 0.0f && j != last && !nucleus_before(w, j, last)) { w[j] = 0.0f; }
        kept += w[j];
    }
    return kept;
}

// The next token from one row of logits over the real vocabulary (row: V values, overwritten; scratch: V 4-byte
// values for --top-k and --top-p). Temperature 0: the argmax, the lowest id among equal maxima. Else the softmax of
// logits / temperature, restricted to the top_k largest logits when 0 < top_k < V (those equal to the k-th largest
// are kept from the lowest id up, so exactly k remain), then, when top_p < 1, to the fewest most likely of those
// whose probability (renormalised over them) reaches top_p (nucleus_keep), then, when min_p > 0, to those of them
// at least min_p times as likely as the most likely one (Hugging Face's min_p: its probability ratio is our weight,
// since the most likely token's weight is exp(0) = 1, and neither filter before it drops that token), and drawn by
// inverse CDF: the first id whose running sum of (unnormalised) probabilities exceeds u times their total, u in
// [0, 1). The order is Hugging Face's (temperature, top-k, top-p, min-p). The defaults (1, 0, 1, 0) are the sampler
// of the first versions, bit for bit: exp(x / 1) is exp(x).
static int sample_pick(float* row, void* scratch, int V, const SampleOpts* so, double u) {
    int best = 0;
    for (int j = 1; j < V; j++) { best = row[j] > row[best] ? j : best; }
    if (so->temperature == 0.0f) { return best; }
    float mx = row[best], kth = -INFINITY;
    int equal_left = V; // of the values equal to the k-th largest, how many are kept
    if (so->top_k > 0 && so->top_k < V) {
        memcpy(scratch, row, sizeof(float) * (size_t)V);
        kth = select_kth_largest((float*)scratch, V, so->top_k);
        int above = 0;
        for (int j = 0; j < V; j++) { above += row[j] > kth; }
        equal_left = so->top_k - above;
    }
    double sum = 0.0;
    for (int j = 0; j < V; j++) {
        int keep = row[j] > kth || (row[j] == kth && equal_left-- > 0);
        row[j] = keep ? expf((row[j] - mx) / so->temperature) : 0.0f;
        sum += row[j];
    }
    if (so->top_p < 1.0f) { sum = nucleus_keep(row, (int*)scratch, V, (double)so->top_p * sum); }
    if (so->min_p > 0.0f) {
        sum = 0.0;
        for (int j = 0; j < V; j++) {
            row[j] = row[j] < so->min_p ? 0.0f : row[j];
            sum += row[j];
        }
    }
    double coin = u * sum, cdf = 0.0;
    int last = best; // the last kept id so far (row[best] is exp(0) = 1, always kept)
    for (int j = 0; j < V; j++) {
        cdf += row[j];
        if (coin < cdf) { return j; }
        last = row[j] > 0.0f ? j : last;
    }
    return last; // (not reached: the running sum ends at exactly the total, and u < 1)
}

// --repetition-penalty R (Hugging Face's repetition_penalty, from CTRL): the logit x of each token among seq[0..n)
// (the sequence so far, its prompt included) becomes x / R when positive and x R when not, once per distinct token
// however often it occurs; so with R > 1 a token already there loses probability. mark: V bytes of zeros, left zero.
static void penalize_repeats(float* row, const int32_t* seq, int n, float R, unsigned char* mark) {
    for (int t = 0; t < n; t++) {
        int id = seq[t];
        if (mark[id]) { continue; }
        mark[id] = 1;
        row[id] = row[id] > 0.0f ? row[id] / R : row[id] * R;
    }
    for (int t = 0; t < n; t++) { mark[seq[t]] = 0; }
}

// Where a sampling step's time goes, summed over the steps since the caller zeroed it (--generate prints it per
// token): queueing the forward and the row of logits (the host's launches; a GPU runs them meanwhile), waiting for
// the device to finish them and the row to arrive (the copies and the synchronisation), and choosing the tokens on
// the host. Whether a GPU is bound by its launches, its kernels or the host's sampler, without a profiler.
typedef struct { double queue, wait, pick; long steps, replayed; } SampleClock; // (replayed: the steps a CUDA graph ran)
static SampleClock sample_clock;

// The LM head's R rows of logits, from the final LayerNorm's rows [first, first + R) (the last position of a forward
// from position 0, or a decoding step's row of each sequence), into the first R slots of probs. Queued, with the
// copies, on a single process (the caller's dev_sync waits for them); under tensor parallelism each rank computes
// its columns and an all-gather, which waits, gives every rank the rows.
static void sample__logits(GPT* m, KvCache* kv, size_t first, int R, float* probs, size_t slot) {
    const GPTConfig* g = &m->cfg;
    const floatX* lnf = tp_enter(m, m->acts.lnf);
    float* logits = kv ? kv->logits : m->acts.logits_row;
    classifier_logits_rows(&m->ctx, logits, lnf + first * g->channels, m->p.wte, R, g->channels, m->vocab_n);
    for (int r = 0; r < R; r++) {
        const float* lrow = logits + (size_t)r * m->vocab_n;
        if (m->tp == 1) {
            dev_copy_d2h(&m->ctx, probs + r * slot, lrow, sizeof(float) * (size_t)g->padded_vocab_size);
        } else {
            dev_copy_d2h(&m->ctx, m->acts.host, lrow, sizeof(float) * m->vocab_n);
            dev_sync(&m->ctx);
            comm_allgather_f32(m->tp_group, m->acts.host, probs + r * slot, (size_t)m->vocab_n);
        }
    }
}

// One forward through the KV cache kv at its position kv->pos (fb sequences of T tokens; the prompt's, or each
// sequence's token sampled last), then, on the rank with the LM head, its R rows of logits at the last position.
static void sample__step(GPT* m, const int32_t* tokens, int fb, int T, KvCache* kv, int R, float* probs, size_t slot) {
    m->kv = kv;
    gpt_forward_any(m, tokens, fb, T);
    m->kv = NULL;
    if (m->layout.has_lnf) { sample__logits(m, kv, (size_t)T - 1, R, probs, slot); }
}

// Draws toks[p..n) one at a time after the prompt toks[0..p) (p >= 1) in each of B sequences (toks: B rows of `room`
// tokens, n <= room, each starting with the same prompt): token t comes from the logits at position t - 1, penalized
// for the sequence's tokens [0, t) with --repetition-penalty (penalize_repeats), by sample_pick with the draw
// draws[b (n - p) + t - p] when the temperature is not 0 (NULL when it is). With logp, logp[b] is the sum of the
// sampled tokens' log-probabilities under the model (log softmax of the logits, whatever the penalty, temperature,
// top-k or top-p), on every rank. With stop >= 0 (a token id: <|endoftext|>), a sequence ends at the first
// stop token it draws: len[b] (NULL: not returned) is then its tokens after the prompt up to and including that one
// (else n - p), its later tokens are whatever the forwards drew and its log-probability stops there; the draws of a
// sequence stay draws[b (n - p) + t - p] whether it stopped or not, so stopping changes no other sequence's tokens,
// and the steps end when every sequence has stopped (the same on every rank: they all hold the same tokens).
// probs: B x 3 Vp floats of host scratch from dev_host_alloc (pinned on a GPU: a graph's copies need it), a slot per
// sequence (its row of logits, sample_pick's scratch, and the unpenalized row for logp): the B rows come to the host
// together, and the sequences choose their tokens in parallel (OpenMP; each from its own row and draw, so the
// tokens do not depend on the threads). Without a KV cache B is 1, and each forward runs over the whole prefix; the
// tokens after the sampled ones may be any token: each forward may run longer than t (the backend's bucketed
// lengths, kernels_forward_len; sequence parallelism's multiple of tp), and a causal model's position t - 1 never
// sees the ones after it. With a KV cache (kv, for B sequences up to position room): the first forward runs the
// prompt once and caches it for every sequence, each later one the B tokens sampled last, at their position.
// Under tensor parallelism every rank of the group runs this together: each computes its vocabulary columns, an
// all-gather gives all of them the row, and group rank 0's tokens are broadcast; under pipeline parallelism the
// last stage's.
static void sample_tokens(GPT* m, int32_t* toks, int B, int p, int n, int room, float* probs, const double* draws,
                          const SampleOpts* so, KvCache* kv, double* logp, int stop, int* len) {
    const GPTConfig* g = &m->cfg;
    for (int b = 0; b < B && logp; b++) { logp[b] = 0.0; }
    if (B > (kv ? kv->B : 1)) { fatal("internal: %d sequences sampled together without a KV cache for them", B); }
    // the tokens sampled at t (pinned on a GPU: a captured step's copy reads them when it runs)
    int32_t* next = (int32_t*)dev_host_alloc(&m->ctx, sizeof(int32_t) * (size_t)B);
    int* ended = (int*)callocCheck((size_t)B, sizeof(int)); // a sequence's length after the prompt once it drew the stop token
    // penalize_repeats' marks, one row of V bytes per sequence (the sequences pick in parallel)
    unsigned char* mark = so->repetition_penalty != 1.0f ? (unsigned char*)callocCheck((size_t)B * g->vocab_size, 1) : NULL;
    const size_t Vp = (size_t)g->padded_vocab_size, slot = 3 * Vp;
    // --cuda-graphs: the decoding steps after the first (which made every matmul plan and workspace the step needs)
    // replay one CUDA graph of the step, recorded at the second: its tokens from `next`, its position from hpos, both
    // copied when it runs (kernels.h). Only where the step is this process's alone: no tensor or pipeline group, no
    // ZeRO-3 gathers (their collectives run on the host), and the LM head here.
    int graphs = kv && so->cuda_graphs && !m->tp_group && !m->pp_group && !m->z3 && m->layout.has_lnf;
    int* hpos = graphs ? (int*)dev_host_alloc(&m->ctx, sizeof(int)) : NULL;
    void* graph = NULL;
    int running = B;
    for (int t = p; t < n && running > 0; t++) {
        double c0 = now_seconds(), c1 = c0, c2 = c0;
        int fb = 1; // the forward's sequences
        int R = 1; // the rows of logits: 1 for the prompt's forward (every sequence's row is the same), else B
        if (kv) {
            // positions [start, t): the prompt (one sequence for all), then one token per sequence
            int start = t == p ? 0 : t - 1;
            fb = t == p ? 1 : B;
            R = fb;
            for (int b = 0; b < fb && t > p; b++) { next[b] = toks[(size_t)b * room + t - 1]; }
            kv->pos = start;
            if (graphs && t > p + 1 && !graph) {
                m->ctx.dec_pos = (const int*)(m->acts.scalars + 1);
                if (kernels_capture_begin(&m->ctx)) {
                    dev_copy_h2d(&m->ctx, (void*)m->ctx.dec_pos, hpos, sizeof(int));
                    sample__step(m, next, fb, 1, kv, R, probs, slot);
                    graph = kernels_capture_end(&m->ctx);
                }
                m->ctx.dec_pos = NULL;
                graphs = graph != NULL; // (none here, or the capture failed: every step op by op)
            }
            if (graph) {
                *hpos = start;
                kernels_graph_launch(&m->ctx, graph);
                sample_clock.replayed++;
            } else {
                sample__step(m, t == p ? toks : next, fb, t - start, kv, R, probs, slot);
            }
        } else {
            // sequence parallelism splits the forward's tokens over the group: a multiple of tp of them
            int tf = kernels_forward_len(&m->ctx, t, room);
            if (m->sp) { tf = (tf + m->tp - 1) / m->tp * m->tp; }
            gpt_forward_any(m, toks, 1, tf);
            if (m->layout.has_lnf) { sample__logits(m, NULL, (size_t)t - 1, 1, probs, slot); }
        }
        if (m->layout.has_lnf) {
            c1 = now_seconds(); // (the forward and the copies of the rows queued: dev_sync waits for the device)
            dev_sync(&m->ctx);
            c2 = now_seconds();
            for (int b = R; b < B; b++) { memcpy(probs + b * slot, probs, sizeof(float) * Vp); }
            const int V = g->vocab_size;
#pragma omp parallel for schedule(dynamic, 1) if (B > 1)
            for (int b = 0; b < B; b++) {
                float* row = probs + b * slot;
                float* kept = row + 2 * Vp; // (the row, which sample_pick overwrites)
                double u = draws ? draws[(size_t)b * (n - p) + (t - p)] : 0.0;
                if (logp) { memcpy(kept, row, sizeof(float) * V); }
                if (mark) { penalize_repeats(row, toks + (size_t)b * room, t, so->repetition_penalty, mark + (size_t)b * V); }
                next[b] = sample_pick(row, row + Vp, V, so, u);
                if (logp && !ended[b]) {
                    double mx = -INFINITY, sum = 0.0;
                    for (int j = 0; j < V; j++) { mx = kept[j] > mx ? kept[j] : mx; }
                    for (int j = 0; j < V; j++) { sum += exp((double)kept[j] - mx); }
                    logp[b] += (double)kept[next[b]] - mx - log(sum);
                }
            }
            if (m->tp_group) { comm_broadcast(m->tp_group, next, sizeof(int32_t) * B, 0); }
            double c3 = now_seconds();
            sample_clock.queue += c1 - c0;
            sample_clock.wait += c2 - c1;
            sample_clock.pick += c3 - c2;
            sample_clock.steps++;
        }
        // a pipeline stage without the LM head gets the tokens from the last stage
        if (m->pp_group) { comm_broadcast(m->pp_group, next, sizeof(int32_t) * B, m->pp - 1); }
        if (m->z3) { comm_broadcast(m->z3->group, next, sizeof(int32_t) * B, 0); } // (ZeRO-3: every data-parallel rank samples)
        for (int b = 0; b < B; b++) {
            toks[(size_t)b * room + t] = next[b];
            if (stop >= 0 && !ended[b] && next[b] == stop) { ended[b] = t - p + 1; running--; }
        }
    }
    if (logp && m->pp_group) { comm_broadcast(m->pp_group, logp, sizeof(double) * B, m->pp - 1); }
    for (int b = 0; b < B && len; b++) { len[b] = ended[b] ? ended[b] : n - p; }
    kernels_graph_free(&m->ctx, graph);
    dev_host_free(&m->ctx, hpos);
    dev_host_free(&m->ctx, next);
    free(ended);
    free(mark);
}

// Prints tokens decoded (when a tokenizer is loaded; only printable bytes and whitespace, like llm.c's safe_printf),
// else their ids.
static void print_tokens(const Tokenizer* tok, int have_tok, const int32_t* toks, int n) {
    for (int t = 0; t < n; t++) {
        const char* piece = have_tok ? tokenizer_decode(tok, (uint32_t)toks[t]) : NULL;
        if (piece) {
            for (const char* q = piece; *q; q++) {
                unsigned char ch = (unsigned char)*q;
                if (isprint(ch) || isspace(ch) || ch >= 0x80) { putchar(ch); }
            }
        } else {
            printf("%d ", toks[t]);
        }
    }
}

// Samples gen_tokens tokens after the prompt (np tokens, the same on every rank; none: <|endoftext|>, the token
// eot), `count` times, and prints each sample's prompt and tokens (when `print`) after `label` (NULL: "--- sample N"),
// decoded if a tokenizer is loaded.
// With the KV cache up to `batch` samples are drawn together (batch x T cached rows per layer); without it, one at a
// time. Sample i takes the generator's draws in order after those of sample i - 1, so the samples are the same
// whatever the batch; with --stop-at-eot a sample ends at its first <|endoftext|> (printed), which changes no other
// sample. The prompt and the tokens fit in T (the caller checked np < T). Returns the samples drawn together through
// the cache, 0 without one; *drawn (when not NULL): the tokens of all the samples, after their prompts.
static int generate(GPT* m, const Tokenizer* tok, int have_tok, int eot, const int32_t* prompt, int np, int gen_tokens, int T,
                     int count, int batch, uint64_t* rng, int print, const SampleOpts* so, const char* label, long* drawn) {
    const GPTConfig* g = &m->cfg;
    int p = np > 0 ? np : 1;
    int n = p + gen_tokens < T ? p + gen_tokens : T;
    // the cache: the one allocated at start-up (GPT.kv_held, counted in the plan) when it is large enough, else one
    // for this call
    KvCache own, *kv = NULL;
    int want = batch < count ? batch : count;
    if (so->kv_cache && m->kv_held.base && m->kv_held.B >= want && m->kv_held.T_max >= T) { kv = &m->kv_held; }
    else if (so->kv_cache && kv_alloc(&own, m, want, T)) { kv = &own; }
    int B = kv ? want : 1;
    int32_t* toks = (int32_t*)mallocCheck(sizeof(int32_t) * (size_t)B * T);
    int* len = (int*)mallocCheck(sizeof(int) * (size_t)B);
    // (pinned on a GPU: the rows of logits come back at the link's speed, without a pageable copy's staging)
    float* probs = (float*)dev_host_alloc(&m->ctx, sizeof(float) * 3 * (size_t)B * g->padded_vocab_size);
    double* logp = so->logprobs ? (double*)mallocCheck(sizeof(double) * (size_t)B) : NULL;
    double* draws = so->temperature != 0.0f ? (double*)mallocCheck(sizeof(double) * (size_t)B * (n - p)) : NULL;
    if (drawn) { *drawn = 0; }
    for (int done = 0; done < count; done += B) {
        int nb = count - done < B ? count - done : B;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) { toks[(size_t)b * T + t] = t < np ? prompt[t] : eot; }
        }
        for (size_t k = 0; draws && k < (size_t)nb * (n - p); k++) { draws[k] = rng_uniform(rng); }
        sample_tokens(m, toks, nb, p, n, T, probs, draws, so, kv, logp, so->stop_at_eot ? eot : -1, len);
        for (int b = 0; b < nb && drawn; b++) { *drawn += len[b]; }
        for (int b = 0; b < nb && print; b++) {
            if (label) { printf("%s", label); }
            else { printf("--- sample %d\n", done + b + 1); }
            print_tokens(tok, have_tok, toks, np); // (the prompt as given: none when it is <|endoftext|>)
            print_tokens(tok, have_tok, toks + (size_t)b * T + p, len[b]);
            printf("\n");
            if (logp) { printf("logprob: %.6f (%d tokens, mean %.6f)\n", logp[b], len[b], logp[b] / len[b]); }
            fflush(stdout);
        }
    }
    if (kv == &own) { kv_free(&m->ctx, &own); }
    free(toks);
    free(len);
    dev_host_free(&m->ctx, probs);
    free(draws);
    free(logp);
    return kv ? B : 0;
}

// --prompt TEXT: its tokens under GPT-2's BPE (encoder.json and vocab.bpe from $GPT2_VOCAB_DIR or data/gpt2), into
// *out (malloc'd) and *n; exits naming the problem if the build has no encoder, the files are missing, or the model's
// vocabulary is not GPT-2's. With text NULL (--generate without --prompt) it only tries to load the vocabulary, to
// print samples as text, and returns NULL quietly if it cannot. When it loads it and no decoder is loaded yet
// (*have_dec 0: no --tokenizer), dec becomes the vocabulary's.
static int32_t* encode_prompt(const char* text, const GPTConfig* g, Tokenizer* dec, int* have_dec, int* n) {
    *n = 0;
#ifdef USE_ENCODER
    char vdir[4200];
    if (!hf_find_gpt2_vocab(vdir, sizeof(vdir))) {
        if (!text) { return NULL; }
        fatal("--prompt: GPT-2's encoder.json and vocab.bpe are in neither $GPT2_VOCAB_DIR nor data/gpt2 (needed to encode the prompt)");
    }
    Encoder e;
    if (encoder_init(&e, vdir) != 0) { fatal("--prompt: cannot load GPT-2's vocabulary from %s: %s", vdir, e.error); }
    if ((uint32_t)g->vocab_size != e.vocab_size) {
        uint32_t ev = e.vocab_size;
        encoder_free(&e);
        if (!text) { return NULL; }
        fatal("--prompt is encoded with GPT-2's vocabulary of %u tokens; this model has %d", ev, g->vocab_size);
    }
    int32_t* out = NULL;
    if (text) {
        EncoderScratch es;
        encoder_scratch_init(&es, &e);
        TokenVec ids = {0};
        encoder_encode(&e, &es, (const uint8_t*)text, strlen(text), &ids);
        out = (int32_t*)mallocCheck(sizeof(int32_t) * (ids.len + 1));
        for (size_t i = 0; i < ids.len; i++) { out[i] = (int32_t)ids.data[i]; }
        *n = (int)ids.len;
        tokenvec_free(&ids);
        encoder_scratch_free(&es);
    }
    if (!*have_dec) { tokenizer_from_encoder(dec, &e); *have_dec = 1; }
    encoder_free(&e);
    return out;
#else
    (void)g; (void)dec; (void)have_dec;
    if (text) { fatal("--prompt: this build has no BPE encoder (it needs PCRE2 and cJSON: apt-get install libpcre2-dev libcjson-dev, then make)"); }
    return NULL;
#endif
}

#endif // SAMPLE_H
