/*
utils.h: checked wrappers for calls that can fail, and small helpers shared by every program of the project
(train_gpt, test_gpt, tokenize, bench_comm). Only static functions and macros, so any translation unit may
include it.

Every wrapper records the file and line of the caller and prints the failing statement's context before
exiting non-zero; input validation elsewhere is real code with a real message, never assert.
*/
#ifndef UTILS_H
#define UTILS_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// fatal errors
//
// Temporary files of atomic writes in progress are registered here and removed by fatal(), so an error path never
// leaves debris behind (a half-written 50 MB checkpoint on a full disk, say). A fuzz harness (built with -DFUZZING)
// sets utils_fatal_jmp so that fatal() returns to the harness instead of ending the process.

#define UTILS_MAX_TMP 8
static char utils_tmp_paths[UTILS_MAX_TMP][4200];

static void utils_tmp_register(const char* path) {
    for (int i = 0; i < UTILS_MAX_TMP; i++) {
        if (!utils_tmp_paths[i][0]) { snprintf(utils_tmp_paths[i], sizeof(utils_tmp_paths[i]), "%s", path); return; }
    }
}

static void utils_tmp_unregister(const char* path) {
    for (int i = 0; i < UTILS_MAX_TMP; i++) {
        if (strcmp(utils_tmp_paths[i], path) == 0) { utils_tmp_paths[i][0] = '\0'; }
    }
}

// Removes every registered temporary file (the error path of fatal()).
static void utils_tmp_remove_all(void) {
    for (int i = 0; i < UTILS_MAX_TMP; i++) {
        if (utils_tmp_paths[i][0]) { unlink(utils_tmp_paths[i]); utils_tmp_paths[i][0] = '\0'; }
    }
}

#ifdef FUZZING
#include <setjmp.h>
static jmp_buf* utils_fatal_jmp; // set by a fuzz harness around each input; fatal() longjmps there
#endif

// While every rank of an MPI job runs the same steps on the same input (parsing the flags, checking the settings,
// opening the model and the data), a program sets this to its rank. fatal() on a rank other than 0 then waits before
// it speaks: rank 0 meets the same error, prints it once, and its exit ends the job (mpirun stops the other ranks), so
// a refused flag or a mistyped data path reads as one line, not one per rank. An error of this rank alone (another
// command line, a file missing on its machine) is still printed after the wait, naming the rank. The wait must end
// before rank 0, waiting for this rank in a collective, gives up on it (train_gpt: half of --comm-timeout).
static int utils_fatal_alike_rank;
static double utils_fatal_alike_wait_s = 20.0;

// Prints "error: <message>" to stderr, removes temporary files of writes in progress, and exits with status 1.
// The message should name the file or flag.
static void __attribute__((noreturn, format(printf, 1, 2))) fatal(const char* fmt, ...) {
    // one write of the whole line, so that the same error from several ranks of a job does not interleave
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (utils_fatal_alike_rank > 0) { // (rank 0's exit normally ends the job during this wait)
        time_t whole = (time_t)utils_fatal_alike_wait_s;
        struct timespec w = {whole, (long)((utils_fatal_alike_wait_s - (double)whole) * 1e9)};
        while (nanosleep(&w, &w) != 0 && errno == EINTR) {}
        fprintf(stderr, "error: rank %d: %s\n", utils_fatal_alike_rank, msg);
    } else {
        fprintf(stderr, "error: %s\n", msg);
    }
    fflush(stderr);
    utils_tmp_remove_all();
#ifdef FUZZING
    if (utils_fatal_jmp) { longjmp(*utils_fatal_jmp, 1); }
#endif
    exit(1);
}

// ----------------------------------------------------------------------------
// checked libc calls

static FILE* fopen_check(const char* path, const char* mode, const char* file, int line) {
    FILE* fp = fopen(path, mode);
    if (fp == NULL) {
        fatal("cannot open '%s' (mode %s): %s [at %s:%d]", path, mode, strerror(errno), file, line);
    }
    return fp;
}
#define fopenCheck(path, mode) fopen_check(path, mode, __FILE__, __LINE__)

// Reads exactly nmemb items or exits naming the stream's purpose (what) and the shortfall.
static void fread_check(void* ptr, size_t size, size_t nmemb, FILE* fp, const char* what, const char* file, int line) {
    size_t got = fread(ptr, size, nmemb, fp);
    if (got != nmemb) {
        if (feof(fp)) {
            fatal("'%s' is truncated: expected %zu items of %zu bytes, got %zu [at %s:%d]", what, nmemb, size, got, file, line);
        }
        fatal("read error on '%s': %s [at %s:%d]", what, strerror(errno), file, line);
    }
}
#define freadCheck(ptr, size, nmemb, fp, what) fread_check(ptr, size, nmemb, fp, what, __FILE__, __LINE__)

static void fwrite_check(const void* ptr, size_t size, size_t nmemb, FILE* fp, const char* what, const char* file, int line) {
    if (fwrite(ptr, size, nmemb, fp) != nmemb) {
        fatal("write error on '%s': %s [at %s:%d]", what, strerror(errno), file, line);
    }
}
#define fwriteCheck(ptr, size, nmemb, fp, what) fwrite_check(ptr, size, nmemb, fp, what, __FILE__, __LINE__)

static void fclose_check(FILE* fp, const char* what, const char* file, int line) {
    if (fclose(fp) != 0) {
        fatal("closing '%s' failed: %s [at %s:%d]", what, strerror(errno), file, line);
    }
}
#define fcloseCheck(fp, what) fclose_check(fp, what, __FILE__, __LINE__)

static void fseek_check(FILE* fp, long off, int whence, const char* what, const char* file, int line) {
    if (fseek(fp, off, whence) != 0) {
        fatal("seek failed on '%s': %s [at %s:%d]", what, strerror(errno), file, line);
    }
}
#define fseekCheck(fp, off, whence, what) fseek_check(fp, off, whence, what, __FILE__, __LINE__)

static void* malloc_check(size_t size, const char* file, int line) {
    void* p = malloc(size == 0 ? 1 : size);
    if (p == NULL) {
        fatal("out of memory allocating %zu bytes [at %s:%d]", size, file, line);
    }
    return p;
}
#define mallocCheck(size) malloc_check(size, __FILE__, __LINE__)

static void* calloc_check(size_t n, size_t size, const char* file, int line) {
    void* p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
    if (p == NULL) {
        fatal("out of memory allocating %zu x %zu bytes [at %s:%d]", n, size, file, line);
    }
    return p;
}
#define callocCheck(n, size) calloc_check(n, size, __FILE__, __LINE__)

// Aligned allocation for the big buffer families: 64 bytes (cache line, AVX-512 loads), and for buffers of 4 MB
// and more 2 MB with a transparent-huge-page hint, so that first touch costs one page fault per 2 MB instead of
// one per 4 KB (on a VM that is seconds for a 124M-parameter model) and streaming kernels miss the TLB less.
static void* aligned_malloc_check(size_t size, const char* file, int line) {
    void* p = NULL;
    size_t align = size >= ((size_t)4 << 20) ? ((size_t)2 << 20) : 64;
    size_t rounded = (size + align - 1) / align * align;
    if (posix_memalign(&p, align, rounded == 0 ? 64 : rounded) != 0) {
        fatal("out of memory allocating %zu bytes [at %s:%d]", size, file, line);
    }
#ifdef MADV_HUGEPAGE
    if (align > 64) { madvise(p, rounded, MADV_HUGEPAGE); } // a hint: failure is harmless
#endif
    return p;
}
#define alignedMallocCheck(size) aligned_malloc_check(size, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// overflow-checked size arithmetic

static size_t mul_size_check(size_t a, size_t b, const char* file, int line) {
    if (a != 0 && b > SIZE_MAX / a) {
        fatal("size overflow: %zu * %zu [at %s:%d]", a, b, file, line);
    }
    return a * b;
}
#define mulSize(a, b) mul_size_check((size_t)(a), (size_t)(b), __FILE__, __LINE__)

// Creates dir and its parents if missing (mkdir -p); exits naming `flag` and the path if that fails or dir is not a
// directory.
static void make_dirs(const char* flag, const char* dir) {
    char p[4096];
    snprintf(p, sizeof(p), "%s", dir);
    for (char* q = p + 1; *q; q++) {
        if (*q != '/') { continue; }
        *q = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) { fatal("%s %s: cannot create '%s': %s", flag, dir, p, strerror(errno)); }
        *q = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) { fatal("%s %s: cannot create it: %s", flag, dir, strerror(errno)); }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) { fatal("%s %s: not a directory", flag, dir); }
}

// ----------------------------------------------------------------------------
// atomic file writes: write to "<path>.tmp.<host>.<pid>", fsync, rename into place, fsync the directory. A failed or
// interrupted write never destroys the previous file at <path>; fatal() removes the temporary file of a write in
// progress, and atomic_clean_stale() removes those left by processes that died (kill -9, power loss).

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>

typedef struct {
    FILE* fp;
    char path[4096];
    char tmp_path[4200];
} AtomicFile;

// "<host>.<pid>": what a temporary name ends with, so a stale one can be told from a live one on this host.
static void atomic__owner(char* buf, size_t cap, long pid) {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    snprintf(buf, cap, "%s.%ld", host, pid);
}

static void atomic_open(AtomicFile* af, const char* path) {
    size_t n = strlen(path);
    if (n + 1 > sizeof(af->path)) { fatal("path too long: '%s'", path); }
    // a write past `ulimit -f` must fail with EFBIG and a message, not kill the process by SIGXFSZ
    signal(SIGXFSZ, SIG_IGN);
    memcpy(af->path, path, n + 1);
    char owner[300];
    atomic__owner(owner, sizeof(owner), (long)getpid());
    snprintf(af->tmp_path, sizeof(af->tmp_path), "%s.tmp.%s", path, owner);
    af->fp = fopen(af->tmp_path, "wb");
    if (af->fp == NULL) { fatal("cannot create '%s' (to write '%s'): %s", af->tmp_path, path, strerror(errno)); }
    utils_tmp_register(af->tmp_path);
}

// fsync of a file's directory, so that a rename into it survives a power loss.
static int fsync_parent_dir(const char* path) {
    char copy[4096];
    snprintf(copy, sizeof(copy), "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (fd < 0) { return -1; }
    int rc = fsync(fd);
    close(fd);
    return rc;
}

// Flushes, syncs and renames the temporary file over the final path, then syncs the directory. On any failure the
// temporary is removed and the previous file at the final path is untouched.
static void atomic_commit(AtomicFile* af) {
    int ok = fflush(af->fp) == 0 && fsync(fileno(af->fp)) == 0;
    int e = errno;
    int closed = fclose(af->fp) == 0;
    af->fp = NULL;
    if (!ok || !closed) {
        if (ok) { e = errno; }
        fatal("writing '%s' failed: %s (previous file left untouched)", af->path, strerror(e));
    }
    if (rename(af->tmp_path, af->path) != 0) {
        e = errno;
        fatal("renaming '%s' to '%s' failed: %s", af->tmp_path, af->path, strerror(e));
    }
    utils_tmp_unregister(af->tmp_path);
    if (fsync_parent_dir(af->path) != 0) { fatal("syncing the directory of '%s' failed: %s", af->path, strerror(errno)); }
}

// Abandons a write in progress: the temporary file is removed and the final path is untouched.
static void atomic_abort(AtomicFile* af) {
    if (af->fp) { fclose(af->fp); af->fp = NULL; }
    remove(af->tmp_path);
    utils_tmp_unregister(af->tmp_path);
}

// Removes temporary files "*.tmp.<this host>.<pid>" in dir whose process no longer exists (left by a kill -9 or
// a crash). Returns how many were removed. Temporary files of live processes, and of other hosts sharing the
// directory, are left alone.
static int atomic_clean_stale(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) { return 0; }
    char prefix[300];
    atomic__owner(prefix, sizeof(prefix), 0);
    size_t plen = strlen(prefix) - 1; // "<host>." without the trailing 0
    int removed = 0;
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        const char* t = strstr(ent->d_name, ".tmp.");
        if (!t || strncmp(t + 5, prefix, plen) != 0) { continue; }
        char* end = NULL;
        long pid = strtol(t + 5 + plen, &end, 10);
        if (end == t + 5 + plen || *end != '\0' || pid <= 0) { continue; }
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) { continue; } // alive (or not ours to judge)
        char full[4400];
        snprintf(full, sizeof(full), "%s/%s", dir, ent->d_name);
        if (unlink(full) == 0) { removed++; }
    }
    closedir(d);
    return removed;
}

// ----------------------------------------------------------------------------
// checksums and hashing

// FNV-1a, 64 bit: cheap, stable across platforms; used for checkpoint checksums and configuration hashes.
static uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
    const unsigned char* p = (const unsigned char*)data;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ULL; }
    return h;
}
#define FNV1A64_INIT 14695981039346656037ULL

// The word-wise FNV variant that checkpoints of state version 3 carry: 8 bytes at a time, multiply-xor, then the
// tail bytewise. Kept to read those checkpoints; about 1 GB/s, and weak against the errors storage makes.
static uint64_t checksum64(const void* data, size_t n, uint64_t h) {
    const unsigned char* p = (const unsigned char*)data;
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        h = (h ^ w) * 1099511628211ULL;
        h ^= h >> 29;
    }
    return fnv1a64(p + 8 * words, n - 8 * words, h);
}

// Streamed checkpoint checksums: XXH3-64 from xxHash (libxxhash, tens of GB/s, independent of how the bytes are
// cut into chunks), or the legacy FNV above for old checkpoints. begin, add any number of times, end.
// Built without xxHash (no -DUSE_XXHASH), only the legacy kind exists.
#ifdef USE_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

enum { CHECKSUM_FNV = 1, CHECKSUM_XXH3 = 2 };
#ifdef USE_XXHASH
#define CHECKSUM_DEFAULT CHECKSUM_XXH3
#else
#define CHECKSUM_DEFAULT CHECKSUM_FNV
#endif

typedef struct {
    int kind;
    uint64_t fnv;
#ifdef USE_XXHASH
    XXH3_state_t xxh;
#endif
} Checksum;

static const char* checksum_name(int kind) { return kind == CHECKSUM_XXH3 ? "XXH3-64" : "FNV (word-wise)"; }

static void checksum_begin(Checksum* c, int kind) {
    c->kind = kind;
    c->fnv = FNV1A64_INIT;
#ifdef USE_XXHASH
    if (kind == CHECKSUM_XXH3) { XXH3_64bits_reset(&c->xxh); }
#else
    if (kind == CHECKSUM_XXH3) { fatal("this build has no xxHash (XXH3 checksums): apt-get install libxxhash-dev, then make"); }
#endif
}

static void checksum_add(Checksum* c, const void* data, size_t n) {
#ifdef USE_XXHASH
    if (c->kind == CHECKSUM_XXH3) { XXH3_64bits_update(&c->xxh, data, n); return; }
#endif
    c->fnv = checksum64(data, n, c->fnv);
}

static uint64_t checksum_end(const Checksum* c) {
#ifdef USE_XXHASH
    if (c->kind == CHECKSUM_XXH3) { return XXH3_64bits_digest(&c->xxh); }
#endif
    return c->fnv;
}

// One buffer at once, with the default kind.
static uint64_t checksum_buffer(const void* data, size_t n) {
    Checksum c;
    checksum_begin(&c, CHECKSUM_DEFAULT);
    checksum_add(&c, data, n);
    return checksum_end(&c);
}

// ----------------------------------------------------------------------------
// --version: the commit and the features a binary was built with (the Makefile passes both)

#ifndef BUILD_COMMIT
#define BUILD_COMMIT "unknown"
#endif
#ifndef BUILD_FEATURES
#define BUILD_FEATURES "unknown (not built by the Makefile)"
#endif

static void print_version(const char* program) {
    printf("%s %s\nbuilt with: %s\n", program, BUILD_COMMIT, BUILD_FEATURES);
}

// ----------------------------------------------------------------------------
// misc

// Seconds on the monotonic clock: the project's one clock (the same for every process of a node).
static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int file_exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// Size of a file in bytes, or -1 if it cannot be stat'ed.
static long long file_size(const char* path) {
    struct stat st;
    if (stat(path, &st) != 0) { return -1; }
    return (long long)st.st_size;
}

#endif // UTILS_H
