"""Array-level numpy functions on tracers that build on the core rules: statistics (`var`,
`std`, `ptp`, `average`, `median`), `sort` (a compare-exchange network), running products
and differences, triangles, `append`, `column_stack`, and the `*_like` constructors.

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileValueError
from cofactor.tracing.array_loops import select_scalar
from cofactor.tracing.numpy_rules import (
    FUNCTION_RULES,
    REFUSED_FUNCTIONS,
    _wrap,
    as_tracer,
    cast_tracer,
    normalize_dtype,
    scalar_ufunc,
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


#: most compare-exchanges (of two elements) one traced numpy.sort may emit
MAX_SORT_EXCHANGES = 20000


def _sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, **kw: Any) -> Tracer:
    """numpy.sort: an odd-even transposition network along `axis` (n rounds of n/2
    compare-exchanges; no branches on run-time values, differentiable like a select). A pair
    swaps when the second is smaller or the first is NaN, so NaNs end last, as numpy sorts."""
    return _exchange_network(a, axis, nan_last=True)


def _exchange_network(a: Any, axis: Any, nan_last: bool) -> Tracer:
    """The sorting network of _sort. nan_last=False: minimum/maximum pairs, through which a
    NaN spreads to every position in n rounds (what numpy.median wants: NaN if any is NaN)."""
    t = as_tracer(a)
    if axis is None:
        t, axis = np.reshape(t, (-1,)), -1
    if t.dtype == COMPLEX:
        raise CompileError("numpy.sort of complex traced values is not supported by cofactor")
    elems = np.moveaxis(t.elems, axis, -1).copy()
    n = elems.shape[-1]
    if n * n * (elems.size // max(n, 1)) > 2 * MAX_SORT_EXCHANGES:
        raise CompileError(
            f"numpy.sort of a traced array of shape {t.shape}: cofactor sorts with a network "
            f"of up to {MAX_SORT_EXCHANGES} compare-exchanges; sort fewer values"
        )
    dtype = t.dtype

    def exchange(x: Any, y: Any) -> tuple[Any, Any]:
        if not nan_last:
            return scalar_ufunc(np.minimum, x, y), scalar_ufunc(np.maximum, x, y)
        swap = scalar_ufunc(np.less, y, x)
        if dtype != INT and dtype != BOOL:
            swap = scalar_ufunc(np.logical_or, swap, scalar_ufunc(np.isnan, x))
        return select_scalar(swap, y, x, dtype), select_scalar(swap, x, y, dtype)

    pair = np.frompyfunc(exchange, 2, 2)
    for r in range(n):
        for i in range(r % 2, n - 1, 2):
            x, y = elems[..., i].copy(), elems[..., i + 1].copy()
            elems[..., i], elems[..., i + 1] = pair(x, y)
    return _wrap(np.moveaxis(elems, -1, axis))


def _median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
            keepdims: bool = False) -> Tracer:  # fmt: skip
    """numpy.median: the reduced axes moved last and merged, sorted, the middle one or two."""
    t = as_tracer(a)
    nd = t.ndim
    axes = tuple(range(nd)) if axis is None else tuple(np.atleast_1d(axis).tolist())
    if any(not -nd <= x < nd for x in axes) or len({x % nd for x in axes}) != len(axes):
        raise CompileValueError(f"numpy.median: invalid axis {axis} for {nd} dimensions")
    axes = tuple(x % nd for x in axes)
    kept = [i for i in range(nd) if i not in axes]
    n = int(np.prod([t.shape[i] for i in axes], dtype=int))
    if n == 0:
        raise CompileValueError("numpy.median of an empty traced array (numpy: nan)")
    merged = np.reshape(np.transpose(t, kept + list(axes)), [t.shape[i] for i in kept] + [n])
    ordered = _exchange_network(merged, -1, nan_last=False)
    mid = np.mean(ordered[..., (n - 1) // 2 : n // 2 + 1], axis=-1)
    return (
        np.reshape(mid, [1 if i in axes else d for i, d in enumerate(t.shape)]) if keepdims else mid
    )


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
        np.sort: _sort,
        np.median: _median,
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
        np.argsort: _SORT_HINT,
    }
)
