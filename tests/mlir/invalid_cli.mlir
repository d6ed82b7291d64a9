// RUN: not cofactor-opt %s --lower-quantum-to-runtime 2>&1 | FileCheck %s

// What the compiler driver sees when the frontend emits a bad op: a non-zero exit and
// a message with the location, the op and the reason.

// CHECK: invalid_cli.mlir:[[# @LINE + 3]]:3: error: 'quantum.gate' op gate 'RX' takes 1 parameter(s), got num_params = 0
func.func @bad(%w: i64) {
  %c = arith.constant 1 : i64
  "quantum.gate"(%w) {gate = "RX", num_params = 0 : i64, num_wires = 1 : i64} : (i64) -> ()
  return
}
