"""`debug.print` and `debug.callback`: side effects at run time from compiled code.

`debug.print` is Catalyst's: Python's `print` called back from the compiled program (a
`debug.callback`), so it writes to Python's `sys.stdout` (seen by notebooks and pytest's
`capsys`) in Python's formatting (numpy's for arrays). A first argument that is a format
string (`"x={x:.2f}"`, `"{0} {1}"`) is formatted with the other arguments (`str.format`),
as Catalyst documents; otherwise the arguments are printed like `print(*args)` (Catalyst
would drop the arguments that a string without replacement fields does not name).
"""

from __future__ import annotations

import builtins
import string
from typing import Any

import numpy as np

from cofactor.tracing import context, pytree
from cofactor.tracing.tracer import Scalar, Tracer


def print(fmt: Any, *args: Any, sep: str = " ", end: str = "\n", **kwargs: Any) -> None:  # noqa: A001
    """Print values; traced values are printed when the compiled program runs.

    `debug.print("x = {0:.2f}, n = {n}", x, n=n)` formats like `str.format`;
    `debug.print("x =", x)` prints like `print`.
    """
    formatting = isinstance(fmt, str) and _has_fields(fmt)
    if kwargs and not formatting:
        raise TypeError(
            f"debug.print got keyword argument(s) {sorted(kwargs)} but its first argument "
            f"{fmt!r} is not a format string naming them; write e.g. "
            f'debug.print("{next(iter(kwargs))}={{{next(iter(kwargs))}}}", '
            f"{next(iter(kwargs))}=...)"
        )
    if not context.is_tracing():
        _render(formatting, fmt, args, kwargs, sep, end)
        return
    from cofactor.api_extensions.callbacks import DebugCallback

    leaves, tree = pytree.flatten((fmt, args, kwargs), is_leaf=_is_traced)
    traced = [i for i, leaf in enumerate(leaves) if _is_traced(leaf)]
    static = [None if _is_traced(leaf) else leaf for leaf in leaves]  # (no tracer kept alive)

    def printer(*values: np.ndarray) -> None:
        filled = list(static)
        for i, v in zip(traced, values, strict=True):
            filled[i] = v[()] if v.ndim == 0 else v  # a numpy scalar prints and formats as one
        f, a, k = pytree.unflatten(tree, filled)
        _render(formatting, f, a, k, sep, end)

    printer.__name__ = "debug_print"
    DebugCallback(printer)(*(leaves[i] for i in traced))


def _is_traced(x: Any) -> bool:
    return isinstance(x, Tracer | Scalar)


def _has_fields(fmt: str) -> bool:
    """Whether `fmt` has `str.format` replacement fields (`{}`, `{x}`; not `{{`)."""
    try:
        return any(field is not None for _, field, _, _ in string.Formatter().parse(fmt))
    except ValueError:  # unbalanced braces: not a format string
        return False


def _render(formatting: bool, fmt: Any, args: tuple, kwargs: dict, sep: str, end: str) -> None:
    if formatting:
        builtins.print(fmt.format(*args, **kwargs), end=end)
    else:
        builtins.print(fmt, *args, sep=sep, end=end)


def callback(fn: Any) -> Any:
    """A Python function called from compiled code for its side effects only (Catalyst's
    `debug.callback`): it receives numpy arrays, must return None, and it is
    inactive under differentiation (no gradient flows through it).

        @cofactor.debug.callback
        def log(x):
            print("x =", x)
    """
    from cofactor.api_extensions.callbacks import DebugCallback

    return DebugCallback(fn)
