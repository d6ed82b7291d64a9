"""QNodes under qjit, compared with PennyLane's default.qubit and analytic values."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import CompileError, RuntimeExecutionError, cond, for_loop, measure, qjit, while_loop

pytestmark = pytest.mark.needs_toolchain

dev1 = qml.device("default.qubit", wires=1)
dev2 = qml.device("default.qubit", wires=2)
dev4 = qml.device("default.qubit", wires=4)


def _close(got, expected, atol=1e-10):
    if isinstance(expected, tuple | list):
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            _close(g, e, atol)
        return
    assert np.shape(got) == np.shape(expected)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=atol)


# --- acceptance 4 and 5 ---------------------------------------------------------------------
def test_bell_like_circuit_expval():
    @qjit
    @qml.qnode(dev2)
    def circuit(theta):
        qml.Hadamard(0)
        qml.RX(theta, 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.PauliZ(1))

    assert circuit(0.5) == pytest.approx(0.0, abs=1e-12)


def test_measurement_kinds():
    @qjit
    @qml.qnode(dev1)
    def circuit(x):
        qml.RX(x, 0)
        return qml.probs(wires=0), qml.var(qml.PauliZ(0)), qml.state()

    probs, var, state = circuit(np.pi / 2)
    _close(probs, [0.5, 0.5])
    assert var == pytest.approx(1.0)
    _close(state, np.array([1, -1j]) / np.sqrt(2))
    assert circuit(0.0)[1] == pytest.approx(0.0)
    assert circuit(np.pi)[1] == pytest.approx(0.0, abs=1e-12)

    @qjit
    @qml.qnode(dev1)
    def var_after_h():
        qml.Hadamard(0)
        return qml.var(qml.PauliZ(0))

    assert var_after_h() == pytest.approx(1.0)


def test_sample_and_counts_with_shots():
    @qjit(seed=7)
    @qml.set_shots(shots=1000)
    @qml.qnode(dev1)
    def circuit(x):
        qml.RX(x, 0)
        return qml.sample(wires=0), qml.counts(wires=0, all_outcomes=True)

    samples, (states, counts) = circuit(0.0)
    assert samples.shape == (1000, 1) and samples.dtype == np.int64 and not samples.any()
    samples, (states, counts) = circuit(np.pi)
    assert (samples == 1).all()
    _close(states, [0, 1])
    _close(counts, [0, 1000])


def test_seed_makes_samples_reproducible():
    def make():
        @qjit(seed=123)
        @qml.set_shots(shots=200)
        @qml.qnode(dev2)
        def circuit(x):
            qml.RX(x, 0)
            qml.Hadamard(1)
            return qml.sample(), qml.sample(qml.PauliZ(0))

        return circuit

    a, b = make()(1.1), make()(1.1)
    _close(a, b)
    assert a[0].shape == (200, 2) and a[1].shape == (200,)
    assert 0 < a[0][:, 1].sum() < 200  # Hadamard: both outcomes show up
    assert set(np.unique(a[1])) <= {-1.0, 1.0}


def test_finite_shot_expval_is_close():
    @qjit(seed=1)
    @qml.set_shots(shots=20000)
    @qml.qnode(dev1)
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.PauliZ(0))

    assert circuit(0.7) == pytest.approx(np.cos(0.7), abs=0.03)


def test_sample_without_shots_is_an_error():
    # a function without parameters is compiled where it is decorated (as in Catalyst)
    with pytest.raises(CompileError, match="needs shots"):

        @qjit
        @qml.qnode(dev1)
        def circuit():
            return qml.sample(wires=0)


# --- acceptance 6: mid-circuit measurements --------------------------------------------
def test_measure_returns_traced_bool():
    @qjit
    @qml.qnode(dev2)
    def circuit(x):
        qml.RX(x, 0)
        m1 = measure(0)
        qml.RX(m1 * np.pi, 1)
        return measure(1)

    assert circuit(np.pi) == True  # noqa: E712 (numpy bool)
    assert circuit(0.0) == False  # noqa: E712

    @qjit
    @qml.qnode(dev1)
    def flip():
        qml.RX(np.pi, 0)
        return measure(0)

    assert bool(flip()) is True


def test_qml_measure_and_qml_cond_route_to_cofactor():
    @qjit
    @qml.qnode(dev2)
    def circuit(x):
        qml.RX(x, 0)
        m = qml.measure(0)
        qml.cond(m, qml.PauliX)(1)
        return qml.expval(qml.PauliZ(1))

    assert circuit(np.pi) == pytest.approx(-1.0)
    assert circuit(0.0) == pytest.approx(1.0)


def test_measure_reset_and_postselect():
    @qjit
    @qml.qnode(dev1)
    def circuit():
        qml.Hadamard(0)
        m = measure(0, reset=True, postselect=1)
        return m, qml.expval(qml.PauliZ(0))

    m, z = circuit()
    assert bool(m) and z == pytest.approx(1.0)


def test_measure_outside_qjit_is_an_error():
    with pytest.raises(CompileError, match="qjit"):
        measure(0)


# --- acceptance 7, 8, 9: control flow with quantum ops ---------------------------------
def test_for_loop_of_rotations():
    @qjit
    @qml.qnode(dev1)
    def circuit(n, x):
        @for_loop(0, n, 1)
        def body(i):
            qml.RX(x, 0)

        body()
        return qml.expval(qml.PauliZ(0))

    assert circuit(5, 0.3) == pytest.approx(0.0707372016677029, abs=1e-12)
    assert circuit(2, 0.3) == pytest.approx(np.cos(0.6))


def test_qml_for_loop_with_traced_wires():
    @qjit
    @qml.qnode(dev4)
    def circuit(x):
        @qml.for_loop(0, 4, 1)
        def body(i):
            qml.RY(x * (i + 1), wires=i)

        body()
        return [qml.expval(qml.PauliZ(w)) for w in range(4)]

    _close(circuit(0.3), [np.cos(0.3 * k) for k in range(1, 5)])


def test_while_loop_with_gates():
    @qjit
    @qml.qnode(dev1)
    def circuit(n):
        @while_loop(lambda v0, v1: v0 < v1)
        def body(v0, v1):
            qml.PauliX(0)
            return v0 + 1, v1

        body(0, n)
        return measure(0)

    assert bool(circuit(1)) is True
    assert bool(circuit(2)) is False


def test_cond_with_gates():
    @qjit
    @qml.qnode(dev1)
    def circuit(x, y):
        @cond(y > 1.5)
        def branch():
            qml.RX(2 * x, 0)

        @branch.otherwise
        def branch():
            qml.RX(x, 0)

        branch()
        return qml.expval(qml.PauliY(0))

    assert circuit(0.4, 2.0) == pytest.approx(-np.sin(0.8))
    assert circuit(0.4, 1.0) == pytest.approx(-np.sin(0.4))


def test_cond_on_measurement_in_loop():
    @qjit
    @qml.qnode(dev2)
    def circuit(n):
        @for_loop(0, n, 1)
        def body(i, count):
            qml.Hadamard(0)
            m = measure(0, reset=True)
            cond(m)(lambda: qml.PauliX(1))()
            return count + m

        total = body(0)
        return total, measure(1)

    total, last = circuit(7)
    # wire 1 flips once per outcome 1: its final value is the parity of the count
    assert bool(last) == bool(total % 2)


# --- gates, templates, observables -------------------------------------------------------
def circuit_zoo(w, x):
    qml.StronglyEntanglingLayers(w, wires=range(4))
    qml.QubitUnitary(qml.matrix(qml.RY(0.3, 0)), wires=1)
    qml.PauliRot(x, "XY", wires=[0, 2])
    qml.adjoint(qml.S(0))
    qml.ctrl(qml.RX(x, 1), control=[2, 3], control_values=[0, 1])
    qml.MultiRZ(x / 2, wires=[0, 1, 3])
    qml.IsingXY(x, wires=[2, 3])
    qml.Toffoli([0, 1, 2])
    H = 0.5 * qml.Z(0) + qml.X(0) @ qml.Y(1) - 0.2 * qml.Z(2) @ qml.Z(3)
    return (
        qml.expval(H),
        qml.var(qml.X(1)),
        qml.expval(qml.Hermitian(np.array([[1, 1j], [-1j, 2]]), wires=3)),
        qml.probs(wires=[1, 2]),
        qml.expval(qml.Hadamard(2) @ qml.PauliX(0)),
        qml.state(),
    )


def test_gates_templates_and_observables_match_default_qubit():
    w = np.random.default_rng(0).uniform(size=(2, 4, 3))
    compiled = qjit(qml.qnode(dev4)(circuit_zoo))
    _close(compiled(w, 0.4), qml.qnode(dev4)(circuit_zoo)(w, 0.4))
    _close(compiled(w * 2, -1.3), qml.qnode(dev4)(circuit_zoo)(w * 2, -1.3))
    assert compiled.compile_count == 1


def test_more_templates_match_default_qubit():
    def circuit(f, w):
        qml.AngleEmbedding(f, wires=range(3))
        qml.BasicEntanglerLayers(w, wires=range(3))
        qml.QFT(wires=range(3))
        qml.adjoint(qml.QFT)(wires=range(3))
        return qml.probs(wires=[0, 1, 2])

    dev3 = qml.device("default.qubit", wires=3)
    f, w = np.array([0.1, 0.5, -0.3]), np.random.default_rng(1).uniform(size=(2, 3))
    _close(qjit(qml.qnode(dev3)(circuit))(f, w), qml.qnode(dev3)(circuit)(f, w))


def test_hybrid_function_with_two_qnode_calls():
    @qml.qnode(dev2)
    def circuit(x, y):
        qml.RY(x, 0)
        qml.RX(y, 1)
        qml.CNOT([0, 1])
        return qml.expval(qml.PauliZ(0) @ qml.PauliZ(1)), qml.probs(wires=[0, 1])

    def hybrid(params):
        a, p = circuit(np.sin(params[0]), params[1] ** 2)
        b, _ = circuit(params[1], 0.25)
        return a * b + np.sum(p * np.arange(4)), p

    params = np.array([0.7, -0.4])
    compiled = qjit(hybrid)
    _close(compiled(params), hybrid(params))
    assert compiled.mlir.count("cofactor.qnode") == 2  # (params) and (constant 0.25): two


def test_lightning_device_runs_on_cofactor():
    pytest.importorskip("pennylane_lightning")
    dev = qml.device("lightning.qubit", wires=1)

    @qjit
    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.PauliZ(0))

    assert circuit(0.3) == pytest.approx(np.cos(0.3))


def test_unsupported_device_is_a_compile_error():
    dev = qml.device("default.mixed", wires=1)

    @qjit
    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.PauliZ(0))

    with pytest.raises(CompileError, match="default.mixed"):
        circuit(0.3)


def test_wire_labels_map_to_indices():
    dev = qml.device("default.qubit", wires=["a", "b"])

    @qjit
    @qml.qnode(dev)
    def circuit(x):
        qml.RX(x, "b")
        return qml.expval(qml.PauliZ("b")), qml.probs(wires=["a"])

    z, p = circuit(0.5)
    assert z == pytest.approx(np.cos(0.5))
    _close(p, [1.0, 0.0])


def test_runtime_errors_become_exceptions():
    @qjit
    @qml.qnode(dev2)
    def circuit(w):
        qml.PauliX(wires=w)
        return qml.expval(qml.PauliZ(0))

    assert circuit(0) == pytest.approx(-1.0)
    with pytest.raises(RuntimeExecutionError):
        circuit(5)
    assert circuit(1) == pytest.approx(1.0)  # the error slot was cleared


def test_cofactor_adjoint_and_ctrl():
    def body(x):
        qml.RX(x, 0)
        qml.RY(x / 2, 0)

    @qjit
    @qml.qnode(dev2)
    def circuit(x):
        qml.Hadamard(1)
        cofactor.ctrl(body, control=1)(x)
        cofactor.adjoint(body)(x)
        return qml.state()

    @qml.qnode(dev2)
    def reference(x):
        qml.Hadamard(1)
        qml.ctrl(body, control=1)(x)
        qml.adjoint(body)(x)
        return qml.state()

    _close(circuit(0.8), reference(0.8))


def test_qnode_capturing_traced_values_by_closure():
    @qjit
    def hybrid(x):
        y = x * 2

        @qml.qnode(dev1)
        def circuit():
            qml.RX(y, 0)
            return qml.expval(qml.PauliZ(0))

        return circuit() + y

    assert hybrid(0.3) == pytest.approx(np.cos(0.6) + 0.6)


@pytest.mark.filterwarnings("ignore:Setting shots on device")
def test_device_shots_and_aot_qnode():
    dev = qml.device("default.qubit", wires=1, shots=50)

    @qjit(seed=1)
    @qml.qnode(dev)
    def circuit(x: float):
        qml.RX(x, 0)
        return qml.sample(wires=0)

    assert circuit.compile_count == 1
    assert (circuit(np.pi) == 1).all() and circuit(np.pi).shape == (50, 1)


TEMPLATE_CASES = {
    "AmplitudeEmbedding": (
        lambda f: (qml.AmplitudeEmbedding(f, wires=range(3), normalize=True), qml.probs())[1],
        (np.array([0.1, 0.5, 0.2, 0.9, 0.3, 0.3, 0.7, 0.4]),),
    ),
    "StatePrep": (
        lambda f: (qml.StatePrep(f / np.linalg.norm(f), wires=range(3)), qml.state())[1],
        (np.array([0.1, 0.5, 0.2, 0.9, 0.3, 0.3, 0.7, 0.4]),),
    ),
    "IQPEmbedding": (
        lambda f: (qml.IQPEmbedding(f, wires=range(3)), qml.state())[1],
        (np.array([0.3, 0.8, -0.2]),),
    ),
    "QAOAEmbedding": (
        lambda f, w: (qml.QAOAEmbedding(f, w, wires=range(3)), qml.expval(qml.Z(0)))[1],
        (np.array([0.3, 0.8, -0.2]), np.linspace(0.1, 1.2, 12).reshape(2, 6)),
    ),
    "ApproxTimeEvolution": (
        lambda t: (
            qml.ApproxTimeEvolution(
                qml.Hamiltonian([0.5, 0.2], [qml.X(0), qml.Z(0) @ qml.Z(1)]), t, 2
            ),
            qml.state(),
        )[1],
        (0.7,),
    ),
    "Projector": (
        lambda a: (qml.RX(a, 0), qml.expval(qml.Projector([1], wires=0)))[1],
        (0.4,),
    ),
}


@pytest.mark.parametrize("name", list(TEMPLATE_CASES))
def test_templates_and_state_preparation(name):
    fn, args = TEMPLATE_CASES[name]
    dev3 = qml.device("default.qubit", wires=3)
    _close(qjit(qml.qnode(dev3)(fn))(*args), qml.qnode(dev3)(fn)(*args))


def test_debug_print_inside_a_circuit_loop(capfd):
    @qjit
    @qml.qnode(dev1)
    def circuit(n):
        @for_loop(0, n, 1)
        def body(i):
            qml.PauliX(0)
            cofactor.debug.print("step", i, measure(0))

        body()
        return qml.expval(qml.PauliZ(0))

    circuit(3)
    assert capfd.readouterr().out == "step 0 True\nstep 1 False\nstep 2 True\n"


def test_qnode_called_in_classical_loop_and_branch():
    @qml.qnode(dev1)
    def circuit(x):
        qml.RX(x, 0)
        return qml.expval(qml.PauliZ(0)), qml.probs(wires=0)

    @qjit
    def hybrid(n, x):
        @for_loop(0, n, 1)
        def body(i, acc):
            e, p = circuit(x * i)
            return acc + e + p[1]

        total = body(0.0)
        return cond(total > 1)(lambda: circuit(total)[0]).otherwise(lambda: -1.0)()

    total = sum(np.cos(0.3 * i) + np.sin(0.3 * i / 2) ** 2 for i in range(4))
    assert hybrid(4, 0.3) == pytest.approx(np.cos(total), abs=1e-12)
    assert hybrid(0, 0.3) == -1.0
    assert hybrid.mlir.count("attributes {cofactor.qnode") == 1  # one function, two calls


def test_repeat_until_success_loop():
    @qjit(seed=5)
    @qml.qnode(dev1)
    def circuit():
        @while_loop(lambda outcome, tries: outcome == False)  # noqa: E712
        def attempt(outcome, tries):
            qml.Hadamard(0)
            return measure(0, reset=True), tries + 1

        outcome, tries = attempt(False, 0)
        return outcome, tries

    outcome, tries = circuit()
    assert bool(outcome) and tries >= 1
