"""Traced scalars: constants, dtype conversions, and one ufunc applied to scalar operands
(`scalar_ufunc`, with numpy's dtype resolution and the power rules), plus the `scf.for`
loop-nest builder those rules and the array-level code share.

`numpy_rules` builds the array-level numpy protocol on these (and re-exports them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import f64, i1, i64

from cofactor.errors import CompileError, CompileTypeError, CompileValueError
from cofactor.ir.builder import IRBuilder
from cofactor.tracing import context
from cofactor.tracing.aliasing import Stale
from cofactor.tracing.element_rules import UFUNC_KINDS, UFUNC_RULES
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Scalar, Tracer, normalize_dtype

_TYPES = {FLOAT: f64, INT: i64, BOOL: i1}
_KIND = {FLOAT: "f", INT: "i", BOOL: "b", COMPLEX: "c"}


def _b() -> IRBuilder:
    return context.current().builder


# ----------------------------------------------------------------------------------------
# constants and conversions
# ----------------------------------------------------------------------------------------
def const_scalar(value: Any, dtype: np.dtype | None = None) -> Scalar:
    """A Scalar holding a Python/numpy constant (materialised as `arith.constant`)."""
    if dtype is None:
        dtype = python_dtype(value)
    b = _b()
    if dtype == COMPLEX:
        value = complex(value)
        return Scalar((b.const(value.real, f64), b.const(value.imag, f64)), COMPLEX, value)
    py = {FLOAT: float, INT: int, BOOL: bool}[dtype](value)
    return Scalar(b.const(py, _TYPES[dtype]), dtype, py)


def python_dtype(value: Any) -> np.dtype:
    """The dtype a constant takes when it meets a traced value."""
    if isinstance(value, bool | np.bool_):
        return BOOL
    if isinstance(value, int | np.integer):
        return INT
    if isinstance(value, float | np.floating):
        return FLOAT
    if isinstance(value, complex | np.complexfloating):
        return COMPLEX
    if isinstance(value, Scalar):
        return value.dtype
    if isinstance(value, Stale):  # an element of an array written through shared memory
        value._fail()
    raise CompileError(f"cofactor cannot trace a value of type {type(value).__name__}: {value!r}")


def cast_scalar(s: Scalar, dtype: np.dtype) -> Scalar:
    """Convert a Scalar to `dtype` (numpy's `astype` semantics)."""
    if s.dtype == dtype:
        return s
    b = _b()
    const = None if s.const is None else np.asarray(s.const).astype(dtype).item()
    if dtype == COMPLEX:
        re = cast_scalar(s, FLOAT).value
        return Scalar((re, b.const(0.0, f64)), COMPLEX, const)
    if s.dtype == COMPLEX and dtype == BOOL:  # nonzero: either part (NaN counts as nonzero)
        zero = b.const(0.0, f64)
        re, im = (b.cmpf("une", part, zero) for part in s.value)
        return Scalar(b.binary(arith.OrIOp, re, im), BOOL, const)
    if s.dtype == COMPLEX:  # numpy drops the imaginary part
        return cast_scalar(Scalar(s.value[0], FLOAT), dtype)
    return Scalar(b.cast(s.value, _TYPES[s.dtype], _TYPES[dtype]), dtype, const)


def as_scalar(x: Any, dtype: np.dtype | None = None) -> Scalar:
    """A scalar operand (Scalar, 0-d Tracer or constant) as a Scalar of `dtype`."""
    if isinstance(x, Tracer | np.ndarray):
        t = as_tracer(x)
        if t.shape != ():
            raise CompileError(f"expected a scalar, got an array of shape {t.shape}")
        x = t.elems[()]
    s = x if isinstance(x, Scalar) else const_scalar(x, dtype)
    return s if dtype is None else cast_scalar(s, dtype)


def as_tracer(x: Any) -> Tracer:
    """Any array-like (Tracer, object array of Scalars, constant) as a Tracer."""
    if isinstance(x, Tracer):
        return x
    if isinstance(x, Scalar):
        elems = np.empty((), dtype=object)
        elems[()] = x
        return Tracer(elems, x.dtype)
    arr = np.asarray(x) if not isinstance(x, np.ndarray) else x
    if arr.dtype == object:
        flat = [_object_leaf(v) for v in arr.flat]
        dtype = _common_dtype(flat)
        elems = np.empty(arr.shape, dtype=object)
        for i, v in zip(np.ndindex(*arr.shape), flat, strict=True):
            elems[i] = as_scalar(v, dtype)
        return Tracer(elems, dtype)
    dtype = normalize_dtype(arr.dtype)
    elems = np.empty(arr.shape, dtype=object)
    for i in np.ndindex(*arr.shape):
        elems[i] = const_scalar(arr[i].item(), dtype)
    return Tracer(elems, dtype)


def _object_leaf(v: Any) -> Any:
    if isinstance(v, Tracer):
        if v.shape != ():
            raise CompileError("cannot build an array from traced arrays of different shapes")
        return v.elems[()]
    return v


def _common_dtype(values: list[Any]) -> np.dtype:
    dtypes = [python_dtype(v) for v in values]
    return normalize_dtype(np.result_type(*dtypes)) if dtypes else FLOAT


def _objarr(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def _loop_dtypes(ufunc: np.ufunc, dtypes: list[np.dtype]) -> tuple[list[np.dtype], np.dtype]:
    """numpy's loop (input, output) dtypes for `ufunc` on `dtypes`, normalised."""
    if ufunc in (np.logical_and, np.logical_or, np.logical_xor, np.logical_not):
        return [BOOL] * len(dtypes), BOOL
    try:
        resolved = ufunc.resolve_dtypes((*dtypes, None))
    except Exception as err:  # numpy raises several kinds of errors here
        kind = CompileTypeError if isinstance(err, TypeError) else CompileError  # (numpy's)
        raise kind(f"numpy.{ufunc.__name__} is not defined for {[str(d) for d in dtypes]}") from err
    ins = [normalize_dtype(d) for d in resolved[: ufunc.nin]]
    return ins, normalize_dtype(resolved[-1])


def scalar_ufunc(ufunc: np.ufunc, *operands: Any) -> Scalar:
    """Apply `ufunc` to scalar operands (Scalars or constants); emits the element's IR."""
    if ufunc not in UFUNC_RULES:
        raise CompileError(f"numpy.{ufunc.__name__} is not supported by cofactor's tracer")
    dtypes = [python_dtype(x) for x in operands]
    ins, out = _loop_dtypes(ufunc, dtypes)
    if ufunc is np.power:
        return _power(operands[0], operands[1], ins[0], out)
    vals = [as_scalar(x, d) for x, d in zip(operands, ins, strict=True)]
    if all(v.const is not None for v in vals):
        with np.errstate(all="ignore"):
            return const_scalar(ufunc(*[v.const for v in vals]).item(), out)
    kind = _KIND[ins[0]]
    if kind not in UFUNC_KINDS.get(ufunc, "fibc"):
        raise CompileError(
            f"numpy.{ufunc.__name__} on {ins[0]} values is not supported by cofactor's tracer"
        )
    res = UFUNC_RULES[ufunc](_b(), kind, *[v.value for v in vals])
    return Scalar(res, out)


def _power(base: Any, exp: Any, dtype: np.dtype, out: np.dtype) -> Scalar:
    b = _b()
    e_const = exp.const if isinstance(exp, Scalar) else exp
    x = as_scalar(base, dtype)
    if e_const is not None and float(np.real(e_const)).is_integer() and np.imag(e_const) == 0:
        n = int(np.real(e_const))
        if 0 <= n <= 8 or dtype == INT:
            if dtype == INT and n < 0:
                raise CompileValueError("Integers to negative integer powers are not allowed.")
            return _int_power(x, n, dtype)
    if dtype == INT:
        return _int_power_traced(x, as_scalar(exp, INT))
    if dtype != FLOAT:
        raise CompileError(f"power on {dtype} values is not supported")
    y = as_scalar(exp, FLOAT)
    return Scalar(b.powf(x.value, y.value), out)


def _int_power_traced(x: Scalar, n: Scalar) -> Scalar:
    """`x ** n` on int64 with a traced exponent: square-and-multiply over the 64 bits of `n`
    in an `scf.for` (products wrap around as numpy's do). numpy raises for a negative
    exponent; so does the compiled code, at run time (tracing/runtime_errors.py): numpy's
    ValueError when the call returns."""
    from cofactor.tracing.runtime_errors import report_if

    b = _b()
    one, zero = b.const(1, i64), b.const(0, i64)
    report_if(b.cmpi("slt", n.value, zero), "negative_int_power")

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        acc, base, e = accs
        bit = b.cmpi("ne", b.binary(arith.AndIOp, e, one), zero)
        acc = b.select(bit, b.binary(arith.MuliOp, acc, base), acc)
        return [acc, b.binary(arith.MuliOp, base, base), b.binary(arith.ShRUIOp, e, one)]

    loop = _loop_nest((64,), [one, x.value, n.value], body)
    return Scalar(loop.results[0], INT)


def _int_power(x: Scalar, n: int, dtype: np.dtype) -> Scalar:
    result: Scalar | None = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else scalar_ufunc(np.multiply, result, base)
        n >>= 1
        if n:
            base = scalar_ufunc(np.multiply, base, base)
    return result if result is not None else const_scalar(1, dtype)


def scalar_real(s: Scalar) -> Scalar:
    return Scalar(s.value[0], FLOAT) if s.dtype == COMPLEX else s


def scalar_imag(s: Scalar) -> Scalar:
    if s.dtype == COMPLEX:
        return Scalar(s.value[1], FLOAT)
    return const_scalar(0, s.dtype)


def _loop_nest(
    shape: tuple[int, ...], init: list[Any], body: Callable[[list[Any], list[Any]], list[Any]]
) -> Any:
    """`for i0 in range(shape[0]): for i1 ...: accs = body([i0, i1, ...], accs)` as scf.for
    ops (the accumulators `init` are carried through every level); returns the outer op."""
    from xdsl.ir import Block

    from cofactor.ir.builder import INDEX
    from cofactor.ir.scf_ops import for_op, yield_op

    b = _b()
    zero, one = b.index(0), b.index(1)
    types = [v.type for v in init]

    def level(dim: int, ivs: list[Any], accs: list[Any]) -> Any:
        block = Block(arg_types=[INDEX, *types])
        b.push(block)
        try:
            here = [*ivs, block.args[0]]
            inner = list(block.args[1:])
            if dim + 1 < len(shape):
                new = list(level(dim + 1, here, inner).results)
            else:
                new = body(here, inner)
            b.insert(yield_op(*new))
        finally:
            b.pop()
        return b.insert(for_op(zero, b.index(shape[dim]), one, accs, block))

    return level(0, [], init)
