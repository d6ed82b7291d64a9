// RUN: cofactor-opt %s --lower-quantum-to-runtime=gate-table-min=0 --convert-scf-to-cf \
// RUN:   --convert-math-to-llvm --convert-arith-to-llvm --convert-memref-to-llvm \
// RUN:   --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-translate --mlir-to-llvmir | FileCheck %s

// A whole circuit, with every kind of quantum op, through the standard lowering to the
// LLVM dialect and LLVM IR: nothing of the quantum dialect or of the unrealized casts
// is left.

// CHECK-DAG: declare i64 @cf_rt_device_acquire(i64, i64, i64)
// CHECK-DAG: declare void @cf_rt_gate(i64, ptr, i64, ptr, i64, i8, ptr, ptr, i64)
// CHECK-DAG: @cf_pauli_word_YY = internal constant [3 x i8] c"YY\00"

// CHECK-LABEL: define void @circuit(
// CHECK: call i64 @cf_rt_device_acquire(i64 2, i64 0, i64 -1)
// CHECK: call void @cf_rt_gate(i64 8, ptr %{{.*}}, i64 1, ptr %{{.*}}, i64 1, i8 0, ptr null, ptr null, i64 0)
// CHECK: call void @cf_rt_gate(i64 16, ptr null, i64 0, ptr %{{.*}}, i64 2, i8 0, ptr null, ptr null, i64 0)
// CHECK: call void @cf_rt_pauli_rot(double %{{.*}}, ptr @cf_pauli_word_YY, ptr %{{.*}}, i64 2, i8 1,
// CHECK: call void @cf_rt_unitary(ptr %{{.*}}, ptr %{{.*}}, i64 1, i8 0, ptr %{{.*}}, ptr %{{.*}}, i64 1)
// CHECK: call i64 @cf_rt_obs_named(i64 3, i64 0)
// CHECK: call i64 @cf_rt_obs_hermitian(
// CHECK: call i64 @cf_rt_obs_tensor(
// CHECK: call i64 @cf_rt_obs_hamiltonian(
// CHECK: call double @cf_rt_expval(
// CHECK: call double @cf_rt_var(
// CHECK: call void @cf_rt_probs(
// CHECK: call void @cf_rt_state(
// CHECK: call void @cf_rt_sample(
// CHECK: call void @cf_rt_counts(
// CHECK: call i8 @cf_rt_measure(i64 1, i8 0, i64 1)
// CHECK: call void @cf_rt_device_release()
// CHECK-LABEL: define void @_mlir_ciface_circuit(
func.func @circuit(%theta: memref<3xf64>, %u: memref<2x2x2xf64>, %coeffs: memref<2xf64>,
                   %probs: memref<4xf64>, %state: memref<4x2xf64>,
                   %samples: memref<5x2xi64>, %counts: memref<4xi64>,
                   %out: memref<3xf64>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  "quantum.device_acquire"() {num_qubits = 2 : i64, shots = 0 : i64, seed = -1 : i64} : () -> ()
  scf.for %i = %c0 to %c3 step %c1 {
    %t = memref.load %theta[%i] : memref<3xf64>
    "quantum.gate"(%t, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64, adjoint = false} : (f64, i64) -> ()
    "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64} : (i64, i64) -> ()
  }
  %t0 = memref.load %theta[%c0] : memref<3xf64>
  %half = arith.constant 0.5 : f64
  %t1 = math.cos %t0 : f64
  %t2 = arith.mulf %t1, %half : f64
  "quantum.pauli_rot"(%t2, %w0, %w1) {word = "YY", num_wires = 2 : i64, adjoint = true} : (f64, i64, i64) -> ()
  "quantum.unitary"(%u, %w1, %w0) {num_wires = 1 : i64, ctrl_values = [1 : i64]} : (memref<2x2x2xf64>, i64, i64) -> ()
  %z = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %h = "quantum.obs_hermitian"(%u, %w1) : (memref<2x2x2xf64>, i64) -> !quantum.obs
  %zh = "quantum.obs_tensor"(%z, %h) : (!quantum.obs, !quantum.obs) -> !quantum.obs
  %ham = "quantum.obs_hamiltonian"(%coeffs, %zh, %z) : (memref<2xf64>, !quantum.obs, !quantum.obs) -> !quantum.obs
  %e = "quantum.expval"(%ham) : (!quantum.obs) -> f64
  %v = "quantum.var"(%z) : (!quantum.obs) -> f64
  memref.store %e, %out[%c0] : memref<3xf64>
  memref.store %v, %out[%c1] : memref<3xf64>
  "quantum.probs"(%probs, %w0, %w1) : (memref<4xf64>, i64, i64) -> ()
  "quantum.state"(%state) : (memref<4x2xf64>) -> ()
  "quantum.sample"(%samples) : (memref<5x2xi64>) -> ()
  "quantum.counts"(%counts, %w1, %w0) : (memref<4xi64>, i64, i64) -> ()
  %m = "quantum.measure"(%w1) {postselect = 1 : i64} : (i64) -> i1
  %one = arith.constant 1.0 : f64
  %zero = arith.constant 0.0 : f64
  %mf = arith.select %m, %one, %zero : f64
  memref.store %mf, %out[%c2] : memref<3xf64>
  "quantum.device_release"() : () -> ()
  return
}
