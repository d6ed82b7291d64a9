"""Hadamard-phase blocks (runtime/src/HadamardBlocks.cpp): a fused block of H-like one-wire
gates, diagonal gates and permutations is applied as Dout P H_S Din by the butterfly kernel
(FusedKernels.inc, hadamardBlocks). Fused runs must agree with unfused ones to 1e-12 on
circuits made of such blocks (with adjoints, controls, measurements, shots, and gates that
rule a block out), the traces must show the kernel at work, and COFACTOR_FUSION_HADAMARD=0
must switch it off.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from isa_child import assert_passes_at_isa
from runtime_child import RUNTIME_SCRIPT_PRELUDE, run_traced
from scipy.stats import unitary_group
from test_fusion_split import _chain_rounds

# one-wire gates that make a wire a Hadamard wire (or keep it one), diagonals, permutations
_H_LIKE = ["Hadamard"]
_DIAGONAL = ["T", "S", "PauliZ", "RZ", "PhaseShift"]
_PERMUTING = ["CNOT", "SWAP", "CZ", "Toffoli", "PauliX", "CSWAP", "IsingZZ", "ControlledPhaseShift"]
# gates that are neither: a block holding one of these must take the dense kernels
_SPOILERS = ["RX", "RY", "Rot", "CH"]


def _program(rng, n: int, length: int, measure: bool, spoil: float):
    prog = []
    for _ in range(length):
        r = rng.random()
        if measure and r < 0.03:
            prog.append(("measure", int(rng.integers(n)), bool(rng.integers(2))))
            continue
        if r < spoil:
            if rng.random() < 0.3:
                prog.append(
                    ("unitary", unitary_group.rvs(2, random_state=rng), [int(rng.integers(n))])
                )
            else:
                prog.append(("gate", _SPOILERS[int(rng.integers(len(_SPOILERS)))]))
            continue
        pool = [_H_LIKE, _DIAGONAL, _PERMUTING][int(rng.choice(3, p=[0.4, 0.3, 0.3]))]
        prog.append(("gate", pool[int(rng.integers(len(pool)))]))
    return prog


def _run(rt, prog, n: int, shots: int, seed: int):
    rt.acquire(n, shots=shots, seed=seed)
    rng = np.random.default_rng(11)  # the gates' wires, parameters, adjoints, controls
    outcomes = []
    for item in prog:
        if item[0] == "measure":
            outcomes.append(rt.measure(item[1], reset=item[2]))
            continue
        if item[0] == "unitary":
            rt.unitary(item[1], item[2], adjoint=bool(rng.integers(2)))
            continue
        name = item[1]
        _, num_params, num_wires = rt.gates[name]
        if num_wires > n:
            continue
        order = [int(w) for w in rng.permutation(n)]
        wires, rest = order[:num_wires], order[num_wires:]
        nc = 1 if rest and rng.random() < 0.15 else 0
        rt.gate(
            name,
            rng.normal(size=num_params),
            wires,
            adjoint=bool(rng.integers(2)),
            ctrls=rest[:nc],
            cvals=[int(v) for v in rng.integers(0, 2, size=nc)],
        )
    expz = [rt.expval(rt.named("PauliZ", w)) for w in range(n)]
    state = rt.state()
    samples = rt.sample() if shots else None
    return state, outcomes, expz, samples


def _set(monkeypatch, fusion: bool, qubits: int = 3, hadamard: bool = True) -> None:
    monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", str(qubits))
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    monkeypatch.setenv("COFACTOR_FUSION_HADAMARD", "1" if hadamard else "0")


@pytest.mark.parametrize("n", [5, 8])
@pytest.mark.parametrize(
    "measure,shots,spoil", [(False, 0, 0.0), (False, 0, 0.05), (True, 40, 0.03)]
)
def test_hadamard_blocks_match_unfused(rt, monkeypatch, n, measure, shots, spoil):
    rng = np.random.default_rng(100 * n + 10 * int(measure) + int(100 * spoil))
    prog = _program(rng, n, 160, measure, spoil)
    _set(monkeypatch, False)
    ref = _run(rt, prog, n, shots, seed=5)
    for qubits in (2, 3, 4):
        for hadamard in (True, False):
            _set(monkeypatch, True, qubits, hadamard)
            got = _run(rt, prog, n, shots, seed=5)
            what = f"k={qubits} hadamard={hadamard}"
            np.testing.assert_allclose(got[0], ref[0], atol=1e-12, rtol=0, err_msg=what)
            assert got[1] == ref[1], what
            np.testing.assert_allclose(got[2], ref[2], atol=1e-12, rtol=0, err_msg=what)
            if shots:
                np.testing.assert_array_equal(got[3], ref[3])


def test_long_circuit_matches_pennylane(rt, monkeypatch):
    import pennylane as qml

    n, rounds = 8, 4
    x = np.linspace(0.1, 1.6, n)
    dev = qml.device("default.qubit", wires=n)

    @qml.qnode(dev)
    def circuit():
        qml.PauliRot(0.3, "XY", wires=[0, n - 1])  # not a product state: no product prefix
        for r in range(rounds):
            for w in range(n):
                qml.Hadamard(wires=w)
            for w in range(n):
                qml.T(wires=w)
            for w in range(n - 1):
                qml.CNOT(wires=[w, w + 1])
            for w in range(n):
                qml.RZ(x[w] * (r + 1), wires=w)
        return qml.state()

    want = np.asarray(circuit())
    for qubits in (3, 4):
        _set(monkeypatch, True, qubits)
        rt.acquire(n)
        rt.pauli_rot(0.3, "XY", [0, n - 1])
        _chain_rounds(rt, n, rounds, x)
        np.testing.assert_allclose(rt.state(), want, atol=1e-12, rtol=0, err_msg=f"k={qubits}")


@pytest.mark.parametrize("isa", ["base", "avx2"])
def test_hadamard_blocks_at_lower_instruction_set_levels(isa):
    assert_passes_at_isa(__file__, "test_hadamard_blocks_match_unfused or test_long_circuit", isa)


LONG_TRACE = RUNTIME_SCRIPT_PRELUDE + (
    "rt.pauli_rot(0.3, 'XY', [0, 9])\n"
    "for r in range(3):\n"
    "    for w in range(10):\n"
    "        rt.gate('Hadamard', [], [w])\n"
    "    for w in range(10):\n"
    "        rt.gate('T', [], [w])\n"
    "    for w in range(9):\n"
    "        rt.gate('CNOT', [], [w, w + 1])\n"
    "    for w in range(10):\n"
    "        rt.gate('RZ', [0.1 * w + r], [w])\n"
    "    for w in range(4):\n"  # Hadamards and CNOTs alone: blocks with no Din
    "        rt.gate('Hadamard', [], [w])\n"
    "    rt.gate('CNOT', [], [0, 1])\n"
    "    rt.gate('CNOT', [], [2, 3])\n"
    "print(float(np.vdot(rt.state(), rt.state()).real))\n"
)


@pytest.mark.parametrize("qubits", [2, 3, 4])
def test_hadamard_blocks_happen(qubits):
    """The comparisons above prove nothing if no block took the kernel: the trace of the long
    circuit must show Hadamard blocks with and without Din, 4 wires wide at every width
    (GateFuser::addNow widens such unions to kHadamardQubits); with
    COFACTOR_FUSION_HADAMARD=0 none."""
    env = {"COFACTOR_FUSION_MIN_QUBITS": "0", "COFACTOR_FUSION_QUBITS": str(qubits)}
    proc = run_traced(LONG_TRACE, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert abs(float(proc.stdout.split()[-1]) - 1) < 1e-12
    blocks = re.findall(r"hadamard block (\d) wires, mask (\d+)( din)?", proc.stderr)
    assert any(d for _, _, d in blocks) and any(not d for _, _, d in blocks), proc.stderr[-3000:]
    assert max(int(k) for k, _, _ in blocks) == 4
    off = run_traced(LONG_TRACE, COFACTOR_FUSION_HADAMARD="0", **env)
    assert off.returncode == 0 and "hadamard block" not in off.stderr
