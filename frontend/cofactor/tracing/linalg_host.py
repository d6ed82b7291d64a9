"""`numpy.linalg.solve` and `inv` of traced real matrices, run by numpy (LAPACK) in the
host process through a pure callback whose custom VJP gives Enzyme their derivatives.

The decompositions these need pivot on run-time values, which the compiled code does not
do (tracing/linalg.py); the quantum natural gradient step `p - eta * solve(g, grad)` of a
metric tensor computed in the program is the common case, with matrices of a few rows,
where a call into Python costs microseconds. Complex matrices stay refused (what the
cotangent of a complex solve means is a convention this module does not pick).

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileError
from cofactor.tracing.numpy_rules import FUNCTION_RULES, REFUSED_FUNCTIONS, as_tracer, cast_tracer
from cofactor.tracing.tracer import COMPLEX, FLOAT, Tracer


def _real_matrices(name: str, *arrays: Any) -> list[Tracer]:
    out = [as_tracer(a) for a in arrays]
    if any(t.dtype == COMPLEX for t in out):
        raise CompileError(
            f"numpy.linalg.{name} of a traced complex matrix is not supported by cofactor "
            "(real matrices are); compute it before qjit or inside cofactor.pure_callback"
        )
    a = out[0]
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise CompileError(
            f"numpy.linalg.{name}: expected one square matrix, got an array of shape {a.shape} "
            "(stacks of matrices are not supported on traced values)"
        )
    return [cast_tracer(t, FLOAT) for t in out]


def _host_call(fn: Any, bwd: Any, out_shape: tuple, args: list[Tracer]) -> Tracer:
    from cofactor.api_extensions.callbacks import PureCallback  # (api_extensions imports us)

    callback = PureCallback(fn, np.zeros(out_shape))
    callback.fwd(lambda *ins: (fn(*ins), ins))
    callback.bwd(bwd)
    return callback(*args)


def _solve(a: Any, b: Any) -> Tracer:
    a, b = _real_matrices("solve", a, b)
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise CompileError(
            f"numpy.linalg.solve: b of shape {b.shape} does not match a of shape {a.shape}"
        )

    def solve(a_value: np.ndarray, b_value: np.ndarray) -> np.ndarray:
        return np.linalg.solve(a_value, b_value)

    def solve_vjp(inputs: tuple, cotangent: np.ndarray) -> tuple:
        # x = a^-1 b: db = a^-T g, da = -db x^T
        a_value, b_value = inputs
        x = np.linalg.solve(a_value, b_value)
        db = np.linalg.solve(a_value.T, cotangent)
        da = -np.outer(db, x) if x.ndim == 1 else -db @ x.T
        return da, db

    solve.__name__ = "numpy.linalg.solve"
    return _host_call(solve, solve_vjp, b.shape, [a, b])


def _inv(a: Any) -> Tracer:
    [a] = _real_matrices("inv", a)

    def inv(a_value: np.ndarray) -> np.ndarray:
        return np.linalg.inv(a_value)

    def inv_vjp(inputs: tuple, cotangent: np.ndarray) -> tuple:
        x = np.linalg.inv(inputs[0])  # d(a^-1) = -a^-1 da a^-1
        return (-x.T @ cotangent @ x.T,)

    inv.__name__ = "numpy.linalg.inv"
    return _host_call(inv, inv_vjp, a.shape, [a])


FUNCTION_RULES.update({np.linalg.solve: _solve, np.linalg.inv: _inv})
for _ruled in (np.linalg.solve, np.linalg.inv):
    REFUSED_FUNCTIONS.pop(_ruled, None)
