"""More numpy functions on tracers, each written with the core rules (concatenate, reshape,
where, dot, mean): splits, `block`/`dstack`, rotations and flips, `meshgrid`,
`broadcast_arrays`, `select`, `cross`, `polyval`, `ediff1d`, `cov`/`corrcoef`, `take`, and
`numpy.linalg` `matrix_power`, `multi_dot`, `trace`. Their values and derivatives are
those of the rules they use.

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileTypeError, CompileValueError
from cofactor.tracing.numpy_rules import FUNCTION_RULES, _sequence_rule, _structural, as_tracer
from cofactor.tracing.tracer import BOOL, Tracer


def _splitting(np_fn: Callable) -> Callable:
    """split / array_split / hsplit / vsplit / dsplit: numpy splits the element array; each
    part keeps the array's dtype (also when it is empty)."""

    def rule(ary: Any, *args: Any, **kwargs: Any) -> list[Tracer]:
        t = as_tracer(ary)
        return [
            Tracer(np.array(part, dtype=object), t.dtype)
            for part in np_fn(t.elems, *args, **kwargs)
        ]

    return rule


def _block(arrays: Any) -> Tracer:
    """numpy.block: the innermost lists are joined along the last axis, the next level
    along the one before, ...; every array first gets leading axes up to that depth."""

    def depth(x: Any) -> int:
        if isinstance(x, tuple):
            raise CompileTypeError("numpy.block: arrays is a tuple; only lists can be used")
        if not isinstance(x, list):
            return 0
        depths = {depth(y) for y in x}
        if len(depths) != 1:
            raise CompileValueError("numpy.block: list depths are mismatched")
        return 1 + depths.pop()

    def leaves(x: Any) -> list:
        return [leaf for y in x for leaf in leaves(y)] if isinstance(x, list) else [x]

    if not isinstance(arrays, list):
        return as_tracer(arrays)
    d = depth(arrays)
    ndim = max(d, *(np.ndim(leaf) for leaf in leaves(arrays)))

    def join(x: Any, level: int) -> Any:
        if isinstance(x, list):
            return np.concatenate([join(y, level + 1) for y in x], axis=level - d)
        return np.reshape(x, (1,) * (ndim - np.ndim(x)) + np.shape(x))

    return join(arrays, 0)


def _meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple:
    n = len(xi)
    shapes = [np.size(x) for x in xi]
    if indexing == "xy" and n > 1:
        shapes[0], shapes[1] = shapes[1], shapes[0]
    out = []
    for i, x in enumerate(xi):
        shape = [1] * n
        shape[1 - i if indexing == "xy" and n > 1 and i < 2 else i] = np.size(x)
        g = np.reshape(x, shape)
        out.append(g if sparse else np.broadcast_to(g, shapes))
    return tuple(out)


def _select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    if len(condlist) != len(choicelist):
        raise CompileValueError(
            "numpy.select: list of cases must be same length as list of conditions"
        )
    for k, cond in enumerate(condlist):
        if as_tracer(cond).dtype != BOOL:
            raise CompileTypeError(f"numpy.select: invalid entry {k} in condlist: not boolean")
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist), strict=True):
        out = np.where(cond, choice, out)
    return np.broadcast_to(
        out, np.broadcast_shapes(*(np.shape(c) for c in condlist), np.shape(out))
    )


def _cross(
    a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None
) -> Any:
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)
    if np.shape(a)[-1] not in (2, 3) or np.shape(b)[-1] not in (2, 3):
        raise CompileValueError(
            "numpy.cross: incompatible dimensions for cross product (need 2 or 3)"
        )
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if np.shape(a)[-1] == 3 else 0
    b2 = b[..., 2] if np.shape(b)[-1] == 3 else 0
    if np.shape(a)[-1] == 2 and np.shape(b)[-1] == 2:
        return a0 * b1 - a1 * b0
    c = np.stack(
        np.broadcast_arrays(a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1
    )
    return np.moveaxis(c, -1, axisc)


def _broadcast_arrays(*args: Any, subok: bool = False) -> tuple:
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    return tuple(np.broadcast_to(a, shape) for a in args)


def _polyval(p: Any, x: Any) -> Any:
    """Horner's rule, as numpy: y = y * x + p[k]."""
    y = np.zeros_like(x) if not isinstance(x, Tracer) else x * 0
    for k in range(len(p)):
        y = y * x + p[k]
    return y


def _ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    flat = np.ravel(ary)
    parts = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        parts.insert(0, np.ravel(to_begin))
    if to_end is not None:
        parts.append(np.ravel(to_end))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None,
         fweights: Any = None, aweights: Any = None, *, dtype: Any = None) -> Any:  # fmt: skip
    if fweights is not None or aweights is not None or dtype is not None:
        raise CompileError(
            "numpy.cov with fweights, aweights or dtype is not supported by cofactor"
        )
    if np.ndim(m) > 2 or (y is not None and np.ndim(y) > 2):
        raise CompileValueError("numpy.cov: m and y have at most 2 dimensions")
    x = np.atleast_2d(m)
    if not rowvar and np.shape(x)[0] != 1:
        x = x.T
    if y is not None:
        yy = np.atleast_2d(y)
        x = np.concatenate([x, yy if rowvar or np.shape(yy)[0] == 1 else yy.T], axis=0)
    n = np.shape(x)[1]
    ddof = (0 if bias else 1) if ddof is None else ddof
    dev = x - np.mean(x, axis=1, keepdims=True)
    c = np.dot(dev, dev.T) / float(n - ddof)
    return np.squeeze(c)


def _corrcoef(x: Any, y: Any = None, rowvar: bool = True, **kw: Any) -> Any:
    c = _cov(x, y, rowvar)
    if np.ndim(c) == 0:
        return c / c
    d = np.sqrt(np.diagonal(c))
    return np.clip(c / d[:, None] / d[None, :], -1.0, 1.0)


def _matrix_power(a: Any, n: int) -> Any:
    if not isinstance(n, int | np.integer):
        raise CompileError("numpy.linalg.matrix_power needs a Python int exponent")
    if n < 0:
        raise CompileError(
            "numpy.linalg.matrix_power with a negative exponent needs an inverse, which cofactor "
            "does not compute on traced values"
        )
    shape = np.shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise CompileValueError(
            f"numpy.linalg.matrix_power of an array of shape {shape}: not square"
        )
    result, base = None, a
    while True:  # binary powering, as numpy
        if n & 1:
            result = base if result is None else np.matmul(result, base)
        n >>= 1
        if not n:
            break
        base = np.matmul(base, base)
    if result is None:  # n == 0: the identity, in a's dtype
        return np.broadcast_to(np.eye(shape[-1], dtype=as_tracer(a).dtype), shape) * 1
    return result


def _multi_dot(arrays: Any, *, out: Any = None) -> Any:
    ndims = [np.ndim(a) for a in arrays]
    if len(ndims) < 2 or any(d != 2 for d in ndims[1:-1]) or not {ndims[0], ndims[-1]} <= {1, 2}:
        raise CompileValueError(
            "numpy.linalg.multi_dot: at least two arrays, 2-d ones (the first and last may be 1-d)"
        )
    result = arrays[0]
    for a in arrays[1:]:
        result = np.dot(result, a)
    return result


def _take(a: Any, indices: Any, axis: Any = None, mode: str = "raise") -> Any:
    """numpy.take: with traced indices, the indexing `a[:, ..., indices]` along `axis` (the
    flattened array when None), negative indices counting from the end and an index out of
    range an IndexError, as numpy's mode="raise"; mode "wrap" / "clip" first bring the
    indices into range. Static indices: numpy on the element array."""
    if not isinstance(indices, Tracer):
        return _structural(np.take)(a, indices, axis=axis, mode=mode)
    if mode not in ("raise", "wrap", "clip"):
        raise CompileValueError(f"numpy.take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    t = as_tracer(a)
    if axis is None:
        t, axis = np.ravel(t), 0
    axis = int(axis)
    if not -t.ndim <= axis < t.ndim:
        raise np.exceptions.AxisError(axis, t.ndim)
    axis %= t.ndim
    n = t.shape[axis]
    if mode == "wrap":
        indices = np.mod(indices, n)
    elif mode == "clip":
        indices = np.clip(indices, 0, n - 1)
    return t[(slice(None),) * axis + (indices,)]


def _linalg_trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    return np.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)


FUNCTION_RULES.update(
    {
        np.split: _splitting(np.split),
        np.array_split: _splitting(np.array_split),
        np.hsplit: _splitting(np.hsplit),
        np.vsplit: _splitting(np.vsplit),
        np.dsplit: _splitting(np.dsplit),
        np.dstack: _sequence_rule(np.dstack),
        np.block: _block,
        np.rot90: _structural(np.rot90),
        np.fliplr: _structural(np.fliplr),
        np.flipud: _structural(np.flipud),
        np.meshgrid: _meshgrid,
        np.broadcast_arrays: _broadcast_arrays,
        np.select: _select,
        np.cross: _cross,
        np.polyval: _polyval,
        np.ediff1d: _ediff1d,
        np.cov: _cov,
        np.take: _take,
        np.corrcoef: _corrcoef,
        np.linalg.matrix_power: _matrix_power,
        np.linalg.multi_dot: _multi_dot,
    }
)
if hasattr(np.linalg, "trace"):  # numpy >= 2
    FUNCTION_RULES[np.linalg.trace] = _linalg_trace
