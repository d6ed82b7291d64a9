"""Gradients where a function's branches meet (ties of max/min, clip at its bounds, |x| at
0) are PennyLane's default interface's (autograd: `qml.grad` of the same program written
with `pennylane.numpy`), which a PennyLane user compares against: a tie of np.maximum or
np.minimum splits the gradient 0.5/0.5 (JAX's too), np.max/np.min share it equally among
the tied elements (JAX's too), np.clip has gradient 0 at a bound and |x| gradient 0 at 0
(JAX: 0.5 and 1). Values stay numpy's exactly, signed zeros included."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor

pytestmark = pytest.mark.needs_toolchain

# name -> (function of (x, numpy module), argument); 22 elements are an array in memory
# (loop nests), 2-4 elements the per-element path
CASES = {
    "maximum": (lambda x, np: np.maximum(x[0], x[1]), [1.0, 1.0]),
    "minimum": (lambda x, np: np.minimum(x[0], x[1]), [-2.0, -2.0]),
    "fmax": (lambda x, np: np.fmax(x[0], x[1]), [1.0, 1.0]),
    "fmin": (lambda x, np: np.fmin(x[0], x[1]), [1.0, 1.0]),
    "relu_at_0": (lambda x, np: np.sum(np.maximum(0.0, x)), [0.0, 1.0, -1.0]),
    "max_ties": (lambda x, np: np.max(x), [1.0, 1.0, 0.5]),
    "amin_3_ties": (lambda x, np: np.amin(x), [2.0, 2.0, 2.0]),
    "max_axis": (lambda x, np: np.sum(np.max(np.reshape(x, (2, 2)), axis=1)), [1.0, 1.0, 3.0, 3.0]),
    "max_in_memory": (lambda x, np: np.max(x), [1.0] * 20 + [3.0, 3.0]),
    "min_in_memory_axis": (
        lambda x, np: np.sum(np.min(np.reshape(x, (4, 5)), axis=0) * np.arange(5.0)),
        [2.0] * 20,
    ),
    "clip_at_bounds": (lambda x, np: np.sum(np.clip(x, -1.0, 1.0)), [1.0, -1.0, 0.5, 3.0]),
    "abs_at_0": (lambda x, np: np.sum(np.abs(x)), [0.0, 1.0, -2.0]),
    "logaddexp_tie": (lambda x, np: np.logaddexp(x[0], x[1]), [1.0, 1.0]),
    "abs_complex_at_0": (lambda x, np: np.abs(x[0] + 1j * x[1]), [0.0, 0.0]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_grad_at_a_tie_matches_pennylane_autograd(name):
    fn, x = CASES[name]
    expected = qml.grad(lambda v: fn(v, pnp))(pnp.array(x, requires_grad=True))
    got = cofactor.qjit(cofactor.grad(lambda v: fn(v, np)))(np.array(x))
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)


def test_tie_values_stay_numpys_with_signed_zeros_and_non_finite_values():
    vals = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 5e-324, 1e308]
    pairs = np.array([(a, b) for a in vals for b in vals])
    for n in (4, len(pairs)):  # per element and in memory
        x, y = pairs[:n, 0].copy(), pairs[:n, 1].copy()
        for f in (np.maximum, np.minimum, np.fmax, np.fmin, np.logaddexp):
            with np.errstate(invalid="ignore"):  # (numpy's reference: inf - inf)
                want = f(x, y)
            got = cofactor.qjit(lambda a, b, f=f: f(a, b))(x, y)
            np.testing.assert_array_equal(got, want, err_msg=f.__name__)
            if f in (np.fmax, np.fmin):
                continue  # (numpy's own sign of fmax(0.0, -0.0) depends on the array's length)
            signs = ~np.isnan(want)
            assert np.array_equal(np.signbit(got)[signs], np.signbit(want)[signs]), f.__name__
        got = cofactor.qjit(lambda a: np.clip(a, -1.0, 1.0))(x)
        np.testing.assert_array_equal(got, np.clip(x, -1.0, 1.0))
        assert np.array_equal(np.signbit(got), np.signbit(np.clip(x, -1.0, 1.0)))


@pytest.mark.parametrize("shape", [(3,), (22,)])
def test_max_of_ties_keeps_the_value(shape):
    for fill in (2.0, -0.0, np.inf, -np.inf):
        x = np.full(shape, fill)
        for red in (np.max, np.min):
            got = cofactor.qjit(lambda v, red=red: red(v))(x)
            assert got == red(x) and np.signbit(got) == np.signbit(red(x)), (fill, red)
    x = np.full(shape, 1.0)
    x[1] = np.nan
    assert np.isnan(cofactor.qjit(lambda v: np.max(v))(x))


@pytest.mark.parametrize("shape", [(3,), (22,)])
def test_max_of_ties_under_differentiation_keeps_the_value(shape):
    # the tie-sharing form is only emitted where Enzyme differentiates: its value there
    for fill in (2.0, -0.0, np.inf, -np.inf):
        x = np.full(shape, fill)
        for red in (np.max, np.min):
            value, g = cofactor.qjit(cofactor.value_and_grad(lambda v, red=red: red(v)))(x)
            assert value == red(x) and np.signbit(value) == np.signbit(red(x)), (fill, red)
            assert np.sum(g) == pytest.approx(1.0) and np.all(g >= 0), (fill, red, g)
    x = np.full(shape, 1.0)
    x[1] = np.nan
    value, _ = cofactor.qjit(cofactor.value_and_grad(lambda v: np.max(v)))(x)
    assert np.isnan(value)


def test_complex_abs_and_hypot_neither_overflow_nor_underflow():
    # sqrt(re^2 + im^2) gave inf for 1e308 and 0 for 5e-324; numpy's hypot gives neither
    x = np.array([1e308, 3e200, 5e-324, 3e-200, 0.0, np.inf, np.nan, 3.0])
    y = np.array([1e308, 4e200, 5e-324, 4e-200, 0.0, np.nan, np.inf, 4.0])
    got = cofactor.qjit(lambda a, b: np.hypot(a, b))(x, y)
    np.testing.assert_allclose(got, np.hypot(x, y), rtol=1e-15)
    with np.errstate(invalid="ignore"):  # (1j * inf has a NaN real part, as in numpy)
        z = x + 1j * y
    got = cofactor.qjit(lambda v: np.abs(v))(z)
    np.testing.assert_allclose(got, np.abs(z), rtol=1e-15)
