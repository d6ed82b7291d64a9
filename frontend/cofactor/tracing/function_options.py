"""numpy keyword arguments that change a function's numbers, taken on traced values.

The rules in `numpy_rules` & co. take the common arguments and used to drop others
silently, which gave numpy's result *without* them: `np.sum(x, where=m)` summed every
element, `np.max(x, initial=10)` ignored 10, `np.cumsum(x, dtype=int)` and
`np.mean(x, dtype=int)` kept floats, `np.linspace(..., retstep=True)` returned no step, and
`out=` (`np.sum(x, axis=0, out=y)`) left `y` unchanged. Here each is either done as numpy
does it, on top of the rule, or refused with an error naming it:

- `out=`, for every function rule: the result written into `out` (`out[...] = result`,
  with numpy's in-place semantics of tracing/aliasing.py), and `out` returned.
- `where=`/`initial=` of sum, prod, max/amax, min/amin, mean: masked-out elements replaced
  by the reduction's identity (or by `initial`, which max/min require with `where`, as
  numpy does), then `initial` folded into the result.
- `dtype=` of cumsum and mean: the elements cast first (mean's result too, as numpy's).
- `retstep=True` of linspace: `(samples, step)`; `where=` of all/any/var/std; `shape=` of
  zeros_like & co.; `dtype=` of trace.
- ufuncs (`ufunc_with_options`, called by `numpy_rules.array_ufunc`): `dtype=` casts the
  operands, `.reduce`'s `where=`/`initial=` as above; a call's `where=` and `signature=`
  are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileValueError
from cofactor.tracing.numpy_rules import FUNCTION_RULES, as_tracer, cast_tracer
from cofactor.tracing.tracer import normalize_dtype

#: reduction -> (its ufunc, the identity a masked-out element becomes; None: none)
_REDUCTIONS: dict[Any, tuple[np.ufunc, Any]] = {
    np.sum: (np.add, 0),
    np.prod: (np.multiply, 1),
    np.max: (np.maximum, None),
    np.amax: (np.maximum, None),
    np.min: (np.minimum, None),
    np.amin: (np.minimum, None),
}


def _with_out(rule: Callable, name: str) -> Callable:
    def with_out(*args: Any, **kwargs: Any) -> Any:
        out = kwargs.pop("out", None)
        result = rule(*args, **kwargs)
        if out is None:
            return result
        target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        if not hasattr(target, "__setitem__") or np.shape(target) != np.shape(result):
            raise CompileValueError(
                f"numpy.{name}: out= must be an array of the result's shape "
                f"{np.shape(result)}, got {np.shape(target)}"
            )
        target[...] = result
        return target

    return with_out


def _reduction(rule: Callable, func: Any) -> Callable:
    ufunc, identity = _REDUCTIONS[func]

    def reduce(a: Any, *args: Any, where: Any = None, initial: Any = None, **kwargs: Any):
        if where is not None and where is not True:
            fill = identity if initial is None else initial
            if fill is None:
                raise CompileValueError(
                    f"reduction operation '{ufunc.__name__}' does not have an identity, so to "
                    "use a where mask one has to specify 'initial'"
                )
            a = np.where(where, a, fill)
        result = rule(a, *args, **kwargs)
        return result if initial is None else ufunc(result, initial)

    return reduce


def _mean(rule: Callable) -> Callable:
    def mean(a: Any, axis: Any = None, dtype: Any = None, *, where: Any = None, **kwargs: Any):
        if where is not None and where is not True:
            mask = np.broadcast_to(where, np.shape(a))
            count = np.sum(mask, axis=axis, keepdims=kwargs.get("keepdims", False))
            total = np.sum(a, axis=axis, where=mask, dtype=dtype, **kwargs)
            return total / count
        if dtype is not None and np.dtype(dtype).kind in "biu":
            # numpy sums in the integer dtype and casts the quotient back (truncating)
            t = cast_tracer(as_tracer(a), normalize_dtype(dtype))
            return (rule(t, axis=axis, **kwargs)).astype(normalize_dtype(dtype))
        if dtype is None:
            return rule(a, axis=axis, **kwargs)
        return rule(a, axis=axis, dtype=dtype, **kwargs)

    return mean


def _cumsum(rule: Callable) -> Callable:
    def cumsum(a: Any, axis: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
        if dtype is not None:
            a = cast_tracer(as_tracer(a), normalize_dtype(dtype))
        return rule(a, axis, **kwargs)

    return cumsum


def _linspace(rule: Callable) -> Callable:
    def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
                 retstep: bool = False, dtype: Any = None, axis: int = 0) -> Any:  # fmt: skip
        if axis != 0:
            raise CompileError("numpy.linspace with axis != 0 is not supported on traced values")
        samples = rule(start, stop, num, endpoint)
        if dtype is not None:
            samples = samples.astype(dtype)
        if not retstep:
            return samples
        div = (num - 1) if endpoint else num
        step = (stop - start) / div if div > 0 else np.nan
        return samples, step

    return linspace


def _masked_logic(rule: Callable, fill: bool) -> Callable:
    def logic(a: Any, *args: Any, where: Any = None, **kwargs: Any) -> Any:
        if where is not None and where is not True:
            a = np.where(where, a, fill)
        return rule(a, *args, **kwargs)

    return logic


def _moment(func: Any) -> Callable:
    def moment(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
               keepdims: bool = False, *, where: Any = None, **kwargs: Any) -> Any:  # fmt: skip
        if where is None or where is True:
            return None
        t = as_tracer(a) if dtype is None else cast_tracer(as_tracer(a), normalize_dtype(dtype))
        mask = np.broadcast_to(where, t.shape)
        dev = t - np.mean(t, axis=axis, keepdims=True, where=mask)
        sq = np.real(dev * np.conj(dev)) if t.dtype.kind == "c" else dev * dev
        total = np.sum(sq, axis=axis, keepdims=keepdims, where=mask)
        var = total / (np.sum(mask, axis=axis, keepdims=keepdims) - ddof)
        return np.sqrt(var) if func is np.std else var

    return moment


def _either(masked: Callable, rule: Callable) -> Callable:
    def either(*args: Any, **kwargs: Any) -> Any:
        result = masked(*args, **kwargs)
        if result is None:
            kwargs.pop("where", None)
            return rule(*args, **kwargs)
        return result

    return either


def _like_shape(rule: Callable, name: str) -> Callable:
    def like(a: Any, *args: Any, shape: Any = None, **kwargs: Any) -> Any:
        result = rule(a, *args, **kwargs)
        if shape is None:
            return result
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        # every element of a *_like result is the same value: a broadcast copy of one
        one = as_tracer(result).reshape(-1)[:1].reshape(())
        if not one.size:  # (an empty prototype: nothing to broadcast)
            return rule(np.zeros(shape), *args, **kwargs)
        return np.broadcast_to(one, shape) * 1

    return like


def _result_dtype(rule: Callable) -> Callable:
    def with_dtype(*args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        result = rule(*args, **kwargs)
        return result if dtype is None else as_tracer(result).astype(normalize_dtype(dtype))

    return with_dtype


def ufunc_with_options(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """A ufunc call whose keywords change its numbers (`dtype=`, `where=`, and `initial=`
    of `.reduce`): done as numpy does, or refused naming the keyword."""
    kwargs = dict(kwargs)
    for harmless in ("casting", "order", "subok"):
        kwargs.pop(harmless, None)
    if kwargs.pop("signature", None) is not None:
        raise CompileError(f"numpy.{ufunc.__name__}(..., signature=...) is not supported")
    dtype = kwargs.pop("dtype", None)
    if dtype is not None:
        want = normalize_dtype(dtype)
        inputs = tuple(cast_tracer(as_tracer(x), want) for x in inputs)
    where = kwargs.pop("where", True)
    if method == "reduce":
        initial = kwargs.pop("initial", None)
        x = inputs[0]
        if where is not True:
            fill = ufunc.identity if initial is None else initial
            if fill is None:
                raise CompileValueError(
                    f"reduction operation '{ufunc.__name__}' does not have an identity, so to "
                    "use a where mask one has to specify 'initial'"
                )
            x = np.where(where, x, fill)
        result = getattr(ufunc, method)(x, **kwargs)
        return result if initial is None else ufunc(result, initial)
    if where is not True:
        raise CompileError(
            f"numpy.{ufunc.__name__}(..., where=...) is not supported on traced values; write "
            f"np.where(mask, numpy.{ufunc.__name__}(...), other) instead"
        )
    return getattr(ufunc, method)(*inputs, **kwargs)


def install() -> None:
    """Wraps the rules of FUNCTION_RULES (once, by numpy_api after every rule module)."""
    for func in _REDUCTIONS:
        if func in FUNCTION_RULES:
            FUNCTION_RULES[func] = _reduction(FUNCTION_RULES[func], func)
    FUNCTION_RULES[np.mean] = _mean(FUNCTION_RULES[np.mean])
    FUNCTION_RULES[np.cumsum] = _cumsum(FUNCTION_RULES[np.cumsum])
    FUNCTION_RULES[np.linspace] = _linspace(FUNCTION_RULES[np.linspace])
    FUNCTION_RULES[np.all] = _masked_logic(FUNCTION_RULES[np.all], True)
    FUNCTION_RULES[np.any] = _masked_logic(FUNCTION_RULES[np.any], False)
    for func in (np.var, np.std):
        FUNCTION_RULES[func] = _either(_moment(func), FUNCTION_RULES[func])
    for func in (np.zeros_like, np.ones_like, np.full_like, np.empty_like):
        FUNCTION_RULES[func] = _like_shape(FUNCTION_RULES[func], func.__name__)
    FUNCTION_RULES[np.trace] = _result_dtype(FUNCTION_RULES[np.trace])
    for func, rule in list(FUNCTION_RULES.items()):
        FUNCTION_RULES[func] = _with_out(rule, getattr(func, "__name__", "function"))
