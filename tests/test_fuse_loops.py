"""`--cofactor-fuse-loops` (mlir_passes/lib/Transforms/FuseLoops.cpp) on traced programs:
adjacent loops with the same iterations become one loop and the buffers between them
values, only where no access is reordered. The values and gradients of programs it fuses,
and of programs whose loops must stay apart (shifted, reversed and transposed reuse of a
buffer), against numpy and finite differences. The pass's IR itself is checked by
tests/mlir/fuse_loops.mlir."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cofactor
from cofactor import compiler

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("COFACTOR_DISABLE_CACHE", "1")


def _finite_differences(f, x, eps=1e-6):
    fd = np.zeros_like(x)
    for pos in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[pos] += eps
        lo[pos] -= eps
        fd[pos] = (f(hi) - f(lo)) / (2 * eps)
    return fd


def test_the_pass_runs_first_in_both_pipelines():
    assert compiler.LOWERING_PASSES[0] == "--cofactor-fuse-loops"


def test_tanh_layer_elementwise_loops_are_one_loop_before_enzyme():
    """sum(tanh(W @ x)**2): the tanh, square and sum loops are one loop, so the function
    Enzyme differentiates allocates one buffer (W @ x) instead of three; the gradient is
    the analytic one."""
    n = 48
    w = RNG.uniform(-1, 1, (n, n)) / np.sqrt(n)
    x = RNG.uniform(-1, 1, n) / np.sqrt(n)

    def loss(w):
        return np.sum(np.tanh(w @ x) ** 2)

    g = cofactor.qjit(cofactor.grad(loss))
    t = np.tanh(w @ x)
    np.testing.assert_allclose(g(w), np.outer(2 * t * (1 - t**2), x), rtol=1e-12, atol=1e-15)
    llvmir = g._last.library.stage("llvmir")
    primal = re.search(r"define [^\n]*@loss_primal\(.*?\n}\n", llvmir, re.S)
    assert primal is not None, llvmir
    assert len(re.findall(r"call ptr @malloc", primal.group(0))) == 1, primal.group(0)
    # three loops (rows and the dot product in each row; the fused one): three headers
    assert len(re.findall(r"icmp slt i64", primal.group(0))) == 3, primal.group(0)


@pytest.mark.parametrize(
    "fn",
    [
        # fused: elementwise chains, broadcasting, reductions over an axis
        lambda a, b: np.sum(np.exp(a) * np.cos(a) + b, axis=1),
        lambda a, b: np.tanh(a @ b.T) ** 2 + 1.0,
        lambda a, b: np.mean(np.sin(a) * b, axis=0) - np.max(a, axis=0),
        # kept apart: a buffer read at other positions than the loop writes them
        lambda a, b: np.sin(a)[::-1] * np.sin(a),
        lambda a, b: (np.exp(a) @ np.exp(a).T) + np.exp(a)[:, :1],
        lambda a, b: np.cos(a).T @ np.sin(b),
        lambda a, b: np.sin(a)[1:] - np.sin(a)[:-1],
    ],
    ids=["exp-cos-sum", "tanh-matmul", "mean-max", "reversed", "gram", "transposed", "shifted"],
)
def test_values_match_numpy(fn):
    a = RNG.normal(size=(5, 5))
    b = RNG.normal(size=(5, 5))
    got = cofactor.qjit(fn)(a, b)
    np.testing.assert_allclose(got, fn(a, b), rtol=1e-12, atol=1e-12)


def test_gradients_of_fused_and_unfused_loops_match_finite_differences():
    c = RNG.normal(size=6)

    def f(a):
        s = np.sin(a)  # fused with the product below
        r = s[::-1] * s  # a reversed read keeps this loop apart from sin's
        return np.sum(np.tanh(a @ c) ** 2) + np.sum(r * np.cos(a)) + np.sum(np.exp(a).T @ c)

    a = RNG.normal(size=(6, 6)) / 3
    g = cofactor.qjit(cofactor.grad(f))(a)
    np.testing.assert_allclose(g, _finite_differences(f, a), rtol=1e-6, atol=1e-8)
