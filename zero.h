/*
zero.h: data-parallel gradient reduction in buckets and the ZeRO sharded AdamW, written once over the collective
API of comm.h (MPI on CPU buffers; NCCL with the CUDA backend) and the kernel interface (kernels.h).

The parameters, their gradients, the AdamW moments and the master weights share one flat layout of n_pad elements
(the logical parameter count n rounded up so that it splits into dp equal shards of S). Rank r owns the range
[r*S, (r+1)*S). Because every tensor is a range of the flat layout, sharding and gathering are range arithmetic.
Gradients, moments and master weights are fp32; the parameters are the compute copy (floatX). With a 16-bit compute
copy (--dtype bf16/fp16) the owner of a range also keeps its fp32 master weights, sharded like the moments: AdamW
updates the master, writes the compute copy by stochastic rounding, and the compute copy is what is all-gathered.

  stage 0 (DDP):  every rank keeps full gradients and full moments. On the last micro-step each bucket of gradients
                  is all-reduced (non-blocking) as soon as backward has finished it.
  stage 1:        moments sharded. On the last micro-step each bucket is reduce-scattered in place: the owned
                  range of the full gradient buffer receives the sum; AdamW runs on the owned range only; the
                  parameters are all-gathered after the update.
  stage 2:        as stage 1, and gradients are sharded too: every micro-step reduce-scatters each bucket as soon as
                  it is final, so the full gradient buffer is never needed: backward writes a layer's gradients
                  into one of two reused layer slots (the trainer's job), the owner accumulates into gshard.
  stage 3:        as stage 2, and the parameters are sharded too: the rank keeps only the compute copy of its owned
                  range (the trainer's `params` is then S elements, not n_pad) and AdamW updates it in place; there
                  is no all-gather after the update. The trainer gathers each layer's parameters just before they
                  are used (zero_igather_range) into a small working arena, in forward and again in backward.

Three ways to run the collectives: on the buffers themselves (the CPU's MPI), staged through host copies (the MPI
path of a GPU build, and --comm staged on the CPU), or through NCCL on the device buffers (--comm nccl; nccl set,
comm_nccl.h), where waiting for a reduction makes the compute stream wait and the CPU goes on.

--grad-compress powersgd:R (stages 0 and 1; powersgd.h): each final bucket is staged to the host, compressed and
all-reduced there (blocking; over MPI, with --comm nccl too), and the decompressed sum is copied back over the whole
bucket on every rank; stage 1 then uses its owned slice as usual. --grad-compress bf16 rounds each bucket to bf16
and sums it in bf16: on the host copy, or with NCCL on the device.

Nothing here zeroes gradients: the first micro-step of every optimizer step overwrites them (the kernels' `acc`
flag), the reduce-scatter of the first micro-step overwrites gshard, and later micro-steps add to both.

The reduction is a SUM: the trainer scales the loss gradient by 1 / (tokens per optimizer step, all ranks together),
so the summed gradient is the gradient of the mean loss, exactly as in one process with gradient accumulation.
Only static functions: include after comm.h and the kernels header.
*/
#ifndef ZERO_H
#define ZERO_H

#include <math.h>
#include <stddef.h>
#include <time.h>
#include "comm.h"
#include "comm_nccl.h" // defines: CommNccl, CommNcclReq, the device collectives of --comm nccl
#include "powersgd.h" // defines: PowerSgd, powersgd_reduce, powersgd_payload
#include "utils.h"

#define ZERO_MAX_BUCKETS 1024
#define ZERO_MAX_SEGMENTS 4096

typedef AdamWSegment ZeroSegment; // one parameter tensor: a range of the flat layout and its weight-decay flag

typedef struct {
    const KernelCtx* ctx; // the backend's execution context (every buffer below is device memory)
    int stage;
    CommGroup* group;     // the data-parallel group
    int rank, size;
    size_t n;             // logical parameter count
    size_t n_pad;         // n rounded up to a multiple of size (and of 16 floats)
    size_t shard;         // S = n_pad / size
    size_t lo, hi;        // owned range [lo, hi) = [rank*S, (rank+1)*S)
    float* m;             // (S) first moment of the owned range (stage 0: (n_pad), every rank owns everything)
    float* v;             // (S) second moment
    float* gshard;        // (S) reduced gradient of the owned range (stage 2); NULL for stages 0 and 1
    float* master;        // (S) fp32 master weights of the owned range (16-bit compute copy); NULL in fp32
    double* scalars;      // (1) device scalar the gradient norm is reduced into
    // staging (--comm staged on the CPU, the MPI path of a GPU build): every collective runs on host copies of the
    // device buffers; a completed reduction's result is copied back to the device when it is waited for
    int staged;
    float* host_grads;    // (n_pad) host mirror of the gradient buffer, by flat index
    float* host_shard;    // (S) stage 2: where the reduce-scatter of the owned shard lands
    void* host_params;    // (n_pad floatX) the parameter all-gather's host buffer
    // --grad-compress bf16: the reductions run on bf16 copies (host_bf16, by flat index) of the staged gradients, or
    // with nccl on bf16 copies on the device (dev_bf16)
    int compress;
    uint16_t* host_bf16;  // (n_pad)
    uint16_t* dev_bf16;   // (n_pad) with nccl
    float* copy_dev[ZERO_MAX_BUCKETS];        // per pending request: the device range its result goes back to
    const float* copy_host[ZERO_MAX_BUCKETS];
    const uint16_t* copy_bf16[ZERO_MAX_BUCKETS]; // compressed: the bf16 result, widened into copy_host first (with nccl:
                                                  // on the device, widened straight into copy_dev)
    size_t copy_n[ZERO_MAX_BUCKETS];
    CommNccl* nccl;       // --comm nccl: the group's NCCL communicator (zero_set_nccl; the caller's, ended by it); NULL otherwise
    CommNcclReq nccl_req[ZERO_MAX_BUCKETS]; // per pending request, with nccl
    PowerSgd* psgd;       // --grad-compress powersgd:R: reduces every bucket (zero_set_powersgd); NULL otherwise
    double grad_bytes;    // bytes this rank has sent for gradient reductions (ring model: comm_sent_bytes)
    double grad_bytes_fp32; // what uncompressed fp32 reductions of the same buckets would have sent
    ZeroSegment segments[ZERO_MAX_SEGMENTS];
    int num_segments;
    CommRequest pending[ZERO_MAX_BUCKETS];
    int pending_bucket[ZERO_MAX_BUCKETS];
    int num_pending;
    double wait_seconds;  // time spent blocked in waits for reductions (for the overlap figure)
    double gather_seconds; // stage 3: time spent blocked in waits for parameter gathers
} ZeroOptimizer;

// Rounds n up so that the flat buffers split into `size` equal shards of a multiple of 16 floats (64 bytes).
static size_t zero_padded_size(size_t n, int size) {
    size_t unit = (size_t)size * 16;
    return (n + unit - 1) / unit * unit;
}


// with_master: keep fp32 master weights of the owned range (a 16-bit compute copy). staged: run the collectives on
// host copies (see `staged` above).
static void zero_init(ZeroOptimizer* z, const KernelCtx* ctx, int stage, CommGroup* group, size_t n,
                      const ZeroSegment* segs, int nseg, int with_master, int staged) {
    memset(z, 0, sizeof(*z));
    z->ctx = ctx;
    if (stage < 0 || stage > 3) { fatal("--zero %d: supported stages are 0, 1, 2, 3", stage); }
    if (nseg > ZERO_MAX_SEGMENTS) { fatal("zero: %d parameter segments exceed the limit %d", nseg, ZERO_MAX_SEGMENTS); }
    z->stage = stage;
    z->group = group;
    z->rank = group->rank;
    z->size = group->size;
    z->n = n;
    z->n_pad = zero_padded_size(n, z->size);
    z->shard = z->n_pad / z->size;
    z->lo = stage == 0 ? 0 : z->rank * z->shard;
    z->hi = stage == 0 ? z->n_pad : z->lo + z->shard;
    size_t S = z->hi - z->lo;
    z->m = (float*)dev_alloc(ctx, mulSize(S, sizeof(float)));
    z->v = (float*)dev_alloc(ctx, mulSize(S, sizeof(float)));
    if (stage >= 2) { z->gshard = (float*)dev_alloc(ctx, mulSize(S, sizeof(float))); }
    if (with_master) { z->master = (float*)dev_alloc(ctx, mulSize(S, sizeof(float))); }
    z->scalars = (double*)dev_alloc(ctx, sizeof(double));
    z->staged = staged;
    if (staged && (stage > 0 || z->size > 1)) {
        z->host_grads = (float*)dev_host_alloc(ctx, mulSize(z->n_pad, sizeof(float)));
        if (stage >= 2) { z->host_shard = (float*)dev_host_alloc(ctx, mulSize(S, sizeof(float))); }
        if (stage == 1 || stage == 2) { z->host_params = dev_host_alloc(ctx, mulSize(z->n_pad, sizeof(floatX))); }
    }
    memcpy(z->segments, segs, sizeof(ZeroSegment) * nseg);
    z->num_segments = nseg;
}

static void zero_free(ZeroOptimizer* z) {
    dev_free(z->ctx, z->m);
    dev_free(z->ctx, z->v);
    dev_free(z->ctx, z->gshard);
    dev_free(z->ctx, z->master);
    dev_free(z->ctx, z->scalars);
    dev_host_free(z->ctx, z->host_grads);
    dev_host_free(z->ctx, z->host_shard);
    dev_host_free(z->ctx, z->host_params);
    free(z->host_bf16);
    dev_free(z->ctx, z->dev_bf16);
}

// --grad-compress bf16: the gradient reductions send bf16 (half the bytes), as PyTorch's bf16_compress_hook does:
// each bucket (after the stage-2 running shard is added in) is rounded to bf16 on the host, summed in bf16 over the
// group, and widened back to fp32 where its result belongs. Parameters still travel in full. With nccl (set first)
// all of it happens on the device: rounded into dev_bf16, summed there through NCCL, widened on the wait.
static void zero_set_compress(ZeroOptimizer* z) {
    z->compress = 1;
    if (z->nccl) {
        z->dev_bf16 = (uint16_t*)dev_alloc(z->ctx, mulSize(z->n_pad, sizeof(uint16_t)));
        return;
    }
    if (!z->host_grads) { z->host_grads = (float*)dev_host_alloc(z->ctx, mulSize(z->n_pad, sizeof(float))); }
    z->host_bf16 = (uint16_t*)mallocCheck(mulSize(z->n_pad, sizeof(uint16_t)));
}

// --grad-compress powersgd:R: every bucket is reduced by ps (a compressed all-reduce on the host copy), in stages 0
// and 1, which keep whole gradients (stage 2 reduce-scatters every micro-step and keeps none).
// --comm nccl: the collectives run through n (the data-parallel group's NCCL communicator) on the device buffers.
// Set before zero_set_compress. PowerSGD keeps its host path (over the group's MPI communicator) either way.
static void zero_set_nccl(ZeroOptimizer* z, CommNccl* n) {
    if (z->staged || z->compress) { fatal("internal: NCCL collectives with staging, or set after compression"); }
    z->nccl = n;
}

static void zero_set_powersgd(ZeroOptimizer* z, PowerSgd* ps) {
    if (z->stage > 1) { fatal("internal: PowerSGD with ZeRO stage %d (the trainer refuses --zero 2 and above with it)", z->stage); }
    z->psgd = ps;
    if (!z->host_grads) { z->host_grads = (float*)dev_host_alloc(z->ctx, mulSize(z->n_pad, sizeof(float))); }
}

// Bytes of optimizer state per rank: moments, the stage-2 gradient shard, master weights, and the device scalar the
// gradient norm's sum goes to.
static size_t zero_state_bytes(const ZeroOptimizer* z) {
    size_t S = z->hi - z->lo;
    return (2 + (z->gshard != NULL) + (z->master != NULL)) * S * sizeof(float) + sizeof(double);
}

// --comm nccl with --grad-compress bf16: the device copy of the gradients the reductions send (0 otherwise)
static size_t zero_compress_device_bytes(const ZeroOptimizer* z) { return z->dev_bf16 ? z->n_pad * sizeof(uint16_t) : 0; }

// The master weights of the owned range from the fp32 values of all parameters (host_params: n_pad or at least
// hi floats, the logical layout), when a master is kept.
static void zero_set_master(ZeroOptimizer* z, const float* host_params) {
    if (z->master) { dev_copy_h2d(z->ctx, z->master, host_params + z->lo, (z->hi - z->lo) * sizeof(float)); }
}

// Does this micro-step reduce gradients? Stages 2 and 3 reduce every micro-step (unowned gradients are not kept);
// stages 0 and 1 only on the last one, when the accumulated gradients are final.
static int zero_reduces_on(const ZeroOptimizer* z, int last_micro_step) {
    return z->stage >= 2 || last_micro_step;
}

#define ZERO_MAX_RANKS 4096

// How much of the flat range [lo, hi) each data-parallel rank owns (the reduce-scatter's counts).
static void zero__bucket_counts(const ZeroOptimizer* z, size_t lo, size_t hi, size_t* counts) {
    if (z->size > ZERO_MAX_RANKS) { fatal("zero: data-parallel size %d above %d", z->size, ZERO_MAX_RANKS); }
    for (int r = 0; r < z->size; r++) {
        size_t a = r * z->shard, b = a + z->shard;
        size_t s = lo > a ? lo : a, e = hi < b ? hi : b;
        counts[r] = e > s ? e - s : 0;
    }
}

// The compressed form of zero_bucket_ready: the bucket (send: its staged host copy, or with nccl the device buffer
// itself) rounded to bf16 (host_bf16, or with nccl dev_bf16) and reduced there; what this rank gets (the whole bucket
// in stage 0, its owned slice otherwise) is widened back on the wait.
static void zero__bucket_ready_bf16(ZeroOptimizer* z, int slot, float* bucket_grads, float* send, size_t lo, size_t hi) {
    CommRequest* req = &z->pending[slot];
    uint16_t* cb = (z->nccl ? z->dev_bf16 : z->host_bf16) + lo;
    if (z->nccl) { comm_nccl_round_bf16(z->ctx, cb, send, hi - lo); }
    else { for (size_t i = 0; i < hi - lo; i++) { cb[i] = bf16_bits(send[i]); } }
    size_t off = 0, n = hi - lo; // what this rank gets: [off, off + n) of the bucket
    float* dev = bucket_grads;
    if (z->stage == 0) {
        if (z->nccl) { comm_nccl_iallreduce_sum_bf16(z->nccl, z->ctx, cb, hi - lo, &z->nccl_req[slot]); }
        else { comm_iallreduce_sum_bf16(z->group, cb, hi - lo, req); }
    } else {
        size_t counts[ZERO_MAX_RANKS];
        zero__bucket_counts(z, lo, hi, counts);
        if (z->nccl) { comm_nccl_ireduce_scatterv_sum_bf16(z->nccl, z->ctx, cb, counts, &z->nccl_req[slot]); }
        else { comm_ireduce_scatterv_sum_bf16(z->group, cb, counts, req); }
        size_t own_s = lo > z->lo ? lo : z->lo, own_e = hi < z->hi ? hi : z->hi;
        if (own_s >= own_e) { return; }
        off = own_s - lo;
        n = own_e - own_s;
        dev = z->stage == 1 ? bucket_grads + off : z->gshard + (own_s - z->lo);
    }
    z->copy_dev[slot] = dev; z->copy_bf16[slot] = cb + off; z->copy_n[slot] = n;
    if (!z->nccl) { z->copy_host[slot] = send + off; }
}

// The PowerSGD form of zero_bucket_ready: the bucket staged to the host, reduced there by powersgd_reduce (blocking),
// and the decompressed sum copied back over the whole bucket. Its time counts as waiting: none of it is hidden.
static void zero__bucket_powersgd(ZeroOptimizer* z, float* bucket_grads, size_t lo, size_t hi) {
    double t0 = now_seconds();
    float* host = z->host_grads + lo;
    dev_copy_d2h(z->ctx, host, bucket_grads, (hi - lo) * sizeof(float));
    dev_sync(z->ctx);
    size_t floats = powersgd_reduce(z->psgd, host, lo, hi);
    dev_copy_h2d(z->ctx, bucket_grads, host, (hi - lo) * sizeof(float));
    z->grad_bytes += comm_sent_bytes(COMM_OP_ALLREDUCE, (double)floats * sizeof(float), z->size);
    z->wait_seconds += now_seconds() - t0;
}

// Starts the reduction of the gradients of flat range [lo, hi), held at bucket_grads (bucket_grads[0] is the
// gradient of flat index lo). The buffer must stay untouched until zero_wait_bucket / zero_wait_all.
// Stage 2 on micro-steps after the first: the owner adds its accumulated shard into its own part of the send
// buffer first, so the sum over ranks is the running total and no second shard buffer is needed.
// Staged: the bucket is copied to its place in the host mirror first and the collective runs there; what it
// produces for this rank (the whole bucket in stage 0, the owned slice in stage 1, the gshard slice in stage 2) is
// copied back when the request is waited for.
static void zero_bucket_ready(ZeroOptimizer* z, int bucket, float* bucket_grads, size_t lo, size_t hi, int first_micro_step) {
    // the bytes sent: the plain reduction's (an all-reduce in stage 0, a reduce-scatter after), in fp32 and as sent
    int plain = z->stage == 0 ? COMM_OP_ALLREDUCE : COMM_OP_REDUCE_SCATTER;
    z->grad_bytes_fp32 += comm_sent_bytes(plain, (double)(hi - lo) * sizeof(float), z->size);
    if (z->psgd) { zero__bucket_powersgd(z, bucket_grads, lo, hi); return; }
    z->grad_bytes += comm_sent_bytes(plain, (double)(hi - lo) * (z->compress ? sizeof(uint16_t) : sizeof(float)), z->size);
    if (z->num_pending >= ZERO_MAX_BUCKETS) { fatal("zero: more than %d buckets in flight", ZERO_MAX_BUCKETS); }
    int slot = z->num_pending;
    CommRequest* req = &z->pending[slot];
    z->pending_bucket[slot] = bucket;
    z->copy_n[slot] = 0;
    z->copy_bf16[slot] = NULL;
    z->num_pending++;
    size_t own_s = lo > z->lo ? lo : z->lo, own_e = hi < z->hi ? hi : z->hi;
    if (z->stage >= 2 && !first_micro_step && own_s < own_e) {
        // the running total of the owned range goes into the send buffer (on the device, before any staging)
        add_inplace(z->ctx, bucket_grads + (own_s - lo), z->gshard + (own_s - z->lo), own_e - own_s);
    }
    float* send = bucket_grads;
    if (z->nccl) { memset(req, 0, sizeof(*req)); } // comm_wait returns at once on it; nccl_req[slot] is the request
    if (z->staged || (z->compress && !z->nccl)) {
        send = z->host_grads + lo;
        dev_copy_d2h(z->ctx, send, bucket_grads, (hi - lo) * sizeof(float));
        dev_sync(z->ctx);
    }
    if (z->compress) { zero__bucket_ready_bf16(z, slot, bucket_grads, send, lo, hi); return; }
    if (z->stage == 0) {
        if (z->nccl) { comm_nccl_iallreduce_sum_f32(z->nccl, z->ctx, send, hi - lo, &z->nccl_req[slot]); return; }
        comm_iallreduce_sum_f32(z->group, send, hi - lo, req);
        if (z->staged) { z->copy_dev[slot] = bucket_grads; z->copy_host[slot] = send; z->copy_n[slot] = hi - lo; }
        return;
    }
    size_t counts[ZERO_MAX_RANKS];
    zero__bucket_counts(z, lo, hi, counts);
    // stage 1 reduces in place (the owned slice of the send buffer receives the sum); stages 2 and 3 into gshard
    size_t in_bucket = own_s < own_e ? own_s - lo : 0, in_shard = own_s < own_e ? own_s - z->lo : 0;
    float* dev_recv = z->stage == 1 ? bucket_grads + in_bucket : z->gshard + in_shard;
    float* recv = dev_recv;
    if (z->staged) {
        recv = z->stage == 1 ? send + in_bucket : z->host_shard + in_shard;
        z->copy_dev[slot] = dev_recv; z->copy_host[slot] = recv; z->copy_n[slot] = own_s < own_e ? own_e - own_s : 0;
    }
    if (z->nccl) { comm_nccl_ireduce_scatterv_sum_f32(z->nccl, z->ctx, send, recv, counts, &z->nccl_req[slot]); return; }
    comm_ireduce_scatterv_sum_f32(z->group, send, recv, counts, req);
}

static void zero_wait_index(ZeroOptimizer* z, int i) {
    double t0 = now_seconds();
    comm_wait(&z->pending[i]);
    if (z->nccl) { comm_nccl_wait(z->ctx, &z->nccl_req[i]); }
    if (z->nccl && z->copy_bf16[i]) {
        comm_nccl_widen_bf16(z->ctx, z->copy_dev[i], z->copy_bf16[i], z->copy_n[i]);
    } else {
        if (z->copy_bf16[i]) {
            float* wide = (float*)z->copy_host[i];
            for (size_t k = 0; k < z->copy_n[i]; k++) { wide[k] = precision__float((uint32_t)z->copy_bf16[i][k] << 16); }
        }
        if (z->copy_n[i] > 0) { dev_copy_h2d(z->ctx, z->copy_dev[i], z->copy_host[i], z->copy_n[i] * sizeof(float)); }
    }
    z->wait_seconds += now_seconds() - t0;
    int last = z->num_pending - 1;
    z->pending[i] = z->pending[last];
    z->pending_bucket[i] = z->pending_bucket[last];
    z->copy_dev[i] = z->copy_dev[last]; z->copy_host[i] = z->copy_host[last]; z->copy_n[i] = z->copy_n[last];
    z->copy_bf16[i] = z->copy_bf16[last];
    z->nccl_req[i] = z->nccl_req[last];
    z->num_pending--;
}

// Gives in-flight reductions a chance to progress (MPI progresses non-blocking collectives only inside MPI calls).
static void zero_progress(ZeroOptimizer* z) {
    for (int i = 0; i < z->num_pending; i++) { comm_test(&z->pending[i]); }
}

// Waits until the reduction of this bucket (if any is in flight) is complete, so its buffer may be reused.
static void zero_wait_bucket(ZeroOptimizer* z, int bucket) {
    for (int i = 0; i < z->num_pending; i++) {
        if (z->pending_bucket[i] == bucket) { zero_wait_index(z, i); return; }
    }
}

static void zero_wait_all(ZeroOptimizer* z) {
    while (z->num_pending > 0) { zero_wait_index(z, z->num_pending - 1); }
}

// The gradient of the owned range after the reduction: in the full buffer for stages 0 and 1, gshard for 2 and 3.
static float* zero_owned_grads(ZeroOptimizer* z, float* full_grads) {
    return z->stage >= 2 ? z->gshard : full_grads + z->lo;
}

// Global squared L2 norm of the reduced gradient (padding is zero and adds nothing). Exact across shard boundaries:
// each rank sums its owned range in double, then one all-reduce. ranges (NULL: everything): only the parts of the
// owned range inside these nranges [lo, hi) flat ranges count (tensor parallelism: the ranks other than 0 of a
// tensor-parallel group leave out the replicated tensors, so that the sum over the group counts them once).
static double zero_grad_sumsq(ZeroOptimizer* z, float* full_grads, const size_t (*ranges)[2], int nranges) {
    dev_zero(z->ctx, z->scalars, sizeof(double));
    float* owned = zero_owned_grads(z, full_grads);
    if (!ranges) { sum_squares_accumulate(z->ctx, z->scalars, owned, z->hi - z->lo); }
    for (int i = 0; ranges && i < nranges; i++) {
        size_t s = ranges[i][0] > z->lo ? ranges[i][0] : z->lo, e = ranges[i][1] < z->hi ? ranges[i][1] : z->hi;
        if (s < e) { sum_squares_accumulate(z->ctx, z->scalars, owned + (s - z->lo), e - s); }
    }
    double s;
    dev_copy_d2h(z->ctx, &s, z->scalars, sizeof(double));
    dev_sync(z->ctx);
    if (z->stage != 0) { comm_allreduce_sum_f64(z->group, &s, 1); }
    return s;
}

// ----------------------------------------------------------------------------
// Stage 3: gathering parameters. The compute copy of a flat range [lo, hi) is spread over the ranks that own its
// parts; an all-gather with those parts' sizes as counts assembles it, in rank order, which is flat order.

typedef struct {
    CommRequest req;
    CommNcclReq nreq;  // with nccl (req then stays zeroed)
    floatX* dest;   // where the range goes (device memory); NULL: nothing in flight
    void* host;     // staged: the range's host buffer, copied to dest when the gather is waited for
    size_t n;       // elements
} ZeroGather;

// Starts gathering the compute copy of [lo, hi) into dest (dest[0] is element lo) from the owners' shards (shard:
// this rank's owned range, S elements). Staged: through host (room for hi - lo elements). The buffers must stay
// untouched until zero_gather_wait.
static void zero_igather_range(ZeroOptimizer* z, const floatX* shard, floatX* dest, void* host, size_t lo, size_t hi,
                               ZeroGather* g) {
    if (z->stage != 3 || hi > z->n_pad || lo > hi) { fatal("internal: zero_igather_range [%zu, %zu) at stage %d", lo, hi, z->stage); }
    size_t counts[ZERO_MAX_RANKS];
    zero__bucket_counts(z, lo, hi, counts);
    for (int r = 0; r < z->size; r++) { counts[r] *= sizeof(floatX); }
    size_t own_s = lo > z->lo ? lo : z->lo, own_e = hi < z->hi ? hi : z->hi;
    const floatX* mine = own_s < own_e ? shard + (own_s - z->lo) : shard;
    g->dest = dest;
    g->host = NULL;
    g->n = hi - lo;
    if (z->staged) {
        g->host = host;
        char* at = (char*)host + (own_s < own_e ? own_s - lo : 0) * sizeof(floatX);
        if (own_s < own_e) { dev_copy_d2h(z->ctx, at, mine, (own_e - own_s) * sizeof(floatX)); }
        dev_sync(z->ctx);
        comm_iallgatherv_bytes(z->group, at, host, counts, &g->req);
        return;
    }
    if (z->nccl) {
        memset(&g->req, 0, sizeof(g->req));
        comm_nccl_iallgatherv_bytes(z->nccl, z->ctx, mine, dest, counts, &g->nreq);
        return;
    }
#ifdef KERNELS_CUDA
    fatal("internal: unstaged collectives on device buffers need NCCL, which this build does not have");
#else
    comm_iallgatherv_bytes(z->group, mine, dest, counts, &g->req);
#endif
}

static void zero_gather_wait(ZeroOptimizer* z, ZeroGather* g) {
    if (!g->dest) { return; }
    double t0 = now_seconds();
    comm_wait(&g->req);
    if (z->nccl) { comm_nccl_wait(z->ctx, &g->nreq); }
    if (g->host) { dev_copy_h2d(z->ctx, g->dest, g->host, g->n * sizeof(floatX)); }
    g->dest = NULL;
    z->gather_seconds += now_seconds() - t0;
}

// AdamW on the owned range, one kernel call for all its tensors (a tensor that crosses a shard boundary is split
// by the kernel, so the decay mask is exact however the shards fall). Then (stages 1, 2) the compute copy of the
// parameters is all-gathered. hp->grad_scale carries clipping and the loss scale's inverse. params: the whole flat
// compute copy (n_pad), or under stage 3 the owned range only (S).
static void zero_adamw_step(ZeroOptimizer* z, floatX* params, float* full_grads, const AdamWHyper* hp) {
    floatX* owned = z->stage == 3 ? params : params + z->lo;
    adamw_update(z->ctx, owned, z->master, zero_owned_grads(z, full_grads), z->m, z->v, z->lo, z->hi, z->segments,
                 z->num_segments, hp);
    if (z->stage == 0 || z->stage == 3) { return; }
    if (z->staged) {
        // the compute copy (floatX) all-gathered through the host: an all-gather only moves bytes, so 16-bit elements
        // travel as floats, two to a float (the shard is a multiple of 16 elements)
        size_t shard_bytes = z->shard * sizeof(floatX);
        char* host = (char*)z->host_params;
        dev_copy_d2h(z->ctx, host + z->lo * sizeof(floatX), params + z->lo, shard_bytes);
        dev_sync(z->ctx);
        comm_allgather_f32(z->group, (float*)(void*)(host + z->lo * sizeof(floatX)), (float*)z->host_params, shard_bytes / sizeof(float));
        dev_copy_h2d(z->ctx, params, host, z->n_pad * sizeof(floatX));
        return;
    }
    if (z->nccl) {
        CommNcclReq r;
        memset(&r, 0, sizeof(r));
        comm_nccl_iallgather_inplace_bytes(z->nccl, z->ctx, params, z->shard * sizeof(floatX), &r);
        comm_nccl_wait(z->ctx, &r);
        return;
    }
#ifdef KERNELS_CUDA
    fatal("internal: unstaged collectives on device buffers need NCCL, which this build does not have");
#else
    comm_allgather_f32(z->group, params + z->lo, params, z->shard);
#endif
}

#endif // ZERO_H
