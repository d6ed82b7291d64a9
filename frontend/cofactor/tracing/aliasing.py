"""numpy's shared memory for traced arrays: a write through one view shows in the others.

In numpy, `row = m[0]`, `y.reshape(2, 2)`, `y.T` or `y[1:]` are views: writing into `m`
(`m[0, 0] = v`, `m += 1`, `out=m`) changes `row`, and writing into `row` changes `m`. Traced
arrays are values (each holds its own elements), so the arrays numpy would let share memory
form a `MemoryGroup`: its root (the array that owns the memory) and every live view of it.

Which views numpy makes, and where each element of a view lives in the root, is numpy's own
answer: the group keeps `buf`, an int64 array shaped like the root holding each element's
row-major position, and every member keeps `where`, the same view operation applied to
`buf` (`buf[1:]`, `np.reshape(buf, ...)`, `buf.T`). If numpy's result does not share `buf`'s
memory the traced result is a copy and joins no group (`y.T.reshape(-1)` copies in numpy,
as do advanced indexing and `flatten`). A read-only numpy view (`np.broadcast_to`,
`np.diagonal`) refuses writes with numpy's ValueError.

A write into a member (`assign`: `x[k] = v`, `x += v`, `out=x`, `np.copyto`, ...) stores its
new elements at its positions of the root and refreshes every other live member from the
root: the numbers numpy would show. A row at a traced index (`r = m[i]`) passes writes
into it on to `m[i] = ...` (a select per row). Views whose positions are not known at
trace time (`np.real`/`np.imag` of complex arrays, views of views at traced indices) cannot
be refreshed: a write through one makes the other members `Stale` markers, and a write
through another makes it stale; using a stale array raises a CompileError saying to copy
the view, while a stale array nobody reads costs nothing.

Compiled loops, branches, QNodes and differentiated functions get their arrays by value.
A loop or branch body cannot write into an array made outside it (`region`: a
CompileError saying to carry it); an array passed to a loop or QNode that writes into its
copy goes stale in the caller (`passed`, `passed_to`), so reading it afterwards raises
instead of showing the old numbers. (The arguments of the compiled program itself are
copies too, as in Catalyst: the caller's numpy arrays never change.)
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileValueError

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


#: the serial of the cofactor.for_loop/while_loop/cond/vmap body being traced (0: none);
#: every Tracer records the one it was made in (`Tracer._region`)
REGION: list[int] = [0]
_SERIALS = itertools.count(1)
#: id -> weak reference of the traced arrays written in place (`assign`), for the by-value
#: boundaries (`passed`); not a WeakSet, which compares its members with `==`
_WRITTEN: dict[int, weakref.ref] = {}


@contextlib.contextmanager
def region() -> Iterator[None]:
    """Trace the body of a loop or branch: arrays made outside it cannot be written in it
    (the compiled region has no way to change them; numpy would)."""
    REGION.append(next(_SERIALS))
    try:
        yield
    finally:
        REGION.pop()


#: autograph's converted if/for/while (`functional_writes`): in-place writes into arrays
#: from outside the body give a new array that the converted code rebinds the name to
_FUNCTIONAL: list[bool] = [False]
#: the arrays from outside a body that `functional_writes` copied before writing
_COPIED: list[Any] = []


@contextlib.contextmanager
def functional_writes() -> Iterator[None]:
    """An `if`/`for`/`while` statement that autograph turned into cofactor's control flow:
    the converter rebinds every name the statement assigns (`y[0] = v`, `y += v`) to the
    statement's result, as Catalyst does (`y.at[0].set(v)`). A write in a body into an
    array from outside it then writes into a copy (`outside_copy`), and once the statement
    is done the original goes stale: it is only reachable through another name (`z = y`
    before the `if`), which numpy would show changed."""
    _FUNCTIONAL.append(True)
    start = len(_COPIED)
    try:
        yield
    finally:
        _FUNCTIONAL.pop()
        copied = _COPIED[start:]
        del _COPIED[start:]
        for t in copied:
            _make_stale(
                t,
                "it was written in place inside an if/for/while body that autograph "
                "compiled, which wrote a copy and rebound the name it was written through",
            )


def outside_copy(t: Any) -> Any:
    """`t`, or a copy of it to write into when `t` was made outside the loop or branch body
    being traced by autograph's converted code (`functional_writes`)."""
    if t._region == REGION[-1] or not _FUNCTIONAL[-1]:
        return t
    _COPIED.append(t)
    return t.copy()


def passed(outer: Any, inner: Any, where: str) -> None:
    """`inner[k]` stood for the traced array `outer[k]` in a function, QNode or loop body
    traced apart (a copy: arrays cross those boundaries by value). Where the body wrote
    into it in place, numpy would have changed `outer[k]` too: it goes stale, so reading it
    later raises rather than giving the old numbers. (`outer`, `inner`: pytrees alike.)"""
    from cofactor.tracing.pytree import flatten  # (pytree imports the tracer, which imports this)

    def is_leaf(x: Any) -> bool:
        return hasattr(x, "_region")  # (a Tracer or a HostArray)

    outer, inner = flatten(outer, is_leaf)[0], flatten(inner, is_leaf)[0]
    for o, i in zip(outer, inner, strict=False):
        ref = _WRITTEN.get(id(i))
        if ref is not None and ref() is i and o is not i:
            _make_stale(o, f"it was written in place inside {where} it was passed to")


#: trace context -> function name -> the positions of its inputs it writes in place
_FUNCTION_WRITES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record_writes(name: str, inputs: list[Any]) -> None:
    """After tracing the function `name` (a QNode's circuit), whose input arrays are
    `inputs`: remember which it wrote in place, for every call of it (`passed_to`)."""
    from cofactor.tracing import context  # (context imports the tracer, which imports this)

    written = []
    for k, t in enumerate(inputs):
        ref = _WRITTEN.get(id(t))
        if ref is not None and ref() is t:
            written.append(k)
    _FUNCTION_WRITES.setdefault(context.current(), {})[name] = written


def passed_to(name: str, outer: list[Any], where: str) -> None:
    """The call of the function `name` with the traced arrays `outer` was emitted: those the
    function writes in place go stale (as `passed`)."""
    from cofactor.tracing import context

    for k in _FUNCTION_WRITES.get(context.current(), {}).get(name, ()):
        if k < len(outer):
            _make_stale(outer[k], f"it was written in place inside {where} it was passed to")


class MemoryGroup:
    """The traced arrays that share one numpy buffer: the root owns it, the others view it."""

    __slots__ = ("root", "buf", "members", "prune_at")

    def __init__(self, root: Any, buf: np.ndarray | None = None) -> None:
        self.root = root  # (kept alive by the views, as numpy's `.base`)
        if buf is None:
            buf = np.arange(root.size, dtype=np.int64).reshape(root.shape)
        self.buf = buf
        self.members: list[weakref.ref] = [weakref.ref(root)]
        # (how many members `share_memory` lets the list reach before dropping the dead)
        self.prune_at = 32

    def alive(self) -> list[Any]:
        out, refs = [], []
        for ref in self.members:
            t = ref()
            if t is not None:
                out.append(t)
                refs.append(ref)
        self.members[:] = refs
        return out


def share_memory(
    base: Any,
    view: Any,
    probe: Callable[[np.ndarray], Any] | None,
    through: Callable[[np.ndarray], None] | None = None,
) -> None:
    """Record that the Tracer `view` was made from the Tracer `base` by a numpy operation
    that may return a view; `probe` applies that operation to a numpy array of `base`'s
    shape (None: the positions are unknown at trace time). `through(elems)`, for a view at
    a traced index (`m[i]`), writes new elements of the view into `base` (`m[i] = ...`)."""
    if view is base or (base.ndim == 0 and base._group is None):
        return  # (a 0-d traced value that is no view stands for an immutable numpy scalar)
    group = base._group
    where: Any = through
    if through is None and probe is not None:
        # numpy's answer, on the positions of the base's elements in the root's memory
        if group is None:
            buf = np.arange(base.size, dtype=np.int64).reshape(base.shape)
        else:
            buf = base._where if isinstance(base._where, np.ndarray) else None
        known = buf is not None
        if buf is None:
            buf = np.zeros(base.shape, np.int64)
        try:
            where = probe(buf)
        except Exception:  # noqa: BLE001 (the tracer's rules accepted it: keep the view)
            where = None
        else:
            if not isinstance(where, np.ndarray) or not np.may_share_memory(where, buf):
                return  # a copy in numpy (or a numpy scalar): no shared memory
            if not known or where.shape != view.shape:
                where = None  # a view, positions unknown
        if group is None:
            group = base._group = MemoryGroup(base, buf)
            base._where = buf
    elif through is None and view.ndim == 0:
        return  # (x[i] with a traced i: a number in numpy, not a view)
    if group is None:
        group = base._group = MemoryGroup(base)
        base._where = group.buf
    if len(group.members) >= group.prune_at:
        # rows read in a Python loop: drop the ones that are gone. Where they stay alive
        # (a circuit's gates hold `weights[l, w]` until the QNode emits them), the next
        # sweep waits until the list has doubled, so reading k rows costs O(k), not O(k^2)
        group.alive()
        group.prune_at = max(32, 2 * len(group.members))
    group.members.append(weakref.ref(view))
    view._group = group
    view._where = where


def assign(target: Any, elems: np.ndarray, what: str = "assignment destination") -> None:
    """`target` now holds `elems` (an object array of its shape): a write in place. The other
    live members of its memory group see the write as numpy's views would."""
    here = REGION[-1]
    if target._region != here:
        _outside_region(target)
    key = id(target)
    if key not in _WRITTEN:
        _WRITTEN[key] = weakref.ref(target, lambda _, key=key: _WRITTEN.pop(key, None))
    group = target._group
    if group is None:
        target._elems, target._memref = elems, None
        return
    where = target._where
    if isinstance(where, np.ndarray) and not where.flags.writeable:
        raise CompileValueError(f"{what} is read-only (as in numpy)")
    if where is not None and not isinstance(where, np.ndarray):
        where(elems)  # a view at a traced index: its base takes the write (`m[i] = ...`)
        target._elems, target._memref = elems, None  # (that write made it stale)
        return
    target._elems, target._memref = elems, None
    members = group.alive()
    if where is None:  # positions unknown: every other member goes stale
        for other in members:
            if other is not target:
                _make_stale(other)
        return
    root = group.root
    if root._region != here:
        _outside_region(root)
    if root is target:
        flat = elems.reshape(-1)
    else:
        flat = root.elems.copy().reshape(-1)
        flat[where.reshape(-1)] = elems.reshape(-1)
        root._elems, root._memref = flat.reshape(root.shape), None
    for other in members:
        if other is target or other is root:
            continue
        w = other._where
        if other._region != here:
            _make_stale(
                other, "memory it shares (a numpy view) was written inside a loop or branch body"
            )
        elif not isinstance(w, np.ndarray):
            _make_stale(other)
        else:
            other._elems, other._memref = flat[w.reshape(-1)].reshape(w.shape), None


def _outside_region(t: Any) -> None:
    raise CompileError(
        f"writing in place (x[...] = v, x += v, out=x) into a traced array (shape {t.shape}) "
        "made outside the cofactor.for_loop/while_loop/cond body being traced: numpy would "
        "change that array, a compiled loop or branch cannot. Pass it in as a loop-carried "
        "value (or branch operand) and return it, or write into a copy (y = y.copy())"
    )


def _make_stale(t: Any, why: str = "") -> None:
    """`t` (a Tracer; a HostArray: the traced array it holds) now holds Stale markers."""
    if not hasattr(t, "_region"):
        return  # (a Python number or a numpy constant: nothing wrote it)
    marker = Stale(why)
    elems = np.empty(np.shape(t), dtype=object)
    elems.fill(marker)
    if hasattr(t, "_elems"):
        t._elems, t._memref = elems, None
        return
    from cofactor.tracing.tracer import Tracer  # (the tracer imports this module)

    t._tracer, t._array = Tracer(elems, t.dtype), None


class Stale:
    """The element of a traced array that shares memory (in numpy) with an array written
    after it was made, where the write cannot be followed: any use raises."""

    __slots__ = ("why",)

    def __init__(self, why: str = "") -> None:
        self.why = why

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        why = object.__getattribute__(self, "why")
        if why:
            raise CompileError(
                f"this traced array cannot be used here: {why}. numpy would show the new "
                "values here; cofactor passes arrays to loops, QNodes and differentiated "
                "functions by value. Return the array from there and use the returned one, "
                "or pass a copy (x.copy())"
            )
        raise CompileError(
            "this traced array shares memory with another one (in numpy it is a view), "
            "which was written in place after it was made (x[...] = v, x += v, out=x), and "
            "cofactor cannot follow that write here: the view's elements' places are only "
            "known when the program runs (np.real/np.imag of a complex array, a row at a "
            "traced index m[i], or a view of such a view). numpy would show the new values "
            "here. Copy the view when you make it (r = m[i].copy()), or read it again after "
            "the write"
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
