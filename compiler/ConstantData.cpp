//===- ConstantData.cpp - constant arrays as bytes for code generation ----===//
#include "Stages.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/DataLayout.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Host.h"

#include <string>
#include <vector>

namespace cofactor::compiler {
namespace {

/// Arrays of fewer elements are left as they are: the saving is per element.
constexpr uint64_t kMinElements = 64;

/// Appends the bytes of `value` as they lie in memory on this (little-endian) host, when
/// it is an array of numbers (ConstantDataArray), an array of such arrays (a captured
/// matrix), or zeros; returns false for anything else (pointers, structs, ...).
bool appendBytes(const llvm::Constant *value, const llvm::DataLayout &layout,
                 std::string &bytes) {
  if (const auto *data = llvm::dyn_cast<llvm::ConstantDataArray>(value)) {
    bytes += data->getRawDataValues();
    return true;
  }
  if (llvm::isa<llvm::ConstantAggregateZero>(value) && value->getType()->isArrayTy()) {
    bytes.append(layout.getTypeAllocSize(value->getType()), '\0');
    return true;
  }
  if (const auto *array = llvm::dyn_cast<llvm::ConstantArray>(value)) {
    for (const llvm::Use &element : array->operands())
      if (!appendBytes(llvm::cast<llvm::Constant>(element.get()), layout, bytes))
        return false;
    return true;
  }
  return false;
}

uint64_t elementCount(llvm::Type *type) {
  uint64_t count = 1;
  while (auto *array = llvm::dyn_cast<llvm::ArrayType>(type)) {
    count *= array->getNumElements();
    type = array->getElementType();
  }
  return count;
}

} // namespace

/// The assembly printer emits a constant array of numbers one element at a time (~1,400
/// instructions each: a value, a fragment, a fixup check), but an array of bytes as one
/// block. The captured constants of a traced program are such arrays (`x` of tanh(W x) at
/// W 512: 512 doubles, 0.75 M instructions, growing with the array), so each large one
/// becomes an array of bytes with the same contents, alignment and section kind. Only
/// module-local constants (nothing outside the module sees their type; with opaque
/// pointers no user depends on it: every GEP and load names its own type) without
/// `unnamed_addr` (which could make bytes a mergeable string section instead) and without
/// an explicit section. Run after the optimization, right before code generation, with
/// the target's data layout set.
void packConstantArrays(llvm::Module &module) {
  const llvm::DataLayout &layout = module.getDataLayout();
  if (layout.isLittleEndian() != llvm::sys::IsLittleEndianHost)
    return;
  std::vector<llvm::GlobalVariable *> candidates;
  for (llvm::GlobalVariable &global : module.globals()) {
    llvm::Type *type = global.getValueType();
    if (global.isConstant() && global.hasLocalLinkage() && global.hasDefinitiveInitializer() &&
        !global.hasSection() && !global.isThreadLocal() && !global.hasAtLeastLocalUnnamedAddr() &&
        type->isArrayTy() && !type->getArrayElementType()->isIntegerTy(8) &&
        elementCount(type) >= kMinElements)
      candidates.push_back(&global);
  }
  for (llvm::GlobalVariable *global : candidates) {
    std::string bytes;
    if (!appendBytes(global->getInitializer(), layout, bytes) ||
        bytes.size() != layout.getTypeAllocSize(global->getValueType()))
      continue;
    llvm::Constant *packed = llvm::ConstantDataArray::getRaw(
        bytes, bytes.size(), llvm::Type::getInt8Ty(module.getContext()));
    auto *replacement = new llvm::GlobalVariable(
        module, packed->getType(), /*isConstant=*/true, global->getLinkage(), packed, "",
        global, global->getThreadLocalMode(), global->getAddressSpace());
    // The alignment the printer would have given the original (explicit, or its type's
    // preferred one, at least 16 for a large global): explicit now, as bytes have none.
    replacement->setAlignment(layout.getPreferredAlign(global));
    replacement->setVisibility(global->getVisibility());
    if (replacement->getType() != global->getType()) {  // typed pointers: leave it
      replacement->eraseFromParent();
      continue;
    }
    replacement->takeName(global);
    global->replaceAllUsesWith(replacement);
    global->eraseFromParent();
  }
}

} // namespace cofactor::compiler
