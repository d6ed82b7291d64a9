//===- Passes.h - cofactor's MLIR passes ------------------------*- C++ -*-===//

#ifndef COFACTOR_TRANSFORMS_PASSES_H
#define COFACTOR_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace cofactor {

/// `--lower-quantum-to-runtime`: every quantum op becomes a call of the runtime C
/// ABI (runtime/include/cofactor/runtime.h).
std::unique_ptr<mlir::Pass> createLowerQuantumToRuntimePass();

/// `--cofactor-fuse-loops`: adjacent elementwise scf.for loops of the same
/// iterations become one loop, and the buffers between them values
/// (lib/Transforms/FuseLoops.cpp).
std::unique_ptr<mlir::Pass> createFuseLoopsPass();
void registerFuseLoopsPass();

/// `--cofactor-convert-math-if-any`: `convert-math-to-llvm,convert-math-to-libm` on a
/// module with a math op, nothing on another (lib/Transforms/ConvertMathIfAny.cpp).
std::unique_ptr<mlir::Pass> createConvertMathIfAnyPass();
void registerConvertMathIfAnyPass();

/// `--cofactor-convert-to-llvm`: convert-scf-to-cf, convert-arith-to-llvm,
/// convert-memref-to-llvm, convert-func-to-llvm and convert-cf-to-llvm as one dialect
/// conversion (lib/Transforms/ConvertToLLVM.cpp).
std::unique_ptr<mlir::Pass> createConvertToLLVMPass();
void registerConvertToLLVMPass();

/// Registers all of cofactor's passes with the global pass registry.
void registerCofactorPasses();

} // namespace cofactor

#endif // COFACTOR_TRANSFORMS_PASSES_H
