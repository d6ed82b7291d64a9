// Gate fusion: the device queues gates instead of applying each as its own pass over the
// state, and multiplies runs of gates on few qubits into one matrix applied in one pass
// (as qsim and Lightning do). A state-vector pass is memory-bound, so a 3-qubit dense pass
// costs about what a 1-qubit one does; SEL-like circuits then take several-fold fewer passes.
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
// COFACTOR_FUSION=0 switches fusion off (for debugging and for the fused/unfused tests);
// COFACTOR_FUSION_QUBITS sets maxQubits (1..6, default kDefaultFusionQubits);
// COFACTOR_FUSION_MIN_QUBITS: registers smaller than this are not fused (default 10), as
// there a gate costs less than the bookkeeping. They are read at every device reset.
#pragma once

#include <cstdint>
#include <vector>

#include "QuantumDevice.hpp"
#include "StateVector.hpp"

namespace cf {

constexpr int kDefaultFusionQubits = 3;
constexpr int kMaxFusionQubits = 6;
constexpr int kDefaultFusionMinQubits = 10;
constexpr size_t kMaxPending = 4096; // queued operations before everything is applied

// sv = M sv for a dense 2^k x 2^k row-major M on `wires` (3 <= k <= kMaxFusionQubits), one
// pass with the matrix in cache (FusedKernels.inc; defined in StateVector.cpp per ISA).
void applyFusedDense(cplx *sv, int n, const cplx *M, const int64_t *wires, int k);

class GateFuser {
  public:
    // Reads the environment knobs for a register of n qubits.
    void configure(int n);
    bool enabled() const { return maxQubits_ > 0; }

    // Queues op (already validated), applying what must be applied now.
    void add(cplx *sv, int n, const Operation &op);
    // Applies every pending block.
    void flush(cplx *sv, int n) {
        if (!blocks_.empty()) flushAll(sv, n);
    }
    // Forgets the pending blocks (the state is about to be replaced).
    void discard();

  private:
    struct Block {
        std::vector<int64_t> wires;
        std::vector<uint32_t> ops; // indices into pool_, in application order
    };
    void flushAll(cplx *sv, int n);
    void applyBlock(cplx *sv, int n, const Block &b);

    int maxQubits_ = 0;
    std::vector<Block> blocks_;
    std::vector<Operation> pool_; // slots reused across flushes (their vectors keep capacity)
    size_t used_ = 0;
};

} // namespace cf
