//===- QNodeParams.cpp - the parameters of a split QNode ------------------===//

#include "QNodeParams.h"
#include "GradientUtils.h"

#include "cofactor/Gradient/Attributes.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace cofactor;

quantum::ObsHamiltonianOp cofactor::diffHamiltonian(Operation *op) {
  auto h = dyn_cast<quantum::ObsHamiltonianOp>(op);
  return h && h->hasAttr(attr::kDiffCoeffs) ? h : nullptr;
}

int64_t cofactor::numParamsOf(Operation *op) {
  if (auto h = diffHamiltonian(op))
    return h.getCoeffs().getType().cast<MemRefType>().getDimSize(0);
  return gateParameters(op).size();
}

ParamCounter::ParamCounter(func::FuncOp fn,
                           std::function<void(OpBuilder &, Value)> onSlot)
    : fn(fn), onSlot(std::move(onSlot)),
      straightLine(fn.getBody().hasOneBlock()) {}

Value ParamCounter::next(OpBuilder &b, Operation *gate, int64_t n) {
  Location loc = gate->getLoc();
  Block &entry = fn.getBody().front();
  Operation *top = straightLine ? entry.findAncestorOpInBlock(*gate) : nullptr;
  if (top == gate) {
    Value first = current(b, loc);
    offset += n;
    return first;
  }
  Value counter = getSlot();
  if (top && top != syncedRegionOp) {
    // First gate inside this region op: hand the number over to the slot
    // before it, take it back after it.
    syncedRegionOp = top;
    OpBuilder before(top);
    before.create<memref::StoreOp>(loc, current(before, loc), counter);
    OpBuilder after(top->getContext());
    after.setInsertionPointAfter(top);
    base = after.create<memref::LoadOp>(loc, counter);
    offset = 0;
  }
  Value first = b.create<memref::LoadOp>(loc, counter);
  Value step = b.create<arith::ConstantIndexOp>(loc, n);
  Value next = b.create<arith::AddIOp>(loc, first, step);
  b.create<memref::StoreOp>(loc, next, counter);
  return first;
}

Value ParamCounter::total(OpBuilder &b, Location loc) {
  if (!straightLine)
    return b.create<memref::LoadOp>(loc, getSlot());
  return current(b, loc);
}

Value ParamCounter::current(OpBuilder &b, Location loc) {
  if (base && offset == 0)
    return base;
  Value c = b.create<arith::ConstantIndexOp>(loc, offset);
  return base ? b.create<arith::AddIOp>(loc, base, c).getResult() : c;
}

Value ParamCounter::getSlot() {
  if (slot)
    return slot;
  OpBuilder b = OpBuilder::atBlockBegin(&fn.getBody().front());
  Location loc = fn.getLoc();
  slot = b.create<memref::AllocaOp>(loc, MemRefType::get({}, b.getIndexType()));
  b.create<memref::StoreOp>(loc, b.create<arith::ConstantIndexOp>(loc, 0),
                            slot);
  if (onSlot)
    onSlot(b, slot);
  return slot;
}

Value cofactor::offsetIndex(OpBuilder &b, Location loc, Value first,
                            int64_t k) {
  if (k == 0)
    return first;
  if (auto c = first.getDefiningOp<arith::ConstantIndexOp>())
    return b.create<arith::ConstantIndexOp>(loc, c.value() + k);
  return b.create<arith::AddIOp>(loc, first,
                                 b.create<arith::ConstantIndexOp>(loc, k));
}
