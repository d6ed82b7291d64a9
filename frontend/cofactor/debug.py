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


def print(  # noqa: A001
    fmt: Any, *args: Any, memref: bool = False, sep: str = " ", end: str = "\n", **kwargs: Any
) -> None:
    """Print values; traced values are printed when the compiled program runs.

    `debug.print("x = {0:.2f}, n = {n}", x, n=n)` formats like `str.format`;
    `debug.print("x =", x)` prints like `print`. `debug.print(x, memref=True)` prints the
    array with its buffer's layout first (Catalyst's memref descriptor: rank, offset, sizes,
    strides), as `print_memref(x)` does.
    """
    if memref:
        if args or kwargs:
            raise TypeError(
                "debug.print(x, memref=True) prints one array: pass no other arguments "
                "(print them with their own debug.print calls)"
            )
        print_memref(fmt)
        return
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


def print_memref(x: Any) -> None:
    """Print an array with the layout of its buffer (Catalyst's `debug.print_memref`): rank,
    offset, sizes and strides in elements, then the values."""
    if not context.is_tracing():
        _render_memref(np.asarray(x))
        return
    from cofactor.api_extensions.callbacks import DebugCallback

    printer = DebugCallback(_render_memref)
    printer.__name__ = "debug_print_memref"
    printer(x)


def _render_memref(value: np.ndarray) -> None:
    value = np.ascontiguousarray(value)
    strides = [s // value.itemsize for s in value.strides]
    builtins.print(
        f"MemRef: base@ = {value.ctypes.data:#x} rank = {value.ndim} offset = 0 "
        f"sizes = {list(value.shape)} strides = {strides} data =\n{value}"
    )


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


#: Catalyst's stage names -> the text cofactor keeps of that stage. cofactor's frontend emits
#: memref-level MLIR with the circuit's transforms applied while tracing, so Catalyst's
#: stages up to bufferization are its emitted module.
_STAGES = {
    **dict.fromkeys(
        (
            "mlir",
            "HLOLoweringPass",
            "HLOLoweringStage",
            "QuantumCompilationPass",
            "QuantumCompilationStage",
            "BufferizationPass",
            "BufferizationStage",
        ),
        "mlir",
    ),
    **dict.fromkeys(
        (
            "mlir_opt",
            "MLIRToLLVMDialect",
            "MLIRToLLVMDialectConversion",
            "LLVMDialectLoweringStage",
        ),
        "mlir_opt",
    ),
    **dict.fromkeys(("llvmir", "LLVMIRTranslation", "ll", "last"), "llvmir"),
}


def get_compilation_stage(fn: Any, stage: str) -> str:
    """The text of a compiled function at a compilation stage (Catalyst's
    `debug.get_compilation_stage`): `"mlir"` (and Catalyst's stages up to bufferization),
    `"MLIRToLLVMDialect"` (`fn.mlir_opt`) or `"LLVMIRTranslation"`/`"last"` (`fn.llvmir`),
    of the most recent compilation."""
    from cofactor.errors import CompileError

    what = _STAGES.get(stage)
    if what is None:
        raise ValueError(
            f"unknown compilation stage {stage!r}; cofactor keeps 'mlir', "
            "'MLIRToLLVMDialect' (after its MLIR passes) and 'LLVMIRTranslation'/'last' "
            f"(LLVM IR); Catalyst's names accepted: {sorted(_STAGES)}"
        )
    text = getattr(fn, what, None)
    if text is None:
        raise CompileError(
            f"{getattr(fn, '__name__', fn)} has not been compiled yet: call it (or declare "
            "its argument types) before asking for a compilation stage"
        )
    return text
