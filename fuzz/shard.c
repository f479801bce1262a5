/*
fuzz/shard.c: fuzzes dataloader.h on llm.c token shards: dataloader_init on a glob pattern (header, size and
token checks, the shard size rules), then batches, then dataloader_set_state with a corrupted state word.

  make fuzz-build && fuzz/bin/shard -close_fd_mask=3 fuzz/corpus/shard        (or: make fuzz FUZZ_TARGETS=shard)
  fuzz/bin/shard CRASH_FILE                                                   (reproduces one input, with messages)

Input: 17 bytes of loader settings, then 1 to 4 shard files separated by "FZSH":
  [0] B = 1 + x % 8   [1] T = 1 + x % 64   [2] world = 1 + x % 4   [3] rank = x % world
  [4] shuffle = x % 3, seed = x / 3        [5..6] vocab = 1 + uint16, times 256 if [7] bit 0
  [8] index of the state word to overwrite (x % 9; 8 = none)   [9..16] its new value (uint64, little-endian; with
      shuffle 2 a new call count, word 5, is taken modulo 2^16: the replay takes as long as the calls it replays)
  [7] bit 1, with shuffle 1: a blend "W0:shard_0.bin,W1:shard_[1-3].bin" with weights 1 + [9] % 5 and 1 + [10] % 5
Invariants checked (abort = a finding): every batch token is < vocab and targets are inputs shifted by one within a
window; a state read back with dataloader_get_state is accepted by dataloader_set_state; a refused state leaves
the loader unchanged.
*/
#include "fuzz_common.h"

#include "dataloader.h" // defines: DataLoader, dataloader_init, dataloader_next_batch, dataloader_get/set_state

#define SHARD_SEP "FZSH"
#define MAX_SHARDS 4
#define CONFIG_BYTES 17

// Checks one batch: ids below vocab; targets[i] == inputs[i+1] inside each row of T (both come from one window).
static void check_batch(const DataLoader* dl) {
    size_t BT = (size_t)dl->B * (size_t)dl->T;
    for (size_t i = 0; i < BT; i++) {
        if (dl->inputs[i] < 0 || dl->inputs[i] >= dl->vocab_size || dl->targets[i] < 0 || dl->targets[i] >= dl->vocab_size) {
            fuzz_fail("batch token out of range at %zu: input %d target %d vocab %d", i, dl->inputs[i], dl->targets[i], dl->vocab_size);
        }
        if ((i + 1) % (size_t)dl->T != 0 && dl->targets[i] != dl->inputs[i + 1]) {
            fuzz_fail("targets are not inputs shifted by one at %zu", i);
        }
    }
}

static void run(void* arg) {
    const FuzzInput* in = (const FuzzInput*)arg;
    const uint8_t* d = in->data;
    size_t n = in->size;
    int B = 1 + (int)(fuzz_le(d, n, 0, 1) % 8);
    int T = 1 + (int)(fuzz_le(d, n, 1, 1) % 64);
    int world = 1 + (int)(fuzz_le(d, n, 2, 1) % 4);
    int rank = (int)(fuzz_le(d, n, 3, 1) % (uint64_t)world);
    int shuffle = (int)(fuzz_le(d, n, 4, 1) % 3);
    uint64_t seed = fuzz_le(d, n, 4, 1) / 3;
    int vocab = 1 + (int)fuzz_le(d, n, 5, 2);
    if (fuzz_le(d, n, 7, 1) & 1) { vocab *= 256; }
    int state_word = (int)(fuzz_le(d, n, 8, 1) % 9);
    uint64_t state_value = fuzz_le(d, n, 9, 8);

    const uint8_t* part[MAX_SHARDS];
    size_t len[MAX_SHARDS];
    size_t skip = n < CONFIG_BYTES ? n : CONFIG_BYTES;
    int nshards = fuzz_split(d + skip, n - skip, SHARD_SEP, part, len, MAX_SHARDS);
    char path[1024], pattern[1024];
    for (int i = 0; i < MAX_SHARDS; i++) {
        char name[64];
        snprintf(name, sizeof(name), "shard_%d.bin", i);
        if (i < nshards) { fuzz_write_file(name, part[i], len[i], path, sizeof(path)); }
        else { snprintf(path, sizeof(path), "%s/%s", fuzz_tmpdir(), name); unlink(path); }
    }
    snprintf(pattern, sizeof(pattern), "%s/shard_*.bin", fuzz_tmpdir());
    if (shuffle == 1 && (fuzz_le(d, n, 7, 1) & 2)) { // a blend of shard 0 and the others
        snprintf(pattern, sizeof(pattern), "%d:%s/shard_0.bin,%d:%s/shard_[1-3].bin", 1 + (int)(fuzz_le(d, n, 9, 1) % 5), fuzz_tmpdir(),
                 1 + (int)(fuzz_le(d, n, 10, 1) % 5), fuzz_tmpdir());
    }

    DataLoader dl;
    char err[512];
    if (dataloader_init(&dl, pattern, B, T, rank, world, shuffle, seed, vocab, err, sizeof(err)) != 0) {
        if (dl.shards != NULL || dl.inputs != NULL || dl.sources != NULL) { fuzz_fail("a failed dataloader_init left memory behind"); }
        if (fuzz_verbose()) { fprintf(stderr, "dataloader_init: %s\n", err); }
        return;
    }
    if (dataloader_num_batches(&dl) == 0 && shuffle != 1) { fuzz_fail("an accepted data set holds no batch"); }
    for (int i = 0; i < 5; i++) { dataloader_next_batch(&dl); check_batch(&dl); }
    uint64_t state[DATALOADER_STATE_WORDS], before[DATALOADER_STATE_WORDS], after[DATALOADER_STATE_WORDS];
    dataloader_get_state(&dl, state);
    if (dataloader_set_state(&dl, state, err, sizeof(err)) != 0) { fuzz_fail("own state refused: %s", err); }
    // a corrupted state: refused with the loader unchanged, or accepted and then usable
    memcpy(before, state, sizeof(state));
    if (shuffle == 2 && state_word == 5) { state_value &= 0xffff; }
    if (state_word < DATALOADER_STATE_WORDS) { state[state_word] = state_value; }
    if (dataloader_set_state(&dl, state, err, sizeof(err)) != 0) {
        if (fuzz_verbose()) { fprintf(stderr, "dataloader_set_state: %s\n", err); }
        dataloader_get_state(&dl, after);
        if (memcmp(before, after, sizeof(after)) != 0) { fuzz_fail("a refused state changed the loader"); }
    }
    for (int i = 0; i < 3; i++) { dataloader_next_batch(&dl); check_batch(&dl); }
    if (fuzz_verbose()) { fprintf(stderr, "shard: accepted %d shard(s) in %d data set(s), %llu tokens\n", dl.nshards, dl.nsources, (unsigned long long)dl.total_tokens); }
    dataloader_free(&dl);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzInput in = {data, size};
    fuzz_call(run, &in);
    return 0;
}
