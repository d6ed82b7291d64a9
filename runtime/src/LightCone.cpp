// The backward light cone of Z-word expectation values (LightCone.hpp).
#include "LightCone.hpp"

#include "GateFusion.hpp"
#include "StateVectorDevice.hpp"

namespace cf::fusion {

bool zWordMap(const Operation &op) {
    if (op.kind != Operation::Kind::Gate || !fusable(op)) return false;
    const Canonical c = canonicalGate(op.gateId);
    const Controls ctrls = operationControls(op);
    if (c.base == CF_GATE_PauliX) return ctrls.size == 1 && ctrls.value[0] == 1;
    if (c.base == CF_GATE_SWAP) return ctrls.size == 0;
    static const double kNoParams[1] = {0};
    const int k = int(op.wires.size()) - c.builtinCtrls;
    const Shape shape = baseGateMatrix(c.base, op.params.empty() ? kNoParams : op.params.data(), k, op.adjoint).shape;
    return shape == Shape::Diagonal || shape == Shape::Parity || shape == Shape::Identity;
}

uint64_t conjugateZ(const Operation &op, int n, uint64_t mask) {
    const int64_t base = canonicalGate(op.gateId).base;
    if (base == CF_GATE_PauliX) { // CNOT: Z on the target picks up Z on the control
        const Controls c = operationControls(op);
        const int t = bitOf(n, op.wires.back()), ctl = bitOf(n, c.wire[0]);
        if ((mask >> t) & 1) mask ^= uint64_t(1) << ctl;
    } else if (base == CF_GATE_SWAP) {
        const int a = bitOf(n, op.wires[0]), b = bitOf(n, op.wires[1]);
        if (((mask >> a) ^ (mask >> b)) & 1) mask ^= (uint64_t(1) << a) | (uint64_t(1) << b);
    }
    return mask; // diagonal: commutes with every Z word
}

namespace {
// The index bits of every wire op acts on: its targets and controls (for PauliRot and
// unitaries too: op.wires are their targets).
uint64_t wireBits(const Operation &op, int n) {
    uint64_t bits = 0;
    for (int64_t w : op.wires) bits |= uint64_t(1) << bitOf(n, w);
    for (int64_t w : op.ctrlWires) bits |= uint64_t(1) << bitOf(n, w);
    return bits;
}
} // namespace

void lightCone(const Operation *ops, size_t count, int n, uint64_t *masks, size_t maskCount,
               std::vector<char> &deferred) {
    deferred.assign(count, 0);
    uint64_t support = 0, applied = 0;
    for (size_t m = 0; m < maskCount; ++m) support |= masks[m];
    for (size_t i = count; i-- > 0;) {
        const Operation &op = ops[i];
        const uint64_t bits = wireBits(op, n);
        if (bits & applied) {
            applied |= bits;
        } else if (!(bits & support)) {
            deferred[i] = 1; // commutes with the words: U^dagger Z U = Z
        } else if (zWordMap(op)) {
            deferred[i] = 1;
            support = 0;
            for (size_t m = 0; m < maskCount; ++m) support |= masks[m] = conjugateZ(op, n, masks[m]);
        } else {
            applied |= bits;
        }
    }
}

} // namespace cf::fusion

namespace cf {

namespace {
bool sameOperation(const Operation &a, const Operation &b) {
    return a.kind == b.kind && a.gateId == b.gateId && a.params == b.params && a.wires == b.wires &&
           a.ctrlWires == b.ctrlWires && a.ctrlValues == b.ctrlValues && a.adjoint == b.adjoint && a.word == b.word &&
           a.matrix == b.matrix && a.reset == b.reset && a.postselect == b.postselect;
}
} // namespace

bool GateFuser::pendingAre(const Operation *ops, size_t count, const std::vector<char> &deferred) const {
    if (prefix_ || !blocks_.empty() || !ready_.empty() || deferred.size() != count) return false;
    size_t q = 0;
    for (size_t i = 0; i < count; ++i) {
        if (!deferred[i]) continue;
        if (q == queued_ || !sameOperation(ops[i], queue_[q])) return false;
        ++q;
    }
    return q == queued_;
}

} // namespace cf
