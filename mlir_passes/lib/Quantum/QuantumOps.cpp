//===- QuantumOps.cpp - operations of the quantum dialect -----------------===//
//
// Verifiers: operand counts agree with the count attributes, gate names and
// arities agree with gates.def, and memref operands have the shapes the runtime
// reads or writes.
//
//===----------------------------------------------------------------------===//

#include "cofactor/Quantum/QuantumOps.h"
#include "cofactor/Quantum/RuntimeTables.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace cofactor::quantum;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// A flag attribute (BoolAttr or UnitAttr) is set when it is `true` or a unit.
static bool isFlagSet(Attribute attr) {
  if (!attr)
    return false;
  if (auto flag = attr.dyn_cast<BoolAttr>())
    return flag.getValue();
  return attr.isa<UnitAttr>();
}

static SmallVector<int64_t> toIntList(ArrayAttr attr) {
  SmallVector<int64_t> values;
  if (attr)
    for (Attribute element : attr)
      values.push_back(element.cast<IntegerAttr>().getInt());
  return values;
}

/// 2^k, or -1 when that does not fit (no static size can then match).
static int64_t powerOfTwo(int64_t k) {
  return k >= 0 && k < 62 ? int64_t(1) << k : -1;
}

/// Whether a static dimension `dim` differs from `expected`.
static bool mismatches(int64_t dim, int64_t expected) {
  return !ShapedType::isDynamic(dim) && dim != expected;
}

/// The number of qubits the device of `op`'s function is acquired with, when the
/// function acquires exactly one device (the frontend's circuit functions); else -1.
static int64_t acquiredQubits(Operation *op) {
  Operation *fn = nullptr;
  for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
    if (p->hasTrait<OpTrait::IsIsolatedFromAbove>()) {
      fn = p;
      break;
    }
  if (!fn)
    return -1;
  int64_t qubits = -1, found = 0;
  fn->walk([&](DeviceAcquireOp acquire) {
    ++found;
    qubits = acquire.getNumQubitsAttr().getInt();
  });
  return found == 1 ? qubits : -1;
}

/// A measurement of all wires writes a buffer sized by the acquired device: its static
/// size must match, or the runtime would write past it (a 0-wire device once was acquired
/// with one qubit while its state buffer had one amplitude).
static LogicalResult verifyAllWiresSize(Operation *op, int64_t dim,
                                        bool exponent, StringRef what) {
  int64_t n = acquiredQubits(op);
  if (n < 0)
    return success();
  int64_t expected = exponent ? powerOfTwo(n) : n;
  if (mismatches(dim, expected))
    return op->emitOpError()
           << what << " of all wires of a device with " << n
           << " qubit(s) needs " << expected << " entries, the buffer has "
           << dim;
  return success();
}

/// Checks that every value in `values` is an i64 (a wire index).
static LogicalResult verifyWires(Operation *op, ValueRange values,
                                 StringRef what) {
  for (auto it : llvm::enumerate(values))
    if (!it.value().getType().isSignlessInteger(64))
      return op->emitOpError() << what << " #" << it.index()
                               << " must be i64, got " << it.value().getType();
  return success();
}

/// Checks that `value` is a memref with identity layout, element type `element`
/// and rank `rank` (the runtime reads it as one contiguous array).
static FailureOr<MemRefType> verifyBuffer(Operation *op, Value value,
                                          StringRef what, Type element,
                                          int64_t rank, StringRef shape) {
  auto type = value.getType().dyn_cast<MemRefType>();
  if (!type || type.getElementType() != element || type.getRank() != rank ||
      !type.getLayout().isIdentity())
    return op->emitOpError() << what << " must be a " << shape
                             << " with the identity layout, got "
                             << value.getType();
  return type;
}

/// Checks a 2^k x 2^k complex matrix, memref<DxDx2xf64>, for `numWires` wires.
static LogicalResult verifyMatrix(Operation *op, Value matrix,
                                  int64_t numWires) {
  Builder builder(op->getContext());
  FailureOr<MemRefType> type = verifyBuffer(
      op, matrix, "matrix", builder.getF64Type(), 3, "memref<DxDx2xf64>");
  if (failed(type))
    return failure();
  int64_t dim = powerOfTwo(numWires);
  ArrayRef<int64_t> shape = type->getShape();
  if (mismatches(shape[0], dim) || mismatches(shape[1], dim) ||
      mismatches(shape[2], 2))
    return op->emitOpError() << "matrix for " << numWires << " wire(s) must be "
                             << dim << "x" << dim << "x2, got " << *type;
  return success();
}

/// Splits and checks the operands `leading..., wires..., ctrl_wires...` of a
/// gate-like op and its `ctrl_values`.
static LogicalResult verifyControlled(Operation *op, ValueRange inputs,
                                      int64_t numLeading, int64_t numWires,
                                      ArrayAttr ctrlValues) {
  if (numWires < 0)
    return op->emitOpError() << "num_wires must be >= 0, got " << numWires;
  int64_t numCtrls = ctrlValues ? ctrlValues.size() : 0;
  int64_t expected = numLeading + numWires + numCtrls;
  if (int64_t(inputs.size()) != expected)
    return op->emitOpError()
           << "expects " << expected << " operands (" << numLeading
           << " leading, " << numWires << " wires, " << numCtrls
           << " control wires as given by ctrl_values), got " << inputs.size();
  for (auto it : llvm::enumerate(toIntList(ctrlValues)))
    if (it.value() != 0 && it.value() != 1)
      return op->emitOpError() << "ctrl_values entries must be 0 or 1, got "
                               << it.value() << " at index " << it.index();
  if (failed(verifyWires(op, inputs.slice(numLeading, numWires), "wire")))
    return failure();
  return verifyWires(op, inputs.drop_front(numLeading + numWires),
                     "control wire");
}

// The accessors every gate-like op declares (ControlledOpDecls in the ODS).
#define DEFINE_CONTROLLED_ACCESSORS(OP, NUM_LEADING)                           \
  OperandRange OP::getLeadingOperands() {                                      \
    return getInputs().take_front(NUM_LEADING);                                \
  }                                                                            \
  OperandRange OP::getWires() {                                                \
    return getInputs().slice(NUM_LEADING, getNumWires());                      \
  }                                                                            \
  OperandRange OP::getCtrlWires() {                                            \
    return getInputs().drop_front(NUM_LEADING + getNumWires());                \
  }                                                                            \
  SmallVector<int64_t> OP::getCtrlValueList() {                                \
    return toIntList(getCtrlValuesAttr());                                     \
  }                                                                            \
  bool OP::isAdjoint() { return isFlagSet(getAdjointAttr()); }

DEFINE_CONTROLLED_ACCESSORS(GateOp, getNumParams())
DEFINE_CONTROLLED_ACCESSORS(PauliRotOp, 1)
DEFINE_CONTROLLED_ACCESSORS(UnitaryOp, 1)
#undef DEFINE_CONTROLLED_ACCESSORS

//===----------------------------------------------------------------------===//
// Device lifecycle
//===----------------------------------------------------------------------===//

LogicalResult DeviceAcquireOp::verify() {
  if (getNumQubitsAttr().getInt() < 0)
    return emitOpError("num_qubits must be >= 0");
  if (int64_t(getShots()) < 0)
    return emitOpError("shots must be >= 0 (0: analytic)");
  return success();
}

//===----------------------------------------------------------------------===//
// Gates
//===----------------------------------------------------------------------===//

LogicalResult GateOp::verify() {
  const GateInfo *info = lookupGate(getGate());
  if (!info)
    return emitOpError() << "unknown gate '" << getGate()
                         << "' (not in runtime/include/cofactor/gates.def)";
  int64_t numParams = getNumParamsAttr().getInt();
  int64_t numWires = getNumWiresAttr().getInt();
  if (numParams != info->numParams)
    return emitOpError() << "gate '" << info->name << "' takes "
                         << info->numParams << " parameter(s), got num_params = "
                         << numParams;
  if (info->numWires < 0 ? numWires < 1 : numWires != info->numWires)
    return emitOpError() << "gate '" << info->name << "' acts on "
                         << (info->numWires < 0
                                 ? std::string("at least 1")
                                 : std::to_string(info->numWires))
                         << " wire(s), got num_wires = " << numWires;
  if (failed(verifyControlled(*this, getInputs(), numParams, numWires,
                              getCtrlValuesAttr())))
    return failure();
  for (auto it : llvm::enumerate(getLeadingOperands()))
    if (!it.value().getType().isF64())
      return emitOpError() << "parameter #" << it.index()
                           << " must be f64, got " << it.value().getType();
  return success();
}

LogicalResult PauliRotOp::verify() {
  int64_t numWires = getNumWiresAttr().getInt();
  if (failed(verifyControlled(*this, getInputs(), 1, numWires,
                              getCtrlValuesAttr())))
    return failure();
  if (!getInputs().front().getType().isF64())
    return emitOpError() << "theta must be f64, got "
                         << getInputs().front().getType();
  StringRef word = getWord();
  if (int64_t(word.size()) != numWires)
    return emitOpError() << "word '" << word << "' must have one letter per "
                         << "wire (" << numWires << ")";
  if (word.find_first_not_of("IXYZ") != StringRef::npos)
    return emitOpError() << "word '" << word
                         << "' may only contain the letters I, X, Y, Z";
  return success();
}

LogicalResult UnitaryOp::verify() {
  int64_t numWires = getNumWiresAttr().getInt();
  if (failed(verifyControlled(*this, getInputs(), 1, numWires,
                              getCtrlValuesAttr())))
    return failure();
  return verifyMatrix(*this, getInputs().front(), numWires);
}

//===----------------------------------------------------------------------===//
// Observables
//===----------------------------------------------------------------------===//

LogicalResult ObsNamedOp::verify() {
  if (!lookupNamedObservable(getKind()))
    return emitOpError() << "unknown observable kind '" << getKind()
                         << "' (expected Identity, PauliX, PauliY, PauliZ or "
                            "Hadamard)";
  return success();
}

LogicalResult ObsHermitianOp::verify() {
  if (getWires().empty())
    return emitOpError("needs at least one wire");
  return verifyMatrix(*this, getMatrix(), getWires().size());
}

LogicalResult ObsTensorOp::verify() {
  if (getTerms().empty())
    return emitOpError("needs at least one factor");
  return success();
}

LogicalResult ObsHamiltonianOp::verify() {
  FailureOr<MemRefType> type =
      verifyBuffer(*this, getCoeffs(), "coeffs", Builder(getContext()).getF64Type(),
                   1, "memref<Nxf64>");
  if (failed(type))
    return failure();
  if (mismatches(type->getDimSize(0), getTerms().size()))
    return emitOpError() << "has " << getTerms().size() << " terms but "
                         << type->getDimSize(0) << " coefficients";
  return success();
}

//===----------------------------------------------------------------------===//
// Measurements
//===----------------------------------------------------------------------===//

LogicalResult ProbsOp::verify() {
  FailureOr<MemRefType> type =
      verifyBuffer(*this, getOut(), "out", Builder(getContext()).getF64Type(),
                   1, "memref<2^kxf64>");
  if (failed(type))
    return failure();
  if (!getWires().empty() &&
      mismatches(type->getDimSize(0), powerOfTwo(getWires().size())))
    return emitOpError() << "out must have 2^" << getWires().size()
                         << " entries, got " << *type;
  if (getWires().empty())
    return verifyAllWiresSize(*this, type->getDimSize(0), true, "probs");
  return success();
}

LogicalResult StateOp::verify() {
  FailureOr<MemRefType> type =
      verifyBuffer(*this, getOut(), "out", Builder(getContext()).getF64Type(),
                   2, "memref<2^nx2xf64>");
  if (failed(type))
    return failure();
  if (mismatches(type->getDimSize(1), 2))
    return emitOpError() << "out must be 2^nx2 (re, im pairs), got " << *type;
  return verifyAllWiresSize(*this, type->getDimSize(0), true, "state");
}

LogicalResult SampleOp::verify() {
  FailureOr<MemRefType> type =
      verifyBuffer(*this, getOut(), "out",
                   Builder(getContext()).getIntegerType(64), 2,
                   "memref<SHOTSxKxi64>");
  if (failed(type))
    return failure();
  if (!getWires().empty() &&
      mismatches(type->getDimSize(1), getWires().size()))
    return emitOpError() << "out must have one column per wire ("
                         << getWires().size() << "), got " << *type;
  if (getWires().empty())
    return verifyAllWiresSize(*this, type->getDimSize(1), false, "sample");
  return success();
}

LogicalResult CountsOp::verify() {
  FailureOr<MemRefType> type =
      verifyBuffer(*this, getOut(), "out",
                   Builder(getContext()).getIntegerType(64), 1,
                   "memref<2^kxi64>");
  if (failed(type))
    return failure();
  if (!getWires().empty() &&
      mismatches(type->getDimSize(0), powerOfTwo(getWires().size())))
    return emitOpError() << "out must have 2^" << getWires().size()
                         << " entries, got " << *type;
  if (getWires().empty())
    return verifyAllWiresSize(*this, type->getDimSize(0), true, "counts");
  return success();
}

bool MeasureOp::isReset() { return isFlagSet(getResetAttr()); }

LogicalResult MeasureOp::verify() {
  int64_t postselect = getPostselect();
  if (postselect < -1 || postselect > 1)
    return emitOpError() << "postselect must be -1 (none), 0 or 1, got "
                         << postselect;
  return success();
}

#define GET_OP_CLASSES
#include "cofactor/Quantum/QuantumOps.cpp.inc"
