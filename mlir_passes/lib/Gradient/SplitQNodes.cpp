//===- SplitQNodes.cpp - QNodes into preprocessing + quantum part ---------===//
//
// `--cofactor-split-qnodes` prepares every QNode that a `gradient.vjp` may
// reach (directly or through calls) for Enzyme, in the manner of Catalyst's
// hybrid gradient (docs/gradients.md, step 1). For a QNode
// `@q(ins..., outs...)` with N inputs it emits:
//
// - `@q.pcount(ins..., %count: memref<index>)`: the classical code of @q with
//   the quantum ops removed, counting gate parameters in a stack counter (so
//   that circuits whose gate count depends on loops or conditions are handled)
//   and storing the total into `count`. It is marked `cofactor.inactive`:
//   Enzyme has nothing to differentiate there.
// - `@q.quantum(ins..., %params: memref<?xf64>, outs...)`: @q with every gate
//   parameter operand replaced by `params[counter++]`. It gets
//   `cofactor.jacobian = @q.quantum.jac`, so --cofactor-custom-gradients gives
//   it a custom gradient: to Enzyme it is one more opaque callee.
// - `@q.quantum.jac(ins..., %params, %jac: memref<Rx?xf64>, outs...)`:
//   @q.quantum with the runtime's recording on (`cf_rt_tape_start`
//   right after each `quantum.device_acquire`) that asks the runtime for the
//   Jacobian of every recorded measurement result with respect to every
//   recorded gate parameter (`cf_rt_tape_stop` then
//   `cf_rt_jacobian_recorded(jac, R, P)` -- the adjoint method; with
//   `diff_method = "parameter-shift"` `cf_rt_jacobian_recorded_shift` -- before
//   each `quantum.device_release`,
//   or before returning if the circuit releases nothing). R is the number of
//   f64 elements over all outputs: the outputs hold the measurement results in
//   measurement order. The custom gradient's forward calls it in place of
//   @q.quantum (the circuit runs once, recorded) and keeps jac for the reverse,
//   which adds `jac^T couts` into the shadow of `params` (the inputs reach the
//   gates only through `params`).
// - `@q` itself becomes the classical preprocessing: it calls @q.pcount,
//   allocates `params`, runs its classical code with every gate replaced by
//   `params[counter++] = <operand>` (quantum ops removed), and calls
//   `@q.quantum(ins..., params, outs...)`. Enzyme differentiates this function
//   itself, so gradients flow ins -> params through Enzyme and
//   params -> measurements through the runtime's Jacobian. Its counter and
//   count slots carry `__enzyme_integer` type hints, and `params` comes from
//   `malloc` directly (see mallocVector): both keep Enzyme's type analysis
//   from mistaking integers for floats.
//
// The three functions number the parameters alike (QNodeParams.h). Gate
// parameters that are elements of an array reach `params` through loops
// where they can (ParamGather.h), so Enzyme, O2 and code generation do not see
// a load and a store per element.
//
// Mid-circuit measurements are rejected in differentiated QNodes (a count or a
// parameter that depends on an outcome cannot be replayed faithfully), and so
// are QNodes with `cofactor.diff_method = "none"`. Matrices of QubitUnitary
// and Hermitian observables are treated as constants; the coefficients of a
// `quantum.obs_hamiltonian` marked `cofactor.diff_coeffs` (computed from the
// inputs, measured by expval) are parameters of the quantum part like a
// gate's, and the runtime gives their Jacobian entries d<H>/dc_k = <term_k>.
//
//===----------------------------------------------------------------------===//

#include "GradientUtils.h"
#include "ParamGather.h"
#include "QNodeParams.h"

#include "cofactor/Gradient/Attributes.h"
#include "cofactor/Gradient/GradientOps.h"
#include "cofactor/Gradient/Passes.h"
#include "cofactor/Quantum/QuantumDialect.h"
#include "cofactor/Quantum/QuantumOps.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BlockAndValueMapping.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/SideEffectUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace cofactor;

namespace {

bool isQuantumOp(Operation *op) {
  return op->getDialect() && op->getDialect()->getNamespace() ==
                                 quantum::QuantumDialect::getDialectNamespace();
}

/// `__enzyme_integer(ptr, 8)`: tells Enzyme's type analysis that the index
/// slot holds an integer. Without it Enzyme cannot tell the counter (or the
/// parameter count) from a float, treats its integer add as active and stops
/// ("cannot handle unknown binary operator"). Enzyme erases these calls.
void hintInteger(OpBuilder &b, Location loc, Value slot) {
  MLIRContext *ctx = b.getContext();
  Type i64 = IntegerType::get(ctx, 64);
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  auto hint =
      getOrDeclare(module, "__enzyme_integer",
                   FunctionType::get(ctx, {getVoidPtrType(ctx), i64}, {}));
  Value bytes = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(8));
  b.create<func::CallOp>(loc, hint,
                         ValueRange{dataPointer(b, loc, slot), bytes});
}

/// A `memref<?xf64>` of `count` elements from `malloc`, freed by
/// `memref.dealloc`. Not `memref.alloc`: MLIR 15 computes its byte size as
/// `ptrtoint(getelementptr(null, count))`, and Enzyme's type analysis then
/// finds a pointer where malloc wants an integer ("Illegal updateAnalysis")
/// whenever the count is not a constant.
Value mallocVector(OpBuilder &b, Location loc, MemRefType type, Value count) {
  MLIRContext *ctx = b.getContext();
  Type i64 = IntegerType::get(ctx, 64);
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  auto malloc = module.lookupSymbol<LLVM::LLVMFuncOp>("malloc");
  if (!malloc) {
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    malloc = mb.create<LLVM::LLVMFuncOp>(
        loc, "malloc",
        LLVM::LLVMFunctionType::get(getVoidPtrType(ctx), {i64}, false));
  }
  Value n = b.create<arith::IndexCastOp>(loc, i64, count);
  Value eight = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(8));
  Value bytes = b.create<arith::MulIOp>(loc, n, eight);
  Value raw =
      b.create<LLVM::CallOp>(loc, malloc, ValueRange{bytes}).getResult(0);
  auto elementPtr = LLVM::LLVMPointerType::get(type.getElementType());
  Value data = b.create<LLVM::BitcastOp>(loc, elementPtr, raw);
  LLVMTypeConverter converter(ctx);
  Type descType = converter.convertType(type);
  Value zero = b.create<LLVM::ConstantOp>(loc, i64, b.getI64IntegerAttr(0));
  Value one = b.create<LLVM::ConstantOp>(loc, i64, b.getI64IntegerAttr(1));
  Value desc = b.create<LLVM::UndefOp>(loc, descType);
  desc = b.create<LLVM::InsertValueOp>(loc, desc, data, b.getI64ArrayAttr(0));
  desc = b.create<LLVM::InsertValueOp>(loc, desc, data, b.getI64ArrayAttr(1));
  desc = b.create<LLVM::InsertValueOp>(loc, desc, zero, b.getI64ArrayAttr(2));
  desc = b.create<LLVM::InsertValueOp>(loc, desc, n, b.getI64ArrayAttr({3, 0}));
  desc =
      b.create<LLVM::InsertValueOp>(loc, desc, one, b.getI64ArrayAttr({4, 0}));
  return b.create<UnrealizedConversionCastOp>(loc, type, desc).getResult(0);
}

/// Points the uses of the output arguments [first, first + n) at scratch
/// buffers freed before returning, so that classical clones of a QNode never
/// write its outputs (the quantum part does).
LogicalResult redirectOutputs(func::FuncOp fn, unsigned first, unsigned n) {
  OpBuilder b = OpBuilder::atBlockBegin(&fn.getBody().front());
  SmallVector<Value> scratch;
  for (unsigned k = first; k < first + n; ++k) {
    BlockArgument arg = fn.getArgument(k);
    auto type = arg.getType().cast<MemRefType>();
    if (!type.hasStaticShape())
      return fn.emitError("QNode outputs must have static shapes, got ")
             << type;
    Value buffer = b.create<memref::AllocOp>(fn.getLoc(), type);
    arg.replaceAllUsesWith(buffer);
    scratch.push_back(buffer);
  }
  beforeEachReturn(fn, [&](OpBuilder &rb, func::ReturnOp ret) {
    for (Value buffer : scratch)
      rb.create<memref::DeallocOp>(ret.getLoc(), buffer);
  });
  return success();
}

/// Removes the quantum ops of `fn`; `atGate(builder, op, n)` runs before each
/// op with n > 0 parameters (numParamsOf) is removed. Measurement results
/// become 0.
void stripQuantum(func::FuncOp fn,
                  function_ref<void(OpBuilder &, Operation *, int64_t)> atGate) {
  SmallVector<Operation *> ops;
  fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isQuantumOp(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    if (int64_t n = numParamsOf(op)) {
      OpBuilder b(op);
      atGate(b, op, n);
    }
  }
  // Users come after their definitions: erase in reverse.
  for (Operation *op : llvm::reverse(ops)) {
    OpBuilder b(op);
    for (Value result : op->getResults()) {
      if (result.use_empty())
        continue;
      // Only classical users are left (quantum users were erased): a
      // measurement result, whose value the classical clones never need.
      Attribute zero = b.getZeroAttr(result.getType());
      if (!zero)
        continue; // an observable: its quantum users are gone already
      result.replaceAllUsesWith(
          b.create<arith::ConstantOp>(op->getLoc(), zero).getResult());
    }
    op->erase();
  }
}

/// Erases the ops of `fn` whose results nobody uses and that only read memory
/// (the loads of gate parameters left behind in the clones of a QNode).
void eraseDeadOps(func::FuncOp fn) {
  SmallVector<Operation *> ops;
  fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op != fn.getOperation())
      ops.push_back(op);
  });
  // Users come after their definitions in pre-order.
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
}

class QNodeSplitter {
public:
  QNodeSplitter(ModuleOp module, SymbolTable &symbols)
      : module(module), symbols(symbols), ctx(module.getContext()) {}

  LogicalResult split(func::FuncOp qnode);

private:
  func::FuncOp cloneAs(func::FuncOp fn, StringRef suffix) {
    func::FuncOp clone = fn.clone();
    clone.setName((fn.getName() + suffix).str());
    clone.setPrivate();
    OpBuilder::atBlockEnd(module.getBody()).insert(clone);
    symbols.insert(clone);
    return clone;
  }
  static void dropQNodeAttrs(func::FuncOp fn) {
    fn->removeAttr(attr::kQNode);
    fn->removeAttr(attr::kDiffMethod);
    fn->removeAttr("llvm.emit_c_interface");
  }
  func::FuncOp emitParamCount(func::FuncOp qnode, unsigned numInputs);
  func::FuncOp emitQuantum(func::FuncOp qnode, unsigned numInputs);
  func::FuncOp emitJacobian(func::FuncOp quantum, unsigned numInputs,
                            int64_t numResults, StringRef runtimeJacobian);
  void emitPreprocessing(func::FuncOp qnode, unsigned numInputs,
                         func::FuncOp pcount, func::FuncOp quantum,
                         const llvm::SmallPtrSetImpl<Value> &readOnly);

  ModuleOp module;
  SymbolTable &symbols;
  MLIRContext *ctx;
};

func::FuncOp QNodeSplitter::emitParamCount(func::FuncOp qnode,
                                           unsigned numInputs) {
  func::FuncOp fn = cloneAs(qnode, ".pcount");
  dropQNodeAttrs(fn);
  fn->removeAttr(attr::kNumInputs);
  fn->setAttr(attr::kInactive, UnitAttr::get(ctx));
  fn->setAttr(attr::kParamCount, UnitAttr::get(ctx));
  unsigned numOutputs = fn.getNumArguments() - numInputs;
  (void)redirectOutputs(fn, numInputs, numOutputs); // checked by the caller
  ParamCounter counter(fn);
  stripQuantum(fn, [&](OpBuilder &b, Operation *op, int64_t n) {
    counter.next(b, op, n);
  });
  // Drop the output arguments; write the count into a trailing memref<index>
  // (a returned integer would be of unknown type to Enzyme, see hintInteger).
  llvm::BitVector outputs(fn.getNumArguments());
  outputs.set(numInputs, fn.getNumArguments());
  fn.eraseArguments(outputs);
  auto slotType = MemRefType::get({}, IndexType::get(ctx));
  fn.insertArgument(numInputs, slotType, DictionaryAttr::get(ctx), fn.getLoc());
  Value slot = fn.getArgument(numInputs);
  beforeEachReturn(fn, [&](OpBuilder &b, func::ReturnOp ret) {
    Value count = counter.total(b, ret.getLoc());
    b.create<memref::StoreOp>(ret.getLoc(), count, slot);
  });
  eraseDeadOps(fn);
  return fn;
}

func::FuncOp QNodeSplitter::emitQuantum(func::FuncOp qnode,
                                        unsigned numInputs) {
  func::FuncOp fn = cloneAs(qnode, ".quantum");
  dropQNodeAttrs(fn);
  auto paramsType =
      MemRefType::get({ShapedType::kDynamicSize}, Float64Type::get(ctx));
  fn.insertArgument(numInputs, paramsType, DictionaryAttr::get(ctx),
                    fn.getLoc());
  Value params = fn.getArgument(numInputs);
  fn->setAttr(attr::kNumInputs,
              IntegerAttr::get(IntegerType::get(ctx, 64), numInputs + 1));
  ParamCounter counter(fn);
  fn.walk([&](Operation *op) {
    if (auto h = diffHamiltonian(op)) {
      // The coefficients from params, in a buffer of their own.
      auto type = h.getCoeffs().getType().cast<MemRefType>();
      OpBuilder b(op);
      Location loc = op->getLoc();
      Value first = counter.next(b, op, type.getDimSize(0));
      Value coeffs = OpBuilder::atBlockBegin(&fn.getBody().front())
                         .create<memref::AllocaOp>(loc, type);
      for (int64_t k = 0; k < type.getDimSize(0); ++k) {
        Value value = b.create<memref::LoadOp>(
            loc, params, offsetIndex(b, loc, first, k));
        b.create<memref::StoreOp>(
            loc, value, coeffs,
            ValueRange{b.create<arith::ConstantIndexOp>(loc, k)});
      }
      h->setOperand(0, coeffs);
      return;
    }
    SmallVector<OpOperand *> ps = gateParameters(op);
    if (ps.empty())
      return;
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value first = counter.next(b, op, ps.size());
    for (size_t k = 0; k < ps.size(); ++k) {
      Value index = offsetIndex(b, loc, first, k);
      ps[k]->set(b.create<memref::LoadOp>(loc, params, index));
    }
  });
  eraseDeadOps(fn);
  return fn;
}

func::FuncOp QNodeSplitter::emitJacobian(func::FuncOp quantum,
                                         unsigned numInputs,
                                         int64_t numResults,
                                         StringRef runtimeJacobian) {
  // (ins..., params, outs...) -> (ins..., params, jac, outs...)
  func::FuncOp fn = cloneAs(quantum, ".jac");
  fn->removeAttr(attr::kNumInputs);
  auto jacType = MemRefType::get({numResults, ShapedType::kDynamicSize},
                                 Float64Type::get(ctx));
  fn.insertArgument(numInputs + 1, jacType, DictionaryAttr::get(ctx),
                    fn.getLoc());
  Value params = fn.getArgument(numInputs);
  Value jac = fn.getArgument(numInputs + 1);
  // P is the size of `params`: the count the preprocessing computed.
  recordJacobian(fn, runtimeJacobian, jac, numResults,
                 [&](OpBuilder &b, Location loc) -> Value {
                   return b.create<arith::IndexCastOp>(
                       loc, b.getI64Type(),
                       b.create<memref::DimOp>(loc, params, 0));
                 });
  return fn;
}

void QNodeSplitter::emitPreprocessing(func::FuncOp qnode, unsigned numInputs,
                                      func::FuncOp pcount,
                                      func::FuncOp quantum,
                                      const llvm::SmallPtrSetImpl<Value> &readOnly) {
  Location loc = qnode.getLoc();
  unsigned numArgs = qnode.getNumArguments();
  (void)redirectOutputs(qnode, numInputs, numArgs - numInputs);
  // Allocated first: every later op may use `params`.
  OpBuilder b = OpBuilder::atBlockBegin(&qnode.getBody().front());
  auto inArgs = qnode.getArguments().take_front(numInputs);
  SmallVector<Value> ins(inArgs.begin(), inArgs.end());
  Value slot =
      b.create<memref::AllocaOp>(loc, MemRefType::get({}, b.getIndexType()));
  hintInteger(b, loc, slot);
  SmallVector<Value> pcountArgs(ins);
  pcountArgs.push_back(slot);
  b.create<func::CallOp>(loc, pcount, pcountArgs);
  Value count = b.create<memref::LoadOp>(loc, slot);
  auto paramsType = quantum.getArgumentTypes()[numInputs].cast<MemRefType>();
  Value params = mallocVector(b, loc, paramsType, count);
  ParamCounter counter(qnode, [&](OpBuilder &hb, Value counterSlot) {
    hintInteger(hb, loc, counterSlot);
  });
  stripQuantum(qnode, [&](OpBuilder &gb, Operation *op, int64_t n) {
    Location gloc = op->getLoc();
    Value first = counter.next(gb, op, n);
    auto h = diffHamiltonian(op);
    SmallVector<OpOperand *> ps = gateParameters(op);
    for (int64_t k = 0; k < n; ++k) {
      Value index = offsetIndex(gb, gloc, first, k);
      Value value =
          h ? gb.create<memref::LoadOp>(
                    gloc, h.getCoeffs(),
                    ValueRange{gb.create<arith::ConstantIndexOp>(gloc, k)})
                  .getResult()
            : ps[k]->get();
      gb.create<memref::StoreOp>(gloc, value, params, index);
    }
  });
  gatherParameterCopies(qnode, params, readOnly);
  beforeEachReturn(qnode, [&](OpBuilder &rb, func::ReturnOp ret) {
    SmallVector<Value> args(ins);
    args.push_back(params);
    for (unsigned k = numInputs; k < numArgs; ++k) {
      args.push_back(qnode.getArgument(k));
      // (the quantum part is opaque to Enzyme: nothing else types the caller's
      // result buffers, see hintDoubles)
      hintDoubles(rb, ret.getLoc(), qnode.getArgument(k));
    }
    rb.create<func::CallOp>(ret.getLoc(), quantum, args);
    rb.create<memref::DeallocOp>(ret.getLoc(), params);
  });
  qnode->removeAttr(attr::kQNode);
}

LogicalResult QNodeSplitter::split(func::FuncOp qnode) {
  auto method = qnode->getAttrOfType<StringAttr>(attr::kDiffMethod);
  if (method && method.getValue() == "none")
    return qnode.emitError("cannot differentiate QNode @")
           << qnode.getName() << ": it is marked diff_method=None";
  if (qnode.isExternal() || qnode.getNumResults() != 0)
    return qnode.emitError("QNode @")
           << qnode.getName() << " must be a void function with a body";
  auto numInputsAttr = qnode->getAttrOfType<IntegerAttr>(attr::kNumInputs);
  if (!numInputsAttr || numInputsAttr.getInt() < 0 ||
      numInputsAttr.getInt() > (int64_t)qnode.getNumArguments())
    return qnode.emitError("QNode @")
           << qnode.getName() << " needs " << attr::kNumInputs;
  unsigned numInputs = numInputsAttr.getInt();
  int64_t numResults = 0;
  for (Type t : qnode.getArgumentTypes().drop_front(numInputs)) {
    auto type = t.dyn_cast<MemRefType>();
    if (!type || !type.hasStaticShape() ||
        !type.getElementType().isa<Float64Type>())
      return qnode.emitError("QNode @")
             << qnode.getName()
             << ": differentiated outputs must be static f64 memrefs, got "
             << t;
    numResults += type.getNumElements();
  }
  for (Type t : qnode.getArgumentTypes())
    if (!isSupportedMemRef(t))
      return qnode.emitError("QNode @")
             << qnode.getName()
             << ": arguments must be identity-layout memrefs";
  WalkResult measured = qnode.walk([&](quantum::MeasureOp op) {
    op.emitError("mid-circuit measurements are not supported in a "
                 "differentiated QNode");
    return WalkResult::interrupt();
  });
  if (measured.wasInterrupted())
    return failure();
  // Only an expval records the coefficients' derivatives (cf_rt_expval); in a
  // tensor, sum or variance they would be lost, i.e. silently zero.
  WalkResult misused = qnode.walk([&](quantum::ObsHamiltonianOp op) {
    if (!op->hasAttr(attr::kDiffCoeffs))
      return WalkResult::advance();
    if (op.getCoeffs().getType().cast<MemRefType>().isDynamicDim(0)) {
      op.emitError("differentiated Hamiltonian coefficients need a static "
                   "count");
      return WalkResult::interrupt();
    }
    for (Operation *user : op->getUsers())
      if (!isa<quantum::ExpvalOp>(user)) {
        op.emitError("a Hamiltonian with differentiated coefficients can "
                     "only be measured by quantum.expval, not used by ")
            << user->getName();
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  if (misused.wasInterrupted())
    return failure();

  // Before the clones and the preprocessing add uses of the inputs.
  llvm::SmallPtrSet<Value, 4> readOnly = readOnlyInputs(qnode, numInputs);
  func::FuncOp pcount = emitParamCount(qnode, numInputs);
  func::FuncOp quantum = emitQuantum(qnode, numInputs);
  func::FuncOp jacobian = emitJacobian(quantum, numInputs, numResults,
                                       recordedJacobianFunction(qnode));
  quantum->setAttr(attr::kJacobian, FlatSymbolRefAttr::get(jacobian));
  emitPreprocessing(qnode, numInputs, pcount, quantum, readOnly);
  return success();
}

struct SplitQNodesPass
    : public PassWrapper<SplitQNodesPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SplitQNodesPass)

  StringRef getArgument() const final { return "cofactor-split-qnodes"; }
  StringRef getDescription() const final {
    return "Split differentiated QNodes into classical preprocessing (for "
           "Enzyme) and a quantum part with a custom gradient";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry
        .insert<arith::ArithmeticDialect, func::FuncDialect, LLVM::LLVMDialect,
                memref::MemRefDialect, scf::SCFDialect>();
  }

  void runOnOperation() final {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    // QNodes reachable from a vjp callee, through calls.
    QNodeSplitter splitter(module, symbols);
    for (func::FuncOp fn : differentiatedFunctions(module, symbols))
      if (fn->hasAttr(attr::kQNode) && failed(splitter.split(fn)))
        return signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createSplitQNodesPass() {
  return std::make_unique<SplitQNodesPass>();
}
