"""`qml.specs` of a qjit-compiled QNode.

PennyLane's `qml.specs` takes a QNode or a *Catalyst* QJIT (an isinstance check against
`catalyst.jit.QJIT`); given cofactor's QJIT it raised "qp.specs can only be applied to a QNode
or qjit'd QNode". Importing this module wraps `qml.specs` so that a cofactor QJIT whose
`original_function` is a QNode gets the specs of that QNode, at Catalyst's default level
"device" (the gates after the device's decomposition, loops unrolled as they run); levels
and `compute_depth` are passed to PennyLane as given. Anything else goes to PennyLane's
function unchanged.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pennylane as qml

_original_specs = qml.specs


def _qjit_specs(compiled: Any, level: Any, compute_depth: Any, *args: Any, **kwargs: Any) -> Any:
    return _original_specs(compiled.original_function, level=level, compute_depth=compute_depth)(
        *args, **kwargs
    )


def specs(qnode: Any, level: Any = None, compute_depth: bool | None = None) -> Any:
    """`qml.specs`, which also takes a function compiled by `cofactor.qjit`."""
    from cofactor.jit import QJIT

    if not isinstance(qnode, QJIT):
        return _original_specs(qnode, level=level, compute_depth=compute_depth)
    if not isinstance(qnode.original_function, qml.QNode):
        raise ValueError(
            f"qml.specs can only be applied to a QNode or qjit'd QNode: {qnode.__name__} "
            f"compiles a {type(qnode.original_function).__name__}; call qml.specs on the "
            "QNode it calls"
        )
    return partial(_qjit_specs, qnode, "device" if level is None else level, compute_depth)


specs.__doc__ = (_original_specs.__doc__ or "") + "\n(cofactor: also for cofactor.qjit objects)"
qml.specs = specs
if getattr(qml.resource, "specs", None) is _original_specs:
    qml.resource.specs = specs
