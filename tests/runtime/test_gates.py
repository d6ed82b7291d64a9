"""Every gate of gates.def (plain, adjoint, controlled with control values 0 and 1), PauliRot,
QubitUnitary and random circuits against PennyLane."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pennylane as qml
import pytest
from isa_child import assert_passes_at_isa

GATES_DEF = Path(__file__).resolve().parents[2] / "runtime" / "include" / "cofactor" / "gates.def"
GATES = [
    line.split("(")[1].split(",")[0]
    for line in GATES_DEF.read_text().splitlines()
    if line.startswith("COFACTOR_GATE(")
]
TOL = 1e-10


def _variants(num_targets: int):
    """(adjoint, controls, control values) cases; controls on wires after the targets."""
    yield False, (), None
    yield True, (), None
    yield False, (num_targets,), [1]
    yield True, (num_targets, num_targets + 1), [0, 1]
    yield False, (num_targets + 1, num_targets), [0, 0]


def test_gate_table_matches_library(runtime):
    assert list(runtime.gates) == GATES
    assert len(GATES) == 43


@pytest.mark.parametrize("name", GATES)
def test_gate_matrix(rt, reference, rng, name):
    _, num_params, num_wires = rt.gates[name]
    num_targets = 3 if num_wires == -1 else num_wires
    params = rng.uniform(-np.pi, np.pi, num_params)
    for adjoint, ctrls, cvals in _variants(num_targets):
        n = max(num_targets + len(ctrls), 1)
        # a shuffled wire assignment, so that wire order and non-adjacent wires are exercised
        perm = rng.permutation(n)
        targets = [int(perm[i]) for i in range(num_targets)]
        controls = [int(perm[c]) for c in ctrls]
        rt.acquire(n)
        ours = reference.matrix(rt, n, rt.gate, name, params, targets, adjoint, controls, cvals)
        op = reference.op(name, params, targets, adjoint, controls, cvals)
        expected = qml.matrix(op, wire_order=range(n))
        np.testing.assert_allclose(
            ours, expected, atol=TOL, err_msg=f"{name} adjoint={adjoint} ctrls={controls} {cvals}"
        )


@pytest.mark.parametrize("word", ["X", "Y", "Z", "XY", "ZIZ", "YXZ", "II"])
def test_pauli_rot(rt, reference, rng, word):
    theta = rng.uniform(-np.pi, np.pi)
    k = len(word)
    for adjoint, ctrls, cvals in _variants(k):
        n = k + len(ctrls)
        perm = [int(x) for x in rng.permutation(n)]
        targets, controls = perm[:k], [perm[c] for c in ctrls]
        rt.acquire(n)
        ours = reference.matrix(rt, n, rt.pauli_rot, theta, word, targets, adjoint, controls, cvals)
        op = qml.PauliRot(theta, word, wires=targets)
        if adjoint:
            op = qml.adjoint(op)
        if controls:
            op = qml.ctrl(op, control=controls, control_values=cvals)
        np.testing.assert_allclose(ours, qml.matrix(op, wire_order=range(n)), atol=TOL)


def random_unitary(rng, dim):
    z = rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim))
    q, r = np.linalg.qr(z)
    return q * (np.diag(r) / np.abs(np.diag(r)))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_qubit_unitary(rt, reference, rng, k):
    u = random_unitary(rng, 2**k)
    for adjoint, ctrls, cvals in _variants(k):
        n = k + len(ctrls)
        perm = [int(x) for x in rng.permutation(n)]
        targets, controls = perm[:k], [perm[c] for c in ctrls]
        rt.acquire(n)
        ours = reference.matrix(rt, n, rt.unitary, u, targets, adjoint, controls, cvals)
        op = qml.QubitUnitary(u, wires=targets)
        if adjoint:
            op = qml.adjoint(op)
        if controls:
            op = qml.ctrl(op, control=controls, control_values=cvals)
        np.testing.assert_allclose(ours, qml.matrix(op, wire_order=range(n)), atol=TOL)


def _random_circuit(rng, gate_info, n, depth):
    """Random gates (name, params, targets, adjoint, controls, control values), with
    adjoints and controls; gate_info: name -> (id, num params, num wires)."""
    names = [g for g in GATES if g != "Identity"]
    ops = []
    while len(ops) < depth:
        name = names[rng.integers(len(names))]
        _, num_params, num_wires = gate_info[name]
        k = int(rng.integers(1, 4)) if num_wires == -1 else num_wires
        num_ctrls = int(rng.integers(0, 3))
        if k + num_ctrls > n:
            continue
        wires = [int(w) for w in rng.choice(n, k + num_ctrls, replace=False)]
        targets, ctrls = wires[:k], wires[k:]
        cvals = [int(v) for v in rng.integers(0, 2, num_ctrls)]
        params = rng.uniform(-np.pi, np.pi, num_params)
        adjoint = bool(rng.integers(2))
        ops.append((name, params, targets, adjoint, ctrls, cvals))
    return ops


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_random_circuits_match_default_qubit(rt, reference, rng, n):
    for _ in range(3):
        ops = _random_circuit(rng, rt.gates, n, depth=30)
        rt.acquire(n)
        for name, params, targets, adjoint, ctrls, cvals in ops:
            rt.gate(name, params, targets, adjoint, ctrls, cvals)
        ours = rt.state()

        dev = qml.device("default.qubit", wires=n)

        @qml.qnode(dev)
        def circuit(ops=ops):
            for name, params, targets, adjoint, ctrls, cvals in ops:
                reference.op(name, params, targets, adjoint, ctrls, cvals)
            return qml.state()

        np.testing.assert_allclose(ours, circuit(), atol=TOL)


def test_device_reuse_resets_state(rt):
    rt.acquire(3)
    rt.gate("PauliX", wires=[1])
    rt.acquire(3)  # same size: reused, back to |000>
    expected = np.zeros(8)
    expected[0] = 1
    np.testing.assert_allclose(rt.state(), expected)
    assert rt.n() == 3
    rt.acquire(4)
    assert rt.n() == 4 and rt.state()[0] == 1


def _lightning_state(n, ops, tail=lambda: None):
    """lightning.qubit's state after ops [(name, params, wires, controls, control values)],
    then whatever tail() queues."""

    @qml.qnode(qml.device("lightning.qubit", wires=n))
    def circuit():
        for name, params, wires, ctrls, cvals in ops:
            op = getattr(qml, name)
            if ctrls:
                qml.ctrl(op, control=ctrls, control_values=cvals)(*params, wires=wires)
            else:
                op(*params, wires=wires)
        tail()
        return qml.state()

    return circuit()


def test_large_state_uses_parallel_kernels(rt, rng):
    """n = 16 is at the OpenMP threshold: every kernel shape runs its multi-threaded loop
    (targets at the top, middle and bottom of the register, with controls) against
    lightning.qubit."""
    n = 16
    u3 = random_unitary(rng, 8)
    ops = [("Hadamard", [], [w], [], None) for w in range(n)] + [
        ("CNOT", [], [0, 15], [], None),
        ("RX", [0.3], [7], [], None),
        ("RY", [0.5], [15], [3], [0]),
        ("RZ", [1.1], [0], [], None),
        ("PauliX", [], [15], [], None),
        ("CZ", [], [4, 15], [], None),
        ("SWAP", [], [2, 13], [8], [1]),
        ("IsingXY", [0.7], [3, 12], [], None),
        ("IsingXX", [0.2], [14, 15], [], None),
        ("U3", [0.1, 0.2, 0.3], [9], [0, 1], [1, 0]),
        ("MultiRZ", [0.4], [0, 5, 9], [], None),
        ("IsingZZ", [0.6], [1, 15], [], None),
        ("DoubleExcitation", [0.2], [1, 4, 8, 14], [], None),
        ("ECR", [], [6, 2], [], None),
        ("Toffoli", [], [2, 6, 10], [], None),
        ("PhaseShift", [0.9], [11], [], None),
        ("GlobalPhase", [0.3], [], [5], [0]),
    ]
    rt.acquire(n)
    for name, params, wires, ctrls, cvals in ops:
        rt.gate(name, params, wires, ctrls=ctrls, cvals=cvals)
    rt.unitary(u3, [15, 0, 7])
    rt.pauli_rot(0.8, "XYZ", [3, 15, 8], ctrls=[0])

    def tail():
        qml.QubitUnitary(u3, wires=[15, 0, 7])
        qml.ctrl(qml.PauliRot, control=[0])(0.8, "XYZ", wires=[3, 15, 8])

    np.testing.assert_allclose(rt.state(), _lightning_state(n, ops, tail), atol=1e-10)


ISA_SCRIPT = r"""
import ctypes, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
i64, f64 = ctypes.c_int64, ctypes.c_double
lib.cf_rt_obs_named.restype = lib.cf_rt_error_code.restype = i64
lib.cf_rt_error_message.restype = ctypes.c_char_p
def arr(values, ctype):
    return (ctype * max(1, len(values)))(*values)
n = 16
lib.cf_rt_device_acquire(i64(n), i64(0), i64(0))
lib.cf_rt_tape_start()
for name, params, wires in [
    (1, [], [w]) for w in range(n)] + [(16, [], [0, 15]), (8, [0.3], [14]), (34, [0.7], [3, 12]),
    (31, [0.2], [14, 15]), (33, [0.6], [15, 1]), (39, [0.2], [1, 4, 8, 14]), (11, [0.9], [15]),
    (35, [0.4], [0, 5, 9]), (15, [0.1, 0.2, 0.3], [7])]:
    lib.cf_rt_gate(i64(name), arr(params, f64), i64(len(params)), arr(wires, i64), i64(len(wires)),
                   ctypes.c_int8(0), None, None, i64(0))
lib.cf_rt_tape_stop()
state = np.zeros(2 ** n, dtype=np.complex128)
lib.cf_rt_state(state.ctypes.data_as(ctypes.POINTER(f64)))
obs = (i64 * 2)(lib.cf_rt_obs_named(i64(3), i64(15)), lib.cf_rt_obs_named(i64(1), i64(2)))
lib.cf_rt_tape_num_params.restype = i64
jac = np.zeros((2, lib.cf_rt_tape_num_params()))
lib.cf_rt_adjoint_jacobian(obs, i64(2), jac.ctypes.data_as(ctypes.POINTER(f64)))
assert lib.cf_rt_error_code() == 0, lib.cf_rt_error_message()
sys.stdout.buffer.write(state.tobytes() + jac.tobytes())
"""


def test_every_instruction_set_level_agrees(lib):
    """The kernels are compiled for several instruction sets and picked at run time
    (COFACTOR_ISA forces one, per process): all must give the same results."""
    import os
    import subprocess
    import sys

    outputs = {}
    for isa in ("base", "avx2", "auto"):
        env = dict(os.environ, COFACTOR_ISA=isa)
        run = subprocess.run(
            [sys.executable, "-c", ISA_SCRIPT, lib._name],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr.decode()
        outputs[isa] = np.frombuffer(run.stdout, dtype=np.float64)
    assert outputs["base"].size == 2 * 2**16 + 2 * 10  # the state, then a 2 x 10 Jacobian
    np.testing.assert_allclose(outputs["avx2"], outputs["base"], atol=1e-12)
    np.testing.assert_allclose(outputs["auto"], outputs["base"], atol=1e-12)


# Gates whose targets or controls sit on the last three wires go through the chunked kernels
# (4-amplitude vectors with lane permutations); every placement of targets and controls
# inside and outside a chunk, on a register above the OpenMP threshold.
LOW_WIRE_GATES = [
    ("Hadamard", []),
    ("PauliX", []),
    ("RX", [0.3]),
    ("RZ", [0.4]),
    ("PhaseShift", [0.5]),
    ("Rot", [0.1, 0.2, 0.3]),
    ("CNOT", []),
    ("CZ", []),
    ("SWAP", []),
    ("IsingXX", [0.6]),
    ("IsingZZ", [0.7]),
    ("IsingXY", [0.8]),
    ("CRY", [0.9]),
    ("ISWAP", []),
]

LOW_WIRE_SCRIPT = r"""
import ctypes, json, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
n, ops = json.loads(sys.argv[2])
i64, f64 = ctypes.c_int64, ctypes.c_double
lib.cf_rt_error_code.restype = i64
lib.cf_rt_error_message.restype = ctypes.c_char_p
def arr(values, ctype):
    return (ctype * max(1, len(values)))(*values)
lib.cf_rt_device_acquire(i64(n), i64(0), i64(0))
for gate_id, params, wires, ctrls, cvals in ops:
    lib.cf_rt_gate(i64(gate_id), arr(params, f64), i64(len(params)), arr(wires, i64),
                   i64(len(wires)), ctypes.c_int8(0), arr(ctrls, i64),
                   arr(cvals, ctypes.c_int8), i64(len(ctrls)))
assert lib.cf_rt_error_code() == 0, lib.cf_rt_error_message()
state = np.zeros(2 ** n, dtype=np.complex128)
lib.cf_rt_state(state.ctypes.data_as(ctypes.POINTER(f64)))
sys.stdout.buffer.write(state.tobytes())
"""


def _low_wire_circuit(rng, gate_ids, n):
    """A random product state, then every gate of LOW_WIRE_GATES on wire placements among
    the last three wires and one above them, with controls inside and outside the chunk."""
    ops = [("RY", [float(a)], [w], [], []) for w, a in enumerate(rng.uniform(0, 3, n))]
    ops += [("RZ", [float(a)], [w], [], []) for w, a in enumerate(rng.uniform(0, 3, n))]
    low = [n - 4, n - 3, n - 2, n - 1]
    for name, params in LOW_WIRE_GATES:
        k = gate_ids[name][2]
        placements = [[w] for w in low] if k == 1 else [[a, b] for a in low for b in low if a != b]
        for wires in placements:
            free = [w for w in low + [0, n // 2] if w not in wires]
            pair = [int(w) for w in rng.choice(free, 2, replace=False)]
            for ctrls in ([], [int(rng.choice(free))], pair):
                cvals = [int(v) for v in rng.integers(0, 2, len(ctrls))]
                ops.append((name, params, wires, ctrls, cvals))
    return ops


def test_gates_on_the_last_wires_at_every_instruction_set_level(lib, rng):
    import json
    import os
    import subprocess
    import sys

    from cofactor.runtime_lib import gate_ids

    n = 17
    ids = gate_ids(lib)
    ops = _low_wire_circuit(rng, ids, n)

    expected = _lightning_state(n, ops)
    encoded = json.dumps([n, [(ids[name][0], p, w, c, v) for name, p, w, c, v in ops]])
    for isa in ("base", "avx2", "auto"):
        run = subprocess.run(
            [sys.executable, "-c", LOW_WIRE_SCRIPT, lib._name, encoded],
            env=dict(os.environ, COFACTOR_ISA=isa),
            capture_output=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr.decode()
        state = np.frombuffer(run.stdout, dtype=np.complex128)
        np.testing.assert_allclose(state, expected, atol=1e-10, err_msg=f"COFACTOR_ISA={isa}")


# Two-target matrices that do not mix the target outside a chunk (block diagonal on it: a
# controlled-U, as fused CNOT + Rot blocks are) take chunked kernels of their own (JX = 1 in
# ChunkedKernels.inc); every placement: the outside target on bit 2, a middle or the top
# wire, first or second, the inside one on lane bit 0 or 1; complex, real and
# rotation-like (real diagonal, imaginary off-diagonal) blocks.
def _controlled_blocks(rng):
    from scipy.stats import ortho_group, unitary_group

    theta = rng.uniform(0, 3, 2)
    rotation = [
        np.array([[np.cos(t), -1j * np.sin(t)], [-1j * np.sin(t), np.cos(t)]]) for t in theta
    ]
    pauli_y = np.array([[0, -1j], [1j, 0]])
    for kind, (u0, u1) in {
        "complex": [unitary_group.rvs(2, random_state=rng) for _ in range(2)],
        "real": [ortho_group.rvs(2, random_state=rng) for _ in range(2)],
        "rotation": rotation,
        "swap-lanes": [pauli_y, np.array([[0, 1], [1, 0]])],
    }.items():
        yield kind, np.block([[u0, np.zeros((2, 2))], [np.zeros((2, 2)), u1]])


def _apply_reference(state, n, matrix, wires):
    psi = state.reshape((2,) * n)
    psi = np.tensordot(matrix.reshape(2, 2, 2, 2), psi, axes=[[2, 3], wires])
    return np.moveaxis(psi, [0, 1], wires).reshape(-1)


def test_controlled_blocks_with_one_target_in_a_chunk(rt, rng, monkeypatch):
    monkeypatch.setenv("COFACTOR_FUSION", "0")
    n = 17
    psi = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
    psi /= np.linalg.norm(psi)
    rt.acquire(n)
    for kind, block in _controlled_blocks(rng):
        for outside in (n - 3, n // 2, 0):
            for inside in (n - 1, n - 2):
                for wires in ([outside, inside], [inside, outside]):
                    # the first target is the matrix's high bit: with the inside one first,
                    # the same block is block diagonal on the second target
                    m = block if wires[0] == outside else _swap_targets(block)
                    rt.set_state(psi)
                    rt.unitary(m, wires)
                    np.testing.assert_allclose(
                        rt.state(),
                        _apply_reference(psi, n, m, wires),
                        atol=1e-12,
                        err_msg=f"{kind} on {wires}",
                    )


def _swap_targets(m):
    perm = [0, 2, 1, 3]
    return m[np.ix_(perm, perm)]


@pytest.mark.parametrize("isa", ["base", "avx2"])
def test_controlled_blocks_at_lower_instruction_set_levels(isa):
    """The same at the other instruction-set levels (COFACTOR_ISA is read once per
    process: a child pytest)."""
    assert_passes_at_isa(__file__, "test_controlled_blocks_with_one_target_in_a_chunk", isa)


def _apply_reference_k(state, n, matrix, wires):
    """`matrix` (2^k x 2^k, first wire = most significant bit) applied on `wires`."""
    k = len(wires)
    psi = np.tensordot(
        matrix.reshape((2,) * (2 * k)), state.reshape((2,) * n), axes=[list(range(k, 2 * k)), wires]
    )
    return np.moveaxis(psi, list(range(k)), wires).reshape(-1)


@pytest.mark.parametrize("threads", [1, 3])
def test_streaming_kernels_with_gaps(rt, reference, rng, monkeypatch, threads):
    """The streaming kernels of one and two streams (permutations, phases, 1-wire diagonals,
    chunked 2x2 blocks) prefetch the next tile of the blocks they change, jumping the
    blocks they skip (forEachRunAhead): targets and controls on middle and high wires, so
    runs are long and the controlled subspace leaves gaps, with 1 and 3 threads (chunks of
    the loop split tiles), against numpy."""
    monkeypatch.setenv("COFACTOR_FUSION", "0")
    n = 17
    psi = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
    psi /= np.linalg.norm(psi)
    cases = [
        ("PauliX", [], [8], [], None),
        ("CNOT", [], [8, 9], [], None),
        ("CNOT", [], [0, 1], [], None),
        ("SWAP", [], [8, 9], [3], [0]),
        ("CZ", [], [8, 9], [], None),
        ("PhaseShift", [0.9], [8], [2], [1]),
        ("RZ", [1.1], [8], [], None),
        ("CRX", [0.3], [8, 9], [], None),
        ("Rot", [0.1, 0.2, 0.3], [8], [0], [0]),
        ("Hadamard", [], [0], [], None),
        ("Toffoli", [], [7, 8, 9], [], None),
        ("PauliY", [], [10], [4, 8], [1, 0]),
        # four streams (the tile ahead with COFACTOR_PREFETCH=l2), and a 2x2 block whose
        # outside target always flips (ECR on a high and a last wire: the JX = 2 instance)
        ("ECR", [], [8, 9], [], None),
        ("IsingXX", [0.6], [7, 9], [3], [1]),
        ("ECR", [], [1, 16], [], None),
        ("ECR", [], [2, 15], [5], [0]),
    ]
    rt.acquire(n)
    rt.lib.cf_rt_set_num_threads(threads)
    try:
        for name, params, wires, ctrls, cvals in cases:
            rt.set_state(psi)
            rt.gate(name, params, wires, ctrls=ctrls, cvals=cvals)
            op = reference.op(name, params, wires, False, ctrls, cvals)
            on = list(ctrls) + list(wires)
            expected = _apply_reference_k(psi, n, qml.matrix(op, wire_order=on), on)
            np.testing.assert_allclose(
                rt.state(), expected, atol=1e-12, err_msg=f"{name} {wires} ctrls={ctrls}"
            )
    finally:
        rt.lib.cf_rt_set_num_threads(0)
