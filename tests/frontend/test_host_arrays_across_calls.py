"""An array a program made with np.zeros and wrote traced values into (tracing/host_arrays.py)
passed on as it is: into a QNode, through a loop carry, returned, differentiated. It crosses
each boundary as its current value (a QNode used to close over the caller's values: invalid
IR)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain

A = np.array([0.3, -0.8, 1.1])


def _circuit(device_name: str):
    @qml.qnode(qml.device(device_name, wires=3))
    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        qml.RZ(x[2], 2)
        qml.CNOT([1, 2])
        qml.RY(x[2], 2)
        return qml.expval(qml.PauliZ(2))

    return circuit


OURS, REFERENCE = _circuit("lightning.qubit"), _circuit("default.qubit")


def hybrid(a, circuit=OURS, np=np):
    y = np.zeros(3)
    y[0] = np.sin(a[0])
    y[1:] = a[1:] ** 2
    return circuit(y) * np.sum(a)


def reference(a):
    pnp = qml.numpy
    y = pnp.stack([pnp.sin(a[0]), a[1] ** 2, a[2] ** 2])
    return REFERENCE(y) * pnp.sum(a)


def test_an_array_filled_with_traced_values_goes_into_a_qnode() -> None:
    a = qml.numpy.array(A)
    np.testing.assert_allclose(cofactor.qjit(hybrid)(A), reference(a), rtol=1e-12)
    np.testing.assert_allclose(
        cofactor.qjit(cofactor.grad(hybrid))(A), qml.grad(reference)(a), rtol=1e-10
    )


def test_an_array_filled_with_traced_values_through_a_loop_and_returned() -> None:
    def f(a):
        y = np.zeros(3)
        y[1] = a[0]

        @cofactor.for_loop(0, 3, 1)
        def body(i, acc):
            return acc * 2.0 + a

        return body(y), y

    def plain(a):
        y = np.zeros(3)
        y[1] = a[0]
        acc = y
        for _ in range(3):
            acc = acc * 2.0 + a
        return acc, y

    for got, want in zip(cofactor.qjit(f)(A), plain(A), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-14)
