"""`cofactor.switch` (Catalyst's index switch) against uncompiled PennyLane and Catalyst's
documented examples (catalyst/api_extensions/control_flow.py, `switch`)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import adjoint, for_loop, qjit, switch

pytestmark = pytest.mark.needs_toolchain


def _gates(i, x):
    """The switch's meaning in plain Python, for the reference circuit."""
    if i == 0:
        qml.RX(x, wires=0)
    elif i == 2:
        qml.RY(2 * x, wires=0)
        qml.CNOT([0, 1])
    elif i == -5:
        qml.Hadamard(1)
    else:
        qml.RZ(x, wires=0)
        qml.Hadamard(0)


def _switched(i, x):
    @switch(i)
    def s(y):
        qml.RZ(y, wires=0)
        qml.Hadamard(0)

    @s.branch(0)
    def _(y):
        qml.RX(y, wires=0)

    @s.branch(2)
    def _(y):
        qml.RY(2 * y, wires=0)
        qml.CNOT([0, 1])

    @s.branch(-5)
    def _(y):
        qml.Hadamard(1)

    s(x)


def test_catalyst_docstring_example():
    @qjit
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def circuit(i):
        @switch(i)
        def my_switch():
            qml.Z(0)

        @my_switch.branch(3)
        def _():
            qml.H(0)

        @my_switch.branch(0)
        def _():
            qml.X(0)

        my_switch()
        return qml.probs()

    np.testing.assert_allclose(circuit(0), [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(circuit(3), [0.5, 0.5], atol=1e-12)
    np.testing.assert_allclose(circuit(4), [1.0, 0.0], atol=1e-12)
    assert circuit.compile_count == 1


def test_gates_in_branches_match_pennylane():
    def ref(i, x):
        _gates(i, x)
        return qml.probs(wires=[0, 1]), qml.expval(qml.Z(0))

    def body(i, x):
        _switched(i, x)
        return qml.probs(wires=[0, 1]), qml.expval(qml.Z(0))

    compiled = qjit(qml.qnode(qml.device("lightning.qubit", wires=2))(body))
    reference = qml.qnode(qml.device("default.qubit", wires=2))(ref)
    for i in (0, 1, 2, 3, -5, -1, 100):
        got, want = compiled(i, 0.7), reference(i, 0.7)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, atol=1e-10)
    assert compiled.compile_count == 1


def test_classical_results_are_promoted():
    """Catalyst's docstring: complex, float and int branches promote to complex."""

    @qjit
    def foo(i):
        @switch(i)
        def s():
            return complex(1, 3)

        @s.branch(2)
        def _():
            return 1.4

        @s.branch(3)
        def _():
            return 2

        return s()

    assert foo(1) == 1 + 3j
    assert foo(2) == 1.4 + 0j
    assert foo(3) == 2 + 0j


def test_returns_pytrees_and_uses_arguments():
    @qjit
    def f(i, x):
        @switch(i)
        def s(v):
            return {"a": v * 0.0, "b": (v.sum(), 0)}

        @s.branch(1)
        def _(v):
            return {"a": v * 2, "b": (v.sum() + 1, 1)}

        @s.branch(7)
        def _(v):
            return {"a": -v, "b": (v.prod(), 7)}

        return s(x)

    x = np.array([1.0, 2.0, 3.0])
    for i, (a, b0, b1) in {
        1: (x * 2, 7.0, 1),
        7: (-x, 6.0, 7),
        0: (x * 0, 6.0, 0),
    }.items():
        out = f(i, x)
        np.testing.assert_allclose(out["a"], a)
        assert out["b"][0] == pytest.approx(b0) and out["b"][1] == b1


def test_switch_in_loop_and_under_adjoint():
    """A switch inside a compiled loop and inside adjoint(...) of a quantum function."""

    def ref(n, x):
        for k in range(n):
            _gates(k % 3, x * (k + 1))
        qml.adjoint(_gates)(2, x)
        return qml.state()

    def body(n, x):
        @for_loop(0, n, 1)
        def loop(k):
            _switched(k % 3, x * (k + 1))

        loop()
        adjoint(_switched)(2, x)
        return qml.state()

    compiled = qjit(qml.qnode(qml.device("lightning.qubit", wires=2))(body))
    reference = qml.qnode(qml.device("default.qubit", wires=2))(ref)
    for n in (0, 1, 4):
        np.testing.assert_allclose(compiled(n, 0.3), reference(n, 0.3), atol=1e-10)


def test_python_semantics_outside_qjit():
    """Catalyst's docstring: outside qjit only the selected branch runs, types unpromoted."""

    def foo(i, x):
        @switch(i)
        def s(v):
            return v / 4

        @s.branch(-3)
        def _(v):
            return str(v)

        @s.branch(0)
        def _(v):
            return 0 * v

        return s(x)

    assert foo(-3, 12) == "12"
    assert type(foo(0, 111)) is int
    assert foo(42, 1.9) == pytest.approx(1.9 / 4)


def test_static_index_inside_qjit_runs_one_branch():
    @qjit(static_argnums=0)
    def f(i, x):
        @switch(i)
        def s():
            return "default"

        @s.branch(1)
        def _():
            return x * 2

        out = s()
        return x if isinstance(out, str) else out

    assert f(1, 3.0) == 6.0
    assert f(0, 3.0) == 3.0


def test_inconsistent_branches_raise_type_error():
    def different_structure(i):
        @switch(i)
        def s():
            return 1.0

        @s.branch(1)
        def _():
            return 1.0, 2.0

        return s()

    with pytest.raises(TypeError, match="consistent return structure"):
        qjit(different_structure)(1)

    def different_shape(i):
        @switch(i)
        def s():
            return np.zeros(2)

        @s.branch(1)
        def _():
            return np.zeros(3)

        return s()

    with pytest.raises(TypeError, match="consistent array shape"):
        qjit(different_shape)(1)


def test_bad_index_and_cases():
    with pytest.raises(ValueError, match="requires a default branch"):
        switch(0)(None)

    @switch(0)
    def s():
        return 0

    with pytest.raises(TypeError, match="case must be an integer"):
        s.branch(1.5)

    def float_index(x):
        @switch(x)
        def t():
            return 0.0

        @t.branch(1)
        def _():
            return 1.0

        return t()

    with pytest.raises(TypeError, match="index must be an integer"):
        qjit(float_index)(1.0)
