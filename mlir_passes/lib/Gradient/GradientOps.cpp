//===- GradientOps.cpp - the gradient dialect -----------------------------===//

#include "cofactor/Gradient/GradientOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace cofactor::gradient;

#include "GradientOpsDialect.cpp.inc"

void GradientDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "GradientOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "GradientOps.cpp.inc"

//===----------------------------------------------------------------------===//
// VJPOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> VJPOp::getDiffInputIndices() {
  SmallVector<int64_t> indices;
  for (Attribute a : getDiffInputsAttr())
    indices.push_back(a.cast<IntegerAttr>().getInt());
  return indices;
}

OperandRange VJPOp::getIns() { return getArgs().take_front(getNumInputs()); }

OperandRange VJPOp::getOuts() {
  return getArgs().slice(getNumInputs(), getNumOutputs());
}

OperandRange VJPOp::getCouts() {
  return getArgs().slice(getNumInputs() + getNumOutputs(), getNumOutputs());
}

OperandRange VJPOp::getDins() {
  return getArgs().drop_front(getNumInputs() + 2 * getNumOutputs());
}

LogicalResult VJPOp::verify() {
  int64_t numInputs = getNumInputs(), numOutputs = getNumOutputs();
  if (numInputs < 0 || numOutputs < 0)
    return emitOpError("num_inputs and num_outputs must be non-negative");
  SmallVector<int64_t> diff = getDiffInputIndices();
  for (size_t i = 0; i < diff.size(); ++i) {
    if (diff[i] < 0 || diff[i] >= numInputs)
      return emitOpError("diff_inputs entry ")
             << diff[i] << " is not an input index (num_inputs = " << numInputs
             << ")";
    if (i > 0 && diff[i] <= diff[i - 1])
      return emitOpError("diff_inputs must be strictly increasing");
  }
  int64_t expected = numInputs + 2 * numOutputs + (int64_t)diff.size();
  if ((int64_t)getArgs().size() != expected)
    return emitOpError("expected ")
           << expected << " operands (ins, outs, couts, dins), got "
           << getArgs().size();
  for (auto [out, cout] : llvm::zip(getOuts(), getCouts()))
    if (out.getType() != cout.getType())
      return emitOpError("cotangent type ")
             << cout.getType() << " differs from output type " << out.getType();
  for (auto [index, din] : llvm::zip(diff, getDins())) {
    Type inType = getIns()[index].getType();
    if (din.getType() != inType)
      return emitOpError("shadow type ")
             << din.getType() << " differs from the type " << inType
             << " of input " << index;
    if (!din.getType().cast<MemRefType>().getElementType().isa<FloatType>())
      return emitOpError("input ")
             << index << " is not floating-point and cannot be differentiated";
  }
  return success();
}

LogicalResult VJPOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto fn =
      symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getCalleeAttr());
  if (!fn)
    return emitOpError("callee ") << getCalleeAttr() << " is not a func.func";
  FunctionType type = fn.getFunctionType();
  if (type.getNumResults() != 0)
    return emitOpError("callee ")
           << getCalleeAttr() << " must be void (destination-passing style)";
  int64_t numArgs = getNumInputs() + getNumOutputs();
  if ((int64_t)type.getNumInputs() != numArgs)
    return emitOpError("callee ")
           << getCalleeAttr() << " takes " << type.getNumInputs()
           << " arguments, but the op passes " << numArgs;
  for (int64_t i = 0; i < numArgs; ++i)
    if (type.getInput(i) != getArgs()[i].getType())
      return emitOpError("operand ")
             << i << " has type " << getArgs()[i].getType()
             << " but the callee expects " << type.getInput(i);
  return success();
}
