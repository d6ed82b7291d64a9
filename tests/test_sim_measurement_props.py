"""Property tests of the simulator's measurements against uncompiled PennyLane
(default.qubit): random small circuits on devices with string / non-contiguous integer
wire labels, measured with probs/expval/var/state/density_matrix over random wire subsets
and orders and with Hermitian, tensor-product, Hamiltonian and Projector observables; and,
with shots, sampled probabilities within a few standard errors of the exact ones, and the
same samples for the same qjit seed."""

from __future__ import annotations

import warnings

import numpy as np
import pennylane as qml
from frontend.fuzz_settings import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import cofactor

LABEL_SETS = [[0, 1, 2], ["a", 7, "b"], [5, 0, 9]]
ONE_WIRE = ["RX", "RY", "RZ", "Hadamard", "S", "T", "PhaseShift"]
TWO_WIRE = ["CNOT", "CZ", "CRY", "IsingXX", "SWAP"]


@st.composite
def circuits(draw):
    """(labels, gates): gates are (name, wire positions, angle)."""
    labels = draw(st.sampled_from(LABEL_SETS))
    gates = []
    for _ in range(draw(st.integers(2, 7))):
        if draw(st.booleans()):
            name = draw(st.sampled_from(ONE_WIRE))
            wires = [draw(st.integers(0, 2))]
        else:
            name = draw(st.sampled_from(TWO_WIRE))
            wires = draw(st.permutations([0, 1, 2]))[:2]
        gates.append((name, wires, draw(st.floats(-3.0, 3.0))))
    return labels, gates


def hermitian(rng: np.random.Generator, k: int) -> np.ndarray:
    a = rng.normal(size=(2**k, 2**k)) + 1j * rng.normal(size=(2**k, 2**k))
    return a + a.conj().T


def measurement(kind: str, labels: list, order: list[int], seed: int):
    """A function returning measurement `kind` on the wires `labels[order]`."""
    w = [labels[i] for i in order]
    rng = np.random.default_rng(seed)
    h1, h2 = hermitian(rng, 1), hermitian(rng, 2)
    return {
        "probs": lambda: qml.probs(wires=w[:2]),
        "state": lambda: qml.state(),
        "density": lambda: qml.density_matrix(wires=w[:2]),
        "pauli": lambda: qml.expval(qml.X(w[0]) @ qml.Y(w[2]) @ qml.Z(w[1])),
        "hermitian": lambda: qml.var(qml.Hermitian(h2, wires=w[:2])),
        "hamiltonian": lambda: qml.expval(
            0.7 * qml.X(w[0]) @ qml.Z(w[2]) - 1.3 * qml.Y(w[1]) + 0.2
        ),
        "sum_var": lambda: qml.var(qml.Hermitian(h1, w[0]) + qml.Z(w[1])),
        "projector": lambda: qml.expval(qml.Projector([1, 0], wires=w[:2])),
        "several": lambda: (qml.expval(qml.Z(w[0])), qml.probs(wires=[w[2]])),
    }[kind]


def program(labels, gates, measure):
    def circuit():
        for name, wires, angle in gates:
            op = getattr(qml, name)
            targets = [labels[i] for i in wires]
            if op.num_params:
                op(angle, wires=targets)
            else:
                op(wires=targets)
        return measure()

    return circuit


KINDS = [
    "probs",
    "state",
    "density",
    "pauli",
    "hermitian",
    "hamiltonian",
    "sum_var",
    "projector",
    "several",
]


@fuzz_settings(8)
@given(circuits(), st.sampled_from(KINDS), st.permutations([0, 1, 2]), st.integers(0, 99))
def test_measurements_match_default_qubit(circuit, kind, order, seed):
    labels, gates = circuit
    fn = program(labels, gates, measurement(kind, labels, order, seed))
    want = qml.QNode(fn, qml.device("default.qubit", wires=labels))()
    got = cofactor.qjit(qml.QNode(fn, qml.device("default.qubit", wires=labels)))()
    for w, g in zip(
        want if isinstance(want, tuple) else (want,),
        got if isinstance(got, tuple) else (got,),
        strict=True,
    ):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, atol=1e-9, rtol=1e-9)


@fuzz_settings(4)
@given(circuits(), st.permutations([0, 1, 2]))
def test_sampled_probabilities_within_a_few_standard_errors(circuit, order):
    labels, gates = circuit
    shots = 4000
    fn = program(labels, gates, lambda: qml.probs(wires=[labels[i] for i in order]))
    exact = qml.QNode(fn, qml.device("default.qubit", wires=labels))()
    qnode = qml.set_shots(qml.QNode(fn, qml.device("default.qubit", wires=labels)), shots)
    sampled = cofactor.qjit(qnode, seed=11)()
    again = cofactor.qjit(qnode, seed=11)()
    np.testing.assert_array_equal(sampled, again)  # the seed fixes the samples
    # 5 standard errors of a frequency, plus a floor for probabilities near 0 or 1
    tolerance = 5 * np.sqrt(exact * (1 - exact) / shots) + 1e-3
    assert np.all(np.abs(sampled - exact) <= tolerance), (sampled, exact)
    assert np.all(sampled[exact < 1e-12] == 0)  # impossible outcomes never drawn


def test_a_seeded_circuit_run_twice_in_one_call_samples_twice():
    """Catalyst's seeded runtime shares one generator among the circuit runs of a call: two
    runs give different samples, and the call as a whole repeats. Before, every run restarted
    the circuit's seed, so a loop over a sampling circuit (or a batch, or two calls of it)
    got the same samples again and again: averages over runs had the variance of one run."""
    dev = qml.device("lightning.qubit", wires=2)

    @qml.set_shots(64)
    @qml.qnode(dev)
    def coin(x):
        qml.RX(x, 0)
        qml.Hadamard(1)
        return qml.sample()

    @cofactor.qjit(seed=3)
    def twice(x):
        return coin(x), coin(x)

    @cofactor.qjit(seed=3)
    def looped(x):
        @cofactor.for_loop(0, 20, 1)
        def body(i, total):
            return total + np.mean(coin(x)[:, 1])

        return body(0.0) / 20

    a, b = twice(1.2)
    assert not np.array_equal(a, b)
    a2, b2 = twice(1.2)
    np.testing.assert_array_equal(a, a2)  # every call repeats
    np.testing.assert_array_equal(b, b2)
    # 20 independent runs of 64 fair coins: the mean is 0.5 within ~3.5 sd (0.0125 each)
    mean = looped(1.2)
    assert mean == looped(1.2) and abs(mean - 0.5) < 0.045
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = cofactor.qjit(coin, seed=3)(1.2)
    np.testing.assert_array_equal(other, cofactor.qjit(coin, seed=3)(1.2))
