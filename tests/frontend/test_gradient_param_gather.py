"""Gradients of QNodes whose gate parameters are elements of an array (issue 13, the
StronglyEntanglingLayers family): --cofactor-split-qnodes copies runs of such elements into
`params` with one loop, and the gate table of the quantum part reads `params` directly.
Every case is compared with PennyLane's default.qubit gradient, including parameters that
do not qualify (computed from the array, constants between the layers, strided, reversed or
repeated elements), which keep the per-element path."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import grad, qjit

WIRES = 4


def _ref_grad(circuit, *args, argnum=0):
    pargs = [qml.numpy.array(a, requires_grad=(i == argnum)) for i, a in enumerate(args)]
    return qml.grad(circuit, argnums=argnum)(*pargs)


def _pair(body, wires: int = WIRES):
    """The same circuit body as a default.qubit and a compiled (lightning) QNode."""
    ref = qml.qnode(qml.device("default.qubit", wires=wires))(body)
    compiled = qml.qnode(qml.device("lightning.qubit", wires=wires))(body)
    return ref, compiled


def _weights(layers: int, wires: int = WIRES, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-np.pi, np.pi, size=(layers, wires, 3))


@pytest.mark.parametrize("layers", [1, 3, 6])
def test_strongly_entangling_layers(layers):
    def body(w):
        qml.StronglyEntanglingLayers(w, wires=range(WIRES))
        return qml.expval(qml.PauliZ(0))

    ref, compiled = _pair(body)
    w = _weights(layers)
    np.testing.assert_allclose(qjit(grad(compiled))(w), _ref_grad(ref, w), atol=1e-12)


def test_two_measurements_and_classical_postprocessing():
    def body(w):
        qml.StronglyEntanglingLayers(w, wires=range(WIRES))
        return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliX(2) @ qml.PauliY(3))

    ref, compiled = _pair(body)

    def cost_ref(w):
        a, b = ref(w)
        return a * b + qml.math.sin(a)

    @qjit
    @grad
    def cost(w):
        a, b = compiled(w)
        return a * b + np.sin(a)

    w = _weights(4, seed=5)
    np.testing.assert_allclose(cost(w), _ref_grad(cost_ref, w), atol=1e-12)


@pytest.mark.parametrize("transform", ["scale", "sin"])
def test_parameters_computed_outside_the_qnode(transform):
    """`weights * 2` / `np.sin(weights)` computed in the compiled function: the QNode gets
    the computed array as its input, and Enzyme carries the chain rule through it."""

    def body(w):
        qml.StronglyEntanglingLayers(w, wires=range(WIRES))
        return qml.expval(qml.PauliZ(1))

    ref, compiled = _pair(body)
    f = (lambda w: w * 2.0) if transform == "scale" else np.sin
    fr = (lambda w: w * 2.0) if transform == "scale" else qml.math.sin

    @qjit
    @grad
    def cost(w):
        return compiled(f(w))

    w = _weights(3, seed=7)
    np.testing.assert_allclose(cost(w), _ref_grad(lambda w: ref(fr(w)), w), atol=1e-12)


@pytest.mark.parametrize("transform", ["scale", "sin"])
def test_parameters_computed_inside_the_qnode(transform):
    def make(sin):
        def body(w):
            qml.StronglyEntanglingLayers(sin(w) if transform == "sin" else w * 2.0, range(WIRES))
            return qml.expval(qml.PauliZ(1))

        return body

    ref = qml.qnode(qml.device("default.qubit", wires=WIRES))(make(qml.math.sin))
    compiled = qml.qnode(qml.device("lightning.qubit", wires=WIRES))(make(np.sin))
    w = _weights(3, seed=8)
    np.testing.assert_allclose(qjit(grad(compiled))(w), _ref_grad(ref, w), atol=1e-12)


def test_partially_trainable():
    """Only the first argument is differentiated; constants and the second argument's
    elements sit between the layers and break the runs of consecutive elements."""

    def body(w, x):
        for layer in range(w.shape[0]):
            qml.StronglyEntanglingLayers(w[layer : layer + 1], wires=range(WIRES))
            qml.RX(0.3, wires=layer % WIRES)
            qml.RY(x[layer], wires=(layer + 1) % WIRES)
        return qml.expval(qml.PauliZ(0) @ qml.PauliZ(2))

    ref, compiled = _pair(body)
    w = _weights(4, seed=9)
    x = np.array([0.1, -0.4, 0.8, 1.3])
    got = qjit(grad(compiled, argnums=0))(w, x)
    np.testing.assert_allclose(got, _ref_grad(ref, w, x, argnum=0), atol=1e-12)
    got_x = qjit(grad(compiled, argnums=1))(w, x)
    np.testing.assert_allclose(got_x, _ref_grad(ref, w, x, argnum=1), atol=1e-12)


@pytest.mark.parametrize("order", ["strided", "reversed", "repeated"])
def test_element_orders(order):
    """Elements at a stride of 2, in reverse order, and each used twice."""

    def body(x):
        n = x.shape[0]
        if order == "strided":
            for i in range(0, n, 2):
                qml.RX(x[i], wires=i % WIRES)
                qml.CNOT(wires=[i % WIRES, (i + 1) % WIRES])
        elif order == "reversed":
            for i in reversed(range(n)):
                qml.RY(x[i], wires=i % WIRES)
                qml.CZ(wires=[i % WIRES, (i + 1) % WIRES])
        else:
            for i in range(n):
                qml.RX(x[i], wires=i % WIRES)
                qml.RY(x[i], wires=(i + 2) % WIRES)
                qml.CNOT(wires=[i % WIRES, (i + 1) % WIRES])
        return qml.expval(qml.PauliZ(0) @ qml.PauliX(1))

    ref, compiled = _pair(body)
    x = np.random.default_rng(11).uniform(-2, 2, size=24)
    np.testing.assert_allclose(qjit(grad(compiled))(x), _ref_grad(ref, x), atol=1e-12)


def test_one_array_in_two_qnodes():
    def body_a(w):
        qml.StronglyEntanglingLayers(w, wires=range(WIRES))
        return qml.expval(qml.PauliZ(0))

    def body_b(w):
        qml.StronglyEntanglingLayers(w, wires=range(WIRES), ranges=[1] * w.shape[0])
        return qml.expval(qml.PauliY(3))

    ref_a, comp_a = _pair(body_a)
    ref_b, comp_b = _pair(body_b)

    @qjit
    @grad
    def cost(w):
        return comp_a(w) * comp_b(w)

    w = _weights(3, seed=13)
    np.testing.assert_allclose(cost(w), _ref_grad(lambda w: ref_a(w) * ref_b(w), w), atol=1e-12)
