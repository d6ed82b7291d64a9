"""Gradients of QNodes with no classical code to differentiate, computed without Enzyme
(--cofactor-direct-qnode-gradients: the runtime's Jacobian, scattered into the inputs'
elements the gate parameters were read from). Against default.qubit; each test also checks
which route the compiler took (no `__enzyme_autodiff` in the LLVM IR for the direct one),
so that a pass that stops applying, or applies where it must not, fails here."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import for_loop, grad, jacobian, qjit, value_and_grad

TOL = 1e-10
pnp = qml.numpy


def _uses_enzyme(compiled) -> bool:
    return "__enzyme_autodiff" in compiled.llvmir


def _gates(x, y=None):
    """Gate parameters straight from x (and y): repeated elements, a value used twice, a
    constant, a three-parameter gate, a controlled gate and a Pauli rotation."""
    qml.RX(x[0], wires=0)
    qml.RY(x[1], wires=1)
    qml.CNOT(wires=[0, 1])
    qml.RZ(0.3, wires=0)
    qml.Rot(x[2], x[0], x[3], wires=1)
    qml.CRY(x[1], wires=[1, 0])
    qml.PauliRot(x[3], "XY", wires=[0, 1])
    a = x[2]  # one traced value, two gate parameters
    qml.RZ(a, wires=1)
    qml.RX(a, wires=0)
    if y is not None:
        qml.RX(y[1, 0], wires=1)
        qml.RY(y[0, 1], wires=0)


X = np.array([0.4, -1.1, 0.7, 2.3])
Y = np.array([[0.2, -0.5], [1.3, 0.8]])


def _qnode(device_name, diff_method, body, measure):
    @qml.qnode(qml.device(device_name, wires=2), diff_method=diff_method)
    def circuit(*args):
        body(*args)
        return measure()

    return circuit


def _z0():
    return qml.expval(qml.PauliZ(0))


def _zx():
    return qml.expval(qml.PauliZ(0) @ qml.PauliX(1))


def _y1():
    return qml.expval(qml.PauliY(1))


def _two():
    return _zx(), _y1()


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_grad_of_a_qnode_is_direct_and_exact(diff_method):
    compiled = qjit(grad(_qnode("lightning.qubit", diff_method, _gates, _z0)))
    got = compiled(X)
    ref = qml.grad(_qnode("default.qubit", "backprop", _gates, _z0))(pnp.array(X))
    assert np.allclose(got, ref, atol=TOL, rtol=0)
    assert not _uses_enzyme(compiled)


def test_jacobian_of_two_measurements():
    compiled = qjit(jacobian(_qnode("lightning.qubit", "adjoint", _gates, _two)))
    got = compiled(X)
    ref = [
        qml.grad(_qnode("default.qubit", "backprop", _gates, measure))(pnp.array(X))
        for measure in (_zx, _y1)
    ]
    for g, r in zip(got, ref, strict=True):
        assert np.allclose(g, r, atol=TOL, rtol=0)
    assert not _uses_enzyme(compiled)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_two_inputs_and_argnums(argnums):
    compiled = qjit(grad(_qnode("lightning.qubit", "adjoint", _gates, _z0), argnums=argnums))
    got = compiled(X, Y)
    ref = qml.grad(_qnode("default.qubit", "backprop", _gates, _z0), argnums=argnums)(
        pnp.array(X), pnp.array(Y)
    )
    if isinstance(argnums, tuple):
        for g, r in zip(got, ref, strict=True):
            assert np.allclose(g, r, atol=TOL, rtol=0)
    else:
        assert np.allclose(got, ref, atol=TOL, rtol=0)
    assert not _uses_enzyme(compiled)


def test_value_and_grad():
    compiled = qjit(value_and_grad(_qnode("lightning.qubit", "adjoint", _gates, _z0)))
    value, g = compiled(X)
    ref_circuit = _qnode("default.qubit", "backprop", _gates, _z0)
    assert value == pytest.approx(float(ref_circuit(X)), abs=TOL)
    assert np.allclose(g, qml.grad(ref_circuit)(pnp.array(X)), atol=TOL, rtol=0)
    assert not _uses_enzyme(compiled)


def test_descent_loop_reuses_the_direct_gradient():
    circuit = _qnode("lightning.qubit", "adjoint", _gates, _z0)
    g = grad(circuit)

    @qjit
    def descend(x):
        @for_loop(0, 5, 1)
        def step(i, x):
            return x - 0.2 * g(x)

        return step(x)

    ref_circuit = _qnode("default.qubit", "backprop", _gates, _z0)
    x = pnp.array(X)
    for _ in range(5):
        x = x - 0.2 * qml.grad(ref_circuit)(x)
    assert np.allclose(descend(X), x, atol=1e-9, rtol=0)
    assert not _uses_enzyme(descend)


def _scaled(x):
    qml.RX(2.0 * x[0], wires=0)  # classical code between the input and the gate
    qml.RY(x[1], wires=1)
    qml.CNOT(wires=[0, 1])


def _post(circuit):
    return lambda x: circuit(x) ** 2  # classical code after the QNode


@pytest.mark.parametrize(
    "make",
    [
        lambda dev, method: _qnode(dev, method, _scaled, _z0),
        lambda dev, method: _post(_qnode(dev, method, _gates, _z0)),
    ],
    ids=["classical-preprocessing", "classical-postprocessing"],
)
def test_classical_code_still_goes_through_enzyme(make):
    compiled = qjit(grad(make("lightning.qubit", "adjoint")))
    got = compiled(X)
    ref = qml.grad(make("default.qubit", "backprop"))(pnp.array(X))
    assert np.allclose(got, ref, atol=TOL, rtol=0)
    assert _uses_enzyme(compiled)
