/*
tests/stage_ops.h: lets test_gpt.c's op tests, written with host arrays of fp32, drive a backend whose buffers live
on a device (the CUDA build, test_gpt_cu). Included after train_gpt.c; in the CUDA build it redirects every kernel
name the tests call to a stager that copies each argument up (floatX ones rounded to the storage type, as the GPU
stores them), runs the real op on the device, and copies every output back. Outputs are copied up too, so "acc"
accumulation, in-place aliasing and NaN-prefilled outputs (which an op must overwrite) mean the same on both
backends. In the CPU build it defines nothing: the tests call the kernels directly.
*/
#ifndef STAGE_OPS_H
#define STAGE_OPS_H

#ifdef KERNELS_CUDA

// Device copies of host arrays, freed by stage_down_* (outputs) or stage_free (inputs).
static floatX* stage_x(const float* host, size_t n) {
    if (!host) { return NULL; }
    floatX* d = (floatX*)dev_alloc(&g_ctx, n * sizeof(floatX));
    params_from_f32(&g_ctx, d, host, n);
    return d;
}
static float* stage_f(const float* host, size_t n) {
    if (!host) { return NULL; }
    float* d = (float*)dev_alloc(&g_ctx, n * sizeof(float));
    dev_copy_h2d(&g_ctx, d, host, n * sizeof(float));
    return d;
}
static int32_t* stage_i(const int32_t* host, size_t n) {
    int32_t* d = (int32_t*)dev_alloc(&g_ctx, n * sizeof(int32_t));
    dev_copy_h2d(&g_ctx, d, host, n * sizeof(int32_t));
    return d;
}
static void stage_down_x(float* host, floatX* d, size_t n) {
    if (!host) { return; }
    params_to_f32(&g_ctx, host, d, n);
    dev_free(&g_ctx, d);
}
static void stage_down_f(float* host, float* d, size_t n) {
    if (!host) { return; }
    dev_copy_d2h(&g_ctx, host, d, n * sizeof(float));
    dev_sync(&g_ctx);
    dev_free(&g_ctx, d);
}
static void stage_free(void* d) { if (d) { dev_free(&g_ctx, d); } }

static void stage_matmul_forward(const KernelCtx* ctx, float* out, const float* inp, const float* w, const float* bias, int BT, int C, int OC) {
    floatX *o = stage_x(out, (size_t)BT * OC), *i = stage_x(inp, (size_t)BT * C), *ww = stage_x(w, (size_t)OC * C), *b = stage_x(bias, OC);
    matmul_forward(ctx, o, i, ww, b, BT, C, OC);
    stage_down_x(out, o, (size_t)BT * OC);
    stage_free(i); stage_free(ww); stage_free(b);
}
static void stage_matmul_backward(const KernelCtx* ctx, float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                                  const float* w, int BT, int C, int OC, int acc) {
    floatX* di = stage_x(dinp, (size_t)BT * C);
    float *dww = stage_f(dw, (size_t)OC * C), *db = stage_f(dbias, OC);
    floatX *d = stage_x(dout, (size_t)BT * OC), *i = stage_x(inp, (size_t)BT * C), *ww = stage_x(w, (size_t)OC * C);
    matmul_backward(ctx, di, dww, db, d, i, ww, BT, C, OC, acc);
    stage_down_x(dinp, di, (size_t)BT * C); stage_down_f(dw, dww, (size_t)OC * C); stage_down_f(dbias, db, OC);
    stage_free(d); stage_free(i); stage_free(ww);
}
static void stage_matmul_forward_gelu(const KernelCtx* ctx, float* pre, float* out, const float* inp, const float* w, const float* bias,
                                      int BT, int C, int OC) {
    floatX *pr = stage_x(pre, (size_t)BT * OC), *o = stage_x(out, (size_t)BT * OC), *i = stage_x(inp, (size_t)BT * C);
    floatX *ww = stage_x(w, (size_t)OC * C), *b = stage_x(bias, OC);
    matmul_forward_gelu(ctx, pr, o, i, ww, b, BT, C, OC);
    stage_down_x(pre, pr, (size_t)BT * OC); stage_down_x(out, o, (size_t)BT * OC);
    stage_free(i); stage_free(ww); stage_free(b);
}
static void stage_matmul_backward_gelu(const KernelCtx* ctx, float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                                       const float* w, const float* pre, int BT, int C, int OC, int acc) {
    floatX* di = stage_x(dinp, (size_t)BT * C);
    float *dww = stage_f(dw, (size_t)OC * C), *db = stage_f(dbias, OC);
    floatX *d = stage_x(dout, (size_t)BT * OC), *i = stage_x(inp, (size_t)BT * C), *ww = stage_x(w, (size_t)OC * C);
    floatX* pr = stage_x(pre, (size_t)BT * C);
    matmul_backward_gelu(ctx, di, dww, db, d, i, ww, pr, BT, C, OC, acc);
    stage_down_x(dinp, di, (size_t)BT * C); stage_down_f(dw, dww, (size_t)OC * C); stage_down_f(dbias, db, OC);
    stage_free(d); stage_free(i); stage_free(ww); stage_free(pr);
}
static void stage_layernorm_forward(const KernelCtx* ctx, float* out, float* mean, float* rstd, const float* inp, const float* w,
                                    const float* b, int BT, int C) {
    size_t n = (size_t)BT * C;
    floatX *o = stage_x(out, n), *i = stage_x(inp, n), *ww = stage_x(w, C), *bb = stage_x(b, C);
    float *m = stage_f(mean, BT), *r = stage_f(rstd, BT);
    layernorm_forward(ctx, o, m, r, i, ww, bb, BT, C);
    stage_down_x(out, o, n); stage_down_f(mean, m, BT); stage_down_f(rstd, r, BT);
    stage_free(i); stage_free(ww); stage_free(bb);
}
static void stage_residual_layernorm_forward(const KernelCtx* ctx, float* res_out, float* out, float* mean, float* rstd, const float* res_in,
                                             const float* delta, const float* bias, const float* w, const float* b, int BT, int C) {
    size_t n = (size_t)BT * C;
    floatX* ro = stage_x(res_out, n);
    floatX* ri = res_in == res_out ? ro : stage_x(res_in, n); // in place when the caller aliases them
    floatX *o = stage_x(out, n), *d = stage_x(delta, n), *bi = stage_x(bias, C), *ww = stage_x(w, C), *bb = stage_x(b, C);
    float *m = stage_f(mean, BT), *r = stage_f(rstd, BT);
    residual_layernorm_forward(ctx, ro, o, m, r, ri, d, bi, ww, bb, BT, C);
    if (ri != ro) { stage_free(ri); }
    stage_down_x(res_out, ro, n); stage_down_x(out, o, n); stage_down_f(mean, m, BT); stage_down_f(rstd, r, BT);
    stage_free(d); stage_free(bi); stage_free(ww); stage_free(bb);
}
static void stage_layernorm_backward(const KernelCtx* ctx, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                     const float* w, const float* mean, const float* rstd, int BT, int C, int acc) {
    size_t n = (size_t)BT * C;
    floatX* di = stage_x(dinp, n);
    float *dww = stage_f(dw, C), *dbb = stage_f(db, C), *m = stage_f(mean, BT), *r = stage_f(rstd, BT);
    floatX *d = stage_x(dout, n), *i = stage_x(inp, n), *ww = stage_x(w, C);
    layernorm_backward(ctx, di, dww, dbb, d, i, ww, m, r, BT, C, acc);
    stage_down_x(dinp, di, n); stage_down_f(dw, dww, C); stage_down_f(db, dbb, C);
    stage_free(m); stage_free(r); stage_free(d); stage_free(i); stage_free(ww);
}
static void stage_gelu_forward(const KernelCtx* ctx, float* out, const float* inp, size_t n) {
    floatX *o = stage_x(out, n), *i = stage_x(inp, n);
    gelu_forward(ctx, o, i, n);
    stage_down_x(out, o, n);
    stage_free(i);
}
static void stage_gelu_backward(const KernelCtx* ctx, float* dinp, const float* inp, const float* dout, size_t n) {
    floatX* di = stage_x(dinp, n);
    floatX* d = dout == dinp ? di : stage_x(dout, n);
    floatX* i = stage_x(inp, n);
    gelu_backward(ctx, di, i, d, n);
    if (d != di) { stage_free(d); }
    stage_down_x(dinp, di, n);
    stage_free(i);
}
static void stage_attention_forward(const KernelCtx* ctx, float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
    size_t n = (size_t)B * T * C;
    floatX *o = stage_x(out, n), *q = stage_x(qkv, 3 * n);
    float* l = stage_f(lse, (size_t)B * NH * T);
    attention_forward(ctx, o, l, q, B, T, C, NH);
    stage_down_x(out, o, n); stage_down_f(lse, l, (size_t)B * NH * T);
    stage_free(q);
}
static void stage_attention_forward_rows(const KernelCtx* ctx, float* out, const float* q, const float* kv, int B, int T, int ld, int q_lo,
                                         int C, int NH) {
    size_t n = (size_t)B * (T - q_lo) * C;
    floatX *o = stage_x(out, n), *qd = stage_x(q, 3 * n), *kvd = stage_x(kv, (size_t)B * ld * 2 * C);
    attention_forward_rows(ctx, o, qd, kvd, B, T, ld, q_lo, C, NH);
    stage_down_x(out, o, n);
    stage_free(qd);
    stage_free(kvd);
}
static void stage_kv_cache_write(const KernelCtx* ctx, float* kv, const float* rows, int S, int B, int n, int pos, int ld, int C) {
    size_t nc = (size_t)B * ld * 2 * C;
    floatX *c = stage_x(kv, nc), *r = stage_x(rows, (size_t)S * n * 3 * C);
    kv_cache_write(ctx, c, r, S, B, n, pos, ld, C);
    stage_down_x(kv, c, nc);
    stage_free(r);
}
static void stage_attention_backward(const KernelCtx* ctx, float* dqkv, const float* dout, const float* qkv, const float* out,
                                     const float* lse, int B, int T, int C, int NH) {
    size_t n = (size_t)B * T * C;
    floatX *dq = stage_x(dqkv, 3 * n), *d = stage_x(dout, n), *q = stage_x(qkv, 3 * n), *o = stage_x(out, n);
    float* l = stage_f(lse, (size_t)B * NH * T);
    attention_backward(ctx, dq, d, q, o, l, B, T, C, NH);
    stage_down_x(dqkv, dq, 3 * n);
    stage_free(d); stage_free(q); stage_free(o); stage_free(l);
}
static void stage_encoder_forward(const KernelCtx* ctx, float* out, const int32_t* tok, const float* wte, const float* wpe, int B, int T, int C,
                                  int V, int maxT) {
    size_t n = (size_t)B * T * C;
    floatX *o = stage_x(out, n), *we = stage_x(wte, (size_t)V * C), *pe = stage_x(wpe, (size_t)maxT * C);
    int32_t* t = stage_i(tok, (size_t)B * T);
    encoder_forward(ctx, o, t, we, pe, 0, V, B, T, C);
    stage_down_x(out, o, n);
    stage_free(we); stage_free(pe); stage_free(t);
}
static void stage_encoder_backward(const KernelCtx* ctx, float* dwte, float* dwpe, const float* dout, const int32_t* tok, int B, int T, int C,
                                   int V, int maxT) {
    float *we = stage_f(dwte, (size_t)V * C), *pe = stage_f(dwpe, (size_t)maxT * C);
    floatX* d = stage_x(dout, (size_t)B * T * C);
    int32_t* t = stage_i(tok, (size_t)B * T);
    encoder_backward(ctx, we, pe, d, t, 0, V, B, T, C);
    stage_down_f(dwte, we, (size_t)V * C); stage_down_f(dwpe, pe, (size_t)maxT * C);
    stage_free(d); stage_free(t);
}
static void stage_classifier_forward_backward(const KernelCtx* ctx, float* losses, float* dx, float* dwte, float* chunk, int chunk_rows,
                                              const float* x, const float* wte, const int32_t* targets, float dloss_scale, int BT, int C,
                                              int V, int Vp, int acc) {
    float* l = stage_f(losses, BT);
    floatX *dxx = stage_x(dx, (size_t)BT * C), *ch = stage_x(chunk, (size_t)chunk_rows * Vp);
    float* dw = stage_f(dwte, (size_t)Vp * C);
    floatX *xx = stage_x(x, (size_t)BT * C), *w = stage_x(wte, (size_t)Vp * C);
    int32_t* t = stage_i(targets, BT);
    classifier_forward_backward(ctx, l, dxx, dw, ch, chunk_rows, xx, w, t, dloss_scale, BT, C, V, Vp, acc);
    stage_down_f(losses, l, BT); stage_down_x(dx, dxx, (size_t)BT * C); stage_down_f(dwte, dw, (size_t)Vp * C);
    stage_free(ch); stage_free(xx); stage_free(w); stage_free(t);
}
static void stage_adamw_update(const KernelCtx* ctx, float* params, float* master, const float* grads, float* m, float* v, size_t lo, size_t hi,
                               const AdamWSegment* segs, int nseg, const AdamWHyper* hp) {
    size_t n = hi - lo;
    floatX* p = stage_x(params, n);
    float *ms = stage_f(master, n), *g = stage_f(grads, n), *mm = stage_f(m, n), *vv = stage_f(v, n);
    adamw_update(ctx, p, ms, g, mm, vv, lo, hi, segs, nseg, hp);
    stage_down_x(params, p, n); stage_down_f(master, ms, n); stage_down_f(m, mm, n); stage_down_f(v, vv, n);
    stage_free(g);
}

// the two-pass sums: acc is one device double, copied up and back; x lands at the same place in a 16-byte pack as
// the host's x (a ZeRO shard of the gradients may start anywhere: the kernel takes the floats before its first pack
// one at a time)
static void stage_sum(const KernelCtx* ctx, double* acc, const float* x, size_t n, int squares) {
    size_t off = ((uintptr_t)x & 15) / sizeof(float);
    float* base = (float*)dev_alloc(&g_ctx, (n + off) * sizeof(float));
    dev_copy_h2d(&g_ctx, base + off, x, n * sizeof(float));
    double* ad = (double*)dev_alloc(&g_ctx, sizeof(double));
    dev_copy_h2d(&g_ctx, ad, acc, sizeof(double));
    if (squares) { sum_squares_accumulate(ctx, ad, base + off, n); } else { sum_accumulate(ctx, ad, base + off, n); }
    dev_copy_d2h(&g_ctx, acc, ad, sizeof(double));
    dev_sync(&g_ctx);
    dev_free(&g_ctx, ad);
    dev_free(&g_ctx, base);
}
static void stage_sum_accumulate(const KernelCtx* ctx, double* acc, const float* x, size_t n) { stage_sum(ctx, acc, x, n, 0); }
static void stage_sum_squares_accumulate(const KernelCtx* ctx, double* acc, const float* x, size_t n) { stage_sum(ctx, acc, x, n, 1); }

#define matmul_forward stage_matmul_forward
#define matmul_backward stage_matmul_backward
#define matmul_forward_gelu stage_matmul_forward_gelu
#define matmul_backward_gelu stage_matmul_backward_gelu
#define layernorm_forward stage_layernorm_forward
#define residual_layernorm_forward stage_residual_layernorm_forward
#define layernorm_backward stage_layernorm_backward
#define gelu_forward stage_gelu_forward
#define gelu_backward stage_gelu_backward
#define attention_forward stage_attention_forward
#define attention_backward stage_attention_backward
#define attention_forward_rows stage_attention_forward_rows
#define kv_cache_write stage_kv_cache_write
#define classifier_forward_backward stage_classifier_forward_backward
#define adamw_update stage_adamw_update
#define sum_accumulate stage_sum_accumulate
#define sum_squares_accumulate stage_sum_squares_accumulate
// the encoder's stagers need the table sizes, which the kernels do not take: the tests pass them
#define ENCODER_FORWARD(ctx, out, tok, wte, wpe, B, T, C, V, maxT) stage_encoder_forward(ctx, out, tok, wte, wpe, B, T, C, V, maxT)
#define ENCODER_BACKWARD(ctx, dwte, dwpe, dout, tok, B, T, C, V, maxT) stage_encoder_backward(ctx, dwte, dwpe, dout, tok, B, T, C, V, maxT)

#else

#define ENCODER_FORWARD(ctx, out, tok, wte, wpe, B, T, C, V, maxT) encoder_forward(ctx, out, tok, wte, wpe, 0, V, B, T, C)
#define ENCODER_BACKWARD(ctx, dwte, dwpe, dout, tok, B, T, C, V, maxT) encoder_backward(ctx, dwte, dwpe, dout, tok, 0, V, B, T, C)

#endif // KERNELS_CUDA
#endif // STAGE_OPS_H
