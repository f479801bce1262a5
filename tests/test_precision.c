/*
tests/test_precision.c: tests of precision.h, the bf16/fp16 storage rounding of mixed-precision training.

  1. Round to nearest even (round_bf16, round_fp16, bf16_bits) against independent oracles: a reference written
     in exact double arithmetic (both formats), the compiler's own float -> _Float16 conversion where it has one
     (fp16), and a table of hand-computed edge cases. Inputs: a strided sweep over all 2^32 fp32 bit patterns,
     dense sweeps around the boundaries (fp16 subnormals, overflow, bf16 max), and the edge cases.
  2. round_buffer against element-wise round_dtype (and the reference); fp32 is left untouched.
  3. Idempotence, and that every rounded value is exactly representable in its format.
  4. Stochastic rounding: results are one of the two neighbours of x; the mean is unbiased (statistically, with
     a check that the criterion does reject biased roundings, and exactly, by enumerating the random bits);
     reproducible from (seed, step, index); fp32, inf, NaN and fp16 overflow handling.
  5. sr_hash: uniformity of its bits (chi-square and per-bit balance).

Build and run (-fopenmp optional; it parallelises round_buffer):
    cc -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -fopenmp -o tests/test_precision tests/test_precision.c -lm
    ./tests/test_precision
Output: one line per check, "PASS name (detail)" or "FAIL name: detail"; the last line is "N passed, M failed";
the exit status is non-zero if any check failed. Every seed is fixed, so the run is deterministic (about 3 s on
one core, most of it libgcc's software float -> _Float16 conversion). The headers are included by relative path
("../precision.h", "testing.h"), so the command above needs no -I. The test leaves the floating-point
environment (rounding mode, MXCSR flush-to-zero / denormals-are-zero) in its default state and checks that it is:
the _Float16 oracle and the reference assume it.
*/
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Without -fopenmp, precision.h's "#pragma omp" lines are unknown pragmas; they are meant to be ignored then.
#ifndef _OPENMP
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif
#include "../precision.h"
#ifndef _OPENMP
#pragma GCC diagnostic pop
#endif
#include "testing.h" // check, test_summary

// ----------------------------------------------------------------------------
// helpers

static uint32_t fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float bitsf(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

// Equal as stored values: the same bits, or both NaN (a NaN's payload and sign are not specified).
static int same(float a, float b) { return fbits(a) == fbits(b) || (isnan(a) && isnan(b)); }

// The test's own generator for inputs (xorshift64*), unrelated to sr_hash.
static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t rng_u64(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}
static double rng_uniform(void) { return (double)(rng_u64() >> 11) * 0x1p-53; } // [0, 1)

// ----------------------------------------------------------------------------
// The reference: rounding in exact double arithmetic, from the format's definition alone

// A binary floating-point format: p significand bits (the implicit one included), smallest normal exponent emin
// (below 2^emin the spacing stays 2^(emin - p + 1): subnormals), largest finite value max.
typedef struct { const char* name; int dtype; int p; int emin; double max; } Format;
static const Format BF16 = {"bf16", DTYPE_BF16, 8, -126, 0x1.FEp127}; // (2 - 2^-7) 2^127
static const Format FP16 = {"fp16", DTYPE_FP16, 11, -14, 65504.0};    // (2 - 2^-10) 2^15

// For a >= 0 finite: lo, the largest grid value <= a (ignoring the top of the range), the grid spacing ulp there,
// and frac = (a - lo) / ulp in [0, 1). Exact: a has at most 24 significant bits, the scalings are by powers of two
// and t - floor(t) is always exact.
static double ref_grid(double a, const Format* f, double* ulp, double* frac) {
    int e;
    (void)frexp(a, &e);                         // a = m 2^e, m in [0.5, 1): a lies in [2^(e-1), 2^e)
    int ex = e - 1 < f->emin ? f->emin : e - 1; // the binade's exponent, or emin for subnormals (and 0)
    *ulp = ldexp(1.0, ex - (f->p - 1));
    double t = a / *ulp, k = floor(t);
    *frac = t - k;
    return k * *ulp;
}

// Round to nearest, ties to the even significand; anything that rounds past max is inf (IEEE 754 overflow).
static float ref_round(float x, const Format* f) {
    if (isnan(x) || isinf(x)) { return x; }
    double ulp, frac;
    double lo = ref_grid(fabs((double)x), f, &ulp, &frac);
    double r;
    if (frac < 0.5) { r = lo; }
    else if (frac > 0.5) { r = lo + ulp; }
    else { r = fmod(lo / ulp, 2.0) == 0.0 ? lo : lo + ulp; } // tie: the candidate with an even last bit
    if (r > f->max) { r = INFINITY; }
    return (float)copysign(r, (double)x); // exact: every value of both formats is an fp32 value; keeps -0
}

// The two candidates of stochastic rounding of finite x, signed like x: lo toward zero, hi away from it (inf when
// past max). Returns p = (|x| - |lo|) / ulp, the probability of rounding to hi; 0 iff x is representable.
static double ref_neighbours(float x, const Format* f, float* lo, float* hi, double* ulp_out) {
    double ulp, frac;
    double lo_m = ref_grid(fabs((double)x), f, &ulp, &frac);
    double hi_m = lo_m + ulp;
    *lo = (float)copysign(lo_m > f->max ? INFINITY : lo_m, (double)x);
    *hi = (float)copysign(hi_m > f->max ? INFINITY : hi_m, (double)x);
    if (ulp_out) { *ulp_out = ulp; }
    return frac;
}

// Representability, characterised on the bits (independently of the reference): bf16 values are the fp32 values
// whose low 16 bits are zero; fp16 values lie on the 2^-24 grid, have at most 11 significant bits, and are
// at most 65504 (or inf).
static int is_bf16_value(float y) { return (fbits(y) & 0xFFFFu) == 0; }
static int is_fp16_value(float y) {
    uint32_t a = fbits(y) & 0x7FFFFFFFu;
    if (a == 0x7F800000u) { return 1; }
    if (a > 0x7F800000u || fabsf(y) > 65504.0f) { return 0; }
    double s = (double)fabsf(y) * 0x1p24;
    return s == floor(s) && (fabsf(y) < 0x1p-14f || (a & 0x1FFFu) == 0);
}

static float round_fmt(float x, const Format* f) { return f->dtype == DTYPE_BF16 ? round_bf16(x) : round_fp16(x); }

// ----------------------------------------------------------------------------
// 0. the dtype helpers

static void test_dtype_helpers(void) {
    int ok = dtype_parse("fp32") == DTYPE_FP32 && dtype_parse("bf16") == DTYPE_BF16 && dtype_parse("fp16") == DTYPE_FP16
          && dtype_parse("fp8") == -1 && dtype_parse("") == -1 && dtype_parse("BF16") == -1;
    for (int d = 0; d < 3; d++) { ok = ok && dtype_parse(dtype_name(d)) == d; }
    ok = ok && dtype_bytes(DTYPE_FP32) == 4 && dtype_bytes(DTYPE_BF16) == 2 && dtype_bytes(DTYPE_FP16) == 2;
    check(ok, "dtype_parse/dtype_name/dtype_bytes", "names %s %s %s, bytes %zu %zu %zu", dtype_name(0), dtype_name(1),
          dtype_name(2), dtype_bytes(0), dtype_bytes(1), dtype_bytes(2));
}

// ----------------------------------------------------------------------------
// 1. round to nearest even: hand-computed edge cases

static void test_rne_edges(void) {
    // Each expected value is worked out by hand from the format (comments), not by any code under test.
    static const struct { float x, bf16, fp16; const char* what; } E[] = {
        {65504.0f, 65536.0f, 65504.0f, "fp16 max (11 bits: bf16 rounds it up)"},
        {65519.99f, 65536.0f, 65504.0f, "just below the fp16 overflow tie"},
        {65520.0f, 65536.0f, INFINITY, "fp16 overflow tie: 65504 is odd, so up to inf"},
        {65536.0f, 65536.0f, INFINITY, "2^16: past fp16 max"},
        {-65520.0f, -65536.0f, -INFINITY, "negative overflow tie"},
        {0x1p-14f, 0x1p-14f, 0x1p-14f, "2^-14, smallest fp16 normal"},
        {0x1p-24f, 0x1p-24f, 0x1p-24f, "2^-24, smallest fp16 subnormal"},
        {0x1p-25f, 0x1p-25f, 0.0f, "2^-25: tie between 0 and 2^-24, to the even zero"},
        {-0x1p-25f, -0x1p-25f, -0.0f, "-2^-25: to -0"},
        {0x1.00001p-25f, 0x1p-25f, 0x1p-24f, "2^-25 (1 + 2^-20): just past the tie, up to 2^-24"},
        {0x1.8p-24f, 0x1.8p-24f, 0x1p-23f, "1.5 2^-24: subnormal tie, to even 2 2^-24"},
        {0x1.4p-23f, 0x1.4p-23f, 0x1p-23f, "2.5 2^-24: subnormal tie, to even 2 2^-24"},
        {0x1.cp-23f, 0x1.cp-23f, 0x1p-22f, "3.5 2^-24: subnormal tie, to even 4 2^-24"},
        {0x1.ffcp-15f, 0x1p-14f, 0x1p-14f, "2^-14 - 2^-25: tie between 1023 2^-24 and 2^-14, up into the normals"},
        {0x1.01p0f, 1.0f, 0x1.01p0f, "1 + 2^-8 (0x3F808000): bf16 tie, to even 1.0"},
        {0x1.03p0f, 0x1.04p0f, 0x1.03p0f, "1 + 3 2^-8: bf16 tie, to even 1 + 2^-6"},
        {-0x1.03p0f, -0x1.04p0f, -0x1.03p0f, "-(1 + 3 2^-8): ties are symmetric"},
        {0x1.010002p0f, 0x1.02p0f, 0x1.01p0f, "1 + 2^-8 + 2^-23: one fp32 ulp past the bf16 tie, up"},
        {0x1.00fffep0f, 1.0f, 0x1.01p0f, "1 + 2^-8 - 2^-23: one fp32 ulp below the bf16 tie, down"},
        {0x1.002p0f, 1.0f, 1.0f, "1 + 2^-11: fp16 tie, to even 1.0"},
        {0x1.006p0f, 1.0f, 0x1.008p0f, "1 + 3 2^-11: fp16 tie, to even 1 + 2^-9"},
        {2049.0f, 2048.0f, 2048.0f, "2049: fp16 tie (spacing 2), to even 2048"},
        {2051.0f, 2048.0f, 2052.0f, "2051: fp16 tie, to even 2052"},
        {0.1f, 0x1.9Ap-4f, 0x1.998p-4f, "0.1 = 0x1.99999Ap-4: bf16 up, fp16 down"},
        {FLT_MAX, INFINITY, INFINITY, "FLT_MAX: past bf16's largest finite (2 - 2^-7) 2^127"},
        {0x1.FEp127f, 0x1.FEp127f, INFINITY, "bf16 max"},
        {0x1.FFp127f, INFINITY, INFINITY, "bf16 max + half ulp: tie, bf16 max is odd, so up to inf"},
        {0x1.FEFFFEp127f, 0x1.FEp127f, INFINITY, "just below that tie: bf16 max"},
        {0x1p-134f, 0.0f, 0.0f, "2^-134 (fp32 subnormal): bf16 tie between 0 and 2^-133, to 0"},
        {0x1.8p-133f, 0x1p-132f, 0.0f, "3 2^-134: bf16 subnormal tie, to even 2^-132"},
        {0x1p-149f, 0.0f, 0.0f, "smallest fp32 subnormal"},
        {0x1p-126f, 0x1p-126f, 0.0f, "smallest fp32 normal"},
        {INFINITY, INFINITY, INFINITY, "inf"},
        {-INFINITY, -INFINITY, -INFINITY, "-inf"},
        {0.0f, 0.0f, 0.0f, "+0"},
        {-0.0f, -0.0f, -0.0f, "-0 keeps its sign"},
    };
    int n = (int)(sizeof(E) / sizeof(E[0])), bits_bad = 0, bits_first = 0;
    for (int k = 0; k < n; k++) {
        const Format* fs[2] = {&BF16, &FP16};
        for (int j = 0; j < 2; j++) {
            const Format* f = fs[j];
            float want = j == 0 ? E[k].bf16 : E[k].fp16;
            float got = round_fmt(E[k].x, f), ref = ref_round(E[k].x, f);
            char name[160];
            snprintf(name, sizeof(name), "rne %s edge %s", f->name, E[k].what);
            // The reference must agree with the hand value too: that validates the oracle of the sweeps.
            check(same(got, want) && same(ref, want), name, "x %a (0x%08X): got %a (0x%08X), hand %a, reference %a",
                  (double)E[k].x, fbits(E[k].x), (double)got, fbits(got), (double)want, (double)ref);
        }
        if (bf16_bits(E[k].x) != (uint16_t)(fbits(E[k].bf16) >> 16) && bits_bad++ == 0) { bits_first = k; }
    }
    if (bits_bad == 0) { check(1, "bf16_bits of the edge cases == the high half of the hand value", "%d cases", n); }
    else {
        check(0, "bf16_bits of the edge cases == the high half of the hand value",
              "%d of %d wrong; first: x %a got 0x%04X want 0x%04X", bits_bad, n, (double)E[bits_first].x,
              bf16_bits(E[bits_first].x), fbits(E[bits_first].bf16) >> 16);
    }

    // NaN in, NaN out, whatever the payload; a signalling NaN with only low payload bits must not become inf
    // (bf16's truncation would drop those bits).
    static const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7F808000u, 0x7FFFFFFFu,
                                    0x7F801000u, 0x7FBFFFFFu};
    int ok = 1;
    uint32_t bad = 0;
    for (size_t k = 0; k < sizeof(nans) / sizeof(nans[0]); k++) {
        float x = bitsf(nans[k]);
        uint16_t b = bf16_bits(x);
        int nan_ok = isnan(round_bf16(x)) && isnan(round_fp16(x)) && isnan(round_dtype(x, DTYPE_BF16)) &&
                     isnan(round_dtype(x, DTYPE_FP16)) && (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
        if (!nan_ok && ok) { ok = 0; bad = nans[k]; }
    }
    const char* name = "rne NaN stays NaN (bf16, fp16, round_dtype, bf16_bits)";
    if (ok) { check(1, name, "%zu NaN patterns", sizeof(nans) / sizeof(nans[0])); }
    else { check(0, name, "not NaN for x 0x%08X", bad); }
}

// ----------------------------------------------------------------------------
// 1, 3. round to nearest even: sweeps against the reference and _Float16; idempotence; representability

// Counts mismatches of one property over many inputs, remembering the first.
typedef struct { const char* name; long n, bad; uint32_t x, got, want; } Tally;
static void tally(Tally* t, uint32_t x, int ok, float got, float want) {
    t->n++;
    if (!ok && t->bad++ == 0) { t->x = x; t->got = fbits(got); t->want = fbits(want); }
}
static void tally_report(const Tally* t) {
    if (t->bad == 0) { check(1, t->name, "%ld inputs", t->n); return; }
    check(0, t->name, "%ld of %ld inputs wrong; first: x %a (0x%08X) got %a (0x%08X) want %a (0x%08X)", t->bad, t->n,
          (double)bitsf(t->x), t->x, (double)bitsf(t->got), t->got, (double)bitsf(t->want), t->want);
}

enum { T_REF_B, T_REF_H, T_F16, T_BITS, T_IDEM_B, T_IDEM_H, T_REPR_B, T_REPR_H, T_FP32, T_COUNT };
static Tally g_t[T_COUNT] = {
    {"rne bf16 == exact reference", 0, 0, 0, 0, 0},
    {"rne fp16 == exact reference", 0, 0, 0, 0, 0},
    {"rne fp16 == (float)(_Float16)x", 0, 0, 0, 0, 0},
    {"bf16_bits == high half of the reference", 0, 0, 0, 0, 0},
    {"round_bf16 idempotent", 0, 0, 0, 0, 0},
    {"round_fp16 idempotent", 0, 0, 0, 0, 0},
    {"round_bf16 result is a bf16 value (low 16 bits zero)", 0, 0, 0, 0, 0},
    {"round_fp16 result is an fp16 value (2^-24 grid, 11 bits, <= 65504 or inf)", 0, 0, 0, 0, 0},
    {"round_dtype fp32 is the identity", 0, 0, 0, 0, 0},
};

static void rne_one(uint32_t u) {
    float x = bitsf(u);
    float b = round_bf16(x), h = round_fp16(x);
    float rb = ref_round(x, &BF16), rh = ref_round(x, &FP16);
    tally(&g_t[T_REF_B], u, same(b, rb), b, rb);
    tally(&g_t[T_REF_H], u, same(h, rh), h, rh);
#ifdef __FLT16_MAX__
    float n16 = (float)(_Float16)x; // the compiler's conversion (libgcc's soft-fp, or F16C), round to nearest even
    tally(&g_t[T_F16], u, same(h, n16), h, n16);
#endif
    uint16_t bb = bf16_bits(x);
    float bbf = bitsf((uint32_t)bb << 16);
    tally(&g_t[T_BITS], u, isnan(rb) ? isnan(bbf) : bb == (uint16_t)(fbits(rb) >> 16), bbf, rb);
    float b2 = round_bf16(b), h2 = round_fp16(h);
    tally(&g_t[T_IDEM_B], u, same(b2, b), b2, b);
    tally(&g_t[T_IDEM_H], u, same(h2, h), h2, h);
    tally(&g_t[T_REPR_B], u, isnan(b) ? isnan(x) : is_bf16_value(b), b, b);
    tally(&g_t[T_REPR_H], u, isnan(h) ? isnan(x) : is_fp16_value(h), h, h);
    float d = round_dtype(x, DTYPE_FP32);
    tally(&g_t[T_FP32], u, fbits(d) == u, d, x);
}

// The floating-point environment the oracles assume: round to nearest, and on x86 no flush-to-zero (MXCSR bit 15)
// or denormals-are-zero (bit 6). The test never changes it; this documents and verifies that.
static void test_fp_environment(void) {
    int ok = fegetround() == FE_TONEAREST;
    unsigned csr = 0;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE__)
    csr = __builtin_ia32_stmxcsr();
    ok = ok && (csr & 0x8040u) == 0 && (csr & 0x6000u) == 0; // FTZ, DAZ off; rounding control = nearest
#endif
    check(ok, "fp environment is the default (round to nearest, no FTZ/DAZ)", "fegetround %d, mxcsr 0x%04X",
          fegetround(), csr);
}

static void test_rne_sweeps(void) {
    // Every 257th fp32 bit pattern, all 2^32 / 257 ~ 16.7M of them: 257 is odd, so the sweep passes through
    // every combination of the low mantissa bits (where the ties and the rounding decisions live) in every
    // exponent, for both signs, NaNs and infinities included.
    const uint64_t STRIDE = 257;
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += STRIDE) { rne_one((uint32_t)u); }
    // Every pattern within 2^14 of the boundaries, both signs.
    static const uint32_t centres[] = {
        0x00000000u, // zero, fp32 subnormals (bf16 subnormals)
        0x00800000u, // smallest fp32 normal
        0x33000000u, // 2^-25: fp16's round-to-zero tie
        0x33800000u, // 2^-24: smallest fp16 subnormal
        0x38800000u, // 2^-14: fp16 subnormal/normal boundary
        0x3F800000u, // 1.0
        0x477FE000u, // 65504, fp16 max
        0x477FF000u, // 65520, the overflow tie
        0x47800000u, // 65536
        0x7F7F0000u, // bf16 max
        0x7F7F8000u, // bf16 overflow tie
        0x7F800000u, // inf, and NaNs above
    };
    for (size_t c = 0; c < sizeof(centres) / sizeof(centres[0]); c++) {
        for (int64_t k = -(1 << 14); k < (1 << 14); k++) {
            int64_t v = (int64_t)centres[c] + k;
            if (v < 0 || v > 0x7FFFFFFF) { continue; }
            rne_one((uint32_t)v);
            rne_one((uint32_t)v | 0x80000000u);
        }
    }
    // Random patterns as a third, unstructured source.
    for (int k = 0; k < 1000000; k++) { rne_one((uint32_t)rng_u64()); }
    for (int t = 0; t < T_COUNT; t++) {
#ifndef __FLT16_MAX__
        if (t == T_F16) { check(1, g_t[t].name, "skipped: this compiler has no _Float16"); continue; }
#endif
        tally_report(&g_t[t]);
    }
}

// ----------------------------------------------------------------------------
// 2. round_buffer

// A mix of inputs: any bit pattern (NaN, inf, subnormals), log-uniform magnitudes across the fp16 range and
// beyond, values in the fp16 overflow zone, and exact ties of either format.
static float gen_value(void) {
    uint64_t r = rng_u64();
    uint32_t mant = (uint32_t)(r >> 8) & 0x7FFFFFu, sign = (uint32_t)(r >> 63) << 31;
    switch (r % 5) {
    case 0: return bitsf((uint32_t)(r >> 16));
    case 1: return bitsf(sign | ((uint32_t)(127 - 30 + (int)((r >> 40) % 48)) << 23) | mant); // 2^-30 .. 2^17
    case 2: return (float)((rng_uniform() * 2.0 - 1.0) * 70000.0);
    case 3: // a bf16 tie: the dropped 16 bits are exactly 0x8000; 2^-20 .. 2^19
        return bitsf(sign | ((uint32_t)(127 - 20 + (int)((r >> 40) % 40)) << 23) | (mant & ~0xFFFFu) | 0x8000u);
    default: // an fp16 tie in the normal range: the dropped 13 bits are exactly 0x1000; 2^-14 .. 2^15
        return bitsf(sign | ((uint32_t)(127 - 14 + (int)((r >> 40) % 30)) << 23) | (mant & ~0x1FFFu) | 0x1000u);
    }
}

static void test_round_buffer(void) {
    static const size_t sizes[] = {0, 1, 7, 1000, (1u << 20) + 3};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        float* x = (float*)malloc((n + 1) * sizeof(float));
        float* y = (float*)malloc((n + 1) * sizeof(float));
        if (!x || !y) { check(0, "round_buffer", "out of memory"); free(x); free(y); return; }
        for (size_t i = 0; i <= n; i++) { x[i] = gen_value(); }
        x[n] = 0x1.0101p0f; // a guard past the end, changed by either rounding: must stay as it is
        const int dtypes[3] = {DTYPE_BF16, DTYPE_FP16, DTYPE_FP32};
        for (int j = 0; j < 3; j++) {
            int d = dtypes[j];
            memcpy(y, x, (n + 1) * sizeof(float));
            round_buffer(y, n, d);
            size_t bad = n, bad_ref = n;
            for (size_t i = 0; i < n; i++) {
                // bit for bit, NaNs included: round_buffer must store exactly what round_dtype returns
                if (bad == n && fbits(y[i]) != fbits(round_dtype(x[i], d))) { bad = i; }
                float ref = d == DTYPE_FP32 ? x[i] : ref_round(x[i], d == DTYPE_BF16 ? &BF16 : &FP16);
                if (bad_ref == n && !same(y[i], ref)) { bad_ref = i; }
            }
            int guard = fbits(y[n]) == fbits(x[n]);
            if (d == DTYPE_FP32) { guard = guard && memcmp(x, y, (n + 1) * sizeof(float)) == 0; }
            char name[96];
            snprintf(name, sizeof(name), "round_buffer %s n=%zu == element-wise round_dtype", dtype_name(d), n);
            if (bad < n || bad_ref < n || !guard) {
                size_t i = bad < n ? bad : bad_ref < n ? bad_ref : 0;
                check(0, name, "element %zu: x 0x%08X -> 0x%08X, round_dtype 0x%08X; guard past the end %s", i,
                      n ? fbits(x[i]) : 0, n ? fbits(y[i]) : 0, n ? fbits(round_dtype(x[i], d)) : 0,
                      guard ? "intact" : "CHANGED (or fp32 buffer modified)");
            } else {
                check(1, name, "%s", d == DTYPE_FP32 ? "buffer untouched" : "and == the reference");
            }
        }
        free(x);
        free(y);
    }
}

// ----------------------------------------------------------------------------
// 4. stochastic rounding

static const uint64_t SR_SEED = 0x5EED1234ull, SR_STEP = 7;

// (a) Every result is lo or hi of the reference (x itself when representable), with x's sign.
static void test_sr_neighbours(const Format* f) {
    long n = 0, bad = 0, ups = 0, downs = 0;
    float bx = 0, by = 0, blo = 0, bhi = 0;
    for (int k = 0; k < 50000; k++) {
        float x = gen_value();
        if (k % 10 == 0) { x = ref_round(x, f); } // representable inputs too
        if (isnan(x) || isinf(x)) { continue; }
        float lo, hi;
        double p = ref_neighbours(x, f, &lo, &hi, NULL);
        for (uint64_t j = 0; j < 4; j++) {
            float y = round_stochastic(x, f->dtype, SR_SEED, SR_STEP, (uint64_t)k * 4 + j);
            int is_lo = fbits(y) == fbits(lo), is_hi = p > 0 && fbits(y) == fbits(hi);
            n++;
            if (p > 0) { ups += is_hi; downs += is_lo; }
            if (!is_lo && !is_hi && bad++ == 0) { bx = x; by = y; blo = lo; bhi = hi; }
        }
    }
    char name[96];
    snprintf(name, sizeof(name), "sr %s result is a neighbour (lo or hi) of x", f->name);
    if (bad) {
        check(0, name, "%ld of %ld wrong; first: x %a -> %a, neighbours %a, %a", bad, n, (double)bx, (double)by,
              (double)blo, (double)bhi);
    } else {
        check(ups > 0 && downs > 0, name, "%ld draws, %ld rounded up and %ld down among non-representable x", n,
              ups, downs);
    }
}

// The unbiasedness criterion: the mean of N draws is within 5 standard errors of x, where one draw is lo + ulp
// Bernoulli(p), so the standard error of the mean is ulp sqrt(p (1 - p) / N). A correct rounding fails a 5-sigma
// bound with probability ~6e-7, and the seed is fixed, so the test is deterministic.
static int mean_ok(double mean, double x, double ulp, double p, int n) {
    return fabs(mean - x) <= 5.0 * ulp * sqrt(p * (1.0 - p) / n);
}

// (b), (c) for x = +-(lo + fpos ulp), drawing at step t.
static void test_sr_unbiased(const Format* f, double lo_m, double fpos, int negative, uint64_t t) {
    enum { N = 200000 };
    double ulp0, frac0;
    (void)ref_grid(lo_m, f, &ulp0, &frac0);
    float x = (float)((negative ? -1.0 : 1.0) * (lo_m + fpos * ulp0));
    float lo, hi;
    double ulp, p = ref_neighbours(x, f, &lo, &hi, &ulp); // p: the exact fraction, after x's rounding to fp32
    double sum = 0.0;
    long up = 0, stray = 0;
    for (int i = 0; i < N; i++) {
        float y = round_stochastic(x, f->dtype, SR_SEED, t, (uint64_t)i);
        sum += y; // exact: N multiples of ulp (or of 2^-24, ...) that fit in double's 53 bits
        if (fbits(y) == fbits(hi)) { up++; } else if (fbits(y) != fbits(lo)) { stray++; }
    }
    double mean = sum / N, frac_up = (double)up / N, se = ulp * sqrt(p * (1 - p) / N);
    char name[160];
    snprintf(name, sizeof(name), "sr %s unbiased at x = %a (lo + %.1f ulp)", f->name, (double)x, fpos);
    check(fabs((double)lo) == lo_m && p > 0 && p < 1 && stray == 0 && mean_ok(mean, x, ulp, p, N), name,
          "mean - x = %.3g = %.2f standard errors (bound 5), p %.5f, %ld draws neither lo nor hi", mean - x,
          (mean - x) / se, p, stray);
    snprintf(name, sizeof(name), "sr %s fraction rounded up at x = %a ~ p", f->name, (double)x);
    check(fabs(frac_up - p) <= 5.0 * sqrt(p * (1 - p) / N), name, "%.5f vs p %.5f (%.2f sigma)", frac_up, p,
          (frac_up - p) / sqrt(p * (1 - p) / N));

    // Can the criterion fail? The same x and N under biased rules must all be rejected: truncation (always lo),
    // round to nearest even, and a stochastic rounding (the test's own generator) that goes up with p + 0.02.
    double sum_b = 0.0;
    for (int i = 0; i < N; i++) { sum_b += rng_uniform() < p + 0.02 ? hi : lo; }
    int rej_trunc = !mean_ok(lo, x, ulp, p, N), rej_rne = !mean_ok(ref_round(x, f), x, ulp, p, N);
    int rej_biased = !mean_ok(sum_b / N, x, ulp, p, N);
    snprintf(name, sizeof(name), "sr %s criterion rejects biased rounding at x = %a", f->name, (double)x);
    check(rej_trunc && rej_rne && rej_biased, name, "truncation %.1f, RNE %.1f, SR(p + 0.02) %.1f standard errors",
          (lo - x) / se, (ref_round(x, f) - x) / se, (sum_b / N - x) / se);
}

// (b') Exact unbiasedness: over every value of the random bits the rounding consumes, the number of round-ups is
// exactly p times their count, so E[round(x)] = x with no sampling error. sr_bf16 and sr_fp16 take their bits
// from the 64-bit r as follows (precision.h): the low 16 (bf16), the low 13 (fp16 normals), the top 24 (fp16
// subnormals). r_k = k << 40 | k for k in [0, 2^24) is uniform on each of these fields, so exactly p 2^24 of
// the r_k must round up. (If precision.h draws from other bits, this enumeration must follow.)
static void test_sr_exact(const Format* f, float x) {
    float lo, hi;
    double p = ref_neighbours(x, f, &lo, &hi, NULL);
    long up = 0, stray = 0;
    for (uint64_t k = 0; k < (1u << 24); k++) {
        uint64_t r = k << 40 | k;
        float y = f->dtype == DTYPE_BF16 ? sr_bf16(x, r) : sr_fp16(x, r);
        if (fbits(y) == fbits(hi)) { up++; } else if (fbits(y) != fbits(lo)) { stray++; }
    }
    double want = p * 0x1p24; // an integer for the chosen x
    char name[128];
    snprintf(name, sizeof(name), "sr %s exactly unbiased over all random bits at x = %a", f->name, (double)x);
    check(stray == 0 && (double)up == want && want == floor(want), name,
          "%ld of 2^24 round up, want p 2^24 = %.1f; %ld neither lo nor hi", up, want, stray);
}

// (d) Reproducible from (seed, step, index); a different seed or step gives different draws.
static void test_sr_reproducible(const Format* f) {
    enum { N = 10000 };
    double ulp, frac;
    double lo_m = ref_grid(1.0, f, &ulp, &frac);
    float x = (float)(lo_m + 0.5 * ulp); // p = 1/2: any change of draw changes the result with probability 1/2
    int same_bits = 1;
    long diff_seed = 0, diff_step = 0;
    for (uint64_t i = 0; i < N; i++) {
        float y = round_stochastic(x, f->dtype, SR_SEED, SR_STEP, i);
        same_bits = same_bits && fbits(y) == fbits(round_stochastic(x, f->dtype, SR_SEED, SR_STEP, i));
        diff_seed += fbits(y) != fbits(round_stochastic(x, f->dtype, SR_SEED + 1, SR_STEP, i));
        diff_step += fbits(y) != fbits(round_stochastic(x, f->dtype, SR_SEED, SR_STEP + 1, i));
    }
    char name[96];
    snprintf(name, sizeof(name), "sr %s same (seed, step, index) gives the same bits", f->name);
    check(same_bits, name, "%d elements at x = %a", N, (double)x);
    // Independent draws differ with probability 2 p (1 - p) = 1/2; [20%, 80%] is a very loose band around it.
    snprintf(name, sizeof(name), "sr %s another seed / step changes ~half the results", f->name);
    check(diff_seed > N / 5 && diff_seed < 4 * N / 5 && diff_step > N / 5 && diff_step < 4 * N / 5, name,
          "seed + 1: %ld of %d differ, step + 1: %ld of %d", diff_seed, N, diff_step, N);
}

// (e) fp32 is stored as is; inf and NaN pass through; overflow.
static void test_sr_special(void) {
    int ok = 1;
    uint32_t bad = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        uint32_t u = (uint32_t)rng_u64();
        if (fbits(round_stochastic(bitsf(u), DTYPE_FP32, SR_SEED, SR_STEP, i)) != u && ok) { ok = 0; bad = u; }
    }
    if (ok) { check(1, "sr fp32 returns x unchanged (bits, NaN payloads included)", "100000 random patterns"); }
    else { check(0, "sr fp32 returns x unchanged (bits, NaN payloads included)", "changed x 0x%08X", bad); }

    const Format* fs[2] = {&BF16, &FP16};
    for (int j = 0; j < 2; j++) {
        ok = 1;
        for (uint64_t i = 0; i < 1000; i++) {
            ok = ok && fbits(round_stochastic(INFINITY, fs[j]->dtype, SR_SEED, SR_STEP, i)) == fbits(INFINITY);
            ok = ok && fbits(round_stochastic(-INFINITY, fs[j]->dtype, SR_SEED, SR_STEP, i)) == fbits(-INFINITY);
            ok = ok && isnan(round_stochastic(NAN, fs[j]->dtype, SR_SEED, SR_STEP, i));
            ok = ok && isnan(round_stochastic(bitsf(0x7F800001u), fs[j]->dtype, SR_SEED, SR_STEP, i));
            ok = ok && isnan(round_stochastic(bitsf(0xFFC00001u), fs[j]->dtype, SR_SEED, SR_STEP, i));
        }
        char name[96];
        snprintf(name, sizeof(name), "sr %s inf and NaN pass through", fs[j]->name);
        check(ok, name, "+-inf stay +-inf, NaNs stay NaN, 1000 indices each");
    }

    // Overflow: what lies past the largest finite value M rounds like a value between M and the next power of
    // two, which is not representable and so stands for inf: x in (M, 2^e) goes to inf with probability
    // (x - M) / ulp and to M otherwise; from 2^e on, always inf. M itself and the values below it never overflow.
    static const struct { const Format* f; float x; float lo, hi; double p; const char* what; } O[] = {
        {&FP16, 65504.0f, 65504.0f, 65504.0f, 0.0, "fp16 max stays"},
        {&FP16, 65512.0f, 65504.0f, INFINITY, 0.25, "65512: inf with p 8/32"},
        {&FP16, -65512.0f, -65504.0f, -INFINITY, 0.25, "-65512: -inf with p 8/32"},
        {&FP16, 65520.0f, 65504.0f, INFINITY, 0.5, "65520: inf with p 1/2"},
        {&FP16, 65535.0f, 65504.0f, INFINITY, 31.0 / 32.0, "65535: inf with p 31/32"},
        {&FP16, 65536.0f, INFINITY, INFINITY, 1.0, "65536: always inf"},
        {&FP16, 1e6f, INFINITY, INFINITY, 1.0, "1e6: always inf"},
        {&FP16, -FLT_MAX, -INFINITY, -INFINITY, 1.0, "-FLT_MAX: always -inf"},
        {&BF16, 0x1.FEp127f, 0x1.FEp127f, 0x1.FEp127f, 0.0, "bf16 max stays"},
        {&BF16, 0x1.FFp127f, 0x1.FEp127f, INFINITY, 0.5, "bf16 max + half ulp: inf with p 1/2"},
        {&BF16, FLT_MAX, 0x1.FEp127f, INFINITY, 65535.0 / 65536.0, "FLT_MAX: inf with p (2^16 - 1) / 2^16"},
    };
    for (size_t k = 0; k < sizeof(O) / sizeof(O[0]); k++) {
        enum { N = 200000 };
        long up = 0, stray = 0;
        for (uint64_t i = 0; i < N; i++) {
            float y = round_stochastic(O[k].x, O[k].f->dtype, SR_SEED, SR_STEP, i);
            if (O[k].p > 0 && fbits(y) == fbits(O[k].hi)) { up++; } else if (fbits(y) != fbits(O[k].lo)) { stray++; }
        }
        double p = O[k].p, frac_up = (double)up / N;
        char name[128];
        snprintf(name, sizeof(name), "sr %s overflow: %s", O[k].f->name, O[k].what);
        // Exact for p = 0 or 1 (a tolerance of zero); otherwise the 5-sigma bound of the unbiasedness tests.
        check(stray == 0 && fabs(frac_up - p) <= 5.0 * sqrt(p * (1 - p) / N), name,
              "%ld of %d to %a (p %.5f), %ld to neither %a nor %a", up, N, (double)O[k].hi, p, stray,
              (double)O[k].lo, (double)O[k].hi);
    }
}

// Stochastic rounding's random bits, pinned: an FNV-1a fold of 4096 sr_hash values and of the bf16 and fp16
// stochastic roundings of 4096 fixed inputs (integer-made, no libm), against the value this code gave when it was
// pinned (commit f7d82bb). A bf16 or fp16 checkpoint resumes bit for bit only if the next step rounds as the
// uninterrupted run would, so a changed hash would silently break every resume across versions (and the GPU's
// equality with the CPU, which uses the same function).
static void test_stochastic_pinned(void) {
    uint64_t h = 14695981039346656037ULL;
    for (uint64_t k = 0; k < 4096; k++) {
        uint64_t r = sr_hash(0x5EED1234ull + (k % 5), k / 7, k * 2654435761ull);
        for (int b = 0; b < 8; b++) { h ^= (r >> (8 * b)) & 0xff; h *= 1099511628211ULL; }
        float x = ldexpf((float)((k * 2654435761u) % 1000003u) / 1000003.0f - 0.5f, (int)(k % 40) - 20);
        uint32_t u1 = fbits(round_stochastic(x, DTYPE_BF16, 0x5EED1234ull, k / 3, k));
        uint32_t u2 = fbits(round_stochastic(x, DTYPE_FP16, 0x5EED1234ull, k / 3, k));
        for (int b = 0; b < 4; b++) {
            h ^= (u1 >> (8 * b)) & 0xff; h *= 1099511628211ULL;
            h ^= (u2 >> (8 * b)) & 0xff; h *= 1099511628211ULL;
        }
    }
    check(h == 0x8f02fa1a29e0aa9eull, "stochastic rounding: random bits and roundings pinned across versions",
          "fold %016llx, pinned 8f02fa1a29e0aa9e", (unsigned long long)h);
}

static void test_stochastic(void) {
    test_sr_neighbours(&BF16);
    test_sr_neighbours(&FP16);

    // lo values: near 1.0, near 1000, a negative x near 2, the subnormals (fp16's; bf16's are fp32's subnormals),
    // and a tiny normal bf16 value.
    static const double fpos[3] = {0.1, 0.5, 0.9};
    static const struct { const Format* f; double lo; int neg; } C[] = {
        {&FP16, 1.0 + 3 * 0x1p-10, 0}, {&FP16, 1000.0, 0}, {&FP16, 2.0 + 5 * 0x1p-9, 1}, {&FP16, 5 * 0x1p-24, 0},
        {&FP16, 5 * 0x1p-24, 1},
        {&BF16, 1.0 + 3 * 0x1p-7, 0}, {&BF16, 1000.0, 0}, {&BF16, 2.0 + 5 * 0x1p-6, 1}, {&BF16, 5 * 0x1p-133, 0},
        {&BF16, 0x1.46p-100, 1},
    };
    // Each case draws at its own step: the same p at the same (seed, step, index) would repeat the same
    // up/down decisions, and independent experiments say more.
    for (size_t c = 0; c < sizeof(C) / sizeof(C[0]); c++) {
        for (int j = 0; j < 3; j++) { test_sr_unbiased(C[c].f, C[c].lo, fpos[j], C[c].neg, 100 + 3 * c + (size_t)j); }
    }

    // x chosen so that frac 2^24 is an integer (x has no bits below 2^-24 of an ulp).
    test_sr_exact(&BF16, 0x1.0123p0f);            // 1 + (0x23 / 2^16) of an ulp past 1 + 2^-7
    test_sr_exact(&BF16, -0x1.fffffep-3f);        // all 16 dropped bits set
    test_sr_exact(&FP16, 0x1.0037p0f);            // normal
    test_sr_exact(&FP16, -1000.3f);               // normal, negative
    test_sr_exact(&FP16, (float)(5.3 * 0x1p-24)); // subnormal: frac 0.3 to fp32's 2^-21 precision
    test_sr_exact(&FP16, (float)(-0.7 * 0x1p-24)); // below the smallest subnormal: 0 or -2^-24

    test_sr_reproducible(&BF16);
    test_sr_reproducible(&FP16);
    test_sr_special();
}

// ----------------------------------------------------------------------------
// 5. sr_hash

// Pearson's chi-square of the byte (v >> shift) & 0xFF over n = 2^16 values against the uniform distribution:
// 255 degrees of freedom, mean 255, standard deviation sqrt(510) ~ 22.6.
static double chi2_byte(const uint64_t* v, int n, int shift) {
    long hist[256] = {0};
    for (int k = 0; k < n; k++) { hist[(v[k] >> shift) & 0xFF]++; }
    double e = n / 256.0, c = 0.0;
    for (int b = 0; b < 256; b++) { c += (hist[b] - e) * (hist[b] - e) / e; }
    return c;
}
// Generous: 8 standard deviations either side. Too small a value fails too: a counter (h = i) is perfectly
// uniform, chi-square 0, and no hash.
static int chi2_ok(double c) { return c > 255.0 - 8 * 22.6 && c < 255.0 + 8 * 22.6; }

static void test_sr_hash(void) {
    enum { N = 1 << 16 };
    uint64_t* v = (uint64_t*)malloc(N * sizeof(uint64_t));
    if (!v) { check(0, "sr_hash", "out of memory"); return; }
    // Along the index (the elements of one step) for two seeds, and along the step (one element over time).
    // along_t: vary the step with the index fixed to `fixed`; else vary the index with the step fixed.
    static const struct { uint64_t seed, fixed; int along_t; const char* what; } S[] = {
        {SR_SEED, SR_STEP, 0, "i = 0..2^16-1, seed A"},
        {0, 0, 0, "i = 0..2^16-1, seed 0 step 0"},
        {SR_SEED, 12345, 1, "t = 0..2^16-1, i fixed"},
    };
    // bits 8..15: the top byte of bf16's 16-bit field (the brief's test); 0..7; 5..12: the top of fp16's 13-bit
    // field; 56..63: the top of the 24 bits fp16 subnormals use.
    static const int shifts[4] = {8, 0, 5, 56};
    for (size_t s = 0; s < sizeof(S) / sizeof(S[0]); s++) {
        for (uint64_t k = 0; k < N; k++) {
            v[k] = S[s].along_t ? sr_hash(S[s].seed, k, S[s].fixed) : sr_hash(S[s].seed, S[s].fixed, k);
        }
        for (int j = 0; j < 4; j++) {
            double c = chi2_byte(v, N, shifts[j]);
            char name[128];
            snprintf(name, sizeof(name), "sr_hash bits %d..%d uniform (%s)", shifts[j], shifts[j] + 7, S[s].what);
            check(chi2_ok(c), name, "chi-square %.1f, 255 degrees of freedom, accepted (%.0f, %.0f)", c,
                  255.0 - 8 * 22.6, 255.0 + 8 * 22.6);
        }
        // Every one of the 64 bits is set about half the time: 2^16 draws, sd 1/512; bound 10 sd.
        double worst = 0.0;
        int worst_bit = 0;
        for (int b = 0; b < 64; b++) {
            long ones = 0;
            for (int k = 0; k < N; k++) { ones += (long)((v[k] >> b) & 1); }
            double dev = fabs((double)ones / N - 0.5);
            if (dev > worst) { worst = dev; worst_bit = b; }
        }
        char name[128];
        snprintf(name, sizeof(name), "sr_hash each bit balanced (%s)", S[s].what);
        check(worst < 10.0 / 512.0, name, "worst bit %d: |fraction set - 1/2| = %.4f (bound %.4f)", worst_bit, worst,
              10.0 / 512.0);
    }
    // The chi-square criterion can fail: the identity "hash" is too uniform, a constant too lumpy.
    for (uint64_t k = 0; k < N; k++) { v[k] = k; }
    double c_id = chi2_byte(v, N, 8);
    for (uint64_t k = 0; k < N; k++) { v[k] = 0x1234; }
    double c_const = chi2_byte(v, N, 8);
    check(!chi2_ok(c_id) && !chi2_ok(c_const), "sr_hash chi-square criterion rejects non-random input",
          "identity %.1f, constant %.1f", c_id, c_const);
    free(v);
}

// ----------------------------------------------------------------------------

int main(void) {
    (void)run_capture; // testing.h's helper for tests that drive binaries; unused here
    test_fp_environment();
    test_dtype_helpers();
    test_rne_edges();
    test_rne_sweeps();
    test_round_buffer();
    test_stochastic();
    test_stochastic_pinned();
    test_sr_hash();
    return test_summary();
}
