/*
kernels_lt_tune.cuh: choosing cuBLASLt's algorithm for each matmul shape by timing, and keeping the choices in a file
(included by kernels_matmul.cuh after the plan's definition; not a standalone header).

cuBLASLt's heuristic ranks its algorithms by a model of the GPU, and kernels__lt_plan takes the first. On shapes away
from powers of two (GPT-2 1558M's 1600 channels, 4800 and 6400 outputs) the first is not always the fastest: on an
H200, GPT-2's MLP products ran at 673-699 TFLOP/s where an 8192^3 product ran at 881-886. --matmul-tune N times the
heuristic's first N candidates for each shape when the shape first appears and keeps the fastest:
  - on scratch operands of the shape (cudaMallocAsync on the compute stream, filled with pseudo-random values in
    [-0.5, 0.5): the tensor cores run faster on zeros), never the caller's: its output, an accumulation (beta 1) or an epilogue's
    auxiliary matrix are not touched, so a tuned call computes what an untuned one would with that algorithm;
  - after the compute stream has drained (cudaStreamSynchronize), so the timings are not shared with the step's
    queued work; each candidate runs once to warm up, then KERNELS_TUNE_RUNS times, each timed by events, the fastest
    run counting;
  - the heuristic's first choice stays unless another is at least 1% faster (timings repeat to about that).
Different algorithms sum in different orders, so their bits differ. To keep runs repeatable, the choices go to a text
file (--matmul-algos; by default <--out>/matmul_algos.txt when tuning) that later runs, and a resumed run, read
instead of timing again: a resumed run then computes exactly what the interrupted one did. Each algorithm read back is
checked by cublasLtMatmulAlgoCheck before it is used; a file made on another GPU (its name and SM count), cuBLASLt
version or storage type is not used (a note says so), and a malformed one stops the run with its name and line.
Without tuning and without a file, everything is the heuristic's first choice, as before.
*/
#ifndef KERNELS_LT_TUNE_CUH
#define KERNELS_LT_TUNE_CUH

#define KERNELS_TUNE_MAX 64  // candidates asked of the heuristic at most
#define KERNELS_TUNE_RUNS 3  // timed runs of each candidate (after one to warm up)

// A pseudo-random value in [-0.5, 0.5) from a hash of i and the seed: operands that look like data to the tensor cores
// (matmuls on zeros run faster than on data: the tensor cores draw less power, and the clocks stay higher). The
// timing's scratch operands, and bench_kernels_cu's.
__device__ __forceinline__ float kernels__hash_value(size_t i, uint32_t seed) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 0x2c1b3c6du; h ^= h >> 12; h *= 0x297a2d39u; h ^= h >> 15;
    return (float)(h & 0xffffu) / 65536.0f - 0.5f;
}
// p[i] = kernels__hash_value(i, seed), in the storage type, and in fp32
__global__ void kernels__fill_hash(floatX* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        p[i] = kernels__x(kernels__hash_value(i, seed));
    }
}
__global__ void kernels__fill_hash_f32(float* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        p[i] = kernels__hash_value(i, seed);
    }
}

// ----------------------------------------------------------------------------
// The algorithm file: the choices read at start-up, and those tuned since (written back whole, atomically).

typedef struct {
    KernelsLtKey key;
    cublasLtMatmulAlgo_t algo;
    float first_ms, best_ms;
} KernelsLtSaved;

static struct {
    char path[4096];   // "" : no file
    int write;         // this process writes the file (each process of a run has its own: kernels_set_matmul_tune)
    KernelsLtSaved* saved;
    int num_saved, cap_saved;
} kernels__lt_file;

// The line that says which GPU, cuBLASLt and storage type the file's algorithms are for.
static void kernels__lt_file_header(const KernelCtx* ctx, char* buf, size_t cap) {
    // (the SM count too: a MIG slice of a GPU has its name and fewer SMs, and cuBLASLt's best algorithms differ)
    snprintf(buf, cap, "for %s, %d SMs | cuBLASLt %zu | %s", ctx->device_name, ctx->num_sms, (size_t)cublasLtGetVersion(),
             dtype_name(KERNELS_DTYPE));
}

static KernelsLtSaved* kernels__lt_saved_find(const KernelsLtKey* key) {
    for (int i = 0; i < kernels__lt_file.num_saved; i++) {
        if (memcmp(&kernels__lt_file.saved[i].key, key, sizeof(*key)) == 0) { return &kernels__lt_file.saved[i]; }
    }
    return NULL;
}

static void kernels__lt_saved_put(const KernelsLtKey* key, const cublasLtMatmulAlgo_t* algo, float first_ms, float best_ms) {
    KernelsLtSaved* e = kernels__lt_saved_find(key);
    if (!e) {
        if (kernels__lt_file.num_saved == kernels__lt_file.cap_saved) {
            kernels__lt_file.cap_saved = kernels__lt_file.cap_saved ? 2 * kernels__lt_file.cap_saved : 32;
            kernels__lt_file.saved = (KernelsLtSaved*)realloc(kernels__lt_file.saved, sizeof(KernelsLtSaved) * kernels__lt_file.cap_saved);
            if (!kernels__lt_file.saved) { fatal("out of host memory for %d matmul algorithms", kernels__lt_file.cap_saved); }
        }
        e = &kernels__lt_file.saved[kernels__lt_file.num_saved++];
    }
    e->key = *key;
    e->algo = *algo;
    e->first_ms = first_ms;
    e->best_ms = best_ms;
}

#define KERNELS_LT_FILE_MAGIC "# train_gpt matmul algorithms v1"
#define KERNELS_LT_KEY_INTS 17

static void kernels__lt_file_write(const KernelCtx* ctx) {
    if (!kernels__lt_file.path[0] || !kernels__lt_file.write) { return; }
    AtomicFile af;
    atomic_open(&af, kernels__lt_file.path);
    char header[512];
    kernels__lt_file_header(ctx, header, sizeof(header));
    fprintf(af.fp, "%s\n%s\n", KERNELS_LT_FILE_MAGIC, header);
    fprintf(af.fp, "# one cuBLASLt algorithm per matmul shape, chosen by --matmul-tune; read back by --matmul-algos (delete\n"
                   "# the file to time them again). Fields: m n k lda ldb transA transB bias d_fp32 beta epilogue tf32, the\n"
                   "# alignments of A B D bias aux; the algorithm's 8 words; ms per call with the heuristic's first and this one\n"
                   "# (0 0: not timed, too little free memory: the heuristic's first kept)\n");
    for (int i = 0; i < kernels__lt_file.num_saved; i++) {
        const KernelsLtSaved* e = &kernels__lt_file.saved[i];
        const KernelsLtKey* q = &e->key;
        fprintf(af.fp, "%d %d %d %d %d %d %d %d %d %d %d %d %u %u %u %u %u", q->m, q->n, q->k, q->lda, q->ldb, q->transA,
                q->transB, q->has_bias, q->d_f32, q->beta_nonzero, q->epi, q->tf32, q->al[0], q->al[1], q->al[2], q->al[3], q->al[4]);
        for (int w = 0; w < 8; w++) { fprintf(af.fp, " %016llx", (unsigned long long)e->algo.data[w]); }
        fprintf(af.fp, " %.6f %.6f\n", e->first_ms, e->best_ms);
    }
    atomic_commit(&af);
}

// Reads the file at kernels__lt_file.path, if there is one, into the saved choices (none when it was made for
// another device, cuBLASLt or storage type: a note says so). A malformed file is a fatal error.
static void kernels__lt_file_read(const KernelCtx* ctx) {
    const char* path = kernels__lt_file.path;
    FILE* f = fopen(path, "r");
    if (!f) {
        if (errno != ENOENT) { fatal("--matmul-algos: cannot read '%s': %s", path, strerror(errno)); }
        return;
    }
    char line[1024], header[512];
    kernels__lt_file_header(ctx, header, sizeof(header));
    int ln = 0;
    if (!fgets(line, sizeof(line), f) || strncmp(line, KERNELS_LT_FILE_MAGIC, strlen(KERNELS_LT_FILE_MAGIC)) != 0) {
        fatal("--matmul-algos: '%s' is not a matmul algorithm file (its first line is not '%s')", path, KERNELS_LT_FILE_MAGIC);
    }
    ln++;
    if (!fgets(line, sizeof(line), f)) { fatal("--matmul-algos: '%s' ends after its first line (no 'for ...' line)", path); }
    ln++;
    line[strcspn(line, "\r\n")] = '\0';
    if (strncmp(line, "for ", 4) != 0) { fatal("--matmul-algos: '%s' line 2: expected 'for <GPU>, <N> SMs | cuBLASLt <version> | <dtype>'", path); }
    if (strcmp(line, header) != 0) {
        fprintf(stderr, "note: --matmul-algos '%s' was made %s; this run is %s: its algorithms are not used%s\n", path, line,
                header + 4, kernels__lt_file.write && ctx->matmul_tune > 1 ? " (the file will be rewritten with this run's choices)" : "");
        fclose(f);
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) { fatal("--matmul-algos: '%s' line %d is longer than %zu characters", path, ln, sizeof(line) - 2); }
        if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0') { continue; }
        KernelsLtKey q;
        int v[KERNELS_LT_KEY_INTS];
        unsigned long long w[8];
        float first_ms, best_ms;
        int used = 0;
        int got = sscanf(line, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %llx %llx %llx %llx %llx %llx %llx %llx %f %f %n",
                         &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &v[14],
                         &v[15], &v[16], &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6], &w[7], &first_ms, &best_ms, &used);
        if (got != KERNELS_LT_KEY_INTS + 10 || line[used] != '\0') {
            fatal("--matmul-algos: '%s' line %d: expected %d integers, 8 hexadecimal words and 2 times (%d fields read)", path, ln,
                  KERNELS_LT_KEY_INTS, got < 0 ? 0 : got);
        }
        q = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
             {(uint32_t)v[12], (uint32_t)v[13], (uint32_t)v[14], (uint32_t)v[15], (uint32_t)v[16]}};
        int ok = q.m > 0 && q.n > 0 && q.k > 0 && q.lda > 0 && q.ldb > 0 && q.epi >= KERNELS_EPI_NONE && q.epi <= KERNELS_EPI_BGRADB;
        for (int i = 5; i < 12 && ok; i++) { if (i != 10 && v[i] != 0 && v[i] != 1) { ok = 0; } }
        for (int i = 12; i < 17 && ok; i++) { if (v[i] < 1 || v[i] > 256 || (v[i] & (v[i] - 1))) { ok = 0; } }
        if (!ok) { fatal("--matmul-algos: '%s' line %d: a shape no matmul has (sizes above 0, flags 0 or 1, alignments powers of two to 256)", path, ln); }
        cublasLtMatmulAlgo_t algo;
        for (int i = 0; i < 8; i++) { algo.data[i] = (uint64_t)w[i]; }
        kernels__lt_saved_put(&q, &algo, first_ms, best_ms);
    }
    fclose(f);
}

// Whether the file holds an algorithm for p's key that cuBLASLt takes for p's descriptors; if so p uses it.
static int kernels__lt_from_file(const KernelCtx* ctx, KernelsLtPlan* p) {
    const KernelsLtSaved* e = kernels__lt_saved_find(&p->key);
    if (!e) { return 0; }
    cublasLtMatmulHeuristicResult_t check;
    memset(&check, 0, sizeof(check));
    cublasStatus_t st = cublasLtMatmulAlgoCheck(ctx->lt, p->op, p->la, p->lb, p->ld, p->ld, &e->algo, &check);
    if (st != CUBLAS_STATUS_SUCCESS || check.workspaceSize > KERNELS_LT_WORKSPACE) {
        fprintf(stderr, "note: --matmul-algos '%s': cuBLASLt refuses its algorithm for the %d x %d x %d matmul (%s): the heuristic's instead\n",
                kernels__lt_file.path, p->key.m, p->key.n, p->key.k,
                st != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(st) : "more workspace than the 32 MB it may have");
        return 0;
    }
    p->algo = e->algo;
    p->usable = 1;
    p->source = KERNELS_ALGO_FILE;
    p->first_ms = e->first_ms;
    p->best_ms = e->best_ms;
    return 1;
}

// ----------------------------------------------------------------------------
// Timing the candidates.

// Times cand[0..found) for p's shape on scratch operands and gives p the fastest (module comment). Skipped, with a
// note, when the scratch would not leave a twentieth of the device free (or cannot be allocated): p keeps the
// heuristic's first, which goes to the file as the shape's choice, untimed.
static void kernels__lt_tune(const KernelCtx* ctx, KernelsLtPlan* p, const cublasLtMatmulHeuristicResult_t* cand, int found) {
    // (never inside a graph's capture, where the timing runs would only be recorded: the heuristic's choice stays. A
    // sampling step is captured after the same step ran op by op, so its shapes are tuned already.)
    if (kernels__capturing) { return; }
    const KernelsLtKey* q = &p->key;
    size_t xs = sizeof(floatX), ds = q->d_f32 ? sizeof(float) : sizeof(floatX);
    int aux = q->epi == KERNELS_EPI_GELU_AUX || q->epi == KERNELS_EPI_DGELU;
    int bias_is_d = q->epi == KERNELS_EPI_BGRADB; // (a bias gradient, n long in D's type; else an input bias, m long)
    // the operands' elements (A and B as their layouts span them) and sizes, each rounded up to 256 bytes
    size_t n_el[5] = {(size_t)q->lda * (q->transA ? q->m : q->k), (size_t)q->ldb * (q->transB ? q->k : q->n), (size_t)q->m * q->n,
                      aux ? (size_t)q->m * q->n : 0, q->has_bias ? (size_t)(bias_is_d ? q->n : q->m) : 0};
    size_t el_size[5] = {xs, xs, ds, xs, bias_is_d ? ds : xs}, off[6] = {0};
    for (int i = 0; i < 5; i++) { off[i + 1] = off[i] + (n_el[i] * el_size[i] + 255) / 256 * 256; }
    // (the step's queued work finishes first: the timings are this alone on the compute stream, and the last tuning's
    // scratch, freed in stream order, is free again when the free memory is read)
    gpuCheck(cudaStreamSynchronize(ctx->stream));
    size_t free_b = 0, total_b = 0;
    gpuCheck(cudaMemGetInfo(&free_b, &total_b));
    char* buf = NULL;
    int fits = off[5] + total_b / 20 <= free_b;
    cudaError_t ae = fits ? cudaMallocAsync((void**)&buf, off[5], ctx->stream) : cudaErrorMemoryAllocation;
    if (ae != cudaSuccess) { // (an optimisation only: the run goes on with the heuristic's first, saved as this shape's choice)
        if (fits) { (void)cudaGetLastError(); } // (the failed allocation's error, cleared: it ends nothing)
        fprintf(stderr, "note: --matmul-tune: the %d x %d x %d matmul keeps the heuristic's algorithm: timing needs %.2f GB of "
                "scratch and %.2f GB are free\n", q->m, q->n, q->k, off[5] / 1e9, free_b / 1e9);
        kernels__lt_saved_put(q, &cand[0].algo, 0.0f, 0.0f);
        kernels__lt_file_write(ctx);
        return;
    }
    for (int i = 0; i < 5; i++) {
        if (!n_el[i]) { continue; }
        int blocks = kernels__blocks(n_el[i], 256);
        if (el_size[i] != sizeof(floatX)) { // (fp32: D and a bias gradient in a 16-bit build)
            kernels__fill_hash_f32<<<blocks, 256, 0, ctx->stream>>>((float*)(buf + off[i]), n_el[i], 17u * i + 1);
        } else {
            kernels__fill_hash<<<blocks, 256, 0, ctx->stream>>>((floatX*)(buf + off[i]), n_el[i], 17u * i + 1);
        }
        launchCheck();
    }
    void *A = buf + off[0], *B = buf + off[1], *D = buf + off[2], *X = buf + off[3], *bias = buf + off[4];
    if (q->has_bias) { gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias))); }
    if (aux) { gpuCheck(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &X, sizeof(X))); }
    static cudaEvent_t ev[KERNELS_TUNE_RUNS + 1]; // (made once: they time every tuning of the process)
    if (!ev[0]) { for (int r = 0; r <= KERNELS_TUNE_RUNS; r++) { gpuCheck(cudaEventCreate(&ev[r])); } }
    float alpha = 1.0f, beta = q->beta_nonzero ? 1.0f : 0.0f, first = INFINITY, best = INFINITY;
    int best_i = 0, timed = 0;
    for (int i = 0; i < found; i++) {
        if (cand[i].state != CUBLAS_STATUS_SUCCESS || cand[i].workspaceSize > KERNELS_LT_WORKSPACE) { continue; }
        cublasStatus_t st = cublasLtMatmul(ctx->lt, p->op, &alpha, A, p->la, B, p->lb, &beta, D, p->ld, D, p->ld, &cand[i].algo,
                                           ctx->lt_workspace, KERNELS_LT_WORKSPACE, ctx->stream);
        if (st != CUBLAS_STATUS_SUCCESS) { continue; } // (one the library refuses when run: not a candidate)
        gpuCheck(cudaEventRecord(ev[0], ctx->stream));
        for (int r = 0; r < KERNELS_TUNE_RUNS; r++) {
            gpuCheck(cublasLtMatmul(ctx->lt, p->op, &alpha, A, p->la, B, p->lb, &beta, D, p->ld, D, p->ld, &cand[i].algo,
                                    ctx->lt_workspace, KERNELS_LT_WORKSPACE, ctx->stream));
            gpuCheck(cudaEventRecord(ev[r + 1], ctx->stream));
        }
        gpuCheck(cudaEventSynchronize(ev[KERNELS_TUNE_RUNS]));
        float t = INFINITY;
        for (int r = 0; r < KERNELS_TUNE_RUNS; r++) {
            float ms;
            gpuCheck(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
            if (ms < t) { t = ms; }
        }
        timed++;
        if (i == 0) { first = t; }
        if (t < best) { best = t; best_i = i; }
    }
    if (best_i != 0 && first < INFINITY && !(best < 0.99f * first)) { best_i = 0; best = first; } // (within the noise: the heuristic's)
    gpuCheck(cudaFreeAsync(buf, ctx->stream));
    if (timed == 0) { return; } // (none ran: the heuristic's first, whose refusal the caller handles)
    p->algo = cand[best_i].algo;
    p->source = KERNELS_ALGO_TUNED;
    p->first_ms = first;
    p->best_ms = best;
    kernels__lt_saved_put(q, &p->algo, first, best);
    kernels__lt_file_write(ctx);
}

// ----------------------------------------------------------------------------
// The interface (kernels.h).

static int kernels_set_matmul_tune(KernelCtx* ctx, int candidates, const char* algos_path, int write) {
    if (candidates < 0) { return -1; }
    ctx->matmul_tune = candidates;
    // the file's choices replace those read before (plans made already keep their algorithms)
    kernels__lt_file.num_saved = 0;
    kernels__lt_file.path[0] = '\0';
    kernels__lt_file.write = 0;
    if (algos_path && algos_path[0]) {
        if (strlen(algos_path) >= sizeof(kernels__lt_file.path)) { fatal("--matmul-algos: path too long: '%s'", algos_path); }
        snprintf(kernels__lt_file.path, sizeof(kernels__lt_file.path), "%s", algos_path);
        kernels__lt_file.write = write;
        kernels__lt_file_read(ctx);
    }
    return 0;
}

// Forgets every plan (their descriptors destroyed): the next matmul of each shape is planned again, from the file, the
// heuristic or a new tuning (the benchmark compares them; the tests start each case afresh).
static void kernels_matmul_plans_reset(void) {
    for (int i = 0; i < kernels__lt_num_plans; i++) {
        KernelsLtPlan* p = &kernels__lt_plans[i];
        cublasLtMatmulDescDestroy(p->op);
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->ld);
    }
    kernels__lt_num_plans = 0;
}

static void kernels_matmul_algos_summary(char* buf, size_t cap) {
    int n[3] = {0, 0, 0}, changed = 0;
    double first = 0.0, best = 0.0;
    for (int i = 0; i < kernels__lt_num_plans; i++) {
        const KernelsLtPlan* p = &kernels__lt_plans[i];
        if (!p->usable) { continue; }
        n[p->source]++;
        if (p->source != KERNELS_ALGO_HEURISTIC && p->first_ms > 0.0f && p->first_ms < INFINITY) {
            first += p->first_ms;
            best += p->best_ms;
            changed += p->best_ms < p->first_ms;
        }
    }
    int len = snprintf(buf, cap, "%d shapes: %d by the heuristic, %d tuned, %d from the file; %d changed, one call of each %.3f -> %.3f ms",
                       n[0] + n[1] + n[2], n[0], n[1], n[2], changed, first, best);
    if (kernels__lt_file.path[0] && len > 0 && (size_t)len < cap) { snprintf(buf + len, cap - (size_t)len, " (%.300s)", kernels__lt_file.path); }
}

#endif // KERNELS_LT_TUNE_CUH
