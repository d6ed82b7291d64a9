"""Gate fusion's split rule (runtime/src/GateFusion.hpp, GateFuser::splitPays): a gate that
would join several pending blocks into a denser one applies one of them first when that is
cheaper. The rule changes only which gates form which blocks, so every result must stay
that of unfused execution (to 1e-12; same mid-circuit outcomes and samples for a seed).
COFACTOR_FUSION_PASS_COST sets the rule's cost of a pass (< 0: never split)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from runtime_child import RUNTIME_SCRIPT_PRELUDE, run_traced
from test_fusion import _program, _run

PASS_COSTS = ["-1", "0", "1", "3"]


def _set(monkeypatch, fusion: bool, qubits: int, pass_cost: str) -> None:
    monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", str(qubits))
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    monkeypatch.setenv("COFACTOR_FUSION_PASS_COST", pass_cost)


@pytest.mark.parametrize("pass_cost", PASS_COSTS)
@pytest.mark.parametrize("measure,shots", [(False, 0), (True, 40)])
def test_random_programs_match_unfused(rt, monkeypatch, pass_cost, measure, shots):
    """Random gates (controls, adjoints, unitaries, Pauli rotations, measurements) on 6
    wires, fused at widths 2-4 under each pass cost, against the unfused run."""
    n = 6
    rng = np.random.default_rng(500 + 10 * int(measure) + shots)
    prog = _program(rng, n, 150, measure)
    _set(monkeypatch, False, 3, pass_cost)
    ref = _run(rt, prog, n, shots, seed=91, gate_rng_seed=8)
    for qubits in (2, 3, 4):
        _set(monkeypatch, True, qubits, pass_cost)
        got = _run(rt, prog, n, shots, seed=91, gate_rng_seed=8)
        np.testing.assert_allclose(got[0], ref[0], atol=1e-12, rtol=0, err_msg=f"k={qubits}")
        assert got[1] == ref[1], f"mid-circuit outcomes, k={qubits}"
        np.testing.assert_allclose(got[2], ref[2], atol=1e-12, rtol=0)
        np.testing.assert_allclose(got[3], ref[3], atol=1e-12, rtol=0)
        if shots:
            np.testing.assert_array_equal(got[4], ref[4])


def _chain_rounds(rt, n: int, rounds: int, angles) -> None:
    """The long circuit's shape (benchmarks/programs.py): H and T on every wire, a CNOT chain
    and RZ on every wire, per round."""
    for r in range(rounds):
        for w in range(n):
            rt.gate("Hadamard", [], [w])
        for w in range(n):
            rt.gate("T", [], [w])
        for w in range(n - 1):
            rt.gate("CNOT", [], [w, w + 1])
        for w in range(n):
            rt.gate("RZ", [angles[w] * (r + 1)], [w])


@pytest.mark.parametrize("pass_cost", PASS_COSTS)
def test_chain_circuit_matches_pennylane(rt, monkeypatch, pass_cost):
    """The circuit the rule is for, against default.qubit."""
    import pennylane as qml

    n, rounds = 7, 4
    angles = np.linspace(0.1, 1.6, n)
    _set(monkeypatch, True, 3, pass_cost)
    rt.acquire(n)
    _chain_rounds(rt, n, rounds, angles)
    got = rt.state()

    @qml.qnode(qml.device("default.qubit", wires=n))
    def circuit():
        for r in range(rounds):
            for w in range(n):
                qml.Hadamard(w)
            for w in range(n):
                qml.T(w)
            for w in range(n - 1):
                qml.CNOT([w, w + 1])
            for w in range(n):
                qml.RZ(angles[w] * (r + 1), w)
        return qml.state()

    np.testing.assert_allclose(got, circuit(), atol=1e-12)


CHAIN_TRACE = RUNTIME_SCRIPT_PRELUDE + (
    "for r in range(3):\n"
    "    for w in range(12):\n"
    "        rt.gate('Hadamard', [], [w])\n"
    "        rt.gate('T', [], [w])\n"
    "    for w in range(11):\n"
    "        rt.gate('CNOT', [], [w, w + 1])\n"
    "    for w in range(12):\n"
    "        rt.gate('RZ', [0.1 * w + r], [w])\n"
    "print(float(np.vdot(rt.state(), rt.state()).real))\n"
)


def _dense_three_wire_blocks(pass_cost: str) -> int:
    proc = run_traced(
        CHAIN_TRACE,
        COFACTOR_FUSION_MIN_QUBITS="0",
        COFACTOR_FUSION_QUBITS="3",
        COFACTOR_FUSION_PASS_COST=pass_cost,
        COFACTOR_FUSION_HADAMARD="0",  # the rule on dense blocks (these are Hadamard blocks)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert abs(float(proc.stdout.split()[-1]) - 1) < 1e-12
    return len(re.findall(r"block bits \d+ \d+ \d+ nz 64", proc.stderr))


def test_split_avoids_dense_blocks():
    """The comparisons above prove nothing if the rule never splits: without it each round
    after the first merges the chain's first link into a dense 8 x 8 block (64 nonzeros);
    with it, none is built."""
    assert _dense_three_wire_blocks("-1") >= 2
    assert _dense_three_wire_blocks("1") == 0
