//===- CodeGen.cpp - object code for the host, as llc ---------------------===//
#include "Disposal.h"
#include "Stages.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Analysis/LoopInfo.h"
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
#include "llvm/CodeGen/TargetInstrInfo.h"
#include "llvm/CodeGen/TargetSubtargetInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"

#include <cstdlib>
#include <cstring>

namespace cofactor::compiler {

void initializeCodeGen() {
  static const bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // What lld's driver does at each link (for LTO): every target, its MC layer, printer
    // and parser. Registered once here, by the preloading thread: at the first link of a
    // process it registered ~20 targets' passes and options (0.2 M instructions and the
    // first touch of each target's code); later links find them registered.
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
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

/// True when every loop of `function` calls the runtime in each iteration (a
/// gradient-descent step, a loop of gates), so that its time is spent in the runtime:
/// how well the loop itself is compiled does not show, and neither does the code
/// outside loops, which runs once per call. A loop of classical arithmetic, however
/// short (a VJP accumulated over the gate parameters, the update of a descent step, a
/// matrix product, Enzyme's reverse pass), keeps -O2: with such loops of at most 4,096
/// iterations at -O0 too, the 50 descent steps over StronglyEntanglingLayers on 4 wires
/// (benchmark section 4) seemed 3-8% slower (the fastest of 300 calls, under load).
bool onlyRuntimeBoundLoops(llvm::Function &function, const QuantumFunctions &quantum) {
  llvm::DominatorTree dominators(function);
  llvm::LoopInfo loops(dominators);
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
    if (!callsRuntime)
      return false;
  }
  return true;
}

/// The optimization level of code generation: -O0 (fast instruction selection and
/// register allocation: a third of -O2's time) when every function of the module only
/// waits on the runtime (onlyRuntimeBoundLoops), else -O2. (Marking just those
/// functions `optnone` in a module that keeps -O2 saved nothing measurable.)
llvm::CodeGenOpt::Level chooseLevel(llvm::Module &module) {
  QuantumFunctions quantum(module);
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && !onlyRuntimeBoundLoops(function, quantum))
      return llvm::CodeGenOpt::Default;
  return llvm::CodeGenOpt::None;
}

} // namespace

namespace {

/// A target machine and its pass pipeline. For -O2 one is built ahead: by the preloading
/// thread for the first -O2 compile of the process, then by Disposal.cpp's thread after
/// each compile for the next one (`addPassesToEmitFile` creates and configures ~130 passes,
/// 2.3 M instructions, and the target machine builds its subtarget, 1.5 M: none of it
/// depends on the module). Each is used by one compile. The passes write into `buffer`
/// (through `stream`); the compile copies the object out.
struct PreparedCodeGen {
  std::unique_ptr<llvm::TargetMachine> machine;
  llvm::SmallVector<char, 0> buffer;
  std::unique_ptr<llvm::raw_svector_ostream> stream;
  llvm::legacy::PassManager passes;
};
std::unique_ptr<PreparedCodeGen> prepared;

/// The options of -O2 code generation, set before each pipeline is built (the link of the
/// previous compile reset them; see setOption). As compiler.LLC_FLAGS for llc:
/// - SelectionDAG's store merging is quadratic in the stores of one basic block, and
///   traced programs and their Enzyme reverse passes are few blocks with thousands of
///   stores (see the comment there for the measurements).
/// - Fast instruction selection, the rest of -O2 kept (register allocation, machine LICM,
///   scheduling, block placement): SelectionDAG's combines and scheduling were a quarter of
///   code generation on tanh(W x)'s gradient, and the loops it selects are the loads,
///   multiply-adds and stores FastISel selects one for one (an instruction it cannot
///   select falls back to SelectionDAG). Loop strength reduction off: it rewrote the
///   reverse loops' indexed addresses into pointer increments (15% of code generation)
///   that x86's indexed addressing makes free. Measured (compiler/README.md, session
///   12): the gradient's code generation 19 -> 10 M instructions, its run time the same
///   (0.36-0.42 ms against 0.41 ms, bitwise the same gradient).
void setCodeGenOptions() {
  setOption("combiner-store-merging", "false");
  const char *full = std::getenv("COFACTOR_COMPILER_FULL_ISEL");
  if (!full || std::strcmp(full, "1") != 0) {  // COFACTOR_COMPILER_FULL_ISEL=1: A/B
    setOption("fast-isel", "true");
    setOption("disable-lsr", "true");
  }
}

/// Work that the first -O2 code generation of a process would otherwise do: the subtarget
/// of the module's functions (target lowering, register properties, legalizer tables: 1.5 M
/// instructions; the target machine keeps it for functions of the same CPU and features,
/// which cofactor's never set) and x86's table for unfolding memory operands (sorted once
/// per process, 2.5 M instructions, when machine LICM first asks it). Not in the warm-up
/// of every process (3.9 M more at each import), but where a classical gradient, compiled
/// at -O2, is coming: the Enzyme plugin loaded while it is traced.
void warmTarget(llvm::TargetMachine &machine) {
  llvm::LLVMContext context;
  llvm::Module module("warm", context);
  auto *function = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), false),
      llvm::Function::ExternalLinkage, "warm", module);
  const llvm::TargetSubtargetInfo *subtarget = machine.getSubtargetImpl(*function);
  if (const llvm::TargetInstrInfo *info = subtarget ? subtarget->getInstrInfo() : nullptr)
    (void)info->getOpcodeAfterMemoryUnfold(0, true, false);
}

std::unique_ptr<llvm::TargetMachine> createMachine(const std::string &triple,
                                                   llvm::CodeGenOpt::Level level,
                                                   std::string &error) {
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, /*CPU=*/"", /*Features=*/"", llvm::TargetOptions(), llvm::Reloc::PIC_,
      llvm::None, level));
  if (!machine)
    error = "error: no target machine for " + triple;
  return machine;
}

/// A target machine at `level` and its object-emitting pipeline, writing into its buffer.
std::unique_ptr<PreparedCodeGen> buildCodeGen(const std::string &triple,
                                              llvm::CodeGenOpt::Level level,
                                              std::string &error) {
  auto ready = std::make_unique<PreparedCodeGen>();
  ready->machine = createMachine(triple, level, error);
  if (!ready->machine)
    return nullptr;
  setCodeGenOptions();
  ready->stream = std::make_unique<llvm::raw_svector_ostream>(ready->buffer);
  if (ready->machine->addPassesToEmitFile(ready->passes, *ready->stream, nullptr,
                                          llvm::CGFT_ObjectFile)) {
    error = "error: the target cannot emit an object file";
    return nullptr;
  }
  return ready;
}

} // namespace

void prepareCodeGen() {
  if (prepared)
    return;
  initializeCodeGen();
  std::string error;  // the compile reports it
  prepared =
      buildCodeGen(llvm::sys::getDefaultTargetTriple(), llvm::CodeGenOpt::Default, error);
}

void prepareNextCodeGen() {
  prepareCodeGen();
  if (prepared)
    warmTarget(*prepared->machine);
}

void warmCodeGenTarget() {
  static bool warmed = false;
  if (warmed || !prepared)
    return;  // without a prepared pipeline, an earlier -O2 compile has done it
  warmed = true;
  warmTarget(*prepared->machine);
}

void setOption(llvm::StringRef name, llvm::StringRef value) {
  auto &options = llvm::cl::getRegisteredOptions();
  auto found = options.find(name);
  if (found != options.end() && found->second->getNumOccurrences() == 0)
    found->second->addOccurrence(0, name, value);
}

void resetOption(llvm::StringRef name, llvm::StringRef value) {
  auto &options = llvm::cl::getRegisteredOptions();
  auto found = options.find(name);
  if (found == options.end())
    return;
  found->second->reset();
  found->second->addOccurrence(0, name, value);
}

bool emitObject(llvm::Module &module, llvm::SmallVectorImpl<char> &object,
                std::string &error) {
  initializeCodeGen();
  // Set for each compile, not once per process: the link of the previous one reset them.
  setCodeGenOptions();

  // What llc does for a module without a triple: the default triple, the generic CPU
  // (no -mcpu), -O2 (-O0 for code that only waits on the runtime, see chooseLevel),
  // position-independent code for the shared library.
  std::string triple = module.getTargetTriple();
  if (triple.empty())
    triple = llvm::sys::getDefaultTargetTriple();
  llvm::CodeGenOpt::Level level = chooseLevel(module);
  std::unique_ptr<PreparedCodeGen> ready;
  if (prepared && level == llvm::CodeGenOpt::Default &&
      prepared->machine->getTargetTriple().str() == triple)
    ready = std::move(prepared);
  else
    ready = buildCodeGen(triple, level, error);
  if (!ready)
    return false;
  module.setTargetTriple(triple);
  module.setDataLayout(ready->machine->createDataLayout());
  packConstantArrays(module);
  ready->passes.run(module);
  object.assign(ready->buffer.begin(), ready->buffer.end());
  // ~130 passes and the target machine: freed after the compile (Disposal.cpp).
  disposeLater(std::move(ready));
  return true;
}

} // namespace cofactor::compiler
