"""Gradients of programs where a QNode result (or a raw input) is the value of a branch or
a loop's carry without any arithmetic on the way, e.g.

    @cofactor.cond(x > 0.5)
    def branch():
        return circuit(x, 2 * x)      # the QNode's result as it is
    @branch.otherwise
    def branch():
        return np.sin(x) ** 2

Enzyme stopped on them with an internal CompileError ("[opt] opt failed ... Cannot deduce
type of phi"): the QNode's result buffer is written only by the quantum part (opaque to
Enzyme) and a loop's first carry was a plain load of the input, so the phi joining them had
no type. The gradient passes now tell Enzyme that those buffers hold doubles
(`__enzyme_double`, GradientUtils hintDoubles). Found by test_fuzz_hybrid_flow.py.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain

pnp = qml.numpy
_dev = qml.device("default.qubit", wires=2)


@qml.qnode(_dev)
def _expval(x, y):
    qml.RX(x, 0)
    qml.RY(y, 1)
    qml.CNOT([0, 1])
    qml.RZ(x * y, 1)
    return qml.expval(qml.Z(0) @ qml.X(1) + 0.5 * qml.Z(1))


@qml.qnode(_dev, diff_method="parameter-shift")
def _probs(w):
    qml.RY(w[0], 0)
    qml.RX(w[1], 1)
    qml.CNOT([1, 0])
    return qml.probs(wires=[0, 1])


def _backprop(qnode):
    return qml.QNode(qnode.func, _dev, diff_method="backprop")


def _reference_grad(fn, *args):
    return qml.grad(fn)(*(pnp.array(a, requires_grad=True) for a in args))


@pytest.mark.parametrize("x", [0.2, 0.8])
def test_qnode_result_as_a_branch_value(x):
    def program(x, circuit=_expval):
        @cofactor.cond(x > 0.5)
        def branch():
            return circuit(x, x * 2)

        @branch.otherwise
        def branch():
            return np.sin(x) ** 2

        return branch()

    def plain(x):
        return _backprop(_expval)(x, x * 2) if x > 0.5 else pnp.sin(x) ** 2

    got = cofactor.qjit(cofactor.grad(program))(x)
    assert np.isclose(got, _reference_grad(plain, x), atol=1e-10)


def test_for_loop_carrying_the_qnode_result_from_the_input():
    def program(x):
        @cofactor.for_loop(0, 3, 1)
        def loop(i, s):
            return _expval(s, x)

        return loop(x)

    def plain(x):
        s = x
        for _ in range(3):
            s = _backprop(_expval)(s, x)
        return s

    got = cofactor.qjit(cofactor.grad(program))(0.8)
    assert np.isclose(got, _reference_grad(plain, 0.8), atol=1e-10)


def test_while_loop_carrying_the_qnode_result_from_the_input():
    def program(x):
        @cofactor.while_loop(lambda s, k: k < 3)
        def loop(s, k):
            return _expval(s, x), k + 1

        return loop(x, 0)[0]

    def plain(x):
        s = x
        for _ in range(3):
            s = _backprop(_expval)(s, x)
        return s

    got = cofactor.qjit(cofactor.grad(program))(0.8)
    assert np.isclose(got, _reference_grad(plain, 0.8), atol=1e-10)


def test_probabilities_as_a_branch_value_under_jacobian():
    def program(x):
        @cofactor.cond(x[0] > 0.0)
        def branch():
            return _probs(x)

        @branch.otherwise
        def branch():
            return _probs(x * 0.5)

        return branch()

    def plain(x):
        circuit = _backprop(_probs)
        return circuit(x) if x[0] > 0.0 else circuit(x * 0.5)

    x = np.array([0.45, -0.35])
    got = cofactor.qjit(cofactor.jacobian(program))(x)
    expected = qml.jacobian(plain)(pnp.array(x, requires_grad=True))
    assert np.allclose(got, expected, atol=1e-10)
