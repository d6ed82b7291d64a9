"""Gradients with respect to traced Hamiltonian coefficients: `qml.expval(H)` with H's
coefficients arguments of the QNode (or computed from them), differentiated alone or
together with gate parameters, with the adjoint and parameter-shift methods, against
uncompiled PennyLane (default.qubit with autograd).

d<sum_k c_k O_k>/dc_k = <O_k>: the runtime measures each term while it records
(`cf_rt_obs_hamiltonian_diff`), and --cofactor-split-qnodes makes the coefficients
parameters of the quantum part, so Enzyme carries them back to the arguments."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor
from cofactor import qjit

pytestmark = pytest.mark.needs_toolchain

dev2 = qml.device("default.qubit", wires=2)

# each maker builds the measured observable from the coefficient vector c (length 3)
HAMILTONIANS = {
    "dot": lambda c: qml.dot(c, [qml.Z(0), qml.X(0) @ qml.X(1), qml.Y(1)]),
    "hamiltonian": lambda c: qml.Hamiltonian(c, [qml.Z(0), qml.X(0) @ qml.X(1), qml.Y(1)]),
    # as users write it (PennyLane's autograd reference needs qml.s_prod: an ArrayBox
    # times an operator fails there; see REFERENCE_FORMS)
    "sum_of_s_prods": lambda c: c[0] * qml.Z(0) + c[1] * qml.X(0) @ qml.X(1) + c[2] * qml.Y(1),
    # an Identity term (every qchem Hamiltonian has one): d<H>/dc_2 = 1
    "identity_term": lambda c: qml.Hamiltonian(c, [qml.Z(0), qml.X(1), qml.I(0)]),
    # repeated words: PennyLane adds their coefficients
    "repeated_words": lambda c: qml.Hamiltonian(c, [qml.Z(0), qml.Z(0), qml.Y(1)]),
    # a product of a traced sum and a constant sum on another wire (PennyLane's autograd
    # reference fails on products with traced coefficients in both factors)
    "product_of_sum": lambda c: qml.prod(
        qml.dot(c[:2], [qml.Z(0), qml.X(0)]), qml.Y(1) + 0.5 * qml.Z(1)
    ),
    # traced coefficients in both factors (PennyLane's autograd fails on this one: its
    # values are differentiated by central differences instead)
    "product_of_traced_sums": lambda c: (
        (c[0] * qml.Z(0) + c[1] * qml.X(0)) @ (qml.Y(1) + c[2] * qml.Z(1))
    ),
    # a single scaled term
    "s_prod": lambda c: qml.s_prod(c[0] * c[1] - c[2], qml.Z(0)),
    "hermitian_term": lambda c: qml.dot(
        c, [qml.Hermitian(np.diag([1.0, 2.0]), 0), qml.X(1), qml.Z(0)]
    ),
}


REFERENCE_FORMS = {
    "sum_of_s_prods": lambda c: qml.sum(
        qml.s_prod(c[0], qml.Z(0)),
        qml.s_prod(c[1], qml.X(0) @ qml.X(1)),
        qml.s_prod(c[2], qml.Y(1)),
    ),
}


def _circuit(make, diff_method):
    @qml.qnode(dev2, diff_method=diff_method)
    def circuit(x, c):
        qml.RX(x, wires=0)
        qml.CNOT(wires=[0, 1])
        qml.RY(0.3 * x + 0.1, wires=1)
        return qml.expval(make(c))

    return circuit


def _reference(make, x, c):
    circuit = _circuit(make, "backprop")
    return qml.grad(circuit, argnums=[0, 1])(
        pnp.array(x, requires_grad=True), pnp.array(c, requires_grad=True)
    )


def _central_differences(make, x, c, h=1e-6):
    """PennyLane's values, differentiated by central differences: for the product of
    sums, PennyLane 0.45.1's autograd gradient with respect to x is 0 from the second
    call of the same circuit in a process on (a PennyLane caching bug)."""
    circuit = _circuit(make, "backprop")

    def f(x, c):
        return float(np.real(circuit(x, c)))

    dx = (f(x + h, c) - f(x - h, c)) / (2 * h)
    dc = [(f(x, c + h * e) - f(x, c - h * e)) / (2 * h) for e in np.eye(len(c))]
    return dx, np.array(dc)


@pytest.mark.parametrize("diff_method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("name", sorted(HAMILTONIANS))
def test_coefficient_and_gate_gradients_match_pennylane(name, diff_method):
    make = HAMILTONIANS[name]
    circuit = _circuit(make, diff_method)
    x, c = 0.4, np.array([0.5, -1.2, 0.7])

    @qjit
    def both(x, c):
        return cofactor.value_and_grad(circuit, argnums=(0, 1))(x, c)

    value, (dx, dc) = both(x, c)
    fd = name in ("product_of_sum", "product_of_traced_sums")
    reference = REFERENCE_FORMS.get(name, make)
    ref_dx, ref_dc = (_central_differences if fd else _reference)(reference, x, c)
    atol = 1e-8 if fd else 1e-10
    np.testing.assert_allclose(value, np.real(_circuit(make, "backprop")(x, c)), atol=1e-12)
    np.testing.assert_allclose(dx, ref_dx, atol=atol)
    np.testing.assert_allclose(dc, ref_dc, atol=atol)
    assert np.max(np.abs(dc)) > 0.1  # not a vacuous comparison
    # the coefficients alone (the gate parameters are then not differentiated)
    only_c = qjit(cofactor.grad(circuit, argnums=1))(x, c)
    np.testing.assert_allclose(only_c, ref_dc, atol=atol)


def test_coefficients_computed_from_arguments_and_qml_grad_inside_qjit():
    """Coefficients computed from the arguments (sin, products, a parameter shared with a
    gate), differentiated with PennyLane's qml.grad inside qjit."""

    @qml.qnode(dev2, diff_method="adjoint")
    def circuit(w):
        qml.RY(w[0], wires=0)
        qml.IsingXX(w[1], wires=[0, 1])
        coeffs = [np.sin(w[2]) * w[0], w[1] ** 2, 2.0 * w[2]]
        return qml.expval(qml.dot(coeffs, [qml.Z(0), qml.X(0) @ qml.Y(1), qml.Z(1)]))

    @qml.qnode(dev2, diff_method="backprop")
    def reference(w):
        qml.RY(w[0], wires=0)
        qml.IsingXX(w[1], wires=[0, 1])
        coeffs = [pnp.sin(w[2]) * w[0], w[1] ** 2, 2.0 * w[2]]
        return qml.expval(qml.dot(coeffs, [qml.Z(0), qml.X(0) @ qml.Y(1), qml.Z(1)]))

    w = np.array([0.3, -0.8, 1.1])
    got = qjit(qml.grad(circuit))(w)
    np.testing.assert_allclose(
        got, qml.grad(reference)(pnp.array(w, requires_grad=True)), atol=1e-10
    )


def test_jacobian_of_several_measurements_with_traced_coefficients():
    """Two Hamiltonians (one measured twice) and a probability vector: rows of the Jacobian
    in measurement order, the coefficient columns after the gates'."""

    def body(x, c):
        qml.RX(x[0], wires=0)
        qml.CRY(x[1], wires=[0, 1])
        return (
            qml.expval(qml.dot(c[:2], [qml.Z(0), qml.X(1)])),
            qml.probs(wires=[1]),
            qml.expval(qml.s_prod(c[2], qml.Z(0) @ qml.Z(1)) + 0.5 * qml.Y(0)),
            qml.expval(qml.dot(c[:2], [qml.Z(0), qml.X(1)])),
        )

    circuit = qml.qnode(dev2, diff_method="parameter-shift")(body)
    reference = qml.qnode(dev2, diff_method="backprop")(body)
    x, c = np.array([0.7, -0.4]), np.array([0.9, -0.3, 1.7])

    def stacked(f):
        return lambda x, c: qml.math.hstack([qml.math.reshape(r, (-1,)) for r in f(x, c)])

    got_x, got_c = qjit(cofactor.jacobian(stacked(circuit), argnums=(0, 1)))(x, c)
    ref_x, ref_c = qml.jacobian(stacked(reference), argnums=[0, 1])(
        pnp.array(x, requires_grad=True), pnp.array(c, requires_grad=True)
    )
    np.testing.assert_allclose(got_x, ref_x, atol=1e-10)
    np.testing.assert_allclose(got_c, ref_c, atol=1e-10)


def test_coefficients_in_a_loop_of_gates():
    """A circuit whose gate count is only known at run time (a for_loop over a traced bound)
    numbers the coefficients after the loop's gates."""
    dev = qml.device("default.qubit", wires=3)

    @qml.qnode(dev, diff_method="adjoint")
    def circuit(x, c, n):
        @cofactor.for_loop(0, n, 1)
        def layer(i):
            qml.RY(x * (i + 1), wires=i % 3)
            qml.CNOT(wires=[i % 3, (i + 1) % 3])

        layer()
        return qml.expval(qml.Hamiltonian(c, [qml.Z(0), qml.X(1) @ qml.Z(2), qml.Y(2)]))

    @qml.qnode(dev, diff_method="backprop")
    def reference(x, c):
        for i in range(4):
            qml.RY(x * (i + 1), wires=i % 3)
            qml.CNOT(wires=[i % 3, (i + 1) % 3])
        return qml.expval(qml.Hamiltonian(c, [qml.Z(0), qml.X(1) @ qml.Z(2), qml.Y(2)]))

    x, c = 0.35, np.array([1.0, -0.5, 0.25])
    dx, dc = qjit(cofactor.grad(circuit, argnums=(0, 1)))(x, c, 4)
    ref_dx, ref_dc = qml.grad(reference, argnums=[0, 1])(
        pnp.array(x, requires_grad=True), pnp.array(c, requires_grad=True)
    )
    np.testing.assert_allclose(dx, ref_dx, atol=1e-10)
    np.testing.assert_allclose(dc, ref_dc, atol=1e-10)


def test_vqe_with_hamiltonian_coefficients_as_parameters():
    """qchem-shaped: the H2 Hamiltonian's words with its coefficients an argument; the
    energy's gradient with respect to the circuit parameters and the coefficients (e.g. to
    fit a model Hamiltonian), and a few steps of gradient descent on both."""
    H, n = qml.qchem.molecular_hamiltonian(
        ["H", "H"], np.array([0.0, 0.0, -0.6614, 0.0, 0.0, 0.6614])
    )
    coeffs0, words = H.terms()
    coeffs0 = np.array(np.real(coeffs0), dtype=float)
    dev = qml.device("default.qubit", wires=n)

    def body(params, coeffs):
        qml.BasisState(np.array([1, 1, 0, 0]), wires=range(n))
        qml.DoubleExcitation(params[0], wires=[0, 1, 2, 3])
        qml.SingleExcitation(params[1], wires=[0, 2])
        return qml.expval(qml.Hamiltonian(coeffs, words))

    energy = qml.qnode(dev, diff_method="adjoint")(body)
    reference = qml.qnode(dev, diff_method="backprop")(body)

    @qjit
    def vqe_step(params, coeffs):
        e, (dp, dc) = cofactor.value_and_grad(energy, argnums=(0, 1))(params, coeffs)
        return e, params - 0.2 * dp, coeffs - 0.05 * dc

    params, coeffs = np.array([0.2, -0.1]), coeffs0.copy()
    ref_p, ref_c = pnp.array(params, requires_grad=True), pnp.array(coeffs, requires_grad=True)
    for _ in range(3):
        e, params, coeffs = vqe_step(params, coeffs)
        ref_e = reference(ref_p, ref_c)
        dp, dc = qml.grad(reference, argnums=[0, 1])(ref_p, ref_c)
        ref_p, ref_c = ref_p - 0.2 * dp, ref_c - 0.05 * dc
        np.testing.assert_allclose(e, ref_e, atol=1e-10)
        np.testing.assert_allclose(params, ref_p, atol=1e-10)
        np.testing.assert_allclose(coeffs, ref_c, atol=1e-10)


def test_shots_parameter_shift_estimates_coefficient_gradients():
    """With shots, <O_k> (the coefficient derivatives) is sampled like the value."""
    dev = qml.device("default.qubit", wires=2, shots=20000)

    @qml.qnode(dev, diff_method="parameter-shift")
    def circuit(x, c):
        qml.RX(x, wires=0)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.dot(c, [qml.Z(0), qml.X(1), qml.Z(0) @ qml.Z(1)]))

    x, c = 0.6, np.array([0.5, -1.0, 0.3])
    dx, dc = qjit(cofactor.grad(circuit, argnums=(0, 1)), seed=7)(x, c)
    # analytic: <Z0> = cos x, <X1> = 0, <Z0 Z1> = 1
    np.testing.assert_allclose(dc, [np.cos(x), 0.0, 1.0], atol=0.03)
    np.testing.assert_allclose(dx, -c[0] * np.sin(x), atol=0.05)


# ----------------------------------------------------------------------------------------
# what stays refused: a clear error, never a zero
# ----------------------------------------------------------------------------------------
def test_complex_traced_coefficients_under_grad_are_an_error():
    @qml.qnode(dev2)
    def circuit(c):
        qml.RX(0.3, wires=0)
        return qml.expval(c * (qml.X(0) @ qml.Y(0)))

    with pytest.raises(cofactor.DifferentiableCompileError, match="non-Hermitian"):
        qjit(cofactor.grad(lambda c: qml.math.real(circuit(c))))(0.5)


def test_variance_of_traced_hamiltonian_under_grad_is_an_error():
    @qml.qnode(dev2, diff_method="parameter-shift")
    def circuit(c):
        qml.RX(0.3, wires=0)
        return qml.var(qml.dot(c, [qml.Z(0), qml.X(0)]))

    with pytest.raises(cofactor.DifferentiableCompileError, match="coefficients|Variance"):
        qjit(cofactor.grad(circuit))(np.array([0.5, 0.2]))
