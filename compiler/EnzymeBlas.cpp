//===- EnzymeBlas.cpp - no BLAS name matching in the pinned Enzyme plugin --===//
//
// Enzyme's `extractBLAS(StringRef)` tells whether a function's name is a BLAS routine
// (`cblas_ddot`, `dgemm_`, ...): it builds and compares every prefix, type, routine and
// suffix combination, ~1 M instructions per call. Enzyme calls it for each function of the
// module (attributeTablegen, from attributeKnownFunctions), for each called function that
// type analysis meets and for each call the adjoint generator handles: 13 calls, 12.6 of
// the driver's 74.4 M instructions for the gradient of tanh(W x) (callgrind). A cofactor
// module calls no BLAS routine (it calls the runtime, libm and malloc/free), and a
// function of the module whose name happened to look like one (a qjit function `ddot`)
// must not get BLAS derivative rules; so for cofactor the answer is always "not BLAS".
//
// The plugin calls `extractBLAS` through its PLT (the symbol is exported and preemptible),
// so after the plugin is loaded its GOT slot for the symbol is pointed at `noBlas`, which
// does what the original does for a name it does not know: it zeroes the returned
// `Optional<BlasInfo>` (0x90 bytes, its "has a value" flag included) and returns it. That
// layout is the pinned plugin's (enzyme_plugin.PATCHED_SHA256), so the slot is changed only
// when the plugin's own `extractBLAS` is that build's: its size and the bytes of its
// not-found path are checked first; any other plugin keeps its own `extractBLAS`.
//
//===----------------------------------------------------------------------===//
#include "Stages.h"

#include "llvm/Passes/PassPlugin.h"

#include <cstdint>
#include <cstring>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

namespace cofactor::compiler {
namespace {

constexpr const char *symbolName = "_Z11extractBLASN4llvm9StringRefE";
/// The pinned plugin's extractBLAS: its size, and its not-found path at `notFoundOffset`:
/// `mov $0x12,%ecx; xor %eax,%eax; mov %rbx,%rdi; rep stos %rax,(%rdi)` (0x12 quadwords:
/// the whole Optional<BlasInfo> returned through %rbx, the sret pointer, is zeroed).
constexpr uint64_t pinnedSize = 0x20cc;
constexpr uint64_t notFoundOffset = 0x1b6b;
constexpr unsigned char notFoundCode[] = {0xb9, 0x12, 0x00, 0x00, 0x00, 0x31, 0xc0,
                                          0x48, 0x89, 0xdf, 0xf3, 0x48, 0xab};
constexpr size_t resultSize = 0x12 * 8;

/// The not-found answer (System V: the Optional is returned through the hidden pointer in
/// %rdi, the StringRef's pointer and length follow in %rsi and %rdx; %rax returns the
/// hidden pointer).
extern "C" void *cofactorNoBlas(void *result, const char *, size_t) {
  std::memset(result, 0, resultSize);
  return result;
}

struct Search {
  uintptr_t base;
  bool patched = false;
};

/// A dynamic-section pointer: glibc relocates them in place, others may not.
uintptr_t address(uintptr_t value, uintptr_t base) {
  return value < base ? value + base : value;
}

bool inWritableSegment(const dl_phdr_info *info, uintptr_t address, size_t size) {
  bool writable = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    bool inside = address >= start && address + size <= start + ph.p_memsz;
    if (ph.p_type == PT_GNU_RELRO && inside)
      return false;  // read-only once relocated
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) && inside)
      writable = true;
  }
  return writable;
}

int patchObject(dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<Search *>(data);
  if (info->dlpi_addr != search->base)
    return 0;
  const ElfW(Dyn) *dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr +
                                                    info->dlpi_phdr[i].p_vaddr);
  if (!dynamic)
    return 1;
  uintptr_t jmprel = 0, symtab = 0, strtab = 0;
  size_t pltrelsz = 0;
  bool rela = false;
  for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
    case DT_JMPREL: jmprel = address(d->d_un.d_ptr, info->dlpi_addr); break;
    case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
    case DT_PLTREL: rela = d->d_un.d_val == DT_RELA; break;
    case DT_SYMTAB: symtab = address(d->d_un.d_ptr, info->dlpi_addr); break;
    case DT_STRTAB: strtab = address(d->d_un.d_ptr, info->dlpi_addr); break;
    default: break;
    }
  }
  if (!jmprel || !symtab || !strtab || !rela)
    return 1;
  const auto *symbols = reinterpret_cast<const ElfW(Sym) *>(symtab);
  const char *names = reinterpret_cast<const char *>(strtab);
  const auto *relocations = reinterpret_cast<const ElfW(Rela) *>(jmprel);
  for (size_t i = 0; i < pltrelsz / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela) &r = relocations[i];
    if (ELF64_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT)
      continue;
    const ElfW(Sym) &symbol = symbols[ELF64_R_SYM(r.r_info)];
    if (std::strcmp(names + symbol.st_name, symbolName) != 0)
      continue;
    // The plugin's own definition must be the pinned build's.
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_size != pinnedSize)
      return 1;
    const auto *code =
        reinterpret_cast<const unsigned char *>(info->dlpi_addr + symbol.st_value);
    if (std::memcmp(code + notFoundOffset, notFoundCode, sizeof(notFoundCode)) != 0)
      return 1;
    uintptr_t slot = info->dlpi_addr + r.r_offset;
    if (!inWritableSegment(info, slot, sizeof(void *)))
      return 1;
    *reinterpret_cast<void **>(slot) = reinterpret_cast<void *>(&cofactorNoBlas);
    search->patched = true;
    return 1;
  }
  return 1;
}

} // namespace

bool skipBlasNames(const llvm::PassPlugin &plugin) {
#if defined(__x86_64__) && defined(__linux__)
  // The plugin's name is a string of the plugin's own data: its address finds the object.
  Dl_info where;
  if (!dladdr(plugin.getPluginName().data(), &where) || !where.dli_fbase)
    return false;
  Search search{reinterpret_cast<uintptr_t>(where.dli_fbase)};
  dl_iterate_phdr(patchObject, &search);
  return search.patched;
#else
  (void)plugin;
  return false;
#endif
}

} // namespace cofactor::compiler
