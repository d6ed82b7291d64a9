"""Catalyst-style language extensions: control flow and quantum operators.

This module is also what PennyLane loads as the compiler's `ops` (the `pennylane.compilers` entry points in pyproject.toml):
inside a cofactor trace, `qml.for_loop`, `qml.while_loop`, `qml.cond`, `qml.measure`,
`qml.adjoint` and `qml.ctrl` are routed to the functions of the same names here.
"""

from cofactor.api_extensions.control_flow import cond, for_loop, while_loop
from cofactor.api_extensions.quantum_operators import adjoint, ctrl, measure

__all__ = ["adjoint", "cond", "ctrl", "for_loop", "measure", "while_loop"]
