"""PennyLane's optimizers called inside a compiled function.

`opt.step(cost, params)` updates only the arguments that carry `requires_grad=True`
(PennyLane's numpy tensors); a traced value carries no such flag, so inside qjit every
gradient-based optimizer would return the parameters unchanged, without a word (Catalyst's
JAX tracers behave the same). While a trace runs, the optimizers' `step` and `step_and_cost`
refuse traced arguments and say how to write the update instead."""

from __future__ import annotations

from typing import Any

import pennylane as qml

from cofactor.errors import CompileError
from cofactor.tracing import context
from cofactor.tracing.tracer import Tracer


def _refusing(method: str) -> Any:
    def make(original: Any) -> Any:
        def refuse_traced(self: Any, objective_fn: Any, *args: Any, **kwargs: Any) -> Any:
            if context.is_tracing() and any(isinstance(a, Tracer) for a in args):
                name = type(self).__name__
                raise CompileError(
                    f"{name}.{method} inside a compiled function: PennyLane's optimizers "
                    "update only arguments marked requires_grad=True, which traced values "
                    "are not, so it would return the parameters unchanged. Inside qjit, "
                    "write the update: `params = params - stepsize * "
                    "cofactor.grad(cost)(params)` (qml.grad works too) in a for_loop; or "
                    f"call opt.{method} outside qjit with a compiled gradient: "
                    "`opt.step(cost, params, grad_fn=qml.qjit(qml.grad(cost)))`."
                )
            return original(self, objective_fn, *args, **kwargs)

        return refuse_traced

    return make


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace."""
    owners = (qml.GradientDescentOptimizer, qml.QNGOptimizer)
    return [(o, m, _refusing(m)) for o in owners for m in ("step", "step_and_cost")]
