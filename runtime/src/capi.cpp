// The C ABI (runtime.h): argument validation, the per-thread error slot, the current device,
// observable handles and the gate tape. Everything that depends on how states are stored is
// behind QuantumDevice.
//
// Every entry point runs its body through `guarded`: a no-op once an error is pending, and
// any exception (cf::Error, std::bad_alloc, anything else) becomes the pending error. No
// exception ever crosses the C boundary, and nothing aborts the host process.
// The library is built with hidden visibility; only the ABI declared here is exported.
#pragma GCC visibility push(default)
#include "cofactor/runtime.h"
#pragma GCC visibility pop

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "DistributedLoader.hpp"
#include "Error.hpp"
#include "GateMatrices.hpp"
#include "Observables.hpp"
#include "QuantumDevice.hpp"

using namespace cf;

namespace {

// Beyond this a state vector (16 * 2^n bytes) cannot exist on any machine we target; the
// check also keeps 2^n from overflowing before the memory check runs.
constexpr int64_t kQubitCap = 50;
// Released devices up to this size stay allocated for the next acquire on the thread;
// bigger ones are freed so that a finished program does not keep gigabytes.
constexpr int kKeepAfterReleaseQubits = 24;

struct ThreadContext {
    int64_t errorCode = CF_OK;
    std::string errorMessage;

    std::unique_ptr<QuantumDevice> device; // possibly kept after release, for reuse
    bool distributed = false;               // device is sharded over MPI ranks
    bool active = false;

    // handle = generation << 32 | index: a handle from an earlier acquire is detected
    // instead of silently naming an unrelated observable.
    std::vector<Observable> observables;
    int64_t generation = 0;

    std::vector<Operation> tape;
    bool tapeStarted = false, recording = false;
    int64_t tapeParams = 0;
    // What was measured while recording, one observable per result element (an expval's
    // observable, or one basis projector per probability): the rows of
    // cf_rt_jacobian_recorded. A measurement without an adjoint rule is remembered by name.
    std::vector<Observable> recordedResults;
    std::string recordedUndifferentiable;
    // Hamiltonians made by cf_rt_obs_hamiltonian_diff while recording: their coefficients
    // are tape parameters [firstParam, firstParam + terms.size()), and d<H>/dc_k = <O_k>.
    // Keyed by the handle's index; each expval of one adds its entries below.
    struct DiffCoeffs {
        int64_t firstParam;
        std::vector<Observable> terms;
    };
    std::unordered_map<int64_t, DiffCoeffs> diffCoeffs;
    struct CoeffEntry {
        size_t row;
        int64_t param;
        double value;
    };
    std::vector<CoeffEntry> coeffEntries; // jac[row][param] = value

    Operation scratch; // reused per gate call, so that applying a gate does not allocate
};
thread_local ThreadContext ctx;

void setError(int64_t code, const std::string &message) {
    if (ctx.errorCode != CF_OK) return; // the first error is the one that explains
    ctx.errorCode = code;
    ctx.errorMessage = message;
}

template <class R, class F> R guarded(const char *fn, R fallback, F &&body) {
    if (ctx.errorCode != CF_OK) return fallback;
    try {
        return body();
    } catch (const Error &e) {
        setError(e.code(), std::string(fn) + ": " + e.what());
    } catch (const std::bad_alloc &) {
        setError(CF_ERR_OUT_OF_MEMORY, std::string(fn) + ": out of memory");
    } catch (const std::exception &e) {
        setError(CF_ERR_INTERNAL, std::string(fn) + ": internal error: " + e.what());
    } catch (...) {
        setError(CF_ERR_INTERNAL, std::string(fn) + ": internal error");
    }
    return fallback;
}
template <class F> void guardedVoid(const char *fn, F &&body) {
    guarded(fn, 0, [&] {
        body();
        return 0;
    });
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

QuantumDevice &device() {
    if (!ctx.active || !ctx.device)
        fail(CF_ERR_NO_DEVICE, "no current device (call cf_rt_device_acquire first)");
    return *ctx.device;
}

// Targets and controls: in range, pairwise distinct (a target may not also be a control),
// control values 0/1.
void checkWires(const char *what, int n, const int64_t *wires, int64_t numWires,
                const int64_t *ctrlWires, const int8_t *ctrlValues, int64_t numCtrls) {
    if (numWires < 0 || numCtrls < 0)
        fail(CF_ERR_INVALID_ARGUMENT, what, ": negative wire count");
    if ((numWires > 0 && !wires) || (numCtrls > 0 && (!ctrlWires || !ctrlValues)))
        fail(CF_ERR_INVALID_ARGUMENT, what, ": null wire array");
    uint64_t seen = 0;
    auto check = [&](int64_t w, const char *role) {
        if (w < 0 || w >= n)
            fail(CF_ERR_INVALID_ARGUMENT, what, ": ", role, " wire ", w,
                 " out of range for a device of ", n, " qubits");
        if (seen >> w & 1)
            fail(CF_ERR_INVALID_ARGUMENT, what, ": wire ", w,
                 " used more than once (targets and controls must be distinct)");
        seen |= uint64_t(1) << w;
    };
    for (int64_t i = 0; i < numWires; ++i) check(wires[i], "target");
    for (int64_t i = 0; i < numCtrls; ++i) {
        check(ctrlWires[i], "control");
        if (ctrlValues[i] != 0 && ctrlValues[i] != 1)
            fail(CF_ERR_INVALID_ARGUMENT, what, ": control value ", int(ctrlValues[i]),
                 " for wire ", ctrlWires[i], " (must be 0 or 1)");
    }
}

void fillControls(Operation &op, const int64_t *ctrlWires, const int8_t *ctrlValues,
                  int64_t numCtrls) {
    op.ctrlWires.assign(ctrlWires, ctrlWires + numCtrls);
    op.ctrlValues.assign(ctrlValues, ctrlValues + numCtrls);
}

// Applies the operation in ctx.scratch and, while recording, appends it to the tape.
void applyAndRecord(Operation &op) {
    device().apply(op);
    if (!ctx.recording) return;
    ctx.tape.push_back(op);
    Operation &rec = ctx.tape.back();
    const bool differentiable = op.kind != Operation::Kind::Unitary && !op.params.empty();
    rec.firstParam = differentiable ? ctx.tapeParams : -1;
    if (differentiable) ctx.tapeParams += int64_t(op.params.size());
}

// Validates a cf_rt_gate call into ctx.scratch.
Operation &makeGate(int64_t gateId, const double *params, int64_t numParams, const int64_t *wires,
                    int64_t numWires, int8_t adjoint, const int64_t *ctrlWires,
                    const int8_t *ctrlValues, int64_t numCtrls) {
    if (gateId < 0 || gateId >= CF_GATE_COUNT)
        fail(CF_ERR_INVALID_ARGUMENT, "unknown gate id ", gateId, " (gates.def has ", int(CF_GATE_COUNT),
             " gates)");
    const GateInfo &info = kGateInfo[gateId];
    if (numParams > 0 && !params) fail(CF_ERR_INVALID_ARGUMENT, info.name, ": the parameter array is NULL");
    if (numParams != info.numParams)
        fail(CF_ERR_INVALID_ARGUMENT, info.name, " takes ", info.numParams, " parameter(s), got ",
             numParams);
    const bool wiresOk = info.numWires < 0 ? numWires >= 1 : numWires == info.numWires;
    if (!wiresOk)
        fail(CF_ERR_INVALID_ARGUMENT, info.name, " acts on ",
             info.numWires < 0 ? std::string("at least 1") : std::to_string(info.numWires),
             " wire(s), got ", numWires);
    const int n = device().numQubits();
    checkWires(info.name, n, wires, numWires, ctrlWires, ctrlValues, numCtrls);
    Operation &op = ctx.scratch;
    op.kind = Operation::Kind::Gate;
    op.gateId = gateId;
    op.params.assign(params, params + numParams);
    op.wires.assign(wires, wires + numWires);
    op.adjoint = adjoint != 0;
    fillControls(op, ctrlWires, ctrlValues, numCtrls);
    return op;
}

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

std::vector<const Observable *> observables(const int64_t *handles, int64_t count) {
    if (count < 0 || (count > 0 && !handles))
        fail(CF_ERR_INVALID_ARGUMENT, "bad observable list (count ", count, ")");
    std::vector<const Observable *> out;
    for (int64_t i = 0; i < count; ++i) out.push_back(&observable(handles[i]));
    return out;
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

void forgetHandlesAndTape() {
    ctx.observables.clear();
    ++ctx.generation;
    ctx.tape.clear();
    ctx.tapeStarted = ctx.recording = false;
    ctx.tapeParams = 0;
    ctx.recordedResults.clear();
    ctx.recordedUndifferentiable.clear();
    ctx.diffCoeffs.clear();
    ctx.coeffEntries.clear();
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

int64_t cf_rt_error_code(void) { return ctx.errorCode; }
const char *cf_rt_error_message(void) { return ctx.errorMessage.c_str(); }
void cf_rt_clear_error(void) {
    ctx.errorCode = CF_OK;
    ctx.errorMessage.clear();
}

void cf_rt_report_error(int64_t code, const char *message) {
    setError(code == CF_OK ? int64_t(CF_ERR_INTERNAL) : code, message ? message : "unknown error");
}

void cf_rt_index_error(int64_t index, int64_t axis, int64_t size) {
    if (ctx.errorCode != CF_OK) return; // keep the first error; build no message for nothing
    setError(CF_ERR_INDEX, "index " + std::to_string(index) + " is out of bounds for axis " +
                               std::to_string(axis) + " with size " + std::to_string(size));
}

// ---- device lifecycle ------------------------------------------------------------------
int64_t cf_rt_device_acquire(int64_t num_qubits, int64_t shots, int64_t seed) {
    if (ctx.errorCode != CF_OK) return ctx.errorCode;
    guardedVoid("cf_rt_device_acquire", [&] {
        if (num_qubits < 0) fail(CF_ERR_INVALID_ARGUMENT, "negative number of qubits ", num_qubits);
        if (num_qubits > kQubitCap)
            fail(CF_ERR_OUT_OF_MEMORY, num_qubits, " qubits: a state vector of 2^", num_qubits,
                 " amplitudes does not fit in memory (at most ", kQubitCap, " qubits)");
        if (shots < 0) fail(CF_ERR_INVALID_ARGUMENT, "negative number of shots ", shots);
        forgetHandlesAndTape();
        ctx.active = false;
        const bool distributed = distributedRequested();
        if (ctx.device && ctx.device->numQubits() == num_qubits && ctx.distributed == distributed) {
            ctx.device->reset(shots, seed);
        } else {
            ctx.device.reset(); // free the old state before allocating the new one
            ctx.device = distributed ? makeDistributedDevice(int(num_qubits), shots, seed)
                                     : makeStateVectorDevice(int(num_qubits), shots, seed);
            ctx.distributed = distributed;
        }
        ctx.active = true;
    });
    return ctx.errorCode;
}

void cf_rt_device_release(void) {
    // Deliberately not guarded: releasing must work after an error, so that the launcher
    // can always clean up.
    ctx.active = false;
    forgetHandlesAndTape();
    if (ctx.device && ctx.device->numQubits() > kKeepAfterReleaseQubits) ctx.device.reset();
}

int64_t cf_rt_num_qubits(void) {
    return guarded("cf_rt_num_qubits", int64_t(-1), [] { return int64_t(device().numQubits()); });
}
int64_t cf_rt_shots(void) {
    return guarded("cf_rt_shots", int64_t(-1), [] { return device().shots(); });
}

// ---- gates -------------------------------------------------------------------------------
void cf_rt_gate(int64_t gate_id, const double *params, int64_t num_params, const int64_t *wires,
                int64_t num_wires, int8_t adjoint, const int64_t *ctrl_wires,
                const int8_t *ctrl_values, int64_t num_ctrls) {
    guardedVoid("cf_rt_gate", [&] {
        applyAndRecord(makeGate(gate_id, params, num_params, wires, num_wires, adjoint,
                                ctrl_wires, ctrl_values, num_ctrls));
    });
}

void cf_rt_gate_table(const int64_t *table, int64_t num_gates, const double *params,
                      const int64_t *dyn_wires) {
    if (ctx.errorCode != CF_OK) return;
    if (num_gates < 0 || (num_gates > 0 && !table)) {
        setError(CF_ERR_INVALID_ARGUMENT, "cf_rt_gate_table: bad gate table");
        return;
    }
    // Decoded wires and control values of one record; reused, so that a warm run does not
    // allocate.
    thread_local std::vector<int64_t> wires;
    thread_local std::vector<int8_t> ctrlValues;
    thread_local std::string word;
    const int64_t *rec = table;
    for (int64_t g = 0; g < num_gates && ctx.errorCode == CF_OK; ++g) {
        const int64_t gateId = rec[0], numParams = rec[1], numWires = rec[2], numCtrls = rec[3];
        const int8_t adjoint = int8_t(rec[4] != 0);
        const int64_t paramOffset = rec[5];
        if (numParams < 0 || numWires < 0 || numCtrls < 0 || paramOffset < 0) {
            setError(CF_ERR_INVALID_ARGUMENT, "cf_rt_gate_table: bad gate record");
            return;
        }
        const int64_t *codes = rec + 6;
        wires.resize(size_t(numWires + numCtrls));
        for (int64_t i = 0; i < numWires + numCtrls; ++i) {
            const int64_t code = codes[i];
            wires[size_t(i)] = code >= 0 ? code : dyn_wires[-code - 1];
        }
        ctrlValues.resize(size_t(numCtrls));
        for (int64_t i = 0; i < numCtrls; ++i)
            ctrlValues[size_t(i)] = int8_t(codes[numWires + numCtrls + i]);
        const int64_t *ctrls = numCtrls ? wires.data() + numWires : nullptr;
        const int8_t *values = numCtrls ? ctrlValues.data() : nullptr;
        rec = codes + numWires + 2 * numCtrls;
        if (gateId == CF_GATE_TABLE_PAULI_ROT) {
            if (numParams != 1) {
                setError(CF_ERR_INVALID_ARGUMENT, "cf_rt_gate_table: bad PauliRot record");
                return;
            }
            word.assign(rec, rec + numWires);
            rec += numWires;
            cf_rt_pauli_rot(params[paramOffset], word.c_str(), wires.data(), numWires, adjoint,
                            ctrls, values, numCtrls);
        } else {
            cf_rt_gate(gateId, numParams ? params + paramOffset : nullptr, numParams,
                       wires.data(), numWires, adjoint, ctrls, values, numCtrls);
        }
    }
}

void cf_rt_gate_repeat(int64_t repeats, int64_t gate_id, const double *params, int64_t num_params,
                       const int64_t *wires, int64_t num_wires) {
    guardedVoid("cf_rt_gate_repeat", [&] {
        if (ctx.recording) fail(CF_ERR_NOT_SUPPORTED, "not available while the tape records");
        Operation &op = makeGate(gate_id, params, num_params, wires, num_wires, 0, nullptr, nullptr, 0);
        QuantumDevice &dev = device();
        for (int64_t i = 0; i < repeats; ++i) dev.apply(op);
    });
}

const char *cf_rt_gate_info(int64_t gate_id, int64_t *num_params, int64_t *num_wires) {
    if (gate_id < 0 || gate_id >= CF_GATE_COUNT) return nullptr;
    if (num_params) *num_params = kGateInfo[gate_id].numParams;
    if (num_wires) *num_wires = kGateInfo[gate_id].numWires;
    return kGateInfo[gate_id].name;
}

void cf_rt_pauli_rot(double theta, const char *word, const int64_t *wires, int64_t num_wires,
                     int8_t adjoint, const int64_t *ctrl_wires, const int8_t *ctrl_values,
                     int64_t num_ctrls) {
    guardedVoid("cf_rt_pauli_rot", [&] {
        if (!word) fail(CF_ERR_INVALID_ARGUMENT, "PauliRot: null word");
        const size_t len = std::strlen(word);
        if (num_wires < 1 || int64_t(len) != num_wires)
            fail(CF_ERR_INVALID_ARGUMENT, "PauliRot: word \"", word, "\" has ", len,
                 " letter(s) but ", num_wires, " wire(s) were given");
        for (size_t i = 0; i < len; ++i)
            if (!std::strchr("IXYZ", word[i]) || word[i] == '\0')
                fail(CF_ERR_INVALID_ARGUMENT, "PauliRot: word \"", word,
                     "\" may only contain I, X, Y, Z");
        checkWires("PauliRot", device().numQubits(), wires, num_wires, ctrl_wires, ctrl_values,
                   num_ctrls);
        Operation &op = ctx.scratch;
        op.kind = Operation::Kind::PauliRot;
        op.params.assign(1, theta);
        op.word = word;
        op.wires.assign(wires, wires + num_wires);
        op.adjoint = adjoint != 0;
        fillControls(op, ctrl_wires, ctrl_values, num_ctrls);
        applyAndRecord(op);
    });
}

void cf_rt_unitary(const double *matrix, const int64_t *wires, int64_t num_wires, int8_t adjoint,
                   const int64_t *ctrl_wires, const int8_t *ctrl_values, int64_t num_ctrls) {
    guardedVoid("cf_rt_unitary", [&] {
        // the unitarity check is O(8^k): 10 wires is about a second
        constexpr int64_t kMaxUnitaryWires = 10;
        if (num_wires < 1 || num_wires > kMaxUnitaryWires)
            fail(CF_ERR_INVALID_ARGUMENT, "QubitUnitary: acts on 1..", kMaxUnitaryWires,
                 " wires, got ", num_wires);
        if (!matrix) fail(CF_ERR_INVALID_ARGUMENT, "QubitUnitary: null matrix");
        checkWires("QubitUnitary", device().numQubits(), wires, num_wires, ctrl_wires,
                   ctrl_values, num_ctrls);
        const size_t dim = size_t(1) << num_wires;
        Operation &op = ctx.scratch;
        op.kind = Operation::Kind::Unitary;
        op.params.clear();
        op.matrix.resize(dim * dim);
        for (size_t i = 0; i < dim * dim; ++i) {
            if (!std::isfinite(matrix[2 * i]) || !std::isfinite(matrix[2 * i + 1]))
                fail(CF_ERR_NOT_FINITE, "QubitUnitary: the matrix has a NaN or infinite entry at (",
                     i / dim, ", ", i % dim, ")");
            op.matrix[i] = cplx(matrix[2 * i], matrix[2 * i + 1]);
        }
        // PennyLane's test (QubitUnitary(unitary_check=True)): allclose(U U^dagger, I,
        // rtol=1e-5, atol=1e-6), so a unitary written to ~7 digits passes.
        double worst = 0; // the largest |(U U^dagger - I)_rc| - (atol + rtol |I_rc|)
        double err = 0;
        for (size_t r = 0; r < dim; ++r)
            for (size_t c = 0; c < dim; ++c) {
                cplx s = 0;
                for (size_t j = 0; j < dim; ++j) s += op.matrix[r * dim + j] * std::conj(op.matrix[c * dim + j]);
                const double e = std::abs(s - cplx(r == c ? 1.0 : 0.0));
                err = std::max(err, e);
                worst = std::max(worst, e - (1e-6 + (r == c ? 1e-5 : 0.0)));
            }
        if (worst > 0)
            fail(CF_ERR_INVALID_ARGUMENT, "QubitUnitary: matrix is not unitary (max |U U^dagger - I| = ",
                 err, "; PennyLane's tolerance is atol=1e-6, rtol=1e-5)");
        op.wires.assign(wires, wires + num_wires);
        op.adjoint = adjoint != 0;
        fillControls(op, ctrl_wires, ctrl_values, num_ctrls);
        applyAndRecord(op);
    });
}

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

// ---- differentiation -------------------------------------------------------------------------
void cf_rt_tape_start(void) {
    guardedVoid("cf_rt_tape_start", [] {
        device();
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
