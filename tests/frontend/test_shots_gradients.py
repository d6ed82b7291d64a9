"""A QNode with finite shots and the default diff_method ("best") is differentiated as
PennyLane does: "best" is the device's own derivatives or backprop, which its simulators
only offer without shots, else parameter-shift (Catalyst's "best" is parameter-shift, or
adjoint on lightning for one expval whatever the shots; PennyLane's is the reference).
So with shots the gradient is a finite-shot parameter-shift estimate, seeded as an explicit
diff_method="parameter-shift" QNode is, not the exact adjoint gradient."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


def _cost(diff_method, shots):
    dev = qml.device("lightning.qubit", wires=2)

    @qml.set_shots(shots)
    @qml.qnode(dev, diff_method=diff_method)
    def circuit(x):
        qml.RX(x[0], wires=0)
        qml.RY(x[1], wires=1)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1))

    return lambda x: circuit(x) * 2.0


def test_best_with_shots_is_a_parameter_shift_estimate():
    x = np.array([0.4, -0.9])
    exact = cofactor.qjit(cofactor.grad(_cost("adjoint", None)))(x)
    reference = qml.grad(_cost("best", None))(qml.numpy.array(x, requires_grad=True))
    np.testing.assert_allclose(exact, reference, atol=1e-10)

    best = cofactor.qjit(cofactor.grad(_cost("best", 2000)), seed=11)(x)
    shift = cofactor.qjit(cofactor.grad(_cost("parameter-shift", 2000)), seed=11)(x)
    np.testing.assert_array_equal(best, shift)  # the same method, the same seeded samples
    assert not np.allclose(best, exact, atol=1e-9)  # sampled, not the exact gradient
    # 2000 shots per shifted circuit: each entry is within a few 0.05 of the exact one
    assert np.all(np.abs(best - exact) < 0.3)


def test_best_without_shots_stays_exact():
    x = np.array([0.4, -0.9])
    best = cofactor.qjit(cofactor.grad(_cost("best", None)))(x)
    reference = qml.grad(_cost("best", None))(qml.numpy.array(x, requires_grad=True))
    np.testing.assert_allclose(best, reference, atol=1e-12)


@pytest.mark.parametrize("grad_fn", [cofactor.grad, qml.grad], ids=["cofactor", "qml"])
def test_explicit_adjoint_with_shots_is_refused_when_traced(grad_fn):
    # PennyLane refuses diff_method="adjoint" with finite shots (QuantumFunctionError); an
    # exact adjoint gradient of a sampled QNode used to be returned silently
    compiled = cofactor.qjit(grad_fn(_cost("adjoint", 100)))
    with pytest.raises(cofactor.DifferentiableCompileError, match=r"QNode circuit.*shots") as e:
        compiled(np.array([0.4, -0.9]))
    assert "parameter-shift" in str(e.value) and "shots=None" in str(e.value)
    # the forward pass alone is not differentiated: it runs with the QNode's shots
    value = cofactor.qjit(_cost("adjoint", 100), seed=3)(np.array([0.4, -0.9]))
    assert abs(value) <= 2.0
