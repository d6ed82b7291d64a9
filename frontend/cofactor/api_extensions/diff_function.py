"""The differentiated function as a function of its own, and the checks of grad's arguments.

`trace_function` traces the function that `grad`/`jacobian`/`vjp`/`jvp` differentiate into a
void destination-passing `func.func` (docs/gradients.md); traced values it captured from the
enclosing trace become extra, constant inputs. The helpers below it move traced values in and
out of the buffers the gradient ops take. `differentiation.py` builds the requests on top.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr, f64, i64
from xdsl.ir import Block, Region, SSAValue

from cofactor.errors import CompileError, CompileValueError, DifferentiableCompileError
from cofactor.ir.builder import func_op, int_attr, memref_type
from cofactor.ir.dead_code import remove_dead_code
from cofactor.launcher import BufferSpec
from cofactor.tracing import context, pytree
from cofactor.tracing.array_loops import ELEMENTWISE_MAX
from cofactor.tracing.numpy_rules import as_tracer, store_tracer
from cofactor.tracing.scalars import _loop_nest
from cofactor.tracing.tracer import FLOAT, Scalar, Tracer

#: the default finite-difference step (Catalyst's, FiniteDifference.cpp: 1e-7)
DEFAULT_FD_STEP = 1e-7
#: method -> finite-difference scheme ("fd" is Catalyst's forward difference)
FD_SCHEMES = {"fd": "forward", "central": "central"}

_PY_SCALARS = (bool, int, float, complex)


def is_leaf(x: Any) -> bool:
    """Tracers, arrays and lists of plain numbers are leaves (as in qjit's arguments)."""
    if isinstance(x, Tracer | Scalar | np.ndarray | np.generic):
        return True
    if isinstance(x, list | tuple) and x:
        return all(isinstance(v, _PY_SCALARS + (np.generic,)) for v in x) or all(
            is_leaf(v) and isinstance(v, list | tuple) for v in x
        )
    return False


def fn_name(fn: Any) -> str:
    name = getattr(getattr(fn, "func", fn), "__name__", None) or getattr(fn, "__name__", "fn")
    return str(name).strip("<>")


def check_method(method: str | None, h: Any, what: str) -> tuple[str, float, str]:
    """(method: "auto" or "fd", step, scheme: "forward" or "central")."""
    if method in (None, "auto"):
        return "auto", 0.0, ""
    if method in FD_SCHEMES:
        if h is None:
            step = DEFAULT_FD_STEP
        elif isinstance(h, bool) or not isinstance(h, int | float | np.integer | np.floating):
            raise CompileValueError(
                f"{what}: Invalid h value ({h!r}); None or a number was expected"
            )
        else:
            step = float(h)
        if step == 0.0 or not np.isfinite(step):
            raise CompileValueError(
                f"{what}: the finite-difference step h must be a finite non-zero number, got {h}"
            )
        return "fd", step, FD_SCHEMES[method]
    raise CompileValueError(
        f"{what}: Invalid differentiation method {method!r} (an unsupported differentiation "
        'method); use "auto" (the default: '
        'Enzyme, with the QNodes\' own diff_method), "fd" (forward finite differences, as '
        'Catalyst) or "central" (central finite differences)'
    )


def normalize_argnums(argnums: Any, nargs: int, what: str) -> tuple[tuple[int, ...], bool]:
    """(argument positions in the order given, whether a single int was given).

    As in JAX and Catalyst, the derivatives come back in the order of `argnums` (any order;
    a repeated position gives the same derivative twice).
    """
    if argnums is None:
        argnums = 0
    single = isinstance(argnums, int | np.integer) and not isinstance(argnums, bool)
    if single:
        nums: tuple = (int(argnums),)
    elif isinstance(argnums, tuple | list):
        nums = tuple(argnums)
    else:
        nums = (argnums,)
    out = []
    for n in nums:
        if not isinstance(n, int | np.integer) or isinstance(n, bool):
            raise CompileValueError(
                f"{what}: argnums should be an integer or a Sequence of integers, not {argnums!r}"
            )
        if not -nargs <= n < nargs:
            raise CompileValueError(
                f"{what}: argnums={n} is out of range for a function called with {nargs} "
                "argument(s)"
            )
        out.append(int(n) % nargs)
    if not out:
        raise CompileValueError(f"{what}: argnums is empty; name at least one argument")
    return tuple(out), single


# ----------------------------------------------------------------------------------------
# tracing the differentiated function into its own func.func
# ----------------------------------------------------------------------------------------
def captured_cells(fn: Any) -> list[Any]:
    """Closure cells (of `fn`, a QNode's quantum function, and functions they capture)
    holding tracers of the enclosing trace."""
    cells: list[Any] = []
    seen: set[int] = set()

    def visit(f: Any, depth: int) -> None:
        if f is None or id(f) in seen or depth > 3:
            return
        seen.add(id(f))
        inner = getattr(f, "func", None)
        if inner is not None and inner is not f:
            visit(inner, depth + 1)
        wrapped = getattr(f, "__wrapped__", None) or getattr(f, "fn", None)
        if wrapped is not None and wrapped is not f and callable(wrapped):
            visit(wrapped, depth + 1)
        for cell in getattr(f, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, Tracer):
                if all(c is not cell for c in cells):
                    cells.append(cell)
            elif callable(value):
                visit(value, depth + 1)

    visit(fn, 0)
    return cells


@dataclass
class TracedFunction:
    """A function traced into `func.func @name(args..., captured..., outs...)`."""

    name: str
    in_specs: list[BufferSpec]
    out_tree: Any
    out_specs: list[BufferSpec]
    captured: list[Tracer]


def trace_function(
    fn: Callable, args_tree: Any, arg_tracers: list[Tracer], method: str, what: str
) -> TracedFunction:
    ctx = context.current()
    if ctx.quantum is not None:
        raise CompileError(f"{what}: differentiation inside a QNode is not supported")
    b = ctx.builder
    cells = captured_cells(fn)
    captured = [c.cell_contents for c in cells]
    specs = [BufferSpec(t.shape, t.dtype) for t in [*arg_tracers, *captured]]
    name = ctx.fresh_name(f"{fn_name(fn)}_primal")
    in_types = [memref_type(s.shape, s.dtype) for s in specs]
    block = Block(arg_types=in_types)
    b.push(block)
    ctx.function_entries.append(block)
    ctx.diff_stack.append(method)
    outer = list(captured)
    try:
        params = [
            Tracer.from_memref(arg, s.shape, s.dtype, anchor=block)
            for arg, s in zip(block.args, specs, strict=True)
        ]
        for c, p in zip(cells, params[len(arg_tracers) :], strict=True):
            c.cell_contents = p
        args = pytree.unflatten(args_tree, params[: len(arg_tracers)])
        result = fn(*args)
        out_values, out_tree = pytree.flatten(result, is_leaf=is_leaf)
        if not out_values:
            raise DifferentiableCompileError(f"{what}: {fn_name(fn)} returns nothing")
        out_tracers = []
        for i, v in enumerate(out_values):
            try:
                t = as_tracer(v)
            except CompileError as err:
                raise DifferentiableCompileError(
                    f"{what}: result {i} of {fn_name(fn)} is not an array ({err})"
                ) from None
            if t.dtype != FLOAT:
                # as Catalyst: an integer or bool result has no derivative
                hint = (
                    " (convert it with .astype(float) if a derivative of it is meant)"
                    if t.dtype.kind in "ib"
                    else ""
                )
                raise DifferentiableCompileError(
                    f"{what}: result {i} of {fn_name(fn)} has dtype {t.dtype}; cofactor only "
                    f"supports differentiation on floating-point results{hint}"
                )
            out_tracers.append(t)
        out_specs = [BufferSpec(t.shape, t.dtype) for t in out_tracers]
        out_args = [
            block.insert_arg(memref_type(t.shape, t.dtype), len(block.args)) for t in out_tracers
        ]
        for t, ref in zip(out_tracers, out_args, strict=True):
            store_tracer(t, ref)
        ctx.finish_function(block)
        # what is computed and discarded: Enzyme fails on some of it (ir/dead_code.py, A11)
        remove_dead_code(block)
    finally:
        for c, v in zip(cells, outer, strict=True):
            c.cell_contents = v
        ctx.diff_stack.pop()
        if ctx.function_entries and ctx.function_entries[-1] is block:
            ctx.function_entries.pop()
        b.pop()
    out_types = [memref_type(s.shape, s.dtype) for s in out_specs]
    fn_op = func_op(name, [*in_types, *out_types], Region(block))
    fn_op.sym_visibility = StringAttr("private")
    fn_op.attributes["cofactor.num_inputs"] = int_attr(len(specs), i64)
    b.module_ops.append(fn_op)
    return TracedFunction(name, specs, out_tree, out_specs, captured)


def buffers_of(tracers: Sequence[Tracer]) -> list[SSAValue]:
    """Memrefs holding `tracers` at the current point (their own, or fresh buffers)."""
    ctx = context.current()
    refs: list[SSAValue] = []
    for t in tracers:
        if t._elems is None and t.memref is not None and t.memref not in refs:
            refs.append(t.memref)
        else:
            buf = ctx.hoisted_alloc(memref_type(t.shape, t.dtype))
            store_tracer(t, buf)
            refs.append(buf)
    return refs


def loaded(t: Tracer) -> Tracer:
    """`t` with its elements in SSA values (its buffer may be reused afterwards)."""
    return Tracer(t.elems, t.dtype)


def strides(shape: tuple[int, ...]) -> list[int]:
    return [int(np.prod(shape[k + 1 :], dtype=np.int64)) for k in range(len(shape))]


def loop_over(shape: tuple[int, ...], body: Any) -> None:
    """`body(ivs, [])` over every index of `shape` (a loop nest; a rank-0 shape: once)."""
    if shape:
        _loop_nest(shape, [], body)
    else:
        body([], [])


def fill(ref: SSAValue, spec: BufferSpec, value: float) -> None:
    b = context.current().builder
    c = b.const(value, f64)
    if int(np.prod(spec.shape)) > ELEMENTWISE_MAX:  # a loop: IR independent of the size

        def body(ivs: list[SSAValue], accs: list[SSAValue]) -> list[SSAValue]:
            b.store(c, ref, ivs)
            return []

        _loop_nest(spec.shape, [], body)
        return
    for pos in np.ndindex(*spec.shape):
        b.store(c, ref, [b.index(p) for p in pos])
