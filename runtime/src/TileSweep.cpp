// Queued low-bit steps applied tile by tile over the thread pool (see TileSweep.hpp).
#include "TileSweep.hpp"

#include <atomic>
#include <exception>

#include "GateFusion.hpp"
#include "GateMatrices.hpp"
#include "StateVectorDevice.hpp"
#include "ThreadPool.hpp"

namespace cf::tiles {

namespace {
thread_local bool tLaterTile = false;
const double kNoParams[1] = {0};
} // namespace

bool laterTile() { return tLaterTile; }

bool onLowBits(int n, int t, const int64_t *wires, int count) {
    for (int i = 0; i < count; ++i)
        if (bitOf(n, wires[i]) >= t) return false;
    return true;
}

Step operationStep(const Operation &op, bool inverse, int n, int t) {
    const int64_t shift = n - t;
    Step s;
    if (op.kind == Operation::Kind::Gate) { // as applyOperation
        const Canonical c = canonicalGate(op.gateId);
        const int k = int(op.wires.size()) - c.builtinCtrls;
        s.g = baseGateMatrix(c.base, op.params.empty() ? kNoParams : op.params.data(), k, op.adjoint != inverse);
        const Controls ctrls = operationControls(op);
        for (int i = 0; i < ctrls.size; ++i) s.ctrls.add(ctrls.wire[i] - shift, ctrls.value[i]);
        for (int i = 0; i < k; ++i) s.targets.push_back(op.wires[size_t(c.builtinCtrls + i)] - shift);
        return s;
    }
    s.kind = Step::Kind::Operation;
    s.op = op;
    for (int64_t &w : s.op.wires) w -= shift;
    for (int64_t &w : s.op.ctrlWires) w -= shift;
    s.inverse = inverse;
    return s;
}

Step matrixStep(std::vector<cplx> M, const int64_t *wires, int q, int n, int t) {
    Step s;
    s.kind = Step::Kind::Matrix;
    s.M = std::move(M);
    for (int i = 0; i < q; ++i) s.targets.push_back(wires[i] - (n - t));
    return s;
}

void apply(cplx *sv, int n, int t, const std::vector<Step> &steps) {
    struct Job {
        cplx *sv;
        int t;
        uint64_t tiles;
        int chunks;
        const std::vector<Step> *steps;
        std::atomic<bool> failed{false};
        std::exception_ptr error;
    } job{sv, t, uint64_t(1) << (n - t), 0, &steps, {false}, nullptr};
    job.chunks = pool::chunkCount(job.tiles, uint64_t(1) << n);
    pool::run(job.chunks, uint64_t(1) << n, [](void *ctx, int c) {
        Job &j = *static_cast<Job *>(ctx);
        const int outer = pool::tlsChunk;
        pool::tlsChunk = 0; // the kernels below run in one piece (chunk 0) inside this chunk
        try {
            const uint64_t end = pool::chunkBegin(j.tiles, j.chunks, c + 1);
            for (uint64_t i = pool::chunkBegin(j.tiles, j.chunks, c); i < end && !j.failed; ++i) {
                cplx *tile = j.sv + (i << j.t);
                tLaterTile = i != 0;
                for (const Step &s : *j.steps) {
                    switch (s.kind) {
                    case Step::Kind::Gate: applyGateMatrix(tile, j.t, s.g, s.targets.data(), s.ctrls); break;
                    case Step::Kind::Matrix:
                        fusion::applyMatrix(tile, j.t, s.M, s.targets.data(), int(s.targets.size()));
                        break;
                    case Step::Kind::Operation: applyOperation(tile, j.t, s.op, s.inverse); break;
                    }
                }
            }
        } catch (...) { // a worker's exception would end the process: the caller rethrows it
            if (!j.failed.exchange(true)) j.error = std::current_exception();
        }
        pool::tlsChunk = outer;
        tLaterTile = false;
    }, &job);
    if (job.error) std::rethrow_exception(job.error);
}

} // namespace cf::tiles
