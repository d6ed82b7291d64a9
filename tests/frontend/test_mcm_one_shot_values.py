"""mcm_method='one-shot': values a circuit computes in each shot (a mid-circuit outcome, a
constant, a value chosen by a branch) come back stacked over the shots, as in Catalyst;
a raw outcome equals qml.sample of it shot by shot."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import CompileError, cond, measure, qjit


def _one_shot(shots, **kw):
    dev = qml.device("default.qubit", wires=2)
    return lambda f: qjit(qml.set_shots(qml.QNode(f, dev, mcm_method="one-shot", **kw), shots))


def test_outcomes_and_constants_are_stacked_over_shots():
    @_one_shot(40)
    def circuit(x):
        qml.RX(x, 0)
        m = measure(0)
        flipped = cond(m)(lambda: 1.5).otherwise(lambda: -2.0)()
        return m, qml.sample(m), {"k": [7, flipped]}

    outcome, sampled, rest = circuit(1.2)
    assert outcome.shape == (40,) and outcome.dtype == np.bool_
    np.testing.assert_array_equal(outcome.astype(int), np.ravel(sampled))
    np.testing.assert_array_equal(rest["k"][0], np.full(40, 7))
    np.testing.assert_array_equal(rest["k"][1], np.where(outcome, 1.5, -2.0))
    assert 0 < outcome.sum() < 40  # RX(1.2): both outcomes appear in 40 shots


def test_deterministic_outcomes():
    @_one_shot(5)
    def circuit():
        qml.PauliX(1)
        return measure(1), measure(0)

    ones, zeros = circuit()
    assert ones.all() and not zeros.any()


def test_discarding_postselection_refuses_computed_values():
    @_one_shot(10)
    def circuit(x):
        qml.RX(x, 0)
        return measure(0, postselect=1)

    with pytest.raises(CompileError, match="postselect_mode='fill-shots'"):
        circuit(0.5)

    @_one_shot(10, postselect_mode="fill-shots")
    def forced(x):
        qml.RX(x, 0)
        return measure(0, postselect=1)

    assert forced(0.5).all()  # every shot is forced to the postselected outcome
