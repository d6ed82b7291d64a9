"""`numpy.linalg.solve`, `inv`, `pinv`, `eigh`, `eigvalsh` and `svd` (and `eig`/`eigvals`,
values only) of traced real matrices, run by numpy (LAPACK) in the host process through a
pure callback whose custom VJP gives Enzyme their derivatives (and `np.polyfit` of traced
values at constant points: a constant pseudo-inverse times them).

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
from cofactor.tracing.tracer import COMPLEX, FLOAT, Scalar, Tracer


def _real_matrices(name: str, *arrays: Any, square: bool = True) -> list[Tracer]:
    out = [as_tracer(a) for a in arrays]
    if any(t.dtype == COMPLEX for t in out):
        raise CompileError(
            f"numpy.linalg.{name} of a traced complex matrix is not supported by cofactor "
            "(real matrices are); compute it before qjit or inside cofactor.pure_callback"
        )
    a = out[0]
    if a.ndim != 2 or (square and a.shape[0] != a.shape[1]):
        raise CompileError(
            f"numpy.linalg.{name}: expected one {'square ' if square else ''}matrix, got an "
            f"array of shape {a.shape} (stacks of matrices are not supported on traced values)"
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


def _pinv(a: Any, *args: Any, **kwargs: Any) -> Tracer:
    if args or kwargs:
        raise CompileError(
            "numpy.linalg.pinv of a traced matrix: rcond/rtol/hermitian are not supported by "
            "cofactor (the default cut-off is); call it as np.linalg.pinv(a)"
        )
    [a] = _real_matrices("pinv", a, square=False)

    def pinv(a_value: np.ndarray) -> np.ndarray:
        return np.linalg.pinv(a_value)

    def pinv_vjp(inputs: tuple, cotangent: np.ndarray) -> tuple:
        # the derivative of X = A+ where the rank does not change (Golub & Pereyra):
        # dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X, transposed term by term
        a_value = inputs[0]
        x = np.linalg.pinv(a_value)
        g = cotangent
        left = np.eye(a_value.shape[0]) - a_value @ x
        right = np.eye(a_value.shape[1]) - x @ a_value
        return (-x.T @ g @ x.T + left @ g.T @ x @ x.T + x.T @ x @ g.T @ right,)

    pinv.__name__ = "numpy.linalg.pinv"
    return _host_call(pinv, pinv_vjp, a.shape[::-1], [a])


def _symmetric_vjp(w: np.ndarray, v: np.ndarray, gw: np.ndarray, gv: np.ndarray | None) -> Any:
    """The cotangent of a symmetric matrix from those of its eigenvalues w and eigenvectors v
    (distinct eigenvalues); symmetric, as autograd's and JAX's (which read a symmetric input)."""
    inner = np.diag(gw)
    if gv is not None:
        gap = w[np.newaxis, :] - w[:, np.newaxis]
        np.fill_diagonal(gap, np.inf)
        inner = inner + (v.T @ gv) / gap
    grad = v @ inner @ v.T
    return (grad + grad.T) / 2


def _uplo(name: str, kwargs: dict) -> None:
    if kwargs.get("UPLO", "L") != "L" or len(kwargs) > ("UPLO" in kwargs):
        raise CompileError(
            f"numpy.linalg.{name} of a traced matrix: only the default UPLO='L' is supported "
            "by cofactor"
        )


def _complex_hermitian(name: str, a: Any) -> Tracer | None:
    """A traced complex square matrix (a density matrix), else None."""
    t = as_tracer(a)
    if t.dtype != COMPLEX:
        return None
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise CompileError(f"numpy.linalg.{name}: expected one square matrix, got {t.shape}")
    return t


def _forward_only(name: str, fn: Any, result: Any, a: Tracer, why: str) -> Any:
    """A host call without a derivative: differentiating through it is refused by name,
    saying `why` and the way out."""
    from cofactor.api_extensions.callbacks import PureCallback

    fn.__name__ = name
    callback = PureCallback(fn, result)
    callback.no_gradient_reason = (
        f"{why}; compute it outside the differentiated function, or differentiate with "
        'method="fd" (finite differences)'
    )
    return callback(a)


_COMPLEX_COTANGENT = (
    "cofactor has no derivative of it for complex matrices (what the cotangent of a complex "
    "matrix means is a convention it does not pick)"
)


def _hermitian_forward_only(name: str, fn: Any, result: Any, a: Tracer) -> Any:
    """eigh/eigvalsh of a complex Hermitian matrix (`qml.math.vn_entropy` of a density
    matrix): values only."""
    return _forward_only(
        f"numpy.linalg.{name} (complex Hermitian)", fn, result, a, _COMPLEX_COTANGENT
    )


def _eigvalsh(a: Any, **kwargs: Any) -> Tracer:
    _uplo("eigvalsh", kwargs)
    hermitian = _complex_hermitian("eigvalsh", a)
    if hermitian is not None:
        n = hermitian.shape[0]
        return _hermitian_forward_only(
            "eigvalsh", lambda m: np.linalg.eigvalsh(m), np.zeros(n), hermitian
        )
    [a] = _real_matrices("eigvalsh", a)

    def eigvalsh(a_value: np.ndarray) -> np.ndarray:
        return np.linalg.eigvalsh(a_value)

    def eigvalsh_vjp(inputs: tuple, cotangent: np.ndarray) -> tuple:
        w, v = np.linalg.eigh(inputs[0])
        return (_symmetric_vjp(w, v, cotangent, None),)

    eigvalsh.__name__ = "numpy.linalg.eigvalsh"
    return _host_call(eigvalsh, eigvalsh_vjp, a.shape[:1], [a])


def _eigh(a: Any, **kwargs: Any) -> Any:
    from cofactor.api_extensions.callbacks import PureCallback

    _uplo("eigh", kwargs)
    hermitian = _complex_hermitian("eigh", a)
    if hermitian is not None:
        n = hermitian.shape[0]
        result = (np.zeros(n), np.zeros((n, n), dtype=complex))
        w, v = _hermitian_forward_only(
            "eigh", lambda m: tuple(np.linalg.eigh(m)), result, hermitian
        )
        return _eigh_result(w, v)
    [a] = _real_matrices("eigh", a)

    def eigh(a_value: np.ndarray) -> tuple:
        w, v = np.linalg.eigh(a_value)
        return w, v

    def eigh_vjp(inputs: tuple, cotangents: tuple) -> tuple:
        w, v = np.linalg.eigh(inputs[0])
        gw, gv = cotangents
        return (_symmetric_vjp(w, v, np.asarray(gw), np.asarray(gv)),)

    eigh.__name__ = "numpy.linalg.eigh"
    n = a.shape[0]
    callback = PureCallback(eigh, (np.zeros(n), np.zeros((n, n))))
    callback.fwd(lambda *ins: (eigh(*ins), ins))
    callback.bwd(eigh_vjp)
    return _eigh_result(*callback(a))


def _eigh_result(w: Any, v: Any) -> Any:
    """numpy's result of eigh: a namedtuple (`.eigenvalues`, `.eigenvectors`) in numpy 2, a
    plain tuple before; namedtuples are pytree nodes, so it can be a compiled result too."""
    kind = type(np.linalg.eigh(np.eye(1)))
    return (w, v) if kind is tuple else kind(w, v)


def _svd_vjp(a: np.ndarray, cotangents: tuple) -> np.ndarray:
    """The cotangent of a real matrix from those of its thin SVD U S Vh (distinct non-zero
    singular values; Townsend, "Differentiating the Singular Value Decomposition", 2016)."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    k = s.size
    gu, gs, gvh = (np.asarray(g) for g in cotangents)
    gu, gv, v = gu[:, :k], gvh[:k, :].T, vh.T  # (full_matrices: the extra columns' rows are 0)
    s2 = s**2
    gap = s2[np.newaxis, :] - s2[:, np.newaxis]
    np.fill_diagonal(gap, np.inf)
    f = 1.0 / gap
    ut_gu, vt_gv = u.T @ gu, v.T @ gv
    inner = (f * (ut_gu - ut_gu.T)) * s + np.diag(gs) + s[:, np.newaxis] * (f * (vt_gv - vt_gv.T))
    grad = u @ inner @ vh
    grad += (np.eye(a.shape[0]) - u @ u.T) @ (gu / s) @ vh
    grad += (u / s) @ gv.T @ (np.eye(a.shape[1]) - v @ vh)
    return grad


def _svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    from cofactor.api_extensions.callbacks import PureCallback

    if hermitian:
        raise CompileError(
            "numpy.linalg.svd of a traced matrix: hermitian=True is not supported by cofactor; "
            "call it with the default hermitian=False (or use np.linalg.eigh)"
        )
    [a] = _real_matrices("svd", a, square=False)
    m, n = a.shape
    k = min(m, n)
    if not compute_uv:

        def singular_values(a_value: np.ndarray) -> np.ndarray:
            return np.linalg.svd(a_value, compute_uv=False)

        def singular_values_vjp(inputs: tuple, cotangent: np.ndarray) -> tuple:
            u, _, vh = np.linalg.svd(inputs[0], full_matrices=False)
            return ((u * cotangent) @ vh,)

        singular_values.__name__ = "numpy.linalg.svd"
        return _host_call(singular_values, singular_values_vjp, (k,), [a])
    full = bool(full_matrices)

    def svd(a_value: np.ndarray) -> tuple:
        return tuple(np.linalg.svd(a_value, full_matrices=full))

    def svd_vjp(inputs: tuple, cotangents: tuple) -> tuple:
        if full and m != n:  # (as JAX: the extra columns are any basis of a complement)
            raise ValueError(
                "the derivative of numpy.linalg.svd(a, full_matrices=True) of a non-square "
                "matrix is not defined (its extra singular vectors are not unique): call it "
                "with full_matrices=False"
            )
        return (_svd_vjp(inputs[0], cotangents),)

    svd.__name__ = "numpy.linalg.svd"
    shapes = ((m, m if full else k), (k,), (n if full else k, n))
    callback = PureCallback(svd, tuple(np.zeros(shape) for shape in shapes))
    callback.fwd(lambda *ins: (svd(*ins), ins))
    callback.bwd(svd_vjp)
    u, s, vh = callback(a)
    kind = type(np.linalg.svd(np.eye(1)))
    return (u, s, vh) if kind is tuple else kind(u, s, vh)


def _eig(a: Any) -> Any:
    """eig of a traced real matrix: eigenvalues and eigenvectors always complex (as JAX's
    `jnp.linalg.eig`, which Catalyst programs call; numpy's dtype depends on the values),
    values only (a derivative through it is refused by name)."""
    [a] = _real_matrices("eig", a)
    n = a.shape[0]

    def eig(a_value: np.ndarray) -> tuple:
        w, v = np.linalg.eig(a_value)
        return w.astype(complex), v.astype(complex)

    result = (np.zeros(n, complex), np.zeros((n, n), complex))
    w, v = _forward_only("numpy.linalg.eig", eig, result, a, _NON_SYMMETRIC)
    kind = type(np.linalg.eig(np.eye(1)))
    return (w, v) if kind is tuple else kind(w, v)


def _eigvals(a: Any) -> Any:
    """eigvals of a traced real matrix: complex, as `_eig`'s."""
    [a] = _real_matrices("eigvals", a)

    def eigvals(a_value: np.ndarray) -> np.ndarray:
        return np.linalg.eigvals(a_value).astype(complex)

    result = np.zeros(a.shape[0], complex)
    return _forward_only("numpy.linalg.eigvals", eigvals, result, a, _NON_SYMMETRIC)


_NON_SYMMETRIC = (
    "cofactor has no derivative of the eigen-decomposition of a non-symmetric matrix (its "
    "results are complex); for a symmetric matrix use np.linalg.eigh / eigvalsh, which are "
    "differentiable"
)


def _polyfit(x: Any, y: Any, deg: Any, *args: Any, **kwargs: Any) -> Tracer:
    """`np.polyfit(x, y, deg)` with constant sample points x (a zero-noise extrapolation's
    scale factors): the least-squares coefficients are linear in y, `pinv(vander(x)) @ y`,
    so only a product with a constant matrix is compiled."""
    if args or kwargs:
        raise CompileError(
            "numpy.polyfit of traced values: rcond/full/w/cov are not supported by cofactor; "
            "call it as np.polyfit(x, y, deg)"
        )
    if isinstance(x, Tracer | Scalar) or isinstance(deg, Tracer | Scalar):
        raise CompileError(
            "numpy.polyfit with traced sample points x (or degree) is not supported by "
            "cofactor (only traced y); compute it before qjit or inside cofactor.pure_callback"
        )
    vander = np.vander(np.asarray(x, dtype=float), int(deg) + 1)
    return as_tracer(np.linalg.pinv(vander)) @ cast_tracer(as_tracer(y), FLOAT)


FUNCTION_RULES.update(
    {
        np.polyfit: _polyfit,
        np.linalg.solve: _solve,
        np.linalg.inv: _inv,
        np.linalg.pinv: _pinv,
        np.linalg.eigvalsh: _eigvalsh,
        np.linalg.eigh: _eigh,
        np.linalg.svd: _svd,
        np.linalg.eig: _eig,
        np.linalg.eigvals: _eigvals,
    }
)
for _ruled in (
    np.polyfit,
    np.linalg.solve,
    np.linalg.inv,
    np.linalg.pinv,
    np.linalg.eigvalsh,
    np.linalg.eigh,
    np.linalg.svd,
    np.linalg.eig,
    np.linalg.eigvals,
):
    REFUSED_FUNCTIONS.pop(_ruled, None)
