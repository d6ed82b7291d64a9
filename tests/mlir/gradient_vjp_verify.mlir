// RUN: cofactor-opt %s -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=ROUNDTRIP

// The verifier of gradient.vjp (docs/gradients.md): operands are ins, outs, couts and
// dins; the callee is a void DPS func.func whose signature matches.

func.func private @f(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>) {
  return
}
// ROUNDTRIP-LABEL: func.func @ok
func.func @ok(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>, %ct: memref<f64>,
              %dx: memref<3xf64>, %ds: memref<f64>) {
  // ROUNDTRIP: "gradient.vjp"(%{{.*}}) {callee = @f, diff_inputs = [0, 1], num_inputs = 2 : i64, num_outputs = 1 : i64}
  "gradient.vjp"(%x, %s, %out, %ct, %dx, %ds) {callee = @f, num_inputs = 2 : i64,
      num_outputs = 1 : i64, diff_inputs = [0, 1]}
      : (memref<3xf64>, memref<f64>, memref<f64>, memref<f64>, memref<3xf64>, memref<f64>) -> ()
  return
}

// -----

func.func private @f(%x: memref<3xf64>, %out: memref<f64>)
func.func @missing_shadow(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<f64>) {
  // expected-error @+1 {{expected 4 operands (ins, outs, couts, dins), got 3}}
  "gradient.vjp"(%x, %out, %ct) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<3xf64>, memref<f64>, memref<f64>) -> ()
  return
}

// -----

func.func private @f(%x: memref<3xf64>, %out: memref<f64>)
func.func @bad_index(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<3xf64>) {
  // expected-error @+1 {{diff_inputs entry 1 is not an input index (num_inputs = 1)}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [1]} : (memref<3xf64>, memref<f64>, memref<f64>, memref<3xf64>) -> ()
  return
}

// -----

func.func private @f(%x: memref<3xf64>, %out: memref<f64>)
func.func @bad_cotangent(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<1xf64>, %dx: memref<3xf64>) {
  // expected-error @+1 {{cotangent type 'memref<1xf64>' differs from output type 'memref<f64>'}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<3xf64>, memref<f64>, memref<1xf64>, memref<3xf64>) -> ()
  return
}

// -----

func.func private @f(%x: memref<3xf64>, %out: memref<f64>)
func.func @bad_shadow(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<2xf64>) {
  // expected-error @+1 {{shadow type 'memref<2xf64>' differs from the type 'memref<3xf64>' of input 0}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<3xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  return
}

// -----

func.func private @f(%n: memref<3xi64>, %out: memref<f64>)
func.func @integer_input(%n: memref<3xi64>, %out: memref<f64>, %ct: memref<f64>, %dn: memref<3xi64>) {
  // expected-error @+1 {{input 0 is not floating-point and cannot be differentiated}}
  "gradient.vjp"(%n, %out, %ct, %dn) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<3xi64>, memref<f64>, memref<f64>, memref<3xi64>) -> ()
  return
}

// -----

func.func private @f(%x: memref<3xf64>, %out: memref<2xf64>)
func.func @signature_mismatch(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<3xf64>) {
  // expected-error @+1 {{operand 1 has type 'memref<f64>' but the callee expects 'memref<2xf64>'}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<3xf64>, memref<f64>, memref<f64>, memref<3xf64>) -> ()
  return
}

// -----

func.func private @f(%x: memref<3xf64>, %out: memref<f64>) -> f64
func.func @not_dps(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<3xf64>) {
  // expected-error @+1 {{callee @f must be void (destination-passing style)}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<3xf64>, memref<f64>, memref<f64>, memref<3xf64>) -> ()
  return
}

// -----

func.func @no_callee(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<3xf64>) {
  // expected-error @+1 {{callee @nowhere is not a func.func}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @nowhere, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<3xf64>, memref<f64>, memref<f64>, memref<3xf64>) -> ()
  return
}
