"""A third batch of programs shaped like PennyLane's demos and docs and Catalyst's docs
(error mitigation, autograph control, templates, kernels, optimisation loops): uncompiled
PennyLane's numbers under qjit, or a clear error that names the operation and says what to
do."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from demo_support import assert_matches_default_qubit, default, lightning

import cofactor
from cofactor import CompileError

pytestmark = pytest.mark.needs_toolchain


# --- catalyst.mitigate_with_zne -------------------------------------------------------------
def _zne_circuit(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(2 * x, 1)
    return qml.expval(qml.Z(0) @ qml.Z(1))


def _zne_two_expvals(w):
    qml.StronglyEntanglingLayers(w, wires=[0, 1])
    return qml.expval(qml.Z(0) @ qml.Z(1)), qml.expval(qml.X(1))


def test_mitigate_with_zne_global_and_local_folding_give_the_noiseless_value():
    # noiseless simulator: every folded circuit gives the circuit's value; Catalyst's default
    # extrapolation (a polynomial through all points) returns it
    circuit = qml.QNode(_zne_circuit, lightning(2))
    expected = qml.QNode(_zne_circuit, default(2))(0.3)

    @cofactor.qjit
    def mitigated(x):
        g = cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3, 5])(x)
        loc = cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3], folding="local-all")(x)
        return g, loc, cofactor.grad(cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3]))(x)

    g, loc, dg = mitigated(0.3)
    np.testing.assert_allclose([g, loc], [expected, expected], atol=1e-10)
    expected_grad = qml.grad(qml.QNode(_zne_circuit, default(2)))(qml.numpy.array(0.3))
    np.testing.assert_allclose(dg, expected_grad, atol=1e-8)


def test_mitigate_with_zne_extrapolators_and_several_expectation_values():
    w = np.linspace(0.1, 1.7, 12).reshape(2, 2, 3)
    expected = qml.QNode(_zne_two_expvals, default(2))(w)
    circuit = qml.QNode(_zne_two_expvals, lightning(2))
    zne = cofactor.mitigate_with_zne(
        scale_factors=[1, 3, 5],
        extrapolate=qml.noise.poly_extrapolate,
        extrapolate_kwargs={"order": 1},
        folding="local-all",
    )
    got = cofactor.qjit(lambda w: zne(circuit)(w))(w)
    assert isinstance(got, tuple) and len(got) == 2
    np.testing.assert_allclose(got, expected, atol=1e-9)
    # exponential_extrapolate (Catalyst's doc example) on the three noiseless values
    results = np.array([qml.QNode(_zne_circuit, default(2))(0.3)] * 3)
    exp = cofactor.qjit(
        lambda x: cofactor.mitigate_with_zne(
            qml.QNode(_zne_circuit, lightning(2)),
            scale_factors=[1, 3, 5],
            extrapolate=qml.noise.exponential_extrapolate,
            extrapolate_kwargs={"asymptote": 2.0},
        )(x)
    )(0.3)
    expected_exp = qml.noise.exponential_extrapolate([1, 3, 5], results, asymptote=2.0)
    np.testing.assert_allclose(exp, expected_exp, atol=1e-9)


def test_mitigate_with_zne_refusals_name_the_problem():
    circuit = qml.QNode(_zne_circuit, lightning(2))
    with pytest.raises(ValueError, match=r"found 2 in scale_factors.*odd positive integers"):
        cofactor.mitigate_with_zne(circuit, scale_factors=[1, 2])
    with pytest.raises(TypeError, match=r"found 1.0 in scale_factors.*odd positive integers"):
        cofactor.mitigate_with_zne(circuit, scale_factors=[1.0, 3.0])
    with pytest.raises(NotImplementedError, match=r"folding='local-random' is not supported"):
        cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3], folding="local-random")
    with pytest.raises(ValueError, match=r"Folding type must be one of"):
        cofactor.mitigate_with_zne(circuit, scale_factors=[1, 3], folding="bad")
    with pytest.raises(CompileError, match=r"scale_factors are traced.*static"):
        cofactor.qjit(lambda x, s: cofactor.mitigate_with_zne(circuit, scale_factors=s)(x))(
            0.3, np.array([1, 3])
        )

    def probabilities(x):
        qml.RX(x, 0)
        return qml.probs(wires=0)

    with pytest.raises(TypeError, match=r"Only expectations values and classical scalar"):
        cofactor.qjit(
            lambda x: cofactor.mitigate_with_zne(
                qml.QNode(probabilities, lightning(1)), scale_factors=[1, 3]
            )(x)
        )(0.3)
    # (local folding of a circuit with compiled control flow, refused here before, works:
    # test_demo_programs4.py)


def _zne_looped(x, n):
    @cofactor.for_loop(0, n, 1)
    def rotate_first(i):
        qml.RX(x, 0)

    @cofactor.for_loop(0, n, 1)
    def rotate_second(i):
        qml.RY(x, 1)

    rotate_first()
    qml.Hadamard(0)
    qml.CNOT([1, 0])
    rotate_second()
    return qml.expval(qml.Y(0) @ qml.Z(1))


def test_mitigate_with_zne_global_folding_of_control_flow_and_of_a_function_of_qnodes():
    # Catalyst's doc example: a circuit with for_loops (the global fold is built from the
    # quantum function, U^dagger with cofactor.adjoint); and a function calling QNodes, each
    # call mitigated
    looped = qml.QNode(_zne_looped, lightning(2))
    simple = qml.QNode(_zne_circuit, lightning(2))

    def program(x, n):
        return looped(x, n) + 2 * simple(x)

    @cofactor.qjit
    def mitigated(x, n):
        return (
            cofactor.mitigate_with_zne(looped, scale_factors=[1, 3, 5])(x, n),
            cofactor.mitigate_with_zne(program, scale_factors=[1, 3])(x, n),
        )

    got_looped, got_program = mitigated(0.3, 3)
    expected_looped = cofactor.qjit(looped)(0.3, 3)
    np.testing.assert_allclose(got_looped, expected_looped, atol=1e-10)
    expected_simple = qml.QNode(_zne_circuit, default(2))(0.3)
    np.testing.assert_allclose(got_program, expected_looped + 2 * expected_simple, atol=1e-10)


# --- catalyst.disable_autograph ---------------------------------------------------------------
def _cubic_or_square(x):
    if x > 5:
        return x**2
    return x**3


def test_disable_autograph_as_decorator_and_context_manager():
    @cofactor.disable_autograph
    def six_squared():
        x = 6
        if x > 5:
            y = x**2
        else:
            y = x**3
        return y

    @cofactor.qjit(autograph=True)
    def g(x, n: int):
        for _ in range(n):
            x = x + six_squared()
        return x

    @cofactor.qjit(autograph=True)
    def h(x):
        y = 0.4
        with cofactor.disable_autograph:
            y += _cubic_or_square(6)
        return y + x

    assert g(0.4, 6) == pytest.approx(216.4)
    assert h(1.0) == pytest.approx(37.4)


@pytest.mark.parametrize("which", ["cofactor", "pennylane"])
def test_calls_under_disable_autograph_are_not_converted(which):
    from pennylane.capture.autograph import disable_autograph as pennylane_disable

    disable = cofactor.disable_autograph if which == "cofactor" else pennylane_disable

    @cofactor.qjit(autograph=True)
    def f(x):
        with disable:
            return _cubic_or_square(x)  # a Python `if` on a traced value: not converted

    with pytest.raises(CompileError, match="concrete bool"):
        f(1.0)
    # and outside the block conversion goes on
    assert cofactor.qjit(autograph=True)(lambda x: _cubic_or_square(x))(6.0) == 36.0


# --- refusals that name the operation ---------------------------------------------------------
_BLOCK = np.array([[0.1, 0.2], [0.3, 0.4]])


def _qsvt_phases(x):
    return [qml.PCPhase(p, dim=2, wires=[0, 1]) for p in (x, 0.5, 0.1)]


def test_block_encode_of_a_traced_matrix_is_refused_by_name_and_its_advice_works():
    # was a "concrete bool" error from inside scipy's norm, naming neither BlockEncode nor a fix
    def traced(a):
        qml.BlockEncode(a, wires=[0, 1])
        return qml.state()

    with pytest.raises(CompileError, match=r"qml.BlockEncode of a traced matrix.*QubitUnitary"):
        cofactor.qjit(qml.QNode(traced, lightning(2)))(_BLOCK)

    def with_unitary(u, x):  # the advice: the unitary computed outside qjit
        qml.QSVT(qml.QubitUnitary(u, wires=[0, 1]), _qsvt_phases(x))
        return qml.state()

    def with_block_encode(x):
        qml.QSVT(qml.BlockEncode(_BLOCK, wires=[0, 1]), _qsvt_phases(x))
        return qml.state()

    u = qml.matrix(qml.BlockEncode(_BLOCK, wires=[0, 1]))
    got = cofactor.qjit(qml.QNode(with_unitary, lightning(2)))(u, 0.3)
    np.testing.assert_allclose(got, qml.QNode(with_block_encode, default(2))(0.3), atol=1e-10)


def _layered(params):
    for i in range(3):
        qml.RY(np.pi / 4, wires=i)
    for layer in range(2):
        for i in range(3):
            qml.RX(params[layer, i], wires=i)
        for i in range(2):
            qml.CZ(wires=[i, i + 1])
    return qml.expval(qml.Z(0) @ qml.Z(1))


_LAYER_PARAMS = np.linspace(0.2, 1.4, 6).reshape(2, 3)


def test_adjoint_metric_tensor_is_refused_by_name_and_the_full_metric_tensor_matches_it():
    # was "post-processing ... failed on traced results: 'Scalar' object has no attribute 'shots'"
    with pytest.raises(CompileError, match=r"adjoint_metric_tensor simulates.*metric_tensor"):
        cofactor.qjit(qml.adjoint_metric_tensor(qml.QNode(_layered, lightning(3))))(_LAYER_PARAMS)
    got = cofactor.qjit(qml.metric_tensor(qml.QNode(_layered, lightning(4)), approx=None))(
        _LAYER_PARAMS
    )
    expected = qml.adjoint_metric_tensor(qml.QNode(_layered, default(3)))(
        qml.numpy.array(_LAYER_PARAMS)
    )
    np.testing.assert_allclose(got, expected, atol=1e-10)


# --- template and algorithm demos: compiled vs default.qubit -----------------------------------
def _uniform(wires):
    return qml.prod(*[qml.Hadamard(w) for w in wires])


def _amplitude_amplification(x):
    qml.apply(_uniform(range(3)))
    qml.AmplitudeAmplification(_uniform(range(3)), qml.FlipSign([1, 0, 1], wires=range(3)), iters=2)
    qml.RY(x, 0)
    return qml.probs(wires=range(3))


def _fixed_point_amplification(x):
    qml.apply(_uniform(range(3)))
    qml.RZ(x, 1)
    qml.AmplitudeAmplification(
        _uniform(range(3)),
        qml.FlipSign([1, 1, 0], wires=range(3)),
        iters=3,
        fixed_point=True,
        work_wire=3,
    )
    return qml.probs(wires=range(3))


def _grover(x):
    for w in range(3):
        qml.Hadamard(w)
    for _ in range(2):
        qml.FlipSign([1, 1, 1], wires=range(3))
        qml.GroverOperator(wires=range(3))
    qml.RX(x, 0)
    return qml.probs(wires=range(3))


_LCU = qml.dot([0.3, 0.5, 0.2], [qml.X(2) @ qml.Z(3), qml.Z(2), qml.Y(3)])


def _prep_sel_prep(x):
    qml.RY(x, 2)
    qml.RX(x, 3)
    qml.PrepSelPrep(_LCU, control=[0, 1])
    return qml.state()


def _qubitization(x):
    qml.RY(x, 2)
    qml.Qubitization(_LCU, control=[0, 1])
    return qml.expval(qml.Z(2) @ qml.Z(3))


def _select(x):
    qml.Hadamard(0)
    qml.Hadamard(1)
    qml.Select([qml.RX(x, 2), qml.RY(2 * x, 2), qml.CNOT([2, 3]), qml.Z(3)], control=[0, 1])
    return qml.probs(wires=range(4))


def _trotter(t):
    h = qml.dot([1.0, 0.5, -0.3], [qml.X(0) @ qml.X(1), qml.Z(0), qml.Y(1)])
    qml.TrotterProduct(h, time=t, n=3, order=2)
    qml.ApproxTimeEvolution(qml.Hamiltonian([1.0, 0.5], [qml.X(0) @ qml.X(1), qml.Z(1)]), t, 2)
    return qml.expval(qml.Z(0)), qml.expval(qml.Y(1))


def _qsvt_polynomial(x):
    qml.RY(x, 0)
    qml.qsvt(_BLOCK, [0, 0.2, 0, 0.3], encoding_wires=[0, 1], block_encoding="embedding")
    return qml.state()


def _state_preparations(v):
    qml.StatePrep(v[:4], wires=[0, 1], normalize=True)
    qml.AmplitudeEmbedding(v, wires=[2, 3, 4], pad_with=0.0, normalize=True)
    return qml.state()


_MPS = [
    np.array([[0.53896774, 0.84233653], [-0.84233653, 0.53896774]]),
    np.array([[[-0.70710678, 0.0], [0.0, -0.70710678]], [[0.0, 0.70710678], [0.70710678, 0.0]]]),
    np.array([[-1.0, 0.0], [0.0, 1.0]]),
]


def _mps_prep(x):
    qml.MPSPrep(_MPS, wires=[0, 1, 2], work_wires=[3, 4])
    qml.RY(x, 0)
    return qml.probs(wires=[0, 1, 2])


_ROTATION = qml.math.expm(1j * np.array([[0.2, 0.1 + 0.3j], [0.1 - 0.3j, -0.4]]))


def _basis_rotation(x):
    qml.X(0)
    qml.RY(x, 1)
    qml.BasisRotation(wires=[0, 1], unitary_matrix=_ROTATION)
    return qml.expval(qml.Z(0)), qml.expval(qml.Z(1))


def _phase_estimation(x):
    qml.X(3)
    qml.QuantumPhaseEstimation(qml.RZ(x, wires=3), estimation_wires=range(3))
    qml.BasisEmbedding(5, wires=range(3))
    qml.QFT(wires=range(3))
    qml.RZ(x, 0)
    qml.adjoint(qml.QFT)(wires=range(3))
    return qml.probs(wires=range(3))


def _monte_carlo(x):
    values = np.sin(np.arange(4)) ** 2
    qml.QuantumMonteCarlo(
        np.array([0.1, 0.2, 0.3, 0.4]),
        lambda i: values[i],
        target_wires=range(3),
        estimation_wires=range(3, 6),
    )
    qml.RZ(x, 0)
    return qml.probs(wires=range(3, 6))


def _embeddings(x, w):
    qml.IQPEmbedding(x, wires=range(3), n_repeats=2)
    qml.QAOAEmbedding(features=x[:2], weights=w, wires=range(2))
    qml.RandomLayers(w[:, :2], wires=range(3), seed=42)
    qml.StronglyEntanglingLayers(
        np.arange(18.0).reshape(2, 3, 3) * x[0], wires=range(3), ranges=[1, 2], imprimitive=qml.CZ
    )
    return qml.probs(wires=range(3))


@pytest.mark.parametrize(
    "body, args, wires",
    [
        (_amplitude_amplification, (0.2,), 3),
        (_fixed_point_amplification, (0.2,), 4),
        (_grover, (0.3,), 3),
        (_prep_sel_prep, (0.4,), 4),
        (_qubitization, (0.4,), 4),
        (_select, (0.7,), 4),
        (_trotter, (0.7,), 2),
        (_qsvt_polynomial, (0.2,), 2),
        (_state_preparations, (np.array([1.0, 2.0, 0.5, 0.3, 0.1]),), 5),
        (_mps_prep, (0.3,), 5),
        (_basis_rotation, (0.3,), 2),
        (_phase_estimation, (1.3,), 4),
        (_monte_carlo, (0.2,), 6),
        (_embeddings, (np.array([0.1, 0.5, -0.3]), np.linspace(0, 1, 6).reshape(2, 3)), 3),
    ],
    ids=lambda v: getattr(v, "__name__", "").lstrip("_") or None,
)
def test_template_programs_match_default_qubit(body, args, wires):
    assert_matches_default_qubit(body, args, wires)


# --- variational demos: optimisation loops, gradients, kernels, chemistry ----------------------
def _maxcut():
    import networkx as nx

    return qml.qaoa.maxcut(nx.Graph([(0, 1), (1, 2), (2, 0), (2, 3)]))


def test_qaoa_maxcut_gradient_descent_loop_matches_pennylane():
    cost_h, mixer_h = _maxcut()

    def qaoa(params):
        for w in range(4):
            qml.Hadamard(w)
        for i in range(2):
            qml.qaoa.cost_layer(params[0, i], cost_h)
            qml.qaoa.mixer_layer(params[1, i], mixer_h)
        return qml.expval(cost_h)

    compiled_qnode = qml.QNode(qaoa, lightning(4))

    @cofactor.qjit
    def optimise(params):
        first_grad = cofactor.grad(compiled_qnode)(params)

        @cofactor.for_loop(0, 10, 1)
        def step(i, p):
            return p - 0.1 * cofactor.grad(compiled_qnode)(p)

        return first_grad, compiled_qnode(step(params))

    reference = qml.QNode(qaoa, default(4))
    params = qml.numpy.array([[0.5, 0.3], [0.2, 0.7]])
    expected_grad = qml.grad(reference)(params)
    p = params
    for _ in range(10):
        p = p - 0.1 * qml.grad(reference)(p)
    got_grad, got_cost = optimise(np.asarray(params))
    np.testing.assert_allclose(got_grad, expected_grad, atol=1e-8)
    np.testing.assert_allclose(got_cost, reference(p), atol=1e-8)


def _reuploading(params, x):
    for layer in range(3):
        qml.Rot(*(params[layer] * np.concatenate([x, [0.0]])), wires=0)
    return qml.expval(qml.Z(0))


def test_data_reuploading_and_barren_plateau_gradients_match_autograd():
    params = np.linspace(0.1, 0.9, 9).reshape(3, 3)
    x = np.array([0.3, -0.7])

    @cofactor.qjit
    def grads(params, x, layer_params):
        return (
            cofactor.grad(qml.QNode(_reuploading, lightning(1)), argnums=0)(params, x),
            cofactor.grad(qml.QNode(_layered, lightning(3)))(layer_params),
        )

    got = grads(params, x, _LAYER_PARAMS)
    expected_reupload = qml.grad(qml.QNode(_reuploading, default(1)), argnums=0)(
        qml.numpy.array(params), qml.numpy.array(x, requires_grad=False)
    )
    expected_layers = qml.grad(qml.QNode(_layered, default(3)))(qml.numpy.array(_LAYER_PARAMS))
    np.testing.assert_allclose(got[0], expected_reupload, atol=1e-8)
    np.testing.assert_allclose(got[1], expected_layers, atol=1e-8)


def _kernel_circuit(x1, x2):
    qml.AngleEmbedding(x1, wires=range(2))
    qml.adjoint(qml.AngleEmbedding)(x2, wires=range(2))
    return qml.probs(wires=range(2))


_KERNEL_X = np.array([[0.1, 0.2], [0.5, -0.3], [1.0, 0.4]])
_KERNEL_Y = np.array([1.0, -1.0, 1.0])


def _kernel_quantities(qnode, x):
    def kernel(a, b):
        return qnode(a, b)[0]

    return (
        qml.kernels.square_kernel_matrix(x, kernel, assume_normalized_kernel=True),
        qml.kernels.kernel_matrix(x, x[:2], kernel),
        # the labels are program constants: `y == 1` in PennyLane's polarity needs their values
        qml.kernels.target_alignment(x, _KERNEL_Y, kernel, assume_normalized_kernel=True),
    )


def test_quantum_kernel_matrices_and_target_alignment_match_pennylane():
    compiled = cofactor.qjit(
        lambda x: _kernel_quantities(qml.QNode(_kernel_circuit, lightning(2)), x)
    )
    got = compiled(_KERNEL_X)
    expected = _kernel_quantities(qml.QNode(_kernel_circuit, default(2)), _KERNEL_X)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-10)


@pytest.fixture(scope="module")
def h2_molecule():
    coordinates = np.array([0.0, 0.0, -0.6614, 0.0, 0.0, 0.6614])
    hamiltonian, qubits = qml.qchem.molecular_hamiltonian(["H", "H"], coordinates)
    singles, doubles = qml.qchem.excitations(2, qubits)
    return hamiltonian, qubits, qml.qchem.hf_state(2, qubits), singles, doubles


def test_vqe_h2_built_by_qchem_outside_qjit_matches_pennylane(h2_molecule):
    hamiltonian, qubits, hf, singles, doubles = h2_molecule
    s_wires, d_wires = qml.qchem.excitations_to_wires(singles, doubles)
    spin2, number = qml.qchem.spin2(2, qubits), qml.qchem.particle_number(qubits)

    def double_excitation(theta):
        qml.BasisState(hf, wires=range(qubits))
        qml.DoubleExcitation(theta, wires=doubles[0])
        return qml.expval(hamiltonian)

    def uccsd(w):
        qml.UCCSD(w, wires=range(qubits), s_wires=s_wires, d_wires=d_wires, init_state=hf)
        return qml.expval(hamiltonian), qml.expval(spin2), qml.expval(number)

    compiled = qml.QNode(double_excitation, lightning(qubits))

    @cofactor.qjit
    def vqe(theta, w):
        @cofactor.while_loop(lambda t, i: i < 20)
        def descend(t, i):
            return t - 0.4 * cofactor.grad(compiled)(t), i + 1

        theta, _ = descend(theta, 0)
        return compiled(theta), theta, qml.QNode(uccsd, lightning(qubits))(w)

    reference = qml.QNode(double_excitation, default(qubits))
    t = qml.numpy.array(0.0)
    for _ in range(20):
        t = t - 0.4 * qml.grad(reference)(t)
    w = np.array([0.1, -0.05, 0.2])
    energy, theta, uccsd_values = vqe(0.0, w)
    np.testing.assert_allclose([energy, theta], [reference(t), t], atol=1e-8)
    np.testing.assert_allclose(uccsd_values, qml.QNode(uccsd, default(qubits))(w), atol=1e-10)


# --- Catalyst's documented API -----------------------------------------------------------------
def test_catalyst_api_programs():
    @qml.qnode(lightning(2))
    def layered(x, layers):
        for _ in range(layers):
            qml.RX(x, 0)
            qml.CNOT([0, 1])
        return qml.expval(qml.Z(1))

    @qml.qnode(lightning(1))
    def branches(x):
        @cofactor.cond(x > 1.0)
        def rotate():
            qml.RX(x, 0)

        @rotate.else_if(x > 0.5)
        def rotate():
            qml.RY(x, 0)

        @rotate.otherwise
        def rotate():
            qml.RZ(x, 0)

        rotate()
        return qml.expval(qml.Z(0))

    @qml.qnode(lightning(1))
    def two_angles(x, y):
        qml.RX(x, 0)
        qml.RY(y, 0)
        return qml.expval(qml.Z(0))

    @cofactor.pure_callback
    def host_sinh(x) -> float:
        return float(np.sinh(x))

    @cofactor.qjit
    def program(x, xs):
        return (
            cofactor.vmap(two_angles, in_axes=(0, None))(xs, 0.5),
            host_sinh(x) * 2,
            branches(x),
        )

    static = cofactor.qjit(layered, static_argnames="layers")
    assert static(0.3, 3) == pytest.approx(qml.QNode(layered.func, default(2))(0.3, 3), abs=1e-10)
    xs = np.array([0.1, 0.2, 0.3])
    for x, rotated in ((1.2, np.cos(1.2)), (0.7, np.cos(0.7)), (0.2, 1.0)):
        batch, host, branch = program(x, xs)
        np.testing.assert_allclose(batch, np.cos(xs) * np.cos(0.5), atol=1e-12)
        assert host == pytest.approx(2 * np.sinh(x))
        assert branch == pytest.approx(rotated, abs=1e-12)


# --- numpy.linalg pinv / eigvalsh / eigh of traced real matrices (host callbacks) ---------------
def _symmetric(p, xp=np):
    rows = [[p[0], p[1], p[2]], [p[1], p[3], p[4]], [p[2], p[4], p[5]]]
    return xp.stack([xp.stack(r) for r in rows])


_EIGEN_WEIGHTS = np.array([1.0, 2.0, -0.5])


def test_pinv_eigvalsh_eigh_values_and_gradients_match_numpy_and_autograd():
    # were refused ("not supported on traced values"); numpy runs them in the host
    from pennylane import numpy as pnp

    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 2))
    weights = rng.normal(size=(2, 3))
    p = rng.normal(size=6)

    def pinv_cost(a, xp=np):
        return xp.sum(weights * xp.linalg.pinv(a) ** 2)

    def spectrum_cost(p):
        s = _symmetric(p)
        w, v = np.linalg.eigh(s)
        return np.sum(np.linalg.eigvalsh(s) * _EIGEN_WEIGHTS) + np.sum(w**2) + np.sum(v[:, 0] ** 4)

    def spectrum_cost_autograd(p):  # (autograd has no eigvalsh derivative: eigh's values)
        w, v = pnp.linalg.eigh(_symmetric(p, pnp))
        return pnp.sum(w * _EIGEN_WEIGHTS) + pnp.sum(w**2) + pnp.sum(v[:, 0] ** 4)

    @cofactor.qjit
    def program(a, p):
        return (
            np.linalg.pinv(a),
            np.linalg.eigh(_symmetric(p))[0],
            cofactor.grad(pinv_cost)(a),
            cofactor.grad(spectrum_cost)(p),
        )

    pinv, eigenvalues, pinv_grad, spectrum_grad = program(a, p)
    np.testing.assert_allclose(pinv, np.linalg.pinv(a), atol=1e-12)
    np.testing.assert_allclose(eigenvalues, np.linalg.eigvalsh(_symmetric(p)), atol=1e-12)
    expected_pinv_grad = qml.grad(lambda a: pinv_cost(a, pnp))(pnp.array(a))
    np.testing.assert_allclose(pinv_grad, expected_pinv_grad, atol=1e-9)
    expected_spectrum_grad = qml.grad(spectrum_cost_autograd)(pnp.array(p))
    np.testing.assert_allclose(spectrum_grad, expected_spectrum_grad, atol=1e-8)


def test_eigh_result_has_numpys_field_names_inside_and_out_of_qjit():
    """numpy 2's eigh returns a namedtuple: `.eigenvalues` works in traced code and the
    compiled function returns the same class."""
    s = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.3], [0.1, 0.3, 0.5]])
    expected = np.linalg.eigh(s)

    @cofactor.qjit
    def program(a):
        result = np.linalg.eigh(a)
        return result, result.eigenvalues.sum()

    result, total = program(s)
    assert type(result) is type(expected)
    np.testing.assert_allclose(result.eigenvalues, expected.eigenvalues, atol=1e-12)
    np.testing.assert_allclose(
        np.abs(result.eigenvectors), np.abs(expected.eigenvectors), atol=1e-12
    )
    np.testing.assert_allclose(total, np.trace(s), atol=1e-12)


# --- qml.iterative_qpe ---------------------------------------------------------------------------
def _iterative_phase_estimation(x):
    qml.X(0)
    bits = qml.iterative_qpe(qml.RZ(x, wires=[0]), aux_wire=1, iters=3)
    return qml.probs(op=bits), qml.expval(bits[0])


def test_iterative_qpe_estimates_the_phase_as_pennylane():
    # was "cannot trace a value of type RZ" (PennyLane's for_loop carries the operator)
    theta = 5 * np.pi / 2  # RZ|1> = exp(i theta/2)|1>: phase 5/8 = 0b101, exact in 3 bits
    got = cofactor.qjit(qml.QNode(_iterative_phase_estimation, lightning(2)))(theta)
    expected = qml.QNode(_iterative_phase_estimation, default(5))(theta)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-10)
    one_shot = qml.set_shots(
        qml.QNode(_iterative_phase_estimation, lightning(2), mcm_method="one-shot"), shots=50
    )
    probs, first_bit = cofactor.qjit(one_shot, seed=3)(theta)
    np.testing.assert_allclose(probs, np.eye(8)[5])
    assert first_bit == 1.0
    # outside a trace qml.iterative_qpe is PennyLane's own
    assert qml.iterative_qpe.__module__ == "pennylane.ops.functions.iterative_qpe"


# --- qjit(autograph_include=...) ------------------------------------------------------------------
_LIBRARY_SOURCE = """
def cube_or_square(x):
    if x > 5:
        return x ** 2
    return x ** 3
"""


@pytest.fixture
def library_function(tmp_path, monkeypatch):
    """A function of a module autograph leaves alone (it poses as part of PennyLane)."""
    import importlib.util
    import sys

    name = "pennylane.cofactor_autograph_include_test"
    path = tmp_path / "cofactor_autograph_include_test.py"
    path.write_text(_LIBRARY_SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, name, module)
    return module.cube_or_square


def test_autograph_include_converts_the_named_library_module(library_function):
    # was NotImplementedError("qjit(autograph_include=...) is not supported by cofactor")
    def program(x):
        return library_function(x) + 1.0

    with pytest.raises(CompileError, match="concrete bool"):  # a library: not converted
        cofactor.qjit(program, autograph=True)(2.0)
    included = cofactor.qjit(
        program, autograph=True, autograph_include=["pennylane.cofactor_autograph_include_test"]
    )
    assert included(2.0) == pytest.approx(9.0)
    assert included(6.0) == pytest.approx(37.0)
    with pytest.raises(CompileError, match="concrete bool"):  # only while `included` runs
        cofactor.qjit(program, autograph=True)(3.0)


def _bell_state(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    return qml.state()


def _entropies(qnode, x, y):
    rho = qml.math.reduce_statevector(qnode(x), [0])
    sigma = qml.math.reduce_statevector(qnode(y), [0])
    return qml.math.vn_entropy(rho, [0]), qml.math.relative_entropy(rho, sigma)


def test_entropies_of_density_matrices_use_a_complex_hermitian_eigh_without_a_gradient():
    # were refused (eigh of a traced complex matrix); values only
    compiled = cofactor.qjit(lambda x, y: _entropies(qml.QNode(_bell_state, lightning(2)), x, y))
    got = compiled(0.4, 0.9)
    expected = _entropies(qml.QNode(_bell_state, default(2)), 0.4, 0.9)
    np.testing.assert_allclose(got, expected, atol=1e-10)
    hermitian = np.array([[1.0, 1j], [-1j, 2.0]])
    with pytest.raises(CompileError, match=r"eigvalsh \(complex Hermitian\).*method=\"fd\""):
        cofactor.qjit(cofactor.grad(lambda x: np.sum(np.linalg.eigvalsh(x * hermitian) ** 2)))(0.4)


def _entanglement(x):
    qml.RX(x, 0)
    qml.CNOT([0, 1])
    qml.RY(0.3 * x, 2)
    qml.CNOT([1, 2])
    return (
        qml.vn_entropy(wires=[0]),
        qml.vn_entropy(wires=[0, 2], log_base=2),
        qml.mutual_info(wires0=[0], wires1=[1, 2]),
        qml.purity(wires=[1]),
    )


def test_vn_entropy_and_mutual_info_measurements_match_pennylane():
    # were refused ("measurement VnEntropyMP is not supported by cofactor")
    assert_matches_default_qubit(_entanglement, (0.7,), 3)

    def entropy(x):
        qml.RX(x, 0)
        qml.CNOT([0, 1])
        return qml.vn_entropy(wires=[0])

    # its gradient: finite differences (Enzyme cannot see through the host eigvalsh)
    fd = cofactor.qjit(cofactor.grad(qml.QNode(entropy, lightning(2)), method="fd", h=1e-7))
    expected = qml.grad(qml.QNode(entropy, default(2)))(qml.numpy.array(0.7))
    assert fd(0.7) == pytest.approx(expected, abs=1e-6)
    with pytest.raises(CompileError, match='method="fd"'):
        cofactor.qjit(cofactor.grad(qml.QNode(entropy, lightning(2))))(0.7)


# --- optimisation demos with Catalyst's control flow ---------------------------------------------
def _qng_ansatz(p):
    qml.RX(p[0], 0)
    qml.RY(p[1], 1)
    qml.CNOT([0, 1])
    qml.RY(p[2], 0)
    return qml.expval(qml.Z(0) @ qml.Z(1) + 0.5 * qml.X(0))


def _classifier(w, x):
    qml.AngleEmbedding(x, wires=range(2))
    qml.BasicEntanglerLayers(w, wires=range(2))
    return qml.expval(qml.Z(0))


def test_quantum_natural_gradient_loop_and_a_vmapped_classifier_loss_match_pennylane():
    from pennylane import numpy as pnp

    qng_qnode = qml.QNode(_qng_ansatz, lightning(2))
    classifier = qml.QNode(_classifier, lightning(2))

    def loss(w, x, y):
        return np.mean((cofactor.vmap(classifier, in_axes=(None, 0))(w, x) - y) ** 2)

    @cofactor.qjit
    def program(p, w, x, y):
        @cofactor.for_loop(0, 5, 1)
        def natural_step(i, p):
            metric = qml.metric_tensor(qng_qnode, approx="block-diag")(p)
            return p - 0.1 * np.linalg.solve(metric + 0.01 * np.eye(3), cofactor.grad(qng_qnode)(p))

        return natural_step(p), cofactor.grad(loss)(w, x, y)

    p0 = np.array([0.3, 0.5, 0.7])
    w = np.linspace(0.1, 0.6, 4).reshape(2, 2)
    x = np.array([[0.1, 0.2], [0.3, -0.4], [0.9, 0.5]])
    y = np.array([1.0, -1.0, 1.0])
    got_p, got_grad = program(p0, w, x, y)

    reference = qml.QNode(_qng_ansatz, default(2))
    p = pnp.array(p0)
    for _ in range(5):
        metric = qml.metric_tensor(reference, approx="block-diag")(p)
        p = p - 0.1 * np.linalg.solve(metric + 0.01 * np.eye(3), qml.grad(reference)(p))
    np.testing.assert_allclose(got_p, p, atol=1e-8)

    reference_classifier = qml.QNode(_classifier, default(2))

    def reference_loss(w):
        predictions = qml.math.stack([reference_classifier(w, row) for row in x])
        return qml.math.mean((predictions - y) ** 2)

    np.testing.assert_allclose(got_grad, qml.grad(reference_loss)(pnp.array(w)), atol=1e-8)


def test_polyfit_of_traced_values_as_a_zne_extrapolation():
    # np.polyfit was refused; with constant sample points it is a constant pseudo-inverse
    # times the values (Catalyst's test extrapolates with jnp.polyfit(scale_factors, y, 2))
    circuit = qml.QNode(_zne_circuit, lightning(2))

    def quadratic_at_zero(scale_factors, results):
        return np.polyfit(scale_factors, results, 2)[-1]

    @cofactor.qjit
    def program(x, y):
        zne = cofactor.mitigate_with_zne(
            circuit, scale_factors=[1, 3, 5, 7], extrapolate=quadratic_at_zero
        )
        return (
            zne(x),
            np.polyfit([1.0, 2.0, 4.0, 5.0], y, 2),
            cofactor.grad(lambda y: np.polyfit([1.0, 2.0, 4.0], y, 1)[0])(y[:3]),
        )

    y = np.array([0.8, 0.7, 0.62, 0.55])
    zne, coefficients, slope_grad = program(0.3, y)
    assert zne == pytest.approx(qml.QNode(_zne_circuit, default(2))(0.3), abs=1e-9)
    np.testing.assert_allclose(coefficients, np.polyfit([1.0, 2.0, 4.0, 5.0], y, 2), atol=1e-12)
    # the least-squares slope is linear in y: its gradient is the pseudo-inverse's first row
    np.testing.assert_allclose(slope_grad, np.linalg.pinv(np.vander([1.0, 2.0, 4.0], 2))[0])
    with pytest.raises(CompileError, match="polyfit with traced sample points"):
        cofactor.qjit(lambda x, y: np.polyfit(x, y, 1))(np.arange(3.0), y[:3])
