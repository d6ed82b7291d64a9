//===- Compiler.cpp - the C ABI of libcofactor-compiler.so ----------------===//
//
// One call runs every stage (Stages.h) in order, under one process-wide lock: lld and the
// plugin loader keep global state, and Enzyme is not known to be thread-safe. A fatal
// LLVM error (report_fatal_error) inside a compile becomes a failed result instead of
// ending the process, and so does a crash (a signal such as SIGSEGV, caught by LLVM's
// CrashRecoveryContext, as clang does for its in-process cc1): the subprocess pipeline
// turned a crashing `opt` into an error, and the in-process one must not do worse.
//
//===----------------------------------------------------------------------===//
#include "cofactor_compiler.h"
#include "Disposal.h"
#include "Stages.h"

#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <csetjmp>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace cofactor::compiler;

namespace {

std::mutex compileLock;

/// Held while the Enzyme plugin is loaded, and by a compile from the end of its lowering
/// to its end. The plugin's load (`cofactor_compiler_load_enzyme`, from a thread while the
/// program is traced: 3-7 ms) then overlaps the lowering of the compile that follows the
/// tracing instead of delaying its start: the lowering touches no state the load changes
/// (LLVM's option registry, the code-generation pipeline, the disposal thread's objects).
/// COFACTOR_COMPILER_SERIAL_ENZYME_LOAD=1: the load holds compileLock instead, as before.
std::mutex enzymeLock;

/// Whether the running compile holds enzymeLock (read and written under compileLock).
bool compileHoldsEnzymeLock = false;

bool serialEnzymeLoad() {
  static const bool serial = [] {
    const char *value = std::getenv("COFACTOR_COMPILER_SERIAL_ENZYME_LOAD");
    return value && std::strcmp(value, "1") == 0;
  }();
  return serial;
}

/// Where a fatal error jumps back to: per thread, since a compile and a load of the plugin
/// may run at once (set only while one of them runs in this thread).
thread_local std::jmp_buf *fatalJump = nullptr;
thread_local std::string fatalMessage;

/// CrashRecoveryContext's signal handlers are process-wide: installed while any compile or
/// load runs, removed when the last one ends (one ending must not leave the other bare).
std::mutex recoveryUsersLock;
int recoveryUsers = 0;

void enableRecovery() {
  std::lock_guard<std::mutex> guard(recoveryUsersLock);
  if (recoveryUsers++ == 0)
    llvm::CrashRecoveryContext::Enable();
}

void disableRecovery() {
  std::lock_guard<std::mutex> guard(recoveryUsersLock);
  if (--recoveryUsers == 0)
    llvm::CrashRecoveryContext::Disable();
}

void onFatalError(void *, const char *reason, bool) {
  if (!fatalJump)
    return;  // not inside a compile: LLVM's default (exit) follows
  fatalMessage = reason ? reason : "fatal error";
  std::longjmp(*fatalJump, 1);
}

/// Enzyme writes its notes (and, before it gives up, its reasons) to stderr, which opt's
/// caller captured; here file descriptor 2 goes to an in-memory file while Enzyme runs,
/// and what it wrote joins the error message if the stage fails (else it is dropped, as
/// the subprocess pipeline drops a successful opt's stderr).
class StderrCapture {
  int saved = -1, memory = -1;

public:
  void start() {
    llvm::errs().flush();
    std::fflush(stderr);
    memory = memfd_create("cofactor-stderr", MFD_CLOEXEC);
    saved = memory < 0 ? -1 : dup(2);
    if (saved < 0 || dup2(memory, 2) < 0) {
      stop();
      return;
    }
  }
  /// Restores stderr; returns what was written meanwhile.
  std::string stop() {
    std::string text;
    if (saved >= 0) {
      llvm::errs().flush();
      std::fflush(stderr);
      dup2(saved, 2);
      close(saved);
    }
    if (memory >= 0) {
      off_t size = lseek(memory, 0, SEEK_END);
      if (size > 0) {
        text.resize(static_cast<size_t>(size));
        ssize_t got = pread(memory, text.data(), text.size(), 0);
        text.resize(got > 0 ? static_cast<size_t>(got) : 0);
      }
      close(memory);
    }
    saved = memory = -1;
    return text;
  }
};

StderrCapture enzymeOutput;

/// A program that calls the runtime allocates through it: its malloc/calloc calls become
/// cf_rt_alloc/cf_rt_calloc (runtime/src/capi_alloc.cpp: checked against the memory budget,
/// a failure an error instead of a NULL the code would use). Done after Enzyme and the
/// optimizer, which know malloc/calloc by name (allocation and free pairs, malloc+memset ->
/// calloc), just before code generation. compiler.py does the same on the subprocess
/// pipeline's text. A classical program keeps the C library's (it does not link the runtime).
/// Returns whether the module calls the runtime.
bool allocateThroughRuntime(llvm::Module &module) {
  bool usesRuntime = false;
  for (const llvm::Function &function : module)
    usesRuntime |= function.isDeclaration() && function.getName().startswith("cf_rt_");
  if (!usesRuntime)
    return false;
  for (auto [from, to] : {std::pair{"malloc", "cf_rt_alloc"}, {"calloc", "cf_rt_calloc"}})
    if (llvm::Function *function = module.getFunction(from))
      if (function->isDeclaration() && !module.getFunction(to))
        function->setName(to);
  return true;
}

char *copy(const std::string &text) {
  char *out = static_cast<char *>(std::malloc(text.size() + 1));
  if (out)
    std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

int fail(cofactor_compile_result *result, const char *stage, const std::string &message) {
  result->stage = copy(stage);
  result->message = copy(message);
  return 1;
}

class Clock {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

public:
  double lap() {
    auto now = std::chrono::steady_clock::now();
    double ms = std::chrono::duration<double, std::milli>(now - start).count();
    start = now;
    return ms;
  }
};

/// COFACTOR_COMPILER_DEBUG_CRASH=<stage> crashes (SIGSEGV) as that stage starts: how the
/// tests check that a crash inside LLVM or Enzyme ends in an error, not in a dead process
/// (clang's `#pragma clang __debug crash` serves the same purpose).
void debugCrash(const char *stage) {
  const char *wanted = std::getenv("COFACTOR_COMPILER_DEBUG_CRASH");
  if (wanted && std::strcmp(wanted, stage) == 0)
    std::raise(SIGSEGV);
}

/// The stages; `stage` names the one running, for a fatal error.
int compileLocked(const cofactor_compile_request &request, cofactor_compile_result *result,
                  const char *volatile &stage) {
  Clock clock;
  std::string error, failedStage, lowered;
  auto ownedContext = std::make_unique<llvm::LLVMContext>();
  llvm::LLVMContext &context = *ownedContext;
  stage = "cofactor-opt";
  debugCrash(stage);
  std::unique_ptr<llvm::Module> module =
      lowerToLLVMIR(request.mlir, request.mlir_pipeline, context,
                    request.keep_stages ? &lowered : nullptr, failedStage, error);
  if (!module)
    return fail(result, failedStage == "cofactor-opt" ? "cofactor-opt" : "mlir-translate",
                error);
  result->ms[0] = clock.lap();  // lowering and translation share one MLIR context
  if (request.keep_stages) {
    result->mlir_opt = copy(lowered);
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, nullptr);
    result->llvmir = copy(text);
  }
  result->ms[1] = clock.lap();

  // From here on, no load of the plugin runs beside this compile (see enzymeLock); a wait
  // for one that is under way counts in opt.plugin.
  // (Released by cofactor_compile on every way out, a fatal error's jump included.)
  if (!serialEnzymeLoad()) {
    enzymeLock.lock();
    compileHoldsEnzymeLock = true;
  }
  stage = "opt";
  debugCrash(stage);
  Clock optClock;
  bool enzyme = needsEnzyme(*module);
  if (enzyme) {
    // Checked by the caller every time, as before each `opt -load-pass-plugin`: a
    // plugin that is gone or changed fails the compile even once one is loaded.
    int fd = request.open_plugin ? request.open_plugin() : -1;
    if (fd < 0)
      return fail(result, "opt", "error: the Enzyme plugin could not be opened\n");
    if (!ensureEnzymeLoaded(fd, error))
      return fail(result, "opt", error);
  }
  result->ms[5] = optClock.lap();
  if (enzyme)
    enzymeOutput.start();
  std::vector<double> elementMs;
  const char *pipeline = enzyme ? request.enzyme_pipeline : request.plain_pipeline;
  bool optimized = optimize(*module, pipeline, error, &elementMs);
  std::string enzymeNotes = enzymeOutput.stop();
  if (!optimized && enzyme && typeAnalysisGaveUp(enzymeNotes + error)) {
    // The narrow type offsets that keep Enzyme fast were too few for this module (see
    // Optimize.cpp): once more from the MLIR, with Enzyme's default. The failed run has
    // changed the module, hence the new lowering.
    module.reset();
    error.clear();
    elementMs.clear();
    module = lowerToLLVMIR(request.mlir, request.mlir_pipeline, context, nullptr, failedStage,
                           error);
    if (!module)
      return fail(result, "opt", error);
    enzymeOutput.start();
    optimized = optimize(*module, pipeline, error, &elementMs, /*narrowTypeOffsets=*/false);
    enzymeNotes = enzymeOutput.stop();
  }
  if (!optimized)
    return fail(result, "opt", enzymeNotes + error);
  // Everything before the last element of the pipeline (Enzyme and what prepares it), and
  // the last one (O2).
  for (size_t i = 0; i + 1 < elementMs.size(); ++i)
    result->ms[6] += elementMs[i];
  if (!elementMs.empty())
    result->ms[7] = elementMs.back();
  if (request.keep_stages) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, nullptr);
    result->llvmir_opt = copy(text);
  }
  result->ms[2] = clock.lap();
  if (!request.output)
    return 0;

  stage = "llc";
  debugCrash(stage);
  bool usesRuntime = allocateThroughRuntime(*module);
  llvm::SmallVector<char, 0> object;
  if (!emitObject(*module, object, error))
    return fail(result, "llc", error);
  result->ms[3] = clock.lap();

  stage = "link";
  // The runtime's arguments only for a module that calls it: lld read the runtime's
  // symbol table (a 5 MB C++ library) for every classical program, only for --as-needed
  // to drop it again (0.15 ms of the tanh(W x) gradient's link; session 20).
  int numLinkArgs = request.num_link_args;
  if (!usesRuntime && request.num_runtime_link_args > 0 &&
      request.num_runtime_link_args <= numLinkArgs)
    numLinkArgs -= request.num_runtime_link_args;
  std::vector<std::string> linkArgs(request.link_args, request.link_args + numLinkArgs);
  if (!linkSharedLibrary(llvm::StringRef(object.data(), object.size()), linkArgs,
                         request.output, error))
    return fail(result, "link", error);
  result->ms[4] = clock.lap();
  // Freed by Disposal.cpp's thread once the caller has its library: the module, then its
  // context (when the compile stops earlier, they are freed here as before).
  disposeLater(std::move(module));
  disposeLater(std::move(ownedContext));
  return 0;
}

} // namespace

namespace {
void installFatalErrorHandler() {
  static const bool installed = [] {
    llvm::install_fatal_error_handler(onFatalError, nullptr);
    return true;
  }();
  (void)installed;
}
} // namespace

extern "C" void cofactor_compiler_warm_up(void) {
  installFatalErrorHandler();
  // Under the compile lock: a compile that another thread starts meanwhile waits, so that
  // what is prepared here (a context, a code-generation pipeline) never races with it (lld
  // resets LLVM's options at each link); and under enzymeLock: nor with a load of the plugin.
  std::lock_guard<std::mutex> guard(compileLock);
  std::lock_guard<std::mutex> noLoad(enzymeLock);
  waitForDisposal();
  initializeLowering();
  initializeCodeGen();
  prepareCodeGen();
}

extern "C" int cofactor_compiler_load_enzyme(int fd) {
  installFatalErrorHandler();
  // Serial: under the compile lock, as a compile. Else under enzymeLock only: a compile
  // may lower its module meanwhile; it waits for this load once lowered.
  bool serial = serialEnzymeLoad();
  std::unique_lock<std::mutex> guard(serial ? compileLock : enzymeLock);
  waitForDisposal();  // no compile ends while this lock is held: none starts disposing
  int status = 1;
  std::jmp_buf jump;
  if (setjmp(jump) != 0) {
    fatalJump = nullptr;
    disableRecovery();
    return 1;  // a fatal LLVM error: the compile that needs the plugin reports its own
  }
  fatalJump = &jump;
  enableRecovery();
  llvm::CrashRecoveryContext recovery;
  bool survived = recovery.RunSafely([&] {
    std::string error;
    status = fd >= 0 && ensureEnzymeLoaded(fd, error, /*bindNow=*/true) ? 0 : 1;
    if (status == 0) {
      // A classical gradient is coming: it is code-generated at -O2. (Under enzymeLock,
      // which a compile holds from the end of its lowering, so before its code generation.)
      warmCodeGenTarget();
      prefaultCompilerCode(enzymePluginAddress());  // and lowered and differentiated
    }
  });
  disableRecovery();
  fatalJump = nullptr;
  return survived ? status : 2;
}

namespace {
/// The load that cofactor_compiler_load_enzyme_async started: its thread is detached, and
/// its status published here when it ends.
std::mutex asyncLoadLock;
std::condition_variable asyncLoadEnded;
constexpr int kNoLoad = -1, kLoading = -2;
int asyncLoadStatus = kNoLoad;
} // namespace

extern "C" int cofactor_compiler_load_enzyme_async(int fd) {
  std::lock_guard<std::mutex> guard(asyncLoadLock);
  if (asyncLoadStatus != kNoLoad)
    return 1;  // one per process
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the caller may close its own at once
  if (own < 0)
    return 1;
  try {
    std::thread([own] {
      int status = cofactor_compiler_load_enzyme(own);
      close(own);
      {
        std::lock_guard<std::mutex> ended(asyncLoadLock);
        asyncLoadStatus = status;
      }
      asyncLoadEnded.notify_all();
    }).detach();
  } catch (const std::system_error &) {
    close(own);
    return 1;
  }
  asyncLoadStatus = kLoading;
  return 0;
}

extern "C" int cofactor_compiler_enzyme_load_status(int wait) {
  std::unique_lock<std::mutex> guard(asyncLoadLock);
  if (wait)
    asyncLoadEnded.wait(guard, [] { return asyncLoadStatus != kLoading; });
  return asyncLoadStatus;
}

extern "C" int cofactor_compile(const cofactor_compile_request *request,
                                cofactor_compile_result *result) {
  std::memset(result, 0, sizeof(*result));
  installFatalErrorHandler();

  compileLock.lock();
  waitForDisposal();  // the previous compile's objects are gone before this one starts
  std::jmp_buf jump;
  const char *volatile stage = "cofactor-opt";
  int status = 1;
  if (setjmp(jump) == 0) {
    fatalJump = &jump;
    // The signal handlers are installed only while a compile runs (under the lock); a
    // signal outside any recovery context is passed on to the previous handler.
    enableRecovery();
    llvm::CrashRecoveryContext recovery;
    bool survived =
        recovery.RunSafely([&] { status = compileLocked(*request, result, stage); });
    disableRecovery();
    if (survived)
      disposeBatch();
    if (!survived) {
      abandonBatch();  // objects of a crashed compile are not touched again
      std::string notes = enzymeOutput.stop();
      cofactor_free_result(result);
      status = fail(result, stage,
                    notes + "error: " + stage + " crashed inside the process (signal " +
                        std::to_string(recovery.RetCode - 128) + ")\n");
      result->crashed = 1;
    }
  } else {
    // Jumped out of LLVM: what the stage had allocated is leaked, the lock is not.
    abandonBatch();
    std::string notes = enzymeOutput.stop();
    status = fail(result, stage, notes + "LLVM ERROR: " + fatalMessage + "\n");
    disableRecovery();
  }
  fatalJump = nullptr;
  if (compileHoldsEnzymeLock) {
    compileHoldsEnzymeLock = false;
    enzymeLock.unlock();
  }
  compileLock.unlock();
  return status;
}

extern "C" void cofactor_free_result(cofactor_compile_result *result) {
  for (char **text : {&result->stage, &result->message, &result->mlir_opt, &result->llvmir,
                      &result->llvmir_opt}) {
    std::free(*text);
    *text = nullptr;
  }
}

extern "C" int cofactor_compiler_abi_version(void) { return 7; }
