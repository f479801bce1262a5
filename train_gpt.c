/*
train_gpt.c: trains GPT-2 / GPT-3 style models from llm.c token shards, on the CPU (this build) and later on GPUs
(the same file built by nvcc with kernels.cuh). Everything here that is not arithmetic (model layout, parallel
groups, sharding, data, checkpoints, logging) is shared by both backends.

Build and run:
    make train_gpt
    ./train_gpt --help
    ./train_gpt --model d6 --train 'data/tinyshakespeare/tiny_shakespeare_train_*.bin' --val 'data/tinyshakespeare/tiny_shakespeare_val_*.bin'
    mpirun -np 2 ./train_gpt --zero 1 ...          (data parallel; see README)
    ./train_gpt --bench --model d12 --batch-size 4 --seq-len 64
    ./train_gpt --init gpt2/model.safetensors --train ...   (from Hugging Face GPT-2 weights; config.json beside them)
    ./train_gpt --init out/model_00001000.bin --export-hf gpt2-mine   (write a Hugging Face checkpoint, exit)

Sections: flags, model layout (layout.h: the parameter table, a rank's share under tensor and pipeline parallelism),
model files (model_files.h: llm.c's and the parameter streams; Hugging Face's in hf_gpt2.h), activations,
forward/backward (tensor parallel through tp.h), optimizer step, checkpoints (checkpoint.h), pipeline stages
(pipeline.h, pipeline_train.h), evaluation and sampling, the training loop.
*/
#include <ctype.h>
#include <signal.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "utils.h"        // defines: fatal, fopenCheck, freadCheck, mallocCheck, mulSize, AtomicFile, Checksum
#if defined(__CUDACC__) || defined(CUDA_EMU) // CUDA_EMU: the same backend on the CPU (tests/cuda_emu)
#include "kernels.cuh"    // the CUDA backend of kernels.h (train_gpt_cu): floatX, KernelCtx, dev_*, every op
#else
#include "kernels_cpu.h"  // the CPU backend of kernels.h: floatX, KernelCtx, dev_*, encoder_*, layernorm_*, matmul_*, ...
#endif
#include "comm.h"         // defines: ParallelContext, CommGroup, parallel_init, comm_allreduce_*, comm_broadcast, ...
#include "zero.h"         // defines: ZeroOptimizer, zero_init, zero_bucket_ready, zero_wait_all, zero_adamw_step (and
                          // through powersgd.h: PowerSgd, powersgd_init, powersgd_spec_rank, powersgd_payload)
#include "tp.h"           // defines: tp_cross_entropy, tp_allreduce_x, tp_allgather_rows_x, tp_reduce_scatter_rows_x
#include "dataloader.h"   // defines: DataLoader, dataloader_init, dataloader_next_batch, dataloader_get/set_state
#include "tokenizer.h"    // defines: Tokenizer, tokenizer_init, tokenizer_decode, tokenizer_free
#include "hellaswag.h"    // defines: HellaSwag, hellaswag_load, hellaswag_fill_rows, hellaswag_add_losses, hellaswag_predict
#include "outlier.h"      // defines: OutlierWindow, outlier_init, outlier_push, outlier_get, outlier_set, outlier_skip
// hf_gpt2.h (Hugging Face checkpoints) is included after the model-file section below: it uses the model layout

// ----------------------------------------------------------------------------
// Flags: declared once in a table that also prints --help and the resolved configuration.

typedef enum { FLAG_INT, FLAG_FLOAT, FLAG_STR } FlagType;

typedef struct {
    // model
    char model[64];          // a size by name (d12, gpt2-124M, gpt3-125M, ...) when no --init file is given
    char init[1024];         // start from this model file: llm.c (.bin) or Hugging Face safetensors
    char export_hf[1024];    // write the --init model as a Hugging Face checkpoint to this directory and exit
    // data
    char train[1024];
    char val[1024];
    char tokenizer[1024];
    int shuffle;
    // batch
    int batch_size;          // B: sequences per micro-step per process
    int seq_len;             // T
    long total_batch_size;   // tokens per optimizer step, all processes together (0: B*T*dp)
    int steps;
    int recompute;           // 0: keep every activation; 1: recompute GELU and LayerNorm outputs; 2: whole blocks
    char attention[16];      // auto | cudnn | native: the attention implementation (GPU builds have two)
    char comm[16];           // auto | mpi | staged | nccl: how collectives reach the buffers
    // precision
    char dtype[8];           // fp32 | bf16 | fp16: storage of activations and the compute copy of the parameters
    float loss_scale;        // fp16: initial dynamic loss scale
    float loss_scale_growth; // fp16: factor after loss_scale_window clean steps in a row
    float loss_scale_backoff;// fp16: factor after an overflowing step
    int loss_scale_window;   // fp16: clean steps in a row before the scale grows
    // optimizer
    float lr;
    char lr_schedule[32];
    int warmup;
    float final_lr_frac;
    float weight_decay;
    float grad_clip;
    char nan_policy[16];     // stop | skip: what a step with a non-finite loss or gradient norm does
    int max_skipped_steps;   // skip: stop after this many non-finite steps in a row
    float skip_loss_z;       // llm.c's -sl: skip the update when the loss's z-score is above this (0: off; outlier.h)
    float skip_grad_z;       // llm.c's -sg: the same for the gradient norm
    int outlier_window;      // the steps those z-scores are taken over (llm.c: 128)
    int seed;
    // parallel
    int zero;
    int tp;                  // tensor-parallel size (ranks per group; the data-parallel size is processes / (tp pp))
    int sequence_parallel;   // 1: Megatron's sequence parallelism in the tensor-parallel groups
    int pp;                  // pipeline-parallel size (stages)
    char pp_schedule[16];    // gpipe | 1f1b | interleaved
    int micro_batches;       // micro-batches per optimizer step per data-parallel rank (0: from --total-batch-size)
    int virtual_stages;      // chunks per pipeline rank (interleaved)
    char trace[1024];        // --trace FILE: Chrome/Perfetto trace of the pipeline's first steps
    char grad_compress[16];  // none | bf16 | powersgd:R: what the data-parallel gradient reductions send
    float comm_timeout;
    int threads;
    // periodic work
    int val_every;
    int val_steps;
    char hellaswag[1024];    // --hellaswag FILE: a multiple-choice eval file (hellaswag.h) evaluated during training
    int hellaswag_every;
    char eval_hellaswag[1024]; // evaluate the model on this eval file and exit
    char hellaswag_details[1024]; // --eval-hellaswag: one line per example to this file
    int sample_every;
    int gen_tokens;
    int checkpoint_every;
    char out[1024];
    int keep_checkpoints;    // keep the newest N checkpoints in --out (0: all)
    int major_checkpoint_every; // checkpoints at multiples of this many steps are never pruned (0: none)
    char resume[1024];
    int auto_resume;         // 1: resume from --out when it holds a checkpoint, else start fresh (llm.c's -y 1)
    int overfit_batch;       // 1: every step trains on the same first batch (llm.c's -a 1)
    int llmc_hellaswag;      // llm.c's -h 1: HellaSwag from its path at every validation (resolved in parse_flags)
    int model_given;         // --model was on the command line (with --init or --resume it must agree with the file)
    char log[1024];
    // benchmark
    int bench;
    int bench_steps;
    // planner (plan.h)
    int plan;                // 1: print the best parallel layouts for the machine below and exit
    int plan_nodes, plan_devices_per_node;
    float plan_memory_gb;    // per device
    float plan_reserve_gb;   // per device, kept for the runtime (-1: 2 on GPUs, 0 otherwise)
    float plan_intra_gbps, plan_inter_gbps; // link bandwidth per device, GB/s, within and between nodes
    float plan_tflops;       // dense bf16 peak per device
    float plan_efficiency;   // share of the peak a training step's matmuls reach
    char plan_storage[8];    // build | gpu: floatX elements as this build stores them, or 16-bit as a GPU build does
    int plan_top;
    int plan_verbose;
} Config;

typedef struct {
    const char* name;   // long flag without the leading "--"
    const char* alias;  // llm.c's short flag ("-b"), or NULL
    FlagType type;
    size_t offset;      // into Config
    size_t str_cap;     // capacity for strings
    double lo, hi;      // accepted range for numbers
    int per_rank;       // may legitimately differ between ranks (excluded from the configuration check)
    const char* help;
} FlagSpec;

#define FLAG_I(n, a, field, lo, hi, h) { n, a, FLAG_INT, offsetof(Config, field), 0, lo, hi, 0, h }
#define FLAG_F(n, a, field, lo, hi, h) { n, a, FLAG_FLOAT, offsetof(Config, field), 0, lo, hi, 0, h }
#define FLAG_S(n, a, field, h) { n, a, FLAG_STR, offsetof(Config, field), sizeof(((Config*)0)->field), 0, 0, 0, h }

static const FlagSpec FLAGS[] = {
    FLAG_S("model", NULL, model, "model size by name: gpt2-124M/350M/774M/1558M (or gpt2, gpt2-medium, gpt2-large, gpt2-xl), gpt3-125M/350M/760M/1.3B/2.7B, llm.c's descriptors (d6, d12, d24, d36, d48, d60, d72, d84 or gpt2:d<N>: GPT-2 shapes by depth; gpt3:c<N>, N one of 384, 768, 1024, 1536, 2048, 2560, 4096, 5120, 12288: GPT-3 shapes by width), or d<N> for another depth (N layers, 64N channels)"),
    FLAG_S("init", "-e", init, "start from this model: an llm.c file (.bin, version 3 fp32 or 5 bf16), or a Hugging Face GPT-2 checkpoint (model.safetensors, model.safetensors.index.json or their directory, config.json beside it)"),
    FLAG_S("export-hf", NULL, export_hf, "with --init FILE only: write that model to DIR as a Hugging Face GPT-2 checkpoint (model.safetensors, config.json, tokenizer files) and exit"),
    FLAG_S("train", "-i", train, "glob pattern of training shards"),
    FLAG_S("val", "-j", val, "glob pattern of validation shards"),
    FLAG_S("tokenizer", NULL, tokenizer, "llm.c gpt2_tokenizer.bin to decode samples (token ids are printed without it)"),
    FLAG_I("shuffle", NULL, shuffle, 0, 1, "0: llm.c's sequential order; 1: shuffled distributed sampler"),
    FLAG_I("batch-size", "-b", batch_size, 1, 1 << 20, "sequences per micro-step per process (B)"),
    FLAG_I("seq-len", "-t", seq_len, 1, 1 << 20, "sequence length (T), at most the model's context"),
    FLAG_I("total-batch-size", "-d", total_batch_size, 0, 1e12, "tokens per optimizer step over all processes; 0: B*T*processes"),
    FLAG_I("steps", "-x", steps, -1, 1e9, "optimizer steps to train; -1: one epoch of the training data (llm.c's default)"),
    FLAG_I("seed", NULL, seed, 0, 2147483647, "seed for initialisation, data order and sampling"),
    FLAG_I("overfit-batch", "-a", overfit_batch, 0, 1, "1: every step trains on the same first batch, the data restarting at each step (llm.c's debugging mode: the loss should fall towards 0)"),
    FLAG_I("recompute", NULL, recompute, 0, 2, "activations recomputed in backward: 0 none; 1 GELU and LayerNorm outputs (llm.c); 2 whole blocks, keeping only each block's input (Megatron's full recomputation)"),
    FLAG_S("attention", NULL, attention, "attention implementation: auto | native (our kernels; the only one on the CPU) | cudnn (cuDNN's fused flash attention: GPU builds with cuDNN, bf16/fp16)"),
    FLAG_S("dtype", NULL, dtype, "storage of activations and the compute copy of the parameters: fp32 | bf16 | fp16 (fp32 master weights, moments and gradients in all; the CPU emulates bf16/fp16 by rounding each stored value)"),
    FLAG_F("loss-scale", NULL, loss_scale, 1, 3.4e38, "--dtype fp16: initial dynamic loss scale (PyTorch GradScaler's init_scale)"),
    FLAG_F("loss-scale-growth", NULL, loss_scale_growth, 1, 1e6, "--dtype fp16: the scale's factor after --loss-scale-window clean steps in a row (growth_factor)"),
    FLAG_F("loss-scale-backoff", NULL, loss_scale_backoff, 1e-6, 1, "--dtype fp16: the scale's factor after a step with an inf/NaN gradient, which is skipped (backoff_factor)"),
    FLAG_I("loss-scale-window", NULL, loss_scale_window, 1, 1e9, "--dtype fp16: clean steps in a row before the scale grows (growth_interval)"),
    FLAG_F("lr", "-l", lr, 0, 10, "peak learning rate"),
    FLAG_S("lr-schedule", "-k", lr_schedule, "cosine | linear | constant | wsd (warmup, constant, then 1 - sqrt decay over the last 20% of --steps, as llm.c's); all with linear warmup"),
    FLAG_I("warmup", "-u", warmup, 0, 1e9, "warmup steps"),
    FLAG_F("final-lr-frac", "-q", final_lr_frac, 0, 1, "final learning rate as a fraction of the peak"),
    FLAG_F("weight-decay", "-c", weight_decay, 0, 10, "AdamW decoupled weight decay (matrices and embeddings only)"),
    FLAG_F("grad-clip", NULL, grad_clip, 0, 1e9, "clip the global gradient norm to this; 0 turns clipping off"),
    FLAG_S("nan-policy", NULL, nan_policy, "a step whose loss or gradient norm is not finite: stop (error, no checkpoint of that state) | skip (no update; stop after --max-skipped-steps in a row)"),
    FLAG_I("max-skipped-steps", NULL, max_skipped_steps, 1, 1e6, "--nan-policy skip: stop after this many non-finite steps in a row"),
    FLAG_F("skip-loss-z", "-sl", skip_loss_z, 0, 1e6, "skip the update of a step whose loss lies more than this many standard deviations above the mean of the last --outlier-window steps' (0: off)"),
    FLAG_F("skip-grad-z", "-sg", skip_grad_z, 0, 1e6, "the same for the gradient norm (0: off)"),
    FLAG_I("outlier-window", NULL, outlier_window, 2, OUTLIER_MAX_WINDOW, "--skip-loss-z, --skip-grad-z: the steps the mean and deviation are taken over (z-scores start once it has filled)"),
    FLAG_I("zero", "-z", zero, 0, 3, "ZeRO stage: 0 (all-reduce), 1 (sharded optimizer), 2 (sharded gradients too), 3 (sharded parameters too)"),
    FLAG_I("tp", NULL, tp, 1, 64, "tensor-parallel size (Megatron): attention heads, the MLP and the vocabulary split over this many adjacent ranks; processes = dp x tp"),
    FLAG_I("sequence-parallel", NULL, sequence_parallel, 0, 1, "with --tp > 1: split the LayerNorm and residual activations along the tokens too (reduce-scatter and all-gather in place of each all-reduce)"),
    FLAG_I("pp", NULL, pp, 1, 64, "pipeline-parallel size: the blocks cut into this many stages (the first also holds the embeddings, the last the LM head); processes = dp x tp x pp"),
    FLAG_S("pp-schedule", NULL, pp_schedule, "with --pp > 1: gpipe (all forwards, then all backwards) | 1f1b (at most pp micro-batches alive) | interleaved (1F1B over --virtual-stages chunks per rank)"),
    FLAG_I("micro-batches", NULL, micro_batches, 0, 1 << 20, "micro-batches per optimizer step and data-parallel rank (the pipeline's M); 0: --total-batch-size / (B x T x dp)"),
    FLAG_I("virtual-stages", NULL, virtual_stages, 1, 64, "--pp-schedule interleaved: model chunks per pipeline rank"),
    FLAG_S("trace", NULL, trace, "with --pp > 1: write a Chrome/Perfetto trace (JSON) of every rank's forward, backward, receive and optimizer spans of the first 3 steps to FILE"),
    FLAG_S("grad-compress", NULL, grad_compress, "data-parallel gradient reductions: none (fp32) | bf16 (half the bytes: rounded to bf16, summed in bf16, as PyTorch's bf16_compress_hook) | powersgd:R (rank-R PowerSGD with error feedback and warm start on every matrix that gains, the rest in fp32; --zero 0 or 1)"),
    FLAG_S("comm", NULL, comm, "collectives: auto (a GPU build with NCCL and several processes: nccl unless ranks of a data- or tensor-parallel group share a GPU, then mpi; otherwise mpi) | mpi (MPI on the buffers; a GPU build stages them through pinned host memory) | staged (the CPU runs the GPU's staging path, for tests) | nccl (GPU builds with NCCL: the data- and tensor-parallel collectives and the pipeline's messages on device buffers, one GPU per process; --grad-compress bf16 sums bf16 on the device, powersgd keeps its host path over MPI)"),
    FLAG_F("comm-timeout", NULL, comm_timeout, 1, 1e6, "seconds a collective may wait before the job is aborted"),
    { "threads", NULL, FLAG_INT, offsetof(Config, threads), 0, 0, 4096, 1, "OpenMP threads per process (0: OMP_NUM_THREADS or all cores); may differ between ranks" },
    FLAG_I("val-every", "-v", val_every, 0, 1e9, "validation loss every N steps (0: off)"),
    FLAG_I("val-steps", "-m", val_steps, 1, 1e9, "validation batches per evaluation"),
    FLAG_S("hellaswag", NULL, hellaswag, "an llm.c multiple-choice eval file (HellaSwag: scripts/prepare_hellaswag.sh) to evaluate every --hellaswag-every steps; acc and acc_norm go to the log"),
    FLAG_I("hellaswag-every", NULL, hellaswag_every, 0, 1e9, "evaluate --hellaswag every N steps (0: off)"),
    FLAG_S("eval-hellaswag", NULL, eval_hellaswag, "evaluate the model (--init FILE, or a fresh --model) on this llm.c multiple-choice eval file, print 'hellaswag: N examples, acc A, acc_norm B' last and exit; rows longer than --seq-len (default here: the model's context) are refused"),
    FLAG_S("hellaswag-details", NULL, hellaswag_details, "with --eval-hellaswag: write one line per example to FILE (position, index, label, both answers, each ending's summed and mean loss)"),
    FLAG_I("sample-every", "-s", sample_every, 0, 1e9, "generate a sample every N steps (0: off)"),
    FLAG_I("gen-tokens", "-g", gen_tokens, 1, 1e6, "tokens to generate per sample (at most the sequence length)"),
    FLAG_I("checkpoint-every", "-n", checkpoint_every, 0, 1e9, "write a checkpoint to --out every N steps (0: off)"),
    FLAG_S("out", "-o", out, "output directory for checkpoints (created if missing; checked at start)"),
    FLAG_I("keep-checkpoints", "-nk", keep_checkpoints, 0, 1e9, "keep only the newest N checkpoints in --out (0: keep all)"),
    FLAG_I("major-checkpoint-every", "-nm", major_checkpoint_every, 0, 1e9, "checkpoints at multiples of N steps are kept for good: --keep-checkpoints neither prunes nor counts them (0: none)"),
    FLAG_S("resume", NULL, resume, "resume from the latest checkpoint in this directory"),
    FLAG_I("auto-resume", "-y", auto_resume, 0, 1, "1: resume from the newest checkpoint in --out when it holds one, else start fresh (llm.c's -y 1: re-running one command continues its run)"),
    FLAG_S("log", NULL, log, "append one JSON object per step to this file"),
    FLAG_I("bench", NULL, bench, 0, 1, "1: benchmark full training steps on synthetic tokens, print ms/step"),
    FLAG_I("bench-steps", NULL, bench_steps, 1, 1e6, "timed steps for --bench"),
    FLAG_I("plan", NULL, plan, 0, 1, "1: the parallel-layout planner: enumerate every (dp, tp, pp, ZeRO, B, recompute, dtype) layout of the machine below for --model, --seq-len and --total-batch-size, print the best with their memory, estimated step time and command line, and exit"),
    FLAG_I("plan-nodes", NULL, plan_nodes, 1, 1e5, "--plan: nodes"),
    FLAG_I("plan-devices-per-node", NULL, plan_devices_per_node, 1, 1024, "--plan: devices (processes) per node"),
    FLAG_F("plan-memory-gb", NULL, plan_memory_gb, 1e-6, 1e6, "--plan: memory per device, GB"),
    FLAG_F("plan-reserve-gb", NULL, plan_reserve_gb, -1, 1e6, "--plan: memory per device a layout must leave free for what the planner does not model (the CUDA context, the libraries' handles, NCCL's own buffers), GB; -1: 2 on GPUs (--plan-storage gpu, or a GPU build), 0 otherwise"),
    FLAG_F("plan-intra-gbps", NULL, plan_intra_gbps, 0.001, 1e6, "--plan: link bandwidth per device within a node, GB/s"),
    FLAG_F("plan-inter-gbps", NULL, plan_inter_gbps, 0.001, 1e6, "--plan: link bandwidth per device between nodes, GB/s"),
    FLAG_F("plan-tflops", NULL, plan_tflops, 1e-6, 1e6, "--plan: dense bf16 peak TFLOP/s per device (MFU is against it)"),
    FLAG_F("plan-efficiency", NULL, plan_efficiency, 1e-3, 1, "--plan: the share of the peak the matmuls of a training step reach (fp32 is counted at half of it)"),
    FLAG_S("plan-storage", NULL, plan_storage, "--plan: build (floatX as this binary stores it: what its memory table prints) | gpu (16-bit elements, as a GPU build in bf16/fp16)"),
    FLAG_I("plan-top", NULL, plan_top, 1, 1e6, "--plan: how many layouts to print"),
    FLAG_I("plan-verbose", NULL, plan_verbose, 0, 1, "--plan: 1 also prints every rejected layout with its reason"),
};
#define NUM_FLAGS ((int)(sizeof(FLAGS) / sizeof(FLAGS[0])))

static void config_defaults(Config* c) {
    memset(c, 0, sizeof(*c));
    strcpy(c->model, "d12");
    c->batch_size = 4;
    c->seq_len = 64;
    c->total_batch_size = 0;
    c->steps = 20;
    c->lr = 3e-4f;
    strcpy(c->lr_schedule, "cosine");
    c->warmup = 0;
    c->final_lr_frac = 0.0f;
    c->weight_decay = 0.0f;
    c->grad_clip = 1.0f;
    strcpy(c->attention, "auto");
    strcpy(c->comm, "auto");
    strcpy(c->dtype, dtype_name(KERNELS_DEFAULT_DTYPE)); // fp32 on the CPU, the build's type on a GPU
    c->loss_scale = 65536.0f;
    c->loss_scale_growth = 2.0f;
    c->loss_scale_backoff = 0.5f;
    c->loss_scale_window = 2000;
    strcpy(c->nan_policy, "stop");
    c->max_skipped_steps = 5;
    c->outlier_window = 128;
    c->keep_checkpoints = 3;
    c->seed = 1337;
    c->tp = 1;
    c->pp = 1;
    strcpy(c->pp_schedule, "1f1b");
    strcpy(c->grad_compress, "none");
    c->virtual_stages = 1;
    c->comm_timeout = 300.0f;
    c->val_every = 0;
    c->val_steps = 20;
    c->sample_every = 0;
    c->gen_tokens = 64;
    c->checkpoint_every = 0;
    c->bench_steps = 5;
    // the planner's machine: 8 H100-class GPUs on NVLink in one node, 400 Gb/s InfiniBand between nodes
    c->plan_nodes = 1;
    c->plan_devices_per_node = 8;
    c->plan_memory_gb = 80.0f;
    c->plan_reserve_gb = -1.0f;
    c->plan_intra_gbps = 200.0f;
    c->plan_inter_gbps = 50.0f;
    c->plan_tflops = 989.0f;   // H100/H200 SXM dense bf16
    c->plan_efficiency = 0.5f; // about what llm.c and Megatron-LM reach
    strcpy(c->plan_storage, "build");
    c->plan_top = 5;
}

static void flag_value_string(const FlagSpec* f, const Config* c, char* buf, size_t cap) {
    const char* p = (const char*)c + f->offset;
    if (f->type == FLAG_INT) {
        if (f->offset == offsetof(Config, total_batch_size)) { snprintf(buf, cap, "%ld", *(const long*)p); }
        else { snprintf(buf, cap, "%d", *(const int*)p); }
    } else if (f->type == FLAG_FLOAT) {
        snprintf(buf, cap, "%g", *(const float*)p);
    } else {
        snprintf(buf, cap, "%s", p[0] ? p : "-");
    }
}

#define LLMC_HELLASWAG_PATH "dev/data/hellaswag/hellaswag_val.bin" // llm.c's -h 1 reads it

// --help prints the flags by topic: each group starts at the flag named here.
static const char* const FLAG_GROUPS[][2] = {
    {"model", "model"}, {"train", "data"}, {"batch-size", "batch and length of the run"},
    {"recompute", "memory, precision and kernels"}, {"lr", "optimizer"},
    {"nan-policy", "non-finite and outlier steps"}, {"zero", "parallelism and threads"}, {"val-every", "evaluation and samples"},
    {"checkpoint-every", "checkpoints and logs"}, {"bench", "benchmark"}, {"plan", "planner"},
};

static void print_help(void) {
    printf("usage: train_gpt [flags]   (long flags; llm.c's short flags are accepted as aliases; --version)\n");
    Config d;
    config_defaults(&d);
    for (int i = 0; i < NUM_FLAGS; i++) {
        for (size_t k = 0; k < sizeof(FLAG_GROUPS) / sizeof(FLAG_GROUPS[0]); k++) {
            if (strcmp(FLAGS[i].name, FLAG_GROUPS[k][0]) == 0) { printf("\n%s:\n", FLAG_GROUPS[k][1]); }
        }
        char def[64];
        flag_value_string(&FLAGS[i], &d, def, sizeof(def));
        printf("  --%-18s %-3s %s (default %s)\n", FLAGS[i].name, FLAGS[i].alias ? FLAGS[i].alias : "", FLAGS[i].help, def);
    }
    printf("\nllm.c's other flags, read with train_gpt2.cu's meaning (its defaults differ: README: Coming from llm.c):\n"
           "  -h 0|1    1: HellaSwag from " LLMC_HELLASWAG_PATH " at every validation step (-v); -h alone is this help\n"
           "  -r 0|1|2  recomputation: 0 none, 1 GELU, 2 GELU and LayerNorm; 1 and 2 both run --recompute 1 (GELU and LayerNorm)\n"
           "  -e NAME   a model file, or llm.c's descriptor (d12, gpt2:d48, gpt3:c768) when no file has that name: --model\n"
           "  -f N, -ge N, -lg N, -w 1, -pi mpi   accepted; they change nothing here (the run says why)\n"
           "  -w 0, -pi tcp|fs, -pn, -pr, -pg, -pf, -ps   refused: master weights are always kept; processes start under mpirun\n");
}

// ----------------------------------------------------------------------------
// llm.c's command line. Most of train_gpt2.cu's flags are aliases in the table above (-i, -b, -l, -sl, -nk, -y, ...);
// the rest are read here with llm.c's meaning (its defaults differ: README, "Coming from llm.c"):
//   -h 0|1   HellaSwag at every validation step from llm.c's path (-h alone, or before another flag, is --help)
//   -r 0|1|2 recomputation: none | GELU | GELU and LayerNorm; --recompute 1 recomputes both, so 1 and 2 become it
//   -e dN, gpt2:dN, gpt3:cN   a model by llm.c's descriptor (when no file has that name): --model
//   -f, -ge, -lg, -w 1, -pi mpi   accepted; they change nothing here (a note says why)
//   -w 0, -pi tcp|fs, -pn, -pr, -pg, -pf, -ps   refused (no fp32-only weights; processes start under mpirun)
static char g_flag_notes[2048]; // what the run is told about llm.c flags that change nothing (rank 0 prints it)

static void flag_note(const char* fmt, ...) {
    size_t used = strlen(g_flag_notes);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_flag_notes + used, sizeof(g_flag_notes) - used, fmt, ap);
    va_end(ap);
}

// Whether v is one of llm.c's model descriptors: d<N>, gpt2:d<N>, gpt3:c<N> (config_from_name knows which exist).
static int llmc_descriptor(const char* v) {
    const char* digits = v[0] == 'd' ? v + 1 : strncmp(v, "gpt2:d", 6) == 0 || strncmp(v, "gpt3:c", 6) == 0 ? v + 6 : NULL;
    if (!digits || !*digits) { return 0; }
    for (const char* q = digits; *q; q++) { if (!isdigit((unsigned char)*q)) { return 0; } }
    return 1;
}

static const FlagSpec* flag_named(const char* name) {
    for (int k = 0; k < NUM_FLAGS; k++) { if (strcmp(FLAGS[k].name, name) == 0) { return &FLAGS[k]; } }
    fatal("internal: no flag --%s", name);
    return NULL;
}

// llm.c's flags without a counterpart in the table (the list above, but -r and -e): consumes argv[*i] and its value
// and returns 1, or returns 0 if argv[*i] is none of them.
static int llmc_other_flag(Config* c, int argc, char** argv, int* i) {
    static const char* const names[] = {"-h", "-f", "-ge", "-lg", "-w", "-pi", "-pn", "-pr", "-pg", "-pf", "-ps"};
    const char* a = argv[*i];
    int known = 0;
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) { known |= strcmp(a, names[k]) == 0; }
    if (!known) { return 0; }
    if (*i + 1 >= argc) { fatal("llm.c's flag %s needs a value", a); }
    const char* v = argv[++*i];
    if (strcmp(a, "-pi") == 0) {
        if (strcmp(v, "mpi") != 0) {
            fatal("-pi %s: llm.c's NCCL start-up without MPI (tcp, fs) is not supported: start the processes with mpirun "
                  "(on several machines: scripts/multihost.sh), which is llm.c's default (-pi mpi)", v);
        }
        return 1;
    }
    if (a[1] == 'p') {
        fatal("%s %s: llm.c's process layout for a start-up without MPI is not supported: mpirun gives every process "
              "its rank and the number of processes (on several machines: scripts/multihost.sh)", a, v);
    }
    char* end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end != '\0') { fatal("llm.c's flag %s: '%s' is not an integer", a, v); }
    if (strcmp(a, "-h") == 0) { c->llmc_hellaswag = n != 0; }
    else if (strcmp(a, "-w") == 0) {
        if (n == 0) { fatal("-w 0: this trainer always keeps fp32 master weights beside a 16-bit compute copy (--dtype bf16/fp16); for no 16-bit copy at all, use --dtype fp32"); }
    } else if (strcmp(a, "-f") == 0) {
        flag_note("note: -f %ld (llm.c's TF32 switch) changes nothing here: fp32 matmuls are exact fp32, and the fast path is --dtype bf16\n", n);
    } else if (strcmp(a, "-ge") == 0) {
        flag_note("note: -ge %ld (llm.c's GELU fusion) changes nothing here: the GPU build always fuses GELU into the matmuls (cuBLASLt's GELU_AUX and DGELU epilogues) where the recomputation allows\n", n);
    } else if (strcmp(a, "-lg") == 0) {
        flag_note("note: -lg %ld (llm.c's GPU-utilisation log) is not implemented here: nvidia-smi reports the same\n", n);
    }
    return 1;
}

// Parses argv into c. Every value is checked: numbers with strtol/strtod and a range, strings with a bound.
static void parse_flags(Config* c, int argc, char** argv) {
    int seen[NUM_FLAGS] = {0};
    g_flag_notes[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        int llmc_h = strcmp(a, "-h") == 0 && i + 1 < argc && (strcmp(argv[i + 1], "0") == 0 || strcmp(argv[i + 1], "1") == 0);
        if (strcmp(a, "--help") == 0 || (strcmp(a, "-h") == 0 && !llmc_h)) { print_help(); exit(0); }
        if (strcmp(a, "--version") == 0) { print_version("train_gpt"); exit(0); }
        if (llmc_other_flag(c, argc, argv, &i)) { continue; }
        const FlagSpec* f = NULL;
        for (int k = 0; k < NUM_FLAGS && !f; k++) {
            if ((a[0] == '-' && a[1] == '-' && strcmp(a + 2, FLAGS[k].name) == 0) ||
                (FLAGS[k].alias && strcmp(a, FLAGS[k].alias) == 0)) { f = &FLAGS[k]; }
        }
        if (!f && strcmp(a, "-r") == 0) { f = flag_named("recompute"); }
        if (!f) { fatal("unknown flag '%s' (see --help)", a); }
        if (strcmp(a, "-e") == 0 && i + 1 < argc && llmc_descriptor(argv[i + 1]) && !file_exists(argv[i + 1])) { f = flag_named("model"); }
        if (seen[f - FLAGS]++) { fatal("flag --%s is given twice ('%s' repeats it)", f->name, a); }
        if (i + 1 >= argc) { fatal("flag --%s needs a value", f->name); }
        const char* v = argv[++i];
        if (strcmp(a, "-r") == 0 && strcmp(v, "2") == 0) { v = "1"; } // llm.c's GELU and LayerNorm: our mode 1
        char* p = (char*)c + f->offset;
        if (f->type == FLAG_STR) {
            if (strlen(v) + 1 > f->str_cap) { fatal("--%s: value longer than %zu characters", f->name, f->str_cap - 1); }
            strcpy(p, v);
            continue;
        }
        char* end = NULL;
        errno = 0;
        double x;
        if (f->type == FLAG_INT) {
            long long n = strtoll(v, &end, 10);
            if (end == v || *end != '\0' || errno == ERANGE) { fatal("--%s: '%s' is not an integer", f->name, v); }
            x = (double)n;
        } else {
            x = strtod(v, &end);
            if (end == v || *end != '\0' || errno == ERANGE || !isfinite(x)) { fatal("--%s: '%s' is not a number", f->name, v); }
        }
        if (!(x >= f->lo && x <= f->hi)) { fatal("--%s: %s is out of range [%g, %g]", f->name, v, f->lo, f->hi); }
        if (f->type == FLAG_INT) {
            if (f->offset == offsetof(Config, total_batch_size)) { *(long*)p = (long)x; }
            else { *(int*)p = (int)x; }
        } else {
            *(float*)p = (float)x;
        }
    }
    if (strcmp(c->lr_schedule, "cosine") != 0 && strcmp(c->lr_schedule, "linear") != 0 && strcmp(c->lr_schedule, "constant") != 0 &&
        strcmp(c->lr_schedule, "wsd") != 0) {
        fatal("--lr-schedule: '%s' is not one of cosine, linear, constant, wsd", c->lr_schedule);
    }
    if (strcmp(c->nan_policy, "stop") != 0 && strcmp(c->nan_policy, "skip") != 0) {
        fatal("--nan-policy: '%s' is not one of stop, skip", c->nan_policy);
    }
    if (dtype_parse(c->dtype) < 0) { fatal("--dtype: '%s' is not one of fp32, bf16, fp16", c->dtype); }
    if (strcmp(c->comm, "auto") != 0 && strcmp(c->comm, "mpi") != 0 && strcmp(c->comm, "staged") != 0 && strcmp(c->comm, "nccl") != 0) {
        fatal("--comm: '%s' is not one of auto, mpi, staged, nccl", c->comm);
    }
    if (strcmp(c->attention, "auto") != 0 && strcmp(c->attention, "native") != 0 && strcmp(c->attention, "cudnn") != 0) {
        fatal("--attention: '%s' is not one of auto, native, cudnn", c->attention);
    }
#ifndef KERNELS_CUDA
    if (strcmp(c->attention, "cudnn") == 0) { fatal("--attention cudnn: GPU builds only (train_gpt_cu with cuDNN); the CPU has native attention"); }
#endif
    const char* scaler_flags[] = {"loss-scale", "loss-scale-growth", "loss-scale-backoff", "loss-scale-window"};
    for (int k = 0; k < NUM_FLAGS; k++) {
        for (int j = 0; j < 4; j++) {
            if (seen[k] && strcmp(FLAGS[k].name, scaler_flags[j]) == 0 && dtype_parse(c->dtype) != DTYPE_FP16) {
                fatal("--%s sets the fp16 loss scaler: it needs --dtype fp16 (bf16 and fp32 need no loss scaling)", scaler_flags[j]);
            }
        }
    }
    // --export-hf converts a model and exits: it takes --init and nothing that belongs to a training run
    if (c->export_hf[0]) {
        if (!c->init[0]) { fatal("--export-hf %s needs --init FILE (the model to convert)", c->export_hf); }
        for (int k = 0; k < NUM_FLAGS; k++) {
            const char* nm = FLAGS[k].name;
            if (seen[k] && strcmp(nm, "init") != 0 && strcmp(nm, "export-hf") != 0 && strcmp(nm, "threads") != 0) {
                fatal("--export-hf converts the --init model and exits: --%s does nothing with it (use: train_gpt --init FILE --export-hf DIR)", nm);
            }
        }
    }
    // llm.c's -h 1: HellaSwag from its path at every validation step
    if (c->llmc_hellaswag) {
        if (c->hellaswag[0]) { fatal("-h 1 and --hellaswag %s: give one (-h 1 is llm.c's: '%s' at every validation step)", c->hellaswag, LLMC_HELLASWAG_PATH); }
        if (c->val_every == 0) { fatal("-h 1 evaluates HellaSwag at every validation step, as llm.c does: it needs -v N (--val-every)"); }
        snprintf(c->hellaswag, sizeof(c->hellaswag), "%s", LLMC_HELLASWAG_PATH);
        c->hellaswag_every = c->val_every;
        for (int k = 0; k < NUM_FLAGS; k++) { seen[k] += strcmp(FLAGS[k].name, "hellaswag") == 0 || strcmp(FLAGS[k].name, "hellaswag-every") == 0; }
    }
    for (int k = 0; k < NUM_FLAGS; k++) { c->model_given |= seen[k] && strcmp(FLAGS[k].name, "model") == 0; }
    if (c->auto_resume && !c->out[0]) { fatal("--auto-resume 1 (-y 1) resumes from --out DIR: give --out (-o)"); }
    if (c->auto_resume && c->resume[0]) { fatal("--auto-resume 1 (-y 1) and --resume %s: give one", c->resume); }
    if (c->major_checkpoint_every > 0 && c->checkpoint_every == 0) {
        fatal("--major-checkpoint-every %d (-nm) keeps some checkpoints for good: it needs --checkpoint-every N (-n)", c->major_checkpoint_every);
    }
    // flags that do nothing without another: refuse rather than ignore them
    if (c->checkpoint_every > 0 && !c->out[0]) { fatal("--checkpoint-every %d needs --out DIR (where to write the checkpoints)", c->checkpoint_every); }
    if (c->out[0] && c->checkpoint_every == 0 && !c->bench) { fatal("--out %s needs --checkpoint-every N (how often to write a checkpoint)", c->out); }
    if (c->val[0] && c->val_every == 0) { fatal("--val is given but --val-every is 0: say how often to evaluate (--val-every N)"); }
    if (c->val_every > 0 && !c->val[0] && !c->bench) { fatal("--val-every %d needs --val PATTERN (the validation shards)", c->val_every); }
    if (c->hellaswag[0] && c->hellaswag_every == 0) { fatal("--hellaswag %s needs --hellaswag-every N (how often to evaluate it)", c->hellaswag); }
    if (c->hellaswag_every > 0 && !c->hellaswag[0]) { fatal("--hellaswag-every %d needs --hellaswag FILE (the eval file)", c->hellaswag_every); }
    // the z-score of a value among W (itself included) is at most sqrt(W - 1): a threshold at or above it never fires
    const char* zflag[2] = {"skip-loss-z", "skip-grad-z"};
    float zval[2] = {c->skip_loss_z, c->skip_grad_z};
    for (int j = 0; j < 2; j++) {
        if (zval[j] > 0.0f && zval[j] >= sqrtf((float)(c->outlier_window - 1))) {
            fatal("--%s %g can never skip a step: a z-score among --outlier-window %d values is at most sqrt(%d) = %.2f", zflag[j],
                  zval[j], c->outlier_window, c->outlier_window - 1, sqrtf((float)(c->outlier_window - 1)));
        }
    }
    for (int k = 0; k < NUM_FLAGS; k++) {
        if (seen[k] && strcmp(FLAGS[k].name, "outlier-window") == 0 && c->skip_loss_z == 0.0f && c->skip_grad_z == 0.0f) {
            fatal("--outlier-window %d sets the outlier guard's window: it needs --skip-loss-z or --skip-grad-z", c->outlier_window);
        }
    }
    if (c->hellaswag_details[0] && !c->eval_hellaswag[0]) { fatal("--hellaswag-details %s needs --eval-hellaswag FILE", c->hellaswag_details); }
    // --eval-hellaswag evaluates a model and exits: it takes the model, its layout and the length limit, nothing that
    // belongs to a training run
    if (c->eval_hellaswag[0]) {
        static const char* const allowed[] = {"init", "model", "seed", "eval-hellaswag", "hellaswag-details", "seq-len", "dtype", "attention",
                                              "comm", "comm-timeout", "threads", "zero", "tp", "sequence-parallel", "pp", "recompute"};
        for (int k = 0; k < NUM_FLAGS; k++) {
            int ok = 0;
            for (size_t j = 0; j < sizeof(allowed) / sizeof(allowed[0]); j++) { ok |= strcmp(FLAGS[k].name, allowed[j]) == 0; }
            if (seen[k] && !ok) { fatal("--eval-hellaswag evaluates a model and exits: --%s does nothing with it", FLAGS[k].name); }
        }
        // the rows' length limit: --seq-len when given, else the model's context (0 here, resolved with the model)
        int seq_seen = 0;
        for (int k = 0; k < NUM_FLAGS; k++) { seq_seen |= seen[k] && strcmp(FLAGS[k].name, "seq-len") == 0; }
        if (!seq_seen) { c->seq_len = 0; }
    }
    if (strcmp(c->plan_storage, "build") != 0 && strcmp(c->plan_storage, "gpu") != 0) { fatal("--plan-storage: '%s' is not one of build, gpu", c->plan_storage); }
    for (int k = 0; k < NUM_FLAGS && !c->plan; k++) {
        if (seen[k] && strncmp(FLAGS[k].name, "plan-", 5) == 0) { fatal("--%s configures the planner: it needs --plan 1", FLAGS[k].name); }
    }
    // --grad-compress: PowerSGD all-reduces factors of whole gradient matrices, so every data-parallel rank must hold
    // whole gradients (DDP or ZeRO-1, as PyTorch's hook needs DDP)
    char gcerr[256];
    int psgd_rank = powersgd_spec_rank(c->grad_compress, gcerr, sizeof(gcerr));
    if (psgd_rank < 0) { fatal("--grad-compress %s", gcerr); }
    if (psgd_rank == 0 && strcmp(c->grad_compress, "none") != 0 && strcmp(c->grad_compress, "bf16") != 0) {
        fatal("--grad-compress: unknown method '%s' (none, bf16, powersgd:R)", c->grad_compress);
    }
    if (psgd_rank > 0 && c->zero >= 2) {
        fatal("--grad-compress %s with --zero %d: PowerSGD all-reduces low-rank factors of whole gradient matrices, so every "
              "rank must keep the whole gradient: use --zero 0 or --zero 1 (ZeRO-2 reduce-scatters and drops it every micro-step)",
              c->grad_compress, c->zero);
    }
    if (psgd_rank > 0 && (c->tp > 1 || c->pp > 1)) {
        fatal("--grad-compress %s with --tp %d --pp %d: PowerSGD compresses data-parallel reductions of whole matrices, and is "
              "not supported with tensor or pipeline parallelism yet (use none or bf16 there)", c->grad_compress, c->tp, c->pp);
    }
    if (psgd_rank > 0 && dtype_parse(c->dtype) == DTYPE_FP16) {
        fatal("--grad-compress %s with --dtype fp16: the error feedback would carry loss-scaled gradients across changes of the "
              "loss scale; use --dtype bf16 or fp32 with PowerSGD", c->grad_compress);
    }
}

// The configuration as "name=value" lines (per-rank flags excluded): hashed and compared across ranks.
static void config_serialize(const Config* c, char* buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < NUM_FLAGS; i++) {
        if (FLAGS[i].per_rank) { continue; }
        char v[1100];
        flag_value_string(&FLAGS[i], c, v, sizeof(v));
        int w = snprintf(buf + n, cap - n, "%s=%s\n", FLAGS[i].name, v);
        if (w < 0 || (size_t)w >= cap - n) { fatal("configuration too long to serialize"); }
        n += w;
    }
}

// ----------------------------------------------------------------------------
// The model layout (the parameter table, one rank's share, the tensor-parallel runs, views, named sizes)
#include "layout.h"       // defines: GPTConfig, ParamEntry, ParamLayout, layout_build_3d, tp_run, views_bind, config_from_name

// ----------------------------------------------------------------------------
// Parameters in and out: initialisation, llm.c model files, parameter streams (the logical one across tp and pp)
#include "model_files.h"  // defines: init_params_stream, model_read_header, model_load_stream, model_save_stream, ShareStream
// Hugging Face GPT-2 checkpoints (safetensors + config.json), in and out: needs the layout and check_finite_tensor
#include "hf_gpt2.h"      // defines: hf_is_checkpoint_path, hf_supported, HfCheckpoint, hf_open, hf_load_params, hf_export

// ----------------------------------------------------------------------------
// Activations: one allocation, carved from a size table generated by an X-macro. Sized for (B, T) at most; a
// forward with smaller B*T packs the same buffers densely.
// Recomputation (--recompute) shrinks the per-layer families to one layer's worth, reused by every layer: L1 layers
// of LayerNorm and GELU outputs (1 when recompute >= 1: backward recomputes them from the kept statistics and the
// MLP pre-activation), L2 layers of everything else inside a block (1 when recompute == 2: backward reruns the
// block's forward from its input, residual3 of the layer before, which is always kept).

// Under tensor parallelism (--tp) every rank holds its share of the split layers' activations: qkv, the attention
// output and its log-sum-exps, the MLP's hidden activations and the logits have Ct = C/tp channels, NHt = NH/tp
// heads, Vpt = Vp/tp vocabulary columns; the rest (the residual stream, LayerNorms) is replicated, R = BT rows. With
// --sequence-parallel that region is split along the tokens instead: R = BT/tp rows per rank, and the whole rows a
// column-parallel matmul needs are all-gathered into `gathered` when needed (in forward and again in backward).

// Pipeline parallelism (--pp) keeps the activations of several micro-batches alive at once (the schedule says how
// many): the families marked `kept` below, from a chunk's forward to its backward, get one copy per micro-batch in
// flight (a slot, sized for the largest chunk this rank holds, L blocks); the scratch families are shared. Without
// pipelining there is one slot holding every block. The LM head's scratch exists only where the head is.

// name, element type, 1 if the type is floatX (stored in --dtype on a GPU), 1 if kept per micro-batch, element count
#define GPT_ACTIVATIONS(X) \
    X(encoded,   floatX,  1, 1, (size_t)R * C)            /* (R,C) the chunk's input: the embedding, or the previous stage's output */ \
    X(ln1,       floatX,  1, 1, (size_t)L1 * R * C)       /* (L1,R,C) */ \
    X(ln1_mean,  float,   0, 1, (size_t)L2 * R)           /* (L2,R) */ \
    X(ln1_rstd,  float,   0, 1, (size_t)L2 * R)           /* (L2,R) */ \
    X(qkv,       floatX,  1, 1, (size_t)L2 * BT * 3 * Ct) /* (L2,B,T,3Ct) */ \
    X(atty,      floatX,  1, 1, (size_t)L2 * BT * Ct)     /* (L2,B,T,Ct) attention output before the projection */ \
    X(att_lse,   float,   0, 1, (size_t)L2 * lse_stride((size_t)B * NHt * T)) /* (L2,B,NHt,T) log-sum-exp of each attention row */ \
    X(residual2, floatX,  1, 1, (size_t)L2 * R * C)       /* (L2,R,C) after the attention residual */ \
    X(ln2,       floatX,  1, 1, (size_t)L1 * R * C)       /* (L1,R,C) */ \
    X(ln2_mean,  float,   0, 1, (size_t)L2 * R)           /* (L2,R) */ \
    X(ln2_rstd,  float,   0, 1, (size_t)L2 * R)           /* (L2,R) */ \
    X(fch,       floatX,  1, 1, (size_t)L2 * BT * 4 * Ct) /* (L2,B,T,4Ct) MLP pre-activation */ \
    X(fch_gelu,  floatX,  1, 1, (size_t)L1 * BT * 4 * Ct) /* (L1,B,T,4Ct) */ \
    X(residual3, floatX,  1, 1, (size_t)L * R * C)        /* (L,R,C) block outputs */ \
    X(lnf,       floatX,  1, 1, (size_t)R * C)            /* (R,C) final LayerNorm (scratch for a chunk's last block elsewhere) */ \
    X(lnf_mean,  float,   0, 1, (size_t)R)                /* (R) */ \
    X(lnf_rstd,  float,   0, 1, (size_t)R)                /* (R) */ \
    X(tokens,    int32_t, 0, 1, (size_t)BT)               /* (B,T) input tokens of the forward */ \
    X(targets,   int32_t, 0, 1, (size_t)BT)               /* (B,T) their targets */ \
    X(losses,    float,   0, 0, (size_t)BT)               /* (B,T) per-token loss */ \
    X(proj,      floatX,  1, 0, (size_t)BT * C)           /* (B,T,C) projection output before the residual add */ \
    X(dres,      floatX,  1, 0, (size_t)R * C)            /* (R,C) gradient of the residual stream */ \
    X(dtmp,      floatX,  1, 0, (size_t)BT * C)           /* (B,T,C) gradient scratch */ \
    X(dqkv,      floatX,  1, 0, (size_t)BT * 3 * Ct)      /* (B,T,3Ct) */ \
    X(dfch,      floatX,  1, 0, (size_t)BT * 4 * Ct)      /* (B,T,4Ct) */ \
    X(gathered,  floatX,  1, 0, (size_t)(R < BT) * BT * C) /* (B,T,C) sequence parallel: rows all-gathered from R */ \
    X(logits,    floatX,  1, 0, (size_t)H * chunk_rows * Vpt) /* (chunk_rows,Vpt) classifier chunk, logits then their gradient */ \
    X(logits_row, float,   0, 0, (size_t)H * Vpt)          /* (Vpt) one row of logits, for sampling */ \
    X(ce_stats,  float,   0, 0, (size_t)H * (Vpt < Vp) * 3 * chunk_rows) /* tensor parallel: per-row softmax statistics */ \
    X(scalars,   double,  0, 0, (size_t)2)                /* [0] sum of the step's token losses, read once per step */

typedef struct {
#define X_FIELD(name, type, fx, kept, size) type* name;
    GPT_ACTIVATIONS(X_FIELD)
#undef X_FIELD
    void* base;
    size_t total_bytes;  // all slots and the scratch
    size_t slot_bytes;   // one slot's kept families
    int nslots;
    int B, T;            // allocated for at most this
    int chunk_rows;
    int recompute;       // 0, 1, 2 (--recompute)
    int layers;          // blocks per slot (the largest chunk this rank holds)
    int L1, L2;          // layers held by the L1 and L2 families above (layers, or 1 when recomputed)
    int tp, sp;          // tensor-parallel size, sequence parallelism (the shapes above)
    float* host;         // tp > 1: host staging of the tensor-parallel collectives (host_floats of them)
    size_t host_floats;
} Activations;

// Floats from one layer's attention log-sum-exps to the next: n rounded up to 16 bytes, the alignment cuDNN is
// promised for its Stats tensor (with 25 heads, B 1 and an odd T, n floats would leave every other layer's misaligned).
static size_t lse_stride(size_t n) { return (n + 3) & ~(size_t)3; }

// Layer l's slot in a family that holds `layers` layers (1: every layer shares slot 0).
static size_t act_slot(int layers, int l) { return layers == 1 ? 0 : (size_t)l; }

// Rows of the classifier chunk: as many as fit in the backend's logits budget (64 MB on the CPU, where the chunk
// stays in cache-friendly sizes; 512 MB on a GPU, where bigger matmuls run faster), at least 1, at most BT.
// Vp: the vocabulary columns this rank computes.
static int classifier_chunk_rows(int BT, int Vp) {
    long rows = (long)(KERNELS_LOGITS_CHUNK_BYTES / (sizeof(floatX) * (size_t)Vp));
    if (rows < 1) { rows = 1; }
    if (rows > BT) { rows = BT; }
    return (int)rows;
}

// The shape of a rank's activations: tensor parallelism, sequence parallelism, the blocks per slot, whether the
// LM head is here, the slots (micro-batches in flight).
typedef struct { int tp, sp, layers, head, nslots; } ActShape;

// Bytes of each activation family for one slot (sizes, optional) each rounded up to 64 bytes, and in total with
// `nslots` copies of the kept ones: the table's element counts times their types' sizes on this backend (so what
// the memory table prints is what is allocated). dtype >= 0: with floatX stored in that type instead (what a GPU
// build allocates for that --dtype).
static size_t activations_bytes_shape(const GPTConfig* g, const ActShape* sh, int B, int T, int recompute, int dtype, size_t* sizes) {
    size_t BT = (size_t)B * T, C = g->channels, L = sh->layers, Vp = g->padded_vocab_size, H = sh->head;
    size_t Ct = C / sh->tp, NHt = (size_t)g->num_heads / sh->tp, Vpt = Vp / sh->tp, R = sh->sp ? BT / sh->tp : BT;
    size_t L1 = recompute >= 1 ? 1 : L, L2 = recompute == 2 ? 1 : L;
    size_t chunk_rows = classifier_chunk_rows((int)BT, (int)Vpt);
    size_t total = 0;
    int i = 0;
#define X_SIZE(name, type, fx, kept, size) { \
        size_t s_ = mulSize((size), sizeof(type)); s_ = (s_ + 63) / 64 * 64; if (sizes) { sizes[i] = s_; } \
        size_t d_ = dtype < 0 ? s_ : s_ / sizeof(type) * ((fx) ? dtype_bytes(dtype) : sizeof(type)); \
        total += (kept) ? d_ * (size_t)sh->nslots : d_; i++; }
    GPT_ACTIVATIONS(X_SIZE)
#undef X_SIZE
    return total;
}

static size_t activations_bytes_tp(const GPTConfig* g, int tp, int sp, int B, int T, int recompute, size_t* sizes) {
    ActShape sh = {tp, sp, g->num_layers, 1, 1};
    return activations_bytes_shape(g, &sh, B, T, recompute, -1, sizes);
}

static size_t activations_bytes(const GPTConfig* g, int B, int T, int recompute, size_t* sizes) {
    return activations_bytes_tp(g, 1, 0, B, T, recompute, sizes);
}

static size_t activations_device_bytes_tp(const GPTConfig* g, int tp, int sp, int B, int T, int recompute, int dtype) {
    ActShape sh = {tp, sp, g->num_layers, 1, 1};
    return activations_bytes_shape(g, &sh, B, T, recompute, dtype, NULL);
}

static size_t activations_device_bytes(const GPTConfig* g, int B, int T, int recompute, int dtype) {
    return activations_device_bytes_tp(g, 1, 0, B, T, recompute, dtype);
}

// One allocation: the scratch families, then sh->nslots copies of the kept ones. `a` points at slot 0;
// activations_slot gives the others.
static void activations_alloc_shape(Activations* a, const KernelCtx* ctx, const GPTConfig* g, const ActShape* sh, int B, int T, int recompute) {
    size_t sizes[64];
    memset(a, 0, sizeof(*a));
    a->total_bytes = activations_bytes_shape(g, sh, B, T, recompute, -1, sizes);
    a->recompute = recompute;
    a->layers = sh->layers;
    a->L1 = recompute >= 1 ? 1 : sh->layers;
    a->L2 = recompute == 2 ? 1 : sh->layers;
    a->tp = sh->tp;
    a->sp = sh->sp;
    a->nslots = sh->nslots;
    a->base = dev_alloc(ctx, a->total_bytes);
    char* p = (char*)a->base;
    int i = 0;
#define X_CARVE(name, type, fx, kept, size) if (!(kept)) { a->name = (type*)(void*)p; p += sizes[i]; } i++;
    GPT_ACTIVATIONS(X_CARVE)
#undef X_CARVE
    i = 0;
    a->slot_bytes = 0;
#define X_CARVE(name, type, fx, kept, size) if (kept) { a->name = (type*)(void*)p; p += sizes[i]; a->slot_bytes += sizes[i]; } i++;
    GPT_ACTIVATIONS(X_CARVE)
#undef X_CARVE
    a->B = B;
    a->T = T;
    a->chunk_rows = classifier_chunk_rows(B * T, g->padded_vocab_size / sh->tp);
    // the largest staging: an all-gather or reduce-scatter of (B,T,C) rows with its R-row side, or the statistics of
    // a logits chunk, or a whole row of logits
    a->host = NULL;
    a->host_floats = 0;
    if (sh->tp > 1) {
        size_t BTC = (size_t)B * T * g->channels;
        a->host_floats = 2 * BTC + 3 * (size_t)a->chunk_rows + (size_t)g->padded_vocab_size;
        a->host = (float*)dev_host_alloc(ctx, mulSize(a->host_floats, sizeof(float)));
    }
}

// Slot k of an allocation (k < nslots): the same scratch, the k-th copy of the kept families.
static Activations activations_slot(const Activations* a0, int k) {
    Activations a = *a0;
#define X_SHIFT(name, type, fx, kept, size) if (kept) { a.name = (type*)(void*)((char*)a0->name + (size_t)k * a0->slot_bytes); }
    GPT_ACTIVATIONS(X_SHIFT)
#undef X_SHIFT
    return a;
}

static void activations_alloc_tp(Activations* a, const KernelCtx* ctx, const GPTConfig* g, int tp, int sp, int B, int T, int recompute) {
    ActShape sh = {tp, sp, g->num_layers, 1, 1};
    activations_alloc_shape(a, ctx, g, &sh, B, T, recompute);
}

static void activations_alloc(Activations* a, const KernelCtx* ctx, const GPTConfig* g, int B, int T, int recompute) {
    activations_alloc_tp(a, ctx, g, 1, 0, B, T, recompute);
}

// ----------------------------------------------------------------------------
// The model: parameters, gradients, activations, and the views into them.

typedef struct Pipeline Pipeline; // pipeline_train.h: the schedule, slots and messages of a pipeline stage

typedef struct {
    KernelCtx ctx;        // the backend's execution context (--dtype lives in it: ctx.dtype)
    ParamLayout layout;   // this rank's parameters (its tensor-parallel share)
    ParamLayout glayout;  // the whole model's (logical, llm.c's): what files hold; the same as layout when tp is 1
    GPTConfig cfg;
    // tensor parallelism (--tp): the group (NULL when tp is 1), sequence parallelism, this rank's vocabulary rows,
    // and the local ranges of gradients this rank adds to the global norm (NULL: all of them; the other ranks of a
    // tensor-parallel group leave out the replicated tensors, which rank 0 counts once)
    int tp, tp_rank, sp;
    CommGroup* tp_group;
    int vocab_lo, vocab_n;
    // pipeline parallelism (--pp): the group (NULL when pp is 1) and this rank's stage
    int pp, pp_rank;
    CommGroup* pp_group;
    Pipeline* pipe;       // NULL when pp is 1
    size_t (*norm_ranges)[2];
    int num_norm_ranges;
    floatX* params;       // (n_pad) flat parameters: the compute copy (the master weights too in fp32); under ZeRO-3
                          // only the owned range (S = n_pad / dp), and the views point into param_arena
    size_t param_floats;  // elements of parameter memory actually allocated (params, and ZeRO-3's arena)
    size_t workspace_bytes; // the kernels' workspaces sized for a step at start-up (kernels_reserve; 0 on the CPU)
    ParamViews p;
    // ZeRO-3 (--zero 3, zero3.h): the tensors in use are gathered from their owners into the arena, a layer at a time
    ZeroOptimizer* z3;    // NULL unless stage 3
    floatX* param_arena;  // [wte+wpe | lnfw+lnfb | layer slot 0 | layer slot 1] (arena_size)
    void* param_host;     // staged collectives: the arena's host mirror
    int pslot_layer[2];   // the layer each slot holds or is receiving (-1: none), valid until the next update
    ZeroGather pslot_gather[2];
    int resident;         // the embeddings and the final LayerNorm are gathered (until the next update)
    // gradients (fp32): stages 0/1 keep a full flat buffer; stage 2 keeps only an arena of reused regions
    float* grads;         // (n_pad) or NULL (stages 2, 3)
    float* grad_arena;    // stages 2, 3: [wte+wpe | lnfw+lnfb | layer slot 0 | layer slot 1] (arena_size)
    int arena_owner[2];   // stage 2: the bucket last bound to each layer slot (-1 none), and the slot the next takes
    int arena_next;
    size_t grad_floats;   // floats of gradient memory actually allocated (full buffer or arena)
    GradViews g;
    Activations acts;     // the activations in use: slot 0 of the allocation, or the slot of a micro-batch in flight
    Activations acts0;    // the allocation (its slot 0)
    int chunk_lo, chunk_hi; // the blocks of the chunk being run (all of them without pipelining)
    int B, T;             // shape of the last forward
} GPT;

// How the model is split over processes besides data parallelism: the tensor-parallel group and sequence
// parallelism, the pipeline group, its chunks per rank and where the blocks are cut (NULL groups: not split).
typedef struct {
    CommGroup* tp_group;
    int sp;
    CommGroup* pp_group;
    int V;                  // chunks per pipeline rank (1 unless interleaved)
    const int* chunk_first; // (pp V + 1) block boundaries of the chunks; NULL when pp is 1
    int zero3;              // the parameters are sharded over the data-parallel ranks (ZeRO-3)
    const double* planned;  // GPU builds: the planner's four families for this rank, checked against the device's free
                            // memory before any allocation (gpt__check_device_memory); NULL: not checked
    int B;                  // the micro-batch the kernels' workspaces are sized for up front (kernels_reserve); 0: none
    const char* attention;  // --attention, set before the workspaces are sized (cuDNN's are its plans'); NULL: auto
} ModelSplit;

// Whether tensor e's gradient enters this rank's part of the global norm (see gpt_alloc_params_split).
static int gpt_norm_counts(const GPT* m, const ParamEntry* e) {
    if (e->tp_split == TP_NONE && m->tp_rank > 0) { return 0; }
    if (m->pp > 1 && m->pp_rank == m->pp - 1 && strcmp(e->name, "wte") == 0) { return 0; }
    return 1;
}

// Parameter memory for a ZeRO stage, in elements of the compute copy: the whole flat buffer (n_pad), or under
// stage 3 the owned range and the arena the tensors in use are gathered into.
static size_t gpt_param_floats(const ParamLayout* pl, int stage, int dp) {
    size_t n_pad = zero_padded_size(pl->num_params, dp);
    return stage < 3 ? n_pad : n_pad / dp + arena_size(pl);
}

#ifdef KERNELS_CUDA
// Before the model's allocations, on the device the context was just made on: what the planner counts for this rank
// (fam: its four families, plan_rank_memory) must fit in what is free, else one clear message now rather than a
// cudaMalloc failing halfway. The kernels' start-up buffers (ctx->bytes) are in the count and allocated already. The
// count, with the workspaces the kernels will size for a step (reserve bytes, kernels_reserve), is what the run
// allocates (for the collectives' path --comm auto has taken by then), beside what the runtime and the libraries keep
// for themselves: a run it lets through may still run out, one it stops cannot fit.
static void gpt__check_device_memory(const KernelCtx* ctx, const double fam[4], size_t reserve) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) { return; }
    double need = fam[0] + fam[1] + fam[2] + fam[3] + (double)reserve;
    if (need - (double)ctx->bytes <= (double)free_b) { return; }
    fatal("out of memory before training: this rank needs %.3f GB on the device by the planner's count (parameters %.3f, "
          "gradients %.3f, optimizer state %.3f, activations and scratch %.3f GB) and the kernels' workspaces for a step "
          "(%.3f GB), and %.3f GB of %s's %.3f GB are free after the %.3f GB of the kernels' buffers: a smaller --batch-size, "
          "--recompute 1 or 2, a higher --zero stage, or more ranks (--tp, --pp); ./train_gpt --plan 1 --plan-storage gpu "
          "lists the layouts that fit",
          need / 1e9, fam[0] / 1e9, fam[1] / 1e9, fam[2] / 1e9, fam[3] / 1e9, reserve / 1e9, free_b / 1e9, ctx->device_name,
          total_b / 1e9, ctx->bytes / 1e9);
}
#endif

// The model's place in the groups and its execution context (storage type dtype; scratch for sequences up to T;
// on a GPU the device and its fixed workspaces), before any other allocation: what the run decides with the device
// in hand (--comm auto's path, which the memory check counts) comes between this and gpt_alloc_params_split.
static void gpt_init_ctx(GPT* m, const ModelSplit* ms, int dtype, int T, int C) {
    memset(m, 0, sizeof(*m));
    m->tp = ms->tp_group ? ms->tp_group->size : 1;
    m->tp_rank = ms->tp_group ? ms->tp_group->rank : 0;
    m->tp_group = m->tp > 1 ? ms->tp_group : NULL;
    m->sp = m->tp > 1 && ms->sp;
    m->pp = ms->pp_group ? ms->pp_group->size : 1;
    m->pp_rank = ms->pp_group ? ms->pp_group->rank : 0;
    m->pp_group = m->pp > 1 ? ms->pp_group : NULL;
    kernels_ctx_init(&m->ctx, dtype, T, C);
    if (ms->attention && kernels_set_attention(&m->ctx, ms->attention) != 0) {
        fatal("--attention %s: not available in this build (the CPU has native attention only; cudnn needs a CUDA build "
              "with cuDNN and bf16/fp16 storage)", ms->attention);
    }
}

// After gpt_init_ctx: the kernels' workspaces for a step (ms->B), checked with the planner's count against the
// device (ms->planned), then the parameter buffer, zeroed: this rank's share of the model under tensor and pipeline
// parallelism (and data parallelism under ZeRO-3).
static void gpt_alloc_params_split(GPT* m, const GPTConfig* cfg, int dp, const ModelSplit* ms, int T) {
    // the workspaces a training step's ops take, for this rank's shapes (its share of the heads and of the LayerNorms'
    // rows under tensor and sequence parallelism; the widest bias, the MLP's 4C / tp or the projections' C)
    int C = cfg->channels, tp_oc = 4 * C / m->tp;
    KernelsShapes ks = {ms->B, T, C, cfg->num_heads / m->tp, C / cfg->num_heads, m->sp ? ms->B * T / m->tp : ms->B * T,
                        tp_oc > C ? tp_oc : C, cfg->padded_vocab_size / m->tp};
    size_t reserve = ms->B > 0 ? kernels_reserve(&m->ctx, &ks, 0) : 0;
#ifdef KERNELS_CUDA
    if (ms->planned) { gpt__check_device_memory(&m->ctx, ms->planned, reserve); }
#else
    (void)reserve; // (0: the CPU's scratch is in the planner's count)
#endif
    if (ms->B > 0) { m->workspace_bytes = kernels_reserve(&m->ctx, &ks, 1); }
    m->cfg = *cfg;
    layout_build_3d(&m->layout, cfg, m->tp, m->tp_rank, m->pp, m->pp_rank, m->pp > 1 ? ms->V : 1, m->pp > 1 ? ms->chunk_first : NULL);
    layout_build(&m->glayout, cfg);
    m->vocab_n = cfg->padded_vocab_size / m->tp;
    m->vocab_lo = m->tp_rank * m->vocab_n;
    // the gradients this rank adds to the global norm: the split tensors, and the replicated ones on tensor-parallel
    // rank 0 only; the tied wte once, on the first stage (the last stage's copy has the same, summed gradient)
    int counted_all = 1;
    for (int i = 0; i < m->layout.num_tensors; i++) { counted_all &= gpt_norm_counts(m, &m->layout.table[i]); }
    if (!counted_all) {
        m->norm_ranges = (size_t(*)[2])mallocCheck(sizeof(size_t[2]) * (size_t)m->layout.num_tensors);
        size_t (*order)[2] = (size_t(*)[2])mallocCheck(sizeof(size_t[2]) * (size_t)m->layout.num_tensors);
        int n = 0;
        for (int i = 0; i < m->layout.num_tensors; i++) {
            const ParamEntry* e = &m->layout.table[i];
            if (gpt_norm_counts(m, e)) { order[n][0] = e->offset; order[n][1] = e->offset + e->rows * e->cols; n++; }
        }
        // insertion sort by offset (the table is in file order); a few hundred entries
        for (int i = 1; i < n; i++) {
            for (int j = i; j > 0 && order[j - 1][0] > order[j][0]; j--) {
                size_t t0 = order[j][0], t1 = order[j][1];
                order[j][0] = order[j - 1][0]; order[j][1] = order[j - 1][1]; order[j - 1][0] = t0; order[j - 1][1] = t1;
            }
        }
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (k > 0 && m->norm_ranges[k - 1][1] == order[i][0]) { m->norm_ranges[k - 1][1] = order[i][1]; continue; }
            m->norm_ranges[k][0] = order[i][0]; m->norm_ranges[k][1] = order[i][1]; k++;
        }
        m->num_norm_ranges = k;
        free(order);
    }
    m->param_floats = gpt_param_floats(&m->layout, ms->zero3 ? 3 : 0, dp);
    m->params = (floatX*)dev_alloc(&m->ctx, mulSize(m->param_floats, sizeof(floatX)));
    if (!ms->zero3) {
        views_bind(&m->p, &m->layout, m->params);
        return;
    }
    // ZeRO-3: the owned range first, then the arena the tensors in use are gathered into (zero3.h)
    size_t shard = zero_padded_size(m->layout.num_params, dp) / dp;
    m->param_arena = m->params + shard;
    ARENA_BIND(&m->p, &m->layout, m->param_arena, LayerParams);
    m->pslot_layer[0] = m->pslot_layer[1] = -1;
}

static void gpt_alloc_params_tp(GPT* m, const GPTConfig* cfg, int dp, CommGroup* tp_group, int sp, int dtype, int T) {
    ModelSplit ms = {tp_group, sp, NULL, 1, NULL, 0, NULL, 0, NULL};
    gpt_init_ctx(m, &ms, dtype, T, cfg->channels);
    gpt_alloc_params_split(m, cfg, dp, &ms, T);
}

static void gpt_alloc_params(GPT* m, const GPTConfig* cfg, int dp, int dtype, int T) {
    gpt_alloc_params_tp(m, cfg, dp, NULL, 0, dtype, T);
}

// The compute copy of the parameters from fp32 values in host memory (host: num_params floats, the flat layout),
// rounded to the storage type; the master weights of the owned range (when kept) get the exact values.
static void gpt_set_params(GPT* m, ZeroOptimizer* z, const float* host) {
    if (m->z3) { fatal("internal: gpt_set_params under ZeRO-3 (use the parameter stream)"); }
    params_from_f32(&m->ctx, m->params, host, m->layout.num_params);
    if (z) { zero_set_master(z, host); }
}

// The compute copy's fp32 values into host memory (num_params floats): what model files hold.
static void gpt_get_params(GPT* m, float* host) {
    if (m->z3) { fatal("internal: gpt_get_params under ZeRO-3 (use the parameter stream)"); }
    params_to_f32(&m->ctx, host, m->params, m->layout.num_params);
    dev_sync(&m->ctx);
}

// The model's parameters as a ParamStream: put writes fp32 values into the compute copy (rounded to the storage
// type) and into the master weights of the owned range; get reads the compute copy's values back. Files stream
// through it a chunk at a time (model_load_stream, model_save_stream), so no host copy of the whole model is made.
// Under ZeRO-3 a rank keeps only its owned range: put keeps that part, and get is collective over the data-parallel
// group (every rank calls it with the same range): each rank reads its part, an all-gather assembles the range.
typedef struct { GPT* m; ZeroOptimizer* z; } GptStreamTarget;

static void gpt_stream_put(void* self, size_t off, const float* x, size_t n) {
    GptStreamTarget* t = (GptStreamTarget*)self;
    if (t->m->z3) {
        const ZeroOptimizer* z3 = t->m->z3;
        size_t s = off > z3->lo ? off : z3->lo, e = off + n < z3->hi ? off + n : z3->hi;
        if (s < e) { params_from_f32(&t->m->ctx, t->m->params + (s - z3->lo), x + (s - off), e - s); }
    } else {
        params_from_f32(&t->m->ctx, t->m->params + off, x, n);
    }
    ZeroOptimizer* z = t->z;
    if (z && z->master) {
        size_t s = off > z->lo ? off : z->lo, e = off + n < z->hi ? off + n : z->hi;
        if (s < e) { dev_copy_h2d(z->ctx, z->master + (s - z->lo), x + (s - off), (e - s) * sizeof(float)); }
    }
}

static void gpt_stream_get(void* self, size_t off, float* x, size_t n) {
    GptStreamTarget* t = (GptStreamTarget*)self;
    ZeroOptimizer* z3 = t->m->z3;
    if (!z3) {
        params_to_f32(&t->m->ctx, x, t->m->params + off, n);
        dev_sync(&t->m->ctx);
        return;
    }
    size_t counts[ZERO_MAX_RANKS];
    zero__bucket_counts(z3, off, off + n, counts);
    size_t s = off > z3->lo ? off : z3->lo, e = off + n < z3->hi ? off + n : z3->hi;
    float* mine = s < e ? x + (s - off) : x;
    if (s < e) { params_to_f32(&t->m->ctx, mine, t->m->params + (s - z3->lo), e - s); }
    dev_sync(&t->m->ctx);
    comm_allgatherv_f32(z3->group, mine, x, counts);
}

// t must outlive the stream. z: NULL when there are no master weights to fill (saving, or before the optimizer).
static ParamStream gpt_stream(GPT* m, ZeroOptimizer* z, GptStreamTarget* t) {
    t->m = m;
    t->z = z;
    ParamStream s = {gpt_stream_put, gpt_stream_get, t};
    return s;
}

// Whether every parameter of the compute copy this rank keeps is finite, read a chunk at a time (under ZeRO-3
// its owned range: the caller combines the ranks' verdicts).
static int gpt_params_finite(GPT* m) {
    float* buf = (float*)mallocCheck(PARAM_CHUNK * sizeof(float));
    int ok = 1;
    size_t n = m->z3 ? m->z3->hi - m->z3->lo : m->layout.num_params;
    for (size_t off = 0; ok && off < n; off += PARAM_CHUNK) {
        size_t cnt = n - off < PARAM_CHUNK ? n - off : PARAM_CHUNK;
        params_to_f32(&m->ctx, buf, m->params + off, cnt);
        dev_sync(&m->ctx);
        for (size_t j = 0; j < cnt; j++) { ok &= isfinite(buf[j]) != 0; }
    }
    free(buf);
    return ok;
}

// Gradient memory for a ZeRO stage: the full flat buffer (stages 0, 1) or the arena (stages 2, 3).
static size_t gpt_grad_floats(const ParamLayout* pl, int stage, int dp) {
    if (stage < 2) { return zero_padded_size(pl->num_params, dp); }
    return arena_size(pl);
}

static void gpt_alloc_grads(GPT* m, int stage, int dp) {
    m->grad_floats = gpt_grad_floats(&m->layout, stage, dp);
    float* buf = (float*)dev_alloc(&m->ctx, mulSize(m->grad_floats, sizeof(float)));
    memset(&m->g, 0, sizeof(m->g));
    if (stage < 2) {
        m->grads = buf;
        grad_views_bind(&m->g, &m->layout, buf);
    } else {
        m->grad_arena = buf;
        ARENA_BIND(&m->g, &m->layout, buf, LayerGrads);
        m->arena_owner[0] = m->arena_owner[1] = -1;
        m->arena_next = 0;
    }
}

// The optimizer over this model's parameters: one segment per tensor, carrying the tensor's weight-decay flag;
// fp32 master weights when the compute copy is 16-bit.
// The collectives run on host copies of the device buffers when `staged` (see comm_is_staged).
// Under ZeRO-3 the model keeps z (its owned range is the optimizer's) and, when staged, a host mirror of its arena.
static void gpt_zero_init_staged(ZeroOptimizer* z, GPT* m, int stage, CommGroup* dp_group, int staged) {
    ZeroSegment* segs = (ZeroSegment*)mallocCheck(sizeof(ZeroSegment) * m->layout.num_tensors);
    for (int i = 0; i < m->layout.num_tensors; i++) {
        const ParamEntry* e = &m->layout.table[i];
        segs[i].offset = e->offset; segs[i].size = e->rows * e->cols; segs[i].decay = e->decay;
    }
    zero_init(z, &m->ctx, stage, dp_group, m->layout.num_params, segs, m->layout.num_tensors, m->ctx.dtype != DTYPE_FP32, staged);
    free(segs);
    if ((stage == 3) != (m->param_arena != NULL)) { fatal("internal: ZeRO stage %d on parameters allocated for %s", stage, m->param_arena ? "stage 3" : "stages 0-2"); }
    if (stage == 3) {
        m->z3 = z;
        if (staged) { m->param_host = dev_host_alloc(&m->ctx, mulSize(arena_size(&m->layout), sizeof(floatX))); }
    }
}

// Whether the collectives stage device buffers through host copies for --comm `comm`: in a GPU build unless --comm
// nccl (the MPI path), on the CPU only with --comm staged (which tests that path).
static int comm_is_staged(const char* comm) {
#ifdef KERNELS_CUDA
    return strcmp(comm, "nccl") != 0;
#else
    return strcmp(comm, "staged") == 0;
#endif
}

static void gpt_zero_init(ZeroOptimizer* z, GPT* m, int stage, CommGroup* dp_group) {
    gpt_zero_init_staged(z, m, stage, dp_group, comm_is_staged("auto"));
}

static float* gpt_grad_slot(GPT* m, int slot) { return m->grad_arena + arena_slot_offset(&m->layout, slot); }

static void gpt_free(GPT* m) {
    dev_free(&m->ctx, m->params);
    dev_host_free(&m->ctx, m->param_host);
    dev_free(&m->ctx, m->grads);
    dev_free(&m->ctx, m->grad_arena);
    dev_free(&m->ctx, m->acts.base);
    dev_host_free(&m->ctx, m->acts.host);
    m->acts.base = NULL;
    m->acts.host = NULL;
    free(m->p.layers);
    free(m->g.layers);
    free(m->norm_ranges);
    layout_free(&m->layout);
    layout_free(&m->glayout);
    kernels_ctx_free(&m->ctx);
}

// ZeRO-3: gathering the parameters in use (zero3.h, split out by topic)
#include "zero3.h"        // defines: z3_resident, z3_fetch, z3_use, z3_progress, z3_invalidate

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
    attention_forward(&m->ctx, b.atty, b.lse, b.qkv, B, T, Ct, NHt);
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
    int R = gpt_rows(m);
    if (g == 0) {
        z3_resident(m); // ZeRO-3: the embeddings (and the final LayerNorm, for the head)
        dev_copy_h2d(&m->ctx, a->tokens, host_tokens, (size_t)BT * sizeof(int32_t));
        floatX* emb = m->sp ? a->proj : a->encoded; // the whole rows, before the reduce-scatter
        encoder_forward(&m->ctx, emb, a->tokens, m->p.wte, m->tp_rank == 0 ? m->p.wpe : NULL, m->vocab_lo, m->vocab_n, B, T, C);
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

// ----------------------------------------------------------------------------
// Learning-rate schedule: linear warmup over `warmup` steps, then cosine / linear decay to lr * final_frac, or
// constant, or wsd (warmup-stable-decay, Hägele et al. 2024, as llm.c has it): constant until 80% of the steps, then
// lr_min + (1 - sqrt(r)) (lr - lr_min) with r going from 0 to 1 over the last 20%. step is 0-based.

static float lr_at(const Config* c, int step) {
    float lr = c->lr, lr_min = c->lr * c->final_lr_frac;
    if (step < c->warmup) { return lr * (step + 1) / c->warmup; }
    if (strcmp(c->lr_schedule, "constant") == 0) { return lr; }
    if (strcmp(c->lr_schedule, "wsd") == 0) {
        int decay_start = (int)(0.8f * c->steps);
        if (step < decay_start) { return lr; }
        float r = c->steps > decay_start ? (float)(step - decay_start) / (c->steps - decay_start) : 1.0f;
        if (r > 1.0f) { r = 1.0f; }
        return lr_min + (1.0f - sqrtf(r)) * (lr - lr_min);
    }
    int decay_steps = c->steps - c->warmup;
    float ratio = decay_steps > 0 ? (float)(step - c->warmup) / decay_steps : 1.0f;
    if (ratio > 1.0f) { ratio = 1.0f; }
    if (strcmp(c->lr_schedule, "linear") == 0) { return lr - (lr - lr_min) * ratio; }
    float coeff = 0.5f * (1.0f + cosf((float)M_PI * ratio));
    return lr_min + coeff * (lr - lr_min);
}

// ----------------------------------------------------------------------------
// Optimizer step: wait for the gradient reductions, global norm, clipping, sharded AdamW, parameter gather.

typedef struct {
    float grad_norm;   // before clipping (of the unscaled gradient)
    float lr;
} StepStats;

// Waits for the gradient reductions and returns the global norm of the gradients as they are held (the same value
// on every rank; non-finite if any element anywhere is).
static float grad_norm_reduced(GPT* m, ZeroOptimizer* z) {
    kernels_range_push(&m->ctx, "gradient reductions and norm");
    zero_wait_all(z);
    double sumsq = zero_grad_sumsq(z, m->grads, (const size_t(*)[2])m->norm_ranges, m->num_norm_ranges);
    if (m->tp_group) { comm_allreduce_sum_f64(m->tp_group, &sumsq, 1); } // the split tensors' parts, and rank 0's rest
    if (m->pp_group) { comm_allreduce_sum_f64(m->pp_group, &sumsq, 1); } // every stage's tensors
    float norm = (float)sqrt(sumsq);
    kernels_range_pop(&m->ctx);
    return norm;
}

// Clipping and the AdamW update (t: 1-based count of updates, for the bias correction), then the parameter gather.
// norm is the unscaled gradient's; the held gradients are loss_scale times it (1 outside fp16).
static void optimizer_update(GPT* m, ZeroOptimizer* z, const Config* c, float norm, float lr, int t, float loss_scale,
                             uint64_t sr_seed) {
    // clip as torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1
    float clip = 1.0f;
    if (c->grad_clip > 0.0f) {
        float coef = c->grad_clip / (norm + 1e-6f);
        if (coef < 1.0f) { clip = coef; }
    }
    AdamWHyper hp = {lr, 0.9f, 0.95f, 1e-8f, c->weight_decay, clip / loss_scale, t, sr_seed};
    kernels_range_push(&m->ctx, "AdamW and parameter gather");
    zero_adamw_step(z, m->params, m->grads, &hp);
    z3_invalidate(m); // ZeRO-3: the gathered copies are stale
    kernels_range_pop(&m->ctx);
}

// Both of the above, for a step that is never skipped, without loss scaling (tests).
static StepStats optimizer_step(GPT* m, ZeroOptimizer* z, const Config* c, int step) {
    StepStats st;
    st.grad_norm = grad_norm_reduced(m, z);
    st.lr = lr_at(c, step);
    optimizer_update(m, z, c, st.grad_norm, st.lr, step + 1, 1.0f, 0);
    return st;
}

// ----------------------------------------------------------------------------
// Dynamic loss scaling (--dtype fp16), with the semantics of PyTorch's torch.cuda.amp.GradScaler. The loss gradient
// is multiplied by `scale` so that small activation gradients survive fp16 (whose smallest subnormal is 2^-24);
// parameter gradients are fp32 and are divided by it inside AdamW. After each step, with found_inf meaning some
// gradient on some rank is inf or NaN (the global norm is):
//   found_inf:  the update is skipped, scale *= backoff, clean = 0
//   else:       clean += 1; when clean reaches the window, scale *= growth (if that is finite) and clean = 0
// A skipped step does not advance AdamW's update count (its bias correction), while the learning-rate schedule
// follows the step number, as PyTorch's scheduler.step() does when GradScaler skips optimizer.step().

typedef struct {
    float scale;        // the loss scale of the next step (1 when not fp16)
    int clean;          // steps without overflow since the scale last changed (GradScaler's growth tracker)
} LossScale;

static void loss_scale_update(LossScale* ls, const Config* c, int found_inf) {
    if (found_inf) {
        ls->scale *= c->loss_scale_backoff;
        ls->clean = 0;
        return;
    }
    ls->clean++;
    if (ls->clean == c->loss_scale_window) {
        float grown = ls->scale * c->loss_scale_growth;
        if (isfinite(grown)) { ls->scale = grown; }
        ls->clean = 0;
    }
}

// ----------------------------------------------------------------------------
// Checkpoints: save, tidy, load (checkpoint.h, split out by topic; it uses everything above)
#include "checkpoint.h"   // defines: TrainState, checkpoint_save, checkpoint_prune, checkpoint_latest_step, checkpoint_check_files, checkpoint_load_state
#include "sharedfs.h"     // defines: sharedfs_check_out, sharedfs_fetch_resume, sharedfs_drop_copy, sharedfs_check_data

// ----------------------------------------------------------------------------
// Pipeline parallelism: messages between stages, activation slots, the forward-only pass, the trace
#include "pipeline_train.h" // defines: Pipeline, pipeline_init, pp_send, pp_recv, pp_forward_only, pp_write_trace

// ----------------------------------------------------------------------------
// The per-rank memory of a layout, and the planner that searches layouts with it
#include "plan.h"         // defines: PlanLayout, plan_partition, plan_rank_memory, plan_run

// ----------------------------------------------------------------------------
// Evaluation and sampling

// A forward of (B,T) tokens through the whole model: on this rank, or through every pipeline stage.
static void gpt_forward_any(GPT* m, const int32_t* host_tokens, int B, int T) {
    if (m->pipe) { pp_forward_only(m->pipe, m, host_tokens, B, T); }
    else { gpt_forward(m, host_tokens, B, T); }
}

// Mean validation loss over `steps` batches; batch i is evaluated by data-parallel rank i % dp, so the batches
// and their order are the same whatever the number of ranks. Under ZeRO-3 a forward gathers layers from every
// data-parallel rank, so all of them must run as many forwards: when steps does not divide by dp, the ranks left
// without a batch in the last round run one more forward whose loss is not counted.
static float evaluate(GPT* m, DataLoader* val, int steps, ParallelContext* pc) {
    dataloader_reset(val);
    gpt_clear_loss_sum(m);
    int rounds = (steps + pc->dp - 1) / pc->dp;
    for (int i = 0; i < rounds * pc->dp; i++) {
        if (i < steps) { dataloader_next_batch(val); }
        if (i % pc->dp != pc->dp_rank) { continue; }
        if (i >= steps) {
            if (m->z3) { gpt_forward_any(m, val->inputs, val->B, val->T); } // (keeps the gathers in step; not counted)
            continue;
        }
        gpt_forward_any(m, val->inputs, val->B, val->T);
        if (m->layout.has_lnf) { gpt_eval_loss(m, val->targets); } // the last pipeline stage holds the LM head
    }
    double sum = gpt_take_loss_sum(m) / ((double)val->B * val->T); // one read-back: the sum of the batch means
    comm_allreduce_sum_f64(&pc->dp_group, &sum, 1);
    if (m->pp_group) { comm_allreduce_sum_f64(m->pp_group, &sum, 1); } // (zero on the other stages)
    return (float)(sum / steps);
}

// HellaSwag and other multiple-choice eval files (hellaswag.h): each example's endings run as rows of one or more
// forwards; the token losses of the last stage are read back once per forward and the endings' losses summed on the
// host. Example i is evaluated by data-parallel rank i % dp; every rank then holds every example's sums (an all-reduce
// in which one rank contributes each value and the others zeros, so exactly), and every rank derives the same answers
// from them: the result is the same whatever the number of ranks.
typedef struct {
    int examples;
    double acc, acc_norm;    // shares of the examples answered right by the lowest summed / mean loss
    double* sums;            // (examples, max_endings) each ending's summed loss (caller frees)
} HsResult;

// The forward shape of example e: rows of *Te tokens (its longest row, rounded up to a multiple of tp under sequence
// parallelism, which splits every forward's tokens over the group), *rows endings per forward (as many as the
// activations hold, at most all of them), *forwards forwards.
static void hellaswag_shape(const GPT* m, const HellaSwag* hs, int e, int* Te, int* rows, int* forwards) {
    int mult = m->sp ? m->tp : 1;
    int te = kernels_forward_len(&m->ctx, hellaswag_longest_row(hs, e), m->acts0.T); // (padded rows mask their targets)
    te = (te + mult - 1) / mult * mult;
    int cap = m->acts0.B * m->acts0.T / te, n = hs->ex[e].num_endings;
    *Te = te;
    *rows = cap < n ? cap : n;
    *forwards = (n + *rows - 1) / *rows;
}

// Evaluates every example (collective over the world: every rank calls it). The rows were checked against the
// activations' T when the file was loaded. Changes nothing a training step reads: the activations are overwritten
// by its next forward, the device's loss sum is cleared at its start (and here), no RNG is drawn, no data read.
// Under ZeRO-3 each forward gathers layers from every data-parallel rank, so in each round all of them run as many
// forwards as the one with the most (uncounted forwards of one token for the others), as `evaluate` does.
static HsResult evaluate_hellaswag(GPT* m, const HellaSwag* hs, ParallelContext* pc) {
    int N = hs->num_examples, W = hs->max_endings, dp = pc->dp;
    size_t cap = (size_t)m->acts0.B * m->acts0.T;
    int32_t* inputs = (int32_t*)callocCheck(cap, sizeof(int32_t));
    int32_t* targets = (int32_t*)callocCheck(cap, sizeof(int32_t));
    float* losses = (float*)mallocCheck(cap * sizeof(float));
    HsResult r;
    r.examples = N;
    r.sums = (double*)callocCheck((size_t)N * W, sizeof(double));
    int rounds = (N + dp - 1) / dp;
    for (int round = 0; round < rounds; round++) {
        int e = round * dp + pc->dp_rank, Te = 0, rows = 0, mine = 0, most = 0;
        if (e < N) { hellaswag_shape(m, hs, e, &Te, &rows, &mine); }
        most = mine;
        for (int k = 0; m->z3 && k < dp && round * dp + k < N; k++) {
            int t, rw, f;
            hellaswag_shape(m, hs, round * dp + k, &t, &rw, &f);
            if (f > most) { most = f; }
        }
        for (int f = 0; f < most; f++) {
            if (f >= mine) { // (ZeRO-3: keeps the gathers in step; not counted)
                memset(inputs, 0, sizeof(int32_t) * (size_t)m->tp);
                gpt_forward_any(m, inputs, 1, m->sp ? m->tp : 1);
                continue;
            }
            int r0 = f * rows, r1 = r0 + rows < hs->ex[e].num_endings ? r0 + rows : hs->ex[e].num_endings;
            hellaswag_fill_rows(hs, e, r0, r1, Te, inputs, targets);
            gpt_forward_any(m, inputs, r1 - r0, Te);
            if (!m->layout.has_lnf) { continue; } // the last pipeline stage holds the LM head
            gpt_eval_loss(m, targets);
            dev_copy_d2h(&m->ctx, losses, m->acts.losses, sizeof(float) * (size_t)(r1 - r0) * Te);
            dev_sync(&m->ctx);
            hellaswag_add_losses(hs, e, r0, r1, Te, losses, r.sums + (size_t)e * W);
        }
    }
    gpt_clear_loss_sum(m);
    comm_allreduce_sum_f64(&pc->dp_group, r.sums, (size_t)N * W);
    if (m->pp_group) { comm_allreduce_sum_f64(m->pp_group, r.sums, (size_t)N * W); } // (zeros on the other stages)
    int right_sum = 0, right_mean = 0;
    for (int i = 0; i < N; i++) {
        int by_sum, by_mean;
        hellaswag_predict(hs, i, r.sums + (size_t)i * W, &by_sum, &by_mean);
        right_sum += by_sum == hs->ex[i].label;
        right_mean += by_mean == hs->ex[i].label;
    }
    r.acc = (double)right_sum / N;
    r.acc_norm = (double)right_mean / N;
    free(inputs);
    free(targets);
    free(losses);
    return r;
}

// --hellaswag-details: one line per example: its position in the file, its index, label, the answers by summed
// and by mean loss, then each ending's summed loss and mean loss ('%.9g').
static void hellaswag_write_details(const char* path, const HellaSwag* hs, const HsResult* r) {
    AtomicFile af;
    atomic_open(&af, path);
    fprintf(af.fp, "# position index label answer_by_sum answer_by_mean | summed loss of each ending | mean loss of each ending\n");
    for (int i = 0; i < hs->num_examples; i++) {
        const HsExample* x = &hs->ex[i];
        const double* s = r->sums + (size_t)i * hs->max_endings;
        int by_sum, by_mean;
        hellaswag_predict(hs, i, s, &by_sum, &by_mean);
        fprintf(af.fp, "%d %d %d %d %d |", i, x->index, x->label, by_sum, by_mean);
        for (int j = 0; j < x->num_endings; j++) { fprintf(af.fp, " %.9g", s[j]); }
        fprintf(af.fp, " |");
        for (int j = 0; j < x->num_endings; j++) { fprintf(af.fp, " %.9g", s[j] / hs->ending_len[x->lens + j]); }
        fprintf(af.fp, "\n");
    }
    atomic_commit(&af);
}

// Draws toks[1..n) one at a time after the prompt toks[0] (temperature 1): token t comes from the softmax of the
// logits at position t - 1 over the real vocabulary, by inverse CDF with one uniform draw from rng.
// probs: (Vp) host scratch, receiving one row of logits per token. toks: `room` tokens (n <= room), those after the
// sampled ones any token: each forward may run longer than t (the backend's bucketed lengths, kernels_forward_len;
// sequence parallelism's multiple of tp), and a causal model's position t - 1 never sees the ones after it.
// Under tensor parallelism every rank of the group runs this together: each computes its vocabulary columns, an
// all-gather gives all of them the row, and group rank 0's draw is broadcast (every rank draws, so the RNGs stay in
// step).
static void sample_tokens(GPT* m, int32_t* toks, int n, int room, float* probs, uint64_t* rng) {
    const GPTConfig* g = &m->cfg;
    for (int t = 1; t < n; t++) {
        // sequence parallelism splits the forward's tokens over the group: a multiple of tp of them
        int tf = kernels_forward_len(&m->ctx, t, room);
        if (m->sp) { tf = (tf + m->tp - 1) / m->tp * m->tp; }
        gpt_forward_any(m, toks, 1, tf);
        if (!m->layout.has_lnf) {
            // a pipeline stage without the LM head: draws as the last stage does (the RNGs stay in step) and gets
            // the token from it
            (void)rng_uniform(rng);
            comm_broadcast(m->pp_group, &toks[t], sizeof(int32_t), m->pp - 1);
            continue;
        }
        const floatX* lnf = tp_enter(m, m->acts.lnf);
        classifier_logits_row(&m->ctx, m->acts.logits_row, lnf + (size_t)(t - 1) * g->channels, m->p.wte, g->channels, m->vocab_n);
        if (m->tp == 1) {
            dev_copy_d2h(&m->ctx, probs, m->acts.logits_row, sizeof(float) * g->padded_vocab_size);
            dev_sync(&m->ctx);
        } else {
            dev_copy_d2h(&m->ctx, m->acts.host, m->acts.logits_row, sizeof(float) * m->vocab_n);
            dev_sync(&m->ctx);
            comm_allgather_f32(m->tp_group, m->acts.host, probs, (size_t)m->vocab_n);
        }
        float mx = -INFINITY;
        for (int j = 0; j < g->vocab_size; j++) { mx = probs[j] > mx ? probs[j] : mx; }
        double sum = 0.0;
        for (int j = 0; j < g->vocab_size; j++) { probs[j] = expf(probs[j] - mx); sum += probs[j]; }
        double coin = rng_uniform(rng) * sum, cdf = 0.0;
        int next = g->vocab_size - 1;
        for (int j = 0; j < g->vocab_size; j++) { cdf += probs[j]; if (coin < cdf) { next = j; break; } }
        toks[t] = next;
        if (m->tp_group) { comm_broadcast(m->tp_group, &toks[t], sizeof(int32_t), 0); }
        if (m->pp_group) { comm_broadcast(m->pp_group, &toks[t], sizeof(int32_t), m->pp - 1); }
        if (m->z3) { comm_broadcast(m->z3->group, &toks[t], sizeof(int32_t), 0); } // (ZeRO-3: every data-parallel rank samples)
    }
}

// Samples gen_tokens tokens after an end-of-text prompt and prints them (when `print`), decoded if a tokenizer is
// loaded.
static void generate(GPT* m, const Tokenizer* tok, int have_tok, int gen_tokens, int T, uint64_t* rng, int print) {
    const GPTConfig* g = &m->cfg;
    int eot = have_tok ? (int)tok->eot_token : (g->vocab_size > 50256 ? 50256 : 0);
    int n = gen_tokens + 1 < T ? gen_tokens + 1 : T;
    int32_t* toks = (int32_t*)mallocCheck(sizeof(int32_t) * T);
    float* probs = (float*)mallocCheck(sizeof(float) * g->padded_vocab_size);
    for (int t = 0; t < T; t++) { toks[t] = eot; }
    if (m->tp_group) { comm_broadcast(m->tp_group, toks, sizeof(int32_t), 0); } // the prompt of the rank with the tokenizer
    if (m->z3) { comm_broadcast(m->z3->group, toks, sizeof(int32_t), 0); }
    sample_tokens(m, toks, n, T, probs, rng);
    if (!print) { free(toks); free(probs); return; }
    printf("sample: ");
    for (int t = 1; t < n; t++) {
        const char* piece = have_tok ? tokenizer_decode(tok, (uint32_t)toks[t]) : NULL;
        if (piece) {
            // print only printable bytes and whitespace, like llm.c's safe_printf
            for (const char* p = piece; *p; p++) {
                unsigned char ch = (unsigned char)*p;
                if (isprint(ch) || isspace(ch) || ch >= 0x80) { putchar(ch); }
            }
        } else {
            printf("%d ", toks[t]);
        }
    }
    printf("\n");
    fflush(stdout);
    free(toks);
    free(probs);
}

// ----------------------------------------------------------------------------
// Printing

static void fmt_bytes(char* buf, size_t cap, double bytes) {
    if (bytes >= 1e9) { snprintf(buf, cap, "%.2f GB", bytes / 1e9); }
    else { snprintf(buf, cap, "%.1f MB", bytes / 1e6); }
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// FLOPs per token of a training step: 6 per parameter (forward 2, backward 4) plus attention's QK^T and PV,
// 12 * L * C * T (forward and backward, the full T x T as is the custom).
static double flops_per_token(const GPT* m, int T) {
    const GPTConfig* g = &m->cfg;
    return 6.0 * (double)m->glayout.num_params + 12.0 * g->num_layers * (double)g->channels * T;
}

// ----------------------------------------------------------------------------
// main

#ifndef TRAIN_GPT_NO_MAIN

// Fault injection for the failure tests: TRAIN_GPT_FAULT="die:RANK:STEP" kills that rank at the start of that
// step (as a crash would); "hang:RANK:STEP" makes it sleep forever (as a stuck process would); "stop:RANK:STEP"
// stops the whole process (SIGSTOP, as a debugger or a frozen machine would).
static void maybe_inject_fault(int rank, int step) {
    const char* f = getenv("TRAIN_GPT_FAULT");
    if (!f) { return; }
    char kind[16];
    int r, s;
    if (sscanf(f, "%15[a-z]:%d:%d", kind, &r, &s) != 3 || r != rank || s != step) { return; }
    fprintf(stderr, "rank %d: injected fault '%s' at step %d\n", rank, kind, step);
    fflush(stderr);
    if (strcmp(kind, "die") == 0) { raise(SIGKILL); }
    if (strcmp(kind, "hang") == 0) { for (;;) { sleep(1000); } }
    if (strcmp(kind, "stop") == 0) { raise(SIGSTOP); } // every thread stops (the monitor's server too), as kill -STOP
}

// TRAIN_GPT_FAULT="KIND:RANK:STEP[:COUNT]" for KIND nan (that rank's loss and gradients become NaN, as a
// divergence would), overflow (its gradients become inf/NaN and its loss stays finite, as an fp16 overflow
// would), lossspike (the loss it reports is 4 times its own, as a bad batch's would be; its gradients stay) or
// gradspike (its loss gradient is 100 times larger: so are its parameter gradients; its loss stays), in COUNT steps
// (default 1) from STEP on. Several faults are separated by commas. (A pipeline's loss and loss gradient are its
// last stage's: the spikes take effect on a last-stage rank.)
static int fault_injected(const char* kind, int rank, int step) {
    const char* f = getenv("TRAIN_GPT_FAULT");
    for (; f && *f; f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL) {
        char k[16];
        int r, s, count = 1;
        if (sscanf(f, "%15[a-z]:%d:%d:%d", k, &r, &s, &count) < 3 || strcmp(k, kind) != 0) { continue; }
        if (r == rank && step >= s && step < s + count) { return 1; }
    }
    return 0;
}

// Creates --out (and its parents) if missing and proves it writable, at start rather than at the first checkpoint
// hours in. Rank 0 only.
static void prepare_out_dir(const char* dir) {
    make_dirs("--out", dir);
    char probe[2200];
    snprintf(probe, sizeof(probe), "%s/.write_test.%d", dir, (int)getpid());
    FILE* fp = fopen(probe, "wb");
    if (!fp) { fatal("--out %s: not writable: %s", dir, strerror(errno)); }
    fclose(fp);
    unlink(probe);
}

// Checks that every rank of `group` holds the same parameters (they must, after each optimizer step): all of them
// across a data-parallel group; the replicated tensors (LayerNorms, biases after a row-parallel layer, wpe) across a
// tensor-parallel group, whose ranks update them from identical gradients.
static int params_agree(GPT* m, CommGroup* group, int replicated_only) {
    GptStreamTarget t;
    ParamStream s = gpt_stream(m, NULL, &t);
    float* buf = (float*)mallocCheck(PARAM_CHUNK * sizeof(float));
    Checksum c;
    checksum_begin(&c, CHECKSUM_DEFAULT);
    for (int i = 0; i < m->layout.num_tensors; i++) {
        const ParamEntry* e = &m->layout.table[i];
        if (replicated_only && e->tp_split != TP_NONE) { continue; }
        size_t n = e->rows * e->cols;
        for (size_t off = 0; off < n; off += PARAM_CHUNK) {
            size_t cnt = n - off < PARAM_CHUNK ? n - off : PARAM_CHUNK;
            s.get(s.self, e->offset + off, buf, cnt);
            checksum_add(&c, buf, cnt * sizeof(float));
        }
    }
    free(buf);
    uint64_t sum = checksum_end(&c);
    uint64_t root = sum;
    comm_broadcast(group, &root, sizeof(root), 0);
    double bad = root != sum ? 1.0 : 0.0;
    comm_allreduce_max_f64(group, &bad, 1);
    return bad == 0.0;
}

static void check_config_agreement(ParallelContext* pc, const Config* c) {
    char mine[16384], root[16384];
    config_serialize(c, mine, sizeof(mine));
    memcpy(root, mine, sizeof(mine));
    comm_broadcast(&pc->world, root, sizeof(root), 0);
    double bad = strcmp(mine, root) != 0 ? 1.0 : 0.0;
    if (bad) {
        // name the first flag that differs
        char *a = mine, *b = root;
        while (*a && *b) {
            char* ea = strchr(a, '\n');
            char* eb = strchr(b, '\n');
            if (!ea || !eb) { break; }
            *ea = '\0'; *eb = '\0';
            if (strcmp(a, b) != 0) {
                fprintf(stderr, "error: rank %d: configuration differs from rank 0: --%s here, --%s on rank 0\n", pc->world_rank, a, b);
                break;
            }
            a = ea + 1; b = eb + 1;
        }
    }
    comm_allreduce_max_f64(&pc->world, &bad, 1);
    if (bad) {
        if (pc->world_rank == 0) { fprintf(stderr, "error: ranks disagree on the configuration (see above); all ranks must get the same flags\n"); }
        parallel_finalize(pc);
        exit(1);
    }
}

// ----------------------------------------------------------------------------
// The parts of main: the plan printed at start, one training step, the benchmark report

// What this rank allocates, in bytes: [0] the compute copy of the parameters (floatX), [1] gradients (fp32, with the
// stage-2 shard and --comm nccl's bf16 copy), [2] optimizer state (moments and master weights, fp32), [3] activations
// (the table's types) with the kernels' and the collectives' scratch. Returns the total.
static double rank_memory(const GPT* mp, const ZeroOptimizer* zp, double mem[4]) {
    double shard = zp->gshard ? (double)zp->shard * sizeof(float) : 0.0;
    mem[0] = (double)mp->param_floats * sizeof(floatX);
    mem[1] = (double)mp->grad_floats * sizeof(float) + shard;
    mem[2] = (double)zero_state_bytes(zp) - shard;
    mem[3] = (double)mp->acts.total_bytes + (double)kernels_ctx_bytes(&mp->ctx);
    // --comm nccl's device buffers: the gradients' bf16 copy, the tensor-parallel scratch, the pipeline's messages
    mem[1] += (double)zero_compress_device_bytes(zp);
    if (mp->tp_group && mp->tp_group->nccl) { mem[3] += (double)comm_nccl_device_bytes(mp->tp_group->nccl); }
    if (mp->pipe) { mem[3] += (double)pipeline_device_bytes(mp->pipe); }
    return mem[0] + mem[1] + mem[2] + mem[3];
}

// The resolved configuration and every rank's memory (collective: each rank contributes its sizes; rank 0 prints).
// The memory is what this rank allocated; the planner's prediction for the layout (plan_rank_memory) with the
// kernels' workspaces for a step (a GPU's, sized at start-up) must equal it: the start-up memory check's count.
static void print_run_plan(const Config* cp, const GPT* mp, const ZeroOptimizer* zp, ParallelContext* pcp, const PlanLayout* run,
                           const int* chunk_first, int grad_accum, unsigned long long train_tokens) {
    const GPTConfig* g = &mp->cfg;
    int B = cp->batch_size, T = cp->seq_len, master = pcp->world_rank == 0;
    size_t n = mp->glayout.num_params;
    double mem[4], pred[4];
    rank_memory(mp, zp, mem);
    plan_rank_memory(g, run, pcp->pp_rank, chunk_first, sizeof(floatX), pred);
    pred[3] += (double)mp->workspace_bytes;
    for (int k = 0; k < 4; k++) {
        if (pred[k] != mem[k]) {
            fatal("internal: the planner's memory for this layout (%.0f bytes of family %d) differs from what rank %d allocated (%.0f)", pred[k], k,
                  pcp->world_rank, mem[k]);
        }
    }
    double* all_mem = (double*)callocCheck((size_t)pcp->world_size * 4, sizeof(double));
    memcpy(all_mem + (size_t)pcp->world_rank * 4, mem, sizeof(mem));
    comm_allreduce_sum_f64(&pcp->world, all_mem, (size_t)pcp->world_size * 4);
    if (master) {
        printf("+----------------------+------------------------------------------+\n");
        for (int i = 0; i < NUM_FLAGS; i++) {
            char v[1100];
            flag_value_string(&FLAGS[i], cp, v, sizeof(v));
            printf("| %-20s | %-40s |\n", FLAGS[i].name, v);
        }
        printf("+----------------------+------------------------------------------+\n");
        printf("| model                | L %d, C %d, NH %d, maxT %d, V %d (Vp %d)\n", g->num_layers, g->channels, g->num_heads, g->max_seq_len, g->vocab_size, g->padded_vocab_size);
        printf("| parameters           | %zu (%.1f M)", n, n / 1e6);
        if (mp->tp > 1) { printf(", %zu (%.1f M) per tensor-parallel rank", mp->layout.num_params, mp->layout.num_params / 1e6); }
        printf("\n| processes            | %d (dp %d, tp %d, pp %d), %d thread(s) each%s\n", pcp->world_size, pcp->dp, pcp->tp, pcp->pp,
               kernels_num_threads(), mp->sp ? "; sequence parallel" : "");
        printf("| matmuls              | %s kernels (%s)\n", kernels_blas_name(), kernels_blas_reason());
        if (pcp->world_size > 1) {
            char order[160] = "";
            int ordered = strcmp(cp->comm, "nccl") != 0 || comm_nccl_launch_order(order, sizeof(order));
            printf("| collectives          | %s%s%s\n", strcmp(cp->comm, "nccl") == 0 ? "NCCL on the device buffers (--comm nccl)"
                   : comm_is_staged(cp->comm) ? "MPI through pinned host copies of the device buffers (--comm mpi)" : "MPI on the buffers",
                   order[0] ? (ordered ? "; " : "; several communicators' launches NOT ordered: ") : "", order);
        }
        if (mp->pipe) {
            const Pipeline* p = mp->pipe;
            const ParamLayout* pl = &mp->layout;
            printf("| pipeline             | %s, %d stages x %d chunk(s), %d micro-batches; bubble (theory) %.1f%%; blocks per chunk:",
                   pp_schedule_names[p->kind], p->pp, p->V, p->M, 100.0 * pp_bubble_theory(p->kind, p->pp, p->M, p->V));
            for (int k = 0; k < p->G; k++) { printf(" [%d,%d)%s", pl->chunk_first[k], pl->chunk_first[k + 1], k == p->G - 1 ? "+head" : ""); }
            printf("; messages %s\n", p->nccl ? "device to device (NCCL pairs)" : "through MPI");
        }
        printf("| gradient accumulation| %d micro-steps of %d x %d per process\n", grad_accum, B, T);
        // where the time goes, from the shapes: the matmuls are compute-limited (each weight is reused B*T times
        // per micro-step); the optimizer streams ~7 floats per parameter once per step and is memory-limited
        double step_flops = flops_per_token(mp, T) * (double)cp->total_batch_size / pcp->dp / mp->tp;
        double opt_bytes = 7.0 * sizeof(float) * (double)(zp->hi - zp->lo);
        printf("| work per step, rank  | %.1f GFLOP of forward/backward (compute-limited: %d tokens reuse each weight), "
               "%.2f GB of AdamW memory traffic (memory-limited)\n", step_flops / 1e9, B * T, opt_bytes / 1e9);
        if (train_tokens) { printf("| training tokens      | %llu\n", train_tokens); }
        printf("+----------------------+------------------------------------------+\n");
        int dt = mp->ctx.dtype;
        char slots[64] = "";
        if (mp->pipe) { snprintf(slots, sizeof(slots), "; activations of up to %d micro-batches in flight on rank 0", mp->pipe->nslots); }
        printf("memory per rank (ZeRO stage %d, --dtype %s, --recompute %d%s%s):\n", cp->zero, dtype_name(dt), cp->recompute,
               sizeof(floatX) > dtype_bytes(dt) ? "; this CPU build stores floatX as fp32, rounded to the type" : "", slots);
        printf("  rank | parameters | gradients  | optimizer  | activations | total\n");
        for (int r = 0; r < pcp->world_size; r++) {
            char s[5][32];
            double tot = 0.0;
            for (int k = 0; k < 4; k++) { fmt_bytes(s[k], sizeof(s[k]), all_mem[r * 4 + k]); tot += all_mem[r * 4 + k]; }
            fmt_bytes(s[4], sizeof(s[4]), tot);
            printf("  %4d | %10s | %10s | %10s | %11s | %s\n", r, s[0], s[1], s[2], s[3], s[4]);
        }
        int big = 0;
        double big_total = -1.0;
        for (int r = 0; r < pcp->world_size; r++) {
            double tot = all_mem[r * 4] + all_mem[r * 4 + 1] + all_mem[r * 4 + 2] + all_mem[r * 4 + 3];
            if (tot > big_total) { big_total = tot; big = r; }
        }
        printf("  largest rank: %.0f bytes (rank %d; the planner's \"memory per rank\" for this layout)\n", big_total, big);
        if (sizeof(floatX) > dtype_bytes(dt)) {
            char pa[32], ac[32];
            fmt_bytes(pa, sizeof(pa), (double)mp->param_floats * dtype_bytes(dt));
            fmt_bytes(ac, sizeof(ac), (double)activations_device_bytes_tp(g, mp->tp, mp->sp, B, T, cp->recompute, dt));
            printf("  with %s storage (a GPU build): parameters %s, activations %s per rank\n", dtype_name(dt), pa, ac);
        }
        fflush(stdout);
    }
    free(all_mem);
}

// --grad-compress powersgd:R: PowerSGD over the data-parallel group on this rank's flat layout (every tensor is
// offered; the matrices that gain are compressed), Q seeded from `seed`; zero.h hands it every final bucket.
static void gpt_powersgd_init(PowerSgd* ps, const GPT* m, ZeroOptimizer* z, int R, uint64_t seed) {
    const ParamLayout* pl = &m->layout;
    PowerSgdTensor* ts = (PowerSgdTensor*)mallocCheck(sizeof(PowerSgdTensor) * (size_t)pl->num_tensors);
    for (int i = 0; i < pl->num_tensors; i++) {
        ts[i].offset = pl->table[i].offset; ts[i].rows = pl->table[i].rows; ts[i].cols = pl->table[i].cols;
    }
    powersgd_init(ps, z->group, R, z->n_pad, ts, pl->num_tensors, seed);
    free(ts);
    zero_set_powersgd(z, ps);
}

// PowerSGD's line of the plan (rank 0): what it compresses, the bytes each rank will send per step against plain
// fp32 reductions (from the buckets' factor sizes; the run's end prints the measured figure), its memory.
// ps NULL: one data-parallel rank, nothing to compress.
static void print_powersgd_plan(const PowerSgd* ps, const GPT* mp, const ZeroOptimizer* zp, int R) {
    if (!ps) {
        printf("gradient compression: powersgd:%d has nothing to do: one data-parallel rank reduces no gradients\n", R);
        return;
    }
    double sent = 0.0, plain = 0.0;
    for (int b = 0; b <= mp->cfg.num_layers + 1; b++) {
        if (!gpt_has_bucket(mp, b)) { continue; }
        size_t lo, hi;
        bucket_range(mp, b, &lo, &hi);
        sent += comm_sent_bytes(COMM_OP_ALLREDUCE, (double)powersgd_payload(ps, lo, hi) * sizeof(float), zp->size);
        plain += comm_sent_bytes(zp->stage == 0 ? COMM_OP_ALLREDUCE : COMM_OP_REDUCE_SCATTER, (double)(hi - lo) * sizeof(float), zp->size);
    }
    int matrices = 0;
    for (int i = 0; i < mp->layout.num_tensors; i++) { matrices += mp->layout.table[i].rows > 1; }
    char sb[32], pb[32], mb[32];
    fmt_bytes(sb, sizeof(sb), sent);
    fmt_bytes(pb, sizeof(pb), plain);
    fmt_bytes(mb, sizeof(mb), (double)powersgd_state_bytes(ps));
    printf("gradient compression: PowerSGD rank %d: %d of %d matrices compressed (%.1f M of %.1f M gradients), the rest "
           "all-reduced in fp32; per step each rank sends %s instead of %s (ratio %.4f) [%.0f of %.0f bytes]; error feedback and Q: %s per rank\n",
           R, ps->num_tensors, matrices, ps->compressed_elems / 1e6, mp->layout.num_params / 1e6, sb, pb, sent / plain, sent, plain, mb);
}

// One optimizer step: grad_accum micro-steps of forward and backward (reductions started as buckets finish), the
// gradient norm, the decision (update; skip for the fp16 loss scaler; --nan-policy; the outlier guard), the update.
// Returns what the step prints and logs.
typedef struct {
    StepStats stats;
    float loss;              // mean over all ranks' tokens
    int finite;              // 0: the step was skipped (overflow under fp16 loss scaling, or --nan-policy skip)
    int overflow;            // fp16: skipped because a gradient was inf/NaN (the loss scale was halved)
    double z_loss, z_norm;   // the z-scores of the loss and the gradient norm (outlier.h; NaN while undefined)
    const char* outlier;     // finite, but skipped by the outlier guard: "loss" or "grad_norm" (NULL otherwise)
    float loss_scale;        // fp16: the scale this step ran with
    double seconds, forward_seconds, backward_seconds;
    double wait_seconds;     // blocked in waits for gradient reductions
} StepResult;

// The forwards and backwards of one optimizer step on a pipeline stage: the rank's schedule over the step's M
// micro-batches (every stage reads all of them: the first needs the inputs, the last the targets), each forward in a
// free activation slot, each backward in its forward's slot; messages to and from the neighbouring stages; then the
// tied wte's two gradients summed and the embedding bucket reduced. tf, tb: seconds of forward and backward compute.
static void pipeline_micro_steps(GPT* m, BackwardComm* bc, const Config* c, ParallelContext* pc, DataLoader* loader,
                                 const int32_t* bench_tokens, int M, float dloss_scale, double* tf, double* tb) {
    Pipeline* p = m->pipe;
    int B = c->batch_size, T = c->seq_len, BT = B * T;
    for (int mb = 0; mb < M; mb++) {
        const int32_t* x = bench_tokens;
        const int32_t* y = bench_tokens ? bench_tokens + 1 : NULL;
        if (!bench_tokens) { dataloader_next_batch(loader); x = loader->inputs; y = loader->targets; }
        memcpy(p->inputs + (size_t)mb * BT, x, sizeof(int32_t) * BT);
        memcpy(p->targets + (size_t)mb * BT, y, sizeof(int32_t) * BT);
    }
    int reduces = c->zero >= 1 || pc->dp > 1;
    double t_start = now_seconds(), busy = 0.0;
    for (int i = 0; i < p->nops; i++) {
        PpOp o = p->ops[i];
        int g = o.v * p->pp + p->rank, key = o.v * M + o.mb;
        if (o.fwd) {
            int slot = p->free_slots[--p->nfree];
            p->slot_of[key] = slot;
            m->acts = activations_slot(&m->acts0, slot);
            m->B = B; m->T = T;
            if (g > 0) { pp_recv(p, m, m->acts.encoded, pp_msg_bytes(m), (g - 1) % p->pp, PP_TAG_ACT, g, o.mb); }
            pp_post_next(p, m, i);
            double t0 = now_seconds();
            gpt_forward_chunk(m, g, p->inputs + (size_t)o.mb * BT, B, T);
            double t1 = now_seconds();
            busy += t1 - t0; *tf += t1 - t0;
            pp_span(p, "forward", g, o.mb, t0, t1);
            if (g < p->G - 1) { pp_send(p, m, pp_chunk_output(m), pp_msg_bytes(m), (g + 1) % p->pp, PP_TAG_ACT); }
        } else {
            int slot = p->slot_of[key];
            m->acts = activations_slot(&m->acts0, slot);
            m->B = B; m->T = T;
            if (g < p->G - 1) { pp_recv(p, m, m->acts.dres, pp_msg_bytes(m), (g + 1) % p->pp, PP_TAG_GRAD, g, o.mb); }
            pp_post_next(p, m, i);
            bc->first_micro = o.mb == 0;
            bc->last_micro = o.mb == M - 1;
            bc->reduce = reduces && zero_reduces_on(bc->z, o.mb == M - 1);
            double t0 = now_seconds();
            gpt_backward_chunk(m, g, p->targets + (size_t)o.mb * BT, dloss_scale, bc);
            double t1 = now_seconds();
            busy += t1 - t0; *tb += t1 - t0;
            pp_span(p, "backward", g, o.mb, t0, t1);
            if (g > 0) { pp_send(p, m, m->acts.dres, pp_msg_bytes(m), (g - 1) % p->pp, PP_TAG_GRAD); }
            p->slot_of[key] = -1;
            p->free_slots[p->nfree++] = slot;
        }
    }
    pp_wait_sends(p);
    p->busy_seconds += busy;
    p->step_seconds += now_seconds() - t_start;
    pp_sum_tied_wte(p, m);
    if (m->layout.embed_size > 0) {
        bc->first_micro = 1; // (stage 2: the whole step's embedding gradient, reduced once: it overwrites the shard)
        bc->reduce = reduces;
        grad_bucket_release(m, bc, 0);
    }
    m->acts = activations_slot(&m->acts0, 0);
}

static StepResult train_step(GPT* mp, ZeroOptimizer* zp, BackwardComm* bcp, const Config* cp, ParallelContext* pcp,
                             TrainState* tsp, DataLoader* train_loader, const int32_t* bench_tokens, int grad_accum, int step) {
    StepResult r;
    int B = cp->batch_size, T = cp->seq_len, fp16 = mp->ctx.dtype == DTYPE_FP16;
    double t0 = now_seconds();
    double wait0 = zp->wait_seconds;
    double tb = 0.0, tf = 0.0;
    float scale = fp16 ? tsp->loss_scale.scale : 1.0f;
    float dloss_scale = scale / (float)((double)B * T * grad_accum * pcp->dp);
    int poison = fault_injected("nan", pcp->world_rank, step);
    if (poison) { dloss_scale = NAN; }
    if (fault_injected("overflow", pcp->world_rank, step)) { dloss_scale = INFINITY; } // gradients overflow, loss fine
    if (fault_injected("gradspike", pcp->world_rank, step)) { dloss_scale *= 100.0f; }
    gpt_clear_loss_sum(mp);
    if (mp->pipe) { pipeline_micro_steps(mp, bcp, cp, pcp, train_loader, cp->bench ? bench_tokens : NULL, grad_accum, dloss_scale, &tf, &tb); }
    else {
        for (int micro = 0; micro < grad_accum; micro++) {
            const int32_t* x;
            const int32_t* y;
            if (cp->bench) { x = bench_tokens; y = bench_tokens + 1; }
            else { dataloader_next_batch(train_loader); x = train_loader->inputs; y = train_loader->targets; }
            double tf0 = now_seconds();
            gpt_forward(mp, x, B, T);
            tf += now_seconds() - tf0;
            bcp->first_micro = micro == 0;
            bcp->last_micro = micro == grad_accum - 1;
            bcp->reduce = (cp->zero >= 1 || pcp->dp > 1) && zero_reduces_on(zp, micro == grad_accum - 1);
            double tb0 = now_seconds();
            gpt_forward_backward(mp, y, dloss_scale, bcp);
            tb += now_seconds() - tb0;
        }
    }
    // the mean loss and the gradient norm are the same on every rank (a NaN or inf anywhere reaches all of them
    // through the reductions), so every rank takes the same decision below
    double loss_sum = gpt_take_loss_sum(mp) / ((double)B * T * grad_accum);
    if (poison) { loss_sum = NAN; }
    if (fault_injected("lossspike", pcp->world_rank, step)) { loss_sum *= 4.0; }
    if (mp->pp_group) { comm_allreduce_sum_f64(mp->pp_group, &loss_sum, 1); } // the last stage's (a NaN anywhere too)
    StepStats st;
    st.grad_norm = grad_norm_reduced(mp, zp) / scale;
    st.lr = lr_at(cp, step);
    comm_allreduce_sum_f64(&pcp->dp_group, &loss_sum, 1);
    float mean_loss = (float)(loss_sum / pcp->dp);
    int loss_ok = isfinite(mean_loss), grads_ok = isfinite(st.grad_norm);
    // fp16: inf/NaN gradients with a finite loss are the loss scaler's business (too large a scale), not divergence
    int overflow = fp16 && loss_ok && !grads_ok;
    // the outlier guard's windows take every finite value (a skipped update's too); the same on every rank
    r.z_loss = outlier_push(&tsp->loss_w, mean_loss);
    r.z_norm = outlier_push(&tsp->norm_w, st.grad_norm);
    r.outlier = NULL;
    if (!loss_ok || (!grads_ok && !fp16)) {
        if (strcmp(cp->nan_policy, "stop") == 0) {
            fatal("step %d: the %s is not finite (loss %g, gradient norm %g): stopping before the update (--nan-policy stop); "
                  "no checkpoint of this state is written%s%s", step + 1, loss_ok ? "gradient norm" : "loss",
                  mean_loss, st.grad_norm, cp->out[0] ? ", the last one in " : "", cp->out);
        }
        tsp->skipped_in_a_row++;
    } else if (!overflow && !outlier_skip(r.z_loss, r.z_norm, cp->skip_loss_z, cp->skip_grad_z, &r.outlier)) {
        double to = now_seconds();
        optimizer_update(mp, zp, cp, st.grad_norm, st.lr, tsp->adam_t + 1, scale, tsp->sr_seed);
        if (mp->pipe) { pp_span(mp->pipe, "optimizer", -1, -1, to, now_seconds()); }
        tsp->adam_t++;
        tsp->skipped_in_a_row = 0;
    }
    if (fp16) { loss_scale_update(&tsp->loss_scale, cp, !(loss_ok && grads_ok)); }
    if (mp->pipe) { mp->pipe->step++; }
    double dt = now_seconds() - t0;
    r.stats = st;
    r.loss = mean_loss;
    r.finite = loss_ok && grads_ok;
    r.overflow = overflow;
    r.loss_scale = scale;
    r.seconds = dt;
    r.forward_seconds = tf;
    r.backward_seconds = tb;
    r.wait_seconds = zp->wait_seconds - wait0;
    return r;
}

// What this rank has communicated on its data- and tensor-parallel groups so far: per operation, the calls and the
// payload bytes (comm.h counts them as the collectives start).
typedef struct {
    double bytes[2][COMM_OP_COUNT_];
    int64_t calls[2][COMM_OP_COUNT_];
} CommCounts;

static void comm_counts_take(CommCounts* c, const ParallelContext* pc) {
    const CommGroup* gs[2] = {&pc->dp_group, &pc->tp_group};
    for (int k = 0; k < 2; k++) {
        memcpy(c->bytes[k], gs[k]->op_bytes, sizeof(c->bytes[k]));
        memcpy(c->calls[k], gs[k]->op_calls, sizeof(c->calls[k]));
    }
}

// Rank 0's communication per step since `since` (steps of them): one line per group and operation with the bytes the
// rank sends by the ring model (comm_sent_bytes), and one "bench-comm:" line with the totals for scripts.
static void comm_counts_print(const CommCounts* since, const ParallelContext* pc, int steps) {
    CommCounts now;
    comm_counts_take(&now, pc);
    const CommGroup* gs[2] = {&pc->dp_group, &pc->tp_group};
    double total[2] = {0.0, 0.0};
    for (int k = 0; k < 2; k++) {
        for (int op = 0; op < COMM_OP_COUNT_; op++) {
            double payload = (now.bytes[k][op] - since->bytes[k][op]) / steps;
            double calls = (double)(now.calls[k][op] - since->calls[k][op]) / steps;
            double sent = comm_sent_bytes(op, payload, gs[k]->size);
            if (calls == 0.0 || gs[k]->size == 1) { continue; }
            total[k] += sent;
            char pb[32], sb[32];
            fmt_bytes(pb, sizeof(pb), payload);
            fmt_bytes(sb, sizeof(sb), sent);
            printf("bench: %s group (%d ranks): %-14s %5.0f calls/step, payload %s, sends %s per rank per step\n",
                   gs[k]->name, gs[k]->size, comm_op_names[op], calls, pb, sb);
        }
    }
    printf("bench-comm: dp_sent_bytes_per_step %.0f tp_sent_bytes_per_step %.0f\n", total[0], total[1]);
}

// The device bytes in use (cudaMemGetInfo) beside what this rank allocated by the trainer's count (rank_memory,
// which is the planner's per family: print_run_plan), collective over the world: the least and most bytes in use
// beyond that count over the ranks. On a GPU the difference is what the planner does not model (the CUDA context,
// cuBLASLt's and cuDNN's handles, NCCL's own buffers; with processes sharing a GPU, each other's memory too). The
// emulation has none of those, so there a difference is a device buffer the count misses (scripts/gpu_check.sh --emu
// demands 0 on every rank). grown: the most bytes a rank's device buffers grew by after start-up: the kernels'
// workspaces, sized for a training step then (kernels_grown_bytes: sampling or evaluation at other shapes may grow
// them; the emulated runs must not).
// Returns 0, with no collective, in a CPU build, or when a runtime could not say.
typedef struct { double used, total, planned, least, most, grown; } DeviceMemory;
static int device_memory(const GPT* mp, const ZeroOptimizer* zp, ParallelContext* pcp, DeviceMemory* d) {
    memset(d, 0, sizeof(*d));
#ifdef KERNELS_CUDA
    double mem[4];
    d->planned = rank_memory(mp, zp, mem);
    size_t mem_free = 0, mem_total = 0;
    int ok = cudaMemGetInfo(&mem_free, &mem_total) == cudaSuccess;
    d->used = (double)(mem_total - mem_free);
    d->total = (double)mem_total;
    double v[4] = {d->used - d->planned, d->planned - d->used, ok ? 0.0 : 1.0, (double)kernels_grown_bytes(&mp->ctx)};
    comm_allreduce_max_f64(&pcp->world, v, 4);
    d->most = v[0];
    d->least = 0.0 - v[1]; // (not -v[1]: -0.0 would print as "-0")
    d->grown = v[3];
    return v[2] == 0.0;
#else
    (void)mp; (void)zp; (void)pcp;
    return 0;
#endif
}

// --bench: time per step and its parts, how much of the gradient communication backward hides, communication per
// step, memory, figure last. comm0: the communication counts when the timed steps began.
static void bench_report(const Config* cp, GPT* mp, ZeroOptimizer* zp, ParallelContext* pcp, double t_bench, double t_forward,
                         double t_backward, double wait_bench, int timed_steps, const CommCounts* comm0) {
    int B = cp->batch_size, T = cp->seq_len, master = pcp->world_rank == 0;
    if (master && (pcp->dp > 1 || pcp->tp > 1)) { comm_counts_print(comm0, pcp, timed_steps); }
    double fpt = flops_per_token(mp, T);
    double ms = t_bench / timed_steps * 1e3;
    double tok_s = cp->total_batch_size / (t_bench / timed_steps);
    double hidden = -1.0;
    int nccl = strcmp(cp->comm, "nccl") == 0; // the host never waits for NCCL: its waited times say nothing then
    if (pcp->dp > 1 || cp->zero > 0) {
        // communication alone: reduce every bucket back to back, without compute to hide behind (on a GPU the device
        // is idle before the clock starts and has finished when it stops: NCCL's waits do not block the host)
        dev_sync(&mp->ctx);
        comm_barrier(&pcp->world);
        double t0 = now_seconds();
        for (int b = mp->cfg.num_layers + 1; b >= 0; b--) {
            if (!gpt_has_bucket(mp, b)) { continue; }
            size_t lo, hi;
            bucket_range(mp, b, &lo, &hi);
            zero_bucket_ready(zp, b, grad_bucket_data(mp, b, lo), lo, hi, 1);
            zero_wait_bucket(zp, b);
        }
        dev_sync(&mp->ctx);
        double comm_total = now_seconds() - t0;
        comm_allreduce_max_f64(&pcp->world, &comm_total, 1);
        double exposed = wait_bench / timed_steps;
        comm_allreduce_max_f64(&pcp->world, &exposed, 1);
        hidden = comm_total > 0 ? 1.0 - exposed / comm_total : 0.0;
        if (hidden < 0) { hidden = 0; }
        if (master && nccl) {
            printf("bench: gradient communication %.1f ms/step alone (%.1f ms backward); how much of it the backward hides "
                   "is not measured with --comm nccl\n", comm_total * 1e3, t_backward / timed_steps * 1e3);
        } else if (master) {
            printf("bench: gradient communication %.1f ms/step alone, %.1f ms/step exposed after backward (%.1f ms backward): %.0f%% hidden\n",
                   comm_total * 1e3, exposed * 1e3, t_backward / timed_steps * 1e3, hidden * 100);
        }
    }
    if (zp->stage == 3) {
        double g = zp->gather_seconds / timed_steps;
        comm_allreduce_max_f64(&pcp->world, &g, 1);
        if (master && !nccl) { printf("bench: ZeRO-3 parameter gathers: %.1f ms/step waited for (the rest travelled during compute)\n", g * 1e3); }
    }
    double rss = (double)peak_rss_kb() * 1024.0;
    comm_allreduce_max_f64(&pcp->world, &rss, 1);
    DeviceMemory dm;
    int have_dm = device_memory(mp, zp, pcp, &dm);
    if (master) {
        char rs[32];
        fmt_bytes(rs, sizeof(rs), rss);
        char ab[32];
        fmt_bytes(ab, sizeof(ab), (double)mp->acts.total_bytes);
        printf("bench: %s, B %d, T %d, %d rank(s) x %d thread(s), ZeRO %d, --dtype %s, --recompute %d (activations %s), matmuls %s | peak RSS per rank %s\n",
               cp->model, B, T, pcp->world_size, kernels_num_threads(), cp->zero, dtype_name(mp->ctx.dtype), cp->recompute, ab,
               kernels_blas_name(), rs);
        double fwd = t_forward / timed_steps * 1e3, bwd = t_backward / timed_steps * 1e3;
        printf("bench: per step: forward %.1f ms, LM head + backward %.1f ms, optimizer and the rest %.1f ms\n", fwd, bwd, ms - fwd - bwd);
        // one line for scripts/bench_dtypes.sh's table: what ran, the time, and the activation bytes allocated here
        // and with 16-bit storage (a GPU build)
        double mem[4], rank_total = rank_memory(mp, zp, mem);
        printf("bench-row: dtype %s recompute %d ms %.1f tokens_per_s %.0f activation_bytes %zu device_activation_bytes %zu "
               "rank_bytes %.0f param_bytes %.0f\n", dtype_name(mp->ctx.dtype), cp->recompute, ms, tok_s, mp->acts.total_bytes,
               activations_device_bytes_tp(&mp->cfg, mp->tp, mp->sp, B, T, cp->recompute, mp->ctx.dtype), rank_total, mem[0]);
        if (have_dm) {
            printf("bench: GPU memory in use %.2f GB of %.2f GB (planned for this rank %.2f GB; bytes in use %.0f, planned %.0f)\n",
                   dm.used / 1e9, dm.total / 1e9, dm.planned / 1e9, dm.used, dm.planned);
            printf("bench: GPU bytes in use beyond the planner's over the %d rank(s): least %.0f, most %.0f; device buffers grown "
                   "after start-up: %.0f bytes\n", pcp->world_size, dm.least, dm.most, dm.grown);
        }
        printf("bench: %.1f ms/step | %.0f tokens/s | %.1f GFLOP/s\n", ms, tok_s, tok_s * fpt / 1e9);
    }
}

int main(int argc, char** argv) {
    kernels_blas_select(argv); // first: may re-execute the program with better OpenBLAS kernels
    ParallelContext pc;
    parallel_init(&pc, &argc, &argv);
    Config c;
    config_defaults(&c);
    parse_flags(&c, argc, argv);
    parallel_set_layout(&pc, c.tp, c.pp, c.comm_timeout); // a world that does not divide by tp x pp ends here, one message
    int master = pc.world_rank == 0;
#ifdef _OPENMP
    if (c.threads > 0) { omp_set_num_threads(c.threads); }
#endif
    kernels_init_fp_mode();
    check_config_agreement(&pc, &c);
    if (master && g_flag_notes[0]) { printf("%s", g_flag_notes); }
    if (c.auto_resume) {
        // rank 0 looks (ranks on other machines may not see --out), and every rank follows it
        char lp[2048];
        snprintf(lp, sizeof(lp), "%s/latest", c.out);
        double found = master && file_exists(lp);
        comm_allreduce_max_f64(&pc.world, &found, 1);
        if (found) { snprintf(c.resume, sizeof(c.resume), "%s", c.out); }
        if (master) { printf("auto-resume: %s\n", found ? "continuing from the newest checkpoint in --out" : "no checkpoint in --out yet: starting fresh"); }
    }
#ifdef KERNELS_CUDA
    if (strcmp(c.comm, "nccl") == 0) {
        if (!comm_nccl_available()) { fatal("--comm nccl: this build has no NCCL (make found none; --comm mpi stages device buffers through pinned host memory)"); }
    }
#else
    if (strcmp(c.comm, "nccl") == 0) { fatal("--comm nccl: GPU builds only (this is the CPU trainer)"); }
#endif

    // model configuration: from the checkpoint, an --init file, or a name
    GPTConfig gc;
    int resume_step = -1;
    char init_path[2048] = {0};
    // (ranks on hosts that do not see the checkpoint get a local copy of it from rank 0 first: sharedfs.h)
    char resume_scratch[2100] = {0};
    const char* resume_dir = c.resume[0] ? sharedfs_fetch_resume(&pc, c.resume, resume_scratch, sizeof(resume_scratch)) : c.resume;
    if (c.resume[0]) {
        resume_step = checkpoint_latest_step(resume_dir);
        snprintf(init_path, sizeof(init_path), "%s/model_%08d.bin", resume_dir, resume_step);
    } else if (c.init[0]) {
        snprintf(init_path, sizeof(init_path), "%s", c.init);
    }
    FILE* model_fp = NULL;
    int model_version = 0;
    HfCheckpoint hf;
    int from_hf = 0;
    if (init_path[0] && resume_step < 0 && hf_is_checkpoint_path(init_path)) {
        hf_open(&hf, init_path, &gc); // Hugging Face safetensors + config.json
        from_hf = 1;
    } else if (init_path[0]) {
        model_read_header(init_path, &gc, &model_version, &model_fp);
    } else if (!config_from_name(&gc, c.model)) {
        fatal("--model: unknown model '%s' (gpt2-124M, gpt2-350M, gpt2-774M, gpt2-1558M, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt3-125M, gpt3-350M, gpt3-760M, gpt3-1.3B, gpt3-2.7B, d<N>, gpt2:d<N>, gpt3:c<N>: see --help)", c.model);
    }
    GPTConfig named;
    if (init_path[0] && c.model_given && config_from_name(&named, c.model) &&
        (named.num_layers != gc.num_layers || named.channels != gc.channels || named.num_heads != gc.num_heads)) {
        // (a shape the file agrees with is fine: scripts keep --model beside --resume)
        fatal("--model %s (L %d, C %d, NH %d) and %s %s (L %d, C %d, NH %d) name different models: give one", c.model, named.num_layers,
              named.channels, named.num_heads, resume_step >= 0 ? "--resume" : "--init", resume_step >= 0 ? c.resume : c.init,
              gc.num_layers, gc.channels, gc.num_heads);
    }
    char err_hs[1024];
    int resume_sum_kind = CHECKSUM_DEFAULT;
    if (resume_step >= 0) { resume_sum_kind = checkpoint_check_files(resume_dir, resume_step, gpt_num_params(&gc)).sum_kind; }
    if (c.export_hf[0]) {
        // --init FILE --export-hf DIR: load, write the Hugging Face checkpoint, exit (no data, no training)
        if (pc.world_size > 1) { fatal("--export-hf runs in one process, not under mpirun (%d ranks)", pc.world_size); }
        if (!hf_supported()) { fatal("--export-hf %s: %s", c.export_hf, HF_NO_CJSON_MESSAGE); }
        ParamLayout el;
        layout_build(&el, &gc);
        float* host = (float*)mallocCheck(mulSize(el.num_params, sizeof(float)));
        if (from_hf) { hf_load_params(&hf, &el, host); }
        else { model_load_params(init_path, model_fp, model_version, &el, host); }
        printf("export-hf: %s: L %d, C %d, NH %d, maxT %d, V %d (Vp %d), %zu parameters\n", c.init, gc.num_layers,
               gc.channels, gc.num_heads, gc.max_seq_len, gc.vocab_size, gc.padded_vocab_size, el.num_params);
        hf_export(c.export_hf, &el, host);
        free(host);
        layout_free(&el);
        parallel_finalize(&pc);
        return 0;
    }
    // --eval-hellaswag: the eval file first (bad input before the big allocations); the rows may be as long as
    // --seq-len, or the model's context; the activations hold one example's endings at the longest row's length
    HellaSwag hs;
    int have_hs = 0, eval_only = c.eval_hellaswag[0] != 0;
    if (eval_only) {
        int limit = c.seq_len > 0 ? c.seq_len : gc.max_seq_len;
        if (limit > gc.max_seq_len) { fatal("--seq-len %d is above the model's context length %d", limit, gc.max_seq_len); }
        if (hellaswag_load(&hs, c.eval_hellaswag, gc.vocab_size, limit, c.seq_len > 0 ? "--seq-len" : "the model's context", err_hs, sizeof(err_hs)) != 0) {
            fatal("--eval-hellaswag: %s", err_hs);
        }
        have_hs = 1;
        int mult = c.tp > 1 && c.sequence_parallel ? c.tp : 1;
        c.batch_size = hs.max_endings;
        c.seq_len = (hs.longest_row + mult - 1) / mult * mult;
    }
    int B = c.batch_size, T = c.seq_len;
    if (T > gc.max_seq_len) { fatal("--seq-len %d is above the model's context length %d", T, gc.max_seq_len); }
    if (c.plan) {
        // --plan: search the layouts of the machine the flags describe, print the best, exit (no data, no model)
        if (pc.world_size > 1) { fatal("--plan runs in one process, not under mpirun (%d ranks)", pc.world_size); }
        PlanMachine mc = {c.plan_devices_per_node, c.plan_nodes, c.plan_memory_gb * 1e9, c.plan_intra_gbps * 1e9, c.plan_inter_gbps * 1e9,
                          c.plan_tflops * 1e12, c.plan_efficiency, strcmp(c.plan_storage, "gpu") == 0 ? 2 : sizeof(floatX),
                          strcmp(c.plan_storage, "gpu") == 0, 0.0};
#ifdef KERNELS_CUDA
        mc.gpu = 1;
#endif
        // the runtime's share: an assumption until a GPU measures it (a CUDA context with cuBLASLt's and cuDNN's
        // handles, about 0.5-1 GB on a Hopper GPU; NCCL's buffers, some hundreds of MB per communicator), which
        // scripts/gpu_check.sh's benchmark table does: its "GPU memory in use" beside "planner"
        mc.reserve = c.plan_reserve_gb >= 0 ? c.plan_reserve_gb * 1e9 : mc.gpu ? 2e9 : 0.0;
        if (mc.reserve >= mc.memory) { fatal("--plan-reserve-gb %g leaves nothing of --plan-memory-gb %g", mc.reserve / 1e9, mc.memory / 1e9); }
        plan_run(&c, &gc, &mc);
        parallel_finalize(&pc);
        return 0;
    }
    if (c.tp > 1) {
        char tperr[200];
        if (!layout_tp_valid(&gc, c.tp, tperr, sizeof(tperr))) { fatal("--tp %d: %s", c.tp, tperr); }
        if (c.sequence_parallel && T % c.tp != 0) {
            fatal("--sequence-parallel: --seq-len %d does not divide by --tp %d (each rank holds 1/tp of every sequence's tokens)", T, c.tp);
        }
    }
    // every derived count in 64 bits, range-checked before it is narrowed
    const int64_t MAX_MICRO_TOKENS = (int64_t)1 << 30, MAX_GRAD_ACCUM = 1 << 20;
    if ((int64_t)B * T > MAX_MICRO_TOKENS) {
        fatal("--batch-size %d x --seq-len %d = %lld tokens per micro-step, above the limit %lld", B, T, (long long)B * T, (long long)MAX_MICRO_TOKENS);
    }
    int64_t tokens_per_micro = (int64_t)B * T * pc.dp;
    if (c.micro_batches > 0) {
        if (c.total_batch_size == 0) { c.total_batch_size = tokens_per_micro * c.micro_batches; }
        if (c.total_batch_size != tokens_per_micro * c.micro_batches) {
            fatal("--micro-batches %d and --total-batch-size %ld disagree: %d micro-batches of %d x %d on %d data-parallel rank(s) are %lld tokens",
                  c.micro_batches, c.total_batch_size, c.micro_batches, B, T, pc.dp, (long long)tokens_per_micro * c.micro_batches);
        }
    }
    if (c.total_batch_size == 0) { c.total_batch_size = tokens_per_micro; }
    if (c.total_batch_size % tokens_per_micro != 0) {
        fatal("--total-batch-size %ld is not a multiple of batch-size x seq-len x processes = %d x %d x %d = %lld",
              c.total_batch_size, B, T, pc.dp, (long long)tokens_per_micro);
    }
    int64_t accum64 = c.total_batch_size / tokens_per_micro;
    if (accum64 > MAX_GRAD_ACCUM) {
        fatal("--total-batch-size %ld needs %lld micro-steps of %d x %d x %d tokens per optimizer step, above the limit %lld: "
              "lower it or raise --batch-size", c.total_batch_size, (long long)accum64, B, T, pc.dp, (long long)MAX_GRAD_ACCUM);
    }
    int grad_accum = (int)accum64;
    if (c.gen_tokens > T - 1 && c.sample_every > 0) { c.gen_tokens = T - 1; }
    // the pipeline: its schedule over grad_accum micro-batches, and the blocks of each chunk, balanced by cost (a
    // block's FLOPs per token, the LM head's on the last chunk)
    int pp_kind = pp_schedule_parse(c.pp_schedule);
    if (pp_kind < 0) { fatal("--pp-schedule: unknown schedule '%s' (gpipe, 1f1b, interleaved)", c.pp_schedule); }
    int V = pp_kind == PP_INTERLEAVED ? c.virtual_stages : 1;
    // (the layout as the planner sees it: its memory table is the trainer's; see print_run_plan)
    PlanLayout run = {pc.dp, c.tp, c.pp, c.tp > 1 && c.sequence_parallel, c.zero, B, T, grad_accum, c.recompute, dtype_parse(c.dtype),
                      pp_kind, V, kernels_num_threads(), 0, 0, strcmp(c.grad_compress, "bf16") == 0}; // (nccl, pp_nccl: set once decided)
    int* chunk_first = NULL;
    if (c.pp > 1) {
        char pperr[300];
        if (!pp_schedule_valid(pp_kind, c.pp, grad_accum, c.virtual_stages, gc.num_layers, pperr, sizeof(pperr))) {
            fatal("--pp %d --pp-schedule %s: %s", c.pp, c.pp_schedule, pperr);
        }
        chunk_first = (int*)mallocCheck(sizeof(int) * (size_t)(c.pp * V + 1));
        plan_partition(&gc, &run, chunk_first);
    } else if (c.virtual_stages != 1) {
        fatal("--virtual-stages %d needs --pp 2 or more and --pp-schedule interleaved", c.virtual_stages);
    }
    if (c.zero == 3 && c.pp > 1) {
        // (as in DeepSpeed: each micro-batch's forward and backward of a stage would gather its layers again)
        fatal("--zero 3 with --pp %d: ZeRO-3 shards the parameters of unpipelined runs only; use --zero 1 or 2 with a pipeline", c.pp);
    }

    // data first: bad input is reported before the big allocations
    DataLoader train_loader, val_loader;
    int have_train = 0, have_val = 0;
    char err[1024];
    if (!c.bench && !eval_only) {
        if (!c.train[0]) { fatal("--train: no training data given (a glob pattern of llm.c shards; see scripts/prepare_tinyshakespeare.sh)"); }
        if (dataloader_init(&train_loader, c.train, B, T, pc.dp_rank, pc.dp, c.shuffle, (uint64_t)c.seed, gc.vocab_size, err, sizeof(err)) != 0) {
            fatal("--train: %s", err);
        }
        have_train = 1;
        sharedfs_check_data(&pc, train_loader.fingerprint, c.train);
        if (c.steps < 0) {
            // llm.c's default: one epoch, the optimizer steps in which every rank reads each of its batches once
            uint64_t per_rank = dataloader_num_batches(&train_loader), n = per_rank / (uint64_t)grad_accum;
            if (n < 1 || n > 1000000000ull) {
                fatal("--steps -1 (one epoch): the training data makes %llu batches per rank, and an optimizer step takes %d",
                      (unsigned long long)per_rank, grad_accum);
            }
            c.steps = (int)n;
            if (master) { printf("steps: one epoch of the training data is %d optimizer steps (--steps -1)\n", c.steps); }
        }
        if (c.val[0] && c.val_every > 0) {
            if (dataloader_init(&val_loader, c.val, B, T, 0, 1, 0, 0, gc.vocab_size, err, sizeof(err)) != 0) { fatal("--val: %s", err); }
            have_val = 1;
        }
        if (c.hellaswag[0] && c.hellaswag_every > 0) {
            // every row must fit one sequence of the run
            if (hellaswag_load(&hs, c.hellaswag, gc.vocab_size, T, "--seq-len", err_hs, sizeof(err_hs)) != 0) {
                fatal("--hellaswag: %s%s", err_hs, c.llmc_hellaswag ? " (llm.c's -h 1 reads this path: make it with scripts/prepare_hellaswag.sh "
                      "dev/data/hellaswag, or give --hellaswag FILE --hellaswag-every N)" : "");
            }
            have_hs = 1;
        }
    }

    // model, optimizer, gradients, activations: one allocation per family; the parameters stream in as fp32 and
    // become the compute copy (rounded to --dtype) and the master weights of each rank's shard
    GPT model;
    ModelSplit split = {&pc.tp_group, c.sequence_parallel, &pc.pp_group, V, chunk_first, c.zero == 3, NULL, B, c.attention};
    gpt_init_ctx(&model, &split, dtype_parse(c.dtype), T, gc.channels);
#ifdef KERNELS_CUDA
    // NCCL refuses a communicator whose ranks share a GPU (as the tests' processes on one GPU do). --comm nccl stops
    // here on such data- or tensor-parallel ranks, in our words and with the way out; --comm auto takes NCCL when this
    // build has it, there is more than one process and there are none, and MPI through pinned host memory otherwise.
    // Every rank takes the same decision (the largest "shared" over the world).
    int comm_auto = strcmp(c.comm, "auto") == 0;
    if ((comm_auto || strcmp(c.comm, "nccl") == 0) && comm_nccl_available() && pc.world_size > 1) {
        CommGroup* groups[2] = {&pc.tp_group, &pc.dp_group};
        double shared = 0.0;
        for (int k = 0; k < 2; k++) {
            int a, b;
            if (groups[k]->size > 1 && comm_nccl_shared_device(groups[k], &model.ctx, &a, &b)) {
                if (!comm_auto) {
                    fatal("--comm nccl: ranks %d and %d of the %s group share a GPU, which NCCL refuses (one GPU per process; "
                          "--comm mpi runs processes that share GPUs)", a, b, groups[k]->name);
                }
                shared = 1.0;
            }
        }
        if (comm_auto) {
            comm_allreduce_max_f64(&pc.world, &shared, 1);
            if (shared == 0.0) { snprintf(c.comm, sizeof(c.comm), "nccl"); }
        }
    }
    if (strcmp(c.comm, "auto") == 0) { snprintf(c.comm, sizeof(c.comm), "mpi"); }
#endif
    // the pipeline's messages go device to device through NCCL pairs, unless stages share a GPU (pp_shared: two of them)
    int pp_shared[2] = {-1, -1};
    if (c.pp > 1 && strcmp(c.comm, "nccl") == 0) {
        run.pp_nccl = !comm_nccl_shared_device(&pc.pp_group, &model.ctx, &pp_shared[0], &pp_shared[1]);
    }
    // the planner's count of what this rank will allocate, for the path just decided, checked against the device
    // before any allocation
    run.nccl = strcmp(c.comm, "nccl") == 0;
    double planned[4];
    plan_rank_memory(&gc, &run, pc.pp_rank, chunk_first, sizeof(floatX), planned);
    split.planned = planned;
    gpt_alloc_params_split(&model, &gc, pc.dp, &split, T);
    ZeroOptimizer zopt;
    gpt_zero_init_staged(&zopt, &model, c.zero, &pc.dp_group, comm_is_staged(c.comm));
    static CommNccl nccl, nccl_tp; // --comm nccl: the data-parallel group's communicator (the optimizer's reductions)
                                   // and the tensor-parallel group's (tp.h's collectives); both ended at exit
    if (strcmp(c.comm, "nccl") == 0) {
        if (pc.tp > 1) { // every rank joins its tp group's communicator, then its dp group's: the same order everywhere
            comm_nccl_init(&nccl_tp, &pc.tp_group);
            pc.tp_group.nccl = &nccl_tp;
            comm_nccl_reserve(&nccl_tp, (size_t)B * T * model.cfg.channels); // (tp.h's largest collective: a (B, T, C) activation)
        }
        comm_nccl_init(&nccl, &pc.dp_group);
        zero_set_nccl(&zopt, &nccl);
    }
    if (strcmp(c.grad_compress, "bf16") == 0) { zero_set_compress(&zopt); }
    PowerSgd psgd;
    char gcerr[256];
    int psgd_rank = powersgd_spec_rank(c.grad_compress, gcerr, sizeof(gcerr)); // (checked by parse_flags)
    int have_psgd = psgd_rank > 0 && pc.dp > 1; // one data-parallel rank reduces nothing: there is nothing to compress
    if (have_psgd) { gpt_powersgd_init(&psgd, &model, &zopt, psgd_rank, splitmix64((uint64_t)c.seed ^ 0x50534744ull)); }
    // parameters stream into the model a chunk at a time (a Hugging Face checkpoint, whose Conv1D weights are
    // transposed on the way, still goes through one host copy of the model)
    // Files and the initialisation are in the whole model's layout; under tensor parallelism each rank keeps its
    // share (the stream slices), so a fresh model is the same whatever --tp.
    uint64_t model_sum = 0;
    GptStreamTarget target;
    ParamStream into_local = gpt_stream(&model, &zopt, &target);
    ShareStream shs;
    ParamStream into_model = share_stream(&shs, &model.layout, &model.glayout, &into_local, &pc.tp_group, &pc.pp_group);
    if (model_fp) { model_sum = model_load_stream(init_path, model_fp, model_version, &model.glayout, &into_model, resume_sum_kind); }
    else if (!from_hf) { init_params_stream(&into_model, &model.glayout, (uint64_t)c.seed); }
    else {
        float* host = (float*)mallocCheck(mulSize(model.glayout.num_params, sizeof(float)));
        hf_load_params(&hf, &model.glayout, host);
        for (int i = 0; i < model.glayout.num_tensors; i++) {
            const ParamEntry* e = &model.glayout.table[i];
            into_model.put(into_model.self, e->offset, host + e->offset, e->rows * e->cols);
        }
        free(host);
    }
    share_stream_free(&shs);
    gpt_alloc_grads(&model, c.zero, pc.dp);
    // activations: one slot (every block) without a pipeline; with one, a slot per micro-batch the schedule keeps
    // alive on this rank, each for its largest chunk
    Pipeline pipe;
    ActShape shape = {model.tp, model.sp, gc.num_layers, 1, 1};
    if (c.pp > 1) {
        pipeline_init(&pipe, &model, pp_kind, grad_accum, V, B, T, c.trace[0] ? 3 : 0);
        model.pipe = &pipe;
        if (run.pp_nccl) { pipeline_use_nccl(&pipe, &model); }
        else if (strcmp(c.comm, "nccl") == 0 && master) {
            printf("note: --comm nccl: pipeline stages %d and %d share a GPU, which NCCL refuses: the pipeline's messages "
                   "go through MPI on pinned host copies\n", pp_shared[0], pp_shared[1]);
        }
        shape.layers = 0;
        for (int v = 0; v < V; v++) {
            int g = v * c.pp + pc.pp_rank, nb = chunk_first[g + 1] - chunk_first[g];
            if (nb > shape.layers) { shape.layers = nb; }
        }
        shape.head = model.layout.has_lnf;
        shape.nslots = pipe.nslots;
    }
    activations_alloc_shape(&model.acts, &model.ctx, &gc, &shape, B, T, c.recompute);
    model.acts0 = model.acts;
    char why[160];
    if (run.nccl && (pc.tp > 1 || run.pp_nccl) && !comm_nccl_launch_order(why, sizeof(why)) && master) {
        // several communicators in this process: the tensor-parallel group's or the pipeline's pairs beside the
        // data-parallel group's
        fprintf(stderr, "warning: --comm nccl: %s: the communicators of several groups in flight at once may deadlock "
                        "(NCCL 2.26 or later orders them when NCCL_LAUNCH_ORDER_IMPLICIT=1, which this program sets unless told otherwise)\n", why);
    }

    TrainState ts;
    memset(&ts, 0, sizeof(ts));
    ts.rng = (uint64_t)c.seed * 0x2545F4914F6CDD1DULL + 7;
    outlier_init(&ts.loss_w, c.outlier_window);
    outlier_init(&ts.norm_w, c.outlier_window);
    ts.sr_seed = splitmix64((uint64_t)c.seed ^ 0x5352ull); // "SR": its own stream, independent of the others
    ts.loss_scale.scale = model.ctx.dtype == DTYPE_FP16 ? c.loss_scale : 1.0f;
    if (resume_step >= 0) {
        int had_windows = checkpoint_load_state(resume_dir, resume_step, &model, &zopt, &ts, model_sum);
        if (master && !had_windows && (c.skip_loss_z > 0.0f || c.skip_grad_z > 0.0f)) {
            printf("note: --resume %s: the checkpoint holds no outlier-guard windows (its run had no --skip-loss-z or --skip-grad-z): "
                   "they fill afresh, and no update is skipped for the next %d steps\n", c.resume, c.outlier_window);
        }
        sharedfs_drop_copy(resume_scratch);
        if (have_train && dataloader_set_state(&train_loader, ts.data_state, err, sizeof(err)) != 0) { fatal("--resume: %s", err); }
        // a different global batch is allowed (a batch-size ramp), but never silent: without --total-batch-size it
        // follows the number of processes (B x T x dp), so a resume on fewer ranks would shrink it unnoticed
        if (master && ts.total_batch != 0 && ts.total_batch != (uint64_t)c.total_batch_size) {
            printf("note: --resume %s: the checkpoint's run took %llu tokens per step, this one takes %ld (--total-batch-size; "
                   "without it, B x T x processes)\n", c.resume, (unsigned long long)ts.total_batch, c.total_batch_size);
        }
    }
    if (master && c.out[0] && !c.bench) {
        prepare_out_dir(c.out);
        // what dead writers left: temporary files, and when resuming into the same directory unpaired files too
        if (resume_step >= 0 && strcmp(c.out, c.resume) == 0) { checkpoint_prune(c.out, 0, 0, resume_step); }
        else { atomic_clean_stale(c.out); }
    }
    if (c.out[0] && !c.bench) { sharedfs_check_out(&pc, c.out); } // (hosts without a filesystem shared with rank 0 are named)
    Tokenizer tokenizer;
    int have_tok = 0;
    if (c.tokenizer[0] && master) {
        if (tokenizer_init(&tokenizer, c.tokenizer) != 0) { fatal("--tokenizer: cannot load '%s'", c.tokenizer); }
        have_tok = 1;
    }

    print_run_plan(&c, &model, &zopt, &pc, &run, chunk_first, grad_accum, have_train ? dataloader_num_tokens(&train_loader) : 0);
    if (master && psgd_rank > 0) { print_powersgd_plan(have_psgd ? &psgd : NULL, &model, &zopt, psgd_rank); }
    if (eval_only) {
        double t0 = now_seconds();
        HsResult hr = evaluate_hellaswag(&model, &hs, &pc);
        if (master) {
            if (c.hellaswag_details[0]) { hellaswag_write_details(c.hellaswag_details, &hs, &hr); }
            printf("hellaswag: evaluated in %.1f s on %d data-parallel rank(s)\n", now_seconds() - t0, pc.dp);
            printf("hellaswag: %d examples, acc %.4f, acc_norm %.4f\n", hr.examples, hr.acc, hr.acc_norm);
            fflush(stdout);
        }
        free(hr.sums);
        hellaswag_free(&hs);
        zero_free(&zopt);
        comm_nccl_free(&nccl);
        comm_nccl_free(&nccl_tp);
        if (model.pipe) { pipeline_free(&pipe, &model); }
        free(chunk_first);
        gpt_free(&model);
        parallel_finalize(&pc);
        return 0;
    }

    FILE* logf = NULL;
    if (master && c.log[0]) {
        logf = fopen(c.log, ts.step > 0 ? "a" : "w");
        if (!logf) { fatal("--log: cannot open '%s': %s", c.log, strerror(errno)); }
        // one line saying what ran (readers of step lines skip it: it has no "step")
        fprintf(logf, "{\"run\": {\"start_step\": %d, \"dtype\": \"%s\", \"recompute\": %d, \"zero\": %d, \"processes\": %d, "
                "\"dp\": %d, \"tp\": %d, \"sequence_parallel\": %d, \"tokens_per_step\": %ld, \"activation_bytes\": %.0f}}\n",
                ts.step, dtype_name(model.ctx.dtype), c.recompute, c.zero, pc.world_size, pc.dp, pc.tp, model.sp,
                c.total_batch_size, (double)model.acts.total_bytes);
        fflush(logf);
    }

    BackwardComm bc;
    bc.z = &zopt;
    int32_t* bench_tokens = NULL;
    int steps = c.steps;
    if (c.bench) {
        steps = c.bench_steps + 1; // the first step warms up and is not timed
        bench_tokens = (int32_t*)mallocCheck(sizeof(int32_t) * (B * T + 1));
        uint64_t s = 42 + pc.dp_rank;
        for (int i = 0; i <= B * T; i++) { bench_tokens[i] = (int32_t)(rng_next(&s) % gc.vocab_size); }
    }
    double fpt = flops_per_token(&model, T);
    double t_train = 0.0, t_bench = 0.0, t_backward = 0.0, t_forward = 0.0, wait_bench = 0.0;
    int timed_steps = 0;
    CommCounts comm0;
    memset(&comm0, 0, sizeof(comm0));
    float last_val = -1.0f;
    int start_step = ts.step;
    int resumed = resume_step >= 0;
    int guard = c.skip_loss_z > 0.0f || c.skip_grad_z > 0.0f; // the outlier guard (outlier.h) is on
    for (int step = start_step; step <= steps; step++) {
        int last = step == steps;
        // a resumed run starts where the checkpoint was written: the evaluation and the sample of that step were
        // done (and the sample's RNG draws recorded) before the checkpoint, so they are not repeated
        int again = resumed && step == start_step;
        if (have_val && (step % c.val_every == 0 || last) && !again) {
            last_val = evaluate(&model, &val_loader, c.val_steps, &pc);
            if (master) {
                printf("step %5d | val loss %.6f\n", step, last_val);
                if (logf) { fprintf(logf, "{\"step\": %d, \"val_loss\": %.9g}\n", step, last_val); fflush(logf); }
            }
        }
        if (have_hs && (step % c.hellaswag_every == 0 || last) && !again) {
            HsResult hr = evaluate_hellaswag(&model, &hs, &pc);
            if (master) {
                printf("step %5d | hellaswag acc %.4f acc_norm %.4f (%d examples)\n", step, hr.acc, hr.acc_norm, hr.examples);
                if (logf) { fprintf(logf, "{\"step\": %d, \"hellaswag_acc\": %.9g, \"hellaswag_acc_norm\": %.9g}\n", step, hr.acc, hr.acc_norm); fflush(logf); }
            }
            free(hr.sums);
        }
        // (every rank of data-parallel rank 0's tensor-parallel group: their forwards are collective; rank 0 prints;
        // under ZeRO-3 every rank, since the forward gathers the parameters from all data-parallel ranks)
        if ((pc.dp_rank == 0 || model.z3) && c.sample_every > 0 && step > start_step && (step % c.sample_every == 0 || last) && !c.bench) {
            generate(&model, &tokenizer, have_tok, c.gen_tokens, T, &ts.rng, master);
        }
        if (c.out[0] && c.checkpoint_every > 0 && step > start_step && (step % c.checkpoint_every == 0 || last) && !c.bench) {
            TrainState cur = ts;
            cur.step = step;
            if (have_train) { dataloader_get_state(&train_loader, cur.data_state); }
            checkpoint_save(c.out, &model, &zopt, &cur, &pc, &c);
        }
        if (last) { break; }
        maybe_inject_fault(pc.world_rank, step);
        if (c.bench && step == start_step + 1) { comm_counts_take(&comm0, &pc); zopt.gather_seconds = 0.0; } // the timed steps begin
        if (c.overfit_batch && have_train) { dataloader_reset(&train_loader); } // --overfit-batch: the same batches again

        StepResult sr = train_step(&model, &zopt, &bc, &c, &pc, &ts, have_train ? &train_loader : NULL, bench_tokens, grad_accum, step);
        StepStats st = sr.stats;
        double dt = sr.seconds;
        t_train += dt;
        if (c.bench && step > 0) {
            t_bench += dt; t_backward += sr.backward_seconds; t_forward += sr.forward_seconds; wait_bench += sr.wait_seconds;
            timed_steps++;
        }
        ts.step = step + 1;
        double tok_s = c.total_batch_size / dt;
        if (master) {
            int done = step + 1 - start_step;
            double eta = done > 0 ? t_train / done * (steps - step - 1) : 0.0;
            char scale_note[64] = "", z_note[160] = "";
            if (model.ctx.dtype == DTYPE_FP16) { snprintf(scale_note, sizeof(scale_note), " | scale %g", sr.loss_scale); }
            if (guard) {
                // llm.c's "(+1.23z)" after the loss and the norm; "-" while the window fills
                char zl[16] = "-", zn[16] = "-";
                if (isfinite(sr.z_loss)) { snprintf(zl, sizeof(zl), "%+.2f", sr.z_loss); }
                if (isfinite(sr.z_norm)) { snprintf(zn, sizeof(zn), "%+.2f", sr.z_norm); }
                snprintf(z_note, sizeof(z_note), " | z loss %s norm %s", zl, zn);
                if (sr.outlier) {
                    int by_loss = strcmp(sr.outlier, "loss") == 0;
                    snprintf(z_note + strlen(z_note), sizeof(z_note) - strlen(z_note), " | skipped: %s z-score above --%s %g",
                             by_loss ? "loss" : "gradient norm", by_loss ? "skip-loss-z" : "skip-grad-z", by_loss ? c.skip_loss_z : c.skip_grad_z);
                }
            }
            printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | %.1f GFLOP/s | eta %dm%02ds%s%s%s\n",
                   step + 1, steps, sr.loss, st.grad_norm, st.lr, dt * 1e3, tok_s, tok_s * fpt / 1e9,
                   (int)eta / 60, (int)eta % 60, scale_note, z_note,
                   sr.finite ? "" : sr.overflow ? " | skipped: gradient overflow, loss scale halved" : " | skipped: not finite (--nan-policy skip)");
            fflush(stdout);
            if (logf) {
                // JSON has no NaN: a skipped step logs null for what was not finite
                char lv[32] = "null", nv[32] = "null";
                if (isfinite(sr.loss)) { snprintf(lv, sizeof(lv), "%.9g", sr.loss); }
                if (isfinite(st.grad_norm)) { snprintf(nv, sizeof(nv), "%.9g", st.grad_norm); }
                char sc[48] = "", zj[128] = "";
                if (model.ctx.dtype == DTYPE_FP16) { snprintf(sc, sizeof(sc), ", \"loss_scale\": %.9g", sr.loss_scale); }
                if (guard) {
                    char zl[32] = "null", zn[32] = "null";
                    if (isfinite(sr.z_loss)) { snprintf(zl, sizeof(zl), "%.9g", sr.z_loss); }
                    if (isfinite(sr.z_norm)) { snprintf(zn, sizeof(zn), "%.9g", sr.z_norm); }
                    snprintf(zj, sizeof(zj), ", \"loss_z\": %s, \"grad_norm_z\": %s", zl, zn);
                    if (sr.outlier) { snprintf(zj + strlen(zj), sizeof(zj) - strlen(zj), ", \"skipped\": true, \"outlier\": \"%s\"", sr.outlier); }
                }
                fprintf(logf, "{\"step\": %d, \"loss\": %s, \"lr\": %.9g, \"grad_norm\": %s, \"ms\": %.3f, \"tokens_per_s\": %.1f%s%s%s}\n",
                        step + 1, lv, st.lr, nv, dt * 1e3, tok_s, sc, zj, sr.finite ? "" : ", \"skipped\": true");
                fflush(logf);
            }
        }
        if (ts.skipped_in_a_row >= c.max_skipped_steps) {
            fatal("step %d: %d steps in a row had a non-finite loss or gradient norm (--max-skipped-steps %d): training diverged",
                  step + 1, ts.skipped_in_a_row, c.max_skipped_steps);
        }
    }

    if (master && zopt.grad_bytes_fp32 > 0 && steps > start_step) {
        // measured: what this rank sent for the gradient reductions, per step, against plain fp32 reductions
        double k = steps - start_step;
        char sb[32], fb[32];
        fmt_bytes(sb, sizeof(sb), zopt.grad_bytes / k);
        fmt_bytes(fb, sizeof(fb), zopt.grad_bytes_fp32 / k);
        printf("gradient bytes per step: %s sent per rank (uncompressed %s, ratio %.4f; --grad-compress %s) [%.0f of %.0f bytes]\n",
               sb, fb, zopt.grad_bytes / zopt.grad_bytes_fp32, c.grad_compress, zopt.grad_bytes / k, zopt.grad_bytes_fp32 / k);
    }
    if (c.bench) {
        bench_report(&c, &model, &zopt, &pc, t_bench, t_forward, t_backward, wait_bench, timed_steps, &comm0);
    } else {
        // every group's verdict, gathered over the world (a group that disagrees anywhere fails the job)
        if (pc.dp > 1 && c.zero < 3) { // (under ZeRO-3 each rank keeps only its shard)
            double bad = !params_agree(&model, &pc.dp_group, 0);
            comm_allreduce_max_f64(&pc.world, &bad, 1);
            if (master) { printf("parameters after training: %s on all %d data-parallel ranks\n", bad == 0.0 ? "identical" : "DIFFERENT", pc.dp); }
            if (bad != 0.0) { fatal("data-parallel ranks ended with different parameters"); }
        }
        if (pc.pp > 1) {
            // the tied wte's two copies, on the first and the last stage
            double mine[1] = {0.0};
            if (model.layout.has_wte) {
                size_t n = (size_t)model.vocab_n * gc.channels;
                float* buf = (float*)mallocCheck(n * sizeof(float));
                params_to_f32(&model.ctx, buf, model.p.wte, n);
                mine[0] = (double)checksum_buffer(buf, n * sizeof(float));
                free(buf);
            }
            double first = pc.pp_rank == 0 ? mine[0] : 0.0, last = pc.pp_rank == pc.pp - 1 ? mine[0] : 0.0;
            comm_allreduce_sum_f64(&pc.pp_group, &first, 1);
            comm_allreduce_sum_f64(&pc.pp_group, &last, 1);
            double bad = first != last;
            comm_allreduce_max_f64(&pc.world, &bad, 1);
            if (master) { printf("tied token embedding after training: %s on the first and last pipeline stage\n", bad == 0.0 ? "identical" : "DIFFERENT"); }
            if (bad != 0.0) { fatal("the first and last pipeline stages ended with different copies of the tied token embedding"); }
        }
        if (pc.tp > 1) {
            double bad = !params_agree(&model, &pc.tp_group, 1);
            comm_allreduce_max_f64(&pc.world, &bad, 1);
            if (master) { printf("replicated parameters after training: %s on all %d tensor-parallel ranks\n", bad == 0.0 ? "identical" : "DIFFERENT", pc.tp); }
            if (bad != 0.0) { fatal("tensor-parallel ranks ended with different replicated parameters"); }
        }
    }
    if (model.pipe) {
        // the measured bubble: the share of the forward/backward phase of a step each rank spent not computing,
        // averaged over ranks and steps, next to the schedule's theory
        double t[2] = {pipe.busy_seconds, pipe.step_seconds};
        comm_allreduce_sum_f64(&pc.world, t, 2);
        if (master && t[1] > 0) {
            printf("pipeline: bubble measured %.1f%% of the forward/backward phase (mean over ranks), theory %.1f%% (%s, p %d, m %d, v %d)\n",
                   100.0 * (1.0 - t[0] / t[1]), 100.0 * pp_bubble_theory(pipe.kind, pipe.pp, pipe.M, pipe.V), pp_schedule_names[pipe.kind],
                   pipe.pp, pipe.M, pipe.V);
        }
        if (c.trace[0]) {
            pp_write_trace(&pipe, &pc, c.trace);
            if (master) { printf("pipeline: trace of the first %d steps written to %s (open in ui.perfetto.dev or chrome://tracing)\n", pipe.trace_steps, c.trace); }
        }
    }
    if (!c.bench) {
        DeviceMemory dm;
        int have_dm = device_memory(&model, &zopt, &pc, &dm);
        if (master) {
            char rs[32], gm[320] = "";
            fmt_bytes(rs, sizeof(rs), (double)peak_rss_kb() * 1024.0);
            if (have_dm) {
                snprintf(gm, sizeof(gm), "; GPU memory in use %.2f GB (rank 0), bytes beyond the planner's over the %d rank(s): least %.0f, most %.0f; "
                         "device buffers grown after start-up: %.0f bytes", dm.used / 1e9, pc.world_size, dm.least, dm.most, dm.grown);
            }
            printf("done: %d steps, peak RSS %s%s\n", steps, rs, gm);
        }
    }

    if (logf) { fclose(logf); }
    if (have_train) { dataloader_free(&train_loader); }
    if (have_val) { dataloader_free(&val_loader); }
    if (have_hs) { hellaswag_free(&hs); }
    if (have_tok) { tokenizer_free(&tokenizer); }
    free(bench_tokens);
    zero_free(&zopt);
    comm_nccl_free(&nccl);
    comm_nccl_free(&nccl_tp);
    if (have_psgd) { powersgd_free(&psgd); }
    if (model.pipe) { pipeline_free(&pipe, &model); }
    free(chunk_first);
    gpt_free(&model);
    parallel_finalize(&pc);
    return 0;
}
#endif // TRAIN_GPT_NO_MAIN
