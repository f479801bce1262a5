/*
powersgd.h: PowerSGD gradient compression for the data-parallel reduction (--grad-compress powersgd:R), after
Vogels, Karimireddy and Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for Distributed Optimization"
(NeurIPS 2019), with error feedback and warm-started Q factors as in the paper and in PyTorch's DDP hook. Every
gradient matrix (n x m) for which a rank-R factorisation is smaller, (n + m) R < n m, travels as two thin factors,
n x R and m x R; everything else (biases, LayerNorm weights, matrices too small to gain) is all-reduced as it is,
in the same message as the first factors.

Only static functions, over the collectives of comm.h on HOST buffers: zero.h hands each bucket's staged host copy
to powersgd_reduce when the bucket is final (the last micro-step) and copies the result back to the device.
Tested by tests/test_powersgd.c (mpirun -np 1..4) against a double-precision reference.

The math, per compressed matrix and optimizer step. W data-parallel ranks; rank w holds G_w, its gradient, scaled
by the trainer so that the SUM G = sum_w G_w is the gradient of the mean loss (zero.h's convention: reductions
are sums), and e_w, its error feedback (zero at the start, one per rank, the size of the gradient):

    M_w = G_w + e_w                  error feedback: what this rank has not yet had transmitted is sent again
    P   = sum_w M_w Q                all-reduce of P_w = M_w Q   (n x R; Q is m x R, the same on every rank)
    P^  = orth(P)                    Gram-Schmidt on the columns, in double, identically on every rank
    Q'  = sum_w M_w^T P^             all-reduce                  (m x R)
    A   = P^ Q'^T = P^ P^^T S        the decompressed result: S = sum_w M_w projected onto the span of P^; the
                                     same on every rank, and what the optimizer gets in place of the sum G
    e_w = M_w - A / W                each rank keeps its own part of what was not transmitted
    Q   = Q'                         warm start: next step's power iteration starts from this step's Q

The paper and PyTorch work with means: rank w's gradient is g_w = W G_w, the aggregate is the mean of the M_w,
and each rank keeps "its input minus the decompressed aggregate", e_w = M_w - P^ P^^T mean_w(M_w). Divided by W
that is the line above: A / W is each rank's share of the transmitted sum. Summed over the ranks,
sum_w e_w = S - A, the part of this step's error-corrected sum that was not transmitted, so after T steps

    sum_{t<=T} A_t + sum_w e_w(T) = sum_{t<=T} sum_w G_w(t)

every gradient is applied, some of it late, none of it lost (tests/test_powersgd.c checks this). P and Q' depend
on the M_w only through S, so in exact arithmetic the split of S - A among the ranks does not matter; a
checkpoint's error feedback therefore resumes on another number of ranks by adding rank s's to rank s mod W'.

Q starts as a seeded normal matrix, the same on every rank (a hash of the seed, the matrix and the element). A step
whose P is not finite (a NaN or inf gradient on some rank) leaves the error feedback and Q as they were and makes
every compressed matrix NaN on every rank, so that the trainer's gradient norm is NaN everywhere and the step is
skipped or stopped (--nan-policy) instead of poisoning the error feedback for good.

The matrix products (P = M Q, Q' = M^T P^, A = P^ Q'^T, each n m R multiply-adds) are plain loops on the host,
accumulated in double; each output element is computed by one thread in a fixed order (Q' over fixed chunks of
POWERSGD_CHUNK_ROWS rows, summed in chunk order), so the result does not depend on the number of threads.
*/
#ifndef POWERSGD_H
#define POWERSGD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#include "utils.h"

#define POWERSGD_MAX_RANK 64      // the largest R accepted (PyTorch's users pick 1 to 32)
#define POWERSGD_CHUNK_ROWS 256   // rows per partial sum of Q' = M^T P^

// One tensor of the flat gradient layout: a row-major rows x cols matrix at offset (rows 1: a vector).
typedef struct {
    size_t offset;
    size_t rows, cols;
} PowerSgdTensor;

typedef struct {
    CommGroup* group;          // the data-parallel group the reductions run on
    int rank;                  // R, the rank of the approximation
    size_t n;                  // elements of the flat layout covered (the error feedback's length)
    int num_tensors;           // compressed matrices
    PowerSgdTensor* tensors;   // (num_tensors) the compressed matrices, by ascending offset
    size_t* q_offset;          // (num_tensors) where each one's Q (cols x R) starts in q
    size_t q_floats;           // sum of cols R over the compressed matrices
    size_t compressed_elems;   // sum of rows cols over the compressed matrices
    float* error;              // (n) this rank's error feedback, by flat index (zero outside compressed matrices)
    float* q;                  // (q_floats) the warm-started Q factors, identical on every rank (each cols x R, by
                               // column: element (j, c) of matrix t at q_offset[t] + c cols + j)
    float* buf;                // (buf_cap) a bucket's first all-reduce: its P factors (each by column), then its
                               // uncompressed elements
    size_t buf_cap;
    double* work;              // (work_cap) orthogonalisation, and the partial sums of Q'
    size_t work_cap;
    uint64_t seed;             // Q's initial values
} PowerSgd;

// ----------------------------------------------------------------------------
// the flag

// Reads a --grad-compress value: 0 when it does not name PowerSGD; R when it is "powersgd:R" with R an integer in
// [1, POWERSGD_MAX_RANK]; -1 with a message in err when it names PowerSGD badly ("powersgd", "powersgd:0", ...).
static int powersgd_spec_rank(const char* spec, char* err, size_t cap) {
    const char* name = "powersgd";
    size_t k = strlen(name);
    if (strncmp(spec, name, k) != 0) { return 0; }
    const char* v = spec + k;
    long r = -1;
    char* end = NULL;
    if (*v == ':' && v[1] >= '0' && v[1] <= '9') { r = strtol(v + 1, &end, 10); }
    if (r < 1 || r > POWERSGD_MAX_RANK || !end || *end != '\0') {
        snprintf(err, cap, "'%s': PowerSGD takes its rank as powersgd:R, R an integer from 1 to %d (powersgd:4, for example)",
                 spec, POWERSGD_MAX_RANK);
        return -1;
    }
    return (int)r;
}

// ----------------------------------------------------------------------------
// setup

static uint64_t powersgd__mix(uint64_t x) { // splitmix64's finaliser
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A standard normal value keyed by (seed, matrix, element): Box-Muller on two hashed uniforms.
static float powersgd__normal(uint64_t seed, uint64_t matrix, uint64_t elem) {
    uint64_t a = powersgd__mix(seed ^ powersgd__mix((matrix << 40) ^ elem));
    uint64_t b = powersgd__mix(a ^ 0x5053474451ull);
    double u1 = ((double)(a >> 11) + 1.0) / 9007199254740992.0; // (0, 1]
    double u2 = (double)(b >> 11) / 9007199254740992.0;         // [0, 1)
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// Whether a rows x cols matrix is compressed at rank R: only when the factors are smaller than the matrix
// (PyTorch's rule with a minimum compression rate of 1; a vector never is).
static int powersgd_compresses(size_t rows, size_t cols, int R) {
    return (rows + cols) * (size_t)R < rows * cols;
}

static int powersgd__cmp_offset(const void* a, const void* b) {
    size_t x = ((const PowerSgdTensor*)a)->offset, y = ((const PowerSgdTensor*)b)->offset;
    return x < y ? -1 : x > y;
}

// Q of every compressed matrix from the seed (the same on every rank): element k of its storage from (seed, t, k).
static void powersgd_reset_q(PowerSgd* ps) {
    for (int t = 0; t < ps->num_tensors; t++) {
        size_t k = ps->tensors[t].cols * (size_t)ps->rank;
        for (size_t i = 0; i < k; i++) { ps->q[ps->q_offset[t] + i] = powersgd__normal(ps->seed, (uint64_t)t, (uint64_t)i); }
    }
}

// Sets up rank R over the data-parallel group for a flat gradient layout of n elements made of the `count` tensors
// (any order; the matrices among them that gain are compressed). The error feedback starts at zero, Q from seed.
static void powersgd_init(PowerSgd* ps, CommGroup* group, int R, size_t n, const PowerSgdTensor* all, int count, uint64_t seed) {
    memset(ps, 0, sizeof(*ps));
    if (R < 1 || R > POWERSGD_MAX_RANK) { fatal("powersgd: rank %d is outside [1, %d]", R, POWERSGD_MAX_RANK); }
    ps->group = group;
    ps->rank = R;
    ps->n = n;
    ps->seed = seed;
    ps->tensors = (PowerSgdTensor*)mallocCheck(sizeof(PowerSgdTensor) * (size_t)(count > 0 ? count : 1));
    for (int i = 0; i < count; i++) {
        const PowerSgdTensor* x = &all[i];
        if (x->offset > n || mulSize(x->rows, x->cols) > n - x->offset) {
            fatal("internal: powersgd tensor %d (%zu x %zu at %zu) lies outside the %zu-element layout", i, x->rows, x->cols, x->offset, n);
        }
        if (powersgd_compresses(x->rows, x->cols, R)) { ps->tensors[ps->num_tensors++] = *x; }
    }
    qsort(ps->tensors, (size_t)ps->num_tensors, sizeof(PowerSgdTensor), powersgd__cmp_offset);
    ps->q_offset = (size_t*)mallocCheck(sizeof(size_t) * (size_t)(ps->num_tensors > 0 ? ps->num_tensors : 1));
    for (int t = 0; t < ps->num_tensors; t++) {
        const PowerSgdTensor* x = &ps->tensors[t];
        if (t > 0 && ps->tensors[t - 1].offset + ps->tensors[t - 1].rows * ps->tensors[t - 1].cols > x->offset) {
            fatal("internal: powersgd tensors overlap at flat offset %zu", x->offset);
        }
        ps->q_offset[t] = ps->q_floats;
        ps->q_floats += x->cols * (size_t)R;
        ps->compressed_elems += x->rows * x->cols;
    }
    ps->error = (float*)callocCheck(n, sizeof(float));
    ps->q = (float*)mallocCheck(mulSize(ps->q_floats, sizeof(float)));
    powersgd_reset_q(ps);
}

static void powersgd_free(PowerSgd* ps) {
    free(ps->tensors);
    free(ps->q_offset);
    free(ps->error);
    free(ps->q);
    free(ps->buf);
    free(ps->work);
    memset(ps, 0, sizeof(*ps));
}

// Host bytes this state holds: the error feedback and Q (the scratch grows to the largest bucket's factors).
static size_t powersgd_state_bytes(const PowerSgd* ps) { return (ps->n + ps->q_floats) * sizeof(float); }

// Whether the error feedback and Q hold only finite values (a checkpoint never stores anything else).
static int powersgd_state_finite(const PowerSgd* ps) {
    int ok = 1;
    for (size_t i = 0; i < ps->n && ok; i++) { ok = isfinite(ps->error[i]); }
    for (size_t i = 0; i < ps->q_floats && ok; i++) { ok = isfinite(ps->q[i]); }
    return ok;
}

// The compressed matrices inside flat range [lo, hi): [*first, *last). A compressed matrix that straddles lo or hi
// is an error of the caller (buckets are whole tensors).
static void powersgd__range(const PowerSgd* ps, size_t lo, size_t hi, int* first, int* last) {
    int a = 0;
    while (a < ps->num_tensors && ps->tensors[a].offset < lo) { a++; }
    if (a > 0 && ps->tensors[a - 1].offset + ps->tensors[a - 1].rows * ps->tensors[a - 1].cols > lo) {
        fatal("internal: powersgd bucket [%zu, %zu) cuts a compressed matrix", lo, hi);
    }
    int b = a;
    while (b < ps->num_tensors && ps->tensors[b].offset < hi) {
        if (ps->tensors[b].offset + ps->tensors[b].rows * ps->tensors[b].cols > hi) {
            fatal("internal: powersgd bucket [%zu, %zu) cuts a compressed matrix", lo, hi);
        }
        b++;
    }
    *first = a;
    *last = b;
}

// Floats each rank all-reduces to reduce flat range [lo, hi) (its factors and its uncompressed elements), against
// hi - lo without compression.
static size_t powersgd_payload(const PowerSgd* ps, size_t lo, size_t hi) {
    int a, b;
    powersgd__range(ps, lo, hi, &a, &b);
    size_t floats = hi - lo;
    for (int t = a; t < b; t++) {
        const PowerSgdTensor* x = &ps->tensors[t];
        floats = floats - x->rows * x->cols + (x->rows + x->cols) * (size_t)ps->rank;
    }
    return floats;
}

static void powersgd__reserve(float** p, size_t* cap, size_t need) {
    if (need <= *cap) { return; }
    free(*p);
    *p = (float*)mallocCheck(mulSize(need, sizeof(float)));
    *cap = need;
}

static void powersgd__reserve_work(PowerSgd* ps, size_t need) {
    if (need <= ps->work_cap) { return; }
    free(ps->work);
    ps->work = (double*)mallocCheck(mulSize(need, sizeof(double)));
    ps->work_cap = need;
}

// ----------------------------------------------------------------------------
// the products. m: a rows x cols matrix, row-major. Factors are stored by column: p (rows x R) as R columns of rows
// floats, q (cols x R) as R columns of cols floats, so that every inner loop runs over contiguous elements.

// p = m q: each element a dot product of a row of m with a column of q, in double (`omp simd` lets the compiler
// vectorise the sum in a fixed order: the same bits on every run and every rank, whatever the thread count).
static void powersgd__mul_mq(float* p, const float* m, const float* q, size_t rows, size_t cols, int R) {
    #pragma omp parallel for
    for (size_t i = 0; i < rows; i++) {
        const float* mi = m + i * cols;
        for (int c = 0; c < R; c++) {
            const float* qc = q + (size_t)c * cols;
            double s = 0.0;
            #pragma omp simd reduction(+ : s)
            for (size_t j = 0; j < cols; j++) { s += (double)mi[j] * qc[j]; }
            p[(size_t)c * rows + i] = (float)s;
        }
    }
}

// q = m^T p, through fixed chunks of POWERSGD_CHUNK_ROWS rows: each chunk's partial sums (R x cols doubles in work)
// accumulate row by row, then the chunks are added in order.
static void powersgd__mul_mtp(float* q, const float* m, const float* p, size_t rows, size_t cols, int R, double* work) {
    size_t chunks = (rows + POWERSGD_CHUNK_ROWS - 1) / POWERSGD_CHUNK_ROWS, width = cols * (size_t)R;
    #pragma omp parallel for
    for (size_t k = 0; k < chunks; k++) {
        double* part = work + k * width;
        memset(part, 0, width * sizeof(double));
        size_t i1 = (k + 1) * POWERSGD_CHUNK_ROWS < rows ? (k + 1) * POWERSGD_CHUNK_ROWS : rows;
        for (size_t i = k * POWERSGD_CHUNK_ROWS; i < i1; i++) {
            const float* mi = m + i * cols;
            for (int c = 0; c < R; c++) {
                double pc = p[(size_t)c * rows + i];
                double* out = part + (size_t)c * cols;
                for (size_t j = 0; j < cols; j++) { out[j] += pc * mi[j]; }
            }
        }
    }
    #pragma omp parallel for
    for (size_t e = 0; e < width; e++) {
        double s = 0.0;
        for (size_t k = 0; k < chunks; k++) { s += work[k * width + e]; }
        q[e] = (float)s;
    }
}

// Orthonormalises the R columns of p in place: modified Gram-Schmidt in double (work: rows x R). A column with
// nothing left once the earlier ones are taken out (norm 0) becomes zero and adds nothing.
static void powersgd__orthogonalize(float* p, size_t rows, int R, double* work) {
    size_t nr = rows * (size_t)R;
    for (size_t i = 0; i < nr; i++) { work[i] = p[i]; }
    for (int c = 0; c < R; c++) {
        double* wc = work + (size_t)c * rows;
        double ss = 0.0;
        for (size_t i = 0; i < rows; i++) { ss += wc[i] * wc[i]; }
        double inv = ss > 0.0 ? 1.0 / sqrt(ss) : 0.0;
        for (size_t i = 0; i < rows; i++) { wc[i] *= inv; }
        for (int d = c + 1; d < R; d++) {
            double* wd = work + (size_t)d * rows;
            double dot = 0.0;
            for (size_t i = 0; i < rows; i++) { dot += wc[i] * wd[i]; }
            for (size_t i = 0; i < rows; i++) { wd[i] -= dot * wc[i]; }
        }
    }
    for (size_t i = 0; i < nr; i++) { p[i] = (float)work[i]; }
}

#define POWERSGD__BLOCK 64 // columns of A computed together (a row's running sums on the stack)

// m holds M on entry; on return m = A = p q^T (the decompressed sum) and err = M - A / W.
static void powersgd__decompress(float* m, float* err, const float* p, const float* q, size_t rows, size_t cols, int R, int W) {
    #pragma omp parallel for
    for (size_t i = 0; i < rows; i++) {
        for (size_t j0 = 0; j0 < cols; j0 += POWERSGD__BLOCK) {
            size_t nb = cols - j0 < POWERSGD__BLOCK ? cols - j0 : POWERSGD__BLOCK;
            double a[POWERSGD__BLOCK] = {0};
            for (int c = 0; c < R; c++) {
                double pc = p[(size_t)c * rows + i];
                const float* qc = q + (size_t)c * cols + j0;
                for (size_t j = 0; j < nb; j++) { a[j] += pc * qc[j]; }
            }
            float* mi = m + i * cols + j0;
            float* ei = err + i * cols + j0;
            for (size_t j = 0; j < nb; j++) {
                ei[j] = (float)((double)mi[j] - a[j] / W);
                mi[j] = (float)a[j];
            }
        }
    }
}

// ----------------------------------------------------------------------------
// the reduction

// Reduces flat range [lo, hi) of the gradient over the group: g (hi - lo floats, host memory; g[0] is flat index lo)
// holds this rank's gradient on entry and, on return, on every rank, the same result: each compressed matrix's
// decompressed sum A (see the top), every other element's exact sum. Collective (two all-reduces, one when the
// range holds no compressed matrix). Returns the floats this rank all-reduced.
static size_t powersgd_reduce(PowerSgd* ps, float* g, size_t lo, size_t hi) {
    int a, b, R = ps->rank, W = ps->group->size;
    if (hi > ps->n || lo > hi) { fatal("internal: powersgd range [%zu, %zu) outside the %zu-element layout", lo, hi, ps->n); }
    powersgd__range(ps, lo, hi, &a, &b);
    // the first message: every matrix's P = (G + e) Q, then the uncompressed elements in flat order
    size_t p_floats = 0, vec_floats = hi - lo, work = 0;
    for (int t = a; t < b; t++) {
        const PowerSgdTensor* x = &ps->tensors[t];
        size_t chunks = (x->rows + POWERSGD_CHUNK_ROWS - 1) / POWERSGD_CHUNK_ROWS;
        p_floats += x->rows * (size_t)R;
        vec_floats -= x->rows * x->cols;
        size_t need = (x->rows > chunks * x->cols ? x->rows : chunks * x->cols) * (size_t)R; // orthogonalisation, Q'
        if (need > work) { work = need; }
    }
    powersgd__reserve(&ps->buf, &ps->buf_cap, p_floats + vec_floats);
    size_t po = 0, vo = p_floats, at = lo;
    for (int t = a; t <= b; t++) {
        size_t start = t < b ? ps->tensors[t].offset : hi; // the uncompressed run before matrix t (or the tail)
        memcpy(ps->buf + vo, g + (at - lo), (start - at) * sizeof(float));
        vo += start - at;
        if (t == b) { break; }
        const PowerSgdTensor* x = &ps->tensors[t];
        float* m = g + (x->offset - lo);
        const float* e = ps->error + x->offset;
        size_t k = x->rows * x->cols;
        for (size_t i = 0; i < k; i++) { m[i] += e[i]; }
        powersgd__mul_mq(ps->buf + po, m, ps->q + ps->q_offset[t], x->rows, x->cols, R);
        po += x->rows * (size_t)R;
        at = x->offset + k;
    }
    comm_allreduce_sum_f32(ps->group, ps->buf, p_floats + vec_floats);
    size_t sent = p_floats + vec_floats;
    int finite = 1;
    for (size_t i = 0; i < p_floats && finite; i++) { finite = isfinite(ps->buf[i]); }
    if (finite && b > a) {
        // P^, then Q' = M^T P^ for every matrix into its place in q, and one all-reduce of the bucket's Q's
        powersgd__reserve_work(ps, work);
        po = 0;
        for (int t = a; t < b; t++) {
            const PowerSgdTensor* x = &ps->tensors[t];
            powersgd__orthogonalize(ps->buf + po, x->rows, R, ps->work);
            powersgd__mul_mtp(ps->q + ps->q_offset[t], g + (x->offset - lo), ps->buf + po, x->rows, x->cols, R, ps->work);
            po += x->rows * (size_t)R;
        }
        size_t q0 = ps->q_offset[a], q1 = ps->q_offset[b - 1] + ps->tensors[b - 1].cols * (size_t)R;
        comm_allreduce_sum_f32(ps->group, ps->q + q0, q1 - q0);
        sent += q1 - q0;
        po = 0;
        for (int t = a; t < b; t++) {
            const PowerSgdTensor* x = &ps->tensors[t];
            powersgd__decompress(g + (x->offset - lo), ps->error + x->offset, ps->buf + po, ps->q + ps->q_offset[t], x->rows, x->cols, R, W);
            po += x->rows * (size_t)R;
        }
    } else if (!finite) {
        // some rank's gradient is not finite: every rank makes its matrices NaN (the norm sees it everywhere) and
        // keeps its error feedback and Q (the step will not be applied)
        for (int t = a; t < b; t++) {
            const PowerSgdTensor* x = &ps->tensors[t];
            float* m = g + (x->offset - lo);
            for (size_t i = 0; i < x->rows * x->cols; i++) { m[i] = NAN; }
        }
    }
    // the uncompressed elements' sums back into their places
    vo = p_floats;
    at = lo;
    for (int t = a; t <= b; t++) {
        size_t start = t < b ? ps->tensors[t].offset : hi;
        memcpy(g + (at - lo), ps->buf + vo, (start - at) * sizeof(float));
        vo += start - at;
        if (t < b) { at = ps->tensors[t].offset + ps->tensors[t].rows * ps->tensors[t].cols; }
    }
    return sent;
}

#endif // POWERSGD_H
