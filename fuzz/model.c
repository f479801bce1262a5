/*
fuzz/model.c: fuzzes train_gpt.c's llm.c model file loading, the path of --init and --resume: model_read_header,
then the parameter allocation and model_load_params (size check, fp32 version 3 or bf16 version 5 payload).

  make fuzz-build && fuzz/bin/model -close_fd_mask=3 fuzz/corpus/model
  fuzz/bin/model CRASH_FILE                                             (reproduces one input, with messages)

Input: the whole model file. The harness includes train_gpt.c (TRAIN_GPT_NO_MAIN) and follows main()'s order:
header, gpt_alloc_params, model_load_params. Invariant: a file that loads holds only the header's parameters (its
size is exactly 1024 + 4 or 2 bytes per parameter), so an input of a few KB never makes a large allocation;
libFuzzer's -malloc_limit_mb reports one as a finding.
*/
#include "fuzz_common.h"

#define TRAIN_GPT_NO_MAIN
#include "train_gpt.c" // defines: model_read_header, gpt_alloc_params, model_load_params, gpt_free

static void run(void* arg) {
    const FuzzInput* in = (const FuzzInput*)arg;
    char path[1024];
    fuzz_write_file("model.bin", in->data, in->size, path, sizeof(path));
    GPTConfig g;
    int version = 0;
    FILE* fp = NULL;
    model_read_header(path, &g, &version, &fp);
    ParamLayout pl; // as main(): the layout, a host buffer of fp32 values, then the loader
    layout_build(&pl, &g);
    float* host = (float*)mallocCheck(pl.num_params * sizeof(float));
    model_load_params(path, fp, version, &pl, host);
    size_t elem = version == 3 ? 4 : 2;
    if (1024 + pl.num_params * elem != in->size) { fuzz_fail("loaded a file of the wrong size"); }
    free(host);
    layout_free(&pl);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzInput in = {data, size};
    fuzz_call(run, &in);
    return 0;
}
