"""Linear algebra on tracers: products (`dot`, `inner`, `outer`, `kron`, `tensordot`,
`einsum`, `vdot`, `trace`) run numpy on the object arrays of Scalars (`dot`, `outer` and `einsum` of
large arrays in memory are loop nests: `array_rules`); `numpy.linalg` norms; `det` of a
matrix up to 4x4 by cofactor (Laplace) expansion, which needs no pivoting (PennyLane's
BasisRotation takes the determinant of its unitary). Decompositions (`eig`, `svd`, `inv`,
larger `det`, ...) need pivoting on run-time values and are refused with a CompileError.

Importing this module registers its rules in `numpy_rules.FUNCTION_RULES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.errors import CompileError
from cofactor.tracing import array_rules
from cofactor.tracing.numpy_rules import (
    FUNCTION_RULES,
    REFUSED_FUNCTIONS,
    _as_elems,
    _wrap,
    as_tracer,
    cast_tracer,
)
from cofactor.tracing.tracer import COMPLEX, FLOAT, Tracer, normalize_dtype


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    t = as_tracer(a)
    diag = np.diagonal(t.elems, offset, axis1, axis2)
    return _wrap(np.sum(diag, axis=-1)) if diag.shape[-1] else np.zeros(diag.shape[:-1], t.dtype)


def _typed(result: Any, *operands: Any) -> Tracer:
    """numpy's result of a product on the object arrays, with numpy's dtype: an empty result,
    or sums over an empty axis (Python 0s), would otherwise read as float / int."""
    t = _wrap(result)
    want = normalize_dtype(np.result_type(*[as_tracer(o).dtype for o in operands]))
    return t if t.dtype == want else cast_tracer(t, want)


def _kron(a, b):
    return _typed(np.kron(_as_elems(a), _as_elems(b)), a, b)


def _dot(a, b, **kw):
    looped = array_rules.dot(a, b) if not kw else None
    if looped is not None:
        return looped
    return _typed(np.dot(_as_elems(a), _as_elems(b)), a, b)


def _tensordot(a, b, axes=2):
    return _typed(np.tensordot(_as_elems(a), _as_elems(b), axes=axes), a, b)


def _einsum(subscripts, *operands, **kw):
    if not isinstance(subscripts, str):
        raise CompileError("numpy.einsum needs a subscripts string")
    looped = array_rules.einsum(subscripts, *operands) if not kw else None
    if looped is not None:
        return looped
    return _typed(np.einsum(subscripts, *[_as_elems(o) for o in operands], dtype=object), *operands)


def _outer(a, b, **kw):
    looped = array_rules.outer(a, b) if not kw else None
    if looped is not None:
        return looped
    return _typed(np.outer(_as_elems(a), _as_elems(b)), a, b)


def _inner(a, b):
    return _typed(np.inner(_as_elems(a), _as_elems(b)), a, b)


def _vdot(a, b):
    # (numpy's vdot conjugates the first operand's elements itself, object arrays too:
    # conjugating them here as well gave sum(a * b) for complex `a`)
    return _wrap(np.vdot(_as_elems(a), _as_elems(b)))


def _abs(t: Tracer) -> Tracer:
    return np.abs(t) if t.dtype == COMPLEX else np.abs(cast_tracer(t, FLOAT))


def _vector_norm(t: Tracer, ord: Any, axis: int, keepdims: bool) -> Tracer:
    if ord is None or ord == 2:
        sq = np.real(t * np.conj(t)) if t.dtype == COMPLEX else cast_tracer(t, FLOAT) ** 2
        return np.sqrt(np.sum(sq, axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise CompileError(f"numpy.linalg.norm: invalid norm order {ord!r} for vectors")
    a = _abs(t)
    if ord == np.inf:
        return np.max(a, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return np.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return cast_tracer(np.count_nonzero(t, axis=axis, keepdims=keepdims), FLOAT)
    if ord == 1:
        return np.sum(a, axis=axis, keepdims=keepdims)
    p = float(ord)
    return np.sum(a**p, axis=axis, keepdims=keepdims) ** (1.0 / p)


def _matrix_norm(t: Tracer, ord: Any, axes: tuple[int, int], keepdims: bool) -> Tracer:
    r, c = axes
    if ord in (None, "fro"):
        sq = np.real(t * np.conj(t)) if t.dtype == COMPLEX else cast_tracer(t, FLOAT) ** 2
        out = np.sqrt(np.sum(sq, axis=axes, keepdims=keepdims))
        return out
    pick = {1: (r, c, np.max), -1: (r, c, np.min), np.inf: (c, r, np.max)}
    pick[-np.inf] = (c, r, np.min)
    if ord not in pick:
        raise CompileError(
            f"numpy.linalg.norm with ord={ord!r} on a traced matrix needs singular values, "
            "which cofactor does not compute; use ord='fro', 1 or inf"
        )
    # numpy's formula: sum |x| over one axis, then the max/min over the other
    sum_axis, ext_axis, ext = pick[ord]
    if ext_axis > sum_axis:
        ext_axis -= 1
    out = ext(np.sum(_abs(t), axis=sum_axis), axis=ext_axis)
    if keepdims:
        for ax in sorted(axes):
            out = np.expand_dims(out, ax)
    return out


def _norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tracer:
    """numpy.linalg.norm: vector norms (any ord), matrix norms 'fro', 1, -1, inf, -inf."""
    t = as_tracer(x)
    if axis is None:
        if ord is None:  # numpy: the 2-norm of the flattened array, whatever its ndim
            out = _vector_norm(np.reshape(t, (-1,)), None, 0, False)
            return np.reshape(out, (1,) * t.ndim) if keepdims else out
        if t.ndim == 1:
            return _vector_norm(t, ord, 0, keepdims)
        if t.ndim == 2:
            return _matrix_norm(t, ord, (0, 1), keepdims)
        raise CompileError("numpy.linalg.norm: improper number of dimensions to norm")
    axes = tuple(int(a) % t.ndim for a in np.atleast_1d(axis))
    if len(axes) == 1:
        return _vector_norm(t, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(t, ord, axes, keepdims)
    raise CompileError("numpy.linalg.norm: improper number of dimensions to norm")


#: largest traced matrix whose determinant is expanded (n! products: 24 at n = 4)
MAX_DET_EXPANSION = 4


def _det(a):
    t = as_tracer(a)
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise CompileError(
            f"numpy.linalg.det of a traced array of shape {t.shape}: cofactor computes the "
            "determinant of one square matrix"
        )
    n = t.shape[0]
    if n > MAX_DET_EXPANSION:
        raise CompileError(
            f"numpy.linalg.det is not supported on a traced {n}x{n} matrix by cofactor (up "
            f"to {MAX_DET_EXPANSION}x{MAX_DET_EXPANSION}): {_DECOMPOSITION_HINT}"
        )
    if n == 0:
        return as_tracer(np.array(1.0, dtype=t.dtype if t.dtype == COMPLEX else FLOAT))
    t = cast_tracer(t, COMPLEX if t.dtype == COMPLEX else FLOAT)

    def expand(rows: tuple[int, ...], cols: tuple[int, ...]) -> Any:
        if len(rows) == 1:
            return t[rows[0], cols[0]]
        total = None
        for k, c in enumerate(cols):
            minor = expand(rows[1:], cols[:k] + cols[k + 1 :])
            term = t[rows[0], c] * minor
            total = term if total is None else (total - term if k % 2 else total + term)
        return total

    return expand(tuple(range(n)), tuple(range(n)))


_DECOMPOSITION_HINT = (
    "it needs pivoting on run-time values. Compute it before qjit (a static argument) or "
    "inside cofactor.pure_callback"
)
FUNCTION_RULES.update(
    {
        np.linalg.norm: _norm,
        np.dot: _dot,
        np.vdot: _vdot,
        np.inner: _inner,
        np.outer: _outer,
        np.tensordot: _tensordot,
        np.einsum: _einsum,
        np.kron: _kron,
        np.trace: _trace,
        np.linalg.det: _det,
    }
)
REFUSED_FUNCTIONS.update(
    {
        getattr(np.linalg, n): _DECOMPOSITION_HINT
        for n in ("inv", "eig", "eigh", "eigvals", "eigvalsh", "svd", "qr", "solve")
    }
)
