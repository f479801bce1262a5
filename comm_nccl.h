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
on one GPU, which is why the tests of several processes on one GPU use --comm mpi).

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
(zero.h) keeps its host path over MPI. What this does not cover yet: the collective timeout monitor (a hung NCCL
peer blocks the next device synchronisation; NCCL_TIMEOUT / the job scheduler end it).
Only static functions: include after comm.h and the kernels header.
*/
#ifndef COMM_NCCL_H
#define COMM_NCCL_H

#if defined(KERNELS_CUDA) && defined(USE_NCCL)
#include <nccl.h>

static const char* kernels__status(ncclResult_t r) { return r == ncclSuccess ? NULL : ncclGetErrorString(r); }

#define COMM_NCCL_TAG_ID 24 // a pair's unique id, from its first rank to its second (MPI, the group's communicator)

typedef struct CommNccl {
    ncclComm_t comm;
    cudaStream_t stream; // the communication stream
    cudaEvent_t ready;   // recorded on the compute stream before each collective (reused: a wait takes the latest record)
    int rank, size;
    float* scratch;      // the tensor-parallel collectives' fp32 device copy of a floatX tensor (grown on demand)
    size_t scratch_floats;
    float* retired[40];  // outgrown scratch buffers, freed with the communicator (see comm_nccl__scratch)
    int nretired;
} CommNccl;

// A started collective: the event recorded on the communication stream after it (NULL: none in flight).
typedef struct { cudaEvent_t done; } CommNcclReq;

static int comm_nccl_available(void) { return 1; }
static int comm_nccl_joined(const CommNccl* n) { return n->comm != NULL; }

static void comm_nccl__join(CommNccl* n, ncclUniqueId id, int rank, int size) {
    n->rank = rank;
    n->size = size;
    gpuCheck(ncclCommInitRank(&n->comm, size, id, rank));
    gpuCheck(cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    gpuCheck(cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
}

// Joins the NCCL communicator of group g (collective over g's MPI communicator).
static void comm_nccl_init(CommNccl* n, CommGroup* g) {
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (g->rank == 0) { gpuCheck(ncclGetUniqueId(&id)); }
    comm_broadcast(g, &id, sizeof(id), 0);
    comm_nccl__join(n, id, g->rank, g->size);
}

// Joins the communicator of two members of g, `first` (its rank 0) and `second`; only those two call it.
static void comm_nccl_init_pair(CommNccl* n, CommGroup* g, int first, int second) {
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (g->rank == first) {
        gpuCheck(ncclGetUniqueId(&id));
        comm_send(g, &id, sizeof(id), second, COMM_NCCL_TAG_ID);
    } else {
        comm_recv(g, &id, sizeof(id), first, COMM_NCCL_TAG_ID);
    }
    comm_nccl__join(n, id, g->rank == first ? 0 : 1, 2);
}

// Whether two members of g use the same GPU, which NCCL refuses in one communicator (collective over g): every member
// names its device by host name and PCI bus id, and all compare the names. The first such pair of group ranks goes
// to *a < *b.
static int comm_nccl_shared_device(CommGroup* g, const KernelCtx* ctx, int* a, int* b) {
    enum { NAME = 160 };
    char mine[NAME], bus[64], host[80];
    memset(mine, 0, sizeof(mine));
    memset(host, 0, sizeof(host));
    gpuCheck(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), ctx->device));
    gethostname(host, sizeof(host) - 1);
    snprintf(mine, sizeof(mine), "%s/%s", host, bus);
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
    if (n->scratch) { gpuCheck(cudaFree(n->scratch)); n->scratch = NULL; n->scratch_floats = 0; }
    for (int i = 0; i < n->nretired; i++) { gpuCheck(cudaFree(n->retired[i])); }
    n->nretired = 0;
    gpuCheck(ncclCommDestroy(n->comm));
    gpuCheck(cudaEventDestroy(n->ready));
    gpuCheck(cudaStreamDestroy(n->stream));
    n->comm = NULL;
}

// The communication stream waits for what the compute stream has been given so far.
static void comm_nccl__begin(CommNccl* n, const KernelCtx* ctx) {
    gpuCheck(cudaEventRecord(n->ready, ctx->stream));
    gpuCheck(cudaStreamWaitEvent(n->stream, n->ready, 0)); // waits for this record, whatever later ones do
}

static void comm_nccl__end(CommNccl* n, CommNcclReq* req) {
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
    comm_nccl__begin(n, ctx);
    gpuCheck(ncclAllReduce(buf, buf, count, t, ncclSum, n->comm, n->stream));
    comm_nccl__end(n, req);
}
static void comm_nccl__ireduce_scatterv(CommNccl* n, const KernelCtx* ctx, const void* send, void* recv, const size_t* counts,
                                        ncclDataType_t t, size_t es, CommNcclReq* req) {
    comm_nccl__begin(n, ctx);
    gpuCheck(ncclGroupStart());
    size_t off = 0;
    for (int r = 0; r < n->size; r++) {
        const char* part = (const char*)send + off * es;
        if (counts[r] > 0) { gpuCheck(ncclReduce(part, r == n->rank ? recv : (void*)part, counts[r], t, ncclSum, r, n->comm, n->stream)); }
        off += counts[r];
    }
    gpuCheck(ncclGroupEnd());
    comm_nccl__end(n, req);
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
    comm_nccl__begin(n, ctx);
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
    comm_nccl__end(n, req);
}

// buf holds size equal parts of `bytes` each; rank r's part (already in place at buf + r * bytes) reaches every rank.
static void comm_nccl_iallgather_inplace_bytes(CommNccl* n, const KernelCtx* ctx, void* buf, size_t bytes, CommNcclReq* req) {
    comm_nccl__begin(n, ctx);
    gpuCheck(ncclAllGather((char*)buf + (size_t)n->rank * bytes, buf, bytes, ncclUint8, n->comm, n->stream));
    comm_nccl__end(n, req);
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
        }
        if (floats < 2 * n->scratch_floats) { floats = 2 * n->scratch_floats; }
        gpuCheck(cudaMalloc((void**)&n->scratch, floats * sizeof(float)));
        n->scratch_floats = floats;
    }
    return n->scratch;
}

// buf (count floatX) summed over the group, in place.
static void comm_nccl_allreduce_x(CommNccl* n, const KernelCtx* ctx, floatX* buf, size_t count) {
    float* f = comm_nccl__scratch(n, count);
    dev_x_to_f32(ctx, f, buf, count);
    gpuCheck(ncclAllReduce(f, f, count, ncclFloat32, ncclSum, n->comm, ctx->stream));
    dev_f32_to_x(ctx, buf, f, count);
}

// buf (count floats) summed over the group, in place.
static void comm_nccl_allreduce_f32(CommNccl* n, const KernelCtx* ctx, float* buf, size_t count) {
    gpuCheck(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, n->comm, ctx->stream));
}

// full (size x count floatX) = every rank's part (count floatX), in rank order.
static void comm_nccl_allgather_x(CommNccl* n, const KernelCtx* ctx, floatX* full, const floatX* part, size_t count) {
    float* f = comm_nccl__scratch(n, (size_t)n->size * count);
    dev_x_to_f32(ctx, f + (size_t)n->rank * count, part, count);
    gpuCheck(ncclAllGather(f + (size_t)n->rank * count, f, count, ncclFloat32, n->comm, ctx->stream)); // in place
    dev_f32_to_x(ctx, full, f, (size_t)n->size * count);
}

// part (count floatX) = this rank's count elements of the sum over ranks of full (size x count floatX).
static void comm_nccl_reduce_scatter_x(CommNccl* n, const KernelCtx* ctx, floatX* part, const floatX* full, size_t count) {
    float* f = comm_nccl__scratch(n, (size_t)n->size * count);
    dev_x_to_f32(ctx, f, full, (size_t)n->size * count);
    gpuCheck(ncclReduceScatter(f, f + (size_t)n->rank * count, count, ncclFloat32, ncclSum, n->comm, ctx->stream)); // in place
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
    comm_nccl__begin(n, ctx);
    gpuCheck(ncclSend(buf, bytes, ncclUint8, 1 - n->rank, n->comm, n->stream));
    comm_nccl__end(n, req);
}

// Starts receiving bytes from the other rank of pair n into device memory at buf, after the mark `after` (recorded
// where buf became free; none: at once); comm_nccl_wait makes the compute stream wait for it.
static void comm_nccl_irecv(CommNccl* n, void* buf, size_t bytes, const CommNcclReq* after, CommNcclReq* req) {
    if (after && after->done) { gpuCheck(cudaStreamWaitEvent(n->stream, after->done, 0)); }
    gpuCheck(ncclRecv(buf, bytes, ncclUint8, 1 - n->rank, n->comm, n->stream));
    comm_nccl__end(n, req);
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
