// The state vector sharded over the ranks of MPI_COMM_WORLD (docs/distributed.md).
//
// With P = 2^k ranks and n qubits, each rank keeps 2^(n-k) amplitudes in a StateVectorDevice
// of L = n - k qubits (its shard, and its random stream). The amplitudes are indexed by
// *physical* qubit positions 0..n-1 (position 0 = most significant bit, as for wires): the k
// first positions are global (they are the bits of the rank), the L others local (position p
// is local wire p - k of the shard). A logical-to-physical map says where each wire is.
// An operation whose wires are all local runs the single-process kernels unchanged on the
// shard; a wire at a global position is first exchanged with a local one (the least recently
// used wire not in the operation): each rank swaps half its shard with the rank that differs
// in that global bit, pairwise (MPI_Sendrecv) in bounded chunks. The map is not restored
// after the operation, so a wire used again stays local. Controls on global positions need no
// exchange: the operation runs on the ranks where the control holds, on the others it is the
// identity.
//
// Every rank runs the same program (SPMD), so every rank takes the same decisions (which
// wires to exchange, the same random draws from the same seed, reduced probabilities made
// bitwise identical by broadcasting rank 0's sum), and every result is identical on all
// ranks.
#pragma once

#include <mpi.h>

#include <atomic>
#include <vector>

#include "../StateVectorDevice.hpp"

namespace cf {

class DistributedDevice final : public QuantumDevice {
  public:
    DistributedDevice(int numQubits, int64_t shots, int64_t seed, MPI_Comm comm);

    int numQubits() const override { return n_; }
    int64_t shots() const override { return local_.shots(); }
    void reset(int64_t shots, int64_t seed) override;
    void resetState() override;

    void apply(const Operation &op) override;
    int measure(int64_t wire, bool reset, int64_t postselect) override;

    double expval(const Observable &obs) override;
    double var(const Observable &obs) override;
    void probs(const int64_t *wires, int k, double *out) override;
    void state(double *out) override;
    void setState(const double *amplitudes) override;
    void sample(const int64_t *wires, int k, int64_t *out) override;
    void counts(const int64_t *wires, int k, int64_t *out) override;

    void adjointJacobian(const std::vector<Operation> &tape, int64_t numParams,
                         const std::vector<const Observable *> &obs, double *jac) override;

  private:
    int rankBit(int pos) const { return (rank_ >> (k_ - 1 - pos)) & 1; }
    uint64_t localSize() const { return uint64_t(1) << L_; }
    cplx *sv() { return local_.data(); }

    // Brings every wire in `wires` to a local position (exchanging global ones).
    void makeLocal(const int64_t *wires, size_t count);
    // Exchanges global position g with local position l on this rank's buffers.
    void swapGlobalLocal(int g, int l);
    // Swaps two local positions (a SWAP gate on the shard).
    void swapLocalLocal(int a, int b);
    // Back to physical = logical for every wire (before gathering the state).
    void restoreIdentity();
    // `op` with its wires made local and renamed to shard wires; false: the operation is the
    // identity on this rank (a control on a global position does not hold here).
    bool localize(const Operation &op, Operation &out);
    // An observable term / observable on local wires, renamed to shard wires.
    ObsTerm localTerm(const ObsTerm &t);
    std::vector<int64_t> termWires(const ObsTerm &t) const;
    // Sums over the ranks, bitwise identical on all of them.
    void allSum(double *values, size_t count);
    // Marginal probabilities of `wires` over the whole state, on every rank.
    void reducedProbs(const int64_t *wires, int k, double *out);
    void sampleTerm(const ObsTerm &t, double &mean, double *var);

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1, k_ = 0, n_, L_;
    StateVectorDevice local_;
    std::vector<int> phys_, logi_; // wire -> position, position -> wire
    std::vector<uint64_t> lastUse_;
    uint64_t clock_ = 0;
    std::vector<cplx *> followers_; // further shards that move with the map (adjoint)
    std::vector<cplx> sendBuf_, recvBuf_;
    Operation scratch_;
};

// Bytes this process has sent in qubit exchanges, all devices together (cf_mpi_bytes_sent,
// for benchmarks).
extern std::atomic<uint64_t> exchangedBytes;

} // namespace cf
