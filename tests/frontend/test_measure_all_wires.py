"""Measurements without wires (qml.probs(), qml.state(), qml.sample(), qml.counts()) on a
device declared without wires measure the circuit's wires in order of first use, then the
measurements' own wires (PennyLane's `tape.wires`), compared with uncompiled default.qubit."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import CompileError, for_loop, qjit


def _check(circuit, *args, shots=None):
    qnode = qml.QNode(circuit, qml.device("default.qubit"))
    if shots:
        qnode = qml.set_shots(qnode, shots)
    got, want = qjit(qnode)(*args), qnode(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, atol=1e-12)


def test_wires_in_order_of_first_use():
    def circuit(x):
        qml.Hadamard(2)
        qml.CNOT([2, 0])
        qml.RX(x, 0)
        return qml.probs(), qml.state(), qml.probs(wires=[0])

    _check(circuit, 0.3)


def test_contiguous_wires_and_measurement_wires():
    def circuit(x):
        qml.Hadamard(0)
        qml.RY(x, 1)
        qml.CRX(x / 2, [1, 3])
        return qml.state(), qml.probs(), qml.expval(qml.PauliZ(5))

    _check(circuit, 0.4)


def test_samples_and_counts_columns_follow_the_circuit_wires():
    def circuit():
        qml.PauliX(2)  # wire 2 first: the first column is always 1
        qml.Identity(0)
        return qml.sample(), qml.probs()

    qnode = qml.set_shots(qml.QNode(circuit, qml.device("default.qubit")), 20)
    samples, probs = qjit(qnode)()
    assert samples.shape == (20, 2)
    assert np.all(samples[:, 0] == 1) and np.all(samples[:, 1] == 0)
    np.testing.assert_allclose(probs, [0.0, 0.0, 1.0, 0.0])

    def counted():
        qml.PauliX(1)
        return qml.counts(all_outcomes=True)

    qnode = qml.set_shots(qml.QNode(counted, qml.device("default.qubit")), 10)
    states, counts = qjit(qnode)()
    assert list(counts) == [0, 10]  # one wire (1), in state 1
    assert len(states) == 2


def test_traced_wires_refuse_all_wire_measurements():
    @qml.qnode(qml.device("default.qubit"))
    def circuit(n):
        @for_loop(0, n, 1)
        def body(i):
            qml.Hadamard(i)

        body()
        return qml.probs()

    with pytest.raises(CompileError, match="Declare the device's wires"):
        qjit(circuit)(2)
