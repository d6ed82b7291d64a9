"""`adjoint` and `ctrl` of quantum functions that contain control flow (Catalyst's adjoint and
ctrl regions).

PennyLane's own `qml.adjoint(fn)` / `qml.ctrl(fn)` collect the operators `fn` queues and
transform each one. Under cofactor a `for_loop`, `while_loop` or `cond` inside `fn` is not an
operator: it is emitted as an `scf` op the moment it is called, so PennyLane's transformation
would miss it. Here a transformed call works in two phases, like Catalyst's adjoint lowering
(a forward classical sweep, then the quantum operations in reverse):

1. *record*: `fn` runs with a recording queue; operators land in it, and each control-flow
   call (or nested adjoint/ctrl call) lands in it as a *node* that remembers its Python
   functions and arguments. Classical values are computed forward as usual (a loop or cond
   whose results are used is emitted once more with its quantum operations discarded).
2. *emit*: the recorded items are emitted (reversed for an adjoint) with the transformation
   `Transform` applied: an operator becomes its adjoint and/or controlled version; a node is
   emitted as its control-flow op whose body is traced again, recursively, in the same
   transformed way. The adjoint of a `for_loop` runs its iterations in reverse order; loop
   state carried between iterations is recomputed for each reversed iteration by a classical
   loop (quantum operations discarded), and the adjoint of a `while_loop` first counts its
   iterations.

Traced control values (`control_values=v` with `v` known only at run time) become X flips of
the control wires whose value is 0, conditioned at run time: `RX(pi * (1 - v))` before and
`RX(-pi * (1 - v))` after the all-ones controlled operation (`RX(pi) . U . RX(-pi) = X U X`,
and both are the identity when `v = 1`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.measurements import MeasurementProcess
from pennylane.ops.op_math.adjoint import create_adjoint_op
from pennylane.ops.op_math.controlled import create_controlled_op

from cofactor.tracing import context
from cofactor.tracing.gate_set import wrapper_kind
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer
from cofactor.tracing.tracer import BOOL, FLOAT, Scalar, Tracer

MEASUREMENT_MESSAGE = (
    "Mid-circuit measurements cannot be used within an adjoint() or ctrl() region."
)

# frames of the transformed calls being traced in this thread (innermost last): a recording
# queue (phase 1), or _DISCARD while a loop/cond is traced for its classical values only
_local = threading.local()
_DISCARD = "discard"


def _frames() -> list[Any]:
    frames = getattr(_local, "frames", None)
    if frames is None:
        frames = _local.frames = []
    return frames


def recording() -> bool:
    """Whether the code being traced is recorded for an adjoint/ctrl region (phase 1)."""
    frames = _frames()
    return bool(frames) and frames[-1] is not _DISCARD


def discarding() -> bool:
    """Whether quantum operations are being discarded (a classical recomputation)."""
    frames = _frames()
    return bool(frames) and frames[-1] is _DISCARD


def in_region() -> bool:
    """Whether an adjoint/ctrl region is being traced (mid-circuit measurements are refused)."""
    return bool(_frames())


def is_traced(x: Any) -> bool:
    return isinstance(x, Tracer | Scalar)


def check_control_wires(op: qml.operation.Operator, control: Any) -> None:
    """A ValueError naming `op` when a (static) control wire is also one of its wires:
    PennyLane's own message for that names some inner gate ("PauliX: wrong number of
    wires. 0 wires given") or none at all."""
    static = [w for w in control if not is_traced(w)]
    shared = [w for w in static if any(w == v for v in op.wires if not is_traced(v))]
    if shared:
        raise ValueError(
            f"ctrl: the control wires {shared} are also wires of {op.name} (wires "
            f"{op.wires.tolist()}); a controlled operation needs control wires different "
            "from the wires it acts on: control on another wire"
        )


# ----------------------------------------------------------------------------------------
# the transformation and the recorded nodes
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Transform:
    """Adjoint and/or control applied to every operation of a region (they commute)."""

    adjoint: bool = False
    wires: tuple = ()
    values: tuple = ()  # Python bools (traced values were turned into flips)
    work_wires: tuple = ()
    work_wire_type: str = "borrowed"

    def then(self, inner: Transform) -> Transform:
        """`self` applied to a region that applies `inner` to its operations."""
        return Transform(
            adjoint=self.adjoint != inner.adjoint,
            wires=self.wires + inner.wires,
            values=self.values + inner.values,
            work_wires=self.work_wires + inner.work_wires,
            work_wire_type=self.work_wire_type,
        )

    def apply(self, op: qml.operation.Operator) -> qml.operation.Operator:
        with qml.QueuingManager.stop_recording():
            if self.adjoint:
                op = create_adjoint_op(op, lazy=True)
            if self.wires:
                check_control_wires(op, self.wires)
                op = create_controlled_op(
                    op,
                    list(self.wires),
                    control_values=list(self.values),
                    work_wires=list(self.work_wires) or None,
                    work_wire_type=self.work_wire_type,
                )
        return op


@dataclass(eq=False)
class _ForNode:
    lower: Any
    upper: Any
    step: Any
    body: Callable
    init: tuple


@dataclass(eq=False)
class _WhileNode:
    cond_fn: Callable
    body: Callable
    init: tuple


@dataclass(eq=False)
class _CondNode:
    branches: list
    otherwise_fn: Callable | None
    args: tuple
    kwargs: dict


@dataclass(eq=False)
class _CallNode:
    """A nested adjoint/ctrl call."""

    fn: Callable
    args: tuple
    kwargs: dict
    transform: Transform = field(default_factory=Transform)
    result: RegionOperation | None = None


# ----------------------------------------------------------------------------------------
# phase 1: recording, and classical recomputation
# ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def _without_quantum(frame: Any) -> Iterator[qml.queuing.AnnotatedQueue]:
    """Trace with `frame` pushed and no quantum scope: operators go to a private queue, and
    control flow is traced as classical code (or recorded, see the control-flow hooks)."""
    ctx = context.current()
    saved = ctx.quantum
    queue = qml.queuing.AnnotatedQueue() if frame is _DISCARD else frame
    ctx.quantum = None
    _frames().append(frame)
    try:
        with queue:
            yield queue
    finally:
        _frames().pop()
        ctx.quantum = saved


def discarded(fn: Callable, *args: Any) -> Any:
    """`fn(*args)` for its classical values only (its quantum operations are dropped)."""
    with _without_quantum(_DISCARD):
        return fn(*args)


def _record(fn: Callable, args: tuple, kwargs: dict) -> tuple[Any, list[Any]]:
    with _without_quantum(qml.queuing.AnnotatedQueue()) as queue:
        out = fn(*args, **kwargs)
    items = queue.queue
    if any(isinstance(i, MeasurementProcess) for i in items):
        raise ValueError("Measurement process cannot be used within an adjoint() or ctrl() region.")
    return out, items


def record_node(node: Any) -> None:
    qml.QueuingManager.append(node)


def record_for(lower: Any, upper: Any, step: Any, body: Callable, init: tuple) -> Any:
    """A for_loop inside a region: recorded; its carried values computed classically."""
    from cofactor.api_extensions import control_flow as cf

    record_node(_ForNode(lower, upper, step, body, init))
    if not init:
        return None
    return discarded(cf._traced_for, lower, upper, step, body, init)


def record_while(cond_fn: Callable, body: Callable, init: tuple) -> Any:
    from cofactor.api_extensions import control_flow as cf

    record_node(_WhileNode(cond_fn, body, init))
    if not init:
        return None
    return discarded(cf._traced_while, cond_fn, body, init)


def record_cond(branches: list, otherwise_fn: Callable | None, args: tuple, kwargs: dict) -> Any:
    """A cond inside a region: recorded; its results (if any) computed classically (which
    also checks the branches' results)."""
    from cofactor.api_extensions import control_flow as cf

    record_node(_CondNode(list(branches), otherwise_fn, args, kwargs))
    return discarded(cf._traced_cond, list(branches), otherwise_fn, args, kwargs)


# ----------------------------------------------------------------------------------------
# phase 2: emission
# ----------------------------------------------------------------------------------------
def call_transformed(fn: Callable, args: tuple, kwargs: dict, transform: Transform) -> Any:
    """Trace `fn(*args, **kwargs)` with `transform` applied to every quantum operation it
    performs (including those inside its loops and conds); returns what `fn` returns."""
    out, items = _record(fn, args, kwargs)
    for item in reversed(items) if transform.adjoint else items:
        _emit(item, transform)
    return out


def _emit(item: Any, t: Transform) -> None:
    from cofactor.api_extensions import control_flow as cf

    if isinstance(item, qml.operation.Operator):
        op = t.apply(item)
        qml.apply(op)
        for region in _collectors():
            region.ops.append(op)
    elif isinstance(item, _CallNode):
        inner = t.then(item.transform)
        with _collecting(item.result, inner):
            call_transformed(item.fn, item.args, item.kwargs, inner)
    elif isinstance(item, _CondNode):

        def wrap(fn: Callable) -> Callable:
            # the branch's results were computed when it was recorded: none here
            def branch(*a: Any, **k: Any) -> None:
                call_transformed(fn, a, k, t)

            return branch

        branches = [(p, wrap(f)) for p, f in item.branches]
        otherwise = wrap(item.otherwise_fn) if item.otherwise_fn is not None else None
        cf._cond_or_python(branches, otherwise, item.args, item.kwargs)
    elif isinstance(item, _ForNode):
        if t.adjoint:
            _emit_reversed_for(item, t)
        else:
            cf._traced_for(
                item.lower,
                item.upper,
                item.step,
                lambda i, *c: call_transformed(item.body, (i, *c), {}, t),
                item.init,
            )
    elif isinstance(item, _WhileNode):
        if t.adjoint:
            _emit_reversed_while(item, t)
        else:
            cf._traced_while(
                item.cond_fn, lambda *c: call_transformed(item.body, c, {}, t), item.init
            )
    else:  # pragma: no cover - only the types above are recorded
        raise TypeError(f"unexpected item {item!r} in an adjoint/ctrl region")


def _as_tuple(init: tuple, out: Any) -> tuple:
    if len(init) == 0:
        return ()
    return (out,) if len(init) == 1 else tuple(out)


def _emit_reversed_for(node: _ForNode, t: Transform) -> None:
    """for k in 0..trip: i = lower + (trip - 1 - k) * step; body(i, carry_i) transformed."""
    from cofactor.api_extensions import control_flow as cf

    lower, upper, step = node.lower, node.upper, node.step
    if not any(is_traced(v) for v in (lower, upper, step)):
        trip: Any = len(range(int(lower), int(upper), int(step)))
    else:
        # ceil((upper - lower) / step) for either sign of step, as floor division
        diff = as_tracer(lower) - upper
        trip = np.maximum(-(diff // step), 0)

    def body(k: Any) -> None:
        i = lower + (trip - 1 - k) * step
        carry: tuple = ()
        if node.init:
            # the carried values at the start of iteration i: rerun iterations lower..i
            out = discarded(cf._traced_for, lower, i, step, node.body, node.init)
            carry = _as_tuple(node.init, out)
        call_transformed(node.body, (i, *carry), {}, t)

    cf._traced_for(0, trip, 1, body, ())


def _emit_reversed_while(node: _WhileNode, t: Transform) -> None:
    """Count the iterations (classically), then run them in reverse order."""
    from cofactor.api_extensions import control_flow as cf

    init = node.init

    def count_cond(n: Any, *state: Any) -> Any:
        return node.cond_fn(*state)

    def count_body(n: Any, *state: Any) -> Any:
        return (n + 1, *_as_tuple(init, node.body(*state)))

    counted = discarded(cf._traced_while, count_cond, count_body, (0, *init))
    trip = counted[0] if isinstance(counted, tuple) else counted

    def body(k: Any) -> None:
        j = trip - 1 - k
        carry: tuple = ()
        if init:

            def step(_i: Any, *state: Any) -> Any:
                return node.body(*state)

            out = discarded(cf._traced_for, 0, j, 1, step, init)
            carry = _as_tuple(init, out)
        call_transformed(node.body, carry, {}, t)

    cf._traced_for(0, trip, 1, body, ())


# ----------------------------------------------------------------------------------------
# traced control values
# ----------------------------------------------------------------------------------------
def _flip_angle(value: Any) -> Any:
    """pi when the control value is 0 (false), else 0."""
    v = cast_tracer(as_tracer(value), BOOL)
    return (1.0 - cast_tracer(v, FLOAT)) * np.pi


def flip_ops(wires: list[Any], values: list[Any], sign: float) -> list[qml.operation.Operator]:
    """RX(sign * pi * (1 - v)) on every control wire whose value `v` is traced."""
    with qml.QueuingManager.stop_recording():
        return [
            qml.RX(sign * _flip_angle(v), wires=w)
            for w, v in zip(wires, values, strict=True)
            if is_traced(v)
        ]


def _with_static_values(op: Any) -> tuple[Any, list[Any], list[Any]] | None:
    """For a TemporaryAND with traced control values, possibly inside Adjoint/Controlled
    wrappers: (the same operator with those values set to 1, its control wires, the
    values); None for any other operator."""
    if isinstance(op, qml.TemporaryAND):
        values = list(op.hyperparameters["control_values"])
        if not any(is_traced(v) for v in values):
            return None
        new = qml.TemporaryAND(op.wires, control_values=[1 if is_traced(v) else v for v in values])
        return new, list(op.wires[:2]), values
    if isinstance(op, qml.ops.Adjoint | qml.ops.Controlled):
        inner = _with_static_values(op.base)
        if inner is None:
            return None
        base, wires, values = inner
        if isinstance(op, qml.ops.Adjoint):
            return qml.ops.Adjoint(base), wires, values
        wrapped = create_controlled_op(
            base,
            op.control_wires,
            control_values=list(op.control_values),
            work_wires=op.work_wires or None,
            work_wire_type=op.work_wire_type,
        )
        return wrapped, wires, values
    return None


def _wraps_temporary_and(op: Any) -> bool:
    """Whether `op` is a TemporaryAND, possibly inside Adjoint/Controlled wrappers."""
    while wrapper_kind(op) is not None:
        op = op.base
    if type(op) in _NOT_TEMPORARY_AND:
        return False
    if qml.TemporaryAND in type(op).__mro__:  # (not isinstance: see _NOT_TEMPORARY_AND)
        return True
    _NOT_TEMPORARY_AND.add(type(op))
    return False


#: operator classes known not to be TemporaryAND (isinstance with PennyLane's abstract
#: classes costs a microsecond, asked for every gate of a circuit, and the first negative
#: answer for a class walks every subclass of the ABC: checked through the MRO instead)
_NOT_TEMPORARY_AND: set[type] = set()


def expand_traced_control_values(ops: list[Any]) -> list[Any]:
    """Operators whose control values are traced (`TemporaryAND(control_values=v)`, also
    adjointed or controlled) -> flips, the all-ones operator, flips back (the flipped wires
    are the TemporaryAND's own controls, so the flips need no outer control). Other
    operators are unchanged."""
    out: list[Any] = []
    for op in ops:
        if not _wraps_temporary_and(op):  # most operators: nothing to look at
            out.append(op)
            continue
        with qml.QueuingManager.stop_recording():
            found = _with_static_values(op)
        if found is None:
            out.append(op)
            continue
        new, wires, values = found
        out += [*flip_ops(wires, values, 1.0), new, *flip_ops(wires, values, -1.0)]
    return out


# ----------------------------------------------------------------------------------------
# the callables adjoint(fn) and ctrl(fn, ...) return inside a QNode trace
# ----------------------------------------------------------------------------------------
class RegionOperation:
    """What `adjoint(fn)(...)` / `ctrl(fn, ...)(...)` return inside a QNode trace, as
    Catalyst's HybridAdjoint/HybridCtrl operations do: the region, already applied, described
    by its `wires` (the control wires, then the wires of its operations in program order)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ops: list[qml.operation.Operator] = []  # in emission order
        self.transform = Transform()

    @property
    def wires(self) -> qml.wires.Wires:
        # an adjoint region is emitted in reverse: program order is the reverse of that
        ops = reversed(self.ops) if self.transform.adjoint else self.ops
        control = qml.wires.Wires(list(self.transform.wires))
        return qml.wires.Wires.all_wires([control, *(op.wires for op in ops)])

    def __repr__(self) -> str:
        return f"{self.name}(wires={self.wires.tolist()})"


def _collectors() -> list[RegionOperation]:
    regions = getattr(_local, "regions", None)
    if regions is None:
        regions = _local.regions = []
    return regions


@contextlib.contextmanager
def _collecting(region: RegionOperation | None, transform: Transform) -> Iterator[None]:
    """Operations emitted inside the block are also the operations of `region`."""
    if region is None:
        yield
        return
    region.transform = transform
    _collectors().append(region)
    try:
        yield
    finally:
        _collectors().pop()


class TransformedCallable:
    """`fn` with `transform` (and run-time control-value flips) applied when called."""

    def __init__(
        self, fn: Callable, transform: Transform, flips: tuple[list, list] = ([], [])
    ) -> None:
        self.fn = fn
        self.transform = transform
        self.flips = flips
        self.__name__ = getattr(fn, "__name__", "fn")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> RegionOperation:
        region = RegionOperation("Adjoint" if self.transform.adjoint else "Controlled")
        if discarding():
            return region
        for op in flip_ops(*self.flips, 1.0):
            qml.apply(op)
        if recording():  # emitted later, as a part of the enclosing region
            record_node(_CallNode(self.fn, args, kwargs, self.transform, region))
        else:
            with _collecting(region, self.transform):
                call_transformed(self.fn, args, kwargs, self.transform)
        for op in flip_ops(*self.flips, -1.0):
            qml.apply(op)
        return region


def in_qnode_trace() -> bool:
    """Whether a QNode body (or an adjoint/ctrl region of one) is being traced."""
    return context.is_tracing() and (context.current().quantum is not None or in_region())


def split_control_values(
    control: Any, control_values: Any
) -> tuple[list[Any], list[Any], list[Any]]:
    """(wires, values with traced ones replaced by True, original values)."""
    wires = list(qml.wires.Wires(control))
    if control_values is None:
        values: list[Any] = [True] * len(wires)
    elif isinstance(control_values, bool | int | np.integer | np.bool_ | Scalar) or (
        isinstance(control_values, Tracer) and control_values.shape == ()
    ):
        values = [control_values]
    else:
        values = list(control_values)
    if len(values) != len(wires):
        raise ValueError(
            f"Length of the control_values ({len(values)}) must be None or equal to the "
            f"length of control ({len(wires)})"
        )
    static = [True if is_traced(v) else bool(v) for v in values]
    return wires, static, values


__all__ = [
    "MEASUREMENT_MESSAGE",
    "RegionOperation",
    "Transform",
    "TransformedCallable",
    "call_transformed",
    "discarded",
    "expand_traced_control_values",
    "flip_ops",
    "in_qnode_trace",
    "in_region",
    "recording",
    "split_control_values",
]
