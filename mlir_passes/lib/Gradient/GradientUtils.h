//===- GradientUtils.h - helpers shared by the gradient passes --*- C++ -*-===//
//
// Builders for the func/memref/scf code the gradient passes emit around memref
// arguments: raw data pointers for the runtime, byte sizes, element loops,
// runtime declarations, and the recording of a circuit's Jacobian.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_LIB_GRADIENT_GRADIENTUTILS_H
#define COFACTOR_LIB_GRADIENT_GRADIENTUTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"

namespace cofactor {

/// The address of a memref's first element as `!llvm.ptr<i8>`, as the
/// runtime's `void *` parameters expect.
mlir::Value dataPointer(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value memref);
/// The same as an i64 (to compare, or to store into an i64 array).
mlir::Value dataAddress(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value memref);
/// The size in bytes of a memref's data, as an i64.
mlir::Value byteSize(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value memref);
/// A fresh `memref.alloc` with the type and (dynamic) sizes of `like`.
mlir::Value allocLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Value like);
/// Calls `body(ivs)` inside a loop nest over every element of `memref`.
void forEachElement(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref,
                    llvm::function_ref<void(mlir::OpBuilder &, mlir::Location,
                                            mlir::ValueRange)>
                        body);
/// Stores zero into every element of `memref`.
void fillZero(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref);
/// `dst[...] += src[...]` elementwise (floating-point element types only).
void accumulate(mlir::OpBuilder &b, mlir::Location loc, mlir::Value dst,
                mlir::Value src);
/// Calls `body(builder, ret)` with a builder before every `func.return` of
/// `fn`.
void beforeEachReturn(
    mlir::func::FuncOp fn,
    llvm::function_ref<void(mlir::OpBuilder &, mlir::func::ReturnOp)> body);
/// The private declaration `name` of `type`, created if the module lacks it.
mlir::func::FuncOp getOrDeclare(mlir::ModuleOp module, llvm::StringRef name,
                                mlir::FunctionType type);
/// `__enzyme_double(ptr, bytes)` on a memref of f64 or complex<f64> with a
/// static shape (others get nothing): tells Enzyme's type analysis that the
/// buffer holds doubles. Without it a buffer that only opaque code writes (a
/// QNode's quantum part) or that is only loaded, its value going straight into
/// a phi (a branch's value, a loop's carry) and out again, has no type, and
/// Enzyme stops with "Cannot deduce type of phi". Enzyme erases the calls.
void hintDoubles(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref);
/// Whether the gradient passes can handle values of this type: memrefs with the
/// identity layout (contiguous, offset 0), as the frontend emits.
bool isSupportedMemRef(mlir::Type type);

/// Whether Enzyme treats `fn` as opaque with a gradient of ours: a custom
/// gradient already emitted, or the VJP / Jacobian it is emitted from.
bool hasGradientRule(mlir::func::FuncOp fn);

/// The functions Enzyme differentiates: the callees of `gradient.vjp` ops and
/// their callees, without descending into functions that have a custom
/// gradient (which are not in the result either).
llvm::SmallVector<mlir::func::FuncOp>
differentiatedFunctions(mlir::ModuleOp module, mlir::SymbolTable &symbols);
/// `!llvm.ptr<i8>`.
mlir::Type getVoidPtrType(mlir::MLIRContext *ctx);

/// The gate-parameter operands of a quantum op (a gate's parameters, a
/// PauliRot's angle; empty for every other op), in the order in which
/// --cofactor-split-qnodes numbers them.
llvm::SmallVector<mlir::OpOperand *> gateParameters(mlir::Operation *op);

/// The runtime function that writes the Jacobian of a recorded circuit, for the
/// `cofactor.diff_method` of `qnode`: `cf_rt_jacobian_recorded` (the adjoint
/// method, for "adjoint", "best" and no method), or
/// `cf_rt_jacobian_recorded_shift` for "parameter-shift" (it replays the
/// circuit with shifted parameters, sampled when the device has shots).
llvm::StringRef recordedJacobianFunction(mlir::func::FuncOp qnode);

/// Makes the circuit in `fn` record itself and ask the runtime for its
/// Jacobian, as --cofactor-split-qnodes and --cofactor-direct-qnode-gradients
/// both need: `cf_rt_tape_start` right after each `quantum.device_acquire`;
/// before each `quantum.device_release` (or before every `func.return` if the
/// circuit releases nothing: the device stays current after it),
/// `cf_rt_tape_stop` then `runtimeJacobian(jac, numResults, P)`, which writes
/// the Jacobian of the recorded measurement results (rows) with respect to the
/// recorded gate parameters (columns) into the memref `jac`. `numParams`
/// builds the i64 P at each such place.
void recordJacobian(
    mlir::func::FuncOp fn, llvm::StringRef runtimeJacobian, mlir::Value jac,
    int64_t numResults,
    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location)>
        numParams);

} // namespace cofactor

#endif // COFACTOR_LIB_GRADIENT_GRADIENTUTILS_H
