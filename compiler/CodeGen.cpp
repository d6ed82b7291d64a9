//===- CodeGen.cpp - object code for the host, as llc ---------------------===//
#include "Stages.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/Triple.h"
#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

namespace cofactor::compiler {

void initializeCodeGen() {
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // As compiler.LLC_FLAGS for llc: SelectionDAG's store merging is quadratic in the
    // stores of one basic block, and traced programs and their Enzyme reverse passes are
    // few blocks with thousands of stores (see the comment there for the measurements).
    auto &options = llvm::cl::getRegisteredOptions();
    auto merging = options.find("combiner-store-merging");
    if (merging != options.end())
      merging->second->addOccurrence(0, "combiner-store-merging", "false");
    return true;
  }();
  (void)initialized;
}

namespace {

/// Whether a call goes to the runtime (`cf_rt_*`) or to a function of the module that
/// does, directly or through other such functions.
class QuantumFunctions {
public:
  explicit QuantumFunctions(llvm::Module &module) {
    for (llvm::Function &function : module)
      if (function.getName().startswith("cf_rt_"))
        found.insert(&function);
    // Callers of what was found, until nothing changes (the modules are small, and a
    // round is one pass over their calls).
    for (bool changed = true; changed;) {
      changed = false;
      for (llvm::Function &function : module)
        if (!found.contains(&function) && callsAny(function))
          changed = found.insert(&function).second;
    }
  }
  bool isQuantumCall(const llvm::Instruction &instruction) const {
    auto *call = llvm::dyn_cast<llvm::CallBase>(&instruction);
    return call && call->getCalledFunction() &&
           found.contains(call->getCalledFunction());
  }

private:
  bool callsAny(llvm::Function &function) const {
    for (llvm::BasicBlock &block : function)
      for (llvm::Instruction &instruction : block)
        if (isQuantumCall(instruction))
          return true;
    return false;
  }
  llvm::SmallPtrSet<const llvm::Function *, 16> found;
};

/// At most this many iterations of classical code between runtime calls (a loop that
/// accumulates a VJP over the gate parameters, a small array update in a descent step)
/// still count as runtime-bound.
constexpr uint64_t kSmallLoopIterations = 4096;

/// True when every loop of the module either calls the runtime in each iteration (a
/// gradient-descent step, a loop of gates) or runs few iterations (kSmallLoopIterations,
/// counting those of the enclosing loops up to one that calls the runtime) whose count is
/// known: such code spends its time in the runtime, so how well the loop itself is
/// compiled does not show, and neither does the code outside loops, which runs once per
/// call. Code generation then runs at -O0 (fast instruction selection and register
/// allocation: a third of -O2's time). A longer or unbounded loop of classical arithmetic
/// (a matrix product, Enzyme's reverse pass) keeps -O2.
bool onlyRuntimeBoundLoops(llvm::Module &module) {
  QuantumFunctions quantum(module);
  llvm::TargetLibraryInfoImpl libraryInfoImpl(llvm::Triple(module.getTargetTriple()));
  llvm::TargetLibraryInfo libraryInfo(libraryInfoImpl);
  for (llvm::Function &function : module) {
    if (function.isDeclaration())
      continue;
    llvm::DominatorTree dominators(function);
    llvm::LoopInfo loops(dominators);
    if (loops.empty())
      continue;
    llvm::AssumptionCache assumptions(function);
    llvm::ScalarEvolution evolution(function, libraryInfo, assumptions, dominators, loops);
    // The classical iterations of each loop: its own times its parent's, unless the
    // parent calls the runtime (0 when unknown or too many). Parents come first.
    llvm::DenseMap<const llvm::Loop *, uint64_t> classical;
    for (llvm::Loop *loop : loops.getLoopsInPreorder()) {
      // A block that calls the runtime and runs in every iteration: it dominates each
      // block that branches back to the header.
      llvm::SmallVector<llvm::BasicBlock *, 4> latches;
      loop->getLoopLatches(latches);
      bool callsRuntime = llvm::any_of(loop->blocks(), [&](llvm::BasicBlock *block) {
        return llvm::all_of(latches,
                            [&](llvm::BasicBlock *latch) {
                              return dominators.dominates(block, latch);
                            }) &&
               llvm::any_of(*block, [&](llvm::Instruction &instruction) {
                 return quantum.isQuantumCall(instruction);
               });
      });
      if (callsRuntime) {
        classical[loop] = 1;
        continue;
      }
      uint64_t outer = loop->getParentLoop() ? classical.lookup(loop->getParentLoop()) : 1;
      uint64_t trips = evolution.getSmallConstantMaxTripCount(loop);
      if (outer == 0 || trips == 0 || trips > kSmallLoopIterations / outer)
        return false;
      classical[loop] = outer * trips;
    }
  }
  return true;
}

} // namespace

bool emitObject(llvm::Module &module, llvm::SmallVectorImpl<char> &object,
                std::string &error) {
  initializeCodeGen();

  // What llc does for a module without a triple: the default triple, the generic CPU
  // (no -mcpu), -O2 (-O0 for a module whose loops all call the runtime or are short,
  // see onlyRuntimeBoundLoops), position-independent code for the shared library.
  std::string triple = module.getTargetTriple();
  if (triple.empty())
    triple = llvm::sys::getDefaultTargetTriple();
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return false;
  llvm::CodeGenOpt::Level level = onlyRuntimeBoundLoops(module)
                                      ? llvm::CodeGenOpt::None
                                      : llvm::CodeGenOpt::Default;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, /*CPU=*/"", /*Features=*/"", llvm::TargetOptions(), llvm::Reloc::PIC_,
      llvm::None, level));
  if (!machine) {
    error = "error: no target machine for " + triple;
    return false;
  }
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());

  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, os, nullptr, llvm::CGFT_ObjectFile)) {
    error = "error: the target cannot emit an object file";
    return false;
  }
  passes.run(module);
  return true;
}

} // namespace cofactor::compiler
