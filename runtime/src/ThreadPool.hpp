// The runtime's threads: a small pool that runs the chunks of one loop over amplitudes.
//
// Why not OpenMP: an OpenMP region ends at a barrier that waits for every thread of the team.
// On a loaded machine (other processes on every core) a worker the OS has not scheduled yet
// holds the whole region for a time slice, once per gate: a 16-wire circuit of 2,050 gates
// took 11x to 135x its one-thread time (issue 14). Here a loop is cut into chunks, and the
// calling thread and the workers take chunks from one atomic counter. The caller works too and
// only waits for chunks some worker actually took; a worker that never got a CPU takes none and
// costs nothing. Chunk boundaries depend on the loop's size only -- never on the thread count
// or on which thread ran which chunk -- and sums add per-chunk partials in chunk order, so
// every result is bitwise the same with 1, 2 or 64 threads.
//
// Thread count: COFACTOR_NUM_THREADS, else the first entry of OMP_NUM_THREADS, else the CPUs
// of the process's affinity mask (sched_getaffinity: taskset, cgroups cpusets, Slurm).
#pragma once

#include <cstdint>

namespace cf::pool {

// At most this many chunks per loop (the per-chunk partials of a sum live on the stack).
constexpr int kMaxChunks = 256;

// The resolved thread count (>= 1), and a change of it (n <= 0: back to the default).
int numThreads();
void setNumThreads(int n);

// Loops over fewer amplitudes than this (2^16, 1 MiB of state: tens of microseconds of work
// per loop) run on the calling thread in one piece; COFACTOR_PARALLEL_MIN_QUBITS overrides.
uint64_t minParallelAmps();

// How many chunks a loop over `count` items touching `amps` amplitudes is cut into: 1 below
// minParallelAmps, else about one chunk per kChunkAmps amplitudes, at least 2, at most
// kMaxChunks and count. A function of the sizes only (determinism, see above).
int chunkCount(uint64_t count, uint64_t amps);

// Runs fn(ctx, c) for every c in [0, chunks), on the calling thread and whichever workers
// are awake, and returns when all have finished. Serial when there is one thread, when
// another thread's loop holds the pool, when chunks <= 1, or when the pool's policy found
// that a second thread does not pay on this machine now (ThreadPool.cpp, Policy). `work`:
// the loop's size (amplitudes), for that policy's throughput figures.
using ChunkFn = void (*)(void *ctx, int chunk);
void run(int chunks, uint64_t work, ChunkFn fn, void *ctx);

// The chunk the current thread is running (0 outside run): the slot a kernel's per-chunk
// scratch or partial sums use. initial-exec: one load from the thread pointer, as cheap as
// omp_get_thread_num was.
extern thread_local int tlsChunk __attribute__((tls_model("initial-exec")));
inline int currentChunk() { return tlsChunk; }

// [begin, end) of chunk c of `chunks` equal ranges of [0, count).
inline uint64_t chunkBegin(uint64_t count, int chunks, int c) {
    const uint64_t base = count / uint64_t(chunks), rem = count % uint64_t(chunks);
    return base * uint64_t(c) + (uint64_t(c) < rem ? uint64_t(c) : rem);
}

} // namespace cf::pool
