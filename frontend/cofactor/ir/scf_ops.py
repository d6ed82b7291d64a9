"""`scf` ops (loops, branches, their terminators) built directly, as xDSL's constructors
build them.

xDSL's constructors hand their operands and regions to its generic op constructor, which
asks `isinstance(operand_list, Operation)` of each list of operands: `Operation` is an
ABC, so the first negative answer for `list` (and again for `tuple`) walks every op class
of every dialect loaded, 1-2 ms each, once per process and on the path of the first trace
of almost every program (an `scf.for` with loop-carried values and its `scf.yield`).
These build the same ops through `simple_op` (checked against the constructors by
tests/frontend/test_ir_fast_builders.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import scf
from xdsl.ir import Attribute, Block, Region, SSAValue

from cofactor.ir.builder import value_of
from cofactor.ir.mlir15 import simple_op


def _region(body: Region | Block) -> Region:
    return body if type(body) is Region else Region(body)  # type: ignore[arg-type]


def for_op(
    lb: SSAValue, ub: SSAValue, step: SSAValue, iter_args: Sequence[SSAValue], body: Region | Block
) -> scf.ForOp:
    """`scf.ForOp(lb, ub, step, iter_args, body)`."""
    carried = [value_of(v) for v in iter_args]
    operands = [value_of(lb), value_of(ub), value_of(step), *carried]
    types = [v.type for v in carried]
    return simple_op(scf.ForOp, operands, types, None, (_region(body),))  # type: ignore[return-value]


def yield_op(*values: SSAValue) -> scf.YieldOp:
    """`scf.YieldOp(*values)`."""
    return simple_op(scf.YieldOp, [value_of(v) for v in values])  # type: ignore[return-value]


def condition_op(condition: SSAValue, *args: SSAValue) -> scf.ConditionOp:
    """`scf.ConditionOp(condition, *args)`."""
    operands = [value_of(condition), *(value_of(v) for v in args)]
    return simple_op(scf.ConditionOp, operands)  # type: ignore[return-value]


def if_op(
    cond: SSAValue,
    result_types: Sequence[Attribute],
    then_region: Region | Block,
    else_region: Region | Block | None = None,
) -> scf.IfOp:
    """`scf.IfOp(cond, result_types, then_region, else_region)`."""
    regions = (_region(then_region), Region() if else_region is None else _region(else_region))
    return simple_op(scf.IfOp, [value_of(cond)], list(result_types), None, regions)  # type: ignore[return-value]


def while_op(
    arguments: Sequence[SSAValue],
    result_types: Sequence[Attribute],
    before: Region | Block,
    after: Region | Block,
) -> scf.WhileOp:
    """`scf.WhileOp(arguments, result_types, before, after)`."""
    operands = [value_of(v) for v in arguments]
    regions = (_region(before), _region(after))
    return simple_op(scf.WhileOp, operands, list(result_types), None, regions)  # type: ignore[return-value]
