"""A Python callback with its own gradient rule, inside a differentiated hybrid program.

`np.linalg.eigh` is not something cofactor can trace, so the exact ground energy of a
one-qubit Hamiltonian H(a, b) = a Z + b X is computed by a Python callback
(`cofactor.pure_callback`) that the compiled code calls at run time. Its derivative comes
from the Hellmann-Feynman theorem, attached as a custom VJP (`.fwd` keeps the ground state
as the residual, `.bwd` turns the cotangent into d(lambda)/dH = v v^T). The program -- the
gap between a variational circuit's energy and the exact one -- is then differentiated
end to end: Enzyme differentiates the classical code, the runtime's adjoint method the
circuit, and the callback's rule the black box. The result is checked against central
finite differences of the uncompiled program.

    .venv/bin/python examples/callback_vjp.py
"""

import numpy as np
import pennylane as qml

import cofactor


@cofactor.pure_callback
def ground_energy(h) -> float:
    """The lowest eigenvalue of the symmetric 2x2 matrix h, in Python."""
    return float(np.linalg.eigvalsh(h)[0])


@ground_energy.fwd
def ground_energy_fwd(h):
    values, vectors = np.linalg.eigh(h)
    return float(values[0]), vectors[:, 0]


@ground_energy.bwd
def ground_energy_bwd(ground_state, cotangent):
    return (cotangent * np.outer(ground_state, ground_state),)


dev = qml.device("lightning.qubit", wires=1)


@qml.qnode(dev, diff_method="adjoint")
def pauli_expectations(theta):
    qml.RY(theta, wires=0)
    return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliX(0))


def variational_energy(theta, a, b):
    """<H(a, b)> in the state RY(theta)|0>, the terms weighted in classical code."""
    z, x = pauli_expectations(theta)
    return a * z + b * x


def gap(theta, a, b):
    """Variational energy above the exact ground energy (>= 0), squared."""
    h = np.array([[a, b], [b, -a]])
    return (variational_energy(theta, a, b) - ground_energy(h)) ** 2


def gap_uncompiled(theta, a, b):
    h = np.array([[a, b], [b, -a]])
    return (float(variational_energy(theta, a, b)) - float(np.linalg.eigvalsh(h)[0])) ** 2


@cofactor.qjit
def gap_and_gradient(theta: float, a: float, b: float):
    return cofactor.value_and_grad(gap, argnums=(0, 1, 2))(theta, a, b)


def central_differences(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    return np.array([(f(*(x + h * e)) - f(*(x - h * e))) / (2 * h) for e in np.eye(len(x))])


def main() -> float:
    point = (0.4, 0.8, -0.5)
    value, gradient = gap_and_gradient(*point)
    reference = central_differences(gap_uncompiled, point)
    print(f"gap at theta={point[0]}, a={point[1]}, b={point[2]}: {value:.12f}")
    print(f"  gradient (cofactor, Enzyme + adjoint + custom VJP): {np.array(gradient)}")
    print(f"  gradient (central finite differences, uncompiled):  {reference}")
    error = float(np.max(np.abs(np.array(gradient) - reference)))
    print(f"  max |difference| = {error:.1e}")
    return error


if __name__ == "__main__":
    main()
