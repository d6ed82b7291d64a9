"""A third batch of programs shaped like PennyLane's demos and docs and Catalyst's docs
(error mitigation, autograph control, templates, kernels, optimisation loops): uncompiled
PennyLane's numbers under qjit, or a clear error that names the operation and says what to
do."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import CompileError

pytestmark = pytest.mark.needs_toolchain


def _lightning(n):
    return qml.device("lightning.qubit", wires=n)


def _default(n):
    return qml.device("default.qubit", wires=n)


def _assert_matches_default_qubit(body, args, wires, atol=1e-10):
    got = cofactor.qjit(qml.QNode(body, _lightning(wires)))(*args)
    expected = qml.QNode(body, _default(wires))(*args)
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=atol)


# --- catalyst.mitigate_with_zne -------------------------------------------------------------
def _zne_circuit(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(2 * x, 1)
    return qml.expval(qml.Z(0) @ qml.Z(1))


def _zne_two_expvals(w):
    qml.StronglyEntanglingLayers(w, wires=[0, 1])
    return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.X(1))


def test_mitigate_with_zne_global_and_local_folding_give_the_noiseless_value():
    # noiseless simulator: every folded circuit gives the circuit's value; Catalyst's default
    # extrapolation (a polynomial through all points) returns it
    circuit = qml.QNode(_zne_circuit, _lightning(2))
    expected = qml.QNode(_zne_circuit, _default(2))(0.3)

    @cofactor.qjit
    def mitigated(x):
        g = cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3, 5])(x)
        loc = cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3], folding="local-all")(x)
        return g, loc, cofactor.grad(cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3]))(x)

    g, loc, dg = mitigated(0.3)
    np.testing.assert_allclose([g, loc], [expected, expected], atol=1e-10)
    expected_grad = qml.grad(qml.QNode(_zne_circuit, _default(2)))(qml.numpy.array(0.3))
    np.testing.assert_allclose(dg, expected_grad, atol=1e-8)


def test_mitigate_with_zne_extrapolators_and_several_expectation_values():
    w = np.linspace(0.1, 1.7, 12).reshape(2, 2, 3)
    expected = qml.QNode(_zne_two_expvals, _default(2))(w)
    circuit = qml.QNode(_zne_two_expvals, _lightning(2))
    zne = cofactor.mitigate_with_zne(
        scale_factors=[1, 3, 5],
        extrapolate=qml.noise.poly_extrapolate,
        extrapolate_kwargs={"order": 1},
        folding="local-all",
    )
    got = cofactor.qjit(lambda w: zne(circuit)(w))(w)
    assert isinstance(got, tuple) and len(got) == 2
    np.testing.assert_allclose(got, expected, atol=1e-9)
    # exponential_extrapolate (Catalyst's doc example) on the three noiseless values
    results = np.array([qml.QNode(_zne_circuit, _default(2))(0.3)] * 3)
    exp = cofactor.qjit(
        lambda x: cofactor.mitigate_with_zne(
            qml.QNode(_zne_circuit, _lightning(2)),
            scale_factors=[1, 3, 5],
            extrapolate=qml.noise.exponential_extrapolate,
            extrapolate_kwargs={"asymptote": 2.0},
        )(x)
    )(0.3)
    expected_exp = qml.noise.exponential_extrapolate([1, 3, 5], results, asymptote=2.0)
    np.testing.assert_allclose(exp, expected_exp, atol=1e-9)


def test_mitigate_with_zne_refusals_name_the_problem():
    circuit = qml.QNode(_zne_circuit, _lightning(2))
    with pytest.raises(ValueError, match=r"found 2 in scale_factors.*odd positive integers"):
        cofactor.mitigate_with_zne(circuit, scale_factors=[1, 2])
    with pytest.raises(ValueError, match=r"folding='local-random' is not supported"):
        cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3], folding="local-random")
    with pytest.raises(CompileError, match=r"scale_factors are traced.*static"):
        cofactor.qjit(lambda x, s: cofactor.mitigate_with_zne(circuit, scale_factors=s)(x))(
            0.3, np.array([1, 3])
        )

    def looped(x):
        cofactor.for_loop(0, 2, 1)(lambda i: qml.RX(x, 0))()
        return qml.expval(qml.Z(0))

    with pytest.raises(CompileError, match=r"mitigate_with_zne_global_folding.*for_loop"):
        cofactor.qjit(
            lambda x: cofactor.mitigate_with_zne(
                qml.QNode(looped, _lightning(1)), scale_factors=[1, 3]
            )(x)
        )(0.3)


# --- catalyst.disable_autograph ---------------------------------------------------------------
def _cubic_or_square(x):
    if x > 5:
        return x**2
    return x**3


def test_disable_autograph_as_decorator_and_context_manager():
    @cofactor.disable_autograph
    def six_squared():
        x = 6
        if x > 5:
            y = x**2
        else:
            y = x**3
        return y

    @cofactor.qjit(autograph=True)
    def g(x, n: int):
        for _ in range(n):
            x = x + six_squared()
        return x

    @cofactor.qjit(autograph=True)
    def h(x):
        y = 0.4
        with cofactor.disable_autograph:
            y += _cubic_or_square(6)
        return y + x

    assert g(0.4, 6) == pytest.approx(216.4)
    assert h(1.0) == pytest.approx(37.4)


@pytest.mark.parametrize("which", ["cofactor", "pennylane"])
def test_calls_under_disable_autograph_are_not_converted(which):
    from pennylane.capture.autograph import disable_autograph as pennylane_disable

    disable = cofactor.disable_autograph if which == "cofactor" else pennylane_disable

    @cofactor.qjit(autograph=True)
    def f(x):
        with disable:
            return _cubic_or_square(x)  # a Python `if` on a traced value: not converted

    with pytest.raises(CompileError, match="concrete bool"):
        f(1.0)
    # and outside the block conversion goes on
    assert cofactor.qjit(autograph=True)(lambda x: _cubic_or_square(x))(6.0) == 36.0
