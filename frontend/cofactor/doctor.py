"""`python -m cofactor doctor`: show the toolchain, then prove it works end to end.

The self-test compiles a tiny program through the real pipeline (cofactor-opt,
mlir-translate, opt with Enzyme, llc, the linker, ctypes) in which f(x) = g(x) * x calls an
opaque external function g(x) = sin(x), compiled separately so that Enzyme cannot see its
body, with a registered custom gradient (augmented forward + reverse, in Enzyme's calling
convention as ARCHITECTURE.md fixes it). Enzyme must then produce
df/dx = cos(x) * x + sin(x) exactly.
"""

from __future__ import annotations

import ctypes
import math
import sys
import tempfile
import time
from pathlib import Path

from cofactor import cache as disk_cache
from cofactor import compiler, toolchain
from cofactor.errors import CompileError

# g is declared only: its body lives in a separate C file. Its forward writes the output and
# returns a null tape (the reverse reads x itself, which nothing overwrites here); its
# reverse accumulates cos(x) * dout into dx, zeroes dout, and skips the update when Enzyme
# passes the primal as its own shadow.
SELFTEST_MLIR = r"""
module {
  llvm.func @selftest_g(!llvm.ptr<f64>, !llvm.ptr<f64>) attributes {passthrough = ["noinline"]}

  llvm.func @selftest_g_fwd(%x: !llvm.ptr<f64>, %dx: !llvm.ptr<f64>, %out: !llvm.ptr<f64>,
                            %dout: !llvm.ptr<f64>) -> !llvm.ptr<i8>
      attributes {passthrough = ["noinline"]} {
    llvm.call @selftest_g(%x, %out) : (!llvm.ptr<f64>, !llvm.ptr<f64>) -> ()
    %null = llvm.mlir.null : !llvm.ptr<i8>
    llvm.return %null : !llvm.ptr<i8>
  }

  llvm.func @selftest_g_rev(%x: !llvm.ptr<f64>, %dx: !llvm.ptr<f64>, %out: !llvm.ptr<f64>,
                            %dout: !llvm.ptr<f64>, %tape: !llvm.ptr<i8>)
      attributes {passthrough = ["noinline"]} {
    %same = llvm.icmp "eq" %x, %dx : !llvm.ptr<f64>
    llvm.cond_br %same, ^done, ^update
  ^update:
    %xv = llvm.load %x : !llvm.ptr<f64>
    %cos = "llvm.intr.cos"(%xv) : (f64) -> f64
    %ct = llvm.load %dout : !llvm.ptr<f64>
    %vjp = llvm.fmul %cos, %ct : f64
    %old = llvm.load %dx : !llvm.ptr<f64>
    %new = llvm.fadd %old, %vjp : f64
    llvm.store %new, %dx : !llvm.ptr<f64>
    llvm.br ^done
  ^done:
    %zero = llvm.mlir.constant(0.0 : f64) : f64
    llvm.store %zero, %dout : !llvm.ptr<f64>
    llvm.return
  }

  llvm.mlir.global external @__enzyme_register_gradient_selftest_g() : !llvm.array<3 x ptr<i8>> {
    %g = llvm.mlir.addressof @selftest_g : !llvm.ptr<func<void (ptr<f64>, ptr<f64>)>>
    %fwd = llvm.mlir.addressof @selftest_g_fwd
        : !llvm.ptr<func<ptr<i8> (ptr<f64>, ptr<f64>, ptr<f64>, ptr<f64>)>>
    %rev = llvm.mlir.addressof @selftest_g_rev
        : !llvm.ptr<func<void (ptr<f64>, ptr<f64>, ptr<f64>, ptr<f64>, ptr<i8>)>>
    %g8 = llvm.bitcast %g : !llvm.ptr<func<void (ptr<f64>, ptr<f64>)>> to !llvm.ptr<i8>
    %fwd8 = llvm.bitcast %fwd : !llvm.ptr<func<ptr<i8> (ptr<f64>, ptr<f64>, ptr<f64>, ptr<f64>)>>
        to !llvm.ptr<i8>
    %rev8 = llvm.bitcast %rev
        : !llvm.ptr<func<void (ptr<f64>, ptr<f64>, ptr<f64>, ptr<f64>, ptr<i8>)>> to !llvm.ptr<i8>
    %a = llvm.mlir.undef : !llvm.array<3 x ptr<i8>>
    %a0 = llvm.insertvalue %g8, %a[0] : !llvm.array<3 x ptr<i8>>
    %a1 = llvm.insertvalue %fwd8, %a0[1] : !llvm.array<3 x ptr<i8>>
    %a2 = llvm.insertvalue %rev8, %a1[2] : !llvm.array<3 x ptr<i8>>
    llvm.return %a2 : !llvm.array<3 x ptr<i8>>
  }

  llvm.func @selftest_f(%x: !llvm.ptr<f64>) -> f64 {
    %one = arith.constant 1 : i64
    %out = llvm.alloca %one x f64 : (i64) -> !llvm.ptr<f64>
    llvm.call @selftest_g(%x, %out) : (!llvm.ptr<f64>, !llvm.ptr<f64>) -> ()
    %gv = llvm.load %out : !llvm.ptr<f64>
    %xv = llvm.load %x : !llvm.ptr<f64>
    %r = arith.mulf %gv, %xv : f64
    llvm.return %r : f64
  }

  llvm.func @__enzyme_autodiff_selftest(!llvm.ptr<i8>, !llvm.ptr<f64>, !llvm.ptr<f64>) -> f64

  llvm.func @selftest_grad(%x: !llvm.ptr<f64>, %dx: !llvm.ptr<f64>) {
    %f = llvm.mlir.addressof @selftest_f : !llvm.ptr<func<f64 (ptr<f64>)>>
    %f8 = llvm.bitcast %f : !llvm.ptr<func<f64 (ptr<f64>)>> to !llvm.ptr<i8>
    %unused = llvm.call @__enzyme_autodiff_selftest(%f8, %x, %dx)
        : (!llvm.ptr<i8>, !llvm.ptr<f64>, !llvm.ptr<f64>) -> f64
    llvm.return
  }
}
"""

SELFTEST_C = """
#include <math.h>
void selftest_g(const double *x, double *out) { *out = sin(*x); }
"""


def selftest(x: float = 0.7) -> tuple[float, float, float]:
    """Compile and run the self-test; returns (Enzyme's derivative, exact value, seconds)."""
    with tempfile.TemporaryDirectory(prefix="cofactor-doctor-") as tmp:
        source = Path(tmp) / "selftest_g.c"
        source.write_text(SELFTEST_C)
        start = time.perf_counter()
        lib = compiler.compile_module(
            SELFTEST_MLIR, name="selftest", cache=False, link_with=(source,)
        )
        seconds = time.perf_counter() - start
        if "__enzyme_register_gradient" in lib.stage("llvmir_opt"):
            raise CompileError(
                "Enzyme did not consume the custom-gradient registration", stage="opt"
            )
        so = ctypes.CDLL(str(lib.so_path))
        so.selftest_grad.argtypes = [ctypes.POINTER(ctypes.c_double)] * 2
        so.selftest_grad.restype = None
        xv, dx = ctypes.c_double(x), ctypes.c_double(0.0)
        so.selftest_grad(ctypes.byref(xv), ctypes.byref(dx))
        return dx.value, math.cos(x) * x + math.sin(x), seconds


def main() -> int:
    ok = True
    print("cofactor toolchain:")
    for tool in toolchain.TOOLS.values():
        try:
            path = toolchain.find(tool.name)  # the Enzyme plugin is checked too
            print(f"  {tool.name:15s} {path}  ({tool.version()})")
        except CompileError as err:
            ok = False
            print(f"  {tool.name:15s} MISSING: {err}")
    try:
        print(f"  {'cache':15s} {disk_cache.root()}  (see `python -m cofactor cache`)")
    except OSError as err:  # not fatal: programs compile without the cache
        print(f"  {'cache':15s} not used: {err}")
    if not ok:
        print("doctor: toolchain incomplete")
        return 1
    print("self-test: d/dx [g(x) * x] with g = sin opaque behind an Enzyme custom gradient")
    try:
        got, want, seconds = selftest()
    except CompileError as err:
        print(f"  FAILED: {err}")
        return 1
    error = abs(got - want)
    ok = error <= 1e-12
    print(
        f"  Enzyme: {got:.15f}  exact: {want:.15f}  |error| = {error:.1e}"
        f"  (compiled in {seconds:.2f} s)"
    )
    print("doctor: all good" if ok else "doctor: WRONG DERIVATIVE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
