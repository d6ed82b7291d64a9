"""Property test: circuits of PennyLane templates (embeddings, entangling layers, QFT,
Grover, Permute, ArbitraryUnitary), also under `qml.adjoint` and `qml.ctrl` with control
values, measured by Hamiltonians / sums / products / scalar products of Pauli words on
overlapping wires, `var` of Pauli words, `probs` of reordered wire subsets and of an
observable, compiled by cofactor, against uncompiled PennyLane on `default.qubit`; the
gradient of the first expectation value (adjoint and parameter-shift) against PennyLane's.

Observables are kept Hermitian (a product of Paulis on one wire such as X(0) @ Z(0) = -iY(0)
is left out): PennyLane's default.qubit gives a wrong expectation value for a sum with such
a term (cofactor's is the matrix's).

`make test` runs a fixed, derandomized set of COFACTOR_FUZZ_EXAMPLES examples (default 12);
run longer with e.g. COFACTOR_FUZZ_EXAMPLES=200 COFACTOR_FUZZ_SEED=3.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from fuzz_settings import fuzz_settings
from hypothesis import assume, given, note
from hypothesis import strategies as st
from pennylane import numpy as pnp

import cofactor

pytestmark = pytest.mark.needs_toolchain

WIRES = 3
PARAMS = 24  # the traced parameter vector every layer takes its angles from
PAULI = {"X": qml.PauliX, "Y": qml.PauliY, "Z": qml.PauliZ}


def _layer(kind: str, wires: list[int], at: int):
    """A function of the parameter vector `p` that queues one template on `wires`."""
    n = len(wires)
    if kind == "angle":
        return lambda p: qml.AngleEmbedding(p[at : at + n], wires=wires, rotation="Y")
    if kind == "iqp":
        return lambda p: qml.IQPEmbedding(p[at : at + n], wires=wires, n_repeats=2)
    if kind == "strong":
        return lambda p: qml.StronglyEntanglingLayers(
            p[at : at + 3 * n].reshape(1, n, 3), wires=wires
        )
    if kind == "basic":
        return lambda p: qml.BasicEntanglerLayers(p[at : at + n].reshape(1, n), wires=wires)
    if kind == "qaoa":
        shape = qml.QAOAEmbedding.shape(n_layers=1, n_wires=n)
        size = int(np.prod(shape))
        return lambda p: qml.QAOAEmbedding(
            p[at : at + n], p[at + 1 : at + 1 + size].reshape(shape), wires=wires
        )
    if kind == "arbitrary":
        return lambda p: qml.ArbitraryUnitary(p[at : at + 4**n - 1], wires=wires)
    if kind == "qft":
        return lambda p: qml.QFT(wires=wires)
    if kind == "grover":
        return lambda p: qml.GroverOperator(wires=wires)
    if kind == "permute":
        return lambda p: qml.Permute(list(reversed(wires)), wires=wires)
    if kind == "basis":
        return lambda p: qml.BasisEmbedding([1, 0, 1][:n], wires=wires)
    raise AssertionError(kind)


KINDS = [
    "angle", "iqp", "strong", "basic", "qaoa", "arbitrary", "qft", "grover", "permute", "basis"
]  # fmt: skip
#: templates with a one-wire form (ArbitraryUnitary on 2 wires at most: 15 parameters)
ONE_WIRE_OK = {"angle", "iqp", "strong", "basic", "qft", "arbitrary", "basis"}


@st.composite
def layers(draw):
    kind = draw(st.sampled_from(KINDS))
    low = 1 if kind in ONE_WIRE_OK else 2
    high = 2 if kind == "arbitrary" else WIRES
    if kind == "qaoa":
        low = 2
    n = draw(st.integers(low, high))
    wires = draw(st.permutations(range(WIRES)))[:n]
    at = draw(st.integers(0, PARAMS - 16))
    wrap = draw(st.sampled_from(["plain", "adjoint", "ctrl"]))
    text = f"{kind}{wires}@{at}"
    fn = _layer(kind, wires, at)
    free = [w for w in range(WIRES) if w not in wires]
    if wrap == "adjoint":
        return f"adjoint({text})", lambda p, fn=fn: qml.adjoint(fn)(p)
    if wrap == "ctrl" and free:
        control = free[: draw(st.integers(1, len(free)))]
        values = [draw(st.booleans()) for _ in control]
        return (
            f"ctrl({text}, {control}, {values})",
            lambda p, fn=fn: qml.ctrl(fn, control=control, control_values=values)(p),
        )
    return text, fn


@st.composite
def pauli_words(draw):
    """A product of one to three Paulis on possibly shared wires, Hermitian."""
    factors = draw(
        st.lists(
            st.tuples(st.sampled_from("XYZ"), st.integers(0, WIRES - 1)), min_size=1, max_size=3
        )
    )
    word = qml.prod(*[PAULI[p](w) for p, w in factors]) if len(factors) > 1 else None
    if word is not None:
        assume(all(abs(np.imag(c)) < 1e-12 for c in word.pauli_rep.values()))
    return factors


def _word(factors):
    ops = [PAULI[p](w) for p, w in factors]
    return ops[0] if len(ops) == 1 else qml.prod(*ops)


@st.composite
def observables(draw):
    """(text, builder): a Hamiltonian, a sum of scalar products, or a single product."""
    terms = draw(st.lists(pauli_words(), min_size=1, max_size=4))
    coeffs = draw(
        st.lists(st.sampled_from([0.5, -1.0, 2.0, 0.3]), min_size=len(terms), max_size=len(terms))
    )
    form = draw(st.sampled_from(["hamiltonian", "sum", "word"]))

    def build():
        words = [_word(t) for t in terms]
        if form == "hamiltonian":
            return qml.Hamiltonian(coeffs, words)
        if form == "sum" and len(words) > 1:
            return qml.sum(*[qml.s_prod(c, w) for c, w in zip(coeffs, words, strict=True)])
        return qml.s_prod(coeffs[0], words[0])

    return f"{form}({coeffs}, {terms})", build


@st.composite
def programs(draw):
    body = draw(st.lists(layers(), min_size=1, max_size=3))
    obs_text, obs = draw(observables())
    var_word = draw(pauli_words())
    probs_wires = draw(st.permutations(range(WIRES)))[: draw(st.integers(1, WIRES))]
    probs_op = draw(st.sampled_from("XYZ")), draw(st.integers(0, WIRES - 1))
    p = np.array(draw(st.lists(st.floats(-3, 3), min_size=PARAMS, max_size=PARAMS)))
    return body, obs_text, obs, var_word, probs_wires, probs_op, p


def _circuit(body, obs, var_word, probs_wires, probs_op):
    def circuit(p):
        for _, fn in body:
            fn(p)
        return (
            qml.expval(obs()),
            qml.var(_word([var_word[0]])),
            qml.probs(wires=probs_wires),
            qml.probs(op=PAULI[probs_op[0]](probs_op[1])),
        )

    return circuit


@fuzz_settings(12)
@given(programs())
def test_templates_and_observables_match_default_qubit(program):
    body, obs_text, obs, var_word, probs_wires, probs_op, p = program
    note(f"body={[t for t, _ in body]} obs={obs_text} var={var_word[0]} probs={probs_wires}")
    circuit = _circuit(body, obs, var_word, probs_wires, probs_op)
    dev = qml.device("default.qubit", wires=WIRES)
    expected = qml.QNode(circuit, dev)(p)
    got = cofactor.qjit(qml.QNode(circuit, dev))(p)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-9)

    def first(p):
        # (PennyLane's value of a Hamiltonian such as 0.5 * X(0) @ X(0) is complex)
        return qml.math.real(qml.QNode(circuit, dev)(p)[0])

    reference = qml.grad(first)(pnp.array(p, requires_grad=True))
    for method in ("adjoint", "parameter-shift"):

        @qml.qnode(dev, diff_method=method)
        def expval_only(p):
            for _, fn in body:
                fn(p)
            return qml.expval(obs())

        gradient = cofactor.qjit(cofactor.grad(expval_only))(p)
        np.testing.assert_allclose(gradient, reference, atol=1e-8, err_msg=method)
