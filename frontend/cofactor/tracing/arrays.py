"""Array-level numpy functions on tracers that build on the core rules: statistics (`var`,
`std`, `ptp`, `average`), running products and differences, triangles, `append`, `column_stack`,
and the `*_like` constructors.

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileValueError
from cofactor.tracing.numpy_rules import (
    FUNCTION_RULES,
    REFUSED_FUNCTIONS,
    _wrap,
    as_tracer,
    cast_tracer,
    normalize_dtype,
)
from cofactor.tracing.tracer import BOOL, COMPLEX, INT, Tracer


def _var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
         keepdims: bool = False, **kw: Any) -> Tracer:  # fmt: skip
    t = as_tracer(a)
    if dtype is not None:
        t = cast_tracer(t, normalize_dtype(dtype))
    n = t.size if axis is None else int(np.prod([t.shape[i] for i in np.atleast_1d(axis)]))
    dev = t - np.mean(t, axis=axis, keepdims=True)
    sq = np.real(dev * np.conj(dev)) if t.dtype == COMPLEX else dev * dev
    return np.sum(sq, axis=axis, keepdims=keepdims) / float(n - ddof)


def _std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
         keepdims: bool = False, **kw: Any) -> Tracer:  # fmt: skip
    return np.sqrt(_var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def _cumprod(a: Any, axis: Any = None, dtype: Any = None, **kw: Any) -> Tracer:
    t = as_tracer(a)
    if dtype is not None:
        t = cast_tracer(t, normalize_dtype(dtype))
    if t.dtype == BOOL:
        t = cast_tracer(t, INT)
    elems = t.elems.reshape(-1) if axis is None else t.elems
    return _wrap(np.cumprod(elems, axis=0 if axis is None else axis))


def _diff(a: Any, n: int = 1, axis: int = -1, **kw: Any) -> Tracer:
    if kw.get("prepend") is not None or kw.get("append") is not None:
        raise CompileError("numpy.diff with prepend/append: concatenate first, then diff")
    t = as_tracer(a)
    for _ in range(n):
        hi = np.take(t, range(1, t.shape[axis]), axis=axis)
        lo = np.take(t, range(0, t.shape[axis] - 1), axis=axis)
        t = np.not_equal(hi, lo) if t.dtype == BOOL else hi - lo
    return t


def _triangle(np_fn: Any):
    def rule(m: Any, k: int = 0) -> Tracer:
        t = as_tracer(m)
        mask = np_fn(np.ones(t.shape[-2:], dtype=bool), k)
        return np.where(mask, t, np.zeros((), dtype=t.dtype))

    return rule


def _ptp(a: Any, axis: Any = None, keepdims: bool = False, **kw: Any) -> Tracer:
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


def _average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
             keepdims: bool = False) -> Any:  # fmt: skip
    t = as_tracer(a)
    if weights is None:
        avg = np.mean(t, axis=axis, keepdims=keepdims)
        total = np.full(np.shape(avg), float(t.size // max(np.size(avg), 1)))
    else:
        w = weights
        if np.shape(w) != t.shape:  # numpy: 1-d weights along the one axis given
            if axis is None or np.ndim(w) != 1 or np.ndim(axis) != 0:
                raise CompileValueError(
                    "numpy.average: weights of another shape than the array need one int axis "
                    "and a 1-d weights array along it"
                )
            shape = [1] * t.ndim
            shape[axis] = -1
            w = np.reshape(w, shape)
        w = np.broadcast_to(w, t.shape)
        total = np.sum(w, axis=axis, keepdims=keepdims)
        avg = np.sum(t * w, axis=axis, keepdims=keepdims) / total
    return (avg, total) if returned else avg


def _append(arr: Any, values: Any, axis: Any = None) -> Tracer:
    if axis is None:  # numpy: both flattened
        return np.concatenate([np.ravel(arr), np.ravel(values)])
    return np.concatenate([arr, values], axis=axis)


def _column_stack(tup: Any) -> Tracer:
    # numpy: 1-d arrays become columns, the others are stacked as they are
    cols = [np.reshape(c, (-1, 1)) if np.ndim(c) < 2 else c for c in tup]
    return np.concatenate(cols, axis=1)


def _full_like(a: Any, fill_value: Any, dtype: Any = None, **kw: Any) -> Any:
    t = as_tracer(a)
    d = normalize_dtype(dtype) if dtype is not None else t.dtype
    if isinstance(fill_value, Tracer) or not isinstance(fill_value, np.ndarray | float | int |
                                                          complex | bool | np.generic):  # fmt: skip
        return cast_tracer(np.broadcast_to(as_tracer(fill_value), t.shape), d)
    return np.full(t.shape, fill_value, dtype=d)


def _empty_like(a: Any, dtype: Any = None, **kw: Any) -> np.ndarray:
    # zeros, so that reading an element before writing it gives a defined value
    t = as_tracer(a)
    return np.zeros(t.shape, dtype=normalize_dtype(dtype) if dtype is not None else t.dtype)


_SHAPE_HINT = "its result's shape or order depends on run-time values. Use np.where with a mask"
FUNCTION_RULES.update(
    {
        np.var: _var,
        np.std: _std,
        np.cumprod: _cumprod,
        np.diff: _diff,
        np.triu: _triangle(np.triu),
        np.tril: _triangle(np.tril),
        np.full_like: _full_like,
        np.ptp: _ptp,
        np.average: _average,
        np.append: _append,
        np.column_stack: _column_stack,
        np.empty_like: _empty_like,
    }
)
_SORT_HINT = "sorting traced values is not implemented; sort before qjit (a static argument)"
REFUSED_FUNCTIONS.update(
    {
        np.nonzero: _SHAPE_HINT,
        np.argwhere: _SHAPE_HINT,
        np.unique: _SHAPE_HINT,
        np.sort: _SORT_HINT,
        np.argsort: _SORT_HINT,
    }
)
