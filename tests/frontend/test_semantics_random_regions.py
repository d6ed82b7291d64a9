"""Random small programs mixing gates, for_loop, while_loop, cond, adjoint and ctrl, compiled
by cofactor and compared with uncompiled PennyLane (default.qubit), where the loops and conds
are plain Python (a bounded, seeded sample; compatibility items 1-3)."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pennylane as qml
import pytest

pytestmark = pytest.mark.needs_toolchain

WIRES = 3


def _program(rng: np.random.Generator, wires: list[int], depth: int) -> Callable:
    """A quantum function f(x) on `wires` (x: a float, traced when compiled)."""
    steps: list[Callable] = []
    for _ in range(int(rng.integers(2, 5))):
        kind = rng.choice(["gate", "gate", "for", "while", "cond", "adjoint", "ctrl"])
        if depth == 0 or (kind == "ctrl" and len(wires) < 2):
            kind = "gate"
        if kind == "gate":
            name = rng.choice(["RX", "RY", "RZ", "H", "S", "CNOT"] if len(wires) > 1 else ["RX"])
            w = (
                [int(v) for v in rng.choice(wires, size=2, replace=False)]
                if len(wires) > 1
                else wires
            )
            a, b = float(rng.normal()), float(rng.normal())
            steps.append(_gate(name, w, a, b))
        elif kind == "for":
            lo, hi = int(rng.integers(0, 2)), int(rng.integers(1, 4))
            body = _program(rng, wires, depth - 1)
            steps.append(_for(lo, hi, body))
        elif kind == "while":
            body = _program(rng, wires, depth - 1)
            steps.append(_while(float(rng.uniform(0.2, 0.5)), body))
        elif kind == "cond":
            threshold = float(rng.normal())
            steps.append(
                _cond(threshold, _program(rng, wires, depth - 1), _program(rng, wires, depth - 1))
            )
        elif kind == "adjoint":
            steps.append(_adjoint(_program(rng, wires, depth - 1)))
        else:
            control = int(rng.choice(wires))
            rest = [w for w in wires if w != control]
            steps.append(_ctrl(control, int(rng.integers(0, 2)), _program(rng, rest, depth - 1)))

    def f(x):
        for step in steps:
            step(x)

    return f


def _gate(name: str, w: list[int], a: float, b: float) -> Callable:
    def step(x):
        if name in ("RX", "RY", "RZ"):
            getattr(qml, name)(a * x + b, wires=w[0])
        elif name == "H":
            qml.Hadamard(w[0])
        elif name == "S":
            qml.S(w[0])
        else:
            qml.CNOT(w[:2])

    return step


def _for(lo: int, hi: int, body: Callable) -> Callable:
    def step(x):
        @qml.for_loop(lo, hi, 1)
        def loop(i):
            body(x * (i + 1))

        loop()

    return step


def _while(increment: float, body: Callable) -> Callable:
    def step(x):
        @qml.while_loop(lambda v: v < 1.0)
        def loop(v):
            body(v * x)
            return v + increment

        loop(0.0)

    return step


def _cond(threshold: float, then: Callable, otherwise: Callable) -> Callable:
    def step(x):
        qml.cond(x > threshold, then, otherwise)(x)

    return step


def _adjoint(body: Callable) -> Callable:
    return lambda x: qml.adjoint(body)(x)


def _ctrl(control: int, value: int, body: Callable) -> Callable:
    return lambda x: qml.ctrl(body, control=control, control_values=value)(x)


@pytest.mark.parametrize("seed", range(int(os.environ.get("COFACTOR_REGION_SEEDS", "8"))))
def test_random_region_program(seed):
    rng = np.random.default_rng(1000 + seed)
    f = _program(rng, list(range(WIRES)), depth=2)

    def circuit(x):
        for w in range(WIRES):
            qml.RY(0.4 + 0.3 * w, wires=w)
        f(x)
        qml.adjoint(f)(x * 0.5)
        return qml.state()

    ref = qml.QNode(circuit, qml.device("default.qubit", wires=WIRES))
    compiled = qml.qjit(
        qml.QNode(circuit, qml.device("lightning.qubit", wires=WIRES)), compiler="cofactor"
    )
    for x in (0.3, -0.8):
        np.testing.assert_allclose(compiled(x), ref(x), atol=1e-10)
