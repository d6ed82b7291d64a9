"""`from pennylane import numpy as np` in a traced program: PennyLane's autograd numpy.

PennyLane's tutorials import its autograd-wrapped numpy, whose arrays are `tensor`s (an
ndarray subclass). Two places in it cannot take a traced value, and both failed with
errors that did not say why (`'Tracer' object has no attribute 'view'`, or "cannot trace a
value of type NotImplementedType"):

- `tensor.__array_ufunc__` (`pnp.tensor([1., 2.]) * x`, any ufunc of a tensor constant and
  a traced value) unwraps its inputs, calls `ndarray.__array_ufunc__`, which answers
  NotImplemented when another operand (the Tracer) overrides ufuncs, and wraps that
  NotImplemented in a tensor instead of returning it. While a program is traced, a ufunc
  with a traced operand unwraps the tensors and calls the ufunc again, so numpy hands it to
  the Tracer (the result is a traced array; `requires_grad` has no meaning under qjit,
  where `cofactor.grad`'s argnums choose what is differentiated).
- autograd's `concatenate` (behind `pnp.stack`, `hstack`, `vstack`, `concatenate`) calls
  `numpy.concatenate(...).view(ndarray)`: with a traced operand the traced concatenation
  is returned as it is.
- `pnp.zeros(n)` & co. called by the program make the same writable stand-ins as numpy's
  (`tracing/host_arrays.py`: `w = pnp.zeros(3); w[0] = x`), holding the plain ndarray.

Outside a trace, and for operands that are all numbers, PennyLane's own code runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.tracing import context


def _traced(x: Any) -> bool:
    from cofactor.tracing.host_arrays import HostArray
    from cofactor.tracing.tracer import Scalar, Tracer

    if isinstance(x, Tracer | Scalar | HostArray):
        return True
    return isinstance(x, list | tuple) and any(_traced(v) for v in x)


def _plain(x: Any) -> Any:
    """A `tensor` as the plain ndarray it wraps (anything else as it is)."""
    return x.view(np.ndarray) if isinstance(x, np.ndarray) and type(x) is not np.ndarray else x


def _make_array_ufunc(original: Any) -> Any:
    def __array_ufunc__(self: Any, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any):
        if context.is_tracing() and (
            any(_traced(x) for x in inputs) or any(_traced(x) for x in kwargs.get("out", ()))
        ):
            if "out" in kwargs:
                kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
            return getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)
        return original(self, ufunc, method, *inputs, **kwargs)

    return __array_ufunc__


def _make_concatenate_args(original: Any) -> Any:
    def concatenate_args(axis: Any, *args: Any) -> Any:
        if context.is_tracing() and any(_traced(x) for x in args):
            return np.concatenate([_plain(x) for x in args], axis)
        return original(axis, *args)

    return concatenate_args


def intercepted() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples `context.intercepts` installs for a trace."""
    import autograd.numpy.numpy_wrapper as wrapper
    import pennylane.numpy as pnp
    from pennylane.numpy.tensor import tensor

    from cofactor.tracing.host_arrays import CONSTRUCTORS, make_constructor

    def plain_constructor(original: Any) -> Any:
        return make_constructor(original, plain=True)

    return [
        (tensor, "__array_ufunc__", _make_array_ufunc),
        (wrapper, "concatenate_args", _make_concatenate_args),
        *[(pnp, name, plain_constructor) for name in CONSTRUCTORS if hasattr(pnp, name)],
    ]
