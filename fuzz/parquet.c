/*
fuzz/parquet.c: fuzzes parquet.h's reader (parquet_text, scripts/prepare_fineweb.sh): the footer's thrift, the page
headers, snappy and gzip streams, the RLE/bit-packed hybrid of definition levels and dictionary indices, PLAIN values.

  make fuzz-build && fuzz/bin/parquet fuzz/corpus/parquet        (or: make fuzz FUZZ_TARGETS=parquet)
  fuzz/bin/parquet CRASH_FILE                                     (reproduces one input, with messages)

Input: one byte choosing the column (0: "text", 1: "n", else "id"), then the parquet file, read from memory.
Invariants checked (abort = a finding): the reader returns PQ_OK, PQ_ERROR or PQ_STOPPED; a refusal's message names
the file ("fuzz.parquet: ...") and is one line; an accepted file's values lie within the limits the reader promises
(no value longer than PQ_MAX_PAGE); reading the same input twice gives the same values (no state kept between
calls). The value callback stops the reader after 200000 values (a corrupt run length can ask for 2^31 of them).
*/
#ifndef NO_ZLIB
#include <zlib.h> // before fuzz_common.h: a system header the project code includes
#endif
#include "fuzz_common.h"

#define PQ_MAX_PAGE ((int64_t)64 << 20) // within libFuzzer's -malloc_limit_mb
#include "parquet.h"                     // defines: pq_read_column

#define MAX_VALUES 200000

typedef struct {
    uint64_t n, bytes, hash;
} Tally;

static int on_value(void* user, const uint8_t* v, size_t len) {
    Tally* t = (Tally*)user;
    if ((int64_t)len > PQ_MAX_PAGE) { fuzz_fail("a value of %zu bytes, longer than a page may be", len); }
    t->n++;
    t->bytes += len;
    for (size_t i = 0; i < len; i++) { t->hash = (t->hash ^ v[i]) * 1099511628211ull; }
    t->hash = (t->hash ^ 0x100) * 1099511628211ull;
    return t->n >= MAX_VALUES;
}

static void run(void* arg) {
    const FuzzInput* in = (const FuzzInput*)arg;
    if (in->size < 1) { return; }
    const char* column = in->data[0] == 0 ? "text" : in->data[0] == 1 ? "n" : "id";
    const uint8_t* file = in->data + 1;
    size_t size = in->size - 1;
    char err[1024];
    Tally a = {0, 0, 1469598103934665603ull}, b = a;
    int rc = pq_read_column(file, size, "fuzz.parquet", column, on_value, &a, err, sizeof(err));
    if (rc != PQ_OK && rc != PQ_ERROR && rc != PQ_STOPPED) { fuzz_fail("pq_read_column returned %d", rc); }
    if (rc == PQ_ERROR) {
        if (strncmp(err, "fuzz.parquet: ", 14) != 0 || strchr(err, '\n')) { fuzz_fail("the message does not name the file on one line: %s", err); }
        if (fuzz_verbose()) { fprintf(stderr, "parquet: %s\n", err); }
    }
    int rc2 = pq_read_column(file, size, "fuzz.parquet", column, on_value, &b, err, sizeof(err));
    if (rc2 != rc || a.n != b.n || a.bytes != b.bytes || a.hash != b.hash) { fuzz_fail("two reads of one input differ: %d/%d, %llu/%llu values", rc, rc2, (unsigned long long)a.n, (unsigned long long)b.n); }
    if (fuzz_verbose()) { fprintf(stderr, "parquet: status %d, %llu values, %llu bytes\n", rc, (unsigned long long)a.n, (unsigned long long)a.bytes); }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzInput in = {data, size};
    fuzz_call(run, &in);
    return 0;
}
