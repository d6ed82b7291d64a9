"""`qml.density_matrix` under qjit (tracing/density.py) gives default.qubit's matrices, on
wire subsets in any order, string labels and devices without wires; it was a CompileError
("measurement DensityMatrixMP is not supported")."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor.errors import CompileError, DifferentiableCompileError


def _body(a):
    qml.RX(a, 0)
    qml.CNOT([0, 1])
    qml.RY(a, 2)
    qml.CRX(a, [2, 0])
    return (
        qml.density_matrix(wires=[2, 0]),
        qml.density_matrix(wires=[1]),
        qml.density_matrix(wires=[0, 1, 2]),
        qml.expval(qml.PauliZ(0)),
    )


def test_wire_subsets_match_default_qubit():
    dev = qml.device("default.qubit", wires=3)
    got = cofactor.qjit(qml.QNode(_body, dev))(0.7)
    expected = qml.QNode(_body, dev)(0.7)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)


@pytest.mark.parametrize("wires", [["a", "b"], None])
def test_labels_and_devices_without_wires(wires):
    dev = qml.device("default.qubit", wires=wires)
    w0, w1 = ("a", "b") if wires else (3, 1)

    def body(a):
        qml.RX(a, w1)
        qml.CNOT([w1, w0])
        qml.RY(a / 3, w0)
        return qml.density_matrix(wires=[w0, w1]), qml.density_matrix(wires=[w1])

    got = cofactor.qjit(qml.QNode(body, dev))(0.7)
    expected = qml.QNode(body, dev)(0.7)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)


def test_shots_and_gradients_are_refused():
    dev = qml.device("default.qubit", wires=2)

    def body(a):
        qml.RX(a, 0)
        return qml.density_matrix(wires=[0])

    with pytest.raises(CompileError, match="analytic"):
        cofactor.qjit(qml.set_shots(qml.QNode(body, dev), 10))(0.3)
    with pytest.raises(DifferentiableCompileError):
        cofactor.qjit(cofactor.jacobian(qml.QNode(body, dev)))(0.3)
