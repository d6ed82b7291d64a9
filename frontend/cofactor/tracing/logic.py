"""Truth-valued numpy on tracers: `isclose`, `allclose`, `array_equal`, `any`, `all`,
`count_nonzero`, `iscomplex`. Their results are traced bools (0-d or arrays), usable in
`cofactor.cond`, `np.where` and arithmetic; Python's `if` on them asks for a concrete value
and raises cofactor's CompileError that points to `cond`.

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.tracing.numpy_rules import (
    FUNCTION_RULES,
    _wrap,
    as_tracer,
    cast_tracer,
    const_scalar,
    scalar_ufunc,
)
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Tracer


def _isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """numpy's formula: |a - b| <= atol + rtol * |b| where b is finite, or a == b."""
    x, y = as_tracer(a), as_tracer(b)
    if x.dtype not in (FLOAT, COMPLEX):
        x = cast_tracer(x, FLOAT)
    if y.dtype not in (FLOAT, COMPLEX):
        y = cast_tracer(y, FLOAT)
    close = np.less_equal(np.abs(x - y), atol + rtol * np.abs(y))
    result = np.logical_or(np.logical_and(close, np.isfinite(y)), np.equal(x, y))
    if equal_nan:
        result = np.logical_or(result, np.logical_and(np.isnan(x), np.isnan(y)))
    return result


def _truth(t: Tracer) -> Tracer:
    return t if t.dtype == BOOL else np.not_equal(t, 0)


def _fold(op: np.ufunc, identity: bool):
    """any / all over an axis (or everything), keepdims as numpy."""

    def rule(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any):
        t = _truth(as_tracer(a))
        elems = t.elems
        axes = tuple(range(t.ndim)) if axis is None else tuple(np.atleast_1d(axis))
        axes = tuple(ax % t.ndim for ax in axes) if t.ndim else ()
        fn = np.frompyfunc(lambda x, y: scalar_ufunc(op, x, y), 2, 1)
        for ax in sorted(axes, reverse=True):
            if elems.shape[ax] == 0:
                shape = elems.shape[:ax] + elems.shape[ax + 1 :]
                elems = np.full(shape, identity, dtype=object)
                elems = np.frompyfunc(lambda v: const_scalar(bool(v), BOOL), 1, 1)(elems)
                elems = elems if isinstance(elems, np.ndarray) else np.asarray(elems, object)
            else:
                elems = fn.reduce(elems, axis=ax)
                elems = elems if isinstance(elems, np.ndarray) else _0d(elems)
            if keepdims:
                elems = np.expand_dims(elems, ax)
        return _wrap(elems)

    return rule


def _0d(x: Any) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = x
    return out


_any = _fold(np.logical_or, False)
_all = _fold(np.logical_and, True)


def _allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    return _all(_isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    x, y = as_tracer(a1), as_tracer(a2)
    if x.shape != y.shape:
        return False  # numpy: a Python False for different shapes
    same = np.equal(x, y)
    if equal_nan:
        same = np.logical_or(same, np.logical_and(np.isnan(x), np.isnan(y)))
    return _all(same)


def _array_equiv(a1: Any, a2: Any) -> Any:
    x, y = as_tracer(a1), as_tracer(a2)
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return False
    return _all(np.equal(x, y))


def _count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Tracer:
    t = cast_tracer(_truth(as_tracer(a)), INT)
    return np.sum(t, axis=axis, keepdims=keepdims)


def _iscomplex(x: Any) -> Tracer:
    return np.not_equal(np.imag(as_tracer(x)), 0)


def _isreal(x: Any) -> Tracer:
    return np.equal(np.imag(as_tracer(x)), 0)


FUNCTION_RULES.update(
    {
        np.isclose: _isclose,
        np.allclose: _allclose,
        np.array_equal: _array_equal,
        np.array_equiv: _array_equiv,
        np.any: _any,
        np.all: _all,
        np.count_nonzero: _count_nonzero,
        np.iscomplex: _iscomplex,
        np.isreal: _isreal,
        np.iscomplexobj: lambda x: as_tracer(x).dtype == COMPLEX,
        np.isrealobj: lambda x: as_tracer(x).dtype != COMPLEX,
    }
)
