"""The examples run, with small settings, and reach the numbers they claim."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pennylane as qml
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_vqe_hamiltonian_is_what_qchem_computes():
    vqe = load("vqe_h2")
    coords = np.array([0.0, 0.0, -0.6614, 0.0, 0.0, 0.6614])
    H, n = qml.qchem.molecular_hamiltonian(["H", "H"], coords)
    assert n == vqe.NUM_QUBITS
    mine = qml.matrix(vqe.hamiltonian(), wire_order=range(n))
    theirs = qml.matrix(H, wire_order=range(n))
    np.testing.assert_allclose(mine, theirs, atol=1e-12)
    assert vqe.exact_ground_energy() == pytest.approx(-1.1361891625218803, abs=1e-9)


def test_vqe_steps_match_uncompiled_gradient_descent(capfd):
    vqe = load("vqe_h2")
    steps, stepsize = 12, 0.4
    optimise = vqe.make_optimiser(steps, stepsize, report_every=4)
    params, history = optimise(np.zeros(3))

    # The same descent, uncompiled, with PennyLane's own gradients on default.qubit.
    dev = qml.device("default.qubit", wires=vqe.NUM_QUBITS)
    energy = qml.QNode(vqe.make_energy().func, dev, diff_method="backprop")
    reference = qml.numpy.array(np.zeros(3), requires_grad=True)
    expected_history = []
    for _ in range(steps):
        expected_history.append(float(energy(reference)))
        reference = reference - stepsize * qml.grad(energy)(reference)
    np.testing.assert_allclose(history, expected_history, rtol=0, atol=1e-10)
    np.testing.assert_allclose(params, np.asarray(reference), rtol=0, atol=1e-10)

    printed = capfd.readouterr().out
    assert printed.count("energy") == 3  # steps 0, 4 and 8


def test_vqe_main_reaches_the_ground_state(capfd):
    vqe = load("vqe_h2")
    error = vqe.main(["--steps", "40"])
    assert error < 1e-6
    out = capfd.readouterr().out
    assert "exact ground" in out and "compile time" in out


def test_callback_example_matches_finite_differences(capfd):
    example = load("callback_vjp")
    assert example.main() < 1e-7
    assert "custom VJP" in capfd.readouterr().out
