"""Finite differences of a circuit with mid-circuit measurements.

Without shots a mid-circuit measurement samples one branch per run (single-branch
statistics), so f(x + h) and f(x) of `grad(method="fd")` could come from different
branches: the quotient was of order 1/h (about +-1.8e6 in half the calls). It is refused
unless every measurement is postselected, where each run takes the same branch.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import qjit
from cofactor.errors import DifferentiableCompileError


def _circuit(postselect):
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def circuit(x):
        qml.RX(x, 0)
        qml.Hadamard(1)
        m = qml.measure(1, postselect=postselect)
        qml.cond(m, qml.RY)(x, 0)
        return qml.expval(qml.Z(0))

    return circuit


def test_fd_of_a_sampled_branch_is_refused():
    with pytest.raises(DifferentiableCompileError, match=r"QNode circuit.*postselect each"):
        qjit(cofactor.grad(_circuit(None), method="fd"))(0.7)


def test_fd_of_a_sampled_branch_inside_a_loop_is_refused_for_qml_grad_too():
    circuit = _circuit(None)

    @qjit
    def loss(x):
        @cofactor.for_loop(0, 2, 1)
        def body(i, acc):
            return acc + qml.grad(circuit, method="fd")(x * (i + 1))

        return body(0.0)

    with pytest.raises(DifferentiableCompileError, match="single-branch"):
        loss(0.7)


@pytest.mark.parametrize("postselect", [0, 1])
def test_fd_of_postselected_measurements_matches_pennylane(postselect):
    reference = qml.QNode(_circuit(postselect).func, qml.device("default.qubit"))
    expected = qml.grad(reference)(qml.numpy.array(0.7, requires_grad=True))
    got = qjit(cofactor.grad(_circuit(postselect), method="fd", h=1e-7))(0.7)
    assert got == pytest.approx(float(expected), abs=1e-5)


def test_fd_of_mcm_with_shots_still_runs():
    # one-shot over the shots: a finite-shot estimate, as Catalyst's (not refused)
    circuit = qml.set_shots(_circuit(None), shots=10)
    assert np.isfinite(qjit(cofactor.grad(circuit, method="fd", h=0.5))(0.7))
