"""A QubitUnitary given a stack of matrices (PennyLane's parameter broadcasting) is refused
by name at trace time; it used to reach the MLIR verifier ("'quantum.unitary' op matrix
must be a memref<DxDx2xf64>"), an internal error that named neither the gate nor a way out.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import qjit
from cofactor.errors import CompileValueError

BATCH = np.stack([qml.matrix(qml.RX(t, 0)) for t in (0.1, 0.2)])


def _expval(op):
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def circuit(x):
        qml.RY(x, 1)
        op()
        return qml.expval(qml.Z(0))

    return circuit


@pytest.mark.parametrize(
    "op",
    [
        lambda: qml.QubitUnitary(BATCH, wires=0),
        lambda: qml.ControlledQubitUnitary(BATCH, wires=[1, 0]),
        lambda: qml.ctrl(qml.adjoint(qml.QubitUnitary(BATCH, wires=0)), control=1),
    ],
)
def test_a_batch_of_matrices_is_refused_by_name(op):
    with pytest.raises(CompileValueError, match=r"QubitUnitary on wires \[0\].*\(2, 2, 2\).*vmap"):
        qjit(_expval(op))(0.3)


def test_one_matrix_still_runs():
    got = qjit(_expval(lambda: qml.QubitUnitary(BATCH[1], wires=0)))(0.3)
    assert got == pytest.approx(np.cos(0.2), abs=1e-12)
