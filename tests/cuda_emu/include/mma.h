/*
tests/cuda_emu/include/mma.h: the CPU emulation of CUDA's warp matrix functions (nvcuda::wmma), for kernels.cuh's
tensor-core attention under tests/cuda_emu (this folder comes before the toolkit's on the emulated build's include
path). The 16 x 16 x 16 shape, 16-bit operands (__nv_bfloat16, __half) and fp32 accumulators: what the kernels use.

How it models the hardware: a fragment's elements are spread over the warp's lanes in a way CUDA leaves unspecified.
Here an operand fragment (matrix_a, matrix_b) holds the whole tile in every lane, and an accumulator's elements are
spread as the tensor cores' are on sm_80 and sm_90 (emu_owned below): mma_sync computes in each lane only the
elements that lane owns, and store_matrix_sync writes only those. So a lane that reads what another lane stored, without a __syncwarp between, is a race the
shared-memory checker reports (as it is on a GPU), and code that touched a fragment's elements by index would find
most of them missing (the kernels never do: the mapping is the hardware's).

Each load, store and mma is a rendezvous of all 32 lanes, which must pass the same pointer, leading dimension and
layout (on a GPU a diverged warp there is undefined behaviour);
pointers must be 32-byte aligned and the leading dimension a multiple of 16 bytes (the documented requirements; a
GPU faults or computes garbage otherwise); a tile in device memory must lie inside one allocation, and one in shared
memory inside its array (each element is checked and recorded for the race checker). Products are summed in fp32 in
k order; the tensor cores' order and rounding of the sum differ, which the tests' tolerances allow for.
*/
#ifndef CUDA_EMU_MMA_H
#define CUDA_EMU_MMA_H

#include <type_traits>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, class T, class Layout> struct emu_check_types {
    static_assert(std::is_same<Use, accumulator>::value ? std::is_same<T, float>::value
                                                        : (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value),
                  "cuda_emu: wmma is emulated for bf16 / fp16 operands and fp32 accumulators");
    static_assert(std::is_same<Use, accumulator>::value == std::is_same<Layout, void>::value,
                  "cuda_emu: an operand fragment names its layout (row_major / col_major), an accumulator none");
};

// An operand: the whole 16 x 16 tile, row-major, in every lane.
template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment : emu_check_types<Use, T, Layout> {
    static_assert(M == 16 && N == 16 && K == 16, "cuda_emu: wmma is emulated for the 16 x 16 x 16 shape");
    T v[256];
};
// An accumulator: the 8 elements this lane owns, v[q] being tile element emu_owned(lane, q).
template <int M, int N, int K> struct fragment<accumulator, M, N, K, float, void> {
    static_assert(M == 16 && N == 16 && K == 16, "cuda_emu: wmma is emulated for the 16 x 16 x 16 shape");
    float v[8];
};

// Which element (row-major index) of a 16 x 16 accumulator lane `lane` holds as its q-th: the layout of the tensor
// cores' mma.m16n8k16 accumulators (two 16 x 8 halves; lane l holds rows l/4 and l/4 + 8, columns 2 (l % 4) and the
// next, of each half), which is what wmma's fragments are on sm_80 and sm_90. Kernels must not depend on it; it is
// modelled so that a kernel whose lanes read a stored tile in another pattern without a __syncwarp is caught.
static inline unsigned emu_owned(unsigned lane, int q) {
    unsigned half = q / 4, hi = (q / 2) % 2, odd = q % 2;
    return (lane / 4 + 8 * hi) * 16 + 8 * half + 2 * (lane % 4) + odd;
}

static inline unsigned emu_lane(void) {
    if (!emu::g_cur) { emu::fail("a wmma operation outside a kernel"); }
    return emu::g_cur->linear % 32;
}

// Every lane of the warp must arrive (a diverged warp at a wmma operation is undefined behaviour on a GPU), at the
// same kind of operation with the same pointer, leading dimension and layout (as CUDA requires of all lanes).
enum { EMU_LOAD_A = 1, EMU_LOAD_B, EMU_STORE, EMU_MMA };
static inline void emu_converge(int kind, const void* p = NULL, unsigned ldm = 0, int layout = 0) {
    uint64_t args = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull ^ ((uint64_t)ldm << 8) ^ ((uint64_t)kind << 2) ^ (uint64_t)layout;
    emu::warp_wait(0xffffffffu, emu::OP_WMMA, args);
}
template <class Use> static constexpr int emu_kind() { return std::is_same<Use, matrix_a>::value ? EMU_LOAD_A : EMU_LOAD_B; }

static inline void emu_check_layout(const void* p, unsigned ldm, size_t elem, const char* what) {
    if ((uintptr_t)p % 32 != 0) { emu::fail("%s: the pointer %p is not 32-byte aligned (wmma needs 256-bit alignment)", what, p); }
    if ((ldm * elem) % 16 != 0) { emu::fail("%s: the leading dimension %u is not a multiple of 16 bytes", what, ldm); }
}

// offset of tile element (r, c) in memory, and the extent of a 16 x 16 tile, for a layout
static inline size_t emu_at(int r, int c, unsigned ldm, bool row) { return row ? (size_t)r * ldm + c : (size_t)c * ldm + r; }
static inline size_t emu_extent(unsigned ldm) { return (size_t)15 * ldm + 16; }

template <class Layout> static constexpr bool emu_row() { return std::is_same<Layout, row_major>::value; }

// A tile's memory: a device pointer (the whole tile checked against its allocation at once) or a pointer into a
// shared array (each element checked, and recorded for the race checker, as it is touched).
template <class T> static inline const void* emu_addr(const T* p) { return p; }
template <class T> static inline const void* emu_addr(const emu::SharedPtr<T>& p) { return p.raw(); }
template <class T> static inline void emu_check_extent(const T* p, unsigned ldm, const char* what) {
    emu::mem_check(p, emu_extent(ldm) * sizeof(T), emu::MEM_DEVICE, what);
}
template <class T> static inline void emu_check_extent(const emu::SharedPtr<T>&, unsigned, const char*) {}

// --- operands: every lane loads the whole tile
template <class Use, class T, class Layout, class P>
static inline void emu_load(fragment<Use, 16, 16, 16, T, Layout>& f, const P& p, unsigned ldm) {
    static_assert(!std::is_same<Use, accumulator>::value, "cuda_emu: an accumulator's load names its layout_t");
    emu_converge(emu_kind<Use>(), emu_addr(p), ldm, emu_row<Layout>());
    emu_check_layout(emu_addr(p), ldm, sizeof(T), "wmma::load_matrix_sync");
    emu_check_extent(p, ldm, "wmma::load_matrix_sync");
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 16; c++) { f.v[r * 16 + c] = (T)p[emu_at(r, c, ldm, emu_row<Layout>())]; }
    }
}
template <class Use, class T, class Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) { emu_load(f, p, ldm); }
template <class Use, class T, class Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, emu::SharedPtr<T> p, unsigned ldm) { emu_load(f, p, ldm); }

static inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float x) {
    for (int q = 0; q < 8; q++) { f.v[q] = x; }
}

// --- d = a b + c: each lane computes the accumulator elements it owns
template <class T, class La, class Lb>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, La>& a,
                            const fragment<matrix_b, 16, 16, 16, T, Lb>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
    emu_converge(EMU_MMA);
    unsigned lane = emu_lane();
    for (int q = 0; q < 8; q++) {
        unsigned e = emu_owned(lane, q), r = e / 16, col = e % 16;
        float s = c.v[q];
        for (int k = 0; k < 16; k++) { s += (float)a.v[r * 16 + k] * (float)b.v[k * 16 + col]; }
        d.v[q] = s;
    }
}

// --- accumulators: each lane stores the elements it owns
template <class P>
static inline void emu_store(const P& p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout) {
    emu_converge(EMU_STORE, emu_addr(p), ldm, layout);
    emu_check_layout(emu_addr(p), ldm, sizeof(float), "wmma::store_matrix_sync");
    emu_check_extent(p, ldm, "wmma::store_matrix_sync");
    for (int q = 0; q < 8; q++) { unsigned e = emu_owned(emu_lane(), q); p[emu_at(e / 16, e % 16, ldm, layout == mem_row_major)] = f.v[q]; }
}
static inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout) {
    emu_store(p, f, ldm, layout);
}
static inline void store_matrix_sync(emu::SharedPtr<float> p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                                     layout_t layout) {
    emu_store(p, f, ldm, layout);
}

} // namespace wmma
} // namespace nvcuda

#endif // CUDA_EMU_MMA_H
