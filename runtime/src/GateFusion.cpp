// Gate fusion (see GateFusion.hpp): pending blocks on disjoint wires, their matrices built
// when a block is applied.
#include "GateFusion.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "Error.hpp"
#include "LightCone.hpp"
#include "StateVectorDevice.hpp"
#include "ThreadPool.hpp"
#include "TileSweep.hpp"

namespace cf {

namespace {

constexpr double kDefaultPassCost = 1; // (GateFuser::splitPays; see configure)

int envInt(const char *name, int fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

} // namespace

using namespace fusion;

void GateFuser::configure(int n) {
    discard();
    const bool on = envInt("COFACTOR_FUSION", 1) != 0;
    const int minQubits = envInt("COFACTOR_FUSION_MIN_QUBITS", kDefaultFusionMinQubits);
    const int fallback = n >= kWideFusionMinQubits ? 3 : 2;
    const int k = std::clamp(envInt("COFACTOR_FUSION_QUBITS", fallback), 1, kMaxFusionQubits);
    maxQubits_ = on && n >= minQubits ? k : 0;
    lightCone_ = envInt("COFACTOR_FUSION_LIGHT_CONE", 1) != 0;
    hadamard_ = envInt("COFACTOR_FUSION_HADAMARD", 1) != 0; // (applyHadamardBlock)
    // splitPays' cost of a pass, in FMAs per amplitude: 1 (measured in-process, one thread,
    // CPU time, 12 alternated batches, default against -1 = never split: the long 16-wire
    // circuit 11.71 / 12.32 ms, SEL forward n = 16 1.19 / 1.24 ms, n = 20 23.7 / 23.8 ms;
    // 3, which splits nothing at k = 3, n = 20: 24.5 ms)
    const char *pass = std::getenv("COFACTOR_FUSION_PASS_COST");
    passCost_ = pass && *pass ? std::atof(pass) : kDefaultPassCost;
    // tiles: only where the kernels inside a tile run on one thread (below the pool's
    // threshold), so that the pass over the tiles is the only parallel loop
    const int tile = envInt("COFACTOR_FUSION_TILE_QUBITS", kDefaultTileQubits);
    tileQubits_ = maxQubits_ > 0 && n >= envInt("COFACTOR_FUSION_TILE_MIN_QUBITS", kTileMinQubits) && tile >= kMaxFusionQubits && tile <= n - 3 &&
                          (uint64_t(1) << tile) < pool::minParallelAmps()
                      ? tile
                      : 0;
}

void GateFuser::discard() {
    blocks_.clear();
    ready_.clear();
    used_ = 0;
    queued_ = 0;
    prefix_ = prefixDirty_ = false;
}

bool GateFuser::startFromZero(int n) {
    discard();
    if (!enabled()) return false;
    prefix_ = true;
    zeroUnwritten_ = true;
    wireVec_.assign(2 * size_t(n), cplx(0));
    for (int w = 0; w < n; ++w) wireVec_[2 * size_t(w)] = 1;
    cnots_.clear();
    return true;
}

// Takes op into the product prefix if it keeps the state a permuted product state.
bool GateFuser::absorb(const Operation &op) {
    if (op.kind != Operation::Kind::Gate && op.kind != Operation::Kind::Unitary) return false;
    if (!fusable(op)) return false;
    int64_t w[kMaxQubits];
    const int nw = localWires(op, w);
    if (nw == 1 && cnots_.empty()) { // a one-wire gate on the product: its wire's 2-vector
        const std::vector<cplx> m = localMatrix(op, 1, false);
        cplx *v = &wireVec_[2 * size_t(w[0])];
        const cplx v0 = v[0], v1 = v[1];
        v[0] = m[0] * v0 + m[1] * v1;
        v[1] = m[2] * v0 + m[3] * v1;
        prefixDirty_ = true;
        return true;
    }
    if (op.kind != Operation::Kind::Gate) return false;
    const int64_t base = canonicalGate(op.gateId).base;
    const Controls c = operationControls(op);
    if (base == CF_GATE_PauliX && c.size == 1 && c.value[0] == 1 && nw == 2) { // CNOT
        cnots_.emplace_back(c.wire[0], w[0]);
    } else if (base == CF_GATE_SWAP && c.size == 0 && nw == 2) { // three CNOTs
        cnots_.emplace_back(w[0], w[1]);
        cnots_.emplace_back(w[1], w[0]);
        cnots_.emplace_back(w[0], w[1]);
    } else {
        return false;
    }
    prefixDirty_ = true;
    return true;
}

// Writes the prefix's state: amplitude j is the product state's amplitude at i = P^-1 j,
// P the CNOTs in order (P^-1: the same CNOTs in reverse), i linear in j over GF(2).
void GateFuser::writePrefix(cplx *sv, int n) {
    prefix_ = false;
    if (!prefixDirty_) { // still |0...0>
        if (zeroUnwritten_) {
            fillZero(sv, uint64_t(1) << n);
            sv[0] = 1;
            zeroUnwritten_ = false;
        }
        return;
    }
    prefixDirty_ = false;
    zeroUnwritten_ = false; // (writeProductState writes every amplitude)
    const int h = n / 2;
    auto preimage = [&](uint64_t j) {
        for (auto it = cnots_.rbegin(); it != cnots_.rend(); ++it)
            if ((j >> bitOf(n, it->first)) & 1) j ^= uint64_t(1) << bitOf(n, it->second);
        return j;
    };
    const uint64_t lowSize = uint64_t(1) << h, highSize = uint64_t(1) << (n - h);
    std::vector<cplx> tlo(lowSize), thi(highSize);
    std::vector<uint64_t> llo, lhi;
    // bit b of an index is wire n-1-b
    auto table = [&](std::vector<cplx> &t, int firstBit, uint64_t size) {
        for (uint64_t m = 0; m < size; ++m) {
            cplx a = 1;
            for (int b = 0; (uint64_t(1) << b) < size; ++b)
                a *= wireVec_[2 * size_t(n - 1 - (firstBit + b)) + ((m >> b) & 1)];
            t[m] = a;
        }
    };
    table(tlo, 0, lowSize);
    table(thi, h, highSize);
    const bool identity = cnots_.empty();
    if (!identity) { // the preimage of each basis bit, combined per half by XOR
        uint64_t col[64];
        for (int b = 0; b < n; ++b) col[b] = preimage(uint64_t(1) << b);
        llo.assign(lowSize, 0);
        lhi.assign(highSize, 0);
        for (uint64_t m = 1; m < lowSize; ++m) llo[m] = llo[m & (m - 1)] ^ col[__builtin_ctzll(m)];
        for (uint64_t m = 1; m < highSize; ++m) lhi[m] = lhi[m & (m - 1)] ^ col[h + __builtin_ctzll(m)];
    }
    cnots_.clear();
    writeProductState(sv, n, h, tlo.data(), thi.data(), llo.data(), lhi.data(), identity);
}

void GateFuser::flushForZWords(cplx *sv, int n, uint64_t *masks, size_t count) {
    if (prefix_) writePrefix(sv, n);
    if (queued_ > 0 && queueIsConeRest_) replayQueue(sv, n); // (see queueIsConeRest_)
    if (queued_ > 0) { // the queued operations outside the words' light cone stay queued
        lightCone(queue_.data(), queued_, n, masks, count, deferred_);
        const size_t total = queued_;
        queued_ = 0; // an exception (an interrupt) cannot leave operations to apply twice
        size_t kept = 0;
        for (size_t i = 0; i < total; ++i) {
            if (!deferred_[i]) addNow(sv, n, queue_[i]);
            else if (kept++ != i) std::swap(queue_[kept - 1], queue_[i]); // in order, slots kept
        }
        if (!blocks_.empty()) flushAll(sv, n);
        if (!ready_.empty()) drain(sv, n);
        queued_ = kept;
        queueIsConeRest_ = true;
        static const bool trace = std::getenv("COFACTOR_FUSION_TRACE") != nullptr;
        if (trace) std::fprintf(stderr, "light cone: %zu of %zu operations stay queued\n", kept, total);
        return;
    }
    std::vector<Block> blocks, apply;
    blocks.swap(blocks_);
    for (Block &b : blocks) {
        bool keep = true;
        for (uint32_t i : b.ops) keep = keep && zWordMap(pool_[i]);
        (keep ? blocks_ : apply).push_back(std::move(b));
    }
    // the kept blocks stay pending (and valid) even if applying the others throws
    for (const Block &b : blocks_) // R^dagger Z R with R = C_k ... C_1: conjugate by C_k first
        for (auto it = b.ops.rbegin(); it != b.ops.rend(); ++it)
            for (size_t m = 0; m < count; ++m) masks[m] = conjugateZ(pool_[*it], n, masks[m]);
    if (blocks_.empty()) used_ = 0;
    for (const Block &b : apply) applyBlock(sv, n, b);
    if (!ready_.empty()) drain(sv, n);
}

void GateFuser::flushAll(cplx *sv, int n) {
    // Each block is removed before it is applied, so an exception (an interrupt) cannot
    // leave a block that would be applied twice.
    std::vector<Block> blocks;
    blocks.swap(blocks_);
    for (const Block &b : blocks) applyBlock(sv, n, b);
    used_ = 0;
}

bool GateFuser::tileable(int n, const int64_t *wires, int count) const {
    return tileQubits_ != 0 && tiles::onLowBits(n, tileQubits_, wires, count);
}

void GateFuser::drain(cplx *sv, int n) {
    std::vector<tiles::Step> ready;
    ready.swap(ready_); // emptied before it runs: an exception cannot leave blocks to apply twice
    static const bool trace = std::getenv("COFACTOR_FUSION_TRACE") != nullptr;
    if (trace) std::fprintf(stderr, "tile pass of %zu blocks\n", ready.size());
    tiles::apply(sv, n, tileQubits_, ready);
}

void GateFuser::applyBlock(cplx *sv, int n, const Block &b) {
    static const bool trace = std::getenv("COFACTOR_FUSION_TRACE") != nullptr;
    const bool tiled = tileable(n, b.wires.data(), int(b.wires.size()));
    if (!tiled && !ready_.empty()) drain(sv, n);
    if (b.ops.size() == 1) {
        const Operation &op = pool_[b.ops[0]];
        if (trace) std::fprintf(stderr, "gate %lld wires %d%s\n", (long long)op.gateId, int(b.wires.size()), tiled ? " tiled" : "");
        if (!tiled || op.kind != Operation::Kind::Gate) {
            if (tiled) drain(sv, n);
            return applyOperation(sv, n, op, false);
        }
        ready_.push_back(tiles::operationStep(op, /*inverse=*/false, n, tileQubits_));
        return;
    }
    const int q = int(b.wires.size());
    const size_t D = size_t(1) << q;
    std::vector<cplx> M(D * D, cplx(0));
    for (size_t j = 0; j < D; ++j) M[j * D + j] = 1;
    // one-wire gates are first multiplied per wire (2x2 products) and enter M when a gate
    // on several wires needs their wire, or at the end: one D x D product per wire and run
    // instead of one per gate (H T RZ on a wire: one instead of three)
    int64_t local[kMaxQubits];
    cplx pend[kMaxFusionQubits][4];
    bool has[kMaxFusionQubits] = {};
    std::vector<cplx> F(4);
    auto enter = [&](int pos) {
        F.assign(pend[pos], pend[pos] + 4);
        leftMultiply(M, b.wires.data(), q, F, &b.wires[size_t(pos)], 1);
        has[pos] = false;
    };
    for (uint32_t i : b.ops) {
        const Operation &op = pool_[i];
        const int l = localWires(op, local);
        if (l == 1) {
            const int pos = int(std::find(b.wires.begin(), b.wires.end(), local[0]) - b.wires.begin());
            const std::vector<cplx> m = localMatrix(op, 1, false);
            cplx *p = pend[pos];
            if (!has[pos]) {
                std::copy(m.begin(), m.end(), p);
                has[pos] = true;
            } else {
                leftMultiply2x2(p, m.data());
            }
            continue;
        }
        for (int j = 0; j < l; ++j) {
            const int pos = int(std::find(b.wires.begin(), b.wires.end(), local[j]) - b.wires.begin());
            if (has[pos]) enter(pos);
        }
        leftMultiply(M, b.wires.data(), q, localMatrix(op, l, false), local, l);
    }
    for (int pos = 0; pos < q; ++pos)
        if (has[pos]) enter(pos);
    if (!tiled && hadamard_ && applyHadamardBlock(sv, n, M, b.wires.data(), q, pool_.data(), b.ops.data(), b.ops.size())) return;
    if (!tiled) return applyMatrix(sv, n, std::move(M), b.wires.data(), q);
    ready_.push_back(tiles::matrixStep(std::move(M), b.wires.data(), q, n, tileQubits_));
}

void GateFuser::add(cplx *sv, int n, const Operation &op) {
    if (!enabled()) return applyOperation(sv, n, op, false);
    if (prefix_) {
        if (absorb(op)) return;
        writePrefix(sv, n);
    }
    if (!lightCone_) return addNow(sv, n, op);
    if (queued_ == queue_.size()) queue_.push_back(op);
    else queue_[queued_] = op; // the slot's vectors keep their capacity
    ++queued_;
    queueIsConeRest_ = false;
    if (queued_ >= kMaxPending) replayQueue(sv, n);
}

void GateFuser::replayQueue(cplx *sv, int n) {
    const size_t total = queued_;
    queued_ = 0; // an exception (an interrupt) cannot leave operations to apply twice
    for (size_t i = 0; i < total; ++i) addNow(sv, n, queue_[i]);
}

bool GateFuser::splitPays(const size_t *hits, size_t count, size_t applied, const Operation &op, const int64_t *w, int nw, int n) const {
    Branching merged, rest;
    int64_t mergedWires[kMaxQubits], restWires[kMaxQubits]; // the unions' wires
    size_t nm = 0, nr = 0;
    for (int j = 0; j < nw; ++j) mergedWires[nm++] = restWires[nr++] = w[j];
    for (size_t h = 0; h < count; ++h) {
        const Block &b = blocks_[hits[h]];
        merged.join(b.branching);
        if (hits[h] != applied) rest.join(b.branching);
        for (int64_t x : b.wires) {
            if (std::find(w, w + nw, x) != w + nw) continue;
            mergedWires[nm++] = x;
            if (hits[h] != applied) restWires[nr++] = x;
        }
    }
    merged.note(op, w, nw);
    rest.note(op, w, nw);
    const Block &a = blocks_[applied];
    Branching alone = a.branching;
    if (!hadamard_) merged.hadamard = rest.hadamard = alone.hadamard = false; // dense kernels' work
    const double apart = alone.work(a.wires.data(), a.wires.size(), n) + passCost_ + rest.work(restWires, nr, n);
    return apart < merged.work(mergedWires, nm, n);
}

void GateFuser::addNow(cplx *sv, int n, const Operation &op) {
    // bounds the pool of queued operations on long circuits that never read the state
    if (used_ >= kMaxPending) flushAll(sv, n);
    int64_t w[kMaxQubits];
    const int nw = localWires(op, w);
    const bool fuse = fusable(op) && nw >= 1 && nw <= maxQubits_;

    // the pending blocks op overlaps; apply the largest ones until op fits beside the rest
    // (blocks are on disjoint wires: at most n <= kMaxQubits of them; no allocation per gate)
    struct Hits {
        size_t idx[kMaxQubits];
        size_t count = 0;
        size_t *begin() { return idx; }
        size_t *end() { return idx + count; }
        void erase(size_t *at) { std::copy(at + 1, end(), at), --count; }
    } hit;
    for (size_t i = 0; i < blocks_.size(); ++i)
        if (overlaps(blocks_[i].wires, w, nw)) hit.idx[hit.count++] = i;
    auto unionSize = [&] {
        int extra = 0;
        for (size_t i : hit) extra += int(blocks_[i].wires.size());
        for (size_t i : hit) // wires of op inside a block are counted by the block
            for (int64_t x : blocks_[i].wires)
                if (std::find(w, w + nw, x) != w + nw) --extra;
        return nw + extra;
    };
    bool drop[kMaxQubits] = {};
    auto removeDropped = [&] {
        size_t j = 0;
        for (size_t i = 0; i < blocks_.size(); ++i)
            if (!drop[i]) {
                if (i != j) blocks_[j] = std::move(blocks_[i]);
                ++j;
            }
        blocks_.resize(j);
    };
    if (!fuse) {
        for (size_t i : hit) drop[i] = true;
        std::vector<Block> applied;
        for (size_t i : hit) applied.push_back(std::move(blocks_[i]));
        removeDropped();
        for (const Block &b : applied) applyBlock(sv, n, b);
        if (blocks_.empty()) used_ = 0;
        if (!ready_.empty()) drain(sv, n);
        return applyOperation(sv, n, op, false);
    }
    auto applyHit = [&](size_t *at) {
        const size_t i = *at;
        hit.erase(at);
        drop[i] = true;
        Block b = std::move(blocks_[i]);
        blocks_[i] = Block();
        applyBlock(sv, n, b);
    };
    // a union that would be a Hadamard-phase block (applyHadamardBlock) may be wider
    int limit = maxQubits_;
    if (hadamard_ && maxQubits_ >= 2 && maxQubits_ < kHadamardQubits && unionSize() <= kHadamardQubits) {
        Branching joined;
        int64_t unionWires[kMaxQubits];
        size_t nu = 0;
        for (int j = 0; j < nw; ++j) unionWires[nu++] = w[j];
        for (size_t i : hit) {
            joined.join(blocks_[i].branching);
            for (int64_t x : blocks_[i].wires)
                if (std::find(w, w + nw, x) == w + nw) unionWires[nu++] = x;
        }
        joined.note(op, w, nw);
        // (a tiled block takes the dense tile step, not the Hadamard kernel)
        if (joined.hadamardKernel(unionWires, nu, n) && !tileable(n, unionWires, int(nu))) limit = kHadamardQubits;
    }
    while (unionSize() > limit)
        applyHit(std::max_element(hit.begin(), hit.end(), [&](size_t a, size_t b) {
            return blocks_[a].wires.size() < blocks_[b].wires.size();
        }));
    if (hit.count >= 1 && passCost_ >= 0) { // (splitPays): the smallest block that pays
        size_t order[kMaxQubits];
        std::copy(hit.begin(), hit.end(), order);
        std::sort(order, order + hit.count, [&](size_t a, size_t b) {
            const Block &x = blocks_[a], &y = blocks_[b];
            if (x.wires.size() != y.wires.size()) return x.wires.size() < y.wires.size();
            return x.branching.bits < y.branching.bits;
        });
        for (size_t j = 0; j < hit.count; ++j)
            if (splitPays(hit.idx, hit.count, order[j], op, w, nw, n)) {
                applyHit(std::find(hit.begin(), hit.end(), order[j]));
                break;
            }
    }
    // the new block: the first overlapped block's wires, the others', then op's new ones;
    // the merged blocks' ops (they commute with each other), then op. It takes over the first
    // block's vectors (no allocation per gate once they have grown).
    Block merged;
    if (hit.count > 0) {
        merged = std::move(blocks_[hit.idx[0]]);
        drop[hit.idx[0]] = true;
    }
    for (size_t h = 1; h < hit.count; ++h) {
        const size_t i = hit.idx[h];
        drop[i] = true;
        merged.wires.insert(merged.wires.end(), blocks_[i].wires.begin(), blocks_[i].wires.end());
        merged.ops.insert(merged.ops.end(), blocks_[i].ops.begin(), blocks_[i].ops.end());
        merged.branching.join(blocks_[i].branching);
    }
    for (int j = 0; j < nw; ++j)
        if (std::find(merged.wires.begin(), merged.wires.end(), w[j]) == merged.wires.end()) merged.wires.push_back(w[j]);
    merged.branching.note(op, w, nw);
    if (used_ == pool_.size()) pool_.push_back(op);
    else pool_[used_] = op;
    merged.ops.push_back(uint32_t(used_++));
    removeDropped();
    blocks_.push_back(std::move(merged));
}

} // namespace cf
