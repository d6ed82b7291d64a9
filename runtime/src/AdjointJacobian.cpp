// Adjoint-method Jacobian (Jones & Gacon, arXiv:2009.02823), as in Lightning.
//
// With |psi_N> = U_N ... U_1 |0> the final state, for one observable O:
//   lambda = O |psi_N>,  phi = |psi_N>
//   for k = N .. 1:
//       phi    = U_k^dagger phi                       (now phi = |psi_{k-1}>)
//       d<O>/dtheta_k = 2 Re <lambda| dU_k/dtheta_k |phi>
//       lambda = U_k^dagger lambda
// The three lines act on the same blocks of amplitudes (those of U_k's targets inside its
// controlled subspace), so for a parametrised gate they are one fused sweep (adjointStep,
// AdjointKernels.inc): per block, phi and lambda are loaded once, phi is undone, the products
// conj(lambda_r) phi_c that the derivatives need are accumulated for all of the gate's
// parameters at once, and lambda is undone; amplitudes outside the controlled subspace are
// not touched. A parametrised gate then costs one read and write of two states -- about two
// gate applications -- and the whole backward pass about two forward passes. Further
// observables (batches of lambdas) each take the same sweep with phi read only. Constant
// gates are two gate applications (phi, then each lambda), and PauliRot, which has no fused
// kernel, takes the three separate passes: apply, a read-only pass per parameter, apply. The memory is two extra states
// whatever the number of parameters, plus one lambda per further observable of a batch.
// With fusion on, AdjointFusion.hpp gathers runs of operations into blocks that take one
// of these passes each; the walk ends at the tape's first trainable operation.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "AdjointFusion.hpp"
#include "LightCone.hpp"
#include "GateFusion.hpp"
#include "Error.hpp"
#include "StateVectorDevice.hpp"

namespace cf {

namespace {
// State buffers of registers up to 20 qubits kept per thread from one Jacobian to the next
// (up to kMaxSpares of one size, kSpareMaxAmplitudes each: 16 MiB, so at most 64 MiB held;
// SEL holds phi and one lambda, 32 MiB at 20 wires): a fresh buffer costs its allocation,
// page faults and the kernel's zero-filling of every page at every call, about 5% of the
// backward pass of StronglyEntanglingLayers at 16 wires and 16% of it at 20 wires (perf,
// one thread: clear_page 183 of 1176 samples under adjointJacobian; with the spares kept,
// 4 of 990, the first call's). Larger registers allocate per call (their pages cost the
// same share, but holding 2 x 64 MiB and more between calls is not worth it). Every buffer is written before it is read (phi:
// copied, lambda: applyObservable, mu and scratch: copied), so a spare's contents do not
// matter.
class SpareBuffers {
  public:
    StateBuffer take(uint64_t size) {
        for (size_t i = 0; i < spares_.size(); ++i)
            if (spares_[i].size() == size) {
                StateBuffer b = std::move(spares_[i]);
                spares_.erase(spares_.begin() + std::ptrdiff_t(i));
                return b;
            }
        return StateBuffer(size);
    }
    void put(StateBuffer &b) {
        if (b.empty() || b.size() > kSpareMaxAmplitudes) return;
        if (!spares_.empty() && spares_[0].size() != b.size()) spares_.clear(); // keep one size
        if (spares_.size() < kMaxSpares) spares_.push_back(std::move(b));
    }

  private:
    static constexpr uint64_t kSpareMaxAmplitudes = uint64_t(1) << 20;
    static constexpr size_t kMaxSpares = 4;
    std::vector<StateBuffer> spares_;
};

// The trailing run of the tape (after `first`) that only permutes basis states linearly over
// GF(2) (CNOTs, SWAPs without further controls), and each observable a sum of Z words: then
// lambda after undoing the run, R^dagger O R phi' with phi' = R^dagger phi, is O' phi' for
// the Z words O' = R^dagger O R (R|x> = |L x>, so Z^b becomes Z^(L^T b)), and the walk need
// not undo the run on the lambdas (one CNOT pass per gate and observable; StronglyEntangling-
// Layers ends with a ring of n CNOTs). Returns the run's length (0: none or not Z words) and
// the transformed masks of every term, observable after observable.
size_t zWordRun(const std::vector<Operation> &tape, size_t first, const std::vector<const Observable *> &obs, int n,
                std::vector<uint64_t> &zmasks, std::vector<uint64_t> &image) {
    zmasks.clear();
    if (n > 63) return 0;
    size_t run = 0;
    int64_t w[kMaxQubits];
    auto permutation = [&](const Operation &op) { // 1 CNOT (w: target, control), 2 SWAP
        if (op.kind != Operation::Kind::Gate || (op.firstParam >= 0 && !op.params.empty())) return 0;
        if (fusion::localWires(op, w) != 2) return 0;
        const int64_t base = canonicalGate(op.gateId).base;
        const Controls c = operationControls(op);
        if (base == CF_GATE_PauliX && c.size == 1 && c.value[0] == 1) return 1;
        return base == CF_GATE_SWAP && c.size == 0 ? 2 : 0;
    };
    while (run + first + 1 < tape.size() && permutation(tape[tape.size() - 1 - run])) ++run;
    if (run == 0) return 0;
    for (const Observable *o : obs)
        for (const ObsTerm &t : o->terms) {
            PauliMasks pm;
            if (!pauliMasks(t, n, pm) || pm.x != 0 || pm.y != 0) return 0;
        }
    image.assign(static_cast<size_t>(n), 0); // L e_k, L: the run in tape order
    for (int k = 0; k < n; ++k) image[size_t(k)] = uint64_t(1) << k;
    for (size_t i = tape.size() - run; i < tape.size(); ++i) {
        const int kind = permutation(tape[i]);
        const int b0 = bitOf(n, w[0]), b1 = bitOf(n, w[1]);
        for (uint64_t &x : image) {
            const uint64_t v0 = (x >> b0) & 1, v1 = (x >> b1) & 1;
            if (kind == 2) x ^= (v0 ^ v1) * ((uint64_t(1) << b0) | (uint64_t(1) << b1));
            else x ^= v1 << b0; // CNOT: target w[0], control w[1]
        }
    }
    for (const Observable *o : obs)
        for (const ObsTerm &t : o->terms) {
            PauliMasks pm;
            pauliMasks(t, n, pm);
            uint64_t z = 0; // (L^T b)_k = parity(b & L e_k)
            for (int k = 0; k < n; ++k) z |= uint64_t(__builtin_parityll(pm.z & image[size_t(k)])) << k;
            zmasks.push_back(z);
        }
    return run;
}

// The tape's leading run of one-wire gates (no controls), from |0...0> a product state:
// returns the run's length and, in tlo / thi, the product's tables for writeProductState
// (the low h = n/2 bits, the high n-h bits; bit b of an index is wire n-1-b), in vec each
// wire's 2-vector.
// Operations marked in `deferred` (the light cone's, coneTail) are not part of the state.
size_t productPrefix(const std::vector<Operation> &tape, const std::vector<char> &deferred, int n,
                     std::vector<cplx> &tlo, std::vector<cplx> &thi, std::vector<cplx> &vec) {
    vec.assign(2 * size_t(n), cplx(0)); // each wire's 2-vector
    for (int w = 0; w < n; ++w) vec[2 * size_t(w)] = 1;
    size_t end = 0;
    int64_t w[kMaxQubits];
    for (; end < tape.size(); ++end) {
        const Operation &op = tape[end];
        if ((op.kind != Operation::Kind::Gate && op.kind != Operation::Kind::Unitary) || !fusion::fusable(op) ||
            fusion::localWires(op, w) != 1)
            break;
        if (!deferred.empty() && deferred[end]) continue;
        const std::vector<cplx> m = fusion::localMatrix(op, 1, /*inverse=*/false);
        cplx *v = &vec[2 * size_t(w[0])];
        const cplx v0 = v[0], v1 = v[1];
        v[0] = m[0] * v0 + m[1] * v1;
        v[1] = m[2] * v0 + m[3] * v1;
    }
    const int h = n / 2;
    auto table = [&](std::vector<cplx> &t, int firstBit, int bits) {
        t.assign(size_t(1) << bits, cplx(1));
        for (uint64_t m = 0; m < t.size(); ++m)
            for (int b = 0; b < bits; ++b) t[m] *= vec[2 * size_t(n - 1 - (firstBit + b)) + ((m >> b) & 1)];
    };
    table(tlo, 0, h);
    table(thi, h, n - h);
    return end;
}

// Each observable a sum of Z words: marks the tape's operations outside their light cone
// (LightCone.hpp), which change no derivative (they commute with the words as rewritten by
// the operations after them, or map Z words to Z words: CNOT, SWAP, diagonal gates), and
// rewrites the words of every term, observable after observable, into those on the state
// without them. False when not Z words, when nothing is outside, or when switched off
// (COFACTOR_ADJOINT_LIGHT_CONE=0, for A/B timings and tests).
bool coneTail(const std::vector<Operation> &tape, const std::vector<const Observable *> &obs, int n,
              std::vector<char> &deferred, std::vector<uint64_t> &masks) {
    const char *knob = std::getenv("COFACTOR_ADJOINT_LIGHT_CONE");
    if ((knob && *knob && std::atoi(knob) == 0) || n > 63) return false;
    masks.clear();
    for (const Observable *o : obs)
        for (const ObsTerm &t : o->terms) {
            PauliMasks pm;
            if (!pauliMasks(t, n, pm) || pm.x != 0 || pm.y != 0) return false;
            masks.push_back(pm.z);
        }
    fusion::lightCone(tape.data(), tape.size(), n, masks.data(), masks.size(), deferred);
    return std::find(deferred.begin(), deferred.end(), 1) != deferred.end();
}

SpareBuffers &spareBuffers() {
    thread_local SpareBuffers spares;
    return spares;
}
} // namespace

void StateVectorDevice::adjointJacobian(const std::vector<Operation> &tape, int64_t numParams,
                                        const std::vector<const Observable *> &obs, double *jac) {
    // When an expval of the same Z words left exactly the operations outside their light cone
    // queued (GateFuser::flushForZWords), the state as it is is that of the others: the walk
    // starts there and skips the queued ones (they stay queued for whatever reads the state
    // next). Otherwise: the final state, with every queued gate applied.
    std::vector<char> deferred;
    std::vector<uint64_t> coneMasks;
    const bool cone = coneTail(tape, obs, n_, deferred, coneMasks) &&
                      fuser_.pendingAre(tape.data(), tape.size(), deferred);
    if (!cone) {
        deferred.clear();
        flush();
    } else if (std::getenv("COFACTOR_FUSION_TRACE")) {
        std::fprintf(stderr, "adjoint light cone: %zu of %zu operations skipped\n",
                     size_t(std::count(deferred.begin(), deferred.end(), 1)), tape.size());
    }
    for (const auto &op : tape)
        if (op.kind == Operation::Kind::Measure)
            fail(CF_ERR_NOT_SUPPORTED, "adjoint Jacobian: the tape contains a mid-circuit "
                                       "measurement; use parameter-shift (cf_rt_tape_replay_shifted)");
    const uint64_t size = sv_.size();
    const size_t numObs = obs.size();
    std::fill(jac, jac + numObs * size_t(numParams), 0.0);
    if (numObs == 0 || numParams == 0) return;

    // phi is shared by all observables, each has its own lambda: observables are processed in
    // batches as large as half the available memory allows, so that phi is walked back once
    // per batch rather than once per observable.
    bool hasPauliRot = false, hasSum = false;
    for (const auto &op : tape) hasPauliRot |= op.kind == Operation::Kind::PauliRot;
    for (const auto *o : obs) hasSum |= needsScratch(*o, n_);
    const int fixedCopies = 1 + int(hasPauliRot) + int(hasSum); // phi, mu, scratch
    const double stateBytes = double(size) * sizeof(cplx);
    size_t batch = numObs;
    if ((fixedCopies + numObs) * stateBytes > kSmallAllocation) { // else surely fits
        checkMemory((fixedCopies + 1) * stateBytes, "the adjoint Jacobian's state copies");
        const double fit = 0.5 * availableMemory() / stateBytes - fixedCopies;
        batch = std::clamp<size_t>(fit < 1 ? 1 : size_t(fit), 1, numObs);
    }
    if (const char *cap = std::getenv("COFACTOR_ADJOINT_MAX_BATCH")) // for tests of batching
        batch = std::clamp<size_t>(size_t(std::max(1, std::atoi(cap))), 1, batch);
    size_t firstTrainable = tape.size();
    for (size_t i = 0; i < tape.size() && firstTrainable == tape.size(); ++i)
        if (tape[i].firstParam >= 0 && !tape[i].params.empty()) firstTrainable = i;
    if (firstTrainable == tape.size()) return; // no operation depends on a parameter
    // the backward pass fuses when the forward pass does (COFACTOR_FUSION*), as wide or at
    // least kAdjointFusionQubits wide, or as COFACTOR_ADJOINT_FUSION_QUBITS says (0: off)
    int fusionQubits = fuser_.maxQubits();
    if (fusionQubits > 0) fusionQubits = std::max(fusionQubits, kAdjointFusionQubits);
    if (const char *k = std::getenv("COFACTOR_ADJOINT_FUSION_QUBITS"); k && *k && fusionQubits > 0)
        fusionQubits = std::atoi(k);
    // the fewest pending trainable one-wire blocks whose derivatives one read-only sweep
    // takes (AdjointFusion.hpp); COFACTOR_ADJOINT_SWEEP_WIRES=0: never (for A/B timings)
    int sweepWires = kMinSweepWires;
    if (const char *k = std::getenv("COFACTOR_ADJOINT_SWEEP_WIRES"); k && *k) sweepWires = std::atoi(k);
    // COFACTOR_ADJOINT_Z_RUN=0: the lambdas undo a trailing CNOT run gate by gate (A/B timings)
    std::vector<uint64_t> zmasks, image;
    const char *zRun = std::getenv("COFACTOR_ADJOINT_Z_RUN");
    const size_t run =
        cone || (zRun && *zRun && std::atoi(zRun) == 0) ? 0 : zWordRun(tape, firstTrainable, obs, n_, zmasks, image);
    if (cone) zmasks = coneMasks;
    // from |0...0>, phi where the walk reaches the tape's leading one-wire gates is their
    // product state: written in one pass (AdjointFusion.hpp, "Product prefix");
    // COFACTOR_ADJOINT_PRODUCT_PREFIX=0: walked back as any other state (A/B timings, tests)
    std::vector<cplx> tlo, thi, factors;
    const char *productKnob = std::getenv("COFACTOR_ADJOINT_PRODUCT_PREFIX");
    const bool productOn = !(productKnob && *productKnob && std::atoi(productKnob) == 0);
    // COFACTOR_ADJOINT_PRODUCT_SWEEP=0: a sweep there writes phi and takes the cross sums
    // (AdjointFusion.hpp, "Product sweep"; A/B timings, tests)
    const char *productSweepKnob = std::getenv("COFACTOR_ADJOINT_PRODUCT_SWEEP");
    const bool productSweepOn = !(productSweepKnob && *productSweepKnob && std::atoi(productSweepKnob) == 0);
    const size_t prefixEnd = tapeFromZero_ && productOn && n_ >= 2 ? productPrefix(tape, deferred, n_, tlo, thi, factors) : 0;
    StateBuffer phi, mu, scratch;
    std::vector<StateBuffer> lambda(batch);
    struct GiveBack { // the buffers of a small register go to the spares when this returns
        StateBuffer &phi, &mu, &scratch;
        std::vector<StateBuffer> &lambda;
        ~GiveBack() {
            for (StateBuffer *b : {&phi, &mu, &scratch}) spareBuffers().put(*b);
            for (StateBuffer &b : lambda) spareBuffers().put(b);
        }
    } giveBack{phi, mu, scratch, lambda};
    try {
        phi = spareBuffers().take(size);
        if (hasPauliRot) mu = spareBuffers().take(size); // PauliRot's derivative is applied, not fused
        if (hasSum) scratch = spareBuffers().take(size);
        for (auto &l : lambda) l = spareBuffers().take(size);
    } catch (const std::bad_alloc &) {
        fail(CF_ERR_OUT_OF_MEMORY, "adjoint Jacobian: cannot allocate ", fixedCopies + batch,
             " state copies");
    }

    for (size_t first = 0; first < numObs; first += batch) {
        const size_t count = std::min(batch, numObs - first);
        if (run > 0 || cone) { // phi = R^dagger phi in one gather pass (not a pass per gate); lambda = O' phi
            if (cone) copyState(phi.data(), sv_.data(), size);
            else fusion::permuteLinear(phi.data(), sv_.data(), n_, image.data());
            size_t term = 0;
            for (size_t o = 0; o < first; ++o) term += obs[o]->terms.size();
            for (size_t b = 0; b < count; ++b) {
                bool written = false;
                for (const ObsTerm &t : obs[first + b]->terms) {
                    applyPauliWord(phi.data(), lambda[b].data(), size, 0, 0, zmasks[term++], t.coeff, written);
                    written = true;
                }
                if (!written) fillZero(lambda[b].data(), size);
            }
        } else {
            copyState(phi.data(), sv_.data(), size);
            for (size_t b = 0; b < count; ++b)
                applyObservable(*obs[first + b], sv_.data(), lambda[b].data(), scratch.data(), n_);
        }
        // the unfused step of one operation (AdjointFusion.cpp gathers the others into blocks)
        auto single = [&](const Operation &op, bool undoLambda, bool derivatives) {
            auto cell = [&](size_t b, size_t j) -> double & { // d<O_{first+b}>/d(param j of op)
                return jac[(first + b) * size_t(numParams) + size_t(op.firstParam) + j];
            };
            if (derivatives && op.firstParam >= 0 && op.kind == Operation::Kind::Gate && op.params.size() <= 3) {
                // the fused step: phi with the first lambda, then each further lambda
                const Canonical c = canonicalGate(op.gateId);
                const GateMatrix uInv = baseGateMatrix(c.base, op.params.data(),
                                                       int(op.wires.size()) - c.builtinCtrls, !op.adjoint);
                GateMatrix dU[3];
                const int numDerivs = int(op.params.size());
                for (int j = 0; j < numDerivs; ++j) dU[j] = gateDerivative(op, j);
                const Controls ctrls = operationControls(op);
                cplx element[3];
                bool fused = true;
                for (size_t b = 0; b < count && fused; ++b) {
                    fused = adjointStep(phi.data(), lambda[b].data(), n_, uInv, dU, numDerivs,
                                        operationTargets(op), ctrls, /*updatePhi=*/b == 0, undoLambda,
                                        element);
                    for (int j = 0; fused && j < numDerivs; ++j)
                        cell(b, size_t(j)) = 2.0 * element[j].real();
                }
                if (fused) return; // (the first call fails, if any, before touching a state)
            }
            applyOperation(phi.data(), n_, op, /*inverse=*/true);
            if (derivatives && op.firstParam >= 0) {
                const Controls ctrls = operationControls(op);
                for (size_t j = 0; j < op.params.size(); ++j) {
                    const bool pauliRot = op.kind == Operation::Kind::PauliRot;
                    GateMatrix dU;
                    if (pauliRot) {
                        copyState(mu.data(), phi.data(), size);
                        applyPauliRotDerivative(mu.data(), n_, op);
                    } else {
                        dU = gateDerivative(op, int(j));
                    }
                    for (size_t b = 0; b < count; ++b) {
                        const cplx element =
                            pauliRot ? innerProductControlled(lambda[b].data(), mu.data(), n_, ctrls)
                                     : matrixElement(lambda[b].data(), phi.data(), n_, dU,
                                                     operationTargets(op), ctrls);
                        cell(b, j) = 2.0 * element.real();
                    }
                }
            }
            if (undoLambda)
                for (size_t b = 0; b < count; ++b)
                    applyOperation(lambda[b].data(), n_, op, /*inverse=*/true);
        };
        AdjointFuser::Walk walk{n_, phi.data(), {}, single,
                                [&](const Operation &op, int j, size_t b, double value) {
                                    jac[(first + b) * size_t(numParams) + size_t(op.firstParam) + size_t(j)] = value;
                                }};
        for (size_t b = 0; b < count; ++b) walk.lambdas.push_back(lambda[b].data());
        AdjointFuser fuser(std::move(walk), fusionQubits, sweepWires);
        if (prefixEnd > firstTrainable) // (else the walk never reaches the prefix)
            fuser.setProductPrefix(
                tape.data() + prefixEnd,
                [&](cplx *state) {
                    writeProductState(state, n_, n_ / 2, tlo.data(), thi.data(), nullptr, nullptr, true);
                },
                {n_ / 2, tlo.data(), thi.data(), productSweepOn ? factors : std::vector<cplx>{}});
        // COFACTOR_ADJOINT_CHUNK_QUBITS: the chunks of the queued steps' groups (0: none)
        if (const char *k = std::getenv("COFACTOR_ADJOINT_CHUNK_QUBITS"); k && *k) fuser.setChunkQubits(std::atoi(k));
        // COFACTOR_ADJOINT_ANTIHERMITIAN_SUMS=0: sweeps take the full cross sums (A/B timings, tests)
        if (const char *k = std::getenv("COFACTOR_ADJOINT_ANTIHERMITIAN_SUMS"); k && *k && std::atoi(k) == 0)
            fuser.setAntiHermitianSums(false);
        // operations before the first trainable one change no derivative: the walk ends there
        // (nor do those outside the light cone: skipped)
        size_t lastWalked = firstTrainable;
        while (!deferred.empty() && lastWalked < tape.size() && deferred[lastWalked]) ++lastWalked;
        for (size_t i = tape.size() - run; i-- > lastWalked;)
            if (deferred.empty() || !deferred[i]) fuser.add(tape[i], i == lastWalked);
        fuser.finish();
    }
}

} // namespace cf
