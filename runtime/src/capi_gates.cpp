// The C ABI's gate entry points: each call is validated into an Operation (the context's
// scratch one, so that applying a gate does not allocate), applied to the current device
// and, while the tape records, appended to it with its parameters numbered.
#include "capi_context.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "GateMatrices.hpp"

using namespace cf;
using namespace cf::capi;

namespace {

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

} // namespace

extern "C" {

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

} // extern "C"
