"""`cond` on traced or Python predicates: a traced predicate becomes nested `scf.if` ops
whose results are the branches' common values (see carried_values.py); a Python one runs
the branch taken after checking every branch returns the same structure, as Catalyst does.
Outside `qjit` it behaves like the plain `if` it replaces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pennylane as qml
from xdsl.dialects import scf
from xdsl.ir import Block, Region

from cofactor.api_extensions import hybrid
from cofactor.api_extensions.carried_values import Carry, traced_region
from cofactor.errors import CompileTypeError
from cofactor.tracing import context, pytree
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer
from cofactor.tracing.tracer import BOOL, Scalar, Tracer, normalize_dtype


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
