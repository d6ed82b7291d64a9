"""QNodes: capturing a PennyLane circuit into a `func.func` of `quantum` ops.

While a qjit function is traced, `QNode.__call__` is redirected to
`circuit_call.call_qnode`, which emits (once per argument signature) a function

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

from collections.abc import Callable
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
from pennylane.wires import Wires
from xdsl.dialects.builtin import i64
from xdsl.ir import SSAValue

from cofactor.errors import CompileError, CompileValueError
from cofactor.ir.builder import IRBuilder, memref_type, quantum_attrs
from cofactor.ir.mlir15 import generic_op
from cofactor.tracing import context, observable_probs, observables
from cofactor.tracing.density import REDUCED_STATE_MEASUREMENTS
from cofactor.tracing.gate_set import (
    SKIPPED_OPS,
    custom_shift_rule,
    decompose,
    directly_emittable,
    runtime_gates,
    wrapper_kind,
)
from cofactor.tracing.mid_circuit_measure import measure  # re-exported: Catalyst's `measure`
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer
from cofactor.tracing.observables import NAMED_OBSERVABLES  # noqa: F401 (re-exported)
from cofactor.tracing.observables import complex_matrix_memref as _complex_matrix_memref
from cofactor.tracing.observables import depends_on_arguments as _depends_on_arguments
from cofactor.tracing.observables import f64_value as _f64
from cofactor.tracing.tracer import BOOL, COMPLEX, FLOAT, INT, Scalar, Tracer

SUPPORTED_DEVICES = ("default.qubit", "lightning.qubit")
#: why a `default.mixed` QNode (noise channels) cannot be compiled, and the way out
NO_DENSITY_MATRIX_SIMULATOR = (
    "noise channels need a density-matrix simulator, which cofactor does not have: run the "
    "noisy circuit without qjit on default.mixed, or compile its noiseless part on "
    "default.qubit"
)


def unsupported_operation_message(op: Any, name: str) -> str:
    """The refusal of an operation the runtime has no gate for (a noise channel: why)."""
    if isinstance(op, qml.operation.Channel):
        return f"operation {name} is a noise channel: {NO_DENSITY_MATRIX_SIMULATOR}"
    return f"operation {name} is not supported by cofactor's runtime"


_TRACED = (Tracer, Scalar)  # (a tuple made once: `Tracer | Scalar` is a new union per use)


def _state_of_wires(state: Tracer, n: int, labels: list[int]) -> Tracer:
    """The state of `labels` (in that order) from the state of the device's `n` wires 0..n-1,
    on which the wires not in `labels` were never used (so they are |0>)."""
    if labels == list(range(n)):
        return state
    kept = sorted(labels)
    t = state.reshape((2,) * n)[tuple(slice(None) if w in labels else 0 for w in range(n))]
    if kept != labels:
        t = np.transpose(t, [kept.index(w) for w in labels])
    return t.reshape(2 ** len(labels))


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
    # a mid-circuit measurement whose outcome the simulator samples (not postselected): each
    # run of the circuit may take another branch
    random_mcm: bool = False
    # Matrices and Hamiltonian coefficients computed from the circuit's arguments: the
    # gradient passes treat them as constants, so a circuit with any cannot be differentiated.
    traced_constants: list[str] = field(default_factory=list)
    # gates with a user grad_recipe (see `gate_set.custom_shift_rule`)
    custom_shift_rules: list[str] = field(default_factory=list)
    # mitigate_with_zne(folding="local-all"): each gate G is emitted as G (G^dagger G)^k,
    # in control-flow regions too (api_extensions/error_mitigation.py)
    local_folds: int = 0
    # (mcm, transforms) one_shot: this function is one shot of a one-shot loop; shot_kinds:
    # how the loop gathers each output; recording: the transform whose tape is being
    # recorded (nothing is emitted meanwhile); mcm_values: MidMeasure id -> traced outcome
    one_shot: bool = False
    shot_kinds: list[str] = field(default_factory=list)
    recording: str | None = None
    mcm_values: dict[Any, Any] = field(default_factory=dict)
    reacquires: list[Any] = field(default_factory=list)  # device resets between tapes
    # one-shot with postselect_mode "hw-like" (PennyLane's default): postselected
    # measurements are not forced; `valid` (memref<f64>, 1 or 0) says whether this shot
    # passed every postselection, and the loop over shots discards the shots that did not
    discard_invalid: bool = False
    valid: Any = None
    # A device without wires: its static wires in order of first use (a dict as an ordered
    # set), whether a traced wire was used, and the terminal measurements (set before they
    # are emitted): what a measurement of all wires measures (`all_wires`)
    wire_order: dict[int, None] = field(default_factory=dict)
    traced_wires: bool = False
    terminal: list[MeasurementProcess] = field(default_factory=list)
    state_widths: set[int] = field(default_factory=set)  # of the states emitted, so sized
    snapshots: list[Tracer] = field(default_factory=list)  # states at qml.Snapshot()s
    # wire index -> its i64 constant in the block being appended to (see `wire`)
    _wire_consts: dict[int, SSAValue] = field(default_factory=dict)
    _wire_block: Any = None

    # -- wires -----------------------------------------------------------------------
    def wire(self, label: Any) -> SSAValue:
        """The i64 SSA value of a wire (labels map through the device wires)."""
        wire_map = self.wire_map
        if wire_map is not None and type(label) is int:
            # (the common case, as below without its type tests: a device's int label)
            index = wire_map.get(label)
            if index is not None:
                if index > self.max_wire:
                    self.max_wire = index
                return self._wire_constant(context.current().builder, index)
        if isinstance(label, _TRACED):
            t = as_tracer(label)
            if t.shape != () or t.dtype not in (INT, BOOL):
                raise CompileError("a traced wire must be an integer scalar")
            self.traced_wires = True
            if self.wire_map is not None and any(k != v for k, v in self.wire_map.items()):
                raise CompileError("traced wires need a device with wires 0..n-1")
            return cast_tracer(t, INT).elems[()].value
        if type(label).__name__ == "DynamicWire":
            raise CompileError(
                "qml.allocate (dynamically allocated wires) is not supported by cofactor: "
                "declare the extra wires on the device and use them by their labels"
            )
        if self.wire_map is not None:
            index = self.wire_map.get(label)  # (the values are ints: None means absent)
            if index is None:
                raise CompileError(
                    f"wire {label!r} is not on the device (wires: {list(self.wire_map)})"
                )
        elif isinstance(label, int | np.integer) and label >= 0:
            index = int(label)
            if index not in self.wire_order:
                self.wire_order[index] = None
        else:
            raise CompileError(f"wire label {label!r} needs a device declared with its wires")
        if index > self.max_wire:
            self.max_wire = index
        return self._wire_constant(context.current().builder, index)

    def _static_wires(self, b: IRBuilder, labels: tuple) -> list[SSAValue] | None:
        """`[self.wire(w) for w in labels]` when every label is an int of the device's wire
        map (one gate's wires, the common case), else None (then `wire` decides each)."""
        wire_map = self.wire_map
        if wire_map is None:
            return None
        indices = [wire_map.get(w) if type(w) is int else None for w in labels]
        if None in indices:
            return None
        block = b.appending_block
        if block is None:
            return [self._wire_constant(b, i) for i in indices]
        if block is not self._wire_block:
            self._wire_block, self._wire_consts = block, {}
        consts = self._wire_consts
        out = []
        for index in indices:
            if index > self.max_wire:
                self.max_wire = index
            value = consts.get(index)
            # (`.op.parent`: the block of the constant's op, as `_wire_constant` asks)
            if value is None or value.op.parent is not block:
                value = consts[index] = b.const(index, i64)
            out.append(value)
        return out

    def _wire_constant(self, b: IRBuilder, index: int) -> SSAValue:
        """One constant per wire and block: a long circuit would otherwise carry a constant
        per gate operand through every stage. Reused only while ops are appended at the end
        of the same block, where the earlier constant dominates every later op."""
        block = b.appending_block
        if block is None:
            return b.const(index, i64)
        if block is not self._wire_block:
            self._wire_block, self._wire_consts = block, {}
        value = self._wire_consts.get(index)
        if value is None or value.owner.parent_block() is not block:
            value = self._wire_consts[index] = b.const(index, i64)
        return value

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
        ops, measurements, mid_circuit = [], [], False
        for item in items:
            kind = _QUEUED_KINDS.get(type(item))
            if kind is None:
                kind = _queued_kind(type(item))
            if kind & _OPERATOR:
                ops.append(item)
                mid_circuit = mid_circuit or bool(kind & _MID_CIRCUIT)
            if kind & _MEASUREMENT:
                measurements.append(item)
        if mid_circuit:
            # a quantum-function transform queued the tape it made: measurements in order
            from cofactor.tracing.transforms import _emit_operations

            _emit_operations(self, qml.tape.QuantumScript(ops), "a quantum-function transform")
            return measurements
        self.emit_gates(ops)
        return measurements

    def emit_gates(self, ops: list[Any]) -> None:
        """Emit queued operators in order: run-time control values expanded (TemporaryAND
        with traced control values: run-time flips around it), gates folded for local ZNE
        (`local_folds`), decomposed to the gate set."""
        from cofactor.api_extensions.hybrid import expand_traced_control_values

        ops = expand_traced_control_values(ops)
        if self.local_folds:
            from cofactor.api_extensions.error_mitigation import folded_locally

            ops = folded_locally(ops, self.local_folds)
        for op in decompose(ops):
            self.emit_operation(op)

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
        if name == "Snapshot":  # Catalyst: the QNode returns (states, results)
            self.snapshots.append(observable_probs.snapshot_state(self, op))
        plain = _PLAIN_GATE_CLASSES.get(type(op))
        if plain is None:
            plain = _plain_gate_class(op)
        if (
            plain
            and not ctrl[0]
            and not ctrl[1]
            and name in runtime_gates()
            and name not in _SPECIAL_GATES
        ):
            # (the common gate of a circuit, as below without the checks its class has
            # answered once: a long circuit asks them of every gate)
            if plain == _CONTROLLED:  # (CNOT, CZ, Toffoli, ...: one gate, as below)
                wires, base_wires = op.control_wires, op.target_wires
                labels = (
                    wires.labels + base_wires.labels
                    if type(wires) is Wires and type(base_wires) is Wires
                    else None
                )
            else:
                wires = op.wires
                labels = wires.labels if type(wires) is Wires else None
            target = None if labels is None else self._static_wires(b, labels)
            if target is not None:
                params = [_f64(p) for p in op.parameters] if op.data else []
                attrs = _gate_attrs(name, len(params), len(target), adjoint, ())
                b.insert(generic_op("quantum.gate", [*params, *target], [], attrs))
                return None
        if name in SKIPPED_OPS:
            if self.num_qubits is None:  # its wires are still the circuit's (tape.wires)
                for w in op.wires:
                    if isinstance(w, int | np.integer) and w >= 0:
                        self.wire_order.setdefault(int(w), None)
                        self.max_wire = max(self.max_wire, int(w))
            return
        if hasattr(op, "cofactor_emit"):  # an operator that emits itself (gridsynth words)
            return op.cofactor_emit(self, adjoint, ctrl)
        kind = wrapper_kind(op)
        if kind is qml.ops.Adjoint and directly_emittable(op.base):
            return self.emit_operation(op.base, not adjoint, ctrl)
        if (
            kind is qml.ops.Controlled
            and name not in runtime_gates()  # (CNOT, CZ, Toffoli, ...: one gate)
            and directly_emittable(op.base)
        ):
            wires = [*ctrl[0], *op.control_wires]
            values = [*ctrl[1], *[int(bool(v)) for v in op.control_values]]
            return self.emit_operation(op.base, adjoint, (wires, values))
        ctrl_wires = [self.wire(w) for w in ctrl[0]]
        # a Controlled's wires are its control wires, then its base's (PennyLane builds
        # them as a new Wires object per access)
        labels = (*op.control_wires, *op.target_wires) if kind is qml.ops.Controlled else op.wires
        target = [self.wire(w) for w in labels]
        if name == "QubitUnitary" or name == "PauliRot":
            self._emit_unitary_or_pauli_rot(op, name, target, ctrl_wires, adjoint, ctrl[1])
            return
        if name not in runtime_gates():
            raise CompileError(unsupported_operation_message(op, name))
        if custom_shift_rule(type(op)):
            self.custom_shift_rules.append(f"{name} ({type(op).__qualname__})")
        if name == "GlobalPhase":
            target = []
        params = [_f64(p) for p in op.parameters] if op.data else []
        values = tuple(map(int, ctrl[1])) if ctrl[1] else ()
        attrs = _gate_attrs(name, len(params), len(target), adjoint, values)
        b.insert(generic_op("quantum.gate", [*params, *target, *ctrl_wires], [], attrs))

    def _emit_unitary_or_pauli_rot(
        self,
        op: qml.operation.Operator,
        name: str,
        target: list[SSAValue],
        ctrl_wires: list[SSAValue],
        adjoint: bool,
        ctrl_values: list[int],
    ) -> None:
        b = context.current().builder
        common = {"adjoint": adjoint, "ctrl_values": list(ctrl_values)}
        if name == "QubitUnitary":
            shape = tuple(np.shape(op.parameters[0]))
            if len(shape) != 2:
                # (a stack of matrices reached the runtime's DxD unitary: an MLIR verifier
                # error, not the user's words)
                raise CompileValueError(
                    f"QubitUnitary on wires {op.wires.tolist()} got a matrix of shape {shape}: "
                    "parameter broadcasting (a batch of matrices as one gate) is not "
                    "supported under qjit; map the circuit over the batch with cofactor.vmap"
                )
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
        if isinstance(mp, REDUCED_STATE_MEASUREMENTS):
            from cofactor.tracing.density import reduced_state_measurement

            return reduced_state_measurement(self, mp)
        if isinstance(mp, StateMP) and type(mp) is StateMP:
            labels = self.all_wires()
            n = self.num_qubits if labels is None else max(labels, default=-1) + 1
            if labels is not None:
                self.state_widths.add(n)  # checked against the device's final width
            out = ctx.hoisted_alloc(memref_type((2**n,), COMPLEX))
            op = b.insert(generic_op("quantum.state", [out]))
            state = Tracer.from_memref(out, (2**n,), COMPLEX, anchor=op)
            return state if labels is None else _state_of_wires(state, n, labels)
        if isinstance(mp, ProbabilityMP | SampleMP | CountsMP):
            if mp.obs is None:
                return self._emit_basis_measurement(mp, None)
            # (with shots, differentiated circuits too: the projectors' sampled expectation
            # values, which the Jacobians can place; see observable_probs.py)
            differentiated = context.differentiation_method() == "auto"
            if isinstance(mp, ProbabilityMP) and (self.shots <= 0 or differentiated):
                probs = observable_probs.probs_by_projectors(self, mp.obs)
                if probs is not None:
                    return probs
            # the observable's eigenbasis: rotate, measure, rotate back for what follows
            eigen = observable_probs.eigenvalues(mp)
            undo = observable_probs.rotate(self, mp.obs)
            result = self._emit_basis_measurement(mp, eigen)
            undo()
            return result
        from cofactor.tracing.density import unsupported_measurement

        raise unsupported_measurement(mp)

    def _emit_basis_measurement(
        self, mp: MeasurementProcess, eigen: Callable[[Tracer], Tracer] | None
    ) -> Tracer | tuple[np.ndarray, Tracer]:
        """probs / sample / counts in the computational basis (`eigen`: for an observable's
        samples or counts, bits or counts -> its eigenvalues; observable_probs.eigenvalues)."""
        b = context.current().builder
        ctx = context.current()
        labels = list(mp.wires) if mp.wires else self.all_wires()
        wires = [self.wire(w) for w in labels or ()]
        k = len(labels) if labels is not None else self.total_qubits()
        if isinstance(mp, ProbabilityMP):
            out = ctx.hoisted_alloc(memref_type((2**k,), FLOAT))
            op = b.insert(generic_op("quantum.probs", [out, *wires]))
            return Tracer.from_memref(out, (2**k,), FLOAT, anchor=op)
        if self.shots <= 0:
            raise CompileError(
                f"qml.{type(mp).__name__.removesuffix('MP').lower()} needs shots: it "
                "cannot work with shots=None (an analytic QNode). Set shots with "
                "qml.set_shots or on the device."
            )
        if isinstance(mp, SampleMP):
            out = ctx.hoisted_alloc(memref_type((self.shots, k), INT))
            op = b.insert(generic_op("quantum.sample", [out, *wires]))
            bits = Tracer.from_memref(out, (self.shots, k), INT, anchor=op)
            return bits if eigen is None else eigen(bits)
        out = ctx.hoisted_alloc(memref_type((2**k,), INT))
        op = b.insert(generic_op("quantum.counts", [out, *wires]))
        counts = Tracer.from_memref(out, (2**k,), INT, anchor=op)
        if eigen is not None:  # an observable's counts: keyed by its eigenvalues
            return eigen(counts)
        return (np.arange(2**k, dtype=np.int64), counts)

    def _some_wire(self, obs: qml.operation.Operator) -> SSAValue:
        """Wire index 0, for an observable that acts as the identity on every wire."""
        if self.num_qubits == 0:
            raise CompileError(
                f"cannot measure {obs} on a device without wires (PennyLane does not allow "
                "expectation values of qml.Identity() without wires either)"
            )
        self.max_wire = max(self.max_wire, 0)
        return context.current().builder.const(0, i64)

    def all_wires(self) -> list[int] | None:
        """The wires a measurement without wires (qml.probs(), qml.sample(), qml.state())
        measures: None (every device wire) on a device declared with wires; on a device
        without wires, the circuit's wires in order of first use, then the terminal
        measurements' wires (PennyLane's `tape.wires`)."""
        if self.num_qubits is not None:
            return None
        if self.traced_wires:
            raise CompileError(
                "measuring all wires (qml.probs(), qml.sample(), qml.state() without wires) on "
                "a device declared without wires, in a circuit with traced wire labels: which "
                "wires the circuit uses is only known when it runs. Declare the device's wires, "
                "e.g. qml.device('default.qubit', wires=2), or give the measurement its wires"
            )
        order = dict(self.wire_order)
        for mp in self.terminal:
            try:
                wires = mp.wires
            except AttributeError:  # a statistic of cofactor's traced mid-circuit outcomes
                continue
            for w in wires:
                if isinstance(w, int | np.integer) and w >= 0:
                    order.setdefault(int(w), None)
        return list(order)

    def total_qubits(self) -> int:
        if self.num_qubits is None:
            raise CompileError(
                "measuring all wires needs a device declared with its wires, "
                "e.g. qml.device('default.qubit', wires=2)"
            )
        return self.num_qubits


@cache
def _gate_attr_items(
    name: str, num_params: int, num_wires: int, adjoint: bool, ctrl_values: tuple[int, ...]
) -> tuple[tuple[str, Any], ...]:
    # `adjoint` and `ctrl_values` are optional (absent = false / no controls, docs/ir.md):
    # left out when they have their default, as most gates of a long circuit do.
    optional: dict[str, Any] = {}
    if adjoint:
        optional["adjoint"] = True
    if ctrl_values:
        optional["ctrl_values"] = list(ctrl_values)
    attrs = quantum_attrs(gate=name, num_params=num_params, num_wires=num_wires, **optional)
    return tuple(attrs.items())


def _gate_attrs(
    name: str, num_params: int, num_wires: int, adjoint: bool, ctrl_values: tuple[int, ...]
) -> dict[str, Any]:
    """The attributes of a `quantum.gate` (immutable attributes, built once per kind of
    gate; a fresh dict per op)."""
    return dict(_gate_attr_items(name, num_params, num_wires, adjoint, ctrl_values))


#: gates `emit_operation` writes out itself, whatever their class
_SPECIAL_GATES = frozenset({"QubitUnitary", "PauliRot", "GlobalPhase", *SKIPPED_OPS})

#: operator class -> whether an operator of it is emitted as the gate its name says (no
#: Adjoint/Controlled wrapper, no `cofactor_emit`, no custom shift rule): asked once per class
_PLAIN_GATE_CLASSES: dict[type, int] = {}
_PLAIN, _CONTROLLED = 1, 2  # (a Controlled one: its wires are its controls', its base's)


def _plain_gate_class(op: qml.operation.Operator) -> int:
    cls = type(op)
    kind = wrapper_kind(op)
    plain = (
        kind is not qml.ops.Adjoint
        and not hasattr(cls, "cofactor_emit")
        # (an instance could answer `hasattr(op, "cofactor_emit")` through __getattr__)
        and not hasattr(cls, "__getattr__")
        and not custom_shift_rule(cls)
    )
    answer = _PLAIN_GATE_CLASSES[cls] = (
        0 if not plain else _CONTROLLED if kind is qml.ops.Controlled else _PLAIN
    )
    return answer


#: what a class of queued object is (bits): an operator, a mid-circuit operator (a
#: MidMeasure or Conditional: a quantum-function transform queued the tape it made), a
#: measurement process. Asked of the class's MRO, as in `is_operator` (the first negative
#: isinstance of a class against one of PennyLane's ABCs walks all the ABC's subclasses),
#: once per class.
_OPERATOR, _MID_CIRCUIT, _MEASUREMENT = 1, 2, 4
_QUEUED_KINDS: dict[type, int] = {}


def _queued_kind(cls: type) -> int:
    mro = cls.__mro__
    kind = 0
    if qml.operation.Operator in mro:
        kind |= _OPERATOR
        if qml.ops.MidMeasure in mro or qml.ops.Conditional in mro:
            kind |= _MID_CIRCUIT
    if MeasurementProcess in mro:
        kind |= _MEASUREMENT
    _QUEUED_KINDS[cls] = kind
    return kind


__all__ = ["QuantumScope", "measure", "runtime_gates"]
