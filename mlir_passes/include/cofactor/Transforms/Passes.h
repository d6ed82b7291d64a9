//===- Passes.h - cofactor's MLIR passes ------------------------*- C++ -*-===//

#ifndef COFACTOR_TRANSFORMS_PASSES_H
#define COFACTOR_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace cofactor {

/// `--lower-quantum-to-runtime`: every quantum op becomes a call of the runtime C
/// ABI (runtime/include/cofactor/runtime.h).
std::unique_ptr<mlir::Pass> createLowerQuantumToRuntimePass();

/// Registers all of cofactor's passes with the global pass registry.
void registerCofactorPasses();

} // namespace cofactor

#endif // COFACTOR_TRANSFORMS_PASSES_H
