"""qml.counts(obs) counts the observable's eigenvalues, as PennyLane's dict {eigenvalue:
count} does, in Catalyst's (keys, counts) form: the distinct eigenvalues ascending and the
count of each. (It returned the counts of the rotated basis states keyed 0 .. 2**k - 1:
for counts(Z(0)) the +1 outcomes under key 0, for X(1) @ Z(0) four keys instead of two.)"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain

SHOTS = 4000
H = np.array([[2.0, 1j, 0, 0], [-1j, 2.0, 0, 0], [0, 0, -1.0, 0], [0, 0, 0, 0.5]])
OBSERVABLES = {
    "Z": lambda: qml.PauliZ(0),
    "Y": lambda: qml.PauliY(1),
    "X1@Z0": lambda: qml.PauliX(1) @ qml.PauliZ(0),
    "Hadamard": lambda: qml.Hadamard(2),
    "Hermitian": lambda: qml.Hermitian(H, wires=[0, 2]),
}


def _gates(x):
    qml.RX(x, 0)
    qml.RY(2 * x, 1)
    qml.CNOT([1, 2])


def _circuit(obs):
    @qml.set_shots(SHOTS)
    @qml.qnode(qml.device("default.qubit", wires=3))
    def circuit(x):
        _gates(x)
        return qml.counts(OBSERVABLES[obs](), all_outcomes=True), qml.probs(wires=[0, 1, 2])

    return circuit


@qml.qnode(qml.device("default.qubit", wires=3))
def _state(x):
    _gates(x)
    return qml.state()


@pytest.mark.parametrize("obs", list(OBSERVABLES))
def test_counts_of_an_observable_are_keyed_by_its_eigenvalues(obs):
    (keys, counts), probs = cofactor.qjit(_circuit(obs), seed=7)(0.8)
    reference = _circuit(obs)(0.8)[0]
    np.testing.assert_allclose(keys, sorted(float(k) for k in reference))
    assert counts.dtype == np.int64 and counts.sum() == SHOTS
    # each eigenvalue's probability, from the exact state: within 5 standard deviations
    exact = _state(0.8)
    op = OBSERVABLES[obs]()
    vals, vecs = np.linalg.eigh(qml.matrix(op, wire_order=[0, 1, 2]))
    for key, count in zip(keys, counts, strict=True):
        basis = vecs[:, np.isclose(vals, key)]
        p = float(np.sum(np.abs(basis.conj().T @ exact) ** 2))
        assert abs(count / SHOTS - p) <= 5 * np.sqrt(p * (1 - p) / SHOTS) + 1e-9, (key, count, p)


def test_counts_of_a_deterministic_observable():
    @qml.set_shots(100)
    @qml.qnode(qml.device("default.qubit", wires=2))
    def circuit():
        qml.PauliX(0)
        qml.Hadamard(1)
        return qml.counts(qml.PauliZ(0)), qml.counts(qml.PauliX(1) @ qml.PauliZ(0))

    (k1, c1), (k2, c2) = cofactor.qjit(circuit)()
    np.testing.assert_array_equal(k1, [-1.0, 1.0])
    np.testing.assert_array_equal(c1, [100, 0])
    np.testing.assert_array_equal(k2, [-1.0, 1.0])
    np.testing.assert_array_equal(c2, [100, 0])
