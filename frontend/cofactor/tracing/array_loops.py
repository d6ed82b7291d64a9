"""Arrays in memory: numpy operations as `scf.for` loop nests over memrefs.

An array that lives in a memref (an entry argument, a QNode result, the result of one of
these loops) stays there: an elementwise ufunc, a reduction, a contraction (`matmul`, `dot`,
`einsum`) or a rearrangement (`transpose`, `reshape`, slicing) over it is one loop nest that
loads its operands and stores into a new buffer, so the IR is the same size whatever the
array's size, and Enzyme differentiates the loops rather than an unrolled expression.

The buffers are allocated once at the entry of the function being traced and freed at its
return (`TraceContext.hoisted_alloc`), so a loop nest inside a traced `for_loop` reuses its
buffer and repeated calls do not grow memory.

Arrays of at most `ELEMENTWISE_MAX` elements keep the per-element representation (an object
array of `Scalar`s): small classical pre/post-processing then folds constants and needs no
loops. Every function here returns None when its operands do not qualify; the caller then
falls back to the per-element rules (which load the elements from memory), so no operation
is lost, only unrolled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.ir import SSAValue

from cofactor.ir.builder import memref_type
from cofactor.tracing import context
from cofactor.tracing.scalars import (
    _b,
    _loop_nest,
    as_scalar,
    cast_scalar,
    const_scalar,
    python_dtype,
)
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Scalar, Tracer, normalize_dtype

#: arrays in memory with more elements than this are processed by loop nests
ELEMENTWISE_MAX = 16


def in_memory(x: Any) -> bool:
    """Whether `x` is a traced array held in a memref (its elements not loaded)."""
    return isinstance(x, Tracer) and x._elems is None and x.memref is not None


def loopable(*xs: Any) -> bool:
    """Whether an operation on `xs` should be a loop nest: one of them is a large array in
    memory (then the others are brought into memory or broadcast as loop invariants)."""
    return any(in_memory(x) and x.size > ELEMENTWISE_MAX for x in xs)


# ----------------------------------------------------------------------------------------
# operands
# ----------------------------------------------------------------------------------------
class Operand:
    """One operand of a loop nest: a memref indexed per iteration, a loop-invariant value
    (a Scalar or a Python constant, broadcast over `shape`), or a constant computed from
    the indices (`np.arange`, `np.eye`)."""

    __slots__ = ("dtype", "fn", "ref", "shape", "value")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        *,
        ref: SSAValue | None = None,
        value: Any = None,
        fn: Callable[[list[SSAValue]], Scalar] | None = None,
    ) -> None:
        self.shape, self.dtype, self.ref, self.value, self.fn = shape, dtype, ref, value, fn

    def load(self, ids: Sequence[SSAValue]) -> Any:
        """The element at `ids` (one index per axis of `shape`)."""
        if self.ref is not None:
            return load(self.ref, self.dtype, ids)
        if self.fn is not None:
            return self.fn(list(ids))
        return self.value

    def load_broadcast(self, ivs: Sequence[SSAValue], out_shape: tuple[int, ...]) -> Any:
        """The element that numpy's broadcasting pairs with position `ivs` of `out_shape`."""
        if self.ref is None and self.fn is None:
            return self.value
        off = len(out_shape) - len(self.shape)
        zero = _b().index(0) if 1 in self.shape else None
        ids = [
            zero if n == 1 and out_shape[off + k] != 1 else ivs[off + k]
            for k, n in enumerate(self.shape)
        ]
        return self.load(ids)


def load(ref: SSAValue, dtype: np.dtype, ids: Sequence[SSAValue]) -> Scalar:
    """One element of a memref (complex: the (re, im) pair along the trailing axis of 2)."""
    b = _b()
    if dtype == COMPLEX:
        return Scalar((b.load(ref, [*ids, b.index(0)]), b.load(ref, [*ids, b.index(1)])), COMPLEX)
    return Scalar(b.load(ref, list(ids)), dtype)


def store(s: Scalar, ref: SSAValue, ids: Sequence[SSAValue]) -> None:
    b = _b()
    if isinstance(s.value, tuple):
        b.store(s.value[0], ref, [*ids, b.index(0)])
        b.store(s.value[1], ref, [*ids, b.index(1)])
    else:
        b.store(s.value, ref, list(ids))


def select_scalar(c: Any, x: Any, y: Any, dtype: np.dtype) -> Scalar:
    """`x if c else y` for scalar operands, as `dtype` (a constant `c` picks at trace time)."""
    x, y, c = as_scalar(x, dtype), as_scalar(y, dtype), as_scalar(c, BOOL)
    if c.const is not None:
        return x if c.const else y
    b = _b()
    if dtype == COMPLEX:
        return Scalar(
            (b.select(c.value, x.value[0], y.value[0]), b.select(c.value, x.value[1], y.value[1])),
            dtype,
        )
    return Scalar(b.select(c.value, x.value, y.value), dtype)


def new_buffer(shape: tuple[int, ...], dtype: np.dtype) -> SSAValue:
    """A buffer for a loop's result, allocated at the function's entry, freed at return."""
    return context.current().hoisted_alloc(memref_type(shape, dtype))


def materialize(t: Tracer) -> SSAValue:
    """`t` in a memref: its own when it has one, else its elements stored into a buffer."""
    if in_memory(t):
        return t.memref
    buf = new_buffer(t.shape, t.dtype)
    b = _b()
    index: dict[int, SSAValue] = {}
    for pos in np.ndindex(*t.shape):
        ids = [index[p] if p in index else index.setdefault(p, b.index(p)) for p in pos]
        store(as_scalar(t.elems[pos], t.dtype), buf, ids)
    return buf


def operand(x: Any) -> Operand | None:
    """`x` (a traced array, a constant array or a number) as a loop operand; None for what
    a loop cannot take (an empty array, a value of a foreign type)."""
    if isinstance(x, Tracer):
        if x.size == 0:
            return None
        if x.shape == ():
            return Operand((), x.dtype, value=x.elems[()])
        return Operand(x.shape, x.dtype, ref=materialize(x))
    if isinstance(x, Scalar):
        return Operand((), x.dtype, value=x)
    if isinstance(x, bool | int | float | complex | np.generic):
        v = x.item() if isinstance(x, np.generic) else x
        return Operand((), python_dtype(v), value=v)
    if isinstance(x, list | tuple):
        try:
            arr = np.asarray(x)
        except ValueError:
            return None
        if arr.dtype == object:
            from cofactor.tracing.scalars import as_tracer

            return operand(as_tracer(x))
        x = arr
    if not isinstance(x, np.ndarray):
        return None
    if x.dtype == object:
        from cofactor.tracing.scalars import as_tracer

        return operand(as_tracer(x))
    if x.size == 0 or x.dtype.kind not in "biufc":
        return None
    return _constant(x)


def _constant(arr: np.ndarray) -> Operand:
    """A constant array: a broadcast value when uniform, an index formula for `arange` and
    `eye`, else a read-only global holding its data (bools: stored into a buffer)."""
    dtype = normalize_dtype(arr.dtype)
    flat = arr.reshape(-1)
    first = flat[0].item()
    if np.all(flat == flat[0]):
        return Operand(arr.shape, dtype, value=first)
    if arr.ndim == 1 and dtype in (INT, FLOAT):
        step = (flat[1] - flat[0]).item()
        if np.array_equal(flat, flat[0] + step * np.arange(flat.size, dtype=arr.dtype)):
            return Operand(arr.shape, dtype, fn=lambda ids: _affine(ids[0], first, step, dtype))
    if arr.ndim == 2 and np.array_equal(arr, np.eye(*arr.shape, dtype=arr.dtype)):
        return Operand(arr.shape, dtype, fn=lambda ids: _identity(ids, dtype))
    if dtype in (FLOAT, INT, COMPLEX):
        ref = _b().constant_array(context.current().fresh_name("__cf_const"), arr.astype(dtype))
        return Operand(arr.shape, dtype, ref=ref)
    from cofactor.tracing.scalars import as_tracer

    t = as_tracer(arr)
    return Operand(t.shape, t.dtype, ref=materialize(t))


def _affine(i: SSAValue, start: Any, step: Any, dtype: np.dtype) -> Scalar:
    """`start + step * i` for an index `i` (the elements of `np.arange`)."""
    from cofactor.tracing.scalars import scalar_ufunc

    k = cast_scalar(Scalar(_b().from_index(i), INT), dtype)
    return as_scalar(scalar_ufunc(np.add, start, scalar_ufunc(np.multiply, k, step)), dtype)


def _identity(ids: list[SSAValue], dtype: np.dtype) -> Scalar:
    b = _b()
    return cast_scalar(Scalar(b.cmpi("eq", ids[0], ids[1]), BOOL), dtype)


# ----------------------------------------------------------------------------------------
# loop nests
# ----------------------------------------------------------------------------------------
def elementwise(
    fn: Callable[..., Any], operands: Sequence[Operand], out: np.dtype
) -> Tracer | None:
    """`fn` applied to the broadcast elements of `operands`, stored into a new buffer of
    dtype `out`; None when the shapes do not broadcast to a non-empty array."""
    shape = np.broadcast_shapes(*[o.shape for o in operands])
    if not shape or 0 in shape:
        return None
    buf = new_buffer(shape, out)

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        vals = [o.load_broadcast(ivs, shape) for o in operands]
        store(as_scalar(fn(*vals), out), buf, ivs)
        return []

    op = _loop_nest(shape, [], body)
    return Tracer.from_memref(buf, shape, out, anchor=op)


def _values(s: Scalar) -> list[SSAValue]:
    return list(s.value) if isinstance(s.value, tuple) else [s.value]


def _from_values(values: Sequence[SSAValue], dtype: np.dtype) -> Scalar:
    return Scalar(tuple(values) if dtype == COMPLEX else values[0], dtype)


def _accumulate(
    shape: tuple[int, ...],
    init: Scalar,
    step: Callable[[list[SSAValue], Scalar], Scalar],
    dtype: np.dtype,
) -> Scalar:
    """`acc = init; for ivs in ndindex(shape): acc = step(ivs, acc)` as a loop nest."""
    if not shape:
        return as_scalar(step([], init), dtype)
    init = as_scalar(init, dtype)

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        return _values(as_scalar(step(ivs, _from_values(accs, dtype)), dtype))

    op = _loop_nest(shape, _values(init), body)
    return _from_values(list(op.results), dtype)


def _with_outer(
    out_shape: tuple[int, ...], dtype: np.dtype, element: Callable[[list[SSAValue]], Scalar]
) -> Tracer:
    """An array of `out_shape` whose element at `ivs` is `element(ivs)` (a scalar result
    when `out_shape` is ())."""
    if not out_shape:
        from cofactor.tracing.scalars import as_tracer

        return as_tracer(element([]))
    buf = new_buffer(out_shape, dtype)

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        store(as_scalar(element(ivs), dtype), buf, ivs)
        return []

    op = _loop_nest(out_shape, [], body)
    return Tracer.from_memref(buf, out_shape, dtype, anchor=op)


#: reductions done by loops: the ufunc combining two elements and its identity (None: the
#: reduction starts from the first element)
_IDENTITIES: dict[np.ufunc, Any] = {
    np.add: 0,
    np.multiply: 1,
    np.maximum: None,
    np.minimum: None,
    np.logical_and: True,
    np.logical_or: False,
}


def _axes(axis: Any, nd: int) -> tuple[int, ...] | None:
    """`axis` (an int or a tuple) as sorted non-negative axes; None when not valid."""
    try:
        raw = [int(a) for a in np.atleast_1d(axis)]
    except (TypeError, ValueError):
        return None
    if any(not -nd <= a < nd for a in raw) or len(set(a % nd for a in raw)) != len(raw):
        return None
    return tuple(sorted(a % nd for a in raw))


def reduction(
    ufunc: np.ufunc, t: Tracer, axis: Any, keepdims: bool, dtype: np.dtype
) -> Tracer | None:
    """`ufunc.reduce(t, axis, keepdims)` accumulated in `dtype` (numpy's `np.sum(..., axis)`
    and friends); None when the reduction is not one the loops do."""
    from cofactor.tracing.scalars import scalar_ufunc

    if ufunc not in _IDENTITIES or not in_memory(t) or t.size == 0:
        return None
    if _IDENTITIES[ufunc] is None and dtype == COMPLEX:
        return None
    nd = t.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = _axes(axis, nd)
        if axes is None:
            return None  # numpy's own rules raise the error
    kept = [d for d in range(nd) if d not in axes]
    red_shape = tuple(t.shape[d] for d in axes)
    out_shape = tuple(t.shape[d] for d in kept)
    identity = _IDENTITIES[ufunc]
    if ufunc in (np.logical_and, np.logical_or):
        dtype = BOOL

    def element(out_ivs: list[SSAValue]) -> Scalar:
        # (the kept and the reduced axes are every axis: `full` fills each position)
        def full(red_ivs: list[SSAValue]) -> list[SSAValue]:
            ids: list[Any] = [None] * nd
            for d, iv in zip(kept, out_ivs, strict=True):
                ids[d] = iv
            for d, iv in zip(axes, red_ivs, strict=True):
                ids[d] = iv
            return ids

        def value(red_ivs: list[SSAValue]) -> Scalar:
            return cast_scalar(load(t.memref, t.dtype, full(red_ivs)), dtype)

        if identity is None and dtype == FLOAT:
            return _extreme_position(ufunc is np.maximum, red_shape, value)
        if identity is None:
            # (only here: an index constant nobody uses made a differentiated function's
            # dead-code analysis run, ir/dead_code.py, ~2 M instructions at the first call)
            init = value([_b().index(0)] * len(axes))
        else:
            init = const_scalar(identity, dtype)
        return _accumulate(
            red_shape, init, lambda ivs, acc: scalar_ufunc(ufunc, acc, value(ivs)), dtype
        )

    result = _with_outer(out_shape, dtype, element)
    if keepdims:
        from cofactor.tracing.array_views import reshape

        kd = tuple(1 if d in axes else n for d, n in enumerate(t.shape))
        return reshape(result, kd) if out_shape else np.reshape(result, kd)
    return result


def _extreme_position(
    largest: bool, shape: tuple[int, ...], value: Callable[[list[SSAValue]], Scalar]
) -> Scalar:
    """max/min of floats: the loops carry the position of the extreme element (the last of
    equal ones, as numpy's fold `maximum(acc, x)`, which returns x on a tie: the sign of a
    zero among +0.0 and -0.0; the first NaN wins, as numpy's) and the result is loaded from
    it. A carried float chosen by selects would leave Enzyme unable to type the loop's phi
    ("Cannot deduce type")."""
    b = _b()
    init = [b.index(0)] * len(shape)

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        x, best = value(ivs).value, value(list(accs)).value
        better = b.binary(
            arith.OrIOp,
            b.cmpf("oge" if largest else "ole", x, best),
            b.binary(arith.AndIOp, b.cmpf("uno", x, x), b.cmpf("ord", best, best)),
        )
        return [b.select(better, iv, acc) for iv, acc in zip(ivs, accs, strict=True)]

    op = _loop_nest(shape, init, body)
    return value(list(op.results))


def contract(
    operands: Sequence[Operand], subscripts: Sequence[str], out: str, dtype: np.dtype
) -> Tracer:
    """`np.einsum("ab,bc->ac", ...)` for operands whose subscripts name each axis once:
    a loop over the output's indices, an inner loop over the summed ones. An axis of size
    1 pairs with any size (numpy's broadcasting, as matmul's batch axes need)."""
    from cofactor.tracing.scalars import scalar_ufunc

    sizes: dict[str, int] = {}
    for o, sub in zip(operands, subscripts, strict=True):
        for letter, n in zip(sub, o.shape, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), n)
    summed = [c for c in dict.fromkeys("".join(subscripts)) if c not in out]
    out_shape = tuple(sizes[c] for c in out)

    def product(at: dict[str, SSAValue]) -> Scalar:
        zero = _b().index(0) if any(1 in o.shape for o in operands) else None
        acc: Any = None
        for o, sub in zip(operands, subscripts, strict=True):
            ids = [
                zero if n == 1 and sizes[c] != 1 else at[c]
                for c, n in zip(sub, o.shape, strict=True)
            ]
            v = cast_scalar(as_scalar(o.load(ids), o.dtype), dtype)
            acc = v if acc is None else as_scalar(scalar_ufunc(np.multiply, acc, v), dtype)
        return acc

    def element(out_ivs: list[SSAValue]) -> Scalar:
        at = dict(zip(out, out_ivs, strict=True))
        if not summed:
            return product(at)

        def step(ivs: list[SSAValue], acc: Scalar) -> Scalar:
            return scalar_ufunc(np.add, acc, product({**at, **dict(zip(summed, ivs, strict=True))}))

        return _accumulate(tuple(sizes[c] for c in summed), const_scalar(0, dtype), step, dtype)

    return _with_outer(out_shape, dtype, element)


def gather(
    t: Tracer, out_shape: tuple[int, ...], source: Callable[[list[SSAValue]], list[SSAValue]]
) -> Tracer:
    """A new array of `out_shape` whose element at `ivs` is `t`'s at `source(ivs)`: the copy
    behind transpose, reshape and slicing of an array in memory."""
    ref = materialize(t)
    return _with_outer(out_shape, t.dtype, lambda ivs: load(ref, t.dtype, source(ivs)))


def index_arith(op: type, a: SSAValue, c: int) -> SSAValue:
    """`a <op> c` on index values (for slicing offsets and reshape's flat positions)."""
    b = _b()
    return b.binary(op, a, b.index(c))
