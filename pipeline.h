/*
pipeline.h: the schedules of pipeline parallelism (--pp) as lists of operations, one list per rank; the partition of
the model's blocks into pipeline chunks; and a simulator that runs every rank's list against the others' (tests/
test_pp.c checks each schedule's order, that it cannot deadlock, its activation memory and its bubble against the
theory; the trainer prints the theory next to what it measures), and a second one under NCCL's point-to-point
semantics (pp_simulate_rendezvous).

The model is cut into G = pp x V chunks of contiguous blocks (V "virtual stages" per rank, 1 unless interleaved);
chunk g lives on rank g % pp as its local chunk g / pp. Chunk 0 also holds the embeddings, chunk G-1 the final
LayerNorm and the LM head with the loss. A micro-batch's forward runs chunk 0, 1, ..., G-1; its backward G-1, ..., 0.
Activations travel forward (chunk g's output to rank (g+1) % pp) and gradients backward, point to point.

A rank executes its list in order; an operation whose input comes from another rank waits for it (a receive), and
outputs are sent without waiting (non-blocking sends). Messages between two ranks in one direction are consumed in
the order they were sent (the simulator checks this for every schedule, so one tag per direction suffices, as in
Megatron-LM).

  gpipe        all M forwards, then all M backwards: up to M micro-batches of activations alive per rank;
               bubble (p-1)/(M+p-1) of the step.
  1f1b         warm-up of p-1-rank forwards, then one forward and one backward alternating, then the remaining
               backwards (PipeDream-Flush, Megatron's default): at most p micro-batches alive; the same bubble.
  interleaved  1F1B over V chunks per rank (Megatron-LM's interleaved schedule): forwards run V chunks of p
               micro-batches in turn; M must be a multiple of p and the blocks divide into p V chunks. The bubble
               shrinks by V: (p-1)/(V M + p - 1) of the step.
*/
#ifndef PIPELINE_H
#define PIPELINE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PP_GPIPE = 0, PP_1F1B, PP_INTERLEAVED };

static const char* const pp_schedule_names[3] = { "gpipe", "1f1b", "interleaved" };

// -1 for an unknown name.
static int pp_schedule_parse(const char* name) {
    for (int k = 0; k < 3; k++) { if (strcmp(name, pp_schedule_names[k]) == 0) { return k; } }
    return -1;
}

// One operation of a rank: the forward or backward of micro-batch mb through the rank's local chunk v.
typedef struct {
    int fwd;     // 1 forward, 0 backward
    int v;       // local chunk (0..V-1): global chunk v * pp + rank
    int mb;      // micro-batch (0..M-1)
} PpOp;

// Whether (kind, pp, M, V) is a schedule for a model of L blocks; 0 with a message otherwise.
static int pp_schedule_valid(int kind, int pp, int M, int V, int L, char* err, size_t cap) {
    if (pp < 1 || M < 1 || V < 1) { snprintf(err, cap, "pipeline size %d, %d micro-batches, %d virtual stages", pp, M, V); return 0; }
    if (kind != PP_INTERLEAVED && V != 1) { snprintf(err, cap, "--virtual-stages %d needs --pp-schedule interleaved", V); return 0; }
    if (L < pp * V) {
        snprintf(err, cap, "%d blocks cannot fill %d pipeline chunks (pp %d x virtual stages %d): every chunk needs a block", L, pp * V, pp, V);
        return 0;
    }
    if (kind == PP_INTERLEAVED) {
        if (pp < 2) { snprintf(err, cap, "the interleaved schedule needs --pp 2 or more"); return 0; }
        if (M % pp != 0) { snprintf(err, cap, "the interleaved schedule needs the micro-batches (%d) to be a multiple of --pp %d", M, pp); return 0; }
        if (L % (pp * V) != 0) {
            snprintf(err, cap, "the interleaved schedule needs the %d blocks to divide into pp x virtual stages = %d equal chunks", L, pp * V);
            return 0;
        }
    }
    return 1;
}

// Rank `rank`'s list (2 M V operations, into ops); returns its length.
static int pp_schedule_build(int kind, int pp, int rank, int M, int V, PpOp* ops) {
    int n = 0;
    if (kind == PP_GPIPE) {
        for (int mb = 0; mb < M; mb++) { ops[n++] = (PpOp){1, 0, mb}; }
        for (int mb = 0; mb < M; mb++) { ops[n++] = (PpOp){0, 0, mb}; }
        return n;
    }
    if (kind == PP_1F1B) {
        int warm = pp - rank - 1 < M ? pp - rank - 1 : M;
        for (int i = 0; i < warm; i++) { ops[n++] = (PpOp){1, 0, i}; }
        for (int i = 0; i < M - warm; i++) { ops[n++] = (PpOp){1, 0, warm + i}; ops[n++] = (PpOp){0, 0, i}; }
        for (int i = M - warm; i < M; i++) { ops[n++] = (PpOp){0, 0, i}; }
        return n;
    }
    // interleaved: the k-th forward of a rank is micro-batch (k / (p V)) p + k % p through chunk (k / p) % V; the
    // k-th backward the same micro-batch through chunk V - 1 - (k / p) % V
    int total = M * V;
    int warm = (pp - rank - 1) * 2 + (V - 1) * pp;
    if (warm > total) { warm = total; }
    int kf = 0, kb = 0;
#define PP_NEXT_F() do { ops[n++] = (PpOp){1, (kf / pp) % V, (kf / (pp * V)) * pp + kf % pp}; kf++; } while (0)
#define PP_NEXT_B() do { ops[n++] = (PpOp){0, V - 1 - (kb / pp) % V, (kb / (pp * V)) * pp + kb % pp}; kb++; } while (0)
    for (int i = 0; i < warm; i++) { PP_NEXT_F(); }
    for (int i = 0; i < total - warm; i++) { PP_NEXT_F(); PP_NEXT_B(); }
    for (int i = total - warm; i < total; i++) { PP_NEXT_B(); }
#undef PP_NEXT_F
#undef PP_NEXT_B
    return n;
}

// The blocks [first[g], first[g+1]) of each of the G chunks (first: G + 1 entries). Interleaved: equal chunks.
// Otherwise balanced by cost: a block costs its FLOPs per token (block_cost), the last chunk also the LM head's
// (head_cost); contiguous blocks are assigned to minimise the largest chunk's cost (exact, by dynamic programming
// over the prefix sums), each chunk at least one block.
static void pp_partition(int L, int G, int equal, double block_cost, double head_cost, int* first) {
    if (equal) {
        for (int g = 0; g <= G; g++) { first[g] = g * (L / G); }
        return;
    }
    // best[g][l]: the smallest largest-cost of splitting blocks [0, l) into g chunks (the head goes with the last)
    double* best = (double*)malloc(sizeof(double) * (size_t)(G + 1) * (L + 1));
    int* cut = (int*)malloc(sizeof(int) * (size_t)(G + 1) * (L + 1));
    if (!best || !cut) { fprintf(stderr, "error: out of memory partitioning the pipeline\n"); exit(1); }
#define PP_AT(a, g, l) a[(size_t)(g) * (L + 1) + (l)]
    for (int g = 0; g <= G; g++) { for (int l = 0; l <= L; l++) { PP_AT(best, g, l) = 1e300; PP_AT(cut, g, l) = 0; } }
    PP_AT(best, 0, 0) = 0.0;
    for (int g = 1; g <= G; g++) {
        for (int l = g; l <= L; l++) {
            for (int k = g - 1; k < l; k++) { // chunk g-1 holds blocks [k, l)
                double c = (l - k) * block_cost + (g == G && l == L ? head_cost : 0.0);
                double worst = PP_AT(best, g - 1, k) > c ? PP_AT(best, g - 1, k) : c;
                if (worst < PP_AT(best, g, l)) { PP_AT(best, g, l) = worst; PP_AT(cut, g, l) = k; }
            }
        }
    }
    first[G] = L;
    for (int g = G, l = L; g > 0; g--) { l = PP_AT(cut, g, l); first[g - 1] = l; }
#undef PP_AT
    free(best);
    free(cut);
}

// ----------------------------------------------------------------------------
// The simulator: every rank runs its list; an operation starts when its rank is free and its input has arrived
// (the previous chunk's forward of the same micro-batch, or the next chunk's backward), takes tf or tb, and its
// output is sent at once. Returns 0 and fills the figures, or -1 with a message (a deadlock, an operation out of
// order, messages received out of the order they were sent).

typedef struct {
    double makespan;          // time of the last operation's end
    double bubble;            // 1 - busy / (ranks x makespan): the share of the step the ranks sit idle
    int max_alive[64];        // per rank: most micro-batches whose forward ran and backward did not, at any time
} PpSimResult;

// The simulator over given lists: rank r's len[r] operations at ops + r * 2 M V. pp_simulate runs it on a schedule
// builder's lists; tests/test_pp also feeds it broken ones, which it must refuse.
static int pp_simulate_ops(int pp, int M, int V, const PpOp* ops, const int* len, double tf, double tb, PpSimResult* res,
                           char* err, size_t cap) {
    int G = pp * V, per = 2 * M * V;
    if (pp > 64) { snprintf(err, cap, "pp %d above the simulator's 64", pp); return -1; }
    double* fdone = (double*)malloc(sizeof(double) * (size_t)G * M); // finish time of F(g, mb), -1 not yet
    double* bdone = (double*)malloc(sizeof(double) * (size_t)G * M);
    // per directed message stream (rank -> rank+1 forward, rank -> rank-1 backward): the order sent and received
    int* sent = (int*)malloc(sizeof(int) * (size_t)2 * pp * G * M);
    int* nsent = (int*)calloc((size_t)2 * pp, sizeof(int));
    int* nrecv = (int*)calloc((size_t)2 * pp, sizeof(int));
    if (!fdone || !bdone || !sent || !nsent || !nrecv) { fprintf(stderr, "error: out of memory\n"); exit(1); }
    int pos[64], alive[64];
    double free_at[64], busy = 0.0;
    int rc = 0;
    for (int r = 0; r < pp; r++) {
        pos[r] = 0; alive[r] = 0; free_at[r] = 0.0; res->max_alive[r] = 0;
        if (len[r] != per) { snprintf(err, cap, "rank %d has %d operations, not %d", r, len[r], per); rc = -1; }
    }
    for (int i = 0; i < G * M; i++) { fdone[i] = -1.0; bdone[i] = -1.0; }
    // each operation exactly once per rank
    for (int r = 0; rc == 0 && r < pp; r++) {
        char* seen = (char*)calloc((size_t)2 * V * M, 1);
        for (int i = 0; i < per; i++) {
            PpOp o = ops[(size_t)r * per + i];
            if (o.v < 0 || o.v >= V || o.mb < 0 || o.mb >= M || seen[(o.fwd * V + o.v) * M + o.mb]++) {
                snprintf(err, cap, "rank %d: operation %d (%s chunk %d, micro-batch %d) is out of range or repeated", r, i,
                         o.fwd ? "forward" : "backward", o.v, o.mb);
                rc = -1;
                break;
            }
        }
        free(seen);
    }
    double makespan = 0.0;
    int remaining = rc == 0 ? pp * per : 0;
    while (remaining > 0) {
        // the ready operation that can start earliest, over all ranks
        int pick = -1;
        double start_best = 0.0;
        for (int r = 0; r < pp; r++) {
            if (pos[r] == len[r]) { continue; }
            PpOp o = ops[(size_t)r * per + pos[r]];
            int g = o.v * pp + r;
            double dep = 0.0;
            int ready;
            if (o.fwd) { ready = g == 0 || fdone[(g - 1) * M + o.mb] >= 0; if (g > 0) { dep = fdone[(g - 1) * M + o.mb]; } }
            else if (g == G - 1) { ready = fdone[g * M + o.mb] >= 0; dep = fdone[g * M + o.mb]; }
            else { ready = bdone[(g + 1) * M + o.mb] >= 0; dep = bdone[(g + 1) * M + o.mb]; }
            if (!ready) { continue; }
            double start = free_at[r] > dep ? free_at[r] : dep;
            if (pick < 0 || start < start_best) { pick = r; start_best = start; }
        }
        if (pick < 0) {
            int n = snprintf(err, cap, "deadlock: every rank waits:");
            for (int r = 0; r < pp && n < (int)cap; r++) {
                if (pos[r] == len[r]) { continue; }
                PpOp o = ops[(size_t)r * per + pos[r]];
                n += snprintf(err + n, cap - n, " rank %d on %s(chunk %d, mb %d);", r, o.fwd ? "F" : "B", o.v * pp + r, o.mb);
            }
            rc = -1;
            break;
        }
        int r = pick;
        PpOp o = ops[(size_t)r * per + pos[r]];
        int g = o.v * pp + r;
        // (a backward is ready only after the chunk above's backward, hence its forward, hence this chunk's forward:
        // a list that puts a backward before its own forward deadlocks above and never gets here)
        // the input's message must be the next one its stream delivers
        int from = -1, dir = 0;
        if (o.fwd && g > 0) { from = (g - 1) % pp; dir = 0; }
        if (!o.fwd && g < G - 1) { from = (g + 1) % pp; dir = 1; }
        if (from >= 0 && from != r) {
            int s = dir * pp + from;
            int want = g * M + o.mb;
            if (nrecv[s] >= nsent[s] || sent[(size_t)s * G * M + nrecv[s]] != want) {
                snprintf(err, cap, "rank %d receives %s of chunk %d, micro-batch %d out of the order rank %d sent it", r,
                         o.fwd ? "the activation" : "the gradient", g, o.mb, from);
                rc = -1;
                break;
            }
            nrecv[s]++;
        }
        double t = o.fwd ? tf : tb;
        double end = start_best + t;
        busy += t;
        free_at[r] = end;
        if (end > makespan) { makespan = end; }
        if (o.fwd) { fdone[g * M + o.mb] = end; alive[r]++; if (alive[r] > res->max_alive[r]) { res->max_alive[r] = alive[r]; } }
        else { bdone[g * M + o.mb] = end; alive[r]--; }
        // the output's message: to the next chunk's rank (forward) or the previous one's (backward)
        int to = -1, odir = 0;
        if (o.fwd && g < G - 1) { to = (g + 1) % pp; odir = 0; }
        if (!o.fwd && g > 0) { to = (g - 1) % pp; odir = 1; }
        if (to >= 0 && to != r) {
            int s = odir * pp + r;
            sent[(size_t)s * G * M + nsent[s]++] = (o.fwd ? g + 1 : g - 1) * M + o.mb;
        }
        pos[r]++;
        remaining--;
    }
    res->makespan = makespan;
    res->bubble = makespan > 0 ? 1.0 - busy / (pp * makespan) : 0.0;
    free(fdone); free(bdone); free(sent); free(nsent); free(nrecv);
    return rc;
}

// The simulator over schedule `kind`'s lists for pp stages, M micro-batches, V chunks per rank.
static int pp_simulate(int kind, int pp, int M, int V, double tf, double tb, PpSimResult* res, char* err, size_t cap) {
    if (pp > 64) { snprintf(err, cap, "pp %d above the simulator's 64", pp); return -1; }
    int per = 2 * M * V, len[64];
    PpOp* ops = (PpOp*)malloc(sizeof(PpOp) * (size_t)pp * per);
    if (!ops) { fprintf(stderr, "error: out of memory\n"); exit(1); }
    for (int r = 0; r < pp; r++) { len[r] = pp_schedule_build(kind, pp, r, M, V, ops + (size_t)r * per); }
    int rc = pp_simulate_ops(pp, M, V, ops, len, tf, tb, res, err, cap);
    free(ops);
    return rc;
}

// ----------------------------------------------------------------------------
// The same schedules under NCCL's point-to-point semantics (the trainer's --comm nccl, pipeline_train.h): a send
// finishes only once its peer has posted the matching receive (a rendezvous), and every operation on a stream waits
// for the one before it. Each rank issues, per operation i of its list: the receive of operation i + 1's input (posted
// one ahead, once the copy of the last received message out of the single receive buffer has run, that is at the
// start of the last operation that received), then the send of operation i's output (once i has computed).
// Operation 0's receive, if any, is issued first. Two ways to place them on streams:
//   shared 0   a stream per direction of each link (the trainer's NCCL pairs): a link's sends and its receives are
//              two FIFOs that meet in the same order (the order check above)
//   shared 1   one stream per rank for all of its sends and receives (one NCCL communicator for the pipeline group)
// Returns 0 and the makespan, or -1 with the deadlock's description. With shared 0 the makespan equals
// pp_simulate's (buffered sends) for every schedule: the rendezvous never delays an operation (tests/test_pp).

typedef struct {
    int send;      // 1 send, 0 receive
    int op;        // the compute operation whose output it sends, or whose input it receives
    int link;      // directed link and kind: (kind * pp + sender) (kind 0 activations, to sender + 1; 1 gradients, to sender - 1)
    int stream;    // the stream it is issued on
    int seq;       // its place on that stream (it runs when every earlier one there has finished)
    int mark_op;   // a receive: the last operation before op that received, whose input's copy out of the buffer it
                   // waits for (-1: none)
} PpP2p;

static int pp_simulate_rendezvous(int kind, int pp, int M, int V, double tf, double tb, int shared, double* makespan,
                                  char* err, size_t cap) {
    int G = pp * V, per = 2 * M * V;
    if (pp < 2 || pp > 64) { snprintf(err, cap, "pp %d: the rendezvous simulator takes 2 to 64 stages", pp); return -1; }
    int nstreams = shared ? pp : 4 * pp, nlinks = 2 * pp;
    PpOp* ops = (PpOp*)malloc(sizeof(PpOp) * (size_t)pp * per);
    PpP2p* q = (PpP2p*)malloc(sizeof(PpP2p) * (size_t)pp * 2 * per); // rank r's operations at q + r * 2 per, in issue order
    int* nq = (int*)calloc((size_t)pp, sizeof(int));
    double* start = (double*)malloc(sizeof(double) * (size_t)pp * per);
    double* end = (double*)malloc(sizeof(double) * (size_t)pp * per);
    double* recv_done = (double*)malloc(sizeof(double) * (size_t)pp * per); // per compute operation: its input's arrival
    int* nsent = (int*)calloc((size_t)nlinks, sizeof(int));
    int* nrecv = (int*)calloc((size_t)nlinks, sizeof(int));
    int* recv_of = (int*)malloc(sizeof(int) * (size_t)nlinks * per);   // (link, k): the k-th receive's index in q
    int* sends = (int*)malloc(sizeof(int) * (size_t)pp * per);          // every send's index in q, and its (link, k)
    int* send_k = (int*)malloc(sizeof(int) * (size_t)pp * per);
    int* issued = (int*)calloc((size_t)nstreams, sizeof(int));
    int* head = (int*)calloc((size_t)nstreams, sizeof(int));   // per stream: the seq of its next operation
    double* free_at = (double*)calloc((size_t)nstreams, sizeof(double));
    if (!ops || !q || !nq || !start || !end || !recv_done || !nsent || !nrecv || !recv_of || !sends || !send_k || !issued ||
        !head || !free_at) {
        fprintf(stderr, "error: out of memory\n");
        exit(1);
    }
    int len[64], pos[64], nsends = 0;
    for (int r = 0; r < pp; r++) {
        len[r] = pp_schedule_build(kind, pp, r, M, V, ops + (size_t)r * per);
        pos[r] = 0;
        for (int i = 0; i < per; i++) { recv_done[(size_t)r * per + i] = -1.0; }
    }
    for (int i = 0; i < nlinks * per; i++) { recv_of[i] = -1; }
    // the input's link of operation o of rank r (-1: none), and its output's
#define PP_G(r, o) ((o).v * pp + (r))
#define PP_IN_LINK(r, o) ((o).fwd ? (PP_G(r, o) > 0 ? 0 * pp + (r + pp - 1) % pp : -1) : (PP_G(r, o) < G - 1 ? 1 * pp + (r + 1) % pp : -1))
#define PP_OUT_LINK(r, o) ((o).fwd ? (PP_G(r, o) < G - 1 ? 0 * pp + (r) : -1) : (PP_G(r, o) > 0 ? 1 * pp + (r) : -1))
    // issue order and streams (pairs: 4 per rank, act out / act in / grad out / grad in)
    for (int r = 0; r < pp; r++) {
        const PpOp* o = ops + (size_t)r * per;
        int last_recv = -1; // the last operation so far whose input was received
#define PP_ISSUE(isSend, opi, lk) do { \
            int at_ = r * 2 * per + nq[r]++; \
            PpP2p* x = &q[at_]; \
            x->send = (isSend); x->op = (opi); x->link = (lk); \
            x->stream = shared ? r : 4 * r + ((lk) / pp) * 2 + ((isSend) ? 0 : 1); \
            x->seq = issued[x->stream]++; \
            x->mark_op = last_recv; \
            if (isSend) { sends[nsends] = at_; send_k[nsends++] = nsent[lk]++; } \
            else { recv_of[(lk) * per + nrecv[lk]++] = at_; } \
        } while (0)
        if (len[r] > 0 && PP_IN_LINK(r, o[0]) >= 0) { PP_ISSUE(0, 0, PP_IN_LINK(r, o[0])); }
        for (int i = 0; i < len[r]; i++) {
            if (PP_IN_LINK(r, o[i]) >= 0) { last_recv = i; } // (operation i's input is copied out as it starts)
            if (i + 1 < len[r] && PP_IN_LINK(r, o[i + 1]) >= 0) { PP_ISSUE(0, i + 1, PP_IN_LINK(r, o[i + 1])); }
            if (PP_OUT_LINK(r, o[i]) >= 0) { PP_ISSUE(1, i, PP_OUT_LINK(r, o[i])); }
        }
#undef PP_ISSUE
    }
    int done_sends = 0, done_ops = 0, rc = 0;
    for (int progress = 1; progress && rc == 0;) {
        progress = 0;
        // compute: each rank's next operation, once the one before it and its input are done
        for (int r = 0; r < pp; r++) {
            while (pos[r] < len[r]) {
                int i = pos[r];
                PpOp o = ops[(size_t)r * per + i];
                double t = i > 0 ? end[(size_t)r * per + i - 1] : 0.0;
                if (PP_IN_LINK(r, o) >= 0) {
                    double a = recv_done[(size_t)r * per + i];
                    if (a < 0) { break; }
                    if (a > t) { t = a; }
                }
                start[(size_t)r * per + i] = t;
                end[(size_t)r * per + i] = t + (o.fwd ? tf : tb);
                pos[r]++; done_ops++; progress = 1;
            }
        }
        // point to point: a send at the head of its stream, its data computed, meets its receive at the head of the
        // peer's stream, that receive's buffer free (the copy it waits for has run); both finish together
        for (int j = 0; j < nsends; j++) {
            const PpP2p* s = &q[sends[j]];
            int r = sends[j] / (2 * per);
            if (head[s->stream] != s->seq || pos[r] <= s->op) { continue; }
            int at = recv_of[s->link * per + send_k[j]];
            if (at < 0) { snprintf(err, cap, "internal: no receive for message %d of link %d", send_k[j], s->link); rc = -1; break; }
            const PpP2p* rv = &q[at];
            int peer = at / (2 * per);
            if (head[rv->stream] != rv->seq || (rv->mark_op >= 0 && pos[peer] <= rv->mark_op)) { continue; }
            double t = end[(size_t)r * per + s->op];
            if (free_at[s->stream] > t) { t = free_at[s->stream]; }
            if (free_at[rv->stream] > t) { t = free_at[rv->stream]; }
            if (rv->mark_op >= 0 && start[(size_t)peer * per + rv->mark_op] > t) { t = start[(size_t)peer * per + rv->mark_op]; }
            free_at[s->stream] = free_at[rv->stream] = t;
            head[s->stream]++;
            head[rv->stream]++;
            recv_done[(size_t)peer * per + rv->op] = t;
            done_sends++; progress = 1;
        }
    }
    if (rc == 0 && (done_ops < pp * per || done_sends < nsends)) {
        int n = snprintf(err, cap, "deadlock (%s):", shared ? "one stream per rank" : "a stream per link direction");
        for (int r = 0; r < pp && n < (int)cap; r++) {
            if (pos[r] < len[r]) {
                PpOp o = ops[(size_t)r * per + pos[r]];
                n += snprintf(err + n, cap - n, " rank %d waits to run %s(chunk %d, mb %d);", r, o.fwd ? "F" : "B", PP_G(r, o), o.mb);
            }
        }
        rc = -1;
    }
    double ms = 0.0;
    for (int r = 0; r < pp && rc == 0; r++) { if (len[r] > 0 && end[(size_t)r * per + len[r] - 1] > ms) { ms = end[(size_t)r * per + len[r] - 1]; } }
    *makespan = ms;
#undef PP_G
#undef PP_IN_LINK
#undef PP_OUT_LINK
    free(ops); free(q); free(nq); free(start); free(end); free(recv_done); free(nsent); free(nrecv); free(recv_of);
    free(sends); free(send_k); free(issued); free(head); free(free_at);
    return rc;
}

// The theory's bubble: the share of a step each rank sits idle with uniform forward and backward costs.
static double pp_bubble_theory(int kind, int pp, int M, int V) {
    int v = kind == PP_INTERLEAVED ? V : 1;
    return (double)(pp - 1) / ((double)v * M + pp - 1);
}

#endif // PIPELINE_H
