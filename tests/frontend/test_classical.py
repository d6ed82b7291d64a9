"""Classical tracing: numpy semantics on tracers, compared with numpy itself."""

from __future__ import annotations

import numpy as np
import pytest

import cofactor
from cofactor import for_loop, qjit

pytestmark = pytest.mark.needs_toolchain

X = np.array([0.3, -1.2, 2.5, 0.0])
Y = np.array([1.5, 0.7, -0.4, 2.0])
M = np.arange(6.0).reshape(2, 3) / 7.0 - 0.2

UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "sign": np.sign,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arctan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "exp": np.exp,
    "floor": np.floor,
    "ceil": np.ceil,
    "square": np.square,
    "expm1": np.expm1,
    "sqrt_abs": lambda x: np.sqrt(np.abs(x)),
    "log_1p": lambda x: np.log(1 + np.abs(x)),
    "log1p": lambda x: np.log1p(np.abs(x)),
    "arcsin": lambda x: np.arcsin(x / 3),
    "arccos": lambda x: np.arccos(x / 3),
    "pow_int": lambda x: x**3,
    "pow_float": lambda x: np.abs(x) ** 1.7,
    "rint": np.rint,
}

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "floordiv": np.floor_divide,
    "mod": np.mod,
    "power": lambda x, y: np.power(np.abs(x) + 1, y),
    "arctan2": np.arctan2,
    "minimum": np.minimum,
    "maximum": np.maximum,
    "less": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "where": lambda x, y: np.where(x > y, x, y * 2),
    "and": lambda x, y: np.logical_and(x > 0, y > 0),
    "or": lambda x, y: (x > 0) | (y > 1),
    "not": lambda x, y: ~(x > y),
}


def _assert_same(got, expected):
    assert np.shape(got) == np.shape(expected)
    np.testing.assert_allclose(np.asarray(got, dtype=complex), np.asarray(expected), atol=1e-12)


def test_unary_ufuncs_match_numpy():
    f = qjit(lambda x: {k: fn(x) for k, fn in UNARY.items()})
    got = f(X)
    for name, fn in UNARY.items():
        _assert_same(got[name], fn(X))


def test_binary_ufuncs_match_numpy():
    f = qjit(lambda x, y: {k: fn(x, y) for k, fn in BINARY.items()})
    got = f(X, Y)
    for name, fn in BINARY.items():
        _assert_same(got[name], fn(X, Y))
        assert np.asarray(got[name]).dtype == np.asarray(fn(X, Y)).dtype, name


def test_integer_arithmetic_matches_python():
    def fn(a, b):
        return a // b, a % b, a * b - 3, -a, abs(a), a / b, a**2

    f = qjit(fn)
    for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2)]:
        assert f(a, b) == fn(a, b)


REDUCTIONS_AND_SHAPES = {
    "sum": lambda m: np.sum(m),
    "sum0": lambda m: np.sum(m, axis=0),
    "prod1": lambda m: np.prod(m, axis=1),
    "mean": lambda m: np.mean(m),
    "mean1": lambda m: m.mean(axis=1),
    "max": lambda m: np.max(m),
    "min0": lambda m: np.min(m, axis=0),
    "dot": lambda m: np.dot(m, m.T),
    "matmul": lambda m: m.T @ m,
    "outer": lambda m: np.outer(m[0], m[1]),
    "reshape": lambda m: m.reshape(3, 2),
    "transpose": lambda m: np.transpose(m),
    "stack": lambda m: np.stack([m[0], m[1] * 2]),
    "concat": lambda m: np.concatenate([m[0], m[1]]),
    "zeros": lambda m: np.zeros(3) + m[0],
    "ones_like": lambda m: np.ones_like(m) * m,
    "eye": lambda m: np.eye(2) @ m,
    "arange": lambda m: np.arange(3) * m[1],
    "linspace": lambda m: np.linspace(m[0, 0], m[1, 2], 5),
    "slice": lambda m: m[:, 1:],
    "neg_index": lambda m: m[-1, ::-1],
    "array_literal": lambda m: np.array([m[0, 0], m[1, 1]]) * 2,
    "cumsum": lambda m: np.cumsum(m),
    "argmax": lambda m: np.argmax(m[1]),
}


def test_reductions_and_array_functions_match_numpy():
    f = qjit(lambda m: {k: fn(m) for k, fn in REDUCTIONS_AND_SHAPES.items()})
    got = f(M)
    for name, fn in REDUCTIONS_AND_SHAPES.items():
        _assert_same(got[name], fn(M))


def test_traced_indices():
    @qjit
    def f(v, m, i, j):
        return v[i], m[i], m[i, j], m[:, j], v[-1 - i]

    v, m = np.arange(5.0), np.arange(12.0).reshape(3, 4)
    for i, j in [(0, 0), (2, 3), (1, -1)]:
        got = f(v, m, i, j)
        expected = (v[i], m[i], m[i, j], m[:, j], v[-1 - i])
        for a, b in zip(got, expected, strict=True):
            _assert_same(a, b)
    assert f.compile_count == 1


def test_complex_values():
    @qjit
    def f(z, x):
        w = z * (1 + 2j) + x
        return w, np.abs(w), np.real(w), np.imag(w), np.conj(w) / (z + 3), np.exp(1j * x)

    z, x = np.array([1 + 1j, -0.5j]), 0.7
    got = f(z, x)
    w = z * (1 + 2j) + x
    for a, b in zip(
        got, (w, np.abs(w), w.real, w.imag, np.conj(w) / (z + 3), np.exp(1j * x)), strict=True
    ):
        _assert_same(a, b)


def test_python_loops_over_static_ranges_unroll():
    @qjit
    def f(x):
        total = 0.0
        for k in range(4):
            total = total + x**k
        return total

    assert f(2.0) == 15.0


def test_bool_int_and_structured_outputs():
    @qjit
    def f(x, flag, n):
        return {"a": [x, x > 1], "b": (n * 2, flag)}

    out = f(1.5, True, 3)
    assert out == {"a": [1.5, True], "b": (6, True)}
    assert isinstance(out["a"][1], np.bool_) and isinstance(out["b"][0], np.int64)


def test_pytree_arguments():
    @qjit
    def f(params):
        return params["w"] @ params["v"] + params["c"][0]

    got = f({"w": np.eye(2), "v": np.array([1.0, 2.0]), "c": (0.5, 1)})
    _assert_same(got, np.array([1.5, 2.5]))


def test_nested_qjit_inlines():
    inner = qjit(lambda x: x * 3)

    @qjit
    def outer(x):
        return inner(x) + 1

    assert outer(2.0) == 7.0
    assert inner.compile_count == 0


def test_in_place_assignment_with_static_index():
    @qjit
    def f(x):
        y = np.zeros(3)
        y = y + 0 * x  # traced
        y[1] = x
        return y

    _assert_same(f(4.0), np.array([0.0, 4.0, 0.0]))


def test_mlir_text_is_exposed():
    f = qjit(lambda x: np.sin(x) * 2)
    assert f.mlir is None
    f(1.0)
    assert "llvm.emit_c_interface" in f.mlir
    assert "llvm.func" in f.mlir_opt
    assert "define" in f.llvmir


def test_cofactor_exports():
    for name in ("qjit", "for_loop", "while_loop", "cond", "measure", "adjoint", "ctrl", "debug"):
        assert hasattr(cofactor, name)


def test_large_arrays_in_memory_are_processed_by_loops():
    @qjit
    def f(a, z, s):
        b = np.sin(a) * s + 1.0
        return (
            np.sum(b),
            b**2,
            np.real(z * np.conj(z)),
            np.abs(z),
            (a > 0.5).astype(float),
            a[3, 7],
            b[:2, 1],
            np.sum(z),
        )

    rng = np.random.default_rng(3)
    a = rng.uniform(size=(32, 16))
    z = rng.uniform(size=512) + 1j * rng.uniform(size=512)
    got = f(a, z, 0.5)
    b = np.sin(a) * 0.5 + 1.0
    expected = (np.sum(b), b**2, np.real(z * np.conj(z)), np.abs(z), (a > 0.5).astype(float),
                a[3, 7], b[:2, 1], np.sum(z))  # fmt: skip
    for g, e in zip(got, expected, strict=True):
        _assert_same(g, e)
    assert "scf.for" in f.mlir
    assert len(f.mlir) < 20000  # not one op per element


def test_assignment_with_traced_indices():
    @qjit
    def f(n, m):
        def body(i, v):
            v[i] = i * 2.0
            return v

        filled = for_loop(0, n, 1)(body)(np.zeros(5))
        a = np.zeros((3, 2)) + 0 * m
        a[m] = 7.0
        a[-1, m - 1] = 1.0
        return filled, a

    filled, a = f(3, 1)
    _assert_same(filled, [0.0, 2.0, 4.0, 0.0, 0.0])
    _assert_same(a, [[0.0, 0.0], [7.0, 7.0], [1.0, 0.0]])
    filled, a = f(5, -1)
    _assert_same(filled, [0.0, 2.0, 4.0, 6.0, 8.0])
    _assert_same(a, [[0.0, 0.0], [0.0, 0.0], [1.0, 7.0]])
