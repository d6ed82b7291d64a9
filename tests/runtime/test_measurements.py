"""expval / var / probs / state / sample / counts and mid-circuit measurements against
PennyLane's default.qubit, and the statistics of sampling."""

from __future__ import annotations

import math

import numpy as np
import pennylane as qml
import pytest

TOL = 1e-10
# Every statistical assertion below fails by chance with probability < DELTA.
DELTA = 1e-7


def random_state(rng, n):
    psi = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
    return psi / np.linalg.norm(psi)


def random_hermitian(rng, dim):
    a = rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim))
    return (a + a.conj().T) / 2


def pl_measure(n, psi, measurement, *args, **kwargs):
    """measurement(*args, **kwargs) of |psi> on default.qubit."""

    @qml.qnode(qml.device("default.qubit", wires=n))
    def circuit():
        qml.StatePrep(psi, wires=range(n))
        return measurement(*args, **kwargs)

    return circuit()


def _observables(rt, rng):
    """(runtime handle, PennyLane observable) pairs on 4 qubits."""
    h1, h2 = random_hermitian(rng, 2), random_hermitian(rng, 4)
    cases = []
    for kind, pl in [
        ("Identity", qml.Identity),
        ("PauliX", qml.X),
        ("PauliY", qml.Y),
        ("PauliZ", qml.Z),
        ("Hadamard", qml.Hadamard),
    ]:
        cases.append((rt.named(kind, 2), pl(2)))
    cases.append((rt.hermitian(h1, [3]), qml.Hermitian(h1, wires=[3])))
    cases.append((rt.hermitian(h2, [2, 0]), qml.Hermitian(h2, wires=[2, 0])))
    xyz = rt.tensor([rt.named("PauliX", 0), rt.named("PauliY", 3), rt.named("PauliZ", 1)])
    cases.append((xyz, qml.X(0) @ qml.Y(3) @ qml.Z(1)))
    herm_h = rt.tensor([rt.hermitian(h2, [1, 3]), rt.named("Hadamard", 0)])
    cases.append((herm_h, qml.Hermitian(h2, wires=[1, 3]) @ qml.Hadamard(0)))
    ham = rt.hamiltonian([0.5, -1.25, 2.0], [xyz, rt.named("PauliZ", 2), herm_h])
    pl_ham = qml.Hamiltonian(
        [0.5, -1.25, 2.0],
        [
            qml.X(0) @ qml.Y(3) @ qml.Z(1),
            qml.Z(2),
            qml.Hermitian(h2, wires=[1, 3]) @ qml.Hadamard(0),
        ],
    )
    cases.append((ham, pl_ham))
    # a term that is not a Pauli word first, then Pauli words (applied in one pass each)
    ham2 = rt.hamiltonian([-0.75, 1.5, 0.25], [herm_h, xyz, rt.named("PauliY", 2)])
    pl_ham2 = qml.Hamiltonian(
        [-0.75, 1.5, 0.25],
        [
            qml.Hermitian(h2, wires=[1, 3]) @ qml.Hadamard(0),
            qml.X(0) @ qml.Y(3) @ qml.Z(1),
            qml.Y(2),
        ],
    )
    cases.append((ham2, pl_ham2))
    # a tensor product of sums distributes: (Z0 + 2 X1) @ Y2
    sum_ = rt.hamiltonian([1.0, 2.0], [rt.named("PauliZ", 0), rt.named("PauliX", 1)])
    cases.append((rt.tensor([sum_, rt.named("PauliY", 2)]), (qml.Z(0) + 2 * qml.X(1)) @ qml.Y(2)))
    return cases


def test_expval_and_var(rt, rng):
    n = 4
    for _ in range(3):
        psi = random_state(rng, n)
        rt.acquire(n)
        rt.set_state(psi)
        for handle, obs in _observables(rt, rng):
            np.testing.assert_allclose(
                rt.expval(handle),
                pl_measure(n, psi, qml.expval, obs),
                atol=TOL,
                err_msg=str(obs),
            )
            np.testing.assert_allclose(
                rt.var(handle), pl_measure(n, psi, qml.var, obs), atol=TOL, err_msg=str(obs)
            )


@pytest.mark.parametrize("wires", [(), (0, 1, 2, 3), (2,), (3, 0), (1, 3, 2), (3, 2, 1, 0)])
def test_probs(rt, rng, wires):
    n = 4
    psi = random_state(rng, n)
    rt.acquire(n)
    rt.set_state(psi)
    expected = pl_measure(n, psi, qml.probs, wires=list(wires) or None)
    np.testing.assert_allclose(rt.probs(wires), expected, atol=TOL)


def test_probs_parallel_path(rt, rng):
    n = 16  # above the OpenMP threshold: per-thread partial sums
    psi = random_state(rng, n)
    rt.acquire(n)
    rt.set_state(psi)
    p = (np.abs(psi) ** 2).reshape([2] * n)
    marginal = p.sum(axis=tuple(w for w in range(n) if w not in (1, 5, 12)))  # axes 1, 5, 12
    np.testing.assert_allclose(rt.probs([5, 1, 12]), marginal.transpose(1, 0, 2).ravel(), atol=TOL)
    np.testing.assert_allclose(rt.probs(), p.ravel(), atol=TOL)


def test_state(rt, rng):
    rt.acquire(3)
    rt.gate("Hadamard", wires=[0])
    rt.gate("CNOT", wires=[0, 2])
    expected = np.zeros(8, dtype=complex)
    expected[0] = expected[5] = 1 / np.sqrt(2)
    np.testing.assert_allclose(rt.state(), expected, atol=TOL)


# ---- sampling -------------------------------------------------------------------------------
def hoeffding(shots, outcomes=1, value_range=1.0):
    """Deviation of an empirical mean that is exceeded with probability < DELTA, union-bounded
    over `outcomes` simultaneous means (Hoeffding: P(|mean - mu| >= t) <= 2 exp(-2 N t^2 / r^2))."""
    return value_range * math.sqrt(math.log(2 * outcomes / DELTA) / (2 * shots))


def _prepare(rt, rng, n, shots, seed):
    psi = random_state(rng, n)
    rt.acquire(n, shots=shots, seed=seed)
    rt.set_state(psi)
    return psi


def test_counts_statistics(rt, rng):
    n, shots = 3, 20000
    psi = _prepare(rt, rng, n, shots, seed=7)
    for wires in [(), (2, 0)]:
        counts = rt.counts(wires)
        assert counts.sum() == shots
        exact = rt.probs(wires)
        assert np.max(np.abs(counts / shots - exact)) < hoeffding(shots, len(exact))
    assert psi is not None


def test_samples_statistics_and_layout(rt, rng):
    n, shots = 3, 20000
    _prepare(rt, rng, n, shots, seed=11)
    samples = rt.sample([1, 2])
    assert samples.shape == (shots, 2) and set(np.unique(samples)) <= {0, 1}
    outcomes = samples[:, 0] * 2 + samples[:, 1]
    freq = np.bincount(outcomes, minlength=4) / shots
    assert np.max(np.abs(freq - rt.probs([1, 2]))) < hoeffding(shots, 4)
    # shots are i.i.d. in draw order, not sorted by outcome
    assert np.any(np.diff(outcomes) < 0)


def test_same_seed_same_samples(rt, rng):
    psi = random_state(rng, 4)

    def draw(seed):
        rt.acquire(4, shots=500, seed=seed)
        rt.set_state(psi)
        return rt.sample(), rt.counts([3, 1])

    s1, c1 = draw(42)
    s2, c2 = draw(42)
    s3, _ = draw(43)
    np.testing.assert_array_equal(s1, s2)
    np.testing.assert_array_equal(c1, c2)
    assert not np.array_equal(s1, s3)


def test_sampled_expval_and_var(rt, rng):
    n, shots = 3, 20000
    psi = random_state(rng, n)
    rt.acquire(n)
    rt.set_state(psi)
    obs = [
        rt.named("PauliX", 0),
        rt.named("PauliY", 1),
        rt.named("Hadamard", 2),
        rt.tensor([rt.named("PauliY", 0), rt.named("PauliZ", 2)]),
    ]
    exact_e = [rt.expval(o) for o in obs]
    exact_v = [rt.var(o) for o in obs]
    rt.acquire(n, shots=shots, seed=3)
    rt.set_state(psi)
    obs = [
        rt.named("PauliX", 0),
        rt.named("PauliY", 1),
        rt.named("Hadamard", 2),
        rt.tensor([rt.named("PauliY", 0), rt.named("PauliZ", 2)]),
    ]
    for o, e, v in zip(obs, exact_e, exact_v, strict=True):
        sampled = rt.expval(o)
        assert sampled != e  # really sampled
        assert abs(sampled - e) < hoeffding(shots, 2 * len(obs), value_range=2.0)
        # var = 1 - mean^2 for +-1 eigenvalues; |d var| <= 2 |d mean|
        assert abs(rt.var(o) - v) < 2 * hoeffding(shots, 2 * len(obs), value_range=2.0)
    # Hamiltonian: sum of independently sampled terms
    ham = rt.hamiltonian([0.5, -2.0], obs[:2])
    assert abs(rt.expval(ham) - (0.5 * exact_e[0] - 2.0 * exact_e[1])) < 2.5 * hoeffding(
        shots, 2, value_range=2.0
    )


# ---- mid-circuit measurement ------------------------------------------------------------------
def test_measure_collapses(rt):
    rt.acquire(2, seed=5)
    rt.gate("Hadamard", wires=[0])
    rt.gate("CNOT", wires=[0, 1])
    m = rt.measure(0)
    expected = np.zeros(4, dtype=complex)
    expected[3 * m] = 1
    np.testing.assert_allclose(rt.state(), expected, atol=TOL)


def test_measure_reset_and_postselect(rt):
    rt.acquire(2)
    rt.gate("Hadamard", wires=[0])
    rt.gate("CNOT", wires=[0, 1])
    assert rt.measure(0, reset=True, postselect=1) == 1
    np.testing.assert_allclose(rt.state(), [0, 1, 0, 0], atol=TOL)  # |0>|1>: wire 0 reset
    rt.gate("RY", [1.0], wires=[0])
    assert rt.measure(0, postselect=0) == 0
    np.testing.assert_allclose(rt.state(), [0, 1, 0, 0], atol=TOL)


def test_measure_statistics(rt):
    shots = 4000
    p1 = math.sin(0.6) ** 2  # RY(1.2)|0>
    rt.acquire(1, seed=99)
    ones = 0
    for _ in range(shots):
        rt.gate("RY", [1.2], wires=[0])
        ones += rt.measure(0, reset=True)
    assert abs(ones / shots - p1) < hoeffding(shots)


def test_postselect_zero_probability_is_an_error(rt):
    rt.acquire(2)
    rt.gate("Hadamard", wires=[1])
    rt.gate("Hadamard", wires=[1])  # back to |0>, up to rounding
    rt.lib.cf_rt_measure(1, 0, 1)
    code, message = rt.error()
    assert code == 4 and "postselecting outcome 1" in message
    rt.clear()
    assert np.all(np.isfinite(rt.state()))


def test_mcm_matches_default_qubit_postselection(rt, rng):
    n = 3
    ops = [("RX", [0.4], [0]), ("CRY", [1.1], [0, 1]), ("IsingXX", [0.3], [1, 2])]
    rt.acquire(n)
    for name, p, w in ops:
        rt.gate(name, p, w)
    rt.measure(1, postselect=1)
    rt.gate("Hadamard", wires=[2])
    ours = rt.probs()

    @qml.qnode(qml.device("default.qubit", wires=n + 1))  # + 1: deferred measurement
    def circuit():
        for name, p, w in ops:
            getattr(qml, name)(*p, wires=w)
        qml.measure(1, postselect=1)
        qml.Hadamard(2)
        return qml.probs(wires=range(n))

    np.testing.assert_allclose(ours, circuit(), atol=TOL)


def test_sampled_hermitian_uses_eigendecomposition(rt, rng):
    n, shots = 3, 20000
    psi = random_state(rng, n)
    h2, h1 = random_hermitian(rng, 4), random_hermitian(rng, 2)

    def observables():
        return [rt.hermitian(h2, [2, 0]), rt.tensor([rt.hermitian(h1, [1]), rt.named("PauliX", 0)])]

    rt.acquire(n)
    rt.set_state(psi)
    exact = [(rt.expval(o), rt.var(o)) for o in observables()]
    rt.acquire(n, shots=shots, seed=21)
    rt.set_state(psi)
    # the largest |eigenvalue| M of each observable (the tensor's are +-eigenvalues of h1)
    largest = [np.max(np.abs(np.linalg.eigvalsh(h))) for h in (h2, h1)]
    for o, (e, v), m in zip(observables(), exact, largest, strict=True):
        sampled = rt.expval(o)
        assert sampled != e
        bound = hoeffding(shots, 4, value_range=2 * m)
        assert abs(sampled - e) < bound
        # var = E[x^2] - E[x]^2 with x^2 in [0, M^2] and |mean^2 - e^2| <= 2 M |mean - e|
        assert abs(rt.var(o) - v) < hoeffding(shots, 4, value_range=m**2) + 2 * m * bound


def test_sampled_hermitian_on_an_eigenstate_is_exact(rt, rng):
    """In an eigenstate every shot gives the same eigenvalue: checks the runtime's
    eigendecomposition (and its degenerate-free rotation) to rounding, not statistically."""
    h = random_hermitian(rng, 8)
    evals, evecs = np.linalg.eigh(h)
    for j in (0, 5):
        rt.acquire(3, shots=100, seed=j)
        rt.set_state(evecs[:, j])
        o = rt.hermitian(h, [0, 1, 2])
        assert rt.expval(o) == pytest.approx(evals[j], abs=1e-9)
        assert rt.var(o) == pytest.approx(0, abs=1e-9)
