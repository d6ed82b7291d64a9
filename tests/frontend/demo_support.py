"""What the demo-program tests share: devices and the check against uncompiled PennyLane."""

import numpy as np
import pennylane as qml

import cofactor


def lightning(n):
    return qml.device("lightning.qubit", wires=n)


def default(n):
    return qml.device("default.qubit", wires=n)


def assert_matches_default_qubit(body, args, wires, atol=1e-10):
    """`body` compiled on lightning.qubit gives default.qubit's (uncompiled) results."""
    got = cofactor.qjit(qml.QNode(body, lightning(wires)))(*args)
    expected = qml.QNode(body, default(wires))(*args)
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=atol)
