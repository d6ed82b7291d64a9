"""How a call reaches compiled code: int64 overflow (D8), keyword-only parameters (D12),
static-argument cache keys and unloading dropped libraries (D17)."""

from __future__ import annotations

import gc
import math
from pathlib import Path

import numpy as np
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


# ---- D8: ints outside int64 raise OverflowError, as numpy does ------------------------------
@pytest.fixture(scope="module")
def inc() -> cofactor.QJIT:
    f = cofactor.qjit(lambda n: n + 1)
    assert f(5) == 6
    return f


@pytest.mark.parametrize("value", [2**63, 2**70, -(2**63) - 1, -(2**70)])
def test_python_ints_outside_int64_raise_overflow_error(inc, value):
    with pytest.raises(OverflowError):
        np.int64(value)  # numpy's behaviour, which the call follows
    with pytest.raises(OverflowError, match="too large to convert"):
        inc(value)
    assert inc(41) == 42  # the fast path still works afterwards


def test_int64_limits_are_accepted(inc):
    assert inc(2**63 - 2) == 2**63 - 1
    assert inc(-(2**63)) == -(2**63) + 1


def test_uint64_above_int64_raises_overflow_error(inc):
    with pytest.raises(OverflowError, match="does not fit in int64"):
        inc(np.uint64(2**64 - 1))
    assert inc(np.uint64(7)) == 8
    total = cofactor.qjit(lambda v: np.sum(v))
    assert total(np.array([1, 2], dtype=np.uint64)) == 3
    for _ in range(2):  # also once the array signature is known
        with pytest.raises(OverflowError, match="does not fit in int64"):
            total(np.array([1, 2**63], dtype=np.uint64))


def test_lists_of_huge_ints_raise_overflow_error():
    total = cofactor.qjit(lambda v: np.sum(v))
    assert total([1, 2]) == 3
    with pytest.raises(OverflowError, match="too large to convert"):
        total([1, 2**70])
    with pytest.raises(OverflowError):
        total([1, -(2**70)])


# ---- D12: keyword-only parameters -----------------------------------------------------------
def test_keyword_only_parameters_are_traced():
    @cofactor.qjit
    def f(x, *, k):
        return x * k

    assert f(1.0, k=3.0) == 3.0
    assert f(2.0, k=0.5) == 1.0
    assert f.compile_count == 1  # k is traced, not baked in
    with pytest.raises(TypeError, match="missing a required keyword-only argument|'k'"):
        f(1.0)
    with pytest.raises(TypeError):
        f(1.0, 2.0)  # k cannot be given by position


def test_keyword_only_defaults_and_kwargs():
    @cofactor.qjit
    def g(x, *args, scale=2.0, **extra):
        return x * scale + sum(args) + sum(extra.values())

    assert g(1.0) == 2.0
    assert g(1.0, scale=3.0) == 3.0
    assert g(1.0, 10.0, 20.0, scale=1.0, a=100.0) == 131.0
    assert g(1.0, 10.0, 20.0, scale=1.0, a=200.0) == 231.0


def test_grad_passes_keyword_only_arguments_through():
    def f(x, *, k):
        return np.sin(x) * k

    @cofactor.qjit
    def g(x, k):
        return cofactor.grad(f)(x, k=k), cofactor.grad(f)(x, k=2.0)

    traced, constant = g(0.3, 3.0)
    assert traced == pytest.approx(3.0 * np.cos(0.3), abs=1e-12)
    assert constant == pytest.approx(2.0 * np.cos(0.3), abs=1e-12)


# ---- D17: static keys, unloading ------------------------------------------------------------
def test_nan_static_argument_compiles_once():
    f = cofactor.qjit(lambda x, s: x + s, static_argnums=1)
    assert math.isnan(f(1.0, float("nan")))
    assert math.isnan(f(1.0, float("nan")))
    assert math.isnan(f(1.0, np.float64("nan")))
    assert f.compile_count == 2  # float and np.float64 are different static values
    assert f(1.0, 2.0) == 3.0
    assert f.compile_count == 3


def test_signed_zero_static_arguments_are_different():
    f = cofactor.qjit(lambda x, s: x / s, static_argnums=1)
    with np.errstate(divide="ignore"):
        assert f(1.0, 0.0) == np.inf
        assert f(1.0, -0.0) == -np.inf


def test_equal_static_numbers_of_different_types_compile_apart():
    # 1 == 1.0 == True (one hash/eq key in JAX and Catalyst), but a program tells them apart
    def by_type(x, n):
        return x + (1.0 if isinstance(n, bool) else 2.0 if isinstance(n, int) else 3.0)

    kind = cofactor.qjit(by_type, static_argnums=1)
    assert [kind(0.0, n) for n in (True, 1, 1.0, np.int64(1))] == [1.0, 2.0, 3.0, 3.0]
    assert kind.compile_count == 4
    full = cofactor.qjit(lambda n: np.full(2, n), static_argnums=0)
    for n in (1, 1.0, True, (1,), (1.0,)):
        want = np.full(2, n[0] if isinstance(n, tuple) else n)
        got = full(n[0]) if isinstance(n, tuple) else full(n)
        assert got.dtype == want.dtype and np.array_equal(got, want), n
    halves = cofactor.qjit(lambda n: (n[0] / 2, n[0] // 2), static_argnums=0)
    (a, b), (c, d) = halves((3,)), halves((3.0,))
    assert (a, b, c, d) == (1.5, 1, 1.5, 1.0)
    assert np.asarray(b).dtype.kind == "i" and np.asarray(d).dtype.kind == "f"


def _mapping_lines() -> int:
    return len(Path("/proc/self/maps").read_text().splitlines())


def _make(k: int) -> cofactor.QJIT:
    scale = float(k) + 0.5  # a different program (and library) for every k
    return cofactor.qjit(lambda x: x * scale)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_dropped_compiled_functions_are_unloaded():
    for k in range(2):  # warm up whatever the first compilations load once
        assert _make(k)(2.0) == 2.0 * (k + 0.5)
    gc.collect()
    before = _mapping_lines()
    n = 8
    for k in range(2, 2 + n):
        f = _make(k)
        assert f(2.0) == 2.0 * (k + 0.5)
        del f
        gc.collect()
    growth = _mapping_lines() - before
    # each library that stayed loaded would add about five mappings
    assert growth < n, f"/proc/self/maps grew by {growth} lines over {n} dropped functions"
