// RUN: cofactor-opt %s --cofactor-convert-to-llvm --reconcile-unrealized-casts | FileCheck %s
// RUN: cofactor-opt %s --convert-scf-to-cf --convert-arith-to-llvm --convert-memref-to-llvm \
// RUN:   --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | FileCheck %s

// --cofactor-convert-to-llvm is the five upstream conversions as one (both RUN lines check
// the same output): a traced loop over a memref, its C interface, a call.

// CHECK: module attributes {llvm.data_layout = ""}
// CHECK: llvm.func @tanh(f64) -> f64
// CHECK-LABEL: llvm.func @sum_tanh(
// CHECK-SAME: %{{.*}}: !llvm.ptr<f64>, %{{.*}}: !llvm.ptr<f64>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64
// CHECK: llvm.br ^bb1
// CHECK: ^bb1(%{{.*}}: i64, %{{.*}}: f64):
// CHECK: llvm.icmp "slt"
// CHECK: llvm.cond_br
// CHECK: llvm.getelementptr
// CHECK: llvm.load
// CHECK: llvm.call @tanh(
// CHECK: llvm.fadd
// CHECK: llvm.store
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @_mlir_ciface_sum_tanh(
// CHECK: llvm.call @sum_tanh(
// CHECK-NOT: scf.
// CHECK-NOT: cf.
// CHECK-NOT: arith.
// CHECK-NOT: memref.
// CHECK-NOT: builtin.unrealized_conversion_cast
func.func private @tanh(f64) -> f64
func.func @sum_tanh(%x: memref<8xf64>, %out: memref<f64>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f64
  %sum = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f64) {
    %v = memref.load %x[%i] : memref<8xf64>
    %t = func.call @tanh(%v) : (f64) -> f64
    %next = arith.addf %acc, %t : f64
    scf.yield %next : f64
  }
  memref.store %sum, %out[] : memref<f64>
  return
}
