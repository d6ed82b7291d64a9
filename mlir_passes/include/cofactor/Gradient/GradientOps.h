//===- GradientOps.h - the gradient dialect ---------------------*- C++ -*-===//

#ifndef COFACTOR_GRADIENT_GRADIENTOPS_H
#define COFACTOR_GRADIENT_GRADIENTOPS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallVector.h"

#include "GradientOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "GradientOps.h.inc"

#endif // COFACTOR_GRADIENT_GRADIENTOPS_H
