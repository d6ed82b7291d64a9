"""Run-time checks of traced operator parameters that PennyLane checks in the constructor
when they are concrete (and skips when they are abstract).

`qml.BasisState(n, wires)` / `qml.BasisEmbedding(n, wires)` of an integer `n` takes its
low `len(wires)` bits; PennyLane raises a ValueError for a concrete `n >= 2**len(wires)`
("no feasible binary representation"), but for a traced `n` it took the low bits without
a word (`BasisState(9, wires=range(3))` gave |001>). The compiled program now raises
PennyLane's ValueError when it runs. Negative integers are not checked, as in PennyLane
(their two's-complement low bits: -1 is all ones).

`qml.Projector(bits, wires)` of traced bits (a BasisStateProjector): PennyLane's
constructor compares the bits with `set(state).issubset({0, 1})`, which a tracer fails,
so valid bits raised "Basis state must only consist of 0s and 1s". The traced bits are
kept as the parameter, checked to be 0s and 1s when the program runs (PennyLane's
ValueError otherwise), and the observable is measured as the Hermitian |b><b| of them
(tracing/observables.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pennylane as qml
from pennylane.ops.qubit.observables import BasisStateProjector

from cofactor.tracing import context
from cofactor.tracing.host_arrays import holds_traced


def _basis_state_init(original: Any) -> Any:
    def init(self: Any, state: Any, wires: Any, *args: Any, **kwargs: Any) -> None:
        if context.is_tracing() and holds_traced(state) and not isinstance(state, list):
            from cofactor.tracing.numpy_rules import as_scalar, as_tracer
            from cofactor.tracing.runtime_errors import report_if

            value = as_tracer(state)
            if value.shape == () and np.issubdtype(np.dtype(value.dtype), np.integer):
                limit = 2 ** len(qml.wires.Wires(wires))
                report_if(as_scalar(value >= limit).value, "basis_state_integer")
        original(self, state, wires, *args, **kwargs)

    return init


def _basis_state_projector_init(original: Any) -> Any:
    def init(self: Any, state: Any, wires: Any, id: Any = None) -> None:
        if not (context.is_tracing() and holds_traced(state)):
            original(self, state, wires, id=id)
            return
        from cofactor.tracing.numpy_rules import as_scalar, as_tracer
        from cofactor.tracing.runtime_errors import report_if

        bits = as_tracer(state)
        if not np.issubdtype(np.dtype(bits.dtype), np.integer) and bits.dtype != np.bool_:
            raise ValueError("Basis state must consist of integers or booleans.")
        bits = bits.astype(np.int64)
        report_if(as_scalar(np.any((bits < 0) | (bits > 1))).value, "basis_state_bits")
        super(BasisStateProjector, self).__init__(bits, wires=wires, id=id)

    return init


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace."""
    return [
        (qml.BasisState, "__init__", _basis_state_init),
        (BasisStateProjector, "__init__", _basis_state_projector_init),
    ]
