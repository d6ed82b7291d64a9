//===- ParamGather.h - gate parameters gathered by loops --------*- C++ -*-===//
//
// Part of --cofactor-split-qnodes. The preprocessing of a split QNode copies
// every gate parameter into `params` (`params[k] = <operand>`). When the
// operands are elements of an array (StronglyEntanglingLayers'
// `weights[l, i, j]`), a load and a store per element would give Enzyme, O2
// and code generation straight-line code that grows with the circuit. Here a
// group of at least 8 consecutive parameter numbers whose values are loads at
// evenly spaced constant positions of one f64 memref becomes one `scf.for`.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_LIB_GRADIENT_PARAMGATHER_H
#define COFACTOR_LIB_GRADIENT_PARAMGATHER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace cofactor {

/// The inputs (the first `numInputs` arguments) that `fn` only reads: every
/// use is a `memref.load` or `memref.dim`, so their contents do not change
/// while `fn` runs. (Computed on the QNode before it is split: the split adds
/// calls of its read-only clones.)
llvm::SmallPtrSet<mlir::Value, 4> readOnlyInputs(mlir::func::FuncOp fn,
                                                 unsigned numInputs);

/// Turns the copies `params[k] = m[...]` (constant k) of `fn`'s entry block
/// into loops where they form groups, each loop after its group's last copy.
/// The source must hold the same elements there as where the copies read
/// them: an input in `readOnly`, or a buffer allocated in the entry block that
/// nothing writes or views between the group's first load and its last copy
/// (numpy functions of the inputs computed inside the QNode, e.g.
/// `np.sin(w)`). Loads and constants left without users are erased.
void gatherParameterCopies(mlir::func::FuncOp fn, mlir::Value params,
                           const llvm::SmallPtrSetImpl<mlir::Value> &readOnly);

} // namespace cofactor

#endif // COFACTOR_LIB_GRADIENT_PARAMGATHER_H
