"""Module text, printed faster than xDSL's `str(op)` and character for character the same.

xDSL's printer writes every token through `print(..., file=stream)` and prints every op,
attribute and type from scratch. A long circuit (8,000 gates) spent more time printing its
module than tracing it. `module_text` keeps xDSL's printer (and so its exact output) but
collects the tokens in a list, prints each distinct scalar attribute or type once, and
prints each distinct kind of region-free op once: as a template with holes for its SSA
names, filled for every op of that kind. Two ops are of one kind when everything their
printed form can depend on is equal (class, attributes, properties, operand and result
types, which operands are the same value), so the text is the one xDSL would print.

The ops a trace emits most (functions, loops, arith/math/memref ops, calls, generic ops)
are not printed by xDSL at all: `cofactor.ir.op_text` writes their text directly (the same
characters), which also avoids the first-use cost of xDSL's printing code in a process
(most of the 3 ms a first small module took to print). Templates remain for other ops.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.printer import Printer

from cofactor.ir.attribute_text import attribute_text
from cofactor.ir.mlir15 import ObsType
from cofactor.ir.op_text import writer_of

#: attributes whose printed form depends on nothing but the attribute (no resource handles,
#: no printer state): their text is computed once per distinct value
_PURE_ATTRIBUTES = (
    ArrayAttr,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ObsType,
    StringAttr,
    UnitAttr,
)


#: Texts of pure attributes, and templates of op kinds (keyed by the values their text
#: depends on, `_ListPrinter._lookup`), kept from one module to the next: a process that
#: traces several functions (or signatures) prints the same kinds of ops again. Bounded (a
#: constant is a kind of its own: a few MB at most); past the bound, new entries are kept
#: for the module being printed only.
_ATTR_TEXT: dict[Attribute, str] = {}
_TEMPLATES: dict[tuple, list[str | int] | None] = {}
_ATTR_TEXT_LIMIT = 20_000
_TEMPLATES_LIMIT = 5_000


class _ListPrinter(Printer):
    """xDSL's printer writing into a list of strings, with a cache of attribute texts."""

    def __init__(self) -> None:
        super().__init__(stream=_Sink(self))
        self.parts: list[Any] = []
        # (shared by every module printed in this process: both depend on nothing but
        # their keys' values, see _TEMPLATES)
        self._attr_text = _ATTR_TEXT
        self._templates = _TEMPLATES
        self._own_attr_text: dict[Attribute, str] = {}  # (past the shared caches' bounds)
        self._own_templates: dict[tuple, list[str | int] | None] = {}
        self._by_identity: dict[tuple, list[str | int] | None] = {}
        self._holes = False  # while printing a template: SSA values become holes
        # id(value) -> "%name", beside xDSL's own map (whose key, the value, hashes in
        # Python): every value of the module lives while it is printed
        self._names_by_id: dict[int, str] = {}
        self._text_by_id: dict[int, str] = {}  # id(type) -> text (`type_text`)
        self._kept: list[Attribute] = []
        #: the texts of generic ops around their operands, per kind (`op_text._generic`)
        self.generic_texts: dict[tuple, tuple[str, str] | None] = {}

    def print_ssa_value(self, value: SSAValue) -> str:
        if self._holes:
            self.parts.append(value)
            return "?"
        name = self.ssa_name(value)
        self._current_column += len(name)
        self.parts.append(name)
        return name[1:]

    def print_op(self, op: Operation) -> None:
        writer = writer_of(type(op))
        if (
            writer is not None
            and not self._holes
            and not (self.diagnostic.op_messages and op in self.diagnostic.op_messages)
            and writer(self, op)
        ):
            return
        if (
            op.regions
            or op._successors
            or self._holes
            or (self.diagnostic.op_messages and op in self.diagnostic.op_messages)
        ):
            super().print_op(op)
            return
        operands = op._operands
        results = op.results
        attributes, properties = op.attributes, op.properties
        # first by identity (the attribute and type objects are shared between ops of a
        # kind, and all of them live as long as the module), then by value
        # (one flat tuple: names are strings, identities ints, None separates the groups)
        id_key = (
            type(op),
            *attributes,
            *map(id, attributes.values()),
            None,
            *properties,
            *map(id, properties.values()),
            None,
            *[id(v.type) for v in operands],
            None,
            *[id(r.type) for r in results],
            _operand_pattern(operands),
        )
        template = self._by_identity.get(id_key, False)
        if template is False:
            template = self._by_identity[id_key] = self._lookup(op)
        if template is None:
            super().print_op(op)
            return
        parts = self.parts
        if results:
            for i, r in enumerate(results):
                if i:
                    parts.append(", ")
                self.print_ssa_value(r)
            parts.append(" = ")
        names = self._names_by_id
        for part in template:
            if type(part) is str:
                parts.append(part)
            else:
                value = operands[part]
                name = names.get(id(value))
                if name is None:
                    self.print_ssa_value(value)
                else:
                    parts.append(name)

    # -- what the direct writers (cofactor.ir.op_text) use --------------------------------
    def ssa_name(self, value: SSAValue) -> str:
        """`%name` of `value`, named as xDSL's `print_ssa_value` names it (the next number
        of the scope, or its name hint made unique), without printing it."""
        name = self._names_by_id.get(id(value))
        if name is None:
            hint = value.name_hint
            if hint:
                names = self._ssa_names[-1]
                count = names.get(hint, 0)
                names[hint] = count + 1
                name = f"%{hint}_{count}" if count else "%" + hint
            else:
                name = "%" + self._get_new_valid_name_id()
            self._names_by_id[id(value)] = name
        return name

    def type_text(self, attribute: Attribute) -> str:
        """The text of a type (or any attribute), as `print_attribute` prints it, made once
        per attribute object."""
        text = self._text_by_id.get(id(attribute))
        if text is None:
            text = self._text_by_id[id(attribute)] = self.attr_text(attribute)
            self._kept.append(attribute)  # (its id stays its own while the module prints)
        return text

    def attr_text(self, attribute: Attribute) -> str:
        """The text of an attribute, as `print_attribute` prints it."""
        text = attribute_text(attribute)
        if text is not None:
            return text
        outer, self.parts = self.parts, []
        self.print_attribute(attribute)
        text = "".join(self.parts)
        self.parts = outer
        return text

    def _lookup(self, op: Operation) -> list[str | int] | None:
        """The template of `op`'s kind (by value), made on first use."""
        operands = op.operands
        try:
            key = (
                type(op),
                tuple(v.type for v in operands),
                tuple(r.type for r in op.results),
                tuple(op.attributes.items()),
                tuple(op.properties.items()),
                _operand_pattern(operands),
            )
            template = self._templates.get(key, False)
            if template is False:
                template = self._own_templates.get(key, False)
        except TypeError:  # an unhashable attribute
            return None
        if template is False:
            template = self._template(op)
            if len(self._templates) < _TEMPLATES_LIMIT:
                self._templates[key] = template
            else:
                self._own_templates[key] = template
        return template

    def _template(self, op: Operation) -> list[str | int] | None:
        """The text of `op` after its result names: strings and operand positions (a value
        used twice: the position of its first use, as `_operand_pattern` keys it); None when
        it does not fit a template (text over several lines)."""
        operands = list(op.operands)
        outer, self.parts = self.parts, []
        self._holes = True
        try:
            super().print_op(op)
            parts = self.parts
        finally:
            self.parts, self._holes = outer, False
        # the result names come first: `%r0, %r1 = `
        results = list(op.results)
        if results:
            head = [x for r in results for x in (r, ", ")]
            head[-1] = " = "
            if parts[: len(head)] != head:
                return None
            parts = parts[len(head) :]
        template: list[str | int] = []
        for part in parts:
            if isinstance(part, str):
                if "\n" in part:
                    return None
                if template and isinstance(template[-1], str):
                    template[-1] += part
                    continue
                template.append(part)
            elif part in operands:
                template.append(operands.index(part))
            else:  # an SSA value that is not an operand (not expected without regions)
                return None
        return template

    def print_string(self, text: str, *, indent: int | None = None) -> None:
        if "\n" in text:  # rare: xDSL's handling of indentation and line callbacks
            super().print_string(text, indent=indent)
            return
        self._current_column += len(text)
        self.parts.append(text)

    def _print_new_line(self, indent: int | None = None, print_message: bool = True) -> None:
        if print_message and self._next_line_callback:
            super()._print_new_line(indent, print_message)
            return
        num_spaces = (self._indent if indent is None else indent) * self.indent_num_spaces
        self._current_line += 1
        self.parts.append("\n" + " " * num_spaces)
        self._current_column = num_spaces

    def print_attribute(self, attribute: Attribute) -> None:
        if not isinstance(attribute, _PURE_ATTRIBUTES):
            super().print_attribute(attribute)
            return
        text = self._attr_text.get(attribute) or self._own_attr_text.get(attribute)
        if text is None:
            outer, self.parts = self.parts, []
            super().print_attribute(attribute)
            text = "".join(self.parts)
            self.parts = outer
            if len(self._attr_text) < _ATTR_TEXT_LIMIT:
                self._attr_text[attribute] = text
            else:
                self._own_attr_text[attribute] = text
        self._current_column += len(text)
        self.parts.append(text)


def _operand_pattern(operands: Any) -> int | tuple[int, ...]:
    """Which operands are the same value: their number when all differ, else for each
    operand the position of the value's first use (`memref.load %m[%i, %j, %i]`)."""
    n = len(operands)
    if n < 2:
        return n
    ids = [id(v) for v in operands]
    if len(set(ids)) == n:
        return n
    return tuple([ids.index(i) for i in ids])


class _Sink:
    """The stream of the base class's own writes (text with newlines): into `parts` too."""

    def __init__(self, printer: _ListPrinter) -> None:
        self.printer = printer

    def write(self, text: str) -> None:
        self.printer.parts.append(text)


def module_text(op: Operation) -> str:
    """`str(op)`, faster for large modules."""
    printer = _ListPrinter()
    printer.print_op(op)
    return "".join(printer.parts)
