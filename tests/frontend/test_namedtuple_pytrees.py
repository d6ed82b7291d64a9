"""Namedtuples are pytree nodes (JAX's and Catalyst's rule): their fields are traced values and
their class comes back. A namedtuple argument used to be taken for one leaf and failed in
`np.asarray` with numpy's "inhomogeneous shape" ValueError; a namedtuple result, loop carry
or gradient wrt one failed likewise.
"""

from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import qjit

Pair = namedtuple("Pair", ["a", "b"])


class Params(NamedTuple):
    scale: float
    angles: np.ndarray


def _assert_same(got, expected):
    assert type(got) is type(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_namedtuple_argument_and_result():
    @qjit
    def swap(p):
        return Pair(p.b * 2, p.a + 1)

    _assert_same(swap(Pair(1.0, np.arange(3.0))), Pair(np.arange(3.0) * 2, 2.0))


def test_namedtuple_loop_carry():
    @qjit
    def run(p):
        @cofactor.for_loop(0, 3, 1)
        def body(i, c):
            return Pair(c.a * 2, c.b + i)

        return body(p)

    _assert_same(run(Pair(1.0, np.arange(2.0))), Pair(8.0, np.arange(2.0) + 3))


def test_grad_wrt_a_namedtuple_of_a_qnode_cost():
    dev = qml.device("lightning.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(p):
        qml.RX(p.angles[0] * p.scale, 0)
        qml.RY(p.angles[1], 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    reference = qml.QNode(circuit.func, qml.device("default.qubit", wires=2))

    def flat_cost(scale, angles):
        return reference(Params(scale, angles))

    p = Params(1.5, np.array([0.3, -0.7]))
    got = qjit(cofactor.grad(circuit))(p)
    expected = qml.grad(flat_cost, argnums=[0, 1])(
        qml.numpy.array(p.scale, requires_grad=True),
        qml.numpy.array(p.angles, requires_grad=True),
    )
    _assert_same(got, Params(*expected))


def test_namedtuples_of_different_classes_compile_separately():
    Other = namedtuple("Other", ["a", "b"])

    @qjit
    def first(p):
        return p

    assert type(first(Pair(1.0, 2.0))) is Pair
    assert type(first(Other(1.0, 2.0))) is Other
    assert first((1.0, 2.0)) == pytest.approx((1.0, 2.0))
    assert type(first((1.0, 2.0))) is tuple
