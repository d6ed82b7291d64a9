"""Indexing traced arrays: `t[key]` and `t[key] = value`.

Static keys (Python ints, slices, None, Ellipsis, constant tracers) index the object array
of `Scalar`s at trace time, so numpy itself checks them and raises its own IndexError.

Traced integer keys are only known when the compiled program runs. Each one is normalised
as numpy does (a negative index counts from the end) and checked against the axis size at
run time: an index out of range calls the runtime's `cf_rt_index_error(index, axis, size)`,
which records numpy's message ("index 3 is out of bounds for axis 0 with size 3") as
CF_ERR_INDEX in the error slot, and the launcher raises it as IndexError when the call
returns (`TraceContext.runtime_checks`). The slot keeps the first error, so a loop that
goes out of range reports its first bad index. After reporting, the code goes on with index
0, so no load or store ever leaves the array; the results of that call are discarded.
The report function is a `cf_rt_*` function, which the gradient passes declare inactive to
Enzyme, so differentiating code with traced indices works.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ArrayAttr, StringAttr, i1, i64

from cofactor.errors import CompileError
from cofactor.ir.builder import memref_type
from cofactor.tracing import array_views, context
from cofactor.tracing.aliasing import assign, share_memory
from cofactor.tracing.array_loops import ELEMENTWISE_MAX
from cofactor.tracing.memref_elements import load_element, load_elements
from cofactor.tracing.numpy_rules import (
    _in_memory,
    _objarr,
    _select,
    _wrap,
    as_scalar,
    as_tracer,
    cast_scalar,
    cast_tracer,
    scalar_ufunc,
)
from cofactor.tracing.runtime_errors import call_if
from cofactor.tracing.tracer import BOOL, COMPLEX, INT, Scalar, Tracer

#: the runtime function compiled code calls on an out-of-range traced index
INDEX_ERROR_FN = "cf_rt_index_error"


def _is_traced_index(k: Any) -> bool:
    return isinstance(k, Tracer | Scalar)


def _static_key(k: Any) -> Any:
    if isinstance(k, Tracer) and k.ndim == 0 and k.elems[()].const is not None:
        return k.elems[()].const
    if isinstance(k, Tracer) and k.ndim > 0 and k.dtype not in (INT, BOOL):
        raise IndexError(
            "arrays used as indices must be of integer (or boolean) type, got a traced "
            f"{k.dtype} array"
        )
    if isinstance(k, Tracer | Scalar) and k.dtype == BOOL:
        # numpy: a boolean index is a mask (x[True] adds an axis, x[False] is empty), not
        # the integer 0 or 1; its result's shape would only be known at run time
        raise CompileError(
            "indexing with a traced boolean (a mask: the result's shape depends on its value) "
            "is not supported; use np.where(mask, x, y), or cast an index with .astype(int)"
        )
    return k


def checked_index(index: Any, size: int, axis: int) -> Scalar:
    """The traced integer `index` into an axis of `size` elements, normalised as numpy does
    (negative counts from the end) and checked at run time; an index out of range reports
    IndexError through the runtime and is replaced by 0 so that memory stays in bounds."""
    i = cast_scalar(as_scalar(index), INT)
    if i.const is not None:  # folded constants: numpy's error now, at trace time
        j = int(i.const)
        if not -size <= j < size:
            raise IndexError(f"index {j} is out of bounds for axis {axis} with size {size}")
        return as_scalar(j % size, INT)
    if size == 0:  # every index is out of range: there is nothing to load
        raise IndexError(f"index (traced) is out of bounds for axis {axis} with size 0")
    ctx = context.current()
    b = ctx.builder
    j = _select(scalar_ufunc(np.less, i, 0), scalar_ufunc(np.add, i, size), i)
    # one unsigned comparison covers both j < 0 and j >= size
    ok = b.cmpi("ult", j.value, b.const(size, i64))
    bad = b.binary(arith.XOrIOp, ok, b.const(True, i1))
    call_if(bad, _index_error_fn(ctx), [i.value, b.const(axis, i64), b.const(size, i64)])
    return Scalar(b.select(ok, j.value, b.const(0, i64)), INT)


def _index_error_fn(ctx: context.TraceContext) -> str:
    """Declares `cf_rt_index_error(i64 index, i64 axis, i64 size)` once per module."""
    key = ("runtime", INDEX_ERROR_FN)
    if key not in ctx.functions:
        decl = func.FuncOp.external(INDEX_ERROR_FN, [i64, i64, i64], [])
        decl.sym_visibility = StringAttr("private")
        # Enzyme, differentiating code that contains the check, must know that the call
        # frees nothing ("No create nofree of empty function"); the gradient passes already
        # declare every cf_rt_* function inactive
        decl.attributes["passthrough"] = ArrayAttr([StringAttr("nofree")])
        ctx.builder.module_ops.append(decl)
        ctx.functions[key] = INDEX_ERROR_FN
    return INDEX_ERROR_FN


# ----------------------------------------------------------------------------------------
# reads
# ----------------------------------------------------------------------------------------
def getitem(t: Tracer, key: Any) -> Tracer:
    """`t[key]`: static keys index the element array; traced integer keys load from memory.
    A basic key (integers, slices, None, ...) makes a view in numpy (tracing/aliasing.py)."""
    result = _getitem(t, key)
    if _traced_array_index(key):
        return result  # (advanced indexing: numpy copies)
    # (x[i] of a vector is a number, no view; x[i, ...] is a 0-d view)
    if result._shape or type(key) is tuple and any(k is Ellipsis for k in key):
        keys = key if type(key) is tuple else (key,)
        keys = tuple(_static_key(k) for k in keys)
        if not any(_is_traced_index(k) for k in keys):
            share_memory(t, result, lambda buf: buf[keys])
        elif _integer_prefix(t, keys):  # `m[i]`, a row at a traced index: writes go to `m`
            share_memory(t, result, None, through=lambda elems: setitem(t, keys, _wrap(elems)))
        else:  # (slices with traced bounds: no such view in cofactor's rules)
            share_memory(t, result, None)
    return result


def _getitem(t: Tracer, key: Any) -> Tracer:
    flat = _small_static_position(t, key)
    if flat is not None:
        # the common `x[i]` / `x[i, j, k]` of a small argument array, as the general path
        # below does it (array_views declines arrays this small; the same loads result)
        lazy = t._memref
        scalar = lazy.loaded.get(flat)
        if scalar is None:
            scalar = load_element(lazy, t._shape, t.dtype, flat)
        elems = np.empty((), dtype=object)
        elems[()] = scalar
        return Tracer(elems, t.dtype)
    key = key if isinstance(key, tuple) else (key,)
    key = tuple(_static_key(k) for k in key)
    if not any(_is_traced_index(k) for k in key):
        view = array_views.getitem(t, key)
        if view is not None:
            return view
        if _in_memory(t):  # load only the selected elements
            ids = np.asarray(np.arange(t.size).reshape(t.shape)[key])
            elems = load_elements(t._memref, t.shape, t.dtype, ids)
            return Tracer(elems, t.dtype)
        picked = t.elems[key]  # (an empty selection keeps the dtype too)
        return Tracer(picked, t.dtype) if isinstance(picked, np.ndarray) else _wrap(picked)
    if _in_memory(t) and _integer_prefix(t, key):
        return _load_from_memory(t, key)
    # Expand Ellipsis so every entry lines up with an axis, then apply entries one by one.
    n_axes_used = sum(1 for k in key if k is not None and k is not Ellipsis)
    ellipsis = [i for i, k in enumerate(key) if k is Ellipsis]
    if ellipsis:
        i = ellipsis[0]
        key = key[:i] + (slice(None),) * (t.ndim - n_axes_used) + key[i + 1 :]
    if n_axes_used > t.ndim:
        raise IndexError(
            f"too many indices for array: array is {t.ndim}-dimensional, but {n_axes_used} "
            "were indexed"
        )
    _check_array_index(key)
    elems = t.elems
    axis = 0  # the axis of `elems` the next entry applies to
    source_axis = 0  # the same axis counted in `t` (for error messages, as numpy does)
    for k in key:
        if k is None:
            elems = np.expand_dims(elems, axis)
            axis += 1
            continue
        if _is_traced_index(k):
            k = as_tracer(k)
            elems = _dynamic_take(elems, k, axis, source_axis, t.dtype)
            axis += k.ndim  # (an array index puts its axes there)
        else:
            elems = elems[(slice(None),) * axis + (k,)]
            if isinstance(k, slice):
                axis += 1
        source_axis += 1
    return Tracer(_objarr(elems), t.dtype) if isinstance(elems, np.ndarray) else as_tracer(elems)


def _small_static_position(t: Tracer, key: Any) -> int | None:
    """The row-major position `t[key]` selects when `t` is a small array in memory (at most
    ELEMENTWISE_MAX elements, none loaded as an array) and `key` one static integer in
    range per axis; else None (the general path of `getitem` decides)."""
    if t._elems is not None or t._memref is None:
        return None
    shape = t._shape
    keys = key if type(key) is tuple else (key,)
    if len(keys) != len(shape) or not shape:
        return None
    flat = 0
    size = 1
    for k, n in zip(keys, shape, strict=True):
        # (a Python int by its exact class first: no union object to build and check)
        if type(k) is not int and (not isinstance(k, int | np.integer) or isinstance(k, bool)):
            return None
        if not -n <= k < n:
            return None
        flat = flat * n + int(k) % n
        size *= n
    return flat if size <= ELEMENTWISE_MAX else None  # (larger arrays: array_views)


def _integer_prefix(t: Tracer, key: tuple) -> bool:
    """Whether `key` is only integers (static or traced), at most one per axis."""
    return len(key) <= t.ndim and all(
        (_is_traced_index(k) and as_tracer(k).dtype in (INT, BOOL) and as_tracer(k).ndim == 0)
        or (isinstance(k, int | np.integer) and not isinstance(k, bool))
        for k in key
    )


def _load_from_memory(t: Tracer, key: tuple) -> Tracer:
    """`t[i, j, ...]` (integers only) of an array in a memref: checked indices, then loads
    of just the selected elements (no copy of the array)."""
    b = context.current().builder
    ids = []
    for axis, k in enumerate(key):
        if _is_traced_index(k):
            ids.append(b.to_index(checked_index(as_tracer(k).elems[()], t.shape[axis], axis).value))
        else:
            k = int(k)
            if not -t.shape[axis] <= k < t.shape[axis]:
                raise IndexError(
                    f"index {k} is out of bounds for axis {axis} with size {t.shape[axis]}"
                )
            ids.append(b.index(k % t.shape[axis]))
    rest = t.shape[len(key) :]
    if int(np.prod(rest)) > ELEMENTWISE_MAX:  # a row of a large array: one loop copy
        row = array_views.select(t, *array_views.prefix_plan(t, ids))
        if row is not None:
            return row
    out = np.empty(rest, dtype=object)
    for pos in np.ndindex(*rest):
        full = [*ids, *[b.index(p) for p in pos]]
        if t.dtype == COMPLEX:
            re = b.load(t.memref, [*full, b.index(0)])
            im = b.load(t.memref, [*full, b.index(1)])
            out[pos] = Scalar((re, im), COMPLEX)
        else:
            out[pos] = Scalar(b.load(t.memref, full), t.dtype)
    return Tracer(out, t.dtype)


def _dynamic_take(
    elems: np.ndarray, index: Tracer, axis: int, source_axis: int, dtype: np.dtype
) -> np.ndarray:
    """elems.take(index, axis) for a traced integer index: store, then load."""
    if index.dtype not in (INT, BOOL):
        raise CompileError("array indices must be integers")
    if index.ndim and index.dtype == BOOL:
        raise CompileError(
            "indexing with a traced boolean array (a mask: the result's shape depends on its "
            "values) is not supported; use np.where(mask, x, y) or np.sum(x * mask) instead"
        )
    b = context.current().builder
    n = elems.shape[axis]
    moved = np.moveaxis(elems, axis, 0)
    buf = context.current().hoisted_alloc(memref_type(moved.shape, dtype), heap=False)
    idx_cache: dict[int, Any] = {}

    def idx(v: int):
        if v not in idx_cache:
            idx_cache[v] = b.index(v)
        return idx_cache[v]

    for pos in np.ndindex(*moved.shape):
        s = as_scalar(moved[pos], dtype)
        ids = [idx(p) for p in pos]
        if dtype == COMPLEX:
            b.store(s.value[0], buf, [*ids, idx(0)])
            b.store(s.value[1], buf, [*ids, idx(1)])
        else:
            b.store(s.value, buf, ids)
    out = np.empty(index.shape + moved.shape[1:], dtype=object)
    for ipos in np.ndindex(*index.shape):
        dyn = b.to_index(checked_index(index.elems[ipos], n, source_axis).value)
        for pos in np.ndindex(*moved.shape[1:]):
            ids = [dyn, *[idx(p) for p in pos]]
            if dtype == COMPLEX:
                value: Any = (b.load(buf, [*ids, idx(0)]), b.load(buf, [*ids, idx(1)]))
            else:
                value = b.load(buf, ids)
            out[ipos + pos] = Scalar(value, dtype)
    # numpy's take: the index's axes where `axis` was
    return np.moveaxis(out, list(range(index.ndim)), list(range(axis, axis + index.ndim)))


def _traced_array_index(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, Tracer) and k.ndim > 0 for k in keys)


def _check_array_index(key: tuple) -> None:
    """One traced integer array among slices, None and Ellipsis: numpy's advanced indexing
    is then a take along that axis. Several advanced indices (arrays or integers with an
    array) broadcast together in numpy, with rules this tracer does not follow."""
    if not _traced_array_index(key):
        return
    advanced = [k for k in key if not (k is None or k is Ellipsis or isinstance(k, slice))]
    if len(advanced) > 1:
        raise CompileError(
            "indexing with a traced integer array combined with other integer or array "
            "indices is not supported; index one axis at a time (x[idx][:, j])"
        )


# ----------------------------------------------------------------------------------------
# writes
# ----------------------------------------------------------------------------------------
def setitem(t: Tracer, key: Any, value: Any) -> None:
    """`t[key] = value` (numpy's in-place semantics on the element array). Static keys assign
    elements; integer keys with traced entries select, per element, the new or old value."""
    if _traced_array_index(key):
        _array_setitem(t, key, value)
        return
    key_t = tuple(_static_key(k) for k in (key if isinstance(key, tuple) else (key,)))
    if any(_is_traced_index(k) for k in key_t):
        _traced_setitem(t, key_t, value)
        return
    v = as_tracer(value)
    dtype = t.dtype
    elems = t.elems.copy()
    src = cast_tracer(v, dtype).elems
    target = elems[key]
    if isinstance(target, np.ndarray):
        # numpy drops leading length-1 axes of the value (`c[4] = a[0:1]` for a row)
        extra = src.ndim - target.ndim
        if extra > 0 and all(d == 1 for d in src.shape[:extra]):
            src = src.reshape(src.shape[extra:])
        elems[key] = np.broadcast_to(src, target.shape)
    else:
        elems[key] = src.reshape(())[()]
    assign(t, elems)


def _traced_setitem(t: Tracer, key: tuple, value: Any) -> None:
    if len(key) > t.ndim or not all(
        _is_traced_index(k) or isinstance(k, int | np.integer) for k in key
    ):
        raise CompileError(
            "assignment with a traced index supports integer indices only (x[i] = v, "
            "x[i, j] = v), not slices or arrays"
        )
    index: list[Any] = []
    for axis, k in enumerate(key):
        if _is_traced_index(k):
            index.append(checked_index(k, t.shape[axis], axis))
        else:
            k = int(k)
            if not -t.shape[axis] <= k < t.shape[axis]:
                raise IndexError(
                    f"index {k} is out of bounds for axis {axis} with size {t.shape[axis]}"
                )
            index.append(k % t.shape[axis])
    n = len(index)
    v = cast_tracer(as_tracer(value), t.dtype)
    src = np.broadcast_to(v.elems, t.shape[n:])
    elems = t.elems.copy()
    for pos in np.ndindex(*t.shape[:n]):
        hit: Any = True
        for p, k in zip(pos, index, strict=True):
            same = scalar_ufunc(np.equal, k, p) if isinstance(k, Scalar) else k == p
            hit = (
                same
                if hit is True
                else (hit if same is True else scalar_ufunc(np.logical_and, hit, same))
            )
            if hit is False:
                break
        if hit is False:
            continue
        for rest in np.ndindex(*t.shape[n:]):
            elems[pos + rest] = (
                src[rest] if hit is True else _select(hit, src[rest], elems[pos + rest])
            )
    assign(t, elems)


def _array_setitem(t: Tracer, key: Any, value: Any) -> None:
    """`t[idx] = v` with a traced integer array `idx` (each index in turn, so the last of
    repeated ones wins, as in numpy), and `t[mask] = v` with a traced boolean array of `t`'s
    shape and one value (`np.where(mask, v, t)`)."""
    k = key[0] if isinstance(key, tuple) and len(key) == 1 else key
    if not isinstance(k, Tracer):
        raise CompileError(
            "assignment with a traced integer array supports one index array on the first "
            "axis only (x[idx] = v)"
        )
    v = as_tracer(value)
    if k.dtype == BOOL:
        if k.shape != t.shape or v.size != 1:
            raise CompileError(
                "assignment through a traced boolean mask (x[mask] = v) needs a mask of x's "
                f"shape {t.shape} and one value; use x = np.where(mask, v, x)"
            )
        assign(t, np.where(k, v.reshape(()), t).astype(t.dtype).elems)
        return
    try:
        src = np.broadcast_to(v.elems, k.shape + t.shape[1:])
    except ValueError:
        raise ValueError(
            f"shape mismatch: value array of shape {v.shape} could not be broadcast to "
            f"indexing result of shape {k.shape + t.shape[1:]}"
        ) from None
    for ipos in np.ndindex(*k.shape):
        _traced_setitem(t, (k.elems[ipos],), _wrap(src[ipos]) if src.ndim > k.ndim else src[ipos])
