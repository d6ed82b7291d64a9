"""A fifth batch of programs shaped like PennyLane's demos and Catalyst's docs: `qml.specs` of
a qjit QNode, `scipy.linalg.expm` and `numpy.linalg.svd`/`eig` of traced matrices,
`qjit(abstracted_axes=...)`, autograph's `while ... and ...` with a Python counter, complex
ordering, and noise channels; uncompiled PennyLane's (or numpy's) numbers, or a clear error
that names the operation and says what to do."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
import scipy.linalg
from demo_support import default, lightning

import cofactor
from cofactor import AutoGraphError, CompileError, DifferentiableCompileError

pytestmark = pytest.mark.needs_toolchain


# --- qml.specs of a qjit-compiled QNode ---------------------------------------------------
def _specs_body(x, n):
    qml.RX(x, 0)
    qml.CNOT([0, 1])

    @cofactor.for_loop(0, n, 1)
    def layer(i):
        qml.Hadamard(2)
        qml.CRY(x, [1, 2])

    layer()
    qml.QFT(wires=[0, 1, 2])
    return qml.expval(qml.Z(1))


def test_specs_of_a_qjit_qnode_are_the_qnodes_at_the_device_level():
    # was: ValueError "qp.specs can only be applied to a QNode or qjit'd QNode"
    compiled = cofactor.qjit(qml.QNode(_specs_body, lightning(3)), static_argnums=1)
    specs = qml.specs(compiled)(0.4, 2)
    expected = qml.specs(qml.QNode(_specs_body, lightning(3)), level="device")(0.4, 2)
    assert specs.level == "device"
    assert specs.resources == expected.resources
    assert specs.resources.gate_types["CRY"] == 2  # the loop, as it runs
    # PennyLane's own levels, and the compiler="cofactor" spelling
    top = qml.specs(qml.qjit(qml.QNode(_specs_body, lightning(3)), compiler="cofactor"), level=0)
    assert dict(top(0.4, 3).resources.gate_types) == {
        "RX": 1,
        "CNOT": 1,
        "Hadamard": 3,
        "CRY": 3,
        "QFT": 1,
    }


def test_specs_of_a_qjit_function_that_is_not_a_qnode_is_refused_by_name():
    @cofactor.qjit
    def workflow(x):
        return qml.QNode(lambda y: _specs_body(y, 1), lightning(3))(x)

    with pytest.raises(ValueError, match="workflow compiles a function; call qml.specs on the"):
        qml.specs(workflow)(0.3)


# --- scipy.linalg.expm of a traced matrix ------------------------------------------------
H = np.array([[0.5, 1.0 - 0.5j], [1.0 + 0.5j, -0.25]])


def _evolve_module_attribute(t):
    return scipy.linalg.expm(-1j * t * H)


def _evolve_imported_inside(a):
    from scipy.linalg import expm

    return expm(a * np.array([[0.0, 1.0], [-1.0, 0.0]]) + np.diag([a, 2 * a]))


def test_scipy_expm_of_a_traced_matrix():
    # was: AttributeError 'Tracer' object has no attribute 'flags' (scipy reads numpy internals)
    np.testing.assert_allclose(
        cofactor.qjit(_evolve_module_attribute)(0.7), _evolve_module_attribute(0.7), atol=1e-12
    )
    np.testing.assert_allclose(
        cofactor.qjit(_evolve_imported_inside)(1.3), _evolve_imported_inside(1.3), atol=1e-12
    )

    def circuit(t):
        qml.Hadamard(0)
        qml.QubitUnitary(scipy.linalg.expm(-1j * t * H), wires=0)
        return qml.probs(wires=0)

    compiled = cofactor.qjit(qml.QNode(circuit, lightning(1)))
    np.testing.assert_allclose(compiled(0.4), qml.QNode(circuit, default(1))(0.4), atol=1e-12)


# --- numpy.linalg.svd / eig of traced matrices --------------------------------------------
A = np.array([[1.0, 2.0], [0.5, -1.0], [0.3, 0.8]])
B = np.array([[2.0, 1.0, 0.0], [-1.0, 0.5, 0.3], [0.2, 0.0, 1.5]])


def _decompositions(a, b):
    return (
        np.linalg.svd(a),
        np.linalg.svd(a, full_matrices=False),
        np.linalg.svd(b, compute_uv=False),
        np.linalg.eig(b),
        np.linalg.eigvals(b),
    )


def _low_rank_fit(a):
    # the rank-1 part of a (sign-independent), weighted
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.sum((u[:, :1] * s[:1]) @ vh[:1] * np.arange(6.0).reshape(3, 2)) + np.sum(s)


def _fd_gradient(fn, a, eps=1e-6):
    grad = np.zeros_like(a)
    for index in np.ndindex(a.shape):
        step = np.zeros_like(a)
        step[index] = eps
        grad[index] = (fn(a + step) - fn(a - step)) / (2 * eps)
    return grad


def test_svd_and_eig_of_traced_matrices_are_numpys():
    # was: CompileError "numpy.linalg.svd is not supported on traced values"
    got, expected = cofactor.qjit(_decompositions)(A, B), _decompositions(A, B)
    assert type(got[0]) is type(expected[0])  # SVDResult: .U, .S, .Vh
    flat_got, flat_expected = [*got[0], *got[1], got[2]], [*expected[0], *expected[1], expected[2]]
    for g, e in zip(flat_got, flat_expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-12)
    # eig: always complex (as jnp.linalg.eig), numpy's values otherwise
    assert got[3].eigenvalues.dtype == np.complex128
    np.testing.assert_allclose(got[3].eigenvalues, expected[3].eigenvalues, atol=1e-12)
    np.testing.assert_allclose(got[3].eigenvectors, expected[3].eigenvectors, atol=1e-12)
    np.testing.assert_allclose(got[4], expected[4], atol=1e-12)


def test_svd_gradients_match_finite_differences():
    nuclear = cofactor.qjit(cofactor.grad(lambda a: np.sum(np.linalg.svd(a, compute_uv=False))))
    u, _, vh = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(nuclear(A), u @ vh, atol=1e-12)
    low_rank = cofactor.qjit(cofactor.grad(_low_rank_fit))
    np.testing.assert_allclose(low_rank(A), _fd_gradient(_low_rank_fit, A), atol=1e-7)


def test_undefined_decomposition_derivatives_are_refused_by_name():
    full = cofactor.qjit(cofactor.grad(lambda a: np.sum(np.linalg.svd(a)[0])))
    with pytest.raises(ValueError, match=r"full_matrices=True\) of a non-square.*full_matrices=F"):
        full(A)
    eig = cofactor.qjit(cofactor.grad(lambda b: np.real(np.linalg.eigvals(b)[0])))
    with pytest.raises(
        DifferentiableCompileError, match="numpy.linalg.eigvals: .* use np.linalg.e"
    ):
        eig(B)


# --- qjit(abstracted_axes=...) -------------------------------------------------------------
def test_arrays_made_by_numpy_constructors_take_traced_indices():
    # `table[i]` in a loop body; was numpy's IndexError "only integers, slices ..."
    outside = np.array([0.5, -1.0, 2.0])

    def weighted(x):
        ones, table = np.ones(3), np.zeros(3) + outside

        @cofactor.for_loop(0, 3, 1)
        def body(i, acc):
            return acc + ones[i] * x + table[i]

        return body(0.0)

    assert np.isclose(cofactor.qjit(weighted)(2.0), weighted(2.0))

    def indexed_outside(i):
        return outside[i]

    with pytest.raises(IndexError, match="only integers") as info:  # with the way out
        cofactor.qjit(indexed_outside)(1)
    assert "np.zeros(len(a)) + a" in "".join(info.value.__notes__)


def test_at_updates_with_an_index_array_made_by_np_zeros_repeat_as_numpy():
    # a wrong number before: the repeated index of a HostArray key was updated once
    v = np.array([0.3, -1.1, 2.5, 0.0, 4.0])

    def update(a):
        index = np.zeros(3, dtype=np.int64)
        index[2] = 3
        return a.at[index].add(1.0)

    expected = v.copy()
    np.add.at(expected, [0, 0, 3], 1.0)
    np.testing.assert_allclose(cofactor.qjit(update)(v), expected)


def test_abstracted_axes_compile_one_version_per_shape():
    # was: NotImplementedError "qjit option abstracted_axes=... is not supported"
    @cofactor.qjit(abstracted_axes={0: "n"})
    def total(x):
        @cofactor.for_loop(0, x.shape[0], 1)
        def add(i, acc):
            return acc + x[i] * np.ones(x.shape[0])[i]

        return add(0.0)

    assert total(np.arange(3.0)) == 3.0
    assert total(np.arange(5.0)) == 10.0
    assert total.compile_count == 2


# --- autograph ----------------------------------------------------------------------------
def test_autograph_while_with_and_of_a_python_counter():
    # Catalyst's `while param < 0.5 and n < 3:` (n a Python int on the first test); was: "A
    # traced value was used where Python needs a concrete bool"
    @cofactor.qjit(autograph=True)
    def grow(param):
        n = 0
        while param < 0.5 and n < 3:
            param *= 1.5
            n += 1
        return n

    assert grow(0.4) == 1
    assert grow(0.1) == 3


def test_autograph_loop_carried_values_are_named_as_catalyst_does():
    def uninitialised(pred: bool):
        while pred:
            x = 3
        return x  # noqa: F821

    with pytest.raises(AutoGraphError, match="'x' is potentially uninitialized"):
        cofactor.qjit(autograph=True)(uninitialised)

    def text_carried(pred: bool):
        x = ""
        while pred:
            x = 3
        return x

    with pytest.raises(AutoGraphError, match="'x' was initialized with type <class 'str'>"):
        cofactor.qjit(autograph=True)(text_carried)


def test_ordered_comparisons_of_traced_complex_numbers_are_numpys():
    # numpy orders complex numbers lexicographically; was: "complex numbers cannot be ordered"
    a = np.array([1 + 1j, 2 + 0j, 1 + 2j, 3 - 1j, 2 + 0j])
    b = np.array([1 + 2j, 1 + 5j, 1 + 2j, 3 - 2j, 2 + 0j])
    compiled = cofactor.qjit(lambda a, b: (a < b, a <= b, a > b, a >= b))
    for got, expected in zip(compiled(a, b), (a < b, a <= b, a > b, a >= b), strict=True):
        np.testing.assert_array_equal(got, expected)


# --- noise channels ------------------------------------------------------------------------
def _noisy_circuit(x):
    qml.RX(x, 0)
    qml.DepolarizingChannel(0.1, wires=0)
    return qml.expval(qml.Z(0))


@pytest.mark.parametrize("mixed", [True, False])
def test_noise_channels_are_refused_saying_why(mixed):
    # was: "operation DepolarizingChannel is not supported by cofactor's runtime" (or a list
    # of devices), without the reason or the way out
    device = qml.device("default.mixed", wires=1) if mixed else default(1)
    compiled = cofactor.qjit(qml.QNode(_noisy_circuit, device))
    with pytest.raises(CompileError, match="density-matrix simulator.*without qjit on default.mix"):
        compiled(0.3)
