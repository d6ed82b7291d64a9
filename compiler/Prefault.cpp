//===- Prefault.cpp - the compiler's code mapped before the first compile --===//
//
// The first compile of a process ran ~300 page faults on code that no earlier work had
// touched: the pages of the Enzyme plugin, of libMLIR and of this library that only a
// compile executes (each fault maps the 16 pages around it from the page cache). In this
// VM a fault cost several microseconds of the compiling thread's time (C driver, tanh(W x)
// gradient at W 512, first compile of a process: all code pages mapped ahead 13.6 -> 12.4
// ms CPU, 637 -> 337 faults; compiler/README.md, session 16). Mapping them ahead costs
// the kernel ~0.3 us a page, so a thread does it beside the tracing that precedes the
// compile: MADV_POPULATE_READ on the executable segments of those objects, in chunks.
// libLLVM is left out: its text is 103 MB of which a compile uses ~50 (all of it would
// add ~50 MB of mapped shared pages to every such process and ~7 ms of the other core).
//
//===----------------------------------------------------------------------===//
#include "Stages.h"

#include "mlir/IR/Verifier.h"
#include "llvm/IR/Verifier.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <link.h>
#include <sys/mman.h>
#endif

namespace cofactor::compiler {
namespace {

#if defined(__linux__)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL (nothing done)
#endif

struct Range {
  uintptr_t start, end;
};

/// The object holding `address`, and its executable segments once found.
struct Wanted {
  uintptr_t address;
  std::vector<Range> *ranges;  // appended to, page-aligned
};

/// For dl_iterate_phdr: the executable segments of the object that holds the wanted
/// address (then the walk stops). (Finding the object by `dladdr` searched its symbol
/// table for the nearest symbol: 0.6 ms for libMLIR and the plugin, in the thread whose
/// load of the plugin may still run beside the lowering.)
int collect(dl_phdr_info *info, size_t, void *data) {
  auto *wanted = static_cast<Wanted *>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && wanted->address >= start &&
            wanted->address < start + ph.p_memsz;
  }
  if (!holds)
    return 0;
  const uintptr_t page = 4096;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
      continue;
    uintptr_t start = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
    uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + page - 1) & ~(page - 1);
    wanted->ranges->push_back({start, end});
  }
  return 1;
}

void populate(std::vector<Range> ranges) {
  const uintptr_t chunk = 64 * 4096;  // a few tens of microseconds each
  for (const Range &range : ranges)
    for (uintptr_t at = range.start; at < range.end; at += chunk) {
      uintptr_t size = range.end - at < chunk ? range.end - at : chunk;
      if (madvise(reinterpret_cast<void *>(at), size, MADV_POPULATE_READ) != 0 &&
          errno == EINVAL)
        return;  // a kernel without MADV_POPULATE_READ
    }
}
#endif

} // namespace

void prefaultCompilerCode(const void *pluginAddress) {
#if defined(__linux__)
  const char *setting = std::getenv("COFACTOR_COMPILER_PREFAULT");
  if (setting && std::strcmp(setting, "0") == 0)
    return;  // COFACTOR_COMPILER_PREFAULT=0: off (A/B)
  static std::once_flag once;
  std::call_once(once, [pluginAddress, setting] {
    // In the order a compile needs them: the lowering (libMLIR), Enzyme, the link (here).
    mlir::LogicalResult (*mlirCode)(mlir::Operation *, bool) = &mlir::verify;
    // COFACTOR_COMPILER_PREFAULT=all: libLLVM's code too (measurement; see the top).
    bool (*llvmCode)(const llvm::Module &, llvm::raw_ostream *, bool *) = &llvm::verifyModule;
    bool all = setting && std::strcmp(setting, "all") == 0;
    std::vector<Range> ranges;
    for (const void *address : {reinterpret_cast<const void *>(mlirCode), pluginAddress,
                                reinterpret_cast<const void *>(&prefaultCompilerCode),
                                all ? reinterpret_cast<const void *>(llvmCode) : nullptr}) {
      Wanted wanted{reinterpret_cast<uintptr_t>(address), &ranges};
      if (address)
        dl_iterate_phdr(collect, &wanted);
    }
    if (ranges.empty())
      return;
    // Detached: it touches no object of this library, so neither exit nor a fork (the
    // child has no copy of the thread; its pages are mapped or faulted as before) waits.
    try {
      std::thread(populate, std::move(ranges)).detach();
    } catch (const std::system_error &) {
      // no thread: the compile faults its pages in, as before
    }
  });
#else
  (void)pluginAddress;
#endif
}

} // namespace cofactor::compiler
