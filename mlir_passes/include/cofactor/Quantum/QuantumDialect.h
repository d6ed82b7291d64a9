//===- QuantumDialect.h - the quantum dialect and its types -----*- C++ -*-===//

#ifndef COFACTOR_QUANTUM_QUANTUMDIALECT_H
#define COFACTOR_QUANTUM_QUANTUMDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "cofactor/Quantum/QuantumOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "cofactor/Quantum/QuantumOpsTypes.h.inc"

#endif // COFACTOR_QUANTUM_QUANTUMDIALECT_H
