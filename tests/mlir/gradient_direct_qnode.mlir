// RUN: cofactor-opt %s -split-input-file --cofactor-direct-qnode-gradients | FileCheck %s

// --cofactor-direct-qnode-gradients: the vjp of the frontend's wrapper around a QNode whose
// gate parameters are input elements (or constants) becomes a call to a function that runs
// the circuit recorded, asks the runtime for the Jacobian (1 result x 5 gate parameters,
// numbered in gate order, the constant one included) and scatters it into the input
// elements through a constant table of (parameter, indices) rows.

func.func private @circuit(%x: memref<2x2xf64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
  "quantum.device_acquire"() {num_qubits = 2 : i64, shots = 0 : i64, seed = -1 : i64} : () -> ()
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  %k = arith.constant 0.5 : f64
  %a = memref.load %x[%c1, %c0] : memref<2x2xf64>
  %b = memref.load %x[%c0, %c1] : memref<2x2xf64>
  %c = memref.load %x[%c1, %c0] : memref<2x2xf64>
  "quantum.gate"(%b, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%k, %w1) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64} : (i64, i64) -> ()
  "quantum.pauli_rot"(%a, %w0, %w1) {word = "XY", num_wires = 2 : i64} : (f64, i64, i64) -> ()
  "quantum.gate"(%c, %w1) {gate = "RZ", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b, %w1) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}
func.func private @circuit_primal(%x: memref<2x2xf64>, %out: memref<f64>)
    attributes {cofactor.num_inputs = 1 : i64} {
  %t = memref.alloc() : memref<f64>
  func.call @circuit(%x, %t) : (memref<2x2xf64>, memref<f64>) -> ()
  memref.copy %t, %out : memref<f64> to memref<f64>
  memref.dealloc %t : memref<f64>
  return
}
func.func @grad(%x: memref<2x2xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<2x2xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @circuit_primal, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<2x2xf64>, memref<f64>, memref<f64>, memref<2x2xf64>) -> ()
  return
}

// The QNode and its wrapper have no user left: erased.
// CHECK-NOT: @circuit(
// CHECK-NOT: @circuit_primal(
// CHECK-LABEL: func.func @grad(
// CHECK-NOT: gradient.vjp
// CHECK: call @circuit.direct_vjp(%arg0, %arg1, %arg2, %arg3) : (memref<2x2xf64>, memref<f64>, memref<f64>, memref<2x2xf64>) -> ()
// CHECK-LABEL: func.func private @circuit.direct_vjp(
// CHECK-NOT: cofactor.qnode
// CHECK: %[[JAC:.*]] = memref.alloc() : memref<1x5xf64>
// CHECK: "quantum.device_acquire"
// CHECK-NEXT: call @cf_rt_tape_start() : () -> ()
// CHECK: "quantum.gate"(%{{.*}}) {gate = "RX"
// CHECK: memref.store %{{.*}}, %arg1[] : memref<f64>
// CHECK: %[[P:.*]] = arith.constant 5 : i64
// CHECK: %[[ROWS:.*]] = arith.constant 1 : i64
// CHECK: call @cf_rt_tape_stop() : () -> ()
// CHECK: call @cf_rt_jacobian_recorded(%{{.*}}, %[[ROWS]], %[[P]]) : (!llvm.ptr<i8>, i64, i64) -> ()
// CHECK-NEXT: "quantum.device_release"
// CHECK: %[[CT:.*]] = memref.load %arg2[] : memref<f64>
// CHECK: %[[TABLE:.*]] = memref.get_global @circuit.direct_vjp_table : memref<4x3xi64>
// CHECK: scf.for
// CHECK: memref.load %[[JAC]]
// CHECK: arith.mulf %[[CT]],
// CHECK: memref.load %arg3[
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %arg3[
// CHECK: }
// CHECK: memref.store %{{.*}}, %arg2[] : memref<f64>
// CHECK: memref.dealloc %[[JAC]]
// The table: parameters 2 (the Pauli rotation) and 3 (the RZ) from x[1, 0], 0 (the first
// RX) and 4 (the second, the same loaded value) from x[0, 1]; the constant RY (parameter 1)
// has no row.
// CHECK: memref.global "private" constant @circuit.direct_vjp_table : memref<4x3xi64> = dense<{{\[}}[2, 1, 0], [0, 0, 1], [4, 0, 1], [3, 1, 0]]>

// -----

// Classical code between the input and a gate: the vjp is left for Enzyme.
func.func private @scaled(%x: memref<f64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.num_inputs = 1 : i64} {
  "quantum.device_acquire"() {num_qubits = 1 : i64, shots = 0 : i64, seed = -1 : i64} : () -> ()
  %w0 = arith.constant 0 : i64
  %two = arith.constant 2.0 : f64
  %v = memref.load %x[] : memref<f64>
  %a = arith.mulf %v, %two : f64
  "quantum.gate"(%a, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}
func.func @grad_scaled(%x: memref<f64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<f64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @scaled, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<f64>, memref<f64>, memref<f64>, memref<f64>) -> ()
  return
}

// CHECK-LABEL: func.func @grad_scaled(
// CHECK: "gradient.vjp"
// CHECK-NOT: direct_vjp

// -----

// Classical code after the QNode (the wrapper does more than copy): left for Enzyme.
func.func private @plain(%x: memref<f64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.num_inputs = 1 : i64} {
  "quantum.device_acquire"() {num_qubits = 1 : i64, shots = 0 : i64, seed = -1 : i64} : () -> ()
  %w0 = arith.constant 0 : i64
  %v = memref.load %x[] : memref<f64>
  "quantum.gate"(%v, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}
func.func private @squared(%x: memref<f64>, %out: memref<f64>)
    attributes {cofactor.num_inputs = 1 : i64} {
  %t = memref.alloc() : memref<f64>
  func.call @plain(%x, %t) : (memref<f64>, memref<f64>) -> ()
  %v = memref.load %t[] : memref<f64>
  %s = arith.mulf %v, %v : f64
  memref.store %s, %out[] : memref<f64>
  memref.dealloc %t : memref<f64>
  return
}
func.func @grad_squared(%x: memref<f64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<f64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @squared, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<f64>, memref<f64>, memref<f64>, memref<f64>) -> ()
  return
}

// CHECK-LABEL: func.func @grad_squared(
// CHECK: "gradient.vjp"
// CHECK-NOT: direct_vjp
