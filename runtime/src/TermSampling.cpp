#include "TermSampling.hpp"

#include <algorithm>
#include <cmath>

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

} // namespace cf
