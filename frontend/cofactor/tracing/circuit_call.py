"""Calling a QNode inside a trace: the circuit becomes its own `func.func`, called by value.

While a qjit function is traced, `QNode.__call__` is redirected (`capture_qnode_calls`) to
`call_qnode`: once per argument signature (and per differentiation mode) it emits the
circuit function with `_emit_qnode_function` (device facts, a `QuantumScope` from
`tracing/qnode.py` collecting the body, the terminal measurements written to out-parameters)
and records what the gradient passes need to know (`QNodeInfo`); each call site becomes a
`func.call`. Mid-circuit statistics (`mcm`), transforms (`transforms`) and null.qubit
(`null_device`) hook in here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.measurements import (
    CountsMP,
    ExpectationMP,
    MeasurementProcess,
    ProbabilityMP,
    SampleMP,
    StateMP,
    VarianceMP,
)
from xdsl.dialects.builtin import IntegerAttr, StringAttr, UnitAttr, i64
from xdsl.ir import Block, Region

from cofactor.errors import CompileError
from cofactor.ir.builder import call_op, func_op, memref_type, quantum_attrs
from cofactor.ir.mlir15 import generic_op
from cofactor.launcher import BufferSpec
from cofactor.tracing import aliasing, context, gridsynth, pytree, shot_vectors
from cofactor.tracing.numpy_rules import as_tracer, in_memory, store_tracer
from cofactor.tracing.observables import NAMED_OBSERVABLES  # noqa: F401 (re-exported)
from cofactor.tracing.observables import is_dynamic as _is_dynamic

# (one_shot at import, not on the first trace: the cached first call of a process traces
# every QNode through emit_for_mcm_method, and importing it there cost 0.3 ms of that call)
from cofactor.tracing.one_shot import call_one_shot, discards_invalid_shots, emit_for_mcm_method
from cofactor.tracing.qnode import NO_DENSITY_MATRIX_SIMULATOR, SUPPORTED_DEVICES, QuantumScope
from cofactor.tracing.tracer import FLOAT, Scalar, Tracer


def _device_facts(qnode: Any) -> tuple[int | None, dict[Any, int] | None, int]:
    dev = qnode.device
    name = getattr(dev, "name", type(dev).__name__)
    short = getattr(dev, "short_name", name)
    if name not in SUPPORTED_DEVICES and short not in SUPPORTED_DEVICES and name != "null.qubit":
        raise CompileError(
            f"device {name!r} is not supported by cofactor; use one of "
            f"{', '.join(SUPPORTED_DEVICES)} (they run on cofactor's own simulator)"
            + (f"; {NO_DENSITY_MATRIX_SIMULATOR}" if name == "default.mixed" else "")
        )
    wires = dev.wires
    if wires is not None and any(isinstance(w, Tracer | Scalar) for w in wires.labels):
        # qml.device(..., wires=n) with a traced n: PennyLane takes n as one wire's label
        raise CompileError(
            f"device {name!r}: its wires are a traced value (qml.device(..., wires=n) with n "
            "computed from the compiled function's arguments); the number of qubits must be "
            "known when compiling: pass n as a static argument (qjit(static_argnums=...)) "
            "or a Python int"
        )
    wire_map = None if wires is None else {w: i for i, w in enumerate(wires.labels)}
    num_qubits = None if wires is None else len(wires)
    # (a shot vector runs its total; call_qnode cuts the samples: tracing/shot_vectors.py)
    shots_obj = getattr(qnode, "shots", None) or dev.shots
    shots = int(shots_obj.total_shots) if shots_obj is not None and shots_obj.total_shots else 0
    if shots >= 2**63:  # the runtime counts shots in an int64 (this wrapped to a negative)
        raise CompileError(
            f"device {name!r}: {shots} shots do not fit the runtime's 64-bit shot count; "
            "use fewer shots (at most 2**63 - 1)"
        )
    return num_qubits, wire_map, shots


def _circuit_scope(
    qnode: Any, num_qubits: Any, wire_map: Any, shots: int, one_shot: bool
) -> QuantumScope:
    """The scope a circuit is traced in: null.qubit's runs nothing (tracing/null_device)."""
    from cofactor.tracing.null_device import NullScope, is_null_device

    cls = NullScope if is_null_device(qnode.device) else QuantumScope
    return cls(qnode, num_qubits, wire_map, shots, one_shot=one_shot)


def _static_key(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return ("array", x.shape, x.dtype.str, x.tobytes())
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))
    return x


def call_qnode(qnode: Any, args: tuple, kwargs: dict) -> Any:
    """A QNode called during tracing: emit (or reuse) its function, then call it."""
    ctx = context.current()
    if ctx.quantum is not None:
        raise CompileError("calling a QNode inside another QNode is not supported")
    if kwargs:
        import inspect

        sig = inspect.signature(qnode.func).bind(*args, **kwargs)
        sig.apply_defaults()
        args = sig.args
    leaves, tree = pytree.flatten(args, is_leaf=lambda x: isinstance(x, Tracer))
    dynamic = [as_tracer(x) for x in leaves if _is_dynamic(x)]
    # traced values the circuit function captured from the enclosing trace (closures)
    # become extra arguments: SSA values cannot cross function boundaries
    cells = _traced_cells(qnode.func)
    captured = [c.cell_contents for c in cells]
    specs = tuple(BufferSpec(t.shape, t.dtype) for t in [*dynamic, *captured])
    # (with their positions and types: circuit(x, 0.4) and circuit(0.4, x) are different
    # circuits, and so are circuit(x, 2) and circuit(x, 2.0), equal as keys otherwise)
    static = tuple((i, type(x), _static_key(x)) for i, x in enumerate(leaves) if not _is_dynamic(x))
    # The body is traced differently when Enzyme differentiates it (libm calls become
    # differentiable math ops, sqrt is guarded at 0): a primal trace cannot serve a gradient.
    differentiated = context.differentiation_method(ctx) == "auto"
    key = (id(qnode), tree, specs, static, differentiated)
    entry = ctx.functions.get(key)
    if entry is None:
        entry = emit_for_mcm_method(_emit_qnode_function, qnode, tree, leaves, specs, cells)
        ctx.functions[key] = entry
        # (ids in the key stay theirs while the trace lasts: the QNode's, an unhashable
        # static argument's)
        ctx.key_owners += [qnode, *(x for x in leaves if not _is_dynamic(x))]
    name, out_tree, out_leaves = entry
    info = ctx.qnode_info[name]
    if differentiated:
        check_differentiable(info)
    elif context.differentiation_method(ctx) == "fd":
        check_finite_differences(info)
    dyn = [*dynamic, *captured]
    if info.one_shot_shots:  # mcm_method="one-shot": a loop over shots around the circuit
        result = call_one_shot(name, dyn, out_tree, out_leaves, info)
    else:
        result = _emit_call(name, dyn, out_tree, out_leaves)
    aliasing.passed_to(name, dyn, "the QNode")  # (arrays it writes into: tracing/aliasing.py)
    if (bounds := shot_vectors.partition_bounds(qnode)) is not None:
        qnode_name = getattr(qnode.func, "__name__", name)
        result = shot_vectors.split_samples(result, info.kinds, bounds, qnode_name)
    return result


def _traced_cells(fn: Any) -> list[Any]:
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, Tracer):
            cells.append(cell)
    return cells


def _emit_qnode_function(
    qnode: Any,
    tree: Any,
    leaves: list[Any],
    specs: tuple[BufferSpec, ...],
    cells: list[Any],
    one_shot: bool = False,
) -> tuple[str, Any, list[Any]]:
    from cofactor.tracing import mcm, transforms

    ctx = context.current()
    b = ctx.builder
    num_qubits, wire_map, shots = _device_facts(qnode)
    loop_shots, shots = (shots, 1) if one_shot else (0, shots)
    name = ctx.fresh_name(getattr(qnode.func, "__name__", "circuit"))
    in_types = [memref_type(s.shape, s.dtype) for s in specs]
    block = Block(arg_types=in_types)
    scope = _circuit_scope(qnode, num_qubits, wire_map, shots, one_shot)
    scope.discard_invalid = one_shot and discards_invalid_shots(qnode)
    outer_values: list[Any] = []
    ctx.quantum, ctx.has_quantum = scope, True
    b.push(block)
    ctx.function_entries.append(block)
    try:
        inputs = [
            Tracer.from_memref(arg, s.shape, s.dtype, anchor=block)
            for arg, s in zip(block.args, specs, strict=True)
        ]
        params = iter(inputs)
        call_leaves = [next(params) if _is_dynamic(x) else x for x in leaves]
        call_args = pytree.unflatten(tree, call_leaves)
        outer_values = [c.cell_contents for c in cells]
        for c in cells:
            c.cell_contents = next(params)
        with mcm.patched_statistics(), gridsynth.traced_angles():
            if transforms.has_transforms(qnode):
                result = transforms.trace_transformed(scope, qnode, call_args)
            else:
                result = transforms.trace_as_written(scope, qnode, call_args)
        if scope.snapshots:  # as Catalyst: (the states at the snapshots, the results)
            result = (list(scope.snapshots), result)
        aliasing.record_writes(name, inputs)  # (the caller's arrays: `_emit_call`)
        out_values, out_tree = pytree.flatten(
            result, is_leaf=lambda x: isinstance(x, MeasurementProcess | Tracer)
        )
        outputs: list[Any] = []
        kinds: list[str] = []
        scope.terminal = [v for v in out_values if isinstance(v, MeasurementProcess)]
        for v in out_values:
            if isinstance(v, MeasurementProcess):
                outputs.append(scope.emit_measurement(v))
                kinds.append(_measurement_kind(v))
            else:
                outputs.append(v)
                # (a snapshot's state: check_differentiable refuses it by name)
                kinds.append("snapshot" if any(v is s for s in scope.snapshots) else "classical")
                if scope.one_shot and not _static_leaf(v):
                    # a value computed in each shot (a measurement outcome, a constant):
                    # stacked over the shots, as Catalyst's one-shot does
                    scope.shot_kinds.append("sample")
        # counts return (basis states, counts): splice that pair into the tree
        out_values2, out_tree = pytree.flatten(
            pytree.unflatten(out_tree, outputs), is_leaf=lambda x: isinstance(x, Tracer)
        )
        out_tracers, out_leaves = [], []
        for v in out_values2:
            if _static_leaf(v):
                out_leaves.append(v)  # static (counts basis states, a region's wires)
                continue
            t = as_tracer(v)
            out_tracers.append(t)
            out_leaves.append(BufferSpec(t.shape, t.dtype))
        out_args = [
            block.insert_arg(memref_type(t.shape, t.dtype), len(block.args)) for t in out_tracers
        ]
        for t, ref in zip(out_tracers, out_args, strict=True):
            store_tracer(t, ref)
        if scope.valid is not None:  # one more output: whether the shot passed postselection
            valid_out = block.insert_arg(memref_type((), FLOAT), len(block.args))
            b.store(b.load(scope.valid, []), valid_out, [])
        b.insert(generic_op("quantum.device_release", []))
        ctx.finish_function(block)
    finally:
        for c, v in zip(cells, outer_values, strict=False):
            c.cell_contents = v
        b.pop()
        ctx.quantum = None
    # A device with no wires has a state of one amplitude: acquire exactly that many qubits
    # (the buffers of state() and probs() are sized from this number).
    n = num_qubits if num_qubits is not None else scope.max_wire + 1
    if scope.state_widths - {n}:  # a state buffer sized before a later tape used more wires
        raise CompileError(
            f"qml.state() on a device without wires: the circuit uses {n} wires, more than "
            "when its state was taken; declare the device's wires, e.g. "
            "qml.device('default.qubit', wires=n)"
        )
    # qjit(seed=s): every circuit function of the program gets its own fixed seed, so that
    # two circuits are not correlated while every call of the program repeats its results
    seed = -1 if ctx.seed is None else (int(ctx.seed) + 7919 * ctx.qnode_count) % 2**62
    preseed = None
    if one_shot and seed >= 0:
        # a fixed seed in every shot would repeat one outcome: the caller seeds the device
        # once before its loop over shots, and each shot continues the stream (seed -2)
        preseed = quantum_attrs(num_qubits=n, shots=1, seed=seed)
        seed = -2
    ctx.qnode_count += 1
    acquire = generic_op(
        "quantum.device_acquire", [], [], quantum_attrs(num_qubits=n, shots=shots, seed=seed)
    )
    for op in scope.reacquires:
        op.attributes.update(acquire.attributes)
    if block.first_op is not None:
        block.insert_op_before(acquire, block.first_op)
    else:
        block.add_op(acquire)
    out_types = [memref_type(s.shape, s.dtype) for s in out_leaves if isinstance(s, BufferSpec)]
    if scope.valid is not None:
        out_types.append(memref_type((), FLOAT))
    fn = func_op(name, [*in_types, *out_types], Region(block))
    fn.attributes["cofactor.qnode"] = UnitAttr()
    user_method = getattr(qnode, "diff_method", "best")
    info = QNodeInfo(name, user_method, kinds, scope.has_mcm, scope.traced_constants)
    info.one_shot_shots, info.shot_kinds = loop_shots, scope.shot_kinds
    info.one_shot_preseed = preseed
    info.shot_validity = scope.valid is not None
    info.custom_shift_rules = scope.custom_shift_rules
    info.sampled = bool(shots or loop_shots)
    info.random_mcm = scope.random_mcm
    ctx.qnode_info[name] = info
    fn.attributes["cofactor.diff_method"] = StringAttr(info.diff_method)
    fn.attributes["cofactor.num_inputs"] = IntegerAttr(len(in_types), i64)
    fn.sym_visibility = None
    if getattr(scope, "runs_nothing", False):
        scope.strip_device(fn)  # null.qubit: a classical function (tracing/null_device)
    b.module_ops.append(fn)
    return name, out_tree, out_leaves


def _static_leaf(v: Any) -> bool:
    """A result leaf returned as it is, not computed by the circuit function."""
    if isinstance(v, Tracer):  # (most leaves: `Wires` is an ABC, whose `isinstance` of a
        return False  # new class walks its caches, once per process: 20 us of a first call)
    return (isinstance(v, np.ndarray) and v.dtype != object) or isinstance(v, qml.wires.Wires)


def _measurement_kind(mp: MeasurementProcess) -> str:
    if isinstance(mp, ExpectationMP):
        return "expval"
    if isinstance(mp, VarianceMP):
        return "var"
    if isinstance(mp, StateMP):
        return "state"
    if isinstance(mp, ProbabilityMP):
        return "probs"
    if isinstance(mp, SampleMP):
        return "sample"
    if isinstance(mp, CountsMP):
        return "counts"
    return type(mp).__name__


#: QNode diff_method -> what the gradient passes implement (docs/gradients.md)
SUPPORTED_DIFF_METHODS = ("adjoint", "parameter-shift", "best")


@dataclass
class QNodeInfo:
    """What differentiating a circuit function needs to know about it."""

    name: str
    user_method: Any  # the QNode's diff_method as given to PennyLane
    kinds: list[str]  # per output: expval, var, probs, state, sample, counts, classical
    has_mcm: bool
    traced_constants: list[str] = field(default_factory=list)
    # gates emitted by name from a user's subclass with its own grad_recipe or
    # parameter_frequencies (PennyLane's parameter-shift would use those)
    custom_shift_rules: list[str] = field(default_factory=list)
    one_shot_shots: int = 0  # mcm_method="one-shot": shots to loop over (tracing.mcm)
    shot_kinds: list[str] = field(default_factory=list)
    one_shot_preseed: Any = None  # attributes of the seeding acquire before the loop
    shot_validity: bool = False  # one-shot: a last output says whether the shot is kept
    sampled: bool = False  # the device (or QNode) has finite shots
    random_mcm: bool = False  # a mid-circuit measurement samples its outcome (not postselected)

    @property
    def diff_method(self) -> str:
        """The `cofactor.diff_method` attribute: adjoint, parameter-shift or none."""
        m = self.user_method
        if m == "best":
            # PennyLane's "best" takes the device's own derivatives or backprop, which its
            # simulators only offer without shots, else parameter-shift: with shots the
            # gradient is a finite-shot estimate, as PennyLane's (docs/frontend.md)
            exact = not self.sampled and all(k == "expval" for k in self.kinds)
            return "adjoint" if exact else "parameter-shift"
        if m in ("adjoint", "parameter-shift"):
            return m
        return "none"


def check_differentiable(info: QNodeInfo) -> None:
    """Raise a DifferentiableCompileError when Enzyme cannot differentiate the circuit."""
    from cofactor.errors import DifferentiableCompileError

    where = f"(QNode {info.name})"
    if info.user_method is None:
        raise DifferentiableCompileError(
            f"Cannot differentiate a QNode explicitly marked non-differentiable {where}: it "
            "has diff_method=None"
        )
    if info.user_method not in SUPPORTED_DIFF_METHODS:
        raise DifferentiableCompileError(
            f"diff_method={info.user_method!r} {where} is not supported by cofactor's "
            "gradients; use 'adjoint', 'parameter-shift' or 'best' (or method=\"fd\")"
        )
    if info.user_method == "adjoint" and info.sampled:
        # The adjoint method reads the state vector: its gradient would be exact while the
        # QNode's values are finite-shot estimates. PennyLane refuses this QNode
        # (QuantumFunctionError: the device does not support adjoint with the circuit).
        raise DifferentiableCompileError(
            f"diff_method='adjoint' {where} cannot be used with finite shots: the adjoint "
            "gradient is always exact, not an estimate from the shots; use "
            "diff_method='parameter-shift' for a finite-shot gradient, or shots=None for "
            "the exact adjoint gradient"
        )
    if "snapshot" in info.kinds:
        raise DifferentiableCompileError(
            f"State returns are forbidden in gradients {where}: a compiled QNode returns "
            "the states at its qml.Snapshot()s (as Catalyst); remove the snapshots from the "
            "circuit to differentiate it"
        )
    if "state" in info.kinds:
        raise DifferentiableCompileError(f"State returns are forbidden in gradients {where}")
    if "var" in info.kinds:
        raise DifferentiableCompileError(f"Variance returns are forbidden in gradients {where}")
    for kind in ("sample", "counts"):
        if kind in info.kinds:
            raise DifferentiableCompileError(
                f"qml.{kind} returns cannot be differentiated {where}; use expval or probs"
            )
    if "classical" in info.kinds:  # (Catalyst's words, then ours)
        allowed = "qml.expval" if info.diff_method == "adjoint" else "qml.expval or qml.probs"
        raise DifferentiableCompileError(
            f"The {info.diff_method} method can only be used for QNodes which return "
            f"{allowed} {where}: it returns a value that is not a measurement (only "
            "measurement results of a QNode can be differentiated)"
        )
    if info.has_mcm:
        raise DifferentiableCompileError(
            f"mid-circuit measurements cannot be differentiated with the adjoint or "
            f"parameter-shift method (MidCircuitMeasure is not allowed in a differentiated "
            f"circuit) {where}; postselect every mid-circuit measurement "
            '(qml.measure(w, postselect=0 or 1)) and differentiate with method="fd"'
        )
    if info.traced_constants:
        raise DifferentiableCompileError(
            f"{info.traced_constants[0]} {where} is computed from the circuit's arguments, and "
            "cofactor's gradients cannot differentiate through it yet: measure the terms "
            "separately (e.g. return qml.expval(qml.Z(0)), qml.expval(qml.X(0))) and weight "
            'them outside the QNode, or differentiate with method="fd"'
        )
    if info.diff_method == "parameter-shift" and info.custom_shift_rules:
        raise DifferentiableCompileError(
            f"the operation {info.custom_shift_rules[0]} {where} defines its own grad_recipe "
            "or parameter_frequencies, which PennyLane's parameter-shift would use: that is "
            "not supported with catalyst on this device, nor with cofactor (its parameter-"
            "shift uses the gate's own rule); use diff_method='adjoint' or method=\"fd\""
        )
    if info.diff_method == "adjoint" and any(k != "expval" for k in info.kinds):
        others = sorted({k for k in info.kinds if k != "expval"})
        raise DifferentiableCompileError(
            f"The adjoint method can only be used for QNodes which return qml.expval {where}; "
            f"this one returns {', '.join(others)}: use diff_method='parameter-shift'"
        )


def check_finite_differences(info: QNodeInfo) -> None:
    """Raise a DifferentiableCompileError when finite differences of the circuit would be
    meaningless: without shots (single-branch statistics) each run of a circuit with a
    mid-circuit measurement that is not postselected samples its own branch, so f(x + h) and
    f(x) may come from different branches and their difference over h is of order 1/h."""
    from cofactor.errors import DifferentiableCompileError

    if info.random_mcm and not info.sampled:
        raise DifferentiableCompileError(
            f'method="fd" cannot differentiate QNode {info.name}: it measures mid-circuit '
            "without postselection and without shots, so each evaluation samples one random "
            "branch (single-branch statistics) and the finite difference of two evaluations "
            "is not a derivative; postselect each measurement "
            "(qml.measure(w, postselect=0 or 1)) so that every evaluation takes the same branch"
        )


def _emit_call(name: str, dynamic: list[Tracer], out_tree: Any, out_leaves: list[Any]) -> Any:
    ctx = context.current()
    b = ctx.builder
    args = [in_memory(t) for t in dynamic]
    outs = [
        ctx.hoisted_alloc(memref_type(s.shape, s.dtype))
        for s in out_leaves
        if isinstance(s, BufferSpec)
    ]
    call = b.insert(call_op(name, [*args, *outs]))
    it = iter(outs)
    values = [
        Tracer.from_memref(next(it), s.shape, s.dtype, anchor=call)
        if isinstance(s, BufferSpec)
        else s
        for s in out_leaves
    ]
    return pytree.unflatten(out_tree, values)


@contextlib.contextmanager
def capture_qnode_calls() -> Iterator[None]:
    """For the duration of a trace: redirect `QNode.__call__` to `call_qnode`, and make
    `qml.math.is_abstract` true for tracers (as it is for JAX tracers), so that PennyLane
    skips value checks it cannot do on traced data (e.g. StatePrep's norm check).

    Both replacements act only in a thread that is tracing; other threads keep calling
    the originals (their QNodes execute normally while this thread compiles)."""
    with context.intercepts(_QNODE_INTERCEPTS, reusable=True):
        yield


def _make_call(original_call: Any) -> Any:
    def traced_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if context.is_tracing():
            return call_qnode(self, args, kwargs)
        return original_call(self, *args, **kwargs)

    return traced_call


def _make_is_abstract(original_is_abstract: Any) -> Any:
    def is_abstract(tensor: Any, like: str | None = None) -> bool:
        if context.is_tracing() and (
            isinstance(tensor, Tracer | Scalar)
            or (
                isinstance(tensor, np.ndarray)
                and tensor.dtype == object
                and any(isinstance(v, Scalar) for v in tensor.flat)
            )
        ):
            return True
        return original_is_abstract(tensor, like=like)

    return is_abstract


# (the same triples on every trace: their replacements are made once, here, at import;
# see `context.prepare`)
_QNODE_INTERCEPTS = [
    (qml.QNode, "__call__", _make_call),
    (qml.math, "is_abstract", _make_is_abstract),
]
context.prepare(_QNODE_INTERCEPTS)
