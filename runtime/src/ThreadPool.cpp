// The chunked thread pool of ThreadPool.hpp.
//
// Protocol. One 64-bit word describes the current loop: job id (32 bits) | lo (16) | hi (16),
// [lo, hi) being the chunks nobody has claimed yet. The caller stores the loop's function,
// context and chunk count, then publishes the word; every participant claims chunks with a
// compare-and-swap on it (the caller from the front, workers from the back) and reads the
// function only after a successful claim (the loop cannot end before that chunk is done, so
// the function is still valid). Finished chunks are counted in `done`; the caller returns once
// `done` reaches the chunk count. The job id keeps a stale claim from ever succeeding.
//
// Waiting. A worker with nothing to do spins (with pause) for kSpinNs, so back-to-back gates
// find it awake, then naps and finally sleeps on a futex (Pool::idle). The caller, once no
// chunk is left to claim, spins briefly on `done` and then sleeps too: a worker that was
// descheduled in the middle of a chunk then gets the caller's CPU.
//
// Whether a loop runs in parallel at all is decided by measurement (Policy).
#include "ThreadPool.hpp"

#pragma GCC visibility push(default)
#include "cofactor/runtime.h"
#pragma GCC visibility pop

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <ctime>
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

// Chunk order. The state of a 22-qubit register (64 MiB) is twice this EPYC's L3 (32 MiB);
// gate after gate walking it in the same direction, each loop starts where the previous one's
// lines have long been evicted. So every other loop (per calling thread) runs the other way
// round, in groups of kOrderGroup chunks (2 MiB at n = 22) so that a kernel's streams still
// run upwards through a group and its software prefetch of the next tile (forEachRunAhead)
// lands in the chunk it runs next. The claim at position p -- the caller claims from the
// front, workers from the back -- runs chunk chunkAt(p): the caller keeps the half [0, h),
// the workers [h, chunks); on even loops the caller walks its half upwards and the workers
// theirs downwards from the end (group by group), on odd loops the caller walks down from
// the middle (group by group) and the workers up from it. Serially: upwards, then downwards
// group by group. Each loop then starts on the lines the previous one touched last, which
// the L3 still holds. Only the order changes: chunk boundaries and the chunk index a
// kernel's partial sums use do not (determinism, see the header).
// COFACTOR_POOL_ORDER=ascending: the order before (the caller upwards, workers downwards
// chunk by chunk, serial upwards), for A/B timings.
constexpr int kOrderGroup = 8;
thread_local uint32_t tlsLoops = 0;
bool alternateOrder() {
    static const bool on = [] {
        const char *env = std::getenv("COFACTOR_POOL_ORDER");
        return !(env && std::string(env) == "ascending");
    }();
    return on;
}
// The q-th of [0, size) when walking groups of kOrderGroup (aligned at 0) from the last down,
// each group upwards.
inline int groupsDown(int q, int size) {
    const int last = (size - 1) / kOrderGroup * kOrderGroup, lastSize = size - last;
    if (q < lastSize) return last + q;
    q -= lastSize;
    return last - kOrderGroup * (q / kOrderGroup + 1) + q % kOrderGroup;
}
// mode 0: the old order (identity); 1: an even loop; 2: an odd loop (see above)
inline int chunkAt(int p, int chunks, int mode) {
    if (mode == 0) return p;
    const int h = chunks / 2;
    if (p < h) return mode == 1 ? p : groupsDown(p, h);
    const int q = chunks - 1 - p; // the workers' q-th claim
    return h + (mode == 1 ? groupsDown(q, chunks - h) : q);
}

// About one chunk per 2^14 amplitudes (256 KiB of state): small enough that a thread which
// got its CPU late finds work left, large enough that claiming one (a compare-and-swap on a
// shared line) is noise.
constexpr int kChunkAmpsLog2 = 14;
constexpr int kMaxThreads = 1024;
constexpr int64_t kSpinNs = 50000;       // a worker's spin before it sleeps
constexpr int64_t kCallerSpinNs = 20000; // the caller's spin on chunks still in flight
constexpr int64_t kStallNs = 50000;      // a wait for workers longer than this is a stall
constexpr int64_t kMaxGapNs = 200000;    // the longest time between loops the policy counts (Policy)
constexpr int kYieldEvery = 128;         // spin iterations (pauses) between sched_yield calls

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spinning threads give their CPU away every few microseconds: on a machine whose cores are
// all busy (or in a session whose CPU share is spread over its threads, Linux autogroups) a
// spinning worker otherwise takes time from the caller's work between loops and from the
// thread it waits for. With nothing else runnable sched_yield returns at once.
inline void politeSpin(int i) {
    cpuRelax();
    if (i % kYieldEvery == 0) sched_yield();
}

int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Sleeps while *word == expected, at most timeoutNs (< 0: no limit); may wake spuriously.
void futexWait(std::atomic<uint32_t> *word, uint32_t expected, int64_t timeoutNs = -1) {
#ifdef __linux__
    timespec ts{time_t(timeoutNs / 1000000000), long(timeoutNs % 1000000000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT_PRIVATE, expected,
            timeoutNs < 0 ? nullptr : &ts, nullptr, 0);
#else
    (void)timeoutNs;
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

// Serial or parallel, decided by measurement. A loop's time is counted with the gap since the
// previous loop ended (up to kMaxGapNs: the caller's own work between gates, such as the
// fuser's matrices), because a parallel mode also slows that work down on a busy machine
// (spinning workers share the process's CPU time) and the loops alone would favour it.
// Whether a second thread helps depends on the machine's load, on what the scheduler gives a
// process (with per-session CPU shares -- cgroups, autogroups -- a busy machine gives a
// process the same CPU time whatever its thread count, and the second thread only adds its
// overhead), and on the work per loop (a few tens of microseconds of work do not pay for
// waking and joining a thread in a virtual machine). So the pool measures: a probe of at least
// kProbeNs of loop time in parallel, then one serial, each yielding one throughput figure
// (amplitudes per second) per loop; the faster mode by the MEDIAN of those figures (parallel
// only if it wins by 15%) then holds for kHoldNs of loop time, then the next probe; each
// consecutive serial win doubles the serial hold (up to about 1 s), and a decisive parallel
// win (by 30%: an idle machine) holds at least 16x the serial probe's time and doubles its
// hold per consecutive decisive win (up to about 1 s) -- with loops of milliseconds (n >= 22)
// a fixed 64 ms hold ran about one loop in five in serial probes. The median, not the
// total: on a busy machine one preemption (a time slice, milliseconds) lands in one probe and
// not in the other, and a total over a few milliseconds then picked the mode at random.
// Two signs that the workers are not being scheduled switch to serial at once, for a hold of
// at least 32x the time lost: a stall (a preempted worker's chunk kept the caller waiting;
// milliseconds, against microseconds per loop on a small state), and kIdleLoops parallel
// loops in a row in which no worker took a chunk (a parallel mode then buys nothing and
// still pays for the wake-ups). Costs: the losing mode's probe, at most about 6% of the
// loop time (on an idle machine, with the growing hold, soon under 2%).
// COFACTOR_POOL_HOLD=fixed: every parallel win holds 64 ms, as before (for A/B timings).
// COFACTOR_POOL_POLICY=parallel skips the measurement (every loop that can run in parallel
// does): for tests and for measuring the policy itself.
class Policy {
  public:
    static constexpr int kIdleLoops = 16;

    bool parallelNow() const {
        return always_ || phase_ == ProbeParallel || (phase_ == Hold && holdParallel_);
    }

    void record(int64_t ns, double work) {
        ns_ += ns, work_ += work;
        if (phase_ != Hold && samples_ < kMaxSamples) rates_[samples_++] = work / double(std::max<int64_t>(ns, 1));
        if (phase_ == Hold ? ns_ < holdNs_ : !probeDone()) return;
        if (phase_ == ProbeParallel) {
            parallelRate_ = medianRate();
            next(ProbeSerial);
        } else if (phase_ == ProbeSerial) {
            const double serialRate = medianRate();
            holdParallel_ = parallelRate_ > 1.15 * serialRate;
            holdNs_ = holdParallel_ ? kHoldNs : serialHoldNs_;
            // serial winning again and again (a machine that stays busy): probe ever less
            // often, up to once per kMaxHoldNs; a parallel win resets that
            serialHoldNs_ = holdParallel_ ? kHoldNs : std::min(2 * serialHoldNs_, kMaxHoldNs);
            // a decisive parallel win (an idle machine, a large state): the serial probe is
            // what it costs (SEL forward at n = 22: ~35 loops of several ms per call, and
            // with a fixed 64 ms hold about 5 of every 26 loops ran in the serial probe; a
            // model of the policy puts that at 6-12% of the two-thread speed-up), so the
            // hold is at least kProbeCostFactor x that probe, and doubles per consecutive
            // decisive win. Stalls and idle workers still end it at once (stalled).
            if (holdParallel_ && growHold_ && parallelRate_ > kDecisiveWin * serialRate) {
                holdNs_ = std::min(std::max(parallelHoldNs_, kProbeCostFactor * ns_), kMaxHoldNs);
                parallelHoldNs_ = std::min(2 * parallelHoldNs_, kMaxHoldNs);
            } else {
                parallelHoldNs_ = kHoldNs;
            }
            next(Hold);
        } else {
            next(ProbeParallel);
        }
    }

    // The workers are not being scheduled: `lostNs` were lost to them (a stall), or kIdleLoops
    // parallel loops went by without them.
    void stalled(int64_t lostNs) {
        holdParallel_ = false;
        parallelHoldNs_ = kHoldNs;
        holdNs_ = std::max(serialHoldNs_, 32 * lostNs);
        serialHoldNs_ = std::min(2 * serialHoldNs_, kMaxHoldNs);
        next(Hold);
    }

  private:
    static constexpr int64_t kProbeNs = 4000000, kHoldNs = 64000000, kMaxHoldNs = 1024000000;
    static constexpr int64_t kProbeCostFactor = 16; // a decisive win's hold: >= 16x the serial probe
    static constexpr double kDecisiveWin = 1.3;
    static constexpr int kMinSamples = 5, kMaxSamples = 64;
    enum Phase { ProbeParallel, ProbeSerial, Hold };
    // a probe lasts kProbeNs and at least kMinSamples loops, or kMaxSamples loops (short
    // loops: enough for a median), and never more than 4 kProbeNs (long loops)
    bool probeDone() const {
        return samples_ >= kMaxSamples || (ns_ >= kProbeNs && samples_ >= kMinSamples) || ns_ >= 4 * kProbeNs;
    }
    double medianRate() {
        if (samples_ == 0) return work_ / double(std::max<int64_t>(ns_, 1));
        std::nth_element(rates_, rates_ + samples_ / 2, rates_ + samples_);
        return rates_[samples_ / 2];
    }
    void next(Phase p) { phase_ = p, ns_ = 0, work_ = 0, samples_ = 0; }
    Phase phase_ = ProbeParallel;
    bool always_ = [] {
        const char *env = std::getenv("COFACTOR_POOL_POLICY");
        return env && std::string(env) == "parallel";
    }();
    // COFACTOR_POOL_HOLD=fixed: every parallel win holds kHoldNs (the policy before the
    // growing hold; for A/B timings)
    bool growHold_ = [] {
        const char *env = std::getenv("COFACTOR_POOL_HOLD");
        return !(env && std::string(env) == "fixed");
    }();
    bool holdParallel_ = false;
    int64_t ns_ = 0, holdNs_ = kHoldNs, serialHoldNs_ = kHoldNs, parallelHoldNs_ = kHoldNs;
    double work_ = 0, parallelRate_ = 0;
    int samples_ = 0;
    double rates_[kMaxSamples];
};

struct Pool {
    // The current job: `state` = job id (32 bits) | lo (16) | hi (16), the unclaimed chunks
    // being [lo, hi). The caller claims from the front, workers from the back: with two
    // threads each keeps taking the same half of the state from gate to gate, so a state that
    // fits in the caches stays in the same core's cache.
    std::atomic<uint64_t> state{0};
    std::atomic<uint32_t> done{0};           // chunks finished in the current job
    std::atomic<uint32_t> callerSleeping{0}; // the caller waits on `done` in the kernel
    std::atomic<uint32_t> wakeSeq{0};        // futex word the idle workers sleep on
    std::atomic<int> sleepers{0};           // workers in deep sleep (see idle)
    std::atomic<int> threads{1};    // participants: the caller and workers 1 .. threads - 1
    std::atomic<bool> paused{false}; // the caller runs serially (Policy): workers sleep at once
    Policy policy;                   // guarded by `busy`
    int64_t lastEnd = 0;             // when the previous loop ended (guarded by `busy`)
    int idleLoops = 0;               // parallel loops in a row that workers took no chunk of
    ChunkFn fn = nullptr; // the current job's; written before `state` is published
    void *ctx = nullptr;
    int chunks = 0;
    int order = 0; // the job's chunk order (chunkAt); written before `state` is published
    uint32_t jobId = 0;
    std::mutex busy; // one loop at a time; a second caller thread runs its loop serially
    std::mutex grow; // guards `workers`
    int workers = 0; // started worker threads (never stopped; surplus ones sleep)

    static int loOf(uint64_t s) { return int((s >> 16) & 0xFFFF); }
    static int hiOf(uint64_t s) { return int(s & 0xFFFF); }
    bool workLeft() const {
        const uint64_t s = state.load(std::memory_order_seq_cst);
        return loOf(s) < hiOf(s);
    }

    // Claims the first (front) or last unclaimed chunk of the current job; false if none.
    bool claim(bool front, int &chunk) {
        uint64_t s = state.load(std::memory_order_acquire);
        for (;;) {
            const int lo = loOf(s), hi = hiOf(s);
            if (lo >= hi) return false;
            const uint64_t next = front ? s + (uint64_t(1) << 16) : s - 1;
            if (state.compare_exchange_weak(s, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
                chunk = front ? lo : hi - 1;
                return true;
            }
        }
    }

    bool wanted(int index) const { return index < threads.load(std::memory_order_seq_cst); }

    // A worker without work: naps of growing length (each a futex wait with a timeout, which
    // costs the caller nothing), then, after about 13 ms, or at once while the caller backs
    // off, a deep sleep that the caller ends with a wake-up call. Waking a thread is a system
    // call and, in a virtual machine, an inter-processor interrupt (several microseconds):
    // paid per gate it cost as much as the gate, so the caller only pays it for deep sleepers.
    void idle(int index) {
        if (!paused.load(std::memory_order_relaxed)) {
            for (int64_t nap = 50000; nap <= 6400000; nap *= 2) {
                futexWait(&wakeSeq, wakeSeq.load(std::memory_order_relaxed), nap);
                if ((wanted(index) && workLeft()) || paused.load(std::memory_order_relaxed)) return;
            }
        }
        const uint32_t seq = wakeSeq.load(std::memory_order_seq_cst);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (!wanted(index) || !workLeft()) futexWait(&wakeSeq, seq, -1);
        sleepers.fetch_sub(1, std::memory_order_seq_cst);
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
                politeSpin(i);
                if ((i & 127) == 0 && (paused.load(std::memory_order_relaxed) || nowNs() - start > kSpinNs)) break;
            }
            if (!found) {
                idle(index);
                continue;
            }
            int chunk;
            while (claim(false, chunk)) {
                // the job cannot end before this chunk is done: its fields are stable
                const ChunkFn f = fn;
                void *const c = ctx;
                const uint32_t total = uint32_t(chunks);
                chunk = chunkAt(chunk, int(total), order);
                tlsChunk = chunk;
                f(c, chunk);
                tlsChunk = 0;
                if (done.fetch_add(1, std::memory_order_seq_cst) + 1 == total &&
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

    // One job; returns how long the caller waited for chunks that workers held after it had
    // run out of chunks to claim, and (in ownNs) how long it worked itself.
    int64_t runParallel(int n, ChunkFn f, void *c, int ord, int64_t &ownNs, int &mine) {
        fn = f, ctx = c, chunks = n, order = ord;
        done.store(0, std::memory_order_relaxed);
        paused.store(false, std::memory_order_relaxed);
        ++jobId;
        const int64_t start = nowNs();
        state.store((uint64_t(jobId) << 32) | uint64_t(n), std::memory_order_seq_cst); // lo 0, hi n
        if (sleepers.load(std::memory_order_seq_cst) > 0) {
            wakeSeq.fetch_add(1, std::memory_order_seq_cst);
            futexWakeAll(&wakeSeq);
        }
        int chunk;
        mine = 0;
        while (claim(true, chunk)) {
            chunk = chunkAt(chunk, n, ord);
            tlsChunk = chunk;
            f(c, chunk);
            ++mine;
        }
        tlsChunk = 0;
        const int64_t own = nowNs();
        ownNs = own - start;
        if (done.fetch_add(uint32_t(mine), std::memory_order_seq_cst) + uint32_t(mine) == uint32_t(n)) return 0;
        // chunks in flight on workers: spin a little, then sleep until the last one is done
        for (int i = 1; done.load(std::memory_order_acquire) != uint32_t(n); ++i) {
            politeSpin(i);
            if ((i & 63) == 0 && nowNs() - own > kCallerSpinNs) {
                callerSleeping.store(1, std::memory_order_seq_cst);
                for (uint32_t d; (d = done.load(std::memory_order_seq_cst)) != uint32_t(n);) futexWait(&done, d);
                callerSleeping.store(0, std::memory_order_relaxed);
                break;
            }
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        return nowNs() - own;
    }
};

std::atomic<Pool *> thePool{nullptr};

// COFACTOR_POOL_STATS=1: counts printed on stderr at exit (diagnostics for the policy).
struct Stats {
    std::atomic<uint64_t> parallel{0}, serial{0}, stalls{0}, idle{0}, workerChunks{0}, chunks{0}, stallNs{0};
    ~Stats() {
        if (!std::getenv("COFACTOR_POOL_STATS")) return;
        std::fprintf(stderr,
                     "cofactor pool: %llu parallel loops (%llu of %llu chunks on workers), %llu stalls (%.1f ms), "
                     "%llu runs of idle workers, %llu loops serial by policy\n",
                     (unsigned long long)parallel, (unsigned long long)workerChunks, (unsigned long long)chunks,
                     (unsigned long long)stalls, double(stallNs.load()) * 1e-6, (unsigned long long)idle,
                     (unsigned long long)serial);
    }
} stats;
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

void run(int chunks, uint64_t work, ChunkFn fn, void *ctx) {
    const int saved = tlsChunk;
    // every other loop of this thread walks its chunks the other way round (chunkAt)
    const int order = chunks > 1 && alternateOrder() ? 1 + int(tlsLoops++ & 1) : 0;
    auto serial = [&] {
        for (int c = 0; c < chunks; ++c) {
            const int chunk = order == 2 ? groupsDown(c, chunks) : c;
            tlsChunk = chunk;
            fn(ctx, chunk);
        }
        tlsChunk = saved;
    };
    if (chunks <= 1 || numThreads() <= 1) return serial();
    Pool *p = pool();
    std::unique_lock<std::mutex> lock(p->busy, std::try_to_lock);
    if (!lock.owns_lock()) return serial();
    Policy &policy = p->policy;
    const int64_t start = nowNs();
    const int64_t gap = start - p->lastEnd;
    const int64_t from = gap >= 0 && gap < kMaxGapNs ? p->lastEnd : start; // see Policy
    if (!policy.parallelNow()) {
        p->paused.store(true, std::memory_order_relaxed);
        serial();
        stats.serial.fetch_add(1, std::memory_order_relaxed);
        p->lastEnd = nowNs();
        policy.record(p->lastEnd - from, double(work));
        return;
    }
    const int threads = numThreads();
    p->threads.store(threads, std::memory_order_relaxed);
    p->ensureWorkers(threads);
    int64_t own = 0;
    int mine = 0;
    const int64_t stall = p->runParallel(chunks, fn, ctx, order, own, mine);
    stats.parallel.fetch_add(1, std::memory_order_relaxed);
    stats.chunks.fetch_add(uint64_t(chunks), std::memory_order_relaxed);
    stats.workerChunks.fetch_add(uint64_t(chunks - mine), std::memory_order_relaxed);
    if (stall > kStallNs && stall > own / 2) {
        stats.stalls.fetch_add(1, std::memory_order_relaxed);
        stats.stallNs.fetch_add(uint64_t(stall), std::memory_order_relaxed);
        p->idleLoops = 0;
        policy.stalled(stall);
        p->paused.store(true, std::memory_order_relaxed);
        p->lastEnd = nowNs();
        return;
    }
    p->lastEnd = nowNs();
    // the workers took nothing, loop after loop: they are not getting a CPU (see Policy)
    p->idleLoops = mine == chunks ? p->idleLoops + 1 : 0;
    if (p->idleLoops >= Policy::kIdleLoops) {
        stats.idle.fetch_add(1, std::memory_order_relaxed);
        p->idleLoops = 0;
        policy.stalled(p->lastEnd - from);
        p->paused.store(true, std::memory_order_relaxed);
        return;
    }
    policy.record(p->lastEnd - from, double(work));
}

} // namespace cf::pool

extern "C" {
int64_t cf_rt_num_threads(void) { return cf::pool::numThreads(); }
void cf_rt_set_num_threads(int64_t n) {
    cf::pool::setNumThreads(n > 0 ? int(std::min<int64_t>(n, 1 << 20)) : 0);
}
int64_t cf_rt_parallel_loops(void) { return int64_t(cf::pool::stats.parallel.load(std::memory_order_relaxed)); }
}
