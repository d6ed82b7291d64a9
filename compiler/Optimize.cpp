//===- Optimize.cpp - LLVM IR optimization with Enzyme, as opt ------------===//
#include "EnzymeInput.h"
#include "Stages.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/InlineCost.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include <dlfcn.h>

namespace cofactor::compiler {
namespace {

/// The Enzyme plugin, loaded once per process: a loaded plugin cannot be unloaded, and
/// its command-line options are registered when it is loaded.
std::optional<llvm::PassPlugin> enzyme;

/// Collects error diagnostics (Enzyme reports what it cannot differentiate this way);
/// LLVM's default handler would exit the process on the first one.
struct CollectErrors : llvm::DiagnosticHandler {
  std::string &out;
  bool failed = false;
  explicit CollectErrors(std::string &out) : out(out) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo &info) override {
    if (info.getSeverity() != llvm::DS_Error)
      return true;  // warnings and remarks are dropped, as opt without flags does
    failed = true;
    llvm::raw_string_ostream os(out);
    llvm::DiagnosticPrinterRawOStream printer(os);
    os << "error: ";
    info.print(printer);
    os << "\n";
    return true;
  }
};

/// A compiled function is called through its C interface, `_mlir_ciface_<name>` (the
/// launcher), or by its name (tests, C callers). When the module has such entry points,
/// every other function it defines that nothing refers to is deleted before O2: the
/// primal that Enzyme differentiated (its __enzyme_autodiff call was the last use) would
/// otherwise be optimized and compiled for nothing (for the gradient of tanh(W x) at
/// W 512 x 512, a vectorized matrix product: a third of code generation). Functions
/// that are still called keep their linkage: making them internal changes O2's
/// inlining, which cost more than it saved on straight-line circuits.
void deleteUnusedFunctions(llvm::Module &module) {
  constexpr llvm::StringLiteral prefix = "_mlir_ciface_";
  llvm::StringSet<> entries;
  for (const llvm::Function &function : module)
    if (!function.isDeclaration() && function.getName().startswith(prefix)) {
      entries.insert(function.getName());
      entries.insert(function.getName().drop_front(prefix.size()));
    }
  if (entries.empty())
    return;
  // Until nothing changes: a deleted function may have been the last caller of another.
  for (bool changed = true; changed;) {
    changed = false;
    for (llvm::Function &function : llvm::make_early_inc_range(module))
      if (!function.isDeclaration() && function.use_empty() &&
          !entries.contains(function.getName())) {
        function.eraseFromParent();
        changed = true;
      }
  }
}

/// The frontend's entry function is internal (tracing/entry_function.py): its C interface's
/// wrapper, `_mlir_ciface_<name>`, which unpacks the memref descriptors, is its one caller.
/// Its body is moved into the wrapper before anything else runs (the wrapper's loads become
/// the arguments), so that one function is optimized and generated instead of two: code
/// generation costs every function ~170 machine passes' fixed work, a quarter of it for
/// the gradient of tanh(W x). The entry is `noinline` for O2's inliner, which would
/// optimize the body on its own first and again inlined (the subprocess pipeline keeps
/// the two functions); `InlineFunction` does not look at that attribute. Functions the
/// module exports under their own name (external: tests and C callers call them, and the
/// custom-gradient triples') are left alone.
void inlineEntriesIntoWrappers(llvm::Module &module) {
  constexpr llvm::StringLiteral prefix = "_mlir_ciface_";
  std::vector<llvm::CallBase *> calls;
  for (llvm::Function &wrapper : module) {
    if (wrapper.isDeclaration() || !wrapper.getName().startswith(prefix))
      continue;
    llvm::Function *entry = module.getFunction(wrapper.getName().drop_front(prefix.size()));
    if (!entry || entry->isDeclaration() || !entry->hasLocalLinkage() || !entry->hasOneUse())
      continue;
    auto *call = llvm::dyn_cast<llvm::CallBase>(entry->user_back());
    if (call && call->getCalledFunction() == entry && call->getFunction() == &wrapper)
      calls.push_back(call);
  }
  for (llvm::CallBase *call : calls) {
    llvm::Function &entry = *call->getCalledFunction();
    llvm::Function &wrapper = *call->getFunction();
    if (!llvm::isInlineViable(entry).isSuccess())
      continue;
    llvm::InlineFunctionInfo info;
    // No lifetime markers: the inlined body is the whole of the wrapper.
    if (!llvm::InlineFunction(*call, info, /*CalleeAAR=*/nullptr, /*InsertLifetime=*/false)
             .isSuccess())
      continue;
    llvm::AttributeFuncs::mergeAttributesForInlining(wrapper, entry);
    entry.removeDeadConstantUsers();
    if (entry.use_empty())
      entry.eraseFromParent();
  }
}

/// Enzyme replaces each `__enzyme_autodiff` call by a call to the gradient it generated
/// (`diffe<name>`, internal, called once). O2's inliner visits a callee before its callers,
/// so the gradient was optimized on its own, then inlined into its caller and optimized
/// again there: its body went through the function passes twice (5.4 M of O2's 20 M
/// instructions on the tanh(W x) gradient). So it is inlined before O2 and optimized once,
/// in its caller; O2's output on the benchmark gradients is the same code (value names
/// aside). Only such functions qualify: the new ones whose one use is a call from a
/// function the module had before Enzyme ran (`before`).
std::vector<llvm::CallBase *>
gradientCallsToInline(llvm::Module &module,
                      const llvm::SmallPtrSetImpl<const llvm::Function *> &before) {
  std::vector<llvm::CallBase *> calls;
  for (llvm::Function &function : module) {
    if (function.isDeclaration() || before.contains(&function) ||
        !function.hasLocalLinkage() || !function.hasOneUse() ||
        function.hasFnAttribute(llvm::Attribute::NoInline))
      continue;
    auto *call = llvm::dyn_cast<llvm::CallBase>(function.user_back());
    if (call && call->getCalledFunction() == &function &&
        before.contains(call->getFunction()))
      calls.push_back(call);
  }
  return calls;
}

/// Inlines those calls as LLVM's `always-inline` pass would once they are marked
/// `alwaysinline` (how it was done until session 18: compiler.ENZYME_PIPELINE's O2 starts
/// with that pass), in the same order and with the same `InlineFunction` call, its alias
/// analysis of the callee and lifetime markers, the same merge of the functions'
/// attributes and the removal of the dead callee; but without the block frequencies of
/// caller and callee that the pass computes (`BlockFrequencyAnalysis` twice, ~0.4 M
/// instructions on the tanh(W x) gradient): the inliner only updates them, as an analysis
/// (the module has no profile), and the pass throws them away when it returns. The IR is
/// the same (tests/test_compiler_inline_gradients.py). COFACTOR_COMPILER_ALWAYS_INLINER=1
/// marks the functions and leaves the inlining to the pass as before (A/B).
void inlineGradientsFirst(llvm::Module &module,
                          const llvm::SmallPtrSetImpl<const llvm::Function *> &before,
                          llvm::ModuleAnalysisManager &mam,
                          llvm::FunctionAnalysisManager &fam) {
  std::vector<llvm::CallBase *> calls = gradientCallsToInline(module, before);
  const char *choice = std::getenv("COFACTOR_COMPILER_ALWAYS_INLINER");
  if (choice && std::strcmp(choice, "1") == 0) {
    for (llvm::CallBase *call : calls)
      call->getCalledFunction()->addFnAttr(llvm::Attribute::AlwaysInline);
    return;
  }
  if (calls.empty())
    return;
  auto assumptions = [&](llvm::Function &function) -> llvm::AssumptionCache & {
    return fam.getResult<llvm::AssumptionAnalysis>(function);
  };
  std::vector<llvm::Function *> inlined;
  for (llvm::CallBase *call : calls) {
    llvm::Function &callee = *call->getCalledFunction();
    llvm::Function &caller = *call->getCaller();
    if (!llvm::isInlineViable(callee).isSuccess())
      continue;  // as the pass, which skips such a function (it stays a call)
    llvm::InlineFunctionInfo info(/*cg=*/nullptr, assumptions);
    llvm::InlineResult result = llvm::InlineFunction(
        *call, info, &fam.getResult<llvm::AAManager>(callee), /*InsertLifetime=*/true);
    if (!result.isSuccess())
      continue;
    llvm::AttributeFuncs::mergeAttributesForInlining(caller, callee);
    inlined.push_back(&callee);
  }
  for (llvm::Function *callee : inlined) {
    callee->removeDeadConstantUsers();
    if (!callee->isDefTriviallyDead() || callee->hasComdat())
      continue;
    fam.clear(*callee, callee->getName());
    callee->eraseFromParent();
  }
  // What the pass returns: nothing preserved (the caller changed, the callee is gone).
  mam.invalidate(module, llvm::PreservedAnalyses::none());
}

/// The plugin's calls into LLVM, libstdc++ and its own exported functions go through its
/// PLT (2,307 slots). `PassPlugin::Load` opens it with RTLD_LAZY, so the first compile
/// bound each slot it used on its first call: ~780 symbol lookups (0.95 M instructions,
/// the only work a first compile of the tanh(W x) gradient did beyond a later one, plus
/// the first touch of libLLVM's symbol tables and the copy-on-write of the plugin's GOT
/// pages). When the plugin is loaded ahead (`cofactor_compiler_load_enzyme`, while a
/// classical gradient is traced), it is opened here first with RTLD_NOW (the same path,
/// so `PassPlugin::Load`'s own `dlopen` finds this object and only counts a reference):
/// every slot is bound by that thread, not by the compile. A compile that loads the
/// plugin itself keeps the lazy load: binding all 2,307 slots there cost 2.0 M
/// instructions more than the ~780 it uses. A plugin with a symbol that does not resolve
/// fails this open without side effects (relocation precedes its constructors) and is
/// then loaded lazily as before. The handle is kept: the plugin is never unloaded.
/// COFACTOR_COMPILER_PLUGIN_BIND_NOW=0 keeps the lazy load (A/B).
void bindPluginNow(const std::string &path) {
  const char *choice = std::getenv("COFACTOR_COMPILER_PLUGIN_BIND_NOW");
  if (choice && std::strcmp(choice, "0") == 0)
    return;
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL))
    (void)dlerror();  // PassPlugin::Load tries again, lazily, and reports its own error
}

} // namespace

bool needsEnzyme(const llvm::Module &module) {
  for (const llvm::Function &function : module)
    if (function.getName().contains("__enzyme_autodiff"))
      return true;
  return false;
}

bool ensureEnzymeLoaded(int fd, std::string &error, bool bindNow) {
  if (enzyme)
    return true;
  // Loaded through the descriptor the caller checked (owner, mode, SHA-256), so the file
  // cannot be swapped between the check and the load.
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (bindNow)
    bindPluginNow(path);
  llvm::Expected<llvm::PassPlugin> plugin = llvm::PassPlugin::Load(path);
  if (!plugin) {
    error = "could not load the Enzyme plugin: " + llvm::toString(plugin.takeError());
    return false;
  }
  enzyme.emplace(*plugin);
  // EnzymeBlas.cpp; COFACTOR_COMPILER_KEEP_BLAS=1 keeps Enzyme's own (A/B comparisons).
  const char *keep = std::getenv("COFACTOR_COMPILER_KEEP_BLAS");
  if (!keep || std::strcmp(keep, "1") != 0)
    skipBlasNames(*enzyme);
  return true;
}

const void *enzymePluginAddress() {
  return enzyme ? enzyme->getPluginName().data() : nullptr;
}

std::vector<llvm::StringRef> splitPipeline(llvm::StringRef pipeline) {
  std::vector<llvm::StringRef> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < pipeline.size(); ++i) {
    char c = pipeline[i];
    if (c == '(' || c == '<')
      ++depth;
    else if (c == ')' || c == '>')
      --depth;
    else if (c == ',' && depth == 0) {
      parts.push_back(pipeline.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push_back(pipeline.substr(start).trim());
  return parts;
}

bool optimize(llvm::Module &module, llvm::StringRef pipeline, std::string &error,
              std::vector<double> *elementMs, bool narrowTypeOffsets) {
  llvm::raw_string_ostream errors(error);
  // Not verified again here (as `opt` verifies its input): the module comes from
  // translateModuleToLLVMIR, which has run the same verifier on it and fails the
  // translation when it is broken (0.13 M instructions on the tanh(W x) gradient).
  // COFACTOR_COMPILER_VERIFY_INPUT=1 verifies it again (A/B).
  const char *verifyInput = std::getenv("COFACTOR_COMPILER_VERIFY_INPUT");
  if (verifyInput && std::strcmp(verifyInput, "1") == 0 && llvm::verifyModule(module, &errors)) {
    errors << "error: input module is broken!\n";
    return false;
  }
  llvm::LLVMContext &context = module.getContext();
  auto handler = std::make_unique<CollectErrors>(error);
  CollectErrors *collected = handler.get();
  context.setDiagnosticHandler(std::move(handler));

  // No TargetMachine: the module has no triple, as for `opt` in the subprocess pipeline.
  llvm::PassBuilder builder;
  if (enzyme)
    enzyme->registerPassBuilderCallbacks(builder);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);

  // Each top-level element of the pipeline is its own pass manager, run one after the other
  // on the same analysis managers: what one manager holding them all does (it too runs its
  // passes in order and invalidates what each does not preserve), but each element is timed
  // (Enzyme and O2 apart). All are parsed first, so that a bad pipeline fails before any
  // pass runs, as opt does.
  std::vector<llvm::ModulePassManager> elements;
  std::vector<llvm::StringRef> names = splitPipeline(pipeline);
  for (llvm::StringRef element : names) {
    llvm::ModulePassManager passes;
    if (llvm::Error err = builder.parsePassPipeline(passes, element)) {
      errors << "error: unable to parse pass pipeline description '" << pipeline
             << "': " << llvm::toString(std::move(err)) << "\n";
      return false;
    }
    elements.push_back(std::move(passes));
  }
  elements.back().addPass(llvm::VerifierPass());
  EnzymeInput enzymeInput;
  bool forEnzyme = enzyme && elements.size() > 1 && needsEnzyme(module);
  // Type analysis follows an address computed from a loop's counter at each value the
  // counter can take, up to this many (Enzyme's default 100): with the loops over the
  // elements of a traced array, each such address shifted the type tree of its array 100
  // times (a third of Enzyme's time on tanh(W x) at W 512 x 512). The arrays cofactor
  // passes hold one element type throughout, which a few offsets already show: 8 before
  // session 13, 2 now (1.8 M fewer instructions on tanh(W x); of the 150 libraries the
  // gradient tests and a fuzzer seed compiled, 147 were byte for byte those of 8 and all
  // passed, compiler/README.md). Set for each compile: lld resets every option (setOption).
  // Some programs need more (a loop carrying an array through a phi: "Cannot deduce type
  // of phi", which Enzyme's 100 resolves): the compile retries those with the default.
  if (forEnzyme)
    resetOption("enzyme-max-int-offset", narrowTypeOffsets ? "2" : "100");
  inlineEntriesIntoWrappers(module);
  llvm::SmallPtrSet<const llvm::Function *, 16> beforeEnzyme;
  for (size_t i = 0; i < elements.size(); ++i) {
    llvm::ModulePassManager &passes = elements[i];
    auto start = std::chrono::steady_clock::now();
    if (forEnzyme && i == 0) {
      for (const llvm::Function &function : module)
        if (!function.isDeclaration())
          beforeEnzyme.insert(&function);
      enzymeInput.prepare(module);
    }
    if (forEnzyme && names[i] == "preserve-nvvm" && !EnzymeInput::needsPreserveNVVM(module)) {
      if (elementMs)
        elementMs->push_back(0.0);
      continue;
    }
    // Before the last element (O2), after Enzyme, which has replaced the calls that
    // name the functions it differentiates.
    if (&passes == &elements.back()) {
      enzymeInput.restore();
      deleteUnusedFunctions(module);
      if (forEnzyme)
        inlineGradientsFirst(module, beforeEnzyme, mam, fam);
    }
    passes.run(module, mam);
    if (elementMs)
      elementMs->push_back(std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - start)
                               .count());
    if (collected->failed)
      return false;
  }
  // The analysis managers go before the module's context drops the handler.
  return true;
}

bool typeAnalysisGaveUp(llvm::StringRef messages) {
  return messages.contains("Cannot deduce type");
}

} // namespace cofactor::compiler
