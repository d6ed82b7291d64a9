"""Programs shaped like PennyLane's docs and demos (templates, operators whose matrix is a
function of traced parameters) give default.qubit's numbers under qjit."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import scipy.linalg
from pennylane import numpy as pnp

import cofactor
from cofactor.errors import CompileError


@pytest.mark.parametrize("scale", [0.0, 0.1, 1.0, 30.0])
def test_special_unitary_with_traced_parameters(scale):
    # its matrix is qml.math.expm(1j * A(theta)): scipy before, which cannot take tracers
    @qml.qnode(qml.device("default.qubit", wires=2))
    def circuit(theta):
        qml.SpecialUnitary(theta, wires=[0, 1])
        return qml.expval(qml.PauliY(0) @ qml.PauliX(1)), qml.state()

    theta = np.linspace(-1, 1, 15) * scale
    got = cofactor.qjit(circuit)(theta)
    expected = circuit(theta)
    np.testing.assert_allclose(got[0], expected[0], atol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], atol=1e-12)


@pytest.mark.parametrize(
    "m",
    [
        np.zeros((3, 3)),
        np.array([[0.3, 1.2], [-0.7, 2.0]]),
        np.array([[0.3j, 1.2], [-0.7, 2.0 + 1j]]) * 40,
    ],
)
def test_math_expm_of_a_traced_matrix_matches_scipy(m):
    got = cofactor.qjit(qml.math.expm)(m)
    expected = scipy.linalg.expm(m)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14 * np.abs(expected).max())


def test_math_expm_of_a_non_square_traced_array_is_refused():
    with pytest.raises(CompileError, match=r"expm.*shape \(2, 3\)"):
        cofactor.qjit(qml.math.expm)(np.ones((2, 3)))


def test_math_expm_of_constants_is_still_pennylane_s():
    m = np.array([[0.0, 1.0], [-1.0, 0.0]])
    np.testing.assert_allclose(qml.math.expm(m), scipy.linalg.expm(m))


def _time_evolution(t):
    qml.Hadamard(0)
    h = qml.Hamiltonian([0.5, 0.3], [qml.PauliX(0) @ qml.PauliX(1), qml.PauliZ(1)])
    qml.ApproxTimeEvolution(h, t, 3)
    return qml.expval(qml.PauliZ(0))


def _phase_estimation(t):
    qml.PauliX(3)
    qml.QuantumPhaseEstimation(qml.RZ(t, wires=3), estimation_wires=[0, 1, 2])
    return qml.probs(wires=[0, 1, 2])


def _embeddings(x):
    qml.AmplitudeEmbedding(x, wires=range(3), normalize=True)
    qml.adjoint(qml.QFT)(wires=range(3))
    return qml.expval(qml.PauliX(0) @ qml.PauliZ(2)), qml.probs(wires=[2, 0])


@pytest.mark.parametrize(
    "body, arg",
    [
        (_time_evolution, 0.7),
        (_phase_estimation, 0.7),
        (_embeddings, np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])),
    ],
)
def test_templates_match_default_qubit(body, arg):
    dev = qml.device("default.qubit", wires=4)
    got = cofactor.qjit(qml.QNode(body, dev))(arg)
    expected = qml.QNode(body, dev)(arg)
    if not isinstance(got, tuple):
        got, expected = (got,), (expected,)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
def test_time_evolution_gradient(diff_method):
    dev = qml.device("default.qubit", wires=2)
    got = cofactor.qjit(cofactor.grad(qml.QNode(_time_evolution, dev, diff_method=diff_method)))
    expected = qml.grad(qml.QNode(_time_evolution, dev))(pnp.array(0.7))
    np.testing.assert_allclose(got(0.7), expected, atol=1e-10)


def test_traced_basis_state_bits_are_checked_at_run_time():
    # PennyLane raises for a concrete state with other values than 0 and 1; a traced one
    # gave a state with stray amplitudes and phases
    @qml.qnode(qml.device("default.qubit", wires=2), diff_method="adjoint")
    def circuit(a, bits):
        qml.BasisState(bits, wires=[0, 1])
        qml.RX(a, 0)
        qml.CNOT([0, 1])
        return qml.expval(qml.PauliZ(1))

    compiled = cofactor.qjit(circuit)
    gradient = cofactor.qjit(cofactor.grad(circuit, argnums=0))
    for bad in ([2, 0], [0, -1]):
        with pytest.raises(ValueError, match="Basis state must only consist of 0s and 1s"):
            qml.QNode(circuit.func, qml.device("default.qubit", wires=2))(0.3, np.array(bad))
        with pytest.raises(ValueError, match="Basis state must only consist of 0s and 1s"):
            compiled(0.3, np.array(bad))
        with pytest.raises(ValueError, match="Basis state must only consist of 0s and 1s"):
            gradient(0.3, np.array(bad))
    good = np.array([1, 0])
    np.testing.assert_allclose(compiled(0.3, good), circuit(0.3, good), atol=1e-12)


@pytest.mark.parametrize("a", [0.4, 3.0])
def test_exp_and_evolve_of_a_matrix_with_a_traced_coefficient(a):
    # exponents that are not Pauli sums: the exponential of the traced matrix (was a
    # CompileError "Its matrix would be an exponential of traced values")
    h = np.array([[1.0, 0.5], [0.5, -1.0]])

    def body(a):
        qml.Hadamard(0)
        qml.exp(qml.Hermitian(h, wires=0), -1j * a)
        qml.evolve(qml.Hermitian(np.kron(h, h), wires=[0, 1]), a)
        return qml.expval(qml.PauliY(0)), qml.state()

    dev = qml.device("default.qubit", wires=2)
    got = cofactor.qjit(qml.QNode(body, dev))(a)
    expected = qml.QNode(body, dev)(a)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)
