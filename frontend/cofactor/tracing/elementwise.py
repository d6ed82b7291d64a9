"""Elementwise numpy functions on tracers that are not ufuncs: `round`/`around`, `fix`,
`real_if_close`, `nan_to_num` (the ufuncs' element rules are in `element_rules`).

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES` (`numpy_api`
imports it before any numpy function reaches a tracer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileTypeError
from cofactor.tracing.numpy_rules import (
    FUNCTION_RULES,
    as_tracer,
    cast_tracer,
)
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Tracer


def _round(a: Any, decimals: int = 0, out: Any = None) -> Tracer:
    """numpy.round: `rint(x * 10**d) / 10**d` (numpy's own formula, so the same ties)."""
    if out is not None:
        raise CompileError("numpy.round(..., out=...) on traced values: write `y = np.round(x)`")
    t = as_tracer(a)
    decimals = int(decimals)
    if t.dtype == COMPLEX:
        return _round(np.real(t), decimals) + 1j * _round(np.imag(t), decimals)
    if t.dtype == BOOL:
        if decimals != 0:  # numpy scales by 10**decimals in the bool dtype, and fails
            raise CompileTypeError(
                f"numpy.round(x, decimals={decimals}) of a boolean x: numpy raises "
                "UFuncTypeError (cannot cast 'multiply' output from float64 to bool); "
                "cast first: np.round(x.astype(float), decimals)"
            )
        # numpy: float16 (as for np.sin of booleans); cofactor computes floats in float64,
        # so the values are numpy's and the dtype is float64 (docs/frontend.md)
        t = cast_tracer(t, FLOAT)
    elif decimals >= 0 and t.dtype == INT:
        return t.copy()  # (numpy: a new array, which `+=` must not write through)
    if t.dtype == INT:
        return cast_tracer(_round(cast_tracer(t, FLOAT), decimals), INT)
    if decimals == 0:
        return np.rint(t)
    if decimals > 0:
        scale = 10.0**decimals
        return np.true_divide(np.rint(np.multiply(t, scale)), scale)
    scale = 10.0 ** (-decimals)
    return np.multiply(np.rint(np.true_divide(t, scale)), scale)


FUNCTION_RULES.update({np.round: _round, np.around: _round})


def _real_if_close(a: Any, tol: float = 100) -> Tracer:
    """numpy.real_if_close picks its result's dtype from the values, which a traced value
    does not have yet; cofactor returns the real part of a traced complex array, which is
    what PennyLane does under Catalyst (`math.real` on the JAX path, e.g. when `qml.exp` of
    a Pauli word becomes a PauliRot)."""
    t = as_tracer(a)
    return np.real(t) if t.dtype == COMPLEX else t


def _nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None,
                neginf: Any = None) -> Tracer:  # fmt: skip
    t = as_tracer(x)
    if t.dtype == COMPLEX:
        parts = (np.real(t), np.imag(t))
        re, im = (_nan_to_num(p, nan=nan, posinf=posinf, neginf=neginf) for p in parts)
        return re + 1j * im
    if t.dtype != FLOAT:
        return t.copy()  # (numpy: a new array)
    big = np.finfo(np.float64).max
    hi = big if posinf is None else float(posinf)
    lo = -big if neginf is None else float(neginf)
    t = np.where(np.isnan(t), float(nan), t)
    return np.where(np.isinf(t), np.where(t > 0, hi, lo), t)


FUNCTION_RULES.update(
    {
        np.real_if_close: _real_if_close,
        np.nan_to_num: _nan_to_num,
        np.fix: lambda x, out=None: np.trunc(x),
    }
)
