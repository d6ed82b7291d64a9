"""Finite-shot variances of sums, and run-time states given to StatePrep, as PennyLane.

- `qml.var` of a multi-term observable (a Hamiltonian, `X0 @ Z1 + 0.5 Z0`) with shots: PennyLane's
  default.qubit samples it (in the eigenbasis of the whole sum: each shot is an eigenvalue of
  the sum); compiled code returned the analytic variance.
- A state computed at run time and given to `qml.StatePrep` / `qml.AmplitudeEmbedding`
  without `normalize=True` was silently normalized (the decomposition's angles only see the
  ratios); PennyLane refuses a concrete unnormalized one."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

SUMS = {
    "sum": lambda: qml.X(0) @ qml.Z(1) + 0.5 * qml.Z(0),
    "hamiltonian": lambda: qml.Hamiltonian([1.0, 0.5], [qml.X(0) @ qml.Z(1), qml.Z(0)]),
    "non-commuting on one wire": lambda: qml.X(0) + qml.Z(0),
    "hermitian + pauli": lambda: qml.Hermitian(np.diag([1.0, 3.0]), wires=1) + qml.Y(0),
}


def _prepare(x):
    qml.RX(x, wires=0)
    qml.RY(0.3, wires=1)
    qml.CNOT(wires=[1, 0])


def _circuit(device, observable, shots):
    @qml.set_shots(shots=shots)
    @qml.qnode(device)
    def circuit(x):
        _prepare(x)
        return qml.var(observable())

    return circuit


def _eigen_moments(observable, x):
    """The variance of the sum's eigenvalue distribution in the circuit's state, and its
    fourth central moment (a sample variance of N shots has standard error
    sqrt((mu4 - var^2) / N))."""

    @qml.qnode(qml.device("default.qubit", wires=2))
    def state():
        _prepare(x)
        return qml.state()

    evals, vecs = np.linalg.eigh(qml.matrix(observable(), wire_order=[0, 1]))
    probs = np.abs(vecs.conj().T @ state()) ** 2
    mean = probs @ evals
    return probs @ (evals - mean) ** 2, probs @ (evals - mean) ** 4


@pytest.mark.parametrize("name", list(SUMS))
def test_var_of_a_sum_with_one_shot_is_zero_like_pennylane(name):
    """One shot: the sample variance of one eigenvalue is 0 (default.qubit too). Before: the
    analytic variance (> 0.5 here)."""
    compiled = cofactor.qjit(_circuit(qml.device("lightning.qubit", wires=2), SUMS[name], 1))
    assert compiled(0.7) == 0.0
    reference = _circuit(qml.device("default.qubit", wires=2), SUMS[name], 1)
    assert reference(0.7) == 0.0


@pytest.mark.parametrize("name", list(SUMS))
def test_var_of_a_sum_with_shots_is_sampled_from_the_sums_eigenvalues(name):
    """Many shots: within 5 standard errors of the exact variance, not equal to it, and the
    same for default.qubit; seeded calls repeat."""
    shots = 4000
    x = 0.7
    exact, mu4 = _eigen_moments(SUMS[name], x)
    tolerance = 5 * np.sqrt(max(mu4 - exact**2, 1e-12) / shots) + 1e-9
    compiled = cofactor.qjit(
        _circuit(qml.device("lightning.qubit", wires=2), SUMS[name], shots), seed=11
    )
    results = [compiled(x) for _ in range(2)]
    assert results[0] == results[1]
    assert abs(results[0] - exact) < tolerance
    assert results[0] != pytest.approx(exact, abs=1e-12)
    reference = _circuit(qml.device("default.qubit", wires=2, seed=5), SUMS[name], shots)(x)
    assert abs(reference - exact) < tolerance


def test_var_of_a_sum_on_too_many_wires_with_shots_is_refused():
    """The eigenbasis of a sum is a dense matrix: beyond 8 wires, a clear error."""
    n = 9

    @qml.set_shots(shots=10)
    @qml.qnode(qml.device("lightning.qubit", wires=n))
    def circuit():
        return qml.var(qml.sum(*[qml.X(i) for i in range(n)]) + qml.Z(0))

    with pytest.raises(cofactor.RuntimeExecutionError, match="at most 8 are supported"):
        cofactor.qjit(circuit)()


# ---------------------------------------------------------------------------------------
# StatePrep / AmplitudeEmbedding of a run-time state
# ---------------------------------------------------------------------------------------
PREPARATIONS = {
    "StatePrep": lambda v: qml.StatePrep(v, wires=[0, 1]),
    "AmplitudeEmbedding": lambda v: qml.AmplitudeEmbedding(v, wires=[0, 1]),
    "MottonenStatePreparation": lambda v: qml.MottonenStatePreparation(v, wires=[0, 1]),
}


def _prepared_state(prepare):
    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def circuit(v):
        prepare(v)
        return qml.state()

    return circuit


@pytest.mark.parametrize("name", list(PREPARATIONS))
def test_an_unnormalized_run_time_state_is_refused(name):
    """Before: [1, 1, 0, 0] became [1, 1, 0, 0] / sqrt(2) silently."""
    circuit = _prepared_state(PREPARATIONS[name])
    with pytest.raises(ValueError, match="must be a vector of norm 1.0.*normalize=True"):
        circuit(np.array([1.0, 1.0, 0.0, 0.0]))
    # a normalized one (to PennyLane's tolerance) is prepared exactly
    v = np.array([0.6, 0.0, 0.0, 0.8j])
    np.testing.assert_allclose(circuit(v), v, atol=1e-12)
    # the error was for that call only
    np.testing.assert_allclose(circuit(v * (1 + 1e-7)), v, atol=1e-6)


@pytest.mark.parametrize(
    "prepare",
    [
        lambda v: qml.StatePrep(v, wires=[0, 1], normalize=True),
        lambda v: qml.AmplitudeEmbedding(v, wires=[0, 1], normalize=True),
        lambda v: qml.AmplitudeEmbedding(v[:3], wires=[0, 1], pad_with=0.0),
    ],
    ids=["StatePrep normalize", "AmplitudeEmbedding normalize", "AmplitudeEmbedding pad_with"],
)
def test_normalize_or_pad_with_normalizes_a_run_time_state(prepare):
    v = np.array([1.0, 1.0, 1.0, 0.0])
    expected = v / np.linalg.norm(v)
    np.testing.assert_allclose(_prepared_state(prepare)(v), expected, atol=1e-12)


def test_one_shot_var_of_a_sum_after_a_mid_circuit_measurement():
    """mcm_method='one-shot' gathers var from one eigenvalue per shot. For a sum the shot's
    value was a one-shot expval, each term drawn apart (Z + X gave -2, 0 or 2, never an
    eigenvalue +-sqrt(2)): 1.00 against PennyLane's 0.75 here. The estimate's standard error
    is 2 |<Z + X>| sqrt(var / N) ~ 0.03 (every eigenvalue squares to 2)."""

    def make(device, shots, method):
        @qml.set_shots(shots=shots)
        @qml.qnode(device, mcm_method=method)
        def circuit(x):
            qml.RX(x, wires=0)
            m = qml.measure(0, reset=True)
            qml.cond(m, qml.RY)(0.5, wires=1)
            return qml.var(qml.Z(1) + qml.X(1))

        return circuit

    exact = make(qml.device("default.qubit", wires=3), None, "deferred")(1.2)
    compiled = cofactor.qjit(make(qml.device("lightning.qubit", wires=2), 4000, "one-shot"), seed=2)
    assert abs(compiled(1.2) - exact) < 0.15
