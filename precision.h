/*
precision.h: the storage types of mixed-precision training (--dtype fp32|bf16|fp16) and their rounding, bit-exact
and hardware-independent, so that the CPU backend can emulate what a GPU stores.

On a GPU, activations, activation gradients and the compute copy of the parameters are stored in bf16 or fp16
while every kernel computes in fp32; each store rounds to nearest, ties to even (RNE). The CPU backend keeps fp32
storage and calls round_dtype() wherever the GPU would store a 16-bit value, so the numerics are the GPU's up to
the order of fp32 accumulation. Everything here works on the bits with integer arithmetic (or exact double
arithmetic), never on the FPU's rounding of 16-bit types, so the results are the same on every CPU and in every
MXCSR mode (the trainer sets flush-to-zero, which must not flush fp16 subnormals: they are normal fp32 numbers).

  bf16: 1 sign, 8 exponent, 7 mantissa bits (fp32 with the low 16 bits dropped). Unit roundoff u = 2^-8.
        Same range as fp32, so overflow only at fp32's limit.
  fp16: 1 sign, 5 exponent, 10 mantissa bits. u = 2^-11. Largest finite 65504; values from 65520 up round to
        inf (65504 is odd in the last place, so the tie at 65520 goes up); subnormals down to 2^-24; |x| <= 2^-25
        rounds to a signed zero (the tie at 2^-25 goes to the even zero).

Stochastic rounding (the compute copy written from fp32 master weights after each AdamW step): x rounds up to the
next representable value with probability (x - lo) / (hi - lo), else down to lo, so E[round(x)] = x and small
updates are not systematically lost as they are under RNE. The random bits come from a counter-based hash of
(seed, step, flat index), so the result does not depend on how the parameters are sharded or threaded, and the
state to checkpoint is just the seed and the step.

Only static functions: any translation unit may include this header.
*/
#ifndef PRECISION_H
#define PRECISION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The rounding functions run on the host and, in the CUDA build, inside kernels (the same bits on both sides).
#ifdef __CUDACC__
#define PRECISION_HD __host__ __device__
#else
#define PRECISION_HD
#endif

enum { DTYPE_FP32 = 0, DTYPE_BF16 = 1, DTYPE_FP16 = 2 };

static const char* dtype_name(int d) { return d == DTYPE_BF16 ? "bf16" : d == DTYPE_FP16 ? "fp16" : "fp32"; }

// --dtype's value to the enum; -1 for anything else.
static int dtype_parse(const char* s) {
    if (strcmp(s, "fp32") == 0) { return DTYPE_FP32; }
    if (strcmp(s, "bf16") == 0) { return DTYPE_BF16; }
    if (strcmp(s, "fp16") == 0) { return DTYPE_FP16; }
    return -1;
}

// Bytes one element of the storage type takes on a device that stores it natively.
static size_t dtype_bytes(int d) { return d == DTYPE_FP32 ? 4 : 2; }

PRECISION_HD static inline uint32_t precision__bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
PRECISION_HD static inline float precision__float(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

// ----------------------------------------------------------------------------
// Round to nearest, ties to even

// bf16: add 0x7FFF plus the lowest kept bit, then drop the low 16 bits. A carry into the exponent is the correct
// round-up (to the next binade, or to inf past the largest finite). NaN stays a (quiet) NaN.
PRECISION_HD static inline float round_bf16(float x) {
    uint32_t u = precision__bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) { return precision__float(u | 0x00400000u); }
    u += 0x7FFFu + ((u >> 16) & 1u);
    return precision__float(u & 0xFFFF0000u);
}

// The bf16 bit pattern of a value that round_bf16 returned (exact: its low 16 bits are zero).
PRECISION_HD static inline uint16_t bf16_bits(float x) { return (uint16_t)(precision__bits(round_bf16(x)) >> 16); }

// fp16: in the normal range (|x| >= 2^-14) keep 10 of fp32's 23 mantissa bits, rounding as for bf16; below it the
// spacing is a fixed 2^-24, and |x| * 2^24 is exact in double, so rint (the default round-to-nearest-even mode)
// rounds it exactly.
PRECISION_HD static inline float round_fp16(float x) {
    uint32_t u = precision__bits(x);
    uint32_t sign = u & 0x80000000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) { return precision__float(u | 0x00400000u); } // NaN
    if (a >= 0x38800000u) {                                            // |x| >= 2^-14: normal fp16
        a += 0xFFFu + ((a >> 13) & 1u);
        a &= ~0x1FFFu;
        if (a > 0x477FE000u) { a = 0x7F800000u; }                      // above 65504: overflow to inf
        return precision__float(sign | a);
    }
    double q = rint((double)precision__float(a) * 16777216.0) / 16777216.0; // multiples of 2^-24
    return precision__float(sign | precision__bits((float)q));
}

PRECISION_HD static inline float round_dtype(float x, int dtype) {
    return dtype == DTYPE_BF16 ? round_bf16(x) : dtype == DTYPE_FP16 ? round_fp16(x) : x;
}

// x[i] = round_dtype(x[i]): what storing n values in the type does. Nothing for fp32.
static void round_buffer(float* x, size_t n, int dtype) {
    if (dtype == DTYPE_BF16) {
        #pragma omp parallel for simd
        for (size_t i = 0; i < n; i++) { x[i] = round_bf16(x[i]); }
    } else if (dtype == DTYPE_FP16) {
        #pragma omp parallel for
        for (size_t i = 0; i < n; i++) { x[i] = round_fp16(x[i]); }
    }
}

// ----------------------------------------------------------------------------
// Stochastic rounding

// 64 random bits for element i of step t under seed (splitmix64's finaliser over a mix of the three).
PRECISION_HD static inline uint64_t sr_hash(uint64_t seed, uint64_t t, uint64_t i) {
    uint64_t z = seed ^ (t * 0x9E3779B97F4A7C15ull) ^ (i * 0xD1B54A32D192ED03ull);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// bf16: adding r (uniform in [0, 2^16)) to the magnitude's bits and truncating rounds up exactly when the dropped
// bits d satisfy d + r >= 2^16, probability d / 2^16 = (|x| - lo) / (hi - lo).
PRECISION_HD static inline float sr_bf16(float x, uint64_t r) {
    uint32_t u = precision__bits(x);
    if ((u & 0x7F800000u) == 0x7F800000u) { return x; } // inf, NaN
    u += (uint32_t)(r & 0xFFFFu);
    return precision__float(u & 0xFFFF0000u);
}

// fp16: the same with 13 dropped bits in the normal range; in the subnormal range, floor(|x| 2^24 + r) with r
// uniform in [0, 1), exact in double.
PRECISION_HD static inline float sr_fp16(float x, uint64_t r) {
    uint32_t u = precision__bits(x);
    uint32_t sign = u & 0x80000000u, a = u & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) { return x; }
    if (a >= 0x38800000u) {
        a += (uint32_t)(r & 0x1FFFu);
        a &= ~0x1FFFu;
        if (a > 0x477FE000u) { a = 0x7F800000u; }
        return precision__float(sign | a);
    }
    double f = floor((double)precision__float(a) * 16777216.0 + (double)(r >> 40) / 16777216.0) / 16777216.0;
    return precision__float(sign | precision__bits((float)f));
}

// Stochastic rounding of element i (its flat index) at step t. fp32 is stored as is.
PRECISION_HD static inline float round_stochastic(float x, int dtype, uint64_t seed, uint64_t t, uint64_t i) {
    if (dtype == DTYPE_FP32) { return x; }
    uint64_t r = sr_hash(seed, t, i);
    return dtype == DTYPE_BF16 ? sr_bf16(x, r) : sr_fp16(x, r);
}

#endif // PRECISION_H
