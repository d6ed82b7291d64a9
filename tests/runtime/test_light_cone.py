"""The light cone of Z-word expectation values (runtime/src/LightCone.hpp): queued operations
that an expval of PauliZ words does not need stay queued, and everything read afterwards
(more expvals, var, probs, samples, mid-circuit measurements, the state, the adjoint
Jacobian) is that of a run that applied every gate. Compared with the light cone off
(COFACTOR_FUSION_LIGHT_CONE=0) and with fusion off, to 1e-12 (samples: equal)."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from runtime_child import RUNTIME_SCRIPT_PRELUDE, run_traced
from scipy.stats import unitary_group

# gates a Z word's light cone treats in every way: Z-word maps (CNOT, SWAP, diagonal), gates
# that are not (Rot, CRX, PauliX without control), gates with controls of value 0,
# PauliRot, unitaries and the global phase (no wires)
_GATES = ["Rot", "CNOT", "SWAP", "CZ", "RZ", "T", "IsingZZ", "CRX", "PauliX", "Hadamard"]


def _set(monkeypatch, fusion: bool, light_cone: bool = True, qubits: int = 3) -> None:
    monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", str(qubits))
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    monkeypatch.setenv("COFACTOR_FUSION_LIGHT_CONE", "1" if light_cone else "0")


def _random_gates(rt, rng, n: int, count: int) -> None:
    for _ in range(count):
        r = rng.random()
        if r < 0.05:
            rt.unitary(
                unitary_group.rvs(4, random_state=rng), [int(w) for w in rng.permutation(n)[:2]]
            )
            continue
        if r < 0.1:
            wires = [int(w) for w in rng.permutation(n)[:2]]
            rt.pauli_rot(float(rng.normal()), str(rng.choice(["ZZ", "XY", "ZI"])), wires)
            continue
        if r < 0.13:
            rt.gate("GlobalPhase", [float(rng.normal())], [])
            continue
        name = str(rng.choice(_GATES))
        _, num_params, num_wires = rt.gates[name]
        order = [int(w) for w in rng.permutation(n)]
        k = num_wires if num_wires > 0 else 2
        nc = 1 if rng.random() < 0.15 and k < n else 0
        cvals = [int(v) for v in rng.integers(0, 2, size=nc)]
        rt.gate(
            name,
            rng.normal(size=num_params),
            order[:k],
            adjoint=bool(rng.integers(2)),
            ctrls=order[k : k + nc],
            cvals=cvals,
        )


def _layers(rt, rng, n: int, layers: int) -> None:
    """StronglyEntanglingLayers' shape: Rot on every wire, then a CNOT ring of range r."""
    for layer in range(layers):
        for w in range(n):
            rt.gate("Rot", rng.normal(size=3), [w])
        r = layer % (n - 1) + 1
        for w in range(n):
            rt.gate("CNOT", [], [w, (w + r) % n])


def _session(rt, n: int, seed: int, shots: int):
    """Layers and random gates, each round ending in Z-word expvals (which leave gates queued)
    and then reads of other kinds; the values read, in order, and the final state."""
    rng = np.random.default_rng(seed)
    rt.acquire(n, shots=shots, seed=99)
    out = []
    for round_ in range(4):
        _layers(rt, rng, n, 2)
        _random_gates(rt, rng, n, 15)
        for _ in range(3):  # Z words on 1..n wires, alone and in a sum
            words = [
                [int(w) for w in rng.permutation(n)[: int(rng.integers(1, n + 1))]]
                for _ in range(2)
            ]
            handles = [rt.tensor([rt.named("PauliZ", w) for w in ws]) for ws in words]
            out.append(rt.expval(handles[0]))
            out.append(rt.expval(rt.hamiltonian([0.75, -1.5], handles)))
        out.append(rt.expval(rt.named("PauliZ", int(rng.integers(n)))))
        _random_gates(rt, rng, n, 5)  # gates after gates left queued
        out.append(rt.expval(rt.named("PauliZ", 0)))
        read = round_ % 4
        if read == 0:
            out.append(rt.expval(rt.named("PauliX", 1)))  # not a Z word: applies everything
        elif read == 1:
            out.append(rt.var(rt.tensor([rt.named("PauliZ", 0), rt.named("PauliZ", n - 1)])))
        elif read == 2:
            out.extend(rt.probs([0, n - 1]))
        else:
            out.append(float(rt.measure(int(rng.integers(n)), reset=True)))
    samples = rt.sample() if shots else None
    return np.array(out), rt.state(), samples


@pytest.mark.parametrize("n", [3, 5, 8])
@pytest.mark.parametrize("shots", [0, 40])
def test_light_cone_matches_full_application(rt, monkeypatch, n, shots):
    _set(monkeypatch, False)
    ref = _session(rt, n, 10 * n + shots, shots)
    for qubits in (2, 3):
        for light_cone in (False, True):
            _set(monkeypatch, True, light_cone, qubits)
            vals, state, samples = _session(rt, n, 10 * n + shots, shots)
            msg = f"k={qubits} light cone={light_cone}"
            np.testing.assert_allclose(vals, ref[0], atol=1e-12, rtol=0, err_msg=msg)
            np.testing.assert_allclose(state, ref[1], atol=1e-12, rtol=0, err_msg=msg)
            if shots:
                np.testing.assert_array_equal(samples, ref[2], err_msg=msg)


def _gradient_run(rt, words, expval_first: bool):
    """A recorded tape (layers, random gates, a tail of trainable diagonal gates and CNOTs),
    an expval of the first observable (as a gradient's forward value; it leaves gates
    queued), the adjoint Jacobian of all of them, a shifted replay and the state."""
    n = 7
    rng = np.random.default_rng(3)
    rt.acquire(n)
    rt.tape_start()
    _layers(rt, rng, n, 3)
    _random_gates(rt, rng, n, 10)
    for w in range(n):  # trainable, outside the light cone or Z-word maps: derivative 0
        rt.gate("RZ", [0.3 * w + 0.1], [w])
        rt.gate("IsingZZ", [0.2], [w, (w + 1) % n])
        rt.gate("CNOT", [], [w, (w + 2) % n])
    rt.tape_stop()
    handles = [
        rt.tensor([rt.named(kind, w) for w in ws]) if len(ws) > 1 else rt.named(kind, ws[0])
        for kind, ws in words
    ]
    value = rt.expval(handles[0]) if expval_first else 0.0
    jac = rt.adjoint_jacobian(handles)
    rt.replay_shifted(1, 0.4)
    return value, jac, rt.state()


@pytest.mark.parametrize(
    "words,expval_first",
    [
        ([("PauliZ", [0])], True),  # the walk starts from the queued state (the cone's path)
        ([("PauliZ", [2, 5])], True),
        ([("PauliZ", [0]), ("PauliZ", [3, 4])], True),  # queue != their cone: all applied
        ([("PauliZ", [0]), ("PauliX", [3])], True),  # not Z words
        ([("PauliZ", [1])], False),  # nothing left queued by an expval
    ],
)
def test_adjoint_jacobian_after_queued_gates(rt, monkeypatch, words, expval_first):
    """The adjoint Jacobian skips what the expval left queued when that is exactly what its
    observables' light cone leaves out (zero derivatives), and otherwise applies it first;
    a shifted replay and the state after it are those of the unfused run."""
    _set(monkeypatch, False)
    ref = _gradient_run(rt, words, expval_first)
    for adjoint_cone in ("0", "1"):
        monkeypatch.setenv("COFACTOR_ADJOINT_LIGHT_CONE", adjoint_cone)
        _set(monkeypatch, True, True)
        got = _gradient_run(rt, words, expval_first)
        assert abs(got[0] - ref[0]) < 1e-12
        np.testing.assert_allclose(got[1], ref[1], atol=1e-12, rtol=0)
        np.testing.assert_allclose(got[2], ref[2], atol=1e-12, rtol=0)


def test_queued_gates_do_not_outlive_the_device(rt, monkeypatch):
    """Gates left queued by an expval belong to that run: a new acquire of the same size (the
    device and its state buffer are reused) starts from exactly |0...0>, as does one after
    set_state discards them."""
    _set(monkeypatch, True, True)
    n = 6
    zero = np.zeros(2**n, complex)
    zero[0] = 1
    for _ in range(2):
        rt.acquire(n)
        _layers(rt, np.random.default_rng(1), n, 3)
        assert rt.expval(rt.named("PauliZ", 0)) != pytest.approx(1.0)
        rt.release()
        rt.acquire(n)
        assert rt.expval(rt.named("PauliZ", 0)) == 1.0
        np.testing.assert_array_equal(rt.state(), zero)
    rt.acquire(n)
    _layers(rt, np.random.default_rng(2), n, 3)
    rt.expval(rt.named("PauliZ", 0))
    rt.set_state(zero)
    np.testing.assert_array_equal(rt.state(), zero)


@pytest.mark.parametrize("fusion", [False, True])
def test_first_read_after_acquire_sees_zero(rt, monkeypatch, fusion):
    """With fusion the reset leaves |0...0> unwritten until the state is read (the product
    prefix writes every amplitude anyway): each kind of read right after an acquire of a
    reused device, whose buffer holds the previous run's state, sees exactly |0...0>."""
    _set(monkeypatch, fusion, True)
    n = 5
    zero = np.zeros(2**n, complex)
    zero[0] = 1
    reads = [
        lambda: rt.state(),
        lambda: rt.probs([]),
        lambda: np.array([rt.expval(rt.named("PauliZ", 2))]),
        lambda: np.array([rt.measure(3)]),
        lambda: rt.sample([]),
        lambda: rt.adjoint_jacobian([rt.named("PauliZ", 0)]),
    ]
    expected = [
        zero,
        np.abs(zero) ** 2,
        np.ones(1),
        np.zeros(1),
        np.zeros((30, n)),
        np.zeros((1, 1)),
    ]
    for read, want in zip(reads, expected, strict=True):
        shots = 0 if read is reads[-1] else 30
        rt.acquire(n, shots=shots)
        _layers(rt, np.random.default_rng(4), n, 2)
        rt.state()  # the buffer now holds a state far from |0...0>
        rt.acquire(n, shots=shots)
        if read is reads[-1]:
            rt.tape_start()
            rt.gate("RY", [0.0], [0])
            rt.tape_stop()
        np.testing.assert_array_equal(np.asarray(read()).reshape(np.shape(want)), want)
    # a set_state that fails (not normalised) leaves the state as it was, queued gates too
    rt.acquire(n)
    rt.gate("PauliX", [], [1])
    with pytest.raises(Exception, match="not normalised"):
        rt.set_state(2 * zero)
    rt.clear()
    want = np.zeros(2**n, complex)
    want[1 << (n - 2)] = 1
    np.testing.assert_array_equal(rt.state(), want)


def test_queued_gates_stay_with_their_thread(rt, monkeypatch):
    """Each thread has its own device (and queue): sessions run side by side in threads give
    what they give one after the other."""
    import threading

    _set(monkeypatch, True, True)
    seeds = [5, 6, 7]
    alone = [_session(rt, 8, seed, 0) for seed in seeds]
    results: dict = {}

    def worker(seed):
        try:
            results[seed] = _session(rt, 8, seed, 0)
        finally:
            rt.release()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seed, ref in zip(seeds, alone, strict=True):
        np.testing.assert_allclose(results[seed][0], ref[0], atol=1e-12, rtol=0)
        np.testing.assert_allclose(results[seed][1], ref[1], atol=1e-12, rtol=0)


LIGHT_CONE_TRACE = RUNTIME_SCRIPT_PRELUDE + (
    "rt.tape_start()\n"
    "for layer in range(4):\n"
    "    for w in range(12):\n"
    "        rt.gate('Rot', [0.1 * w, 0.2, 0.3 + layer], [w])\n"
    "    for w in range(12):\n"
    "        rt.gate('CNOT', [], [w, (w + layer + 1) % 12])\n"
    "rt.tape_stop()\n"
    "z0 = rt.named('PauliZ', 0)\n"
    "print(rt.expval(z0))\n"
    "print(rt.adjoint_jacobian([z0]).sum())\n"
    "print(rt.expval(rt.named('PauliZ', 1)))\n"
)


def _traced(script: str) -> subprocess.CompletedProcess:
    return run_traced(script, COFACTOR_FUSION_MIN_QUBITS="0")


def test_light_cone_leaves_gates_queued():
    """The comparisons above prove nothing if no gate ever stayed queued: on a layered circuit
    measured on one wire, most of the last layer must; and the adjoint Jacobian of the same
    word after that expval must skip them."""
    proc = _traced(LIGHT_CONE_TRACE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept = [
        (int(a), int(b)) for a, b in re.findall(r"^light cone: (\d+) of (\d+)", proc.stderr, re.M)
    ]
    # the last layer's CNOT ring (12) and its Rot gates off the word's support (12 - 3)
    assert kept and kept[-1][0] >= 12 + 9, proc.stderr[-3000:]
    skipped = re.findall(r"adjoint light cone: (\d+) of", proc.stderr)
    assert skipped and int(skipped[-1]) == kept[-1][0], proc.stderr[-3000:]
    # the second expval applies what the first left (GateFuser::queueIsConeRest_): one walk
    assert len(kept) == 1, proc.stderr[-3000:]
