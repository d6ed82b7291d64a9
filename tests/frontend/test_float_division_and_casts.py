"""Float `//`, `%` and divmod are numpy's (and Python's): the quotient of x - fmod(x, y),
not floor(x / y) (1.0 // 0.1 is 9.0, floor(1.0 / 0.1) is 10.0; -5.0 // inf is -1.0; inf // 2
is NaN), a zero remainder with the divisor's sign (-4.0 % 2.0 is 0.0); a complex value cast
to bool is nonzero when either part is. Found by test_fuzz_dtypes.py."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor

pytestmark = pytest.mark.needs_toolchain

SPECIAL = [1.0, -5.0, 5.0, np.inf, -np.inf, np.nan, -4.0, 4.0, 0.0, -0.0, 7.5, -7.5, 1e300]
SPECIAL += [0.3, 0.1, 0.2, 0.7, -0.7, 3.0, -3.0, 1e-10, 5e-324, 2.0, -2.0]
X = np.array([a for a in SPECIAL for _ in SPECIAL])
Y = np.array([b for _ in SPECIAL for b in SPECIAL])


def _same(got, want):
    same = (np.isnan(want) & np.isnan(got)) | (
        (want == got) & (np.signbit(want) == np.signbit(got))
    )
    assert np.all(same), list(zip(X[~same], Y[~same], want[~same], got[~same], strict=True))[:5]


@pytest.mark.parametrize("n", [4, len(X)])  # per element, in memory
def test_float_floor_divide_and_remainder_are_numpys(n):
    got = cofactor.qjit(lambda a, b: (a // b, a % b, *np.divmod(a, b), np.fmod(a, b)))(X[:n], Y[:n])
    with np.errstate(all="ignore"):
        want = (X[:n] // Y[:n], X[:n] % Y[:n], *np.divmod(X[:n], Y[:n]), np.fmod(X[:n], Y[:n]))
    for g, w in zip(got, want, strict=True):
        _same(np.asarray(g), w)
    assert cofactor.qjit(lambda a, b: a // b)(1.0, 0.1) == 9.0


def test_remainder_gradient_at_a_zero_remainder_is_autograds():
    x, y = np.array([-4.0, 4.0, 1.0, 7.5, -3.0]), np.array([2.0, -2.0, 0.1, 0.7, 0.7])

    def f(a, b, np=np):
        return np.sum(np.mod(a, b) * np.arange(1.0, 6.0)) + np.sum(np.floor_divide(a, b))

    got = cofactor.qjit(cofactor.grad(f, argnums=(0, 1)))(x, y)
    xa, ya = pnp.array(x, requires_grad=True), pnp.array(y, requires_grad=True)
    want = qml.grad(lambda a, b: f(a, b, pnp), argnums=[0, 1])(xa, ya)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14)


@pytest.mark.parametrize("n", [3, 20])
def test_complex_to_bool_is_nonzero_in_either_part(n):
    z = np.resize(np.array([0j, -0.5j, 2.0 + 0j, complex(0.0, np.nan), -0.0 - 0.0j]), n)
    got = cofactor.qjit(lambda v: (v.astype(bool), np.logical_not(v)))(z)
    np.testing.assert_array_equal(got[0], z.astype(bool))
    np.testing.assert_array_equal(got[1], np.logical_not(z))
