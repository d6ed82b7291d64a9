"""Python callbacks from compiled code: pure_callback (plain and with a custom VJP) and
debug.callback, through the runtime's trampoline; gradients through callbacks."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import cofactor
from cofactor import (
    CompileError,
    DifferentiableCompileError,
    ShapeDtype,
    debug,
    for_loop,
    grad,
    jacobian,
    pure_callback,
    qjit,
    value_and_grad,
)

TOL = 1e-12


def live_tapes() -> int:
    from cofactor.launcher import _runtime

    fn = _runtime().cf_rt_tape_live_count
    fn.restype = ctypes.c_int64
    return fn()


# ---------------------------------------------------------------------------------------
# plain callbacks

calls: list[float] = []


@pure_callback
def host_sin(x) -> float:
    calls.append(float(x))
    return np.sin(x)


@pure_callback
def host_stats(x, n) -> (float, ShapeDtype((2,), float)):  # several results
    return float(np.sum(x) * n), np.array([x.min(), x.max()])


def host_outer(x, y):
    return np.outer(x, y)


outer_cb = pure_callback(host_outer, ShapeDtype((2, 3), np.float64))
count_cb = pure_callback(lambda x: np.array([int(v > 0) for v in x]), np.zeros(3, dtype=np.int64))


@qjit
def uses_callbacks(x, y, n):
    s, mm = host_stats(y, n)
    return host_sin(x) * 2, s, mm, outer_cb(y[:2], y), count_cb(y)


def test_callbacks_return_values_of_the_declared_types():
    calls.clear()
    y = np.array([0.5, -1.0, 2.0])
    a, s, mm, o, c = uses_callbacks(0.3, y, 4)
    assert a == pytest.approx(2 * np.sin(0.3), abs=TOL)
    assert s == pytest.approx(y.sum() * 4, abs=TOL)
    np.testing.assert_allclose(mm, [-1.0, 2.0])
    np.testing.assert_allclose(o, np.outer(y[:2], y))
    np.testing.assert_array_equal(c, [1, 0, 1])
    assert c.dtype == np.int64
    assert calls == [0.3]  # at run time only, never while tracing
    uses_callbacks(0.7, y, 4)
    assert calls == [0.3, 0.7]
    assert "cofactor.callback_id" in uses_callbacks.mlir


def test_callback_outside_qjit_is_the_python_function():
    assert host_sin(0.5) == pytest.approx(np.sin(0.5))


@qjit
def callback_in_loop(x):
    @for_loop(0, 4, 1)
    def body(i, acc):
        return acc + host_sin(acc * i)

    return body(x)


def test_callback_inside_a_for_loop():
    acc = 0.2
    for i in range(4):
        acc = acc + np.sin(acc * i)
    assert callback_in_loop(0.2) == pytest.approx(acc, abs=TOL)


# ---------------------------------------------------------------------------------------
# custom VJPs


@pure_callback
def callback_fn(x) -> float:
    return np.sin(x[0]) * x[1]


@callback_fn.fwd
def callback_fn_fwd(x):
    return callback_fn(x), x


@callback_fn.bwd
def callback_fn_vjp(res, dy):
    x0, x1 = res
    return (np.array([np.cos(x0) * dy * x1, np.sin(x0) * dy]),)


@qjit
@grad
def catalyst_docstring_example(x):
    y = np.array([np.cos(x[0]), x[1]])
    return np.sin(callback_fn(y))


def test_custom_vjp_catalyst_docstring_example():  # CATALYST_NOTES 5.16
    x = np.array([0.1, 0.2])
    np.testing.assert_allclose(
        catalyst_docstring_example(x), [-0.01071923, 0.82698717], rtol=0, atol=1e-8
    )
    y0, y1 = np.cos(x[0]), x[1]
    outer = np.cos(np.sin(y0) * y1)
    exact = outer * np.array([np.cos(y0) * y1 * -np.sin(x[0]), np.sin(y0)])
    np.testing.assert_allclose(catalyst_docstring_example(x), exact, rtol=0, atol=TOL)
    assert live_tapes() == 0


@pure_callback
def identity(x) -> float:
    return x


@identity.fwd
def identity_fwd(x):
    return identity(x), 1.0


@identity.bwd
def identity_bwd(res, ct):
    return (ct * res,)


@qjit
def scaled_identity(x, s):
    return grad(lambda x: s * identity(x))(x)


def test_custom_vjp_identity():
    assert scaled_identity(42.0, 3.5) == pytest.approx(3.5, abs=TOL)


@qjit
def used_twice(x):
    # the same callback twice on the same input: both reverse passes must see it
    return value_and_grad(lambda x: callback_fn(x) * callback_fn(x) + callback_fn(x))(x)


def test_callback_used_twice_on_the_same_input():
    x = np.array([0.9, -2.0])
    t = np.sin(x[0]) * x[1]
    dt = np.array([np.cos(x[0]) * x[1], np.sin(x[0])])
    value, g = used_twice(x)
    assert value == pytest.approx(t * t + t, abs=TOL)
    np.testing.assert_allclose(g, (2 * t + 1) * dt, rtol=0, atol=TOL)
    assert live_tapes() == 0


@pure_callback
def square(x) -> float:
    return x * x


@square.fwd
def square_fwd(x):
    return x * x, x


@square.bwd
def square_bwd(x, ct):
    return (2 * x * ct,)


@qjit
def grad_of_loop_with_callback(x):
    def f(x):
        @for_loop(0, 3, 1)
        def body(i, acc):
            return acc + square(acc + 0.5 * i)

        return body(x)

    return grad(f)(x)


def test_gradient_through_a_callback_in_a_for_loop():
    # each iteration's reverse pass needs that iteration's input (the runtime's tape)
    x = 0.3
    acc, d = x, 1.0
    for i in range(3):
        d = d * (1 + 2 * (acc + 0.5 * i))
        acc = acc + (acc + 0.5 * i) ** 2
    assert grad_of_loop_with_callback(x) == pytest.approx(d, abs=1e-10)
    assert live_tapes() == 0


@pure_callback
def weighted(x, w) -> ShapeDtype((2,), float):
    return np.array([np.dot(x, w), x[0] * w[1]])


@weighted.fwd
def weighted_fwd(x, w):
    return weighted(x, w), (x, w)


@weighted.bwd
def weighted_bwd(res, ct):
    x, w = res
    dx = ct[0] * w + ct[1] * np.array([w[1], 0.0, 0.0])
    dw = ct[0] * x + ct[1] * np.array([0.0, x[0], 0.0])
    return dx, dw


@qjit
def jacobian_through_callback(x, w):
    return jacobian(lambda x, w: weighted(x, w) * 2.0, argnums=(0, 1))(x, w)


def test_jacobian_through_a_callback_with_several_array_arguments():
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    jx, jw = jacobian_through_callback(x, w)
    np.testing.assert_allclose(jx, 2 * np.array([w, [w[1], 0, 0]]), rtol=0, atol=TOL)
    np.testing.assert_allclose(jw, 2 * np.array([x, [0, x[0], 0]]), rtol=0, atol=TOL)
    assert live_tapes() == 0


# ---------------------------------------------------------------------------------------
# debug.callback

logged: list[float] = []


@debug.callback
def log(x):
    logged.append(float(x))


@qjit
def grad_with_debug_callback(x):
    def f(x):
        log(x)
        return x * np.cos(x)

    return grad(f)(x)


def test_debug_callback_runs_at_run_time_and_is_inactive_under_grad():  # CATALYST_NOTES 5.18
    logged.clear()
    assert grad_with_debug_callback(0.3) == pytest.approx(np.cos(0.3) - 0.3 * np.sin(0.3))
    assert logged == [0.3]
    grad_with_debug_callback(0.5)
    assert logged == [0.3, 0.5]


@qjit
def grad_with_debug_print(x):
    return grad(lambda x: (debug.print("x =", x), x * x)[1])(x)


def test_debug_print_under_grad(capfd):  # CATALYST_NOTES 5.18
    capfd.readouterr()
    assert grad_with_debug_print(0.3) == pytest.approx(0.6, abs=TOL)
    assert capfd.readouterr().out == "x = 0.3\n"  # at run time, once


# ---------------------------------------------------------------------------------------
# errors


@pure_callback
def no_vjp(x) -> float:
    return 2 * x


@pure_callback
def only_fwd(x) -> float:
    return 2 * x


@only_fwd.fwd
def only_fwd_fwd(x):
    return 2 * x, None


def test_differentiating_a_callback_without_vjp():  # CATALYST_NOTES 5.17
    with pytest.raises(DifferentiableCompileError, match=r"'no_vjp'.*\.fwd.*\.bwd.*method=\"fd\""):
        qjit(lambda x: grad(lambda x: no_vjp(x) * x)(x))(1.0)
    with pytest.raises(DifferentiableCompileError, match="missing reverse pass"):
        qjit(lambda x: grad(lambda x: only_fwd(x) * x)(x))(1.0)


def test_finite_differences_through_a_callback_without_vjp():
    g = qjit(lambda x: grad(lambda x: no_vjp(x) * x, method="fd")(x))(1.5)
    assert g == pytest.approx(6.0, abs=1e-6)


@pure_callback
def wrong_shape(x) -> float:
    return np.array([x, x])


@pure_callback
def raises(x) -> float:
    if x > 1:
        raise ValueError("x is too large")
    return x


@qjit
def runs_bad_callback(x):
    return wrong_shape(x) + 1.0


@qjit
def runs_raising_callback(x):
    return raises(x) * 2.0


def test_run_time_errors_in_callbacks_are_raised_not_crashes():
    with pytest.raises(TypeError, match=r"wrong_shape has shape \(2,\).*shape \(\)"):
        runs_bad_callback(1.0)
    with pytest.raises(ValueError, match="too large"):
        runs_raising_callback(2.0)
    assert runs_raising_callback(0.5) == 1.0  # the next call is clean
    with pytest.raises(ValueError, match="too large"):
        runs_raising_callback(3.0)


@pure_callback
def bad_bwd(x) -> float:
    return 2 * x


@bad_bwd.fwd
def bad_bwd_fwd(x):
    return 2 * x, None


@bad_bwd.bwd
def bad_bwd_bwd(res, ct):
    return (np.array([1.0, 2.0]),)  # the argument is a scalar


def test_a_wrong_cotangent_from_bwd_is_raised():
    f = qjit(lambda x: grad(lambda x: bad_bwd(x) * x)(x))
    with pytest.raises(TypeError, match=r"cotangent 0 returned by bad_bwd.bwd has shape \(2,\)"):
        f(1.0)
    assert live_tapes() == 0


def test_callback_needs_a_result_type():
    # a CompileError, and Catalyst's TypeError with its words
    with pytest.raises(CompileError, match="result type"):
        pure_callback(lambda x: x)
    with pytest.raises(TypeError, match="requires return types to be passed in"):
        pure_callback(lambda x: x)
    assert cofactor.pure_callback(lambda x: x, float)(2.0) == 2.0


def test_debug_callback_must_return_none():
    seen = []

    def log_and_return(a):
        seen.append(float(a))
        return 1

    @qjit
    def f(x):
        debug.callback(log_and_return)(x)
        return x

    with pytest.raises(ValueError, match="debug.callback is expected to return None"):
        f(2.0)
    assert seen == [2.0]  # it ran, at run time, before the check
