"""Measurements in the middle of a circuit's terminal measurements or gates: in an
observable's eigenbasis (`qml.probs(op=...)`, `qml.sample(obs)`) without leaving the state
rotated for the measurements after them, and the states at `qml.Snapshot()`s.

PennyLane measures each terminal measurement on the circuit's final state. The runtime's
probabilities and samples are in the computational basis, so an observable's measurement
first applies its diagonalizing gates `U`. Two consequences:

- the measurements after it must see the state without `U`: `rotate` applies `U` and
  returns a function that applies `U^dagger` once the measurement is emitted;
- the adjoint and parameter-shift Jacobians (runtime, `cf_rt_jacobian_recorded*`) evaluate
  every recorded measurement on the final state, so gates between measurements would be
  in the wrong place for them. `qml.probs(op=obs)` on a few wires is therefore written
  without touching the state, when analytic and when differentiated with shots: entry `b`
  is the expectation value of the projector `U^dagger |b><b| U` on the observable's wires
  (`probs_by_projectors`; sampled with shots), which every Jacobian method handles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pennylane as qml
from pennylane.measurements import CountsMP, MeasurementProcess, SampleMP, StateMP

from cofactor.errors import CompileError, CompileNotImplementedError, DifferentiableCompileError
from cofactor.tracing import context
from cofactor.tracing.gate_set import decompose
from cofactor.tracing.numpy_rules import cast_tracer
from cofactor.tracing.observables import depends_on_arguments, emit_expval_or_var
from cofactor.tracing.tracer import FLOAT, Tracer

if TYPE_CHECKING:
    from cofactor.tracing.qnode import QuantumScope

#: up to this many wires, analytic probs(op=obs) is 2**k projector expectation values
#: (each a 2**k x 2**k Hermitian); above, the rotated state's probabilities
MAX_PROJECTOR_WIRES = 4


def _constant_gates(obs: qml.operation.Operator) -> list[qml.operation.Operator] | None:
    """The observable's diagonalizing gates, or None where they depend on traced values."""
    if any(depends_on_arguments(p) for p in obs.data):
        return None
    try:
        gates = obs.diagonalizing_gates()
    except Exception:  # noqa: BLE001 (an observable PennyLane cannot diagonalize here)
        return None
    if any(depends_on_arguments(p) for g in gates for p in g.data):
        return None
    return gates


def probs_by_projectors(scope: QuantumScope, obs: qml.operation.Operator) -> Tracer | None:
    """Analytic `qml.probs(op=obs)` as projector expectation values, or None where it does
    not apply (traced observable data, more than MAX_PROJECTOR_WIRES wires)."""
    wires = list(obs.wires)
    if not 0 < len(wires) <= MAX_PROJECTOR_WIRES:
        return None
    gates = _constant_gates(obs)
    if gates is None:
        return None
    u = np.eye(2 ** len(wires), dtype=complex)
    for g in gates:  # applied in order: U = G_m ... G_1
        u = qml.matrix(g, wire_order=wires) @ u
    rows = []
    for b in range(2 ** len(wires)):
        ket = np.conj(u[b, :])  # U^dagger |b>
        projector = np.outer(ket, np.conj(ket))
        rows.append(emit_expval_or_var(scope, qml.Hermitian(projector, wires=wires), False))
    return np.stack(rows)


def rotate(scope: QuantumScope, obs: qml.operation.Operator) -> Callable[[], None]:
    """Applies the observable's diagonalizing gates; returns the function that undoes them
    (to be called once the measurement is emitted)."""
    if context.differentiation_method() == "auto":
        raise DifferentiableCompileError(
            f"differentiating a circuit that samples or measures probabilities of {obs} "
            "(its diagonalizing gates rotate the state, and cofactor's Jacobians evaluate "
            "every measurement on the final state); measure qml.expval of the observable, or "
            "qml.probs(op=...) analytically on at most "
            f"{MAX_PROJECTOR_WIRES} wires with constant observable data"
        )
    gates = decompose(obs.diagonalizing_gates())
    for gate in gates:
        scope.emit_operation(gate)

    def undo() -> None:
        for gate in decompose([qml.adjoint(g, lazy=False) for g in reversed(gates)]):
            scope.emit_operation(gate)

    return undo


def snapshot_state(scope: QuantumScope, op: qml.operation.Operator) -> Tracer:
    """The state at a `qml.Snapshot()`: under qjit a QNode with snapshots returns
    `(states at the snapshots, results)`, as in Catalyst (PennyLane itself returns them only
    through `qml.snapshots`). As Catalyst, only state snapshots, outside control flow."""
    measurement = op.hyperparameters.get("measurement")
    if measurement is not None and not isinstance(measurement, StateMP):
        raise CompileNotImplementedError(
            # Catalyst's words
            "qp.Snapshot() only supports qp.state() when used from within Catalyst, but "
            f"encountered {type(measurement)} (cofactor follows Catalyst)"
        )
    ctx = context.current()
    if ctx.builder.block is not ctx.function_entries[-1]:
        raise CompileNotImplementedError(
            "qml.Snapshot() inside control flow (for_loop, while_loop, cond) is not "
            "supported under qjit: place it in the circuit's body"
        )
    return scope.emit_measurement_plain(qml.state())


def eigenvalues(mp: MeasurementProcess) -> Callable[[Tracer], Any] | None:
    """For `qml.sample(obs)`: bits measured in the rotated basis (shots x k, the
    observable's wires in order) -> the observable's eigenvalues, as PennyLane indexes
    `obs.eigvals()` by the basis state. For `qml.counts(obs)`: the counts of the rotated
    basis states (2**k) -> `(eigenvalues, counts)`, one entry per distinct eigenvalue in
    the order of `obs.eigvals()` (PennyLane's keys with all_outcomes=True, Catalyst's
    layout). None for other measurements."""
    if isinstance(mp, CountsMP):
        return _counts_by_eigenvalue(mp.obs)
    if not isinstance(mp, SampleMP):
        return None
    obs = mp.obs
    if _is_pauli_word(obs):

        def signs(bits: Tracer) -> Tracer:  # a Pauli word: bit 0 -> +1, bit 1 -> -1
            return np.prod(1 - 2 * cast_tracer(bits, FLOAT), axis=1)

        return signs
    eig = _constant_eigenvalues(obs, "sample")

    def values(bits: Tracer) -> Tracer:
        k = bits.shape[1]
        index = bits @ (2 ** np.arange(k - 1, -1, -1, dtype=np.int64))
        out = np.full(index.shape, eig[0])
        for j in range(1, len(eig)):
            out = np.where(index == j, eig[j], out)
        return out

    return values


def _is_pauli_word(obs: qml.operation.Operator) -> bool:
    factors = obs.operands if isinstance(obs, qml.ops.Prod) else [obs]
    return all(f.name in ("PauliX", "PauliY", "PauliZ", "Hadamard") for f in factors)


def _constant_eigenvalues(obs: qml.operation.Operator, what: str) -> np.ndarray:
    """`obs.eigvals()`, indexed by the rotated basis state; refused for traced data."""
    if any(depends_on_arguments(p) for p in obs.data):
        raise CompileError(
            f"qml.{what}({obs}): the observable's data is computed from the compiled "
            "function's arguments, so its eigenvalues are not known when compiling; measure "
            f"its wires (qml.{what}(wires=...)) and map the bits to eigenvalues"
        )
    return np.asarray(qml.math.real(obs.eigvals()), dtype=float)


def _counts_by_eigenvalue(obs: qml.operation.Operator) -> Callable[[Tracer], Any]:
    if _is_pauli_word(obs):  # (a Pauli word: bit parity 0 -> +1, 1 -> -1)
        k = len(obs.wires)
        parity = [bin(i).count("1") % 2 for i in range(2**k)]
        eig = 1.0 - 2.0 * np.array(parity, dtype=float)
    else:
        eig = _constant_eigenvalues(obs, "counts")
    keys = np.array(list(dict.fromkeys(eig.tolist())), dtype=float)
    # which basis states have each eigenvalue: counts per eigenvalue = grouping @ counts
    grouping = (eig[None, :] == keys[:, None]).astype(np.int64)

    def by_eigenvalue(basis_counts: Tracer) -> tuple[np.ndarray, Tracer]:
        return keys, grouping @ basis_counts

    return by_eigenvalue
