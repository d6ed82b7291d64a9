// The chunked thread pool of ThreadPool.hpp.
//
// Protocol. One 64-bit word describes the current loop: job id (32 bits) | chunk count
// (16) | next unclaimed chunk (16). The caller stores the loop's function and context, then
// publishes the word; every participant claims chunks with a compare-and-swap on it and reads
// the function only after a successful claim (the loop cannot end before that chunk is done,
// so the function is still valid). Finished chunks are counted in `done`; the caller returns
// once `done` reaches the chunk count. The job id keeps a stale claim from ever succeeding.
//
// Waiting. A worker with nothing to do spins (with pause) for kSpinNs, so back-to-back gates
// find it awake, then sleeps on a futex; a new loop wakes sleepers only when there are some.
// The caller, once no chunk is left to claim, spins briefly on `done` and then sleeps too:
// a worker that was descheduled in the middle of a chunk then gets the caller's CPU.
#include "ThreadPool.hpp"

#pragma GCC visibility push(default)
#include "cofactor/runtime.h"
#pragma GCC visibility pop

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

namespace cf::pool {

thread_local int tlsChunk __attribute__((tls_model("initial-exec"))) = 0;

namespace {

// About one chunk per 2^14 amplitudes (256 KiB of state): small enough that a thread which
// got its CPU late finds work left, large enough that claiming one (a compare-and-swap on a
// shared line) is noise.
constexpr int kChunkAmpsLog2 = 14;
constexpr int kMaxThreads = 1024;
constexpr int64_t kSpinNs = 200000;  // a worker's spin before it sleeps
constexpr int64_t kCallerSpinNs = 20000; // the caller's spin on chunks still in flight

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void futexWait(std::atomic<uint32_t> *word, uint32_t expected) {
#ifdef __linux__
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
    if (word->load() == expected) std::this_thread::yield();
#endif
}

void futexWakeAll(std::atomic<uint32_t> *word) {
#ifdef __linux__
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
    (void)word;
#endif
}

// A positive integer, the whole string (surrounding blanks allowed); -1 otherwise.
int parsePositive(const std::string &text) {
    size_t b = text.find_first_not_of(" \t"), e = text.find_last_not_of(" \t");
    if (b == std::string::npos) return -1;
    const std::string s = text.substr(b, e - b + 1);
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
    const long v = std::strtol(s.c_str(), nullptr, 10);
    return v >= 1 ? int(std::min<long>(v, kMaxThreads)) : -1;
}

int affinityThreads() {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return std::min(n, kMaxThreads);
    }
#endif
    const unsigned hw = std::thread::hardware_concurrency();
    return hw ? int(std::min<unsigned>(hw, kMaxThreads)) : 1;
}

// COFACTOR_NUM_THREADS ("auto" or empty: the default), else OMP_NUM_THREADS's first entry
// (OpenMP's list syntax, "4,2"), else the affinity mask. A value that is not a positive
// integer is reported once on stderr and ignored (the frontend also warns in Python).
int defaultThreads() {
    if (const char *env = std::getenv("COFACTOR_NUM_THREADS")) {
        const std::string s(env);
        if (!s.empty() && s != "auto") {
            const int n = parsePositive(s);
            if (n > 0) return n;
            std::fprintf(stderr,
                         "cofactor: ignoring COFACTOR_NUM_THREADS='%s' (expected a positive integer or 'auto')\n",
                         env);
        }
    }
    if (const char *env = std::getenv("OMP_NUM_THREADS")) {
        std::string s(env);
        s = s.substr(0, s.find(','));
        const int n = parsePositive(s);
        if (n > 0) return n;
    }
    return affinityThreads();
}

struct Pool {
    std::atomic<uint64_t> state{0};          // job id | chunks | next (see the top)
    std::atomic<uint32_t> done{0};           // chunks finished in the current job
    std::atomic<uint32_t> callerSleeping{0}; // the caller waits on `done` in the kernel
    std::atomic<uint32_t> wakeSeq{0};        // futex word the idle workers sleep on
    std::atomic<int> sleepers{0};
    std::atomic<int> threads{1}; // participants: the caller and workers 1 .. threads - 1
    ChunkFn fn = nullptr;        // the current job's; written before `state` is published
    void *ctx = nullptr;
    uint32_t jobId = 0;
    std::mutex busy;  // one loop at a time; a second caller thread runs its loop serially
    std::mutex grow;  // guards `workers`
    int workers = 0;  // started worker threads (never stopped; surplus ones sleep)

    static int chunksOf(uint64_t s) { return int((s >> 16) & 0xFFFF); }
    static int nextOf(uint64_t s) { return int(s & 0xFFFF); }
    bool workLeft() const {
        const uint64_t s = state.load(std::memory_order_seq_cst);
        return nextOf(s) < chunksOf(s);
    }

    // Claims the next chunk of the current job; false when none is left.
    bool claim(int &chunk, int &chunks) {
        uint64_t s = state.load(std::memory_order_acquire);
        for (;;) {
            if (nextOf(s) >= chunksOf(s)) return false;
            if (state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
                chunk = nextOf(s), chunks = chunksOf(s);
                return true;
            }
        }
    }

    void workerMain(int index) {
        for (;;) {
            // spin while this worker is wanted and no work has come, then sleep
            const int64_t start = nowNs();
            bool found = false;
            for (int i = 1;; ++i) {
                if (index < threads.load(std::memory_order_relaxed) && workLeft()) {
                    found = true;
                    break;
                }
                cpuRelax();
                if ((i & 127) == 0 && nowNs() - start > kSpinNs) break;
            }
            if (!found) {
                const uint32_t seq = wakeSeq.load(std::memory_order_seq_cst);
                sleepers.fetch_add(1, std::memory_order_seq_cst);
                if (index >= threads.load(std::memory_order_seq_cst) || !workLeft()) futexWait(&wakeSeq, seq);
                sleepers.fetch_sub(1, std::memory_order_seq_cst);
                continue;
            }
            int chunk, chunks;
            while (claim(chunk, chunks)) {
                ChunkFn f = fn;
                void *c = ctx;
                tlsChunk = chunk;
                f(c, chunk);
                tlsChunk = 0;
                if (done.fetch_add(1, std::memory_order_seq_cst) + 1 == uint32_t(chunks) &&
                    callerSleeping.load(std::memory_order_seq_cst))
                    futexWakeAll(&done);
            }
        }
    }

    void ensureWorkers(int n) {
        std::lock_guard<std::mutex> lock(grow);
        for (; workers < n - 1; ++workers) {
            const int index = workers + 1;
            std::thread([this, index] { workerMain(index); }).detach();
        }
    }

    void runParallel(int chunks, ChunkFn f, void *c) {
        fn = f, ctx = c;
        done.store(0, std::memory_order_relaxed);
        ++jobId;
        state.store((uint64_t(jobId) << 32) | (uint64_t(chunks) << 16), std::memory_order_seq_cst);
        if (sleepers.load(std::memory_order_seq_cst) > 0) {
            wakeSeq.fetch_add(1, std::memory_order_seq_cst);
            futexWakeAll(&wakeSeq);
        }
        int chunk, total, mine = 0;
        while (claim(chunk, total)) {
            tlsChunk = chunk;
            f(c, chunk);
            ++mine;
        }
        tlsChunk = 0;
        if (done.fetch_add(uint32_t(mine), std::memory_order_seq_cst) + uint32_t(mine) == uint32_t(chunks)) return;
        // chunks in flight on workers: spin a little, then sleep until the last one is done
        const int64_t start = nowNs();
        for (int i = 1; done.load(std::memory_order_acquire) != uint32_t(chunks); ++i) {
            cpuRelax();
            if ((i & 63) == 0 && nowNs() - start > kCallerSpinNs) {
                callerSleeping.store(1, std::memory_order_seq_cst);
                for (uint32_t d; (d = done.load(std::memory_order_seq_cst)) != uint32_t(chunks);)
                    futexWait(&done, d);
                callerSleeping.store(0, std::memory_order_relaxed);
                break;
            }
        }
        std::atomic_thread_fence(std::memory_order_acquire);
    }
};

std::atomic<Pool *> thePool{nullptr};
std::mutex poolMutex;
std::atomic<int> requested{0}; // setNumThreads's value; 0: the default

int resolvedDefault() {
    static const int n = defaultThreads();
    return n;
}

// After fork() only the forking thread exists in the child: it gets a fresh pool when it
// first needs one (the old one, with workers that no longer exist, is dropped, not freed).
void afterForkChild() {
    thePool.store(nullptr);
    new (&poolMutex) std::mutex();
}

Pool *pool() {
    Pool *p = thePool.load(std::memory_order_acquire);
    if (p) return p;
    std::lock_guard<std::mutex> lock(poolMutex);
    p = thePool.load(std::memory_order_relaxed);
    if (!p) {
        static std::once_flag once;
        std::call_once(once, [] { pthread_atfork(nullptr, nullptr, afterForkChild); });
        p = new Pool(); // never freed: detached workers refer to it until the process ends
        p->threads.store(numThreads());
        thePool.store(p, std::memory_order_release);
    }
    return p;
}

uint64_t readMinParallelAmps() {
    const char *env = std::getenv("COFACTOR_PARALLEL_MIN_QUBITS");
    if (!env) env = std::getenv("COFACTOR_OMP_MIN_QUBITS"); // its name before the pool
    const int qubits = env ? std::atoi(env) : 16;
    return uint64_t(1) << std::clamp(qubits, 0, 62);
}

} // namespace

int numThreads() {
    const int r = requested.load(std::memory_order_relaxed);
    return r > 0 ? r : resolvedDefault();
}

void setNumThreads(int n) {
    requested.store(n > 0 ? std::min(n, kMaxThreads) : 0);
    if (Pool *p = thePool.load(std::memory_order_acquire)) p->threads.store(numThreads());
}

uint64_t minParallelAmps() {
    static const uint64_t threshold = readMinParallelAmps();
    return threshold;
}

int chunkCount(uint64_t count, uint64_t amps) {
    if (amps < minParallelAmps() || count < 2) return 1;
    const uint64_t byAmps = std::max<uint64_t>(2, amps >> kChunkAmpsLog2);
    return int(std::min<uint64_t>({byAmps, uint64_t(kMaxChunks), count}));
}

void run(int chunks, ChunkFn fn, void *ctx) {
    const int saved = tlsChunk;
    auto serial = [&] {
        for (int c = 0; c < chunks; ++c) {
            tlsChunk = c;
            fn(ctx, c);
        }
        tlsChunk = saved;
    };
    if (chunks <= 1 || numThreads() <= 1) return serial();
    Pool *p = pool();
    std::unique_lock<std::mutex> lock(p->busy, std::try_to_lock);
    if (!lock.owns_lock()) return serial();
    const int threads = numThreads();
    p->threads.store(threads, std::memory_order_relaxed);
    p->ensureWorkers(threads);
    p->runParallel(chunks, fn, ctx);
}

} // namespace cf::pool

extern "C" {
int64_t cf_rt_num_threads(void) { return cf::pool::numThreads(); }
void cf_rt_set_num_threads(int64_t n) {
    cf::pool::setNumThreads(n > 0 ? int(std::min<int64_t>(n, 1 << 20)) : 0);
}
}
