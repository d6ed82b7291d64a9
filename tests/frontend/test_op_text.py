"""The ops' text written directly (cofactor.ir.op_text) is, character for character, what
xDSL's printer writes: on every kind of op a writer handles, in the forms it must leave
to xDSL, and on traced programs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects import math as math_dialect
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Block, Region
from xdsl.printer import Printer

from cofactor.ir import attribute_text, op_text
from cofactor.ir.builder import INDEX, IRBuilder, memref_type
from cofactor.ir.mlir15 import generic_op
from cofactor.ir.printer import module_text
from cofactor.ir.scf_ops import for_op, if_op, while_op, yield_op

F64_REF = memref_type((3,), np.dtype(np.float64))

#: writer -> the assembly formats (words joined by single spaces) of the ops it writes
_FORMATS = {
    op_text._binary: {
        "$lhs `,` $rhs attr-dict `:` type($result)",
        "$lhs `,` $rhs (`fastmath` `` $fastmath^)? attr-dict `:` type($result)",
        "$lhs `,` $rhs (`overflow` `` $overflowFlags^)? attr-dict `:` type($result)",
        "$cond `,` $lhs `,` $rhs attr-dict `:` type($result)",
        "$operand (`fastmath` `` $fastmath^)? attr-dict `:` type($result)",
    },
    op_text._cast: {"$input attr-dict `:` type($input) `to` type($result)"},
    op_text._load: {"$memref `[` $indices `]` attr-dict `:` type($memref)"},
    op_text._store: {"$value `,` $memref `[` $indices `]` attr-dict `:` type($memref)"},
    op_text._dealloc: {"$memref attr-dict `:` type($memref)"},
    op_text._variadic_terminator: {"attr-dict ($arguments^ `:` type($arguments))?"},
    op_text._condition: {"`(` $condition `)` attr-dict ($args^ `:` type($args))?"},
}


def test_each_format_writer_handles_ops_of_the_format_it_writes():
    for cls, (writer, allowed) in op_text._BY_FORMAT.items():
        op_def = cls.get_irdl_definition()
        words = " ".join(op_def.assembly_format.split())
        assert words in _FORMATS[writer], cls
        # the properties a plain op may have are the defaults its format's optional group
        # is anchored on (and so leaves out)
        for name, value in allowed.items():
            assert f"${name}^" in words and op_def.properties[name].default_value == value
        defaults = {
            name for name, d in op_def.properties.items() if getattr(d, "default_value", None)
        }
        assert defaults <= {*allowed, "nontemporal"}, cls  # (a load's: printed when present)


def _awkward_module() -> ModuleOp:
    b = IRBuilder()
    block = Block(arg_types=[F64_REF, f64, i64, i1, INDEX])
    ref, x, n, flag, idx = block.args
    b.push(block)
    y = b.load(ref, [b.index(0)])
    for value in (0.0, -0.0, math.nan, math.inf, -math.inf, 1e-300, 0.1, 1.0, 2.5e300, 1 / 3):
        b.const(value, f64)
    for value in (0, 1, -1, 2**62, -(2**63)):
        b.const(value, i64)
    b.const(True, i1)
    b.const(False, i1)
    b.const(7, INDEX)
    b.insert(arith.ConstantOp(IntegerAttr(5, i32)))
    b.insert(arith.ConstantOp(FloatAttr(0.1, f32)))
    for cls in (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.MaximumfOp):
        b.binary(cls, x, y)
    b.insert(arith.AddfOp(x, y, arith.FastMathFlagsAttr("fast")))  # (left to xDSL)
    for cls in (arith.AddiOp, arith.MuliOp, arith.RemSIOp, arith.AndIOp, arith.ShRSIOp):
        b.binary(cls, n, n)
    nsw = arith.IntegerOverflowAttr([arith.IntegerOverflowFlag.NSW])
    b.insert(arith.AddiOp(n, n, overflow=nsw))
    for cls in (math_dialect.SqrtOp, math_dialect.ExpOp, math_dialect.FloorOp, arith.NegfOp):
        b.math(cls, x)
    b.powf(x, y)
    for predicate in ("oeq", "olt", "une", "uno"):
        b.cmpf(predicate, x, y)
    b.insert(arith.CmpfOp(x, y, "olt", arith.FastMathFlagsAttr("fast")))
    for predicate in ("eq", "ne", "slt", "uge"):
        b.cmpi(predicate, n, n)
    b.select(flag, x, y)
    b.cast(n, i64, f64)
    b.cast(x, f64, i64)
    b.cast(flag, i1, f64)
    b.cast(flag, i1, i64)
    b.from_index(b.to_index(n))
    cube = b.alloca(memref_type((2, 2, 2), np.dtype(np.float64)))
    scalar = b.alloc(memref_type((), np.dtype(np.int64)))
    i, j = b.index(0), b.index(1)
    for ids in ([i, j, i], [j, j, j], [idx, i, j]):
        b.store(b.load(cube, ids), cube, ids)
    b.store(n, scalar, [])
    b.copy(ref, ref)
    b.dealloc(scalar)
    b.insert(memref.AllocOp.get(f64, shape=[2], alignment=64))  # (left to xDSL)
    b.generic("arith.remf", [x, y], f64)
    attrs = {
        "name": StringAttr("RZ"),
        "quoted": StringAttr('a "b"\\c\n'),
        "bad-key": UnitAttr(),
        "arr": ArrayAttr([IntegerAttr(1, i64), IntegerAttr(2, i64)]),
        "sym": SymbolRefAttr("f"),
        "nested": SymbolRefAttr("m", ["f"]),
        "unit": UnitAttr(),
    }
    for key, value in attrs.items():
        b.insert(generic_op("quantum.gate", [x, n], [], {key: value}))
    b.insert(generic_op("quantum.expval", [n], [f64, i64], {}))
    data = TensorType(f64, [2])
    b.insert(generic_op("x.dense", [], [], {"v": DenseIntOrFPElementsAttr.from_list(data, [1, 2])}))
    b.call("g", [x])
    b.insert(func.CallOp("h", [x, n], [f64, i64]))
    b.insert(func.CallOp("k", [], [f64]))
    hinted = b.binary(arith.AddfOp, x, x)
    hinted.name_hint = "acc"
    b.binary(arith.AddfOp, hinted, b.binary(arith.AddfOp, x, x))
    again = b.binary(arith.MulfOp, x, x)
    again.name_hint = "acc"
    b.binary(arith.AddfOp, again, hinted)
    _loops(b, x, y, n, flag)
    b.insert(func.ReturnOp())
    b.pop()
    fn = func.FuncOp("f", ([F64_REF, f64, i64, i1, INDEX], []), Region(block))
    fn.attributes["llvm.emit_c_interface"] = UnitAttr()
    private = func.FuncOp("g2", ([f64], [f64, f64]), Region(Block(arg_types=[f64])))
    arg = private.body.block.args[0]
    private.body.block.add_op(func.ReturnOp(arg, arg))
    private.sym_visibility = StringAttr("private")
    private.attributes["cofactor.num_inputs"] = IntegerAttr(1, i64)
    one = func.FuncOp("g1", ([f64], [f64]), Region(Block(arg_types=[f64])))
    one.body.block.add_op(func.ReturnOp(one.body.block.args[0]))
    decl = func.FuncOp.external("tanh", [f64], [f64])
    return ModuleOp([decl, private, one, fn])


def _loops(b: IRBuilder, x, y, n, flag) -> None:
    for carried in ([], [x], [x, y]):
        body = Block(arg_types=[INDEX, *[v.type for v in carried]])
        b.push(body)
        acc = [b.binary(arith.AddfOp, a, a) for a in body.args[1:]]
        b.load(b.alloca(F64_REF), [body.args[0]])
        b.insert(yield_op(*acc))
        b.pop()
        b.insert(for_op(b.index(0), b.index(4), b.index(1), carried, body))
    body = Block(arg_types=[i64])  # an i64 induction variable
    body.add_op(scf.YieldOp())
    b.insert(for_op(n, n, n, [], body))
    then_block, else_block = Block(), Block()
    b.push(then_block)
    b.insert(yield_op(b.binary(arith.AddfOp, x, y)))
    b.pop()
    else_block.add_op(yield_op(y))
    b.insert(if_op(flag, [f64], then_block, else_block))
    only_then = Block()
    b.push(only_then)
    b.binary(arith.AddfOp, x, y)
    b.insert(yield_op())
    b.pop()
    b.insert(if_op(flag, [], only_then))
    before, after = Block(arg_types=[f64]), Block(arg_types=[f64])
    b.push(before)
    b.insert(scf.ConditionOp(b.cmpf("olt", before.args[0], y), before.args[0]))
    b.pop()
    b.push(after)
    b.insert(yield_op(b.binary(arith.AddfOp, after.args[0], x)))
    b.pop()
    b.insert(while_op([x], [f64], before, after))


def test_module_text_matches_xdsl_on_every_kind_of_op_written():
    module = _awkward_module()
    assert module_text(module) == str(module)


def test_the_writers_write_the_ops_of_a_plain_trace(monkeypatch):
    """Every op of the module of grad(sum(tanh(W @ x)**2)) is written directly (the fast
    path is taken), and the text is xDSL's."""
    import cofactor
    from cofactor.ir import printer
    from cofactor.jit import QJIT
    from cofactor.launcher import BufferSpec

    x = np.linspace(-1.0, 1.0, 8)

    def loss(w):
        return np.sum(np.tanh(w @ x) ** 2)

    fn = QJIT(cofactor.grad(loss))
    module = fn._trace_module(("tuple", ("*",)), (BufferSpec((8, 8), np.dtype(np.float64)),), ())
    module = module[0]._module
    left_to_xdsl = []
    original = printer.Printer.print_op

    def record(self, op):
        left_to_xdsl.append(op.name)
        original(self, op)

    monkeypatch.setattr(printer.Printer, "print_op", record)
    text = module_text(module)
    assert left_to_xdsl == []
    monkeypatch.undo()
    assert text == str(module)


@pytest.mark.parametrize(
    "attribute",
    [
        f64,
        i1,
        i64,
        INDEX,
        IntegerType(8, Signedness.SIGNED),
        f32,
        memref_type((), np.dtype(np.float64)),
        memref_type((2, 3, 2), np.dtype(np.complex128)),
        MemRefType(f64, [-1, 2]),
        MemRefType(i32, [4]),
        IntegerAttr(0, INDEX),
        IntegerAttr(-5, i64),
        IntegerAttr(1, i1),
        IntegerAttr(0, i1),
        IntegerAttr(3, i32),
        *[FloatAttr(v, f64) for v in (0.0, -0.0, 1.0, 0.1, 1e-300, 5e-324, 1e300, -2.5, 1 / 3)],
        *[FloatAttr(v, f64) for v in (math.nan, math.inf, -math.inf, 1e22, 123456789.0)],
        FloatAttr(0.1, f32),
        StringAttr("plain text"),
        StringAttr('quote" back\\ tab\t é'),
        SymbolRefAttr("f"),
        SymbolRefAttr("with space"),
        SymbolRefAttr("m", ["f"]),
        ArrayAttr([]),
        ArrayAttr([IntegerAttr(0, i64), StringAttr("s")]),
        ArrayAttr([UnitAttr()]),
        *[
            DenseIntOrFPElementsAttr.from_list(TensorType(element, shape), values)
            for element, shape, values in (
                (f64, [101], [0.5 * i for i in range(101)]),
                (f64, [2, 60], [0.0, -0.0] * 60),  # (equal values: a splat)
                (f64, [3, 50], [1.5] * 149 + [float("nan")]),
                (f64, [120], [float("nan")] * 120),
                (f64, [4], [1.0, 2.0, 3.0, 4.0]),
                (i64, [128], list(range(-64, 64))),
                (i64, [128], [7] * 128),
                (i32, [128], list(range(128))),
            )
        ],
    ],
    ids=repr,
)
def test_attribute_text_is_what_xdsl_prints_or_none(attribute):
    parts: list[str] = []

    class Stream:
        write = parts.append

    Printer(stream=Stream()).print_attribute(attribute)
    text = attribute_text.attribute_text(attribute)
    assert text is None or text == "".join(parts)
    # the types and constants of a trace are written directly
    if attribute in (f64, i1, i64, INDEX, IntegerAttr(-5, i64), IntegerAttr(0, i1)):
        assert text is not None
    if type(attribute) is DenseIntOrFPElementsAttr:  # (large, not a splat, no NaN)
        values = attribute.get_values()
        plain = len(values) > 100 and len(set(values)) > 1 and all(v == v for v in values)
        assert (text is not None) == (plain and attribute.get_element_type() in (f64, i64))
    if type(attribute) is FloatAttr and attribute.type == f64:
        value = attribute.value.data
        assert (text is None) == (math.isnan(value) or math.isinf(value) or value == 123456789.0)
