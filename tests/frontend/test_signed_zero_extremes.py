"""np.max/np.min of arrays mixing +0.0 and -0.0 give numpy's zero sign: numpy's reduction is
the fold `maximum(acc, x)`, which returns x on a tie, so the last of equal zeros decides.
(numpy's own SIMD loops, for contiguous runs of 1 + k * lanes elements, may return the other
zero: that order depends on the CPU numpy dispatches to, so the fold is the reference.)"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


def _fold(ufunc: np.ufunc, a: np.ndarray, axis: int | None) -> np.ndarray:
    if axis is None:
        return functools.reduce(ufunc, a.ravel())
    return np.apply_along_axis(lambda r: functools.reduce(ufunc, r), axis, a)


@pytest.mark.parametrize("shape", [(2, 3), (4, 6), (6, 7)])  # per element, then in memory
def test_max_min_of_signed_zeros_keep_numpys_sign(shape):
    rng = np.random.default_rng(7)
    compiled = cofactor.qjit(lambda v: (np.max(v, axis=1), np.min(v, axis=0), np.max(v), np.min(v)))
    for _ in range(12):
        a = rng.choice([0.0, -0.0, -1.0], size=shape)
        got = compiled(a)
        want = [
            _fold(np.maximum, a, 1),
            _fold(np.minimum, a, 0),
            _fold(np.maximum, a, None),
            _fold(np.minimum, a, None),
        ]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
            assert np.array_equal(np.signbit(g), np.signbit(w)), (a, g, w)
    # rows of 6 are below numpy's SIMD width: its np.max is the fold there
    a = np.array([[0.0, -0.0, 0.0, -1.0, -0.0, -0.0]] * 4)
    got = compiled(a)[0]
    assert np.array_equal(np.signbit(got), np.signbit(np.max(a, axis=1)))
    assert np.all(np.signbit(got))  # the last zero, -0.0 (the first extreme was +0.0)


def test_max_of_signed_zeros_under_differentiation_keeps_the_sign():
    a = np.array([0.0] * 11 + [-0.0] * 11)  # 22 elements: in memory
    value, g = cofactor.qjit(cofactor.value_and_grad(lambda v: np.max(v)))(a)
    assert value == 0.0 and np.signbit(value)  # numpy's fold: the last zero
    assert np.sum(g) == pytest.approx(1.0)
