"""PennyLane transforms applied to QNodes run at trace time on the recorded tape, with their
post-processing traced; compared with uncompiled PennyLane (default.qubit)."""

from __future__ import annotations

import functools

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor
from cofactor import CompileError

pytestmark = pytest.mark.needs_toolchain

dev1 = qml.device("default.qubit", wires=1)
dev3 = qml.device("default.qubit", wires=3)
dev4 = qml.device("default.qubit", wires=4)


def _close(got, expected, atol=1e-10):
    if isinstance(expected, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            _close(g, e, atol)
        return
    assert np.shape(got) == np.shape(expected)
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(expected), atol=atol)


def _jit(f):
    return qml.qjit(f, compiler="cofactor")


@qml.transform
def add_x(tape):
    return [tape.copy(operations=[qml.X(0)] + tape.operations)], lambda r: r[0]


def test_user_transform_is_applied_not_ignored():
    c = add_x(qml.qnode(dev1)(lambda: qml.expval(qml.Z(0))))
    assert c() == -1.0
    assert _jit(c)() == -1.0


@qml.transform
def two_tapes(tape):
    flipped = tape.copy(operations=[*tape.operations, qml.X(1)])
    return [tape, flipped], lambda r: r[0] - 2 * r[1]


@qml.qnode(dev3)
def ry_circuit(x):
    qml.RY(x, 1)
    return qml.expval(qml.Z(1))


def test_transform_with_several_tapes_and_traced_post_processing():
    f = two_tapes(ry_circuit)
    for x in (0.5, 1.3):
        _close(_jit(f)(x), f(x))
        _close(_jit(f)(x), 3 * np.cos(x))


@qml.qnode(dev3)
def redundant(x):
    qml.Hadamard(0)
    qml.Hadamard(0)
    qml.RX(x, 1)
    qml.RX(2 * x, 1)
    qml.RX(0.5, 2)
    qml.RX(-0.5, 2)
    qml.CNOT([0, 1])
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(1)), qml.probs([1, 2])


@pytest.mark.parametrize(
    "transform", [qml.transforms.cancel_inverses, qml.transforms.merge_rotations]
)
def test_optimisation_transforms_match_pennylane(transform):
    f = transform(redundant)
    _close(_jit(f)(0.4), f(0.4))


def test_clifford_t_decomposition_keeps_the_numbers():
    @qml.qnode(dev3)
    def circuit():
        qml.Hadamard(0)
        qml.CNOT([0, 1])
        qml.RX(np.pi / 3, 1)
        return qml.probs([0, 1])

    f = qml.clifford_t_decomposition(circuit, epsilon=1e-3)
    _close(_jit(f)(), f(), atol=1e-3)
    _close(_jit(f)(), circuit(), atol=1e-3)


def test_gradient_of_a_single_tape_transform():
    f = qml.transforms.cancel_inverses(ry_circuit)
    got = _jit(lambda x: cofactor.grad(f)(x))(0.5)
    _close(got, -np.sin(0.5))


# --- metric tensor -------------------------------------------------------------------------
@qml.qnode(dev4)
def layered(params, y):
    qml.RX(params[0], 0)
    qml.RY(params[1], 1)
    qml.CNOT([0, 1])
    qml.RZ(params[2], 1)
    qml.RY(y, 2)
    qml.CNOT([1, 2])
    qml.RX(0.4, 2)
    return qml.expval(qml.Z(2))


@pytest.mark.parametrize("approx", [None, "block-diag", "diag"])
def test_metric_tensor_matches_pennylane(approx):
    mt = qml.metric_tensor(layered, approx=approx)
    params, y = np.array([0.3, 0.7, -0.4]), 0.9
    expected = mt(pnp.array(params, requires_grad=True), pnp.array(y, requires_grad=True))
    _close(_jit(mt)(params, y), expected)


def test_metric_tensor_hybrid_false_is_with_respect_to_gate_parameters():
    @qml.qnode(dev3)
    def scaled(x):
        qml.RX(2 * x, 0)
        qml.RY(x, 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    mt = qml.metric_tensor(scaled, hybrid=False)
    _close(_jit(mt)(0.3), mt(pnp.array(0.3, requires_grad=True)))
    with pytest.raises(CompileError, match=r"metric_tensor \(hybrid=True\).*hybrid=False"):
        _jit(qml.metric_tensor(scaled))(0.3)


# --- mid-circuit measurements keep their place -----------------------------------------------
def test_mid_circuit_measurements_keep_their_place_under_clifford_t():
    @qml.clifford_t_decomposition
    @qml.qnode(dev3)
    def circuit():
        qml.RX(np.pi, 0)
        return cofactor.measure(0), cofactor.measure(1)

    assert tuple(bool(v) for v in _jit(circuit)()) == (True, False)


@pytest.mark.parametrize("x", [0.0, np.pi])
def test_mid_circuit_measurement_under_cancel_inverses(x):
    @qml.qnode(dev3)
    def circuit(x):
        qml.RX(x, 0)
        qml.X(1)
        qml.X(1)
        m = qml.measure(0)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.expval(m)

    f = qml.transforms.cancel_inverses(circuit)
    _close(_jit(f)(x), f(x))


# --- refusals ----------------------------------------------------------------------------------
def test_compiled_control_flow_under_a_transform_is_refused_by_name():
    # (a transform that only simplifies, e.g. cancel_inverses, runs such a circuit as
    # written: test_demo_programs4.py)
    @qml.transforms.split_non_commuting
    @qml.qnode(dev3)
    def circuit(x):
        @cofactor.for_loop(0, 2, 1)
        def loop(i):
            qml.RX(x, 0)

        loop()
        return qml.expval(qml.Z(0))

    with pytest.raises(CompileError, match="split_non_commuting.*for_loop"):
        _jit(circuit)(0.5)


def test_a_transform_that_fails_on_traced_values_is_refused_by_name():
    @qml.transform
    def needs_value(tape):
        if float(tape.operations[0].parameters[0]) > 0:
            return [tape], lambda r: r[0]
        return [tape], lambda r: r[0]

    f = needs_value(ry_circuit)
    with pytest.raises(CompileError, match="needs_value"):
        _jit(f)(0.5)


@pytest.mark.parametrize("x", [0.0, np.pi])
def test_cond_on_a_measurement_under_a_transform(x):
    @qml.transforms.cancel_inverses
    @qml.qnode(dev3)
    def circuit(x):
        qml.RX(x, 0)
        m = qml.measure(0)
        qml.cond(m, qml.X)(1)
        qml.Hadamard(2)
        qml.Hadamard(2)
        return qml.expval(qml.Z(1)), qml.expval(qml.Z(2))

    _close(_jit(circuit)(x), circuit(x))


def test_defer_measurements_statistics_match_pennylane():
    @qml.transforms.defer_measurements
    @qml.qnode(dev4)
    def circuit(x, y):
        qml.RX(x, 0)
        m0 = qml.measure(0)
        qml.RY(y, 1)
        m1 = qml.measure(1)
        return qml.expval(m0 + 2 * m1), qml.var(m0), qml.probs(op=[m0, m1])

    _close(_jit(circuit)(1.1, 0.6), circuit(1.1, 0.6))


@pytest.mark.parametrize(
    "transform",
    [
        qml.transforms.split_non_commuting,
        qml.transforms.split_to_single_terms,
        functools.partial(qml.transforms.decompose, gate_set={"RX", "RY", "RZ", "CNOT"}),
    ],
)
def test_more_pennylane_transforms_match(transform):
    @qml.qnode(dev3)
    def circuit(x):
        qml.RX(x, 0)
        qml.CRY(2 * x, [0, 1])
        qml.Hadamard(2)
        return qml.expval(qml.Z(0) + 0.5 * qml.X(2)), qml.expval(qml.Y(1) @ qml.Z(0))

    f = transform(circuit)
    _close(_jit(f)(0.3), f(0.3))
