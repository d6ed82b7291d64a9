"""Arrays that live in a memref, read element by element: `LazyMemref` and the loads of its
elements (`load_all`, `load_elements`, `load_element`), placed right after the op that made
the memref's contents final so that they dominate every later use. A `Tracer` backed by a
memref loads its elements through these on first use (`tracer.py`).
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from cofactor.ir.builder import index_constant_op, link_op, load_op
from cofactor.tracing.scalar import COMPLEX, Scalar


class LazyMemref:
    """An array that lives in a memref: elements are loaded on first use, right after the op
    that made the memref's contents final (so the loads dominate every later use)."""

    __slots__ = ("ref", "anchor", "loaded", "indices", "indices_end")

    def __init__(self, ref: SSAValue, anchor: Operation | Block) -> None:
        self.ref = ref
        self.anchor = anchor  # an op (load after it) or a block (load at its start)
        # row-major position -> its Scalar: every load of an element sits at the same point
        # (right after the anchor), so one load serves every read (x[w] in a gate loop)
        self.loaded: dict[int, Scalar] = {}
        # index value -> its `arith.constant`, shared by every load of this memref (16 reads
        # x[l, w, k] made 38 constants, two fifths of a 4-qubit circuit's ops, each built,
        # walked by the fingerprint, printed and lowered); the loads go right below the
        # first constants made (`indices_end`), later constants above them (`load_element`)
        self.indices: dict[int, SSAValue] = {}
        self.indices_end: Operation | None = None


def load_all(lazy: LazyMemref, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Emit loads of every element of `lazy.ref` right after its anchor; returns the Scalars."""
    return load_elements(lazy, shape, dtype, np.arange(int(np.prod(shape))).reshape(shape))


def load_elements(
    lazy: LazyMemref, shape: tuple[int, ...], dtype: np.dtype, flat_ids: np.ndarray
) -> np.ndarray:
    """Load the elements at row-major positions `flat_ids` (any shape) of an array of `shape`
    stored in `lazy.ref`. The loads go right after the memref's anchor, so they dominate every
    later use; returns an object array of Scalars shaped like `flat_ids`."""
    out = np.empty(flat_ids.shape, dtype=object)
    loaded = lazy.loaded
    if not flat_ids.ndim:  # one element (`x[i, j, k]`, once per gate angle): no index arrays
        flat = int(flat_ids)
        scalar = loaded.get(flat)
        out[()] = scalar if scalar is not None else load_element(lazy, shape, dtype, flat)
        return out
    for pos in np.ndindex(*flat_ids.shape):
        flat = int(flat_ids[pos])
        scalar = loaded.get(flat)
        out[pos] = scalar if scalar is not None else load_element(lazy, shape, dtype, flat)
    return out


def load_element(lazy: LazyMemref, shape: tuple[int, ...], dtype: np.dtype, flat: int) -> Scalar:
    """The load of the element at row-major position `flat` (a complex one: its real, then
    imaginary part), right after the memref's anchor, so that it dominates every later use.
    Index constants are the memref's (`lazy.indices`): a new one goes at the top, right
    after the anchor; the loads go below the first constants made (`lazy.indices_end`), so
    every constant is above every load. Built without numpy's index helpers and the
    builder's insertion points, which cost more than the ops (`x[i, j, k]` is read once per
    gate angle)."""
    coords = []
    rest = flat
    for n in reversed(shape):
        rest, i = divmod(rest, n)
        coords.append(i)
    coords.reverse()
    anchor = lazy.anchor
    if type(anchor) is Block:
        block, top = anchor, anchor.first_op
    else:
        block, top = anchor.parent_block(), anchor.next_op
        if block is None:
            raise ValueError("Operation insertion point must have a parent block")
    consts = lazy.indices
    end = lazy.indices_end
    if end is not None and end.parent is not block:  # (moved or erased since: start again)
        consts.clear()
        end = lazy.indices_end = None

    # the index constants of the element's coordinates (and of its real and imaginary
    # parts), reused while still in `block` (`.op.parent`: their op's block; they are
    # results of `arith.constant`s)
    complex_ = dtype == COMPLEX
    values = []
    for i in [*coords, 0, 1] if complex_ else coords:
        value = consts.get(i)
        if value is None or value.op.parent is not block:
            op = index_constant_op(i)
            link_op(op, block, top)
            value = consts[i] = op.results[0]
        values.append(value)
    ref = lazy.ref
    if complex_:
        ids = values[:-2]
        ops = [load_op(ref, [*ids, values[-2]]), load_op(ref, [*ids, values[-1]])]
    else:
        ops = [load_op(ref, values)]
    if end is None and consts:  # the first constants: the last one made is the lowest
        end = lazy.indices_end = block.last_op if top is None else top.prev_op
    before = top if end is None else end.next_op
    for op in ops:
        link_op(op, block, before)
    if complex_:
        scalar = Scalar((ops[0].results[0], ops[1].results[0]), dtype)
    else:
        scalar = Scalar(ops[0].results[0], dtype)
    lazy.loaded[flat] = scalar
    return scalar
