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

#include "mlir/Dialect/Math/IR/Math.h"
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

  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager nested(ModuleOp::getOperationName());
    if (succeeded(parsePassPipeline(kMathPipeline, nested)))
      nested.getDependentDialects(registry);
  }

  void runOnOperation() final {
    bool anyMath = getOperation()
                       .walk([](Operation *op) {
                         return llvm::isa_and_nonnull<math::MathDialect>(op->getDialect())
                                    ? WalkResult::interrupt()
                                    : WalkResult::advance();
                       })
                       .wasInterrupted();
    if (!anyMath)
      return;
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
