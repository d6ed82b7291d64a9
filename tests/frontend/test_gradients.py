"""grad / value_and_grad / jacobian / vjp / jvp through the whole pipeline.

Classical functions are differentiated by Enzyme (gradient.vjp) and checked against analytic
values and PennyLane's autograd to 1e-8; method="fd" against the same references with a
finite-difference tolerance. QNodes are differentiated both ways (Enzyme + the runtime's
Jacobian, and method="fd"). Each program is compiled once (module-level qjit objects).
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pennylane as qml
import pytest

from cofactor import (
    QJIT,
    DifferentiableCompileError,
    cond,
    for_loop,
    grad,
    jacobian,
    jvp,
    measure,
    qjit,
    value_and_grad,
    vjp,
)
from cofactor.errors import CompileError
from cofactor.launcher import BufferSpec

pnp = qml.numpy
TOL = 1e-8
FD_TOL = 1e-6
F64 = BufferSpec((), np.dtype(np.float64))


def autograd(fn, *args, argnum=0):
    """PennyLane's own gradient (autograd on pennylane.numpy), outside qjit."""
    params = [pnp.array(a, requires_grad=True) for a in args]
    return qml.grad(fn, argnums=argnum)(*params)


def autograd_jacobian(fn, x):
    return np.asarray(qml.jacobian(fn)(pnp.array(x, requires_grad=True)))


# ---------------------------------------------------------------------------------------
# classical functions through Enzyme


def test_value_and_grad_of_a_square():  # CATALYST_NOTES 5.12
    @qjit
    def vg(x):
        return value_and_grad(lambda x: x**2)(x)

    value, g = vg(3.0)
    assert value == pytest.approx(9.0, abs=TOL) and g == pytest.approx(6.0, abs=TOL)


def _loss(x, y, w):
    return pnp.sin(x[0]) * x[1] * y + pnp.sum(x**2 * w) + pnp.exp(y) / (1 + x[2] ** 2)


@qjit
def several_arguments(x, y, w):
    # several array arguments; argnums picks two of them (w is a constant input)
    return grad(
        lambda x, y, w: np.sin(x[0]) * x[1] * y + np.sum(x**2 * w) + np.exp(y) / (1 + x[2] ** 2),
        argnums=(0, 1),
    )(x, y, w)


def test_grad_of_several_array_arguments_matches_pennylane():
    x, y, w = np.array([0.3, -0.5, 1.2]), 0.7, np.array([1.0, 2.0, -0.5])
    gx, gy = several_arguments(x, y, w)
    ref_x, ref_y = autograd(_loss, x, y, w, argnum=[0, 1])
    np.testing.assert_allclose(gx, ref_x, rtol=0, atol=TOL)
    assert gy == pytest.approx(float(ref_y), abs=TOL)
    assert several_arguments.mlir.count('"gradient.vjp"') == 1
    assert "diff_inputs = [0 : i64, 1 : i64]" in several_arguments.mlir


@qjit
def small_jacobian(x):
    return jacobian(lambda x: np.array([x[0] * x[1], np.sin(x[1]), x[0] ** 3]))(x)


@qjit
def large_jacobian(x):  # 16 output elements: one-hot vjps in an scf.for
    return jacobian(lambda x: np.outer(x, x) + np.sin(x)[:, None])(x)


def test_jacobian_of_vector_valued_functions_matches_pennylane():
    x = np.array([0.5, 0.7])
    ref = autograd_jacobian(lambda x: pnp.stack([x[0] * x[1], pnp.sin(x[1]), x[0] ** 3]), x)
    np.testing.assert_allclose(small_jacobian(x), ref, rtol=0, atol=TOL)
    assert small_jacobian.mlir.count('"gradient.vjp"') == 3  # unrolled

    x4 = np.array([0.1, 0.2, -0.3, 0.4])
    jac = large_jacobian(x4)
    assert jac.shape == (4, 4, 4)  # output shape + input shape
    ref = autograd_jacobian(lambda x: pnp.outer(x, x) + pnp.sin(x)[:, None], x4)
    np.testing.assert_allclose(jac, ref, rtol=0, atol=TOL)
    assert large_jacobian.mlir.count('"gradient.vjp"') == 1
    assert "scf.for" in large_jacobian.mlir


@qjit
def structured_jacobian(x, s):
    def f(x, s):
        return x * s, np.sum(x) * s**2

    return jacobian(f, argnums=(0, 1))(x, s)


def test_jacobian_structure_with_several_results_and_arguments():
    x, s = np.array([1.0, 2.0]), 3.0
    (j0x, j0s), (j1x, j1s) = structured_jacobian(x, s)
    np.testing.assert_allclose(j0x, s * np.eye(2), atol=TOL)
    np.testing.assert_allclose(j0s, x, atol=TOL)
    np.testing.assert_allclose(j1x, [s**2, s**2], atol=TOL)
    assert j1s == pytest.approx(2 * s * x.sum(), abs=TOL)


@qjit
def jvp_vjp_square(x, t):
    f = lambda x: x**2  # noqa: E731
    return jvp(f, [x], [t]), vjp(f, [x], [1.0])


def test_jvp_and_vjp_of_a_square():  # CATALYST_NOTES 5.15
    (res, jv), (res2, vj) = jvp_vjp_square(4.0, 1.0)
    assert res == pytest.approx(16.0) and jv == pytest.approx(8.0, abs=TOL)
    # Catalyst's default argnums=0: one vjp, not a tuple (CATALYST_NOTES 15 wrote (8,))
    assert res2 == pytest.approx(16.0) and vj == pytest.approx(8.0, abs=TOL)


@qjit
def vjp_jvp_arrays(x, ct, t):
    def f(x):
        return np.sin(x) * x[0], np.sum(x**3)

    return vjp(f, [x], [ct, 2.0]), jvp(f, [x], [t])


def test_vjp_and_jvp_of_arrays_match_the_jacobian():
    x, ct, t = np.array([0.2, -0.4, 0.9]), np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -1.0])

    def f(x):
        return pnp.concatenate([pnp.sin(x) * x[0], pnp.reshape(pnp.sum(x**3), (1,))])

    jac = autograd_jacobian(f, x)
    ((r0, r1), vx), ((s0, s1), (j0, j1)) = vjp_jvp_arrays(x, ct, t)
    np.testing.assert_allclose(r0, np.sin(x) * x[0], atol=TOL)
    assert r1 == pytest.approx(np.sum(x**3)) and s1 == pytest.approx(r1)
    np.testing.assert_allclose(s0, r0, atol=TOL)
    np.testing.assert_allclose(vx, np.append(ct, 2.0) @ jac, rtol=0, atol=TOL)
    jt = jac @ t
    np.testing.assert_allclose(j0, jt[:3], rtol=0, atol=TOL)
    assert j1 == pytest.approx(jt[3], abs=TOL)


@qjit
def descent(x):
    @for_loop(0, 5, 1)
    def step(i, x):
        return x - 0.1 * grad(lambda x: np.sum(np.cos(x) * x))(x)

    return step(x)


def test_grad_inside_a_for_loop():
    x = np.array([0.4, 1.1])
    expected = x.copy()
    for _ in range(5):
        expected = expected - 0.1 * (np.cos(expected) - np.sin(expected) * expected)
    np.testing.assert_allclose(descent(x), expected, rtol=0, atol=TOL)


@qjit
def grad_through_control_flow(x, n):
    def f(x):
        @for_loop(0, n, 1)
        def body(i, acc):
            return acc * x + np.sin(acc)

        y = body(x)
        return cond(y > 1.0)(lambda: y**2).otherwise(lambda: -y)()

    return grad(f)(x)


def test_grad_through_loops_and_branches():
    def ref(x, n):
        acc = x
        for _ in range(n):
            acc = acc * x + pnp.sin(acc)
        return acc**2 if acc > 1.0 else -acc

    for x, n in [(0.8, 3), (0.2, 2)]:
        expected = float(autograd(lambda x, n=n: ref(x, n), x))
        assert grad_through_control_flow(x, n) == pytest.approx(expected, abs=TOL)


def test_grad_given_to_qjit_and_called_outside_qjit():
    f = lambda x, y: x * np.sin(y)  # noqa: E731
    compiled = qjit(grad(f, argnums=1))
    assert compiled(2.0, 0.5) == pytest.approx(2.0 * np.cos(0.5), abs=TOL)
    assert grad(lambda x: x**3)(2.0) == pytest.approx(12.0, abs=TOL)  # compiles itself


@qjit
def pennylane_entry_points(x):
    f = lambda x: np.sum(np.sin(x))  # noqa: E731
    return (
        qml.grad(f)(x),
        qml.jacobian(lambda x: x**2)(x),
        qml.value_and_grad(f)(x),
        qml.vjp(lambda x: x * 3, [x], [np.ones(2)]),
        qml.jvp(lambda x: x * 3, [x], [np.ones(2)]),
    )


def test_pennylane_functions_route_to_cofactor():
    x = np.array([0.1, 0.2])
    g, jac, (v, g2), (r, vj), (r2, jv) = pennylane_entry_points(x)
    np.testing.assert_allclose(g, np.cos(x), atol=TOL)
    np.testing.assert_allclose(jac, np.diag(2 * x), atol=TOL)
    assert v == pytest.approx(np.sum(np.sin(x)))
    np.testing.assert_allclose(g2, np.cos(x), atol=TOL)
    np.testing.assert_allclose(vj, [3.0, 3.0], atol=TOL)
    np.testing.assert_allclose(jv, [3.0, 3.0], atol=TOL)
    np.testing.assert_allclose(r, 3 * x) and np.testing.assert_allclose(r2, 3 * x)


MATH_FUNCTIONS = {
    "tan": (np.tan, lambda x: 1 / np.cos(x) ** 2),
    "arctan": (np.arctan, lambda x: 1 / (1 + x * x)),
    "tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "arcsin": (np.arcsin, lambda x: 1 / np.sqrt(1 - x * x)),
    "arccos": (np.arccos, lambda x: -1 / np.sqrt(1 - x * x)),
    "arctan2": (lambda x: np.arctan2(x, 2.0), lambda x: 2 / (4 + x * x)),
    "sinh": (np.sinh, np.cosh),
    "cosh": (np.cosh, np.sinh),
    "expm1": (np.expm1, np.exp),
    "log1p": (np.log1p, lambda x: 1 / (1 + x)),
    "log2": (np.log2, lambda x: 1 / (x * np.log(2))),
    "log10": (np.log10, lambda x: 1 / (x * np.log(10))),
    "power": (lambda x: x**2.5, lambda x: 2.5 * x**1.5),
    "maximum": (lambda x: np.maximum(x, 0.1) * np.abs(x), lambda x: 2 * x),
}


@qjit
def math_gradients(x):
    return tuple(grad(f)(x) for f, _ in MATH_FUNCTIONS.values())


def test_gradients_of_math_functions():
    # the C-library functions (tan, arcsin, ...) go through math ops under Enzyme
    for (name, (_, derivative)), value in zip(
        MATH_FUNCTIONS.items(), math_gradients(0.3), strict=True
    ):
        assert value == pytest.approx(derivative(0.3), abs=TOL), name


@qjit
def dict_argument(params, scale):
    def f(p, scale):
        return scale * (p["a"] ** 2 + np.sum(p["b"] * p["a"]))

    return grad(f)(params, scale)


def test_grad_with_respect_to_a_dict_of_arrays():
    g = dict_argument({"a": 1.5, "b": np.array([1.0, -2.0])}, 2.0)
    assert g["a"] == pytest.approx(2.0 * (3.0 - 1.0), abs=TOL)
    np.testing.assert_allclose(g["b"], [3.0, 3.0], atol=TOL)


@qjit
def captured_constant(x, y):
    # y is captured from the enclosing trace: a constant input of the traced function
    return grad(lambda x: x * y + y**2 * np.sin(x))(x)


def test_gradient_keeps_the_containers_of_a_one_value_output():
    # as Catalyst: the gradient of a function returning [y] / {"k": y} is [g] / {"k": g}
    # (before: the bare g)
    @qjit
    def f(x):
        return (
            grad(lambda x: [x * x])(x),
            value_and_grad(lambda x: {"k": x * x})(x),
            grad(lambda x, y: (x * y,), argnums=(0, 1))(x, 2.0),
        )

    g_list, (value, g_dict), g_tuple = f(3.0)
    assert isinstance(g_list, list) and g_list == [6.0]
    assert value == {"k": 9.0} and g_dict == {"k": 6.0}
    assert g_tuple == ((2.0, 3.0),)


def test_captured_traced_values_are_constants():
    x, y = 0.3, 1.7
    assert captured_constant(x, y) == pytest.approx(y + y**2 * np.cos(x), abs=TOL)


# ---------------------------------------------------------------------------------------
# finite differences, higher order


@qjit
def fd_grad(x):
    return grad(lambda x: np.sin(x) * x, method="fd")(x), value_and_grad(
        lambda x: np.sin(x) * x, method="fd", h=1e-6
    )(x)


def test_finite_differences():
    g, (v, g2) = fd_grad(0.4)
    exact = np.cos(0.4) * 0.4 + np.sin(0.4)
    assert g == pytest.approx(exact, abs=FD_TOL) and g2 == pytest.approx(exact, abs=FD_TOL)
    assert v == pytest.approx(np.sin(0.4) * 0.4)
    assert "gradient.vjp" not in fd_grad.mlir


@qjit
def second_derivative(x):
    inner = grad(lambda x: x**3, method="fd", h=1e-4)
    return grad(inner, method="fd", h=1e-4)(x)


def test_nested_finite_differences():  # CATALYST_NOTES 5.14
    # forward differences (Catalyst's method="fd") of x**3 twice: 6x + 6h exactly
    assert second_derivative(2.0) == pytest.approx(12.0 + 6 * 1e-4, abs=1e-6)


def test_nesting_without_finite_differences_is_an_error():
    with pytest.raises(DifferentiableCompileError, match="Only finite difference can compute"):
        qjit(lambda x: grad(grad(lambda x: x**3))(x))(2.0)
    with pytest.raises(DifferentiableCompileError, match="Only finite difference can compute"):
        _trace(lambda x: grad(grad(lambda x: x**3, method="fd"), method="auto")(x), F64)


@qjit
def fd_of_enzyme(x):
    return grad(grad(lambda x: x**3), method="fd", h=1e-5)(x)


def test_finite_differences_of_an_enzyme_derivative():
    # forward difference of 3x**2: 6x + 3h exactly
    assert fd_of_enzyme(2.0) == pytest.approx(12.0 + 3 * 1e-5, abs=1e-8)


@qjit
def fd_jacobian_vjp_jvp(x):
    f = lambda x: np.array([x[0] * x[1], np.exp(x[1])])  # noqa: E731
    return (
        jacobian(f, method="fd")(x),
        vjp(f, [x], [np.array([1.0, 2.0])], method="fd"),
        jvp(f, [x], [np.array([0.5, -1.0])], method="fd"),
    )


def test_finite_difference_jacobian_vjp_jvp():
    x = np.array([0.3, 0.6])
    jac = np.array([[x[1], x[0]], [0.0, np.exp(x[1])]])
    j, (_, vj), (_, jv) = fd_jacobian_vjp_jvp(x)
    np.testing.assert_allclose(j, jac, atol=FD_TOL)
    np.testing.assert_allclose(vj, np.array([1.0, 2.0]) @ jac, atol=FD_TOL)
    np.testing.assert_allclose(jv, jac @ np.array([0.5, -1.0]), atol=FD_TOL)


# ---------------------------------------------------------------------------------------
# QNodes

dev = qml.device("default.qubit", wires=2)


@qml.qnode(dev, diff_method="parameter-shift")
def ry_expval_y(x):
    qml.RX(2 * x, wires=0)
    return qml.expval(qml.PauliY(0))


@qml.qnode(dev)
def pi_circuit(x):
    qml.RX(np.pi * x, wires=0)
    return qml.expval(qml.PauliY(0))


@qml.qnode(dev, diff_method="parameter-shift")
def probs_circuit(x):
    qml.RX(x, wires=0)
    return qml.probs(wires=0)


@qjit
def qnode_fd(x, y):
    return (
        grad(ry_expval_y, method="fd")(x),
        grad(pi_circuit, method="fd")(2.0 * x / 2.0 + 1.0),
        jacobian(probs_circuit, method="fd")(y),
        value_and_grad(lambda x: ry_expval_y(x) * x**2, method="fd")(x),
    )


def test_qnode_gradients_by_finite_differences():  # CATALYST_NOTES 5.10, 5.11, 5.13
    g, g_pi, jac, (v, g2) = qnode_fd(1.0, 0.5)
    assert g == pytest.approx(-2 * np.cos(2.0), abs=FD_TOL)  # 0.83229367
    assert g_pi == pytest.approx(-np.pi, abs=FD_TOL)
    np.testing.assert_allclose(jac, [-np.sin(0.5) / 2, np.sin(0.5) / 2], atol=FD_TOL)

    def hybrid(x):
        return ry_expval_y(x) * x**2

    assert v == pytest.approx(float(hybrid(1.0)), abs=1e-12)
    assert g2 == pytest.approx(float(autograd(hybrid, 1.0)), abs=FD_TOL)


@qml.qnode(dev)
def with_mcm(x):
    qml.RX(x, wires=0)
    measure(0, postselect=1)
    qml.RY(x, wires=1)
    qml.CNOT(wires=[0, 1])
    return qml.expval(qml.PauliZ(1))


@qjit(seed=3)
def mcm_fd(x):
    return grad(with_mcm, method="fd", h=1e-6)(x)


def test_mid_circuit_measurement_differentiates_with_fd():
    # postselected on |1>: <Z1> = -cos(x), whatever the RX
    assert mcm_fd(0.7) == pytest.approx(np.sin(0.7), abs=FD_TOL)


def _trace(fn, *specs):
    tree = ("tuple", tuple("*" for _ in specs))
    return QJIT(fn)._trace(tree, specs, ())[0]


def test_qnode_gradient_ir_goes_through_the_gradient_passes():
    @qml.qnode(dev)
    def circuit(x, y):
        qml.RX(x * 2, wires=0)
        qml.RY(y, wires=1)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1)), qml.expval(qml.PauliX(0))

    mlir = _trace(
        lambda x, y: grad(lambda x, y: np.prod(np.array(circuit(x, y))) * y)(x, y), F64, F64
    )
    assert (
        'attributes {cofactor.qnode, cofactor.diff_method = "adjoint", '
        "cofactor.num_inputs = 2 : i64}" in mlir
    )
    assert "cofactor.num_inputs = 2 : i64" in mlir
    assert '"gradient.vjp"' in mlir and "diff_inputs = [0 : i64]" in mlir
    from cofactor import compiler, toolchain

    opt = toolchain.find("cofactor-opt")
    proc = subprocess.run(
        [str(opt), *compiler.LOWERING_PASSES], input=mlir, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "__enzyme_autodiff" in proc.stdout and "cf_rt_jacobian_recorded" in proc.stdout


@pytest.mark.parametrize(
    ("diff_method", "measurement", "message"),
    [
        ("best", lambda: qml.state(), "State returns are forbidden in gradients"),
        ("best", lambda: qml.var(qml.PauliZ(0)), "Variance returns are forbidden in gradients"),
        (None, lambda: qml.expval(qml.PauliZ(0)), "Cannot differentiate a QNode explicitly marked"),
        ("adjoint", lambda: qml.probs(wires=0), "adjoint method can only be used for QNodes"),
        ("backprop", lambda: qml.expval(qml.PauliZ(0)), "not supported by cofactor"),
    ],
)
def test_qnode_gradient_errors(diff_method, measurement, message):
    @qml.qnode(dev, diff_method=diff_method)
    def circuit(x):
        qml.RX(x, wires=0)
        return measurement()

    with pytest.raises(DifferentiableCompileError, match=message):
        _trace(lambda x: jacobian(lambda x: np.real(circuit(x)))(x), F64)


def test_mid_circuit_measurement_under_enzyme_suggests_fd():
    with pytest.raises(DifferentiableCompileError, match='method="fd"'):
        _trace(lambda x: grad(with_mcm)(x), F64)


def test_best_diff_method_picks_parameter_shift_for_probs():
    mlir = _trace(lambda x: jacobian(probs_circuit)(x), F64)
    assert 'cofactor.diff_method = "parameter-shift"' in mlir


# ---------------------------------------------------------------------------------------
# errors


def test_differentiation_errors():  # CATALYST_NOTES 5.17
    with pytest.raises(
        DifferentiableCompileError, match="only supports differentiation on floating"
    ):
        _trace(lambda n: grad(lambda n: n * 2.0)(n), BufferSpec((), np.dtype(np.int64)))
    with pytest.raises(DifferentiableCompileError, match="only supports scalar-output functions"):
        _trace(lambda x: grad(lambda x: x * 2)(x), BufferSpec((2,), np.dtype(np.float64)))
    with pytest.raises(CompileError, match="unsupported differentiation method"):
        grad(lambda x: x, method="adjoint")
    with pytest.raises(CompileError, match="argnums=2 is out of range"):
        _trace(lambda x: grad(lambda x: x, argnums=2)(x), F64)
    with pytest.raises(DifferentiableCompileError, match="complex"):
        _trace(lambda x: grad(lambda x: x * 1j)(x), F64)


# ---------------------------------------------------------------------------------------
# QNodes through Enzyme, with the runtime's cf_rt_jacobian_recorded (docs/gradients.md).

dev1 = qml.device("default.qubit", wires=1)


@qml.qnode(dev1, diff_method="parameter-shift")
def rx2_y_ps(x):
    qml.RX(2 * x, wires=0)
    return qml.expval(qml.PauliY(0))


@qml.qnode(dev1, diff_method="adjoint")
def rx2_y_adj(x):
    qml.RX(2 * x, wires=0)
    return qml.expval(qml.PauliY(0))


@qml.qnode(dev1)
def rx_pi_y(x):
    qml.RX(np.pi * x, wires=0)
    return qml.expval(qml.PauliY(0))


@qml.qnode(dev1)
def rx_z(x):
    qml.RX(x, wires=0)
    return qml.expval(qml.PauliZ(0))


@qml.qnode(dev1, diff_method="parameter-shift")
def rx_probs(x):
    qml.RX(x, wires=0)
    return qml.probs(wires=0)


@qjit
def one_wire_gradients(x):
    return grad(rx2_y_ps)(x), grad(rx2_y_adj)(x)


def test_qnode_grad_parameter_shift_and_adjoint():  # CATALYST_NOTES 5.10
    g_ps, g_adj = one_wire_gradients(1.0)
    assert g_ps == pytest.approx(-2 * np.cos(2.0), abs=TOL)  # 0.83229367
    assert g_adj == pytest.approx(-2 * np.cos(2.0), abs=TOL)


def test_qnode_grad_with_classical_preprocessing():  # CATALYST_NOTES 5.11
    assert qjit(grad(rx_pi_y))(2.0) == pytest.approx(-np.pi, abs=TOL)


def test_qnode_value_and_grad():  # CATALYST_NOTES 5.12
    value, g = qjit(value_and_grad(rx_z))(0.4)
    assert value == pytest.approx(np.cos(0.4), abs=TOL)
    assert g == pytest.approx(-np.sin(0.4), abs=TOL)


def test_qnode_jacobian_of_probs():  # CATALYST_NOTES 5.13
    jac = qjit(jacobian(rx_probs))(0.5)
    np.testing.assert_allclose(jac, [-np.sin(0.5) / 2, np.sin(0.5) / 2], rtol=0, atol=TOL)


@qml.qnode(dev)
def two_wires(x, s):
    qml.RX(2 * x[0], wires=0)
    for i in range(3):
        qml.RY(s * x[i], wires=1)
        qml.CNOT(wires=[0, 1])
    qml.Rot(x[1], x[0] * x[2], 0.3, wires=0)
    return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliY(1))


def hybrid_cost(x, s):
    z, y = two_wires(x, s)
    return z * y + x[2] * s


@qjit
def hybrid_grad(x, s):
    return grad(lambda x, s: (lambda z, y: z * y + x[2] * s)(*two_wires(x, s)), argnums=(0, 1))(
        x, s
    )


def test_hybrid_qnode_gradient_matches_pennylane():
    x, s = np.array([0.4, -0.7, 1.3]), 0.8
    gx, gs = hybrid_grad(x, s)
    ref_x, ref_s = autograd(hybrid_cost, x, s, argnum=[0, 1])
    np.testing.assert_allclose(gx, ref_x, rtol=0, atol=TOL)
    assert gs == pytest.approx(float(ref_s), abs=TOL)
    from cofactor.launcher import _runtime

    live = _runtime().cf_rt_tape_live_count
    live.restype = ctypes.c_int64
    assert live() == 0  # every tape of the QNode's custom gradient was freed


@qjit
def qnode_grads_in_loops(x):
    @for_loop(0, 3, 1)
    def descend(i, x):  # grad inside a for_loop (Catalyst's test_adj_in_loop pattern)
        return x - 0.2 * grad(rx_z)(x)

    def summed(x):  # grad of a loop-summed QNode (issue #1912 pattern)
        @for_loop(0, 3, 1)
        def body(i, acc):
            return acc + rx_z(x * (i + 1))

        return body(0.0)

    return descend(x), grad(summed)(x)


def test_qnode_gradients_and_loops():  # CATALYST_NOTES 5.19
    x = 0.3
    descended, g = qnode_grads_in_loops(x)
    expected = x
    for _ in range(3):
        expected = expected + 0.2 * np.sin(expected)
    assert descended == pytest.approx(expected, abs=TOL)
    assert g == pytest.approx(sum(-(i + 1) * np.sin(x * (i + 1)) for i in range(3)), abs=TOL)


def test_parameter_shift_and_adjoint_qnodes_agree_and_shots_sample_the_gradient():
    def make(diff_method, shots=None):
        dev = qml.device("lightning.qubit", wires=3)

        @qml.set_shots(shots)
        @qml.qnode(dev, diff_method=diff_method)
        def circuit(x):
            qml.RX(x[0], wires=0)
            qml.CRY(x[1], wires=[0, 1])
            qml.IsingXY(x[0] * x[1], wires=[1, 2])
            qml.ctrl(qml.RZ, control=2)(x[1], wires=0)
            return qml.expval(qml.PauliZ(0) @ qml.PauliX(1)), qml.probs(wires=[2])

        def cost(x):
            e, p = circuit(x)
            return e + 2.0 * p[1]

        return qjit(grad(cost)), cost

    x = np.array([0.7, -1.1])
    adjoint_grad, _ = make("best")  # probs: "best" picks parameter-shift
    shift_grad, cost = make("parameter-shift")
    xp = qml.numpy.array(x, requires_grad=True)
    reference = qml.grad(lambda v: cost(v))(xp)
    np.testing.assert_allclose(shift_grad(x), reference, atol=1e-10)
    np.testing.assert_allclose(adjoint_grad(x), reference, atol=1e-10)

    sampled, _ = make("parameter-shift", shots=40000)
    g = sampled(x)
    # each entry is a sum of a few (four-term) shift differences of means of bounded
    # samples: a loose 0.1 bound fails by chance far less often than one in a million
    assert np.all(np.abs(g - reference) < 0.1) and not np.allclose(g, reference, atol=1e-9)
