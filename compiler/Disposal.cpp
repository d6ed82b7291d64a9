//===- Disposal.cpp - freeing a compile's objects after it returns --------===//
//
// Tearing down a compile (the MLIR and LLVM contexts with every type, constant and
// operation they hold, the ~130 code-generation passes, the analyses) is a few thousand
// frees and a share of each compile's time that its caller waits for for nothing. The
// compile now hands those objects to one background thread (started on first use, never
// joined) and returns; the caller loads the library it produced meanwhile. The next
// compile, a fork and the process's exit wait until the thread is done, so no teardown ever
// runs beside a compile (the objects share no state with a new compile, but lld and
// LLVM's registries are process-wide), in a child without the thread, or after the
// library's static objects are gone.
//
//===----------------------------------------------------------------------===//
#include "Disposal.h"
#include "Stages.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <pthread.h>

namespace cofactor::compiler {
namespace {

using Batch = std::vector<std::unique_ptr<Disposable>>;

/// Shared with the thread. Allocated once and never freed: the thread may still wait on
/// the condition variable while the process's static objects are destroyed at exit.
struct State {
  std::mutex lock;
  std::condition_variable changed;
  Batch pending;    // handed over, not yet taken by the thread
  bool busy = false; // the thread is destroying a batch
  bool started = false;
};
State &state() {
  static State *theState = new State;
  return *theState;
}

/// Filled by the compiling thread (under the compile lock) until disposeBatch.
Batch current;

bool inline_() {
  static const bool value = [] {
    const char *text = std::getenv("COFACTOR_COMPILER_DISPOSE_INLINE");
    return text && std::strcmp(text, "1") == 0;
  }();
  return value;
}

void destroy(Batch &batch) {
  for (std::unique_ptr<Disposable> &object : batch)
    object.reset();
  batch.clear();
}

void run() {
  State &s = state();
  std::unique_lock<std::mutex> guard(s.lock);
  for (;;) {
    s.changed.wait(guard, [&] { return !s.pending.empty(); });
    Batch batch = std::move(s.pending);
    s.pending.clear();
    s.busy = true;
    guard.unlock();
    destroy(batch);
    // While the caller runs what it compiled: what the next compile would build first
    // (~2 ms of a compile that is not the process's first; the first one's were built by
    // the preloading thread).
    prepareNextContext();
    prepareNextCodeGen();
    guard.lock();
    s.busy = false;
    s.changed.notify_all();
  }
}

void waitLocked(std::unique_lock<std::mutex> &guard) {
  State &s = state();
  s.changed.wait(guard, [&] { return s.pending.empty() && !s.busy; });
}

/// Around fork(): the parent waits until the thread is idle and holds its lock through the
/// fork, so that the child's copy of the state is consistent; the child has no thread (only
/// the forking thread survives a fork) and starts its own when it first needs one.
void beforeFork() {
  state().lock.lock();
  std::unique_lock<std::mutex> guard(state().lock, std::adopt_lock);
  waitLocked(guard);
  guard.release();
}
void afterForkInParent() { state().lock.unlock(); }
void afterForkInChild() {
  state().started = false;
  state().lock.unlock();
}

void atExit() { waitForDisposal(); }

} // namespace

void disposeLater(std::unique_ptr<Disposable> object) { current.push_back(std::move(object)); }

void disposeBatch() {
  if (current.empty())
    return;
  if (inline_()) {
    destroy(current);
    return;
  }
  State &s = state();
  std::unique_lock<std::mutex> guard(s.lock);
  if (!s.started) {
    static const bool registered = [] {
      pthread_atfork(beforeFork, afterForkInParent, afterForkInChild);
      std::atexit(atExit);
      return true;
    }();
    (void)registered;
    try {
      std::thread(run).detach();
      s.started = true;
    } catch (const std::system_error &) {
      guard.unlock();
      destroy(current);  // no thread to be had: freed here, as before
      return;
    }
  }
  for (std::unique_ptr<Disposable> &object : current)
    s.pending.push_back(std::move(object));
  current.clear();
  s.changed.notify_all();
}

void abandonBatch() {
  for (std::unique_ptr<Disposable> &object : current)
    (void)object.release();
  current.clear();
}

void waitForDisposal() {
  std::unique_lock<std::mutex> guard(state().lock);
  waitLocked(guard);
}

} // namespace cofactor::compiler
