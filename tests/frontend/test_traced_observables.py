"""Observables whose coefficients or matrices are computed from traced values: they run
forward; under Enzyme gradients Hamiltonian coefficients are differentiated, and matrices
are a clear error rather than a wrong number."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

dev = qml.device("default.qubit", wires=1)


@qml.qnode(dev)
def weighted(theta, a, b):
    qml.RY(theta, wires=0)
    return qml.expval(a * qml.PauliZ(0) + b * qml.PauliX(0))


def test_traced_coefficients_run_forward():
    compiled = cofactor.qjit(weighted)
    for point in [(0.4, 0.8, -0.5), (1.3, -0.2, 0.7)]:
        assert compiled(*point) == pytest.approx(float(weighted(*point)), abs=1e-12)


def test_traced_coefficients_under_grad():
    """d<a Z + b X>/da = <Z>, d/db = <X> (tests/frontend/test_hamiltonian_coefficient_grads.py
    has the rest)."""

    @cofactor.qjit
    def g(theta, a, b):
        return cofactor.grad(weighted, argnums=(0, 1, 2))(theta, a, b)

    theta, a, b = 0.4, 0.8, -0.5
    expected = [-a * np.sin(theta) + b * np.cos(theta), np.cos(theta), np.sin(theta)]
    np.testing.assert_allclose(g(theta, a, b), expected, atol=1e-12)


def test_traced_coefficients_with_finite_differences():
    @cofactor.qjit
    def g(theta, a, b):
        return cofactor.grad(weighted, method="fd", h=1e-6, argnums=(0, 1, 2))(theta, a, b)

    theta, a, b = 0.4, 0.8, -0.5
    expected = [-a * np.sin(theta) + b * np.cos(theta), np.cos(theta), np.sin(theta)]
    np.testing.assert_allclose(g(theta, a, b), expected, atol=1e-6)


def test_traced_unitary_under_grad_is_an_error():
    @qml.qnode(dev)
    def circuit(phi):
        u = np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])
        qml.QubitUnitary(u, wires=0)
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(cofactor.DifferentiableCompileError, match="QubitUnitary"):
        cofactor.qjit(cofactor.grad(circuit))(0.3)
