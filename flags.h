/*
flags.h: train_gpt.c's command line, split out of it by topic and included by it after the kernels, ZeRO, the
outlier guard and the layout (it uses dtype_name, dtype_parse, powersgd_spec_rank, OUTLIER_MAX_WINDOW and
llmc_descriptor_digits; it is not a standalone header). Every flag is declared once, in a table that also prints
--help and the resolved configuration and is hashed to check that all ranks run the same one; llm.c's train_gpt2.cu
flags are read with llm.c's meaning (most are aliases in the table, the rest are read by llmc_other_flag).
parse_flags checks every value and the combinations that make no sense, and exits with one line naming the flag.
*/
#ifndef FLAGS_H
#define FLAGS_H

typedef enum { FLAG_INT, FLAG_FLOAT, FLAG_STR } FlagType;

typedef struct {
    // model
    char model[64];          // a size by name (d12, gpt2-124M, gpt3-125M, ...) when no --init file is given
    char init[1024];         // start from this model file: llm.c (.bin) or Hugging Face safetensors
    char export_hf[1024];    // write the --init model as a Hugging Face checkpoint to this directory and exit
    char export_llmc[1024];  // write the --init model as an llm.c model file (fp32, or bf16 with --dtype bf16) and exit
    // data
    char train[1024];
    char val[1024];
    char tokenizer[1024];
    int shuffle;
    // batch
    int batch_size;          // B: sequences per micro-step per process
    int seq_len;             // T
    long total_batch_size;   // tokens per optimizer step, all processes together (0: B*T*dp)
    int steps;               // the run's length in steps of --total-batch-size tokens (a batch ramp takes more, smaller steps)
    long batch_ramp_start;   // tokens of the first steps' batch, which grows to --total-batch-size (0: no ramp; train_gpt.c: ramp_batch)
    long batch_ramp_tokens;  // the tokens trained on while the batch grows
    int recompute;           // 0: keep every activation; 1: recompute GELU and LayerNorm outputs; 2: whole blocks
    char attention[16];      // auto | cudnn | native: the attention implementation (GPU builds have two)
    int deterministic;       // 1: every kernel sums in a fixed order (runs repeat bit for bit); 0: cuDNN's attention
                             // backward may accumulate dQ with atomics (GPU builds with cuDNN)
    int tf32;                // 1: fp32 GPU matmuls on TF32 tensor cores (llm.c's -f); 0: exact fp32
    int matmul_tune;         // GPU: time cuBLASLt's first N candidate algorithms per matmul shape, keep the fastest
    char matmul_algos[1024]; // GPU: the file of chosen matmul algorithms (read first; written when tuning)
    char comm[16];           // auto | mpi | staged | nccl: how collectives reach the buffers
    // precision
    char dtype[8];           // fp32 | bf16 | fp16: storage of activations and the compute copy of the parameters
    int master_weights;      // 0: no fp32 master weights beside a 16-bit compute copy (llm.c's -w 0)
    float loss_scale;        // fp16: initial dynamic loss scale
    float loss_scale_growth; // fp16: factor after loss_scale_window clean steps in a row
    float loss_scale_backoff;// fp16: factor after an overflowing step
    int loss_scale_window;   // fp16: clean steps in a row before the scale grows
    // optimizer
    float lr;
    char lr_schedule[32];
    int warmup;
    int lr_decay_steps;      // the decay ends here and the rate stays at lr * final_lr_frac after (0: at --steps)
    float final_lr_frac;
    float weight_decay;
    float grad_clip;
    float adam_beta1, adam_beta2, adam_eps; // AdamW's moment decays and the epsilon added to sqrt(v-hat)
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
    int generate;            // print this many samples of the model and exit (0: off)
    char prompt[1024];       // the text samples continue (GPT-2's BPE; empty: they start after <|endoftext|>)
    float temperature;       // samples from softmax(logits / temperature); 0: the most likely token (greedy)
    int top_k;               // samples from the top_k most likely tokens only (0: all)
    float top_p;             // then from the fewest most likely tokens whose probability reaches top_p (1: all)
    float min_p;             // then from those at least min_p times as likely as the most likely one (0: all)
    int kv_cache;            // 1: samples cache each layer's keys and values (one position's forward per token)
    int cuda_graphs;         // 1: a GPU build replays each decoding step of the KV cache as one CUDA graph
    int logprobs;            // 1: --generate prints each sample's log-probability under the model
    int stop_at_eot;         // 1: a sample ends at the first <|endoftext|> it draws
    float repetition_penalty; // the logit of a token already in the sample: divided by it when positive, times it when not (1: off)
    int checkpoint_every;
    char out[1024];
    int keep_checkpoints;    // keep the newest N checkpoints in --out (0: all)
    int major_checkpoint_every; // checkpoints at multiples of this many steps are never pruned (0: none)
    int llmc_checkpoints;    // 1: each checkpoint also writes llm.c's per-process state files (llmc_state.h)
    char resume[1024];
    int auto_resume;         // 1: resume from --out when it holds a checkpoint, else start fresh (llm.c's -y 1)
    char resume_settings[16]; // note | refuse | checkpoint: what a resume that changes the checkpoint's run settings does (checkpoint.h)
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
    char plan_storage[8];    // build | gpu: floatX elements as this build stores them, or in each layout's dtype as GPU builds do
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
    FLAG_S("export-llmc", NULL, export_llmc, "with --init FILE only: write that model to FILE as an llm.c model file and exit: version 3 (fp32), or with --dtype bf16 version 5 (llm.c's *_bf16.bin, which its default bf16 build needs for -e)"),
    FLAG_S("train", "-i", train, "glob pattern of training shards; or, with --shuffle 1, a blend of data sets W1:GLOB1,W2:GLOB2,... sampled in proportion to the weights (Megatron's --data-path)"),
    FLAG_S("val", "-j", val, "glob pattern of validation shards; or W1:GLOB1,W2:GLOB2,...: each data set evaluated on its own (val_loss_K in the log), the val loss their weighted mean"),
    FLAG_S("tokenizer", NULL, tokenizer, "llm.c gpt2_tokenizer.bin to decode samples (token ids are printed without it)"),
    FLAG_I("shuffle", NULL, shuffle, 0, 2, "0: llm.c's sequential order; 1: shuffled distributed sampler; 2: llm.c's shuffled order (train_gpt2.cu's batches, given its B, T and processes)"),
    FLAG_I("batch-size", "-b", batch_size, 1, 1 << 20, "sequences per micro-step per process (B); with --generate, the samples drawn together (default up to 8; with the KV cache)"),
    FLAG_I("seq-len", "-t", seq_len, 1, 1 << 20, "sequence length (T), at most the model's context"),
    FLAG_I("total-batch-size", "-d", total_batch_size, 0, 1e12, "tokens per optimizer step over all processes; 0: B*T*processes"),
    FLAG_I("steps", "-x", steps, -1, 1e9, "optimizer steps to train, each of --total-batch-size tokens (with --batch-ramp-start: the run's length in such steps, that is steps x total-batch-size tokens, and the ramp's smaller steps come on top); -1: one epoch of the training data (llm.c's default)"),
    FLAG_I("batch-ramp-start", NULL, batch_ramp_start, 0, 1e12, "GPT-3's batch-size ramp (Megatron-LM's --rampup-batch-size): the first steps train on this many tokens, a divisor of --total-batch-size and a multiple of seq-len x data-parallel ranks (of batch-size x seq-len x ranks with --pp or --shuffle 2: a step smaller than a micro-batch otherwise runs one of fewer sequences); the batch grows by this many tokens at a time, in equal shares of --batch-ramp-tokens, to --total-batch-size. The learning-rate schedule runs on tokens (a step of N tokens advances it by N / total-batch-size steps); 0: no ramp"),
    FLAG_I("batch-ramp-tokens", NULL, batch_ramp_tokens, 0, 1e13, "with --batch-ramp-start: the tokens trained on while the batch grows to --total-batch-size (GPT-3: 4 to 12 billion)"),
    FLAG_I("seed", NULL, seed, 0, 2147483647, "seed for initialisation, data order and sampling"),
    FLAG_I("overfit-batch", "-a", overfit_batch, 0, 1, "1: every step trains on the same first batch, the data restarting at each step (llm.c's debugging mode: the loss should fall towards 0)"),
    FLAG_I("recompute", NULL, recompute, 0, 2, "activations recomputed in backward: 0 none; 1 GELU and LayerNorm outputs (llm.c); 2 whole blocks, keeping only each block's input (Megatron's full recomputation)"),
    FLAG_S("attention", NULL, attention, "attention implementation: auto | native (our kernels; the only one on the CPU) | cudnn (cuDNN's fused flash attention: GPU builds with cuDNN, bf16/fp16)"),
    FLAG_I("deterministic", NULL, deterministic, 0, 1, "1 (the default): every kernel sums in a fixed order, so a run repeats bit for bit and resumes exactly; 0: GPU builds with cuDNN's attention run its faster backward, which adds each key tile's share of dQ into an fp32 accumulator with atomics instead of keeping a T x T buffer for a second pass: the last bits of dQ, and so of the run, then change from run to run (the cuDNN frontend's default on Hopper, where the deterministic variant must be asked for). The CPU's kernels are always deterministic"),
    FLAG_I("matmul-tune", NULL, matmul_tune, 0, 64, "GPU builds: time cuBLASLt's first N candidate algorithms for each matmul shape when it first appears (on scratch operands) and keep the fastest; 0 or 1: the heuristic's first, as cuBLASLt ranks them. The choices go to --matmul-algos, which later runs and resumes read instead of timing again"),
    FLAG_S("matmul-algos", NULL, matmul_algos, "GPU builds: a file of chosen matmul algorithms, one per shape: read at start (each algorithm checked by cuBLASLt; a file for another GPU, cuBLASLt or dtype is not used) and rewritten as --matmul-tune chooses more. Default with --matmul-tune: <--out>/matmul_algos.txt; with several processes each has its own, <file>.rank<R>"),
    FLAG_I("tf32", "-f", tf32, 0, 1, "1: an fp32 GPU build (PRECISION=FP32) runs its matmuls on TF32 tensor cores, operands cut to a 10-bit mantissa, sums in fp32 (llm.c's -f 1, its default); 0: exact fp32. Nothing else has fp32 matmuls to change; --plan 1 models fp32 layouts with it"),
    FLAG_S("dtype", NULL, dtype, "storage of activations and the compute copy of the parameters: fp32 | bf16 | fp16 (fp32 master weights, moments and gradients in all; the CPU emulates bf16/fp16 by rounding each stored value)"),
    FLAG_I("master-weights", "-w", master_weights, 0, 1, "with --dtype bf16/fp16: 1 keeps fp32 master weights, which AdamW updates, beside the 16-bit compute copy; 0 keeps none, and AdamW updates the compute copy itself by stochastic rounding: 4 bytes a parameter less (llm.c's -w 0)"),
    FLAG_F("loss-scale", NULL, loss_scale, 1, 3.4e38, "--dtype fp16: initial dynamic loss scale (PyTorch GradScaler's init_scale)"),
    FLAG_F("loss-scale-growth", NULL, loss_scale_growth, 1, 1e6, "--dtype fp16: the scale's factor after --loss-scale-window clean steps in a row (growth_factor)"),
    FLAG_F("loss-scale-backoff", NULL, loss_scale_backoff, 1e-6, 1, "--dtype fp16: the scale's factor after a step with an inf/NaN gradient, which is skipped (backoff_factor)"),
    FLAG_I("loss-scale-window", NULL, loss_scale_window, 1, 1e9, "--dtype fp16: clean steps in a row before the scale grows (growth_interval)"),
    FLAG_F("lr", "-l", lr, 0, 10, "peak learning rate"),
    FLAG_S("lr-schedule", "-k", lr_schedule, "cosine | linear | constant | wsd (warmup, constant, then 1 - sqrt decay over the last 20% of --steps, as llm.c's); all with linear warmup"),
    FLAG_I("warmup", "-u", warmup, 0, 1e9, "warmup steps"),
    FLAG_I("lr-decay-steps", NULL, lr_decay_steps, 0, 1e9, "the cosine, linear or wsd decay ends at this step and the learning rate stays at --final-lr-frac of the peak after it (GPT-3: 260B of 300B tokens; Megatron-LM's --lr-decay-iters); 0: at --steps"),
    FLAG_F("final-lr-frac", "-q", final_lr_frac, 0, 1, "final learning rate as a fraction of the peak"),
    FLAG_F("weight-decay", "-c", weight_decay, 0, 10, "AdamW decoupled weight decay (matrices and embeddings only)"),
    FLAG_F("grad-clip", NULL, grad_clip, 0, 1e9, "clip the global gradient norm to this; 0 turns clipping off"),
    FLAG_F("adam-beta1", NULL, adam_beta1, 0, 1, "AdamW's decay of the gradient's running mean, below 1 (PyTorch's betas[0]; Megatron-LM names it the same)"),
    FLAG_F("adam-beta2", NULL, adam_beta2, 0, 1, "AdamW's decay of the squared gradient's running mean, below 1 (GPT-2/GPT-3 and llm.c: 0.95; PyTorch's default 0.999)"),
    FLAG_F("adam-eps", NULL, adam_eps, 1e-30, 1, "AdamW's epsilon, added to the square root of the bias-corrected second moment"),
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
    FLAG_I("generate", NULL, generate, 0, 1e6, "N: print N samples of the --init (or --model) model, --gen-tokens each, and exit (with --prompt, --temperature, --top-k, --seed; one process, or under mpirun a model split by --tp and --pp)"),
    FLAG_S("prompt", NULL, prompt, "text the samples (--generate, --sample-every) continue, encoded with GPT-2's BPE (encoder.json, vocab.bpe from $GPT2_VOCAB_DIR or data/gpt2; a model of GPT-2's 50257 tokens); default: after <|endoftext|>"),
    FLAG_F("temperature", NULL, temperature, 0, 100, "samples draw from softmax(logits / T); 0: always the most likely token (greedy)"),
    FLAG_I("top-k", NULL, top_k, 0, 1e8, "samples draw from the K most likely tokens only (0: the whole vocabulary)"),
    FLAG_F("top-p", NULL, top_p, 0, 1, "then from the fewest most likely tokens whose probability, renormalised over those left, reaches P (nucleus sampling, Hugging Face's top_p; 1: all; 0: the most likely)"),
    FLAG_F("min-p", NULL, min_p, 0, 1, "then only from the tokens at least P times as likely as the most likely one (Hugging Face's min_p, applied after top-p; 0: all; 1: the most likely, and any as likely)"),
    FLAG_I("logprobs", NULL, logprobs, 0, 1, "1: after each sample of --generate, a line 'logprob: S (N tokens, mean S/N)': the sum over its sampled tokens of their natural log-probability under the model (the softmax of the logits, temperature 1, whole vocabulary)"),
    FLAG_I("stop-at-eot", NULL, stop_at_eot, 0, 1, "1: a sample ends at the first <|endoftext|> it draws (printed, and counted in --logprobs), as Hugging Face's generate stops at eos; 0: it runs to --gen-tokens, as llm.c's sampler does"),
    FLAG_F("repetition-penalty", NULL, repetition_penalty, 0.01, 100, "R: before temperature, top-k and top-p, the logit of each token already in the sample (its prompt too) is divided by R when positive and multiplied by R when not, once however often it occurs (Hugging Face's repetition_penalty; 1: off; above 1 discourages repeats)"),
    FLAG_I("kv-cache", NULL, kv_cache, 0, 1, "1: samples keep each layer's keys and values, so each new token runs the forward at its own position only; 0: over the whole prefix again, as llm.c does (the same tokens, up to the order of sums; not with --sequence-parallel, which always runs 0)"),
    FLAG_I("cuda-graphs", NULL, cuda_graphs, 0, 1, "1 (the default): GPU builds record a decoding step through the KV cache (every kernel of the forward and the LM head's rows, from the step's tokens and position in memory) once as a CUDA graph, and replay it with one launch per token (a single process: not under --tp, --pp or --zero 3, whose collectives run on the host); 0: each step launches its kernels one by one (the same tokens, bit for bit). The CPU has no graphs"),
    FLAG_I("checkpoint-every", "-n", checkpoint_every, 0, 1e9, "write a checkpoint to --out every N steps (0: off)"),
    FLAG_S("out", "-o", out, "output directory (created if missing; checked at start): the checkpoints of --checkpoint-every, and llm.c's main.log"),
    FLAG_I("keep-checkpoints", "-nk", keep_checkpoints, 0, 1e9, "keep only the newest N checkpoints in --out (0: keep all)"),
    FLAG_I("llmc-checkpoints", NULL, llmc_checkpoints, 0, 1, "1: each checkpoint also writes llm.c's state_XXXXXXXX_RRRRR.bin, so llm.c's train_gpt2cu -y 1 continues the run (same processes, B, T)"),
    FLAG_I("major-checkpoint-every", "-nm", major_checkpoint_every, 0, 1e9, "checkpoints at multiples of N steps are kept for good: --keep-checkpoints neither prunes nor counts them (0: none)"),
    FLAG_S("resume", NULL, resume, "resume from the latest checkpoint in this directory"),
    FLAG_S("resume-settings", NULL, resume_settings, "note | refuse | checkpoint: a resume that changes a setting of the checkpoint's run (the optimizer's, the schedule's and --steps, --seq-len, --total-batch-size, --dtype, --master-weights, --grad-compress; not the layout) names each change and goes on with this run's values (note), refuses to start (refuse), or takes the checkpoint's optimizer and schedule settings, --steps included unless its schedule is constant, in place of this run's, naming each, and notes the rest (checkpoint)"),
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
    FLAG_S("plan-storage", NULL, plan_storage, "--plan: build (floatX as this binary stores it: what its memory table prints) | gpu (each layout's dtype, as a GPU build of that dtype stores it: 2 bytes bf16/fp16, 4 fp32)"),
    FLAG_I("plan-top", NULL, plan_top, 1, 1e6, "--plan: how many layouts to print"),
    FLAG_I("plan-verbose", NULL, plan_verbose, 0, 1, "--plan: 1 also prints every rejected layout with its reason"),
};
#define NUM_FLAGS ((int)(sizeof(FLAGS) / sizeof(FLAGS[0])))

// --llmc-checkpoints 1 writes llm.c's state files, which llm.c's AdamW (fixed betas and eps) continues: other values
// are refused (where: what set them, when not the command line).
static void llmc_check_adam(const Config* c, const char* where) {
    if (c->llmc_checkpoints && (c->adam_beta1 != 0.9f || c->adam_beta2 != 0.95f || c->adam_eps != 1e-8f)) {
        fatal("--llmc-checkpoints 1: llm.c's AdamW has fixed betas 0.9, 0.95 and eps 1e-8, so it would not continue this run "
              "(--adam-beta1 %g --adam-beta2 %g --adam-eps %g%s)", c->adam_beta1, c->adam_beta2, c->adam_eps, where);
    }
}

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
    c->adam_beta1 = 0.9f; // GPT-3's (and llm.c's) AdamW
    c->adam_beta2 = 0.95f;
    c->adam_eps = 1e-8f;
    strcpy(c->attention, "auto");
    c->deterministic = 1;
    strcpy(c->comm, "auto");
    strcpy(c->dtype, dtype_name(KERNELS_DEFAULT_DTYPE)); // fp32 on the CPU, the build's type on a GPU
    c->master_weights = 1;
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
    strcpy(c->resume_settings, "note");
    c->virtual_stages = 1;
    c->comm_timeout = 300.0f;
    c->val_every = 0;
    c->val_steps = 20;
    c->sample_every = 0;
    c->gen_tokens = 64;
    c->generate = 0;
    c->temperature = 1.0f;
    c->top_k = 0;
    c->top_p = 1.0f;
    c->min_p = 0.0f;
    c->kv_cache = 1;
    c->cuda_graphs = 1;
    c->logprobs = 0;
    c->stop_at_eot = 0;
    c->repetition_penalty = 1.0f;
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

// The integer flags held in a long (token counts past 2^31); the rest are ints.
static int flag_is_long(const FlagSpec* f) {
    return f->offset == offsetof(Config, total_batch_size) || f->offset == offsetof(Config, batch_ramp_start) ||
           f->offset == offsetof(Config, batch_ramp_tokens);
}

static void flag_value_string(const FlagSpec* f, const Config* c, char* buf, size_t cap) {
    const char* p = (const char*)c + f->offset;
    if (f->type == FLAG_INT) {
        if (flag_is_long(f)) { snprintf(buf, cap, "%ld", *(const long*)p); }
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
           "  -ge N, -lg N, -pi mpi   accepted; they change nothing here (the run says why)\n"
           "  -pi tcp|fs, -pn, -pr, -pg, -pf, -ps   refused: processes start under mpirun\n");
}

// ----------------------------------------------------------------------------
// llm.c's command line. Most of train_gpt2.cu's flags are aliases in the table above (-i, -b, -l, -sl, -nk, -y, ...);
// the rest are read here with llm.c's meaning (its defaults differ: README, "Coming from llm.c"):
//   -h 0|1   HellaSwag at every validation step from llm.c's path (-h alone, or before another flag, is --help)
//   -r 0|1|2 recomputation: none | GELU | GELU and LayerNorm; --recompute 1 recomputes both, so 1 and 2 become it
//   -e dN, gpt2:dN, gpt3:cN   a model by llm.c's descriptor (when no file has that name): --model
//   -ge, -lg, -pi mpi   accepted; they change nothing here (a note says why); -f is --tf32, -w --master-weights
//   -pi tcp|fs, -pn, -pr, -pg, -pf, -ps   refused (processes start under mpirun)
static char g_flag_notes[2048]; // what the run is told about llm.c flags that change nothing (rank 0 prints it)

static void flag_note(const char* fmt, ...) {
    size_t used = strlen(g_flag_notes);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_flag_notes + used, sizeof(g_flag_notes) - used, fmt, ap);
    va_end(ap);
}

static const FlagSpec* flag_named(const char* name) {
    for (int k = 0; k < NUM_FLAGS; k++) { if (strcmp(FLAGS[k].name, name) == 0) { return &FLAGS[k]; } }
    fatal("internal: no flag --%s", name);
    return NULL;
}

// llm.c's flags without a counterpart in the table (the list above, but -r and -e): consumes argv[*i] and its value
// and returns 1, or returns 0 if argv[*i] is none of them.
static int llmc_other_flag(Config* c, int argc, char** argv, int* i) {
    static const char* const names[] = {"-h", "-ge", "-lg", "-pi", "-pn", "-pr", "-pg", "-pf", "-ps"};
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
    else if (strcmp(a, "-ge") == 0) {
        flag_note("note: -ge %ld (llm.c's GELU fusion) changes nothing here: the GPU build always fuses GELU into the matmuls (cuBLASLt's GELU_AUX and DGELU epilogues) where the recomputation allows\n", n);
    } else if (strcmp(a, "-lg") == 0) {
        flag_note("note: -lg %ld (llm.c's GPU-utilisation log) is not implemented here: nvidia-smi reports the same\n", n);
    }
    return 1;
}

// Parses argv into c. Every value is checked: numbers with strtol/strtod and a range, strings with a bound.
// The modes that run the model and exit (--export-*, --generate, --eval-hellaswag) take only the flags in allowed[0..n):
// any other flag given (seen, by FLAGS index) is an error, "MODE: --FLAG does nothing with it" and the hint.
static void flags__only(const int* seen, const char* const* allowed, size_t n, const char* mode, const char* hint) {
    for (int k = 0; k < NUM_FLAGS; k++) {
        int ok = 0;
        for (size_t j = 0; j < n; j++) { ok |= strcmp(FLAGS[k].name, allowed[j]) == 0; }
        if (seen[k] && !ok) { fatal("%s: --%s does nothing with it%s", mode, FLAGS[k].name, hint); }
    }
}

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
        int gpt3;
        if (strcmp(a, "-e") == 0 && i + 1 < argc && llmc_descriptor_digits(argv[i + 1], &gpt3) && !file_exists(argv[i + 1])) {
            f = flag_named("model"); // (config_from_name knows which sizes exist)
        }
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
            if (flag_is_long(f)) { *(long*)p = (long)x; }
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
    if (!c->master_weights && dtype_parse(c->dtype) == DTYPE_FP32 && !c->plan) {
        flag_note("note: --master-weights 0 changes nothing with --dtype fp32: the parameters are the fp32 weights AdamW updates\n");
    }
    // beta = 1 would freeze the moment at 0 and make the bias correction 1 - beta^t divide by zero
    if (c->adam_beta1 >= 1.0f) { fatal("--adam-beta1 %g: it must be below 1 (the bias correction divides by 1 - beta1^t)", c->adam_beta1); }
    if (c->adam_beta2 >= 1.0f) { fatal("--adam-beta2 %g: it must be below 1 (the bias correction divides by 1 - beta2^t)", c->adam_beta2); }
    if (strcmp(c->comm, "auto") != 0 && strcmp(c->comm, "mpi") != 0 && strcmp(c->comm, "staged") != 0 && strcmp(c->comm, "nccl") != 0) {
        fatal("--comm: '%s' is not one of auto, mpi, staged, nccl", c->comm);
    }
    if (strcmp(c->attention, "auto") != 0 && strcmp(c->attention, "native") != 0 && strcmp(c->attention, "cudnn") != 0) {
        fatal("--attention: '%s' is not one of auto, native, cudnn", c->attention);
    }
#if !defined(KERNELS_CUDA) || !defined(ENABLE_FP32)
    // only an fp32 GPU build has matmuls TF32 can speed up; llm.c passes -f 1 to every build, so this is a note (the
    // planner, which models fp32 layouts for some GPU, takes it as they would run)
    if (c->tf32 && !c->plan) {
        flag_note("note: --tf32 1 changes nothing in this build: only an fp32 GPU build (train_gpt_cu with PRECISION=FP32) has fp32 matmuls to run on TF32 tensor cores\n");
    }
#endif
#ifndef KERNELS_CUDA
    if ((c->matmul_tune > 1 || c->matmul_algos[0]) && !c->plan) {
        flag_note("note: --matmul-tune and --matmul-algos change nothing in this build: they choose cuBLASLt's algorithms (GPU builds); the CPU's matmuls are OpenBLAS's\n");
    }
    if (strcmp(c->attention, "cudnn") == 0) { fatal("--attention cudnn: GPU builds only (train_gpt_cu with cuDNN); the CPU has native attention"); }
    if (!c->cuda_graphs) { flag_note("note: --cuda-graphs 0 changes nothing in this build: the CPU launches no kernels, so it has no graphs to replay\n"); }
#endif
#if !KERNELS_CUDNN_ATTENTION
    if (!c->deterministic && !c->plan) {
        flag_note("note: --deterministic 0 changes nothing in this build: its kernels are all deterministic (the one faster nondeterministic "
                  "kernel is cuDNN's attention backward: GPU builds with cuDNN and bf16/fp16 storage)\n");
    }
#else
    if (!c->deterministic && strcmp(c->attention, "native") == 0) {
        flag_note("note: --deterministic 0 changes nothing with --attention native: its kernels are deterministic (cuDNN's backward is the one that is not)\n");
    }
#endif
#define SEEN(name) seen[flag_named(name) - FLAGS] // whether the command line gave --name (or its alias)
    const char* scaler_flags[] = {"loss-scale", "loss-scale-growth", "loss-scale-backoff", "loss-scale-window"};
    for (int j = 0; j < 4; j++) {
        if (SEEN(scaler_flags[j]) && dtype_parse(c->dtype) != DTYPE_FP16) {
            fatal("--%s sets the fp16 loss scaler: it needs --dtype fp16 (bf16 and fp32 need no loss scaling)", scaler_flags[j]);
        }
    }
    // --export-hf and --export-llmc convert a model and exit: they take --init (--export-llmc also --dtype, the file's
    // type) and nothing that belongs to a training run
    if (c->export_hf[0] || c->export_llmc[0]) {
        const char* ex = c->export_hf[0] ? "export-hf" : "export-llmc";
        const char* target = c->export_hf[0] ? c->export_hf : c->export_llmc;
        if (!c->init[0]) { fatal("--%s %s needs --init FILE (the model to convert)", ex, target); }
        static const char* const allowed[] = {"init", "export-hf", "export-llmc", "threads", "dtype"}; // (dtype: --export-llmc's type)
        char mode[64], hint[128];
        snprintf(mode, sizeof(mode), "--%s converts the --init model and exits", ex);
        snprintf(hint, sizeof(hint), " (use: train_gpt --init FILE --%s %s)", ex, c->export_hf[0] ? "DIR" : "FILE [--dtype fp32|bf16]");
        flags__only(seen, allowed, c->export_llmc[0] ? 5 : 4, mode, hint);
        // llm.c's model files are fp32 (version 3) or bf16 (version 5); its build_from_checkpoint has no fp16
        if (c->export_llmc[0] && SEEN("dtype") && dtype_parse(c->dtype) == DTYPE_FP16) {
            fatal("--export-llmc %s --dtype fp16: llm.c's model files are fp32 (version 3) or bf16 (version 5); it reads no fp16 file", c->export_llmc);
        }
        // without --dtype the file is fp32, lossless, whatever this build trains in
        if (c->export_llmc[0] && !SEEN("dtype")) { strcpy(c->dtype, "fp32"); }
    }
    // llm.c's -h 1: HellaSwag from its path at every validation step
    if (c->llmc_hellaswag) {
        if (c->hellaswag[0]) { fatal("-h 1 and --hellaswag %s: give one (-h 1 is llm.c's: '%s' at every validation step)", c->hellaswag, LLMC_HELLASWAG_PATH); }
        if (c->val_every == 0) { fatal("-h 1 evaluates HellaSwag at every validation step, as llm.c does: it needs -v N (--val-every)"); }
        snprintf(c->hellaswag, sizeof(c->hellaswag), "%s", LLMC_HELLASWAG_PATH);
        c->hellaswag_every = c->val_every;
        SEEN("hellaswag")++;
        SEEN("hellaswag-every")++;
    }
    c->model_given = SEEN("model") > 0;
    // the batch ramp and the decay horizon (the checks that need B, T and the data-parallel size are in main)
    if ((c->batch_ramp_start > 0) != (c->batch_ramp_tokens > 0)) {
        fatal("--batch-ramp-start %ld and --batch-ramp-tokens %ld: a batch ramp needs both (the first batch, and the tokens over which it grows)",
              c->batch_ramp_start, c->batch_ramp_tokens);
    }
    if (c->batch_ramp_start > 0) {
        if (c->bench) { fatal("--batch-ramp-start %ld: --bench times steps of the whole batch; leave the ramp out", c->batch_ramp_start); }
        if (c->llmc_checkpoints) {
            fatal("--batch-ramp-start %ld with --llmc-checkpoints 1: llm.c trains every step on the same batch, so its state files could not continue this run",
                  c->batch_ramp_start);
        }
    }
    if (c->lr_decay_steps > 0 && strcmp(c->lr_schedule, "constant") == 0) {
        fatal("--lr-decay-steps %d: the constant schedule does not decay", c->lr_decay_steps);
    }
    if (c->lr_decay_steps > 0 && c->lr_decay_steps <= c->warmup) {
        fatal("--lr-decay-steps %d ends the decay before --warmup %d steps have passed", c->lr_decay_steps, c->warmup);
    }
    if (strcmp(c->resume_settings, "note") != 0 && strcmp(c->resume_settings, "refuse") != 0 && strcmp(c->resume_settings, "checkpoint") != 0) {
        fatal("--resume-settings: '%s' is not one of note, refuse, checkpoint", c->resume_settings);
    }
    if (c->auto_resume && !c->out[0]) { fatal("--auto-resume 1 (-y 1) resumes from --out DIR: give --out (-o)"); }
    if (c->auto_resume && c->resume[0]) { fatal("--auto-resume 1 (-y 1) and --resume %s: give one", c->resume); }
    if (c->major_checkpoint_every > 0 && c->checkpoint_every == 0) {
        fatal("--major-checkpoint-every %d (-nm) keeps some checkpoints for good: it needs --checkpoint-every N (-n)", c->major_checkpoint_every);
    }
    if (c->llmc_checkpoints) {
        // llm.c resumes what it has: one data-parallel group, its own data orders, fp32 or bf16
        if (c->checkpoint_every == 0) { fatal("--llmc-checkpoints 1 adds llm.c's state files to each checkpoint: it needs --checkpoint-every N (-n)"); }
        if (c->shuffle == 1) { fatal("--llmc-checkpoints 1: llm.c has no equivalent of the sampler (--shuffle 1): use --shuffle 2 (llm.c's shuffled order) or 0 (its unshuffled one)"); }
        if (c->tp > 1 || c->pp > 1) { fatal("--llmc-checkpoints 1: llm.c has no tensor or pipeline parallelism (--tp %d, --pp %d)", c->tp, c->pp); }
        if (strcmp(c->dtype, "fp16") == 0) { fatal("--llmc-checkpoints 1: llm.c does not resume fp16 runs (its build_from_checkpoint refuses fp16): use --dtype bf16 or fp32"); }
        if (!c->master_weights && strcmp(c->dtype, "fp32") != 0) {
            fatal("--llmc-checkpoints 1: llm.c's state files are written with fp32 master weights, which --master-weights 0 does not keep");
        }
        llmc_check_adam(c, "");
    }
    // flags that do nothing without another: refuse rather than ignore them
    if (c->checkpoint_every > 0 && !c->out[0]) { fatal("--checkpoint-every %d needs --out DIR (where to write the checkpoints)", c->checkpoint_every); }
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
    if (SEEN("outlier-window") && c->skip_loss_z == 0.0f && c->skip_grad_z == 0.0f) {
        fatal("--outlier-window %d sets the outlier guard's window: it needs --skip-loss-z or --skip-grad-z", c->outlier_window);
    }
    // sampling: --prompt, --temperature, --top-k, --top-p, --min-p and --repetition-penalty shape the samples of --generate and --sample-every
    if (!c->generate && c->sample_every == 0) {
        const char* sflags[9] = {"prompt", "temperature", "top-k", "top-p", "min-p", "repetition-penalty", "kv-cache", "stop-at-eot", "cuda-graphs"};
        for (int j = 0; j < 9; j++) {
            if (SEEN(sflags[j])) { fatal("--%s shapes samples: it needs --generate N or --sample-every N", sflags[j]); }
        }
    }
    if (SEEN("logprobs") && !c->generate) { fatal("--logprobs prints the log-probability of --generate's samples: it needs --generate N"); }
    if (SEEN("prompt") && !c->prompt[0]) { fatal("--prompt: empty (leave it out to sample after <|endoftext|>)"); }
    // --generate prints samples of a model and exits: it takes the model and the sampling settings
    if (c->generate) {
        if (c->eval_hellaswag[0]) { fatal("--generate and --eval-hellaswag: give one"); }
        static const char* const allowed[] = {"init", "model", "seed", "generate", "prompt", "temperature", "top-k", "top-p", "min-p", "repetition-penalty", "kv-cache", "logprobs", "stop-at-eot", "gen-tokens",
                                              "cuda-graphs", "tokenizer", "seq-len", "dtype", "attention", "tf32", "matmul-tune", "matmul-algos", "threads", "recompute",
                                              "tp", "sequence-parallel", "pp", "comm", "comm-timeout", "batch-size"};
        flags__only(seen, allowed, sizeof(allowed) / sizeof(allowed[0]), "--generate prints samples of a model and exits", "");
        // the context: --seq-len when given, else the model's (0 here, resolved with the model); the samples drawn
        // together: --batch-size when given, else up to 8 (0 here, resolved in main)
        if (!SEEN("seq-len")) { c->seq_len = 0; }
        if (!SEEN("batch-size")) { c->batch_size = 0; }
    }
    if (c->hellaswag_details[0] && !c->eval_hellaswag[0]) { fatal("--hellaswag-details %s needs --eval-hellaswag FILE", c->hellaswag_details); }
    // --eval-hellaswag evaluates a model and exits: it takes the model, its layout and the length limit, nothing that
    // belongs to a training run
    if (c->eval_hellaswag[0]) {
        static const char* const allowed[] = {"init", "model", "seed", "eval-hellaswag", "hellaswag-details", "seq-len", "dtype", "attention", "tf32",
                                              "matmul-tune", "matmul-algos", "comm", "comm-timeout", "threads", "zero", "tp", "sequence-parallel", "pp", "recompute"};
        flags__only(seen, allowed, sizeof(allowed) / sizeof(allowed[0]), "--eval-hellaswag evaluates a model and exits", "");
        // the rows' length limit: --seq-len when given, else the model's context (0 here, resolved with the model)
        if (!SEEN("seq-len")) { c->seq_len = 0; }
    }
    if (strcmp(c->plan_storage, "build") != 0 && strcmp(c->plan_storage, "gpu") != 0) { fatal("--plan-storage: '%s' is not one of build, gpu", c->plan_storage); }
    for (int k = 0; k < NUM_FLAGS && !c->plan; k++) {
        if (seen[k] && strncmp(FLAGS[k].name, "plan-", 5) == 0) { fatal("--%s configures the planner: it needs --plan 1", FLAGS[k].name); }
    }
#undef SEEN
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

#endif // FLAGS_H
