"""cofactor.measure's wires argument: one wire, also as an array of one element (a traced
argument or a numpy constant); more than one is a TypeError naming the problem. Outside a
QNode or outside qjit the error says where measure can be used. Expected outcomes follow
from the circuits (X flips the wire)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import CompileError, measure, qjit


def _circuit(wires):
    @qml.qnode(qml.device("default.qubit", wires=2))
    def circuit(w):
        qml.PauliX(0)
        return measure(wires=w if wires is None else wires)

    return circuit


def test_one_element_array_wire_traced_and_constant():
    assert qjit(_circuit(None))(np.array([0])) == 1
    assert qjit(_circuit(None))(np.array([1])) == 0
    assert qjit(_circuit(np.array([0])))(0) == 1


def test_several_wires_in_an_array_are_a_type_error():
    with pytest.raises(TypeError, match="Measure is only supported on 1 qubit"):
        qjit(_circuit(np.array([0, 1])))(0)
    with pytest.raises(TypeError, match="Measure is only supported on 1 qubit"):
        qjit(_circuit(None))(np.array([0, 1]))


def test_measure_outside_a_qnode_or_qjit():
    with pytest.raises(CompileError, match="can only be used from within @qjit"):
        measure(0)

    @qjit
    def not_a_circuit(x):
        measure(0)
        return x

    with pytest.raises(CompileError, match=r"can only be used from within a qml\.qnode"):
        not_a_circuit(1.0)
