// RUN: cofactor-opt %s --lower-quantum-to-runtime --convert-scf-to-cf \
// RUN:   --convert-math-to-llvm --convert-arith-to-llvm --convert-memref-to-llvm \
// RUN:   --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-translate --mlir-to-llvmir | FileCheck %s

// Also run for real by tests/test_filecheck.py::test_lowered_circuit_runs_on_the_runtime
// (compiled with llc-15, linked against libcofactor_runtime.so): with
// RX(theta) on wire 0 and X on wire 1 controlled by wire 0, the state is
// cos(theta/2)|00> - i sin(theta/2)|11>, so
//   expval(0.5 Z1 + 0.5 Z0 Z1) = 0.5 cos(theta) + 0.5   (Z1 given as a Hermitian matrix)
//   probs = [cos^2(theta/2), 0, 0, sin^2(theta/2)].

// The two gates are one run: a table of two records (RX on 0 with parameter 0; PauliX on 1
// controlled by 0 == 1), applied by one cf_rt_gate_table call.
// CHECK: @cf_gate_table_0 = internal constant [16 x i64] [i64 8, i64 1, i64 1, i64 0, i64 0, i64 0, i64 0, i64 2, i64 0, i64 1, i64 1, i64 0, i64 1, i64 1, i64 0, i64 1]
// CHECK-LABEL: define double @run(
// CHECK: call void @cf_rt_gate_table(ptr @cf_gate_table_0, i64 2, ptr %{{.*}}, ptr null)
// CHECK: call i64 @cf_rt_obs_hamiltonian(
// CHECK: call void @cf_rt_probs(
// CHECK-LABEL: define double @_mlir_ciface_run(
func.func @run(%theta: f64, %out: memref<4xf64>) -> f64 attributes {llvm.emit_c_interface} {
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  "quantum.device_acquire"() {num_qubits = 2 : i64, shots = 0 : i64, seed = 1 : i64} : () -> ()
  "quantum.gate"(%theta, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%w1, %w0) {gate = "PauliX", num_params = 0 : i64, num_wires = 1 : i64, ctrl_values = [1]} : (i64, i64) -> ()
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %one = arith.constant 1.0 : f64
  %u = memref.alloca() : memref<2x2x2xf64>
  // U = Z
  memref.store %one, %u[%c0, %c0, %c0] : memref<2x2x2xf64>
  memref.store %zero, %u[%c0, %c0, %c1] : memref<2x2x2xf64>
  memref.store %zero, %u[%c0, %c1, %c0] : memref<2x2x2xf64>
  memref.store %zero, %u[%c0, %c1, %c1] : memref<2x2x2xf64>
  memref.store %zero, %u[%c1, %c0, %c0] : memref<2x2x2xf64>
  memref.store %zero, %u[%c1, %c0, %c1] : memref<2x2x2xf64>
  %m1 = arith.constant -1.0 : f64
  memref.store %m1, %u[%c1, %c1, %c0] : memref<2x2x2xf64>
  memref.store %zero, %u[%c1, %c1, %c1] : memref<2x2x2xf64>
  %h = "quantum.obs_hermitian"(%u, %w1) : (memref<2x2x2xf64>, i64) -> !quantum.obs
  %z0 = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %zz = "quantum.obs_tensor"(%z0, %h) : (!quantum.obs, !quantum.obs) -> !quantum.obs
  %coeffs = memref.alloca() : memref<2xf64>
  %half = arith.constant 0.5 : f64
  memref.store %half, %coeffs[%c0] : memref<2xf64>
  memref.store %half, %coeffs[%c1] : memref<2xf64>
  %ham = "quantum.obs_hamiltonian"(%coeffs, %h, %zz) : (memref<2xf64>, !quantum.obs, !quantum.obs) -> !quantum.obs
  %e = "quantum.expval"(%ham) : (!quantum.obs) -> f64
  "quantum.probs"(%out, %w0, %w1) : (memref<4xf64>, i64, i64) -> ()
  "quantum.device_release"() : () -> ()
  return %e : f64
}
