"""Property test: numpy's dtype rules and special values, compiled by cofactor, against numpy.

The array fuzzer (test_fuzz_arrays.py) keeps to finite real values and drops any expression
that warns. This one draws what it leaves out: arguments of every dtype cofactor computes
(bool, int64, float64, complex128; int32 / float32 arguments, which cofactor computes as
int64 / float64, docs/frontend.md), with zeros of both signs, infinities, NaN and negative
values, and one or two numpy operations over them (arithmetic with Python scalars of every
type, integer and float division and remainder by zero, powers, comparisons, bitwise and
logical operations, promotions, and reductions with an axis and keepdims). The compiled
result must have numpy's shape, dtype (of the arguments widened to 64 bits), values (NaN
where numpy's is NaN, the same infinities) and, elementwise, the same sign of a zero.
Where numpy raises, cofactor must raise too; what cofactor does not support must be a
CompileError saying so (numpy.floor of a bool, ordering complex numbers), never a wrong
number.

`make test` runs a fixed, derandomized set of COFACTOR_FUZZ_EXAMPLES examples (default 30);
run longer with e.g. COFACTOR_FUZZ_EXAMPLES=500 COFACTOR_FUZZ_SEED=3.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from fuzz_settings import fuzz_settings
from hypothesis import given, note
from hypothesis import strategies as st

import cofactor
from cofactor.errors import CompileError

pytestmark = pytest.mark.needs_toolchain

RTOL = 1e-12

#: what an argument of each drawn dtype is computed as (docs/frontend.md: 64-bit)
WIDENED = {"bool": "bool", "int64": "int64", "int32": "int64", "float64": "float64",
           "float32": "float64", "complex128": "complex128"}  # fmt: skip
SPECIAL = {
    "bool": [True, False],
    "int64": [0, 1, -1, 2, -3, 7, -8],
    "float64": [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3.0, -1.0, 1e-300],
    "complex128": [0j, 1 + 2j, -0.5j, 3.0 + 0j, -1.0 - 1j, complex(np.inf, 0)],
}
SPECIAL["int32"] = SPECIAL["int64"]
SPECIAL["float32"] = [0.0, -0.0, 1.5, -2.25, np.inf, np.nan, 3.0]

#: elementwise templates over names/constants {0}, {1}
ELEMENTWISE = [
    "{0} + {1}", "{0} - {1}", "{0} * {1}", "{0} / {1}", "{0} // {1}", "{0} % {1}",
    "{0} ** 2", "{0} ** {1}", "-{0}", "abs({0})", "np.abs({0})", "np.sign({0})",
    "{0} == {1}", "{0} != {1}", "{0} < {1}", "{0} >= {1}", "np.maximum({0}, {1})",
    "np.minimum({0}, {1})", "np.fmax({0}, {1})", "np.where({0} > {1}, {0}, {1})",
    "np.logical_and({0}, {1})", "np.logical_xor({0}, {1})", "np.logical_not({0})",
    "{0} & {1}", "{0} | {1}", "{0} ^ {1}", "~{0}", "np.floor_divide({0}, {1})",
    "np.remainder({0}, {1})", "np.fmod({0}, {1})", "np.true_divide({0}, {1})",
    "np.square({0})", "np.sqrt({0})", "np.exp({0})", "np.isnan({0})", "np.isinf({0})",
    "np.isfinite({0})", "np.real({0})", "np.imag({0})", "np.conj({0})", "np.floor({0})",
    "np.ceil({0})", "np.trunc({0})", "np.rint({0})", "np.clip({0}, -1, 2)",
    "{0}.astype(float)", "{0}.astype(int)", "{0}.astype(bool)", "np.negative({0})",
    "np.reciprocal({0})", "np.heaviside({0}, 0.5)", "np.nan_to_num({0})",
]  # fmt: skip
REDUCTIONS = [
    "np.sum({0}{a})", "np.prod({0}{a})", "np.max({0}{a})", "np.min({0}{a})",
    "np.mean({0}{a})", "np.any({0}{a})", "np.all({0}{a})", "{0}.sum({a0})",
    "np.count_nonzero({0}{a})", "np.cumsum({0}{c})", "np.argmax({0}{c})",
]  # fmt: skip
CONSTANTS = ["2", "-3", "0", "2.5", "-0.0", "True", "False", "1j", "np.int64(3)", "np.inf"]


@dataclass
class DtypeProgram:
    args: list[np.ndarray]
    expr: str
    elementwise: bool

    def source(self) -> str:
        names = ", ".join(f"a{k}" for k in range(len(self.args)))
        return f"def f({names}):\n    return {self.expr}\n"

    def reproducer(self) -> str:
        lines = ["import numpy as np", "import cofactor", "", self.source()]
        lines += [
            f"a{k} = np.array({a.tolist()!r}, dtype=np.{a.dtype})" for k, a in enumerate(self.args)
        ]
        names = ", ".join(f"a{k}" for k in range(len(self.args)))
        lines += [f"print(cofactor.qjit(f)({names}), f({names}))"]
        return "\n".join(lines)


@st.composite
def _argument(draw, shape: tuple[int, ...]) -> np.ndarray:
    dtype = draw(st.sampled_from(list(WIDENED)))
    size = int(np.prod(shape, dtype=int))
    flat = draw(st.lists(st.sampled_from(SPECIAL[dtype]), min_size=size, max_size=size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (inf into float32 / complex(inf) casts)
        return np.array(flat, dtype=dtype).reshape(shape)


@st.composite
def dtype_programs(draw) -> DtypeProgram:
    # 0-d, small (per-element) and large (in memory: loop nests) shapes that broadcast
    base = draw(st.sampled_from([(), (3,), (2, 3), (4, 6), (20,), (3, 1)]))
    n = draw(st.integers(1, 2))
    shapes = [base] + [draw(st.sampled_from([base, base[1:], ()])) for _ in range(n - 1)]
    args = [draw(_argument(s)) for s in shapes]
    names = [f"a{k}" for k in range(n)]
    operand = st.sampled_from(names + names + CONSTANTS)
    if draw(st.integers(0, 3)) == 0 and args[0].ndim:
        nd = args[0].ndim
        axis = draw(st.sampled_from([None, 0, -1, (0,) if nd else None]))
        keep = draw(st.booleans())
        a = "" if axis is None else f", axis={axis!r}"
        if keep and axis is not None:
            a += ", keepdims=True"
        c = "" if axis is None else f", axis={axis if isinstance(axis, int) else 0}"
        template = draw(st.sampled_from(REDUCTIONS))
        inner = draw(st.sampled_from(["a0", "(a0 * 2)", "(a0 > 0)", "(a0 // 2)", "(a0 + 0.5)"]))
        expr = template.format(inner, a=a, a0=a.lstrip(", "), c=c)
        return DtypeProgram(args, expr, elementwise=False)
    first = draw(st.sampled_from(ELEMENTWISE)).format(draw(st.sampled_from(names)), draw(operand))
    if draw(st.booleans()):
        first = draw(st.sampled_from(ELEMENTWISE)).format(f"({first})", draw(operand))
    return DtypeProgram(args, first, elementwise=True)


def _widened(dtype: np.dtype) -> np.dtype:
    """The dtype cofactor computes a numpy result dtype as (64 bits)."""
    kind = {"b": np.bool_, "i": np.int64, "u": np.int64, "f": np.float64, "c": np.complex128}
    return np.dtype(kind[dtype.kind])


def _numpy(p: DtypeProgram, args: list) -> object:
    scope: dict = {"np": np}
    exec(p.source(), scope)  # noqa: S102 (our own generated text)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return scope["f"](*args)


def check(p: DtypeProgram) -> None:
    widened = [a.astype(WIDENED[str(a.dtype)]) for a in p.args]
    try:
        want = _numpy(p, widened)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as e:
        note(f"numpy raises {type(e).__name__}: {e}")
        want = None
    if want is not None and np.asarray(want).dtype.kind not in "biufc":
        return  # (not a number)
    scope: dict = {"np": np}
    exec(p.source(), scope)  # noqa: S102
    if want is None:
        with pytest.raises(Exception):  # noqa: B017,PT011 (numpy's is any of several kinds)
            cofactor.qjit(scope["f"])(*p.args)
        return
    try:
        got = cofactor.qjit(scope["f"])(*p.args)
    except CompileError as e:  # a clear refusal (numpy.floor of a bool, complex ordering)
        note(f"refused: {e}")
        return
    want = np.asarray(want)
    # numpy computes np.exp of a bool in float16 and bool // bool in int8; cofactor in 64
    # bits: to the narrower dtype's precision
    rtol = max(RTOL, 4 * float(np.finfo(want.dtype).eps)) if want.dtype.kind in "fc" else RTOL
    want = want.astype(_widened(want.dtype))
    got = np.asarray(got)
    assert got.shape == want.shape, f"shape {got.shape}, numpy {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype}, numpy {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    if p.elementwise and want.dtype.kind == "f":
        zeros = want == 0
        assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), "sign of zero"


_settings = fuzz_settings(default_examples=30)


@_settings
@given(dtype_programs())
def test_dtype_programs_match_numpy(p: DtypeProgram) -> None:
    note(p.reproducer())
    check(p)
