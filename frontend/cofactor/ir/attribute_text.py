"""The text xDSL prints for the types and attributes a trace uses most, made directly.

`cofactor.ir.op_text` writes ops without xDSL's printer; these are the attribute texts it
needs (xDSL's `print_attribute` runs generic code, and its first use in a process costs
tens of microseconds per kind). Anything else is None: the printer asks xDSL.
tests/frontend/test_op_text.py compares the texts with xDSL's.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    Signedness,
    StringAttr,
    SymbolRefAttr,
    TensorType,
)
from xdsl.ir import Attribute
from xdsl.utils.mlir_lexer import MLIRLexer

from cofactor.ir.mlir15 import InternalLinkage

_BARE_IDENTIFIER = MLIRLexer.bare_identifier_regex


def attribute_text(attribute: Attribute) -> str | None:
    """The text xDSL prints for the types and constants a trace uses most (`f64`, `index`,
    `i64`, `memref<2x3xf64>`, `0 : index`, `1.000000e+00 : f64`); None for others."""
    cls = type(attribute)
    if cls is Float64Type:
        return "f64"
    if cls is IndexType:
        return "index"
    if cls is IntegerType:
        if attribute.signedness.data is not Signedness.SIGNLESS:  # type: ignore[attr-defined]
            return None
        return f"i{attribute.width.data}"  # type: ignore[attr-defined]
    if cls is MemRefType:
        if type(attribute.layout) is not NoneAttr or type(attribute.memory_space) is not NoneAttr:  # type: ignore[attr-defined]
            return None
        element = attribute_text(attribute.element_type)  # type: ignore[attr-defined]
        dims = [d.data for d in attribute.shape.data]  # type: ignore[attr-defined]
        if element is None or any(type(d) is not int or d < 0 for d in dims):
            return None
        return "memref<" + "".join([f"{d}x" for d in dims]) + element + ">"
    if cls is IntegerAttr:
        value = attribute.value.data  # type: ignore[attr-defined]
        type_text = attribute_text(attribute.type)  # type: ignore[attr-defined]
        if type_text is None or type(value) is not int:
            return None
        if type_text == "i1":
            return "true" if value else "false"
        return f"{value} : {type_text}"
    if cls is StringAttr:
        return _string_literal(attribute.data)  # type: ignore[attr-defined]
    if cls is SymbolRefAttr:
        root = attribute.root_reference.data  # type: ignore[attr-defined]
        if attribute.nested_references.data or _BARE_IDENTIFIER.fullmatch(root) is None:  # type: ignore[attr-defined]
            return None
        return "@" + root
    if cls is ArrayAttr:
        texts = [attribute_text(a) for a in attribute.data]  # type: ignore[attr-defined]
        return None if None in texts else "[" + ", ".join(texts) + "]"  # type: ignore[arg-type]
    if cls is DenseIntOrFPElementsAttr:
        return _dense_text(attribute)  # type: ignore[arg-type]
    if cls is InternalLinkage:  # (the entry function's; xDSL's printer asks ABCs first)
        return "#llvm.linkage<internal>"
    if cls is FloatAttr and type(attribute.type) is Float64Type:  # type: ignore[attr-defined]
        text = _f64_text(attribute.value.data)  # type: ignore[attr-defined]
        return None if text is None else text + " : f64"
    return None


def _dense_text(attribute: DenseIntOrFPElementsAttr) -> str | None:
    """`dense<"0x...">: tensor<512xf64>`, xDSL's text of a dense f64 or i64 tensor of more
    than 100 elements that are not all equal (a constant array); None for others."""
    tensor = attribute.type
    if type(tensor) is not TensorType or type(tensor.encoding) is not NoneAttr:
        return None
    element = attribute_text(tensor.element_type)
    dtype = {"f64": "<f8", "i64": "<i8"}.get(element)  # type: ignore[arg-type]
    dims = [d.data for d in tensor.shape.data]
    if dtype is None or any(type(d) is not int or d < 0 for d in dims):
        return None
    data = attribute.data.data
    values = np.frombuffer(data, dtype=dtype)
    # (xDSL prints a splat, all values equal, as one value; NaNs make equality subtle)
    if values.size <= 100 or bool(np.all(values == values[0])) or np.isnan(values).any():
        return None
    shape = "".join([f"{d}x" for d in dims])
    return f'dense<"0x{data.hex().upper()}"> : tensor<{shape}{element}>'


def _string_literal(text: str) -> str | None:
    """`"text"` for printable ASCII without quotes or backslashes (others: None, xDSL
    escapes them)."""
    if not text.isascii() or not text.isprintable() or '"' in text or "\\" in text:
        return None
    return f'"{text}"'


def _f64_text(value: float) -> str | None:
    """xDSL's `print_float` for an f64: `%.5e` (with a 0 before the exponent, as mlir-opt)
    when that reads back to the same value, else 17 significant digits."""
    if value != value or value in (_INF, -_INF):
        return None  # (printed as the bits in hex: left to xDSL)
    text = f"{value:.5e}"
    e = text.index("e")
    text = text[:e] + "0" + text[e:]
    if float(text) == value:
        return text
    text = f"{value:.17g}"
    return text if "." in text else None


_INF = float("inf")
