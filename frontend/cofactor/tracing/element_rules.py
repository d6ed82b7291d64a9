"""The element rules of numpy's ufuncs on tracers: per ufunc, the IR that computes one
element from the SSA values of its operands, for each operand kind numpy resolves ("f"
float64, "i" int64, "b" bool, "c" complex128: a pair of f64).

`numpy_rules.scalar_ufunc` picks the loop dtypes and calls these; they only emit IR through
the builder and know nothing about tracers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import f64, i1, i64

from cofactor.errors import CompileError
from cofactor.tracing import context
from cofactor.tracing.element_math import (
    abs_zero_at_zero,
    balanced_tie,
    complex_div,
    complex_mul,
    hypot,
    magnitude,
)


# ----------------------------------------------------------------------------------------
# element rules: (kind, *ssa values) -> ssa value
# ----------------------------------------------------------------------------------------
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
        return complex_mul(b, x, y)
    return b.binary({"f": arith.MulfOp, "i": arith.MuliOp, "b": arith.AndIOp}[k], x, y)


def _div(b, k, x, y):
    if k == "c":
        return complex_div(b, x, y)
    return b.binary(arith.DivfOp, x, y)


def _floordiv(b, k, x, y):
    if k == "f":
        return _float_floordiv(b, x, y)
    # Python semantics: round towards minus infinity.
    by_zero, safe = _safe_divisor(b, x, y)
    q = b.binary(arith.DivSIOp, x, safe)
    r = b.binary(arith.RemSIOp, x, safe)
    zero, one = b.const(0, i64), b.const(1, i64)
    adjust = b.binary(
        arith.AndIOp,
        b.cmpi("ne", r, zero),
        b.cmpi("ne", b.cmpi("slt", r, zero), b.cmpi("slt", y, zero)),
    )
    return b.select(by_zero, zero, b.select(adjust, b.binary(arith.SubiOp, q, one), q))


def _float_floordiv(b, x, y):
    """numpy's (and Python's) float `//`: the quotient of x - fmod(x, y), which is exact,
    not floor(x / y), whose rounded quotient can reach the next integer (1.0 // 0.1 is 9.0,
    floor(1.0 / 0.1) 10.0); -5.0 // inf is -1.0, inf // 2.0 NaN, x // 0.0 is x / 0.0."""
    zero, one = b.const(0.0, f64), b.const(1.0, f64)
    quotient = b.binary(arith.DivfOp, x, y)
    mod = b.generic("arith.remf", [x, y], f64)
    div = b.binary(arith.DivfOp, b.binary(arith.SubfOp, x, mod), y)
    signs_differ = b.cmpi("ne", b.cmpf("olt", y, zero), b.cmpf("olt", mod, zero))
    adjust = b.binary(arith.AndIOp, b.cmpf("une", mod, zero), signs_differ)
    div = b.select(adjust, b.binary(arith.SubfOp, div, one), div)
    floor = b.math(math.FloorOp, div)
    up = b.cmpf("ogt", b.binary(arith.SubfOp, div, floor), b.const(0.5, f64))
    floor = b.select(up, b.binary(arith.AddfOp, floor, one), floor)
    # a zero quotient keeps x / y's sign (finite here: x - mod is 0 or y is infinite)
    signed_zero = b.binary(arith.MulfOp, quotient, zero)
    result = b.select(b.cmpf("une", div, zero), floor, signed_zero)
    # (x / 0.0 is +-inf or NaN, its own floor: floor keeps the derivative 0, as autograd's)
    return b.select(b.cmpf("oeq", y, zero), b.math(math.FloorOp, quotient), result)


def _safe_divisor(b, x, y):
    """numpy's integer `//` and `%` give 0 for a zero divisor and wrap INT64_MIN // -1 to
    INT64_MIN (with a RuntimeWarning), where the machine's division traps (SIGFPE, which
    would kill Python). Returns (y == 0, a divisor that cannot trap: 1 in both cases;
    x // 1 is x, which is numpy's wrapped INT64_MIN, and x % 1 is 0, numpy's remainder)."""
    zero = b.const(0, i64)
    by_zero = b.cmpi("eq", y, zero)
    overflow = b.binary(
        arith.AndIOp,
        b.cmpi("eq", x, b.const(-(2**63), i64)),
        b.cmpi("eq", y, b.const(-1, i64)),
    )
    trap = b.binary(arith.OrIOp, by_zero, overflow)
    return by_zero, b.select(trap, b.const(1, i64), y)


def _mod(b, k, x, y):
    if k == "f":
        r = b.generic("arith.remf", [x, y], f64)
        zero = b.const(0.0, f64)
        adjust = b.binary(
            arith.AndIOp,
            b.cmpf("une", r, zero),
            b.cmpi("ne", b.cmpf("olt", r, zero), b.cmpf("olt", y, zero)),
        )
        r = b.select(adjust, b.binary(arith.AddfOp, r, y), r)
        # A zero remainder has y's sign, as numpy's and Python's (-4.0 % 2.0 is 0.0). Both
        # zeros are computed from r so that the derivative stays 1 wrt x (autograd's):
        # (r + 1) - 1 is +0.0 and -((1 - r) - 1) is -0.0 for r = +-0.0.
        one = b.const(1.0, f64)
        plus = b.binary(arith.SubfOp, b.binary(arith.AddfOp, r, one), one)
        minus = b.unary(arith.NegfOp, b.binary(arith.SubfOp, b.binary(arith.SubfOp, one, r), one))
        signed = b.select(b.cmpf("olt", y, zero), minus, plus)
        return b.select(b.cmpf("oeq", r, zero), signed, r)
    _, safe = _safe_divisor(b, x, y)  # (a zero divisor: x % 1 is numpy's 0)
    r = b.binary(arith.RemSIOp, x, safe)
    zero = b.const(0, i64)
    adjust = b.binary(
        arith.AndIOp,
        b.cmpi("ne", r, zero),
        b.cmpi("ne", b.cmpi("slt", r, zero), b.cmpi("slt", y, zero)),
    )
    return b.select(adjust, b.binary(arith.AddiOp, r, y), r)


def _fmod(b, k, x, y):
    """C's remainder (the sign of x); numpy's int fmod by zero is 0, as for `%`."""
    if k == "f":
        return b.generic("arith.remf", [x, y], f64)
    by_zero, safe = _safe_divisor(b, x, y)
    return b.select(by_zero, b.const(0, i64), b.binary(arith.RemSIOp, x, safe))


def _shift(left: bool):
    """numpy's int64 shifts: a shift by 64 or more (or a negative one, taken as unsigned)
    gives 0, or -1 for a right shift of a negative number (no undefined C shift)."""

    def rule(b, k, x, y):
        if k != "i":
            raise CompileError("bit shifts need integer operands")
        in_range = b.cmpi("ult", y, b.const(64, i64))
        safe = b.select(in_range, y, b.const(0, i64))
        if left:
            return b.select(in_range, b.binary(arith.ShLIOp, x, safe), b.const(0, i64))
        negative = b.cmpi("slt", x, b.const(0, i64))
        saturated = b.select(negative, b.const(-1, i64), b.const(0, i64))
        return b.select(in_range, b.binary(arith.ShRSIOp, x, safe), saturated)

    return rule


def _neg(b, k, x):
    if k == "c":
        return b.unary(arith.NegfOp, x[0]), b.unary(arith.NegfOp, x[1])
    if k == "f":
        return b.unary(arith.NegfOp, x)
    return b.binary(arith.SubiOp, b.const(0, i64), x)


def _abs(b, k, x):
    if k == "c":
        return hypot(b, "f", x[0], x[1])
    if k == "f":
        return abs_zero_at_zero(b, x)
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
            pick = balanced_tie(b, pick, x, y)
            if nan_propagating:  # np.maximum/minimum return NaN if either is NaN
                pick = b.select(b.cmpf("uno", x, x), x, pick)
                pick = b.select(b.cmpf("uno", y, y), y, pick)
            else:  # np.fmax/fmin return the other one if one is NaN
                pick = b.select(b.cmpf("uno", y, y), x, pick)
            return pick
        if k == "b":
            return b.binary(arith.OrIOp if pred_i == "sgt" else arith.AndIOp, x, y)
        return b.select(b.cmpi(pred_i, x, y), x, y)

    return rule


def _cmp(pred_f: str, pred_i: str, pred_b: str | None = None):
    def rule(b, k, x, y):
        if k == "c":
            if pred_f not in ("oeq", "une"):
                # numpy orders complex numbers lexicographically: real parts, then imaginary
                strict = {"olt": "olt", "ole": "olt", "ogt": "ogt", "oge": "ogt"}[pred_f]
                real_decides = b.cmpf(strict, x[0], y[0])
                real_ties = b.cmpf("oeq", x[0], y[0])
                imag = b.binary(arith.AndIOp, real_ties, b.cmpf(pred_f, x[1], y[1]))
                return b.binary(arith.OrIOp, real_decides, imag)
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
    np.fmod: _fmod,
    np.left_shift: _shift(True),
    np.right_shift: _shift(False),
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
    np.fmod: "fi",
    np.left_shift: "i",
    np.right_shift: "i",
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


# ----------------------------------------------------------------------------------------
# more float ufuncs, as formulas over the rules above (so Enzyme differentiates them)
# ----------------------------------------------------------------------------------------
def _log1p(b, x):
    return UFUNC_RULES[np.log1p](b, "f", x)


def _exp2(b, k, x):
    return b.math(math.ExpOp, b.binary(arith.MulfOp, x, b.const(float(np.log(2.0)), f64)))


def _scale(factor: float):
    return lambda b, k, x: b.binary(arith.MulfOp, x, b.const(factor, f64))


def _arcsinh(b, k, x):
    # sign(x) * log(|x| + sqrt(x^2 + 1)): no cancellation for negative x
    ax = magnitude(b, x)
    root = b.math(math.SqrtOp, b.binary(arith.AddfOp, b.binary(arith.MulfOp, x, x), _one(b)))
    mag = b.math(math.LogOp, b.binary(arith.AddfOp, ax, root))
    return b.select(b.cmpf("olt", x, b.const(0.0, f64)), b.unary(arith.NegfOp, mag), mag)


def _arccosh(b, k, x):
    root = b.math(math.SqrtOp, b.binary(arith.SubfOp, b.binary(arith.MulfOp, x, x), _one(b)))
    return b.math(math.LogOp, b.binary(arith.AddfOp, x, root))


def _arctanh(b, k, x):
    # (log1p(x) - log1p(-x)) / 2
    diff = b.binary(arith.SubfOp, _log1p(b, x), _log1p(b, b.unary(arith.NegfOp, x)))
    return b.binary(arith.MulfOp, diff, b.const(0.5, f64))


def _trunc(b, k, x):
    neg = b.cmpf("olt", x, b.const(0.0, f64))
    return b.select(neg, b.math(math.CeilOp, x), b.math(math.FloorOp, x))


def _cbrt(b, k, x):
    mag = b.powf(magnitude(b, x), b.const(1.0 / 3.0, f64))
    return b.select(b.cmpf("olt", x, b.const(0.0, f64)), b.unary(arith.NegfOp, mag), mag)


def _logaddexp(b, k, x, y):
    # max(x, y) + log1p(exp(-|x - y|)); on a tie (also of infinities, whose difference is
    # NaN) the gap is 0: with max's balanced gradient d/dx = d/dy = 1/2, the true value
    hi = UFUNC_RULES[np.maximum](b, "f", x, y)
    spread = b.unary(arith.NegfOp, magnitude(b, b.binary(arith.SubfOp, x, y)))
    gap = b.select(b.cmpf("oeq", x, y), b.const(0.0, f64), spread)
    return b.binary(arith.AddfOp, hi, _log1p(b, b.math(math.ExpOp, gap)))


def _one(b):
    return b.const(1.0, f64)


def _inf_check(kind: str):
    """isnan / isinf / isfinite: float compares; ints and bools are always finite."""

    def test(b, x):
        if kind == "nan":
            return b.cmpf("uno", x, x)
        inf = b.const(float("inf"), f64)
        return b.cmpf("oeq" if kind == "inf" else "one", magnitude(b, x), inf)

    def rule(b, k, x):
        if k == "c":
            both = (test(b, x[0]), test(b, x[1]))
            op = arith.AndIOp if kind == "finite" else arith.OrIOp
            return b.binary(op, *both)
        if k != "f":
            return b.const(kind == "finite", i1)
        return test(b, x)

    return rule


_PI = float(np.pi)
UFUNC_RULES.update(
    {
        np.fabs: lambda b, k, x: abs_zero_at_zero(b, x),
        np.exp2: _exp2,
        np.hypot: hypot,
        np.deg2rad: _scale(_PI / 180.0),
        np.radians: _scale(_PI / 180.0),
        np.rad2deg: _scale(180.0 / _PI),
        np.degrees: _scale(180.0 / _PI),
        np.arcsinh: _arcsinh,
        np.arccosh: _arccosh,
        np.arctanh: _arctanh,
        np.trunc: _trunc,
        np.cbrt: _cbrt,
        np.logaddexp: _logaddexp,
        np.isnan: _inf_check("nan"),
        np.isinf: _inf_check("inf"),
        np.isfinite: _inf_check("finite"),
    }
)
for _uf in (
    np.fabs, np.exp2, np.hypot, np.deg2rad, np.radians, np.rad2deg, np.degrees, np.arcsinh,
    np.arccosh, np.arctanh, np.trunc, np.cbrt, np.logaddexp,
):  # fmt: skip
    UFUNC_KINDS[_uf] = "f"
