/*
comm.h: process groups and collectives for the trainer (MPI between processes; NCCL between GPUs is comm_nccl.h,
bootstrapped by MPI). Only static functions, so any translation unit may include it. It compiles three ways:
  cc  -DUSE_MPI $(mpicc --showme:compile) ... $(mpicc --showme:link)   the multi-process build
  cc  ...                                                               no MPI: world = 1 rank, collectives are
                                                                        local copies or no-ops
  nvcc -x cu (or g++ -x c++)                                            same code as CUDA C++ host code
A USE_MPI binary started without mpirun (plain ./train_gpt) runs as a one-rank MPI singleton.
Tested by tests/test_comm.c (see its header for the commands); measured by bench_comm.c.

Layout (DESIGN.md): world_size = dp * tp * pp. Tensor-parallel ranks are adjacent, then pipeline, then data
parallel:
    tp_rank = world_rank % tp,  pp_rank = (world_rank / tp) % pp,  dp_rank = world_rank / (tp * pp)
Each rank holds four groups: world, dp_group (same tp_rank and pp_rank), tp_group (same dp_rank and pp_rank),
pp_group (same dp_rank and tp_rank). Group ranks equal the coordinates.

API (counts are elements unless the name says bytes; every collective must be called by every member of the
group, in the same order):
  parallel_init(pc, &argc, &argv)          MPI_Init (or one process), world group, monitor
  parallel_set_layout(pc, tp, pp, timeout) coordinates and the dp/tp/pp groups; timeout of every wait
  parallel_finalize(pc), parallel_abort(pc, code), parallel_layout_valid(world, tp, pp, err, len)
  comm_allreduce_sum_f32 / _sum_f64 / _max_f64 (in place)      comm_iallreduce_* (non-blocking)
  comm_reduce_scatter_sum_f32 (equal) / comm_reduce_scatterv_sum_f32 / comm_ireduce_scatterv_sum_f32
  comm_allgather_f32 (equal) / comm_allgatherv_f32 / comm_iallgatherv_f32
  comm_iallreduce_sum_bf16 / comm_ireduce_scatterv_sum_bf16 (bf16 sums, in place: compressed gradients)
  comm_reduce_sum_f32 / comm_gather_f32 / comm_scatter_f32 (to / from a root), comm_alltoall_f32 (equal parts),
  each with its non-blocking comm_i... form
  comm_broadcast / comm_ibroadcast (bytes), comm_send / comm_recv / comm_isend / comm_irecv (bytes; tags below
  COMM_TAG_COLLECTIVE),
  comm_barrier / comm_ibarrier, comm_wait, comm_test, comm_lagging_ranks (the monitor, for tests)

Collectives work on CPU buffers: float32 sums (gradients, activations), float64 sums and maxima (loss sums,
norms), bytes (broadcast, send, recv). Every collective is started non-blocking and finished by comm_wait, which
polls MPI_Testall; the blocking calls are "start + comm_wait". MPI only makes progress inside MPI calls, so a
started request should be tested (comm_test) or waited on; it may sit while the caller computes.

Large counts: MPI takes int counts. A call with more than ParallelContext.max_count elements (default INT_MAX;
a test lowers it) is CHUNKED into several MPI calls of at most max_count elements, all started at once and
finished together. The v-collectives (reduce-scatterv, allgatherv) also need int displacements: when the total
exceeds max_count they fall back to one MPI_Ireduce (reduce-scatterv) or MPI_Ibcast (allgatherv) per rank's
slice, each chunked likewise. No derived datatypes are used (MPI_SUM is only defined on predefined types).

Failure handling: every wait has a timeout (ParallelContext.timeout_s, default 300 s, the trainer's
--comm-timeout). On timeout the waiting rank prints ONE line to stderr and aborts the whole job, e.g.
  error: rank 0: allreduce on group 'world' (4096 floats, collective #3 on this group) did not complete within
  10 s; rank(s) 1 never arrived (dead or hung): rank 1 (pid 4242) is alive, outside communication for 10.0 s
To name the missing ranks, each rank publishes a small record in an MPI shared-memory window
(MPI_Win_allocate_shared over the ranks of its node; no progress is needed from the target to read it): its
pid, per group the number of collectives it has started and finished, what it is waiting on, and when it last
called into comm.h. The timed-out rank reads the records of its group's members: a member that has started
fewer collectives than the one that timed out "never arrived"; the pid tells dead from alive (kill(pid, 0) and
/proc). Members on other nodes are read through their node's monitor server (comm_remote.h: every rank answers
TCP requests for its node's records from a thread), so a rank that hangs or is stopped on another host is named
with its host too; a node where no rank answers is reported as such (best effort: the job still aborts).
A rank process that dies (kill -9, segfault, exit without MPI_Finalize) is noticed by mpirun itself, which
kills the job and exits non-zero naming the rank; the timeout covers the ranks that hang. The diagnosis, from the
records to the line, is comm_timeout.h (included below).
MPI errors are returned (MPI_ERRORS_RETURN on every communicator) and turned into one line naming the rank, the
call and MPI's error string by mpiCheck, followed by MPI_Abort.

Performance settings applied by parallel_init before MPI_Init (measured by bench_comm; each is skipped when the
user already set it, and COMM_MPI_TUNING=0 in the environment skips them all):
  - Open MPI's non-blocking allreduce (coll/libnbc) picks a binomial tree (reduce to one rank, then broadcast) for
    in-place calls on fewer than 4 ranks, about half the bandwidth of a ring; OMPI_MCA_coll_libnbc_iallreduce_
    algorithm=1 selects the ring.
  - A process started without mpirun (a one-rank singleton) does not start Open MPI's daemon, orted
    (OMPI_MCA_ess_singleton_isolated=1): 0.43 s to 0.27 s from start to a flag error here; nothing the trainer
    does needs it (it spawns no processes). Nor does it need a PML other than ob1 (OMPI_MCA_pml=ob1), which it
    reaches at once instead of after the default selection probes the cm PML's transports: 0.33 s to 0.09 s from
    start to the end of a 4-step run of the reference model on the CI machine.
  - Open MPI mallocs a temporary buffer as large as the message in every reduction and frees it afterwards;
    glibc serves big ones with fresh mmap'd pages, so every call page-faults the whole buffer in again (20x slower
    at 256 MB on a VM). mallopt(M_MMAP_MAX, 0) and a large M_TRIM_THRESHOLD keep freed memory in the heap for
    reuse. This is process-wide: big buffers freed by the trainer are kept by the process too.

Threads: MPI is initialized with MPI_THREAD_FUNNELED; call comm.h from the main thread only (OpenMP regions
must not call it).
*/
#ifndef COMM_H
#define COMM_H

#include <errno.h>
#include <limits.h>
#include "precision.h"    // defines: bf16_bits (the bf16 sums of compressed gradients)
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "utils.h" // fatal, mallocCheck, callocCheck

#ifdef __GLIBC__
#include <malloc.h> // mallopt
#endif

#ifdef USE_MPI
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1 // C API only, also when compiled as C++ (no libmpi_cxx needed)
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <pthread.h>
#endif

#define COMM_DEFAULT_TIMEOUT_S 300.0
#define COMM_MAX_GROUPS 4      // world, dp, tp, pp: one counter slot each in the monitor record
#define COMM_INLINE_REQS 4     // MPI requests held inside a CommRequest before it allocates
#define COMM_MAX_TAG 32767     // the smallest MPI_TAG_UB the standard allows
#define COMM_TAG_COLLECTIVE COMM_MAX_TAG // the large gather, scatter and all-to-all's own messages (not for callers)

// ----------------------------------------------------------------------------
// MPI error checking

// Coverage builds (scripts/coverage.sh compiles with -DCOVERAGE_BUILD): MPI_Abort ends the process without the exit
// handlers that write its line counts, so they are written first; otherwise every path that ends a job would show as
// never run.
#ifdef COVERAGE_BUILD
void __gcov_dump(void);
#define COMM_COVERAGE_DUMP() __gcov_dump()
#else
#define COMM_COVERAGE_DUMP() ((void)0)
#endif

#ifdef USE_MPI
// Prints "error: rank R: MPI call failed: <call>: <MPI's message> [at file:line]" and aborts the whole job.
static void __attribute__((noreturn)) mpi_check_fail(int err, const char* stmt, const char* file, int line) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) { snprintf(msg, sizeof(msg), "MPI error code %d", err); }
    int init = 0, fin = 0, rank = -1;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) { MPI_Comm_rank(MPI_COMM_WORLD, &rank); }
    fflush(stdout);
    fprintf(stderr, "error: rank %d: MPI call failed: %s: %s [at %s:%d]\n", rank, stmt, msg, file, line);
    fflush(stderr);
    if (init && !fin) { COMM_COVERAGE_DUMP(); MPI_Abort(MPI_COMM_WORLD, 1); }
    exit(1);
}
#ifndef mpiCheck
#define mpiCheck(call) do { \
    int mpi_check_err_ = (call); \
    if (mpi_check_err_ != MPI_SUCCESS) { mpi_check_fail(mpi_check_err_, #call, __FILE__, __LINE__); } \
} while (0)
#endif
#endif // USE_MPI

// ----------------------------------------------------------------------------
// types

struct ParallelContext;

// The operations, for the monitor's records, the error messages and the byte counts.
enum CommOp {
    COMM_OP_ALLREDUCE, COMM_OP_REDUCE_SCATTER, COMM_OP_ALLGATHER, COMM_OP_BROADCAST,
    COMM_OP_SEND, COMM_OP_RECV, COMM_OP_BARRIER, COMM_OP_REDUCE, COMM_OP_GATHER, COMM_OP_SCATTER, COMM_OP_ALLTOALL,
    COMM_OP_COUNT_
};

// One communicator: a set of ranks that run the same collectives in the same order.
typedef struct CommGroup {
    int rank, size;               // this process's rank in the group; number of members (0: not set up)
    const char* name;             // "world", "dp", "tp", "pp"
    int slot;                     // index of this group's counters in the monitor record
    int* world_ranks;             // (size,) world rank of each member, by group rank
    int64_t seq;                  // collectives this rank has started on the group (numbered from 1)
    int64_t op_calls[COMM_OP_COUNT_]; // per CommOp: operations this rank started on the group (for benchmarks)
    double op_bytes[COMM_OP_COUNT_];  // per CommOp: their payload in bytes (see comm_sent_bytes)
    struct ParallelContext* pc;   // owner (timeout, chunk limit, monitor)
    struct CommNccl* nccl;        // --comm nccl (GPU builds): the group's NCCL communicator, used by tp.h; NULL otherwise
#ifdef USE_MPI
    MPI_Comm comm;
#endif
} CommGroup;

// What a rank publishes about itself in the shared-memory monitor (one record per rank of the node).
typedef struct {
    int64_t pid;
    int64_t entered[COMM_MAX_GROUPS];    // collectives started on each group (== CommGroup.seq)
    int64_t completed[COMM_MAX_GROUPS];  // collectives finished on each group
    int64_t wait_op;                     // CommOp being waited on in comm_wait, -1 when not waiting
    int64_t wait_slot, wait_seq;         // ... on which group slot, which collective number (0 for send/recv)
    int64_t last_seen_ns;                // CLOCK_MONOTONIC time of the last call into comm.h (node-wide clock)
} CommSlot;

// Where a rank's monitor server listens (comm_remote.h) and what its host is called, as it published them.
#define COMM_PEER_ADDRS 4
typedef struct {
    int node;                             // its node: the world rank of the node's first rank
    int port, naddr;                      // TCP port (0: no server) and how many of addr are set
    uint32_t addr[COMM_PEER_ADDRS];       // its host's IPv4 addresses (network byte order), loopback last
    char host[64];                        // gethostname()
} CommPeer;

typedef struct ParallelContext {
    int world_rank, world_size;
    int dp, tp, pp;                  // world_size == dp * tp * pp (0 until parallel_set_layout)
    int dp_rank, tp_rank, pp_rank;   // coordinates, see the header
    CommGroup world, dp_group, tp_group, pp_group;
    double timeout_s;                // collective timeout (default COMM_DEFAULT_TIMEOUT_S)
    size_t max_count;                // most elements (or bytes) in one MPI call; larger calls are chunked
    int nodes;                       // number of nodes (shared-memory domains) the job spans
    int node_size;                   // ranks on this node
    int owns_mpi;                    // 1 if parallel_init called MPI_Init (so parallel_finalize finalizes)
    // monitor: records of the ranks on this node, in a shared-memory window
    int monitor_ok;                  // 0: no window (no MPI, or its creation failed)
    char* monitor_base;              // node_size records, monitor_stride bytes apart
    size_t monitor_stride;
    int* world_to_node;              // (world_size,) node-local index of each world rank, -1 if on another node
    int* node_world;                 // (node_size,) the world rank of each record of this node
    CommPeer* peers;                 // (world_size,) every rank's monitor server and host (comm_remote.h)
#ifdef USE_MPI
    MPI_Comm node_comm;
    MPI_Win monitor_win;
    int remote_fd, remote_on;        // this rank's monitor server: listening socket, thread running
    pthread_t remote_thread;
#endif
} ParallelContext;
// A ParallelContext must not be copied or moved after parallel_init: its groups point back at it.

static const char* const comm_op_names[COMM_OP_COUNT_] = {
    "allreduce", "reduce-scatter", "allgather", "broadcast", "send", "recv", "barrier", "reduce", "gather", "scatter",
    "alltoall"
};
static const char* const comm_slot_names[COMM_MAX_GROUPS] = { "world", "dp", "tp", "pp" };

// The bytes this rank sends for `payload` bytes of an operation on a group of p ranks, as a ring does it (what NCCL
// calls bus bytes): an all-reduce sends 2 (p-1)/p of the buffer, a reduce-scatter (of the whole input) and an
// all-gather (of the whole output) (p-1)/p, a reduce (p-1)/p of the buffer, a broadcast and a send the buffer, a
// receive nothing; a gather and a scatter move (p-1)/p of the root's buffer, 1/p of it per rank on average; an
// all-to-all sends (p-1)/p of each rank's buffer. The payload of an all-reduce, reduce or broadcast is its buffer, of
// a reduce-scatter its input, of an all-gather its output, of a gather the root's output, of a scatter the root's
// input, of an all-to-all each rank's send buffer.
static double comm_sent_bytes(int op, double payload, int p) {
    if (p <= 1) { return 0.0; }
    double f = (double)(p - 1) / p;
    switch (op) {
    case COMM_OP_ALLREDUCE: return 2.0 * f * payload;
    case COMM_OP_REDUCE_SCATTER: case COMM_OP_ALLGATHER: case COMM_OP_REDUCE: case COMM_OP_ALLTOALL: return f * payload;
    case COMM_OP_GATHER: case COMM_OP_SCATTER: return f * payload / p;
    case COMM_OP_BROADCAST: case COMM_OP_SEND: return payload;
    default: return 0.0;
    }
}

// A started operation. Need not be initialized before a start call; must not be reused while pending.
// comm_wait / comm_test on a finished or zeroed request return at once.
typedef struct {
    int active;                   // 1 between start and completion
    int op;                       // enum CommOp
    CommGroup* group;
    size_t count;                 // elements (or bytes) on this rank, for messages
    const char* unit;             // "floats", "doubles", "bytes", or NULL (barrier)
    int64_t seq;                  // collective number on the group (0 for send/recv)
    int peer, tag;                // send/recv (and NCCL's pair communicators): the other rank, by group rank; -1 otherwise
    double start_time;            // now_seconds() when started
    const char* via;              // NULL: MPI; "NCCL": comm_nccl.h's watchdog describing one of its operations
#ifdef USE_MPI
    int nreqs;                    // MPI requests (chunks)
    MPI_Request inline_reqs[COMM_INLINE_REQS];
    MPI_Status inline_status[COMM_INLINE_REQS];
    MPI_Request* heap_reqs;       // used instead of the inline arrays when nreqs > COMM_INLINE_REQS
    MPI_Status* heap_status;
    int* iargs;                   // counts and displacements lent to MPI's v-collectives until completion
    float* move_dst;              // in-place reduce-scatter: on completion move move_n floats from move_src
    float* move_src;
    size_t move_n;
    size_t chunk;                 // recv: chunk size used, to check the received byte counts
#endif
} CommRequest;

static void comm_barrier(CommGroup* g); // used by setup and teardown, defined with the collectives

// ----------------------------------------------------------------------------
// small helpers

static int64_t comm__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

// Prints "error: rank R: <message>" and ends the whole job (MPI_Abort; exit without MPI).
static void __attribute__((noreturn, format(printf, 2, 3))) comm__die(const ParallelContext* pc, const char* fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int rank = pc ? pc->world_rank : 0;
#ifdef USE_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (pc == NULL && init && !fin) { MPI_Comm_rank(MPI_COMM_WORLD, &rank); }
#endif
    fflush(stdout);
    fprintf(stderr, "error: rank %d: %s\n", rank, msg);
    fflush(stderr);
#ifdef USE_MPI
    if (init && !fin) { COMM_COVERAGE_DUMP(); MPI_Abort(MPI_COMM_WORLD, 1); }
#endif
    exit(1);
}

// An error every rank detects alike (bad layout, bad flag): rank 0 prints it once and aborts the job; the other
// ranks wait to be killed (and abort themselves if rank 0 is somehow stuck).
static void __attribute__((noreturn)) comm__die_all(const ParallelContext* pc, const char* msg) {
    if (pc->world_rank == 0 || pc->world_size == 1) {
        fflush(stdout);
        fprintf(stderr, "error: %s\n", msg);
        fflush(stderr);
#ifdef USE_MPI
        COMM_COVERAGE_DUMP();
        MPI_Abort(MPI_COMM_WORLD, 1);
#endif
        exit(1);
    }
    sleep(30);
    comm__die(pc, "%s", msg);
}

// The publishing record of a world rank, or NULL when it is on another node or the monitor is off.
static CommSlot* comm__slot(const ParallelContext* pc, int world_rank) {
    if (pc == NULL || !pc->monitor_ok || world_rank < 0 || world_rank >= pc->world_size) { return NULL; }
    int i = pc->world_to_node[world_rank];
    if (i < 0) { return NULL; }
    return (CommSlot*)(void*)(pc->monitor_base + (size_t)i * pc->monitor_stride);
}

static void comm__publish(int64_t* field, int64_t value) { __atomic_store_n(field, value, __ATOMIC_RELEASE); }
static int64_t comm__read(const int64_t* field) { return __atomic_load_n(field, __ATOMIC_ACQUIRE); }

// Records "this rank is alive and inside comm.h now".
static void comm__heartbeat(const ParallelContext* pc) {
    CommSlot* s = comm__slot(pc, pc->world_rank);
    if (s) { comm__publish(&s->last_seen_ns, comm__now_ns()); }
}

// 1 if the process is gone (no such pid, or a zombie waiting to be reaped), 0 if it exists. Linux: /proc.
static int comm__pid_dead(int64_t pid) {
    if (pid <= 0) { return 0; }
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) { return 1; }
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
    FILE* fp = fopen(path, "r");
    if (fp == NULL) { return 0; }
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char* close_paren = strrchr(buf, ')'); // "pid (comm) S ..."
    return close_paren != NULL && close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

// Failure tests only (test_comm --dead-test, train_gpt's TRAIN_GPT_FAULT=gone): makes this rank look gone to the
// monitor while it runs on, as under a launcher that does not end a job when one of its processes dies. Its record takes
// the pid of a child that has exited and is never reaped: a zombie, which comm__pid_dead counts as gone. Returns 0, or
// -1 without a record (no shared-memory monitor) or when fork fails.
static int comm_monitor_pretend_gone(const ParallelContext* pc) {
    CommSlot* s = comm__slot(pc, pc->world_rank);
    if (!s) { return -1; }
    pid_t child = fork();
    if (child < 0) { return -1; }
    if (child == 0) { _exit(0); }
    comm__publish(&s->pid, (int64_t)child);
    return 0;
}

// Checks the group is usable by the calling operation.
static void comm__check_group(const CommGroup* g, const char* what) {
    if (g == NULL || g->size <= 0 || g->pc == NULL) {
        comm__die(g ? g->pc : NULL, "%s on group '%s': the group is not set up (call parallel_init, and "
                  "parallel_set_layout for dp/tp/pp)", what, (g && g->name) ? g->name : "(unset)");
    }
}

static void comm__check_buf(const CommGroup* g, const void* buf, size_t n, const char* what, const char* arg) {
    if (buf == NULL && n > 0) {
        comm__die(g->pc, "%s on group '%s': %s is NULL with %zu elements", what, g->name, arg, n);
    }
}

// An operation enters the group's books, MPI's and NCCL's alike: counted with its payload (the benchmarks'
// communication table), numbered on the group when it is a collective and published as entered (the timeout's
// comparison of members); returns that number (0 for a message).
static int64_t comm__enter(CommGroup* g, int op, size_t count, const char* unit, int collective) {
    g->op_calls[op]++;
    size_t unit_bytes = unit == NULL ? 0 : strcmp(unit, "floats") == 0 ? 4 : strcmp(unit, "doubles") == 0 ? 8 : strcmp(unit, "bf16") == 0 ? 2 : 1;
    g->op_bytes[op] += (double)count * (double)unit_bytes;
    if (collective) {
        g->seq++;
        CommSlot* s = comm__slot(g->pc, g->pc->world_rank);
        if (s) { comm__publish(&s->entered[g->slot], g->seq); }
    }
    comm__heartbeat(g->pc);
    return collective ? g->seq : 0;
}

// Starts the bookkeeping of an operation: fills req, numbers it on the group, publishes "entered".
static void comm__begin(CommRequest* req, CommGroup* g, int op, size_t count, const char* unit, int collective) {
    memset(req, 0, sizeof(*req));
    req->active = 1;
    req->op = op;
    req->group = g;
    req->count = count;
    req->unit = unit;
    req->start_time = now_seconds();
    req->peer = -1;
    req->seq = comm__enter(g, op, count, unit, collective);
}

// One phrase naming the operation: "allreduce on group 'dp' (4096 floats, collective #3 on this group)".
static void comm__describe(const CommRequest* req, char* buf, size_t len) {
    const CommGroup* g = req->group;
    if (req->via) { // "NCCL send to rank 1 on group 'pp' (4096 bytes)", "NCCL allreduce on group 'dp' (...)"
        const char* rel = req->op == COMM_OP_SEND ? "to" : req->op == COMM_OP_RECV ? "from" : "with";
        if (req->peer >= 0) {
            snprintf(buf, len, "%s %s %s rank %d on group '%s' (%zu %s)", req->via, comm_op_names[req->op], rel,
                     g->world_ranks[req->peer], g->name, req->count, req->unit);
        } else {
            snprintf(buf, len, "%s %s on group '%s' (%zu %s, collective #%lld on this group)", req->via,
                     comm_op_names[req->op], g->name, req->count, req->unit, (long long)req->seq);
        }
    } else if (req->op == COMM_OP_SEND || req->op == COMM_OP_RECV) {
        snprintf(buf, len, "%s %s rank %d on group '%s' (%zu bytes, tag %d)", comm_op_names[req->op],
                 req->op == COMM_OP_SEND ? "to" : "from", g->world_ranks[req->peer], g->name, req->count, req->tag);
    } else if (req->unit) {
        snprintf(buf, len, "%s on group '%s' (%zu %s, collective #%lld on this group)", comm_op_names[req->op],
                 g->name, req->count, req->unit, (long long)req->seq);
    } else {
        snprintf(buf, len, "%s on group '%s' (collective #%lld on this group)", comm_op_names[req->op],
                 g->name, (long long)req->seq);
    }
}

// Ends the bookkeeping: publishes "completed" and marks the request done.
static void comm__end(CommRequest* req) {
    CommGroup* g = req->group;
    if (req->seq > 0) {
        CommSlot* s = comm__slot(g->pc, g->pc->world_rank);
        if (s) { comm__publish(&s->completed[g->slot], comm__read(&s->completed[g->slot]) + 1); }
    }
    req->active = 0;
}

// ----------------------------------------------------------------------------
// request internals (MPI)

#ifdef USE_MPI
static MPI_Request* comm__reqs(CommRequest* req) { return req->heap_reqs ? req->heap_reqs : req->inline_reqs; }
static MPI_Status* comm__status(CommRequest* req) { return req->heap_status ? req->heap_status : req->inline_status; }

// Reserves n MPI requests in req (all MPI_REQUEST_NULL) and returns them.
static MPI_Request* comm__alloc_reqs(CommRequest* req, size_t n) {
    if (n > (size_t)INT_MAX) { comm__die(req->group->pc, "%s: too many chunks (%zu)", comm_op_names[req->op], n); }
    req->nreqs = (int)n;
    if (n > COMM_INLINE_REQS) {
        req->heap_reqs = (MPI_Request*)mallocCheck(n * sizeof(MPI_Request));
        req->heap_status = (MPI_Status*)mallocCheck(n * sizeof(MPI_Status));
    }
    MPI_Request* r = comm__reqs(req);
    for (size_t i = 0; i < n; i++) { r[i] = MPI_REQUEST_NULL; }
    return r;
}

static size_t comm__chunks(size_t n, size_t max_count) { return n == 0 ? 0 : (n - 1) / max_count + 1; }

static size_t comm__max_count(const CommGroup* g) {
    size_t m = g->pc->max_count;
    if (m == 0 || m > (size_t)INT_MAX) { m = (size_t)INT_MAX; }
    return m;
}

// An MPI error surfaced by MPI_Testall: one line naming the operation and MPI's message, then abort.
static void __attribute__((noreturn)) comm__request_error(CommRequest* req, int rc) {
    int err = rc;
    if (rc == MPI_ERR_IN_STATUS) {
        MPI_Status* st = comm__status(req);
        for (int i = 0; i < req->nreqs; i++) {
            if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) { err = st[i].MPI_ERROR; break; }
        }
    }
    char msg[MPI_MAX_ERROR_STRING], what[512];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) { snprintf(msg, sizeof(msg), "MPI error code %d", err); }
    comm__describe(req, what, sizeof(what));
    comm__die(req->group->pc, "%s failed: %s", what, msg);
}

// Completion work: received sizes, in-place moves, freeing, "completed" counter.
static void comm__finish(CommRequest* req) {
    if (req->op == COMM_OP_RECV) {
        MPI_Status* st = comm__status(req);
        size_t got = 0;
        for (int i = 0; i < req->nreqs; i++) {
            int c = 0;
            mpiCheck(MPI_Get_count(&st[i], MPI_BYTE, &c));
            got += (size_t)c;
            size_t want = (size_t)i + 1 < (size_t)req->nreqs ? req->chunk : req->count - (size_t)i * req->chunk;
            if ((size_t)c != want) {
                comm__die(req->group->pc, "recv from rank %d on group '%s' (tag %d): expected %zu bytes, the "
                          "sender sent a different size (chunk %d holds %d bytes, %zu received so far)",
                          req->group->world_ranks[req->peer], req->group->name, req->tag, req->count, i, c, got);
            }
        }
    }
    if (req->move_n > 0 && req->move_dst != req->move_src) {
        memmove(req->move_dst, req->move_src, req->move_n * sizeof(float));
    }
    free(req->heap_reqs);
    free(req->heap_status);
    free(req->iargs);
    req->heap_reqs = NULL;
    req->heap_status = NULL;
    req->iargs = NULL;
    req->nreqs = 0;
    comm__end(req);
}
#endif // USE_MPI

// ----------------------------------------------------------------------------
// who is missing: read the monitor records of a group's members
#include "comm_timeout.h" // defines: comm_lagging_ranks, comm__timeout (and CommRemoteView, comm_remote.h's client)

// ----------------------------------------------------------------------------
// waiting

// Non-blocking progress check: 1 if the operation is done (or there was none), 0 if still pending.
static int comm_test(CommRequest* req) {
    if (req == NULL || !req->active) { return 1; }
#ifdef USE_MPI
    comm__heartbeat(req->group->pc);
    int flag = 0;
    int rc = MPI_Testall(req->nreqs, comm__reqs(req), &flag, comm__status(req));
    if (rc != MPI_SUCCESS) { comm__request_error(req, rc); }
    if (!flag) { return 0; }
    comm__finish(req);
#else
    comm__end(req);
#endif
    return 1;
}

// Waits for the operation by polling MPI_Testall: spins briefly, then yields the CPU between polls. It never
// sleeps: MPI moves data only inside MPI calls (TCP fragments, libnbc rounds), so a sleeping poller would throttle
// long transfers. Past ParallelContext.timeout_s (counted from this call) it reports the missing ranks and aborts.
static void comm_wait(CommRequest* req) {
    if (req == NULL || !req->active) { return; }
    CommGroup* g = req->group;
    ParallelContext* pc = g->pc;
    CommSlot* me = comm__slot(pc, pc->world_rank);
    if (me) {
        comm__publish(&me->wait_slot, g->slot);
        comm__publish(&me->wait_seq, req->seq);
        comm__publish(&me->wait_op, req->op);
    }
    double t0 = now_seconds();
    for (long iter = 0;; iter++) {
        if (comm_test(req)) { break; }
        double waited = now_seconds() - t0;
        if (waited > pc->timeout_s) { comm__timeout(req, waited); }
        if (iter >= 2000) { sched_yield(); } // let other ranks sharing the core run (oversubscribed nodes)
    }
    if (me) { comm__publish(&me->wait_op, -1); }
}

// ----------------------------------------------------------------------------
// group setup

#ifdef USE_MPI
// Fills g from an MPI communicator (taking ownership of it).
static void comm__group_init(ParallelContext* pc, CommGroup* g, MPI_Comm comm, const char* name, int slot) {
    memset(g, 0, sizeof(*g));
    g->pc = pc;
    g->name = name;
    g->slot = slot;
    g->comm = comm;
    mpiCheck(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    mpiCheck(MPI_Comm_rank(comm, &g->rank));
    mpiCheck(MPI_Comm_size(comm, &g->size));
    g->world_ranks = (int*)mallocCheck((size_t)g->size * sizeof(int));
    mpiCheck(MPI_Allgather(&pc->world_rank, 1, MPI_INT, g->world_ranks, 1, MPI_INT, comm));
}

static void comm__group_free(CommGroup* g) {
    if (g->size > 0 && g->comm != MPI_COMM_NULL) { mpiCheck(MPI_Comm_free(&g->comm)); }
    free(g->world_ranks);
    memset(g, 0, sizeof(*g));
    g->comm = MPI_COMM_NULL;
}

// Creates the shared-memory monitor over the ranks of this node. Leaves monitor_ok = 0 if the window cannot be
// made (the job still runs; timeouts then cannot name the missing rank).
static void comm__monitor_init(ParallelContext* pc) {
    mpiCheck(MPI_Comm_split_type(pc->world.comm, MPI_COMM_TYPE_SHARED, pc->world_rank, MPI_INFO_NULL, &pc->node_comm));
    mpiCheck(MPI_Comm_set_errhandler(pc->node_comm, MPI_ERRORS_RETURN));
    int node_rank = 0;
    mpiCheck(MPI_Comm_rank(pc->node_comm, &node_rank));
    mpiCheck(MPI_Comm_size(pc->node_comm, &pc->node_size));
    int leader = node_rank == 0 ? 1 : 0;
    mpiCheck(MPI_Allreduce(&leader, &pc->nodes, 1, MPI_INT, MPI_SUM, pc->world.comm));
    int* node_world = (int*)mallocCheck((size_t)pc->node_size * sizeof(int));
    mpiCheck(MPI_Allgather(&pc->world_rank, 1, MPI_INT, node_world, 1, MPI_INT, pc->node_comm));
    pc->world_to_node = (int*)mallocCheck((size_t)pc->world_size * sizeof(int));
    for (int r = 0; r < pc->world_size; r++) { pc->world_to_node[r] = -1; }
    for (int i = 0; i < pc->node_size; i++) { pc->world_to_node[node_world[i]] = i; }
    pc->node_world = node_world;

    pc->monitor_stride = (sizeof(CommSlot) + 127) / 128 * 128;
    void* base = NULL;
    MPI_Aint bytes = node_rank == 0 ? (MPI_Aint)(pc->monitor_stride * (size_t)pc->node_size) : 0;
    int rc = MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, pc->node_comm, &base, &pc->monitor_win);
    int ok = rc == MPI_SUCCESS ? 1 : 0, all_ok = 0;
    mpiCheck(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, pc->node_comm));
    if (!all_ok) {
        if (ok) { MPI_Win_free(&pc->monitor_win); }
        pc->monitor_win = MPI_WIN_NULL;
        return;
    }
    MPI_Aint qsize = 0;
    int disp = 0;
    void* base0 = NULL;
    mpiCheck(MPI_Win_shared_query(pc->monitor_win, 0, &qsize, &disp, &base0));
    pc->monitor_base = (char*)base0;
    CommSlot* me = (CommSlot*)(void*)(pc->monitor_base + (size_t)node_rank * pc->monitor_stride);
    memset(me, 0, sizeof(*me));
    me->pid = (int64_t)getpid();
    me->wait_op = -1;
    me->last_seen_ns = comm__now_ns();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    mpiCheck(MPI_Barrier(pc->node_comm)); // every record is initialized before anyone reads one
    pc->monitor_ok = 1;
}

// The monitor across nodes: every rank's snapshot server and everyone's address (collective over the world).
static void comm__monitor_init_all(ParallelContext* pc) {
    comm__monitor_init(pc);
    comm__remote_init(pc);
}
#endif // USE_MPI

#ifdef USE_MPI
// The settings described in the header ("Performance settings"); call before MPI_Init.
static void comm__tune_for_mpi(void) {
    const char* off = getenv("COMM_MPI_TUNING");
    if (off != NULL && strcmp(off, "0") == 0) { return; }
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0); // 0: a value the user set wins
    // a process started without a launcher is a singleton: no daemon, and the PML it reaches at once (see above)
    if (getenv("OMPI_COMM_WORLD_SIZE") == NULL && getenv("PMIX_RANK") == NULL && getenv("PMI_RANK") == NULL) {
        setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
        setenv("OMPI_MCA_pml", "ob1", 0);
    }
#ifdef __GLIBC__
    if (getenv("MALLOC_MMAP_MAX_") == NULL && getenv("MALLOC_TRIM_THRESHOLD_") == NULL &&
        getenv("GLIBC_TUNABLES") == NULL) {
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, INT_MAX);
    }
#endif
}
#endif

// Starts the process: MPI_Init (or a single process without MPI) and the world group. Works without mpirun as a
// one-rank singleton. Sets timeout_s to COMM_DEFAULT_TIMEOUT_S and max_count to INT_MAX.
static void parallel_init(ParallelContext* pc, int* argc, char*** argv) {
    memset(pc, 0, sizeof(*pc));
    pc->dp_group.name = "dp"; // named but empty (size 0) until parallel_set_layout
    pc->tp_group.name = "tp";
    pc->pp_group.name = "pp";
    pc->timeout_s = COMM_DEFAULT_TIMEOUT_S;
    pc->max_count = (size_t)INT_MAX;
    pc->nodes = 1;
    pc->node_size = 1;
#ifdef USE_MPI
    int initialized = 0;
    mpiCheck(MPI_Initialized(&initialized));
    if (!initialized) {
        comm__tune_for_mpi();
        int provided = 0;
        mpiCheck(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
        pc->owns_mpi = 1;
    }
    mpiCheck(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &pc->world_rank));
    mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &pc->world_size));
    MPI_Comm world;
    mpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &world)); // our traffic never mixes with the caller's
    comm__group_init(pc, &pc->world, world, "world", 0);
    pc->dp_group.comm = pc->tp_group.comm = pc->pp_group.comm = MPI_COMM_NULL;
    pc->node_comm = MPI_COMM_NULL;
    pc->monitor_win = MPI_WIN_NULL;
    comm__monitor_init_all(pc);
#else
    (void)argc;
    (void)argv;
    pc->world_rank = 0;
    pc->world_size = 1;
    pc->world.rank = 0;
    pc->world.size = 1;
    pc->world.name = "world";
    pc->world.slot = 0;
    pc->world.pc = pc;
    pc->world.world_ranks = (int*)mallocCheck(sizeof(int));
    pc->world.world_ranks[0] = 0;
#endif
}

// 1 if world_size ranks can be laid out as dp x tp x pp with these tp and pp; else 0 with the reason in err.
static int parallel_layout_valid(int world_size, int tp, int pp, char* err, size_t errlen) {
    if (tp < 1) { snprintf(err, errlen, "tensor-parallel size tp = %d must be >= 1", tp); return 0; }
    if (pp < 1) { snprintf(err, errlen, "pipeline-parallel size pp = %d must be >= 1", pp); return 0; }
    if ((long long)tp * (long long)pp > (long long)world_size || world_size % (tp * pp) != 0) {
        long long tpp = (long long)tp * (long long)pp;
        snprintf(err, errlen, "world size %d is not divisible by tp*pp = %lld (tp %d, pp %d): start a multiple of "
                 "%lld ranks (mpirun -np N), or change tp/pp", world_size, tpp, tp, pp, tpp);
        return 0;
    }
    if (err && errlen) { err[0] = '\0'; }
    return 1;
}

// Splits the world into dp x tp x pp (tensor-parallel ranks adjacent, then pipeline, then data parallel) and sets
// the collective timeout. Every rank must call it with the same arguments. A layout that does not divide the
// world size, or a timeout that is not > 0, ends the job with one message from rank 0. May be called again.
static void parallel_set_layout(ParallelContext* pc, int tp, int pp, double timeout_s) {
    char err[512];
    if (!parallel_layout_valid(pc->world_size, tp, pp, err, sizeof(err))) { comm__die_all(pc, err); }
    if (!(timeout_s > 0.0) || isinf(timeout_s)) {
        snprintf(err, sizeof(err), "collective timeout %g s must be a finite number > 0", timeout_s);
        comm__die_all(pc, err);
    }
    pc->timeout_s = timeout_s;
    pc->tp = tp;
    pc->pp = pp;
    pc->dp = pc->world_size / (tp * pp);
    pc->tp_rank = pc->world_rank % tp;
    pc->pp_rank = (pc->world_rank / tp) % pp;
    pc->dp_rank = pc->world_rank / (tp * pp);
#ifdef USE_MPI
    comm_barrier(&pc->world); // a rank that never gets here is named by the timeout, not waited on forever
    comm__group_free(&pc->dp_group);
    comm__group_free(&pc->tp_group);
    comm__group_free(&pc->pp_group);
    MPI_Comm c;
    mpiCheck(MPI_Comm_split(pc->world.comm, pc->dp_rank * pp + pc->pp_rank, pc->tp_rank, &c));
    comm__group_init(pc, &pc->tp_group, c, "tp", 2);
    mpiCheck(MPI_Comm_split(pc->world.comm, pc->dp_rank * tp + pc->tp_rank, pc->pp_rank, &c));
    comm__group_init(pc, &pc->pp_group, c, "pp", 3);
    mpiCheck(MPI_Comm_split(pc->world.comm, pc->pp_rank * tp + pc->tp_rank, pc->dp_rank, &c));
    comm__group_init(pc, &pc->dp_group, c, "dp", 1);
    if (pc->tp_group.size != tp || pc->tp_group.rank != pc->tp_rank || pc->pp_group.size != pp ||
        pc->pp_group.rank != pc->pp_rank || pc->dp_group.size != pc->dp || pc->dp_group.rank != pc->dp_rank) {
        comm__die(pc, "internal error: MPI_Comm_split gave groups that do not match the layout dp %d x tp %d x pp %d",
                  pc->dp, tp, pp);
    }
#else
    CommGroup* gs[3] = { &pc->dp_group, &pc->tp_group, &pc->pp_group };
    const char* names[3] = { "dp", "tp", "pp" };
    for (int i = 0; i < 3; i++) {
        free(gs[i]->world_ranks);
        memset(gs[i], 0, sizeof(CommGroup));
        gs[i]->size = 1;
        gs[i]->name = names[i];
        gs[i]->slot = i + 1;
        gs[i]->pc = pc;
        gs[i]->world_ranks = (int*)mallocCheck(sizeof(int));
        gs[i]->world_ranks[0] = 0;
    }
#endif
}

// Ends the process's part in the job: frees groups and the monitor, MPI_Finalize (if parallel_init started MPI).
// Collective: every rank calls it.
static void parallel_finalize(ParallelContext* pc) {
#ifdef USE_MPI
    comm_barrier(&pc->world); // timed: a missing rank is named instead of hanging in MPI_Finalize
    comm__remote_stop(pc);
    if (pc->monitor_win != MPI_WIN_NULL) { mpiCheck(MPI_Win_free(&pc->monitor_win)); }
    pc->monitor_ok = 0;
    if (pc->node_comm != MPI_COMM_NULL) { mpiCheck(MPI_Comm_free(&pc->node_comm)); }
    comm__group_free(&pc->dp_group);
    comm__group_free(&pc->tp_group);
    comm__group_free(&pc->pp_group);
    comm__group_free(&pc->world);
    free(pc->world_to_node);
    pc->world_to_node = NULL;
    free(pc->node_world);
    pc->node_world = NULL;
    if (pc->owns_mpi) { mpiCheck(MPI_Finalize()); }
#else
    free(pc->world.world_ranks);
    free(pc->dp_group.world_ranks);
    free(pc->tp_group.world_ranks);
    free(pc->pp_group.world_ranks);
    memset(&pc->world, 0, sizeof(CommGroup));
#endif
}

// Ends the whole job with exit status code (MPI_Abort on every rank; exit(code) without MPI). Flushes first.
static void __attribute__((noreturn)) parallel_abort(ParallelContext* pc, int code) {
    (void)pc;
    fflush(stdout);
    fflush(stderr);
#ifdef USE_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) { COMM_COVERAGE_DUMP(); MPI_Abort(MPI_COMM_WORLD, code); }
#endif
    exit(code);
}

// ----------------------------------------------------------------------------
// collectives: non-blocking starts

// The in-place allreduces: their element type and operation.
typedef enum { COMM_SUM_F32, COMM_SUM_F64, COMM_MAX_F64, COMM_SUM_BF16 } CommReduce;
static const char* const comm__reduce_units[] = {"floats", "doubles", "doubles", "bf16"};
#ifdef USE_MPI
static MPI_Op comm__bf16_op(void);
#endif

// Starts an in-place allreduce of n elements (the kind's type and operation), chunked at max_count.
static void comm__iallreduce(CommGroup* g, void* buf, size_t n, CommReduce kind, CommRequest* req) {
    comm__check_group(g, "allreduce");
#ifdef USE_MPI
    comm__check_buf(g, buf, n, "allreduce", "buf");
    comm__begin(req, g, COMM_OP_ALLREDUCE, n, comm__reduce_units[kind], 1);
    MPI_Datatype type = kind == COMM_SUM_F32 ? MPI_FLOAT : kind == COMM_SUM_BF16 ? MPI_UINT16_T : MPI_DOUBLE;
    size_t elem = kind == COMM_SUM_F32 ? sizeof(float) : kind == COMM_SUM_BF16 ? sizeof(uint16_t) : sizeof(double);
    MPI_Op mop = kind == COMM_MAX_F64 ? MPI_MAX : kind == COMM_SUM_BF16 ? comm__bf16_op() : MPI_SUM;
    size_t mc = comm__max_count(g);
    size_t nch = comm__chunks(n, mc);
    MPI_Request* r = comm__alloc_reqs(req, nch);
    for (size_t c = 0; c < nch; c++) {
        size_t off = c * mc, len = n - off < mc ? n - off : mc;
        mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, (char*)buf + off * elem, (int)len, type, mop, g->comm, &r[c]));
    }
#else
    (void)buf;
    comm__begin(req, g, COMM_OP_ALLREDUCE, n, comm__reduce_units[kind], 1);
#endif
}

// Starts an in-place float32 sum over the group's ranks (and float64 sums and maxima).
static void comm_iallreduce_sum_f32(CommGroup* g, float* buf, size_t n, CommRequest* req) { comm__iallreduce(g, buf, n, COMM_SUM_F32, req); }
static void comm_iallreduce_sum_f64(CommGroup* g, double* buf, size_t n, CommRequest* req) { comm__iallreduce(g, buf, n, COMM_SUM_F64, req); }
static void comm_iallreduce_max_f64(CommGroup* g, double* buf, size_t n, CommRequest* req) { comm__iallreduce(g, buf, n, COMM_MAX_F64, req); }

// Sum of recvcounts[0..size) with overflow check.
static size_t comm__total(const CommGroup* g, const size_t* counts, const char* what) {
    size_t total = 0;
    for (int r = 0; r < g->size; r++) {
        if (counts[r] > SIZE_MAX / sizeof(float) - total) {
            comm__die(g->pc, "%s on group '%s': counts overflow size_t", what, g->name);
        }
        total += counts[r];
    }
    return total;
}

// Starts a reduce-scatter with per-rank receive counts (zeros allowed): sendbuf holds sum(recvcounts) floats, laid
// out as rank 0's slice, rank 1's slice, ...; recvbuf (recvcounts[rank] floats) receives the sum over ranks of this
// rank's slice. In place (NCCL's definition): recvbuf == sendbuf + (sum of recvcounts before rank); the other
// slices of sendbuf are then undefined afterwards. recvcounts must be the same on every rank; it is copied.
static void comm_ireduce_scatterv_sum_f32(CommGroup* g, const float* sendbuf, float* recvbuf, const size_t* recvcounts,
                                          CommRequest* req) {
    comm__check_group(g, "reduce-scatter");
    if (recvcounts == NULL) { comm__die(g->pc, "reduce-scatter on group '%s': recvcounts is NULL", g->name); }
    size_t total = comm__total(g, recvcounts, "reduce-scatter");
    size_t mine = recvcounts[g->rank], my_off = 0;
    for (int r = 0; r < g->rank; r++) { my_off += recvcounts[r]; }
    comm__check_buf(g, sendbuf, total, "reduce-scatter", "sendbuf");
    comm__check_buf(g, recvbuf, mine, "reduce-scatter", "recvbuf");
    comm__begin(req, g, COMM_OP_REDUCE_SCATTER, total, "floats", 1);
    int in_place = sendbuf != NULL && recvbuf == sendbuf + my_off;
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    if (total <= mc) {
        // one MPI_Ireduce_scatter; int counts live in the request until completion
        req->iargs = (int*)mallocCheck((size_t)g->size * sizeof(int));
        for (int r = 0; r < g->size; r++) { req->iargs[r] = (int)recvcounts[r]; }
        MPI_Request* rq = comm__alloc_reqs(req, 1);
        if (in_place) {
            // MPI's in-place form takes the input from recvbuf (the whole buffer) and leaves the result at its start
            float* whole = (float*)sendbuf;
            mpiCheck(MPI_Ireduce_scatter(MPI_IN_PLACE, whole, req->iargs, MPI_FLOAT, MPI_SUM, g->comm, &rq[0]));
            req->move_dst = recvbuf;
            req->move_src = whole;
            req->move_n = mine;
        } else {
            mpiCheck(MPI_Ireduce_scatter(sendbuf, recvbuf, req->iargs, MPI_FLOAT, MPI_SUM, g->comm, &rq[0]));
        }
        return;
    }
    // large: one chunked MPI_Ireduce per rank's slice, to that rank
    size_t nreq = 0;
    for (int r = 0; r < g->size; r++) { nreq += comm__chunks(recvcounts[r], mc); }
    MPI_Request* rq = comm__alloc_reqs(req, nreq);
    size_t k = 0, off = 0;
    for (int r = 0; r < g->size; r++) {
        for (size_t c = 0; c < recvcounts[r]; c += mc) {
            size_t len = recvcounts[r] - c < mc ? recvcounts[r] - c : mc;
            const float* src = sendbuf + off + c;
            if (r == g->rank) {
                if (in_place) {
                    mpiCheck(MPI_Ireduce(MPI_IN_PLACE, recvbuf + c, (int)len, MPI_FLOAT, MPI_SUM, r, g->comm, &rq[k]));
                } else {
                    mpiCheck(MPI_Ireduce(src, recvbuf + c, (int)len, MPI_FLOAT, MPI_SUM, r, g->comm, &rq[k]));
                }
            } else {
                mpiCheck(MPI_Ireduce(src, NULL, (int)len, MPI_FLOAT, MPI_SUM, r, g->comm, &rq[k]));
            }
            k++;
        }
        off += recvcounts[r];
    }
#else
    (void)total;
    if (!in_place && mine > 0) { memmove(recvbuf, sendbuf, mine * sizeof(float)); }
#endif
}

// Starts an allgather with per-rank counts (zeros allowed): recvbuf (sum(counts) floats) receives every rank's
// sendbuf, rank 0's first. In place: sendbuf == recvbuf + (sum of counts before rank). counts must be the same on
// every rank; it is copied.
// The all-gather of elements of `elem` bytes (MPI type `type`; unit names them for the byte counters): the body
// behind the float and byte forms below.
static void comm__iallgatherv(CommGroup* g, const void* sendbuf, void* recvbuf, const size_t* counts, size_t elem,
                              const char* unit, CommRequest* req
#ifdef USE_MPI
                              , MPI_Datatype type
#endif
                              ) {
    comm__check_group(g, "allgather");
    if (counts == NULL) { comm__die(g->pc, "allgather on group '%s': counts is NULL", g->name); }
    size_t total = comm__total(g, counts, "allgather");
    size_t mine = counts[g->rank], my_off = 0;
    for (int r = 0; r < g->rank; r++) { my_off += counts[r]; }
    comm__check_buf(g, sendbuf, mine, "allgather", "sendbuf");
    comm__check_buf(g, recvbuf, total, "allgather", "recvbuf");
    comm__begin(req, g, COMM_OP_ALLGATHER, total, unit, 1);
    char* recv = (char*)recvbuf;
    // own slice first, then everything runs in place
    if (mine > 0 && (const char*)sendbuf != recv + my_off * elem) { memmove(recv + my_off * elem, sendbuf, mine * elem); }
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    if (total <= mc) {
        req->iargs = (int*)mallocCheck(2 * (size_t)g->size * sizeof(int));
        int* icounts = req->iargs;
        int* idispls = req->iargs + g->size;
        size_t off = 0;
        for (int r = 0; r < g->size; r++) {
            icounts[r] = (int)counts[r];
            idispls[r] = (int)off;
            off += counts[r];
        }
        MPI_Request* rq = comm__alloc_reqs(req, 1);
        mpiCheck(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, icounts, idispls, type, g->comm, &rq[0]));
        return;
    }
    // large: every rank broadcasts its slice, chunked
    size_t nreq = 0;
    for (int r = 0; r < g->size; r++) { nreq += comm__chunks(counts[r], mc); }
    MPI_Request* rq = comm__alloc_reqs(req, nreq);
    size_t k = 0, off = 0;
    for (int r = 0; r < g->size; r++) {
        for (size_t c = 0; c < counts[r]; c += mc) {
            size_t len = counts[r] - c < mc ? counts[r] - c : mc;
            mpiCheck(MPI_Ibcast(recv + (off + c) * elem, (int)len, type, r, g->comm, &rq[k]));
            k++;
        }
        off += counts[r];
    }
#else
    (void)total;
#endif
}

#ifdef USE_MPI
#define COMM__ALLGATHERV(g, s, r, c, elem, unit, req, type) comm__iallgatherv(g, s, r, c, elem, unit, req, type)
#else
#define COMM__ALLGATHERV(g, s, r, c, elem, unit, req, type) comm__iallgatherv(g, s, r, c, elem, unit, req)
#endif

static void comm_iallgatherv_f32(CommGroup* g, const float* sendbuf, float* recvbuf, const size_t* counts,
                                 CommRequest* req) {
    COMM__ALLGATHERV(g, sendbuf, recvbuf, counts, sizeof(float), "floats", req, MPI_FLOAT);
}

// The same over bytes (counts in bytes): for buffers of any element type, such as the 16-bit compute copy of the
// parameters that ZeRO-3 gathers in ranges that need not pair its elements into floats.
static void comm_iallgatherv_bytes(CommGroup* g, const void* sendbuf, void* recvbuf, const size_t* counts,
                                   CommRequest* req) {
    COMM__ALLGATHERV(g, sendbuf, recvbuf, counts, 1, "bytes", req, MPI_BYTE);
}

// ----------------------------------------------------------------------------
// bf16 sums, for compressed gradients (--grad-compress bf16): buffers of bf16 bit patterns (uint16), added as floats
// and rounded back to bf16 (nearest even) after every addition, by a user-defined MPI operation. Half the bytes of
// float32 on the wire; each partial sum carries bf16's 8 significant bits.

#ifdef USE_MPI
static void comm__bf16_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
    (void)type;
    const uint16_t* a = (const uint16_t*)in;
    uint16_t* b = (uint16_t*)inout;
    for (int i = 0; i < *len; i++) {
        float x = precision__float((uint32_t)a[i] << 16), y = precision__float((uint32_t)b[i] << 16);
        b[i] = bf16_bits(x + y);
    }
}

static MPI_Op comm__bf16_op(void) {
    static MPI_Op op = MPI_OP_NULL;
    if (op == MPI_OP_NULL) { mpiCheck(MPI_Op_create(comm__bf16_sum, 1, &op)); }
    return op;
}
#endif

// Starts the bf16 sum of buf (n bf16 values) over the group, in place.
static void comm_iallreduce_sum_bf16(CommGroup* g, uint16_t* buf, size_t n, CommRequest* req) { comm__iallreduce(g, buf, n, COMM_SUM_BF16, req); }

// Starts a bf16 reduce-scatter in place: buf holds the whole input (the sum of recvcounts bf16 values); this rank's
// slice of it (at the sum of the counts before it) receives the slice's sum over the group.
static void comm_ireduce_scatterv_sum_bf16(CommGroup* g, uint16_t* buf, const size_t* recvcounts, CommRequest* req) {
    comm__check_group(g, "reduce-scatter");
    size_t total = comm__total(g, recvcounts, "reduce-scatter");
    comm__check_buf(g, buf, total, "reduce-scatter", "buf");
    comm__begin(req, g, COMM_OP_REDUCE_SCATTER, total, "bf16", 1);
#ifdef USE_MPI
    // one chunked MPI_Ireduce per rank's slice, to that rank (MPI's reduce-scatter has no in-place form that keeps
    // the slice where it is)
    size_t mc = comm__max_count(g);
    size_t nreq = 0;
    for (int r = 0; r < g->size; r++) { nreq += comm__chunks(recvcounts[r], mc); }
    MPI_Request* rq = comm__alloc_reqs(req, nreq);
    MPI_Op op = comm__bf16_op();
    size_t k = 0, off = 0;
    for (int r = 0; r < g->size; r++) {
        for (size_t c = 0; c < recvcounts[r]; c += mc) {
            size_t len = recvcounts[r] - c < mc ? recvcounts[r] - c : mc;
            uint16_t* at = buf + off + c;
            if (r == g->rank) { mpiCheck(MPI_Ireduce(MPI_IN_PLACE, at, (int)len, MPI_UINT16_T, op, r, g->comm, &rq[k])); }
            else { mpiCheck(MPI_Ireduce(at, NULL, (int)len, MPI_UINT16_T, op, r, g->comm, &rq[k])); }
            k++;
        }
        off += recvcounts[r];
    }
#endif
}

// Starts the sum of buf (n floats) over the group into root's buf, in place (the others' buffers are unchanged).
static void comm_ireduce_sum_f32(CommGroup* g, float* buf, size_t n, int root, CommRequest* req) {
    comm__check_group(g, "reduce");
    if (root < 0 || root >= g->size) { comm__die(g->pc, "reduce on group '%s': root %d is not a rank (size %d)", g->name, root, g->size); }
    comm__check_buf(g, buf, n, "reduce", "buf");
    comm__begin(req, g, COMM_OP_REDUCE, n, "floats", 1);
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    MPI_Request* rq = comm__alloc_reqs(req, comm__chunks(n, mc));
    size_t k = 0;
    for (size_t c = 0; c < n; c += mc) {
        size_t len = n - c < mc ? n - c : mc;
        if (g->rank == root) { mpiCheck(MPI_Ireduce(MPI_IN_PLACE, buf + c, (int)len, MPI_FLOAT, MPI_SUM, root, g->comm, &rq[k++])); }
        else { mpiCheck(MPI_Ireduce(buf + c, NULL, (int)len, MPI_FLOAT, MPI_SUM, root, g->comm, &rq[k++])); }
    }
#endif
}

#ifdef USE_MPI
// The large gather, scatter and all-to-all: point-to-point messages of at most max_count floats with the
// collectives' tag, started at once (receives before sends); appended to the request's n_have requests.
static void comm__p2p_chunks(CommGroup* g, MPI_Request* rq, size_t* k, float* buf, size_t n, int peer, int send) {
    size_t mc = comm__max_count(g);
    for (size_t c = 0; c < n; c += mc) {
        size_t len = n - c < mc ? n - c : mc;
        if (send) { mpiCheck(MPI_Isend(buf + c, (int)len, MPI_FLOAT, peer, COMM_TAG_COLLECTIVE, g->comm, &rq[(*k)++])); }
        else { mpiCheck(MPI_Irecv(buf + c, (int)len, MPI_FLOAT, peer, COMM_TAG_COLLECTIVE, g->comm, &rq[(*k)++])); }
    }
}
#endif

// Starts a gather: root's recvbuf (size x count floats) receives every rank's sendbuf (count floats) in rank order.
// The root's own part may already be in place (sendbuf == recvbuf + root count).
static void comm_igather_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t count, int root, CommRequest* req) {
    comm__check_group(g, "gather");
    if (root < 0 || root >= g->size) { comm__die(g->pc, "gather on group '%s': root %d is not a rank (size %d)", g->name, root, g->size); }
    size_t total = mulSize((size_t)g->size, count);
    comm__check_buf(g, sendbuf, count, "gather", "sendbuf");
    if (g->rank == root) { comm__check_buf(g, recvbuf, total, "gather", "recvbuf"); }
    comm__begin(req, g, COMM_OP_GATHER, total, "floats", 1);
    float* own = g->rank == root ? recvbuf + (size_t)root * count : NULL;
    if (own && count > 0 && sendbuf != own) { memmove(own, sendbuf, count * sizeof(float)); }
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    if (total <= mc) {
        MPI_Request* rq = comm__alloc_reqs(req, 1);
        if (own) { mpiCheck(MPI_Igather(MPI_IN_PLACE, 0, MPI_FLOAT, recvbuf, (int)count, MPI_FLOAT, root, g->comm, &rq[0])); }
        else { mpiCheck(MPI_Igather(sendbuf, (int)count, MPI_FLOAT, NULL, 0, MPI_FLOAT, root, g->comm, &rq[0])); }
        return;
    }
    size_t per = comm__chunks(count, mc), k = 0;
    MPI_Request* rq = comm__alloc_reqs(req, own ? per * (size_t)(g->size - 1) : per);
    for (int r = 0; own && r < g->size; r++) {
        if (r != root) { comm__p2p_chunks(g, rq, &k, recvbuf + (size_t)r * count, count, r, 0); }
    }
    if (!own) { comm__p2p_chunks(g, rq, &k, (float*)sendbuf, count, root, 1); }
#else
    (void)total;
#endif
}

// Starts a scatter: every rank's recvbuf (count floats) receives its part of root's sendbuf (size x count floats).
// The root's part may stay in place (recvbuf == sendbuf + root count).
static void comm_iscatter_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t count, int root, CommRequest* req) {
    comm__check_group(g, "scatter");
    if (root < 0 || root >= g->size) { comm__die(g->pc, "scatter on group '%s': root %d is not a rank (size %d)", g->name, root, g->size); }
    size_t total = mulSize((size_t)g->size, count);
    if (g->rank == root) { comm__check_buf(g, sendbuf, total, "scatter", "sendbuf"); }
    comm__check_buf(g, recvbuf, count, "scatter", "recvbuf");
    comm__begin(req, g, COMM_OP_SCATTER, total, "floats", 1);
    const float* own = g->rank == root ? sendbuf + (size_t)root * count : NULL;
    if (own && count > 0 && recvbuf != own) { memmove(recvbuf, own, count * sizeof(float)); }
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    if (total <= mc) {
        MPI_Request* rq = comm__alloc_reqs(req, 1);
        if (own) { mpiCheck(MPI_Iscatter(sendbuf, (int)count, MPI_FLOAT, MPI_IN_PLACE, 0, MPI_FLOAT, root, g->comm, &rq[0])); }
        else { mpiCheck(MPI_Iscatter(NULL, 0, MPI_FLOAT, recvbuf, (int)count, MPI_FLOAT, root, g->comm, &rq[0])); }
        return;
    }
    size_t per = comm__chunks(count, mc), k = 0;
    MPI_Request* rq = comm__alloc_reqs(req, own ? per * (size_t)(g->size - 1) : per);
    if (!own) { comm__p2p_chunks(g, rq, &k, recvbuf, count, root, 0); }
    for (int r = 0; own && r < g->size; r++) {
        if (r != root) { comm__p2p_chunks(g, rq, &k, (float*)sendbuf + (size_t)r * count, count, r, 1); }
    }
#else
    (void)total;
#endif
}

// Starts an all-to-all: part q (count floats) of rank r's sendbuf (size x count) lands as part r of rank q's recvbuf
// (size x count). Not in place: the two buffers must not overlap.
static void comm_ialltoall_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t count, CommRequest* req) {
    comm__check_group(g, "alltoall");
    size_t total = mulSize((size_t)g->size, count);
    comm__check_buf(g, sendbuf, total, "alltoall", "sendbuf");
    comm__check_buf(g, recvbuf, total, "alltoall", "recvbuf");
    if (total > 0 && sendbuf < recvbuf + total && recvbuf < sendbuf + total) {
        comm__die(g->pc, "alltoall on group '%s': the send and receive buffers overlap", g->name);
    }
    comm__begin(req, g, COMM_OP_ALLTOALL, total, "floats", 1);
    if (count > 0) { memcpy(recvbuf + (size_t)g->rank * count, sendbuf + (size_t)g->rank * count, count * sizeof(float)); }
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    if (total <= mc) {
        MPI_Request* rq = comm__alloc_reqs(req, 1);
        mpiCheck(MPI_Ialltoall(sendbuf, (int)count, MPI_FLOAT, recvbuf, (int)count, MPI_FLOAT, g->comm, &rq[0]));
        return;
    }
    size_t per = comm__chunks(count, mc), k = 0;
    MPI_Request* rq = comm__alloc_reqs(req, 2 * per * (size_t)(g->size - 1));
    for (int r = 0; r < g->size; r++) {
        if (r != g->rank) { comm__p2p_chunks(g, rq, &k, recvbuf + (size_t)r * count, count, r, 0); }
    }
    for (int r = 0; r < g->size; r++) {
        if (r != g->rank) { comm__p2p_chunks(g, rq, &k, (float*)sendbuf + (size_t)r * count, count, r, 1); }
    }
#else
    (void)total;
#endif
}

// Starts a byte broadcast from group rank root to every member.
static void comm_ibroadcast(CommGroup* g, void* buf, size_t bytes, int root, CommRequest* req) {
    comm__check_group(g, "broadcast");
    comm__check_buf(g, buf, bytes, "broadcast", "buf");
    if (root < 0 || root >= g->size) {
        comm__die(g->pc, "broadcast on group '%s': root %d is not a rank of the group (size %d)", g->name, root, g->size);
    }
    comm__begin(req, g, COMM_OP_BROADCAST, bytes, "bytes", 1);
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    size_t nch = comm__chunks(bytes, mc);
    MPI_Request* r = comm__alloc_reqs(req, nch);
    for (size_t c = 0; c < nch; c++) {
        size_t off = c * mc, len = bytes - off < mc ? bytes - off : mc;
        mpiCheck(MPI_Ibcast((char*)buf + off, (int)len, MPI_BYTE, root, g->comm, &r[c]));
    }
#endif
}

// Starts a barrier.
static void comm_ibarrier(CommGroup* g, CommRequest* req) {
    comm__check_group(g, "barrier");
    comm__begin(req, g, COMM_OP_BARRIER, 0, NULL, 1);
#ifdef USE_MPI
    MPI_Request* r = comm__alloc_reqs(req, 1);
    mpiCheck(MPI_Ibarrier(g->comm, &r[0]));
#endif
}

// Checks peer and tag of a send/recv.
static void comm__check_p2p(const CommGroup* g, int peer, int tag, const char* what) {
    if (peer < 0 || peer >= g->size) {
        comm__die(g->pc, "%s on group '%s': peer %d is not a rank of the group (size %d)", what, g->name, peer, g->size);
    }
    if (tag < 0 || tag >= COMM_TAG_COLLECTIVE) {
        comm__die(g->pc, "%s on group '%s': tag %d is outside [0, %d] (%d is the collectives')", what, g->name, tag,
                  COMM_TAG_COLLECTIVE - 1, COMM_TAG_COLLECTIVE);
    }
#ifndef USE_MPI
    comm__die(g->pc, "%s on group '%s': point-to-point needs another rank; this build has no MPI", what, g->name);
#endif
}

// Starts sending bytes to group rank peer. Messages between two ranks with the same tag arrive in order.
static void comm_isend(CommGroup* g, const void* buf, size_t bytes, int peer, int tag, CommRequest* req) {
    comm__check_group(g, "send");
    comm__check_buf(g, buf, bytes, "send", "buf");
    comm__check_p2p(g, peer, tag, "send");
    comm__begin(req, g, COMM_OP_SEND, bytes, "bytes", 0);
    req->peer = peer;
    req->tag = tag;
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    size_t nch = comm__chunks(bytes, mc);
    MPI_Request* r = comm__alloc_reqs(req, nch);
    for (size_t c = 0; c < nch; c++) {
        size_t off = c * mc, len = bytes - off < mc ? bytes - off : mc;
        mpiCheck(MPI_Isend((const char*)buf + off, (int)len, MPI_BYTE, peer, tag, g->comm, &r[c]));
    }
#endif
}

// Starts receiving exactly bytes from group rank peer (a different size sent is an error naming both ranks).
static void comm_irecv(CommGroup* g, void* buf, size_t bytes, int peer, int tag, CommRequest* req) {
    comm__check_group(g, "recv");
    comm__check_buf(g, buf, bytes, "recv", "buf");
    comm__check_p2p(g, peer, tag, "recv");
    comm__begin(req, g, COMM_OP_RECV, bytes, "bytes", 0);
    req->peer = peer;
    req->tag = tag;
#ifdef USE_MPI
    size_t mc = comm__max_count(g);
    size_t nch = comm__chunks(bytes, mc);
    req->chunk = mc;
    MPI_Request* r = comm__alloc_reqs(req, nch);
    for (size_t c = 0; c < nch; c++) {
        size_t off = c * mc, len = bytes - off < mc ? bytes - off : mc;
        mpiCheck(MPI_Irecv((char*)buf + off, (int)len, MPI_BYTE, peer, tag, g->comm, &r[c]));
    }
#endif
}

// ----------------------------------------------------------------------------
// collectives: blocking (start + comm_wait)

// Sums buf (n floats) over the group, in place.
static void comm_allreduce_sum_f32(CommGroup* g, float* buf, size_t n) {
    CommRequest req;
    comm_iallreduce_sum_f32(g, buf, n, &req);
    comm_wait(&req);
}

// Sums buf (n doubles) over the group, in place (loss sums, squared norms).
static void comm_allreduce_sum_f64(CommGroup* g, double* buf, size_t n) {
    CommRequest req;
    comm_iallreduce_sum_f64(g, buf, n, &req);
    comm_wait(&req);
}

// Element-wise maximum of buf (n doubles) over the group, in place.
static void comm_allreduce_max_f64(CommGroup* g, double* buf, size_t n) {
    CommRequest req;
    comm_iallreduce_max_f64(g, buf, n, &req);
    comm_wait(&req);
}

// Reduce-scatter with per-rank receive counts; see comm_ireduce_scatterv_sum_f32.
static void comm_reduce_scatterv_sum_f32(CommGroup* g, const float* sendbuf, float* recvbuf, const size_t* recvcounts) {
    CommRequest req;
    comm_ireduce_scatterv_sum_f32(g, sendbuf, recvbuf, recvcounts, &req);
    comm_wait(&req);
}

// Builds the all-equal counts array of the equal-count variants.
static size_t* comm__equal_counts(const CommGroup* g, size_t count) {
    comm__check_group(g, "collective");
    size_t* counts = (size_t*)mallocCheck((size_t)g->size * sizeof(size_t));
    for (int r = 0; r < g->size; r++) { counts[r] = count; }
    return counts;
}

// Equal-count reduce-scatter: sendbuf holds size*recvcount floats; recvbuf receives the sum of slice [rank].
// In place: recvbuf == sendbuf + rank*recvcount.
static void comm_reduce_scatter_sum_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t recvcount) {
    size_t* counts = comm__equal_counts(g, recvcount);
    comm_reduce_scatterv_sum_f32(g, sendbuf, recvbuf, counts);
    free(counts);
}

// Allgather with per-rank counts; see comm_iallgatherv_f32.
static void comm_allgatherv_f32(CommGroup* g, const float* sendbuf, float* recvbuf, const size_t* counts) {
    CommRequest req;
    comm_iallgatherv_f32(g, sendbuf, recvbuf, counts, &req);
    comm_wait(&req);
}

// Equal-count allgather: recvbuf (size*sendcount floats) receives every rank's sendcount floats, rank order.
// In place: sendbuf == recvbuf + rank*sendcount.
static void comm_allgather_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t sendcount) {
    size_t* counts = comm__equal_counts(g, sendcount);
    comm_allgatherv_f32(g, sendbuf, recvbuf, counts);
    free(counts);
}

static void comm_reduce_sum_f32(CommGroup* g, float* buf, size_t n, int root) {
    CommRequest req;
    comm_ireduce_sum_f32(g, buf, n, root, &req);
    comm_wait(&req);
}

static void comm_gather_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t count, int root) {
    CommRequest req;
    comm_igather_f32(g, sendbuf, recvbuf, count, root, &req);
    comm_wait(&req);
}

static void comm_scatter_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t count, int root) {
    CommRequest req;
    comm_iscatter_f32(g, sendbuf, recvbuf, count, root, &req);
    comm_wait(&req);
}

static void comm_alltoall_f32(CommGroup* g, const float* sendbuf, float* recvbuf, size_t count) {
    CommRequest req;
    comm_ialltoall_f32(g, sendbuf, recvbuf, count, &req);
    comm_wait(&req);
}

// Copies bytes from group rank root's buf into every member's buf.
static void comm_broadcast(CommGroup* g, void* buf, size_t bytes, int root) {
    CommRequest req;
    comm_ibroadcast(g, buf, bytes, root, &req);
    comm_wait(&req);
}

// Sends bytes to group rank peer and waits until the buffer may be reused.
static void comm_send(CommGroup* g, const void* buf, size_t bytes, int peer, int tag) {
    CommRequest req;
    comm_isend(g, buf, bytes, peer, tag, &req);
    comm_wait(&req);
}

// Receives exactly bytes from group rank peer.
static void comm_recv(CommGroup* g, void* buf, size_t bytes, int peer, int tag) {
    CommRequest req;
    comm_irecv(g, buf, bytes, peer, tag, &req);
    comm_wait(&req);
}

// Returns once every member has entered the barrier.
static void comm_barrier(CommGroup* g) {
    CommRequest req;
    comm_ibarrier(g, &req);
    comm_wait(&req);
}

#endif // COMM_H
