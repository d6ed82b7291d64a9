"""Numbers and crashes found by adversarial sweeps against numpy / Python (session 12):
integer division by zero (the machine's division traps: SIGFPE killed Python), `for_loop`
with a traced step (a negative one ran zero times; zero hung), `np.vdot` of complex values
(conjugated twice), argmax/argmin with NaN, and indexing with traced integer arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from isolated_run import run_isolated

import cofactor
from cofactor import for_loop

pytestmark = pytest.mark.needs_toolchain


def test_integer_division_by_zero_is_numpys_zero_not_a_crash():
    # in a subprocess: a regression is SIGFPE, which would end the test run
    out = run_isolated(
        """
        import warnings
        warnings.simplefilter("ignore")
        a = np.array([7, -7, 5, np.iinfo(np.int64).min])
        b = np.array([0, 0, -2, -1])
        ops = [lambda a, b: a // b, lambda a, b: a % b, lambda a, b: np.floor_divide(a, b),
               lambda a, b: np.remainder(a, b), lambda a, b: np.fmod(a, b),
               lambda a, b: divmod(a, b)[0]]
        for op in ops:
            assert np.array_equal(cofactor.qjit(op)(a, b), op(a, b)), op(a, b)
        # shifts by 64 or more, or by a negative amount: numpy's 0 / -1, no undefined C shift
        s = np.array([1, 64, -1, 70])
        for op in (lambda a, s: a << s, lambda a, s: a >> s):
            assert np.array_equal(cofactor.qjit(op)(a, s), op(a, s)), op(a, s)
        big_a, big_b = np.arange(-10, 10), np.array([0, 3, -3, 0, 1] * 4)  # the loop path
        assert np.array_equal(cofactor.qjit(lambda a, b: a // b)(big_a, big_b), big_a // big_b)
        assert np.array_equal(cofactor.qjit(lambda a, b: a % b)(big_a, big_b), big_a % big_b)
        print("ok")
        """,
        timeout=300,
    )
    assert out.strip() == "ok"


def _loop(x, lo, hi, step):
    @for_loop(lo, hi, step)
    def body(i, acc):
        return acc * 1.5 + i

    return body(x)


def _python(x, lo, hi, step):
    for i in range(lo, hi, step):
        x = x * 1.5 + i
    return x


def test_for_loop_with_traced_bounds_and_step_follows_range():
    compiled = cofactor.qjit(_loop)
    for lo, hi, step in itertools.product([-4, 0, 7], [-5, 0, 8], [-3, -1, 1, 5]):
        assert compiled(0.25, lo, hi, step) == _python(0.25, lo, hi, step), (lo, hi, step)
    assert compiled.compile_count == 1


def test_for_loop_traced_zero_step_raises_range_error():
    with pytest.raises(ValueError, match="step must not be zero"):
        cofactor.qjit(_loop)(0.25, 0, 3, 0)


def test_vdot_conjugates_its_first_operand_once():
    v = np.array([0.3, -1.1, 2.5, 0.0, 4.0])

    def f(a):
        z = a + 1j * a[::-1]
        return np.vdot(z, z), np.vdot(z, a * 2j), np.vdot(np.outer(a, a) * 1j, np.outer(a, a))

    for got, expected in zip(cofactor.qjit(f)(v), f(v), strict=True):
        assert np.allclose(got, expected, rtol=1e-12)  # was the unconjugated sum(z * w)


def test_argmax_argmin_return_the_first_nan_as_numpy():
    def f(a):
        b = np.where(a > 2, np.nan, a)
        return np.argmax(b), np.argmin(b), np.argmax(b.reshape(1, -1), axis=1)

    for v in (np.array([0.3, -1.1, 2.5, 0.0, 4.0]), np.arange(40.0) - 5):
        for got, expected in zip(cofactor.qjit(f)(v), f(v), strict=True):
            assert np.array_equal(got, expected)


def test_indexing_with_a_traced_integer_array_is_numpys_take():
    x = np.array([[0.1, -0.7, 0.3], [1.2, 0.5, -2.0]])
    v = np.array([0.3, -1.1, 2.5, 0.0, 4.0])

    def f(a, m, i):
        b = a.copy()
        b[i] = a[:3] * 2  # repeated indices: the last one wins
        c = a.copy()
        c[i] += 1.0  # adds once per distinct index, as numpy
        d = a.copy()
        d[d > 0] = 0.0
        j = i % 3 - 1  # [0, 1, 1]: columns of m
        return a[i], a[i.reshape(3, 1)], m[:, j], m[None, :, j], b, c, d

    i = np.array([1, 2, -4])
    for got, expected in zip(cofactor.qjit(f)(v, x, i), f(v, x, i), strict=True):
        assert got.shape == expected.shape
        assert np.allclose(got, expected, rtol=1e-12)
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 0 with size 5"):
        cofactor.qjit(lambda a, i: a[i * 3])(v, np.array([2, 0, -1]))
    grad = cofactor.qjit(cofactor.grad(lambda y, i: np.sum(y[i] ** 2)))(v, i)
    expected = np.zeros(5)
    np.add.at(expected, i % 5, 2 * v[i])
    assert np.allclose(grad, expected, rtol=1e-12)
    with pytest.raises(cofactor.CompileError, match="np.where"):
        cofactor.qjit(lambda a: a[a > 0])(v)


def test_divmod_of_traced_floats():
    v = np.array([0.3, -1.1, 2.5, 0.0])
    results = cofactor.qjit(lambda a: divmod(a, 0.4))(v)
    for got, expected in zip(results, divmod(v, 0.4), strict=True):
        assert np.allclose(got, expected, rtol=1e-12)


def test_autograph_converts_conditional_expressions():
    import pennylane as qml

    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RX(x, 0) if x > 0 else qml.RY(x, 0)  # noqa: B018 (an operator per branch)
        qml.RZ(x if x > 0 else 2 * x, 0)
        return qml.expval(qml.PauliY(0))

    compiled = cofactor.qjit(circuit, autograph=True)
    for x in (0.5, -0.5):
        assert np.isclose(compiled(x), circuit(x), rtol=1e-12)
    pair = cofactor.qjit(lambda x, n: (x * 2, n) if n > 1 else (x, n + 1), autograph=True)
    assert pair(1.5, 3) == (3.0, 3) and pair(1.5, 0) == (1.5, 1)


def test_at_updates_apply_once_per_repeated_index_as_jax():
    v = np.array([0.3, -1.1, 2.5, 0.0, 4.0])

    def f(a, i):
        return (
            a.at[i].add(1.0),  # traced index array
            a.at[np.array([1, -4, 3])].add(1.0),  # static, 1 and -4 the same element
            a.at[[1, 1]].multiply(a[:2]),
            a.reshape(5, 1).at[np.array([0, 0, 2])].add(np.array([[1.0], [2.0], [3.0]])),
        )

    def expected(a, i):
        out = []
        for idx, op, val in (
            (i, np.add, 1.0),
            (np.array([1, -4, 3]), np.add, 1.0),
            ([1, 1], np.multiply, a[:2]),
        ):
            b = a.copy()
            op.at(b, idx, val)  # numpy's unbuffered update: JAX's scatter semantics
            out.append(b)
        b = a.reshape(5, 1).copy()
        np.add.at(b, np.array([0, 0, 2]), np.array([[1.0], [2.0], [3.0]]))
        return out + [b]

    i = np.array([1, 1, 3])
    for got, want in zip(cofactor.qjit(f)(v, i), expected(v, i), strict=True):
        assert np.allclose(got, want, rtol=1e-12)  # was: added once per distinct index


def test_numpy_keywords_that_change_the_numbers_are_honoured():
    # they used to be dropped silently: numpy's numbers without the keyword
    v = np.array([0.3, -1.1, 2.5, 0.0, 4.0])
    x = np.array([[0.1, -0.7, 0.3], [1.2, 0.5, -2.0]])

    def f(a, m):
        o = np.zeros(3)
        np.sum(m, axis=0, out=o)
        c = np.zeros(5)
        np.cumsum(a, out=c)
        return (
            np.sum(a, where=a > 0),
            np.mean(a, where=a > 0),
            np.max(a, initial=10.0),
            np.min(a, where=a > 0, initial=3.0),
            np.sum(a, initial=1.5),
            np.prod(a, where=a != 0),
            np.cumsum(a, dtype=int),
            np.mean(a * 3, dtype=int),
            m.sum(axis=1, where=m > 0),
            np.linspace(a[0], a[2], 4, retstep=True),
            o,
            c,
        )

    got, expected = cofactor.qjit(f)(v, x), f(v, x)
    for g, e in zip(got[:-3], expected[:-3], strict=True):
        assert np.asarray(g).dtype == np.asarray(e).dtype
        assert np.allclose(g, e, rtol=1e-12)
    for g, e in zip((*got[-3], *got[-2:]), (*expected[-3], *expected[-2:]), strict=True):
        assert np.allclose(g, e, rtol=1e-12)
    with pytest.raises(ValueError, match="'initial'"):
        cofactor.qjit(lambda a: np.max(a, where=a > 0))(v)


def test_ufunc_and_more_function_keywords_are_honoured():
    v = np.array([0.3, -1.1, 2.5, 0.0, 4.0])
    x = np.array([[0.1, -0.7, 0.3], [1.2, 0.5, -2.0]])

    def f(a, m):
        return (
            np.add(a, 1.5, dtype=int, casting="unsafe"),
            np.multiply.reduce(m, axis=0, where=m > 0),
            np.maximum.reduce(m, axis=1, where=m < 1, initial=-5.0),
            np.add.reduce(a, dtype=int),
            np.all(m > 0, axis=1, where=m > -1),
            np.var(m, axis=1, where=m > 0),
            np.std(m, axis=0, where=m > -1, keepdims=True),
            np.ones_like(a, shape=(2, 3)),
            np.full_like(a, a[1], shape=(2,)),
            np.trace(m * 3, dtype=int),
        )

    for got, expected in zip(cofactor.qjit(f)(v, x), f(v, x), strict=True):
        assert np.asarray(got).dtype == np.asarray(expected).dtype
        assert np.shape(got) == np.shape(expected)
        assert np.allclose(got, expected, rtol=1e-12)
    with pytest.raises(cofactor.CompileError, match="where="):
        cofactor.qjit(lambda a: np.add(a, 1.0, where=a > 0))(v)


def test_flatten_takes_numpys_order():
    x = np.array([[0.1, -0.7, 0.3], [1.2, 0.5, -2.0]])
    got = cofactor.qjit(lambda a: (a.flatten("F"), a.flatten(order="C")))(x)
    assert np.array_equal(got[0], x.flatten("F")) and np.array_equal(got[1], x.flatten())
