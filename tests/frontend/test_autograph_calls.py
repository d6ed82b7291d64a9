"""autograph=True converts the user functions the compiled function calls (recursively), as
Catalyst does with malt's converted_call; library code (PennyLane, numpy) runs as written."""

from __future__ import annotations

import functools

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import CompileError, autograph, for_loop, qjit, vmap


def helper(x):
    if x > 0:
        y = x * 2.0
    else:
        y = -x
    return y


def nested(x):
    return helper(x) + 1.0  # a call from a called function is converted too


def looped(n, x):
    s = 0.0
    for i in range(n):  # a traced bound inside a called function
        s = s + x * (i + 1)
    return s


class Scaler:
    def __init__(self, k):
        self.k = k

    def scale(self, x):
        if x > 1.0:
            return x * self.k
        return x

    def __call__(self, x):
        if x < 0.0:
            return -x
        return x


@pytest.mark.parametrize("x", [0.7, -1.3])
def test_called_function_with_if_on_traced_value(x):
    @qjit(autograph=True)
    def f(x):
        return helper(x) + nested(x)

    assert f(x) == pytest.approx(helper(x) + nested(x))
    assert f.compile_count == 1


def test_called_function_with_traced_range():
    @qjit(autograph=True)
    def f(n, x):
        return looped(n, x)

    for n in (0, 3, 5):
        assert f(n, 0.5) == pytest.approx(looped(n, 0.5))
    assert f.compile_count == 1


def test_methods_partials_and_callable_objects():
    s = Scaler(3.0)
    shifted = functools.partial(lambda a, b: helper(a - b), b=1.0)

    @qjit(autograph=True)
    def f(x):
        return s.scale(x) + s(x) + shifted(x)

    for x in (2.0, 0.5, -4.0):
        assert f(x) == pytest.approx(s.scale(x) + s(x) + helper(x - 1.0))


def test_helper_called_inside_a_qnode_matches_pennylane():
    dev = qml.device("default.qubit", wires=2)

    def layer(x):
        if x > 0.5:
            qml.RX(x, 0)
            qml.CNOT([0, 1])
        else:
            qml.RY(x, 1)

    def circuit(x):
        layer(x)
        layer(x * 0.5)
        return qml.expval(qml.Z(0)), qml.expval(qml.Z(1))

    compiled = qjit(qml.QNode(circuit, dev), autograph=True)
    ref = qml.QNode(circuit, dev)
    for x in (0.9, 0.3, 1.4):
        assert np.allclose(compiled(x), ref(x), atol=1e-10)
    assert compiled.compile_count == 1


def test_qnode_called_from_the_compiled_function_is_converted():
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev)
    def circuit(x):
        if x > 0.0:
            qml.RX(x, 0)
        else:
            qml.RY(-x, 0)
        return qml.expval(qml.Z(0))

    @qjit(autograph=True)
    def f(x):
        return circuit(x) * 2.0

    for x in (0.4, -0.8):
        assert f(x) == pytest.approx(2.0 * circuit(x))


def test_library_functions_are_not_converted():
    assert not autograph._is_user_code(np.sin)
    assert not autograph._is_user_code(qml.RX)
    assert not autograph._is_user_code(functools.reduce)
    assert autograph._is_user_code(helper)

    @qjit(autograph=True)
    def f(x):
        return np.sum(np.array([x, 2.0 * x])) + qml.math.sin(x)

    assert f(0.3) == pytest.approx(0.9 + np.sin(0.3))


def _chain_and(p):
    return p > 0.0 and p < 1.0 and p <= 2.0


def _chain_or(p):
    return p > 1.0 or p < 0.0 or p == 0.5


def _negate(p):
    return not p > 1.0


def _and(a, b):
    return a and b


def _or(a, b):
    return a or b


def _not(a):
    return not a


@pytest.mark.parametrize("fn", [_chain_and, _chain_or, _negate])
@pytest.mark.parametrize("p", [-0.5, 0.5, 1.5])
def test_logical_operators_on_traced_values_match_python(fn, p):
    """`and`/`or`/`not` on traced bools (Catalyst's autograph: traced operands -> numpy's
    logical_and/or/not, a traced bool), with the values uncompiled Python gives."""
    assert bool(qjit(autograph=True)(fn)(p)) == fn(p)


def test_logical_operators_on_traced_arrays_are_elementwise():
    a, b = np.array([0, 1, 0]), np.array([1, 1, 0])
    np.testing.assert_array_equal(qjit(autograph=True)(_and)(a, b), np.logical_and(a, b))
    np.testing.assert_array_equal(qjit(autograph=True)(_or)(a, b), np.logical_or(a, b))
    np.testing.assert_array_equal(qjit(autograph=True)(_not)(a), np.logical_not(a))


@pytest.mark.parametrize("s", [True, False])
def test_logical_operators_with_a_static_operand(s):
    def static_first(d):
        return s and d, s or d

    def traced_first(d):
        return d and s

    got = qjit(autograph=True)(static_first)(True)
    assert tuple(bool(v) for v in got) == (s and True, s or True)
    # a traced operand first with a Python bool: numpy's logical op (the same truth value as
    # Python's `d and s`; `while x < 0.5 and n < 3:` tests it with n still a Python int)
    for d in (True, False):
        assert bool(qjit(autograph=True)(traced_first)(d)) == bool(d and s)

    def traced_and_number(d):
        return d and 5

    with pytest.raises(CompileError, match="concrete bool"):
        qjit(autograph=True)(traced_and_number)(True)


class _Piecewise:
    def __call__(self, x):
        if x > 2.0:  # converted: x is traced
            return x**2
        return -x


def test_autograph_of_a_callable_object_and_of_cofactor_callables():
    """qjit(obj, autograph=True) of a callable object: a user's __call__ is converted (as
    Catalyst converts a lambda calling it); a vmap / cond / for_loop object runs as itself."""
    f = qjit(autograph=True)(_Piecewise())
    assert f(3.0) == _Piecewise()(3.0) and f(1.0) == _Piecewise()(1.0)

    def add(d):
        return d["x"] + d["y"]

    batched = qjit(vmap(add, in_axes=({"x": None, "y": 0},)), autograph=True)
    np.testing.assert_array_equal(batched({"x": 1, "y": np.arange(5)}), np.arange(1, 6))

    @for_loop(0, 6, 1)
    def loop(_, agg):
        return agg + 5

    assert qjit(loop, autograph=True)(0) == 30


def test_a_variable_left_undefined_by_a_branch_is_an_autograph_error():
    """Catalyst's (and PennyLane's) AutoGraphError, which is also a CompileError."""

    def f(x):
        if x > 0.0:
            y = x
        return y  # noqa: F821 - undefined on the false path

    with pytest.raises(qml.exceptions.AutoGraphError, match="did not define a value for"):
        qjit(autograph=True)(f)(1.0)
    assert issubclass(cofactor.AutoGraphError, CompileError)
