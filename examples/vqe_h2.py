"""The main example: a variational quantum eigensolver (VQE) for the hydrogen molecule.

The whole optimisation -- every gradient-descent step, each with the energy and its
gradient from the adjoint method -- runs inside one function compiled by cofactor through
PennyLane's own `qml.qjit(compiler="cofactor")`. It prints the energy every few steps while
the compiled loop runs, then compares the final energy with the exact ground-state energy
(numpy's lowest eigenvalue of the Hamiltonian's matrix).

    .venv/bin/python examples/vqe_h2.py [--steps 60] [--stepsize 0.4] [--report-every 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pennylane as qml

import cofactor

# H2 in the STO-3G basis at a bond length of 1.3228 bohr (0.7 angstrom), mapped to 4 qubits
# with Jordan-Wigner. Source: PennyLane 0.45's
#   qml.qchem.molecular_hamiltonian(["H", "H"], np.array([0, 0, -0.6614, 0, 0, 0.6614]))
# (its built-in differentiable Hartree-Fock); tests/test_examples.py recomputes it.
HAMILTONIAN_TERMS: list[tuple[float, str]] = [
    (-0.042072551947439224, "IIII"),
    (0.1777135822909176, "ZIII"),
    (0.1777135822909176, "IZII"),
    (0.17059759276836803, "ZZII"),
    (-0.2427450126094144, "IIZI"),
    (0.12293330449299361, "ZIZI"),
    (0.16768338855601356, "IZZI"),
    (0.044750084063019925, "YXXY"),
    (-0.044750084063019925, "YYXX"),
    (-0.044750084063019925, "XXYY"),
    (0.044750084063019925, "XYYX"),
    (-0.2427450126094144, "IIIZ"),
    (0.16768338855601356, "ZIIZ"),
    (0.12293330449299361, "IZIZ"),
    (0.1762766139418181, "IIZZ"),
]
NUM_QUBITS = 4
HARTREE_FOCK_STATE = np.array([1, 1, 0, 0])


def hamiltonian() -> qml.operation.Operator:
    coeffs = [c for c, _ in HAMILTONIAN_TERMS]
    words = [qml.pauli.string_to_pauli_word(w) for _, w in HAMILTONIAN_TERMS]
    return qml.Hamiltonian(coeffs, words)


def exact_ground_energy() -> float:
    return float(np.linalg.eigvalsh(qml.matrix(hamiltonian(), wire_order=range(NUM_QUBITS)))[0])


def make_energy() -> qml.QNode:
    """The ansatz: Hartree-Fock state, one double and two single excitations."""
    H = hamiltonian()
    dev = qml.device("lightning.qubit", wires=NUM_QUBITS)

    @qml.qnode(dev, diff_method="adjoint")
    def energy(params):
        qml.BasisState(HARTREE_FOCK_STATE, wires=range(NUM_QUBITS))
        qml.DoubleExcitation(params[0], wires=[0, 1, 2, 3])
        qml.SingleExcitation(params[1], wires=[0, 2])
        qml.SingleExcitation(params[2], wires=[1, 3])
        return qml.expval(H)

    return energy


def make_optimiser(steps: int, stepsize: float, report_every: int):
    """One compiled function running `steps` gradient-descent steps from `params`; returns
    the final parameters and the energy before every step. Compiled ahead of time (the
    annotation gives the argument's type), so building it measures the compile time."""
    energy = make_energy()

    @qml.qjit(compiler="cofactor")
    def optimise(params: cofactor.ShapeDtype((3,), np.float64)):
        history = np.zeros(steps)

        def step(i, params, history):
            value, gradient = cofactor.value_and_grad(energy)(params)
            history[i] = value

            @qml.cond(i % report_every == 0)
            def report():
                cofactor.debug.print("  step", i, " energy", value, "Ha")

            report()
            return params - stepsize * gradient, history

        return qml.for_loop(0, steps, 1)(step)(params, history)

    return optimise


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--stepsize", type=float, default=0.4)
    parser.add_argument("--report-every", type=int, default=10)
    args = parser.parse_args(argv)

    print(f"VQE for H2 (4 qubits, {len(HAMILTONIAN_TERMS)} Pauli terms), {args.steps} steps")
    start = time.perf_counter()
    optimise = make_optimiser(args.steps, args.stepsize, args.report_every)
    compile_seconds = time.perf_counter() - start

    start = time.perf_counter()
    params, history = optimise(np.zeros(3))
    run_seconds = time.perf_counter() - start

    final = float(make_energy()(params))
    exact = exact_ground_energy()
    print(f"final energy  {final:.10f} Ha   (after {args.steps} steps; start {history[0]:.6f})")
    print(f"exact ground  {exact:.10f} Ha   |error| = {abs(final - exact):.2e} Ha")
    print(f"parameters    {np.array2string(params, precision=6)}")
    print(
        f"compile time  {compile_seconds:.3f} s   run time {run_seconds * 1e3:.1f} ms "
        f"({run_seconds / args.steps * 1e6:.0f} us per step)"
    )
    return abs(final - exact)


if __name__ == "__main__":
    main()
