//===- QuantumDialect.cpp - the quantum dialect and its types -------------===//

#include "cofactor/Quantum/QuantumDialect.h"
#include "cofactor/Quantum/QuantumOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace cofactor::quantum;

#include "cofactor/Quantum/QuantumOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "cofactor/Quantum/QuantumOpsTypes.cpp.inc"

void QuantumDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "cofactor/Quantum/QuantumOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "cofactor/Quantum/QuantumOpsTypes.cpp.inc"
      >();
}
