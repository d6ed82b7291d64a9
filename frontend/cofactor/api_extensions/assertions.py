"""`debug_assert(condition, error)`: Catalyst's run-time assertion.

A Python `assert` (or `raise`) in a compiled function runs once, while the function is
traced, when a traced value has no value yet. `debug_assert` checks its condition every
time the compiled program runs: a Python check called back from the compiled code (a
`debug.callback`), which raises `RuntimeError(error)` when the condition is false; the
compiled call then raises it when it returns, as a failing callback does. As in Catalyst,
`qjit(disable_assertions=True)` compiles no check at all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.tracing import context


def debug_assert(condition: Any, error: str) -> None:
    """Raise `RuntimeError(error)` when `condition` (a bool, possibly traced) is false when
    the compiled program runs; outside qjit, when it is called."""
    if not isinstance(error, str):
        raise TypeError(f"debug_assert: the error message must be a string, got {error!r}")
    if np.ndim(condition) != 0:
        raise ValueError(
            f"debug_assert: the condition must be a scalar bool, got an array of shape "
            f"{np.shape(condition)}; reduce it first (e.g. np.all(x < 5))"
        )
    if not context.is_tracing():
        _check(condition, error)
        return
    if context.current().disable_assertions:
        return
    from cofactor.api_extensions.callbacks import DebugCallback
    from cofactor.tracing.numpy_rules import as_tracer

    def check(value: np.ndarray) -> None:
        _check(value, error)

    check.__name__ = "debug_assert"
    # (a constant condition is checked at run time too, as Catalyst does: a failing
    # assertion on a path the program never runs must not stop its compilation)
    DebugCallback(check)(as_tracer(condition))


def _check(condition: Any, error: str) -> None:
    if not bool(condition):
        raise RuntimeError(error)
