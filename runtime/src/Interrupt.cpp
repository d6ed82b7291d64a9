// Ctrl-C in compiled code (runtime.h, "interrupts").
//
// Python handles SIGINT by setting a flag that the interpreter looks at between bytecodes,
// which never happens while a compiled loop runs (ctypes releases the GIL and waits). So
// the runtime puts its own handler in front of Python's: it bumps `cf_rt_interrupt_count`
// and then calls the handler it displaced, so Python still sees the signal and raises
// KeyboardInterrupt once the compiled call returns. Compiled loops read the count at every
// back-edge (one volatile load and a compare against the value read when their function
// started) and, when it moved, ask `cf_rt_interrupt_poll` whether to stop.
//
// Only the process's main thread stops (Python delivers KeyboardInterrupt there only);
// loops in other threads run on. Nothing here allocates or takes locks in the handler.
#pragma GCC visibility push(default)
#include "cofactor/runtime.h"
#pragma GCC visibility pop

#include <atomic>
#include <csignal>
#include <ctime>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {
// Exported for compiled code; written only by the signal handler (a lock-free atomic
// increment, async-signal-safe), read with volatile loads.
__attribute__((visibility("default"))) volatile int64_t cf_rt_interrupt_count = 0;
}

namespace {

struct sigaction previous; // the handler ours displaced (called after ours)
std::atomic<bool> installed{false};
volatile sig_atomic_t inHandler = 0;
std::atomic<int64_t> lastCheckNs{INT64_MIN / 2};

// Re-checking the installed handler costs a system call (about 0.3 us), so a compiled call
// does it at most this often.
constexpr int64_t kRecheckNs = 50'000'000;

void onSigint(int sig, siginfo_t *info, void *uctx) {
    __atomic_fetch_add(&cf_rt_interrupt_count, 1, __ATOMIC_RELAXED);
    // Another handler installed after ours may call ours as its predecessor, and ours would
    // call it again: never recurse.
    if (inHandler) return;
    inHandler = 1;
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) previous.sa_sigaction(sig, info, uctx);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
               previous.sa_handler) {
        previous.sa_handler(sig);
    }
    inHandler = 0;
}

int64_t nowNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool isMainThread() {
    thread_local int cached = -1;
    if (cached < 0) cached = syscall(SYS_gettid) == getpid() ? 1 : 0;
    return cached == 1;
}

} // namespace

extern "C" {

int64_t cf_rt_interrupt_arm(void) {
    const int64_t now = nowNs();
    if (now - lastCheckNs.load(std::memory_order_relaxed) < kRecheckNs)
        return installed.load(std::memory_order_relaxed);
    lastCheckNs.store(now, std::memory_order_relaxed);
    struct sigaction current {};
    if (sigaction(SIGINT, nullptr, &current) != 0) return 0;
    const bool ours = (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == onSigint;
    if (ours) {
        installed = true;
        return 1;
    }
    // SIG_DFL (the process dies, as without us) and SIG_IGN (nothing happens) stay as they
    // are: only a handler, normally Python's, is taken over.
    if (!(current.sa_flags & SA_SIGINFO) &&
        (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
        installed = false;
        return 0;
    }
    struct sigaction mine = current;
    mine.sa_flags |= SA_SIGINFO;
    mine.sa_sigaction = onSigint;
    // `previous` is only read by our handler, which is not installed at this point.
    previous = current;
    if (sigaction(SIGINT, &mine, nullptr) != 0) return 0;
    installed = true;
    return 1;
}

int8_t cf_rt_interrupt_poll(void) {
    if (!isMainThread()) return 0;
    cf_rt_report_error(CF_ERR_INTERRUPTED, "interrupted (SIGINT) while compiled code ran");
    return 1;
}

} // extern "C"
