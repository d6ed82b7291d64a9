//===- QNodeParams.h - the parameters of a split QNode ----------*- C++ -*-===//
//
// Part of --cofactor-split-qnodes (SplitQNodes.cpp). The quantum part of a
// split QNode reads every differentiated value from one array `params`: the
// parameters of its gates and the coefficients of its differentiated
// Hamiltonians, numbered in program order. The preprocessing, the parameter
// count and the quantum part each walk their clone of the QNode and must give
// every op the same numbers; they share what is here: which ops take how many
// parameters (numParamsOf) and the numbering (ParamCounter).
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_LIB_GRADIENT_QNODEPARAMS_H
#define COFACTOR_LIB_GRADIENT_QNODEPARAMS_H

#include "cofactor/Quantum/QuantumOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace cofactor {

/// A Hamiltonian whose coefficients are differentiated (attr::kDiffCoeffs):
/// its coefficients are parameters of the quantum part, numbered like a gate's
/// (d<H>/dc_k = <term_k> comes from the runtime). Null for any other op.
quantum::ObsHamiltonianOp diffHamiltonian(mlir::Operation *op);

/// How many parameters of the quantum part `op` takes: a gate's parameters,
/// or a differentiated Hamiltonian's coefficients (a static count).
int64_t numParamsOf(mlir::Operation *op);

/// Numbers the gate parameters of one function in program order.
///
/// Gates in the function's entry block (straight-line code, by far the common
/// case) get constant numbers, offset by the number reached after the last
/// loop or branch that held gates. The running number goes through a stack
/// slot only around such a region op: before it the number is stored, gates
/// inside read and bump the slot, after it the number is loaded back.
///
/// Why it matters: Enzyme differentiates the preprocessing function, and the
/// reverse pass needs every gate's parameter number to address the shadow of
/// `params`. A number loaded from a slot that the next gate overwrites must be
/// cached, one i64 per gate in the tape Enzyme passes by value from the
/// augmented forward to the reverse function (4 pointers and 160 i64 for 20
/// layers of StronglyEntanglingLayers on 8 wires, growing with the circuit,
/// and 30% more time in opt). Constants need no cache: the tape is then a few
/// pointers at any depth; a number loaded after a region op costs one field.
class ParamCounter {
public:
  /// `onSlot(builder, slot)` runs once, right after the slot is created (the
  /// preprocessing adds an `__enzyme_integer` hint there).
  ParamCounter(mlir::func::FuncOp fn,
               std::function<void(mlir::OpBuilder &, mlir::Value)> onSlot =
                   nullptr);

  /// Reserves `n` consecutive parameter numbers for `gate`: returns the first.
  mlir::Value next(mlir::OpBuilder &b, mlir::Operation *gate, int64_t n);

  /// The number of parameters, at a `func.return` after all gates were seen.
  mlir::Value total(mlir::OpBuilder &b, mlir::Location loc);

private:
  mlir::Value current(mlir::OpBuilder &b, mlir::Location loc);
  mlir::Value getSlot();

  mlir::func::FuncOp fn;
  std::function<void(mlir::OpBuilder &, mlir::Value)> onSlot;
  bool straightLine;
  mlir::Value slot;
  // The number loaded after the last region op with gates, if any.
  mlir::Value base;
  int64_t offset = 0;
  mlir::Operation *syncedRegionOp = nullptr;
};

/// `first + k`, folded when `first` is a constant (the usual case).
mlir::Value offsetIndex(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value first, int64_t k);

} // namespace cofactor

#endif // COFACTOR_LIB_GRADIENT_QNODEPARAMS_H
