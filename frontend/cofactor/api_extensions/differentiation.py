"""Differentiation: `grad`, `value_and_grad`, `jacobian`, `vjp`, `jvp` (Catalyst's API).

While a qjit function is traced, differentiating `fn` at some arguments

1. traces `fn` into its own void destination-passing function (docs/gradients.md)

       func.func private @fn(%in0: memref<..>, ..., %out0: memref<..>, ...)
           attributes {cofactor.num_inputs = N : i64}

   (traced values that `fn` captured from the enclosing trace become extra, constant
   inputs after the arguments);
2. with the default method (Enzyme) emits `gradient.vjp` ops at the call site:
   `grad`/`value_and_grad`/`vjp` one op (cotangent 1.0 or the user's cotangents),
   `jacobian`/`jvp` one op per output element with a one-hot cotangent (unrolled for small
   outputs, an `scf.for` otherwise) -- `jvp` contracts that Jacobian with the tangents;
3. with `method="fd"` emits finite differences of the whole function instead (`func.call`s
   of the traced function on perturbed inputs): Catalyst's forward difference
   `(f(x + h e_j) - f(x)) / h` with step `h` (default 1e-7), or with `method="central"`
   the central difference `(f(x + h e_j) - f(x - h e_j)) / 2h`. This needs no gradient pass
   and is the only way to nest derivatives.

The passes of docs/gradients.md then split QNodes, attach the custom gradients of QNodes and
callbacks and hand the rest to Enzyme. Outside qjit, a differentiated function compiles
itself on first call (`qjit(grad(f))` is the same thing spelled out).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pennylane as qml
from xdsl.dialects import arith
from xdsl.dialects.builtin import f64, i64
from xdsl.ir import Block, SSAValue

from cofactor import native_compiler
from cofactor.api_extensions.diff_function import (
    buffers_of,
    check_method,
    fill,
    fn_name,
    is_leaf,
    loaded,
    loop_over,
    normalize_argnums,
    strides,
    trace_function,
)
from cofactor.errors import (
    CompileError,
    DifferentiableCompileError,
)
from cofactor.ir.builder import (
    INDEX,
    array_attr,
    call_op,
    int_attr,
    memref_type,
    symbol_ref,
)
from cofactor.ir.mlir15 import generic_op
from cofactor.ir.scf_ops import for_op, yield_op
from cofactor.launcher import BufferSpec
from cofactor.tracing import context, pytree
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer, store_tracer
from cofactor.tracing.tracer import FLOAT, Scalar, Tracer

#: Jacobians with at most this many output elements unroll their one-hot vjps
UNROLL_JACOBIAN_ROWS = 8


# ----------------------------------------------------------------------------------------
# one differentiation request
# ----------------------------------------------------------------------------------------
class _Request:
    """`fn` at `args`: the traced function, the argument layout and the emitted ops."""

    def __init__(
        self, fn: Callable, args: tuple, argnums: Any, method: Any, h: Any, what: str
    ) -> None:
        self.what = what
        self.name = fn_name(fn)
        self.method, self.h, self.scheme = check_method(method, h, what)
        ctx = context.current()
        outer = context.differentiation_method(ctx)
        if self.method == "auto" and outer == "auto":
            raise DifferentiableCompileError(
                "Only finite difference can compute higher order derivatives. "
                f'({what} is inside another derivative: give both method="fd", e.g. '
                'grad(grad(f, method="fd"), method="fd").)'
            )
        if self.method == "fd" and outer == "auto":
            # Enzyme over finite differences: the differences call the traced function on
            # freshly allocated buffers, and Enzyme treats those buffers as inactive (a
            # silently zero derivative; see docs/frontend.md), so this is refused
            raise DifferentiableCompileError(
                "Only finite difference can compute higher order derivatives. (The outer "
                'derivative must use method="fd" too.)'
            )
        self.argnums, self.single_arg = normalize_argnums(argnums, len(args), what)
        # leaves of each positional argument
        self.arg_trees: list[Any] = []
        all_ranges: list[range] = []
        leaves: list[Any] = []
        for a in args:
            sub, tree = pytree.flatten(a, is_leaf=is_leaf)
            all_ranges.append(range(len(leaves), len(leaves) + len(sub)))
            self.arg_trees.append(tree)
            leaves += sub
        # As in JAX, the arguments that are not differentiated keep their Python values
        # (a static `n` of qjit stays an int for range(n), a string stays a string); only
        # arrays and traced values become inputs of the differentiated function.
        differentiated = {i for n in self.argnums for i in all_ranges[n]}
        dynamic = [
            i for i, leaf in enumerate(leaves) if i in differentiated or not _is_concrete(leaf)
        ]
        kept = set(dynamic)
        # (ranges into the inputs, from the number of inputs before the argument's first
        # leaf; only those of differentiated arguments are used, and they are all inputs)
        self.arg_ranges = [
            range(first, first + len(r)) if all(i in kept for i in r) else range(0)
            for r in all_ranges
            for first in (bisect.bisect_left(dynamic, r.start),)
        ]
        tracers = []
        for i in dynamic:
            try:
                tracers.append(as_tracer(leaves[i]))
            except CompileError as err:
                raise CompileError(f"{what}: argument leaf {i}: {err}") from None
        # the differentiated leaves in increasing order (gradient.vjp needs that); per_arg
        # puts the derivatives back in the order of argnums
        self.diff: list[int] = []
        for n in sorted(set(self.argnums)):
            for i in self.arg_ranges[n]:
                if tracers[i].dtype != FLOAT:
                    raise DifferentiableCompileError(
                        f"{what}: argument {n} of {self.name} has dtype {tracers[i].dtype}; "
                        "cofactor only supports differentiation on floating-point arguments "
                        "(pass 1.0 rather than 1, or leave the argument out of argnums)"
                    )
                self.diff.append(i)
        args_tree = ("tuple", tuple(self.arg_trees))
        if self.method == "auto" and not isinstance(fn, qml.QNode):
            # Enzyme will differentiate classical code: its plugin loads while this traces
            native_compiler.prepare_enzyme()
        if len(dynamic) < len(leaves):
            fn, args_tree = _with_concrete_leaves(fn, leaves, dynamic, self.arg_trees, all_ranges)
        self.traced = trace_function(fn, args_tree, tracers, self.method, what)
        self.inputs = [*tracers, *self.traced.captured]
        self._in_refs: list[SSAValue] | None = None
        self._out_refs: list[SSAValue] | None = None
        self._cout_refs: list[SSAValue] | None = None

    # -- sizes -----------------------------------------------------------------------------
    @property
    def out_specs(self) -> list[BufferSpec]:
        return self.traced.out_specs

    @property
    def out_sizes(self) -> list[int]:
        return [int(np.prod(s.shape, dtype=np.int64)) for s in self.out_specs]

    def in_spec(self, i: int) -> BufferSpec:
        return self.traced.in_specs[i]

    # -- Enzyme: gradient.vjp --------------------------------------------------------------
    def _buffers(self) -> None:
        if self._in_refs is None:
            ctx = context.current()
            self._in_refs = buffers_of(self.inputs)
            self._out_refs = [
                ctx.hoisted_alloc(memref_type(s.shape, s.dtype)) for s in self.out_specs
            ]
            self._cout_refs = [
                ctx.hoisted_alloc(memref_type(s.shape, s.dtype)) for s in self.out_specs
            ]

    def _vjp_op(self, din_refs: list[SSAValue]) -> Any:
        assert self._in_refs is not None and self._out_refs is not None
        assert self._cout_refs is not None
        for ref, i in zip(din_refs, self.diff, strict=True):
            fill(ref, self.in_spec(i), 0.0)
        # (the builder's attribute fast paths: xDSL's constructors run generic checks, ~0.3 M
        # instructions for these four on the first gradient of a process)
        attrs = {
            "callee": symbol_ref(self.traced.name),
            "num_inputs": int_attr(len(self._in_refs), i64),
            "num_outputs": int_attr(len(self._out_refs), i64),
            "diff_inputs": array_attr(tuple(int_attr(i, i64) for i in self.diff)),
        }
        operands = [*self._in_refs, *self._out_refs, *self._cout_refs, *din_refs]
        return context.current().builder.insert(generic_op("gradient.vjp", operands, [], attrs))

    def _din_refs(self) -> list[SSAValue]:
        ctx = context.current()
        return [
            ctx.hoisted_alloc(memref_type(self.in_spec(i).shape, self.in_spec(i).dtype))
            for i in self.diff
        ]

    def enzyme_vjp(self, cotangents: list[Any]) -> tuple[list[Tracer], list[Tracer]]:
        """One gradient.vjp with the given cotangents; (primal outputs, one vjp per diff leaf)."""
        self._buffers()
        assert self._cout_refs is not None and self._out_refs is not None
        for ref, ct, spec in zip(self._cout_refs, cotangents, self.out_specs, strict=True):
            t = cast_tracer(as_tracer(ct), FLOAT)
            if t.shape != spec.shape:
                t = Tracer(np.broadcast_to(t.elems, spec.shape).copy(), FLOAT)
            store_tracer(t, ref)
        dins = self._din_refs()
        op = self._vjp_op(dins)
        outs = [
            Tracer.from_memref(r, s.shape, s.dtype, anchor=op)
            for r, s in zip(self._out_refs, self.out_specs, strict=True)
        ]
        grads = [
            Tracer.from_memref(r, self.in_spec(i).shape, FLOAT, anchor=op)
            for r, i in zip(dins, self.diff, strict=True)
        ]
        return outs, grads

    def jacobian_blocks(self) -> tuple[list[Tracer], list[Tracer]]:
        """(primal outputs, per diff leaf the Jacobian of all output elements (flattened, in
        order) w.r.t. that leaf: shape (R, *leaf shape))."""
        if self.method == "fd":
            return self._fd_blocks()
        rows = sum(self.out_sizes)
        if rows <= UNROLL_JACOBIAN_ROWS:
            return self._unrolled_blocks(rows)
        return self._looped_blocks(rows)

    def _one_hot(self, r: int) -> list[np.ndarray]:
        cts, start = [], 0
        for spec, n in zip(self.out_specs, self.out_sizes, strict=True):
            flat = np.zeros(n)
            if start <= r < start + n:
                flat[r - start] = 1.0
            cts.append(flat.reshape(spec.shape))
            start += n
        return cts

    def _unrolled_blocks(self, rows: int) -> tuple[list[Tracer], list[Tracer]]:
        if rows == 1:
            # one vjp (a scalar function's gradient): the gradients stay in their buffers
            # (reshaped by a loop copy when large), as no later vjp reuses them
            o, g = self.enzyme_vjp(self._one_hot(0))
            return [loaded(t) for t in o], [np.reshape(t, (1, *t.shape)) for t in g]
        per_row: list[list[Tracer]] = []
        outs: list[Tracer] = []
        for r in range(rows):
            o, g = self.enzyme_vjp(self._one_hot(r))
            if r == 0:
                outs = [loaded(t) for t in o]
            per_row.append([loaded(t) for t in g])
        blocks = []
        for k in range(len(self.diff)):
            elems = np.stack([per_row[r][k].elems for r in range(rows)])
            blocks.append(Tracer(elems, FLOAT))
        return outs, blocks

    def _looped_blocks(self, rows: int) -> tuple[list[Tracer], list[Tracer]]:
        """for r in 0..R: one-hot cotangent r, gradient.vjp, copy the row into jac[r]."""
        ctx = context.current()
        b = ctx.builder
        self._buffers()
        assert self._cout_refs is not None and self._out_refs is not None
        jac_refs = [
            ctx.hoisted_alloc(memref_type((rows, *self.in_spec(i).shape), FLOAT)) for i in self.diff
        ]
        dins = self._din_refs()
        lb, ub, st = b.index(0), b.index(rows), b.index(1)
        block = Block(arg_types=[INDEX])
        b.push(block)
        try:
            r = block.args[0]
            one, zero = b.const(1.0, f64), b.const(0.0, f64)
            start = 0
            # loop nests over each cotangent and gradient: the IR does not grow with them
            for ref, spec, n in zip(self._cout_refs, self.out_specs, self.out_sizes, strict=True):

                def one_hot(ivs: list[SSAValue], accs: list[SSAValue], ref=ref, spec=spec,
                            start=start) -> list[SSAValue]:  # fmt: skip
                    flat = b.index(start)
                    for iv, stride in zip(ivs, strides(spec.shape), strict=True):
                        term = b.binary(arith.MuliOp, iv, b.index(stride))
                        flat = b.binary(arith.AddiOp, flat, term)
                    b.store(b.select(b.cmpi("eq", r, flat), one, zero), ref, ivs)
                    return []

                loop_over(spec.shape, one_hot)
                start += n
            self._vjp_op(dins)
            for din, jac, i in zip(dins, jac_refs, self.diff, strict=True):

                def copy_row(ivs: list[SSAValue], accs: list[SSAValue], din=din,
                             jac=jac) -> list[SSAValue]:  # fmt: skip
                    b.store(b.load(din, ivs), jac, [r, *ivs])
                    return []

                loop_over(self.in_spec(i).shape, copy_row)
            b.insert(yield_op())
        finally:
            b.pop()
        op = b.insert(for_op(lb, ub, st, [], block))
        outs = [
            Tracer.from_memref(ref, s.shape, s.dtype, anchor=op)
            for ref, s in zip(self._out_refs, self.out_specs, strict=True)
        ]
        blocks = [
            Tracer.from_memref(ref, (rows, *self.in_spec(i).shape), FLOAT, anchor=op)
            for ref, i in zip(jac_refs, self.diff, strict=True)
        ]
        return outs, blocks

    # -- finite differences ----------------------------------------------------------------
    def _call(self, refs: list[SSAValue]) -> list[Tracer]:
        # fresh output buffers per call: see _fd_blocks
        ctx = context.current()
        outs = [ctx.hoisted_alloc(memref_type(s.shape, s.dtype)) for s in self.out_specs]
        call = ctx.builder.insert(call_op(self.traced.name, [*refs, *outs]))
        return [
            loaded(Tracer.from_memref(r, s.shape, s.dtype, anchor=call))
            for r, s in zip(outs, self.out_specs, strict=True)
        ]

    def _fd_blocks(self) -> tuple[list[Tracer], list[Tracer]]:
        """Forward differences J[:, j] = (f(x + h e_j) - f(x)) / h (Catalyst's method="fd"),
        or central ones J[:, j] = (f(x + h e_j) - f(x - h e_j)) / 2h (method="central")."""
        ctx = context.current()
        base = buffers_of(self.inputs)
        outs = self._call(base)
        h = self.h
        signs = (1.0, -1.0) if self.scheme == "central" else (1.0,)
        base_flat = np.concatenate([v.elems.reshape(-1) for v in outs])
        blocks = []
        for i in self.diff:
            spec = self.in_spec(i)
            x = self.inputs[i].elems
            columns = []
            for pos in np.ndindex(*spec.shape):
                flats = []
                for sign in signs:
                    shifted = x.copy()
                    shifted[pos] = x[pos] + sign * h
                    # a fresh buffer per call (no buffer is overwritten), so that an
                    # enclosing Enzyme derivative does not see reused memory (it returned
                    # 0 for grad(grad(f, method="fd")) with reused buffers)
                    buf = ctx.hoisted_alloc(memref_type(spec.shape, FLOAT))
                    store_tracer(Tracer(shifted, FLOAT), buf)
                    refs = list(base)
                    refs[i] = buf
                    values = self._call(refs)
                    flats.append(np.concatenate([v.elems.reshape(-1) for v in values]))
                if self.scheme == "central":
                    columns.append((flats[0] - flats[1]) * (1.0 / (2.0 * h)))
                else:
                    columns.append((flats[0] - base_flat) * (1.0 / h))
            rows = sum(self.out_sizes)
            elems = np.empty((rows, *spec.shape), dtype=object)
            for k, pos in enumerate(np.ndindex(*spec.shape)):
                elems[(slice(None), *pos)] = columns[k]
            blocks.append(Tracer(elems, FLOAT))
        return outs, blocks

    # -- assembling results ------------------------------------------------------------------
    def per_arg(self, per_leaf: list[Any]) -> Any:
        """Values for the differentiated leaves -> the argument trees (a tuple unless
        argnums was a single int)."""
        position = {leaf: k for k, leaf in enumerate(self.diff)}
        parts = []
        for n in self.argnums:
            leaves = [per_leaf[position[i]] for i in self.arg_ranges[n]]
            parts.append(pytree.unflatten(self.arg_trees[n], leaves))
        return parts[0] if self.single_arg else tuple(parts)

    def outputs(self, outs: list[Tracer]) -> Any:
        return pytree.unflatten(self.traced.out_tree, outs)

    def scalar_output(self) -> None:
        specs = self.out_specs
        if len(specs) != 1 or specs[0].shape != ():
            shapes = ", ".join(str(s.shape) for s in specs)
            raise DifferentiableCompileError(
                f"{self.what}: cofactor.grad only supports scalar-output functions, but "
                f"{self.name} returns {len(specs)} value(s) of shape(s) {shapes}; use "
                "cofactor.jacobian for array or several results (or vjp/jvp)"
            )


# ----------------------------------------------------------------------------------------
# the user-facing transformations
# ----------------------------------------------------------------------------------------
class _Transform:
    """Base of `grad`/`value_and_grad`/`jacobian`: a callable that differentiates `fn`
    while traced, and compiles itself when called outside qjit."""

    kind = "grad"

    def __init__(self, fn: Callable, method: Any = None, h: Any = None, argnums: Any = 0):
        if not callable(fn):
            raise TypeError(f"{self.kind} expects a function, got {fn!r}")
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.method = method
        self.h = h
        self.argnums = argnums
        auto = check_method(method, h, self.kind)[0] == "auto"
        self.__name__ = f"{self.kind}_{fn_name(fn)}"
        self._compiled: Any = None
        if auto and not isinstance(fn, qml.QNode) and not context.is_tracing():
            # Enzyme will differentiate classical code when this is compiled (qjit(grad(f))
            # or its first call): the plugin starts loading now rather than once the first
            # call traces (`_Request` does it there too; once per process), so that call
            # does not wait for the plugin's check (0.4 ms) and the load has a head start.
            native_compiler.prepare_enzyme()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not context.is_tracing():
            if self._compiled is None:
                from cofactor.jit import qjit

                self._compiled = qjit(self)
            return self._compiled(*args, **kwargs)
        fn = self.fn
        if kwargs:
            import inspect

            bound = inspect.signature(self.fn).bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
            if bound.kwargs:  # keyword-only parameters: passed through, never differentiated
                fn = _with_keywords_last(self.fn, len(args), list(bound.kwargs))
                args = (*args, *bound.kwargs.values())
        what = f"{self.kind}({fn_name(self.fn)})"
        req = _Request(fn, args, self.argnums, self.method, self.h, what)
        return self._apply(req)

    def _apply(self, req: _Request) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


def _is_concrete(leaf: Any) -> bool:
    """A leaf that is a Python value, not an array or a traced value."""
    return not isinstance(leaf, Tracer | Scalar | np.ndarray)


def _with_concrete_leaves(
    fn: Callable, leaves: list[Any], dynamic: list[int], trees: list[Any], ranges: list[range]
) -> tuple[Callable, Any]:
    """`fn` taking only the leaves at `dynamic` (flat), with the other leaves put back as
    the Python values they are; and the argument tree of the flat leaves."""

    def with_concrete(*dynamic_values: Any) -> Any:
        full = list(leaves)
        for i, value in zip(dynamic, dynamic_values, strict=True):
            full[i] = value
        pieces = zip(trees, ranges, strict=True)
        return fn(*(pytree.unflatten(t, full[r.start : r.stop]) for t, r in pieces))

    with_concrete.__name__ = fn_name(fn)
    with_concrete.__wrapped__ = fn  # type: ignore[attr-defined]  # (captured_cells looks there)
    return with_concrete, ("tuple", (pytree.LEAF,) * len(dynamic))


def _with_keywords_last(fn: Callable, n_positional: int, names: list[str]) -> Callable:
    """`fn` taking its keyword arguments as trailing positional ones: traced keyword values
    then enter the differentiated function as arguments (argnums never reach them)."""

    def positional(*args: Any) -> Any:
        return fn(*args[:n_positional], **dict(zip(names, args[n_positional:], strict=True)))

    positional.__name__ = getattr(fn, "__name__", "fn")
    return positional


def _grad_of(req: _Request) -> tuple[list[Tracer], list[Tracer]]:
    req.scalar_output()
    if req.method == "fd":
        outs, blocks = req.jacobian_blocks()
        grads = [
            np.reshape(blk, req.in_spec(i).shape) for blk, i in zip(blocks, req.diff, strict=True)
        ]
        return outs, grads
    return req.enzyme_vjp([1.0])


def _in_output_tree(req: _Request, grads: list[Tracer]) -> Any:
    """The gradient inside the containers of the (one) output, as Catalyst: a function
    returning `[y]` or `{"k": y}` has the gradient `[g]` / `{"k": g}` (its jacobian's
    structure)."""
    return pytree.unflatten(req.traced.out_tree, [req.per_arg(grads)])


class Grad(_Transform):
    kind = "grad"

    def _apply(self, req: _Request) -> Any:
        _, grads = _grad_of(req)
        return _in_output_tree(req, grads)


class ValueAndGrad(_Transform):
    kind = "value_and_grad"

    def _apply(self, req: _Request) -> Any:
        outs, grads = _grad_of(req)
        return req.outputs(outs), _in_output_tree(req, grads)


class Jacobian(_Transform):
    kind = "jacobian"

    def _apply(self, req: _Request) -> Any:
        outs, blocks = req.jacobian_blocks()
        per_output = []
        start = 0
        for spec, n in zip(req.out_specs, req.out_sizes, strict=True):
            leaves = []
            for blk, i in zip(blocks, req.diff, strict=True):
                part = blk[start : start + n] if n != blk.shape[0] else blk
                leaves.append(np.reshape(part, (*spec.shape, *req.in_spec(i).shape)))
            per_output.append(req.per_arg(leaves))
            start += n
        return pytree.unflatten(req.traced.out_tree, per_output)


def grad(fn: Callable | None = None, method: Any = None, h: Any = None, argnums: Any = 0) -> Any:
    """The gradient of a scalar-valued function (Catalyst's `grad`).

    Args:
        fn: the function (may call QNodes and callbacks).
        method: None/"auto" (Enzyme, QNodes by their diff_method) or "fd" (finite
            differences; the only method that nests).
        h: the finite-difference step (default 1e-7).
        argnums: the argument(s) to differentiate: an int, or a tuple for a tuple of
            gradients.
    """
    if fn is None:
        return functools.partial(grad, method=method, h=h, argnums=argnums)
    return Grad(fn, method, h, argnums)


def value_and_grad(
    fn: Callable | None = None, method: Any = None, h: Any = None, argnums: Any = 0
) -> Any:
    """`(fn(*args), grad(fn)(*args))`, computed together."""
    if fn is None:
        return functools.partial(value_and_grad, method=method, h=h, argnums=argnums)
    return ValueAndGrad(fn, method, h, argnums)


def jacobian(
    fn: Callable | None = None, method: Any = None, h: Any = None, argnums: Any = 0
) -> Any:
    """The Jacobian: for each result of shape S and argument of shape A, an array of shape
    S + A (a tuple over the results when `fn` returns several, over the arguments when
    argnums is a tuple)."""
    if fn is None:
        return functools.partial(jacobian, method=method, h=h, argnums=argnums)
    return Jacobian(fn, method, h, argnums)


__all__ = ["grad", "jacobian", "value_and_grad"]
