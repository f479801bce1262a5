/*
tests/test_powersgd.c: tests of powersgd.h (PowerSGD compression of the data-parallel gradient reduction) on 1 to 4
ranks, against a double-precision reference of the algorithm written out here independently (the same steps as the
header's math: error feedback, P = sum M Q, Gram-Schmidt, Q' = sum M^T P^, A = P^ Q'^T, e = M - A / W, warm start).

    make tests/test_powersgd
    ./tests/test_powersgd                                                  (one rank, no mpirun)
    mpirun --allow-run-as-root --oversubscribe -np 3 ./tests/test_powersgd (1..4; scripts/run_tests.sh runs them)

Every rank builds every rank's gradients from a hash of (rank, step, element), so each can run the reference for
the whole group and compare its own results. A check fails if it fails on any rank; each failing rank prints its
detail, rank 0 the verdict. Last line: "N passed, M failed".
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "comm.h"     // defines: ParallelContext, parallel_*, comm_allreduce_*, comm_broadcast
#include "powersgd.h" // defines: PowerSgd, powersgd_init, powersgd_reduce, powersgd_payload, powersgd_spec_rank

static ParallelContext pc;
static int n_passed = 0, n_failed = 0; // counted on rank 0

// Records one check over the world: a rank where it failed prints its detail, rank 0 prints PASS or FAIL.
static void __attribute__((format(printf, 3, 4))) check(const char* name, int ok, const char* fmt, ...) {
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    double bad = !ok;
    comm_allreduce_max_f64(&pc.world, &bad, 1);
    if (!ok) { printf("  rank %d: %s: %s\n", pc.world_rank, name, detail); fflush(stdout); }
    comm_barrier(&pc.world);
    if (pc.world_rank == 0) {
        if (bad == 0.0) { n_passed++; printf("PASS %s (%s)\n", name, detail); }
        else { n_failed++; printf("FAIL %s\n", name); }
        fflush(stdout);
    }
}

// ----------------------------------------------------------------------------
// gradients: a hash of (rank, step, element)

static double hval(uint64_t w, uint64_t step, uint64_t i) { // uniform in [-1, 1)
    uint64_t h = powersgd__mix(powersgd__mix(w * 1000003ull + step) ^ (i * 0x9E3779B97F4A7C15ull));
    return (double)(h >> 11) / 4503599627370496.0 - 1.0;
}

// The test layout: vectors, compressed matrices (one of 600 rows: three chunks of Q' partial sums), a matrix too
// small to gain at rank 3 (3 x 3), padding after the last tensor. Two buckets.
#define NT 5
static const PowerSgdTensor LAYOUT[NT] = {
    {0, 1, 7},        // a vector
    {7, 37, 23},      // compressed
    {858, 3, 3},      // (3 + 3) 3 >= 9: all-reduced as it is
    {867, 1, 5},      // a vector
    {872, 600, 20},   // compressed
};
static const size_t LAYOUT_N = 872 + 600 * 20 + 3;
static const size_t BUCKETS[2][2] = {{0, 867}, {867, 872 + 600 * 20 + 3}};

static int in_compressed(size_t i, int R) {
    for (int t = 0; t < NT; t++) {
        const PowerSgdTensor* x = &LAYOUT[t];
        if (i >= x->offset && i < x->offset + x->rows * x->cols) { return powersgd_compresses(x->rows, x->cols, R); }
    }
    return 0;
}

// Rank w's gradient at step s: uniform values in compressed matrices, small integers elsewhere (exact sums).
static void make_grad(float* g, size_t n, int w, int s, int R) {
    for (size_t i = 0; i < n; i++) {
        double v = hval((uint64_t)w, (uint64_t)s, i);
        g[i] = in_compressed(i, R) ? (float)v : (float)floor(v * 50.0);
    }
}

// ----------------------------------------------------------------------------
// the reference: the whole group's PowerSGD in double, one matrix at a time

typedef struct {
    int W, R;
    double* e;   // (W, n) every rank's error feedback
    double* q;   // (n * R) each compressed matrix's Q at its offset * R (room enough)
} Ref;

static void ref_init(Ref* r, int W, int R, uint64_t seed, const PowerSgd* ps) {
    r->W = W;
    r->R = R;
    r->e = (double*)callocCheck((size_t)W * LAYOUT_N, sizeof(double));
    r->q = (double*)callocCheck(LAYOUT_N * (size_t)R, sizeof(double));
    // Q's initial values: the header's seeded normals (the definition of the start, not of the algorithm)
    for (int t = 0; t < ps->num_tensors; t++) {
        const PowerSgdTensor* x = &ps->tensors[t];
        for (size_t j = 0; j < x->cols; j++) {
            for (int c = 0; c < R; c++) { r->q[x->offset * R + j * R + c] = powersgd__normal(seed, (uint64_t)t, (uint64_t)c * x->cols + j); }
        }
    }
}

static void ref_free(Ref* r) { free(r->e); free(r->q); }

// One step for all ranks: grads (W, n) in; out (n): the sum the optimizer gets (A on compressed matrices).
static void ref_step(Ref* r, const float* grads, double* out) {
    int W = r->W, R = r->R;
    size_t n = LAYOUT_N;
    for (size_t i = 0; i < n; i++) {
        out[i] = 0.0;
        for (int w = 0; w < W; w++) { out[i] += grads[(size_t)w * n + i]; }
    }
    for (int t = 0; t < NT; t++) {
        const PowerSgdTensor* x = &LAYOUT[t];
        if (!powersgd_compresses(x->rows, x->cols, R)) { continue; }
        size_t rows = x->rows, cols = x->cols, o = x->offset;
        double* M = (double*)mallocCheck((size_t)W * rows * cols * sizeof(double));
        for (int w = 0; w < W; w++) {
            for (size_t k = 0; k < rows * cols; k++) { M[w * rows * cols + k] = grads[(size_t)w * n + o + k] + r->e[(size_t)w * n + o + k]; }
        }
        double* Q = r->q + o * R;
        double* P = (double*)callocCheck(rows * R, sizeof(double));
        for (int w = 0; w < W; w++) {
            for (size_t i = 0; i < rows; i++) {
                for (int c = 0; c < R; c++) {
                    double s = 0.0;
                    for (size_t j = 0; j < cols; j++) { s += M[w * rows * cols + i * cols + j] * Q[j * R + c]; }
                    P[i * R + c] += s;
                }
            }
        }
        // classical Gram-Schmidt, run twice (as accurate as the modified form at these sizes)
        for (int c = 0; c < R; c++) {
            for (int pass = 0; pass < 2; pass++) {
                for (int d = 0; d < c; d++) {
                    double dot = 0.0;
                    for (size_t i = 0; i < rows; i++) { dot += P[i * R + d] * P[i * R + c]; }
                    for (size_t i = 0; i < rows; i++) { P[i * R + c] -= dot * P[i * R + d]; }
                }
            }
            double ss = 0.0;
            for (size_t i = 0; i < rows; i++) { ss += P[i * R + c] * P[i * R + c]; }
            for (size_t i = 0; i < rows; i++) { P[i * R + c] = ss > 0 ? P[i * R + c] / sqrt(ss) : 0.0; }
        }
        for (size_t j = 0; j < cols; j++) {
            for (int c = 0; c < R; c++) {
                double s = 0.0;
                for (int w = 0; w < W; w++) {
                    for (size_t i = 0; i < rows; i++) { s += M[w * rows * cols + i * cols + j] * P[i * R + c]; }
                }
                Q[j * R + c] = s; // the warm start of the next step
            }
        }
        for (size_t i = 0; i < rows; i++) {
            for (size_t j = 0; j < cols; j++) {
                double a = 0.0;
                for (int c = 0; c < R; c++) { a += P[i * R + c] * Q[j * R + c]; }
                out[o + i * cols + j] = a;
                for (int w = 0; w < W; w++) { r->e[(size_t)w * n + o + i * cols + j] = M[w * rows * cols + i * cols + j] - a / W; }
            }
        }
        free(M);
        free(P);
    }
}

// ----------------------------------------------------------------------------
// the checks

static void test_spec(void) {
    char err[256];
    int ok = powersgd_spec_rank("powersgd:4", err, sizeof(err)) == 4 && powersgd_spec_rank("powersgd:1", err, sizeof(err)) == 1 &&
             powersgd_spec_rank("powersgd:64", err, sizeof(err)) == 64 && powersgd_spec_rank("none", err, sizeof(err)) == 0 &&
             powersgd_spec_rank("bf16", err, sizeof(err)) == 0;
    check("powersgd:R parses R; none and bf16 are not PowerSGD", ok, "powersgd:4, :1, :64, none, bf16");
    const char* bad[] = {"powersgd", "powersgd:", "powersgd:0", "powersgd:-1", "powersgd:+4", "powersgd: 4", "powersgd:4x",
                         "powersgd:65", "powersgd:99999999999999999999", "powersgd4", "powersgd:4:2"};
    int all = 1;
    char which[256] = "";
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        err[0] = '\0';
        int r = powersgd_spec_rank(bad[k], err, sizeof(err));
        if (r != -1 || !strstr(err, "powersgd:R")) { all = 0; snprintf(which, sizeof(which), "'%s' gave %d (%s)", bad[k], r, err); }
    }
    check("malformed powersgd specs are refused with a message", all, "%s", all ? "11 specs" : which);
    check("only matrices whose factors are smaller are compressed", powersgd_compresses(5, 5, 2) && !powersgd_compresses(4, 4, 2) &&
          !powersgd_compresses(1, 1000, 1) && !powersgd_compresses(3, 3, 3) && powersgd_compresses(3, 3, 1) && !powersgd_compresses(2, 100, 2),
          "(n + m) R < n m");
}

// T steps of the layout at rank R on this group against the reference: each step's result and this rank's error
// feedback, per compressed matrix (max difference over max magnitude), the uncompressed elements exactly.
static void test_against_reference(int R, int T) {
    int W = pc.dp, me = pc.dp_rank;
    size_t n = LAYOUT_N;
    uint64_t seed = 1234 + (uint64_t)R;
    PowerSgd ps;
    powersgd_init(&ps, &pc.dp_group, R, n, LAYOUT, NT, seed);
    Ref ref;
    ref_init(&ref, W, R, seed, &ps);
    float* all = (float*)mallocCheck((size_t)W * n * sizeof(float));
    float* g = (float*)mallocCheck(n * sizeof(float));
    double* out = (double*)mallocCheck(n * sizeof(double));
    double worst_a = 0.0, worst_e = 0.0;
    int exact = 1, payload_ok = 1;
    for (int s = 0; s < T; s++) {
        for (int w = 0; w < W; w++) { make_grad(all + (size_t)w * n, n, w, s, R); }
        memcpy(g, all + (size_t)me * n, n * sizeof(float));
        ref_step(&ref, all, out);
        for (int b = 0; b < 2; b++) {
            double before = ps.group->op_bytes[COMM_OP_ALLREDUCE];
            size_t sent = powersgd_reduce(&ps, g + BUCKETS[b][0], BUCKETS[b][0], BUCKETS[b][1]);
            double bytes = ps.group->op_bytes[COMM_OP_ALLREDUCE] - before;
            payload_ok = payload_ok && sent == powersgd_payload(&ps, BUCKETS[b][0], BUCKETS[b][1]) && bytes == 4.0 * sent;
        }
        for (int t = 0; t < NT; t++) {
            const PowerSgdTensor* x = &LAYOUT[t];
            size_t k = x->rows * x->cols;
            if (!powersgd_compresses(x->rows, x->cols, R)) {
                for (size_t i = 0; i < k; i++) { exact = exact && (double)g[x->offset + i] == out[x->offset + i]; }
                continue;
            }
            double amax = 0.0, emax = 0.0, da = 0.0, de = 0.0;
            for (size_t i = 0; i < k; i++) {
                size_t j = x->offset + i;
                double e_ref = ref.e[(size_t)me * n + j];
                amax = fmax(amax, fabs(out[j]));
                emax = fmax(emax, fabs(e_ref));
                double d1 = fabs(g[j] - out[j]), d2 = fabs(ps.error[j] - e_ref);
                if (!(d1 <= da)) { da = d1; } // NaN-propagating maxima
                if (!(d2 <= de)) { de = d2; }
            }
            if (!(da / amax <= worst_a)) { worst_a = da / amax; }
            if (!(de / emax <= worst_e)) { worst_e = de / emax; }
        }
        for (size_t i = 867 + 5 + 600 * 20; i < n; i++) { exact = exact && g[i] == out[i]; } // padding
    }
    char name[256];
    // tolerance: fp32 products accumulated in double, P^ and Q stored in fp32 between the steps: observed 3e-7
    snprintf(name, sizeof(name), "R %d, %d ranks, %d steps: decompressed sums equal the double reference (max diff / max |A| <= 1e-5)", R, W, T);
    check(name, worst_a <= 1e-5, "%.3g", worst_a);
    snprintf(name, sizeof(name), "R %d, %d ranks, %d steps: this rank's error feedback equals the reference's (<= 1e-5 of its max)", R, W, T);
    check(name, worst_e <= 1e-5, "%.3g", worst_e);
    snprintf(name, sizeof(name), "R %d, %d ranks: uncompressed elements (vectors, the 3 x 3 matrix, padding) are exact sums", R, W);
    check(name, exact, "compared with ==");
    snprintf(name, sizeof(name), "R %d, %d ranks: floats all-reduced = (n + m) R per matrix + the rest = the group's byte count / 4", R, W);
    check(name, payload_ok, "bucket payloads %zu and %zu floats", powersgd_payload(&ps, BUCKETS[0][0], BUCKETS[0][1]), powersgd_payload(&ps, BUCKETS[1][0], BUCKETS[1][1]));
    // the same on every rank, bit for bit (the trainer keeps its replicas identical through this)
    float* g0 = (float*)mallocCheck(n * sizeof(float));
    memcpy(g0, g, n * sizeof(float));
    comm_broadcast(&pc.world, g0, n * sizeof(float), 0);
    snprintf(name, sizeof(name), "R %d, %d ranks: every rank gets the same result, bit for bit", R, W);
    check(name, memcmp(g0, g, n * sizeof(float)) == 0, "%zu floats", n);
    free(g0);
    free(all);
    free(g);
    free(out);
    ref_free(&ref);
    powersgd_free(&ps);
}

// When R is at least the rank of the sum (every rank's gradient is U_w V^T with the same V, rank k), one step
// transmits the sum exactly and the error feedback sums to zero over the ranks.
static void test_exact_low_rank(int k, int R) {
    int W = pc.dp, me = pc.dp_rank;
    size_t rows = 40, cols = 30, n = rows * cols;
    PowerSgdTensor t = {0, rows, cols};
    PowerSgd ps;
    powersgd_init(&ps, &pc.dp_group, R, n, &t, 1, 99);
    float* g = (float*)mallocCheck(n * sizeof(float));
    double* sum = (double*)callocCheck(n, sizeof(double));
    for (int w = 0; w < W; w++) {
        for (size_t i = 0; i < rows; i++) {
            for (size_t j = 0; j < cols; j++) {
                double v = 0.0;
                for (int c = 0; c < k; c++) { v += hval((uint64_t)w, 7, i * 8 + c) * hval(1000, 7, j * 8 + c); }
                sum[i * cols + j] += (float)v;
                if (w == me) { g[i * cols + j] = (float)v; }
            }
        }
    }
    powersgd_reduce(&ps, g, 0, n);
    double amax = 0.0, da = 0.0;
    for (size_t i = 0; i < n; i++) { amax = fmax(amax, fabs(sum[i])); if (!(fabs(g[i] - sum[i]) <= da)) { da = fabs(g[i] - sum[i]); } }
    double* e = (double*)mallocCheck(n * sizeof(double));
    for (size_t i = 0; i < n; i++) { e[i] = ps.error[i]; }
    comm_allreduce_sum_f64(&pc.world, e, n);
    double de = 0.0;
    for (size_t i = 0; i < n; i++) { if (!(fabs(e[i]) <= de)) { de = fabs(e[i]); } }
    char name[256];
    // tolerance: fp32 rounding of P^, Q' and A (a few ulps of the largest element)
    snprintf(name, sizeof(name), "rank-%d sum, R %d, %d ranks: one step reconstructs it (max diff <= 1e-5 max |S|), errors sum to ~0", k, R, W);
    check(name, da <= 1e-5 * amax && de <= 1e-5 * amax, "max diff %.3g, max |sum of errors| %.3g, max |S| %.3g", da, de, amax);
    free(g);
    free(sum);
    free(e);
    powersgd_free(&ps);
}

// Error feedback loses nothing: over T steps at rank 1 (a poor approximation, so the error is large), the sum of
// the transmitted results plus the final error feedback of all ranks equals the sum of all gradients.
static void test_error_feedback_sum(int T) {
    int W = pc.dp, me = pc.dp_rank, R = 1;
    size_t n = LAYOUT_N;
    PowerSgd ps;
    powersgd_init(&ps, &pc.dp_group, R, n, LAYOUT, NT, 5);
    float* g = (float*)mallocCheck(n * sizeof(float));
    float* tmp = (float*)mallocCheck(n * sizeof(float));
    double* sent = (double*)callocCheck(n, sizeof(double));
    double* grads = (double*)callocCheck(n, sizeof(double));
    for (int s = 0; s < T; s++) {
        for (int w = 0; w < W; w++) {
            make_grad(tmp, n, w, s + 100, R);
            for (size_t i = 0; i < n; i++) { grads[i] += tmp[i]; }
            if (w == me) { memcpy(g, tmp, n * sizeof(float)); }
        }
        powersgd_reduce(&ps, g, 0, 867);
        powersgd_reduce(&ps, g + 867, 867, n);
        for (size_t i = 0; i < n; i++) { sent[i] += g[i]; }
    }
    double* e = (double*)mallocCheck(n * sizeof(double));
    for (size_t i = 0; i < n; i++) { e[i] = ps.error[i]; }
    comm_allreduce_sum_f64(&pc.world, e, n);
    double worst = 0.0, gmax = 0.0, emax = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(sent[i] + e[i] - grads[i]);
        if (!(d <= worst)) { worst = d; }
        if (in_compressed(i, R)) { gmax = fmax(gmax, fabs(grads[i])); } // the vectors' integer sums are larger
        emax = fmax(emax, fabs(e[i]));
    }
    char name[256];
    // tolerance: T steps of fp32 rounding in M = G + e, A and e (each ~1e-7 of values of order 1..W T)
    snprintf(name, sizeof(name), "error feedback, R 1, %d ranks, %d steps: sum of results + sum of final errors = sum of gradients (<= 1e-5 max)", W, T);
    check(name, worst <= 1e-5 * gmax && emax > 0.1 * gmax, "max diff %.3g, max |sum of the matrices' gradients| %.3g, max |error| %.3g (large: rank 1 leaves much behind)",
          worst, gmax, emax);
    free(g);
    free(tmp);
    free(sent);
    free(grads);
    free(e);
    powersgd_free(&ps);
}

// A NaN in one rank's matrix: every rank's compressed matrices become NaN (the norm sees it everywhere), the
// vectors are still summed, and the error feedback and Q stay as they were (the step is not applied).
static void test_nonfinite(void) {
    int me = pc.dp_rank, R = 2;
    size_t n = LAYOUT_N;
    PowerSgd ps;
    powersgd_init(&ps, &pc.dp_group, R, n, LAYOUT, NT, 8);
    float* g = (float*)mallocCheck(n * sizeof(float));
    make_grad(g, n, me, 0, R);
    powersgd_reduce(&ps, g, 0, n); // one good step: a non-zero error feedback and a warm Q
    float* e0 = (float*)mallocCheck(n * sizeof(float));
    float* q0 = (float*)mallocCheck(ps.q_floats * sizeof(float));
    memcpy(e0, ps.error, n * sizeof(float));
    memcpy(q0, ps.q, ps.q_floats * sizeof(float));
    make_grad(g, n, me, 1, R);
    if (me == pc.dp - 1) { g[872 + 5 * 20 + 3] = NAN; }
    powersgd_reduce(&ps, g, 0, n);
    int nan_matrices = 1, vectors_finite = 1;
    for (int t = 0; t < NT; t++) {
        const PowerSgdTensor* x = &LAYOUT[t];
        for (size_t i = 0; i < x->rows * x->cols; i++) {
            float v = g[x->offset + i];
            if (powersgd_compresses(x->rows, x->cols, R)) { nan_matrices = nan_matrices && isnan(v); }
            else { vectors_finite = vectors_finite && isfinite(v); }
        }
    }
    int kept = memcmp(e0, ps.error, n * sizeof(float)) == 0 && memcmp(q0, ps.q, ps.q_floats * sizeof(float)) == 0;
    check("a NaN on one rank: every rank's matrices NaN, vectors still summed, error feedback and Q unchanged",
          nan_matrices && vectors_finite && kept, "matrices NaN %d, vectors finite %d, state kept %d", nan_matrices, vectors_finite, kept);
    free(g);
    free(e0);
    free(q0);
    powersgd_free(&ps);
}

// The same inputs with 1 and 3 threads give the same bits (fixed chunks, one thread per output element).
static void test_threads(void) {
#ifdef _OPENMP
    int me = pc.dp_rank, R = 4;
    size_t n = LAYOUT_N;
    float* out[2];
    float* err[2];
    int threads[2] = {1, 3};
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(threads[k]);
        PowerSgd ps;
        powersgd_init(&ps, &pc.dp_group, R, n, LAYOUT, NT, 3);
        out[k] = (float*)mallocCheck(n * sizeof(float));
        for (int s = 0; s < 2; s++) {
            make_grad(out[k], n, me, s, R);
            powersgd_reduce(&ps, out[k], 0, n);
        }
        err[k] = (float*)mallocCheck(n * sizeof(float));
        memcpy(err[k], ps.error, n * sizeof(float));
        powersgd_free(&ps);
    }
    omp_set_num_threads(saved);
    check("1 and 3 threads: the same results and error feedback, bit for bit", memcmp(out[0], out[1], n * sizeof(float)) == 0 &&
          memcmp(err[0], err[1], n * sizeof(float)) == 0, "2 steps, R 4");
    for (int k = 0; k < 2; k++) { free(out[k]); free(err[k]); }
#else
    if (pc.world_rank == 0) { printf("SKIP threads: built without OpenMP\n"); }
#endif
}

int main(int argc, char** argv) {
    parallel_init(&pc, &argc, &argv);
    if (argc > 1) { fatal("test_powersgd: no flags (run it under mpirun -np 1..4)"); }
    parallel_set_layout(&pc, 1, 1, 120.0);
    if (pc.world_rank == 0) { printf("test_powersgd: %d rank(s)\n", pc.world_size); }
    test_spec();
    test_against_reference(3, 4);
    test_against_reference(1, 3);
    test_exact_low_rank(2, 2);
    test_exact_low_rank(2, 4);
    test_exact_low_rank(1, 3);
    test_error_feedback_sum(6);
    test_nonfinite();
    test_threads();
    if (pc.world_rank == 0) { printf("%d passed, %d failed\n", n_passed, n_failed); fflush(stdout); }
    int failed = n_failed;
    double f = failed;
    comm_allreduce_max_f64(&pc.world, &f, 1);
    parallel_finalize(&pc);
    return f > 0 ? 1 : 0;
}
