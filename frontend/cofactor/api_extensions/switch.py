"""`switch`: Catalyst's index switch on a (traced) integer, on top of `cond`.

Catalyst's API (catalyst/api_extensions/control_flow.py, `switch` and `SwitchCallable`):
`@switch(i)` decorates the *default* branch (required), `@s.branch(case)` adds the branch
run when `i == case`, and calling `s(*args)` runs the selected branch with `args`. The index
is not clamped; an index matching no case runs the default. Branches' results are
promoted to a common dtype and must share one structure and shape (TypeError otherwise, as
for `cond`). Outside `qjit` (or with a Python index) the selected branch runs as plain
Python.

The compiled form is the chain `cond(i == c0) .else_if(i == c1) ... .otherwise(default)`:
nested `scf.if` ops, which keeps quantum operations inside branches, adjoint/ctrl regions
and branch results on the machinery `cond` already has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cofactor.api_extensions.control_flow import cond
from cofactor.errors import CompileTypeError
from cofactor.tracing import context
from cofactor.tracing.tracer import Scalar, Tracer


def _check_case(case: Any) -> int:
    """Cases are compile-time integers (Catalyst traces them as integer constants)."""
    if isinstance(case, Tracer | Scalar):
        raise CompileTypeError(
            "switch: a branch's case must be a Python integer known at compile time, not a "
            "traced value; the traced value goes in switch(index)"
        )
    if isinstance(case, bool | np.bool_) or not isinstance(case, int | np.integer):
        raise CompileTypeError(
            f"switch: a branch's case must be an integer, got {case!r} of type "
            f"{type(case).__name__}"
        )
    return int(case)


class SwitchCallable:
    """The object `switch(index)(default_fn)` returns: add cases with `.branch(case)`, then
    call it with the branches' arguments."""

    def __init__(self, index: Any, default_branch: Callable) -> None:
        if default_branch is None:
            raise ValueError("Switch requires a default branch.")
        if not callable(default_branch):
            raise TypeError(
                f"switch: the default branch must be a function, got {default_branch!r}"
            )
        self.index = index
        self.default_branch = default_branch
        # later registrations of the same case replace earlier ones (a dict, as Catalyst)
        self.case_to_branch: dict[int, Callable] = {}

    def branch(self, case: Any) -> Callable[[Callable], SwitchCallable]:
        """Decorator: the function to run when the switch's index equals `case`."""
        key = _check_case(case)

        def decorator(fn: Callable) -> SwitchCallable:
            if not callable(fn):
                raise TypeError(f"switch: branch {key} must be a function, got {fn!r}")
            self.case_to_branch[key] = fn
            return self

        return decorator

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        index = self.index
        if not isinstance(index, Tracer | Scalar) or not context.is_tracing():
            # Python semantics: only the selected branch runs (its result type is its own)
            return self.case_to_branch.get(_python_index(index), self.default_branch)(
                *args, **kwargs
            )
        if isinstance(index, Tracer) and index.shape != ():
            raise CompileTypeError(
                f"switch: the index must be a scalar integer, got an array of shape {index.shape}"
            )
        if np.dtype(index.dtype).kind not in "iu":
            raise CompileTypeError(
                f"switch: the index must be an integer, got a traced value of dtype "
                f"{index.dtype}; convert it first (e.g. x.astype(int))"
            )
        if not self.case_to_branch:
            return self.default_branch(*args, **kwargs)
        items = list(self.case_to_branch.items())
        case0, fn0 = items[0]
        chain = cond(index == case0)(fn0)
        for case, fn in items[1:]:
            chain = chain.else_if(index == case)(fn)
        chain = chain.otherwise(self.default_branch)
        return chain(*args, **kwargs)


def _python_index(index: Any) -> Any:
    try:
        return int(index) if isinstance(index, np.integer | np.ndarray) else index
    except TypeError:
        return index


def switch(index: Any) -> Callable[[Callable], SwitchCallable]:
    """An index switch on `index` (an integer; traced or not), Catalyst-style.

    Decorate the default branch with `@switch(i)`, add cases with `@s.branch(case)`, then call
    `s(*args)`: the branch whose case equals `i` runs (the default when none does). Every
    branch receives the same arguments and, when compiled, must return the same structure;
    dtypes are promoted to a common one.
    """

    def decorator(default_branch: Callable) -> SwitchCallable:
        return SwitchCallable(index, default_branch)

    return decorator


__all__ = ["SwitchCallable", "switch"]
