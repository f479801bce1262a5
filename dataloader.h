/*
dataloader.h: token shards, the distributed sampler and its resumable state, for the GPT-2 trainer.
Only static functions: any translation unit may include it (train_gpt.c as C, and as CUDA C++ via nvcc -x cu).
Tested by tests/test_dataloader.c (make tests/test_dataloader && ./tests/test_dataloader).

Shard format (llm.c): a header of 256 int32, [0] = 20240520 (magic), [1] = version, [2] = token count n;
then n tokens, uint16 for version 1, uint32 for version 2 (vocabularies above 65536). The file size must be
exactly 1024 + n * bytes_per_token. Shards are the files matching a glob pattern, in sorted order, mapped
read-only with mmap. Every shard is validated once at init, including a scan that every token id < vocab_size.

Two orders, chosen by `shuffle`:

shuffle = 0, llm.c's sequential order. Shards in glob order. A "group" is world consecutive chunks of B*T tokens
starting at the group position p (0 at the start of a shard); rank r's batch is the B*T+1 tokens from
p + r*B*T (inputs = the first B*T, targets = the same window shifted by one). After a batch p += B*T*world.
When the group at p would not fit (p + B*T*world + 1 > n) the loader moves to the next shard with p = 0,
wrapping from the last shard to shard 0, which starts a new epoch. The check uses the group position, not the
rank's, so all ranks change shard together. The check is made just before reading, so a state saved with one
world size and resumed with another applies the new world's rule.

shuffle = 1, the distributed sampler. A sample is a window of T+1 tokens starting at i*T in a shard,
i in [0, (n-1)/T). Epoch e's sample stream is the shards in a permuted order (Fisher-Yates driven by
splitmix64 of (seed, e)), each shard's samples in a permuted order (a keyed Feistel bijection with cycle
walking, keyed by (seed, e, shard): no allocation, any shard size). Epochs are concatenated into one global
stream. Micro-step g consumes stream samples [g*B*world, (g+1)*B*world); rank r takes the B samples from
g*B*world + r*B, one per row. A group may straddle an epoch boundary. The only position is the global sample
cursor, which does not depend on rank, world or B, so a run resumed with another world size (or B) continues
the same stream: within an epoch no sample is dropped or repeated.

A blend of data sets (shuffle = 1 only; Megatron's --data-path): the pattern "W1:GLOB1,W2:GLOB2,..." (up to 64; a
pattern starting with a number and a colon is read as one; "1:GLOB" is GLOB itself). Each data set k is a stream
of its own as above, keyed by its own seed (the loader's seed for the first, so it keeps its unblended order;
mix64(seed ^ mix64(0xB1E2DA7A00000000 + k)) for the others). The weights become integer parts w_k of 65536 (each
at least one part). The global stream position s goes to the data set furthest behind its share: the largest
w_k (s + 1) - n_k(s) W, with W the sum of the parts and n_k(s) the positions before s that went to k (ties to the
first). Position s then reads data set k's stream at n_k(s). Integers only, so every rank, world size and machine
agrees. The choices repeat every W positions (checked at init: one period gives each data set exactly its w_k), so
n_k(s) is w_k per whole period before s plus at most W choices replayed, and every prefix of the stream holds each
share closely (within one sample for two data sets; under two samples measured for up to 64). The position is
still the global cursor alone. An "epoch" (word [4],
--steps -1) counts the samples of all data sets together, and the fingerprint covers the data sets and their
weights. Each data set must hold B*world samples.

shuffle = 2, llm.c's shuffled order: the batches llm.c's train_gpt2.cu reads (its llmc/dataloader.h with
should_shuffle, whose generator is llmc/rand.h's MT19937, PyTorch's). Groups as in shuffle = 0 (sample i of a
shard is the group at i*B*T*world; rank r reads its B*T+1 tokens from there + r*B*T), but every rank draws its own
orders from MT19937 seeded 42 + rank: at the start of each epoch it permutes its shard order again (Fisher-Yates,
j = draw % (i + 1), the previous epoch's order permuted, from the identity at the start), and on entering a shard it
permutes that shard's groups afresh from the identity. So ranks read different shards at the same step, as in
llm.c. The position is the number of calls made: a resume replays that many (cheap: no tokens are read), which needs
the same B, T and world (refused otherwise). Checked against llm.c's own loader: tests/ref/llmc_data_order.txt.

Shard size rules (checked at init, the error names the file):
  shuffle = 0 or 2: every shard holds at least one group: n >= B*T*world + 1.
  shuffle = 1: every shard holds at least one sample: n >= T + 1; and the whole data set holds at least
               B*world samples per epoch (so the ranks of one micro-step never share a sample).

Resumable state: DATALOADER_STATE_WORDS uint64 words, logical (no rank, no world, no B):
  [0] DATALOADER_STATE_MAGIC ("DLST", layout version 1)
  [1] shuffle (0 or 1)
  [2] seed
  [3] T (checked on restore only when shuffle = 1, where it defines the samples)
  [4] epoch (shuffle = 1: cursor / samples per epoch, checked for consistency)
  [5] shuffle = 0: shard index;             shuffle = 1: global sample cursor; shuffle = 2: calls made
  [6] shuffle = 0: group position in shard; shuffle = 1: 0;                    shuffle = 2: B*T
  (shuffle = 2 puts the world size in [2], its seed being llm.c's fixed 42 + rank)
  [7] data fingerprint: FNV-1a of the shard count and every shard's token count (a different data set is
      refused; renaming or moving the files is not)
*/
#ifndef DATALOADER_H
#define DATALOADER_H

#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "utils.h"

#define DATALOADER_SHARD_MAGIC 20240520
#define DATALOADER_HEADER_INTS 256
#define DATALOADER_HEADER_BYTES (DATALOADER_HEADER_INTS * 4)
#define DATALOADER_STATE_WORDS 8
#define DATALOADER_STATE_MAGIC ((((uint64_t)0x444C5354) << 32) | 1u) // "DLST", layout version 1
#define DATALOADER_MAX_SOURCES 64      // data sets in one blend
#define DATALOADER_WEIGHT_UNITS 65536  // a blend's weights, as integer parts of this total (exact arithmetic)

// ----------------------------------------------------------------------------
// types

typedef struct {
    char* path;               // owned copy of the file name
    void* map;                // the whole file, mapped read-only
    size_t map_bytes;         // size of the mapping (the file size)
    const void* tokens;       // map + 1024: (ntok) uint16 or uint32
    int bytes_per_token;      // 2 (version 1) or 4 (version 2)
    uint64_t ntok;            // tokens in the shard
    uint64_t nsamples;        // shuffle = 1: windows of T+1 tokens at i*T, (ntok - 1) / T
} DataShard;

// One data set of a blend (shuffle = 1; an unblended loader has one): its shards, its weight and its own stream of
// epochs, each a permutation of its samples.
typedef struct {
    char* pattern;            // owned copy of its glob pattern (for messages)
    int first, count;         // its shards: shards[first .. first + count), in glob order
    uint32_t weight;          // parts of the loader's weight_total (1 and 1 for one data set)
    uint64_t seed;            // the permutation seed: the loader's seed for data set 0, derived from it for the others
    uint64_t samples_per_epoch; // sum of nsamples over its shards
    uint64_t drawn;           // blend: the positions of the loader's current period, before blend_pos, that went to it
    uint64_t cached_epoch;    // the epoch perm/offsets describe, or UINT64_MAX
    int* shard_perm;          // (count) stream position k within an epoch -> shard (local index)
    uint64_t* shard_offset;   // (count + 1) first sample of stream position k within the epoch
} DataSource;

typedef struct {
    // configuration
    int B, T;                 // batch size and sequence length of one rank's micro-batch
    int rank, world;          // this process and the number of processes that share the stream
    int shuffle;              // 0: llm.c sequential order; 1: the distributed sampler; 2: llm.c's shuffled order
    uint64_t seed;            // shuffle = 1: the permutation seed
    int vocab_size;           // every token id is below it (validated at init)
    // the data
    int nshards;
    DataShard* shards;        // (nshards) in glob order
    uint64_t total_tokens;    // sum of ntok over shards
    uint64_t samples_per_epoch; // shuffle = 1: sum of nsamples over shards (over every data set of a blend)
    uint64_t fingerprint;     // FNV-1a of nshards and every ntok (a blend: of the data sets, their weights and ntoks)
    int nsources;             // data sets: 1, or a blend's (shuffle = 1 only)
    DataSource* sources;      // (nsources)
    uint32_t weight_total;    // sum of the sources' weights
    uint64_t blend_base;      // blend: the start of the period of weight_total positions the drawn counts belong to
    uint64_t blend_pos;       // blend: the stream position the sources' drawn counts are up to
    // position (the logical state)
    uint64_t epoch;           // shuffle = 0: epochs completed; shuffle = 1: derived from cursor
    int shard_index;          // shuffle = 0: current shard
    uint64_t position;        // shuffle = 0: group start position in the current shard (tokens)
    uint64_t cursor;          // shuffle = 1: global sample cursor (samples consumed by all ranks)
    // shuffle = 2: this epoch's shard order, this rank's MT19937 and the current shard's group order; shard_index and position are llm.c's
    // current_shard_idx and current_sample_idx
    int* shard_perm;          // (nshards) stream position k -> shard index
    uint32_t mt[624];
    int mt_left, mt_next;
    int* group_perm;          // (most_groups) group order of the current shard
    uint64_t most_groups;     // the most groups any shard holds
    uint64_t shard_groups;    // groups in the current shard
    uint64_t calls;           // dataloader_next_batch calls since the start
    // output of dataloader_next_batch
    int32_t* inputs;          // (B*T)
    int32_t* targets;         // (B*T)
} DataLoader;

// ----------------------------------------------------------------------------
// errors

// Writes a one-line message into err (if not NULL) and returns -1.
static int __attribute__((format(printf, 3, 4))) dataloader__fail(char* err, size_t errlen, const char* fmt, ...) {
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

// ----------------------------------------------------------------------------
// hashing and the permutations

// splitmix64's finalizer: a bijective 64-bit mixer with full avalanche.
static uint64_t dataloader__mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// The key of epoch e under seed: everything random in that epoch derives from it.
static uint64_t dataloader__epoch_key(uint64_t seed, uint64_t epoch) {
    return dataloader__mix64(dataloader__mix64(seed) ^ dataloader__mix64(epoch ^ 0x5EED5EED5EED5EEDULL));
}

#define DATALOADER_FEISTEL_ROUNDS 6

// A keyed bijection of [0, n): a balanced Feistel network on the smallest even number of bits covering n,
// cycle-walked until the value lands below n (expected fewer than 4 walks, since 4^half < 4n).
static uint64_t dataloader__permute(uint64_t x, uint64_t n, uint64_t key) {
    if (n <= 1) { return 0; }
    int bits = 0;
    while (bits < 64 && (((uint64_t)1) << bits) < n) { bits++; }
    int half = (bits + 1) / 2;
    uint64_t mask = (((uint64_t)1) << half) - 1;
    do {
        uint64_t left = x >> half, right = x & mask;
        for (int round = 0; round < DATALOADER_FEISTEL_ROUNDS; round++) {
            uint64_t f = dataloader__mix64(right ^ dataloader__mix64(key + (uint64_t)round)) & mask;
            uint64_t next_right = left ^ f;
            left = right;
            right = next_right;
        }
        x = (left << half) | right;
    } while (x >= n);
    return x;
}

// Makes src's shard_perm and shard_offset describe its epoch e (shuffle = 1): Fisher-Yates on its shard order with a
// splitmix64 stream from the epoch key, then prefix sums of the samples in that order.
static void dataloader__prepare_epoch(DataLoader* dl, DataSource* src, uint64_t epoch) {
    if (src->cached_epoch == epoch) { return; }
    uint64_t state = dataloader__epoch_key(src->seed, epoch);
    for (int i = 0; i < src->count; i++) { src->shard_perm[i] = i; }
    for (int i = src->count - 1; i > 0; i--) {
        state += 0x9E3779B97F4A7C15ULL;
        uint64_t j = dataloader__mix64(state) % (uint64_t)(i + 1); // bias below 2^-32 for any shard count
        int tmp = src->shard_perm[i];
        src->shard_perm[i] = src->shard_perm[j];
        src->shard_perm[j] = tmp;
    }
    src->shard_offset[0] = 0;
    for (int k = 0; k < src->count; k++) {
        src->shard_offset[k + 1] = src->shard_offset[k] + dl->shards[src->first + src->shard_perm[k]].nsamples;
    }
    src->cached_epoch = epoch;
}

// The data set of a blend that position i of one period of W = weight_total positions goes to, given the draws
// so far in that period: the one furthest behind its share, the largest w_k (i + 1) - drawn_k W (ties to the first).
static int dataloader__blend_choose(const DataLoader* dl, uint64_t i) {
    int best = 0;
    int64_t best_deficit = 0;
    for (int k = 0; k < dl->nsources; k++) {
        const DataSource* src = &dl->sources[k];
        int64_t deficit = (int64_t)src->weight * (int64_t)(i + 1) - (int64_t)src->drawn * (int64_t)dl->weight_total;
        if (k == 0 || deficit > best_deficit) { best = k; best_deficit = deficit; }
    }
    return best;
}

// A blend's data set at global stream position s, and its own stream's position there (how many positions before s
// went to it). The choices repeat every W positions, W data set k's (checked at init: after W choices each data set
// has had exactly its w_k, so the deficits are back where they started). So a position's period start is
// s - s % W, its data set's earlier draws are w_k per period before it, and at most W choices are replayed:
// blend_base is the period the drawn counts belong to, blend_pos how far they go.
static int dataloader__blend_source(DataLoader* dl, uint64_t s, uint64_t* local) {
    uint64_t W = dl->weight_total;
    if (s < dl->blend_base || s - dl->blend_base >= W || s < dl->blend_pos) { // another period, or behind: replay it
        dl->blend_base = s - s % W;
        dl->blend_pos = dl->blend_base;
        for (int k = 0; k < dl->nsources; k++) { dl->sources[k].drawn = 0; }
    }
    for (;;) {
        int k = dataloader__blend_choose(dl, dl->blend_pos - dl->blend_base);
        DataSource* src = &dl->sources[k];
        if (dl->blend_pos++ == s) {
            *local = dl->blend_base / W * src->weight + src->drawn++;
            return k;
        }
        src->drawn++;
    }
}

// Maps global stream sample s (shuffle = 1) to its shard and the token position where its window starts: the data
// set's own stream position (a blend's, or s itself), its epoch, that epoch's shard order, and the keyed
// permutation of that shard's samples.
static void dataloader__locate_sample(DataLoader* dl, uint64_t s, int* shard, uint64_t* start) {
    uint64_t local = s;
    DataSource* src = &dl->sources[dl->nsources > 1 ? dataloader__blend_source(dl, s, &local) : 0];
    uint64_t epoch = local / src->samples_per_epoch;
    uint64_t j = local % src->samples_per_epoch;
    dataloader__prepare_epoch(dl, src, epoch);
    int lo = 0, hi = src->count - 1; // find k with offset[k] <= j < offset[k+1]
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (src->shard_offset[mid] <= j) { lo = mid; } else { hi = mid - 1; }
    }
    int sh = src->shard_perm[lo];
    uint64_t i_local = j - src->shard_offset[lo];
    uint64_t key = dataloader__mix64(dataloader__epoch_key(src->seed, epoch) ^ dataloader__mix64((uint64_t)sh));
    uint64_t i = dataloader__permute(i_local, dl->shards[src->first + sh].nsamples, key);
    *shard = src->first + sh;
    *start = i * (uint64_t)dl->T;
}

// ----------------------------------------------------------------------------
// shuffle = 2: llm.c's shuffled order

// MT19937 seeded as llm.c's manual_seed (the reference generator's init_genrand); the first draw twists.
static void dataloader__mt_seed(DataLoader* dl, uint32_t seed) {
    dl->mt[0] = seed;
    for (uint32_t j = 1; j < 624; j++) { dl->mt[j] = 1812433253u * (dl->mt[j - 1] ^ (dl->mt[j - 1] >> 30)) + j; }
    dl->mt_left = 1;
    dl->mt_next = 0;
}

static uint32_t dataloader__mt_draw(DataLoader* dl) {
    if (--dl->mt_left <= 0) { // the twist: all 624 words at once
        for (int j = 0; j < 624; j++) {
            uint32_t y = (dl->mt[j] & 0x80000000u) | (dl->mt[(j + 1) % 624] & 0x7fffffffu);
            dl->mt[j] = dl->mt[(j + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        dl->mt_left = 624;
        dl->mt_next = 0;
    }
    uint32_t y = dl->mt[dl->mt_next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

// llm.c's random_permutation: Fisher-Yates from the end, j = draw % (i + 1).
static void dataloader__mt_permute(DataLoader* dl, int* a, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(dataloader__mt_draw(dl) % (uint32_t)(i + 1));
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

// Entering stream position shard_index: that shard's groups in a fresh order.
static void dataloader__llmc_enter_shard(DataLoader* dl) {
    uint64_t group = (uint64_t)dl->B * (uint64_t)dl->T * (uint64_t)dl->world;
    dl->shard_groups = (dl->shards[dl->shard_perm[dl->shard_index]].ntok - 1) / group;
    for (uint64_t i = 0; i < dl->shard_groups; i++) { dl->group_perm[i] = (int)i; }
    dataloader__mt_permute(dl, dl->group_perm, (int)dl->shard_groups);
    dl->position = 0;
}

// The next call's group (its first token in shard shard_perm[shard_index]), advancing as llm.c's next_batch does:
// past the last group of a shard into the next one, past the last shard into a new epoch with a new shard order.
static uint64_t dataloader__llmc_advance(DataLoader* dl) {
    if (dl->position >= dl->shard_groups) {
        if (dl->shard_index == dl->nshards - 1) {
            dl->shard_index = 0;
            dl->epoch++;
            dataloader__mt_permute(dl, dl->shard_perm, dl->nshards);
        } else {
            dl->shard_index++;
        }
        dataloader__llmc_enter_shard(dl);
    }
    uint64_t group = (uint64_t)dl->B * (uint64_t)dl->T * (uint64_t)dl->world;
    uint64_t start = (uint64_t)dl->group_perm[dl->position] * group + (uint64_t)dl->rank * (uint64_t)dl->B * (uint64_t)dl->T;
    dl->position++;
    dl->calls++;
    return start;
}

// ----------------------------------------------------------------------------
// shards

// Reads token at position i of a shard.
static inline uint32_t dataloader__token(const DataShard* sh, uint64_t i) {
    if (sh->bytes_per_token == 2) { return ((const uint16_t*)sh->tokens)[i]; }
    return ((const uint32_t*)sh->tokens)[i];
}

// Fills n input tokens from position start and the n targets from start + 1 (reads n + 1 tokens).
static void dataloader__copy_window(const DataShard* sh, uint64_t start, size_t n, int32_t* inputs, int32_t* targets) {
    if (sh->bytes_per_token == 2) {
        const uint16_t* p = (const uint16_t*)sh->tokens + start;
        for (size_t i = 0; i < n; i++) { inputs[i] = (int32_t)p[i]; targets[i] = (int32_t)p[i + 1]; }
    } else {
        const uint32_t* p = (const uint32_t*)sh->tokens + start;
        for (size_t i = 0; i < n; i++) { inputs[i] = (int32_t)p[i]; targets[i] = (int32_t)p[i + 1]; }
    }
}

#define DATALOADER_SCAN_CHUNK 65536

// Position of the first token id >= vocab in the shard, or ntok if there is none. Parallel over chunks:
// each chunk takes its maximum (vectorizes), and only a chunk whose maximum is too big is searched.
static uint64_t dataloader__first_bad_token(const DataShard* sh, uint64_t vocab) {
    if (sh->bytes_per_token == 2 && vocab > 65535) { return sh->ntok; }
    int64_t nchunks = (int64_t)((sh->ntok + DATALOADER_SCAN_CHUNK - 1) / DATALOADER_SCAN_CHUNK);
    uint64_t first = sh->ntok;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(min : first)
#endif
    for (int64_t c = 0; c < nchunks; c++) {
        uint64_t lo = (uint64_t)c * DATALOADER_SCAN_CHUNK;
        uint64_t hi = lo + DATALOADER_SCAN_CHUNK < sh->ntok ? lo + DATALOADER_SCAN_CHUNK : sh->ntok;
        uint32_t mx = 0;
        if (sh->bytes_per_token == 2) {
            const uint16_t* p = (const uint16_t*)sh->tokens;
            for (uint64_t i = lo; i < hi; i++) { mx = p[i] > mx ? p[i] : mx; }
        } else {
            const uint32_t* p = (const uint32_t*)sh->tokens;
            for (uint64_t i = lo; i < hi; i++) { mx = p[i] > mx ? p[i] : mx; }
        }
        if (mx >= vocab) {
            for (uint64_t i = lo; i < hi; i++) {
                if (dataloader__token(sh, i) >= vocab) { first = i < first ? i : first; break; }
            }
        }
    }
    return first;
}

// Maps and validates one shard's header and size. Returns 0, or -1 with a message naming the file.
static int dataloader__open_shard(DataShard* sh, const char* path, char* err, size_t errlen) {
    size_t len = strlen(path);
    sh->path = (char*)mallocCheck(len + 1);
    memcpy(sh->path, path, len + 1);
    int fd = open(path, O_RDONLY);
    if (fd < 0) { return dataloader__fail(err, errlen, "'%s': cannot open: %s", path, strerror(errno)); }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dataloader__fail(err, errlen, "'%s': cannot stat: %s", path, strerror(e));
    }
    if ((uint64_t)st.st_size < DATALOADER_HEADER_BYTES) {
        close(fd);
        return dataloader__fail(err, errlen, "'%s': file is %lld bytes, smaller than the %d-byte shard header",
                                path, (long long)st.st_size, DATALOADER_HEADER_BYTES);
    }
    void* map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    int map_errno = errno;
    close(fd); // the mapping stays valid
    if (map == MAP_FAILED) { return dataloader__fail(err, errlen, "'%s': mmap failed: %s", path, strerror(map_errno)); }
    sh->map = map;
    sh->map_bytes = (size_t)st.st_size;
    int32_t header[DATALOADER_HEADER_INTS];
    memcpy(header, map, sizeof(header));
    if (header[0] != DATALOADER_SHARD_MAGIC) {
        return dataloader__fail(err, errlen, "'%s': bad magic %d in the shard header (expected %d)",
                                path, header[0], DATALOADER_SHARD_MAGIC);
    }
    if (header[1] != 1 && header[1] != 2) {
        return dataloader__fail(err, errlen, "'%s': unsupported shard version %d (expected 1 = uint16 or 2 = uint32 tokens)",
                                path, header[1]);
    }
    if (header[2] < 0) {
        return dataloader__fail(err, errlen, "'%s': negative token count %d in the shard header", path, header[2]);
    }
    sh->bytes_per_token = header[1] == 1 ? 2 : 4;
    sh->ntok = (uint64_t)header[2];
    uint64_t expected = DATALOADER_HEADER_BYTES + sh->ntok * (uint64_t)sh->bytes_per_token;
    if (expected != (uint64_t)st.st_size) {
        return dataloader__fail(err, errlen, "'%s': header says %llu tokens (%llu bytes with the header) but the file is %llu bytes",
                                path, (unsigned long long)sh->ntok, (unsigned long long)expected,
                                (unsigned long long)st.st_size);
    }
    sh->tokens = (const char*)map + DATALOADER_HEADER_BYTES;
    return 0;
}

// ----------------------------------------------------------------------------
// public API

// Releases everything; safe on a zeroed, partially initialized or already freed loader.
static void dataloader_free(DataLoader* dl) {
    if (dl->shards != NULL) {
        for (int i = 0; i < dl->nshards; i++) {
            if (dl->shards[i].map != NULL) { munmap(dl->shards[i].map, dl->shards[i].map_bytes); }
            free(dl->shards[i].path);
        }
        free(dl->shards);
    }
    if (dl->sources != NULL) {
        for (int k = 0; k < dl->nsources; k++) {
            free(dl->sources[k].pattern);
            free(dl->sources[k].shard_perm);
            free(dl->sources[k].shard_offset);
        }
        free(dl->sources);
    }
    dl->sources = NULL;
    dl->nsources = 0;
    free(dl->shard_perm);
    free(dl->group_perm);
    dl->group_perm = NULL;
    free(dl->inputs);
    free(dl->targets);
    dl->shards = NULL;
    dl->shard_perm = NULL;
    dl->inputs = NULL;
    dl->targets = NULL;
    dl->nshards = 0;
}

// Back to the very start of the stream: epoch 0, first shard (first permuted shard with shuffle), position 0.
static void dataloader_reset(DataLoader* dl) {
    dl->epoch = 0;
    dl->shard_index = 0;
    dl->position = 0;
    dl->cursor = 0;
    dl->calls = 0;
    dl->blend_base = 0;
    dl->blend_pos = 0;
    for (int k = 0; k < dl->nsources; k++) { dl->sources[k].drawn = 0; }
    if (dl->shuffle == 2) {
        // llm.c's dataloader_init and first dataloader_reset: the generator of this rank, the identity shard order
        // permuted, the first shard entered
        dataloader__mt_seed(dl, 42u + (uint32_t)dl->rank);
        for (int i = 0; i < dl->nshards; i++) { dl->shard_perm[i] = i; }
        dataloader__mt_permute(dl, dl->shard_perm, dl->nshards);
        dataloader__llmc_enter_shard(dl);
    }
}

// A data set spec parsed into weights and patterns (owned copies, the caller frees them): a blend,
// "W1:GLOB1,W2:GLOB2,..." (a spec starting with a number and a colon), or one plain pattern, which is one data set of
// weight 1. Returns the count (at least 1), or -1 with a message naming the item (and nothing left allocated).
// dataloader_init takes the same spec; the trainer also parses --val with it (one loader per data set).
static int dataloader_parse_blend(const char* spec, double* weights, char** patterns, char* err, size_t errlen) {
    char* end = NULL;
    (void)strtod(spec, &end);
    if (end == spec || *end != ':') {
        weights[0] = 1.0;
        patterns[0] = (char*)mallocCheck(strlen(spec) + 1);
        strcpy(patterns[0], spec);
        return 1;
    }
    int n = 0, rc = 0;
    const char* p = spec;
    const char* etc = strlen(spec) > 80 ? "..." : ""; // (the spec quoted after the problem, cut short: it may be long)
    while (*p && rc == 0) {
        const char* comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[1024];
        if (len >= sizeof(item)) {
            rc = dataloader__fail(err, errlen, "blend item %d is longer than %zu characters (in '%.80s%s')", n + 1, sizeof(item) - 1, spec, etc);
            break;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        double w = strtod(item, &end);
        if (n == DATALOADER_MAX_SOURCES) {
            rc = dataloader__fail(err, errlen, "more than %d data sets in one blend (in '%.80s%s')", DATALOADER_MAX_SOURCES, spec, etc);
        } else if (end == item || *end != ':' || !(w > 0.0) || !(w < 1e30)) {
            rc = dataloader__fail(err, errlen, "blend item '%s': expected WEIGHT:GLOB with a positive weight (in '%.80s%s')", item, spec, etc);
        } else if (end[1] == '\0') {
            rc = dataloader__fail(err, errlen, "blend item '%s': no glob pattern after the weight (in '%.80s%s')", item, spec, etc);
        } else {
            weights[n] = w;
            patterns[n] = (char*)mallocCheck(strlen(end + 1) + 1);
            strcpy(patterns[n], end + 1);
            n++;
            p = comma ? comma + 1 : p + len;
            if (comma && *p == '\0') { rc = dataloader__fail(err, errlen, "a blend item is empty (trailing comma; in '%.80s%s')", spec, etc); }
        }
    }
    if (rc != 0) {
        for (int k = 0; k < n; k++) { free(patterns[k]); }
        return -1;
    }
    return n;
}

// Opens the shards of pattern (sorted) as data set src, appending them to dl->shards, and validates each (magic,
// version, size against token count, every token id < vocab_size, the shard size rules in the header comment).
// Returns 0, or -1 with a message naming the file.
static int dataloader__open_source(DataLoader* dl, DataSource* src, const char* pattern, char* err, size_t errlen) {
    glob_t g;
    memset(&g, 0, sizeof(g));
    int grc = glob(pattern, 0, NULL, &g);
    if (grc != 0 || g.gl_pathc == 0) {
        globfree(&g);
        if (grc == GLOB_NOMATCH || grc == 0) { return dataloader__fail(err, errlen, "'%s': no file matches this pattern", pattern); }
        return dataloader__fail(err, errlen, "'%s': glob failed (code %d)", pattern, grc);
    }
    if (g.gl_pathc > (size_t)(INT32_MAX - 1 - dl->nshards)) {
        globfree(&g);
        return dataloader__fail(err, errlen, "'%s': too many files match", pattern);
    }
    src->first = dl->nshards;
    src->count = (int)g.gl_pathc;
    src->cached_epoch = UINT64_MAX;
    dl->shards = (DataShard*)realloc(dl->shards, sizeof(DataShard) * (size_t)(dl->nshards + src->count));
    if (dl->shards == NULL) { fatal("dataloader: out of memory for %d shards", dl->nshards + src->count); }
    memset(dl->shards + dl->nshards, 0, sizeof(DataShard) * (size_t)src->count);
    uint64_t group = (uint64_t)dl->B * (uint64_t)dl->T * (uint64_t)dl->world;
    for (int i = 0; i < src->count; i++) {
        DataShard* sh = &dl->shards[dl->nshards++];
        const char* path = g.gl_pathv[i];
        int rc = dataloader__open_shard(sh, path, err, errlen);
        if (rc == 0 && dl->shuffle != 1 && sh->ntok < group + 1) {
            rc = dataloader__fail(err, errlen, "'%s': %llu tokens, too few for one batch per rank (B*T*world+1 = %d*%d*%d+1 = %llu)",
                                  path, (unsigned long long)sh->ntok, dl->B, dl->T, dl->world, (unsigned long long)(group + 1));
        } else if (rc == 0 && dl->shuffle == 1 && sh->ntok < (uint64_t)dl->T + 1) {
            rc = dataloader__fail(err, errlen, "'%s': %llu tokens, too few for one sample of T+1 = %d tokens",
                                  path, (unsigned long long)sh->ntok, dl->T + 1);
        }
        if (rc == 0) {
            uint64_t bad = dataloader__first_bad_token(sh, (uint64_t)dl->vocab_size);
            if (bad < sh->ntok) {
                rc = dataloader__fail(err, errlen, "'%s': token %u at position %llu is >= vocab size %d",
                                      path, dataloader__token(sh, bad), (unsigned long long)bad, dl->vocab_size);
            }
        }
        if (rc != 0) { globfree(&g); return -1; }
        sh->nsamples = (sh->ntok - 1) / (uint64_t)dl->T;
        dl->total_tokens += sh->ntok;
        src->samples_per_epoch += sh->nsamples;
        if (dl->shuffle != 0) { madvise(sh->map, sh->map_bytes, MADV_RANDOM); } // windows are read in random order
    }
    globfree(&g);
    dl->samples_per_epoch += src->samples_per_epoch;
    if (dl->shuffle == 1 && src->samples_per_epoch < (uint64_t)dl->B * (uint64_t)dl->world) {
        return dataloader__fail(err, errlen, "'%s': %llu samples of T+1 = %d tokens in all, fewer than B*world = %d*%d",
                                pattern, (unsigned long long)src->samples_per_epoch, dl->T + 1, dl->B, dl->world);
    }
    src->shard_perm = (int*)mallocCheck(mulSize(src->count, sizeof(int)));
    src->shard_offset = (uint64_t*)mallocCheck(mulSize((size_t)src->count + 1, sizeof(uint64_t)));
    return 0;
}

// Opens every shard matching pattern (sorted), validates them all (magic, version, size against token count,
// every token id < vocab_size, the shard size rules in the header comment) and positions at the start. With
// shuffle = 1 the pattern may be a blend of data sets, "W1:GLOB1,W2:GLOB2,..." (header comment).
// Returns 0, or -1 with a one-line message in err naming the file and the problem (the loader is then freed).
static int dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int world, int shuffle,
                           uint64_t seed, int vocab_size, char* err, size_t errlen) {
    memset(dl, 0, sizeof(*dl));
    if (B <= 0 || T <= 0) { return dataloader__fail(err, errlen, "dataloader: B and T must be positive (got B=%d, T=%d)", B, T); }
    if (world <= 0 || rank < 0 || rank >= world) {
        return dataloader__fail(err, errlen, "dataloader: rank %d is not in [0, world=%d)", rank, world);
    }
    if (shuffle < 0 || shuffle > 2) { return dataloader__fail(err, errlen, "dataloader: shuffle must be 0, 1 or 2 (got %d)", shuffle); }
    if (vocab_size <= 0) { return dataloader__fail(err, errlen, "dataloader: vocab size must be positive (got %d)", vocab_size); }
    dl->B = B;
    dl->T = T;
    dl->rank = rank;
    dl->world = world;
    dl->shuffle = shuffle;
    dl->seed = seed;
    dl->vocab_size = vocab_size;

    double weights[DATALOADER_MAX_SOURCES];
    char* patterns[DATALOADER_MAX_SOURCES];
    int n = dataloader_parse_blend(pattern, weights, patterns, err, errlen);
    if (n < 0) { return -1; }
    if (n > 1 && shuffle != 1) {
        for (int k = 0; k < n; k++) { free(patterns[k]); }
        return dataloader__fail(err, errlen, "'%s': a blend of data sets needs the distributed sampler (--shuffle 1), not shuffle=%d "
                                "(llm.c's orders read one data set)", pattern, shuffle);
    }
    // the weights as integer parts of DATALOADER_WEIGHT_UNITS (one division and one product each: the same on every
    // machine), so the blend's choices are exact integer comparisons
    double wsum = 0.0;
    for (int k = 0; k < n; k++) { wsum += weights[k]; }
    dl->sources = (DataSource*)callocCheck((size_t)n, sizeof(DataSource));
    dl->nsources = n;
    int rc = 0;
    for (int k = 0; k < n; k++) {
        DataSource* src = &dl->sources[k];
        src->pattern = patterns[k];
        double parts = weights[k] / wsum * (double)DATALOADER_WEIGHT_UNITS;
        src->weight = n == 1 ? 1u : (uint32_t)llround(parts);
        dl->weight_total += src->weight;
        // data set 0 keeps the loader's seed, so a data set blended first meets its samples in its unblended order
        src->seed = k == 0 ? seed : dataloader__mix64(seed ^ dataloader__mix64(0xB1E2DA7A00000000ULL + (uint64_t)k));
        if (rc == 0 && src->weight == 0) {
            rc = dataloader__fail(err, errlen, "'%s': weight %g of %g in all is below 1/%d of the blend", src->pattern, weights[k], wsum,
                                  DATALOADER_WEIGHT_UNITS);
        }
    }
    for (int k = 0; k < n && rc == 0; k++) { rc = dataloader__open_source(dl, &dl->sources[k], dl->sources[k].pattern, err, errlen); }
    if (rc == 0 && n > 1) { // one period of the blend's choices gives each data set exactly its parts (its order repeats)
        for (uint64_t i = 0; i < dl->weight_total; i++) { dl->sources[dataloader__blend_choose(dl, i)].drawn++; }
        for (int k = 0; k < n && rc == 0; k++) {
            if (dl->sources[k].drawn != dl->sources[k].weight) {
                rc = dataloader__fail(err, errlen, "'%s': internal error: the blend's choices do not repeat every %u positions "
                                      "(data set %d had %llu of its %u)", pattern, dl->weight_total, k,
                                      (unsigned long long)dl->sources[k].drawn, dl->sources[k].weight);
            }
        }
    }
    if (rc != 0) { dataloader_free(dl); return -1; }
    // the fingerprint: one data set's is FNV-1a of the shard count and every token count (as before blends); a
    // blend's also covers the data sets and their weights
    uint64_t fp = FNV1A64_INIT;
    if (n > 1) {
        fp = fnv1a64(&dl->nsources, sizeof(dl->nsources), fp);
        for (int k = 0; k < n; k++) {
            fp = fnv1a64(&dl->sources[k].count, sizeof(int), fp);
            fp = fnv1a64(&dl->sources[k].weight, sizeof(uint32_t), fp);
        }
    }
    fp = fnv1a64(&dl->nshards, sizeof(dl->nshards), fp);
    for (int i = 0; i < dl->nshards; i++) { fp = fnv1a64(&dl->shards[i].ntok, sizeof(dl->shards[i].ntok), fp); }
    dl->fingerprint = fp;
    uint64_t BT = (uint64_t)B * (uint64_t)T, group = BT * (uint64_t)world;
    dl->shard_perm = (int*)mallocCheck(mulSize(dl->nshards, sizeof(int)));
    dl->inputs = (int32_t*)mallocCheck(mulSize(BT, sizeof(int32_t)));
    dl->targets = (int32_t*)mallocCheck(mulSize(BT, sizeof(int32_t)));
    if (shuffle == 2) {
        uint64_t most = 1;
        for (int i = 0; i < dl->nshards; i++) { most = (dl->shards[i].ntok - 1) / group > most ? (dl->shards[i].ntok - 1) / group : most; }
        if (most > (uint64_t)INT32_MAX) { dataloader_free(dl); return dataloader__fail(err, errlen, "'%s': a shard holds more than 2^31 groups", pattern); }
        dl->group_perm = (int*)mallocCheck(mulSize((size_t)most, sizeof(int)));
        dl->most_groups = most;
    }
    dataloader_reset(dl);
    return 0;
}

// Fills dl->inputs and dl->targets (rows*T each, rows <= B; targets are inputs shifted by one token) with this rank's
// next micro-batch of `rows` sequences and advances the shared position past the whole group of world micro-batches.
// Fewer rows than B (a batch ramp's small steps) read the next rows*world sequences of the same stream: the sampler's
// (shuffle 1) does not depend on the micro-batches at all; the sequential order's (shuffle 0) only where a shard ends,
// since a group that does not fit in what is left of a shard moves on to the next one. llm.c's shuffled order
// (shuffle 2) is defined by B and takes B only.
static void dataloader_next_rows(DataLoader* dl, int rows) {
    if (rows < 1 || rows > dl->B || (dl->shuffle == 2 && rows != dl->B)) {
        fatal("internal: a micro-batch of %d sequences from a loader of %d (shuffle %d)", rows, dl->B, dl->shuffle);
    }
    uint64_t T = (uint64_t)dl->T;
    uint64_t BT = (uint64_t)rows * T;
    if (dl->shuffle == 0) {
        uint64_t group = BT * (uint64_t)dl->world;
        if (dl->position + group + 1 > dl->shards[dl->shard_index].ntok) {
            dl->position = 0; // every shard holds one group of B (checked at init), so one step is enough
            dl->shard_index++;
            if (dl->shard_index == dl->nshards) { dl->shard_index = 0; dl->epoch++; }
        }
        const DataShard* sh = &dl->shards[dl->shard_index];
        dataloader__copy_window(sh, dl->position + (uint64_t)dl->rank * BT, (size_t)BT, dl->inputs, dl->targets);
        dl->position += group;
    } else if (dl->shuffle == 2) {
        uint64_t start = dataloader__llmc_advance(dl);
        dataloader__copy_window(&dl->shards[dl->shard_perm[dl->shard_index]], start, (size_t)BT, dl->inputs, dl->targets);
    } else {
        uint64_t base = dl->cursor + (uint64_t)dl->rank * (uint64_t)rows;
        for (int b = 0; b < rows; b++) {
            int shard;
            uint64_t start;
            dataloader__locate_sample(dl, base + (uint64_t)b, &shard, &start);
            dataloader__copy_window(&dl->shards[shard], start, (size_t)T, dl->inputs + (size_t)b * T, dl->targets + (size_t)b * T);
        }
        dl->cursor += (uint64_t)rows * (uint64_t)dl->world;
        dl->epoch = dl->cursor / dl->samples_per_epoch;
    }
}

// The next micro-batch of B sequences (dataloader_next_rows).
static void dataloader_next_batch(DataLoader* dl) { dataloader_next_rows(dl, dl->B); }

// Calls of dataloader_next_batch (per rank) that make one epoch. shuffle = 0: exact (sum over shards of the
// groups that fit); shuffle = 1: samples per epoch / (B*world), rounded down (groups may straddle epochs); shuffle = 2
// as 0 (each rank reads every shard's groups each epoch, in its own orders). For a validation pass opened with rank 0,
// world 1, shuffle 0 this is the number of distinct batches.
static uint64_t dataloader_num_batches(const DataLoader* dl) {
    uint64_t BT = (uint64_t)dl->B * (uint64_t)dl->T;
    uint64_t group = BT * (uint64_t)dl->world;
    if (dl->shuffle == 1) { return dl->samples_per_epoch / ((uint64_t)dl->B * (uint64_t)dl->world); }
    uint64_t n = 0;
    for (int i = 0; i < dl->nshards; i++) { n += (dl->shards[i].ntok - 1) / group; }
    return n;
}

// Positions the loader where `calls` calls of dataloader_next_batch from the start (dataloader_reset) leave it, in
// O(shards): the data position of a run resumed from a state that records only its step (an import of llm.c's
// checkpoint). shuffle = 0 counts the groups each shard holds, (ntok - 1) / group, and leaves the position after
// the last group read, as the calls would; shuffle = 1 moves the cursor; shuffle = 2 replays the calls (O(calls),
// without reading tokens), since each shard entered draws its group order from the generator.
static void dataloader_skip(DataLoader* dl, uint64_t calls) {
    dataloader_reset(dl);
    if (calls == 0) { return; }
    if (dl->shuffle == 1) {
        dl->cursor = calls * (uint64_t)dl->B * (uint64_t)dl->world;
        dl->epoch = dl->cursor / dl->samples_per_epoch;
        return;
    }
    if (dl->shuffle == 2) { // replayed: the generator's draws follow the shards entered
        for (uint64_t i = 0; i < calls; i++) { (void)dataloader__llmc_advance(dl); }
        return;
    }
    uint64_t group = (uint64_t)dl->B * (uint64_t)dl->T * (uint64_t)dl->world;
    uint64_t per_epoch = 0;
    for (int i = 0; i < dl->nshards; i++) { per_epoch += (dl->shards[i].ntok - 1) / group; }
    uint64_t k = (calls - 1) % per_epoch; // the last call's group, counted within its epoch
    dl->epoch = (calls - 1) / per_epoch;
    int s = 0;
    while (k >= (dl->shards[s].ntok - 1) / group) { k -= (dl->shards[s].ntok - 1) / group; s++; }
    dl->shard_index = s;
    dl->position = (k + 1) * group;
}

// llm.c's data loader state of process `rank` after `calls` calls of dataloader_next_batch from the start, in its
// shuffled order (dl->shuffle = 2): what llm.c's save_state writes for that process, so that llm.c can continue a
// run of ours. The calls are replayed on a copy of dl with that rank (the shards are shared, only read);
// shard_order (nshards ints) and group_order (dl->most_groups ints) receive its orders.
typedef struct {
    uint64_t shard_idx, sample_idx, groups; // llm.c's current_shard_idx, current_sample_idx, shard_num_samples
    uint32_t mt[624];                       // its mt19937_state: state_, left_, next_
    int mt_left, mt_next;
} LlmcLoaderState;

static void dataloader_llmc_state(const DataLoader* dl, int rank, uint64_t calls, LlmcLoaderState* out, int* shard_order, int* group_order) {
    DataLoader t = *dl;
    t.rank = rank;
    t.shard_perm = shard_order;
    t.group_perm = group_order;
    dataloader_skip(&t, calls);
    out->shard_idx = (uint64_t)t.shard_index;
    out->sample_idx = t.position;
    out->groups = t.shard_groups;
    memcpy(out->mt, t.mt, sizeof(out->mt));
    out->mt_left = t.mt_left;
    out->mt_next = t.mt_next;
}

// Writes the logical, rank- and world-independent position (layout in the header comment).
static void dataloader_get_state(const DataLoader* dl, uint64_t state[DATALOADER_STATE_WORDS]) {
    state[0] = DATALOADER_STATE_MAGIC;
    state[1] = (uint64_t)dl->shuffle;
    state[2] = dl->seed;
    state[3] = (uint64_t)dl->T;
    if (dl->shuffle == 0) {
        state[4] = dl->epoch;
        state[5] = (uint64_t)dl->shard_index;
        state[6] = dl->position;
    } else if (dl->shuffle == 2) {
        state[2] = (uint64_t)dl->world;
        state[4] = dl->epoch;
        state[5] = dl->calls;
        state[6] = (uint64_t)dl->B * (uint64_t)dl->T;
    } else {
        state[4] = dl->cursor / dl->samples_per_epoch;
        state[5] = dl->cursor;
        state[6] = 0;
    }
    state[7] = dl->fingerprint;
}

// Restores a position written by dataloader_get_state, possibly by a run with another rank, world size or B.
// Returns 0, or -1 with a one-line message (the loader is then unchanged) when the state does not belong to
// this kind of loader: another layout, shuffle mode, seed, T (shuffle = 1) or data set, or an impossible position.
static int dataloader_set_state(DataLoader* dl, const uint64_t state[DATALOADER_STATE_WORDS], char* err, size_t errlen) {
    if (state[0] != DATALOADER_STATE_MAGIC) {
        return dataloader__fail(err, errlen, "dataloader state: bad magic/layout 0x%016llx (expected 0x%016llx)",
                                (unsigned long long)state[0], (unsigned long long)DATALOADER_STATE_MAGIC);
    }
    if (state[1] != (uint64_t)dl->shuffle) {
        return dataloader__fail(err, errlen, "dataloader state: saved with shuffle=%llu, this loader has shuffle=%d",
                                (unsigned long long)state[1], dl->shuffle);
    }
    if (state[7] != dl->fingerprint) {
        return dataloader__fail(err, errlen, "dataloader state: saved for a different data set (shard count, token counts or blend weights differ; fingerprint %016llx, now %016llx)",
                                (unsigned long long)state[7], (unsigned long long)dl->fingerprint);
    }
    if (dl->shuffle == 0) {
        if (state[5] >= (uint64_t)dl->nshards) {
            return dataloader__fail(err, errlen, "dataloader state: shard index %llu but there are %d shards",
                                    (unsigned long long)state[5], dl->nshards);
        }
        const DataShard* sh = &dl->shards[state[5]];
        if (state[6] >= sh->ntok) {
            return dataloader__fail(err, errlen, "dataloader state: position %llu is past the end of '%s' (%llu tokens)",
                                    (unsigned long long)state[6], sh->path, (unsigned long long)sh->ntok);
        }
        dl->epoch = state[4];
        dl->shard_index = (int)state[5];
        dl->position = state[6];
        dl->cursor = 0;
    } else if (dl->shuffle == 2) {
        // every rank's own generator replays the calls: only the same world, B and T give llm.c's batches again
        if (state[2] != (uint64_t)dl->world || state[3] != (uint64_t)dl->T || state[6] != (uint64_t)dl->B * (uint64_t)dl->T) {
            return dataloader__fail(err, errlen, "dataloader state: llm.c's shuffled order (--shuffle 2) was saved with %llu processes, T=%llu "
                                    "and B*T=%llu, this run has %d, %d and %d: its order depends on all three (each rank draws its own)",
                                    (unsigned long long)state[2], (unsigned long long)state[3], (unsigned long long)state[6], dl->world, dl->T, dl->B * dl->T);
        }
        // every epoch takes each rank through every shard's groups: G calls (the new epoch starts at call G + 1)
        uint64_t G = dataloader_num_batches(dl), want = state[5] == 0 ? 0 : (state[5] - 1) / G;
        if (state[4] != want) {
            return dataloader__fail(err, errlen, "dataloader state: epoch %llu disagrees with %llu calls (%llu per epoch: epoch %llu)",
                                    (unsigned long long)state[4], (unsigned long long)state[5], (unsigned long long)G, (unsigned long long)want);
        }
        dataloader_skip(dl, state[5]); // (O(calls): the generator's draws cannot be jumped over)
    } else {
        if (state[2] != dl->seed) {
            return dataloader__fail(err, errlen, "dataloader state: saved with seed %llu, this loader has seed %llu",
                                    (unsigned long long)state[2], (unsigned long long)dl->seed);
        }
        if (state[3] != (uint64_t)dl->T) {
            return dataloader__fail(err, errlen, "dataloader state: saved with T=%llu, this loader has T=%d (samples differ)",
                                    (unsigned long long)state[3], dl->T);
        }
        if (state[4] != state[5] / dl->samples_per_epoch) {
            return dataloader__fail(err, errlen, "dataloader state: epoch %llu disagrees with cursor %llu (%llu samples per epoch)",
                                    (unsigned long long)state[4], (unsigned long long)state[5],
                                    (unsigned long long)dl->samples_per_epoch);
        }
        dl->cursor = state[5];
        dl->epoch = state[4];
        dl->shard_index = 0;
        dl->position = 0;
    }
    return 0;
}

// Total tokens over all shards.
static uint64_t dataloader_num_tokens(const DataLoader* dl) {
    return dl->total_tokens;
}

#endif // DATALOADER_H
