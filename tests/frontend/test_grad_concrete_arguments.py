"""Arguments that `grad`/`jacobian`/`jvp` do not differentiate keep their Python values, as
in JAX: a static argument of qjit (`qjit(grad(f), static_argnums=1)(x, 3)`), a literal
(`grad(f)(x, 2)`) or a string stays what it is inside the differentiated function, so
`range(n)`, `if mode == "sin"` and Python containers of them work. They used to become
traced values: `range(n)` raised "A traced value was used where Python needs a concrete
int ... or mark the argument static with qjit(static_argnums=...)" although the argument
was static, and a string argument could not be traced at all.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain

pnp = qml.numpy
_dev = qml.device("default.qubit", wires=2)


@qml.qnode(_dev)
def _layers(w, n):
    for i in range(n):
        qml.RX(w * (i + 1), 0)
        qml.CNOT([0, 1])
    return qml.expval(qml.Z(1))


def _sine_chain(x, n, sin=np.sin):
    y = x
    for _ in range(n):
        y = sin(y) * 1.5
    return y


def test_static_int_argument_of_grad_stays_an_int():
    compiled = cofactor.qjit(cofactor.grad(_sine_chain), static_argnums=1)
    reference = qml.grad(lambda x: _sine_chain(x, 3, sin=pnp.sin))
    expected = reference(pnp.array(0.3, requires_grad=True))
    assert np.isclose(compiled(0.3, 3), expected, rtol=1e-12)


def test_qnode_with_a_literal_layer_count_under_grad():
    @cofactor.qjit
    def workflow(w):
        return cofactor.grad(_layers)(w, 3)

    expected = qml.grad(lambda w: _layers(w, 3))(pnp.array(0.3, requires_grad=True))
    assert np.isclose(workflow(0.3), expected, rtol=1e-10)


def test_string_tuple_and_function_arguments_pass_through():
    def f(x, mode, counts, fns):
        y = x
        for _ in range(counts[0]):
            y = fns[0](y) if mode == "sin" else np.cos(y)
        return y * (2.0 if counts[1] is None else counts[1])

    compiled = cofactor.qjit(cofactor.grad(f), static_argnums=(1, 2, 3))
    expected = 2.0 * np.cos(np.sin(0.3)) * np.cos(0.3)
    assert np.isclose(compiled(0.3, "sin", (2, None), (np.sin,)), expected, rtol=1e-12)


def test_jacobian_and_jvp_with_a_static_count():
    jac = cofactor.qjit(cofactor.jacobian(lambda x, n: x[:n] * 2.0), static_argnums=1)
    assert np.array_equal(jac(np.ones(3), 2), 2.0 * np.eye(3)[:2])

    @cofactor.qjit(static_argnums=1)
    def tangent(x, n):
        return cofactor.jvp(lambda a, m: a**m, (x, n), (1.0,), argnums=0)

    value, derivative = tangent(0.5, 3)
    assert np.isclose(value, 0.125) and np.isclose(derivative, 0.75)


def test_differentiated_integer_argument_is_still_refused():
    with pytest.raises(cofactor.DifferentiableCompileError, match="argument 1 .* int64"):
        cofactor.qjit(cofactor.grad(lambda x, n: x * n, argnums=1))(0.5, 3)


def test_arguments_without_leaves_next_to_concrete_ones():
    # None and () have no leaves: their place among the inputs is still counted right
    assert cofactor.qjit(cofactor.grad(lambda x, c: x * 2 if c is None else x))(0.5, None) == 2
    assert cofactor.qjit(cofactor.grad(lambda x, c, n: x * n))(0.5, None, 3) == 3
    assert cofactor.qjit(cofactor.grad(lambda c, x: x * 3, argnums=1))((), 0.5) == 3
