/*
comm_timeout.h: who is missing when a collective times out. Split out of comm.h by topic and included by it where
this code stood; not a standalone header. It reads the monitor records of the group's members (this node's from
the shared-memory window, other nodes' through comm_remote.h's servers), finds the ranks that never arrived or lag
behind, tells a dead process from a live one that is busy outside communication or stopped, and ends the job with
one line that names them (comm__timeout, called by comm_wait). comm.h's header, "Failure handling", says what the
records hold and how they are published.
*/
#ifndef COMM_TIMEOUT_H
#define COMM_TIMEOUT_H

// Another node's records, as one of its ranks' monitor server sent them (comm_remote.h).
typedef struct {
    int n;
    int64_t now_ns;                  // that node's clock when it answered
    int* world_rank;                 // (n)
    int* gone;                       // (n) 1: the process no longer exists
    CommSlot* slot;                  // (n)
} CommRemoteView;

#ifdef USE_MPI
#include "comm_remote.h" // defines: comm__remote_init, comm__remote_stop, comm__remote_ask, comm__remote_free
#else
static int comm__remote_ask(const ParallelContext* pc, int r, CommRemoteView* v) { (void)pc; (void)r; (void)v; return 0; }
static void comm__remote_free(CommRemoteView* v) { (void)v; }
#endif

// What is known of world rank r: its record (this node's shared memory, or a snapshot another node sent), whether its
// process is gone, and how long ago it last called into comm.h (by its own node's clock). s NULL: nothing is known.
typedef struct { const CommSlot* s; int gone; double idle; } CommRankState;

static CommRankState comm__rank_state(const ParallelContext* pc, int r, const CommRemoteView* views, int nviews, double now_s) {
    CommRankState st = {NULL, 0, 0.0};
    const CommSlot* s = comm__slot(pc, r);
    if (s) {
        st.s = s;
        st.gone = comm__pid_dead(comm__read(&s->pid));
        st.idle = now_s - 1e-9 * (double)comm__read(&s->last_seen_ns);
        return st;
    }
    for (int v = 0; v < nviews; v++) {
        for (int i = 0; i < views[v].n; i++) {
            if (views[v].world_rank[i] != r) { continue; }
            st.s = &views[v].slot[i];
            st.gone = views[v].gone[i];
            st.idle = 1e-9 * (double)(views[v].now_ns - views[v].slot[i].last_seen_ns);
            return st;
        }
    }
    return st;
}

static const char* comm__host(const ParallelContext* pc, int r) { return pc->peers ? pc->peers[r].host : "?"; }

// Asks the other nodes that hold members of g for their records: each node's ranks in turn until one answers.
// Returns how many views were filled (free each with comm__remote_free).
static int comm__remote_views(const ParallelContext* pc, const CommGroup* g, CommRemoteView* views) {
    int nviews = 0;
    if (!pc->peers) { return 0; }
    for (int m = 0; m < g->size; m++) {
        int r = g->world_ranks[m];
        if (comm__slot(pc, r) || comm__rank_state(pc, r, views, nviews, 0.0).s) { continue; } // known already
        int node = pc->peers[r].node, asked = 0;
        for (int q = 0; q < pc->world_size && !asked; q++) {
            if (pc->peers[q].node == node && comm__remote_ask(pc, q, &views[nviews])) { nviews++; asked = 1; }
        }
        if (!asked) {
            // no rank of that node answers: remember it as an empty view so that it is not asked again
            CommRemoteView* v = &views[nviews++];
            memset(v, 0, sizeof(*v));
            v->n = 1;
            v->world_rank = (int*)mallocCheck(sizeof(int));
            v->gone = (int*)mallocCheck(sizeof(int));
            v->slot = NULL;
            v->world_rank[0] = -1 - node; // a node marker, never a rank
        }
    }
    return nviews;
}

// 1 if r's node was asked and no rank of it answered.
static int comm__node_silent(const ParallelContext* pc, int r, const CommRemoteView* views, int nviews) {
    for (int v = 0; pc->peers && v < nviews; v++) {
        if (views[v].slot == NULL && views[v].world_rank[0] == -1 - pc->peers[r].node) { return 1; }
    }
    return 0;
}

// The world ranks of group members (other than this rank) known to have started fewer than seq collectives on g,
// into out[]; returns how many, or -1 if the monitor is off. *unknown (if not NULL) receives the number of members
// whose records could not be read (other nodes, when no view of them is given or their node did not answer).
static int comm__lagging(const CommGroup* g, int64_t seq, const CommRemoteView* views, int nviews, int* out, int max_out, int* unknown) {
    const ParallelContext* pc = g->pc;
    if (unknown) { *unknown = 0; }
    if (pc == NULL || !pc->monitor_ok) { return -1; }
    int n = 0;
    for (int m = 0; m < g->size; m++) {
        if (m == g->rank) { continue; }
        CommRankState st = comm__rank_state(pc, g->world_ranks[m], views, nviews, 0.0);
        if (st.s == NULL) {
            if (unknown) { (*unknown)++; }
            continue;
        }
        if (comm__read(&st.s->entered[g->slot]) < seq) {
            if (n < max_out) { out[n] = g->world_ranks[m]; }
            n++;
        }
    }
    return n;
}

// The same from this node's records only (tests).
static int comm_lagging_ranks(const CommGroup* g, int64_t seq, int* out, int max_out, int* unknown) {
    return comm__lagging(g, seq, NULL, 0, out, max_out, unknown);
}

// Appends a description of world rank r's published state to buf at *pos ("rank 1 on host0 (pid 42) is alive, ...").
static void comm__describe_rank(const ParallelContext* pc, int r, const CommRemoteView* views, int nviews, char* buf, size_t len,
                                size_t* pos, double now_s) {
    CommRankState st = comm__rank_state(pc, r, views, nviews, now_s);
    if (*pos >= len) { return; }
    int w;
    const char* host = comm__host(pc, r);
    if (st.s == NULL) {
        w = snprintf(buf + *pos, len - *pos, comm__node_silent(pc, r, views, nviews)
                     ? "rank %d on %s: no rank of that host answers (all dead or stopped, or the network to it is down)"
                     : "rank %d on %s: on another node, state unknown", r, host);
    } else {
        long long pid = (long long)comm__read(&st.s->pid);
        int64_t wop = comm__read(&st.s->wait_op);
        if (st.gone) {
            w = snprintf(buf + *pos, len - *pos, "rank %d on %s (pid %lld) is dead", r, host, pid);
        } else if (wop >= 0 && wop < COMM_OP_COUNT_) {
            int64_t ws = comm__read(&st.s->wait_slot);
            w = snprintf(buf + *pos, len - *pos, "rank %d on %s (pid %lld) is alive, waiting in %s #%lld on group '%s' "
                         "(last poll %.1f s ago)", r, host, pid, comm_op_names[wop], (long long)comm__read(&st.s->wait_seq),
                         (ws >= 0 && ws < COMM_MAX_GROUPS) ? comm_slot_names[ws] : "?", st.idle);
        } else {
            w = snprintf(buf + *pos, len - *pos, "rank %d on %s (pid %lld) is alive, outside communication for %.1f s (last seen then)",
                         r, host, pid, st.idle);
        }
    }
    if (w > 0) { *pos += (size_t)w; }
    if (*pos >= len) { *pos = len - 1; }
}

// Timeout: prints one line naming the operation and the ranks that never arrived, on any node, then aborts the job.
static void __attribute__((noreturn)) comm__timeout(CommRequest* req, double waited) {
    CommGroup* g = req->group;
    ParallelContext* pc = g->pc;
    char line[8192];
    size_t pos = 0, len = sizeof(line);
    int w;
    comm__describe(req, line, len);
    pos = strlen(line);
    double now_s = now_seconds();
    w = snprintf(line + pos, len - pos, " did not complete within %g s", pc->timeout_s);
    if (w > 0) { pos += (size_t)w; }
    if (now_s - req->start_time > waited + 1.0) {
        w = snprintf(line + pos, len - pos, " (started %.1f s ago)", now_s - req->start_time);
        if (w > 0) { pos += (size_t)w; }
    }
    // the other nodes' records, from their monitor servers (each node asked once)
    CommRemoteView* views = (CommRemoteView*)callocCheck((size_t)g->size + 1, sizeof(CommRemoteView));
    int nviews = pc->monitor_ok ? comm__remote_views(pc, g, views) : 0;
    if (req->peer >= 0) { // a message, or an NCCL pair's operation: the one other rank
        int peer = g->world_ranks[req->peer];
        w = snprintf(line + pos, len - pos, "; the peer did not %s: ",
                     req->op == COMM_OP_SEND ? "receive" : req->op == COMM_OP_RECV ? "send" : "take part");
        if (w > 0) { pos += (size_t)w; }
        if (pc->monitor_ok) {
            comm__describe_rank(pc, peer, views, nviews, line, len, &pos, now_s);
        } else {
            w = snprintf(line + pos, len - pos, "rank %d, state unknown (no shared-memory monitor)", peer);
            if (w > 0) { pos += (size_t)w; }
        }
    } else {
        int* lag = (int*)mallocCheck((size_t)g->size * sizeof(int));
        int unknown = 0;
        int n = comm__lagging(g, req->seq, views, nviews, lag, g->size, &unknown);
        if (n < 0) {
            w = snprintf(line + pos, len - pos, "; cannot tell which rank is missing (no shared-memory monitor)");
            if (w > 0) { pos += (size_t)w; }
        } else if (n > 0) {
            w = snprintf(line + pos, len - pos, "; rank(s) ");
            if (w > 0) { pos += (size_t)w; }
            for (int i = 0; i < n && pos < len; i++) {
                w = snprintf(line + pos, len - pos, "%s%d", i ? "," : "", lag[i]);
                if (w > 0) { pos += (size_t)w; }
            }
            if (pos < len) {
                w = snprintf(line + pos, len - pos, " never arrived (dead or hung): ");
                if (w > 0) { pos += (size_t)w; }
            }
            for (int i = 0; i < n && pos < len; i++) {
                if (i) {
                    w = snprintf(line + pos, len - pos, "; ");
                    if (w > 0) { pos += (size_t)w; }
                }
                comm__describe_rank(pc, lag[i], views, nviews, line, len, &pos, now_s);
            }
        }
        if (n >= 0 && unknown > 0 && pos < len) {
            // members whose node did not answer: named with their host
            w = snprintf(line + pos, len - pos, n > 0 ? "; not checked: " : "; every member whose records could be read arrived; not checked: ");
            if (w > 0) { pos += (size_t)w; }
            int first = 1;
            for (int m = 0; m < g->size && pos < len; m++) {
                if (m == g->rank || comm__rank_state(pc, g->world_ranks[m], views, nviews, now_s).s) { continue; }
                if (!first) {
                    w = snprintf(line + pos, len - pos, "; ");
                    if (w > 0) { pos += (size_t)w; }
                }
                first = 0;
                comm__describe_rank(pc, g->world_ranks[m], views, nviews, line, len, &pos, now_s);
            }
        } else if (n == 0) {
            w = snprintf(line + pos, len - pos, "; every rank arrived, yet the operation is stuck (a rank that "
                         "started it stopped calling into MPI, or MPI itself hangs): ");
            if (w > 0) { pos += (size_t)w; }
            int first = 1;
            for (int m = 0; m < g->size && pos < len; m++) {
                if (m == g->rank) { continue; }
                if (!first) {
                    w = snprintf(line + pos, len - pos, "; ");
                    if (w > 0) { pos += (size_t)w; }
                }
                first = 0;
                comm__describe_rank(pc, g->world_ranks[m], views, nviews, line, len, &pos, now_s);
            }
        }
        free(lag);
    }
    for (int v = 0; v < nviews; v++) { comm__remote_free(&views[v]); }
    free(views);
    if (pos >= len) { pos = len - 1; }
    line[pos] = '\0';
    comm__die(pc, "%s", line);
}

#endif // COMM_TIMEOUT_H
