#include "Observables.hpp"

#include <cmath>

#include "Error.hpp"
#include "StateVector.hpp"
#include "StateVectorDevice.hpp"

namespace cf {

namespace {
const char *kNamedObs[] = {"Identity", "PauliX", "PauliY", "PauliZ", "Hadamard"};

void checkWire(int64_t wire, int n, const char *what) {
    if (wire < 0 || wire >= n)
        fail(CF_ERR_INVALID_ARGUMENT, what, ": wire ", wire, " out of range for a device of ", n,
             " qubits");
}

// Products of terms must act on disjoint wires so that the result stays Hermitian and each
// factor can be diagonalised on its own.
ObsTerm multiplyTerms(const ObsTerm &a, const ObsTerm &b) {
    ObsTerm t;
    t.coeff = a.coeff * b.coeff;
    t.factors = a.factors;
    for (const auto &f : b.factors) {
        for (const auto &g : a.factors)
            for (int64_t w : f.wires)
                for (int64_t v : g.wires)
                    if (w == v)
                        fail(CF_ERR_INVALID_ARGUMENT,
                             "tensor product observable: factors overlap on wire ", w);
        t.factors.push_back(f);
    }
    return t;
}
} // namespace

Observable makeNamedObs(int64_t kind, int64_t wire, int n) {
    if (kind < CF_OBS_IDENTITY || kind > CF_OBS_HADAMARD)
        fail(CF_ERR_INVALID_ARGUMENT, "named observable: unknown kind ", kind,
             " (expected 0..4: Identity, PauliX, PauliY, PauliZ, Hadamard)");
    checkWire(wire, n, kNamedObs[kind]);
    Observable o;
    o.terms.push_back(ObsTerm{1.0, {ObsFactor{int(kind), {wire}, {}}}});
    return o;
}

Observable makeHermitianObs(const double *matrix, const int64_t *wires, int64_t numWires, int n) {
    if (numWires < 1 || numWires > n)
        fail(CF_ERR_INVALID_ARGUMENT, "Hermitian observable: needs 1..", n, " wires, got ",
             numWires);
    if (!matrix || !wires) fail(CF_ERR_INVALID_ARGUMENT, "Hermitian observable: null pointer");
    for (int64_t i = 0; i < numWires; ++i) {
        checkWire(wires[i], n, "Hermitian observable");
        for (int64_t j = 0; j < i; ++j)
            if (wires[i] == wires[j])
                fail(CF_ERR_INVALID_ARGUMENT, "Hermitian observable: wire ", wires[i],
                     " repeated");
    }
    const size_t dim = size_t(1) << numWires;
    ObsFactor f{ObsFactor::kHermitian, std::vector<int64_t>(wires, wires + numWires), {}};
    f.matrix.resize(dim * dim);
    for (size_t i = 0; i < dim * dim; ++i) f.matrix[i] = cplx(matrix[2 * i], matrix[2 * i + 1]);
    double scale = 0, err = 0;
    for (size_t r = 0; r < dim; ++r)
        for (size_t c = 0; c < dim; ++c) {
            scale = std::max(scale, std::abs(f.matrix[r * dim + c]));
            err = std::max(err, std::abs(f.matrix[r * dim + c] - std::conj(f.matrix[c * dim + r])));
        }
    if (!(err <= 1e-8 * std::max(1.0, scale)))
        fail(CF_ERR_INVALID_ARGUMENT, "Hermitian observable: matrix is not Hermitian (max |H - H^dagger| = ",
             err, ")");
    Observable o;
    o.terms.push_back(ObsTerm{1.0, {std::move(f)}});
    return o;
}

Observable makeTensorObs(const std::vector<const Observable *> &factors) {
    if (factors.empty()) fail(CF_ERR_INVALID_ARGUMENT, "tensor observable: no factors");
    // (sum a_i A_i)(sum b_j B_j) = sum a_i b_j A_i B_j
    Observable result = *factors[0];
    for (size_t i = 1; i < factors.size(); ++i) {
        Observable next;
        for (const auto &a : result.terms)
            for (const auto &b : factors[i]->terms) next.terms.push_back(multiplyTerms(a, b));
        result = std::move(next);
    }
    return result;
}

Observable makeHamiltonianObs(const double *coeffs, const std::vector<const Observable *> &terms) {
    Observable result;
    for (size_t i = 0; i < terms.size(); ++i)
        for (const auto &t : terms[i]->terms) {
            result.terms.push_back(t);
            result.terms.back().coeff *= coeffs[i];
        }
    return result;
}

GateMatrix factorMatrix(const ObsFactor &f) {
    static const double none[1] = {0};
    switch (f.kind) {
    case CF_OBS_IDENTITY: return baseGateMatrix(CF_GATE_Identity, none, 1, false);
    case CF_OBS_PAULIX: return baseGateMatrix(CF_GATE_PauliX, none, 1, false);
    case CF_OBS_PAULIY: return baseGateMatrix(CF_GATE_PauliY, none, 1, false);
    case CF_OBS_PAULIZ: return baseGateMatrix(CF_GATE_PauliZ, none, 1, false);
    case CF_OBS_HADAMARD: return baseGateMatrix(CF_GATE_Hadamard, none, 1, false);
    default: {
        GateMatrix g;
        g.shape = Shape::Dense;
        g.k = int(f.wires.size());
        g.data = f.matrix;
        return g;
    }
    }
}

bool pauliMasks(const ObsTerm &t, int n, PauliMasks &out) {
    out = {};
    for (const auto &f : t.factors) {
        if (f.kind == ObsFactor::kHermitian || f.kind == CF_OBS_HADAMARD) return false;
        const uint64_t bit = uint64_t(1) << bitOf(n, f.wires[0]);
        if (f.kind == CF_OBS_PAULIX) out.x |= bit;
        if (f.kind == CF_OBS_PAULIY) out.y |= bit;
        if (f.kind == CF_OBS_PAULIZ) out.z |= bit;
    }
    return true;
}

namespace {
void applyTerm(const ObsTerm &t, cplx *v, int n) {
    const Controls none;
    for (const auto &f : t.factors) applyGateMatrix(v, n, factorMatrix(f), f.wires.data(), none);
}
} // namespace

bool needsScratch(const Observable &obs, int n) {
    if (obs.terms.size() < 2) return false;
    PauliMasks pm;
    for (const auto &t : obs.terms)
        if (!pauliMasks(t, n, pm)) return true;
    return false;
}

void applyObservable(const Observable &obs, const cplx *in, cplx *out, cplx *scratch, int n) {
    const uint64_t size = uint64_t(1) << n;
    // Pauli words (most Hamiltonian terms) in one pass each, written by the first term and
    // accumulated by the others; other terms as a sequence of gate matrices on a copy.
    bool written = false;
    for (const auto &t : obs.terms) {
        PauliMasks pm;
        if (pauliMasks(t, n, pm)) {
            applyPauliWord(in, out, size, pm.x, pm.y, pm.z, t.coeff, written);
            written = true;
            continue;
        }
        cplx *target = written ? scratch : out; // scratch: only sums of several terms use it
        copyState(target, in, size);
        applyTerm(t, target, n);
        if (written) axpy(t.coeff, scratch, out, size);
        else if (t.coeff != 1.0) axpy(t.coeff - 1.0, out, out, size);
        written = true;
    }
    if (!written) fillZero(out, size);
}

void hermitianEigen(const std::vector<cplx> &H, size_t dim, std::vector<double> &evals,
                    std::vector<cplx> &V) {
    std::vector<cplx> A = H;
    V.assign(dim * dim, 0);
    for (size_t i = 0; i < dim; ++i) V[i * dim + i] = 1;
    auto at = [&](std::vector<cplx> &M, size_t r, size_t c) -> cplx & { return M[r * dim + c]; };
    double total = 0;
    for (const auto &x : A) total += std::norm(x);
    for (int sweep = 0; sweep < 100; ++sweep) {
        double off = 0;
        for (size_t p = 0; p < dim; ++p)
            for (size_t q = p + 1; q < dim; ++q) off += std::norm(at(A, p, q));
        if (off <= 1e-30 * total) break;
        for (size_t p = 0; p < dim; ++p)
            for (size_t q = p + 1; q < dim; ++q) {
                const cplx apq = at(A, p, q);
                const double b = std::abs(apq);
                if (b == 0) continue;
                // U = diag(1, e^{-i phi}) G: the phase makes the pair real-symmetric, the
                // real Jacobi rotation G then zeroes it.
                const cplx ph = std::conj(apq) / b; // e^{-i phi}
                const double tau = (at(A, q, q).real() - at(A, p, p).real()) / (2 * b);
                const double t = (tau >= 0 ? 1.0 : -1.0) / (std::abs(tau) + std::sqrt(1 + tau * tau));
                const double c = 1 / std::sqrt(1 + t * t), sn = t * c;
                const cplx u00 = c, u01 = sn, u10 = -sn * ph, u11 = c * ph;
                for (size_t r = 0; r < dim; ++r) { // A <- A U, V <- V U
                    for (auto *M : {&A, &V}) {
                        const cplx x = at(*M, r, p), y = at(*M, r, q);
                        at(*M, r, p) = x * u00 + y * u10;
                        at(*M, r, q) = x * u01 + y * u11;
                    }
                }
                for (size_t cidx = 0; cidx < dim; ++cidx) { // A <- U^dagger A
                    const cplx x = at(A, p, cidx), y = at(A, q, cidx);
                    at(A, p, cidx) = std::conj(u00) * x + std::conj(u10) * y;
                    at(A, q, cidx) = std::conj(u01) * x + std::conj(u11) * y;
                }
            }
    }
    evals.resize(dim);
    for (size_t i = 0; i < dim; ++i) evals[i] = at(A, i, i).real();
}

double expvalAnalytic(const Observable &obs, const cplx *sv, int n) {
    const uint64_t size = uint64_t(1) << n;
    double total = 0;
    std::vector<cplx> tmp; // only for terms that are not Pauli words
    for (const auto &t : obs.terms) {
        PauliMasks pm;
        if (pauliMasks(t, n, pm)) {
            total += t.coeff * pauliExpval(sv, size, pm.x, pm.y, pm.z);
            continue;
        }
        if (tmp.empty()) {
            checkMemory(double(size) * sizeof(cplx), "the copy of the state an expectation value needs");
            tmp.resize(size);
        }
        copyState(tmp.data(), sv, size);
        applyTerm(t, tmp.data(), n);
        total += t.coeff * innerProduct(sv, tmp.data(), size).real();
    }
    return total;
}

double varAnalytic(const Observable &obs, const cplx *sv, int n) {
    const uint64_t size = uint64_t(1) << n;
    PauliMasks pm;
    if (obs.terms.size() == 1 && pauliMasks(obs.terms[0], n, pm)) { // P^2 = I
        const double c = obs.terms[0].coeff, e = pauliExpval(sv, size, pm.x, pm.y, pm.z);
        return c * c * (1.0 - e * e);
    }
    // Var = <O psi|O psi> - <psi|O psi>^2 (O Hermitian)
    const bool scratchNeeded = needsScratch(obs, n);
    checkMemory(double(size) * sizeof(cplx) * (scratchNeeded ? 2 : 1),
                "the copies of the state a variance needs");
    StateBuffer opsi(size), scratch(scratchNeeded ? size : 0);
    applyObservable(obs, sv, opsi.data(), scratch.data(), n);
    const double mean = innerProduct(sv, opsi.data(), size).real();
    return norm2(opsi.data(), size) - mean * mean;
}

} // namespace cf
