//===- DirectQNodeGradients.cpp - VJPs of plain QNodes without Enzyme -----===//
//
// `--cofactor-direct-qnode-gradients` runs before --cofactor-split-qnodes. It
// replaces a `gradient.vjp` whose callee is a QNode with no classical code to
// differentiate by a call to a function of its own that computes the VJP
// directly, so that Enzyme (and the preprocessing, custom gradient and tape
// functions the other passes build for it) is not needed for that gradient.
// Enzyme cost ~110 ms of the ~160 ms of `opt` for the gradient of the 4-qubit
// circuit of benchmark section 1, and most of the code generation after it.
//
// The callee qualifies (else the vjp is left alone, for Enzyme) when it is
//
// - a QNode `@q(ins..., outs...)` (`cofactor.qnode`, not diff_method "none"),
//   or a wrapper `@p(ins..., outs...)` whose body only allocates one scratch
//   buffer per output, calls such a QNode on (ins..., scratch...), copies each
//   scratch buffer into its output and frees them (what the frontend emits as
//   the primal of a QNode's gradient);
// - and the QNode is straight-line code (one block, no op with regions) made
//   only of quantum.device_acquire/device_release, quantum.gate,
//   quantum.pauli_rot, quantum.obs_named/obs_tensor, quantum.expval,
//   arith.constant, `memref.load` of an f64 input at constant indices used
//   only as gate parameters, and one `memref.store` per output of the k-th
//   measurement result into the k-th output (every output a memref<f64>).
//
// Then every gate parameter is either a constant or an element of an input,
// and the outputs are the measurement results in measurement order, so
//
//   d out_r / d in_i[idx] = sum over the gate parameters p loaded from
//                           in_i[idx] of jac[r, p],
//
// where jac is the runtime's Jacobian of the recorded measurement results with
// respect to the recorded gate parameters: what @q.quantum.jac computes after
// --cofactor-split-qnodes, the same runtime calls on the same circuit
// (cf_rt_tape_start after each device_acquire; cf_rt_tape_stop and
// cf_rt_jacobian_recorded, or cf_rt_jacobian_recorded_shift for
// diff_method = "parameter-shift", before each device_release). The Enzyme
// route adds `cout_r * jac[r, p]` into the shadow of params[p] and Enzyme then
// adds that shadow into the shadow of the input element it was loaded from:
// the same sums.
//
// The emitted `@q.direct_vjp.<k>(ins..., outs..., couts..., dins...)` runs
// the QNode recorded (writing `outs`), then, per differentiated input, loops
// over a constant table of (parameter number, element indices) rows --
// `dins[idx] += sum_r couts[r] * jac[r, p]` -- so that its size does not grow
// with the circuit, and zeroes `couts` (the vjp consumes them). A QNode or
// wrapper left without users (and without a C interface: not an entry point)
// is erased.
//
//===----------------------------------------------------------------------===//

#include "GradientUtils.h"

#include "cofactor/Gradient/Attributes.h"
#include "cofactor/Gradient/GradientOps.h"
#include "cofactor/Gradient/Passes.h"
#include "cofactor/Quantum/QuantumDialect.h"
#include "cofactor/Quantum/QuantumOps.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>
#include <optional>

using namespace mlir;
using namespace cofactor;

namespace {

/// A gate parameter read from an input: its number and the element's indices.
struct ParamUse {
  int64_t param;
  SmallVector<int64_t> indices;
};

/// What the analysis of a QNode found: the gate parameters that come from each
/// input, the number of parameters and of measurement results.
struct PlainQNode {
  func::FuncOp qnode;
  unsigned numInputs = 0;
  int64_t numParams = 0;
  int64_t numResults = 0;
  std::map<unsigned, SmallVector<ParamUse>> usesByInput;
};

std::optional<int64_t> constantIndex(Value v) {
  if (auto c = v.getDefiningOp<arith::ConstantIndexOp>())
    return c.value();
  return std::nullopt;
}

/// The QNode as a PlainQNode, or None when it has classical code to
/// differentiate (or anything this pass does not know).
std::optional<PlainQNode> analyze(func::FuncOp qnode) {
  if (!qnode->hasAttr(attr::kQNode) || qnode.isExternal() ||
      qnode.getNumResults() != 0 || !qnode.getBody().hasOneBlock())
    return std::nullopt;
  auto method = qnode->getAttrOfType<StringAttr>(attr::kDiffMethod);
  if (method && method.getValue() != "adjoint" && method.getValue() != "best" &&
      method.getValue() != "parameter-shift")
    return std::nullopt;
  auto numInputsAttr = qnode->getAttrOfType<IntegerAttr>(attr::kNumInputs);
  if (!numInputsAttr || numInputsAttr.getInt() < 0 ||
      numInputsAttr.getInt() > (int64_t)qnode.getNumArguments())
    return std::nullopt;
  PlainQNode plain;
  plain.qnode = qnode;
  plain.numInputs = numInputsAttr.getInt();
  unsigned numOutputs = qnode.getNumArguments() - plain.numInputs;
  for (Type t : qnode.getArgumentTypes())
    if (!isSupportedMemRef(t))
      return std::nullopt;
  for (Type t : qnode.getArgumentTypes().drop_front(plain.numInputs)) {
    auto type = t.cast<MemRefType>();
    if (type.getRank() != 0 || !type.getElementType().isa<Float64Type>())
      return std::nullopt;
  }
  plain.numResults = numOutputs;

  // Which operand each gate parameter is, and each measurement, in order.
  // The parameter numbers each load feeds (a value may feed several gates).
  llvm::DenseMap<Operation *, SmallVector<int64_t, 1>> paramsOfLoad;
  SmallVector<Value> measurements;
  SmallVector<memref::StoreOp> stores;
  for (Operation &op : qnode.getBody().front()) {
    if (op.getNumRegions() != 0)
      return std::nullopt;
    if (isa<quantum::DeviceAcquireOp, quantum::DeviceReleaseOp,
            quantum::ObsNamedOp, quantum::ObsTensorOp, arith::ConstantOp,
            func::ReturnOp, memref::LoadOp>(op))
      continue;
    if (isa<quantum::ExpvalOp>(op)) {
      measurements.push_back(op.getResult(0));
      continue;
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      stores.push_back(store);
      continue;
    }
    if (isa<quantum::GateOp, quantum::PauliRotOp>(op)) {
      SmallVector<OpOperand *> params = gateParameters(&op);
      for (OpOperand *param : params) {
        int64_t number = plain.numParams++;
        Operation *def = param->get().getDefiningOp();
        if (!def)
          return std::nullopt;
        if (isa<arith::ConstantOp>(def))
          continue; // no input reaches it
        auto load = dyn_cast<memref::LoadOp>(def);
        if (!load)
          return std::nullopt; // classical code between inputs and the gate
        paramsOfLoad[load].push_back(number);
      }
      // The other operands (wires, controls) must be constants.
      for (OpOperand &operand : op.getOpOperands()) {
        if (llvm::is_contained(params, &operand))
          continue;
        Operation *def = operand.get().getDefiningOp();
        if (!def || !isa<arith::ConstantOp>(def))
          return std::nullopt;
      }
      continue;
    }
    return std::nullopt;
  }
  // Every load: an f64 input element at constant indices, used as gate
  // parameters only (one row per parameter).
  WalkResult loads = qnode.walk([&](memref::LoadOp load) {
    auto arg = load.getMemref().dyn_cast<BlockArgument>();
    if (!arg || arg.getOwner() != &qnode.getBody().front() ||
        arg.getArgNumber() >= plain.numInputs ||
        !load.getType().isa<Float64Type>() || !paramsOfLoad.count(load))
      return WalkResult::interrupt();
    ArrayRef<int64_t> numbers = paramsOfLoad[load];
    if ((size_t)std::distance(load->use_begin(), load->use_end()) !=
        numbers.size())
      return WalkResult::interrupt(); // also used by something else
    SmallVector<int64_t> indices;
    for (Value index : load.getIndices()) {
      std::optional<int64_t> c = constantIndex(index);
      if (!c)
        return WalkResult::interrupt();
      indices.push_back(*c);
    }
    for (int64_t number : numbers)
      plain.usesByInput[arg.getArgNumber()].push_back({number, indices});
    return WalkResult::advance();
  });
  if (loads.wasInterrupted())
    return std::nullopt;
  // The k-th output holds the k-th measurement result, stored once; nothing
  // else is stored and no measurement result is used otherwise.
  if ((int64_t)measurements.size() != plain.numResults ||
      (int64_t)stores.size() != plain.numResults)
    return std::nullopt;
  for (int64_t k = 0; k < plain.numResults; ++k) {
    memref::StoreOp store = stores[k];
    if (store.getMemref() != qnode.getArgument(plain.numInputs + k) ||
        store.getValue() != measurements[k] || !measurements[k].hasOneUse())
      return std::nullopt;
  }
  return plain;
}

/// The QNode that `callee` runs, when `callee` is one or the frontend's
/// wrapper around one (see the file comment); None otherwise.
func::FuncOp calledQNode(func::FuncOp callee, unsigned numInputs,
                         unsigned numOutputs, SymbolTable &symbols) {
  if (callee->hasAttr(attr::kQNode))
    return callee;
  if (callee.isExternal() || !callee.getBody().hasOneBlock() ||
      callee.getNumArguments() != numInputs + numOutputs)
    return nullptr;
  func::CallOp call;
  SmallVector<Operation *> allocs, copies, deallocs;
  for (Operation &op : callee.getBody().front()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      if (!alloc->getOperands().empty())
        return nullptr;
      allocs.push_back(alloc);
    } else if (auto c = dyn_cast<func::CallOp>(op)) {
      if (call)
        return nullptr;
      call = c;
    } else if (isa<memref::CopyOp>(op)) {
      copies.push_back(&op);
    } else if (isa<memref::DeallocOp>(op)) {
      deallocs.push_back(&op);
    } else if (!isa<func::ReturnOp>(op)) {
      return nullptr;
    }
  }
  if (!call || allocs.size() != numOutputs || copies.size() != numOutputs ||
      deallocs.size() != numOutputs ||
      call.getNumOperands() != numInputs + numOutputs)
    return nullptr;
  auto qnode = symbols.lookup<func::FuncOp>(call.getCallee());
  if (!qnode || !qnode->hasAttr(attr::kQNode))
    return nullptr;
  // call @q(ins..., scratch...), copy scratch_k -> out_k, dealloc scratch_k
  // (in any order)
  for (unsigned i = 0; i < numInputs; ++i)
    if (call.getOperand(i) != callee.getArgument(i))
      return nullptr;
  llvm::SmallPtrSet<Operation *, 4> scratchAllocs;
  for (unsigned k = 0; k < numOutputs; ++k) {
    Value scratch = call.getOperand(numInputs + k);
    Operation *alloc = scratch.getDefiningOp();
    if (!alloc || !llvm::is_contained(allocs, alloc) ||
        !scratchAllocs.insert(alloc).second)
      return nullptr;
    // Used by the call, one copy into out_k and one dealloc, nothing else.
    unsigned copied = 0, freed = 0, used = 0;
    for (OpOperand &use : scratch.getUses()) {
      ++used;
      Operation *user = use.getOwner();
      if (auto copy = dyn_cast<memref::CopyOp>(user)) {
        if (copy.getSource() != scratch ||
            copy.getTarget() != callee.getArgument(numInputs + k))
          return nullptr;
        ++copied;
      } else if (isa<memref::DeallocOp>(user)) {
        ++freed;
      } else if (user != call.getOperation()) {
        return nullptr;
      }
    }
    if (copied != 1 || freed != 1 || used != 3)
      return nullptr;
  }
  return qnode;
}

class DirectVJPEmitter {
public:
  DirectVJPEmitter(ModuleOp module, SymbolTable &symbols)
      : module(module), symbols(symbols), ctx(module.getContext()) {}

  /// The function computing the vjp of `plain` for these differentiated
  /// inputs (emitted once per QNode and set of inputs).
  func::FuncOp get(const PlainQNode &plain, ArrayRef<int64_t> diffInputs) {
    func::FuncOp qnode = plain.qnode;
    auto key = std::make_pair(
        qnode.getOperation(),
        SmallVector<int64_t>(diffInputs.begin(), diffInputs.end()));
    auto found = emitted.find(key);
    if (found != emitted.end())
      return found->second;
    func::FuncOp fn = emit(plain, diffInputs);
    emitted[key] = fn;
    return fn;
  }

private:
  func::FuncOp emit(const PlainQNode &plain, ArrayRef<int64_t> diffInputs);
  void emitScatter(OpBuilder &b, Location loc, const PlainQNode &plain,
                   unsigned input, Value din, Value jac,
                   ArrayRef<Value> cotangents);

  ModuleOp module;
  SymbolTable &symbols;
  MLIRContext *ctx;
  std::map<std::pair<Operation *, SmallVector<int64_t>>, func::FuncOp> emitted;
};

func::FuncOp DirectVJPEmitter::emit(const PlainQNode &plain,
                                    ArrayRef<int64_t> diffInputs) {
  func::FuncOp qnode = plain.qnode;
  Location loc = qnode.getLoc();
  unsigned numArgs = qnode.getNumArguments();
  // (ins..., outs...) -> (ins..., outs..., couts..., dins...)
  func::FuncOp fn = qnode.clone();
  fn.setName((qnode.getName() + ".direct_vjp").str());
  fn.setPrivate();
  for (StringRef name : {attr::kQNode, attr::kDiffMethod, attr::kNumInputs})
    fn->removeAttr(name);
  fn->removeAttr("llvm.emit_c_interface");
  OpBuilder::atBlockEnd(module.getBody()).insert(fn);
  symbols.insert(fn); // renames on a clash
  SmallVector<Value> cotangents;
  for (unsigned k = plain.numInputs; k < numArgs; ++k) {
    fn.insertArgument(fn.getNumArguments(), qnode.getArgument(k).getType(),
                      DictionaryAttr::get(ctx), loc);
    cotangents.push_back(fn.getArguments().back());
  }
  SmallVector<Value> dins;
  for (int64_t input : diffInputs) {
    fn.insertArgument(fn.getNumArguments(),
                      qnode.getArgument(input).getType(),
                      DictionaryAttr::get(ctx), loc);
    dins.push_back(fn.getArguments().back());
  }

  Block &body = fn.getBody().front();
  OpBuilder entry = OpBuilder::atBlockBegin(&body);
  auto jacType = MemRefType::get({plain.numResults, plain.numParams},
                                 Float64Type::get(ctx));
  Value jac = entry.create<memref::AllocOp>(loc, jacType);
  recordJacobian(fn, recordedJacobianFunction(qnode), jac, plain.numResults,
                 [&](OpBuilder &b, Location at) -> Value {
                   return b.create<arith::ConstantOp>(
                       at, b.getI64IntegerAttr(plain.numParams));
                 });
  // Straight-line code: one return, after the Jacobian (recordJacobian asks
  // for it there if the circuit releases no device).
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  OpBuilder b(ret);
  SmallVector<Value> couts;
  for (Value cout : cotangents)
    couts.push_back(b.create<memref::LoadOp>(ret.getLoc(), cout));
  for (size_t d = 0; d < diffInputs.size(); ++d)
    emitScatter(b, ret.getLoc(), plain, diffInputs[d], dins[d], jac, couts);
  Value zero = b.create<arith::ConstantOp>(ret.getLoc(), b.getF64FloatAttr(0));
  for (Value cout : cotangents)
    b.create<memref::StoreOp>(ret.getLoc(), zero, cout);
  b.create<memref::DeallocOp>(ret.getLoc(), jac);
  return fn;
}

/// for each row (p, idx...) of the input's table:
///   din[idx...] += sum_r couts[r] * jac[r, p]
void DirectVJPEmitter::emitScatter(OpBuilder &b, Location loc,
                                   const PlainQNode &plain, unsigned input,
                                   Value din, Value jac,
                                   ArrayRef<Value> couts) {
  auto found = plain.usesByInput.find(input);
  if (found == plain.usesByInput.end() || found->second.empty())
    return; // the input reaches no gate: its cotangent is zero
  ArrayRef<ParamUse> uses = found->second;
  func::FuncOp qnode = plain.qnode;
  int64_t rank = din.getType().cast<MemRefType>().getRank();
  int64_t columns = 1 + rank;
  SmallVector<int64_t> table;
  for (const ParamUse &use : uses) {
    table.push_back(use.param);
    table.append(use.indices.begin(), use.indices.end());
  }
  Type i64 = IntegerType::get(ctx, 64);
  auto tableType = MemRefType::get({(int64_t)uses.size(), columns}, i64);
  auto tensorType = RankedTensorType::get({(int64_t)uses.size(), columns}, i64);
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto global = mb.create<memref::GlobalOp>(
      loc, (qnode.getName() + ".direct_vjp_table").str(),
      mb.getStringAttr("private"), tableType,
      DenseIntElementsAttr::get(tensorType, table), /*constant=*/true,
      IntegerAttr());
  symbols.insert(global); // renames on a clash
  Value tableRef =
      b.create<memref::GetGlobalOp>(loc, tableType, global.getSymName());
  Value lower = b.create<arith::ConstantIndexOp>(loc, 0);
  Value upper = b.create<arith::ConstantIndexOp>(loc, uses.size());
  Value step = b.create<arith::ConstantIndexOp>(loc, 1);
  auto loop = b.create<scf::ForOp>(loc, lower, upper, step);
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  Value row = loop.getInductionVar();
  auto column = [&](int64_t c) -> Value {
    Value at = lb.create<arith::ConstantIndexOp>(loc, c);
    Value v = lb.create<memref::LoadOp>(loc, tableRef, ValueRange{row, at});
    return lb.create<arith::IndexCastOp>(loc, lb.getIndexType(), v);
  };
  Value param = column(0);
  SmallVector<Value> indices;
  for (int64_t c = 1; c < columns; ++c)
    indices.push_back(column(c));
  Value sum;
  for (size_t r = 0; r < couts.size(); ++r) {
    Value rIndex = lb.create<arith::ConstantIndexOp>(loc, r);
    Value entry =
        lb.create<memref::LoadOp>(loc, jac, ValueRange{rIndex, param});
    Value term = lb.create<arith::MulFOp>(loc, couts[r], entry);
    sum = sum ? lb.create<arith::AddFOp>(loc, sum, term).getResult() : term;
  }
  Value old = lb.create<memref::LoadOp>(loc, din, indices);
  Value updated = lb.create<arith::AddFOp>(loc, old, sum);
  lb.create<memref::StoreOp>(loc, updated, din, indices);
}

struct DirectQNodeGradientsPass
    : public PassWrapper<DirectQNodeGradientsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DirectQNodeGradientsPass)

  StringRef getArgument() const final {
    return "cofactor-direct-qnode-gradients";
  }
  StringRef getDescription() const final {
    return "Compute the VJP of a QNode without classical code to "
           "differentiate directly from the runtime's Jacobian (no Enzyme)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithmeticDialect, func::FuncDialect,
                    LLVM::LLVMDialect, memref::MemRefDialect,
                    scf::SCFDialect>();
  }

  void runOnOperation() final {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    DirectVJPEmitter emitter(module, symbols);
    std::map<Operation *, std::optional<PlainQNode>> analyzed;
    llvm::SetVector<Operation *> wrappers, qnodes; // callees of rewritten vjps
    SmallVector<gradient::VJPOp> vjps;
    module.walk([&](gradient::VJPOp op) { vjps.push_back(op); });
    for (gradient::VJPOp vjp : vjps) {
      auto callee = symbols.lookup<func::FuncOp>(vjp.getCallee());
      if (!callee)
        continue; // the verifier of the next pass reports it
      unsigned numInputs = vjp.getNumInputs();
      unsigned numOutputs = vjp.getNumOutputs();
      func::FuncOp qnode =
          calledQNode(callee, numInputs, numOutputs, symbols);
      if (!qnode)
        continue;
      auto known = analyzed.find(qnode);
      if (known == analyzed.end())
        known = analyzed.emplace(qnode, analyze(qnode)).first;
      const std::optional<PlainQNode> &plain = known->second;
      if (!plain || plain->numInputs != numInputs ||
          qnode.getNumArguments() != numInputs + numOutputs)
        continue;
      SmallVector<int64_t> diffInputs = vjp.getDiffInputIndices();
      func::FuncOp direct = emitter.get(*plain, diffInputs);
      OpBuilder b(vjp);
      SmallVector<Value> args(vjp.getIns().begin(), vjp.getIns().end());
      args.append(vjp.getOuts().begin(), vjp.getOuts().end());
      args.append(vjp.getCouts().begin(), vjp.getCouts().end());
      args.append(vjp.getDins().begin(), vjp.getDins().end());
      b.create<func::CallOp>(vjp.getLoc(), direct, args);
      vjp.erase();
      if (callee != qnode)
        wrappers.insert(callee);
      qnodes.insert(qnode);
    }
    // A QNode (or wrapper) that nothing refers to any more is not compiled: it
    // would be as much code again as its direct VJP. Only the entry point is
    // called from outside (through its C interface, `llvm.emit_c_interface`).
    for (auto *callees : {&wrappers, &qnodes})
      for (Operation *fn : *callees)
        if (!fn->hasAttr("llvm.emit_c_interface") &&
            SymbolTable::symbolKnownUseEmpty(fn, module))
          fn->erase();
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createDirectQNodeGradientsPass() {
  return std::make_unique<DirectQNodeGradientsPass>();
}
