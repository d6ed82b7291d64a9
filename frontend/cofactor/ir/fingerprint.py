"""A fingerprint of a traced module: the disk cache's key without printing the module.

A cached function's first call in a new process traces the Python function again (the key
must describe the program that would be compiled now, not the Python code that made it),
then looks the library up. Printing the module only to hash its text cost as much as a
third of that call. `module_fingerprint` walks the ops instead and hashes what the printed
text is made of, in order:

- every op: its head (class and name, properties and attributes: name and value, in order,
  and result types), written out where the first op of its kind appears, with a number
  and its length, and named by that number from then on; its operands (which value each
  is: values are numbered in the order they first appear), its results (their numbers),
  its successors (block numbers) and its regions;
- every block: its number, its arguments (numbers and types), its ops, and an end mark;
- every attribute or type by structure: a `Data` attribute by its class and Python value
  (repr of ints, floats, strings, bytes; enums by name; tuples and dicts element by
  element), a `ParametrizedAttribute` by its class and its parameters (lists of tokens are
  written with their count and each token's length); any other attribute, or a value of
  another kind, by xDSL's printed text of it;
- the text the frontend splices into the module after printing (`extra`).

Every token is either fixed by the grammar (a count, a marker) or escaped (a repr or a
class name), and every list is preceded by its length or closed by a mark, so two streams
are equal only when the programs are. What the walk leaves out does not change what is
compiled: the names of SSA values (`%x`, which MLIR's parser drops) and op locations
(which the printer leaves out). Two programs that differ in anything that reaches the
compiler get different fingerprints; the same program gets the same one in every process
(nothing in a token depends on addresses or hash seeds). tests/frontend/test_fingerprint.py
checks both.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable

from xdsl.ir import Attribute, Block, Data, Operation, ParametrizedAttribute, SSAValue
from xdsl.printer import Printer

#: Bumped whenever the token grammar changes.
VERSION = "3"

#: id(attribute) -> (the attribute, its token), shared by every module fingerprinted in this
#: process (an attribute is immutable: its token depends on nothing but its value). Keyed by
#: identity, not by value: hashing an attribute runs the Python `__hash__` of it and of each
#: of its parameters, more than making its token costs on a cached first call, and the
#: builder hands out the same attribute objects again (`ir.builder`'s caches). An entry keeps
#: its attribute alive, so the id is not reused meanwhile. Bounded like the printer's caches.
_TOKENS: dict[int, tuple[Attribute, str]] = {}
_TOKENS_LIMIT = 20_000


def attribute_token(attr: Attribute) -> str:
    """The token of one attribute or type (cached by identity)."""
    entry = _TOKENS.get(id(attr))
    if entry is not None and entry[0] is attr:
        return entry[1]
    token = _make_token(attr)
    if len(_TOKENS) < _TOKENS_LIMIT:
        _TOKENS[id(attr)] = (attr, token)
    return token


def _class_name(cls: type) -> str:
    name = _CLASS_NAMES.get(cls)
    if name is None:
        name = _CLASS_NAMES[cls] = f"{cls.__module__}.{cls.__qualname__}"
    return name


_CLASS_NAMES: dict[type, str] = {}


def _kind(cls: type) -> str:
    """The kind of a class ("parametrized", "data", "attribute", "enum" or ""), found
    in its MRO: `isinstance` against xDSL's abstract base classes walks every subclass of
    the base the first time a class is checked (a millisecond on a cached first call)."""
    kind = _KINDS.get(cls)
    if kind is None:
        mro = cls.__mro__
        kind = _KINDS[cls] = (
            "parametrized"
            if ParametrizedAttribute in mro
            else "data"
            if Data in mro
            else "attribute"
            if Attribute in mro
            else "enum"
            if enum.Enum in mro
            else ""
        )
    return kind


_KINDS: dict[type, str] = {}


def _make_token(attr: Attribute) -> str:
    # (the grammar of `_sequence`, `_value_token` and `_python_token`, with what a cached
    # first call makes most, the attributes' parameters and int and str data, written out
    # here: one call per attribute rather than five, each run once per process)
    cls = type(attr)
    info = _CLASS_INFO.get(cls)
    if info is None:
        info = _class_info(cls)
    kind, class_name, fields = info
    if kind == "parametrized":
        parts = []
        for field in fields:
            value = getattr(attr, field)
            entry = _TOKENS.get(id(value))
            if entry is not None and entry[0] is value:
                token = entry[1]
            elif _CLASS_INFO.get(type(value), _NOT_SEEN)[0] in _ATTRIBUTE_KINDS:
                # (an attribute of a class seen before, as `_value_token` would make it,
                # without its lookups: most parameters of a new attribute are new too)
                token = _make_token(value)
                if len(_TOKENS) < _TOKENS_LIMIT:
                    _TOKENS[id(value)] = (value, token)
            else:
                token = _value_token(value)
            parts.append(f"|{len(token)}:{token}")
        return f"{class_name}<{attr.name}>({len(parts)}{''.join(parts)})"
    if kind == "data":
        data = attr.data
        data_type = type(data)
        if data_type is int or data_type is str:
            return f"{class_name}<{attr.name}>[{data_type.__name__}:{data!r}]"
        inner = _python_token(data)
        if inner is not None:
            return f"{class_name}<{attr.name}>[{inner}]"
    return f"{class_name}!{_printed(attr)!r}"


def _class_info(cls: type) -> tuple[str, str, tuple[str, ...]]:
    """(kind, class name, parameter fields) of an attribute class, found once per class;
    the fields are what `attr.parameters` reads."""
    kind = _kind(cls)
    fields = (
        tuple(f for f, _ in cls.get_irdl_definition().parameters) if kind == "parametrized" else ()
    )
    info = _CLASS_INFO[cls] = (kind, _class_name(cls), fields)
    return info


_CLASS_INFO: dict[type, tuple[str, str, tuple[str, ...]]] = {}
_NOT_SEEN = ("", "", ())
_ATTRIBUTE_KINDS = ("parametrized", "data", "attribute")


def _value_token(value: object) -> str:
    entry = _TOKENS.get(id(value))  # (an attribute whose token is known: most parameters)
    if entry is not None and entry[0] is value:
        return entry[1]
    if _kind(type(value)) in ("parametrized", "data", "attribute"):
        return attribute_token(value)
    inner = _python_token(value)
    return inner if inner is not None else f"?{_printed(value)!r}"


def _python_token(value: object) -> str | None:
    """The token of a plain Python value inside an attribute; None for another kind."""
    kind = type(value)
    if kind in (int, float, str, bytes, bool) or value is None:
        return f"{kind.__name__}:{value!r}"
    category = _kind(kind)
    if category in ("parametrized", "data", "attribute"):
        return attribute_token(value)
    if category == "enum":
        return f"{_class_name(kind)}.{value.name}"
    if kind in (tuple, list):
        return kind.__name__ + _sequence(value)
    if kind is dict:
        return "dict" + _sequence([x for item in value.items() for x in item])
    return None


def _sequence(values: Iterable[object]) -> str:
    """Tokens of several values, each preceded by its length: `(n|len:token|len:token)`."""
    parts = []
    for v in values:
        token = _value_token(v)
        parts.append(f"|{len(token)}:{token}")
    return f"({len(parts)}{''.join(parts)})"


def _printed(value: object) -> str:
    """xDSL's text of an attribute (or anything its printer prints): the fallback token, as
    complete as the module's text by definition."""
    from io import StringIO

    stream = StringIO()
    printer = Printer(stream=stream)
    if _kind(type(value)) in ("parametrized", "data", "attribute"):
        printer.print_attribute(value)
    else:
        printer.print_string(repr(value))
    return stream.getvalue()


class _Walk:
    """The token stream of one module: for each op, its head (class, name, properties,
    attributes, result types; the same for every op of a kind, made once per kind and walk),
    then its operands and results (value numbers), successors (block numbers) and regions.

    The ops of a block are walked in one loop (`_ops`), with nothing called per op but what
    a new kind of op or value needs: a cached first call runs this code once per process,
    before CPython has specialised any of it, and a loop gets specialised after a few
    iterations where a function called per op would not."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        # id(SSA value) -> its number as text (all values live while walking)
        self._values: dict[int, str] = {}
        self._blocks: dict[int, int] = {}  # id(block) -> number
        # op kind, keyed by the identities of its attribute objects (which ops of a kind
        # share, and which all live as long as the module) -> its head's token ("h<n>")
        self._heads: dict[tuple, str] = {}

    def numbers(self, values: Iterable[SSAValue]) -> str:
        return " ".join(self._number(values))

    def block_number(self, block: Block) -> str:
        number = self._blocks.get(id(block))
        if number is None:
            number = self._blocks[id(block)] = len(self._blocks)
        return str(number)

    def _head(self, op: Operation) -> str:
        token = attribute_token
        props, attrs = op.properties, op.attributes
        parts = [f"op {_class_name(type(op))} {op.name}", f"properties {len(props)}"]
        for name, attr in props.items():
            parts += (repr(name), token(attr))
        parts.append(f"attributes {len(attrs)}")
        for name, attr in attrs.items():
            parts += (repr(name), token(attr))
        parts.append(f"result types {len(op.results)}")
        parts += [token(r.type) for r in op.results]
        return "\n".join(parts)

    def op(self, op: Operation) -> None:
        """The tokens of `op` (its regions included)."""
        self._ops(op, only=True)

    def _ops(self, op: Operation | None, only: bool = False) -> None:
        """The tokens of `op` and of the ops after it in its block (`only`: of `op`)."""
        # One string per op (the tokens are joined by newlines in the end, so this is the
        # same stream as one token per line). Value and block numbers are digits: a list
        # of them, space-separated after a letter, is one token. The head of a kind of op
        # is written once, with its number and length; each op names its head's number.
        out = self.tokens.append
        numbering = self._values
        number_of = numbering.get
        heads = self._heads
        while op is not None:
            props, attrs, results = op.properties, op.attributes, op.results
            # (the count of properties, the names (strings), the identities of their
            # values and then of the result types (ints): one reading only. An op without
            # properties and attributes, -1 and the types, without building what is empty)
            if props or attrs:
                key = (
                    type(op),
                    len(props),
                    *props,
                    *attrs,
                    *map(id, (*props.values(), *attrs.values())),
                    *[id(r._type) for r in results],
                )
            else:
                key = (type(op), -1, *[id(r._type) for r in results])
            head = heads.get(key)
            if head is None:
                text = self._head(op)
                head = heads[key] = f"h{len(heads)}"
                out(f"head {len(heads) - 1} {len(text)}\n{text}")
            # values are numbered where they first appear (operands are usually numbered
            # already, results usually not): C-level lookups, a loop only for new ones
            operands = list(map(number_of, map(id, op._operands)))
            if None in operands:
                operands = self._number(op._operands)
            numbers = list(map(number_of, map(id, results)))
            if None in numbers:
                numbers = self._number(results)
            successors = op._successors
            regions = op.regions
            out(
                f"{head}\no{' '.join(operands)}\nr{' '.join(numbers)}\n"
                f"s{' '.join(self.block_number(b) for b in successors) if successors else ''}\n"
                f"regions {len(regions)}"
            )
            for region in regions:
                block = region._first_block
                while block is not None:
                    self.block(block)
                    block = block._next_block
                out("end region")
            op = None if only else op._next_op

    def _number(self, values: Iterable[SSAValue]) -> list[str]:
        """The numbers of `values`, in order, numbering those seen for the first time."""
        numbering = self._values
        out = []
        for v in values:
            number = numbering.get(id(v))
            if number is None:
                number = numbering[id(v)] = str(len(numbering))
            out.append(number)
        return out

    def block(self, block: Block) -> None:
        out = self.tokens.append
        args = block._args
        out(f"block {self.block_number(block)} {len(args)}")
        out("a" + self.numbers(args))
        for a in args:
            out(attribute_token(a.type))
        self._ops(block._first_op)
        out("end block")


def module_fingerprint(module: Operation, extra: Iterable[str] = ()) -> str:
    """The SHA-256 (hex) of `module`'s token stream and of the texts `extra` that are
    spliced into its printed form."""
    walk = _Walk()
    walk.op(module)
    digest = hashlib.sha256(f"cofactor-ir-fingerprint {VERSION}\n".encode())
    digest.update("\n".join(walk.tokens).encode())
    for text in extra:
        digest.update(f"\nextra {len(text)}\n".encode())
        digest.update(text.encode())
    return digest.hexdigest()


def _prime() -> None:
    """Fill the per-class tables (`_CLASS_INFO`, `_KINDS`, `_CLASS_NAMES`) for the classes
    every traced module has, and the tokens of xDSL's scalar types, when the module is
    imported: on the cached first call of a process each was made for the first time (a
    few thousand bytecodes, a tenth of the walk). The same functions make the same entries
    they would make on first use, so the stream does not change
    (tests/frontend/test_fingerprint.py checks it against a plain implementation)."""
    from xdsl.dialects import arith, builtin, func, memref

    for cls in (
        builtin.StringAttr, builtin.FunctionType, builtin.ArrayAttr, builtin.MemRefType,
        builtin.IntAttr, builtin.Float64Type, builtin.NoneAttr, builtin.UnitAttr,
        builtin.IntegerAttr, builtin.IntegerType, builtin.SignednessAttr, builtin.IndexType,
        builtin.DenseArrayBase, builtin.BytesAttr, builtin.SymbolRefAttr, builtin.FloatAttr,
    ):  # fmt: skip
        _class_info(cls)
    for cls in (builtin.Signedness, tuple):
        _kind(cls)
    for cls in (
        builtin.ModuleOp, func.FuncOp, func.CallOp, func.ReturnOp, arith.ConstantOp,
        memref.LoadOp, memref.StoreOp, memref.AllocOp, memref.CopyOp, memref.DeallocOp,
    ):  # fmt: skip
        _class_name(cls)
    for attr in (builtin.f64, builtin.i64, builtin.i32, builtin.i1):
        attribute_token(attr)


_prime()
