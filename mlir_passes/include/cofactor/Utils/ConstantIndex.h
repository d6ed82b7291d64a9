//===- ConstantIndex.h - loads at constant positions ------------*- C++ -*-===//
//
// Shared by --cofactor-split-qnodes (ParamGather) and the gate tables of
// --lower-quantum-to-runtime: both turn per-element loads of gate parameters
// into positions in one buffer.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_UTILS_CONSTANTINDEX_H
#define COFACTOR_UTILS_CONSTANTINDEX_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/Optional.h"

namespace cofactor {

/// The linear (row-major) position of `load` in its memref when the memref is
/// an f64 memref with the identity layout and a static shape (or rank 1), and
/// every index is an in-bounds constant; None otherwise.
inline llvm::Optional<int64_t> constantLinearIndex(mlir::memref::LoadOp load) {
  mlir::MemRefType type = load.getMemRefType();
  if (!type.getElementType().isF64() || !type.getLayout().isIdentity() ||
      (type.getRank() != 1 && !type.hasStaticShape()))
    return llvm::None;
  int64_t linear = 0;
  for (auto it : llvm::enumerate(load.getIndices())) {
    llvm::APInt index;
    if (!mlir::matchPattern(it.value(), mlir::m_ConstantInt(&index)) ||
        index.isNegative() || index.getActiveBits() > 40)
      return llvm::None;
    int64_t dim = type.getDimSize(it.index());
    bool dynamic = mlir::ShapedType::isDynamic(dim);
    if (!dynamic && index.getSExtValue() >= dim)
      return llvm::None; // out of bounds: left to the per-element code
    linear = linear * (dynamic ? 1 : dim) + index.getSExtValue();
  }
  return linear;
}

} // namespace cofactor

#endif // COFACTOR_UTILS_CONSTANTINDEX_H
