"""Gate-parameter numbering in differentiated QNodes (--cofactor-split-qnodes): constants in
straight-line code, a counter through loops and branches (issue 13, "the tape stays small").
Gradients against default.qubit, with gates before, inside and after each region."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import cond, for_loop, grad, qjit


def _reference(x: np.ndarray) -> np.ndarray:
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x[0], wires=0)
        for i in range(3):
            qml.RY(x[i] * 0.5, wires=1)
            qml.CNOT(wires=[0, 1])
        qml.RZ(x[3], wires=0)
        qml.Rot(x[1], x[2], x[3], wires=1)
        if x[0] > 0:
            qml.RX(x[1], wires=1)
        else:
            qml.RY(x[2], wires=1)
        qml.RX(x[2] * x[3], wires=0)
        qml.CRY(x[0], wires=[0, 1])
        return qml.expval(qml.PauliZ(0) @ qml.PauliZ(1))

    return qml.grad(circuit)(qml.numpy.array(x, requires_grad=True))


def _compiled():
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def circuit(x):
        qml.RX(x[0], wires=0)

        @for_loop(0, 3, 1)
        def body(i):
            qml.RY(x[i] * 0.5, wires=1)
            qml.CNOT(wires=[0, 1])

        body()
        qml.RZ(x[3], wires=0)
        qml.Rot(x[1], x[2], x[3], wires=1)

        @cond(x[0] > 0)
        def branch():
            qml.RX(x[1], wires=1)

        @branch.otherwise
        def branch():
            qml.RY(x[2], wires=1)

        branch()
        qml.RX(x[2] * x[3], wires=0)
        qml.CRY(x[0], wires=[0, 1])
        return qml.expval(qml.PauliZ(0) @ qml.PauliZ(1))

    return qjit(grad(circuit))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_gates_before_inside_and_after_loops_and_branches(sign):
    x = np.array([0.7 * sign, 0.3, -1.1, 0.45])
    np.testing.assert_allclose(_compiled()(x), _reference(x), atol=1e-12)
