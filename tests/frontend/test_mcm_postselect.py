"""Postselection under mcm_method="one-shot": with PennyLane's default postselect_mode
("hw-like") the shots that fail postselection are discarded, as default.qubit does; with
"fill-shots" (Catalyst) every shot is postselected by the simulator."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane.transforms.dynamic_one_shot import fill_in_value

import cofactor

pytestmark = pytest.mark.needs_toolchain

SHOTS = 3000
REF_SHOTS = 400  # PennyLane's one-shot runs a tape per shot: slow, so fewer shots
X = 0.9
P_VALID = np.sin(X / 2) ** 2  # probability that RX(X)|0> measures 1


def _circuit(x):
    qml.RX(x, 0)
    m = qml.measure(0, postselect=1)
    qml.CNOT([0, 1])
    qml.RY(0.4, 1)
    return (
        qml.expval(qml.Z(1)),
        qml.probs(wires=[1]),
        qml.var(qml.X(1)),
        qml.expval(m),
        qml.counts(wires=0),
        qml.sample(m),
    )


def _qnode(device, shots=SHOTS, **kwargs):
    return qml.set_shots(qml.QNode(_circuit, device, mcm_method="one-shot", **kwargs), shots)


def _tol(p, n):
    return 5 * np.sqrt(max(p * (1 - p), 0.02) / n)


@pytest.mark.parametrize("mode", [{}, {"postselect_mode": "hw-like"}])
def test_hw_like_discards_the_shots_that_fail_postselection(mode):
    compiled = cofactor.qjit(_qnode(qml.device("lightning.qubit", wires=2), **mode), seed=11)
    expval, probs, var, mean_m, counts, samples = compiled(X)
    ref = _qnode(qml.device("default.qubit", wires=2, seed=7), REF_SHOTS, **mode)(X)

    # only the shots that measured 1 are kept: about P_VALID * SHOTS of them
    samples = np.asarray(samples)
    kept = samples != fill_in_value
    n_kept = int(kept.sum())
    assert samples.shape == (SHOTS,)  # static length, invalid shots padded (as under jit)
    assert abs(n_kept - P_VALID * SHOTS) < 5 * np.sqrt(SHOTS * P_VALID * (1 - P_VALID))
    assert set(samples[kept].tolist()) == {1}
    n_ref = len(ref[5])  # PennyLane keeps the valid shots only
    assert abs(n_ref - P_VALID * REF_SHOTS) < 5 * np.sqrt(REF_SHOTS * P_VALID * (1 - P_VALID))
    # counts count the kept shots only (wire 0 is 1 in all of them)
    basis, numbers = counts
    assert dict(zip(np.asarray(basis).tolist(), np.asarray(numbers).tolist(), strict=True)) == {
        0: 0,
        1: n_kept,
    }
    assert dict(ref[4]) == {"1": n_ref}
    # statistics over the kept shots: the postselected state |1>|RY(0.4)1>
    exact_z = -np.cos(0.4)
    for got, want in [(expval, ref[0]), (var, ref[2]), (mean_m, ref[3])]:
        assert got == pytest.approx(want, abs=_tol(0.5, n_kept) + _tol(0.5, n_ref))
    assert expval == pytest.approx(exact_z, abs=_tol(0.5, n_kept))
    assert var == pytest.approx(1 - np.sin(0.4) ** 2, abs=_tol(0.5, n_kept))
    assert mean_m == 1.0
    np.testing.assert_allclose(probs, ref[1], atol=_tol(0.1, n_kept) + _tol(0.1, n_ref))
    assert probs.sum() == pytest.approx(1.0)


def test_fill_shots_postselects_every_shot():
    device = qml.device("lightning.qubit", wires=2)
    compiled = cofactor.qjit(_qnode(device, postselect_mode="fill-shots"), seed=3)
    expval, probs, _var, mean_m, counts, samples = compiled(X)
    assert np.all(np.asarray(samples) == 1)
    assert np.asarray(counts[1]).tolist() == [0, SHOTS]
    assert mean_m == 1.0
    assert expval == pytest.approx(-np.cos(0.4), abs=_tol(0.5, SHOTS))
    assert probs.sum() == pytest.approx(1.0)


def test_postselections_inside_a_loop_multiply():
    """Each of three postselected measurements (inside a compiled loop) keeps a shot with
    probability P_VALID: about P_VALID**3 of the shots survive."""

    def circuit(x):
        @qml.for_loop(0, 3, 1)
        def body(i):
            qml.RX(x, i)
            qml.measure(i, postselect=1)

        body()
        return qml.sample(wires=[0, 1, 2]), qml.expval(qml.Z(0) @ qml.Z(1) @ qml.Z(2))

    device = qml.device("lightning.qubit", wires=3)
    qnode = qml.set_shots(qml.QNode(circuit, device, mcm_method="one-shot"), SHOTS)
    samples, expval = cofactor.qjit(qnode, seed=5)(1.6)
    p = np.sin(0.8) ** 2
    samples = np.asarray(samples)
    kept = samples[:, 0] != fill_in_value
    assert np.all(samples[~kept] == fill_in_value)
    assert np.all(samples[kept] == 1)
    assert abs(kept.sum() - p**3 * SHOTS) < 5 * np.sqrt(SHOTS * p**3 * (1 - p**3))
    assert expval == -1.0  # every kept shot is |111>


def test_no_shot_passes_gives_nan_as_pennylane():
    def circuit():
        m = qml.measure(0, postselect=1)  # |0> never measures 1
        return qml.expval(qml.Z(0)), qml.expval(m)

    ref = qml.set_shots(
        qml.QNode(circuit, qml.device("default.qubit", wires=1), mcm_method="one-shot"), 50
    )()
    qnode = qml.set_shots(
        qml.QNode(circuit, qml.device("lightning.qubit", wires=1), mcm_method="one-shot"), 50
    )
    got = cofactor.qjit(qnode)()
    assert np.all(np.isnan(ref)) and np.all(np.isnan(got))
