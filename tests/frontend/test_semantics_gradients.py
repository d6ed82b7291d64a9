"""Catalyst's differentiation semantics (compatibility items 10-12): argnums in any order,
method="fd" as Catalyst's forward difference (method="central" as an option), and the
exception types Catalyst raises for invalid programs (cond branches, jvp/vjp arguments,
non-differentiable targets, method/argnums)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import (
    DifferentiableCompileError,
    cond,
    grad,
    jacobian,
    jvp,
    qjit,
    value_and_grad,
    vjp,
)

pytestmark = pytest.mark.needs_toolchain


def _f(x, y, z):
    return x * y**2 + np.sin(z) * x


def _df(x, y, z):  # (d/dx, d/dy, d/dz)
    return (y**2 + np.sin(z), 2 * x * y, np.cos(z) * x)


ARGS = (0.7, -1.3, 0.4)


# ----------------------------------------------------------------------------------------
# argnums (item 11)
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("argnums", [[1, 0, 2], (2, 0), [2, 1, 0], (1, 1), [0, 2, 0]])
def test_grad_argnums_in_any_order(argnums):
    @qjit
    def g(x, y, z):
        return grad(_f, argnums=argnums)(x, y, z)

    got = g(*ARGS)
    exact = _df(*ARGS)
    assert isinstance(got, tuple) and len(got) == len(argnums)
    np.testing.assert_allclose(got, [exact[n] for n in argnums], atol=1e-12)


def test_value_and_grad_jacobian_vjp_jvp_argnums_order():
    def h(x, y):
        return np.array([x[0] * y, x[1] + y**2])

    @qjit
    def g(x, y):
        return (
            value_and_grad(lambda x, y: x[0] * y + x[1], argnums=[1, 0])(x, y),
            jacobian(h, argnums=(1, 0))(x, y),
            vjp(h, [x, y], [np.array([1.0, 2.0])], argnums=[1, 0]),
            jvp(h, [x, y], [0.5, np.array([1.0, -1.0])], argnums=[1, 0]),
        )

    x, y = np.array([0.3, 0.9]), 1.5
    (v, (gy, gx)), (jy, jx), (_, (vy, vx)), (_, tangent_out) = g(x, y)
    assert v == pytest.approx(x[0] * y + x[1])
    assert gy == pytest.approx(x[0]) and np.allclose(gx, [y, 1.0])
    np.testing.assert_allclose(jy, [x[0], 2 * y])
    np.testing.assert_allclose(jx, [[y, 0.0], [0.0, 1.0]])
    assert vy == pytest.approx(x[0] + 4 * y)
    np.testing.assert_allclose(vx, [y, 2.0])
    np.testing.assert_allclose(tangent_out, [x[0] * 0.5 + y * 1.0, 2 * y * 0.5 - 1.0])


def test_qnode_gradient_argnums_order_matches_pennylane():
    dev = qml.device("lightning.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(a, b, c):
        qml.RX(a, wires=0)
        qml.RY(b, wires=1)
        qml.CNOT([0, 1])
        qml.RZ(c, wires=1)
        qml.RX(c * a, wires=1)
        return qml.expval(qml.Z(1))

    @qjit
    def g(a, b, c):
        return grad(circuit, argnums=[2, 0, 1])(a, b, c)

    a, b, c = (qml.numpy.array(v, requires_grad=True) for v in (0.4, 1.1, -0.6))
    ref = qml.grad(circuit, argnums=[0, 1, 2])(a, b, c)
    np.testing.assert_allclose(g(0.4, 1.1, -0.6), [ref[2], ref[0], ref[1]], atol=1e-10)


# ----------------------------------------------------------------------------------------
# finite differences (item 12)
# ----------------------------------------------------------------------------------------
def test_fd_is_a_forward_difference_with_the_given_h():
    @qjit
    def g(x):
        return (
            grad(lambda x: x**2, method="fd", h=1e-3)(x),
            grad(lambda x: x**2, method="central", h=1e-3)(x),
            grad(lambda x: x**3, method="fd")(x),  # Catalyst's default h = 1e-7
            jacobian(lambda v: v**2, method="fd", h=0.5)(np.array([1.0, 2.0])),
            grad(lambda x: x**2, method="fd", h=-1e-3)(x),  # a negative h: backward
        )

    fwd, central, default, jac, backward = g(1.0)
    assert fwd == pytest.approx(2.0 + 1e-3, abs=1e-10)  # ((x+h)^2 - x^2)/h = 2x + h
    assert central == pytest.approx(2.0, abs=1e-10)
    assert default == pytest.approx(3.0 + 3e-7, abs=2e-8)  # 3x^2 + 3xh
    np.testing.assert_allclose(jac, np.diag([2.5, 4.5]))  # 2x + h
    assert backward == pytest.approx(2.0 - 1e-3, abs=1e-10)


def test_fd_of_a_qnode_matches_the_forward_formula():
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def circuit(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.Z(0))

    @qjit
    def g(x):
        return grad(circuit, method="fd", h=1e-2)(x), grad(circuit, method="central", h=1e-2)(x)

    fwd, central = g(0.3)
    assert fwd == pytest.approx((np.cos(0.31) - np.cos(0.3)) / 1e-2, abs=1e-12)
    assert central == pytest.approx((np.cos(0.31) - np.cos(0.29)) / 2e-2, abs=1e-12)


@pytest.mark.parametrize("h", [0.0, float("nan"), "0.1"])
def test_bad_fd_step(h):
    with pytest.raises(ValueError, match="h"):
        grad(lambda x: x, method="fd", h=h)


# ----------------------------------------------------------------------------------------
# invalid programs (item 10): Catalyst's exception types
# ----------------------------------------------------------------------------------------
def test_bad_method_and_argnums_are_value_errors():
    with pytest.raises(ValueError, match="unsupported differentiation method"):
        grad(lambda x: x, method="adjoint")
    with pytest.raises(ValueError, match="out of range"):
        qjit(lambda x: grad(lambda x: x, argnums=2)(x))(1.0)
    with pytest.raises(ValueError, match="argnums should be an integer"):
        qjit(lambda x: grad(lambda x: x, argnums="0")(x))(1.0)


def test_integer_argument_and_result_are_not_differentiable():
    with pytest.raises(DifferentiableCompileError, match="floating-point arguments"):
        qjit(lambda n: grad(lambda n: n * 2.0)(n))(3)
    with pytest.raises(DifferentiableCompileError, match="floating-point results"):
        qjit(lambda x: grad(lambda x: (x > 0.0).astype(int) * 2)(x))(1.0)
    with pytest.raises(DifferentiableCompileError, match="floating-point results"):
        qjit(lambda x: jacobian(lambda x: np.floor(x).astype(np.int64))(x))(np.array([1.0, 2.0]))


def _h(x, y):
    return np.array([x * y, x + y])


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda x, y: jvp(_h, [x, y], [1.0], argnums=[0, 1]), TypeError, "number of tangents"),
        (lambda x, y: jvp(_h, [x, y], [1.0, 1.0]), TypeError, "number of tangents"),  # argnums=0
        (lambda x, y: jvp(_h, [x, y], [1.0, np.ones(2)], argnums=[0, 1]), ValueError, "shape"),
        (lambda x, y: jvp(_h, [x, y], [1, 1], argnums=[0, 1]), TypeError, "dtype"),
        (lambda x, y: vjp(_h, [x, y], [np.ones(2), np.ones(2)]), TypeError, "number of cotangents"),
        (lambda x, y: vjp(_h, [x, y], [np.ones(3)]), ValueError, "shape"),
        (lambda x, y: vjp(_h, [x, y], [np.array([1, 2])]), TypeError, "dtype"),
    ],
)
def test_wrong_jvp_vjp_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        qjit(call)(0.5, 2.0)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: jvp(_h, 0.5, [1.0]), ValueError, "'params' argument must be a Sequence"),
        (lambda: jvp(_h, [0.5, 2.0], 1.0), ValueError, "'tangents' argument must be a Sequence"),
        (lambda: vjp(_h, 0.5, [np.ones(2)]), ValueError, "'params' argument must be a Sequence"),
        (
            lambda: jvp(_h, [0.5, 2.0], [1.0], argnums=[0, 1]),
            TypeError,
            "number of tangents and number of differentiable parameters in jvp",
        ),
        (
            lambda: jvp(_h, [0.5, 2.0], [1, 1], argnums=[0, 1]),
            TypeError,
            "function params and tangents arguments to jvp do not match",
        ),
        (
            lambda: jvp(_h, [0.5, 2.0], [1.0, np.ones(2)], argnums=[0, 1]),
            ValueError,
            "jvp called with different function params and tangent shapes",
        ),
        (
            lambda: vjp(_h, [0.5, 2.0], [np.ones(2), np.ones(2)]),
            TypeError,
            "number of cotangent and number of function output parameters in vjp",
        ),
        # a cotangent of the wrong dtype *and* shape: the dtype is reported (Catalyst's order)
        (
            lambda: vjp(_h, [0.5, 2.0], 33),
            TypeError,
            "function output params and cotangents arguments to vjp do not match",
        ),
        (
            lambda: vjp(_h, [0.5, 2.0], [np.ones(3)]),
            ValueError,
            "vjp called with different function output params and cotangent shapes",
        ),
        (
            lambda: vjp(_h, [0.5, 2.0], [np.ones(2)], argnums="x"),
            ValueError,
            "argnums should be an integer or a Sequence of integers",
        ),
    ],
)
def test_wrong_jvp_vjp_arguments_raise_at_decoration_with_catalysts_words(call, exc, match):
    """Catalyst compiles a function without parameters when it is decorated, so the error
    comes from qjit(...) itself, with Catalyst's exception type and wording (plus ours)."""
    with pytest.raises(exc, match=match):
        qjit(call)


def test_cond_result_mismatches_are_type_errors():
    def structure(x):
        @cond(x > 0)
        def f():
            return (x, x)

        @f.otherwise
        def f():
            return [x, x]

        return f()

    def shape(x):
        return cond(x > 0)(lambda: x).otherwise(lambda: np.array([x, x]))()

    def no_otherwise(x):
        return cond(x > 0)(lambda: x)()

    def count(x):
        return cond(x > 0)(lambda: x).otherwise(lambda: (x, x))()

    for fn, match in [
        (structure, r"consistent return structure.*\(\*, \*\) and \[\*, \*\]"),
        (shape, "consistent array shape"),
        (no_otherwise, "otherwise"),
        (count, "consistent return structure"),
    ]:
        with pytest.raises(TypeError, match=match):
            qjit(fn)(1.0)


def test_cond_branches_with_different_dtypes_are_promoted():
    """As Catalyst (jnp.promote_types): int and float branches give a float."""

    @qjit
    def f(x):
        return cond(x > 0)(lambda: 1).otherwise(lambda: x * 0.5)()

    assert f(1.0) == 1.0 and f(-3.0) == -1.5
