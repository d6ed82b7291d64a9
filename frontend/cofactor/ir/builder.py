"""IR emission helpers on top of xDSL.

`IRBuilder` keeps the stack of insertion points (one per region being traced) and offers one
small method per kind of op the tracer needs. Scalars are `f64`, `i64` or `i1` SSA values;
arrays cross function boundaries as memrefs (complex128 as `memref<...x2xf64>`, see docs/ir.md).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith, func, math, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.irdl import OptionalDef
from xdsl.rewriter import InsertPoint

from cofactor.ir.mlir15 import LIBM_FUNCTIONS, generic_op, simple_op

INDEX = IndexType()

#: numpy dtype -> (scalar element type, trailing memref dims)
_ELEMENT_TYPES: dict[np.dtype, tuple[Attribute, tuple[int, ...]]] = {
    np.dtype(np.float64): (f64, ()),
    np.dtype(np.int64): (i64, ()),
    np.dtype(np.bool_): (i1, ()),
    np.dtype(np.complex128): (f64, (2,)),
}

#: the dtypes cofactor supports
SUPPORTED_DTYPES = tuple(_ELEMENT_TYPES)


def scalar_type(dtype: np.dtype) -> Attribute:
    """The MLIR type of one (real) scalar of `dtype`."""
    return _ELEMENT_TYPES[np.dtype(dtype)][0]


def memref_type(shape: Sequence[int], dtype: np.dtype) -> MemRefType:
    """The memref type that holds an array of `shape` and `dtype` (complex: trailing 2xf64)."""
    key = (tuple(shape), dtype)
    type_ = _MEMREF_TYPES.get(key)
    if type_ is None:
        elem, extra = _ELEMENT_TYPES[np.dtype(dtype)]
        # MemRefType(elem, dims), its parameters (shape, element type, no layout, no memory
        # space) set as xDSL's constructor stores them: for sizes of a numpy shape and a
        # supported element type its checks always pass, and running them costs a tenth
        # of a millisecond on the first call of a process
        dims = array_attr(tuple(_raw_int(int(d)) for d in (*shape, *extra)))
        type_ = _raw_attr(MemRefType, (dims, elem, _NONE, _NONE))
        if len(_MEMREF_TYPES) < _ATTR_CACHE_SIZE:
            _MEMREF_TYPES[key] = type_
    return type_


def function_type(inputs: Sequence[Attribute], outputs: Sequence[Attribute]) -> FunctionType:
    """`FunctionType.from_lists(inputs, outputs)` for types (set as its constructor stores
    them, without its generic checks: see `memref_type`)."""
    return _raw_attr(FunctionType, (array_attr(tuple(inputs)), array_attr(tuple(outputs))))


def func_op(name: str, inputs: Sequence[Attribute], region: Region) -> func.FuncOp:
    """`func.FuncOp(name, (inputs, []), region)`: the same properties, in the same order,
    built by `simple_op`, which skips xDSL's generic op constructor (on the first call of a
    process, its `isinstance` checks against `Sequence` and the checks of the function
    type cost a quarter of a millisecond per function)."""
    properties = {"sym_name": StringAttr(name), "function_type": function_type(inputs, [])}
    return simple_op(func.FuncOp, (), None, properties, (region,))  # type: ignore[return-value]


def module_op(ops: Sequence[Operation]) -> ModuleOp:
    """`ModuleOp(ops)`: a module of one block holding `ops` (see `func_op`; xDSL's
    constructor took 50 us on the first call of a process)."""
    return simple_op(ModuleOp, (), None, None, (Region(Block(ops)),))  # type: ignore[return-value]


def _raw_int(value: int) -> IntAttr:
    attr = IntAttr.__new__(IntAttr)
    object.__setattr__(attr, "data", value)
    return attr


def array_attr(items: tuple[Attribute, ...]) -> ArrayAttr:
    attr = ArrayAttr.__new__(ArrayAttr)
    object.__setattr__(attr, "data", items)
    return attr


def _raw_attr(cls: type, parameters: tuple[Attribute, ...]) -> Any:
    """An instance of the parametrized attribute `cls` with `parameters`, as
    `cls.new(parameters)` stores them, without its verification."""
    fields = _PARAMETER_FIELDS.get(cls)
    if fields is None:
        fields = _PARAMETER_FIELDS[cls] = tuple(f for f, _ in cls.get_irdl_definition().parameters)
    attr = cls.__new__(cls)
    for name, value in zip(fields, parameters, strict=True):
        object.__setattr__(attr, name, value)
    return attr


_PARAMETER_FIELDS: dict[type, tuple[str, ...]] = {}
_NONE = NoneAttr()


def link_op(op: Operation, block: Block, before: Operation | None) -> None:
    """`block.insert_op_before(op, before)`, or `block.add_op(op)` when `before` is None,
    for an op in no block yet: xDSL's checks and links, the check that walks up from the
    block to its ancestors made only for an op with regions (one without regions contains
    no block). Every op a trace makes is inserted here, most once per gate or element."""
    if op.parent is not None:
        raise ValueError("Can't add to a block an operation already attached to a block.")
    if op.regions and op.is_ancestor(block):
        raise ValueError("Can't add an operation to a block contained in the operation.")
    if before is None:
        op.parent = block
        last = block._last_op
        op._prev_op, op._next_op = last, None
        if last is None:
            block._first_op = op
        else:
            last._next_op = op
        block._last_op = op
        return
    if before.parent is not block:
        raise ValueError("Can't insert operation before operation not in current block")
    op.parent = block
    prev = before._prev_op
    op._prev_op, op._next_op = prev, before
    before._prev_op = op
    if prev is None:
        block._first_op = op
    else:
        prev._next_op = op


def call_op(
    name: str, args: Sequence[SSAValue], result_types: Sequence[Attribute] = ()
) -> func.CallOp:
    """`func.call @name(args)`: the op `func.CallOp(name, args, result_types)` makes, built
    without xDSL's generic constructor, whose first list of operands costs a millisecond
    of `isinstance` checks against every op class (ABC caches), once per process: on the
    path of a function's first call, which the disk cache otherwise serves in a few ms."""
    return simple_op(  # type: ignore[return-value]
        func.CallOp, list(map(value_of, args)), list(result_types), {"callee": symbol_ref(name)}
    )


def return_op(*values: SSAValue) -> func.ReturnOp:
    """`func.return values`, as `func.ReturnOp(*values)` makes it (see `call_op`)."""
    return simple_op(func.ReturnOp, list(map(value_of, values)))  # type: ignore[return-value]


def symbol_ref(name: str) -> SymbolRefAttr:
    ref = _SYMBOL_REFS.get(name)
    if ref is None:
        ref = SymbolRefAttr(name)
        if len(_SYMBOL_REFS) < _ATTR_CACHE_SIZE:
            _SYMBOL_REFS[name] = ref
    return ref


_SYMBOL_REFS: dict[str, SymbolRefAttr] = {}
#: the operand segment sizes of an alloc/alloca without dynamic sizes or symbol operands
_NO_SEGMENTS = DenseArrayBase.from_list(i32, (0, 0))


def value_of(v: SSAValue | Operation) -> SSAValue:
    """`SSAValue.get(v)`: `v` itself when it is a value (an op result or block argument,
    told by its exact class: `SSAValue.get` asks `isinstance` of ABCs, a few microseconds
    for every operand of a trace), else the single result of op `v`."""
    return v if type(v) in _VALUE_CLASSES else SSAValue.get(v)  # type: ignore[return-value]


_VALUE_CLASSES = frozenset((OpResult, BlockArgument))


#: (shape, dtype) -> its memref type. Types are immutable values, and xDSL's constructor
#: checks its parameters generically (about 50 us a type, 0.5 ms for the first): a trace
#: asks for the same few types over and over.
_MEMREF_TYPES: dict[tuple, MemRefType] = {}


class IRBuilder:
    """Emits ops at the current insertion point; `push`/`pop` enter and leave regions."""

    def __init__(self) -> None:
        self._stack: list[Builder] = []
        self.libm_declared: set[str] = set()
        self.module_ops: list[Operation] = []

    # -- insertion points ------------------------------------------------------------
    def push(self, block: Block) -> None:
        self._stack.append(Builder(InsertPoint.at_end(block)))

    def push_at(self, point: InsertPoint) -> None:
        self._stack.append(Builder(point))

    def pop(self) -> None:
        self._stack.pop()

    @property
    def appending_block(self) -> Block | None:
        """The current block when ops are appended at its end, else None."""
        point = self._stack[-1].insertion_point
        return point.block if point.insert_before is None else None

    @property
    def block(self) -> Block:
        block = self._stack[-1].insertion_point.block
        return block

    def insert(self, op: Operation) -> Operation:
        # what xDSL's Builder.insert does for our builders (no name hints, no handlers)
        point = self._stack[-1].insertion_point
        link_op(op, point.block, point.insert_before)
        return op

    def res(self, op: Operation) -> SSAValue:
        """Insert `op` and return its single result."""
        return self.insert(op).results[0]

    # -- constants ---------------------------------------------------------------------
    def const(self, value: float | int | bool, type_: Attribute) -> SSAValue:
        if type_ == f64:
            return self._constant(_float_attr(float(value)), f64)
        if type_ == i1:
            return self._constant(int_attr(-1 if value else 0, i1), i1)
        return self._constant(int_attr(int(value), type_), type_)

    def _constant(self, attr: Attribute, type_: Attribute) -> SSAValue:
        # what arith.ConstantOp(attr) builds, without its generic (slow) constructor
        return self.res(simple_op(arith.ConstantOp, [], [type_], {"value": attr}))

    # -- arithmetic ------------------------------------------------------------------
    def binary(self, op_class: type[Operation], a: SSAValue, b: SSAValue) -> SSAValue:
        return self.res(_typed_op(op_class, value_of(a), value_of(b)))

    def unary(self, op_class: type[Operation], a: SSAValue) -> SSAValue:
        return self.res(_typed_op(op_class, value_of(a)))

    def cmpf(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.res(arith.CmpfOp(a, b, predicate))

    def cmpi(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.res(arith.CmpiOp(a, b, predicate))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.res(arith.SelectOp(cond, a, b))

    def generic(self, name: str, operands: list[SSAValue], result: Attribute) -> SSAValue:
        return self.res(generic_op(name, operands, [result]))

    def libm(self, name: str, *args: SSAValue) -> SSAValue:
        """`func.call @name(args) : (f64...) -> f64` to the C math library."""
        if name not in self.libm_declared:
            self.libm_declared.add(name)
            nargs = LIBM_FUNCTIONS[name]
            self.module_ops.append(func.FuncOp.external(name, [f64] * nargs, [f64]))
        return self.res(call_op(name, args, [f64]))

    def math(self, op_class: type[Operation], a: SSAValue) -> SSAValue:
        return self.res(_typed_op(op_class, value_of(a)))

    def powf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.res(math.PowFOp(a, b))

    def cast(self, value: SSAValue, src: Attribute, dst: Attribute) -> SSAValue:
        """Convert a scalar between f64, i64 and i1 with numpy's semantics."""
        if src == dst:
            return value
        if dst == i1:
            zero = self.const(0, src)
            if src == f64:
                return self.cmpf("une", value, zero)
            return self.cmpi("ne", value, zero)
        if src == i1:
            if dst == f64:
                return self.res(arith.UIToFPOp(value, f64))
            return self.res(arith.ExtUIOp(value, i64))
        if dst == f64:
            return self.res(arith.SIToFPOp(value, f64))
        return self.res(arith.FPToSIOp(value, i64))

    def to_index(self, value: SSAValue) -> SSAValue:
        return self.res(arith.IndexCastOp(value, INDEX))

    def from_index(self, value: SSAValue) -> SSAValue:
        return self.res(arith.IndexCastOp(value, i64))

    def index(self, value: int) -> SSAValue:
        return self.res(index_constant_op(value))

    # -- memory ----------------------------------------------------------------------
    def alloc(self, type_: MemRefType) -> SSAValue:
        # (the op `memref.AllocOp.get(element type, shape)` makes; see `call_op` for why not
        # through xDSL's constructor)
        return self.res(
            simple_op(memref.AllocOp, [], [type_], {"operandSegmentSizes": _NO_SEGMENTS})
        )

    def alloca(self, type_: MemRefType) -> SSAValue:
        return self.res(
            memref.AllocaOp.create(
                result_types=[type_], properties={"operandSegmentSizes": _NO_SEGMENTS}
            )
        )

    def constant_array(self, name: str, arr: np.ndarray) -> SSAValue:
        """A read-only memref holding `arr` (float64 or int64; complex as trailing 2xf64): one
        `memref.global` constant in the module, so the IR holds the data once, as a dense
        attribute, instead of one constant and one store per element. The memref must never
        be written or freed."""
        if arr.dtype == np.complex128:
            arr = arr.view(np.float64).reshape(*arr.shape, 2)
        name_attr = StringAttr(name)
        type_, initial_value = _constant_data(arr)
        self.module_ops.append(
            generic_op(
                "memref.global",
                [],
                [],
                {
                    "sym_name": name_attr,
                    "type": type_,
                    "initial_value": initial_value,
                    "sym_visibility": _PRIVATE,
                    "constant": UnitAttr(),
                },
            )
        )
        return self.res(generic_op("memref.get_global", [], [type_], {"name": symbol_ref(name)}))

    def dealloc(self, ref: SSAValue) -> None:
        # memref.DeallocOp.get(ref), without the generic constructor (70 us the first time)
        self.insert(simple_op(memref.DeallocOp, [value_of(ref)]))

    def load(self, ref: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
        return self.res(load_op(value_of(ref), list(map(value_of, indices))))

    def store(self, value: SSAValue, ref: SSAValue, indices: Sequence[SSAValue]) -> None:
        # memref.StoreOp.get(value, ref, indices), without the generic constructor
        operands = [value_of(value), value_of(ref), *map(value_of, indices)]
        self.insert(simple_op(memref.StoreOp, operands))

    def copy(self, src: SSAValue, dst: SSAValue) -> None:
        self.insert(simple_op(memref.CopyOp, [value_of(src), value_of(dst)]))

    def call(self, name: str, args: Sequence[SSAValue]) -> None:
        self.insert(call_op(name, args))


def _constant_data(arr: np.ndarray) -> tuple[MemRefType, DenseIntOrFPElementsAttr]:
    """The memref type of a constant array of float64 (else int64) and its dense attribute:
    `DenseIntOrFPElementsAttr.from_list(TensorType(element, shape), values)`, built from the
    array's bytes (what `from_list` packs value by value: little-endian f64 or i64) and set
    as xDSL's constructors store the parameters (see `memref_type`): 1 ms a first call for a
    512-element array otherwise."""
    floats = arr.dtype == np.float64
    element = f64 if floats else i64
    shape = tuple(int(d) for d in arr.shape)
    type_ = memref_type(shape, np.dtype(np.float64 if floats else np.int64))
    tensor = _raw_attr(TensorType, (array_attr(tuple(map(_raw_int, shape))), element, _NONE))
    raw = np.ascontiguousarray(arr, dtype="<f8" if floats else "<i8").tobytes()
    return type_, _raw_attr(DenseIntOrFPElementsAttr, (tensor, BytesAttr(raw)))


_PRIVATE = StringAttr("private")


def index_constant_op(value: int) -> Operation:
    """`arith.constant value : index` (not inserted)."""
    return simple_op(arith.ConstantOp, [], [INDEX], {"value": int_attr(value, INDEX)})


def load_op(ref: SSAValue, indices: list[SSAValue]) -> Operation:
    """`memref.LoadOp.get(ref, indices)` (not inserted), without the generic constructor."""
    type_ = ref.type
    assert isinstance(type_, MemRefType)
    return simple_op(memref.LoadOp, [ref, *indices], [type_.element_type])


#: (op class, operand types) -> (result types, properties, attributes) of `op_class(*operands)`
_OP_SHAPES: dict[tuple, tuple[list[Attribute], dict, dict]] = {}


#: base classes of the arith/math ops whose constructor, given operands only, makes one
#: result of the first operand's type, no attributes, and the properties of the op's
#: definition that have default values, at those values (`fastmath`, `overflowFlags`)
_SAME_TYPE_BASES = (
    arith.FloatingPointLikeBinaryOperation,
    arith.SignlessIntegerBinaryOperation,
    arith.NegfOp,
    math.FloatingPointLikeUnaryMathOperation,
    math.FloatingPointLikeBinaryMathOperation,
)


def _same_type_shape(
    op_class: type[Operation], operands: tuple[SSAValue, ...]
) -> tuple[list[Attribute], dict, dict] | None:
    """What `op_class(*operands)` makes (its result types, properties and attributes) for
    an op of `_SAME_TYPE_BASES`, read from its definition without running its constructor
    (xDSL's generic one: a fifth of a millisecond per class on a process's first trace);
    None for other classes. tests/frontend/test_ir_fast_builders.py checks both agree."""
    if not any(base in op_class.__mro__ for base in _SAME_TYPE_BASES):
        return None
    op_def = op_class.get_irdl_definition()  # type: ignore[attr-defined]
    if op_def is None:
        return None
    defaults = {
        name: d.default_value
        for name, d in op_def.properties.items()
        if not isinstance(d, OptionalDef) and getattr(d, "default_value", None) is not None
    }
    return [operands[0].type], defaults, {}


def _typed_op(op_class: type[Operation], *operands: SSAValue) -> Operation:
    """`op_class(*operands)` for the arith/math ops whose constructor's result depends on
    nothing but the operand types (result type, default flags): what it makes is read
    from the op's definition (`_same_type_shape`) or, for other classes, from the
    constructor's first op, once per (class, operand types); every op is then built by
    `simple_op`, which skips xDSL's generic constructor (a tenth of the cost)."""
    key = (op_class, *[v.type for v in operands])
    shape = _OP_SHAPES.get(key)
    if shape is None:
        shape = _same_type_shape(op_class, operands)
        if shape is None:
            op = op_class(*operands)
            shape = ([r.type for r in op.results], dict(op.properties), dict(op.attributes))
            _OP_SHAPES[key] = shape
            return op
        _OP_SHAPES[key] = shape
    result_types, properties, attributes = shape
    if not attributes:
        return simple_op(op_class, operands, result_types, properties)
    return op_class.create(
        operands=operands,
        result_types=result_types,
        properties=dict(properties),
        attributes=dict(attributes),
    )


# Attributes are immutable values; building one runs xDSL's generic checks (tens of
# microseconds), so the constants a trace uses over and over are built once.
_INT_ATTRS: dict[tuple[int, Attribute], IntegerAttr] = {}
_FLOAT_ATTRS: dict[bytes, FloatAttr] = {}


def int_attr(value: int, type_: Attribute) -> IntegerAttr:
    key = (value, type_)
    attr = _INT_ATTRS.get(key)
    if attr is None:
        attr = _new_int_attr(value, type_)
        if len(_INT_ATTRS) < _ATTR_CACHE_SIZE:
            _INT_ATTRS[key] = attr
    return attr


def _new_int_attr(value: int, type_: Attribute) -> IntegerAttr:
    """`IntegerAttr(value, type_)`. For an index, or an i64 in the signed range (wire
    numbers, positions, most integer constants), the same fields are set directly: xDSL's
    constructor normalises and checks the value through generic code, 20-30 us an
    attribute the first time in a process (a cached first call makes about twenty), and
    for these it would keep the value as it is (an index is not checked at all)."""
    if type(value) is int and (type_ is INDEX or (type_ is i64 and _I64_MIN <= value < _I64_MAX)):
        return _raw_attr(IntegerAttr, (_raw_int(value), type_))
    return IntegerAttr(value, type_)


_I64_MIN, _I64_MAX = -(2**63), 2**63


def _float_attr(value: float) -> FloatAttr:
    key = struct.pack("<d", value)  # the bits: -0.0 and NaN payloads stay apart
    attr = _FLOAT_ATTRS.get(key)
    if attr is None:
        attr = FloatAttr(value, f64)
        if len(_FLOAT_ATTRS) < _ATTR_CACHE_SIZE:
            _FLOAT_ATTRS[key] = attr
    return attr


_ATTR_CACHE_SIZE = 100_000


def quantum_attrs(**attrs: object) -> dict[str, Attribute]:
    """Python values -> attribute dictionary for a generic `quantum.*` op."""
    out: dict[str, Attribute] = {}
    for key, value in attrs.items():
        if isinstance(value, bool):
            out[key] = BoolAttr(value, i1)
        elif isinstance(value, int):
            out[key] = int_attr(value, i64)
        elif isinstance(value, str):
            out[key] = StringAttr(value)
        elif isinstance(value, list | tuple):
            out[key] = ArrayAttr([IntegerAttr(int(v), i64) for v in value])
        elif value is None:
            out[key] = UnitAttr()
        else:  # pragma: no cover - programming error
            raise TypeError(f"cannot encode attribute {key}={value!r}")
    return out


def _prime_class_checks() -> None:
    """Answer, at import, the class checks xDSL makes whenever a trace builds one of these
    attributes (`Attribute.__post_init__` asks `isinstance(self, Data)` and
    `isinstance(self, ParametrizedAttribute)`; IntegerAttr asks whether its type is an
    IndexType). They are ABC checks: the first negative answer for a class walks every
    subclass of the ABC (every Data attribute of every dialect loaded), and the answer is
    then remembered by the ABC: a table built once a process, a third of a millisecond of
    the first trace otherwise."""
    from xdsl.dialects.builtin import Float64Type, FunctionType, IntegerType
    from xdsl.ir import Data, ParametrizedAttribute
    from xdsl.irdl import OptAttributeDef, OptionalDef, OptPropertyDef, PropertyDef

    from cofactor.ir.mlir15 import ObsType

    # (BoolAttr and FlatSymbolRefAttr are aliases of IntegerAttr and SymbolRefAttr)
    built = (
        ArrayAttr, DenseArrayBase, DenseIntOrFPElementsAttr, FloatAttr, Float64Type,
        FunctionType, IndexType, IntAttr, IntegerAttr, IntegerType, MemRefType, NoneAttr,
        ObsType, StringAttr, SymbolRefAttr, TensorType, UnitAttr,
    )  # fmt: skip
    for cls in built:
        issubclass(cls, Data)
        issubclass(cls, ParametrizedAttribute)
    issubclass(IntegerType, IndexType)
    for cls in (OptAttributeDef, OptPropertyDef, PropertyDef):  # (generic_op's defaults)
        issubclass(cls, OptionalDef)


_prime_class_checks()
