//===- GradientUtils.cpp - helpers shared by the gradient passes ----------===//

#include "GradientUtils.h"

#include "cofactor/Gradient/Attributes.h"
#include "cofactor/Gradient/GradientOps.h"
#include "cofactor/Quantum/QuantumOps.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

Type cofactor::getVoidPtrType(MLIRContext *ctx) {
  return LLVM::LLVMPointerType::get(IntegerType::get(ctx, 8));
}

bool cofactor::isSupportedMemRef(Type type) {
  auto memref = type.dyn_cast<MemRefType>();
  return memref && memref.getLayout().isIdentity();
}

/// The memref's LLVM descriptor and the type of its element pointer.
static std::pair<Value, Type> descriptor(OpBuilder &b, Location loc,
                                         Value memref) {
  // MLIR 15 has no memref.extract_aligned_pointer_as_index: read the pointer
  // from the LLVM descriptor through a cast that meets the descriptor the
  // memref becomes in the standard lowering (reconcile-unrealized-casts then
  // removes both casts).
  LLVMTypeConverter converter(b.getContext());
  Type descType = converter.convertType(memref.getType());
  Value desc =
      b.create<UnrealizedConversionCastOp>(loc, descType, memref).getResult(0);
  return {desc, descType.cast<LLVM::LLVMStructType>().getBody()[1]};
}

Value cofactor::dataPointer(OpBuilder &b, Location loc, Value memref) {
  auto [desc, elementPtr] = descriptor(b, loc, memref);
  Value aligned = b.create<LLVM::ExtractValueOp>(loc, elementPtr, desc,
                                                 b.getI64ArrayAttr(1));
  Value offset = b.create<LLVM::ExtractValueOp>(loc, b.getI64Type(), desc,
                                                b.getI64ArrayAttr(2));
  Value start =
      b.create<LLVM::GEPOp>(loc, elementPtr, aligned, ValueRange{offset});
  return b.create<LLVM::BitcastOp>(loc, getVoidPtrType(b.getContext()), start);
}

/// The aligned pointer itself: where the loads and stores of a memref with
/// the identity layout (static offset 0) address, as Enzyme sees them (the
/// descriptor's offset field is a runtime value to its type analysis).
static Value alignedPointer(OpBuilder &b, Location loc, Value memref) {
  auto [desc, elementPtr] = descriptor(b, loc, memref);
  Value aligned = b.create<LLVM::ExtractValueOp>(loc, elementPtr, desc,
                                                 b.getI64ArrayAttr(1));
  return b.create<LLVM::BitcastOp>(
      loc, cofactor::getVoidPtrType(b.getContext()), aligned);
}

Value cofactor::dataAddress(OpBuilder &b, Location loc, Value memref) {
  return b.create<LLVM::PtrToIntOp>(loc, b.getI64Type(),
                                    dataPointer(b, loc, memref));
}

Value cofactor::byteSize(OpBuilder &b, Location loc, Value memref) {
  auto type = memref.getType().cast<MemRefType>();
  Type element = type.getElementType();
  int64_t elementBytes =
      element.isIndex() ? 8 : (element.getIntOrFloatBitWidth() + 7) / 8;
  Value size = b.create<arith::ConstantIndexOp>(loc, elementBytes);
  for (int64_t d = 0; d < type.getRank(); ++d) {
    Value dim = b.create<memref::DimOp>(loc, memref, d);
    size = b.create<arith::MulIOp>(loc, size, dim);
  }
  return b.create<arith::IndexCastOp>(loc, b.getI64Type(), size);
}

Value cofactor::allocLike(OpBuilder &b, Location loc, Value like) {
  auto type = like.getType().cast<MemRefType>();
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynamicSizes.push_back(b.create<memref::DimOp>(loc, like, d));
  return b.create<memref::AllocOp>(loc, type, dynamicSizes);
}

void cofactor::forEachElement(
    OpBuilder &b, Location loc, Value memref,
    function_ref<void(OpBuilder &, Location, ValueRange)> body) {
  auto type = memref.getType().cast<MemRefType>();
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    lbs.push_back(b.create<arith::ConstantIndexOp>(loc, 0));
    ubs.push_back(b.create<memref::DimOp>(loc, memref, d));
    steps.push_back(b.create<arith::ConstantIndexOp>(loc, 1));
  }
  if (lbs.empty()) {
    body(b, loc, ValueRange());
    return;
  }
  scf::buildLoopNest(b, loc, lbs, ubs, steps,
                     [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
                       body(nb, nloc, ivs);
                     });
}

static Value zeroOf(OpBuilder &b, Location loc, Type type) {
  if (type.isIndex())
    return b.create<arith::ConstantIndexOp>(loc, 0);
  return b.create<arith::ConstantOp>(loc, b.getZeroAttr(type));
}

void cofactor::fillZero(OpBuilder &b, Location loc, Value memref) {
  Type element = memref.getType().cast<MemRefType>().getElementType();
  Value zero = zeroOf(b, loc, element);
  forEachElement(b, loc, memref,
                 [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
                   nb.create<memref::StoreOp>(nloc, zero, memref, ivs);
                 });
}

void cofactor::accumulate(OpBuilder &b, Location loc, Value dst, Value src) {
  forEachElement(b, loc, dst,
                 [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
                   Value old = nb.create<memref::LoadOp>(nloc, dst, ivs);
                   Value add = nb.create<memref::LoadOp>(nloc, src, ivs);
                   Value sum = nb.create<arith::AddFOp>(nloc, old, add);
                   nb.create<memref::StoreOp>(nloc, sum, dst, ivs);
                 });
}

void cofactor::beforeEachReturn(
    func::FuncOp fn, function_ref<void(OpBuilder &, func::ReturnOp)> body) {
  SmallVector<func::ReturnOp> returns;
  fn.walk([&](func::ReturnOp op) { returns.push_back(op); });
  for (func::ReturnOp ret : returns) {
    OpBuilder b(ret);
    body(b, ret);
  }
}

void cofactor::hintDoubles(OpBuilder &b, Location loc, Value memref) {
  auto type = memref.getType().dyn_cast<MemRefType>();
  if (!type || !type.hasStaticShape() || !isSupportedMemRef(type))
    return;
  Type element = type.getElementType();
  bool complex = element.isa<ComplexType>();
  if (complex)
    element = element.cast<ComplexType>().getElementType();
  if (!element.isF64() || type.getNumElements() == 0)
    return;
  // (Enzyme's type trees keep offsets up to 100 bytes: more would only cost time)
  int64_t bytes =
      std::min<int64_t>(type.getNumElements() * (complex ? 16 : 8), 128);
  MLIRContext *ctx = b.getContext();
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  auto hint = getOrDeclare(module, "__enzyme_double",
                           FunctionType::get(ctx,
                                             {getVoidPtrType(ctx),
                                              IntegerType::get(ctx, 64)},
                                             {}));
  Value size = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(bytes));
  b.create<func::CallOp>(loc, hint,
                         ValueRange{alignedPointer(b, loc, memref), size});
}

func::FuncOp cofactor::getOrDeclare(ModuleOp module, StringRef name,
                                    FunctionType type) {
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto fn = b.create<func::FuncOp>(module.getLoc(), name, type);
  fn.setPrivate();
  return fn;
}

bool cofactor::hasGradientRule(mlir::func::FuncOp fn) {
  return fn->hasAttr(attr::kCustomGradient) || fn->hasAttr(attr::kVJP) ||
         fn->hasAttr(attr::kJacobian);
}

llvm::SmallVector<mlir::func::FuncOp>
cofactor::differentiatedFunctions(mlir::ModuleOp module, mlir::SymbolTable &symbols) {
  llvm::SetVector<func::FuncOp> reached;
  module.walk([&](gradient::VJPOp op) {
    if (auto fn = symbols.lookup<func::FuncOp>(op.getCallee()))
      reached.insert(fn);
  });
  for (size_t k = 0; k < reached.size(); ++k) {
    func::FuncOp fn = reached[k];
    if (hasGradientRule(fn))
      continue;
    fn.walk([&](func::CallOp call) {
      if (auto callee = symbols.lookup<func::FuncOp>(call.getCallee()))
        reached.insert(callee);
    });
  }
  SmallVector<func::FuncOp> result;
  for (func::FuncOp fn : reached.getArrayRef())
    if (!hasGradientRule(fn))
      result.push_back(fn);
  return result;
}

SmallVector<OpOperand *> cofactor::gateParameters(Operation *op) {
  SmallVector<OpOperand *> params;
  if (auto gate = dyn_cast<quantum::GateOp>(op)) {
    for (uint64_t k = 0; k < gate.getNumParams(); ++k)
      params.push_back(&op->getOpOperand(k));
  } else if (isa<quantum::PauliRotOp>(op)) {
    params.push_back(&op->getOpOperand(0));
  }
  return params;
}

StringRef cofactor::recordedJacobianFunction(func::FuncOp qnode) {
  auto method = qnode->getAttrOfType<StringAttr>(attr::kDiffMethod);
  return method && method.getValue() == "parameter-shift"
             ? "cf_rt_jacobian_recorded_shift"
             : "cf_rt_jacobian_recorded";
}

void cofactor::recordJacobian(
    func::FuncOp fn, StringRef runtimeJacobian, Value jac, int64_t numResults,
    function_ref<Value(OpBuilder &, Location)> numParams) {
  MLIRContext *ctx = fn.getContext();
  auto module = fn->getParentOfType<ModuleOp>();
  Type i64 = IntegerType::get(ctx, 64);
  auto tapeStart =
      getOrDeclare(module, "cf_rt_tape_start", FunctionType::get(ctx, {}, {}));
  auto tapeStop =
      getOrDeclare(module, "cf_rt_tape_stop", FunctionType::get(ctx, {}, {}));
  auto jacobian =
      getOrDeclare(module, runtimeJacobian,
                   FunctionType::get(ctx, {getVoidPtrType(ctx), i64, i64}, {}));
  auto askJacobian = [&](OpBuilder &b, Location loc) {
    Value cols = numParams(b, loc);
    Value rows =
        b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(numResults));
    // Stop first: a parameter-shift Jacobian replays the stopped tape.
    b.create<func::CallOp>(loc, tapeStop, ValueRange());
    b.create<func::CallOp>(loc, jacobian,
                           ValueRange{dataPointer(b, loc, jac), rows, cols});
  };
  bool released = false;
  fn.walk([&](Operation *op) {
    if (isa<quantum::DeviceAcquireOp>(op)) {
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      b.create<func::CallOp>(op->getLoc(), tapeStart, ValueRange());
    } else if (isa<quantum::DeviceReleaseOp>(op)) {
      OpBuilder b(op);
      askJacobian(b, op->getLoc());
      released = true;
    }
  });
  if (!released) // the device stays current after the circuit
    beforeEachReturn(fn, [&](OpBuilder &b, func::ReturnOp ret) {
      askJacobian(b, ret.getLoc());
    });
}
