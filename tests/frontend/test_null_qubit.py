"""PennyLane's `null.qubit` under qjit: compiles, runs nothing, and returns what PennyLane's
own NullQubit returns (pennylane/devices/null_qubit.py)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import CompileError, cond, for_loop, grad, measure, qjit

pytestmark = pytest.mark.needs_toolchain


def _analytic(x):
    qml.RX(x, wires=0)
    qml.CNOT([0, 1])
    qml.Rot(x, 2 * x, 3.0, wires=2)
    qml.QFT(wires=[0, 1, 2])
    return (
        qml.expval(qml.Z(0)),
        qml.var(qml.X(1)),
        qml.expval(qml.Z(0) @ qml.X(2) + 0.5 * qml.Y(1)),
        qml.probs(wires=[0, 1]),
        qml.state(),
    )


def _shots(x):
    qml.RX(x, wires=0)
    return (
        qml.sample(wires=[0, 1]),
        qml.expval(qml.Z(0)),
        qml.sample(qml.Z(0)),
        qml.counts(wires=[0, 1]),
    )


def test_analytic_results_match_pennylane_null_qubit():
    dev = qml.device("null.qubit", wires=3)
    got = qjit(qml.qnode(dev)(_analytic))(0.3)
    want = qml.qnode(dev)(_analytic)(0.3)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w)
    assert np.iscomplexobj(got[-1])  # the state keeps its complex dtype


def test_shot_results_match_pennylane_null_qubit():
    dev = qml.device("null.qubit", wires=2)
    got = qjit(qml.set_shots(qml.qnode(dev)(_shots), 7))(0.3)
    want = qml.set_shots(qml.qnode(dev)(_shots), 7)(0.3)
    for g, w in zip(got[:3], want[:3], strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w)
    # cofactor's counts are (basis states, counts), as Catalyst's; PennyLane's a dict
    basis, counts = got[3]
    assert dict(zip(basis.tolist(), counts.tolist(), strict=True)) == {0: 7, 1: 0, 2: 0, 3: 0}
    assert want[3] == {"00": 7}


def test_wide_circuit_with_loops_conds_and_measurements_runs_nothing():
    """60 wires would need 2**60 amplitudes on a simulator: null.qubit allocates none."""
    dev = qml.device("null.qubit", wires=60)

    @qjit
    @qml.qnode(dev)
    def wide(x, n):
        @for_loop(0, n, 1)
        def layer(i):
            qml.RY(x * i, wires=i)
            qml.CNOT([i, i + 1])

        layer()
        m = measure(3)

        @cond(m)
        def flip():
            qml.X(0)

        flip()
        return qml.expval(qml.Z(59)), m, qml.probs(wires=[0, 5])

    ev, m, probs = wide(0.2, 59)
    assert ev == 0.0 and not m
    np.testing.assert_allclose(probs, [1.0, 0.0, 0.0, 0.0])
    # no device is acquired: the compiled program has no quantum operation at all
    assert "quantum." not in wide.mlir_opt


def test_gradient_is_zero_like_pennylane():
    @qml.qnode(qml.device("null.qubit", wires=1))
    def circuit(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.Z(0))

    assert qjit(grad(circuit))(0.3) == 0.0
    assert qjit(grad(lambda x: circuit(x) + x**2))(0.3) == pytest.approx(0.6)


def test_null_qubit_still_checks_the_circuit():
    @qml.qnode(qml.device("null.qubit", wires=2))
    def bad_wire(x):
        qml.RX(x, wires=5)
        return qml.expval(qml.Z(0))

    with pytest.raises(CompileError, match="wire 5 is not on the device"):
        qjit(bad_wire)(0.1)

    @qml.qnode(qml.device("null.qubit", wires=2))
    def no_shots():
        return qml.sample(wires=[0])

    with pytest.raises(CompileError, match="needs shots"):
        qjit(no_shots)()
