// Estimating one observable term from shots. Shared by the single-process device and the
// MPI-distributed one (which calls it on its shard once the term's wires are local), so that
// both draw the same eigenvalues from the same outcomes.
#pragma once

#include <cstdint>
#include <vector>

#include "Observables.hpp"

namespace cf {

// A probability vector that can be sampled: finite and not all zero (a NaN state gives NaN
// estimates, as the analytic values do).
bool finiteDistribution(const std::vector<double> &probs);

// True when every factor of the term is the identity: every shot then gives eigenvalue 1.
bool isIdentityTerm(const ObsTerm &t);

// The computational basis a term is measured in, after rotateToEigenbasis.
struct TermBasis {
    std::vector<int64_t> wires;                   // the factors' wires, in factor order
    std::vector<std::vector<double>> eigenvalues; // per non-identity factor, by basis index
};

// Rotates `state` (n qubits, in place; pass a copy) so that each non-identity factor's
// eigenbasis is the computational basis: Pauli-type factors with PennyLane's diagonalizing
// gates (X -> H, Y -> Z S H, Hadamard -> RY(-pi/4); eigenvalue (-1)^bit), Hermitian ones with
// V^dagger from their eigendecomposition.
TermBasis rotateToEigenbasis(const ObsTerm &t, cplx *state, int n);

// Mean (and variance when var is not null) of coeff * eigenvalue over the drawn outcomes, an
// outcome indexing the marginal distribution of basis.wires (first factor most significant).
void termMoments(const TermBasis &basis, const std::vector<uint32_t> &outcomes, double coeff,
                 double &mean, double *var);

// A sum of several terms as one term: a single Hermitian factor, the sum's matrix on the union
// of its terms' wires (in order of first appearance). Sampling it draws eigenvalues of the
// whole sum, which is what PennyLane's default.qubit does for qml.var of a Sum/Hamiltonian
// with shots (the terms need not commute, so they cannot be sampled one by one).
// CF_ERR_NOT_SUPPORTED beyond kMaxCombinedWires wires (a dense 2^k x 2^k eigenproblem).
constexpr int kMaxCombinedWires = 8;
ObsTerm combinedTerm(const Observable &obs);

} // namespace cf
