/*
tests/cuda_emu/cuda_emu.h: runs the CUDA backend (kernels.cuh, comm_nccl.h, and train_gpt.c / test_gpt.c built on
them) on the CPU, so that its logic is tested on machines without a GPU: `make test_gpt_emu train_gpt_emu`.

What it is: the CUDA runtime calls the backend makes, cuBLASLt's matmul (descriptors, heuristic query, the
BIAS / GELU_AUX / DGELU epilogues), cub's radix sort and, over MPI, the NCCL collectives (nccl_emu.h), written
again for host memory; plus an executor for kernels. scripts/cuda_emu_build.sh rewrites each `k<<<grid, block,
smem, stream>>>(args)` into `emu_launch("k", k, grid, block, smem, stream)(args)`; the build force-includes this
header and compiles the rewritten sources with g++ (no nvcc, no driver, no GPU).

How a kernel runs: the blocks of the grid one after another; inside a block every thread is a fiber (ucontext) with
its own stack, run until it reaches a synchronisation point:
  __syncthreads()              every live thread of the block must arrive (a thread that returned first is an error:
                               on a GPU that is undefined behaviour, usually a hang)
  __shfl*_sync / __syncwarp    every lane named in the mask must arrive, with the same operation; a lane that
                               returned, a mask naming lanes past the block's end, or reading a lane outside the
                               mask is an error
__shared__ variables become function statics, which the threads of a block share (blocks run one at a time);
rewrite.sh makes each an emu::Shared<TYPE[DIMS]>, whose elements are reached through a checking proxy (below).

What it checks beyond the results (each failure names the kernel, block and thread, or the call):
  - every pointer argument of a kernel lies in device memory (cudaMalloc), never in host or pinned memory, and so
    does every prefetch's extent (kernels.cuh's KERNELS_PREFETCH_ACCESS hook);
  - each allocation is fenced by guard bytes, verified after every kernel, matmul and copy: a write past either end
    names the kernel and the allocation's size; fresh device memory is filled with 0xff (NaN in every float type),
    as cudaMalloc leaves garbage;
  - cudaMemcpy directions and extents against the allocations; launch configurations against the hardware's
    limits (a bad one is reported by cudaGetLastError, as on a GPU);
  - shared memory: an index past a __shared__ array's end, and RACES: two threads of a block touching one element,
    at least one of them writing, with no __syncthreads between them (nor a __syncwarp, for two lanes of one warp).
    Each element remembers its last write and last read (thread, barrier epoch, warp epoch); an access not ordered
    after them is reported with both threads, whatever order the fibers happened to run in; and a read of an element
    no thread of the block has written (a block's shared memory starts undefined on a GPU; here it would hold what
    an earlier block left);
  - cuBLASLt: layouts consistent with the op's m, n, k and leading dimensions, attribute sizes, the epilogues'
    documented constraints (auxiliary leading dimension a multiple of 8 and at least m), pointers at least as
    aligned as the alignments promised to the heuristic, every operand's extent inside its allocation.

Graphs (cudaStreamBeginCapture .. cudaStreamEndCapture, cudaGraphInstantiate, cudaGraphLaunch): a capturing stream's
work is kept in order instead of queued, and each launch queues all of it again with the arguments of the capture.
What CUDA refuses during a capture stops the emulation: a synchronisation (stream, device, event), a blocking copy or
memset, a copy between the device and pageable host memory, work on the legacy default stream, a cudaFree; events
recorded or waited on inside a capture are not emulated (also a stop).

What it does not model: concurrency beyond that. Races through global memory between threads or blocks are invisible
here (except as a dependence on the order blocks and threads run in: CUDA_EMU_ORDER below), and so is warp-synchronous code that assumes lanes run in lockstep, and performance. Fast-math intrinsics are computed exactly. Those stay for the GPU check.

CUDA_EMU_NO_EPILOGUE=1 makes the heuristic find no algorithm for the GELU and bias-gradient epilogues, and =2 makes
cublasLtMatmul refuse them (CUBLAS_STATUS_NOT_SUPPORTED) after the heuristic offered one (the fallback paths' tests).
CUDA_EMU_ORDER=reverse runs each grid's blocks, and each block's threads, from the last to the first (run_grid,
sched_thread): a kernel that depends on the order they run in, which a GPU does not keep, then gives other bits
(scripts/gpu_check.sh --emu runs its second determinism run and the op tests' race check that way).
CUDA_EMU_MEM_GB=X makes the device X GB (16 by default): cudaMalloc past it fails with cudaErrorMemoryAllocation.
CUDA_EMU_BUS_ID=X gives every process the same PCI bus id X (cudaDeviceGetPCIBusId): processes sharing one GPU, as
on a one-GPU machine, where NCCL refuses a communicator between them (unless each process is a host of its own to
NCCL, NCCL_HOSTID: nccl_emu.h). Unset, each process is a GPU of its own.
CUDA_EMU_NCCL_VERSION=N makes the emulated NCCL report version N and follow that version's rules (nccl_emu.h).
*/
#ifndef CUDA_EMU_H
#define CUDA_EMU_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <ucontext.h>
#include <math.h>
#include <cmath>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <algorithm>
#include <functional>
#include <pthread.h>
#include <map>
#include <memory>
#include <string>
#include <time.h>
#include <tuple>
#include <type_traits>
#include <vector>

// Device code is host code here; shared memory is a function static, shared by the block that is running.
#undef __shared__
#define __shared__ static
#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __launch_bounds__
#define __launch_bounds__(...) // (a register budget for nvcc; the emulation has none)

namespace emu {

// ---------------------------------------------------------------------------------------------------------------
// Failures: one line naming what went wrong and where, then abort (the test harness sees the crash).

struct Fiber;
static const char* g_kernel = NULL; // the kernel running, NULL outside one
static uint3 g_block_idx;
static dim3 g_block_dim, g_grid_dim;
static Fiber* g_cur = NULL;
static uint3 emu__tid_of(const Fiber* f);

static void fail(const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (g_kernel && g_cur) {
        uint3 t = emu__tid_of(g_cur);
        fprintf(stderr, "cuda_emu: %s (kernel %s, block (%u,%u,%u), thread (%u,%u,%u))\n", msg, g_kernel, g_block_idx.x,
                g_block_idx.y, g_block_idx.z, t.x, t.y, t.z);
    } else if (g_kernel) {
        fprintf(stderr, "cuda_emu: %s (kernel %s)\n", msg, g_kernel);
    } else {
        fprintf(stderr, "cuda_emu: %s\n", msg);
    }
    fflush(stderr);
    abort();
}

// ---------------------------------------------------------------------------------------------------------------
// Memory: every allocation is registered with its kind and fenced by guard bytes.

enum { MEM_DEVICE = 0, MEM_PINNED = 1 };
#define EMU_GUARD 256
#define EMU_GUARD_BYTE 0xa5

struct Alloc { size_t size; int kind; };
static std::map<uintptr_t, Alloc> g_allocs; // keyed by the user pointer
static size_t g_device_bytes = 0;
// The emulated device's memory: CUDA_EMU_MEM_GB (default 16); cudaMalloc past it fails as a GPU's does
static size_t device_total(void) {
    static size_t total = 0;
    if (!total) {
        const char* e = getenv("CUDA_EMU_MEM_GB");
        double gb = e ? atof(e) : 16.0;
        total = (size_t)((gb > 0 ? gb : 16.0) * (double)(1u << 30));
    }
    return total;
}
static size_t device_free(void) { return device_total() > g_device_bytes ? device_total() - g_device_bytes : 0; }

static void* mem_alloc(size_t size, int kind) {
    size_t total = (size + 2 * EMU_GUARD + 255) / 256 * 256;
    // Allocations of 2 MB or more on 2 MB pages where the kernel allows it (transparent huge pages on request): the
    // fill below touches every page, and a short emulated run spent a tenth of its time in first-touch faults on 4 KB
    // pages (24.8k faults; 4.4k on 2 MB pages)
    size_t huge = (size_t)2 << 20, rounded = (total + huge - 1) / huge * huge;
    unsigned char* raw = (unsigned char*)(total >= huge ? aligned_alloc(huge, rounded) : aligned_alloc(256, total));
    if (raw && total >= huge) { madvise(raw, rounded, MADV_HUGEPAGE); }
    if (!raw) { fail("out of host memory for a %zu-byte allocation", size); }
    memset(raw, EMU_GUARD_BYTE, EMU_GUARD);
    memset(raw + EMU_GUARD + size, EMU_GUARD_BYTE, total - EMU_GUARD - size);
    memset(raw + EMU_GUARD, kind == MEM_DEVICE ? 0xff : 0, size); // device memory starts as garbage: NaN everywhere
    g_allocs[(uintptr_t)(raw + EMU_GUARD)] = Alloc{size, kind};
    if (kind == MEM_DEVICE) { g_device_bytes += size; }
    return raw + EMU_GUARD;
}

// The allocation holding p (p may be its end), or NULL.
static const Alloc* mem_find(const void* p, uintptr_t* base) {
    uintptr_t u = (uintptr_t)p;
    auto it = g_allocs.upper_bound(u);
    if (it == g_allocs.begin()) { return NULL; }
    --it;
    if (u > it->first + it->second.size) { return NULL; }
    *base = it->first;
    return &it->second;
}

static const char* kind_name(int kind) { return kind == MEM_DEVICE ? "device" : "pinned host"; }

// [p, p + bytes) must lie inside one allocation of the given kind (-1: any kind; -2: none, i.e. plain host memory).
static void mem_check(const void* p, size_t bytes, int kind, const char* what) {
    uintptr_t base = 0;
    const Alloc* a = mem_find(p, &base);
    if (kind == -2) {
        if (a && a->kind == MEM_DEVICE) { fail("%s: %p is device memory, where host memory was expected", what, p); }
        return;
    }
    if (!a) { fail("%s: %p is not %s memory", what, p, kind == MEM_DEVICE ? "device" : "CUDA-allocated"); }
    if (kind >= 0 && a->kind != kind) { fail("%s: %p is %s memory, where %s memory was expected", what, p, kind_name(a->kind), kind_name(kind)); }
    if ((uintptr_t)p + bytes > base + a->size) {
        fail("%s: %zu bytes at offset %zu run past the end of a %zu-byte %s allocation", what, bytes, (size_t)((uintptr_t)p - base),
             a->size, kind_name(a->kind));
    }
}

static void mem_check_guards(const char* after) {
    for (auto& e : g_allocs) {
        const unsigned char* p = (const unsigned char*)e.first;
        size_t size = e.second.size;
        size_t tail = (size + 2 * EMU_GUARD + 255) / 256 * 256 - EMU_GUARD - size;
        for (size_t i = 0; i < EMU_GUARD; i++) {
            if (p[-(ptrdiff_t)EMU_GUARD + (ptrdiff_t)i] != EMU_GUARD_BYTE) {
                fail("%s wrote %zu bytes before the start of a %zu-byte %s allocation", after, EMU_GUARD - i, size, kind_name(e.second.kind));
            }
        }
        for (size_t i = 0; i < tail; i++) {
            if (p[size + i] != EMU_GUARD_BYTE) {
                fail("%s wrote past the end of a %zu-byte %s allocation (at byte %zu)", after, size, kind_name(e.second.kind), size + i);
            }
        }
    }
}

static void mem_free(void* p, int kind, const char* what) {
    if (!p) { return; }
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end()) { fail("%s(%p): not the start of a live allocation", what, p); }
    if (it->second.kind != kind) { fail("%s(%p): the pointer is %s memory", what, p, kind_name(it->second.kind)); }
    mem_check_guards(what);
    if (kind == MEM_DEVICE) { g_device_bytes -= it->second.size; }
    g_allocs.erase(it);
    free((unsigned char*)p - EMU_GUARD);
}

// A vector access (kernels.cuh's 16-byte packs) must be aligned to its size: the device faults on one that is not
// ("misaligned address"), where the CPU would quietly do it. kernels.cuh calls this hook at each packed access.
static void emu_aligned_access(const void* p, size_t bytes) {
    if ((uintptr_t)p % bytes != 0) { fail("a %zu-byte vector access at %p, which is not %zu-byte aligned (a GPU faults: misaligned address)", bytes, p, bytes); }
}
#define KERNELS_ALIGNED_ACCESS(p, bytes) emu::emu_aligned_access((const void*)(p), (size_t)(bytes))
// a prefetch (kernels__prefetch_l2): its bytes inside one device allocation
#define KERNELS_PREFETCH_ACCESS(p, bytes) emu::mem_check((const void*)(p), (size_t)(bytes), emu::MEM_DEVICE, "a prefetch")

// ---------------------------------------------------------------------------------------------------------------
// Kernel execution. A block's threads run on workers (fibers: a stack and saved registers). A worker runs thread
// after thread until one reaches a synchronisation point; that thread keeps the worker (it is suspended there) and
// a fresh worker starts the next thread. A kernel without synchronisation thus runs every thread of a block on one
// worker as plain calls, and one that synchronises gets a worker per thread.

enum { F_NEW, F_RUN, F_AT_BLOCK, F_AT_WARP, F_DONE };
enum { OP_SYNCWARP = 1, OP_SHFL, OP_WMMA };
static const char* op_name(int op) { return op == OP_SYNCWARP ? "__syncwarp" : op == OP_SHFL ? "a shuffle" : "a wmma operation"; }
#define EMU_STACK ((size_t)64 << 10)

// The switch between workers: on x86-64 a few instructions that swap the callee-saved registers and the stack
// pointer (ucontext's swapcontext also saves the signal mask: a system call per switch); elsewhere ucontext. It
// leaves by an indirect jump, not `ret`: a `ret` into another stack than the one that called is always mispredicted
// (the processor's return-address stack holds this stack's caller), which cost a quarter of the emulation's time.
#if defined(__x86_64__)
#define EMU_FAST_SWITCH 1
extern "C" void emu_switch(void** save_sp, void* load_sp);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch,@function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  popq %rcx\n  jmp *%rcx\n"
        ".size emu_switch, .-emu_switch\n");
#endif

struct Worker {
#ifdef EMU_FAST_SWITCH
    void* sp;
#else
    ucontext_t uc;
#endif
    char* stack;
    int busy;
};

struct Fiber { // one CUDA thread of the running block
    unsigned linear; // threadIdx.x + threadIdx.y * blockDim.x + ...
    int state;
    unsigned shuffles; // shuffles done (the parity picks the exchange slot)
    Worker* worker;  // the worker it runs (or is suspended) on
};

#ifdef EMU_FAST_SWITCH
static void* g_sched_sp;
#else
static ucontext_t g_sched;
#endif
static std::vector<Fiber> g_fibers;
static std::vector<Worker*> g_free_workers; // idle workers, their stacks kept for reuse
static Worker* g_cur_worker = NULL;
static unsigned g_next = 0, g_n = 0; // the next thread of the block to start; the block's thread count
// CUDA_EMU_ORDER=reverse (read by run_grid): 1 runs a grid's blocks, and each block's threads, from the last to the
// first; 0 in index order; -1 not read yet
static int g_reverse = -1;
// The thread at scheduling position p (threads start, and resume after a suspension, in position order): p, or
// n - 1 - p reversed. Its own inverse: it also gives a thread's position.
static inline unsigned sched_thread(unsigned p) { return g_reverse == 1 ? g_n - 1 - p : p; }
static std::function<void()>* g_body = NULL;
// The shuffle values of the block's threads: two slots each, used alternately, so one rendezvous per shuffle is
// enough (a lane writes a slot again only two shuffles later, after every lane of its warp passed the shuffle in
// between, and so has read this one)
static std::vector<uint64_t> g_exchange;
struct WarpWait { unsigned waiting, mask; int op; uint64_t args; }; // the lanes waiting at a warp operation, and which
static std::vector<WarpWait> g_warp_wait;
// Happens-before for the race checker: blocks are numbered as they run, and within the running block barriers
// (__syncthreads) and each warp's __syncwarp count up.
static uint64_t g_block_serial = 0;
static uint32_t g_bar_epoch = 0;
static std::vector<uint32_t> g_warp_epoch;

static uint3 emu__tid_of(const Fiber* f) {
    uint3 t;
    t.x = f->linear % g_block_dim.x;
    t.y = (f->linear / g_block_dim.x) % g_block_dim.y;
    t.z = f->linear / (g_block_dim.x * g_block_dim.y);
    return t;
}

static Worker* worker_start(void);

// Leaves the running worker (its thread suspended at a synchronisation point, or the worker idle) for the next thing
// to run, without a detour through the scheduler where one can be found: the next thread of the block, after the
// running one, that is ready to resume; else a fresh worker for the next thread not yet started; else the
// scheduler, which releases barriers and starts the next pass. The order is the scheduler's own (its pass resumes
// ready threads in index order), with half the switches: a warp's rendezvous costs one switch per lane, not two.
static void suspend(void) {
    Worker* me = g_cur_worker;
    Worker* to = NULL;
    Fiber* next = NULL;
    for (unsigned p = g_cur ? sched_thread(g_cur->linear) + 1 : g_next; p < g_next; p++) { // (g_next <= g_n: the positions started)
        Fiber* f = &g_fibers[sched_thread(p)];
        if (f->state == F_RUN && f->worker) { next = f; to = next->worker; break; }
    }
    if (!to && g_next < g_n) { to = worker_start(); }
    g_cur = next;
    g_cur_worker = to;
#ifdef EMU_FAST_SWITCH
    emu_switch(&me->sp, to ? to->sp : g_sched_sp);
#else
    swapcontext(&me->uc, to ? &to->uc : &g_sched);
#endif
}

static void worker_entry(void) {
    Worker* me = g_cur_worker;
    while (g_next < g_n) {
        Fiber* t = &g_fibers[sched_thread(g_next++)];
        t->worker = me;
        t->state = F_RUN;
        g_cur = t;
        (*g_body)();
        t->state = F_DONE;
    }
    me->busy = 0;
    g_free_workers.push_back(me);
    g_cur_worker = me;
    suspend(); // never resumed
}

static Worker* worker_start(void) {
    Worker* w;
    if (!g_free_workers.empty()) {
        w = g_free_workers.back();
        g_free_workers.pop_back();
    } else {
        w = new Worker;
        w->stack = (char*)malloc(EMU_STACK);
    }
    w->busy = 1;
#ifdef EMU_FAST_SWITCH
    // the first switch "returns" into worker_entry with the stack as after a call (rsp = 8 mod 16 at entry)
    uintptr_t top = ((uintptr_t)w->stack + EMU_STACK) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = NULL;                 // worker_entry's return address: it never returns
    *--sp = (void*)worker_entry;  // popped by emu_switch, which jumps to it
    for (int i = 0; i < 6; i++) { *--sp = NULL; } // rbp, rbx, r12-r15
    w->sp = sp;
#else
    getcontext(&w->uc);
    w->uc.uc_stack.ss_sp = w->stack;
    w->uc.uc_stack.ss_size = EMU_STACK;
    w->uc.uc_link = NULL;
    makecontext(&w->uc, worker_entry, 0);
#endif
    return w;
}

static void resume(Worker* w, Fiber* t) {
    g_cur_worker = w;
    g_cur = t;
#ifdef EMU_FAST_SWITCH
    emu_switch(&g_sched_sp, w->sp);
#else
    swapcontext(&g_sched, &w->uc);
#endif
}

// Warp w's lanes that exist in a block of n threads, as a mask.
static unsigned warp_lanes(unsigned w, unsigned n) {
    unsigned first = w * 32, cnt = n - first < 32 ? n - first : 32;
    return cnt == 32 ? 0xffffffffu : ((1u << cnt) - 1);
}

// Called when no thread can run. A warp rendezvous completes as its last lane arrives (warp_wait), so one still
// waiting here never will: that is reported when a lane it needs has returned, or its mask names lanes past the
// block. Releases the block barrier when every thread waits at it; returns 0 when nothing could be released (a
// deadlock, reported by the caller).
static void unwritten_check(void); // (shared memory, below)
static int release(unsigned n) {
    for (unsigned w = 0; w * 32 < n; w++) {
        const WarpWait* ww = &g_warp_wait[w];
        if (!ww->waiting) { continue; }
        g_cur = &g_fibers[w * 32 + __builtin_ctz(ww->waiting)];
        if (ww->mask & ~warp_lanes(w, n)) { fail("warp operation with mask %08x names lanes past the block's %u threads", ww->mask, n); }
        for (unsigned l = 0; l < 32; l++) {
            if ((ww->mask & (1u << l)) && g_fibers[w * 32 + l].state == F_DONE) {
                fail("warp operation (mask %08x) waits for lane %u, which has returned", ww->mask, l);
            }
        }
    }
    int at_block = 0, done = 0;
    for (unsigned i = 0; i < n; i++) {
        at_block += g_fibers[i].state == F_AT_BLOCK;
        done += g_fibers[i].state == F_DONE;
    }
    if (at_block > 0 && at_block + done == (int)n) {
        if (done > 0) {
            for (unsigned i = 0; i < n; i++) {
                if (g_fibers[i].state == F_DONE) { g_cur = &g_fibers[i]; break; }
            }
            fail("__syncthreads() reached by %d threads while %d have returned (this one among them)", at_block, done);
        }
        for (unsigned i = 0; i < n; i++) { g_fibers[i].state = F_RUN; }
        unwritten_check();
        g_bar_epoch++;
        return 1;
    }
    return 0;
}

static void run_block(unsigned n) {
    g_fibers.resize(n);
    g_exchange.assign(2 * (size_t)n, 0);
    g_warp_wait.assign((n + 31) / 32, WarpWait{0, 0, 0, 0});
    g_block_serial++;
    g_bar_epoch = 0;
    g_warp_epoch.assign((n + 31) / 32, 0);
    for (unsigned i = 0; i < n; i++) {
        Fiber* f = &g_fibers[i];
        f->linear = i;
        f->state = F_NEW;
        f->shuffles = 0;
        f->worker = NULL;
    }
    g_next = 0;
    g_n = n;
    for (;;) {
        while (g_next < n) { resume(worker_start(), NULL); } // runs threads until one suspends (or all are done)
        int resumed = 0, live = 0;
        for (unsigned p = 0; p < n; p++) {
            Fiber* f = &g_fibers[sched_thread(p)];
            if (f->state == F_RUN) { resume(f->worker, f); resumed = 1; }
            live += f->state != F_DONE;
        }
        if (!live) { break; }
        if (resumed) { continue; }
        if (!release(n)) {
            for (unsigned i = 0; i < n; i++) {
                if (g_fibers[i].state != F_DONE) { g_cur = &g_fibers[i]; break; }
            }
            fail("deadlock: threads wait at synchronisation points that can never complete (this one at %s)",
                 g_cur->state == F_AT_BLOCK ? "__syncthreads" : "a warp operation");
        }
    }
    unwritten_check();
    g_cur = NULL;
    g_cur_worker = NULL;
}

static cudaError_t g_last_error = cudaSuccess;

// CUDA_EMU_PROFILE=1: the time spent in each kernel (and cuBLASLt), printed at exit, to see where emulation goes
static std::map<std::string, std::pair<double, long>> g_profile;
static int g_profile_on = -1;
static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static void profile_print(void) {
    std::vector<std::pair<double, std::string>> v;
    for (auto& e : g_profile) { v.push_back({e.second.first, e.first}); }
    std::sort(v.rbegin(), v.rend());
    for (auto& e : v) { fprintf(stderr, "cuda_emu profile: %9.3f s %8ld calls  %s\n", e.first, g_profile[e.second].second, e.second.c_str()); }
}
static void profile_add(const char* name, double t0) {
    if (g_profile_on < 0) {
        const char* e = getenv("CUDA_EMU_PROFILE");
        g_profile_on = e && atoi(e);
        if (g_profile_on) { atexit(profile_print); }
    }
    if (!g_profile_on) { return; }
    auto& p = g_profile[name];
    p.first += now_s() - t0;
    p.second++;
}

// ---------------------------------------------------------------------------------------------------------------
// Streams. Work given to a stream (kernels, asynchronous copies and memsets, matmuls, sorts) is queued, not done,
// and runs in order only when the host has to see it: cudaStreamSynchronize, cudaEventSynchronize (the stream of the
// event, up to its record), cudaDeviceSynchronize, cudaFree, a blocking cudaMemcpy, a copy into pageable host
// memory (which CUDA performs before returning), or a stream that waits on an event (up to that record, before the
// waiting stream's later work). So host code that reuses a pinned buffer before its copy ran, reads a result before
// synchronising, or a stream that uses another's result without waiting on its event computes with stale data here,
// as a GPU might, instead of being hidden by synchronous execution. NCCL calls run at their call, after everything
// queued before them on their stream (so the MPI calls behind them keep the host's order on every rank).
// CUDA_EMU_SYNC=1 runs all work at the call instead (to tell an ordering bug from another).

struct EmuStream {
    std::vector<std::function<void()>> q; // queued work; q[done - base ...] not yet run
    uint64_t queued = 0, done = 0, base = 0;
    std::map<EmuStream*, uint64_t> after;  // work queued here from now on follows these streams' work up to there
                                           // (cudaStreamWaitEvent, and what the waited stream followed)
    uint64_t synced = 0;                   // the host has synchronised with this stream up to there
    std::vector<std::function<void()>>* capture = nullptr; // capturing a graph (cudaStreamBeginCapture): work goes there
};
// An event also takes the device clock's time when its stream reaches it (stamp; NaN until then), unless made with
// cudaEventDisableTiming. The device clock is virtual (g_vclock_ms): only cuBLASLt's products advance it, by a cost
// set per algorithm (cublaslt_emu.h), so that timings, and what is chosen by them, repeat exactly.
struct EmuEvent { EmuStream* stream; uint64_t at; bool timing; std::shared_ptr<double> stamp; };
static double g_vclock_ms = 0.0;
static EmuStream g_null_stream;
static std::vector<EmuStream*> g_streams = {&g_null_stream};
static int g_sync_mode = -1;

static EmuStream* stream_of(cudaStream_t s) { return s ? (EmuStream*)s : &g_null_stream; }
// Streams capturing a graph: what CUDA refuses meanwhile (a synchronisation, a blocking copy, an event of the
// capture; a copy from pageable host memory, whose data a graph cannot take at the call) stops the emulation here.
static int g_capturing = 0;
static void no_capture(const char* what) {
    if (g_capturing > 0) { fail("%s while a stream captures a graph: CUDA refuses it (cudaErrorStreamCaptureUnsupported)", what); }
}

// Runs s's queued work up to (not including) position `upto`.
static void stream_run(EmuStream* s, uint64_t upto) {
    while (s->done < upto && s->done < s->queued) {
        std::function<void()> f = std::move(s->q[s->done - s->base]);
        s->done++;
        f();
    }
    if (s->done == s->queued) { s->q.clear(); s->base = s->done; }
}
static void stream_run_all(EmuStream* s) { stream_run(s, s->queued); }
static void host_synced(EmuStream* s, uint64_t at);
static void device_run_all(void) {
    for (int again = 1; again;) { // a stream's work may wait on another's: until every queue is empty
        again = 0;
        for (EmuStream* s : g_streams) {
            if (s->done < s->queued) { stream_run_all(s); again = 1; }
        }
    }
    for (EmuStream* s : g_streams) { host_synced(s, s->queued); }
}
// The host has seen s's work up to `at` complete (a synchronisation, a successful event query): work issued
// afterwards, on any stream, follows it.
static void host_synced(EmuStream* s, uint64_t at) { if (at > s->synced) { s->synced = at; } }
static const pthread_t g_host_thread = pthread_self(); // the thread that issues the device work (main's)

// Device memory an NCCL send reads. nccl_emu.h sends a copy made at the call; on a GPU the send reads the buffer until
// its peer has received it. So a copy or memset into that memory on another stream must follow the send in the
// device's order as the host issued it: after an event recorded behind the send that the writing stream waited on
// (directly or through another stream's wait), or after the host synchronised with the send's stream. Else a GPU may
// overwrite a message still in flight, which the copy hides here: the emulation stops instead. A kernel's or a
// cuBLASLt product's writes are not known in advance: the sends not ordered before one when it is issued are
// watched while it runs (their bytes hashed before and after), and a change stops the emulation the same way.
struct EmuPendingSend { const char* lo; const char* hi; EmuStream* s; uint64_t at; };
static std::vector<EmuPendingSend> g_pending_sends;
// (the send has run, as nccl_emu.h runs it at its call: an empty item gives it a place in its stream's order, run at
// once, so that an event recorded after it is complete as before)
static void pending_send(const void* p, size_t bytes, EmuStream* s) {
    s->q.push_back([]() {});
    s->queued++;
    stream_run_all(s);
    g_pending_sends.push_back({(const char*)p, (const char*)p + bytes, s, s->queued});
}
// The sends that work issued now on stream w is not ordered after (those the host has seen complete are dropped).
typedef std::vector<std::pair<const char*, const char*>> EmuRanges;
static EmuRanges unordered_sends(EmuStream* w) {
    EmuRanges out;
    for (size_t i = 0; i < g_pending_sends.size();) {
        EmuPendingSend x = g_pending_sends[i];
        if (x.s->synced >= x.at) { g_pending_sends[i] = g_pending_sends.back(); g_pending_sends.pop_back(); continue; }
        auto a = w->after.find(x.s);
        int ordered = w == x.s || (a != w->after.end() && a->second >= x.at);
        if (!ordered) { out.push_back({x.lo, x.hi}); }
        i++;
    }
    return out;
}
static void send_overwritten(const char* what, const char* lo, const char* hi) {
    fail("%s: a write into device memory [%p, +%zu) that an NCCL send on another stream may still be reading: "
         "the writing stream does not wait for the send's completion (an event recorded after it), nor has the host "
         "synchronised with it", what, (const void*)lo, (size_t)(hi - lo));
}
static void write_check(const void* p, size_t bytes, EmuStream* w, const char* what) {
    const char *lo = (const char*)p, *hi = lo + bytes;
    for (const auto& r : unordered_sends(w)) {
        if (lo < r.second && r.first < hi) { send_overwritten(what, r.first, r.second); }
    }
}
static uint64_t bytes_hash(const char* lo, const char* hi) {
    uint64_t h = 14695981039346656037ull;
    for (const char* p = lo; p < hi; p++) { h = (h ^ (uint8_t)*p) * 1099511628211ull; }
    return h;
}
// Runs work issued when `watch` (unordered_sends at that moment) held, and stops if it changed any of those bytes.
static void run_watched(const EmuRanges& watch, const char* what, const std::function<void()>& work) {
    if (watch.empty()) { work(); return; }
    std::vector<uint64_t> before;
    for (const auto& r : watch) { before.push_back(bytes_hash(r.first, r.second)); }
    work();
    for (size_t i = 0; i < watch.size(); i++) {
        if (bytes_hash(watch[i].first, watch[i].second) != before[i]) { send_overwritten(what, watch[i].first, watch[i].second); }
    }
}

static void enqueue(cudaStream_t stream, std::function<void()> f) {
    if (g_sync_mode < 0) { const char* e = getenv("CUDA_EMU_SYNC"); g_sync_mode = e && atoi(e); }
    EmuStream* s = stream_of(stream);
    if (s->capture) { s->capture->push_back(std::move(f)); return; } // (run at each cudaGraphLaunch instead)
    if (g_capturing > 0 && s == &g_null_stream) { fail("work on the legacy default stream while a stream captures a graph"); }
    s->q.push_back(std::move(f));
    s->queued++;
    if (g_sync_mode) { stream_run_all(s); }
}

// Runs kernel `name` over the grid; body calls it with its arguments.
static void run_grid(const char* name, dim3 grid, dim3 block, std::function<void()>* body) {
    size_t threads = (size_t)block.x * block.y * block.z;
    g_kernel = name;
    g_grid_dim = grid;
    g_block_dim = block;
    g_body = body;
    double t0 = now_s();
    // CUDA_EMU_ORDER=reverse: the blocks from the last to the first (and in each block the threads: sched_thread).
    // A GPU runs blocks in any order, at once, and a block's warps likewise; a kernel whose result depends on the
    // order (a block reading what another writes, two threads writing one element, a thread reading global memory
    // another writes with no barrier between) gives other bits, or fails, when the order turns.
    if (g_reverse < 0) { const char* e = getenv("CUDA_EMU_ORDER"); g_reverse = e && strcmp(e, "reverse") == 0; }
    size_t nblocks = (size_t)grid.x * grid.y * grid.z;
    for (size_t k = 0; k < nblocks; k++) {
        size_t b = g_reverse ? nblocks - 1 - k : k;
        g_block_idx.x = (unsigned)(b % grid.x);
        g_block_idx.y = (unsigned)(b / grid.x % grid.y);
        g_block_idx.z = (unsigned)(b / ((size_t)grid.x * grid.y));
        run_block((unsigned)threads);
    }
    profile_add(name, t0);
    char what[160];
    snprintf(what, sizeof(what), "kernel %s", name);
    g_kernel = NULL;
    mem_check_guards(what);
}

// Pointer arguments must be device memory (or NULL).
template <class T> static void check_arg(const char* name, int i, const T& v) {
    if constexpr (std::is_pointer<T>::value) {
        if (v) {
            uintptr_t base;
            const Alloc* a = mem_find((const void*)v, &base);
            if (!a || a->kind != MEM_DEVICE) {
                fail("argument %d of kernel %s (%p) is %s, not device memory", i, name, (const void*)v, a ? "pinned host memory" : "host memory");
            }
        }
    }
}

template <class... P> struct Launch {
    const char* name;
    void (*kernel)(P...);
    dim3 grid, block;
    cudaStream_t stream;
    template <class... A> void operator()(A&&... a) {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
        size_t threads = (size_t)block.x * block.y * block.z;
        if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u ||
            grid.y > 65535 || grid.z > 65535) {
            fprintf(stderr, "cuda_emu: kernel %s launched with grid (%u,%u,%u), block (%u,%u,%u): an invalid configuration\n", name,
                    grid.x, grid.y, grid.z, block.x, block.y, block.z);
            g_last_error = cudaErrorInvalidConfiguration;
            return;
        }
        std::tuple<P...> args(std::forward<A>(a)...);
        int i = 0;
        std::apply([&](const auto&... v) { (check_arg(name, i++, v), ...); }, args);
        const char* nm = name;
        void (*k)(P...) = kernel;
        dim3 g = grid, b = block;
        EmuRanges watch = unordered_sends(stream_of(stream)); // (the sends it may not write, as issued)
        enqueue(stream, [nm, k, g, b, args, watch]() {
            std::function<void()> body = [&]() { std::apply(k, args); };
            char what[160];
            snprintf(what, sizeof(what), "kernel %s", nm);
            run_watched(watch, what, [&]() { run_grid(nm, g, b, &body); });
        });
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Warp operations

// A rendezvous of the lanes in mask at one warp operation. args: what every lane must pass alike (a wmma operation's
// kind, pointer, leading dimension and layout; 0 for the others).
static void warp_wait(unsigned mask, int op, uint64_t args = 0) {
    if (!g_cur) { fail("a warp operation outside a kernel"); }
    unsigned lane = g_cur->linear % 32;
    if (!(mask & (1u << lane))) { fail("warp operation with mask %08x called by lane %u, which the mask leaves out", mask, lane); }
    g_cur->state = F_AT_WARP;
    // the last lane to arrive completes the rendezvous at once and goes on; the others resume in the scheduler's
    // next pass (release() reports what can never complete)
    unsigned w = g_cur->linear / 32;
    WarpWait* ww = &g_warp_wait[w];
    if (ww->waiting == 0) { ww->op = op; ww->mask = mask; ww->args = args; }
    else if (ww->op != op || ww->mask != mask) {
        fail("lanes of one warp wait at different warp operations (%s with mask %08x here, %s with mask %08x on another lane)",
             op_name(op), mask, op_name(ww->op), ww->mask);
    } else if (ww->args != args) {
        fail("lanes of one warp reach %s with different arguments (its kind, pointer, leading dimension and layout must be the "
             "same in every lane)", op_name(op));
    }
    ww->waiting |= 1u << lane;
    if ((ww->waiting & mask) == mask && !(mask & ~warp_lanes(w, g_n))) {
        for (unsigned l = 0; l < 32; l++) {
            if (ww->waiting & (1u << l)) { g_fibers[w * 32 + l].state = F_RUN; }
        }
        ww->waiting = 0;
        // a __syncwarp of every lane orders the warp's shared-memory accesses (a shuffle or a wmma operation exchanges
        // registers and orders no memory); one of part of the warp is taken to order nothing (the race checker keeps
        // one epoch per warp, not per lane: stricter, never blind)
        if (op == OP_SYNCWARP && mask == warp_lanes(w, g_n)) { g_warp_epoch[w]++; }
        return;
    }
    suspend();
}

template <class T> static T shfl(unsigned mask, T v, unsigned src) {
    static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
    if (!g_cur) { fail("a shuffle outside a kernel"); }
    unsigned me = g_cur->linear, warp0 = me / 32 * 32, n = (unsigned)(g_exchange.size() / 2);
    size_t parity = (g_cur->shuffles++ & 1) * n;
    memcpy(&g_exchange[parity + me], &v, sizeof(T));
    warp_wait(mask, OP_SHFL);
    if (!(mask & (1u << src))) { fail("shuffle reads lane %u, which mask %08x leaves out", src, mask); }
    T r;
    memcpy(&r, &g_exchange[parity + warp0 + src], sizeof(T));
    return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Shared memory: `__shared__ float s[8][33];` becomes `static emu::Shared<float[8][33]> s("s");` (rewrite.sh), and
// s[i][j] a SharedRef that checks the index and records the access before it reads or writes the element.

struct SharedCell {
    uint64_t block;                 // the block that last touched it (g_block_serial); an older one counts as none
    int32_t w_thread, r_thread;     // last writer and last reader (-1: none in this block)
    uint32_t w_bar, w_warp;         // the barrier epoch and the writer's warp epoch at the write
    uint32_t r_bar, r_warp;         // the same at the read
    int r_many;                     // other threads read it too in the same barrier epoch: 1 all of the last
                                    // reader's warp (r_warp is then the latest read's warp epoch), 2 of several warps
    int unwritten;                  // read before any thread of the block wrote it (g_unwritten holds the read)
};

// Reads of shared elements no thread of the block had written yet. Each is either a race, when another thread's
// write in the same barrier epoch follows it unordered (reported as one at that write), or a read of what an earlier
// block left there (a block's shared memory starts undefined on a GPU), reported when a write ordered after it comes,
// at the next barrier, or at the block's end.
struct UnwrittenRead { SharedCell* c; const char* name; size_t i; unsigned thread; };
static std::vector<UnwrittenRead> g_unwritten;

// Whether thread t's access now comes after the recorded access of thread `was` (barrier epoch bar, warp epoch wep).
static int shared_ordered(int was, uint32_t bar, uint32_t wep, unsigned t) {
    if (was < 0 || (unsigned)was == t || g_bar_epoch > bar) { return 1; }
    return (unsigned)was / 32 == t / 32 && g_warp_epoch[t / 32] > wep;
}

static void shared_race(const char* name, size_t i, const char* now, int was, const char* then) {
    fail("shared-memory race on %s[%zu]: this thread %s it after thread %d %s it, with no __syncthreads between (nor a "
         "__syncwarp, within a warp)", name, i, now, was, then);
}

// An unwritten read that was no race: named with the thread that read (g_cur becomes it, for fail's location).
static void unwritten_fail(const SharedCell* c) {
    for (const UnwrittenRead& u : g_unwritten) {
        if (c && u.c != c) { continue; }
        g_cur = &g_fibers[u.thread];
        fail("read of %s[%zu] before any thread of the block wrote it: a block's shared memory starts undefined on a "
             "GPU (it holds what an earlier block left there)", u.name, u.i);
    }
}

// At a barrier, and at the block's end: a read still unwritten was no race (a write from now on is ordered after it).
static void unwritten_check(void) {
    if (!g_unwritten.empty()) { unwritten_fail(NULL); }
    // (none pending: the next block starts with an empty list)
}

static void shared_access(SharedCell* c, int write, const char* name, size_t i) {
    if (!g_cur) { fail("shared variable %s touched outside a kernel", name); }
    unsigned t = g_cur->linear;
    uint32_t wep = g_warp_epoch[t / 32];
    if (c->block != g_block_serial) { c->block = g_block_serial; c->w_thread = c->r_thread = -1; c->r_many = 0; c->unwritten = 0; }
    if (!write && c->w_thread < 0 && !c->unwritten) {
        c->unwritten = 1;
        g_unwritten.push_back(UnwrittenRead{c, name, i, t});
    }
    if (!shared_ordered(c->w_thread, c->w_bar, c->w_warp, t)) { shared_race(name, i, write ? "writes" : "reads", c->w_thread, "wrote"); }
    if (write) {
        // after every read: one reader as any access; readers of one warp (a wmma load: every lane reads the tile)
        // need a __syncwarp after the latest of them, or a barrier; readers of several warps need a barrier
        int ordered = c->r_many == 0 ? shared_ordered(c->r_thread, c->r_bar, c->r_warp, t)
                      : g_bar_epoch > c->r_bar || (c->r_many == 1 && (unsigned)c->r_thread / 32 == t / 32 && g_warp_epoch[t / 32] > c->r_warp);
        if (!ordered) { shared_race(name, i, "writes", c->r_thread, c->r_many ? "(and others) read" : "read"); }
        if (c->unwritten) { unwritten_fail(c); }
        c->w_thread = (int32_t)t; c->w_bar = g_bar_epoch; c->w_warp = wep;
        c->r_thread = -1; c->r_many = 0;
    } else if (c->r_thread < 0 || c->r_bar != g_bar_epoch) { // the first read since the last barrier
        c->r_thread = (int32_t)t; c->r_bar = g_bar_epoch; c->r_warp = wep; c->r_many = 0;
    } else { // another read in this barrier epoch: the latest reader is remembered, with whether readers span warps
        if ((unsigned)c->r_thread != t) { c->r_many = c->r_many == 2 || (unsigned)c->r_thread / 32 != t / 32 ? 2 : 1; }
        c->r_thread = (int32_t)t; c->r_warp = wep;
    }
}

template <class T> struct SharedPtr;

template <class T> struct SharedRef {
    T* p;
    SharedCell* c;
    const char* name;
    size_t i, n; // this element's index in the whole array, and the array's element count
    operator T() const { shared_access(c, 0, name, i); return *p; }
    SharedPtr<T> operator&() const { return SharedPtr<T>{p, c, name, i, n}; } // &s[i][j]: for wmma's loads and stores
    SharedRef& operator=(T v) { shared_access(c, 1, name, i); *p = v; return *this; }
    SharedRef& operator=(const SharedRef& o) { return *this = (T)o; }
    SharedRef& operator+=(T v) { T x = (T)*this; return *this = x + v; }
    SharedRef& operator-=(T v) { T x = (T)*this; return *this = x - v; }
    SharedRef& operator*=(T v) { T x = (T)*this; return *this = x * v; }
};

// &s[i][j]: a pointer into a shared array that keeps the checks: p[k] is checked against the whole array's end (a
// pointer may run across the inner dimensions, as in C) and recorded for the race checker. wmma's emulated
// load_matrix_sync / store_matrix_sync (tests/cuda_emu/include/mma.h) take these.
template <class T> struct SharedPtr {
    T* p;
    SharedCell* c;
    const char* name;
    size_t i, n;
    SharedRef<T> operator[](size_t k) const {
        if (i + k >= n) { fail("index %zu past the end of shared array %s (%zu elements)", i + k, name, n); }
        return SharedRef<T>{p + k, c + k, name, i + k, n};
    }
    const void* raw() const { return (const void*)p; }
};

// A (sub-)array of a Shared: indexing checks the bound and leads to the next dimension or to an element.
template <class A> struct SharedView {
    typedef typename std::remove_all_extents<A>::type T;
    typedef typename std::remove_extent<A>::type Sub;
    T* p;
    SharedCell* c;
    const char* name;
    size_t off, n; // the view's first element in the whole array, and the array's element count
    auto operator[](size_t i) const {
        if (i >= std::extent<A>::value) { fail("index %zu past the end of a dimension of %zu of shared array %s", i, (size_t)std::extent<A>::value, name); }
        constexpr size_t stride = sizeof(Sub) / sizeof(T);
        if constexpr (std::is_array<Sub>::value) { return SharedView<Sub>{p + i * stride, c + i * stride, name, off + i * stride, n}; }
        else { return SharedRef<T>{p + i, c + i, name, off + i, n}; }
    }
};

// Align: the declaration's __align__(Align), 0 for none. Without one the array starts at an address that is a
// multiple of its element's alignment and of nothing more that matters (alignof(T) past a multiple of 64): a GPU
// promises no more, so a wmma tile (32 bytes) in an array declared without __align__(32) is caught here.
template <class A, size_t Align = 0> struct Shared {
    typedef typename std::remove_all_extents<A>::type T;
    static constexpr size_t N = sizeof(A) / sizeof(T);
    static_assert(Align <= 64, "cuda_emu: __align__ above 64 is not emulated");
    alignas(64) unsigned char raw[sizeof(A) + 64];
    T* data;
    SharedCell cells[N];
    const char* name;
    explicit Shared(const char* nm) : data((T*)(raw + (Align ? 0 : alignof(T) % 64))), name(nm) { memset(cells, 0, sizeof(cells)); }
    auto operator[](size_t i) { return SharedView<A>{data, cells, name, 0, N}[i]; } // arrays
    operator T() { return (T)SharedRef<T>{data, cells, name, 0, N}; }               // scalars
    Shared& operator=(T v) { SharedRef<T>{data, cells, name, 0, N} = v; return *this; }
};

} // namespace emu

// The CUDA names kernels use
#define threadIdx (emu::emu__tid_of(emu::g_cur))
#define blockIdx (emu::g_block_idx)
#define blockDim (emu::g_block_dim)
#define gridDim (emu::g_grid_dim)

static inline void __syncthreads(void) {
    if (!emu::g_cur) { emu::fail("__syncthreads outside a kernel"); }
    emu::g_cur->state = emu::F_AT_BLOCK;
    emu::suspend();
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::warp_wait(mask, emu::OP_SYNCWARP); }
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    unsigned lane = emu::g_cur ? emu::g_cur->linear % 32 : 0;
    return emu::shfl(mask, v, (lane / width) * width + ((unsigned)src % width));
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    unsigned lane = emu::g_cur ? emu::g_cur->linear % 32 : 0, src = lane ^ (unsigned)lane_mask;
    return emu::shfl(mask, v, src / width == lane / width ? src : lane);
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    unsigned lane = emu::g_cur ? emu::g_cur->linear % 32 : 0, src = lane + delta;
    return emu::shfl(mask, v, src / width == lane / width ? src : lane);
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
float __expf(float x) { return expf(x); } // declared by the CUDA headers; the GPU's is an approximation
float __fadd_rn(float a, float b) { return a + b; } // (round to nearest, never contracted into an fma: a plain
float __fmul_rn(float a, float b) { return a * b; } //  add and multiply here, as this build makes no fmas)

// emu_launch("k", k, grid, block[, smem[, stream]])(args...): what k<<<grid, block, smem, stream>>>(args...) becomes
template <class... P> static emu::Launch<P...> emu_launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block,
                                                          size_t smem = 0, cudaStream_t stream = 0) {
    if (smem > 0) { emu::fail("kernel %s: dynamic shared memory is not emulated", name); }
    return emu::Launch<P...>{name, kernel, grid, block, stream};
}

// ---------------------------------------------------------------------------------------------------------------
// The CUDA runtime (what the backend calls). Streams and events are tokens: all work has finished when a call returns.

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) { *count = 1; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int* v) { *v = CUDART_VERSION; return cudaSuccess; } // (a driver as new as the headers)
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int* device) { *device = 0; return cudaSuccess; }
// Each process is a device of its own, unless CUDA_EMU_BUS_ID names one for all (several processes on one GPU).
cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int device) {
    if (device != 0) { return cudaErrorInvalidDevice; }
    const char* shared = getenv("CUDA_EMU_BUS_ID");
    if (shared && *shared) { snprintf(id, (size_t)len, "%s", shared); }
    else { snprintf(id, (size_t)len, "emu:%d", (int)getpid()); }
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
    if (device != 0) { return cudaErrorInvalidDevice; }
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "cuda_emu (the CPU)");
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 4;
    prop->totalGlobalMem = emu::device_total();
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    *total = emu::device_total();
    *free_bytes = emu::device_free();
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { emu::no_capture("cudaDeviceSynchronize"); emu::device_run_all(); return cudaSuccess; }
cudaError_t cudaGetLastError(void) { cudaError_t e = emu::g_last_error; emu::g_last_error = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return emu::g_last_error; }
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "cuda_emu: some error";
    }
}

cudaError_t cudaMalloc(void** p, size_t size) {
    if (size > emu::device_free()) { *p = NULL; return cudaErrorMemoryAllocation; }
    *p = emu::mem_alloc(size, emu::MEM_DEVICE);
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) { emu::no_capture("cudaFree"); emu::device_run_all(); emu::mem_free(p, emu::MEM_DEVICE, "cudaFree"); return cudaSuccess; }
cudaError_t cudaMallocHost(void** p, size_t size) { *p = emu::mem_alloc(size, emu::MEM_PINNED); return cudaSuccess; }
cudaError_t cudaFreeHost(void* p) { emu::no_capture("cudaFreeHost"); emu::device_run_all(); emu::mem_free(p, emu::MEM_PINNED, "cudaFreeHost"); return cudaSuccess; }

// Pinned host memory is read or written when the copy runs; pageable host memory as CUDA does it: a copy from it
// takes the data at the call, a copy into it completes before the call returns.
static int emu__pinned(const void* p) {
    uintptr_t base;
    const emu::Alloc* a = emu::mem_find(p, &base);
    return a && a->kind == emu::MEM_PINNED;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
    if (bytes == 0) { return cudaSuccess; }
    if (emu::stream_of(stream)->capture && ((kind == cudaMemcpyHostToDevice && !emu__pinned(src)) || (kind == cudaMemcpyDeviceToHost && !emu__pinned(dst)))) {
        emu::fail("cudaMemcpyAsync between the device and pageable host memory on a stream capturing a graph (pinned memory only)");
    }
    switch (kind) {
    case cudaMemcpyHostToDevice:
        emu::mem_check(dst, bytes, emu::MEM_DEVICE, "cudaMemcpy host to device: the destination");
        emu::write_check(dst, bytes, emu::stream_of(stream), "cudaMemcpy host to device");
        emu::mem_check(src, bytes, -2, "cudaMemcpy host to device: the source");
        if (!emu__pinned(src)) {
            std::shared_ptr<std::vector<char>> copy(new std::vector<char>((const char*)src, (const char*)src + bytes));
            emu::enqueue(stream, [dst, copy]() { memcpy(dst, copy->data(), copy->size()); emu::mem_check_guards("cudaMemcpy"); });
            return cudaSuccess;
        }
        break;
    case cudaMemcpyDeviceToHost:
        emu::mem_check(src, bytes, emu::MEM_DEVICE, "cudaMemcpy device to host: the source");
        emu::mem_check(dst, bytes, -2, "cudaMemcpy device to host: the destination");
        break;
    case cudaMemcpyDeviceToDevice:
        emu::mem_check(src, bytes, emu::MEM_DEVICE, "cudaMemcpy device to device: the source");
        emu::mem_check(dst, bytes, emu::MEM_DEVICE, "cudaMemcpy device to device: the destination");
        emu::write_check(dst, bytes, emu::stream_of(stream), "cudaMemcpy device to device");
        break;
    default: emu::fail("cudaMemcpy: kind %d is not one the backend should use", (int)kind);
    }
    emu::enqueue(stream, [dst, src, bytes]() { memmove(dst, src, bytes); emu::mem_check_guards("cudaMemcpy"); });
    if (kind == cudaMemcpyDeviceToHost && !emu__pinned(dst)) {
        emu::stream_run_all(emu::stream_of(stream));
        emu::host_synced(emu::stream_of(stream), emu::stream_of(stream)->queued);
    }
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
    emu::no_capture("cudaMemcpy (blocking)");
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, 0);
    emu::device_run_all(); // blocking, and on the legacy default stream: after all earlier work
    return e;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
    if (bytes == 0) { return cudaSuccess; }
    emu::mem_check(p, bytes, emu::MEM_DEVICE, "cudaMemset");
    emu::write_check(p, bytes, emu::stream_of(stream), "cudaMemset");
    emu::enqueue(stream, [p, value, bytes]() { memset(p, value, bytes); });
    return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
    emu::no_capture("cudaMemset (blocking)");
    cudaError_t e = cudaMemsetAsync(p, value, bytes, 0);
    emu::device_run_all();
    return e;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    (void)flags;
    emu::EmuStream* x = new emu::EmuStream;
    emu::g_streams.push_back(x);
    *s = (cudaStream_t)x;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    emu::EmuStream* x = emu::stream_of(s);
    emu::stream_run_all(x); // CUDA finishes a destroyed stream's work
    emu::g_streams.erase(std::find(emu::g_streams.begin(), emu::g_streams.end(), x));
    for (size_t i = 0; i < emu::g_pending_sends.size();) { // (its sends are done: the host waits for them here)
        if (emu::g_pending_sends[i].s == x) { emu::g_pending_sends[i] = emu::g_pending_sends.back(); emu::g_pending_sends.pop_back(); }
        else { i++; }
    }
    for (emu::EmuStream* o : emu::g_streams) { o->after.erase(x); }
    delete x;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    emu::no_capture("cudaStreamSynchronize");
    emu::EmuStream* x = emu::stream_of(s);
    emu::stream_run_all(x);
    emu::host_synced(x, x->queued);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
    *e = (cudaEvent_t) new emu::EmuEvent{NULL, 0, (flags & cudaEventDisableTiming) == 0, nullptr};
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete (emu::EmuEvent*)e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) { emu::fail("cudaEventRecord on a NULL event"); }
    emu::EmuEvent* x = (emu::EmuEvent*)e;
    if (emu::stream_of(s)->capture) { emu::fail("cudaEventRecord on a stream capturing a graph (not emulated)"); }
    x->stream = emu::stream_of(s);
    if (x->timing) { // (its time: the device clock when the stream reaches the record)
        std::shared_ptr<double> stamp(new double(NAN));
        x->stamp = stamp;
        emu::enqueue(s, [stamp]() { *stamp = emu::g_vclock_ms; });
    }
    x->at = x->stream->queued; // complete once everything queued so far has run
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    emu::no_capture("cudaEventSynchronize");
    emu::EmuEvent* x = (emu::EmuEvent*)e;
    if (x->stream) { emu::stream_run(x->stream, x->at); emu::host_synced(x->stream, x->at); } // never recorded: complete
    return cudaSuccess;
}
// Whether the work before the event's record has run (nothing is run to find out).
cudaError_t cudaEventQuery(cudaEvent_t e) {
    emu::EmuEvent* x = (emu::EmuEvent*)e;
    if (!x->stream) { return cudaSuccess; }
    if (x->stream->done < x->at) { return cudaErrorNotReady; }
    // the issuing thread has seen it complete (another thread's query, such as the NCCL watchdog's, orders nothing
    // the issuing thread does: it polls on its own clock)
    if (pthread_equal(pthread_self(), emu::g_host_thread)) { emu::host_synced(x->stream, x->at); }
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    if (!e) { emu::fail("cudaStreamWaitEvent on a NULL event"); }
    if (emu::stream_of(s)->capture) { emu::fail("cudaStreamWaitEvent on a stream capturing a graph (not emulated)"); }
    emu::EmuEvent x = *(emu::EmuEvent*)e; // the record as of now: a later record does not change this wait
    if (x.stream) {
        emu::EmuStream* w = emu::stream_of(s);
        if (w != x.stream) { // (what x.stream followed, as of now: at most more than as of the record)
            std::map<emu::EmuStream*, uint64_t> inherited = x.stream->after;
            inherited[x.stream] = x.at;
            for (auto& kv : inherited) { uint64_t& a = w->after[kv.first]; if (kv.second > a) { a = kv.second; } }
        }
        emu::enqueue(s, [x]() { emu::stream_run(x.stream, x.at); });
    }
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    emu::EmuEvent *x = (emu::EmuEvent*)a, *y = (emu::EmuEvent*)b;
    if (!x || !y) { emu::fail("cudaEventElapsedTime on a NULL event"); }
    if (!x->timing || !y->timing) { return cudaErrorInvalidResourceHandle; } // (made with cudaEventDisableTiming)
    if (!x->stamp || !y->stamp) { return cudaErrorInvalidResourceHandle; }   // (never recorded)
    if (std::isnan(*x->stamp) || std::isnan(*y->stamp)) { return cudaErrorNotReady; }
    *ms = (float)(*y->stamp - *x->stamp);
    return cudaSuccess;
}
// Graphs by stream capture: the work a capturing stream is given is kept, in order, instead of queued; a launch queues
// all of it on the stream it is launched on, with the arguments of the capture (each kernel's, each copy's pointers).
struct EmuGraph { std::vector<std::function<void()>> nodes; };
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    (void)mode;
    emu::EmuStream* x = emu::stream_of(s);
    if (x == &emu::g_null_stream) { emu::fail("cudaStreamBeginCapture on the legacy default stream (CUDA refuses it)"); }
    if (x->capture) { emu::fail("cudaStreamBeginCapture on a stream already capturing"); }
    x->capture = new std::vector<std::function<void()>>;
    emu::g_capturing++;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
    emu::EmuStream* x = emu::stream_of(s);
    if (!x->capture) { return cudaErrorIllegalState; }
    *g = (cudaGraph_t) new EmuGraph{std::move(*x->capture)};
    delete x->capture;
    x->capture = nullptr;
    emu::g_capturing--;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long flags) {
    (void)flags;
    *e = (cudaGraphExec_t) new EmuGraph(*(EmuGraph*)g);
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    if (emu::stream_of(s)->capture) { emu::fail("cudaGraphLaunch into a capture (not emulated)"); }
    for (const auto& f : ((EmuGraph*)e)->nodes) { emu::enqueue(s, f); }
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete (EmuGraph*)e; return cudaSuccess; }
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete (EmuGraph*)g; return cudaSuccess; }

// Stream-ordered allocation: the memory is allocated at the call and freed when the stream reaches the free.
cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t stream) {
    (void)stream;
    return cudaMalloc(p, size);
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
    emu::mem_check(p, 1, emu::MEM_DEVICE, "cudaFreeAsync");
    emu::enqueue(stream, [p]() { emu::mem_free(p, emu::MEM_DEVICE, "cudaFreeAsync"); });
    return cudaSuccess;
}

} // extern "C"

#include "cublaslt_emu.h" // cuBLASLt's matmul on the CPU
#ifdef USE_NCCL
#include "nccl_emu.h"     // NCCL's collectives over MPI
#endif

#endif // CUDA_EMU_H
