/*
tests/testing.h: the check harness shared by the single-process test binaries (test_gpt, tests/test_dataloader,
tests/test_tokenizer). Each check prints one line, "PASS name (detail)" or "FAIL name: detail"; every failure is
recorded and the run goes on; test_summary() prints the closing "N passed, M failed" line that scripts/run_tests.sh
adds up, and returns the exit status (non-zero if any check failed). tests/test_comm.c has its own harness, since
its checks gather failures from every MPI rank.
*/
#ifndef TESTING_H
#define TESTING_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_passed = 0, g_failed = 0;

// Records one check. The detail (printf-style, may be "") is printed for failures and, in parentheses, for passes.
static void __attribute__((format(printf, 3, 4))) check(int ok, const char* name, const char* fmt, ...) {
    char detail[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    if (ok) { g_passed++; printf("PASS %s", name); }
    else { g_failed++; printf("FAIL %s", name); }
    if (detail[0]) { printf(ok ? " (%s)" : ": %s", detail); }
    printf("\n");
    fflush(stdout);
}

// The caller's Open MPI settings: "export OMPI_MCA_x='v' ...;" for the OMPI_MCA_ variables this process had when it
// started (before an MPI_Init of its own could add job variables), unless mpirun started it (then they are the job's).
// scripts/run_tests.sh sets some for the tests' many short jobs; run_capture passes them on.
static char g_caller_mca[4096];
__attribute__((constructor)) static void testing__save_caller_mca(void) {
    extern char** environ;
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK")) { return; }
    size_t n = 0;
    for (char** e = environ; *e; e++) {
        const char* eq = strchr(*e, '=');
        if (strncmp(*e, "OMPI_MCA_", 9) != 0 || !eq || strchr(eq, '\'')) { continue; } // (a quote in a value: left out)
        int w = snprintf(g_caller_mca + n, sizeof(g_caller_mca) - n, "export %.*s='%s'; ", (int)(eq - *e), *e, eq + 1);
        if (w < 0 || (size_t)w >= sizeof(g_caller_mca) - n) { g_caller_mca[n] = '\0'; break; }
        n += (size_t)w;
    }
}

// Runs a shell command, capturing stdout+stderr into out (truncated to cap); returns the exit status, or
// 128 + signal when it was killed by a signal. For the tests that drive the real binaries.
static int run_capture(const char* cmd, char* out, size_t cap) {
    // A test binary may be an MPI singleton: its OMPI_/PMIX_ variables would make a child mpirun (or a child
    // singleton) try to join this job, so the child shell drops them first, then restores the caller's settings.
    size_t need = strlen(cmd) + strlen(g_caller_mca) + 256;
    char* full = (char*)malloc(need);
    if (!full) { return -1; }
    snprintf(full, need, "unset $(env | sed -n 's/^\\(OMPI_[A-Za-z0-9_]*\\|PMIX_[A-Za-z0-9_]*\\|OPAL_[A-Za-z0-9_]*\\)=.*/\\1/p'); %s(%s) 2>&1",
             g_caller_mca, cmd);
    double t0 = -1.0;
    const char* times = getenv("TEST_COMMAND_TIMES");
    if (times && atoi(times)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t0 = ts.tv_sec + 1e-9 * ts.tv_nsec;
    }
    FILE* p = popen(full, "r");
    free(full);
    if (!p) { return -1; }
    size_t n = 0;
    int ch;
    while ((ch = fgetc(p)) != EOF) { if (n + 1 < cap) { out[n++] = (char)ch; } }
    out[n] = '\0';
    int st = pclose(p);
    if (t0 >= 0) { // TEST_COMMAND_TIMES=1: each command's wall time on stderr (to see where a suite's minutes go)
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        fprintf(stderr, "[%6.1f s] %.200s\n", t1.tv_sec + 1e-9 * t1.tv_nsec - t0, cmd);
    }
    if (WIFEXITED(st)) { return WEXITSTATUS(st); }
    if (WIFSIGNALED(st)) { return 128 + WTERMSIG(st); }
    return -1;
}

// The suite's own scratch directory, made once: ${TMPDIR:-/tmp}/NAME.XXXXXX. A fixed path (/tmp/test_runs, as the
// suites had) let two runs at once, a CI clone's and a developer's, read and delete each other's files. It is removed
// at exit when every check passed and kept, its path printed by test_summary, when one failed (to look at what the runs left).
static char g_scratch[512];
static pid_t g_scratch_owner;
static void testing__scratch_cleanup(void) {
    if (!g_scratch[0] || getpid() != g_scratch_owner) { return; } // (not in a forked child)
    if (g_failed) { return; } // (test_summary printed its path)
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_scratch); // (mkdtemp's path: TMPDIR may not hold a quote, checked below)
    if (system(cmd) != 0) { fprintf(stderr, "warning: cannot remove %s\n", g_scratch); }
}
static const char* test_scratch_dir(const char* name) {
    if (g_scratch[0]) { return g_scratch; }
    const char* base = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
    int n = snprintf(g_scratch, sizeof(g_scratch), "%s/%s.XXXXXX", base, name);
    if (n < 0 || (size_t)n >= sizeof(g_scratch) || strchr(g_scratch, '\'') || !mkdtemp(g_scratch)) {
        fprintf(stderr, "%s: cannot create a scratch directory %s/%s.XXXXXX\n", name, base, name);
        exit(1);
    }
    g_scratch_owner = getpid();
    atexit(testing__scratch_cleanup);
    return g_scratch;
}

// Prints the closing line and returns the process exit status.
static int test_summary(void) {
    if (g_scratch[0] && g_failed) { printf("scratch kept: %s\n", g_scratch); }
    printf("%d passed, %d failed\n", g_passed, g_failed);
    fflush(stdout);
    return g_failed ? 1 : 0;
}

#endif // TESTING_H
