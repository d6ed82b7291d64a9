"""Each gate kind of the kernels benchmark (benchmarks/kernels.py) on the last, a middle and the
first wire, against its dense matrix applied with numpy: the three loop shapes of every kernel
(runs inside a cache line, runs long enough for the tile-ahead prefetch, runs too long for
it) at every instruction-set level. Also the 2x2-block kernels whose coefficients are kept in
registers, and the one for matrices like ECR (zero diagonal blocks, real or imaginary
entries: ChunkedKernels.inc, kEvenReal)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from isa_child import assert_passes_at_isa

# n = 16: a middle wire is bit 7 (runs of 128 amplitudes, the tile ahead), the first wire
# bit 15 (runs of 2^15, past the prefetch's long-run limit)
N = 16
LOW, MIDDLE, HIGH = N - 1, N // 2, 0

#: (gate, params, wires): the benchmark's kinds, each at the three positions
CASES = [
    (name, params, wires)
    for name, params, placements in [
        ("Rot", [0.1, 0.2, 0.3], [[LOW], [MIDDLE], [HIGH]]),
        ("Hadamard", [], [[LOW], [MIDDLE], [HIGH]]),
        ("RX", [0.3], [[LOW], [MIDDLE], [HIGH]]),
        ("RZ", [0.3], [[LOW], [MIDDLE], [HIGH]]),
        ("PhaseShift", [0.3], [[LOW], [MIDDLE], [HIGH]]),
        ("PauliX", [], [[LOW], [MIDDLE], [HIGH]]),
        ("CNOT", [], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1]]),
        ("CZ", [], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1]]),
        ("SWAP", [], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1]]),
        ("ECR", [], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1], [1, N - 2]]),
        ("IsingXX", [0.3], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1]]),
        ("IsingZZ", [0.3], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1]]),
        ("CRX", [0.3], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1]]),
        ("CRot", [0.1, 0.2, 0.3], [[LOW - 1, LOW], [MIDDLE, MIDDLE + 1], [HIGH, HIGH + 1]]),
        ("Toffoli", [], [[LOW - 2, LOW - 1, LOW], [MIDDLE - 1, MIDDLE, MIDDLE + 1], [0, 1, 2]]),
        ("MultiRZ", [0.3], [[0, N // 3, N // 2, N - 1], [MIDDLE, MIDDLE + 1]]),
        ("GlobalPhase", [0.3], [[]]),
    ]
    for wires in placements
]


def _apply(state, matrix, wires):
    """`matrix` (first wire = most significant bit) on `wires` of `state`, with numpy."""
    k = len(wires)
    if k == 0:
        return matrix[0, 0] * state
    psi = np.tensordot(
        matrix.reshape((2,) * (2 * k)), state.reshape((2,) * N), axes=[list(range(k, 2 * k)), wires]
    )
    return np.moveaxis(psi, list(range(k)), wires).reshape(-1)


@pytest.fixture
def psi(rng):
    state = rng.normal(size=2**N) + 1j * rng.normal(size=2**N)
    return state / np.linalg.norm(state)


@pytest.mark.parametrize("threads", [1, 2])
def test_each_kernel_at_low_middle_and_high_wires(rt, reference, psi, monkeypatch, threads):
    monkeypatch.setenv("COFACTOR_FUSION", "0")
    rt.acquire(N)
    rt.lib.cf_rt_set_num_threads(threads)
    try:
        for name, params, wires in CASES:
            for adjoint in (False, True):
                rt.set_state(psi)
                rt.gate(name, params, wires, adjoint=adjoint)
                op = reference.op(name, params, wires, adjoint, (), None)
                matrix = qml.matrix(op, wire_order=wires) if wires else qml.matrix(op)
                np.testing.assert_allclose(
                    rt.state(),
                    _apply(psi, matrix, wires),
                    atol=1e-13,
                    err_msg=f"{name} {wires} adjoint={adjoint}",
                )
    finally:
        rt.lib.cf_rt_set_num_threads(0)


def _rx_like(t):
    return np.array([[np.cos(t), 1j * np.sin(t)], [1j * np.sin(t), np.cos(t)]])


def _off_diagonal_blocks(rng):
    """Two-target unitaries [[0, U], [V, 0]]: U, V real on the diagonal and imaginary off
    it (ECR's shape, kEvenReal), and U, V general (the general kernel)."""
    from scipy.stats import unitary_group

    zero = np.zeros((2, 2))
    a, b = rng.uniform(0, 3, 2)
    yield "even-real", np.block([[zero, _rx_like(a)], [_rx_like(-b), zero]])
    u, v = (unitary_group.rvs(2, random_state=rng) for _ in range(2))
    yield "general", np.block([[zero, u], [v, zero]])


def test_two_target_blocks_with_zero_diagonal_blocks(rt, rng, psi, monkeypatch):
    """Both targets outside a cache line (middle and high wires, adjacent or not), with a
    control inside or outside one, the matrix's first target the higher or the lower bit."""
    monkeypatch.setenv("COFACTOR_FUSION", "0")
    rt.acquire(N)
    for kind, matrix in _off_diagonal_blocks(rng):
        for wires in ([MIDDLE, MIDDLE + 1], [MIDDLE + 1, MIDDLE], [HIGH, MIDDLE], [2, N - 3]):
            for ctrls, cvals in (((), None), ((LOW,), [1]), ((1,), [0])):
                rt.set_state(psi)
                rt.unitary(matrix, wires, ctrls=ctrls, cvals=cvals)
                on = list(ctrls) + list(wires)
                # the controlled matrix: the identity but where the controls hold (the
                # controls are its high bits)
                full = np.eye(2 ** len(on), dtype=complex)
                start = int("".join(str(v) for v in cvals), 2) * 4 if ctrls else 0
                full[start : start + 4, start : start + 4] = matrix
                np.testing.assert_allclose(
                    rt.state(),
                    _apply(psi, full, on),
                    atol=1e-13,
                    err_msg=f"{kind} on {wires} ctrls={ctrls} {cvals}",
                )


@pytest.mark.parametrize("isa", ["base", "avx2"])
def test_kernel_positions_at_lower_instruction_set_levels(isa):
    """The same at the other instruction-set levels (COFACTOR_ISA is read once per
    process: a child pytest)."""
    assert_passes_at_isa(
        __file__,
        "test_each_kernel_at_low_middle_and_high_wires or test_two_target_blocks_with_zero",
        isa,
    )
