//===- CustomGradients.cpp - fwd_impl / rev_impl for opaque callees -------===//
//
// `--cofactor-custom-gradients` gives every function that Enzyme must not look
// into a custom gradient, written in func/memref/scf so that the rest of the
// pipeline lowers it like any other code:
//
// - An opaque primal is a void DPS function `@X(ins..., outs...)` with
//   `cofactor.num_inputs = N` and `cofactor.vjp = @V`, where
//   `@V(ins..., couts..., vjps...)` writes (overwrites) `J^T couts` into `vjps`
//   (one per input, the input's type). Split QNodes (`@q.quantum`, with
//   `@q.quantum.vjp`) and Python callbacks are turned into this form; so can a
//   test or another frontend directly.
// - Python callbacks (`cofactor.callback_id = K`, no body) get a body calling
//   the runtime's trampoline `cf_rt_callback(K, CF_CALLBACK_PRIMAL, ...)`;
//   with `cofactor.callback_has_vjp` they also get `@X.vjp`, which calls
//   `cf_rt_callback(K, CF_CALLBACK_VJP, ...)`.
// - For each such `@X` the pass emits, with interleaved arguments
//   `(in0, din0, ..., out0, dout0, ...)` (Enzyme's custom-gradient order):
//     `@X.fwd_impl(...) -> i64`: calls `@X`, saves copies of the inputs in a
//       runtime tape (the inputs may be overwritten before the reverse runs,
//       e.g. by a later loop iteration) and returns the tape handle;
//     `@X.rev_impl(..., %tape: i64)`: restores the inputs, reads the
//       cotangents from `dout` and zeroes `dout` (the output memory was
//       overwritten in the forward), calls `@V`, **adds** the products into
//       `din` (an input may feed several consumers), frees the tape.
//   An argument whose shadow is the primal itself (Enzyme does that for
//   arguments it proved constant) is skipped: its cotangent counts as zero
//   and nothing is written through it.
// - A primal with `cofactor.jacobian = @J` instead (split QNodes: @J runs the
//   circuit recorded and asks the runtime for the Jacobian, see
//   --cofactor-split-qnodes) gets a forward that calls @J, which computes the
//   outputs and d outputs / d last input in one execution, and saves only that
//   Jacobian; the reverse adds `jac^T couts` into the last input's shadow.
//   `@X` gets `cofactor.custom_gradient = [@X.fwd_impl, @X.rev_impl]`, and all
//   three get `llvm.emit_c_interface`: --cofactor-emit-enzyme-glue registers
//   their pointer-only C interfaces with Enzyme.
//
// Also checks the rule "a gradient is never silently zero": a function without
// a body reachable from a `gradient.vjp` callee must have a VJP (or be a
// runtime function or marked `cofactor.inactive`).
//
//===----------------------------------------------------------------------===//

#include "GradientUtils.h"

#include "cofactor/Gradient/Attributes.h"
#include "cofactor/Gradient/GradientOps.h"
#include "cofactor/Gradient/Passes.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace cofactor;

namespace {

constexpr char kEmitCInterface[] = "llvm.emit_c_interface";
constexpr int64_t kCallbackPrimal = 0; // CF_CALLBACK_PRIMAL
constexpr int64_t kCallbackVJP = 1;    // CF_CALLBACK_VJP

Value i64Const(OpBuilder &b, Location loc, int64_t v) {
  return b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(v));
}

/// The input count of a DPS function, from `cofactor.num_inputs`.
FailureOr<int64_t> numInputsOf(func::FuncOp fn) {
  auto attr = fn->getAttrOfType<IntegerAttr>(attr::kNumInputs);
  if (!attr || attr.getInt() < 0 ||
      attr.getInt() > (int64_t)fn.getNumArguments())
    return fn.emitError("@") << fn.getName() << " needs " << attr::kNumInputs
                             << " (the number of leading input arguments)";
  return attr.getInt();
}

LogicalResult checkDPS(func::FuncOp fn) {
  if (fn.getNumResults() != 0)
    return fn.emitError("@")
           << fn.getName() << " must be void (destination-passing style)";
  for (Type t : fn.getArgumentTypes())
    if (!isSupportedMemRef(t))
      return fn.emitError("@") << fn.getName()
                               << ": every argument must be a memref with the "
                                  "identity layout, got "
                               << t;
  return success();
}

/// `cf_rt_callback(id, kind, n, args)` where args holds the data pointers.
void emitTrampolineCall(OpBuilder &b, Location loc, ModuleOp module, int64_t id,
                        int64_t kind, ValueRange memrefs) {
  Type i64 = b.getI64Type();
  auto callee =
      getOrDeclare(module, "cf_rt_callback",
                   b.getFunctionType(
                       {i64, i64, i64, getVoidPtrType(b.getContext())}, {i64}));
  int64_t n = memrefs.size();
  // The pointer array as a stack memref of i64 (pointer-sized integers).
  auto arrayType = MemRefType::get({std::max<int64_t>(n, 1)}, i64);
  Value array = b.create<memref::AllocaOp>(loc, arrayType);
  for (int64_t i = 0; i < n; ++i) {
    Value index = b.create<arith::ConstantIndexOp>(loc, i);
    b.create<memref::StoreOp>(loc, dataAddress(b, loc, memrefs[i]), array,
                              index);
  }
  b.create<func::CallOp>(loc, callee,
                         ValueRange{i64Const(b, loc, id),
                                    i64Const(b, loc, kind), i64Const(b, loc, n),
                                    dataPointer(b, loc, array)});
}

/// Gives a body-less callback its trampoline body, and its VJP function when
/// the user attached one.
LogicalResult lowerCallback(func::FuncOp fn, ModuleOp module,
                            SymbolTable &symbols) {
  auto id = fn->getAttrOfType<IntegerAttr>(attr::kCallbackId).getInt();
  if (!fn.isExternal())
    return success(); // already lowered, or implemented in MLIR
  if (failed(checkDPS(fn)))
    return failure();
  Location loc = fn.getLoc();
  {
    Block *entry = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    emitTrampolineCall(b, loc, module, id, kCallbackPrimal,
                       entry->getArguments());
    b.create<func::ReturnOp>(loc);
    fn.setPrivate();
  }
  if (!fn->hasAttr(attr::kCallbackHasVJP) || fn->hasAttr(attr::kVJP))
    return success();
  FailureOr<int64_t> numInputs = numInputsOf(fn);
  if (failed(numInputs))
    return failure();
  ArrayRef<Type> types = fn.getArgumentTypes();
  SmallVector<Type> vjpTypes(types.begin(), types.end());
  vjpTypes.append(types.begin(), types.begin() + *numInputs);
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto vjp = mb.create<func::FuncOp>(loc, (fn.getName() + ".vjp").str(),
                                     mb.getFunctionType(vjpTypes, {}));
  vjp.setPrivate();
  symbols.insert(vjp);
  Block *entry = vjp.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(entry);
  emitTrampolineCall(b, loc, module, id, kCallbackVJP, entry->getArguments());
  b.create<func::ReturnOp>(loc);
  fn->setAttr(attr::kVJP, FlatSymbolRefAttr::get(vjp));
  return success();
}

/// Emits @X.fwd_impl and @X.rev_impl for a primal with `cofactor.vjp` or
/// `cofactor.jacobian`.
/// vjp[p] += sum over r of couts_flat[r] * jac[r, p], r running over the
/// cotangents' elements in order (row-major within each).
void accumulateJacobianProduct(OpBuilder &b, Location loc, Value jac,
                               ArrayRef<Value> couts, Value vjp) {
  int64_t base = 0;
  for (Value cout : couts) {
    auto type = cout.getType().cast<MemRefType>();
    forEachElement(
        b, loc, cout, [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
          Value row = nb.create<arith::ConstantIndexOp>(nloc, base);
          int64_t stride = 1;
          for (int64_t d = type.getRank() - 1; d >= 0; --d) {
            Value term = nb.create<arith::MulIOp>(
                nloc, ivs[d], nb.create<arith::ConstantIndexOp>(nloc, stride));
            row = nb.create<arith::AddIOp>(nloc, row, term);
            stride *= type.getDimSize(d);
          }
          Value ct = nb.create<memref::LoadOp>(nloc, cout, ivs);
          forEachElement(
              nb, nloc, vjp, [&](OpBuilder &ib, Location iloc, ValueRange p) {
                Value j =
                    ib.create<memref::LoadOp>(iloc, jac, ValueRange{row, p[0]});
                Value old = ib.create<memref::LoadOp>(iloc, vjp, p);
                Value prod = ib.create<arith::MulFOp>(iloc, ct, j);
                Value sum = ib.create<arith::AddFOp>(iloc, old, prod);
                ib.create<memref::StoreOp>(iloc, sum, vjp, p);
              });
        });
    base += type.getNumElements();
  }
}

LogicalResult emitCustomGradient(func::FuncOp primal, ModuleOp module,
                                 SymbolTable &symbols) {
  if (failed(checkDPS(primal)))
    return failure();
  FailureOr<int64_t> numInputsOr = numInputsOf(primal);
  if (failed(numInputsOr))
    return failure();
  int64_t numInputs = *numInputsOr;
  ArrayRef<Type> types = primal.getArgumentTypes();
  int64_t numOutputs = types.size() - numInputs;

  // Either a VJP (saved inputs -> J^T couts) or a Jacobian (computed in the
  // forward, saved).
  func::FuncOp vjp, jacobian;
  if (auto jacRef = primal->getAttrOfType<FlatSymbolRefAttr>(attr::kJacobian)) {
    jacobian = symbols.lookup<func::FuncOp>(jacRef.getValue());
    if (!jacobian)
      return primal.emitError(attr::kJacobian)
             << " of @" << primal.getName() << " does not name a func.func";
    auto last = numInputs ? types[numInputs - 1].dyn_cast<MemRefType>()
                          : MemRefType();
    auto jacType =
        jacobian.getNumArguments() == types.size() + 1
            ? jacobian.getArgumentTypes()[numInputs].dyn_cast<MemRefType>()
            : MemRefType();
    SmallVector<Type> expected(types.begin(), types.end());
    if (jacType)
      expected.insert(expected.begin() + numInputs, jacType);
    if (!last || last.getRank() != 1 ||
        !last.getElementType().isa<Float64Type>() || !jacType ||
        jacType.getRank() != 2 || jacType.isDynamicDim(0) ||
        !jacType.getElementType().isa<Float64Type>() ||
        jacobian.getFunctionType() !=
            FunctionType::get(module.getContext(), expected, {}))
      return jacobian.emitError("the Jacobian @")
             << jacobian.getName() << " of @" << primal.getName()
             << " must take (ins..., jac: memref<Rx?xf64>, outs...), the last "
                "input being a 1-D f64 memref";
  } else {
    auto vjpRef = primal->getAttrOfType<FlatSymbolRefAttr>(attr::kVJP);
    vjp = vjpRef ? symbols.lookup<func::FuncOp>(vjpRef.getValue()) : nullptr;
    if (!vjp)
      return primal.emitError(attr::kVJP)
             << " of @" << primal.getName() << " does not name a func.func";
    SmallVector<Type> vjpTypes(types.begin(), types.end());
    vjpTypes.append(types.begin(), types.begin() + numInputs);
    if (vjp.getFunctionType() !=
        FunctionType::get(module.getContext(), vjpTypes, {}))
      return vjp.emitError("the VJP @")
             << vjp.getName() << " of @" << primal.getName()
             << " must take (ins..., couts..., vjps...) and return nothing";
  }
  // The Jacobian's buffer: R x (elements of the last input).
  auto allocJacobian = [&](OpBuilder &b, Location loc, Value lastInput) {
    auto jacType = jacobian.getArgumentTypes()[numInputs].cast<MemRefType>();
    Value cols = b.create<memref::DimOp>(loc, lastInput, 0);
    SmallVector<Value> dynamic; // R is static (checked above)
    if (jacType.isDynamicDim(1))
      dynamic.push_back(cols);
    return b.create<memref::AllocOp>(loc, jacType, dynamic).getResult();
  };

  Location loc = primal.getLoc();
  MLIRContext *ctx = module.getContext();
  Type i64 = IntegerType::get(ctx, 64);
  Type voidPtr = getVoidPtrType(ctx);
  SmallVector<Type> interleaved;
  for (Type t : types)
    interleaved.append({t, t});
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto makeFunc = [&](StringRef suffix, FunctionType type) {
    auto fn =
        mb.create<func::FuncOp>(loc, (primal.getName() + suffix).str(), type);
    fn.setPrivate();
    fn->setAttr(kEmitCInterface, UnitAttr::get(ctx));
    symbols.insert(fn); // renames on a clash
    return fn;
  };
  auto tapeSave =
      getOrDeclare(module, "cf_rt_tape_save",
                   FunctionType::get(ctx, {i64, voidPtr, i64}, {i64}));
  auto tapeLoad =
      getOrDeclare(module, "cf_rt_tape_load",
                   FunctionType::get(ctx, {i64, i64, voidPtr, i64}, {i64}));
  auto tapeFree = getOrDeclare(module, "cf_rt_tape_free",
                               FunctionType::get(ctx, {i64}, {i64}));

  // fwd_impl: run the primal, keep copies of the inputs (or run the Jacobian
  // function and keep the Jacobian).
  auto fwd = makeFunc(".fwd_impl", FunctionType::get(ctx, interleaved, {i64}));
  {
    Block *entry = fwd.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    SmallVector<Value> primalArgs;
    for (size_t k = 0; k < types.size(); ++k)
      primalArgs.push_back(entry->getArgument(2 * k));
    Value tape = i64Const(b, loc, 0);
    auto save = [&](Value buffer) {
      tape = b.create<func::CallOp>(loc, tapeSave,
                                    ValueRange{tape, dataPointer(b, loc, buffer),
                                               byteSize(b, loc, buffer)})
                 .getResult(0);
    };
    if (jacobian) {
      Value jac = allocJacobian(b, loc, primalArgs[numInputs - 1]);
      SmallVector<Value> jacArgs(primalArgs);
      jacArgs.insert(jacArgs.begin() + numInputs, jac);
      b.create<func::CallOp>(loc, jacobian, jacArgs);
      save(jac);
      b.create<memref::DeallocOp>(loc, jac);
    } else {
      b.create<func::CallOp>(loc, primal, primalArgs);
      for (int64_t i = 0; i < numInputs; ++i)
        save(primalArgs[i]);
    }
    b.create<func::ReturnOp>(loc, tape);
  }

  // rev_impl: din += V(saved ins, couts) (or d(last in) += jac^T couts);
  // dout = 0.
  SmallVector<Type> revTypes(interleaved);
  revTypes.push_back(i64);
  auto rev = makeFunc(".rev_impl", FunctionType::get(ctx, revTypes, {}));
  {
    Block *entry = rev.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    Value tape = entry->getArguments().back();
    auto primalArg = [&](int64_t k) { return entry->getArgument(2 * k); };
    auto shadowArg = [&](int64_t k) { return entry->getArgument(2 * k + 1); };
    auto aliases = [&](int64_t k) {
      return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                     dataAddress(b, loc, primalArg(k)),
                                     dataAddress(b, loc, shadowArg(k)));
    };
    SmallVector<Value> temporaries, vjpArgs;
    for (int64_t i = 0; i < numInputs && vjp; ++i) {
      Value saved = allocLike(b, loc, primalArg(i));
      b.create<func::CallOp>(loc, tapeLoad,
                             ValueRange{tape, i64Const(b, loc, i),
                                        dataPointer(b, loc, saved),
                                        byteSize(b, loc, saved)});
      temporaries.push_back(saved);
      vjpArgs.push_back(saved);
    }
    for (int64_t j = numInputs; j < numInputs + numOutputs; ++j) {
      Value cotangent = allocLike(b, loc, primalArg(j));
      Value dout = shadowArg(j);
      auto ifOp = b.create<scf::IfOp>(loc, aliases(j), /*withElse=*/true);
      {
        OpBuilder tb = ifOp.getThenBodyBuilder();
        fillZero(tb, loc, cotangent);
      }
      {
        OpBuilder eb = ifOp.getElseBodyBuilder();
        eb.create<memref::CopyOp>(loc, dout, cotangent);
        fillZero(eb, loc, dout);
      }
      temporaries.push_back(cotangent);
      vjpArgs.push_back(cotangent);
    }
    if (jacobian) {
      // d(last input) += jac^T couts (vjpArgs holds just the cotangents)
      Value jac = allocJacobian(b, loc, primalArg(numInputs - 1));
      b.create<func::CallOp>(loc, tapeLoad,
                             ValueRange{tape, i64Const(b, loc, 0),
                                        dataPointer(b, loc, jac),
                                        byteSize(b, loc, jac)});
      temporaries.push_back(jac);
      auto ifOp = b.create<scf::IfOp>(loc, aliases(numInputs - 1),
                                      /*withElse=*/true);
      OpBuilder eb = ifOp.getElseBodyBuilder();
      accumulateJacobianProduct(eb, loc, jac, vjpArgs,
                                shadowArg(numInputs - 1));
    } else {
      SmallVector<Value> products;
      for (int64_t i = 0; i < numInputs; ++i) {
        Value product = allocLike(b, loc, primalArg(i));
        fillZero(b, loc, product);
        temporaries.push_back(product);
        vjpArgs.push_back(product);
        products.push_back(product);
      }
      b.create<func::CallOp>(loc, vjp, vjpArgs);
      for (int64_t i = 0; i < numInputs; ++i) {
        auto type = primalArg(i).getType().cast<MemRefType>();
        if (!type.getElementType().isa<FloatType>())
          continue; // integer inputs have no derivative
        auto ifOp = b.create<scf::IfOp>(loc, aliases(i), /*withElse=*/true);
        OpBuilder eb = ifOp.getElseBodyBuilder();
        accumulate(eb, loc, shadowArg(i), products[i]);
      }
    }
    b.create<func::CallOp>(loc, tapeFree, ValueRange{tape});
    for (Value t : temporaries)
      b.create<memref::DeallocOp>(loc, t);
    b.create<func::ReturnOp>(loc);
  }

  primal->setAttr(kEmitCInterface, UnitAttr::get(ctx));
  primal->setAttr(attr::kCustomGradient,
                  ArrayAttr::get(ctx, {FlatSymbolRefAttr::get(fwd),
                                       FlatSymbolRefAttr::get(rev)}));
  return success();
}

/// Every function a `gradient.vjp` callee may call, directly or not, without
/// looking into functions that have a custom gradient.
LogicalResult checkGradientRules(ModuleOp module, SymbolTable &symbols) {
  llvm::SetVector<func::FuncOp> reached;
  module.walk([&](gradient::VJPOp op) {
    if (auto fn = symbols.lookup<func::FuncOp>(op.getCallee()))
      reached.insert(fn);
  });
  for (size_t k = 0; k < reached.size(); ++k) {
    func::FuncOp fn = reached[k];
    // Runtime functions are inactive (--cofactor-emit-enzyme-glue says so to
    // Enzyme), and Enzyme's own annotations are no calls at all.
    if (hasGradientRule(fn) || fn->hasAttr(attr::kInactive) ||
        fn.getName().startswith("cf_rt_") ||
        fn.getName().startswith("__enzyme_"))
      continue;
    if (fn->hasAttr(attr::kCallbackId))
      return fn.emitError("callback @")
             << fn.getName()
             << " is differentiated but has no VJP: attach .fwd and .bwd";
    if (fn.isExternal()) {
      return fn.emitError("@") << fn.getName()
                               << " is differentiated but has no body and "
                                  "no gradient rule ("
                               << attr::kVJP << ")";
    }
    fn.walk([&](func::CallOp call) {
      if (auto callee = symbols.lookup<func::FuncOp>(call.getCallee()))
        reached.insert(callee);
    });
  }
  return success();
}

struct CustomGradientsPass
    : public PassWrapper<CustomGradientsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CustomGradientsPass)

  StringRef getArgument() const final { return "cofactor-custom-gradients"; }
  StringRef getDescription() const final {
    return "Emit fwd_impl/rev_impl custom-gradient functions for opaque "
           "callees (functions with cofactor.vjp, Python callbacks)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry
        .insert<arith::ArithmeticDialect, func::FuncDialect, LLVM::LLVMDialect,
                memref::MemRefDialect, scf::SCFDialect>();
  }

  void runOnOperation() final {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> callbacks, primals;
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn->hasAttr(attr::kCallbackId))
        callbacks.push_back(fn);
    for (func::FuncOp fn : callbacks)
      if (failed(lowerCallback(fn, module, symbols)))
        return signalPassFailure();
    if (failed(checkGradientRules(module, symbols)))
      return signalPassFailure();
    for (auto fn : module.getOps<func::FuncOp>())
      if ((fn->hasAttr(attr::kVJP) || fn->hasAttr(attr::kJacobian)) &&
          !fn->hasAttr(attr::kCustomGradient))
        primals.push_back(fn);
    for (func::FuncOp fn : primals)
      if (failed(emitCustomGradient(fn, module, symbols)))
        return signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createCustomGradientsPass() {
  return std::make_unique<CustomGradientsPass>();
}
