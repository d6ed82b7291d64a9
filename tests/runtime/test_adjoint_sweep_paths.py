"""The adjoint Jacobian's layer sweeps (runtime/src/AdjointFusion.hpp) against PennyLane's
default.qubit: on registers that the runtime fuses by default (16, 17 wires: the cross sums'
partner tiles, the tile passes of the queued steps, the product sweep at the end), and the
product sweep (phi the product state of the tape's leading one-wire gates, unwritten: the
sums from lambda alone) against the cross sums (COFACTOR_ADJOINT_PRODUCT_SWEEP=0), the
unfused walk and PennyLane, with factors that have a zero or tiny component (the cross sums
then).

Random circuits: layers of one-wire trainable gates (the sweeps take their derivatives) and
random gates of every kind between them (controls of either value, adjoints, multi-parameter
gates), several observables (Pauli words, a Hermitian, a Hamiltonian); the Jacobian must be
PennyLane's to 1e-10, so a wrong derivative of any parameter fails.
"""

from __future__ import annotations

import numpy as np
import pytest

ONE_WIRE = ["RX", "RY", "RZ", "PhaseShift", "Rot", "U3"]
OTHERS = [
    ("CNOT", 2),
    ("CZ", 2),
    ("SWAP", 2),
    ("Hadamard", 1),
    ("S", 1),
    ("CRX", 2),
    ("CRot", 2),
    ("IsingXX", 2),
    ("IsingZZ", 2),
    ("ControlledPhaseShift", 2),
    ("SingleExcitation", 2),
    ("MultiRZ", 3),
    ("Toffoli", 3),
]


def _program(n: int, layers: int, seed: int) -> list[tuple]:
    """(name, params, wires, adjoint, ctrls, cvals) of a layered random circuit."""
    rng = np.random.default_rng(seed)
    num_params = {"Rot": 3, "U3": 3, "CRot": 3}
    fixed = {"CNOT", "CZ", "SWAP", "Hadamard", "S", "Toffoli"}
    ops = []
    for layer in range(layers):
        for w in range(n):
            for _ in range(int(rng.integers(1, 3))):
                name = str(rng.choice(ONE_WIRE))
                params = list(rng.uniform(-np.pi, np.pi, num_params.get(name, 1)))
                ctrls: list[int] = []
                if layer == 1 and rng.random() < 0.15:  # a controlled one-wire gate
                    ctrls = [int((w + 1 + rng.integers(n - 1)) % n)]
                cvals = [int(v) for v in rng.integers(0, 2, len(ctrls))]
                ops.append((name, params, [w], bool(rng.integers(2)), ctrls, cvals))
        r = layer % (n - 1) + 1
        for w in range(n):  # a ring, with other gates on random wires now and then
            ops.append(("CNOT", [], [w, (w + r) % n], False, [], []))
            if rng.random() < 0.25:
                name, k = OTHERS[int(rng.integers(len(OTHERS)))]
                order = [int(x) for x in rng.permutation(n)]
                wires, rest = order[:k], order[k:]
                ctrls = rest[:1] if rng.random() < 0.3 else []
                cvals = [int(v) for v in rng.integers(0, 2, len(ctrls))]
                params = (
                    []
                    if name in fixed
                    else list(rng.uniform(-np.pi, np.pi, num_params.get(name, 1)))
                )
                ops.append((name, params, wires, bool(rng.integers(2)), ctrls, cvals))
    return ops


def _hermitian(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    return h + h.conj().T


def _runtime_jacobian(rt, n: int, ops: list[tuple], seed: int) -> np.ndarray:
    rt.acquire(n)
    rt.tape_start()
    for name, params, wires, adjoint, ctrls, cvals in ops:
        rt.gate(name, params, wires, adjoint=adjoint, ctrls=ctrls, cvals=cvals)
    rt.tape_stop()
    obs = [
        rt.named("PauliZ", 0),
        rt.tensor([rt.named("PauliX", 1), rt.named("PauliY", n - 1)]),
        rt.hamiltonian(
            [0.4, -1.1], [rt.named("PauliZ", n // 2), rt.hermitian(_hermitian(seed), [0, 2])]
        ),
    ]
    jac = rt.adjoint_jacobian(obs)
    rt.release()
    return jac


def _pennylane_jacobian(n: int, ops: list[tuple], seed: int) -> np.ndarray:
    import pennylane as qml
    from pennylane import numpy as pnp

    sizes = [len(op[1]) for op in ops]
    flat = pnp.array(np.concatenate([op[1] for op in ops if op[1]]), requires_grad=True)
    h = _hermitian(seed)

    @qml.qnode(qml.device("default.qubit", wires=n), diff_method="backprop")
    def circuit(x):
        at = 0
        for (name, _, wires, adjoint, ctrls, cvals), size in zip(ops, sizes, strict=True):
            gate = getattr(qml, name)

            def make(*p, g=gate, w=wires):
                return g(*p, wires=w)

            if ctrls:
                make = qml.ctrl(make, control=ctrls, control_values=cvals)
            if adjoint:
                make = qml.adjoint(make)
            make(*[x[at + j] for j in range(size)])
            at += size
        return (
            qml.expval(qml.Z(0)),
            qml.expval(qml.X(1) @ qml.Y(n - 1)),
            qml.expval(0.4 * qml.Z(n // 2) - 1.1 * qml.Hermitian(h, wires=[0, 2])),
        )

    return np.asarray(qml.jacobian(lambda x: qml.math.stack(circuit(x)))(flat))


@pytest.mark.parametrize(("n", "seed"), [(16, 3), (17, 4)])
def test_wide_registers_match_pennylane(rt, monkeypatch, n, seed):
    """The runtime's defaults: fused from 16 wires on."""
    for name in ("FUSION", "FUSION_QUBITS", "FUSION_MIN_QUBITS", "ADJOINT_PRODUCT_SWEEP"):
        monkeypatch.delenv(f"COFACTOR_{name}", raising=False)
    ops = _program(n, 3, seed)
    jac = _runtime_jacobian(rt, n, ops, seed)
    expected = _pennylane_jacobian(n, ops, seed)
    assert np.max(np.abs(expected)) > 1e-2
    np.testing.assert_allclose(jac, expected, atol=1e-10, rtol=0)


def _with_prefix(n: int, prefix: list[tuple], seed: int) -> list[tuple]:
    """`prefix` (one-wire gates), then a random layered circuit without its first layer."""
    ops = _program(n, 3, seed)
    first_ring = next(i for i, op in enumerate(ops) if op[0] == "CNOT")
    return prefix + ops[first_ring:]


def _rot(w: int, rng) -> tuple:
    return ("Rot", list(rng.uniform(-np.pi, np.pi, 3)), [w], False, [], [])


@pytest.mark.parametrize("n", [9, 12])
def test_product_sweep_matches_cross_sums(rt, monkeypatch, n):
    """The random circuits start with RY and a one-wire gate of any kind (some adjoint) on
    every wire: the last sweep takes the product path; equal to the cross sums' Jacobian
    and the unfused one, in one batch of observables and one at a time."""
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    rng = np.random.default_rng(n)
    prefix = []
    for w in range(n):
        name = str(rng.choice(ONE_WIRE))
        params = list(rng.uniform(-np.pi, np.pi, 3 if name in ("Rot", "U3") else 1))
        prefix.append(("RY", [float(rng.uniform(0.5, 2.5))], [w], False, [], []))
        prefix.append((name, params, [w], bool(rng.integers(2)), [], []))
    ops = _with_prefix(n, prefix, 40 + n)

    def jacobian(fusion: bool, product: bool) -> np.ndarray:
        monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
        monkeypatch.setenv("COFACTOR_ADJOINT_PRODUCT_SWEEP", "1" if product else "0")
        return _runtime_jacobian(rt, n, ops, n)

    ref = jacobian(False, False)
    assert np.max(np.abs(ref)) > 1e-2
    cross = jacobian(True, False)
    product = jacobian(True, True)
    np.testing.assert_allclose(cross, ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(product, ref, atol=1e-12, rtol=0)
    assert not np.array_equal(product, cross)  # the product path was taken
    monkeypatch.setenv("COFACTOR_ADJOINT_MAX_BATCH", "1")  # a walk per observable
    np.testing.assert_allclose(jacobian(True, True), ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "special",
    [
        ("PauliX", [], False),  # factor (0, 1): exactly zero
        ("RZ", [0.7], False),  # (e^-0.35i, 0)
        ("RY", [1e-5], True),  # a component of 5e-6: under the threshold
        ("RY", [0.02], False),  # 0.01: divided by, still to 1e-10 of PennyLane
    ],
)
def test_product_sweep_small_factors_match_pennylane(rt, monkeypatch, special):
    """A prefix with a wire left at (or near) |0> or |1>: the derivatives still PennyLane's."""
    for name in ("FUSION", "FUSION_QUBITS", "FUSION_MIN_QUBITS", "ADJOINT_PRODUCT_SWEEP"):
        monkeypatch.delenv(f"COFACTOR_{name}", raising=False)
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    n = 6
    rng = np.random.default_rng(7)
    name, params, adjoint = special
    prefix = [_rot(w, rng) for w in range(n)]
    prefix[3] = (name, params, [3], adjoint, [], [])  # PauliX: wire 3 not swept
    ops = _with_prefix(n, prefix, 11)
    jac = _runtime_jacobian(rt, n, ops, 11)
    np.testing.assert_allclose(jac, _pennylane_jacobian(n, ops, 11), atol=1e-10, rtol=0)


def test_product_sweep_sel_matches_pennylane(rt, monkeypatch):
    """StronglyEntanglingLayers at 15 wires, fused, with the product sweep and without it."""
    for name in ("FUSION", "FUSION_QUBITS", "ADJOINT_PRODUCT_SWEEP"):
        monkeypatch.delenv(f"COFACTOR_{name}", raising=False)
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    n, layers = 15, 3
    weights = np.random.default_rng(2).uniform(0, 2 * np.pi, size=(layers, n, 3))
    ops = []
    for layer in range(layers):
        ops += [("Rot", list(weights[layer, w]), [w], False, [], []) for w in range(n)]
        r = layer % (n - 1) + 1
        ops += [("CNOT", [], [w, (w + r) % n], False, [], []) for w in range(n)]
    jac = _runtime_jacobian(rt, n, ops, 2)
    monkeypatch.setenv("COFACTOR_ADJOINT_PRODUCT_SWEEP", "0")
    cross = _runtime_jacobian(rt, n, ops, 2)
    expected = _pennylane_jacobian(n, ops, 2)
    assert np.max(np.abs(expected)) > 1e-2
    np.testing.assert_allclose(jac, expected, atol=1e-10, rtol=0)
    np.testing.assert_allclose(cross, expected, atol=1e-10, rtol=0)
    assert not np.array_equal(jac, cross)  # the product path was taken


@pytest.mark.parametrize(("n", "seed"), [(12, 21), (13, 22)])
def test_antihermitian_sums_match_pennylane(rt, monkeypatch, n, seed):
    """The sweeps' anti-Hermitian sums (CrossSums.inc, antiHermitianSums: C = S_01 -
    conj(S_10), D = Im S_11, Im of the total) against the full cross sums
    (COFACTOR_ADJOINT_ANTIHERMITIAN_SUMS=0) and PennyLane: the random layered circuits
    (controls, adjoints, every one-wire kind, several observables) and an SEL-like one whose
    swept wires lie on the lane bits, inside tiles and across them, in pairs and alone (13
    wires: an odd count above the lanes)."""
    for name in ("FUSION", "FUSION_QUBITS", "ADJOINT_PRODUCT_SWEEP", "ADJOINT_ANTIHERMITIAN_SUMS"):
        monkeypatch.delenv(f"COFACTOR_{name}", raising=False)
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    rng = np.random.default_rng(seed)
    sel = []
    for layer in range(3):
        sel += [_rot(w, rng) for w in range(n)]
        sel += [("CNOT", [], [w, (w + layer + 1) % n], False, [], []) for w in range(n)]
    for ops in (_program(n, 3, seed), sel):
        jac = _runtime_jacobian(rt, n, ops, seed)
        monkeypatch.setenv("COFACTOR_ADJOINT_ANTIHERMITIAN_SUMS", "0")
        full = _runtime_jacobian(rt, n, ops, seed)
        monkeypatch.delenv("COFACTOR_ADJOINT_ANTIHERMITIAN_SUMS")
        expected = _pennylane_jacobian(n, ops, seed)
        assert np.max(np.abs(expected)) > 1e-2
        np.testing.assert_allclose(jac, expected, atol=1e-10, rtol=0)
        np.testing.assert_allclose(full, expected, atol=1e-10, rtol=0)
        assert not np.array_equal(jac, full)  # the anti-Hermitian sums were taken
