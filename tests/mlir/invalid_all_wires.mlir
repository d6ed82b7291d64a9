// RUN: cofactor-opt %s -split-input-file -verify-diagnostics

// A measurement of all wires writes as many entries as the acquired device has: a buffer
// of another static size is refused (issue 11, D3: a 0-wire device was acquired with one
// qubit while its state buffer held one amplitude, and the runtime wrote past it).

func.func @state_of_zero_qubits_into_two_amplitudes(%out: memref<2x2xf64>) {
  "quantum.device_acquire"() {num_qubits = 0 : i64} : () -> ()
  // expected-error @+1 {{state of all wires of a device with 0 qubit(s) needs 1 entries, the buffer has 2}}
  "quantum.state"(%out) : (memref<2x2xf64>) -> ()
  "quantum.device_release"() : () -> ()
  return
}

// -----

func.func @state_too_small(%out: memref<1x2xf64>) {
  "quantum.device_acquire"() {num_qubits = 1 : i64} : () -> ()
  // expected-error @+1 {{state of all wires of a device with 1 qubit(s) needs 2 entries, the buffer has 1}}
  "quantum.state"(%out) : (memref<1x2xf64>) -> ()
  "quantum.device_release"() : () -> ()
  return
}

// -----

func.func @probs_in_a_loop(%out: memref<2xf64>, %n: index) {
  "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @+1 {{probs of all wires of a device with 2 qubit(s) needs 4 entries, the buffer has 2}}
    "quantum.probs"(%out) : (memref<2xf64>) -> ()
  }
  "quantum.device_release"() : () -> ()
  return
}

// -----

func.func @counts_of_all_wires(%out: memref<4xi64>) {
  "quantum.device_acquire"() {num_qubits = 3 : i64, shots = 10 : i64} : () -> ()
  // expected-error @+1 {{counts of all wires of a device with 3 qubit(s) needs 8 entries, the buffer has 4}}
  "quantum.counts"(%out) : (memref<4xi64>) -> ()
  "quantum.device_release"() : () -> ()
  return
}

// -----

func.func @sample_of_all_wires(%out: memref<10x2xi64>) {
  "quantum.device_acquire"() {num_qubits = 3 : i64, shots = 10 : i64} : () -> ()
  // expected-error @+1 {{sample of all wires of a device with 3 qubit(s) needs 3 entries, the buffer has 2}}
  "quantum.sample"(%out) : (memref<10x2xi64>) -> ()
  "quantum.device_release"() : () -> ()
  return
}

// -----

// Sizes that match (and a probs of named wires, sized by its wires) are accepted.
func.func @matching(%s: memref<1x2xf64>, %p: memref<1xf64>) {
  "quantum.device_acquire"() {num_qubits = 0 : i64} : () -> ()
  "quantum.state"(%s) : (memref<1x2xf64>) -> ()
  "quantum.probs"(%p) : (memref<1xf64>) -> ()
  "quantum.device_release"() : () -> ()
  return
}
