"""cofactor: a just-in-time compiler for hybrid quantum-classical Python programs."""

# First: load the in-process compiler in the background while the rest (PennyLane) imports.
import importlib as _importlib

from cofactor import native_compiler

native_compiler.preload()

from cofactor import debug  # noqa: E402
from cofactor.api_extensions import (  # noqa: E402
    accelerate,
    adjoint,
    cond,
    ctrl,
    for_loop,
    grad,
    jacobian,
    jvp,
    measure,
    mitigate_with_zne,
    passes,
    pure_callback,
    switch,
    value_and_grad,
    vjp,
    vmap,
    while_loop,
)
from cofactor.api_extensions.assertions import debug_assert  # noqa: E402
from cofactor.autograph import AutoGraphError, autograph_source, disable_autograph  # noqa: E402
from cofactor.errors import (  # noqa: E402
    CompileError,
    DifferentiableCompileError,
    RuntimeExecutionError,
)
from cofactor.jit import QJIT, ShapeDtype, qjit  # noqa: E402

# What the first compilation of every process needs (the tracer's QNode, mid-circuit and
# numpy entry points, the driver, the disk cache, the runtime's loader) is imported with
# cofactor, not at the first call: a few milliseconds of the import (whose total is
# PennyLane's two seconds), which the first call, even one served by the disk cache, would
# otherwise spend.
for _module in (
    "api_extensions.operator_checks",
    "api_extensions.operator_refusals",
    "api_extensions.optimizers",
    "api_extensions.phase_estimation",
    "api_extensions.resource_specs",
    "cache",
    "compiler",
    "distributed",
    "runtime_lib",
    "tracing.circuit_call",
    "tracing.gridsynth",
    "tracing.mcm",
    "tracing.numpy_api",
    "tracing.numpy_entry",
    "tracing.transforms",
):
    _importlib.import_module(f"cofactor.{_module}")
del _module

__version__ = "0.1.0"

__all__ = [
    "QJIT",
    "AutoGraphError",
    "CompileError",
    "DifferentiableCompileError",
    "RuntimeExecutionError",
    "ShapeDtype",
    "__version__",
    "accelerate",
    "adjoint",
    "autograph_source",
    "cond",
    "ctrl",
    "debug",
    "debug_assert",
    "disable_autograph",
    "for_loop",
    "grad",
    "jacobian",
    "jvp",
    "measure",
    "mitigate_with_zne",
    "passes",
    "pure_callback",
    "qjit",
    "switch",
    "value_and_grad",
    "vjp",
    "vmap",
    "while_loop",
]
