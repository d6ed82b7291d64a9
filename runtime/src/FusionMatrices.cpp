// The matrix side of gate fusion (GateFusion.hpp's fusion:: helpers): which operations
// fuse, their matrices on a block's local wires, the products that build a block's matrix,
// and the choice of kernel for a block's matrix. Split from GateFusion.cpp, which keeps the
// fuser's bookkeeping (which gates form which blocks, and when a block is applied).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "GateFusion.hpp"
#include "StateVectorDevice.hpp"
#include "TileSweep.hpp"

namespace cf {

namespace fusion {

bool streamKernelOff() {
    static const bool off = std::getenv("COFACTOR_FUSED_STREAM_OFF") != nullptr;
    return off;
}

// Operations with a matrix of their own: table gates (but GlobalPhase, whose "wires" are
// only its controls) and unitaries. PauliRot keeps its basis-change kernel.
bool fusable(const Operation &op) {
    if (op.kind == Operation::Kind::Unitary) return true;
    return op.kind == Operation::Kind::Gate && canonicalGate(op.gateId).base != CF_GATE_GlobalPhase;
}

// The wires of op as its local matrix orders them: targets, then controls (built-in first).
int localWires(const Operation &op, int64_t *out) {
    int k = 0;
    const int builtin = op.kind == Operation::Kind::Gate ? canonicalGate(op.gateId).builtinCtrls : 0;
    for (size_t i = size_t(builtin); i < op.wires.size(); ++i) out[k++] = op.wires[i];
    const Controls c = operationControls(op);
    for (int i = 0; i < c.size; ++i) out[k++] = c.wire[i];
    return k;
}

std::vector<cplx> denseOf(const GateMatrix &g) {
    const size_t dim = size_t(1) << g.k;
    std::vector<cplx> m(dim * dim, cplx(0));
    switch (g.shape) {
    case Shape::Identity:
        for (size_t j = 0; j < dim; ++j) m[j * dim + j] = 1;
        break;
    case Shape::PermX: m[1] = m[2] = 1; break;
    case Shape::Swap: m[0] = m[6] = m[9] = m[15] = 1; break;
    case Shape::Diagonal:
        for (size_t j = 0; j < dim; ++j) m[j * dim + j] = g.data[j];
        break;
    case Shape::Parity:
        for (size_t j = 0; j < dim; ++j) m[j * dim + j] = g.data[__builtin_popcountll(j) & 1];
        break;
    case Shape::Dense: m = g.data; break;
    }
    return m;
}

std::vector<cplx> liftToLocal(const Operation &op, const GateMatrix &g, int numLocal, bool identityOutside) {
    const std::vector<cplx> u = denseOf(g);
    const int nc = numLocal - g.k;
    if (nc == 0) return u;
    const Controls ctrls = operationControls(op);
    size_t pattern = 0;
    for (int i = 0; i < nc; ++i)
        if (ctrls.value[i]) pattern |= size_t(1) << (nc - 1 - i);
    const size_t dim = size_t(1) << numLocal, tdim = size_t(1) << g.k;
    std::vector<cplx> m(dim * dim, cplx(0));
    if (identityOutside)
        for (size_t j = 0; j < dim; ++j)
            if ((j & ((size_t(1) << nc) - 1)) != pattern) m[j * dim + j] = 1;
    for (size_t r = 0; r < tdim; ++r)
        for (size_t c = 0; c < tdim; ++c) m[((r << nc) | pattern) * dim + ((c << nc) | pattern)] = u[r * tdim + c];
    return m;
}

std::vector<cplx> localMatrix(const Operation &op, int numLocal, bool inverse) {
    GateMatrix g;
    if (op.kind == Operation::Kind::Gate) {
        const Canonical c = canonicalGate(op.gateId);
        const int k = int(op.wires.size()) - c.builtinCtrls;
        static const double kNoParams[1] = {0};
        g = baseGateMatrix(c.base, op.params.empty() ? kNoParams : op.params.data(), k, op.adjoint != inverse);
    } else {
        g.shape = Shape::Dense;
        g.k = int(op.wires.size());
        g.data = op.matrix;
        if (op.adjoint != inverse) daggerInPlace(g);
    }
    return liftToLocal(op, g, numLocal, true);
}

// M <- F M, with M on the q wires `wires` and F on the l wires `local` (a subset of them).
void leftMultiply(std::vector<cplx> &M, const int64_t *wires, int q, const std::vector<cplx> &F,
                  const int64_t *local, int l) {
    const size_t D = size_t(1) << q, L = size_t(1) << l;
    if (l <= 2 && q <= 4) { // the usual one- and two-wire gates: in place, no allocation
        size_t scat[4] = {0, 0, 0, 0}, mask = 0;
        for (int i = 0; i < l; ++i) {
            const int pos = int(std::find(wires, wires + q, local[i]) - wires);
            const size_t bit = size_t(1) << (q - 1 - pos);
            mask |= bit;
            for (size_t j = 0; j < L; ++j)
                if ((j >> (l - 1 - i)) & 1) scat[j] |= bit;
        }
        cplx rows[4][16];
        for (size_t rest = 0; rest < D; ++rest) {
            if (rest & mask) continue;
            for (size_t j = 0; j < L; ++j)
                for (size_t c = 0; c < D; ++c) rows[j][c] = M[(rest | scat[j]) * D + c];
            for (size_t r = 0; r < L; ++r) {
                cplx *out = &M[(rest | scat[r]) * D];
                for (size_t c = 0; c < D; ++c) {
                    cplx acc = 0;
                    for (size_t j = 0; j < L; ++j)
                        if (F[r * L + j] != cplx(0)) acc += F[r * L + j] * rows[j][c];
                    out[c] = acc;
                }
            }
        }
        return;
    }
    // scatter[j]: the block index bits of local basis state j
    std::vector<size_t> scatter(L, 0);
    size_t localMask = 0;
    for (int i = 0; i < l; ++i) {
        const int pos = int(std::find(wires, wires + q, local[i]) - wires);
        const size_t bit = size_t(1) << (q - 1 - pos);
        localMask |= bit;
        for (size_t j = 0; j < L; ++j)
            if ((j >> (l - 1 - i)) & 1) scatter[j] |= bit;
    }
    std::vector<size_t> gatherIdx(D);
    for (size_t j = 0; j < L; ++j) gatherIdx[scatter[j]] = j; // only entries with rest = 0 used
    std::vector<cplx> out(D * D);
    for (size_t r = 0; r < D; ++r) {
        const size_t rest = r & ~localMask, rl = gatherIdx[r & localMask];
        const cplx *frow = F.data() + rl * L;
        for (size_t c = 0; c < D; ++c) {
            cplx acc = 0;
            for (size_t j = 0; j < L; ++j)
                if (frow[j] != cplx(0)) acc += frow[j] * M[(rest | scatter[j]) * D + c];
            out[r * D + c] = acc;
        }
    }
    M.swap(out);
}

void permuteLinear(cplx *dst, const cplx *src, int n, const uint64_t *image) {
    const int h = n / 2;
    const uint64_t lowSize = uint64_t(1) << h, highSize = uint64_t(1) << (n - h);
    std::vector<uint64_t> llo(lowSize, 0), lhi(highSize, 0);
    for (uint64_t m = 1; m < lowSize; ++m) llo[m] = llo[m & (m - 1)] ^ image[__builtin_ctzll(m)];
    for (uint64_t m = 1; m < highSize; ++m) lhi[m] = lhi[m & (m - 1)] ^ image[h + __builtin_ctzll(m)];
    gatherLinear(dst, src, n, h, llo.data(), lhi.data());
}

bool overlaps(const std::vector<int64_t> &a, const int64_t *w, int k) {
    for (int64_t x : a)
        for (int i = 0; i < k; ++i)
            if (x == w[i]) return true;
    return false;
}

void applyMatrix(cplx *sv, int n, std::vector<cplx> M, const int64_t *wires, int q) {
    const size_t D = size_t(1) << q;
    // Classify: a diagonal block takes the diagonal kernel (it only scales), a permutation
    // (one nonzero per row: CNOT/X/SWAP chains with phases) the sparse gather of denseK,
    // 2-wire blocks above the lowest two bits and the rest the fused kernels (the stream
    // kernel where it can, FusedKernels.inc), other blocks of 1-2 wires the chunked kernels.
    bool diagonal = true, permutation = true;
    for (size_t r = 0; r < D; ++r) {
        int nonzeros = 0;
        for (size_t c = 0; c < D; ++c)
            if (M[r * D + c] != cplx(0)) {
                ++nonzeros;
                if (c != r) diagonal = false;
            }
        if (nonzeros != 1) permutation = false;
    }
    static const bool trace = std::getenv("COFACTOR_FUSION_TRACE") != nullptr;
    if (trace && !tiles::laterTile()) {
        int nz = 0;
        for (size_t j = 0; j < D * D; ++j) nz += M[j] != cplx(0);
        std::fprintf(stderr, "block bits");
        for (int i = 0; i < q; ++i) std::fprintf(stderr, " %d", bitOf(n, wires[i]));
        std::fprintf(stderr, " nz %d%s%s\n", nz, diagonal ? " diag" : "", permutation ? " perm" : "");
    }
    const Controls none;
    GateMatrix g;
    g.k = q;
    if (diagonal) {
        g.shape = Shape::Diagonal;
        g.data.resize(D);
        for (size_t j = 0; j < D; ++j) g.data[j] = M[j * D + j];
        return applyGateMatrix(sv, n, g, wires, none);
    }
    // 2-wire blocks above the lowest two bits: the stream kernel (no lane shuffles, and
    // half the FMAs for a CNOT after rotations); on the low bits the chunked kernels
    int low = n;
    for (int i = 0; i < q; ++i) low = std::min(low, bitOf(n, wires[i]));
    if (q == 2 && !permutation && low >= 2 && !streamKernelOff()) return applyFusedDense(sv, n, M.data(), wires, q);
    // permutations of 3-4 wires take the stream kernel's move-only instance (or the lane
    // kernel); wider ones the sparse gather of denseK
    if (q <= 2 || (permutation && q > 4)) {
        g.shape = Shape::Dense;
        g.data = std::move(M);
        return applyGateMatrix(sv, n, g, wires, none);
    }
    applyFusedDense(sv, n, M.data(), wires, q);
}

void Branching::join(const Branching &other) {
    bits += other.bits;
    fresh |= other.fresh;
    hadamard = hadamard && other.hadamard;
    hadamardWires |= other.hadamardWires;
    entered |= other.entered;
}

bool Branching::hadamardKernel(const int64_t *wires, size_t count, int n) const {
    if (!hadamard || count < 2 || count > size_t(kHadamardQubits) || __builtin_popcountll(hadamardWires) < 2) return false;
    for (size_t i = 0; i < count; ++i)
        if (bitOf(n, wires[i]) < 2) return false; // inside an AVX-512 vector: not streamable
    return true;
}

double Branching::work(const int64_t *wires, size_t count, int n) const {
    // Hadamard-phase kernel: Din, one add per Hadamard wire, Dout per vector, in units of
    // the dense kernel's complex FMAs (two vector operations each): 3 + |S| / 2
    if (hadamardKernel(wires, count, n)) return 3 + 0.5 * double(__builtin_popcountll(hadamardWires));
    return double(uint64_t(1) << std::min<size_t>(size_t(bits), count));
}

void Branching::note(const Operation &op, const int64_t *w, int nw) {
    uint64_t touched = 0;
    for (int i = 0; i < nw; ++i) touched |= uint64_t(1) << (w[i] & 63);
    Shape shape = Shape::Dense;
    int targets = int(op.wires.size());
    if (op.kind == Operation::Kind::Gate) {
        const Canonical c = canonicalGate(op.gateId);
        shape = shapeOf(c.base);
        targets -= c.builtinCtrls;
    }
    // (the Hadamard-phase walk: monomial gates on several wires, or X, fix the wires' one-wire
    // factor; a Hadamard must come before, and only one per wire)
    const bool isHadamard = op.kind == Operation::Kind::Gate && nw == 1 && canonicalGate(op.gateId).base == CF_GATE_Hadamard;
    if (isHadamard) {
        if ((hadamardWires | entered) & touched) hadamard = false;
        hadamardWires |= touched;
    } else if (shape == Shape::Dense) {
        hadamard = false;
    } else if (nw > 1 || shape == Shape::PermX || shape == Shape::Swap) {
        entered |= touched;
    }
    switch (shape) {
    case Shape::Identity:
    case Shape::Diagonal:
    case Shape::Parity: return; // phases only
    case Shape::PermX:
    case Shape::Swap:
        if (nw > 1) fresh &= ~touched; // a permutation of several wires (CNOT, SWAP, Toffoli)
        return;
    case Shape::Dense: break;
    }
    if (nw == 1) { // a one-wire mixing gate: the support doubles unless the wire is fresh
        if (!(fresh & touched)) ++bits;
        fresh |= touched;
        return;
    }
    bits += targets; // controlled or multi-wire mixing gates: conservatively
    fresh &= ~touched;
}

} // namespace fusion

} // namespace cf
