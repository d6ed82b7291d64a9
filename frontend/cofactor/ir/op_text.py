"""The text of the ops a trace emits, written directly: what xDSL's printer writes for them.

xDSL prints an op through generic machinery (declarative assembly formats, trait lookups,
`isinstance` checks, a call per token), whose first use in a process cost most of the
3 ms printing the 78-line module of `grad(sum(tanh(W @ x)**2))`. Each writer here handles
one kind of op in the plain form a trace builds (no extra attributes, default flags,
single-block regions) and writes the same characters; any other op, or an op of a known
kind in a form it does not handle, returns False and is printed by xDSL.
tests/frontend/test_op_text.py compares the text with xDSL's on every kind of op and on
traced programs.

A writer takes the printer (`cofactor.ir.printer._ListPrinter`: `parts` is the list of
strings the text is joined from, `ssa_name`/`type_text`/`attr_text` the names and texts
it has cached, `print_op` and `_print_new_line` xDSL's) and the op. The texts of types and
attributes come from `cofactor.ir.attribute_text`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects import arith, func, math, memref, scf
from xdsl.dialects.builtin import (
    FunctionType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    UnregisteredOp,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.traits import IsTerminator
from xdsl.utils.mlir_lexer import MLIRLexer

Writer = Callable[[Any, Operation], bool]

_BARE_IDENTIFIER = MLIRLexer.bare_identifier_regex


#: op class -> the properties its plain form may have: those with default values that its
#: assembly format prints only when they differ from the default (`fastmath`), at it
_ALLOWED: dict[type, dict[str, Attribute]] = {}


def _plain(op: Operation) -> bool:
    """`op` has no attributes and no properties beside the defaults that its format leaves
    out (an op of a class without a format-based writer has none allowed)."""
    if op.attributes:
        return False
    allowed = _ALLOWED.get(type(op), {})
    return all(name in allowed and value == allowed[name] for name, value in op.properties.items())


def _results(p: Any, op: Operation) -> None:
    results = op.results
    if results:
        p.parts.append(", ".join([p.ssa_name(r) for r in results]) + " = ")


def _names(p: Any, values: Any) -> str:
    return ", ".join([p.ssa_name(v) for v in values])


def _types(p: Any, values: Any) -> str:
    return ", ".join([p.type_text(v.type) for v in values])


def _function_type_text(p: Any, inputs: Any, outputs: Any) -> str | None:
    """`(inputs) -> outputs` as xDSL's `print_function_type` writes it."""
    head = "(" + ", ".join([p.type_text(t) for t in inputs]) + ") -> "
    if not outputs:
        return head + "()"
    if len(outputs) == 1:
        if isinstance(outputs[0], FunctionType):
            return None
        return head + p.type_text(outputs[0])
    return head + "(" + ", ".join([p.type_text(t) for t in outputs]) + ")"


def _attr_dict_text(p: Any, attributes: dict[str, Attribute]) -> str | None:
    """`{name = value, unit_name}`; None for a name that must be quoted."""
    items = []
    for name, value in attributes.items():
        if _BARE_IDENTIFIER.fullmatch(name) is None:
            return None
        items.append(name if type(value) is UnitAttr else f"{name} = {p.type_text(value)}")
    return "{" + ", ".join(items) + "}"


def _single_block(region: Region) -> Block | None:
    block = region.blocks.first
    if block is None or block.next_block is not None:
        return None
    return block


_TERMINATOR: dict[type, bool] = {}


def _is_terminator(op: Operation) -> bool:
    cls = type(op)
    known = _TERMINATOR.get(cls)
    if known is None:
        known = _TERMINATOR[cls] = op.has_trait(IsTerminator, value_if_unregistered=False)
    return known


def _region(p: Any, block: Block, terminators: bool = True) -> None:
    """A region of one block whose arguments are not printed (printed by the op, or none),
    as xDSL's `print_region` writes it."""
    p.parts.append("{")
    p._indent += 1
    for op in block.ops:
        if not terminators and _is_terminator(op):
            continue
        p._print_new_line()
        p.print_op(op)
    p._indent -= 1
    p._print_new_line()
    p.parts.append("}")


# -- ops without regions ------------------------------------------------------------------


def _binary(p: Any, op: Operation) -> bool:
    """`name %a, %b : type` (arith's and math's binary ops, `arith.select`)."""
    if not _plain(op):
        return False
    _results(p, op)
    p.parts.append(f"{op.name} {_names(p, op.operands)} : {p.type_text(op.results[0].type)}")
    return True


def _cast(p: Any, op: Operation) -> bool:
    """`name %a : from to into`."""
    if not _plain(op):
        return False
    (value,) = op.operands
    _results(p, op)
    into = p.type_text(op.results[0].type)
    p.parts.append(f"{op.name} {p.ssa_name(value)} : {p.type_text(value.type)} to {into}")
    return True


def _constant(p: Any, op: Operation) -> bool:
    if op.attributes or len(op.properties) != 1:
        return False
    _results(p, op)
    p.parts.append("arith.constant " + p.type_text(op.properties["value"]))
    return True


def _compare(p: Any, op: Operation) -> bool:
    """`arith.cmpf olt, %a, %b : f64` (and cmpi)."""
    predicate = op.properties.get("predicate")
    if op.attributes or type(predicate) is not IntegerAttr:
        return False
    fastmath = op.properties.get("fastmath")
    if len(op.properties) != (1 if fastmath is None else 2) or fastmath not in (None, _NO_FLAGS):
        return False
    names = _CMPF if type(op) is arith.CmpfOp else _CMPI
    lhs, rhs = op.operands
    _results(p, op)
    text = names[predicate.value.data]
    p.parts.append(
        f"{op.name} {text}, {p.ssa_name(lhs)}, {p.ssa_name(rhs)} : {p.type_text(lhs.type)}"
    )
    return True


_NO_FLAGS = arith.FastMathFlagsAttr("none")
_CMPF = arith.CMPF_COMPARISON_OPERATIONS
_CMPI = arith.CMPI_COMPARISON_OPERATIONS


def _variadic_terminator(p: Any, op: Operation) -> bool:
    """`func.return`, `scf.yield`: the name, then `%a, %b : t, u` when there are values."""
    if not _plain(op):
        return False
    _results(p, op)
    operands = op.operands
    if operands:
        p.parts.append(f"{op.name} {_names(p, operands)} : {_types(p, operands)}")
    else:
        p.parts.append(op.name)
    return True


def _condition(p: Any, op: Operation) -> bool:
    if not _plain(op):
        return False
    condition, *args = op.operands
    text = f"scf.condition({p.ssa_name(condition)})"
    if args:
        text += f" {_names(p, args)} : {_types(p, args)}"
    p.parts.append(text)
    return True


def _load(p: Any, op: Operation) -> bool:
    if not _plain(op):
        return False
    ref, *indices = op.operands
    _results(p, op)
    p.parts.append(f"memref.load {p.ssa_name(ref)}[{_names(p, indices)}] : {p.type_text(ref.type)}")
    return True


def _store(p: Any, op: Operation) -> bool:
    if not _plain(op):
        return False
    value, ref, *indices = op.operands
    p.parts.append(
        f"memref.store {p.ssa_name(value)}, {p.ssa_name(ref)}[{_names(p, indices)}] : "
        + p.type_text(ref.type)
    )
    return True


def _dealloc(p: Any, op: Operation) -> bool:
    if not _plain(op):
        return False
    (ref,) = op.operands
    p.parts.append(f"memref.dealloc {p.ssa_name(ref)} : {p.type_text(ref.type)}")
    return True


def _alloc(p: Any, op: Operation) -> bool:
    """`memref.alloc() : type` (and alloca): no dynamic sizes, symbols or alignment."""
    if op.attributes or op.operands or set(op.properties) != {"operandSegmentSizes"}:
        return False
    _results(p, op)
    p.parts.append(f"{op.name}() : {p.type_text(op.results[0].type)}")
    return True


def _call(p: Any, op: Operation) -> bool:
    """`func.call @f(%a, %b) : (t, u) -> r`."""
    if op.attributes or len(op.properties) != 1:
        return False
    signature = _function_type_text(p, [v.type for v in op.operands], op.result_types)
    if signature is None:
        return False
    _results(p, op)
    callee = p.type_text(op.properties["callee"])
    p.parts.append(f"func.call {callee}({_names(p, op.operands)}) : {signature}")
    return True


def _generic(p: Any, op: Operation) -> bool:
    """`"name"(%a, %b) {attributes} : (t, u) -> r`: an unregistered op (the `quantum`
    dialect, `memref.global`, ...) or one without a custom format, with no properties,
    regions or successors. The text around the operands is made once per kind of op (by
    the identities of its attributes and types, which live while the module prints): a
    long circuit is thousands of gates of a few kinds."""
    if op.properties or op.regions or op.successors:
        return False
    attributes = op.attributes
    operands = op.operands
    key = (
        type(op),
        *attributes,
        *map(id, attributes.values()),
        None,
        *[id(v.type) for v in operands],
        None,
        *[id(r.type) for r in op.results],
    )
    texts = p.generic_texts.get(key, False)
    if texts is False:
        texts = p.generic_texts[key] = _generic_texts(p, op)
    if texts is None:
        return False
    _results(p, op)
    p.parts.append(texts[0] + _names(p, operands) + texts[1])
    return True


def _generic_texts(p: Any, op: Operation) -> tuple[str, str] | None:
    """The text of `op` before and after its operands (`_generic`); None when xDSL must
    print it."""
    if type(op).print is not Operation.print and not isinstance(op, UnregisteredOp):
        return None
    attributes = op.attributes
    if isinstance(op, UnregisteredOp):
        name = op.op_name.data
        attributes = {k: v for k, v in attributes.items() if k != "op_name__"}
    else:
        name = op.name
    attr_text = _attr_dict_text(p, attributes) if attributes else ""
    signature = _function_type_text(p, [v.type for v in op.operands], op.result_types)
    if attr_text is None or signature is None:
        return None
    attrs = " " + attr_text if attr_text else ""
    return f'"{name}"(', f"){attrs} : {signature}"


# -- ops with regions ---------------------------------------------------------------------


def _module(p: Any, op: Operation) -> bool:
    assert isinstance(op, ModuleOp)
    block = _single_block(op.body)
    if op.sym_name is not None or op.attributes or block is None or block.first_op is None:
        return False
    if block.args:
        return False
    p.enter_scope()  # (IsolatedFromAbove)
    p.parts.append("builtin.module ")
    _region(p, block)
    p.exit_scope()
    return True


def _function(p: Any, op: Operation) -> bool:
    assert isinstance(op, func.FuncOp)
    properties = op.properties
    if op.arg_attrs is not None or op.res_attrs is not None or op.regions[0].blocks.first is None:
        return False
    block = _single_block(op.body)
    name = op.sym_name.data
    visibility = op.sym_visibility
    if block is None or _BARE_IDENTIFIER.fullmatch(name) is None:
        return False
    if not set(properties) <= {"sym_name", "function_type", "sym_visibility"}:
        return False
    if visibility is not None and type(visibility) is not StringAttr:
        return False
    outputs = op.function_type.outputs.data
    if any(name in _FUNC_RESERVED for name in op.attributes):
        return False  # (xDSL leaves them out)
    attrs = _attr_dict_text(p, op.attributes) if op.attributes else ""
    if attrs is None:
        return False
    p.enter_scope()  # (IsolatedFromAbove)
    parts = p.parts
    parts.append("func.func")
    if visibility is not None:
        parts.append(" " + visibility.data)
    args = ", ".join([f"{p.ssa_name(a)}: {p.type_text(a.type)}" for a in block.args])
    parts.append(f" @{name}({args})")
    if outputs:
        types = ", ".join([p.type_text(t) for t in outputs])
        parts.append(f" -> ({types})" if len(outputs) > 1 else " -> " + types)
    if attrs:
        parts.append(" attributes " + attrs)
    parts.append(" ")
    _region(p, block)
    p.exit_scope()
    return True


_FUNC_RESERVED = frozenset({"sym_name", "function_type", "sym_visibility", "arg_attrs"})


def _for(p: Any, op: Operation) -> bool:
    block = _single_block(op.regions[0])
    if op.attributes or op.properties or block is None or block.first_op is None:
        return False
    lb, ub, step, *init = op.operands
    indvar, *carried = block.args
    if len(carried) != len(init):
        return False
    _results(p, op)
    parts = p.parts
    text = (
        f"scf.for {p.ssa_name(indvar)} = {p.ssa_name(lb)} to {p.ssa_name(ub)} "
        f"step {p.ssa_name(step)}"
    )
    if carried:
        pairs = ", ".join(
            [f"{p.ssa_name(a)} = {p.ssa_name(v)}" for a, v in zip(carried, init, strict=True)]
        )
        types = ", ".join([p.type_text(a.type) for a in carried])
        text += f" iter_args({pairs}) -> ({types})"
    if p.type_text(indvar.type) != "index":
        text += " : " + p.type_text(indvar.type)
    parts.append(text + " ")
    _region(p, block, terminators=bool(init))
    return True


def _if(p: Any, op: Operation) -> bool:
    then_block = _single_block(op.regions[0])
    else_region = op.regions[1]
    else_block = _single_block(else_region)
    if op.attributes or op.properties or then_block is None or then_block.first_op is None:
        return False
    if then_block.args or (else_region.blocks.first is not None and else_block is None):
        return False
    if else_block is not None and (else_block.args or else_block.first_op is None):
        return False
    _results(p, op)
    results = op.results
    text = f"scf.if {p.ssa_name(op.operands[0])}"
    if results:
        text += " -> (" + ", ".join([p.type_text(r.type) for r in results]) + ")"
    p.parts.append(text + " ")
    _region(p, then_block, terminators=bool(results))
    if else_block is not None:
        p.parts.append(" else ")
        _region(p, else_block, terminators=bool(results))
    return True


_NO_OVERFLOW = arith.IntegerOverflowAttr("none")

#: ops printed by their assembly format (which tests/frontend/test_op_text.py checks is
#: the one each writer writes), with the default-valued properties the format prints only
#: when they differ from the default (`fastmath`): op class -> (writer, those defaults).
#: A fixed table: building it by looking at every op class would cost the import.
_BY_FORMAT: dict[type, tuple[Writer, dict[str, Attribute]]] = {
    **{
        cls: (_binary, {"fastmath": _NO_FLAGS})
        for cls in (
            arith.AddfOp,
            arith.SubfOp,
            arith.MulfOp,
            arith.DivfOp,
            arith.MaximumfOp,
            arith.MinimumfOp,
            arith.MaxnumfOp,
            arith.MinnumfOp,
            arith.NegfOp,
            math.PowFOp,
            math.SqrtOp,
            math.ExpOp,
            math.LogOp,
            math.SinOp,
            math.CosOp,
            math.FloorOp,
            math.CeilOp,
            math.AbsFOp,
            math.TanhOp,
        )
    },  # fmt: skip
    **{
        cls: (_binary, {"overflowFlags": _NO_OVERFLOW})
        for cls in (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.ShLIOp)
    },
    **{
        cls: (_binary, {})
        for cls in (
            arith.DivUIOp,
            arith.DivSIOp,
            arith.FloorDivSIOp,
            arith.CeilDivSIOp,
            arith.CeilDivUIOp,
            arith.RemUIOp,
            arith.RemSIOp,
            arith.MinUIOp,
            arith.MaxUIOp,
            arith.MinSIOp,
            arith.MaxSIOp,
            arith.AndIOp,
            arith.OrIOp,
            arith.XOrIOp,
            arith.ShRUIOp,
            arith.ShRSIOp,
            arith.SelectOp,
        )
    },  # fmt: skip
    **{
        cls: (_cast, {})
        for cls in (
            arith.IndexCastOp,
            arith.FPToSIOp,
            arith.FPToUIOp,
            arith.SIToFPOp,
            arith.UIToFPOp,
            arith.ExtUIOp,
            arith.ExtSIOp,
            arith.TruncIOp,
            arith.ExtFOp,
            arith.TruncFOp,
            arith.BitcastOp,
        )
    },  # fmt: skip
    memref.LoadOp: (_load, {}),
    memref.StoreOp: (_store, {}),
    memref.DeallocOp: (_dealloc, {}),
    func.ReturnOp: (_variadic_terminator, {}),
    scf.YieldOp: (_variadic_terminator, {}),
    scf.ConditionOp: (_condition, {}),
}

_ALLOWED.update({cls: defaults for cls, (_, defaults) in _BY_FORMAT.items()})


def writer_of(cls: type[Operation]) -> Writer | None:
    """The writer of the ops of class `cls` (None: printed by xDSL)."""
    writer = WRITERS.get(cls, False)
    if writer is False:
        # (generic ops each have a class of their own, made by UnregisteredOp.with_name)
        writer = WRITERS[cls] = _generic if issubclass(cls, UnregisteredOp) else None
    return writer


#: op class -> its writer, None for classes left to xDSL (exact classes: a subclass may
#: print differently)
WRITERS: dict[type, Writer | None] = {
    **{cls: writer for cls, (writer, _) in _BY_FORMAT.items()},
    ModuleOp: _module,
    func.FuncOp: _function,
    func.CallOp: _call,
    scf.ForOp: _for,
    scf.IfOp: _if,
    arith.ConstantOp: _constant,
    arith.CmpfOp: _compare,
    arith.CmpiOp: _compare,
    memref.AllocOp: _alloc,
    memref.AllocaOp: _alloc,
    memref.CopyOp: _generic,
}
