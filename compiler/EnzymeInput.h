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

  /// Whether Enzyme's PreserveNVVM pass has anything to do in `module`: globals naming
  /// Enzyme's registrations (`__enzyme_register_gradient_*`, `__enzyme_inactivefn`, ...),
  /// annotations, or a GPU target. Otherwise it only runs what the Enzyme pass runs first
  /// (attributeKnownFunctions on each function; 8 M instructions on the tanh gradient),
  /// and Enzyme's output is the same without it.
  static bool needsPreserveNVVM(const llvm::Module &module);

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
