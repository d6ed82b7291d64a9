// State-vector kernels: the loops over amplitudes. They know nothing about gate names; they
// get a GateMatrix (GateMatrices.hpp) plus target and control wires. This header is the
// interface; the loops are in StateVectorKernels.inc, compiled once per instruction-set
// level by StateVector.cpp, which picks the best one for the CPU at run time.
//
// Index convention: with n qubits, wire w is bit (n - 1 - w) of an amplitude's index, so the
// first wire is the most significant bit (PennyLane's order).
//
// Every kernel has the same skeleton (as in qsim / Lightning): the fixed bits -- targets and
// controls -- are removed from the index space, the loop runs over the 2^(n - m) remaining
// "block" indices, each is expanded back by inserting zero bits at the fixed positions and
// OR-ing in the control values, and the kernel body touches the 2^k amplitudes of that block
// at precomputed offsets. Controls therefore cost nothing per gate type: every gate gets
// any number of controls with any control values, and a controlled gate touches only the
// amplitudes it changes. Gates of up to two targets that fix one of the last three bits
// (whose blocks would be 1-4 amplitudes apart) take the chunked kernels instead: the state
// as 4-amplitude vectors, with the last two bits handled by lane permutations.
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <vector>

#include "Error.hpp"
#include "GateMatrices.hpp"

namespace cf {

constexpr int kMaxQubits = 64;

inline int bitOf(int n, int64_t wire) { return n - 1 - int(wire); }

// States live on 64-byte (cache-line) boundaries. malloc hands out large blocks 16 bytes past
// a page boundary, so a plain std::vector<cplx> would make every 4-amplitude vector load of
// the kernels straddle two cache lines. Buffers of 4 MiB and more are also 2 MiB-aligned and
// asked to live on transparent huge pages (StateVector.cpp, allocateState).
void *allocateState(size_t bytes);
void freeState(void *p, size_t bytes);
template <class T> struct CacheLineAllocator {
    using value_type = T;
    CacheLineAllocator() = default;
    template <class U> CacheLineAllocator(const CacheLineAllocator<U> &) {}
    T *allocate(size_t count) { return static_cast<T *>(allocateState(count * sizeof(T))); }
    void deallocate(T *p, size_t count) { freeState(p, count * sizeof(T)); }
    template <class U> bool operator==(const CacheLineAllocator<U> &) const { return true; }
    template <class U> bool operator!=(const CacheLineAllocator<U> &) const { return false; }
};
using StateBuffer = std::vector<cplx, CacheLineAllocator<cplx>>;

struct Controls {
    Controls() {} // leaves the arrays uninitialised: built per gate call, on the stack
    int size = 0;
    int64_t wire[kMaxQubits];
    int8_t value[kMaxQubits];
    void add(int64_t w, int8_t v) {
        wire[size] = w;
        value[size] = v;
        ++size;
    }
};

class Plan {
  public:
    Plan(int n_, const int64_t *targets, int k_, const Controls &ctrls) : n(n_), k(k_) {
        m = 0;
        for (int i = 0; i < k; ++i) bits[m++] = bitOf(n, targets[i]);
        for (int i = 0; i < ctrls.size; ++i) {
            const int b = bitOf(n, ctrls.wire[i]);
            bits[m++] = b;
            ctrlMask |= uint64_t(1) << b;
            if (ctrls.value[i]) ctrlValue |= uint64_t(1) << b;
        }
        std::sort(bits, bits + m);
        for (int i = 0; i < m; ++i) fixedMask |= uint64_t(1) << bits[i];
        const size_t dim = size_t(1) << k;
        uint64_t *off = smallOff_;
        if (dim > sizeof(smallOff_) / sizeof(smallOff_[0])) {
            bigOff_.resize(dim);
            off = bigOff_.data();
        }
        // offset of local basis state j: target i (first = most significant bit of j) set
        for (size_t j = 0; j < dim; ++j) {
            uint64_t o = 0;
            for (int i = 0; i < k; ++i)
                if ((j >> (k - 1 - i)) & 1) o |= uint64_t(1) << bitOf(n, targets[i]);
            off[j] = o;
        }
        offsets = off;
    }
    Plan(const Plan &) = delete;
    Plan &operator=(const Plan &) = delete;

    int n, k, m;
    int bits[kMaxQubits];
    uint64_t ctrlMask = 0, ctrlValue = 0;
    uint64_t fixedMask = 0; // all fixed bits: targets and controls
    const uint64_t *offsets;

  private:
    uint64_t smallOff_[16];
    std::vector<uint64_t> bigOff_;
};

// ---- operations on a state of n qubits (2^n amplitudes) ---------------------------------
// Applies g (any shape; need not be unitary, so observables and gate derivatives use this
// too) on `targets` under `ctrls`.
void applyGateMatrix(cplx *sv, int n, const GateMatrix &g, const int64_t *targets, const Controls &ctrls);
// multiplies the amplitudes where the controls hold by `factor` (0: projects them out)
void scaleSubspace(cplx *sv, int n, const Controls &ctrls, cplx factor);

// <a| G |b> with G = g on `targets` where the controls hold and 0 elsewhere -- the adjoint
// Jacobian's <lambda| dU/dtheta |phi> in one read-only pass, without materialising dU|phi>.
// g: Diagonal, Parity or Dense.
cplx matrixElement(const cplx *a, const cplx *b, int n, const GateMatrix &g, const int64_t *targets,
                   const Controls &ctrls);
cplx innerProduct(const cplx *a, const cplx *b, uint64_t size); // <a|b>
// <a|b> restricted to the indices where the control bits hold their values
cplx innerProductControlled(const cplx *a, const cplx *b, int n, const Controls &ctrls);
double norm2(const cplx *a, uint64_t size);
void copyState(cplx *dst, const cplx *src, uint64_t size);
void fillZero(cplx *dst, uint64_t size);
void axpy(cplx a, const cplx *x, cplx *y, uint64_t size); // y += a x
// <psi|P|psi> for the Pauli word with X, Y, Z on the index bits of the masks
double pauliExpval(const cplx *sv, uint64_t size, uint64_t xmask, uint64_t ymask, uint64_t zmask);
// out = factor P in (accumulate: out += factor P in) for that Pauli word; in != out
void applyPauliWord(const cplx *in, cplx *out, uint64_t size, uint64_t xmask, uint64_t ymask, uint64_t zmask,
                    cplx factor, bool accumulate);
// Marginal probabilities of `wires` (first wire = most significant bit of the outcome);
// out has 2^k entries.
void marginalProbs(const cplx *sv, int n, const int64_t *wires, int k, double *out);

// The software prefetch the streaming kernels issue (StateVectorKernels.inc): into L1 for
// writing (prefetchw, the default before session 12), into L2 only (prefetcht2), none, or
// (L1Own, session 19) prefetchw only where a kernel prefetches its own streams -- one gapless
// stream, runs shorter than a piece, four streams -- and none where L1Write fetches the next
// tile ahead (forEachRunAhead). Chosen once at load by the CPU (StateVector.cpp,
// kernelPrefetchDefault), overridable by COFACTOR_PREFETCH=l1|l2|off|l1own and, for
// in-process A/B timings, cf_rt_kernel_prefetch.
enum class Prefetch : int { L1Write = 0, L2 = 1, Off = 2, L1Own = 3 };
extern Prefetch gKernelPrefetch;
// whether the kernels' own per-stream prefetch (prefetchw, kPrefetchAmps ahead) is on
inline bool ownPrefetchW(Prefetch m) { return m == Prefetch::L1Write || m == Prefetch::L1Own; }

} // namespace cf

// ---- the adjoint Jacobian's fused step (AdjointKernels.inc) ----------------------------
namespace cf {

// For one tape operation, in one sweep over the controlled subspace of `targets`:
//     phi    <- uInv phi                      (if updatePhi; else phi is only read)
//     elements[j] = <lambda| dU[j] |phi>      (phi after the update; j < numDerivs)
//     lambda <- uInv lambda                   (if updateLambda)
// uInv: U^dagger, as applyOperation(..., inverse = true) applies it; dU[j]: gateDerivative
// (same shape, on `targets`, 0 outside the controls). Returns false, touching nothing, for
// what it has no kernel for (the constant shapes Identity / PermX / Swap, Diagonal shapes on
// more than two wires, which no gate has); the caller then takes the three separate passes.
bool adjointStep(cplx *phi, cplx *lambda, int n, const GateMatrix &uInv, const GateMatrix *dU, int numDerivs,
                 const int64_t *targets, const Controls &ctrls, bool updatePhi, bool updateLambda, cplx *elements);

// For m distinct index bits at once (CrossSums.inc; the adjoint Jacobian's layer sweep,
// AdjointFusion.hpp): S[4w + 2r + c] = sum over the amplitude pairs (i, i + 2^bits[w]) with
// bit bits[w] of i clear of conj(lambda_(i + r 2^bits[w])) phi_(i + c 2^bits[w]), so that
// <lambda| G |phi> = sum_rc G_rc S[4w + 2r + c] for any 2x2 G on that bit. Read only.
void crossSums(const cplx *phi, const cplx *lambda, int n, const int *bits, int m, cplx *S);
// What Re sum_rc G_rc S[4w + 2r + c] needs when G is anti-Hermitian (G_10 = -conj G_01, G_00
// and G_11 imaginary: every derivative matrix of a unitary gate family, as the adjoint walk's):
// C[w] = S_01 - conj(S_10), D[w] = Im S_11 and imTotal = Im <lambda|phi>; then
// Re sum_rc G_rc S_rc = Re(G_01 C) - Im(G_00) (imTotal - D) - Im(G_11) D. Read only, fewer
// multiply-adds than crossSums (CrossSums.inc).
void antiHermitianSums(const cplx *phi, const cplx *lambda, int n, const int *bits, int m, cplx *C, double *D,
                       double *imTotal);
// The same where phi is the product state tlo[i_lo] thi[i_hi] (i_lo: the low h bits of i;
// writeProductState's tables), phi not written: diag[w] = sum over i with bit bits[w] set of
// conj(lambda_i) phi_i, total = <lambda|phi>. One read of lambda.
void productSums(const cplx *lambda, int n, int h, const cplx *tlo, const cplx *thi, const int *bits, int m,
                 cplx *diag, cplx *total);

} // namespace cf
