/*
tests/test_comm.c: tests of comm.h (process groups, layout, collectives, chunking, the failure monitor).

Build: make tests/test_comm   (also compiles without -DUSE_MPI: one rank, point-to-point checks skipped)
Run (each prints one line per check, "PASS name" or "FAIL name: detail"; the last line is "N passed, M failed";
exit status non-zero on any failure):
  ./tests/test_comm                                                              MPI singleton (no mpirun)
  mpirun --allow-run-as-root --oversubscribe -np 1 ./tests/test_comm             (OMP_NUM_THREADS=1)
  mpirun --allow-run-as-root --oversubscribe -np 2 ./tests/test_comm
  mpirun --allow-run-as-root --oversubscribe -np 3 ./tests/test_comm
  mpirun --allow-run-as-root --oversubscribe -np 4 ./tests/test_comm             (adds tp=2, pp=2 layouts)
Every rank runs every check on its own group; failures on any rank are gathered to rank 0, which alone prints.
Values are small integers stored as floats, so every sum is exact and compared with ==.

Counts past INT_MAX through the real chunking limit (2 GB per rank, so not in the default run):
  mpirun ... -np 2 ./tests/test_comm --big-test      broadcast and send/recv of INT_MAX+5 bytes

Failure modes, run by the test runner (each must exit non-zero, quickly, and say what is checked below):
  mpirun ... -np 2 ./tests/test_comm --hang-test [--timeout 3] [--hang-rank 1]
      rank 1 sleeps far past the timeout; rank 0's allreduce must time out. Check: exit status != 0 within about
      timeout + 10 s, and stderr contains "rank(s) 1 never arrived".
  mpirun ... -np 2 ./tests/test_comm --kill-test
      rank 1 kills itself with SIGKILL while rank 0 waits in an allreduce (timeout 60 s). Check: exit status != 0
      well before 60 s; mpirun's stderr names the rank ("process rank 1 ... exited on signal 9").
  mpirun ... -np 2 ./tests/test_comm --exit-test
      rank 1 calls fatal() (exit(1) without MPI_Finalize) while rank 0 waits. Check: exit status != 0 well before
      60 s and stderr contains "error: simulated failure on rank 1".
  mpirun ... -np 2 ./tests/test_comm --mismatch-test [--timeout 3]
      rank 1 waits for a message from rank 0 while rank 0 waits in an all-reduce (the ranks disagree on the next
      collective). Check: exit status != 0, and the timeout's line says what the other rank is waiting in ("rank 1 on
      HOST (pid P) is alive, waiting in recv #1 on group 'world'", or rank 1's line about rank 0's all-reduce).
  mpirun ... -np 2 ./tests/test_comm --dead-test [--timeout 3]
      rank 1's record takes the pid of an exited child (simulating a rank whose process is gone while the job goes
      on) and rank 1 stops calling into comm.h. Check: exit status != 0, and "rank 1 on HOST (pid P) is dead".
  mpirun ... -np 2 ./tests/test_comm --stuck-test [--timeout 3]
      rank 1 starts the all-reduce rank 0 waits in (16 MiB: several rounds) and then stops calling into MPI. Check:
      exit status != 0, and "every rank arrived, yet the operation is stuck", naming rank 1 as alive.
  mpirun ... -np 2 ./tests/test_comm --short-message-test
      rank 1 sends 100 bytes where rank 0 receives 200. Check: exit status != 0 and rank 0's "expected 200 bytes, the
      sender sent a different size".
  ./tests/test_comm --misuse-test tag|peer|root|overlap|null
      a call of comm.h with a bad argument: a point-to-point tag in the collectives' range, a peer or a root that is
      not a rank, all-to-all buffers that overlap, a NULL buffer. Check: exit status != 0 and the message naming it.
  mpirun ... -np 3 ./tests/test_comm --layout-error-test
      asks for tp = world_size + 1. Check: exit status != 0 and stderr contains "is not divisible by tp*pp" once.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "comm.h" // defines: ParallelContext, parallel_*, comm_* collectives, comm_lagging_ranks

// ----------------------------------------------------------------------------
// harness: one line per check, gathered over the world with plain MPI (independent of the code under test)

#define DETAIL_LEN 240

static ParallelContext pc;
static int n_passed = 0, n_failed = 0; // counted on rank 0
static int check_ok = 1;
static char check_detail[DETAIL_LEN];

static void check_begin(void) {
    check_ok = 1;
    check_detail[0] = '\0';
}

// Marks the current check failed on this rank; keeps the first detail.
static void __attribute__((format(printf, 1, 2))) check_fail(const char* fmt, ...) {
    if (check_ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(check_detail, sizeof(check_detail), fmt, ap);
        va_end(ap);
    }
    check_ok = 0;
}

// Ends a check on every rank: rank 0 prints PASS, or FAIL with every failing rank's detail.
static void check_end(const char* name) {
    int world = pc.world_size, rank = pc.world_rank;
    int* oks = (int*)mallocCheck((size_t)world * sizeof(int));
    char* details = (char*)mallocCheck((size_t)world * DETAIL_LEN);
#ifdef USE_MPI
    mpiCheck(MPI_Gather(&check_ok, 1, MPI_INT, oks, 1, MPI_INT, 0, MPI_COMM_WORLD));
    mpiCheck(MPI_Gather(check_detail, DETAIL_LEN, MPI_CHAR, details, DETAIL_LEN, MPI_CHAR, 0, MPI_COMM_WORLD));
#else
    oks[0] = check_ok;
    memcpy(details, check_detail, DETAIL_LEN);
#endif
    if (rank == 0) {
        int all = 1;
        for (int r = 0; r < world; r++) { all = all && oks[r]; }
        if (all) {
            printf("PASS %s\n", name);
            n_passed++;
        } else {
            printf("FAIL %s:", name);
            for (int r = 0; r < world; r++) {
                if (!oks[r]) { printf(" [rank %d] %.*s", r, DETAIL_LEN, details + (size_t)r * DETAIL_LEN); }
            }
            printf("\n");
            n_failed++;
        }
        fflush(stdout);
    }
    free(oks);
    free(details);
}

// Single-rank-agnostic check of a condition (the same on every rank or not).
static void check(const char* name, int ok, const char* detail) {
    check_begin();
    if (!ok) { check_fail("%s", detail); }
    check_end(name);
}

// ----------------------------------------------------------------------------
// values: small integers, so float sums are exact

static float val(int world_rank, size_t i, int salt) {
    return (float)((int)((i * 7 + (size_t)salt) % 1000) + 1000 * (world_rank + 1));
}

// Sum over the group's members of val(member, i, salt).
static float val_sum(const CommGroup* g, size_t i, int salt) {
    float s = 0.0f;
    for (int m = 0; m < g->size; m++) { s += val(g->world_ranks[m], i, salt); }
    return s;
}

#define GUARD_VALUE -12345.0f

// Allocates n floats plus one guard element after them, set to GUARD_VALUE.
static float* alloc_guarded(size_t n) {
    float* p = (float*)mallocCheck((n + 1) * sizeof(float));
    p[n] = GUARD_VALUE;
    return p;
}

static void check_guard(const float* p, size_t n, const char* what) {
    if (!(p[n] == GUARD_VALUE)) { check_fail("%s: element past the end was overwritten (%g)", what, (double)p[n]); }
}

// Compares got[0..n) with expected values; records the first mismatch.
static void expect_floats(const float* got, const float* want, size_t n, const char* what) {
    for (size_t i = 0; i < n; i++) {
        if (!(got[i] == want[i])) {
            check_fail("%s: element %zu is %g, expected %g", what, i, (double)got[i], (double)want[i]);
            return;
        }
    }
}

static void sleep_s(double s) {
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

// ----------------------------------------------------------------------------
// collective checks on one group

static const size_t test_sizes[] = { 0, 1, 7, 1000, 4099 };
#define N_TEST_SIZES (sizeof(test_sizes) / sizeof(test_sizes[0]))

static void test_allreduce(CommGroup* g, const char* label) {
    char name[256];
    for (size_t si = 0; si < N_TEST_SIZES; si++) {
        size_t n = test_sizes[si];
        int me = pc.world_rank;
        check_begin();
        float* buf = alloc_guarded(n);
        float* want = alloc_guarded(n);
        for (size_t i = 0; i < n; i++) { buf[i] = val(me, i, 1); want[i] = val_sum(g, i, 1); }
        comm_allreduce_sum_f32(g, buf, n);
        expect_floats(buf, want, n, "sum");
        check_guard(buf, n, "buf");
        snprintf(name, sizeof(name), "%s: allreduce_sum_f32 n=%zu", label, n);
        check_end(name);

        // two non-blocking allreduces in flight, waited in reverse order (second one polled with comm_test first)
        check_begin();
        float* buf2 = alloc_guarded(n);
        for (size_t i = 0; i < n; i++) { buf[i] = val(me, i, 1); buf2[i] = val(me, i, 2); }
        CommRequest r1, r2;
        comm_iallreduce_sum_f32(g, buf, n, &r1);
        comm_iallreduce_sum_f32(g, buf2, n, &r2);
        while (!comm_test(&r2)) {}
        comm_wait(&r1);
        if (!comm_test(&r1) || r1.active) { check_fail("comm_test on a finished request did not return 1"); }
        comm_wait(&r1); // a second wait on a finished request returns at once
        expect_floats(buf, want, n, "first");
        for (size_t i = 0; i < n; i++) { want[i] = val_sum(g, i, 2); }
        expect_floats(buf2, want, n, "second");
        check_guard(buf2, n, "buf2");
        snprintf(name, sizeof(name), "%s: iallreduce_sum_f32 x2 n=%zu", label, n);
        check_end(name);
        free(buf2);
        free(buf);
        free(want);

        check_begin();
        double* d = (double*)mallocCheck((n + 1) * sizeof(double));
        double* dm = (double*)mallocCheck((n + 1) * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            d[i] = (double)val(me, i, 3) + 0.5;           // exact in double
            dm[i] = (double)((me * 37 + (int)i) % 11) - 5.0;  // max over members, computed below
        }
        comm_allreduce_sum_f64(g, d, n);
        comm_allreduce_max_f64(g, dm, n);
        for (size_t i = 0; i < n; i++) {
            double ws = 0.0, wm = -1e300;
            for (int m = 0; m < g->size; m++) {
                int wr = g->world_ranks[m];
                ws += (double)val(wr, i, 3) + 0.5;
                double x = (double)((wr * 37 + (int)i) % 11) - 5.0;
                if (x > wm) { wm = x; }
            }
            if (!(d[i] == ws)) { check_fail("sum_f64 element %zu is %g, expected %g", i, d[i], ws); break; }
            if (!(dm[i] == wm)) { check_fail("max_f64 element %zu is %g, expected %g", i, dm[i], wm); break; }
        }
        snprintf(name, sizeof(name), "%s: allreduce_sum_f64 + max_f64 n=%zu", label, n);
        check_end(name);
        free(d);
        free(dm);
    }
}

// Per-rank counts for the v-variants: uneven, with zeros (pattern k).
static void uneven_counts(const CommGroup* g, int k, size_t* counts) {
    static const size_t pat[][5] = { { 3, 0, 5, 1, 0 }, { 0, 0, 0, 0, 0 }, { 0, 1000, 17, 0, 4099 }, { 1, 1, 1, 1, 1 } };
    for (int r = 0; r < g->size; r++) { counts[r] = pat[k][(r + k) % 5]; }
}
#define N_COUNT_PATTERNS 4

// Runs one reduce-scatter (v or equal, in place or not, blocking or not) and checks this rank's slice.
static void run_reduce_scatter(CommGroup* g, const size_t* counts, int equal, int in_place, int nonblocking,
                               const char* label) {
    char name[256];
    size_t total = 0, off = 0;
    for (int r = 0; r < g->size; r++) { total += counts[r]; }
    for (int r = 0; r < g->rank; r++) { off += counts[r]; }
    size_t mine = counts[g->rank];
    check_begin();
    float* send = alloc_guarded(total);
    float* recv = alloc_guarded(mine);
    float* want = alloc_guarded(mine);
    for (size_t i = 0; i < total; i++) { send[i] = val(pc.world_rank, i, 5); }
    for (size_t i = 0; i < mine; i++) { want[i] = val_sum(g, off + i, 5); recv[i] = -1.0f; }
    float* dst = in_place ? send + off : recv;
    if (nonblocking) {
        CommRequest req;
        comm_ireduce_scatterv_sum_f32(g, send, dst, counts, &req);
        comm_wait(&req);
    } else if (equal) {
        comm_reduce_scatter_sum_f32(g, send, dst, counts[0]);
    } else {
        comm_reduce_scatterv_sum_f32(g, send, dst, counts);
    }
    expect_floats(dst, want, mine, "own slice");
    check_guard(send, total, "sendbuf");
    if (!in_place) {
        check_guard(recv, mine, "recvbuf");
        for (size_t i = 0; i < total; i++) {
            if (!(send[i] == val(pc.world_rank, i, 5))) { check_fail("sendbuf modified at %zu", i); break; }
        }
    }
    snprintf(name, sizeof(name), "%s: %sreduce_scatter%s_sum_f32%s total=%zu mine=%zu", label,
             nonblocking ? "i" : "", equal ? "" : "v", in_place ? " in-place" : "", total, mine);
    check_end(name);
    free(send);
    free(recv);
    free(want);
}

// Runs one allgather (v or equal, in place or not, blocking or not) and checks the whole result.
static void run_allgather(CommGroup* g, const size_t* counts, int equal, int in_place, int nonblocking,
                          const char* label) {
    char name[256];
    size_t total = 0, off = 0;
    for (int r = 0; r < g->size; r++) { total += counts[r]; }
    for (int r = 0; r < g->rank; r++) { off += counts[r]; }
    size_t mine = counts[g->rank];
    check_begin();
    float* send = alloc_guarded(mine);
    float* recv = alloc_guarded(total);
    float* want = alloc_guarded(total);
    for (size_t i = 0; i < total; i++) { recv[i] = -1.0f; }
    for (size_t i = 0; i < mine; i++) { send[i] = val(pc.world_rank, off + i, 6); }
    if (in_place) { memcpy(recv + off, send, mine * sizeof(float)); }
    size_t o = 0;
    for (int m = 0; m < g->size; m++) {
        for (size_t i = 0; i < counts[m]; i++) { want[o + i] = val(g->world_ranks[m], o + i, 6); }
        o += counts[m];
    }
    const float* src = in_place ? recv + off : send;
    if (nonblocking) {
        CommRequest req;
        comm_iallgatherv_f32(g, src, recv, counts, &req);
        comm_wait(&req);
    } else if (equal) {
        comm_allgather_f32(g, src, recv, counts[0]);
    } else {
        comm_allgatherv_f32(g, src, recv, counts);
    }
    expect_floats(recv, want, total, "gathered");
    check_guard(recv, total, "recvbuf");
    snprintf(name, sizeof(name), "%s: %sallgather%s_f32%s total=%zu", label, nonblocking ? "i" : "",
             equal ? "" : "v", in_place ? " in-place" : "", total);
    check_end(name);
    free(send);
    free(recv);
    free(want);
}

static void test_reduce_scatter_allgather(CommGroup* g, const char* label) {
    size_t* counts = (size_t*)mallocCheck((size_t)g->size * sizeof(size_t));
    static const size_t eq[] = { 0, 1, 5, 1000 };
    for (size_t k = 0; k < sizeof(eq) / sizeof(eq[0]); k++) {
        for (int r = 0; r < g->size; r++) { counts[r] = eq[k]; }
        for (int in_place = 0; in_place < 2; in_place++) {
            run_reduce_scatter(g, counts, 1, in_place, 0, label);
            run_allgather(g, counts, 1, in_place, 0, label);
        }
    }
    for (int k = 0; k < N_COUNT_PATTERNS; k++) {
        uneven_counts(g, k, counts);
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int nb = 0; nb < 2; nb++) {
                run_reduce_scatter(g, counts, 0, in_place, nb, label);
                run_allgather(g, counts, 0, in_place, nb, label);
            }
        }
    }
    free(counts);
}

static void test_broadcast(CommGroup* g, const char* label) {
    char name[256];
    static const size_t sizes[] = { 0, 1, 13, 4096 };
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        size_t n = sizes[si];
        check_begin();
        for (int root = 0; root < g->size; root++) {
            unsigned char* buf = (unsigned char*)mallocCheck(n + 1);
            buf[n] = 0xA5;
            for (size_t i = 0; i < n; i++) {
                buf[i] = g->rank == root ? (unsigned char)((i * 31 + (size_t)root * 7 + 1) & 0xFF) : 0;
            }
            comm_broadcast(g, buf, n, root);
            for (size_t i = 0; i < n; i++) {
                unsigned char w = (unsigned char)((i * 31 + (size_t)root * 7 + 1) & 0xFF);
                if (buf[i] != w) { check_fail("root %d: byte %zu is %d, expected %d", root, i, buf[i], w); break; }
            }
            if (buf[n] != 0xA5) { check_fail("root %d: byte past the end was overwritten", root); }
            free(buf);
        }
        snprintf(name, sizeof(name), "%s: broadcast bytes=%zu from every root", label, n);
        check_end(name);
    }
}

#ifdef USE_MPI
// Ring exchange: each rank sends to rank+1 and receives from rank-1 (itself when alone), blocking and not.
static void test_send_recv(CommGroup* g, const char* label) {
    char name[256];
    static const size_t sizes[] = { 0, 1, 100, 1 << 20 };
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        size_t n = sizes[si];
        if (n / pc.max_count > 1000) { continue; } // 1 MB in 7-byte chunks is 150k messages: slow, proves nothing new
        int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
        unsigned char* out = (unsigned char*)mallocCheck(n + 1);
        unsigned char* in = (unsigned char*)mallocCheck(n + 1);
        for (int blocking = 0; blocking < 2; blocking++) {
            check_begin();
            for (size_t i = 0; i < n; i++) { out[i] = (unsigned char)((i + (size_t)g->rank * 13) & 0xFF); in[i] = 0; }
            in[n] = 0x5A;
            int tag = 7 + blocking;
            if (blocking && g->size > 1) {
                // rank 0 sends first, everyone else receives first: a ring that cannot deadlock
                if (g->rank == 0) {
                    comm_send(g, out, n, next, tag);
                    comm_recv(g, in, n, prev, tag);
                } else {
                    comm_recv(g, in, n, prev, tag);
                    comm_send(g, out, n, next, tag);
                }
            } else {
                CommRequest rr, rs;
                comm_irecv(g, in, n, prev, tag, &rr);
                comm_isend(g, out, n, next, tag, &rs);
                comm_wait(&rs);
                comm_wait(&rr);
            }
            for (size_t i = 0; i < n; i++) {
                unsigned char w = (unsigned char)((i + (size_t)prev * 13) & 0xFF);
                if (in[i] != w) { check_fail("byte %zu is %d, expected %d", i, in[i], w); break; }
            }
            if (in[n] != 0x5A) { check_fail("byte past the end was overwritten"); }
            snprintf(name, sizeof(name), "%s: %s ring bytes=%zu", label, blocking ? "send/recv" : "isend/irecv", n);
            check_end(name);
        }
        free(out);
        free(in);
    }
}

// The monitor: every member's record shows it entered the last barrier, none is ahead of a far-future number,
// and the published pids are the members' pids.
static void test_monitor(CommGroup* g, const char* label) {
    char name[256];
    check_begin();
    comm_barrier(g);
    if (!pc.monitor_ok) {
        check_fail("no shared-memory monitor on this node");
    } else {
        int* lag = (int*)mallocCheck((size_t)g->size * sizeof(int));
        int unknown = -1;
        int n = comm_lagging_ranks(g, g->seq, lag, g->size, &unknown);
        if (n != 0) { check_fail("after a barrier, %d member(s) look behind (first: rank %d)", n, lag[0]); }
        n = comm_lagging_ranks(g, g->seq + 1000, lag, g->size, &unknown);
        if (n != g->size - 1 - unknown) { check_fail("%d member(s) behind a future collective, expected %d", n, g->size - 1); }
        for (int i = 0, m = 0; i < n && i < g->size; i++, m++) { // the other members' world ranks, in group order
            if (m == g->rank) { m++; }
            if (lag[i] != g->world_ranks[m]) { check_fail("lagging list entry %d is rank %d, expected %d", i, lag[i], g->world_ranks[m]); }
        }
        free(lag);
        int64_t mypid = (int64_t)getpid();
        int64_t* pids = (int64_t*)mallocCheck((size_t)pc.world_size * sizeof(int64_t));
        mpiCheck(MPI_Allgather(&mypid, 1, MPI_INT64_T, pids, 1, MPI_INT64_T, MPI_COMM_WORLD));
        for (int r = 0; r < pc.world_size; r++) {
            const CommSlot* s = comm__slot(&pc, r);
            if (s && s->pid != pids[r]) { check_fail("record of rank %d has pid %lld, expected %lld", r, (long long)s->pid, (long long)pids[r]); }
            if (s && comm__pid_dead(s->pid)) { check_fail("live rank %d reported dead", r); }
        }
        free(pids);
    }
    comm_barrier(g); // nobody runs ahead into the next check while others still read records
    snprintf(name, sizeof(name), "%s: monitor records (entered counters, pids)", label);
    check_end(name);
}
#endif

// comm__pid_dead: 0 for a live process, 1 for a zombie child and for a reaped one.
static void test_pid_dead(void) {
    check_begin();
    if (comm__pid_dead((int64_t)getpid())) { check_fail("this process reported dead"); }
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child < 0) { check_fail("fork failed"); }
    if (child == 0) { _exit(0); }
    if (child > 0) {
        int dead = 0;
        for (int i = 0; i < 2000 && !dead; i++) { dead = comm__pid_dead((int64_t)child); if (!dead) { sleep_s(0.001); } }
        if (!dead) { check_fail("exited (zombie) child %d not reported dead", (int)child); }
        waitpid(child, NULL, 0);
        if (!comm__pid_dead((int64_t)child)) { check_fail("reaped child %d not reported dead", (int)child); }
    }
    check_end("pid_dead: self alive, zombie and reaped child dead");
}

// Every collective on group g.
// Reduce, gather and scatter to and from every root, and all-to-all, for counts 0, 1, 5 and 1000 per rank, blocking
// and not (the non-blocking request polled to completion), in place where the call allows it. Values are small
// integers times 0.5, so every sum is exact whatever order MPI adds in.
static void test_rooted(CommGroup* g, const char* label) {
    static const size_t counts[] = { 0, 1, 5, 1000 };
    int p = g->size, me = g->rank;
    char name[256];
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t n = counts[ci], all = (size_t)p * n;
        float* a = (float*)mallocCheck((all + 1) * sizeof(float));
        float* b = (float*)mallocCheck((all + 1) * sizeof(float));
        for (int root = 0; root < p; root++) {
            for (int nb = 0; nb < 2; nb++) {
                check_begin();
                // reduce: root gets the sum, the others keep their buffers
                for (size_t i = 0; i < n; i++) { a[i] = 0.5f * (float)((me + 1) * (int)(i % 97 + 1)); }
                if (nb) { CommRequest r; comm_ireduce_sum_f32(g, a, n, root, &r); while (!comm_test(&r)) {} }
                else { comm_reduce_sum_f32(g, a, n, root); }
                for (size_t i = 0; i < n; i++) {
                    float want = me == root ? 0.5f * (float)(p * (p + 1) / 2 * (int)(i % 97 + 1)) : 0.5f * (float)((me + 1) * (int)(i % 97 + 1));
                    if (a[i] != want) { check_fail("reduce: element %zu is %g, expected %g", i, a[i], want); break; }
                }
                // gather (the root's part in place when nb)
                for (size_t i = 0; i < all; i++) { b[i] = -1.0f; }
                float* send = a;
                if (me == root && nb) { send = b + (size_t)root * n; }
                for (size_t i = 0; i < n; i++) { send[i] = (float)(me * 1000 + (int)i); }
                if (nb) { CommRequest r; comm_igather_f32(g, send, b, n, root, &r); comm_wait(&r); }
                else { comm_gather_f32(g, send, b, n, root); }
                for (size_t i = 0; me == root && i < all; i++) {
                    float want = (float)((int)(i / (n ? n : 1)) * 1000 + (int)(i % (n ? n : 1)));
                    if (b[i] != want) { check_fail("gather: element %zu is %g, expected %g", i, b[i], want); break; }
                }
                // scatter from the root's b (its own part in place when nb)
                for (size_t i = 0; me == root && i < all; i++) { b[i] = (float)(7 + (int)(i / (n ? n : 1)) * 1000 + (int)(i % (n ? n : 1))); }
                float* recv = me == root && nb ? b + (size_t)root * n : a;
                if (nb) { CommRequest r; comm_iscatter_f32(g, b, recv, n, root, &r); comm_wait(&r); }
                else { comm_scatter_f32(g, b, recv, n, root); }
                for (size_t i = 0; i < n; i++) {
                    float want = (float)(7 + me * 1000 + (int)i);
                    if (recv[i] != want) { check_fail("scatter: element %zu is %g, expected %g", i, recv[i], want); break; }
                }
                snprintf(name, sizeof(name), "%s: reduce, gather, scatter of %zu floats per rank, root %d%s", label, n, root,
                         nb ? " (non-blocking, root in place)" : "");
                check_end(name);
            }
        }
        // all-to-all: part q of rank r goes to rank q as part r
        check_begin();
        for (size_t i = 0; i < all; i++) { a[i] = (float)(me * 100000 + (int)(i / (n ? n : 1)) * 1000 + (int)(i % (n ? n : 1))); b[i] = -1.0f; }
        comm_alltoall_f32(g, a, b, n);
        for (size_t i = 0; i < all; i++) {
            int r = (int)(i / n);
            float want = (float)(r * 100000 + me * 1000 + (int)(i % n));
            if (b[i] != want) { check_fail("alltoall: element %zu is %g, expected %g", i, b[i], want); break; }
        }
        snprintf(name, sizeof(name), "%s: alltoall of %zu floats per pair", label, n);
        check_end(name);
        free(a);
        free(b);
    }
}

// bf16 sums (compressed gradients): rank 0 contributes 1 + 2^-7, rank 1 2^-8, the others 0, so whatever the order
// the one inexact addition is 1 + 2^-7 + 2^-8, halfway between two bf16 values: nearest-even gives 1 + 2^-6
// (truncation would give 1 + 2^-7). The reduce-scatter form leaves each rank its slice of the same sums.
static void test_bf16(CommGroup* g, const char* label) {
    static const size_t counts[] = { 1, 5, 1000 };
    char name[256];
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t n = counts[ci], all = n * (size_t)g->size;
        uint16_t* buf = (uint16_t*)mallocCheck((all + 1) * sizeof(uint16_t));
        float mine = g->rank == 0 ? 1.0f + 1.0f / 128 : g->rank == 1 ? 1.0f / 256 : 0.0f;
        float want = g->size >= 2 ? 1.0f + 1.0f / 64 : 1.0f + 1.0f / 128;
        check_begin();
        for (size_t i = 0; i < n; i++) { buf[i] = bf16_bits(mine); }
        CommRequest req;
        comm_iallreduce_sum_bf16(g, buf, n, &req);
        comm_wait(&req);
        for (size_t i = 0; i < n; i++) {
            float got = precision__float((uint32_t)buf[i] << 16);
            if (got != want) { check_fail("allreduce: element %zu is %.9g, expected %.9g", i, got, want); break; }
        }
        for (size_t i = 0; i < all; i++) { buf[i] = bf16_bits(mine); }
        size_t* rc = (size_t*)mallocCheck((size_t)g->size * sizeof(size_t));
        for (int r = 0; r < g->size; r++) { rc[r] = n; }
        comm_ireduce_scatterv_sum_bf16(g, buf, rc, &req);
        comm_wait(&req);
        for (size_t i = 0; i < n; i++) {
            float got = precision__float((uint32_t)buf[(size_t)g->rank * n + i] << 16);
            if (got != want) { check_fail("reduce-scatter: element %zu is %.9g, expected %.9g", i, got, want); break; }
        }
        snprintf(name, sizeof(name), "%s: bf16 allreduce and reduce-scatter of %zu values round every sum to nearest even", label, n);
        check_end(name);
        free(rc);
        free(buf);
    }
}

static void test_group(CommGroup* g, const char* label) {
    test_allreduce(g, label);
    test_reduce_scatter_allgather(g, label);
    test_broadcast(g, label);
    test_rooted(g, label);
    test_bf16(g, label);
#ifdef USE_MPI
    test_send_recv(g, label);
    test_monitor(g, label);
#endif
    check_begin();
    comm_barrier(g);
    CommRequest req;
    comm_ibarrier(g, &req);
    comm_wait(&req);
    char name[256];
    snprintf(name, sizeof(name), "%s: barrier, ibarrier", label);
    check_end(name);
}

// ----------------------------------------------------------------------------
// layout

static void test_layout_validation(void) {
    char err[512];
    struct { int world, tp, pp, ok; const char* needle; } cases[] = {
        { 1, 1, 1, 1, "" }, { 4, 2, 1, 1, "" }, { 8, 2, 2, 1, "" }, { 6, 3, 2, 1, "" }, { 4, 4, 1, 1, "" },
        { 3, 2, 1, 0, "world size 3 is not divisible by tp*pp = 2" }, { 4, 8, 1, 0, "not divisible" },
        { 4, 0, 1, 0, "tp = 0 must be >= 1" }, { 4, 1, -1, 0, "pp = -1 must be >= 1" },
        { 2, 65536, 65536, 0, "not divisible" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char name[128];
        snprintf(name, sizeof(name), "layout_valid world=%d tp=%d pp=%d -> %s", cases[i].world, cases[i].tp,
                 cases[i].pp, cases[i].ok ? "ok" : "error");
        check_begin();
        int ok = parallel_layout_valid(cases[i].world, cases[i].tp, cases[i].pp, err, sizeof(err));
        if (ok != cases[i].ok) { check_fail("returned %d (%s)", ok, err); }
        if (!ok && strstr(err, cases[i].needle) == NULL) { check_fail("message '%s' lacks '%s'", err, cases[i].needle); }
        check_end(name);
    }
}

// Membership of one group against the formula: member m of this rank's group has world rank expect[m].
static void expect_members(const CommGroup* g, const int* expect, int n, const char* gname) {
    if (g->size != n) { check_fail("%s group size %d, expected %d", gname, g->size, n); return; }
    for (int m = 0; m < n; m++) {
        if (g->world_ranks[m] != expect[m]) {
            check_fail("%s member %d is world rank %d, expected %d", gname, m, g->world_ranks[m], expect[m]);
            return;
        }
    }
}

static void test_layout(int tp, int pp, int run_collectives) {
    char label[64], name[160];
    parallel_set_layout(&pc, tp, pp, 60.0);
    int W = pc.world_size, wr = pc.world_rank, dp = W / (tp * pp);
    snprintf(label, sizeof(label), "[dp%d tp%d pp%d]", dp, tp, pp);

    check_begin();
    if (pc.dp != dp || pc.tp != tp || pc.pp != pp) { check_fail("sizes dp %d tp %d pp %d", pc.dp, pc.tp, pc.pp); }
    if (pc.tp_rank != wr % tp) { check_fail("tp_rank %d, expected %d", pc.tp_rank, wr % tp); }
    if (pc.pp_rank != (wr / tp) % pp) { check_fail("pp_rank %d, expected %d", pc.pp_rank, (wr / tp) % pp); }
    if (pc.dp_rank != wr / (tp * pp)) { check_fail("dp_rank %d, expected %d", pc.dp_rank, wr / (tp * pp)); }
    if (pc.tp_group.rank != pc.tp_rank || pc.pp_group.rank != pc.pp_rank || pc.dp_group.rank != pc.dp_rank) {
        check_fail("group ranks (dp %d tp %d pp %d) differ from the coordinates", pc.dp_group.rank, pc.tp_group.rank,
                   pc.pp_group.rank);
    }
    if (strcmp(pc.dp_group.name, "dp") || strcmp(pc.tp_group.name, "tp") || strcmp(pc.pp_group.name, "pp") ||
        strcmp(pc.world.name, "world")) {
        check_fail("group names");
    }
    if (pc.timeout_s != 60.0) { check_fail("timeout_s %g, expected 60", pc.timeout_s); }
    snprintf(name, sizeof(name), "%s coordinates", label);
    check_end(name);

    check_begin();
    int* ex = (int*)mallocCheck((size_t)W * sizeof(int));
    for (int t = 0; t < tp; t++) { ex[t] = pc.dp_rank * tp * pp + pc.pp_rank * tp + t; }
    expect_members(&pc.tp_group, ex, tp, "tp");
    for (int p = 0; p < pp; p++) { ex[p] = pc.dp_rank * tp * pp + p * tp + pc.tp_rank; }
    expect_members(&pc.pp_group, ex, pp, "pp");
    for (int d = 0; d < dp; d++) { ex[d] = d * tp * pp + pc.pp_rank * tp + pc.tp_rank; }
    expect_members(&pc.dp_group, ex, dp, "dp");
    for (int r = 0; r < W; r++) { ex[r] = r; }
    expect_members(&pc.world, ex, W, "world");
    free(ex);
    // the communicators really hold those members: sum of 2^world_rank over each group
    CommGroup* gs[3] = { &pc.dp_group, &pc.tp_group, &pc.pp_group };
    for (int k = 0; k < 3; k++) {
        double mask = ldexp(1.0, wr), want = 0.0;
        for (int m = 0; m < gs[k]->size; m++) { want += ldexp(1.0, gs[k]->world_ranks[m]); }
        comm_allreduce_sum_f64(gs[k], &mask, 1);
        if (!(mask == want)) { check_fail("%s communicator: member mask %g, expected %g", gs[k]->name, mask, want); }
    }
    snprintf(name, sizeof(name), "%s group membership", label);
    check_end(name);

    if (run_collectives) {
        char l2[96];
        snprintf(l2, sizeof(l2), "%s dp", label);
        test_group(&pc.dp_group, l2);
        snprintf(l2, sizeof(l2), "%s tp", label);
        test_group(&pc.tp_group, l2);
        snprintf(l2, sizeof(l2), "%s pp", label);
        test_group(&pc.pp_group, l2);
    }
}

// ----------------------------------------------------------------------------
// --big-test: counts past INT_MAX through the real chunking limit (2 GB per rank; not part of the default run)

static void test_big(void) {
    size_t n = (size_t)INT_MAX + 5;
    unsigned char* buf = (unsigned char*)mallocCheck(n);
    for (size_t i = 0; i < n; i++) { buf[i] = pc.world_rank == 0 ? (unsigned char)((i * 131 + 7) & 0xFF) : 0; }
    check_begin();
    comm_broadcast(&pc.world, buf, n, 0);
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != (unsigned char)((i * 131 + 7) & 0xFF)) { check_fail("byte %zu differs", i); break; }
    }
    check_end("broadcast of INT_MAX+5 bytes (2 chunks)");
#ifdef USE_MPI
    if (pc.world_size >= 2) {
        check_begin();
        if (pc.world_rank == 1) { memset(buf, 0, n); }
        if (pc.world_rank == 0) { comm_send(&pc.world, buf, n, 1, 3); }
        if (pc.world_rank == 1) {
            comm_recv(&pc.world, buf, n, 0, 3);
            for (size_t i = 0; i < n; i++) {
                if (buf[i] != (unsigned char)((i * 131 + 7) & 0xFF)) { check_fail("byte %zu differs", i); break; }
            }
        }
        check_end("send/recv of INT_MAX+5 bytes (2 chunks)");
    }
#endif
    free(buf);
}

// ----------------------------------------------------------------------------
// failure modes (each ends the job; run by the test runner, see the header)

static int failure_mode(const char* mode, double timeout_s, int hang_rank) {
    if (strcmp(mode, "--layout-error-test") == 0) {
        parallel_set_layout(&pc, pc.world_size + 1, 1, 10.0);
        fprintf(stderr, "layout error test: parallel_set_layout accepted tp = world_size + 1\n");
        return 1;
    }
    if (pc.world_size < 2) { fatal("%s needs at least 2 ranks (mpirun -np 2)", mode); }
    if (strcmp(mode, "--short-message-test") == 0) {
        // a message shorter than the receive expects (the sender's and the receiver's sizes disagree): the receiver
        // must say so, not go on with stale bytes at the end of its buffer
        parallel_set_layout(&pc, 1, 1, 60.0);
        unsigned char msg[200];
        memset(msg, 7, sizeof(msg));
        if (pc.world_rank == 1) { comm_send(&pc.world, msg, 100, 0, 5); }
        if (pc.world_rank == 0) { comm_recv(&pc.world, msg, 200, 1, 5); }
        comm_barrier(&pc.world);
        fprintf(stderr, "%s: rank %d: a short message was received without an error\n", mode, pc.world_rank);
        parallel_finalize(&pc);
        return 1;
    }
    if (hang_rank < 1 || hang_rank >= pc.world_size) { fatal("--hang-rank %d must be in [1, %d)", hang_rank, pc.world_size); }
    int is_hung = pc.world_rank == hang_rank;
    int timed = strcmp(mode, "--hang-test") == 0 || strcmp(mode, "--mismatch-test") == 0 || strcmp(mode, "--dead-test") == 0 ||
                strcmp(mode, "--stuck-test") == 0;
    parallel_set_layout(&pc, 1, 1, timed ? timeout_s : 60.0);
    float buf[4096];
    for (int i = 0; i < 4096; i++) { buf[i] = 1.0f; }
    // --stuck-test's all-reduce: 16 MiB, several rounds, so it cannot finish while one rank stops calling into MPI
    size_t nbig = (size_t)1 << 22;
    float* big = strcmp(mode, "--stuck-test") == 0 ? (float*)callocCheck(nbig, sizeof(float)) : NULL;
    if (is_hung) {
        if (strcmp(mode, "--hang-test") == 0) {
            sleep_s(timeout_s * 10 + 30); // far past rank 0's timeout: it must abort the job first
        } else if (strcmp(mode, "--kill-test") == 0) {
            sleep_s(0.5);
            kill(getpid(), SIGKILL);
        } else if (strcmp(mode, "--exit-test") == 0) {
            sleep_s(0.5);
            fatal("simulated failure on rank %d", pc.world_rank);
        } else if (strcmp(mode, "--mismatch-test") == 0) {
            // the usual bug behind a hang: the ranks disagree on the next collective (this one waits for a message
            // from rank 0, which waits in an all-reduce)
            comm_recv(&pc.world, buf, sizeof(buf), 0, 7);
        } else if (strcmp(mode, "--dead-test") == 0) {
            // a rank whose process is gone while the job goes on (mpirun would end the job first; other launchers
            // need not), simulated (comm_monitor_pretend_gone), and the rank stops calling into comm.h
            if (comm_monitor_pretend_gone(&pc) != 0) { fatal("--dead-test: no shared-memory monitor, or fork failed"); }
            sleep_s(timeout_s * 10 + 30);
        } else if (strcmp(mode, "--stuck-test") == 0) {
            // a rank that starts the same collective and then stops calling into MPI (a busy loop between the start
            // and the wait, say): every rank arrived, yet the all-reduce cannot finish
            CommRequest req;
            comm_iallreduce_sum_f32(&pc.world, big, nbig, &req);
            sleep_s(timeout_s * 10 + 30);
        }
    }
    if (big) { comm_allreduce_sum_f32(&pc.world, big, nbig); }
    comm_allreduce_sum_f32(&pc.world, buf, 4096);
    fprintf(stderr, "%s: rank %d: the allreduce completed; expected the job to end with an error\n", mode, pc.world_rank);
    parallel_finalize(&pc);
    return 1;
}

// A call with a bad argument (see the header): each must end the process with comm.h's message, before any message
// or collective starts. Returns 1 (a failure) if the call came back.
static int misuse_mode(const char* what) {
    parallel_set_layout(&pc, 1, 1, 10.0);
    float buf[8] = {0};
    if (strcmp(what, "tag") == 0) { comm_send(&pc.world, buf, sizeof(buf), 0, COMM_TAG_COLLECTIVE); }
    else if (strcmp(what, "peer") == 0) { comm_recv(&pc.world, buf, sizeof(buf), pc.world_size, 0); }
    else if (strcmp(what, "root") == 0) { comm_broadcast(&pc.world, buf, sizeof(buf), pc.world_size); }
    else if (strcmp(what, "overlap") == 0) { comm_alltoall_f32(&pc.world, buf, buf + 1, 2 / pc.world_size + 1); }
    else if (strcmp(what, "null") == 0) { comm_allreduce_sum_f32(&pc.world, NULL, 4); }
    else { fatal("--misuse-test '%s': one of tag, peer, root, overlap, null", what); }
    fprintf(stderr, "--misuse-test %s: the call was accepted\n", what);
    parallel_finalize(&pc);
    return 1;
}

// ----------------------------------------------------------------------------

// The default run: the suite on the world group at three chunk limits, then every layout the world size allows.
// comm_sent_bytes (the bytes a rank sends, as a ring does it: the --bench table, the planner's communication time)
// against the closed forms for a group of 4 and a payload of 1000 bytes: an all-reduce 2 (p-1)/p of the buffer, a
// reduce-scatter, all-gather, reduce and all-to-all (p-1)/p, a gather and a scatter (p-1)/p^2, a broadcast and a send
// the whole payload, a receive and a barrier nothing; on one rank nothing at all.
static void test_sent_bytes(void) {
    const struct { int op; double want; } cases[] = {
        {COMM_OP_ALLREDUCE, 1500.0}, {COMM_OP_REDUCE_SCATTER, 750.0}, {COMM_OP_ALLGATHER, 750.0}, {COMM_OP_REDUCE, 750.0},
        {COMM_OP_ALLTOALL, 750.0}, {COMM_OP_GATHER, 187.5}, {COMM_OP_SCATTER, 187.5}, {COMM_OP_BROADCAST, 1000.0},
        {COMM_OP_SEND, 1000.0}, {COMM_OP_RECV, 0.0}, {COMM_OP_BARRIER, 0.0},
    };
    char detail[256] = "";
    int ok = 1;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        double got = comm_sent_bytes(cases[k].op, 1000.0, 4), one = comm_sent_bytes(cases[k].op, 1000.0, 1);
        if (got != cases[k].want || one != 0.0) {
            if (ok) { snprintf(detail, sizeof(detail), "%s: %g bytes on 4 ranks (want %g), %g on 1 (want 0)", comm_op_names[cases[k].op], got, cases[k].want, one); }
            ok = 0;
        }
    }
    check("comm_sent_bytes: each operation's ring bytes on 4 ranks and on 1", ok, detail);
}

#ifdef USE_MPI
// How many messages a transfer of n elements takes at most max_count a message: ceil(n / max_count), none for n 0
// (an extra empty message would carry nothing, and cost a request and a round trip).
static void test_chunk_count(void) {
    const size_t cases[][3] = {{0, 7, 0}, {1, 7, 1}, {7, 7, 1}, {8, 7, 2}, {14, 7, 2}, {15, 7, 3},
                               {(size_t)INT_MAX, (size_t)INT_MAX, 1}, {(size_t)INT_MAX + 5, (size_t)INT_MAX, 2}};
    char detail[160] = "";
    int ok = 1;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        size_t got = comm__chunks(cases[k][0], cases[k][1]);
        if (got != cases[k][2] && ok) {
            snprintf(detail, sizeof(detail), "%zu elements at %zu a message: %zu messages, want %zu", cases[k][0], cases[k][1], got, cases[k][2]);
            ok = 0;
        }
    }
    check("chunking: a transfer takes ceil(n / limit) messages, none when empty", ok, detail);
}
#endif

static void run_suite(void) {
    test_sent_bytes();
#ifdef USE_MPI
    test_chunk_count();
#endif
    // the whole suite on the world group, at the default chunk limit and at two small ones (chunked paths)
    test_group(&pc.world, "world");
    size_t limits[2] = { 1000, 7 };
    for (int k = 0; k < 2; k++) {
        char label[64];
        pc.max_count = limits[k];
        snprintf(label, sizeof(label), "world max_count=%zu", limits[k]);
        test_group(&pc.world, label);
    }
    pc.max_count = (size_t)INT_MAX;

    // every layout this world size allows; each runs the suite on its dp, tp and pp groups
    int W = pc.world_size;
    int layouts[][2] = { { 1, 1 }, { 2, 1 }, { 1, 2 }, { 2, 2 }, { 0, 1 }, { 1, 0 } }; // 0 = world size
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
        int tp = layouts[i][0] ? layouts[i][0] : W, pp = layouts[i][1] ? layouts[i][1] : W;
        char err[256];
        if (!parallel_layout_valid(W, tp, pp, err, sizeof(err))) { continue; }
        if (i >= 4 && W <= 2) { continue; } // tp = W or pp = W already covered by the 2-way layouts
        test_layout(tp, pp, 1);
    }
}

int main(int argc, char** argv) {
    parallel_init(&pc, &argc, &argv);
    const char* mode = NULL, *misuse = NULL;
    double timeout_s = 3.0;
    int hang_rank = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--hang-test") || !strcmp(argv[i], "--kill-test") || !strcmp(argv[i], "--exit-test") ||
            !strcmp(argv[i], "--layout-error-test") || !strcmp(argv[i], "--big-test") || !strcmp(argv[i], "--mismatch-test") ||
            !strcmp(argv[i], "--dead-test") || !strcmp(argv[i], "--short-message-test") || !strcmp(argv[i], "--stuck-test")) {
            mode = argv[i];
        } else if (!strcmp(argv[i], "--misuse-test") && i + 1 < argc) {
            misuse = argv[++i];
        } else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
            char* end = NULL;
            timeout_s = strtod(argv[++i], &end);
            if (end == argv[i] || *end != '\0' || !(timeout_s > 0.0)) { fatal("--timeout '%s' must be a number > 0", argv[i]); }
        } else if (!strcmp(argv[i], "--hang-rank") && i + 1 < argc) {
            char* end = NULL;
            long r = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || r < 1 || r > 1 << 20) { fatal("--hang-rank '%s' must be an integer >= 1", argv[i]); }
            hang_rank = (int)r;
        } else {
            fatal("unknown argument '%s' (flags: --big-test, --hang-test, --kill-test, --exit-test, --mismatch-test, --dead-test, --stuck-test, "
                  "--short-message-test, --layout-error-test, --misuse-test CASE, --timeout S, --hang-rank R)", argv[i]);
        }
    }
    if (misuse) { return misuse_mode(misuse); }
    if (mode && strcmp(mode, "--big-test") != 0) { return failure_mode(mode, timeout_s, hang_rank); }

    if (pc.world_rank == 0) {
        printf("test_comm: %d rank(s) on %d node(s)%s\n", pc.world_size, pc.nodes,
#ifdef USE_MPI
               ""
#else
               " (built without MPI)"
#endif
        );
    }
    check("world group", pc.world.size == pc.world_size && pc.world.rank == pc.world_rank && pc.world_rank >= 0 &&
          pc.world_rank < pc.world_size, "world group does not match world rank/size");
    check("defaults: timeout 300 s, max_count INT_MAX", pc.timeout_s == 300.0 && pc.max_count == (size_t)INT_MAX,
          "unexpected defaults");
    {
        CommRequest z;
        memset(&z, 0, sizeof(z));
        comm_wait(&z);
        check("zeroed request", comm_test(&z) == 1, "comm_test on a zeroed request did not return 1");
    }
#ifdef USE_MPI
    {
        const char* tuning = getenv("COMM_MPI_TUNING");
        if (tuning == NULL || strcmp(tuning, "0") != 0) {
            check("MPI tuning: OMPI_MCA_coll_libnbc_iallreduce_algorithm set before MPI_Init",
                  getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != NULL, "not set");
        }
    }
#endif
    test_layout_validation();
    test_pid_dead();

    if (mode) { // --big-test
        test_big();
    } else {
        run_suite();
    }
    int failed = n_failed;
#ifdef USE_MPI
    mpiCheck(MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD));
#endif
    parallel_finalize(&pc);
    if (pc.world_rank == 0) {
        printf("%d passed, %d failed\n", n_passed, n_failed);
        fflush(stdout);
    }
    return failed ? 1 : 0;
}
