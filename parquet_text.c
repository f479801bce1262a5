/*
parquet_text.c: prints one string column of parquet files as NUL-terminated documents, for
scripts/prepare_fineweb.sh (FineWeb's "text" column into `./tokenize shards --doc-sep '\0'`). No Python, no
Arrow: the reader is parquet.h (snappy built in, gzip through zlib when the build found it).

  ./parquet_text [--column NAME] [--repeat N] [--pages] FILE.parquet ...

Every non-null value of column NAME (default: text) of every FILE, in order, is written to stdout followed by a
NUL byte; NUL bytes inside a value are dropped (so the separator stays unambiguous). Null values are skipped.
--repeat N decodes every file N times (writing the output each time) and prints the throughput to stderr: the
benchmark of the README. --pages describes every column chunk and page read on stderr (codec, encoding, sizes). Errors: "error: FILE: <what>" on stderr and exit status 1, for a malformed file or one
using a codec or encoding this reader does not implement (ZSTD, LZ4, BROTLI; DELTA encodings), which it names.
*/
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "parquet.h" // defines: pq_read_column
#include "utils.h"   // defines: fatal, print_version

#define OUT_BUF (1 << 20)

typedef struct {
    uint8_t buf[OUT_BUF];
    size_t n;
    uint64_t values, bytes;
} Out;

static void out_flush(Out* o) {
    if (o->n && fwrite(o->buf, 1, o->n, stdout) != o->n) { fatal("write error on stdout: %s", strerror(errno)); }
    o->n = 0;
}

static void out_put(Out* o, const uint8_t* p, size_t n) {
    while (n > 0) {
        if (o->n == OUT_BUF) { out_flush(o); }
        size_t k = OUT_BUF - o->n < n ? OUT_BUF - o->n : n;
        memcpy(o->buf + o->n, p, k);
        o->n += k;
        p += k;
        n -= k;
    }
}

// one value: its bytes without NULs, then the NUL that ends it
static int on_value(void* user, const uint8_t* v, size_t n) {
    Out* o = (Out*)user;
    o->values++;
    o->bytes += n;
    const uint8_t* end = v + n;
    while (v < end) {
        const uint8_t* z = (const uint8_t*)memchr(v, 0, (size_t)(end - v));
        size_t k = z ? (size_t)(z - v) : (size_t)(end - v);
        out_put(o, v, k);
        v += k + (z != NULL);
    }
    static const uint8_t nul = 0;
    out_put(o, &nul, 1);
    return 0;
}

static void usage(FILE* f) {
    fprintf(f, "usage: parquet_text [--column NAME] [--repeat N] [--pages] FILE.parquet ...\n"
               "  prints every non-null value of string column NAME (default: text), each followed by a NUL byte\n"
               "  --repeat N   decode each file N times and print the throughput to stderr (a benchmark)\n"
               "  --pages      describe every column chunk and page read on stderr\n"
               "  codecs: UNCOMPRESSED, SNAPPY, GZIP%s; encodings: PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY\n",
#ifdef NO_ZLIB
            " (not in this build: made without zlib)"
#else
            ""
#endif
    );
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
    const char* column = "text";
    long repeat = 1;
    int first = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { usage(stdout); return 0; }
        if (strcmp(argv[i], "--version") == 0) { print_version("parquet_text"); return 0; }
        if (strcmp(argv[i], "--pages") == 0) { pq_trace = stderr; continue; }
        if (strcmp(argv[i], "--column") == 0 || strcmp(argv[i], "--repeat") == 0) {
            if (i + 1 >= argc) { fatal("%s needs a value", argv[i]); }
            if (argv[i][2] == 'c') {
                column = argv[++i];
                if (!column[0]) { fatal("--column: empty name"); }
            } else {
                char* end;
                errno = 0;
                repeat = strtol(argv[++i], &end, 10);
                if (errno || *end || end == argv[i] || repeat < 1 || repeat > 1000000) { fatal("--repeat: '%s' is not an integer in 1..1000000", argv[i]); }
            }
            continue;
        }
        if (strcmp(argv[i], "--") == 0) { first = i + 1; break; }
        if (argv[i][0] == '-' && argv[i][1]) { fprintf(stderr, "error: unknown flag '%s'\n", argv[i]); usage(stderr); return 1; }
        first = i;
        break;
    }
    if (first >= argc) { usage(stderr); return 1; }
    Out* o = (Out*)mallocCheck(sizeof(Out));
    o->n = 0;
    o->values = o->bytes = 0;
    char err[1024];
    for (int i = first; i < argc; i++) {
        const char* path = argv[i];
        int fd = open(path, O_RDONLY);
        if (fd < 0) { fatal("%s: cannot open: %s", path, strerror(errno)); }
        struct stat st;
        if (fstat(fd, &st) != 0) { fatal("%s: cannot stat: %s", path, strerror(errno)); }
        if (!S_ISREG(st.st_mode)) { fatal("%s: not a regular file", path); }
        size_t size = (size_t)st.st_size;
        // the whole file mapped: a FineWeb file is ~2 GB, and the reader jumps from the footer to the chunks
        const uint8_t* map = NULL;
        if (size > 0) {
            void* m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m == MAP_FAILED) { fatal("%s: cannot map: %s", path, strerror(errno)); }
            map = (const uint8_t*)m;
        }
        close(fd);
        static const uint8_t empty[1] = {0};
        uint64_t bytes0 = o->bytes;
        double t0 = now_s();
        for (long r = 0; r < repeat; r++) {
            if (pq_read_column(map ? map : empty, size, path, column, on_value, o, err, sizeof(err)) != PQ_OK) {
                out_flush(o);
                fflush(stdout);
                fatal("%s", err);
            }
        }
        out_flush(o);
        double dt = now_s() - t0;
        if (repeat > 1) {
            double mb = (double)(o->bytes - bytes0) / 1e6;
            fprintf(stderr, "parquet_text: %s x %ld: %.1f MB of text (%.1f MB of file) in %.3f s: %.1f MB/s of text, %.1f MB/s of file\n",
                    path, repeat, mb, (double)size * (double)repeat / 1e6, dt, mb / dt, (double)size * (double)repeat / 1e6 / dt);
        }
        if (map) { munmap((void*)map, size); }
    }
    if (fflush(stdout) != 0) { fatal("write error on stdout: %s", strerror(errno)); }
    free(o);
    return 0;
}
