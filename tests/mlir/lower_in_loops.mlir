// RUN: cofactor-opt %s --lower-quantum-to-runtime | FileCheck %s

// Quantum ops inside loops and conditionals: the stack arrays are allocated once at
// the function's entry (the stack does not grow per iteration) and reused by every
// call with the same element type and length.

// CHECK-LABEL: func.func @layers(
func.func @layers(%params: memref<8xf64>, %cond: i1) -> f64 {
  // CHECK-DAG: %[[P:.*]] = llvm.alloca %{{.*}} x f64
  // CHECK-DAG: %[[W:.*]] = llvm.alloca %{{.*}} x i64
  // CHECK-NOT: llvm.alloca
  // CHECK: scf.for
  // CHECK-NOT: llvm.alloca
  // CHECK: llvm.store %{{.*}}, %{{.*}} : !llvm.ptr<f64>
  // CHECK: call @cf_rt_gate(%{{.*}}, %[[P]], %{{.*}}, %[[W]],
  // CHECK: scf.if
  // CHECK: call @cf_rt_gate(%{{.*}}, %{{.*}}, %{{.*}}, %[[W]],
  // CHECK: call @cf_rt_obs_named
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  scf.for %i = %c0 to %c8 step %c1 {
    %theta = memref.load %params[%i] : memref<8xf64>
    %iw = arith.index_cast %i : index to i64
    %two = arith.constant 2 : i64
    %w = arith.remsi %iw, %two : i64
    "quantum.gate"(%theta, %w) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
    scf.if %cond {
      "quantum.gate"(%w) {gate = "PauliX", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
    }
  }
  %w0 = arith.constant 0 : i64
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  "quantum.device_release"() : () -> ()
  return %e : f64
}
