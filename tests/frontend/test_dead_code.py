"""Dead code of a differentiated function is removed before Enzyme sees it (ir/dead_code.py).

Enzyme fails ("Illegal replace ficticious phi") on unused C math library calls (tanh,
arctan) on a differentiated array that a loop of the same function also reads: an unused
`for_loop`, `while_loop` or `cond`, a loop carrying values nobody reads, or a plain unused
`np.tanh(x[0])` (A11). The gradients must be right, and code whose effects are observable
(callbacks, quantum circuits, runtime errors, values that are read later) must stay.
"""

from __future__ import annotations

import re

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor.errors import CompileError

pytestmark = [
    pytest.mark.needs_toolchain,
    pytest.mark.filterwarnings("ignore:Output seems independent of input"),
]

RNG = np.random.default_rng(11)
A0, A1, A2 = RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=(5, 6, 4))
for_loop, while_loop, cond = cofactor.for_loop, cofactor.while_loop, cofactor.cond


def _differences(f, args, h=1e-6):
    out = []
    for k, a in enumerate(args):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            up, down = [x.copy() for x in args], [x.copy() for x in args]
            up[k][i] += h
            down[k][i] -= h
            g[i] = (f(*up) - f(*down)) / (2 * h)
        out.append(g)
    return out


def _updated_copy(a1, a2):
    t0 = a2.copy()
    t0[-1] -= a1
    return t0


def unused_for_loop(a0, a1, a2):
    for_loop(0, 1, 1)(lambda i, acc: np.tanh(acc))(_updated_copy(a1, a2))
    return np.sum(np.sin(a2 * a0))


def unused_loop_without_update(a0, a1, a2):
    for_loop(0, 2, 1)(lambda i, acc: np.tanh(acc))(a2.copy())
    return np.sum(np.sin(a2 * a0))


def one_carried_element_used(a0, a1, a2):
    r = for_loop(0, 2, 1)(lambda i, acc: np.tanh(acc))(_updated_copy(a1, a2))
    return np.sum(np.sin(a2 * a0)) + r[-1, 0, 1]


def one_of_two_carried_values_used(a0, a1, a2):
    body = lambda i, acc, s: (np.tanh(acc), s * np.cos(a0[0]))  # noqa: E731
    _, s = for_loop(0, 3, 1)(body)(_updated_copy(a1, a2), a1[1])
    return np.sum(np.sin(a2 * a0)) + s


def unused_while_loop(a0, a1, a2):
    loop = while_loop(lambda i, acc: i < 2)(lambda i, acc: (i + 1, np.tanh(acc)))
    loop(0, _updated_copy(a1, a2))
    return np.sum(np.sin(a2 * a0))


def unused_cond(a0, a1, a2):
    t0 = _updated_copy(a1, a2)
    cond(a0[0] > 0)(lambda: np.tanh(t0)).otherwise(lambda: np.arctan(t0))()
    return np.sum(np.sin(a2 * a0))


def unused_loop_inside_a_used_loop(a0, a1, a2):
    def body(i, x):
        for_loop(0, 2, 1)(lambda j, acc: np.tanh(acc))(_updated_copy(a1 * x, a2))
        return x * np.cos(a0[1])

    return np.sum(np.sin(a2 * a0)) + for_loop(0, 2, 1)(body)(a0[0])


def unused_scalar_tanh(a0, a1, a2):
    np.tanh(a2[0, 0, 0])
    np.arctan(a2[0, 0, 0] * a1[0])
    return np.sum(a2 * a0)


def used_loop(a0, a1, a2):  # (worked before: the live code must stay)
    r = for_loop(0, 3, 1)(lambda i, acc: np.tanh(acc))(_updated_copy(a1, a2))
    return np.sum(r * a0) + np.tanh(a2[0, 0, 0])


@pytest.mark.parametrize(
    "f",
    [
        unused_for_loop,
        unused_loop_without_update,
        one_carried_element_used,
        one_of_two_carried_values_used,
        unused_while_loop,
        unused_cond,
        unused_loop_inside_a_used_loop,
        unused_scalar_tanh,
        used_loop,
    ],
)
def test_gradients_with_unused_code_compile_and_are_right(f) -> None:
    got = cofactor.qjit(cofactor.grad(f, argnums=(0, 1, 2)))(A0, A1, A2)
    for g, want in zip(got, _differences(f, (A0, A1, A2)), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
    value, _ = cofactor.qjit(cofactor.value_and_grad(f, argnums=0))(A0, A1, A2)
    np.testing.assert_allclose(value, f(A0, A1, A2), rtol=1e-12)


def _primal(compiled) -> str:
    """The text of the differentiated function in a compiled program's module."""
    text = compiled.mlir
    start = re.search(r"func\.func private @\w+_primal\(", text).start()
    return text[start : text.index("\n  }\n", start)]


def test_the_differentiated_function_keeps_only_live_code() -> None:
    f = cofactor.qjit(cofactor.grad(one_carried_element_used, argnums=0))
    f(A0, A1, A2)
    primal = _primal(f)
    assert primal.count("scf.while") == 1
    assert primal.count("math.tanh") == 1  # one carried element of 120 is read
    f = cofactor.qjit(cofactor.grad(unused_for_loop, argnums=0))
    f(A0, A1, A2)
    primal = _primal(f)
    assert "scf.while" not in primal and "tanh" not in primal
    assert "memref.alloc() : memref<6x4xf64>" not in primal  # the updated row: only written


def test_loops_with_effects_stay(capfd) -> None:
    """An unused loop that calls back into Python, runs a circuit or prints still runs."""
    calls = []

    @cofactor.debug.callback
    def log(x):
        calls.append(float(x))

    dev = qml.device("lightning.qubit", wires=1)

    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    def logged(i, acc):
        log(acc)
        return np.tanh(acc)

    def printed(i, acc):
        cofactor.debug.print("acc =", acc)
        return np.tanh(acc)

    def f(x):
        for_loop(0, 3, 1)(logged)(x[0])
        for_loop(0, 2, 1)(lambda i, acc: acc + np.tanh(circuit(acc)))(x[1])
        for_loop(0, 1, 1)(printed)(x[1])
        return np.sum(np.sin(x))

    x = np.array([0.3, 0.4])
    capfd.readouterr()
    g = cofactor.qjit(cofactor.grad(f))(x)
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(calls, [0.3, np.tanh(0.3), np.tanh(np.tanh(0.3))], rtol=1e-12)
    assert capfd.readouterr().out == "acc = 0.4\n"


def test_unused_loop_that_indexes_out_of_bounds_still_reports_it() -> None:
    """A traced index out of bounds in an unused loop is still reported (the bounds check
    calls the runtime: an effect)."""

    def f(x, k):
        for_loop(0, 2, 1)(lambda i, acc: acc + np.tanh(x[k + i]))(0.0)
        return np.sum(np.sin(x))

    compiled = cofactor.qjit(cofactor.grad(f, argnums=0))
    np.testing.assert_allclose(compiled(A0, 1), np.cos(A0))
    with pytest.raises((IndexError, CompileError, ValueError, RuntimeError)):
        compiled(A0, 3)


def test_values_written_in_a_loop_and_read_later_stay() -> None:
    """Stores into a buffer that a later op reads are live, even when the loop's own
    results are unused (the loop nests of elementwise array ops write such buffers)."""

    def f(a0, a2):
        y = np.tanh(a2 * a0)  # a loop nest writing a buffer
        for_loop(0, 2, 1)(lambda i, acc: np.tanh(acc))(y)  # unused
        z = np.arctan(y)  # reads the buffer
        return np.sum(z[1:] * a2[:-1])

    got = cofactor.qjit(cofactor.grad(f, argnums=(0, 1)))(A0, A2)
    for g, want in zip(got, _differences(f, (A0, A2)), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
