/*
tp.h: the building blocks of Megatron-style tensor parallelism, written once over the kernel interface (kernels.h)
and the collectives of comm.h: the column- and row-parallel linear layers, the vocabulary-parallel embedding and the
vocabulary-parallel cross-entropy (the tied LM head), each forward and backward, for the ranks of one tensor-parallel
group. Tested against the single-rank ops under mpirun (tests/test_tp.c); train_gpt.c wires them into the model
(--tp, --sequence-parallel).

Every rank of the group holds a slice of the weights and the whole of the activations it needs:
  column-parallel  y_l = x W_l^T + b_l        W_l: rows [r OC/tp, (r+1) OC/tp) of W, y_l the matching columns of y;
                   backward: dx = all-reduce(dy_l W_l) (each rank holds part of the sum), dW_l, db_l local
  row-parallel     y = all-reduce(x_l W_l^T)  W_l: columns [r C/tp, (r+1) C/tp), x_l the matching columns of x; the
                   bias (replicated) is added once, after the reduction, by the caller; backward: dx_l = dy W_l, dW_l
                   local, no communication (dy is replicated)
  vocab embedding  out = all-reduce(wte_l[tok] or 0) + wpe: each rank looks up the tokens of its vocabulary slice
  vocab cross-entropy: logits_l = x wte_l^T over the rank's slice; the softmax's maximum and sum of exponentials are
                   combined across ranks (one max and one sum all-reduce of 3 floats per row), never the logits;
                   dx = sum over ranks of dlogits_l wte_l (reduced by the caller), dwte_l local.
  sequence parallel (Megatron's): the replicated region (residual stream, LayerNorms) is split along the tokens, R =
                   BT/tp rows per rank; an all-reduce of a row-parallel output becomes a reduce-scatter of its rows,
                   and the whole rows a column-parallel matmul needs are all-gathered first (same bytes on the wire as
                   one all-reduce, the region's activations cut by tp).
The reductions run on host copies (comm.h's collectives take host memory; on the CPU the copies are plain memory
moves): activations are floatX, reduced in fp32 and rounded once. With --comm nccl (GPU builds) the group's NCCL
communicator (g->nccl) reduces the device buffers instead, the same way (comm_nccl.h).
*/
#ifndef TP_H
#define TP_H

// Sum of buf (n floatX, device) over the group, in place; host: n floats of scratch.
static void tp_allreduce_x(const KernelCtx* ctx, CommGroup* g, floatX* buf, size_t n, float* host) {
    if (g->size == 1) { return; }
    if (g->nccl) { comm_nccl_allreduce_x(g->nccl, ctx, buf, n); return; }
    params_to_f32(ctx, host, buf, n);
    comm_allreduce_sum_f32(g, host, n);
    params_from_f32(ctx, buf, host, n);
}

// Sequence parallelism's two collectives over the rows of (rows, C) floatX tensors, split into g->size equal parts
// of R rows (rank r holds rows [r R, (r+1) R)). host: R C + g->size R C floats of scratch.
// full (size R, C) = the parts of every rank, in rank order.
static void tp_allgather_rows_x(const KernelCtx* ctx, CommGroup* g, float* host, floatX* full, const floatX* part, size_t R, size_t C) {
    if (g->nccl) { comm_nccl_allgather_x(g->nccl, ctx, full, part, R * C); return; }
    float* mine = host;
    float* all = host + R * C;
    params_to_f32(ctx, mine, part, R * C);
    comm_allgather_f32(g, mine, all, R * C);
    params_from_f32(ctx, full, all, (size_t)g->size * R * C);
}

// part (R, C) = this rank's rows of the sum over ranks of full (size R, C): reduced in fp32, rounded once.
static void tp_reduce_scatter_rows_x(const KernelCtx* ctx, CommGroup* g, float* host, floatX* part, const floatX* full, size_t R, size_t C) {
    if (g->nccl) { comm_nccl_reduce_scatter_x(g->nccl, ctx, part, full, R * C); return; }
    float* all = host + R * C;
    float* mine = host;
    params_to_f32(ctx, all, full, (size_t)g->size * R * C);
    comm_reduce_scatter_sum_f32(g, all, mine, R * C);
    params_from_f32(ctx, part, mine, R * C);
}

// Sum of an fp32 device buffer (gradients) over the group, in place; host: n floats of scratch.
static void tp_allreduce_f32(const KernelCtx* ctx, CommGroup* g, float* buf, size_t n, float* host) {
    if (g->size == 1) { return; }
    if (g->nccl) { comm_nccl_allreduce_f32(g->nccl, ctx, buf, n); return; }
    dev_copy_d2h(ctx, host, buf, n * sizeof(float));
    dev_sync(ctx);
    comm_allreduce_sum_f32(g, host, n);
    dev_copy_h2d(ctx, buf, host, n * sizeof(float));
}

// The rows [vocab_lo, vocab_lo + vocab_n) of a vocabulary of Vp rows this rank of g holds (Vp divides by g->size).
static void tp_vocab_slice(const CommGroup* g, int Vp, int* vocab_lo, int* vocab_n) {
    *vocab_n = Vp / g->size;
    *vocab_lo = g->rank * *vocab_n;
}

// out (B,T,C) = wte[tok] + wpe[t] from this rank's vocabulary slice wte_l (vocab_n rows from vocab_lo); wpe (replicated)
// is added by group rank 0 only, so the sum over the group counts it once (an addition of zero: exact).
static void tp_embedding_forward(const KernelCtx* ctx, CommGroup* g, float* host, floatX* out, const int32_t* tok,
                                 const floatX* wte_l, const floatX* wpe, int vocab_lo, int vocab_n, int B, int T, int C) {
    encoder_forward(ctx, out, tok, wte_l, g->rank == 0 ? wpe : NULL, vocab_lo, vocab_n, B, T, C);
    tp_allreduce_x(ctx, g, out, (size_t)B * T * C, host);
}

// dwte_l (+)= for the slice's tokens; dwpe (whole, replicated: every rank computes it from the replicated dout).
static void tp_embedding_backward(const KernelCtx* ctx, float* dwte_l, float* dwpe, const floatX* dout, const int32_t* tok,
                                  int vocab_lo, int vocab_n, int B, int T, int C) {
    encoder_backward(ctx, dwte_l, dwpe, dout, tok, vocab_lo, vocab_n, B, T, C);
}

// y_l (BT, OC_l) = x (BT, C) W_l^T + b_l.
static void tp_column_linear_forward(const KernelCtx* ctx, floatX* y_l, const floatX* x, const floatX* w_l, const floatX* b_l,
                                     int BT, int C, int OC_l) {
    matmul_forward(ctx, y_l, x, w_l, b_l, BT, C, OC_l);
}

// dx (BT, C) = sum over ranks of dy_l W_l (all-reduced); dW_l, db_l (+)= by acc.
static void tp_column_linear_backward(const KernelCtx* ctx, CommGroup* g, float* host, floatX* dx, float* dw_l, float* db_l,
                                      const floatX* dy_l, const floatX* x, const floatX* w_l, int BT, int C, int OC_l, int acc) {
    matmul_backward(ctx, dx, dw_l, db_l, dy_l, x, w_l, BT, C, OC_l, acc);
    tp_allreduce_x(ctx, g, dx, (size_t)BT * C, host);
}

// y (BT, OC) = sum over ranks of x_l (BT, C_l) W_l^T (all-reduced; no bias: the caller adds it once).
static void tp_row_linear_forward(const KernelCtx* ctx, CommGroup* g, float* host, floatX* y, const floatX* x_l, const floatX* w_l,
                                  int BT, int C_l, int OC) {
    matmul_forward(ctx, y, x_l, w_l, NULL, BT, C_l, OC);
    tp_allreduce_x(ctx, g, y, (size_t)BT * OC, host);
}

// dx_l (BT, C_l) = dy W_l; dW_l (+)= dy^T x_l by acc; no communication.
static void tp_row_linear_backward(const KernelCtx* ctx, floatX* dx_l, float* dw_l, const floatX* dy, const floatX* x_l,
                                   const floatX* w_l, int BT, int C_l, int OC, int acc) {
    matmul_backward(ctx, dx_l, dw_l, NULL, dy, x_l, w_l, BT, C_l, OC, acc);
}

// The LM head + cross-entropy over this rank's vocabulary slice wte_l (Vp_l rows from vocab_lo; V real rows in the
// whole vocabulary), chunked over rows like classifier_forward_backward (chunk: chunk_rows x Vp_l floatX). losses
// (BT) are the full losses, the same on every rank. With dx: dx (BT, C) = this rank's part of dloss/dx (the caller
// sums the parts over the group: an all-reduce, or a reduce-scatter under sequence parallelism) and dwte_l (+)= by
// acc. stats: 3 chunk_rows floats (device); host: 3 chunk_rows floats.
// Per row: M = max over ranks of the local maxima m_r; S = sum over ranks of s_r exp(m_r - M) (each s_r is the sum of
// exp(z - m_r) over the rank's columns); the target's logit comes from the rank that holds it.
static void tp_cross_entropy(const KernelCtx* ctx, CommGroup* g, float* host, float* stats, float* losses, floatX* dx,
                             float* dwte_l, floatX* chunk, int chunk_rows, const floatX* x, const floatX* wte_l,
                             const int32_t* targets, float dloss_scale, int vocab_lo, int Vp_l, int V, int BT, int C, int acc) {
    for (int r0 = 0; r0 < BT; r0 += chunk_rows) {
        int rows = BT - r0 < chunk_rows ? BT - r0 : chunk_rows;
        const floatX* xr = x + (size_t)r0 * C;
        matmul_forward(ctx, chunk, xr, wte_l, NULL, rows, C, Vp_l);
        classifier_vp_stats(ctx, stats, chunk, targets + r0, rows, vocab_lo, Vp_l, V);
        if (g->size > 1) {
            dev_copy_d2h(ctx, host, stats, (size_t)3 * rows * sizeof(float));
            dev_sync(ctx);
            double* mx = (double*)mallocCheck(sizeof(double) * (size_t)rows);     // per row: the maximum
            double* st = (double*)mallocCheck(sizeof(double) * 2 * (size_t)rows); // the sum, the target logit
            for (int r = 0; r < rows; r++) { mx[r] = host[3 * r]; }
            comm_allreduce_max_f64(g, mx, (size_t)rows);
            for (int r = 0; r < rows; r++) {
                float m = host[3 * r], M = (float)mx[r];
                // this rank's share of the sum, rescaled to the global maximum (0 if it holds no real column), and its
                // target logit (0 unless it holds the target)
                st[2 * r] = host[3 * r + 1] > 0.0f ? (double)host[3 * r + 1] * exp((double)m - M) : 0.0;
                st[2 * r + 1] = host[3 * r + 2];
                host[3 * r] = M;
            }
            comm_allreduce_sum_f64(g, st, 2 * (size_t)rows);
            for (int r = 0; r < rows; r++) { host[3 * r + 1] = (float)st[2 * r]; host[3 * r + 2] = (float)st[2 * r + 1]; }
            free(mx);
            free(st);
            dev_copy_h2d(ctx, stats, host, (size_t)3 * rows * sizeof(float));
        }
        classifier_vp_apply(ctx, losses + r0, chunk, stats, targets + r0, dloss_scale, rows, vocab_lo, Vp_l, V, dx != NULL);
        if (dx) {
            // dx_r (rows, C) = dlogits_l (rows, Vp_l) wte_l (Vp_l, C), this rank's part; dwte_l (+)= dlogits_l^T x_r
            matmul_backward(ctx, dx + (size_t)r0 * C, dwte_l, NULL, chunk, xr, wte_l, rows, C, Vp_l, acc || r0 > 0);
        }
    }
}

#endif // TP_H
