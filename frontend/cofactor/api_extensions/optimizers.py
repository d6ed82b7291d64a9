"""PennyLane's optimizers called inside a compiled function.

`opt.step(cost, params)` updates only the arguments that carry `requires_grad=True`
(PennyLane's numpy tensors); a traced value carries no such flag, so inside qjit every
gradient-based optimizer would return the parameters unchanged, without a word (Catalyst's
JAX tracers behave the same). PennyLane's `QNGOptimizerQJIT` (and its momentum variant)
asks for Catalyst or JAX by name for its gradient. While a trace runs, these optimizers'
`step` and `step_and_cost` refuse traced arguments and say how to write the update."""

from __future__ import annotations

from typing import Any

import pennylane as qml

from cofactor.errors import CompileError
from cofactor.tracing import context
from cofactor.tracing.tracer import Tracer


def _autograd_optimizer(name: str, method: str) -> str:
    return (
        f"{name}.{method} inside a compiled function: PennyLane's optimizers update only "
        "arguments marked requires_grad=True, which traced values are not, so it would "
        "return the parameters unchanged. Inside qjit, write the update: `params = params - "
        "stepsize * cofactor.grad(cost)(params)` (qml.grad works too) in a for_loop; or call "
        f"opt.{method} outside qjit with a compiled gradient: "
        "`opt.step(cost, params, grad_fn=qml.qjit(qml.grad(cost)))`."
    )


def _jax_or_catalyst_optimizer(name: str, method: str) -> str:
    # (it asks for Catalyst by name, else JAX: "Jax is required" said nothing about why)
    return (
        f"{name}.{method} computes its gradient with Catalyst or JAX only, not with cofactor. "
        "Inside qjit, write the step: `metric = qml.metric_tensor(qnode, "
        "approx='block-diag')(params)`, then `params = params - stepsize * "
        "np.linalg.solve(metric, qml.grad(qnode)(params))` (where the optimizer takes a "
        "pseudo-inverse, regularise: metric + lam * np.eye(n))."
    )


def _refusing(method: str, message: Any) -> Any:
    def make(original: Any) -> Any:
        def refuse_traced(self: Any, objective_fn: Any, *args: Any, **kwargs: Any) -> Any:
            if context.is_tracing() and any(isinstance(a, Tracer) for a in args):
                raise CompileError(message(type(self).__name__, method))
            return original(self, objective_fn, *args, **kwargs)

        return refuse_traced

    return make


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace."""
    kinds = [
        (qml.GradientDescentOptimizer, _autograd_optimizer),
        (qml.QNGOptimizer, _autograd_optimizer),
        (qml.optimize.QNGOptimizerQJIT, _jax_or_catalyst_optimizer),
    ]
    methods = ("step", "step_and_cost")
    return [(owner, m, _refusing(m, message)) for owner, message in kinds for m in methods]
