"""np.take with traced indices is numpy's take: indexing along `axis` (the flattened array
when None), negative indices from the end, mode "wrap" / "clip", an index out of range an
IndexError. (It raised "Cannot cast array data from dtype('O') to dtype('int64')".)"""

from __future__ import annotations

import numpy as np
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain

A = np.arange(24.0).reshape(4, 6) - 7.5


@pytest.mark.parametrize(
    "kw", [{}, {"axis": 1}, {"axis": -2}, {"axis": 0, "mode": "wrap"}, {"axis": 1, "mode": "clip"}]
)
@pytest.mark.parametrize("indices", [[-1, 3], [[0, 5], [-2, 1]], [7, -9]])
def test_take_with_traced_indices_is_numpys(kw, indices):
    indices = np.array(indices)

    def f(a, i):
        return np.take(a, i, **kw)

    try:
        want = f(A, indices)
    except IndexError:
        with pytest.raises(IndexError, match="out of bounds"):
            cofactor.qjit(f)(A, indices)
        return
    got = cofactor.qjit(f)(A, indices)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_take_method_and_gradient():
    x = np.array([0.5, 1.0, 2.0, 3.0, 4.0])
    got = cofactor.qjit(lambda a, i: a.take(i))(x, np.array([-1, 0]))
    np.testing.assert_array_equal(got, [4.0, 0.5])
    g = cofactor.qjit(cofactor.grad(lambda a, i: np.sum(np.take(a, i) ** 2)))(
        x, np.array([1, 1, -1])
    )
    np.testing.assert_allclose(g, [0.0, 4.0, 0.0, 0.0, 8.0])


def test_take_bad_axis_is_numpys_error():
    with pytest.raises(np.exceptions.AxisError):
        cofactor.qjit(lambda a, i: np.take(a, i, axis=2))(A, np.array([0]))
