//===- ConvertToLLVM.cpp - scf, arith, memref, func and cf to LLVM at once -===//
//
// `--cofactor-convert-to-llvm` is `convert-scf-to-cf`, `convert-arith-to-llvm`,
// `convert-memref-to-llvm`, `convert-func-to-llvm` and `convert-cf-to-llvm` as one
// dialect conversion (as MLIR's Toy tutorial lowers its chapter 6 to LLVM): the same
// patterns with the same options (each pass's defaults: the index width and the data layout
// of the module, C interfaces where `llvm.emit_c_interface` asks for them, no aligned
// alloc, no bare-pointer calling convention), applied in one walk of the module instead of
// five. Each of the five passes walked the whole module, set up its conversion and its
// type converter, and left casts for the next one to resolve: most of their time on a
// traced module, whose ops each of them visits once (compiler/README.md, session 20).
// `reconcile-unrealized-casts` still follows it. As convert-func-to-llvm does, the module
// gets an (empty) `llvm.data_layout` attribute.
//
//===----------------------------------------------------------------------===//
#include "cofactor/Transforms/Passes.h"

#include "mlir/Analysis/DataLayoutAnalysis.h"
#include "mlir/Conversion/ArithmeticToLLVM/ArithmeticToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/LoweringOptions.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;

namespace {

struct ConvertToLLVMPass : public PassWrapper<ConvertToLLVMPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ConvertToLLVMPass)

  StringRef getArgument() const final { return "cofactor-convert-to-llvm"; }
  StringRef getDescription() const final {
    return "convert-scf-to-cf, convert-arith-to-llvm, convert-memref-to-llvm, "
           "convert-func-to-llvm and convert-cf-to-llvm as one conversion";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<LLVM::LLVMDialect, cf::ControlFlowDialect>();
  }

  void runOnOperation() final {
    ModuleOp module = getOperation();
    MLIRContext &context = getContext();
    const auto &dataLayouts = getAnalysis<DataLayoutAnalysis>();
    LowerToLLVMOptions options(&context, dataLayouts.getAtOrAbove(module));
    LLVMTypeConverter types(&context, options, &dataLayouts);

    RewritePatternSet patterns(&context);
    populateSCFToControlFlowConversionPatterns(patterns);
    arith::populateArithmeticToLLVMConversionPatterns(types, patterns);
    populateMemRefToLLVMConversionPatterns(types, patterns);
    populateFuncToLLVMConversionPatterns(types, patterns);
    cf::populateControlFlowToLLVMConversionPatterns(types, patterns);

    // Partial, as each of the passes: what none of them converts (the ops of another
    // dialect, the casts that reconcile-unrealized-casts removes) stays.
    LLVMConversionTarget target(context);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    module->setAttr(LLVM::LLVMDialect::getDataLayoutAttrName(), StringAttr::get(&context, ""));
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createConvertToLLVMPass() {
  return std::make_unique<ConvertToLLVMPass>();
}

void cofactor::registerConvertToLLVMPass() { PassRegistration<ConvertToLLVMPass>(); }
