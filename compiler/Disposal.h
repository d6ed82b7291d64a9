//===- Disposal.h - freeing a compile's objects after it returns -*- C++ -*-===//
//
// What a compile builds (the MLIR context and module, the LLVM context and module, the
// pass managers and their analyses, the code-generation pipeline) is freed by a background
// thread once the compile has returned, not on the compiling thread: its caller loads and
// runs the library meanwhile, on the other core. See Disposal.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef COFACTOR_COMPILER_DISPOSAL_H
#define COFACTOR_COMPILER_DISPOSAL_H

#include <memory>
#include <utility>

namespace cofactor::compiler {

/// Something to destroy later.
class Disposable {
public:
  virtual ~Disposable() = default;
};

template <typename T>
class DisposableObject final : public Disposable {
  std::unique_ptr<T> object;

public:
  explicit DisposableObject(std::unique_ptr<T> object) : object(std::move(object)) {}
};

/// Adds `object` to the current compile's batch; the batch is destroyed in the order its
/// objects were added (an object before what it refers to: a module before its context).
void disposeLater(std::unique_ptr<Disposable> object);

template <typename T>
void disposeLater(std::unique_ptr<T> object) {
  if (object)
    disposeLater(std::unique_ptr<Disposable>(new DisposableObject<T>(std::move(object))));
}

/// Hands the current batch to the background thread (the end of a compile, under the
/// compile lock). With COFACTOR_COMPILER_DISPOSE_INLINE=1 it is destroyed here (A/B).
void disposeBatch();

/// Drops the current batch without destroying it (a compile that crashed or hit a fatal
/// error: its objects may be damaged, and are leaked, as the rest of that compile's).
void abandonBatch();

/// Returns once every batch handed over is destroyed: the start of a compile (so that two
/// never overlap: lld and the pass registries keep global state), a fork, the process's exit.
void waitForDisposal();

} // namespace cofactor::compiler

#endif
