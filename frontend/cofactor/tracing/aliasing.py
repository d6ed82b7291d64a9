"""Traced arrays that numpy would let share memory: a write through one makes the others stale.

In numpy, `row = m[0]`, `y.reshape(2, 2)`, `y.T` or `y[1:]` are views: writing into `m`
(`m[0, 0] = v`) changes `row`, and writing into `row` changes `m`. Traced arrays are values
(each holds its own elements), so after such a write the other arrays would silently keep
the old numbers. Instead, a traced array made by a view operation joins its source's
memory group (`share_memory`), and a write into one member (`x[k] = v`, `out=x`) replaces
the elements of every other live member by `Stale` markers (`written`): using them raises a
CompileError that says what happened, while a stale array nobody reads costs nothing.
A write into one part of an array also marks views of other parts stale (numpy would keep
those): an error, never a wrong number. (`x += v` rebinds `x` to a new traced value, as
JAX does, and is not a write into the old array.)
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from cofactor.errors import CompileError

#: numpy functions whose result is a view of their first argument (when it is an array)
VIEW_FUNCTIONS: frozenset[Any] = frozenset(
    {
        np.reshape,
        np.ravel,
        np.transpose,
        np.swapaxes,
        np.moveaxis,
        np.squeeze,
        np.expand_dims,
        np.real,
        np.imag,
        np.atleast_1d,
        np.atleast_2d,
        np.atleast_3d,
        np.flip,
        np.fliplr,
        np.flipud,
        np.diagonal,
        np.broadcast_to,
    }
)


def share_memory(base: Any, view: Any) -> None:
    """Record that `view` (a Tracer made from the Tracer `base`) is a view of it in numpy."""
    if view is base or view.ndim == 0:
        return
    group = base._group
    if group is None:
        group = base._group = [weakref.ref(base)]
    elif len(group) >= 32:  # (rows read in a Python loop: drop the ones that are gone)
        group[:] = [ref for ref in group if ref() is not None]
    group.append(weakref.ref(view))
    view._group = group


def written(target: Any) -> None:
    """`target` was written in place: the other live arrays sharing its memory go stale."""
    group = target._group
    if group is None:
        return
    alive = []
    for ref in group:
        other = ref()
        if other is None:
            continue
        alive.append(ref)
        if other is not target:
            _make_stale(other)
    group[:] = alive


def _make_stale(t: Any) -> None:
    marker = Stale()
    elems = np.empty(t.shape, dtype=object)
    elems.fill(marker)
    t._elems, t._memref = elems, None


class Stale:
    """The element of a traced array that shares memory (in numpy) with an array written
    after it was made: any use raises."""

    __slots__ = ()

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise CompileError(
            "this traced array shares memory with another one (in numpy it is a view made "
            "by slicing, reshape, transpose, ravel, ...), which was written in place after "
            "it was made (x[...] = v): numpy would show the new values here, cofactor's "
            "traced arrays do not share memory. Copy the view when you make it "
            "(row = m[0].copy()), or read it again after the write"
        )

    def __getattr__(self, name: str) -> Any:
        self._fail()

    def __repr__(self) -> str:
        return "<stale traced element>"


for _name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
    "lshift", "rshift", "divmod",
):  # fmt: skip
    setattr(Stale, f"__{_name}__", Stale._fail)
    setattr(Stale, f"__r{_name}__", Stale._fail)
for _name in (
    "neg", "pos", "abs", "invert", "bool", "float", "int", "index", "complex", "lt", "le",
    "gt", "ge", "eq", "ne", "round", "trunc", "floor", "ceil", "iter", "len", "getitem",
    "hash",
):  # fmt: skip
    setattr(Stale, f"__{_name}__", Stale._fail)
