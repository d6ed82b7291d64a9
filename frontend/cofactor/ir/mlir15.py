"""MLIR 15 compatibility: the few spellings where xDSL (which follows current MLIR) and MLIR 15
disagree, and the generic-form op factory used for them and for the `quantum` dialect.

Every op the frontend emits either comes from an xDSL op class whose printed form MLIR 15
parses (checked by tests/frontend/test_ir_ops.py through cofactor-opt / mlir-opt-15) or is
emitted in generic form through :func:`generic_op` under the name given here.
"""

from __future__ import annotations

from xdsl.dialects.builtin import UNKNOWN_LOC, StringAttr, UnregisteredOp
from xdsl.ir import (
    Attribute,
    Operation,
    OpResult,
    ParametrizedAttribute,
    Region,
    SSAValue,
    SSAValues,
    TypeAttribute,
    Use,
)
from xdsl.irdl import IRDLOperation, OptionalDef, irdl_attr_definition
from xdsl.printer import Printer

#: current MLIR / xDSL name -> what MLIR 15 calls it (or how we replace it).
MLIR15_SPELLINGS: dict[str, str] = {
    "math.absf": "math.abs",  # renamed after 15
    "arith.maximumf": "arith.maxf",  # renamed after 15; and convert-arith-to-llvm-15 does not
    "arith.minimumf": "arith.minf",  # lower maxf/minf, so we emit cmpf + select instead
    "math.fpowi": "math.powf",  # does not exist in 15
    "arith.remf": "arith.remf",  # no xDSL op class: emitted in generic form
}

#: math functions MLIR 15 cannot lower without extra passes (or has no op for): the frontend
#: calls the C library directly (`func.call @tan`), which every pipeline can lower.
LIBM_FUNCTIONS: dict[str, int] = {
    "tan": 1,
    "asin": 1,
    "acos": 1,
    "atan": 1,
    "atan2": 2,
    "sinh": 1,
    "cosh": 1,
    "tanh": 1,
    "expm1": 1,
    "log1p": 1,
    "log10": 1,
    "log2": 1,
    "fmod": 2,
}


@irdl_attr_definition
class ObsType(ParametrizedAttribute, TypeAttribute):
    """`!quantum.obs`: an observable handle (lowers to i64)."""

    name = "quantum.obs"


@irdl_attr_definition
class InternalLinkage(ParametrizedAttribute):
    """`#llvm.linkage<internal>` (MLIR 15 parses the linkage as a bare keyword; xDSL's own
    LinkageAttr prints it quoted, and its dialect module costs 20 ms of import)."""

    name = "llvm.linkage"

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<internal>")


_GENERIC_CLASSES: dict[str, tuple[type[Operation], StringAttr]] = {}
_NO_RESULTS: SSAValues = SSAValues()  # (an immutable tuple: shared by every op without results)


#: The one class of every generic op. xDSL's `UnregisteredOp.with_name(name)` makes a new
#: class per name (20-90 us each the first time in a process: a gradient's first trace made
#: four, `memref.global`, `math.tanh`, ...), which differ only in what their `create` names
#: the op; `generic_op` names it itself (the `op_name__` attribute, which is what xDSL
#: prints and cofactor reads), so one class serves every name.
_GENERIC_CLASS = UnregisteredOp.with_name("cofactor.generic")


def _generic_class(name: str) -> tuple[type[Operation], StringAttr]:
    entry = _GENERIC_CLASSES[name] = (_GENERIC_CLASS, StringAttr(name))
    return entry


def generic_op(
    name: str,
    operands: list[SSAValue],
    result_types: list[Attribute] | None = None,
    attributes: dict[str, Attribute] | None = None,
) -> Operation:
    """An op that xDSL prints in MLIR's generic form:
    `"name"(operands) {attrs} : (...) -> (...)`."""
    entry = _GENERIC_CLASSES.get(name)
    if entry is None:
        entry = _generic_class(name)
    cls, name_attr = entry
    # What `cls.create(...)` builds (the name last among the attributes), without the
    # generality of Operation.__init__ (successors, regions, properties: none here), which
    # was a third of the cost of emitting a gate. tests/frontend/test_trace_speed_paths.py
    # checks that both build the same op.
    # The operands as xDSL's setter stores them (the op has none before), without the
    # setter's generality: a tenth of the cost of emitting a gate.
    op = _bare_op(cls, operands, result_types)
    op.properties = {}
    op.attributes = {**(attributes or {}), "op_name__": name_attr}
    return op


def simple_op(
    cls: type[Operation],
    operands: list[SSAValue] | tuple[SSAValue, ...],
    result_types: list[Attribute] | None = None,
    properties: dict[str, Attribute] | None = None,
    regions: tuple[Region, ...] = (),
) -> Operation:
    """`cls.create(operands=..., result_types=..., properties=..., regions=...)` for an op
    without attributes or successors (constants, loads, stores: most ops of a trace; and
    functions, calls, returns), in half the time: the same fields, and the op's
    `__post_init__` (which fills in default properties). xDSL's constructors ask
    `isinstance` of ABCs (`Sequence`) of each operand and region, tens of microseconds per
    new class on the first call of a process. tests/frontend/test_trace_speed_paths.py
    checks that both build the same op."""
    op = _bare_op(cls, operands, result_types)
    op.properties = dict(properties) if properties else {}
    op.attributes = {}
    for region in regions:  # (what `add_region` does)
        if region.parent is not None:
            raise ValueError("Cannot add region that is already attached on an operation.")
        op.regions += (region,)
        region.parent = op
    fills = _FILLS_DEFAULTS.get(cls)
    if fills is None:
        fills = _FILLS_DEFAULTS[cls] = _fills_defaults(cls)
    if fills:
        op.__post_init__()
    return op


#: op class -> whether its `__post_init__` may add default properties or attributes
_FILLS_DEFAULTS: dict[type, bool] = {}


def _fills_defaults(cls: type[Operation]) -> bool:
    """False when `cls.__post_init__` is IRDL's and the op definition has no non-optional
    property or attribute with a default value: then it adds nothing (its base class only
    checks the class's name) and `simple_op` skips it."""
    if not issubclass(cls, IRDLOperation) or cls.__post_init__ is not IRDLOperation.__post_init__:
        return True
    op_def = cls.get_irdl_definition()
    defs = [*op_def.properties.values(), *op_def.attributes.values()]
    return any(
        not isinstance(d, OptionalDef) and getattr(d, "default_value", None) is not None
        for d in defs
    )


def _bare_op(
    cls: type[Operation],
    operands: list[SSAValue] | tuple[SSAValue, ...],
    result_types: list[Attribute] | None,
) -> Operation:
    """An op of `cls` with its operands (and their uses), results and location: the
    operands as xDSL's setter stores them (the op has none before), without the setter's
    generality. Successors and regions keep the class's defaults (none)."""
    op = cls.__new__(cls)
    values = op._operands = SSAValues(operands)
    # `Use(op, i)` and `value.add_use(use)` (the new use first in the value's list), in
    # one loop without their two calls per operand
    uses = []
    new_use = Use.__new__
    for i, value in enumerate(values):
        use = new_use(Use)
        use._operation, use._index = op, i
        first = value.first_use
        use._prev_use, use._next_use = None, first
        if first is not None:
            first._prev_use = use
        value.first_use = use
        uses.append(use)
    op._operand_uses = tuple(uses)
    op.results = (
        SSAValues([OpResult(t, op, i) for i, t in enumerate(result_types)])
        if result_types
        else _NO_RESULTS
    )
    op.location = UNKNOWN_LOC
    return op
