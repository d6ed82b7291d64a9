#include "DistributedDevice.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "../Error.hpp"
#include "../TermSampling.hpp"

namespace cf {

std::atomic<uint64_t> exchangedBytes{0};

namespace {
const double kNoParams[1] = {0};

int commRank(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
}
int commSize(MPI_Comm c) {
    int s = 1;
    MPI_Comm_size(c, &s);
    return s;
}
int log2Exact(int p) {
    int k = 0;
    while ((1 << k) < p) ++k;
    if ((1 << k) != p)
        fail(CF_ERR_INVALID_ARGUMENT, "the number of MPI ranks must be a power of two, got ", p);
    return k;
}
// The local qubits a register of n qubits keeps over P ranks (checked).
int localQubits(int n, int p) {
    const int k = log2Exact(p);
    if (n - k < 1)
        fail(CF_ERR_INVALID_ARGUMENT, n, " qubits cannot be sharded over ", p,
             " ranks: each rank needs at least one local qubit (use at most 2^", n - 1, " ranks)");
    return n - k;
}
// A seed every rank agrees on: a non-negative one as given, else rank 0's entropy.
int64_t commonSeed(int64_t seed, MPI_Comm c) {
    if (seed >= 0 || seed == kContinueSeed) return seed;
    uint64_t s = 0;
    if (commRank(c) == 0) {
        std::random_device rd;
        s = ((uint64_t(rd()) << 32) ^ rd()) >> 1; // non-negative as int64
    }
    MPI_Bcast(&s, 1, MPI_UINT64_T, 0, c);
    return int64_t(s);
}

// Amplitudes per exchange message: the two chunk buffers stay at 1/8 of the shard (and at
// most 2 x 16 MiB), the bound the per-rank memory goal needs.
uint64_t chunkAmps(uint64_t half) {
    // COFACTOR_MPI_CHUNK (amplitudes) caps it further: tests use tiny chunks on tiny states
    static const uint64_t override = [] {
        const char *env = std::getenv("COFACTOR_MPI_CHUNK");
        return env ? uint64_t(std::max(1LL, std::atoll(env))) : uint64_t(0);
    }();
    if (override) return std::max<uint64_t>(1, std::min(half, override));
    const uint64_t cap = uint64_t(1) << 20;
    return std::max<uint64_t>(1, std::min({half, cap, std::max<uint64_t>(half / 8, 4096)}));
}
} // namespace

DistributedDevice::DistributedDevice(int numQubits, int64_t shots, int64_t seed, MPI_Comm comm)
    : comm_(comm), rank_(commRank(comm)), size_(commSize(comm)), k_(log2Exact(size_)), n_(numQubits),
      L_(localQubits(numQubits, size_)), local_(L_, shots, commonSeed(seed, comm)) {
    reset(shots, seed);
}

// ---- the qubit map and exchanges ----------------------------------------------------------
void DistributedDevice::swapGlobalLocal(int g, int l) {
    const int bit = rankBit(g), partner = rank_ ^ (1 << (k_ - 1 - g));
    const int lb = n_ - 1 - l; // the local position's bit in a shard index
    // After the swap, amplitude (global g = x, local l = y) is the old (y, x): this rank keeps
    // its amplitudes with y == bit and trades those with y != bit for the partner's with
    // y == (its) bit -- the same shard indices on both sides.
    const uint64_t half = localSize() / 2, low = (uint64_t(1) << lb) - 1;
    const uint64_t sel = uint64_t(1 - bit) << lb;
    auto index = [&](uint64_t j) { return ((j & ~low) << 1) | sel | (j & low); };
    const uint64_t chunk = chunkAmps(half);
    sendBuf_.resize(chunk);
    recvBuf_.resize(chunk);
    std::vector<cplx *> buffers{sv()};
    buffers.insert(buffers.end(), followers_.begin(), followers_.end());
    // the half is made of runs of 2^lb contiguous amplitudes: copied run by run
    auto forRuns = [&](uint64_t start, uint64_t count, auto &&body) {
        for (uint64_t t = 0; t < count;) {
            const uint64_t j = start + t, len = std::min(low + 1 - (j & low), count - t);
            body(index(j), t, len);
            t += len;
        }
    };
    for (cplx *buf : buffers) {
        for (uint64_t start = 0; start < half; start += chunk) {
            const uint64_t count = std::min(chunk, half - start);
            // a chunk inside one run is sent from the shard itself, without packing
            const bool contiguous = (start & low) + count <= low + 1;
            const cplx *send = contiguous ? buf + index(start) : sendBuf_.data();
            if (!contiguous)
                forRuns(start, count, [&](uint64_t i, uint64_t t, uint64_t len) {
                    std::memcpy(sendBuf_.data() + t, buf + i, len * sizeof(cplx));
                });
            MPI_Sendrecv(send, int(count), MPI_C_DOUBLE_COMPLEX, partner, 17, recvBuf_.data(), int(count),
                         MPI_C_DOUBLE_COMPLEX, partner, 17, comm_, MPI_STATUS_IGNORE);
            forRuns(start, count, [&](uint64_t i, uint64_t t, uint64_t len) {
                std::memcpy(buf + i, recvBuf_.data() + t, len * sizeof(cplx));
            });
            exchangedBytes += count * sizeof(cplx);
        }
    }
    std::swap(logi_[size_t(g)], logi_[size_t(l)]);
    phys_[size_t(logi_[size_t(g)])] = g;
    phys_[size_t(logi_[size_t(l)])] = l;
}

void DistributedDevice::swapLocalLocal(int a, int b) {
    const int64_t wires[2] = {a - k_, b - k_};
    const GateMatrix swap = baseGateMatrix(CF_GATE_SWAP, kNoParams, 2, false);
    applyGateMatrix(sv(), L_, swap, wires, Controls());
    for (cplx *f : followers_) applyGateMatrix(f, L_, swap, wires, Controls());
    std::swap(logi_[size_t(a)], logi_[size_t(b)]);
    phys_[size_t(logi_[size_t(a)])] = a;
    phys_[size_t(logi_[size_t(b)])] = b;
}

void DistributedDevice::makeLocal(const int64_t *wires, size_t count) {
    if (count > size_t(L_))
        fail(CF_ERR_NOT_SUPPORTED, "an operation or observable on ", count, " wires needs them all on one rank, "
             "but each of the ", size_, " ranks holds only ", L_, " of the ", n_,
             " qubits; use fewer ranks");
    ++clock_;
    for (size_t i = 0; i < count; ++i) lastUse_[size_t(wires[i])] = clock_;
    for (size_t i = 0; i < count; ++i) {
        const int g = phys_[size_t(wires[i])];
        if (g >= k_) continue;
        // the least recently used local wire that this operation does not need
        int best = -1;
        for (int l = k_; l < n_; ++l) {
            const int w = logi_[size_t(l)];
            if (lastUse_[size_t(w)] == clock_) continue;
            if (best < 0 || lastUse_[size_t(w)] < lastUse_[size_t(logi_[size_t(best)])]) best = l;
        }
        swapGlobalLocal(g, best);
    }
}

void DistributedDevice::restoreIdentity() {
    for (int g = 0; g < k_; ++g) {
        int q = phys_[size_t(g)];
        if (q == g) continue;
        if (q < k_) { // global elsewhere: through a local position
            swapGlobalLocal(q, n_ - 1);
            q = n_ - 1;
        }
        swapGlobalLocal(g, q);
    }
    for (int p = k_; p < n_; ++p)
        if (phys_[size_t(p)] != p) swapLocalLocal(p, phys_[size_t(p)]);
}

bool DistributedDevice::localize(const Operation &op, Operation &out) {
    // A table gate with built-in controls (CNOT, CRX, Toffoli...) becomes its base gate with
    // explicit controls, as applyOperation applies it anyway: then only its targets need to
    // be local, and a control on a global position costs no exchange.
    const Canonical c = op.kind == Operation::Kind::Gate ? canonicalGate(op.gateId) : Canonical{op.gateId, 0};
    const size_t builtin = size_t(c.builtinCtrls);
    makeLocal(op.wires.data() + builtin, op.wires.size() - builtin);
    out.kind = op.kind;
    out.gateId = c.base;
    out.params = op.params;
    out.adjoint = op.adjoint;
    out.word = op.word;
    out.matrix = op.matrix;
    out.firstParam = op.firstParam;
    out.wires.resize(op.wires.size() - builtin);
    for (size_t i = builtin; i < op.wires.size(); ++i) out.wires[i - builtin] = phys_[size_t(op.wires[i])] - k_;
    out.ctrlWires.clear();
    out.ctrlValues.clear();
    bool active = true;
    auto control = [&](int64_t wire, int8_t value) {
        const int p = phys_[size_t(wire)];
        if (p < k_) {
            active &= rankBit(p) == value;
        } else {
            out.ctrlWires.push_back(p - k_);
            out.ctrlValues.push_back(value);
        }
    };
    for (size_t i = 0; i < builtin; ++i) control(op.wires[i], 1);
    for (size_t i = 0; i < op.ctrlWires.size(); ++i) control(op.ctrlWires[i], op.ctrlValues[i]);
    return active;
}

// ---- lifecycle and operations ----------------------------------------------------------------
void DistributedDevice::reset(int64_t shots, int64_t seed) {
    local_.reset(shots, commonSeed(seed, comm_));
    resetState();
}

void DistributedDevice::resetState() {
    fillZero(sv(), localSize());
    if (rank_ == 0) sv()[0] = 1;
    phys_.resize(size_t(n_));
    logi_.resize(size_t(n_));
    lastUse_.assign(size_t(n_), 0);
    for (int i = 0; i < n_; ++i) phys_[size_t(i)] = logi_[size_t(i)] = i;
}

void DistributedDevice::apply(const Operation &op) {
    if (localize(op, scratch_)) applyOperation(sv(), L_, scratch_, false);
}

// ---- reductions ---------------------------------------------------------------------------
void DistributedDevice::allSum(double *values, size_t count) {
    if (size_ == 1) return;
    for (size_t done = 0; done < count;) {
        const int c = int(std::min<size_t>(count - done, size_t(1) << 28));
        MPI_Allreduce(MPI_IN_PLACE, values + done, c, MPI_DOUBLE, MPI_SUM, comm_);
        // MPI does not promise the same rounding on every rank; rank 0's sum is the answer
        MPI_Bcast(values + done, c, MPI_DOUBLE, 0, comm_);
        done += size_t(c);
    }
}

void DistributedDevice::reducedProbs(const int64_t *wires, int k, double *out) {
    const size_t N = size_t(1) << k;
    std::fill(out, out + N, 0.0);
    std::vector<int64_t> localWires;
    std::vector<int> position; // of each local wire in `wires`
    uint64_t fixed = 0;        // the outcome bits of the global wires on this rank
    for (int i = 0; i < k; ++i) {
        const int p = phys_[size_t(wires[i])];
        if (p >= k_) {
            localWires.push_back(p - k_);
            position.push_back(i);
        } else if (rankBit(p)) {
            fixed |= uint64_t(1) << (k - 1 - i);
        }
    }
    const int m = int(localWires.size());
    std::vector<double> part(size_t(1) << m);
    if (m == 0)
        part[0] = norm2(sv(), localSize());
    else
        marginalProbs(sv(), L_, localWires.data(), m, part.data());
    for (size_t j = 0; j < part.size(); ++j) {
        uint64_t o = fixed;
        for (int t = 0; t < m; ++t)
            if ((j >> (m - 1 - t)) & 1) o |= uint64_t(1) << (k - 1 - position[size_t(t)]);
        out[o] += part[j];
    }
    allSum(out, N);
}

void DistributedDevice::probs(const int64_t *wires, int k, double *out) {
    reducedProbs(wires, k, out);
    const int64_t shots = local_.shots();
    if (shots <= 0) return;
    const size_t N = size_t(1) << k;
    std::vector<double> p(out, out + N);
    if (!finiteDistribution(p)) return;
    std::fill(out, out + N, 0.0);
    for (uint32_t o : local_.drawOutcomes(p, shots)) out[o] += 1.0;
    for (size_t i = 0; i < N; ++i) out[i] /= double(shots);
}

int DistributedDevice::measure(int64_t wire, bool reset, int64_t postselect) {
    double p[2];
    reducedProbs(&wire, 1, p);
    const double total = p[0] + p[1];
    if (!std::isfinite(total)) StateVectorDevice::notFinite("mid-circuit measurement");
    int outcome;
    if (postselect >= 0) {
        outcome = int(postselect);
        if (!(p[outcome] > 1e-16 * total))
            fail(CF_ERR_POSTSELECTION, "mid-circuit measurement of wire ", wire,
                 ": postselecting outcome ", outcome, " which has probability ", p[outcome] / total);
    } else {
        outcome = local_.uniform() * total < p[1] ? 1 : 0;
    }
    const int pos = phys_[size_t(wire)];
    const double scale = 1.0 / std::sqrt(p[outcome]);
    if (pos >= k_) {
        Controls keep, drop;
        keep.add(pos - k_, int8_t(outcome));
        drop.add(pos - k_, int8_t(1 - outcome));
        scaleSubspace(sv(), L_, drop, 0.0);
        scaleSubspace(sv(), L_, keep, scale);
    } else if (rankBit(pos) == outcome) {
        scaleSubspace(sv(), L_, Controls(), scale);
    } else {
        fillZero(sv(), localSize());
    }
    if (reset && outcome == 1) {
        Operation x;
        x.gateId = CF_GATE_PauliX;
        x.wires = {wire};
        apply(x);
    }
    return outcome;
}

void DistributedDevice::state(double *out) {
    restoreIdentity();
    if (localSize() > uint64_t(INT_MAX))
        fail(CF_ERR_NOT_SUPPORTED, "state(): a shard of 2^", L_, " amplitudes is too large to gather");
    // every rank receives the whole state: 16 * 2^n bytes on each (docs/distributed.md)
    MPI_Allgather(sv(), int(localSize()), MPI_C_DOUBLE_COMPLEX, out, int(localSize()), MPI_C_DOUBLE_COMPLEX,
                  comm_);
}

void DistributedDevice::setState(const double *amplitudes) {
    const cplx *in = reinterpret_cast<const cplx *>(amplitudes);
    const double norm = norm2(in, uint64_t(1) << n_); // every rank has the same input
    if (!(std::abs(norm - 1.0) <= 1e-8))
        fail(CF_ERR_INVALID_ARGUMENT, "set_state: the state is not normalised (norm^2 = ", norm, ")");
    for (int i = 0; i < n_; ++i) phys_[size_t(i)] = logi_[size_t(i)] = i;
    copyState(sv(), in + uint64_t(rank_) * localSize(), localSize());
}

void DistributedDevice::sample(const int64_t *wires, int k, int64_t *out) {
    std::vector<double> p(size_t(1) << k);
    reducedProbs(wires, k, p.data());
    if (!finiteDistribution(p)) StateVectorDevice::notFinite("sample");
    const int64_t shots = local_.shots();
    const auto outcomes = local_.drawOutcomes(p, shots);
    for (int64_t s = 0; s < shots; ++s)
        for (int i = 0; i < k; ++i) out[s * k + i] = (outcomes[size_t(s)] >> (k - 1 - i)) & 1;
}

void DistributedDevice::counts(const int64_t *wires, int k, int64_t *out) {
    std::vector<double> p(size_t(1) << k);
    reducedProbs(wires, k, p.data());
    if (!finiteDistribution(p)) StateVectorDevice::notFinite("counts");
    std::fill(out, out + p.size(), 0);
    for (uint32_t o : local_.drawOutcomes(p, local_.shots())) ++out[o];
}

// ---- observables ------------------------------------------------------------------------
std::vector<int64_t> DistributedDevice::termWires(const ObsTerm &t) const {
    std::vector<int64_t> w;
    for (const auto &f : t.factors) w.insert(w.end(), f.wires.begin(), f.wires.end());
    return w;
}

ObsTerm DistributedDevice::localTerm(const ObsTerm &t) {
    ObsTerm out = t;
    for (auto &f : out.factors)
        for (auto &w : f.wires) w = phys_[size_t(w)] - k_;
    return out;
}

void DistributedDevice::sampleTerm(const ObsTerm &term, double &mean, double *var) {
    // As StateVectorDevice::sampleTerm, on the shard: the term's wires are made local, a
    // copy is rotated to the term's eigenbasis, and its probabilities are reduced.
    if (isIdentityTerm(term)) {
        mean = term.coeff;
        if (var) *var = 0;
        return;
    }
    const std::vector<int64_t> all = termWires(term);
    makeLocal(all.data(), all.size());
    const ObsTerm t = localTerm(term);
    StateBuffer rotated(sv(), sv() + localSize());
    const TermBasis basis = rotateToEigenbasis(t, rotated.data(), L_);
    const int k = int(basis.wires.size());
    std::vector<double> p(size_t(1) << k);
    marginalProbs(rotated.data(), L_, basis.wires.data(), k, p.data());
    allSum(p.data(), p.size());
    if (!finiteDistribution(p)) {
        mean = std::numeric_limits<double>::quiet_NaN();
        if (var) *var = mean;
        return;
    }
    termMoments(basis, local_.drawOutcomes(p, local_.shots()), t.coeff, mean, var);
}

double DistributedDevice::expval(const Observable &obs) {
    double total = 0;
    if (local_.shots() > 0) {
        for (const auto &t : obs.terms) {
            double m;
            sampleTerm(t, m, nullptr);
            total += m;
        }
        return total;
    }
    // term by term (as expvalAnalytic sums them): each term's wires local, this rank's part
    for (const auto &t : obs.terms) {
        const std::vector<int64_t> w = termWires(t);
        makeLocal(w.data(), w.size());
        Observable one;
        one.terms.push_back(localTerm(t));
        total += expvalAnalytic(one, sv(), L_);
    }
    allSum(&total, 1);
    return total;
}

double DistributedDevice::var(const Observable &obs) {
    if (local_.shots() > 0 && !obs.terms.empty()) { // a sum: as one term (TermSampling.hpp)
        double m, v;
        sampleTerm(obs.terms.size() == 1 ? obs.terms[0] : combinedTerm(obs), m, &v);
        return v;
    }
    std::vector<int64_t> all;
    for (const auto &t : obs.terms)
        for (int64_t w : termWires(t))
            if (std::find(all.begin(), all.end(), w) == all.end()) all.push_back(w);
    makeLocal(all.data(), all.size());
    Observable local;
    for (const auto &t : obs.terms) local.terms.push_back(localTerm(t));
    PauliMasks pm;
    if (local.terms.size() == 1 && pauliMasks(local.terms[0], L_, pm)) { // P^2 = I
        const double c = local.terms[0].coeff;
        double e = pauliExpval(sv(), localSize(), pm.x, pm.y, pm.z);
        allSum(&e, 1);
        return c * c * (1.0 - e * e);
    }
    StateBuffer opsi(localSize()), scratch(needsScratch(local, L_) ? localSize() : 0);
    applyObservable(local, sv(), opsi.data(), scratch.data(), L_);
    double parts[2] = {innerProduct(sv(), opsi.data(), localSize()).real(), norm2(opsi.data(), localSize())};
    allSum(parts, 2);
    return parts[1] - parts[0] * parts[0];
}

} // namespace cf

// ---- the entry points DistributedLoader.cpp looks up ---------------------------------------
namespace {
void finalizeMpi() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

bool initMpi(char *err, size_t len) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return true;
    int provided = 0;
    // the runtime calls MPI from one thread at a time (the thread that runs the program)
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        std::snprintf(err, len, "MPI_Init_thread failed");
        return false;
    }
    std::atexit(finalizeMpi);
    return true;
}
} // namespace

extern "C" __attribute__((visibility("default"))) cf::QuantumDevice *
cf_mpi_make_device(int numQubits, int64_t shots, int64_t seed, char *err, size_t len) {
    if (!initMpi(err, len)) return nullptr;
    try {
        return new cf::DistributedDevice(numQubits, shots, seed, MPI_COMM_WORLD);
    } catch (const std::exception &e) {
        std::snprintf(err, len, "%s", e.what());
        return nullptr;
    }
}

extern "C" __attribute__((visibility("default"))) int cf_mpi_info(int *rank, int *size, char *err,
                                                                  size_t len) {
    if (!initMpi(err, len)) return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 1;
}

extern "C" __attribute__((visibility("default"))) void cf_mpi_abort(const char *message) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) return;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "[cofactor rank %d] %s\n", rank, message);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

extern "C" __attribute__((visibility("default"))) uint64_t cf_mpi_bytes_sent() {
    return cf::exchangedBytes.load();
}
