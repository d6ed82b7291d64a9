"""Captured constant arrays reach the compiled code unchanged. Code generation in the
in-process driver emits large module-local constant arrays of numbers as arrays of bytes
(compiler/ConstantData.cpp): 1-D arrays, arrays of arrays (a matrix), each element type, and
arrays it leaves alone (bool, small ones) must read back as numpy has them, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import cofactor
from cofactor import native_compiler


@pytest.fixture(autouse=True)
def _needs_library(monkeypatch):
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")
    monkeypatch.setenv("COFACTOR_DISABLE_CACHE", "1")


_RNG = np.random.default_rng(13)
CONSTANTS = {
    "float64 vector": _RNG.normal(size=513),
    "float64 matrix": _RNG.normal(size=(37, 19)),
    "float64 3-d": _RNG.normal(size=(5, 4, 9)),
    "int64 vector": _RNG.integers(-(2**62), 2**62, size=300),
    "int64 matrix": _RNG.integers(-1000, 1000, size=(12, 30)),
    "bool vector": _RNG.integers(0, 2, size=200).astype(bool),
    "float64 small": _RNG.normal(size=7),
    "float64 with zero rows": np.vstack([np.zeros((4, 16)), _RNG.normal(size=(4, 16))]),
    "float64 specials": np.array([0.0, -0.0, np.inf, -np.inf, 5e-324, 1.0] * 20),
}


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_captured_constant_reads_back_bit_for_bit(name):
    constant = CONSTANTS[name]

    @cofactor.qjit
    def read(flag):
        # where() keeps the values as they are (no arithmetic that could round a NaN or
        # -0.0) and makes the result depend on the argument, so the constant is not folded
        # into the return
        return np.where(flag, constant, constant)

    got = np.asarray(read(True))
    assert got.dtype == constant.dtype and got.shape == constant.shape
    assert got.tobytes() == constant.tobytes()


def test_gradient_through_a_large_captured_matrix():
    """The gradient of a loss over a captured matrix (Enzyme sees the constant hidden,
    code generation gets it packed): the analytic value."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=(96, 80))
    b = rng.normal(size=96)

    def loss(x):
        return np.sum((a @ x - b) ** 2)

    x = rng.normal(size=80)
    got = cofactor.qjit(cofactor.grad(loss))(x)
    np.testing.assert_allclose(got, 2 * a.T @ (a @ x - b), rtol=1e-12, atol=1e-12)
