// Instruction-set dispatch for the state-vector kernels. The library's baseline is
// x86-64-v2 (SSE4.2), which holds one complex<double> per vector register; the same kernels
// compiled for AVX2+FMA and for AVX-512 process two and four per instruction, which is what
// keeps in-cache gates fast. The best level the CPU supports is picked once, at the first
// call (COFACTOR_ISA=base|avx2 forces a lower one, for tests). Each copy lives in its own
// namespace, so the copies cannot be merged by the linker (standard-library templates stay
// baseline: their definitions are outside the pragma regions).
#include "StateVector.hpp"
#include "GateFusion.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ThreadPool.hpp"

#ifdef __linux__
#include <sys/mman.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace cf {

// A state beyond the caches is streamed through once per gate, and with 4 KiB pages each
// page of it costs a TLB miss and a page walk: with THP in "madvise" mode (the common
// default) the kernels ran 20-30% above a read+write pass over a numpy array (which numpy
// puts on huge pages) of the same size. Large buffers are therefore 2 MiB-aligned and
// madvise'd; where the kernel refuses, they are ordinary memory.
namespace {
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kHugeMin = size_t(4) << 20;
constexpr std::align_val_t kLineAlign{64}, kHugeAlign{kHugePage};
} // namespace

void *allocateState(size_t bytes) {
    if (bytes < kHugeMin) return ::operator new(bytes, kLineAlign);
    void *p = ::operator new(bytes, kHugeAlign);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes & ~(kHugePage - 1), MADV_HUGEPAGE); // a hint: failure changes nothing
#endif
    return p;
}

void freeState(void *p, size_t bytes) {
    ::operator delete(p, bytes < kHugeMin ? kLineAlign : kHugeAlign);
}

// The kernels' software prefetch (StateVector.hpp). Measured on an AMD EPYC (Zen 4, KVM,
// one thread, 64 MiB state; runtime/bench/access_pattern_probe.cpp and the kernels
// benchmark, session 12): prefetchw (into L1) one tile ahead made a 2x2 gate on a middle
// wire 1.8-1.9x a read+write pass and no prefetch at all 1.5-1.6x, while prefetcht2 one
// tile ahead made it 1.2x; a half pattern (PhaseShift) went from ~1.05 to ~0.73 of a full
// pass. The likely reason (inferred from timings; the VM has no PMU): a prefetch into L1
// holds one of L1's few miss buffers until its line arrives from DRAM, while prefetcht2
// there fills L2 only, so many more lines are in flight. The
// L1 prefetch was tuned in session 10 on an AMD EPYC of family 0x1A (Zen 5), so the L2
// prefetch is the default on family 0x19 only (Zen 3 and Zen 4; measured on Zen 4) and
// every other CPU but Intel (below) keeps the L1 prefetch. COFACTOR_PREFETCH=l1|l2|off|l1own
// overrides.
//
// Intel (GenuineIntel; measured on a KVM Xeon with AVX-512, family 6, 2 MiB L2 per core,
// session 19): l1own, the kernels' own prefetchw but no tile ahead. There the hardware
// prefetchers keep up with two streams at any stride, and prefetchw one tile ahead cost
// time. In-process A/B of the kernels benchmark's 26 kernels, one thread
// (cf_rt_kernel_prefetch switched round by round, 7-9 rounds, median kernel time / paired
// negation pass): at n = 24 l1 had 2x2 blocks on middle and high wires (Rot, ECR far
// apart) at 1.38-1.43x and Hadamard, RX, RZ on a middle wire at 1.11-1.14x, off
// 0.84-0.90x; l2 left Rot middle at 1.21x. But off lost the single-stream kernels' own
// prefetch at n = 22 (Rot, CRot, ECR on the last wires 0.81-0.82x l1, 0.93-0.99x off) and
// the four streams' at n = 24 (IsingXX middle 0.83x l1, 0.95x off): l1own keeps both.
Prefetch kernelPrefetchDefault() {
    const char *env = std::getenv("COFACTOR_PREFETCH");
    if (env && std::string(env) == "l1") return Prefetch::L1Write;
    if (env && std::string(env) == "l2") return Prefetch::L2;
    if (env && std::string(env) == "off") return Prefetch::Off;
    if (env && std::string(env) == "l1own") return Prefetch::L1Own;
    if (env && *env)
        std::fprintf(stderr, "cofactor: ignoring COFACTOR_PREFETCH='%s' (expected l1, l2, off or l1own)\n", env);
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) && ebx == 0x68747541 /* "Auth"enticAMD */ &&
        __get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        const unsigned family = ((eax >> 8) & 0xF) + ((eax >> 20) & 0xFF);
        if (family == 0x19) return Prefetch::L2;
    }
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) && ebx == 0x756e6547 /* "Genu"ineIntel */) return Prefetch::L1Own;
#endif
    return Prefetch::L1Write;
}
Prefetch gKernelPrefetch = kernelPrefetchDefault();

// CF_VECTOR_BYTES: the native vector width the chunked kernels are written for
#define CF_VECTOR_BYTES 16
namespace isa_base {
#include "StateVectorKernels.inc"
#include "AdjointKernels.inc"
#include "CrossSums.inc"
#include "FusedKernels.inc"
#include "HadamardKernels.inc"
} // namespace isa_base

#if defined(__x86_64__) && defined(__GNUC__)
#define CF_HAVE_X86_KERNELS 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi2,popcnt")
#undef CF_VECTOR_BYTES
#define CF_VECTOR_BYTES 32
namespace isa_avx2 {
#include "StateVectorKernels.inc"
#include "AdjointKernels.inc"
#include "CrossSums.inc"
#include "FusedKernels.inc"
#include "HadamardKernels.inc"
} // namespace isa_avx2
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx2,fma,bmi2,popcnt")
#undef CF_VECTOR_BYTES
#define CF_VECTOR_BYTES 64
namespace isa_avx512 {
#include "StateVectorKernels.inc"
#include "AdjointKernels.inc"
#include "CrossSums.inc"
#include "FusedKernels.inc"
#include "HadamardKernels.inc"
} // namespace isa_avx512
#pragma GCC pop_options
#endif

namespace {
enum class Isa { Base, Avx2, Avx512 };
Isa isa() {
    static const Isa level = [] {
#ifdef CF_HAVE_X86_KERNELS
        __builtin_cpu_init();
        Isa best = Isa::Base;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = Isa::Avx2;
        if (best == Isa::Avx2 && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
            best = Isa::Avx512;
        const char *force = std::getenv("COFACTOR_ISA"); // "base" or "avx2": for tests
        if (force && std::string(force) == "base") return Isa::Base;
        if (force && std::string(force) == "avx2") return std::min(best, Isa::Avx2);
        return best;
#else
        return Isa::Base;
#endif
    }();
    return level;
}
} // namespace

#ifdef CF_HAVE_X86_KERNELS
#define CF_DISPATCH(call)                                                                     \
    switch (isa()) {                                                                          \
    case Isa::Avx512: return isa_avx512::call;                                                \
    case Isa::Avx2: return isa_avx2::call;                                                    \
    default: return isa_base::call;                                                           \
    }
#else
#define CF_DISPATCH(call) return isa_base::call
#endif

void applyGateMatrix(cplx *sv, int n, const GateMatrix &g, const int64_t *targets, const Controls &ctrls) {
    CF_DISPATCH(applyGateMatrix(sv, n, g, targets, ctrls));
}
void scaleSubspace(cplx *sv, int n, const Controls &ctrls, cplx factor) {
    CF_DISPATCH(scaleSubspace(sv, n, ctrls, factor));
}
cplx matrixElement(const cplx *a, const cplx *b, int n, const GateMatrix &g, const int64_t *targets,
                   const Controls &ctrls) {
    CF_DISPATCH(matrixElement(a, b, n, g, targets, ctrls));
}
cplx innerProduct(const cplx *a, const cplx *b, uint64_t size) { CF_DISPATCH(innerProduct(a, b, size)); }
cplx innerProductControlled(const cplx *a, const cplx *b, int n, const Controls &ctrls) {
    CF_DISPATCH(innerProductControlled(a, b, n, ctrls));
}
double norm2(const cplx *a, uint64_t size) { CF_DISPATCH(norm2(a, size)); }
void copyState(cplx *dst, const cplx *src, uint64_t size) { CF_DISPATCH(copyState(dst, src, size)); }
void fillZero(cplx *dst, uint64_t size) { CF_DISPATCH(fillZero(dst, size)); }
void axpy(cplx a, const cplx *x, cplx *y, uint64_t size) { CF_DISPATCH(axpy(a, x, y, size)); }
double pauliExpval(const cplx *sv, uint64_t size, uint64_t xmask, uint64_t ymask, uint64_t zmask) {
    CF_DISPATCH(pauliExpval(sv, size, xmask, ymask, zmask));
}
void applyPauliWord(const cplx *in, cplx *out, uint64_t size, uint64_t xmask, uint64_t ymask, uint64_t zmask,
                    cplx factor, bool accumulate) {
    CF_DISPATCH(applyPauliWord(in, out, size, xmask, ymask, zmask, factor, accumulate));
}
void marginalProbs(const cplx *sv, int n, const int64_t *wires, int k, double *out) {
    CF_DISPATCH(marginalProbs(sv, n, wires, k, out));
}
void applyFusedDense(cplx *sv, int n, const cplx *M, const int64_t *wires, int k) {
    CF_DISPATCH(fused::applyDense(sv, n, M, wires, k));
}
bool applyHadamardPhase(cplx *sv, int n, const int64_t *wires, int k, int smask, const int *perm, const cplx *din,
                        const cplx *dout, bool hasDin) {
    CF_DISPATCH(fused::applyHadamardPhase(sv, n, wires, k, smask, perm, din, dout, hasDin));
}
void gatherLinear(cplx *dst, const cplx *src, int n, int h, const uint64_t *llo, const uint64_t *lhi) {
    CF_DISPATCH(fused::gatherLinear(dst, src, n, h, llo, lhi));
}
void writeProductState(cplx *sv, int n, int h, const cplx *tlo, const cplx *thi, const uint64_t *llo,
                       const uint64_t *lhi, bool identity) {
    CF_DISPATCH(fused::productState(sv, n, h, tlo, thi, llo, lhi, identity));
}
bool adjointStep(cplx *phi, cplx *lambda, int n, const GateMatrix &uInv, const GateMatrix *dU, int numDerivs,
                 const int64_t *targets, const Controls &ctrls, bool updatePhi, bool updateLambda, cplx *elements) {
    CF_DISPATCH(adjointStep(phi, lambda, n, uInv, dU, numDerivs, targets, ctrls, updatePhi, updateLambda, elements));
}
void crossSums(const cplx *phi, const cplx *lambda, int n, const int *bits, int m, cplx *S) {
    CF_DISPATCH(crossSums(phi, lambda, n, bits, m, S));
}
void antiHermitianSums(const cplx *phi, const cplx *lambda, int n, const int *bits, int m, cplx *C, double *D,
                       double *imTotal) {
    CF_DISPATCH(antiHermitianSums(phi, lambda, n, bits, m, C, D, imTotal));
}
void productSums(const cplx *lambda, int n, int h, const cplx *tlo, const cplx *thi, const int *bits, int m,
                 cplx *diag, cplx *total) {
    CF_DISPATCH(productSums(lambda, n, h, tlo, thi, bits, m, diag, total));
}

} // namespace cf

// Sets the kernels' software prefetch (mode 0: into L1 for writing, 1: into L2, 2: none,
// 3: into L1 only where a kernel prefetches its own streams; StateVector.hpp) when mode >= 0, and returns the mode in force: for in-process A/B timings
// (benchmarks, runtime/bench); not thread-safe against kernels running at the time.
extern "C" __attribute__((visibility("default"))) int cf_rt_kernel_prefetch(int mode) {
    if (mode >= 0 && mode <= 3) cf::gKernelPrefetch = cf::Prefetch(mode);
    return int(cf::gKernelPrefetch);
}
