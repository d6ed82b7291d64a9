"""for_loop / while_loop / cond, classical (quantum bodies are in test_quantum.py)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import CompileError, cond, for_loop, qjit, while_loop

pytestmark = pytest.mark.needs_toolchain


def test_for_loop_sum():
    @qjit
    def f(n):
        @for_loop(0, n, 1)
        def body(i, total):
            return total + i

        return body(0)

    assert f(5) == 10
    assert f(0) == 0
    assert f.compile_count == 1


def test_for_loop_negative_step_and_several_carries():
    @qjit
    def f(x):
        @for_loop(10, 0, -3)
        def body(i, acc, v):
            return acc + i, v * x

        return body(0, np.ones(2))

    acc, v = f(2.0)
    assert acc == 10 + 7 + 4 + 1
    np.testing.assert_allclose(v, [16.0, 16.0])


def test_for_loop_traced_bounds_and_array_carry():
    @qjit
    def f(lo, hi, v):
        @for_loop(lo, hi, 2)
        def body(i, acc):
            return acc + v * i

        return body(np.zeros(3))

    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(f(1, 6, v), v * (1 + 3 + 5))


def test_for_loop_python_semantics_outside_qjit():
    @for_loop(0, 4, 1)
    def body(i, total):
        return total + i

    assert body(0) == 6


def test_while_loop():
    @qjit
    def f(x):
        @while_loop(lambda v: v < 100.0)
        def body(v):
            return v * 3

        return body(x)

    assert f(1.0) == 243.0
    assert f(200.0) == 200.0


def test_while_loop_two_carries():
    @qjit
    def f(n):
        @while_loop(lambda i, s: i < n)
        def body(i, s):
            return i + 1, s + i * i

        return body(0, 0)

    assert f(4) == (4, 0 + 1 + 4 + 9)


def test_cond_classical_branches():
    @qjit
    def f(x, y):
        @cond(y > 1.5)
        def branch():
            return x**2

        @branch.otherwise
        def branch():
            return x

        return branch()

    assert f(3.0, 2.0) == 9.0
    assert f(3.0, 1.0) == 3.0


def test_cond_else_if_chain_and_promotion():
    @qjit
    def f(x):
        @cond(x < 0)
        def sign():
            return -1

        @sign.else_if(x == 0)
        def _():
            return 0

        @sign.otherwise
        def _():
            return 1.0

        return sign()

    assert [f(-2.0), f(0.0), f(5.0)] == [-1.0, 0.0, 1.0]


def test_cond_on_python_value_runs_python():
    @qjit
    def f(x):
        return cond(True)(lambda: x + 1).otherwise(lambda: x - 1)()

    assert f(1.0) == 2.0


def test_cond_on_python_value_checks_every_branch():
    # Catalyst's (and qml.cond's under qjit) documented semantics: every branch is traced,
    # the branches must return the same structure, and the result has their common dtype;
    # results known at compile time stay known (before: the taken branch's value as it was)
    @qjit
    def f(x):
        a = cond(True)(lambda: 0).otherwise(lambda: True)()
        b = cond(False)(lambda: 1).else_if(True)(lambda: 2).otherwise(lambda: x * 0.5)()
        total = 0
        for i in range(a + 3):  # still a Python value
            total = total + i
        return a, b, total

    a, b, total = f(3.0)
    assert (a, b, total) == (0, 2.0, 3)
    assert np.asarray(a).dtype == np.int64 and np.asarray(b).dtype == np.float64

    @qjit
    def mismatch(x):
        return cond(True)(lambda: (x, x)).otherwise(lambda: [x, x])()

    with pytest.raises(TypeError, match="same structure"):
        mismatch(1.0)

    @qjit
    def needs_otherwise(x):
        return cond(False)(lambda: x).else_if(True)(lambda: x)()

    with pytest.raises(TypeError, match="otherwise"):
        needs_otherwise(1.0)


def test_cond_on_python_value_without_results_runs_one_branch():
    # side-effect-only branches: the branch not taken is not traced (its write into an
    # array made outside it would otherwise leak into the program)
    @qjit
    def f(x):
        out = np.zeros(2)
        branch = cond(False)(lambda: out.__setitem__(0, x))
        branch.otherwise(lambda: out.__setitem__(1, x))()
        return out

    np.testing.assert_allclose(f(2.0), [0.0, 2.0])


def test_qml_cond_on_python_value_in_a_circuit_matches_pennylane():
    def circuit(x):
        qml.cond(False, qml.RX, qml.RY)(x, wires=0)
        angle = qml.cond(True, lambda: 2 * x, lambda: x)()
        qml.RX(angle, wires=1)
        return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliZ(1))

    dev = qml.device("default.qubit", wires=2)
    compiled = qjit(qml.qnode(qml.device("lightning.qubit", wires=2))(circuit))(0.4)
    np.testing.assert_allclose(compiled, qml.qnode(dev)(circuit)(0.4), atol=1e-12)


def test_cond_needs_otherwise_when_returning():
    @qjit
    def f(x):
        return cond(x > 0)(lambda: x)()

    with pytest.raises(CompileError, match="otherwise"):
        f(1.0)


def test_cond_branches_must_agree():
    @qjit
    def f(x):
        return cond(x > 0)(lambda: x).otherwise(lambda: (x, x))()

    with pytest.raises(CompileError, match="same structure"):
        f(1.0)


def test_loop_body_must_keep_shape():
    @qjit
    def f(n):
        return for_loop(0, n, 1)(lambda i, v: np.concatenate([v, v]))(np.zeros(1))

    with pytest.raises(CompileError, match="changed shape"):
        f(3)


def test_nested_loops_and_cond():
    @qjit
    def f(n):
        @for_loop(0, n, 1)
        def outer(i, acc):
            @for_loop(0, i, 1)
            def inner(j, a):
                return cond(j % 2 == 0)(lambda: a + j).otherwise(lambda: a)()

            return inner(acc)

        return outer(0)

    expected = sum(j for i in range(6) for j in range(i) if j % 2 == 0)
    assert f(6) == expected


def test_loop_body_returning_an_empty_tuple_carries_nothing():
    """Catalyst's bodies may end with `return ()` when nothing is carried (an empty pytree)."""

    def circuit(n):
        @qml.for_loop(0, n, 1)
        def loop(i):
            qml.RX(np.pi * (i + 1) / 3, wires=i)
            return ()

        loop()
        return qml.state()

    ref = qml.QNode(circuit, qml.device("default.qubit", wires=2))(2)
    got = qml.qjit(qml.QNode(circuit, qml.device("lightning.qubit", wires=2)), compiler="cofactor")
    np.testing.assert_allclose(got(2), ref, atol=1e-12)


@pytest.mark.parametrize("value", [33, (44, 33), 1.0])
def test_while_loop_condition_must_be_a_bool(value):
    """As Catalyst (TypeError): an int condition is not read as "nonzero" (33 would loop
    forever), nor a tuple as an array."""

    def f(x):
        @while_loop(lambda i: value)
        def loop(i):
            return i + 1

        return loop(x)

    with pytest.raises(TypeError, match="a single boolean scalar was expected"):
        qjit(f)(0)


def test_while_loop_condition_python_bool_and_traced_bool():
    def f(n):
        @while_loop(lambda i: i < n)
        def loop(i):
            return i + 1

        @while_loop(lambda i: False)
        def never(i):
            return i + 1

        return loop(0), never(5)

    assert tuple(qjit(f)(4)) == (4, 5)


def test_cond_on_traced_value_returning_a_measurement_says_why():
    # before: "cannot trace a value of type ExpectationMP"; Catalyst: this TypeError
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def f(switch: bool):
        if switch:
            return qml.expval(qml.PauliY(0))
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(TypeError, match="returns the measurement expval\\(Y\\(0\\)\\)"):
        qjit(autograph=True)(f)


def test_array_predicates_are_refused_alike():
    # Catalyst: TypeError; before, a numpy array known at compile time gave numpy's
    # ValueError (cond and autograph's `if`), a traced one cofactor's own words
    def program(x):
        n = np.array([[1], [2]])
        if n:
            return x**2
        return x

    for predicate in (lambda x: np.array([1, 2]), lambda x: x * np.ones(2)):

        @qjit
        def f(x, predicate=predicate):
            return cond(predicate(x))(lambda: x).otherwise(lambda: -x)()

        with pytest.raises(TypeError, match="not a valid predicate"):
            f(1.0)
    with pytest.raises(TypeError, match="not a valid predicate"):
        qjit(autograph=True)(program)(3.0)
    assert (
        qjit(autograph=True)(lambda x: cond(np.array([True]))(lambda: x).otherwise(lambda: -x)())(
            2.0
        )
        == 2.0
    )
