// The backward light cone of Z-word expectation values over a run of queued operations: which
// of them an expectation value of tensor products of PauliZ ("Z words") needs applied, and
// which can stay pending (GateFuser::flushForZWords).
//
// For <psi| U^dagger Z U |psi> with U = U_m ... U_1, walk back from U_m with the set W of the
// wires of the operations kept so far for application ("applied"):
//   - an operation on a wire of W must be applied (it does not commute with a later applied one);
//   - otherwise it commutes with every later applied operation, so it can be moved past them to
//     the end of the circuit and stay pending ("deferred"); there it acts on Z before the
//     applied ones do: if it is off the support of every Z word, U^dagger Z U = Z; if it maps Z
//     words to Z words (CNOT, SWAP, diagonal gates) the words are conjugated by it; otherwise
//     it is applied after all.
// The expectation values on the state with only the applied operations are then those of the
// rewritten words, exactly; the deferred operations stay queued, in order, and are applied if
// anything else reads the state. A layered circuit measured on one wire keeps most of its last
// layer pending (StronglyEntanglingLayers, <Z0>: 16 of the 20 one-wire gates of the last layer
// at n = 20; the long 16-wire circuit of the benchmarks: most gates of its last rounds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "QuantumDevice.hpp"

namespace cf::fusion {

// op maps Z words to Z words: a CNOT (X with one control on 1), a SWAP, or diagonal.
bool zWordMap(const Operation &op);
// mask <- the Z word R^dagger Z_mask R, R = op (a zWordMap operation); bit b of a mask is bit b
// of an amplitude index.
uint64_t conjugateZ(const Operation &op, int n, uint64_t mask);

// Marks deferred[i] for ops[0..count) as above and rewrites the masks (count of them) into the
// words whose expectation on the state after the applied operations alone equals the original
// words' on the state after all of them.
void lightCone(const Operation *ops, size_t count, int n, uint64_t *masks, size_t maskCount,
               std::vector<char> &deferred);

} // namespace cf::fusion
