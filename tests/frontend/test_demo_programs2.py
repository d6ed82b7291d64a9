"""More programs shaped like PennyLane's demos and docs and Catalyst's docs (dynamic circuits,
templates, optimisation loops, callbacks): uncompiled PennyLane's numbers under qjit, or a
clear error that names the operation and says what to do."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from demo_support import assert_matches_default_qubit, default, lightning
from pennylane import numpy as pnp

import cofactor
from cofactor import CompileError

pytestmark = pytest.mark.needs_toolchain


# --- a Hamiltonian built inside a QNode is queued as a gate -----------------------------------
def _hamiltonian_sum(x, coefficient):
    h = qml.Hamiltonian([1.0, 0.5], [qml.X(0), qml.Z(0) @ qml.Z(1)])
    h = h + qml.Hamiltonian([coefficient(x)], [qml.Y(0)])  # leaves both operands queued
    qml.RY(x, 0)
    return qml.expval(h)


@pytest.mark.parametrize("coefficient", [lambda x: x, lambda x: 0.3], ids=["traced", "constant"])
def test_a_hamiltonian_queued_as_a_gate_is_named(coefficient):
    # PennyLane applies the operands' non-unitary matrices to the state (a wrong number);
    # cofactor failed at run time with "QubitUnitary: matrix is not unitary"
    qnode = qml.QNode(lambda x: _hamiltonian_sum(x, coefficient), lightning(2))
    with pytest.raises(CompileError, match=r"X\(0\) .*is applied as a gate.*stop_recording"):
        cofactor.qjit(qnode)(0.4)


def test_a_hamiltonian_built_without_recording_and_a_unitary_sum_still_run():
    def measured(x):
        with qml.QueuingManager.stop_recording():
            h = qml.Hamiltonian([1.0, 0.5], [qml.X(0), qml.Z(0) @ qml.Z(1)])
            h = h + qml.Hamiltonian([x], [qml.Y(0)])
        qml.RY(x, 0)
        qml.RX(2 * x, 1)
        return qml.expval(h)

    def unitary_sum(x):
        qml.apply(qml.s_prod(1 / np.sqrt(2), qml.X(0) + qml.Z(0)))  # a Hadamard
        qml.RY(x, 0)
        return qml.state()

    assert_matches_default_qubit(measured, (0.4,), 2)
    assert_matches_default_qubit(unitary_sum, (0.4,), 1)


# --- PennyLane's optimizers inside qjit ---------------------------------------------------------
def _ansatz(p):
    qml.RX(p[0], 0)
    qml.RY(p[1], 1)
    qml.CNOT([0, 1])
    qml.RY(p[2], 0)
    return qml.expval(qml.Z(0) @ qml.Z(1))


@pytest.mark.parametrize(
    "optimizer", [qml.GradientDescentOptimizer, qml.AdamOptimizer, qml.QNGOptimizer]
)
def test_an_optimizer_step_inside_qjit_is_refused(optimizer):
    # was: the parameters came back unchanged (traced values carry no requires_grad)
    qnode = qml.QNode(_ansatz, lightning(2))
    opt = optimizer(0.1)
    with pytest.raises(CompileError, match=rf"{optimizer.__name__}\.step .*cofactor\.grad"):
        qml.qjit(lambda p: opt.step(qnode, p), compiler="cofactor")(np.array([0.3, 0.5, 0.7]))


@pytest.mark.parametrize("optimizer", [qml.QNGOptimizerQJIT, qml.MomentumQNGOptimizerQJIT])
def test_pennylane_s_qjit_optimizers_say_they_need_catalyst_or_jax(optimizer):
    # was: ModuleNotFoundError("Jax is required.")
    qnode = qml.QNode(_ansatz, lightning(2))
    opt = optimizer(0.1)

    def step(p):
        return opt.step(qnode, p, opt.init(p))[0]

    with pytest.raises(CompileError, match=rf"{optimizer.__name__}\.step .*Catalyst or JAX.*solve"):
        qml.qjit(step, compiler="cofactor")(np.array([0.3, 0.5, 0.7]))


def test_an_optimizer_outside_qjit_with_a_compiled_gradient():
    opt = qml.GradientDescentOptimizer(0.1)
    params = pnp.array([0.3, 0.5, 0.7], requires_grad=True)
    grad_fn = qml.qjit(qml.grad(qml.QNode(_ansatz, lightning(2))), compiler="cofactor")
    got = opt.step(qml.QNode(_ansatz, lightning(2)), params, grad_fn=grad_fn)
    expected = opt.step(qml.QNode(_ansatz, default(2)), params)
    np.testing.assert_allclose(got, expected, atol=1e-10)


def test_vqe_shaped_while_loop_with_value_and_grad_matches_pennylane():
    qnode = qml.QNode(_ansatz, lightning(2))

    @qml.qjit(compiler="cofactor")
    def optimise(p):
        def body(state):
            p, _, n = state
            energy, g = cofactor.value_and_grad(qnode)(p)
            return p - 0.2 * g, energy, n + 1

        return cofactor.while_loop(lambda state: state[2] < 15)(body)((p, 0.0, 0))

    params, energy, steps = optimise(np.array([0.3, 0.5, 0.7]))
    reference = qml.QNode(_ansatz, default(2))
    expected = pnp.array([0.3, 0.5, 0.7], requires_grad=True)
    for _ in range(15):
        expected_energy = reference(expected)
        expected = expected - 0.2 * qml.grad(reference)(expected)
    np.testing.assert_allclose(params, expected, atol=1e-10)
    np.testing.assert_allclose(energy, expected_energy, atol=1e-10)
    assert steps == 15


def test_quantum_natural_gradient_pieces_inside_qjit():
    qnode = qml.QNode(_ansatz, lightning(2))

    @qml.qjit(compiler="cofactor")
    def pieces(p):
        return qml.grad(qnode)(p), qml.metric_tensor(qnode, approx="block-diag")(p)

    p = np.array([0.3, 0.5, 0.7])
    reference = qml.QNode(_ansatz, default(2))
    trainable = pnp.array(p, requires_grad=True)
    g, metric = pieces(p)
    np.testing.assert_allclose(g, qml.grad(reference)(trainable), atol=1e-10)
    expected_metric = qml.metric_tensor(reference, approx="block-diag")(trainable)
    np.testing.assert_allclose(metric, expected_metric, atol=1e-10)


# --- Catalyst's accelerate (JAX functions on a GPU) ----------------------------------------------
def test_accelerate_says_cofactor_has_no_jax_when_called():
    on_host = cofactor.accelerate(np.sin)  # defining it is harmless
    decorated = cofactor.accelerate(dev=None)(np.cos)
    for fn in (on_host, decorated):
        with pytest.raises(CompileError, match=r"cofactor\.accelerate\(\w+\).*JAX.*pure_callback"):
            cofactor.qjit(lambda x, fn=fn: fn(x) * 2)(0.3)


# --- dynamic circuits (Catalyst's dynamic quantum circuits doc) ---------------------------------
def test_measure_with_reset_counted_in_a_loop():
    @cofactor.qjit
    @qml.qnode(lightning(1))
    def flips(x, n):
        def body(i, total):
            qml.RX(x, 0)
            return total + qml.measure(0, reset=True)

        return cofactor.for_loop(0, n, 1)(body)(0)

    assert int(flips(0.0, 5)) == 0
    assert int(flips(np.pi, 5)) == 5


def test_postselected_measurement_controls_a_gate():
    def circuit(x):
        qml.RY(x, 0)
        qml.cond(qml.measure(0, postselect=1), qml.PauliX)(1)
        return qml.expval(qml.PauliZ(1)), qml.probs(wires=0)

    assert_matches_default_qubit(circuit, (0.7,), 3)  # (a wire for deferred measurement)


def test_gates_on_wires_computed_from_an_argument():
    def circuit(w, x):
        qml.Hadamard(w)
        qml.CNOT([w, (w + 1) % 4])
        qml.RX(x, w + 1)
        return qml.probs()

    assert_matches_default_qubit(circuit, (1, 0.4), 4)
    assert_matches_default_qubit(circuit, (2, 0.4), 4)


# --- templates not covered elsewhere -------------------------------------------------------------
def _qsvt(x):
    a = np.array([[0.1, 0.2], [0.3, 0.4]])
    phases = [qml.PCPhase(x * i, dim=2, wires=[0, 1]) for i in range(3)]
    qml.QSVT(qml.BlockEncode(a, wires=[0, 1]), phases)
    return qml.state()


def _select(x):
    qml.Hadamard(0)
    qml.Hadamard(1)
    qml.Select([qml.RX(x, 2), qml.RY(x, 2), qml.PauliX(2), qml.RZ(x, 2)], control=[0, 1])
    return qml.state()


def _prep_select_prep(x):
    h = qml.dot([x, 0.3, 0.3], [qml.Z(2), qml.X(2) @ qml.Z(3), qml.Y(3)])
    qml.PrepSelPrep(h, control=[0, 1])
    qml.Qubitization(qml.dot([0.4, 0.3], [qml.Z(2), qml.Y(3)]), control=[0, 1])
    return qml.state()


def _arithmetic(x):
    qml.BasisEmbedding(3, wires=[0, 1, 2])
    qml.RX(x, 3)
    qml.Adder(2, x_wires=[0, 1, 2], mod=8, work_wires=[4, 5])
    qml.Multiplier(3, x_wires=[0, 1, 2], mod=8, work_wires=[4, 5, 6, 7, 8])
    return qml.probs(wires=[0, 1, 2, 3])


def _qrom_and_superposition(x):
    qml.Hadamard(0)
    qml.Hadamard(1)
    qml.QROM(["01", "11", "10", "00"], control_wires=[0, 1], target_wires=[2, 3], work_wires=[4])
    qml.Superposition(
        np.sqrt([0.5, 0.3, 0.2]), bases=[[0, 0], [1, 0], [1, 1]], wires=[5, 6], work_wire=7
    )
    qml.RY(x, 7)
    return qml.probs()


def _state_preparations(x):
    state = np.array([1, 2j, 3, 0, 1, -1, 0.5, 2.0])
    qml.MottonenStatePreparation(state / np.linalg.norm(state), wires=[0, 1, 2])
    qml.TrotterProduct(qml.dot([x, 0.3], [qml.X(0) @ qml.X(1), qml.Z(2)]), 0.7, n=2, order=4)
    qml.Permute([2, 0, 1], wires=[0, 1, 2])
    return qml.state()


def _mps(w):
    def block(weights, wires):
        qml.CNOT(wires=[wires[0], wires[1]])
        qml.RY(weights[0], wires=wires[0])
        qml.RY(weights[1], wires=wires[1])

    qml.MPS(range(4), 2, block, 2, w)
    return qml.expval(qml.Z(3))


@pytest.mark.parametrize(
    "body, arg, wires",
    [
        (_qsvt, 0.7, 2),
        (_select, 0.6, 3),
        (_prep_select_prep, 0.6, 4),
        (_arithmetic, 0.4, 9),
        (_qrom_and_superposition, 0.3, 8),
        (_state_preparations, 0.8, 3),
        (_mps, np.array([[0.1, -0.3], [0.4, 0.2], [0.5, 0.8]]), 4),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] or None,
)
def test_templates_match_default_qubit(body, arg, wires):
    assert_matches_default_qubit(body, (arg,), wires)


# --- classical pieces of hybrid programs ---------------------------------------------------------
def test_pure_callback_with_a_custom_vjp_under_grad():
    @cofactor.pure_callback
    def host_sin(x) -> float:
        return np.sin(x)

    @host_sin.fwd
    def host_sin_fwd(x):
        return np.sin(x), x

    @host_sin.bwd
    def host_sin_bwd(residual, cotangent):
        return (np.cos(residual) * cotangent,)

    got = cofactor.qjit(cofactor.grad(lambda x: 2 * host_sin(x)))(0.3)
    np.testing.assert_allclose(got, 2 * np.cos(0.3), atol=1e-12)


def test_vmap_with_in_axes_and_out_axes_matches_a_python_loop():
    def circuit(x, y):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        qml.RZ(y, 1)
        return qml.expval(qml.PauliZ(1)), qml.probs(wires=0)

    xs = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    batched = cofactor.vmap(qml.QNode(circuit, lightning(2)), in_axes=(1, None), out_axes=(0, 1))
    expvals, probs = cofactor.qjit(batched)(xs.T.copy(), 0.45)
    reference = qml.QNode(circuit, default(2))
    np.testing.assert_allclose(expvals, [reference(x, 0.45)[0] for x in xs], atol=1e-12)
    np.testing.assert_allclose(probs, np.array([reference(x, 0.45)[1] for x in xs]).T, atol=1e-12)


def test_variational_classifier_gradient_over_a_dataset():
    def circuit(weights, bits):
        qml.BasisState(bits, wires=[0, 1, 2])
        for w in weights:
            for i in range(3):
                qml.Rot(*w[i], wires=i)
            qml.CNOT([0, 1])
            qml.CNOT([1, 2])
            qml.CNOT([2, 0])
        return qml.expval(qml.Z(0))

    def make_cost(qnode):
        def cost(weights, bias, data, labels):
            predictions = [qnode(weights, x) + bias for x in data]
            return sum((y - p) ** 2 for y, p in zip(labels, predictions, strict=True)) / len(labels)

        return cost

    data = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 1, 1]])
    labels = np.array([-1.0, 1.0, 1.0, -1.0])
    weights = 0.3 * np.random.default_rng(0).normal(size=(2, 3, 3))
    compiled = make_cost(qml.QNode(circuit, lightning(3)))
    got = qml.qjit(qml.grad(compiled, argnums=[0, 1]), compiler="cofactor")(
        weights, 0.1, data, labels
    )
    expected = qml.grad(make_cost(qml.QNode(circuit, default(3))), argnums=[0, 1])(
        pnp.array(weights, requires_grad=True), pnp.array(0.1, requires_grad=True), data, labels
    )
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-10)


# --- shot vectors (Catalyst supports them for qml.sample) ----------------------------------------
@pytest.mark.parametrize("mcm_method", ["single-branch-statistics", "one-shot"])
def test_a_shot_vector_cuts_each_sample_into_its_partitions(mcm_method):
    # was: "shot vectors ... are not supported by cofactor"
    @cofactor.qjit(seed=11)
    @qml.set_shots(((2, 3), 4))
    @qml.qnode(lightning(2), mcm_method=mcm_method)
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return {"bits": qml.sample(wires=[0, 1]), "z": [7, qml.sample(qml.Z(1))]}

    result = circuit(np.pi)
    assert [np.shape(s) for s in result["bits"]] == [(2, 2), (2, 2), (2, 2), (4, 2)]
    assert [np.shape(s) for s in result["z"][1]] == [(2,), (2,), (2,), (4,)]
    assert np.all(result["z"][0] == 7)  # (one-shot: stacked over the shots, as Catalyst)
    for bits, z in zip(result["bits"], result["z"][1], strict=True):
        np.testing.assert_array_equal(bits, np.ones_like(bits))  # RX(pi): |11> every shot
        np.testing.assert_array_equal(z, -np.ones_like(z))
    halves = circuit(np.pi / 2)["bits"]  # the partitions are different shots
    assert any(not np.array_equal(halves[0], h) for h in halves[1:3])


def test_a_single_sample_with_a_shot_vector_is_pennylane_s_layout():
    def circuit():
        qml.Hadamard(0)
        return qml.sample(wires=0)

    shots = [3, 5]
    got = cofactor.qjit(qml.set_shots(qml.QNode(circuit, lightning(1)), shots))()
    expected = qml.set_shots(qml.QNode(circuit, default(1)), shots)()
    assert isinstance(got, tuple)
    assert [np.shape(g) for g in got] == [np.shape(e) for e in expected]


@pytest.mark.parametrize(
    "measure", [lambda: qml.expval(qml.Z(0)), lambda: qml.probs(wires=0), lambda: qml.counts()]
)
def test_other_measurements_with_a_shot_vector_are_refused_by_name(measure):
    def circuit():
        qml.Hadamard(0)
        return measure()

    qnode = qml.set_shots(qml.QNode(circuit, lightning(1)), [5, 7])
    with pytest.raises(
        cofactor.CompileError, match=r"circuit: qml\.\w+: .*does not support shot-vectors"
    ):
        cofactor.qjit(qnode)()


# --- counts of an observable ---------------------------------------------------------------------
_HERMITIAN = np.array([[2, 1j, 0, 0], [-1j, 3, 0, 0], [0, 0, 1, 0.5], [0, 0, 0.5, 1]])


@pytest.mark.parametrize(
    "observable",
    [
        lambda: qml.Z(0),
        lambda: qml.Y(0) @ qml.X(1),
        lambda: qml.X(1) @ qml.Identity(0),
        lambda: qml.Hermitian(_HERMITIAN, wires=[1, 0]),
    ],
    ids=["Z", "YX", "XI", "Hermitian"],
)
def test_counts_of_an_observable_are_keyed_by_its_eigenvalues(observable):
    # was: the counts of the rotated basis states, keyed 0..2**k-1
    def circuit(x):
        qml.RX(x, 0)
        qml.RY(2 * x, 1)
        qml.CNOT([0, 1])
        return qml.counts(observable(), all_outcomes=True)

    shots = 20000
    compiled = cofactor.qjit(qml.set_shots(qml.QNode(circuit, lightning(2)), shots), seed=5)
    keys, counts = compiled(0.7)
    expected = qml.set_shots(qml.QNode(circuit, default(2)), shots)(0.7)
    got = dict(zip(keys.tolist(), counts.tolist(), strict=True))
    assert sorted(got) == sorted(float(k) for k in expected)  # PennyLane's keys
    assert counts.sum() == shots
    for key, count in expected.items():
        assert abs(got[float(key)] - count) / shots < 0.02, (got, expected)


# --- messages in Catalyst's words where they say the same thing ---------------------------------
def test_broadcasting_in_a_one_shot_circuit_says_so_in_catalyst_s_words():
    @cofactor.qjit
    @qml.set_shots(10)
    @qml.qnode(lightning(1), mcm_method="one-shot")
    def circuit(x):
        qml.RX(x, wires=0)
        qml.measure(0)
        return qml.probs(wires=0)

    with pytest.raises(ValueError, match=r"mcm_method='one-shot' is not compatible with broad"):
        circuit(np.ones(2))


# --- numpy.linalg.solve / inv of traced matrices (host callbacks) --------------------------------
def test_a_quantum_natural_gradient_step_with_solve_inside_qjit():
    # was: "numpy.linalg.solve is not supported on traced values"
    qnode = qml.QNode(_ansatz, lightning(2))

    @qml.qjit(compiler="cofactor")
    def step(p):
        metric = qml.metric_tensor(qnode, approx="block-diag")(p)
        return p - 0.1 * np.linalg.solve(metric + 0.01 * np.eye(3), qml.grad(qnode)(p))

    p = np.array([0.3, 0.5, 0.7])
    reference = qml.QNode(_ansatz, default(2))
    trainable = pnp.array(p, requires_grad=True)
    metric = qml.metric_tensor(reference, approx="block-diag")(trainable)
    expected = p - 0.1 * np.linalg.solve(metric + 0.01 * np.eye(3), qml.grad(reference)(trainable))
    np.testing.assert_allclose(step(p), expected, atol=1e-10)


def test_gradients_through_solve_and_inv_match_autograd():
    import autograd
    import autograd.numpy as anp

    def cost(np_):
        def f(a, b):
            return np_.sum(np_.sin(np_.linalg.solve(1.5 * a, b))) + np_.sum(np_.linalg.inv(a) ** 2)

        return f

    a = np.array([[3.0, 1.0, 0.2], [0.5, 2.0, 0.1], [0.3, 0.4, 4.0]])
    b = np.array([[1.0, 0.2], [-2.0, 0.3], [0.5, 0.1]])
    got = cofactor.qjit(cofactor.grad(cost(np), argnums=(0, 1)))(a, b)
    expected = autograd.grad(cost(anp), (0, 1))(a, b)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-10)


def test_solve_of_a_singular_or_complex_matrix_says_so():
    with pytest.raises(np.linalg.LinAlgError):
        cofactor.qjit(np.linalg.inv)(np.zeros((2, 2)))
    with pytest.raises(CompileError, match=r"numpy\.linalg\.solve of a traced complex matrix"):
        cofactor.qjit(np.linalg.solve)(1j * np.eye(2), np.ones(2))
