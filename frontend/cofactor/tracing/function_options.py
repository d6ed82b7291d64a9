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
- `retstep=True` of linspace: `(samples, step)`.
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


def install() -> None:
    """Wraps the rules of FUNCTION_RULES (once, by numpy_api after every rule module)."""
    for func in _REDUCTIONS:
        if func in FUNCTION_RULES:
            FUNCTION_RULES[func] = _reduction(FUNCTION_RULES[func], func)
    FUNCTION_RULES[np.mean] = _mean(FUNCTION_RULES[np.mean])
    FUNCTION_RULES[np.cumsum] = _cumsum(FUNCTION_RULES[np.cumsum])
    FUNCTION_RULES[np.linspace] = _linspace(FUNCTION_RULES[np.linspace])
    for func, rule in list(FUNCTION_RULES.items()):
        FUNCTION_RULES[func] = _with_out(rule, getattr(func, "__name__", "function"))
