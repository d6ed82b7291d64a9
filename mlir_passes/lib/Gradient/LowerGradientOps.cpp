//===- LowerGradientOps.cpp - gradient.vjp to a placeholder call ----------===//
//
// `--lower-gradient-ops` replaces every `gradient.vjp` by a `func.call` of a
// private declaration `@__cofactor_vjp_<k>` taking the same memref operands.
//
// Why a placeholder call instead of building the `__enzyme_autodiff` call now:
// Enzyme wants each memref passed as its expanded descriptor, with shadows
// interleaved pointer by pointer. Those pointers only exist after the standard
// memref/func lowering, so the real call is built by
// `--cofactor-emit-enzyme-glue`, on the LLVM dialect. The declaration carries
// everything that pass needs (callee, counts, diff_inputs, and the rank of
// every operand so that the expanded arguments can be regrouped), and the
// standard func-to-llvm conversion expands the call's memref operands for us.
//
// When the callee reaches a function with a custom gradient, every input is
// passed as differentiated, with zeroed scratch shadows for the inputs the vjp
// did not ask for (see the comment at the use).
//
// The function handed to Enzyme starts with `__enzyme_double` hints on its
// float buffer arguments (GradientUtils hintDoubles).
//
// It also rewrites every `memref.copy` in the code Enzyme will differentiate
// (the vjp callees and everything they call, short of functions with a custom
// gradient) into a loop of loads and stores. memref.copy lowers to a memcpy of
// untyped bytes, and when the copied memory is only ever touched by opaque
// callees, Enzyme's type analysis cannot tell floats from integers and stops
// with "Cannot deduce type of copy". Typed loads and stores tell it; LLVM turns
// the loop back into a memcpy after Enzyme has run.
//
//===----------------------------------------------------------------------===//

#include "GradientUtils.h"

#include "cofactor/Gradient/Attributes.h"
#include "cofactor/Gradient/GradientOps.h"
#include "cofactor/Gradient/Passes.h"

#include "mlir/Dialect/Arithmetic/IR/Arithmetic.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace cofactor;

namespace {


/// The function to hand to __enzyme_autodiff for `callee`. A callee with a
/// custom gradient (e.g. a Python callback differentiated directly) is wrapped
/// in a function that merely calls it: Enzyme uses a custom gradient where the
/// function is called, while the function handed to __enzyme_autodiff is
/// differentiated from its body, which for an opaque callee is a runtime call
/// (a silent zero).
func::FuncOp differentiableCallee(func::FuncOp callee, SymbolTable &symbols) {
  if (!callee->hasAttr(attr::kVJP) && !callee->hasAttr(attr::kCustomGradient))
    return callee;
  std::string name = (callee.getName() + ".differentiable").str();
  if (auto existing = symbols.lookup<func::FuncOp>(name))
    return existing;
  OpBuilder b(callee->getContext());
  b.setInsertionPointAfter(callee);
  auto wrapper =
      b.create<func::FuncOp>(callee.getLoc(), name, callee.getFunctionType());
  wrapper.setPrivate();
  if (auto n = callee->getAttr(attr::kNumInputs))
    wrapper->setAttr(attr::kNumInputs, n);
  Block *entry = wrapper.addEntryBlock();
  b.setInsertionPointToStart(entry);
  b.create<func::CallOp>(callee.getLoc(), callee, entry->getArguments());
  b.create<func::ReturnOp>(callee.getLoc());
  symbols.insert(wrapper);
  return wrapper;
}

/// Whether a call tree from `callee` contains a function with a custom
/// gradient.
bool reachesCustomGradient(func::FuncOp callee, SymbolTable &symbols) {
  llvm::SetVector<func::FuncOp> reached;
  reached.insert(callee);
  for (size_t k = 0; k < reached.size(); ++k) {
    func::FuncOp fn = reached[k];
    if (fn->hasAttr(attr::kVJP) || fn->hasAttr(attr::kCustomGradient))
      return true;
    fn.walk([&](func::CallOp call) {
      if (auto next = symbols.lookup<func::FuncOp>(call.getCallee()))
        reached.insert(next);
    });
  }
  return false;
}

/// memref.copy -> a typed element loop (see the file comment).
void expandCopies(func::FuncOp fn) {
  SmallVector<memref::CopyOp> copies;
  fn.walk([&](memref::CopyOp op) { copies.push_back(op); });
  for (memref::CopyOp op : copies) {
    OpBuilder b(op);
    Value src = op.getSource(), dst = op.getTarget();
    forEachElement(b, op.getLoc(), dst,
                   [&](OpBuilder &nb, Location loc, ValueRange ivs) {
                     Value v = nb.create<memref::LoadOp>(loc, src, ivs);
                     nb.create<memref::StoreOp>(loc, v, dst, ivs);
                   });
    op.erase();
  }
}

struct LowerGradientOpsPass
    : public PassWrapper<LowerGradientOpsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LowerGradientOpsPass)

  StringRef getArgument() const final { return "lower-gradient-ops"; }
  StringRef getDescription() const final {
    return "Replace gradient.vjp by calls of @__cofactor_vjp_<k> declarations "
           "that --cofactor-emit-enzyme-glue turns into __enzyme_autodiff";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    // (LLVM: the type hints read data pointers from memref descriptors)
    registry.insert<func::FuncDialect, memref::MemRefDialect, scf::SCFDialect,
                    arith::ArithmeticDialect, LLVM::LLVMDialect>();
  }

  void runOnOperation() final {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> differentiated =
        differentiatedFunctions(module, symbols);
    for (func::FuncOp fn : differentiated)
      expandCopies(fn);

    SmallVector<gradient::VJPOp> ops;
    module.walk([&](gradient::VJPOp op) { ops.push_back(op); });
    // Enzyme cannot differentiate its own __enzyme_autodiff calls here.
    for (gradient::VJPOp op : ops)
      if (llvm::is_contained(differentiated,
                             op->getParentOfType<func::FuncOp>())) {
        op.emitError("a gradient.vjp inside a differentiated function "
                     "(a higher-order derivative) is not supported; use "
                     "finite differences for the outer derivative");
        return signalPassFailure();
      }

    int64_t counter = 0;
    llvm::SmallPtrSet<Operation *, 4> hinted;
    for (gradient::VJPOp op : ops) {
      MLIRContext *ctx = op.getContext();
      OpBuilder builder(ctx);
      Location loc = op.getLoc();
      auto callee = symbols.lookup<func::FuncOp>(op.getCallee());

      // Operands of the call: ins, outs, couts, then one shadow per entry of
      // diffInputs, in order.
      SmallVector<Value> args(op.getIns().begin(), op.getIns().end());
      args.append(op.getOuts().begin(), op.getOuts().end());
      args.append(op.getCouts().begin(), op.getCouts().end());
      SmallVector<int64_t> diffInputs = op.getDiffInputIndices();
      SmallVector<Value> shadows(op.getDins().begin(), op.getDins().end());
      SmallVector<Value> scratch;
      builder.setInsertionPoint(op);
      if (reachesCustomGradient(callee, symbols)) {
        // Enzyme (v0.0.289) aborts when a custom-gradient function called
        // from a nested function receives an argument it proved constant
        // (its "massaged" augmented forward trips an assertion in split
        // mode), and a constant top-level input makes every buffer derived
        // from it constant. So every input is passed as duplicated; the
        // shadows of inputs nobody asked about are zeroed scratch buffers.
        SmallVector<int64_t> all;
        SmallVector<Value> allShadows;
        for (int64_t i = 0, e = op.getNumInputs(); i < e; ++i) {
          all.push_back(i);
          auto *it = llvm::find(diffInputs, i);
          if (it != diffInputs.end()) {
            allShadows.push_back(shadows[it - diffInputs.begin()]);
            continue;
          }
          Value buffer = allocLike(builder, loc, op.getIns()[i]);
          fillZero(builder, loc, buffer);
          scratch.push_back(buffer);
          allShadows.push_back(buffer);
        }
        diffInputs = all;
        shadows = allShadows;
      }
      args.append(shadows.begin(), shadows.end());

      SmallVector<int64_t> ranks;
      for (Value v : args)
        ranks.push_back(v.getType().cast<MemRefType>().getRank());

      // A fresh name per op: every op may have its own operand types, and
      // Enzyme takes any function whose name contains __enzyme_autodiff.
      std::string name;
      do {
        name = std::string(attr::kVJPDeclPrefix) + std::to_string(counter++);
      } while (symbols.lookup(name));

      OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
      auto type = mb.getFunctionType(ValueRange(args).getTypes(), {});
      auto decl = mb.create<func::FuncOp>(loc, name, type);
      decl.setPrivate();
      func::FuncOp differentiable = differentiableCallee(callee, symbols);
      if (!differentiable.isExternal() &&
          hinted.insert(differentiable).second) {
        // Types for Enzyme of the float buffers it is handed: an input that is
        // only loaded into a loop's first carry is otherwise of unknown type
        // (see hintDoubles).
        OpBuilder hb =
            OpBuilder::atBlockBegin(&differentiable.getBody().front());
        for (BlockArgument arg : differentiable.getArguments())
          hintDoubles(hb, differentiable.getLoc(), arg);
      }
      decl->setAttr(attr::kVJPCallee,
                    FlatSymbolRefAttr::get(differentiable));
      decl->setAttr(attr::kVJPNumInputs, op.getNumInputsAttr());
      decl->setAttr(attr::kVJPNumOutputs, op.getNumOutputsAttr());
      decl->setAttr(attr::kVJPDiffInputs, mb.getI64ArrayAttr(diffInputs));
      decl->setAttr(attr::kVJPRanks, mb.getI64ArrayAttr(ranks));
      symbols.insert(decl);

      builder.create<func::CallOp>(loc, decl, args);
      for (Value buffer : scratch)
        builder.create<memref::DeallocOp>(loc, buffer);
      op.erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass> cofactor::createLowerGradientOpsPass() {
  return std::make_unique<LowerGradientOpsPass>();
}
