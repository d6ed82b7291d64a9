"""Structured control flow on traced values: `for_loop`, `while_loop`, `cond`.

Each takes Python functions and, while tracing, turns them into one `scf` op whose region
holds the traced body: values carried from one iteration to the next (or returned from a
branch) become the op's iteration arguments / results, one SSA value per array element.
Quantum operations queued inside a body are emitted inside the region (see
`QuantumScope.flush`). Outside `qjit` all three behave like the plain Python they replace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pennylane as qml
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import f64, i1
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from cofactor.api_extensions import hybrid
from cofactor.errors import CompileError, CompileTypeError
from cofactor.ir.builder import INDEX, scalar_type
from cofactor.tracing import aliasing, context, interrupts, pytree
from cofactor.tracing.numpy_rules import as_scalar, as_tracer, cast_tracer, scalar_ufunc
from cofactor.tracing.runtime_errors import report_if
from cofactor.tracing.tracer import BOOL, COMPLEX, INT, Scalar, Tracer, normalize_dtype


# ----------------------------------------------------------------------------------------
# carried values: pytree of arrays <-> flat list of scalar SSA values
# ----------------------------------------------------------------------------------------
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


def _single(values: tuple) -> Any:
    if len(values) == 0:
        return None
    return values[0] if len(values) == 1 else values


# ----------------------------------------------------------------------------------------
# for_loop
# ----------------------------------------------------------------------------------------
def for_loop(lower: Any, upper: Any, step: Any, allow_array_resizing: bool = False) -> Callable:
    """`for i in range(lower, upper, step): carry = body(i, *carry)` as one compiled loop.

    Use as `for_loop(0, n, 1)(body)(*init)`; the body takes the index and the carried
    values and returns the new carried values (or nothing when there are none).
    """

    def decorator(body: Callable) -> Callable:
        def run(*init: Any) -> Any:
            if not context.is_tracing():
                carry = init
                for i in range(lower, upper, step):
                    out = body(i, *carry)
                    carry = out if isinstance(out, tuple) and len(init) > 1 else (out,)
                    if not init:
                        carry = ()
                return _single(carry)
            if hybrid.recording():  # inside an adjoint/ctrl region: see hybrid
                return hybrid.record_for(lower, upper, step, body, init)
            return _traced_for(lower, upper, step, body, init)

        return run

    return decorator


def _index_value(x: Any) -> SSAValue:
    b = context.current().builder
    if isinstance(x, Tracer | Scalar):
        t = cast_tracer(as_tracer(x), INT)
        if t.shape != ():
            raise CompileError("loop bounds must be scalars")
        return b.to_index(t.elems[()].value)
    return b.index(int(x))


def _as_int(x: Any) -> Tracer:
    """A loop bound as a traced int64 scalar (a traced float is truncated, as `_index_value`
    does)."""
    t = cast_tracer(as_tracer(x), INT)
    if t.shape != ():
        raise CompileError("loop bounds must be scalars")
    return t


def _traced_for(lower: Any, upper: Any, step: Any, body: Callable, init: tuple) -> Any:
    ctx = context.current()
    b = ctx.builder
    carry = Carry(init)
    static_step = not isinstance(step, Tracer | Scalar)
    if static_step and int(step) == 0:
        raise CompileError("for_loop step must not be zero")
    # A negative step, or a traced one (either sign, known only at run time), counts
    # k = 0 .. len(range(lower, upper, step)) and computes i = lower + k * step: the loop
    # below only counts up.
    counted = not static_step or int(step) < 0
    if counted:
        lo, hi = (_as_int(v) for v in (lower, upper))
        st_value = int(step) if static_step else _as_int(step)
        if not static_step:
            # (range()'s ValueError, raised when the call returns; the loop runs 0 times)
            report_if(as_scalar(st_value == 0).value, "range_step_zero")
        trip = np.maximum(-((lo - hi) // st_value), 0)  # ceil((hi - lo) / step), both signs
        lb, ub, st = b.index(0), _index_value(trip), b.index(1)
    else:
        lb, ub, st = _index_value(lower), _index_value(upper), _index_value(step)
    block = Block(arg_types=[INDEX, *carry.types()])
    with traced_region(block) as flush:
        iv = Tracer.scalar(b.from_index(block.args[0]), INT)
        if counted:
            iv = as_tracer(
                scalar_ufunc(
                    np.add,
                    lo.elems[()],
                    scalar_ufunc(np.multiply, iv.elems[()], as_tracer(st_value).elems[()]),
                )
            )
        state = carry.rebuild(list(block.args[1:]))
        out = body(iv, *state)
        new = carry.conform(_as_result(init, out), "for_loop body")
        values = carry.ssa(new)
        flush()
        b.insert(scf.YieldOp(*values))
    results = _interruptible_for(ctx, lb, ub, st, carry.ssa(), block)
    aliasing.passed(init, state, "the cofactor.for_loop body")  # (in-place writes to `init`)
    return _single(tuple(carry.rebuild(results)))


def _interruptible_for(
    ctx: context.TraceContext,
    lb: SSAValue,
    ub: SSAValue,
    st: SSAValue,
    init: list[SSAValue],
    body: Block,
) -> list[SSAValue]:
    """`scf.for` semantics (`body` takes the index and the carried values and yields the
    new ones) as an `scf.while` that also stops on Ctrl-C (tracing/interrupts.py): an
    scf.for cannot exit early. Returns the carried values' final SSA values."""
    b = ctx.builder
    types = [INDEX, *(v.type for v in init)]
    before = Block(arg_types=types)
    b.push(before)
    try:
        more = b.cmpi("slt", before.args[0], ub)
        go = b.binary(arith.AndIOp, more, _not(b, interrupts.exit_requested(ctx)))
        b.insert(scf.ConditionOp(go, *before.args))
    finally:
        b.pop()
    # the body's yield gets the next index in front of the carried values
    yield_op = body.last_op
    assert isinstance(yield_op, scf.YieldOp)
    b.push_at(InsertPoint.before(yield_op))
    try:
        step = b.binary(arith.AddiOp, body.args[0], st)
        b.insert(scf.YieldOp(step, *yield_op.operands))
    finally:
        b.pop()
    body.erase_op(yield_op)
    op = b.insert(scf.WhileOp([lb, *init], types, Region(before), Region(body)))
    return list(op.results[1:])


def _not(b: Any, value: SSAValue) -> SSAValue:
    return b.binary(arith.XOrIOp, value, b.const(True, i1))


def _as_result(init: tuple, out: Any) -> tuple:
    """A body's return value as a tuple matching `init` (bodies return a bare value when
    there is one carried value)."""
    if len(init) == 0:
        # (an empty tuple is no value, as in Catalyst, whose bodies may end with `return ()`)
        if out is not None and not (isinstance(out, tuple | list) and len(out) == 0):
            raise CompileError("the loop body returned a value but no initial value was given")
        return ()
    if len(init) == 1:
        return (out,)
    if not isinstance(out, tuple | list) or len(out) != len(init):
        raise CompileError(f"the loop body must return {len(init)} values (one per carried value)")
    return tuple(out)


# ----------------------------------------------------------------------------------------
# while_loop
# ----------------------------------------------------------------------------------------
def while_loop(cond_fn: Callable, allow_array_resizing: bool = False) -> Callable:
    """`while cond_fn(*carry): carry = body(*carry)` as one compiled loop.

    Use as `while_loop(cond_fn)(body)(*init)`.
    """

    def decorator(body: Callable) -> Callable:
        def run(*init: Any) -> Any:
            if not context.is_tracing():
                carry = init
                while cond_fn(*carry):
                    carry = _as_result(init, body(*carry))
                return _single(carry)
            if hybrid.recording():
                return hybrid.record_while(cond_fn, body, init)
            return _traced_while(cond_fn, body, init)

        return run

    return decorator


def _traced_while(cond_fn: Callable, body: Callable, init: tuple) -> Any:
    b = context.current().builder
    carry = Carry(init)
    types = carry.types()
    before = Block(arg_types=types)
    with traced_region(before) as flush:
        state = carry.rebuild(list(before.args))
        raw = cond_fn(*state)
        pred = as_tracer(raw)
        if pred.shape != () or pred.dtype != BOOL:
            # as Catalyst (TypeError); an int would otherwise be read as "nonzero"
            raise CompileTypeError(
                "the while_loop condition must return a scalar bool: a single boolean scalar "
                f"was expected, got the value {raw!r} (dtype {pred.dtype}, shape {pred.shape}); "
                "compare it, e.g. `i < n`"
            )
        flush()
        # and not interrupted (Ctrl-C, tracing/interrupts.py)
        stop = interrupts.exit_requested(context.current())
        go = b.binary(arith.AndIOp, pred.elems[()].value, _not(b, stop))
        b.insert(scf.ConditionOp(go, *before.args))
    after = Block(arg_types=types)
    with traced_region(after) as flush:
        state = carry.rebuild(list(after.args))
        new = carry.conform(_as_result(init, body(*state)), "while_loop body")
        values = carry.ssa(new)
        flush()
        b.insert(scf.YieldOp(*values))
    op = b.insert(scf.WhileOp(carry.ssa(), types, Region(before), Region(after)))
    aliasing.passed(init, state, "the cofactor.while_loop body")  # (in-place writes to `init`)
    return _single(tuple(carry.rebuild(list(op.results))))


# ----------------------------------------------------------------------------------------
# cond
# ----------------------------------------------------------------------------------------
class CondCallable:
    """The object `cond(pred)(true_fn)` returns: add branches, then call it."""

    def __init__(self, pred: Any, true_fn: Callable) -> None:
        self.branches: list[tuple[Any, Callable]] = [(pred, true_fn)]
        self.otherwise_fn: Callable | None = None

    def else_if(self, pred: Any) -> Callable[[Callable], CondCallable]:
        def decorator(fn: Callable) -> CondCallable:
            self.branches.append((pred, fn))
            return self

        return decorator

    def otherwise(self, fn: Callable) -> CondCallable:
        self.otherwise_fn = fn
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tracing = context.is_tracing()
        traced = tracing and any(_is_traced(p) for p, _ in self.branches)
        if tracing and not traced and not hybrid.recording():
            return _static_cond(self.branches, self.otherwise_fn, args, kwargs)
        if not traced:
            for pred, fn in self.branches:
                if pred:
                    return fn(*args, **kwargs)
            return self.otherwise_fn(*args, **kwargs) if self.otherwise_fn else None
        if hybrid.recording():
            return hybrid.record_cond(self.branches, self.otherwise_fn, args, kwargs)
        return _traced_cond(self.branches, self.otherwise_fn, args, kwargs)


def _is_traced(x: Any) -> bool:
    return isinstance(x, Tracer | Scalar)


def cond(pred: Any) -> Callable[[Callable], CondCallable]:
    """`if pred: ... else: ...` on a traced value, Catalyst-style.

    Decorate the true branch with `@cond(pred)`, add `.else_if(pred2)` and `.otherwise`
    branches, then call the result; every branch must return the same structure (with
    `otherwise` required when branches return values).
    """

    def decorator(fn: Callable) -> CondCallable:
        return CondCallable(pred, fn)

    return decorator


def _traced_cond(branches: list, otherwise_fn: Callable | None, args: tuple, kwargs: dict) -> Any:
    """Emit nested scf.if ops for if / elif... / else."""
    b = context.current().builder
    pred, fn = branches[0]
    rest = branches[1:]

    def else_fn(*a: Any, **k: Any) -> Any:
        if rest:
            return _cond_or_python(rest, otherwise_fn, a, k)
        return otherwise_fn(*a, **k) if otherwise_fn else None

    cond_value = cast_tracer(as_tracer(pred), BOOL)
    if cond_value.shape != ():
        raise predicate_error(cond_value.shape)
    then_block, else_block = Block(), Block()
    with traced_region(then_block) as flush:
        then_out = _drop_operators(fn(*args, **kwargs))
        flush()
    with traced_region(else_block) as flush:
        else_out = _drop_operators(else_fn(*args, **kwargs))
        flush()
    then_leaves, then_tree = pytree.flatten(then_out, is_leaf=lambda x: isinstance(x, Tracer))
    else_leaves, else_tree = pytree.flatten(else_out, is_leaf=lambda x: isinstance(x, Tracer))
    _refuse_measurements([*then_leaves, *else_leaves])
    if then_leaves and otherwise_fn is None and not rest:
        # Catalyst: TypeError (the missing branch returns None: a different structure)
        raise CompileTypeError(
            "Control flow requires a consistent return structure across all branches: the "
            "true branch of this cond returns a value, so it needs an `otherwise` branch "
            "returning the same structure"
        )
    if then_tree != else_tree:
        raise CompileTypeError(
            "Control flow requires a consistent return structure across all branches! Got "
            f"{_describe(then_tree)} and {_describe(else_tree)}: every branch must return the "
            "same structure (the same tuple/list/dict containers, the same number of values)"
        )
    # one result type per leaf: the common dtype of the branches, same shape
    then_t: list[Tracer] = []
    else_t: list[Tracer] = []
    layout = []
    with traced_region(then_block):
        then_t = [as_tracer(v) for v in then_leaves]
    with traced_region(else_block):
        else_t = [as_tracer(v) for v in else_leaves]
    for x, y in zip(then_t, else_t, strict=True):
        if x.shape != y.shape:
            raise CompileTypeError(
                "Control flow requires a consistent array shape per result across all "
                f"branches! Got {x.shape} and {y.shape}"
            )
        layout.append(np.result_type(x.dtype, y.dtype))
    results = pytree.unflatten(
        ("tuple", tuple(pytree.LEAF for _ in layout)),
        [Tracer(np.empty(t.shape, dtype=object), d) for t, d in zip(then_t, layout, strict=True)],
    )
    carry = Carry(results)
    for block, ts in ((then_block, then_t), (else_block, else_t)):
        with traced_region(block):
            cast = [cast_tracer(t, d) for t, d in zip(ts, layout, strict=True)]
            b.insert(scf.YieldOp(*carry.ssa(cast)))
    op = b.insert(
        scf.IfOp(cond_value.elems[()].value, carry.types(), Region(then_block), Region(else_block))
    )
    leaves = list(carry.rebuild(list(op.results)))
    return pytree.unflatten(then_tree, leaves)


def predicate_error(shape: tuple[int, ...]) -> CompileTypeError:
    """The error for an array predicate of `cond` or of an autograph `if` (Catalyst's type)."""
    return CompileTypeError(
        f"Array with multiple elements is not a valid predicate (got shape {shape}): the "
        "predicate of cond (or of an `if` autograph converts) must be one bool; reduce the "
        "array, e.g. with np.any or np.all"
    )


def static_truth(pred: Any) -> bool:
    """`bool(pred)` of a predicate known at compile time; an array of several elements is
    refused as a traced one is (numpy's ValueError otherwise)."""
    if isinstance(pred, np.ndarray) and pred.size != 1:
        raise predicate_error(pred.shape)
    return bool(pred)


def _refuse_measurements(leaves: list[Any]) -> None:
    """A branch on a traced predicate returning `qml.expval(...)` (autograph: `if x: return
    qml.expval(A)`): a QNode's measurements are fixed when it is compiled, so they cannot
    depend on a value known only at run time (Catalyst: the same TypeError)."""
    for leaf in leaves:
        if isinstance(leaf, qml.measurements.MeasurementProcess):
            raise CompileTypeError(
                f"Control flow requires a consistent return structure across all branches, "
                f"and a branch on a traced predicate returns the measurement {leaf}: the "
                "measurements a QNode returns are fixed when it is compiled. Return every "
                "measurement and choose between the results (np.where, or a cond after the "
                "QNode call), or make the predicate a static argument (static_argnums)"
            )


def _static_cond(branches: list, otherwise_fn: Callable | None, args: tuple, kwargs: dict) -> Any:
    """A cond on Python predicates inside qjit, as Catalyst (and PennyLane's `qml.cond` under
    qjit) documents it: every branch is traced and must return the same structure, and the
    result has the branches' common dtype (`0` or `True` -> an int). The branch taken runs
    in place; when it returns values, the others are traced into a block that is then
    dropped, so they are checked but leave nothing in the program. Results known at compile
    time stay known (numpy values); results that are not numbers are returned as they are."""
    taken = next((i for i, (p, _) in enumerate(branches) if static_truth(p)), len(branches))
    fns = [fn for _, fn in branches] + [otherwise_fn]
    if fns[taken] is None:
        return None
    out = _drop_operators(fns[taken](*args, **kwargs))
    if out is None:
        # Branches that return nothing have nothing to check, and are not traced: a write
        # into an array made outside the branch is not yet undone when a block is dropped
        return None
    outs = [
        out if i == taken else None if fn is None else _traced_and_dropped(fn, args, kwargs)
        for i, fn in enumerate(fns)
    ]
    flat = [pytree.flatten(out, is_leaf=_is_traced) for out in outs]
    if otherwise_fn is None and any(leaves for leaves, _ in flat):
        raise CompileTypeError(
            "Control flow requires a consistent return structure across all branches: a "
            "branch of this cond returns a value, so it needs an `otherwise` branch "
            "returning the same structure"
        )
    trees = [tree for _, tree in flat]
    if any(tree != trees[0] for tree in trees):
        raise CompileTypeError(
            "Control flow requires a consistent return structure across all branches! Got "
            f"{' and '.join(_describe(t) for t in trees)}: every branch must return the same "
            "structure (the same tuple/list/dict containers, the same number of values)"
        )
    layouts = [[_leaf_layout(v) for v in leaves] for leaves, _ in flat]
    leaves = flat[taken][0]
    result = []
    for k, value in enumerate(leaves):
        per_branch = [layout[k] for layout in layouts]
        if any(lay is None for lay in per_branch):  # not a number: returned as it is
            result.append(value)
            continue
        shapes = {shape for shape, _ in per_branch}
        if len(shapes) > 1:
            raise CompileTypeError(
                "Control flow requires a consistent array shape per result across all "
                f"branches! Got {' and '.join(map(str, sorted(shapes)))}"
            )
        dtype = normalize_dtype(np.result_type(*(d for _, d in per_branch)))
        result.append(_with_dtype(value, dtype))
    return pytree.unflatten(trees[0], result)


def _traced_and_dropped(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """`fn` traced into a block that is dropped: for the structure and types of its results."""
    block = Block()
    with traced_region(block) as flush:
        out = _drop_operators(fn(*args, **kwargs))
        flush()
    ops = list(block.ops)
    for op in ops:
        block.detach_op(op)
    for op in ops:
        op.drop_all_references()
    for op in ops:
        op.erase(drop_references=False)
    return out


def _leaf_layout(value: Any) -> tuple[tuple[int, ...], np.dtype] | None:
    """(shape, dtype) of a result leaf, or None when it is not a number or an array."""
    if _is_traced(value):
        t = as_tracer(value)
        return t.shape, t.dtype
    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything numpy cannot take is not a number
        return None
    if arr.dtype.kind not in "biufc":
        return None
    return arr.shape, normalize_dtype(arr.dtype)


def _with_dtype(value: Any, dtype: np.dtype) -> Any:
    if _is_traced(value):
        t = as_tracer(value)
        return value if t.dtype == dtype else cast_tracer(t, dtype)
    arr = np.asarray(value, dtype=dtype)  # (a numpy value with a dtype, as a traced result)
    return arr[()] if arr.ndim == 0 else arr


def _describe(tree: Any) -> str:
    """A pytree structure as Python-like text: (*, [*, *]) for a tuple of a leaf and a list."""
    if tree == pytree.LEAF:
        return "*"
    kind = tree[0]
    if kind == "none":
        return "None"
    if kind == "dict":
        inner = ", ".join(f"{k!r}: {_describe(t)}" for k, t in zip(tree[1], tree[2], strict=True))
        return "{" + inner + "}"
    inner = ", ".join(_describe(t) for t in tree[1])
    return f"[{inner}]" if kind == "list" else f"({inner}{',' if len(tree[1]) == 1 else ''})"


def _drop_operators(out: Any) -> Any:
    """Branches like `qml.cond(m, qml.PauliX)(1)` return the operator they queued: not a value."""
    return None if isinstance(out, qml.operation.Operator) else out


def _cond_or_python(
    branches: list, otherwise_fn: Callable | None, args: tuple, kwargs: dict
) -> Any:
    pred, fn = branches[0]
    if _is_traced(pred):
        return _traced_cond(branches, otherwise_fn, args, kwargs)
    if pred:
        return fn(*args, **kwargs)
    if len(branches) > 1:
        return _cond_or_python(branches[1:], otherwise_fn, args, kwargs)
    return otherwise_fn(*args, **kwargs) if otherwise_fn else None


__all__ = ["CondCallable", "cond", "for_loop", "while_loop"]
