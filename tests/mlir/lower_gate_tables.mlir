// RUN: cofactor-opt %s --lower-quantum-to-runtime | FileCheck %s

// Runs of consecutive gates (and Pauli rotations) become one cf_rt_gate_table call on a
// constant table of records {kind, num_params, num_wires, num_ctrls, adjoint,
// param_offset, wires..., control wires..., control values..., [Pauli word letters]};
// run-time parameters and run-time wires go into stack buffers. Anything that may touch
// the device (a call, a region, a store) ends a run; a single gate stays cf_rt_gate.

// H(0); RX^dagger(theta) on 1 controlled by 2 == 0; CNOT(0, w); PauliRot("XZ", theta) on (0, 1)
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_0(dense<[1, 0, 1, 0, 0, 0, 0, 8, 1, 1, 1, 1, 0, 1, 2, 0, 16, 0, 2, 0, 0, 1, 0, -1, -1, 1, 2, 0, 0, 1, 0, 1, 88, 90]> : tensor<34xi64>) : !llvm.array<34 x i64>
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_1(dense<[2, 0, 1, 0, 0, 0, 1, 3, 0, 1, 0, 0, 0, 2]> : tensor<14xi64>)
// RY(theta) on 0, CZ(0, 1) in the loop body:
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_2(dense<[9, 1, 1, 0, 0, 0, 0, 18, 0, 2, 0, 0, 1, 0, 1]> : tensor<15xi64>)
// CHECK-DAG: func.func private @cf_rt_gate_table(!llvm.ptr<i64>, i64, !llvm.ptr<f64>, !llvm.ptr<i64>)
// The function @direct below:
// Rot(p[4], p[5], p[6]) on 0; CNOT(0, 1); RX(p[7]) on 1; H(0):
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_3(dense<[12, 3, 1, 0, 0, 4, 0, 16, 0, 2, 0, 0, 0, 0, 1, 8, 1, 1, 0, 0, 7, 1, 1, 0, 1, 0, 0, 0, 0]> : tensor<29xi64>)
// RY(w[1, 0]) on 0; RZ(w[1, 2]) on 1 (a 2x3 memref: linear indices 3 and 5):
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_4(dense<[9, 1, 1, 0, 0, 3, 0, 10, 1, 1, 0, 0, 5, 1]> : tensor<14xi64>)
// A store between a load and the run: the values go through the stack buffer.
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_5(dense<[8, 1, 1, 0, 0, 0, 0, 9, 1, 1, 0, 0, 1, 1]> : tensor<14xi64>)
// The function @hoisted below: RX(p[0]) on 0, H(0); RY(p[1]) on 1, H(1):
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_6(dense<[8, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0]> : tensor<14xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @cf_gate_table_7(dense<[9, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1]> : tensor<14xi64>)

// CHECK-LABEL: func.func @run(
// CHECK-SAME: %[[THETA:.*]]: f64, %[[W:.*]]: i64, %[[M:.*]]: memref<2xf64>)
func.func @run(%theta: f64, %w: i64, %m: memref<2xf64>) {
  // The buffers (rounded up to 8 entries) are allocated at the function's entry.
  // CHECK: %[[EIGHT:.*]] = llvm.mlir.constant(8 : i64)
  // CHECK: %[[WIRES:.*]] = llvm.alloca %[[EIGHT]] x i64
  // CHECK: %[[EIGHTF:.*]] = llvm.mlir.constant(8 : i64)
  // CHECK: %[[PARAMS:.*]] = llvm.alloca %[[EIGHTF]] x f64
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  %w2 = arith.constant 2 : i64
  %c0 = arith.constant 0 : index
  "quantum.device_acquire"() {num_qubits = 3 : i64} : () -> ()
  "quantum.gate"(%w0) {gate = "Hadamard", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  "quantum.gate"(%theta, %w1, %w2) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64, adjoint = true, ctrl_values = [0 : i64]} : (f64, i64, i64) -> ()
  // A load between gates does not end the run.
  %x = memref.load %m[%c0] : memref<2xf64>
  "quantum.gate"(%w0, %w) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64} : (i64, i64) -> ()
  "quantum.pauli_rot"(%x, %w0, %w1) {word = "XZ", num_wires = 2 : i64} : (f64, i64, i64) -> ()
  // CHECK: %[[T0:.*]] = llvm.mlir.addressof @cf_gate_table_0
  // CHECK: %[[T0P:.*]] = llvm.getelementptr %[[T0]]
  // CHECK: llvm.store %[[THETA]], %{{.*}} : !llvm.ptr<f64>
  // CHECK: llvm.store %{{.*}}, %{{.*}} : !llvm.ptr<f64>
  // CHECK: llvm.store %[[W]], %{{.*}} : !llvm.ptr<i64>
  // CHECK: %[[N0:.*]] = arith.constant 4 : i64
  // CHECK: call @cf_rt_gate_table(%[[T0P]], %[[N0]], %[[PARAMS]], %[[WIRES]])

  // A store ends the run: the two gates after it are a table of their own.
  // CHECK: memref.store
  memref.store %theta, %m[%c0] : memref<2xf64>
  "quantum.gate"(%w1) {gate = "PauliX", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  "quantum.gate"(%w2) {gate = "PauliY", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  // No run-time parameters or wires: null buffers.
  // CHECK: %[[T1:.*]] = llvm.mlir.addressof @cf_gate_table_1
  // CHECK: %[[T1P:.*]] = llvm.getelementptr %[[T1]]
  // CHECK: %[[NOP:.*]] = llvm.mlir.null : !llvm.ptr<f64>
  // CHECK: %[[NOW:.*]] = llvm.mlir.null : !llvm.ptr<i64>
  // CHECK: call @cf_rt_gate_table(%[[T1P]], %{{.*}}, %[[NOP]], %[[NOW]])

  // A gate alone (between a measurement and a loop) stays a cf_rt_gate call; a loop
  // stays a loop and the run in its body is a table.
  // CHECK: call @cf_rt_measure
  // CHECK: call @cf_rt_gate(
  %m0 = "quantum.measure"(%w1) : (i64) -> i1
  "quantum.gate"(%w2) {gate = "PauliZ", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  // CHECK: scf.for
  // CHECK: %[[T2:.*]] = llvm.mlir.addressof @cf_gate_table_2
  // CHECK: llvm.store %[[THETA]], %{{.*}} : !llvm.ptr<f64>
  // CHECK: call @cf_rt_gate_table(
  // CHECK: }
  scf.for %i = %c0 to %c4 step %c1 {
    "quantum.gate"(%theta, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
    "quantum.gate"(%w0, %w1) {gate = "CZ", num_params = 0 : i64, num_wires = 2 : i64} : (i64, i64) -> ()
  }
  // CHECK: call @cf_rt_device_release
  "quantum.device_release"() : () -> ()
  // CHECK-NOT: quantum.
  return
}

// When every parameter of a run is a load of one f64 memref at constant indices (the
// quantum part of a split QNode reads params[k]), the call passes that memref's data and
// param_offset is each element's linear index in it: nothing is stored per parameter.
// CHECK-LABEL: func.func @direct(
// CHECK-SAME: %[[P:.*]]: memref<?xf64>, %[[W:.*]]: memref<2x3xf64>)
func.func @direct(%p: memref<?xf64>, %w: memref<2x3xf64>) {
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  // CHECK: %[[PARAMS:.*]] = llvm.alloca
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  %a = memref.load %p[%c4] : memref<?xf64>
  %b = memref.load %p[%c5] : memref<?xf64>
  %c = memref.load %p[%c6] : memref<?xf64>
  "quantum.gate"(%a, %b, %c, %w0) {gate = "Rot", num_params = 3 : i64, num_wires = 1 : i64} : (f64, f64, f64, i64) -> ()
  "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64} : (i64, i64) -> ()
  %d = memref.load %p[%c7] : memref<?xf64>
  "quantum.gate"(%d, %w1) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%w0) {gate = "Hadamard", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  // CHECK-NOT: memref.load
  // CHECK: %[[T3:.*]] = llvm.mlir.addressof @cf_gate_table_3
  // CHECK: %[[T3P:.*]] = llvm.getelementptr %[[T3]]
  // CHECK: %[[PD:.*]] = builtin.unrealized_conversion_cast %[[P]] : memref<?xf64> to !llvm.struct
  // CHECK: %[[PA:.*]] = llvm.extractvalue %[[PD]][1]
  // CHECK: %[[PO:.*]] = llvm.extractvalue %[[PD]][2]
  // CHECK: %[[PP:.*]] = llvm.getelementptr %[[PA]][%[[PO]]]
  // CHECK-NOT: llvm.store
  // CHECK: call @cf_rt_gate_table(%[[T3P]], %{{.*}}, %[[PP]], %{{.*}})
  %m = "quantum.measure"(%w1) : (i64) -> i1
  %e = memref.load %w[%c1, %c0] : memref<2x3xf64>
  %f = memref.load %w[%c1, %c2] : memref<2x3xf64>
  "quantum.gate"(%e, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%f, %w1) {gate = "RZ", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  // CHECK: call @cf_rt_measure
  // CHECK: %[[T4:.*]] = llvm.mlir.addressof @cf_gate_table_4
  // CHECK: builtin.unrealized_conversion_cast %[[W]] : memref<2x3xf64>
  // CHECK-NOT: llvm.store
  // CHECK: call @cf_rt_gate_table(
  %g = memref.load %p[%c0] : memref<?xf64>
  %h = memref.load %p[%c1] : memref<?xf64>
  memref.store %g, %p[%c2] : memref<?xf64>
  "quantum.gate"(%g, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%h, %w1) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  // CHECK: memref.store
  // CHECK: %[[T5:.*]] = llvm.mlir.addressof @cf_gate_table_5
  // CHECK: llvm.store %{{.*}}, %{{.*}} : !llvm.ptr<f64>
  // CHECK: llvm.store %{{.*}}, %{{.*}} : !llvm.ptr<f64>
  // CHECK: call @cf_rt_gate_table(%{{.*}}, %{{.*}}, %[[PARAMS]], %{{.*}})
  "quantum.device_release"() : () -> ()
  return
}

// The loads of every run at the top (as traced programs have them): the gates, the
// measurement and the other runs between a run's loads and its call act on the device
// only, so each run still reads the memref directly.
// CHECK-LABEL: func.func @hoisted(
// CHECK-SAME: %[[P:.*]]: memref<2xf64>)
func.func @hoisted(%p: memref<2xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  %a = memref.load %p[%c0] : memref<2xf64>
  %b = memref.load %p[%c1] : memref<2xf64>
  %w0 = arith.constant 0 : i64
  "quantum.gate"(%a, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%w0) {gate = "Hadamard", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  %w1 = arith.constant 1 : i64
  %m = "quantum.measure"(%w1) : (i64) -> i1
  "quantum.gate"(%b, %w1) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%w1) {gate = "Hadamard", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  // CHECK-NOT: memref.load
  // CHECK-NOT: llvm.store
  // CHECK: builtin.unrealized_conversion_cast %[[P]]
  // CHECK: call @cf_rt_gate_table(
  // CHECK: call @cf_rt_measure
  // CHECK-NOT: llvm.store
  // CHECK: builtin.unrealized_conversion_cast %[[P]]
  // CHECK: call @cf_rt_gate_table(
  "quantum.device_release"() : () -> ()
  return
}
