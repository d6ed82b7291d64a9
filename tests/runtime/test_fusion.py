"""Gate fusion (runtime/src/GateFusion.hpp): fused and unfused execution agree.

The runtime reads COFACTOR_FUSION, COFACTOR_FUSION_QUBITS and COFACTOR_FUSION_MIN_QUBITS at
every device acquire, so each test runs the same random program once with fusion off and
once per fusion width on registers small enough to test (MIN_QUBITS=0 fuses them too), and
compares states, expectation values, probabilities, mid-circuit outcomes and shots (same
seed, same samples) to 1e-12.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from isa_child import assert_passes_at_isa
from runtime_child import RUNTIME_SCRIPT_PRELUDE, run_traced
from scipy.stats import unitary_group

FIXED_GATES = [
    "Identity",
    "Hadamard",
    "PauliX",
    "PauliY",
    "PauliZ",
    "S",
    "T",
    "SX",
    "RX",
    "RY",
    "RZ",
    "PhaseShift",
    "Rot",
    "U2",
    "U3",
    "CNOT",
    "CY",
    "CZ",
    "CH",
    "SWAP",
    "ISWAP",
    "SISWAP",
    "ECR",
    "IsingXX",
    "IsingYY",
    "IsingZZ",
    "IsingXY",
    "CRX",
    "CRY",
    "CRZ",
    "CRot",
    "ControlledPhaseShift",
    "SingleExcitation",
    "SingleExcitationPlus",
    "DoubleExcitation",
    "Toffoli",
    "CSWAP",
    "MultiRZ",
    "GlobalPhase",
]


def _program(rng, n: int, length: int, measure: bool):
    """A random list of calls: gates with adjoints and controls, unitaries, Pauli rotations
    and (if measure) mid-circuit measurements with resets."""
    prog = []
    for _ in range(length):
        r = rng.random()
        if measure and r < 0.04:
            prog.append(("measure", int(rng.integers(n)), bool(rng.integers(2))))
            continue
        if r < 0.1:
            k = int(rng.integers(1, 3))
            wires = [int(w) for w in rng.permutation(n)[:k]]
            prog.append(
                ("unitary", unitary_group.rvs(2**k, random_state=rng), wires, bool(rng.integers(2)))
            )
            continue
        if r < 0.15:
            k = int(rng.integers(1, min(n, 3) + 1))
            wires = [int(w) for w in rng.permutation(n)[:k]]
            word = "".join(rng.choice(list("IXYZ"), size=k))
            prog.append(("pauli_rot", float(rng.normal()), word, wires, bool(rng.integers(2))))
            continue
        prog.append(("gate", str(rng.choice(FIXED_GATES))))
    return prog


def _apply_fixed_item(rt, item, outcomes: list) -> bool:
    """Applies a program item that is not a named gate (a measurement, a unitary matrix or a
    Pauli rotation); False for a named gate, which the caller applies."""
    if item[0] == "measure":
        outcomes.append(rt.measure(item[1], reset=item[2]))
    elif item[0] == "unitary":
        rt.unitary(item[1], item[2], adjoint=item[3])
    elif item[0] == "pauli_rot":
        rt.pauli_rot(item[1], item[2], item[3], adjoint=item[4])
    else:
        return False
    return True


def _run(rt, prog, n: int, shots: int, seed: int, gate_rng_seed: int):
    """Runs prog; returns the final state, the measurement outcomes and, with shots, samples."""
    rt.acquire(n, shots=shots, seed=seed)
    rng = np.random.default_rng(gate_rng_seed)  # the gates' random choices, same per run
    outcomes = []
    for item in prog:
        if _apply_fixed_item(rt, item, outcomes):
            continue
        name = item[1]
        _, num_params, num_wires = rt.gates[name]
        k = min(int(rng.integers(1, 4)), n) if num_wires < 0 else num_wires
        if k > n:
            continue
        if name == "GlobalPhase":
            k = 0
        order = [int(w) for w in rng.permutation(n)]
        wires, rest = order[:k], order[k:]
        nc = int(rng.integers(0, min(2, len(rest)) + 1)) if rng.random() < 0.3 else 0
        ctrls = rest[:nc]
        cvals = [int(v) for v in rng.integers(0, 2, size=nc)]
        params = rng.normal(size=num_params)
        rt.gate(name, params, wires, adjoint=bool(rng.integers(2)), ctrls=ctrls, cvals=cvals)
    expz = [rt.expval(rt.named("PauliZ", w)) for w in range(n)]
    probs = rt.probs([0, n - 1])
    state = rt.state()
    samples = rt.sample() if shots else None
    return state, outcomes, expz, probs, samples


def _set(monkeypatch, fusion: bool, qubits: int = 3) -> None:
    monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", str(qubits))
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")


@pytest.mark.parametrize("n", [2, 4, 7])
@pytest.mark.parametrize("measure,shots", [(False, 0), (True, 0), (True, 50)])
def test_fused_matches_unfused(rt, monkeypatch, n, measure, shots):
    rng = np.random.default_rng(1000 * n + 10 * int(measure) + shots)
    prog = _program(rng, n, 120, measure)
    _set(monkeypatch, False)
    ref = _run(rt, prog, n, shots, seed=77, gate_rng_seed=5)
    bitwise_equal = []
    for qubits in (1, 2, 3, 4, 5, 6):
        _set(monkeypatch, True, qubits)
        got = _run(rt, prog, n, shots, seed=77, gate_rng_seed=5)
        bitwise_equal.append(np.array_equal(got[0], ref[0]))
        np.testing.assert_allclose(got[0], ref[0], atol=1e-12, rtol=0, err_msg=f"state, k={qubits}")
        assert got[1] == ref[1], f"mid-circuit outcomes, k={qubits}"
        np.testing.assert_allclose(got[2], ref[2], atol=1e-12, rtol=0)
        np.testing.assert_allclose(got[3], ref[3], atol=1e-12, rtol=0)
        if shots:
            np.testing.assert_array_equal(got[4], ref[4])
    assert abs(np.vdot(ref[0], ref[0]) - 1) < 1e-10
    # fused matrices round differently: a run identical to the last bit at every width
    # would mean that nothing was fused
    assert not all(bitwise_equal)


def test_fused_state_matches_pennylane(rt, monkeypatch):
    """Fusion against an independent reference: a layered circuit on 5 wires."""
    import pennylane as qml

    n, layers = 5, 3
    rng = np.random.default_rng(3)
    weights = rng.normal(size=(layers, n, 3))
    _set(monkeypatch, True, 3)
    rt.acquire(n)
    for layer in range(layers):
        for w in range(n):
            rt.gate("Rot", weights[layer, w], [w])
        r = layer % (n - 1) + 1
        for w in range(n):
            rt.gate("CNOT", [], [w, (w + r) % n])
    got = rt.state()
    dev = qml.device("default.qubit", wires=n)

    @qml.qnode(dev)
    def circuit():
        qml.StronglyEntanglingLayers(weights, wires=range(n))
        return qml.state()

    np.testing.assert_allclose(got, circuit(), atol=1e-12)


@pytest.mark.parametrize("qubits", [2, 3, 5])
def test_adjoint_and_replay_under_fusion(rt, monkeypatch, qubits):
    """The tape keeps every operation: the adjoint Jacobian and shifted replays are those
    of the unfused run."""
    n = 5
    rng = np.random.default_rng(11)
    params = rng.normal(size=(4, n, 3))

    def run():
        rt.acquire(n)
        rt.tape_start()
        for layer in range(4):
            for w in range(n):
                rt.gate("Rot", params[layer, w], [w])
            for w in range(n):
                rt.gate(
                    "CRX", [params[layer, w, 0]], [w, (w + 1) % n], ctrls=[(w + 2) % n], cvals=[0]
                )
        rt.tape_stop()
        obs = [rt.named("PauliZ", 0), rt.named("PauliX", 3)]
        jac = rt.adjoint_jacobian(obs)
        rt.replay_shifted(2, 0.3)
        shifted = rt.state()
        return jac, shifted

    _set(monkeypatch, False)
    ref_jac, ref_shifted = run()
    _set(monkeypatch, True, qubits)
    jac, shifted = run()
    np.testing.assert_allclose(jac, ref_jac, atol=1e-12)
    np.testing.assert_allclose(shifted, ref_shifted, atol=1e-12)


def test_set_state_discards_queued_gates(rt, monkeypatch):
    _set(monkeypatch, True, 3)
    rt.acquire(3)
    rt.gate("Hadamard", [], [0])
    rt.gate("CNOT", [], [0, 1])
    psi = np.zeros(8, complex)
    psi[5] = 1
    rt.set_state(psi)
    rt.gate("PauliX", [], [2])
    rt.gate("PauliX", [], [0])
    expected = np.zeros(8, complex)
    expected[0] = 1
    np.testing.assert_allclose(rt.state(), expected, atol=1e-15)


# Blocks of k wires at every position: the lowest wire inside a vector of amplitudes (the
# last bits, where the dense kernels shuffle lanes), just above it (bit 2: the first
# position where the stream kernel of FusedKernels.inc takes them on AVX-512), in the middle,
# on the top wires and spread out; each block is built from random 2-wire unitaries and Rot
# gates on a random entangled state, so the fused dense block is a generic dense matrix.
_BLOCK_WIRES = {
    2: [(8, 7), (7, 6), (6, 5), (5, 3), (4, 2), (0, 1), (1, 8), (2, 0)],
    3: [(6, 7, 8), (4, 5, 6), (5, 3, 6), (0, 1, 2), (2, 0, 4), (1, 4, 7), (0, 8, 3)],
    4: [(5, 6, 7, 8), (3, 4, 5, 6), (6, 2, 0, 4), (0, 1, 2, 3), (1, 3, 5, 7)],
}


def _check_dense_block(rt, monkeypatch, n: int, wires: tuple) -> None:
    k = len(wires)
    rng = np.random.default_rng(sum(w * 10**i for i, w in enumerate(wires)) + 1000 * (n != 9))
    prep = rng.normal(size=(n, 3))
    block_rots = rng.normal(size=(2, k, 3))
    pairs = [(wires[i], wires[(i + 1) % k]) for i in range(k)] * 2
    unitaries = [unitary_group.rvs(4, random_state=rng) for _ in pairs]

    def run():
        rt.acquire(n)
        for w in range(n):
            rt.gate("Hadamard", [], [w])
            rt.gate("Rot", prep[w], [w])
        for w in range(n - 1):
            rt.gate("CNOT", [], [w, w + 1])
        # not fusable: applies every pending block, so the block below is fused on its own
        rt.pauli_rot(0.37, ("XYZ" * n)[:n], list(range(n)))
        for i, (a, b) in enumerate(pairs):
            rt.gate("Rot", block_rots[i % 2, i % k], [wires[i % k]])
            rt.unitary(unitaries[i], [a, b])
        return rt.state()

    _set(monkeypatch, False)
    ref = run()
    for qubits in sorted({k, 4}):
        _set(monkeypatch, True, qubits)
        np.testing.assert_allclose(run(), ref, atol=1e-12, rtol=0, err_msg=f"k={qubits}")


@pytest.mark.parametrize(
    "wires", [w for ws in _BLOCK_WIRES.values() for w in ws], ids=lambda w: "-".join(map(str, w))
)
def test_dense_block_at_every_position(rt, monkeypatch, wires):
    _check_dense_block(rt, monkeypatch, 9, wires)


# The stream kernel walks vectors of blocks itself, two per step while their inputs fit in the
# registers (k <= 3 on AVX-512), else one, and a last single vector when a thread's share is
# odd: registers just large enough for the block on the top wires have one, two and four
# vectors of blocks (n = k + 2, k + 3, k + 4 on AVX-512; more on narrower vectors).
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("extra", [2, 3, 4])
def test_dense_block_on_small_registers(rt, monkeypatch, k, extra):
    _check_dense_block(rt, monkeypatch, k + extra, tuple(range(k)))


@pytest.mark.parametrize("isa", ["base", "avx2"])
def test_dense_blocks_at_lower_instruction_set_levels(isa):
    """The fused kernels are compiled per instruction-set level with different vector
    widths (one, two or four amplitudes a vector: a different lowest bit for the stream
    kernel); COFACTOR_ISA is read once per process, so the block test runs in a child."""
    assert_passes_at_isa(__file__, "test_dense_block_at_every_position", isa)
    assert_passes_at_isa(__file__, "test_dense_block_on_small_registers", isa)


# The product prefix (GateFusion.hpp): from |0...0>, one-wire gates and then CNOTs / SWAPs
# are kept as per-wire 2-vectors and a permutation and written in one pass when anything
# else comes. Each program: one-wire gates (named, adjoint, unitaries), then permutations
# (CNOT, SWAP, PauliX with a control of value 1 -- and of value 0, which ends the prefix),
# then one operation that ends it; fused against unfused, at sizes with even and odd halves
# and one above the threading threshold.
_PREFIX_ONE_WIRE = ["Hadamard", "RX", "RY", "RZ", "Rot", "S", "T", "PauliY", "U3", "PhaseShift"]
_PREFIX_ENDS = [
    "state",
    "expval",
    "probs",
    "measure",
    "Rot",
    "IsingXY",
    "pauli_rot",
    "GlobalPhase",
    "sample",
    "CRX",
    "Toffoli",
]


def _prefix_program(rng, n: int, end: str, permutations: bool):
    prog = []
    for _ in range(int(rng.integers(0, 2 * n + 1))):
        w = int(rng.integers(n))
        if rng.random() < 0.2:
            prog.append(
                ("unitary", unitary_group.rvs(2, random_state=rng), [w], bool(rng.integers(2)))
            )
        else:
            name = str(rng.choice(_PREFIX_ONE_WIRE))
            prog.append(("named", name, [w], [], []))
    for _ in range(int(rng.integers(0, 2 * n + 1)) if permutations and n > 1 else 0):
        a, b = (int(x) for x in rng.permutation(n)[:2])
        kind = rng.random()
        if kind < 0.6:
            prog.append(("named", "CNOT", [a, b], [], []))
        elif kind < 0.8:
            prog.append(("named", "SWAP", [a, b], [], []))
        else:
            prog.append(("named", "PauliX", [b], [a], [1]))
    if end == "measure":
        prog.append(("measure", int(rng.integers(n)), bool(rng.integers(2))))
    elif end in ("Rot", "GlobalPhase"):
        prog.append(("named", end, [int(rng.integers(n))] if end == "Rot" else [], [], []))
    elif end in ("IsingXY", "CRX") and n >= 2:
        prog.append(("named", end, [int(x) for x in rng.permutation(n)[:2]], [], []))
    elif end == "Toffoli" and n >= 3:
        a, b, c = (int(x) for x in rng.permutation(n)[:3])
        prog.append(("named", "PauliX", [c], [a, b], [0, 1]))  # a control of value 0
    elif end == "pauli_rot":
        prog.append(("pauli_rot", 0.3, "XY"[: min(n, 2)], list(range(min(n, 2))), False))
    # the one-wire gates again: after the end they take the ordinary path
    prog.append(("named", "Rot", [0], [], []))
    return prog


def _run_prefix(rt, prog, n: int, shots: int):
    rt.acquire(n, shots=shots, seed=11)
    rng = np.random.default_rng(9)
    outcomes = []
    for item in prog:
        if _apply_fixed_item(rt, item, outcomes):
            continue
        _, name, wires, ctrls, cvals = item
        params = rng.normal(size=rt.gates[name][1])
        rt.gate(name, params, wires, adjoint=bool(rng.integers(2)), ctrls=ctrls, cvals=cvals)
    expz = [rt.expval(rt.named("PauliZ", w)) for w in range(n)]
    samples = rt.sample() if shots else None
    return rt.state(), outcomes, expz, samples


@pytest.mark.parametrize("n", [1, 2, 5, 8, 17])
@pytest.mark.parametrize("end", _PREFIX_ENDS)
def test_product_prefix_matches_unfused(rt, monkeypatch, n, end):
    rng = np.random.default_rng(100 * n + _PREFIX_ENDS.index(end))
    shots = 20 if end == "sample" else 0
    for permutations in (False, True):
        prog = _prefix_program(rng, n, end, permutations)
        _set(monkeypatch, False)
        ref = _run_prefix(rt, prog, n, shots)
        for qubits in (2, 3):
            _set(monkeypatch, True, qubits)
            got = _run_prefix(rt, prog, n, shots)
            np.testing.assert_allclose(got[0], ref[0], atol=1e-12, rtol=0, err_msg=f"k={qubits}")
            assert got[1] == ref[1]
            np.testing.assert_allclose(got[2], ref[2], atol=1e-12, rtol=0)
            if shots:
                np.testing.assert_array_equal(got[3], ref[3])


def test_product_prefix_against_pennylane(rt, monkeypatch):
    """A first layer written by the prefix (Rot on every wire, then a CNOT ring) followed by
    more layers, against default.qubit, on a register above the threading threshold."""
    import pennylane as qml

    n, layers = 17, 2
    weights = np.random.default_rng(5).normal(size=(layers, n, 3))
    _set(monkeypatch, True, 2)
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "16")  # the default
    rt.acquire(n)
    for layer in range(layers):
        for w in range(n):
            rt.gate("Rot", weights[layer, w], [w])
        for w in range(n):
            rt.gate("CNOT", [], [w, (w + layer + 1) % n])
    got = rt.state()

    @qml.qnode(qml.device("default.qubit", wires=n))
    def circuit():
        qml.StronglyEntanglingLayers(weights, wires=range(n))
        return qml.state()

    np.testing.assert_allclose(got, circuit(), atol=1e-12)


@pytest.mark.parametrize("isa", ["base", "avx2"])
def test_product_prefix_at_lower_instruction_set_levels(isa):
    """writeProductState is compiled per instruction-set level: the prefix tests in a child
    (COFACTOR_ISA is read once per process)."""
    assert_passes_at_isa(__file__, "product_prefix and not lower", isa)


# Blocks with wires on the bits inside one vector (the last one or two wires) take the lane
# kernel (FusedKernels.inc, laneBlocks) at AVX2 and AVX-512: layers of rotations and CNOT
# chains / rings (blocks of a rotation and a CNOT: outer groups of two) and dense unitaries
# on the lowest wires, fused against unfused at every width.
def _layered(rt, n: int, rng, ring: int) -> None:
    for layer in range(3):
        for w in range(n):
            rt.gate("Rot", rng.normal(size=3), [w])
        r = (layer + ring) % (n - 1) + 1
        for w in range(n - 1 if ring == 0 else n):
            rt.gate("CNOT", [], [w, (w + r) % n])
    rt.unitary(unitary_group.rvs(8, random_state=rng), [n - 3, n - 1, n - 2])
    rt.unitary(unitary_group.rvs(4, random_state=rng), [n - 2, 2])


@pytest.mark.parametrize("ring", [0, 1, 2])
def test_lane_blocks_on_the_last_wires(rt, monkeypatch, ring):
    n = 9

    def run():
        rt.acquire(n)
        rt.pauli_rot(0.4, "XY", [0, n - 1])  # not a product state: no product prefix
        _layered(rt, n, np.random.default_rng(ring), ring)
        return rt.state()

    _set(monkeypatch, False)
    ref = run()
    for qubits in (2, 3, 4):
        _set(monkeypatch, True, qubits)
        np.testing.assert_allclose(run(), ref, atol=1e-12, rtol=0, err_msg=f"k={qubits}")


@pytest.mark.parametrize("isa", ["base", "avx2"])
def test_lane_blocks_at_lower_instruction_set_levels(isa):
    assert_passes_at_isa(__file__, "test_lane_blocks_on_the_last_wires", isa)


# Expectation values of Z words (GateFuser::flushForZWords): pending blocks of CNOTs, SWAPs
# and diagonal gates are not applied but conjugate the words, and stay pending for what
# follows (more gates, another expval, var, probs, the state).
_Z_TAIL = [
    "CNOT",
    "SWAP",
    "CZ",
    "RZ",
    "T",
    "S",
    "PhaseShift",
    "IsingZZ",
    "MultiRZ",
    "Toffoli",
    "PauliX",
]


def _z_tail_run(rt, n: int, seed: int):
    rng = np.random.default_rng(seed)
    rt.acquire(n)
    _layered(rt, n, rng, 1)
    out = []
    for _round in range(3):
        for _ in range(12):
            name = str(rng.choice(_Z_TAIL))
            _, num_params, num_wires = rt.gates[name]
            k = int(rng.integers(1, 4)) if num_wires < 0 else num_wires
            order = [int(w) for w in rng.permutation(n)]
            # a control of value 0 (CNOT), or controls on diagonal gates: not always Z-word maps
            nc = int(rng.integers(0, 2)) if rng.random() < 0.3 else 0
            cvals = [int(v) for v in rng.integers(0, 2, size=nc)]
            rt.gate(
                name, rng.normal(size=num_params), order[:k], ctrls=order[k : k + nc], cvals=cvals
            )
        words = [
            [int(w) for w in rng.permutation(n)[: int(rng.integers(1, n + 1))]] for _ in range(3)
        ]
        handles = [rt.tensor([rt.named("PauliZ", w) for w in ws]) for ws in words]
        out.append(rt.expval(handles[0]))
        out.append(rt.expval(rt.hamiltonian([0.5, -1.25, 2.0], handles)))
        out.append(rt.expval(rt.named("PauliX", 0)))  # not a Z word: applies everything
        out.append(rt.var(handles[1]))
        rt.gate("Rot", rng.normal(size=3), [int(rng.integers(n))])
    out.extend(rt.probs([0, n - 1]))
    return np.array(out), rt.state()


@pytest.mark.parametrize("n", [3, 6, 9])
def test_z_word_expvals_after_pending_permutations(rt, monkeypatch, n):
    _set(monkeypatch, False)
    ref_vals, ref_state = _z_tail_run(rt, n, n)
    for qubits in (2, 3, 4):
        _set(monkeypatch, True, qubits)
        vals, state = _z_tail_run(rt, n, n)
        np.testing.assert_allclose(vals, ref_vals, atol=1e-12, rtol=0, err_msg=f"k={qubits}")
        np.testing.assert_allclose(state, ref_state, atol=1e-12, rtol=0, err_msg=f"k={qubits}")


# Blocks of 3-4 wires that are permutations (CNOT, SWAP, X, Toffoli -- with phases: S, T, CZ)
# take the stream kernel's groups of one amplitude (moves only when every entry is 1) or,
# on the last wires, the lane kernel; fused against unfused at every position.
_PERM_GATES = [
    ("CNOT", 2),
    ("SWAP", 2),
    ("PauliX", 1),
    ("Toffoli", 3),
    ("S", 1),
    ("T", 1),
    ("CZ", 2),
]


@pytest.mark.parametrize("phases", [False, True])
def test_permutation_blocks(rt, monkeypatch, phases):
    n = 9
    rng = np.random.default_rng(int(phases))
    gates = _PERM_GATES if phases else _PERM_GATES[:4]
    prog = []
    for _ in range(60):
        name, k = gates[int(rng.integers(len(gates)))]
        first = int(rng.integers(n))
        # mostly neighbouring wires, so that 3-4 wire blocks form at every position
        wires = [(first + int(d)) % n for d in rng.permutation(4)[:k]]
        prog.append((name, wires))

    def run():
        rt.acquire(n)
        for w in range(n):
            rt.gate("Rot", [0.3 * w, 1.1, -0.7 + w], [w])
        rt.pauli_rot(0.4, "XY", [0, n - 1])  # not a product state: no product prefix
        for i, (name, wires) in enumerate(prog):
            rt.gate(name, [], wires)
            if i % 15 == 14:
                rt.pauli_rot(0.2, "Z", [i % n])  # applies the blocks on its wire
        return rt.state()

    _set(monkeypatch, False)
    ref = run()
    for qubits in (3, 4):
        _set(monkeypatch, True, qubits)
        np.testing.assert_allclose(run(), ref, atol=1e-12, rtol=0, err_msg=f"k={qubits}")


@pytest.mark.parametrize("isa", ["base", "avx2"])
def test_permutation_blocks_at_lower_instruction_set_levels(isa):
    assert_passes_at_isa(__file__, "test_permutation_blocks and not lower", isa)


# Tiles (GateFuser::drain): blocks on the low wires wait and are applied tile by tile in one
# pass. Small tiles and no size floor, so that a small register has tiles and many blocks
# fall inside one; against fusion without tiles and against no fusion.
def _set_tiles(monkeypatch, tile: int) -> None:
    monkeypatch.setenv("COFACTOR_FUSION_TILE_QUBITS", str(tile))
    monkeypatch.setenv("COFACTOR_FUSION_TILE_MIN_QUBITS", "0")


@pytest.mark.parametrize("measure,shots", [(False, 0), (True, 0), (True, 50)])
def test_tiled_blocks_match_untiled(rt, monkeypatch, measure, shots):
    n = 12
    rng = np.random.default_rng(4242 + 10 * int(measure) + shots)
    prog = _program(rng, n, 200, measure)
    _set(monkeypatch, False)
    ref = _run(rt, prog, n, shots, seed=77, gate_rng_seed=5)
    for qubits in (2, 3, 4):
        _set(monkeypatch, True, qubits)
        _set_tiles(monkeypatch, 0)
        untiled = _run(rt, prog, n, shots, seed=77, gate_rng_seed=5)
        for tile in (6, 8):
            _set_tiles(monkeypatch, tile)
            got = _run(rt, prog, n, shots, seed=77, gate_rng_seed=5)
            for ours, other in ((got, ref), (got, untiled)):
                np.testing.assert_allclose(
                    ours[0], other[0], atol=1e-12, rtol=0, err_msg=f"k={qubits} tile={tile}"
                )
                assert ours[1] == other[1], f"mid-circuit outcomes, k={qubits} tile={tile}"
                np.testing.assert_allclose(ours[2], other[2], atol=1e-12, rtol=0)
                np.testing.assert_allclose(ours[3], other[3], atol=1e-12, rtol=0)
                if shots:
                    np.testing.assert_array_equal(ours[4], other[4])


TILE_TRACE = RUNTIME_SCRIPT_PRELUDE + (
    "for layer in range(3):\n"
    "    for w in range(12):\n"
    "        rt.gate('Rot', [0.1 * w, 0.2, 0.3 + layer], [w])\n"
    "    for w in range(12):\n"
    "        rt.gate('CNOT', [], [w, (w + 1) % 12])\n"
    "print(float(np.vdot(rt.state(), rt.state()).real))\n"
)


def test_tile_passes_happen():
    """The comparison above proves nothing if no block waited for a tile pass: the trace of
    a layered circuit must show tile passes of several blocks."""
    proc = run_traced(
        TILE_TRACE,
        COFACTOR_FUSION_MIN_QUBITS="0",
        COFACTOR_FUSION_TILE_QUBITS="8",
        COFACTOR_FUSION_TILE_MIN_QUBITS="0",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert abs(float(proc.stdout.split()[-1]) - 1) < 1e-12
    sizes = [int(x) for x in re.findall(r"tile pass of (\d+) blocks", proc.stderr)]
    assert sizes and max(sizes) >= 2, proc.stderr[-3000:]
