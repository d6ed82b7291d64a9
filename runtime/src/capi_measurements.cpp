// The C ABI's observables and measurements. Observables live in the context as handles
// (valid until the next acquire or release); while the tape records, a measurement also
// records what it measured, the rows of the recorded Jacobian (capi_tape.cpp).
#include "capi_context.hpp"

#include <string>
#include <vector>

using namespace cf;
using namespace cf::capi;

namespace {

const Observable &observable(int64_t handle) {
    const int64_t index = handle & 0xffffffff;
    if (handle < 0 || (handle >> 32) != ctx.generation || index >= int64_t(ctx.observables.size()))
        fail(CF_ERR_INVALID_ARGUMENT, "invalid observable handle ", handle,
             " (handles are valid until the device is acquired again or released)");
    return ctx.observables[size_t(index)];
}

int64_t addObservable(Observable obs) {
    ctx.observables.push_back(std::move(obs));
    return (ctx.generation << 32) | int64_t(ctx.observables.size() - 1);
}

// num_wires == 0 means all wires, in order.
std::vector<int64_t> measuredWires(const char *what, const int64_t *wires, int64_t numWires) {
    const int n = device().numQubits();
    checkWires(what, n, wires, numWires, nullptr, nullptr, 0);
    if (numWires > 0) return std::vector<int64_t>(wires, wires + numWires);
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) all[size_t(i)] = i;
    return all;
}

void recordUndifferentiable(const char *measurement) {
    if (ctx.recording && ctx.recordedUndifferentiable.empty())
        ctx.recordedUndifferentiable = measurement;
}

// |b><b| on `wires` as a tensor product of one-wire projectors, so that a probability is
// an expectation value the adjoint method differentiates like any other.
Observable basisProjector(const std::vector<int64_t> &wires, uint64_t b) {
    ObsTerm term;
    const size_t k = wires.size();
    for (size_t j = 0; j < k; ++j) {
        const bool one = (b >> (k - 1 - j)) & 1; // first wire = most significant bit
        ObsFactor f{ObsFactor::kHermitian, {wires[j]}, std::vector<cplx>(4, cplx(0))};
        f.matrix[one ? 3 : 0] = 1.0;
        term.factors.push_back(std::move(f));
    }
    return Observable{{std::move(term)}};
}

} // namespace

namespace cf::capi {

std::vector<const Observable *> observables(const int64_t *handles, int64_t count) {
    if (count < 0 || (count > 0 && !handles))
        fail(CF_ERR_INVALID_ARGUMENT, "bad observable list (count ", count, ")");
    std::vector<const Observable *> out;
    for (int64_t i = 0; i < count; ++i) out.push_back(&observable(handles[i]));
    return out;
}

} // namespace cf::capi

extern "C" {

// ---- observables ---------------------------------------------------------------------------
int64_t cf_rt_obs_named(int64_t kind, int64_t wire) {
    return guarded("cf_rt_obs_named", int64_t(-1), [&] {
        return addObservable(makeNamedObs(kind, wire, device().numQubits()));
    });
}

int64_t cf_rt_obs_hermitian(const double *matrix, const int64_t *wires, int64_t num_wires) {
    return guarded("cf_rt_obs_hermitian", int64_t(-1), [&] {
        return addObservable(makeHermitianObs(matrix, wires, num_wires, device().numQubits()));
    });
}

int64_t cf_rt_obs_tensor(const int64_t *obs, int64_t num_obs) {
    return guarded("cf_rt_obs_tensor", int64_t(-1), [&] {
        device();
        return addObservable(makeTensorObs(observables(obs, num_obs)));
    });
}

int64_t cf_rt_obs_hamiltonian(const double *coeffs, const int64_t *obs, int64_t num_terms) {
    return guarded("cf_rt_obs_hamiltonian", int64_t(-1), [&] {
        device();
        if (num_terms > 0 && !coeffs) fail(CF_ERR_INVALID_ARGUMENT, "null coefficient array");
        return addObservable(makeHamiltonianObs(coeffs, observables(obs, num_terms)));
    });
}

int64_t cf_rt_obs_hamiltonian_diff(const double *coeffs, const int64_t *obs, int64_t num_terms) {
    return guarded("cf_rt_obs_hamiltonian_diff", int64_t(-1), [&] {
        device();
        if (num_terms > 0 && !coeffs) fail(CF_ERR_INVALID_ARGUMENT, "null coefficient array");
        const auto terms = observables(obs, num_terms);
        ThreadContext::DiffCoeffs d{ctx.tapeParams, {}};
        if (ctx.recording) // copies now: addObservable may move what `terms` points to
            for (const Observable *t : terms) d.terms.push_back(*t);
        const int64_t handle = addObservable(makeHamiltonianObs(coeffs, terms));
        if (ctx.recording) {
            ctx.tapeParams += num_terms;
            ctx.diffCoeffs[handle & 0xffffffff] = std::move(d);
        }
        return handle;
    });
}

// ---- measurements ----------------------------------------------------------------------------
double cf_rt_expval(int64_t obs) {
    return guarded("cf_rt_expval", kNaN, [&] {
        QuantumDevice &dev = device();
        const Observable &o = observable(obs);
        const size_t row = ctx.recordedResults.size();
        if (ctx.recording) ctx.recordedResults.push_back(o);
        const double value = dev.expval(o);
        const auto diff = ctx.recording ? ctx.diffCoeffs.find(obs & 0xffffffff) : ctx.diffCoeffs.end();
        if (diff != ctx.diffCoeffs.end()) // d<sum_k c_k O_k>/dc_k = <O_k>, on this state
            for (size_t k = 0; k < diff->second.terms.size(); ++k)
                ctx.coeffEntries.push_back(
                    {row, diff->second.firstParam + int64_t(k), dev.expval(diff->second.terms[k])});
        return value;
    });
}

double cf_rt_var(int64_t obs) {
    return guarded("cf_rt_var", kNaN, [&] {
        QuantumDevice &dev = device();
        recordUndifferentiable("var");
        return dev.var(observable(obs));
    });
}

void cf_rt_probs(double *out, const int64_t *wires, int64_t num_wires) {
    guardedVoid("cf_rt_probs", [&] {
        const auto w = measuredWires("probs", wires, num_wires);
        if (!out) fail(CF_ERR_INVALID_ARGUMENT, "probs: null output");
        device().probs(w.data(), int(w.size()), out);
        if (ctx.recording)
            for (uint64_t b = 0; b < (uint64_t(1) << w.size()); ++b)
                ctx.recordedResults.push_back(basisProjector(w, b));
    });
}

void cf_rt_state(double *out) {
    guardedVoid("cf_rt_state", [&] {
        QuantumDevice &dev = device();
        recordUndifferentiable("state");
        if (!out) fail(CF_ERR_INVALID_ARGUMENT, "state: null output");
        dev.state(out);
    });
}

void cf_rt_set_state(const double *amplitudes) {
    guardedVoid("cf_rt_set_state", [&] {
        QuantumDevice &dev = device();
        if (!amplitudes) fail(CF_ERR_INVALID_ARGUMENT, "set_state: null input");
        if (ctx.recording)
            fail(CF_ERR_NOT_SUPPORTED, "set_state while the tape records (a replay starts from |0...0>)");
        dev.setState(amplitudes);
    });
}

static void requireShots(const char *what) {
    if (device().shots() <= 0)
        fail(CF_ERR_INVALID_ARGUMENT, what, " needs shots > 0 (the device was acquired with shots = 0)");
}

void cf_rt_sample(int64_t *out, const int64_t *wires, int64_t num_wires) {
    guardedVoid("cf_rt_sample", [&] {
        requireShots("sample");
        const auto w = measuredWires("sample", wires, num_wires);
        if (!out) fail(CF_ERR_INVALID_ARGUMENT, "sample: null output");
        device().sample(w.data(), int(w.size()), out);
    });
}

void cf_rt_counts(int64_t *out, const int64_t *wires, int64_t num_wires) {
    guardedVoid("cf_rt_counts", [&] {
        requireShots("counts");
        const auto w = measuredWires("counts", wires, num_wires);
        if (!out) fail(CF_ERR_INVALID_ARGUMENT, "counts: null output");
        device().counts(w.data(), int(w.size()), out);
    });
}

int8_t cf_rt_measure(int64_t wire, int8_t reset, int64_t postselect) {
    return guarded("cf_rt_measure", int8_t(0), [&] {
        QuantumDevice &dev = device();
        checkWires("measure", dev.numQubits(), &wire, 1, nullptr, nullptr, 0);
        if (postselect < -1 || postselect > 1)
            fail(CF_ERR_INVALID_ARGUMENT, "measure: postselect must be -1, 0 or 1, got ", postselect);
        const int outcome = dev.measure(wire, reset != 0, postselect);
        if (ctx.recording) {
            Operation op;
            op.kind = Operation::Kind::Measure;
            op.wires = {wire};
            op.reset = reset != 0;
            op.postselect = postselect;
            ctx.tape.push_back(std::move(op));
        }
        return int8_t(outcome);
    });
}

} // extern "C"
