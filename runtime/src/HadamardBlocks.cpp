// Hadamard-phase blocks (GateFusion.hpp's applyHadamardBlock): a fused block whose matrix is
// M = Dout P H_S Din -- diagonals, Hadamards on some wires, a permutation -- goes to the
// butterfly kernel (HadamardKernels.inc's hadamardBlocks) instead of the dense stream kernel:
// the long 16-wire circuit of benchmark section 6 (H, T, a CNOT chain, RZ on every wire) is
// made of such blocks, and a butterfly stage costs one add per amplitude where the dense
// product over |S| Hadamard wires costs 2^|S| complex multiplies.
//
// The factors come from the operations, the check from the matrix: walking the block's
// operations, each wire's one-wire gates are multiplied into a 2 x 2 u until the wire's
// first operation on several wires (or a later one-wire gate that is not diagonal);
// from then on, every operation on the wire must be monomial (one nonzero per row and
// column: CNOT, SWAP, Toffoli, CZ, X, phases), and their index maps compose into P. A u
// with all |u_ij| = 1/sqrt 2 is diag(a, b) H diag(1, d) (a Hadamard wire), a diagonal u
// is diag(u00, u11) (no Hadamard), anything else rules the block out. Then Din is the
// product of the wires' right factors, and Dout is solved from M itself; the whole of M is
// compared with the product before the kernel runs, so a block this reasoning got wrong
// takes the dense kernel, never a wrong state.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "GateFusion.hpp"
#include "StateVectorDevice.hpp"

namespace cf {

namespace fusion {

namespace {

constexpr double kHalf = 0.5;
constexpr double kTolerance = 1e-13; // per matrix entry (entries are products of unit phases)

// The monomial local matrix F (L x L) of an operation as an index map: sigma[j] = the row of
// column j's nonzero. False if F is not monomial.
bool monomialMap(const std::vector<cplx> &F, size_t L, int *sigma) {
    std::vector<char> hitRow(L, 0);
    for (size_t c = 0; c < L; ++c) {
        int row = -1;
        for (size_t r = 0; r < L; ++r)
            if (F[r * L + c] != cplx(0)) {
                if (row >= 0) return false;
                row = int(r);
            }
        if (row < 0 || hitRow[size_t(row)]) return false;
        hitRow[size_t(row)] = 1;
        sigma[c] = row;
    }
    return true;
}

} // namespace

bool applyHadamardBlock(cplx *sv, int n, const std::vector<cplx> &M, const int64_t *wires, int q, const Operation *pool,
                        const uint32_t *ops, size_t count) {
    if (q < 2 || q > 4 || streamKernelOff()) return false;
    const int D = 1 << q;
    cplx u[4][4];       // per block position: the wire's one-wire product, row-major 2 x 2
    bool entered[4] = {}; // the wire has met a monomial-only operation: u is final
    for (int pos = 0; pos < q; ++pos) u[pos][0] = u[pos][3] = 1, u[pos][1] = u[pos][2] = 0;
    int perm[16]; // P: local index i -> perm[i]
    for (int i = 0; i < D; ++i) perm[i] = i;
    int64_t local[kMaxQubits];
    int bitOfLocal[kMaxQubits]; // the block-local bit of each of the op's local wires
    for (size_t o = 0; o < count; ++o) {
        const Operation &op = pool[ops[o]];
        const int l = localWires(op, local);
        if (l > q) return false;
        bool anyEntered = false;
        for (int t = 0; t < l; ++t) {
            const int pos = int(std::find(wires, wires + q, local[t]) - wires);
            if (pos == q) return false;
            bitOfLocal[t] = q - 1 - pos;
            anyEntered = anyEntered || entered[pos];
        }
        const std::vector<cplx> F = localMatrix(op, l, false);
        if (l == 1 && !anyEntered) { // u <- F u
            leftMultiply2x2(u[q - 1 - bitOfLocal[0]], F.data());
            continue;
        }
        const size_t L = size_t(1) << l;
        int sigma[16];
        if (L > 16 || !monomialMap(F, L, sigma)) return false;
        for (int t = 0; t < l; ++t) entered[q - 1 - bitOfLocal[t]] = true;
        for (int i = 0; i < D; ++i) { // perm[i] <- sigma lifted to the block, applied after perm
            const int x = perm[i];
            int j = 0;
            for (int t = 0; t < l; ++t) j |= ((x >> bitOfLocal[t]) & 1) << (l - 1 - t);
            const int r = sigma[j];
            int y = x;
            for (int t = 0; t < l; ++t) {
                y &= ~(1 << bitOfLocal[t]);
                y |= ((r >> (l - 1 - t)) & 1) << bitOfLocal[t];
            }
            perm[i] = y;
        }
    }
    // each wire: a Hadamard one, diag(a, b) H diag(1, d), or diagonal; its right factor
    int smask = 0;
    cplx right[4][2];
    for (int pos = 0; pos < q; ++pos) {
        const cplx *p = u[pos];
        const int bit = q - 1 - pos;
        if (p[1] == cplx(0) && p[2] == cplx(0)) {
            right[bit][0] = p[0];
            right[bit][1] = p[3];
            continue;
        }
        for (int e = 0; e < 4; ++e)
            if (std::abs(std::norm(p[e]) - kHalf) > kTolerance) return false;
        smask |= 1 << bit;
        right[bit][0] = 1;
        right[bit][1] = p[1] / p[0]; // d = u01 / u00 (a = sqrt 2 u00, a d = sqrt 2 u01)
    }
    if (__builtin_popcount(unsigned(smask)) < 2) return false;
    cplx din[16], dout[16];
    bool hasDin = false;
    for (int c = 0; c < D; ++c) {
        cplx f = 1;
        for (int bit = 0; bit < q; ++bit) f *= right[bit][(c >> bit) & 1];
        din[c] = f;
        hasDin = hasDin || f != cplx(1);
    }
    // M[perm[i]][c] = s dout'[perm[i]] (-1)^{|i & c & S|} din[c] for c = i outside S, with
    // s = 2^{-|S|/2}; dout[i] (the kernel's, indexed by i) = s dout'[perm[i]]
    for (int i = 0; i < D; ++i) {
        const int c = i & ~smask; // sign +1
        dout[i] = M[size_t(perm[i]) * size_t(D) + size_t(c)] / din[c];
    }
    for (int i = 0; i < D; ++i)
        for (int c = 0; c < D; ++c) {
            cplx want = 0;
            if (((i ^ c) & ~smask) == 0) {
                want = dout[i] * din[c];
                if (__builtin_popcount(unsigned(i & c & smask)) & 1) want = -want;
            }
            if (std::abs(M[size_t(perm[i]) * size_t(D) + size_t(c)] - want) > kTolerance) return false;
        }
    static const bool trace = std::getenv("COFACTOR_FUSION_TRACE") != nullptr;
    const bool done = applyHadamardPhase(sv, n, wires, q, smask, perm, din, dout, hasDin);
    if (trace && done) std::fprintf(stderr, "hadamard block %d wires, mask %d%s\n", q, smask, hasDin ? " din" : "");
    return done;
}

} // namespace fusion

} // namespace cf
