//===- RuntimeCallBuilder.h - emit calls into the runtime's C ABI -*- C++ -*-===//
//
// The pieces every lowered quantum op needs: integer constants, stack arrays of
// wires and parameters, data pointers of memrefs, constant strings, and a call
// of a `cf_rt_*` function that is declared in the module on first use.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_LIB_TRANSFORMS_RUNTIMECALLBUILDER_H
#define COFACTOR_LIB_TRANSFORMS_RUNTIMECALLBUILDER_H

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <tuple>

namespace cofactor {

/// Stack arrays shared by all runtime calls of one pass run. The runtime reads
/// its array arguments during the call only, so one alloca per (allocation
/// scope, element type, length, slot within a call) serves every call, and a
/// circuit inside a loop does not grow the stack.
class StackArrays {
public:
  /// An `!llvm.ptr<elementType>` to `length` elements, allocated at the start
  /// of the function around `user`. `slot` tells apart the arrays of one call
  /// that have the same type and length.
  mlir::Value get(mlir::OpBuilder &builder, mlir::Operation *user,
                  mlir::Type elementType, int64_t length, unsigned slot);

private:
  using Key = std::tuple<mlir::Block *, mlir::Type, int64_t, unsigned>;
  llvm::DenseMap<Key, mlir::Value> arrays;
};

/// Builds the arguments of one runtime call before `op` and the call itself.
class RuntimeCallBuilder {
public:
  RuntimeCallBuilder(mlir::OpBuilder &builder, mlir::Operation *op,
                     mlir::LLVMTypeConverter &llvmTypes,
                     StackArrays &stackArrays);

  mlir::Value i64(int64_t value);
  mlir::Value i8(int64_t value);

  /// A pointer to a stack array holding `values` (each of `elementType`), or a
  /// null pointer when `values` is empty.
  mlir::Value array(mlir::Type elementType, mlir::ValueRange values);
  /// An i8 array of the given integers (control values), or a null pointer.
  mlir::Value i8Array(llvm::ArrayRef<int64_t> values);

  /// The address of the first element of `memref` (aligned pointer plus
  /// offset), as `!llvm.ptr<element type>`.
  mlir::Value dataPointer(mlir::Value memref);

  /// An `!llvm.ptr<i8>` to a NUL-terminated constant copy of `text`, kept in an
  /// internal global named `<symbolPrefix><text>` (so `text` must be a valid
  /// symbol suffix).
  mlir::Value constantString(llvm::StringRef symbolPrefix,
                             llvm::StringRef text);

  /// Calls the runtime function `name`, declaring it as a private `func.func`
  /// with the argument types of `args` when the module lacks it.
  mlir::func::CallOp call(llvm::StringRef name, mlir::TypeRange results,
                          mlir::ValueRange args);

private:
  mlir::OpBuilder &builder;
  mlir::Operation *op;
  mlir::Location loc;
  mlir::LLVMTypeConverter &llvmTypes;
  StackArrays &stackArrays;
  /// (element type, length) of each stack array of this call so far.
  llvm::SmallVector<std::pair<mlir::Type, int64_t>> arrayShapes;
};

} // namespace cofactor

#endif // COFACTOR_LIB_TRANSFORMS_RUNTIMECALLBUILDER_H
