"""Ctrl-C in compiled loops: the checks the frontend emits at loop back-edges.

The runtime (runtime/src/Interrupt.cpp) puts a SIGINT handler in front of Python's that
bumps the counter `cf_rt_interrupt_count` and then lets Python's handler run as usual.
Compiled code that contains a loop

- calls `cf_rt_interrupt_arm()` on entry (installs that handler; it re-checks at most every
  50 ms whether someone replaced it, so the call is cheap),
- reads the counter once at the start of every function that contains a loop, and
- at each loop iteration reads it again (one volatile load and a compare); only when it
  moved does it call `cf_rt_interrupt_poll()`, which in the main thread reports
  CF_ERR_INTERRUPTED in the runtime's error slot and tells the loop to exit.

Python then raises KeyboardInterrupt when the compiled call returns (its own handler ran,
and the launcher also maps CF_ERR_INTERRUPTED to KeyboardInterrupt).
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import i1, i64
from xdsl.ir import Block, SSAValue
from xdsl.rewriter import InsertPoint

from cofactor.tracing.context import TraceContext

COUNT_FN = "cofactor_interrupt_count"
CHECK_FN = "cofactor_interrupted"
ARM_FN = "cf_rt_interrupt_arm"

# Written as text (the volatile load is an LLVM-dialect op). Both helpers are tiny private
# functions that LLVM inlines, and inactive for Enzyme (they only touch integers); Enzyme
# also needs to know that the runtime function frees nothing ("No create nofree of empty
# function") when it differentiates a function with a loop.
HELPERS = f"""  llvm.mlir.global external @cf_rt_interrupt_count() : i64
  func.func private @{ARM_FN}() -> i64
  llvm.func @cf_rt_interrupt_poll() -> i8 attributes {{passthrough = ["nofree"]}}
  func.func private @{COUNT_FN}() -> i64 attributes {{cofactor.inactive}} {{
    %p = llvm.mlir.addressof @cf_rt_interrupt_count : !llvm.ptr<i64>
    %v = llvm.load volatile %p : !llvm.ptr<i64>
    return %v : i64
  }}
  func.func private @{CHECK_FN}(%seen: i64) -> i1 attributes {{cofactor.inactive}} {{
    %now = func.call @{COUNT_FN}() : () -> i64
    %moved = arith.cmpi ne, %now, %seen : i64
    %stop = scf.if %moved -> (i1) {{
      %r = llvm.call @cf_rt_interrupt_poll() : () -> i8
      %zero = arith.constant 0 : i8
      %s = arith.cmpi ne, %r, %zero : i8
      scf.yield %s : i1
    }} else {{
      %no = arith.constant false
      scf.yield %no : i1
    }}
    return %stop : i1
  }}
"""


def _count_at_entry(ctx: TraceContext) -> SSAValue:
    """The counter as read at the start of the function being traced (read once)."""
    block = ctx.function_entries[-1]
    seen = ctx.interrupt_counts.get(id(block))
    if seen is None:
        ctx.builder.push_at(InsertPoint.at_start(block))
        try:
            seen = ctx.builder.res(func.CallOp(COUNT_FN, [], [i64]))
        finally:
            ctx.builder.pop()
        ctx.interrupt_counts[id(block)] = seen
    return seen


def exit_requested(ctx: TraceContext) -> SSAValue:
    """An i1, at the current insertion point: true when the loop must stop (SIGINT)."""
    ctx.interrupt_checks = True
    ctx.runtime_checks = True  # the launcher reads the error slot (CF_ERR_INTERRUPTED)
    seen = _count_at_entry(ctx)
    return ctx.builder.res(func.CallOp(CHECK_FN, [seen], [i1]))


def arm_on_entry(ctx: TraceContext, block: Block) -> None:
    """Install the runtime's SIGINT handler at the start of the entry function `block`."""
    ctx.builder.push_at(InsertPoint.at_start(block))
    try:
        ctx.builder.insert(func.CallOp(ARM_FN, [], [i64]))
    finally:
        ctx.builder.pop()
