// RUN: cofactor-opt %s --lower-quantum-to-runtime=gate-table-min=0 --convert-scf-to-cf \
// RUN:   --convert-math-to-llvm --convert-arith-to-llvm --convert-memref-to-llvm \
// RUN:   --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-translate --mlir-to-llvmir | FileCheck %s

// A module exactly as xDSL prints it from the frontend's encoding
// (frontend/cofactor/ir/builder.py: quantum_attrs): `builtin.module`, numbered values,
// BoolAttr flags, a UnitAttr flag, i64 ArrayAttr ctrl_values (possibly empty).

// CHECK: call i64 @cf_rt_device_acquire(i64 2, i64 0, i64 -1)
// CHECK: call void @cf_rt_gate(i64 8, ptr %{{.*}}, i64 1, ptr %{{.*}}, i64 1, i8 1, ptr %{{.*}}, ptr %{{.*}}, i64 1)
// CHECK: call void @cf_rt_gate(i64 1, ptr null, i64 0, ptr %{{.*}}, i64 1, i8 1, ptr null, ptr null, i64 0)
// CHECK: %[[OBS:.*]] = call i64 @cf_rt_obs_named(i64 3, i64 0)
// CHECK: call double @cf_rt_expval(i64 %[[OBS]])
// CHECK: call i8 @cf_rt_measure(i64 1, i8 0, i64 -1)
// CHECK: call void @cf_rt_device_release()
builtin.module {
  func.func @circuit(%0: f64) -> f64 {
    %1 = arith.constant 0 : i64
    %2 = arith.constant 1 : i64
    "quantum.device_acquire"() {num_qubits = 2 : i64, shots = 0 : i64, seed = -1 : i64} : () -> ()
    "quantum.gate"(%0, %1, %2) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64, adjoint = true, ctrl_values = [1 : i64]} : (f64, i64, i64) -> ()
    "quantum.gate"(%1) {gate = "Hadamard", num_params = 0 : i64, num_wires = 1 : i64, adjoint, ctrl_values = []} : (i64) -> ()
    %3 = "quantum.obs_named"(%1) {kind = "PauliZ"} : (i64) -> !quantum.obs
    %4 = "quantum.expval"(%3) : (!quantum.obs) -> f64
    %5 = "quantum.measure"(%2) {reset = false, postselect = -1 : i64} : (i64) -> i1
    "quantum.device_release"() : () -> ()
    func.return %4 : f64
  }
}
