"""Autograd through a compiled function: `qml.grad(qjit_fn)` and PennyLane's optimizers
(`opt.step(qjit_cost, params)`) outside qjit.

Autograd calls the function with its `ArrayBox` tracers. A compiled function cannot read
them, so the call is made an autograd primitive: its value is the compiled function at the
unboxed arguments, and its vector-Jacobian product for each boxed positional argument is
`cofactor.vjp` of the same function (compiled once per function, argument layout and static
values, by `vjp`'s own cache). The derivative is thus cofactor's (the QNode's `diff_method`,
Enzyme for the classical code), as inside qjit.

Only first derivatives: autograd nesting `qml.grad` twice would need the vjp of a compiled
vjp, which is refused with the way out (`cofactor.jacobian` of `cofactor.grad` with
`method="fd"` inside qjit).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from cofactor.errors import CompileError, CompileTypeError

#: per compiled function: the function of its dynamic arguments that `vjp` differentiates,
#: one per static layout (its identity keys vjp's compile cache)
_DIFFERENTIABLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _is_box(x: Any) -> bool:
    from autograd.tracer import Box

    return isinstance(x, Box)


def _holds_box(x: Any) -> bool:
    if _is_box(x):
        return True
    if isinstance(x, list | tuple):
        return any(_holds_box(v) for v in x)
    if isinstance(x, dict):
        return any(_holds_box(v) for v in x.values())
    return False


def call_under_autograd(qjit_fn: Any, args: tuple, kwargs: dict) -> Any:
    """`qjit_fn(*args, **kwargs)` where some arguments are autograd boxes."""
    from autograd.extend import defvjp, primitive

    name = qjit_fn.__name__
    slots = [*enumerate(args), *kwargs.items()]
    nested = [k for k, a in slots if not _is_box(a) and _holds_box(a)]
    if nested:
        raise CompileTypeError(
            f"{name}: autograd can differentiate a qjit-compiled function only with respect "
            f"to whole arguments (numbers or arrays); argument(s) {nested} hold autograd "
            "values inside a list, tuple or dict. Pass the trainable parameters as one "
            "array, or take the gradient inside qjit (cofactor.grad)"
        )
    names = tuple(kwargs)
    values = (*args, *kwargs.values())
    boxed = [i for i, a in enumerate(values) if _is_box(a)]
    n_args = len(args)

    def evaluate(*vals: Any) -> Any:
        return qjit_fn(*vals[:n_args], **dict(zip(names, vals[n_args:], strict=True)))

    evaluate = primitive(evaluate)

    def vjp_maker(slot: int) -> Callable:
        def make(ans: Any, *vals: Any) -> Callable:
            return lambda g: _vjp(qjit_fn, vals, n_args, names, slot, ans, g)

        return make

    defvjp(evaluate, *[vjp_maker(i) for i in boxed], argnums=boxed)
    return evaluate(*values)


def _static_slots(qjit_fn: Any, n_args: int, names: tuple) -> set[int]:
    """Positions, in (*args, *keyword values), of the static arguments."""
    static = {i for i in qjit_fn.static_argnums if i < n_args}
    static_names = set(qjit_fn.static_argnames)
    return static | {n_args + k for k, n in enumerate(names) if n in static_names}


def _vjp(
    qjit_fn: Any, values: tuple, n_args: int, names: tuple, slot: int, ans: Any, g: Any
) -> Any:
    from cofactor.api_extensions.products import vjp

    if _holds_box(g) or any(_holds_box(v) for v in values):
        raise CompileError(
            f"{qjit_fn.__name__}: a second autograd derivative of a qjit-compiled function "
            "(qml.grad of qml.grad, or an optimizer that needs a Hessian) is not supported; "
            "compute it inside qjit with cofactor.jacobian(cofactor.grad(f, method='fd'), "
            "method='fd'), or take one derivative with autograd"
        )
    static = _static_slots(qjit_fn, n_args, names)
    dynamic = [i for i in range(len(values)) if i not in static]
    statics = tuple((i, values[i]) for i in sorted(static))
    f = _differentiable(qjit_fn, n_args, names, statics)
    cotangents = list(g) if isinstance(ans, tuple | list) else [g]
    params = [values[i] for i in dynamic]
    return vjp(f, params, cotangents, argnums=dynamic.index(slot))[1]


def _differentiable(qjit_fn: Any, n_args: int, names: tuple, statics: tuple) -> Callable:
    """`qjit_fn` as a function of its dynamic arguments (positional, then keyword values;
    static ones are fixed); the same object for the same layout, so that `vjp` compiles it
    once."""
    key = (n_args, names, statics)
    per_fn = _DIFFERENTIABLE.setdefault(qjit_fn, {})
    f = per_fn.get(key)
    if f is None:
        fixed = dict(statics)
        n_slots = n_args + len(names)

        def f(*params: Any) -> Any:
            dynamic = iter(params)
            vals = [fixed[i] if i in fixed else next(dynamic) for i in range(n_slots)]
            return qjit_fn(*vals[:n_args], **dict(zip(names, vals[n_args:], strict=True)))

        f.__name__ = qjit_fn.__name__
        per_fn[key] = f
    return f
