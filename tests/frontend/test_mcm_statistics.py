"""Statistics of mid-circuit measurement values and the QNode's mcm_method, compared with
uncompiled PennyLane (default.qubit) and Catalyst's documented semantics."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import CompileError
from cofactor.tracing.mcm import MCMConfigError

pytestmark = pytest.mark.needs_toolchain

SHOTS = 8000
TOL = 0.04  # about 5 standard deviations of a frequency estimated from 8000 shots


def _jit(f):
    return qml.qjit(f, compiler="cofactor")


def _stats(dev_kwargs, qnode_kwargs):
    @qml.qnode(qml.device("default.qubit", **dev_kwargs), **qnode_kwargs)
    def circuit(x, y):
        qml.RX(x, 0)
        m0 = qml.measure(0)
        qml.RX(y, 1)
        m1 = qml.measure(1)
        return (
            qml.expval(m0),
            qml.var(m1),
            qml.probs(op=m0),
            qml.probs(op=[m0, m1]),
            qml.expval(m0 + 2 * m1),
        )

    return circuit


# --- analytic: single-branch statistics (Catalyst's default without shots) -------------------
@pytest.mark.parametrize("x, y", [(np.pi, 0.0), (0.0, np.pi), (np.pi, np.pi)])
def test_deterministic_branches_match_pennylane(x, y):
    circuit = _stats({"wires": 4}, {})
    got = _jit(circuit)(x, y)
    expected = circuit(x, y)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)


def test_single_branch_statistics_are_those_of_the_sampled_branch():
    circuit = _stats({"wires": 2}, {})
    f = _jit(circuit)
    seen = set()
    for _ in range(20):
        e0, v1, p0, p01, e_sum = f(np.pi / 2, np.pi / 2)
        m0 = int(e0)
        assert e0 in (0.0, 1.0) and v1 == 0.0
        np.testing.assert_array_equal(p0, np.eye(2)[m0])
        m1 = int(np.argmax(p01)) % 2
        np.testing.assert_array_equal(p01, np.eye(4)[2 * m0 + m1])
        assert e_sum == m0 + 2 * m1
        seen.add((m0, m1))
    assert len(seen) > 1  # the branch is sampled, not fixed


def test_measurement_values_add_as_pennylane_counts_them():
    # PennyLane's measurement values are 0/1 numbers: m0 + m1 is 2 when both are 1 (numpy's
    # bool + bool would be a logical or, and the expectation 0.75 instead of 1)
    def circuit():
        qml.Hadamard(0)
        qml.Hadamard(1)
        m0 = qml.measure(0)
        m1 = qml.measure(1)
        return qml.expval(m0 + m1), qml.var(m0 * 1 + m1 - m0), qml.expval(m0 | m1)

    dev = qml.device("default.qubit", wires=2)
    qnode = qml.set_shots(qml.QNode(circuit, dev, mcm_method="one-shot"), SHOTS)
    got = qml.qjit(qnode, compiler="cofactor", seed=5)()
    np.testing.assert_allclose(got, [1.0, 0.25, 0.75], atol=TOL)
    np.testing.assert_allclose(qnode(), [1.0, 0.25, 0.75], atol=TOL)

    @_jit
    @qml.qnode(qml.device("default.qubit", wires=1))
    def both_ones():
        qml.X(0)
        m = qml.measure(0)
        return m + m, m * 3 - True, m & m

    assert [int(v) for v in both_ones()] == [2, 2, 1]


def test_statistics_and_the_state_after_the_measurement_agree():
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit(x):
        qml.RX(x, 0)
        m = qml.measure(0)
        return qml.expval(m), qml.expval(qml.Z(0))

    f = _jit(circuit)
    for _ in range(10):
        em, ez = f(1.1)
        assert ez == pytest.approx(1 - 2 * em)


@pytest.mark.parametrize("kind", ["sample", "counts"])
def test_sample_and_counts_need_shots(kind):
    @qml.qnode(qml.device("default.qubit", wires=1))
    def circuit():
        return getattr(qml, kind)(qml.measure(0))

    with pytest.raises(CompileError, match=f"qml.{kind} needs shots"):
        _jit(circuit)()


def test_probs_of_arithmetic_is_refused_as_in_pennylane():
    @qml.qnode(qml.device("default.qubit", wires=2))
    def circuit():
        m0, m1 = qml.measure(0), qml.measure(1)
        return qml.probs(op=m0 + 2 * m1)

    with pytest.raises(CompileError, match="list of measurement values"):
        _jit(circuit)()


# --- one-shot: per-shot execution, statistics over the shots ------------------------------------
def test_one_shot_expval_and_probs_of_terminal_measurements():
    @qml.qnode(qml.device("default.qubit", wires=1), mcm_method="one-shot", shots=SHOTS)
    def circuit():
        qml.RX(np.pi / 4, 0)
        qml.measure(0)
        return qml.expval(qml.Z(0)), qml.probs([0]), qml.var(qml.Z(0))

    e, p, v = _jit(circuit)()
    c = np.cos(np.pi / 4)
    assert e == pytest.approx(c, abs=TOL)
    np.testing.assert_allclose(p, [(1 + c) / 2, (1 - c) / 2], atol=TOL)
    assert v == pytest.approx(1 - c**2, abs=TOL)
    assert p.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("method", ["one-shot", None])  # None: one-shot is the default
def test_one_shot_statistics_of_measurement_values_match_pennylane(method):
    kwargs = {"mcm_method": method} if method else {}
    x, y = 1.1, 2.0
    got = _jit(_stats({"wires": 2, "shots": SHOTS}, kwargs))(x, y)
    exact = _stats({"wires": 4}, {})(x, y)  # PennyLane, analytic (deferred measurements)
    for g, e in zip(got, exact, strict=True):
        np.testing.assert_allclose(g, e, atol=3 * TOL)


def test_one_shot_sample_and_counts_of_measurement_values():
    @qml.qnode(qml.device("default.qubit", wires=2), shots=SHOTS)
    def circuit(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        m0, m1 = qml.measure(0), qml.measure(1)
        return qml.sample(m0), qml.sample([m0, m1]), qml.counts(m1), qml.sample(wires=[1])

    s0, s01, (keys, counts), bits = _jit(circuit)(1.0)
    assert s0.shape == (SHOTS,) and s01.shape == (SHOTS, 2) and bits.shape == (SHOTS, 1)
    np.testing.assert_array_equal(s01[:, 0], s01[:, 1])  # CNOT: equal outcomes in each shot
    np.testing.assert_array_equal(s0, s01[:, 0])
    np.testing.assert_array_equal(bits[:, 0], s0)  # the state after each shot's measurement
    np.testing.assert_array_equal(keys, [0, 1])
    assert counts.sum() == SHOTS and counts[1] == s0.sum()
    assert s0.mean() == pytest.approx(np.sin(0.5) ** 2, abs=TOL)


@pytest.mark.parametrize("measure_f", [qml.expval, qml.probs, qml.counts])
def test_statistics_bound_before_the_trace_of_cofactor_measure(measure_f):
    """`measure_f` is PennyLane's own function (bound at import, as in PennyLane's test of
    Catalyst's one-shot), applied to what cofactor.measure returns."""
    import cofactor

    x, y = 1.1, 0.5

    @qml.qnode(qml.device("lightning.qubit", wires=2), mcm_method="one-shot", shots=SHOTS)
    def circuit(x, y):
        qml.RX(x, 0)
        m0 = cofactor.measure(0)
        cofactor.cond(m0 == 1)(lambda: qml.RY(y, 1))()
        kwargs = {"all_outcomes": True} if measure_f is qml.counts else {}
        return measure_f(op=m0, **kwargs)

    got = _jit(circuit)(x, y)
    p1 = np.sin(x / 2) ** 2
    if measure_f is qml.expval:
        assert got == pytest.approx(p1, abs=TOL)
    elif measure_f is qml.probs:
        np.testing.assert_allclose(got, [1 - p1, p1], atol=TOL)
    else:
        keys, counts = got
        np.testing.assert_array_equal(keys, [0, 1])
        assert counts.sum() == SHOTS
        assert counts[1] / SHOTS == pytest.approx(p1, abs=TOL)


def test_one_shot_stacks_non_measurement_returns():
    # Catalyst's one-shot: a value computed in each shot comes back stacked over the shots
    @qml.qnode(qml.device("default.qubit", wires=1), mcm_method="one-shot", shots=10)
    def circuit():
        qml.PauliX(0)
        return qml.measure(0)

    outcomes = _jit(circuit)()
    assert outcomes.shape == (10,) and outcomes.all()


# --- mcm_method resolution as in Catalyst ---------------------------------------------------------
def test_deferred_is_refused_as_in_catalyst():
    circuit = _stats({"wires": 2}, {"mcm_method": "deferred"})
    with pytest.raises(MCMConfigError, match="deferred"):
        _jit(circuit)(0.1, 0.2)
    with pytest.raises(ValueError):
        _jit(circuit)(0.1, 0.2)


def test_one_shot_needs_shots():
    circuit = _stats({"wires": 2}, {"mcm_method": "one-shot"})
    with pytest.raises(MCMConfigError, match="analytic"):
        _jit(circuit)(0.1, 0.2)


def test_one_shot_refuses_what_it_cannot_gather_as_not_implemented():
    # Catalyst's exception type (NotImplementedError), and a CompileError as every refusal
    @qml.set_shots(10)
    @qml.qnode(qml.device("lightning.qubit", wires=1), mcm_method="one-shot")
    def circuit(x):
        qml.RX(x, 0)
        qml.measure(0)
        return qml.classical_shadow(wires=[0])

    with pytest.raises(NotImplementedError, match="not compatible with the chosen or default"):
        _jit(circuit)(0.3)
    with pytest.raises(CompileError, match="expval, var, probs, sample or counts"):
        _jit(circuit)(0.3)


def test_single_branch_statistics_with_shots():
    @qml.qnode(
        qml.device("default.qubit", wires=1), mcm_method="single-branch-statistics", shots=50
    )
    def circuit():
        qml.Hadamard(0)
        m = qml.measure(0)
        return qml.expval(m), qml.sample(m), qml.counts(m)

    e, s, (_, counts) = _jit(circuit)()
    assert e in (0.0, 1.0)
    np.testing.assert_array_equal(s, np.full(50, int(e)))
    np.testing.assert_array_equal(counts, [50 * (1 - int(e)), 50 * int(e)])


# --- probs under shots is sampled -----------------------------------------------------------------
def test_probs_under_shots_is_sampled_like_expval():
    @qml.qnode(qml.device("default.qubit", wires=1), shots=100)
    def circuit(x):
        qml.RX(x, 0)
        return qml.probs(wires=[0])

    p = _jit(circuit)(1.0)
    assert p.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(p * 100, np.round(p * 100), atol=1e-9)  # frequencies
    exact = np.array([np.cos(0.5) ** 2, np.sin(0.5) ** 2])
    assert not np.allclose(p, exact, atol=1e-6)
    np.testing.assert_allclose(p, exact, atol=0.2)


def test_one_shot_with_a_seed_repeats_and_its_shots_differ():
    import cofactor

    @qml.qnode(qml.device("default.qubit", wires=1), mcm_method="one-shot", shots=500)
    def circuit():
        qml.Hadamard(0)
        m = qml.measure(0)
        return qml.sample(m)

    first = cofactor.qjit(circuit, seed=7)()
    assert 0.35 < first.mean() < 0.65  # the shots are not one repeated outcome
    np.testing.assert_array_equal(cofactor.qjit(circuit, seed=7)(), first)
    assert not np.array_equal(cofactor.qjit(circuit, seed=8)(), first)


def test_one_shot_circuit_inside_a_larger_program():
    import cofactor

    @qml.qnode(qml.device("default.qubit", wires=2), shots=SHOTS)
    def circuit(x):
        qml.RY(x, 0)
        m = qml.measure(0)
        qml.cond(m, qml.X)(1)
        return qml.expval(qml.Z(1)), qml.expval(m)

    @cofactor.qjit
    def program(x):
        z, p = circuit(2 * x)
        return z + 2 * p

    # E[Z1] = 1 - 2 p, so the sum is 1 exactly in each run
    assert program(0.6) == pytest.approx(1.0)
    z, p = _jit(circuit)(1.2)
    assert p == pytest.approx(np.sin(0.6) ** 2, abs=TOL)


def test_one_shot_ir_does_not_grow_with_the_shot_count():
    import cofactor

    def program(shots):
        @qml.qnode(qml.device("default.qubit", wires=2), mcm_method="one-shot", shots=shots)
        def circuit(x):
            qml.RX(x, 0)
            m = qml.measure(0)
            return qml.expval(qml.Z(0)), qml.probs(wires=[0, 1]), qml.sample(m)

        f = cofactor.qjit(circuit)
        f(0.3)
        return f.mlir

    small, large = program(10), program(20000)
    assert len(large.splitlines()) == len(small.splitlines())
    assert "20000" in large and "scf.for" in large


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mcm_method": "single-branch-statistics", "postselect_mode": "hw-like"}, "hw-like"),
        ({"mcm_method": "tree-traversal"}, "tree-traversal"),
    ],
)
def test_other_mcm_configurations_are_refused(kwargs, match):
    circuit = _stats({"wires": 2, "shots": 10}, kwargs)
    with pytest.raises(MCMConfigError, match=match):
        _jit(circuit)(0.1, 0.2)


def test_parameter_broadcasting_is_refused_with_the_fix():
    # PennyLane broadcasts RX over a batch of angles; cofactor refuses it (ValueError, as
    # Catalyst under one-shot) and names vmap
    @qml.set_shots(10)
    @qml.qnode(qml.device("lightning.qubit", wires=1), mcm_method="one-shot")
    def circuit(x):
        qml.RX(x, wires=0)
        qml.measure(0)
        return qml.probs(wires=0)

    with pytest.raises(ValueError, match="parameter broadcasting .* cofactor.vmap"):
        _jit(circuit)(np.array([0.1, 0.2]))
