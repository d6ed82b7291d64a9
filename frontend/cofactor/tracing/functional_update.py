"""`x.at[idx].set(v)` and its siblings on traced arrays: JAX's functional updates.

Catalyst programs update arrays with `x = x.at[i].set(v)` (JAX arrays are immutable); with
numpy in place of `jax.numpy` the traced array keeps that spelling working: each method
returns a new traced array and leaves `x` unchanged, as in JAX. Indices may be traced.
`add`/`multiply`/... at an integer index array on the first axis (static or traced) apply
once per repetition of an index, as JAX's scatter does (numpy's `x[idx] += v` applies once:
`np.add.at` is JAX's semantics); with several index arrays, once per distinct element.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class AtIndexer:
    """`x.at`: indexing it gives the update methods for that index."""

    __slots__ = ("_array",)

    def __init__(self, array: Any) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> AtUpdate:
        return AtUpdate(self._array, key)


class AtUpdate:
    """`x.at[key]`: `.get()`, `.set(v)`, `.add(v)`, `.subtract(v)`, `.multiply(v)`,
    `.divide(v)`, `.power(v)`, `.min(v)`, `.max(v)`, each a new array."""

    __slots__ = ("_array", "_key")

    def __init__(self, array: Any, key: Any) -> None:
        self._array, self._key = array, key

    def get(self, **_: Any) -> Any:
        return self._array[self._key]

    def _update(self, value: Any) -> Any:
        out = self._array.copy()
        out[self._key] = value
        return out

    def _apply(self, op: Any, value: Any) -> Any:
        """`op(x[key], value)` written back, each repetition of an index applied in turn."""
        index = _index_array(self._key, np.shape(self._array))
        if index is None:
            return self._update(op(self.get(), value))
        out = self._array.copy()
        values = np.broadcast_to(value, np.shape(index) + np.shape(out)[1:])
        for pos in np.ndindex(*np.shape(index)):
            i = index[pos]
            out[i] = op(out[i], values[pos])
        return out

    def set(self, value: Any, **_: Any) -> Any:
        return self._update(value)

    def add(self, value: Any, **_: Any) -> Any:
        return self._apply(np.add, value)

    def subtract(self, value: Any, **_: Any) -> Any:
        return self._apply(np.subtract, value)

    def multiply(self, value: Any, **_: Any) -> Any:
        return self._apply(np.multiply, value)

    mul = multiply

    def divide(self, value: Any, **_: Any) -> Any:
        return self._apply(np.true_divide, value)

    def power(self, value: Any, **_: Any) -> Any:
        return self._apply(np.power, value)

    def min(self, value: Any, **_: Any) -> Any:
        return self._apply(np.minimum, value)

    def max(self, value: Any, **_: Any) -> Any:
        return self._apply(np.maximum, value)


def _index_array(key: Any, shape: tuple[int, ...]) -> Any:
    """`key` when it is one integer index array on the first axis (a list, a numpy array
    or a traced array) with a repeated element, or any traced one; else None."""
    from cofactor.tracing.host_arrays import HostArray
    from cofactor.tracing.tracer import Tracer

    if isinstance(key, tuple):
        if len(key) != 1:
            return None
        key = key[0]
    if isinstance(key, HostArray):  # np.zeros(...) made in the program: its numpy array
        key = key.value  # (or traced array); before, its repeated elements were added once
    if isinstance(key, Tracer):
        return key if key.ndim > 0 and key.dtype.kind == "i" else None
    if isinstance(key, list):
        key = np.asarray(key)
    if not isinstance(key, np.ndarray) or key.dtype.kind not in "iu" or key.ndim == 0:
        return None
    if not shape or not np.all((-shape[0] <= key) & (key < shape[0])):
        return None  # (numpy's IndexError comes from the plain update)
    repeated = len(np.unique(key % shape[0])) < key.size
    return key if repeated else None  # (distinct elements: one update does)
