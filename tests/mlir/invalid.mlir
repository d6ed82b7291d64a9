// RUN: cofactor-opt %s -split-input-file -verify-diagnostics

// The verifiers: counts agree with attributes, gate names and arities agree with
// runtime/include/cofactor/gates.def, ctrl_values are 0/1, buffers have the right shape.

func.func @unknown_gate(%w: i64) {
  // expected-error @+1 {{unknown gate 'Foo' (not in runtime/include/cofactor/gates.def)}}
  "quantum.gate"(%w) {gate = "Foo", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  return
}

// -----

func.func @wrong_num_params(%t: f64, %w: i64) {
  // expected-error @+1 {{gate 'Hadamard' takes 0 parameter(s), got num_params = 1}}
  "quantum.gate"(%t, %w) {gate = "Hadamard", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()
  return
}

// -----

func.func @wrong_num_wires(%w: i64) {
  // expected-error @+1 {{gate 'CNOT' acts on 2 wire(s), got num_wires = 1}}
  "quantum.gate"(%w) {gate = "CNOT", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  return
}

// -----

func.func @multirz_needs_a_wire(%t: f64) {
  // expected-error @+1 {{gate 'MultiRZ' acts on at least 1 wire(s), got num_wires = 0}}
  "quantum.gate"(%t) {gate = "MultiRZ", num_params = 1 : i64, num_wires = 0 : i64} : (f64) -> ()
  return
}

// -----

func.func @operand_count(%t: f64, %w: i64) {
  // expected-error @+1 {{expects 3 operands (1 leading, 1 wires, 1 control wires as given by ctrl_values), got 2}}
  "quantum.gate"(%t, %w) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64, ctrl_values = [1 : i64]} : (f64, i64) -> ()
  return
}

// -----

func.func @ctrl_value_not_a_bit(%w: i64, %c: i64) {
  // expected-error @+1 {{ctrl_values entries must be 0 or 1, got 2 at index 0}}
  "quantum.gate"(%w, %c) {gate = "PauliX", num_params = 0 : i64, num_wires = 1 : i64, ctrl_values = [2 : i64]} : (i64, i64) -> ()
  return
}

// -----

func.func @wire_type(%w: i32) {
  // expected-error @+1 {{wire #0 must be i64, got 'i32'}}
  "quantum.gate"(%w) {gate = "PauliX", num_params = 0 : i64, num_wires = 1 : i64} : (i32) -> ()
  return
}

// -----

func.func @ctrl_wire_type(%w: i64, %c: index) {
  // expected-error @+1 {{control wire #0 must be i64, got 'index'}}
  "quantum.gate"(%w, %c) {gate = "PauliX", num_params = 0 : i64, num_wires = 1 : i64, ctrl_values = [1 : i64]} : (i64, index) -> ()
  return
}

// -----

func.func @param_type(%t: f32, %w: i64) {
  // expected-error @+1 {{parameter #0 must be f64, got 'f32'}}
  "quantum.gate"(%t, %w) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f32, i64) -> ()
  return
}

// -----

func.func @adjoint_type(%w: i64) {
  // expected-error @+1 {{attribute 'adjoint' failed to satisfy constraint}}
  "quantum.gate"(%w) {gate = "PauliX", num_params = 0 : i64, num_wires = 1 : i64, adjoint = 1 : i64} : (i64) -> ()
  return
}

// -----

func.func @missing_num_wires(%w: i64) {
  // expected-error @+1 {{requires attribute 'num_wires'}}
  "quantum.gate"(%w) {gate = "PauliX", num_params = 0 : i64} : (i64) -> ()
  return
}

// -----

func.func @pauli_word_length(%t: f64, %w: i64) {
  // expected-error @+1 {{word 'XY' must have one letter per wire (1)}}
  "quantum.pauli_rot"(%t, %w) {word = "XY", num_wires = 1 : i64} : (f64, i64) -> ()
  return
}

// -----

func.func @pauli_word_letters(%t: f64, %w: i64) {
  // expected-error @+1 {{word 'A' may only contain the letters I, X, Y, Z}}
  "quantum.pauli_rot"(%t, %w) {word = "A", num_wires = 1 : i64} : (f64, i64) -> ()
  return
}

// -----

func.func @unitary_size(%u: memref<2x2x2xf64>, %w0: i64, %w1: i64) {
  // expected-error @+1 {{matrix for 2 wire(s) must be 4x4x2, got 'memref<2x2x2xf64>'}}
  "quantum.unitary"(%u, %w0, %w1) {num_wires = 2 : i64} : (memref<2x2x2xf64>, i64, i64) -> ()
  return
}

// -----

func.func @unitary_layout(%u: memref<2x2x2xf64, affine_map<(d0, d1, d2) -> (d0 * 8 + d1 * 2 + d2)>>, %w0: i64) {
  // expected-error @+1 {{matrix must be a memref<DxDx2xf64> with the identity layout}}
  "quantum.unitary"(%u, %w0) {num_wires = 1 : i64} : (memref<2x2x2xf64, affine_map<(d0, d1, d2) -> (d0 * 8 + d1 * 2 + d2)>>, i64) -> ()
  return
}

// -----

func.func @obs_kind(%w: i64) {
  // expected-error @+1 {{unknown observable kind 'PauliW'}}
  %o = "quantum.obs_named"(%w) {kind = "PauliW"} : (i64) -> !quantum.obs
  return
}

// -----

func.func @hamiltonian_terms(%c: memref<3xf64>, %w: i64) {
  %o = "quantum.obs_named"(%w) {kind = "PauliZ"} : (i64) -> !quantum.obs
  // expected-error @+1 {{has 1 terms but 3 coefficients}}
  %h = "quantum.obs_hamiltonian"(%c, %o) : (memref<3xf64>, !quantum.obs) -> !quantum.obs
  return
}

// -----

func.func @empty_tensor() {
  // expected-error @+1 {{needs at least one factor}}
  %o = "quantum.obs_tensor"() : () -> !quantum.obs
  return
}

// -----

func.func @probs_size(%out: memref<2xf64>, %w0: i64, %w1: i64) {
  // expected-error @+1 {{out must have 2^2 entries, got 'memref<2xf64>'}}
  "quantum.probs"(%out, %w0, %w1) : (memref<2xf64>, i64, i64) -> ()
  return
}

// -----

func.func @state_shape(%out: memref<4xf64>) {
  // expected-error @+1 {{out must be a memref<2^nx2xf64> with the identity layout}}
  "quantum.state"(%out) : (memref<4xf64>) -> ()
  return
}

// -----

func.func @sample_columns(%out: memref<10x2xi64>, %w: i64) {
  // expected-error @+1 {{out must have one column per wire (1)}}
  "quantum.sample"(%out, %w) : (memref<10x2xi64>, i64) -> ()
  return
}

// -----

func.func @counts_type(%out: memref<2xf64>, %w: i64) {
  // expected-error @+1 {{out must be a memref<2^kxi64> with the identity layout}}
  "quantum.counts"(%out, %w) : (memref<2xf64>, i64) -> ()
  return
}

// -----

func.func @postselect(%w: i64) {
  // expected-error @+1 {{postselect must be -1 (none), 0 or 1, got 2}}
  %m = "quantum.measure"(%w) {postselect = 2 : i64} : (i64) -> i1
  return
}

// -----

func.func @measure_result(%w: i64) {
  // expected-error @+1 {{result #0 must be 1-bit signless integer}}
  %m = "quantum.measure"(%w) : (i64) -> i8
  return
}

// -----

func.func @num_qubits() {
  // expected-error @+1 {{num_qubits must be >= 0}}
  "quantum.device_acquire"() {num_qubits = -1 : i64} : () -> ()
  return
}
