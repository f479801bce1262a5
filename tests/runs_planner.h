/*
tests/runs_planner.h: the planner (--plan 1) against the trainer's own memory table, and the KV cache's memory (--only plan).
Split out of tests/test_runs.c by topic and included by it where this code stood: it uses the suite's helpers above
the include (TMP, report, run_capture, fresh_shard, the log readers of tests/runs_common.h) and the trainer's code
(train_gpt.c); not a standalone header.
*/
#ifndef RUNS_PLANNER_H
#define RUNS_PLANNER_H

// The trainer's start-up table: the largest rank's bytes ("largest rank: N bytes"); -1 if absent.
static double largest_rank_bytes(const char* out) {
    const char* at = strstr(out, "largest rank: ");
    double v = -1.0;
    if (at) { sscanf(at, "largest rank: %lf", &v); }
    return v;
}

// The planner's listing: the memory per rank of the layout whose command ends with `args` (its line "memory per rank
// N bytes (...); run: ... ARGS"); -1 if it is not listed.
static double plan_listed_bytes(const char* listing, const char* args) {
    const char* at = strstr(listing, args);
    double v = -1.0;
    if (!at) { return v; }
    const char* line = at;
    while (line > listing && line[-1] != '\n') { line--; }
    sscanf(line, " memory per rank %lf bytes", &v);
    return v;
}

// The planner (--plan 1): its memory per rank for a layout is the trainer's start-up table (the same code; the
// trainer also checks the two agree at start). Each of a dozen layouts the planner lists for a 4-device machine,
// chosen to cover ZeRO 0-3, tp, sequence parallelism, pp, recompute 0-2 and fp32/bf16, is run for one
// benchmark step, and the largest rank's bytes in its table must be within 2% of the prediction (the bound;
// expected exact). Then the refusals: rejected layouts are counted by reason, a machine too small says what the
// smallest layout needs, and the planner's flags without --plan, under mpirun, or without a batch are errors.
// Whether needle occurs in the line that begins at `line`.
static int in_line(const char* line, const char* needle) {
    const char* eol = strchr(line, '\n');
    const char* at = strstr(line, needle);
    return at && (!eol || at < eol);
}

// Over a planner listing's "memory per rank N bytes ...; run: CMD" lines whose command holds `having`: the least
// N, how many lines (*n), and how many of their commands say --master-weights 0 (*w0). 0 when there are none.
static double plan_least_bytes(const char* listing, const char* having, int* n, int* w0) {
    double least = 0.0;
    *n = *w0 = 0;
    for (const char* at = strstr(listing, "memory per rank "); at; at = strstr(at + 1, "memory per rank ")) {
        if (!in_line(at, having)) { continue; }
        double b = atof(at + strlen("memory per rank "));
        *w0 += in_line(at, " --master-weights 0");
        if (*n == 0 || b < least) { least = b; }
        (*n)++;
    }
    return least;
}

// The most bytes any line of a planner listing needs.
static double plan_most_bytes(const char* listing) {
    double most = 0.0;
    for (const char* at = strstr(listing, "memory per rank "); at; at = strstr(at + 1, "memory per rank ")) {
        most = fmax(most, atof(at + strlen("memory per rank ")));
    }
    return most;
}

static void test_planner(void) {
    char cmd[8192], name[1200];
    static char out[1 << 20];
    const char* base = "./train_gpt --plan 1 --init tests/ref/ref_model.bin --seq-len 8 --total-batch-size 64 --threads 1 "
                       "--plan-nodes 1 --plan-devices-per-node 4";
    snprintf(cmd, sizeof(cmd), "%s --plan-memory-gb 1 --plan-top 100000", base);
    int rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "layouts fit"), "planner: lists the layouts of a 4-device machine", "exit %d: %.300s", rc, out);
    if (rc != 0) { return; }
    // wanted: a dozen different layouts, as "-np N ... ARGS" fragments of the planner's commands
    const char* wanted[12] = {
        "-np 4 ./train_gpt --model (--init) --batch-size 2 --seq-len 8 --total-batch-size 64 --zero 0 --recompute 0 --dtype fp32\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 1 --dtype bf16\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 1 --seq-len 8 --total-batch-size 64 --zero 2 --recompute 2 --dtype fp32\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 2 --seq-len 8 --total-batch-size 64 --zero 3 --recompute 0 --dtype fp32\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 1 --seq-len 8 --total-batch-size 64 --zero 3 --recompute 2 --dtype bf16\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 0 --dtype fp32 --tp 2\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 4 --seq-len 8 --total-batch-size 64 --zero 3 --recompute 1 --dtype bf16 --tp 2 --sequence-parallel 1\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 8 --seq-len 8 --total-batch-size 64 --zero 0 --recompute 0 --dtype fp32 --tp 4\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 0 --dtype fp32 --pp 2 --pp-schedule 1f1b\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 1 --seq-len 8 --total-batch-size 64 --zero 2 --recompute 2 --dtype bf16 --pp 2 --pp-schedule 1f1b\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 2 --seq-len 8 --total-batch-size 64 --zero 0 --recompute 1 --dtype fp32 --tp 2 --pp 2 --pp-schedule 1f1b\n",
        "-np 4 ./train_gpt --model (--init) --batch-size 4 --seq-len 8 --total-batch-size 64 --zero 2 --recompute 2 --dtype bf16 --tp 2 --sequence-parallel 1 --pp 2 --pp-schedule 1f1b\n",
    };
    int checked = 0;
    double worst = 0.0;
    for (int k = 0; k < 12; k++) {
        const char* at = strstr(out, wanted[k]);
        if (!at) { report(0, "planner: a wanted layout is listed", "not found: %s", wanted[k]); continue; }
        double predicted = plan_listed_bytes(out, wanted[k]); // (the "memory per rank N bytes" on this command's line)
        int np = 0;
        char args[1024];
        snprintf(args, sizeof(args), "%.*s", (int)strcspn(at + strlen("-np 4 ./train_gpt --model (--init)"), "\n"), at + strlen("-np 4 ./train_gpt --model (--init)"));
        sscanf(at, "-np %d", &np);
        static char run_out[65536];
        snprintf(cmd, sizeof(cmd), MPIRUN " -np %d ./train_gpt --init tests/ref/ref_model.bin --threads 1 --bench 1 --bench-steps 1%s", np, args);
        rc = run_capture(cmd, run_out, sizeof(run_out));
        double measured = largest_rank_bytes(run_out);
        double rel = predicted > 0 && measured > 0 ? fabs(predicted - measured) / measured : 1.0;
        if (rel > worst) { worst = rel; }
        snprintf(name, sizeof(name), "planner: predicted memory per rank within 2%% of the trainer's table:%s", args);
        report(rc == 0 && rel <= 0.02, name, "exit %d, predicted %.0f, table %.0f bytes (%.3g)%s%.300s", rc, predicted, measured, rel,
               rc ? ": " : "", rc ? run_out : "");
        checked += rc == 0 && rel <= 0.02;
    }
    report(checked >= 10, "planner: at least 10 layouts predicted within 2%", "%d of 12, worst difference %.3g", checked, worst);
    // ... and every run checks its own memory against the planner's count exactly, at start-up: a rank that counts 64
    // bytes more than it allocated (TRAIN_GPT_FAULT=miscount:1:0) stops the run, naming the family and the rank
    {
        static char mout[65536];
        snprintf(cmd, sizeof(cmd), "TRAIN_GPT_FAULT=miscount:1:0 " MPIRUN " -np 2 ./train_gpt --init tests/ref/ref_model.bin --threads 1 --bench 1 "
                 "--bench-steps 1 --batch-size 2 --seq-len 8 --total-batch-size 32");
        rc = run_capture(cmd, mout, sizeof(mout));
        report(rc != 0 && strstr(mout, "internal: the planner's memory for this layout (") && strstr(mout, "bytes of family 3) differs from what rank 1 allocated"),
               "start-up: a rank whose memory differs from the planner's count for its layout stops the run, named",
               "exit %d: %.300s", rc, mout);
    }
    // --master-weights 0: the planner's bf16 layouts leave out the fp32 master weights (4 bytes an owned parameter)
    // and say so in their command; the trainer's table leaves out the same bytes exactly (4 ranks, ZeRO-1: 4 x the
    // padded parameters / 4)
    {
        static char wout[1 << 20], r1[65536], r0[65536];
        snprintf(cmd, sizeof(cmd), "%s --plan-memory-gb 1 --plan-top 100000 --master-weights 0", base);
        rc = run_capture(cmd, wout, sizeof(wout));
        const char* lay = " --batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 1 --dtype bf16";
        char want0[512];
        snprintf(want0, sizeof(want0), "-np 4 ./train_gpt --model (--init)%s --master-weights 0\n", lay);
        double p1 = plan_listed_bytes(out, wanted[1]), p0 = plan_listed_bytes(wout, want0);
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 4 ./train_gpt --init tests/ref/ref_model.bin --threads 1 --bench 1 --bench-steps 1%s", lay);
        int rc1 = run_capture(cmd, r1, sizeof(r1));
        snprintf(cmd, sizeof(cmd), MPIRUN " -np 4 ./train_gpt --init tests/ref/ref_model.bin --threads 1 --bench 1 --bench-steps 1%s --master-weights 0", lay);
        int rc0 = run_capture(cmd, r0, sizeof(r0));
        double masters = 4.0 * (double)(zero_padded_size(ref_model_params(), 4) / 4);
        double t1 = largest_rank_bytes(r1), t0 = largest_rank_bytes(r0);
        report(rc == 0 && rc1 == 0 && rc0 == 0 && p0 > 0 && p1 - p0 == masters && t1 - t0 == masters && fabs(p0 - t0) <= 0.02 * t0,
               "planner and start-up table, --master-weights 0: the bf16 layout without master weights, 4 bytes an owned parameter less, and its command says so",
               "exit %d %d %d; planned %.0f -> %.0f, table %.0f -> %.0f bytes, the masters %.0f%s%.200s", rc, rc1, rc0, p1, p0, t1, t0, masters,
               rc0 ? ": " : "", rc0 ? r0 : "");
    }
    // no bf16 layout fits with fp32 master weights: the planner says so and adds the bf16 layouts that fit without
    // them, each with --master-weights 0 in its command, to the fp32 ones that fit; with room for a bf16 layout's
    // masters it never offers to drop them. GPU storage (2-byte bf16 elements, where a bf16 layout without masters
    // needs less than an fp32 one, and one with them more; on this CPU build bf16 takes 4 bytes) and no reserve; the
    // memory halfway between the smallest fp32 layout's and the smallest bf16 one's with masters.
    {
        static char w1[1 << 20], w0[1 << 20], mid[1 << 20];
        const char* gpu = "--plan-storage gpu --plan-reserve-gb 0";
        snprintf(cmd, sizeof(cmd), "%s --plan-top 100000 %s --plan-memory-gb 1", base, gpu);
        int rc1 = run_capture(cmd, w1, sizeof(w1));
        snprintf(cmd, sizeof(cmd), "%s --plan-top 100000 %s --plan-memory-gb 1 --master-weights 0", base, gpu);
        int rc0 = run_capture(cmd, w0, sizeof(w0));
        int n1, n0, nf, nb, nm, w1n, w0n, wfn, wbn, wmn, mf, wmf, mb, wmb;
        plan_least_bytes(w1, "", &n1, &w1n);
        double fp32 = plan_least_bytes(w1, " --dtype fp32", &nf, &wfn), bf16 = plan_least_bytes(w1, " --dtype bf16", &nb, &wbn);
        double bf16_w0 = plan_least_bytes(w0, " --master-weights 0", &n0, &w0n);
        double half = 0.5 * (fp32 + bf16);
        snprintf(cmd, sizeof(cmd), "%s --plan-top 100000 %s --plan-memory-gb %.9f", base, gpu, half / 1e9);
        int rcm = run_capture(cmd, mid, sizeof(mid));
        plan_least_bytes(mid, "", &nm, &wmn);
        plan_least_bytes(mid, " --dtype fp32", &mf, &wmf);
        plan_least_bytes(mid, " --dtype bf16", &mb, &wmb);
        double most = plan_most_bytes(mid);
        report(rc1 == 0 && rc0 == 0 && rcm == 0 && n1 > 0 && w1n == 0 && !strstr(w1, "without them (--master-weights 0") &&
               bf16_w0 < fp32 && fp32 < bf16 && strstr(mid, "plan: no bf16 layout fits with fp32 master weights; without them") &&
               mf > 0 && wmf == 0 && mb > 0 && wmb == mb && most <= half,
               "planner: when no bf16 layout fits with fp32 master weights, those that fit without (--master-weights 0) join the fp32 ones; only then",
               "exit %d %d %d; smallest: fp32 %.0f, bf16 %.0f with masters, %.0f without; %d layouts at 1 GB, %d with -w 0; at %.0f bytes: "
               "%d fp32 (%d with -w 0), %d bf16 (%d with -w 0), largest %.0f",
               rc1, rc0, rcm, fp32, bf16, bf16_w0, n1, w1n, half, mf, wmf, mb, wmb, most);
    }
    // --comm nccl's device buffers (plan_rank_memory): planning for GPUs (--plan-storage gpu), --comm auto takes the
    // NCCL path on several processes and counts its buffers, --comm mpi none; --grad-compress bf16 adds the gradients'
    // bf16 copy (2 bytes a padded parameter) on the NCCL path only (through MPI it is host memory). Exact: the
    // planner's bytes are the trainer's count, which the emulated GPU check holds to the device's bytes in use.
    {
        static char outs[4][1 << 20];
        const char* how[4] = {"--comm mpi", "", "--grad-compress bf16", "--comm mpi --grad-compress bf16"};
        int ok = 1;
        for (int k = 0; k < 4 && ok; k++) {
            snprintf(cmd, sizeof(cmd), "%s --plan-memory-gb 1 --plan-reserve-gb 0 --plan-top 100000 --plan-storage gpu %s", base, how[k]);
            ok = run_capture(cmd, outs[k], sizeof(outs[k])) == 0;
        }
        report(ok && strstr(outs[0], "collectives through MPI") && strstr(outs[1], "collectives through NCCL on device buffers"),
               "planner: on GPUs, --comm auto plans the NCCL path, --comm mpi the MPI one", "%.300s", outs[1]);
        // the model's parameters, from the trainer's table
        size_t n = 0;
        snprintf(cmd, sizeof(cmd), "./train_gpt --init tests/ref/ref_model.bin --seq-len 8 --batch-size 1 --threads 1 --bench 1 --bench-steps 1");
        rc = run_capture(cmd, out, sizeof(out));
        const char* par = strstr(out, "| parameters ");
        if (par) { sscanf(par, "| parameters | %zu", &n); }
        size_t n_pad = (n + 63) / 64 * 64; // zero_padded_size(n, 4): a multiple of 16 floats per rank
        const char* layouts[3] = {
            "--batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 0 --dtype bf16\n",
            "--batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 0 --dtype fp32 --tp 2\n",
            "--batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 0 --dtype fp32 --pp 2 --pp-schedule 1f1b\n",
        };
        double m[3][4];
        for (int l = 0; l < 3; l++) {
            for (int k = 0; k < 4; k++) { m[l][k] = plan_listed_bytes(outs[k], layouts[l]); }
        }
        double btc = 2.0 * 8 * 32; // B T C of those layouts (the reference model's C is 32)
        report(n > 0 && m[0][0] > 0 && m[0][1] == m[0][0] && m[0][2] - m[0][1] == 2.0 * n_pad && m[0][3] == m[0][0],
               "planner: --grad-compress bf16 on the NCCL path counts the gradients' bf16 copy (2 bytes a padded parameter), and nothing else differs",
               "%zu parameters; mpi %.0f, nccl %.0f, nccl bf16 %.0f, mpi bf16 %.0f", n, m[0][0], m[0][1], m[0][2], m[0][3]);
        report(m[1][0] > 0 && m[1][1] - m[1][0] == btc * 4,
               "planner: tp 2 on the NCCL path counts its fp32 scratch of B T C floats", "mpi %.0f, nccl %.0f", m[1][0], m[1][1]);
        // the pipeline's messages: a receive buffer and a send buffer for each message of a step, B T C elements of
        // the layout's dtype each (fp32 here: an fp32 GPU build sends fp32); 1F1B on 2 stages with 2 micro-batches:
        // stage 0 sends 2 activations, stage 1 2 gradients, the largest either way: 3 buffers
        double pp_extra = m[2][1] - m[2][0];
        report(m[2][0] > 0 && pp_extra == 3 * btc * 4,
               "planner: pp 2 on the NCCL path counts the device message buffers (stage 0: 2 sends a step + 1 receive, of B T C fp32 elements)",
               "mpi %.0f, nccl %.0f (difference %.0f, want %.0f)", m[2][0], m[2][1], pp_extra, 3 * btc * 4);
        // fp32 layouts on GPUs: a CUDA build stores its own dtype, so an fp32 one stores 4-byte elements, as this CPU
        // build does: through MPI (no NCCL buffers) the planner's GPU bytes of an fp32 layout are this build's own,
        // and a bf16 layout's parameters take half of them
        snprintf(cmd, sizeof(cmd), "%s --plan-memory-gb 1 --plan-reserve-gb 0 --plan-top 100000", base);
        rc = run_capture(cmd, out, sizeof(out));
        double own[2] = {plan_listed_bytes(out, layouts[1]), plan_listed_bytes(out, layouts[2])};
        report(rc == 0 && own[0] > 0 && own[0] == m[1][0] && own[1] == m[2][0],
               "planner: fp32 layouts planned for GPUs take 4-byte elements (this build's bytes, through MPI), not 16-bit ones",
               "tp 2: %.0f for GPUs, %.0f this build's; pp 2: %.0f, %.0f", m[1][0], own[0], m[2][0], own[1]);
        // the runtime's reserve: 2 GB by default on GPUs, none for this build's storage; a layout must fit in what the
        // reserve leaves: the dp 4 ZeRO 1 layout above, on devices 1000 bytes larger than it needs, fits with no
        // reserve and not with 2000 bytes of it, rejected with the reason
        snprintf(cmd, sizeof(cmd), "%s --plan-storage gpu --plan-top 1", base);
        rc = run_capture(cmd, out, sizeof(out));
        int gpu_default = rc == 0 && strstr(out, "80.0 GB each (2.0 GB of it reserved for the runtime)");
        snprintf(cmd, sizeof(cmd), "%s --plan-top 1", base);
        rc = run_capture(cmd, out, sizeof(out));
        report(gpu_default && rc == 0 && strstr(out, "(0.0 GB of it reserved for the runtime)"),
               "planner: the runtime's reserve is 2 GB on GPUs and none for this build's storage by default", "%.300s", out);
        int fits[2] = {0, 0}, reason = 0;
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof(cmd), "%s --plan-storage gpu --plan-memory-gb %.9f --plan-reserve-gb %s --plan-top 100000 --plan-verbose 1",
                     base, (m[0][1] + 1000.0) / 1e9, k == 0 ? "0" : "0.000002");
            rc = run_capture(cmd, out, sizeof(out));
            fits[k] = rc == 0 && strstr(out, layouts[0]) != NULL;
            if (k == 1) {
                const char* rej = strstr(out, "rejected: dp 4 tp 1 pp 1 sp 0 zero 1 B 2 recompute 0 bf16: needs ");
                reason = rej && strstr(rej, "reserved") && strstr(rej, "reserved") < strchr(rej, '\n');
            }
        }
        report(m[0][1] > 0 && fits[0] && !fits[1] && reason,
               "planner: a layout that fits the device but not what the reserve leaves is rejected, with the reason",
               "fits without a reserve %d, with 2000 bytes %d, reason given %d", fits[0], fits[1], reason);
    }
    // rejected layouts are counted by reason (the test model has 4 heads: tp 3 cannot split them)
    snprintf(cmd, sizeof(cmd), "./train_gpt --plan 1 --init tests/ref/ref_model.bin --seq-len 8 --total-batch-size 96 --threads 1 "
             "--plan-devices-per-node 3 --plan-verbose 1");
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "like: 4 heads do not divide by tensor-parallel size 3") && strstr(out, "rejected: dp 1 tp 3 pp 1"),
           "planner: rejected layouts are named with the reason (tp 3 with 4 heads)", "exit %d: %.300s", rc, out);
    // a batch ramp (F 64, S 16, R 48: steps of 16, 32, then 64 tokens): every layout is checked for each of its steps
    // with the trainer's own test (ramp_step_fits), so the 4 data-parallel ranks of T 8 (32 tokens a row of sequences)
    // that the whole batch allows are rejected for the first step's 16 tokens, as are pipelines of 2 sequences per
    // micro-batch on 2 ranks; the commands carry the ramp's flags; the ramp's 2 steps are counted
    {
        static char out2[1 << 20];
        snprintf(cmd, sizeof(cmd), "%s --plan-memory-gb 1 --plan-top 100000", base);
        int rc0 = run_capture(cmd, out2, sizeof(out2));
        int flat_dp4 = rc0 == 0 && strstr(out2, "|   4  1  1 |") != NULL;
        snprintf(cmd, sizeof(cmd), "%s --plan-memory-gb 1 --plan-top 100000 --plan-verbose 1 --batch-ramp-start 16 --batch-ramp-tokens 48", base);
        rc = run_capture(cmd, out2, sizeof(out2));
        int ramp_dp4 = strstr(out2, "|   4  1  1 |") != NULL, ramp_dp2 = strstr(out2, "|   2  1  2 |") != NULL;
        int why4 = strstr(out2, "rejected: dp 4 tp 1 pp 1 sp 0 zero 0 B 1 recompute 0 bf16: the batch ramp's step of 16 tokens is not a multiple of "
                                "seq-len x data-parallel ranks = 8 x 4 = 32: every rank trains on whole sequences") != NULL;
        int why_pp = strstr(out2, "rejected: dp 2 tp 1 pp 2 (1f1b) sp 0 zero 0 B 2 recompute 0 bf16: the batch ramp's step of 16 tokens is not a "
                                  "multiple of batch-size x seq-len x data-parallel ranks = 2 x 8 x 2 = 32") != NULL;
        int flags = strstr(out2, "--batch-ramp-start 16 --batch-ramp-tokens 48\n") != NULL;
        int steps = strstr(out2, "plan: the batch ramp's first 48 tokens take 2 steps of 16 to 48 tokens") != NULL;
        report(rc == 0 && flat_dp4 && !ramp_dp4 && ramp_dp2 && why4 && why_pp && flags && steps,
               "planner: a batch ramp's steps are checked on every layout (4 data-parallel ranks, and 2-sequence pipeline micro-batches, "
               "rejected for its 16-token first step; listed without it), its flags in the commands, its steps counted",
               "exit %d/%d; dp 4 listed without the ramp %d, with it %d; dp 2 pp 2 listed %d; reasons %d %d; flags %d; steps %d", rc0, rc,
               flat_dp4, ramp_dp4, ramp_dp2, why4, why_pp, flags, steps);
    }
    snprintf(cmd, sizeof(cmd), "%s --plan-memory-gb 0.00001", base);
    rc = run_capture(cmd, out, sizeof(out));
    report(rc == 0 && strstr(out, "no layout fits: the smallest needs"), "planner: a machine too small says what the smallest layout needs",
           "exit %d: %.300s", rc, out);
    // fp32 layouts' compute time (plan_estimate): exact fp32 runs on the CUDA cores at 0.058 of the 16-bit rate,
    // --tf32 1 on TF32 tensor cores at 0.467 of it (an H200's, measured), and its fp32 command lines then carry --tf32 1. The same layout
    // (GPT-2 124M on 8 devices: dp 8, ZeRO-1, B 16, no recomputation) in bf16 and fp32, from the full listing.
    for (int tf = 0; tf <= 1; tf++) {
        snprintf(cmd, sizeof(cmd), "./train_gpt --plan 1 --model d12 --seq-len 1024 --total-batch-size 524288 --plan-nodes 1 "
                 "--plan-devices-per-node 8 --plan-top 100000 --tf32 %d", tf);
        rc = run_capture(cmd, out, sizeof(out));
        double compute[2] = {-1.0, -1.0}; // bf16, fp32
        int fp32_flag = -1;
        for (const char* line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            int idx, dp, tpv, ppv, zero, B, rcp;
            char dt[8];
            double mem, step, comp;
            if (sscanf(line, " %d | %d %d %d | %d %d %d %7s %*d %*s | %lf GB ( %*f %*f %*f %*f) | %lf ( %lf", &idx, &dp, &tpv, &ppv,
                       &zero, &B, &rcp, dt, &mem, &step, &comp) == 11 &&
                dp == 8 && tpv == 1 && ppv == 1 && zero == 1 && B == 16 && rcp == 0) {
                int f = strcmp(dt, "fp32") == 0;
                compute[f] = comp;
                if (f) {
                    const char* nl = strchr(line, '\n');
                    const char* run = nl ? strstr(nl + 1, "run: mpirun") : NULL;
                    const char* end = run ? strchr(run, '\n') : NULL;
                    char cmdline[1024] = "";
                    if (run && end) { snprintf(cmdline, sizeof(cmdline), "%.*s", (int)(end - run), run); }
                    fp32_flag = run && end && strstr(cmdline, "--tf32 1") != NULL;
                }
            }
        }
        double ratio = compute[0] > 0 && compute[1] > 0 ? compute[1] / compute[0] : -1.0, want = 1.0 / (tf ? 0.467 : 0.058);
        snprintf(name, sizeof(name), "planner --tf32 %d: an fp32 layout computes %gx as long as its bf16 twin; its command %s --tf32 1", tf,
                 want, tf ? "carries" : "lacks");
        report(rc == 0 && fabs(ratio - want) <= 0.01 * want && fp32_flag == tf &&
               strstr(out, tf ? "fp32 matmuls on TF32 tensor cores (--tf32 1)" : "fp32 matmuls exact (--tf32 0)"), name,
               "exit %d, compute bf16 %.1f ms, fp32 %.1f ms (ratio %.3g), --tf32 1 in the fp32 command %d", rc, compute[0], compute[1],
               ratio, fp32_flag);
    }
    const struct { const char* args; const char* expect; } bad[3] = {
        {"./train_gpt --init tests/ref/ref_model.bin --plan-nodes 2 --bench 1", "--plan-nodes configures the planner: it needs --plan 1"},
        {"./train_gpt --plan 1 --init tests/ref/ref_model.bin --seq-len 8", "give the global batch"},
        {"timeout 60 " MPIRUN " -np 2 ./train_gpt --plan 1 --init tests/ref/ref_model.bin --seq-len 8 --total-batch-size 64", "runs in one process"},
    };
    for (int k = 0; k < 3; k++) {
        rc = run_capture(bad[k].args, out, sizeof(out));
        snprintf(name, sizeof(name), "planner: refused: %s", bad[k].expect);
        report(rc != 0 && rc != 124 && strstr(out, bad[k].expect), name, "exit %d: %.300s", rc, out);
    }
}

// The samples' KV cache is allocated at start-up with the rest and counted (PlanLayout.kv_B): by the planner with
// --sample-every (one sequence of T positions of the keys and values of a rank's layers in the storage type, and the
// LM head's fp32 row of logits, on the ranks that sample), and by the trainer's table, which it must equal (the
// trainer checks that at start-up, so every run with samples below checks it too). The reference model: L 2, C 32,
// Vp 128, T 8 here. Then the samples a training run draws through that cache are those of --kv-cache 0.
static void test_kv_memory(void) {
    char cmd[8192], name[600];
    static char out[2][1 << 20];
    // the planner: GPU storage (2-byte elements), the dp 4, tp 2 and sequence-parallel layouts with and without
    // --sample-every (and with it under --kv-cache 0)
    const char* base = "./train_gpt --plan 1 --init tests/ref/ref_model.bin --seq-len 8 --total-batch-size 64 --threads 1 "
                       "--plan-nodes 1 --plan-devices-per-node 4 --plan-memory-gb 1 --plan-reserve-gb 0 --plan-top 100000 --plan-storage gpu";
    const char* layouts[3] = {
        "--batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 0 --dtype bf16\n",
        "--batch-size 2 --seq-len 8 --total-batch-size 64 --zero 1 --recompute 0 --dtype bf16 --tp 2\n",
        "--batch-size 4 --seq-len 8 --total-batch-size 64 --zero 3 --recompute 1 --dtype bf16 --tp 2 --sequence-parallel 1\n",
    };
    const double want[3] = {2.0 * 1 * 8 * 64 * 2 + 128 * 4, 2.0 * 1 * 8 * 32 * 2 + 64 * 4, 0.0};
    const char* how[3] = {"", "--sample-every 5", "--sample-every 5 --kv-cache 0"};
    double m[3][3];
    static char listing[1 << 20];
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof(cmd), "%s %s", base, how[k]);
        int rc = run_capture(cmd, listing, sizeof(listing));
        if (k == 1) { snprintf(out[0], sizeof(out[0]), "%s", listing); }
        for (int l = 0; l < 3; l++) { m[k][l] = rc == 0 ? plan_listed_bytes(listing, layouts[l]) : -1.0; }
    }
    for (int l = 0; l < 3; l++) {
        snprintf(name, sizeof(name), "planner --sample-every: counts the samples' KV cache (%s), and nothing under --kv-cache 0:%.*s", l == 2 ? "none under sequence parallelism" :
                 l == 1 ? "tp 2: half the columns, of the layers and of the vocabulary" : "every layer's keys and values of one sequence, one row of logits", (int)strlen(layouts[l]) - 1, layouts[l]);
        report(m[0][l] > 0 && m[1][l] - m[0][l] == want[l] && m[2][l] == m[0][l], name, "without %.0f, with %.0f (difference %.0f, want %.0f), --kv-cache 0 %.0f",
               m[0][l], m[1][l], m[1][l] - m[0][l], want[l], m[2][l]);
    }
    report(strstr(out[0], "plan: with the KV cache of --sample-every's samples") != NULL, "planner --sample-every: says it counts the samples' cache", "%.300s", out[0]);

    // the trainer: its table (this build's fp32 storage) with and without samples, one process and tp 2; the samples
    // through the start-up cache equal --kv-cache 0's
    char shard[1024];
    if (!fresh_shard("kv memory setup", "kvmem", "train_000000.bin", 4000, 7, shard, sizeof(shard))) { return; }
    const char* procs[2] = {"", MPIRUN " -np 2"};
    const char* split[2] = {"", " --tp 2"};
    const double want_run[2] = {2.0 * 8 * 64 * 4 + 128 * 4, 2.0 * 8 * 32 * 4 + 64 * 4};
    for (int k = 0; k < 2; k++) {
        char samples[3][16384];
        double bytes[3];
        const char* extra[3] = {"", " --sample-every 1 --gen-tokens 6", " --sample-every 1 --gen-tokens 6 --kv-cache 0"};
        int rc[3];
        for (int e = 0; e < 3; e++) {
            snprintf(cmd, sizeof(cmd), "%s ./train_gpt --init tests/ref/ref_model.bin --train %s --batch-size 2 --seq-len 8 --steps 4 --threads 1%s%s",
                     procs[k], shard, split[k], extra[e]);
            rc[e] = run_capture(cmd, out[1], sizeof(out[1]));
            bytes[e] = largest_rank_bytes(out[1]);
            grep_samples(out[1], samples[e], sizeof(samples[e]));
            if (e == 1) { snprintf(out[0], sizeof(out[0]), "%s", out[1]); }
        }
        snprintf(name, sizeof(name), "--sample-every%s: the start-up table counts the samples' KV cache (and --kv-cache 0 none); its line says so", split[k]);
        report(rc[0] == 0 && rc[1] == 0 && rc[2] == 0 && bytes[1] - bytes[0] == want_run[k] && bytes[2] == bytes[0] &&
               strstr(out[0], "rank 0's activations include the samples' KV cache (--sample-every)"), name,
               "exit %d %d %d; largest rank %.0f without, %.0f with (difference %.0f, want %.0f), %.0f with --kv-cache 0", rc[0], rc[1], rc[2],
               bytes[0], bytes[1], bytes[1] - bytes[0], want_run[k], bytes[2]);
        int lines = 0;
        for (const char* q = samples[1]; (q = strchr(q, '\n')) != NULL; q++) { lines++; }
        snprintf(name, sizeof(name), "--sample-every 1%s: the samples through the start-up cache are --kv-cache 0's", split[k]);
        report(lines == 4 && strcmp(samples[1], samples[2]) == 0, name, "%d sample lines: %.200s | %.200s", lines, samples[1], samples[2]);
    }
}

#endif // RUNS_PLANNER_H
