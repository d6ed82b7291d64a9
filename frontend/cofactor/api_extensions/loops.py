"""`for_loop` and `while_loop` on traced values: each becomes one `scf.while` op whose
regions hold the traced body, the carried values being its iteration arguments (see
carried_values.py). Outside `qjit` both behave like the plain Python loop they replace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import i1
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from cofactor.api_extensions import hybrid
from cofactor.api_extensions.carried_values import Carry, single, traced_region
from cofactor.errors import CompileError, CompileTypeError
from cofactor.ir.builder import INDEX
from cofactor.tracing import aliasing, context, interrupts
from cofactor.tracing.numpy_rules import as_scalar, as_tracer, cast_tracer, scalar_ufunc
from cofactor.tracing.runtime_errors import report_if
from cofactor.tracing.tracer import BOOL, INT, Scalar, Tracer


def for_loop(lower: Any, upper: Any, step: Any, allow_array_resizing: bool = False) -> Callable:
    """`for i in range(lower, upper, step): carry = body(i, *carry)` as one compiled loop.

    Use as `for_loop(0, n, 1)(body)(*init)`; the body takes the index and the carried
    values and returns the new carried values (or nothing when there are none).
    """

    def decorator(body: Callable) -> Callable:
        def run(*init: Any) -> Any:
            if not context.is_tracing():
                carry = init
                for i in range(lower, upper, step):
                    out = body(i, *carry)
                    carry = out if isinstance(out, tuple) and len(init) > 1 else (out,)
                    if not init:
                        carry = ()
                return single(carry)
            if hybrid.recording():  # inside an adjoint/ctrl region: see hybrid
                return hybrid.record_for(lower, upper, step, body, init)
            return _traced_for(lower, upper, step, body, init)

        return run

    return decorator


def _index_value(x: Any) -> SSAValue:
    b = context.current().builder
    if isinstance(x, Tracer | Scalar):
        t = cast_tracer(as_tracer(x), INT)
        if t.shape != ():
            raise CompileError("loop bounds must be scalars")
        return b.to_index(t.elems[()].value)
    return b.index(int(x))


def _as_int(x: Any) -> Tracer:
    """A loop bound as a traced int64 scalar (a traced float is truncated, as `_index_value`
    does)."""
    t = cast_tracer(as_tracer(x), INT)
    if t.shape != ():
        raise CompileError("loop bounds must be scalars")
    return t


def _traced_for(lower: Any, upper: Any, step: Any, body: Callable, init: tuple) -> Any:
    ctx = context.current()
    b = ctx.builder
    carry = Carry(init)
    static_step = not isinstance(step, Tracer | Scalar)
    if static_step and int(step) == 0:
        raise CompileError("for_loop step must not be zero")
    # A negative step, or a traced one (either sign, known only at run time), counts
    # k = 0 .. len(range(lower, upper, step)) and computes i = lower + k * step: the loop
    # below only counts up.
    counted = not static_step or int(step) < 0
    if counted:
        lo, hi = (_as_int(v) for v in (lower, upper))
        st_value = int(step) if static_step else _as_int(step)
        if not static_step:
            # (range()'s ValueError, raised when the call returns; the loop runs 0 times)
            report_if(as_scalar(st_value == 0).value, "range_step_zero")
        trip = np.maximum(-((lo - hi) // st_value), 0)  # ceil((hi - lo) / step), both signs
        lb, ub, st = b.index(0), _index_value(trip), b.index(1)
    else:
        lb, ub, st = _index_value(lower), _index_value(upper), _index_value(step)
    block = Block(arg_types=[INDEX, *carry.types()])
    with traced_region(block) as flush:
        iv = Tracer.scalar(b.from_index(block.args[0]), INT)
        if counted:
            iv = as_tracer(
                scalar_ufunc(
                    np.add,
                    lo.elems[()],
                    scalar_ufunc(np.multiply, iv.elems[()], as_tracer(st_value).elems[()]),
                )
            )
        state = carry.rebuild(list(block.args[1:]))
        out = body(iv, *state)
        new = carry.conform(_as_result(init, out), "for_loop body")
        values = carry.ssa(new)
        flush()
        b.insert(scf.YieldOp(*values))
    results = _interruptible_for(ctx, lb, ub, st, carry.ssa(), block)
    aliasing.passed(init, state, "the cofactor.for_loop body")  # (in-place writes to `init`)
    return single(tuple(carry.rebuild(results)))


def _interruptible_for(
    ctx: context.TraceContext,
    lb: SSAValue,
    ub: SSAValue,
    st: SSAValue,
    init: list[SSAValue],
    body: Block,
) -> list[SSAValue]:
    """`scf.for` semantics (`body` takes the index and the carried values and yields the
    new ones) as an `scf.while` that also stops on Ctrl-C (tracing/interrupts.py): an
    scf.for cannot exit early. Returns the carried values' final SSA values."""
    b = ctx.builder
    types = [INDEX, *(v.type for v in init)]
    before = Block(arg_types=types)
    b.push(before)
    try:
        more = b.cmpi("slt", before.args[0], ub)
        go = b.binary(arith.AndIOp, more, _not(b, interrupts.exit_requested(ctx)))
        b.insert(scf.ConditionOp(go, *before.args))
    finally:
        b.pop()
    # the body's yield gets the next index in front of the carried values
    yield_op = body.last_op
    assert isinstance(yield_op, scf.YieldOp)
    b.push_at(InsertPoint.before(yield_op))
    try:
        step = b.binary(arith.AddiOp, body.args[0], st)
        b.insert(scf.YieldOp(step, *yield_op.operands))
    finally:
        b.pop()
    body.erase_op(yield_op)
    op = b.insert(scf.WhileOp([lb, *init], types, Region(before), Region(body)))
    return list(op.results[1:])


def _not(b: Any, value: SSAValue) -> SSAValue:
    return b.binary(arith.XOrIOp, value, b.const(True, i1))


def _as_result(init: tuple, out: Any) -> tuple:
    """A body's return value as a tuple matching `init` (bodies return a bare value when
    there is one carried value)."""
    if len(init) == 0:
        # (an empty tuple is no value, as in Catalyst, whose bodies may end with `return ()`)
        if out is not None and not (isinstance(out, tuple | list) and len(out) == 0):
            raise CompileError("the loop body returned a value but no initial value was given")
        return ()
    if len(init) == 1:
        return (out,)
    if not isinstance(out, tuple | list) or len(out) != len(init):
        raise CompileError(f"the loop body must return {len(init)} values (one per carried value)")
    return tuple(out)


# ----------------------------------------------------------------------------------------
# while_loop
# ----------------------------------------------------------------------------------------
def while_loop(cond_fn: Callable, allow_array_resizing: bool = False) -> Callable:
    """`while cond_fn(*carry): carry = body(*carry)` as one compiled loop.

    Use as `while_loop(cond_fn)(body)(*init)`.
    """

    def decorator(body: Callable) -> Callable:
        def run(*init: Any) -> Any:
            if not context.is_tracing():
                carry = init
                while cond_fn(*carry):
                    carry = _as_result(init, body(*carry))
                return single(carry)
            if hybrid.recording():
                return hybrid.record_while(cond_fn, body, init)
            return _traced_while(cond_fn, body, init)

        return run

    return decorator


def _traced_while(cond_fn: Callable, body: Callable, init: tuple) -> Any:
    b = context.current().builder
    carry = Carry(init)
    types = carry.types()
    before = Block(arg_types=types)
    with traced_region(before) as flush:
        state = carry.rebuild(list(before.args))
        raw = cond_fn(*state)
        pred = as_tracer(raw)
        if pred.shape != () or pred.dtype != BOOL:
            # as Catalyst (TypeError); an int would otherwise be read as "nonzero"
            raise CompileTypeError(
                "the while_loop condition must return a scalar bool: a single boolean scalar "
                f"was expected, got the value {raw!r} (dtype {pred.dtype}, shape {pred.shape}); "
                "compare it, e.g. `i < n`"
            )
        flush()
        # and not interrupted (Ctrl-C, tracing/interrupts.py)
        stop = interrupts.exit_requested(context.current())
        go = b.binary(arith.AndIOp, pred.elems[()].value, _not(b, stop))
        b.insert(scf.ConditionOp(go, *before.args))
    after = Block(arg_types=types)
    with traced_region(after) as flush:
        state = carry.rebuild(list(after.args))
        new = carry.conform(_as_result(init, body(*state)), "while_loop body")
        values = carry.ssa(new)
        flush()
        b.insert(scf.YieldOp(*values))
    op = b.insert(scf.WhileOp(carry.ssa(), types, Region(before), Region(after)))
    aliasing.passed(init, state, "the cofactor.while_loop body")  # (in-place writes to `init`)
    return single(tuple(carry.rebuild(list(op.results))))
