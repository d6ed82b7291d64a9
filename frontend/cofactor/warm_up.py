"""Two small modules the preload thread compiles before the program's first compile.

The first compile of a process costs more than later ones of the same module (the compiled
tanh(W x) gradient: ~30 against ~20 ms of CPU on a quiet machine; the 4-qubit circuit of
benchmark section 1: ~8 ms of its ~24): the code and data of LLVM, MLIR, lld and the Enzyme
plugin that the compile touches are not yet in the caches and TLBs, their lazily bound
calls are resolved, and lazily built tables (pass registries, target information, Enzyme's
tables of known functions) are built on first use. Compiling modules that touch the same
code paths in the background, while the program still imports (`import cofactor` alone
takes hundreds of milliseconds), moves that cost out of the first real compile.

`CIRCUIT` is a circuit and its gradient (cofactor's quantum passes, the direct QNode
gradient, code generation at -O0, as for circuits and their gradients); `CLASSICAL` is a
gradient of classical loops (Enzyme, the optimization pipeline after it, code generation at
-O2). The texts are in the traced modules' form (`cofactor.ir.printer`, lines wrapped); a
change of the frontend's IR that they no longer follow would only make the warm-up fail
quietly (`native_compiler.after_preload` ignores its errors), so tests/test_warm_up.py
compiles them and checks the gradient of `CLASSICAL`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

CIRCUIT = """builtin.module {
  func.func @warm_up_circuit(%0: memref<2xf64>, %1: memref<f64>) attributes {cofactor.qnode,
      cofactor.diff_method = "adjoint", cofactor.num_inputs = 1 : i64} {
    "quantum.device_acquire"() {num_qubits = 2 : i64, shots = 0 : i64, seed = -1 : i64} : () -> ()
    %2 = arith.constant 0 : index
    %3 = arith.constant 1 : index
    %4 = memref.load %0[%2] : memref<2xf64>
    %5 = memref.load %0[%3] : memref<2xf64>
    %6 = arith.constant 0 : i64
    %7 = arith.constant 1 : i64
    "quantum.gate"(%4, %6) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64}
      : (f64, i64) -> ()
    "quantum.gate"(%5, %7) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64}
      : (f64, i64) -> ()
    "quantum.gate"(%6, %7) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64}
      : (i64, i64) -> ()
    %8 = "quantum.obs_named"(%6) {kind = "PauliZ"} : (i64) -> !quantum.obs
    %9 = "quantum.expval"(%8) : (!quantum.obs) -> f64
    memref.store %9, %1[] : memref<f64>
    "quantum.device_release"() : () -> ()
    func.return
  }
  func.func private @warm_up_circuit_primal(%0: memref<2xf64>, %1: memref<f64>)
      attributes {cofactor.num_inputs = 1 : i64} {
    %2 = memref.alloc() : memref<f64>
    func.call @warm_up_circuit(%0, %2) : (memref<2xf64>, memref<f64>) -> ()
    "memref.copy"(%2, %1) : (memref<f64>, memref<f64>) -> ()
    memref.dealloc %2 : memref<f64>
    func.return
  }
  func.func @warm_up_circuit_grad(%0: memref<2xf64>, %1: memref<2xf64>)
      attributes {llvm.emit_c_interface} {
    %2 = memref.alloc() : memref<f64>
    %3 = memref.alloc() : memref<f64>
    %4 = arith.constant 1.000000e+00 : f64
    memref.store %4, %3[] : memref<f64>
    %5 = arith.constant 0.000000e+00 : f64
    %6 = arith.constant 0 : index
    %7 = arith.constant 1 : index
    memref.store %5, %1[%6] : memref<2xf64>
    memref.store %5, %1[%7] : memref<2xf64>
    "gradient.vjp"(%0, %2, %3, %1) {callee = @warm_up_circuit_primal, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0 : i64]}
      : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
    memref.dealloc %3 : memref<f64>
    memref.dealloc %2 : memref<f64>
    func.return
  }
}
"""

CLASSICAL = """builtin.module {
  func.func private @warm_up_loss(%0: memref<8x8xf64>, %1: memref<f64>)
      attributes {cofactor.num_inputs = 1 : i64} {
    %2 = memref.alloc() : memref<8xf64>
    %3 = arith.constant 0 : index
    %4 = arith.constant 1 : index
    %5 = arith.constant 8 : index
    %6 = arith.constant 0.000000e+00 : f64
    scf.for %7 = %3 to %5 step %4 {
      %8 = scf.for %9 = %3 to %5 step %4 iter_args(%10 = %6) -> (f64) {
        %11 = memref.load %0[%7, %9] : memref<8x8xf64>
        %12 = arith.mulf %11, %11 : f64
        %13 = arith.addf %10, %12 : f64
        scf.yield %13 : f64
      }
      %14 = "math.tanh"(%8) : (f64) -> f64
      memref.store %14, %2[%7] : memref<8xf64>
    }
    %15 = scf.for %16 = %3 to %5 step %4 iter_args(%17 = %6) -> (f64) {
      %18 = memref.load %2[%16] : memref<8xf64>
      %19 = arith.addf %17, %18 : f64
      scf.yield %19 : f64
    }
    memref.store %15, %1[] : memref<f64>
    memref.dealloc %2 : memref<8xf64>
    func.return
  }
  func.func @warm_up_loss_grad(%0: memref<8x8xf64>, %1: memref<8x8xf64>)
      attributes {llvm.emit_c_interface} {
    %2 = memref.alloc() : memref<f64>
    %3 = memref.alloc() : memref<f64>
    %4 = arith.constant 1.000000e+00 : f64
    memref.store %4, %3[] : memref<f64>
    %5 = arith.constant 0.000000e+00 : f64
    %6 = arith.constant 0 : index
    %7 = arith.constant 1 : index
    %8 = arith.constant 8 : index
    scf.for %9 = %6 to %8 step %7 {
      scf.for %10 = %6 to %8 step %7 {
        memref.store %5, %1[%9, %10] : memref<8x8xf64>
      }
    }
    "gradient.vjp"(%0, %2, %3, %1) {callee = @warm_up_loss, num_inputs = 1 : i64,
      num_outputs = 1 : i64, diff_inputs = [0 : i64]}
      : (memref<8x8xf64>, memref<f64>, memref<f64>, memref<8x8xf64>) -> ()
    memref.dealloc %3 : memref<f64>
    memref.dealloc %2 : memref<f64>
    func.return
  }
}
"""


def compile_all(compile_to: Callable[[str, Path], object], with_enzyme: bool) -> None:
    """Compile CIRCUIT, and CLASSICAL when `with_enzyme`, with `compile_to(text, output)`,
    into a temporary folder removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="cofactor-warm-up-"))
    try:
        for number, text in enumerate((CIRCUIT, CLASSICAL) if with_enzyme else (CIRCUIT,)):
            compile_to(text, folder / f"libwarm_up_{number}.so")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
