"""PennyLane transforms on QNodes: executed at trace time on the captured tape.

A QNode whose `compile_pipeline` is not empty (`qml.transforms.cancel_inverses(qnode)`,
`qml.metric_tensor(qnode)`, a user's `@qml.transform`, ...) is traced in *recording* mode:
the circuit function runs with PennyLane's queuing, but nothing quantum is emitted; its
operators (with traced parameters), its mid-circuit measurements (as PennyLane `MidMeasure`
operators, so they keep their place among the gates) and its returned measurements form a
`QuantumScript`. The pipeline is applied to that tape, every resulting tape is emitted as a
circuit (a device reset between two of them), and the post-processing function runs on the
traced results (it is ordinary numpy code on Tracers).

What cannot be recorded is refused with a CompileError naming the transform: cofactor control
flow (`for_loop`, `while_loop`, `cond`) inside the transformed circuit, and any transform
whose own code fails on the tape (e.g. a decomposition that needs the numeric value of a
traced gate angle).

The classical co-transform of a transform (e.g. `qml.metric_tensor(..., hybrid=True)`, which
multiplies by the Jacobian of gate parameters w.r.t. QNode arguments) is not applied: results
are with respect to the gate parameters of the tape, which equal the QNode's arguments when
those are used directly as gate angles.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.measurements import MeasurementProcess, MeasurementValue

from cofactor.errors import CompileError, CompileNotImplementedError
from cofactor.ir.builder import quantum_attrs
from cofactor.ir.mlir15 import generic_op
from cofactor.tracing import context, gridsynth, pytree
from cofactor.tracing.tracer import Tracer, is_operator


def pipeline_of(qnode: Any) -> Any:
    """The QNode's transform program (PennyLane 0.45 calls it `compile_pipeline`)."""
    program = getattr(qnode, "compile_pipeline", None)
    if program is None:
        program = getattr(qnode, "_transform_program", None)
    return program


def has_transforms(qnode: Any) -> bool:
    program = pipeline_of(qnode)
    return program is not None and len(program) > 0


def _names(qnode: Any) -> str:
    names = []
    for t in pipeline_of(qnode):
        if getattr(t, "tape_transform", "") is None and getattr(t, "pass_name", None):
            names.append(t.pass_name)  # a compiler pass without a tape implementation
            continue
        fn = getattr(t, "tape_transform", None) or getattr(t, "transform", None)
        names.append(getattr(fn, "__name__", None) or str(t))
    return ", ".join(names)


# Catalyst compiler passes (a `qml.transform(pass_name=...)` without a tape implementation)
# that cofactor, which applies tape transforms while tracing, runs as tape transforms:
# PennyLane's tape transform of the same name, or cofactor's own (gridsynth)
_TAPE_TRANSFORM_OF_PASS = {
    "split-non-commuting": "split_non_commuting",
    "split-to-single-terms": "split_to_single_terms",
    "cancel-inverses": "cancel_inverses",
    "merge-rotations": "merge_rotations",
    "combine-global-phases": "combine_global_phases",
}


# Catalyst's peephole passes that keep the circuit's unitary and have no PennyLane tape
# transform: cofactor runs the circuit as written (the same results)
_UNITARY_PRESERVING_PASSES = frozenset({"disentangle-cnot", "disentangle-swap"})


@qml.transform
def _as_written(tape: Any) -> tuple[list[Any], Any]:
    return [tape], lambda results: results[0]


def _tape_transform_of_pass(name: str) -> Any:
    if name == "gridsynth":
        return qml.transform(gridsynth.gridsynth_tape)
    if name in _UNITARY_PRESERVING_PASSES:
        return _as_written
    attribute = _TAPE_TRANSFORM_OF_PASS.get(name)
    if attribute is None:
        known = sorted({*_TAPE_TRANSFORM_OF_PASS, *_UNITARY_PRESERVING_PASSES, "gridsynth"})
        raise CompileNotImplementedError(
            f"the compiler pass {name!r} (a Catalyst MLIR pass, or qml.transform(pass_name="
            f"{name!r})) has no counterpart in cofactor, which applies PennyLane tape "
            f"transforms while tracing; the passes it runs are {', '.join(known)}. Remove the "
            "pass (the circuit then runs as written), or use a PennyLane tape transform"
        )
    return getattr(qml.transforms, attribute)


def _with_tape_stand_ins(program: Any) -> Any:
    """`program` with its pass-only transforms replaced by their tape transforms (same
    arguments)."""
    from pennylane.transforms.core.transform import BoundTransform

    def stand_in(t: Any) -> Any:
        name = getattr(t, "pass_name", None)
        if not name or getattr(t, "tape_transform", None) is not None:
            return t
        transform = _tape_transform_of_pass(name)
        return t if transform is None else BoundTransform(transform, t.args, t.kwargs)

    replaced = [stand_in(t) for t in program]
    if all(r is t for r, t in zip(replaced, program, strict=True)):
        return program
    return type(program)(replaced)


def mid_key(mp: Any) -> Any:
    """What identifies a MidMeasure across the copies transforms make of it."""
    return getattr(mp, "meas_uid", None) or getattr(mp, "id", None) or id(mp)


class RegionUnderTransform(CompileError):
    """A compiled control-flow region in a circuit whose tape is being recorded."""


#: transforms (by the names `_names` gives) that only simplify the circuit, never change its
#: results: with compiled control flow, which a tape cannot hold, the circuit runs as written
#: (Catalyst's MLIR passes run there; the numbers are the same either way)
_SIMPLIFICATIONS = frozenset(
    {
        "cancel_inverses",
        "merge_rotations",
        "combine_global_phases",
        *_TAPE_TRANSFORM_OF_PASS,
        *_UNITARY_PRESERVING_PASSES,
    }
) - {"split-non-commuting", "split-to-single-terms"}


def refuse_region(scope: Any) -> None:
    """Called when a control-flow region would be traced while a tape is being recorded."""
    raise RegionUnderTransform(
        f"the transform {scope.recording} cannot be applied by cofactor to a circuit that uses "
        "for_loop, while_loop or cond: PennyLane transforms work on a tape of operations, so "
        "write the circuit with Python loops and conditions on static values, or apply the "
        "transform to a circuit without compiled control flow"
    )


def record_measure(wires: Any, reset: bool, postselect: int | None) -> MeasurementValue:
    """`measure` while a tape is recorded: a PennyLane MidMeasure on the tape (it keeps its
    place among the gates through the transforms), and PennyLane's measurement value."""
    if isinstance(wires, Tracer):
        raise CompileError("a mid-circuit measurement under a transform needs a static wire")
    mp = qml.ops.MidMeasure(
        wires=qml.wires.Wires(wires),
        reset=reset,
        postselect=postselect,
        meas_uid=str(uuid.uuid4()),
    )
    return MeasurementValue([mp])


def measured_values(scope: Any, result: Any) -> Any:
    """MeasurementValues in a circuit's result (a quantum-function transform returns those
    of its tape) -> their traced outcomes."""
    leaves, tree = pytree.flatten(result, is_leaf=_is_leaf)
    if not any(isinstance(v, MeasurementValue) for v in leaves):
        return result
    out = [
        v.processing_fn(*[scope.mcm_values[mid_key(m)] for m in v.measurements])
        if isinstance(v, MeasurementValue)
        else v
        for v in leaves
    ]
    return pytree.unflatten(tree, out)


def _is_leaf(x: Any) -> bool:
    return isinstance(x, MeasurementProcess | Tracer | MeasurementValue)


def trace_as_written(scope: Any, qnode: Any, call_args: tuple) -> Any:
    """Trace the circuit of a QNode without its transforms: the gates are emitted as they
    are queued; returns its result tree (measurement processes left for the caller)."""
    queue = qml.queuing.AnnotatedQueue()
    scope.queues.append(queue)
    with queue:
        result = qnode.func(*call_args)
        scope.flush()
    return measured_values(scope, result)


def trace_transformed(scope: Any, qnode: Any, call_args: tuple) -> Any:
    """Trace the circuit of a transformed QNode; returns its result tree (measurement
    processes left for the caller to emit, or already traced values)."""
    names = _names(qnode)
    _refuse_simulating_transforms(names)
    queue = qml.queuing.AnnotatedQueue()
    scope.queues.append(queue)
    scope.recording = names
    try:
        with queue, _pennylane_cond_on_measurement_values():
            result = qnode.func(*call_args)
    except RegionUnderTransform:
        if not set(names.split(", ")) <= _SIMPLIFICATIONS:
            raise
        as_written = True  # (nothing quantum was emitted while recording)
    else:
        as_written = False
    finally:
        scope.recording = None
        scope.queues.pop()
    if as_written:
        return trace_as_written(scope, qnode, call_args)
    ops = [o for o in queue.queue if is_operator(o)]
    leaves, tree = pytree.flatten(result, is_leaf=_is_leaf)
    mps = [v for v in leaves if isinstance(v, MeasurementProcess)]
    shots = scope.shots if scope.shots > 0 else None
    tape = qml.tape.QuantumScript(ops, mps, shots=shots)
    # gate parameters computed from the QNode's arguments are the trainable ones (as the
    # parameters from trainable arguments are in PennyLane)
    tape.trainable_params = [i for i, p in enumerate(tape.get_parameters(False)) if _dynamic(p)]
    program = pipeline_of(qnode)
    cotransform = _classical_cotransform(program, tape, call_args, names)
    # a fresh pipeline: PennyLane keeps the classical-Jacobian cache of its last call on it
    program = type(program)(list(program))
    program = _with_tape_stand_ins(program)
    tapes, post = _apply(program, tape, names)
    only_measurements = all(isinstance(v, MeasurementProcess) for v in leaves)
    if len(tapes) == 1:
        passthrough = _identity_postprocessing(post, tapes[0])
        if passthrough is not None and only_measurements:
            # post-processing only rearranges the measurements: leave them to the caller, so
            # that they are emitted (and differentiated) as a plain QNode's measurements
            _emit_operations(scope, tapes[0], names)
            return passthrough[0]
    if scope.one_shot:
        raise CompileError(
            f"the transform {names} post-processes the results of its tapes, which cofactor "
            "cannot combine with mcm_method='one-shot' (the post-processing would run on each "
            "shot); use mcm_method='single-branch-statistics' or no mid-circuit measurements"
        )
    results = []
    for i, t in enumerate(tapes):
        if i > 0:
            _reset_device(scope)
        _emit_operations(scope, t, names)
        scope.terminal = list(t.measurements)
        values = [scope.emit_measurement(mp) for mp in t.measurements]
        results.append(values[0] if len(values) == 1 else tuple(values))
    try:
        # the results as numpy object arrays of traced scalars: PennyLane's post-processing
        # (qml.math on numpy) copies and updates arrays in place, as object arrays allow
        [processed] = post(tuple(_as_objects(r) for r in results))  # one per input tape
        if cotransform is not None:
            processed = cotransform(processed)
    except CompileError:
        raise
    except Exception as err:
        raise CompileError(
            f"the post-processing of the transform {names} failed on traced results: "
            f"{type(err).__name__}: {err}"
        ) from err
    if only_measurements:
        return processed
    # measurement values or classical values are returned beside the measurements (Catalyst
    # allows it): the transform must keep the tape's measurements one for one
    if len(tapes) != 1 or len(tapes[0].measurements) != len(mps):
        raise CompileError(
            f"the transform {names} turns the circuit into {len(tapes)} tapes, so its results "
            "cannot be returned beside mid-circuit measurement values or classical values: "
            "return only measurements (qml.expval, qml.sample(m), ...)"
        )
    measured = iter([processed] if len(mps) == 1 else list(processed))
    out = []
    for v in leaves:
        if isinstance(v, MeasurementProcess):
            out.append(next(measured))
        elif isinstance(v, MeasurementValue):
            out.append(v.processing_fn(*[scope.mcm_values[mid_key(m)] for m in v.measurements]))
        else:
            out.append(v)
    return pytree.unflatten(tree, out)


def _refuse_simulating_transforms(names: str) -> None:
    """Transforms that run a simulation of their own in Python instead of producing tapes
    (their post-processing reads the tape, not results): named, not a failure deep inside."""
    if "adjoint_metric_tensor" in names.split(", "):
        raise CompileError(
            "the transform adjoint_metric_tensor simulates the circuit itself in Python "
            "(default.qubit's state vector) instead of running tapes, which a compiled program "
            "cannot do. Inside qjit use qml.metric_tensor(qnode, approx='block-diag') (or "
            "approx=None for the full tensor), or call adjoint_metric_tensor outside qjit"
        )


def _dynamic(p: Any) -> bool:
    from cofactor.tracing.observables import depends_on_arguments as _depends_on_arguments

    return _depends_on_arguments(p)


def _ssa_elements(x: Any) -> list[Any]:
    leaves, _ = pytree.flatten(x, is_leaf=lambda v: isinstance(v, Tracer))
    out = []
    for leaf in leaves:
        if isinstance(leaf, Tracer) and leaf.dtype.kind == "f":
            out += [s.value for s in leaf.elems.flat]
    return out


def _classical_cotransform(program: Any, tape: Any, call_args: tuple, names: str) -> Any:
    """A hybrid transform (`qml.metric_tensor`, hybrid=True by default) contracts its result
    with the classical Jacobian of the gate parameters w.r.t. the QNode's arguments. cofactor
    builds that Jacobian when every trainable gate parameter *is* an element of a float
    argument (any order, repeats allowed), and refuses otherwise. Returns the contraction to
    apply after the post-processing, or None."""
    last = program[-1]
    if last.classical_cotransform is None or not last.kwargs.get("hybrid", True):
        return None
    sub = type(program)(list(program)[:-1])
    inner = [tape]
    if len(sub):
        with _abstract_allclose():
            inner, _ = sub((tape,))
    if len(inner) != 1:
        raise CompileError(f"the hybrid transform {names} needs one tape before its last step")
    inner = inner[0]
    params = [p for p in inner.get_parameters(False) if _dynamic(p)]
    inner.trainable_params = [i for i, p in enumerate(inner.get_parameters(False)) if _dynamic(p)]
    where: dict[Any, tuple[int, tuple[int, ...]]] = {}
    args = [a for a in call_args if isinstance(a, Tracer) and a.dtype.kind == "f"]
    for k, a in enumerate(args):
        for idx in np.ndindex(a.shape):
            where.setdefault(a.elems[idx].value, (k, idx))
    jacs = [np.zeros((len(params), *a.shape)) for a in args]
    for i, p in enumerate(params):
        ssa = p.elems[()].value if isinstance(p, Tracer) and p.shape == () else None
        ssa = getattr(p, "value", None) if ssa is None and not isinstance(p, Tracer) else ssa
        origin = where.get(ssa) or _loaded_from(ssa, args)
        if origin is None:
            raise CompileError(
                f"the transform {names} (hybrid=True) needs the Jacobian of the gate parameters "
                "with respect to the QNode's arguments, which cofactor computes only when each "
                "gate parameter is an element of a float argument (here one is computed from "
                "them): pass hybrid=False (results with respect to the gate parameters)"
            )
        k, idx = origin
        jacs[k][(i, *idx)] = 1.0
    cjac = jacs[0] if len(jacs) == 1 else tuple(jacs)
    return lambda result: last.classical_cotransform(result, cjac=cjac, tape=inner)


def _loaded_from(ssa: Any, args: list[Tracer]) -> tuple[int, tuple[int, ...]] | None:
    """(argument, index) when `ssa` is a load of an argument's element at constant indices."""
    from xdsl.dialects import arith, memref

    owner = getattr(ssa, "owner", None)
    if not isinstance(owner, memref.LoadOp):
        return None
    idx = []
    for i in owner.indices:
        c = getattr(i, "owner", None)
        if not isinstance(c, arith.ConstantOp):
            return None
        idx.append(int(c.value.value.data))
    for k, a in enumerate(args):
        if a.memref is not None and a.memref == owner.memref:
            return k, tuple(idx)
    return None


def _apply(program: Any, tape: Any, names: str) -> tuple[list[Any], Any]:
    """Apply the transform program to the tape. A transform that cannot handle mid-circuit
    measurements (PennyLane's `clifford_t_decomposition` asks for their matrix) is applied to
    the gates between them, segment by segment, when it maps each segment to one tape."""
    try:
        with _abstract_allclose():
            tapes, post = program((tape,))
        return list(tapes), post
    except Exception as err:
        first = err
    mids = [i for i, op in enumerate(tape.operations) if isinstance(op, qml.ops.MidMeasure)]
    if mids:
        try:
            ops: list[Any] = []
            start = 0
            for i in [*mids, len(tape.operations)]:
                segment = tape.operations[start:i]
                last = i == len(tape.operations)
                measurements = tape.measurements if last else []
                seg_tape = qml.tape.QuantumScript(segment, measurements, shots=tape.shots)
                with _abstract_allclose():
                    seg_tapes, seg_post = program((seg_tape,))
                if len(seg_tapes) != 1:
                    raise first
                ops += list(seg_tapes[0].operations)
                if not last:
                    ops.append(tape.operations[i])
                start = i + 1
            out = qml.tape.QuantumScript(ops, seg_tapes[0].measurements, shots=tape.shots)
            return [out], seg_post
        except Exception:
            pass
    raise _transform_error(type(first))(
        f"the transform {names} could not be applied by cofactor to the traced circuit: "
        f"{type(first).__name__}: {first}"
    ) from first


@functools.cache
def _transform_error(raised: type) -> type:
    """CompileError, also of the builtin type the transform raised (RuntimeError,
    ValueError, ...): code written against PennyLane/Catalyst catches what they raise."""
    if raised.__module__ != "builtins" or not issubclass(raised, Exception):
        return CompileError
    try:
        return type(f"Compile{raised.__name__}", (CompileError, raised), {})
    except TypeError:  # an incompatible layout (e.g. OSError)
        return CompileError


def _as_objects(x: Any) -> Any:
    """Tracers in a result -> numpy object arrays of Scalars (a Scalar for shape ())."""
    if isinstance(x, Tracer):
        return x.elems[()] if x.shape == () else x.elems.copy()
    if isinstance(x, tuple | list):
        return type(x)(_as_objects(v) for v in x)
    return x


@contextlib.contextmanager
def _abstract_allclose() -> Iterator[None]:
    """`qml.math.allclose` of traced values is False while a transform runs: the values are
    not known, so nothing can be proven equal (`merge_rotations` asks whether merged angles
    cancel, and then keeps the gate for abstract values anyway, as under jax.jit)."""
    original = qml.math.allclose

    def allclose(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        if _dynamic_any(a) or _dynamic_any(b):
            return False
        return original(a, b, *args, **kwargs)

    qml.math.allclose = allclose
    try:
        yield
    finally:
        qml.math.allclose = original


def _dynamic_any(x: Any) -> bool:
    from cofactor.tracing.observables import is_dynamic as _is_dynamic

    if isinstance(x, list | tuple):
        return any(_dynamic_any(v) for v in x)
    return _is_dynamic(x)


def _identity_postprocessing(post: Any, tape: Any) -> Any:
    """The post-processed result when `post` only rearranges the measurement processes of
    the tape (tried on the measurement objects themselves), else None."""
    mps = list(tape.measurements)
    if not mps:
        return None
    try:
        probe = post(((mps[0] if len(mps) == 1 else tuple(mps)),))
    except Exception:  # post-processing computes with results: not a pure rearrangement
        return None
    leaves, _ = pytree.flatten(probe, is_leaf=_is_leaf)
    if leaves and all(any(v is mp for mp in mps) for v in leaves):
        return probe
    return None


def _emit_operations(scope: Any, tape: Any, names: str) -> None:
    """Emit a tape's operations in order; its MidMeasures become `quantum.measure` ops whose
    outcomes are kept in `scope.mcm_values`. (Not through a queue: a transform may put the
    same operator object on a tape several times, and a queue keeps it once.)"""
    from cofactor.tracing.qnode import measure

    pending: list[Any] = []

    def emit_pending() -> None:
        scope.emit_gates(pending)
        pending.clear()

    for op in tape.operations:
        if isinstance(op, qml.ops.MidMeasure):
            emit_pending()
            value = measure(op.wires[0], reset=op.reset, postselect=op.postselect)
            scope.mcm_values[mid_key(op)] = value
        elif isinstance(op, qml.ops.Conditional):
            emit_pending()
            _emit_conditional(scope, op, names)
        else:
            pending.append(op)
    emit_pending()


@contextlib.contextmanager
def _pennylane_cond_on_measurement_values() -> Iterator[None]:
    """While a tape is recorded, `qml.cond` on a MeasurementValue is PennyLane's own (it puts
    `Conditional` operators on the tape) rather than the compiler's."""
    original = qml.cond

    def cond(condition: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(condition, MeasurementValue):
            return original(condition, *args, **kwargs)
        from pennylane.compiler import compiler  # the module qml.cond consults

        active = compiler.active_compiler
        compiler.active_compiler = lambda: None
        try:
            return original(condition, *args, **kwargs)
        finally:
            compiler.active_compiler = active

    qml.cond = cond
    try:
        yield
    finally:
        qml.cond = original


def _emit_conditional(scope: Any, op: Any, names: str) -> None:
    """A `Conditional` operator of a tape: its base under an `scf.if` on the traced value."""
    from cofactor.api_extensions.control_flow import cond

    try:
        value = op.meas_val.processing_fn(
            *[scope.mcm_values[mid_key(m)] for m in op.meas_val.measurements]
        )
    except KeyError:
        raise CompileError(
            f"the transform {names} left {op.base.name} conditioned on a mid-circuit "
            "measurement that is no longer on the tape"
        ) from None

    def branch() -> None:
        qml.apply(op.base)

    cond(value)(branch)()


def _reset_device(scope: Any) -> None:
    """Between two tapes of a transform: release the device and acquire it afresh (its
    attributes are copied from the function's own acquire when that is made)."""
    b = context.current().builder
    b.insert(generic_op("quantum.device_release", []))
    op = b.insert(generic_op("quantum.device_acquire", [], [], quantum_attrs()))
    scope.reacquires.append(op)


__all__ = [
    "has_transforms",
    "record_measure",
    "refuse_region",
    "trace_as_written",
    "trace_transformed",
]
