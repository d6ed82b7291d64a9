// RUN: cofactor-opt %s --cofactor-fuse-loops --split-input-file | FileCheck %s

// sum(tanh(W @ x)**2) as the frontend traces it: a matrix-vector loop, then a tanh,
// a square and a sum loop, with a buffer between each two. They become one loop over
// the rows, and the buffers values.

// CHECK-LABEL: func.func @tanh_layer(
// CHECK-NOT: memref.alloc
// CHECK: %[[SUM:.*]] = scf.for %[[I:.*]] = {{.*}} iter_args(%[[ACC:.*]] = {{.*}}) -> (f64) {
// CHECK:   %[[DOT:.*]] = scf.for {{.*}} -> (f64) {
// CHECK:     memref.load %{{.*}}[%[[I]], %{{.*}}] : memref<8x8xf64>
// CHECK:   }
// CHECK-NOT: memref.load
// CHECK:   %[[T:.*]] = math.tanh %[[DOT]] : f64
// CHECK:   %[[SQ:.*]] = arith.mulf %[[T]], %[[T]] : f64
// CHECK:   %[[NEXT:.*]] = arith.addf %[[ACC]], %[[SQ]] : f64
// CHECK:   scf.yield %[[NEXT]] : f64
// CHECK: }
// CHECK-NOT: scf.for
// CHECK: memref.store %[[SUM]], %{{.*}}[] : memref<f64>
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

// Elementwise ops on a matrix and a sum: the outer loops fuse, then the inner ones
// (the buffer is indexed by the inner induction variable at its second position),
// and the buffer between them goes.

// CHECK-LABEL: func.func @matrix(
// CHECK-NOT: memref.alloc
// CHECK: scf.for {{.*}} iter_args
// CHECK-NEXT: scf.for {{.*}} iter_args
// CHECK-NEXT: memref.load %{{.*}} : memref<4x4xf64>
// CHECK-NEXT: math.exp
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: memref.store
// CHECK-NEXT: return
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
