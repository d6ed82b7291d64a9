"""Scalar results come back as numpy's scalars of their dtype, as uncompiled numpy returns
them (launcher.py reads them after the call); complex ones too (they came back as 0-d
arrays)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


def test_complex_scalar_results_are_numpy_complex_scalars_like_uncompiled_numpy():
    # a complex scalar came back as a 0-d array while a float one came back as np.float64
    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def state(a):
        qml.RX(a, 0)
        qml.CNOT([0, 1])
        return qml.state()

    def overlap(a, b):
        return np.vdot(state(a), state(b)), np.sum(np.arange(3.0)) * 1j, np.cos(a)

    compiled = cofactor.qjit(overlap)
    for a, b in ((0.3, -1.1), (2.0, 2.0)):
        got, want = compiled(a, b), overlap(a, b)
        for g, w in zip(got, want, strict=True):
            assert type(g) is type(w), (type(g), type(w))
            np.testing.assert_allclose(g, w, atol=1e-12)
