"""PennyLane operators whose constructor computes on a traced parameter what the compiled
program cannot: refused by name while a trace runs, with what to write instead (the
alternative was a "concrete bool" error from deep inside numpy/scipy, naming neither the
operator nor a way out).

`qml.BlockEncode(A, wires)` normalises A by its operator norm (scipy's `norm(ord=inf)`) and
completes the unitary with matrix square roots (eigendecompositions) of run-time values.
`qml.FlipSign(n, wires)` of a traced n picks its gates from the bits of n in Python (the
alternative was "iteration over a 0-d traced value").
`qml.qchem.Molecule` (built by `qml.qchem.molecular_hamiltonian` too) of traced coordinates
computes Gaussian-orbital integrals with scipy's special functions (the alternative was
"numpy.gammainc is not supported by cofactor's tracer")."""

from __future__ import annotations

from typing import Any

import pennylane as qml

from cofactor.errors import CompileError
from cofactor.tracing import context
from cofactor.tracing.host_arrays import holds_traced

_BLOCK_ENCODE = (
    "qml.BlockEncode of a traced matrix: PennyLane normalises the matrix by its operator "
    "norm and completes the block encoding with matrix square roots of run-time values "
    "(eigendecompositions), which cofactor does not compile. Make the matrix a constant of "
    "the program (a global or closure value; arrays cannot be static arguments), or compute "
    "the unitary outside qjit, U = qml.matrix(qml.BlockEncode(A, wires=...)), and apply "
    "qml.QubitUnitary(U, wires=...) (QSVT accepts it as the block encoding)"
)


_MOLECULE = (
    "qml.qchem.Molecule / qml.qchem.molecular_hamiltonian of traced coordinates: the "
    "molecular integrals (Gaussian orbitals, scipy's special functions and Hartree-Fock "
    "iterations) are not compiled by cofactor. Build the Hamiltonian outside qjit, "
    "H, n = qml.qchem.molecular_hamiltonian(symbols, coordinates), and use it in the "
    "compiled circuit (qml.expval(H)); for a scan over geometries, build one per geometry"
)


_FLIP_SIGN = (
    "qml.FlipSign of a traced basis state: PennyLane picks the gates (an X on each wire "
    "whose bit is 0, the control values of a multi-controlled Z) from the bits of n while "
    "it builds the circuit, so n must be known when the program is traced. Pass n as a "
    "static argument (qjit(static_argnums=...)) or a constant; for a run-time n, flip the "
    "sign of |n> with qml.cond on each bit around a multi-controlled Z"
)


def _refusing_init(position: int, name: str, message: str) -> Any:
    """The `make` of a constructor that raises `message` while a trace runs when its
    argument `name` (positional `position`, self not counted) holds a traced value."""

    def make(original: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            value = args[position] if len(args) > position else kwargs.get(name)
            if context.is_tracing() and holds_traced(value):
                raise CompileError(message)
            original(self, *args, **kwargs)

        return init

    return make


# made once: context.prepare reuses a replacement while its `make` is the same object
_INTERCEPTS = [
    (qml.BlockEncode, "__init__", _refusing_init(0, "A", _BLOCK_ENCODE)),
    (qml.qchem.Molecule, "__init__", _refusing_init(1, "coordinates", _MOLECULE)),
    (qml.FlipSign, "__init__", _refusing_init(0, "n", _FLIP_SIGN)),
]


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace."""
    return _INTERCEPTS
