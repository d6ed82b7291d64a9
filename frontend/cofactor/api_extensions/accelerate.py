"""`accelerate`: Catalyst's way to run a `jax.jit` function on a classical accelerator (a
GPU) from compiled code. cofactor compiles numpy, not JAX, and has no accelerator to hand a
function to, so `accelerate` exists only to say so by name when the function is called
(defining it, e.g. at module level, stays harmless) and to name the two ways that work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cofactor.errors import CompileError


def accelerate(func: Callable | None = None, *, dev: Any = None) -> Any:
    """Catalyst's `accelerate(func, dev=...)`: refused when the function is called."""
    if func is None:
        return lambda f: accelerate(f, dev=dev)
    name = getattr(func, "__name__", repr(func))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise CompileError(
            f"cofactor.accelerate({name}): Catalyst's accelerate runs a JAX function on a "
            "classical accelerator; cofactor compiles numpy code, not JAX, and runs on the "
            f"CPU. Call {name} directly (cofactor compiles its numpy operations with the rest "
            "of the program), or, for code cofactor cannot compile, run it in Python with "
            f"cofactor.pure_callback({name}, result_type=...)."
        )

    refuse.__name__ = name
    refuse.__wrapped__ = func
    return refuse
