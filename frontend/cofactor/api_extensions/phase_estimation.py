"""`qml.iterative_qpe(base, aux_wire, iters)` inside a compiled function.

PennyLane writes it with `qml.for_loop`, carrying the base *operator* and a Python list of
measurement values indexed by the loop counters; under qjit those loops are compiled, and
neither an operator nor a list indexed by a traced counter can be a loop carry ("cannot
trace a value of type RZ"). `iters` is a Python int, so while a trace runs the same circuit
is emitted with Python loops (unrolled): per bit, from the least significant, a Hadamard on
the auxiliary wire, the base raised to 2**k controlled on it, the phase corrections
conditioned on the bits already measured, a Hadamard and a measurement with reset. The
result is PennyLane's: the list of measurement values, most significant bit first."""

from __future__ import annotations

from typing import Any

import numpy as np
import pennylane as qml

from cofactor.errors import CompileError
from cofactor.tracing import context


def _iterative_qpe(base: Any, aux_wire: Any, iters: int) -> list[Any]:
    if not isinstance(iters, int | np.integer) or iters < 1:
        raise CompileError(
            f"qml.iterative_qpe: iters must be a positive Python int when compiling, got {iters!r}"
        )
    bits: list[Any] = [None] * iters
    for step in range(iters):
        position = iters - step - 1  # the bit this step measures (0: most significant)
        qml.Hadamard(wires=aux_wire)
        qml.ctrl(qml.pow(base, z=2**position), control=aux_wire)
        for j in range(step):
            angle = -2.0 * np.pi / 2 ** (j + 2)
            qml.cond(bits[position + 1 + j], qml.PhaseShift)(angle, wires=aux_wire)
        qml.Hadamard(wires=aux_wire)
        bits[position] = qml.measure(wires=aux_wire, reset=True)
    return bits


def _make(original: Any) -> Any:
    def iterative_qpe(base: Any, aux_wire: Any, iters: int) -> Any:
        if context.is_tracing():
            return _iterative_qpe(base, aux_wire, iters)
        return original(base, aux_wire, iters)

    iterative_qpe.__doc__ = original.__doc__
    return iterative_qpe


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace."""
    return [(qml, "iterative_qpe", _make)]
