/*
zero3.h: ZeRO stage 3 in the trainer (train_gpt.c, split out by topic): which parameters are gathered when, and where
they live while they are used.

Under --zero 3 a rank keeps only the compute copy of its owned range of the flat layout (zero.h), so before a tensor
is used its values are gathered from the ranks that own its parts. The gathered tensors live in a small arena shaped
like the stage-2 gradient arena:

  [wte+wpe | lnfw+lnfb | layer slot 0 | layer slot 1]

- The embeddings and the final LayerNorm ("resident") are gathered once after each update, at the first forward
  that needs them, and stay for the step: the embedding forward and the LM head (forward and backward) use them, and
  a forward of the whole model touches them twice, so gathering them again would cost bandwidth and save nothing.
- The layers take the two slots in turn. The forward of block l needs layer l and, at its end, layer l+1 (its
  residual add is fused with the next block's first LayerNorm), so l+1's gather starts when block l starts and is
  waited for at its end: the next layer's parameters travel while the current one computes. The backward walks
  down: layer l-1's gather overlaps layer l's backward. A slot still holding the right layer is used again without a
  gather (the last layer of the forward is the first of the backward; the first of the backward is the first of the
  next micro-step's forward).
- A slot taken by another layer unbinds the views of the layer it held (NULL), so a use of a dropped layer fails
  loudly instead of reading another layer's values. Every gathered copy is stale after the update (z3_invalidate).

Peak parameter memory per rank is then S + embeddings + final LayerNorm + 2 layers, instead of the whole model
(gpt_param_floats); gradients are as in stage 2 (the same arena shape, fp32) and the optimizer state is sharded.
*/
#ifndef ZERO3_H
#define ZERO3_H

// Starts gathering flat range [lo, hi) into the arena at `dest` (and through the arena's host mirror when staged).
static void z3__gather(GPT* m, floatX* dest, size_t lo, size_t hi, ZeroGather* g) {
    void* host = m->param_host ? (char*)m->param_host + (size_t)(dest - m->param_arena) * sizeof(floatX) : NULL;
    zero_igather_range(m->z3, m->params, dest, host, lo, hi, g);
}

// After the parameters change (the update): every gathered copy is stale. No gather may be in flight then.
static void z3_invalidate(GPT* m) {
    if (!m->z3) { return; }
    for (int s = 0; s < 2; s++) {
        zero_gather_wait(m->z3, &m->pslot_gather[s]);
        if (m->pslot_layer[s] >= 0) { memset(&m->p.layers[m->pslot_layer[s]], 0, sizeof(LayerParams)); }
        m->pslot_layer[s] = -1;
    }
    m->resident = 0;
}

// The embeddings and the final LayerNorm, gathered if stale (blocking: once per step).
static void z3_resident(GPT* m) {
    if (!m->z3 || m->resident) { return; }
    const ParamLayout* pl = &m->layout;
    kernels_range_push(&m->ctx, "ZeRO-3 gather: embeddings, final LayerNorm");
    ZeroGather g;
    if (pl->embed_size > 0) {
        z3__gather(m, m->param_arena, 0, pl->embed_size, &g);
        zero_gather_wait(m->z3, &g);
    }
    if (pl->has_lnf) {
        z3__gather(m, m->param_arena + pl->embed_size, pl->lnf_offset, pl->lnf_offset + 2 * (size_t)m->cfg.channels, &g);
        zero_gather_wait(m->z3, &g);
    }
    kernels_range_pop(&m->ctx);
    m->resident = 1;
}

// Starts gathering layer l's parameters into a slot, unless a slot holds (or is receiving) them already: the slot
// that does not hold layer `keep` (the layer in use; -1 for none). The layer that slot held is dropped.
static void z3_fetch(GPT* m, int l, int keep) {
    if (!m->z3) { return; }
    if (m->pslot_layer[0] == l || m->pslot_layer[1] == l) { return; }
    int s = m->pslot_layer[0] == keep ? 1 : 0;
    zero_gather_wait(m->z3, &m->pslot_gather[s]); // (a gather still landing there: not in the schedules above)
    if (m->pslot_layer[s] >= 0) { memset(&m->p.layers[m->pslot_layer[s]], 0, sizeof(LayerParams)); }
    m->pslot_layer[s] = l;
    const ParamLayout* pl = &m->layout;
    size_t lo = pl->embed_size + pl->layer_size * (size_t)pl->layer_slot[l];
    z3__gather(m, m->param_arena + arena_slot_offset(pl, s), lo, lo + pl->layer_size, &m->pslot_gather[s]);
}

// Layer l's parameters, ready: fetched if no slot holds them (keeping layer `keep`), waited for, views bound.
static void z3_use(GPT* m, int l, int keep) {
    if (!m->z3) { return; }
    z3_fetch(m, l, keep);
    int s = m->pslot_layer[0] == l ? 0 : 1;
    if (m->pslot_gather[s].dest) {
        kernels_range_push(&m->ctx, "ZeRO-3 gather: wait");
        zero_gather_wait(m->z3, &m->pslot_gather[s]);
        kernels_range_pop(&m->ctx);
    }
    views_bind_layer(&m->p, &m->layout, l, m->param_arena + arena_slot_offset(&m->layout, s));
}

// MPI advances non-blocking collectives only inside MPI calls: poke the gathers in flight between kernels.
static void z3_progress(GPT* m) {
    if (!m->z3) { return; }
    for (int s = 0; s < 2; s++) {
        if (m->pslot_gather[s].dest) { comm_test(&m->pslot_gather[s].req); }
    }
}

#endif // ZERO3_H
