#include "TermSampling.hpp"

#include <algorithm>
#include <cmath>

#include "Error.hpp"
#include "StateVector.hpp"

namespace cf {

bool finiteDistribution(const std::vector<double> &probs) {
    double total = 0;
    for (double p : probs) total += p;
    return std::isfinite(total) && total > 0;
}

bool isIdentityTerm(const ObsTerm &t) {
    return std::all_of(t.factors.begin(), t.factors.end(),
                       [](const ObsFactor &f) { return f.kind == CF_OBS_IDENTITY; });
}

TermBasis rotateToEigenbasis(const ObsTerm &t, cplx *state, int n) {
    TermBasis basis;
    const Controls none;
    const double minusQuarterPi = -M_PI / 4;
    static const double kNoParams[1] = {0}; // the parameterless gates read none
    auto gate = [&](int64_t id, const double *p, int64_t wire) {
        applyGateMatrix(state, n, baseGateMatrix(id, p ? p : kNoParams, 1, false), &wire, none);
    };
    for (const auto &f : t.factors) {
        if (f.kind == CF_OBS_IDENTITY) continue;
        basis.wires.insert(basis.wires.end(), f.wires.begin(), f.wires.end());
        if (f.kind == ObsFactor::kHermitian) {
            GateMatrix vdag;
            vdag.shape = Shape::Dense;
            vdag.k = int(f.wires.size());
            basis.eigenvalues.emplace_back();
            hermitianEigen(f.matrix, size_t(1) << vdag.k, basis.eigenvalues.back(), vdag.data);
            daggerInPlace(vdag);
            applyGateMatrix(state, n, vdag, f.wires.data(), none);
            continue;
        }
        basis.eigenvalues.push_back({1.0, -1.0});
        const int64_t w = f.wires[0];
        if (f.kind == CF_OBS_PAULIX) gate(CF_GATE_Hadamard, nullptr, w);
        if (f.kind == CF_OBS_PAULIY) {
            gate(CF_GATE_PauliZ, nullptr, w);
            gate(CF_GATE_S, nullptr, w);
            gate(CF_GATE_Hadamard, nullptr, w);
        }
        if (f.kind == CF_OBS_HADAMARD) gate(CF_GATE_RY, &minusQuarterPi, w);
    }
    return basis;
}

void termMoments(const TermBasis &basis, const std::vector<uint32_t> &outcomes, double coeff,
                 double &mean, double *var) {
    double sum = 0, sum2 = 0;
    for (uint32_t o : outcomes) {
        double e = 1;
        int shift = int(basis.wires.size());
        for (const auto &ev : basis.eigenvalues) {
            shift -= __builtin_ctzll(ev.size());
            e *= ev[(o >> shift) & (ev.size() - 1)];
        }
        sum += e;
        sum2 += e * e;
    }
    const double shots = double(outcomes.size());
    const double m = sum / shots;
    mean = coeff * m;
    if (var) *var = coeff * coeff * std::max(0.0, sum2 / shots - m * m);
}

ObsTerm combinedTerm(const Observable &obs) {
    std::vector<int64_t> wires;
    for (const auto &t : obs.terms)
        for (const auto &f : t.factors)
            for (int64_t w : f.wires)
                if (std::find(wires.begin(), wires.end(), w) == wires.end()) wires.push_back(w);
    const int k = int(wires.size());
    if (k > kMaxCombinedWires)
        fail(CF_ERR_NOT_SUPPORTED, "the variance of a sum of observables with shots samples the "
             "sum's eigenbasis, a dense matrix on its ", k, " wires (at most ", kMaxCombinedWires,
             " are supported): use analytic mode (shots=None) or fewer wires");
    // The same observable on a k-qubit register (wire wires[i] -> i, so that wires[0] is the
    // most significant bit, as for a Hermitian factor), applied to each basis vector: the
    // columns of its matrix.
    Observable local = obs;
    for (auto &t : local.terms)
        for (auto &f : t.factors)
            for (auto &w : f.wires) w = std::find(wires.begin(), wires.end(), w) - wires.begin();
    const size_t dim = size_t(1) << k;
    ObsFactor sum;
    sum.kind = ObsFactor::kHermitian;
    sum.wires = wires;
    sum.matrix.assign(dim * dim, 0);
    std::vector<cplx> basis(dim, 0), column(dim), scratch(needsScratch(local, k) ? dim : 0);
    for (size_t j = 0; j < dim; ++j) {
        basis[j] = 1;
        applyObservable(local, basis.data(), column.data(), scratch.data(), k);
        basis[j] = 0;
        for (size_t i = 0; i < dim; ++i) sum.matrix[i * dim + j] = column[i];
    }
    ObsTerm term;
    term.factors.push_back(std::move(sum));
    return term;
}

} // namespace cf
