"""Python conversions of traced values (`if x:`, `float(x)`, `range(x)`, ...): a traced value
has no value while the program is traced, so each raises a CompileError saying what to do
instead; when PennyLane's own code asks, the message names that code.
"""

from __future__ import annotations

from typing import Any

from cofactor.errors import CompileError

_BOOL_MESSAGE = (
    "A traced value was used where Python needs a concrete {what} ({where}). Its value is only "
    "known when the compiled program runs. Use cofactor.cond for if/else on traced values, "
    "cofactor.while_loop for while loops, cofactor.for_loop for loops with traced bounds, or "
    "mark the argument static with qjit(static_argnums=...)."
)


_PENNYLANE_MESSAGE = (
    "PennyLane's {func} ({file}, line {line}) needs a concrete {what} from a traced value, whose "
    "value is only known when the compiled program runs. Pass the parameter it comes from as "
    "a static argument (qjit(static_argnums=...)), or compute this part outside qjit."
)


def _concrete_error(what: str, where: str) -> CompileError:
    """The error for a Python conversion of a traced value. When PennyLane's own code asks
    (a decomposition testing a parameter's value), say so: the user cannot put a
    `cofactor.cond` there."""
    import sys

    def module(f: Any) -> str:
        return f.f_globals.get("__name__", "") or ""

    frame = sys._getframe(2)
    while frame is not None and module(frame).split(".")[0] in ("cofactor", "numpy", "autoray"):
        frame = frame.f_back
    if frame is not None and module(frame).split(".")[0] == "pennylane":
        code = frame.f_code
        func = getattr(code, "co_qualname", code.co_name)
        return CompileError(
            _PENNYLANE_MESSAGE.format(func=func, file=module(frame), line=frame.f_lineno, what=what)
        )
    return CompileError(_BOOL_MESSAGE.format(what=what, where=where))


class _NoConcreteValue:
    """Python conversions a traced value cannot answer while tracing (`if x:`, `float(x)`,
    `range(x)`, ...): each raises a CompileError that points to cofactor's control flow."""

    __slots__ = ()

    def __bool__(self) -> bool:
        raise _concrete_error("bool", "if/while/and/or")

    def __float__(self) -> float:
        raise _concrete_error("float", "float()")

    def __int__(self) -> int:
        raise _concrete_error("int", "int()")

    def __index__(self) -> int:
        raise _concrete_error("int", "an index, range() or a shape")

    def __complex__(self) -> complex:
        raise _concrete_error("complex", "complex()")
