// The adjoint Jacobian's backward fuser (see AdjointFusion.hpp).
#include "AdjointFusion.hpp"

#include <algorithm>

#include "GateFusion.hpp"
#include "StateVectorDevice.hpp"
#include "TileSweep.hpp"

namespace cf {

namespace {

using Matrix = std::vector<cplx>; // D x D, row-major (AdjointFuser::Matrix)

bool trainable(const Operation &op) { return op.firstParam >= 0 && !op.params.empty(); }

Matrix identity(size_t D) {
    Matrix m(D * D, cplx(0));
    for (size_t j = 0; j < D; ++j) m[j * D + j] = 1;
    return m;
}

Matrix multiply(const Matrix &a, const Matrix &b, size_t D) {
    Matrix out(D * D, cplx(0));
    for (size_t r = 0; r < D; ++r)
        for (size_t k = 0; k < D; ++k) {
            const cplx x = a[r * D + k];
            if (x == cplx(0)) continue;
            for (size_t c = 0; c < D; ++c) out[r * D + c] += x * b[k * D + c];
        }
    return out;
}

// G (2 x 2) is anti-Hermitian up to rounding: its Hermitian part (G + G^dagger) / 2 at most
// 1e-13 of its largest element, so that leaving it out changes a derivative by no more than
// rounding does (antiHermitianSums, StateVector.hpp)
bool isAntiHermitian(const Matrix &G) {
    double scale = 0;
    for (const cplx &g : G) scale = std::max(scale, std::abs(g));
    const double tol = 1e-13 * scale;
    return std::abs(G[0].real()) <= tol && std::abs(G[3].real()) <= tol && std::abs(G[2] + std::conj(G[1])) <= 2 * tol;
}

Matrix dagger(const Matrix &a, size_t D) {
    Matrix out(D * D);
    for (size_t r = 0; r < D; ++r)
        for (size_t c = 0; c < D; ++c) out[c * D + r] = std::conj(a[r * D + c]);
    return out;
}

} // namespace

AdjointFuser::AdjointFuser(Walk walk, int maxQubits, int minSweep)
    : walk_(std::move(walk)), maxQubits_(std::min(maxQubits, kMaxFusionQubits)), minSweep_(minSweep) {}

bool AdjointFuser::differentiate(const Operation &op) const { return trainable(op) && !done_.count(&op); }

void AdjointFuser::add(const Operation &op, bool last) {
    reachedPrefix_ = reachedPrefix_ || inPrefix(&op); // (every later operation came before)
    if (!inPrefix(&op)) ++open_;
    int64_t w[kMaxQubits];
    const int nw = fusion::localWires(op, w);
    const bool fuse = maxQubits_ >= 2 && fusion::fusable(op) && nw >= 1 && nw <= maxQubits_ &&
                      (!trainable(op) || (op.kind == Operation::Kind::Gate && nw == 1));
    std::vector<size_t> hit;
    bool hitTrainable = false;
    for (size_t i = 0; i < blocks_.size(); ++i)
        if (fusion::overlaps(blocks_[i].wires, w, nw)) hit.push_back(i), hitTrainable |= blocks_[i].trainable;
    // takes block i out of the pending ones (so that an exception cannot apply it twice)
    auto take = [&](std::vector<size_t> which) {
        std::sort(which.begin(), which.end());
        std::vector<Block> out;
        for (size_t k = which.size(); k-- > 0;) {
            out.push_back(std::move(blocks_[which[k]]));
            blocks_.erase(blocks_.begin() + std::ptrdiff_t(which[k]));
        }
        return out;
    };
    if (!fuse) {
        // the trainable blocks' derivatives at this point, in one sweep (see the header)
        if (hitTrainable || last) sweep();
        for (const Block &b : take(hit)) apply(b, true);
        if (last) { // the steps still pending go before op's, which leaves lambda as it is
            std::vector<size_t> all(blocks_.size());
            for (size_t i = 0; i < all.size(); ++i) all[i] = i;
            for (const Block &b : take(all))
                if (b.trainable) apply(b, true);
        }
        if (differentiate(op)) {
            flush();
            writePendingPhi();
            walk_.single(op, !last, true);
            handled(&op);
        } else {
            deferOp(op, !last);
        }
        return;
    }
    auto unionSize = [&] {
        int size = nw;
        for (size_t i : hit)
            for (int64_t x : blocks_[i].wires)
                if (std::find(w, w + nw, x) == w + nw) ++size;
        return size;
    };
    // a trainable block grows past its wire: its derivatives first (then it is constant)
    if (hitTrainable && unionSize() > 1) sweep();
    // a block with trainable operations stays on one wire (see AdjointFusion.hpp)
    auto limit = [&] {
        bool t = trainable(op);
        for (size_t i : hit) t = t || blocks_[i].trainable;
        return t ? 1 : maxQubits_;
    };
    while (unionSize() > limit()) { // apply the largest overlapping block
        auto largest = std::max_element(hit.begin(), hit.end(), [&](size_t a, size_t b) {
            return blocks_[a].wires.size() < blocks_[b].wires.size();
        });
        const size_t i = *largest;
        hit.erase(largest);
        for (size_t &h : hit)
            if (h > i) --h;
        for (const Block &b : take({i})) apply(b, true);
    }
    Block merged;
    merged.wires.assign(w, w + nw);
    for (const Block &b : take(hit)) {
        for (int64_t x : b.wires)
            if (std::find(w, w + nw, x) == w + nw) merged.wires.push_back(x);
        // the merged blocks' operations commute with each other: any order of blocks
        merged.ops.insert(merged.ops.end(), b.ops.begin(), b.ops.end());
        merged.trainable = merged.trainable || b.trainable;
    }
    merged.ops.push_back(&op);
    merged.trainable = merged.trainable || trainable(op);
    blocks_.push_back(std::move(merged));
}

void AdjointFuser::finish() {
    sweep(); // the derivatives of all the pending trainable blocks; nothing to apply then
    std::vector<Block> blocks;
    blocks.swap(blocks_);
    std::vector<const Block *> needed;
    for (const Block &b : blocks)
        if (b.trainable) needed.push_back(&b);
    for (size_t i = 0; i < needed.size(); ++i) apply(*needed[i], i + 1 < needed.size());
    queue_.clear(); // the walk is over: no derivative reads the states again
}

void AdjointFuser::deferOp(const Operation &op, bool undoLambda) {
    Step step;
    step.op = &op;
    step.undoLambda = undoLambda;
    defer(std::move(step));
    handled(&op);
}

void AdjointFuser::flush() {
    const bool write = prefixPhi();
    std::vector<Step> steps;
    steps.swap(queue_); // (an exception leaves nothing queued to apply twice)
    if (write) phiIsProduct_ = true; // written when something needs it (writePendingPhi)
    if (steps.empty()) return;
    if (!write) {
        writePendingPhi();
        run(steps, walk_.phi, false);
    }
    for (cplx *lambda : walk_.lambdas) run(steps, lambda, true);
}

void AdjointFuser::run(const std::vector<Step> &steps, cplx *state, bool lambda) const {
    const int n = walk_.n, b = chunkQubits_;
    auto whole = [&](const Step &s) {
        if (s.op) applyOperation(state, n, *s.op, /*inverse=*/true);
        else fusion::applyMatrix(state, n, s.A, s.wires.data(), int(s.wires.size()));
    };
    if (b <= 0 || n <= b || n > 63) {
        for (const Step &s : steps)
            if (!lambda || s.undoLambda) whole(s);
        return;
    }
    // wire w is bit n-1-w; in a chunk of b qubits, the low bits are the wires w - (n - b)
    const int64_t shift = n - b;
    auto maskOf = [&](const Step &s) {
        int64_t w[kMaxQubits];
        const int k = s.op ? fusion::localWires(*s.op, w) : int(s.wires.size());
        if (!s.op) std::copy(s.wires.begin(), s.wires.end(), w);
        uint64_t m = 0;
        for (int i = 0; i < k; ++i) m |= uint64_t(1) << w[i];
        return std::make_pair(m, k);
    };
    const uint64_t highWires = (uint64_t(1) << shift) - 1; // wires 0 .. shift-1
    std::vector<const Step *> group;
    uint64_t groupMask = 0;
    auto applyGroup = [&] {
        if (group.size() == 1) whole(*group[0]);
        else if (!group.empty()) { // one pass over the chunks (TileSweep.hpp)
            std::vector<tiles::Step> onChunk;
            onChunk.reserve(group.size());
            for (const Step *s : group)
                onChunk.push_back(s->op ? tiles::operationStep(*s->op, /*inverse=*/true, n, b)
                                        : tiles::matrixStep(s->A, s->wires.data(), int(s->wires.size()), n, b));
            tiles::apply(state, n, b, onChunk);
        }
        group.clear();
        groupMask = 0;
    };
    for (const Step &s : steps) {
        if (lambda && !s.undoLambda) continue;
        const auto [mask, k] = maskOf(s);
        if (k > 0 && (mask & highWires) == 0) {
            group.push_back(&s), groupMask |= mask;
            continue;
        }
        if (k == 0 || (mask & groupMask) != 0) applyGroup(); // (no wires: global, in order)
        whole(s);
    }
    applyGroup();
}

void AdjointFuser::apply(const Block &b, bool undoLambda) {
    if (b.ops.size() == 1) {
        if (!differentiate(*b.ops[0])) return deferOp(*b.ops[0], undoLambda);
        flush();
        writePendingPhi();
        walk_.single(*b.ops[0], undoLambda, true);
        return handled(b.ops[0]);
    }
    if (b.trainable) return applyOneWire(b, undoLambda);
    applyConstant(b, undoLambda);
}

void AdjointFuser::applyConstant(const Block &b, bool undoLambda) {
    const int q = int(b.wires.size());
    Matrix A = identity(size_t(1) << q);
    int64_t local[kMaxQubits];
    for (const Operation *op : b.ops) {
        const int l = fusion::localWires(*op, local);
        fusion::leftMultiply(A, b.wires.data(), q, fusion::localMatrix(*op, l, /*inverse=*/true), local, l);
    }
    // Permutations (CNOT chains): one CNOT swaps a quarter of the amplitudes with another
    // quarter, while the block's kernel (a gather of every block of 2^q amplitudes) touches
    // all of them; measured slower than the separate gates (SEL gradient, 20 wires).
    const size_t D = size_t(1) << q;
    bool permutation = true;
    for (size_t r = 0; r < D && permutation; ++r) {
        int nonzeros = 0;
        for (size_t c = 0; c < D; ++c) nonzeros += A[r * D + c] != cplx(0);
        permutation = nonzeros == 1;
    }
    if (permutation) {
        for (const Operation *op : b.ops) deferOp(*op, undoLambda);
        return;
    }
    Step step;
    step.A = std::move(A);
    step.wires = b.wires;
    step.undoLambda = undoLambda;
    for (const Operation *op : b.ops) handled(op);
    defer(std::move(step));
}

// A one-wire block: A = g_m^dagger ... g_1^dagger and, for each derivative still to take,
// G = A_(i-1)^dagger dg_i A_i (A_i = g_i^dagger ... g_1^dagger), so that
// <lambda_(i-1)| dg_i |phi_i> = <lambda| G |phi> with phi, lambda as they are before the block.
AdjointFuser::Matrix AdjointFuser::oneWire(const Block &b, std::vector<Derivative> &derivs) const {
    Matrix A = identity(2);
    for (const Operation *op : b.ops) {
        const Matrix prev = A;
        A = multiply(fusion::localMatrix(*op, 1, /*inverse=*/true), A, 2);
        if (!differentiate(*op)) continue;
        const Matrix prevDagger = dagger(prev, 2);
        for (int j = 0; j < int(op->params.size()); ++j)
            derivs.push_back({op, j, multiply(multiply(prevDagger, fusion::denseOf(gateDerivative(*op, j)), 2), A, 2)});
    }
    return A;
}

// One wire, in the unfused step's one-wire kernel (adjointStep), which takes any number of
// derivatives: <lambda| G |phi> = <lambda| G A^dagger |A phi>.
void AdjointFuser::applyOneWire(const Block &b, bool undoLambda) {
    flush();
    writePendingPhi();
    std::vector<Derivative> derivs;
    const Matrix A = oneWire(b, derivs);
    const Matrix Adagger = dagger(A, 2);
    GateMatrix u;
    u.shape = Shape::Dense, u.k = 1, u.data = A;
    std::vector<GateMatrix> dU(derivs.size());
    for (size_t i = 0; i < derivs.size(); ++i)
        dU[i].shape = Shape::Dense, dU[i].k = 1, dU[i].data = multiply(derivs[i].G, Adagger, 2);
    std::vector<cplx> elements(derivs.size());
    const Controls none;
    for (size_t l = 0; l < walk_.lambdas.size(); ++l) {
        if (!adjointStep(walk_.phi, walk_.lambdas[l], walk_.n, u, dU.data(), int(dU.size()), b.wires.data(), none,
                         l == 0, undoLambda, elements.data()))
            fail(CF_ERR_INTERNAL, "adjoint Jacobian: no kernel for a fused one-wire block");
        for (size_t i = 0; i < derivs.size(); ++i)
            walk_.record(*derivs[i].op, derivs[i].j, l, 2.0 * elements[i].real());
    }
    for (const Operation *op : b.ops) handled(op);
}

// The derivatives of every pending trainable block (each on one wire) where the states are
// now, from the 2x2 cross sums of all their wires in one read-only pass per lambda
// (crossSums); the blocks are constant afterwards. Fewer than minSweep blocks: nothing.
void AdjointFuser::sweep() {
    std::vector<Block *> pending;
    for (Block &b : blocks_)
        if (b.trainable) pending.push_back(&b);
    if (minSweep_ <= 0 || pending.size() < size_t(minSweep_)) return;
    std::vector<int> bits;
    std::vector<Derivative> derivs;
    std::vector<size_t> wireOf; // per derivative: its block's index in bits
    for (Block *b : pending) {
        if (b->wires.size() != 1) fail(CF_ERR_INTERNAL, "adjoint Jacobian: a trainable block on several wires");
        bits.push_back(bitOf(walk_.n, b->wires[0]));
        oneWire(*b, derivs);
        wireOf.resize(derivs.size(), bits.size() - 1);
    }
    std::vector<cplx> S(4 * bits.size());
    flush();
    std::vector<int64_t> wires;
    for (Block *b : pending) wires.push_back(b->wires[0]);
    if (productSweep(bits, wires, derivs, wireOf)) {
        for (const Derivative &d : derivs) done_.insert(d.op);
        for (Block *b : pending) b->trainable = false;
        return;
    }
    writePendingPhi();
    if (antiHermitian_ && std::all_of(derivs.begin(), derivs.end(), [](const Derivative &d) {
            return isAntiHermitian(d.G);
        })) {
        const size_t m = bits.size();
        std::vector<cplx> C(m);
        std::vector<double> D(m);
        for (size_t l = 0; l < walk_.lambdas.size(); ++l) {
            double imTotal = 0;
            antiHermitianSums(walk_.phi, walk_.lambdas[l], walk_.n, bits.data(), int(m), C.data(), D.data(), &imTotal);
            for (size_t i = 0; i < derivs.size(); ++i) {
                const Matrix &G = derivs[i].G;
                const size_t k = wireOf[i];
                const double el = (G[1] * C[k]).real() - G[0].imag() * (imTotal - D[k]) - G[3].imag() * D[k];
                walk_.record(*derivs[i].op, derivs[i].j, l, 2.0 * el);
            }
        }
        for (const Derivative &d : derivs) done_.insert(d.op);
        for (Block *b : pending) b->trainable = false;
        return;
    }
    for (size_t l = 0; l < walk_.lambdas.size(); ++l) {
        crossSums(walk_.phi, walk_.lambdas[l], walk_.n, bits.data(), int(bits.size()), S.data());
        for (size_t i = 0; i < derivs.size(); ++i) {
            cplx el = 0;
            for (int e = 0; e < 4; ++e) el += derivs[i].G[size_t(e)] * S[4 * wireOf[i] + size_t(e)];
            walk_.record(*derivs[i].op, derivs[i].j, l, 2.0 * el.real());
        }
    }
    for (const Derivative &d : derivs) done_.insert(d.op);
    for (Block *b : pending) b->trainable = false;
}

// Product sweep (AdjointFusion.hpp): phi is the product prefix's state, unwritten; the sums
// from lambda and the factors, S_01 = (v_1 / v_0) S_00, S_10 = (v_0 / v_1) S_11. A swept wire
// with a factor component under kProductMin: false (nothing done; the cross sums then).
bool AdjointFuser::productSweep(const std::vector<int> &bits, const std::vector<int64_t> &wires,
                                const std::vector<Derivative> &derivs, const std::vector<size_t> &wireOf) {
    constexpr double kProductMin = 1e-3;
    if (!phiIsProduct_ || !product_.tlo || product_.factors.size() != 2 * size_t(walk_.n)) return false;
    for (int64_t w : wires)
        for (int c = 0; c < 2; ++c)
            if (std::abs(product_.factors[2 * size_t(w) + size_t(c)]) < kProductMin) return false;
    const size_t m = bits.size();
    std::vector<cplx> diag(m);
    for (size_t l = 0; l < walk_.lambdas.size(); ++l) {
        cplx total;
        productSums(walk_.lambdas[l], walk_.n, product_.h, product_.tlo, product_.thi, bits.data(), int(m),
                    diag.data(), &total);
        std::vector<cplx> S(4 * m);
        for (size_t k = 0; k < m; ++k) {
            const cplx v0 = product_.factors[2 * size_t(wires[k])], v1 = product_.factors[2 * size_t(wires[k]) + 1];
            cplx *s = &S[4 * k];
            s[3] = diag[k];
            s[0] = total - diag[k];
            s[1] = v1 / v0 * s[0];
            s[2] = v0 / v1 * s[3];
        }
        for (size_t i = 0; i < derivs.size(); ++i) {
            cplx el = 0;
            for (int e = 0; e < 4; ++e) el += derivs[i].G[size_t(e)] * S[4 * wireOf[i] + size_t(e)];
            walk_.record(*derivs[i].op, derivs[i].j, l, 2.0 * el.real());
        }
    }
    return true;
}

} // namespace cf
