"""Run-time checks of traced operator parameters that PennyLane checks in the constructor
when they are concrete (and skips when they are abstract).

`qml.BasisState(n, wires)` / `qml.BasisEmbedding(n, wires)` of an integer `n` takes its
low `len(wires)` bits; PennyLane raises a ValueError for a concrete `n >= 2**len(wires)`
("no feasible binary representation"), but for a traced `n` it took the low bits without
a word (`BasisState(9, wires=range(3))` gave |001>). The compiled program now raises
PennyLane's ValueError when it runs. Negative integers are not checked, as in PennyLane
(their two's-complement low bits: -1 is all ones)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pennylane as qml

from cofactor.tracing import context
from cofactor.tracing.numpy_entry import holds_traced


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


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace."""
    return [(qml.BasisState, "__init__", _basis_state_init)]
