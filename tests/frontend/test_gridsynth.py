"""Ross-Selinger ("gridsynth") Clifford+T decompositions of angles known only at run time,
without JAX: `clifford_t_decomposition(method="gridsynth")` and
`rs_decomposition(..., is_qjit=True)` under qjit, compared with uncompiled PennyLane
(default.qubit) running the same decomposition on the same angle."""

from __future__ import annotations

import math

import numpy as np
import pennylane as qml
import pytest
from pennylane.ops.op_math.decompositions import normal_forms, ross_selinger
from pennylane.ops.op_math.decompositions.ross_selinger import rs_decomposition
from pennylane.transforms.decompositions import clifford_t_transform

pytestmark = pytest.mark.needs_toolchain

dev2 = qml.device("default.qubit", wires=2)


def _jit(f, **kwargs):
    return qml.qjit(f, compiler="cofactor", **kwargs)


@pytest.mark.parametrize("kind", [qml.RZ, qml.PhaseShift])
def test_rs_decomposition_is_qjit_traced_angle_matches_uncompiled(kind):
    """PennyLane's JAX path (is_qjit=True) runs on cofactor: the word found at run time is
    PennyLane's own, so the state equals the uncompiled decomposition's to rounding."""

    def circuit(x, is_qjit):
        qml.H(0)
        qml.H(1)
        rs_decomposition(kind(x, wires=1), 1e-3, is_qjit=is_qjit)
        return qml.state()

    compiled = _jit(qml.qnode(dev2)(lambda x: circuit(x, True)))
    reference = qml.qnode(dev2)(lambda x: circuit(x, False))
    for x in (0.3, -2.5, 7.0, 9.0):
        np.testing.assert_allclose(compiled(x), reference(x), atol=1e-10)


def test_rs_decomposition_is_qjit_constant_angle():
    """A constant angle takes the same path with the word found at trace time (as in
    PennyLane's own test with Catalyst)."""
    op = qml.RZ(math.pi / 42, wires=[1])

    @_jit
    @qml.qnode(dev2)
    def compiled():
        rs_decomposition(op, epsilon=1e-4, is_qjit=True)
        return qml.state()

    @qml.qnode(dev2)
    def reference():
        rs_decomposition(op, epsilon=1e-4)
        return qml.state()

    np.testing.assert_allclose(compiled(), reference(), atol=1e-10)


def _angles_circuit(angle, qb):
    qml.H(qb)
    qml.CNOT([qb, qb + 1])
    qml.RX(angle * 0.37, qb)
    qml.RZ(angle * 0.27, qb + 1)
    qml.RY(angle * 0.73, qb)
    qml.CNOT([qb + 1, qb])
    qml.H(qb)
    return qml.expval(qml.Z(0) @ qml.Z(1))


def test_clifford_t_gridsynth_traced_angles_qfunc_transform():
    decomposed = qml.QNode(
        qml.clifford_t_decomposition(_angles_circuit, method="gridsynth", epsilon=1e-4), dev2
    )
    exact = qml.QNode(_angles_circuit, dev2)
    compiled = _jit(decomposed)
    for angle in (math.pi, 0.3, -2.0):
        got = compiled(angle, 0)
        np.testing.assert_allclose(got, exact(angle, 0), atol=1e-3)
        np.testing.assert_allclose(got, decomposed(angle, 0), atol=1e-3)


def test_clifford_t_gridsynth_traced_angles_qnode_transform():
    """On a QNode (its transform program runs on cofactor's recorded tape)."""
    qnode = qml.QNode(_angles_circuit, dev2)
    decomposed = qml.clifford_t_decomposition(qnode, method="gridsynth", epsilon=1e-4)
    compiled = _jit(decomposed)
    for angle in (0.9, -1.3):
        np.testing.assert_allclose(compiled(angle, 0), qnode(angle, 0), atol=1e-3)


def test_clifford_t_sk_traced_angle_is_refused():
    decomposed = qml.QNode(qml.clifford_t_decomposition(_angles_circuit, method="sk"), dev2)
    with pytest.raises(RuntimeError, match="Solovay-Kitaev"):
        _jit(decomposed)(0.5, 0)


def test_pennylane_modules_restored_after_trace():
    """The stand-ins exist only while cofactor traces a circuit."""
    before = (ross_selinger.is_jax, normal_forms.is_jax, ross_selinger.AvailableCompilers)

    @_jit
    @qml.qnode(dev2)
    def c(x):
        rs_decomposition(qml.RZ(x, 0), 1e-2, is_qjit=True)
        return qml.state()

    c(0.4)
    after = (ross_selinger.is_jax, normal_forms.is_jax, ross_selinger.AvailableCompilers)
    assert after == before
    assert type(clifford_t_transform._CLIFFORD_T_CACHE).__name__ != "_TracedAngleCache"


def test_transform_error_keeps_its_type():
    """A transform that raises under qjit (PennyLane's Solovay-Kitaev refuses when a compiler
    is active) gives a CompileError that is also the exception PennyLane raised."""
    from cofactor import CompileError

    qnode = qml.QNode(_angles_circuit, dev2)
    decomposed = qml.clifford_t_decomposition(qnode, method="sk")
    with pytest.raises(RuntimeError, match="Solovay-Kitaev") as info:
        _jit(decomposed)(0.5, 0)
    assert isinstance(info.value, CompileError)


def test_traces_in_threads_restore_pennylane_modules():
    """Concurrent traces install the stand-ins once; the last one out restores them."""
    import threading

    before = (ross_selinger.is_jax, ross_selinger.AvailableCompilers, normal_forms.is_jax)
    statistics = (qml.expval, qml.probs, qml.counts)  # patched while a circuit is traced
    results, errors = {}, []

    def run(k):
        try:

            @_jit
            @qml.qnode(dev2)
            def c(x):
                rs_decomposition(qml.RZ(x, 0), 1e-2, is_qjit=True)
                return qml.state()

            results[k] = c(0.2 * (k + 1))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, state in results.items():
        ref = qml.qnode(dev2)(lambda x: (rs_decomposition(qml.RZ(x, 0), 1e-2), qml.state())[1])
        np.testing.assert_allclose(state, ref(0.2 * (k + 1)), atol=1e-10)
    assert (ross_selinger.is_jax, ross_selinger.AvailableCompilers, normal_forms.is_jax) == before
    assert (qml.expval, qml.probs, qml.counts) == statistics


def _rotations(x):
    qml.Hadamard(0)
    qml.RZ(x, 0)
    qml.PhaseShift(x * 0.2, 0)
    qml.RZ(0.7, 0)
    return qml.state()


dev1 = qml.device("default.qubit", wires=1)


def test_gridsynth_pass_states_match_pennylane():
    """`qml.transforms.gridsynth` (Catalyst's pass; no tape implementation in PennyLane) runs
    as cofactor's tape transform: states, global phase included, within epsilon."""
    exact = qml.QNode(_rotations, dev1)
    compiled = _jit(qml.transforms.gridsynth(exact, epsilon=1e-4))
    for x in (1.1, -3.0, 8.0):
        np.testing.assert_allclose(compiled(x), exact(x), atol=1e-3)


def test_gridsynth_pass_ppr_basis_is_refused():
    from cofactor import CompileError

    compiled = _jit(qml.transforms.gridsynth(qml.QNode(_rotations, dev1), ppr_basis=True))
    with pytest.raises(CompileError, match="ppr_basis"):
        compiled(0.3)


def test_clifford_t_traced_angles_state_with_global_phase():
    exact = qml.QNode(_rotations, dev1)
    compiled = _jit(qml.clifford_t_decomposition(exact, method="gridsynth", epsilon=1e-4))
    for x in (0.4, -2.2):
        np.testing.assert_allclose(compiled(x), exact(x), atol=1e-3)


def _clear_pennylane_search_caches():
    from pennylane.ops.op_math.decompositions import grid_problems, norm_solver

    for module in (grid_problems, norm_solver, normal_forms):
        for value in vars(module).values():
            if hasattr(value, "cache_clear"):
                value.cache_clear()


def test_run_time_search_never_queues_into_another_threads_circuit():
    """The run-time search builds PennyLane operators; PennyLane's queuing is process-wide, so
    while another thread builds a circuit they landed on its tape (concurrent compiles gave
    other states). The search now waits until no thread builds a circuit."""
    import threading

    @_jit
    @qml.qnode(dev2)
    def c(x):
        rs_decomposition(qml.RZ(x, 0), 1e-2, is_qjit=True)
        return qml.state()

    c(0.1)  # compiled here; the call below only runs the search
    _clear_pennylane_search_caches()  # so that the search builds its operators again
    results = []
    with qml.queuing.AnnotatedQueue() as queue:  # another circuit being built
        worker = threading.Thread(target=lambda: results.append(c(0.3)))
        worker.start()
        worker.join(timeout=2.0)
        queued = list(queue.queue)
    worker.join()
    assert queued == []
    ref = qml.qnode(dev2)(lambda x: (rs_decomposition(qml.RZ(x, 0), 1e-2), qml.state())[1])
    np.testing.assert_allclose(results[0], ref(0.3), atol=1e-10)
