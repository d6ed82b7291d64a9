//===- QuantumOps.td - operations of the quantum dialect -----*- tablegen -*-===//
//
// Every op here has unknown side effects on the current device (no traits), so
// no upstream pass reorders or drops them. Attribute names and types are the
// contract with the frontend (docs/ir.md), which prints the ops in generic form.
//
// Ops that take wires use one variadic operand list whose parts are given by
// attributes: `params..., wires..., ctrl_wires...` with `num_params`,
// `num_wires` and `ctrl_values` (one 0/1 per control wire), rather than
// AttrSizedOperandSegments.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_QUANTUM_OPS_TD
#define COFACTOR_QUANTUM_OPS_TD

include "cofactor/Quantum/QuantumDialect.td"

// A flag: `adjoint = true` / `false`, a unit attribute, or absent (false).
def Quantum_FlagAttr : AnyAttrOf<[BoolAttr, UnitAttr]>;

// Common declarations of ops whose operands are `leading..., wires..., ctrl_wires...`.
defvar ControlledOpDecls = [{
    /// Operands before the target wires (gate parameters, theta or matrix).
    mlir::OperandRange getLeadingOperands();
    /// The target wires.
    mlir::OperandRange getWires();
    /// The control wires, one per entry of `ctrl_values`.
    mlir::OperandRange getCtrlWires();
    /// The `ctrl_values` entries as integers (empty when absent).
    llvm::SmallVector<int64_t> getCtrlValueList();
    /// Whether the inverse is applied.
    bool isAdjoint();
}];

//===----------------------------------------------------------------------===//
// Device lifecycle
//===----------------------------------------------------------------------===//

def Quantum_DeviceAcquireOp : Quantum_Op<"device_acquire"> {
  let summary = "Make a device of `num_qubits` wires current, in |0...0>.";
  let description = [{
    `shots` 0 means analytic; `seed` < 0 seeds from the system's entropy.
    Lowers to `cf_rt_device_acquire`.
  }];
  let arguments = (ins I64Attr:$num_qubits,
                       DefaultValuedAttr<I64Attr, "0">:$shots,
                       DefaultValuedAttr<I64Attr, "-1">:$seed);
  let hasVerifier = 1;
}

def Quantum_DeviceReleaseOp : Quantum_Op<"device_release"> {
  let summary = "Release the current device.";
}

//===----------------------------------------------------------------------===//
// Gates
//===----------------------------------------------------------------------===//

def Quantum_GateOp : Quantum_Op<"gate"> {
  let summary = "A named gate from runtime/include/cofactor/gates.def.";
  let description = [{
    Operands: `num_params` f64 parameters, `num_wires` i64 target wires, then
    one i64 control wire per `ctrl_values` entry.

    ```mlir
    "quantum.gate"(%theta, %w0, %c1) {gate = "RX", num_params = 1 : i64,
        num_wires = 1 : i64, adjoint = false, ctrl_values = [1]}
        : (f64, i64, i64) -> ()
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs,
                       StrAttr:$gate,
                       I64Attr:$num_params,
                       I64Attr:$num_wires,
                       OptionalAttr<Quantum_FlagAttr>:$adjoint,
                       OptionalAttr<I64ArrayAttr>:$ctrl_values);
  let hasVerifier = 1;
  let extraClassDeclaration = ControlledOpDecls;
}

def Quantum_PauliRotOp : Quantum_Op<"pauli_rot"> {
  let summary = "exp(-i theta/2 P) for a Pauli word P, one letter per wire.";
  let arguments = (ins Variadic<AnyType>:$inputs,
                       StrAttr:$word,
                       I64Attr:$num_wires,
                       OptionalAttr<Quantum_FlagAttr>:$adjoint,
                       OptionalAttr<I64ArrayAttr>:$ctrl_values);
  let hasVerifier = 1;
  let extraClassDeclaration = ControlledOpDecls;
}

def Quantum_UnitaryOp : Quantum_Op<"unitary"> {
  let summary = "QubitUnitary: a 2^k x 2^k complex matrix (memref<DxDx2xf64>).";
  let arguments = (ins Variadic<AnyType>:$inputs,
                       I64Attr:$num_wires,
                       OptionalAttr<Quantum_FlagAttr>:$adjoint,
                       OptionalAttr<I64ArrayAttr>:$ctrl_values);
  let hasVerifier = 1;
  let extraClassDeclaration = ControlledOpDecls;
}

//===----------------------------------------------------------------------===//
// Observables
//===----------------------------------------------------------------------===//

def Quantum_ObsNamedOp : Quantum_Op<"obs_named"> {
  let summary = "Identity, PauliX, PauliY, PauliZ or Hadamard on one wire.";
  let arguments = (ins I64:$wire, StrAttr:$kind);
  let results = (outs Quantum_ObsType:$obs);
  let hasVerifier = 1;
}

def Quantum_ObsHermitianOp : Quantum_Op<"obs_hermitian"> {
  let summary = "A Hermitian matrix (memref<DxDx2xf64>) on the given wires.";
  let arguments = (ins AnyMemRef:$matrix, Variadic<I64>:$wires);
  let results = (outs Quantum_ObsType:$obs);
  let hasVerifier = 1;
}

def Quantum_ObsTensorOp : Quantum_Op<"obs_tensor"> {
  let summary = "The tensor product of observables.";
  let arguments = (ins Variadic<Quantum_ObsType>:$terms);
  let results = (outs Quantum_ObsType:$obs);
  let hasVerifier = 1;
}

def Quantum_ObsHamiltonianOp : Quantum_Op<"obs_hamiltonian"> {
  let summary = "sum_i coeffs[i] * terms[i], coeffs a memref<Nxf64>.";
  let arguments = (ins AnyMemRef:$coeffs, Variadic<Quantum_ObsType>:$terms);
  let results = (outs Quantum_ObsType:$obs);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Measurements
//===----------------------------------------------------------------------===//

def Quantum_ExpvalOp : Quantum_Op<"expval"> {
  let summary = "Expectation value of an observable.";
  let arguments = (ins Quantum_ObsType:$obs);
  let results = (outs F64:$result);
}

def Quantum_VarOp : Quantum_Op<"var"> {
  let summary = "Variance of an observable.";
  let arguments = (ins Quantum_ObsType:$obs);
  let results = (outs F64:$result);
}

def Quantum_ProbsOp : Quantum_Op<"probs"> {
  let summary = "Probabilities over `wires` (none: all) into out: memref<2^kxf64>.";
  let arguments = (ins AnyMemRef:$out, Variadic<I64>:$wires);
  let hasVerifier = 1;
}

def Quantum_StateOp : Quantum_Op<"state"> {
  let summary = "The state vector into out: memref<2^nx2xf64>.";
  let arguments = (ins AnyMemRef:$out);
  let hasVerifier = 1;
}

def Quantum_SampleOp : Quantum_Op<"sample"> {
  let summary = "Samples over `wires` (none: all) into out: memref<SHOTSxKxi64>.";
  let arguments = (ins AnyMemRef:$out, Variadic<I64>:$wires);
  let hasVerifier = 1;
}

def Quantum_CountsOp : Quantum_Op<"counts"> {
  let summary = "Counts of each basis state over `wires` into out: memref<2^kxi64>.";
  let arguments = (ins AnyMemRef:$out, Variadic<I64>:$wires);
  let hasVerifier = 1;
}

def Quantum_MeasureOp : Quantum_Op<"measure"> {
  let summary = "Mid-circuit measurement of one wire.";
  let description = [{
    `reset` puts the wire back in |0> afterwards; `postselect` in {0, 1}
    forces that outcome, -1 (the default) does not postselect.
  }];
  let arguments = (ins I64:$wire,
                       OptionalAttr<Quantum_FlagAttr>:$reset,
                       DefaultValuedAttr<I64Attr, "-1">:$postselect);
  let results = (outs I1:$result);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the wire is reset to |0> after the measurement.
    bool isReset();
  }];
}

#endif // COFACTOR_QUANTUM_OPS_TD
