// RUN: cofactor-opt %s --canonicalize --cse --convert-scf-to-cf --convert-math-to-llvm \
// RUN:   --convert-arith-to-llvm --convert-memref-to-llvm --convert-func-to-llvm \
// RUN:   --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | FileCheck %s
// RUN: cofactor-opt %s --lower-quantum-to-runtime | FileCheck %s --check-prefix=NOOP

// cofactor-opt itself: upstream func/arith/math/memref/scf code (what the frontend
// prints for classical code) through the standard lowering to the LLVM dialect. Our
// pass leaves a module without quantum ops alone.

// CHECK-LABEL: llvm.func @sum_of_cosines(
// CHECK: llvm.intr.cos
// CHECK: llvm.fadd
// CHECK-LABEL: llvm.func @_mlir_ciface_sum_of_cosines(
// CHECK-NOT: builtin.unrealized_conversion_cast
// CHECK-NOT: scf.
// CHECK-NOT: memref.

// NOOP-NOT: cf_rt_
// NOOP-LABEL: func.func @sum_of_cosines(
// NOOP: scf.for
func.func @sum_of_cosines(%x: memref<?xf64>, %out: memref<f64>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %n = memref.dim %x, %c0 : memref<?xf64>
  %tmp = memref.alloc(%n) : memref<?xf64>
  %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f64) {
    %v = memref.load %x[%i] : memref<?xf64>
    %c = math.cos %v : f64
    memref.store %c, %tmp[%i] : memref<?xf64>
    %next = arith.addf %acc, %c : f64
    scf.yield %next : f64
  }
  memref.dealloc %tmp : memref<?xf64>
  memref.store %sum, %out[] : memref<f64>
  return
}
