"""autograph's item primitives: `x[i]`, `x[i] = v` and `x[i] <op>= v` in a converted
function (malt's LISTS feature rewrites them into these calls, as Catalyst's does)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from cofactor.errors import CompileError


def is_traced(x: Any) -> bool:
    from cofactor.tracing.tracer import Tracer

    return isinstance(x, Tracer) or type(x).__name__ == "Scalar"


def _needs_tracer(target: Any, *values: Any) -> bool:
    """A numpy array indexed by / written with a traced value: numpy cannot do it."""
    from cofactor.tracing.tracer import _contains_traced

    def traced(v: Any) -> bool:
        if isinstance(v, slice):
            return any(traced(p) for p in (v.start, v.stop, v.step))
        if isinstance(v, tuple):
            return any(traced(p) for p in v)
        return _contains_traced(v)

    return isinstance(target, np.ndarray) and any(traced(v) for v in values)


def _traced_copy(target: np.ndarray) -> Any:
    from cofactor.tracing.scalars import as_tracer

    return as_tracer(target)


def get_item(target: Any, key: Any, opts: Any = None) -> Any:
    """`target[key]` in a converted function (a numpy constant indexed by a traced integer
    is indexed as a traced array)."""
    if _needs_tracer(target, key):
        target = _traced_copy(target)
    elif isinstance(target, list | tuple) and is_traced(key):
        raise CompileError(
            f"a Python {type(target).__name__} indexed by a traced integer (e.g. a loop "
            "variable of a loop with a traced bound, which has no concrete __index__): its "
            "elements are Python objects chosen at trace time; make it an array "
            "(np.array(...)) to index it in compiled code"
        )
    return target[key]


def _outside_copy(target: Any) -> Any:
    from cofactor.tracing.aliasing import outside_copy

    return outside_copy(target) if hasattr(target, "_region") else target


def set_item(target: Any, key: Any, value: Any) -> Any:
    """`target[key] = value` in a converted function, which rebinds `target` to the result:
    a numpy array written with a traced value (or at a traced index) becomes a traced copy
    holding the update, as `x.at[key].set(value)` in Catalyst; other targets are updated
    in place."""
    if _needs_tracer(target, key, value):
        target = _traced_copy(target)
    elif is_traced(target):
        target = _outside_copy(target)  # (from outside the body: a copy, rebound)
    target[key] = value
    return target


_AUGMENTED = {
    "add": operator.iadd,
    "sub": operator.isub,
    "mult": operator.imul,
    "div": operator.itruediv,
    "pow": operator.ipow,
}


def update_item_with_op(target: Any, key: Any, value: Any, op: str) -> Any:
    """`target[key] <op>= value` in a converted function (see `set_item`)."""
    if _needs_tracer(target, key, value):
        target = _traced_copy(target)
    elif is_traced(target):
        target = _outside_copy(target)
    target[key] = _AUGMENTED[op](target[key], value)
    return target
