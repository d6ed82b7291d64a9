"""`cofactor.passes`: Catalyst's compiler-pass decorators (`catalyst.passes`).

Catalyst applies these as MLIR passes to the decorated QNode; cofactor applies PennyLane tape
transforms while it traces a circuit, so each decorator adds the pass, by its Catalyst name,
to the QNode's transform program (`qml.transform(pass_name=...)`, as PennyLane does for
Catalyst) and the tracer runs the tape transform of that name (tracing/transforms.py):
`cancel-inverses`, `merge-rotations`, and the peephole passes that keep the unitary
(`disentangle-cnot`, `disentangle-swap`: the circuit runs as written). A pass without a
counterpart is refused by name when the QNode is compiled.

    @qml.qjit(compiler="cofactor")
    @cofactor.passes.merge_rotations
    @qml.qnode(dev)
    def circuit(x): ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pennylane as qml


def apply_pass(pass_name: str, *flags: Any, **valued_options: Any) -> Callable:
    """A decorator applying the compiler pass `pass_name` to a QNode (Catalyst's
    `apply_pass`); options are passed on to the pass."""

    def decorator(qnode: Any) -> Any:
        return qml.transform(pass_name=pass_name)(qnode, *flags, **valued_options)

    return decorator


def pipeline(pass_pipeline: dict[str, dict[str, Any]]) -> Callable:
    """A decorator applying the passes of `{pass name: options}` in order (Catalyst's
    `pipeline`; the names may be Catalyst's `cancel_inverses` or `cancel-inverses`)."""

    def decorator(qnode: Any) -> Any:
        for name, options in pass_pipeline.items():
            qnode = apply_pass(name.replace("_", "-"), **(options or {}))(qnode)
        return qnode

    return decorator


def _named(pass_name: str, doc: str) -> Callable:
    def decorator(qnode: Any) -> Any:
        return apply_pass(pass_name)(qnode)

    decorator.__name__ = pass_name.replace("-", "_")
    decorator.__doc__ = doc
    return decorator


cancel_inverses = _named(
    "cancel-inverses", "Cancel neighbouring self-inverse gates (qml.transforms.cancel_inverses)."
)
merge_rotations = _named(
    "merge-rotations", "Merge neighbouring rotations (qml.transforms.merge_rotations)."
)
disentangle_cnot = _named(
    "disentangle-cnot", "Catalyst's CNOT disentangling: cofactor runs the circuit as written."
)
disentangle_swap = _named(
    "disentangle-swap", "Catalyst's SWAP disentangling: cofactor runs the circuit as written."
)

__all__ = [
    "apply_pass",
    "cancel_inverses",
    "disentangle_cnot",
    "disentangle_swap",
    "merge_rotations",
    "pipeline",
]
