// RUN: cofactor-opt %s | cofactor-opt | FileCheck %s
// RUN: cofactor-opt %s --mlir-print-op-generic | cofactor-opt | FileCheck %s

// Every quantum op in the generic form the frontend prints parses, verifies and prints
// back. `ctrl_values = [1]` is an ArrayAttr of i64 (untyped integers default to i64);
// `adjoint` and `reset` take `true`/`false` or a unit attribute.

// CHECK-LABEL: func.func @all_ops(
func.func @all_ops(%t: f64, %u: memref<2x2x2xf64>, %c: memref<2xf64>, %p: memref<4xf64>,
                   %s: memref<4x2xf64>, %smp: memref<3x2xi64>, %cnt: memref<2xi64>) -> i1 {
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  // CHECK: "quantum.device_acquire"() {num_qubits = 2 : i64, seed = 7 : i64, shots = 1000 : i64} : () -> ()
  "quantum.device_acquire"() {num_qubits = 2 : i64, shots = 1000 : i64, seed = 7 : i64} : () -> ()
  // CHECK: "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  // CHECK: "quantum.gate"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {adjoint = true, ctrl_values = [1], gate = "Rot", num_params = 3 : i64, num_wires = 1 : i64} : (f64, f64, f64, i64, i64) -> ()
  "quantum.gate"(%t, %t, %t, %w0, %w1) {gate = "Rot", num_params = 3 : i64, num_wires = 1 : i64, adjoint = true, ctrl_values = [1]} : (f64, f64, f64, i64, i64) -> ()
  // CHECK: "quantum.gate"(%{{.*}}, %{{.*}}) {adjoint, ctrl_values = [0], gate = "GlobalPhase", num_params = 1 : i64, num_wires = 0 : i64} : (f64, i64) -> ()
  "quantum.gate"(%t, %w1) {gate = "GlobalPhase", num_params = 1 : i64, num_wires = 0 : i64, adjoint, ctrl_values = [0 : i64]} : (f64, i64) -> ()
  // CHECK: "quantum.pauli_rot"
  // CHECK-SAME: word = "XY"
  "quantum.pauli_rot"(%t, %w0, %w1) {word = "XY", num_wires = 2 : i64, adjoint = false, ctrl_values = []} : (f64, i64, i64) -> ()
  // CHECK: "quantum.unitary"
  "quantum.unitary"(%u, %w0) {num_wires = 1 : i64} : (memref<2x2x2xf64>, i64) -> ()
  // CHECK: "quantum.obs_named"(%{{.*}}) {kind = "Hadamard"} : (i64) -> !quantum.obs
  %o1 = "quantum.obs_named"(%w0) {kind = "Hadamard"} : (i64) -> !quantum.obs
  // CHECK: "quantum.obs_hermitian"
  %o2 = "quantum.obs_hermitian"(%u, %w1) : (memref<2x2x2xf64>, i64) -> !quantum.obs
  // CHECK: "quantum.obs_tensor"
  %o3 = "quantum.obs_tensor"(%o1, %o2) : (!quantum.obs, !quantum.obs) -> !quantum.obs
  // CHECK: "quantum.obs_hamiltonian"
  %o4 = "quantum.obs_hamiltonian"(%c, %o3, %o1) : (memref<2xf64>, !quantum.obs, !quantum.obs) -> !quantum.obs
  // CHECK: "quantum.expval"(%{{.*}}) : (!quantum.obs) -> f64
  %e = "quantum.expval"(%o4) : (!quantum.obs) -> f64
  // CHECK: "quantum.var"(%{{.*}}) : (!quantum.obs) -> f64
  %v = "quantum.var"(%o1) : (!quantum.obs) -> f64
  // CHECK: "quantum.probs"
  "quantum.probs"(%p) : (memref<4xf64>) -> ()
  // CHECK: "quantum.state"
  "quantum.state"(%s) : (memref<4x2xf64>) -> ()
  // CHECK: "quantum.sample"
  "quantum.sample"(%smp, %w0, %w1) : (memref<3x2xi64>, i64, i64) -> ()
  // CHECK: "quantum.counts"
  "quantum.counts"(%cnt, %w0) : (memref<2xi64>, i64) -> ()
  // CHECK: "quantum.measure"(%{{.*}}) {postselect = 0 : i64, reset} : (i64) -> i1
  %m = "quantum.measure"(%w0) {reset, postselect = 0 : i64} : (i64) -> i1
  // CHECK: "quantum.device_release"() : () -> ()
  "quantum.device_release"() : () -> ()
  return %m : i1
}
