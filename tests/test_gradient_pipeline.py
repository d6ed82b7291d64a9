"""End to end: gradient.vjp and Enzyme custom gradients through the real pipeline.

Each test hand-writes a module in the frontend's style (memref, destination-passing),
runs cofactor-opt with the gradient passes and the standard lowering, compiles it with
`cofactor.compiler.compile_module` (Enzyme included), calls it through ctypes with memref
descriptors built from numpy arrays, and checks the numbers against analytic derivatives.
See docs/gradients.md for the conventions under test.
"""

from __future__ import annotations

import ctypes
import math
import subprocess

import numpy as np
import pytest

from cofactor import compiler, toolchain
from cofactor.errors import CompileError, ToolchainNotFoundError
from cofactor.launcher import descriptor_type

TOL = 1e-12


@pytest.fixture(scope="module")
def cofactor_opt():
    try:
        opt = toolchain.find("cofactor-opt")
        toolchain.find("runtime")
        toolchain.find("enzyme")
    except ToolchainNotFoundError as err:
        pytest.fail(str(err))
    return opt


def lower(opt, mlir_text: str) -> str:
    """The module on the LLVM dialect, with the Enzyme glue emitted."""
    proc = subprocess.run(
        [str(opt), *compiler.LOWERING_PASSES],
        input=mlir_text,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise CompileError("cofactor-opt failed", stage="cofactor-opt", tool_message=proc.stderr)
    return proc.stdout


def build(opt, mlir_text: str, name: str, tmp_path, c_source: str | None = None):
    """Lower, compile and load `mlir_text`; returns (ctypes library, CompiledLibrary)."""
    link_with = ()
    if c_source is not None:
        source = tmp_path / f"{name}_impl.c"
        source.write_text(c_source)
        link_with = (source,)
    lib = compiler.compile_module(mlir_text, name=name, cache=False, link_with=link_with)
    return ctypes.CDLL(str(lib.so_path)), lib


def descriptor(array: np.ndarray) -> ctypes.Structure:
    """An MLIR memref descriptor viewing `array` (which must stay alive)."""
    rank = array.ndim
    desc = descriptor_type(rank)()
    desc.allocated = desc.aligned = array.ctypes.data
    desc.offset = 0
    for k in range(rank):
        desc.sizes[k] = array.shape[k]
        desc.strides[k] = array.strides[k] // array.itemsize
    return desc


def call(so, name: str, *arrays: np.ndarray) -> None:
    """Call `_mlir_ciface_<name>` with a descriptor pointer per array."""
    descs = [descriptor(a) for a in arrays]
    fn = getattr(so, f"_mlir_ciface_{name}")
    fn.restype = None
    fn(*[ctypes.byref(d) for d in descs])
    rt = runtime_library()
    code = rt.cf_rt_error_code()
    if code:
        message = rt.cf_rt_error_message().decode()
        rt.cf_rt_clear_error()
        raise AssertionError(f"runtime error {code}: {message}")


def runtime_library():
    """The runtime, as loaded by the compiled libraries (the same file: one copy)."""
    lib = ctypes.CDLL(str(toolchain.find("runtime")))
    lib.cf_rt_error_code.restype = ctypes.c_int64
    lib.cf_rt_error_message.restype = ctypes.c_char_p
    return lib


def scalar(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float64)


# ---------------------------------------------------------------------------------------
# P1: gradient.vjp of a classical function

CLASSICAL = r"""
module {
  // out = s * sum_i sin(x_i) * x_i ;  out2 = [x0 * x1, s * x2]
  func.func private @f(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>,
                       %out2: memref<2xf64>) attributes {cofactor.num_inputs = 2 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %zero = arith.constant 0.0 : f64
    %sum = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %zero) -> (f64) {
      %xi = memref.load %x[%i] : memref<3xf64>
      %sn = math.sin %xi : f64
      %p = arith.mulf %sn, %xi : f64
      %a = arith.addf %acc, %p : f64
      scf.yield %a : f64
    }
    %sv = memref.load %s[] : memref<f64>
    %r = arith.mulf %sv, %sum : f64
    memref.store %r, %out[] : memref<f64>
    %x0 = memref.load %x[%c0] : memref<3xf64>
    %x1 = memref.load %x[%c1] : memref<3xf64>
    %x2 = memref.load %x[%c2] : memref<3xf64>
    %m = arith.mulf %x0, %x1 : f64
    %n = arith.mulf %sv, %x2 : f64
    memref.store %m, %out2[%c0] : memref<2xf64>
    memref.store %n, %out2[%c1] : memref<2xf64>
    return
  }
  // d/dx only: s is a constant input
  func.func @vjp_x(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>,
                   %out2: memref<2xf64>, %ct: memref<f64>, %ct2: memref<2xf64>,
                   %dx: memref<3xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %s, %out, %out2, %ct, %ct2, %dx) {callee = @f, num_inputs = 2 : i64,
        num_outputs = 2 : i64, diff_inputs = [0]}
        : (memref<3xf64>, memref<f64>, memref<f64>, memref<2xf64>, memref<f64>,
           memref<2xf64>, memref<3xf64>) -> ()
    return
  }
  // The full 3x3 Jacobian of out2 ++ [out] w.r.t. x, one vjp per output element with a
  // one-hot cotangent, as the frontend builds `jacobian`
  func.func @jac_x(%x: memref<3xf64>, %s: memref<f64>, %jac: memref<3x3xf64>)
      attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %zero = arith.constant 0.0 : f64
    %one = arith.constant 1.0 : f64
    %out = memref.alloc() : memref<f64>
    %out2 = memref.alloc() : memref<2xf64>
    %ct = memref.alloc() : memref<f64>
    %ct2 = memref.alloc() : memref<2xf64>
    %row = memref.alloc() : memref<3xf64>
    scf.for %r = %c0 to %c3 step %c1 {
      memref.store %zero, %ct[] : memref<f64>
      memref.store %zero, %ct2[%c0] : memref<2xf64>
      memref.store %zero, %ct2[%c1] : memref<2xf64>
      %is_out = arith.cmpi eq, %r, %c2 : index
      scf.if %is_out {
        memref.store %one, %ct[] : memref<f64>
      } else {
        memref.store %one, %ct2[%r] : memref<2xf64>
      }
      scf.for %k = %c0 to %c3 step %c1 {
        memref.store %zero, %row[%k] : memref<3xf64>
      }
      "gradient.vjp"(%x, %s, %out, %out2, %ct, %ct2, %row) {callee = @f, num_inputs = 2 : i64,
          num_outputs = 2 : i64, diff_inputs = [0]}
          : (memref<3xf64>, memref<f64>, memref<f64>, memref<2xf64>, memref<f64>,
             memref<2xf64>, memref<3xf64>) -> ()
      scf.for %k = %c0 to %c3 step %c1 {
        %v = memref.load %row[%k] : memref<3xf64>
        memref.store %v, %jac[%r, %k] : memref<3x3xf64>
      }
    }
    memref.dealloc %out : memref<f64>
    memref.dealloc %out2 : memref<2xf64>
    memref.dealloc %ct : memref<f64>
    memref.dealloc %ct2 : memref<2xf64>
    memref.dealloc %row : memref<3xf64>
    return
  }
  // d/dx and d/ds
  func.func @vjp_xs(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>,
                    %out2: memref<2xf64>, %ct: memref<f64>, %ct2: memref<2xf64>,
                    %dx: memref<3xf64>, %ds: memref<f64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %s, %out, %out2, %ct, %ct2, %dx, %ds) {callee = @f, num_inputs = 2 : i64,
        num_outputs = 2 : i64, diff_inputs = [0, 1]}
        : (memref<3xf64>, memref<f64>, memref<f64>, memref<2xf64>, memref<f64>,
           memref<2xf64>, memref<3xf64>, memref<f64>) -> ()
    return
  }
}
"""


def classical_reference(x, s, ct, ct2):
    out = s * np.sum(np.sin(x) * x)
    out2 = np.array([x[0] * x[1], s * x[2]])
    dx = ct * s * (np.cos(x) * x + np.sin(x))
    dx += ct2[0] * np.array([x[1], x[0], 0.0]) + ct2[1] * np.array([0.0, 0.0, s])
    ds = ct * np.sum(np.sin(x) * x) + ct2[1] * x[2]
    return out, out2, dx, ds


@pytest.fixture(scope="module")
def classical(cofactor_opt, tmp_path_factory):
    so, lib = build(cofactor_opt, CLASSICAL, "grad_classical", tmp_path_factory.mktemp("p1"))
    return so, lib


def test_classical_module_goes_through_enzyme(classical):
    _, lib = classical
    assert "__enzyme_autodiff" in lib.stage("llvmir")
    assert "__enzyme_autodiff" not in lib.stage("llvmir_opt")


def test_vjp_of_classical_function(classical):
    so, _ = classical
    x = np.array([0.3, -1.1, 2.5])
    s, ct, ct2 = 1.7, 0.9, np.array([0.4, -2.0])
    out, out2 = scalar(0.0), np.zeros(2)
    cts, ct2s = scalar(ct), ct2.copy()
    dx = np.array([10.0, 20.0, 30.0])  # accumulated into, not overwritten
    call(so, "vjp_x", x, scalar(s), out, out2, cts, ct2s, dx)
    ref_out, ref_out2, ref_dx, _ = classical_reference(x, s, ct, ct2)
    assert abs(out - ref_out) < TOL
    np.testing.assert_allclose(out2, ref_out2, rtol=0, atol=TOL)
    np.testing.assert_allclose(dx, ref_dx + [10.0, 20.0, 30.0], rtol=0, atol=TOL)
    assert cts == 0.0 and not ct2s.any(), "cotangents must be consumed (zeroed)"
    np.testing.assert_array_equal(x, [0.3, -1.1, 2.5])


def test_vjp_with_two_differentiated_inputs(classical):
    so, _ = classical
    x = np.array([1.2, 0.5, -0.7])
    s, ct, ct2 = -0.6, 1.0, np.array([0.0, 1.0])
    out, out2, dx, ds = scalar(0.0), np.zeros(2), np.zeros(3), scalar(0.0)
    call(so, "vjp_xs", x, scalar(s), out, out2, scalar(ct), ct2.copy(), dx, ds)
    _, _, ref_dx, ref_ds = classical_reference(x, s, ct, ct2)
    np.testing.assert_allclose(dx, ref_dx, rtol=0, atol=TOL)
    assert abs(ds - ref_ds) < TOL


def test_jacobian_by_one_hot_vjps_in_a_loop(classical):
    so, _ = classical
    x, s = np.array([0.3, -1.1, 2.5]), 1.7
    jac = np.zeros((3, 3))
    call(so, "jac_x", x, scalar(s), jac)
    expected = np.array(
        [
            [x[1], x[0], 0.0],
            [0.0, 0.0, s],
            s * (np.cos(x) * x + np.sin(x)),
        ]
    )
    np.testing.assert_allclose(jac, expected, rtol=0, atol=TOL)


# ---------------------------------------------------------------------------------------
# P2: an opaque callee with a custom gradient (cofactor.vjp), implemented in C

OPAQUE_C = r"""
#include <math.h>
#include <stdint.h>
typedef struct { double *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } D1;
long g_calls = 0, g_vjp_calls = 0;
/* out = [sin(x0) * x1, x0^2] */
void _mlir_ciface_g(D1 *x, D1 *out) {
    const double *a = x->aligned + x->offset;
    double *o = out->aligned + out->offset;
    o[0] = sin(a[0]) * a[1];
    o[1] = a[0] * a[0];
    g_calls++;
}
/* v = J(x)^T ct, overwritten */
void _mlir_ciface_g_vjp(D1 *x, D1 *ct, D1 *v) {
    const double *a = x->aligned + x->offset, *c = ct->aligned + ct->offset;
    double *r = v->aligned + v->offset;
    r[0] = c[0] * cos(a[0]) * a[1] + c[1] * 2.0 * a[0];
    r[1] = c[0] * sin(a[0]);
    g_vjp_calls++;
}
"""

OPAQUE = r"""
module {
  func.func private @g(memref<2xf64>, memref<2xf64>)
      attributes {cofactor.num_inputs = 1 : i64, cofactor.vjp = @g_vjp, llvm.emit_c_interface}
  func.func private @g_vjp(memref<2xf64>, memref<2xf64>, memref<2xf64>)
      attributes {llvm.emit_c_interface}

  // out = (t0 + t1) * t0' + x0 with t = g(x) computed twice
  func.func private @twice(%x: memref<2xf64>, %out: memref<f64>)
      attributes {cofactor.num_inputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %t1 = memref.alloc() : memref<2xf64>
    %t2 = memref.alloc() : memref<2xf64>
    func.call @g(%x, %t1) : (memref<2xf64>, memref<2xf64>) -> ()
    func.call @g(%x, %t2) : (memref<2xf64>, memref<2xf64>) -> ()
    %a = memref.load %t1[%c0] : memref<2xf64>
    %b = memref.load %t1[%c1] : memref<2xf64>
    %c = memref.load %t2[%c0] : memref<2xf64>
    %x0 = memref.load %x[%c0] : memref<2xf64>
    %s = arith.addf %a, %b : f64
    %p = arith.mulf %s, %c : f64
    %r = arith.addf %p, %x0 : f64
    memref.store %r, %out[] : memref<f64>
    memref.dealloc %t1 : memref<2xf64>
    memref.dealloc %t2 : memref<2xf64>
    return
  }

  // out = g(g(g(x))): the input buffer of g is overwritten by every iteration, so the
  // reverse only works if the forward kept copies of the inputs (the tape)
  func.func private @loop(%x: memref<2xf64>, %out: memref<2xf64>)
      attributes {cofactor.num_inputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %y = memref.alloc() : memref<2xf64>
    %t = memref.alloc() : memref<2xf64>
    memref.copy %x, %y : memref<2xf64> to memref<2xf64>
    scf.for %i = %c0 to %c3 step %c1 {
      func.call @g(%y, %t) : (memref<2xf64>, memref<2xf64>) -> ()
      memref.copy %t, %y : memref<2xf64> to memref<2xf64>
    }
    memref.copy %y, %out : memref<2xf64> to memref<2xf64>
    memref.dealloc %y : memref<2xf64>
    memref.dealloc %t : memref<2xf64>
    return
  }

  // out = x . g(c) + g(k)[1] with c an input nobody differentiates (it gets a scratch
  // shadow, see --lower-gradient-ops) and k = [0.5, 2] built inside
  func.func private @consts(%x: memref<2xf64>, %c: memref<2xf64>, %out: memref<f64>)
      attributes {cofactor.num_inputs = 2 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %half = arith.constant 0.5 : f64
    %two = arith.constant 2.0 : f64
    %t = memref.alloc() : memref<2xf64>
    %k = memref.alloc() : memref<2xf64>
    %u = memref.alloc() : memref<2xf64>
    memref.store %half, %k[%c0] : memref<2xf64>
    memref.store %two, %k[%c1] : memref<2xf64>
    func.call @g(%c, %t) : (memref<2xf64>, memref<2xf64>) -> ()
    func.call @g(%k, %u) : (memref<2xf64>, memref<2xf64>) -> ()
    %x0 = memref.load %x[%c0] : memref<2xf64>
    %x1 = memref.load %x[%c1] : memref<2xf64>
    %t0 = memref.load %t[%c0] : memref<2xf64>
    %t1 = memref.load %t[%c1] : memref<2xf64>
    %u1 = memref.load %u[%c1] : memref<2xf64>
    %p0 = arith.mulf %x0, %t0 : f64
    %p1 = arith.mulf %x1, %t1 : f64
    %s = arith.addf %p0, %p1 : f64
    %r = arith.addf %s, %u1 : f64
    memref.store %r, %out[] : memref<f64>
    memref.dealloc %t : memref<2xf64>
    memref.dealloc %k : memref<2xf64>
    memref.dealloc %u : memref<2xf64>
    return
  }

  func.func @vjp_twice(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>,
                       %dx: memref<2xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %out, %ct, %dx) {callee = @twice, num_inputs = 1 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
    return
  }
  func.func @vjp_loop(%x: memref<2xf64>, %out: memref<2xf64>, %ct: memref<2xf64>,
                      %dx: memref<2xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %out, %ct, %dx) {callee = @loop, num_inputs = 1 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<2xf64>, memref<2xf64>, memref<2xf64>, memref<2xf64>) -> ()
    return
  }
  // g's output is never used: Enzyme may skip the custom reverse or hand it the primal
  // output as its own shadow; either way dx gets only the direct term
  func.func private @unused(%x: memref<2xf64>, %out: memref<f64>)
      attributes {cofactor.num_inputs = 1 : i64} {
    %c1 = arith.constant 1 : index
    %t = memref.alloc() : memref<2xf64>
    func.call @g(%x, %t) : (memref<2xf64>, memref<2xf64>) -> ()
    %x1 = memref.load %x[%c1] : memref<2xf64>
    %r = arith.mulf %x1, %x1 : f64
    memref.store %r, %out[] : memref<f64>
    memref.dealloc %t : memref<2xf64>
    return
  }
  func.func @vjp_unused(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>,
                        %dx: memref<2xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %out, %ct, %dx) {callee = @unused, num_inputs = 1 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
    return
  }
  // the opaque function itself as the vjp callee
  func.func @vjp_g(%x: memref<2xf64>, %out: memref<2xf64>, %ct: memref<2xf64>,
                   %dx: memref<2xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %out, %ct, %dx) {callee = @g, num_inputs = 1 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<2xf64>, memref<2xf64>, memref<2xf64>, memref<2xf64>) -> ()
    return
  }
  func.func @vjp_consts(%x: memref<2xf64>, %c: memref<2xf64>, %out: memref<f64>,
                        %ct: memref<f64>, %dx: memref<2xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %c, %out, %ct, %dx) {callee = @consts, num_inputs = 2 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<2xf64>, memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
    return
  }
}
"""


def g_ref(x):
    return np.array([math.sin(x[0]) * x[1], x[0] ** 2])


def g_jac(x):
    return np.array([[math.cos(x[0]) * x[1], math.sin(x[0])], [2 * x[0], 0.0]])


@pytest.fixture(scope="module")
def opaque(cofactor_opt, tmp_path_factory):
    return build(cofactor_opt, OPAQUE, "grad_opaque", tmp_path_factory.mktemp("p2"), OPAQUE_C)


def counter(so, name: str) -> int:
    return ctypes.c_long.in_dll(so, name).value


def live_tapes(so) -> int:
    rt = runtime_library()
    rt.cf_rt_tape_live_count.restype = ctypes.c_int64
    return rt.cf_rt_tape_live_count()


def test_custom_gradient_is_registered(opaque):
    _, lib = opaque
    llvm_ir = lib.stage("llvmir")
    assert "__enzyme_register_gradient_g" in llvm_ir
    assert "@_mlir_ciface_g(" in llvm_ir
    assert "__enzyme_register_gradient" not in lib.stage("llvmir_opt")


def test_callee_used_twice_accumulates(opaque):
    so, _ = opaque
    x = np.array([0.7, -1.3])
    out, ct, dx = scalar(0.0), scalar(1.5), np.array([0.25, -0.5])
    vjp_calls = counter(so, "g_vjp_calls")
    call(so, "vjp_twice", x, out, ct, dx)
    a, b = g_ref(x)
    jac_a = g_jac(x)[0]
    grad = (jac_a + [2 * x[0], 0.0]) * a + (a + b) * jac_a + [1.0, 0.0]
    assert abs(out - ((a + b) * a + x[0])) < TOL
    np.testing.assert_allclose(dx, 1.5 * grad + [0.25, -0.5], rtol=0, atol=TOL)
    assert ct == 0.0
    assert counter(so, "g_vjp_calls") - vjp_calls == 2, "the custom reverse must run per call"
    assert live_tapes(so) == 0


def test_callee_in_loop_uses_the_tape(opaque):
    so, _ = opaque
    x = np.array([0.4, 0.9])
    ct = np.array([0.3, -1.1])
    out, dx = np.zeros(2), np.zeros(2)
    call(so, "vjp_loop", x, out, ct.copy(), dx)
    ys = [x]
    for _ in range(3):
        ys.append(g_ref(ys[-1]))
    v = ct
    for y in reversed(ys[:-1]):
        v = g_jac(y).T @ v
    np.testing.assert_allclose(out, ys[-1], rtol=0, atol=TOL)
    np.testing.assert_allclose(dx, v, rtol=0, atol=TOL)
    assert live_tapes(so) == 0


def test_callee_with_an_unused_output(opaque):
    so, _ = opaque
    x = np.array([0.5, -1.5])
    out, dx = scalar(0.0), np.zeros(2)
    call(so, "vjp_unused", x, out, scalar(3.0), dx)
    assert abs(out - x[1] ** 2) < TOL
    np.testing.assert_allclose(dx, [0.0, 3.0 * 2 * x[1]], rtol=0, atol=TOL)
    np.testing.assert_array_equal(x, [0.5, -1.5])
    assert live_tapes(so) == 0


def test_custom_reverse_contract(opaque):
    """fwd_impl/rev_impl called directly, as Enzyme calls them: the reverse adds J^T dout
    into din and zeroes dout; where a shadow is the primal itself (Enzyme's treatment of
    arguments it proved constant) it neither reads nor writes through it."""
    so, _ = opaque
    fwd = so["_mlir_ciface_g.fwd_impl"]
    fwd.restype = ctypes.c_int64
    rev = so["_mlir_ciface_g.rev_impl"]
    rev.restype = None
    x = np.array([0.3, 0.8])
    out, dx, dout = np.zeros(2), np.array([1.0, -1.0]), np.array([2.0, 0.5])
    d_x, d_out, d_dx, d_dout = map(descriptor, (x, out, dx, dout))
    ptrs = [ctypes.byref(d) for d in (d_x, d_dx, d_out, d_dout)]

    tape = fwd(*ptrs)
    np.testing.assert_allclose(out, g_ref(x), rtol=0, atol=TOL)
    x[:] = [9.0, 9.0]  # the forward's inputs are on the tape: later writes do not matter
    rev(*ptrs, ctypes.c_int64(tape))
    x[:] = [0.3, 0.8]
    np.testing.assert_allclose(dx, [1.0, -1.0] + g_jac(x).T @ [2.0, 0.5], rtol=0, atol=TOL)
    assert not dout.any()

    # every shadow is its primal
    same = [ctypes.byref(d) for d in (d_x, d_x, d_out, d_out)]
    tape = fwd(*same)
    rev(*same, ctypes.c_int64(tape))
    np.testing.assert_array_equal(x, [0.3, 0.8])
    np.testing.assert_allclose(out, g_ref(x), rtol=0, atol=TOL)

    # only the output's shadow is its primal: its cotangent counts as zero
    dx[:] = 0.0
    mixed = [ctypes.byref(d) for d in (d_x, d_dx, d_out, d_out)]
    tape = fwd(*mixed)
    rev(*mixed, ctypes.c_int64(tape))
    assert not dx.any()
    np.testing.assert_allclose(out, g_ref(x), rtol=0, atol=TOL)
    assert live_tapes(so) == 0


def test_opaque_function_differentiated_directly(opaque):
    so, _ = opaque
    x, ct = np.array([-0.3, 1.9]), np.array([2.0, 0.5])
    out, dx = np.zeros(2), np.array([1.0, 1.0])
    cts = ct.copy()
    call(so, "vjp_g", x, out, cts, dx)
    np.testing.assert_allclose(out, g_ref(x), rtol=0, atol=TOL)
    np.testing.assert_allclose(dx, g_jac(x).T @ ct + 1.0, rtol=0, atol=TOL)
    assert not cts.any()
    assert live_tapes(so) == 0


def test_constant_inputs_of_the_callee(opaque):
    so, _ = opaque
    x, c = np.array([1.1, 0.2]), np.array([-0.8, 0.6])
    out, dx = scalar(0.0), np.zeros(2)
    call(so, "vjp_consts", x, c, out, scalar(2.0), dx)
    t, u = g_ref(c), g_ref(np.array([0.5, 2.0]))
    assert abs(out - (x @ t + u[1])) < TOL
    np.testing.assert_allclose(dx, 2.0 * t, rtol=0, atol=TOL)
    np.testing.assert_array_equal(c, [-0.8, 0.6])  # the primal was never written
    assert live_tapes(so) == 0


# ---------------------------------------------------------------------------------------
# P3: a QNode split into classical preprocessing (differentiated by Enzyme) and a quantum
# part with a custom gradient, whose reverse replays the circuit with the runtime recording
# it and asks for the Jacobian of the recorded measurements (`cf_rt_jacobian_recorded`).


QNODE = r"""
module {
  // [<Z0>, <Y1>] after RX(2 x0) on 0; for i < 3: RY(s x_i) on 1, CNOT(0, 1);
  // Rot(x1, x0 * x2, 0.3) on 1
  func.func private @circuit(%x: memref<3xf64>, %s: memref<f64>, %z: memref<f64>,
                             %y: memref<f64>)
      attributes {cofactor.qnode, cofactor.diff_method = "adjoint",
                  cofactor.num_inputs = 2 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %w0 = arith.constant 0 : i64
    %w1 = arith.constant 1 : i64
    %two = arith.constant 2.0 : f64
    %omega = arith.constant 0.3 : f64
    "quantum.device_acquire"() {num_qubits = 2 : i64, shots = 0 : i64, seed = 7 : i64}
        : () -> ()
    %x0 = memref.load %x[%c0] : memref<3xf64>
    %x1 = memref.load %x[%c1] : memref<3xf64>
    %x2 = memref.load %x[%c2] : memref<3xf64>
    %sv = memref.load %s[] : memref<f64>
    %a = arith.mulf %x0, %two : f64
    "quantum.gate"(%a, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64}
        : (f64, i64) -> ()
    scf.for %i = %c0 to %c3 step %c1 {
      %xi = memref.load %x[%i] : memref<3xf64>
      %t = arith.mulf %sv, %xi : f64
      "quantum.gate"(%t, %w1) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64}
          : (f64, i64) -> ()
      "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64}
          : (i64, i64) -> ()
    }
    %th = arith.mulf %x0, %x2 : f64
    "quantum.gate"(%x1, %th, %omega, %w1) {gate = "Rot", num_params = 3 : i64,
        num_wires = 1 : i64} : (f64, f64, f64, i64) -> ()
    %oz = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
    %ez = "quantum.expval"(%oz) : (!quantum.obs) -> f64
    memref.store %ez, %z[] : memref<f64>
    %oy = "quantum.obs_named"(%w1) {kind = "PauliY"} : (i64) -> !quantum.obs
    %ey = "quantum.expval"(%oy) : (!quantum.obs) -> f64
    memref.store %ey, %y[] : memref<f64>
    "quantum.device_release"() : () -> ()
    return
  }
  // the QNode inside classical code: out = z * y + x2
  func.func private @hybrid(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>)
      attributes {cofactor.num_inputs = 2 : i64} {
    %c2 = arith.constant 2 : index
    %z = memref.alloc() : memref<f64>
    %y = memref.alloc() : memref<f64>
    func.call @circuit(%x, %s, %z, %y)
        : (memref<3xf64>, memref<f64>, memref<f64>, memref<f64>) -> ()
    %zv = memref.load %z[] : memref<f64>
    %yv = memref.load %y[] : memref<f64>
    %x2 = memref.load %x[%c2] : memref<3xf64>
    %p = arith.mulf %zv, %yv : f64
    %r = arith.addf %p, %x2 : f64
    memref.store %r, %out[] : memref<f64>
    memref.dealloc %z : memref<f64>
    memref.dealloc %y : memref<f64>
    return
  }
  // the QNode twice in a loop, its input buffer updated in between (the reverse needs
  // the inputs of each call: the tape): y = x; repeat 2: (z, w) = circuit(y, s);
  // acc += z * w; y0 += z
  func.func private @looped(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>)
      attributes {cofactor.num_inputs = 2 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %zero = arith.constant 0.0 : f64
    %y = memref.alloc() : memref<3xf64>
    %z = memref.alloc() : memref<f64>
    %w = memref.alloc() : memref<f64>
    memref.copy %x, %y : memref<3xf64> to memref<3xf64>
    memref.store %zero, %out[] : memref<f64>
    scf.for %i = %c0 to %c2 step %c1 {
      func.call @circuit(%y, %s, %z, %w)
          : (memref<3xf64>, memref<f64>, memref<f64>, memref<f64>) -> ()
      %zv = memref.load %z[] : memref<f64>
      %wv = memref.load %w[] : memref<f64>
      %p = arith.mulf %zv, %wv : f64
      %acc = memref.load %out[] : memref<f64>
      %a2 = arith.addf %acc, %p : f64
      memref.store %a2, %out[] : memref<f64>
      %y0 = memref.load %y[%c0] : memref<3xf64>
      %y0n = arith.addf %y0, %zv : f64
      memref.store %y0n, %y[%c0] : memref<3xf64>
    }
    memref.dealloc %y : memref<3xf64>
    memref.dealloc %z : memref<f64>
    memref.dealloc %w : memref<f64>
    return
  }
  func.func @vjp_looped(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>,
                        %ct: memref<f64>, %dx: memref<3xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %s, %out, %ct, %dx) {callee = @looped, num_inputs = 2 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<3xf64>, memref<f64>, memref<f64>, memref<f64>, memref<3xf64>) -> ()
    return
  }
  func.func @vjp_circuit(%x: memref<3xf64>, %s: memref<f64>, %z: memref<f64>,
                         %y: memref<f64>, %cz: memref<f64>, %cy: memref<f64>,
                         %dx: memref<3xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %s, %z, %y, %cz, %cy, %dx) {callee = @circuit, num_inputs = 2 : i64,
        num_outputs = 2 : i64, diff_inputs = [0]}
        : (memref<3xf64>, memref<f64>, memref<f64>, memref<f64>, memref<f64>, memref<f64>,
           memref<3xf64>) -> ()
    return
  }
  func.func @vjp_hybrid(%x: memref<3xf64>, %s: memref<f64>, %out: memref<f64>,
                        %ct: memref<f64>, %dx: memref<3xf64>, %ds: memref<f64>)
      attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %s, %out, %ct, %dx, %ds) {callee = @hybrid, num_inputs = 2 : i64,
        num_outputs = 1 : i64, diff_inputs = [0, 1]}
        : (memref<3xf64>, memref<f64>, memref<f64>, memref<f64>, memref<3xf64>,
           memref<f64>) -> ()
    return
  }
}
"""


def reference_circuit():
    """The QNODE circuit in PennyLane (default.qubit), on params = [x0, x1, x2, s]."""
    qml = pytest.importorskip("pennylane")
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev, diff_method="backprop")
    def circuit(params):
        x, s = params[:3], params[3]
        qml.RX(2 * x[0], wires=0)
        for i in range(3):
            qml.RY(s * x[i], wires=1)
            qml.CNOT(wires=[0, 1])
        qml.Rot(x[1], x[0] * x[2], 0.3, wires=1)
        return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliY(1))

    return qml, circuit


def qnode_reference(x, s):
    """[<Z0>, <Y1>] and its Jacobian w.r.t. (x, s)."""
    qml, circuit = reference_circuit()
    pnp = qml.numpy

    def stacked(params):
        return qml.math.stack(circuit(params))

    params = pnp.array([*x, s], requires_grad=True)
    return np.asarray(stacked(params)), np.asarray(qml.jacobian(stacked)(params))


@pytest.fixture(scope="module")
def qnode(cofactor_opt, tmp_path_factory):
    return build(cofactor_opt, QNODE, "grad_qnode", tmp_path_factory.mktemp("p3"))


def test_qnode_vjp(qnode):
    so, _ = qnode
    x, s = np.array([0.4, -0.7, 1.3]), 0.8
    z, y, dx = scalar(0.0), scalar(0.0), np.zeros(3)
    cz, cy = 0.6, -1.4
    call(so, "vjp_circuit", x, scalar(s), z, y, scalar(cz), scalar(cy), dx)
    values, jac = qnode_reference(x, s)
    assert abs(z - values[0]) < TOL and abs(y - values[1]) < TOL
    np.testing.assert_allclose(dx, (np.array([cz, cy]) @ jac)[:3], rtol=0, atol=TOL)
    assert live_tapes(so) == 0


def test_qnode_called_in_a_loop_on_changing_inputs(qnode):
    so, _ = qnode
    x, s = np.array([0.3, 0.9, -0.4]), 0.6
    out, dx = scalar(0.0), np.zeros(3)
    call(so, "vjp_looped", x, scalar(s), out, scalar(1.0), dx)
    qml, circuit = reference_circuit()
    pnp = qml.numpy

    def looped(x):
        y, acc = x, 0.0
        for _ in range(2):
            z, w = circuit(pnp.concatenate([y, pnp.array([s])]))
            acc = acc + z * w
            y = pnp.concatenate([y[:1] + z, y[1:]])
        return acc

    xs = pnp.array(x, requires_grad=True)
    assert abs(out - float(looped(xs))) < TOL
    np.testing.assert_allclose(dx, np.asarray(qml.grad(looped)(xs)), rtol=0, atol=TOL)
    assert live_tapes(so) == 0


def test_qnode_inside_classical_code(qnode):
    so, _ = qnode
    x, s = np.array([1.1, 0.25, -0.6]), -1.2
    out, dx, ds = scalar(0.0), np.zeros(3), scalar(0.0)
    call(so, "vjp_hybrid", x, scalar(s), out, scalar(1.0), dx, ds)
    (zv, yv), jac = qnode_reference(x, s)
    grad = yv * jac[0] + zv * jac[1] + np.array([0.0, 0.0, 1.0, 0.0])
    assert abs(out - (zv * yv + x[2])) < TOL
    np.testing.assert_allclose(dx, grad[:3], rtol=0, atol=TOL)
    assert abs(ds - grad[3]) < TOL
    assert live_tapes(so) == 0


# The QNODE circuit with its wires read from an integer input (not differentiable, but
# saved on the tape and passed to the quantum part like any input).
QNODE_INT_WIRES = r"""
module {
  func.func private @circuit(%x: memref<3xf64>, %s: memref<f64>, %wires: memref<2xi64>,
                             %z: memref<f64>, %y: memref<f64>)
      attributes {cofactor.qnode, cofactor.diff_method = "adjoint",
                  cofactor.num_inputs = 3 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %two = arith.constant 2.0 : f64
    %omega = arith.constant 0.3 : f64
    %w0 = memref.load %wires[%c0] : memref<2xi64>
    %w1 = memref.load %wires[%c1] : memref<2xi64>
    "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
    %x0 = memref.load %x[%c0] : memref<3xf64>
    %x1 = memref.load %x[%c1] : memref<3xf64>
    %x2 = memref.load %x[%c2] : memref<3xf64>
    %sv = memref.load %s[] : memref<f64>
    %a = arith.mulf %x0, %two : f64
    "quantum.gate"(%a, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64}
        : (f64, i64) -> ()
    scf.for %i = %c0 to %c3 step %c1 {
      %xi = memref.load %x[%i] : memref<3xf64>
      %t = arith.mulf %sv, %xi : f64
      "quantum.gate"(%t, %w1) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64}
          : (f64, i64) -> ()
      "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64}
          : (i64, i64) -> ()
    }
    %th = arith.mulf %x0, %x2 : f64
    "quantum.gate"(%x1, %th, %omega, %w1) {gate = "Rot", num_params = 3 : i64,
        num_wires = 1 : i64} : (f64, f64, f64, i64) -> ()
    %oz = "quantum.obs_named"(%w0) {kind = "PauliZ"} : (i64) -> !quantum.obs
    %ez = "quantum.expval"(%oz) : (!quantum.obs) -> f64
    memref.store %ez, %z[] : memref<f64>
    %oy = "quantum.obs_named"(%w1) {kind = "PauliY"} : (i64) -> !quantum.obs
    %ey = "quantum.expval"(%oy) : (!quantum.obs) -> f64
    memref.store %ey, %y[] : memref<f64>
    "quantum.device_release"() : () -> ()
    return
  }
  // out = z * y, the QNode nested in classical code
  func.func private @outer(%x: memref<3xf64>, %s: memref<f64>, %wires: memref<2xi64>,
                           %out: memref<f64>) attributes {cofactor.num_inputs = 3 : i64} {
    %z = memref.alloc() : memref<f64>
    %y = memref.alloc() : memref<f64>
    func.call @circuit(%x, %s, %wires, %z, %y)
        : (memref<3xf64>, memref<f64>, memref<2xi64>, memref<f64>, memref<f64>) -> ()
    %zv = memref.load %z[] : memref<f64>
    %yv = memref.load %y[] : memref<f64>
    %p = arith.mulf %zv, %yv : f64
    memref.store %p, %out[] : memref<f64>
    memref.dealloc %z : memref<f64>
    memref.dealloc %y : memref<f64>
    return
  }
  func.func @vjp_outer(%x: memref<3xf64>, %s: memref<f64>, %wires: memref<2xi64>,
                       %out: memref<f64>, %ct: memref<f64>, %dx: memref<3xf64>)
      attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %s, %wires, %out, %ct, %dx) {callee = @outer, num_inputs = 3 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<3xf64>, memref<f64>, memref<2xi64>, memref<f64>, memref<f64>,
           memref<3xf64>) -> ()
    return
  }
}
"""


def test_qnode_with_integer_inputs(cofactor_opt, tmp_path):
    so, _ = build(cofactor_opt, QNODE_INT_WIRES, "grad_int_wires", tmp_path)
    x, s = np.array([1.1, 0.25, -0.6]), -1.2
    wires = np.array([0, 1], dtype=np.int64)
    out, dx = scalar(0.0), np.zeros(3)
    call(so, "vjp_outer", x, scalar(s), wires, out, scalar(1.0), dx)
    (zv, yv), jac = qnode_reference(x, s)
    assert abs(out - zv * yv) < TOL
    np.testing.assert_allclose(dx, (yv * jac[0] + zv * jac[1])[:3], rtol=0, atol=TOL)
    np.testing.assert_array_equal(wires, [0, 1])
    assert live_tapes(so) == 0


PROBS_QNODE = r"""
module {
  // probs of RX(x0) on 0, RY(x0 * x1) on 1, CNOT(0, 1), RZ(x1) on 1 if x0 > 0, RY(x1) on 0
  func.func private @circuit(%x: memref<2xf64>, %probs: memref<4xf64>, %z: memref<f64>)
      attributes {cofactor.qnode, cofactor.diff_method = "parameter-shift",
                  cofactor.num_inputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %w0 = arith.constant 0 : i64
    %w1 = arith.constant 1 : i64
    %zero = arith.constant 0.0 : f64
    "quantum.device_acquire"() {num_qubits = 2 : i64} : () -> ()
    %x0 = memref.load %x[%c0] : memref<2xf64>
    %x1 = memref.load %x[%c1] : memref<2xf64>
    "quantum.gate"(%x0, %w0) {gate = "RX", num_params = 1 : i64, num_wires = 1 : i64}
        : (f64, i64) -> ()
    %p = arith.mulf %x0, %x1 : f64
    "quantum.gate"(%p, %w1) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64}
        : (f64, i64) -> ()
    "quantum.gate"(%w0, %w1) {gate = "CNOT", num_params = 0 : i64, num_wires = 2 : i64}
        : (i64, i64) -> ()
    %positive = arith.cmpf ogt, %x0, %zero : f64
    scf.if %positive {
      "quantum.gate"(%x1, %w1) {gate = "RZ", num_params = 1 : i64, num_wires = 1 : i64}
          : (f64, i64) -> ()
    }
    "quantum.gate"(%x1, %w0) {gate = "RY", num_params = 1 : i64, num_wires = 1 : i64}
        : (f64, i64) -> ()
    "quantum.probs"(%probs) : (memref<4xf64>) -> ()
    %oz = "quantum.obs_named"(%w1) {kind = "PauliZ"} : (i64) -> !quantum.obs
    %ez = "quantum.expval"(%oz) : (!quantum.obs) -> f64
    memref.store %ez, %z[] : memref<f64>
    "quantum.device_release"() : () -> ()
    return
  }
  func.func @vjp_circuit(%x: memref<2xf64>, %probs: memref<4xf64>, %z: memref<f64>,
                         %cp: memref<4xf64>, %cz: memref<f64>, %dx: memref<2xf64>)
      attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %probs, %z, %cp, %cz, %dx) {callee = @circuit, num_inputs = 1 : i64,
        num_outputs = 2 : i64, diff_inputs = [0]}
        : (memref<2xf64>, memref<4xf64>, memref<f64>, memref<4xf64>, memref<f64>,
           memref<2xf64>) -> ()
    return
  }
}
"""


@pytest.mark.parametrize("x0", [0.7, -0.4], ids=["with-RZ", "without-RZ"])
def test_qnode_with_probs_and_a_conditional_gate(cofactor_opt, tmp_path, x0):
    qml = pytest.importorskip("pennylane")
    pnp = qml.numpy
    so, _ = build(cofactor_opt, PROBS_QNODE, "grad_probs", tmp_path)
    x = np.array([x0, 1.3])
    cp, cz = np.array([0.5, -1.0, 2.0, 0.25]), -0.75
    probs, z, dx = np.zeros(4), scalar(0.0), np.zeros(2)
    call(so, "vjp_circuit", x, probs, z, cp.copy(), scalar(cz), dx)

    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev, diff_method="backprop")
    def circuit(x):
        qml.RX(x[0], wires=0)
        qml.RY(x[0] * x[1], wires=1)
        qml.CNOT(wires=[0, 1])
        if x0 > 0:
            qml.RZ(x[1], wires=1)
        qml.RY(x[1], wires=0)
        return qml.probs(wires=[0, 1]), qml.expval(qml.PauliZ(1))

    def flat(x):
        p, e = circuit(x)
        return qml.math.concatenate([p, qml.math.reshape(e, (1,))])

    xs = pnp.array(x, requires_grad=True)
    values, jac = np.asarray(flat(xs)), np.asarray(qml.jacobian(flat)(xs))
    np.testing.assert_allclose(probs, values[:4], rtol=0, atol=TOL)
    assert abs(z - values[4]) < TOL
    np.testing.assert_allclose(dx, np.append(cp, cz) @ jac, rtol=0, atol=TOL)
    assert live_tapes(so) == 0


# ---------------------------------------------------------------------------------------
# Python callbacks: the primal and its VJP run in Python, through the runtime's trampoline

CALLBACK = r"""
module {
  // Python callback 7: y = sin(x0) * x1, with a user VJP
  func.func private @cb(memref<2xf64>, memref<f64>)
      attributes {cofactor.callback_id = 7 : i64, cofactor.num_inputs = 1 : i64,
                  cofactor.callback_has_vjp}
  // out = cb(x) * x0 + cb(x)
  func.func private @f(%x: memref<2xf64>, %out: memref<f64>)
      attributes {cofactor.num_inputs = 1 : i64} {
    %c0 = arith.constant 0 : index
    %t = memref.alloc() : memref<f64>
    func.call @cb(%x, %t) : (memref<2xf64>, memref<f64>) -> ()
    %tv = memref.load %t[] : memref<f64>
    %x0 = memref.load %x[%c0] : memref<2xf64>
    %p = arith.mulf %tv, %x0 : f64
    %r = arith.addf %p, %tv : f64
    memref.store %r, %out[] : memref<f64>
    memref.dealloc %t : memref<f64>
    return
  }
  func.func @vjp_f(%x: memref<2xf64>, %out: memref<f64>, %ct: memref<f64>,
                   %dx: memref<2xf64>) attributes {llvm.emit_c_interface} {
    "gradient.vjp"(%x, %out, %ct, %dx) {callee = @f, num_inputs = 1 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<2xf64>, memref<f64>, memref<f64>, memref<2xf64>) -> ()
    return
  }
}
"""

TRAMPOLINE = ctypes.CFUNCTYPE(
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.POINTER(ctypes.c_void_p),
)


def _view(address: int, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    flat = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_double)), (size,))
    return flat.reshape(shape)


def test_python_callback_through_the_trampoline(cofactor_opt, tmp_path):
    so, _ = build(cofactor_opt, CALLBACK, "grad_callback", tmp_path)
    log = []

    def trampoline(callback_id, kind, num_args, args):
        try:
            log.append((callback_id, kind, num_args))
            if kind == 0:  # primal: x, y
                x, y = _view(args[0], (2,)), _view(args[1], ())
                y[...] = math.sin(x[0]) * x[1]
            else:  # vjp: x, cotangent of y, vjp for x
                x, ct, vx = _view(args[0], (2,)), _view(args[1], ()), _view(args[2], (2,))
                vx[:] = ct * np.array([math.cos(x[0]) * x[1], math.sin(x[0])])
            return 0
        except Exception:  # never let an exception into C
            return 1

    keep_alive = TRAMPOLINE(trampoline)
    so.cf_rt_set_callback_trampoline(keep_alive)
    try:
        x = np.array([0.9, -2.0])
        out, dx = scalar(0.0), np.zeros(2)
        call(so, "vjp_f", x, out, scalar(1.0), dx)
    finally:
        so.cf_rt_set_callback_trampoline(None)
    t = math.sin(x[0]) * x[1]
    dt = np.array([math.cos(x[0]) * x[1], math.sin(x[0])])
    assert abs(out - (t * x[0] + t)) < TOL
    np.testing.assert_allclose(dx, dt * (x[0] + 1) + [t, 0.0], rtol=0, atol=TOL)
    assert [kind for _, kind, _ in log] == [0, 1] and log[0] == (7, 0, 2) and log[1] == (7, 1, 3)
    assert live_tapes(so) == 0


def test_callback_without_vjp_is_a_compile_error(cofactor_opt):
    text = CALLBACK.replace("cofactor.callback_has_vjp", "cofactor.unused")
    with pytest.raises(CompileError, match="has no VJP"):
        lower(cofactor_opt, text)


# ---------------------------------------------------------------------------------------
# The runtime's tape store, directly


@pytest.fixture(scope="module")
def runtime():
    lib = ctypes.CDLL(str(toolchain.find("runtime")))
    lib.cf_rt_tape_save.restype = ctypes.c_int64
    lib.cf_rt_tape_save.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
    lib.cf_rt_tape_load.restype = ctypes.c_int64
    lib.cf_rt_tape_load.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
    lib.cf_rt_tape_free.restype = ctypes.c_int64
    lib.cf_rt_tape_free.argtypes = [ctypes.c_int64]
    lib.cf_rt_tape_live_count.restype = ctypes.c_int64
    lib.cf_rt_callback.restype = ctypes.c_int64
    lib.cf_rt_callback.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p]
    return lib


def test_tape_round_trip(runtime):
    live = runtime.cf_rt_tape_live_count()
    a, b = np.array([1.0, 2.0, 3.0]), np.array([7], dtype=np.int64)
    tape = runtime.cf_rt_tape_save(0, a.ctypes.data, a.nbytes)
    assert tape > 0
    assert runtime.cf_rt_tape_save(tape, b.ctypes.data, b.nbytes) == tape
    a[:] = 0.0  # the tape holds a copy
    ra, rb = np.zeros(3), np.zeros(1, dtype=np.int64)
    assert runtime.cf_rt_tape_load(tape, 0, ra.ctypes.data, ra.nbytes) == 0
    assert runtime.cf_rt_tape_load(tape, 1, rb.ctypes.data, rb.nbytes) == 0
    np.testing.assert_array_equal(ra, [1.0, 2.0, 3.0])
    assert rb[0] == 7
    assert runtime.cf_rt_tape_live_count() == live + 1
    assert runtime.cf_rt_tape_free(tape) == 0
    assert runtime.cf_rt_tape_live_count() == live


def test_tape_misuse_reports_a_status(runtime):
    buf = np.zeros(2)
    tape = runtime.cf_rt_tape_save(0, buf.ctypes.data, buf.nbytes)

    def fails_with(message: str) -> bool:
        # each misuse is also recorded in the error slot, for the caller to raise
        rt = runtime_library()
        text = rt.cf_rt_error_message().decode()
        rt.cf_rt_clear_error()
        return message in text

    assert runtime.cf_rt_tape_load(tape, 0, buf.ctypes.data, 8) != 0  # wrong size
    assert fails_with("size mismatch")
    assert runtime.cf_rt_tape_load(tape, 5, buf.ctypes.data, buf.nbytes) != 0  # no buffer 5
    assert fails_with("no such tape entry")
    assert runtime.cf_rt_tape_free(tape) == 0
    assert runtime.cf_rt_tape_load(tape, 0, buf.ctypes.data, buf.nbytes) != 0  # freed
    assert fails_with("no such tape entry")
    assert runtime.cf_rt_tape_free(tape) != 0  # twice
    assert runtime.cf_rt_tape_save(987654321, buf.ctypes.data, buf.nbytes) == -1  # unknown
    assert fails_with("unknown tape")
    assert runtime.cf_rt_tape_free(0) == 0 and runtime.cf_rt_tape_free(-1) == 0


def test_callback_without_trampoline_reports_not_supported(runtime):
    runtime.cf_rt_set_callback_trampoline(None)
    assert runtime.cf_rt_callback(1, 0, 0, None) == 5  # CF_ERR_NOT_SUPPORTED
    assert b"no Python callback trampoline" in runtime_library().cf_rt_error_message()
    runtime_library().cf_rt_clear_error()
