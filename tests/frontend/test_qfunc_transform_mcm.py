"""Mid-circuit measurements under a quantum-function transform (`@qml.qnode` over
`@transform def f`): PennyLane records the function on a tape of its own, so cofactor's
`measure` becomes a MidMeasure on that tape and keeps its place among the gates; the
function's returned measurement values are the traced outcomes."""

from __future__ import annotations

import math

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain

dev = qml.device("lightning.qubit", wires=3)


@qml.transform
def prepend_x1(tape):
    return [tape.copy(operations=[qml.X(1)] + tape.operations)], lambda r: r[0]


def test_clifford_t_qfunc_transform_measures_after_the_gates():
    """Catalyst's own integration test of `clifford_t_decomposition` (PennyLane's suite)."""

    @qml.qjit(compiler="cofactor")
    @qml.qnode(dev)
    @qml.clifford_t_decomposition
    def circuit():
        qml.RX(math.pi, [0])
        qml.RX(2 * math.pi, [1])
        return cofactor.measure(0), cofactor.measure(1)

    assert tuple(bool(v) for v in circuit()) == (True, False)


@pytest.mark.parametrize("x", [0.0, math.pi])
def test_user_qfunc_transform_with_measurements(x):
    @qml.qjit(compiler="cofactor")
    @qml.qnode(dev)
    @prepend_x1
    def circuit(x):
        qml.RX(x, 0)
        m0 = cofactor.measure(0)
        m1 = cofactor.measure(1)
        return m0, m1, 2 * m0 + m1

    @qml.qnode(qml.device("default.qubit", wires=3))
    def reference(x):
        qml.X(1)
        qml.RX(x, 0)
        return qml.probs(wires=[0, 1])

    m0, m1, combined = circuit(x)
    probs = reference(x)
    outcome = int(np.argmax(probs))  # deterministic for these angles
    assert probs[outcome] == pytest.approx(1.0)
    assert (int(m0), int(m1)) == divmod(outcome, 2)
    assert int(combined) == outcome
