// Gate math: what each entry of gates.def *is*, independent of how it is applied.
//
// Every gate is reduced to a canonical form (base gate + number of built-in control wires,
// so CNOT is PauliX with one control and the kernels never see "CNOT"), then to a
// `GateMatrix` whose `shape` tells the state-vector layer which kernel to use.
//
// Matrices are written once, over dual numbers: evaluating the same formula with parameter j
// seeded (d = 1) yields dU/dtheta_j exactly, which is what the adjoint Jacobian needs. There
// is therefore no separate, hand-derived derivative per gate that could drift from its matrix.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "cofactor/runtime.h"

namespace cf {

using cplx = std::complex<double>;

struct GateInfo {
    const char *name;
    int numParams;
    int numWires; // -1: any number >= 1
};

inline constexpr GateInfo kGateInfo[] = {
#define COFACTOR_GATE(name, np, nw) {#name, np, nw},
#include "cofactor/gates.def"
#undef COFACTOR_GATE
};
static_assert(sizeof(kGateInfo) / sizeof(kGateInfo[0]) == CF_GATE_COUNT);

// Controlled gates of the table are their target gate plus leading control wires (value 1).
struct Canonical {
    int64_t base;
    int builtinCtrls;
};

inline Canonical canonicalGate(int64_t id) {
    switch (id) {
    case CF_GATE_CNOT: return {CF_GATE_PauliX, 1};
    case CF_GATE_CY: return {CF_GATE_PauliY, 1};
    case CF_GATE_CZ: return {CF_GATE_PauliZ, 1};
    case CF_GATE_CH: return {CF_GATE_Hadamard, 1};
    case CF_GATE_CSWAP: return {CF_GATE_SWAP, 1};
    case CF_GATE_Toffoli: return {CF_GATE_PauliX, 2};
    case CF_GATE_CRX: return {CF_GATE_RX, 1};
    case CF_GATE_CRY: return {CF_GATE_RY, 1};
    case CF_GATE_CRZ: return {CF_GATE_RZ, 1};
    case CF_GATE_CRot: return {CF_GATE_Rot, 1};
    case CF_GATE_ControlledPhaseShift: return {CF_GATE_PhaseShift, 1};
    default: return {id, 0};
    }
}

// How a (base) gate acts on its k target wires; selects the kernel.
enum class Shape {
    Identity,
    PermX,    // swap |0> and |1> of one wire (X, CNOT, Toffoli)
    Swap,     // swap |01> and |10> of two wires
    Diagonal, // data: 2^k diagonal entries
    Parity,   // data: {phase if parity of the targets is even, phase if odd} (IsingZZ, MultiRZ)
    Dense,    // data: 2^k x 2^k row-major
};

inline Shape shapeOf(int64_t base) {
    switch (base) {
    case CF_GATE_Identity: return Shape::Identity;
    case CF_GATE_PauliX: return Shape::PermX;
    case CF_GATE_SWAP: return Shape::Swap;
    case CF_GATE_PauliZ:
    case CF_GATE_S:
    case CF_GATE_T:
    case CF_GATE_RZ:
    case CF_GATE_PhaseShift:
    case CF_GATE_U1:
    case CF_GATE_GlobalPhase: return Shape::Diagonal;
    case CF_GATE_IsingZZ:
    case CF_GATE_MultiRZ: return Shape::Parity;
    default: return Shape::Dense;
    }
}

// ---- dual numbers: value and derivative with respect to one seeded parameter ------------
struct Dual {
    double v = 0, d = 0;
};
inline Dual operator*(double a, Dual x) { return {a * x.v, a * x.d}; }
inline Dual operator+(Dual a, Dual b) { return {a.v + b.v, a.d + b.d}; }
inline Dual operator-(Dual a, Dual b) { return {a.v - b.v, a.d - b.d}; }
inline Dual operator-(Dual a) { return {-a.v, -a.d}; }

struct DC {
    cplx v{0, 0}, d{0, 0};
    DC() = default;
    DC(cplx value) : v(value) {} // constants: zero derivative
    DC(cplx value, cplx deriv) : v(value), d(deriv) {}
};
inline DC operator*(DC a, DC b) { return {a.v * b.v, a.d * b.v + a.v * b.d}; }
inline DC operator+(DC a, DC b) { return {a.v + b.v, a.d + b.d}; }
inline DC operator-(DC a) { return {-a.v, -a.d}; }
inline DC dcos(Dual x) { return {std::cos(x.v), -std::sin(x.v) * x.d}; }
inline DC dsin(Dual x) { return {std::sin(x.v), std::cos(x.v) * x.d}; }
inline DC dexpi(Dual x) { // exp(i x)
    const cplx e = std::polar(1.0, x.v);
    return {e, cplx(0, 1) * e * x.d};
}

namespace detail {
constexpr double kInvSqrt2 = 0.70710678118654752440;
const cplx I(0, 1);

// Writes the gate's data (layout per Shape) over dual numbers. p: the parameters, k: target
// count (only variable for MultiRZ).
inline void buildGate(int64_t base, const Dual *p, int k, DC *out) {
    auto m = [&](int dim, int r, int c) -> DC & { return out[r * dim + c]; };
    switch (base) {
    // -- diagonal gates: out[j] = U_jj
    case CF_GATE_PauliZ: out[0] = cplx(1); out[1] = cplx(-1); return;
    case CF_GATE_S: out[0] = cplx(1); out[1] = I; return;
    case CF_GATE_T: out[0] = cplx(1); out[1] = std::polar(1.0, M_PI / 4); return;
    case CF_GATE_RZ: out[0] = dexpi(-0.5 * p[0]); out[1] = dexpi(0.5 * p[0]); return;
    case CF_GATE_PhaseShift:
    case CF_GATE_U1: out[0] = cplx(1); out[1] = dexpi(p[0]); return;
    case CF_GATE_GlobalPhase: out[0] = dexpi(-p[0]); return; // exp(-i phi) I
    // -- parity gates: {even, odd}
    case CF_GATE_IsingZZ:
    case CF_GATE_MultiRZ: out[0] = dexpi(-0.5 * p[0]); out[1] = dexpi(0.5 * p[0]); return;
    default: break;
    }
    const int dim = 1 << k;
    for (int i = 0; i < dim * dim; ++i) out[i] = DC();
    const cplx r2(kInvSqrt2);
    switch (base) {
    case CF_GATE_Hadamard:
        m(2, 0, 0) = r2; m(2, 0, 1) = r2; m(2, 1, 0) = r2; m(2, 1, 1) = -r2; return;
    case CF_GATE_PauliY: m(2, 0, 1) = -I; m(2, 1, 0) = I; return;
    case CF_GATE_SX:
        m(2, 0, 0) = cplx(.5, .5); m(2, 0, 1) = cplx(.5, -.5);
        m(2, 1, 0) = cplx(.5, -.5); m(2, 1, 1) = cplx(.5, .5); return;
    case CF_GATE_RX: {
        const DC c = dcos(0.5 * p[0]), s = DC(-I) * dsin(0.5 * p[0]);
        m(2, 0, 0) = c; m(2, 0, 1) = s; m(2, 1, 0) = s; m(2, 1, 1) = c; return;
    }
    case CF_GATE_RY: {
        const DC c = dcos(0.5 * p[0]), s = dsin(0.5 * p[0]);
        m(2, 0, 0) = c; m(2, 0, 1) = -s; m(2, 1, 0) = s; m(2, 1, 1) = c; return;
    }
    case CF_GATE_Rot: { // RZ(omega) RY(theta) RZ(phi)
        const Dual phi = p[0], om = p[2];
        const DC c = dcos(0.5 * p[1]), s = dsin(0.5 * p[1]);
        m(2, 0, 0) = dexpi(-0.5 * (phi + om)) * c;
        m(2, 0, 1) = -(dexpi(0.5 * (phi - om)) * s);
        m(2, 1, 0) = dexpi(-0.5 * (phi - om)) * s;
        m(2, 1, 1) = dexpi(0.5 * (phi + om)) * c;
        return;
    }
    case CF_GATE_U2: { // (phi, delta)
        m(2, 0, 0) = r2;
        m(2, 0, 1) = DC(-r2) * dexpi(p[1]);
        m(2, 1, 0) = DC(r2) * dexpi(p[0]);
        m(2, 1, 1) = DC(r2) * dexpi(p[0] + p[1]);
        return;
    }
    case CF_GATE_U3: { // (theta, phi, delta)
        const DC c = dcos(0.5 * p[0]), s = dsin(0.5 * p[0]);
        m(2, 0, 0) = c;
        m(2, 0, 1) = -(dexpi(p[2]) * s);
        m(2, 1, 0) = dexpi(p[1]) * s;
        m(2, 1, 1) = dexpi(p[1] + p[2]) * c;
        return;
    }
    case CF_GATE_ISWAP:
        m(4, 0, 0) = cplx(1); m(4, 1, 2) = I; m(4, 2, 1) = I; m(4, 3, 3) = cplx(1); return;
    case CF_GATE_SISWAP:
        m(4, 0, 0) = cplx(1); m(4, 1, 1) = r2; m(4, 1, 2) = I * r2;
        m(4, 2, 1) = I * r2; m(4, 2, 2) = r2; m(4, 3, 3) = cplx(1); return;
    case CF_GATE_ECR:
        m(4, 0, 2) = r2; m(4, 0, 3) = I * r2; m(4, 1, 2) = I * r2; m(4, 1, 3) = r2;
        m(4, 2, 0) = r2; m(4, 2, 1) = -I * r2; m(4, 3, 0) = -I * r2; m(4, 3, 1) = r2; return;
    case CF_GATE_IsingXX:
    case CF_GATE_IsingYY: {
        const DC c = dcos(0.5 * p[0]), s = DC(-I) * dsin(0.5 * p[0]);
        const DC corner = base == CF_GATE_IsingXX ? s : -s;
        for (int i = 0; i < 4; ++i) m(4, i, i) = c;
        m(4, 0, 3) = corner; m(4, 3, 0) = corner; m(4, 1, 2) = s; m(4, 2, 1) = s;
        return;
    }
    case CF_GATE_IsingXY: {
        const DC c = dcos(0.5 * p[0]), s = DC(I) * dsin(0.5 * p[0]);
        m(4, 0, 0) = cplx(1); m(4, 3, 3) = cplx(1);
        m(4, 1, 1) = c; m(4, 2, 2) = c; m(4, 1, 2) = s; m(4, 2, 1) = s;
        return;
    }
    case CF_GATE_SingleExcitation:
    case CF_GATE_SingleExcitationPlus:
    case CF_GATE_SingleExcitationMinus:
    case CF_GATE_DoubleExcitation:
    case CF_GATE_DoubleExcitationPlus:
    case CF_GATE_DoubleExcitationMinus: {
        // An SO(2) rotation between two basis states; the rest of the space gets 1 or
        // exp(+-i theta/2) (the Plus/Minus variants).
        const bool single = base <= CF_GATE_SingleExcitationMinus;
        const int d = single ? 4 : 16, a = single ? 1 : 3, b = single ? 2 : 12;
        const int variant = single ? int(base - CF_GATE_SingleExcitation)
                                   : int(base - CF_GATE_DoubleExcitation);
        const DC rest = variant == 0   ? DC(cplx(1))
                        : variant == 1 ? dexpi(0.5 * p[0])
                                       : dexpi(-0.5 * p[0]);
        for (int i = 0; i < d; ++i) m(d, i, i) = rest;
        const DC c = dcos(0.5 * p[0]), s = dsin(0.5 * p[0]);
        m(d, a, a) = c; m(d, a, b) = -s; m(d, b, a) = s; m(d, b, b) = c;
        return;
    }
    default: return; // Identity/PermX/Swap carry no data
    }
}
} // namespace detail

struct GateMatrix {
    Shape shape = Shape::Identity;
    int k = 0; // target wires
    std::vector<cplx> data;
};

inline size_t dataSize(Shape shape, int k) {
    switch (shape) {
    case Shape::Diagonal: return size_t(1) << k;
    case Shape::Parity: return 2;
    case Shape::Dense: return size_t(1) << (2 * k);
    default: return 0;
    }
}

// adjoint of the data in place: conjugate (diagonal/parity) or conjugate-transpose (dense).
inline void daggerInPlace(GateMatrix &g) {
    if (g.shape == Shape::Dense) {
        const size_t dim = size_t(1) << g.k;
        for (size_t r = 0; r < dim; ++r)
            for (size_t c = r; c < dim; ++c) {
                const cplx a = g.data[r * dim + c], b = g.data[c * dim + r];
                g.data[r * dim + c] = std::conj(b);
                g.data[c * dim + r] = std::conj(a);
            }
    } else {
        for (auto &x : g.data) x = std::conj(x);
    }
}

// The gate (derivIndex < 0) or its derivative with respect to parameter derivIndex. The
// derivative of an adjoint gate is the adjoint of the derivative.
inline GateMatrix baseGateMatrix(int64_t base, const double *params, int k, bool adjoint,
                                 int derivIndex = -1) {
    GateMatrix g;
    g.shape = shapeOf(base);
    g.k = k;
    const size_t size = dataSize(g.shape, k);
    if (size) {
        Dual p[3];
        for (int i = 0; i < kGateInfo[base].numParams; ++i) p[i] = {params[i], i == derivIndex ? 1.0 : 0.0};
        std::vector<DC> tmp(size);
        detail::buildGate(base, p, k, tmp.data());
        g.data.resize(size);
        for (size_t i = 0; i < size; ++i) g.data[i] = derivIndex < 0 ? tmp[i].v : tmp[i].d;
        if (adjoint) daggerInPlace(g);
    }
    return g;
}

} // namespace cf
