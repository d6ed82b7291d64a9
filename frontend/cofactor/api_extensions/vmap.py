"""`vmap`: Catalyst's vectorising map (catalyst/api_extensions/function_maps.py).

`vmap(fn, in_axes=0, out_axes=0, axis_size=None)` maps `fn` over an axis of its arguments:
`in_axes` is an int (every argument leaf batched on that axis) or a tuple with one entry per
positional argument, each an int, None (not batched) or a pytree of those matching the
argument (a leaf entry applies to the whole argument below it). Every batched leaf must have
the same size on its axis; `axis_size`, when given, must not exceed it and then only the first
`axis_size` elements are mapped (Catalyst's rule). `out_axes` places the batch axis in each
result (int, or a pytree of int/None matching the results: None means the result does not
depend on the batch element, and the last element's value is returned, as jax.vmap
assumes). Keyword arguments are passed unbatched. Invalid axes raise ValueError, as in
Catalyst.

Inside `qjit`, `fn` is traced *once* as the body of one compiled loop over the batch, so the
IR does not grow with the batch size: iteration i loads element i of each batched argument
from memory (function arguments already are; other values are stored once before the loop)
and stores its results at index i of output buffers allocated before the loop. Outside
`qjit` it is a Python loop (Catalyst calls jax.vmap there) whose results are stacked with
numpy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects import scf
from xdsl.ir import Block, SSAValue

from cofactor.api_extensions import hybrid
from cofactor.api_extensions.control_flow import traced_region
from cofactor.errors import CompileError
from cofactor.ir.builder import INDEX, memref_type
from cofactor.tracing import context, pytree
from cofactor.tracing.numpy_rules import as_tracer, in_memory
from cofactor.tracing.tracer import COMPLEX, Scalar, Tracer


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tracer | Scalar | np.ndarray | np.generic)


def _axes_leaves(axes: Any) -> list[Any]:
    return pytree.flatten(axes)[0]


def _check_axes(axes: Any, name: str) -> None:
    for a in _axes_leaves(axes):
        if isinstance(a, bool) or not isinstance(a, int | np.integer):
            tree = "PyTrees" if name == "in_axes" else "PyTree"  # Catalyst's wording
            raise ValueError(
                f"Invalid '{name}'; it must be an int or a tuple of {tree} with integer leaves "
                f"(None for a value that is not batched), but got {axes!r}"
            )


# Catalyst's wording (its tests match these)
_MATCH = {
    "arguments": "match the length of positional arguments (with the same pytree structure)",
    "results": "match the number of function results (with the same pytree structure)",
}


def _broadcast_axes(axes: Any, value: Any, name: str, what: str) -> list[Any]:
    """One axis (int or None) per leaf of `value`: `axes` is a prefix tree of `value`."""
    if axes is None or isinstance(axes, int | np.integer):
        return [axes] * len(pytree.flatten(value, is_leaf=_is_leaf)[0])
    if isinstance(axes, tuple | list) and isinstance(value, tuple | list):
        if len(axes) != len(value):
            raise ValueError(
                f"Invalid '{name}'; it must be an int or {_MATCH[what]}, but got "
                f"{len(axes)} axis specifier(s) for {len(value)} {what}"
            )
        out: list[Any] = []
        for a, v in zip(axes, value, strict=True):
            out += _broadcast_axes(a, v, name, what)
        return out
    if isinstance(axes, dict) and isinstance(value, dict) and set(axes) == set(value):
        out = []
        for k in value:  # value's key order is its flattening order
            out += _broadcast_axes(axes[k], value[k], name, what)
        return out
    raise ValueError(
        f"Invalid '{name}'; it must be an int or {_MATCH[what]}, but got the axis "
        f"specifier {axes!r} for a value of type {type(value).__name__}"
    )


def _normalize(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"Axis specifier {axis} is out of bounds for {what}. It only has {ndim} dimensions."
        )
    return axis % ndim


class VmapCallable:
    """`fn` mapped over an axis of its arguments; see `vmap`."""

    def __init__(self, fn: Callable, in_axes: Any, out_axes: Any, axis_size: int | None) -> None:
        if not callable(fn):
            raise TypeError(f"vmap expects a function, got {fn!r}")
        functools.update_wrapper(self, fn, updated=())
        # the annotations describe one element of the batch, not the batched arguments: no
        # ahead-of-time compilation from them (as in Catalyst)
        self.__annotations__ = {}
        self.fn = fn
        self.__name__ = f"vmap.{getattr(fn, '__name__', 'unknown')}"
        _check_axes(in_axes, "in_axes")
        _check_axes(out_axes, "out_axes")
        if axis_size is not None and (
            isinstance(axis_size, bool) or not isinstance(axis_size, int | np.integer)
        ):
            raise ValueError(f"Invalid 'axis_size'; it must be None or an int, got {axis_size!r}")
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.axis_size = axis_size

    # -- the batch -----------------------------------------------------------------------
    def _batched(self, args: tuple) -> tuple[list[Any], Any, list[tuple[int, int]], int]:
        """(argument leaves, their tree, [(leaf index, axis)] of batched leaves, batch size)."""
        if isinstance(self.in_axes, tuple | list):
            axes = _broadcast_axes(tuple(self.in_axes), tuple(args), "in_axes", "arguments")
        else:
            axes = _broadcast_axes(self.in_axes, args, "in_axes", "arguments")
        leaves, tree = pytree.flatten(args, is_leaf=_is_leaf)
        batched, sizes = [], []
        for k, (leaf, ax) in enumerate(zip(leaves, axes, strict=True)):
            if ax is None:
                continue
            shape = leaf.shape if isinstance(leaf, Tracer) else np.shape(leaf)
            ax = _normalize(int(ax), len(shape), f"argument {k}")
            batched.append((k, ax))
            sizes.append(shape[ax])
        if any(s != sizes[0] for s in sizes[1:]):
            raise ValueError(
                "Invalid batch sizes; expected the batch size to be the same for all arguments, "
                f"but got batch_sizes={sizes}"
            )
        size = sizes[0] if sizes else None
        if self.axis_size is not None:
            if size is not None and self.axis_size > size:
                raise ValueError(
                    "Invalid 'axis_size'; the default batch is expected to be None, or less than "
                    "or equal to the computed batch size, but got "
                    f"axis_size={self.axis_size} > batch_size={size}"
                )
            size = int(self.axis_size)
        if not size:
            raise ValueError(
                f"Invalid batch size; it must be a non-zero integer, but got {size or 0} (no "
                "argument is batched: give in_axes, or axis_size)"
                if size is None
                else f"Invalid batch size; it must be a non-zero integer, but got {size}."
            )
        return leaves, tree, batched, size

    def _out_axes(self, result: Any) -> list[Any]:
        return _broadcast_axes(self.out_axes, result, "out_axes", "results")

    # -- calls -----------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, tree, batched, size = self._batched(args)
        if not context.is_tracing():
            return self._python(leaves, tree, batched, size, kwargs)
        if hybrid.recording():
            raise CompileError(
                "vmap inside an adjoint or ctrl region is not supported: map outside the "
                "region, or use a for_loop inside it"
            )
        return self._traced(leaves, tree, batched, size, kwargs)

    def _python(self, leaves: list, tree: Any, batched: list, size: int, kwargs: dict) -> Any:
        def element(i: int) -> tuple:
            out = list(leaves)
            for k, ax in batched:
                out[k] = np.asarray(leaves[k])[(slice(None),) * ax + (i,)]
            return pytree.unflatten(tree, out)

        results = [self.fn(*element(i), **kwargs) for i in range(size)]
        flat = [pytree.flatten(r, is_leaf=_is_leaf) for r in results]
        out_tree = flat[0][1]
        axes = self._out_axes(results[0])
        stacked = []
        for j, ax in enumerate(axes):
            column = [np.asarray(f[0][j]) for f in flat]
            if ax is None:
                stacked.append(column[-1])
                continue
            stacked.append(
                np.stack(column, axis=_normalize(int(ax), column[0].ndim + 1, "a result"))
            )
        return pytree.unflatten(out_tree, stacked)

    def _traced(self, leaves: list, tree: Any, batched: list, size: int, kwargs: dict) -> Any:
        ctx = context.current()
        b = ctx.builder
        # batched inputs live in memory (function arguments already do; other values are
        # stored once, before the loop), so the loop body loads only its own element
        sources = {k: _in_memory(leaves[k]) for k, _ in batched}
        block = Block(arg_types=[INDEX])
        with traced_region(block) as flush:
            i = block.args[0]
            element = list(leaves)
            for k, ax in batched:
                element[k] = _load_slice(*sources[k], ax, i)
            result = self.fn(*pytree.unflatten(tree, element), **kwargs)
            res_leaves, out_tree = pytree.flatten(result, is_leaf=lambda x: isinstance(x, Tracer))
            try:
                res = [as_tracer(r) for r in res_leaves]
            except (CompileError, TypeError, ValueError) as exc:
                raise CompileError(
                    f"{self.__name__}: the mapped function must return arrays (or pytrees of "
                    f"them): {exc}"
                ) from exc
            axes = self._out_axes(pytree.unflatten(out_tree, res))
            # the outputs: buffers allocated before the loop, element i written by iteration i
            # (an unbatched result, out_axes None, is written by every iteration: the last stays)
            outs = []
            for t, ax in zip(res, axes, strict=True):
                shape = t.shape if ax is None else (size, *t.shape)
                buf = ctx.hoisted_alloc(memref_type(shape, t.dtype))
                _store_slice(t, buf, None if ax is None else i)
                outs.append((buf, shape, t.dtype))
            flush()
            b.insert(scf.YieldOp())
        op = b.insert(scf.ForOp(b.index(0), b.index(size), b.index(1), [], block))
        results = []
        for (buf, shape, dtype), ax in zip(outs, axes, strict=True):
            t = Tracer.from_memref(buf, shape, dtype, anchor=op)
            if ax is not None and _normalize(int(ax), len(shape), "a result") != 0:
                t = np.moveaxis(t, 0, _normalize(int(ax), len(shape), "a result"))
            results.append(t)
        return pytree.unflatten(out_tree, results)


def _in_memory(x: Any) -> tuple[SSAValue, tuple[int, ...], np.dtype]:
    """(memref, shape, dtype) holding the array `x`: its own memref when it has one."""
    t = as_tracer(x) if isinstance(x, Tracer | Scalar) else as_tracer(np.asarray(x))
    return in_memory(t), t.shape, t.dtype


def _load_slice(ref: SSAValue, shape: tuple, dtype: np.dtype, axis: int, i: SSAValue) -> Tracer:
    """Element `i` (an index value) of the array in `ref` along `axis`."""
    b = context.current().builder
    consts: dict[int, SSAValue] = {}

    def idx(v: int) -> SSAValue:
        if v not in consts:
            consts[v] = b.index(v)
        return consts[v]

    rest = shape[:axis] + shape[axis + 1 :]
    elems = np.empty(rest, dtype=object)
    for pos in np.ndindex(*rest):
        ids = [idx(p) for p in pos]
        ids.insert(axis, i)
        if dtype == COMPLEX:
            elems[pos] = Scalar((b.load(ref, [*ids, idx(0)]), b.load(ref, [*ids, idx(1)])), dtype)
        else:
            elems[pos] = Scalar(b.load(ref, ids), dtype)
    return Tracer(elems, dtype)


def _store_slice(t: Tracer, ref: SSAValue, i: SSAValue | None) -> None:
    """Write `t` into `ref[i]` (or all of `ref` when `i` is None)."""
    b = context.current().builder
    consts: dict[int, SSAValue] = {}

    def idx(v: int) -> SSAValue:
        if v not in consts:
            consts[v] = b.index(v)
        return consts[v]

    elems = t.elems
    for pos in np.ndindex(*t.shape):
        ids = [idx(p) for p in pos] if i is None else [i, *[idx(p) for p in pos]]
        s = elems[pos]
        if t.dtype == COMPLEX:
            b.store(s.value[0], ref, [*ids, idx(0)])
            b.store(s.value[1], ref, [*ids, idx(1)])
        else:
            b.store(s.value, ref, ids)


def vmap(
    fn: Callable | None = None,
    *,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_size: int | None = None,
) -> Any:
    """A qjit-compatible vectorising map (Catalyst's `vmap`): `fn` mapped over an axis of its
    arguments, results stacked on `out_axes`. Usable as `vmap(fn, in_axes=(0, None))` or as a
    decorator `@vmap(in_axes=1)`; see the module docstring for the rules."""
    if fn is None:
        return functools.partial(vmap, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size)
    return VmapCallable(fn, in_axes, out_axes, axis_size)


__all__ = ["VmapCallable", "vmap"]
