"""numpy's dtype for products and reductions over empty axes, and empty selections (found by
the array fuzzer).

On the object arrays of traced elements numpy cannot tell an empty result's dtype, and a
sum over an empty axis is a Python 0: cofactor's results were float64 where numpy gives
int64 (`np.dot` of an empty int slice, `int_array[:0]` after a write) and int64 where numpy
gives float64 (`b @ c` of float arrays with an inner dimension 0).
"""

from __future__ import annotations

import numpy as np
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


def products(b, c, a):
    y = a * 1  # elements in the tracer (not loaded from memory): indexing keeps the dtype
    return (
        b @ c,
        np.matmul(a[:0], a),
        np.dot(a[:0], a),
        np.dot(b, c),
        np.tensordot(b, c, 1),
        np.einsum("ij,jk->ik", b, c),
        np.inner(b, b),
        np.outer(y[:0], y),
        np.kron(y[:0], y),
        y[:0],
        np.dot(a > 2, a.T > 1),
    )


def test_dtypes_of_empty_products_and_selections_are_numpys() -> None:
    args = (np.zeros((2, 0)), np.zeros((0, 3)), np.array([[1, 2], [3, 4]]))
    got = cofactor.qjit(products)(*args)
    want = products(*args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), k
        np.testing.assert_array_equal(g, w)


def reductions(a, b):
    t = a[:, 0:0]
    return (
        np.prod(t, axis=0),  # an empty result
        np.prod(b[:0], axis=0),  # a product over an empty axis: 1.0, not the int 1
        np.max(t, axis=0),
        np.all(b[:0] > 0, axis=0),
        np.prod(b[:, :0], axis=1),
    )


def test_dtypes_of_empty_reductions_are_numpys() -> None:
    args = (np.array([[5]]), np.array([[1.5, 2.0], [3.0, 4.0]]))
    got = cofactor.qjit(reductions)(*args)
    for k, (g, w) in enumerate(zip(got, reductions(*args), strict=True)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), k
        np.testing.assert_array_equal(g, w)
