"""cofactor as a PennyLane compiler: discovery through entry points, the active-compiler
hook, and programs written only with the qml.* API compiled with compiler="cofactor",
against the same programs run uncompiled by PennyLane (default.qubit, autograd)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor

TOL = 1e-10


def test_cofactor_is_an_available_compiler():
    assert "cofactor" in qml.compiler.available_compilers()
    assert qml.compiler.available("cofactor")


def test_active_compiler_is_cofactor_only_while_tracing():
    seen = []

    @qml.qjit(compiler="cofactor")
    def f(x):
        seen.append(qml.compiler.active_compiler())
        return x + 1.0

    assert qml.compiler.active_compiler() is None
    assert f(1.0) == 2.0
    assert seen == ["cofactor"]
    assert qml.compiler.active_compiler() is None


def test_qjit_options_pass_through():
    @qml.qjit(compiler="cofactor", static_argnums=1)
    def f(x, n):
        return x * n

    assert isinstance(f, cofactor.QJIT)
    assert f(2.0, 3) == 6.0
    assert f(2.0, 4) == 8.0
    assert f.compile_count == 2
    assert qml.qjit(lambda x: x - 1.0, compiler="cofactor")(3.0) == 2.0


dev = qml.device("default.qubit", wires=3)


def circuit_body(x, n):
    """Loops, a conditional, adjoint and ctrl, all through qml.* control flow."""

    @qml.for_loop(0, n, 1)
    def layers(i, angle):
        qml.RX(angle, wires=0)
        qml.ctrl(qml.RY, control=0)(angle * 0.5, wires=1)
        qml.adjoint(qml.RZ)(angle, wires=2)
        qml.CNOT(wires=[1, 2])
        return angle * 1.1

    layers(x[0])

    @qml.while_loop(lambda k: k < 2)
    def twice(k):
        qml.RY(x[1], wires=k)
        return k + 1

    twice(0)
    qml.cond(x[0] > 0.3, qml.RX, qml.RY)(x[1], wires=2)
    return qml.expval(qml.PauliZ(0) @ qml.PauliZ(2) + 0.5 * qml.PauliX(1))


@qml.qnode(dev, diff_method="adjoint")
def circuit(x):
    return circuit_body(x, 3)


@pytest.mark.parametrize("x", [np.array([0.4, -0.7]), np.array([0.1, 1.2])])
def test_qml_control_flow_program_matches_pennylane(x):
    compiled = qml.qjit(circuit, compiler="cofactor")
    assert compiled(x) == pytest.approx(float(circuit(x)), abs=TOL)


def test_qml_gradients_match_pennylane():
    def cost(x):
        return qml.math.sin(circuit(x)) * x[0] ** 2

    @qml.qjit(compiler="cofactor")
    def gradients(x):
        return qml.grad(cost)(x), qml.jacobian(lambda v: v * circuit(v))(x)

    x = np.array([0.4, -0.7])
    grad, jac = gradients(x)
    xp = pnp.array(x, requires_grad=True)
    np.testing.assert_allclose(grad, qml.grad(cost)(xp), atol=1e-8)
    np.testing.assert_allclose(jac, qml.jacobian(lambda v: v * circuit(v))(xp), atol=1e-8)


def test_qml_value_and_grad_vjp_jvp_match_pennylane():
    @qml.qnode(dev, diff_method="adjoint")
    def two(x):
        qml.RX(x[0], wires=0)
        qml.RY(x[1], wires=1)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1))

    def f(x):
        return qml.math.stack([two(x), x[0] * x[1]])

    @qml.qjit(compiler="cofactor")
    def run(x):
        value, grad = qml.value_and_grad(lambda v: two(v) ** 2)(x)
        out_vjp, vjp = qml.vjp(f, [x], [np.array([1.0, -2.0])])
        out_jvp, jvp = qml.jvp(f, [x], [np.array([0.3, 0.5])])
        return value, grad, out_vjp, vjp, out_jvp, jvp

    x = np.array([0.3, -1.1])
    value, grad, out_vjp, vjp, out_jvp, jvp = run(x)
    xp = pnp.array(x, requires_grad=True)
    jac = qml.jacobian(lambda v: qml.math.stack([two(v), v[0] * v[1]]))(xp)
    assert value == pytest.approx(float(two(x)) ** 2, abs=TOL)
    np.testing.assert_allclose(grad, qml.grad(lambda v: two(v) ** 2)(xp), atol=1e-8)
    np.testing.assert_allclose(out_vjp, f(x), atol=TOL)
    np.testing.assert_allclose(np.ravel(vjp), np.array([1.0, -2.0]) @ jac, atol=1e-8)
    np.testing.assert_allclose(out_jvp, f(x), atol=TOL)
    np.testing.assert_allclose(jvp, jac @ np.array([0.3, 0.5]), atol=1e-8)


def test_qml_measure_and_cond_on_the_outcome():
    dev2 = qml.device("default.qubit", wires=2)

    @qml.qjit(compiler="cofactor")
    @qml.qnode(dev2)
    def circuit(x):
        qml.RX(x, wires=0)
        m = qml.measure(0)
        qml.cond(m, qml.PauliX)(wires=1)
        return qml.expval(qml.PauliZ(1))

    assert circuit(np.pi) == pytest.approx(-1.0, abs=TOL)  # outcome 1 for sure
    assert circuit(0.0) == pytest.approx(1.0, abs=TOL)  # outcome 0 for sure


def test_a_new_process_reuses_the_disk_cache(tmp_path):
    """Catalyst recompiles in every new Python session; cofactor loads the library that an
    earlier process compiled (keyed by the IR and the toolchain)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "program.py"
    script.write_text(
        "import numpy as np, pennylane as qml, cofactor\n"
        "dev = qml.device('lightning.qubit', wires=2)\n"
        "@cofactor.qjit\n"
        "@qml.qnode(dev)\n"
        "def c(x):\n"
        "    qml.RX(x, wires=0); qml.CNOT(wires=[0, 1])\n"
        "    return qml.expval(qml.PauliZ(1))\n"
        "print(float(c(0.5)), c._last.library.from_cache)\n"
    )
    env = {**os.environ, "COFACTOR_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (run.stdout.split() for run in runs)
    assert first[0] == second[0] and float(first[0]) == pytest.approx(np.cos(0.5), abs=TOL)
    assert (first[1], second[1]) == ("False", "True")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_pennylane_rules_that_ask_for_jax_arrays_under_a_compiler(n):
    """PennyLane's MultiRZ rules call qml.math.array(wires, like="jax") when a compiler is
    active and index it with a for_loop's traced index: under cofactor that is a traced
    array, and JAX is never needed (PennyLane's test_MultiRZ_decomposition_qjit_new)."""
    wires = tuple(range(n))
    theta = 0.8362
    expected = np.diag(qml.MultiRZ.compute_matrix(theta, n)) / 2 ** (n / 2)
    for rule in qml.list_decomps(qml.MultiRZ):

        @qml.qjit(compiler="cofactor", static_argnums=[1])
        @qml.qnode(qml.device("lightning.qubit", wires=n))
        def node(theta, rule):
            for w in range(n):
                qml.H(w)
            rule(theta, wires)
            return qml.state()

        assert np.allclose(node(theta, rule), expected, atol=TOL)


def test_like_jax_arrays_are_traced_arrays_while_tracing():
    seen = []

    @qml.qjit(compiler="cofactor")
    def f(x):
        a = qml.math.array([1.0, 2.0, 3.0], like="jax")
        z = qml.math.zeros(3, like="jax")
        seen.append(type(a).__name__)
        return a * x + z

    assert np.allclose(f(2.0), [2.0, 4.0, 6.0])
    assert seen == ["Tracer"]
