"""The `scf` ops built directly (cofactor.ir.scf_ops) are the ones xDSL's constructors make."""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, f64, i1
from xdsl.ir import Block, Operation, Region

from cofactor.ir.scf_ops import condition_op, for_op, if_op, while_op, yield_op

INDEX = IndexType()


def _same_op(mine: Operation, theirs: Operation) -> None:
    assert type(mine) is type(theirs)
    assert list(mine.properties.items()) == list(theirs.properties.items())
    assert mine.attributes == theirs.attributes and mine.location == theirs.location
    assert list(mine.operands) == list(theirs.operands)
    assert [r.type for r in mine.results] == [r.type for r in theirs.results]
    assert [(r.op, r.index) for r in mine.results] == [(mine, i) for i in range(len(mine.results))]
    assert len(mine.regions) == len(theirs.regions) and mine.successors == theirs.successors
    assert all(r.parent is mine for r in mine.regions)
    # each operand knows its use by the op (xDSL's use lists)
    uses = {(u.operation, u.index) for v in mine.operands for u in v.uses}
    assert all((mine, i) in uses for i in range(len(mine.operands)))
    assert str(mine) == str(theirs)


def _values() -> tuple[Block, list]:
    block = Block(arg_types=[INDEX, INDEX, INDEX, f64, f64, i1])
    return block, list(block.args)


def _loop_body(carried: int) -> Block:
    return Block(arg_types=[INDEX, *[f64] * carried])


def test_for_and_yield_ops_are_the_ones_xdsl_constructors_make():
    for carried in (0, 1, 2):
        built = []
        for make in ("ours", "xdsl"):
            _, (lb, ub, step, x, y, _) = _values()
            body = _loop_body(carried)
            acc = list(body.args[1:])
            if make == "ours":
                body.add_op(yield_op(*acc))
                built.append(for_op(lb, ub, step, [x, y][:carried], body))
            else:
                body.add_op(scf.YieldOp(*acc))
                built.append(scf.ForOp(lb, ub, step, [x, y][:carried], body))
        mine, theirs = built
        assert len(mine.operands) == 3 + carried  # (xDSL's own values differ per build)
        assert str(mine) == str(theirs)
        mine.verify()


def test_scf_ops_match_their_constructors_on_shared_operands():
    block, (lb, ub, step, x, y, cond) = _values()
    pairs = [
        (yield_op(), scf.YieldOp()),
        (yield_op(x, y), scf.YieldOp(x, y)),
        (condition_op(cond, x), scf.ConditionOp(cond, x)),
        (condition_op(cond), scf.ConditionOp(cond)),
    ]
    for mine, theirs in pairs:
        _same_op(mine, theirs)
    for carried in ([], [x], [x, y]):
        bodies = [_loop_body(len(carried)) for _ in range(2)]
        for body in bodies:
            body.add_op(scf.YieldOp(*body.args[1:]))
        _same_op(
            for_op(lb, ub, step, carried, bodies[0]), scf.ForOp(lb, ub, step, carried, bodies[1])
        )
    for types in ([], [f64], [f64, f64]):
        regions = []
        for _ in range(2):
            then_block, else_block = Block(), Block()
            then_block.add_op(scf.YieldOp(*[x] * len(types)))
            else_block.add_op(scf.YieldOp(*[y] * len(types)))
            regions.append((Region(then_block), Region(else_block)))
        _same_op(if_op(cond, types, *regions[0]), scf.IfOp(cond, types, *regions[1]))
    # an scf.if without an else region (`Region()`), and blocks given for regions
    then_blocks = [Block([scf.YieldOp()]) for _ in range(2)]
    _same_op(if_op(cond, [], then_blocks[0]), scf.IfOp(cond, [], [then_blocks[1]]))
    whiles = []
    for _ in range(2):
        before = Block(arg_types=[f64])
        less = arith.CmpfOp(before.args[0], y, "olt")
        before.add_ops([less, scf.ConditionOp(less, before.args[0])])
        after = Block(arg_types=[f64])
        after.add_op(scf.YieldOp(after.args[0]))
        whiles.append((Region(before), Region(after)))
    mine = while_op([x], [f64], *whiles[0])
    _same_op(mine, scf.WhileOp([x], [f64], *whiles[1]))
    mine.verify()


def test_constant_arrays_are_the_attributes_xdsl_constructors_make():
    import numpy as np
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, MemRefType, TensorType, i64

    from cofactor.ir.builder import _constant_data

    arrays = [
        np.array([0.5, -0.0, np.nan, np.inf, -1e-300]),
        np.arange(6.0).reshape(2, 3)[:, ::2],  # (not contiguous)
        np.array(2.5),
        np.array([[-(2**63), 2**63 - 1], [0, -1]], dtype=np.int64),
        np.array([True, False, True]),
        np.array([1 + 2j, -3j]).view(np.float64).reshape(2, 2),
    ]
    for arr in arrays:
        floats = arr.dtype == np.float64
        element = f64 if floats else i64
        values = [float(v) for v in arr.flat] if floats else arr.ravel().tolist()
        expected_type = MemRefType(element, list(arr.shape))
        expected = DenseIntOrFPElementsAttr.from_list(TensorType(element, list(arr.shape)), values)
        type_, data = _constant_data(arr)
        assert type_ == expected_type and data == expected and str(data) == str(expected)
        data.verify()


def test_arith_and_math_ops_are_the_ones_their_constructors_make():
    """`IRBuilder.binary/unary/math` read what the constructor of an op would make from its
    definition (for every class of the bases `_same_type_shape` covers)."""
    from xdsl.dialects import math
    from xdsl.dialects.builtin import i64

    from cofactor.ir.builder import _SAME_TYPE_BASES, _same_type_shape, _typed_op

    classes = [
        cls
        for module in (arith, math)
        for cls in vars(module).values()
        if isinstance(cls, type)
        and any(base in cls.__mro__ for base in _SAME_TYPE_BASES)
        and cls.get_irdl_definition() is not None  # (not an abstract base)
    ]
    assert arith.AddfOp in classes and math.SqrtOp in classes and arith.AddiOp in classes
    for cls in classes:
        integer = arith.SignlessIntegerBinaryOperation in cls.__mro__
        block = Block(arg_types=[i64 if integer else f64] * 2)
        operands = block.args[: len(cls.get_irdl_definition().operands)]
        theirs = cls(*operands)
        types, properties, attributes = _same_type_shape(cls, tuple(operands))
        assert types == [r.type for r in theirs.results], cls
        assert list(properties.items()) == list(theirs.properties.items()), cls
        assert attributes == theirs.attributes == {}, cls
        _same_op(_typed_op(cls, *operands), theirs)
