// Access-pattern probe (issue 14, session 10): trivial loops with exactly the access pattern
// of a gate on a middle wire -- touch runs of 2^LOWBIT amplitudes, skip as many (PhaseShift;
// CNOT with its target one bit lower), or two full streams 2^LOWBIT apart (a 2x2 block) --
// each timed against a full read+write pass timed just before it (CPU time of this thread,
// variants interleaved round by round, median of the ratios): what bound such a pattern can
// reach at all, and which software prefetch gets there. Not part of the build:
//   g++ -O3 -march=native -fopenmp-simd -o /tmp/probe runtime/bench/access_pattern_probe.cpp
//   /tmp/probe [n=22] [lowbit=10] [hugepages=1] [rounds=9]
// (half patterns: 0.5 = their bound; full patterns: 1.0)
// Session 12 (AMD EPYC Zen 4, KVM): the "next tile" rows issue prefetchw (into L1, the
// runtime's COFACTOR_PREFETCH=l1) or prefetcht2 (into L2, =l2); variants of these loops ran the
// half pattern at ~0.73 and the 2x2 mix at ~1.2 with prefetcht2, ~1.05 and ~1.9 with prefetchw.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <new>
#include <string>
#include <sys/mman.h>
#include <vector>
using cplx = std::complex<double>;

static double now() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int N = 22, LOWBIT = 10;
static uint64_t SIZE;
static cplx *sv;

__attribute__((noinline)) void fullNegate() {
    double *__restrict a = reinterpret_cast<double *>(sv);
#pragma omp simd
    for (uint64_t i = 0; i < 2 * SIZE; ++i) a[i] = -a[i];
}
__attribute__((noinline)) void fullScale(cplx d) {
    double *__restrict a = reinterpret_cast<double *>(sv);
    const double dr = d.real(), di = d.imag();
#pragma omp simd
    for (uint64_t i = 0; i < SIZE; ++i) {
        double xr = a[2 * i], xi = a[2 * i + 1];
        a[2 * i] = dr * xr - di * xi;
        a[2 * i + 1] = dr * xi + di * xr;
    }
}
// scale where bit LOWBIT is 1 (PhaseShift middle): runs of R = 2^LOWBIT at odd run indices
// pf: 0 none, 1: prefetch D amps ahead in the run (past its end), 2: prefetch D ahead in the
// touched index space (jumping the gaps)
template <int PF> __attribute__((noinline)) void halfScale(cplx d, uint64_t D) {
    const uint64_t R = uint64_t(1) << LOWBIT;
    const double dr = d.real(), di = d.imag();
    for (uint64_t base = R; base < SIZE; base += 2 * R) {
        double *__restrict a = reinterpret_cast<double *>(sv + base);
        for (uint64_t b = 0; b < R; b += 64) {
            if (PF == 1)
                for (uint64_t l = 0; l < 64; l += 4) __builtin_prefetch(sv + base + b + D + l, 1);
            if (PF == 2)
                for (uint64_t l = 0; l < 64; l += 4) {
                    uint64_t t = b + D + l; // offset in touched space from this run
                    uint64_t addr = base + (t / R) * 2 * R + (t % R);
                    __builtin_prefetch(sv + addr, 1);
                }
#pragma omp simd
            for (uint64_t i = b; i < b + 64; ++i) {
                double xr = a[2 * i], xi = a[2 * i + 1];
                a[2 * i] = dr * xr - di * xi;
                a[2 * i + 1] = dr * xi + di * xr;
            }
        }
    }
}
// CNOT middle: control bit LOWBIT+1... here: control = bit C, target = bit T < C
// swap (bit T = 0) with (bit T = 1) where bit C = 1
template <int PF> __attribute__((noinline)) void cnotSwap(int C, int T, uint64_t D) {
    const uint64_t RT = uint64_t(1) << T, RC = uint64_t(1) << C;
    for (uint64_t hi = 0; hi < SIZE; hi += 2 * RC)
        for (uint64_t mid = RC; mid < 2 * RC; mid += 2 * RT) {
            double *__restrict a0 = reinterpret_cast<double *>(sv + hi + mid);
            double *__restrict a1 = reinterpret_cast<double *>(sv + hi + mid + RT);
            for (uint64_t b = 0; b < RT; b += 64) {
                if (PF == 1)
                    for (uint64_t l = 0; l < 64; l += 4) {
                        __builtin_prefetch(sv + hi + mid + b + D + l, 1);
                        __builtin_prefetch(sv + hi + mid + RT + b + D + l, 1);
                    }
                if (PF == 2) {
                    uint64_t t = b + D, jump = 0;
                    if (t >= RT) { // next run: next mid, or next hi block
                        uint64_t nmid = mid + 2 * RT, nhi = hi;
                        if (nmid >= 2 * RC) { nmid = RC; nhi += 2 * RC; }
                        jump = (nhi + nmid) - (hi + mid) - RT;
                    }
                    for (uint64_t l = 0; l < 64; l += 4) {
                        __builtin_prefetch(sv + hi + mid + t + jump + l, 1);
                        __builtin_prefetch(sv + hi + mid + RT + t + jump + l, 1);
                    }
                }
#pragma omp simd
                for (uint64_t i = 2 * b; i < 2 * b + 128; ++i) {
                    double t = a0[i];
                    a0[i] = a1[i];
                    a1[i] = t;
                }
            }
        }
}

template <int PF> __attribute__((noinline)) void mix(int T, uint64_t D, cplx m) {
    const uint64_t RT = uint64_t(1) << T;
    const double ar = m.real(), ai = m.imag();
    for (uint64_t hi = 0; hi < SIZE; hi += 2 * RT) {
        double *__restrict a0 = reinterpret_cast<double *>(sv + hi);
        double *__restrict a1 = reinterpret_cast<double *>(sv + hi + RT);
        for (uint64_t b = 0; b < RT; b += 64) {
            if (PF == 2)
                for (uint64_t l = 0; l < 128; l += 4) __builtin_prefetch(sv + hi + 2 * RT + 2 * b + l, 1);
            if (PF == 1)
                for (uint64_t l = 0; l < 64; l += 4) {
                    __builtin_prefetch(sv + hi + b + D + l, 1);
                    __builtin_prefetch(sv + hi + RT + b + D + l, 1);
                }
#pragma omp simd
            for (uint64_t i = b; i < b + 64; ++i) {
                const double x0r = a0[2 * i], x0i = a0[2 * i + 1], x1r = a1[2 * i], x1i = a1[2 * i + 1];
                a0[2 * i] = ar * x0r - ai * x0i + ai * x1r - ar * x1i;
                a0[2 * i + 1] = ar * x0i + ai * x0r + ai * x1i + ar * x1r;
                a1[2 * i] = ar * x0r - ai * x0i + ar * x1r - ai * x1i;
                a1[2 * i + 1] = ar * x0i + ai * x0r + ai * x1i + ar * x1r;
            }
        }
    }
}

// generic: blocks = block index space with fixed bits (mask), streams at off[0..S), runs of
// 2^low blocks; tiles of TL blocks; while processing tile t, prefetch tile t+1 sequentially
// (stream 0's TL amps, then stream 1's ...), G = 64 amps per sub-step
template <int S, bool L2, class F>
__attribute__((always_inline)) inline void seqRuns(uint64_t fixedMask, uint64_t ctrlValue, int m, const uint64_t *off, uint64_t TL, F &&f) {
    constexpr uint64_t G = 64;
    const uint64_t count = SIZE >> m;
    uint64_t b = 0, nb = ((((b + TL - 1) | fixedMask) + 1) & ~fixedMask);
    for (uint64_t s = 0; s < count; s += TL) {
        // tile at b (TL blocks), next tile at nb
        const uint64_t nn = ((((nb + TL - 1) | fixedMask) + 1) & ~fixedMask);
        const uint64_t linesPerStep = S * G / 4; // lines of the next tile per sub-step
        for (uint64_t i = 0; i < TL; i += G) {
            const uint64_t first = (i / G) * linesPerStep * 4; // amp position in next tile's sequence
            for (uint64_t l = 0; l < linesPerStep; ++l) {
                const uint64_t pos = first + 4 * l;
                const uint64_t j = pos / TL, o = pos % TL;
                if (L2) __builtin_prefetch(sv + ((nb | ctrlValue) + off[j] + o), 0, 1);
                else __builtin_prefetch(sv + ((nb | ctrlValue) + off[j] + o), 1);
            }
            f((b | ctrlValue) + i, G);
        }
        b = nb;
        nb = nn;
    }
}
template <bool L2> __attribute__((noinline)) void genHalf(cplx d, uint64_t TL) {
    // scale where bit LOWBIT = 1
    const uint64_t fixedMask = uint64_t(1) << LOWBIT, cv = fixedMask;
    const uint64_t off[1] = {0};
    const double dr = d.real(), di = d.imag();
    seqRuns<1, L2>(fixedMask, cv, 1, off, TL, [&](uint64_t base, uint64_t len) {
        double *__restrict a = reinterpret_cast<double *>(sv + base);
#pragma omp simd
        for (uint64_t i = 0; i < len; ++i) {
            double xr = a[2 * i], xi = a[2 * i + 1];
            a[2 * i] = dr * xr - di * xi;
            a[2 * i + 1] = dr * xi + di * xr;
        }
    });
}
template <bool L2> __attribute__((noinline)) void genCnot(uint64_t TL) {
    const uint64_t RT = uint64_t(1) << (LOWBIT - 1);
    const uint64_t fixedMask = (uint64_t(1) << LOWBIT) | RT, cv = uint64_t(1) << LOWBIT;
    const uint64_t off[2] = {0, RT};
    seqRuns<2, L2>(fixedMask, cv, 2, off, TL, [&](uint64_t base, uint64_t len) {
        double *__restrict a0 = reinterpret_cast<double *>(sv + base);
        double *__restrict a1 = reinterpret_cast<double *>(sv + base + RT);
#pragma omp simd
        for (uint64_t i = 0; i < 2 * len; ++i) {
            double t = a0[i];
            a0[i] = a1[i];
            a1[i] = t;
        }
    });
}
template <bool L2> __attribute__((noinline)) void genMix(uint64_t TL, cplx m) {
    const uint64_t RT = uint64_t(1) << LOWBIT;
    const uint64_t fixedMask = RT;
    const uint64_t off[2] = {0, RT};
    const double ar = m.real(), ai = m.imag();
    seqRuns<2, L2>(fixedMask, 0, 1, off, TL, [&](uint64_t base, uint64_t len) {
        double *__restrict a0 = reinterpret_cast<double *>(sv + base);
        double *__restrict a1 = reinterpret_cast<double *>(sv + base + RT);
#pragma omp simd
        for (uint64_t i = 0; i < len; ++i) {
            const double x0r = a0[2 * i], x0i = a0[2 * i + 1], x1r = a1[2 * i], x1i = a1[2 * i + 1];
            a0[2 * i] = ar * x0r - ai * x0i + ai * x1r - ar * x1i;
            a0[2 * i + 1] = ar * x0i + ai * x0r + ai * x1i + ar * x1r;
            a1[2 * i] = ar * x0r - ai * x0i + ar * x1r - ai * x1i;
            a1[2 * i + 1] = ar * x0i + ai * x0r + ai * x1i + ar * x1r;
        }
    });
}

// Session 19 (Intel Xeon, KVM, AVX-512): the 2x2 mix with the next tile prefetched by kind
// (KIND 0: prefetchw, 1: prefetcht2, 2: prefetcht0) either as forEachRunAhead's burst (the
// piece's 32 lines before its 64 amplitudes) or SPREAD (4 lines before each 8 amplitudes):
// which of "prefetch into L1", "write intent" and "a burst of more lines than L1 has fill
// buffers" makes the tile ahead slower than no software prefetch on that CPU.
template <int KIND> __attribute__((always_inline)) inline void pfKind(const void *p) {
    if (KIND == 0) __builtin_prefetch(p, 1);
    else if (KIND == 1) __builtin_prefetch(p, 0, 1);
    else __builtin_prefetch(p, 0, 3);
}
template <int KIND, bool SPREAD> __attribute__((noinline)) void kindMix(uint64_t TL, cplx m) {
    const uint64_t RT = uint64_t(1) << LOWBIT;
    const double ar = m.real(), ai = m.imag();
    constexpr uint64_t G = 64, kLines = 2 * G / 4, kSub = 8;
    for (uint64_t hi = 0; hi < SIZE; hi += 2 * RT)
        for (uint64_t t = 0; t < RT; t += TL) {
            // the next tile: this run's next TL amplitudes, or the next run's first
            const uint64_t nb = t + TL < RT ? hi + t + TL : hi + 2 * RT;
            double *__restrict a0 = reinterpret_cast<double *>(sv + hi + t);
            double *__restrict a1 = reinterpret_cast<double *>(sv + hi + t + RT);
            for (uint64_t b = 0; b < TL; b += G) {
                const uint64_t first = (b / G) * kLines * 4;
                auto line = [&](uint64_t l) {
                    const uint64_t pos = first + 4 * l;
                    return sv + nb + (pos / TL) * RT + pos % TL;
                };
                if (!SPREAD)
                    for (uint64_t l = 0; l < kLines; ++l) pfKind<KIND>(line(l));
                for (uint64_t s = b; s < b + G; s += kSub) {
                    if (SPREAD)
                        for (uint64_t l = (s - b) / kSub * (kLines * kSub / G); l < (s - b + kSub) / kSub * (kLines * kSub / G); ++l)
                            pfKind<KIND>(line(l));
#pragma omp simd
                    for (uint64_t i = s; i < s + kSub; ++i) {
                        const double x0r = a0[2 * i], x0i = a0[2 * i + 1], x1r = a1[2 * i], x1i = a1[2 * i + 1];
                        a0[2 * i] = ar * x0r - ai * x0i + ai * x1r - ar * x1i;
                        a0[2 * i + 1] = ar * x0i + ai * x0r + ai * x1i + ar * x1r;
                        a1[2 * i] = ar * x0r - ai * x0i + ar * x1r - ai * x1i;
                        a1[2 * i + 1] = ar * x0i + ai * x0r + ai * x1i + ar * x1r;
                    }
                }
            }
        }
}

int main(int argc, char **argv) {
    if (argc > 1) N = atoi(argv[1]);
    if (argc > 2) LOWBIT = atoi(argv[2]);
    const bool huge = argc > 3 ? atoi(argv[3]) : 1;
    const int rounds = argc > 4 ? atoi(argv[4]) : 9;
    SIZE = uint64_t(1) << N;
    size_t bytes = SIZE * sizeof(cplx);
    sv = static_cast<cplx *>(::operator new(bytes, std::align_val_t(2 << 20)));
    if (huge) madvise(sv, bytes, MADV_HUGEPAGE);
    for (uint64_t i = 0; i < SIZE; ++i) sv[i] = cplx(1.0 / (1 + i % 7), 0.5);
    const cplx d(0.6, 0.8);
    std::vector<std::pair<std::string, std::function<void()>>> v = {
        {"full pass: complex scale", [&] { fullScale(d); }},
        {"half (PhaseShift): no sw prefetch", [&] { halfScale<0>(d, 0); }},
        {"half: 1 KiB ahead per stream", [&] { halfScale<1>(d, 64); }},
        {"half: 4 KiB ahead, jumping gaps", [&] { halfScale<2>(d, 256); }},
        {"half: next tile (as forEachRunAhead)", [&] { genHalf<false>(d, uint64_t(1) << std::min(LOWBIT, 10)); }},
        {"half: next tile, prefetcht2", [&] { genHalf<true>(d, uint64_t(1) << std::min(LOWBIT, 10)); }},
        {"CNOT: no sw prefetch", [&] { cnotSwap<0>(LOWBIT, LOWBIT - 1, 0); }},
        {"CNOT: 1 KiB ahead per stream", [&] { cnotSwap<1>(LOWBIT, LOWBIT - 1, 64); }},
        {"CNOT: next tile", [&] { genCnot<false>(uint64_t(1) << std::min(LOWBIT - 1, 10)); }},
        {"CNOT: next tile, prefetcht2", [&] { genCnot<true>(uint64_t(1) << std::min(LOWBIT - 1, 10)); }},
        {"2x2 mix: no sw prefetch", [&] { mix<0>(LOWBIT, 0, d); }},
        {"2x2 mix: 2 KiB ahead per stream", [&] { mix<1>(LOWBIT, 128, d); }},
        {"2x2 mix: next tile", [&] { genMix<false>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
        {"2x2 mix: next tile, prefetcht2", [&] { genMix<true>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
        {"2x2 mix: tile, prefetchw burst", [&] { kindMix<0, false>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
        {"2x2 mix: tile, prefetchw spread", [&] { kindMix<0, true>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
        {"2x2 mix: tile, prefetcht0 burst", [&] { kindMix<2, false>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
        {"2x2 mix: tile, prefetcht0 spread", [&] { kindMix<2, true>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
        {"2x2 mix: tile, prefetcht2 burst", [&] { kindMix<1, false>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
        {"2x2 mix: tile, prefetcht2 spread", [&] { kindMix<1, true>(uint64_t(1) << std::min(LOWBIT, 10), d); }},
    };
    std::vector<std::vector<double>> ratio(v.size());
    for (int r = 0; r < rounds; ++r) {
        for (size_t k = 0; k < v.size(); ++k) {
            double t0 = now();
            fullNegate();
            double pass = now() - t0;
            t0 = now();
            v[k].second();
            double t = now() - t0;
            ratio[k].push_back(t / pass);
        }
    }
    printf("n=%d lowbit=%d huge=%d\n", N, LOWBIT, int(huge));
    for (size_t k = 0; k < v.size(); ++k) {
        std::sort(ratio[k].begin(), ratio[k].end());
        printf("%-40s  /fullpass median %.3f  (min %.3f max %.3f)\n", v[k].first.c_str(), ratio[k][rounds / 2],
               ratio[k][0], ratio[k].back());
    }
}
