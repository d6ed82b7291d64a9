"""What structured control flow carries: a pytree of traced arrays as a flat list of scalar
SSA values (`Carry`), and tracing into a region's block (`traced_region`).

Shared by the loops (loops.py) and the branches (branches.py): values carried from one
iteration to the next, or returned from a branch, become an `scf` op's iteration arguments /
results, one SSA value per array element.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pennylane as qml
from xdsl.dialects.builtin import f64
from xdsl.ir import Attribute, Block, SSAValue

from cofactor.errors import CompileTypeError
from cofactor.ir.builder import scalar_type
from cofactor.tracing import aliasing, context, pytree
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer
from cofactor.tracing.tracer import COMPLEX, Scalar, Tracer


class Carry:
    """The layout of carried values: the tree, and each leaf's shape and dtype."""

    def __init__(self, values: Any) -> None:
        leaves, self.tree = pytree.flatten(values, is_leaf=lambda x: isinstance(x, Tracer))
        self.tracers = [as_tracer(v) for v in leaves]
        self.layout = [(t.shape, t.dtype) for t in self.tracers]

    def types(self) -> list[Attribute]:
        out: list[Attribute] = []
        for shape, dtype in self.layout:
            n = int(np.prod(shape, dtype=np.int64)) * (2 if dtype == COMPLEX else 1)
            out += [f64 if dtype == COMPLEX else scalar_type(dtype)] * n
        return out

    def ssa(self, tracers: list[Tracer] | None = None) -> list[SSAValue]:
        """The flat SSA values of `tracers` (default: the initial values)."""
        out: list[SSAValue] = []
        for t in tracers if tracers is not None else self.tracers:
            for s in t.elems.flat:
                out += list(s.value) if t.dtype == COMPLEX else [s.value]
        return out

    def rebuild(self, values: list[SSAValue]) -> Any:
        """Tracers over `values` (block arguments or op results), in the original tree."""
        it = iter(values)
        leaves = []
        for shape, dtype in self.layout:
            elems = np.empty(shape, dtype=object)
            for pos in np.ndindex(*shape):
                v = (next(it), next(it)) if dtype == COMPLEX else next(it)
                elems[pos] = Scalar(v, dtype)
            leaves.append(Tracer(elems, dtype))
        return pytree.unflatten(self.tree, leaves)

    def conform(self, values: Any, what: str) -> list[Tracer]:
        """`values` (a body's result) checked against the layout and cast to its dtypes."""
        leaves, tree = pytree.flatten(values, is_leaf=lambda x: isinstance(x, Tracer))
        if tree != self.tree:
            raise CompileTypeError(
                f"{what} must return values with the same structure as its inputs "
                f"(expected {len(self.layout)} value(s) structured as {self.tree}, got {tree})"
            )
        out = []
        for v, (shape, dtype) in zip(leaves, self.layout, strict=True):
            t = as_tracer(v)
            if t.shape != shape:
                raise CompileTypeError(
                    f"{what}: a carried value changed shape from {shape} to {t.shape}"
                )
            if t.dtype != dtype and not np.can_cast(t.dtype, dtype, "same_kind"):
                raise CompileTypeError(
                    f"{what}: a carried value changed dtype from {dtype} to {t.dtype}"
                )
            out.append(cast_tracer(t, dtype))
        return out


@contextlib.contextmanager
def traced_region(block: Block) -> Iterator[Callable[[], None]]:
    """Trace into `block`; yields `flush`, which emits the quantum ops queued so far in it
    (call it before inserting the block's terminator)."""
    ctx = context.current()
    scope = ctx.quantum
    if scope is not None:
        scope.flush()  # ops queued before the region belong before the region op
    b = ctx.builder
    b.push(block)
    region = aliasing.region()  # (arrays made outside cannot be written in it)
    region.__enter__()
    queue = None
    if scope is not None:
        queue = qml.queuing.AnnotatedQueue()
        scope.queues.append(queue)
        queue.__enter__()
    try:
        yield (scope.flush if scope is not None else (lambda: None))
    finally:
        if queue is not None:
            queue.__exit__(None, None, None)
            scope.queues.pop()
        region.__exit__(None, None, None)
        b.pop()


def single(values: tuple) -> Any:
    if len(values) == 0:
        return None
    return values[0] if len(values) == 1 else values
