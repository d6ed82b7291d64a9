// RUN: cofactor-opt %s --lower-quantum-to-runtime=gate-table-min=0 | FileCheck %s

// Gates become cf_rt_gate/cf_rt_pauli_rot/cf_rt_unitary calls; wire, parameter and
// control lists go through stack arrays allocated once at the function's entry.
// (gate-table-min=0: one call per gate; runs of gates as tables: lower_gate_tables.mlir.)

// CHECK-DAG: func.func private @cf_rt_device_acquire(i64, i64, i64) -> i64
// CHECK-DAG: func.func private @cf_rt_device_release()
// CHECK-DAG: func.func private @cf_rt_gate(i64, !llvm.ptr<f64>, i64, !llvm.ptr<i64>, i64, i8, !llvm.ptr<i64>, !llvm.ptr<i8>, i64)
// CHECK-DAG: func.func private @cf_rt_pauli_rot(f64, !llvm.ptr<i8>, !llvm.ptr<i64>, i64, i8, !llvm.ptr<i64>, !llvm.ptr<i8>, i64)
// CHECK-DAG: func.func private @cf_rt_unitary(!llvm.ptr<f64>, !llvm.ptr<i64>, i64, i8, !llvm.ptr<i64>, !llvm.ptr<i8>, i64)
// CHECK-DAG: llvm.mlir.global internal constant @cf_pauli_word_XZ("XZ\00")

// CHECK-LABEL: func.func @gates(
// CHECK-SAME: %[[THETA:.*]]: f64, %[[U:.*]]: memref<4x4x2xf64>)
func.func @gates(%theta: f64, %u: memref<4x4x2xf64>) {
  // CHECK: %[[PARAMS:.*]] = llvm.alloca %{{.*}} x f64 : (i64) -> !llvm.ptr<f64>
  // CHECK: %[[W0:.*]] = arith.constant 0 : i64
  // CHECK: %[[W1:.*]] = arith.constant 1 : i64
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  %w2 = arith.constant 2 : i64

  // CHECK: %[[NQ:.*]] = arith.constant 3 : i64
  // CHECK: %[[SHOTS:.*]] = arith.constant 100 : i64
  // CHECK: %[[SEED:.*]] = arith.constant 42 : i64
  // CHECK: call @cf_rt_device_acquire(%[[NQ]], %[[SHOTS]], %[[SEED]])
  "quantum.device_acquire"() {num_qubits = 3 : i64, shots = 100 : i64, seed = 42 : i64} : () -> ()

  // Hadamard is gate id 1; no parameters, no controls: null pointers.
  // CHECK: %[[H:.*]] = arith.constant 1 : i64
  // CHECK: %[[NOPARAMS:.*]] = llvm.mlir.null : !llvm.ptr<f64>
  // CHECK: llvm.store %[[W0]], %{{.*}} : !llvm.ptr<i64>
  // CHECK: %[[NOCTRL:.*]] = llvm.mlir.null : !llvm.ptr<i64>
  // CHECK: %[[NOVALS:.*]] = llvm.mlir.null : !llvm.ptr<i8>
  // CHECK: call @cf_rt_gate(%[[H]], %[[NOPARAMS]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NOCTRL]], %[[NOVALS]], %{{.*}})
  "quantum.gate"(%w0) {gate = "Hadamard", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()

  // RX (id 8), adjoint, controlled on wire 2 being 0.
  // CHECK: %[[RX:.*]] = arith.constant 8 : i64
  // CHECK: llvm.store %[[THETA]], %{{.*}} : !llvm.ptr<f64>
  // CHECK: %[[NP:.*]] = arith.constant 1 : i64
  // CHECK: %[[NW:.*]] = arith.constant 1 : i64
  // CHECK: %[[ADJ:.*]] = arith.constant 1 : i8
  // CHECK: %[[CV:.*]] = arith.constant 0 : i8
  // CHECK: llvm.store %[[CV]], %{{.*}} : !llvm.ptr<i8>
  // CHECK: %[[NC:.*]] = arith.constant 1 : i64
  // CHECK: call @cf_rt_gate(%[[RX]], %[[PARAMS]], %[[NP]], %{{.*}}, %[[NW]], %[[ADJ]], %{{.*}}, %{{.*}}, %[[NC]])
  "quantum.gate"(%theta, %w1, %w2) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64, adjoint = true, ctrl_values = [0 : i64]} : (f64, i64, i64) -> ()

  // A unit `adjoint` attribute counts as true, `adjoint = false` as false.
  // CHECK: arith.constant 16 : i64
  // CHECK: arith.constant 1 : i8
  // CHECK: call @cf_rt_gate
  "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64, adjoint} : (i64, i64) -> ()
  // CHECK: arith.constant 35 : i64
  // CHECK: arith.constant 0 : i8
  // CHECK: call @cf_rt_gate
  "quantum.gate"(%theta, %w0, %w1, %w2) {gate = "MultiRZ", num_params = 1 : i64, num_wires = 3 : i64, adjoint = false} : (f64, i64, i64, i64) -> ()

  // CHECK: %[[WORD:.*]] = llvm.mlir.addressof @cf_pauli_word_XZ : !llvm.ptr<array<3 x i8>>
  // CHECK: %[[WORDPTR:.*]] = llvm.getelementptr %[[WORD]][%{{.*}}, %{{.*}}] : (!llvm.ptr<array<3 x i8>>, i64, i64) -> !llvm.ptr<i8>
  // CHECK: call @cf_rt_pauli_rot(%[[THETA]], %[[WORDPTR]],
  "quantum.pauli_rot"(%theta, %w0, %w1) {word = "XZ", num_wires = 2 : i64} : (f64, i64, i64) -> ()

  // The matrix goes as its aligned data pointer plus offset.
  // CHECK: %[[DESC:.*]] = builtin.unrealized_conversion_cast %[[U]] : memref<4x4x2xf64> to !llvm.struct<(ptr<f64>, ptr<f64>, i64, array<3 x i64>, array<3 x i64>)>
  // CHECK: %[[ALIGNED:.*]] = llvm.extractvalue %[[DESC]][1]
  // CHECK: %[[OFFSET:.*]] = llvm.extractvalue %[[DESC]][2]
  // CHECK: %[[DATA:.*]] = llvm.getelementptr %[[ALIGNED]][%[[OFFSET]]] : (!llvm.ptr<f64>, i64) -> !llvm.ptr<f64>
  // CHECK: call @cf_rt_unitary(%[[DATA]],
  "quantum.unitary"(%u, %w0, %w2, %w1) {num_wires = 2 : i64, ctrl_values = [1 : i64], adjoint = false} : (memref<4x4x2xf64>, i64, i64, i64) -> ()

  // CHECK: call @cf_rt_device_release() : () -> ()
  "quantum.device_release"() : () -> ()
  // CHECK-NOT: quantum.
  return
}
