// RUN: cofactor-opt %s --lower-quantum-to-runtime | FileCheck %s
// RUN: cofactor-opt %s --lower-quantum-to-runtime --convert-scf-to-cf \
// RUN:   --convert-arith-to-llvm --convert-memref-to-llvm --convert-func-to-llvm \
// RUN:   --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM

// Observables that cross function, block and scf region boundaries become i64 handles
// there too.

// CHECK-LABEL: func.func @make_obs(
// CHECK-SAME: %{{.*}}: i64) -> i64
// CHECK: %[[O:.*]] = call @cf_rt_obs_named
// CHECK: return %[[O]] : i64
func.func @make_obs(%w: i64) -> !quantum.obs {
  %o = "quantum.obs_named"(%w) {kind = "PauliY"} : (i64) -> !quantum.obs
  return %o : !quantum.obs
}

// CHECK-LABEL: func.func @use_obs(
func.func @use_obs(%flag: i1) -> f64 {
  %w0 = arith.constant 0 : i64
  // CHECK: %[[A:.*]] = call @make_obs(%{{.*}}) : (i64) -> i64
  %a = func.call @make_obs(%w0) : (i64) -> !quantum.obs
  // CHECK: %[[PICK:.*]] = scf.if %{{.*}} -> (i64) {
  // CHECK:   scf.yield %[[A]] : i64
  // CHECK: } else {
  // CHECK:   %[[B:.*]] = func.call @cf_rt_obs_named
  // CHECK:   scf.yield %[[B]] : i64
  %pick = scf.if %flag -> (!quantum.obs) {
    scf.yield %a : !quantum.obs
  } else {
    %b = "quantum.obs_named"(%w0) {kind = "PauliX"} : (i64) -> !quantum.obs
    scf.yield %b : !quantum.obs
  }
  // CHECK: cf.br ^[[NEXT:.*]](%[[PICK]] : i64)
  cf.br ^next(%pick : !quantum.obs)
// CHECK: ^[[NEXT]](%[[ARG:.*]]: i64):
^next(%obs: !quantum.obs):
  // CHECK: call @cf_rt_expval(%[[ARG]]) : (i64) -> f64
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  return %e : f64
}
// CHECK-NOT: !quantum.obs
// CHECK-NOT: unrealized_conversion_cast

// LLVM-LABEL: define i64 @make_obs(
// LLVM-LABEL: define double @use_obs(
// LLVM: call double @cf_rt_expval(
