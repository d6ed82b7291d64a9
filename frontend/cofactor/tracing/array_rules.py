"""Numpy functions on large arrays in memory, as loop nests: the array-level rules that
`numpy_rules` and `linalg` try before their per-element ones.

Each rule returns None when its operands are not a large array in memory (`loopable`) or
the call is one the loops do not cover; the caller then runs its per-element rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.tracing.array_loops import (
    Operand,
    contract,
    elementwise,
    in_memory,
    loopable,
    operand,
    reduction,
    select_scalar,
)
from cofactor.tracing.element_rules import UFUNC_RULES
from cofactor.tracing.scalars import (
    _loop_dtypes,
    as_tracer,
    cast_scalar,
    scalar_imag,
    scalar_real,
    scalar_ufunc,
)
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Tracer, normalize_dtype


def _operands(xs: tuple | list) -> list[Operand] | None:
    ops = [operand(x) for x in xs]
    return None if any(o is None for o in ops) else ops  # type: ignore[return-value]


def _broadcastable(ops: list[Operand]) -> bool:
    try:
        np.broadcast_shapes(*[o.shape for o in ops])
    except ValueError:
        return False
    return True


def ufunc_call(ufunc: np.ufunc, inputs: tuple) -> Tracer | None:
    """`ufunc(*inputs)` elementwise with numpy's broadcasting and dtype resolution."""
    if ufunc.nout != 1 or ufunc not in UFUNC_RULES or not loopable(*inputs):
        return None
    ops = _operands(inputs)
    if ops is None or not _broadcastable(ops):
        return None
    _, out = _loop_dtypes(ufunc, [o.dtype for o in ops])
    return elementwise(lambda *xs: scalar_ufunc(ufunc, *xs), ops, out)


def cast(t: Tracer, dtype: np.dtype) -> Tracer | None:
    """`t.astype(dtype)`."""
    if not loopable(t):
        return None
    return elementwise(lambda s: cast_scalar(s, dtype), [operand(t)], dtype)  # type: ignore[list-item]


def real_part(t: Tracer, imag: bool = False) -> Tracer | None:
    """`np.real(t)` / `np.imag(t)` of a complex array."""
    if not loopable(t) or t.dtype != COMPLEX:
        return None
    return elementwise(scalar_imag if imag else scalar_real, [operand(t)], FLOAT)  # type: ignore[list-item]


def where(cond: Any, x: Any, y: Any) -> Tracer | None:
    """`np.where(cond, x, y)` with broadcasting."""
    if not loopable(cond, x, y):
        return None
    ops = _operands([cond, x, y])
    if ops is None or not _broadcastable(ops):
        return None
    dtype = normalize_dtype(np.result_type(ops[1].dtype, ops[2].dtype))
    return elementwise(lambda c, p, q: select_scalar(c, p, q, dtype), ops, dtype)


# ----------------------------------------------------------------------------------------
# reductions
# ----------------------------------------------------------------------------------------
def reduce(
    ufunc: np.ufunc, a: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None
) -> Tracer | None:
    """`np.sum/prod/max/min(a, axis, keepdims, dtype)` (`ufunc` add/multiply/maximum/...)."""
    if not loopable(a):
        return None
    t = as_tracer(a)
    acc = t.dtype if dtype is None else normalize_dtype(dtype)
    if acc == BOOL and ufunc in (np.add, np.multiply):
        acc = INT
    return reduction(ufunc, t, axis, keepdims, acc)


def mean(a: Any, axis: Any = None, keepdims: bool = False) -> Tracer | None:
    if not loopable(a):
        return None
    t = as_tracer(a)
    acc = COMPLEX if t.dtype == COMPLEX else FLOAT
    total = reduction(np.add, t, axis, keepdims, acc)
    if total is None:
        return None
    n = t.size // max(total.size, 1) if keepdims or axis is not None else t.size
    return np.true_divide(total, float(n))


# ----------------------------------------------------------------------------------------
# products
# ----------------------------------------------------------------------------------------
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _product_dtype(ops: list[Operand]) -> np.dtype:
    return normalize_dtype(np.result_type(*[o.dtype for o in ops]))


def _contracted_axes_agree(sa: tuple[int, ...], sb: tuple[int, ...], batch: bool) -> bool:
    """Whether numpy's `matmul` (`batch`: the axes before the last two broadcast) or `dot`
    accepts operands of shapes `sa` and `sb` (both at least 1-D): the last axis of the first
    has the length of the second's second-to-last (its only one, when 1-D). Checked on the
    shapes: calling numpy on zero arrays of these shapes, as before, multiplied them, ~4 M
    instructions for a 512x512 @ 512 (a third of tracing issue 13's tanh program)."""
    if sa[-1] != (sb[0] if len(sb) == 1 else sb[-2]):
        return False
    if not batch:
        return True
    try:
        np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        return False
    return True


def matmul(a: Any, b: Any) -> Tracer | None:
    """`a @ b` for 1-D and N-D operands (batch axes broadcast, as numpy)."""
    if not loopable(a, b):
        return None
    ops = _operands([a, b])
    if ops is None:
        return None
    sa, sb = ops[0].shape, ops[1].shape
    if not sa or not sb:
        return None  # numpy's rules raise its error
    if not _contracted_axes_agree(sa, sb, batch=True):
        return None
    nbatch = max(len(sa), len(sb)) - 2
    batch = _LETTERS[: max(nbatch, 0)]
    sub_a = "y" if len(sa) == 1 else batch[len(batch) - (len(sa) - 2) :] + "xy"
    sub_b = "y" if len(sb) == 1 else batch[len(batch) - (len(sb) - 2) :] + "yz"
    out = batch + ("x" if len(sa) > 1 else "") + ("z" if len(sb) > 1 else "")
    return contract(ops, [sub_a, sub_b], out, _product_dtype(ops))


def dot(a: Any, b: Any) -> Tracer | None:
    """`np.dot(a, b)`: the last axis of a with the second-to-last of b (the only one of a
    1-D b)."""
    if not loopable(a, b):
        return None
    ops = _operands([a, b])
    if ops is None:
        return None
    sa, sb = ops[0].shape, ops[1].shape
    if not sa or not sb:
        return ufunc_call(np.multiply, (a, b))
    if not _contracted_axes_agree(sa, sb, batch=False):
        return None
    if len(sa) + len(sb) > len(_LETTERS):
        return None
    pre_a = _LETTERS[: len(sa) - 1]
    rest = _LETTERS[len(sa) - 1 : len(sa) - 1 + len(sb) - 1]
    sub_a = pre_a + "z"
    sub_b = "z" if len(sb) == 1 else rest[:-1] + "z" + rest[-1]
    return contract(ops, [sub_a, sub_b], pre_a + rest, _product_dtype(ops))


def outer(a: Any, b: Any) -> Tracer | None:
    """`np.outer(a, b)` of two 1-D arrays."""
    if not loopable(a, b):
        return None
    ops = _operands([a, b])
    if ops is None or len(ops[0].shape) != 1 or len(ops[1].shape) != 1:
        return None
    return contract(ops, ["x", "y"], "xy", _product_dtype(ops))


def einsum(subscripts: str, *operands_: Any) -> Tracer | None:
    """`np.einsum` with explicit or implicit output, no ellipsis, no repeated index within
    one operand (a trace), any number of operands."""
    if not loopable(*operands_) or "." in subscripts:
        return None
    spec = subscripts.replace(" ", "")
    ins, _, out = spec.partition("->")
    subs = ins.split(",")
    if len(subs) != len(operands_):
        return None
    if "->" not in spec:
        letters = "".join(subs)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if any(len(set(s)) != len(s) for s in subs) or len(set(out)) != len(out):
        return None
    ops = _operands(list(operands_))
    if ops is None or any(len(s) != len(o.shape) for s, o in zip(subs, ops, strict=True)):
        return None
    try:
        np.einsum(spec, *[np.zeros(o.shape, np.int8) for o in ops])
    except ValueError:
        return None
    return contract(ops, subs, out, _product_dtype(ops))


__all__ = [
    "cast",
    "dot",
    "einsum",
    "in_memory",
    "matmul",
    "mean",
    "outer",
    "real_part",
    "reduce",
    "ufunc_call",
    "where",
]
