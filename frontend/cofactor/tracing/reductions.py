"""Reductions on tracers: `np.sum`, `np.prod`, `np.mean`, `np.max`/`np.min` (and `amax`/`amin`),
`np.argmax`/`np.argmin`, `np.cumsum`. Each tries the loop nest of `array_rules` first (large
arrays in memory), else reduces the object array of `Scalar`s with numpy.

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES` (`numpy_api`
imports it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileValueError
from cofactor.tracing import array_rules, context
from cofactor.tracing.numpy_rules import (
    FUNCTION_RULES,
    _loop_dtypes,
    _select,
    _wrap,
    as_tracer,
    cast_tracer,
    const_scalar,
    scalar_ufunc,
)
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Tracer, normalize_dtype


def _accumulated(t: Tracer, dtype) -> Tracer:
    """The elements a sum or product accumulates: cast to `dtype`, bools counted as ints."""
    src = t if dtype is None else cast_tracer(t, normalize_dtype(dtype))
    return cast_tracer(src, INT) if src.dtype == BOOL else src


def _sum(a, axis=None, dtype=None, keepdims=False, **kw):
    looped = array_rules.reduce(np.add, a, axis, keepdims, dtype)
    if looped is not None:
        return looped
    t = as_tracer(a)
    src = _accumulated(t, dtype)
    if t.size == 0:
        return _wrap(
            np.zeros(np.sum(np.zeros(t.shape), axis=axis, keepdims=keepdims).shape, src.dtype)
        )
    return _wrap(np.sum(src.elems, axis=axis, keepdims=keepdims))


def _prod(a, axis=None, dtype=None, keepdims=False, **kw):
    looped = array_rules.reduce(np.multiply, a, axis, keepdims, dtype)
    if looped is not None:
        return looped
    src = _accumulated(as_tracer(a), dtype)
    result = _wrap(np.prod(src.elems, axis=axis, keepdims=keepdims))
    # (an empty axis gives Python 1s, an empty result no elements: numpy's dtype is src's)
    return result if result.dtype == src.dtype else cast_tracer(result, src.dtype)


def _mean(a, axis=None, keepdims=False, **kw):
    looped = array_rules.mean(a, axis, keepdims) if not kw.get("dtype") else None
    if looped is not None:
        return looped
    t = as_tracer(a)
    total = _sum(t, axis=axis, keepdims=keepdims)
    n = t.size if axis is None else int(np.prod([t.shape[i] for i in np.atleast_1d(axis)]))
    return np.true_divide(cast_tracer(total, COMPLEX if t.dtype == COMPLEX else FLOAT), float(n))


def _reduce_fn(ufunc: np.ufunc):
    def rule(a, axis=None, keepdims=False, **kw):
        looped = array_rules.reduce(ufunc, a, axis, keepdims)
        if looped is not None:
            return looped
        fn = np.frompyfunc(lambda x, y: scalar_ufunc(ufunc, x, y), 2, 1)
        t = as_tracer(a)
        if t.size == 0:  # numpy's error for an empty axis (named after the ufunc)
            try:
                ufunc.reduce(np.zeros(t.shape), axis=axis, keepdims=keepdims)
            except ValueError as e:
                raise CompileValueError(str(e)) from None
        result = _wrap(_reduce_axes(fn, t.elems, axis, keepdims))
        if result.size == 0:  # (no elements to tell the dtype: numpy's loop's)
            return Tracer(result.elems, _loop_dtypes(ufunc, [t.dtype, t.dtype])[1])
        return result

    return rule


def _extreme_fn(ufunc: np.ufunc):
    """np.max/np.min (amax/amin): the reduction, with the gradient of tied extreme floats
    split equally among them, as autograd's (PennyLane's default interface) and JAX's
    are (a plain reduction gives it all to the one element it picked). With m the extreme
    value, the result is

        m - sum(where(tie, m - x, 0)) / count(tie),    tie = (x == m) & isfinite(m),

    which is m exactly (each m - x of a tie is 0; `+ 0.0` turns a -0.0 sum into +0.0 so that
    m keeps its sign) and has derivative 1/count for each tied element, whatever m's own.
    Only code that Enzyme differentiates pays for the extra passes."""
    plain = _reduce_fn(ufunc)

    def rule(a, axis=None, keepdims=False, **kw):
        t = as_tracer(a)
        if t.dtype != FLOAT or t.size == 0 or context.differentiation_method() != "auto":
            return plain(a, axis=axis, keepdims=keepdims, **kw)
        m = plain(t, axis=axis, keepdims=True, **kw)
        tie = np.logical_and(np.equal(t, m), np.isfinite(m))
        excess = np.sum(np.where(tie, np.subtract(m, t), 0.0), axis=axis, keepdims=True)
        count = np.sum(tie, axis=axis, keepdims=True)
        result = np.subtract(m, np.add(excess, 0.0) / np.maximum(count, 1))
        shape = np.sum(np.zeros(t.shape, np.int8), axis=axis, keepdims=keepdims).shape
        return np.reshape(result, shape)

    return rule


def _reduce_axes(fn: np.ufunc, elems: np.ndarray, axis: Any, keepdims: bool) -> Any:
    """`fn.reduce` over `axis` (None, an int or a tuple, as numpy takes them). A frompyfunc
    ufunc reduces over one axis only, so the reduced axes are moved last and merged."""
    shape = elems.shape
    nd = len(shape)
    axes = tuple(range(nd)) if axis is None else tuple(np.atleast_1d(axis).tolist())
    if any(not -nd <= a < nd for a in axes):
        raise CompileValueError(f"axis {axis} is out of bounds for an array of dimension {nd}")
    if len({a % nd for a in axes}) != len(axes):
        raise CompileValueError(f"duplicate value in 'axis': {axis}")
    axes = tuple(sorted(a % nd for a in axes))
    kept = [i for i in range(len(shape)) if i not in axes]
    merged = int(np.prod([shape[i] for i in axes], dtype=int))
    moved = np.transpose(elems, kept + list(axes)).reshape([shape[i] for i in kept] + [merged])
    res = fn.reduce(moved, axis=-1)
    if keepdims:
        res = np.reshape(res, [1 if i in axes else d for i, d in enumerate(shape)])
    return res


def _argext(pred: np.ufunc):
    """argmax/argmin, flattened or along an axis (first occurrence wins, as in numpy; so
    does the first NaN)."""

    def rule(a, axis=None, out=None, *, keepdims=False):
        t = as_tracer(a)
        if t.ndim == 0 and axis in (0, -1):  # numpy: a 0-d array is its own row
            axis = None
        elems = t.elems.reshape(-1) if axis is None else np.moveaxis(t.elems, axis, -1)
        if elems.shape[-1] == 0:
            raise CompileValueError("numpy.argmax/argmin of an empty sequence")
        if t.dtype.kind == "f":
            # numpy: the first NaN wins (a NaN compares false with everything)
            def better_than_scalar(x, y):
                nan_x = scalar_ufunc(np.not_equal, x, x)
                not_nan_y = scalar_ufunc(np.equal, y, y)
                first_nan = scalar_ufunc(np.logical_and, nan_x, not_nan_y)
                return scalar_ufunc(np.logical_or, scalar_ufunc(pred, x, y), first_nan)

            better_than = np.frompyfunc(better_than_scalar, 2, 1)
        else:
            better_than = np.frompyfunc(lambda x, y: scalar_ufunc(pred, x, y), 2, 1)
        select = np.frompyfunc(_select, 3, 1)
        best = elems[..., 0]
        idx = np.full(best.shape, const_scalar(0, INT), dtype=object)
        for i in range(1, elems.shape[-1]):
            better = better_than(elems[..., i], best)
            best = select(better, elems[..., i], best)
            idx = select(better, const_scalar(i, INT), idx)
        result = as_tracer(idx)
        if keepdims:
            return (
                np.reshape(result, (1,) * t.ndim) if axis is None else np.expand_dims(result, axis)
            )
        return result

    return rule


def _cumsum(a, axis=None, **kw):
    t = as_tracer(a)
    if t.dtype == BOOL:
        t = cast_tracer(t, INT)
    elems = t.elems.reshape(-1) if axis is None else t.elems
    return _wrap(np.cumsum(elems, axis=0 if axis is None else axis))


FUNCTION_RULES.update(
    {
        np.sum: _sum,
        np.prod: _prod,
        np.mean: _mean,
        np.max: _extreme_fn(np.maximum),
        np.min: _extreme_fn(np.minimum),
        np.amax: _extreme_fn(np.maximum),
        np.amin: _extreme_fn(np.minimum),
        np.argmax: _argext(np.greater),
        np.argmin: _argext(np.less),
        np.cumsum: _cumsum,
    }
)
