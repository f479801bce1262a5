/*
run_modes.h: the parts of train_gpt's main around the training loop (split out of train_gpt.c, which includes it in its
main-only part, after run_report.h): where the parameters come from (ModelSource: a checkpoint, an --init file of
ours, llm.c's or Hugging Face's, or a fresh model), the modes that exit without training (--export-hf/--export-llmc,
--plan, --eval-hellaswag, --generate), and the checks that the ranks ended a run in agreement. Not a standalone
header: it uses the trainer's Config, GPT, ZeroOptimizer, ParallelContext and Pipeline.
*/
#ifndef RUN_MODES_H
#define RUN_MODES_H

// ----------------------------------------------------------------------------
// Where the parameters come from: the model file of a checkpoint (--resume), an --init file (our or llm.c's model
// file, or a Hugging Face safetensors checkpoint), or nothing (a fresh model of --model's shape, from the seed).
typedef struct {
    char path[2048];  // the file; "" for a fresh model
    FILE* fp;         // a model file of ours or llm.c's, open after its header (model_read_header)
    int version;      // its version (3 fp32, 5 bf16)
    HfCheckpoint hf;  // a Hugging Face checkpoint (from_hf)
    int from_hf;
} ModelSource;

// Opens the source and reads the model's shape into *gc: step resume_step's checkpoint in resume_dir (resume_step >=
// 0), else --init, else --model's name. A --model given beside a file must name the file's shape.
static void model_source_open(ModelSource* src, const Config* c, const char* resume_dir, int resume_step, GPTConfig* gc) {
    memset(src, 0, sizeof(*src));
    if (resume_step >= 0) { snprintf(src->path, sizeof(src->path), "%s/model_%08d.bin", resume_dir, resume_step); }
    else if (c->init[0]) { snprintf(src->path, sizeof(src->path), "%s", c->init); }
    if (src->path[0] && resume_step < 0 && hf_is_checkpoint_path(src->path)) {
        hf_open(&src->hf, src->path, gc); // Hugging Face safetensors + config.json
        src->from_hf = 1;
    } else if (src->path[0]) {
        model_read_header(src->path, gc, &src->version, &src->fp);
    } else if (!config_from_name(gc, c->model)) {
        fatal("--model: unknown model '%s' (gpt2-124M, gpt2-350M, gpt2-774M, gpt2-1558M, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt3-125M, gpt3-350M, gpt3-760M, gpt3-1.3B, gpt3-2.7B, d<N>, gpt2:d<N>, gpt3:c<N>: see --help)", c->model);
    }
    GPTConfig named;
    if (src->path[0] && c->model_given && config_from_name(&named, c->model) &&
        (named.num_layers != gc->num_layers || named.channels != gc->channels || named.num_heads != gc->num_heads)) {
        // (a shape the file agrees with is fine: scripts keep --model beside --resume)
        fatal("--model %s (L %d, C %d, NH %d) and %s %s (L %d, C %d, NH %d) name different models: give one", c->model, named.num_layers,
              named.channels, named.num_heads, resume_step >= 0 ? "--resume" : "--init", resume_step >= 0 ? c->resume : c->init,
              gc->num_layers, gc->channels, gc->num_heads);
    }
}

// Streams the parameters, in the whole model's layout gl, into `into` (a chunk at a time from a model file; a Hugging
// Face checkpoint, whose Conv1D weights are transposed on the way, through one host copy of the model; a fresh model
// initialised from the seed) and closes the source. Returns the model file's checksum of kind sum_kind (0 otherwise).
static uint64_t model_source_load(ModelSource* src, const ParamLayout* gl, ParamStream* into, uint64_t seed, int sum_kind) {
    uint64_t sum = 0;
    if (src->fp) { sum = model_load_stream(src->path, src->fp, src->version, gl, into, sum_kind); }
    else if (!src->from_hf) { init_params_stream(into, gl, seed); }
    else {
        float* host = (float*)mallocCheck(mulSize(gl->num_params, sizeof(float)));
        hf_load_params(&src->hf, gl, host);
        for (int i = 0; i < gl->num_tensors; i++) {
            const ParamEntry* e = &gl->table[i];
            into->put(into->self, e->offset, host + e->offset, e->rows * e->cols);
        }
        free(host);
    }
    src->fp = NULL;
    src->from_hf = 0;
    return sum;
}

// ----------------------------------------------------------------------------
// The modes that exit without training

// --init FILE --export-hf DIR / --export-llmc FILE: load, write, exit (no data, no training; one process).
static void run_export(const Config* c, const GPTConfig* gc, ModelSource* src, int world_size) {
    const char* ex = c->export_hf[0] ? "--export-hf" : "--export-llmc";
    if (world_size > 1) { fatal("%s runs in one process, not under mpirun (%d ranks)", ex, world_size); }
    if (c->export_hf[0] && !hf_supported()) { fatal("--export-hf %s: %s", c->export_hf, HF_NO_CJSON_MESSAGE); }
    ParamLayout el;
    layout_build(&el, gc);
    float* host = (float*)mallocCheck(mulSize(el.num_params, sizeof(float)));
    if (src->from_hf) { hf_load_params(&src->hf, &el, host); }
    else { model_load_params(src->path, src->fp, src->version, &el, host); }
    printf("%s: %s: L %d, C %d, NH %d, maxT %d, V %d (Vp %d), %zu parameters\n", ex + 2, c->init, gc->num_layers,
           gc->channels, gc->num_heads, gc->max_seq_len, gc->vocab_size, gc->padded_vocab_size, el.num_params);
    if (c->export_hf[0]) { hf_export(c->export_hf, &el, host); }
    if (c->export_llmc[0]) {
        int bf16 = dtype_parse(c->dtype) == DTYPE_BF16; // (flags.h: fp32 unless --dtype bf16 was given; fp16 refused)
        ParamStream s = host_stream(host);
        model_save_stream_version(c->export_llmc, &el, &s, bf16 ? 5 : 3);
        printf("export-llmc: wrote %s (llm.c model file version %d, %s)\n", c->export_llmc, bf16 ? 5 : 3,
               bf16 ? "bf16, rounded to nearest even: for llm.c's bf16 build" : "fp32: for llm.c's fp32 and CPU builds");
    }
    free(host);
    layout_free(&el);
}

// --plan: search the layouts of the machine the flags describe and print the best (no data, no model; one process).
static void run_plan(const Config* c, const GPTConfig* gc, int world_size) {
    if (world_size > 1) { fatal("--plan runs in one process, not under mpirun (%d ranks)", world_size); }
    PlanMachine mc = {c->plan_devices_per_node, c->plan_nodes, c->plan_memory_gb * 1e9, c->plan_intra_gbps * 1e9, c->plan_inter_gbps * 1e9,
                      c->plan_tflops * 1e12, c->plan_efficiency, strcmp(c->plan_storage, "gpu") == 0 ? 0 : sizeof(floatX),
                      strcmp(c->plan_storage, "gpu") == 0, 0.0, c->tf32};
#ifdef KERNELS_CUDA
    mc.gpu = 1;
    mc.floatx_bytes = 0; // (this build stores its own dtype natively; a layout of another runs on that dtype's build)
#endif
    // the runtime's share: an assumption until a GPU measures it (a CUDA context with cuBLASLt's and cuDNN's
    // handles, about 0.5-1 GB on a Hopper GPU; NCCL's buffers, some hundreds of MB per communicator), which
    // scripts/gpu_check.sh's benchmark table does: its "GPU memory in use" beside "planner"
    mc.reserve = c->plan_reserve_gb >= 0 ? c->plan_reserve_gb * 1e9 : mc.gpu ? 2e9 : 0.0;
    if (mc.reserve >= mc.memory) { fatal("--plan-reserve-gb %g leaves nothing of --plan-memory-gb %g", mc.reserve / 1e9, mc.memory / 1e9); }
    plan_run(c, gc, &mc);
}

// --eval-hellaswag FILE: the model's accuracy on the file's examples, spread over the data-parallel ranks.
static void run_eval_hellaswag(const Config* c, GPT* m, HellaSwag* hs, ParallelContext* pc) {
    double t0 = now_seconds();
    HsResult hr = evaluate_hellaswag(m, hs, pc);
    if (pc->world_rank == 0) {
        if (c->hellaswag_details[0]) { hellaswag_write_details(c->hellaswag_details, hs, &hr); }
        printf("hellaswag: evaluated in %.1f s on %d data-parallel rank(s)\n", now_seconds() - t0, pc->dp);
        printf("hellaswag: %d examples, acc %.4f, acc_norm %.4f\n", hr.examples, hr.acc, hr.acc_norm);
        fflush(stdout);
    }
    free(hr.sums);
}

// What --generate samples from: the decoder (have_tok), the samples' <|endoftext|>, the prompt's tokens.
typedef struct {
    const Tokenizer* tok;
    int have_tok, eot;
    const int32_t* prompt;
    int n_prompt;
} SampleSource;

// --generate N: N samples from the seed's generator, `together` at a time (gen_batch) within T tokens; every rank of
// the split model runs them, rank 0 prints (under a pipeline the last stage draws and broadcasts each token:
// sample_tokens). One line for the model instead of the training run's plan and memory tables; then the speed, the
// time a decoding step spends where, and the device memory.
static void run_generate(const Config* c, const GPTConfig* gc, GPT* m, const ZeroOptimizer* z, ParallelContext* pc, const SampleSource* ss,
                         const SampleOpts* so, int T, int gen_batch, uint64_t* rng) {
    int master = pc->world_rank == 0;
    double t0 = now_seconds();
    char pr[400] = "";
    if (ss->n_prompt > 0) {
        int w = snprintf(pr, sizeof(pr), ", prompt: %d tokens [", ss->n_prompt);
        for (int i = 0; i < ss->n_prompt && i < 16 && w < (int)sizeof(pr) - 16; i++) { w += snprintf(pr + w, sizeof(pr) - w, i ? " %d" : "%d", ss->prompt[i]); }
        snprintf(pr + w, sizeof(pr) - w, "%s]", ss->n_prompt > 16 ? " ..." : "");
    }
    if (master) { printf("generate: %s: L %d, C %d, NH %d, V %d, context %d, %s, %s\n", c->init[0] ? c->init : c->model, gc->num_layers, gc->channels,
           gc->num_heads, gc->vocab_size, T, dtype_name(m->ctx.dtype), ss->have_tok ? "text" : "token ids (no GPT-2 vocabulary or --tokenizer)"); }
    char filters[128] = ""; // (the filters left at their defaults are not named)
    if (c->top_p < 1.0f) { snprintf(filters, sizeof(filters), ", top-p %g", c->top_p); }
    if (c->min_p > 0.0f) { snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), ", min-p %g", c->min_p); }
    if (c->repetition_penalty != 1.0f) { snprintf(filters + strlen(filters), sizeof(filters) - strlen(filters), ", repetition penalty %g", c->repetition_penalty); }
    if (master) { printf("generate: %d sample%s of %s%d tokens, temperature %g, top-k %d (%s)%s, seed %d%s\n", c->generate, c->generate == 1 ? "" : "s",
           c->stop_at_eot ? "up to " : "", c->gen_tokens, c->temperature, c->top_k, c->top_k ? "of the most likely" : "all", filters, c->seed, pr); }
    long sampled = 0; // (each sample's tokens after the prompt: --gen-tokens, cut to fit; fewer with --stop-at-eot)
    memset(&sample_clock, 0, sizeof(sample_clock));
    int together = generate(m, ss->tok, ss->have_tok, ss->eot, ss->prompt, ss->n_prompt, c->gen_tokens, T, c->generate, gen_batch, rng, master, so,
                            NULL, &sampled);
    double dt = now_seconds() - t0;
    char how[160];
    if (!c->kv_cache) { snprintf(how, sizeof(how), "--kv-cache 0: the whole prefix's forward per token, one sample at a time"); }
    else if (!together) { snprintf(how, sizeof(how), "no KV cache under --sequence-parallel: the whole prefix's forward per token, one sample at a time"); }
    else {
        const KvCache* kv = &m->kv_held;
        char kb[32];
        fmt_bytes(kb, sizeof(kb), (double)gpt_kv_bytes(m, kv->B, kv->T_max, NULL));
        snprintf(how, sizeof(how), "KV cache: one position's forward per token, %d sample%s at a time; the cache %s on rank 0", together,
                 together == 1 ? "" : "s", kb);
    }
    if (master) { printf("generate: %ld tokens in %.2f s, %.1f tokens/s (%s)\n", sampled, dt, sampled / (dt > 0 ? dt : 1e-9), how); }
    const SampleClock* sc = &sample_clock;
    if (master && sc->steps > 0) {
        printf("generate: per step (%ld steps, %ld of them one CUDA graph's launch): %.3f ms queueing the forward and the logits, %.3f ms "
               "waiting for them, %.3f ms choosing the tokens\n", sc->steps, sc->replayed, 1e3 * sc->queue / sc->steps,
               1e3 * sc->wait / sc->steps, 1e3 * sc->pick / sc->steps);
    }
    // (GPU builds: the KV cache and the rows of logits of the samples drawn together were made at start-up, in the
    // planner's count; a sampling step allocates nothing)
    DeviceMemory dm;
    if (device_memory(m, z, pc, &dm) && master) {
        char gm[320];
        device_memory_text(gm, sizeof(gm), &dm, pc->world_size);
        printf("generate: %s\n", gm);
    }
}

// ----------------------------------------------------------------------------
// The end of a training run: every group's verdict that its ranks agree, gathered over the world (a group that
// disagrees anywhere fails the job), and the pipeline's measured bubble.

static void check_ranks_agree(GPT* m, ParallelContext* pc, int zero) {
    int master = pc->world_rank == 0;
    if (pc->dp > 1 && zero < 3) { // (under ZeRO-3 each rank keeps only its shard)
        double bad = !params_agree(m, &pc->dp_group, 0);
        comm_allreduce_max_f64(&pc->world, &bad, 1);
        if (master) { printf("parameters after training: %s on all %d data-parallel ranks\n", bad == 0.0 ? "identical" : "DIFFERENT", pc->dp); }
        if (bad != 0.0) { fatal("data-parallel ranks ended with different parameters"); }
    }
    if (pc->pp > 1) {
        // the tied wte's two copies, on the first and the last stage
        double mine[1] = {0.0};
        if (m->layout.has_wte) {
            size_t n = (size_t)m->vocab_n * m->cfg.channels;
            float* buf = (float*)mallocCheck(n * sizeof(float));
            params_to_f32(&m->ctx, buf, m->p.wte, n);
            mine[0] = (double)checksum_buffer(buf, n * sizeof(float));
            free(buf);
        }
        double first = pc->pp_rank == 0 ? mine[0] : 0.0, last = pc->pp_rank == pc->pp - 1 ? mine[0] : 0.0;
        comm_allreduce_sum_f64(&pc->pp_group, &first, 1);
        comm_allreduce_sum_f64(&pc->pp_group, &last, 1);
        double bad = first != last;
        comm_allreduce_max_f64(&pc->world, &bad, 1);
        if (master) { printf("tied token embedding after training: %s on the first and last pipeline stage\n", bad == 0.0 ? "identical" : "DIFFERENT"); }
        if (bad != 0.0) { fatal("the first and last pipeline stages ended with different copies of the tied token embedding"); }
    }
    if (pc->tp > 1) {
        double bad = !params_agree(m, &pc->tp_group, 1);
        comm_allreduce_max_f64(&pc->world, &bad, 1);
        if (master) { printf("replicated parameters after training: %s on all %d tensor-parallel ranks\n", bad == 0.0 ? "identical" : "DIFFERENT", pc->tp); }
        if (bad != 0.0) { fatal("tensor-parallel ranks ended with different replicated parameters"); }
    }
}

// The measured bubble: the share of the forward/backward phase of a step each rank spent not computing, averaged over
// ranks and steps, next to the schedule's theory; and --trace's file of the first steps.
static void pipeline_report_end(Pipeline* pipe, ParallelContext* pc, const char* trace) {
    int master = pc->world_rank == 0;
    double t[2] = {pipe->busy_seconds, pipe->step_seconds};
    comm_allreduce_sum_f64(&pc->world, t, 2);
    if (master && t[1] > 0) {
        printf("pipeline: bubble measured %.1f%% of the forward/backward phase (mean over ranks), theory %.1f%% (%s, p %d, m %d, v %d)\n",
               100.0 * (1.0 - t[0] / t[1]), 100.0 * pp_bubble_theory(pipe->kind, pipe->pp, pipe->M, pipe->V), pp_schedule_names[pipe->kind],
               pipe->pp, pipe->M, pipe->V);
    }
    if (trace[0]) {
        pp_write_trace(pipe, pc, trace);
        if (master) { printf("pipeline: trace of the first %d steps written to %s (open in ui.perfetto.dev or chrome://tracing)\n", pipe->trace_steps, trace); }
    }
}

#endif // RUN_MODES_H
