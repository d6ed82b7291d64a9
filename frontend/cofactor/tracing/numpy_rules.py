"""Numpy on tracers: one table from numpy ufunc/function to the IR it emits.

* `UFUNC_RULES`: per ufunc, how to compute one element for each kind of operand
  ("f" float64, "i" int64, "b" bool, "c" complex128). Dtype resolution follows numpy
  (`ufunc.resolve_dtypes`), normalised onto the supported dtypes.
* `FUNCTION_RULES`: numpy functions (`np.sum`, `np.reshape`, `np.where`, ...). Most run numpy
  itself on the object array of `Scalar`s; only functions that need concrete values get rules.

Anything not in the tables raises a `CompileError` naming the function (with a hint for the
functions in `REFUSED_FUNCTIONS`).

The rules are split by concept: `element_rules` (per-element IR of each ufunc), `scalars`
(constants, casts, `scalar_ufunc`), this module (array-level dispatch, `out=`, structural
functions; each tries the loop nests of `array_rules`/`array_views` first, which take large
arrays in memory), and `reductions`, `elementwise`, `logic`, `linalg`, `arrays`, which add
their rules to `FUNCTION_RULES` when `numpy_api` imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileTypeError, CompileValueError
from cofactor.ir.builder import memref_type
from cofactor.tracing import array_rules, array_views, context
from cofactor.tracing.aliasing import VIEW_FUNCTIONS, assign, share_memory
from cofactor.tracing.array_loops import in_memory, select_scalar
from cofactor.tracing.element_rules import UFUNC_RULES
from cofactor.tracing.scalars import (  # re-exported: other modules import them from here
    _b,
    _loop_dtypes,
    _objarr,
    as_scalar,
    as_tracer,
    cast_scalar,
    const_scalar,
    python_dtype,
    scalar_imag,
    scalar_real,
    scalar_ufunc,
)
from cofactor.tracing.tracer import (
    COMPLEX,
    FLOAT,
    Scalar,
    Tracer,
    normalize_dtype,
)


def cast_tracer(t: Tracer, dtype: np.dtype) -> Tracer:
    if t.dtype == dtype:
        return t
    looped = array_rules.cast(t, dtype)
    if looped is not None:
        return looped
    conv = np.frompyfunc(lambda s: cast_scalar(s, dtype), 1, 1)
    return Tracer(_objarr(conv(t.elems)), dtype)


# ----------------------------------------------------------------------------------------
# array-level dispatch
# ----------------------------------------------------------------------------------------
def _wrap(result: Any) -> Tracer:
    """An object array / Scalar / constant computed by numpy -> Tracer."""
    return as_tracer(result)


def inplace_result(target: Tracer, result: Any, name: str) -> Tracer:
    """`result` as the new value of `target` under numpy's rules for writing into an
    existing array (`x += y`, `out=x`): the result must broadcast to `target`'s shape and
    cast to its dtype with `same_kind` casting (an int array cannot take floats)."""
    res = as_tracer(result)
    try:
        shape = np.broadcast_shapes(res.shape, target.shape)
    except ValueError:
        shape = None
    if shape != target.shape:
        raise CompileValueError(
            f"numpy.{name}: non-broadcastable output operand with shape {target.shape} "
            f"doesn't match the broadcast shape {res.shape}"
        )
    if not np.can_cast(res.dtype, target.dtype, casting="same_kind"):
        raise CompileTypeError(
            f"Cannot cast ufunc '{name}' output from {res.dtype!r} to {target.dtype!r} with "
            "casting rule 'same_kind' (as numpy); write `x = x.astype(float) + ...` instead"
        )
    elems = np.broadcast_to(cast_tracer(res, target.dtype).elems, target.shape).copy()
    return Tracer(elems, target.dtype)


def _ufunc_with_out(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict, out: Any) -> Any:
    """`numpy.<ufunc>(..., out=c)`: the result is written into the traced array `c` (its
    elements are replaced, as `c[...] = result` does) and `c` is returned, as in numpy."""
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], Tracer):
        raise CompileError(
            f"numpy.{ufunc.__name__}(..., out=...) on traced values needs one traced array as "
            f"`out`; write `c = numpy.{ufunc.__name__}(a, b)` instead (for `y[k] += x` into a "
            "numpy array, `y[k] = y[k] + x`)"
        )
    target = outs[0]
    new = inplace_result(target, array_ufunc(ufunc, method, inputs, kwargs), ufunc.__name__)
    assign(target, new.elems, "output array")  # (numpy's views of `c` see it: aliasing.py)
    return target


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    if kwargs.keys() - {"out", "axis", "keepdims"}:  # (dtype=, where=, ...: never dropped)
        from cofactor.tracing.function_options import ufunc_with_options as with_options

        return with_options(ufunc, method, inputs, kwargs)
    out = kwargs.pop("out", None)
    if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
        return _ufunc_with_out(ufunc, method, inputs, kwargs, out)
    if ufunc is np.matmul:
        looped = array_rules.matmul(*inputs) if len(inputs) == 2 and not kwargs else None
        if looped is not None:
            return looped
        result = _wrap(np.matmul(*[_as_elems(x) for x in inputs]))
        want = normalize_dtype(np.result_type(*[as_tracer(x).dtype for x in inputs]))
        return result if result.dtype == want else cast_tracer(result, want)  # (empty sums)
    if method == "reduce":
        axis, keepdims = kwargs.get("axis", 0), kwargs.get("keepdims", False)
        looped = array_rules.reduce(ufunc, inputs[0], axis, keepdims, kwargs.get("dtype"))
        return looped if looped is not None else _reduce(ufunc, inputs[0], axis)
    if method == "outer" and len(inputs) == 2 and not kwargs:
        # ufunc.outer(a, b): a's axes, then b's, broadcast against each other
        a, b = as_tracer(inputs[0]), as_tracer(inputs[1])
        return ufunc(np.reshape(a, a.shape + (1,) * b.ndim), b)
    if method != "__call__":
        raise CompileError(
            f"numpy.{ufunc.__name__}.{method} is not supported on traced values; write the "
            "loop with cofactor.for_loop or use numpy.cumsum/numpy.sum"
        )
    if ufunc is np.divmod and not kwargs:  # (Python's divmod(x, y) too)
        return np.floor_divide(*inputs), np.remainder(*inputs)
    if ufunc not in UFUNC_RULES:
        raise CompileError(f"numpy.{ufunc.__name__} is not supported by cofactor's tracer")
    looped = array_rules.ufunc_call(ufunc, inputs)
    if looped is not None:
        return looped
    # constants stay Python values (folded or materialised per element by scalar_ufunc)
    operands = [_ufunc_operand(x) for x in inputs]
    ins, out = _loop_dtypes(ufunc, [d for _, d in operands])
    elems = np.broadcast_arrays(*[e for e, _ in operands])
    vec = np.frompyfunc(lambda *xs: scalar_ufunc(ufunc, *xs), len(inputs), 1)
    result = _objarr(vec(*elems))
    return Tracer(result, out)


# ----------------------------------------------------------------------------------------
# arrays in memory (loop nests over them are in `array_rules`)
# ----------------------------------------------------------------------------------------
_in_memory = in_memory


def store_tracer(t: Tracer, ref: Any) -> None:
    """Write a traced array into the memref `ref` (memref.copy when it is already a memref)."""
    b = _b()
    if t._elems is None and t.memref is not None:
        b.copy(t.memref, ref)
        return
    dtype = t.dtype
    index: dict[int, Any] = {}

    def idx(i: int) -> Any:
        if i not in index:
            index[i] = b.index(i)
        return index[i]

    elems = cast_tracer(t, dtype).elems
    for pos in np.ndindex(*t.shape):
        s = elems[pos]
        ids = [idx(p) for p in pos]
        if dtype == COMPLEX:
            b.store(s.value[0], ref, [*ids, idx(0)])
            b.store(s.value[1], ref, [*ids, idx(1)])
        else:
            b.store(s.value, ref, ids)


def in_memory(t: Tracer) -> Any:
    """A memref holding `t`, to pass to a function: its own memref when it is backed by one,
    otherwise a copy in a buffer allocated once at the function's entry."""
    if t._elems is None and t.memref is not None:
        return t.memref
    buf = context.current().hoisted_alloc(memref_type(t.shape, t.dtype))
    store_tracer(t, buf)
    return buf


def _ufunc_operand(x: Any) -> tuple[np.ndarray, np.dtype]:
    """(object array of elements, dtype) of a ufunc operand, without materialising constants."""
    if isinstance(x, Tracer):
        return x.elems, x.dtype
    if isinstance(x, np.ndarray) and x.dtype != object:
        return x.astype(object), normalize_dtype(x.dtype)
    if isinstance(x, bool | int | float | complex | np.generic):
        return _objarr(x.item() if isinstance(x, np.generic) else x), python_dtype(x)
    t = as_tracer(x)
    return t.elems, t.dtype


def _as_elems(x: Any) -> np.ndarray:
    return as_tracer(x).elems


def _reduce(ufunc: np.ufunc, x: Any, axis: Any) -> Tracer:
    t = as_tracer(x)
    fn = np.frompyfunc(lambda a, b: scalar_ufunc(ufunc, a, b), 2, 1)
    return _wrap(fn.reduce(t.elems, axis=axis))


def _select(c: Scalar, x: Any, y: Any) -> Scalar:
    dtype = normalize_dtype(np.result_type(python_dtype(x), python_dtype(y)))
    return select_scalar(c, x, y, dtype)


def _where(cond, x=None, y=None):
    if x is None or y is None:
        raise CompileError(
            "numpy.where(cond) with one argument needs concrete values (dynamic shape)"
        )
    looped = array_rules.where(cond, x, y)
    if looped is not None:
        return looped
    c, tx, ty = as_tracer(cond), as_tracer(x), as_tracer(y)
    dtype = normalize_dtype(np.result_type(tx.dtype, ty.dtype))
    ce, xe, ye = np.broadcast_arrays(c.elems, tx.elems, ty.elems)
    fn = np.frompyfunc(lambda a, p, q: _select(a, as_scalar(p, dtype), as_scalar(q, dtype)), 3, 1)
    return Tracer(_objarr(fn(ce, xe, ye)), dtype)


def _structural(np_fn: Callable):
    """Functions that only rearrange elements: run numpy on the object arrays."""

    def rule(*args, **kwargs):
        args = [_elems_of(a) for a in args]
        kwargs = {k: _elems_of(v) for k, v in kwargs.items()}
        return _wrap(np_fn(*args, **kwargs))

    return rule


def _rearranging(np_fn: Callable, permutes: bool):
    """reshape-like (`permutes` False) and transpose-like functions: a loop copy for a large
    array in memory (`array_views`), else numpy on the object array. numpy itself, run on a
    probe array, works out the result's shape or axis order from the arguments."""
    fallback = _structural(np_fn)

    def rule(a, *args, **kwargs):
        if isinstance(a, Tracer) and in_memory(a) and kwargs.get("order", "C") == "C":
            result = _rearranged(np_fn, permutes, a, args, kwargs)
            if result is not None:
                return result
        return fallback(a, *args, **kwargs)

    return rule


def _rearranged(np_fn: Callable, permutes: bool, a: Tracer, args: tuple, kwargs: dict) -> Any:
    if permutes:
        # unique strides 1, 2, 4, ... name the source axis of each result axis; the probe
        # is a view that is never read
        strides = tuple(1 << k for k in range(a.ndim))
        probe = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), a.shape, strides)
    else:
        probe = np.zeros(a.shape, np.int8)
    try:
        y = np_fn(probe, *args, **kwargs)
    except Exception:  # noqa: BLE001 - the per-element rule raises numpy's error
        return None
    if not permutes:
        return array_views.reshape(a, y.shape)
    if y.ndim != a.ndim:
        return None
    return array_views.transpose(a, [int(s).bit_length() - 1 for s in y.strides])


def _elems_of(x: Any) -> Any:
    if isinstance(x, Tracer):
        return x.elems
    if isinstance(x, list | tuple) and any(isinstance(v, Tracer) for v in x):
        return type(x)(_elems_of(v) for v in x)
    return x


def _sequence_rule(np_fn: Callable):
    """stack/concatenate: numpy on object arrays loses dtype; cast all to the common dtype."""

    def rule(arrays, *args, **kwargs):
        if np_fn in (np.stack, np.concatenate) and set(kwargs) <= {"axis"} and len(args) <= 1:
            axis = args[0] if args else kwargs.get("axis", 0)
            if axis is not None:
                joined = array_views.join(list(arrays), axis, new_axis=np_fn is np.stack)
                if joined is not None:
                    return joined
        ts = [as_tracer(a) for a in arrays]
        dtype = normalize_dtype(np.result_type(*[t.dtype for t in ts]))
        return _wrap(np_fn([cast_tracer(t, dtype).elems for t in ts], *args, **kwargs))

    return rule


def _copy(a, *args, **kwargs):
    if isinstance(a, Tracer) and in_memory(a):
        return a.copy()  # shares the memref: arrays in memory are never written in place
    return _structural(np.copy)(a, *args, **kwargs)


def _like(fill: Any):
    def rule(a, dtype=None, **kw):
        t = as_tracer(a)
        d = normalize_dtype(dtype) if dtype is not None else t.dtype
        return np.full(t.shape, fill, dtype=d)

    return rule


def _shape(a):
    return as_tracer(a).shape


def _ndim(a):
    return as_tracer(a).ndim


def _size(a, axis=None):
    t = as_tracer(a)
    return t.size if axis is None else t.shape[axis]


def _real(a):
    t = as_tracer(a)
    looped = array_rules.real_part(t)
    if looped is not None:
        return looped
    return Tracer(
        _objarr(np.frompyfunc(scalar_real, 1, 1)(t.elems)), FLOAT if t.dtype == COMPLEX else t.dtype
    )


def _imag(a):
    t = as_tracer(a)
    looped = array_rules.real_part(t, imag=True)
    if looped is not None:
        return looped
    return Tracer(
        _objarr(np.frompyfunc(scalar_imag, 1, 1)(t.elems)), FLOAT if t.dtype == COMPLEX else t.dtype
    )


def _linspace(start, stop, num=50, endpoint=True, **kw):
    s, e = as_scalar(start, FLOAT), as_scalar(stop, FLOAT)
    div = (num - 1) if endpoint else num
    step = scalar_ufunc(np.true_divide, scalar_ufunc(np.subtract, e, s), float(max(div, 1)))
    out = np.empty((num,), dtype=object)
    for i in range(num):
        out[i] = scalar_ufunc(np.add, s, scalar_ufunc(np.multiply, step, float(i)))
    if endpoint and num > 1:
        out[-1] = e
    return Tracer(out, FLOAT)


def _clip(a, a_min=None, a_max=None, *, min=None, max=None, **kw):  # noqa: A002
    if min is not None or max is not None:  # (numpy >= 2.1's names)
        if a_min is not None or a_max is not None:
            raise CompileValueError(
                "Passing `min` or `max` keyword argument when `a_min` and `a_max` are "
                "provided is forbidden."
            )
        a_min, a_max = min, max
    t = a
    if a_min is not None:
        t = _clip_side(t, a_min, np.maximum, np.less_equal)
    if a_max is not None:
        t = _clip_side(t, a_max, np.minimum, np.greater_equal)
    return as_tracer(t)


def _clip_side(x: Any, bound: Any, extreme: np.ufunc, at_or_beyond: np.ufunc) -> Any:
    """numpy's `extreme(x, bound)`, but an x at the bound takes the bound itself, so that
    its gradient is 0 there, as autograd's clip (PennyLane's default interface) has it;
    a tie of np.maximum alone would split the gradient (JAX's clip: 0.5 at a bound)."""
    value = extreme(x, bound)
    if as_tracer(value).dtype != FLOAT:
        return value
    return np.where(at_or_beyond(x, bound), bound, value)  # (a NaN x or bound: `value`)


def _angle(z, deg=False):
    t = as_tracer(z)
    a = np.arctan2(np.imag(t), np.real(t))
    return a * (180 / np.pi) if deg else a


def _result_type(*args):
    return np.result_type(*[as_tracer(a).dtype if isinstance(a, Tracer) else a for a in args])


#: numpy function -> rule. The rule receives the function's own arguments.
FUNCTION_RULES: dict[Callable, Callable] = {
    np.where: _where,
    np.clip: _clip,
    np.reshape: _rearranging(np.reshape, permutes=False),
    np.transpose: _rearranging(np.transpose, permutes=True),
    np.swapaxes: _rearranging(np.swapaxes, permutes=True),
    np.moveaxis: _rearranging(np.moveaxis, permutes=True),
    np.squeeze: _rearranging(np.squeeze, permutes=False),
    np.expand_dims: _rearranging(np.expand_dims, permutes=False),
    np.ravel: _rearranging(np.ravel, permutes=False),
    np.flip: _structural(np.flip),
    np.roll: _structural(np.roll),
    np.diag: _structural(np.diag),
    np.diagonal: _structural(np.diagonal),
    np.tile: _structural(np.tile),
    np.repeat: _structural(np.repeat),
    np.broadcast_to: _structural(np.broadcast_to),
    np.atleast_1d: _rearranging(np.atleast_1d, permutes=False),
    np.atleast_2d: _rearranging(np.atleast_2d, permutes=False),
    np.copy: _copy,
    np.take: _structural(np.take),
    np.stack: _sequence_rule(np.stack),
    np.concatenate: _sequence_rule(np.concatenate),
    np.hstack: _sequence_rule(np.hstack),
    np.vstack: _sequence_rule(np.vstack),
    np.zeros_like: _like(0),
    np.ones_like: _like(1),
    np.shape: _shape,
    np.ndim: _ndim,
    np.size: _size,
    np.real: _real,
    np.imag: _imag,
    np.linspace: _linspace,
    np.result_type: _result_type,
    np.angle: _angle,
}


#: numpy functions cofactor refuses on traced values -> what to do instead
REFUSED_FUNCTIONS: dict[Callable, str] = {}


def array_function(func: Callable, args: tuple, kwargs: dict) -> Any:
    rule = FUNCTION_RULES.get(func)
    if rule is None:
        name = getattr(func, "__module__", "numpy") + "." + getattr(func, "__name__", str(func))
        name = name.replace("numpy.linalg._linalg", "numpy.linalg")
        hint = REFUSED_FUNCTIONS.get(func, "")
        raise CompileError(
            f"{name} is not supported on traced values by cofactor" + (f"; {hint}" if hint else "")
        )
    result = rule(*args, **kwargs)
    if func in VIEW_FUNCTIONS and args and isinstance(args[0], Tracer):
        if isinstance(result, Tracer):  # numpy's result may be a view: tracing/aliasing.py
            base = args[0]
            if func in (np.real, np.imag) and base.dtype == COMPLEX:
                share_memory(base, result, None)  # (a part of each element: not followed)
            else:
                share_memory(base, result, lambda buf: func(buf, *args[1:], **kwargs))
    return result


__all__ = [
    "FUNCTION_RULES",
    "REFUSED_FUNCTIONS",
    "UFUNC_RULES",
    "array_function",
    "array_ufunc",
    "as_scalar",
    "as_tracer",
    "cast_scalar",
    "cast_tracer",
    "const_scalar",
    "inplace_result",
    "scalar_imag",
    "scalar_real",
    "scalar_ufunc",
    "store_tracer",
]
