//===- RuntimeCallBuilder.cpp - emit calls into the runtime's C ABI -------===//

#include "RuntimeCallBuilder.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/FunctionInterfaces.h"

using namespace mlir;
using namespace cofactor;

static LLVM::LLVMPointerType pointerTo(Type elementType) {
  return LLVM::LLVMPointerType::get(elementType);
}

Value StackArrays::get(OpBuilder &builder, Operation *user, Type elementType,
                       int64_t length, unsigned slot) {
  // The entry block of the enclosing function: LLVM treats allocas there as
  // static stack slots. (Nearer allocation scopes, such as scf.for bodies, would
  // lower to allocas that grow the stack on every iteration.)
  Operation *scope = user->getParentOfType<FunctionOpInterface>();
  if (!scope)
    scope = user->getParentWithTrait<OpTrait::IsIsolatedFromAbove>();
  Block *entry = &scope->getRegion(0).front();
  Value &array = arrays[Key(entry, elementType, length, slot)];
  if (array)
    return array;

  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  Location loc = user->getLoc();
  Value size = builder.create<LLVM::ConstantOp>(
      loc, builder.getI64Type(), builder.getI64IntegerAttr(length));
  array = builder.create<LLVM::AllocaOp>(loc, pointerTo(elementType), size,
                                         /*alignment=*/0);
  return array;
}

RuntimeCallBuilder::RuntimeCallBuilder(OpBuilder &builder, Operation *op,
                                       LLVMTypeConverter &llvmTypes,
                                       StackArrays &stackArrays)
    : builder(builder), op(op), loc(op->getLoc()), llvmTypes(llvmTypes),
      stackArrays(stackArrays) {}

Value RuntimeCallBuilder::i64(int64_t value) {
  return builder.create<arith::ConstantIntOp>(loc, value, 64);
}

Value RuntimeCallBuilder::i8(int64_t value) {
  return builder.create<arith::ConstantIntOp>(loc, value, 8);
}

Value RuntimeCallBuilder::array(Type elementType, ValueRange values) {
  if (values.empty())
    return builder.create<LLVM::NullOp>(loc, pointerTo(elementType));
  // Arrays of one call that share type and length need distinct slots.
  auto shape = std::make_pair(elementType, int64_t(values.size()));
  unsigned slot = llvm::count(arrayShapes, shape);
  arrayShapes.push_back(shape);
  Value array =
      stackArrays.get(builder, op, elementType, values.size(), slot);
  for (auto it : llvm::enumerate(values)) {
    Value index = builder.create<LLVM::ConstantOp>(
        loc, builder.getI64Type(), builder.getI64IntegerAttr(it.index()));
    Value element = builder.create<LLVM::GEPOp>(loc, pointerTo(elementType),
                                                array, ValueRange{index});
    builder.create<LLVM::StoreOp>(loc, it.value(), element);
  }
  return array;
}

Value RuntimeCallBuilder::i8Array(ArrayRef<int64_t> values) {
  SmallVector<Value> bytes;
  for (int64_t value : values)
    bytes.push_back(i8(value));
  return array(builder.getI8Type(), bytes);
}

Value RuntimeCallBuilder::dataPointer(Value memref) {
  // The memref's LLVM descriptor {allocated, aligned, offset, sizes, strides}:
  // after the standard lowering this cast meets the descriptor the memref
  // became and reconcile-unrealized-casts removes both.
  Type descriptorType = llvmTypes.convertType(memref.getType());
  Value descriptor =
      builder.create<UnrealizedConversionCastOp>(loc, descriptorType, memref)
          .getResult(0);
  Type pointerType =
      descriptorType.cast<LLVM::LLVMStructType>().getBody()[1];
  Value aligned = builder.create<LLVM::ExtractValueOp>(
      loc, pointerType, descriptor, builder.getI64ArrayAttr(1));
  Value offset = builder.create<LLVM::ExtractValueOp>(
      loc, builder.getI64Type(), descriptor, builder.getI64ArrayAttr(2));
  return builder.create<LLVM::GEPOp>(loc, pointerType, aligned,
                                     ValueRange{offset});
}

Value RuntimeCallBuilder::constantString(StringRef symbolPrefix,
                                         StringRef text) {
  auto module = op->getParentOfType<ModuleOp>();
  std::string symbol = (symbolPrefix + text).str();
  auto global = module.lookupSymbol<LLVM::GlobalOp>(symbol);
  if (!global) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    std::string bytes = text.str();
    bytes.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(builder.getI8Type(), bytes.size());
    global = builder.create<LLVM::GlobalOp>(
        loc, type, /*isConstant=*/true, LLVM::Linkage::Internal, symbol,
        builder.getStringAttr(bytes));
  }
  Value address = builder.create<LLVM::AddressOfOp>(loc, global);
  Value zero = builder.create<LLVM::ConstantOp>(loc, builder.getI64Type(),
                                                builder.getI64IntegerAttr(0));
  return builder.create<LLVM::GEPOp>(loc, pointerTo(builder.getI8Type()),
                                     address, ValueRange{zero, zero});
}

func::CallOp RuntimeCallBuilder::call(StringRef name, TypeRange results,
                                      ValueRange args) {
  auto module = op->getParentOfType<ModuleOp>();
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    callee = builder.create<func::FuncOp>(
        module.getLoc(), name,
        builder.getFunctionType(args.getTypes(), results));
    callee.setPrivate();
  }
  return builder.create<func::CallOp>(loc, callee, args);
}
