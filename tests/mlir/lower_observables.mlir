// RUN: cofactor-opt %s --lower-quantum-to-runtime | FileCheck %s

// !quantum.obs becomes the runtime's i64 handle; observable lists go through i64
// stack arrays.

// CHECK-DAG: func.func private @cf_rt_obs_named(i64, i64) -> i64
// CHECK-DAG: func.func private @cf_rt_obs_hermitian(!llvm.ptr<f64>, !llvm.ptr<i64>, i64) -> i64
// CHECK-DAG: func.func private @cf_rt_obs_tensor(!llvm.ptr<i64>, i64) -> i64
// CHECK-DAG: func.func private @cf_rt_obs_hamiltonian(!llvm.ptr<f64>, !llvm.ptr<i64>, i64) -> i64
// CHECK-DAG: func.func private @cf_rt_expval(i64) -> f64
// CHECK-DAG: func.func private @cf_rt_var(i64) -> f64

// CHECK-LABEL: func.func @observables(
// CHECK-SAME: %[[H:.*]]: memref<2x2x2xf64>, %[[COEFFS:.*]]: memref<2xf64>) -> (f64, f64)
func.func @observables(%h: memref<2x2x2xf64>, %coeffs: memref<2xf64>) -> (f64, f64) {
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  // PauliZ is cf_named_obs 3, PauliX is 1.
  // CHECK: %[[KZ:.*]] = arith.constant 3 : i64
  // CHECK: %[[Z:.*]] = call @cf_rt_obs_named(%[[KZ]], %{{.*}}) : (i64, i64) -> i64
  %z = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  // CHECK: %[[KX:.*]] = arith.constant 1 : i64
  // CHECK: %[[X:.*]] = call @cf_rt_obs_named(%[[KX]], %{{.*}})
  %x = "quantum.obs_named"(%w1) {kind = "PauliX"} : (i64) -> !quantum.obs
  // CHECK: unrealized_conversion_cast %[[H]]
  // CHECK: %[[HERM:.*]] = call @cf_rt_obs_hermitian(
  %herm = "quantum.obs_hermitian"(%h, %w1) : (memref<2x2x2xf64>, i64) -> !quantum.obs
  // CHECK: llvm.store %[[Z]], %{{.*}} : !llvm.ptr<i64>
  // CHECK: llvm.store %[[X]], %{{.*}} : !llvm.ptr<i64>
  // CHECK: %[[TWO:.*]] = arith.constant 2 : i64
  // CHECK: %[[ZX:.*]] = call @cf_rt_obs_tensor(%{{.*}}, %[[TWO]]) : (!llvm.ptr<i64>, i64) -> i64
  %zx = "quantum.obs_tensor"(%z, %x) : (!quantum.obs, !quantum.obs) -> !quantum.obs
  // CHECK: unrealized_conversion_cast %[[COEFFS]]
  // CHECK: llvm.store %[[ZX]], %{{.*}} : !llvm.ptr<i64>
  // CHECK: llvm.store %[[HERM]], %{{.*}} : !llvm.ptr<i64>
  // CHECK: %[[HAM:.*]] = call @cf_rt_obs_hamiltonian(
  %ham = "quantum.obs_hamiltonian"(%coeffs, %zx, %herm) : (memref<2xf64>, !quantum.obs, !quantum.obs) -> !quantum.obs
  // CHECK: %[[E:.*]] = call @cf_rt_expval(%[[HAM]]) : (i64) -> f64
  %e = "quantum.expval"(%ham) : (!quantum.obs) -> f64
  // CHECK: %[[V:.*]] = call @cf_rt_var(%[[Z]]) : (i64) -> f64
  %v = "quantum.var"(%z) : (!quantum.obs) -> f64
  // CHECK: return %[[E]], %[[V]] : f64, f64
  return %e, %v : f64, f64
}

// Differentiated coefficients (marked by the frontend): the runtime's _diff constructor.
// CHECK-LABEL: func.func @diff_coeffs(
func.func @diff_coeffs(%coeffs: memref<1xf64>) -> f64 {
  %w0 = arith.constant 0 : i64
  %z = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  // CHECK: %[[HAM:.*]] = call @cf_rt_obs_hamiltonian_diff(
  %ham = "quantum.obs_hamiltonian"(%coeffs, %z) {cofactor.diff_coeffs} : (memref<1xf64>, !quantum.obs) -> !quantum.obs
  // CHECK: call @cf_rt_expval(%[[HAM]]) : (i64) -> f64
  %e = "quantum.expval"(%ham) : (!quantum.obs) -> f64
  return %e : f64
}
// CHECK-NOT: quantum.
// CHECK-NOT: unrealized_conversion_cast %{{.*}} : i64
