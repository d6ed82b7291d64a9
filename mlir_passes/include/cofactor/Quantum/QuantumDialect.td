//===- QuantumDialect.td - the quantum dialect and its types -*- tablegen -*-===//
//
// The quantum dialect models a stateful device, like the runtime it lowers to:
// quantum ops act on "the current device" and carry no qubit SSA values. The
// contract with the frontend is docs/ir.md.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_QUANTUM_DIALECT_TD
#define COFACTOR_QUANTUM_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Quantum_Dialect : Dialect {
  let name = "quantum";
  let summary = "Side-effecting quantum operations on the current device.";
  let description = [{
    Gates, observables and measurements on a stateful device. Wires are `i64`
    SSA values; observables are `!quantum.obs` handles. The frontend emits the
    ops in generic form; `--lower-quantum-to-runtime` turns each op into a call
    of the cofactor runtime's C ABI.
  }];
  let cppNamespace = "::cofactor::quantum";
  let useDefaultTypePrinterParser = 1;
  let emitAccessorPrefix = kEmitAccessorPrefix_Prefixed;
}

def Quantum_ObsType : TypeDef<Quantum_Dialect, "Obs"> {
  let mnemonic = "obs";
  let summary = "An observable of the current device (an i64 runtime handle).";
}

class Quantum_Op<string mnemonic, list<Trait> traits = []>
    : Op<Quantum_Dialect, mnemonic, traits>;

#endif // COFACTOR_QUANTUM_DIALECT_TD
