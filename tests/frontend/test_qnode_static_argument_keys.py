"""A QNode called twice in one trace with the same static values in different places,
`circuit(x, 0.4)` and `circuit(0.4, x)`, or with equal static values of different types,
`circuit(x, 2)` and `circuit(x, 2.0)`, gets a circuit per call pattern. The trace keyed its
circuits by the static values alone, so the second call silently reused the first one's
circuit: `circuit(0.4, x)` returned `circuit(x, 0.4)`'s value (and gradient), e.g. inside
the branches of a `cofactor.switch`. Found by a hand probe (switch under grad).
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain

_dev = qml.device("default.qubit", wires=2)


@qml.qnode(_dev)
def _circuit(x, y):
    qml.RX(x, 0)
    qml.RY(y, 1)
    qml.CNOT([0, 1])
    qml.RZ(x * y, 1)
    return qml.expval(qml.Z(0) @ qml.X(1))


def test_static_value_in_a_different_place():
    both = cofactor.qjit(lambda x: (_circuit(x, 0.4), _circuit(0.4, x)))(0.6)
    assert np.allclose(both, [_circuit(0.6, 0.4), _circuit(0.4, 0.6)], atol=1e-12)


def test_switch_branches_and_their_gradients():
    def program(x, k):
        @cofactor.switch(k)
        def branch(x):
            return np.sin(x)

        @branch.branch(1)
        def branch(x):
            return _circuit(x, 0.4)

        @branch.branch(2)
        def branch(x):
            return _circuit(0.4, x)

        return branch(x)

    value = cofactor.qjit(program)
    gradient = cofactor.qjit(cofactor.grad(program, argnums=0))
    plain = qml.QNode(_circuit.func, _dev, diff_method="backprop")
    expected = qml.grad(lambda x: plain(0.4, x))(qml.numpy.array(0.6, requires_grad=True))
    assert np.isclose(value(0.6, 2), _circuit(0.4, 0.6), atol=1e-12)
    assert np.isclose(gradient(0.6, 2), expected, atol=1e-10)


def test_equal_static_values_of_different_types():
    @qml.qnode(_dev)
    def layers(x, n):
        for _ in range(n if isinstance(n, int) else 1):
            qml.RX(x, 0)
        return qml.expval(qml.Z(0))

    got = cofactor.qjit(lambda x: (layers(x, 2), layers(x, 2.0)))(0.3)
    assert np.allclose(got, [np.cos(0.6), np.cos(0.3)], atol=1e-12)
