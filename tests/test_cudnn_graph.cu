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

int main(void) {
    printf("cuDNN %zu (backend API, no GPU needed for graph finalization)\n", cudnnGetVersion());
    AttShape shapes[] = {{2, 128, 4, 64}, {4, 1024, 12, 64}, {1, 2048, 16, 64}, {3, 100, 25, 64}, {2, 64, 8, 128}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        const AttShape* s = &shapes[k];
        char name[160];
        AttBuild g;
        att_build_forward(&g, s);
        int nops = g.nops, bound = count_bound(&g);
        att_graph(&g, NULL); // finalizes (exits naming the failing call otherwise)
        snprintf(name, sizeof(name), "forward graph B %lld T %lld NH %lld HS %lld finalizes", (long long)s->B, (long long)s->T, (long long)s->NH, (long long)s->HS);
        check(nops == 14 && bound == 7, name, "%d operations (want 14), %d bound tensors (want 7)", nops, bound);
        att__free(&g);
        att_build_backward(&g, s);
        nops = g.nops;
        bound = count_bound(&g);
        att_graph(&g, NULL);
        snprintf(name, sizeof(name), "backward graph B %lld T %lld NH %lld HS %lld finalizes", (long long)s->B, (long long)s->T, (long long)s->NH, (long long)s->HS);
        // 21: the frontend's 22 with its dQ accumulator and IDENTITY replaced by one matmul (the deterministic dQ)
        check(nops == 21 && bound == 13, name, "%d operations (want 21), %d bound tensors (want 13)", nops, bound);
        att__free(&g);
    }
    return test_summary();
}
