"""`from pennylane import numpy as np` (PennyLane's autograd numpy, as in its tutorials) in
compiled programs: tensor constants with traced operands, stack/concatenate, and the
array constructors the program fills in place (tracing/pennylane_numpy.py)."""

from __future__ import annotations

import numpy as onp
import pennylane as qml
import pytest
from pennylane import numpy as np

import cofactor

pytestmark = pytest.mark.needs_toolchain

DEV = qml.device("default.qubit", wires=2)


@qml.qnode(DEV)
def circuit(params):
    qml.RX(params[0], wires=0)
    qml.RY(params[1], wires=1)
    qml.CNOT(wires=[0, 1])
    return qml.expval(qml.PauliZ(0) @ qml.PauliZ(1))


def cost(params):
    target = np.array([0.5, -0.2], requires_grad=False)
    v = np.stack([circuit(params), np.sin(params[0])])
    return np.sum((v - target) ** 2) + np.dot(params, params)


def test_cost_and_gradient_written_with_pennylane_numpy():
    p = np.array([0.4, 1.1], requires_grad=True)
    assert onp.isclose(cofactor.qjit(cost)(p), cost(p), rtol=1e-10)
    assert onp.allclose(cofactor.qjit(cofactor.grad(cost))(p), qml.grad(cost)(p), rtol=1e-10)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: np.stack([a, a * 2]),  # autograd's concatenate: `.view(ndarray)` failed
        lambda a: np.concatenate([a, a * 2]),
        lambda a: np.hstack([a, a]) + np.vstack([a, a]).sum(axis=0).mean(),
        lambda a: np.tensor([1.0, 2.0, 3.0, 4.0]) * a,  # tensor.__array_ufunc__ wrapped
        lambda a: np.transpose(onp.ones((2, 4))) * a[:, None],  # NotImplemented in a tensor
        lambda a: np.zeros_like(a) + a,
        lambda a: np.array([1.0, 2.0, 3.0, 4.0], requires_grad=False) ** a,
    ],
    ids=["stack", "concatenate", "hstack_vstack", "tensor_times", "transpose", "zeros_like", "pow"],
)
def test_pennylane_numpy_functions_on_traced_values(fn):
    v = onp.array([0.3, -1.1, 2.5, 0.0])
    got = cofactor.qjit(fn)(v)
    expected = fn(np.array(v))
    assert onp.shape(got) == onp.shape(expected)
    assert onp.allclose(got, expected, rtol=1e-10)


def test_pennylane_numpy_array_filled_in_place():
    def f(x):
        w = np.zeros(3, requires_grad=False)
        w[0] = x
        w[2] += 2 * x
        return np.vstack([w, np.ones(3) * x]).sum(axis=0)

    assert onp.allclose(cofactor.qjit(f)(0.3), [0.6, 0.3, 0.9], rtol=1e-12)
