"""An ordinary cofactor program, run SPMD by tests/mpi/test_distributed.py.

The text does not mention MPI: under `mpirun -n P` with COFACTOR_MPI=1 every rank compiles
and runs it on the sharded device, without it on the single-process one. It writes its
results to $SPMD_OUT/rank<R>.npz (R from OpenMPI's OMPI_COMM_WORLD_RANK, 0 without mpirun),
and the test compares every rank's file with the single-process run.
A first argument "fail" makes rank 1 raise after a first call, while the others call again
(and would wait for rank 1 forever): the whole job must end with rank 1's message.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pennylane as qml

import cofactor  # noqa: F401 (registers the compiler)

N = 7
dev = qml.device("lightning.qubit", wires=N)
H = qml.Hamiltonian(
    [0.4, -0.7, 0.25, 1.1],
    [qml.Z(0) @ qml.Z(1), qml.X(0), qml.Y(2) @ qml.X(N - 1), qml.Z(N - 2)],
)


def layer(params):
    for w in range(N):
        qml.RY(params[w], wires=w)
    for w in range(N - 1):
        qml.CNOT(wires=[w, w + 1])
    qml.CRX(params[N], wires=[N - 1, 0])
    qml.IsingXY(params[N + 1], wires=[0, N - 1])


@qml.qnode(dev, diff_method="adjoint")
def energy(params):
    layer(params)
    return qml.expval(H)


@qml.qnode(dev)
def analytic(params):
    layer(params)
    return qml.probs(wires=[0, N - 1]), qml.var(qml.X(1)), qml.state()


@qml.qnode(dev, shots=300)
def sampled(params):
    layer(params)
    return qml.sample(wires=[0, 1, N - 1]), qml.counts(wires=[0]), qml.expval(qml.X(0))


@qml.qnode(dev)
def mid_circuit(params):
    layer(params)
    m0 = qml.measure(0, reset=True)
    m1 = qml.measure(N - 1, postselect=1)
    qml.cond(m0, qml.RX)(params[0], wires=1)
    qml.cond(m1, qml.Hadamard)(wires=0)
    return qml.probs(wires=[0, 1, 2])


@qml.qjit(compiler="cofactor", seed=42)
def program(params):
    value, gradient = cofactor.value_and_grad(energy)(params)
    probs, var, state = analytic(params)
    samples, counts, ex = sampled(params)
    mcm = mid_circuit(params)
    return value, gradient, probs, var, state, samples, counts, ex, mcm


def main() -> None:
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    params = np.linspace(0.1, 1.3, N + 2)
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        program(params)  # MPI is running now; the other ranks will wait for rank 1
        if rank == 1:
            raise RuntimeError("rank 1 fails on purpose")
    value, gradient, probs, var, state, samples, counts, ex, mcm = program(params)
    keys, values = counts
    np.savez(
        os.path.join(os.environ["SPMD_OUT"], f"rank{rank}.npz"),
        value=value, gradient=gradient, probs=probs, var=var, state=state,
        samples=samples, count_keys=keys, count_values=values, ex=ex, mcm=mcm,
    )  # fmt: skip


if __name__ == "__main__":
    main()
