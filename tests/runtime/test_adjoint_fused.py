"""The adjoint Jacobian's fused step (runtime/src/AdjointKernels.inc) against PennyLane.

Every parametrised gate is placed so that each specialised path of the fused kernel runs:
targets on the last wires (runs of 1, 2 and 4 amplitudes, the in-vector kernels) and on the
first wires, controls with value 0 and 1 on low and high wires, adjoint or not, on 17 qubits
(2^17 amplitudes: the OpenMP path), with several observables (one lambda fused with phi, the
others read phi), and batches of one observable.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

N = 17
GATES = [
    ("RX", 1),
    ("RY", 1),
    ("RZ", 1),
    ("PhaseShift", 1),
    ("Rot", 1),
    ("U1", 1),
    ("U2", 1),
    ("U3", 1),
    ("CRX", 2),
    ("CRY", 2),
    ("CRZ", 2),
    ("CRot", 2),
    ("ControlledPhaseShift", 2),
    ("IsingXX", 2),
    ("IsingYY", 2),
    ("IsingZZ", 2),
    ("IsingXY", 2),
    ("MultiRZ", 2),
    ("MultiRZ", 3),
    ("SingleExcitation", 2),
    ("SingleExcitationPlus", 2),
    ("SingleExcitationMinus", 2),
    ("DoubleExcitation", 4),
    ("DoubleExcitationPlus", 4),
    ("DoubleExcitationMinus", 4),
    ("GlobalPhase", 0),
]


def _placements(k):
    """(targets, controls, control values, adjoint) covering the kernels' cases."""
    last = N - 1
    return [
        (list(range(N - k, N)), [], [], False),  # targets on the last wires, bits k-1..0
        (list(range(N - k, N))[::-1], [0], [0], True),  # reversed, a high control with value 0
        (list(range(k)), [last], [0], False),  # first wires, control on the last wire (bit 0)
        ([last - 1] + list(range(4, 3 + k)), [0, last - 3], [1, 0], True),  # a target at bit 1
        ([last - 2] + list(range(8, 7 + k)), [last], [1], False),  # a target at bit 2
    ]


def _ops(name, k, params):
    """[(name, params, targets, controls, values, adjoint)] of the circuit: a generic state
    (Hadamards and RY on every wire), then the gate in each placement."""
    num = len(params) // len(_placements(k))
    ops = [("Hadamard", [], [w], [], [], False) for w in range(N)]
    ops += [("RY", [0.1 + 0.05 * w], [w], [], [], False) for w in range(N)]
    for i, (targets, ctrls, vals, adjoint) in enumerate(_placements(k)):
        targets = targets if k else []
        ops.append((name, list(params[i * num : (i + 1) * num]), targets, ctrls, vals, adjoint))
        ops.append(("CNOT", [], [i, N - 1 - i], [], [], False))
    return ops


def _pennylane_jacobian(ops, observables):
    dev = qml.device("default.qubit", wires=N)

    @qml.qnode(dev, diff_method="backprop")
    def circuit(p):
        j = 0
        for name, params, targets, ctrls, vals, adjoint in ops:
            num = len(params)
            args = [p[j + i] for i in range(num)]
            j += num
            op = getattr(qml, name)
            make = (
                (lambda op=op, args=args, targets=targets: op(*args, wires=targets))
                if targets
                else (lambda op=op, args=args: op(*args))
            )
            if adjoint:
                make = qml.adjoint(make)
            if ctrls:
                make = qml.ctrl(make, control=ctrls, control_values=vals)
            make()
        return [qml.expval(o) for o in observables]

    flat = pnp.array([v for _, params, *_ in ops for v in params], requires_grad=True)
    return np.array(qml.jacobian(lambda p: qml.math.stack(circuit(p)))(flat))


# autograd's backprop through the Hermitian observable casts complex cotangents to real
@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("name,k", GATES, ids=[f"{g}-{k}" for g, k in GATES])
def test_fused_adjoint_matches_pennylane(rt, rng, monkeypatch, name, k):
    num_params = rt.gates[name][1]
    params = rng.uniform(-np.pi, np.pi, num_params * len(_placements(k)))
    ops = _ops(name, k, params)

    rt.acquire(N)
    rt.tape_start()
    for gate, p, targets, ctrls, vals, adjoint in ops:
        rt.gate(gate, p, targets, adjoint=adjoint, ctrls=ctrls, cvals=vals)
    rt.tape_stop()
    h = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    h = h + h.conj().T
    obs = [
        rt.named("PauliZ", N - 1),
        rt.tensor([rt.named("PauliX", 0), rt.named("PauliY", N - 2)]),
        rt.hermitian(h, [N - 3, 1]),
    ]
    jac = rt.adjoint_jacobian(obs)
    monkeypatch.setenv("COFACTOR_ADJOINT_MAX_BATCH", "1")
    np.testing.assert_allclose(rt.adjoint_jacobian(obs), jac, atol=1e-12)

    expected = _pennylane_jacobian(
        ops,
        [qml.Z(N - 1), qml.X(0) @ qml.Y(N - 2), qml.Hermitian(h, wires=[N - 3, 1])],
    )
    np.testing.assert_allclose(jac, expected, atol=1e-10)
    if name != "GlobalPhase":  # (a controlled phase on this state changes none of them)
        assert np.max(np.abs(jac[:, N:])) > 1e-3  # the gate under test is not trivially 0
