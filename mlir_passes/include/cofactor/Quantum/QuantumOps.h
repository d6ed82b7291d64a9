//===- QuantumOps.h - operations of the quantum dialect ---------*- C++ -*-===//

#ifndef COFACTOR_QUANTUM_QUANTUMOPS_H
#define COFACTOR_QUANTUM_QUANTUMOPS_H

#include "cofactor/Quantum/QuantumDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallVector.h"

#define GET_OP_CLASSES
#include "cofactor/Quantum/QuantumOps.h.inc"

#endif // COFACTOR_QUANTUM_QUANTUMOPS_H
