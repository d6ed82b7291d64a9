//===- cofactor-opt.cpp - the cofactor optimizer driver -------------------===//
//
// mlir-opt with cofactor's dialects and passes registered next to all upstream
// dialects and passes (MLIR 15 cannot load pass plugins into mlir-opt).
//
//===----------------------------------------------------------------------===//

#include "cofactor/Quantum/QuantumDialect.h"
#include "cofactor/Transforms/Passes.h"
#ifdef COFACTOR_HAVE_GRADIENT
#include "cofactor/Gradient/GradientOps.h"
#include "cofactor/Gradient/Passes.h"
#endif

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  cofactor::registerCofactorPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  registry.insert<cofactor::quantum::QuantumDialect>();
#ifdef COFACTOR_HAVE_GRADIENT
  cofactor::registerGradientPasses();
  registry.insert<cofactor::gradient::GradientDialect>();
#endif

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "cofactor optimizer driver\n", registry));
}
