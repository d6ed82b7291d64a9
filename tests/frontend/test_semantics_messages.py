"""Misleading messages fixed (reliability defect D19)."""

from __future__ import annotations

import ctypes

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import runtime_lib, toolchain
from cofactor.errors import RuntimeExecutionError

pytestmark = pytest.mark.needs_toolchain


def test_null_parameter_array_is_named():
    lib = runtime_lib.load_runtime(toolchain.find("runtime"))
    gates = runtime_lib.gate_ids(lib)
    lib.cf_rt_clear_error()
    assert lib.cf_rt_device_acquire(1, 0, 0) == 0
    try:
        wires = np.zeros(1, dtype=np.int64)
        wires_ptr = runtime_lib.as_pointer(wires, ctypes.c_int64)
        lib.cf_rt_gate(gates["RX"][0], None, 1, wires_ptr, 1, 0, None, None, 0)
        with pytest.raises(RuntimeExecutionError, match="RX: the parameter array is NULL"):
            runtime_lib.check_error(lib)
    finally:
        lib.cf_rt_clear_error()
        lib.cf_rt_device_release()


def test_compiled_circuit_inside_a_callback_of_a_circuit_says_so():
    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def inner(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.Z(0))

    @cofactor.pure_callback
    def through_inner(x) -> float:
        return float(inner(x))

    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def outer(x):
        qml.RY(through_inner(x), wires=0)
        return qml.expval(qml.Z(0))

    with pytest.raises(RuntimeExecutionError, match="ran a compiled quantum circuit while"):
        outer(0.3)

    # from the classical part of a program the same callback works
    @cofactor.qjit
    def classical(x):
        return through_inner(x) * 2.0

    assert classical(0.3) == pytest.approx(2 * np.cos(0.3))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"wires": [0, 1]}, "Only one element is supported for the 'wires' parameter"),
        ({"wires": 0, "postselect": 2}, "postselect must be '0' or '1'"),
        ({"wires": 0, "postselect": "1"}, "postselect must be '0' or '1'"),
    ],
)
def test_bad_measure_arguments_are_type_errors(kwargs, match):
    """Catalyst's measure raises TypeError for these."""

    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def c():
        qml.measure(**kwargs)
        return qml.probs()

    with pytest.raises(TypeError, match=match):
        qml.qjit(c, compiler="cofactor")()


def test_device_with_a_traced_number_of_wires_is_named():
    # PennyLane takes the traced n of qml.device(..., wires=n) as one wire's label; the
    # message was "wire 0 is not on the device (wires: [Tracer(...)])"
    def workflow(n):
        @qml.qnode(qml.device("default.qubit", wires=n))
        def circuit():
            qml.X(wires=0)
            return qml.probs()

        return circuit()

    with pytest.raises(cofactor.CompileError, match=r"wires are a traced value.*static_argnums"):
        cofactor.qjit(workflow)(2)
    np.testing.assert_array_equal(cofactor.qjit(workflow, static_argnums=0)(2), [0, 0, 1, 0])
