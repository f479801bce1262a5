/*
tests/test_cudnn_graph.cu: builds cuDNN's causal flash-attention graphs (cudnn_att.cuh) for several shapes and
finalizes every tensor, operation and operation graph, which cuDNN does without a GPU: a wrong stride, data type,
unique id or operation order fails here, in CI, instead of in a rare GPU session. Engine heuristics, plans and
execution need the GPU (scripts/gpu_check.sh).

    make tests/test_cudnn_graph && ./tests/test_cudnn_graph
*/
#define ENABLE_BF16
#include "kernels.cuh"         // defines: the CUDA backend, with cudnn_att.cuh (built with -DUSE_CUDNN)
#include "tests/testing.h"     // defines: check, test_summary

#ifndef USE_CUDNN
#error "tests/test_cudnn_graph.cu needs -DUSE_CUDNN"
#endif

// The number of non-virtual tensors a built graph binds (what its variant pack must hold).
static int count_bound(const AttBuild* g) {
    int n = 0;
    for (int i = 0; i < g->n; i++) {
        int64_t uid = 0, cnt = 0;
        bool virt = true;
        if (cudnnBackendGetAttribute(g->all[i], CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &cnt, &uid) != CUDNN_STATUS_SUCCESS) { continue; }
        if (cudnnBackendGetAttribute(g->all[i], CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &cnt, &virt) != CUDNN_STATUS_SUCCESS) { continue; }
        n += !virt;
    }
    return n;
}

// The plan cache's bookkeeping (att__cache_find), on three entries with no cuDNN behind them: a shape is found again
// (forward and backward apart, a rejected shape too), a free entry is filled before any is evicted, and a full cache
// evicts the entry whose last lookup is oldest.
static void test_plan_cache(void) {
    AttPlan plans[3];
    memset(plans, 0, sizeof(plans));
    AttShape a = {1, 64, 4, 64}, b = {1, 128, 4, 64}, c = {4, 1024, 12, 64}, d = {1, 256, 4, 64};
    uint64_t now = 0;
    int hit = -1, ok = 1;
    // fill: a forward, a backward, b forward (rejected)
    const AttShape* fill[3] = {&a, &a, &b};
    for (int i = 0; i < 3; i++) {
        AttPlan* p = att__cache_find(plans, 3, fill[i], i == 1, ++now, &hit);
        ok &= !hit && !p->used;
        p->used = 1; p->shape = *fill[i]; p->backward = i == 1; p->last_use = now; p->rejected = i == 2;
    }
    check(ok && plans[0].backward == 0 && plans[1].backward == 1, "plan cache: new shapes fill free entries first", "ok %d", ok);
    AttPlan* p = att__cache_find(plans, 3, &a, 1, ++now, &hit);
    check(hit && p == &plans[1], "plan cache: (shape, backward) found again, apart from the forward", "hit %d", hit);
    p = att__cache_find(plans, 3, &b, 0, ++now, &hit);
    check(hit && p->rejected, "plan cache: a rejected shape is found (its attention stays native)", "hit %d", hit);
    // now the least recent is a's forward (entry 0): c evicts it
    p = att__cache_find(plans, 3, &c, 0, ++now, &hit);
    check(!hit && p == &plans[0], "plan cache: full, the least recently used entry makes room", "entry %d", (int)(p - plans));
    p->shape = c; p->backward = 0; p->last_use = now;
    // then entry 1 (a's backward, used before b's lookup) is the least recent
    p = att__cache_find(plans, 3, &d, 0, ++now, &hit);
    check(!hit && p == &plans[1], "plan cache: eviction follows the lookups, not the fill order", "entry %d", (int)(p - plans));
    p->shape = d; p->backward = 0; p->last_use = now;
    // a nondeterministic backward graph (--deterministic 0) is an entry of its own beside the deterministic one
    AttShape dn = d;
    dn.nondet = 1;
    p = att__cache_find(plans, 3, &d, 0, ++now, &hit);
    AttPlan* q = att__cache_find(plans, 3, &dn, 0, ++now, &hit);
    check(!hit && q != p, "plan cache: the nondeterministic graph of a shape is not its deterministic one", "hit %d", hit);
}

// The cache's room (cudnn_attention_plan_room): at least ATT_MIN_PLANS, and as much more as kernels_reserve asks for a
// batch ramp's row counts (3 entries each), the new entries free and the old ones kept. A ramp of B 64 over 63 shorter
// row counts then keeps all its 128 training plans: filling them finds a free entry every time, and every one is
// found again after the fill (none evicted), with sampling's lengths still to come.
static void test_plan_room(void) {
    cudnn_attention_plan_room(0);
    int base = att__nplans;
    att__plans[0].used = 1;
    att__plans[0].shape.T = 77;
    cudnn_attention_plan_room(3 * 64);
    int grown = att__nplans, kept = att__plans[0].used && att__plans[0].shape.T == 77, fresh = 1;
    for (int i = base; i < grown; i++) { fresh &= !att__plans[i].used; }
    cudnn_attention_plan_room(3); // (never shrinks)
    check(base == ATT_MIN_PLANS && grown == ATT_MIN_PLANS + 3 * 64 && att__nplans == grown && kept && fresh,
          "plan cache room: ATT_MIN_PLANS, grown for a ramp's row counts with the old entries kept, never shrunk",
          "base %d, grown %d, now %d, kept %d, fresh %d", base, grown, att__nplans, kept, fresh);
    memset(att__plans, 0, sizeof(AttPlan) * (size_t)att__nplans);
    uint64_t now = 0;
    int hit = 0, misses = 0, found = 0;
    for (int rows = 1; rows <= 64; rows++) {
        for (int backward = 0; backward < 2; backward++) {
            AttShape sh = {rows, 1024, 12, 64};
            AttPlan* p = att__cache_find(att__plans, att__nplans, &sh, backward, ++now, &hit);
            misses += !hit && !p->used;
            p->used = 1; p->shape = sh; p->backward = backward; p->last_use = now;
        }
    }
    for (int rows = 1; rows <= 64; rows++) {
        for (int backward = 0; backward < 2; backward++) {
            AttShape sh = {rows, 1024, 12, 64};
            att__cache_find(att__plans, att__nplans, &sh, backward, ++now, &hit);
            found += hit;
        }
    }
    check(misses == 128 && found == 128, "plan cache room: a ramp's 64 row counts keep all 128 plans (no eviction)",
          "%d filled free entries, %d found again", misses, found);
    memset(att__plans, 0, sizeof(AttPlan) * (size_t)att__nplans);
}

// A plan asked for where cuDNN cannot make one (here, without a GPU, cudnnCreate itself fails), under --attention
// auto: no plan (the native kernels run the shape, with a warning naming cuDNN's refusal) instead of the end of the
// run, and the shape is remembered as refused (asked again, no second attempt). On a GPU: a plan.
static void test_plan_refused(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess) { ndev = 0; }
    cudaGetLastError();
    KernelCtx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.attention_auto = 1;
    AttShape s = {2, 128, 4, 64};
    AttPlan* p = att__plan(&ctx, &s, 0);
    if (ndev > 0) {
        check(p != NULL && p->plan != NULL, "a GPU: cuDNN makes the forward plan of B 2, T 128, NH 4, HS 64", "%s", att__why);
    } else {
        int hit = 0;
        AttPlan* e = att__cache_find(att__plans, att__nplans, &s, 0, att__clock, &hit);
        AttPlan* again = att__plan(&ctx, &s, 0);
        check(p == NULL && hit && e->rejected && again == NULL && att__handle == NULL,
              "no GPU (cudnnCreate fails): --attention auto gets no plan, the shape remembered as refused, no handle kept",
              "plan %p, cached %d, rejected %d, again %p", (void*)p, hit, hit ? e->rejected : -1, (void*)again);
    }
    memset(att__plans, 0, sizeof(AttPlan) * (size_t)att__nplans);
}

// Bucketed forward lengths (kernels_forward_len with cuDNN): the shortest power-of-two multiple of 64 holding t, at
// most t_max; t itself past t_max.
static void test_bucket_len(void) {
    int cases[][3] = {{1, 1024, 64}, {64, 1024, 64}, {65, 1024, 128}, {700, 1024, 1024}, {1024, 1024, 1024},
                      {70, 100, 100}, {150, 100, 150}, {200, 2048, 256}, {1, 32, 32}};
    int bad = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = kernels__bucket_len(cases[i][0], cases[i][1]);
        if (got != cases[i][2]) { printf("  bucket(%d, %d) = %d, want %d\n", cases[i][0], cases[i][1], got, cases[i][2]); bad++; }
    }
    check(bad == 0, "forward lengths bucket to 64, 128, 256, ... up to the limit", "%d cases wrong", bad);
}

// The engine order of a plan search (att__config_order): a pass takes the deterministic engines, or the others, each
// in the heuristic's ranking; the notes' names in the messages.
static void test_config_order(void) {
    unsigned tc = 1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    unsigned notes[5] = {tc, tc | ATT_NONDET, 0, ATT_NONDET, tc};
    int order[5], want_det[3] = {0, 2, 4}, want_nd[2] = {1, 3};
    int nd = att__config_order(notes, 5, 0, order);
    check(nd == 3 && memcmp(order, want_det, sizeof(want_det)) == 0, "engine order: the deterministic pass takes 0, 2, 4 in the heuristic's order",
          "%d picked: %d %d %d", nd, order[0], order[1], order[2]);
    int nn = att__config_order(notes, 5, 1, order);
    check(nn == 2 && memcmp(order, want_nd, sizeof(want_nd)) == 0, "engine order: the nondeterministic pass takes 1, 3", "%d picked: %d %d", nn,
          order[0], order[1]);
    int na = att__config_order(notes, 5, 2, order), want_all[5] = {0, 1, 2, 3, 4};
    check(na == 5 && memcmp(order, want_all, sizeof(want_all)) == 0, "engine order: a nondeterministic graph's pass takes all five in the heuristic's order",
          "%d picked", na);
    char b[200];
    att__notes_str(tc | ATT_NONDET, b, sizeof(b));
    check(strcmp(b, "tensor_core, nondeterministic") == 0, "engine notes: named in the messages", "'%s'", b);
    att__notes_str(0, b, sizeof(b));
    check(strcmp(b, "none") == 0, "engine notes: none", "'%s'", b);
}

// Engines of a finalized graph are made and read without a GPU: att__engine_notes reads back each one's global index
// and the tensor-core note cuDNN gives its fused attention engines (so a misread attribute fails here, not in a GPU
// session that needs the nondeterminism note).
static void test_engine_notes(const AttShape* s, int backward) {
    AttBuild g;
    if (backward) { att_build_backward(&g, s); } else { att_build_forward(&g, s); }
    cudnnBackendDescriptor_t graph = att_graph(&g, NULL);
    int made = 0, bad = 0, nondet = 0;
    for (int64_t k = 0; k < 16 && graph; k++) {
        int mark = g.n;
        cudnnBackendDescriptor_t e = att__new(&g, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        gpuCheck(cudnnBackendSetAttribute(e, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
        gpuCheck(cudnnBackendSetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &k));
        if (cudnnBackendFinalize(e) == CUDNN_STATUS_SUCCESS) {
            int64_t index = -2;
            unsigned notes = 0;
            att__engine_notes(e, &index, &notes);
            made++;
            nondet += (notes & ATT_NONDET) != 0;
            if (index != k || !(notes & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE))) {
                char b[200];
                printf("  engine %lld: read back index %lld, notes %s\n", (long long)k, (long long)index, att__notes_str(notes, b, sizeof(b)));
                bad++;
            }
        }
        att__drop_to(&g, mark);
    }
    char name[200];
    snprintf(name, sizeof(name), "%s%s graph: its engines' index and tensor-core note read back (%d engines, %d of them marked nondeterministic)",
             backward ? "backward" : "forward", s->nondet ? " (nondeterministic dQ)" : "", made, nondet);
    check(made > 0 && bad == 0, name, "%d engines, %d misread", made, bad);
    att__free(&g);
}

int main(void) {
    printf("cuDNN %zu (backend API, no GPU needed for graph finalization)\n", cudnnGetVersion());
    AttShape shapes[] = {{2, 128, 4, 64}, {4, 1024, 12, 64}, {1, 2048, 16, 64}, {3, 100, 25, 64}, {2, 64, 8, 128}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        const AttShape* s = &shapes[k];
        char name[160];
        AttBuild g;
        att_build_forward(&g, s);
        int nops = g.nops, bound = count_bound(&g);
        int fin = att_graph(&g, NULL) != NULL; // (NULL: att__why says what cuDNN refused)
        snprintf(name, sizeof(name), "forward graph B %lld T %lld NH %lld HS %lld finalizes", (long long)s->B, (long long)s->T, (long long)s->NH, (long long)s->HS);
        check(fin && nops == 14 && bound == 7, name, "%s; %d operations (want 14), %d bound tensors (want 7)", fin ? "finalized" : att__why, nops, bound);
        // a plan search adds a heuristic, up to 16 configurations and the engine it reads or the plan it tries (att__try_plans)
        snprintf(name, sizeof(name), "forward graph B %lld T %lld: %d descriptors leave room for a plan search (at most %d)",
                 (long long)s->B, (long long)s->T, g.n, ATT_MAX_DESCS);
        check(g.n + 18 <= ATT_MAX_DESCS, name, "%d + 18 of %d", g.n, ATT_MAX_DESCS);
        att__free(&g);
        att_build_backward(&g, s);
        nops = g.nops;
        bound = count_bound(&g);
        fin = att_graph(&g, NULL) != NULL;
        snprintf(name, sizeof(name), "backward graph B %lld T %lld NH %lld HS %lld finalizes", (long long)s->B, (long long)s->T, (long long)s->NH, (long long)s->HS);
        // 21: the frontend's 22 with its dQ accumulator and IDENTITY replaced by one matmul (the deterministic dQ)
        check(fin && nops == 21 && bound == 13, name, "%s; %d operations (want 21), %d bound tensors (want 13)", fin ? "finalized" : att__why, nops, bound);
        snprintf(name, sizeof(name), "backward graph B %lld T %lld: %d descriptors leave room for a plan search (at most %d)",
                 (long long)s->B, (long long)s->T, g.n, ATT_MAX_DESCS);
        check(g.n + 18 <= ATT_MAX_DESCS, name, "%d + 18 of %d", g.n, ATT_MAX_DESCS);
        att__free(&g);
        // --deterministic 0: the frontend's 22, dQ through the fp32 accumulator (bound: the 14th tensor, which
        // att__execute adds to the variant pack)
        AttShape n = *s;
        n.nondet = 1;
        att_build_backward(&g, &n);
        nops = g.nops;
        bound = count_bound(&g);
        fin = att_graph(&g, NULL) != NULL;
        snprintf(name, sizeof(name), "nondeterministic backward graph B %lld T %lld NH %lld HS %lld finalizes", (long long)s->B, (long long)s->T,
                 (long long)s->NH, (long long)s->HS);
        check(fin && nops == 22 && bound == 14, name, "%s; %d operations (want 22), %d bound tensors (want 14)", fin ? "finalized" : att__why, nops, bound);
        check(g.n + 18 <= ATT_MAX_DESCS, "nondeterministic backward graph: room for a plan search", "%d + 18 of %d", g.n, ATT_MAX_DESCS);
        att__free(&g);
    }
    test_plan_cache();
    test_plan_room();
    test_plan_refused();
    test_bucket_len();
    test_config_order();
    test_engine_notes(&shapes[0], 0);
    test_engine_notes(&shapes[0], 1);
    AttShape nd = shapes[0];
    nd.nondet = 1;
    test_engine_notes(&nd, 1);
    return test_summary();
}
