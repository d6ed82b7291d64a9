// The device interface behind the C ABI. capi.cpp validates arguments, keeps the error slot,
// the observable handles and the gate tape, and forwards everything else here, so another
// CPU simulator (a different precision, a tensor network...) only implements this class.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "GateMatrices.hpp"
#include "Observables.hpp"

namespace cf {

// One operation, owning its arguments: what the tape records and replays.
struct Operation {
    enum class Kind { Gate, PauliRot, Unitary, Measure };
    Kind kind = Kind::Gate;
    int64_t gateId = 0;              // Kind::Gate
    std::vector<double> params;      // Gate: per gates.def; PauliRot: {theta}
    std::vector<int64_t> wires;      // targets (Gate: including built-in controls, e.g. CNOT's)
    std::vector<int64_t> ctrlWires;  // extra controls
    std::vector<int8_t> ctrlValues;
    bool adjoint = false;
    std::string word;                // PauliRot
    std::vector<cplx> matrix;        // Unitary
    bool reset = false;              // Measure
    int64_t postselect = -1;         // Measure
    int64_t firstParam = -1;         // tape numbering of params[0]; -1: not differentiable
};

class QuantumDevice {
  public:
    virtual ~QuantumDevice() = default;

    virtual int numQubits() const = 0;
    virtual int64_t shots() const = 0;
    // back to |0...0>, new shots and seed (seed < 0: from the system's entropy)
    virtual void reset(int64_t shots, int64_t seed) = 0;
    virtual void resetState() = 0; // |0...0>, keeping shots and the RNG stream

    // `op` is already validated (wires in range and distinct, sizes right).
    virtual void apply(const Operation &op) = 0;
    virtual int measure(int64_t wire, bool reset, int64_t postselect) = 0;

    virtual double expval(const Observable &obs) = 0;
    virtual double var(const Observable &obs) = 0;
    virtual void probs(const int64_t *wires, int k, double *out) = 0;
    virtual void state(double *out) = 0;
    virtual void setState(const double *amplitudes) = 0;
    virtual void sample(const int64_t *wires, int k, int64_t *out) = 0;
    virtual void counts(const int64_t *wires, int k, int64_t *out) = 0;

    // cf_rt_tape_start: the tape's gates start from the state as it is now (a device may
    // note whether that is |0...0>; StateVectorDevice's adjoint Jacobian then writes the
    // state after the tape's leading one-wire gates instead of walking back to it).
    virtual void tapeStarting() {}
    // d<obs_i>/d(param j) of the current state, for a tape of gates that produced it.
    virtual void adjointJacobian(const std::vector<Operation> &tape, int64_t numParams,
                                 const std::vector<const Observable *> &obs, double *jac) = 0;
};

// Creates the complex128 state-vector simulator (throws CF_ERR_OUT_OF_MEMORY if too big).
std::unique_ptr<QuantumDevice> makeStateVectorDevice(int numQubits, int64_t shots, int64_t seed);

} // namespace cf
