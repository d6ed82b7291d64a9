"""`qml.Snapshot()` under qjit: as in Catalyst, a QNode with snapshots returns
`(states at the snapshots, results)`; the states are PennyLane's (`qml.snapshots`).
Before, snapshots were dropped and the results came back alone."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor.errors import CompileNotImplementedError, DifferentiableCompileError


def _body(x):
    qml.Snapshot()
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.Snapshot()
    qml.Hadamard(1)
    qml.Snapshot(measurement=qml.state())
    return qml.probs(wires=[1]), qml.expval(qml.PauliZ(0))


def test_states_and_results_match_pennylane():
    dev = qml.device("default.qubit", wires=2)
    states, results = cofactor.qjit(qml.QNode(_body, dev))(0.7)
    expected = qml.snapshots(qml.QNode(_body, dev))(0.7)
    assert len(states) == 3
    for i, state in enumerate(states):
        np.testing.assert_allclose(state, expected[i], atol=1e-12)
    for got, want in zip(results, expected["execution_results"], strict=True):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_snapshots_with_shots_and_a_dict_of_measurements():
    @qml.set_shots(200)
    @qml.qnode(qml.device("default.qubit", wires=2, seed=3))
    def circuit(x):
        qml.Snapshot()
        qml.RX(x, 0)
        qml.Snapshot()
        return {"counts": qml.counts(), "z": {"z0": qml.expval(qml.PauliZ(0))}}

    states, results = cofactor.qjit(circuit)(0.5)
    np.testing.assert_allclose(states[0], [1, 0, 0, 0])
    np.testing.assert_allclose(states[1], [np.cos(0.25), 0, -1j * np.sin(0.25), 0], atol=1e-12)
    assert set(results) == {"counts", "z"}
    assert results["counts"][1].sum() == 200


def test_snapshots_under_one_shot_are_stacked_over_the_shots():
    # a complex value per shot (the state) is gathered as the other per-shot values
    @qml.set_shots(6)
    @qml.qnode(qml.device("default.qubit", wires=1, seed=3), mcm_method="one-shot")
    def circuit(x):
        qml.RX(x, 0)
        qml.Snapshot()
        return qml.sample(wires=[0])

    states, samples = cofactor.qjit(circuit)(0.5)
    assert states[0].shape == (6, 2)
    np.testing.assert_allclose(states[0], [[np.cos(0.25), -1j * np.sin(0.25)]] * 6, atol=1e-12)
    assert samples.shape == (6, 1)


@pytest.mark.parametrize("mp", [qml.probs(), qml.expval(qml.PauliX(0))])
def test_snapshot_of_another_measurement_is_refused_as_catalyst(mp):
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit():
        qml.Snapshot(measurement=mp)
        return qml.probs()

    with pytest.raises(CompileNotImplementedError, match=r"Snapshot\(\) only supports"):
        cofactor.qjit(circuit)()


def test_snapshot_inside_control_flow_is_refused():
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        @qml.for_loop(0, 2, 1)
        def loop(i):
            qml.RX(x, 0)
            qml.Snapshot()

        loop()
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(CompileNotImplementedError, match=r"Snapshot\(\) inside control flow"):
        cofactor.qjit(circuit)(0.3)


def test_gradient_of_a_circuit_with_snapshots_names_the_states():
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RX(x, 0)
        qml.Snapshot()
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(DifferentiableCompileError, match="State returns are forbidden"):
        cofactor.qjit(cofactor.grad(lambda x: circuit(x)[1]))(0.3)
