"""Inputs the simulator cannot take give an error that names the operation and what to do."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor


def test_shots_beyond_int64_are_refused_clearly():
    """Before: the count wrapped to a negative int64 and cofactor-opt failed with
    "'quantum.device_acquire' op shots must be >= 0"."""
    qnode = qml.set_shots(
        qml.QNode(lambda: qml.expval(qml.Z(0)), qml.device("default.qubit", wires=1)), 2**63
    )
    with pytest.raises(cofactor.CompileError, match="shots do not fit the runtime's 64-bit"):
        cofactor.qjit(qnode)()


def test_probs_of_traced_wires_names_both_readings():
    """A traced integer in qml.probs(wires=...) was reported as a mid-circuit measurement
    value only; the message now names run-time wires too."""

    @cofactor.qjit
    def probs_of(i):
        @qml.qnode(qml.device("default.qubit", wires=3))
        def circuit():
            qml.X(1)
            return qml.probs(wires=[i])

        return circuit()

    with pytest.raises(cofactor.CompileError, match="traced wires.*static_argnums"):
        probs_of(1)
    # as a static argument it compiles, and matches PennyLane
    static = cofactor.qjit(probs_of.user_function, static_argnums=0)
    np.testing.assert_allclose(static(1), [0.0, 1.0])
