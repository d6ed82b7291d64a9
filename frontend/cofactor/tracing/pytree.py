"""Minimal pytrees: nested tuples / namedtuples / lists / dicts of leaves, flattened and rebuilt.

The tree definition is a hashable value, so it can be part of a compilation cache key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cofactor.tracing.host_arrays import HostArray
from cofactor.tracing.packed import PackedList, PackedTuple, unpack

LEAF = "*"


def flatten(obj: Any, is_leaf=None, pack=None) -> tuple[list[Any], Any]:
    """Leaves in order, and the hashable structure to rebuild `obj` with `unflatten`.

    `pack(x)` true: the nested sequence `x` is one leaf (one array) whose structure is kept
    as a "packed" node; `unflatten` rebuilds it as the same lists/tuples of its elements."""
    leaves: list[Any] = []
    tree = _flatten(obj, leaves, is_leaf, pack)
    return leaves, tree


def _flatten(obj: Any, leaves: list[Any], is_leaf, pack=None) -> Any:
    if is_leaf is not None and is_leaf(obj):
        leaves.append(obj)
        return LEAF
    if pack is not None and pack(obj):
        leaves.append(obj)
        return ("packed", _flatten(obj, [], None))
    if isinstance(obj, PackedList | PackedTuple) and (packed := obj.packed()) is not None:
        leaves.append(packed[0])  # (unchanged: travels as its array, see tracing/packed.py)
        return ("packed", packed[1])
    if isinstance(obj, tuple):
        children = tuple(_flatten(v, leaves, is_leaf, pack) for v in obj)
        if hasattr(obj, "_fields"):
            # a namedtuple is a node, as in JAX: its fields are values, its class is
            # structure (children first, so code that walks tree[1] sees it as a tuple)
            return ("namedtuple", children, type(obj))
        return ("tuple", children)
    if isinstance(obj, list):
        return ("list", tuple(_flatten(v, leaves, is_leaf, pack) for v in obj))
    if isinstance(obj, dict):
        keys = tuple(obj.keys())
        _check_static_keys(keys)
        return ("dict", keys, tuple(_flatten(obj[k], leaves, is_leaf, pack) for k in keys))
    if obj is None:
        return ("none",)
    if isinstance(obj, HostArray):
        # np.zeros(n) of the program (tracing/host_arrays.py) crosses a call, loop or
        # return boundary as its current value: the numpy array, or the traced array once a
        # traced value was written into it (else a QNode would close over the caller's
        # values)
        obj = obj.value
    if _has_traced_labels(obj):
        # Wires whose labels are traced (a ctrl region's `.wires` on traced wire arguments):
        # the labels are values of the program, the Wires is structure, as in Catalyst.
        return ("wires", tuple(_flatten(v, leaves, is_leaf) for v in obj.labels))
    leaves.append(obj)
    return LEAF


def _has_traced_labels(obj: Any) -> bool:
    if type(obj) in _NOT_WIRES:  # (most leaves: `Wires` is an ABC, see below)
        return False
    from pennylane.wires import Wires

    from cofactor.tracing.tracer import Scalar, Tracer

    return isinstance(obj, Wires) and any(isinstance(w, Tracer | Scalar) for w in obj.labels)


#: Leaf classes that are not `Wires`, told without `isinstance` of that ABC: the first one
#: of a class in a process walks the ABC's caches and subclasses (36 us for an ndarray
#: argument, on the first call of a process).
_NOT_WIRES = frozenset((np.ndarray, float, int, bool, complex, str))


def _wire_label(value: Any) -> Any:
    """A label of a rebuilt Wires: a computed wire (a 0-d array) as a Python int."""
    if isinstance(value, np.ndarray | np.generic) and np.ndim(value) == 0:
        return value.item()
    return value


def _check_static_keys(keys: tuple) -> None:
    # Traced values hash by identity (PennyLane's traced wires need that), so a dict keyed
    # by one is built without complaint; but the keys are part of the tree, fixed at compile
    # time, and a traced key would escape into the result as a tracer (as JAX, refuse it).
    from cofactor.tracing.tracer import Scalar, Tracer

    for k in keys:
        if isinstance(k, Tracer | Scalar):
            raise TypeError(
                f"unhashable type: a traced value ({k!r}) used as a dict key. Dict keys are "
                "part of the structure of a compiled function's values, fixed when it is "
                "compiled, but this key is only known when the program runs. Use Python "
                "values (str, int) as keys, or return the traced value as a dict value."
            )


def unflatten(tree: Any, leaves: list[Any]) -> Any:
    """Inverse of `flatten`."""
    it = iter(leaves)
    return _unflatten(tree, it)


def _unflatten(tree: Any, it) -> Any:
    if tree == LEAF:
        return next(it)
    kind = tree[0]
    if kind == "tuple":
        return tuple(_unflatten(t, it) for t in tree[1])
    if kind == "list":
        return [_unflatten(t, it) for t in tree[1]]
    if kind == "namedtuple":
        return tree[2](*(_unflatten(t, it) for t in tree[1]))
    if kind == "dict":
        return {k: _unflatten(t, it) for k, t in zip(tree[1], tree[2], strict=True)}
    if kind == "packed":
        return unpack(tree[1], next(it))
    if kind == "wires":
        from pennylane.wires import Wires

        return Wires([_wire_label(_unflatten(t, it)) for t in tree[1]])
    return None


def num_leaves(tree: Any) -> int:
    if tree == LEAF:
        return 1
    kind = tree[0]
    if kind in ("tuple", "namedtuple", "list", "wires"):
        return sum(num_leaves(t) for t in tree[1])
    if kind == "packed":
        return 1
    if kind == "dict":
        return sum(num_leaves(t) for t in tree[2])
    return 0
