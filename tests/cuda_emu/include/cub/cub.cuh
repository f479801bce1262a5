/*
tests/cuda_emu/include/cub/cub.cuh: the one cub call of the CUDA backend (DeviceRadixSort::SortPairs), for the CPU
emulation (tests/cuda_emu/cuda_emu.h). The build puts this directory first on the include path.

Like cub's: a stable sort of (key, value) pairs by the key bits [begin_bit, end_bit), keys compared as cub's radix
sort does (signed integers by value); the first call with temp == NULL only asks for the temporary storage's size,
and the second needs at least that much, in device memory. The sort runs when its stream does (cuda_emu.h).
*/
#ifndef CUDA_EMU_CUB_CUH
#define CUDA_EMU_CUB_CUH

namespace cub {
struct DeviceRadixSort {
    template <class K, class V>
    static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out, const V* vals_in, V* vals_out,
                                 int n, int begin_bit = 0, int end_bit = (int)sizeof(K) * 8, cudaStream_t stream = 0) {
        static_assert(std::is_integral<K>::value, "the emulated radix sort takes integer keys");
        size_t need = 2 * (size_t)n * (sizeof(K) + sizeof(V)) + 256;
        if (!temp) { temp_bytes = need; return cudaSuccess; }
        if (temp_bytes < need) { emu::fail("cub::DeviceRadixSort::SortPairs: %zu bytes of temporary storage, %zu needed", temp_bytes, need); }
        emu::mem_check(temp, temp_bytes, emu::MEM_DEVICE, "cub::DeviceRadixSort::SortPairs: the temporary storage");
        if (n == 0) { return cudaSuccess; }
        emu::mem_check(keys_in, (size_t)n * sizeof(K), emu::MEM_DEVICE, "cub::DeviceRadixSort::SortPairs: keys_in");
        emu::mem_check(keys_out, (size_t)n * sizeof(K), emu::MEM_DEVICE, "cub::DeviceRadixSort::SortPairs: keys_out");
        emu::mem_check(vals_in, (size_t)n * sizeof(V), emu::MEM_DEVICE, "cub::DeviceRadixSort::SortPairs: values_in");
        emu::mem_check(vals_out, (size_t)n * sizeof(V), emu::MEM_DEVICE, "cub::DeviceRadixSort::SortPairs: values_out");
        emu::enqueue(stream, [=]() { // sorted when the stream runs it
            typedef typename std::make_unsigned<K>::type U;
            const int bits = (int)sizeof(K) * 8;
            auto radix = [&](K key) {
                U u = (U)key;
                if (std::is_signed<K>::value) { u ^= (U)1 << (bits - 1); } // two's complement in value order
                U width = (U)(end_bit - begin_bit);
                U mask = width >= (U)bits ? (U)~(U)0 : (U)(((U)1 << width) - 1);
                return (U)((u >> begin_bit) & mask);
            };
            std::vector<int> idx(n);
            for (int i = 0; i < n; i++) { idx[i] = i; }
            std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) { return radix(keys_in[x]) < radix(keys_in[y]); });
            std::vector<K> k(n);
            std::vector<V> v(n);
            for (int i = 0; i < n; i++) { k[i] = keys_in[idx[i]]; v[i] = vals_in[idx[i]]; }
            std::copy(k.begin(), k.end(), keys_out);
            std::copy(v.begin(), v.end(), vals_out);
            emu::mem_check_guards("cub::DeviceRadixSort::SortPairs");
        });
        return cudaSuccess;
    }
};
} // namespace cub

#endif
