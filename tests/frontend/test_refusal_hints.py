"""Refusals that say what to do: PennyLane's deprecated call-time `shots=` on a compiled
QNode (it was a bare "got an unexpected keyword argument 'shots'"), a nested Enzyme
derivative (it named no way out), and the gradient of a circuit with qml.Snapshot (it said
"State returns are forbidden" of a QNode that returns an expectation value)."""

from __future__ import annotations

import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


def test_call_time_shots_names_set_shots():
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.Z(0))

    with pytest.raises(TypeError, match=r"unexpected keyword argument 'shots'.*qml\.set_shots"):
        cofactor.qjit(circuit)(0.5, shots=100)


def test_nested_enzyme_derivative_names_method_fd():
    inner = cofactor.grad(lambda x: x**3)
    with pytest.raises(cofactor.DifferentiableCompileError, match='give both method="fd"'):
        cofactor.qjit(cofactor.grad(inner))(2.0)


def test_gradient_of_a_circuit_with_snapshots_names_them():
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RX(x, 0)
        qml.Snapshot("after RX")
        return qml.expval(qml.Z(0))

    with pytest.raises(cofactor.DifferentiableCompileError, match=r"qml\.Snapshot.*remove"):
        cofactor.qjit(cofactor.grad(circuit))(0.3)
