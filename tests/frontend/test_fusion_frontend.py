"""Gate fusion through the whole pipeline: random compiled circuits with controls, adjoints,
mid-circuit measurements and shots give the same results with the runtime's fusion on and
off (same seed, same samples), and agree with PennyLane where the result is analytic.

The runtime reads COFACTOR_FUSION* at every device acquire, so one process can run a
compiled program both ways; COFACTOR_FUSION_MIN_QUBITS=0 makes it fuse small registers.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import qjit

pytestmark = pytest.mark.needs_toolchain

N = 5


def _fusion(monkeypatch, on: bool, qubits: int = 3) -> None:
    monkeypatch.setenv("COFACTOR_FUSION", "1" if on else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", str(qubits))
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")


def _random_ops(seed: int, length: int, measure: bool):
    rng = np.random.default_rng(seed)
    ops = []
    for _ in range(length):
        kind = rng.choice(["rot", "cnot", "ctrl", "adj", "single", "iz", "mcm"])
        if kind == "mcm" and not measure:
            kind = "single"
        w = [int(x) for x in rng.permutation(N)[:3]]
        ops.append((str(kind), w, rng.normal(size=3).tolist()))
    return ops


def _apply(ops):
    for kind, w, p in ops:
        if kind == "rot":
            qml.Rot(*p, wires=w[0])
        elif kind == "cnot":
            qml.CNOT(wires=w[:2])
        elif kind == "ctrl":
            qml.ctrl(qml.RY, control=w[1:], control_values=[1, 0])(p[0], wires=w[0])
        elif kind == "adj":
            qml.adjoint(qml.IsingXY)(p[1], wires=w[:2])
        elif kind == "single":
            qml.Hadamard(wires=w[0])
            qml.T(wires=w[1])
        elif kind == "iz":
            qml.IsingZZ(p[2], wires=w[:2])
        else:
            qml.measure(w[0], reset=bool(p[0] > 0))


def _circuit(ops, shots):
    dev = qml.device("default.qubit", wires=N)

    @qml.qnode(dev, shots=shots)
    def circuit():
        _apply(ops)
        if shots:
            return qml.sample(), qml.expval(qml.PauliZ(0))
        return qml.state(), qml.probs(wires=[0, 2]), qml.expval(qml.PauliX(1) @ qml.PauliZ(3))

    return circuit


def _run_both(monkeypatch, make):
    out = {}
    for on in (False, True):
        _fusion(monkeypatch, on)
        out[on] = make()()
    return out[False], out[True]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_analytic_fused_equals_unfused_and_pennylane(monkeypatch, seed):
    ops = _random_ops(seed, 60, measure=False)
    off, on = _run_both(monkeypatch, lambda: qjit(_circuit(ops, None)))
    for a, b in zip(off, on, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-12)
    expected = _circuit(ops, None)()
    for a, e in zip(on, expected, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=1e-10)


@pytest.mark.parametrize("seed", [4, 5])
def test_shots_and_mid_circuit_measurements_same_samples(monkeypatch, seed):
    ops = _random_ops(seed, 60, measure=True)
    off, on = _run_both(monkeypatch, lambda: qjit(_circuit(ops, 300), seed=99))
    np.testing.assert_array_equal(np.asarray(on[0]), np.asarray(off[0]))
    assert float(on[1]) == float(off[1])


def test_gradient_fused_equals_unfused_and_pennylane(monkeypatch):
    dev = qml.device("default.qubit", wires=N)
    weights = np.random.default_rng(7).normal(size=(3, N, 3))

    @qml.qnode(dev, diff_method="adjoint")
    def sel(w):
        qml.StronglyEntanglingLayers(w, wires=range(N))
        qml.ctrl(qml.RX, control=[0, 1])(w[0, 0, 0], wires=4)
        return qml.expval(qml.PauliZ(0) @ qml.PauliY(4))

    off, on = _run_both(monkeypatch, lambda: lambda: qjit(qml.grad(sel))(weights))
    np.testing.assert_allclose(on, off, atol=1e-12)
    expected = qml.grad(sel)(qml.numpy.array(weights, requires_grad=True))
    np.testing.assert_allclose(on, expected, atol=1e-10)
