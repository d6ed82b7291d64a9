"""Complex division is numpy's (Smith's method): x * conj(y) / |y|^2 overflowed |y|^2 to inf
((1e300+1e300j) / (1e300+1e300j) gave NaN, not 1) and gave NaN for x / 0 (numpy: inf per
part). Compared bit for bit with numpy, special values included, and its gradient with
PennyLane's autograd."""

from __future__ import annotations

import itertools

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor

pytestmark = pytest.mark.needs_toolchain

_PARTS = [0.0, -0.0, 1.0, -2.5, 1e300, -1e-300, 5e-324, np.inf, np.nan]


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    def part(g, w):
        return (g == w) | (np.isnan(g) & np.isnan(w))

    return part(got.real, want.real) & part(got.imag, want.imag)


def test_complex_division_is_numpys_bit_for_bit():
    z = np.array([complex(a, b) for a, b in itertools.product(_PARTS, _PARTS)])
    pairs = np.array(list(itertools.product(z, z)))
    x, y = pairs[:, 0].copy(), pairs[:, 1].copy()
    with np.errstate(all="ignore"):
        want = x / y
    for n in (3, len(x)):  # per element and in memory
        got = cofactor.qjit(lambda a, b: a / b)(x[:n], y[:n])
        assert _same_bits(got, want[:n]).all(), [
            (x[k], y[k], got[k], want[k]) for k in np.nonzero(~_same_bits(got, want[:n]))[0][:5]
        ]


def test_complex_division_gradient_matches_pennylane():
    def f(v, np):
        return np.real((v[0] + 1j * v[1]) / (v[2] + 1j * v[3])) + np.imag(v[3] / (v[0] + 1j))

    v = np.array([1.0, 2.0, 0.5, -3.0])
    got = cofactor.qjit(cofactor.grad(lambda w: f(w, np)))(v)
    expected = qml.grad(lambda w: f(w, pnp))(pnp.array(v, requires_grad=True))
    np.testing.assert_allclose(got, expected, rtol=1e-13)
