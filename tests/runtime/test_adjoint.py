"""Tape recording, the adjoint-method Jacobian and tape replay for parameter-shift."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

from cofactor.errors import RuntimeExecutionError

PARAM_GATES = [
    "RX",
    "RY",
    "RZ",
    "PhaseShift",
    "Rot",
    "U1",
    "U2",
    "U3",
    "CRX",
    "CRY",
    "CRZ",
    "CRot",
    "ControlledPhaseShift",
    "IsingXX",
    "IsingYY",
    "IsingZZ",
    "IsingXY",
    "MultiRZ",
    "SingleExcitation",
    "SingleExcitationPlus",
    "SingleExcitationMinus",
    "DoubleExcitation",
    "DoubleExcitationPlus",
    "DoubleExcitationMinus",
    "GlobalPhase",
]


def _circuit(rt, rng, n):
    """Runs a random circuit with every parametrised gate (adjoint, extra controls with both
    control values), PauliRot, QubitUnitary and some fixed gates; returns its parameters."""
    params = []
    for w in range(n):
        rt.gate("Hadamard", wires=[w])
    for i, name in enumerate(PARAM_GATES):
        _, num_params, num_wires = rt.gates[name]
        k = 3 if num_wires == -1 else num_wires
        num_ctrls = i % 3 if k + 2 <= n else 0
        wires = [int(w) for w in rng.choice(n, k + num_ctrls, replace=False)]
        p = rng.uniform(-np.pi, np.pi, num_params)
        params.extend(p)
        rt.gate(
            name,
            p,
            wires[:k],
            adjoint=bool(i % 2),
            ctrls=wires[k:],
            cvals=[int(v) for v in rng.integers(0, 2, num_ctrls)],
        )
        if i % 5 == 0:
            rt.gate("CNOT", wires=[int(w) for w in rng.choice(n, 2, replace=False)])
    for word, adjoint, ctrls in [("XYZ", False, []), ("YIX", True, [4])]:
        theta = rng.uniform(-np.pi, np.pi)
        params.append(theta)
        rt.pauli_rot(theta, word, [0, 2, 3], adjoint=adjoint, ctrls=ctrls)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4)))
    rt.unitary(q, [1, 3])  # recorded, not differentiable
    rt.gate("RY", [0.3], wires=[2])
    params.append(0.3)
    return np.array(params)


def _observables(rt, rng):
    h = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    h = h + h.conj().T
    z0, x2 = rt.named("PauliZ", 0), rt.named("PauliX", 2)
    return [
        z0,
        rt.named("Hadamard", 1),
        rt.tensor([x2, rt.named("PauliY", 4)]),
        rt.hermitian(h, [3, 1]),
        rt.hamiltonian(
            [0.7, -1.3, 0.2], [z0, rt.tensor([x2, rt.named("PauliZ", 1)]), rt.hermitian(h, [0, 4])]
        ),
    ]


def test_adjoint_matches_finite_differences(rt, rng):
    n = 5
    rt.acquire(n)
    rt.tape_start()
    params = _circuit(rt, rng, n)
    rt.tape_stop()
    assert rt.num_params() == len(params)
    obs = _observables(rt, rng)
    jac = rt.adjoint_jacobian(obs)
    assert jac.shape == (len(obs), len(params))

    h = 1e-5
    fd = np.zeros_like(jac)
    for j in range(len(params)):
        rt.replay_shifted(j, h)
        plus = np.array([rt.expval(o) for o in obs])
        rt.replay_shifted(j, -h)
        minus = np.array([rt.expval(o) for o in obs])
        fd[:, j] = (plus - minus) / (2 * h)
    np.testing.assert_allclose(jac, fd, atol=1e-7)
    assert np.max(np.abs(jac)) > 0.1  # not trivially zero


def test_observable_batches_give_the_same_jacobian(rt, rng, monkeypatch):
    """Observables share the backward pass in batches (as many as memory allows); force
    batches of 2 for 5 observables and compare with one batch."""
    rt.acquire(5)
    rt.tape_start()
    _circuit(rt, rng, 5)
    rt.tape_stop()
    obs = _observables(rt, rng)
    together = rt.adjoint_jacobian(obs)
    monkeypatch.setenv("COFACTOR_ADJOINT_MAX_BATCH", "2")
    np.testing.assert_allclose(rt.adjoint_jacobian(obs), together, atol=1e-12)
    singles = np.vstack([rt.adjoint_jacobian([o]) for o in obs])
    np.testing.assert_allclose(singles, together, atol=1e-12)


def test_replay_with_zero_shift_reproduces_state(rt, rng):
    rt.acquire(5)
    rt.tape_start()
    _circuit(rt, rng, 5)
    rt.tape_stop()
    final = rt.state()
    rt.replay_shifted(3, 0.0)
    np.testing.assert_allclose(rt.state(), final, atol=1e-12)


def test_adjoint_matches_pennylane_parameter_shift(rt):
    n = 3
    x = np.array([0.3, -1.1, 0.7, 0.25, 1.9, -0.4, 0.8, 0.5, 1.3])
    h = np.array([[1.0, 0.5j, 0, 0], [-0.5j, -1, 0.2, 0], [0, 0.2, 0.3, 0], [0, 0, 0, 2.0]])

    def ops(p, lib_calls):
        lib_calls("RX", p[0:1], [0])
        lib_calls("CRY", p[1:2], [0, 2])
        lib_calls("Rot", p[2:5], [1])
        lib_calls("IsingZZ", p[5:6], [2, 1])
        lib_calls("CNOT", [], [1, 0])
        lib_calls("U3", p[6:9], [2])

    def pl_calls(name, p, w):
        getattr(qml, name)(*p, wires=w)

    @qml.qnode(qml.device("default.qubit", wires=n), diff_method="parameter-shift")
    def circuit(p):
        ops(p, pl_calls)
        return (
            qml.expval(qml.Z(0)),
            qml.expval(qml.X(1) @ qml.Y(2)),
            qml.expval(qml.Hamiltonian([0.5, 2.0], [qml.Z(1), qml.Hermitian(h, wires=[2, 0])])),
        )

    expected = qml.jacobian(lambda p: qml.math.stack(circuit(p)))(pnp.array(x, requires_grad=True))

    rt.acquire(n)
    rt.tape_start()
    ops(x, lambda name, p, w: rt.gate(name, p, w))
    rt.tape_stop()
    obs = [
        rt.named("PauliZ", 0),
        rt.tensor([rt.named("PauliX", 1), rt.named("PauliY", 2)]),
        rt.hamiltonian([0.5, 2.0], [rt.named("PauliZ", 1), rt.hermitian(h, [2, 0])]),
    ]
    np.testing.assert_allclose(rt.adjoint_jacobian(obs), expected, atol=1e-8)


def test_tape_numbering_and_no_params(rt):
    rt.acquire(2)
    rt.tape_start()
    rt.gate("Hadamard", wires=[0])
    rt.gate("U2", [0.1, 0.2], wires=[1])
    rt.gate("RX", [0.3], wires=[0])
    rt.tape_stop()
    assert rt.num_params() == 3
    rt.tape_start()  # starts over
    rt.gate("Hadamard", wires=[0])
    rt.tape_stop()
    assert rt.num_params() == 0
    assert rt.adjoint_jacobian([rt.named("PauliZ", 0)]).shape == (1, 0)


def test_adjoint_rejects_mid_circuit_measurement_but_replay_works(rt):
    rt.acquire(2, seed=3)
    rt.tape_start()
    rt.gate("RX", [0.4], wires=[0])
    rt.measure(0, postselect=1)
    rt.gate("RY", [0.5], wires=[1])
    rt.tape_stop()
    z = rt.named("PauliZ", 1)
    with pytest.raises(RuntimeExecutionError, match="mid-circuit measurement") as info:
        rt.adjoint_jacobian([z])
    assert info.value.code == 5  # CF_ERR_NOT_SUPPORTED
    rt.replay_shifted(1, np.pi / 2)  # RY(0.5 + pi/2) after postselecting |1> on wire 0
    assert rt.expval(z) == pytest.approx(np.cos(0.5 + np.pi / 2), abs=1e-12)
