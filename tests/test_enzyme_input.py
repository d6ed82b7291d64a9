"""What the in-process driver changes in a module before Enzyme differentiates it
(compiler/EnzymeInput.cpp): small temporaries of the differentiated function on the stack,
captured constant arrays hidden from Enzyme's type analysis and restored before O2. The
gradient stays the same number (analytic, and the subprocess pipeline, which runs `opt` on
the module as it is)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cofactor
from cofactor import compiler, native_compiler


@pytest.fixture(autouse=True)
def _needs_library(monkeypatch):
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")
    monkeypatch.setenv("COFACTOR_DISABLE_CACHE", "1")


def _tanh_gradient(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n) / np.sqrt(n)
    w = rng.uniform(-1, 1, (n, n)) / np.sqrt(n)

    def loss(w):
        return np.sum(np.tanh(w @ x) ** 2)

    t = np.tanh(w @ x)
    return loss, w, np.outer(2 * t * (1 - t**2), x)


def _three_temporaries(n: int, seed: int):
    """Three buffers each read reversed by the next operation, so that
    --cofactor-fuse-loops does not merge their loops and remove them."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n) / np.sqrt(n)
    w = rng.uniform(-1, 1, (n, n)) / np.sqrt(n)

    def loss(w):
        z = np.tanh((w @ x)[::-1])
        u = np.sin(z[::-1])
        return np.sum(u[::-1] ** 2)

    t = np.tanh(w @ x)
    return loss, w, np.outer(2 * np.sin(t) * np.cos(t) * (1 - t**2), x)


def test_small_temporaries_of_a_differentiated_function_live_on_the_stack(monkeypatch):
    loss, w, want = _tanh_gradient(64, seed=7)
    got = {}
    for pipeline in ("inprocess", "subprocess"):
        monkeypatch.setenv(compiler.PIPELINE_ENV, pipeline)
        g = cofactor.qjit(cofactor.grad(loss))
        got[pipeline] = np.asarray(g(w))
        np.testing.assert_allclose(got[pipeline], want, rtol=1e-12, atol=1e-15)
        if pipeline == "inprocess":
            optimized = g._last.library.stage("llvmir_opt")
    np.testing.assert_allclose(got["inprocess"], got["subprocess"], rtol=1e-14, atol=1e-17)
    # The 512-byte temporary W @ x (and Enzyme's shadow of it) are stack slots; before,
    # the primal and its shadow called malloc and free. (The tanh and square loops are
    # fused with the sum's, --cofactor-fuse-loops, and need no buffer.)
    assert "alloca [512 x i8]" in optimized
    assert not re.search(r"call [^\n]*@malloc\(", optimized), optimized
    # the captured x is a constant with its values again after Enzyme
    (x_global,) = [line for line in optimized.splitlines() if line.startswith("@__cf_const")]
    assert "private" in x_global and "constant [64 x double] [double" in x_global


def test_temporaries_past_the_stack_budget_stay_on_the_heap(monkeypatch):
    """Three temporaries of 12,000 bytes: two fit in the 32 KiB a function may take on the
    stack, the third is still malloc'ed."""
    monkeypatch.setenv(compiler.PIPELINE_ENV, "inprocess")
    loss, w, want = _three_temporaries(1500, seed=3)
    g = cofactor.qjit(cofactor.grad(loss))
    np.testing.assert_allclose(g(w), want, rtol=1e-12, atol=1e-16)
    optimized = g._last.library.stage("llvmir_opt")
    assert "alloca [12000 x i8]" in optimized
    assert "@malloc(i64 12000)" in optimized
