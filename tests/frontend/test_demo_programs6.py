"""Programs shaped like PennyLane's and Catalyst's docs and demos: bad traced inputs raise
PennyLane's error when the compiled program runs, never a wrong number."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


@pytest.mark.parametrize("template", [qml.BasisState, qml.BasisEmbedding])
def test_traced_integer_basis_state_with_too_many_bits_raises(template):
    # PennyLane raises for a concrete integer >= 2**len(wires); a traced one took its low
    # bits (9 on three wires gave |001>)
    def circuit(a, n):
        template(n, wires=range(3))
        qml.RX(a, 0)
        return qml.probs()

    dev = qml.device("default.qubit", wires=3)
    compiled = cofactor.qjit(qml.QNode(circuit, dev))
    gradient = cofactor.qjit(cofactor.jacobian(qml.QNode(circuit, dev), argnums=0))
    for n in (8, 9, 2**40):
        with pytest.raises(ValueError, match="Integer state must be < 8"):
            qml.QNode(circuit, dev)(0.3, n)
        with pytest.raises(ValueError, match=r"Integer state must be < 2\*\*len\(wires\)"):
            compiled(0.3, n)
        with pytest.raises(ValueError, match=r"Integer state must be < 2\*\*len\(wires\)"):
            gradient(0.3, n)
    # in range, and negative integers (their low bits, as PennyLane) still run
    for n in (0, 5, 7, -1, -3):
        np.testing.assert_allclose(compiled(0.3, n), qml.QNode(circuit, dev)(0.3, n), atol=1e-12)
