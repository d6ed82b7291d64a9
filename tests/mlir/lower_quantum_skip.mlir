// RUN: cofactor-opt %s --split-input-file --lower-quantum-to-runtime | FileCheck %s

// --lower-quantum-to-runtime skips a module with nothing of the quantum dialect (a
// classical gradient: compiler/README.md, session 18), but not one where `!quantum.obs`
// appears only in signatures, calls and block arguments, without any quantum op.

// CHECK-LABEL: func.func private @take(i64) -> i64
func.func private @take(!quantum.obs) -> !quantum.obs

// CHECK-LABEL: func.func @pass_on(
// CHECK-SAME: %[[O:.*]]: i64) -> i64
// CHECK: %[[R:.*]] = call @take(%[[O]]) : (i64) -> i64
// CHECK: return %[[R]] : i64
func.func @pass_on(%o: !quantum.obs) -> !quantum.obs {
  %r = func.call @take(%o) : (!quantum.obs) -> !quantum.obs
  return %r : !quantum.obs
}

// -----

// CHECK-LABEL: func.func private @declared_only(i64)
// CHECK-NOT: !quantum.obs
func.func private @declared_only(!quantum.obs)

// -----

// A classical module comes out as it went in.
// CHECK-LABEL: func.func @classical(
// CHECK-SAME: %[[X:.*]]: memref<4xf64>) -> f64
// CHECK: %[[S:.*]] = scf.for
// CHECK: math.tanh
// CHECK: return %[[S]] : f64
func.func @classical(%x: memref<4xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f64
  %s = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f64) {
    %v = memref.load %x[%i] : memref<4xf64>
    %t = math.tanh %v : f64
    %n = arith.addf %acc, %t : f64
    scf.yield %n : f64
  }
  return %s : f64
}
