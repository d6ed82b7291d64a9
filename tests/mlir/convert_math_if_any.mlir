// RUN: cofactor-opt %s --split-input-file --cofactor-convert-math-if-any | FileCheck %s

// --cofactor-convert-math-if-any is convert-math-to-llvm,convert-math-to-libm on a module
// with a math op (compiler/Lowering.cpp runs it in their place)...

// CHECK: func.func private @tanh(f64) -> f64
// CHECK-LABEL: func.func @with_math(
// CHECK: llvm.intr.exp
// CHECK: call @tanh
func.func @with_math(%x: f64) -> f64 {
  %e = math.exp %x : f64
  %t = math.tanh %e : f64
  return %t : f64
}

// -----

// ... and leaves a module without one as it is (no walk of a conversion, no greedy
// rewrite: the foldable add below stays; LLVM's optimizer folds it later either way).
// CHECK-LABEL: func.func @without_math(
// CHECK: %[[A:.*]] = arith.constant 1 : i64
// CHECK: %[[B:.*]] = arith.constant 2 : i64
// CHECK: %[[S:.*]] = arith.addi %[[A]], %[[B]] : i64
// CHECK: return %[[S]] : i64
func.func @without_math() -> i64 {
  %a = arith.constant 1 : i64
  %b = arith.constant 2 : i64
  %s = arith.addi %a, %b : i64
  return %s : i64
}
