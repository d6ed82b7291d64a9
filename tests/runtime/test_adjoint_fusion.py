"""Gate fusion in the adjoint Jacobian's backward pass (runtime/src/AdjointFusion.hpp).

The backward pass gathers operations, trainable ones included, into blocks on few wires;
the Jacobian must be the unfused one to 1e-12. Each test records the same random program
with fusion off and at several widths (MIN_QUBITS=0 fuses small registers too) and compares
the Jacobians of several observables, in one batch and one observable at a time.
"""

from __future__ import annotations

import numpy as np
import pytest
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
    "CNOT",
    "CY",
    "CZ",
    "CH",
    "SWAP",
    "ISWAP",
    "SISWAP",
    "ECR",
    "Toffoli",
    "CSWAP",
]

PARAMETRIC = [
    "RX",
    "RY",
    "RZ",
    "PhaseShift",
    "Rot",
    "U2",
    "U3",
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
    "MultiRZ",
    "GlobalPhase",
]


def _record(rt, n: int, length: int, seed: int, pauli_rot: bool) -> None:
    """Records a random program: fixed and parametric gates (adjoint or not, with controls
    of either value), unitaries and (if pauli_rot) Pauli rotations."""
    rng = np.random.default_rng(seed)
    rt.tape_start()
    _record_gates(rt, n, length, rng, pauli_rot)
    rt.tape_stop()


def _record_gates(rt, n: int, length: int, rng, pauli_rot: bool) -> None:
    for _ in range(length):
        r = rng.random()
        if r < 0.08:
            k = int(rng.integers(1, 3))
            wires = [int(w) for w in rng.permutation(n)[:k]]
            u = unitary_group.rvs(2**k, random_state=rng)
            rt.unitary(u, wires, adjoint=bool(rng.integers(2)))
            continue
        if pauli_rot and r < 0.13:
            k = int(rng.integers(1, min(n, 3) + 1))
            wires = [int(w) for w in rng.permutation(n)[:k]]
            word = "".join(rng.choice(list("XYZ"), size=k))
            rt.pauli_rot(float(rng.normal()), word, wires, adjoint=bool(rng.integers(2)))
            continue
        name = str(rng.choice(PARAMETRIC if r < 0.6 else FIXED_GATES))
        _, num_params, num_wires = rt.gates[name]
        k = min(int(rng.integers(1, 4)), n) if num_wires < 0 else num_wires
        if name == "GlobalPhase":
            k = 0
        if k > n:
            continue
        order = [int(w) for w in rng.permutation(n)]
        wires, rest = order[:k], order[k:]
        nc = int(rng.integers(0, min(2, len(rest)) + 1)) if rng.random() < 0.3 else 0
        ctrls = rest[:nc]
        cvals = [int(v) for v in rng.integers(0, 2, size=nc)]
        rt.gate(
            name,
            rng.normal(size=num_params),
            wires,
            adjoint=bool(rng.integers(2)),
            ctrls=ctrls,
            cvals=cvals,
        )


def _observables(rt, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    h = h + h.conj().T
    return [
        rt.named("PauliZ", 0),
        rt.tensor([rt.named("PauliX", n - 1), rt.named("PauliY", 1)]),
        rt.hermitian(h, [n - 2, 0]),
        rt.hamiltonian([0.3, -1.2], [rt.named("PauliZ", 1), rt.named("PauliX", n - 2)]),
    ]


def _jacobians(rt, monkeypatch, n, length, seed, pauli_rot, fusion, qubits=3):
    monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", str(qubits))
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    monkeypatch.delenv("COFACTOR_ADJOINT_MAX_BATCH", raising=False)
    rt.acquire(n)
    _record(rt, n, length, seed, pauli_rot)
    obs = _observables(rt, n, seed)
    batched = rt.adjoint_jacobian(obs)
    monkeypatch.setenv("COFACTOR_ADJOINT_MAX_BATCH", "1")
    single = rt.adjoint_jacobian(obs)
    return batched, single


@pytest.mark.parametrize("n", [3, 5, 7])
@pytest.mark.parametrize("pauli_rot", [False, True])
def test_fused_backward_matches_unfused(rt, monkeypatch, n, pauli_rot):
    seed = 100 * n + int(pauli_rot)
    ref, ref_single = _jacobians(rt, monkeypatch, n, 90, seed, pauli_rot, fusion=False)
    np.testing.assert_allclose(ref_single, ref, atol=1e-12, rtol=0)
    assert np.max(np.abs(ref)) > 1e-2  # the derivatives are not trivially 0
    bitwise_equal = []
    for qubits in (2, 3, 4, 5):
        got, single = _jacobians(rt, monkeypatch, n, 90, seed, pauli_rot, True, qubits)
        bitwise_equal.append(np.array_equal(got, ref))
        np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0, err_msg=f"k={qubits}")
        np.testing.assert_allclose(single, ref, atol=1e-12, rtol=0, err_msg=f"k={qubits}")
    # fused blocks round differently: equal to the last bit at every width would mean that
    # the backward pass fused nothing
    assert not all(bitwise_equal)


def test_fused_backward_adjoint_fusion_knob(rt, monkeypatch):
    """COFACTOR_ADJOINT_FUSION_QUBITS=0 keeps the forward fusion but walks back unfused."""
    n, seed = 5, 7
    ref, _ = _jacobians(rt, monkeypatch, n, 60, seed, False, fusion=False)
    monkeypatch.setenv("COFACTOR_ADJOINT_FUSION_QUBITS", "0")
    got, _ = _jacobians(rt, monkeypatch, n, 60, seed, False, True, 3)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("chunk", ["15", "3"])
@pytest.mark.parametrize("product", ["1", "0"])
def test_fused_backward_sel_matches_pennylane(rt, monkeypatch, chunk, product):
    """A StronglyEntanglingLayers Jacobian with the backward pass fused (half of its
    rotations as RZ RY RZ), against PennyLane; chunk 3: the queued steps on the low three
    bits go chunk by chunk; product 1 (the default): phi at the first layer is written as
    the product state of its rotations, 0: walked back."""
    import pennylane as qml

    monkeypatch.setenv("COFACTOR_ADJOINT_CHUNK_QUBITS", chunk)
    monkeypatch.setenv("COFACTOR_ADJOINT_PRODUCT_PREFIX", product)
    n, layers = 6, 3
    weights = np.random.default_rng(5).normal(size=(layers, n, 3))
    for name, value in (("FUSION", "1"), ("FUSION_QUBITS", "3"), ("FUSION_MIN_QUBITS", "0")):
        monkeypatch.setenv(f"COFACTOR_{name}", value)
    rt.acquire(n)
    rt.tape_start()
    for layer in range(layers):
        for w in range(n):
            if layer % 2:
                rt.gate("Rot", weights[layer, w], [w])
            else:  # Rot(a, b, c) = RZ(c) RY(b) RZ(a): a one-wire block of three derivatives
                rt.gate("RZ", [weights[layer, w, 0]], [w])
                rt.gate("RY", [weights[layer, w, 1]], [w])
                rt.gate("RZ", [weights[layer, w, 2]], [w])
        r = layer % (n - 1) + 1
        for w in range(n):
            rt.gate("CNOT", [], [w, (w + r) % n])
    rt.tape_stop()
    jac = rt.adjoint_jacobian([rt.named("PauliZ", 0), rt.named("PauliX", 4)])

    dev = qml.device("default.qubit", wires=n)

    @qml.qnode(dev)
    def circuit(w):
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return qml.expval(qml.Z(0)), qml.expval(qml.X(4))

    expected = qml.jacobian(lambda w: qml.math.stack(circuit(w)))(
        qml.numpy.array(weights, requires_grad=True)
    )
    np.testing.assert_allclose(jac, np.reshape(expected, (2, -1)), atol=1e-12, rtol=0)


@pytest.mark.parametrize("chunk", [1, 2, 3, 4])
@pytest.mark.parametrize("pauli_rot", [False, True])
def test_fused_backward_chunked_groups_match_unfused(rt, monkeypatch, chunk, pauli_rot):
    """The queued constant steps on the low `chunk` bits go chunk by chunk (the default,
    2^15 amplitudes, only chunks registers of 16+ qubits; here small chunks of a 6-qubit
    register, so that groups, high steps that commute past them and ones that do not, all
    occur): the Jacobian is the unchunked one and the unfused one, to 1e-12 (a kernel on a
    chunk may be another kernel than on the whole register: rounding may differ)."""
    n, seed = 6, 31 + int(pauli_rot)
    ref, _ = _jacobians(rt, monkeypatch, n, 90, seed, pauli_rot, fusion=False)
    monkeypatch.setenv("COFACTOR_ADJOINT_CHUNK_QUBITS", "0")
    whole, _ = _jacobians(rt, monkeypatch, n, 90, seed, pauli_rot, True, 3)
    monkeypatch.setenv("COFACTOR_ADJOINT_CHUNK_QUBITS", str(chunk))
    got, single = _jacobians(rt, monkeypatch, n, 90, seed, pauli_rot, True, 3)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(single, ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(got, whole, atol=1e-12, rtol=0)


def test_fused_backward_default_chunks_match_unfused(rt, monkeypatch):
    """At 17 qubits the default chunks (2^15 amplitudes) split the register in four: a
    random program's Jacobian (several observables, batched and one at a time) is the
    unfused one."""
    n, seed = 17, 5
    monkeypatch.delenv("COFACTOR_ADJOINT_CHUNK_QUBITS", raising=False)
    ref, _ = _jacobians(rt, monkeypatch, n, 80, seed, True, fusion=False)
    assert np.max(np.abs(ref)) > 1e-2
    got, single = _jacobians(rt, monkeypatch, n, 80, seed, True, True, 3)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(single, ref, atol=1e-12, rtol=0)


ONE_WIRE = ["RX", "RY", "RZ", "Rot", "PhaseShift", "U3", "Hadamard", "T", "SX", "PauliY"]


def _prefix_jacobians(rt, monkeypatch, n, seed, prep, fusion, product, chunk):
    """A tape that starts with one-wire gates (several per wire, trainable and constant,
    adjoint or not, one-wire unitaries), then a random program; prep: gates applied before
    the tape starts (not recorded), so that the tape does not start from |0...0>."""
    monkeypatch.setenv("COFACTOR_FUSION", "1" if fusion else "0")
    monkeypatch.setenv("COFACTOR_FUSION_QUBITS", "3")
    monkeypatch.setenv("COFACTOR_FUSION_MIN_QUBITS", "0")
    monkeypatch.setenv("COFACTOR_ADJOINT_PRODUCT_PREFIX", product)
    monkeypatch.setenv("COFACTOR_ADJOINT_CHUNK_QUBITS", chunk)
    monkeypatch.delenv("COFACTOR_ADJOINT_MAX_BATCH", raising=False)
    rng = np.random.default_rng(seed)
    rt.acquire(n)
    if prep:
        rt.gate("RX", [0.7], [0])
        rt.gate("CNOT", [], [0, n - 1])
    rt.tape_start()
    for _ in range(3 * n):
        w = int(rng.integers(n))
        if rng.random() < 0.15:
            rt.unitary(unitary_group.rvs(2, random_state=rng), [w], adjoint=bool(rng.integers(2)))
            continue
        name = str(rng.choice(ONE_WIRE))
        _, num_params, _ = rt.gates[name]
        rt.gate(name, rng.normal(size=num_params), [w], adjoint=bool(rng.integers(2)))
    _record_gates(rt, n, 50, rng, pauli_rot=True)
    rt.tape_stop()
    obs = _observables(rt, n, seed)
    batched = rt.adjoint_jacobian(obs)
    monkeypatch.setenv("COFACTOR_ADJOINT_MAX_BATCH", "1")
    single = rt.adjoint_jacobian(obs)
    return batched, single


@pytest.mark.parametrize("prep", [False, True])
@pytest.mark.parametrize("chunk", ["0", "3"])
@pytest.mark.parametrize("seed", [3, 4])
def test_product_prefix_matches_walked_phi(rt, monkeypatch, prep, chunk, seed):
    """From |0...0>, the walk writes phi as the product state of the tape's leading one-wire
    gates where it reaches them (AdjointFusion.hpp, "Product prefix"): the Jacobian is the
    one with phi walked back (COFACTOR_ADJOINT_PRODUCT_PREFIX=0) and the unfused one, to
    1e-12. With gates applied before the tape starts (prep) the tape does not start from
    |0...0>: the product state must not be used, and the Jacobian is still the unfused one."""
    n = 6
    ref, _ = _prefix_jacobians(rt, monkeypatch, n, seed, prep, False, "1", chunk)
    assert np.max(np.abs(ref)) > 1e-2
    walked, _ = _prefix_jacobians(rt, monkeypatch, n, seed, prep, True, "0", chunk)
    got, single = _prefix_jacobians(rt, monkeypatch, n, seed, prep, True, "1", chunk)
    np.testing.assert_allclose(walked, ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(single, ref, atol=1e-12, rtol=0)
