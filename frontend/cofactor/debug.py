"""`debug.print`: print values from compiled code, at run time.

Outside qjit it is Python's print. While tracing, each call becomes a `func.call` to a small
helper function generated for that call site: the helper holds the format string (the
literal parts formatted at trace time, traced values as printf conversions) and calls the
C library's `printf` and `fflush`. The helpers are written in MLIR's LLVM dialect as text and
appended to the module (`TraceContext.text_helpers`), so the traced code itself stays in
upstream `func` form.
"""

from __future__ import annotations

import builtins
from typing import Any

from xdsl.dialects import func

from cofactor.tracing import context
from cofactor.tracing.numpy_rules import as_tracer
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Scalar, Tracer

#: arrays with more elements than this print their shape and dtype only
MAX_PRINTED_ELEMENTS = 64

# `nofree`: Enzyme, differentiating a function that prints (debug.print under grad), needs
# to know that these C functions free nothing ("No create nofree of empty function")
_NOFREE = 'attributes {passthrough = ["nofree"]}'
_PRINTF_DECLS = f"""  llvm.func @printf(!llvm.ptr<i8>, ...) -> i32 {_NOFREE}
  llvm.func @fflush(!llvm.ptr<i8>) -> i32 {_NOFREE}
"""

_CONVERSIONS = {FLOAT: "%.16g", INT: "%ld", BOOL: "%d"}


def print(*args: Any, sep: str = " ", end: str = "\n", **kwargs: Any) -> None:  # noqa: A001
    """Print values; traced values are printed when the compiled program runs."""
    if not context.is_tracing():
        builtins.print(*args, sep=sep, end=end, **kwargs)
        return
    ctx = context.current()
    fmt_parts: list[str] = []
    values: list[Any] = []  # SSA values passed to printf, in order
    for arg in args:
        if isinstance(arg, Tracer | Scalar):
            fmt_parts.append(_format_traced(as_tracer(arg), values))
        else:
            fmt_parts.append(str(arg).replace("%", "%%"))
    _emit_printf(ctx, sep.join(fmt_parts) + end, values)


def _format_traced(t: Tracer, values: list[Any]) -> str:
    if t.size > MAX_PRINTED_ELEMENTS:
        return f"<array {t.dtype}{list(t.shape)}>"
    if t.ndim == 0:
        value = t.elems[()].value
        if t.dtype == COMPLEX:
            values.extend(value)
            return "(%.16g%+.16gj)"
        values.append(value)
        return _CONVERSIONS[t.dtype]
    rows = []
    for i in range(t.shape[0]):
        rows.append(_format_traced(t[i], values))
    return "[" + (", " if t.ndim == 1 else ",\n ").join(rows) + "]"


def _mlir_string(text: str) -> tuple[str, int]:
    """`text` as an MLIR string literal body (NUL-terminated) and its length in bytes."""
    data = text.encode() + b"\0"
    out = []
    for byte in data:
        ch = chr(byte)
        if ch.isprintable() and ch not in '"\\' and byte < 128:
            out.append(ch)
        else:
            out.append(f"\\{byte:02X}")
    return "".join(out), len(data)


def _emit_printf(ctx: context.TraceContext, fmt: str, values: list[Any]) -> None:
    b = ctx.builder
    name = ctx.fresh_name("cofactor_debug_print")
    literal, length = _mlir_string(fmt)
    # bools go to printf as i32 (C's default argument promotion)
    arg_types = [str(v.type) for v in values]
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    body = [
        f'  llvm.mlir.global internal constant @{name}_fmt("{literal}")',
        f"  func.func private @{name}({params}) {{",
        f"    %fmt = llvm.mlir.addressof @{name}_fmt : !llvm.ptr<array<{length} x i8>>",
        f"    %p = llvm.bitcast %fmt : !llvm.ptr<array<{length} x i8>> to !llvm.ptr<i8>",
    ]
    call_args, call_types = ["%p"], ["!llvm.ptr<i8>"]
    for i, t in enumerate(arg_types):
        if t == "i1":
            body.append(f"    %b{i} = arith.extui %a{i} : i1 to i32")
            call_args.append(f"%b{i}")
            call_types.append("i32")
        else:
            call_args.append(f"%a{i}")
            call_types.append(t)
    body += [
        f"    %r = llvm.call @printf({', '.join(call_args)}) : ({', '.join(call_types)}) -> i32",
        "    %null = llvm.mlir.null : !llvm.ptr<i8>",
        "    %f = llvm.call @fflush(%null) : (!llvm.ptr<i8>) -> i32",
        "    return",
        "  }",
    ]
    if not ctx.text_helpers:
        ctx.text_helpers.append(_PRINTF_DECLS)
    ctx.text_helpers.append("\n".join(body) + "\n")
    b.insert(func.CallOp(name, list(values), []))


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
