//===- FuseLoops.cpp - adjacent elementwise loops as one loop --------------===//
//
// `--cofactor-fuse-loops`. The frontend emits one `scf.for` per numpy operation
// (tracing/elementwise.py, reductions, linalg), each writing a temporary buffer that
// the next one reads at the same index: `sum(tanh(W @ x)**2)` is a matrix-vector
// loop, a tanh loop, a square loop and a sum loop with three buffers between them.
// Every later stage pays for each loop (Enzyme analyses and reverses it, O2 and code
// generation compile it forwards and backwards), so this pass merges such loops and
// then the buffers between them (there, the tanh, square and sum loops become one):
//
// 1. Two loops of one block, `A` then `B`, with the same bounds and step and nothing
//    but pure arith/math ops between them, become one loop (A's body, then B's, per
//    iteration) when that cannot reorder two accesses of which one writes (below).
//    A must have no results (it communicates through memory); B may (a reduction).
// 2. In a block, a load of a private buffer (below) at the same index values as an
//    earlier store to it, with no store to that buffer in between, becomes the stored
//    value; a private buffer nobody loads any more goes (its stores, dealloc, alloc).
//
// Legality of 1. Fusion runs iteration i of A before iteration i of B, but now after
// iteration j < i of B. That matters only for a memref one loop writes and the other
// accesses. A *private buffer* is a `memref.alloc`/`alloca` used by loads, stores (as
// the memref) and deallocs only, so no other value aliases it; for such a buffer
// fusion is legal when every access of it in both loops has the loop's induction
// variable at one index position (iteration i of either loop touches the slice i of
// that position only: y[i], or y[i, 0], or y[k, i] in loops over i inside a loop over
// k). A written memref that is not private (an argument, a global) might alias
// anything, so the other loop must then access private buffers only. Loop bodies may hold pure
// arith and math ops, `memref.load` and `memref.store`, and nothing else (no calls,
// no quantum ops, no views); anything else keeps the loops apart.
//
// No nested loops: fusing the rows of a matrix-vector product with the tanh of each
// row moved the tanh's derivative (a division by cosh^2, with Enzyme's fast-math
// flags) next to the reverse of the inner loop, where InstCombine sank the division
// into it (`(a / b) * x[j]` -> `(a * x[j]) / b`): one division per element, and the
// gradient of tanh(W x) at W 128 took 1.33x as long. Between loops of one depth
// every value stays at its depth, as it was in memory before.
//
//===----------------------------------------------------------------------===//

#include "cofactor/Transforms/Passes.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace {

/// An op that computes on values only: arith or math, no memory effect, no region.
bool isPureArithmetic(Operation *op) {
  Dialect *dialect = op->getDialect();
  return dialect && isa<arith::ArithmeticDialect, math::MathDialect>(dialect) &&
         op->getNumRegions() == 0 && MemoryEffectOpInterface::hasNoEffect(op);
}

/// A memref.alloc/alloca whose every use is a load or store through it or its
/// dealloc: no other value can alias it.
bool isPrivateBuffer(Value memref) {
  Operation *def = memref.getDefiningOp();
  if (!def || !isa<memref::AllocOp, memref::AllocaOp>(def))
    return false;
  return llvm::all_of(memref.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto load = dyn_cast<memref::LoadOp>(user))
      return use.get() == load.getMemRef() && use.getOperandNumber() == 0;
    if (auto store = dyn_cast<memref::StoreOp>(user))
      return use.getOperandNumber() == 1;
    return isa<memref::DeallocOp>(user);
  });
}

/// The same index value: one SSA value, or two equal constants.
bool sameIndex(Value a, Value b) {
  if (a == b)
    return true;
  llvm::APInt x, y;
  return matchPattern(a, m_ConstantInt(&x)) &&
         matchPattern(b, m_ConstantInt(&y)) && x == y;
}

/// The memory accesses of one loop.
struct LoopAccesses {
  llvm::SmallVector<Operation *> accesses; // memref.load and memref.store
  llvm::SmallDenseSet<Value> read, written;
};

/// Collects the accesses of `loop`'s body, or fails when it holds an op other than
/// pure arithmetic, loads and stores (a nested loop among them: see the file comment).
bool collectAccesses(scf::ForOp loop, LoopAccesses &result) {
  WalkResult walk = loop.getBody()->walk([&](Operation *op) {
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      result.read.insert(load.getMemRef());
      result.accesses.push_back(op);
    } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
      result.written.insert(store.getMemRef());
      result.accesses.push_back(op);
    } else if (!isa<scf::YieldOp>(op) && !isPureArithmetic(op)) {
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

Value accessedMemRef(Operation *access) {
  if (auto load = dyn_cast<memref::LoadOp>(access))
    return load.getMemRef();
  return cast<memref::StoreOp>(access).getMemRef();
}

ValueRange accessIndices(Operation *access) {
  if (auto load = dyn_cast<memref::LoadOp>(access))
    return load.getIndices();
  return cast<memref::StoreOp>(access).getIndices();
}

/// Narrows `positions` (index positions of `memref`) to those where every access of
/// `memref` in `loop` has the loop's induction variable.
void narrowToInductionPositions(Value memref, scf::ForOp loop,
                                const LoopAccesses &accesses,
                                llvm::SmallVectorImpl<bool> &positions) {
  for (Operation *access : accesses.accesses) {
    if (accessedMemRef(access) != memref)
      continue;
    for (auto it : llvm::enumerate(accessIndices(access)))
      if (it.value() != loop.getInductionVar())
        positions[it.index()] = false;
  }
}

/// Whether one index position of `memref` holds the induction variable in every
/// access of it in both loops: then iteration i of either loop touches the slice i
/// of that position only.
bool accessedPerIteration(Value memref, scf::ForOp first, const LoopAccesses &a,
                          scf::ForOp second, const LoopAccesses &b) {
  int64_t rank = memref.getType().cast<MemRefType>().getRank();
  llvm::SmallVector<bool> positions(rank, true);
  narrowToInductionPositions(memref, first, a, positions);
  narrowToInductionPositions(memref, second, b, positions);
  return llvm::is_contained(positions, true);
}

/// Whether running iteration i of `first` and then iteration i of `second`, for
/// each i in turn, keeps the order of every two accesses of which one writes (see
/// the file comment).
bool fusionKeepsDependences(scf::ForOp first, const LoopAccesses &a,
                            scf::ForOp second, const LoopAccesses &b) {
  auto onlyPrivate = [](const LoopAccesses &accesses) {
    return llvm::all_of(accesses.read, isPrivateBuffer) &&
           llvm::all_of(accesses.written, isPrivateBuffer);
  };
  auto checkWrites = [&](const LoopAccesses &writer, const LoopAccesses &other) {
    for (Value memref : writer.written) {
      if (!isPrivateBuffer(memref)) {
        if (!onlyPrivate(other))
          return false;
        continue;
      }
      if (!other.read.contains(memref) && !other.written.contains(memref))
        continue;
      if (!accessedPerIteration(memref, first, a, second, b))
        return false;
    }
    return true;
  };
  return checkWrites(a, b) && checkWrites(b, a);
}

bool sameIterations(scf::ForOp a, scf::ForOp b) {
  return sameIndex(a.getLowerBound(), b.getLowerBound()) &&
         sameIndex(a.getUpperBound(), b.getUpperBound()) &&
         sameIndex(a.getStep(), b.getStep());
}

/// Fuses `first` into `second` (first's body runs first in each iteration) when
/// legal; `between` are the pure ops between them, moved before `first`.
bool tryFuse(scf::ForOp first, scf::ForOp second,
             llvm::ArrayRef<Operation *> between) {
  if (first.getNumResults() != 0 || !sameIterations(first, second))
    return false;
  LoopAccesses a, b;
  if (!collectAccesses(first, a) || !collectAccesses(second, b) ||
      !fusionKeepsDependences(first, a, second, b))
    return false;
  for (Operation *op : between)
    op->moveBefore(first);
  Block *from = first.getBody();
  from->getArgument(0).replaceAllUsesWith(second.getInductionVar());
  from->getTerminator()->erase();
  Block *into = second.getBody();
  into->getOperations().splice(into->begin(), from->getOperations());
  first.erase();
  return true;
}

/// Whether `op` (or an op nested in it) stores into `memref`.
bool storesInto(Operation *op, Value memref) {
  WalkResult walk = op->walk([&](memref::StoreOp store) {
    return store.getMemRef() == memref ? WalkResult::interrupt()
                                       : WalkResult::advance();
  });
  return walk.wasInterrupted();
}

/// Step 2 of the file comment in one block: loads of private buffers that an earlier
/// store of the block answers.
void forwardStores(Block &block) {
  for (Operation &op : block) {
    auto store = dyn_cast<memref::StoreOp>(&op);
    if (!store || !isPrivateBuffer(store.getMemRef()))
      continue;
    Value memref = store.getMemRef();
    for (Operation *next = op.getNextNode(); next; next = next->getNextNode()) {
      if (auto load = dyn_cast<memref::LoadOp>(next)) {
        if (load.getMemRef() == memref &&
            llvm::all_of(llvm::zip(load.getIndices(), store.getIndices()),
                         [](auto pair) {
                           return sameIndex(std::get<0>(pair), std::get<1>(pair));
                         })) {
          load.getResult().replaceAllUsesWith(store.getValueToStore());
          // The load is erased with the other dead ops below (it may be `next`).
        }
        continue;
      }
      if (isa<memref::DeallocOp>(next) || storesInto(next, memref))
        break;
    }
  }
  for (Operation &op : llvm::make_early_inc_range(block))
    if (auto load = dyn_cast<memref::LoadOp>(&op); load && load->use_empty())
      load.erase();
}

/// Removes private buffers that are stored into but never loaded.
void removeUnreadBuffers(func::FuncOp function) {
  llvm::SmallVector<Operation *> buffers;
  function.walk([&](Operation *op) {
    if (isa<memref::AllocOp, memref::AllocaOp>(op) &&
        isPrivateBuffer(op->getResult(0)))
      buffers.push_back(op);
  });
  for (Operation *buffer : buffers) {
    Value memref = buffer->getResult(0);
    if (llvm::any_of(memref.getUsers(),
                     [](Operation *user) { return isa<memref::LoadOp>(user); }))
      continue;
    for (Operation *user : llvm::make_early_inc_range(memref.getUsers()))
      user->erase();
    buffer->erase();
  }
}

/// Fuses the loops of `block` and of the blocks nested in it (loops of one depth
/// inside an outer loop's body, say).
void fuseInBlock(Block &block) {
  for (Operation &op : block)
    for (Region &region : op.getRegions())
      for (Block &inner : region)
        fuseInBlock(inner);
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : block) {
      auto second = dyn_cast<scf::ForOp>(&op);
      if (!second)
        continue;
      llvm::SmallVector<Operation *> between;
      Operation *prev = op.getPrevNode();
      while (prev && isPureArithmetic(prev)) {
        between.push_back(prev);
        prev = prev->getPrevNode();
      }
      auto first = dyn_cast_or_null<scf::ForOp>(prev);
      if (!first)
        continue;
      std::reverse(between.begin(), between.end());
      if (tryFuse(first, second, between)) {
        forwardStores(*second.getBody());
        changed = true;
        break;
      }
    }
  }
}

struct FuseLoopsPass
    : public PassWrapper<FuseLoopsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FuseLoopsPass)

  StringRef getArgument() const final { return "cofactor-fuse-loops"; }
  StringRef getDescription() const final {
    return "Fuse adjacent elementwise scf.for loops and forward the buffers "
           "between them";
  }

  void runOnOperation() final {
    getOperation().walk([](func::FuncOp function) {
      for (Block &block : function.getBody())
        fuseInBlock(block);
      removeUnreadBuffers(function);
    });
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createFuseLoopsPass() {
  return std::make_unique<FuseLoopsPass>();
}

void cofactor::registerFuseLoopsPass() { PassRegistration<FuseLoopsPass>(); }
