"""`qml.density_matrix(wires)` of a circuit's final state: the reduced density matrix
`rho = Tr_rest |psi><psi|`, computed from the traced state vector (the runtime has no
density-matrix measurement). As in PennyLane, the rows follow the order of the wires as
given, and it needs an analytic QNode. `qml.purity(wires)` is `Tr(rho^2)` of it;
`qml.vn_entropy(wires, log_base)` and `qml.mutual_info(wires0, wires1, log_base)` are
PennyLane's `qml.math` functions of it, whose eigenvalues numpy computes on the host
(tracing/linalg_host.py: values only, so their gradients are refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pennylane as qml
from pennylane.measurements import (
    DensityMatrixMP,
    MeasurementProcess,
    MutualInfoMP,
    PurityMP,
    VnEntropyMP,
)

from cofactor.errors import CompileError
from cofactor.tracing.tracer import Tracer

if TYPE_CHECKING:
    from cofactor.tracing.qnode import QuantumScope


#: the measurements of a reduced density matrix (`reduced_state_measurement`)
REDUCED_STATE_MEASUREMENTS = (DensityMatrixMP, PurityMP, VnEntropyMP, MutualInfoMP)


def reduced_state_measurement(scope: QuantumScope, mp: MeasurementProcess) -> Tracer:
    """`qml.density_matrix(wires)`, `qml.purity(wires)`, `qml.vn_entropy(wires)` or
    `qml.mutual_info(wires0, wires1)`."""
    if isinstance(mp, VnEntropyMP):
        rho = density_matrix(scope, mp, "qml.vn_entropy")
        return qml.math.vn_entropy(rho, list(range(len(mp.wires))), base=mp.log_base)
    if isinstance(mp, MutualInfoMP):
        rho = density_matrix(scope, mp, "qml.mutual_info")
        first, second = (len(w) for w in mp.raw_wires)
        return qml.math.mutual_info(
            rho, list(range(first)), list(range(first, first + second)), base=mp.log_base
        )
    if isinstance(mp, PurityMP):
        rho = density_matrix(scope, mp, "qml.purity")
        # Tr(rho^2) = sum |rho_ij|^2 for a Hermitian rho (real, as PennyLane returns it)
        return np.sum(np.real(rho) ** 2 + np.imag(rho) ** 2)
    return density_matrix(scope, mp)


def density_matrix(
    scope: QuantumScope, mp: MeasurementProcess, what: str = "qml.density_matrix"
) -> Tracer:
    if scope.shots > 0:
        raise CompileError(f"{what} needs an analytic QNode (shots=None), as in PennyLane")
    state = scope.emit_measurement_plain(qml.state())
    n = int(np.log2(state.shape[0]))
    if scope.wire_map is not None:
        missing = [w for w in mp.wires if w not in scope.wire_map]
        if missing:
            raise CompileError(
                f"{what}: wire {missing[0]!r} is not on the device (wires: {list(scope.wire_map)})"
            )
        kept = [scope.wire_map[w] for w in mp.wires]
    else:  # qml.state() of a device without wires: the circuit's wires in order of use
        order = scope.all_wires() or []
        kept = [order.index(int(w)) for w in mp.wires]
    psi = np.transpose(state.reshape((2,) * n), kept + [w for w in range(n) if w not in kept])
    psi = psi.reshape(2 ** len(kept), 2 ** (n - len(kept)))
    return psi @ np.conj(psi).T


# measurements whose value PennyLane computes from the state on the host, each with what a
# compiled program returns instead (Catalyst supports none of them either)
_FROM_THE_DENSITY_MATRIX = {
    "VnEntanglementEntropyMP": "qml.math.vn_entanglement_entropy",
}
_SHADOWS = ("ClassicalShadowMP", "ShadowExpvalMP")


def unsupported_measurement(mp: MeasurementProcess) -> CompileError:
    """The error for a measurement cofactor does not compile, saying what to do instead."""
    name = type(mp).__name__
    supported = (
        "expval, var, probs, sample, counts, state, density_matrix, purity, vn_entropy and "
        "mutual_info are supported"
    )
    if name in _FROM_THE_DENSITY_MATRIX:
        hint = (
            f"return qml.density_matrix(wires) (or qml.state()) from the QNode and apply "
            f"{_FROM_THE_DENSITY_MATRIX[name]} to it outside the compiled function"
        )
    elif name in _SHADOWS:
        hint = (
            "classical shadows are not supported under qjit (nor by Catalyst): measure "
            "qml.sample in random Pauli bases, or run this QNode without qjit"
        )
    else:
        hint = "run this QNode without qjit"
    return CompileError(f"measurement {name} is not supported by cofactor ({supported}); {hint}")
