"""IR formulas that element rules share, each written so that Enzyme differentiates it
and its value is numpy's: complex multiplication and division (numpy's Smith's method),
|x| with gradient 0 or +-1 at 0, hypot without overflow or underflow, and the tie of two
floats that max/min split the gradient of. They only emit IR through the builder.
"""

from __future__ import annotations

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import f64
from xdsl.ir import SSAValue

from cofactor.ir.builder import IRBuilder


def complex_mul(b: IRBuilder, x: tuple, y: tuple) -> tuple:
    re = b.binary(
        arith.SubfOp, b.binary(arith.MulfOp, x[0], y[0]), b.binary(arith.MulfOp, x[1], y[1])
    )
    im = b.binary(
        arith.AddfOp, b.binary(arith.MulfOp, x[0], y[1]), b.binary(arith.MulfOp, x[1], y[0])
    )
    return re, im


def complex_div(b: IRBuilder, x: tuple, y: tuple) -> tuple:
    """x / y as numpy's loop computes it (Smith's method: the ratio of y's smaller to its
    larger part, so |y|^2 is never formed: (1e300+1e300j)/(1e300+1e300j) is 1, not NaN),
    and x / 0 as x's parts over +0.0 (inf or NaN per part, as numpy)."""
    (xr, xi), (yr, yi) = x, y

    def mul(p, q):
        return b.binary(arith.MulfOp, p, q)

    def add(p, q):
        return b.binary(arith.AddfOp, p, q)

    def sub(p, q):
        return b.binary(arith.SubfOp, p, q)

    abs_r, abs_i = magnitude(b, yr), magnitude(b, yi)
    real_larger = b.cmpf("oge", abs_r, abs_i)
    larger, smaller = b.select(real_larger, yr, yi), b.select(real_larger, yi, yr)
    ratio = b.binary(arith.DivfOp, smaller, larger)
    scale = b.binary(arith.DivfOp, b.const(1.0, f64), add(larger, mul(smaller, ratio)))
    # |yr| >= |yi|: ((xr + xi r), (xi - xr r)) * scale; else ((xr r + xi), (xi r - xr)) * scale
    re = b.select(real_larger, add(xr, mul(xi, ratio)), add(mul(xr, ratio), xi))
    im = b.select(real_larger, sub(xi, mul(xr, ratio)), sub(mul(xi, ratio), xr))
    re, im = mul(re, scale), mul(im, scale)
    zero = b.const(0.0, f64)
    y_zero = b.binary(arith.AndIOp, b.cmpf("oeq", abs_r, zero), b.cmpf("oeq", abs_i, zero))
    over_zero = (b.binary(arith.DivfOp, xr, abs_r), b.binary(arith.DivfOp, xi, abs_i))
    return b.select(y_zero, over_zero[0], re), b.select(y_zero, over_zero[1], im)


def abs_zero_at_zero(b: IRBuilder, x: SSAValue) -> SSAValue:
    """|x| with gradient 0 at x = 0 (autograd's, PennyLane's default interface; JAX's is 1):
    a constant +0.0 there, which is also numpy's |-0.0|."""
    zero = b.const(0.0, f64)
    return b.select(b.cmpf("oeq", x, zero), zero, magnitude(b, x))


def magnitude(b: IRBuilder, x: SSAValue) -> SSAValue:
    """`math.abs`: its derivative at 0 is Enzyme's (+-1), which formulas such as arcsinh's
    need there."""
    return b.generic("math.abs", [x], f64)  # MLIR 15 spelling (xDSL: math.absf)


def balanced_tie(b: IRBuilder, pick: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
    """`pick` (the larger/smaller of floats x, y), but where x == y (finite) the mean of
    both, so that the gradient splits 0.5/0.5 between them, as autograd's (PennyLane's
    default interface) and JAX's do, instead of all going to one side. The value there is
    exactly numpy's: y - ((y - x) * 0.5 + 0.0) is y for equal finite floats, the `+ 0.0`
    keeping y's sign when y is -0.0 and x +0.0 (numpy's array loops of maximum, minimum,
    fmax and fmin return y on a tie)."""
    base, other = y, x
    half = b.binary(arith.MulfOp, b.binary(arith.SubfOp, base, other), b.const(0.5, f64))
    offset = b.binary(arith.AddfOp, half, b.const(0.0, f64))
    mean = b.binary(arith.SubfOp, base, offset)
    finite = b.cmpf("one", magnitude(b, x), b.const(float("inf"), f64))
    tie = b.binary(arith.AndIOp, b.cmpf("oeq", x, y), finite)
    return b.select(tie, mean, pick)


#: where x*x + y*y neither overflows nor loses digits to underflow (hypot's fast path)
_HYPOT_PLAIN_RANGE = (1e-150, 1e150)


def hypot(b: IRBuilder, k: str, x: SSAValue, y: SSAValue) -> SSAValue:
    """sqrt(x*x + y*y) (also |x + iy|) as numpy's: without overflow or underflow of the
    squares (large or tiny operands are scaled by the larger one), inf if either is
    infinite (even with a NaN), and gradient 0 at (0, 0), as autograd's |0| (its hypot's
    is NaN there). Each branch not taken gets operands that keep its adjoint finite:
    Enzyme multiplies the 0 adjoint of an unselected sqrt by its derivative (0 * inf)."""
    one, zero, inf = b.const(1.0, f64), b.const(0.0, f64), b.const(float("inf"), f64)
    ax, ay = magnitude(b, x), magnitude(b, y)
    x_larger = b.cmpf("ogt", ax, ay)
    big, small = b.select(x_larger, ax, ay), b.select(x_larger, ay, ax)
    plain = b.binary(
        arith.AndIOp,
        b.cmpf("oge", big, b.const(_HYPOT_PLAIN_RANGE[0], f64)),
        b.cmpf("ole", big, b.const(_HYPOT_PLAIN_RANGE[1], f64)),
    )
    sq = b.binary(arith.AddfOp, b.binary(arith.MulfOp, x, x), b.binary(arith.MulfOp, y, y))
    direct = b.math(math.SqrtOp, b.select(plain, sq, one))
    scale_ok = b.binary(arith.AndIOp, b.cmpf("one", big, zero), b.cmpf("one", big, inf))
    ratio = b.binary(arith.DivfOp, small, b.select(scale_ok, big, one))
    root = b.math(math.SqrtOp, b.binary(arith.AddfOp, one, b.binary(arith.MulfOp, ratio, ratio)))
    scaled = b.binary(arith.MulfOp, big, root)
    both_zero = b.binary(arith.AndIOp, b.cmpf("oeq", big, zero), b.cmpf("oeq", small, zero))
    value = b.select(plain, direct, b.select(both_zero, zero, scaled))  # (a NaN: scaled)
    infinite = b.binary(arith.OrIOp, b.cmpf("oeq", ax, inf), b.cmpf("oeq", ay, inf))
    return b.select(infinite, inf, value)
