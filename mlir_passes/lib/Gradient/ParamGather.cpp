//===- ParamGather.cpp - gate parameters gathered by loops ----------------===//
//
// Part of --cofactor-split-qnodes (ParamGather.h).
//
//===----------------------------------------------------------------------===//

#include "ParamGather.h"

#include "cofactor/Utils/ConstantIndex.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace cofactor;

namespace {

/// Groups shorter than this stay scalar copies.
constexpr size_t kMinGather = 8;

/// `params[k] = input[...]` with a constant k, in the entry block.
struct ParamCopy {
  memref::StoreOp store;
  memref::LoadOp load;
  int64_t number;
  int64_t linear;
};

/// Replaces one group of copies (consecutive numbers, linear positions
/// `first.linear + t * stride`) by an `scf.for` after the group's last store.
void emitGather(ArrayRef<ParamCopy> group, int64_t stride, Value params) {
  Operation *last = group.front().store;
  for (const ParamCopy &copy : group)
    if (last->isBeforeInBlock(copy.store))
      last = copy.store;
  Location loc = last->getLoc();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  memref::LoadOp firstLoad = group.front().load;
  Value source = firstLoad.getMemRef();
  MemRefType type = source.getType().cast<MemRefType>();
  Value lower = b.create<arith::ConstantIndexOp>(loc, 0);
  Value upper = b.create<arith::ConstantIndexOp>(loc, group.size());
  Value one = b.create<arith::ConstantIndexOp>(loc, 1);
  auto loop = b.create<scf::ForOp>(loc, lower, upper, one);
  b.setInsertionPointToStart(loop.getBody());
  Value t = loop.getInductionVar();
  // position = first + t * stride (stride may be negative), delinearized.
  Value position = t;
  if (stride != 1)
    position = b.create<arith::MulIOp>(
        loc, t, b.create<arith::ConstantIndexOp>(loc, stride));
  if (group.front().linear != 0)
    position = b.create<arith::AddIOp>(
        loc, position,
        b.create<arith::ConstantIndexOp>(loc, group.front().linear));
  SmallVector<Value> indices(type.getRank());
  for (int64_t d = type.getRank() - 1; d >= 0; --d) {
    if (d == 0) {
      indices[d] = position;
      break;
    }
    Value dim = b.create<arith::ConstantIndexOp>(loc, type.getDimSize(d));
    indices[d] = b.create<arith::RemUIOp>(loc, position, dim);
    position = b.create<arith::DivUIOp>(loc, position, dim);
  }
  Value value = b.create<memref::LoadOp>(loc, source, indices);
  Value number = t;
  if (group.front().number != 0)
    number = b.create<arith::AddIOp>(
        loc, t, b.create<arith::ConstantIndexOp>(loc, group.front().number));
  b.create<memref::StoreOp>(loc, value, params, number);
  // Then the copies, the loads only they used, and the constants only those
  // used (one constant may index several dimensions: a set).
  llvm::SetVector<Operation *> constants;
  auto noteConstant = [&](Value value) {
    if (auto c = value.getDefiningOp<arith::ConstantOp>())
      constants.insert(c);
  };
  for (const ParamCopy &copy : group) {
    memref::LoadOp load = copy.load;
    memref::StoreOp store = copy.store;
    noteConstant(store.getIndices()[0]);
    store->erase();
    if (load->use_empty()) {
      for (Value index : load.getIndices())
        noteConstant(index);
      load->erase();
    }
  }
  for (Operation *c : constants)
    if (c->use_empty())
      c->erase();
}

/// True when `buffer`, a memref allocated in the entry block `entry`, is not
/// written between `first` (the group's earliest load) and `last` (where the
/// loop goes): every user but its loads sits (through its ancestor in `entry`)
/// before `first` or after `last`, and none makes an alias of it.
bool settledBetween(Value buffer, Block &entry, Operation *first,
                    Operation *last) {
  for (Operation *user : buffer.getUsers()) {
    if (isa<memref::LoadOp>(user))
      continue;
    if (llvm::any_of(user->getResultTypes(),
                     [](Type t) { return t.isa<BaseMemRefType>(); }))
      return false; // a view: writes through it are not visible here
    Operation *top = entry.findAncestorOpInBlock(*user);
    if (!top || !(top->isBeforeInBlock(first) || last->isBeforeInBlock(top)))
      return false;
  }
  return true;
}

} // namespace

llvm::SmallPtrSet<Value, 4> cofactor::readOnlyInputs(func::FuncOp fn,
                                                     unsigned numInputs) {
  llvm::SmallPtrSet<Value, 4> inputs;
  for (BlockArgument arg : fn.getArguments().take_front(numInputs))
    if (llvm::all_of(arg.getUsers(), [](Operation *user) {
          return isa<memref::LoadOp, memref::DimOp>(user);
        }))
      inputs.insert(arg);
  return inputs;
}

void cofactor::gatherParameterCopies(
    func::FuncOp fn, Value params,
    const llvm::SmallPtrSetImpl<Value> &readOnly) {
  Block &entry = fn.getBody().front();
  auto isLocalBuffer = [&](Value buffer) {
    Operation *def = buffer.getDefiningOp();
    return def && def->getBlock() == &entry &&
           isa<memref::AllocOp, memref::AllocaOp>(def);
  };
  SmallVector<ParamCopy> copies;
  for (Operation &op : entry) {
    auto store = dyn_cast<memref::StoreOp>(op);
    if (!store || store.getMemRef() != params)
      continue;
    APInt number;
    if (!matchPattern(store.getIndices()[0], m_ConstantInt(&number)))
      continue;
    auto load = store.getValue().getDefiningOp<memref::LoadOp>();
    if (!load || load->getBlock() != &entry ||
        !(readOnly.contains(load.getMemRef()) ||
          isLocalBuffer(load.getMemRef())))
      continue;
    if (Optional<int64_t> linear = constantLinearIndex(load))
      copies.push_back({store, load, number.getSExtValue(), *linear});
  }
  llvm::sort(copies, [](const ParamCopy &a, const ParamCopy &b) {
    return a.number < b.number;
  });
  auto settled = [&](ArrayRef<ParamCopy> group) {
    Value source = ParamCopy(group.front()).load.getMemRef();
    if (readOnly.contains(source))
      return true;
    Operation *first = group.front().load;
    Operation *last = group.front().store;
    for (const ParamCopy &copy : group) {
      if (copy.load->isBeforeInBlock(first))
        first = copy.load;
      if (last->isBeforeInBlock(copy.store))
        last = copy.store;
    }
    return settledBetween(source, entry, first, last);
  };
  for (size_t i = 0; i < copies.size();) {
    ParamCopy first = copies[i];
    size_t j = i + 1;
    int64_t stride = 0;
    if (j < copies.size() &&
        copies[j].load.getMemRef() == first.load.getMemRef())
      stride = copies[j].linear - first.linear;
    while (stride != 0 && j < copies.size() &&
           copies[j].load.getMemRef() == first.load.getMemRef() &&
           copies[j].number == first.number + int64_t(j - i) &&
           copies[j].linear == first.linear + int64_t(j - i) * stride)
      ++j;
    if (stride == 0)
      j = i + 1;
    ArrayRef<ParamCopy> group = ArrayRef<ParamCopy>(copies).slice(i, j - i);
    if (group.size() >= kMinGather && settled(group))
      emitGather(group, stride, params);
    i = j;
  }
}
