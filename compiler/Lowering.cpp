//===- Lowering.cpp - MLIR to LLVM IR, as cofactor-opt + mlir-translate ---===//
#include "Disposal.h"
#include "Stages.h"

#include "cofactor/Quantum/QuantumDialect.h"
#include "cofactor/Transforms/Passes.h"
#ifdef COFACTOR_HAVE_GRADIENT
#include "cofactor/Gradient/GradientOps.h"
#include "cofactor/Gradient/Passes.h"
#endif

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

using namespace mlir;

namespace cofactor::compiler {
namespace {

/// The dialects cofactor-opt knows, plus the translations of mlir-translate. Pass
/// registration is global and done once.
const DialectRegistry &registry() {
  static DialectRegistry *theRegistry = [] {
    registerAllPasses();
    cofactor::registerCofactorPasses();
    auto *r = new DialectRegistry;
    registerAllDialects(*r);
    registerAllToLLVMIRTranslations(*r);
    r->insert<cofactor::quantum::QuantumDialect>();
#ifdef COFACTOR_HAVE_GRADIENT
    cofactor::registerGradientPasses();
    r->insert<cofactor::gradient::GradientDialect>();
#endif
    return r;
  }();
  return *theRegistry;
}

/// A context with the dialects of every compile already loaded, made by the preloading
/// thread (initializeLowering, during `import cofactor`) for the first compile of the
/// process to take: loading a dialect registers its ops, types and interfaces (~2.2 M
/// instructions for these, and the first touch of that code), which a compile otherwise
/// pays before it parses. Later compiles make their own context, so that no context
/// outlives its compile (a context keeps every attribute and type it ever made).
std::mutex preparedLock;
std::unique_ptr<MLIRContext> prepared;
bool preparedOnce = false;

std::unique_ptr<MLIRContext> newContext() {
  auto context =
      std::make_unique<MLIRContext>(registry(), MLIRContext::Threading::DISABLED);
  return context;
}

/// The dialects of a traced module and of the lowering's output.
void loadCommonDialects(MLIRContext &context) {
  context.loadDialect<arith::ArithmeticDialect, cf::ControlFlowDialect, func::FuncDialect,
                      LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect,
                      scf::SCFDialect, cofactor::quantum::QuantumDialect>();
#ifdef COFACTOR_HAVE_GRADIENT
  context.loadDialect<cofactor::gradient::GradientDialect>();
#endif
}

std::unique_ptr<MLIRContext> takeContext() {
  {
    std::lock_guard<std::mutex> lock(preparedLock);
    if (prepared)
      return std::move(prepared);
  }
  return newContext();
}

/// The pipeline as run: `convert-math-to-llvm,convert-math-to-libm` becomes
/// `cofactor-convert-math-if-any`, which runs those two passes only on a module with a
/// math op (mlir_passes/lib/Transforms/ConvertMathIfAny.cpp: a circuit or its gradient
/// has none, and paid a conversion's walk and a greedy rewrite of the whole module for
/// nothing: 0.5 M of the 4-qubit circuit's 12.5 M instructions). Done here, on the
/// pipeline compiler.LOWERING_PASSES gives, so that cofactor-opt (the subprocess
/// pipeline, the FileCheck tests) keeps the passes as listed. COFACTOR_COMPILER_MATH_ALWAYS=1
/// runs the pipeline as given (A/B).
std::string pipelineAsRun(llvm::StringRef pipeline) {
  constexpr llvm::StringLiteral math = "convert-math-to-llvm,convert-math-to-libm";
  const char *always = std::getenv("COFACTOR_COMPILER_MATH_ALWAYS");
  std::string out = pipeline.str();
  if (always && std::strcmp(always, "1") == 0)
    return out;
  size_t at = out.find(math.data());
  bool whole = at != std::string::npos && (at == 0 || out[at - 1] == ',') &&
               (at + math.size() == out.size() || out[at + math.size()] == ',');
  if (whole)
    out.replace(at, math.size(), "cofactor-convert-math-if-any");
  return out;
}

} // namespace

void prepareNextContext() {
  {
    std::lock_guard<std::mutex> lock(preparedLock);
    if (prepared)
      return;
  }
  std::unique_ptr<MLIRContext> context = newContext();
  loadCommonDialects(*context);
  std::lock_guard<std::mutex> lock(preparedLock);
  if (!prepared)
    prepared = std::move(context);
}

void initializeLowering() {
  (void)registry();
  {
    std::lock_guard<std::mutex> lock(preparedLock);
    if (preparedOnce)
      return;
    preparedOnce = true;
  }
  std::unique_ptr<MLIRContext> context = newContext();
  loadCommonDialects(*context);
  std::lock_guard<std::mutex> lock(preparedLock);
  prepared = std::move(context);
}

std::unique_ptr<llvm::Module> lowerToLLVMIR(llvm::StringRef mlir, llvm::StringRef pipeline,
                                            llvm::LLVMContext &llvmContext,
                                            std::string *loweredText,
                                            std::string &failedStage, std::string &error) {
  // One context per compile (the first one prepared by the preloading thread); no thread
  // pool (the compile lock serializes callers anyway).
  std::unique_ptr<MLIRContext> ownedContext = takeContext();
  MLIRContext &context = *ownedContext;
  llvm::raw_string_ostream errors(error);
  // Named module.mlir, as the subprocess pipeline's input file, so messages read the same.
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(mlir, "module.mlir", /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context, errors);
  failedStage = "cofactor-opt";

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module)
    return nullptr;
  // The input was verified by the parser; the passes' result is verified once, at the
  // end, instead of after each pass as cofactor-opt does: that verification was most of
  // the time of the passes with nothing to do (the gradient passes on a circuit: ~15 ms
  // each on 8,000 gates), and a pass that breaks the IR is still caught before the
  // translation, by the same verifier.
  auto pm = std::make_unique<PassManager>(&context, OpPassManager::Nesting::Implicit);
  pm->enableVerifier(false);
  if (failed(parsePassPipeline(pipelineAsRun(pipeline), *pm, errors)) ||
      failed(pm->run(*module)) ||
      failed(verify(*module)))
    return nullptr;
  if (loweredText) {
    llvm::raw_string_ostream os(*loweredText);
    module->print(os);
    os << "\n";
  }

  failedStage = "mlir-translate";
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(*module, llvmContext);
  if (!llvmModule && error.empty())
    errors << "error: could not translate the module to LLVM IR\n";
  // Freed after the compile, by Disposal.cpp's thread (the passes, then the module, then
  // the context that holds their types and attributes); the diagnostic handler, which
  // names the context, goes now, as the function returns.
  disposeLater(std::move(pm));
  disposeLater(std::make_unique<OwningOpRef<ModuleOp>>(std::move(module)));
  disposeLater(std::move(ownedContext));
  return llvmModule;
}

} // namespace cofactor::compiler
