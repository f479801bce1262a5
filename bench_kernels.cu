/*
bench_kernels.cu: memory bandwidth of the CUDA backend's bandwidth-bound kernels against a plain device-to-device
copy on the same GPU (the ceiling they should approach: the goal is 80% of it), and the matmul rate of cuBLASLt and
of causal attention (native and cuDNN) on GPT-2 shapes against the bf16 peak; the weight-gradient product with the
bias gradient from cuBLASLt's epilogue and from our reduction; fp32 products, exact and on TF32 tensor cores (the
planner's fp32 rates). Each figure is the median of 20 timed
launches (CUDA events) after 3 warm-ups, bytes counted as the kernel must read and write them.

    make bench_kernels_cu && ./bench_kernels_cu [elements]          (default 2^28 elements per buffer)
*/
#include "kernels.cuh"   // defines: the CUDA backend (floatX = bf16 by default)
#include <algorithm>

static KernelCtx g;

// Median time in ms of `reps` runs of f(), after warm-ups.
template <typename F> static float time_ms(F f, int reps = 20) {
    for (int i = 0; i < 3; i++) { f(); }
    cudaEvent_t a, b;
    gpuCheck(cudaEventCreate(&a));
    gpuCheck(cudaEventCreate(&b));
    float t[64];
    for (int i = 0; i < reps; i++) {
        gpuCheck(cudaEventRecord(a, g.stream));
        f();
        gpuCheck(cudaEventRecord(b, g.stream));
        gpuCheck(cudaEventSynchronize(b));
        gpuCheck(cudaEventElapsedTime(&t[i], a, b));
    }
    std::sort(t, t + reps);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return t[reps / 2];
}

static void row(const char* name, double bytes, float ms, double copy_gbs) {
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("%-44s | %8.3f ms | %8.1f GB/s | %5.1f%% of copy\n", name, ms, gbs, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 100.0);
}

// A matmul row: its rate against the H200's dense bf16 peak.
static void mm_row(const char* name, double flops, float ms) {
    double tf = flops / (ms * 1e-3) / 1e12;
    printf("%-44s | %8.3f ms | %8.1f TFLOP/s | %5.1f%% of 989 TFLOP/s\n", name, ms, tf, tf / 989.0 * 100);
}

// An S x S x S product of fp32 matrices through cuBLASLt, exact (CUBLAS_COMPUTE_32F: the CUDA cores) or on the TF32
// tensor cores (32F_FAST_TF32, what --tf32 1 gives an fp32 build): its time in ms. Its own descriptors rather than
// the backend's plans, whose operands are floatX; the planner's fp32 rates (plan.h) are these two against the bf16
// ceiling.
static float fp32_matmul_ms(const float* a, const float* b, float* d, int S, int tf32) {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l;
    gpuCheck(cublasLtMatmulDescCreate(&op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
    gpuCheck(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, S, S, S));
    cublasLtMatmulPreference_t pref;
    gpuCheck(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = KERNELS_LT_WORKSPACE;
    gpuCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    gpuCheck(cublasLtMatmulAlgoGetHeuristic(g.lt, op, l, l, l, l, pref, 1, &heur, &found));
    if (found == 0) { fatal("cuBLASLt: no algorithm for an fp32 %d^3 product (tf32 %d)", S, tf32); }
    const float one = 1.0f, zero = 0.0f;
    float ms = time_ms([&] {
        gpuCheck(cublasLtMatmul(g.lt, op, &one, a, l, b, l, &zero, d, l, d, l, &heur.algo, g.lt_workspace, ws, g.stream));
    });
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
    return ms;
}

int main(int argc, char** argv) {
    // a row at a time: gpu_check reads the rows from a file, where a crash or a timeout would lose a full buffer's
    // worth of rows already measured
    setvbuf(stdout, NULL, _IOLBF, 0);
    size_t n = argc > 1 ? (size_t)atoll(argv[1]) : ((size_t)1 << 28);
    kernels_ctx_init(&g, KERNELS_DTYPE, 1024, 1600);
    printf("device: %s; %zu elements per buffer, floatX %zu bytes\n", kernels_blas_reason(), n, sizeof(floatX));
    floatX* x = (floatX*)dev_alloc(&g, n * sizeof(floatX));
    floatX* y = (floatX*)dev_alloc(&g, n * sizeof(floatX));
    floatX* z = (floatX*)dev_alloc(&g, n * sizeof(floatX));
    floatX* u = (floatX*)dev_alloc(&g, n * sizeof(floatX));
    kernels__fill_hash<<<kernels__blocks(n, 256), 256, 0, g.stream>>>(x, n, 1);
    kernels__fill_hash<<<kernels__blocks(n, 256), 256, 0, g.stream>>>(y, n, 2);
    kernels__fill_hash<<<kernels__blocks(n, 256), 256, 0, g.stream>>>(u, n, 5);
    launchCheck();
    // copy: read n + write n elements
    float ms = time_ms([&] { dev_copy_d2d(&g, y, x, n * sizeof(floatX)); });
    double copy_gbs = 2.0 * n * sizeof(floatX) / (ms * 1e-3) / 1e9;
    row("cudaMemcpy device to device (the ceiling)", 2.0 * n * sizeof(floatX), ms, copy_gbs);
    ms = time_ms([&] { gelu_forward(&g, y, x, n); });
    row("gelu_forward", 2.0 * n * sizeof(floatX), ms, copy_gbs);
    ms = time_ms([&] { gelu_backward(&g, z, x, y, n); });
    row("gelu_backward", 3.0 * n * sizeof(floatX), ms, copy_gbs);
    // LayerNorm over rows of C = 768: read x, w, b, write out (floatX), mean and rstd (fp32)
    int C = 768, BT = (int)(n / C);
    float* mean = (float*)dev_alloc(&g, (size_t)BT * sizeof(float));
    float* rstd = (float*)dev_alloc(&g, (size_t)BT * sizeof(float));
    ms = time_ms([&] { layernorm_forward(&g, y, mean, rstd, x, x, x, BT, C); });
    row("layernorm_forward (C 768)", 2.0 * (size_t)BT * C * sizeof(floatX) + 8.0 * BT, ms, copy_gbs);
    // read the residual and the block's output (two arrays: the same one twice would be read once, from the cache, and
    // the first GPU run's 125% of copy was that), write the new residual and the normalized rows; the bias, w and b
    // are rows of C
    ms = time_ms([&] { residual_layernorm_forward(&g, z, y, mean, rstd, x, u, x, x, x, BT, C); });
    row("residual_layernorm_forward (C 768)", 4.0 * (size_t)BT * C * sizeof(floatX) + 8.0 * BT, ms, copy_gbs);
    // backward: read x and dout (two arrays) and dinp, write dinp (floatX); mean, rstd; the dw/db partials are small
    // beside these
    float* dwb = (float*)dev_alloc(&g, 2 * (size_t)1600 * sizeof(float));
    ms = time_ms([&] { layernorm_backward(&g, z, dwb, dwb + C, u, x, y, mean, rstd, BT, C, 0); });
    row("layernorm_backward (C 768)", 4.0 * (size_t)BT * C * sizeof(floatX) + 8.0 * BT, ms, copy_gbs);
    // GPT-2 1558M's rows (1600 channels: two warps to a row, kernels__layernorm_backward_regs<8, 4, 2>), as many as the buffers hold
    int C16 = 1600, BT16 = (int)(n / C16);
    ms = time_ms([&] { layernorm_backward(&g, z, dwb, dwb + C16, u, x, y, mean, rstd, BT16, C16, 0); });
    row("layernorm_backward (C 1600)", 4.0 * (size_t)BT16 * C16 * sizeof(floatX) + 8.0 * BT16, ms, copy_gbs);
    // token + position embedding of B x T tokens (T 1024, vocabulary 50257 when the buffers hold them): read a wte row
    // and a wpe row per token, write the sum
    int T = BT < 1024 ? BT : 1024, B = BT / T, V = n / C < 50257 ? (int)(n / C) : 50257;
    int32_t* htok = (int32_t*)mallocCheck((size_t)B * T * sizeof(int32_t));
    for (size_t i = 0; i < (size_t)B * T; i++) { htok[i] = (int32_t)((i * 2654435761u) % (unsigned)V); }
    int32_t* tok = (int32_t*)dev_alloc(&g, (size_t)B * T * sizeof(int32_t));
    dev_copy_h2d(&g, tok, htok, (size_t)B * T * sizeof(int32_t));
    ms = time_ms([&] { encoder_forward(&g, z, tok, x, y, 0, V, B, T, C); });
    char name[128];
    snprintf(name, sizeof(name), "encoder_forward (C 768, vocabulary %d)", V);
    // (wpe's T rows are read once from memory and then from the cache, B times: counting them B times gave 128% of
    // copy in the first GPU run)
    row(name, 2.0 * (size_t)B * T * C * sizeof(floatX) + (double)T * C * sizeof(floatX) + 4.0 * B * T, ms, copy_gbs);
    free(htok);
    // the LM head's softmax, loss and gradient in place over rows of GPT-2's 50304 logits (as many rows as the buffers
    // hold, at most 8192): read each row, write its gradient. The row held in registers (the trainer's kernel for these
    // rows) beside the kernel that reads each row twice, a pack at a time (the one rows past 8 packs a thread take)
    {
        int Vp = 50304, V = 50257, lrows = (int)(n / Vp) < 8192 ? (int)(n / Vp) : 8192;
        if (lrows > 0 && kernels__rows_packed(Vp, {u})) {
            int32_t* ltgt = (int32_t*)dev_alloc(&g, (size_t)lrows * sizeof(int32_t));
            float* lloss = (float*)dev_alloc(&g, (size_t)lrows * sizeof(float));
            int32_t* ht = (int32_t*)mallocCheck((size_t)lrows * sizeof(int32_t));
            for (int i = 0; i < lrows; i++) { ht[i] = (int32_t)((i * 7919) % V); }
            dev_copy_h2d(&g, ltgt, ht, (size_t)lrows * sizeof(int32_t));
            unsigned th = kernels__row_threads(Vp / KERNELS_PACK);
            double lbytes = 2.0 * lrows * Vp * sizeof(floatX) + 8.0 * lrows;
            ms = time_ms([&] { kernels__classifier_softmax_launch<KERNELS_PACK>(&g, lrows, u, lloss, ltgt, 1.0f / lrows, V, Vp, 1); });
            snprintf(name, sizeof(name), "classifier softmax + gradient (%d x 50304, row in registers)", lrows);
            row(name, lbytes, ms, copy_gbs);
            ms = time_ms([&] { kernels__classifier_softmax<KERNELS_PACK><<<lrows, th, 0, g.stream>>>(u, lloss, ltgt, 1.0f / lrows, V, Vp, 1); });
            snprintf(name, sizeof(name), "classifier softmax + gradient (%d x 50304, two passes)", lrows);
            row(name, lbytes, ms, copy_gbs);
            // the losses alone (validation: the row read, one exponential an element, nothing written): beside the row
            // with the gradient, it says how much of that row's time the second pass of exponentials and the stores take
            ms = time_ms([&] { kernels__classifier_softmax_launch<KERNELS_PACK>(&g, lrows, u, lloss, ltgt, 0.0f, V, Vp, 0); });
            snprintf(name, sizeof(name), "classifier softmax, losses only (%d x 50304, registers)", lrows);
            row(name, (double)lrows * Vp * sizeof(floatX) + 8.0 * lrows, ms, copy_gbs);
            kernels__fill_hash<<<kernels__blocks(n, 256), 256, 0, g.stream>>>(u, n, 5); // (u again as it was)
            launchCheck();
            free(ht);
            dev_free(&g, ltgt);
            dev_free(&g, lloss);
        }
    }
    // AdamW with master weights: read grad, m, v, master; write m, v, master, params
    size_t na = n / 4;
    float* gr = (float*)dev_alloc(&g, na * sizeof(float));
    float* m = (float*)dev_alloc(&g, na * sizeof(float));
    float* v = (float*)dev_alloc(&g, na * sizeof(float));
    float* master = (float*)dev_alloc(&g, na * sizeof(float));
    AdamWSegment seg = {0, na, 1};
    AdamWHyper hp = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1, 7};
    ms = time_ms([&] { adamw_update(&g, y, master, gr, m, v, 0, na, &seg, 1, &hp); });
    row("adamw_update (master weights, stochastic rounding)", na * (7.0 * 4 + sizeof(floatX)), ms, copy_gbs);
    // the bias gradient of the MLP's first layer at B*T = 65536 tokens, the GPT-2 124M benchmark's step (fewer when the
    // buffers are small; the first GPU run took 16384, 35 us, 71% of copy): read dout (rows x 3072), write 3072 sums
    // (the 128 x 3072 fp32 partials between the two passes are small beside dout)
    int brows = n / 3072 < 65536 ? (int)(n / 3072) : 65536;
    ms = time_ms([&] { kernels__bias_grad(&g, gr, x, brows, 3072, 0); });
    snprintf(name, sizeof(name), "bias gradient (column sums of %d x 3072)", brows);
    row(name, (double)brows * 3072 * sizeof(floatX) + 2.0 * 128 * 3072 * 4, ms, copy_gbs);
    double* acc = (double*)dev_alloc(&g, sizeof(double));
    ms = time_ms([&] { sum_squares_accumulate(&g, acc, gr, na); });
    row("sum_squares_accumulate (the global norm)", na * 4.0, ms, copy_gbs);
    // causal attention at GPT-2 124M's shape (12 heads of 64, T 1024; B 8, or what the buffers hold) and 1558M's (25
    // heads of 64), forward and backward, with each implementation the build has (impl 0 native: the tensor-core
    // kernels in 16-bit builds, the warp-per-row ones in fp32; 1 cudnn where built; 2 cuDNN's backward with
    // --deterministic 0, dQ accumulated with atomics instead of a T x T buffer and a second product, timed last, below,
    // so that if it fails on a GPU the rows after this one are still measured; its forward is impl 1's, run untimed).
    // The rate counts the causal half of the products, as flash attention's benchmarks do: forward 2 products of
    // 2 B NH T^2 hs flops, halved; backward 2.5 times that.
    auto attention_rows = [&](int ANH, int impl_lo, int impl_hi) {
        int AT = 1024, AC = 64 * ANH, AB = (int)std::min<size_t>(8, n / ((size_t)AT * 3 * AC));
        if (AB < 1) {
            printf("buffers too small for the attention rows (%d x 64)\n", ANH);
            return;
        }
        float* alse = (float*)dev_alloc(&g, (size_t)AB * ANH * AT * sizeof(float));
        floatX* aout = y;                             // (B, T, C)
        floatX* adout = y + (size_t)AB * AT * AC;     // (B, T, C)
        double fwd = 4.0 * AB * ANH * (double)AT * AT * (AC / ANH) / 2;
        for (int impl = impl_lo; impl < impl_hi; impl++) {
            const char* nm = impl == 0 ? "native" : impl == 1 ? "cudnn" : "cudnn, --deterministic 0";
            if (kernels_set_attention(&g, impl == 0 ? "native" : "cudnn") != 0 || kernels_set_deterministic(&g, impl != 2) != 0) { continue; }
            char what[96];
            if (impl < 2) {
                float t = time_ms([&] { attention_forward(&g, aout, alse, x, AB, AT, AC, ANH); });
                snprintf(what, sizeof(what), "attention forward [%s] B %d T %d %d x 64", nm, AB, AT, ANH);
                mm_row(what, fwd, t);
            } else {
                attention_forward(&g, aout, alse, x, AB, AT, AC, ANH); // (the backward's inputs)
            }
            long refused = g.att_nondet_refused;
            float t = time_ms([&] { attention_backward(&g, z, adout, x, aout, alse, AB, AT, AC, ANH); });
            // (cuDNN without an engine for the non-deterministic graph runs the deterministic one: the row says so)
            snprintf(what, sizeof(what), "attention backward [%s%s] B %d T %d %d x 64", nm,
                     g.att_nondet_refused > refused ? ": ran deterministic" : "", AB, AT, ANH);
            mm_row(what, 2.5 * fwd, t);
        }
        kernels_set_attention(&g, "auto");
        kernels_set_deterministic(&g, 1);
        dev_free(&g, alse);
    };
    for (int ANH : {12, 25}) { attention_rows(ANH, 0, 2); }
    // a decoding step's attention (sampling with the KV cache: attention_forward_rows): one query per sequence and head
    // against T cached keys and values, 12 heads of 64 (GPT-2 124M), with the flash-decoding kernels (each row's keys
    // split in runs of 64, then merged) and with the warp-per-row kernel they replaced, side by side. Reported in
    // microseconds a layer and as the rate of reading the cache (B T 2C values) once; not a goal's row (a launch or
    // two on a megabyte is latency, not bandwidth), so no "of copy".
    for (int DB : {1, 8}) {
        for (int DT0 : {256, 1024}) {
            int DC = 768, DNH = 12;
            // (buffers too small for the cache, as in the emulated check's plumbing run: the first row at the T they hold)
            int DT = (int)std::min<size_t>(DT0, n / ((size_t)DB * 2 * DC));
            if (DT < 2 || (DT < DT0 && DT0 != 256)) { continue; }
            size_t cached = (size_t)DB * DT * 2 * DC;
            float t[2];
            t[0] = time_ms([&] { attention_forward_rows(&g, z, y, x, DB, DT, DT, DT - 1, DC, DNH); });
            t[1] = time_ms([&] { kernels__attention_rows_warp(&g, z, y, x, DB, DT, DT, DT - 1, DC, DNH); });
            for (int k = 0; k < 2; k++) {
                char what[96];
                snprintf(what, sizeof(what), "attention decode step B %d T %d 12 x 64 [%s]", DB, DT, k == 0 ? "split keys" : "warp per row");
                printf("%-44s | %8.1f us | %8.1f GB/s | %5.1fx the warp per row\n", what, 1e3 * t[k], cached * sizeof(floatX) / (t[k] * 1e-3) / 1e9,
                       t[1] / t[k]);
            }
        }
    }
    // matmuls of GPT-2 124M at B*T = 16384 tokens: forward fc (C -> 4C), its backward dinp and dweight
    int M = 16384, K = 768, N = 3072;
    floatX* a = x;            // (M, K)
    floatX* w = y;            // (N, K)
    floatX* o = z;            // (M, N)
    float* dw = gr;           // (N, K) fp32
    if ((size_t)M * N > n || (size_t)N * K > na) {
        printf("buffers too small for the GPT-2 matmul rows\n");
    } else {
        double flops = 2.0 * M * N * K;
        ms = time_ms([&] { matmul_forward(&g, o, a, w, NULL, M, K, N); });
        mm_row("matmul_forward 16384 x 768 -> 3072", flops, ms);
        ms = time_ms([&] { matmul_backward(&g, a, dw, NULL, o, a, w, M, K, N, 0); });
        mm_row("matmul_backward (dinp + dweight)", 2 * flops, ms);
        // with the bias gradient as well: from the dweight product's BGRADB epilogue (cuBLASLt says on stderr when it has
        // no algorithm for it, and the row then times the fallback), then from the separate two-pass reduction
        int keep = g.bias_grad_fusion;
        for (int fused = 1; fused >= 0; fused--) {
            g.bias_grad_fusion = fused;
            ms = time_ms([&] { matmul_backward(&g, a, dw, m, o, a, w, M, K, N, 1); });
            mm_row(fused ? "matmul_backward + dbias (BGRADB epilogue)" : "matmul_backward + dbias (separate reduction)", 2 * flops, ms);
        }
        g.bias_grad_fusion = keep;
    }
    // GPT-2 1558M's linear layers at 16384 tokens (C 1600: not a multiple of 128, where the heuristic's first choice is
    // least sure), forward and backward: with the heuristic's first algorithm, then with the fastest of its first 16
    // timed on this GPU (--matmul-tune 16, kernels_lt_tune.cuh), side by side
    {
        const struct { const char* name; int K, N; } lin[4] = {{"qkv 1600 -> 4800", 1600, 4800}, {"attn proj 1600 -> 1600", 1600, 1600},
                                                               {"fc 1600 -> 6400", 1600, 6400}, {"fc proj 6400 -> 1600", 6400, 1600}};
        int M2 = 16384;
        for (int l = 0; l < 4; l++) {
            int K2 = lin[l].K, N2 = lin[l].N;
            if ((size_t)M2 * N2 > n || (size_t)M2 * K2 > n || (size_t)N2 * K2 > na) {
                printf("buffers too small for GPT-2 1558M's %s\n", lin[l].name);
                continue;
            }
            double flops = 2.0 * M2 * N2 * K2;
            for (int tune = 0; tune <= 16; tune += 16) {
                kernels_matmul_plans_reset();
                kernels_set_matmul_tune(&g, tune, NULL, 0);
                char what[96];
                ms = time_ms([&] { matmul_forward(&g, z, x, y, NULL, M2, K2, N2); });
                snprintf(what, sizeof(what), "1558M %s fwd [%s]", lin[l].name, tune ? "tuned 16" : "heuristic");
                mm_row(what, flops, ms);
                ms = time_ms([&] { matmul_backward(&g, x, gr, NULL, z, x, y, M2, K2, N2, 0); });
                snprintf(what, sizeof(what), "1558M %s bwd [%s]", lin[l].name, tune ? "tuned 16" : "heuristic");
                mm_row(what, 2 * flops, ms);
            }
            char sum[512];
            kernels_matmul_algos_summary(sum, sizeof(sum));
            printf("  (tuned: %s)\n", sum);
        }
        kernels_matmul_plans_reset();
        kernels_set_matmul_tune(&g, 0, NULL, 0);
    }
    // the rate cuBLASLt reaches on a large square product of data: the achievable ceiling (scripts/gpu_check.sh
    // reports MFU against it as well as against the datasheet's peak)
    int S = 8192;
    float ceiling_ms = 0.0f;
    if ((size_t)S * S <= n) {
        ceiling_ms = ms = time_ms([&] { matmul_forward(&g, z, x, y, NULL, S, S, S); });
        mm_row("matmul 8192 x 8192 x 8192 (the ceiling)", 2.0 * S * S * S, ms);
    }
    // fp32 products (an fp32 build's matmuls): exact, then --tf32 1's TF32 tensor cores; 8192^3 as the ceiling above
    // (smaller where the buffers are: the emulated check runs the plumbing), and each rate against that ceiling,
    // which the planner assumes to be 1/15 and 1/2
    int SF = 8192;
    while (SF > 64 && (size_t)SF * SF > n) { SF /= 2; }
    {
        size_t nf = (size_t)SF * SF;
        float *fa = (float*)dev_alloc(&g, nf * sizeof(float)), *fb = (float*)dev_alloc(&g, nf * sizeof(float));
        float* fd = (float*)dev_alloc(&g, nf * sizeof(float));
        kernels__fill_hash_f32<<<kernels__blocks(nf, 256), 256, 0, g.stream>>>(fa, nf, 3);
        kernels__fill_hash_f32<<<kernels__blocks(nf, 256), 256, 0, g.stream>>>(fb, nf, 4);
        launchCheck();
        float t[2];
        for (int tf = 0; tf < 2; tf++) {
            t[tf] = fp32_matmul_ms(fa, fb, fd, SF, tf);
            char what[96];
            snprintf(what, sizeof(what), "fp32 matmul %d^3, %s", SF, tf ? "TF32 tensor cores (--tf32 1)" : "exact (--tf32 0)");
            mm_row(what, 2.0 * SF * SF * SF, t[tf]);
        }
        if (ceiling_ms > 0 && SF == S) {
            printf("fp32 rate / the bf16 ceiling: exact %.3f, TF32 %.3f (the planner assumes %.3f and %.3f)\n", ceiling_ms / t[0],
                   ceiling_ms / t[1], KERNELS_FP32_EXACT_RATE, KERNELS_FP32_TF32_RATE);
        }
        dev_free(&g, fa); dev_free(&g, fb); dev_free(&g, fd);
    }
    // last (see attention_rows): cuDNN's nondeterministic attention backward, new and not yet run on a GPU
    for (int ANH : {12, 25}) { attention_rows(ANH, 2, 3); }
    kernels_ctx_free(&g);
    printf("bench_kernels: done\n");
    return 0;
}
