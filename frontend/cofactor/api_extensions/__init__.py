"""Catalyst-style language extensions: control flow, quantum operators, differentiation and
callbacks.

This module is also what PennyLane loads as the compiler's `ops` (the `pennylane.compilers`
entry points in pyproject.toml): inside a cofactor trace, `qml.for_loop`, `qml.while_loop`,
`qml.cond`, `qml.measure`, `qml.adjoint`, `qml.ctrl`, `qml.grad`, `qml.jacobian`,
`qml.value_and_grad`, `qml.vjp` and `qml.jvp` are routed to the functions of the same names here.
`switch` and `vmap` (Catalyst's) have no PennyLane counterpart: use `cofactor.switch` /
`cofactor.vmap`.
"""

from cofactor.api_extensions.accelerate import accelerate
from cofactor.api_extensions.callbacks import pure_callback
from cofactor.api_extensions.control_flow import cond, for_loop, while_loop
from cofactor.api_extensions.differentiation import grad, jacobian, value_and_grad
from cofactor.api_extensions.error_mitigation import mitigate_with_zne
from cofactor.api_extensions.products import jvp, vjp
from cofactor.api_extensions.quantum_operators import adjoint, ctrl, measure
from cofactor.api_extensions.switch import switch
from cofactor.api_extensions.vmap import vmap

__all__ = [
    "accelerate",
    "adjoint",
    "cond",
    "ctrl",
    "for_loop",
    "grad",
    "jacobian",
    "jvp",
    "measure",
    "mitigate_with_zne",
    "pure_callback",
    "switch",
    "value_and_grad",
    "vjp",
    "vmap",
    "while_loop",
]
