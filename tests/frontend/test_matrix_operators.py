"""Operators defined by a matrix alone (no decomposition) run as a QubitUnitary of their
matrix, as in Catalyst; controlled ones as a QubitUnitary with native controls. User
subclasses of gates with their own parameter-shift rule are refused under parameter-shift.
Expected values: uncompiled PennyLane (default.qubit)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import DifferentiableCompileError, grad, qjit

HADAMARD = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2)


class HalfTurn(qml.operation.Operation):
    """A user's one-qubit rotation given only by its matrix."""

    num_wires = 1
    num_params = 1

    @staticmethod
    def compute_matrix(theta):
        c, s = qml.math.cos(theta / 2), qml.math.sin(theta / 2)
        return qml.math.stack([qml.math.stack([c, -s]), qml.math.stack([s, c])])


def _compare(circuit, *args, wires=4):
    qnode = qml.QNode(circuit, qml.device("default.qubit", wires=wires))
    np.testing.assert_allclose(qjit(qnode)(*args), qnode(*args), atol=1e-12)


def test_block_encode_and_its_controlled_form():
    def circuit():
        qml.Hadamard(0)
        qml.BlockEncode(HADAMARD, wires=[1, 2])
        qml.ctrl(qml.BlockEncode, control=0)(0.5 * HADAMARD, wires=[2, 3])
        qml.ctrl(qml.BlockEncode, control=[0, 1], control_values=[1, 0])(0.3, wires=[3])
        return qml.state()

    _compare(circuit)


def test_user_operator_with_traced_parameter():
    def circuit(x):
        qml.Hadamard(1)
        HalfTurn(x, wires=0)
        qml.ctrl(HalfTurn(x / 3, wires=0), control=1)
        qml.adjoint(HalfTurn(x / 5, wires=1))
        return qml.state()

    _compare(circuit, 0.7, wires=2)


def _rx_with(**rules):
    """A user's RX (named RX, so run as the runtime's RX) with its own shift rule."""
    return type("RX", (qml.RX,), {k: property(lambda self, v=v: v) for k, v in rules.items()})


ZeroRecipeRX = _rx_with(grad_recipe=([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],))
DoubleFrequencyRX = _rx_with(parameter_frequencies=[(2.0,)])


@pytest.mark.parametrize("gate", [ZeroRecipeRX, DoubleFrequencyRX])
def test_own_shift_rule_is_refused_under_parameter_shift(gate):
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev, diff_method="parameter-shift")
    def circuit(x):
        gate(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    assert np.isclose(qjit(circuit)(0.3), circuit(0.3))  # running it is fine
    with pytest.raises(DifferentiableCompileError, match="grad_recipe or parameter_frequencies"):
        qjit(grad(circuit))(0.3)


def test_own_shift_rule_with_adjoint_differentiation():
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev, diff_method="adjoint")
    def circuit(x):
        ZeroRecipeRX(x, wires=0)
        qml.RY(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    want = qml.grad(circuit)(qml.numpy.array(0.3, requires_grad=True))
    assert np.isclose(qjit(grad(circuit))(0.3), want)


def test_annotated_pennylane_grad_compiles_when_decorated():
    # qml.grad(qnode) carries the QNode's signature (x: float): compiled ahead of time, so
    # the refusal comes where it is decorated, as Catalyst does
    dev = qml.device("default.qubit", wires=1)

    with pytest.raises(DifferentiableCompileError, match="grad_recipe or parameter_frequencies"):

        @qjit
        @qml.grad
        @qml.qnode(dev, diff_method="parameter-shift")
        def circuit(x: float):
            ZeroRecipeRX(x, wires=0)
            return qml.expval(qml.PauliZ(0))
