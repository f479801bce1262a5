/*
comm_nccl.h: the data-parallel collectives of zero.h on device buffers through NCCL (--comm nccl, train_gpt_cu built
with NCCL). The MPI path of a GPU build (--comm mpi) copies every bucket to pinned host memory, reduces it there and
copies it back; here the reduction reads and writes the device buffers directly, on a stream of its own, so the
backward keeps computing while a bucket travels.

Ordering, all on the device (the CPU never waits for a collective here):
  start:  an event recorded on the compute stream (after the kernels that wrote the bucket), which the communication
          stream waits for before the NCCL call; then an event recorded on the communication stream after it
  wait:   the compute stream waits for that second event, so later kernels (the next use of the buffer, AdamW) run
          after the collective; nothing is copied back, the result is already in place
NCCL's communicator is made once per group: rank 0 of the group asks NCCL for a unique id and broadcasts it over the
group's MPI communicator; every member then joins with ncclCommInitRank (one GPU per process: NCCL refuses two ranks
on one GPU of one host, which is why the tests of several processes on one GPU use --comm mpi, or give each process
a host of its own: comm_nccl_shared_device).

NCCL has no variable-count collectives. The ZeRO reductions of a bucket that spans several ranks' shards are
therefore grouped point collectives (ncclGroupStart/End, one NCCL launch): the reduce-scatter with counts c_r is one
ncclReduce per rank r of its c_r elements to root r; the all-gather with counts is one ncclBroadcast per rank of its
part from root r. The equal-count all-gather of the parameters after AdamW is one ncclAllGather, in place.

The tensor-parallel group's collectives (tp.h: the all-reduces of the row-parallel layers and the vocabulary-parallel
embedding, sequence parallelism's all-gather and reduce-scatter, the replicated parameters' gradients) run through
the tp group's own communicator on the compute stream, reduced in fp32 like the MPI path.
The pipeline's messages (pipeline_train.h) travel between pairs of ranks: a communicator of two ranks for each
direction of each link between neighbouring stages, each with its own stream (see "point to point" below), and one
more between the first and last stages for the tied wte's gradients. NCCL refuses a communicator whose ranks share a
GPU; comm_nccl_shared_device finds such ranks first, so the caller can say so (the pipeline then keeps MPI on
pinned host copies for its messages, as on a one-GPU test machine).
--grad-compress bf16 rounds each bucket to bf16 on the device and sums it in bf16 through NCCL (below); PowerSGD
(zero.h) keeps its host path over MPI.
A watchdog thread gives NCCL the collective timeout comm.h gives MPI (--comm-timeout; "the watchdog" below).
Only static functions: include after comm.h and the kernels header.
*/
#ifndef COMM_NCCL_H
#define COMM_NCCL_H

#if defined(KERNELS_CUDA) && defined(USE_NCCL)
#include <nccl.h>
#include <pthread.h>
#include <sched.h>

// NCCL's name for the result, then its last error message (ncclGetLastError: the reason a generic "unhandled system
// error" or "invalid usage" hides, which NCCL otherwise prints only under NCCL_DEBUG=WARN)
static const char* kernels__status(ncclResult_t r) {
    static char buf[1200];
    if (r == ncclSuccess) { return NULL; }
    const char* last = ncclGetLastError(NULL);
    snprintf(buf, sizeof(buf), "%s%s%s", ncclGetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
    return buf;
}

#define COMM_NCCL_TAG_ID 24 // a pair's unique id, from its first rank to its second (MPI, the group's communicator)
#define COMM_NCCL_WATCH 1024 // operations of one communicator in flight before the host waits for the oldest
#define COMM_NCCL_COMMS 16   // communicators per process (the dp and tp groups, up to 4 pipeline pairs and the wte's)

// One operation the watchdog follows: what it is, when the host issued it, and the event after it on its stream.
typedef struct {
    cudaEvent_t done;    // recorded after the operation (made on the slot's first use, reused after)
    int recorded;        // 0 while the host is still issuing it (an NCCL call may block the host)
    int op;              // enum CommOp
    size_t count;
    const char* unit;
    int64_t seq;         // its number among the group's collectives (0 for a pair's operations)
    double start;        // now_seconds() when issued
} CommNcclOp;

typedef struct CommNccl {
    ncclComm_t comm;
    cudaStream_t stream; // the communication stream
    cudaEvent_t ready;   // recorded on the compute stream before each collective (reused: a wait takes the latest record)
    int rank, size;
    float* scratch;      // the tensor-parallel collectives' fp32 device copy of a floatX tensor (grown on demand)
    size_t scratch_floats;
    float* retired[40];  // outgrown scratch buffers, freed with the communicator (see comm_nccl__scratch)
    int nretired;
    size_t retired_bytes;
    CommGroup* group;    // the group it serves (a pair: the group of its two ranks), for the watchdog's messages
    int peer;            // a pair: the other rank, by group rank; -1 for a whole group's communicator
    CommNcclOp* ops;     // (COMM_NCCL_WATCH) the operations in flight, oldest at `head`, `count` of them, in the
    int head, count;     // order they run on their stream (guarded by the watchdog's lock)
} CommNccl;

// --- the watchdog -----------------------------------------------------------------------------------------------
// An NCCL collective runs on the device, so a peer that stops (a hung process, a frozen node) leaves this rank's NCCL
// kernel waiting and its host blocked at its next synchronisation, forever: comm_wait's timeout never runs. As
// PyTorch's NCCL watchdog does, a thread follows every operation instead. The host registers each one before the
// NCCL call (which can block too: a communicator's first collective connects to the peers) and records an event
// after it; operations of one communicator finish in order on its stream, so the thread looks at each one's oldest
// every 100 ms. Past --comm-timeout it prints comm.h's one line, naming the operation and the members that never
// arrived (a group's collectives are numbered on the group and published in comm.h's shared-memory records, as the
// MPI ones are, so the same comparison finds them), and aborts the job; the driver ends the hung kernels with the
// processes. An error NCCL reports on a communicator (ncclCommGetAsyncError: a broken connection, a failed peer)
// ends the job at once, naming the group. The host also waits for the oldest operation when a communicator has
// COMM_NCCL_WATCH in flight, which bounds how far it runs ahead of the device.
// The abort (comm__die's MPI_Abort) is this thread's one MPI call. MPI_THREAD_FUNNELED (comm.h) leaves MPI to the main
// thread, which is blocked here; Open MPI's abort is made for any thread (its own progress threads end a job through
// it), and nothing follows it.
static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    CommNccl* comms[COMM_NCCL_COMMS];
    int ncomms;
    pthread_t thread;
    int running, stop;
    int device;          // the process's GPU: the thread's CUDA calls must not make a context on device 0
} comm_nccl__w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {NULL}, 0, 0, 0, 0, 0};

// Drops the finished operations at the front of n's list (lock held). An error other than "not ready" stays for the
// host's next CUDA call to report.
static void comm_nccl__retire(CommNccl* n) {
    while (n->count > 0) {
        CommNcclOp* o = &n->ops[n->head];
        if (!o->recorded || cudaEventQuery(o->done) != cudaSuccess) { return; }
        n->head = (n->head + 1) % COMM_NCCL_WATCH;
        n->count--;
    }
}

// Past the timeout: comm.h's message for n's oldest operation o, and the job ends (lock held; never returns).
static void __attribute__((noreturn)) comm_nccl__timeout(CommNccl* n, const CommNcclOp* o, double waited) {
    CommRequest req;
    memset(&req, 0, sizeof(req));
    req.active = 1;
    req.op = o->op;
    req.group = n->group;
    req.count = o->count;
    req.unit = o->unit;
    req.seq = o->seq;
    req.peer = n->peer;
    req.start_time = o->start;
    req.via = "NCCL";
    comm__timeout(&req, waited);
}

// 1 if n's oldest operation has waited past the timeout (lock held).
static int comm_nccl__overdue(const CommNccl* n, double now, double* waited) {
    if (n->count == 0) { return 0; }
    *waited = now - n->ops[n->head].start;
    return *waited > n->group->pc->timeout_s;
}

static void* comm_nccl__watch(void* arg) {
    (void)arg;
    gpuCheck(cudaSetDevice(comm_nccl__w.device)); // a new thread's current device is 0, whatever the process uses
    pthread_mutex_lock(&comm_nccl__w.lock);
    while (!comm_nccl__w.stop) {
        double now = now_seconds(), waited = 0.0;
        for (int i = 0; i < comm_nccl__w.ncomms; i++) {
            CommNccl* n = comm_nccl__w.comms[i];
            ncclResult_t async = ncclSuccess;
            if (ncclCommGetAsyncError(n->comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
                comm__die(n->group->pc, "NCCL reported an error on the communicator of group '%s'%s: %s (ncclCommGetAsyncError)",
                          n->group->name, n->peer >= 0 ? " (a pair of its ranks)" : "", ncclGetErrorString(async));
            }
            comm_nccl__retire(n);
            if (comm_nccl__overdue(n, now, &waited)) { comm_nccl__timeout(n, &n->ops[n->head], waited); }
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000L;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&comm_nccl__w.wake, &comm_nccl__w.lock, &until);
    }
    pthread_mutex_unlock(&comm_nccl__w.lock);
    return NULL;
}

// Follows n's operations from now on (the thread starts with the first communicator).
static void comm_nccl__watch_start(CommNccl* n, CommGroup* g, int peer) {
    n->group = g;
    n->peer = peer;
    n->ops = (CommNcclOp*)callocCheck(COMM_NCCL_WATCH, sizeof(CommNcclOp));
    n->head = n->count = 0;
    pthread_mutex_lock(&comm_nccl__w.lock);
    if (comm_nccl__w.ncomms == COMM_NCCL_COMMS) { fatal("internal: more than %d NCCL communicators", COMM_NCCL_COMMS); }
    comm_nccl__w.comms[comm_nccl__w.ncomms++] = n;
    if (!comm_nccl__w.running) {
        comm_nccl__w.stop = 0;
        gpuCheck(cudaGetDevice(&comm_nccl__w.device));
        if (pthread_create(&comm_nccl__w.thread, NULL, comm_nccl__watch, NULL) != 0) { fatal("cannot start the NCCL watchdog thread"); }
        comm_nccl__w.running = 1;
    }
    pthread_mutex_unlock(&comm_nccl__w.lock);
}

// Stops following n (its operations have finished); the thread ends with the last communicator.
static void comm_nccl__watch_end(CommNccl* n) {
    pthread_mutex_lock(&comm_nccl__w.lock);
    int last = 0;
    for (int i = 0; i < comm_nccl__w.ncomms; i++) {
        if (comm_nccl__w.comms[i] == n) { comm_nccl__w.comms[i] = comm_nccl__w.comms[--comm_nccl__w.ncomms]; break; }
    }
    if (comm_nccl__w.ncomms == 0 && comm_nccl__w.running) {
        comm_nccl__w.stop = 1;
        pthread_cond_signal(&comm_nccl__w.wake);
        last = 1;
    }
    pthread_mutex_unlock(&comm_nccl__w.lock);
    if (last) {
        pthread_join(comm_nccl__w.thread, NULL);
        comm_nccl__w.running = 0;
    }
    for (int i = 0; i < COMM_NCCL_WATCH; i++) {
        if (n->ops[i].done) { gpuCheck(cudaEventDestroy(n->ops[i].done)); }
    }
    free(n->ops);
    n->ops = NULL;
}

// Registers an operation on n before its NCCL call: entered in the group's books (comm__enter), timed from now.
// With COMM_NCCL_WATCH in flight the host first waits for the oldest (and times it out).
static CommNcclOp* comm_nccl__issue(CommNccl* n, int op, size_t count, const char* unit) {
    pthread_mutex_lock(&comm_nccl__w.lock);
    comm_nccl__retire(n);
    while (n->count == COMM_NCCL_WATCH) {
        double waited = 0.0;
        if (comm_nccl__overdue(n, now_seconds(), &waited)) { comm_nccl__timeout(n, &n->ops[n->head], waited); }
        pthread_mutex_unlock(&comm_nccl__w.lock);
        sched_yield();
        pthread_mutex_lock(&comm_nccl__w.lock);
        comm_nccl__retire(n);
    }
    CommNcclOp* o = &n->ops[(n->head + n->count) % COMM_NCCL_WATCH];
    o->recorded = 0;
    o->op = op;
    o->count = count;
    o->unit = unit;
    o->seq = comm__enter(n->group, op, count, unit, n->peer < 0); // (a pair's operations are messages)
    o->start = now_seconds();
    n->count++;
    pthread_mutex_unlock(&comm_nccl__w.lock);
    return o;
}

// After the NCCL call: the event on `stream` that says when the device has finished the operation.
static void comm_nccl__issued(CommNcclOp* o, cudaStream_t stream) {
    if (!o->done) { gpuCheck(cudaEventCreateWithFlags(&o->done, cudaEventDisableTiming)); }
    gpuCheck(cudaEventRecord(o->done, stream));
    pthread_mutex_lock(&comm_nccl__w.lock);
    o->recorded = 1;
    pthread_mutex_unlock(&comm_nccl__w.lock);
}

// A started collective: the event recorded on the communication stream after it (NULL: none in flight).
typedef struct { cudaEvent_t done; } CommNcclReq;

static int comm_nccl_available(void) { return 1; }

// Several communicators on one device with operations in flight at once (the data-parallel group's reductions on
// their stream while the backward's tensor-parallel collectives and the pipeline's pairs run on theirs): NCCL's
// kernels wait for their peers, so two devices that start two communicators' kernels in different orders can wait
// for each other forever. NCCL 2.26 and later order their launches on each device as the host issued them when
// NCCL_LAUNCH_ORDER_IMPLICIT=1; each process here issues its NCCL calls from one thread, so that order is its
// program's. On CUDA 12.3 and later a kernel waits only for the previous one's launch and they still overlap; before
// it NCCL serializes them, which would hold a pipeline's send behind a receive that needs the peer's send first
// (tests/test_pp: "on one stream per rank"), so there it is not set. Set before the first NCCL call (NCCL reads it
// once); a user's own setting is kept, and comm_nccl_launch_order says which holds.
static int comm_nccl__cuda_orders_launches(void) {
    int driver = 0;
    return cudaDriverGetVersion(&driver) == cudaSuccess && driver >= 12030 && CUDART_VERSION >= 12030;
}
static void comm_nccl__order_launches(void) {
    if (comm_nccl__cuda_orders_launches()) { setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", 0); }
}

// 1 when several communicators' launches are ordered as issued (NCCL 2.26 or later with NCCL_LAUNCH_ORDER_IMPLICIT=1,
// on CUDA 12.3 or later); 0 with why not in why.
static int comm_nccl_launch_order(char* why, size_t cap) {
    int v = 0;
    const char* e = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    if (!comm_nccl__cuda_orders_launches()) {
        snprintf(why, cap, "CUDA before 12.3 (runtime %d): NCCL could order several communicators' launches only by serializing them", CUDART_VERSION);
        return 0;
    }
    if (ncclGetVersion(&v) != ncclSuccess || v < 22600) {
        snprintf(why, cap, "NCCL %d.%d.%d predates NCCL_LAUNCH_ORDER_IMPLICIT (2.26)", v / 10000, v / 100 % 100, v % 100);
        return 0;
    }
    if (!e || strcmp(e, "1") != 0) { snprintf(why, cap, "NCCL_LAUNCH_ORDER_IMPLICIT is '%s', not 1", e ? e : ""); return 0; }
    snprintf(why, cap, "launches of several communicators ordered as the host issued them (NCCL_LAUNCH_ORDER_IMPLICIT=1)");
    return 1;
}
static int comm_nccl_joined(const CommNccl* n) { return n->comm != NULL; }

static void comm_nccl__join(CommNccl* n, ncclUniqueId id, int rank, int size, CommGroup* g, int peer) {
    memset(n, 0, sizeof(*n));
    n->rank = rank;
    n->size = size;
    gpuCheck(ncclCommInitRank(&n->comm, size, id, rank));
    gpuCheck(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    gpuCheck(cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
    comm_nccl__watch_start(n, g, peer);
}

// Joins the NCCL communicator of group g (collective over g's MPI communicator).
static void comm_nccl_init(CommNccl* n, CommGroup* g) {
    comm_nccl__order_launches();
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (g->rank == 0) { gpuCheck(ncclGetUniqueId(&id)); }
    comm_broadcast(g, &id, sizeof(id), 0);
    // ncclCommInitRank waits for every member with no timeout of its own, and the watchdog follows a communicator only
    // once it exists: a member that never comes would hang the others there in silence. Met first at a barrier of
    // comm.h's, which --comm-timeout watches (its message names who never arrived); then every member is at the init.
    comm_barrier(g);
    comm_nccl__join(n, id, g->rank, g->size, g, -1);
}

// Joins the communicator of two members of g, `first` (its rank 0) and `second`; only those two call it.
static void comm_nccl_init_pair(CommNccl* n, CommGroup* g, int first, int second) {
    comm_nccl__order_launches();
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    char ack = 0; // (the second answers the id: both are then at the init, as comm_nccl_init's barrier makes sure)
    if (g->rank == first) {
        gpuCheck(ncclGetUniqueId(&id));
        comm_send(g, &id, sizeof(id), second, COMM_NCCL_TAG_ID);
        comm_recv(g, &ack, 1, second, COMM_NCCL_TAG_ID);
    } else {
        comm_recv(g, &id, sizeof(id), first, COMM_NCCL_TAG_ID);
        comm_send(g, &ack, 1, first, COMM_NCCL_TAG_ID);
    }
    comm_nccl__join(n, id, g->rank == first ? 0 : 1, 2, g, g->rank == first ? second : first);
}

// NCCL's own idea of a host (its getHostHash): NCCL_HOSTID when that is set, else the host name followed by the
// kernel's boot id (two containers with one host name on different machines are different hosts), hashed to 64 bits
// (FNV-1a; NCCL hashes the same string its own way)
static uint64_t comm_nccl__host_hash(void) {
    char id[1100] = "";
    const char* env = getenv("NCCL_HOSTID");
    if (env) {
        snprintf(id, sizeof(id), "%s", env);
    } else {
        char boot[64] = "";
        gethostname(id, 1023);
        FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (f) {
            if (fscanf(f, "%63s", boot) != 1) { boot[0] = '\0'; }
            fclose(f);
        }
        size_t n = strlen(id);
        snprintf(id + n, sizeof(id) - n, "%s", boot);
    }
    uint64_t h = 1469598103934665603ull;
    for (const char* p = id; *p; p++) { h = (h ^ (unsigned char)*p) * 1099511628211ull; }
    return h;
}

// NCCL 2.30 and later take ranks that share a GPU when NCCL_MULTI_RANK_GPU_ENABLE is a non-zero number
static int comm_nccl__multi_rank_gpu(void) {
    int v = 0;
    const char* e = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    return e && strtol(e, NULL, 0) != 0 && ncclGetVersion(&v) == ncclSuccess && v >= 23000;
}

// Whether two members of g use the same GPU, which NCCL refuses in one communicator (collective over g). NCCL's rule,
// repeated here so that the caller can say so in our words first: two ranks on one host (comm_nccl__host_hash) with
// one PCI bus id, unless NCCL_MULTI_RANK_GPU_ENABLE allows it (NCCL 2.30). Every member names its device by host and
// bus id (and by its rank where sharing is allowed), and all compare the names. The first such pair of group ranks
// goes to *a < *b. Processes on one GPU that each set an NCCL_HOSTID of their own are different hosts to NCCL, which
// then connects them as it connects machines (scripts/nccl_rank_host.sh, for tests on a one-GPU machine).
static int comm_nccl_shared_device(CommGroup* g, const KernelCtx* ctx, int* a, int* b) {
    enum { NAME = 96 };
    char mine[NAME], bus[64];
    memset(mine, 0, sizeof(mine));
    gpuCheck(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), ctx->device));
    int n = snprintf(mine, sizeof(mine), "%016llx/%.48s", (unsigned long long)comm_nccl__host_hash(), bus);
    if (comm_nccl__multi_rank_gpu() && n > 0 && n < NAME) { snprintf(mine + n, sizeof(mine) - (size_t)n, "/rank%d", g->rank); }
    char* all = (char*)mallocCheck(mulSize((size_t)g->size, NAME));
    size_t* counts = (size_t*)mallocCheck(sizeof(size_t) * (size_t)g->size);
    for (int r = 0; r < g->size; r++) { counts[r] = NAME; }
    CommRequest req;
    comm_iallgatherv_bytes(g, mine, all, counts, &req);
    comm_wait(&req);
    int found = 0;
    for (int i = 0; i < g->size && !found; i++) {
        for (int j = i + 1; j < g->size && !found; j++) {
            if (memcmp(all + (size_t)i * NAME, all + (size_t)j * NAME, NAME) == 0) { *a = i; *b = j; found = 1; }
        }
    }
    free(all);
    free(counts);
    return found;
}

static void comm_nccl_free(CommNccl* n) {
    if (!n || !n->comm) { return; }
    gpuCheck(cudaStreamSynchronize(n->stream));
    comm_nccl__watch_end(n); // (a hang in that synchronisation is still the watchdog's)
    if (n->scratch) { gpuCheck(cudaFree(n->scratch)); n->scratch = NULL; n->scratch_floats = 0; }
    for (int i = 0; i < n->nretired; i++) { gpuCheck(cudaFree(n->retired[i])); }
    n->nretired = 0;
    n->retired_bytes = 0;
    gpuCheck(ncclCommDestroy(n->comm));
    gpuCheck(cudaEventDestroy(n->ready));
    gpuCheck(cudaStreamDestroy(n->stream));
    n->comm = NULL;
}

// Before an operation on the communication stream: that stream waits for what the compute stream has been given so
// far, and the watchdog registers the operation (comm_nccl__issue).
static CommNcclOp* comm_nccl__begin(CommNccl* n, const KernelCtx* ctx, int op, size_t count, const char* unit) {
    gpuCheck(cudaEventRecord(n->ready, ctx->stream));
    gpuCheck(cudaStreamWaitEvent(n->stream, n->ready, 0)); // waits for this record, whatever later ones do
    return comm_nccl__issue(n, op, count, unit);
}

// After it: the watchdog's event, and req's (which comm_nccl_wait / comm_nccl_test take).
static void comm_nccl__end(CommNccl* n, CommNcclOp* o, CommNcclReq* req) {
    comm_nccl__issued(o, n->stream);
    gpuCheck(cudaEventCreateWithFlags(&req->done, cudaEventDisableTiming));
    gpuCheck(cudaEventRecord(req->done, n->stream));
}

// The compute stream waits for the collective (no CPU wait); the request is then free.
static void comm_nccl_wait(const KernelCtx* ctx, CommNcclReq* req) {
    if (!req->done) { return; }
    gpuCheck(cudaStreamWaitEvent(ctx->stream, req->done, 0));
    gpuCheck(cudaEventDestroy(req->done));
    req->done = NULL;
}

// The sums below, over elements of type t (es bytes each).
static void comm_nccl__iallreduce(CommNccl* n, const KernelCtx* ctx, void* buf, size_t count, ncclDataType_t t, CommNcclReq* req) {
    CommNcclOp* o = comm_nccl__begin(n, ctx, COMM_OP_ALLREDUCE, count, t == ncclFloat32 ? "floats" : "bf16");
    gpuCheck(ncclAllReduce(buf, buf, count, t, ncclSum, n->comm, n->stream));
    comm_nccl__end(n, o, req);
}
static void comm_nccl__ireduce_scatterv(CommNccl* n, const KernelCtx* ctx, const void* send, void* recv, const size_t* counts,
                                        ncclDataType_t t, size_t es, CommNcclReq* req) {
    size_t total = 0;
    for (int r = 0; r < n->size; r++) { total += counts[r]; }
    CommNcclOp* o = comm_nccl__begin(n, ctx, COMM_OP_REDUCE_SCATTER, total, t == ncclFloat32 ? "floats" : "bf16");
    gpuCheck(ncclGroupStart());
    size_t off = 0;
    for (int r = 0; r < n->size; r++) {
        const char* part = (const char*)send + off * es;
        if (counts[r] > 0) { gpuCheck(ncclReduce(part, r == n->rank ? recv : (void*)part, counts[r], t, ncclSum, r, n->comm, n->stream)); }
        off += counts[r];
    }
    gpuCheck(ncclGroupEnd());
    comm_nccl__end(n, o, req);
}

// buf (count floats) summed over the group, in place.
static void comm_nccl_iallreduce_sum_f32(CommNccl* n, const KernelCtx* ctx, float* buf, size_t count, CommNcclReq* req) {
    comm_nccl__iallreduce(n, ctx, buf, count, ncclFloat32, req);
}

// send holds counts[0] + ... + counts[size-1] floats; rank r's part (from the sum of the counts before r) summed over
// the group lands in rank r's recv (which may be its own part of send: NCCL reduces in place then).
static void comm_nccl_ireduce_scatterv_sum_f32(CommNccl* n, const KernelCtx* ctx, const float* send, float* recv,
                                               const size_t* counts, CommNcclReq* req) {
    comm_nccl__ireduce_scatterv(n, ctx, send, recv, counts, ncclFloat32, sizeof(float), req);
}

// --grad-compress bf16 on the device buffers: the gradients rounded to bf16 (precision.h's bf16_bits, as the MPI path
// does on the host) into a device buffer of bf16 bit patterns, summed there in bf16 (NCCL adds two bf16 values as
// floats and rounds the sum to nearest even, as comm.h's MPI operation does), and widened back on the wait.
__global__ void comm_nccl__to_bf16(uint16_t* dst, const float* src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { dst[i] = bf16_bits(src[i]); }
}
__global__ void comm_nccl__from_bf16(float* dst, const uint16_t* src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = precision__float((uint32_t)src[i] << 16);
    }
}

// bf16 (count values, device) = src (count floats, device) rounded, on the compute stream.
static void comm_nccl_round_bf16(const KernelCtx* ctx, uint16_t* bf16, const float* src, size_t count) {
    if (count == 0) { return; }
    comm_nccl__to_bf16<<<kernels__blocks(count, 256), 256, 0, ctx->stream>>>(bf16, src, count);
    launchCheck();
}

// dst (count floats, device) = bf16 (count values, device) widened, on the compute stream.
static void comm_nccl_widen_bf16(const KernelCtx* ctx, float* dst, const uint16_t* bf16, size_t count) {
    if (count == 0) { return; }
    comm_nccl__from_bf16<<<kernels__blocks(count, 256), 256, 0, ctx->stream>>>(dst, bf16, count);
    launchCheck();
}

// buf (count bf16 values) summed over the group in bf16, in place.
static void comm_nccl_iallreduce_sum_bf16(CommNccl* n, const KernelCtx* ctx, uint16_t* buf, size_t count, CommNcclReq* req) {
    comm_nccl__iallreduce(n, ctx, buf, count, ncclBfloat16, req);
}

// The bf16 form of comm_nccl_ireduce_scatterv_sum_f32, in place: rank r's part of buf receives its sum.
static void comm_nccl_ireduce_scatterv_sum_bf16(CommNccl* n, const KernelCtx* ctx, uint16_t* buf, const size_t* counts, CommNcclReq* req) {
    size_t off = 0;
    for (int r = 0; r < n->rank; r++) { off += counts[r]; }
    comm_nccl__ireduce_scatterv(n, ctx, buf, buf + off, counts, ncclBfloat16, sizeof(uint16_t), req);
}

// Rank r's counts[r] bytes at its `mine` land at dest + (the sum of the counts before r) on every rank.
static void comm_nccl_iallgatherv_bytes(CommNccl* n, const KernelCtx* ctx, const void* mine, void* dest, const size_t* counts,
                                        CommNcclReq* req) {
    size_t total = 0;
    for (int r = 0; r < n->size; r++) { total += counts[r]; }
    CommNcclOp* o = comm_nccl__begin(n, ctx, COMM_OP_ALLGATHER, total, "bytes");
    gpuCheck(ncclGroupStart());
    size_t off = 0;
    for (int r = 0; r < n->size; r++) {
        char* at = (char*)dest + off;
        if (counts[r] > 0) {
            gpuCheck(ncclBroadcast(r == n->rank ? mine : at, at, counts[r], ncclUint8, r, n->comm, n->stream));
        }
        off += counts[r];
    }
    gpuCheck(ncclGroupEnd());
    comm_nccl__end(n, o, req);
}

// buf holds size equal parts of `bytes` each; rank r's part (already in place at buf + r * bytes) reaches every rank.
static void comm_nccl_iallgather_inplace_bytes(CommNccl* n, const KernelCtx* ctx, void* buf, size_t bytes, CommNcclReq* req) {
    CommNcclOp* o = comm_nccl__begin(n, ctx, COMM_OP_ALLGATHER, (size_t)n->size * bytes, "bytes");
    gpuCheck(ncclAllGather((char*)buf + (size_t)n->rank * bytes, buf, bytes, ncclUint8, n->comm, n->stream));
    comm_nccl__end(n, o, req);
}

// --- the tensor-parallel group's collectives (tp.h), on the compute stream -----------------------------------
// They sit on the critical path (the next kernel needs the result), so they run on the compute stream itself:
// ordered with the kernels around them, nothing to wait for. floatX tensors are reduced in fp32, as the MPI path
// does (converted on the device into scratch, reduced, rounded once), so both give the same bits on 2 ranks.

// Grown at least twofold, and the outgrown buffer kept until the communicator ends: cudaFree waits for the whole
// device, which in the middle of a step could wait for a pipeline send that waits for a peer that waits for this rank.
static float* comm_nccl__scratch(CommNccl* n, size_t floats) {
    if (floats > n->scratch_floats) {
        if (n->scratch) {
            if (n->nretired == (int)(sizeof(n->retired) / sizeof(n->retired[0]))) { fatal("internal: NCCL scratch grown too often"); }
            n->retired[n->nretired++] = n->scratch;
            n->retired_bytes += n->scratch_floats * sizeof(float);
        }
        if (floats < 2 * n->scratch_floats) { floats = 2 * n->scratch_floats; }
        gpuCheck(cudaMalloc((void**)&n->scratch, floats * sizeof(float)));
        n->scratch_floats = floats;
    }
    return n->scratch;
}

// Makes the scratch hold `floats` now, at start-up: the tensor-parallel collectives' largest is a (B, T, C)
// activation, and a cudaMalloc in the first forward would stall the device's streams mid-step.
static void comm_nccl_reserve(CommNccl* n, size_t floats) { (void)comm_nccl__scratch(n, floats); }

// The device bytes the communicator's scratch holds (with outgrown buffers not freed yet), for the memory table.
static size_t comm_nccl_device_bytes(const CommNccl* n) { return n->scratch_floats * sizeof(float) + n->retired_bytes; }

// buf (count floatX) summed over the group, in place.
static void comm_nccl_allreduce_x(CommNccl* n, const KernelCtx* ctx, floatX* buf, size_t count) {
    float* f = comm_nccl__scratch(n, count);
    dev_x_to_f32(ctx, f, buf, count);
    CommNcclOp* o = comm_nccl__issue(n, COMM_OP_ALLREDUCE, count, "floats");
    gpuCheck(ncclAllReduce(f, f, count, ncclFloat32, ncclSum, n->comm, ctx->stream));
    comm_nccl__issued(o, ctx->stream);
    dev_f32_to_x(ctx, buf, f, count);
}

// buf (count floats) summed over the group, in place.
static void comm_nccl_allreduce_f32(CommNccl* n, const KernelCtx* ctx, float* buf, size_t count) {
    CommNcclOp* o = comm_nccl__issue(n, COMM_OP_ALLREDUCE, count, "floats");
    gpuCheck(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, n->comm, ctx->stream));
    comm_nccl__issued(o, ctx->stream);
}

// full (size x count floatX) = every rank's part (count floatX), in rank order.
static void comm_nccl_allgather_x(CommNccl* n, const KernelCtx* ctx, floatX* full, const floatX* part, size_t count) {
    float* f = comm_nccl__scratch(n, (size_t)n->size * count);
    dev_x_to_f32(ctx, f + (size_t)n->rank * count, part, count);
    CommNcclOp* o = comm_nccl__issue(n, COMM_OP_ALLGATHER, (size_t)n->size * count, "floats");
    gpuCheck(ncclAllGather(f + (size_t)n->rank * count, f, count, ncclFloat32, n->comm, ctx->stream)); // in place
    comm_nccl__issued(o, ctx->stream);
    dev_f32_to_x(ctx, full, f, (size_t)n->size * count);
}

// part (count floatX) = this rank's count elements of the sum over ranks of full (size x count floatX).
static void comm_nccl_reduce_scatter_x(CommNccl* n, const KernelCtx* ctx, floatX* part, const floatX* full, size_t count) {
    float* f = comm_nccl__scratch(n, (size_t)n->size * count);
    dev_x_to_f32(ctx, f, full, (size_t)n->size * count);
    CommNcclOp* o = comm_nccl__issue(n, COMM_OP_REDUCE_SCATTER, (size_t)n->size * count, "floats");
    gpuCheck(ncclReduceScatter(f, f + (size_t)n->rank * count, count, ncclFloat32, ncclSum, n->comm, ctx->stream)); // in place
    comm_nccl__issued(o, ctx->stream);
    dev_f32_to_x(ctx, part, f + (size_t)n->rank * count, count);
}

// --- point to point between the two ranks of a pair (comm_nccl_init_pair): the pipeline's messages --------------
// NCCL matches the sends and receives between two ranks in the order they are posted, and a send holds its stream
// (so every later operation on it) until the peer has posted the matching receive. A pair per direction of each
// link, each with its own stream, keeps that wait to the later messages of the same direction, which the peer
// receives in the order they were sent anyway (tests/test_pp checks every schedule for that): the stages then
// behave as with MPI's non-blocking sends. (Were the messages of both directions on one communicator, a send waiting
// for its receive could hold up a receive the peer needs first: Megatron-LM pairs them in ncclGroupStart/End
// instead.) A waiting send occupies a few SMs, never all, so the compute stream goes on; streams must be able to run
// at once (CUDA_DEVICE_MAX_CONNECTIONS = 1 would put them in one queue behind each other).

// Sends bytes of device memory at buf to the other rank of pair n, once the compute stream has run what it has been
// given so far (what wrote buf); returns at once. req finishes when the send has (comm_nccl_test).
static void comm_nccl_send(CommNccl* n, const KernelCtx* ctx, const void* buf, size_t bytes, CommNcclReq* req) {
    CommNcclOp* o = comm_nccl__begin(n, ctx, COMM_OP_SEND, bytes, "bytes");
    gpuCheck(ncclSend(buf, bytes, ncclUint8, 1 - n->rank, n->comm, n->stream));
    comm_nccl__end(n, o, req);
}

// Starts receiving bytes from the other rank of pair n into device memory at buf, after the mark `after` (recorded
// where buf became free; none: at once); comm_nccl_wait makes the compute stream wait for it.
static void comm_nccl_irecv(CommNccl* n, void* buf, size_t bytes, const CommNcclReq* after, CommNcclReq* req) {
    if (after && after->done) { gpuCheck(cudaStreamWaitEvent(n->stream, after->done, 0)); }
    CommNcclOp* o = comm_nccl__issue(n, COMM_OP_RECV, bytes, "bytes"); // (no __begin: it waits on `after` only)
    gpuCheck(ncclRecv(buf, bytes, ncclUint8, 1 - n->rank, n->comm, n->stream));
    comm_nccl__end(n, o, req);
}

// Connects pair n for its messages, first (rank 0) to second: one byte from `first` (dev_byte, device memory) to
// `second` (into its dev_byte), waited for. NCCL connects two ranks for point-to-point on their first send and receive,
// and the host of each waits inside that call until the other has made its own. A pipeline stage posts a link's first
// receive ahead of its compute (pp_post_next), while its peer's host may be waiting for data this stage has yet to
// send (GPipe's first backward, for one): each would wait for the other. Both ranks of a pair call this at one point
// of start-up instead (pipeline_use_nccl, in the pairs' global order), so no message of a step is a link's first.
static void comm_nccl_connect_pair(CommNccl* n, void* dev_byte) {
    if (n->rank == 0) { gpuCheck(ncclSend(dev_byte, 1, ncclUint8, 1, n->comm, n->stream)); }
    else { gpuCheck(ncclRecv(dev_byte, 1, ncclUint8, 0, n->comm, n->stream)); }
    gpuCheck(cudaStreamSynchronize(n->stream));
}

// Records on the compute stream where it is now (a mark for comm_nccl_irecv's `after`; recorded again each call).
static void comm_nccl_mark(const KernelCtx* ctx, CommNcclReq* mark) {
    if (!mark->done) { gpuCheck(cudaEventCreateWithFlags(&mark->done, cudaEventDisableTiming)); }
    gpuCheck(cudaEventRecord(mark->done, ctx->stream));
}

// 1 when the operation (or mark) has finished, or none is held (the request is then free); 0 while it runs. The
// host asks; nothing waits.
static int comm_nccl_test(CommNcclReq* req) {
    if (!req->done) { return 1; }
    cudaError_t e = cudaEventQuery(req->done);
    if (e == cudaErrorNotReady) { return 0; }
    gpuCheck(e);
    gpuCheck(cudaEventDestroy(req->done));
    req->done = NULL;
    return 1;
}

// Lets go of a request or mark without waiting (its event is destroyed; the work itself still runs).
static void comm_nccl_req_free(CommNcclReq* req) {
    if (req->done) { gpuCheck(cudaEventDestroy(req->done)); req->done = NULL; }
}

#else // no NCCL in this build: the type exists so zero.h compiles once; nothing here is ever called

typedef struct CommNccl { int unused; } CommNccl;
typedef struct { int unused; } CommNcclReq;
static int comm_nccl_available(void) { return 0; }
static int comm_nccl_launch_order(char* why, size_t cap) { snprintf(why, cap, "no NCCL"); return 0; }
static int comm_nccl_joined(const CommNccl* n) { (void)n; return 0; }
static void comm_nccl__none(void) { fatal("internal: an NCCL collective in a build without NCCL"); }
static void comm_nccl_init(CommNccl* n, CommGroup* g) { (void)n; (void)g; comm_nccl__none(); }
static void comm_nccl_free(CommNccl* n) { (void)n; }
static void comm_nccl_init_pair(CommNccl* n, CommGroup* g, int first, int second) {
    (void)n; (void)g; (void)first; (void)second; comm_nccl__none();
}
static int comm_nccl_shared_device(CommGroup* g, const KernelCtx* ctx, int* a, int* b) {
    (void)g; (void)ctx; (void)a; (void)b; comm_nccl__none(); return 0;
}
static void comm_nccl_send(CommNccl* n, const KernelCtx* ctx, const void* buf, size_t bytes, CommNcclReq* req) {
    (void)n; (void)ctx; (void)buf; (void)bytes; (void)req; comm_nccl__none();
}
static void comm_nccl_irecv(CommNccl* n, void* buf, size_t bytes, const CommNcclReq* after, CommNcclReq* req) {
    (void)n; (void)buf; (void)bytes; (void)after; (void)req; comm_nccl__none();
}
static void comm_nccl_mark(const KernelCtx* ctx, CommNcclReq* mark) { (void)ctx; (void)mark; comm_nccl__none(); }
static void comm_nccl_connect_pair(CommNccl* n, void* dev_byte) { (void)n; (void)dev_byte; comm_nccl__none(); }
static int comm_nccl_test(CommNcclReq* req) { (void)req; return 1; }
static void comm_nccl_req_free(CommNcclReq* req) { (void)req; }
static void comm_nccl_wait(const KernelCtx* ctx, CommNcclReq* req) { (void)ctx; (void)req; }
static void comm_nccl_iallreduce_sum_f32(CommNccl* n, const KernelCtx* ctx, float* buf, size_t count, CommNcclReq* req) {
    (void)n; (void)ctx; (void)buf; (void)count; (void)req; comm_nccl__none();
}
static void comm_nccl_ireduce_scatterv_sum_f32(CommNccl* n, const KernelCtx* ctx, const float* send, float* recv,
                                               const size_t* counts, CommNcclReq* req) {
    (void)n; (void)ctx; (void)send; (void)recv; (void)counts; (void)req; comm_nccl__none();
}
static void comm_nccl_iallgatherv_bytes(CommNccl* n, const KernelCtx* ctx, const void* mine, void* dest, const size_t* counts,
                                        CommNcclReq* req) {
    (void)n; (void)ctx; (void)mine; (void)dest; (void)counts; (void)req; comm_nccl__none();
}
static void comm_nccl_iallgather_inplace_bytes(CommNccl* n, const KernelCtx* ctx, void* buf, size_t bytes, CommNcclReq* req) {
    (void)n; (void)ctx; (void)buf; (void)bytes; (void)req; comm_nccl__none();
}

static void comm_nccl_round_bf16(const KernelCtx* ctx, uint16_t* bf16, const float* src, size_t count) {
    (void)ctx; (void)bf16; (void)src; (void)count; comm_nccl__none();
}
static void comm_nccl_widen_bf16(const KernelCtx* ctx, float* dst, const uint16_t* bf16, size_t count) {
    (void)ctx; (void)dst; (void)bf16; (void)count; comm_nccl__none();
}
static void comm_nccl_iallreduce_sum_bf16(CommNccl* n, const KernelCtx* ctx, uint16_t* buf, size_t count, CommNcclReq* req) {
    (void)n; (void)ctx; (void)buf; (void)count; (void)req; comm_nccl__none();
}
static void comm_nccl_ireduce_scatterv_sum_bf16(CommNccl* n, const KernelCtx* ctx, uint16_t* buf, const size_t* counts, CommNcclReq* req) {
    (void)n; (void)ctx; (void)buf; (void)counts; (void)req; comm_nccl__none();
}
static void comm_nccl_reserve(CommNccl* n, size_t floats) { (void)n; (void)floats; comm_nccl__none(); }
static size_t comm_nccl_device_bytes(const CommNccl* n) { (void)n; return 0; }
static void comm_nccl_allreduce_x(CommNccl* n, const KernelCtx* ctx, floatX* buf, size_t count) {
    (void)n; (void)ctx; (void)buf; (void)count; comm_nccl__none();
}
static void comm_nccl_allreduce_f32(CommNccl* n, const KernelCtx* ctx, float* buf, size_t count) {
    (void)n; (void)ctx; (void)buf; (void)count; comm_nccl__none();
}
static void comm_nccl_allgather_x(CommNccl* n, const KernelCtx* ctx, floatX* full, const floatX* part, size_t count) {
    (void)n; (void)ctx; (void)full; (void)part; (void)count; comm_nccl__none();
}
static void comm_nccl_reduce_scatter_x(CommNccl* n, const KernelCtx* ctx, floatX* part, const floatX* full, size_t count) {
    (void)n; (void)ctx; (void)part; (void)full; (void)count; comm_nccl__none();
}

#endif
#endif // COMM_NCCL_H
