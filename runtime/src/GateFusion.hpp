// Gate fusion: the device queues gates instead of applying each as its own pass over the
// state, and multiplies runs of gates on few qubits into one matrix applied in one pass
// (as qsim and Lightning do): fewer passes over the state, each with more arithmetic, which
// pays when a pass is bound by the state's traffic rather than by its FMAs (see below).
//
// Pending gates are kept as blocks on pairwise disjoint wire sets. Blocks on disjoint wires
// commute, so each block can be applied whenever it must be, independently of the others:
//   - a gate whose wires (targets and controls) overlap some blocks joins them into one
//     block when the union has at most maxQubits wires; otherwise the largest overlapping
//     blocks are applied until it fits;
//   - a gate that cannot be fused (PauliRot, GlobalPhase, more than maxQubits wires) applies
//     the blocks it overlaps, then itself, directly;
//   - anything that reads or replaces the state flushes (or discards) every block first:
//     the device does that in every method other than apply.
// A block of one gate is applied by applyOperation, so lone gates keep their specialised
// kernels (CNOT stays a swap of half the state). The recorded tape (capi.cpp) is untouched:
// it keeps every operation individually, so the adjoint Jacobian, parameter-shift replays
// and mid-circuit measurements see exactly the operations that were called.
//
// Gates are first only queued; the queue goes through the fusion above when the state is
// read, except that an expval of Z words leaves the gates outside its light cone queued
// (LightCone.hpp).
//
// COFACTOR_FUSION=0 switches fusion off (for debugging and for the fused/unfused tests);
// COFACTOR_FUSION_QUBITS sets maxQubits (1..6); COFACTOR_FUSION_MIN_QUBITS: registers
// smaller than this are not fused; COFACTOR_FUSION_TILE_QUBITS / _TILE_MIN_QUBITS: the
// tiles (see Ready below). They are read at every device reset.
//
// The defaults are measured (one thread, CPU time, Xeon with AVX-512; benchmark section 6).
// Before the stream kernel (FusedKernels.inc): SEL forward, 4 layers, unfused / k=2 / k=3:
// n=14 0.74 / 1.05 / 0.88 ms, n=16 4.5 / 4.4 / 5.2 ms, n=18 31 / 23 / 23 ms, n=20 186 / 145 /
// 124 ms (k=4: 188, k=5: 129); the long 16-wire circuit 46 / 23 / 36 ms. With it (medians of
// 7 batches, loaded machine, load average 5-7 on 2 cores, so +-20%): SEL n=16 unfused / k=2
// / k=3 / k=4 3.0 / 2.2-2.5 / 2.6-3.5 / 4.0-5.6 ms, n=20 119 / 66-74 / 56-57 / 72-73 ms; the
// long circuit 40 / 17.2-17.6 / 17.6-17.9 / 23.7 ms (Catalyst in the same runs: SEL n=16 3.5
// ms, n=20 117-134 ms, long 40-56 ms). On main 23cb0ec (load 1.3-1.7, default k, medians
// of 3 alternated runs), with / without the stream kernel / Catalyst: SEL n=16 2.05 / 2.33
// / 3.28 ms, n=20 52.3 / 61.3 / 119 ms, the long circuit 17.1 / 18.9 / 44.0 ms. Most fused
// blocks are CNOTs after single-qubit gates, block diagonal with two halves, which the stream kernel multiplies at half the FMAs; with
// that, 2-wire blocks pay from 2^16 amplitudes on and 3-wire ones from 2^19: below, the
// state is in L2 and a 3-wire block's extra FMAs cost more than the passes they save; above,
// k = 4's blocks (denser: four times the FMAs per amplitude) do not pay. Session 8: that
// loss of k = 3 at n = 16-18 came from the blocks touching the last two wires (the gather
// kernel) and from pure-CNOT blocks (denseK); with the lane kernel and permutation blocks on
// the stream kernel (FusedKernels.inc), k = 3 beats k = 2 from n = 16 (in-process A/B, one
// thread, k=3/k=2: long circuit 0.93x, SEL n=16 0.94-0.96x, n=18 0.77-0.80x; runtime/README.md).
//
// Session 18: Hadamard-phase blocks. A block of Hadamards (at most one per wire, before any
// operation on several wires touches the wire), diagonal gates and permutations (CNOT, SWAP,
// X, Toffoli, CZ) is M = Dout P H_S Din; HadamardBlocks.cpp checks that factorisation against
// M and applies it with the butterfly kernel (FusedKernels.inc, hadamardBlocks): an add per
// Hadamard wire and two complex scales per amplitude, instead of 2^|S| complex FMAs. Such a
// union may grow to kHadamardQubits = 4 wires at the default k = 3 (addNow), and splitPays
// prices it by Branching::work. The long 16-wire circuit (H, T, CNOT chain, RZ; benchmark
// section 6), in-process, one thread, CPU time, alternated: 6.7-7.0 ms against 8.1-8.3 ms
// without (COFACTOR_FUSION_HADAMARD=0, or main); SEL forward n = 16 unchanged (0.82 / 0.84 ms).
#pragma once

#include <cstdint>
#include <vector>

#include "QuantumDevice.hpp"
#include "StateVector.hpp"
#include "TileSweep.hpp"

namespace cf {

constexpr int kMaxFusionQubits = 6;
constexpr int kDefaultFusionMinQubits = 16;
constexpr int kWideFusionMinQubits = 16; // from here the default width is 3, below it 2
constexpr size_t kMaxPending = 4096; // queued operations before everything is applied
constexpr int kDefaultTileQubits = 15; // GateFuser::drain: 2^15 amplitudes = 512 KiB tiles
constexpr int kTileMinQubits = 20;     // smaller states (16 MiB) stay in the L3 anyway

// sv = M sv for a dense 2^k x 2^k row-major M on `wires` (3 <= k <= kMaxFusionQubits, or
// k = 2 when the lowest bit of `wires` is at least 2), one pass with the matrix in cache
// (FusedKernels.inc; defined in StateVector.cpp per ISA).
void applyFusedDense(cplx *sv, int n, const cplx *M, const int64_t *wires, int k);

// sv = Dout P H_S Din sv on `wires` (2 <= k <= 4): Din and Dout diagonal (dout[i] is the
// factor of the amplitude stored at local index perm[i], Hadamard normalisation included),
// H_S the (unnormalised) Hadamards on the local bits of smask, P the permutation that moves
// local index i to perm[i] (FusedKernels.inc). Returns false, touching nothing, where this
// ISA has no such kernel for the block (a wire inside a vector, or fewer than 2 bits in smask).
bool applyHadamardPhase(cplx *sv, int n, const int64_t *wires, int k, int smask, const int *perm, const cplx *din,
                        const cplx *dout, bool hasDin);

// sv[j] = thi[i >> h] tlo[i & (2^h - 1)], i = lhi[j >> h] ^ llo[j & (2^h - 1)], for all 2^n
// amplitudes (identity: i = j): the product prefix's state (FusedKernels.inc).
void writeProductState(cplx *sv, int n, int h, const cplx *tlo, const cplx *thi, const uint64_t *llo,
                       const uint64_t *lhi, bool identity);

// dst[j] = src[lhi[j >> h] ^ llo[j & (2^h - 1)]] for all 2^n amplitudes (FusedKernels.inc).
void gatherLinear(cplx *dst, const cplx *src, int n, int h, const uint64_t *llo, const uint64_t *lhi);

// The pieces the forward fuser and the adjoint Jacobian's backward fuser (AdjointFusion.hpp)
// share. An operation's "local wires" are its targets, then its controls (built-in first).
namespace fusion {
// COFACTOR_FUSED_STREAM_OFF set (read once per process): fused blocks take the gather kernel
// and 2-wire blocks the chunked kernels, as before the stream kernel (for A/B timings).
bool streamKernelOff();
// Gates and unitaries with a matrix of their own (not PauliRot, not GlobalPhase).
bool fusable(const Operation &op);
int localWires(const Operation &op, int64_t *out); // returns their number
// The dense 2^k x 2^k matrix of g.
std::vector<cplx> denseOf(const GateMatrix &g);
// g (on op's targets) as a matrix on op's numLocal local wires: g where the controls hold,
// identity (identityOutside) or 0 elsewhere.
std::vector<cplx> liftToLocal(const Operation &op, const GateMatrix &g, int numLocal, bool identityOutside);
// op's matrix (inverse: its inverse) on its numLocal local wires.
std::vector<cplx> localMatrix(const Operation &op, int numLocal, bool inverse);
// M <- F M: M on the q wires `wires`, F on the l wires `local` (a subset of them).
void leftMultiply(std::vector<cplx> &M, const int64_t *wires, int q, const std::vector<cplx> &F,
                  const int64_t *local, int l);
// p <- m p for 2 x 2 row-major matrices (a one-wire gate folded into a pending one).
inline void leftMultiply2x2(cplx *p, const cplx *m) {
    const cplx p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
    p[0] = m[0] * p0 + m[1] * p2;
    p[1] = m[0] * p1 + m[1] * p3;
    p[2] = m[2] * p0 + m[3] * p2;
    p[3] = m[2] * p1 + m[3] * p3;
}
bool overlaps(const std::vector<int64_t> &a, const int64_t *w, int k);
// dst[x] = src[L x] for the GF(2)-linear L with L e_k = image[k] (bit k of an amplitude
// index), in one gather pass: dst = R^dagger src for a run R of CNOTs and SWAPs with
// R|x> = |L x>. dst and src must not overlap.
void permuteLinear(cplx *dst, const cplx *src, int n, const uint64_t *image);
// sv = M sv, M dense on the q wires: by the diagonal, permutation, 1-2 wire or fused kernel.
void applyMatrix(cplx *sv, int n, std::vector<cplx> M, const int64_t *wires, int q);

// Applies the block (its operations pool[ops[0]], ... in order, its dense matrix M on
// `wires`) by the Hadamard-phase kernel when M = Dout P H_S Din (HadamardBlocks.cpp) with at
// least two Hadamard wires, and returns whether it did. COFACTOR_FUSION_HADAMARD=0: never.
bool applyHadamardBlock(cplx *sv, int n, const std::vector<cplx> &M, const int64_t *wires, int q, const Operation *pool,
                        const uint32_t *ops, size_t count);

// A block's branching: an upper bound b on log2 of the nonzeros per column of its matrix
// (the stream kernel's work per amplitude grows with them: 2^b FMAs per amplitude for the
// typical block, FusedKernels.inc), kept per block from its gates' kinds alone (no matrix).
// A gate that mixes amplitudes (a dense table gate, a unitary) at most doubles the support
// of each column per target wire: b += its targets. A wire that has mixed since the last
// permutation touching it (`fresh`) keeps the support closed under flipping it, so a further
// one-wire mixing gate on it does not grow b (H T RZ on a wire: b = 1); diagonal gates change
// no support; a permutation of several wires (CNOT, SWAP, Toffoli) breaks that closure.
//
// It also tracks whether the block may be a Hadamard-phase block (applyHadamardBlock), from
// the gates' kinds as that check walks them: Hadamards on wires that had none and no
// operation on several wires yet, diagonal gates, and permutations (CNOT, SWAP, X, Toffoli,
// CZ); its work is then linear in its Hadamard wires (work below).
struct Branching {
    int bits = 0;
    uint64_t fresh = 0; // bit w: wire w (w < 64)
    bool hadamard = true;
    uint64_t hadamardWires = 0, entered = 0; // (as fresh)
    // takes op, on the local wires w (nw of them)
    void note(const Operation &op, const int64_t *w, int nw);
    // the union of two blocks on disjoint wires
    void join(const Branching &other);
    // Whether the block (on `wires` of a register of n qubits) would take the Hadamard-phase
    // kernel: then a width of up to kHadamardQubits pays.
    bool hadamardKernel(const int64_t *wires, size_t count, int n) const;
    // the kernel's work per amplitude, in complex FMAs (GateFuser::splitPays)
    double work(const int64_t *wires, size_t count, int n) const;
};
constexpr int kHadamardQubits = 4; // the widest Hadamard-phase block the fuser builds
} // namespace fusion

class GateFuser {
  public:
    // Reads the environment knobs for a register of n qubits.
    void configure(int n);
    bool enabled() const { return maxQubits_ > 0; }
    int maxQubits() const { return maxQubits_; } // 0: off

    // Queues op (already validated), applying what must be applied now.
    void add(cplx *sv, int n, const Operation &op);
    // Applies every pending block.
    void flush(cplx *sv, int n) {
        if (prefix_) writePrefix(sv, n);
        if (queued_ > 0) replayQueue(sv, n);
        if (!blocks_.empty()) flushAll(sv, n);
        if (!ready_.empty()) drain(sv, n);
    }
    // Before expectation values of Z words (tensor products of PauliZ; bit b of a mask is
    // bit b of an amplitude index) on the state the pending gates would make: applies every
    // pending block but those made only of CNOTs, SWAPs and diagonal gates, which stay
    // pending, and rewrites each mask so that its expectation on the state as it is now
    // equals the original one's on the full state: such a block maps basis states by a
    // GF(2)-linear permutation times phases, so it moves the probabilities without changing
    // them, and R^dagger Z_m R = Z_m' (blocks commute: they are on disjoint wires). Saves the
    // passes of a circuit's trailing CNOT ring (StronglyEntanglingLayers: 4-9 of ~30-50 at
    // n = 16) and trailing phase gates.
    void flushForZWords(cplx *sv, int n, uint64_t *masks, size_t count);
    // Whether what is pending is exactly the queue, and the queue is ops[i] for each i < count
    // with deferred[i], in order (compared by value): then the state as it is now is that of
    // the other operations alone (the adjoint Jacobian's light cone, LightCone.cpp).
    bool pendingAre(const Operation *ops, size_t count, const std::vector<char> &deferred) const;
    // Forgets the pending blocks (the state is about to be replaced).
    void discard();
    // The state is |0...0> (a device reset): the product prefix starts (see below).
    // Returns whether it takes over writing |0...0> too (fusion on): then the device need not
    // write it, the first flush or the product prefix does (writeProductState writes every
    // amplitude, so a circuit starting with one-wire gates saves the pass that zeroed the
    // state: ~2% of SEL forward at n = 20). Until then the buffer's contents are stale, so
    // everything that reads the state must flush first, as for any queued gate.
    bool startFromZero(int n);
    // Whether the state is still |0...0> since startFromZero (no gate taken, none applied).
    bool atZero() const { return prefix_ && !prefixDirty_; }

  private:
    struct Block {
        std::vector<int64_t> wires;
        std::vector<uint32_t> ops; // indices into pool_, in application order
        fusion::Branching branching;
    };
    // Whether a gate that would join pending blocks should rather apply `applied` (one of
    // them; addNow tries the smallest first) and join the others: when the merged block's
    // work (2^b FMAs per amplitude, b its branching) exceeds that of the two parts apart plus
    // one more pass.
    // Where it pays: the first link of a CNOT chain after one-wire rotations, where merging
    // {0,1} (b = 2) and {2} (b = 1) gives a dense 8 x 8 block (b = 3, 8 FMAs per amplitude)
    // while {0,1} now and {1,2} later cost 4 + 2 (the next link joins {1,2} and {3} at b = 2);
    // and the chain's last block, still pending when the next round's rotations come, which
    // they would make dense. The long 16-wire circuit of benchmark section 6: per round one
    // dense block and one 2-wire block become one 4-group block.
    // COFACTOR_FUSION_PASS_COST: a pass's cost in FMAs per amplitude (< 0: never split).
    bool splitPays(const size_t *hits, size_t count, size_t applied, const Operation &op, const int64_t *w, int nw, int n) const;
    double passCost_ = -1;
    void flushAll(cplx *sv, int n);
    // The fusion proper: op joins the pending blocks, which are applied as they must be.
    void addNow(cplx *sv, int n, const Operation &op);

    // The queue: operations are first only queued (add), and go through addNow when the
    // state is read (flush, replayQueue) or when kMaxPending of them wait; flushForZWords
    // passes only those in the light cone of its words (LightCone.hpp) and leaves the others
    // queued. COFACTOR_FUSION_LIGHT_CONE=0: every operation goes to addNow at once.
    void replayQueue(cplx *sv, int n);
    bool lightCone_ = true;
    bool hadamard_ = true; // COFACTOR_FUSION_HADAMARD: blocks may take applyHadamardBlock
    // The queue is what an earlier flushForZWords left (no gate queued since): a further one
    // applies it all instead of walking it again. The light cone pays when one expval reads
    // the state; with an expval per wire (qml.expval(Z(w)) for every w) each would apply a
    // small cone of its own, unfused with the rest (SEL n = 20, 20 expvals: ~10% slower than
    // one fused flush), so the first one takes its cone and the next applies the remainder.
    bool queueIsConeRest_ = false;
    std::vector<Operation> queue_; // slots reused across calls (their vectors keep capacity)
    size_t queued_ = 0;
    std::vector<char> deferred_;
    void applyBlock(cplx *sv, int n, const Block &b);

    // Tiles (cache blocking). A block whose wires are all among the low tileQubits_ bits
    // maps each tile of 2^tileQubits_ consecutive amplitudes (512 KiB: the L2) to itself, so
    // consecutive such blocks need not each make a pass over a state far beyond the caches:
    // they wait in ready_ (in order: a lone gate with its kernel's matrix, a fused block's
    // dense matrix) and are applied tile by tile in ONE parallel pass, each tile by all of
    // them while it is in the L2 (drain, by TileSweep.hpp's tiles::apply, which the adjoint
    // walk's chunked groups share). Any other application, and every flush, drains first, so
    // the order of the blocks is kept. SEL forward at n = 22: 31 block passes per call become
    // 20. COFACTOR_FUSION_TILE_QUBITS sets the tile (log2 amplitudes; 0: off); registers
    // below kTileMinQubits are not tiled.
    bool tileable(int n, const int64_t *wires, int count) const;
    void drain(cplx *sv, int n);
    std::vector<tiles::Step> ready_;
    int tileQubits_ = 0;
    bool absorb(const Operation &op);
    void writePrefix(cplx *sv, int n);

    // Product prefix: from |0...0>, single-qubit gates keep the state a product of one
    // 2-vector per wire, and CNOTs and SWAPs after them only permute its amplitudes; so the
    // first layer of a layered circuit (Rot on every wire, then a CNOT ring) is kept as n
    // 2-vectors and a permutation and written in one pass (writeProductState) when the
    // first other operation comes or the state is read, instead of a pass per gate or block.
    bool prefix_ = false;        // the state is |0...0> under the pending wire vectors/swaps
    bool prefixDirty_ = false;   // some gate was absorbed
    bool zeroUnwritten_ = false; // |0...0> is not in the buffer yet (startFromZero)
    std::vector<cplx> wireVec_;  // 2 per wire
    std::vector<std::pair<int64_t, int64_t>> cnots_; // (control, target), in order

    int maxQubits_ = 0;
    std::vector<Block> blocks_;
    std::vector<Operation> pool_; // slots reused across flushes (their vectors keep capacity)
    size_t used_ = 0;
};

} // namespace cf
