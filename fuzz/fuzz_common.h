/*
fuzz/fuzz_common.h: what every libFuzzer harness in fuzz/ shares. Include it FIRST, before any project header.

  make fuzz-build                      builds fuzz/bin/<target> (clang -fsanitize=fuzzer,address,undefined -DFUZZING)
  make fuzz [FUZZ_SECONDS=60]          runs every target (scripts/fuzz.sh); see README.md, "Fuzzing"

1. Resource tracking. fatal() (utils.h) longjmps back to the harness when utils_fatal_jmp is set (-DFUZZING), so
   whatever the parser had allocated or opened at that moment would leak: over millions of inputs that is memory
   (LeakSanitizer would report it) and, worse, file descriptors (fopen would start failing). This header includes
   every system header the project uses, then routes malloc/calloc/realloc/free/posix_memalign/fopen/fclose of
   the project code through trackers: fuzz_call() records what the call allocates and opens, and on the fatal()
   path frees and closes it all. On a normal return nothing is touched (the code freed what it had to; anything
   else is a real leak and LeakSanitizer reports it). Memory allocated outside fuzz_call() is never tracked.
   fuzz_call() also fails if the lowest free file descriptor drifts up (a leak by open(), which is not tracked).
2. exit(): the project calls exit() directly in a few places (`--help` in parse_flags); the `exit` macro makes
   that a longjmp to the harness as well, inside fuzz_call().
3. Files: parsers that take a path read the input from a per-process directory (fuzz_tmpdir(), under /dev/shm when
   it exists), removed at exit.
4. fuzz_split(): cuts an input into parts at a separator (two files from one input).
*/
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

// every system header the project includes, before the macros below (they must not rename libc's declarations):
// a system header new to the project goes here too (or before this file, as fuzz/safetensors.c does for cJSON)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <glob.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#ifdef _OPENMP
#include <omp.h>
#endif

// The input of one run of a harness whose run() takes the fuzzer's bytes as they are (fuzz_call's argument).
typedef struct {
    const uint8_t* data;
    size_t size;
} FuzzInput;

// ----------------------------------------------------------------------------
// resource tracking

typedef struct {
    void* p;
    int is_file; // 1: a FILE* from fopen, 0: memory
} FuzzResource;

static FuzzResource* fuzz__res;  // (fuzz__cap) live resources acquired inside fuzz_call
static size_t fuzz__n, fuzz__cap;
static int fuzz__tracking;       // 1 inside fuzz_call

static void fuzz__add(void* p, int is_file) {
    if (!fuzz__tracking || p == NULL) { return; }
    if (fuzz__n == fuzz__cap) {
        size_t cap = fuzz__cap ? 2 * fuzz__cap : 256;
        FuzzResource* r = (FuzzResource*)realloc(fuzz__res, cap * sizeof(FuzzResource));
        if (r == NULL) { abort(); }
        fuzz__res = r;
        fuzz__cap = cap;
    }
    fuzz__res[fuzz__n].p = p;
    fuzz__res[fuzz__n].is_file = is_file;
    fuzz__n++;
}

// Forgets p if it is tracked; returns 1 if it was.
static int fuzz__remove(void* p) {
    if (p == NULL) { return 0; }
    for (size_t i = fuzz__n; i-- > 0;) { // most frees are of recent allocations
        if (fuzz__res[i].p == p) { fuzz__res[i] = fuzz__res[--fuzz__n]; return 1; }
    }
    return 0;
}

static void* fuzz_malloc(size_t n) { void* p = malloc(n); fuzz__add(p, 0); return p; }
static void* fuzz_calloc(size_t n, size_t size) { void* p = calloc(n, size); fuzz__add(p, 0); return p; }
static void fuzz_free(void* p) { fuzz__remove(p); free(p); }
static void* fuzz_realloc(void* p, size_t n) {
    void* q = realloc(p, n);
    if (q != NULL && (p == NULL || fuzz__remove(p))) { fuzz__add(q, 0); } // a block from outside stays untracked
    return q;
}
static int fuzz_posix_memalign(void** out, size_t align, size_t n) {
    int rc = posix_memalign(out, align, n);
    if (rc == 0) { fuzz__add(*out, 0); }
    return rc;
}
static FILE* fuzz_fopen(const char* path, const char* mode) { FILE* fp = fopen(path, mode); fuzz__add(fp, 1); return fp; }
static int fuzz_fclose(FILE* fp) { fuzz__remove(fp); return fclose(fp); }

// Frees and closes everything acquired since tracking started (the fatal() path).
static void fuzz__release_all(void) {
    for (size_t i = 0; i < fuzz__n; i++) {
        if (fuzz__res[i].is_file) { fclose((FILE*)fuzz__res[i].p); } else { free(fuzz__res[i].p); }
    }
    fuzz__n = 0;
}

static void __attribute__((noreturn)) fuzz_exit(int code);

#define malloc(n) fuzz_malloc(n)
#define calloc(n, s) fuzz_calloc(n, s)
#define realloc(p, n) fuzz_realloc(p, n)
#define free(p) fuzz_free(p)
#define posix_memalign(out, a, n) fuzz_posix_memalign(out, a, n)
#define fopen(path, mode) fuzz_fopen(path, mode)
#define fclose(fp) fuzz_fclose(fp)
#define exit(code) fuzz_exit(code)

#include "utils.h" // defines: fatal, utils_fatal_jmp (with -DFUZZING)

#ifndef FUZZING
#error "build the harnesses with -DFUZZING (make fuzz-build)"
#endif

// Stops the harness with a message: a broken invariant, reported by libFuzzer as a crash with the input saved. The
// message goes to stderr and, since scripts/fuzz.sh runs with stderr closed (-close_fd_mask=3), is also appended
// to $FUZZ_FAIL_LOG when set.
static void __attribute__((noreturn, format(printf, 1, 2))) fuzz_fail(const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "FUZZ INVARIANT BROKEN: %s\n", msg);
    const char* log = getenv("FUZZ_FAIL_LOG");
    FILE* fp = log ? (fopen)(log, "a") : NULL;
    if (fp) { fprintf(fp, "FUZZ INVARIANT BROKEN: %s\n", msg); (fclose)(fp); }
    abort();
}

// 1 when $FUZZ_VERBOSE is set: harnesses then print the messages of errors that are returned rather than printed
// (dataloader.h's err buffers), to check what a seed exercises.
static int fuzz_verbose(void) {
    static int v = -1;
    if (v < 0) { v = getenv("FUZZ_VERBOSE") != NULL; }
    return v;
}

// exit() inside fuzz_call returns to the harness like fatal(); outside it ends the process.
static void fuzz_exit(int code) {
    if (utils_fatal_jmp) { longjmp(*utils_fatal_jmp, 2); }
    (exit)(code);
}

// Runs fn(arg) with fatal() and exit() returning here. Returns 1 if fn returned, 0 if it ended in fatal() or
// exit() (everything it had allocated or opened is then released). Not reentrant.
static int fuzz_call(void (*fn)(void*), void* arg) {
    jmp_buf jb;
    volatile int ok = 0;
    fuzz__n = 0;
    fuzz__tracking = 1;
    utils_fatal_jmp = &jb;
    if (setjmp(jb) == 0) {
        fn(arg);
        ok = 1;
    } else {
        fuzz__release_all();
    }
    utils_fatal_jmp = NULL;
    fuzz__tracking = 0;
    fuzz__n = 0;
    // a file descriptor leaked by a parser (open without close) would not show as a crash: fopen would just start
    // failing. The lowest free descriptor drifting up is the sign.
    static int fd0 = -1;
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0) { close(fd); }
    if (fd0 < 0) { fd0 = fd; }
    else if (fd > fd0 + 16) { fuzz_fail("file descriptors leak: lowest free %d now, %d at the first input (shows over many inputs, not on replay)", fd, fd0); }
    return ok;
}

// ----------------------------------------------------------------------------
// files

static char fuzz__dir[512];

static void fuzz__remove_tree(const char* dir) {
    DIR* d = opendir(dir);
    if (d == NULL) { return; }
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) { continue; }
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", dir, ent->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) { fuzz__remove_tree(p); } else { unlink(p); }
    }
    closedir(d);
    rmdir(dir);
}

static void fuzz__cleanup(void) {
    if (fuzz__dir[0]) { fuzz__remove_tree(fuzz__dir); }
}

// A private directory for this process (created on first use, removed at exit).
static const char* fuzz_tmpdir(void) {
    if (fuzz__dir[0]) { return fuzz__dir; }
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(fuzz__dir, sizeof(fuzz__dir), "%s/gpt-fuzz.%ld.XXXXXX", base, (long)getpid());
    if (mkdtemp(fuzz__dir) == NULL) { perror("fuzz: mkdtemp"); abort(); }
    atexit(fuzz__cleanup);
    return fuzz__dir;
}

// Writes data to <fuzz_tmpdir()>/<name> (replacing it) and returns the path in path[cap].
static const char* fuzz_write_file(const char* name, const uint8_t* data, size_t n, char* path, size_t cap) {
    snprintf(path, cap, "%s/%s", fuzz_tmpdir(), name);
    FILE* fp = (fopen)(path, "wb");
    if (fp == NULL || (n > 0 && fwrite(data, 1, n, fp) != n) || (fclose)(fp) != 0) {
        perror("fuzz: writing the input file");
        abort();
    }
    return path;
}

// ----------------------------------------------------------------------------
// splitting an input

// Cuts data[0..n) at each occurrence of sep (up to max_parts parts; the last part keeps any further separators).
// Returns the number of parts (at least 1).
static int fuzz_split(const uint8_t* data, size_t n, const char* sep, const uint8_t** part, size_t* len, int max_parts) {
    size_t sl = strlen(sep), start = 0;
    int k = 0;
    for (size_t i = 0; k + 1 < max_parts && sl <= n && i <= n - sl;) {
        if (memcmp(data + i, sep, sl) == 0) {
            part[k] = data + start;
            len[k] = i - start;
            k++;
            i += sl;
            start = i;
        } else {
            i++;
        }
    }
    part[k] = data + start;
    len[k] = n - start;
    return k + 1;
}

// Little-endian reads that tolerate a short input (missing bytes read as 0).
static uint64_t fuzz_le(const uint8_t* data, size_t n, size_t off, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) { v |= (uint64_t)(off + i < n ? data[off + i] : 0) << (8 * i); }
    return v;
}

#endif // FUZZ_COMMON_H
