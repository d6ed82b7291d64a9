//===- GateTables.cpp - straight-line gate runs as one table call ---------===//
//
// The record layout is the one cf_rt_gate_table reads (runtime.h):
//   kind, num_params, num_wires, num_ctrls, adjoint, param_offset,
//   wire codes..., control-wire codes..., control values...
//   [for kind -1, a Pauli rotation: the letters of its word]
// with a wire code w >= 0 for a constant wire and -(k + 1) for dyn_wires[k].
// The runtime applies each record through cf_rt_gate (cf_rt_pauli_rot), so
// validation, error messages and the recorded tape are those of the per-gate
// calls.
//
// When every parameter of a run is a load of one f64 memref at constant
// indices (the quantum part of a split QNode reads `params[k]`, k constant),
// the call passes that memref's data and each record's param_offset is the
// element's linear index in it: no per-parameter code at all.
//
//===----------------------------------------------------------------------===//

#include "GateTables.h"

#include "cofactor/Quantum/QuantumOps.h"
#include "cofactor/Quantum/RuntimeTables.h"
#include "cofactor/Utils/ConstantIndex.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace cofactor;
using namespace cofactor::quantum;

namespace {

/// A run is cut at this many parameters or wire values computed at run time, so
/// that the stack buffers stay small (they are rounded up to powers of two and
/// shared by all runs of a function).
constexpr size_t kMaxRunValues = 1024;

/// The record kind of a Pauli rotation (CF_GATE_TABLE_PAULI_ROT in runtime.h),
/// whose record ends with the letters of its word.
constexpr int64_t kPauliRotKind = -1;

/// True when `op` cannot touch the device and may therefore sit between two
/// gates of one run: no regions, not a call, and no memory effect but reads.
bool isTransparent(Operation *op) {
  if (op->getNumRegions() != 0 || isa<CallOpInterface>(op) ||
      isa<QuantumDialect>(op->getDialect()))
    return false;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  return llvm::all_of(instances, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Read>(e.getEffect());
  });
}

/// True when `op` cannot write memory that a load may read: a transparent op, or
/// a quantum op without regions and without memref or pointer operands (gates,
/// measurements, observables on wires: they act on the device only, and the
/// runtime writes no memory that is not passed to it). Between a run's parameter
/// loads and its call only such ops may sit for the call to read the memref
/// itself instead of the loaded values.
bool cannotWriteMemory(Operation *op) {
  if (isTransparent(op))
    return true;
  if (op->getNumRegions() != 0 || !isa<QuantumDialect>(op->getDialect()))
    return false;
  return llvm::none_of(op->getOperandTypes(), [](Type type) {
    return type.isa<BaseMemRefType, LLVM::LLVMPointerType>();
  });
}

/// Builds the table, the buffers and the call of one run.
class TableBuilder {
public:
  TableBuilder(ModuleOp module, LLVMTypeConverter &llvmTypes,
               StackArrays &stackArrays)
      : module(module), llvmTypes(llvmTypes), stackArrays(stackArrays) {}

  /// Where the parameters of a run come from: one memref (null when they do
  /// not) and each parameter's linear index in it.
  struct Source {
    Value memref;
    DenseMap<Value, int64_t> index;
  };
  /// Decided for every run before any is emitted, so that the ops between a
  /// run's loads and its last gate are still the program's ops (gates of other
  /// runs, not yet their calls and buffer stores).
  /// `lastWriter` maps each op of the run's block to the last op at or before
  /// it that may write memory (null when none).
  static Source
  findDirectSource(ArrayRef<Operation *> run,
                   const DenseMap<Operation *, Operation *> &lastWriter);
  void emit(ArrayRef<Operation *> run, Source source);

private:
  /// The slot of `value` in `slots` (added on first use).
  static int64_t slotOf(llvm::MapVector<Value, int64_t> &slots, Value value) {
    auto it = slots.insert({value, int64_t(slots.size())});
    return it.first->second;
  }
  template <typename OpT>
  void appendRecord(OpT op, int64_t kind, int64_t numParams,
                    SmallVectorImpl<int64_t> &records);
  int64_t wireCode(Value wire);
  Value buffer(OpBuilder &builder, Operation *at, Type elementType,
               ArrayRef<Value> values);
  Value tableAddress(OpBuilder &builder, Location loc,
                     ArrayRef<int64_t> records);

  ModuleOp module;
  LLVMTypeConverter &llvmTypes;
  StackArrays &stackArrays;
  SmallVector<Value> params;
  /// The memref every parameter of the run is loaded from, if any
  /// (findDirectSource), and each parameter's linear index in it.
  Value directSource;
  DenseMap<Value, int64_t> directIndex;
  llvm::MapVector<Value, int64_t> dynWires;
  unsigned numTables = 0;
};

int64_t TableBuilder::wireCode(Value wire) {
  APInt constant;
  if (matchPattern(wire, m_ConstantInt(&constant)) &&
      !constant.isNegative() && constant.getActiveBits() < 63)
    return constant.getSExtValue();
  // Wires known only at run time (and bad constant ones, so that the runtime
  // reports them as it would for cf_rt_gate) go through dyn_wires.
  return -(slotOf(dynWires, wire) + 1);
}

Value TableBuilder::buffer(OpBuilder &builder, Operation *at, Type elementType,
                           ArrayRef<Value> values) {
  Location loc = at->getLoc();
  auto pointerType = LLVM::LLVMPointerType::get(elementType);
  if (values.empty())
    return builder.create<LLVM::NullOp>(loc, pointerType);
  int64_t length = int64_t(llvm::PowerOf2Ceil(std::max<size_t>(values.size(), 8)));
  Value array = stackArrays.get(builder, at, elementType, length, /*slot=*/0);
  for (auto it : llvm::enumerate(values)) {
    Value index = builder.create<LLVM::ConstantOp>(
        loc, builder.getI64Type(), builder.getI64IntegerAttr(it.index()));
    Value element =
        builder.create<LLVM::GEPOp>(loc, pointerType, array, ValueRange{index});
    builder.create<LLVM::StoreOp>(loc, it.value(), element);
  }
  return array;
}

Value TableBuilder::tableAddress(OpBuilder &builder, Location loc,
                                 ArrayRef<int64_t> records) {
  Type i64 = builder.getI64Type();
  std::string name;
  do
    name = "cf_gate_table_" + std::to_string(numTables++);
  while (module.lookupSymbol(name));
  auto type = LLVM::LLVMArrayType::get(i64, records.size());
  auto value = DenseIntElementsAttr::get(
      RankedTensorType::get({int64_t(records.size())}, i64), records);
  LLVM::GlobalOp global;
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    global = builder.create<LLVM::GlobalOp>(
        loc, type, /*isConstant=*/true, LLVM::Linkage::Internal, name, value);
  }
  Value address = builder.create<LLVM::AddressOfOp>(loc, global);
  Value zero = builder.create<LLVM::ConstantOp>(loc, i64,
                                                builder.getI64IntegerAttr(0));
  return builder.create<LLVM::GEPOp>(loc, LLVM::LLVMPointerType::get(i64),
                                     address, ValueRange{zero, zero});
}

/// The record of one gate or Pauli rotation (see the file comment).
template <typename OpT>
void TableBuilder::appendRecord(OpT op, int64_t kind, int64_t numParams,
                                SmallVectorImpl<int64_t> &records) {
  int64_t numWires = op.getNumWiresAttr().getInt();
  SmallVector<int64_t> ctrlValues = op.getCtrlValueList();
  ValueRange inputs = op.getInputs();
  // The parameters of one record are consecutive in the buffer.
  int64_t offset = int64_t(params.size());
  if (directSource)
    offset = numParams > 0 ? directIndex.lookup(inputs.front()) : 0;
  llvm::append_range(params, inputs.take_front(numParams));
  records.append({kind, numParams, numWires, int64_t(ctrlValues.size()),
                  int64_t(op.isAdjoint()), offset});
  for (Value wire : inputs.drop_front(numParams))
    records.push_back(wireCode(wire));
  records.append(ctrlValues.begin(), ctrlValues.end());
}

/// The memref of the run when every parameter of the run is a load of it at
/// constant indices, each gate's parameters at consecutive linear indices, and
/// nothing between the first of these loads and the run's last gate may write
/// memory (so the call reads the values the loads read).
TableBuilder::Source TableBuilder::findDirectSource(
    ArrayRef<Operation *> run,
    const DenseMap<Operation *, Operation *> &lastWriter) {
  Source none;
  DenseMap<Value, int64_t> directIndex;
  Block *block = run.back()->getBlock();
  Value source;
  Operation *earliest = run.front();
  bool any = false;
  for (Operation *op : run) {
    unsigned numParams = isa<PauliRotOp>(op)
                             ? 1
                             : cast<GateOp>(op).getNumParamsAttr().getInt();
    Optional<int64_t> previous;
    for (Value param : op->getOperands().take_front(numParams)) {
      auto load = param.getDefiningOp<memref::LoadOp>();
      if (!load || load->getBlock() != block)
        return none;
      if (source && load.getMemRef() != source)
        return none;
      source = load.getMemRef();
      Optional<int64_t> index = constantLinearIndex(load);
      if (!index || (previous && *index != *previous + 1))
        return none;
      previous = index;
      directIndex[param] = *index;
      if (load->isBeforeInBlock(earliest))
        earliest = load;
      any = true;
    }
  }
  if (!any)
    return none;
  // (Looked up, not scanned: the loads of every run often sit at the top of
  // the function, and a scan per run would be quadratic in the gates.)
  Operation *writer = lastWriter.lookup(run.back());
  if (writer && (writer == earliest || earliest->isBeforeInBlock(writer)))
    return none;
  return Source{source, std::move(directIndex)};
}

void TableBuilder::emit(ArrayRef<Operation *> run, Source source) {
  params.clear();
  dynWires.clear();
  directSource = source.memref;
  directIndex = std::move(source.index);
  SmallVector<int64_t> records;
  for (Operation *op : run) {
    if (auto gate = dyn_cast<GateOp>(op)) {
      appendRecord(gate, lookupGate(gate.getGate())->id,
                   gate.getNumParamsAttr().getInt(), records);
    } else {
      auto rot = cast<PauliRotOp>(op);
      appendRecord(rot, kPauliRotKind, 1, records);
      for (char letter : rot.getWord())
        records.push_back(letter);
    }
  }

  Operation *last = run.back();
  OpBuilder builder(last);
  Location loc = last->getLoc();
  Value table = tableAddress(builder, loc, records);
  Value paramBuffer =
      directSource
          ? RuntimeCallBuilder(builder, last, llvmTypes, stackArrays)
                .dataPointer(directSource)
          : buffer(builder, last, builder.getF64Type(), params);
  SmallVector<Value> wires;
  for (auto &entry : dynWires)
    wires.push_back(entry.first);
  Value wireBuffer = buffer(builder, last, builder.getI64Type(), wires);
  Value numGates = builder.create<arith::ConstantIntOp>(loc, run.size(), 64);
  SmallVector<Value> args = {table, numGates, paramBuffer, wireBuffer};
  auto callee = module.lookupSymbol<func::FuncOp>("cf_rt_gate_table");
  if (!callee) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    callee = builder.create<func::FuncOp>(
        module.getLoc(), "cf_rt_gate_table",
        builder.getFunctionType(ValueRange(args).getTypes(), {}));
    callee.setPrivate();
  }
  builder.create<func::CallOp>(loc, callee, args);
  // The constants that only the run used (wires, mostly) go too, so that the
  // later stages do not carry thousands of dead constants.
  llvm::SetVector<Operation *> defs;
  for (Operation *op : run) {
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        defs.insert(def);
    op->erase();
  }
  // Loads that only fed the run (directSource), then the constants that only
  // they or the run used.
  llvm::SetVector<Operation *> constants;
  for (Operation *def : defs) {
    if (isa<arith::ConstantOp>(def)) {
      constants.insert(def);
    } else if (def->use_empty() && isa<memref::LoadOp>(def)) {
      for (Value index : cast<memref::LoadOp>(def).getIndices())
        if (auto c = index.getDefiningOp<arith::ConstantOp>())
          constants.insert(c);
      def->erase();
    }
  }
  for (Operation *def : constants)
    if (def->use_empty())
      def->erase();
}

} // namespace

void cofactor::lowerGateRunsToTables(ModuleOp module,
                                     LLVMTypeConverter &llvmTypes,
                                     StackArrays &stackArrays,
                                     unsigned minGates) {
  if (minGates == 0)
    return;
  minGates = std::max(minGates, 2u);
  SmallVector<SmallVector<Operation *>> runs;
  // Pre-order, so that the tables are numbered in program order.
  module.walk<WalkOrder::PreOrder>([&](Block *block) {
    SmallVector<Operation *> run;
    size_t values = 0;
    auto flush = [&] {
      if (run.size() >= minGates)
        runs.push_back(run);
      run.clear();
      values = 0;
    };
    for (Operation &op : *block) {
      if (isa<GateOp, PauliRotOp>(op)) {
        size_t gateValues = op.getNumOperands();
        if (values + gateValues > kMaxRunValues)
          flush();
        run.push_back(&op);
        values += gateValues;
      } else if (!isTransparent(&op)) {
        flush();
      }
    }
    flush();
  });
  DenseMap<Operation *, Operation *> lastWriter;
  DenseSet<Block *> indexed;
  SmallVector<TableBuilder::Source> sources;
  for (ArrayRef<Operation *> run : runs) {
    Block *block = run.back()->getBlock();
    if (indexed.insert(block).second) {
      Operation *writer = nullptr;
      for (Operation &op : *block) {
        if (!cannotWriteMemory(&op))
          writer = &op;
        lastWriter[&op] = writer;
      }
    }
    sources.push_back(TableBuilder::findDirectSource(run, lastWriter));
  }
  TableBuilder builder(module, llvmTypes, stackArrays);
  for (auto it : llvm::zip(runs, sources))
    builder.emit(std::get<0>(it), std::move(std::get<1>(it)));
}
