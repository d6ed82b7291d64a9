"""`x.at[idx].set(v)` and its siblings on traced arrays: JAX's functional updates.

Catalyst programs update arrays with `x = x.at[i].set(v)` (JAX arrays are immutable); with
numpy in place of `jax.numpy` the traced array keeps that spelling working: each method
returns a new traced array and leaves `x` unchanged, as in JAX. Indices may be traced.
`add`/`multiply`/... at a repeated fancy index apply once per distinct element (numpy's
`x[idx] += v` semantics), not once per repetition as JAX does.
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

    def set(self, value: Any, **_: Any) -> Any:
        return self._update(value)

    def add(self, value: Any, **_: Any) -> Any:
        return self._update(self.get() + value)

    def subtract(self, value: Any, **_: Any) -> Any:
        return self._update(self.get() - value)

    def multiply(self, value: Any, **_: Any) -> Any:
        return self._update(self.get() * value)

    mul = multiply

    def divide(self, value: Any, **_: Any) -> Any:
        return self._update(self.get() / value)

    def power(self, value: Any, **_: Any) -> Any:
        return self._update(self.get() ** value)

    def min(self, value: Any, **_: Any) -> Any:
        return self._update(np.minimum(self.get(), value))

    def max(self, value: Any, **_: Any) -> Any:
        return self._update(np.maximum(self.get(), value))
