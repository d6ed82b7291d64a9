//===- EnzymeInput.h - the module as Enzyme is given it ---------*- C++ -*-===//
#ifndef COFACTOR_COMPILER_ENZYMEINPUT_H
#define COFACTOR_COMPILER_ENZYMEINPUT_H

#include "llvm/IR/GlobalValue.h"

#include <vector>

namespace llvm {
class Constant;
class GlobalVariable;
class Module;
} // namespace llvm

namespace cofactor::compiler {

/// Puts a module in the form Enzyme analyses fastest (see EnzymeInput.cpp) before the
/// Enzyme pass, and `restore` undoes what must not outlive it (before O2).
class EnzymeInput {
public:
  void prepare(llvm::Module &module);
  void restore();

private:
  struct Hidden {
    llvm::GlobalVariable *global;
    llvm::Constant *initializer;
    llvm::GlobalValue::LinkageTypes linkage;
  };
  std::vector<Hidden> hidden;
};

} // namespace cofactor::compiler

#endif
