"""Tracing without compiling: the IR the frontend emits, and trace-time errors.

These run without cofactor-opt or the runtime (only mlir-opt-15 for the parse check)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pennylane as qml
import pytest

from cofactor import CompileError, cond, for_loop, measure
from cofactor.jit import QJIT
from cofactor.launcher import BufferSpec
from cofactor.tracing import context

F64 = BufferSpec((), np.dtype(np.float64))
I64 = BufferSpec((), np.dtype(np.int64))


def trace(fn, *specs):
    tree = ("tuple", tuple("*" for _ in specs))
    return QJIT(fn)._trace(tree, specs, ())


def test_entry_point_signature_is_destination_passing():
    mlir, _, out_leaves, has_quantum = trace(
        lambda x, v: (x * 2, v + 1), F64, BufferSpec((3,), np.dtype(np.float64))
    )
    # inputs, then one out-parameter per result; the lambda's name becomes a C identifier
    assert (
        "func.func @lambda(%0: memref<f64>, %1: memref<3xf64>, %2: memref<f64>, "
        "%3: memref<3xf64>) attributes {llvm.emit_c_interface, "
        'passthrough = ["noinline"], llvm.linkage = #llvm.linkage<internal>}' in mlir
    )
    assert out_leaves == [
        BufferSpec((), np.dtype(np.float64)),
        BufferSpec((3,), np.dtype(np.float64)),
    ]
    assert not has_quantum
    assert mlir.count("func.return") == 1


def test_complex_arrays_are_memrefs_with_a_trailing_pair():
    mlir, *_ = trace(lambda z: z * 1j, BufferSpec((2,), np.dtype(np.complex128)))
    assert "memref<2x2xf64>" in mlir


def test_constants_fold():
    mlir, *_ = trace(lambda x: x + (2.0 * 3.0) ** 2, F64)
    assert "3.600000e+01" in mlir


def test_square_becomes_a_multiplication():
    mlir, *_ = trace(lambda x: x**2, F64)
    assert "arith.mulf" in mlir and "powf" not in mlir


def test_python_if_on_tracer_raises_at_trace_time():
    def f(x):
        return x if x > 0 else -x

    with pytest.raises(CompileError, match="cofactor.cond"):
        trace(f, F64)


def test_traced_value_as_range_bound_points_to_for_loop():
    def f(n):
        return sum(range(n))

    with pytest.raises(CompileError, match="cofactor.for_loop"):
        trace(f, I64)


def test_unsupported_numpy_function_named():
    with pytest.raises(CompileError, match="numpy.*argsort"):
        trace(lambda v: np.argsort(v), BufferSpec((3,), np.dtype(np.float64)))


def test_unsupported_ufunc_dtype_combination():
    with pytest.raises(CompileError, match="not supported"):
        trace(lambda x: np.sign(x), BufferSpec((), np.dtype(np.complex128)))


def test_for_loop_emits_one_loop_op_with_carried_values():
    def f(n, x):
        return for_loop(0, n, 1)(lambda i, acc: acc * x)(1.0)

    mlir, *_ = trace(f, I64, F64)
    # an scf.while (the index is carried with the values) rather than an scf.for, so that
    # the loop can also stop on Ctrl-C (tracing/interrupts.py)
    assert "scf.while" in mlir and "(index, f64) -> (index, f64)" in mlir
    assert "func.call @cofactor_interrupted" in mlir


def test_cond_emits_scf_if():
    mlir, *_ = trace(lambda x: cond(x > 0)(lambda: x).otherwise(lambda: -x)(), F64)
    assert "scf.if" in mlir


def test_qnode_becomes_its_own_function():
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        m = measure(1)
        return qml.expval(qml.PauliZ(0)), m

    mlir, _, _, has_quantum = trace(lambda x: circuit(x), F64)
    assert has_quantum
    assert "attributes {cofactor.qnode, cofactor.diff_method" in mlir
    assert (
        '"quantum.device_acquire"() {num_qubits = 2 : i64, shots = 0 : i64, seed = -1 : i64}'
        in mlir
    )
    # adjoint and ctrl_values are left out when they have their defaults (false, none)
    assert '{gate = "RX", num_params = 1 : i64, num_wires = 1 : i64} : (f64, i64) -> ()' in mlir
    assert '"quantum.measure"' in mlir and "func.call @circuit" in mlir


def test_unsupported_device_error_names_it():
    dev = qml.device("default.mixed", wires=1)
    circuit = qml.qnode(dev)(lambda: qml.expval(qml.PauliZ(0)))
    with pytest.raises(CompileError, match="default.mixed"):
        trace(lambda: circuit())


def test_trace_context_is_cleaned_up():
    with pytest.raises(CompileError):
        trace(lambda x: bool(x), F64)
    assert not context.is_tracing()
    assert qml.QNode.__call__.__name__ == "__call__"


@pytest.mark.skipif(shutil.which("mlir-opt-15") is None, reason="mlir-opt-15 not installed")
def test_classical_module_parses_in_mlir_15():
    def f(m, i):
        return {"s": np.sum(np.sin(m) * m.T.T, axis=0), "d": m[i], "t": np.tan(m[0, 0]) % 2.0}

    mlir, *_ = trace(f, BufferSpec((2, 2), np.dtype(np.float64)), I64)
    proc = subprocess.run(
        ["mlir-opt-15", "--convert-scf-to-cf", "--convert-math-to-llvm", "--convert-arith-to-llvm",
         "--convert-memref-to-llvm", "--convert-func-to-llvm", "--reconcile-unrealized-casts"],
        input=mlir, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
