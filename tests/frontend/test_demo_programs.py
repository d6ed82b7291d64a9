"""Programs shaped like PennyLane's demos and Catalyst's docs (autograph on a transform
object, controlled regions, purity, unsupported measurements, autograd through qjit) give
uncompiled PennyLane's numbers under qjit, or a clear error saying what to do."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor
from cofactor import CompileError

pytestmark = pytest.mark.needs_toolchain


def _branching(x):
    if x > 0.5:  # a Python `if` on a traced value: autograph makes it a cond
        qml.Hadamard(0)
    qml.RY(x, 0)
    return qml.expval(qml.PauliZ(0))


def _reference_gradient(x):
    qnode = qml.QNode(_branching, qml.device("default.qubit", wires=1))
    return qml.grad(qnode)(pnp.array(x, requires_grad=True))


# --- autograph=True applied to grad/jacobian/vmap objects (Catalyst converts their function) ---
def _grad_of_a_caller(qnode):
    def cost(x):
        return qnode(x)

    return cofactor.grad(cost)


@pytest.mark.parametrize("x", [0.3, 0.9])
@pytest.mark.parametrize("make", [cofactor.grad, _grad_of_a_caller])
def test_autograph_converts_the_function_of_a_grad_object(make, x):
    qnode = qml.QNode(_branching, qml.device("lightning.qubit", wires=1))
    got = cofactor.qjit(make(qnode), autograph=True)(x)
    np.testing.assert_allclose(got, _reference_gradient(x), atol=1e-10)


def test_autograph_converts_pennylane_s_grad_under_qml_qjit():
    qnode = qml.QNode(_branching, qml.device("lightning.qubit", wires=1))
    got = qml.qjit(qml.grad(qnode), compiler="cofactor", autograph=True)(0.9)
    np.testing.assert_allclose(got, _reference_gradient(0.9), atol=1e-10)


def test_autograph_converts_the_function_of_a_vmap_object():
    dev = qml.device("lightning.qubit", wires=1)
    xs = np.array([0.3, 0.9])
    got = cofactor.qjit(cofactor.vmap(qml.QNode(_branching, dev)), autograph=True)(xs)
    reference = qml.QNode(_branching, qml.device("default.qubit", wires=1))
    np.testing.assert_allclose(got, [reference(x) for x in xs], atol=1e-12)


def test_autograph_grad_object_made_inside_a_converted_function():
    # the QNode is converted once by grad(...) and not again when the Grad object is called
    qnode = qml.QNode(_branching, qml.device("lightning.qubit", wires=1))

    def workflow(x):
        return cofactor.grad(qnode)(x)

    got = cofactor.qjit(workflow, autograph=True)(0.9)
    np.testing.assert_allclose(got, _reference_gradient(0.9), atol=1e-10)


# --- ctrl of a region or an operator on its own wires ------------------------------------------
def _overlapping_control(x):
    def region():
        qml.RX(x, 0)
        qml.CNOT([0, 1])

    cofactor.ctrl(region, control=1)()
    return qml.state()


def _overlapping_control_of_an_operator(x):
    qml.ctrl(qml.CNOT([0, 1]), control=0)
    return qml.state()


@pytest.mark.parametrize("body", [_overlapping_control, _overlapping_control_of_an_operator])
def test_a_control_wire_that_the_operation_acts_on_is_named(body):
    # PennyLane's own message names an inner PauliX with "0 wires given"
    circuit = qml.QNode(body, qml.device("lightning.qubit", wires=3))
    with pytest.raises(ValueError, match=r"control wires \[\d\] are also wires of CNOT"):
        cofactor.qjit(circuit)(0.3)


def test_a_controlled_region_with_a_loop_matches_pennylane():
    def body(x, n, loop):
        def layer(i):
            qml.RX(x, 0)
            qml.CNOT([0, 1])

        def region():
            loop(n)(layer)()

        qml.Hadamard(2)
        qml.adjoint(region)()
        qml.ctrl(region, control=2)()
        return qml.state()

    def compiled(x, n):
        return body(x, n, lambda n: cofactor.for_loop(0, n, 1))

    def uncompiled(x, n):
        return body(x, n, lambda n: lambda f: lambda: [f(i) for i in range(n)] and None)

    got = cofactor.qjit(qml.QNode(compiled, qml.device("lightning.qubit", wires=3)))(0.3, 2)
    expected = qml.QNode(uncompiled, qml.device("default.qubit", wires=3))(0.3, 2)
    np.testing.assert_allclose(got, expected, atol=1e-12)


# --- purity and the measurements cofactor refuses ----------------------------------------------
def _purities(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(x, 2)
    qml.CRX(x, [2, 1])
    return qml.purity(wires=[0]), qml.purity(wires=[1, 2]), qml.density_matrix(wires=[2, 0])


@pytest.mark.parametrize("x", [0.0, 0.7, 2.5])
def test_purity_matches_pennylane(x):
    dev = qml.device("default.qubit", wires=3)
    got = cofactor.qjit(qml.QNode(_purities, dev))(x)
    expected = qml.QNode(_purities, dev)(x)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)


def test_purity_gradient_by_finite_differences():
    qnode = qml.QNode(_purities, qml.device("default.qubit", wires=3))

    def cost(x):
        return qnode(x)[0] + 2 * qnode(x)[1]

    got = cofactor.qjit(cofactor.grad(cost, method="fd", h=1e-7))(0.7)
    expected = qml.grad(cost)(pnp.array(0.7, requires_grad=True))
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize(
    "measure, match",
    [
        # (analytic ones are compiled: test_demo_programs3.py)
        (lambda: qml.vn_entropy(wires=[0]), r"qml\.vn_entropy needs an analytic QNode"),
        (lambda: qml.mutual_info(wires0=[0], wires1=[1]), r"qml\.mutual_info needs an analytic"),
        (lambda: qml.classical_shadow(wires=[0]), r"ClassicalShadowMP .*Pauli bases"),
        (lambda: qml.shadow_expval(qml.PauliZ(0)), r"ShadowExpvalMP .*Pauli bases"),
    ],
)
def test_unsupported_measurements_say_what_to_do(measure, match):
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return measure()

    with pytest.raises(CompileError, match=match):
        qnode = qml.set_shots(qml.QNode(circuit, qml.device("default.qubit", wires=2)), 10)
        cofactor.qjit(qnode)(0.3)


# --- autograd (qml.grad, PennyLane optimizers) through a compiled function ---------------------
def test_autograd_through_a_compiled_function_gets_cofactor_s_gradient():
    # (was refused; autograd now differentiates a compiled function: api_extensions/
    # autograd_bridge.py, tested further in test_demo_programs4.py)
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.PauliZ(0))

    cost = qml.qjit(circuit, compiler="cofactor")
    stepped = qml.GradientDescentOptimizer(0.1).step(cost, pnp.array(0.3, requires_grad=True))
    np.testing.assert_allclose(stepped, 0.3 + 0.1 * np.sin(0.3), atol=1e-12)
    np.testing.assert_allclose(
        qml.qjit(qml.grad(circuit), compiler="cofactor")(0.3), -np.sin(0.3), atol=1e-12
    )


# --- debug_assert (Catalyst's sharp-bits doc: run-time assertions) -----------------------------
def test_debug_assert_checks_its_condition_at_every_run():
    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def circuit(x):
        cofactor.debug_assert(x > 0, "the angle must be positive")
        qml.RX(x, 0)
        return qml.expval(qml.PauliZ(0))

    np.testing.assert_allclose(circuit(0.3), np.cos(0.3), atol=1e-12)
    with pytest.raises(RuntimeError, match="the angle must be positive"):
        circuit(-0.3)
    np.testing.assert_allclose(circuit(0.5), np.cos(0.5), atol=1e-12)  # still usable


def test_debug_assert_in_a_loop_and_with_a_constant_condition():
    def count(n):
        @cofactor.for_loop(0, n, 1)
        def body(i, total):
            cofactor.debug_assert(i < 3, "i reached 3")
            return total + i

        return body(0)

    compiled = cofactor.qjit(count)
    assert compiled(3) == 3
    with pytest.raises(RuntimeError, match="i reached 3"):
        compiled(5)

    def never(x):
        cofactor.debug_assert(False, "never")
        return x

    with pytest.raises(RuntimeError, match="never"):
        cofactor.qjit(never)(1.0)


def test_disable_assertions_compiles_no_check():
    def f(x):
        cofactor.debug_assert(x < 6, "x greater than 6")
        return x * 8

    assert cofactor.qjit(disable_assertions=True)(f)(7) == 56
    assert qml.qjit(f, compiler="cofactor", disable_assertions=True)(7) == 56
    with pytest.raises(RuntimeError, match="x greater than 6"):
        cofactor.qjit(f)(7)  # the same function with assertions: a different program


def test_debug_assert_refuses_an_array_condition():
    with pytest.raises(ValueError, match=r"scalar bool.*np\.all"):
        cofactor.qjit(lambda x: cofactor.debug_assert(x < 5, "small") or x)(np.ones(3))


# --- constant matrices: one dense global each, not one store per element -----------------------
def test_a_constant_unitary_is_one_global_in_the_ir():
    # QuantumMonteCarlo applies 64x64 unitaries; stored element by element (8192 stores
    # each) the module took about a minute to compile
    rng = np.random.default_rng(7)
    a = rng.normal(size=(16, 16)) + 1j * rng.normal(size=(16, 16))
    unitary, _ = np.linalg.qr(a)
    hermitian = a + a.conj().T

    def circuit(x):
        qml.RX(x, 0)
        qml.QubitUnitary(unitary, wires=range(4))
        qml.ctrl(qml.QubitUnitary(unitary.T, wires=[1, 2, 3, 4]), control=0)
        return qml.expval(qml.Hermitian(hermitian[:4, :4] + hermitian[:4, :4].T, wires=[4, 2]))

    compiled = cofactor.qjit(qml.QNode(circuit, qml.device("lightning.qubit", wires=5)))
    got = compiled(0.4)
    expected = qml.QNode(circuit, qml.device("default.qubit", wires=5))(0.4)
    np.testing.assert_allclose(got, expected, atol=1e-10)
    assert compiled.mlir.count("memref.global") >= 3
    assert compiled.mlir.count("memref.store") < 100


def test_quantum_monte_carlo_matches_pennylane():
    m = 3
    xs = np.linspace(-np.pi, np.pi, 2**m)
    probs = np.exp(-(xs**2) / 2)
    probs /= probs.sum()

    def circuit():
        qml.QuantumMonteCarlo(
            probs,
            lambda i: np.sin(xs[i]) ** 2,
            target_wires=range(m + 1),
            estimation_wires=range(m + 1, m + 4),
        )
        return qml.probs(range(m + 1, m + 4))

    dev = qml.device("lightning.qubit", wires=m + 4)
    got = cofactor.qjit(qml.QNode(circuit, dev))()
    np.testing.assert_allclose(got, qml.QNode(circuit, dev)(), atol=1e-10)


# --- Catalyst pass names with a PennyLane tape transform --------------------------------------
def _rotations(x):
    qml.Rot(0.3, x, 0.7, wires=0)
    qml.Hadamard(1)
    qml.Hadamard(1)
    qml.Rot(0.1, 0.8, 0.9, wires=2)
    return qml.expval(3 * qml.Z(0) + qml.X(1) + 2 * qml.Y(2)), qml.expval(qml.Z(1))


@pytest.mark.parametrize(
    "pass_only",
    [
        qml.transform(pass_name="split-non-commuting"),
        qml.transform(pass_name="split-non-commuting")(grouping_strategy="wires"),
        qml.transform(pass_name="split-to-single-terms"),
        qml.transform(pass_name="cancel-inverses"),
    ],
)
def test_a_pass_only_transform_runs_pennylane_s_tape_transform(pass_only):
    # was: "could not be applied by cofactor to the traced circuit: NotImplementedError"
    compiled = cofactor.qjit(
        pass_only(qml.QNode(_rotations, qml.device("lightning.qubit", wires=3)))
    )
    expected = qml.QNode(_rotations, qml.device("default.qubit", wires=3))(0.5)
    for g, e in zip(compiled(0.5), expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)
