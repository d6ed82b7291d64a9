//===- RuntimeTables.h - names the runtime ABI knows, and their ids -*- C++ -*-===//
//
// Gate names map to their position in runtime/include/cofactor/gates.def and
// named observables to `enum cf_named_obs` of runtime.h: the runtime's headers
// stay the one source of truth for these numbers.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_QUANTUM_RUNTIMETABLES_H
#define COFACTOR_QUANTUM_RUNTIMETABLES_H

#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace cofactor {
namespace quantum {

/// One row of gates.def.
struct GateInfo {
  llvm::StringRef name;
  /// The id the C ABI takes: the row's 0-based position.
  int64_t id;
  int64_t numParams;
  /// -1: any number >= 1 (MultiRZ); 0: no target wires (GlobalPhase).
  int64_t numWires;
};

/// The gates.def row named `name`, or null when there is none.
const GateInfo *lookupGate(llvm::StringRef name);

/// The `cf_named_obs` value of a named observable, or None for an unknown name.
llvm::Optional<int64_t> lookupNamedObservable(llvm::StringRef name);

} // namespace quantum
} // namespace cofactor

#endif // COFACTOR_QUANTUM_RUNTIMETABLES_H
