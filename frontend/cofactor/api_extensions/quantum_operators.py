"""Quantum operations with compiler semantics: `measure`, `adjoint`, `ctrl`.

`measure` emits a `quantum.measure` op and returns a traced bool (usable in `cond`, in
arithmetic, as a loop condition, or as a QNode result). `adjoint` and `ctrl` build
PennyLane's own `Adjoint`/`Controlled` operators, which the QNode capture emits as gates with
the `adjoint` flag / control wires (or decomposes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pennylane.ops.op_math.adjoint import create_adjoint_op
from pennylane.ops.op_math.controlled import create_controlled_op

from cofactor.tracing.qnode import measure as _measure
from cofactor.tracing.tracer import Tracer


def measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Tracer:
    """Measure one wire in the computational basis in the middle of a circuit.

    Returns a traced bool. `reset=True` puts the wire back in |0>; `postselect` (0 or 1)
    forces that outcome. Only valid inside a QNode compiled with `qjit`.
    """
    return _measure(wires, reset=reset, postselect=postselect)


def adjoint(fn: Any, lazy: bool = True) -> Any:
    """The inverse of an operator, or of every operator a quantum function queues."""
    return create_adjoint_op(fn, lazy)


def ctrl(
    op: Any,
    control: Any,
    control_values: Any = None,
    work_wires: Any = None,
    work_wire_type: str = "borrowed",
) -> Callable | Any:
    """An operator (or quantum function) controlled on `control` wires."""
    return create_controlled_op(
        op,
        control,
        control_values=control_values,
        work_wires=work_wires,
        work_wire_type=work_wire_type,
    )
