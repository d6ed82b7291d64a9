// RUN: cofactor-opt %s -split-input-file --cofactor-split-qnodes -verify-diagnostics \
// RUN:   | FileCheck %s

// --cofactor-split-qnodes on a QNode whose gate parameters are computed classically,
// some inside an scf.for. Gate parameters are numbered in execution order: gates in
// straight-line code get constant numbers, the gates of a region op read and bump a stack
// counter, and the number is loaded back once after the region op. (A number loaded per
// gate would be one more value Enzyme caches in the tape, for every gate.)

func.func private @circuit(%x: memref<3xf64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  %two = arith.constant 2.0 : f64
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  %x0 = memref.load %x[%c0] : memref<3xf64>
  %a = arith.mulf %x0, %two : f64
  "quantum.gate"(%a, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  scf.for %i = %c0 to %c3 step %c1 {
    %xi = memref.load %x[%i] : memref<3xf64>
    "quantum.gate"(%xi, %w1) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
    "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64} : (i64, i64) -> ()
  }
  "quantum.pauli_rot"(%x0, %w0, %w1) {word = "XY", num_wires = 2 : i64} : (f64, i64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}

// Not reachable from a gradient.vjp: left alone (checked below).
func.func private @unrelated(%x: memref<f64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.num_inputs = 1 : i64} {
  %w0 = arith.constant 0 : i64
  %v = memref.load %x[] : memref<f64>
  "quantum.gate"(%v, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  return
}

// The QNode reached through a classical function.
func.func private @hybrid(%x: memref<3xf64>, %out: memref<f64>) attributes {cofactor.num_inputs = 1 : i64} {
  func.call @circuit(%x, %out) : (memref<3xf64>, memref<f64>) -> ()
  return
}
func.func @grad(%x: memref<3xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<3xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @hybrid, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<3xf64>, memref<f64>, memref<f64>, memref<3xf64>) -> ()
  return
}

// @circuit becomes the classical preprocessing: count, allocate, record every gate
// parameter in order (inside the loop too), no quantum op left, call the quantum part.
// CHECK-LABEL: func.func private @circuit(
// CHECK-NOT: cofactor.qnode
// CHECK-NOT: quantum.
// CHECK: %[[CTR:.*]] = memref.alloca() : memref<index>
// CHECK: call @__enzyme_integer(
// CHECK: %[[SLOT:.*]] = memref.alloca() : memref<index>
// CHECK: call @__enzyme_integer(
// CHECK: call @circuit.pcount(%arg0, %[[SLOT]]) : (memref<3xf64>, memref<index>) -> ()
// CHECK: %[[N:.*]] = memref.load %[[SLOT]][] : memref<index>
// CHECK: llvm.call @malloc
// CHECK: %[[PARAMS:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<?xf64>
// CHECK: %[[A:.*]] = arith.mulf
// CHECK-NOT: memref.load %[[CTR]]
// CHECK: %[[I0:.*]] = arith.constant 0 : index
// CHECK-NEXT: memref.store %[[A]], %[[PARAMS]][%[[I0]]] : memref<?xf64>
// CHECK-NEXT: %[[I1:.*]] = arith.constant 1 : index
// CHECK-NEXT: memref.store %[[I1]], %[[CTR]][] : memref<index>
// CHECK-NEXT: scf.for
// CHECK: %[[XI:.*]] = memref.load %arg0[
// CHECK: %[[K:.*]] = memref.load %[[CTR]][] : memref<index>
// CHECK: memref.store %[[XI]], %[[PARAMS]][%[[K]]] : memref<?xf64>
// CHECK: }
// CHECK-NEXT: %[[AFTER:.*]] = memref.load %[[CTR]][] : memref<index>
// CHECK-NEXT: memref.store %{{.*}}, %[[PARAMS]][%[[AFTER]]] : memref<?xf64>
// CHECK: call @circuit.quantum(%arg0, %[[PARAMS]], %arg1) : (memref<3xf64>, memref<?xf64>, memref<f64>) -> ()
// CHECK: memref.dealloc %[[PARAMS]]
// CHECK-NOT: quantum.
// CHECK: return

// CHECK-LABEL: func.func private @unrelated(
// CHECK-SAME: cofactor.qnode
// CHECK: quantum.gate

// The parameter count: classical code only, inactive for Enzyme.
// CHECK-LABEL: func.func private @circuit.pcount(%arg0: memref<3xf64>, %arg1: memref<index>)
// CHECK-SAME: cofactor.inactive
// CHECK-NOT: quantum.
// CHECK: scf.for
// CHECK: arith.addi
// CHECK: memref.store %{{.*}}, %arg1[] : memref<index>
// CHECK: return

// The quantum part reads every gate parameter from params; its gradient rule is
// the Jacobian below (--cofactor-custom-gradients calls it in the forward).
// CHECK-LABEL: func.func private @circuit.quantum(%arg0: memref<3xf64>, %arg1: memref<?xf64>, %arg2: memref<f64>)
// CHECK-SAME: cofactor.jacobian = @circuit.quantum.jac
// CHECK-SAME: cofactor.num_inputs = 2 : i64
// CHECK: quantum.device_acquire
// CHECK: %[[P0:.*]] = memref.load %arg1[%{{.*}}] : memref<?xf64>
// CHECK: "quantum.gate"(%[[P0]], %{{.*}}) {gate = "RX"
// CHECK: scf.for
// CHECK: %[[P1:.*]] = memref.load %arg1[%{{.*}}] : memref<?xf64>
// CHECK: "quantum.gate"(%[[P1]], %{{.*}}) {gate = "RY"
// CHECK: "quantum.gate"(%{{.*}}, %{{.*}}) {gate = "CNOT"
// CHECK: %[[P2:.*]] = memref.load %arg1[%{{.*}}] : memref<?xf64>
// CHECK: "quantum.pauli_rot"(%[[P2]],
// CHECK: quantum.expval
// CHECK: quantum.device_release

// The circuit with recording on, asking the runtime for the 1 x P Jacobian.
// CHECK-LABEL: func.func private @circuit.quantum.jac(%arg0: memref<3xf64>, %arg1: memref<?xf64>, %arg2: memref<1x?xf64>, %arg3: memref<f64>)
// CHECK: quantum.device_acquire
// CHECK-NEXT: call @cf_rt_tape_start() : () -> ()
// CHECK: quantum.expval
// CHECK: %[[NP:.*]] = memref.dim %arg1
// CHECK: %[[P:.*]] = arith.index_cast %[[NP]] : index to i64
// CHECK: %[[R:.*]] = arith.constant 1 : i64
// CHECK: call @cf_rt_tape_stop() : () -> ()
// CHECK: call @cf_rt_jacobian_recorded(%{{.*}}, %[[R]], %[[P]]) : (!llvm.ptr<i8>, i64, i64) -> ()
// CHECK-NEXT: quantum.device_release

// CHECK-NOT: @circuit.quantum.vjp

// -----

// Straight-line gates (the usual traced circuit): constant parameter numbers, no counter
// slot at all, and a constant count.

func.func private @line(%x: memref<2xf64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w0 = arith.constant 0 : i64
  "quantum.device_acquire"() {num_qubits = 1 : i64} : () -> ()
  %x0 = memref.load %x[%c0] : memref<2xf64>
  %x1 = memref.load %x[%c1] : memref<2xf64>
  "quantum.gate"(%x0, %x1, %x0, %w0) {gate = "Rot", num_params = 3 : i64, num_wires = 1 : i64} : (f64, f64, f64, i64) -> ()
  "quantum.gate"(%x1, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}
func.func @grad(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<2xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @line, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  return
}

// CHECK-LABEL: func.func private @line(
// CHECK: %[[SLOT:.*]] = memref.alloca() : memref<index>
// CHECK: call @line.pcount(%arg0, %[[SLOT]])
// CHECK-NOT: memref.alloca
// CHECK: %[[PARAMS:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<?xf64>
// CHECK-NOT: memref.load %{{.*}}[] : memref<index>
// CHECK: memref.load %arg0[
// CHECK: memref.load %arg0[
// CHECK-NEXT: %[[P0:.*]] = arith.constant 0 : index
// CHECK-NEXT: memref.store %{{.*}}, %[[PARAMS]][%[[P0]]] : memref<?xf64>
// CHECK-NEXT: %[[P1:.*]] = arith.constant 1 : index
// CHECK-NEXT: memref.store %{{.*}}, %[[PARAMS]][%[[P1]]] : memref<?xf64>
// CHECK-NEXT: %[[P2:.*]] = arith.constant 2 : index
// CHECK-NEXT: memref.store %{{.*}}, %[[PARAMS]][%[[P2]]] : memref<?xf64>
// CHECK-NEXT: %[[P3:.*]] = arith.constant 3 : index
// CHECK-NEXT: memref.store %{{.*}}, %[[PARAMS]][%[[P3]]] : memref<?xf64>
// CHECK: call @line.quantum(
// CHECK-LABEL: func.func private @line.pcount(
// CHECK-NOT: memref.alloca
// CHECK: %[[N:.*]] = arith.constant 4 : index
// CHECK-NEXT: memref.store %[[N]], %arg1[] : memref<index>
// CHECK-LABEL: func.func private @line.quantum(
// CHECK-NOT: memref.alloca
// CHECK: %[[Q3:.*]] = arith.constant 3 : index
// CHECK-NEXT: memref.load %arg1[%[[Q3]]] : memref<?xf64>
// CHECK-NEXT: "quantum.gate"(%{{.*}}) {gate = "RY"

// -----

func.func private @circuit(%x: memref<f64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "none", cofactor.num_inputs = 1 : i64} {
  return
}
func.func @grad(%x: memref<f64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<f64>) {
  // expected-error @-5 {{cannot differentiate QNode @circuit: it is marked diff_method=None}}
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @circuit, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<f64>, memref<f64>, memref<f64>, memref<f64>) -> ()
  return
}

// -----

func.func private @circuit(%x: memref<f64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.num_inputs = 1 : i64} {
  %w0 = arith.constant 0 : i64
  // expected-error @+1 {{mid-circuit measurements are not supported in a differentiated QNode}}
  %m = "quantum.measure"(%w0) : (i64) -> i1
  return
}
func.func @grad(%x: memref<f64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<f64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @circuit, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<f64>, memref<f64>, memref<f64>, memref<f64>) -> ()
  return
}

// -----

// Gate parameters that are consecutive elements of a read-only input (the weights of
// StronglyEntanglingLayers) reach params through one loop; a computed parameter and a
// short group stay scalar copies. The quantum part keeps only the loads of params (the
// input's loads, dead there, are gone).

func.func private @layers(%w: memref<3x3xf64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  %two = arith.constant 2.0 : f64
  %a0 = memref.load %w[%c0, %c0] : memref<3x3xf64>
  %a1 = memref.load %w[%c0, %c1] : memref<3x3xf64>
  %a2 = memref.load %w[%c0, %c2] : memref<3x3xf64>
  %b0 = memref.load %w[%c1, %c0] : memref<3x3xf64>
  %b1 = memref.load %w[%c1, %c1] : memref<3x3xf64>
  %b2 = memref.load %w[%c1, %c2] : memref<3x3xf64>
  %d0 = memref.load %w[%c2, %c0] : memref<3x3xf64>
  %d1 = memref.load %w[%c2, %c1] : memref<3x3xf64>
  %d2 = memref.load %w[%c2, %c2] : memref<3x3xf64>
  %s = arith.mulf %a0, %two : f64
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  "quantum.gate"(%s, %w1) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%a0, %a1, %a2, %w0) {gate = "Rot", num_params = 3 : i64, num_wires = 1 : i64} : (f64, f64, f64, i64) -> ()
  "quantum.gate"(%b0, %b1, %b2, %w1) {gate = "Rot", num_params = 3 : i64, num_wires = 1 : i64} : (f64, f64, f64, i64) -> ()
  "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64} : (i64, i64) -> ()
  "quantum.gate"(%d0, %d1, %d2, %w0) {gate = "Rot", num_params = 3 : i64, num_wires = 1 : i64} : (f64, f64, f64, i64) -> ()
  "quantum.gate"(%b2, %b1, %w1) {gate = "U2", num_params = 2 : i64, num_wires = 1 : i64} : (f64, f64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}
func.func @grad(%w: memref<3x3xf64>, %out: memref<f64>, %ct: memref<f64>, %dw: memref<3x3xf64>) {
  "gradient.vjp"(%w, %out, %ct, %dw) {callee = @layers, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<3x3xf64>, memref<f64>, memref<f64>, memref<3x3xf64>) -> ()
  return
}

// CHECK-LABEL: func.func private @layers(
// CHECK: %[[PARAMS:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<?xf64>
// CHECK: %[[A0:.*]] = memref.load %arg0[%{{.*}}, %{{.*}}] : memref<3x3xf64>
// CHECK: %[[B1:.*]] = memref.load %arg0[%{{.*}}, %{{.*}}] : memref<3x3xf64>
// CHECK: %[[B2:.*]] = memref.load %arg0[%{{.*}}, %{{.*}}] : memref<3x3xf64>
// CHECK-NOT: memref.load %arg0
// CHECK: %[[S:.*]] = arith.mulf %[[A0]]
// CHECK: memref.store %[[S]], %[[PARAMS]][%{{.*}}] : memref<?xf64>
// Parameters 1..9 are w[0, 0] .. w[2, 2]: one loop.
// CHECK: %[[N:.*]] = arith.constant 9 : index
// CHECK-NEXT: arith.constant 1 : index
// CHECK-NEXT: scf.for %[[T:.*]] = %{{.*}} to %[[N]] step
// CHECK: arith.remui %[[T]]
// CHECK: arith.divui %[[T]]
// CHECK: %[[V:.*]] = memref.load %arg0[%{{.*}}, %{{.*}}] : memref<3x3xf64>
// CHECK: %[[ONE:.*]] = arith.constant 1 : index
// CHECK: %[[K:.*]] = arith.addi %[[T]], %[[ONE]] : index
// CHECK: memref.store %[[V]], %[[PARAMS]][%[[K]]] : memref<?xf64>
// CHECK: }
// U2(w[1, 2], w[1, 1]): two scalar copies.
// CHECK: memref.store %[[B2]], %[[PARAMS]]
// CHECK: memref.store %[[B1]], %[[PARAMS]]
// CHECK: call @layers.quantum(

// CHECK-LABEL: func.func private @layers.quantum(
// CHECK-NOT: memref.load %arg0
// CHECK: quantum.device_acquire
// CHECK-NOT: memref.load %arg0
// CHECK: quantum.device_release

// -----

// The same from a buffer computed inside the QNode (np.sin(x) by a loop): a loop when
// nothing writes the buffer between the group's loads and its last copy (@settled), the
// per-element copies when something does (@rewritten: the values the gates saw differ
// from the buffer's contents at the end).

func.func private @settled(%x: memref<8xf64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %w0 = arith.constant 0 : i64
  %buf = memref.alloc() : memref<8xf64>
  scf.for %i = %c0 to %c8 step %c1 {
    %xi = memref.load %x[%i] : memref<8xf64>
    %si = math.sin %xi : f64
    memref.store %si, %buf[%i] : memref<8xf64>
  }
  %b0 = memref.load %buf[%c0] : memref<8xf64>
  %b1 = memref.load %buf[%c1] : memref<8xf64>
  %b2 = memref.load %buf[%c2] : memref<8xf64>
  %b3 = memref.load %buf[%c3] : memref<8xf64>
  %b4 = memref.load %buf[%c4] : memref<8xf64>
  %b5 = memref.load %buf[%c5] : memref<8xf64>
  %b6 = memref.load %buf[%c6] : memref<8xf64>
  %b7 = memref.load %buf[%c7] : memref<8xf64>
  "quantum.device_acquire"() {num_qubits = 1 : i64} : () -> ()
  "quantum.gate"(%b0, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b1, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b2, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b3, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b4, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b5, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b6, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b7, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  memref.dealloc %buf : memref<8xf64>
  return
}

func.func private @rewritten(%x: memref<8xf64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %w0 = arith.constant 0 : i64
  %buf = memref.alloc() : memref<8xf64>
  scf.for %i = %c0 to %c8 step %c1 {
    %xi = memref.load %x[%i] : memref<8xf64>
    memref.store %xi, %buf[%i] : memref<8xf64>
  }
  %b0 = memref.load %buf[%c0] : memref<8xf64>
  %b1 = memref.load %buf[%c1] : memref<8xf64>
  %b2 = memref.load %buf[%c2] : memref<8xf64>
  %b3 = memref.load %buf[%c3] : memref<8xf64>
  %b4 = memref.load %buf[%c4] : memref<8xf64>
  %b5 = memref.load %buf[%c5] : memref<8xf64>
  %b6 = memref.load %buf[%c6] : memref<8xf64>
  %b7 = memref.load %buf[%c7] : memref<8xf64>
  "quantum.device_acquire"() {num_qubits = 1 : i64} : () -> ()
  "quantum.gate"(%b0, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b1, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b2, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b3, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  // The buffer changes after four of the group's loads were read.
  memref.store %b0, %buf[%c5] : memref<8xf64>
  "quantum.gate"(%b4, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b5, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b6, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  "quantum.gate"(%b7, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  %obs = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %e = "quantum.expval"(%obs) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  memref.dealloc %buf : memref<8xf64>
  return
}

func.func @grad(%x: memref<8xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<8xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @settled, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<8xf64>, memref<f64>, memref<f64>, memref<8xf64>) -> ()
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @rewritten, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<8xf64>, memref<f64>, memref<f64>, memref<8xf64>) -> ()
  return
}

// CHECK-LABEL: func.func private @settled(
// CHECK: %[[PARAMS:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<?xf64>
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<8xf64>
// CHECK: scf.for
// CHECK: math.sin
// CHECK: }
// CHECK-NOT: memref.load %[[BUF]]
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT: %[[V:.*]] = memref.load %[[BUF]][%[[T]]] : memref<8xf64>
// CHECK-NEXT: memref.store %[[V]], %[[PARAMS]][%[[T]]] : memref<?xf64>
// CHECK: memref.dealloc %[[BUF]]
// CHECK: call @settled.quantum(

// CHECK-LABEL: func.func private @rewritten(
// CHECK: %[[PARAMS:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<?xf64>
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<8xf64>
// CHECK: scf.for
// CHECK: }
// CHECK: %[[B0:.*]] = memref.load %[[BUF]]
// CHECK-COUNT-7: memref.load %[[BUF]]
// CHECK-NOT: scf.for
// CHECK: memref.store %[[B0]], %[[PARAMS]]
// CHECK: memref.store %[[B0]], %[[BUF]]
// CHECK-NOT: scf.for
// CHECK: call @rewritten.quantum(

// -----

// A Hamiltonian whose coefficients are computed from the inputs (cofactor.diff_coeffs):
// its two coefficients are parameters 1 and 2, after the gate's. The preprocessing
// stores them into params, the quantum part reads them back into a buffer of its own.

func.func private @ham(%x: memref<2xf64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w0 = arith.constant 0 : i64
  %coeffs = memref.alloca() : memref<2xf64>
  "quantum.device_acquire"() {num_qubits = 1 : i64} : () -> ()
  %x0 = memref.load %x[%c0] : memref<2xf64>
  %x1 = memref.load %x[%c1] : memref<2xf64>
  "quantum.gate"(%x0, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  %sq = arith.mulf %x1, %x1 : f64
  memref.store %sq, %coeffs[%c0] : memref<2xf64>
  memref.store %x0, %coeffs[%c1] : memref<2xf64>
  %z = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %xo = "quantum.obs_named"(%w0) {kind = "PauliX"} : (i64) -> !quantum.obs
  %h = "quantum.obs_hamiltonian"(%coeffs, %z, %xo) {cofactor.diff_coeffs}
      : (memref<2xf64>, !quantum.obs, !quantum.obs) -> !quantum.obs
  %e = "quantum.expval"(%h) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}
func.func @grad(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<2xf64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @ham, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  return
}

// CHECK-LABEL: func.func private @ham(
// CHECK: %[[PARAMS:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<?xf64>
// CHECK: %[[COEFFS:.*]] = memref.alloca() : memref<2xf64>
// CHECK: memref.store %{{.*}}, %[[PARAMS]][%{{.*}}] : memref<?xf64>
// CHECK: %[[I1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[K0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[C0:.*]] = memref.load %[[COEFFS]][%[[K0]]] : memref<2xf64>
// CHECK-NEXT: memref.store %[[C0]], %[[PARAMS]][%[[I1]]] : memref<?xf64>
// CHECK-NEXT: %[[I2:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[K1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[C1:.*]] = memref.load %[[COEFFS]][%[[K1]]] : memref<2xf64>
// CHECK-NEXT: memref.store %[[C1]], %[[PARAMS]][%[[I2]]] : memref<?xf64>
// CHECK-NOT: quantum.
// CHECK: call @ham.quantum(
// CHECK-LABEL: func.func private @ham.pcount(
// CHECK: %[[N:.*]] = arith.constant 3 : index
// CHECK-NEXT: memref.store %[[N]], %arg1[] : memref<index>
// CHECK-LABEL: func.func private @ham.quantum(
// CHECK: %[[OWN:.*]] = memref.alloca() : memref<2xf64>
// CHECK: "quantum.gate"
// CHECK: %[[Q1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[V1:.*]] = memref.load %arg1[%[[Q1]]] : memref<?xf64>
// CHECK: memref.store %[[V1]], %[[OWN]][
// CHECK: %[[Q2:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[V2:.*]] = memref.load %arg1[%[[Q2]]] : memref<?xf64>
// CHECK: memref.store %[[V2]], %[[OWN]][
// CHECK-NEXT: "quantum.obs_hamiltonian"(%[[OWN]], %{{.*}}, %{{.*}}) {cofactor.diff_coeffs}

// -----

// A Hamiltonian with differentiated coefficients inside a tensor product would lose the
// coefficients' derivatives: an error.

func.func private @bad(%x: memref<f64>, %out: memref<f64>)
    attributes {cofactor.qnode, cofactor.num_inputs = 1 : i64} {
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  %coeffs = memref.alloca() : memref<1xf64>
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  %z = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
  %y = "quantum.obs_named"(%w1) {kind = "PauliY"} : (i64) -> !quantum.obs
  // expected-error @+1 {{a Hamiltonian with differentiated coefficients can only be measured by quantum.expval, not used by quantum.obs_tensor}}
  %h = "quantum.obs_hamiltonian"(%coeffs, %z) {cofactor.diff_coeffs} : (memref<1xf64>, !quantum.obs) -> !quantum.obs
  %t = "quantum.obs_tensor"(%h, %y) : (!quantum.obs, !quantum.obs) -> !quantum.obs
  %e = "quantum.expval"(%t) : (!quantum.obs) -> f64
  memref.store %e, %out[] : memref<f64>
  "quantum.device_release"() : () -> ()
  return
}
func.func @grad(%x: memref<f64>, %out: memref<f64>, %ct: memref<f64>, %dx: memref<f64>) {
  "gradient.vjp"(%x, %out, %ct, %dx) {callee = @bad, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<f64>, memref<f64>, memref<f64>, memref<f64>) -> ()
  return
}
