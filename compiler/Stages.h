//===- Stages.h - the stages of the in-process pipeline ---------*- C++ -*-===//
//
// Each stage returns false and fills `error` (the diagnostics, as the matching
// command-line tool would print them) when it fails. They are called one after the
// other by Compiler.cpp, under its lock.
//
//===----------------------------------------------------------------------===//
#ifndef COFACTOR_COMPILER_STAGES_H
#define COFACTOR_COMPILER_STAGES_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
class PassPlugin;
} // namespace llvm

namespace cofactor::compiler {

/// The one-time set-up of each stage (registries, targets), so that a preloading thread
/// can take it off the first compile. Safe to call more than once and from any thread.
void initializeLowering();
void initializeCodeGen();
/// The -O2 code-generation pipeline (target machine and passes) built ahead for the first
/// compile that needs it (CodeGen.cpp); called by the preloading thread only.
void prepareCodeGen();
/// After a compile, on Disposal.cpp's thread: a context with the common dialects loaded
/// (Lowering.cpp) and an -O2 code-generation pipeline with its subtarget built (CodeGen.cpp)
/// for the next compile, unless one is waiting already. Each is used by one compile only.
void prepareNextContext();
void prepareNextCodeGen();
/// Builds what the first -O2 code generation of the process would otherwise build (the
/// prepared target machine's subtarget, x86's memory-unfolding table), once; called where
/// a classical gradient is known to be coming (the Enzyme plugin loaded ahead).
void warmCodeGenTarget();

/// Maps the code pages of libMLIR, the Enzyme plugin (the object holding `pluginAddress`,
/// when not null) and this library in a background thread, once per process (Prefault.cpp),
/// so that the compile that follows does not fault them in one by one.
/// COFACTOR_COMPILER_PREFAULT=0 turns it off.
void prefaultCompilerCode(const void *pluginAddress);
/// The address of a byte of the loaded Enzyme plugin (its name), or null when not loaded.
const void *enzymePluginAddress();
/// cofactor-opt + mlir-translate: parse `mlir`, run `pipeline` (implicit nesting, as
/// cofactor-opt does with one flag per pass) and translate to LLVM IR in `llvmContext`.
/// `loweredText` receives the lowered MLIR when non-null. `failedStage` is
/// "cofactor-opt" or "mlir-translate" on failure.
std::unique_ptr<llvm::Module> lowerToLLVMIR(llvm::StringRef mlir, llvm::StringRef pipeline,
                                            llvm::LLVMContext &llvmContext,
                                            std::string *loweredText,
                                            std::string &failedStage, std::string &error);

/// Whether the module calls Enzyme (a function named __enzyme_autodiff*).
bool needsEnzyme(const llvm::Module &module);

/// Loads the Enzyme plugin from the checked descriptor `fd` unless it is loaded already
/// (once per process; the descriptor is not closed here). `bindNow`: every symbol of the
/// plugin bound at load (when it is loaded ahead of the compile that needs it; see
/// Optimize.cpp), else lazily, on first call.
bool ensureEnzymeLoaded(int fd, std::string &error, bool bindNow = false);

/// Points the loaded Enzyme plugin's calls of `extractBLAS` at a function that answers
/// "not a BLAS routine" (EnzymeBlas.cpp), when the plugin is the pinned build; returns
/// whether it did.
bool skipBlasNames(const llvm::PassPlugin &plugin);

/// The top-level elements of a textual new-PM pipeline ("a,function(b,c),d" -> "a",
/// "function(b,c)", "d").
std::vector<llvm::StringRef> splitPipeline(llvm::StringRef pipeline);

/// opt: run the new-PM `pipeline` (with Enzyme's passes registered when the plugin is
/// loaded) on a module translateModuleToLLVMIR has verified, verify its output.
/// `elementMs`, when given, receives the milliseconds of each top-level element of the
/// pipeline (splitPipeline), in order. `narrowTypeOffsets`:
/// Enzyme's type analysis follows few offsets of a loop-computed address (see Optimize.cpp);
/// false gives Enzyme's default, for the retry of a module that needs more.
bool optimize(llvm::Module &module, llvm::StringRef pipeline, std::string &error,
              std::vector<double> *elementMs = nullptr, bool narrowTypeOffsets = true);

/// Whether a failed `optimize` with narrow type offsets is worth one retry with Enzyme's
/// default: its type analysis could not deduce a type (Enzyme's error text).
bool typeAnalysisGaveUp(llvm::StringRef messages);

/// llc -O2 -filetype=obj -relocation-model=pic, for the host, into memory.
/// Gives the LLVM (or Enzyme) command-line option `name` the value `value` unless it was
/// given one since the last reset. lld's driver resets every option of the process to its
/// default (cl::ResetAllOptionOccurrences) at each link, so an option the pipeline needs is
/// set again by each compile, before the stage that reads it.
void setOption(llvm::StringRef name, llvm::StringRef value);

/// Gives the option `name` the value `value` whatever it had (a value this process chose
/// itself and must change between compiles).
void resetOption(llvm::StringRef name, llvm::StringRef value);

bool emitObject(llvm::Module &module, llvm::SmallVectorImpl<char> &object,
                std::string &error);

/// Large module-local constant arrays of numbers become arrays of bytes of the same
/// contents, alignment and section (ConstantData.cpp): the assembly printer emits those
/// as one block instead of element by element. Called by emitObject.
void packConstantArrays(llvm::Module &module);

/// cc -shared: lld links `object` with `linkArgs` (the runtime) into `output`; the C
/// libraries are found at load time, through the runtime's dependencies (see Link.cpp).
bool linkSharedLibrary(llvm::StringRef object, const std::vector<std::string> &linkArgs,
                       const std::string &output, std::string &error);

} // namespace cofactor::compiler

#endif
