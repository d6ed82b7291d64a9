//===- EnzymeInput.cpp - the module as Enzyme is given it -----------------===//
//
// Enzyme's time on a small classical function (the gradient of sum(tanh(W x)**2), issue 13)
// was not spent differentiating it but in two analyses whose cost the module's form decides
// (callgrind, instructions of the Enzyme pass; W 32 x 32 / 512 x 512: 123 M / 205 M):
//
// - Every call the function makes is looked up, several times, among the BLAS routines
//   Enzyme knows (`extractBLAS` formats each known name with each prefix and suffix:
//   ~1 M instructions per lookup, 82 M in all). The calls were the `malloc`/`free` pairs of
//   the function's temporary buffers. Small buffers of a constant size, allocated in the
//   entry block and used only in place, become stack allocations (as `alloca`: no call).
// - Type analysis of a constant global (the captured `x`) builds a type tree with an entry
//   per element, and each address computed from the global shifts that tree once per
//   known value of its index. While Enzyme runs, such globals are declarations (no
//   initializer) marked `enzyme_inactive`, which Enzyme treats exactly as it treats the
//   constant (its output is the same, text for text); the initializer comes back before O2.
//
// - Enzyme's PreserveNVVM pass, before it, runs on every function of the module what the
//   Enzyme pass runs again first (attributeKnownFunctions: 8 M instructions); it is skipped
//   when the module has nothing else for it (needsPreserveNVVM).
//
// None of these changes the arithmetic of the function or of its derivative.
//
//===----------------------------------------------------------------------===//
#include "EnzymeInput.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/Triple.h"
#include "llvm/Analysis/ConstantFolding.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"

namespace cofactor::compiler {
namespace {

/// Stack bytes a function may take for buffers that were `malloc`ed: Enzyme gives each
/// differentiated buffer a shadow of the same size, so its gradient takes up to twice this.
constexpr uint64_t StackBudget = 32 * 1024;

/// The functions Enzyme differentiates (the first operand of each `__enzyme_*` call) and
/// the functions of the module they call, directly or not.
llvm::SetVector<llvm::Function *> differentiated(llvm::Module &module) {
  llvm::SetVector<llvm::Function *> found;
  for (llvm::Function &glue : module) {
    if (!glue.isDeclaration() || !glue.getName().startswith("__enzyme_"))
      continue;
    for (llvm::User *user : glue.users())
      if (auto *call = llvm::dyn_cast<llvm::CallBase>(user))
        if (call->getCalledFunction() == &glue && call->arg_size() > 0)
          if (auto *primal = llvm::dyn_cast<llvm::Function>(
                  call->getArgOperand(0)->stripPointerCasts()))
            if (!primal->isDeclaration())
              found.insert(primal);
  }
  for (size_t i = 0; i < found.size(); ++i)
    for (llvm::Instruction &instruction : llvm::instructions(*found[i]))
      if (auto *call = llvm::dyn_cast<llvm::CallBase>(&instruction))
        if (llvm::Function *callee = call->getCalledFunction())
          if (!callee->isDeclaration())
            found.insert(callee);
  return found;
}

bool isCallTo(const llvm::Value *value, llvm::StringRef name) {
  auto *call = llvm::dyn_cast<llvm::CallInst>(value);
  return call && call->getCalledFunction() && call->getCalledFunction()->getName() == name;
}

/// True when `pointer` (a malloc's result) is only read, written, offset and freed here:
/// it does not escape, so its memory can live in this function's frame. `frees` collects
/// the `free` calls.
bool usedOnlyInPlace(llvm::Value *pointer, llvm::SmallVectorImpl<llvm::CallInst *> &frees) {
  llvm::SmallVector<llvm::Value *, 8> work{pointer};
  llvm::SmallPtrSet<llvm::Value *, 16> seen{pointer};
  while (!work.empty()) {
    llvm::Value *value = work.pop_back_val();
    for (llvm::User *user : value->users()) {
      if (auto *gep = llvm::dyn_cast<llvm::GetElementPtrInst>(user)) {
        if (seen.insert(gep).second)
          work.push_back(gep);
      } else if (llvm::isa<llvm::LoadInst>(user)) {
        // only as the address: a load has no other pointer operand
      } else if (auto *store = llvm::dyn_cast<llvm::StoreInst>(user)) {
        if (store->getValueOperand() == value)
          return false;  // the address itself is stored somewhere: it escapes
      } else if (auto *intrinsic = llvm::dyn_cast<llvm::MemIntrinsic>(user)) {
        if (intrinsic->isVolatile())
          return false;
      } else if (value == pointer && isCallTo(user, "free")) {
        frees.push_back(llvm::cast<llvm::CallInst>(user));
      } else {
        return false;  // a call, a phi, a comparison, a return...: not followed
      }
    }
  }
  return true;
}

/// Replaces the entry block's `malloc`s of a constant size that stay in this function by
/// stack allocations (alignment 16, as malloc's), up to StackBudget bytes, and deletes
/// their `free`s.
void promoteSmallAllocations(llvm::Function &function) {
  const llvm::DataLayout &layout = function.getParent()->getDataLayout();
  llvm::BasicBlock &entry = function.getEntryBlock();
  uint64_t used = 0;
  for (llvm::Instruction &instruction : llvm::make_early_inc_range(entry)) {
    if (!isCallTo(&instruction, "malloc"))
      continue;
    auto *call = llvm::cast<llvm::CallInst>(&instruction);
    if (call->arg_size() != 1)
      continue;
    auto *sizeConstant = llvm::dyn_cast<llvm::Constant>(call->getArgOperand(0));
    auto *size = llvm::dyn_cast_or_null<llvm::ConstantInt>(
        sizeConstant ? llvm::ConstantFoldConstant(sizeConstant, layout) : nullptr);
    if (!size || size->isZero() || size->getZExtValue() > StackBudget - used)
      continue;
    llvm::SmallVector<llvm::CallInst *, 2> frees;
    if (!usedOnlyInPlace(call, frees))
      continue;
    used += size->getZExtValue();
    llvm::IRBuilder<> builder(&*entry.getFirstInsertionPt());
    llvm::AllocaInst *slot = builder.CreateAlloca(builder.getInt8Ty(), size);
    slot->setAlignment(llvm::Align(16));
    slot->takeName(call);
    for (llvm::CallInst *free : frees)
      free->eraseFromParent();
    call->replaceAllUsesWith(slot);
    call->eraseFromParent();
  }
}

/// Whether a value of `type` holds only numbers (no pointer Enzyme would need to follow).
bool onlyNumbers(llvm::Type *type) {
  if (type->isFloatingPointTy() || type->isIntegerTy())
    return true;
  if (auto *array = llvm::dyn_cast<llvm::ArrayType>(type))
    return onlyNumbers(array->getElementType());
  if (auto *vector = llvm::dyn_cast<llvm::VectorType>(type))
    return onlyNumbers(vector->getElementType());
  if (auto *structure = llvm::dyn_cast<llvm::StructType>(type))
    return !structure->isOpaque() && llvm::all_of(structure->elements(), onlyNumbers);
  return false;
}

} // namespace

void EnzymeInput::prepare(llvm::Module &module) {
  for (llvm::Function *function : differentiated(module))
    promoteSmallAllocations(*function);

  llvm::LLVMContext &context = module.getContext();
  for (llvm::GlobalVariable &global : module.globals()) {
    if (!global.isConstant() || !global.hasInitializer() || !global.hasLocalLinkage() ||
        !onlyNumbers(global.getValueType()) || global.hasMetadata("enzyme_inactive"))
      continue;
    hidden.push_back({&global, global.getInitializer(), global.getLinkage()});
    global.setInitializer(nullptr);
    global.setLinkage(llvm::GlobalValue::ExternalLinkage);
    global.setMetadata("enzyme_inactive", llvm::MDNode::get(context, {}));
  }
}

bool EnzymeInput::needsPreserveNVVM(const llvm::Module &module) {
  llvm::Triple triple(module.getTargetTriple());
  if (triple.isNVPTX() || triple.isAMDGPU())
    return true;
  for (const llvm::GlobalVariable &global : module.globals())
    if (global.getName().contains("enzyme") || global.getName() == "llvm.global.annotations")
      return true;
  return false;
}

void EnzymeInput::restore() {
  for (const Hidden &entry : hidden) {
    entry.global->setMetadata("enzyme_inactive", nullptr);
    entry.global->setInitializer(entry.initializer);
    entry.global->setLinkage(entry.linkage);
  }
  hidden.clear();
}

} // namespace cofactor::compiler
