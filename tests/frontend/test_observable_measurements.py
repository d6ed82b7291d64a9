"""Measurements in an observable's eigenbasis (`qml.probs(op=...)`, `qml.sample(obs)`) next
to other measurements: each sees the circuit's final state, as in PennyLane
(tracing/observable_probs.py). Values and Jacobians are compared with default.qubit
(backprop). Before the fix, the diagonalizing gates of one measurement stayed applied for
the measurements after it, and the Jacobians saw them for the ones before it."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor
from cofactor.errors import DifferentiableCompileError

A = np.array([[1.0, 0.5j, 0, 0], [-0.5j, 2, 0, 0.3], [0, 0, -1, 0], [0, 0.3, 0, 0.5]])


def _probs_x_then_wires(a):
    qml.RX(a, 0)
    qml.RY(2 * a, 1)
    return qml.probs(op=qml.PauliX(1)), qml.probs(wires=[1])


def _wires_then_probs_x(a):
    qml.RX(a, 0)
    qml.RY(2 * a, 1)
    qml.CNOT([1, 2])
    return qml.probs(wires=[2, 0, 1]), qml.probs(op=qml.PauliX(1)), qml.expval(qml.PauliY(2))


def _pauli_word_then_state(a):
    qml.RX(a, 0)
    qml.RY(2 * a, 1)
    qml.CNOT([0, 2])
    return qml.probs(op=qml.PauliY(1) @ qml.PauliX(0)), qml.probs(op=qml.Hadamard(2)), qml.state()


def _hermitian_then_expval(a):
    qml.RX(a, 0)
    qml.RY(2 * a, 1)
    qml.CRZ(a, [1, 2])
    return qml.probs(op=qml.Hermitian(A, wires=[1, 0])), qml.expval(qml.PauliZ(1))


CIRCUITS = [_probs_x_then_wires, _wires_then_probs_x, _pauli_word_then_state,
            _hermitian_then_expval]  # fmt: skip


def _flat(results):
    return np.hstack([np.ravel(r) for r in results])


@pytest.mark.parametrize("body", CIRCUITS)
def test_values_match_default_qubit(body):
    ref = qml.QNode(body, qml.device("default.qubit", wires=3))
    got = cofactor.qjit(qml.QNode(body, qml.device("default.qubit", wires=3)))(0.4)
    np.testing.assert_allclose(_flat(got), _flat(ref(0.4)), atol=1e-12)


@pytest.mark.parametrize("diff_method", ["best", "parameter-shift"])
@pytest.mark.parametrize("body", [c for c in CIRCUITS if c is not _pauli_word_then_state])
def test_jacobians_match_default_qubit(body, diff_method):
    ref = qml.QNode(body, qml.device("default.qubit", wires=3), diff_method="backprop")
    circuit = qml.QNode(body, qml.device("default.qubit", wires=3), diff_method=diff_method)
    got = cofactor.qjit(cofactor.jacobian(circuit))(0.4)
    expected = qml.jacobian(lambda a: qml.math.hstack([qml.math.ravel(r) for r in ref(a)]))(
        pnp.array(0.4)
    )
    np.testing.assert_allclose(_flat(got), expected, atol=1e-10)


def test_sample_of_an_observable_leaves_the_state_for_the_next_sample():
    @qml.set_shots(4000)
    @qml.qnode(qml.device("default.qubit", wires=1, seed=7))
    def circuit(a):
        qml.RX(a, 0)
        return qml.sample(qml.PauliX(0)), qml.sample(wires=[0]), qml.probs(op=qml.PauliX(0))

    x_samples, bits, probs_x = cofactor.qjit(circuit)(0.4)
    # <X> = 0 on RX(a)|0>; P(1) = sin(a/2)**2 = 0.039 in the computational basis (it was
    # 0.5 with the X rotation left on the state)
    assert abs(np.mean(x_samples)) < 0.06
    assert abs(np.mean(bits) - np.sin(0.2) ** 2) < 0.015
    np.testing.assert_allclose(probs_x, [0.5, 0.5], atol=0.04)


def test_gradient_of_probabilities_of_an_observable_with_shots():
    # differentiated with shots, probs(op=...) is the projectors' sampled expectation values
    @qml.set_shots(20000)
    @qml.qnode(qml.device("default.qubit", wires=2, seed=4), diff_method="parameter-shift")
    def circuit(a):
        qml.RX(a, 0)
        return qml.probs(op=qml.PauliY(0)), qml.probs(wires=[0])

    jac = cofactor.qjit(cofactor.jacobian(circuit))(0.4)
    np.testing.assert_allclose(jac[0], [-np.cos(0.4) / 2, np.cos(0.4) / 2], atol=0.03)
    np.testing.assert_allclose(jac[1], [-np.sin(0.4) / 2, np.sin(0.4) / 2], atol=0.03)


def test_gradient_of_rotated_probabilities_is_refused_not_wrong():
    # on more wires than the projectors cover, probs(op=...) is measured on the rotated
    # state, which the Jacobians cannot place between other measurements: a clear error
    # instead of a wrong number
    word = qml.prod(*[qml.PauliX(w) for w in range(5)])

    @qml.qnode(qml.device("default.qubit", wires=5), diff_method="parameter-shift")
    def circuit(a):
        qml.RX(a, 0)
        return qml.probs(op=word), qml.probs(wires=[0])

    values = cofactor.qjit(circuit)(0.4)  # (values alone are measured and rotated back)
    expected = qml.QNode(circuit.func, qml.device("default.qubit", wires=5))(0.4)
    for g, e in zip(values, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)
    with pytest.raises(DifferentiableCompileError, match=r"X\(0\)"):
        cofactor.qjit(cofactor.jacobian(circuit))(0.4)


_SAMPLED = [
    qml.Hermitian(np.diag([1.0, 2.0, 3.0, 4.0]), wires=[1, 0]),
    qml.Hermitian(np.array([[2.0, 1.0], [1.0, -1.0]]), wires=0),
    qml.Projector([1], wires=[0]),
    2.0 * qml.PauliZ(0),
    qml.PauliZ(0) + qml.PauliX(1),
    qml.PauliX(0) @ qml.Hadamard(1),
]


@pytest.mark.parametrize("obs", _SAMPLED, ids=lambda o: type(o).__name__)
def test_samples_of_observables_are_eigenvalues(obs):
    # they were the raw bits (shots x wires) for anything but a Pauli word
    @qml.set_shots(3000)
    @qml.qnode(qml.device("default.qubit", wires=2, seed=11))
    def circuit(a):
        qml.RX(a, 0)
        qml.CNOT([0, 1])
        return qml.sample(obs)

    samples = cofactor.qjit(circuit)(0.9)
    eigvals = np.unique(np.round(np.real(obs.eigvals()), 12))
    assert samples.shape == (3000,)
    assert set(np.round(samples, 12)) <= set(eigvals)
    exact = qml.QNode(lambda a: (qml.RX(a, 0), qml.CNOT([0, 1]), qml.expval(obs))[-1],
                      qml.device("default.qubit", wires=2))(0.9)  # fmt: skip
    spread = np.max(np.abs(eigvals)) * 4 / np.sqrt(3000)  # four standard deviations at most
    assert abs(np.mean(samples) - exact) < spread


def test_sample_of_an_observable_with_traced_data_is_refused():
    @qml.set_shots(10)
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(m):
        return qml.sample(qml.Hermitian(m, wires=0))

    with pytest.raises(cofactor.CompileError, match=r"eigenvalues are not known"):
        cofactor.qjit(circuit)(np.eye(2))
