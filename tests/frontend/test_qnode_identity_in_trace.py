"""Circuit functions emitted in one trace are keyed by the QNode's id(). A QNode built in a
Python loop inside qjit and dropped after its call was freed, the next QNode got the same
id, and every later call silently reused the first circuit: 40 QNodes `RX(k * x)` all
returned cos(0 * x) = 1. The trace now holds each keyed QNode until it ends.
"""

from __future__ import annotations

import functools

import numpy as np
import pennylane as qml
import pytest

from cofactor import qjit

DEV = qml.device("lightning.qubit", wires=1)


def _body(x, k):
    qml.RX(x * k, 0)
    return qml.expval(qml.Z(0))


def test_qnodes_built_and_dropped_in_a_loop_keep_their_own_circuit():
    @qjit
    def each(x):
        out = []
        for k in range(12):
            circuit = qml.QNode(functools.partial(_body, k=k), DEV)
            out.append(circuit(x))
            del circuit  # (freed here before the fix: its id went to the next QNode)
        return out

    np.testing.assert_allclose(each(0.7), np.cos(0.7 * np.arange(12)), atol=1e-12)


def test_one_qnode_called_twice_emits_one_circuit():
    circuit = qml.QNode(functools.partial(_body, k=2), DEV)

    @qjit
    def twice(x):
        return circuit(x) + circuit(x)

    assert twice(0.7) == pytest.approx(2 * np.cos(1.4), abs=1e-12)
    assert twice.mlir.count("cofactor.qnode") == 1
