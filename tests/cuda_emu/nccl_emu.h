/*
tests/cuda_emu/nccl_emu.h: NCCL's collectives and point-to-point calls over MPI, for the CPU emulation of the CUDA
backend (cuda_emu.h), so that --comm nccl runs with several ranks on one machine without GPUs (real NCCL needs one
GPU per rank).

Sums are MPI_SUM, and for ncclBfloat16 an MPI operation that adds two bf16 values as floats and rounds the sum to
bf16 (nearest even), as NCCL's bf16 reduction does. A communicator is an MPI communicator over its members only
(MPI_Comm_create_group), so a communicator of two ranks (the pipeline's links) is made by those two alone, as NCCL's
is. The unique id names the world rank that made it,
which must be the communicator's rank 0: every other member sends it a join message {id, rank, world rank}, and it
answers with the members in rank order (a join meant for another communicator it is still making is kept for that
one). Collectives between ncclGroupStart and ncclGroupEnd are queued and run at the end in the order given, as the
ranks all issue the same sequence. Buffers must be device memory with the extents the counts imply; in-place forms
are recognised as NCCL defines them (recvbuff == sendbuff; the all-gather's sendbuff == recvbuff + rank * count).

Point to point: ncclSend runs at its call, after the work queued before it on its stream (which has made the data),
as a non-blocking MPI send of a copy, so the host goes on as it does with a GPU; ncclRecv is queued on its stream
like a kernel and receives when that stream's work runs, that is when some later work or the host needs it (a stream
that waits on an event recorded after it, a synchronisation). A receive whose result is used without such a wait
computes with stale memory here, as on a GPU. The first send and receive between two ranks also wait for each other on
the host, as NCCL's lazy connection makes them (nccl_emu_connect). What a GPU adds and this cannot show: a send
occupies its stream until the peer posts the matching receive (the caller gives each direction its own communicator
and stream for that). Its buffer is read until then, so a copy or memset into it must follow the send's completion
(cuda_emu.h: write_check stops one that does not).
Like NCCL, ncclCommInitRank refuses two members on one GPU of one host (ncclInvalidUsage, "Duplicate GPU detected"),
with NCCL's notion of a host (NCCL_HOSTID, else the host name and boot id) and NCCL 2.30's NCCL_MULTI_RANK_GPU_ENABLE
(CUDA_EMU_NCCL_VERSION sets the version played; the header's by default).
A second communicator in one process needs NCCL_LAUNCH_ORDER_IMPLICIT=1 (NCCL's rule for several communicators in
flight on one device; a GPU shows its absence only as a rare hang): ncclCommInitRank fails without it.
*/
#ifndef NCCL_EMU_H
#define NCCL_EMU_H

#include <nccl.h>
#include <mpi.h>
#include "precision.h" // defines: round_bf16, bf16_bits (NCCL's bf16 sums below round the same way)

struct ncclComm {
    MPI_Comm comm;
    int rank, size;
    std::vector<std::pair<MPI_Request, std::vector<char>*>> sends; // point-to-point sends in flight, with their copies
    std::vector<char> send_connected, recv_connected;              // per peer: the first send / receive has been made
};

namespace emu {

static int g_nccl_group_depth = 0;
static std::vector<std::function<void()>> g_nccl_queue;

static MPI_Datatype nccl_mpi_type(ncclDataType_t t, size_t* bytes) {
    switch (t) {
    case ncclFloat32: *bytes = 4; return MPI_FLOAT;
    case ncclUint8: *bytes = 1; return MPI_BYTE;
    case ncclInt32: *bytes = 4; return MPI_INT;
    case ncclBfloat16: *bytes = 2; return MPI_UINT16_T;
    default: fail("NCCL: data type %d is not emulated", (int)t);
    }
    return MPI_BYTE;
}

// bf16 sums as NCCL computes them: the two values as floats, the sum rounded to bf16 (nearest even; NaN stays NaN).
static void nccl_bf16_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
    (void)type;
    const uint16_t* a = (const uint16_t*)in;
    uint16_t* b = (uint16_t*)inout;
    for (int i = 0; i < *len; i++) {
        b[i] = bf16_bits(precision__float((uint32_t)a[i] << 16) + precision__float((uint32_t)b[i] << 16));
    }
}
// The MPI operation of an NCCL sum over type t.
static MPI_Op nccl_mpi_sum(ncclDataType_t t) {
    static MPI_Op bf16 = MPI_OP_NULL;
    if (t != ncclBfloat16) { return MPI_SUM; }
    if (bf16 == MPI_OP_NULL) { MPI_Op_create(nccl_bf16_sum, 1, &bf16); }
    return bf16;
}

// Runs (or, inside a group, queues) a collective after the work queued before it on its stream.
static void nccl_run(cudaStream_t s, std::function<void()> f) {
    stream_run_all(stream_of(s));
    if (g_nccl_group_depth > 0) { g_nccl_queue.push_back(f); }
    else { f(); }
}

static void nccl_check_buf(const void* p, size_t bytes, const char* what) {
    if (bytes) { mem_check(p, bytes, MEM_DEVICE, what); }
}

// Finishes the sends of c that have arrived (all of them, waiting, when all is set).
static void nccl_reap_sends(ncclComm* c, int all) {
    auto& v = c->sends;
    for (size_t i = 0; i < v.size();) {
        int done = 0;
        if (all) { MPI_Wait(&v[i].first, MPI_STATUS_IGNORE); done = 1; }
        else { MPI_Test(&v[i].first, &done, MPI_STATUS_IGNORE); }
        if (done) { delete v[i].second; v.erase(v.begin() + (long)i); }
        else { i++; }
    }
}

// Making a communicator: the id's bytes 0-15 are random, 16-19 the world rank of its maker.
enum { NCCL_TAG_JOIN = 30001, NCCL_TAG_MEMBERS = 30002, NCCL_TAG_CREATE = 30003 };
struct NcclJoin { char id[16]; int rank, world; };
static std::vector<NcclJoin> g_nccl_early_joins; // joins that reached a maker while it made another communicator
static int g_nccl_live = 0; // this process's communicators (its device's)
static char g_nccl_last_error[512] = ""; // ncclGetLastError's message

// The NCCL version this emulation plays: its header's, or CUDA_EMU_NCCL_VERSION (e.g. 23000, for the rules of 2.30)
static int nccl_version(void) {
    const char* e = getenv("CUDA_EMU_NCCL_VERSION");
    return e && atoi(e) > 0 ? atoi(e) : NCCL_VERSION_CODE;
}

// NCCL's refusal of two ranks on one GPU of one host (its init's "Duplicate GPU detected"; from 2.30 "Multiple Ranks
// are using the same GPU", allowed by NCCL_MULTI_RANK_GPU_ENABLE). A host is NCCL_HOSTID when set, else the host
// name and the kernel's boot id, as NCCL's getHostHash has it; a GPU its PCI bus id (cuda_emu.h: each process its
// own, unless CUDA_EMU_BUS_ID names one for all). Collective over the new communicator c; 0 when NCCL would refuse.
static int nccl_devices_distinct(ncclComm* c) {
    struct Where { char host[1100]; char bus[64]; } mine;
    memset(&mine, 0, sizeof(mine));
    const char* id = getenv("NCCL_HOSTID");
    if (id) { snprintf(mine.host, sizeof(mine.host), "%s", id); }
    else {
        gethostname(mine.host, 1023);
        FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
        char boot[64] = "";
        if (f) { if (fscanf(f, "%63s", boot) != 1) { boot[0] = 0; } fclose(f); }
        strncat(mine.host, boot, sizeof(mine.host) - strlen(mine.host) - 1);
    }
    cudaDeviceGetPCIBusId(mine.bus, (int)sizeof(mine.bus), 0);
    std::vector<Where> all((size_t)c->size);
    MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all.data(), (int)sizeof(mine), MPI_BYTE, c->comm);
    const char* multi = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    if (nccl_version() >= 23000 && multi && strtol(multi, NULL, 0) != 0) { return 1; }
    for (int i = 0; i < c->size; i++) {
        for (int j = i + 1; j < c->size; j++) {
            if (strcmp(all[(size_t)i].host, all[(size_t)j].host) == 0 && strcmp(all[(size_t)i].bus, all[(size_t)j].bus) == 0) {
                snprintf(g_nccl_last_error, sizeof(g_nccl_last_error), "Duplicate GPU detected : rank %d and rank %d both on CUDA device %s",
                         j, i, all[(size_t)i].bus);
                return 0;
            }
        }
    }
    return 1;
}

} // namespace emu

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "cuda_emu: NCCL error"; }
const char* ncclGetLastError(ncclComm_t) { return emu::g_nccl_last_error; }
// CUDA_EMU_NCCL_ASYNC_ERROR=1: every communicator reports an asynchronous error (a broken connection), as NCCL's
// ncclCommGetAsyncError would, for the watchdog's test.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
    (void)comm;
    const char* e = getenv("CUDA_EMU_NCCL_ASYNC_ERROR");
    *err = e && atoi(e) ? ncclSystemError : ncclSuccess;
    return ncclSuccess;
}
ncclResult_t ncclGetVersion(int* v) { *v = emu::nccl_version(); return ncclSuccess; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    memset(id, 0, sizeof(*id));
    FILE* f = fopen("/dev/urandom", "rb");
    if (!f || fread(id->internal, 1, 16, f) != 16) { emu::fail("ncclGetUniqueId: no /dev/urandom"); }
    fclose(f);
    int world;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    memcpy(id->internal + 16, &world, sizeof(int)); // the maker (ncclCommInitRank)
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    int world, maker;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    memcpy(&maker, id.internal + 16, sizeof(int));
    if (rank < 0 || rank >= nranks) { emu::fail("ncclCommInitRank: rank %d of %d", rank, nranks); }
    // NCCL's rule for several communicators on one device ("Using multiple NCCL communicators concurrently"): their
    // kernels wait for their peers, so without an order devices can start them differently and wait for each other
    // forever; since 2.26 NCCL_LAUNCH_ORDER_IMPLICIT=1 orders them as the host issued them. A GPU shows the missing
    // setting only as a rare hang; here it fails at once.
    const char* order = getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
    if (emu::g_nccl_live > 0 && (!order || strcmp(order, "1") != 0)) {
        emu::fail("ncclCommInitRank: a second communicator on this device with NCCL_LAUNCH_ORDER_IMPLICIT '%s', not 1: the kernels "
                  "of several communicators in flight are not ordered and can deadlock", order ? order : "");
    }
    if ((rank == 0) != (world == maker)) {
        emu::fail("ncclCommInitRank: the emulation needs the id made by the communicator's rank 0 (world rank %d made it; "
                  "world rank %d joins as rank %d)", maker, world, rank);
    }
    std::vector<int> members((size_t)nranks, -1); // world ranks, in communicator rank order
    if (rank == 0) {
        members[0] = world;
        for (int got = 1; got < nranks;) {
            emu::NcclJoin j;
            auto& early = emu::g_nccl_early_joins;
            auto it = std::find_if(early.begin(), early.end(), [&](const emu::NcclJoin& e) { return memcmp(e.id, id.internal, 16) == 0; });
            if (it != early.end()) { j = *it; early.erase(it); }
            else {
                MPI_Recv(&j, (int)sizeof(j), MPI_BYTE, MPI_ANY_SOURCE, emu::NCCL_TAG_JOIN, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (memcmp(j.id, id.internal, 16) != 0) { early.push_back(j); continue; }
            }
            if (j.rank <= 0 || j.rank >= nranks || members[(size_t)j.rank] >= 0) {
                emu::fail("ncclCommInitRank: two members claim rank %d of %d (or it is out of range)", j.rank, nranks);
            }
            members[(size_t)j.rank] = j.world;
            got++;
        }
        for (int r = 1; r < nranks; r++) {
            MPI_Send(members.data(), nranks, MPI_INT, members[(size_t)r], emu::NCCL_TAG_MEMBERS, MPI_COMM_WORLD);
        }
    } else {
        emu::NcclJoin j;
        memcpy(j.id, id.internal, 16);
        j.rank = rank;
        j.world = world;
        MPI_Send(&j, (int)sizeof(j), MPI_BYTE, maker, emu::NCCL_TAG_JOIN, MPI_COMM_WORLD);
        MPI_Recv(members.data(), nranks, MPI_INT, maker, emu::NCCL_TAG_MEMBERS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (members[(size_t)rank] != world) { emu::fail("ncclCommInitRank: the maker's member list does not name this rank"); }
    MPI_Group wg, g;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, nranks, members.data(), &g);
    ncclComm* c = new ncclComm;
    MPI_Comm_create_group(MPI_COMM_WORLD, g, emu::NCCL_TAG_CREATE, &c->comm);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    if (c->size != nranks || c->rank != rank) {
        emu::fail("ncclCommInitRank: joined as rank %d of %d, asked for rank %d of %d", c->rank, c->size, rank, nranks);
    }
    if (!emu::nccl_devices_distinct(c)) {
        MPI_Comm_free(&c->comm);
        delete c;
        return ncclInvalidUsage;
    }
    *comm = c;
    emu::g_nccl_live++;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (emu::g_nccl_group_depth) { emu::fail("ncclCommDestroy inside a group"); }
    emu::g_nccl_live--;
    emu::nccl_reap_sends(comm, 1);
    MPI_Comm_free(&comm->comm);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) { emu::g_nccl_group_depth++; return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) {
    if (emu::g_nccl_group_depth == 0) { emu::fail("ncclGroupEnd without ncclGroupStart"); }
    if (--emu::g_nccl_group_depth == 0) {
        std::vector<std::function<void()>> q;
        q.swap(emu::g_nccl_queue);
        for (auto& f : q) { f(); }
        emu::mem_check_guards("an NCCL group");
    }
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm, cudaStream_t s) {
    size_t es;
    MPI_Datatype mt = emu::nccl_mpi_type(t, &es);
    if (op != ncclSum) { emu::fail("ncclAllReduce: only ncclSum is emulated"); }
    emu::nccl_check_buf(send, count * es, "ncclAllReduce: sendbuff");
    emu::nccl_check_buf(recv, count * es, "ncclAllReduce: recvbuff");
    MPI_Op mo = emu::nccl_mpi_sum(t);
    emu::nccl_run(s, [=]() { MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mt, mo, comm->comm); });
    return ncclSuccess;
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t s) {
    size_t es;
    MPI_Datatype mt = emu::nccl_mpi_type(t, &es);
    if (op != ncclSum) { emu::fail("ncclReduce: only ncclSum is emulated"); }
    if (root < 0 || root >= comm->size) { emu::fail("ncclReduce: root %d of a communicator of %d", root, comm->size); }
    emu::nccl_check_buf(send, count * es, "ncclReduce: sendbuff");
    int me = comm->rank == root;
    if (me) { emu::nccl_check_buf(recv, count * es, "ncclReduce: recvbuff"); }
    MPI_Op mo = emu::nccl_mpi_sum(t);
    emu::nccl_run(s, [=]() { MPI_Reduce(me && send == recv ? MPI_IN_PLACE : send, me ? recv : NULL, (int)count, mt, mo, root, comm->comm); });
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t s) {
    size_t es;
    MPI_Datatype mt = emu::nccl_mpi_type(t, &es);
    if (root < 0 || root >= comm->size) { emu::fail("ncclBroadcast: root %d of a communicator of %d", root, comm->size); }
    int me = comm->rank == root;
    if (me) { emu::nccl_check_buf(send, count * es, "ncclBroadcast: sendbuff"); }
    emu::nccl_check_buf(recv, count * es, "ncclBroadcast: recvbuff");
    emu::nccl_run(s, [=]() {
        if (me && send != recv) { memmove(recv, send, count * es); }
        MPI_Bcast(recv, (int)count, mt, root, comm->comm);
    });
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t s) {
    size_t es;
    MPI_Datatype mt = emu::nccl_mpi_type(t, &es);
    emu::nccl_check_buf(send, count * es, "ncclAllGather: sendbuff");
    emu::nccl_check_buf(recv, count * es * comm->size, "ncclAllGather: recvbuff");
    int in_place = (const char*)send == (const char*)recv + (size_t)comm->rank * count * es;
    emu::nccl_run(s, [=]() { MPI_Allgather(in_place ? MPI_IN_PLACE : send, (int)count, mt, recv, (int)count, mt, comm->comm); });
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t s) {
    size_t es;
    MPI_Datatype mt = emu::nccl_mpi_type(t, &es);
    if (op != ncclSum) { emu::fail("ncclReduceScatter: only ncclSum is emulated"); }
    emu::nccl_check_buf(send, count * es * comm->size, "ncclReduceScatter: sendbuff");
    emu::nccl_check_buf(recv, count * es, "ncclReduceScatter: recvbuff");
    int in_place = (const char*)recv == (const char*)send + (size_t)comm->rank * count * es;
    emu::nccl_run(s, [=]() {
        if (in_place) {
            std::vector<char> tmp(count * es);
            MPI_Reduce_scatter_block(send, tmp.data(), (int)count, mt, MPI_SUM, comm->comm);
            memcpy(recv, tmp.data(), tmp.size());
        } else {
            MPI_Reduce_scatter_block(send, recv, (int)count, mt, MPI_SUM, comm->comm);
        }
    });
    return ncclSuccess;
}

// NCCL connects two ranks for point-to-point lazily: the first send from A to B and the first receive at B from A each
// wait, on the host, inside the call, until the other has been made (the connection is set up through NCCL's bootstrap
// then). Played here by a synchronous MPI send at the first ncclSend and its receive at the first ncclRecv, on a tag
// of their own: a program whose first receive waits for a send its peer makes only later hangs here as on a GPU.
enum { NCCL_EMU_TAG_CONNECT = 1 };
static void nccl_emu_connect(ncclComm_t comm, int peer, int send) {
    std::vector<char>& done = send ? comm->send_connected : comm->recv_connected;
    if (done.empty()) { done.assign((size_t)comm->size, 0); }
    if (done[(size_t)peer]) { return; }
    char token = 0;
    if (send) { MPI_Ssend(&token, 1, MPI_BYTE, peer, NCCL_EMU_TAG_CONNECT, comm->comm); }
    else { MPI_Recv(&token, 1, MPI_BYTE, peer, NCCL_EMU_TAG_CONNECT, comm->comm, MPI_STATUS_IGNORE); }
    done[(size_t)peer] = 1;
}

// Point to point (see the header): the send at its call from a copy, the receive when its stream's work runs.
ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
    size_t es;
    emu::nccl_mpi_type(t, &es);
    if (emu::g_nccl_group_depth) { emu::fail("ncclSend inside a group is not emulated"); }
    if (peer < 0 || peer >= comm->size || peer == comm->rank) { emu::fail("ncclSend: peer %d of a communicator of %d (rank %d)", peer, comm->size, comm->rank); }
    emu::nccl_check_buf(send, count * es, "ncclSend: sendbuff");
    nccl_emu_connect(comm, peer, 1);
    emu::nccl_reap_sends(comm, 0);
    emu::nccl_run(s, [=]() {
        std::vector<char>* copy = new std::vector<char>((const char*)send, (const char*)send + count * es);
        MPI_Request r;
        MPI_Isend(copy->data(), (int)copy->size(), MPI_BYTE, peer, 0, comm->comm, &r);
        comm->sends.push_back({r, copy});
    });
    emu::pending_send(send, count * es, emu::stream_of(s)); // (a GPU reads the buffer until the peer has it)
    return ncclSuccess;
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
    size_t es;
    emu::nccl_mpi_type(t, &es);
    if (emu::g_nccl_group_depth) { emu::fail("ncclRecv inside a group is not emulated"); }
    if (peer < 0 || peer >= comm->size || peer == comm->rank) { emu::fail("ncclRecv: peer %d of a communicator of %d (rank %d)", peer, comm->size, comm->rank); }
    emu::nccl_check_buf(recv, count * es, "ncclRecv: recvbuff");
    nccl_emu_connect(comm, peer, 0);
    emu::enqueue(s, [=]() {
        MPI_Status st;
        MPI_Recv(recv, (int)(count * es), MPI_BYTE, peer, 0, comm->comm, &st);
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if ((size_t)got != count * es) { emu::fail("ncclRecv: %zu bytes expected from rank %d, %d sent", count * es, peer, got); }
    });
    return ncclSuccess;
}

} // extern "C"

#endif // NCCL_EMU_H
