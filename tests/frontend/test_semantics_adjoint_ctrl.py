"""adjoint / ctrl of quantum functions containing for_loop, while_loop and cond, and traced
control values (compatibility items 1-3). Each circuit is written once with PennyLane's API
and compared with uncompiled PennyLane on default.qubit (where loops and conds are plain
Python), as Catalyst's adjoint/ctrl regions behave."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


def _compare(circuit, wires: int, *args, measure="state"):
    """The circuit's state (or probs) compiled by cofactor and by uncompiled PennyLane."""

    def full(*a):
        circuit(*a)
        return qml.state() if measure == "state" else qml.probs()

    ref = qml.QNode(full, qml.device("default.qubit", wires=wires))(*args)
    got = qml.qjit(
        qml.QNode(full, qml.device("lightning.qubit", wires=wires)), compiler="cofactor"
    )(*args)
    np.testing.assert_allclose(got, ref, atol=1e-10)
    return got


def _prep(wires: int) -> None:
    # a generic start state, so that a wrong order or a missing conjugation shows
    for w in range(wires):
        qml.RY(0.3 + 0.4 * w, wires=w)
        qml.RZ(0.2 + 0.1 * w, wires=w)


# ----------------------------------------------------------------------------------------
# adjoint
# ----------------------------------------------------------------------------------------
def _loop_fn(n):
    @qml.for_loop(0, n, 1)
    def body(i):
        qml.RX(0.3 * (i + 1), wires=0)
        qml.RY(0.1, wires=0)

    body()


def test_adjoint_for_loop_reproducer():
    """Compatibility item 1: was the complex conjugate of the right state."""

    def c(n):
        qml.adjoint(_loop_fn)(n)

    got = _compare(c, 1, 3)
    np.testing.assert_allclose(got, [0.612345 - 0.010865j, -0.121872 + 0.781065j], atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_adjoint_for_loop_traced_bound(n):
    def c(n):
        _prep(2)
        qml.adjoint(_loop_fn)(n)
        qml.CNOT([0, 1])

    _compare(c, 2, n)


def test_adjoint_undoes_for_loop():
    """U followed by adjoint(U) is the identity, whatever the loop bounds and step."""

    def u(n, x):
        @qml.for_loop(n, -1, -2)
        def body(i):
            qml.RX(x * i, wires=i % 2)
            qml.CRY(0.2 * i + x, wires=[0, 1])
            qml.S(1)

        body()

    @qml.qjit(compiler="cofactor")
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def c(n, x):
        u(n, x)
        qml.adjoint(u)(n, x)
        return qml.state()

    np.testing.assert_allclose(c(5, 0.7), [1, 0, 0, 0], atol=1e-12)


def test_adjoint_for_loop_with_carried_value():
    def f(x):
        @qml.for_loop(0, 3, 1)
        def body(i, angle):
            qml.RX(angle, wires=0)
            qml.RZ(angle * 0.5, wires=0)
            return angle * 2.0

        final = body(x)
        qml.RY(final, wires=0)  # a value computed by the loop, used after it

    def c(x):
        _prep(1)
        qml.adjoint(f)(x)

    _compare(c, 1, 0.4)


def test_adjoint_while_loop():
    def f(x):
        @qml.while_loop(lambda v: v < 2.0)
        def body(v):
            qml.RX(v, wires=0)
            qml.RY(0.5 * v, wires=1)
            qml.CNOT([0, 1])
            return v + 0.6

        body(x)

    def c(x):
        _prep(2)
        qml.adjoint(f)(x)

    _compare(c, 2, 0.3)  # 3 iterations
    _compare(c, 2, 2.5)  # none


def test_adjoint_cond():
    def f(x):
        qml.RX(x, wires=0)

        @qml.cond(x > 0.5)
        def branch():
            qml.RY(x, wires=0)
            qml.S(0)

        @branch.otherwise
        def branch():
            qml.RZ(x, wires=0)
            qml.T(0)

        branch()
        qml.Hadamard(0)

    def c(x):
        _prep(1)
        qml.adjoint(f)(x)

    _compare(c, 1, 0.9)
    _compare(c, 1, 0.2)


def test_nested_adjoint_is_the_function():
    def c(n):
        _prep(1)
        qml.adjoint(qml.adjoint(_loop_fn))(n)

    def d(n):
        _prep(1)
        _loop_fn(n)

    np.testing.assert_allclose(_compare(c, 1, 3), _compare(d, 1, 3), atol=1e-12)


def test_adjoint_of_ctrl_and_ctrl_of_adjoint():
    def c(n):
        _prep(2)
        qml.Hadamard(1)
        qml.adjoint(qml.ctrl(_loop_fn, control=1))(n)
        qml.ctrl(qml.adjoint(_loop_fn), control=1, control_values=0)(n)

    _compare(c, 2, 3)


def test_cofactor_adjoint_inside_loop_body():
    def c(n):
        _prep(2)

        @qml.for_loop(0, n, 1)
        def outer(i):
            qml.adjoint(_loop_fn)(i)
            qml.CNOT([0, 1])

        outer()

    _compare(c, 2, 3)


def test_measurement_inside_adjoint_is_refused():
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def c():
        qml.adjoint(lambda: qml.measure(0))()
        return qml.state()

    with pytest.raises(ValueError, match="Mid-circuit measurements cannot be used"):
        qml.qjit(c, compiler="cofactor")()


# ----------------------------------------------------------------------------------------
# ctrl
# ----------------------------------------------------------------------------------------
def test_ctrl_of_cond_reproducer():
    """Compatibility item 2: the control was dropped."""

    def c(theta):
        qml.Hadamard(0)
        qml.Hadamard(1)
        qml.ctrl(qml.cond(theta > 0.0, lambda: qml.RY(theta, wires=1)), control=[0])()

    got = _compare(c, 2, np.pi / 4, measure="probs")
    np.testing.assert_allclose(got, [0.25, 0.25, 0.0732233, 0.4267767], atol=1e-6)


def test_ctrl_of_loops_and_cond_with_else():
    def f(n, x):
        @qml.for_loop(0, n, 1)
        def body(i):
            qml.RX(x * (i + 1), wires=1)
            qml.CNOT([1, 2])

        body()

        @qml.while_loop(lambda v: v < 1.0)
        def wl(v):
            qml.RY(v, wires=2)
            return v + 0.4

        wl(x)

        @qml.cond(x > 0.5)
        def br():
            qml.Hadamard(1)

        @br.otherwise
        def br():
            qml.S(2)

        br()

    def c(n, x):
        _prep(3)
        qml.ctrl(f, control=0)(n, x)
        qml.ctrl(f, control=0, control_values=0)(n, x)

    _compare(c, 3, 2, 0.3)
    _compare(c, 3, 3, 0.7)


def test_ctrl_of_measurement_conditioned_op():
    @qml.qjit(compiler="cofactor")
    @qml.qnode(qml.device("lightning.qubit", wires=3))
    def c():
        qml.Hadamard(0)
        qml.X(1)
        m = qml.measure(1)  # always 1
        qml.ctrl(qml.cond(m, qml.PauliX), control=0)(wires=2)
        return qml.probs()

    # wire 2 flips exactly when wire 0 is 1: |010> and |111>, never |011>
    np.testing.assert_allclose(c(), [0, 0, 0.5, 0, 0, 0, 0, 0.5], atol=1e-12)


# ----------------------------------------------------------------------------------------
# traced control values
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", [[0, 0], [0, 1], [1, 0], [1, 1]])
def test_traced_control_values_on_operator(v):
    def c(v):
        qml.Hadamard(0)
        qml.Hadamard(1)
        qml.ctrl(qml.RY(0.7, wires=2), control=[0, 1], control_values=v)

    _compare(c, 3, np.array(v), measure="state")


def test_traced_control_values_on_function_and_bools():
    def f(x):
        @qml.for_loop(0, 2, 1)
        def body(i):
            qml.RX(x * (i + 1), wires=2)

        body()

    def c(v, x):
        _prep(3)
        qml.ctrl(f, control=[0, 1], control_values=v)(x)

    _compare(c, 3, np.array([True, False]), 0.8)
    _compare(c, 3, np.array([False, True]), 0.8)


@pytest.mark.parametrize("v", [[0, 0], [0, 1], [1, 0], [1, 1]])
def test_traced_temporary_and_control_values(v):
    """Compatibility item 3: TemporaryAND(control_values=v) with v an argument."""

    def c(v):
        qml.Hadamard(0)
        qml.Hadamard(1)
        qml.TemporaryAND(wires=[0, 1, 2], control_values=v)

    _compare(c, 3, np.array(v), measure="probs")


def test_control_values_length_mismatch():
    @qml.qnode(qml.device("lightning.qubit", wires=3))
    def c():
        qml.ctrl(lambda: qml.X(2), control=[0, 1], control_values=[1])()
        return qml.state()

    with pytest.raises(ValueError, match="control_values"):
        qml.qjit(c, compiler="cofactor")()


def test_cofactor_spellings():
    """cofactor.adjoint / cofactor.ctrl / cofactor.for_loop behave as the qml spellings."""

    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def c(n: int, v: int):
        qml.Hadamard(0)

        def g(n):
            @cofactor.for_loop(0, n, 1)
            def body(i):
                qml.RX(0.3 * (i + 1), wires=1)
                qml.RY(0.1, wires=1)

            body()

        cofactor.ctrl(cofactor.adjoint(g), control=0, control_values=v)(n)
        return qml.state()

    @qml.qnode(qml.device("default.qubit", wires=2))
    def ref(n, v):
        qml.Hadamard(0)

        def g(n):
            for i in range(n):
                qml.RX(0.3 * (i + 1), wires=1)
                qml.RY(0.1, wires=1)

        qml.ctrl(qml.adjoint(g), control=0, control_values=v)(n)
        return qml.state()

    for v in (0, 1):
        np.testing.assert_allclose(c(3, v), ref(3, v), atol=1e-10)


def test_adjoint_and_ctrl_of_cond_returning_a_value():
    def f(x):
        @qml.cond(x > 0.5)
        def branch():
            qml.RY(x, wires=0)
            return x * 2.0

        @branch.otherwise
        def branch():
            qml.RZ(x, wires=0)
            return x * 3.0

        y = branch()
        qml.RX(y, wires=0)  # uses the cond's result after it

    def c(x):
        _prep(2)
        qml.adjoint(f)(x)
        qml.ctrl(f, control=1)(x)

    _compare(c, 2, 0.9)
    _compare(c, 2, 0.2)


def test_adjoint_for_loop_with_traced_step():
    def f(lo, hi, step):
        @qml.for_loop(lo, hi, step)
        def body(i):
            qml.RX(0.2 * i + 0.1, wires=0)
            qml.RY(0.3, wires=0)

        body()

    def c(lo, hi, step):
        _prep(1)
        qml.adjoint(f)(lo, hi, step)

    for args in [(0, 7, 2), (7, 0, -3), (0, 5, -1), (2, 2, 1)]:
        _compare(c, 1, *args)


def test_gradient_through_an_adjoint_loop_matches_pennylane():
    def f(x, n):
        @qml.for_loop(0, n, 1)
        def body(i):
            qml.RX(x * (i + 1), wires=0)
            qml.RY(0.5 * x, wires=1)
            qml.CNOT([0, 1])

        body()

    def circuit(x, n):
        qml.Hadamard(0)
        qml.adjoint(f)(x, n)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    ref = qml.grad(qml.QNode(circuit, qml.device("default.qubit", wires=2)), argnums=0)
    compiled = qml.qjit(
        cofactor.grad(qml.QNode(circuit, qml.device("lightning.qubit", wires=2)), argnums=0),
        compiler="cofactor",
    )
    x = qml.numpy.array(0.37, requires_grad=True)
    assert compiled(0.37, 3) == pytest.approx(ref(x, 3), abs=1e-10)


def test_adjoint_of_templates_and_operator_classes():
    def c(x):
        _prep(2)
        qml.adjoint(qml.QFT)(wires=[0, 1])
        qml.adjoint(lambda: qml.StronglyEntanglingLayers(x, wires=[0, 1]), lazy=False)()
        qml.ctrl(qml.RX, control=1)(0.4, wires=0)

    _compare(c, 2, np.linspace(0.1, 1.2, 12).reshape(2, 2, 3))


@pytest.mark.parametrize("v", [[0, 1], [1, 0]])
def test_traced_temporary_and_inside_adjoint_and_ctrl(v):
    def c(v):
        qml.Hadamard(0)
        qml.Hadamard(1)
        qml.Hadamard(3)
        qml.TemporaryAND(wires=[0, 1, 2], control_values=v)
        qml.ctrl(lambda: qml.TemporaryAND(wires=[0, 1, 2], control_values=v), control=3)()
        qml.adjoint(lambda: qml.TemporaryAND(wires=[0, 1, 2], control_values=v))()

    _compare(c, 4, np.array(v), measure="probs")


def test_called_region_has_catalysts_wires():
    """Catalyst's adjoint(fn)(...) / ctrl(fn, ...)(...) return an operation whose .wires are the
    control wires, then the region's wires in program order (HybridAdjoint/HybridCtrl.wires);
    outside qjit the same calls are PennyLane operators on the same set of wires."""

    def func(theta, wires):
        qml.RX(theta, wires=wires[0])
        qml.Hadamard(wires[1])
        qml.CNOT([wires[2], wires[1]])

    def regions(theta):
        a = cofactor.ctrl(func, control=[1])(theta, [3, 2, 0])
        b = cofactor.adjoint(cofactor.adjoint(cofactor.adjoint(func)))(theta, [0, 3, 2])
        return a.wires, b.wires

    @qml.qjit(compiler="cofactor")
    @qml.qnode(qml.device("lightning.qubit", wires=4))
    def circuit(theta):
        return regions(theta)

    got = circuit(0.3)
    assert got == (qml.wires.Wires([1, 3, 2, 0]), qml.wires.Wires([0, 3, 2]))
    assert all(isinstance(w, qml.wires.Wires) for w in got)
    with qml.queuing.AnnotatedQueue():
        uncompiled = regions(0.3)
    assert [set(w) for w in uncompiled] == [set(w) for w in got]
    assert uncompiled[0][0] == 1  # the control wire first in both


def test_wires_of_nested_ctrl_regions_on_traced_wires_come_back_as_ints():
    """A ctrl region's .wires on traced wire arguments is a result of the program: the control
    wire, then the region's wires in program order (nested regions included), as Catalyst
    returns them -- never a Wires of tracers left over from the trace."""

    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=4))
    def circuit(theta, w1, w2, cw1, cw2):
        def outer():
            qml.RX(theta, wires=[w1])
            cofactor.ctrl(lambda: qml.RY(theta, wires=[w2]), control=[cw2])()
            qml.RZ(theta, wires=w1)

        return cofactor.ctrl(outer, control=[cw1])().wires

    assert circuit(0.1, 0, 1, 2, 3) == qml.wires.Wires([2, 0, 3, 1])
    assert circuit(0.1, 3, 2, 1, 0) == qml.wires.Wires([1, 3, 0, 2])


def test_ctrl_control_values_must_match_the_control_wires():
    def rotate():
        qml.RX(0.3, wires=0)

    with pytest.raises(ValueError, match=r"Length of the control_values \(1\)"):
        cofactor.ctrl(rotate, (1, 2), [True])
    with pytest.raises(ValueError, match=r"number of control wires \(1\)"):
        cofactor.ctrl(qml.RX(0.3, wires=0), 1, [True, False])

    dev = qml.device("default.qubit", wires=3)

    def circuit(values):
        qml.PauliX(1)
        cofactor.ctrl(rotate, [1, 2], np.array([True, False]))()
        cofactor.ctrl(rotate, [1, 2], values)()
        return qml.state()

    values = np.array([1, 0])
    np.testing.assert_allclose(
        cofactor.qjit(qml.QNode(circuit, dev))(values), qml.QNode(circuit, dev)(values), atol=1e-12
    )
