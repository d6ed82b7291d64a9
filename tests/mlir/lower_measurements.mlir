// RUN: cofactor-opt %s --lower-quantum-to-runtime | FileCheck %s

// CHECK-DAG: func.func private @cf_rt_probs(!llvm.ptr<f64>, !llvm.ptr<i64>, i64)
// CHECK-DAG: func.func private @cf_rt_state(!llvm.ptr<f64>)
// CHECK-DAG: func.func private @cf_rt_sample(!llvm.ptr<i64>, !llvm.ptr<i64>, i64)
// CHECK-DAG: func.func private @cf_rt_counts(!llvm.ptr<i64>, !llvm.ptr<i64>, i64)
// CHECK-DAG: func.func private @cf_rt_measure(i64, i8, i64) -> i8

// CHECK-LABEL: func.func @measurements(
func.func @measurements(%probs: memref<4xf64>, %all: memref<?xf64>, %state: memref<4x2xf64>,
                        %samples: memref<10x1xi64>, %counts: memref<2xi64>) -> (i1, i1) {
  %w0 = arith.constant 0 : i64
  %w1 = arith.constant 1 : i64
  // CHECK: %[[TWO:.*]] = arith.constant 2 : i64
  // CHECK: call @cf_rt_probs(%{{.*}}, %{{.*}}, %[[TWO]])
  "quantum.probs"(%probs, %w1, %w0) : (memref<4xf64>, i64, i64) -> ()
  // No wires: all of them, a null wire list.
  // CHECK: %[[NOWIRES:.*]] = llvm.mlir.null : !llvm.ptr<i64>
  // CHECK: %[[ZERO:.*]] = arith.constant 0 : i64
  // CHECK: call @cf_rt_probs(%{{.*}}, %[[NOWIRES]], %[[ZERO]])
  "quantum.probs"(%all) : (memref<?xf64>) -> ()
  // CHECK: builtin.unrealized_conversion_cast %{{.*}} : memref<4x2xf64> to !llvm.struct<(ptr<f64>, ptr<f64>, i64, array<2 x i64>, array<2 x i64>)>
  // CHECK: call @cf_rt_state(%{{.*}}) : (!llvm.ptr<f64>) -> ()
  "quantum.state"(%state) : (memref<4x2xf64>) -> ()
  // CHECK: call @cf_rt_sample(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr<i64>, !llvm.ptr<i64>, i64) -> ()
  "quantum.sample"(%samples, %w1) : (memref<10x1xi64>, i64) -> ()
  // CHECK: call @cf_rt_counts(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr<i64>, !llvm.ptr<i64>, i64) -> ()
  "quantum.counts"(%counts, %w0) : (memref<2xi64>, i64) -> ()

  // CHECK: %[[RESET:.*]] = arith.constant 1 : i8
  // CHECK: %[[POST:.*]] = arith.constant -1 : i64
  // CHECK: %[[M:.*]] = call @cf_rt_measure(%{{.*}}, %[[RESET]], %[[POST]]) : (i64, i8, i64) -> i8
  // CHECK: %[[Z8:.*]] = arith.constant 0 : i8
  // CHECK: %[[B:.*]] = arith.cmpi ne, %[[M]], %[[Z8]] : i8
  %m = "quantum.measure"(%w0) {reset = true, postselect = -1 : i64} : (i64) -> i1
  // Defaults: no reset, no postselection.
  // CHECK: %[[NORESET:.*]] = arith.constant 0 : i8
  // CHECK: %[[NOPOST:.*]] = arith.constant -1 : i64
  // CHECK: call @cf_rt_measure(%{{.*}}, %[[NORESET]], %[[NOPOST]])
  // CHECK: %[[B2:.*]] = arith.cmpi ne
  %m2 = "quantum.measure"(%w1) : (i64) -> i1
  // CHECK: return %[[B]], %[[B2]] : i1, i1
  return %m, %m2 : i1, i1
}
