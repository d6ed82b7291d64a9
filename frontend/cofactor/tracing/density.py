"""`qml.density_matrix(wires)` of a circuit's final state: the reduced density matrix
`rho = Tr_rest |psi><psi|`, computed from the traced state vector (the runtime has no
density-matrix measurement). As in PennyLane, the rows follow the order of the wires as
given, and it needs an analytic QNode."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pennylane as qml
from pennylane.measurements import DensityMatrixMP

from cofactor.errors import CompileError
from cofactor.tracing.tracer import Tracer

if TYPE_CHECKING:
    from cofactor.tracing.qnode import QuantumScope


def density_matrix(scope: QuantumScope, mp: DensityMatrixMP) -> Tracer:
    if scope.shots > 0:
        raise CompileError(
            "qml.density_matrix needs an analytic QNode (shots=None), as in PennyLane"
        )
    state = scope.emit_measurement_plain(qml.state())
    n = int(np.log2(state.shape[0]))
    if scope.wire_map is not None:
        missing = [w for w in mp.wires if w not in scope.wire_map]
        if missing:
            raise CompileError(
                f"qml.density_matrix: wire {missing[0]!r} is not on the device "
                f"(wires: {list(scope.wire_map)})"
            )
        kept = [scope.wire_map[w] for w in mp.wires]
    else:  # qml.state() of a device without wires: the circuit's wires in order of use
        order = scope.all_wires() or []
        kept = [order.index(int(w)) for w in mp.wires]
    psi = np.transpose(state.reshape((2,) * n), kept + [w for w in range(n) if w not in kept])
    psi = psi.reshape(2 ** len(kept), 2 ** (n - len(kept)))
    return psi @ np.conj(psi).T
