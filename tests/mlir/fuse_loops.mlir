// RUN: cofactor-opt %s --cofactor-fuse-loops --split-input-file | FileCheck %s

// sum(tanh(W @ x)**2) as the frontend traces it: a matrix-vector loop nest, then a
// tanh, a square and a sum loop, with a buffer between each two. The three loops of
// one depth become one loop and their two buffers values; the matrix-vector product
// (a nested loop) keeps its loop and its buffer.

// CHECK-LABEL: func.func @tanh_layer(
// CHECK: %[[Y:.*]] = memref.alloc() : memref<8xf64>
// CHECK-NOT: memref.alloc
// CHECK: scf.for %[[I:.*]] =
// CHECK:   %[[DOT:.*]] = scf.for {{.*}} -> (f64) {
// CHECK:   memref.store %[[DOT]], %[[Y]][%[[I]]] : memref<8xf64>
// CHECK: %[[SUM:.*]] = scf.for %[[K:.*]] = {{.*}} iter_args(%[[ACC:.*]] = {{.*}}) -> (f64) {
// CHECK-NEXT:   %[[V:.*]] = memref.load %[[Y]][%[[K]]] : memref<8xf64>
// CHECK-NEXT:   %[[T:.*]] = math.tanh %[[V]] : f64
// CHECK-NEXT:   %[[SQ:.*]] = arith.mulf %[[T]], %[[T]] : f64
// CHECK-NEXT:   %[[NEXT:.*]] = arith.addf %[[ACC]], %[[SQ]] : f64
// CHECK-NEXT:   scf.yield %[[NEXT]] : f64
// CHECK-NEXT: }
// CHECK-NOT: scf.for
// CHECK: memref.store %[[SUM]], %{{.*}}[] : memref<f64>
// CHECK-NEXT: memref.dealloc %[[Y]]
// CHECK-NOT: memref.dealloc
func.func @tanh_layer(%w: memref<8x8xf64>, %x: memref<8xf64>, %out: memref<f64>) {
  %y = memref.alloc() : memref<8xf64>
  %t = memref.alloc() : memref<8xf64>
  %s = memref.alloc() : memref<8xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %zero = arith.constant 0.0 : f64
    %dot = scf.for %j = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f64) {
      %a = memref.load %w[%i, %j] : memref<8x8xf64>
      %b = memref.load %x[%j] : memref<8xf64>
      %p = arith.mulf %a, %b : f64
      %n = arith.addf %acc, %p : f64
      scf.yield %n : f64
    }
    memref.store %dot, %y[%i] : memref<8xf64>
  }
  %d0 = arith.constant 0 : index
  %d1 = arith.constant 1 : index
  %d8 = arith.constant 8 : index
  scf.for %i = %d0 to %d8 step %d1 {
    %v = memref.load %y[%i] : memref<8xf64>
    %r = math.tanh %v : f64
    memref.store %r, %t[%i] : memref<8xf64>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %t[%i] : memref<8xf64>
    %r = arith.mulf %v, %v : f64
    memref.store %r, %s[%i] : memref<8xf64>
  }
  %zero = arith.constant 0.0 : f64
  %sum = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f64) {
    %v = memref.load %s[%i] : memref<8xf64>
    %n = arith.addf %acc, %v : f64
    scf.yield %n : f64
  }
  memref.store %sum, %out[] : memref<f64>
  memref.dealloc %y : memref<8xf64>
  memref.dealloc %t : memref<8xf64>
  memref.dealloc %s : memref<8xf64>
  return
}

// -----

// The second loop reads the buffer at a shifted index (y[i+1] is written by a later
// iteration of the first loop): fusing would read it before it is written.

// CHECK-LABEL: func.func @shifted(
// CHECK-COUNT-2: scf.for
func.func @shifted(%x: memref<9xf64>, %out: memref<8xf64>) {
  %y = memref.alloc() : memref<9xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<9xf64>
    memref.store %v, %y[%i] : memref<9xf64>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %k = arith.addi %i, %c1 : index
    %v = memref.load %y[%k] : memref<9xf64>
    memref.store %v, %out[%i] : memref<8xf64>
  }
  memref.dealloc %y : memref<9xf64>
  return
}

// -----

// Both loops touch arguments, which may alias: the first writes %a, the second reads
// %b (perhaps the same memory at other positions). Kept apart.

// CHECK-LABEL: func.func @arguments(
// CHECK-COUNT-2: scf.for
func.func @arguments(%a: memref<8xf64>, %b: memref<8xf64>, %out: memref<8xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %two = arith.constant 2.0 : f64
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %two, %a[%i] : memref<8xf64>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %j = arith.subi %c7, %i : index
    %v = memref.load %b[%j] : memref<8xf64>
    memref.store %v, %out[%i] : memref<8xf64>
  }
  return
}

// -----

// A loop whose body calls a function (which may read or write anything), a loop with
// different bounds, and a first loop with results are not fused.

func.func private @effect(index)

// CHECK-LABEL: func.func @kept_apart(
// CHECK-COUNT-4: scf.for
func.func @kept_apart(%x: memref<8xf64>, %out: memref<8xf64>) -> f64 {
  %y = memref.alloc() : memref<8xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f64
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf64>
    memref.store %v, %y[%i] : memref<8xf64>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    func.call @effect(%i) : (index) -> ()
    %v = memref.load %y[%i] : memref<8xf64>
    memref.store %v, %out[%i] : memref<8xf64>
  }
  %s = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f64) {
    %v = memref.load %y[%i] : memref<8xf64>
    %n = arith.addf %acc, %v : f64
    scf.yield %n : f64
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %y[%i] : memref<8xf64>
    memref.store %v, %out[%i] : memref<8xf64>
  }
  memref.dealloc %y : memref<8xf64>
  return %s : f64
}

// -----

// Loops with nested loops are not fused (FuseLoops.cpp says why), even elementwise
// ops on a matrix.

// CHECK-LABEL: func.func @matrix(
// CHECK: memref.alloc
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
func.func @matrix(%x: memref<4x4xf64>, %out: memref<f64>) {
  %y = memref.alloc() : memref<4x4xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f64
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<4x4xf64>
      %e = math.exp %v : f64
      memref.store %e, %y[%i, %j] : memref<4x4xf64>
    }
  }
  %s = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f64) {
    %r = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %acc) -> (f64) {
      %v = memref.load %y[%i, %j] : memref<4x4xf64>
      %d = arith.mulf %v, %v : f64
      %n = arith.addf %a, %d : f64
      scf.yield %n : f64
    }
    scf.yield %r : f64
  }
  memref.store %s, %out[] : memref<f64>
  memref.dealloc %y : memref<4x4xf64>
  return
}

// -----

// A buffer written at y[i, j] and read at y[j, i] (a transpose): no index position
// holds the loop's variable in every access, so the loops stay apart.

// CHECK-LABEL: func.func @transposed(
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
func.func @transposed(%x: memref<4x4xf64>, %out: memref<f64>) {
  %y = memref.alloc() : memref<4x4xf64>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f64
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.load %x[%i, %j] : memref<4x4xf64>
      memref.store %v, %y[%i, %j] : memref<4x4xf64>
    }
  }
  %s = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f64) {
    %r = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %acc) -> (f64) {
      %v = memref.load %y[%j, %i] : memref<4x4xf64>
      %w = memref.load %x[%i, %j] : memref<4x4xf64>
      %d = arith.mulf %v, %w : f64
      %n = arith.addf %a, %d : f64
      scf.yield %n : f64
    }
    scf.yield %r : f64
  }
  memref.store %s, %out[] : memref<f64>
  memref.dealloc %y : memref<4x4xf64>
  return
}
