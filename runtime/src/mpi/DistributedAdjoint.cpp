// The adjoint Jacobian of the sharded device (the single-process method of
// AdjointJacobian.cpp, on the shards).
#include <algorithm>

#include "../Error.hpp"
#include "DistributedDevice.hpp"

namespace cf {

void DistributedDevice::adjointJacobian(const std::vector<Operation> &tape, int64_t numParams,
                                        const std::vector<const Observable *> &obs, double *jac) {
    // StateVectorDevice::adjointJacobian on the shards: phi and the lambdas
    // follow the qubit map of the state (every exchange moves all of them), and each
    // parametrised operation's inner products are summed over the ranks.
    for (const auto &op : tape)
        if (op.kind == Operation::Kind::Measure)
            fail(CF_ERR_NOT_SUPPORTED, "adjoint Jacobian: the tape contains a mid-circuit "
                                       "measurement; use parameter-shift (cf_rt_tape_replay_shifted)");
    const size_t numObs = obs.size();
    std::fill(jac, jac + numObs * size_t(numParams), 0.0);
    if (numObs == 0 || numParams == 0) return;
    const uint64_t size = localSize();
    bool hasPauliRot = false, hasSum = false;
    for (const auto &op : tape) hasPauliRot |= op.kind == Operation::Kind::PauliRot;
    for (const auto *o : obs) hasSum |= needsScratch(*o, n_);
    checkMemory(double(2 + numObs + hasPauliRot + hasSum) * double(size) * sizeof(cplx),
                "the adjoint Jacobian's shard copies");
    StateBuffer phi(size), mu(hasPauliRot ? size : 0), scratch(hasSum ? size : 0);
    std::vector<StateBuffer> lambda(numObs);
    struct Followers { // the buffers stop following the map however this ends
        std::vector<cplx *> &f;
        ~Followers() { f.clear(); }
    } guard{followers_};
    copyState(phi.data(), sv(), size);
    followers_.push_back(phi.data());
    for (size_t b = 0; b < numObs; ++b) {
        std::vector<int64_t> all;
        for (const auto &t : obs[b]->terms)
            for (int64_t w : termWires(t))
                if (std::find(all.begin(), all.end(), w) == all.end()) all.push_back(w);
        makeLocal(all.data(), all.size());
        Observable local;
        for (const auto &t : obs[b]->terms) local.terms.push_back(localTerm(t));
        lambda[b].resize(size);
        applyObservable(local, sv(), lambda[b].data(), scratch.data(), L_);
        followers_.push_back(lambda[b].data());
    }
    Operation lop;
    std::vector<double> elements;
    for (auto it = tape.rbegin(); it != tape.rend(); ++it) {
        const Operation &op = *it;
        const bool undoLambda = it + 1 != tape.rend();
        const bool active = localize(op, lop);
        if (op.firstParam >= 0 && active && op.kind == Operation::Kind::Gate && op.params.size() <= 3) {
            // the single-process device's fused step (AdjointJacobian.cpp), on the shards
            const Canonical c = canonicalGate(lop.gateId);
            const GateMatrix uInv =
                baseGateMatrix(c.base, lop.params.data(), int(lop.wires.size()) - c.builtinCtrls, !lop.adjoint);
            GateMatrix dU[3];
            const int numDerivs = int(lop.params.size());
            for (int j = 0; j < numDerivs; ++j) dU[j] = gateDerivative(lop, j);
            const Controls ctrls = operationControls(lop);
            cplx element[3];
            bool fused = true;
            elements.assign(numObs * size_t(numDerivs), 0.0);
            for (size_t b = 0; b < numObs && fused; ++b) {
                fused = adjointStep(phi.data(), lambda[b].data(), L_, uInv, dU, numDerivs, operationTargets(lop),
                                    ctrls, b == 0, undoLambda, element);
                for (int j = 0; fused && j < numDerivs; ++j) elements[b * size_t(numDerivs) + size_t(j)] =
                    2.0 * element[j].real();
            }
            // one allSum of this size on every rank, whichever path it takes (a rank where a
            // global control does not hold, or a shape without a fused kernel, goes below)
            if (fused) {
                allSum(elements.data(), elements.size());
                for (size_t b = 0; b < numObs; ++b)
                    for (int j = 0; j < numDerivs; ++j)
                        jac[b * size_t(numParams) + size_t(op.firstParam) + size_t(j)] =
                            elements[b * size_t(numDerivs) + size_t(j)];
                continue;
            }
        }
        if (active) applyOperation(phi.data(), L_, lop, /*inverse=*/true);
        if (op.firstParam >= 0) {
            const size_t np = op.params.size();
            elements.assign(numObs * np, 0.0);
            if (active) {
                const Controls ctrls = operationControls(lop);
                for (size_t j = 0; j < np; ++j) {
                    const bool pauliRot = op.kind == Operation::Kind::PauliRot;
                    GateMatrix dU;
                    if (pauliRot) {
                        copyState(mu.data(), phi.data(), size);
                        applyPauliRotDerivative(mu.data(), L_, lop);
                    } else {
                        dU = gateDerivative(lop, int(j));
                    }
                    for (size_t b = 0; b < numObs; ++b) {
                        const cplx e = pauliRot ? innerProductControlled(lambda[b].data(), mu.data(), L_, ctrls)
                                                : matrixElement(lambda[b].data(), phi.data(), L_, dU,
                                                                operationTargets(lop), ctrls);
                        elements[b * np + j] = 2.0 * e.real();
                    }
                }
            }
            allSum(elements.data(), elements.size());
            for (size_t b = 0; b < numObs; ++b)
                for (size_t j = 0; j < np; ++j)
                    jac[b * size_t(numParams) + size_t(op.firstParam) + j] = elements[b * np + j];
        }
        if (undoLambda && active)
            for (size_t b = 0; b < numObs; ++b) applyOperation(lambda[b].data(), L_, lop, /*inverse=*/true);
    }
}

} // namespace cf
