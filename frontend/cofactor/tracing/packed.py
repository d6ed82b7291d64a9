"""Lists and tuples of numbers given to a compiled function: Python sequences in the
program, one array in the compiled code.

`f([0.2, 0.3])` passes one buffer (cheap to call, small IR), but the program must see what
Python, PennyLane and Catalyst give it: a list. `a + b` joins two lists and `2 * a` repeats
one; as an array they would add and double, a silently different number. So the traced
program gets a `PackedList` (or `PackedTuple`): a real list/tuple of the array's traced
elements that also remembers the array. numpy functions and ufuncs given the sequence
(`np.sin(a)`, `np.sum(a)`, `a_array @ w`) work on that array directly, through the numpy
override protocols, which numpy consults on any argument type. A sequence built from it
(`a + b`, `a[1:]`) is a plain list of traced numbers.

Across a QNode call, a loop or a return, an unchanged packed sequence travels as its array
and is rebuilt on the other side (`pytree`'s "packed" node); one the program changed
(`a[0] = v`, `a.append(v)`) travels as the plain list it now is.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class _Packed:
    """The part PackedList and PackedTuple share: the array, and the elements it gave."""

    _array: Any
    _tree: Any
    _elements: list[Any]

    def _init_packed(self, array: Any, tree: Any, elements: list[Any]) -> None:
        self._array, self._tree, self._elements = array, tree, elements

    def packed(self) -> tuple[Any, Any] | None:
        """(array, structure) while the sequence still holds exactly the elements it was
        made with; None once the program changed it."""
        from cofactor.tracing import pytree

        leaves, tree = pytree.flatten(list(self) if isinstance(self, list) else tuple(self))
        if tree != self._tree:
            return None
        if any(a is not b for a, b in zip(leaves, self._elements, strict=True)):
            return None
        return self._array, self._tree

    def as_array(self) -> Any:
        """The traced array numpy sees: the argument's array, or (changed) the current
        elements stacked."""
        current = self.packed()
        if current is not None:
            return current[0]
        from cofactor.tracing.scalars import as_tracer

        return as_tracer(_object_array(self))

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        if any(isinstance(o, _Packed) for o in (out if isinstance(out, tuple) else (out,))):
            raise TypeError("return arrays must be of ArrayType")  # (numpy's, for a list)
        return getattr(ufunc, method)(*_arrays(inputs), **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        # numpy makes a new array from a list: np.ravel(a) / np.reshape(a, ...) are views of
        # that array, never of the argument's (a write into them must not change `a`)
        return func(*_arrays(args, copy=True), **_arrays(kwargs, copy=True))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.as_array().__array__(dtype)  # (the tracer's message, or a fresh array)


# Called as the program calls a list or tuple type (`type(a)(v * 2 for v in a)`, copy's
# `cls.__new__(cls)`), these classes give the plain list / tuple of those items: a sequence
# built from a packed one is a plain sequence.


class PackedList(_Packed, list):
    def __new__(cls, items: Any = (), *packing: Any) -> Any:
        return list.__new__(cls) if packing else list(items)

    def __init__(self, items: list[Any], array: Any, tree: Any, elements: list[Any]) -> None:
        list.__init__(self, items)
        self._init_packed(array, tree, elements)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (list, (list(self),))


class PackedTuple(_Packed, tuple):
    def __new__(cls, items: Any = (), *packing: Any) -> Any:
        if not packing:
            return tuple(items)
        self = tuple.__new__(cls, items)
        self._init_packed(*packing)
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (tuple, (tuple(self),))


def unpack(tree: Any, array: Any) -> Any:
    """The sequence `tree` describes, made of `array`'s elements (C order). Traced: the
    outer sequence is packed (numpy sees `array`); host values: plain lists/tuples."""
    from cofactor.tracing import pytree
    from cofactor.tracing.tracer import Tracer

    elements = [array[i] for i in np.ndindex(np.shape(array))]
    rebuilt = pytree.unflatten(tree, elements)
    if not isinstance(array, Tracer):
        return rebuilt
    cls = PackedList if isinstance(rebuilt, list) else PackedTuple
    return cls(rebuilt, array, tree, elements)


def _arrays(x: Any, copy: bool = False) -> Any:
    """`x` with every packed sequence in it (inside lists/tuples/dicts too: np.stack([a, b]))
    replaced by its array (`copy`: a copy of it)."""
    if isinstance(x, _Packed):
        return x.as_array().copy() if copy else x.as_array()
    if isinstance(x, dict):
        return {k: _arrays(v, copy) for k, v in x.items()}
    if type(x) in (list, tuple):
        return type(x)(_arrays(v, copy) for v in x)
    return x


def _object_array(seq: Any) -> np.ndarray:
    """A changed packed sequence as an object array of its elements (ragged nesting:
    numpy's ValueError)."""
    items = list(seq)
    if items and all(isinstance(v, list | tuple) for v in items):
        return np.stack([_object_array(v) for v in items])
    out = np.empty(len(items), dtype=object)
    for i, v in enumerate(items):
        out[i] = v
    return out


def _register_with_autoray() -> None:
    """`qml.math.sin(a)` on a packed sequence: numpy's function, which sees its array."""
    import autoray

    autoray.register_backend(PackedList, "numpy")
    autoray.register_backend(PackedTuple, "numpy")


_register_with_autoray()
