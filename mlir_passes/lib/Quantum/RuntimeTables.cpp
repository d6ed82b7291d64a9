//===- RuntimeTables.cpp - names the runtime ABI knows, and their ids -----===//

#include "cofactor/Quantum/RuntimeTables.h"

#include "cofactor/runtime.h"

#include "llvm/ADT/StringSwitch.h"

using namespace cofactor::quantum;

static const GateInfo kGates[] = {
#define COFACTOR_GATE(NAME, NUM_PARAMS, NUM_WIRES)                             \
  {#NAME, CF_GATE_##NAME, NUM_PARAMS, NUM_WIRES},
#include "cofactor/gates.def"
#undef COFACTOR_GATE
};

static_assert(sizeof(kGates) / sizeof(kGates[0]) == CF_GATE_COUNT,
              "gates.def and enum cf_gate_id disagree");

const GateInfo *cofactor::quantum::lookupGate(llvm::StringRef name) {
  for (const GateInfo &gate : kGates)
    if (gate.name == name)
      return &gate;
  return nullptr;
}

llvm::Optional<int64_t>
cofactor::quantum::lookupNamedObservable(llvm::StringRef name) {
  return llvm::StringSwitch<llvm::Optional<int64_t>>(name)
      .Case("Identity", int64_t(CF_OBS_IDENTITY))
      .Case("PauliX", int64_t(CF_OBS_PAULIX))
      .Case("PauliY", int64_t(CF_OBS_PAULIY))
      .Case("PauliZ", int64_t(CF_OBS_PAULIZ))
      .Case("Hadamard", int64_t(CF_OBS_HADAMARD))
      .Default(llvm::None);
}
