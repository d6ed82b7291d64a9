"""The adjoint Jacobian's layer sweep (runtime/src/AdjointFusion.hpp, CrossSums.inc).

Walking back with fusion on, pending trainable one-wire blocks take their derivatives in one
read-only pass over phi and lambda (2x2 cross sums of all their wires), then are applied as
constant blocks. The Jacobian must be the unfused one (and the one-wire steps' one) to
1e-12, on layered circuits where the sweeps happen: layers of one-wire gates of every
trainable kind, with fixed gates, adjoints and repeated wires among them, then entanglers
(CNOT rings, controlled and multi-wire trainable gates); several observables. n = 12 and 13
put wires on the bits inside a vector, inside a tile and across tiles, in pairs and alone.
"""

from __future__ import annotations

import numpy as np
import pytest

ONE_WIRE_TRAINABLE = ["RX", "RY", "RZ", "PhaseShift", "Rot", "U2", "U3"]
ONE_WIRE_FIXED = ["Hadamard", "S", "T", "SX", "PauliY"]
ENTANGLERS = ["CNOT", "CZ", "CRX", "IsingXX", "CRot", "SWAP"]


def _record(rt, n: int, layers: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rt.tape_start()
    for layer in range(layers):
        for w in range(n):
            for _ in range(int(rng.integers(0, 3))):  # 0-2 gates on the wire, some fixed
                name = str(rng.choice(ONE_WIRE_TRAINABLE + ONE_WIRE_FIXED))
                _, num_params, _ = rt.gates[name]
                rt.gate(name, rng.normal(size=num_params), [w], adjoint=bool(rng.integers(2)))
        r = layer % (n - 1) + 1
        for w in range(n):
            name = "CNOT" if rng.random() < 0.6 else str(rng.choice(ENTANGLERS))
            _, num_params, _ = rt.gates[name]
            wires = [w, (w + r) % n]
            if rng.random() < 0.1:  # a control on a third wire
                ctrl = [(w + r + 1) % n] if (w + r + 1) % n != w else []
                rt.gate(name, rng.normal(size=num_params), wires, ctrls=ctrl)
            else:
                rt.gate(name, rng.normal(size=num_params), wires, adjoint=bool(rng.integers(2)))
    for w in range(0, n, 2):  # a last layer of one-wire trainable gates
        rt.gate("Rot", rng.normal(size=3), [w])
    rt.tape_stop()


def _observables(rt, n: int) -> list[int]:
    return [
        rt.named("PauliZ", 0),
        rt.tensor([rt.named("PauliX", n - 1), rt.named("PauliY", 1)]),
        rt.hamiltonian([0.3, -1.2], [rt.named("PauliZ", n // 2), rt.named("PauliX", n - 2)]),
    ]


def _jacobian(rt, monkeypatch, n, layers, seed, fusion: bool, sweep: int) -> np.ndarray:
    monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", "2")
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    monkeypatch.setenv("COFACTOR_ADJOINT_SWEEP_WIRES", str(sweep))
    rt.acquire(n)
    _record(rt, n, layers, seed)
    jac = rt.adjoint_jacobian(_observables(rt, n))
    rt.release()
    return jac


@pytest.mark.parametrize("n", [3, 5, 12, 13])
def test_sweep_matches_unfused(rt, monkeypatch, n):
    layers = 3 if n > 10 else 4
    ref = _jacobian(rt, monkeypatch, n, layers, n, fusion=False, sweep=0)
    assert np.max(np.abs(ref)) > 1e-2
    steps = _jacobian(rt, monkeypatch, n, layers, n, fusion=True, sweep=0)
    np.testing.assert_allclose(steps, ref, atol=1e-12, rtol=0)
    for sweep in (1, 2, 4):
        got = _jacobian(rt, monkeypatch, n, layers, n, fusion=True, sweep=sweep)
        np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0, err_msg=f"sweep={sweep}")
        # the sweeps round differently from the one-wire steps: equal to the last bit
        # would mean that no sweep took a derivative (4 wires at once: not on 3 qubits)
        if sweep < n:
            assert not np.array_equal(got, steps), f"sweep={sweep}"


def test_sweep_one_observable_at_a_time(rt, monkeypatch):
    """Batches of one lambda (COFACTOR_ADJOINT_MAX_BATCH=1) sweep phi with each."""
    n = 6
    ref = _jacobian(rt, monkeypatch, n, 3, 11, fusion=False, sweep=0)
    monkeypatch.setenv("COFACTOR_ADJOINT_MAX_BATCH", "1")
    got = _jacobian(rt, monkeypatch, n, 3, 11, fusion=True, sweep=1)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize(("n", "method"), [(5, "parameter-shift"), (12, "backprop")])
def test_sweep_sel_matches_pennylane(rt, monkeypatch, n, method):
    """StronglyEntanglingLayers with the sweeps on, against PennyLane's default.qubit."""
    import pennylane as qml

    layers = 3
    weights = np.random.default_rng(n).normal(size=(layers, n, 3))
    for name, value in (("FUSION", "1"), ("FUSION_QUBITS", "2"), ("FUSION_MIN_QUBITS", "0")):
        monkeypatch.setenv(f"COFACTOR_{name}", value)
    monkeypatch.setenv("COFACTOR_ADJOINT_SWEEP_WIRES", "2")
    rt.acquire(n)
    rt.tape_start()
    for layer in range(layers):
        for w in range(n):
            rt.gate("Rot", weights[layer, w], [w])
        r = layer % (n - 1) + 1
        for w in range(n):
            rt.gate("CNOT", [], [w, (w + r) % n])
    rt.tape_stop()
    jac = rt.adjoint_jacobian([rt.named("PauliZ", 0), rt.named("PauliX", n - 1)])

    @qml.qnode(qml.device("default.qubit", wires=n), diff_method=method)
    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return qml.expval(qml.Z(0)), qml.expval(qml.X(n - 1))

    expected = qml.jacobian(lambda w: qml.math.stack(circuit(w)))(
        qml.numpy.array(weights, requires_grad=True)
    )
    np.testing.assert_allclose(jac, np.reshape(expected, (2, -1)), atol=1e-10)


def _record_permutation_runs(rt, n: int, seed: int) -> None:
    """Trainable layers, each followed by a long run of CNOTs and SWAPs on random wire pairs
    (with a Toffoli, a controlled SWAP or a fixed gate breaking it now and then), the last
    run at the end of the tape: the backward walk's permutation blocks (AdjointFusion.hpp)."""
    rng = np.random.default_rng(seed)
    rt.tape_start()
    for layer in range(3):
        for w in range(n):
            rt.gate("Rot", rng.normal(size=3), [w])
        if layer == 1:
            rt.gate("IsingXX", [0.7], [0, n - 1])  # trainable, two wires: takes its unfused step
        for _ in range(3 * n):
            a, b = (int(x) for x in rng.choice(n, size=2, replace=False))
            u = rng.random()
            if u < 0.6:
                rt.gate("CNOT", [], [a, b])
            elif u < 0.85:
                rt.gate("SWAP", [], [a, b])
            elif u < 0.9 and n >= 3:
                c = next(x for x in range(n) if x not in (a, b))
                rt.gate("Toffoli", [], [a, c, b])
            elif u < 0.95 and n >= 3:
                c = next(x for x in range(n) if x not in (a, b))
                rt.gate("SWAP", [], [a, b], ctrls=[c])
            else:
                rt.gate("Hadamard", [], [a])
    for w in range(n):  # the tape ends with a ring (and a SWAP): a trailing permutation
        rt.gate("CNOT", [], [w, (w + 2) % n])
    rt.gate("SWAP", [], [0, n - 1])
    rt.tape_stop()


def _z_observables(rt, n: int) -> list[int]:
    """Sums of Z words (and the identity): the lambdas skip the tape's trailing CNOT run."""
    return [
        rt.named("PauliZ", n - 1),
        rt.tensor([rt.named("PauliZ", 0), rt.named("PauliZ", n // 2)]),
        rt.hamiltonian(
            [0.3, -1.2, 0.5],
            [rt.named("PauliZ", 1), rt.named("Identity", 0), rt.named("PauliZ", n - 2)],
        ),
    ]


@pytest.mark.parametrize("z_words", [False, True])
@pytest.mark.parametrize("n", [4, 12, 13])
def test_permutation_runs_match_unfused(rt, monkeypatch, n, z_words):
    """Long runs of CNOTs and SWAPs, the tape ending with one: the Jacobian is the unfused
    one to 1e-12, with several observables and one at a time; with Z words, the lambdas
    start after the trailing run (O' = R^dagger O R, AdjointJacobian.cpp), and equal the
    walk that undoes the run on them gate by gate (COFACTOR_ADJOINT_Z_RUN=0)."""
    observables = _z_observables if z_words else _observables

    def jacobian(fusion: bool, z_run: bool = True) -> np.ndarray:
        monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
        monkeypatch.setenv("COFACTOR_FUSION_QUBITS", "2")
        monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
        monkeypatch.setenv("COFACTOR_ADJOINT_Z_RUN", "1" if z_run else "0")
        rt.acquire(n)
        _record_permutation_runs(rt, n, 100 + n)
        jac = rt.adjoint_jacobian(observables(rt, n))
        rt.release()
        return jac

    ref = jacobian(fusion=False, z_run=False)
    assert np.max(np.abs(ref)) > 1e-2
    np.testing.assert_allclose(jacobian(fusion=False), ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(jacobian(fusion=True), ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(jacobian(fusion=True, z_run=False), ref, atol=1e-12, rtol=0)
    monkeypatch.setenv("COFACTOR_ADJOINT_MAX_BATCH", "1")
    np.testing.assert_allclose(jacobian(fusion=True), ref, atol=1e-12, rtol=0)
