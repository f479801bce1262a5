/*
tests/test_tp.c: the tensor-parallel building blocks of tp.h against the single-rank ops, forward and backward, on
every rank of a tensor-parallel group of the whole world (mpirun -np 1, 2, 4):
  column-parallel and row-parallel linear layers, the vocabulary-parallel embedding, and the vocabulary-parallel
  cross-entropy with a vocabulary that needs padding to divide by the group (V 13 padded to 16), a masked target and
  chunks of rows; and the tensor-parallel parameter layout (slices, heads, views, refusals).
Every rank makes the same full-size random data, computes the reference with the plain ops on the whole weights, and
checks its own slice of the tensor-parallel result. Tolerance 1e-5 absolute + 1e-5 relative: the parallel versions
sum the same float32 terms in another order (split over ranks, then reduced).

    make tests/test_tp && mpirun -np 2 ./tests/test_tp
*/
#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c" // defines: the kernels, comm.h, ParallelContext
#include "tp.h"        // defines: tp_column_linear_*, tp_row_linear_*, tp_embedding_*, tp_cross_entropy
#include "tests/kv_rows.h" // defines: kv_forward_rows

static ParallelContext g_pc;
static KernelCtx g_ctx;
static int g_pass, g_fail;

// A check on every rank: it passes only if it passes on all; rank 0 prints it.
static void tcheck(int ok, const char* name, const char* detail) {
    double bad = ok ? 0.0 : 1.0;
    comm_allreduce_max_f64(&g_pc.world, &bad, 1);
    if (g_pc.world_rank == 0) {
        printf("%s %s (tp %d)%s%s\n", bad == 0.0 ? "PASS" : "FAIL", name, g_pc.tp, detail[0] ? ": " : "", detail);
        fflush(stdout);
    }
    if (bad == 0.0) { g_pass++; } else { g_fail++; }
}

// |got - want| <= 1e-5 + 1e-5 |want| elementwise (NaN fails); detail names the worst element.
static void close_check(const char* name, const float* got, const float* want, size_t n) {
    size_t bad = 0, worst = 0;
    double wd = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= 1e-5 + 1e-5 * fabs(want[i]))) { bad++; }
        if (!(d <= wd)) { wd = d; worst = i; }
    }
    char detail[160] = "";
    if (bad) { snprintf(detail, sizeof(detail), "%zu of %zu out of tolerance; element %zu: %.9g vs %.9g", bad, n, worst, got[worst], want[worst]); }
    tcheck(bad == 0, name, detail);
}

static uint64_t g_rng = 12345;
static void fill(float* x, size_t n, float scale) { for (size_t i = 0; i < n; i++) { x[i] = scale * (2.0f * rng_uniform(&g_rng) - 1.0f); } }
static float* alloc(size_t n) { float* p = (float*)callocCheck(n ? n : 1, sizeof(float)); return p; }

enum { B = 2, T = 5, BT = B * T, C = 8, OC = 12, V = 13, VP = 16 };

static void test_column(void) {
    int tp = g_pc.tp, r = g_pc.tp_rank, OCl = OC / tp;
    float *x = alloc(BT * C), *w = alloc(OC * C), *b = alloc(OC), *dy = alloc(BT * OC);
    fill(x, BT * C, 1.0f); fill(w, OC * C, 0.5f); fill(b, OC, 0.5f); fill(dy, BT * OC, 1.0f);
    // reference: the whole layer
    float *y = alloc(BT * OC), *dx = alloc(BT * C), *dw = alloc(OC * C), *db = alloc(OC);
    matmul_forward(&g_ctx, y, x, w, b, BT, C, OC);
    matmul_backward(&g_ctx, dx, dw, db, dy, x, w, BT, C, OC, 0);
    // this rank's rows of W and b, columns of y and dy
    float *wl = w + (size_t)r * OCl * C, *bl = b + (size_t)r * OCl;
    float *yl = alloc(BT * OCl), *dyl = alloc(BT * OCl), *ylw = alloc(BT * OCl);
    for (int i = 0; i < BT; i++) { for (int j = 0; j < OCl; j++) { dyl[i * OCl + j] = dy[i * OC + r * OCl + j]; ylw[i * OCl + j] = y[i * OC + r * OCl + j]; } }
    float *dxt = alloc(BT * C), *dwl = alloc(OCl * C), *dbl = alloc(OCl), *host = alloc(BT * C);
    tp_column_linear_forward(&g_ctx, yl, x, wl, bl, BT, C, OCl);
    close_check("column-parallel linear: forward (this rank's columns of y)", yl, ylw, (size_t)BT * OCl);
    tp_column_linear_backward(&g_ctx, &g_pc.tp_group, host, dxt, dwl, dbl, dyl, x, wl, BT, C, OCl, 0);
    close_check("column-parallel linear: dx all-reduced equals the whole layer's", dxt, dx, (size_t)BT * C);
    close_check("column-parallel linear: dW of this rank's rows", dwl, dw + (size_t)r * OCl * C, (size_t)OCl * C);
    close_check("column-parallel linear: db of this rank's rows", dbl, db + (size_t)r * OCl, OCl);
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db); free(yl); free(dyl); free(ylw);
    free(dxt); free(dwl); free(dbl); free(host);
}

static void test_row(void) {
    int tp = g_pc.tp, r = g_pc.tp_rank, Cl = C / tp;
    float *x = alloc(BT * C), *w = alloc(OC * C), *dy = alloc(BT * OC);
    fill(x, BT * C, 1.0f); fill(w, OC * C, 0.5f); fill(dy, BT * OC, 1.0f);
    float *y = alloc(BT * OC), *dx = alloc(BT * C), *dw = alloc(OC * C);
    matmul_forward(&g_ctx, y, x, w, NULL, BT, C, OC);
    matmul_backward(&g_ctx, dx, dw, NULL, dy, x, w, BT, C, OC, 0);
    // this rank's columns of W and x
    float *wl = alloc(OC * Cl), *xl = alloc(BT * Cl), *dxw = alloc(BT * Cl), *dww = alloc(OC * Cl);
    for (int o = 0; o < OC; o++) { for (int c = 0; c < Cl; c++) { wl[o * Cl + c] = w[o * C + r * Cl + c]; dww[o * Cl + c] = dw[o * C + r * Cl + c]; } }
    for (int i = 0; i < BT; i++) { for (int c = 0; c < Cl; c++) { xl[i * Cl + c] = x[i * C + r * Cl + c]; dxw[i * Cl + c] = dx[i * C + r * Cl + c]; } }
    float *yt = alloc(BT * OC), *dxl = alloc(BT * Cl), *dwl = alloc(OC * Cl), *host = alloc(BT * OC);
    tp_row_linear_forward(&g_ctx, &g_pc.tp_group, host, yt, xl, wl, BT, Cl, OC);
    close_check("row-parallel linear: forward all-reduced equals the whole layer's", yt, y, (size_t)BT * OC);
    tp_row_linear_backward(&g_ctx, dxl, dwl, dy, xl, wl, BT, Cl, OC, 0);
    close_check("row-parallel linear: dx of this rank's columns", dxl, dxw, (size_t)BT * Cl);
    close_check("row-parallel linear: dW of this rank's columns", dwl, dww, (size_t)OC * Cl);
    free(x); free(w); free(dy); free(y); free(dx); free(dw); free(wl); free(xl); free(dxw); free(dww); free(yt); free(dxl);
    free(dwl); free(host);
}

static void test_embedding(void) {
    int lo, nl;
    tp_vocab_slice(&g_pc.tp_group, VP, &lo, &nl);
    int32_t tok[BT] = {0, 12, 3, 7, 12, 15, 1, 8, 4, 11}; // repeated tokens; 15 is a padding row's id
    float *wte = alloc(VP * C), *wpe = alloc(T * C), *dout = alloc(BT * C);
    fill(wte, VP * C, 1.0f); fill(wpe, T * C, 1.0f); fill(dout, BT * C, 1.0f);
    float *out = alloc(BT * C), *dwte = alloc(VP * C), *dwpe = alloc(T * C);
    encoder_forward(&g_ctx, out, tok, wte, wpe, 0, VP, B, T, C);
    encoder_backward(&g_ctx, dwte, dwpe, dout, tok, 0, VP, B, T, C);
    float *outt = alloc(BT * C), *dwtel = alloc((size_t)nl * C), *dwpet = alloc(T * C), *host = alloc(BT * C);
    tp_embedding_forward(&g_ctx, &g_pc.tp_group, host, outt, tok, wte + (size_t)lo * C, wpe, lo, nl, B, T, C);
    close_check("vocab-parallel embedding: forward all-reduced equals the whole table's", outt, out, (size_t)BT * C);
    tp_embedding_backward(&g_ctx, dwtel, dwpet, dout, tok, lo, nl, B, T, C);
    close_check("vocab-parallel embedding: dwte of this rank's vocabulary rows", dwtel, dwte + (size_t)lo * C, (size_t)nl * C);
    close_check("vocab-parallel embedding: dwpe (replicated) on every rank", dwpet, dwpe, (size_t)T * C);
    free(wte); free(wpe); free(dout); free(out); free(dwte); free(dwpe); free(outt); free(dwtel); free(dwpet); free(host);
}

static void test_cross_entropy(void) {
    int lo, nl;
    tp_vocab_slice(&g_pc.tp_group, VP, &lo, &nl);
    int32_t tgt[BT] = {0, 12, 3, -1, 7, 12, 1, 8, 4, 11}; // every slice holds a target (tp <= 4); one masked
    float *x = alloc(BT * C), *wte = alloc(VP * C);
    fill(x, BT * C, 1.0f); fill(wte, VP * C, 1.0f);
    for (size_t i = (size_t)V * C; i < (size_t)VP * C; i++) { wte[i] = 0.0f; } // padding rows are zero
    const float scale = 1.0f / BT;
    float *losses = alloc(BT), *dx = alloc(BT * C), *dwte = alloc(VP * C), *chunk = alloc(3 * VP);
    classifier_forward_backward(&g_ctx, losses, dx, dwte, chunk, 3, x, wte, tgt, scale, BT, C, V, VP, 0);
    float *lt = alloc(BT), *dxt = alloc(BT * C), *dwtel = alloc((size_t)nl * C), *chl = alloc((size_t)3 * nl);
    float *stats = alloc(9), *host = alloc(BT * C);
    tp_cross_entropy(&g_ctx, &g_pc.tp_group, host, stats, lt, dxt, dwtel, chl, 3, x, wte + (size_t)lo * C, tgt, scale, lo, nl, V,
                     BT, C, 0);
    close_check("vocab-parallel cross-entropy: losses equal the whole vocabulary's (never gathering logits)", lt, losses, BT);
    tp_allreduce_x(&g_ctx, &g_pc.tp_group, dxt, (size_t)BT * C, host);
    close_check("vocab-parallel cross-entropy: dx, its parts summed over the group", dxt, dx, (size_t)BT * C);
    close_check("vocab-parallel cross-entropy: dwte of this rank's rows (padding rows zero)", dwtel, dwte + (size_t)lo * C, (size_t)nl * C);
    // evaluation: losses only
    float* le = alloc(BT);
    tp_cross_entropy(&g_ctx, &g_pc.tp_group, host, stats, le, NULL, NULL, chl, 3, x, wte + (size_t)lo * C, tgt, 0.0f, lo, nl, V, BT, C, 0);
    close_check("vocab-parallel cross-entropy: evaluation losses", le, losses, BT);
    free(x); free(wte); free(losses); free(dx); free(dwte); free(chunk); free(lt); free(dxt); free(dwtel); free(chl); free(stats);
    free(host); free(le);
}

// Sequence parallelism's collectives: every rank makes the same full (rows, C) tensors of each rank's contribution;
// the reduce-scatter gives this rank its rows of their sum, the all-gather rebuilds the whole from every rank's rows.
// The sum is over tp values in rank order in the reference; MPI may add them in another order (tolerance 1e-5).
static void test_sequence_parallel(void) {
    int tp = g_pc.tp, r = g_pc.tp_rank;
    const size_t R = 4, rows = R * (size_t)tp; // 4 rows per rank
    float* contrib = alloc((size_t)tp * rows * C); // rank q's contribution: contrib + q rows C
    fill(contrib, (size_t)tp * rows * C, 1.0f);
    float *sum = alloc(rows * C), *part = alloc(R * C), *full = alloc(rows * C), *host = alloc(R * C + rows * C);
    for (int q = 0; q < tp; q++) {
        for (size_t i = 0; i < rows * C; i++) { sum[i] += contrib[(size_t)q * rows * C + i]; }
    }
    tp_reduce_scatter_rows_x(&g_ctx, &g_pc.tp_group, host, part, contrib + (size_t)r * rows * C, R, C);
    close_check("sequence parallel: reduce-scatter gives this rank its rows of the sum", part, sum + (size_t)r * R * C, R * C);
    tp_allgather_rows_x(&g_ctx, &g_pc.tp_group, host, full, sum + (size_t)r * R * C, R, C);
    close_check("sequence parallel: all-gather rebuilds every row from the ranks' shares", full, sum, rows * C);
    float grads[C];
    for (int i = 0; i < C; i++) { grads[i] = (float)(r + 1) * (i + 1); }
    tp_allreduce_f32(&g_ctx, &g_pc.tp_group, grads, C, host);
    float want[C];
    for (int i = 0; i < C; i++) { want[i] = (float)(tp * (tp + 1) / 2) * (i + 1); }
    close_check("sequence parallel: gradient all-reduce sums the ranks' partial LayerNorm gradients", grads, want, C);
    free(contrib); free(sum); free(part); free(full); free(host);
}

// The whole model under tensor parallelism against one process, first step: every rank builds the reference model
// (tp 1) and its tensor-parallel share from the same file, runs one forward and backward on the same batch, and
// checks its token losses and its share of every parameter gradient against the reference's, sliced to the share.
// Tolerances, per tensor, relative to the tensor's largest reference gradient g_max: fp32 |d| <= 1e-5 g_max + 1e-4
// |ref| (the same float32 terms summed in another order: split over ranks, then reduced); bf16/fp16 2e-2 g_max (the
// row-parallel partial sums are rounded to 16 bits before their reduction and once after, where one process rounds
// the whole sum once: about one unit in the last place of bf16, 2^-8, on activations, which the backward carries
// into every gradient). A gradient that misses a rank's part, or counts it twice, is off by its whole size.
// Sampling with a KV cache on this rank's share (each rank caches its heads' keys and values): Bm sequences sharing a prompt
// of 3 tokens (cached once for all), then one position of each per forward; every row of the final LayerNorm equals
// the same position of one process's full forward (fp32: sums in other orders, ~1e-7; a wrong or missing cached row
// is off by far more than 1e-4).
static void check_kv_forward(GPT* ref, GPT* m, int Bm, int Tm, const int32_t* in) {
    enum { P = 3 };
    int Cm = ref->cfg.channels;
    int32_t* seqs = (int32_t*)mallocCheck(sizeof(int32_t) * (size_t)Bm * Tm);
    for (int b = 0; b < Bm; b++) {
        for (int t = 0; t < Tm; t++) { seqs[b * Tm + t] = t < P ? in[t] : in[b * Tm + t]; }
    }
    gpt_forward(ref, seqs, Bm, Tm);
    float* got = alloc((size_t)Bm * Tm * Cm);
    if (!kv_forward_rows(m, seqs, Bm, Tm, Tm, P, got)) { tcheck(0, "whole model, KV cache", "kv_alloc refused"); free(seqs); free(got); return; }
    size_t bad = 0, n = (size_t)Bm * Tm * Cm;
    for (size_t i = 0; i < n; i++) { bad += !(fabsf(got[i] - ref->acts.lnf[i]) <= 1e-4f * (1.0f + fabsf(ref->acts.lnf[i]))); }
    char detail[96];
    snprintf(detail, sizeof(detail), "%zu of %zu out of tolerance", bad, n);
    tcheck(bad == 0, "whole model, fp32: forwards with a KV cache of this rank's heads (a shared prompt, then one position per "
                     "forward) equal one process's full forward, row by row", bad ? detail : "");
    free(seqs);
    free(got);
}

static void test_whole_model(int dtype, int sp, int recompute) {
    GPTConfig g;
    int version;
    FILE* fp;
    model_read_header("tests/ref/ref_model.bin", &g, &version, &fp);
    ParamLayout whole;
    layout_build(&whole, &g);
    float* params = alloc(whole.num_params);
    model_load_params("tests/ref/ref_model.bin", fp, version, &whole, params);
    const int Bm = 2, Tm = 8, BTm = Bm * Tm;
    int32_t tok[BTm + 1];
    uint64_t s = 99;
    for (int i = 0; i <= BTm; i++) { tok[i] = (int32_t)(rng_next(&s) % g.vocab_size); }
    tok[5] = -1; // a masked target (inputs are tok[0..BT) with the mask read as token 0, targets tok[1..BT])
    int32_t in[BTm], tgt[BTm];
    for (int i = 0; i < BTm; i++) { in[i] = tok[i] < 0 ? 0 : tok[i]; tgt[i] = tok[i + 1]; }
    BackwardComm bc = {NULL, 0, 1, 1};
    // the reference
    GPT ref;
    gpt_alloc_params(&ref, &g, 1, dtype, Tm);
    gpt_set_params(&ref, NULL, params);
    gpt_alloc_grads(&ref, 0, 1);
    activations_alloc(&ref.acts, &ref.ctx, &g, Bm, Tm, 0);
    gpt_forward(&ref, in, Bm, Tm);
    gpt_forward_backward(&ref, tgt, 1.0f / BTm, &bc);
    // this rank's share, loaded through the logical stream as the trainer does
    GPT m;
    gpt_alloc_params_tp(&m, &g, 1, &g_pc.tp_group, sp, dtype, Tm);
    GptStreamTarget target;
    ParamStream local = gpt_stream(&m, NULL, &target);
    ShareStream shs;
    ParamStream into = share_stream(&shs, &m.layout, &m.glayout, &local, &g_pc.tp_group, &g_pc.pp_group);
    // in chunks of 37 values, which start inside rows as a big model's file chunks do
    for (int i = 0; i < m.glayout.num_tensors; i++) {
        const ParamEntry* e = &m.glayout.table[i];
        for (size_t k = 0; k < e->rows * e->cols; k += 37) {
            size_t cnt = e->rows * e->cols - k < 37 ? e->rows * e->cols - k : 37;
            into.put(into.self, e->offset + k, params + e->offset + k, cnt);
        }
    }
    // ... and gathered back the same way (the collective get of checkpoints), they are the file's values exactly
    float* back = alloc(whole.num_params);
    for (int i = 0; i < m.glayout.num_tensors; i++) {
        const ParamEntry* e = &m.glayout.table[i];
        for (size_t k = 0; k < e->rows * e->cols; k += 37) {
            size_t cnt = e->rows * e->cols - k < 37 ? e->rows * e->cols - k : 37;
            into.get(into.self, e->offset + k, back + e->offset + k, cnt);
        }
    }
    share_stream_free(&shs);
    if (dtype == DTYPE_FP32) {
        size_t diff = 0;
        for (size_t i = 0; i < whole.num_params; i++) { diff += back[i] != params[i]; }
        char dd[64];
        snprintf(dd, sizeof(dd), "%zu of %zu values differ", diff, whole.num_params);
        tcheck(diff == 0, "whole model: sliced on load and gathered back in 37-value chunks, the model is the file's, exactly", diff ? dd : "");
    }
    free(back);
    gpt_alloc_grads(&m, 0, 1);
    activations_alloc_tp(&m.acts, &m.ctx, &g, m.tp, m.sp, Bm, Tm, recompute);
    gpt_forward(&m, in, Bm, Tm);
    gpt_forward_backward(&m, tgt, 1.0f / BTm, &bc);
    char what[96];
    snprintf(what, sizeof(what), "whole model, %s%s%s", dtype_name(dtype), sp ? ", sequence parallel" : "",
             recompute ? (recompute == 1 ? ", --recompute 1" : ", --recompute 2") : "");
    // losses: the same on every rank of the group
    float fp32_tol = dtype == DTYPE_FP32 ? 1e-5f : 2e-2f;
    size_t bad = 0;
    for (int i = 0; i < BTm; i++) { bad += !(fabsf(m.acts.losses[i] - ref.acts.losses[i]) <= fp32_tol * (1.0f + fabsf(ref.acts.losses[i]))); }
    char name[200], detail[200] = "";
    snprintf(name, sizeof(name), "%s: token losses equal one process's", what);
    snprintf(detail, sizeof(detail), "%zu of %d out of tolerance", bad, BTm);
    tcheck(bad == 0, name, bad ? detail : "");
    // gradients: the reference's, sliced to this rank's share
    float* ref_logical = ref.grads;
    float* want = alloc(m.layout.num_params);
    layout_copy_tp(&m.layout, ref_logical, want, 1);
    double worst = 0.0;
    char worst_name[64] = "-";
    bad = 0;
    for (int i = 0; i < m.layout.num_tensors; i++) {
        const ParamEntry* e = &m.layout.table[i];
        size_t n = e->rows * e->cols;
        const float* got = m.grads + e->offset;
        const float* w = want + e->offset;
        double gmax = 0.0;
        for (size_t j = 0; j < n; j++) { gmax = fabs(w[j]) > gmax ? fabs(w[j]) : gmax; }
        for (size_t j = 0; j < n; j++) {
            double d = fabs((double)got[j] - w[j]);
            double tol = dtype == DTYPE_FP32 ? 1e-5 * gmax + 1e-4 * fabs(w[j]) : 2e-2 * gmax;
            if (!(d <= tol)) { bad++; }
            if (gmax > 0 && d / gmax > worst) { worst = d / gmax; snprintf(worst_name, sizeof(worst_name), "%s[%zu]", e->name, j); }
        }
    }
    snprintf(name, sizeof(name), "%s: this rank's share of every gradient equals one process's", what);
    snprintf(detail, sizeof(detail), "%zu of %zu out of tolerance; worst %.3g of its tensor's largest at %s", bad,
             m.layout.num_params, worst, worst_name);
    tcheck(bad == 0, name, detail);
    free(want);
    if (dtype == DTYPE_FP32 && !sp) { check_kv_forward(&ref, &m, Bm, Tm, in); }
    free(params);
    gpt_free(&m);
    gpt_free(&ref);
    layout_free(&whole);
}

// The tensor-parallel parameter layout (layout.h's layout_build_tp): for tp 1, 2 and 4, every rank's slice of a
// logical buffer whose values are their own indices, put back, rebuilds the logical buffer exactly; the fused q, k, v
// rows split by heads (rank r holds rows [r C/tp, (r+1) C/tp) of each of q, k and v); the views bound on a local
// buffer agree with the table's offsets; a shape that does not split is refused.
static void test_layout(void) {
    GPTConfig g = {8, 13, 16, 2, 4, 16}; // maxT 8, V 13, Vp 16, L 2, NH 4, C 16
    ParamLayout whole;
    layout_build(&whole, &g);
    size_t n = whole.num_params;
    float* logical = alloc(n);
    for (size_t i = 0; i < n; i++) { logical[i] = (float)i; }
    for (int tp = 1; tp <= 4; tp *= 2) {
        float* rebuilt = alloc(n);
        for (size_t i = 0; i < n; i++) { rebuilt[i] = NAN; }
        int heads_ok = 1, views_ok = 1, runs_ok = 1;
        size_t local_total = 0;
        for (int r = 0; r < tp; r++) {
            ParamLayout pl;
            layout_build_tp(&pl, &g, tp, r);
            local_total += pl.num_params;
            float* local = alloc(pl.num_params);
            layout_copy_tp(&pl, logical, local, 1);
            layout_copy_tp(&pl, rebuilt, local, 0);
            // runs from any start, as chunked file reads cut tensors (mid-row included): every element of a run this
            // rank holds is where the slicing put it, and the rank's runs of a range are one contiguous local range
            for (int t = 0; t < pl.num_tensors; t++) {
                const ParamEntry* e = &pl.table[t];
                size_t tn = e->grows * e->gcols;
                for (size_t k0 = 0; k0 < tn; k0 += 5) {
                    size_t k1 = k0 + 1 + (k0 * 13) % 61;
                    if (k1 > tn) { k1 = tn; }
                    size_t next_local = 0, held = 0, first;
                    for (size_t k = k0; k < k1;) {
                        TpRun run = tp_run(e, tp, k, k1 - k);
                        runs_ok &= run.len >= 1 && run.len <= k1 - k;
                        if (tp_run_mine(&run, r, 0)) {
                            runs_ok &= held == 0 || run.local == next_local;
                            for (size_t x = 0; x < run.len; x++) {
                                runs_ok &= local[e->offset + run.local + x] == logical[e->goffset + k + x];
                            }
                            next_local = run.local + run.len;
                            held += run.len;
                        }
                        k += run.len ? run.len : 1;
                    }
                    runs_ok &= tp_local_span(e, tp, r, k0, k1, 0, &first) == held;
                }
            }
            // qkvw.0: local row i of block b is logical row b*C + r*C/tp + i
            for (int t = 0; t < pl.num_tensors; t++) {
                const ParamEntry* e = &pl.table[t];
                if (strcmp(e->name, "qkvw.0") != 0) { continue; }
                size_t per = (size_t)g.channels / tp;
                for (int b = 0; b < 3; b++) {
                    for (size_t i = 0; i < per; i++) {
                        size_t lrow = b * per + i, grow = (size_t)b * g.channels + r * per + i;
                        heads_ok &= local[e->offset + lrow * e->cols] == logical[e->goffset + grow * e->gcols];
                    }
                }
            }
            // the views of a local buffer point where the table says
            ParamViews v;
            memset(&v, 0, sizeof(v));
            floatX* base = (floatX*)local;
            views_bind(&v, &pl, base);
            for (int t = 0; t < pl.num_tensors; t++) {
                const ParamEntry* e = &pl.table[t];
                if (e->layer < 0) { continue; }
                floatX** fields = (floatX**)&v.layers[e->layer];
                views_ok &= fields[e->kind] == base + e->offset;
            }
            views_ok &= v.lnfw == base + pl.lnf_offset && v.wpe == base + pl.table[1].offset;
            free(v.layers);
            free(local);
            layout_free(&pl);
        }
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) { diff += rebuilt[i] != logical[i]; }
        char name[160], detail[160];
        snprintf(name, sizeof(name), "tp layout %d: every rank's slices put back rebuild the logical model exactly", tp);
        snprintf(detail, sizeof(detail), "%zu of %zu values differ", diff, n);
        tcheck(diff == 0 && local_total >= n, name, diff ? detail : "");
        snprintf(name, sizeof(name), "tp layout %d: runs from any start (mid-row too) hold the sliced elements, contiguous per rank", tp);
        tcheck(runs_ok, name, runs_ok ? "" : "a run maps an element elsewhere, or a rank's part is not contiguous");
        snprintf(name, sizeof(name), "tp layout %d: q, k and v split by heads; the views agree with the table", tp);
        tcheck(heads_ok && views_ok, name, heads_ok ? (views_ok ? "" : "a view points elsewhere") : "a qkv row is not its head's");
        free(rebuilt);
    }
    char err[200];
    GPTConfig odd = g;
    odd.num_heads = 3; odd.channels = 12;
    tcheck(!layout_tp_valid(&odd, 2, err, sizeof(err)) && strstr(err, "heads") != NULL, "tp layout: 3 heads over 2 ranks are refused", err);
    odd = g;
    odd.padded_vocab_size = 14;
    tcheck(!layout_tp_valid(&odd, 4, err, sizeof(err)) && strstr(err, "vocabulary") != NULL, "tp layout: a vocabulary of 14 rows over 4 ranks is refused", err);
    free(logical);
    layout_free(&whole);
}

int main(int argc, char** argv) {
    parallel_init(&g_pc, &argc, &argv);
    parallel_set_layout(&g_pc, g_pc.world_size, 1, 60.0); // one tensor-parallel group of every rank
    if (VP % g_pc.tp != 0 || C % g_pc.tp != 0 || OC % g_pc.tp != 0) {
        if (g_pc.world_rank == 0) { printf("test_tp: %d ranks do not divide the test's sizes (use 1, 2 or 4)\n", g_pc.tp); }
        parallel_finalize(&g_pc);
        return 1;
    }
    kernels_ctx_init(&g_ctx, DTYPE_FP32, T, C);
    test_column();
    test_row();
    test_embedding();
    test_cross_entropy();
    test_sequence_parallel();
    test_layout();
    const int dtypes[3] = {DTYPE_FP32, DTYPE_BF16, DTYPE_FP16};
    for (int d = 0; d < 3; d++) {
        for (int sp = 0; sp <= 1; sp++) { test_whole_model(dtypes[d], sp, 0); }
    }
    test_whole_model(DTYPE_FP32, 1, 1);
    test_whole_model(DTYPE_FP32, 1, 2);
    test_whole_model(DTYPE_BF16, 0, 2);
    kernels_ctx_free(&g_ctx);
    if (g_pc.world_rank == 0) { printf("%d passed, %d failed\n", g_pass, g_fail); }
    parallel_finalize(&g_pc);
    return g_fail ? 1 : 0;
}
