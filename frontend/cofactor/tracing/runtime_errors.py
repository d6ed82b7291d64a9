"""Python exceptions raised from compiled code for conditions only known at run time, other
than out-of-range indices (tracing/indexing.py has its own runtime function and message).

numpy raises for some values of its operands ("Integers to negative integer powers are not
allowed."); when an operand is traced, the check must happen in the compiled code. The code
calls the runtime's `cf_rt_report_error(code, NULL)` with a code of
`runtime_lib.COMPILED_CODE_ERRORS` (numbered from 100, above the runtime's own statuses);
the runtime keeps the first error of the call in its error slot, and
`runtime_lib.check_error` raises the exception and message registered there for that code
when the call returns. The message is not passed as a string:
the IR has no string constants, and a fixed table keeps the messages in one place.

After reporting, the code goes on with some value, which the launcher discards with the
call's results. `cf_rt_*` functions are inactive for Enzyme, so gradients of code with such
a check compile.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ArrayAttr, StringAttr, i64
from xdsl.ir import Block, Region

from cofactor.runtime_lib import COMPILED_CODE_ERRORS, FIRST_COMPILED_CODE
from cofactor.tracing import context

REPORT_FN = "cf_rt_report_error"
_CODES = {kind: FIRST_COMPILED_CODE + i for i, kind in enumerate(COMPILED_CODE_ERRORS)}


def report_if(bad: Any, kind: str) -> None:
    """Emits `if bad: cf_rt_report_error(code of kind, NULL)` at the insertion point
    (`bad` is an i1 value)."""
    b = context.current().builder
    call_if(bad, _report_fn(context.current()), [b.const(_CODES[kind], i64), b.const(0, i64)])


def call_if(bad: Any, fn: str, args: list[Any]) -> None:
    """Emits `if bad: fn(*args)` (a runtime function that records an error) at the
    insertion point, and marks the module as one whose calls check the runtime's error slot."""
    ctx = context.current()
    b = ctx.builder
    then_block = Block()
    b.push(then_block)
    try:
        b.call(fn, args)
        b.insert(scf.YieldOp())
    finally:
        b.pop()
    else_block = Block()
    else_block.add_op(scf.YieldOp())
    b.insert(scf.IfOp(bad, [], Region(then_block), Region(else_block)))
    ctx.runtime_checks = True


def _report_fn(ctx: context.TraceContext) -> str:
    """Declares `cf_rt_report_error(i64 code, i64 message)` once per module: the C function
    takes a `const char *`, passed as the integer 0 (NULL; a pointer and an i64 travel in the
    same register on every 64-bit ABI the runtime supports)."""
    key = ("runtime", REPORT_FN)
    if key not in ctx.functions:
        decl = func.FuncOp.external(REPORT_FN, [i64, i64], [])
        decl.sym_visibility = StringAttr("private")
        # as for cf_rt_index_error: Enzyme must know that the call frees nothing
        decl.attributes["passthrough"] = ArrayAttr([StringAttr("nofree")])
        ctx.builder.module_ops.append(decl)
        ctx.functions[key] = REPORT_FN
    return REPORT_FN
