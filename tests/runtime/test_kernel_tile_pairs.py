"""The stream kernels' loops under the L2 software prefetch (StateVectorKernels.inc,
forEachRunAhead): one-stream gates with gaps (CZ, PhaseShift, S, T, controlled phases on
middle wires) walk two tiles at once, and gates that change every line with one or two
streams (PauliX, RZ without controls) issue no prefetch. Each against PennyLane's matrix
applied with numpy, on random states, adjoints and control values included, on registers
and wires where a thread's range holds an even number of tiles, an odd one (the last tile
alone), one tile, and ranges that start inside a tile (three threads)."""

from __future__ import annotations

import ctypes

import numpy as np
import pennylane as qml
import pytest

L2 = 1  # cf_rt_kernel_prefetch's mode for prefetcht2, the mode these loops belong to

#: (n, gate, params, targets, controls, control values). Tiles are min(2^low, 2^10)
#: amplitudes, low being the lowest bit the gate fixes (wire w is bit n - 1 - w).
CASES = [
    (12, "CZ", [], [0, 1], [], []),  # bits 11, 10: one tile in all
    (13, "CZ", [], [1, 2], [], []),  # two tiles: one pair
    (14, "CZ", [], [6, 7], [], []),  # bits 7, 6: tiles of 64, many pairs
    (14, "PhaseShift", [0.7], [7], [], []),  # half pattern, bit 6
    (14, "PhaseShift", [0.7], [3], [], []),  # runs of 2^10: tile = run
    (15, "PhaseShift", [-1.1], [2], [], []),  # runs of 2^12: tiles of 2^10 inside a run
    (14, "S", [], [5], [], []),
    (14, "T", [], [8], [], []),
    (14, "PauliZ", [], [6], [7], [0]),  # controlled Z, control value 0
    (14, "ControlledPhaseShift", [0.4], [5, 7], [], []),
    (14, "PhaseShift", [0.9], [4], [6, 2], [1, 0]),  # three fixed bits: an eighth
    (13, "PauliX", [], [5], [], []),  # gapless, two streams: no prefetch
    (13, "RZ", [0.3], [6], [], []),  # gapless diagonal
    (13, "PauliX", [], [5], [6], [1]),  # CNOT-like: the tile ahead, two streams
]


def _apply(state, n, matrix, wires):
    """`matrix` (first wire = most significant bit) on `wires` of `state`, with numpy."""
    k = len(wires)
    psi = np.tensordot(
        matrix.reshape((2,) * (2 * k)), state.reshape((2,) * n), axes=[list(range(k, 2 * k)), wires]
    )
    return np.moveaxis(psi, list(range(k)), wires).reshape(-1)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_tile_pairs_and_gapless_streams_match_pennylane(
    rt, lib, reference, rng, monkeypatch, threads
):
    monkeypatch.setenv("COFACTOR_FUSION", "0")
    setter = lib.cf_rt_kernel_prefetch
    setter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
    before = setter(-1)
    setter(L2)
    try:
        for n, name, params, targets, ctrls, cvals in CASES:
            psi = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
            psi /= np.linalg.norm(psi)
            rt.acquire(n)
            rt.lib.cf_rt_set_num_threads(threads)
            try:
                for adjoint in (False, True):
                    rt.set_state(psi)
                    values = cvals or None
                    rt.gate(name, params, targets, adjoint=adjoint, ctrls=ctrls, cvals=values)
                    op = reference.op(name, params, targets, adjoint, ctrls, values)
                    wires = list(ctrls) + list(targets)
                    expected = _apply(psi, n, qml.matrix(op, wire_order=wires), wires)
                    np.testing.assert_allclose(
                        rt.state(),
                        expected,
                        atol=1e-13,
                        err_msg=f"n={n} {name} {targets} ctrls={ctrls}{cvals} adjoint={adjoint}",
                    )
            finally:
                rt.lib.cf_rt_set_num_threads(0)
                rt.release()
    finally:
        setter(before)
