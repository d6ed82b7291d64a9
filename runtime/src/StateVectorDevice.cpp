#include "StateVectorDevice.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <new>
#include <string>

#include "Error.hpp"
#include "TermSampling.hpp"

#include <pthread.h>

namespace cf {

// ---- applying operations --------------------------------------------------------------------
Controls operationControls(const Operation &op) {
    Controls c;
    if (op.kind == Operation::Kind::Gate)
        for (int i = 0; i < canonicalGate(op.gateId).builtinCtrls; ++i) c.add(op.wires[i], 1);
    for (size_t i = 0; i < op.ctrlWires.size(); ++i) c.add(op.ctrlWires[i], op.ctrlValues[i]);
    return c;
}

namespace {
const double kNoParams[1] = {0};

// The non-identity letters of a Pauli word and their wires.
struct PauliWord {
    int k = 0;
    char letter[kMaxQubits];
    int64_t wire[kMaxQubits];
};
PauliWord pauliWord(const Operation &op) {
    PauliWord w;
    for (size_t i = 0; i < op.wires.size(); ++i)
        if (op.word[i] != 'I') {
            w.letter[w.k] = op.word[i];
            w.wire[w.k++] = op.wires[i];
        }
    return w;
}

// Rotates X / Y to Z on each wire of the word (undo: the inverse), so that the word becomes
// a Z-string: V P V^dagger = Z...Z with V = H for X and RX(pi/2) for Y.
void pauliBasisChange(cplx *sv, int n, const PauliWord &w, bool undo) {
    const Controls none;
    const double halfPi = M_PI / 2;
    for (int i = 0; i < w.k; ++i) {
        if (w.letter[i] == 'X')
            applyGateMatrix(sv, n, baseGateMatrix(CF_GATE_Hadamard, kNoParams, 1, false), &w.wire[i], none);
        else if (w.letter[i] == 'Y')
            applyGateMatrix(sv, n, baseGateMatrix(CF_GATE_RX, &halfPi, 1, undo), &w.wire[i], none);
    }
}

void applyPauliRot(cplx *sv, int n, const Operation &op, bool inverse, const Controls &ctrls) {
    const double theta = (op.adjoint != inverse) ? -op.params[0] : op.params[0];
    const PauliWord w = pauliWord(op);
    const cplx even = std::polar(1.0, -theta / 2), odd = std::polar(1.0, theta / 2);
    if (w.k == 0) { // exp(-i theta/2 I) is a phase, which matters under controls
        scaleSubspace(sv, n, ctrls, even);
        return;
    }
    // The basis change needs no controls: V^dagger (|c><c| (x) D) V = |c><c| (x) V^dagger D V.
    pauliBasisChange(sv, n, w, false);
    GateMatrix g;
    g.shape = Shape::Parity;
    g.k = w.k;
    g.data = {even, odd};
    applyGateMatrix(sv, n, g, w.wire, ctrls);
    pauliBasisChange(sv, n, w, true);
}
} // namespace

void applyOperation(cplx *sv, int n, const Operation &op, bool inverse) {
    const Controls ctrls = operationControls(op);
    switch (op.kind) {
    case Operation::Kind::Gate: {
        const Canonical c = canonicalGate(op.gateId);
        const int k = int(op.wires.size()) - c.builtinCtrls;
        const double *params = op.params.empty() ? kNoParams : op.params.data();
        applyGateMatrix(sv, n, baseGateMatrix(c.base, params, k, op.adjoint != inverse),
                        op.wires.data() + c.builtinCtrls, ctrls);
        return;
    }
    case Operation::Kind::PauliRot: applyPauliRot(sv, n, op, inverse, ctrls); return;
    case Operation::Kind::Unitary: {
        GateMatrix g;
        g.shape = Shape::Dense;
        g.k = int(op.wires.size());
        g.data = op.matrix;
        if (op.adjoint != inverse) daggerInPlace(g);
        applyGateMatrix(sv, n, g, op.wires.data(), ctrls);
        return;
    }
    case Operation::Kind::Measure: fail(CF_ERR_INTERNAL, "applyOperation on a measurement");
    }
}

void applyPauliRotDerivative(cplx *sv, int n, const Operation &op) {
    // d/dtheta exp(-+i theta/2 P) = -+(i/2) P exp(-+i theta/2 P)
    const Controls none;
    applyPauliRot(sv, n, op, false, none);
    const PauliWord w = pauliWord(op);
    for (int i = 0; i < w.k; ++i) {
        const int64_t g = w.letter[i] == 'X' ? CF_GATE_PauliX : w.letter[i] == 'Y' ? CF_GATE_PauliY : CF_GATE_PauliZ;
        applyGateMatrix(sv, n, baseGateMatrix(g, kNoParams, 1, false), &w.wire[i], none);
    }
    scaleSubspace(sv, n, none, cplx(0, op.adjoint ? 0.5 : -0.5));
}

const int64_t *operationTargets(const Operation &op) {
    return op.wires.data() + (op.kind == Operation::Kind::Gate ? canonicalGate(op.gateId).builtinCtrls : 0);
}

GateMatrix gateDerivative(const Operation &op, int j) {
    if (op.kind != Operation::Kind::Gate) fail(CF_ERR_INTERNAL, "gateDerivative of a non-gate operation");
    const Canonical c = canonicalGate(op.gateId);
    const int k = int(op.wires.size()) - c.builtinCtrls;
    return baseGateMatrix(c.base, op.params.data(), k, op.adjoint, j);
}

// ---- device -----------------------------------------------------------------------------
namespace {
// Forks of this process so far (counted in the child). An unseeded stream drawn before a
// fork would otherwise run on identically in the parent and in every child: workers of a
// fork-based multiprocessing pool all sampled the same "random" outcomes.
std::atomic<uint64_t> forks{0};
uint64_t forkCount() {
    static const bool registered = [] {
        pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1, std::memory_order_relaxed); });
        return true;
    }();
    (void)registered;
    return forks.load(std::memory_order_relaxed);
}
} // namespace

StateVectorDevice::StateVectorDevice(int numQubits, int64_t shots, int64_t seed) : n_(numQubits) {
    const double bytes = std::ldexp(double(sizeof(cplx)), numQubits);
    checkMemory(bytes, "the state vector");
    try {
        sv_.resize(size_t(1) << n_); // value-initialised: zeros
    } catch (const std::bad_alloc &) {
        fail(CF_ERR_OUT_OF_MEMORY, "cannot allocate the state vector of ", numQubits, " qubits (",
             bytes / (1 << 20), " MiB)");
    }
    reset(shots, seed);
}

void StateVectorDevice::reset(int64_t shots, int64_t seed) {
    fuser_.configure(n_);
    shots_ = shots;
    if (seed == kContinueSeed) {
        // one shot of a one-shot loop: the random stream runs on from the previous acquire
        // (which seeded it), so that a seeded program repeats while its shots differ
        resetState();
        return;
    }
    if (seed >= 0) {
        rng_.seed(uint64_t(seed));
    } else if (!entropySeeded_ || entropyForks_ != forkCount()) {
        // Unseeded: draw from the system's entropy once (and again in a forked child, see
        // forkCount), then let the stream run on across
        // reuses of this device (reading std::random_device costs ~45 us, more than a
        // small circuit, and consecutive streams need no fresh entropy to be independent).
        std::random_device rd;
        rng_.seed((uint64_t(rd()) << 32) ^ rd());
    }
    entropySeeded_ = seed < 0;
    entropyForks_ = forkCount();
    resetState();
}

void StateVectorDevice::resetState() {
    if (fuser_.startFromZero(n_)) return; // the fuser writes |0...0> when it is read
    fillZero(sv_.data(), sv_.size());
    sv_[0] = 1;
}

void StateVectorDevice::state(double *out) {
    flush();
    copyState(reinterpret_cast<cplx *>(out), sv_.data(), sv_.size());
}

void StateVectorDevice::setState(const double *amplitudes) {
    const cplx *in = reinterpret_cast<const cplx *>(amplitudes);
    const double norm = norm2(in, sv_.size());
    if (!(std::abs(norm - 1.0) <= 1e-8)) // (before the discard: the state stays as it was)
        fail(CF_ERR_INVALID_ARGUMENT, "set_state: the state is not normalised (norm^2 = ", norm, ")");
    fuser_.discard(); // the gates before set_state act on a state that is replaced
    copyState(sv_.data(), in, sv_.size());
}

void StateVectorDevice::probs(const int64_t *wires, int k, double *out) {
    flush();
    marginalProbs(sv_.data(), n_, wires, k, out);
    if (shots_ <= 0) return;
    // With shots, probabilities are estimated from samples, as expectation values are (and as
    // on PennyLane's devices): the frequencies of `shots_` outcomes.
    const size_t N = size_t(1) << k;
    std::vector<double> p(out, out + N);
    if (!finiteDistribution(p)) return; // NaN stays NaN, as for sampled expectation values
    std::fill(out, out + N, 0.0);
    for (uint32_t o : drawOutcomes(p, shots_)) out[o] += 1.0;
    for (size_t i = 0; i < N; ++i) out[i] /= double(shots_);
}

int StateVectorDevice::measure(int64_t wire, bool reset, int64_t postselect) {
    flush();
    double p[2];
    marginalProbs(sv_.data(), n_, &wire, 1, p);
    const double total = p[0] + p[1];
    if (!std::isfinite(total)) notFinite("mid-circuit measurement");
    int outcome;
    if (postselect >= 0) {
        outcome = int(postselect);
        // Renormalising a numerically-zero branch would blow rounding noise up into a
        // "state"; below this it is treated as impossible.
        if (!(p[outcome] > 1e-16 * total))
            fail(CF_ERR_POSTSELECTION, "mid-circuit measurement of wire ", wire,
                 ": postselecting outcome ", outcome, " which has probability ", p[outcome] / total);
    } else {
        outcome = uniform() * total < p[1] ? 1 : 0;
    }
    Controls keep, drop;
    keep.add(wire, int8_t(outcome));
    drop.add(wire, int8_t(1 - outcome));
    scaleSubspace(sv_.data(), n_, drop, 0.0);
    scaleSubspace(sv_.data(), n_, keep, 1.0 / std::sqrt(p[outcome]));
    if (reset && outcome == 1)
        applyGateMatrix(sv_.data(), n_, baseGateMatrix(CF_GATE_PauliX, kNoParams, 1, false), &wire, Controls());
    return outcome;
}

// ---- sampling -----------------------------------------------------------------------------
// A NaN or infinite gate parameter makes the state NaN. Analytic results are NaN then, but a
// sampler would turn NaN probabilities into plausible-looking outcomes (the alias table and
// a CDF both treat NaN comparisons as false). Sampled expectation values and variances are
// NaN like the analytic ones; integer results (samples, counts, measurement outcomes) cannot
// carry a NaN, so those are an error (PennyLane's default.qubit raises ValueError in its
// mid-circuit sampler too).
[[noreturn]] void StateVectorDevice::notFinite(const char *what) {
    fail(CF_ERR_NOT_FINITE, what, ": the state has NaN or infinite amplitudes (a gate parameter "
         "was NaN or infinite), so there is nothing to sample");
}

std::vector<uint32_t> StateVectorDevice::drawOutcomes(const std::vector<double> &probs,
                                                      int64_t shots) {
    // Vose's alias method: O(2^k) setup, then O(1) per shot, in the order drawn (sorting
    // uniforms against the CDF would need a shuffle afterwards to keep shots i.i.d.).
    const size_t N = probs.size();
    double total = 0;
    for (double p : probs) total += p;
    std::vector<double> prob(N);
    std::vector<uint32_t> alias(N, 0), small, large;
    for (size_t i = 0; i < N; ++i) {
        prob[i] = probs[i] * double(N) / total;
        (prob[i] < 1.0 ? small : large).push_back(uint32_t(i));
    }
    while (!small.empty() && !large.empty()) {
        const uint32_t s = small.back(), l = large.back();
        small.pop_back();
        alias[s] = l;
        prob[l] -= 1.0 - prob[s];
        if (prob[l] < 1.0) {
            large.pop_back();
            small.push_back(l);
        }
    }
    for (uint32_t i : large) prob[i] = 1.0; // leftovers are 1 up to rounding
    for (uint32_t i : small) prob[i] = 1.0;
    checkMemory(double(shots) * sizeof(uint32_t), "the outcomes of the shots");
    std::vector<uint32_t> out(static_cast<size_t>(shots));
    for (auto &o : out) {
        const double x = uniform() * double(N);
        const size_t column = std::min(size_t(x), N - 1);
        o = (x - double(column)) < prob[column] ? uint32_t(column) : alias[column];
    }
    return out;
}

void StateVectorDevice::sample(const int64_t *wires, int k, int64_t *out) {
    flush();
    std::vector<double> p(size_t(1) << k);
    marginalProbs(sv_.data(), n_, wires, k, p.data());
    if (!finiteDistribution(p)) notFinite("sample");
    const auto outcomes = drawOutcomes(p, shots_);
    for (int64_t s = 0; s < shots_; ++s)
        for (int i = 0; i < k; ++i) out[s * k + i] = (outcomes[s] >> (k - 1 - i)) & 1;
}

void StateVectorDevice::counts(const int64_t *wires, int k, int64_t *out) {
    flush();
    std::vector<double> p(size_t(1) << k);
    marginalProbs(sv_.data(), n_, wires, k, p.data());
    if (!finiteDistribution(p)) notFinite("counts");
    std::fill(out, out + p.size(), 0);
    for (uint32_t o : drawOutcomes(p, shots_)) ++out[o];
}

void StateVectorDevice::sampleTerm(const ObsTerm &t, double &mean, double *var) {
    if (isIdentityTerm(t)) { // every shot gives eigenvalue 1
        mean = t.coeff;
        if (var) *var = 0;
        return;
    }
    checkMemory(double(sv_.size()) * sizeof(cplx), "the copy of the state sampling an observable needs");
    StateBuffer rotated = sv_;
    const TermBasis basis = rotateToEigenbasis(t, rotated.data(), n_);
    std::vector<double> p(size_t(1) << basis.wires.size());
    marginalProbs(rotated.data(), n_, basis.wires.data(), int(basis.wires.size()), p.data());
    if (!finiteDistribution(p)) { // NaN like the analytic value (see notFinite)
        mean = std::numeric_limits<double>::quiet_NaN();
        if (var) *var = mean;
        return;
    }
    termMoments(basis, drawOutcomes(p, shots_), t.coeff, mean, var);
}

double StateVectorDevice::expval(const Observable &obs) {
    if (shots_ == 0 && fuser_.enabled()) { // Z words: trailing CNOTs and phases stay pending
        std::vector<uint64_t> z;
        for (const auto &t : obs.terms) {
            PauliMasks pm;
            if (!pauliMasks(t, n_, pm) || pm.x || pm.y) break;
            z.push_back(pm.z);
        }
        if (z.size() == obs.terms.size()) {
            fuser_.flushForZWords(sv_.data(), n_, z.data(), z.size());
            double total = 0;
            for (size_t i = 0; i < z.size(); ++i)
                total += obs.terms[i].coeff * pauliExpval(sv_.data(), sv_.size(), 0, 0, z[i]);
            return total;
        }
    }
    flush();
    if (shots_ == 0) return expvalAnalytic(obs, sv_.data(), n_);
    // Finite shots: like PennyLane without grouping, each term is estimated from its own
    // `shots` samples.
    double total = 0;
    for (const auto &t : obs.terms) {
        double m;
        sampleTerm(t, m, nullptr);
        total += m;
    }
    return total;
}

double StateVectorDevice::var(const Observable &obs) {
    flush();
    if (shots_ == 0 || obs.terms.empty()) return varAnalytic(obs, sv_.data(), n_);
    // Finite shots: the sample variance of the eigenvalues drawn. A sum of several terms is
    // sampled as one Hermitian observable (its terms need not commute), as PennyLane does.
    double m, v;
    sampleTerm(obs.terms.size() == 1 ? obs.terms[0] : combinedTerm(obs), m, &v);
    return v;
}

std::unique_ptr<QuantumDevice> makeStateVectorDevice(int numQubits, int64_t shots, int64_t seed) {
    return std::make_unique<StateVectorDevice>(numQubits, shots, seed);
}

} // namespace cf
