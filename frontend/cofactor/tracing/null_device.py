"""PennyLane's `null.qubit` device under qjit: the circuit is traced and compiled, but
nothing quantum runs.

PennyLane's NullQubit (pennylane/devices/null_qubit.py) returns, for every measurement, zeros
of the measurement's shape and numeric type, except `probs` and `state`, which are the
all-zero basis state (`[1, 0, ...]`), and `counts`, which puts every shot on the smallest
outcome. The circuit function compiled for it queues and decomposes the operations as usual
(so unsupported operations and wires are reported as for a real device), emits no gates,
and returns those constants; mid-circuit measurements give 0 (False). Its runtime device is
a single qubit, whatever the wire count, so circuits of any width compile and "run".
"""

from __future__ import annotations

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
from xdsl.ir import Operation

from cofactor.errors import CompileError
from cofactor.tracing.numpy_rules import as_tracer
from cofactor.tracing.qnode import QuantumScope
from cofactor.tracing.tracer import BOOL, Tracer

NULL_DEVICES = ("null.qubit",)

# the widest state/probabilities returned as constants (2**n elements are traced values)
MAX_NULL_STATE_WIRES = 16


def is_null_device(device: Any) -> bool:
    """Whether `device` is PennyLane's null.qubit."""
    return getattr(device, "name", None) in NULL_DEVICES


class NullScope(QuantumScope):
    """A circuit on null.qubit: operations are checked and dropped, measurements constant."""

    runs_nothing = True

    def emit_operation(
        self,
        op: qml.operation.Operator,
        adjoint: bool = False,
        ctrl: tuple[list[Any], list[int]] = ([], []),
    ) -> None:
        for w in [*ctrl[0], *op.wires]:
            self._check_wire(w)

    def _check_wire(self, label: Any) -> None:
        if isinstance(label, Tracer):
            return
        if self.wire_map is not None and label not in self.wire_map:
            raise CompileError(
                f"wire {label!r} is not on the device (wires: {list(self.wire_map)})"
            )
        if self.wire_map is not None:
            self.max_wire = max(self.max_wire, self.wire_map[label])

    @staticmethod
    def strip_device(fn: func.FuncOp) -> None:
        """Make the circuit function a classical one: no device to acquire or release (so no
        state of 2**wires amplitudes), and not a QNode to the gradient passes (its results
        are constants, whose derivatives are zero, as null.qubit's)."""
        for op in list(fn.walk()):
            if _op_name(op) in ("quantum.device_acquire", "quantum.device_release"):
                op.detach()
                op.erase()
        fn.attributes.pop("cofactor.qnode", None)

    def _width(self, mp: MeasurementProcess) -> int:
        if mp.wires:
            for w in mp.wires:
                self._check_wire(w)
            return len(mp.wires)
        return self.total_qubits()

    def emit_measurement(self, mp: MeasurementProcess) -> Any:
        if isinstance(mp, ExpectationMP | VarianceMP):
            return as_tracer(np.float64(0.0))
        if isinstance(mp, StateMP | ProbabilityMP):
            k = self._width(mp)
            if k > MAX_NULL_STATE_WIRES:
                raise CompileError(
                    f"null.qubit: qml.{type(mp).__name__.removesuffix('MP').lower()} of {k} "
                    f"wires would be 2**{k} constants; measure at most {MAX_NULL_STATE_WIRES} "
                    "wires (or expval/sample) on null.qubit"
                )
            dtype = np.complex128 if type(mp) is StateMP else np.float64
            value = np.zeros(2**k, dtype=dtype)
            value[0] = 1.0
            return as_tracer(value)
        if isinstance(mp, SampleMP | CountsMP):
            if self.shots <= 0:
                raise CompileError(
                    f"qml.{type(mp).__name__.removesuffix('MP').lower()} needs shots; the QNode "
                    "is analytic (shots=None). Set shots with qml.set_shots or on the device."
                )
            if mp.obs is not None:
                if isinstance(mp, CountsMP):
                    raise CompileError("qml.counts of an observable is not supported; use wires")
                return as_tracer(np.zeros(self.shots, dtype=np.float64))
            k = self._width(mp)
            if isinstance(mp, SampleMP):
                return as_tracer(np.zeros((self.shots, k), dtype=np.int64))
            counts = np.zeros(2**k, dtype=np.int64)
            counts[0] = self.shots
            return (np.arange(2**k, dtype=np.int64), as_tracer(counts))
        raise CompileError(f"measurement {type(mp).__name__} is not supported by cofactor")


def _op_name(op: Operation) -> str:
    name = getattr(op, "op_name", None)  # xDSL's UnregisteredOp (cofactor's generic ops)
    return name.data if name is not None else op.name


def null_measure(scope: NullScope, wires: Any) -> Tracer:
    """A mid-circuit measurement on null.qubit: the operations before it are dropped, and
    the outcome is 0 (False)."""
    scope.flush()
    listed = list(wires) if isinstance(wires, list | tuple | qml.wires.Wires) else [wires]
    for w in listed:
        scope._check_wire(w)
    scope.has_mcm = True
    return as_tracer(np.bool_(False)).astype(BOOL)


__all__ = ["NULL_DEVICES", "NullScope", "is_null_device", "null_measure"]
