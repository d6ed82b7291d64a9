"""Rearranging arrays in memory: transpose, reshape and static slicing as loop copies.

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

from cofactor.tracing.array_loops import gather, loopable
from cofactor.tracing.scalars import _b
from cofactor.tracing.tracer import Tracer


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


def getitem(t: Tracer, key: tuple) -> Tracer | None:
    """`t[key]` for a key of integers, slices, None and Ellipsis (all static): a copy of
    the selected elements. None for other keys (arrays of indices, booleans)."""
    if not loopable(t):
        return None
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
    plan: list[tuple[str, int, int]] = []  # per source axis: ("int", i, 0) / ("slice", start, step)
    out_shape: list[int] = []
    out_of: list[int] = []  # destination axis of each source axis (-1 for an integer)
    new_axes = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            new_axes += 1
            continue
        n = t.shape[len(plan)]
        if isinstance(k, slice):
            start, _, step = k.indices(n)
            out_of.append(len(out_shape))
            out_shape.append(len(range(*k.indices(n))))
            plan.append(("slice", start, step))
        else:
            i = int(k)
            if not -n <= i < n:
                return None  # numpy's rules raise the IndexError
            out_of.append(-1)
            plan.append(("int", i % n, 0))
    if 0 in out_shape:
        return None
    b = _b()

    def source(ivs: list[SSAValue]) -> list[SSAValue]:
        ids = []
        for (kind, start, step), d in zip(plan, out_of, strict=True):
            if kind == "int":
                ids.append(b.index(start))
                continue
            iv = ivs[d]
            if step != 1:
                iv = b.binary(arith.MuliOp, iv, b.index(step))
            ids.append(iv if start == 0 else b.binary(arith.AddiOp, iv, b.index(start)))
        return ids

    if all(kind == "slice" and start == 0 and step == 1 for kind, start, step in plan) and (
        tuple(out_shape) == t.shape
    ):
        return t
    return gather(t, tuple(out_shape), source)


def _is_int(k: Any) -> bool:
    return isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_)
