"""Which operators a circuit emits as they are, and how every other operator gets there.

The runtime's gates (runtime/include/cofactor/gates.def), QubitUnitary and PauliRot, and
Adjoint/Controlled wrappers of them are emitted directly (`QuantumScope.emit_operation` in
`qnode`). Everything else is decomposed: cofactor's own rules first (`decompositions`), then
PennyLane's; an operator with a matrix and no decomposition becomes a QubitUnitary, as in
Catalyst.
"""

from __future__ import annotations

import contextlib
from functools import cache
from typing import Any

import numpy as np
import pennylane as qml

from cofactor.errors import CompileError
from cofactor.tracing import decompositions

SKIPPED_OPS = ("Identity", "Barrier", "Snapshot")


@cache
def runtime_gates() -> dict[str, tuple[int, int]]:
    """Gate name -> (num_params, num_wires) from runtime/include/cofactor/gates.def."""
    from cofactor.toolchain import REPO_ROOT

    path = REPO_ROOT / "runtime" / "include" / "cofactor" / "gates.def"
    gates = {}
    # (split by hand rather than by a regular expression, whose compilation is most of the
    # cost of this function, paid on the first call of every process)
    for line in path.read_text().splitlines():
        if line.startswith("COFACTOR_GATE(") and ")" in line:
            fields = line[len("COFACTOR_GATE(") : line.index(")")].split(",")
            if len(fields) == 3:
                name, params, wires = (f.strip() for f in fields)
                gates[name] = (int(params), int(wires))
    return gates


@cache
def gate_set() -> frozenset[str]:
    """The operators the frontend emits directly; everything else is decomposed."""
    return frozenset(runtime_gates()) | {"QubitUnitary", "PauliRot"}


# Read at import (a module-level table, a quarter of a millisecond) rather than on the first
# call of the process; an unreadable gates.def is reported when the table is first needed.
with contextlib.suppress(OSError):
    gate_set()


def directly_emittable(op: qml.operation.Operator) -> bool:
    if op.name in gate_set() or op.name in SKIPPED_OPS or hasattr(op, "cofactor_emit"):
        return True
    if wrapper_kind(op) is not None:
        return directly_emittable(op.base)
    return False


_WRAPPER_KINDS: dict[type, type | None] = {}


def wrapper_kind(op: Any) -> type | None:
    """qml.ops.Adjoint or qml.ops.Controlled when `op` is one (a wrapper of `op.base`), else
    None. isinstance with PennyLane's abstract classes, looked up once per class: a long
    circuit asks for every gate."""
    cls = type(op)
    kind = _WRAPPER_KINDS.get(cls, False)
    if kind is False:  # (through the MRO: see `flush`)
        mro = cls.__mro__
        kind = next((k for k in (qml.ops.Adjoint, qml.ops.Controlled) if k in mro), None)
        _WRAPPER_KINDS[cls] = kind
    return kind


def decompose(ops: list[Any]) -> list[Any]:
    """Decompose operators down to what `emit_operation` accepts: PennyLane's rules, except
    for the operators cofactor has its own rule for (`decompositions`), whose results are
    decomposed again. What remains unsupported is left for `emit_operation` to name."""
    if all(directly_emittable(op) for op in ops):
        return ops

    def stop(op: Any) -> bool:
        return directly_emittable(op) or decompositions.has_rule(op) or _matrix_only(op)

    result: list[Any] = []
    for op in decompositions.pennylane_decompose(ops, set(gate_set()), stop):
        if directly_emittable(op):
            result.append(op)
        elif decompositions.has_rule(op):
            result += decompose(decompositions.expand(op))
        else:
            result.append(_matrix_fallback(op) or op)
    return result


@cache
def custom_shift_rule(cls: type) -> bool:
    """A user's subclass of a PennyLane gate that overrides its grad_recipe or
    parameter_frequencies: emitted as the gate, differentiated with the gate's own rule."""
    if cls.__module__.startswith("pennylane."):
        return False
    for parent in cls.__mro__[1:]:
        if parent.__module__.startswith("pennylane."):  # the first PennyLane ancestor
            return any(
                getattr(cls, attr, None) is not getattr(parent, attr, None)
                for attr in ("grad_recipe", "parameter_frequencies")
            )
    return False


def _matrix_only(op: Any) -> bool:
    """An operator defined by its matrix alone (no decomposition: BlockEncode, a user's)."""
    try:
        return not op.has_decomposition and op.has_matrix
    except Exception:  # noqa: BLE001 - a property PennyLane cannot answer: not this case
        return False


def _matrix_fallback(op: Any) -> Any | None:
    """As Catalyst does for an operator with a matrix and no decomposition: a QubitUnitary
    of its matrix; a controlled one keeps its controls as native controls of the
    QubitUnitary of its base's matrix (not a dense matrix over the control wires). None when
    there is no matrix (the operator stays, and `emit_operation` names it)."""
    if not _matrix_only(op):
        return None
    controlled = wrapper_kind(op) is qml.ops.Controlled
    target = op.base if controlled else op
    with qml.QueuingManager.stop_recording():
        try:
            matrix = target.matrix()
        except CompileError:
            raise
        except Exception:  # noqa: BLE001 - no matrix after all: leave the operator as it is
            return None
        _refuse_a_hamiltonian_as_a_gate(target, matrix)
        unitary = qml.QubitUnitary(matrix, wires=target.wires)
        if not controlled:
            return unitary
        return qml.ops.Controlled(
            unitary,
            control_wires=op.control_wires,
            control_values=op.control_values,
            work_wires=op.work_wires,
        )


def _refuse_a_hamiltonian_as_a_gate(op: Any, matrix: Any) -> None:
    """A sum of operators queued as a gate is nearly always a Hamiltonian built inside the
    QNode: PennyLane queues `H1` and `H2` of `H = H1 + H2` as operations (only the measured
    `H` leaves the queue) and applies their non-unitary matrices to the state, a wrong
    number without a word. A constant unitary sum stays a QubitUnitary; a non-unitary one,
    or one whose coefficients are traced (unknown when compiling), is refused by name
    rather than by the runtime's unitarity check, which cannot say where the matrix came
    from."""
    if not isinstance(op, qml.ops.Sum):
        return
    if isinstance(matrix, np.ndarray):
        product = matrix @ matrix.conj().T
        if np.allclose(product, np.eye(len(matrix)), atol=1e-6, rtol=1e-5):
            return
        why = "its matrix is not unitary"
    else:
        why = "its coefficients are traced, so it cannot be a unitary known when compiling"
    raise CompileError(
        f"{op} is applied as a gate of the circuit, but it is a sum of operators (a "
        f"Hamiltonian) and {why}. PennyLane queues a Hamiltonian built inside a QNode as an "
        "operation unless a measurement uses it: `H = H1 + H2` leaves H1 and H2 in the "
        "circuit. Build the Hamiltonian outside the QNode or inside "
        "`with qml.QueuingManager.stop_recording():`, then measure it with qml.expval(H)."
    )
