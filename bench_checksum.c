/*
bench_checksum.c: the checkpoint checksums side by side on one buffer: XXH3-64 (xxHash, what checkpoints of state
version 4 use) and the word-wise FNV of version 3 (still read), through utils.h's streaming Checksum API in the
chunks the checkpoint code uses (4M floats).

    make bench_checksum && ./bench_checksum [GB]      (default 1 GB; prints GB/s per kind, figure last)
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "utils.h" // defines: Checksum, checksum_begin, checksum_add, checksum_end, mallocCheck, print_version

// Seconds to checksum the buffer once with this kind (best of 3), and the value (so the work is not optimised away).
static double bench__time(const unsigned char* buf, size_t n, int kind, uint64_t* value) {
    const size_t chunk = (size_t)4 << 22; // 4M floats, STATE_CHUNK_FLOATS
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_seconds();
        Checksum c;
        checksum_begin(&c, kind);
        for (size_t off = 0; off < n; off += chunk) { checksum_add(&c, buf + off, n - off < chunk ? n - off : chunk); }
        *value = checksum_end(&c);
        double dt = now_seconds() - t0;
        if (dt < best) { best = dt; }
    }
    return best;
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) { print_version("bench_checksum"); return 0; }
    double gb = argc > 1 ? atof(argv[1]) : 1.0;
    if (!(gb > 0 && gb <= 64)) { fatal("bench_checksum: size '%s' must be a number of GB in (0, 64]", argv[1]); }
    size_t n = (size_t)(gb * 1e9);
    unsigned char* buf = (unsigned char*)mallocCheck(n);
    uint64_t s = 88172645463325252ULL;
    for (size_t i = 0; i + 8 <= n; i += 8) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; memcpy(buf + i, &s, 8); }
    uint64_t v_fnv, v_xxh = 0;
    double t_fnv = bench__time(buf, n, CHECKSUM_FNV, &v_fnv);
    printf("bench_checksum: %s: %.3f s for %.2f GB, %.2f GB/s (value %016llx)\n", checksum_name(CHECKSUM_FNV), t_fnv, gb, gb / t_fnv, (unsigned long long)v_fnv);
#ifdef USE_XXHASH
    double t_xxh = bench__time(buf, n, CHECKSUM_XXH3, &v_xxh);
    printf("bench_checksum: %s: %.3f s for %.2f GB, %.2f GB/s (value %016llx)\n", checksum_name(CHECKSUM_XXH3), t_xxh, gb, gb / t_xxh, (unsigned long long)v_xxh);
    printf("bench_checksum: XXH3 %.1fx faster than FNV | %.2f GB/s\n", t_fnv / t_xxh, gb / t_xxh);
#else
    (void)v_xxh;
    printf("bench_checksum: built without xxHash (apt-get install libxxhash-dev) | %.2f GB/s\n", gb / t_fnv);
#endif
    free(buf);
    return 0;
}
