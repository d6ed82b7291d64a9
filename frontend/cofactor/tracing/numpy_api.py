"""The numpy protocol entry points for tracers, with every rule module registered.

`numpy_rules` holds the core tables; `reductions`, `elementwise`, `logic`, `linalg`,
`arrays` and `array_extras` add rules to them when imported; `function_options` then wraps them all
(numpy keywords such as `out=`, `where=`, `initial=`). The tracer's `__array_ufunc__` /
`__array_function__` import from here, so all rules are in place before numpy first
reaches a tracer (and the rule modules can import `numpy_rules` without an import cycle).
"""

from __future__ import annotations

from cofactor.tracing import (  # noqa: F401  (registration)
    array_extras,
    arrays,
    elementwise,
    function_options,
    inplace_functions,
    linalg,
    linalg_host,
    logic,
    matrix_exp,
    reductions,
)
from cofactor.tracing.numpy_rules import (
    array_function,
    array_ufunc,
    as_tracer,
    cast_tracer,
    inplace_result,
    scalar_imag,
    scalar_real,
    scalar_ufunc,
)

function_options.install()  # (after every module above added its rules: it wraps them all)

__all__ = [
    "array_function",
    "array_ufunc",
    "as_tracer",
    "cast_tracer",
    "inplace_result",
    "scalar_imag",
    "scalar_real",
    "scalar_ufunc",
]
