"""The benchmark programs, written once against a Catalyst-style API and built per system.

A `Backend` says how one system spells `qjit`, `grad`, `for_loop`, which device a QNode
uses and how to wait for a result. The programs below only use that interface, so cofactor,
Catalyst, PennyLane-Lightning (no JIT) and default.qubit under `jax.jit` run the same code.

Imported by the workers in both virtual environments: only numpy and pennylane (plus the
system's own package, imported lazily in `make_backend`) may be needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SYSTEMS = ("cofactor", "catalyst", "lightning", "jax")

#: What each system is, in the report.
SYSTEM_LABELS = {
    "cofactor": "cofactor (qjit, own runtime)",
    "catalyst": "Catalyst qjit on lightning.qubit",
    "lightning": "lightning.qubit adjoint, no JIT",
    "jax": "default.qubit under jax.jit",
}

#: Which Python interpreter runs each system: the cofactor venv or the peers venv.
SYSTEM_VENV = {"cofactor": "cofactor", "catalyst": "peers", "lightning": "peers", "jax": "peers"}

GD_STEPS = 50
GD_RATE = 0.1


class NotAvailable(Exception):
    """The system cannot run this program (yet); the message says why."""


@dataclass
class Backend:
    name: str
    jit: Callable[[Callable], Callable] | None  # None: run the Python function as it is
    grad: Callable[[Callable], Callable] | None
    for_loop: Callable | None
    device: Callable[[int], Any]
    qnode_kwargs: dict = field(default_factory=dict)
    block: Callable[[Any], Any] = lambda r: r
    grad_missing: str = ""
    # converts a numpy argument into what the system's functions take
    arg: Callable[[np.ndarray], Any] = lambda a: a

    def compile(self, fn: Callable) -> Callable:
        return self.jit(fn) if self.jit is not None else fn

    def gradient(self, fn: Callable) -> Callable:
        if self.grad is None:
            raise NotAvailable(self.grad_missing or f"{self.name} has no grad")
        return self.grad(fn)

    def loop(self, lower: int, upper: int, step: int) -> Callable:
        if self.for_loop is None:
            raise NotAvailable(f"{self.name} has no for_loop")
        return self.for_loop(lower, upper, step)


def _python_for_loop(lower: int, upper: int, step: int) -> Callable:
    def decorator(body: Callable) -> Callable:
        def run(init: Any) -> Any:
            x = init
            for i in range(lower, upper, step):
                x = body(i, x)
            return x

        return run

    return decorator


def make_backend(system: str) -> Backend:
    """Import the system's packages and describe how it spells the API."""
    import pennylane as qml

    if system == "cofactor":
        import cofactor

        grad = getattr(cofactor, "grad", None)
        return Backend(
            "cofactor",
            jit=cofactor.qjit,
            grad=grad,
            for_loop=cofactor.for_loop,
            device=lambda n: qml.device("lightning.qubit", wires=n),
            grad_missing="cofactor.grad does not exist yet (gradient frontend not landed)",
        )
    if system == "catalyst":
        import catalyst

        return Backend(
            "catalyst",
            jit=catalyst.qjit,
            grad=catalyst.grad,
            for_loop=catalyst.for_loop,
            device=lambda n: qml.device("lightning.qubit", wires=n),
            qnode_kwargs={"diff_method": "adjoint"},
        )
    if system == "lightning":
        from pennylane import numpy as pnp

        return Backend(
            "lightning",
            jit=None,
            grad=qml.grad,
            for_loop=_python_for_loop,
            device=lambda n: qml.device("lightning.qubit", wires=n),
            qnode_kwargs={"diff_method": "adjoint"},
            arg=lambda a: pnp.array(a, requires_grad=True),
        )
    if system == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy as jnp

        def fori(lower: int, upper: int, step: int) -> Callable:
            if step != 1:
                raise NotAvailable("jax.lax.fori_loop has step 1 only")
            return lambda body: lambda init: jax.lax.fori_loop(lower, upper, body, init)

        return Backend(
            "jax",
            jit=jax.jit,
            grad=jax.grad,
            for_loop=fori,
            device=lambda n: qml.device("default.qubit", wires=n),
            qnode_kwargs={"interface": "jax", "diff_method": "backprop"},
            block=lambda r: r.block_until_ready(),
            arg=jnp.asarray,
        )
    raise ValueError(f"unknown system {system!r}; choose one of {SYSTEMS}")


# -- section 1: the 4-qubit program (a), its gradient (b), a 50-step descent over it (c) ---


def layered_circuit(b: Backend, n: int = 4, layers: int = 2) -> Callable:
    """(a): `layers` layers of RX/RY on every wire and a CNOT ring; expval(Z0).

    Takes x of shape (layers, n, 2)."""
    import pennylane as qml

    @qml.qnode(b.device(n), **b.qnode_kwargs)
    def circuit(x):
        for layer in range(layers):
            for w in range(n):
                qml.RX(x[layer, w, 0], wires=w)
                qml.RY(x[layer, w, 1], wires=w)
            for w in range(n):
                qml.CNOT(wires=[w, (w + 1) % n])
        return qml.expval(qml.PauliZ(0))

    return circuit


def descent(b: Backend, circuit: Callable, steps: int = GD_STEPS) -> Callable:
    """(c): `steps` steps of gradient descent on `circuit`, as one function to compile."""
    g = b.gradient(circuit)

    def optimise(x):
        def body(i, x):
            return x - GD_RATE * g(x)

        return b.loop(0, steps, 1)(body)(x)

    return optimise


def compile_program(b: Backend, program: str) -> tuple[Callable, np.ndarray]:
    """A *new* compiled function of program "a", "b" or "c" and its argument."""
    x = np.random.default_rng(0).uniform(0, np.pi, size=(2, 4, 2))
    circuit = layered_circuit(b)
    if program == "a":
        fn = circuit
    elif program == "b":
        fn = b.gradient(circuit)
    elif program == "c":
        fn = descent(b, circuit)
    else:
        raise ValueError(f"unknown program {program!r}")
    return b.compile(fn), b.arg(x)


# -- section 2: per-call overhead -------------------------------------------------------


def rx_circuit(b: Backend) -> Callable:
    import pennylane as qml

    @qml.qnode(b.device(1), **b.qnode_kwargs)
    def rx(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    return rx


def no_circuit(x):
    """A compiled function with no quantum part at all."""
    return x * 2.0 + 1.0


# -- sections 3 and 4: StronglyEntanglingLayers --------------------------------------------

SEL_LAYERS = 4


def sel_circuit(b: Backend, n: int, layers: int = SEL_LAYERS) -> Callable:
    import pennylane as qml

    @qml.qnode(b.device(n), **b.qnode_kwargs)
    def sel(w):
        qml.StronglyEntanglingLayers(w, wires=range(n))
        return qml.expval(qml.PauliZ(0))

    return sel


def sel_weights(n: int, layers: int = SEL_LAYERS) -> np.ndarray:
    return np.random.default_rng(1).uniform(0, 2 * np.pi, size=(layers, n, 3))


# -- fusion section: a long 16-wire circuit (the shape of issue 14's 2,050-gate circuit) ----

LONG_WIRES = 16
LONG_ROUNDS = 32  # 63 gates a round: 2,016 gates


def long_circuit(b: Backend, n: int = LONG_WIRES, rounds: int = LONG_ROUNDS) -> Callable:
    """`rounds` rounds of H and T on every wire, a CNOT chain and RZ(x[w] (r + 1)); <Z0>."""
    import pennylane as qml

    @qml.qnode(b.device(n), **b.qnode_kwargs)
    def circuit(x):
        for r in range(rounds):
            for w in range(n):
                qml.Hadamard(wires=w)
            for w in range(n):
                qml.T(wires=w)
            for w in range(n - 1):
                qml.CNOT(wires=[w, w + 1])
            for w in range(n):
                qml.RZ(x[w] * (r + 1), wires=w)
        return qml.expval(qml.PauliZ(0))

    return circuit


def long_args(n: int = LONG_WIRES) -> np.ndarray:
    return np.linspace(0.1, 1.6, n)
