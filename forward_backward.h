/*
forward_backward.h: the forward and backward passes of the model (train_gpt.c, split out by topic): blocks, pipeline
chunks, activation recomputation, the LM head and its loss, and the backward that hands each bucket of gradients to
the data-parallel reduction as soon as it is final. The tensor-parallel collectives enter at the two points where
the replicated region meets the split one (tp_enter, tp_leave). The model they act on is in model.h.
Not a standalone header: train_gpt.c includes it after model.h.
*/
#ifndef FORWARD_BACKWARD_H
#define FORWARD_BACKWARD_H

// ----------------------------------------------------------------------------
// Forward pass: tokens (B,T) -> lnf (B,T,C). The last LayerNorm of each layer is fused with its residual add:
// residual3[l] = residual2[l] + proj + fcprojb, and LN of it (ln1 of layer l+1, or lnf) in the same pass.

// Layer l's activations (the slots of its families, see the activation table).
typedef struct {
    const floatX* in;    // (R,C) the block's input: encoded, or residual3 of layer l-1 (always kept)
    floatX *ln1, *qkv, *atty, *res2, *ln2, *fch, *fchg;
    float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
} BlockActs;

// Rows of the residual stream this rank holds for the last forward: all B*T, or 1/tp of them under sequence
// parallelism.
static int gpt_rows(const GPT* m) { return m->sp ? m->B * m->T / m->tp : m->B * m->T; }

static BlockActs block_acts(GPT* m, int l) {
    Activations* a = &m->acts;
    size_t BT = (size_t)m->B * m->T, R = (size_t)gpt_rows(m), C = m->cfg.channels;
    size_t Ct = C / m->tp, NHt = (size_t)m->cfg.num_heads / m->tp;
    int li = l - m->chunk_lo; // the block's index in its chunk (and the slot's families)
    size_t s1 = act_slot(a->L1, li), s2 = act_slot(a->L2, li);
    BlockActs b;
    b.in = li == 0 ? a->encoded : a->residual3 + (size_t)(li - 1) * R * C;
    b.ln1 = a->ln1 + s1 * R * C;
    b.ln1_mean = a->ln1_mean + s2 * R;
    b.ln1_rstd = a->ln1_rstd + s2 * R;
    b.qkv = a->qkv + s2 * BT * 3 * Ct;
    b.atty = a->atty + s2 * BT * Ct;
    b.lse = a->att_lse + s2 * lse_stride(NHt * BT);
    b.res2 = a->residual2 + s2 * R * C;
    b.ln2 = a->ln2 + s1 * R * C;
    b.ln2_mean = a->ln2_mean + s2 * R;
    b.ln2_rstd = a->ln2_rstd + s2 * R;
    b.fch = a->fch + s2 * BT * 4 * Ct;
    b.fchg = a->fch_gelu + s1 * BT * 4 * Ct;
    return b;
}

// The two points where the replicated (or sequence-parallel) region meets the tensor-parallel one.
// Entering: the whole rows (B*T, C) of x for a column-parallel matmul: x itself, or under sequence parallelism the
// rows of every rank all-gathered into `gathered` (valid until the next call).
static const floatX* tp_enter(GPT* m, const floatX* x) {
    if (!m->sp) { return x; }
    kernels_range_push(&m->ctx, "all-gather rows (sequence parallel)");
    tp_allgather_rows_x(&m->ctx, m->tp_group, m->acts.host, m->acts.gathered, x, (size_t)gpt_rows(m), (size_t)m->cfg.channels);
    kernels_range_pop(&m->ctx);
    return m->acts.gathered;
}

// Leaving: y (B*T, C) holds this rank's part of a sum over the group (a row-parallel output, or the input gradient
// of a column-parallel matmul); out receives the sum: all-reduced in place (out == y), or under sequence
// parallelism this rank's R rows of it, reduce-scattered (out may be y). Nothing to do with tp 1.
static void tp_leave(GPT* m, floatX* out, floatX* y) {
    if (m->tp == 1) { return; }
    size_t C = (size_t)m->cfg.channels;
    kernels_range_push(&m->ctx, m->sp ? "reduce-scatter rows (sequence parallel)" : "all-reduce (tensor parallel)");
    if (m->sp) { tp_reduce_scatter_rows_x(&m->ctx, m->tp_group, m->acts.host, out, y, (size_t)gpt_rows(m), C); }
    else { tp_allreduce_x(&m->ctx, m->tp_group, y, (size_t)m->B * m->T * C, m->acts.host); }
    kernels_range_pop(&m->ctx);
}

// Block l from its ln1 (already computed) through the MLP's GELU; with `finish`, also the MLP projection, the
// residual add into residual3[l] and the next LayerNorm (ln1 of layer l+1, or lnf). Without it, this is the
// recomputation --recompute 2 runs in backward: the same kernels on the same inputs, so the same bits.
// Tensor parallel (Megatron): qkv and fc are column-parallel (this rank's heads, its quarter of the MLP), the two
// projections row-parallel (partial sums, reduced by tp_leave before the bias, residual and LayerNorm).
static void block_forward(GPT* m, int l, int finish) {
    Activations* a = &m->acts;
    const GPTConfig* g = &m->cfg;
    int B = m->B, T = m->T, BT = B * T, R = gpt_rows(m), C = g->channels, L = g->num_layers;
    int Ct = C / m->tp, NHt = g->num_heads / m->tp;
    LayerParams* w = &m->p.layers[l];
    BlockActs b = block_acts(m, l);
    char range[32];
    snprintf(range, sizeof(range), "%s layer %d", finish ? "forward" : "recompute", l);
    kernels_range_push(&m->ctx, range);
    // ZeRO-3: this layer's parameters are ready; the next layer's (its LayerNorm ends this block) start to travel
    z3_use(m, l, -1);
    if (finish && l + 1 < m->chunk_hi) { z3_fetch(m, l + 1, l); }
    matmul_forward(&m->ctx, b.qkv, tp_enter(m, b.ln1), w->qkvw, w->qkvb, BT, C, 3 * Ct);
    z3_progress(m);
    if (m->kv) {
        // sampling with a KV cache: this forward's keys and values go after the cached ones (the prompt's, of one
        // sequence, into every sequence), and its queries attend to both
        KvCache* kv = m->kv;
        floatX* cache = kv->base + (size_t)m->layout.layer_slot[l] * kv->B * kv->T_max * 2 * Ct;
        kv_cache_write(&m->ctx, cache, b.qkv, B, B == 1 ? kv->B : B, T, kv->pos, kv->T_max, Ct);
        attention_forward_rows(&m->ctx, b.atty, b.qkv, cache, B, kv->pos + T, kv->T_max, kv->pos, Ct, NHt);
    } else {
        attention_forward(&m->ctx, b.atty, b.lse, b.qkv, B, T, Ct, NHt);
    }
    z3_progress(m);
    matmul_forward(&m->ctx, a->proj, b.atty, w->attprojw, NULL, BT, Ct, C);
    tp_leave(m, a->proj, a->proj);
    residual_layernorm_forward(&m->ctx, b.res2, b.ln2, b.ln2_mean, b.ln2_rstd, b.in, a->proj, w->attprojb, w->ln2w, w->ln2b, R, C);
    const floatX* ln2 = tp_enter(m, b.ln2);
    if (a->recompute == 1) {
        // the GELU output is recomputed from the kept pre-activation before the backward, so it is made that way here
        // too: a fused GELU (a GPU's matmul epilogue) reads the sum before it is rounded into fch, and would differ
        matmul_forward(&m->ctx, b.fch, ln2, w->fcw, w->fcb, BT, C, 4 * Ct);
        gelu_forward(&m->ctx, b.fchg, b.fch, (size_t)BT * 4 * Ct);
    } else {
        matmul_forward_gelu(&m->ctx, b.fch, b.fchg, ln2, w->fcw, w->fcb, BT, C, 4 * Ct);
    }
    if (!finish) { kernels_range_pop(&m->ctx); return; }
    floatX* res3 = a->residual3 + (size_t)(l - m->chunk_lo) * R * C;
    matmul_forward(&m->ctx, a->proj, b.fchg, w->fcprojw, NULL, BT, 4 * Ct, C);
    tp_leave(m, a->proj, a->proj);
    if (l + 1 < L && l + 1 == m->chunk_hi) {
        // the chunk's last block before the pipeline's next stage: the residual is its output, and the LayerNorm
        // (into the slot's unused lnf) is recomputed there from it
        residual_layernorm_forward(&m->ctx, res3, a->lnf, a->lnf_mean, a->lnf_rstd, b.res2, a->proj, w->fcprojb, w->ln1w, w->ln1b, R, C);
    } else if (l + 1 < L) {
        z3_use(m, l + 1, l);
        LayerParams* nw = &m->p.layers[l + 1];
        BlockActs nb = block_acts(m, l + 1);
        residual_layernorm_forward(&m->ctx, res3, nb.ln1, nb.ln1_mean, nb.ln1_rstd, b.res2, a->proj, w->fcprojb, nw->ln1w, nw->ln1b, R, C);
    } else {
        residual_layernorm_forward(&m->ctx, res3, a->lnf, a->lnf_mean, a->lnf_rstd, b.res2, a->proj, w->fcprojb, m->p.lnfw, m->p.lnfb, R, C);
    }
    kernels_range_pop(&m->ctx);
}

// Makes global pipeline chunk g the one being run (its blocks).
static void gpt_set_chunk(GPT* m, int g) {
    m->chunk_lo = m->layout.chunk_first[g];
    m->chunk_hi = m->layout.chunk_first[g + 1];
}

// Forward of global chunk g for a micro-batch of (B,T) into the current activations. Chunk 0 embeds host_tokens
// ((B,T) in host memory, copied to the device first); any other chunk starts from a->encoded, the previous chunk's
// output. Under tensor parallelism every rank looks up the tokens of its vocabulary rows (the others give zero) and
// rank 0 adds the position embedding; the sum over the group (tp_leave) is the embedding, exactly: each element is
// one nonzero term plus zeros.
static void gpt_forward_chunk(GPT* m, int g, const int32_t* host_tokens, int B, int T) {
    const GPTConfig* gc = &m->cfg;
    Activations* a = &m->acts;
    int C = gc->channels, BT = B * T;
    if (B * T > a->B * a->T || T > a->T) { fatal("internal: forward (%d,%d) larger than the activations (%d,%d)", B, T, a->B, a->T); }
    if (m->sp && BT % m->tp != 0) { fatal("internal: sequence-parallel forward of %d tokens over %d ranks", BT, m->tp); }
    m->B = B;
    m->T = T;
    gpt_set_chunk(m, g);
    if (m->kv && (B > m->kv->B || m->sp || m->kv->pos < 0 || m->kv->pos + T > m->kv->T_max)) {
        fatal("internal: a forward of (%d,%d) at position %d with a KV cache of %d x %d positions", B, T, m->kv->pos, m->kv->B, m->kv->T_max);
    }
    int R = gpt_rows(m);
    if (g == 0) {
        z3_resident(m); // ZeRO-3: the embeddings (and the final LayerNorm, for the head)
        dev_copy_h2d(&m->ctx, a->tokens, host_tokens, (size_t)BT * sizeof(int32_t));
        floatX* emb = m->sp ? a->proj : a->encoded; // the whole rows, before the reduce-scatter
        // (with a KV cache the tokens sit at positions [pos, pos + T): their position embeddings are wpe's rows from pos)
        // (or from the position the kernels read at run time, KernelCtx.dec_pos: a decoding step recorded as a graph)
        const floatX* wpe = m->tp_rank != 0 ? NULL : m->kv && !m->ctx.dec_pos ? m->p.wpe + (size_t)m->kv->pos * C : m->p.wpe;
        encoder_forward(&m->ctx, emb, a->tokens, m->p.wte, wpe, m->vocab_lo, m->vocab_n, B, T, C);
        tp_leave(m, a->encoded, emb);
    }
    BlockActs b0 = block_acts(m, m->chunk_lo);
    LayerParams* w0 = &m->p.layers[m->chunk_lo];
    z3_use(m, m->chunk_lo, -1);
    layernorm_forward(&m->ctx, b0.ln1, b0.ln1_mean, b0.ln1_rstd, a->encoded, w0->ln1w, w0->ln1b, R, C);
    for (int l = m->chunk_lo; l < m->chunk_hi; l++) { block_forward(m, l, 1); }
}

// The whole model's forward (no pipeline: this rank holds every block).
static void gpt_forward(GPT* m, const int32_t* host_tokens, int B, int T) {
    if (m->pp > 1) { fatal("internal: gpt_forward on a pipeline stage"); }
    gpt_forward_chunk(m, 0, host_tokens, B, T);
}

// Before layer l's backward: brings back what --recompute dropped. Mode 1 recomputes the LayerNorm outputs from the
// kept statistics and the GELU output from the kept pre-activation; mode 2 reruns the block's forward from its
// input (LayerNorm statistics included). Either way the values are the forward's, bit for bit.
static void block_recompute(GPT* m, int l) {
    Activations* a = &m->acts;
    if (a->recompute == 0) { return; }
    int BT = m->B * m->T, R = gpt_rows(m), C = m->cfg.channels;
    LayerParams* w = &m->p.layers[l];
    BlockActs b = block_acts(m, l);
    if (a->recompute == 1) {
        layernorm_apply(&m->ctx, b.ln1, b.in, b.ln1_mean, b.ln1_rstd, w->ln1w, w->ln1b, R, C);
        layernorm_apply(&m->ctx, b.ln2, b.res2, b.ln2_mean, b.ln2_rstd, w->ln2w, w->ln2b, R, C);
        gelu_forward(&m->ctx, b.fchg, b.fch, (size_t)BT * 4 * C / m->tp);
        return;
    }
    layernorm_forward(&m->ctx, b.ln1, b.ln1_mean, b.ln1_rstd, b.in, w->ln1w, w->ln1b, R, C);
    block_forward(m, l, 0);
}

// Zeroes the device's loss sum without reading it (no synchronisation).
static void gpt_clear_loss_sum(GPT* m) { dev_zero(&m->ctx, m->acts.scalars, sizeof(double)); }

// The sum of the token losses accumulated on the device since the last call (one read-back), then reset.
static double gpt_take_loss_sum(GPT* m) {
    double s;
    dev_copy_d2h(&m->ctx, &s, m->acts.scalars, sizeof(double));
    dev_sync(&m->ctx);
    gpt_clear_loss_sum(m);
    return s;
}

// The LM head (tied to wte) and the cross-entropy of the last forward against the device targets: token losses
// into a->losses; with dx, dx (B*T, C) = this rank's part of dloss/dlnf (all of it with tp 1) and dwte (+)= by acc.
// Under tensor parallelism the vocabulary is split: the softmax's statistics are combined across the group, never
// the logits.
static void gpt_lm_head(GPT* m, floatX* dx, float dloss_scale, int acc) {
    Activations* a = &m->acts;
    const GPTConfig* g = &m->cfg;
    int BT = m->B * m->T;
    const floatX* lnf = tp_enter(m, a->lnf);
    if (m->tp == 1) {
        classifier_forward_backward(&m->ctx, a->losses, dx, dx ? m->g.wte : NULL, a->logits, a->chunk_rows, lnf, m->p.wte,
                                    a->targets, dloss_scale, BT, g->channels, g->vocab_size, g->padded_vocab_size, acc);
    } else {
        tp_cross_entropy(&m->ctx, m->tp_group, a->host, a->ce_stats, a->losses, dx, dx ? m->g.wte : NULL, a->logits, a->chunk_rows,
                         lnf, m->p.wte, a->targets, dloss_scale, m->vocab_lo, m->vocab_n, g->vocab_size, BT, g->channels, acc);
    }
    sum_accumulate(&m->ctx, a->scalars, a->losses, (size_t)BT);
}

// Adds the token losses of the last forward against host_targets (B,T) to the device's loss sum, without gradients.
static void gpt_eval_loss(GPT* m, const int32_t* host_targets) {
    dev_copy_h2d(&m->ctx, m->acts.targets, host_targets, (size_t)m->B * m->T * sizeof(int32_t));
    gpt_lm_head(m, NULL, 0.0f, 0);
}

// ----------------------------------------------------------------------------
// Backward pass, fused with the LM head: computes the loss of the last forward and ACCUMULATES parameter gradients
// of (dloss_scale * sum of token losses). Gradient buckets, in the order they become final: lnf, layer L-1, ...,
// layer 0, then the embeddings (wte also receives the LM head's gradient at the start). When `reduce` is set,
// each bucket's reduction is started as soon as it is final, overlapping with the rest of the backward.
// Bucket ids: 0 embeddings [0, embed_size), 1 + l layer l, L + 1 the final LayerNorm.

typedef struct {
    ZeroOptimizer* z;   // NULL: no reduction (single process)
    int reduce;         // start reductions during this backward
    int first_micro;    // first micro-step of the optimizer step: gradients are overwritten, not accumulated
    int last_micro;     // last micro-step: the accumulated gradients are final after this backward
} BackwardComm;

// Whether this rank holds bucket's tensors (pipeline stages hold some of them).
static int gpt_has_bucket(const GPT* m, int bucket) {
    const ParamLayout* pl = &m->layout;
    int L = m->cfg.num_layers;
    if (bucket == 0) { return pl->embed_size > 0; }
    if (bucket <= L) { return pl->layer_slot[bucket - 1] >= 0; }
    return pl->has_lnf;
}

static void bucket_range(const GPT* m, int bucket, size_t* lo, size_t* hi) {
    const ParamLayout* pl = &m->layout;
    int L = m->cfg.num_layers;
    if (bucket == 0) { *lo = 0; *hi = pl->embed_size; }
    else if (bucket <= L) { *lo = pl->embed_size + pl->layer_size * (size_t)pl->layer_slot[bucket - 1]; *hi = *lo + pl->layer_size; }
    else { *lo = pl->lnf_offset; *hi = pl->num_params; }
}

// Makes bucket's gradient region writable: in stage 2 the region is reused, so its previous reduction must be
// complete (the backward then overwrites it: every micro-step is a first one for the arena's layers), and so must
// this bucket's previous reduction (whose share of the running shard the next one adds to). Layers take the two
// layer slots in turn; a slot's previous layer's reduction must be complete before it is reused.
static void grad_bucket_acquire(GPT* m, BackwardComm* bc, int bucket) {
    if (!m->grad_arena) { return; }
    zero_wait_bucket(bc->z, bucket);
    int L = m->cfg.num_layers;
    if (bucket >= 1 && bucket <= L) {
        int slot = m->arena_next;
        m->arena_next ^= 1;
        if (m->arena_owner[slot] >= 0) { zero_wait_bucket(bc->z, m->arena_owner[slot]); }
        m->arena_owner[slot] = bucket;
        grad_views_bind_layer(&m->g, &m->layout, bucket - 1, gpt_grad_slot(m, slot));
    }
}

// Where a bucket's gradients live: in the full flat buffer, or in its stage-2 arena region.
static float* grad_bucket_data(GPT* m, int bucket, size_t lo) {
    int L = m->cfg.num_layers;
    if (!m->grad_arena) { return m->grads + lo; }
    if (bucket == 0) { return m->g.wte ? m->g.wte : m->g.wpe; }
    if (bucket <= L) { return m->g.layers[bucket - 1].ln1w; } // the slot it is bound to (ln1w is a layer's first tensor)
    return m->g.lnfw;
}

static void grad_bucket_release(GPT* m, BackwardComm* bc, int bucket) {
    if (!bc->z || !bc->reduce) { return; }
    size_t lo, hi;
    bucket_range(m, bucket, &lo, &hi);
    zero_bucket_ready(bc->z, bucket, grad_bucket_data(m, bucket, lo), lo, hi, bc->first_micro);
    zero_progress(bc->z);
}

// MPI advances non-blocking collectives only inside MPI calls: poke the in-flight reductions between kernels.
static void backward_progress(BackwardComm* bc) {
    if (bc->z && bc->z->num_pending > 0) { zero_progress(bc->z); }
}

// Sequence parallelism leaves each rank with the LayerNorm weights' gradients of its own rows only: their sum over
// the group is the gradient. Summed once the gradients of the step are final (the last micro-step; every micro-step
// in the stage-2 arena, whose gradients are reduced every micro-step), so accumulated parts are summed once.
static void tp_sum_partial_grads(GPT* m, BackwardComm* bc, float* g, size_t n) {
    if (!m->sp || !(bc->last_micro || m->grad_arena)) { return; }
    tp_allreduce_f32(&m->ctx, m->tp_group, g, n, m->acts.host);
}

// Backward of global chunk g (the last forward through it, in the current activations), ACCUMULATING parameter
// gradients as described above. The last chunk starts from the loss: the LM head on host_targets ((B,T) in host
// memory), its token losses added to the device's loss sum (gpt_take_loss_sum); any other chunk starts from a->dres,
// the gradient of its output (received from the next chunk). Ends with a->dres the gradient of the chunk's input
// (for the caller to send to the previous chunk), or, for chunk 0, with the embeddings' backward. Under pipeline
// parallelism the embedding bucket is left for the caller, which first sums the tied wte's two gradients.
// Tensor parallel: the conjugates of the forward's collectives. A column-parallel matmul's input gradient is a
// partial sum (tp_leave reduces it); a row-parallel one needs the whole output gradient, which every rank holds
// (or gathers, under sequence parallelism: tp_enter).
static void gpt_backward_chunk(GPT* m, int gchunk, const int32_t* host_targets, float dloss_scale, BackwardComm* bc) {
    const GPTConfig* g = &m->cfg;
    Activations* a = &m->acts;
    int B = m->B, T = m->T, L = g->num_layers, C = g->channels, BT = B * T, R = gpt_rows(m);
    int Ct = C / m->tp, NHt = g->num_heads / m->tp;
    size_t rc = (size_t)R * C;
    gpt_set_chunk(m, gchunk);
    // parameter gradients: overwritten on the first micro-step (and always in the reused stage-2 arena), else +=;
    // a pipeline reduces the embeddings once, after the last micro-batch, so they accumulate in the arena too
    int acc = !bc->first_micro && !m->grad_arena;
    int acc_embed = m->pp > 1 ? !bc->first_micro : acc;
    if (m->chunk_hi == L) {
        // LM head + cross-entropy + their backward: dtmp = dloss/dlnf, dwte (+)= ...
        grad_bucket_acquire(m, bc, 0);
        kernels_range_push(&m->ctx, "LM head");
        dev_copy_h2d(&m->ctx, a->targets, host_targets, (size_t)BT * sizeof(int32_t));
        gpt_lm_head(m, a->dtmp, dloss_scale, acc_embed);
        tp_leave(m, a->dtmp, a->dtmp);
        kernels_range_pop(&m->ctx);
        // final LayerNorm
        grad_bucket_acquire(m, bc, L + 1);
        dev_zero(&m->ctx, a->dres, rc * sizeof(floatX));
        layernorm_backward(&m->ctx, a->dres, m->g.lnfw, m->g.lnfb, a->dtmp, a->residual3 + (size_t)(L - 1 - m->chunk_lo) * rc,
                           m->p.lnfw, a->lnf_mean, a->lnf_rstd, R, C, acc);
        tp_sum_partial_grads(m, bc, m->g.lnfw, 2 * (size_t)C); // lnfw, lnfb
        grad_bucket_release(m, bc, L + 1);
    }
    for (int l = m->chunk_hi - 1; l >= m->chunk_lo; l--) {
        grad_bucket_acquire(m, bc, 1 + l);
        char range[32];
        snprintf(range, sizeof(range), "backward layer %d", l);
        kernels_range_push(&m->ctx, range);
        // ZeRO-3: this layer's parameters (still in a slot after the forward, for the last layer), and the gather of
        // the layer below, which travels during this backward
        z3_use(m, l, -1);
        if (l > m->chunk_lo) { z3_fetch(m, l - 1, l); }
        block_recompute(m, l);
        LayerParams* w = &m->p.layers[l];
        LayerGrads* dw = &m->g.layers[l];
        BlockActs b = block_acts(m, l);
        // MLP: dres is the gradient of residual3 = res2 + fcproj(gelu(fc(ln2)))
        // (the GELU's backward fused into the one of fcproj: dfch = GELU'(fch) * (dres @ fcprojw))
        matmul_backward_gelu(&m->ctx, a->dfch, dw->fcprojw, dw->fcprojb, tp_enter(m, a->dres), b.fchg, w->fcprojw, b.fch, BT, 4 * Ct, C, acc);
        backward_progress(bc);
        matmul_backward(&m->ctx, a->dtmp, dw->fcw, dw->fcb, a->dfch, tp_enter(m, b.ln2), w->fcw, BT, C, 4 * Ct, acc);
        tp_leave(m, a->dtmp, a->dtmp);
        backward_progress(bc);
        layernorm_backward(&m->ctx, a->dres, dw->ln2w, dw->ln2b, a->dtmp, b.res2, w->ln2w,
                           b.ln2_mean, b.ln2_rstd, R, C, acc);
        // attention: dres is now the gradient of residual2 = in + attproj(attention(qkv(ln1)))
        matmul_backward(&m->ctx, a->dtmp, dw->attprojw, dw->attprojb, tp_enter(m, a->dres), b.atty, w->attprojw, BT, Ct, C, acc);
        backward_progress(bc);
        attention_backward(&m->ctx, a->dqkv, a->dtmp, b.qkv, b.atty, b.lse, B, T, Ct, NHt);
        backward_progress(bc);
        z3_progress(m);
        matmul_backward(&m->ctx, a->dtmp, dw->qkvw, dw->qkvb, a->dqkv, tp_enter(m, b.ln1), w->qkvw, BT, C, 3 * Ct, acc);
        tp_leave(m, a->dtmp, a->dtmp);
        layernorm_backward(&m->ctx, a->dres, dw->ln1w, dw->ln1b, a->dtmp, b.in, w->ln1w,
                           b.ln1_mean, b.ln1_rstd, R, C, acc);
        tp_sum_partial_grads(m, bc, dw->ln1w, 2 * (size_t)C); // ln1w, ln1b
        tp_sum_partial_grads(m, bc, dw->ln2w, 2 * (size_t)C); // ln2w, ln2b
        kernels_range_pop(&m->ctx);
        grad_bucket_release(m, bc, 1 + l);
    }
    backward_progress(bc);
    if (gchunk > 0) { return; }
    // the encoder scatters into dwte (already written by the LM head above, unless the head is on another pipeline
    // stage) and into dwpe, which start from zero on the first micro-step: all rows, since rows past T get no
    // gradient and an in-place reduce-scatter (ZeRO-1) may have left unowned parts of the buffer undefined. Every
    // rank of a tensor-parallel group holds the whole residual gradient (or gathers it), so each computes the whole
    // dwpe, identical across the group.
    if (!acc_embed) { dev_zero(&m->ctx, m->g.wpe, sizeof(float) * g->max_seq_len * C); }
    if (!acc_embed && m->pp > 1) { dev_zero(&m->ctx, m->g.wte, sizeof(float) * (size_t)m->vocab_n * C); }
    encoder_backward(&m->ctx, m->g.wte, m->g.wpe, tp_enter(m, a->dres), a->tokens, m->vocab_lo, m->vocab_n, B, T, C);
    if (m->pp == 1) { grad_bucket_release(m, bc, 0); }
}

// The whole model's backward after gpt_forward (no pipeline).
static void gpt_forward_backward(GPT* m, const int32_t* host_targets, float dloss_scale, BackwardComm* bc) {
    if (m->pp > 1) { fatal("internal: gpt_forward_backward on a pipeline stage"); }
    gpt_backward_chunk(m, 0, host_targets, dloss_scale, bc);
}

#endif // FORWARD_BACKWARD_H
