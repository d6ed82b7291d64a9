//===- Passes.h - cofactor's gradient passes --------------------*- C++ -*-===//
//
// The passes that make Enzyme differentiate hybrid programs, in pipeline order
// (docs/gradients.md):
//
//   --cofactor-direct-qnode-gradients  gradient.vjp of a QNode without
//                                  classical code -> a direct VJP (no Enzyme)
//   --cofactor-split-qnodes        QNode -> classical preprocessing +
//   @q.quantum
//   --cofactor-custom-gradients    @X.fwd_impl / @X.rev_impl for opaque callees
//   --lower-gradient-ops           gradient.vjp -> call @__cofactor_vjp_<k>
//   (standard lowering to the LLVM dialect)
//   --cofactor-emit-enzyme-glue    registrations, aug/rev wrappers,
//                                  __enzyme_autodiff calls
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_GRADIENT_PASSES_H
#define COFACTOR_GRADIENT_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace cofactor {

std::unique_ptr<mlir::Pass> createDirectQNodeGradientsPass();
std::unique_ptr<mlir::Pass> createSplitQNodesPass();
std::unique_ptr<mlir::Pass> createCustomGradientsPass();
std::unique_ptr<mlir::Pass> createLowerGradientOpsPass();
std::unique_ptr<mlir::Pass> createEmitEnzymeGluePass();

/// Registers the passes above with the global pass registry.
void registerGradientPasses();

} // namespace cofactor

#endif // COFACTOR_GRADIENT_PASSES_H
