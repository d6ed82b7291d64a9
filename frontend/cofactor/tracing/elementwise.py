"""More elementwise numpy on tracers: ufuncs written as formulas over the core rules of
`numpy_rules` (so Enzyme differentiates them with the core rules' derivatives), and
`numpy.round`/`around`.

Importing this module registers its rules in `numpy_rules.UFUNC_RULES` / `FUNCTION_RULES`
(`numpy_api` imports it before any numpy function reaches a tracer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import f64, i1

from cofactor.errors import CompileError
from cofactor.tracing.numpy_rules import (
    FUNCTION_RULES,
    UFUNC_KINDS,
    UFUNC_RULES,
    as_tracer,
    cast_tracer,
)
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Tracer


def _abs(b, x):
    return b.generic("math.abs", [x], f64)


def _log1p(b, x):
    return UFUNC_RULES[np.log1p](b, "f", x)


def _exp2(b, k, x):
    return b.math(math.ExpOp, b.binary(arith.MulfOp, x, b.const(float(np.log(2.0)), f64)))


def _hypot(b, k, x, y):
    sq = b.binary(arith.AddfOp, b.binary(arith.MulfOp, x, x), b.binary(arith.MulfOp, y, y))
    return UFUNC_RULES[np.sqrt](b, "f", sq)


def _scale(factor: float):
    return lambda b, k, x: b.binary(arith.MulfOp, x, b.const(factor, f64))


def _arcsinh(b, k, x):
    # sign(x) * log(|x| + sqrt(x^2 + 1)): no cancellation for negative x
    ax = _abs(b, x)
    root = b.math(math.SqrtOp, b.binary(arith.AddfOp, b.binary(arith.MulfOp, x, x), _one(b)))
    mag = b.math(math.LogOp, b.binary(arith.AddfOp, ax, root))
    return b.select(b.cmpf("olt", x, b.const(0.0, f64)), b.unary(arith.NegfOp, mag), mag)


def _arccosh(b, k, x):
    root = b.math(math.SqrtOp, b.binary(arith.SubfOp, b.binary(arith.MulfOp, x, x), _one(b)))
    return b.math(math.LogOp, b.binary(arith.AddfOp, x, root))


def _arctanh(b, k, x):
    # (log1p(x) - log1p(-x)) / 2
    diff = b.binary(arith.SubfOp, _log1p(b, x), _log1p(b, b.unary(arith.NegfOp, x)))
    return b.binary(arith.MulfOp, diff, b.const(0.5, f64))


def _trunc(b, k, x):
    neg = b.cmpf("olt", x, b.const(0.0, f64))
    return b.select(neg, b.math(math.CeilOp, x), b.math(math.FloorOp, x))


def _cbrt(b, k, x):
    mag = b.powf(_abs(b, x), b.const(1.0 / 3.0, f64))
    return b.select(b.cmpf("olt", x, b.const(0.0, f64)), b.unary(arith.NegfOp, mag), mag)


def _logaddexp(b, k, x, y):
    # max(x, y) + log1p(exp(-|x - y|))
    hi = b.select(b.cmpf("ogt", x, y), x, y)
    gap = b.unary(arith.NegfOp, _abs(b, b.binary(arith.SubfOp, x, y)))
    return b.binary(arith.AddfOp, hi, _log1p(b, b.math(math.ExpOp, gap)))


def _one(b):
    return b.const(1.0, f64)


def _inf_check(kind: str):
    """isnan / isinf / isfinite: float compares; ints and bools are always finite."""

    def test(b, x):
        if kind == "nan":
            return b.cmpf("uno", x, x)
        inf = b.const(float("inf"), f64)
        return b.cmpf("oeq" if kind == "inf" else "one", _abs(b, x), inf)

    def rule(b, k, x):
        if k == "c":
            both = (test(b, x[0]), test(b, x[1]))
            op = arith.AndIOp if kind == "finite" else arith.OrIOp
            return b.binary(op, *both)
        if k != "f":
            return b.const(kind == "finite", i1)
        return test(b, x)

    return rule


_PI = float(np.pi)
UFUNC_RULES.update(
    {
        np.fabs: lambda b, k, x: _abs(b, x),
        np.exp2: _exp2,
        np.hypot: _hypot,
        np.deg2rad: _scale(_PI / 180.0),
        np.radians: _scale(_PI / 180.0),
        np.rad2deg: _scale(180.0 / _PI),
        np.degrees: _scale(180.0 / _PI),
        np.arcsinh: _arcsinh,
        np.arccosh: _arccosh,
        np.arctanh: _arctanh,
        np.trunc: _trunc,
        np.fix: _trunc,
        np.cbrt: _cbrt,
        np.logaddexp: _logaddexp,
        np.isnan: _inf_check("nan"),
        np.isinf: _inf_check("inf"),
        np.isfinite: _inf_check("finite"),
    }
)
for _uf in (
    np.fabs, np.exp2, np.hypot, np.deg2rad, np.radians, np.rad2deg, np.degrees, np.arcsinh,
    np.arccosh, np.arctanh, np.trunc, np.cbrt, np.logaddexp,
):  # fmt: skip
    UFUNC_KINDS[_uf] = "f"


def _round(a: Any, decimals: int = 0, out: Any = None) -> Tracer:
    """numpy.round: `rint(x * 10**d) / 10**d` (numpy's own formula, so the same ties)."""
    if out is not None:
        raise CompileError("numpy.round(..., out=...) on traced values: write `y = np.round(x)`")
    t = as_tracer(a)
    decimals = int(decimals)
    if t.dtype == COMPLEX:
        return _round(np.real(t), decimals) + 1j * _round(np.imag(t), decimals)
    if t.dtype in (INT, BOOL):
        if decimals >= 0:
            return t
        return cast_tracer(_round(cast_tracer(t, FLOAT), decimals), INT)
    if decimals == 0:
        return np.rint(t)
    if decimals > 0:
        scale = 10.0**decimals
        return np.true_divide(np.rint(np.multiply(t, scale)), scale)
    scale = 10.0 ** (-decimals)
    return np.multiply(np.rint(np.true_divide(t, scale)), scale)


FUNCTION_RULES.update({np.round: _round, np.around: _round})


def _real_if_close(a: Any, tol: float = 100) -> Tracer:
    """numpy.real_if_close picks its result's dtype from the values, which a traced value
    does not have yet; cofactor returns the real part of a traced complex array, which is
    what PennyLane does under Catalyst (`math.real` on the JAX path, e.g. when `qml.exp` of
    a Pauli word becomes a PauliRot)."""
    t = as_tracer(a)
    return np.real(t) if t.dtype == COMPLEX else t


def _nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None,
                neginf: Any = None) -> Tracer:  # fmt: skip
    t = as_tracer(x)
    if t.dtype == COMPLEX:
        parts = (np.real(t), np.imag(t))
        re, im = (_nan_to_num(p, nan=nan, posinf=posinf, neginf=neginf) for p in parts)
        return re + 1j * im
    if t.dtype != FLOAT:
        return t
    big = np.finfo(np.float64).max
    hi = big if posinf is None else float(posinf)
    lo = -big if neginf is None else float(neginf)
    t = np.where(np.isnan(t), float(nan), t)
    return np.where(np.isinf(t), np.where(t > 0, hi, lo), t)


FUNCTION_RULES.update({np.real_if_close: _real_if_close, np.nan_to_num: _nan_to_num})
