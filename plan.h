/*
plan.h: the parallel-layout planner (`train_gpt --plan 1`), and the per-rank memory both it and the trainer's start-up
table print (split out of train_gpt.c by topic; it uses the model, activation and pipeline code above it).

A layout is (dp, tp, pp, ZeRO stage, micro-batch B, recompute, dtype, sequence parallelism, pipeline schedule). Its
memory per rank comes from plan_rank_memory, which the trainer also calls for its own table and checks against what
it allocated: the same functions size both (gpt_param_floats, gpt_grad_floats, activations_bytes_shape, the kernels'
scratch), so a prediction is the table's number, not a second formula.

Step time is a model, from the shapes and a few machine figures:
  compute   FLOPs per token (6 N + 12 L C T: matmuls forward and backward, attention) x tokens per step / devices,
            x 4/3 with --recompute 2 (one more forward), x 1.02 with --recompute 1 (LayerNorm and GELU again: element-
            wise, a few percent of a step), at peak x efficiency (fp32: 0.467 of that on TF32 tensor cores with
            --tf32 1, 0.058 without, as measured on an H200: KERNELS_FP32_*_RATE)
  bubble    pipeline: compute / (1 - bubble), the schedule's theory (pp_bubble_theory)
  tp        per micro-batch and block, 4 all-reduces of (B, T, C) activations (2 forward, 2 backward; 2 more with
            --recompute 2) and one for the embedding; sequence parallelism moves the same bytes as reduce-scatters and
            all-gathers. On the critical path, over the intra-node link (tensor-parallel groups stay in a node).
  pp        per micro-batch and chunk boundary, the activation forward and its gradient back; on the critical path.
  dp        the gradient reductions (fp32) and parameter gathers of the ZeRO stage, by the ring model of
            comm_sent_bytes: 0 one all-reduce; 1 a reduce-scatter and an all-gather; 2 a reduce-scatter per
            micro-batch; 3 that and each block's parameters gathered twice per micro-batch. They overlap the
            backward (ZeRO-3's gathers the forward too), so only what exceeds it counts. Over the inter-node link
            when the data-parallel group spans nodes.
Links are given in GB/s per device and direction; bytes are what each rank sends.
With a batch ramp (--batch-ramp-start) a layout must also run each of the ramp's steps (plan_ramp_fits: the trainer's
own ramp_step_fits); the time is still the whole batch's (the model charges per token).
*/
#ifndef PLAN_H
#define PLAN_H

typedef struct {
    int dp, tp, pp, sp;     // parallel sizes; sequence parallelism (tp > 1)
    int zero;               // ZeRO stage
    int B, T;               // micro-batch, sequence length
    int M;                  // micro-batches per optimizer step per data-parallel rank (gradient accumulation)
    int recompute, dtype;
    int kind, V;            // pipeline schedule and chunks per rank (pp > 1)
    int threads;            // host threads per process (the CPU kernels' scratch)
    // --comm nccl (GPU builds, one GPU per process): the collectives run on device buffers, which adds three of them:
    // the tensor-parallel group's fp32 scratch (tp > 1), the pipeline's device messages (pp_nccl: pp > 1 and no
    // two stages on one GPU), and with --grad-compress bf16 the gradients' bf16 copy
    int nccl, pp_nccl, compress_bf16;
    // the samples' KV cache (GPT.kv_held), allocated at start-up: its sequences (--sample-every: 1 on the ranks that
    // sample; --generate: the samples drawn together), 0: none (no sampling, --kv-cache 0, sequence parallelism)
    int kv_B;
    int no_master;          // --master-weights 0: no fp32 master weights beside a 16-bit compute copy
} PlanLayout;

// Where the blocks are cut into pp V chunks: balanced by cost (a block's FLOPs per token; the LM head's on the last
// chunk). first: pp V + 1 entries. The trainer cuts its pipeline with this too.
static void plan_partition(const GPTConfig* g, const PlanLayout* p, int* first) {
    double C = g->channels;
    pp_partition(g->num_layers, p->pp * p->V, p->kind == PP_INTERLEAVED, 6.0 * 12.0 * C * C + 12.0 * C * p->T,
                 6.0 * C * g->padded_vocab_size, first);
}

// The activation slots of pipeline rank r: its largest chunk, the LM head's families on the last stage, and as many
// copies of the kept families as its schedule keeps micro-batches alive (pipeline_init counts the same way); and the
// messages it sends in a step (sends: pp_sends, 0 without a pipeline).
static ActShape plan_act_shape(const GPTConfig* g, const PlanLayout* p, int r, const int* first, const ParamLayout* pl, int* sends) {
    ActShape sh = {p->tp, p->tp > 1 && p->sp, g->num_layers, 1, 1};
    *sends = 0;
    if (p->pp == 1) { return sh; }
    sh.layers = 0;
    for (int v = 0; v < p->V; v++) {
        int k = v * p->pp + r, nb = first[k + 1] - first[k];
        if (nb > sh.layers) { sh.layers = nb; }
    }
    sh.head = pl->has_lnf;
    PpOp* ops = (PpOp*)mallocCheck(sizeof(PpOp) * 2 * (size_t)p->M * p->V);
    int n = pp_schedule_build(p->kind, p->pp, r, p->M, p->V, ops);
    sh.nslots = pp_max_alive(ops, n);
    if (sh.nslots < 1) { sh.nslots = 1; }
    *sends = pp_sends(ops, n, r, p->pp, p->V);
    free(ops);
    return sh;
}

// What pipeline rank r of layout p allocates, in bytes, as the trainer's memory table shows it: [0] the compute copy
// of the parameters (with ZeRO-3's arena), [1] gradients (with the stage-2/3 shard), [2] optimizer state (moments
// and master weights), [3] activations with the kernels' and the collectives' scratch. floatx_bytes: the storage of
// a floatX element (sizeof(floatX) for this build; 2 for what a GPU build allocates in bf16/fp16). Returns the total.
static double plan_rank_memory(const GPTConfig* g, const PlanLayout* p, int r, const int* first, size_t floatx_bytes, double mem[4]) {
    ParamLayout pl;
    layout_build_3d(&pl, g, p->tp, 0, p->pp, r, p->pp > 1 ? p->V : 1, p->pp > 1 ? first : NULL);
    size_t n_pad = zero_padded_size(pl.num_params, p->dp), S = n_pad / p->dp;
    size_t owned = p->zero == 0 ? n_pad : S;
    int master = p->dtype != DTYPE_FP32 && !p->no_master;
    mem[0] = (double)gpt_param_floats(&pl, p->zero, p->dp) * floatx_bytes;
    mem[1] = (double)gpt_grad_floats(&pl, p->zero, p->dp) * sizeof(float) + (p->zero >= 2 ? (double)S * sizeof(float) : 0.0);
    if (p->nccl && p->compress_bf16) { mem[1] += (double)n_pad * 2.0; } // the bf16 copy the reductions send (zero_set_compress)
    mem[2] = (double)(2 + master) * owned * sizeof(float) + sizeof(double); // (+ the norm's device scalar: zero_state_bytes)
    int sends;
    ActShape sh = plan_act_shape(g, p, r, first, &pl, &sends);
    int act_dtype = floatx_bytes == sizeof(floatX) ? -1 : p->dtype;
    mem[3] = (double)activations_bytes_shape(g, &sh, p->B, p->T, p->recompute, act_dtype, NULL) +
             (double)kernels_scratch_bytes(p->T, g->channels, p->threads);
    double btc = (double)p->B * p->T * g->channels;
    if (p->nccl && p->tp > 1) { mem[3] += btc * sizeof(float); } // tp.h's collectives' fp32 scratch (comm_nccl_reserve)
    // the pipeline's device messages of B T C floatX: one receive buffer, and a send buffer for each message of a
    // step (pipeline_use_nccl)
    if (p->pp_nccl && p->pp > 1) { mem[3] += (double)(sends + 1) * btc * (double)floatx_bytes; }
    // the samples' KV cache: the layers this stage holds, each sequence's logits row on the last
    if (p->kv_B > 0) {
        mem[3] += (double)kv_cache_bytes(pl.num_local_layers, p->kv_B, p->T, 2 * g->channels / p->tp, pl.has_lnf, g->padded_vocab_size / p->tp,
                                         floatx_bytes, NULL);
    }
    layout_free(&pl);
    return mem[0] + mem[1] + mem[2] + mem[3];
}

// The largest rank's memory over the pipeline stages (mem: that rank's families); *worst: which stage.
static double plan_max_memory(const GPTConfig* g, const PlanLayout* p, const int* first, size_t floatx_bytes, double mem[4], int* worst) {
    double best = -1.0;
    for (int r = 0; r < p->pp; r++) {
        double m[4], t = plan_rank_memory(g, p, r, first, floatx_bytes, m);
        if (t > best) { best = t; memcpy(mem, m, sizeof(m)); *worst = r; }
    }
    return best;
}

static double plan_flops_per_token(const GPTConfig* g, int T) {
    return 6.0 * (double)gpt_num_params(g) + 12.0 * g->num_layers * (double)g->channels * T;
}

typedef struct {
    int per_node, nodes;      // devices per node, nodes
    double memory;            // bytes per device
    double intra, inter;      // link bandwidth per device, bytes/s, within a node and between nodes
    double peak;              // dense bf16/fp16 peak per device, FLOP/s (what MFU is measured against)
    double efficiency;        // the share of the peak a training step's matmuls reach
    size_t floatx_bytes;      // storage of a floatX element (see plan_rank_memory); 0: each layout's dtype's (plan_elem_bytes)
    int gpu;                  // the devices are GPUs (a GPU build, or --plan-storage gpu): see plan_comm_nccl
    double reserve;           // bytes per device a layout leaves to what the planner does not model (the runtime's)
    int tf32;                 // --tf32: fp32 layouts' matmuls on TF32 tensor cores
} PlanMachine;

// The bytes of a floatX element of layout p on the machine: this CPU build's floatX (fp32 whatever the dtype: it
// emulates the 16-bit types by rounding), or on GPUs the layout's dtype, which a GPU build of that dtype stores
// natively (2 bytes bf16 and fp16, 4 fp32: a CUDA build runs the one dtype it was built for).
static size_t plan_elem_bytes(const PlanMachine* mc, const PlanLayout* p) { return mc->floatx_bytes ? mc->floatx_bytes : dtype_bytes(p->dtype); }

// Whether a run on the machine takes the --comm nccl path, whose device buffers plan_rank_memory counts: on GPUs,
// one per process, as --comm auto decides for several processes; --comm nccl asks for it on one too, and --comm mpi
// or staged never takes it.
static int plan_comm_nccl(const Config* c, const PlanMachine* mc) {
    if (!mc->gpu) { return 0; }
    return strcmp(c->comm, "nccl") == 0 || (strcmp(c->comm, "auto") == 0 && mc->per_node * mc->nodes > 1);
}

typedef struct {
    PlanLayout p;
    double mem[4], mem_total;  // the largest rank's
    int worst_stage;
    double t_compute, bubble, t_tp, t_pp, t_dp, t_dp_exposed, step;
    double tokens_per_s, mfu;
} PlanResult;

// Whether layout p can run at all (memory aside); err: why not.
static int plan_valid(const GPTConfig* g, const PlanLayout* p, const PlanMachine* mc, long total_batch, char* err, size_t cap) {
    if (p->tp > 1 && mc->per_node % p->tp != 0) {
        snprintf(err, cap, "tp %d does not divide the %d devices of a node (tensor-parallel groups stay in a node)", p->tp, mc->per_node);
        return 0;
    }
    if (!layout_tp_valid(g, p->tp, err, cap)) { return 0; }
    if (p->tp > TP_MAX) { snprintf(err, cap, "tp %d above %d", p->tp, TP_MAX); return 0; }
    if (p->sp && (p->tp == 1 || p->T % p->tp != 0)) {
        snprintf(err, cap, p->tp == 1 ? "sequence parallelism needs tp > 1" : "sequence parallelism: T %d does not divide by tp %d", p->T, p->tp);
        return 0;
    }
    if (p->T > g->max_seq_len) { snprintf(err, cap, "T %d above the model's context %d", p->T, g->max_seq_len); return 0; }
    long per_micro = (long)p->B * p->T * p->dp;
    if (total_batch % per_micro != 0) {
        snprintf(err, cap, "the batch of %ld tokens is not a multiple of B x T x dp = %d x %d x %d", total_batch, p->B, p->T, p->dp);
        return 0;
    }
    if (p->zero == 3 && p->pp > 1) { snprintf(err, cap, "ZeRO-3 with a pipeline (refused by the trainer)"); return 0; }
    if (p->pp > 1 && !pp_schedule_valid(p->kind, p->pp, p->M, p->V, g->num_layers, err, cap)) { return 0; }
    return 1;
}

// Whether a step of b tokens (a batch ramp's: --batch-ramp-start) runs on data-parallel size dp with micro-batches of
// B x T: every rank trains on whole sequences (b a multiple of T x dp); through a pipeline (pp stages of schedule
// `kind`, V chunks each, over L blocks: its slots and messages are B rows) and in llm.c's order (--shuffle 2, defined
// by B) on whole micro-batches (b a multiple of B x T x dp), as many as the schedule takes. err: why not, after `who`
// (the step, in the caller's words). The trainer's check (ramp_check) and the planner's (plan_ramp_fits) both ask this.
static int ramp_step_fits(const Config* c, const char* who, int64_t b, int B, int T, int dp, int pp, int kind, int V, int L, char* err,
                          size_t cap) {
    int64_t micro = (int64_t)B * T * dp;
    if ((pp > 1 || c->shuffle == 2) && b % micro != 0) {
        snprintf(err, cap, "%s is not a multiple of batch-size x seq-len x data-parallel ranks = %d x %d x %d = %lld: %s", who, B, T, dp,
                 (long long)micro, pp > 1 ? "a pipeline's micro-batches are all --batch-size sequences"
                                          : "llm.c's shuffled order (--shuffle 2) reads whole micro-batches of --batch-size");
        return 0;
    }
    if (b % ((int64_t)T * dp) != 0) {
        snprintf(err, cap, "%s is not a multiple of seq-len x data-parallel ranks = %d x %d = %lld: every rank trains on whole sequences", who, T,
                 dp, (long long)T * dp);
        return 0;
    }
    char why[300];
    if (pp > 1 && !pp_schedule_valid(kind, pp, (int)(b / micro), V, L, why, sizeof(why))) {
        snprintf(err, cap, "%s is %d micro-batch(es), which --pp %d --pp-schedule %s does not take: %s", who, (int)(b / micro), pp,
                 pp_schedule_names[kind], why);
        return 0;
    }
    return 1;
}

// The step-time model of the header comment, for a valid layout.
static void plan_estimate(const GPTConfig* g, const PlanMachine* mc, long total_batch, PlanResult* res) {
    const PlanLayout* p = &res->p;
    int N = p->dp * p->tp * p->pp;
    double fpt = plan_flops_per_token(g, p->T);
    // fp32 matmuls: on TF32 tensor cores (--tf32 1) at 0.467 of the 16-bit rate; exact fp32 on the CUDA cores at
    // 0.058 of it (an H200's cuBLASLt; its datasheet's 67 of 989 TFLOP/s would say 0.068)
    double rate = mc->peak * mc->efficiency * (p->dtype == DTYPE_FP32 ? (mc->tf32 ? KERNELS_FP32_TF32_RATE : KERNELS_FP32_EXACT_RATE) : 1.0);
    double redo = p->recompute == 2 ? 4.0 / 3.0 : p->recompute == 1 ? 1.02 : 1.0;
    res->t_compute = fpt * (double)total_batch / N * redo / rate;
    res->bubble = p->pp > 1 ? pp_bubble_theory(p->kind, p->pp, p->M, p->V) : 0.0;
    double e = (double)plan_elem_bytes(mc, p), C = g->channels;
    double act = (double)p->B * p->T * C * e;          // one micro-batch's (B, T, C) activations
    int blocks = (g->num_layers + p->pp - 1) / p->pp;   // per stage (the largest)
    double tp_bytes = p->M * (blocks * (4.0 + (p->recompute == 2 ? 2.0 : 0.0)) + 1.0) * comm_sent_bytes(COMM_OP_ALLREDUCE, act, p->tp);
    res->t_tp = tp_bytes / mc->intra;
    int pp_crosses = p->tp * p->pp > mc->per_node;
    double pp_bytes = p->pp > 1 ? 2.0 * p->M * p->V * act / (p->sp ? p->tp : 1) : 0.0;
    res->t_pp = pp_bytes / (pp_crosses ? mc->inter : mc->intra);
    // the data-parallel traffic of the largest stage's parameters
    ParamLayout pl;
    int* first = NULL;
    if (p->pp > 1) {
        first = (int*)mallocCheck(sizeof(int) * (size_t)(p->pp * p->V + 1));
        plan_partition(g, p, first);
    }
    layout_build_3d(&pl, g, p->tp, 0, p->pp, 0, p->pp > 1 ? p->V : 1, first);
    double n = (double)pl.num_params, layers = (double)pl.layer_size * pl.num_local_layers;
    double grads = n * sizeof(float), params = n * e, dp_bytes = 0.0;
    if (p->zero == 0) { dp_bytes = comm_sent_bytes(COMM_OP_ALLREDUCE, grads, p->dp); }
    else if (p->zero == 1) { dp_bytes = comm_sent_bytes(COMM_OP_REDUCE_SCATTER, grads, p->dp) + comm_sent_bytes(COMM_OP_ALLGATHER, params, p->dp); }
    else if (p->zero == 2) { dp_bytes = p->M * comm_sent_bytes(COMM_OP_REDUCE_SCATTER, grads, p->dp) + comm_sent_bytes(COMM_OP_ALLGATHER, params, p->dp); }
    else {
        dp_bytes = p->M * comm_sent_bytes(COMM_OP_REDUCE_SCATTER, grads, p->dp) + 2.0 * p->M * comm_sent_bytes(COMM_OP_ALLGATHER, layers * e, p->dp) +
                   comm_sent_bytes(COMM_OP_ALLGATHER, (n - layers) * e, p->dp);
    }
    layout_free(&pl);
    free(first);
    int dp_crosses = mc->nodes > 1 && p->dp > mc->per_node / (p->tp * p->pp);
    res->t_dp = dp_bytes / (dp_crosses ? mc->inter : mc->intra);
    double window = res->t_compute * (p->zero == 3 ? 1.0 : 2.0 / 3.0); // what the reductions (and gathers) hide behind
    res->t_dp_exposed = res->t_dp > window ? res->t_dp - window : 0.0;
    res->step = res->t_compute / (1.0 - res->bubble) + res->t_tp + res->t_pp + res->t_dp_exposed;
    res->tokens_per_s = total_batch / res->step;
    res->mfu = fpt * total_batch / (res->step * N * mc->peak);
}

// A batch ramp (--batch-ramp-start) on layout p: every batch it takes must run there (ramp_step_fits), those of a run
// long enough to pass the ramp, whatever --steps. (A run's last step, what is left of its budget, is a multiple of the
// first batch between it and the whole one, and so fits where they do.) err: why not, naming the first step that does
// not fit.
typedef struct {
    const Config* c;
    const GPTConfig* g;
    const PlanLayout* p;
    int ok;
    char* err;
    size_t cap;
} PlanRampFit;

static void plan__ramp_visit(void* ctx, int64_t step, int64_t b) {
    PlanRampFit* f = (PlanRampFit*)ctx;
    (void)step;
    if (!f->ok) { return; }
    char who[96];
    snprintf(who, sizeof(who), "the batch ramp's step of %lld tokens", (long long)b);
    f->ok = ramp_step_fits(f->c, who, b, f->p->B, f->p->T, f->p->dp, f->p->pp, f->p->kind, f->p->V, f->g->num_layers, f->err, f->cap);
}

// A copy of c whose run passes the ramp: the batch is whole after the first R tokens, so R / F + 2 steps do.
static Config plan__ramp_run(const Config* c) {
    Config long_run = *c;
    int64_t need = c->batch_ramp_tokens / c->total_batch_size + 2;
    if (long_run.steps < need) { long_run.steps = (int)need; }
    return long_run;
}

static int plan_ramp_fits(const Config* c, const GPTConfig* g, const PlanLayout* p, char* err, size_t cap) {
    PlanRampFit f = {c, g, p, 1, err, cap};
    Config long_run = plan__ramp_run(c);
    ramp_walk_visit(&long_run, -1, NULL, 0, plan__ramp_visit, &f);
    return f.ok;
}

// The steps of the ramp: until R tokens have been trained on (the same on every layout).
static int64_t plan_ramp_steps(const Config* c) {
    Config long_run = plan__ramp_run(c);
    int64_t consumed = 0, n = 0;
    while (consumed < c->batch_ramp_tokens) { consumed += ramp_batch(&long_run, consumed); n++; }
    return n;
}

// The command line that runs layout p (the data flags left to the user).
static void plan_command(const Config* c, const PlanLayout* p, char* buf, size_t cap) {
    int n = snprintf(buf, cap, "mpirun -np %d ./train_gpt --model %s --batch-size %d --seq-len %d --total-batch-size %ld --zero %d --recompute %d --dtype %s",
                     p->dp * p->tp * p->pp, c->init[0] ? "(--init)" : c->model, p->B, p->T, c->total_batch_size, p->zero, p->recompute, dtype_name(p->dtype));
    if (p->dtype == DTYPE_FP32 && c->tf32 && n > 0 && (size_t)n < cap) { n += snprintf(buf + n, cap - n, " --tf32 1"); }
    if (p->dtype != DTYPE_FP32 && p->no_master && n > 0 && (size_t)n < cap) { n += snprintf(buf + n, cap - n, " --master-weights 0"); }
    if (p->tp > 1 && n > 0 && (size_t)n < cap) { n += snprintf(buf + n, cap - n, " --tp %d%s", p->tp, p->sp ? " --sequence-parallel 1" : ""); }
    if (p->pp > 1 && n > 0 && (size_t)n < cap) {
        n += snprintf(buf + n, cap - n, " --pp %d --pp-schedule %s", p->pp, pp_schedule_names[p->kind]);
        if (p->kind == PP_INTERLEAVED && n > 0 && (size_t)n < cap) { n += snprintf(buf + n, cap - n, " --virtual-stages %d", p->V); }
    }
    if (c->batch_ramp_start > 0 && n > 0 && (size_t)n < cap) {
        snprintf(buf + n, cap - n, " --batch-ramp-start %ld --batch-ramp-tokens %ld", c->batch_ramp_start, c->batch_ramp_tokens);
    }
}

// Faster first; among equal estimates (communication hidden either way), less traffic, then larger micro-batches
// (the model does not see that small matmuls run below the device's rate), then less memory.
static int plan__by_step(const void* a, const void* b) {
    const PlanResult *x = (const PlanResult*)a, *y = (const PlanResult*)b;
    if (x->step != y->step) { return x->step < y->step ? -1 : 1; }
    double cx = x->t_dp + x->t_tp + x->t_pp, cy = y->t_dp + y->t_tp + y->t_pp;
    if (cx != cy) { return cx < cy ? -1 : 1; }
    if (x->p.B != y->p.B) { return x->p.B > y->p.B ? -1 : 1; }
    return x->mem_total < y->mem_total ? -1 : x->mem_total > y->mem_total;
}

#define PLAN_MAX_REASONS 16

// The layouts that fit, as the enumeration collects them.
typedef struct { PlanResult* r; size_t n, cap; double least; } PlanFound;

static int plan_enumerate(const Config* c, const GPTConfig* g, const PlanMachine* mc, int no_master, int only_16bit, PlanFound* f);
static void plan_print_best(const Config* c, PlanFound* f);

static int plan_run(const Config* c, const GPTConfig* g, const PlanMachine* mc) {
    int T = c->seq_len, nccl = plan_comm_nccl(c, mc), bf16 = strcmp(c->grad_compress, "bf16") == 0;
    long total = c->total_batch_size;
    if (total <= 0) { fatal("--plan: give the global batch (--total-batch-size, tokens per optimizer step)"); }
    printf("plan: %s (L %d, C %d, NH %d, %.1f M parameters), T %d, %ld tokens per step, %d node(s) x %d device(s), %.1f GB each "
           "(%.1f GB of it reserved for the runtime), "
           "%.0f TFLOP/s bf16 peak at %.0f%%, links %.0f / %.0f GB/s (intra / inter), %s storage, fp32 matmuls %s, %d thread(s) per process, "
           "collectives %s%s\n",
           c->init[0] ? c->init : c->model, g->num_layers, g->channels, g->num_heads, gpt_num_params(g) / 1e6, T, total, mc->nodes, mc->per_node,
           mc->memory / 1e9, mc->reserve / 1e9, mc->peak / 1e12, 100.0 * mc->efficiency, mc->intra / 1e9, mc->inter / 1e9, mc->floatx_bytes ? "this build's" : "GPU (each layout's dtype)",
           mc->tf32 ? "on TF32 tensor cores (--tf32 1)" : "exact (--tf32 0)",
           c->threads > 0 ? c->threads : kernels_num_threads(), nccl ? "through NCCL on device buffers" : "through MPI",
           nccl && bf16 ? " (with the bf16 gradient copy of --grad-compress bf16)" : "");
    if (c->sample_every > 0 && c->kv_cache) {
        printf("plan: with the KV cache of --sample-every's samples on the ranks that sample (one sequence of T positions of "
               "their layers; none under sequence parallelism, which samples without one)\n");
    }
    PlanFound f = {(PlanResult*)mallocCheck(sizeof(PlanResult) * 1024), 0, 1024, -1.0};
    int n16 = plan_enumerate(c, g, mc, !c->master_weights, 0, &f);
    if (n16 == 0 && c->master_weights) {
        // no bf16 layout fits with its masters: those that fit without them join the list (fp32 ones may fit, but run
        // at a fraction of the rate on GPUs). Only then: dropping the masters changes the numerics, as llm.c's -w 0.
        printf("plan: no bf16 layout fits with fp32 master weights; without them (--master-weights 0, llm.c's -w 0: AdamW rounds "
               "its update into the 16-bit weights stochastically, 4 bytes an owned parameter less):\n");
        plan_enumerate(c, g, mc, 1, 1, &f);
    }
    int n = (int)f.n;
    if (n == 0) {
        if (f.least > 0) {
            printf("plan: no layout fits: the smallest needs %.2f GB (%.0f bytes) per device, %.2f GB are there after the reserve (more devices, "
                   "or a shorter sequence)\n", f.least / 1e9, f.least, (mc->memory - mc->reserve) / 1e9);
        }
        else { printf("plan: no layout can run on this machine (the reasons above)\n"); }
    } else {
        plan_print_best(c, &f);
    }
    free(f.r);
    return n;
}

// One enumeration of the machine's layouts (no_master: the bf16 ones keep no fp32 master weights; only_16bit:
// the bf16 ones only), adding those that fit to f (f->least: the least memory one rejected for memory needs) and
// printing how many were rejected by reason (each one with --plan-verbose 1). Returns how many bf16 layouts fit.
static int plan_enumerate(const Config* c, const GPTConfig* g, const PlanMachine* mc, int no_master, int only_16bit, PlanFound* f) {
    int N = mc->per_node * mc->nodes, T = c->seq_len, nccl = plan_comm_nccl(c, mc), bf16 = strcmp(c->grad_compress, "bf16") == 0;
    long total = c->total_batch_size;
    size_t found0 = f->n;
    char reasons[PLAN_MAX_REASONS][160], examples[PLAN_MAX_REASONS][480];
    int reason_count[PLAN_MAX_REASONS] = {0}, nreasons = 0, rejected = 0, fit16 = 0;
    const int dtypes[2] = {DTYPE_BF16, DTYPE_FP32};
    for (int tp = 1; tp <= N; tp++) {
        if (N % tp) { continue; }
        for (int pp = 1; pp * tp <= N; pp++) {
            if ((N / tp) % pp) { continue; }
            int dp = N / (tp * pp);
            for (int kind_i = 0; kind_i < (pp > 1 ? 2 : 1); kind_i++) {
                int kind = pp == 1 ? PP_1F1B : kind_i == 0 ? PP_1F1B : PP_INTERLEAVED, V = kind == PP_INTERLEAVED ? 2 : 1;
                for (int sp = 0; sp <= (tp > 1); sp++) {
                    for (int zero = 0; zero <= 3; zero++) {
                        for (int B = 1; B <= 64; B *= 2) {
                            for (int rc = 0; rc <= 2; rc++) {
                                for (int d = 0; d < (only_16bit ? 1 : 2); d++) {
                                    PlanLayout p = {dp, tp, pp, sp, zero, B, T, 0, rc, dtypes[d], kind, V, c->threads > 0 ? c->threads : kernels_num_threads(),
                                                    nccl, nccl, bf16, 0, no_master};
                                    // (--sample-every: rank 0's group samples one sequence at a time, through a cache)
                                    p.kv_B = c->sample_every > 0 && c->kv_cache && !sp ? 1 : 0;
                                    long per_micro = (long)B * T * dp;
                                    p.M = per_micro > 0 && total % per_micro == 0 ? (int)(total / per_micro) : 1;
                                    char why[400];
                                    int ok = plan_valid(g, &p, mc, total, why, sizeof(why));
                                    if (ok && c->batch_ramp_start > 0) { ok = plan_ramp_fits(c, g, &p, why, sizeof(why)); }
                                    PlanResult r;
                                    memset(&r, 0, sizeof(r));
                                    r.p = p;
                                    if (ok) {
                                        int* first = NULL;
                                        if (pp > 1) { first = (int*)mallocCheck(sizeof(int) * (size_t)(pp * V + 1)); plan_partition(g, &p, first); }
                                        r.mem_total = plan_max_memory(g, &p, first, plan_elem_bytes(mc, &p), r.mem, &r.worst_stage);
                                        free(first);
                                        if (r.mem_total > mc->memory - mc->reserve) {
                                            ok = 0;
                                            snprintf(why, sizeof(why), "needs %.2f GB per device, above %.2f GB (%.2f GB less %.2f GB reserved)",
                                                     r.mem_total / 1e9, (mc->memory - mc->reserve) / 1e9, mc->memory / 1e9, mc->reserve / 1e9);
                                            if (f->least < 0 || r.mem_total < f->least) { f->least = r.mem_total; }
                                        }
                                    }
                                    if (!ok) {
                                        rejected++;
                                        // the reason's kind: its text with the numbers masked; the first one is the example
                                        int k = 0;
                                        char kindtxt[160];
                                        size_t kn = 0;
                                        for (const char* q = why; *q && kn + 1 < sizeof(kindtxt); q++) {
                                            int digit = (*q >= '0' && *q <= '9') || (*q == '.' && q[1] >= '0' && q[1] <= '9');
                                            if (!digit) { kindtxt[kn++] = *q; }
                                            else if (kn == 0 || kindtxt[kn - 1] != '#') { kindtxt[kn++] = '#'; }
                                        }
                                        kindtxt[kn] = '\0';
                                        while (k < nreasons && strcmp(reasons[k], kindtxt) != 0) { k++; }
                                        if (k == nreasons && nreasons < PLAN_MAX_REASONS) {
                                            snprintf(reasons[nreasons], sizeof(reasons[0]), "%s", kindtxt);
                                            snprintf(examples[nreasons++], sizeof(examples[0]), "%s (dp %d tp %d pp %d zero %d B %d)", why, dp, tp, pp, zero, B);
                                        }
                                        if (k < PLAN_MAX_REASONS) { reason_count[k]++; }
                                        if (c->plan_verbose) {
                                            printf("  rejected: dp %d tp %d pp %d%s sp %d zero %d B %d recompute %d %s: %s\n", dp, tp, pp,
                                                   pp > 1 ? (kind == PP_INTERLEAVED ? " (interleaved)" : " (1f1b)") : "", sp, zero, B, rc,
                                                   dtype_name(dtypes[d]), why);
                                        }
                                        continue;
                                    }
                                    plan_estimate(g, mc, total, &r);
                                    if (f->n == f->cap) {
                                        f->cap *= 2;
                                        f->r = (PlanResult*)realloc(f->r, sizeof(PlanResult) * f->cap);
                                        if (!f->r) { fatal("--plan: out of memory for %zu layouts", f->cap); }
                                    }
                                    f->r[f->n++] = r;
                                    fit16 += dtypes[d] != DTYPE_FP32;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    printf("plan: %zu layouts fit, %d rejected:\n", f->n - found0, rejected);
    for (int k = 0; k < nreasons; k++) { printf("  %6d like: %s\n", reason_count[k], examples[k]); }
    return fit16;
}

// Ranks the layouts found by estimated step time and prints the best --plan-top, each with its memory, time split
// and command (with a batch ramp, its flags too, and how many steps it takes).
static void plan_print_best(const Config* c, PlanFound* f) {
    PlanResult* res = f->r;
    size_t nres = f->n;
    qsort(res, nres, sizeof(PlanResult), plan__by_step);
    int top = c->plan_top < (int)nres ? c->plan_top : (int)nres;
    printf("plan: the best %d by estimated step time\n", top);
    printf("  # |  dp tp pp | zero   B rc dtype sp sched  |  mem/device  (params  grads  optim  acts) | step ms (compute bubble tp pp dp-exposed) | tok/s  MFU\n");
    for (int i = 0; i < top; i++) {
        const PlanResult* r = &res[i];
        const PlanLayout* p = &r->p;
        char cmd[1024], dt[8];
        plan_command(c, p, cmd, sizeof(cmd));
        snprintf(dt, sizeof(dt), "%s%s", dtype_name(p->dtype), p->no_master && p->dtype != DTYPE_FP32 ? "*" : "");
        printf(" %2d | %3d %2d %2d | %4d %3d %2d %-5s %2d %-6s | %9.3f GB (%6.2f %6.2f %6.2f %6.2f) | %8.1f (%.1f %.1f%% %.1f %.1f %.1f) | %.0f %.1f%%\n",
               i + 1, p->dp, p->tp, p->pp, p->zero, p->B, p->recompute, dt, p->sp,
               p->pp > 1 ? pp_schedule_names[p->kind] : "-", r->mem_total / 1e9, r->mem[0] / 1e9, r->mem[1] / 1e9, r->mem[2] / 1e9,
               r->mem[3] / 1e9, r->step * 1e3, r->t_compute * 1e3, 100.0 * r->bubble, r->t_tp * 1e3, r->t_pp * 1e3,
               r->t_dp_exposed * 1e3, r->tokens_per_s, 100.0 * r->mfu);
        printf("      memory per rank %.0f bytes (pipeline stage %d); run: %s\n", r->mem_total, r->worst_stage, cmd);
    }
    for (int i = 0; i < top; i++) {
        if (res[i].p.no_master && res[i].p.dtype != DTYPE_FP32) { printf("  (bf16*: without fp32 master weights, --master-weights 0)\n"); break; }
    }
    if (c->batch_ramp_start > 0) {
        // (a step's time is charged per token: the ramp's smaller steps cost nothing extra in this model, though on a
        // device they run their optimizer step as often for fewer tokens, and their micro-steps may be below its rate)
        printf("plan: the batch ramp's first %ld tokens take %lld steps of %ld to %ld tokens (%.0f whole batches' worth), each layout above "
               "checked for every step of it; the times above are the whole batch's\n", c->batch_ramp_tokens, (long long)plan_ramp_steps(c),
               c->batch_ramp_start, c->total_batch_size - c->batch_ramp_start, (double)c->batch_ramp_tokens / (double)c->total_batch_size);
    }
}

#endif // PLAN_H
