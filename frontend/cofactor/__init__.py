"""cofactor: a just-in-time compiler for hybrid quantum-classical Python programs."""

from cofactor import debug
from cofactor.api_extensions import (
    adjoint,
    cond,
    ctrl,
    for_loop,
    grad,
    jacobian,
    jvp,
    measure,
    pure_callback,
    switch,
    value_and_grad,
    vjp,
    vmap,
    while_loop,
)
from cofactor.errors import CompileError, DifferentiableCompileError, RuntimeExecutionError
from cofactor.jit import QJIT, ShapeDtype, qjit

__version__ = "0.1.0"

__all__ = [
    "QJIT",
    "CompileError",
    "DifferentiableCompileError",
    "RuntimeExecutionError",
    "ShapeDtype",
    "__version__",
    "adjoint",
    "cond",
    "ctrl",
    "debug",
    "for_loop",
    "grad",
    "jacobian",
    "jvp",
    "measure",
    "pure_callback",
    "qjit",
    "switch",
    "value_and_grad",
    "vjp",
    "vmap",
    "while_loop",
]
