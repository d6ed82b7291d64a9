"""Compile time of long straight-line circuits and of Trotterised phase estimation.

    COFACTOR_DISABLE_CACHE=1 .venv/bin/python -m benchmarks.circuit_scaling long 50 100 200 500
    COFACTOR_DISABLE_CACHE=1 .venv/bin/python -m benchmarks.circuit_scaling qpe 1 2 5 10

`long N`: N rounds of H, T, CNOT (chain) and RZ(x[w] * (r + 1)) on 16 wires (63 gates a
round). `qpe S`: QuantumPhaseEstimation (4 estimation wires) of a second-order TrotterProduct
(S steps) of the H2 Hamiltonian of qml.qchem, its coefficients passed at run time. Each line
gives the compile time as process CPU seconds (this process and its tool subprocesses; on a
shared machine the wall time mostly measures waiting) and wall seconds, the CPU time of one
later call, and the largest difference from PennyLane's default.qubit.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable

import numpy as np
import pennylane as qml

import cofactor


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    tools = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + tools.ru_utime + tools.ru_stime


def long_circuit(rounds: int, n: int = 16) -> tuple[Callable, np.ndarray]:
    @qml.qnode(qml.device("default.qubit", wires=n))
    def circuit(x):
        for r in range(rounds):
            for w in range(n):
                qml.Hadamard(w)
            for w in range(n):
                qml.T(w)
            for w in range(n - 1):
                qml.CNOT([w, w + 1])
            for w in range(n):
                qml.RZ(x[w] * (r + 1), w)
        return qml.expval(qml.PauliZ(0))

    return circuit, np.linspace(0.1, 1.6, n)


def phase_estimation(steps: int, estimation_wires: int = 4) -> tuple[Callable, np.ndarray]:
    coords = np.array([0.0, 0.0, -0.6614, 0.0, 0.0, 0.6614])
    hamiltonian, num_qubits = qml.qchem.molecular_hamiltonian(["H", "H"], coords)
    coeffs, ops = hamiltonian.terms()
    est = list(range(num_qubits, num_qubits + estimation_wires))

    @qml.qnode(qml.device("default.qubit", wires=num_qubits + estimation_wires))
    def circuit(c):
        qml.BasisState(np.array([1, 1, 0, 0]), wires=range(num_qubits))
        h = qml.dot([c[i] for i in range(len(ops))], ops)
        qml.QuantumPhaseEstimation(
            qml.TrotterProduct(h, 1.0, n=steps, order=2), estimation_wires=est
        )
        return qml.probs(wires=est)

    return circuit, np.array(coeffs, dtype=float)


def measure(kind: str, size: int) -> str:
    make = long_circuit if kind == "long" else phase_estimation
    circuit, arg = make(size)
    compiled = cofactor.qjit(circuit)
    cpu0, wall0 = _cpu(), time.perf_counter()
    value = compiled(arg)
    cpu1, wall1 = _cpu(), time.perf_counter()
    compiled(arg)
    cpu2 = _cpu()
    diff = np.max(np.abs(np.asarray(value) - np.asarray(circuit(arg)))) if size <= 100 else None
    return (
        f"{kind} {size}: compile {cpu1 - cpu0 - (cpu2 - cpu1):.2f} s CPU "
        f"({wall1 - wall0:.2f} s wall), call {(cpu2 - cpu1) * 1e3:.1f} ms CPU, "
        f"max |cofactor - default.qubit| {diff}"
    )


if __name__ == "__main__":
    kind, *sizes = sys.argv[1:]
    if kind not in ("long", "qpe"):
        raise SystemExit("usage: python -m benchmarks.circuit_scaling long|qpe SIZE...")
    for size in map(int, sizes):
        print(measure(kind, size), flush=True)
