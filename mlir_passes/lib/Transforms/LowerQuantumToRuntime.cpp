//===- LowerQuantumToRuntime.cpp - quantum ops to runtime calls -----------===//
//
// `--lower-quantum-to-runtime` replaces every quantum op by a `func.call` of the
// matching `cf_rt_*` function of runtime/include/cofactor/runtime.h and
// `!quantum.obs` by the runtime's i64 handles. Afterwards the module is plain
// upstream MLIR (func, arith, llvm; memref operands reach the runtime through
// unrealized casts to their LLVM descriptors, which the standard lowering plus
// reconcile-unrealized-casts resolve).
//
//===----------------------------------------------------------------------===//

#include "GateTables.h"
#include "RuntimeCallBuilder.h"

#include "cofactor/Gradient/Attributes.h"
#include "cofactor/Quantum/QuantumOps.h"
#include "cofactor/Quantum/RuntimeTables.h"
#include "cofactor/Transforms/Passes.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/FunctionInterfaces.h"
#include "mlir/IR/SubElementInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace cofactor;
using namespace cofactor::quantum;

namespace {

/// State shared by the patterns of one pass run.
struct LoweringState {
  LLVMTypeConverter &llvmTypes;
  StackArrays stackArrays;
};

/// Lowers one quantum op to a runtime call. Subclasses implement `lower`, which
/// returns the value replacing the op's result (null for ops without one).
template <typename OpT>
class RuntimeCallPattern : public OpConversionPattern<OpT> {
public:
  using Adaptor = typename OpT::Adaptor;

  RuntimeCallPattern(TypeConverter &typeConverter, MLIRContext *context,
                     LoweringState &state)
      : OpConversionPattern<OpT>(typeConverter, context), state(state) {}

  LogicalResult
  matchAndRewrite(OpT op, Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    RuntimeCallBuilder rt(rewriter, op, state.llvmTypes, state.stackArrays);
    if (Value result = lower(op, adaptor, rt, rewriter))
      rewriter.replaceOp(op, result);
    else
      rewriter.eraseOp(op);
    return success();
  }

protected:
  virtual Value lower(OpT op, Adaptor adaptor, RuntimeCallBuilder &rt,
                      OpBuilder &builder) const = 0;

private:
  LoweringState &state;
};

} // namespace

/// The arguments shared by cf_rt_gate, cf_rt_pauli_rot and cf_rt_unitary after
/// the op-specific ones: wires, num_wires, adjoint, ctrl_wires, ctrl_values,
/// num_ctrls.
template <typename OpT>
static void appendTargetAndControls(OpT op, ValueRange inputs,
                                    int64_t numLeading, RuntimeCallBuilder &rt,
                                    OpBuilder &builder,
                                    SmallVectorImpl<Value> &args) {
  Type i64 = builder.getI64Type();
  int64_t numWires = op.getNumWiresAttr().getInt();
  SmallVector<int64_t> ctrlValues = op.getCtrlValueList();
  args.push_back(rt.array(i64, inputs.slice(numLeading, numWires)));
  args.push_back(rt.i64(numWires));
  args.push_back(rt.i8(op.isAdjoint()));
  args.push_back(rt.array(i64, inputs.drop_front(numLeading + numWires)));
  args.push_back(rt.i8Array(ctrlValues));
  args.push_back(rt.i64(ctrlValues.size()));
}

namespace {

//===----------------------------------------------------------------------===//
// Device lifecycle
//===----------------------------------------------------------------------===//

struct DeviceAcquireLowering : RuntimeCallPattern<DeviceAcquireOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(DeviceAcquireOp op, Adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    // The status is also kept in the runtime's error slot, which the launcher
    // reads after the call; nothing here needs it.
    rt.call("cf_rt_device_acquire", builder.getI64Type(),
            {rt.i64(op.getNumQubitsAttr().getInt()),
             rt.i64(int64_t(op.getShots())), rt.i64(int64_t(op.getSeed()))});
    return nullptr;
  }
};

struct DeviceReleaseLowering : RuntimeCallPattern<DeviceReleaseOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(DeviceReleaseOp, Adaptor, RuntimeCallBuilder &rt,
              OpBuilder &) const override {
    rt.call("cf_rt_device_release", {}, {});
    return nullptr;
  }
};

//===----------------------------------------------------------------------===//
// Gates
//===----------------------------------------------------------------------===//

struct GateLowering : RuntimeCallPattern<GateOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(GateOp op, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    int64_t numParams = op.getNumParamsAttr().getInt();
    ValueRange inputs = adaptor.getInputs();
    SmallVector<Value> args = {
        rt.i64(lookupGate(op.getGate())->id),
        rt.array(builder.getF64Type(), inputs.take_front(numParams)),
        rt.i64(numParams)};
    appendTargetAndControls(op, inputs, numParams, rt, builder, args);
    rt.call("cf_rt_gate", {}, args);
    return nullptr;
  }
};

struct PauliRotLowering : RuntimeCallPattern<PauliRotOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(PauliRotOp op, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    ValueRange inputs = adaptor.getInputs();
    SmallVector<Value> args = {
        inputs.front(), rt.constantString("cf_pauli_word_", op.getWord())};
    appendTargetAndControls(op, inputs, 1, rt, builder, args);
    rt.call("cf_rt_pauli_rot", {}, args);
    return nullptr;
  }
};

struct UnitaryLowering : RuntimeCallPattern<UnitaryOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(UnitaryOp op, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    ValueRange inputs = adaptor.getInputs();
    SmallVector<Value> args = {rt.dataPointer(inputs.front())};
    appendTargetAndControls(op, inputs, 1, rt, builder, args);
    rt.call("cf_rt_unitary", {}, args);
    return nullptr;
  }
};

//===----------------------------------------------------------------------===//
// Observables
//===----------------------------------------------------------------------===//

struct ObsNamedLowering : RuntimeCallPattern<ObsNamedOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(ObsNamedOp op, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    Value kind = rt.i64(*lookupNamedObservable(op.getKind()));
    return rt
        .call("cf_rt_obs_named", builder.getI64Type(),
              {kind, adaptor.getWire()})
        .getResult(0);
  }
};

struct ObsHermitianLowering : RuntimeCallPattern<ObsHermitianOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(ObsHermitianOp, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    Type i64 = builder.getI64Type();
    ValueRange wires = adaptor.getWires();
    return rt
        .call("cf_rt_obs_hermitian", i64,
              {rt.dataPointer(adaptor.getMatrix()), rt.array(i64, wires),
               rt.i64(wires.size())})
        .getResult(0);
  }
};

struct ObsTensorLowering : RuntimeCallPattern<ObsTensorOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(ObsTensorOp, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    Type i64 = builder.getI64Type();
    ValueRange terms = adaptor.getTerms();
    return rt
        .call("cf_rt_obs_tensor", i64,
              {rt.array(i64, terms), rt.i64(terms.size())})
        .getResult(0);
  }
};

struct ObsHamiltonianLowering : RuntimeCallPattern<ObsHamiltonianOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(ObsHamiltonianOp op, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    Type i64 = builder.getI64Type();
    ValueRange terms = adaptor.getTerms();
    // Coefficients that are differentiated (attr::kDiffCoeffs, from the
    // frontend): the runtime makes them tape parameters while it records.
    StringRef fn = op->hasAttr(cofactor::attr::kDiffCoeffs)
                       ? "cf_rt_obs_hamiltonian_diff"
                       : "cf_rt_obs_hamiltonian";
    return rt
        .call(fn, i64,
              {rt.dataPointer(adaptor.getCoeffs()), rt.array(i64, terms),
               rt.i64(terms.size())})
        .getResult(0);
  }
};

//===----------------------------------------------------------------------===//
// Measurements
//===----------------------------------------------------------------------===//

struct ExpvalLowering : RuntimeCallPattern<ExpvalOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(ExpvalOp, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    return rt.call("cf_rt_expval", builder.getF64Type(), adaptor.getObs())
        .getResult(0);
  }
};

struct VarLowering : RuntimeCallPattern<VarOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(VarOp, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    return rt.call("cf_rt_var", builder.getF64Type(), adaptor.getObs())
        .getResult(0);
  }
};

/// probs, sample and counts: `(out, wires, num_wires)`.
template <typename OpT>
struct OutAndWiresLowering : RuntimeCallPattern<OpT> {
  using Adaptor = typename OpT::Adaptor;
  OutAndWiresLowering(TypeConverter &typeConverter, MLIRContext *context,
                      LoweringState &state, StringRef callee)
      : RuntimeCallPattern<OpT>(typeConverter, context, state),
        callee(callee) {}
  Value lower(OpT, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    ValueRange wires = adaptor.getWires();
    rt.call(callee, {},
            {rt.dataPointer(adaptor.getOut()),
             rt.array(builder.getI64Type(), wires), rt.i64(wires.size())});
    return nullptr;
  }
  StringRef callee;
};

struct StateLowering : RuntimeCallPattern<StateOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(StateOp, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &) const override {
    rt.call("cf_rt_state", {}, rt.dataPointer(adaptor.getOut()));
    return nullptr;
  }
};

struct MeasureLowering : RuntimeCallPattern<MeasureOp> {
  using RuntimeCallPattern::RuntimeCallPattern;
  Value lower(MeasureOp op, Adaptor adaptor, RuntimeCallBuilder &rt,
              OpBuilder &builder) const override {
    Value outcome =
        rt.call("cf_rt_measure", builder.getI8Type(),
                {adaptor.getWire(), rt.i8(op.isReset()),
                 rt.i64(int64_t(op.getPostselect()))})
            .getResult(0);
    return builder.create<arith::CmpIOp>(op.getLoc(), arith::CmpIPredicate::ne,
                                         outcome, rt.i8(0));
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Observables may also cross function, branch and scf region boundaries (a
/// helper function returning an observable, an scf.if yielding one): convert
/// those signatures and terminators too, so that no `!quantum.obs` is left.
static void addObsBoundaryConversions(TypeConverter &typeConverter,
                                      RewritePatternSet &patterns,
                                      ConversionTarget &target) {
  populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(
      patterns, typeConverter);
  target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
    return typeConverter.isSignatureLegal(op.getFunctionType()) &&
           typeConverter.isLegal(&op.getBody());
  });
  populateCallOpTypeConversionPattern(patterns, typeConverter);
  target.addDynamicallyLegalOp<func::CallOp>(
      [&](func::CallOp op) { return typeConverter.isLegal(op); });
  populateBranchOpInterfaceTypeConversionPattern(patterns, typeConverter);
  populateReturnOpTypeConversionPattern(patterns, typeConverter);
  target.markUnknownOpDynamicallyLegal([&](Operation *op) {
    return isNotBranchOpInterfaceOrReturnLikeOp(op) ||
           isLegalForBranchOpInterfaceTypeConversionPattern(op,
                                                            typeConverter) ||
           isLegalForReturnOpTypeConversionPattern(op, typeConverter);
  });
  scf::populateSCFStructuralTypeConversionsAndLegality(typeConverter, patterns,
                                                       target);
}

/// Whether `type` is, or is built from, a type of the quantum dialect (`!quantum.obs` in a
/// function type, a memref of them, ...).
static bool mentionsQuantum(Type type) {
  bool found = false;
  auto check = [&](Type t) {
    found |= llvm::isa<QuantumDialect>(t.getDialect());
  };
  check(type);
  if (auto nested = type.dyn_cast<SubElementTypeInterface>())
    nested.walkSubTypes(check);
  return found;
}

/// Whether the pass has anything to lower in `module`: an op of the quantum dialect, or a
/// value, block argument or function signature of one of its types (what the conversion
/// below rewrites; the gate tables are built from quantum gates). A classical module (a
/// gradient of numpy code) has none: the pass then leaves it as it is without building
/// its patterns and walking it in a dialect conversion (0.22 M instructions on the
/// tanh(W x) gradient, whose lowering is ~7.6 M).
static bool hasQuantumToLower(ModuleOp module) {
  auto inQuantum = [](Operation *op) {
    if (llvm::isa_and_nonnull<QuantumDialect>(op->getDialect()))
      return true;
    for (Type type : op->getResultTypes())
      if (mentionsQuantum(type))
        return true;
    for (Type type : op->getOperandTypes())
      if (mentionsQuantum(type))
        return true;
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (Type type : block.getArgumentTypes())
          if (mentionsQuantum(type))
            return true;
    if (auto function = llvm::dyn_cast<FunctionOpInterface>(op))
      if (mentionsQuantum(function.getFunctionType()))
        return true;
    return false;
  };
  return module
      .walk([&](Operation *op) {
        return inQuantum(op) ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

namespace {

/// `!quantum.obs` becomes the runtime's i64 handle; everything else stays.
class ObsToHandleConverter : public TypeConverter {
public:
  ObsToHandleConverter() {
    addConversion([](Type type) { return type; });
    addConversion([](ObsType type) -> Type {
      return IntegerType::get(type.getContext(), 64);
    });
    auto cast = [](OpBuilder &builder, Type type, ValueRange inputs,
                   Location loc) -> Optional<Value> {
      return builder.create<UnrealizedConversionCastOp>(loc, type, inputs)
          .getResult(0);
    };
    addSourceMaterialization(cast);
    addTargetMaterialization(cast);
  }
};

struct LowerQuantumToRuntimePass
    : public PassWrapper<LowerQuantumToRuntimePass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LowerQuantumToRuntimePass)

  LowerQuantumToRuntimePass() = default;
  LowerQuantumToRuntimePass(const LowerQuantumToRuntimePass &other)
      : PassWrapper(other) {}

  Option<unsigned> gateTableMin{
      *this, "gate-table-min",
      llvm::cl::desc("Runs of at least this many consecutive gates become one "
                     "cf_rt_gate_table call (0: one call per gate)"),
      llvm::cl::init(2)};

  StringRef getArgument() const final { return "lower-quantum-to-runtime"; }
  StringRef getDescription() const final {
    return "Lower quantum dialect ops to calls of the cofactor runtime C ABI";
  }
  void getDependentDialects(DialectRegistry &registry) const final {
    registry.insert<arith::ArithmeticDialect, func::FuncDialect,
                    LLVM::LLVMDialect>();
  }

  void runOnOperation() final {
    // COFACTOR_LOWER_QUANTUM_ALWAYS=1 runs the conversion on every module (A/B).
    const char *always = std::getenv("COFACTOR_LOWER_QUANTUM_ALWAYS");
    if (!(always && std::strcmp(always, "1") == 0) && !hasQuantumToLower(getOperation()))
      return;
    MLIRContext *context = &getContext();
    LLVMTypeConverter llvmTypes(context);
    LoweringState state{llvmTypes, {}};
    ObsToHandleConverter typeConverter;
    lowerGateRunsToTables(getOperation(), llvmTypes, state.stackArrays,
                          gateTableMin);

    RewritePatternSet patterns(context);
    patterns.add<DeviceAcquireLowering, DeviceReleaseLowering, GateLowering,
                 PauliRotLowering, UnitaryLowering, ObsNamedLowering,
                 ObsHermitianLowering, ObsTensorLowering,
                 ObsHamiltonianLowering, ExpvalLowering, VarLowering,
                 StateLowering, MeasureLowering>(typeConverter, context, state);
    patterns.add<OutAndWiresLowering<ProbsOp>>(typeConverter, context, state,
                                               "cf_rt_probs");
    patterns.add<OutAndWiresLowering<SampleOp>>(typeConverter, context, state,
                                                "cf_rt_sample");
    patterns.add<OutAndWiresLowering<CountsOp>>(typeConverter, context, state,
                                                "cf_rt_counts");

    ConversionTarget target(*context);
    target.addIllegalDialect<QuantumDialect>();
    addObsBoundaryConversions(typeConverter, patterns, target);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createLowerQuantumToRuntimePass() {
  return std::make_unique<LowerQuantumToRuntimePass>();
}

void cofactor::registerCofactorPasses() {
  PassRegistration<LowerQuantumToRuntimePass>();
  registerFuseLoopsPass();
  registerConvertMathIfAnyPass();
  registerConvertToLLVMPass();
}
