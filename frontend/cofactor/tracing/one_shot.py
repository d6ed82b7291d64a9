"""The one-shot `mcm_method` at the call site: the circuit function is emitted for shots=1
and called once per shot in a compiled loop (the IR does not grow with the shot count), and
its per-shot results are gathered into PennyLane's statistics: means over the kept shots for
`expval`/`probs`, sums of squares for `var`, totals for `counts`, stacked samples padded with
PennyLane's `fill_in_value` for discarded shots. Which method a QNode gets, and the meaning of
postselection under each, are in `mcm.py`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IndexType, f64, i1, i64
from xdsl.ir import Block
from xdsl.rewriter import InsertPoint

from cofactor.errors import CompileError
from cofactor.ir.builder import call_op, memref_type
from cofactor.ir.mlir15 import generic_op
from cofactor.launcher import BufferSpec
from cofactor.tracing import context, pytree
from cofactor.tracing.mcm import resolve_method
from cofactor.tracing.numpy_rules import store_tracer
from cofactor.tracing.tracer import COMPLEX, FLOAT, INT, Tracer


# ----------------------------------------------------------------------------------------
# the loop over shots, at the call site
# ----------------------------------------------------------------------------------------
def emit_for_mcm_method(
    emit: Any, qnode: Any, tree: Any, leaves: list[Any], specs: tuple, cells: list[Any]
) -> tuple[str, Any, list[Any]]:
    """Emit the circuit function (with `emit`, qnode's `_emit_qnode_function`) as the
    QNode's mcm_method asks."""
    from cofactor.tracing.circuit_call import _device_facts

    ctx = context.current()
    shots = _device_facts(qnode)[2]
    method = resolve_method(qnode, shots)
    entry = emit(qnode, tree, leaves, specs, cells, method == "one-shot")
    if method == "one-shot":
        check_one_shot_outputs(entry[2], ctx.qnode_info[entry[0]])
    if method is None and ctx.qnode_info[entry[0]].has_mcm:
        # Catalyst's and default.qubit's default with shots and mid-circuit measurements:
        # one-shot. A circuit whose results cannot be gathered over shots (a state, a raw
        # measurement value) keeps the single-run function, as before.
        depth, ops = len(ctx.function_entries), list(ctx.builder.module_ops)
        try:
            one_shot = emit(qnode, tree, leaves, specs, cells, True)
            check_one_shot_outputs(one_shot[2], ctx.qnode_info[one_shot[0]])
            if "classical" in ctx.qnode_info[one_shot[0]].kinds:
                # a raw measurement value (or another computed value) is stacked over the
                # shots only when one-shot was asked for
                raise CompileError("classical results")
        except CompileError:
            for block in ctx.function_entries[depth:]:
                ctx._hoisted.pop(id(block), None)
            del ctx.function_entries[depth:]
            ctx.builder.module_ops[:] = ops
            return entry
        ctx.builder.module_ops[:] = [
            op
            for op in ctx.builder.module_ops
            if not (isinstance(op, func.FuncOp) and op.sym_name.data == entry[0])
        ]
        del ctx.qnode_info[entry[0]]
        entry = one_shot
    return entry


#: the sample of a discarded shot (PennyLane's `dynamic_one_shot.fill_in_value`)
FILL_IN_VALUE = int(np.iinfo(np.int32).min)


def discards_invalid_shots(qnode: Any) -> bool:
    """Whether one-shot postselection discards the failing shots (not "fill-shots")."""
    kwargs = getattr(qnode, "execute_kwargs", {}) or {}
    return kwargs.get("postselect_mode") in (None, "hw-like", "pad-invalid-samples")


def record_validity(scope: Any, outcome: Any, postselect: int) -> None:
    """valid *= (outcome == postselect), in a buffer of the circuit function that starts at 1
    (a measurement inside a loop or branch updates it where it runs)."""
    ctx = context.current()
    b = ctx.builder
    if scope.valid is None:
        b.push_at(InsertPoint.at_start(ctx.function_entries[-1]))
        try:
            scope.valid = b.alloca(memref_type((), FLOAT))
            b.store(b.const(1.0, f64), scope.valid, [])
        finally:
            b.pop()
    bit = b.cast(outcome, i1, f64)
    ok = bit if postselect == 1 else b.binary(arith.SubfOp, b.const(1.0, f64), bit)
    b.store(b.binary(arith.MulfOp, b.load(scope.valid, []), ok), scope.valid, [])


def check_one_shot_outputs(out_leaves: list[Any], info: Any) -> None:
    """Every output of a one-shot circuit must be a measurement the loop can gather."""
    specs = [s for s in out_leaves if isinstance(s, BufferSpec)]
    if info.shot_validity and "classical" in info.kinds:
        raise CompileError(
            "with mcm_method='one-shot' and postselection that discards the failing shots "
            "(postselect_mode='hw-like', the default), a QNode cannot return computed values "
            "(a measurement outcome, a constant): a discarded shot has none. Return "
            "qml.sample(m) for an outcome m, or use postselect_mode='fill-shots'"
        )
    if len(specs) != len(info.shot_kinds):
        raise CompileError(
            "with mcm_method='one-shot' a QNode must return only measurements (e.g. "
            "qml.sample(m) for a mid-circuit measurement value m), not other values"
        )


def call_one_shot(
    name: str, dynamic: list[Tracer], out_tree: Any, out_leaves: list[Any], info: Any
) -> Any:
    """Call the shots=1 circuit function `name` once per shot in a compiled loop and gather
    its per-shot results into PennyLane's statistics."""
    ctx = context.current()
    b = ctx.builder
    kinds, shots = info.shot_kinds, info.one_shot_shots
    check_one_shot_outputs(out_leaves, info)
    specs = [s for s in out_leaves if isinstance(s, BufferSpec)]
    args = []
    for t in dynamic:
        buf = ctx.hoisted_alloc(memref_type(t.shape, t.dtype))
        store_tracer(t, buf)
        args.append(buf)
    outs = [ctx.hoisted_alloc(memref_type(s.shape, s.dtype)) for s in specs]
    valid_out = n_valid = None
    if info.shot_validity:  # postselection discards shots: count the kept ones
        valid_out = ctx.hoisted_alloc(memref_type((), FLOAT))
        n_valid = ctx.hoisted_alloc(memref_type((), FLOAT))
        b.store(b.const(0.0, f64), n_valid, [])
    # accumulators: sums (and sums of squares for var), or the stacked samples
    accs: list[list[Any]] = []
    for s, kind in zip(specs, kinds, strict=True):
        if kind == "sample":
            accs.append([ctx.hoisted_alloc(memref_type((shots, *s.shape), s.dtype))])
            continue
        dtype = INT if kind == "counts" else FLOAT
        n_acc = 2 if kind == "var" else 1
        refs = [ctx.hoisted_alloc(memref_type(s.shape, dtype)) for _ in range(n_acc)]
        zero = b.const(0, i64 if dtype == INT else f64)
        for ref in refs:
            for idx in np.ndindex(s.shape):
                b.store(zero, ref, [b.index(j) for j in idx])
        accs.append(refs)
    if info.one_shot_preseed is not None:  # qjit(seed=...): seed once, the shots run on
        b.insert(generic_op("quantum.device_acquire", [], [], info.one_shot_preseed))
        b.insert(generic_op("quantum.device_release", []))
    body = Block(arg_types=[IndexType()])
    b.push(body)
    b.insert(call_op(name, [*args, *outs, *([valid_out] if valid_out else [])]))
    shot = body.args[0]
    weight = None  # 1.0 for a kept shot, 0.0 for a discarded one
    if valid_out is not None:
        weight = b.load(valid_out, [])
        b.store(b.binary(arith.AddfOp, b.load(n_valid, []), weight), n_valid, [])
    for s, kind, out, refs in zip(specs, kinds, outs, accs, strict=True):
        if kind == "sample" and s.dtype == COMPLEX:  # (a snapshot's state) stacked as is,
            # its memref has a trailing axis of (real, imaginary) f64
            for idx in np.ndindex((*s.shape, 2)):
                ii = [b.index(j) for j in idx]
                v = b.load(out, ii)
                if weight is not None:
                    fill = b.cast(b.const(FILL_IN_VALUE, i64), i64, f64)
                    v = b.select(b.cast(weight, f64, i1), v, fill)
                b.store(v, refs[0], [shot, *ii])
            continue
        for idx in np.ndindex(s.shape):
            ii = [b.index(j) for j in idx]
            v = b.load(out, ii)
            if kind == "sample":
                if weight is not None:
                    keep = b.cast(weight, f64, i1)
                    fill = b.cast(b.const(FILL_IN_VALUE, i64), i64, _ssa_type(s.dtype))
                    v = b.select(keep, v, fill)
                b.store(v, refs[0], [shot, *ii])
                continue
            add = arith.AddiOp if kind == "counts" else arith.AddfOp
            if s.dtype != (INT if kind == "counts" else FLOAT):
                v = b.cast(v, _ssa_type(s.dtype), i64 if kind == "counts" else f64)
            if weight is not None:
                mul = arith.MuliOp if kind == "counts" else arith.MulfOp
                w = b.cast(weight, f64, i64) if kind == "counts" else weight
                v = b.binary(mul, v, w)
            b.store(b.binary(add, b.load(refs[0], ii), v), refs[0], ii)
            if kind == "var":
                sq = b.binary(arith.MulfOp, v, v)
                b.store(b.binary(arith.AddfOp, b.load(refs[1], ii), sq), refs[1], ii)
    b.insert(scf.YieldOp())
    b.pop()
    loop = b.insert(scf.ForOp(b.index(0), b.index(shots), b.index(1), [], body))
    # the mean is over the kept shots (0/0 = NaN when no shot passed, as in PennyLane)
    count = float(shots) if n_valid is None else Tracer.from_memref(n_valid, (), FLOAT, anchor=loop)
    results = []
    for s, kind, refs in zip(specs, kinds, accs, strict=True):
        if kind == "sample":
            results.append(Tracer.from_memref(refs[0], (shots, *s.shape), s.dtype, anchor=loop))
            continue
        dtype = INT if kind == "counts" else FLOAT
        total = Tracer.from_memref(refs[0], s.shape, dtype, anchor=loop)
        if kind == "counts":
            results.append(total)
        elif kind == "var":
            squares = Tracer.from_memref(refs[1], s.shape, FLOAT, anchor=loop)
            mean = total / count
            results.append(np.maximum(squares / count - mean * mean, 0.0))
        else:
            results.append(total / count)
    it = iter(results)
    leaves = [next(it) if isinstance(s, BufferSpec) else s for s in out_leaves]
    return pytree.unflatten(out_tree, leaves)


def _ssa_type(dtype: np.dtype) -> Any:
    from cofactor.ir.builder import scalar_type

    return scalar_type(dtype)


__all__ = [
    "FILL_IN_VALUE",
    "call_one_shot",
    "check_one_shot_outputs",
    "discards_invalid_shots",
    "emit_for_mcm_method",
    "record_validity",
]
