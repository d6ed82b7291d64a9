"""Writes into traced arrays that numpy views share memory with (tracing/aliasing.py).

numpy's basic indexing, reshape, transpose, ravel, ... return views: a write through one
array shows in the others. Traced arrays hold their own elements, so such a program used to
return the old numbers silently; then using such a view raised a CompileError; now the
write is followed into every live view, as numpy's memory would show it. Views whose
places are only known at run time (np.real of a complex array) still raise.
"""

from __future__ import annotations

import numpy as np
import pytest

import cofactor
from cofactor.errors import CompileError
from cofactor.tracing import aliasing

pytestmark = pytest.mark.needs_toolchain

X = np.arange(1.0, 5.0)


def row_read_after_writing_the_matrix(x):
    m = np.outer(x, x)
    row = m[0]
    m[0, 0] = -1.0
    return row


def matrix_read_after_writing_a_row(x):
    m = np.outer(x, x)
    row = m[1]
    row[0] = 7.0
    return m


def reshaped_read_after_writing(x):
    y = x.copy()
    r = y.reshape(2, 2)
    y[3] = 0.0
    return r


def transposed_written(x):
    m = np.outer(x, x[:2])
    t = m.T
    t[0, 1] = 5.0
    return m


def numpy_swap_of_rows(x):  # numpy: both rows end up equal to row 1
    m = np.outer(x, x)
    m[0], m[1] = m[1], m[0]
    return m


@pytest.mark.parametrize(
    "f",
    [
        row_read_after_writing_the_matrix,
        matrix_read_after_writing_a_row,
        reshaped_read_after_writing,
        transposed_written,
        numpy_swap_of_rows,
    ],
)
def test_a_write_through_one_view_shows_in_the_others_as_in_numpy(f) -> None:
    np.testing.assert_allclose(cofactor.qjit(f)(X), f(X.copy()), rtol=1e-14)


def views_unused_after_the_write(x):
    m = np.outer(x, x)
    row = m[0].copy()  # a copy: independent
    s = np.sum(m[1])  # a view, gone before the write
    m[0, 0] = -1.0
    row[1] = 9.0
    v = m[2]
    return m, row, s, v  # v made after the write


def scalar_swap(x):
    y = x.copy()
    y[0], y[1] = y[1], y[0]  # scalars are copies in numpy too
    return y


def write_through_a_view_of_an_argument(x):
    v = x.reshape(2, 2).T
    v[0, 1] = 5.0
    return v


@pytest.mark.parametrize(
    "f", [views_unused_after_the_write, scalar_swap, write_through_a_view_of_an_argument]
)
def test_writes_without_stale_views_match_numpy(f) -> None:
    got = cofactor.qjit(f)(X)
    want = f(X.copy())
    for g, w in zip(
        got if isinstance(got, tuple) else (got,),
        want if isinstance(want, tuple) else (want,),
        strict=True,
    ):
        np.testing.assert_allclose(g, w, rtol=1e-14)


def test_in_place_operators_write_into_the_array_as_in_numpy() -> None:
    """`t += v` writes into `t`'s memory, as numpy's does: the array it was sliced from
    changes too (it used to rebind `t`, as JAX does, leaving `y` unchanged: a wrong number)."""

    def f(x):
        y = x.copy()
        t = y[1:]
        t += 1.0
        return y, t

    y, t = cofactor.qjit(f)(X)
    np.testing.assert_allclose(y, [X[0], *(X[1:] + 1.0)])
    np.testing.assert_allclose(t, X[1:] + 1.0)


def test_elementwise_use_of_a_stale_view_names_the_write() -> None:
    """A view cofactor cannot follow (the real part of a complex array), used elementwise
    after a write (`r * 2.0`), says what happened rather than "cannot trace a value of type
    Stale"."""

    def f(x):
        c = x * (1.0 + 2.0j)
        r = np.real(c)
        c[0] = 5.0
        return r * 2.0

    with pytest.raises(CompileError, match="shares memory with another one"):
        cofactor.qjit(f)(X)


def test_rows_kept_alive_cost_linear_bookkeeping(monkeypatch) -> None:
    """A circuit that reads `weights[l, w]` for every gate keeps each row alive until the
    QNode emits its gates: the list of views sharing memory must not be swept for dead
    ones at every new view (it was: 80-layer StronglyEntanglingLayers spent half its
    tracing time there). The numbers stay numpy's, a write still reaching every row."""
    scanned: list[int] = []
    sweep = aliasing.MemoryGroup.alive

    def counting_sweep(group: aliasing.MemoryGroup) -> list:
        scanned.append(len(group.members))
        return sweep(group)

    monkeypatch.setattr(aliasing.MemoryGroup, "alive", counting_sweep)
    n = 200

    def f(x):
        m = np.reshape(x.copy(), (n, 1))
        rows = [m[i] for i in range(n)]
        m[0, 0] = -1.0
        return sum(r[0] * (i + 1) for i, r in enumerate(rows))

    x = np.linspace(0.0, 1.0, n)
    np.testing.assert_allclose(cofactor.qjit(f)(x), f(x.copy()), rtol=1e-12)
    assert sum(scanned) <= 4 * n, f"{sum(scanned)} view references swept for {n} rows"
