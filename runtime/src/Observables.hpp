// Observables as the ABI builds them: every observable is normalised to a weighted sum of
// tensor-product terms (a named observable is one term with one factor), so expval, var,
// sampling and the adjoint Jacobian each handle exactly one shape.
#pragma once

#include <cstdint>
#include <vector>

#include "GateMatrices.hpp"

namespace cf {

struct ObsFactor {
    int kind;                   // a cf_named_obs, or kHermitian
    std::vector<int64_t> wires; // 1 wire for named factors
    std::vector<cplx> matrix;   // Hermitian only: 2^k x 2^k row-major
    static constexpr int kHermitian = -1;
};

struct ObsTerm {
    double coeff = 1.0;
    std::vector<ObsFactor> factors; // on pairwise disjoint wires
};

struct Observable {
    std::vector<ObsTerm> terms;
};

// Constructors validate against the register size n (and throw cf::Error).
Observable makeNamedObs(int64_t kind, int64_t wire, int n);
Observable makeHermitianObs(const double *matrix, const int64_t *wires, int64_t numWires, int n);
Observable makeTensorObs(const std::vector<const Observable *> &factors);
Observable makeHamiltonianObs(const double *coeffs, const std::vector<const Observable *> &terms);

// The factor as something applyGateMatrix understands.
GateMatrix factorMatrix(const ObsFactor &f);

// Pauli-word terms (I/X/Y/Z factors only) as bit masks over amplitude indices.
struct PauliMasks {
    uint64_t x = 0, y = 0, z = 0;
};
bool pauliMasks(const ObsTerm &t, int n, PauliMasks &out);

// out = O in; scratch: one more state-sized buffer, needed when needsScratch(obs, n) (a sum
// with a term that is not a Pauli word), else unused.
void applyObservable(const Observable &obs, const cplx *in, cplx *out, cplx *scratch, int n);
bool needsScratch(const Observable &obs, int n);

// Eigendecomposition of a Hermitian dim x dim matrix (row-major): H = V diag(evals) V^dagger,
// eigenvectors in the columns of V (row-major too). Cyclic Jacobi: fine for the small
// matrices of Hermitian observables, and no LAPACK dependency.
void hermitianEigen(const std::vector<cplx> &H, size_t dim, std::vector<double> &evals,
                    std::vector<cplx> &V);

double expvalAnalytic(const Observable &obs, const cplx *sv, int n);
double varAnalytic(const Observable &obs, const cplx *sv, int n);

} // namespace cf
