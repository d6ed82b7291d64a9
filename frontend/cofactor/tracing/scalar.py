"""Traced scalars and the supported dtypes.

A `Scalar` is one traced number: one SSA value (an (re, im) pair for complex) with its dtype.
Object arrays of Scalars are how small traced arrays live (`tracer.Tracer`); numpy's object
loops call the Scalar's operators and its ufunc-named methods, each of which emits one
`arith`/`math` op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileError
from cofactor.tracing.concrete import _NoConcreteValue

COMPLEX = np.dtype(np.complex128)
FLOAT = np.dtype(np.float64)
INT = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def normalize_dtype(dtype: Any) -> np.dtype:
    """Map a numpy dtype onto the supported ones (float*->float64, int*->int64, ...)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return BOOL
    if dtype.kind in "iu":
        return INT
    if dtype.kind == "f":
        return FLOAT
    if dtype.kind == "c":
        return COMPLEX
    raise CompileError(f"cofactor does not support values of dtype {dtype}")


class Scalar(_NoConcreteValue):
    """One traced number: an SSA value (a pair of f64 for complex) and its dtype.

    `const` holds the Python value when the scalar is a known constant (used to fold, e.g.
    `x ** 2` into a multiplication). Scalars are valid numpy object-array elements: Python
    operators and the method names numpy's object loops call (`sin`, `exp`, ...) emit IR.
    """

    __slots__ = ("value", "dtype", "const")

    def __init__(self, value: Any, dtype: np.dtype, const: Any = None) -> None:
        self.value = value
        self.dtype = dtype
        self.const = const

    def __repr__(self) -> str:
        return f"Scalar({self.dtype}, {self.const if self.const is not None else '?'})"

    # Python operators and numpy object-loop methods all go through the ufunc rules.
    def _u(self, ufunc: np.ufunc, *others: Any) -> Any:
        from cofactor.tracing.numpy_api import scalar_ufunc

        return scalar_ufunc(ufunc, self, *others)

    def _r(self, ufunc: np.ufunc, other: Any) -> Any:
        from cofactor.tracing.numpy_api import scalar_ufunc

        return scalar_ufunc(ufunc, other, self)

    def __add__(self, o):  # noqa: D105
        return self._u(np.add, o)

    def __radd__(self, o):
        return self._r(np.add, o)

    def __sub__(self, o):
        return self._u(np.subtract, o)

    def __rsub__(self, o):
        return self._r(np.subtract, o)

    def __mul__(self, o):
        return self._u(np.multiply, o)

    def __rmul__(self, o):
        return self._r(np.multiply, o)

    def __truediv__(self, o):
        return self._u(np.true_divide, o)

    def __rtruediv__(self, o):
        return self._r(np.true_divide, o)

    def __floordiv__(self, o):
        return self._u(np.floor_divide, o)

    def __rfloordiv__(self, o):
        return self._r(np.floor_divide, o)

    def __mod__(self, o):
        return self._u(np.remainder, o)

    def __rmod__(self, o):
        return self._r(np.remainder, o)

    def __pow__(self, o):
        return self._u(np.power, o)

    def __rpow__(self, o):
        return self._r(np.power, o)

    def __neg__(self):
        return self._u(np.negative)

    def __pos__(self):
        return self

    def __abs__(self):
        return self._u(np.absolute)

    def __lt__(self, o):
        return self._u(np.less, o)

    def __le__(self, o):
        return self._u(np.less_equal, o)

    def __gt__(self, o):
        return self._u(np.greater, o)

    def __ge__(self, o):
        return self._u(np.greater_equal, o)

    def __eq__(self, o):  # type: ignore[override]
        return self._u(np.equal, o)

    def __ne__(self, o):  # type: ignore[override]
        return self._u(np.not_equal, o)

    def __and__(self, o):
        return self._u(np.bitwise_and, o)

    def __rand__(self, o):
        return self._r(np.bitwise_and, o)

    def __or__(self, o):
        return self._u(np.bitwise_or, o)

    def __ror__(self, o):
        return self._r(np.bitwise_or, o)

    def __xor__(self, o):
        return self._u(np.bitwise_xor, o)

    def __invert__(self):
        return self._u(np.invert)

    __hash__ = object.__hash__

    # A Scalar is an immutable SSA value: copies (PennyLane deep-copies operators and their
    # parameters) are the Scalar itself, never a copy of the IR.
    def __copy__(self) -> Scalar:
        return self

    def __deepcopy__(self, memo: dict) -> Scalar:
        return self

    def __round__(self, ndigits: int | None = None) -> Any:
        from cofactor.tracing.tracer import Tracer

        return Tracer(objarr0(self), self.dtype).__round__(ndigits)

    def conjugate(self):
        return self._u(np.conjugate)

    @property
    def real(self):
        from cofactor.tracing.numpy_api import scalar_real

        return scalar_real(self)

    @property
    def imag(self):
        from cofactor.tracing.numpy_api import scalar_imag

        return scalar_imag(self)


def _object_loop_method(ufunc: np.ufunc):
    def method(self, *others):
        return self._u(ufunc, *others)

    method.__name__ = ufunc.__name__
    return method


# numpy's object loops call `element.<ufunc name>()` for the math ufuncs.
for _uf in (
    np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh, np.tanh,
    np.exp, np.expm1, np.log, np.log1p, np.log2, np.log10, np.sqrt, np.floor, np.ceil,
    np.arctan2, np.square, np.absolute, np.sign, np.rint, np.conjugate, np.fabs, np.exp2,
    np.hypot, np.deg2rad, np.rad2deg, np.radians, np.degrees, np.arcsinh, np.arccosh,
    np.arctanh, np.trunc, np.cbrt, np.logaddexp,
):  # fmt: skip
    setattr(Scalar, _uf.__name__, _object_loop_method(_uf))
Scalar.conj = Scalar.conjugate


def objarr0(x: Any) -> np.ndarray:
    """A 0-d object array holding x (numpy would unpack a sequence)."""
    out = np.empty((), dtype=object)
    out[()] = x
    return out
