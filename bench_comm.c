/*
bench_comm.c: bandwidth of the comm.h collectives, in the manner of nccl-tests (github.com/NVIDIA/nccl-tests).

Build: make bench_comm
Run:   OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 ./bench_comm
         [--min-bytes 1K] [--max-bytes 256M] [--factor 4] [--iters 20] [--warmup 5]
         [--op all|allreduce|reduce_scatter|allgather|broadcast|reduce|gather|scatter|alltoall|sendrecv[,...]] [--mpi-reference]

For each operation and each size it prints one row: size in bytes, count in floats, time per operation in
microseconds (the slowest rank's average over --iters), algorithm bandwidth algbw = size / time, bus bandwidth
busbw = algbw * factor, and #wrong (elements that differed from the expected result in a separate checked run,
summed over ranks). As in nccl-tests, size is the whole buffer (for reduce-scatter the send buffer, for allgather
the receive buffer, for gather the root's receive buffer, for scatter the root's send buffer, for alltoall each rank's
send buffer) and the busbw factors are: allreduce 2(n-1)/n, reduce-scatter, allgather, gather, scatter and alltoall
(n-1)/n, broadcast and reduce 1 (root 0). sendrecv is a ping-pong between ranks 0 and 1: time is half the round trip, factor 1.
--mpi-reference adds the time of the plain blocking MPI call (MPI_Allreduce, ...) for comparison with comm.h's
non-blocking start + polling wait. The last line is the average bus bandwidth over every row printed.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h" // defines: ParallelContext, parallel_init/set_layout/finalize, comm_* collectives (now_seconds from utils.h)

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_BROADCAST, OP_REDUCE, OP_GATHER, OP_SCATTER, OP_ALLTOALL, OP_SENDRECV, N_OPS };
static const char* const op_names[N_OPS] = { "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "gather", "scatter",
                                             "alltoall", "sendrecv" };

typedef struct {
    size_t min_bytes, max_bytes;
    int factor, iters, warmup;
    int ops[N_OPS];         // 1 if this op runs
    int mpi_reference;
} BenchConfig;

static ParallelContext pc;

// ----------------------------------------------------------------------------
// flags

// Parses "1024", "64K", "256M", "1G" (powers of 1024) into bytes, or exits naming the flag.
static size_t parse_bytes(const char* flag, const char* s) {
    char* end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) { fatal("%s '%s': expected a size such as 1024, 64K, 256M", flag, s); }
    double mul = 1;
    if (*end == 'K' || *end == 'k') { mul = 1024.0; end++; }
    else if (*end == 'M' || *end == 'm') { mul = 1024.0 * 1024.0; end++; }
    else if (*end == 'G' || *end == 'g') { mul = 1024.0 * 1024.0 * 1024.0; end++; }
    if (*end != '\0') { fatal("%s '%s': unknown suffix (use K, M or G)", flag, s); }
    double b = v * mul;
    if (b < 4 || b > 64.0 * 1024 * 1024 * 1024) { fatal("%s '%s': must be between 4 bytes and 64G", flag, s); }
    return (size_t)b;
}

static int parse_int(const char* flag, const char* s, int lo, int hi) {
    char* end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) { fatal("%s '%s': expected an integer in [%d, %d]", flag, s, lo, hi); }
    return (int)v;
}

static void parse_args(BenchConfig* c, int argc, char** argv) {
    c->min_bytes = 1024;
    c->max_bytes = 256u * 1024 * 1024;
    c->factor = 4;
    c->iters = 20;
    c->warmup = 5;
    c->mpi_reference = 0;
    for (int k = 0; k < N_OPS; k++) { c->ops[k] = 1; }
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--mpi-reference")) { c->mpi_reference = 1; continue; }
        if (!strcmp(a, "--version")) { print_version("bench_comm"); exit(0); }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: bench_comm [--min-bytes 1K] [--max-bytes 256M] [--factor 4] [--iters 20] [--warmup 5]\n"
                   "                  [--op all|allreduce|reduce_scatter|allgather|broadcast|reduce|gather|scatter|alltoall|sendrecv[,...]] [--mpi-reference]\n");
            exit(0);
        }
        if (v == NULL) { fatal("flag '%s' needs a value (see --help)", a); }
        if (!strcmp(a, "--min-bytes")) { c->min_bytes = parse_bytes(a, v); }
        else if (!strcmp(a, "--max-bytes")) { c->max_bytes = parse_bytes(a, v); }
        else if (!strcmp(a, "--factor")) { c->factor = parse_int(a, v, 2, 1024); }
        else if (!strcmp(a, "--iters")) { c->iters = parse_int(a, v, 1, 1000000); }
        else if (!strcmp(a, "--warmup")) { c->warmup = parse_int(a, v, 0, 1000000); }
        else if (!strcmp(a, "--op")) {
            // all, one name, or several separated by commas
            int all = !strcmp(v, "all");
            for (int k = 0; k < N_OPS; k++) { c->ops[k] = all; }
            for (const char* p = v; !all && *p;) {
                size_t n = strcspn(p, ",");
                int found = 0;
                for (int k = 0; k < N_OPS; k++) {
                    if (strlen(op_names[k]) == n && !strncmp(p, op_names[k], n)) { c->ops[k] = 1; found = 1; }
                }
                if (!found) { fatal("--op '%s': expected all, or names from allreduce, reduce_scatter, allgather, broadcast, reduce, gather, scatter, alltoall, sendrecv (comma-separated)", v); }
                p += n + (p[n] == ',');
            }
        } else {
            fatal("unknown flag '%s' (see --help)", a);
        }
        i++;
    }
    if (c->min_bytes > c->max_bytes) { fatal("--min-bytes %zu is larger than --max-bytes %zu", c->min_bytes, c->max_bytes); }
}

// ----------------------------------------------------------------------------
// one operation at one size

typedef struct {
    float* a;   // (max_bytes/4,) allreduce buffer, reduce-scatter send, allgather receive, broadcast, ping
    float* b;   // (max_bytes/4,) reduce-scatter receive, allgather send, pong
} Buffers;

// Runs op once on `count` floats (the whole buffer, see the header); use_mpi picks the plain blocking MPI call.
static void run_op(int op, Buffers* buf, size_t count, int use_mpi) {
    CommGroup* w = &pc.world;
    int n = w->size, r = w->rank;
    size_t slice = count / (size_t)n;
#ifndef USE_MPI
    (void)use_mpi;
#else
    if (use_mpi) {
        switch (op) {
        case OP_ALLREDUCE: mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf->a, (int)count, MPI_FLOAT, MPI_SUM, w->comm)); break;
        case OP_REDUCE_SCATTER:
            mpiCheck(MPI_Reduce_scatter_block(buf->a, buf->b, (int)slice, MPI_FLOAT, MPI_SUM, w->comm));
            break;
        case OP_ALLGATHER:
            mpiCheck(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf->a, (int)slice, MPI_FLOAT, w->comm));
            break;
        case OP_BROADCAST: mpiCheck(MPI_Bcast(buf->a, (int)(count * sizeof(float)), MPI_BYTE, 0, w->comm)); break;
        case OP_REDUCE:
            mpiCheck(MPI_Reduce(r == 0 ? MPI_IN_PLACE : buf->a, r == 0 ? buf->a : NULL, (int)count, MPI_FLOAT, MPI_SUM, 0, w->comm));
            break;
        case OP_GATHER: mpiCheck(MPI_Gather(buf->b, (int)slice, MPI_FLOAT, buf->a, (int)slice, MPI_FLOAT, 0, w->comm)); break;
        case OP_SCATTER: mpiCheck(MPI_Scatter(buf->a, (int)slice, MPI_FLOAT, buf->b, (int)slice, MPI_FLOAT, 0, w->comm)); break;
        case OP_ALLTOALL: mpiCheck(MPI_Alltoall(buf->a, (int)slice, MPI_FLOAT, buf->b, (int)slice, MPI_FLOAT, w->comm)); break;
        case OP_SENDRECV:
            if (r == 0) {
                mpiCheck(MPI_Send(buf->a, (int)(count * sizeof(float)), MPI_BYTE, 1, 1, w->comm));
                mpiCheck(MPI_Recv(buf->b, (int)(count * sizeof(float)), MPI_BYTE, 1, 2, w->comm, MPI_STATUS_IGNORE));
            } else if (r == 1) {
                mpiCheck(MPI_Recv(buf->b, (int)(count * sizeof(float)), MPI_BYTE, 0, 1, w->comm, MPI_STATUS_IGNORE));
                mpiCheck(MPI_Send(buf->b, (int)(count * sizeof(float)), MPI_BYTE, 0, 2, w->comm));
            }
            break;
        }
        return;
    }
#endif
    switch (op) {
    case OP_ALLREDUCE: comm_allreduce_sum_f32(w, buf->a, count); break;
    case OP_REDUCE_SCATTER: comm_reduce_scatter_sum_f32(w, buf->a, buf->b, slice); break;
    case OP_ALLGATHER: comm_allgather_f32(w, buf->a + (size_t)r * slice, buf->a, slice); break; // in place
    case OP_BROADCAST: comm_broadcast(w, buf->a, count * sizeof(float), 0); break;
    case OP_REDUCE: comm_reduce_sum_f32(w, buf->a, count, 0); break;
    case OP_GATHER: comm_gather_f32(w, buf->b, buf->a, slice, 0); break;
    case OP_SCATTER: comm_scatter_f32(w, buf->a, buf->b, slice, 0); break;
    case OP_ALLTOALL: comm_alltoall_f32(w, buf->a, buf->b, slice); break;
    case OP_SENDRECV:
        if (r == 0) {
            comm_send(w, buf->a, count * sizeof(float), 1, 1);
            comm_recv(w, buf->b, count * sizeof(float), 1, 2);
        } else if (r == 1) {
            comm_recv(w, buf->b, count * sizeof(float), 0, 1);
            comm_send(w, buf->b, count * sizeof(float), 0, 2);
        }
        break;
    }
}

// One checked run with known inputs: returns the number of wrong elements on this rank.
static long long check_op(int op, Buffers* buf, size_t count) {
    int n = pc.world.size, r = pc.world.rank;
    size_t slice = count / (size_t)n;
    long long wrong = 0;
    // inputs are small integers: (rank + 1) + (i % 7), so every sum is exact
    for (size_t i = 0; i < count; i++) { buf->a[i] = (float)(r + 1 + (int)(i % 7)); }
    float rank_sum = (float)(n * (n + 1) / 2);
    switch (op) {
    case OP_ALLREDUCE:
        run_op(op, buf, count, 0);
        for (size_t i = 0; i < count; i++) { wrong += !(buf->a[i] == rank_sum + (float)(n * (int)(i % 7))); }
        break;
    case OP_REDUCE_SCATTER:
        run_op(op, buf, count, 0);
        for (size_t i = 0; i < slice; i++) {
            size_t g = (size_t)r * slice + i;
            wrong += !(buf->b[i] == rank_sum + (float)(n * (int)(g % 7)));
        }
        break;
    case OP_ALLGATHER:
        for (size_t i = 0; i < count; i++) { buf->a[i] = -1.0f; }
        for (size_t i = 0; i < slice; i++) { buf->a[(size_t)r * slice + i] = (float)(r + 1 + (int)(i % 7)); }
        run_op(op, buf, count, 0);
        for (size_t i = 0; i < slice * (size_t)n; i++) {
            wrong += !(buf->a[i] == (float)((int)(i / slice) + 1 + (int)((i % slice) % 7)));
        }
        break;
    case OP_BROADCAST:
        run_op(op, buf, count, 0);
        for (size_t i = 0; i < count; i++) { wrong += !(buf->a[i] == (float)(1 + (int)(i % 7))); }
        break;
    case OP_REDUCE:
        run_op(op, buf, count, 0);
        for (size_t i = 0; r == 0 && i < count; i++) { wrong += !(buf->a[i] == rank_sum + (float)(n * (int)(i % 7))); }
        break;
    case OP_GATHER: // rank q sends q + 1 + (i % 7); root 0 receives them in rank order
        for (size_t i = 0; i < slice; i++) { buf->b[i] = (float)(r + 1 + (int)(i % 7)); }
        run_op(op, buf, count, 0);
        for (size_t i = 0; r == 0 && i < slice * (size_t)n; i++) {
            wrong += !(buf->a[i] == (float)((int)(i / slice) + 1 + (int)((i % slice) % 7)));
        }
        break;
    case OP_SCATTER: // root 0's part q is q + 1 + (i % 7)
        for (size_t i = 0; i < slice * (size_t)n; i++) { buf->a[i] = (float)((int)(i / slice) + 1 + (int)((i % slice) % 7)); }
        run_op(op, buf, count, 0);
        for (size_t i = 0; i < slice; i++) { wrong += !(buf->b[i] == (float)(r + 1 + (int)(i % 7))); }
        break;
    case OP_ALLTOALL: // part q of rank p is 100 p + q: rank q receives 100 p + q as its part p
        for (size_t i = 0; i < slice * (size_t)n; i++) { buf->a[i] = (float)(100 * r + (int)(i / slice)); }
        run_op(op, buf, count, 0);
        for (size_t i = 0; i < slice * (size_t)n; i++) { wrong += !(buf->b[i] == (float)(100 * (int)(i / slice) + r)); }
        break;
    case OP_SENDRECV:
        memset(buf->b, 0, count * sizeof(float));
        run_op(op, buf, count, 0);
        if (r == 0) { for (size_t i = 0; i < count; i++) { wrong += !(buf->b[i] == (float)(1 + (int)(i % 7))); } }
        break;
    }
    return wrong;
}

// Average seconds per operation, the slowest rank's.
static double time_op(int op, Buffers* buf, size_t count, const BenchConfig* c, int use_mpi) {
    memset(buf->a, 0, count * sizeof(float)); // repeated in-place sums of zeros stay finite
    for (int i = 0; i < c->warmup; i++) { run_op(op, buf, count, use_mpi); }
    comm_barrier(&pc.world);
    double t0 = now_seconds();
    for (int i = 0; i < c->iters; i++) { run_op(op, buf, count, use_mpi); }
    double t = (now_seconds() - t0) / c->iters;
    comm_allreduce_max_f64(&pc.world, &t, 1);
    return t;
}

static double bus_factor(int op, int n) {
    switch (op) {
    case OP_ALLREDUCE: return 2.0 * (n - 1) / n;
    case OP_REDUCE_SCATTER:
    case OP_ALLGATHER:
    case OP_GATHER:
    case OP_SCATTER:
    case OP_ALLTOALL: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

// ----------------------------------------------------------------------------

int main(int argc, char** argv) {
    parallel_init(&pc, &argc, &argv);
    BenchConfig c;
    parse_args(&c, argc, argv);
    parallel_set_layout(&pc, 1, 1, 600.0);
    int n = pc.world_size, root = pc.world_rank == 0;
#ifndef USE_MPI
    c.mpi_reference = 0;
#endif
    size_t max_count = c.max_bytes / sizeof(float);
    Buffers buf;
    buf.a = (float*)alignedMallocCheck(max_count * sizeof(float));
    buf.b = (float*)alignedMallocCheck(max_count * sizeof(float));
    memset(buf.a, 0, max_count * sizeof(float)); // touch every page before timing
    memset(buf.b, 0, max_count * sizeof(float));
    if (root) {
        printf("# bench_comm: %d rank(s) on %d node(s); float32 sum; sizes %zu..%zu bytes x%d; iters %d, warmup %d\n",
               n, pc.nodes, c.min_bytes, c.max_bytes, c.factor, c.iters, c.warmup);
        printf("# time = slowest rank's average per operation; algbw = size/time; busbw = algbw * factor (nccl-tests)\n");
    }
    double bw_sum = 0.0, op_bw_sum[N_OPS] = { 0 };
    int rows = 0, op_rows[N_OPS] = { 0 };
    long long total_wrong = 0;
    for (int op = 0; op < N_OPS; op++) {
        if (!c.ops[op]) { continue; }
        if (op == OP_SENDRECV && n < 2) {
            if (root) { printf("#\n# sendrecv: skipped, needs 2 ranks\n"); }
            continue;
        }
        if (root) {
            const char* f = op == OP_ALLREDUCE ? "2(n-1)/n" : bus_factor(op, 2) == 0.5 ? "(n-1)/n" : "1";
            printf("#\n# %s%s, busbw factor %s = %.3f\n", op_names[op],
                   op == OP_SENDRECV ? " (ping-pong rank 0 <-> 1, time = half round trip)" : "", f, bus_factor(op, n));
            printf("# %12s %12s %12s %12s %12s %8s%s\n", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                   "#wrong", c.mpi_reference ? "  mpi time(us)" : "");
        }
        for (size_t bytes = c.min_bytes; bytes <= c.max_bytes; bytes *= (size_t)c.factor) {
            size_t count = bytes / sizeof(float);
            if (op != OP_ALLREDUCE && op != OP_BROADCAST && op != OP_REDUCE && op != OP_SENDRECV) { count = count / (size_t)n * (size_t)n; }
            if (count == 0) { continue; }
            size_t size = count * sizeof(float);
            double wrong = (double)check_op(op, &buf, count);
            comm_allreduce_sum_f64(&pc.world, &wrong, 1);
            total_wrong += (long long)wrong;
            double t = time_op(op, &buf, count, &c, 0);
            if (op == OP_SENDRECV) { t *= 0.5; }
            double t_mpi = c.mpi_reference ? time_op(op, &buf, count, &c, 1) * (op == OP_SENDRECV ? 0.5 : 1.0) : 0.0;
            double algbw = (double)size / t / 1e9, busbw = algbw * bus_factor(op, n);
            if (root) {
                printf("  %12zu %12zu %12.2f %12.3f %12.3f %8lld", size, count, t * 1e6, algbw, busbw, (long long)wrong);
                if (c.mpi_reference) { printf("  %12.2f", t_mpi * 1e6); }
                printf("\n");
                fflush(stdout);
            }
            bw_sum += busbw;
            rows++;
            op_bw_sum[op] += busbw;
            op_rows[op]++;
        }
    }
    if (root) {
        printf("#\n# avg busbw by op (GB/s):");
        for (int op = 0; op < N_OPS; op++) {
            if (op_rows[op] > 0) { printf(" %s %.3f", op_names[op], op_bw_sum[op] / op_rows[op]); }
        }
        printf("\n# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "ERROR" : "OK");
        printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? bw_sum / rows : 0.0);
        fflush(stdout);
    }
    free(buf.a);
    free(buf.b);
    parallel_finalize(&pc);
    return total_wrong ? 1 : 0;
}
