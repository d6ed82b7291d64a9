"""Hamiltonians and operator arithmetic in measurements, exponentials of Pauli sums in the
circuit (qml.exp, qml.evolve, TrotterProduct, phase estimation of a Trotterised Hamiltonian
with run-time coefficients) and decompositions that PennyLane routes through JAX when a
compiler is active: values and gradients against uncompiled PennyLane (default.qubit)."""

from __future__ import annotations

import sys

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor
from cofactor import CompileError, qjit

pytestmark = pytest.mark.needs_toolchain

dev3 = qml.device("default.qubit", wires=3)
dev5 = qml.device("default.qubit", wires=5)


def _h2_hamiltonian() -> qml.operation.Operator:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "examples"))
    try:
        import vqe_h2
    finally:
        sys.path.pop(0)
    return vqe_h2.hamiltonian()


# ----------------------------------------------------------------------------------------
# observables: expval, var and the gradient of the expval against PennyLane
# ----------------------------------------------------------------------------------------
_M = np.array([[1, 2j], [-2j, 0]])
OBSERVABLES = {
    "identity_term": lambda: 0.5 * qml.I(0) + qml.Z(0),
    "identity_two_wires": lambda: qml.I([0, 1]) + qml.Z(2),
    "identity_in_hamiltonian": lambda: qml.Hamiltonian(
        [0.3, -0.2, 0.5], [qml.I(0), qml.Z(0) @ qml.I(1), qml.X(1) @ qml.Z(2)]
    ),
    "z_z_same_wire": lambda: qml.Z(0) @ qml.Z(0) + 0.5 * qml.X(1),
    "x_y_plus_y_x_same_wire": lambda: (
        qml.prod(qml.X(0), qml.Y(0)) + qml.prod(qml.Y(0), qml.X(0)) + qml.Z(1)
    ),
    "i_times_x_y_is_minus_z": lambda: 1j * (qml.X(0) @ qml.Y(0)) + 0.2 * qml.Y(1),
    "s_prod": lambda: qml.s_prod(2.0, qml.X(1)),
    "sum": lambda: qml.sum(qml.X(1), qml.Z(0), qml.I(2)),
    "prod": lambda: qml.prod(qml.X(1), qml.Z(0)),
    "nested": lambda: qml.sum(
        qml.prod(qml.X(0), qml.sum(qml.Z(1), 0.5 * qml.I(2))),
        qml.s_prod(0.3, qml.prod(qml.Y(1), qml.Z(2))),
        qml.prod(qml.Z(0), qml.Z(0), qml.X(2)),
    ),
    "hermitian_in_sum": lambda: 0.3 * qml.Hermitian(_M, wires=1) + qml.Z(0),
    "hermitian_squared_same_wire": lambda: qml.Hermitian(_M, 0) @ qml.Hermitian(_M, 0),
    "projector_in_sum": lambda: qml.Projector([1], wires=0) + 0.5 * qml.Z(1),
    "sum_of_sums": lambda: (qml.Z(0) + qml.X(1)) + 0.5 * (qml.Y(2) + qml.I(0)),
    "product_of_sums_same_wires": lambda: (qml.Z(0) + qml.X(0)) @ (qml.Z(0) + qml.X(0)) + qml.Y(1),
    "dot": lambda: qml.dot([0.1, 0.2, -0.4], [qml.Z(0), qml.X(1) @ qml.Z(0), qml.I(2)]),
}


def _circuit(obs_fn, measure=qml.expval):
    @qml.qnode(dev3)
    def circuit(x):
        qml.RY(x, wires=0)
        qml.RX(0.3 * x, wires=1)
        qml.CNOT([0, 1])
        qml.RY(0.7, wires=2)
        qml.CRX(x, wires=[1, 2])
        return measure(obs_fn())

    return circuit


@pytest.mark.parametrize("name", sorted(OBSERVABLES))
def test_observable_expval_var_and_grad_match_pennylane(name):
    obs_fn = OBSERVABLES[name]
    expval, var = _circuit(obs_fn), _circuit(obs_fn, qml.var)
    x = 0.4

    @qjit
    def compiled(x):
        return expval(x), var(x), cofactor.grad(expval)(x)

    value, variance, gradient = compiled(x)
    np.testing.assert_allclose(value, np.real(expval(x)), atol=1e-12)
    np.testing.assert_allclose(variance, np.real(var(x)), atol=1e-12)
    # PennyLane's result is complex for some of these (Z(0) @ Z(0) has the coefficient 1+0j),
    # and qml.grad refuses complex outputs: differentiate its real part
    reference = qml.grad(lambda x: qml.math.real(expval(x)))(pnp.array(x, requires_grad=True))
    np.testing.assert_allclose(gradient, reference, atol=1e-10)


def test_h2_hamiltonian_from_qchem_terms():
    """The qchem H2 Hamiltonian (an Identity term among 15 Pauli words), as in the VQE demo."""
    H = _h2_hamiltonian()
    dev = qml.device("default.qubit", wires=4)

    @qml.qnode(dev)
    def energy(params):
        qml.BasisState(np.array([1, 1, 0, 0]), wires=range(4))
        qml.DoubleExcitation(params[0], wires=[0, 1, 2, 3])
        qml.SingleExcitation(params[1], wires=[0, 2])
        return qml.expval(H)

    params = np.array([0.2, -0.1])
    value, gradient = qjit(cofactor.value_and_grad(energy))(params)
    np.testing.assert_allclose(value, energy(params), atol=1e-12)
    np.testing.assert_allclose(
        gradient, qml.grad(energy)(pnp.array(params, requires_grad=True)), atol=1e-10
    )


def test_molecular_hamiltonian_from_qchem_if_available():
    """`qml.qchem.molecular_hamiltonian` works offline in PennyLane 0.45 (its own
    differentiable Hartree-Fock); its Hamiltonian compiles as it is."""
    symbols = ["H", "H"]
    geometry = np.array([0.0, 0.0, -0.6614, 0.0, 0.0, 0.6614])
    H, n = qml.qchem.molecular_hamiltonian(symbols, geometry)
    dev = qml.device("default.qubit", wires=n)

    @qml.qnode(dev)
    def energy(theta):
        qml.BasisState(np.array([1, 1, 0, 0]), wires=range(n))
        qml.DoubleExcitation(theta, wires=[0, 1, 2, 3])
        return qml.expval(H)

    np.testing.assert_allclose(qjit(energy)(0.2), energy(0.2), atol=1e-12)


def test_dot_with_traced_coefficients_runs_forward_and_differentiates():
    @qml.qnode(dev3)
    def circuit(x, c):
        qml.RY(x, wires=0)
        qml.CNOT([0, 1])
        # Z(0) @ Z(0) @ X(1) is X(1) (a product on the same wire)
        terms = [qml.Z(0), qml.X(0) @ qml.Z(1), qml.I(2), qml.Z(0) @ qml.Z(0) @ qml.X(1)]
        return qml.expval(qml.dot(c, terms))

    c = np.array([0.5, -0.25, 0.75, 0.1])
    np.testing.assert_allclose(qjit(circuit)(0.4, c), circuit(0.4, c), atol=1e-12)
    got = qjit(cofactor.grad(circuit, argnums=1))(0.4, c)
    # PennyLane's value is complex here (Z(0) @ Z(0) has the coefficient 1+0j)
    reference = qml.grad(lambda c: qml.math.real(circuit(0.4, c)))(pnp.array(c, requires_grad=True))
    np.testing.assert_allclose(got, reference, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda c: qml.Hamiltonian(c, [qml.Z(0), qml.Z(0), qml.I(1)]),
        lambda c: qml.dot(c, [qml.Z(0), qml.Z(0) @ qml.Z(0) @ qml.Z(0), qml.I(1)]),
        lambda c: c[0] * qml.Z(0) + c[1] * qml.Z(0) + c[2] * qml.I(1),
    ],
    ids=["hamiltonian", "dot", "sum_of_s_prods"],
)
def test_repeated_words_with_traced_coefficients(make):
    """PennyLane adds the coefficients of repeated words in place (`+=`) on traced values."""

    @qml.qnode(dev3)
    def circuit(x, c):
        qml.RY(x, 0)
        return qml.expval(make(c))

    c = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(qjit(circuit)(0.3, c), circuit(0.3, c), atol=1e-12)


def test_non_hermitian_product_has_a_complex_expectation_as_in_pennylane():
    """X(0) @ Y(0) = iZ(0): PennyLane returns a complex expectation value."""
    circuit = _circuit(lambda: qml.X(0) @ qml.Y(0))
    got = qjit(circuit)(0.4)
    np.testing.assert_allclose(got, circuit(0.4), atol=1e-12)
    assert np.iscomplexobj(got)
    with pytest.raises(CompileError, match="not Hermitian"):
        qjit(_circuit(lambda: qml.X(0) @ qml.Y(0), qml.var))(0.4)


def test_non_hermitian_matrix_product_is_refused():
    circuit = _circuit(lambda: qml.Hermitian(_M, 0) @ qml.Z(0))
    with pytest.raises(CompileError, match="is not Hermitian"):
        qjit(circuit)(0.4)


def test_non_hermitian_sum_expectation_is_the_analytic_one():
    """0.1 Z + 0.2 (X @ Z) = 0.1 Z - 0.2i Y: <psi|H|psi> (PennyLane 0.45's default.qubit
    returns about 0 here, which is not <psi|H|psi>; the analytic value is the reference)."""
    H = qml.dot([0.1, 0.2], [qml.Z(0), qml.X(0) @ qml.Z(0)])

    @qml.qnode(dev3)
    def circuit(x):
        qml.RY(x, wires=0)
        return qml.expval(H)

    psi = qml.matrix(qml.RY(0.4, 0))[:, 0]
    np.testing.assert_allclose(qjit(circuit)(0.4), psi.conj() @ qml.matrix(H) @ psi, atol=1e-12)


# ----------------------------------------------------------------------------------------
# exponentials in the circuit
# ----------------------------------------------------------------------------------------
COMMUTING = [qml.Z(0) @ qml.Z(1), qml.X(2), qml.Z(1), qml.I(0)]
NON_COMMUTING = [qml.X(0) @ qml.X(1), qml.Z(0), qml.Y(0) @ qml.Z(1) @ qml.X(2), qml.Z(1)]

CIRCUITS = {
    "exp_pauli_words": lambda x, c: (
        qml.exp(qml.X(0) @ qml.Y(1), 1j * c[0]),
        qml.exp(qml.Z(1), -0.5j * c[1] * x),
    ),
    "exp_s_prod": lambda x, c: qml.exp(qml.s_prod(c[0], qml.Y(0) @ qml.X(2)), 1j * x),
    "exp_commuting_sum": lambda x, c: qml.exp(qml.dot(c, COMMUTING), -1j * x),
    "evolve_commuting_sum": lambda x, c: qml.evolve(qml.dot(c, COMMUTING), x),
    "evolve_pauli_word": lambda x, c: qml.evolve(qml.s_prod(c[2], qml.X(0) @ qml.Y(2)), x),
    "trotter_order_2": lambda x, c: qml.TrotterProduct(
        qml.dot(c, NON_COMMUTING), time=x, n=2, order=2
    ),
    "trotter_order_4_with_identity": lambda x, c: qml.TrotterProduct(
        qml.dot(c, [*NON_COMMUTING[:3], qml.I(0)]), time=x, n=1, order=4
    ),
    "ctrl_exp": lambda x, c: (
        qml.Hadamard(3),
        qml.ctrl(qml.exp(qml.X(1) @ qml.Z(2), 1j * c[0] * x), control=3),
        qml.ctrl(qml.evolve(qml.dot(c[:2], COMMUTING[2:]), x), control=3, control_values=0),
    ),
    "adjoint_evolve": lambda x, c: qml.adjoint(qml.evolve(qml.dot(c, COMMUTING), x)),
    "pow_exp_fractional": lambda x, c: qml.pow(qml.exp(qml.X(0) @ qml.Z(1), 1j * c[0]), 0.5),
    "ctrl_trotter_two_controls": lambda x, c: (
        qml.Hadamard(4),
        qml.ctrl(
            qml.TrotterProduct(qml.dot(c[:3], NON_COMMUTING[:3]), x, n=2),
            control=[3, 4],
            control_values=[1, 0],
        ),
    ),
    "evolve_nested_s_prod": lambda x, c: qml.evolve(
        qml.s_prod(c[0], qml.s_prod(2.0, qml.prod(qml.X(0), qml.X(0), qml.Y(1)))), x
    ),
    "hamiltonian_evolve": lambda x, c: qml.evolve(
        qml.Hamiltonian(c[:3], [qml.Z(0), qml.Z(0) @ qml.Z(1), qml.I(2)]), x
    ),
    "approx_time_evolution": lambda x, c: qml.ApproxTimeEvolution(
        qml.dot(c[:2], [qml.X(0) @ qml.X(1), qml.Z(2)]), x, 2
    ),
    "commuting_evolution": lambda x, c: qml.CommutingEvolution(
        qml.dot(c[:2], [qml.X(0) @ qml.X(1), qml.Z(0) @ qml.Z(1)]), x
    ),
    "ctrl_pow_trotter": lambda x, c: (
        qml.Hadamard(3),
        qml.ctrl(qml.pow(qml.TrotterProduct(qml.dot(c, NON_COMMUTING), x, n=1), 2), 3),
    ),
}


def _exp_circuit(body):
    @qml.qnode(dev5)
    def circuit(x, c):
        qml.RY(x, wires=0)
        qml.Hadamard(1)
        qml.RX(0.7, wires=2)
        body(x, c)
        qml.Hadamard(3)
        return qml.expval(qml.Z(0) @ qml.Z(1) + 0.3 * qml.X(2) + 0.2 * qml.X(3) @ qml.Y(1))

    return circuit


@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_exponentials_match_pennylane_with_gradients(name):
    circuit = _exp_circuit(CIRCUITS[name])
    x, c = 0.4, np.array([0.3, -0.7, 0.45, 0.2])

    @qjit
    def compiled(x, c):
        return circuit(x, c), cofactor.grad(circuit, argnums=(0, 1))(x, c)

    value, (gx, gc) = compiled(x, c)
    np.testing.assert_allclose(value, circuit(x, c), atol=1e-10)
    if name in NO_AUTOGRAD_IN_PENNYLANE:
        rx, rc, atol = *_central_differences(circuit, x, c), 1e-7
    else:
        args = pnp.array(x, requires_grad=True), pnp.array(c, requires_grad=True)
        (rx, rc), atol = qml.grad(circuit)(*args), 1e-9
    np.testing.assert_allclose(gx, rx, atol=atol)
    np.testing.assert_allclose(gc, rc, atol=atol)


# default.qubit applies the exponential of a sum as a matrix exponential, which autograd
# cannot differentiate ('ArrayBox' object has no attribute 'conj'), and PennyLane 0.45's
# gradient of a fractional power of an Exp fails ('Exp' object is not iterable): central
# differences of PennyLane's values are the reference there
NO_AUTOGRAD_IN_PENNYLANE = {
    "adjoint_evolve",
    "evolve_commuting_sum",
    "exp_commuting_sum",
    "hamiltonian_evolve",
    "pow_exp_fractional",
}


def _central_differences(circuit, x, c, h=1e-6):
    gx = (circuit(x + h, c) - circuit(x - h, c)) / (2 * h)
    gc = np.array(
        [(circuit(x, c + h * e) - circuit(x, c - h * e)) / (2 * h) for e in np.eye(len(c))]
    )
    return gx, gc


def test_evolve_of_non_commuting_sum_with_constant_data_is_its_matrix():
    H = qml.dot([0.3, -0.7, 0.45, 0.2], NON_COMMUTING)

    @qml.qnode(dev5)
    def circuit(x):
        qml.RY(x, wires=0)
        qml.evolve(H, 0.8)
        return qml.expval(qml.Z(0) @ qml.Z(1) + 0.3 * qml.X(2))

    np.testing.assert_allclose(qjit(circuit)(0.4), circuit(0.4), atol=1e-10)


def test_evolve_of_non_commuting_sum_with_traced_data_is_a_clear_error():
    @qml.qnode(dev5)
    def circuit(x, c):
        qml.evolve(qml.dot(c, NON_COMMUTING), x)
        return qml.expval(qml.Z(0))

    with pytest.raises(CompileError, match="do not all commute.*TrotterProduct"):
        qjit(circuit)(0.4, np.ones(4))


def test_exp_with_real_coefficient_is_not_unitary():
    @qml.qnode(dev3)
    def circuit(x):
        qml.exp(qml.Z(0), x)
        return qml.expval(qml.Z(0))

    with pytest.raises(CompileError, match="not unitary"):
        qjit(circuit)(0.4)


def _qpe(k: int):
    ops = [qml.X(0) @ qml.X(1), qml.Z(0), qml.Y(0) @ qml.Y(1), qml.Z(1), qml.I(0)]

    @qml.qnode(dev5)
    def qpe(c):
        qml.X(0)
        qml.QuantumPhaseEstimation(
            qml.TrotterProduct(qml.dot(c, ops), time=1.0, n=k, order=2),
            estimation_wires=[2, 3, 4],
        )
        return qml.probs(wires=[2, 3, 4])

    return qpe


@pytest.mark.parametrize("k", [1, 2])
def test_phase_estimation_of_trotterised_hamiltonian_with_runtime_coefficients(k):
    qpe = _qpe(k)
    compiled = qjit(qpe)
    for c in (np.array([0.3, -0.7, 0.45, 0.2, 0.6]), np.array([1.1, 0.2, -0.3, 0.9, -0.4])):
        np.testing.assert_allclose(compiled(c), qpe(c), atol=1e-10)
    # controlled exponentials of Pauli words are controlled PauliRots, never matrices
    ir = compiled.mlir
    assert "quantum.pauli_rot" in ir and "quantum.unitary" not in ir


def test_phase_estimation_gradients_with_respect_to_the_coefficients():
    """Through controlled PauliRots: the adjoint method (expval) and parameter shift
    (probs); PennyLane's autograd cannot differentiate its matrix exponentials, so central
    differences of PennyLane's values are the reference."""
    ops = [qml.X(0) @ qml.X(1), qml.Z(0), qml.Y(0) @ qml.Y(1), qml.Z(1), qml.I(0)]

    def body(c):
        qml.X(0)
        qml.QuantumPhaseEstimation(
            qml.TrotterProduct(qml.dot(c, ops), time=1.0, n=1, order=2), estimation_wires=[2, 3]
        )

    @qml.qnode(dev5)
    def expval(c):
        body(c)
        return qml.expval(qml.Z(2) @ qml.Z(3))

    @qml.qnode(dev5)
    def probs(c):
        body(c)
        return qml.probs(wires=[2, 3])

    c, h = np.array([0.3, -0.7, 0.45, 0.2, 0.6]), 1e-6
    grad = qjit(cofactor.grad(expval))(c)
    jac = qjit(cofactor.jacobian(probs))(c)
    steps = h * np.eye(len(c))
    np.testing.assert_allclose(
        grad, [(expval(c + e) - expval(c - e)) / (2 * h) for e in steps], atol=1e-7
    )
    np.testing.assert_allclose(
        jac, np.array([(probs(c + e) - probs(c - e)) / (2 * h) for e in steps]).T, atol=1e-7
    )


# ----------------------------------------------------------------------------------------
# decompositions PennyLane routes through JAX when a compiler is active
# ----------------------------------------------------------------------------------------
@pytest.fixture(params=[False, True], ids=["legacy", "graph"])
def decomposition_system(request):
    if request.param:
        qml.decomposition.enable_graph()
    try:
        yield request.param
    finally:
        if request.param:
            qml.decomposition.disable_graph()


def test_basis_state_multi_rz_state_prep_without_jax(decomposition_system):
    @qml.qnode(dev3)
    def circuit(x, bits):
        qml.BasisState(np.array([1, 0, 1]), wires=[0, 1, 2])
        qml.MultiRZ(x, wires=[0, 1, 2])
        qml.Hadamard(0)
        qml.adjoint(qml.MultiRZ(0.5 * x, wires=[0, 1]))
        qml.BasisState(bits, wires=[1, 2])  # traced bits: X**b per wire
        return qml.expval(qml.X(0) @ qml.Z(1) @ qml.Z(2)), qml.probs(wires=[1, 2])

    bits = np.array([1, 1])
    got = qjit(circuit)(0.4, bits)
    expected = circuit(0.4, bits)
    np.testing.assert_allclose(got[0], expected[0], atol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], atol=1e-12)
    assert "jax" not in sys.modules


def test_state_prep_with_traced_amplitudes_without_jax(decomposition_system):
    @qml.qnode(dev3)
    def circuit(x, v):
        qml.StatePrep(np.array([0.6, 0.8]), wires=[2])
        qml.StatePrep(v / np.linalg.norm(v), wires=[0, 1])
        qml.RX(x, 0)
        return qml.probs(wires=[0, 1, 2])

    v = np.array([0.1, 0.5, -0.3, 0.7])
    np.testing.assert_allclose(qjit(circuit)(0.3, v), circuit(0.3, v), atol=1e-12)
    assert "jax" not in sys.modules


def test_controlled_traced_basis_state_keeps_the_phase(decomposition_system):
    """X**b as RX(pi b) with a global phase: under control the phase matters."""

    @qml.qnode(dev3)
    def circuit(bits):
        qml.Hadamard(0)
        qml.ctrl(qml.BasisState(bits, wires=[1, 2]), control=0)
        qml.Hadamard(0)
        return qml.probs(wires=[0, 1, 2])

    for bits in (np.array([1, 0]), np.array([1, 1])):
        np.testing.assert_allclose(qjit(circuit)(bits), circuit(bits), atol=1e-12)


def test_phase_estimation_with_the_graph_decomposition_system(decomposition_system):
    qpe = _qpe(1)
    c = np.array([0.3, -0.7, 0.45, 0.2, 0.6])
    np.testing.assert_allclose(qjit(qpe)(c), qpe(c), atol=1e-10)


_W = np.random.default_rng(0).normal(size=(2, 4, 3))
TEMPLATES = {
    # the graph system's rules for these loop with qml.for_loop and index Wires (or
    # jax.numpy arrays) with the traced loop index: cofactor lowers them with PennyLane's
    # legacy rules instead
    "StronglyEntanglingLayers": lambda x: qml.StronglyEntanglingLayers(_W * x, wires=range(4)),
    "BasisRotation": lambda x: (
        qml.RY(x, 0),
        qml.X(1),
        qml.BasisRotation(
            wires=range(3),
            unitary_matrix=_ORTHOGONAL,
        ),
    ),
    "UCCSD": lambda x: qml.UCCSD(
        np.array([0.1, 0.2, 0.3]) * x,
        wires=range(4),
        s_wires=[[0, 1, 2], [1, 2, 3]],
        d_wires=[[[0, 1], [2, 3]]],
        init_state=np.array([1, 1, 0, 0]),
    ),
    "GroverOperator": lambda x: (qml.RY(x, 0), qml.GroverOperator(wires=range(4))),
    "AQFT": lambda x: (qml.RY(x, 0), qml.AQFT(order=1, wires=range(4))),
}
_ORTHOGONAL = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))[0]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_templates_with_the_graph_decomposition_system(name, decomposition_system):
    @qml.qnode(qml.device("default.qubit", wires=4))
    def circuit(x):
        TEMPLATES[name](x)
        return qml.probs(wires=range(4))

    np.testing.assert_allclose(qjit(circuit)(0.7), circuit(0.7), atol=1e-10)


class _GraphOnlyOp(qml.operation.Operation):
    """An operator with a graph-system rule only (no legacy decomposition)."""

    num_wires = 2
    num_params = 1


@qml.register_resources({qml.RX: 1, qml.CNOT: 1})
def _graph_only_rule(theta, wires, **_):
    qml.RX(theta, wires[0])
    qml.CNOT(wires)


qml.add_decomps(_GraphOnlyOp, _graph_only_rule)


def test_operator_with_a_graph_rule_only(decomposition_system):
    @qml.qnode(qml.device("default.qubit", wires=2))
    def circuit(x):
        _GraphOnlyOp(x, wires=[0, 1])
        return qml.probs(wires=[0, 1])

    np.testing.assert_allclose(qjit(circuit)(0.5), circuit(0.5), atol=1e-12)


def test_basis_rotation_of_traced_matrices():
    """A traced complex matrix takes PennyLane's complex rule (no branches on values); a
    traced real one is refused with an error naming BasisRotation (PennyLane's real rule
    branches on the signs), and works as a static argument."""
    from scipy.stats import ortho_group, unitary_group

    dev = qml.device("default.qubit", wires=3)

    @qml.qnode(dev)
    def circuit(u):
        qml.PauliX(0)
        qml.BasisRotation(wires=range(3), unitary_matrix=u)
        return qml.probs()

    u = unitary_group.rvs(3, random_state=1)
    np.testing.assert_allclose(qjit(circuit)(u), circuit(u), atol=1e-12)
    o = ortho_group.rvs(3, random_state=2)
    with pytest.raises(CompileError, match="BasisRotation.*traced real.*static"):
        qjit(circuit)(o)
    static = qjit(lambda rows: circuit(np.array(rows)), static_argnums=0)
    np.testing.assert_allclose(static(tuple(map(tuple, o))), circuit(o), atol=1e-12)
