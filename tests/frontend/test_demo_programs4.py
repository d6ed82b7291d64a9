"""A fourth batch of programs shaped like PennyLane's demos and Catalyst's docs: PennyLane's
optimizers and `qml.grad` outside qjit on a compiled cost, Catalyst's `passes` decorators,
`debug.print(memref=True)`, `debug.get_compilation_stage` and `autograph_source`; uncompiled
PennyLane's numbers, or a clear error that names the operation and says what to do."""

from __future__ import annotations

import functools

import numpy as np
import pennylane as qml
import pytest
from demo_support import default, lightning

import cofactor
from cofactor import CompileError

pytestmark = pytest.mark.needs_toolchain
pnp = qml.numpy


# --- PennyLane optimizers and qml.grad outside qjit, on a qjit-compiled cost -----------------
def _cost_body(p):
    qml.RX(p[0], 0)
    qml.RY(p[1], 1)
    qml.CNOT([0, 1])
    qml.RZ(p[2], 1)
    qml.RX(p[2], 1)
    return qml.expval(qml.Z(1))


@functools.cache
def _compiled_cost():
    return cofactor.qjit(qml.QNode(_cost_body, lightning(2)))


@pytest.mark.parametrize(
    "optimizer",
    [
        qml.GradientDescentOptimizer,
        qml.AdamOptimizer,
        qml.MomentumOptimizer,
        qml.NesterovMomentumOptimizer,
        qml.RMSPropOptimizer,
        qml.AdagradOptimizer,
    ],
)
def test_pennylane_optimizers_step_a_compiled_cost_as_the_uncompiled_qnode(optimizer):
    # the qubit-rotation demo's loop with a qjit cost; was: CompileTypeError "autograd ...
    # cannot differentiate a qjit-compiled function"
    compiled, uncompiled = _compiled_cost(), qml.QNode(_cost_body, default(2))
    opt_compiled, opt_uncompiled = optimizer(0.2), optimizer(0.2)
    p = pnp.array([0.3, 0.5, 0.1], requires_grad=True)
    pe = p.copy()
    for _ in range(4):
        p, cost = opt_compiled.step_and_cost(compiled, p)
        pe, cost_e = opt_uncompiled.step_and_cost(uncompiled, pe)
    np.testing.assert_allclose(p, pe, atol=1e-10)
    np.testing.assert_allclose(cost, cost_e, atol=1e-10)


def test_qml_grad_and_jacobian_of_compiled_functions_outside_qjit():
    p = pnp.array([0.3, 0.5, 0.1])
    expected = qml.grad(qml.QNode(_cost_body, default(2)))(p)
    np.testing.assert_allclose(qml.grad(_compiled_cost())(p), expected, atol=1e-10)

    @cofactor.qjit(static_argnums=1)
    def power_sum(x, n, scale=1.0):
        return np.sum(np.sin(x) ** n) * scale

    x = pnp.array([0.4, 1.1])
    # a static argument and a differentiated keyword argument
    gx, gs = qml.grad(lambda x, s: power_sum(x, 3, scale=s), argnums=[0, 1])(x, pnp.array(2.0))
    np.testing.assert_allclose(gx, 2 * 3 * np.sin(x) ** 2 * np.cos(x), atol=1e-10)
    np.testing.assert_allclose(gs, np.sum(np.sin(x) ** 3), atol=1e-10)
    # several results: the jacobian of a tuple
    pair = cofactor.qjit(lambda x: (np.sin(x), x**2))
    jac = qml.jacobian(lambda x: pnp.hstack(pair(x)))(pnp.array(0.3))
    np.testing.assert_allclose(jac, [np.cos(0.3), 0.6], atol=1e-10)


def test_autograd_through_a_compiled_function_refuses_what_it_cannot_do():
    sine = cofactor.qjit(lambda x: np.sin(x))
    with pytest.raises(CompileError, match=r"second autograd derivative.*cofactor\.jacobian"):
        qml.grad(qml.grad(sine))(pnp.array(0.3))

    summed = cofactor.qjit(lambda xs: xs[0] * xs[1])
    with pytest.raises(TypeError, match=r"argument\(s\) \[0\] hold autograd values inside"):
        qml.grad(lambda a, b: summed([a, b]), argnums=0)(pnp.array(1.0), pnp.array(2.0))


# --- Catalyst's `passes` decorators -----------------------------------------------------------
def _peephole_body(x):
    qml.RX(x, 0)
    qml.RX(0.1, 0)
    qml.RX(x**2, 0)
    qml.Hadamard(1)
    qml.Hadamard(1)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(0)), qml.state()


@pytest.mark.parametrize(
    "decorator, rx_count, h_count",
    [
        (lambda q: cofactor.passes.merge_rotations(q), 1, 2),
        (lambda q: cofactor.passes.cancel_inverses(q), 3, 0),
        (lambda q: cofactor.passes.disentangle_cnot(q), 3, 2),
        (
            lambda q: cofactor.passes.pipeline({"cancel_inverses": {}, "merge_rotations": {}})(q),
            1,
            0,
        ),
        (lambda q: cofactor.passes.apply_pass("merge-rotations")(q), 1, 2),
    ],
    ids=["merge_rotations", "cancel_inverses", "disentangle_cnot", "pipeline", "apply_pass"],
)
def test_catalyst_pass_decorators_give_pennylane_s_numbers(decorator, rx_count, h_count):
    # Catalyst's docs example (merge_rotations with get_compilation_stage); was: no
    # cofactor.passes (AttributeError)
    compiled = cofactor.qjit(decorator(qml.QNode(_peephole_body, lightning(2))))
    expected = qml.QNode(_peephole_body, default(2))(0.54)
    for got, exp in zip(compiled(0.54), expected, strict=True):
        np.testing.assert_allclose(got, exp, atol=1e-12)
    emitted = cofactor.debug.get_compilation_stage(compiled, "QuantumCompilationPass")
    assert emitted == compiled.mlir
    assert (emitted.count('"RX"'), emitted.count('"Hadamard"')) == (rx_count, h_count)
    assert cofactor.debug.get_compilation_stage(compiled, "last") == compiled.llvmir


def test_a_catalyst_pass_without_counterpart_and_bad_stages_are_named():
    compiled = cofactor.qjit(
        cofactor.passes.apply_pass("to-ppr")(qml.QNode(_peephole_body, lightning(2)))
    )
    with pytest.raises(NotImplementedError, match=r"'to-ppr'.*no counterpart.*Remove the pass"):
        compiled(0.5)
    with pytest.raises(ValueError, match=r"unknown compilation stage 'HLO'"):
        cofactor.debug.get_compilation_stage(compiled, "HLO")
    with pytest.raises(CompileError, match=r"has not been compiled yet"):
        cofactor.debug.get_compilation_stage(cofactor.qjit(lambda x: x), "mlir")


# --- catalyst.debug.print(x, memref=True) / print_memref --------------------------------------
def test_debug_print_memref_prints_the_buffer_layout_at_run_time(capfd):
    # was: TypeError "debug.print got keyword argument(s) ['memref']"
    @cofactor.qjit
    def show(x):
        cofactor.debug.print(x, memref=True)
        cofactor.debug.print_memref(x[1])
        return x

    capfd.readouterr()
    show(np.arange(6.0).reshape(2, 3))
    lines = capfd.readouterr().out.splitlines()
    assert "rank = 2 offset = 0 sizes = [2, 3] strides = [3, 1] data =" in lines[0]
    assert lines[0].startswith("MemRef: base@ = 0x")
    assert lines[1:3] == ["[[0. 1. 2.]", " [3. 4. 5.]]"]
    assert "rank = 1 offset = 0 sizes = [3] strides = [1] data =" in lines[3]
    assert lines[4] == "[3. 4. 5.]"
    with pytest.raises(TypeError, match=r"memref=True\) prints one array"):
        cofactor.debug.print(np.zeros(2), 1.0, memref=True)


# --- catalyst.autograph_source, and autograph in a nested qjit function -----------------------
def test_autograph_source_shows_the_converted_functions():
    # was: AttributeError (no cofactor.autograph_source)
    def inner(x):
        if x > 1.0:
            x = x * 2
        return x

    @qml.qnode(lightning(1))
    def circuit(x):
        qml.RY(x, 0)
        return qml.expval(qml.Z(0))

    @cofactor.qjit(autograph=True)
    def outer(x: float):
        return inner(x) + circuit(x)

    assert "ag__.if_stmt" in cofactor.autograph_source(inner)
    assert "def ag__circuit" in cofactor.autograph_source(circuit)
    assert "ag__.converted_call" in cofactor.autograph_source(outer)
    assert cofactor.autograph.autograph_source is cofactor.autograph_source
    with pytest.raises(cofactor.AutoGraphError, match="not converted by AutoGraph"):
        cofactor.autograph_source(cofactor.qjit(lambda x: x))


def test_a_qjit_function_called_by_converted_code_is_converted():
    # Catalyst converts the function of a nested qjit object; was: "a traced value was used
    # where Python needs a concrete bool" from the inner `if`
    @cofactor.qjit
    @qml.qnode(lightning(1))
    def inner(x):
        if x > 0.5:
            qml.RY(x, 0)
        return qml.expval(qml.Z(0))

    @cofactor.qjit(autograph=True)
    def outer(x):
        return inner(x)

    np.testing.assert_allclose([outer(0.3), outer(0.9)], [1.0, np.cos(0.9)], atol=1e-12)
    assert "def ag__inner" in cofactor.autograph_source(inner)


# --- simplifying transforms on circuits with compiled control flow ----------------------------
def _looped_body(n, x):
    @cofactor.for_loop(0, n, 1)
    def layer(i):
        qml.RX(x, wires=0)
        qml.T(0)
        qml.RX(0.2, wires=0)
        qml.Hadamard(1)
        qml.Hadamard(1)

    layer()
    qml.RY(x, 0)
    qml.RY(x, 0)
    return qml.expval(qml.PauliZ(0)), qml.state()


def _unrolled_body(n, x):
    for _ in range(n):
        qml.RX(x, wires=0)
        qml.T(0)
        qml.RX(0.2, wires=0)
        qml.Hadamard(1)
        qml.Hadamard(1)
    qml.RY(x, 0)
    qml.RY(x, 0)
    return qml.expval(qml.PauliZ(0)), qml.state()


@pytest.mark.parametrize(
    "transform",
    [
        lambda q: cofactor.passes.merge_rotations(q),
        qml.transforms.cancel_inverses,
        lambda q: cofactor.passes.pipeline({"merge_rotations": {}, "disentangle_swap": {}})(q),
    ],
    ids=["merge_rotations", "cancel_inverses", "pipeline"],
)
def test_simplifying_transforms_leave_a_circuit_with_control_flow_as_written(transform):
    # Catalyst's autograph test_with_pass: a merge_rotations QNode with a loop over a traced
    # range; was: "the transform merge-rotations cannot be applied ... for_loop"
    compiled = cofactor.qjit(transform(qml.QNode(_looped_body, lightning(2))))
    expected = qml.QNode(_unrolled_body, default(2))(3, 0.1)
    for got, exp in zip(compiled(3, 0.1), expected, strict=True):
        np.testing.assert_allclose(got, exp, atol=1e-12)


def test_a_transform_that_changes_the_tapes_still_refuses_control_flow():
    compiled = cofactor.qjit(
        qml.transforms.split_non_commuting(qml.QNode(_looped_body, lightning(2)))
    )
    with pytest.raises(CompileError, match=r"split_non_commuting cannot be applied.*for_loop"):
        compiled(3, 0.1)


# --- QNG with a compiled cost and a compiled metric tensor (the QNG demo outside qjit) --------
def test_qng_optimizer_with_a_compiled_cost_and_metric_tensor():
    def body(p):
        qml.RX(p[0], 0)
        qml.RY(p[1], 1)
        qml.CNOT([0, 1])
        qml.RY(p[2], 0)
        return qml.expval(qml.Z(1) + 0.5 * qml.X(0))

    qnode = qml.QNode(body, lightning(2))
    cost = cofactor.qjit(qnode)
    metric = cofactor.qjit(qml.metric_tensor(qnode, approx="block-diag"))
    opt, opt_expected = qml.QNGOptimizer(0.1), qml.QNGOptimizer(0.1)
    p = pnp.array([0.3, 0.5, 0.2], requires_grad=True)
    pe = p.copy()
    for _ in range(2):
        p = opt.step(cost, p, metric_tensor_fn=metric)
        pe = opt_expected.step(qml.QNode(body, default(2)), pe)
    np.testing.assert_allclose(p, pe, atol=1e-10)


# --- refusals that name the operation ----------------------------------------------------------
def test_molecular_hamiltonian_of_traced_coordinates_is_refused_by_name():
    # was: "numpy.gammainc is not supported by cofactor's tracer"
    @cofactor.qjit
    def energy_surface(coordinates):
        hamiltonian, _ = qml.qchem.molecular_hamiltonian(["H", "H"], coordinates)
        return 1.0

    with pytest.raises(
        CompileError,
        match=r"molecular_hamiltonian of traced coordinates.*"
        r"outside qjit",
    ):
        energy_surface(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.4]))


def test_dynamic_wire_allocation_is_refused_by_name():
    # was: "wire <DynamicWire> is not on the device"
    def body(x):
        qml.RX(x, 0)
        with qml.allocate(1) as extra:
            qml.CNOT([0, extra[0]])
            qml.CNOT([0, extra[0]])
        return qml.expval(qml.Z(0))

    with pytest.raises(CompileError, match=r"qml\.allocate .*declare the extra wires"):
        cofactor.qjit(qml.QNode(body, lightning(2)))(0.4)


# --- mitigate_with_zne(folding="local-all") of a circuit with compiled control flow ----------
def _zne_loop_body(x, n):
    qml.Hadamard(0)
    qml.RZ(x, 0)

    @cofactor.for_loop(0, n, 1)
    def layer(i):
        qml.RX(x, 0)
        qml.CNOT([0, 1])

    layer()
    qml.RY(x, 1)
    return qml.expval(qml.Y(0) @ qml.Z(1))


def test_local_folding_folds_the_gates_inside_compiled_loops():
    # Catalyst's test_mitigation control-flow cases with folding="local-all"; was:
    # "mitigate_with_zne_local_folding cannot be applied ... for_loop"
    looped = qml.QNode(_zne_loop_body, lightning(2))
    expected = qml.QNode(_zne_loop_body, default(2))(0.3, 3)

    @cofactor.qjit
    def mitigated(x, n):
        zne = cofactor.mitigate_with_zne(looped, scale_factors=[1, 3, 5], folding="local-all")
        each = cofactor.mitigate_with_zne(
            looped, scale_factors=[1, 3, 5], folding="local-all", extrapolate=lambda s, y: y
        )
        return zne(x, n), each(x, n)

    estimate, per_scale_factor = mitigated(0.3, 3)
    # noiseless: every folded circuit (gates before, in and after the loop) gives the value
    np.testing.assert_allclose(per_scale_factor, [expected] * 3, atol=1e-10)
    np.testing.assert_allclose(estimate, expected, atol=1e-10)
    # the circuits of scale factors 1, 3, 5 hold each gate 1 + 3 + 5 times (one loop body
    # each), in both mitigations
    assert mitigated.mlir.count('"CNOT"') == 2 * 9
    assert mitigated.mlir.count('"RZ"') == 2 * 9


# --- time evolution under a non-commuting Hamiltonian with a traced time ----------------------
_HAMILTONIAN = qml.X(0) + 0.5 * qml.Z(0) @ qml.Z(1) + 0.3 * qml.Y(1)


def _evolution_body(t):
    qml.Hadamard(0)
    qml.evolve(_HAMILTONIAN, t)
    return qml.expval(qml.Z(0) @ qml.Y(1))


def test_evolution_of_a_non_commuting_hamiltonian_is_small_and_differentiable():
    # was: a degree-18 Taylor series of the traced 4x4 matrix (~20000 IR lines, 6 s to
    # compile) whose gradient was refused; now eigh of the constant H at trace time and a
    # diagonal of run-time phases
    compiled = cofactor.qjit(qml.QNode(_evolution_body, lightning(2)))
    uncompiled = qml.QNode(_evolution_body, default(2))
    np.testing.assert_allclose(compiled(0.7), uncompiled(0.7), atol=1e-12)
    assert compiled.mlir.count("\n") < 1000
    grad = cofactor.qjit(cofactor.grad(qml.QNode(_evolution_body, lightning(2))))(0.7)
    # (qml.grad of this QNode on default.qubit gives 0.370, which disagrees with its own
    # finite differences; the central difference of default.qubit's values is the reference)
    h = 1e-6
    np.testing.assert_allclose(
        grad, (uncompiled(0.7 + h) - uncompiled(0.7 - h)) / (2 * h), atol=1e-7
    )

    exp_state = cofactor.qjit(
        qml.QNode(lambda t: (qml.exp(_HAMILTONIAN, -1j * t), qml.state())[-1], lightning(2))
    )
    expected = qml.QNode(lambda t: (qml.exp(_HAMILTONIAN, -1j * t), qml.state())[-1], default(2))
    np.testing.assert_allclose(exp_state(0.4), expected(0.4), atol=1e-12)


def test_non_unitary_diagonals_computed_at_run_time_are_refused():
    # was: the moduli were dropped silently (PennyLane's decomposition keeps only the angles)
    def diagonal(d):
        qml.Hadamard(0)
        qml.DiagonalQubitUnitary(d, wires=0)
        return qml.state()

    compiled = cofactor.qjit(qml.QNode(diagonal, lightning(1)))
    phases = np.exp(1j * np.array([0.3, 1.0]))
    np.testing.assert_allclose(
        compiled(phases), qml.QNode(diagonal, default(1))(phases), atol=1e-12
    )
    with pytest.raises(ValueError, match=r"Operator must be unitary"):
        compiled(np.array([2.0, 1.0], dtype=complex))
    real_exponent = cofactor.qjit(
        qml.QNode(lambda t: (qml.exp(_HAMILTONIAN, t), qml.state())[-1], lightning(2))
    )
    with pytest.raises(ValueError, match=r"modulus 1 .*imaginary coefficient"):
        real_exponent(0.7)


# --- error wordings shared with Catalyst's --------------------------------------------------
def test_wordings_of_argument_and_list_index_errors():
    with pytest.raises(TypeError, match=r"Cannot interpret value of type set"):
        cofactor.qjit(lambda s: 1.0)({1, 2})

    @cofactor.qjit(autograph=True)
    def pick(n):
        values = [1.0, 2.0, 3.0]
        total = 0.0
        for i in range(n):
            total += values[i]
        return total

    with pytest.raises(CompileError, match=r"list indexed by a traced integer.*__index__"):
        pick(2)


def test_trotter_product_with_a_traced_number_of_steps_is_refused_and_the_advice_works():
    # was: "cofactor cannot trace a value of type Evolution"
    hamiltonian = qml.dot([0.5, 0.3], [qml.X(0) @ qml.X(1), qml.Z(0)])

    def trotter(t, n):
        qml.TrotterProduct(hamiltonian, t, n=n, order=2)
        return qml.expval(qml.Z(0))

    with pytest.raises(CompileError, match=r"TrotterProduct with a traced number of steps"):
        cofactor.qjit(qml.QNode(trotter, lightning(2)))(0.5, 3)

    def stepped(t, n):
        @cofactor.for_loop(0, n, 1)
        def step(i):
            qml.TrotterProduct(hamiltonian, t / n, n=1, order=2)

        step()
        return qml.expval(qml.Z(0))

    np.testing.assert_allclose(
        cofactor.qjit(qml.QNode(stepped, lightning(2)))(0.5, 3),
        qml.QNode(trotter, default(2))(0.5, 3),
        atol=1e-12,
    )
