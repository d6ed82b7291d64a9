"""`disable_autograph`: Catalyst's context decorator that stops autograph converting the
functions called under it (`@disable_autograph def f(): ...`, or `with disable_autograph:`
inside a converted function). The calls then run as written: a Python `if` on a traced value
there is an error again, as in Python. PennyLane's own `qml.capture.disable_autograph` (malt's
control status) is honoured too, see `autograph_disabled`. Also `autograph_include`'s
allow-list of library modules."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any

_state = threading.local()


class DisableAutograph(contextlib.ContextDecorator):
    """Used as the singleton `disable_autograph`: `@disable_autograph` or
    `with disable_autograph:` (no parentheses), as Catalyst's."""

    def __enter__(self) -> DisableAutograph:
        _state.depth = getattr(_state, "depth", 0) + 1
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.depth -= 1

    def __repr__(self) -> str:
        return "cofactor.disable_autograph"


disable_autograph = DisableAutograph()


def autograph_disabled() -> bool:
    """Whether a call made by converted code must run unconverted: inside cofactor's
    `disable_autograph`, or PennyLane's/malt's (which sets malt's control status)."""
    if getattr(_state, "depth", 0) > 0:
        return True
    from malt.core import ag_ctx

    return ag_ctx.control_status_ctx().status == ag_ctx.Status.DISABLED


# `qjit(autograph=True, autograph_include=[...])`: modules (and their submodules) whose
# functions autograph converts although they belong to a library it leaves alone; active
# while the converted entry point runs (each qjit object has its own list)
_included: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "cofactor_autograph_include", default=()
)


def is_included(module_name: str) -> bool:
    """Whether `module_name` is one of the modules `autograph_include` names, or inside one."""
    return any(module_name == m or module_name.startswith(m + ".") for m in _included.get())


def including(fn: Callable, modules: tuple[str, ...]) -> Callable:
    """`fn`, run with `modules` added to those autograph converts."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        token = _included.set(_included.get() + tuple(modules))
        try:
            return fn(*args, **kwargs)
        finally:
            _included.reset(token)

    return run
