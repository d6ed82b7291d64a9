"""autograph=True: `x[i] = v`, `x[i] += v` and `x[i]` in converted code (malt's LISTS
conversion, as Catalyst enables it), and the functions given to `adjoint`, `ctrl`, `grad`,
`vjp`, ... converted too. Expected values are computed by the same Python without qjit, or
by uncompiled PennyLane (default.qubit)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import CompileError, qjit


def test_slice_write_of_a_traced_array_into_a_numpy_array():
    def expand(x):
        out = np.zeros((2 * x.shape[0],), dtype=x.dtype)
        out[1:4] = x
        out[4::1] = x[:2] * 10
        return out

    x = np.array([5, 3, 4])
    np.testing.assert_array_equal(qjit(autograph=True)(expand)(x), expand(x))


def test_element_writes_in_an_unrolled_loop():
    def double(x):
        out = np.zeros(x.shape, dtype=x.dtype)
        for i in range(x.shape[0]):  # a static range: unrolled
            out[i] = 2 * x[i]
        return out

    x = np.array([5.0, -3.0, 4.5])
    np.testing.assert_allclose(qjit(autograph=True)(double)(x), double(x))


def test_augmented_writes_at_traced_indices_in_a_compiled_loop():
    def f(x, n):
        y = np.ones(5)
        for i in range(n):  # a traced bound: y is carried by a compiled loop
            y[i] += x
            y[i + 1] *= 2.0
            y[i] -= 0.25
            y[i] /= 2.0
        return y

    jitted = qjit(autograph=True)(f)
    for n in (0, 2, 4):
        np.testing.assert_allclose(jitted(0.5, n), f(0.5, n))


def test_numpy_constant_indexed_by_a_traced_loop_variable():
    dev = qml.device("default.qubit", wires=1)

    def circuit(n):
        angles = np.array([0.0, np.pi / 4, np.pi / 2])
        for i in range(n):
            qml.RY(angles[i], wires=0)
        return qml.expval(qml.PauliZ(0))

    jitted = qjit(autograph=True)(qml.QNode(circuit, dev))
    for n in (1, 2, 3):
        assert np.isclose(jitted(n), qml.QNode(circuit, dev)(n))


def test_python_containers_keep_python_semantics():
    def f(x):
        items = [1.0, 2.0]
        items.append(x)
        items[0] = x * 3
        table = {"a": 1.0}
        table["a"] += x
        return items, table

    got = qjit(autograph=True)(f)(0.5)
    want = f(0.5)
    assert isinstance(got[0], list) and len(got[0]) == 3
    np.testing.assert_allclose(got[0], want[0])
    assert np.isclose(got[1]["a"], want[1]["a"])


def test_python_list_indexed_by_a_traced_integer_names_the_fix():
    def f(n):
        params = [0.1, 0.2, 0.3]
        total = 0.0
        for i in range(n):
            total = total + params[i]
        return total

    with pytest.raises(CompileError, match=r"np\.array"):
        qjit(autograph=True)(f)(2)


def branchy(x):
    if x > 0:
        return 2 * x, x**2
    return 4 * x, x**8


def rotate_if_positive(x):
    if x > 0:
        qml.RY(x, wires=0)


@pytest.mark.parametrize("vjp", [cofactor.vjp, qml.vjp])
def test_function_given_to_vjp_is_converted(vjp):
    def f(x):
        return vjp(branchy, (x,), (1.0, 1.0))

    jitted = qjit(autograph=True)(f)
    for x, want in ((3.0, 2 + 2 * 3.0), (-1.0, 4 + 8 * (-1.0) ** 7)):
        values, vjp_value = jitted(x)
        np.testing.assert_allclose(values, branchy(x))
        assert np.allclose(vjp_value, want)


@pytest.mark.parametrize("grad", [cofactor.grad, qml.grad])
def test_function_given_to_grad_is_converted(grad):
    def first(x):
        return branchy(x)[0]

    def f(x):
        return grad(first)(x)

    jitted = qjit(autograph=True)(f)
    assert jitted(3.0) == 2.0
    assert jitted(-3.0) == 4.0


def test_grad_as_a_decorator_factory_converts_the_function():
    def product(x, y):
        if x > 0:
            return x * y
        return -x * y

    def f(x, y):
        return cofactor.grad(product, argnums=1)(x, y), cofactor.grad(argnums=1)(product)(x, y)

    jitted = qjit(autograph=True)(f)
    assert jitted(2.0, 3.0) == (2.0, 2.0)
    assert jitted(-4.0, 3.0) == (4.0, 4.0)


@pytest.mark.parametrize("adjoint", [cofactor.adjoint, qml.adjoint])
@pytest.mark.parametrize("ctrl", [cofactor.ctrl, qml.ctrl])
def test_quantum_functions_given_to_adjoint_and_ctrl_are_converted(adjoint, ctrl):
    dev = qml.device("default.qubit", wires=2)

    @qjit(autograph=True)
    @qml.qnode(dev)
    def circuit(x):
        qml.X(1)
        adjoint(rotate_if_positive)(x)
        ctrl(rotate_if_positive, control=1)(x)
        return qml.probs()

    @qml.qnode(dev)
    def reference(x):
        qml.X(1)
        if x > 0:
            qml.adjoint(qml.RY(x, wires=0))
            qml.ctrl(qml.RY(x, wires=0), control=1)
        return qml.probs()

    for x in (0.7, -0.4):
        np.testing.assert_allclose(circuit(x), reference(x), atol=1e-12)


def test_wrapper_argument_errors():
    dev = qml.device("default.qubit", wires=1)

    def no_argument():
        qml.adjoint()
        return qml.probs()

    def not_callable():
        qml.adjoint(3)
        return qml.probs()

    with pytest.raises(ValueError, match="adjoint requires at least one argument"):
        qjit(autograph=True)(qml.QNode(no_argument, dev))()
    with pytest.raises(ValueError, match="must be callable or an Operation"):
        qjit(autograph=True)(qml.QNode(not_callable, dev))()


def test_operator_given_to_adjoint_passes_through():
    dev = qml.device("default.qubit", wires=2)

    def circuit():
        qml.adjoint(qml.S(0))
        qml.ctrl(qml.PauliX(0), control=1)
        return qml.state()

    np.testing.assert_allclose(
        qjit(autograph=True)(qml.QNode(circuit, dev))(), qml.QNode(circuit, dev)()
    )


def test_converted_qnode_names_its_source():
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RY(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    jitted = qjit(autograph=True)(circuit)
    assert jitted.user_function.ag_unconverted is circuit
    assert np.isclose(jitted(np.pi), -1.0)


def test_autograph_include_needs_autograph():
    with pytest.raises(CompileError, match="'autograph' must be set to True"):
        qjit(autograph_include=["some_module"])(lambda x: x)


def test_qnode_given_to_grad_and_vmap_is_converted():
    dev = qml.device("default.qubit", wires=1)

    @qml.qnode(dev)
    def circuit(x):
        if x > 0:
            qml.RY(x, wires=0)
        else:
            qml.RX(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    def f(x, xs):
        return cofactor.grad(circuit)(x), qml.grad(circuit)(x), cofactor.vmap(circuit)(xs)

    d1, d2, batch = qjit(autograph=True)(f)(0.5, np.array([0.5, -0.3]))
    assert np.isclose(d1, -np.sin(0.5)) and np.isclose(d2, -np.sin(0.5))
    np.testing.assert_allclose(batch, np.cos([0.5, -0.3]))


def test_static_loops_run_in_python():
    # Catalyst tries to compile these loops, fails and falls back to Python with a warning;
    # cofactor runs loops over static ranges in Python from the start: the same values
    dev = qml.device("default.qubit", wires=1)

    def circuit():
        params = [0.0, np.pi / 4, np.pi / 2]
        for i in range(3):
            qml.RY(params[i], wires=0)
        for name in ["0", "1"]:
            qml.RX(int(name) / 4 * np.pi, wires=0)
        return qml.expval(qml.PauliZ(0))

    assert np.isclose(qjit(autograph=True)(qml.QNode(circuit, dev))(), qml.QNode(circuit, dev)())

    def growing():
        arr = np.array([1, 2])
        for _ in range(2):
            arr = np.kron(arr, arr)  # the shape changes from one iteration to the next
        text = "hi"
        for i in range(1, 4):
            text = text * i
        return arr, len(text)

    got = qjit(autograph=True)(growing)()
    np.testing.assert_array_equal(got[0], growing()[0])
    assert got[1] == growing()[1]
