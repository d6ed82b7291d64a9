// The C ABI's tape: recording the gates (capi_gates.cpp appends them) and measurements
// (capi_measurements.cpp) of one run, then its Jacobian by the adjoint method or by the
// parameter-shift rule, which replays the tape with shifted parameters.
#include "capi_context.hpp"

#include <cmath>
#include <vector>

using namespace cf;
using namespace cf::capi;

namespace {

// Re-executes the recorded tape from |0...0> with parameter `param` shifted by `shift`.
void replayShifted(QuantumDevice &dev, int64_t param, double shift) {
    dev.resetState();
    for (const Operation &op : ctx.tape) {
        if (op.kind == Operation::Kind::Measure) {
            dev.measure(op.wires[0], op.reset, op.postselect);
        } else if (op.firstParam >= 0 && param >= op.firstParam &&
                   param < op.firstParam + int64_t(op.params.size())) {
            Operation shifted = op;
            shifted.params[size_t(param - op.firstParam)] += shift;
            dev.apply(shifted);
        } else {
            dev.apply(op);
        }
    }
}

// What both recorded-Jacobian methods require of the recording.
void checkRecordedJacobian(const double *jac, int64_t numResults, int64_t numParams) {
    if (!ctx.tapeStarted)
        fail(CF_ERR_INVALID_ARGUMENT, "no tape recorded (call cf_rt_tape_start before the gates)");
    if (ctx.recording) fail(CF_ERR_INVALID_ARGUMENT, "stop the tape (cf_rt_tape_stop) first");
    if (!ctx.recordedUndifferentiable.empty())
        fail(CF_ERR_NOT_SUPPORTED, ctx.recordedUndifferentiable,
             " was measured while recording: only expval and probs are differentiable");
    for (const Operation &op : ctx.tape)
        if (op.kind == Operation::Kind::Measure)
            fail(CF_ERR_NOT_SUPPORTED, "the recorded circuit has a mid-circuit measurement, "
                                       "which cannot be differentiated by replaying it");
    if (numResults != int64_t(ctx.recordedResults.size()) || numParams != ctx.tapeParams)
        fail(CF_ERR_INVALID_ARGUMENT, "jacobian of ", numResults, " results x ", numParams,
             " parameters asked, but ", ctx.recordedResults.size(), " results and ",
             ctx.tapeParams, " parameters were recorded");
    if (numResults > 0 && numParams > 0 && !jac)
        fail(CF_ERR_INVALID_ARGUMENT, "null jacobian output");
}

// The columns of Hamiltonian coefficients (cf_rt_obs_hamiltonian_diff): no gate owns them,
// so both Jacobian methods leave them zero; d<H>/dc_k = <O_k> was measured at the expval.
void fillCoefficientColumns(double *jac, int64_t numParams) {
    for (const auto &e : ctx.coeffEntries)
        jac[e.row * size_t(numParams) + size_t(e.param)] = e.value;
}

struct ShiftTerm {
    double shift, coeff; // d f = sum coeff * (f(theta + shift) - f(theta - shift))
};

// The parameter-shift rule of a recorded gate parameter. Every gate of gates.def has
// generator eigenvalue gaps within {1/2, 1}, for which the four-term rule is exact; the
// gates whose gaps are exactly {1} (single Pauli rotations and phases, uncontrolled) need
// only the two-term rule.
std::vector<ShiftTerm> shiftRule(const Operation &op) {
    constexpr double kPi = 3.14159265358979323846;
    static const std::vector<ShiftTerm> twoTerm{{kPi / 2, 0.5}};
    static const std::vector<ShiftTerm> fourTerm{
        {kPi / 2, (std::sqrt(2.0) + 1) / (4 * std::sqrt(2.0))},
        {3 * kPi / 2, -(std::sqrt(2.0) - 1) / (4 * std::sqrt(2.0))}};
    if (!op.ctrlWires.empty()) return fourTerm;
    if (op.kind == Operation::Kind::PauliRot) return twoTerm;
    switch (op.gateId) {
    case CF_GATE_RX: case CF_GATE_RY: case CF_GATE_RZ: case CF_GATE_PhaseShift:
    case CF_GATE_Rot: case CF_GATE_U1: case CF_GATE_U2: case CF_GATE_U3:
    case CF_GATE_IsingXX: case CF_GATE_IsingYY: case CF_GATE_IsingZZ:
    case CF_GATE_MultiRZ: case CF_GATE_ControlledPhaseShift:
        return twoTerm;
    default:
        return fourTerm;
    }
}

} // namespace

extern "C" {

void cf_rt_tape_start(void) {
    guardedVoid("cf_rt_tape_start", [] {
        device().tapeStarting();
        ctx.tape.clear();
        ctx.tapeParams = 0;
        ctx.recordedResults.clear();
        ctx.recordedUndifferentiable.clear();
        ctx.diffCoeffs.clear();
        ctx.coeffEntries.clear();
        ctx.tapeStarted = ctx.recording = true;
    });
}

void cf_rt_tape_stop(void) {
    guardedVoid("cf_rt_tape_stop", [] {
        if (!ctx.recording) fail(CF_ERR_INVALID_ARGUMENT, "the tape is not recording (call cf_rt_tape_start first)");
        ctx.recording = false;
    });
}

int64_t cf_rt_tape_num_params(void) {
    return guarded("cf_rt_tape_num_params", int64_t(-1), [] { return ctx.tapeParams; });
}

void cf_rt_adjoint_jacobian(const int64_t *obs, int64_t num_obs, double *jac) {
    guardedVoid("cf_rt_adjoint_jacobian", [&] {
        QuantumDevice &dev = device();
        if (!ctx.tapeStarted) fail(CF_ERR_INVALID_ARGUMENT, "no tape recorded (call cf_rt_tape_start before the gates)");
        const auto list = observables(obs, num_obs);
        if (num_obs > 0 && ctx.tapeParams > 0 && !jac) fail(CF_ERR_INVALID_ARGUMENT, "null jacobian output");
        dev.adjointJacobian(ctx.tape, ctx.tapeParams, list, jac);
    });
}

void cf_rt_jacobian_recorded(double *jac, int64_t num_results, int64_t num_params) {
    guardedVoid("cf_rt_jacobian_recorded", [&] {
        QuantumDevice &dev = device();
        checkRecordedJacobian(jac, num_results, num_params);
        std::vector<const Observable *> list;
        list.reserve(ctx.recordedResults.size());
        for (const Observable &o : ctx.recordedResults) list.push_back(&o);
        dev.adjointJacobian(ctx.tape, ctx.tapeParams, list, jac);
        fillCoefficientColumns(jac, num_params);
    });
}

void cf_rt_jacobian_recorded_shift(double *jac, int64_t num_results, int64_t num_params) {
    guardedVoid("cf_rt_jacobian_recorded_shift", [&] {
        QuantumDevice &dev = device();
        checkRecordedJacobian(jac, num_results, num_params);
        const size_t rows = size_t(num_results);
        std::vector<const Operation *> owner(size_t(num_params), nullptr);
        for (const Operation &op : ctx.tape)
            for (size_t k = 0; op.firstParam >= 0 && k < op.params.size(); ++k)
                owner[size_t(op.firstParam) + k] = &op;
        std::vector<double> plus(rows), minus(rows);
        auto measure = [&](std::vector<double> &out) {
            for (size_t r = 0; r < rows; ++r) out[r] = dev.expval(ctx.recordedResults[r]);
        };
        for (int64_t p = 0; p < num_params; ++p) {
            for (size_t r = 0; r < rows; ++r) jac[r * size_t(num_params) + size_t(p)] = 0.0;
            if (!owner[size_t(p)]) continue; // a Hamiltonian coefficient: filled below
            for (const ShiftTerm &term : shiftRule(*owner[size_t(p)])) {
                replayShifted(dev, p, term.shift);
                measure(plus);
                replayShifted(dev, p, -term.shift);
                measure(minus);
                for (size_t r = 0; r < rows; ++r)
                    jac[r * size_t(num_params) + size_t(p)] += term.coeff * (plus[r] - minus[r]);
            }
        }
        replayShifted(dev, 0, 0.0); // leave the unshifted final state
        fillCoefficientColumns(jac, num_params);
    });
}

void cf_rt_tape_replay_shifted(int64_t param_index, double shift) {
    guardedVoid("cf_rt_tape_replay_shifted", [&] {
        QuantumDevice &dev = device();
        if (!ctx.tapeStarted) fail(CF_ERR_INVALID_ARGUMENT, "no tape recorded");
        if (ctx.recording) fail(CF_ERR_INVALID_ARGUMENT, "stop the tape (cf_rt_tape_stop) before replaying it");
        if (param_index < 0 || param_index >= ctx.tapeParams)
            fail(CF_ERR_INVALID_ARGUMENT, "parameter index ", param_index, " out of range (the tape has ",
                 ctx.tapeParams, " parameters)");
        replayShifted(dev, param_index, shift);
    });
}

} // extern "C"
