"""A traced array behaves like an ndarray (issue 12, compatibility items 14 and 17).

Every compiled result is compared with numpy (or uncompiled PennyLane) on the same inputs;
gradients with `cofactor.grad` inside `qjit` are compared with central differences of the
numpy function.
"""

from __future__ import annotations

import copy

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import qjit
from cofactor.errors import CompileError

pytestmark = pytest.mark.needs_toolchain

X = np.array([0.3, -1.2, 2.5, 0.7])
M = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -4.0]])


def _same(got, ref, tol=1e-12):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got.astype(complex), ref.astype(complex), rtol=tol, atol=tol)


def _check(fn, *args, tol=1e-12):
    """fn compiled == fn under numpy, on copies of the arguments (fn may write into them)."""
    ref = fn(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
    got = qjit(fn)(*args)
    if isinstance(ref, tuple):
        assert len(got) == len(ref)
        for g, r in zip(got, ref, strict=True):
            _same(g, r, tol)
    else:
        _same(got, ref, tol)
    return got


def _central_diff(fn, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (fn(x + e) - fn(x - e)) / (2 * h)
    return out


# ----------------------------------------------------------------------------------------
# in-place operators and out=
# ----------------------------------------------------------------------------------------
def _inplace_chain(x):
    y = x * 1.0
    y += 2.0
    y *= x
    y -= 0.5
    y /= 3.0
    y **= 2
    y //= 0.25
    y %= 7.0
    return y


def _inplace_scalar(a):
    s = 0.0
    for k in range(3):
        s += a * k
        s *= 1.5
    s -= a
    s /= 2.0
    s **= 2
    return s


def test_inplace_operators_on_arrays_and_scalars():
    _check(_inplace_chain, X)
    _check(_inplace_scalar, 0.8)


def test_inplace_matmul_and_bitwise():
    def f(a, n):
        b = a * 1.0
        b @= np.eye(3)
        k = n * 1
        k &= 6
        k |= 1
        k ^= 3
        return b, k

    _check(f, np.eye(3) * 0.5 + 0.1, 7)


def test_inplace_on_a_traced_int_scalar_promotes_like_a_numpy_scalar():
    def f(n):
        n += 1
        n += 0.5  # a numpy scalar (and a Python int) becomes a float
        return n

    got = _check(f, 3)
    assert np.asarray(got).dtype == np.float64


def test_inplace_on_an_int_array_refuses_floats_as_numpy_does():
    def f(v):
        v += 0.5
        return v

    with pytest.raises(TypeError, match="same_kind"):
        f(np.array([1, 2]))
    with pytest.raises(TypeError, match="same_kind"):
        qjit(f)(np.array([1, 2]))


def test_inplace_shape_mismatch_is_numpy_error():
    def f(v):
        v += np.ones((2, 3))
        return v

    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        qjit(f)(np.ones(3))


def test_inplace_item_update_static_and_traced_index():
    def f(v, i):
        w = v * 1.0
        w[1] += 2.0
        w[i] *= -3.0
        w[-1] -= w[0]
        return w

    _check(f, X, 2)
    _check(f, X, -4)


def test_ufunc_out_writes_into_the_traced_array():
    def f(a, b):
        c = a * 0.0
        np.add(a, b, out=c)  # result ignored: c holds it, as in numpy
        r = np.multiply(c, 2.0, out=c)
        np.sin(a, out=(a,))
        return c, r, a

    _check(f, X, X[::-1].copy())


def test_ufunc_out_into_a_numpy_array_is_a_clear_error():
    def f(a):
        np.add(a, 1.0, out=np.zeros(4))
        return a

    with pytest.raises(CompileError, match=r"numpy.add\(\.\.\., out=\.\.\.\).*c = numpy.add"):
        qjit(f)(X)


def test_inplace_gradient():
    def loss(x):
        total = 0.0
        for k in range(3):
            total += np.sum(np.sin(x * (k + 1)))
        total *= 0.5
        return total

    g = qjit(lambda x: cofactor.grad(loss)(x))(X)
    _same(g, _central_diff(loss, X), 1e-7)


# ----------------------------------------------------------------------------------------
# copies, dtypes, complex parts, asarray
# ----------------------------------------------------------------------------------------
def test_copy_is_independent():
    def f(x):
        y = x.copy()
        y[0] = 5.0
        z = copy.deepcopy(x)
        z[1] = -5.0
        w = np.copy(x)
        w[2] = 9.0
        return x, y, z, w

    _check(f, X)


def test_astype_real_imag_conj():
    def f(x):
        z = x * (1.0 + 2.0j)
        return (
            x.astype(int),
            x.astype(np.complex128).imag,
            z.real,
            z.imag,
            z.conj(),
            np.conj(z),
            (x > 0).astype(float),
        )

    _check(f, X)


def test_qml_math_asarray_keeps_the_tracer_with_an_inexact_dtype():
    seen = {}

    def f(x):
        a = qml.math.asarray(x)
        seen["type"], seen["dtype"] = type(a).__name__, a.dtype
        eps = np.finfo(qml.math.asarray(x).dtype).eps
        return a * 2.0 + eps, qml.math.asarray(x, dtype=np.complex128) * 1j

    _check(f, X)
    assert seen == {"type": "Tracer", "dtype": np.dtype(np.float64)}


def test_np_asarray_of_a_tracer_computes():
    _check(lambda x: np.asarray(x) * 2.0 + np.array(x), X)


def test_np_asarray_and_array_return_the_tracer_with_its_dtype():
    seen = {}

    def f(x):
        a, b = np.asarray(x), np.array(x)
        seen["types"] = (type(a).__name__, type(b).__name__, type(np.asanyarray(x)).__name__)
        seen["dtype"] = a.dtype
        b[0] = 5.0  # np.array copies: x is unchanged
        eps = np.finfo(np.asarray(x).dtype).eps
        return (
            a * 2.0 + eps,
            b + x,
            np.asarray(x, dtype=complex) * 1j,
            np.asarray(x > 0.0, dtype=int) + 1,
            np.asarray(x).astype(float),
            np.array([x[0], 1.0, x[1]]) * 2.0,
            np.array(x[0], ndmin=2) + 1.0,
            np.asarray([1.0, 2.0, 3.0, 4.0]) + x[:4],
        )

    _check(f, X)
    assert seen == {"types": ("Tracer",) * 3, "dtype": np.dtype(np.float64)}


def test_pennylane_numpy_asarray_of_a_tracer():
    from pennylane import numpy as pnp

    _check(lambda x: pnp.asarray(x) * 2.0 + pnp.array(x), X)


# ----------------------------------------------------------------------------------------
# rounding, comparisons as traced bools, powers
# ----------------------------------------------------------------------------------------
R = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 1.2345, -2.675, 123.456])


@pytest.mark.parametrize("decimals", [0, 1, 2, -1])
def test_round_matches_numpy(decimals):
    def f(x):
        return np.round(x, decimals), np.around(x, decimals), x.round(decimals)

    _check(f, R, tol=0)


def test_round_ints_complex_and_python_round():
    def f(n, x):
        z = x + 1j * x[::-1]
        return np.round(n, -1), np.round(z, 1), round(x[2]), round(x[5], 2)

    _check(f, np.array([123, -155, 7]), R)


def test_round_of_bools_gives_numpy_values_as_float64():
    # numpy gives float16 for a bool array; cofactor's floats are float64 (docs/frontend.md)
    m = np.array([True, False, True])

    def f(m, b):
        return np.round(m), np.around(m, 0), m.round(), np.round(b), np.rint(m)

    got = qjit(f)(m, True)
    for g, ref in zip(got, f(m, np.True_), strict=True):
        assert np.asarray(ref).dtype == np.float16
        assert np.asarray(g).dtype == np.float64
        np.testing.assert_array_equal(g, ref)


@pytest.mark.parametrize("decimals", [1, -1])
def test_round_of_bools_with_decimals_raises_as_numpy(decimals):
    m = np.array([True, False])
    with pytest.raises(TypeError):
        np.round(m, decimals)
    with pytest.raises(TypeError, match=rf"decimals={decimals}.*boolean"):
        qjit(lambda m: np.round(m, decimals))(m)


def test_isclose_allclose_array_equal_are_traced_bools():
    a = np.array([1.0, np.inf, -np.inf, np.nan, 1e-9, 1.0])
    b = np.array([1.0 + 1e-9, np.inf, np.inf, np.nan, 0.0, 1.1])

    def f(a, b):
        return (
            np.isclose(a, b),
            np.isclose(a, b, equal_nan=True),
            np.isclose(a, 1.0, rtol=0.2),
            np.allclose(a[:2], b[:2]),
            np.allclose(a, b),
            np.allclose(a, a, equal_nan=True),
            np.array_equal(a, a),
            np.array_equal(a[:3], a[:3]),
            np.array_equal(a, b),
            np.array_equal(a, a, equal_nan=True),
            np.where(np.allclose(a[:1], b[:1]), 1.0, -1.0),
        )

    got = _check(f, a, b)
    assert np.asarray(got[3]).dtype == np.bool_


def test_array_equal_of_different_shapes_is_false():
    assert qjit(lambda x: np.array_equal(x, x[:2]) * 1.0)(X) == 0.0


def test_traced_bool_in_python_if_points_to_cond():
    def f(x):
        if np.allclose(x, 0.0):
            return x
        return -x

    with pytest.raises(CompileError, match="cofactor.cond"):
        qjit(f)(X)


@pytest.mark.parametrize("n", [0, 1, 5, 10, 31, 62, 63, 64, 70])
def test_int_power_with_traced_exponent(n):
    def f(n, b):
        return 2**n, 3**n, (-3) ** n, b**n, n**2, 2.0**n, 0.5**n

    with np.errstate(over="ignore"):  # numpy's int64 products wrap, as compiled code's do
        _check(f, np.int64(n), np.int64(-7))


@pytest.mark.parametrize("base", [2, 1, -1, 0])
def test_int_power_with_negative_traced_exponent_raises_as_numpy(base):
    # numpy raises for every base, also 1 and -1; the check runs in the compiled code
    def f(x, n):
        return x**n

    for n in (-1, -4):
        with pytest.raises(ValueError, match=r"Integers to negative integer powers") as numpy_error:
            f(np.int64(base), np.int64(n))
        with pytest.raises(ValueError, match=r"Integers to negative integer powers") as error:
            qjit(f)(base, n)
        assert str(error.value) == str(numpy_error.value)


def test_int_power_error_in_array_and_then_a_good_call():
    def f(n):
        return np.power(np.array([1, 2, 3]), n)

    compiled = qjit(f)
    with pytest.raises(ValueError, match=r"negative integer powers"):
        compiled(-2)
    # the error slot is cleared: the next call gives numpy's numbers
    np.testing.assert_array_equal(compiled(3), f(np.int64(3)))


def test_float_power_with_traced_int_exponent_gradient():
    def loss(x):
        return np.sum(x**3) + np.sum(np.abs(x) ** 2.5)

    def f(x, n):
        return x**n, cofactor.grad(loss)(x)

    got = qjit(f)(X, 3)
    _same(got[0], X**3)
    _same(got[1], _central_diff(loss, X), 1e-7)


# ----------------------------------------------------------------------------------------
# linalg.norm
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("ord_", [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5])
def test_vector_norms(ord_):
    _check(lambda x: np.linalg.norm(x, ord_), X)


@pytest.mark.parametrize("ord_", [None, "fro", 1, -1, np.inf, -np.inf])
def test_matrix_norms(ord_):
    _check(lambda m: (np.linalg.norm(m, ord_), np.linalg.norm(m, ord_, keepdims=True)), M)


def test_norm_axes_complex_and_gradient():
    def f(m):
        z = m * (1.0 - 0.5j)
        return (
            np.linalg.norm(m, axis=0),
            np.linalg.norm(m, 1, axis=1, keepdims=True),
            np.linalg.norm(z),
            np.linalg.norm(z[0], np.inf),
            np.linalg.norm(m[None], axis=(1, 2)),
            qml.math.linalg.norm(m[1]),
        )

    _check(f, M)
    g = qjit(lambda x: cofactor.grad(lambda y: np.linalg.norm(y))(x))(X)
    _same(g, X / np.linalg.norm(X), 1e-12)


def test_norm_needing_singular_values_is_refused():
    with pytest.raises(CompileError, match="ord=2.*singular values.*'fro'"):
        qjit(lambda m: np.linalg.norm(m, 2))(M)


# ----------------------------------------------------------------------------------------
# more ufuncs and functions PennyLane and users call on parameters
# ----------------------------------------------------------------------------------------
U = np.array([0.3, -0.8, 0.55, 0.1])

UFUNCS = {
    "fabs": np.fabs,
    "exp2": np.exp2,
    "hypot": lambda x: np.hypot(x, 0.7),
    "deg2rad": np.deg2rad,
    "rad2deg": np.rad2deg,
    "arcsinh": np.arcsinh,
    "arccosh": lambda x: np.arccosh(2.0 + x),
    "arctanh": np.arctanh,
    "trunc": lambda x: np.trunc(x * 3),
    "cbrt": np.cbrt,
    "logaddexp": lambda x: np.logaddexp(x, 0.2),
}


@pytest.mark.parametrize("name", sorted(UFUNCS))
def test_more_ufuncs_and_their_gradients(name):
    fn = UFUNCS[name]
    _check(fn, U, tol=1e-14)
    if name not in ("trunc", "cbrt"):  # piecewise constant / infinite slope at 0
        g = qjit(lambda x: cofactor.grad(lambda y: np.sum(fn(y)))(x))(U)
        _same(g, _central_diff(lambda y: np.sum(fn(y)), U), 1e-6)


def test_nan_inf_checks_and_nan_to_num():
    a = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])

    def f(a):
        z = a + 1j
        return (
            np.isnan(a),
            np.isinf(a),
            np.isfinite(a),
            np.isfinite(z),
            np.isnan(np.array([1, 2])),
            np.nan_to_num(a),
            np.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0),
        )

    _check(f, a)


def test_reductions_statistics_and_shapes():
    def f(x, m):
        b = x > 0
        return (
            np.any(b),
            np.all(b),
            b.any(),
            (m > 0).all(axis=0),
            np.any(m > 0, axis=1, keepdims=True),
            np.count_nonzero(b),
            np.count_nonzero(m > 0, axis=0),
            np.var(x),
            np.std(m, axis=1),
            x.std(ddof=1),
            np.cumprod(x),
            x.cumsum(),
            np.diff(x),
            np.diff(m, n=1, axis=0),
            np.triu(m),
            np.tril(m, -1),
            np.full_like(x, 2.5),
            np.full_like(x, x[0]),
            np.empty_like(m).shape == m.shape,
            x.clip(-1.0, 1.0),
            x.argmax(),
            x.argmin(),
            m.swapaxes(0, 1),
            m.trace(),
            m.diagonal(),
            x.repeat(2),
            x.take([0, 2]),
            x.itemsize * x.size == x.nbytes,
        )

    _check(f, X, M)


def test_qml_math_on_parameters():
    def f(x, m):
        return (
            qml.math.stack([x[0], x[1] * 2]),
            qml.math.concatenate([x, x[:2]]),
            qml.math.cast(x, np.complex128),
            qml.math.cast_like(x, 1j),
            qml.math.clip(x, -1, 1),
            qml.math.abs(x),
            qml.math.sign(x),
            qml.math.where(x > 0, x, 0.0),
            qml.math.kron(x[:2], x[2:]),
            qml.math.outer(x, x[:2]),
            qml.math.tensordot(m, m.T, axes=1),
            qml.math.einsum("ij,kj->ik", m, m),
            qml.math.allclose(x, x),
            qml.math.isclose(x, 0.3),
            qml.math.round(x, 1),
            qml.math.iscomplex(x * 1j),
            qml.math.real_if_close(x * (1.0 + 0j)),
            qml.math.convert_like(np.ones(4), x) * x,
            qml.math.sqrt(qml.math.abs(x)),
            qml.math.array([x[0], 1.0]),
            qml.math.any(x > 2),
            qml.math.all(x > -2),
        )

    _check(f, X, M)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_det_of_small_traced_matrices(n):
    rng = np.random.default_rng(n)
    real = rng.normal(size=(n, n))
    cplx = real + 1j * rng.normal(size=(n, n))

    def f(a, b):
        return np.linalg.det(a), qml.math.linalg.det(b), np.linalg.det(a @ a.T)

    _check(f, real, cplx, tol=1e-10)


@pytest.mark.parametrize(
    ("fn", "name"),
    [
        (lambda x: np.argsort(x), "numpy.argsort"),
        (lambda x: np.nonzero(x), "numpy.nonzero"),
        (lambda x: x.nonzero(), "numpy.nonzero"),
        (lambda x: np.linalg.det(np.ones((5, 5)) * x[0]), "numpy.linalg.det"),
        (lambda x: np.linalg.qr(np.outer(x, x)), "numpy.linalg.qr"),  # (eigh, svd: host now)
        (lambda x: np.unique(x), "numpy.unique"),
    ],
)
def test_refusals_name_the_function(fn, name):
    with pytest.raises(CompileError, match=name.replace(".", r"\.") + " is not supported"):
        qjit(fn)(X)


# ----------------------------------------------------------------------------------------
# PennyLane decompositions that compute on traced parameters (compatibility item 14)
# ----------------------------------------------------------------------------------------
H = qml.dot([0.4, -0.7, 0.25], [qml.X(0) @ qml.X(1), qml.Z(0), qml.Y(1)])


def _trotter(t):
    qml.Hadamard(0)
    qml.TrotterProduct(H, time=t, n=2, order=2)  # does `coeff *= base.scalar` on t
    return qml.expval(qml.Z(0) @ qml.Z(1) + qml.X(0))


def _exp_pauli(t):
    qml.Hadamard(0)
    qml.RY(0.3, 1)
    qml.exp(qml.Z(0) @ qml.X(1), -1j * t)
    qml.evolve(0.5 * qml.X(0) @ qml.Y(1), t)
    return qml.expval(qml.Y(0) @ qml.Z(1) + 0.5 * qml.X(1))


@pytest.mark.parametrize("circuit", [_trotter, _exp_pauli])
def test_pennylane_decompositions_with_traced_times_match_pennylane(circuit):
    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2))
    compiled = qml.QNode(circuit, qml.device("lightning.qubit", wires=2))
    value = qjit(compiled)
    grad = qjit(cofactor.grad(compiled))
    for t in (0.6, -1.3):
        assert float(value(t)) == pytest.approx(float(ref(t)), abs=1e-12)
        expected = qml.grad(ref)(qml.numpy.array(t, requires_grad=True))
        assert float(grad(t)) == pytest.approx(float(expected), abs=1e-9)


def test_a_concrete_value_asked_for_inside_pennylane_names_pennylane_code():
    # PennyLane's code testing a parameter's value (`if math.allclose(theta, 0):`) gets a
    # message naming that code, not advice to use cofactor.cond where the user cannot
    namespace = {"__name__": "pennylane.ops.fake_module", "np": np}
    source = "def decomposition(theta):\n    if np.allclose(theta, 0.0):\n        return 0\n"
    exec(compile(source, "fake_module.py", "exec"), namespace)  # noqa: S102

    def f(x):
        namespace["decomposition"](x)
        return x

    with pytest.raises(CompileError, match=r"PennyLane's decomposition \(pennylane.ops.fake"):
        qjit(f)(0.3)
    with pytest.raises(CompileError, match="cofactor.cond"):  # the user's own `if`
        qjit(lambda x: x if np.allclose(x, 0.0) else -x)(0.3)


def test_object_arrays_from_np_asarray_and_ufunc_outer():
    def f(x):
        a = np.asarray(x)  # an object ndarray of traced elements: numpy's object loops
        return np.arcsinh(a), np.hypot(a, 1.0), np.multiply.outer(x, x[:2]), np.add.outer(x, 1.0)

    _check(f, U, tol=1e-14)


_BOUND_ASARRAY = np.asarray  # bound before any trace: numpy's own function, not cofactor's


def test_np_asarray_with_a_numeric_dtype_says_what_to_use():
    # `np.asarray` looked up while tracing keeps the tracer; numpy's function bound earlier
    # (`from numpy import asarray`) must build an ndarray, which needs the values
    assert qjit(lambda x: np.asarray(x, dtype=float) * 2.0)(X) == pytest.approx(2.0 * X)
    with pytest.raises(CompileError, match=r"x.astype\(dtype\) or qml.math.asarray"):
        qjit(lambda x: _BOUND_ASARRAY(x, dtype=float))(X)
    with pytest.raises(CompileError, match=r"numpy.add.accumulate is not supported"):
        qjit(lambda x: np.add.accumulate(x))(X)


# ----------------------------------------------------------------------------------------
# JAX's functional updates, as Catalyst programs write them
# ----------------------------------------------------------------------------------------
def test_at_updates_return_new_arrays():
    def f(x, i):
        y = x.at[1].set(5.0)
        z = x.at[i].add(10.0)
        w = x.at[1:3].multiply(2.0).at[0].divide(4.0)
        m = x.at[:2].min(0.0).at[2:].max(1.0)
        return x, y, z, w, m, x.at[i].get(), x.at[-1].power(2.0).at[0].subtract(1.0)

    x = np.array([0.3, -1.2, 2.5, 0.7])
    y, z = x.copy(), x.copy()
    y[1] = 5.0
    z[2] += 10.0
    w = x.copy()
    w[1:3] *= 2.0
    w[0] /= 4.0
    m = x.copy()
    m[:2] = np.minimum(m[:2], 0.0)
    m[2:] = np.maximum(m[2:], 1.0)
    p = x.copy()
    p[-1] **= 2.0
    p[0] -= 1.0
    got = qjit(f)(x, 2)
    for g, r in zip(got, (x, y, z, w, m, x[2], p), strict=True):
        _same(g, r)
