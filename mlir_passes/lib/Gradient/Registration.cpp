//===- Registration.cpp - register the gradient passes --------------------===//

#include "cofactor/Gradient/Passes.h"

void cofactor::registerGradientPasses() {
  mlir::registerPass([] { return createDirectQNodeGradientsPass(); });
  mlir::registerPass([] { return createSplitQNodesPass(); });
  mlir::registerPass([] { return createCustomGradientsPass(); });
  mlir::registerPass([] { return createLowerGradientOpsPass(); });
  mlir::registerPass([] { return createEmitEnzymeGluePass(); });
}
