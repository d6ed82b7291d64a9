// Gate fusion in the adjoint Jacobian's backward pass (AdjointJacobian.cpp).
//
// Walking the tape back, every operation U_k costs a pass over phi and one over each lambda
// (a parametrised gate: one fused sweep over both, AdjointKernels.inc). As in the forward
// fuser (GateFusion.hpp), operations are gathered into blocks on pairwise disjoint wire
// sets W; a block of the operations g_1 .. g_m (in backward order) is one pass per state:
//   - without trainable operations, on at most maxQubits wires: A = g_m^dagger ... g_1^dagger
//     applied to phi and to each lambda by the forward fuser's kernels (fusion::applyMatrix);
//   - with trainable ones, on one wire (RZ RY RZ, Rot, a rotation with H, S or T around
//     it): its derivatives are <lambda_(i-1)| dg_i |phi_i> = <lambda| G_i |phi> with phi,
//     lambda as they are before the block and G_i = A_(i-1)^dagger dg_i A_i (A_i = g_i^dagger
//     ... g_1^dagger), a 2x2 matrix on the block's wire.
// A trainable block is held until something on more wires needs its wire (or the walk
// ends). Then the sweep takes the derivatives of every pending trainable block at once: the
// blocks are on distinct wires and the states are the same for all, so one read-only pass
// over phi and each lambda computes the 2x2 cross sums S_rc = sum conj(lambda_r) phi_c of
// all their wires (crossSums, CrossSums.inc) and each derivative is sum_rc (G_i)_rc S_rc.
// The blocks are constant after that and join the others (in StronglyEntanglingLayers: a
// layer's Rot blocks merge with the previous layer's CNOTs into the 2-wire blocks the
// forward pass also has). With fewer than minSweep pending blocks, each takes one sweep of
// the unfused step's one-wire kernel instead (adjointStep with A and the G_i A^dagger).
//
// Cost, SEL at 16 wires, per layer and lambda: the one-wire kernel's sweeps did 6 complex
// multiply-adds per amplitude and wire (A on phi and lambda, the four sums) and a read and
// write of both states per wire; the layer sweep does 1.5 per amplitude and wire (three
// sums per pair of amplitudes: S_01, S_10, S_11; S_00 from the total), reads both states
// once, and A costs what the forward pass pays for it. Measured (one thread, CPU time,
// medians of 60-100 calls, alternated runs on the loaded 2-core machine): SEL n=16, 4
// layers, the compiled gradient with the one-wire kernel's sweeps / the layer sweep
// (COFACTOR_ADJOINT_SWEEP_WIRES=0 / 2, same build, load average ~4): 10.9, 11.0, 10.2 /
// 8.1, 8.1, 8.0 ms against a 2.0-2.3 ms forward. Through the C ABI (forward + expval, then
// the adjoint Jacobian), main a10b478 / this walk with the spare buffers and 3-wire backward
// blocks (load average 4.7): adjoint 11.8, 11.6, 11.8 / 7.9, 7.8, 7.7 ms next to a 3.2-3.4 ms
// forward, (forward + adjoint) / forward 4.50-4.63 / 3.39-3.44. At n=20 (load 5, same
// build, sweep off / on): adjoint 255, 239 / 185, 217 ms next to a 67-80 ms forward.
// Trainable operations on several wires take their unfused step. (Blocks of 2-3 wires with
// trainable operations were tried: one sweep with the D x D sums conj(lambda_r) phi_c, or
// replaying the block's operations in registers; both cost more arithmetic than the passes
// they saved and were slower than the unfused steps for StronglyEntanglingLayers at 16 and
// 20 wires.) The derivatives stay exact: only the order of floating-point operations changes.
// Also tried, without a gain (SEL 4 layers, one thread, CPU time, medians of 40-60 calls
// alternating the variants within one process, load average ~3.3; main 5b9ed2f): the last
// layer's CNOT ring (the walk's first 16 operations: one basis permutation, linear over
// GF(2)) as one gathering pass per state into a scratch state and a copy back, instead of
// 16 CNOT passes: n = 16 10.53 / 10.60 ms (one pass / CNOTs), n = 20 362 / 340 ms (the CNOT
// kernel moves contiguous runs; the gather is scalar and the scratch is a third state);
// blocks with a wire on bit 0 or 1 (the fused gather kernel's) capped at 2 wires: 8.05 /
// 8.12 ms; backward blocks of 2 / 4 wires: 10.9 / 12.4 ms against 10.35 ms at 3.
//
// Why reordering is allowed: blocks on disjoint wires commute, and moving the step of an
// operation h past the step of a trainable g on other wires changes neither phi, lambda
// nor <lambda| dg |phi> (h is applied to both sides and commutes with dg); for the same
// reason a held block's derivatives may be taken after steps on other wires. A block that
// is still pending when the walk ends holds only operations whose steps can be moved to the
// very end: a block without trainable operations is dropped, the last one applied need not
// update lambda. The walk ends at the first trainable operation of the tape (the ones
// before it change no derivative).
//
// State by state: the constant steps (blocks without derivatives to take, lone constant
// operations) between two points where derivatives are taken wait in a queue, which is then
// applied to phi alone, step after step, and then to each lambda. Walking phi and lambda
// in lockstep, every step read and wrote both states: at 20 wires two states (32 MiB) are
// the whole last-level cache, while one state's consecutive passes find it there. The
// steps still queued when the walk ends are not applied (nothing reads the states then).
// Within a state, consecutive queued steps whose wires all lie on the low chunkQubits bits
// form a group that is applied chunk by chunk (each chunk of 2^chunkQubits amplitudes
// takes every step of the group while it is in L2): one pass over the state for the group
// instead of one per step. A step on a high bit that shares no wire with the group is
// applied at once, before the group (they commute); one that shares a wire applies the
// group first. With fusion off (maxQubits 0) every operation is a step of its own and
// queues the same way. The chunks are independent: the thread pool takes them (bitwise the same
// with any thread count); the pass over them is the forward fuser's tile pass (TileSweep.hpp). At n = 20 (chunks of 2^15, wires 0-4 high) SEL's three queues
// hold 11, 10 and 10 steps per state, of which 3, 5 and 6 form the low group.
// Measured (SEL 4 layers, n = 20, one thread, CPU time, C ABI: forward + expval, then the
// adjoint; medians of 8-12 calls alternating the builds in one process, load average 5-8 on
// 2 cores): adjoint 151, 154 ms (lockstep, before) / 124, 129 ms (state by state with the
// chunked groups); state by state without chunks: 165 ms next to 174 ms before. Compiled
// qjit(grad) / qjit forward, alternating processes: 3.68, 3.73, 3.85x / 3.18, 3.38, 3.24x.
// Tried and not kept: chunks gathered from strided runs, so that groups take steps on the
// high wires too (a chunk = the low b - h bits and h high bits, copied to a scratch chunk
// and back): 142 ms next to 122 ms (contiguous only) with up to h = 11 (runs of 16
// amplitudes), 157 next to 145 ms with h <= 5; wider backward blocks
// (COFACTOR_ADJOINT_FUSION_QUBITS=4): 151 next to 120 ms;
// chunks of 2^14, 2^16, 2^17: 149, 154, 152 ms next to 148 ms at 2^15 (noise).
//
// Product prefix: a tape that starts from |0...0> with one-wire gates (StronglyEntangling-
// Layers: the first layer's Rot on every wire) has phi = their product state where the walk
// takes their derivatives, and the forward fuser's product-state writer makes it in one
// write pass (writeProductState). So at the first flush after the walk reached those gates,
// when every later operation's step is queued or taken (none still pending in a block) and
// none of theirs is, phi is written instead of taking the queued steps (lambda takes them as
// always). SEL n = 20: the last segment's 10 queued steps cost phi 4 whole passes and one
// chunked pass. Only the order of rounding changes. Measured (SEL 4 layers, n = 20, one
// thread, CPU time, C ABI forward + expval then the adjoint, 15 calls alternating the
// builds in one process, load 6-9 on 2 cores): adjoint 116 [100, 131] ms without /
// 103 [97, 120] ms with it (medians [min, max]); with the spare buffers of
// AdjointJacobian.cpp too, against the session-11 runtime: 151 [132, 252] / 128 [102, 150]
// ms. Compiled qjit(grad) / qjit forward, alternating processes, 9 calls each: 4.08, 4.14,
// 4.12x / 3.67, 3.67, 3.71x (gradient 155-167 / 135-137 ms).
//
// Product sweep: phi at that point need not be written at all when a sweep is all that reads
// it there (StronglyEntanglingLayers: the first layer's derivatives, the walk's last sweep):
// phi = v_w on wire w times the rest, so the cross sums S_rc = v_c T_r follow from the
// diagonal ones, S_01 = (v_1 / v_0) S_00 and S_10 = (v_0 / v_1) S_11, and the diagonal sums
// of conj(lambda_i) phi_i over the amplitudes with w's bit set take one read of lambda, phi_i
// made from the product's two tables (productSums, CrossSums.inc), for all wires at once.
// The write of phi waits (writePendingPhi) until a step, an unfused step or a cross-sums
// sweep needs it; a swept wire with a factor component under 1e-3 (the division would scale
// the rounding errors by its inverse: a gate that leaves the wire at or near |0> or |1>)
// takes the cross sums after the write. Measured (SEL 4 layers, n = 20, one thread, CPU
// time, C ABI forward + expval then the adjoint, medians of 6 calls alternating with /
// without it in one process, 3 processes, load 7 on 2 cores): adjoint 60.2, 60.7, 59.3 /
// 66.9, 66.4, 64.3 ms (the last sweep 1.8-2.5 ms against 6.4-7.8 ms of cross sums and
// 0.7-1.3 ms writing phi), next to a 23 ms forward. COFACTOR_ADJOINT_PRODUCT_SWEEP=0: off.
// Also tried, without a gain: the cross sums of wires on bits 14 and up in separate passes
// over groups of 2^14 amplitudes (the 2^(n-14) runs of 2^(14-k) amplitudes that differ in k
// such bits: one read of both states per window of 7 wires, where the tile pass reads a
// partner tile per pair of such wires): SEL n = 20, alternating in one process: adjoint
// 59.8 ms without, 62.0 / 70.3 / 59.1 / 61.3 ms with groups of 2^14 / 2^12 / 2^16 / 2^17
// (the sweeps are bound by their multiply-adds, 1.5 per wire and amplitude, and the
// partner tiles mostly come from L3).
//
// Anti-Hermitian sums: every derivative matrix G of a sweep is A^dagger (dg g^dagger) A for a
// unitary family g, so anti-Hermitian (G_10 = -conj G_01, G_00 and G_11 imaginary), and
// Re sum_rc G_rc S_rc = Re(G_01 C) - Im G_00 (Im total - D) - Im G_11 D needs only
// C = S_01 - conj(S_10) and D = Im S_11 (antiHermitianSums, CrossSums.inc): 19 FMAs per quad
// of vectors (two wires) where the full sums take 22, 5 per pair where they take 6, one for
// the total instead of two. A G whose Hermitian part exceeds 1e-13 of it takes the full
// sums. Measured (SEL 4 layers, n = 20, one thread, CPU time of the compiled qjit(grad),
// medians of 8-10 calls alternating with COFACTOR_ADJOINT_ANTIHERMITIAN_SUMS=0 in one
// process, load 6-9 on 2 cores): 61.2 / 63.3 ms and 60.6 / 62.5 ms next to an 18 ms forward.
//
// A block of one operation takes the unfused step (the specialised kernels); operations
// that are not fused (PauliRot, GlobalPhase, more than maxQubits wires, trainable ones on
// several wires) first apply the blocks they overlap.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_set>
#include <vector>

#include "QuantumDevice.hpp"
#include "StateVector.hpp"

namespace cf {

constexpr int kMinSweepWires = 2; // the default of AdjointFuser's minSweep
// The narrowest backward blocks when the forward pass fuses narrower (2 wires at 16-18
// qubits): with the trainable blocks constant after their sweep, 3-wire blocks take in more
// of the CNOTs that would otherwise each be a pass over phi and each lambda. Measured (C ABI
// adjoint, SEL 4 layers, one thread, CPU time, load average ~4 on 2 cores, alternated runs),
// 2 / 3 wires: n = 16 5.4, 5.2 / 5.0, 4.8 ms; n = 17 14.0, 13.7 / 11.4, 11.8 ms; n = 18
// 30.2, 32.5 / 30.9, 26.0 ms (4 wires at 16: 8.4 ms, the compiled gradient).
constexpr int kAdjointFusionQubits = 3;
// Consecutive queued steps on the low bits are applied chunk by chunk: 2^15 amplitudes
// (512 KiB) stay in L2 while all of the group's steps pass over them.
constexpr int kAdjointChunkQubits = 15;

class AdjointFuser {
  public:
    // The states and the Jacobian cells one walk updates. single(op, undoLambda, derivatives)
    // takes the unfused step of op (derivatives: with op's derivatives, else only undoing it);
    // record(op, j, b, value) stores d<O_b>/d(param j of op).
    struct Walk {
        int n;
        cplx *phi;
        std::vector<cplx *> lambdas;
        std::function<void(const Operation &, bool, bool)> single;
        std::function<void(const Operation &, int, size_t, double)> record;
    };

    // maxQubits: the widest block (0 or 1: every operation takes the unfused step);
    // minSweep: the fewest pending trainable blocks one sweep takes (0: no sweeps).
    AdjointFuser(Walk walk, int maxQubits, int minSweep);
    // Queued steps on the low `qubits` bits only are applied chunk by chunk of 2^qubits
    // amplitudes (0: never; see above).
    void setChunkQubits(int qubits) { chunkQubits_ = qubits; }
    // Sweeps whose derivative matrices are all anti-Hermitian take antiHermitianSums (fewer
    // multiply-adds) instead of the full cross sums (false: always the full sums).
    void setAntiHermitianSums(bool on) { antiHermitian_ = on; }
    // The tape starts from |0...0> with one-wire gates, the operations before `end` (a
    // pointer into the same tape as add's operations): at the first flush after the walk
    // reached them, phi is their product state, which write(phi) writes in one pass instead
    // of the queued steps' passes over phi (see "Product prefix" above).
    // The product state's tables (writeProductState's tlo, thi, split at bit h) and each
    // wire's 2-vector (factors[2w + b]) let a sweep there take the derivatives from lambda
    // alone, phi unwritten (see "Product sweep" above).
    struct Product {
        int h = 0;
        const cplx *tlo = nullptr, *thi = nullptr;
        std::vector<cplx> factors;
    };
    void setProductPrefix(const Operation *end, std::function<void(cplx *)> write, Product product) {
        prefixEnd_ = end;
        writePhi_ = std::move(write);
        product_ = std::move(product);
    }

    // The next operation walking back (op must stay alive until finish); last: the final
    // one the walk needs (the first trainable operation of the tape).
    void add(const Operation &op, bool last);
    // Applies what is pending (see above); call once, after the last add.
    void finish();

  private:
    using Matrix = std::vector<cplx>; // D x D, row-major
    struct Block {
        std::vector<int64_t> wires;
        std::vector<const Operation *> ops; // in backward order
        bool trainable = false;             // with derivatives still to take
    };
    struct Derivative {
        const Operation *op;
        int j;    // the parameter
        Matrix G; // 2 x 2: the derivative is <lambda| G |phi> before the block
    };
    bool differentiate(const Operation &op) const; // trainable, derivatives not yet taken
    void apply(const Block &b, bool undoLambda);
    void applyConstant(const Block &b, bool undoLambda);
    void applyOneWire(const Block &b, bool undoLambda);
    Matrix oneWire(const Block &b, std::vector<Derivative> &derivs) const;
    void sweep();
    // Constant steps wait in a queue until a derivative needs the states (see above).
    struct Step {
        const Operation *op = nullptr; // applyOperation(inverse) of op, else A on wires
        Matrix A;
        std::vector<int64_t> wires;
        bool undoLambda = true;
    };
    void defer(Step step) { queue_.push_back(std::move(step)); }
    void deferOp(const Operation &op, bool undoLambda);
    void flush(); // every queued step on phi, then every one on each lambda
    void run(const std::vector<Step> &steps, cplx *state, bool lambda) const;

    Walk walk_;
    int maxQubits_, minSweep_;
    int chunkQubits_ = kAdjointChunkQubits;
    bool antiHermitian_ = true;
    std::vector<Block> blocks_;
    std::vector<Step> queue_;

    std::unordered_set<const Operation *> done_; // whose derivatives a sweep took

    bool inPrefix(const Operation *op) const { return prefixEnd_ && op < prefixEnd_; }
    // op's step is queued or taken: an operation after the prefix is no longer open, one of
    // the prefix has touched phi (its product state is no longer where phi is)
    void handled(const Operation *op) {
        if (inPrefix(op)) prefixTouched_ = true;
        else --open_;
    }
    bool prefixPhi() const { // whether this flush writes phi as the product prefix's state
        return writePhi_ && reachedPrefix_ && !prefixTouched_ && open_ == 0;
    }
    // phi is the product prefix's state, not yet written: writes it (before anything reads
    // or changes phi but a product sweep)
    void writePendingPhi() {
        if (!phiIsProduct_) return;
        writePhi_(walk_.phi);
        writePhi_ = nullptr; // once: the walk goes on from there
        phiIsProduct_ = false;
    }
    bool productSweep(const std::vector<int> &bits, const std::vector<int64_t> &wires,
                      const std::vector<Derivative> &derivs, const std::vector<size_t> &wireOf);
    const Operation *prefixEnd_ = nullptr;
    std::function<void(cplx *)> writePhi_;
    Product product_;
    bool phiIsProduct_ = false;
    bool reachedPrefix_ = false, prefixTouched_ = false;
    int64_t open_ = 0; // operations after the prefix added, their steps neither queued nor taken
};

} // namespace cf
