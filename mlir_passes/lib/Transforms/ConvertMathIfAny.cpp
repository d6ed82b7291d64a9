//===- ConvertMathIfAny.cpp - the math lowering, for modules with math ----===//
//
// `--cofactor-convert-math-if-any` runs `convert-math-to-llvm,convert-math-to-libm` (as a
// nested pipeline, so exactly those passes) on a module that holds an op of the math
// dialect, and leaves any other module as it is. A traced circuit or its gradient has no
// math op (the runtime computes the gates), yet the two passes cost it a dialect
// conversion's walk and a greedy rewrite of the whole module (folding every op on the
// way, which changes nothing at that point: the libraries are byte for byte the same):
// 0.5 M of the 12.5 M instructions of the 4-qubit circuit's compile, 1.4 M of the 50
// descent steps' 71 M (compiler/README.md, session 18). The in-process driver puts this
// pass in their place (compiler/Lowering.cpp).
//
//===----------------------------------------------------------------------===//
#include "cofactor/Transforms/Passes.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kMathPipeline = "convert-math-to-llvm,convert-math-to-libm";

struct ConvertMathIfAnyPass
    : public PassWrapper<ConvertMathIfAnyPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ConvertMathIfAnyPass)

  StringRef getArgument() const final { return "cofactor-convert-math-if-any"; }
  StringRef getDescription() const final {
    return "convert-math-to-llvm,convert-math-to-libm on a module with a math op, "
           "nothing on another";
  }

  /// What the two passes create from scalar math ops (LLVM intrinsics, func.call and
  /// func.func declarations, arith constants). Not the vector dialect, which
  /// convert-math-to-libm also declares (for math on vectors, which it unrolls): loading
  /// it registers ~100 ops, 0.3 M instructions of every compile; it is loaded below in
  /// the rare module that has math on vectors.
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect, func::FuncDialect, arith::ArithmeticDialect>();
  }

  void runOnOperation() final {
    bool anyMath = false, vectorMath = false;
    getOperation().walk([&](Operation *op) {
      if (!llvm::isa_and_nonnull<math::MathDialect>(op->getDialect()))
        return;
      anyMath = true;
      auto isVector = [](Type type) { return type.isa<VectorType>(); };
      vectorMath |= llvm::any_of(op->getOperandTypes(), isVector) ||
                    llvm::any_of(op->getResultTypes(), isVector);
    });
    if (!anyMath)
      return;
    MLIRContext &context = getContext();
    if (vectorMath && !context.getLoadedDialect<vector::VectorDialect>()) {
      if (context.isMultithreadingEnabled()) {
        getOperation().emitError("math on vectors needs the vector dialect loaded "
                                 "ahead (run convert-math-to-libm instead)");
        return signalPassFailure();
      }
      context.getOrLoadDialect<vector::VectorDialect>();
    }
    OpPassManager nested(ModuleOp::getOperationName());
    if (failed(parsePassPipeline(kMathPipeline, nested)) ||
        failed(runPipeline(nested, getOperation())))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createConvertMathIfAnyPass() {
  return std::make_unique<ConvertMathIfAnyPass>();
}

void cofactor::registerConvertMathIfAnyPass() { PassRegistration<ConvertMathIfAnyPass>(); }
