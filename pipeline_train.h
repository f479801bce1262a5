/*
pipeline_train.h: pipeline parallelism (--pp) in the trainer, split out of train_gpt.c by topic and included by it
after the model (it uses the model's chunks, its activation slots and the collectives; not a standalone header):
the messages between stages, the slots of the micro-batches in flight, the forward-only pass that evaluation and
sampling run through the stages, and the spans of a step for --trace. The step itself (train_gpt.c,
pipeline_train_step) runs the rank's schedule (pipeline.h) over these.

Messages: chunk g's output goes to the rank of chunk g + 1 (tag PP_TAG_ACT), the gradient of its input to the rank of
chunk g - 1 (PP_TAG_GRAD), over the pipeline group, each tensor-parallel rank to its counterpart (its rows under
sequence parallelism, else the replicated whole). They travel through host buffers (the collectives take host
memory): a send copies the tensor out and starts a non-blocking send from a pooled buffer, so the rank goes on
computing; the receive of the next operation's input is started before the current operation computes, and waited
for when that operation begins. The schedules consume messages in the order they were sent (tests/test_pp), so one tag
per direction is enough.

With --comm nccl, when every stage has a GPU of its own (pipeline_use_nccl), the same messages go device to device
through NCCL, and the CPU never waits for one: a send copies the tensor into a pooled device buffer on the compute
stream and sends it on its link's stream (comm_nccl.h: a communicator and stream per direction of each link); a
receive lands in a device buffer on its link's stream, the compute stream waits for it and copies it into place, and
the next receive into the buffer waits for that copy. The tied wte's two gradients are summed by an NCCL
all-reduce between the first and last stages. The order of every message and every sum is the MPI path's, so the
two give the same bits.
Why NCCL's blocking sends cost nothing here: a send finishes once its peer has posted the receive, and each link's
sends finish in order. The receive of operation i's input is posted when operation i - 1 begins (after its own
input's copy), which is before i could start anyway; an earlier message on the same link was consumed by an earlier
operation, so it finished earlier still. Every operation therefore starts when it would with MPI's buffered sends.
tests/test_pp checks that for every schedule with pipeline.h's pp_simulate_rendezvous, which also shows that the
same messages on one stream per rank (one communicator for the group) deadlock in most settings.
*/
#ifndef PIPELINE_TRAIN_H
#define PIPELINE_TRAIN_H

#include "pipeline.h"

enum { PP_TAG_ACT = 11, PP_TAG_GRAD = 12, PP_TAG_PARAM = 13 };

typedef struct {
    CommRequest req;
    void* host;
    int busy;
} PpMsg;

// --comm nccl: a device send buffer of the ring (pp_send)
typedef struct {
    void* buf;
    CommNcclReq req;   // its last send: the next copy into buf waits for it (on the compute stream)
} PpDevMsg;

// The pairs (communicators of two ranks) a stage's NCCL messages take: activations to the next stage and from the
// previous one, gradients to the previous and from the next.
enum { PP_ACT_OUT = 0, PP_ACT_IN, PP_GRAD_OUT, PP_GRAD_IN, PP_LINKS };

// What --trace records: one span per forward, backward, wait for a message and optimizer step.
typedef struct {
    const char* what;   // "forward", "backward", "recv", "optimizer"
    int chunk, mb, step;
    double t0, t1;      // seconds since the run's start
} PpSpan;

struct Pipeline {
    int kind, pp, rank, V, M, G;
    PpOp* ops;              // this rank's schedule for M micro-batches
    int nops;
    int nslots;             // most micro-batches (through one chunk) alive at once: the activation slots
    int* slot_of;           // (V M) the slot of local chunk v's micro-batch mb, -1 when none
    int* free_slots;
    int nfree;
    PpMsg* sends;           // the pool of send buffers
    int nsends;
    void* recv_host;
    // the next operation's input, received while the current one computes: a receive started ahead into early_host
    void* early_host;
    CommRequest early_req;
    int early_posted, early_peer, early_tag;
    size_t early_n;
    size_t max_msg_bytes;   // B T C floatX
    int32_t* inputs;        // (M, B T) the step's micro-batches, host
    int32_t* targets;
    float* wte_mine;        // first and last stage: host copies of the tied wte's two gradients (vocab_n C floats)
    float* wte_other;
    // --comm nccl with a GPU per stage (pipeline_use_nccl): messages device to device
    int nccl;
    CommNccl link[PP_LINKS]; // (not joined: this rank has no such link)
    CommNccl wte_pair;       // first and last stage: the tied wte's gradients
    PpDevMsg* dsends;        // the ring of device send buffers, one per message the rank sends in a step (pp_sends)
    int ndsends, dsend_next; // its size, and the buffer the next send takes
    void* drecv;             // the receive buffer
    CommNcclReq drecv_req, drecv_free; // its receive in flight, and the mark after the last message's copy into place
    // --trace
    PpSpan* spans;
    int nspans, cap_spans;
    int trace_steps;        // record the spans of the steps below this
    int step;
    double t_origin;
    double busy_seconds, step_seconds; // compute inside a step, and the steps' wall time (for the measured bubble)
};

// The messages pipeline rank r sends in a step of its schedule (the output of every forward but the last chunk's, the
// input gradient of every backward but the first chunk's), at least 1: the ring of device send buffers of --comm
// nccl (pipeline_use_nccl; the planner counts the same).
static int pp_sends(const PpOp* ops, int n, int r, int pp, int V) {
    int sends = 0;
    for (int i = 0; i < n; i++) {
        int g = ops[i].v * pp + r;
        sends += ops[i].fwd ? g < pp * V - 1 : g > 0;
    }
    return sends > 1 ? sends : 1;
}

// The most micro-batches whose forward through one of this rank's chunks ran and whose backward did not, over the
// schedule: the activation slots the rank needs.
static int pp_max_alive(const PpOp* ops, int n) {
    int alive = 0, most = 0;
    for (int i = 0; i < n; i++) {
        alive += ops[i].fwd ? 1 : -1;
        if (alive > most) { most = alive; }
    }
    return most;
}

static void pipeline_init(Pipeline* p, const GPT* m, int kind, int M, int V, int B, int T, int trace_steps) {
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->pp = m->pp;
    p->rank = m->pp_rank;
    p->V = V;
    p->M = M;
    p->G = m->pp * V;
    p->ops = (PpOp*)mallocCheck(sizeof(PpOp) * 2 * (size_t)M * V);
    p->nops = pp_schedule_build(kind, p->pp, p->rank, M, V, p->ops);
    p->nslots = pp_max_alive(p->ops, p->nops);
    if (p->nslots < 1) { p->nslots = 1; }
    p->slot_of = (int*)mallocCheck(sizeof(int) * (size_t)V * M);
    for (int i = 0; i < V * M; i++) { p->slot_of[i] = -1; }
    p->free_slots = (int*)mallocCheck(sizeof(int) * (size_t)p->nslots);
    for (int k = 0; k < p->nslots; k++) { p->free_slots[k] = p->nslots - 1 - k; }
    p->nfree = p->nslots;
    p->max_msg_bytes = (size_t)B * T * m->cfg.channels * sizeof(floatX);
    p->recv_host = dev_host_alloc(&m->ctx, p->max_msg_bytes);
    p->early_host = dev_host_alloc(&m->ctx, p->max_msg_bytes);
    p->inputs = (int32_t*)mallocCheck(sizeof(int32_t) * (size_t)M * B * T);
    p->targets = (int32_t*)mallocCheck(sizeof(int32_t) * (size_t)M * B * T);
    if (m->pp > 1 && m->layout.has_wte) {
        size_t n = (size_t)m->vocab_n * m->cfg.channels;
        p->wte_mine = (float*)dev_host_alloc(&m->ctx, mulSize(n, sizeof(float)));
        p->wte_other = (float*)dev_host_alloc(&m->ctx, mulSize(n, sizeof(float)));
    }
    p->trace_steps = trace_steps;
    p->t_origin = now_seconds();
}

// A step of M micro-batches, at most the M the pipeline was made for (a batch ramp's smaller steps): this rank's
// schedule for them. The slots, buffers and send pools made for the larger M serve it: a schedule of fewer
// micro-batches keeps no more of them alive and sends fewer messages.
static void pipeline_set_micro_batches(Pipeline* p, int M) {
    if (M < 1 || M > p->M) { fatal("internal: a pipeline step of %d micro-batches, made for at most %d", M, p->M); }
    p->nops = pp_schedule_build(p->kind, p->pp, p->rank, M, p->V, p->ops);
    if (pp_max_alive(p->ops, p->nops) > p->nslots) { fatal("internal: the schedule of %d micro-batches needs more activation slots than %d", M, p->M); }
}

// --comm nccl, every stage on a GPU of its own: the messages go through NCCL pairs (collective over the pipeline
// group). The links are made in one global order, activation link k (stage k to k + 1) then gradient link k (k + 1
// to k), the ring's closing links (interleaved: the last stage feeds the first) last of each kind; each rank joins
// the pairs it is in, in that order, so a pair's two ranks always meet. Each link is connected as it is made (a byte
// from the receive buffer, comm_nccl_connect_pair: a step's first message on a link could otherwise wait for its
// peer's host while that waits for this rank). Then the first and last stages' pair.
static void pipeline_use_nccl(Pipeline* p, GPT* m) {
    int pp = p->pp, r = p->rank, nl = p->V > 1 ? pp : pp - 1;
    p->drecv = dev_alloc(&m->ctx, p->max_msg_bytes);
    dev_sync(&m->ctx); // (the links' streams send from it: its zeroing on the compute stream first)
    for (int kind = 0; kind < 2; kind++) {
        for (int k = 0; k < nl; k++) {
            int from = kind == 0 ? k : (k + 1) % pp, to = kind == 0 ? (k + 1) % pp : k;
            CommNccl* l = r == from ? &p->link[kind == 0 ? PP_ACT_OUT : PP_GRAD_OUT] : &p->link[kind == 0 ? PP_ACT_IN : PP_GRAD_IN];
            if (r == from || r == to) {
                comm_nccl_init_pair(l, m->pp_group, from, to);
                comm_nccl_connect_pair(l, p->drecv);
            }
        }
    }
    if (m->layout.has_wte) { comm_nccl_init_pair(&p->wte_pair, m->pp_group, 0, pp - 1); }
    comm_nccl_mark(&m->ctx, &p->drecv_free); // (the first receive of a step follows what the compute stream has run)
    // a send buffer for every message the rank sends in a step, taken in turn (pp_send), made now (a cudaMalloc in the
    // middle of a step may hold later work behind a send that waits for its peer); each is a small part of a slot's
    // activations
    p->ndsends = pp_sends(p->ops, p->nops, p->rank, p->pp, p->V);
    p->dsends = (PpDevMsg*)calloc((size_t)p->ndsends, sizeof(PpDevMsg));
    if (!p->dsends) { fatal("out of memory for pipeline messages"); }
    for (int i = 0; i < p->ndsends; i++) { p->dsends[i].buf = dev_alloc(&m->ctx, p->max_msg_bytes); }
    p->nccl = 1;
}

// The device bytes of the messages (pipeline_use_nccl: the receive buffer and the send pool; 0 through MPI, whose
// buffers are pinned host memory).
static size_t pipeline_device_bytes(const Pipeline* p) { return p->nccl ? (size_t)(p->ndsends + 1) * p->max_msg_bytes : 0; }

// Waits for every send in flight (their buffers become free). With NCCL nothing waits: a device send buffer is
// taken again once its send has finished.
static void pp_wait_sends(Pipeline* p) {
    for (int i = 0; i < p->nsends; i++) {
        if (p->sends[i].busy) { comm_wait(&p->sends[i].req); p->sends[i].busy = 0; }
    }
}

static void pipeline_free(Pipeline* p, const GPT* m) {
    pp_wait_sends(p);
    if (p->nccl) { // every message consumed (the compute stream has run them all in), then the pairs end (each waits
                   // for its own stream: the sends finish as the peers take them)
        dev_sync(&m->ctx);
        for (int k = 0; k < PP_LINKS; k++) { comm_nccl_free(&p->link[k]); }
        comm_nccl_free(&p->wte_pair);
        for (int i = 0; i < p->ndsends; i++) { comm_nccl_req_free(&p->dsends[i].req); dev_free(&m->ctx, p->dsends[i].buf); }
        comm_nccl_req_free(&p->drecv_req);
        comm_nccl_req_free(&p->drecv_free);
        dev_free(&m->ctx, p->drecv);
        free(p->dsends);
    }
    for (int i = 0; i < p->nsends; i++) { dev_host_free(&m->ctx, p->sends[i].host); }
    free(p->sends);
    dev_host_free(&m->ctx, p->recv_host);
    dev_host_free(&m->ctx, p->early_host);
    dev_host_free(&m->ctx, p->wte_mine);
    dev_host_free(&m->ctx, p->wte_other);
    free(p->ops); free(p->slot_of); free(p->free_slots); free(p->inputs); free(p->targets); free(p->spans);
}

// Records a span when tracing this step.
static void pp_span(Pipeline* p, const char* what, int chunk, int mb, double t0, double t1) {
    if (p->step >= p->trace_steps) { return; }
    if (p->nspans == p->cap_spans) {
        p->cap_spans = p->cap_spans ? 2 * p->cap_spans : 256;
        p->spans = (PpSpan*)realloc(p->spans, sizeof(PpSpan) * (size_t)p->cap_spans);
        if (!p->spans) { fatal("out of memory recording the trace"); }
    }
    p->spans[p->nspans++] = (PpSpan){what, chunk, mb, p->step, t0 - p->t_origin, t1 - p->t_origin};
}

// The bytes of one message for the model's current (B, T): the rank's rows of the residual stream.
static size_t pp_msg_bytes(const GPT* m) { return (size_t)gpt_rows(m) * m->cfg.channels * sizeof(floatX); }

// The NCCL pair of a message to or from pipeline rank `peer` with `tag` (a send: out is 1).
static CommNccl* pp_link(Pipeline* p, int peer, int tag, int out) {
    int act = tag == PP_TAG_ACT, k = act ? (out ? PP_ACT_OUT : PP_ACT_IN) : (out ? PP_GRAD_OUT : PP_GRAD_IN);
    int expect = (p->rank + ((act == out) ? 1 : p->pp - 1)) % p->pp; // activations go up the ring, gradients down
    if (peer != expect || !comm_nccl_joined(&p->link[k])) {
        fatal("internal: pipeline rank %d has no NCCL link %s rank %d for tag %d", p->rank, out ? "to" : "from", peer, tag);
    }
    return &p->link[k];
}

// Sends n bytes of device memory to pipeline rank `peer` without waiting: copied first (into a free pooled host
// buffer for MPI, the ring's next device buffer for NCCL), so the source may change at once.
// NCCL: the CPU runs up to a step ahead of the device, so nearly every send of a step is still queued when the next
// is issued: the ring has a buffer for each, and a buffer's copy waits (on the compute stream) for the send it made
// a ring ago. That send belongs to an earlier step (or forward-only pass: one sends at most a step's messages), so
// its peer receives it without anything this rank has yet to do, and the wait cannot close a cycle.
static void pp_send(Pipeline* p, GPT* m, const void* src, size_t n, int peer, int tag) {
    if (p->nccl) {
        PpDevMsg* s = &p->dsends[p->dsend_next];
        p->dsend_next = (p->dsend_next + 1) % p->ndsends;
        comm_nccl_wait(&m->ctx, &s->req);
        dev_copy_d2d(&m->ctx, s->buf, src, n);
        comm_nccl_send(pp_link(p, peer, tag, 1), &m->ctx, s->buf, n, &s->req);
        return;
    }
    PpMsg* s = NULL;
    for (int i = 0; i < p->nsends && !s; i++) {
        if (p->sends[i].busy && comm_test(&p->sends[i].req)) { p->sends[i].busy = 0; }
        if (!p->sends[i].busy) { s = &p->sends[i]; }
    }
    if (!s) {
        p->sends = (PpMsg*)realloc(p->sends, sizeof(PpMsg) * (size_t)(p->nsends + 1));
        if (!p->sends) { fatal("out of memory for pipeline messages"); }
        s = &p->sends[p->nsends++];
        memset(s, 0, sizeof(*s));
        s->host = dev_host_alloc(&m->ctx, p->max_msg_bytes);
    }
    dev_copy_d2h(&m->ctx, s->host, src, n);
    dev_sync(&m->ctx);
    comm_isend(m->pp_group, s->host, n, peer, tag, &s->req);
    s->busy = 1;
}

// NCCL: starts receiving n bytes from pipeline rank `peer` into the receive buffer, once the copy of its last message
// into place has run. One buffer is enough: the receive of operation i + 1's input is started after operation i's
// input was copied out, and it still arrives while operation i computes.
static void pp_recv_nccl(Pipeline* p, size_t n, int peer, int tag) {
    comm_nccl_irecv(pp_link(p, peer, tag, 0), p->drecv, n, &p->drecv_free, &p->drecv_req);
}

// Starts receiving the n bytes the next operation will need from pipeline rank `peer`, so that they arrive while
// this rank computes (one receive ahead; messages between two ranks keep their order whenever they are posted).
static void pp_recv_early(Pipeline* p, GPT* m, size_t n, int peer, int tag) {
    if (p->nccl) { pp_recv_nccl(p, n, peer, tag); }
    else { comm_irecv(m->pp_group, p->early_host, n, peer, tag, &p->early_req); }
    p->early_posted = 1; p->early_peer = peer; p->early_tag = tag; p->early_n = n;
}

// Before operation i computes: starts the receive of operation i + 1's input, when it comes from another stage.
static void pp_post_next(Pipeline* p, GPT* m, int i) {
    if (i + 1 >= p->nops || p->early_posted) { return; }
    PpOp nx = p->ops[i + 1];
    int g = nx.v * p->pp + p->rank;
    if (nx.fwd && g > 0) { pp_recv_early(p, m, pp_msg_bytes(m), (g - 1) % p->pp, PP_TAG_ACT); }
    if (!nx.fwd && g < p->G - 1) { pp_recv_early(p, m, pp_msg_bytes(m), (g + 1) % p->pp, PP_TAG_GRAD); }
}

// Receives n bytes from pipeline rank `peer` into device memory: the receive started ahead, if it is this one, else
// a new one; waits for them (the time waited is a span; with NCCL the compute stream waits, the CPU goes on).
static void pp_recv(Pipeline* p, GPT* m, void* dst, size_t n, int peer, int tag, int chunk, int mb) {
    double t0 = now_seconds();
    if (p->early_posted && (p->early_peer != peer || p->early_tag != tag || p->early_n != n)) {
        fatal("internal: pipeline receive posted ahead does not match");
    }
    if (p->nccl) { // the compute stream waits for the receive and copies the message into place; nothing waits here
        if (!p->early_posted) { pp_recv_nccl(p, n, peer, tag); }
        p->early_posted = 0;
        comm_nccl_wait(&m->ctx, &p->drecv_req);
        dev_copy_d2d(&m->ctx, dst, p->drecv, n);
        comm_nccl_mark(&m->ctx, &p->drecv_free);
        pp_span(p, "recv", chunk, mb, t0, now_seconds());
        return;
    }
    if (p->early_posted) {
        comm_wait(&p->early_req);
        p->early_posted = 0;
        void* t = p->recv_host; p->recv_host = p->early_host; p->early_host = t; // (the buffer now holds the message)
    } else {
        comm_recv(m->pp_group, p->recv_host, n, peer, tag);
    }
    dev_copy_h2d(&m->ctx, dst, p->recv_host, n);
    pp_span(p, "recv", chunk, mb, t0, now_seconds());
}

// The output of the chunk just run forward: its last block's residual.
static floatX* pp_chunk_output(GPT* m) {
    return m->acts.residual3 + (size_t)(m->chunk_hi - 1 - m->chunk_lo) * gpt_rows(m) * m->cfg.channels;
}

// A forward without backward through every stage (evaluation, sampling): each rank runs its chunks in order, in
// slot 0, receiving each chunk's input from the previous rank and sending its output on. The last stage ends with
// the final LayerNorm of the whole model in its activations.
static void pp_forward_only(Pipeline* p, GPT* m, const int32_t* host_tokens, int B, int T) {
    m->acts = activations_slot(&m->acts0, 0);
    for (int v = 0; v < p->V; v++) {
        int g = v * p->pp + p->rank;
        m->B = B; m->T = T;
        if (g > 0) { pp_recv(p, m, m->acts.encoded, pp_msg_bytes(m), (g - 1) % p->pp, PP_TAG_ACT, g, -1); }
        gpt_forward_chunk(m, g, host_tokens, B, T);
        if (g < p->G - 1) { pp_send(p, m, pp_chunk_output(m), pp_msg_bytes(m), (g + 1) % p->pp, PP_TAG_ACT); }
    }
    pp_wait_sends(p);
}

// The tied wte: the first stage's gradient (from the embedding) and the last stage's (from the LM head) are summed
// on both, first + last in that order on each, so the two copies stay bit-identical (Megatron's embedding group).
static void pp_sum_tied_wte(Pipeline* p, GPT* m) {
    if (p->pp == 1 || !m->layout.has_wte) { return; }
    size_t n = (size_t)m->vocab_n * m->cfg.channels;
    if (p->nccl) { comm_nccl_allreduce_f32(&p->wte_pair, &m->ctx, m->g.wte, n); return; } // (a + b == b + a: both the same bits)
    int peer = p->rank == 0 ? p->pp - 1 : 0;
    dev_copy_d2h(&m->ctx, p->wte_mine, m->g.wte, n * sizeof(float));
    dev_sync(&m->ctx);
    CommRequest req;
    comm_isend(m->pp_group, p->wte_mine, n * sizeof(float), peer, PP_TAG_PARAM, &req);
    comm_recv(m->pp_group, p->wte_other, n * sizeof(float), peer, PP_TAG_PARAM);
    comm_wait(&req);
    const float* first = p->rank == 0 ? p->wte_mine : p->wte_other;
    const float* last = p->rank == 0 ? p->wte_other : p->wte_mine;
    float* sum = p->rank == 0 ? p->wte_other : p->wte_mine; // (each element read before it is written)
    for (size_t i = 0; i < n; i++) { sum[i] = first[i] + last[i]; }
    dev_copy_h2d(&m->ctx, m->g.wte, sum, n * sizeof(float));
}

// --trace FILE: rank 0 gathers every rank's spans and writes a Chrome / Perfetto trace (chrome://tracing,
// ui.perfetto.dev): one process per rank, complete events in microseconds.
static void pp_write_trace(Pipeline* p, ParallelContext* pc, const char* path) {
    int me = pc->world_rank;
    double* mine = (double*)mallocCheck(sizeof(double) * 6 * (size_t)(p->nspans + 1));
    for (int i = 0; i < p->nspans; i++) {
        const PpSpan* s = &p->spans[i];
        double kind = strcmp(s->what, "forward") == 0 ? 0 : strcmp(s->what, "backward") == 0 ? 1 : strcmp(s->what, "recv") == 0 ? 2 : 3;
        double row[6] = {kind, (double)s->chunk, (double)s->mb, (double)s->step, s->t0, s->t1};
        memcpy(mine + 6 * i, row, sizeof(row));
    }
    AtomicFile af;
    if (me == 0) {
        atomic_open(&af, path);
        fprintf(af.fp, "{\"traceEvents\": [\n");
    }
    static const char* const names[4] = {"forward", "backward", "recv", "optimizer"};
    int first = 1;
    for (int r = 0; r < pc->world_size; r++) {
        double count = p->nspans;
        double* rows = mine;
        if (r != 0) {
            if (me == r) { comm_send(&pc->world, &count, sizeof(count), 0, 21); comm_send(&pc->world, mine, sizeof(double) * 6 * (size_t)p->nspans, 0, 22); }
            if (me == 0) {
                comm_recv(&pc->world, &count, sizeof(count), r, 21);
                rows = (double*)mallocCheck(sizeof(double) * 6 * (size_t)(count + 1));
                comm_recv(&pc->world, rows, sizeof(double) * 6 * (size_t)count, r, 22);
            }
        }
        if (me == 0) {
            if (first) { first = 0; } else { fprintf(af.fp, ",\n"); }
            fprintf(af.fp, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}", r, r);
            for (int i = 0; i < (int)count; i++) {
                const double* q = rows + 6 * i;
                int k = (int)q[0];
                char label[64];
                if (k == 3) { snprintf(label, sizeof(label), "optimizer (step %d)", (int)q[3] + 1); }
                else { snprintf(label, sizeof(label), "%s chunk %d mb %d", names[k], (int)q[1], (int)q[2]); }
                fprintf(af.fp, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, \"ts\": %.1f, \"dur\": %.1f, "
                        "\"args\": {\"step\": %d}}", label, names[k], r, q[4] * 1e6, (q[5] - q[4]) * 1e6, (int)q[3] + 1);
            }
            if (rows != mine) { free(rows); }
        }
    }
    if (me == 0) {
        fprintf(af.fp, "\n]}\n");
        atomic_commit(&af);
    }
    free(mine);
}

#endif // PIPELINE_TRAIN_H
