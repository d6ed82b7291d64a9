// RUN: cofactor-opt %s --cofactor-custom-gradients --lower-gradient-ops \
// RUN:   --convert-scf-to-cf --convert-arith-to-llvm --convert-memref-to-llvm \
// RUN:   --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   --cofactor-emit-enzyme-glue | FileCheck %s

// --cofactor-emit-enzyme-glue, on the LLVM dialect: the custom gradient of @g is
// registered on its C interface, its callers are rerouted there, and the vjp call
// becomes an __enzyme_autodiff call with expanded memref descriptors.

// CHECK: llvm.mlir.global linkonce @enzyme_const(0 : i8) : i8

func.func private @g(memref<2xf64>, memref<f64>)
    attributes {cofactor.num_inputs = 1 : i64, cofactor.vjp = @g_vjp}
func.func private @g_vjp(memref<2xf64>, memref<f64>, memref<2xf64>)

// Calls of @g (expanded ABI) now go to _mlir_ciface_g (descriptors by pointer, built in
// stack slots at the caller's entry).
// CHECK-LABEL: llvm.func @f(
// CHECK: %[[D0:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr<f64>, ptr<f64>, i64, array<1 x i64>, array<1 x i64>)>
// CHECK: %[[D1:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr<f64>, ptr<f64>, i64)>
// CHECK: llvm.call @_mlir_ciface_g(%[[D0]], %[[D1]])
// CHECK-NOT: llvm.call @g(
// CHECK: llvm.return
func.func private @f(%x: memref<2xf64>, %s: memref<f64>, %out: memref<f64>)
    attributes {cofactor.num_inputs = 2 : i64} {
  func.call @g(%x, %out) : (memref<2xf64>, memref<f64>) -> ()
  return
}

// A purely classical function: its constant input s is marked enzyme_const.
func.func private @h(%x: memref<2xf64>, %s: memref<f64>, %out: memref<f64>)
    attributes {cofactor.num_inputs = 2 : i64} {
  %c0 = arith.constant 0 : index
  %x0 = memref.load %x[%c0] : memref<2xf64>
  %sv = memref.load %s[] : memref<f64>
  %p = arith.mulf %x0, %sv : f64
  memref.store %p, %out[] : memref<f64>
  return
}

// x differentiated: (alloc, d_alloc, aligned, d_aligned, offset, size, stride);
// s constant: (enzyme_const, alloc, enzyme_const, aligned, offset);
// out: (alloc, cout_alloc, aligned, cout_aligned, offset).
// Through @f, which calls a custom gradient, s is duplicated with a zeroed scratch
// shadow instead: Enzyme aborts on constant arguments of nested custom gradients.
// CHECK-LABEL: llvm.func @grad(
// CHECK-SAME: %[[XA:arg0]]: !llvm.ptr<f64>, %[[XP:arg1]]: !llvm.ptr<f64>, %[[XO:arg2]]: i64, %[[XS:arg3]]: i64, %[[XT:arg4]]: i64,
// CHECK-SAME: %[[SA:arg5]]: !llvm.ptr<f64>, %[[SP:arg6]]: !llvm.ptr<f64>, %[[SO:arg7]]: i64,
// CHECK-SAME: %[[OA:arg8]]: !llvm.ptr<f64>, %[[OP:arg9]]: !llvm.ptr<f64>, %[[OO:arg10]]: i64,
// CHECK-SAME: %[[CA:arg11]]: !llvm.ptr<f64>, %[[CP:arg12]]: !llvm.ptr<f64>, %{{arg13}}: i64,
// CHECK-SAME: %[[DA:arg14]]: !llvm.ptr<f64>, %[[DP:arg15]]: !llvm.ptr<f64>,
// CHECK: %[[RAW:.*]] = llvm.call @malloc(
// CHECK: %[[SCRATCH:.*]] = llvm.bitcast %[[RAW]] : !llvm.ptr<i8> to !llvm.ptr<f64>
// CHECK: llvm.store %{{.*}}, %[[SCRATCH]] : !llvm.ptr<f64>
// CHECK: %[[F:.*]] = llvm.mlir.addressof @f
// CHECK: %[[F8:.*]] = llvm.bitcast %[[F]] {{.*}} to !llvm.ptr<i8>
// CHECK: llvm.call @__enzyme_autodiff_0(%[[F8]], %[[XA]], %[[DA]], %[[XP]], %[[DP]], %[[XO]], %[[XS]], %[[XT]], %[[SA]], %[[SCRATCH]], %[[SP]], %[[SCRATCH]], %[[SO]], %[[OA]], %[[CA]], %[[OP]], %[[CP]], %[[OO]])
// CHECK: llvm.call @free(%[[RAW]])
// CHECK: %[[H:.*]] = llvm.mlir.addressof @h
// CHECK: %[[H8:.*]] = llvm.bitcast %[[H]] {{.*}} to !llvm.ptr<i8>
// CHECK: %[[C:.*]] = llvm.mlir.addressof @enzyme_const : !llvm.ptr<i8>
// CHECK: llvm.call @__enzyme_autodiff_1(%[[H8]], %[[XA]], %[[DA]], %[[XP]], %[[DP]], %[[XO]], %[[XS]], %[[XT]], %[[C]], %[[SA]], %[[C]], %[[SP]], %[[SO]], %[[OA]], %[[CA]], %[[OP]], %[[CP]], %[[OO]])
// CHECK-NOT: __cofactor_vjp
func.func @grad(%x: memref<2xf64>, %s: memref<f64>, %out: memref<f64>, %ct: memref<f64>,
                %dx: memref<2xf64>) {
  "gradient.vjp"(%x, %s, %out, %ct, %dx) {callee = @f, num_inputs = 2 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<2xf64>, memref<f64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  "gradient.vjp"(%x, %s, %out, %ct, %dx) {callee = @h, num_inputs = 2 : i64,
      num_outputs = 1 : i64, diff_inputs = [0]}
      : (memref<2xf64>, memref<f64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
  return
}

// The augmented forward returns the tape handle as a pointer; the reverse takes it last.
// CHECK-LABEL: llvm.func @g.aug(
// CHECK-SAME: %[[A0:.*]]: !llvm.ptr<struct<(ptr<f64>, ptr<f64>, i64, array<1 x i64>, array<1 x i64>)>>, %[[A1:.*]]: !llvm.ptr<struct<(ptr<f64>, ptr<f64>, i64, array<1 x i64>, array<1 x i64>)>>, %[[A2:.*]]: !llvm.ptr<struct<(ptr<f64>, ptr<f64>, i64)>>, %[[A3:.*]]: !llvm.ptr<struct<(ptr<f64>, ptr<f64>, i64)>>) -> !llvm.ptr<i8>
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: %[[H:.*]] = llvm.call @_mlir_ciface_g.fwd_impl(%[[A0]], %[[A1]], %[[A2]], %[[A3]])
// CHECK: %[[T:.*]] = llvm.inttoptr %[[H]] : i64 to !llvm.ptr<i8>
// CHECK: llvm.return %[[T]]
// CHECK-LABEL: llvm.func @g.rev(
// CHECK-SAME: %{{.*}}: !llvm.ptr<i8>)
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: %[[H2:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<i8> to i64
// CHECK: llvm.call @_mlir_ciface_g.rev_impl(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[H2]])

// CHECK-LABEL: llvm.mlir.global external @__enzyme_register_gradient_g() : !llvm.array<3 x ptr<i8>>
// CHECK: llvm.mlir.addressof @_mlir_ciface_g
// CHECK: llvm.mlir.addressof @g.aug
// CHECK: llvm.mlir.addressof @g.rev

// CHECK: llvm.func @__enzyme_autodiff_0(!llvm.ptr<i8>, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, i64, i64, i64, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, i64, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, i64)
// CHECK: llvm.func @__enzyme_autodiff_1(!llvm.ptr<i8>, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, i64, i64, i64, !llvm.ptr<i8>, !llvm.ptr<f64>, !llvm.ptr<i8>, !llvm.ptr<f64>, i64, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, !llvm.ptr<f64>, i64)

// Runtime functions are inactive.
// CHECK: llvm.mlir.global external @__enzyme_inactivefn_cf_rt_tape_save()
// CHECK: llvm.mlir.addressof @cf_rt_tape_save
