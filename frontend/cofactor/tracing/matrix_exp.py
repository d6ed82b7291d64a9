"""The matrix exponential of a traced matrix, for `qml.math.expm` (PennyLane computes
`SpecialUnitary`'s matrix, and so its decomposition, as `expm(1j * A(theta))`).

`qml.math.expm` sends numpy-like values (tracers are numpy to autoray) to
`scipy.linalg.expm`, which needs concrete numbers. Importing this module wraps
`qml.math.expm` so that a traced matrix takes `traced_expm` and everything else goes to
PennyLane's function unchanged.

`traced_expm` is scaling and squaring with a Taylor polynomial: the matrix is divided by
`2**s`, with `s` computed at run time from its 1-norm so that the scaled norm is at most
1/2; degree 18 then leaves a truncation error below 1e-22 relative, and `s` squarings (an
`scf.for` with a run-time trip count) undo the scaling.

`scipy.linalg.expm` itself reads numpy internals (`a.flags`) that a traced array does not
have; while a program is traced, `scipy.linalg.expm` (the module attribute: the
`scipy.linalg.expm(-1j * t * H)` of the demos, or an import inside the function) takes
`traced_expm` on a traced matrix too (`intercepted`, installed by numpy_entry).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pennylane as qml

from cofactor.errors import CompileError
from cofactor.tracing.numpy_rules import as_tracer
from cofactor.tracing.tracer import Scalar, Tracer

TAYLOR_DEGREE = 18


def _is_traced(x: Any) -> bool:
    if isinstance(x, Tracer | Scalar):
        return True
    return isinstance(x, np.ndarray) and x.dtype == object


def traced_expm(matrix: Any) -> Tracer:
    """`expm(matrix)` of a traced square matrix (2-D)."""
    from cofactor.api_extensions.control_flow import for_loop

    m = as_tracer(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise CompileError(f"expm of a traced array of shape {m.shape}: only square matrices")
    n = m.shape[0]
    norm = np.max(np.sum(np.abs(m), axis=1))
    # 2**s >= 2 * norm, so the scaled matrix has norm <= 1/2 (s = 0 for small norms)
    s = np.maximum(np.ceil(np.log2(np.maximum(norm, 1e-300))) + 1, 0).astype(np.int64)
    x = m / (2.0**s)
    eye = np.eye(n)
    e = eye + x / TAYLOR_DEGREE
    for k in range(TAYLOR_DEGREE - 1, 0, -1):  # Horner: I + x/1 (I + x/2 (I + ...))
        e = eye + (x @ e) / k

    @for_loop(0, s, 1)
    def square(_i: Any, acc: Any) -> Any:
        return acc @ acc

    return square(e)


_original_expm = qml.math.expm


def expm(tensor: Any, like: Any = None) -> Any:
    """`qml.math.expm`, which also takes traced matrices."""
    if _is_traced(tensor):
        return traced_expm(tensor)
    return _original_expm(tensor, like=like)


def _make_scipy_expm(original: Any) -> Any:
    def expm(A: Any) -> Any:  # noqa: N803 (scipy's parameter name)
        if _is_traced(A):
            return traced_expm(A)
        return original(A)

    expm.__doc__ = original.__doc__
    return expm


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace
    (scipy.linalg only when the program's process imported it: PennyLane does)."""
    linalg = sys.modules.get("scipy.linalg")
    return [] if linalg is None else [(linalg, "expm", _make_scipy_expm)]


expm.__doc__ = (_original_expm.__doc__ or "") + "\n(cofactor: also for traced matrices)"
qml.math.expm = expm
