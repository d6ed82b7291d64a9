"""numpy's functions that write into an array they are given: `np.copyto`, `np.put`,
`np.place`, `np.fill_diagonal`, and `a.sort()` (Tracer.sort).

Each is written as an assignment into the traced array or a numpy view of it
(`dst[...] = src`, `np.ravel(a)[ind] = v`), so the write reaches every array that shares
its memory, as numpy's would (tracing/aliasing.py). Positions must be static (numpy arrays,
Python ints); traced positions or masks raise a CompileError saying what to write instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileTypeError
from cofactor.tracing.numpy_rules import FUNCTION_RULES, as_tracer
from cofactor.tracing.tracer import Scalar, Tracer


def _target(a: Any, name: str) -> Tracer:
    if not isinstance(a, Tracer):
        raise CompileError(
            f"numpy.{name} into a numpy array with traced values: numpy arrays cannot hold "
            "them; start from a traced array (y = x.copy(), y = 0.0 * x) or np.zeros(...)"
        )
    return a


def _static(positions: Any, name: str) -> np.ndarray:
    if isinstance(positions, Tracer | Scalar) or (
        isinstance(positions, list | tuple)
        and any(isinstance(p, Tracer | Scalar) for p in np.ravel(np.asarray(positions, object)))
    ):
        raise CompileError(
            f"numpy.{name} with traced positions (indices or mask) is not supported; write "
            "the update with np.where(mask, new, a) (or a[i] = v for one traced index)"
        )
    return np.asarray(positions)


def _cycled(values: Any, n: int) -> Tracer:
    """numpy's rule for put/place: the values repeat until there are `n` of them."""
    v = np.ravel(as_tracer(values))
    if v.size == n:
        return v
    if v.size == 0:
        raise ValueError("cannot replace elements of an array with an empty sequence")
    return v[np.arange(n) % v.size]


def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    t = _target(dst, "copyto")
    value = as_tracer(src)
    if not np.can_cast(value.dtype, t.dtype, casting=casting):
        raise CompileTypeError(
            f"Cannot cast array data from {value.dtype!r} to {t.dtype!r} according to the "
            f"rule {casting!r} (numpy.copyto, as numpy)"
        )
    if where is not True:
        value = np.where(where, value, t)
    t[...] = np.broadcast_to(value, t.shape)


def _put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    t = _target(a, "put")
    ids = _static(ind, "put").ravel()
    if mode == "wrap":
        ids = ids % t.size
    elif mode == "clip":
        ids = np.clip(ids, 0, t.size - 1)
    elif ids.size and not (-t.size <= ids.min() and ids.max() < t.size):
        bad = ids[(ids < -t.size) | (ids >= t.size)][0]
        raise IndexError(f"index {bad} is out of bounds for axis 0 with size {t.size}")
    if ids.size:
        flat = np.ravel(t)  # (a view of `t` when numpy's would be one: the write reaches t)
        if flat is not t and (flat._group is None or flat._group is not t._group):
            raise CompileError("numpy.put on a traced array numpy cannot view flat")
        flat[ids] = _cycled(v, ids.size)


def _place(arr: Any, mask: Any, vals: Any) -> None:
    t = _target(arr, "place")
    ids = np.flatnonzero(np.broadcast_to(_static(mask, "place"), t.shape))
    if ids.size:
        flat = np.ravel(t)
        if flat is not t and (flat._group is None or flat._group is not t._group):
            raise CompileError("numpy.place on a traced array numpy cannot view flat")
        flat[ids] = _cycled(vals, ids.size)


def _fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    t = _target(a, "fill_diagonal")
    probe = np.zeros(t.shape, dtype=bool)
    np.fill_diagonal(probe, True, wrap=wrap)  # numpy's positions
    _place(t, probe, val)


def sort_in_place(t: Tracer, axis: int = -1, kind: Any = None, order: Any = None) -> None:
    """`a.sort(axis)`: `a` (and the arrays sharing its memory) take the sorted values."""
    t[...] = np.sort(t, axis=axis, kind=kind, order=order)


FUNCTION_RULES.update(
    {
        np.copyto: _copyto,
        np.put: _put,
        np.place: _place,
        np.fill_diagonal: _fill_diagonal,
    }
)
