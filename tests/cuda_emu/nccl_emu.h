/*
tests/cuda_emu/nccl_emu.h: NCCL's collectives over MPI, for the CPU emulation of the CUDA backend (cuda_emu.h), so
that --comm nccl runs with several ranks on one machine without GPUs (real NCCL needs one GPU per rank).

A communicator is an MPI communicator split from MPI_COMM_WORLD by the unique id, so every rank of the world must
join a communicator at the same time (true of the data-parallel groups, the only ones comm_nccl.h makes). Calls
between ncclGroupStart and ncclGroupEnd are queued and run at the end in the order given, as the ranks all issue the
same sequence. Buffers must be device memory with the extents the counts imply; in-place forms are recognised as
NCCL defines them (recvbuff == sendbuff; the all-gather's sendbuff == recvbuff + rank * count).
*/
#ifndef NCCL_EMU_H
#define NCCL_EMU_H

#include <nccl.h>
#include <mpi.h>

struct ncclComm { MPI_Comm comm; int rank, size; };

namespace emu {

static int g_nccl_group_depth = 0;
static std::vector<std::function<void()>> g_nccl_queue;

static MPI_Datatype nccl_mpi_type(ncclDataType_t t, size_t* bytes) {
    switch (t) {
    case ncclFloat32: *bytes = 4; return MPI_FLOAT;
    case ncclUint8: *bytes = 1; return MPI_BYTE;
    case ncclInt32: *bytes = 4; return MPI_INT;
    default: fail("NCCL: data type %d is not emulated", (int)t);
    }
    return MPI_BYTE;
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

} // namespace emu

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "cuda_emu: NCCL error"; }
ncclResult_t ncclGetVersion(int* v) { *v = NCCL_VERSION_CODE; return ncclSuccess; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    memset(id, 0, sizeof(*id));
    FILE* f = fopen("/dev/urandom", "rb");
    if (!f || fread(id->internal, 1, 16, f) != 16) { emu::fail("ncclGetUniqueId: no /dev/urandom"); }
    fclose(f);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    uint32_t color = 2166136261u; // FNV-1a of the id's bytes
    for (int i = 0; i < 16; i++) { color = (color ^ (unsigned char)id.internal[i]) * 16777619u; }
    ncclComm* c = new ncclComm;
    MPI_Comm_split(MPI_COMM_WORLD, (int)(color & 0x7fffffff), rank, &c->comm);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    if (c->size != nranks || c->rank != rank) {
        emu::fail("ncclCommInitRank: joined as rank %d of %d, asked for rank %d of %d", c->rank, c->size, rank, nranks);
    }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (emu::g_nccl_group_depth) { emu::fail("ncclCommDestroy inside a group"); }
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
    emu::nccl_run(s, [=]() { MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mt, MPI_SUM, comm->comm); });
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
    emu::nccl_run(s, [=]() { MPI_Reduce(me && send == recv ? MPI_IN_PLACE : send, me ? recv : NULL, (int)count, mt, MPI_SUM, root, comm->comm); });
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

} // extern "C"

#endif // NCCL_EMU_H
