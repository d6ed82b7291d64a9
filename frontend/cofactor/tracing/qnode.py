"""QNodes: capturing a PennyLane circuit into a `func.func` of `quantum` ops.

While a qjit function is traced, `QNode.__call__` is redirected (`capture_qnode_calls`) to
`call_qnode`, which emits (once per argument signature) a function

    func.func @<circuit>(%in: memref<...>..., %out: memref<...>...)   // void, destination-passing
      quantum.device_acquire {num_qubits, shots, seed}
      quantum.gate ... / quantum.measure ...           // from PennyLane's queue
      quantum.obs_* ; quantum.expval / probs / ...     // terminal measurements -> %out
      quantum.device_release

and a `func.call` to it at the call site. The circuit body runs with PennyLane's queuing:
operators land in an `AnnotatedQueue`; at each *flush point* (a mid-circuit measurement, a
control-flow op, the end of the circuit) the queued operators are decomposed to the runtime's
gate set (PennyLane's rules, and cofactor's own in `decompositions`) and emitted in order.
Observables of terminal measurements are emitted by `observables`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
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
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, StringAttr, UnitAttr, i1, i64
from xdsl.ir import Block, Region, SSAValue

from cofactor.errors import CompileError, CompileTypeError
from cofactor.ir.builder import memref_type, quantum_attrs
from cofactor.ir.mlir15 import generic_op
from cofactor.launcher import BufferSpec
from cofactor.tracing import context, decompositions, observables, pytree
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer, store_tracer
from cofactor.tracing.observables import NAMED_OBSERVABLES  # noqa: F401 (re-exported)
from cofactor.tracing.observables import complex_matrix_memref as _complex_matrix_memref
from cofactor.tracing.observables import depends_on_arguments as _depends_on_arguments
from cofactor.tracing.observables import f64_value as _f64
from cofactor.tracing.observables import is_dynamic as _is_dynamic
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Scalar, Tracer

SUPPORTED_DEVICES = ("default.qubit", "lightning.qubit")
SKIPPED_OPS = ("Identity", "Barrier", "Snapshot")


@cache
def runtime_gates() -> dict[str, tuple[int, int]]:
    """Gate name -> (num_params, num_wires) from runtime/include/cofactor/gates.def."""
    from cofactor.toolchain import REPO_ROOT

    path = REPO_ROOT / "runtime" / "include" / "cofactor" / "gates.def"
    text = path.read_text()
    found = re.findall(r"^COFACTOR_GATE\((\w+),\s*(-?\d+),\s*(-?\d+)\)", text, re.M)
    return {name: (int(p), int(w)) for name, p, w in found}


@cache
def gate_set() -> frozenset[str]:
    """The operators the frontend emits directly; everything else is decomposed."""
    return frozenset(runtime_gates()) | {"QubitUnitary", "PauliRot"}


# ----------------------------------------------------------------------------------------
# the quantum scope: state while a circuit body is traced
# ----------------------------------------------------------------------------------------
@dataclass
class QuantumScope:
    """A circuit under construction: device facts and the stack of PennyLane queues."""

    qnode: Any
    num_qubits: int | None  # None: inferred from the wires used (device without wires)
    wire_map: dict[Any, int] | None
    shots: int
    queues: list[qml.queuing.AnnotatedQueue] = field(default_factory=list)
    max_wire: int = -1
    has_mcm: bool = False  # a mid-circuit measurement was emitted (not differentiable)
    # Matrices and Hamiltonian coefficients computed from the circuit's arguments: the
    # gradient passes treat them as constants, so a circuit with any cannot be differentiated.
    traced_constants: list[str] = field(default_factory=list)
    # (mcm, transforms) one_shot: this function is one shot of a one-shot loop; shot_kinds:
    # how the loop gathers each output; recording: the transform whose tape is being
    # recorded (nothing is emitted meanwhile); mcm_values: MidMeasure id -> traced outcome
    one_shot: bool = False
    shot_kinds: list[str] = field(default_factory=list)
    recording: str | None = None
    mcm_values: dict[Any, Any] = field(default_factory=dict)
    reacquires: list[Any] = field(default_factory=list)  # device resets between tapes

    # -- wires -----------------------------------------------------------------------
    def wire(self, label: Any) -> SSAValue:
        """The i64 SSA value of a wire (labels map through the device wires)."""
        b = context.current().builder
        if isinstance(label, Tracer | Scalar):
            t = as_tracer(label)
            if t.shape != () or t.dtype not in (INT, BOOL):
                raise CompileError("a traced wire must be an integer scalar")
            if self.wire_map is not None and any(k != v for k, v in self.wire_map.items()):
                raise CompileError("traced wires need a device with wires 0..n-1")
            return cast_tracer(t, INT).elems[()].value
        if self.wire_map is not None:
            if label not in self.wire_map:
                raise CompileError(
                    f"wire {label!r} is not on the device (wires: {list(self.wire_map)})"
                )
            index = self.wire_map[label]
        elif isinstance(label, int | np.integer) and label >= 0:
            index = int(label)
        else:
            raise CompileError(f"wire label {label!r} needs a device declared with its wires")
        self.max_wire = max(self.max_wire, index)
        return b.const(index, i64)

    # -- queue handling ----------------------------------------------------------------
    def flush(self) -> list[Any]:
        """Emit the queued operators; returns the queued measurement processes."""
        if not self.queues:
            return []
        if self.recording is not None:
            from cofactor.tracing.transforms import refuse_region

            refuse_region(self)
        queue = self.queues[-1]
        items = list(queue.queue)
        queue.clear()
        ops = [o for o in items if isinstance(o, qml.operation.Operator)]
        measurements = [m for m in items if isinstance(m, MeasurementProcess)]
        # (semantics) TemporaryAND with traced control values: run-time flips around it
        from cofactor.api_extensions.hybrid import expand_traced_control_values

        ops = expand_traced_control_values(ops)
        for op in _decompose(ops):
            self.emit_operation(op)
        return measurements

    # -- operations ------------------------------------------------------------------
    def emit_operation(
        self,
        op: qml.operation.Operator,
        adjoint: bool = False,
        ctrl: tuple[list[Any], list[int]] = ([], []),
    ) -> None:
        """Emit one operator of the gate set (with adjoint/control modifiers)."""
        b = context.current().builder
        name = op.name
        if name in SKIPPED_OPS:
            return
        if isinstance(op, qml.ops.Adjoint) and _directly_emittable(op.base):
            return self.emit_operation(op.base, not adjoint, ctrl)
        if (
            isinstance(op, qml.ops.Controlled)
            and _directly_emittable(op.base)
            and op.name not in runtime_gates()
        ):
            wires = [*ctrl[0], *op.control_wires]
            values = [*ctrl[1], *[int(bool(v)) for v in op.control_values]]
            return self.emit_operation(op.base, adjoint, (wires, values))
        ctrl_wires = [self.wire(w) for w in ctrl[0]]
        target = [self.wire(w) for w in op.wires]
        common = {"adjoint": adjoint, "ctrl_values": list(ctrl[1])}
        if name == "QubitUnitary":
            if _depends_on_arguments(op.parameters[0]):
                self.traced_constants.append(f"the matrix of QubitUnitary on wires {op.wires}")
            matrix = _complex_matrix_memref(op.parameters[0])
            attrs = quantum_attrs(num_wires=len(target), **common)
            b.insert(generic_op("quantum.unitary", [matrix, *target, *ctrl_wires], [], attrs))
            return
        if name == "PauliRot":
            theta = _f64(op.parameters[0])
            word = op.hyperparameters["pauli_word"]
            attrs = quantum_attrs(word=word, num_wires=len(target), **common)
            b.insert(generic_op("quantum.pauli_rot", [theta, *target, *ctrl_wires], [], attrs))
            return
        if name not in runtime_gates():
            raise CompileError(f"operation {name} is not supported by cofactor's runtime")
        if name == "GlobalPhase":
            target = []
        params = [_f64(p) for p in op.parameters]
        attrs = quantum_attrs(gate=name, num_params=len(params), num_wires=len(target), **common)
        b.insert(generic_op("quantum.gate", [*params, *target, *ctrl_wires], [], attrs))

    # -- observables and measurements ------------------------------------------------
    def emit_observable(self, obs: qml.operation.Operator) -> SSAValue:
        return observables.emit_observable(self, obs)

    def emit_measurement(self, mp: MeasurementProcess) -> Tracer:
        """Emit a terminal measurement; returns its value as a memref-backed tracer."""
        from cofactor.tracing import mcm  # statistics of mid-circuit measurements, one-shot

        special = mcm.dispatch(self, mp)
        if special is not NotImplemented:
            return special
        return self.emit_measurement_plain(mp)

    def emit_measurement_plain(self, mp: MeasurementProcess) -> Tracer:
        """Emit a terminal measurement of wires/observables (no mid-circuit values)."""
        b = context.current().builder
        ctx = context.current()
        if isinstance(mp, ExpectationMP | VarianceMP):
            return observables.emit_expval_or_var(self, mp.obs, isinstance(mp, VarianceMP))
        if isinstance(mp, StateMP) and type(mp) is StateMP:
            n = self.total_qubits()
            out = ctx.hoisted_alloc(memref_type((2**n,), COMPLEX))
            op = b.insert(generic_op("quantum.state", [out]))
            return Tracer.from_memref(out, (2**n,), COMPLEX, anchor=op)
        if isinstance(mp, ProbabilityMP | SampleMP | CountsMP):
            eigen = None
            if mp.obs is not None:
                eigen = self._rotate_to_eigenbasis(mp.obs)
            wires = [self.wire(w) for w in mp.wires]
            k = len(mp.wires) if mp.wires else self.total_qubits()
            if isinstance(mp, ProbabilityMP):
                out = ctx.hoisted_alloc(memref_type((2**k,), FLOAT))
                op = b.insert(generic_op("quantum.probs", [out, *wires]))
                return Tracer.from_memref(out, (2**k,), FLOAT, anchor=op)
            if self.shots <= 0:
                raise CompileError(
                    f"qml.{type(mp).__name__.removesuffix('MP').lower()} needs shots; the QNode "
                    "is analytic (shots=None). Set shots with qml.set_shots or on the device."
                )
            if isinstance(mp, SampleMP):
                out = ctx.hoisted_alloc(memref_type((self.shots, k), INT))
                op = b.insert(generic_op("quantum.sample", [out, *wires]))
                bits = Tracer.from_memref(out, (self.shots, k), INT, anchor=op)
                return bits if eigen is None else eigen(bits)
            if eigen is not None:
                raise CompileError("qml.counts of an observable is not supported; use wires")
            out = ctx.hoisted_alloc(memref_type((2**k,), INT))
            op = b.insert(generic_op("quantum.counts", [out, *wires]))
            counts = Tracer.from_memref(out, (2**k,), INT, anchor=op)
            return (np.arange(2**k, dtype=np.int64), counts)
        raise CompileError(f"measurement {type(mp).__name__} is not supported by cofactor")

    def _rotate_to_eigenbasis(self, obs: qml.operation.Operator):
        """Apply the observable's diagonalizing gates; returns bits -> eigenvalues for
        Pauli words (used by sample)."""
        for gate in _decompose(obs.diagonalizing_gates()):
            self.emit_operation(gate)
        factors = obs.operands if isinstance(obs, qml.ops.Prod) else [obs]
        if not all(f.name in ("PauliX", "PauliY", "PauliZ", "Hadamard") for f in factors):
            return None

        def eigenvalues(bits: Tracer) -> Tracer:
            signs = 1 - 2 * cast_tracer(bits, FLOAT)  # bit 0 -> +1, bit 1 -> -1
            return np.prod(signs, axis=1)

        return eigenvalues

    def _some_wire(self, obs: qml.operation.Operator) -> SSAValue:
        """Wire index 0, for an observable that acts as the identity on every wire."""
        if self.num_qubits == 0:
            raise CompileError(
                f"cannot measure {obs} on a device without wires (PennyLane does not allow "
                "expectation values of qml.Identity() without wires either)"
            )
        self.max_wire = max(self.max_wire, 0)
        return context.current().builder.const(0, i64)

    def total_qubits(self) -> int:
        if self.num_qubits is None:
            raise CompileError(
                "measuring all wires needs a device declared with its wires, "
                "e.g. qml.device('default.qubit', wires=2)"
            )
        return self.num_qubits


def _directly_emittable(op: qml.operation.Operator) -> bool:
    if op.name in gate_set() or op.name in SKIPPED_OPS:
        return True
    if isinstance(op, qml.ops.Adjoint | qml.ops.Controlled):
        return _directly_emittable(op.base)
    return False


def _decompose(ops: list[Any]) -> list[Any]:
    """Decompose operators down to what `emit_operation` accepts: PennyLane's rules, except
    for the operators cofactor has its own rule for (`decompositions`), whose results are
    decomposed again. What remains unsupported is left for `emit_operation` to name."""
    if all(_directly_emittable(op) for op in ops):
        return ops

    def stop(op: Any) -> bool:
        return _directly_emittable(op) or decompositions.has_rule(op)

    result: list[Any] = []
    for op in decompositions.pennylane_decompose(ops, set(gate_set()), stop):
        if _directly_emittable(op):
            result.append(op)
        elif decompositions.has_rule(op):
            result += _decompose(decompositions.expand(op))
        else:
            result.append(op)
    return result


# ----------------------------------------------------------------------------------------
# QNode calls
# ----------------------------------------------------------------------------------------
def _device_facts(qnode: Any) -> tuple[int | None, dict[Any, int] | None, int]:
    dev = qnode.device
    name = getattr(dev, "name", type(dev).__name__)
    short = getattr(dev, "short_name", name)
    if name not in SUPPORTED_DEVICES and short not in SUPPORTED_DEVICES and name != "null.qubit":
        raise CompileError(
            f"device {name!r} is not supported by cofactor; use one of "
            f"{', '.join(SUPPORTED_DEVICES)} (they run on cofactor's own simulator)"
        )
    wires = dev.wires
    wire_map = None if wires is None else {w: i for i, w in enumerate(wires.labels)}
    num_qubits = None if wires is None else len(wires)
    shots_obj = getattr(qnode, "shots", None) or dev.shots
    if shots_obj is not None and shots_obj.has_partitioned_shots:
        raise CompileError("shot vectors are not supported by cofactor")
    shots = int(shots_obj.total_shots) if shots_obj is not None and shots_obj.total_shots else 0
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
    static = tuple(_static_key(x) for x in leaves if not _is_dynamic(x))
    # The body is traced differently when Enzyme differentiates it (libm calls become
    # differentiable math ops, sqrt is guarded at 0): a primal trace cannot serve a gradient.
    differentiated = context.differentiation_method(ctx) == "auto"
    key = (id(qnode), tree, specs, static, differentiated)
    entry = ctx.functions.get(key)
    if entry is None:
        from cofactor.tracing.mcm import emit_for_mcm_method

        entry = emit_for_mcm_method(_emit_qnode_function, qnode, tree, leaves, specs, cells)
        ctx.functions[key] = entry
    name, out_tree, out_leaves = entry
    info = ctx.qnode_info[name]
    if differentiated:
        check_differentiable(info)
    if info.one_shot_shots:  # mcm_method="one-shot": a loop over shots around the circuit
        from cofactor.tracing.mcm import call_one_shot

        dyn = [*dynamic, *captured]
        return call_one_shot(name, dyn, out_tree, out_leaves, info)
    return _emit_call(name, [*dynamic, *captured], out_tree, out_leaves)


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
    outer_values: list[Any] = []
    ctx.quantum, ctx.has_quantum = scope, True
    b.push(block)
    ctx.function_entries.append(block)
    try:
        params = iter(
            Tracer.from_memref(arg, s.shape, s.dtype, anchor=block)
            for arg, s in zip(block.args, specs, strict=True)
        )
        call_leaves = [next(params) if _is_dynamic(x) else x for x in leaves]
        call_args = pytree.unflatten(tree, call_leaves)
        outer_values = [c.cell_contents for c in cells]
        for c in cells:
            c.cell_contents = next(params)
        with mcm.patched_statistics():
            if transforms.has_transforms(qnode):
                result = transforms.trace_transformed(scope, qnode, call_args)
            else:
                queue = qml.queuing.AnnotatedQueue()
                scope.queues.append(queue)
                with queue:
                    result = qnode.func(*call_args)
                    scope.flush()
        out_values, out_tree = pytree.flatten(
            result, is_leaf=lambda x: isinstance(x, MeasurementProcess | Tracer)
        )
        outputs: list[Any] = []
        kinds: list[str] = []
        for v in out_values:
            if isinstance(v, MeasurementProcess):
                outputs.append(scope.emit_measurement(v))
                kinds.append(_measurement_kind(v))
            else:
                outputs.append(v)
                kinds.append("classical")
        # counts return (basis states, counts): splice that pair into the tree
        out_values2, out_tree = pytree.flatten(
            pytree.unflatten(out_tree, outputs), is_leaf=lambda x: isinstance(x, Tracer)
        )
        out_tracers, out_leaves = [], []
        for v in out_values2:
            if isinstance(v, np.ndarray) and v.dtype != object:
                out_leaves.append(v)  # static (counts basis states)
                continue
            t = as_tracer(v)
            out_tracers.append(t)
            out_leaves.append(BufferSpec(t.shape, t.dtype))
        out_args = [
            block.insert_arg(memref_type(t.shape, t.dtype), len(block.args)) for t in out_tracers
        ]
        for t, ref in zip(out_tracers, out_args, strict=True):
            store_tracer(t, ref)
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
    fn = func.FuncOp(name, ([*in_types, *out_types], []), Region(block))
    fn.attributes["cofactor.qnode"] = UnitAttr()
    user_method = getattr(qnode, "diff_method", "best")
    info = QNodeInfo(name, user_method, kinds, scope.has_mcm, scope.traced_constants)
    info.one_shot_shots, info.shot_kinds = loop_shots, scope.shot_kinds
    info.one_shot_preseed = preseed
    ctx.qnode_info[name] = info
    fn.attributes["cofactor.diff_method"] = StringAttr(info.diff_method)
    fn.attributes["cofactor.num_inputs"] = IntegerAttr(len(in_types), i64)
    fn.sym_visibility = None
    if getattr(scope, "runs_nothing", False):
        scope.strip_device(fn)  # null.qubit: a classical function (tracing/null_device)
    b.module_ops.append(fn)
    return name, out_tree, out_leaves


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
    one_shot_shots: int = 0  # mcm_method="one-shot": shots to loop over (tracing.mcm)
    shot_kinds: list[str] = field(default_factory=list)
    one_shot_preseed: Any = None  # attributes of the seeding acquire before the loop

    @property
    def diff_method(self) -> str:
        """The `cofactor.diff_method` attribute: adjoint, parameter-shift or none."""
        m = self.user_method
        if m == "best":
            return "adjoint" if all(k == "expval" for k in self.kinds) else "parameter-shift"
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
    if "state" in info.kinds:
        raise DifferentiableCompileError(f"State returns are forbidden in gradients {where}")
    if "var" in info.kinds:
        raise DifferentiableCompileError(f"Variance returns are forbidden in gradients {where}")
    for kind in ("sample", "counts"):
        if kind in info.kinds:
            raise DifferentiableCompileError(
                f"qml.{kind} returns cannot be differentiated {where}; use expval or probs"
            )
    if "classical" in info.kinds:
        raise DifferentiableCompileError(
            f"only measurement results of a QNode can be differentiated {where}: it returns "
            "a value that is not a measurement"
        )
    if info.has_mcm:
        raise DifferentiableCompileError(
            f"mid-circuit measurements cannot be differentiated with the adjoint or "
            f'parameter-shift method {where}; differentiate with method="fd" instead'
        )
    if info.traced_constants:
        raise DifferentiableCompileError(
            f"{info.traced_constants[0]} {where} is computed from the circuit's arguments, and "
            "cofactor's gradients cannot differentiate through it yet: measure the terms "
            "separately (e.g. return qml.expval(qml.Z(0)), qml.expval(qml.X(0))) and weight "
            'them outside the QNode, or differentiate with method="fd"'
        )
    if info.diff_method == "adjoint" and any(k != "expval" for k in info.kinds):
        others = sorted({k for k in info.kinds if k != "expval"})
        raise DifferentiableCompileError(
            f"The adjoint method can only be used for QNodes which return qml.expval {where}; "
            f"this one returns {', '.join(others)}: use diff_method='parameter-shift'"
        )


def _emit_call(name: str, dynamic: list[Tracer], out_tree: Any, out_leaves: list[Any]) -> Any:
    ctx = context.current()
    b = ctx.builder
    args = []
    for t in dynamic:
        if t._elems is None and t.memref is not None:
            args.append(t.memref)
        else:
            buf = ctx.hoisted_alloc(memref_type(t.shape, t.dtype))
            store_tracer(t, buf)
            args.append(buf)
    outs = [
        ctx.hoisted_alloc(memref_type(s.shape, s.dtype))
        for s in out_leaves
        if isinstance(s, BufferSpec)
    ]
    call = b.insert(func.CallOp(name, [*args, *outs], []))
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

    def make_call(original_call: Any) -> Any:
        def traced_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if context.is_tracing():
                return call_qnode(self, args, kwargs)
            return original_call(self, *args, **kwargs)

        return traced_call

    def make_is_abstract(original_is_abstract: Any) -> Any:
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

    with (
        context.intercept(qml.QNode, "__call__", make_call),
        context.intercept(qml.math, "is_abstract", make_is_abstract),
    ):
        yield


class PostselectError(CompileTypeError, ValueError):
    """A bad `postselect` value: a program cofactor refuses. Catalyst raises TypeError
    ("postselect must be '0' or '1', got ...") and a bad value is a ValueError in Python's
    terms: this is all three, so code written against any of them catches it."""


def _postselect_value(postselect: Any) -> int | None:
    """None, or the outcome 0/1 (True/False, 0.0/1.0 and numpy integers count, as in Catalyst's
    `postselect not in [0, 1]` test)."""
    if postselect is None:
        return None
    if isinstance(postselect, Tracer | Scalar):
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


def measure(wires: Any, reset: bool = False, postselect: int | None = None) -> Tracer:
    """Mid-circuit measurement of one wire; returns a traced bool (Catalyst's `measure`)."""
    ctx = context.current() if context.is_tracing() else None
    scope = ctx.quantum if ctx is not None else None
    if scope is None:
        raise CompileError("cofactor.measure can only be used from within a @qjit QNode")
    if isinstance(wires, list | tuple | qml.wires.Wires):
        if len(wires) != 1:
            raise CompileError("Only one element is supported for the 'wires' parameter")
        wires = wires[0]
    postselect = _postselect_value(postselect)
    if scope.recording is not None:  # under a transform: a MidMeasure on the tape
        from cofactor.tracing.transforms import record_measure

        return record_measure(wires, reset, postselect)
    scope.flush()
    scope.has_mcm = True
    b = ctx.builder
    attrs = quantum_attrs(reset=bool(reset), postselect=-1 if postselect is None else postselect)
    value = b.res(generic_op("quantum.measure", [scope.wire(wires)], [i1], attrs))
    from cofactor.tracing.mcm import MeasuredBool

    return MeasuredBool.scalar(value, BOOL)


__all__ = ["QuantumScope", "call_qnode", "capture_qnode_calls", "measure", "runtime_gates"]
