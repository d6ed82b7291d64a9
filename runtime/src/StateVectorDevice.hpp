// The complex128 state-vector simulator: one std::vector of 2^n amplitudes and an RNG.
// Operations are turned into GateMatrix + wires here and handed to the kernels.
#pragma once

#include <random>

#include "GateFusion.hpp"
#include "QuantumDevice.hpp"
#include "StateVector.hpp"

namespace cf {

// The controls an operation runs under: a table gate's built-in ones (CNOT's first wire...)
// with value 1, then the explicit ones.
Controls operationControls(const Operation &op);

// sv = U sv (inverse: U^dagger sv) for a Gate / PauliRot / Unitary operation.
void applyOperation(cplx *sv, int n, const Operation &op, bool inverse);

// dU/d(param j) of a Gate operation on its targets (operationTargets), without controls:
// the derivative of a controlled gate is that matrix on the control subspace and 0 elsewhere.
GateMatrix gateDerivative(const Operation &op, int j);
const int64_t *operationTargets(const Operation &op);

// sv = dU/d(param j) sv for a PauliRot, on the target wires only (controls as above).
void applyPauliRotDerivative(cplx *sv, int n, const Operation &op);

// Bytes the process can still allocate (MemAvailable, and its memory cgroup's limit less
// its usage: MemoryBudget.cpp); checkMemory throws
// CF_ERR_OUT_OF_MEMORY unless `bytes` more fit (with a margin); `what` names the use.
double availableMemory();
void checkMemory(double bytes, const char *what);
// Bytes of the result arrays of the compiled call running on this thread (cf_rt_call),
// which checkMemory adds to every request; 0 outside such a call.
double pendingResultBytes();
void setPendingResultBytes(double bytes);
// Below this, checkMemory does not look (reading /proc/meminfo costs more than a gate on a
// small register).
constexpr double kSmallAllocation = 64.0 * (1 << 20);

// The seed of a device_acquire that keeps the random stream as the previous acquire left it
// (the shots of a one-shot loop: the frontend seeds once before the loop).
constexpr int64_t kContinueSeed = -2;

class StateVectorDevice final : public QuantumDevice {
  public:
    StateVectorDevice(int numQubits, int64_t shots, int64_t seed);

    int numQubits() const override { return n_; }
    int64_t shots() const override { return shots_; }
    void reset(int64_t shots, int64_t seed) override;
    void resetState() override;

    // gates are queued for fusion (GateFusion.hpp); every other method reads or replaces the
    // state, so it first flushes (or discards) the queue
    void apply(const Operation &op) override { fuser_.add(sv_.data(), n_, op); }
    int measure(int64_t wire, bool reset, int64_t postselect) override;

    double expval(const Observable &obs) override;
    double var(const Observable &obs) override;
    void probs(const int64_t *wires, int k, double *out) override;
    void state(double *out) override;
    void setState(const double *amplitudes) override;
    void sample(const int64_t *wires, int k, int64_t *out) override;
    void counts(const int64_t *wires, int k, int64_t *out) override;

    void tapeStarting() override { tapeFromZero_ = fuser_.atZero(); }
    void adjointJacobian(const std::vector<Operation> &tape, int64_t numParams,
                         const std::vector<const Observable *> &obs, double *jac) override;

    // For the distributed device (mpi/DistributedDevice), which keeps its shard in a
    // StateVectorDevice and draws from its random stream: the amplitudes (with the queued
    // gates applied first), a uniform in [0, 1), and the sampler.
    cplx *data() {
        flush();
        return sv_.data();
    }
    double uniform() { return double(rng_() >> 11) * 0x1.0p-53; }
    // `shots` outcome indices (over 2^k outcomes) drawn from probs by the alias method.
    std::vector<uint32_t> drawOutcomes(const std::vector<double> &probs, int64_t shots);
    // CF_ERR_NOT_FINITE: `what` cannot sample a state with NaN/inf amplitudes
    [[noreturn]] static void notFinite(const char *what);

  private:
    void flush() { fuser_.flush(sv_.data(), n_); }
    // finite-shot estimate of one term's expectation (and of its variance when var != null)
    void sampleTerm(const ObsTerm &t, double &mean, double *var);

    int n_;
    int64_t shots_;
    StateBuffer sv_;
    std::mt19937_64 rng_;
    bool entropySeeded_ = false; // the stream came from std::random_device, not a seed
    uint64_t entropyForks_ = 0;  // forkCount() when it did (a forked child draws anew)
    GateFuser fuser_;
    bool tapeFromZero_ = false; // the recorded tape started from |0...0> (tapeStarting)
};

} // namespace cf
