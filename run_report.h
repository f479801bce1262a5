/*
run_report.h: what train_gpt prints about a run (split out of train_gpt.c, which includes it in its main-only part):
the plan at start (the resolved configuration, every rank's memory against the planner's, the layout, PowerSGD's
line), the communication counted per step, the device memory in use against the planner's count, and --bench's
report. Not a standalone header: it uses the trainer's GPT, Config, ZeroOptimizer and ParallelContext.
*/
#ifndef RUN_REPORT_H
#define RUN_REPORT_H

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
    const KvCache* kv = &mp->kv_held; // the samples' KV cache (its two allocations)
    if (kv->base) { mem[3] += (double)gpt_kv_bytes(mp, kv->B, kv->T_max, NULL); }
    return mem[0] + mem[1] + mem[2] + mem[3];
}

// The resolved configuration and every rank's memory (collective: each rank contributes its sizes; rank 0 prints).
// The memory is what this rank allocated; the planner's prediction for the layout (plan_rank_memory) with the
// kernels' workspaces for a step (a GPU's, sized at start-up) must equal it: the start-up memory check's count.
// (rest_rows[0..n_rest): a batch ramp's shorter micro-steps, ramp_rest_rows)
static void print_run_plan(const Config* cp, const GPT* mp, const ZeroOptimizer* zp, ParallelContext* pcp, const PlanLayout* run,
                           const int* chunk_first, int grad_accum, unsigned long long train_tokens, const int* rest_rows, int n_rest) {
    const GPTConfig* g = &mp->cfg;
    int B = cp->batch_size, T = cp->seq_len, master = pcp->world_rank == 0;
    size_t n = mp->glayout.num_params;
    double mem[4], pred[4];
    rank_memory(mp, zp, mem);
    plan_rank_memory(g, run, pcp->pp_rank, chunk_first, sizeof(floatX), pred);
    pred[3] += (double)mp->workspace_bytes;
    if (fault_injected("miscount", pcp->world_rank, 0)) { mem[3] += 64.0; } // (TRAIN_GPT_FAULT: the check below must fire)
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
        if (kernels_threads_note()[0]) { printf("| idle threads         | %s\n", kernels_threads_note()); }
        int tf32 = 0;
#ifdef KERNELS_CUDA
        tf32 = mp->ctx.tf32;
#endif
        printf("| matmuls              | %s kernels (%s)%s%s\n", kernels_blas_name(), kernels_blas_reason(),
               tf32 ? "; fp32 on TF32 tensor cores (--tf32 1)" : "",
               cp->matmul_tune > 1 ? "; algorithms timed per shape (--matmul-tune)" : cp->matmul_algos[0] ? "; algorithms from --matmul-algos" : "");
        int nondet = 0;
#ifdef KERNELS_CUDA
        nondet = mp->ctx.att_nondet && mp->ctx.attention_cudnn;
#endif
        if (nondet) { printf("| attention backward   | cuDNN's nondeterministic graph (--deterministic 0): dQ summed with atomics, runs do not repeat bit for bit\n"); }
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
        if (cp->batch_ramp_start > 0 && !cp->bench) {
            int64_t n_steps;
            ramp_walk(cp, -1, &n_steps);
            int full, rest;
            micro_steps_of(cp->batch_ramp_start, B, T, pcp->dp, &full, &rest);
            char per[96];
            if (rest == 0) { snprintf(per, sizeof(per), "%d micro-step(s) per process", full); }
            else if (full == 0) { snprintf(per, sizeof(per), "one micro-step of %d sequence(s) per process", rest); }
            else { snprintf(per, sizeof(per), "%d micro-step(s) and one of %d sequence(s) per process", full, rest); }
            // the row counts of the shorter micro-steps the steps to come end with (their workspaces sized at start-up)
            char rests[160] = "";
            int shown = 0;
            for (; shown < n_rest && strlen(rests) < sizeof(rests) - 32; shown++) {
                size_t at = strlen(rests);
                snprintf(rests + at, sizeof(rests) - at, "%s%d", shown ? ", " : "; steps end in micro-steps of ", rest_rows[shown]);
            }
            if (n_rest > 0) {
                size_t at = strlen(rests);
                snprintf(rests + at, sizeof(rests) - at, "%s sequence(s)", shown < n_rest ? ", ..." : "");
            }
            printf("| batch ramp           | %ld tokens a step (%s) growing by as many to %ld over the first %ld tokens: "
                   "%lld steps for the run's %d x %ld tokens%s; the learning-rate schedule counts whole batches of tokens\n",
                   cp->batch_ramp_start, per, cp->total_batch_size, cp->batch_ramp_tokens, (long long)n_steps, cp->steps, cp->total_batch_size, rests);
        }
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
        const KvCache* kv = &mp->kv_held;
        if (kv->base) {
            size_t kvb = gpt_kv_bytes(mp, kv->B, kv->T_max, NULL);
            char kb[32];
            fmt_bytes(kb, sizeof(kb), (double)kvb);
            printf("  rank 0's activations include the samples' KV cache (--sample-every): %s (%zu bytes), %d layer(s) x %d sequence(s) x %d positions\n",
                   kb, kvb, mp->layout.num_local_layers, kv->B, kv->T_max);
        }
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

// The device memory as the "done:" line and --generate's last line print it.
static void device_memory_text(char* buf, size_t cap, const DeviceMemory* d, int world) {
    snprintf(buf, cap, "GPU memory in use %.2f GB (rank 0), bytes beyond the planner's over the %d rank(s): least %.0f, most %.0f; "
             "device buffers grown after start-up: %.0f bytes", d->used / 1e9, world, d->least, d->most, d->grown);
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
        printf("bench: %s, B %d, T %d, %d rank(s) x %d thread(s), ZeRO %d, --dtype %s, --recompute %d (activations %s), matmuls %s%s | peak RSS per rank %s\n",
               cp->resume[0] ? cp->resume : cp->init[0] ? cp->init : cp->model, B, T, pcp->world_size, kernels_num_threads(), cp->zero, dtype_name(mp->ctx.dtype), cp->recompute, ab,
               kernels_blas_name(), cp->deterministic ? "" : ", --deterministic 0", rs);
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

#endif // RUN_REPORT_H
