"""Programs shaped like PennyLane's and Catalyst's docs and demos: bad traced inputs raise
PennyLane's error when the compiled program runs, never a wrong number."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


@pytest.mark.parametrize("template", [qml.BasisState, qml.BasisEmbedding])
def test_traced_integer_basis_state_with_too_many_bits_raises(template):
    # PennyLane raises for a concrete integer >= 2**len(wires); a traced one took its low
    # bits (9 on three wires gave |001>)
    def circuit(a, n):
        template(n, wires=range(3))
        qml.RX(a, 0)
        return qml.probs()

    dev = qml.device("default.qubit", wires=3)
    compiled = cofactor.qjit(qml.QNode(circuit, dev))
    gradient = cofactor.qjit(cofactor.jacobian(qml.QNode(circuit, dev), argnums=0))
    for n in (8, 9, 2**40):
        with pytest.raises(ValueError, match="Integer state must be < 8"):
            qml.QNode(circuit, dev)(0.3, n)
        with pytest.raises(ValueError, match=r"Integer state must be < 2\*\*len\(wires\)"):
            compiled(0.3, n)
        with pytest.raises(ValueError, match=r"Integer state must be < 2\*\*len\(wires\)"):
            gradient(0.3, n)
    # in range, and negative integers (their low bits, as PennyLane) still run
    for n in (0, 5, 7, -1, -3):
        np.testing.assert_allclose(compiled(0.3, n), qml.QNode(circuit, dev)(0.3, n), atol=1e-12)


def test_projector_of_traced_bits_and_state_vectors_matches_pennylane():
    # valid traced bits raised "Basis state must only consist of 0s and 1s" (PennyLane's
    # set(state).issubset({0, 1}) of tracers), a traced state vector "not supported"
    def circuit(bits, v, x):
        qml.RX(x, 0)
        qml.Hadamard(1)
        qml.CRY(x, [1, 2])
        return (
            qml.expval(qml.Projector(bits, wires=[0, 1])),
            qml.var(qml.Projector(bits, wires=[0, 1])),
            qml.expval(qml.Projector(v, wires=[2]) @ qml.PauliZ(0)),
            qml.expval(0.5 * qml.Projector(bits, wires=[1, 2]) + qml.PauliX(1)),
        )

    dev = qml.device("default.qubit", wires=3)
    compiled = cofactor.qjit(qml.QNode(circuit, dev))
    for bits in (np.array([1, 0]), np.array([0, 1]), np.array([True, True])):
        args = (bits, np.array([0.6, 0.8j]), 0.7)
        expected = qml.QNode(circuit, dev)(*args)
        np.testing.assert_allclose(compiled(*args), expected, atol=1e-12)
    with pytest.raises(ValueError, match="Basis state must only consist of 0s and 1s"):
        compiled(np.array([2, 0]), np.array([0.6, 0.8]), 0.7)


def test_counts_of_a_mid_circuit_measurement_expression_is_refused_without_blaming_pennylane():
    # the message said "PennyLane refuses it too", but PennyLane counts such an expression
    def circuit(x):
        qml.RX(x, 0)
        m0 = qml.measure(0)
        return qml.counts(m0 * 1.5)

    dev = qml.device("default.qubit", wires=2, shots=50)
    assert set(qml.QNode(circuit, dev, mcm_method="one-shot")(0.4)) <= {0.0, 1.5}
    compiled = cofactor.qjit(qml.QNode(circuit, dev, mcm_method="one-shot"))
    with pytest.raises(cofactor.CompileError, match=r"counts of an arithmetic .*nor by Catalyst"):
        compiled(0.4)


def test_flip_sign_of_a_traced_integer_is_refused_by_name_and_the_workarounds_run():
    # FlipSign picks its gates from the bits of n in Python: a traced n raised "iteration
    # over a 0-d traced value"; the error now names the operation and the two ways out,
    # which both give PennyLane's states
    dev = qml.device("default.qubit", wires=3)

    def prepare():
        for w in range(3):
            qml.Hadamard(w)

    @qml.qnode(dev)
    def flip_sign(n):
        prepare()
        qml.FlipSign(n, wires=range(3))
        return qml.state()

    @qml.qnode(dev)
    def flip_by_cond(n):
        prepare()
        for _ in range(2):
            for i in range(3):
                qml.cond(((n >> (2 - i)) & 1) == 0, qml.PauliX)(i)
            if _ == 0:
                qml.ctrl(qml.Z(2), control=[0, 1])
        return qml.state()

    with pytest.raises(cofactor.CompileError, match=r"qml.FlipSign of a traced basis state"):
        cofactor.qjit(flip_sign)(5)
    static = cofactor.qjit(flip_sign, static_argnums=0)
    by_cond = cofactor.qjit(flip_by_cond)
    for n in range(8):
        np.testing.assert_allclose(static(n), flip_sign(n), atol=1e-12)
        np.testing.assert_allclose(by_cond(n), flip_sign(n), atol=1e-12)
