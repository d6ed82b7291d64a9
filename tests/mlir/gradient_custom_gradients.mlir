// RUN: cofactor-opt %s -split-input-file --cofactor-custom-gradients -verify-diagnostics \
// RUN:   | FileCheck %s

// --cofactor-custom-gradients: an opaque primal with `cofactor.vjp` gets
// @X.fwd_impl / @X.rev_impl over the interleaved (in0, din0, ..., out0, dout0, ...).

// CHECK-LABEL: func.func private @g(memref<2xf64>, memref<3xi64>, memref<f64>)
// CHECK-SAME: cofactor.custom_gradient = [@g.fwd_impl, @g.rev_impl]
// CHECK-SAME: llvm.emit_c_interface
func.func private @g(memref<2xf64>, memref<3xi64>, memref<f64>)
    attributes {cofactor.num_inputs = 2 : i64, cofactor.vjp = @g_vjp}
func.func private @g_vjp(memref<2xf64>, memref<3xi64>, memref<f64>, memref<2xf64>, memref<3xi64>)

// The forward runs the primal and keeps a copy of every input on a runtime tape.
// CHECK-LABEL: func.func private @g.fwd_impl(
// CHECK-SAME: %[[X:[^:]*]]: memref<2xf64>, %{{[^:]*}}: memref<2xf64>, %[[N:[^:]*]]: memref<3xi64>, %{{[^:]*}}: memref<3xi64>, %[[OUT:[^:]*]]: memref<f64>, %{{[^:]*}}: memref<f64>) -> i64
// CHECK-SAME: llvm.emit_c_interface
// CHECK: call @g(%[[X]], %[[N]], %[[OUT]])
// CHECK: %[[T0:.*]] = call @cf_rt_tape_save(%c0_i64,
// CHECK: %[[T1:.*]] = call @cf_rt_tape_save(%[[T0]],
// CHECK: return %[[T1]] : i64

// The reverse restores the inputs, takes the cotangent out of dout and zeroes it
// (unless dout is the primal itself), calls the VJP, adds into din (unless din is the
// primal itself; integer inputs have no derivative) and frees the tape.
// CHECK-LABEL: func.func private @g.rev_impl(
// CHECK-SAME: %[[X:[^:]*]]: memref<2xf64>, %[[DX:[^:]*]]: memref<2xf64>, %{{[^:]*}}: memref<3xi64>, %{{[^:]*}}: memref<3xi64>, %{{[^:]*}}: memref<f64>, %[[DOUT:[^:]*]]: memref<f64>, %[[TAPE:[^:]*]]: i64)
// CHECK: %[[SX:.*]] = memref.alloc() : memref<2xf64>
// CHECK: call @cf_rt_tape_load(%[[TAPE]], %c0_i64,
// CHECK: %[[SN:.*]] = memref.alloc() : memref<3xi64>
// CHECK: call @cf_rt_tape_load(%[[TAPE]], %c1_i64,
// CHECK: %[[CT:.*]] = memref.alloc() : memref<f64>
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[CT]][] : memref<f64>
// CHECK: } else {
// CHECK-NEXT: memref.copy %[[DOUT]], %[[CT]]
// CHECK: memref.store %{{.*}}, %[[DOUT]][] : memref<f64>
// CHECK: %[[VX:.*]] = memref.alloc() : memref<2xf64>
// CHECK: %[[VN:.*]] = memref.alloc() : memref<3xi64>
// CHECK: call @g_vjp(%[[SX]], %[[SN]], %[[CT]], %[[VX]], %[[VN]])
// CHECK: scf.if
// CHECK: } else {
// CHECK: scf.for
// CHECK: memref.load %[[DX]]
// CHECK: memref.load %[[VX]]
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %[[DX]]
// CHECK-NOT: arith.addi
// CHECK: call @cf_rt_tape_free(%[[TAPE]])
// CHECK: return

// -----

// A primal with `cofactor.jacobian` (a split QNode): the forward calls the Jacobian
// function, which computes the outputs and jac = d outs / d params (the last input) in
// one circuit execution, and keeps only jac; the reverse adds jac^T couts into dparams.
// The other inputs get nothing (they reach the circuit only through params).

// CHECK-LABEL: func.func private @q(memref<3xf64>, memref<?xf64>, memref<2xf64>)
// CHECK-SAME: cofactor.custom_gradient = [@q.fwd_impl, @q.rev_impl]
func.func private @q(memref<3xf64>, memref<?xf64>, memref<2xf64>)
    attributes {cofactor.num_inputs = 2 : i64, cofactor.jacobian = @q_jac}
func.func private @q_jac(memref<3xf64>, memref<?xf64>, memref<2x?xf64>, memref<2xf64>)

// CHECK-LABEL: func.func private @q.fwd_impl(
// CHECK-SAME: %[[X:[^:]*]]: memref<3xf64>, %{{[^:]*}}: memref<3xf64>, %[[P:[^:]*]]: memref<?xf64>, %{{[^:]*}}: memref<?xf64>, %[[OUT:[^:]*]]: memref<2xf64>, %{{[^:]*}}: memref<2xf64>) -> i64
// CHECK: %[[NP:.*]] = memref.dim %[[P]], %c0
// CHECK: %[[JAC:.*]] = memref.alloc(%[[NP]]) : memref<2x?xf64>
// CHECK: call @q_jac(%[[X]], %[[P]], %[[JAC]], %[[OUT]])
// CHECK-NOT: call @q(
// CHECK: %[[T:.*]] = call @cf_rt_tape_save(%c0_i64,
// CHECK-NOT: call @cf_rt_tape_save
// CHECK: memref.dealloc %[[JAC]]
// CHECK: return %[[T]] : i64

// CHECK-LABEL: func.func private @q.rev_impl(
// CHECK-SAME: %[[P:[^:]*]]: memref<?xf64>, %[[DP:[^:]*]]: memref<?xf64>, %{{[^:]*}}: memref<2xf64>, %[[DOUT:[^:]*]]: memref<2xf64>, %[[TAPE:[^:]*]]: i64)
// CHECK: %[[CT:.*]] = memref.alloc() : memref<2xf64>
// CHECK: memref.copy %[[DOUT]], %[[CT]]
// CHECK: %[[JAC:.*]] = memref.alloc(%{{.*}}) : memref<2x?xf64>
// CHECK: call @cf_rt_tape_load(%[[TAPE]], %c0_i64,
// CHECK: scf.if
// CHECK: } else {
// CHECK: memref.load %[[CT]]
// CHECK: memref.load %[[JAC]]
// CHECK: memref.load %[[DP]]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %[[DP]]
// CHECK: call @cf_rt_tape_free(%[[TAPE]])
// CHECK: memref.dealloc %[[JAC]]

// -----

// A Python callback gets a body that calls the runtime's trampoline with the data
// pointers of its arguments (kind 0 = primal), and with a user VJP a @cb.vjp (kind 1)
// that becomes its `cofactor.vjp`.

// CHECK-LABEL: func.func private @cb(
// CHECK-SAME: cofactor.custom_gradient = [@cb.fwd_impl, @cb.rev_impl]
// CHECK-SAME: cofactor.vjp = @cb.vjp
// CHECK: %[[ARGS:.*]] = memref.alloca() : memref<2xi64>
// CHECK: memref.store %{{.*}}, %[[ARGS]][%c0] : memref<2xi64>
// CHECK: memref.store %{{.*}}, %[[ARGS]][%c1] : memref<2xi64>
// CHECK: call @cf_rt_callback(%c7_i64, %c0_i64, %c2_i64, %{{.*}}) : (i64, i64, i64, !llvm.ptr<i8>) -> i64
// CHECK-LABEL: func.func private @cb.vjp(%{{.*}}: memref<2xf64>, %{{.*}}: memref<f64>, %{{.*}}: memref<2xf64>)
// CHECK: memref.alloca() : memref<3xi64>
// CHECK: call @cf_rt_callback(%c7_i64, %c1_i64, %c3_i64,
// CHECK-LABEL: func.func private @cb.fwd_impl(
// CHECK-LABEL: func.func private @cb.rev_impl(
// CHECK: call @cb.vjp(
func.func private @cb(memref<2xf64>, memref<f64>)
    attributes {cofactor.callback_id = 7 : i64, cofactor.num_inputs = 1 : i64,
                cofactor.callback_has_vjp}

// -----

// A gradient is never silently zero: what a differentiated function calls must have a
// body or a gradient rule.

// expected-error @+1 {{callback @cb is differentiated but has no VJP: attach .fwd and .bwd}}
func.func private @cb(memref<2xf64>, memref<f64>)
    attributes {cofactor.callback_id = 3 : i64, cofactor.num_inputs = 1 : i64}
func.func private @f(%x: memref<2xf64>, %out: memref<f64>) {
  func.call @cb(%x, %out) : (memref<2xf64>, memref<f64>) -> ()
  return
}
func.func @grad(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<2xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64, num_outputs = 1 : i64,
      diff_inputs = [0]} : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  return
}

// -----

// expected-error @+1 {{@opaque is differentiated but has no body and no gradient rule (cofactor.vjp)}}
func.func private @opaque(memref<2xf64>, memref<f64>)
func.func @grad(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<2xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @opaque, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  return
}

// -----

// expected-error @+1 {{the VJP @g_vjp of @g must take (ins..., couts..., vjps...) and return nothing}}
func.func private @g_vjp(memref<2xf64>, memref<f64>)
func.func private @g(memref<2xf64>, memref<f64>)
    attributes {cofactor.num_inputs = 1 : i64, cofactor.vjp = @g_vjp}

// -----

// expected-error @+1 {{the Jacobian @bad_jac of @bad must take (ins..., jac: memref<Rx?xf64>, outs...), the last input being a 1-D f64 memref}}
func.func private @bad_jac(memref<?xf64>, memref<2xf64>)
func.func private @bad(memref<?xf64>, memref<2xf64>)
    attributes {cofactor.num_inputs = 1 : i64, cofactor.jacobian = @bad_jac}
