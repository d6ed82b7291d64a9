"""Quantum operations with compiler semantics: `measure`, `adjoint`, `ctrl`.

`measure` emits a `quantum.measure` op and returns a traced bool (usable in `cond`, in
arithmetic, as a loop condition, or as a QNode result). `adjoint` and `ctrl` of an operator
build PennyLane's own `Adjoint`/`Controlled` operators, which the QNode capture emits as gates
with the `adjoint` flag / control wires (or decomposes); of a quantum function inside a QNode,
they transform every operation it performs, inside its loops and conds too (`hybrid`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.ops.op_math.adjoint import create_adjoint_op
from pennylane.ops.op_math.controlled import create_controlled_op

from cofactor.api_extensions import hybrid
from cofactor.errors import CompileTypeError
from cofactor.tracing import context
from cofactor.tracing.null_device import null_measure
from cofactor.tracing.qnode import measure as _measure
from cofactor.tracing.tracer import Tracer


def measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Tracer:
    """Measure one wire in the computational basis in the middle of a circuit.

    Returns a traced bool. `reset=True` puts the wire back in |0>; `postselect` (0 or 1)
    forces that outcome. Only valid inside a QNode compiled with `qjit`.
    """
    if hybrid.in_region():
        # as Catalyst: an adjoint/ctrl region cannot contain a measurement
        raise ValueError(hybrid.MEASUREMENT_MESSAGE)
    # Catalyst's argument checks, with its exception type (TypeError)
    if isinstance(wires, np.ndarray | Tracer) and np.ndim(wires) > 0:
        # an array of one wire (e.g. measure(wires=w) for an argument w = np.array([0]))
        if np.size(wires) != 1:
            raise CompileTypeError(
                f"Measure is only supported on 1 qubit, got an array of wires of shape "
                f"{np.shape(wires)}: measure one wire per call"
            )
        wires = wires.reshape(-1)[0]
        if isinstance(wires, np.generic):
            wires = wires.item()
    listed = list(wires) if isinstance(wires, list | tuple | qml.wires.Wires) else [wires]
    if len(listed) != 1:
        raise CompileTypeError(
            f"Only one element is supported for the 'wires' parameter, got {listed}: measure "
            "one wire per call"
        )
    # postselect values are checked by tracing.qnode.measure (qml.measure takes that path too)
    scope = context.current().quantum if context.is_tracing() else None
    if getattr(scope, "runs_nothing", False):  # null.qubit
        return null_measure(scope, wires)
    return _measure(wires, reset=reset, postselect=postselect)


def _is_operator_class(fn: Any) -> bool:
    return isinstance(fn, type) and issubclass(fn, qml.operation.Operator)


def adjoint(fn: Any, lazy: bool = True) -> Any:
    """The inverse of an operator, or of every operation a quantum function performs.

    Inside a QNode trace, the adjoint of a function containing `for_loop`, `while_loop` or
    `cond` reverses the loops' iteration order and the order inside every body (Catalyst's
    semantics; see `hybrid`). Called, the adjoint of a function returns a `RegionOperation`
    (its `.wires`); the adjoint of an operator is the `Adjoint` operator.
    """
    if isinstance(fn, qml.operation.Operator) or _is_operator_class(fn):
        return create_adjoint_op(fn, lazy)
    if not callable(fn):
        raise ValueError(f"Expected a callable or a qml.Operator, not {fn!r}")
    if not hybrid.in_qnode_trace():
        # decided again when called: the function may be called inside a QNode trace
        return _RegionOperator(
            fn,
            lambda: adjoint(fn, lazy),
            lambda base: create_adjoint_op(base, lazy),
            reverse=True,
        )
    return hybrid.TransformedCallable(fn, hybrid.Transform(adjoint=True))


def _check_control_values(control: Any, control_values: Any) -> None:
    """One control value per control wire (Catalyst's check, when ctrl is called)."""
    if control_values is None:
        return
    n_wires = len(qml.wires.Wires(control)) if not _has_traced(control) else None
    scalar = not isinstance(control_values, list | tuple) and not getattr(control_values, "ndim", 0)
    n_values = 1 if scalar else len(control_values)
    if n_wires is not None and n_values != n_wires:
        raise ValueError(
            f"Length of the control_values ({n_values}) must be None or equal to the number "
            f"of control wires ({n_wires}): control_values should be the same length as "
            "control_wires"
        )


def _has_traced(wires: Any) -> bool:
    listed = wires if isinstance(wires, list | tuple) else [wires]
    return any(isinstance(w, Tracer) or type(w).__name__ == "Scalar" for w in listed)


def ctrl(
    op: Any,
    control: Any,
    control_values: Any = None,
    work_wires: Any = None,
    work_wire_type: str = "borrowed",
) -> Callable | Any:
    """An operator (or quantum function) controlled on `control` wires.

    Inside a QNode trace a controlled function keeps the control on the operations inside its
    `cond`s and loops, and `control_values` may be traced (known only at run time).
    """
    _check_control_values(control, control_values)
    if not hybrid.in_qnode_trace():

        def controlled(base: Any) -> Any:
            return create_controlled_op(
                base,
                control,
                control_values=control_values,
                work_wires=work_wires,
                work_wire_type=work_wire_type,
            )

        if isinstance(op, qml.operation.Operator) or _is_operator_class(op):
            return controlled(op)
        if not callable(op):
            raise ValueError(f"Expected a callable or a qml.Operator, not {op!r}")
        again = lambda: ctrl(op, control, control_values, work_wires, work_wire_type)  # noqa: E731
        return _RegionOperator(op, again, controlled)
    wires, static, values = hybrid.split_control_values(control, control_values)
    traced = any(hybrid.is_traced(v) for v in values)
    if isinstance(op, qml.operation.Operator):
        hybrid.check_control_wires(op, wires)
        if traced:
            qml.QueuingManager.remove(op)
            for flip in hybrid.flip_ops(wires, values, 1.0):
                qml.apply(flip)
        result = create_controlled_op(
            op, wires, control_values=static, work_wires=work_wires, work_wire_type=work_wire_type
        )
        if traced:
            for flip in hybrid.flip_ops(wires, values, -1.0):
                qml.apply(flip)
        return result
    if not callable(op):
        raise ValueError(f"Expected a callable or a qml.Operator, not {op!r}")
    if _is_operator_class(op) and not traced:
        return create_controlled_op(
            op, wires, control_values=static, work_wires=work_wires, work_wire_type=work_wire_type
        )
    transform = hybrid.Transform(
        wires=tuple(wires),
        values=tuple(static),
        work_wires=tuple(qml.wires.Wires(work_wires)) if work_wires is not None else (),
        work_wire_type=work_wire_type,
    )
    return hybrid.TransformedCallable(op, transform, (wires, values))


class _RegionOperator:
    """`adjoint(fn)` / `ctrl(fn, ...)` of a quantum function made outside a QNode trace.

    Called inside a QNode trace it is the compiled region (`hybrid`); called anywhere else it
    records the operations `fn` queues and returns *one* PennyLane operator for them (the
    Adjoint/Controlled of the operation, or of their product), queued in their place. This is
    Catalyst's behaviour (its HybridAdjoint/HybridCtrl operators outside qjit) with
    PennyLane's own operator classes, so `.wires`, `qml.matrix` and uncompiled devices work.
    """

    def __init__(
        self,
        fn: Callable,
        traced: Callable[[], Any],
        wrap: Callable[[Any], Any],
        reverse: bool = False,
    ) -> None:
        self.fn = fn
        self.traced = traced
        self.wrap = wrap
        self.reverse = reverse  # the adjoint: the region's operations in reverse order
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if hybrid.in_qnode_trace():
            return self.traced()(*args, **kwargs)
        with qml.queuing.AnnotatedQueue() as queue:
            self.fn(*args, **kwargs)
        ops = []
        for obj in queue.queue:
            if isinstance(obj, qml.measurements.MeasurementProcess):
                raise ValueError(
                    f"{getattr(self.fn, '__name__', self.fn)!r} performs a measurement: an "
                    "adjoint or controlled region may contain only quantum operations"
                )
            if isinstance(obj, qml.operation.Operator):
                ops.append(obj)
        if not ops:
            return None  # nothing to invert or control (PennyLane's adjoint gives [] here)
        # Prod(B, A) is "A, then B": the product of the operations in application order
        base = ops[0] if len(ops) == 1 else qml.prod(*reversed(ops))
        with qml.QueuingManager.stop_recording():
            parts = [self.wrap(op) for op in (reversed(ops) if self.reverse else ops)]
        region = self.wrap(base)
        # As Catalyst's HybridAdjoint/HybridCtrl, it decomposes into the region's operations,
        # each inverted / controlled (PennyLane's decomposition of Adjoint(Prod) would be
        # one Prod, of Controlled(op) the gates of op's controlled decomposition, losing
        # e.g. its work_wire_type)
        region.decomposition = lambda: list(parts)
        return region
