"""Numpy on tracers: one table from numpy ufunc/function to the IR it emits.

* `UFUNC_RULES`: per ufunc, how to compute one element for each kind of operand
  ("f" float64, "i" int64, "b" bool, "c" complex128). Dtype resolution follows numpy
  (`ufunc.resolve_dtypes`), normalised onto the supported dtypes.
* `FUNCTION_RULES`: numpy functions (`np.sum`, `np.reshape`, `np.where`, ...). Most run numpy
  itself on the object array of `Scalar`s; only functions that need concrete values get rules.

Anything not in the tables raises a `CompileError` naming the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import f64, i1, i64

from cofactor.errors import CompileError
from cofactor.ir.builder import IRBuilder
from cofactor.tracing import context
from cofactor.tracing.tracer import (
    BOOL,
    COMPLEX,
    FLOAT,
    INT,
    Scalar,
    Tracer,
    _LazyMemref,
    normalize_dtype,
)

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


def cast_tracer(t: Tracer, dtype: np.dtype) -> Tracer:
    if t.dtype == dtype:
        return t
    if _large(t):
        return _loop_map(t, lambda s: cast_scalar(s, dtype), dtype)
    conv = np.frompyfunc(lambda s: cast_scalar(s, dtype), 1, 1)
    return Tracer(_objarr(conv(t.elems)), dtype)


def _objarr(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    out = np.empty((), dtype=object)
    out[()] = x
    return out


# ----------------------------------------------------------------------------------------
# element rules: (kind, *ssa values) -> ssa value
# ----------------------------------------------------------------------------------------
def _cmplx_mul(b: IRBuilder, x: tuple, y: tuple) -> tuple:
    re = b.binary(
        arith.SubfOp, b.binary(arith.MulfOp, x[0], y[0]), b.binary(arith.MulfOp, x[1], y[1])
    )
    im = b.binary(
        arith.AddfOp, b.binary(arith.MulfOp, x[0], y[1]), b.binary(arith.MulfOp, x[1], y[0])
    )
    return re, im


def _cmplx_div(b: IRBuilder, x: tuple, y: tuple) -> tuple:
    den = b.binary(
        arith.AddfOp, b.binary(arith.MulfOp, y[0], y[0]), b.binary(arith.MulfOp, y[1], y[1])
    )
    num = _cmplx_mul(b, x, (y[0], b.unary(arith.NegfOp, y[1])))
    return b.binary(arith.DivfOp, num[0], den), b.binary(arith.DivfOp, num[1], den)


def _fbin(op):
    return lambda b, x, y: b.binary(op, x, y)


def _add(b, k, x, y):
    if k == "c":
        return b.binary(arith.AddfOp, x[0], y[0]), b.binary(arith.AddfOp, x[1], y[1])
    return b.binary({"f": arith.AddfOp, "i": arith.AddiOp, "b": arith.OrIOp}[k], x, y)


def _sub(b, k, x, y):
    if k == "c":
        return b.binary(arith.SubfOp, x[0], y[0]), b.binary(arith.SubfOp, x[1], y[1])
    if k == "b":
        raise CompileError("numpy boolean subtract is not supported; use np.logical_xor")
    return b.binary({"f": arith.SubfOp, "i": arith.SubiOp}[k], x, y)


def _mul(b, k, x, y):
    if k == "c":
        return _cmplx_mul(b, x, y)
    return b.binary({"f": arith.MulfOp, "i": arith.MuliOp, "b": arith.AndIOp}[k], x, y)


def _div(b, k, x, y):
    if k == "c":
        return _cmplx_div(b, x, y)
    return b.binary(arith.DivfOp, x, y)


def _floordiv(b, k, x, y):
    if k == "f":
        return b.math(math.FloorOp, b.binary(arith.DivfOp, x, y))
    # Python semantics: round towards minus infinity.
    q = b.binary(arith.DivSIOp, x, y)
    r = b.binary(arith.RemSIOp, x, y)
    zero, one = b.const(0, i64), b.const(1, i64)
    adjust = b.binary(
        arith.AndIOp,
        b.cmpi("ne", r, zero),
        b.cmpi("ne", b.cmpi("slt", r, zero), b.cmpi("slt", y, zero)),
    )
    return b.select(adjust, b.binary(arith.SubiOp, q, one), q)


def _mod(b, k, x, y):
    if k == "f":
        r = b.generic("arith.remf", [x, y], f64)
        zero = b.const(0.0, f64)
        adjust = b.binary(
            arith.AndIOp,
            b.cmpf("une", r, zero),
            b.cmpi("ne", b.cmpf("olt", r, zero), b.cmpf("olt", y, zero)),
        )
        return b.select(adjust, b.binary(arith.AddfOp, r, y), r)
    r = b.binary(arith.RemSIOp, x, y)
    zero = b.const(0, i64)
    adjust = b.binary(
        arith.AndIOp,
        b.cmpi("ne", r, zero),
        b.cmpi("ne", b.cmpi("slt", r, zero), b.cmpi("slt", y, zero)),
    )
    return b.select(adjust, b.binary(arith.AddiOp, r, y), r)


def _neg(b, k, x):
    if k == "c":
        return b.unary(arith.NegfOp, x[0]), b.unary(arith.NegfOp, x[1])
    if k == "f":
        return b.unary(arith.NegfOp, x)
    return b.binary(arith.SubiOp, b.const(0, i64), x)


def _abs(b, k, x):
    if k == "c":
        sq = b.binary(
            arith.AddfOp, b.binary(arith.MulfOp, x[0], x[0]), b.binary(arith.MulfOp, x[1], x[1])
        )
        return b.math(math.SqrtOp, sq)
    if k == "f":
        return b.generic("math.abs", [x], f64)  # MLIR 15 spelling (xDSL: math.absf)
    neg = b.binary(arith.SubiOp, b.const(0, i64), x)
    return b.select(b.cmpi("slt", x, b.const(0, i64)), neg, x)


def _sign(b, k, x):
    if k == "f":
        zero, one = b.const(0.0, f64), b.const(1.0, f64)
        pos = b.select(b.cmpf("ogt", x, zero), one, zero)
        neg = b.select(b.cmpf("olt", x, zero), b.const(-1.0, f64), pos)
        return b.select(b.cmpf("uno", x, x), x, neg)
    zero = b.const(0, i64)
    pos = b.select(b.cmpi("sgt", x, zero), b.const(1, i64), zero)
    return b.select(b.cmpi("slt", x, zero), b.const(-1, i64), pos)


def _minmax(pred_f: str, pred_i: str, nan_propagating: bool):
    def rule(b, k, x, y):
        if k == "f":
            pick = b.select(b.cmpf(pred_f, x, y), x, y)
            if nan_propagating:  # np.maximum/minimum return NaN if either is NaN
                pick = b.select(b.cmpf("uno", x, x), x, pick)
                pick = b.select(b.cmpf("uno", y, y), y, pick)
            return pick
        if k == "b":
            return b.binary(arith.OrIOp if pred_i == "sgt" else arith.AndIOp, x, y)
        return b.select(b.cmpi(pred_i, x, y), x, y)

    return rule


def _cmp(pred_f: str, pred_i: str, pred_b: str | None = None):
    def rule(b, k, x, y):
        if k == "c":
            if pred_f not in ("oeq", "une"):
                raise CompileError("complex numbers cannot be ordered")
            re, im = b.cmpf(pred_f, x[0], y[0]), b.cmpf(pred_f, x[1], y[1])
            return b.binary(arith.AndIOp if pred_f == "oeq" else arith.OrIOp, re, im)
        if k == "f":
            return b.cmpf(pred_f, x, y)
        return b.cmpi(pred_b or pred_i if k == "b" else pred_i, x, y)

    return rule


def _float_only(name: str, emit: Callable):
    def rule(b, k, *xs):
        if k == "c" and name == "exp":
            mag = b.math(math.ExpOp, xs[0][0])
            return (
                b.binary(arith.MulfOp, mag, b.math(math.CosOp, xs[0][1])),
                b.binary(arith.MulfOp, mag, b.math(math.SinOp, xs[0][1])),
            )
        if k != "f":
            raise CompileError(f"numpy.{name} on {_KIND_NAMES[k]} values is not supported")
        return emit(b, *xs)

    return rule


_KIND_NAMES = {"f": "float64", "i": "int64", "b": "bool", "c": "complex128"}


def _libm(name: str):
    def rule(b, *xs):
        if name in _DIFFERENTIABLE_LIBM and context.differentiation_method() == "auto":
            return _DIFFERENTIABLE_LIBM[name](b, *xs)
        return b.libm(name, *xs)

    return rule


def _math_generic(name: str):
    return lambda b, *xs: b.generic(f"math.{name}", list(xs), f64)


def _exp_pair(b, x, sign: float):
    """(exp(x) + sign * exp(-x)) / 2: sinh (sign -1) and cosh (sign +1)."""
    e = b.math(math.ExpOp, x)
    em = b.math(math.ExpOp, b.unary(arith.NegfOp, x))
    both = b.binary(arith.AddfOp if sign > 0 else arith.SubfOp, e, em)
    return b.binary(arith.MulfOp, both, b.const(0.5, f64))


def _sqrt_one_minus_square(b, x):
    one_minus = b.binary(arith.SubfOp, b.const(1.0, f64), b.binary(arith.MulfOp, x, x))
    return b.math(math.SqrtOp, one_minus)


#: Inside a function Enzyme differentiates, the C math library is not called directly:
#: the gradient passes reject body-less functions without a gradient rule (they do not
#: know libm), so these become math-dialect ops (lowered to the same libm calls after the
#: gradient passes, where Enzyme's own rules for them apply) or formulas over such ops.
_DIFFERENTIABLE_LIBM: dict[str, Callable] = {
    "tan": _math_generic("tan"),
    "tanh": _math_generic("tanh"),
    "atan": _math_generic("atan"),
    "atan2": _math_generic("atan2"),
    "expm1": _math_generic("expm1"),
    "log1p": _math_generic("log1p"),
    "log2": _math_generic("log2"),
    "log10": _math_generic("log10"),
    "sinh": lambda b, x: _exp_pair(b, x, -1.0),
    "cosh": lambda b, x: _exp_pair(b, x, 1.0),
    "asin": lambda b, x: b.generic("math.atan2", [x, _sqrt_one_minus_square(b, x)], f64),
    "acos": lambda b, x: b.generic("math.atan2", [_sqrt_one_minus_square(b, x), x], f64),
}


def _math(op):
    return lambda b, x: b.math(op, x)


def _sqrt(b, x):
    if context.differentiation_method() != "auto":
        return b.math(math.SqrtOp, x)
    # Enzyme's derivative of sqrt is 0 at x == 0 (it guards against 0 * inf); JAX's, and the
    # limit, is +inf. Under Enzyme, x == 0 takes pow(x, 0.5), whose rule 0.5 * pow(x, -0.5)
    # gives +inf there; every other x keeps the exact sqrt and its usual derivative.
    at_zero = b.cmpf("oeq", x, b.const(0.0, f64))
    return b.select(at_zero, b.powf(x, b.const(0.5, f64)), b.math(math.SqrtOp, x))


def _logical(op):
    def rule(b, k, x, y):
        return b.binary(op, x, y)

    return rule


def _bitwise(op):
    def rule(b, k, x, y):
        if k not in "ib":
            raise CompileError("bitwise operations need integer or bool operands")
        return b.binary(op, x, y)

    return rule


def _invert(b, k, x):
    if k == "b":
        return b.binary(arith.XOrIOp, x, b.const(True, i1))
    if k == "i":
        return b.binary(arith.XOrIOp, x, b.const(-1, i64))
    raise CompileError("bitwise not needs integer or bool operands")


def _conj(b, k, x):
    if k == "c":
        return x[0], b.unary(arith.NegfOp, x[1])
    return x


def _square(b, k, x):
    return _mul(b, k, x, x)


def _reciprocal(b, k, x):
    if k == "f":
        return b.binary(arith.DivfOp, b.const(1.0, f64), x)
    raise CompileError("numpy.reciprocal is only supported on floats")


def _rint(b, k, x):
    # round half to even: r = floor(x + 0.5); if r - x == 0.5 and r odd: r -= 1
    half = b.const(0.5, f64)
    r = b.math(math.FloorOp, b.binary(arith.AddfOp, x, half))
    tie = b.cmpf("oeq", b.binary(arith.SubfOp, r, x), half)
    two = b.const(2.0, f64)
    odd = b.cmpf("one", b.generic("arith.remf", [r, two], f64), b.const(0.0, f64))
    return b.select(
        b.binary(arith.AndIOp, tie, odd), b.binary(arith.SubfOp, r, b.const(1.0, f64)), r
    )


#: ufunc -> rule(builder, kind, *values). The kind is the loop dtype numpy resolves.
UFUNC_RULES: dict[np.ufunc, Callable] = {
    np.add: _add,
    np.subtract: _sub,
    np.multiply: _mul,
    np.true_divide: _div,
    np.floor_divide: _floordiv,
    np.remainder: _mod,
    np.fmod: _float_only("fmod", lambda b, x, y: b.generic("arith.remf", [x, y], f64)),
    np.negative: _neg,
    np.positive: lambda b, k, x: x,
    np.absolute: _abs,
    np.sign: _sign,
    np.conjugate: _conj,
    np.square: _square,
    np.reciprocal: _reciprocal,
    np.sqrt: _float_only("sqrt", _sqrt),
    np.exp: _float_only("exp", _math(math.ExpOp)),
    np.expm1: _float_only("expm1", _libm("expm1")),
    np.log: _float_only("log", _math(math.LogOp)),
    np.log1p: _float_only("log1p", _libm("log1p")),
    np.log2: _float_only("log2", _libm("log2")),
    np.log10: _float_only("log10", _libm("log10")),
    np.sin: _float_only("sin", _math(math.SinOp)),
    np.cos: _float_only("cos", _math(math.CosOp)),
    np.tan: _float_only("tan", _libm("tan")),
    np.arcsin: _float_only("arcsin", _libm("asin")),
    np.arccos: _float_only("arccos", _libm("acos")),
    np.arctan: _float_only("arctan", _libm("atan")),
    np.arctan2: _float_only("arctan2", _libm("atan2")),
    np.sinh: _float_only("sinh", _libm("sinh")),
    np.cosh: _float_only("cosh", _libm("cosh")),
    np.tanh: _float_only("tanh", _libm("tanh")),
    np.floor: _float_only("floor", _math(math.FloorOp)),
    np.ceil: _float_only("ceil", _math(math.CeilOp)),
    np.rint: _float_only("rint", lambda b, x: _rint(b, "f", x)),
    np.power: None,  # handled in _power (needs the exponent's value)
    np.maximum: _minmax("ogt", "sgt", True),
    np.minimum: _minmax("olt", "slt", True),
    np.fmax: _minmax("ogt", "sgt", False),
    np.fmin: _minmax("olt", "slt", False),
    np.less: _cmp("olt", "slt", "ult"),
    np.less_equal: _cmp("ole", "sle", "ule"),
    np.greater: _cmp("ogt", "sgt", "ugt"),
    np.greater_equal: _cmp("oge", "sge", "uge"),
    np.equal: _cmp("oeq", "eq"),
    np.not_equal: _cmp("une", "ne"),
    np.logical_and: _logical(arith.AndIOp),
    np.logical_or: _logical(arith.OrIOp),
    np.logical_xor: _logical(arith.XOrIOp),
    np.logical_not: lambda b, k, x: b.binary(arith.XOrIOp, x, b.const(True, i1)),
    np.bitwise_and: _bitwise(arith.AndIOp),
    np.bitwise_or: _bitwise(arith.OrIOp),
    np.bitwise_xor: _bitwise(arith.XOrIOp),
    np.invert: _invert,
}


#: operand kinds a rule handles, where not all ("f" float, "i" int, "b" bool, "c" complex)
UFUNC_KINDS: dict[np.ufunc, str] = {
    np.absolute: "fic",
    np.sign: "fi",
    np.negative: "fic",
    np.maximum: "fib",
    np.minimum: "fib",
    np.fmax: "fib",
    np.fmin: "fib",
    np.floor_divide: "fi",
    np.remainder: "fi",
    np.reciprocal: "f",
    np.logical_and: "b",
    np.logical_or: "b",
    np.logical_xor: "b",
    np.logical_not: "b",
    np.bitwise_and: "ib",
    np.bitwise_or: "ib",
    np.bitwise_xor: "ib",
    np.invert: "ib",
    np.power: "fi",
}


def _loop_dtypes(ufunc: np.ufunc, dtypes: list[np.dtype]) -> tuple[list[np.dtype], np.dtype]:
    """numpy's loop (input, output) dtypes for `ufunc` on `dtypes`, normalised."""
    if ufunc in (np.logical_and, np.logical_or, np.logical_xor, np.logical_not):
        return [BOOL] * len(dtypes), BOOL
    try:
        resolved = ufunc.resolve_dtypes((*dtypes, None))
    except Exception as err:  # numpy raises several kinds of errors here
        raise CompileError(
            f"numpy.{ufunc.__name__} is not defined for {[str(d) for d in dtypes]}"
        ) from err
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
                raise CompileError("integers to negative integer powers are not allowed")
            return _int_power(x, n, dtype)
    if dtype == INT:
        raise CompileError("int ** traced int is not supported; cast to float first")
    if dtype != FLOAT:
        raise CompileError(f"power on {dtype} values is not supported")
    y = as_scalar(exp, FLOAT)
    return Scalar(b.powf(x.value, y.value), out)


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


# ----------------------------------------------------------------------------------------
# array-level dispatch
# ----------------------------------------------------------------------------------------
def _wrap(result: Any) -> Tracer:
    """An object array / Scalar / constant computed by numpy -> Tracer."""
    return as_tracer(result)


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    if kwargs.get("out") is not None:
        raise CompileError(
            f"numpy.{ufunc.__name__}(..., out=...) is not supported on traced values"
        )
    if ufunc is np.matmul:
        return _wrap(np.matmul(*[_as_elems(x) for x in inputs]))
    if method == "reduce":
        return _reduce(ufunc, inputs[0], kwargs.get("axis", 0))
    if method != "__call__":
        raise CompileError(f"numpy.{ufunc.__name__}.{method} is not supported on traced values")
    if ufunc not in UFUNC_RULES:
        raise CompileError(f"numpy.{ufunc.__name__} is not supported by cofactor's tracer")
    looped = _loop_ufunc(ufunc, inputs)
    if looped is not None:
        return looped
    # constants stay Python values (folded or materialised per element by scalar_ufunc)
    operands = [_ufunc_operand(x) for x in inputs]
    ins, out = _loop_dtypes(ufunc, [d for _, d in operands])
    elems = np.broadcast_arrays(*[e for e, _ in operands])
    vec = np.frompyfunc(lambda *xs: scalar_ufunc(ufunc, *xs), len(inputs), 1)
    result = _objarr(vec(*elems))
    return Tracer(result, out)


# ----------------------------------------------------------------------------------------
# large arrays in memory: loops instead of one op per element
# ----------------------------------------------------------------------------------------
#: arrays in memrefs with at least this many elements are processed by `scf.for` loops
#: (elementwise ufuncs, `sum`) instead of being unrolled element by element
LOOP_MIN_ELEMENTS = 256


def _in_memory(x: Any) -> bool:
    return isinstance(x, Tracer) and x._elems is None and x.memref is not None


def _loop_nest(
    shape: tuple[int, ...], init: list[Any], body: Callable[[list[Any], list[Any]], list[Any]]
) -> Any:
    """`for i0 in range(shape[0]): for i1 ...: accs = body([i0, i1, ...], accs)` as scf.for
    ops (the accumulators `init` are carried through every level); returns the outer op."""
    from xdsl.dialects import scf
    from xdsl.ir import Block

    from cofactor.ir.builder import INDEX

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
            b.insert(scf.YieldOp(*new))
        finally:
            b.pop()
        return b.insert(scf.ForOp(zero, b.index(shape[dim]), one, accs, block))

    return level(0, [], init)


def _load_scalar(t: Tracer, ivs: list[Any]) -> Scalar:
    b = _b()
    if t.dtype == COMPLEX:
        return Scalar(
            (b.load(t.memref, [*ivs, b.index(0)]), b.load(t.memref, [*ivs, b.index(1)])), COMPLEX
        )
    return Scalar(b.load(t.memref, ivs), t.dtype)


def _loop_ufunc(ufunc: np.ufunc, inputs: tuple) -> Tracer | None:
    """An elementwise ufunc over large in-memory arrays as a loop nest writing a new buffer;
    None when the operands do not qualify (then the ufunc is unrolled)."""
    big = [x for x in inputs if _in_memory(x) and x.size >= LOOP_MIN_ELEMENTS]
    if not big or ufunc not in UFUNC_RULES:
        return None
    if ufunc is np.power and not isinstance(inputs[1], int | float):
        return None  # a traced exponent: only folded constant exponents are looped
    shape = big[0].shape
    for x in inputs:
        scalar = isinstance(x, bool | int | float | complex | np.generic) or (
            isinstance(x, Tracer) and x.shape == ()
        )
        if not scalar and not (_in_memory(x) and x.shape == shape):
            return None
    dtypes = [x.dtype if isinstance(x, Tracer) else python_dtype(x) for x in inputs]
    _, out = _loop_dtypes(ufunc, dtypes)
    from cofactor.ir.builder import memref_type

    ctx = context.current()
    b = ctx.builder
    buf = ctx.hoisted_alloc(memref_type(shape, out))
    operands = [x.elems[()] if isinstance(x, Tracer) and x.shape == () else x for x in inputs]

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        vals = [_load_scalar(x, ivs) if _in_memory(x) and x.shape else x for x in operands]
        r = as_scalar(scalar_ufunc(ufunc, *vals), out)
        if out == COMPLEX:
            b.store(r.value[0], buf, [*ivs, b.index(0)])
            b.store(r.value[1], buf, [*ivs, b.index(1)])
        else:
            b.store(r.value, buf, ivs)
        return []

    op = _loop_nest(shape, [], body)
    return Tracer.from_memref(buf, shape, out, anchor=op)


def _loop_sum(t: Tracer) -> Tracer:
    """sum of all elements of a large in-memory array, as a loop with an accumulator."""
    dtype = t.dtype if t.dtype != BOOL else INT
    zero = const_scalar(0, dtype)
    init = list(zero.value) if dtype == COMPLEX else [zero.value]

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        x = cast_scalar(_load_scalar(t, ivs), dtype)
        acc = Scalar(tuple(accs) if dtype == COMPLEX else accs[0], dtype)
        s = scalar_ufunc(np.add, acc, x)
        return list(s.value) if dtype == COMPLEX else [s.value]

    op = _loop_nest(t.shape, init, body)
    res = tuple(op.results) if dtype == COMPLEX else op.results[0]
    return as_tracer(Scalar(res, dtype))


def store_tracer(t: Tracer, ref: Any) -> None:
    """Write a traced array into the memref `ref` (memref.copy when it is already a memref)."""
    b = _b()
    if t._elems is None and t.memref is not None:
        b.copy(t.memref, ref)
        return
    dtype = t.dtype
    index: dict[int, Any] = {}

    def idx(i: int) -> Any:
        if i not in index:
            index[i] = b.index(i)
        return index[i]

    elems = cast_tracer(t, dtype).elems
    for pos in np.ndindex(*t.shape):
        s = elems[pos]
        ids = [idx(p) for p in pos]
        if dtype == COMPLEX:
            b.store(s.value[0], ref, [*ids, idx(0)])
            b.store(s.value[1], ref, [*ids, idx(1)])
        else:
            b.store(s.value, ref, ids)


def _ufunc_operand(x: Any) -> tuple[np.ndarray, np.dtype]:
    """(object array of elements, dtype) of a ufunc operand, without materialising constants."""
    if isinstance(x, Tracer):
        return x.elems, x.dtype
    if isinstance(x, np.ndarray) and x.dtype != object:
        return x.astype(object), normalize_dtype(x.dtype)
    if isinstance(x, bool | int | float | complex | np.generic):
        return _objarr(x.item() if isinstance(x, np.generic) else x), python_dtype(x)
    t = as_tracer(x)
    return t.elems, t.dtype


def _as_elems(x: Any) -> np.ndarray:
    return as_tracer(x).elems


def _reduce(ufunc: np.ufunc, x: Any, axis: Any) -> Tracer:
    t = as_tracer(x)
    fn = np.frompyfunc(lambda a, b: scalar_ufunc(ufunc, a, b), 2, 1)
    return _wrap(fn.reduce(t.elems, axis=axis))


def _sum(a, axis=None, dtype=None, keepdims=False, **kw):
    t = as_tracer(a)
    if axis is None and dtype is None and not keepdims and _in_memory(t):
        if t.size >= LOOP_MIN_ELEMENTS:
            return _loop_sum(t)
    src = t if dtype is None else cast_tracer(t, normalize_dtype(dtype))
    if src.dtype == BOOL:
        src = cast_tracer(src, INT)
    if t.size == 0:
        return _wrap(
            np.zeros(np.sum(np.zeros(t.shape), axis=axis, keepdims=keepdims).shape, src.dtype)
        )
    return _wrap(np.sum(src.elems, axis=axis, keepdims=keepdims))


def _prod(a, axis=None, dtype=None, keepdims=False, **kw):
    t = as_tracer(a)
    src = t if dtype is None else cast_tracer(t, normalize_dtype(dtype))
    if src.dtype == BOOL:
        src = cast_tracer(src, INT)
    return _wrap(np.prod(src.elems, axis=axis, keepdims=keepdims))


def _mean(a, axis=None, keepdims=False, **kw):
    t = as_tracer(a)
    total = _sum(t, axis=axis, keepdims=keepdims)
    n = t.size if axis is None else int(np.prod([t.shape[i] for i in np.atleast_1d(axis)]))
    return np.true_divide(cast_tracer(total, COMPLEX if t.dtype == COMPLEX else FLOAT), float(n))


def _reduce_fn(ufunc: np.ufunc):
    def rule(a, axis=None, keepdims=False, **kw):
        t = as_tracer(a)
        elems = t.elems if axis is not None else t.elems.reshape(-1)
        fn = np.frompyfunc(lambda x, y: scalar_ufunc(ufunc, x, y), 2, 1)
        res = fn.reduce(elems, axis=axis if axis is not None else 0, keepdims=keepdims)
        return _wrap(res)

    return rule


def _argext(pred: np.ufunc):
    """argmax/argmin over the flattened array (first occurrence wins, as in numpy)."""

    def rule(a, axis=None, **kw):
        if axis is not None:
            raise CompileError("numpy.argmax/argmin with an axis is not supported")
        flat = as_tracer(a).elems.reshape(-1)
        best, idx = flat[0], const_scalar(0, INT)
        for i in range(1, flat.shape[0]):
            better = scalar_ufunc(pred, flat[i], best)
            best = _select(better, flat[i], best)
            idx = _select(better, const_scalar(i, INT), idx)
        return as_tracer(idx)

    return rule


def _select(c: Scalar, x: Any, y: Any) -> Scalar:
    dtype = normalize_dtype(np.result_type(python_dtype(x), python_dtype(y)))
    x, y = as_scalar(x, dtype), as_scalar(y, dtype)
    c = as_scalar(c, BOOL)
    if c.const is not None:
        return x if c.const else y
    b = _b()
    if dtype == COMPLEX:
        return Scalar(
            (b.select(c.value, x.value[0], y.value[0]), b.select(c.value, x.value[1], y.value[1])),
            dtype,
        )
    return Scalar(b.select(c.value, x.value, y.value), dtype)


def _where(cond, x=None, y=None):
    if x is None or y is None:
        raise CompileError(
            "numpy.where(cond) with one argument needs concrete values (dynamic shape)"
        )
    c, tx, ty = as_tracer(cond), as_tracer(x), as_tracer(y)
    dtype = normalize_dtype(np.result_type(tx.dtype, ty.dtype))
    ce, xe, ye = np.broadcast_arrays(c.elems, tx.elems, ty.elems)
    fn = np.frompyfunc(lambda a, p, q: _select(a, as_scalar(p, dtype), as_scalar(q, dtype)), 3, 1)
    return Tracer(_objarr(fn(ce, xe, ye)), dtype)


def _structural(np_fn: Callable):
    """Functions that only rearrange elements: run numpy on the object arrays."""

    def rule(*args, **kwargs):
        args = [_elems_of(a) for a in args]
        kwargs = {k: _elems_of(v) for k, v in kwargs.items()}
        return _wrap(np_fn(*args, **kwargs))

    return rule


def _elems_of(x: Any) -> Any:
    if isinstance(x, Tracer):
        return x.elems
    if isinstance(x, list | tuple) and any(isinstance(v, Tracer) for v in x):
        return type(x)(_elems_of(v) for v in x)
    return x


def _sequence_rule(np_fn: Callable):
    """stack/concatenate: numpy on object arrays loses dtype; cast all to the common dtype."""

    def rule(arrays, *args, **kwargs):
        ts = [as_tracer(a) for a in arrays]
        dtype = normalize_dtype(np.result_type(*[t.dtype for t in ts]))
        return _wrap(np_fn([cast_tracer(t, dtype).elems for t in ts], *args, **kwargs))

    return rule


def _like(fill: Any):
    def rule(a, dtype=None, **kw):
        t = as_tracer(a)
        d = normalize_dtype(dtype) if dtype is not None else t.dtype
        return np.full(t.shape, fill, dtype=d)

    return rule


def _shape(a):
    return as_tracer(a).shape


def _ndim(a):
    return as_tracer(a).ndim


def _size(a, axis=None):
    t = as_tracer(a)
    return t.size if axis is None else t.shape[axis]


def _loop_map(t: Tracer, fn: Callable[[Scalar], Scalar], out: np.dtype) -> Tracer:
    """fn applied to every element of a large in-memory array, as a loop nest."""
    from cofactor.ir.builder import memref_type

    ctx = context.current()
    b = ctx.builder
    buf = ctx.hoisted_alloc(memref_type(t.shape, out))

    def body(ivs: list[Any], accs: list[Any]) -> list[Any]:
        r = as_scalar(fn(_load_scalar(t, ivs)), out)
        if out == COMPLEX:
            b.store(r.value[0], buf, [*ivs, b.index(0)])
            b.store(r.value[1], buf, [*ivs, b.index(1)])
        else:
            b.store(r.value, buf, ivs)
        return []

    op = _loop_nest(t.shape, [], body)
    return Tracer.from_memref(buf, t.shape, out, anchor=op)


def _large(t: Tracer) -> bool:
    return _in_memory(t) and t.size >= LOOP_MIN_ELEMENTS


def _real(a):
    t = as_tracer(a)
    if _large(t) and t.dtype == COMPLEX:
        return _loop_map(t, scalar_real, FLOAT)
    return Tracer(
        _objarr(np.frompyfunc(scalar_real, 1, 1)(t.elems)), FLOAT if t.dtype == COMPLEX else t.dtype
    )


def _imag(a):
    t = as_tracer(a)
    if _large(t) and t.dtype == COMPLEX:
        return _loop_map(t, scalar_imag, FLOAT)
    return Tracer(
        _objarr(np.frompyfunc(scalar_imag, 1, 1)(t.elems)), FLOAT if t.dtype == COMPLEX else t.dtype
    )


def _linspace(start, stop, num=50, endpoint=True, **kw):
    s, e = as_scalar(start, FLOAT), as_scalar(stop, FLOAT)
    div = (num - 1) if endpoint else num
    step = scalar_ufunc(np.true_divide, scalar_ufunc(np.subtract, e, s), float(max(div, 1)))
    out = np.empty((num,), dtype=object)
    for i in range(num):
        out[i] = scalar_ufunc(np.add, s, scalar_ufunc(np.multiply, step, float(i)))
    if endpoint and num > 1:
        out[-1] = e
    return Tracer(out, FLOAT)


def _isclose_unsupported(*a, **k):
    raise CompileError("numpy.isclose/allclose on traced values would need a concrete bool")


def _clip(a, a_min, a_max, **kw):
    t = a
    if a_min is not None:
        t = np.maximum(t, a_min)
    if a_max is not None:
        t = np.minimum(t, a_max)
    return as_tracer(t)


def _cumsum(a, axis=None, **kw):
    t = as_tracer(a)
    if t.dtype == BOOL:
        t = cast_tracer(t, INT)
    elems = t.elems.reshape(-1) if axis is None else t.elems
    return _wrap(np.cumsum(elems, axis=0 if axis is None else axis))


def _trace(a, **kw):
    t = as_tracer(a)
    return _wrap(np.sum(np.diagonal(t.elems)))


def _kron(a, b):
    return _wrap(np.kron(_as_elems(a), _as_elems(b)))


def _dot(a, b, **kw):
    return _wrap(np.dot(_as_elems(a), _as_elems(b)))


def _tensordot(a, b, axes=2):
    return _wrap(np.tensordot(_as_elems(a), _as_elems(b), axes=axes))


def _einsum(subscripts, *operands, **kw):
    if not isinstance(subscripts, str):
        raise CompileError("numpy.einsum needs a subscripts string")
    return _wrap(np.einsum(subscripts, *[_as_elems(o) for o in operands], dtype=object))


def _outer(a, b, **kw):
    return _wrap(np.outer(_as_elems(a), _as_elems(b)))


def _vdot(a, b):
    return _wrap(np.vdot(np.conjugate(as_tracer(a)).elems, _as_elems(b)))


def _norm(x, ord=None, axis=None, keepdims=False):
    if ord not in (None, 2, "fro") or (ord == 2 and as_tracer(x).ndim != 1):
        raise CompileError(f"numpy.linalg.norm with ord={ord!r} is not supported")
    t = as_tracer(x)
    sq = np.real(t * np.conj(t)) if t.dtype == COMPLEX else t * t
    return np.sqrt(_sum(sq, axis=axis, keepdims=keepdims))


def _angle(z, deg=False):
    t = as_tracer(z)
    a = np.arctan2(np.imag(t), np.real(t))
    return a * (180 / np.pi) if deg else a


def _result_type(*args):
    return np.result_type(*[as_tracer(a).dtype if isinstance(a, Tracer) else a for a in args])


#: numpy function -> rule. The rule receives the function's own arguments.
FUNCTION_RULES: dict[Callable, Callable] = {
    np.sum: _sum,
    np.prod: _prod,
    np.mean: _mean,
    np.max: _reduce_fn(np.maximum),
    np.min: _reduce_fn(np.minimum),
    np.amax: _reduce_fn(np.maximum),
    np.amin: _reduce_fn(np.minimum),
    np.argmax: _argext(np.greater),
    np.argmin: _argext(np.less),
    np.dot: _dot,
    np.vdot: _vdot,
    np.outer: _outer,
    np.tensordot: _tensordot,
    np.einsum: _einsum,
    np.kron: _kron,
    np.trace: _trace,
    np.cumsum: _cumsum,
    np.where: _where,
    np.clip: _clip,
    np.reshape: _structural(np.reshape),
    np.transpose: _structural(np.transpose),
    np.swapaxes: _structural(np.swapaxes),
    np.moveaxis: _structural(np.moveaxis),
    np.squeeze: _structural(np.squeeze),
    np.expand_dims: _structural(np.expand_dims),
    np.ravel: _structural(np.ravel),
    np.flip: _structural(np.flip),
    np.roll: _structural(np.roll),
    np.diag: _structural(np.diag),
    np.diagonal: _structural(np.diagonal),
    np.tile: _structural(np.tile),
    np.repeat: _structural(np.repeat),
    np.broadcast_to: _structural(np.broadcast_to),
    np.atleast_1d: _structural(np.atleast_1d),
    np.atleast_2d: _structural(np.atleast_2d),
    np.copy: _structural(np.copy),
    np.take: _structural(np.take),
    np.stack: _sequence_rule(np.stack),
    np.concatenate: _sequence_rule(np.concatenate),
    np.hstack: _sequence_rule(np.hstack),
    np.vstack: _sequence_rule(np.vstack),
    np.zeros_like: _like(0),
    np.ones_like: _like(1),
    np.shape: _shape,
    np.ndim: _ndim,
    np.size: _size,
    np.real: _real,
    np.imag: _imag,
    np.linspace: _linspace,
    np.isclose: _isclose_unsupported,
    np.allclose: _isclose_unsupported,
    np.result_type: _result_type,
    np.linalg.norm: _norm,
    np.angle: _angle,
}


def array_function(func: Callable, args: tuple, kwargs: dict) -> Any:
    rule = FUNCTION_RULES.get(func)
    if rule is None:
        name = getattr(func, "__module__", "numpy") + "." + getattr(func, "__name__", str(func))
        raise CompileError(f"{name} is not supported on traced values by cofactor")
    return rule(*args, **kwargs)


__all__ = [
    "FUNCTION_RULES",
    "UFUNC_RULES",
    "array_function",
    "array_ufunc",
    "as_tracer",
    "cast_tracer",
    "_LazyMemref",
]
