// The C ABI (runtime.h), part one: the per-thread context's definition, the error slot and
// the current device's lifecycle. capi_context.hpp says how the rest of the ABI is split
// and what `guarded` does; everything that depends on how states are stored is behind
// QuantumDevice.
#include "capi_context.hpp"

#include <string>

#include "DistributedLoader.hpp"

using namespace cf;
using namespace cf::capi;

namespace cf::capi {

thread_local ThreadContext ctx;

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

} // namespace cf::capi

namespace {

// Beyond this a state vector (16 * 2^n bytes) cannot exist on any machine we target; the
// check also keeps 2^n from overflowing before the memory check runs.
constexpr int64_t kQubitCap = 50;
// Released devices up to this size stay allocated for the next acquire on the thread;
// bigger ones are freed so that a finished program does not keep gigabytes.
constexpr int kKeepAfterReleaseQubits = 24;

// The seed of the k-th acquire with seed `seed` in a seeded call: the seed itself the
// first time (a circuit run once per call samples as before), then a splitmix64 mix of
// both, kept non-negative and away from the special negative seeds.
int64_t runSeed(int64_t seed) {
    if (seed < 0 || ctx.seededCallDepth == 0) return seed;
    const uint64_t k = ctx.seedRuns[seed]++;
    if (k == 0) return seed;
    uint64_t z = uint64_t(seed) + k * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return int64_t((z ^ (z >> 31)) >> 2);
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
        seed = runSeed(seed);
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

int64_t cf_rt_seeded_call_begin(void) {
    // not guarded: bookkeeping only, and it must pair with end whatever happens
    const int64_t previous = ctx.seededCallDepth;
    if (previous > 0) ctx.savedSeedRuns.push_back(std::move(ctx.seedRuns));
    ctx.seedRuns.clear();
    ctx.seededCallDepth = previous + 1;
    return previous;
}

void cf_rt_seeded_call_end(int64_t previous) {
    ctx.seedRuns.clear();
    if (previous > 0 && !ctx.savedSeedRuns.empty()) {
        ctx.seedRuns = std::move(ctx.savedSeedRuns.back());
        ctx.savedSeedRuns.pop_back();
    }
    ctx.seededCallDepth = previous < 0 ? 0 : previous;
}

int64_t cf_rt_num_qubits(void) {
    return guarded("cf_rt_num_qubits", int64_t(-1), [] { return int64_t(device().numQubits()); });
}
int64_t cf_rt_shots(void) {
    return guarded("cf_rt_shots", int64_t(-1), [] { return device().shots(); });
}

} // extern "C"
