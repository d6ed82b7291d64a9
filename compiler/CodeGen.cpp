//===- CodeGen.cpp - object code for the host, as llc ---------------------===//
#include "Stages.h"

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

bool emitObject(llvm::Module &module, llvm::SmallVectorImpl<char> &object,
                std::string &error) {
  initializeCodeGen();

  // What llc does for a module without a triple: the default triple, the generic CPU
  // (no -mcpu), -O2, position-independent code for the shared library.
  std::string triple = module.getTargetTriple();
  if (triple.empty())
    triple = llvm::sys::getDefaultTargetTriple();
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return false;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, /*CPU=*/"", /*Features=*/"", llvm::TargetOptions(), llvm::Reloc::PIC_,
      llvm::None, llvm::CodeGenOpt::Default));
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
