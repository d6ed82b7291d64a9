//===- Link.cpp - the shared library, linked by lld in process, as cc -shared -===//
#include "Stages.h"

#include "lld/Common/CommonLinkerContext.h"
#include "lld/Common/Driver.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace cofactor::compiler {
namespace {

/// The file of the shared library that defines `symbol` in this process (libm, libc,
/// libgcc_s: the ones `cc -shared ... -lm` links against), so that lld needs no search
/// path of the system's compiler.
std::string libraryDefining(const char *symbol) {
  void *address = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info;
  if (!address || !dladdr(address, &info) || !info.dli_fname)
    return "";
  return info.dli_fname;
}

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
  static const std::vector<std::string> systemLibraries = [] {
    std::vector<std::string> found;
    for (const char *symbol : {"cos", "_Unwind_Resume", "malloc"})
      if (std::string path = libraryDefining(symbol); !path.empty())
        found.push_back(path);
    return found;
  }();

  int fd = memoryFile(object);
  if (fd < 0) {
    error = "error: could not create the in-memory object file";
    return false;
  }
  std::string objectPath = "/proc/self/fd/" + std::to_string(fd);
  std::vector<const char *> args = {"ld.lld",        "-shared",          "--eh-frame-hdr",
                                    "--hash-style=gnu", "--build-id",    "-z",
                                    "relro",         "-o",               output.c_str(),
                                    objectPath.c_str()};
  for (const std::string &arg : linkArgs)
    args.push_back(arg.c_str());
  args.push_back("--as-needed");
  for (const std::string &library : systemLibraries)
    args.push_back(library.c_str());
  args.push_back("--no-as-needed");

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
