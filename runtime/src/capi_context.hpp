// What the files of the C ABI (runtime.h) share: the per-thread context behind every
// cf_rt_* call (error slot, current device, observable handles, gate tape) and `guarded`,
// which turns the exceptions below the ABI into the error slot.
//
// The ABI is split by concept:
//   capi.cpp              the context, the error slot, the device lifecycle
//   capi_gates.cpp        gates (validated into an Operation, recorded while the tape runs)
//   capi_measurements.cpp observable handles and measurements
//   capi_tape.cpp         the tape: recording, recorded Jacobians, parameter-shift replay
//
// Every entry point runs its body through `guarded`: a no-op once an error is pending, and
// any exception (cf::Error, std::bad_alloc, anything else) becomes the pending error. No
// exception ever crosses the C boundary, and nothing aborts the host process.
#pragma once

// The library is built with hidden visibility; only the ABI declared in runtime.h is
// exported. The visibility of a function is that of its first declaration, so every capi
// file includes this header first, before anything else that includes runtime.h.
#pragma GCC visibility push(default)
#include "cofactor/runtime.h"
#pragma GCC visibility pop

#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "Error.hpp"
#include "Observables.hpp"
#include "QuantumDevice.hpp"

// A namespace of its own: these names (ThreadContext, device, observable ...) have external
// linkage now that several files share them, and must not meet a namesake elsewhere in cf.
namespace cf::capi {

struct ThreadContext {
    int64_t errorCode = CF_OK;
    std::string errorMessage;

    std::unique_ptr<QuantumDevice> device; // possibly kept after release, for reuse
    // cf_rt_seeded_call_begin/end: while a seeded call runs (depth > 0), how many acquires
    // each seed has had in it; a nested call keeps its own counts (saved by begin).
    int64_t seededCallDepth = 0;
    std::unordered_map<int64_t, uint64_t> seedRuns;
    std::vector<std::unordered_map<int64_t, uint64_t>> savedSeedRuns;
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
// Defined in capi.cpp.
extern thread_local ThreadContext ctx;

inline void setError(int64_t code, const std::string &message) {
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

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();

inline QuantumDevice &device() {
    if (!ctx.active || !ctx.device)
        fail(CF_ERR_NO_DEVICE, "no current device (call cf_rt_device_acquire first)");
    return *ctx.device;
}

// Targets and controls: in range, pairwise distinct (a target may not also be a control),
// control values 0/1. (capi.cpp)
void checkWires(const char *what, int n, const int64_t *wires, int64_t numWires,
                const int64_t *ctrlWires, const int8_t *ctrlValues, int64_t numCtrls);

// The observables of a list of handles, each checked. (capi_measurements.cpp)
std::vector<const Observable *> observables(const int64_t *handles, int64_t count);

} // namespace cf::capi
