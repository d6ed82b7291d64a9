// RUN: cofactor-opt %s -split-input-file --lower-gradient-ops -verify-diagnostics | FileCheck %s

// --lower-gradient-ops: every gradient.vjp becomes a call of its own declaration
// @__cofactor_vjp_<k>, which carries what --cofactor-emit-enzyme-glue needs (callee,
// counts, diff_inputs, the rank of every operand). In the functions Enzyme will
// differentiate (the callee and what it calls), memref.copy becomes a typed loop.

// CHECK-LABEL: func.func private @f(
// CHECK-NOT: memref.copy
// CHECK: scf.for %[[I:.*]] =
// CHECK-NEXT: %[[V:.*]] = memref.load %arg0[%[[I]]] : memref<3xf64>
// CHECK-NEXT: memref.store %[[V]], %{{.*}}[%[[I]]] : memref<3xf64>
// CHECK: call @g(
func.func private @f(%x: memref<3xf64>, %s: memref<f64>, %out: memref<2x2xf64>)
    attributes {cofactor.num_inputs = 2 : i64} {
  %t = memref.alloc() : memref<3xf64>
  memref.copy %x, %t : memref<3xf64> to memref<3xf64>
  func.call @g(%t, %out) : (memref<3xf64>, memref<2x2xf64>) -> ()
  memref.dealloc %t : memref<3xf64>
  return
}

// Called from the vjp callee: differentiated too.
// CHECK-LABEL: func.func private @g(
// CHECK-NOT: memref.copy
// CHECK: scf.for
func.func private @g(%x: memref<3xf64>, %out: memref<2x2xf64>) {
  %y = memref.alloc() : memref<3xf64>
  memref.copy %x, %y : memref<3xf64> to memref<3xf64>
  memref.dealloc %y : memref<3xf64>
  return
}

// Not differentiated: left alone.
// CHECK-LABEL: func.func private @untouched(
// CHECK-NEXT: memref.copy
func.func private @untouched(%x: memref<3xf64>, %y: memref<3xf64>) {
  memref.copy %x, %y : memref<3xf64> to memref<3xf64>
  return
}

// CHECK-LABEL: func.func @grad(
// CHECK-NEXT: call @__cofactor_vjp_0(%arg0, %arg1, %arg2, %arg3, %arg4) : (memref<3xf64>, memref<f64>, memref<2x2xf64>, memref<2x2xf64>, memref<3xf64>) -> ()
// CHECK-NEXT: call @__cofactor_vjp_1(%arg0, %arg1, %arg2, %arg3, %arg4)
// CHECK-NOT: gradient.vjp
func.func @grad(%x: memref<3xf64>, %s: memref<f64>, %out: memref<2x2xf64>,
                %ct: memref<2x2xf64>, %dx: memref<3xf64>) {
  "gradient.vjp"(%x, %s, %out, %ct, %dx) {callee = @f, num_inputs = 2 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<3xf64>, memref<f64>, memref<2x2xf64>, memref<2x2xf64>, memref<3xf64>) -> ()
  "gradient.vjp"(%x, %s, %out, %ct, %dx) {callee = @f, num_inputs = 2 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<3xf64>, memref<f64>, memref<2x2xf64>, memref<2x2xf64>, memref<3xf64>) -> ()
  return
}

// CHECK: func.func private @__cofactor_vjp_0(memref<3xf64>, memref<f64>, memref<2x2xf64>, memref<2x2xf64>, memref<3xf64>)
// CHECK-SAME: cofactor.vjp_callee = @f
// CHECK-SAME: cofactor.vjp_diff_inputs = [0]
// CHECK-SAME: cofactor.vjp_num_inputs = 2 : i64
// CHECK-SAME: cofactor.vjp_num_outputs = 1 : i64
// CHECK-SAME: cofactor.vjp_ranks = [1, 0, 2, 2, 1]
// CHECK: func.func private @__cofactor_vjp_1(

// -----

// A callee with a custom gradient is differentiated through a wrapper that calls it:
// Enzyme applies custom gradients at call sites, not to the function it is handed.

// CHECK-LABEL: func.func private @g(
// CHECK-LABEL: func.func private @g.differentiable(%arg0: memref<2xf64>, %arg1: memref<f64>)
// CHECK-SAME: cofactor.num_inputs = 1 : i64
// The function handed to Enzyme types its float buffers (2 and 1 doubles) for Enzyme:
// CHECK: call @__enzyme_double({{.*}}, %c16_i64)
// CHECK: call @__enzyme_double({{.*}}, %c8_i64)
// CHECK-NEXT: call @g(%arg0, %arg1)
// CHECK-NEXT: return
// CHECK: func.func private @__cofactor_vjp_0(
// CHECK-SAME: cofactor.vjp_callee = @g.differentiable
func.func private @g(memref<2xf64>, memref<f64>)
    attributes {cofactor.num_inputs = 1 : i64, cofactor.vjp = @g_vjp}
func.func private @g_vjp(memref<2xf64>, memref<f64>, memref<2xf64>)
func.func @grad(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<2xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @g, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  return
}

// -----

func.func private @f(%x: memref<f64>, %out: memref<f64>) {
  return
}
func.func private @grad_f(%x: memref<f64>, %dx: memref<f64>) {
  %out = memref.alloc() : memref<f64>
  %ct = memref.alloc() : memref<f64>
  // expected-error @+1 {{a gradient.vjp inside a differentiated function (a higher-order derivative) is not supported}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<f64>, memref<f64>, memref<f64>, memref<f64>) -> ()
  return
}
func.func @second(%x: memref<f64>, %dx: memref<f64>, %ct: memref<f64>, %ddx: memref<f64>) {
  "gradient.vjp"(%x, %dx, %ct, %ddx) {callee = @grad_f, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<f64>, memref<f64>, memref<f64>, memref<f64>) -> ()
  return
}
