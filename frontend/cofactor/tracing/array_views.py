"""Rearranging arrays in memory: transpose, reshape, slicing, concatenate and stack as
loop copies.

Assignment (`x[1:3] = v`) stays per element (indexing.setitem): done by loops (a copy, then
the region overwritten, or one pass selecting new or old elements), the gradients of some
programs made LLVM 15's dead-store elimination crash on Enzyme's output.

Each is one loop nest (`array_loops.gather`) that reads the source at positions computed
from the destination's indices, so the IR does not grow with the array. The functions
return None when the array is not a large one in memory or the key is not static; the
caller then uses the per-element rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from cofactor.tracing.array_loops import (
    gather,
    loopable,
    new_buffer,
    operand,
    store,
)
from cofactor.tracing.scalars import _b, _loop_nest, as_scalar, cast_scalar
from cofactor.tracing.tracer import Tracer, normalize_dtype


def transpose(t: Tracer, axes: Any = None) -> Tracer | None:
    """`np.transpose(t, axes)`: destination axis k reads source axis axes[k]."""
    if not loopable(t):
        return None
    nd = t.ndim
    if axes is None:
        perm = list(range(nd))[::-1]
    else:
        try:
            perm = [int(a) % nd if -nd <= int(a) < nd else -1 for a in axes]
        except (TypeError, ValueError):
            return None
        if sorted(perm) != list(range(nd)):
            return None  # numpy's rules raise its error
    if perm == list(range(nd)):
        return t
    out_shape = tuple(t.shape[p] for p in perm)

    def source(ivs: list[SSAValue]) -> list[SSAValue]:
        ids: list[SSAValue] = [ivs[0]] * nd
        for k, p in enumerate(perm):
            ids[p] = ivs[k]
        return ids

    return gather(t, out_shape, source)


def moveaxis(t: Tracer, source: Any, destination: Any) -> Tracer | None:
    if not loopable(t):
        return None
    try:
        np.moveaxis(np.zeros((1,) * t.ndim, dtype=np.int8), source, destination)
    except (TypeError, ValueError, np.exceptions.AxisError):
        return None  # numpy's rules raise its error
    src = np.atleast_1d(source)
    dst = np.atleast_1d(destination)
    nd = t.ndim
    src = [int(s) % nd for s in src]
    dst = [int(d) % nd for d in dst]
    rest = [a for a in range(nd) if a not in src]
    order: list[int] = [-1] * nd
    for s, d in zip(src, dst, strict=True):
        order[d] = s
    it = iter(rest)
    order = [o if o >= 0 else next(it) for o in order]
    return transpose(t, order)


def reshape(t: Tracer, shape: Any) -> Tracer | None:
    """`np.reshape(t, shape)` (C order): the destination's flat position, split along the
    source's axes. When the shapes differ only by axes of size 1 no arithmetic is needed."""
    if not loopable(t):
        return None
    try:
        out_shape = np.zeros(t.shape, dtype=np.int8).reshape(shape).shape
    except (TypeError, ValueError):
        return None  # numpy's rules raise its error
    if out_shape == t.shape:
        return t
    squeezed_in = [n for n in t.shape if n != 1]
    squeezed_out = [n for n in out_shape if n != 1]
    b = _b()
    if squeezed_in == squeezed_out:
        in_axes = [d for d, n in enumerate(t.shape) if n != 1]
        out_axes = [d for d, n in enumerate(out_shape) if n != 1]

        def direct(ivs: list[SSAValue]) -> list[SSAValue]:
            zero = b.index(0)
            ids = [zero] * t.ndim
            for di, do in zip(in_axes, out_axes, strict=True):
                ids[di] = ivs[do]
            return ids

        return gather(t, out_shape, direct)
    out_strides = _strides(out_shape)
    in_strides = _strides(t.shape)

    def source(ivs: list[SSAValue]) -> list[SSAValue]:
        flat = None
        for iv, stride in zip(ivs, out_strides, strict=True):
            term = iv if stride == 1 else b.binary(arith.MuliOp, iv, b.index(stride))
            flat = term if flat is None else b.binary(arith.AddiOp, flat, term)
        ids = []
        for d, (n, stride) in enumerate(zip(t.shape, in_strides, strict=True)):
            q = flat if stride == 1 else b.binary(arith.DivUIOp, flat, b.index(stride))
            ids.append(q if d == 0 else b.binary(arith.RemUIOp, q, b.index(n)))
        return ids

    return gather(t, out_shape, source)


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


#: how a key selects along one source axis: ("int", i) with i an int or an index SSA value
#: (a checked traced index), or ("slice", start, step)
Plan = list[tuple[Any, ...]]


def static_plan(t: Tracer, key: tuple) -> tuple[Plan, tuple[int, ...], list[int]] | None:
    """(per source axis the selection, the selected region's shape, per source axis the
    region axis it runs along or -1) for a key of integers, slices, None and Ellipsis;
    None for other keys (arrays of indices, booleans) and errors numpy reports itself."""
    if any(not (k is None or k is Ellipsis or isinstance(k, slice) or _is_int(k)) for k in key):
        return None
    if sum(k is Ellipsis for k in key) > 1:
        return None
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > t.ndim:
        return None
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (t.ndim - used) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (t.ndim - used)
    plan: Plan = []
    shape: list[int] = []
    axis_of: list[int] = []
    for k in key:
        if k is None:
            shape.append(1)
            continue
        n = t.shape[len(plan)]
        if isinstance(k, slice):
            start, _, step = k.indices(n)
            axis_of.append(len(shape))
            shape.append(len(range(*k.indices(n))))
            plan.append(("slice", start, step))
        else:
            i = int(k)
            if not -n <= i < n:
                return None  # numpy's rules raise the IndexError
            axis_of.append(-1)
            plan.append(("int", i % n))
    return plan, tuple(shape), axis_of


def prefix_plan(t: Tracer, ids: list[SSAValue]) -> tuple[Plan, tuple[int, ...], list[int]]:
    """The plan of `t[i, j]` for checked index values `ids` (the leading axes)."""
    rest = t.shape[len(ids) :]
    plan: Plan = [("int", i) for i in ids] + [("slice", 0, 1)] * len(rest)
    return plan, rest, [-1] * len(ids) + list(range(len(rest)))


def _source_ids(plan: Plan, axis_of: list[int], ivs: list[SSAValue]) -> list[SSAValue]:
    b = _b()
    ids = []
    for entry, d in zip(plan, axis_of, strict=True):
        if entry[0] == "int":
            ids.append(entry[1] if isinstance(entry[1], SSAValue) else b.index(entry[1]))
            continue
        _, start, step = entry
        iv = ivs[d]
        if step != 1:
            iv = b.binary(arith.MuliOp, iv, b.index(step))
        ids.append(iv if start == 0 else b.binary(arith.AddiOp, iv, b.index(start)))
    return ids


def select(t: Tracer, plan: Plan, shape: tuple[int, ...], axis_of: list[int]) -> Tracer | None:
    """A copy of the region of `t` the plan selects (`t[key]`)."""
    if not loopable(t) or 0 in shape:
        return None
    if shape == t.shape and all(e == ("slice", 0, 1) for e in plan):
        return t
    return gather(t, shape, lambda ivs: _source_ids(plan, axis_of, ivs))


def getitem(t: Tracer, key: tuple) -> Tracer | None:
    """`t[key]` for a static key of integers, slices, None and Ellipsis."""
    planned = static_plan(t, key) if loopable(t) else None
    return select(t, *planned) if planned is not None else None


def _write(
    buf: SSAValue, dtype: np.dtype, plan: Plan, shape: tuple[int, ...], axis_of: list[int], v: Any
) -> Any:
    """Store operand `v` (broadcast over `shape`) into the region of `buf` the plan selects;
    returns the last op emitted."""
    b = _b()

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        x = cast_scalar(as_scalar(v.load_broadcast(ivs, shape), v.dtype), dtype)
        store(x, buf, _source_ids(plan, axis_of, ivs))
        return []

    if shape:
        return _loop_nest(shape, [], body)
    body([], [])
    return b.block.last_op


def join(arrays: list[Any], axis: int, new_axis: bool) -> Tracer | None:
    """`np.concatenate(arrays, axis)` (`new_axis` False) or `np.stack(arrays, axis)`: each
    array copied by a loop into its part of one buffer."""
    if not loopable(*arrays):
        return None
    ops = [operand(a) for a in arrays]
    if any(o is None or not o.shape for o in ops):
        return None
    shapes = [o.shape for o in ops]
    probes = [np.zeros(sh, np.int8) for sh in shapes]
    try:
        out_shape = (np.stack if new_axis else np.concatenate)(probes, axis=axis).shape
    except (ValueError, TypeError, np.exceptions.AxisError):
        return None  # numpy's rules raise its error
    dtype = normalize_dtype(np.result_type(*[o.dtype for o in ops]))
    nd = len(out_shape)
    axis = int(axis) % nd
    buf = new_buffer(out_shape, dtype)
    offset = 0
    op = None
    for o in ops:
        if new_axis:
            plan: Plan = [("slice", 0, 1)] * nd
            plan[axis] = ("int", offset)
            axis_of = [d - (d > axis) if d != axis else -1 for d in range(nd)]
            offset += 1
        else:
            plan = [("slice", 0, 1)] * nd
            plan[axis] = ("slice", offset, 1)
            axis_of = list(range(nd))
            offset += o.shape[axis]
        op = _write(buf, dtype, plan, o.shape, axis_of, o)
    return Tracer.from_memref(buf, out_shape, dtype, anchor=op)


def _is_int(k: Any) -> bool:
    return isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_)
