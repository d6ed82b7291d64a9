"""Tracing a qjit function's entry point: abstract arguments in, a `TracedModule` out.

`QJIT` (jit.py) owns calling, caching and compiling; this module owns what happens between
"here are the argument specs" and "here is the MLIR module": building the entry block, feeding
tracers to the Python function, and writing every result leaf to an out-parameter memref.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from xdsl.dialects import memref
from xdsl.dialects.builtin import ArrayAttr, StringAttr, UnitAttr
from xdsl.ir import Block, Region, SSAValue

from cofactor.ir.builder import func_op, memref_type, module_op
from cofactor.ir.mlir15 import InternalLinkage
from cofactor.ir.traced import TracedModule, gc_paused
from cofactor.launcher import BufferSpec
from cofactor.signature import Layout
from cofactor.tracing import context, interrupts, pytree
from cofactor.tracing.numpy_rules import as_tracer, store_tracer
from cofactor.tracing.tracer import Tracer, is_operator


def trace_entry_function(
    function: Callable,
    symbol: str,
    *,
    seed: int | None,
    disable_assertions: bool,
    tree: Any,
    specs: tuple[BufferSpec, ...],
    static: tuple,
    layout: Layout,
) -> tuple[TracedModule, Any, list[Any], bool, bool]:
    """Trace `function` on tracers of `specs` (rebuilt into `tree`, with the `static` values
    placed by `layout`) as the entry point `symbol`. Returns the module (not printed yet),
    the output tree, the output leaves (a BufferSpec per computed leaf, or a static Python
    value), whether the compiled code reports errors through the runtime's error slot
    (quantum ops, runtime checks) and whether it calls Python callbacks."""
    from cofactor.tracing.circuit_call import capture_qnode_calls
    from cofactor.tracing.numpy_entry import capture_numpy_constructors

    ctx = context.TraceContext(symbol, seed=seed)
    ctx.disable_assertions = disable_assertions
    b = ctx.builder
    in_types = [memref_type(s.shape, s.dtype) for s in specs]
    block = Block(arg_types=in_types)
    with (
        gc_paused(),
        context.tracing(ctx),
        capture_qnode_calls(),
        capture_numpy_constructors(),
    ):
        b.push(block)
        ctx.function_entries.append(block)
        tracers = [
            Tracer.from_memref(arg, s.shape, s.dtype, anchor=block)
            for arg, s in zip(block.args, specs, strict=True)
        ]
        args, kwargs = layout.rebuild(static, pytree.unflatten(tree, tracers))
        try:
            result = function(*args, **kwargs)
        except IndexError as err:
            if str(err).startswith("only integers, slices"):
                err.add_note(_TRACED_INDEX_NOTE)
            raise
        # every result leaf (traced or constant) is written to an out-parameter memref
        out_values, out_tree = _flatten_result(result)
        # (wires, e.g. of an adjoint/ctrl region, are static: returned as they are)
        out_leaves: list[Any] = [v if _is_wires(v) else as_tracer(v) for v in out_values]
        out_tracers = [t for t in out_leaves if isinstance(t, Tracer)]
        out_leaves = [BufferSpec(t.shape, t.dtype) if isinstance(t, Tracer) else t
                      for t in out_leaves]  # fmt: skip
        out_args = [
            block.insert_arg(memref_type(t.shape, t.dtype), len(block.args)) for t in out_tracers
        ]
        for t, ref in zip(out_tracers, out_args, strict=True):
            store_tracer(t, ref)
        _forward_result_buffers(ctx, block, out_args)
        ctx.finish_function(block)
        b.pop()
        if ctx.interrupt_checks:
            interrupts.arm_on_entry(ctx, block)
    out_types = [memref_type(t.shape, t.dtype) for t in out_tracers]
    entry = func_op(symbol, [*in_types, *out_types], Region(block))
    entry.attributes["llvm.emit_c_interface"] = UnitAttr()
    if os.environ.get(_ENTRY_INLINE_ENV) != "1":
        # The C interface's wrapper (`_mlir_ciface_<symbol>`) is the only caller (the
        # launcher calls the wrapper). Internal: the in-process driver moves the body into
        # the wrapper before optimizing it, so one function is optimized and generated
        # instead of two (compiler/Optimize.cpp). `noinline` for O2, which would otherwise
        # optimize the body on its own and again once inlined (the subprocess pipeline).
        entry.attributes["passthrough"] = _NOINLINE
        entry.attributes["llvm.linkage"] = _INTERNAL
    module = module_op([*b.module_ops, entry])
    helpers = [interrupts.helpers(ctx)] if ctx.interrupt_checks else []
    checks = ctx.has_quantum or ctx.runtime_checks
    return TracedModule(module, helpers), out_tree, out_leaves, checks, ctx.has_callbacks


#: COFACTOR_ENTRY_INLINE=1: the entry function is external and O2 may inline it into its C
#: wrapper (as before session 19)
_ENTRY_INLINE_ENV = "COFACTOR_ENTRY_INLINE"
_NOINLINE = ArrayAttr([StringAttr("noinline")])
_INTERNAL = InternalLinkage()

#: COFACTOR_RESULT_COPY=1: every result is computed in a buffer of its own and copied into
#: the caller's array at the end, as before result buffers were forwarded (for A/B checks)
_RESULT_COPY_ENV = "COFACTOR_RESULT_COPY"


def _forward_result_buffers(ctx: context.TraceContext, block: Block, out_args: list) -> None:
    """Compute results straight into their out-parameters: a result that was computed in a
    buffer of its own, copied into the caller's array at the end and freed, is written into
    that array instead (the copy, the buffer and its free go).

    For a large result this saves the copy and the page faults of a second buffer on every
    call: the gradient of a 512x512 W faulted ~1,540 pages a call, 1,024 of them the shadow's
    (read from calloc'd zero pages, then copied on write) and the copy's (issue 13).

    The buffer must be a `memref.alloc` at the top of the entry block with the array's type
    (shape, dtype, row-major layout), and the copy into the array the array's only use, at
    the top of the block. Every result has been stored when this runs, so nothing writes the
    buffer after its copy (checked: only loads, copies out of it and its free follow); and
    the array is the caller's fresh one (launcher.py), no argument's memory, written by
    nothing but this copy. So the array holds at every point what the buffer held, and
    every use of the buffer can take it instead."""
    if os.environ.get(_RESULT_COPY_ENV) == "1":
        return
    hoisted = ctx._hoisted.get(id(block), [])
    for ref in out_args:
        # (exact types: isinstance against xDSL's classes runs ABC checks)
        copy = ref.get_user_of_unique_use()
        if type(copy) is not memref.CopyOp or copy.parent_block() is not block:
            continue
        buf = copy.operands[0]
        alloc = buf.owner
        if copy.operands[1] is not ref or type(alloc) is not memref.AllocOp:
            continue
        if alloc.parent_block() is not block or alloc.operands or buf.type != ref.type:
            continue  # (operands: dynamic sizes or an alignment)
        if not _unchanged_after(copy, buf, block):
            continue
        if buf in hoisted:
            hoisted.remove(buf)
        for use in list(buf.uses):
            if type(use.operation) is memref.DeallocOp:
                use.operation.detach()
                use.operation.erase()
        copy.detach()
        copy.erase()
        buf.replace_all_uses_with(ref)
        alloc.detach()
        alloc.erase()


def _unchanged_after(copy: Any, buf: SSAValue, block: Block) -> bool:
    """Whether every user of `buf` that comes after `copy` in `block` (the ops after it:
    other results' stores, a few at most) leaves `buf` as it is: a load, a copy out of it,
    its free."""
    after = set()
    op = copy.next_op
    while op is not None:
        after.add(op)
        op = op.next_op
    if not after:
        return True
    for use in buf.uses:
        user = top = use.operation
        while top is not None and top.parent_block() is not block:
            top = top.parent_op()
        if top not in after:
            continue
        if type(user) is memref.CopyOp:
            if user.operands[0] is not buf or user.operands[1] is buf:
                return False
        elif type(user) not in (memref.LoadOp, memref.DeallocOp):
            return False
    return True


_TRACED_INDEX_NOTE = (
    "(cofactor: numpy raises this for a numpy array indexed by a traced integer, e.g. a "
    "loop index: numpy needs the index's value. Arrays the function makes with np.zeros/"
    "np.ones/np.full (and *_like, eye) take traced indices: index `table = np.zeros(len(a)) "
    "+ a` instead of `a`)"
)


def _flatten_result(result: Any) -> tuple[list[Any], Any]:
    """The leaves and tree of a function's result. A result holding PennyLane operators is
    flattened by PennyLane's pytrees (an operator's data are leaves, its wires and other
    metadata are structure), so a compiled function can return operators, as in Catalyst."""
    if not _has_operator(result):
        return pytree.flatten(result)
    import pennylane as qml

    leaves, structure = qml.pytrees.flatten(result)
    return leaves, ("pennylane", structure)


def _is_wires(value: Any) -> bool:
    import pennylane as qml

    return isinstance(value, qml.wires.Wires)


def _has_operator(value: Any) -> bool:
    if isinstance(value, tuple | list):
        return any(_has_operator(v) for v in value)
    if isinstance(value, dict):
        return any(_has_operator(v) for v in value.values())
    return is_operator(value)
