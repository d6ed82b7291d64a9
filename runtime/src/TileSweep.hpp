// Applying a queue of steps on the low bits of a register tile by tile (cache blocking).
//
// A step whose wires (targets and controls) all lie on the low t bits maps every tile of
// 2^t consecutive amplitudes to itself: on a tile, it is the same step on a register of t
// qubits, with wire w of the register as wire w - (n - t) of the tile. A queue of such
// steps can therefore be applied tile by tile, each tile taking every step while it sits in
// the L2 (2^15 amplitudes = 512 KiB), in ONE pass over a state far beyond the caches instead
// of one pass per step. Two callers queue such steps: the forward fuser (GateFuser::drain,
// COFACTOR_FUSION_TILE_QUBITS) and the adjoint Jacobian's backward walk (AdjointFuser::run,
// COFACTOR_ADJOINT_CHUNK_QUBITS); each decides which steps wait and when the queue is applied.
//
// The tiles are independent: the thread pool's threads take them (ThreadPool.hpp), and each
// tile's kernels run on its thread in one piece (t is below the pool's parallel threshold),
// so the results are bitwise the same with any thread count. A kernel on a tile may round
// differently from the same kernel on the whole register (its code path can depend on n).
#pragma once

#include <cstdint>
#include <vector>

#include "QuantumDevice.hpp"
#include "StateVector.hpp"

namespace cf::tiles {

// One step on a tile's register (wires already shifted to the tile's).
struct Step {
    enum class Kind : uint8_t { Gate, Matrix, Operation };
    Kind kind = Kind::Gate;
    GateMatrix g;                 // Gate: applyGateMatrix(tile, t, g, targets, ctrls)
    Controls ctrls;               // Gate: its controls
    std::vector<cplx> M;          // Matrix: fusion::applyMatrix(tile, t, M, targets)
    std::vector<int64_t> targets; // Gate and Matrix
    Operation op;                 // Operation: applyOperation(tile, t, op, inverse)
    bool inverse = false;
};

// Whether wires[0 .. count) all lie on the low t bits of an n-qubit register (bit n-1-w of
// an amplitude index is wire w), so that a step on them maps each tile to itself.
bool onLowBits(int n, int t, const int64_t *wires, int count);

// op (inverse: its inverse) as a step on the tiles of t bits of an n-qubit register: a gate
// with its matrix built once (as applyOperation builds it, so the same kernel runs with
// the same numbers), anything else as op with its wires shifted. op's wires must be low.
Step operationStep(const Operation &op, bool inverse, int n, int t);
// M (dense, 2^q x 2^q) on the register's wires[0 .. q) as a step on the tiles of t bits.
Step matrixStep(std::vector<cplx> M, const int64_t *wires, int q, int n, int t);

// Applies steps[0], steps[1], ... in order to every tile of 2^t amplitudes of sv (n qubits,
// t < n): one parallel pass over the tiles. An exception thrown by a step's kernel (an
// interrupt, a failed check) stops the pass and is rethrown here; the state is then partly
// updated, as after any interrupted kernel.
void apply(cplx *sv, int n, int t, const std::vector<Step> &steps);

// True while apply() runs the steps on a tile other than the first: traces print each
// step once per pass, not once per tile.
bool laterTile();

} // namespace cf::tiles
