// Fiber runtime of the emulated GPU: every block runs on one OS thread, its
// GPU threads are fibers switched at barriers and warp shuffles, and blocks
// are spread over a few OS threads.
//
// On x86-64 a fiber switch is a few instructions of our own (ctx_switch
// below): it saves the callee-saved registers on the old stack and pops them
// from the new one, with no system call and no signal mask. A block of 1024
// threads switches fibers thousands of times per barrier round, and glibc's
// getcontext/swapcontext (a sigprocmask call each) and _setjmp/_longjmp were
// most of the emulated suites' time. Elsewhere ucontext does the same job,
// slower.
#include "cuda_shim.h"
#include "emu_launch.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace emu {

thread_local const uint3* cur_thread_idx = nullptr;
thread_local unsigned cur_flat_tid = 0;
thread_local uint3 cur_block_idx = {0, 0, 0};
thread_local dim3 cur_block_dim = {1, 1, 1};
thread_local dim3 cur_grid_dim = {1, 1, 1};
thread_local uint64_t shfl_slots[1024];
thread_local uint32_t mma_slots[1024][6];
thread_local uint64_t mma_calls[1024];

void set_error(LaunchError* e, int code, const char* fmt, ...) {
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
}

namespace {

constexpr size_t kStackBytes = 64 * 1024;
constexpr int kReady = 0, kRunning = 1, kWaitWarp = 2, kWaitBlock = 3, kDone = 4;
constexpr unsigned kMaxThreads = 1024;

// Fiber stacks are expensive to map and fault in, so they are pooled across
// launches. Each has a PROT_NONE page below it: an overflow faults instead of
// silently corrupting the neighbouring fiber.
std::mutex g_stack_mutex;
std::vector<char*> g_stacks;

size_t page_size() {
    static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return p;
}

char* take_stack() {
    {
        std::lock_guard<std::mutex> g(g_stack_mutex);
        if (!g_stacks.empty()) {
            char* s = g_stacks.back();
            g_stacks.pop_back();
            return s;
        }
    }
    const size_t pg = page_size();
    void* m = mmap(nullptr, kStackBytes + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    mprotect(m, pg, PROT_NONE);
    return static_cast<char*>(m) + pg;
}

void give_stack(char* s) {
    std::lock_guard<std::mutex> g(g_stack_mutex);
    g_stacks.push_back(s);
}

void fiber_main();

#if defined(__x86_64__)
// A fiber's saved context is its stack pointer: ctx_switch pushed the
// callee-saved registers (System V ABI: rbx, rbp, r12-r15) there before
// switching, and pops them when switching back. The kernels leave the x87
// and SSE control words alone, so they are not switched.
using Context = void*;

extern "C" void devtensor_emu_ctx_switch(Context* save, Context to);
asm(R"(
    .text
    .globl devtensor_emu_ctx_switch
    .hidden devtensor_emu_ctx_switch
    .type devtensor_emu_ctx_switch, @function
devtensor_emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size devtensor_emu_ctx_switch, .-devtensor_emu_ctx_switch
)");

void ctx_switch(Context* save, Context* to) { devtensor_emu_ctx_switch(save, *to); }

// A fresh fiber's stack holds what ctx_switch pops: six zero registers and
// the address to return to, fiber_main, entered as if called (the stack
// pointer 8 past a 16-byte boundary) with a null return address above it.
void ctx_init(Context* c, char* stack, size_t size) {
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
    auto* sp = reinterpret_cast<uint64_t*>(top);
    *--sp = 0;                                           // fiber_main's return address: it never returns
    *--sp = reinterpret_cast<uint64_t>(&fiber_main);     // where ctx_switch's ret goes
    for (int i = 0; i < 6; ++i) *--sp = 0;               // rbp, rbx, r12-r15
    *c = sp;
}
#else
using Context = ucontext_t;

void ctx_switch(Context* save, Context* to) { swapcontext(save, to); }

void ctx_init(Context* c, char* stack, size_t size) {
    getcontext(c);
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = size;
    c->uc_link = nullptr;
    makecontext(c, fiber_main, 0);
}
#endif

struct Fiber {
    Context ctx;
    uint3 tid;
    unsigned flat;
    int st;
    char* stack;
};

struct Worker {
    const std::function<void()>* body = nullptr;
    const char* name = nullptr;
    std::vector<Fiber> fibers;
    unsigned n = 0;
    Context sched;
    Fiber* cur = nullptr;
    std::string fail_msg;
};

thread_local Worker* tls_worker = nullptr;
thread_local bool tls_in_kernel = false;
thread_local sigjmp_buf tls_escape;
thread_local uint64_t tls_fault_addr = 0;

// A fiber lives for one launch, on the OS thread of its worker: it runs the
// kernel for one block, parks, and runs it again for the next block.
void fiber_main() {
    Worker* w = tls_worker;
    for (;;) {
        (*w->body)();
        Fiber* f = w->cur;
        f->st = kDone;
        ctx_switch(&f->ctx, &w->sched);
    }
}

void yield(int state) {
    Worker* w = tls_worker;
    Fiber* f = w->cur;
    f->st = state;
    ctx_switch(&f->ctx, &w->sched);
}

void resume(Worker* w, Fiber* f) {
    w->cur = f;
    cur_thread_idx = &f->tid;
    cur_flat_tid = f->flat;
    f->st = kRunning;
    ctx_switch(&w->sched, &f->ctx);
}

// Returns false (with w->fail_msg set) when the block cannot finish: some
// threads wait at a barrier that the others never reach.
bool run_block(Worker* w, unsigned bx, unsigned by, unsigned bz) {
    cur_block_idx = {bx, by, bz};
    const dim3 bd = cur_block_dim;
    for (unsigned i = 0; i < w->n; ++i) {
        Fiber& f = w->fibers[i];
        f.tid = {i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
        f.flat = i;
        mma_calls[i] = 0;
        f.st = kReady;
    }
    const unsigned nwarps = (w->n + 31) / 32;
    // Threads run one at a time between barriers. Alternating the order from
    // block to block makes a missing __syncthreads (a thread reading a slot
    // that a later thread writes) give wrong results in some blocks either way.
    const bool reverse = ((bx ^ by ^ bz) & 1u) != 0;
    for (;;) {
        for (unsigned j = 0; j < w->n; ++j) {
            const unsigned i = reverse ? w->n - 1 - j : j;
            if (w->fibers[i].st == kReady) resume(w, &w->fibers[i]);
        }
        bool released = false;
        unsigned alive = 0, at_block = 0;
        for (unsigned wp = 0; wp < nwarps; ++wp) {
            unsigned lo = wp * 32, hi = lo + 32 < w->n ? lo + 32 : w->n;
            unsigned live = 0, at_warp = 0;
            for (unsigned i = lo; i < hi; ++i) {
                int st = w->fibers[i].st;
                if (st != kDone) ++live;
                if (st == kWaitWarp) ++at_warp;
                if (st == kWaitBlock) ++at_block;
            }
            alive += live;
            if (live > 0 && at_warp == live) {
                for (unsigned i = lo; i < hi; ++i)
                    if (w->fibers[i].st == kWaitWarp) w->fibers[i].st = kReady;
                released = true;
            }
        }
        if (released) continue;
        if (alive == 0) return true;
        if (at_block == alive) {
            for (unsigned i = 0; i < w->n; ++i)
                if (w->fibers[i].st == kWaitBlock) w->fibers[i].st = kReady;
            continue;
        }
        char buf[256];
        snprintf(buf, sizeof(buf),
                 "block (%u,%u,%u): %u of %u live threads wait at __syncthreads while the others wait at a warp "
                 "shuffle/__syncwarp (barrier in divergent code)",
                 bx, by, bz, at_block, alive);
        w->fail_msg = buf;
        return false;
    }
}

struct sigaction g_old_segv, g_old_bus;

void on_fault(int sig, siginfo_t* si, void* ctx) {
    if (tls_in_kernel) {
        tls_fault_addr = reinterpret_cast<uint64_t>(si->si_addr);
        siglongjmp(tls_escape, 1);
    }
    struct sigaction* old = sig == SIGSEGV ? &g_old_segv : &g_old_bus;
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, ctx);
    } else if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
        // Returning re-executes the faulting instruction under the default action.
        signal(sig, SIG_DFL);
    } else {
        old->sa_handler(sig);
    }
}

void install_fault_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_old_segv);
        sigaction(SIGBUS, &sa, &g_old_bus);
    });
}

struct Grid {
    const char* name;
    const std::function<void()>* body;
    unsigned gx, gy, gz, nthreads;
    uint64_t nblocks;
    std::atomic<uint64_t> next{0};
    std::atomic<bool> abort{false};
    std::mutex err_mutex;
    LaunchError* err;
    bool err_set = false;

    void fail(int code, uint64_t fault, const std::string& msg) {
        std::lock_guard<std::mutex> g(err_mutex);
        abort = true;
        if (err_set) return;
        err_set = true;
        err->fault_addr = fault;
        set_error(err, code, "kernel %s: %s", name, msg.c_str());
    }
};

void work(Grid* g) {
    Worker w;
    w.body = g->body;
    w.name = g->name;
    w.n = g->nthreads;
    w.fibers.resize(w.n);
    for (unsigned i = 0; i < w.n; ++i) {
        Fiber& f = w.fibers[i];
        f.stack = take_stack();
        if (!f.stack) {
            for (unsigned j = 0; j < i; ++j) give_stack(w.fibers[j].stack);
            g->fail(2 /* CUDA_ERROR_OUT_OF_MEMORY */, 0, "cannot map fiber stacks");
            return;
        }
        ctx_init(&f.ctx, f.stack, kStackBytes);
    }
    // The fault handler needs a stack of its own: the fault may be a fiber
    // running off its stack.
    std::vector<char> alt(64 * 1024);
    stack_t ss, old_ss;
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    ss.ss_flags = 0;
    sigaltstack(&ss, &old_ss);

    tls_worker = &w;
    tls_fault_addr = 0;
    int jumped = sigsetjmp(tls_escape, 1);
    if (jumped == 0) {
        tls_in_kernel = true;
        for (;;) {
            if (g->abort.load(std::memory_order_relaxed)) break;
            uint64_t b = g->next.fetch_add(1);
            if (b >= g->nblocks) break;
            unsigned bx = static_cast<unsigned>(b % g->gx);
            unsigned by = static_cast<unsigned>((b / g->gx) % g->gy);
            unsigned bz = static_cast<unsigned>(b / (uint64_t(g->gx) * g->gy));
            if (!run_block(&w, bx, by, bz)) {
                g->fail(719 /* CUDA_ERROR_LAUNCH_FAILED */, 0, w.fail_msg);
                break;
            }
        }
        tls_in_kernel = false;
    } else {
        tls_in_kernel = false;
        char buf[256];
        const size_t pg = page_size();
        bool stack_overflow = false;
        for (const Fiber& f : w.fibers) {
            const uint64_t guard = reinterpret_cast<uint64_t>(f.stack) - pg;
            if (jumped == 1 && tls_fault_addr >= guard && tls_fault_addr < guard + pg) stack_overflow = true;
        }
        if (stack_overflow) {
            const uint3 t = cur_thread_idx ? *cur_thread_idx : uint3{0, 0, 0};
            snprintf(buf, sizeof(buf),
                     "thread (%u,%u,%u) of block (%u,%u,%u) overflowed its %zu KiB emulator stack (large local arrays?)",
                     t.x, t.y, t.z, cur_block_idx.x, cur_block_idx.y, cur_block_idx.z, kStackBytes / 1024);
            g->fail(719 /* CUDA_ERROR_LAUNCH_FAILED */, 0, buf);
        } else if (jumped == 1) {
            const uint3 t = cur_thread_idx ? *cur_thread_idx : uint3{0, 0, 0};
            snprintf(buf, sizeof(buf), "illegal memory access at host address 0x%llx by thread (%u,%u,%u) of block (%u,%u,%u)",
                     static_cast<unsigned long long>(tls_fault_addr), t.x, t.y, t.z, cur_block_idx.x, cur_block_idx.y,
                     cur_block_idx.z);
            g->fail(700 /* CUDA_ERROR_ILLEGAL_ADDRESS */, tls_fault_addr, buf);
        } else {
            g->fail(719, 0, w.fail_msg);
        }
    }
    sigaltstack(&old_ss, nullptr);
    tls_worker = nullptr;
    for (auto& f : w.fibers) give_stack(f.stack);
}

}  // namespace

void block_barrier() { yield(kWaitBlock); }
void warp_barrier() { yield(kWaitWarp); }

void fail(const char* what) {
    if (tls_worker && tls_in_kernel) {
        tls_worker->fail_msg = what;
        siglongjmp(tls_escape, 2);
    }
    fprintf(stderr, "devtensor-emu: %s (outside a kernel)\n", what);
    abort();
}

int run_grid(const char* name, const std::function<void()>& body, const unsigned* d, LaunchError* e) {
    install_fault_handler();
    Grid g;
    g.name = name;
    g.body = &body;
    g.gx = d[0];
    g.gy = d[1];
    g.gz = d[2];
    g.nthreads = d[3] * d[4] * d[5];
    g.nblocks = uint64_t(d[0]) * d[1] * d[2];
    g.err = e;
    if (g.nthreads == 0 || g.nthreads > kMaxThreads || g.nblocks == 0) {
        set_error(e, 1, "kernel %s: invalid launch dimensions", name);
        return 1;
    }
    unsigned hw = std::thread::hardware_concurrency();
    if (hw == 0) hw = 1;
    if (const char* s = getenv("DEVTENSOR_EMU_THREADS")) {
        int v = atoi(s);
        if (v > 0) hw = static_cast<unsigned>(v);
    }
    uint64_t nworkers = g.nblocks < hw ? g.nblocks : hw;
    const dim3 bd = {d[3], d[4], d[5]};
    const dim3 gd = {d[0], d[1], d[2]};
    auto run = [&g, bd, gd]() {
        cur_block_dim = bd;
        cur_grid_dim = gd;
        work(&g);
    };
    std::vector<std::thread> threads;
    for (uint64_t i = 1; i < nworkers; ++i) threads.emplace_back(run);
    // The calling thread works too: with one block there is no thread to start.
    run();
    for (auto& t : threads) t.join();
    return g.err_set ? e->code : 0;
}

}  // namespace emu
