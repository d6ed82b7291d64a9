//===- Link.cpp - the shared library, linked by lld in process, as cc -shared -===//
#include "Stages.h"

#include "lld/Common/CommonLinkerContext.h"
#include "lld/Common/Driver.h"
#include "llvm/Support/raw_ostream.h"

#include <sys/mman.h>
#include <unistd.h>

namespace cofactor::compiler {
namespace {

/// An anonymous in-memory file holding `data` (lld reads its inputs by name:
/// /proc/self/fd/N names it without a file on disk). Returns -1 on failure.
int memoryFile(llvm::StringRef data) {
  int fd = memfd_create("module.o", MFD_CLOEXEC);
  if (fd < 0)
    return -1;
  const char *p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return fd;
}

} // namespace

bool linkSharedLibrary(llvm::StringRef object, const std::vector<std::string> &linkArgs,
                       const std::string &output, std::string &error) {
  int fd = memoryFile(object);
  if (fd < 0) {
    error = "error: could not create the in-memory object file";
    return false;
  }
  std::string objectPath = "/proc/self/fd/" + std::to_string(fd);
  // --threads=1: the inputs are a few kilobytes; lld's default starts a pool of one
  // thread per core (each with its own malloc arena) on the first link of a process, and
  // under load its tasks wait for a core. --no-mmap-output-file: the output (a few pages)
  // is written with write() straight into `output` (a fresh name in the cache entry's
  // staging folder or in the process's private folder) instead of a temporary file that is
  // mapped, faulted in page by page and renamed.
  std::vector<const char *> args = {"ld.lld",
                                    "-shared",
                                    "--eh-frame-hdr",
                                    "--hash-style=gnu",
                                    "--build-id",
                                    "-z",
                                    "relro",
                                    "--threads=1",
                                    "--no-mmap-output-file",
                                    "-o",
                                    output.c_str(),
                                    objectPath.c_str()};
  // Only the libraries of linkArgs (the runtime), not libc, libm and libgcc_s as
  // `cc -shared -lm` would: reading their symbol tables (~4,400 symbols) was two thirds of
  // the link (9.6 M of 14 M instructions). A shared library may keep undefined symbols
  // (lld's default for -shared); the module's calls to malloc, free, memcpy, tanh, ... then
  // resolve when the library is loaded, in the scope of its dependencies: the runtime
  // needs libstdc++, libm, libgcc_s and libc, so all of them are there (and in every
  // Python process). An unversioned reference binds to a symbol's default version, the
  // one linking against the library would have recorded. A symbol defined nowhere fails
  // the load (ctypes loads with RTLD_NOW: "undefined symbol: ..."), as before, when lld
  // left it undefined as well.
  for (const std::string &arg : linkArgs)
    args.push_back(arg.c_str());

  std::string out;
  llvm::raw_string_ostream stdoutStream(out), stderrStream(error);
  // exitEarly=false: errors are returned, not exit(); the context is rebuilt per link.
  bool ok = lld::elf::link(args, stdoutStream, stderrStream, /*exitEarly=*/false,
                           /*disableOutput=*/false);
  lld::CommonLinkerContext::destroy();
  close(fd);
  return ok;
}

} // namespace cofactor::compiler
