"""Mid-circuit measurements: `measure` (Catalyst's `measure`, and what `qml.measure` becomes
in a traced QNode) emits a `quantum.measure` of one wire into the current QNode's scope,
after flushing the operators queued before it; its outcome is a traced bool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pennylane as qml
from xdsl.dialects.builtin import i1

from cofactor.errors import CompileError, CompileTypeError
from cofactor.ir.builder import quantum_attrs
from cofactor.ir.mlir15 import generic_op
from cofactor.tracing import context
from cofactor.tracing.tracer import BOOL, Scalar, Tracer

if TYPE_CHECKING:
    from cofactor.tracing.qnode import QuantumScope

_TRACED = (Tracer, Scalar)


class PostselectError(CompileTypeError, ValueError):
    """A bad `postselect` value: a program cofactor refuses. Catalyst raises TypeError
    ("postselect must be '0' or '1', got ...") and a bad value is a ValueError in Python's
    terms: this is all three, so code written against any of them catches it."""


def _postselect_value(postselect: Any) -> int | None:
    """None, or the outcome 0/1 (True/False, 0.0/1.0 and numpy integers count, as in Catalyst's
    `postselect not in [0, 1]` test)."""
    if postselect is None:
        return None
    if isinstance(postselect, _TRACED):
        raise PostselectError(
            "postselect must be '0' or '1', got a traced value; postselection needs the "
            "outcome when the program is compiled"
        )
    try:
        ok = any(postselect == v for v in (0, 1)) and not isinstance(postselect, str)
        ok = bool(ok)
    except Exception:
        ok = False
    if not ok:
        raise PostselectError(f"postselect must be '0' or '1', got {postselect!r}")
    return int(postselect)


def _foreign_queue(scope: QuantumScope) -> bool:
    """PennyLane is recording operators on a queue of its own (a quantum-function transform
    makes a tape of the function), not on one of the scope's."""
    active = qml.QueuingManager.active_context()
    return active is not None and bool(scope.queues) and not any(q is active for q in scope.queues)


def measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Tracer:
    """Mid-circuit measurement of one wire; returns a traced bool (Catalyst's `measure`)."""
    ctx = context.current() if context.is_tracing() else None
    scope = ctx.quantum if ctx is not None else None
    if scope is None:  # (Catalyst's words for each case)
        where = "a qml.qnode of a @qjit function" if ctx is not None else "@qjit, in a QNode"
        raise CompileError(f"cofactor.measure can only be used from within {where}")
    if isinstance(wires, list | tuple | qml.wires.Wires):
        if len(wires) != 1:
            raise CompileError("Only one element is supported for the 'wires' parameter")
        wires = wires[0]
    postselect = _postselect_value(postselect)
    if scope.recording is not None or _foreign_queue(scope):
        # under a transform (of the QNode, or of the quantum function: PennyLane records the
        # function on its own queue): a MidMeasure on the tape, in its place among the gates
        from cofactor.tracing.transforms import record_measure

        return record_measure(wires, reset, postselect)
    scope.flush()
    scope.has_mcm = True
    b = ctx.builder
    from cofactor.tracing.mcm import MeasuredBool
    from cofactor.tracing.one_shot import record_validity

    discard = postselect is not None and scope.discard_invalid
    forced = -1 if postselect is None or discard else postselect
    if forced == -1:
        scope.random_mcm = True
    attrs = quantum_attrs(reset=bool(reset), postselect=forced)
    value = b.res(generic_op("quantum.measure", [scope.wire(wires)], [i1], attrs))
    if discard:
        record_validity(scope, value, postselect)

    return MeasuredBool.scalar(value, BOOL)
