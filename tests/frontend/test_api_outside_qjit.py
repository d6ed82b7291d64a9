"""Catalyst's API called outside qjit: `jvp`/`vjp`/`grad` compile on the fly (Catalyst runs
JAX's autodiff there), and `adjoint`/`ctrl` of a quantum function return one PennyLane
operator (Catalyst's HybridAdjoint/HybridCtrl), compared with uncompiled PennyLane."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor
from cofactor import qjit

pytestmark = pytest.mark.needs_toolchain


@qml.qnode(qml.device("lightning.qubit", wires=2))
def _circuit(x, y):
    qml.RX(x, wires=0)
    qml.RY(y, wires=1)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(1)), qml.probs(wires=[0])


def _f(x, y):
    return _circuit(x, y)


def _reference_jacobian(x, y):
    """d(expval, probs)/d(x, y) by PennyLane's autograd on default.qubit."""

    @qml.qnode(qml.device("default.qubit", wires=2))
    def ref(a, b):
        qml.RX(a, wires=0)
        qml.RY(b, wires=1)
        qml.CNOT([0, 1])
        return qml.expval(qml.Z(1)), qml.probs(wires=[0])

    a, b = pnp.array(x, requires_grad=True), pnp.array(y, requires_grad=True)
    return qml.jacobian(lambda a, b: qml.math.hstack(ref(a, b)))(a, b)  # 3 rows per argument


def test_jvp_outside_qjit_matches_pennylane():
    x, y = 0.3, 0.5
    ja, jb = _reference_jacobian(x, y)
    (val, probs), (d_val, d_probs) = cofactor.jvp(_f, (x, y), (1.0, 2.0), argnums=[0, 1])
    want = ja + 2.0 * jb
    ref_val = np.cos(x) * np.cos(y)
    assert val == pytest.approx(ref_val)
    assert d_val == pytest.approx(want[0])
    np.testing.assert_allclose(d_probs, want[1:], atol=1e-10)
    # the compiled product is reused: a second call with other values does not recompile
    (val2, _), _ = cofactor.jvp(_f, [0.1, 0.2], [0.0, 1.0], argnums=[0, 1])
    assert val2 == pytest.approx(np.cos(0.1) * np.cos(0.2))


def test_vjp_outside_qjit_matches_pennylane():
    x, y = 0.7, -0.4
    ja, jb = _reference_jacobian(x, y)
    ct = np.array([1.0, 0.5, -2.0])  # cotangent of (expval, probs[0], probs[1])
    _, (gx, gy) = cofactor.vjp(_f, (x, y), (1.0, np.array([0.5, -2.0])), argnums=[0, 1])
    assert gx == pytest.approx(ct @ ja)
    assert gy == pytest.approx(ct @ jb)
    # Catalyst's default argnums=0: the first argument only, one value
    _, gx0 = cofactor.vjp(_f, (x, y), (1.0, np.array([0.5, -2.0])))
    assert gx0 == pytest.approx(ct @ ja)


def test_vjp_outside_qjit_keeps_catalyst_argument_checks():
    with pytest.raises(TypeError, match="number of cotangents"):
        cofactor.vjp(_f, (0.1, 0.2), (1.0,))
    with pytest.raises(TypeError, match="dtype"):
        cofactor.jvp(_f, (0.1, 0.2), (1, 0))


def test_grad_outside_qjit_matches_pennylane():
    ja, _ = _reference_jacobian(0.3, 0.5)
    g = cofactor.grad(lambda x: _circuit(x, 0.5)[0])(0.3)
    assert g == pytest.approx(ja[0])


def _block(x):
    qml.RX(x, wires=0)
    qml.CNOT([0, 1])
    qml.RY(2 * x, wires=1)


def test_adjoint_and_ctrl_of_function_are_operators():
    adj = cofactor.adjoint(_block)(0.4)
    assert isinstance(adj, qml.operation.Operator)
    assert set(adj.wires) == {0, 1}  # the product's wires (last operation's first)
    np.testing.assert_allclose(
        qml.matrix(adj, wire_order=[0, 1]),
        qml.matrix(qml.adjoint(_block), wire_order=[0, 1])(0.4),
        atol=1e-12,
    )
    c = cofactor.ctrl(_block, control=[2, 3], control_values=[1, 0])(0.4)
    assert isinstance(c, qml.operation.Operator)
    assert list(c.wires)[:2] == [2, 3] and set(c.wires) == {0, 1, 2, 3}
    np.testing.assert_allclose(
        qml.matrix(c, wire_order=[2, 3, 0, 1]),
        qml.matrix(
            qml.ctrl(_block, control=[2, 3], control_values=[1, 0]), wire_order=[2, 3, 0, 1]
        )(0.4),
        atol=1e-12,
    )
    # a single operation: its own Adjoint / Controlled
    assert cofactor.adjoint(qml.RX)(0.1, wires=0).wires == qml.wires.Wires([0])
    assert isinstance(cofactor.ctrl(qml.RX(0.1, wires=0), control=1), qml.operation.Operator)


def test_region_operators_decompose_into_the_region_operations():
    # as Catalyst's HybridAdjoint/HybridCtrl (before: Adjoint(Prod) decomposed into one
    # Prod, Controlled(op) into op's controlled gates, dropping its work_wire_type)
    adj = cofactor.adjoint(_block)(0.4)
    expected = qml.adjoint(_block)(0.4)  # PennyLane's list of inverted operations
    assert adj.decomposition() == expected
    np.testing.assert_allclose(
        qml.matrix(qml.prod(*reversed(adj.decomposition())), wire_order=[0, 1]),
        qml.matrix(adj, wire_order=[0, 1]),
        atol=1e-12,
    )

    def adder():
        qml.SemiAdder(x_wires=[1, 2], y_wires=[3, 4], work_wires=[5])

    c = cofactor.ctrl(adder, control=0, work_wires=[6], work_wire_type="zeroed")()
    (part,) = c.decomposition()
    assert part.hyperparameters["work_wire_type"] == "zeroed"
    assert isinstance(part.base, qml.SemiAdder) and part.control_wires == qml.wires.Wires([0])


def test_outside_operators_run_on_uncompiled_pennylane():
    dev = qml.device("default.qubit", wires=3)

    @qml.qnode(dev)
    def with_cofactor(x):
        qml.Hadamard(2)
        cofactor.ctrl(_block, control=2, control_values=0)(x)
        cofactor.adjoint(_block)(x / 3)
        return qml.state()

    @qml.qnode(dev)
    def with_pennylane(x):
        qml.Hadamard(2)
        qml.ctrl(_block, control=2, control_values=0)(x)
        qml.adjoint(_block)(x / 3)
        return qml.state()

    np.testing.assert_allclose(with_cofactor(0.9), with_pennylane(0.9), atol=1e-12)
    tape = qml.workflow.construct_tape(with_cofactor)(0.9)
    assert len(tape.operations) == 3  # one operator per region, queued in place


def test_region_made_outside_is_compiled_inside_a_qnode():
    """`cofactor.adjoint(f)` created at module level, called in a compiled QNode."""
    inverse = cofactor.adjoint(_block)
    controlled = cofactor.ctrl(_block, control=2)

    def body(x):
        qml.Hadamard(2)
        _block(x)
        controlled(x / 2)
        inverse(x)
        return qml.state()

    def ref(x):
        qml.Hadamard(2)
        _block(x)
        qml.ctrl(_block, control=2)(x / 2)
        qml.adjoint(_block)(x)
        return qml.state()

    compiled = qjit(qml.qnode(qml.device("lightning.qubit", wires=3))(body))
    reference = qml.qnode(qml.device("default.qubit", wires=3))(ref)
    np.testing.assert_allclose(compiled(0.8), reference(0.8), atol=1e-10)


def test_outside_region_with_measurement_is_refused():
    def measures():
        qml.Hadamard(0)
        qml.expval(qml.Z(0))

    with pytest.raises(ValueError, match="performs a measurement"):
        cofactor.adjoint(measures)()
