"""Mid-circuit measurement statistics and the `mcm_method` of a QNode.

Statistics of measurement values (`qml.expval(m)`, `qml.var(m)`, `qml.probs(op=[m0, m1])`,
`qml.sample(m)`, `qml.counts(m)`, arithmetic such as `m0 + 2 * m1`) are computed from the
traced outcomes that `measure` returns. What they mean depends on the QNode's
`mcm_method`, resolved as Catalyst does (catalyst/jax_primitives... `_resolve_mcm_config`):

* ``"single-branch-statistics"`` (the default without shots): the circuit runs once and each
  mid-circuit measurement samples one branch; a statistic of measurement values is the
  statistic of that single branch (`expval(m)` is the sampled outcome, `var(m)` is 0,
  `probs(op=m)` is one-hot, `sample(m)` repeats the outcome for every shot).
* ``"one-shot"`` (the default with shots when the circuit measures mid-circuit, as in Catalyst
  and in PennyLane's `default.qubit`): the circuit is executed once per shot (a compiled loop
  around a shots=1 circuit function, so the IR does not grow with the shot count) and every
  returned statistic is gathered over the shots.
* ``"deferred"``: refused, as Catalyst refuses it.

Postselection under one-shot follows the QNode's `postselect_mode`:

* ``None`` / ``"hw-like"`` (PennyLane's default): each shot measures without forcing the
  outcome, and the shots whose outcome differs from `postselect` are discarded, as PennyLane
  does: `expval`/`var`/`probs` are over the valid shots (NaN when none is valid), `counts`
  count valid shots only, and `sample` keeps its static length with the invalid shots
  padded by PennyLane's `fill_in_value` (`np.iinfo(np.int32).min`), as PennyLane does under
  JAX and Catalyst under qjit ("pad-invalid-samples").
* ``"fill-shots"`` (as in Catalyst): the simulator forces the postselected outcome in every
  shot, so every shot is valid and `counts` totals and `sample` lengths are the shot count.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.measurements import (
    CountsMP,
    ExpectationMP,
    MeasurementProcess,
    MeasurementValue,
    ProbabilityMP,
    SampleMP,
    StateMP,
    VarianceMP,
)
from xdsl.dialects import scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block

from cofactor.errors import CompileError, CompileNotImplementedError
from cofactor.ir.builder import memref_type
from cofactor.tracing import context
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer
from cofactor.tracing.tracer import BOOL, FLOAT, INT, Scalar, Tracer

STAT_KINDS = ("expval", "var", "probs", "sample", "counts")


class MeasuredBool(Tracer):
    """The outcome of a mid-circuit measurement: a traced bool whose arithmetic is that of
    PennyLane's measurement values (Python bools: `m0 + m1` counts, it is 2 when both are
    1), not numpy's bool arithmetic (where `+` is a logical or). Logic (`&`, `|`, `~`) and
    conditions stay boolean."""

    __slots__ = ()


def _counting(name: str) -> Any:
    base = getattr(Tracer, name)

    def operator(self: Tracer, other: Any) -> Any:
        if isinstance(other, Tracer) and other.dtype == BOOL:
            other = other.astype(np.int64)
        elif isinstance(other, bool | np.bool_):
            other = int(other)
        return base(self.astype(np.int64), other)

    operator.__name__ = name
    return operator


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    for _name in (f"__{_op}__", f"__r{_op}__"):
        setattr(MeasuredBool, _name, _counting(_name))


class MCMConfigError(CompileError, ValueError):
    """An `mcm_method`/`postselect_mode` cofactor (like Catalyst) refuses: a ValueError as in
    Catalyst, and a CompileError as every cofactor refusal."""


# ----------------------------------------------------------------------------------------
# statistics of traced measurement values
# ----------------------------------------------------------------------------------------
class MCMStat(MeasurementProcess):
    """`qml.<kind>` of traced mid-circuit measurement values (one value or a list).

    A MeasurementProcess only so that the QNode output handling treats it as a measurement;
    it is never queued nor given to PennyLane."""

    def __init__(self, kind: str, values: Any, all_outcomes: bool = False) -> None:  # noqa: D107
        self.kind = kind
        self.composite = isinstance(values, list | tuple)
        self.values = [as_tracer(v) for v in (values if self.composite else [values])]
        self.all_outcomes = all_outcomes
        self.obs, self.mv, self._wires, self.id = None, None, qml.wires.Wires([]), None

    def __repr__(self) -> str:
        return f"MCMStat({self.kind}, {len(self.values)} values)"


def _is_traced_value(x: Any) -> bool:
    if isinstance(x, Tracer | Scalar):
        return True
    return (
        isinstance(x, list | tuple)
        and len(x) > 0
        and all(isinstance(v, Tracer | Scalar) for v in x)
    )


@contextlib.contextmanager
def patched_statistics() -> Iterator[None]:
    """While a circuit is traced: `qml.expval/var/probs/sample/counts` of traced measurement
    values (what `measure` returns) give an `MCMStat`; any other call goes to PennyLane.
    Installed through `context.intercept`, reference-counted across threads."""
    with context.intercepts(_STAT_INTERCEPTS, reusable=True):
        yield


def _statistic(kind: str, original: Any) -> Any:
    """`qml.<kind>` that turns traced measurement values into an `MCMStat`; it dispatches on
    its argument, so in a thread that does not trace it is PennyLane's function."""

    def stat(*args: Any, **kwargs: Any) -> Any:
        op = kwargs.get("op", args[0] if args else None)
        if kind == "probs" and "op" not in kwargs:
            op = kwargs.get("op", args[1] if len(args) > 1 else None)
            wires = kwargs.get("wires", args[0] if args else None)
            if _is_traced_value(wires):  # qml.probs(m) is qml.probs(wires=m) in PennyLane
                raise CompileError(
                    "qml.probs got traced wires: a mid-circuit measurement value goes in op= "
                    "(write qml.probs(op=m) or qml.probs(op=[m0, m1])); wires computed from "
                    "the compiled function's arguments are not supported there: pass them as "
                    "Python ints (qjit(static_argnums=...))"
                )
        if not _is_traced_value(op):
            return original(*args, **kwargs)
        if kind in ("expval", "var") and isinstance(op, list | tuple):
            raise CompileError(
                f"qml.{kind} takes one mid-circuit measurement value (or an arithmetic "
                f"expression of several), not a list; PennyLane refuses lists too"
            )
        return MCMStat(kind, op, all_outcomes=bool(kwargs.get("all_outcomes", False)))

    stat.__name__ = kind
    stat.__doc__ = original.__doc__
    return stat


# (the same triples on every trace: their replacements are made once, here, at import;
# see `context.prepare`)
_STAT_INTERCEPTS = [(qml, kind, functools.partial(_statistic, kind)) for kind in STAT_KINDS]
context.prepare(_STAT_INTERCEPTS)


def is_mcm_statistic(mp: MeasurementProcess) -> bool:
    """An `MCMStat`, or a PennyLane measurement of a `MeasurementValue` (transformed tapes)."""
    return isinstance(mp, MCMStat) or getattr(mp, "mv", None) is not None


def as_mcm_stat(mp: MeasurementProcess, values: dict[Any, Tracer]) -> MCMStat:
    """A PennyLane measurement of MeasurementValues -> MCMStat, given the traced outcome of
    every MidMeasure (keyed by its `id`)."""
    if isinstance(mp, MCMStat):
        return mp
    kind = _kind(mp)

    def value(mv: MeasurementValue) -> Tracer:
        from cofactor.tracing.transforms import mid_key

        return mv.processing_fn(*[values[mid_key(m)] for m in mv.measurements])

    mv = mp.mv
    traced = [value(v) for v in mv] if isinstance(mv, list | tuple) else value(mv)
    return MCMStat(kind, traced, all_outcomes=bool(getattr(mp, "all_outcomes", False)))


def _kind(mp: MeasurementProcess) -> str:
    for cls, kind in (
        (ExpectationMP, "expval"),
        (VarianceMP, "var"),
        (ProbabilityMP, "probs"),
        (SampleMP, "sample"),
        (CountsMP, "counts"),
    ):
        if isinstance(mp, cls):
            return kind
    raise CompileError(f"{type(mp).__name__} of mid-circuit measurement values is not supported")


def _bits_index(stat: MCMStat) -> Tracer:
    """The outcome index sum_j m_j 2^(k-1-j) of a list of single measurement values."""
    for v in stat.values:
        if v.dtype != BOOL or v.shape != ():
            # PennyLane refuses probs of an expression; its counts (keys: the values the
            # expression takes) need the expression, which the traced value has lost
            why = "PennyLane refuses it too" if stat.kind == "probs" else "nor by Catalyst"
            raise CompileError(
                f"qml.{stat.kind} of an arithmetic expression of mid-circuit measurements is "
                f"not supported by cofactor ({why}): give a list of measurement values, e.g. "
                f"qml.{stat.kind}(op=[m0, m1]), and combine its outcomes"
            )
    k = len(stat.values)
    index = as_tracer(0)
    for j, v in enumerate(stat.values):
        index = index + cast_tracer(v, INT) * (2 ** (k - 1 - j))
    return index


def _one_hot(stat: MCMStat, dtype: np.dtype) -> Tracer:
    index = _bits_index(stat)
    n = 2 ** len(stat.values)
    return cast_tracer(as_tracer(np.arange(n, dtype=np.int64)) == index, dtype)


def _sample_value(stat: MCMStat) -> Tracer:
    """One shot's sample: the value (shape ()) or the values of a list (shape (k,))."""
    vals = [cast_tracer(v, INT) if v.dtype == BOOL else v for v in stat.values]
    if not stat.composite:
        return vals[0]
    dtype = FLOAT if any(v.dtype == FLOAT for v in vals) else INT
    return as_tracer(np.array([cast_tracer(v, dtype).elems[()] for v in vals], dtype=object))


def emit_statistic(scope: Any, mp: MeasurementProcess, values: dict[Any, Tracer]) -> Any:
    """The value of a statistic of mid-circuit measurement values (single-branch semantics,
    or one shot's contribution under one-shot)."""
    if not isinstance(mp, MCMStat) and _deferred(mp, values):
        return _deferred_statistic(scope, mp)
    stat = as_mcm_stat(mp, values)
    if stat.kind in ("expval", "var") and stat.values[0].shape != ():
        raise CompileError(f"qml.{stat.kind} of a mid-circuit measurement needs a scalar value")
    if scope.one_shot:
        scope.shot_kinds.append(stat.kind)
        if stat.kind in ("expval", "var"):
            return cast_tracer(stat.values[0], FLOAT)
        if stat.kind == "probs":
            return _one_hot(stat, FLOAT)
        if stat.kind == "counts":
            return (np.arange(2 ** len(stat.values)), _one_hot(stat, INT))
        return _sample_value(stat)
    if stat.kind == "expval":
        return cast_tracer(stat.values[0], FLOAT)
    if stat.kind == "var":
        return cast_tracer(stat.values[0], FLOAT) * 0.0
    if stat.kind == "probs":
        return _one_hot(stat, FLOAT)
    if scope.shots <= 0:
        raise CompileError(
            f"qml.{stat.kind} needs shots; the QNode is analytic (shots=None). Set shots with "
            "qml.set_shots or on the device."
        )
    if stat.kind == "counts":
        return (np.arange(2 ** len(stat.values)), _one_hot(stat, INT) * scope.shots)
    # single branch: the same outcome in every shot
    return _repeat(_sample_value(stat), scope.shots)


def _mids(mp: MeasurementProcess) -> list[Any]:
    mvs = mp.mv if isinstance(mp.mv, list | tuple) else [mp.mv]
    return [m for mv in mvs for m in mv.measurements]


def _deferred(mp: MeasurementProcess, values: dict[Any, Tracer]) -> bool:
    """Whether the measurement values' MidMeasures are not on the tape (a transform such
    as `qml.defer_measurements` replaced them by operations on their wires)."""
    from cofactor.tracing.transforms import mid_key

    missing = [mid_key(m) not in values for m in _mids(mp)]
    if any(missing) and not all(missing):
        raise CompileError(f"{mp} mixes deferred and performed mid-circuit measurements")
    return all(missing)


def _deferred_statistic(scope: Any, mp: MeasurementProcess) -> Any:
    """A statistic of deferred measurement values, from the probabilities of their wires
    at the end of the circuit (as PennyLane computes it)."""
    from cofactor.tracing.transforms import mid_key

    kind = _kind(mp)
    if kind in ("sample", "counts") or scope.one_shot:
        raise CompileError(
            f"qml.{kind} of deferred mid-circuit measurements is not supported by cofactor; "
            "use expval, var or probs, or do not defer the measurements"
        )
    mids = list({mid_key(m): m for m in _mids(mp)}.values())
    k = len(mids)
    p = scope.emit_measurement_plain(qml.probs(wires=[m.wires[0] for m in mids]))
    position = {mid_key(m): j for j, m in enumerate(mids)}

    def evaluate(mv: MeasurementValue, index: int) -> float:
        bits = [(index >> (k - 1 - position[mid_key(m)])) & 1 for m in mv.measurements]
        return float(mv.processing_fn(*bits))

    if kind == "probs":
        mvs = mp.mv if isinstance(mp.mv, list | tuple) else [mp.mv]
        if any(mv.has_processing or len(mv.measurements) != 1 for mv in mvs):
            raise CompileError("qml.probs of arithmetic on measurement values is not supported")
        order = [position[mid_key(mv.measurements[0])] for mv in mvs]
        if order != list(range(k)):
            raise CompileError("qml.probs of repeated or reordered measurement values")
        return p
    eig = np.array([evaluate(mp.mv, i) for i in range(2**k)])
    mean = np.dot(p, eig)
    if kind == "expval":
        return mean
    return np.dot(p, eig**2) - mean * mean


def _repeat(value: Tracer, n: int) -> Tracer:
    """`value` stacked n times, written by a loop into a buffer (IR size independent of n)."""
    ctx = context.current()
    b = ctx.builder
    shape = (n, *value.shape)
    buf = ctx.hoisted_alloc(memref_type(shape, value.dtype))
    elems = list(np.ndindex(value.shape))
    ssa = [value.elems[idx].value for idx in elems]
    body = Block(arg_types=[IndexType()])
    b.push(body)
    for v, idx in zip(ssa, elems, strict=True):
        b.store(v, buf, [body.args[0], *[b.index(j) for j in idx]])
    b.insert(scf.YieldOp())
    b.pop()
    loop = b.insert(scf.ForOp(b.index(0), b.index(n), b.index(1), [], body))
    return Tracer.from_memref(buf, shape, value.dtype, anchor=loop)


# ----------------------------------------------------------------------------------------
# terminal measurements, one shot at a time
# ----------------------------------------------------------------------------------------
def emit_per_shot(scope: Any, mp: MeasurementProcess) -> Any:
    """One shot's contribution of a terminal measurement (the circuit runs with shots=1)."""
    if isinstance(mp, StateMP) or not isinstance(
        mp, ExpectationMP | VarianceMP | ProbabilityMP | SampleMP | CountsMP
    ):
        raise CompileNotImplementedError(
            f"{type(mp).__name__}: this measurement process is not compatible with the chosen "
            "or default mcm_method ('one-shot' runs the circuit once per shot and gathers each "
            "result over the shots); return expval, var, probs, sample or counts"
        )
    kind = _kind(mp)
    scope.shot_kinds.append(kind)
    if isinstance(mp, VarianceMP):
        # gathered from the per-shot eigenvalue of the whole observable: one sample, drawn in
        # its eigenbasis. (A one-shot expval of a sum draws each term apart: its sum is not
        # an eigenvalue when the terms do not commute, and its square's mean was wrong.)
        eigenvalue = scope.emit_measurement_plain(qml.sample(mp.obs))
        return eigenvalue.reshape(eigenvalue.shape[1:])
    if isinstance(mp, SampleMP):
        bits = scope.emit_measurement_plain(mp)  # (1, k), or (1,) of eigenvalues
        return bits.reshape(bits.shape[1:])
    return scope.emit_measurement_plain(mp)


def dispatch(scope: Any, mp: MeasurementProcess) -> Any:
    """The hook of `QuantumScope.emit_measurement`: statistics of measurement values, one
    shot's results, sampled probs; NotImplemented for what the plain emission does."""
    if not isinstance(mp, MCMStat) and _is_traced_value(getattr(mp, "obs", None)):
        # PennyLane's own qml.expval(op=m) (bound before the trace, so not the patched one)
        # of what `measure` returned: the same statistic
        all_outcomes = bool(getattr(mp, "all_outcomes", False))
        mp = MCMStat(_kind(mp), mp.obs, all_outcomes=all_outcomes)
    if is_mcm_statistic(mp):
        return emit_statistic(scope, mp, scope.mcm_values)
    if scope.one_shot:
        return emit_per_shot(scope, mp)
    return NotImplemented


def resolve_method(qnode: Any, shots: int) -> str | None:
    """ "one-shot", "single-branch-statistics", or None (one-shot if the circuit measures
    mid-circuit and has shots: decided after tracing it), as Catalyst resolves it."""
    kwargs = getattr(qnode, "execute_kwargs", {}) or {}
    method = kwargs.get("mcm_method")
    postselect_mode = kwargs.get("postselect_mode") if shots > 0 else None
    if method == "deferred":
        raise MCMConfigError(
            "mcm_method='deferred' is not supported with Catalyst, nor with cofactor: use "
            "'one-shot' (with shots) or 'single-branch-statistics'"
        )
    if method == "single-branch-statistics" and postselect_mode == "hw-like":
        raise MCMConfigError("'hw-like' post-selection requires mcm_method='one-shot'.")
    if method == "one-shot" and shots <= 0:
        raise MCMConfigError(
            "mcm_method='one-shot' is not supported in analytic shot mode: give the QNode shots"
        )
    if method not in (None, "one-shot", "single-branch-statistics"):
        raise MCMConfigError(
            f"mcm_method={method!r} is not supported by cofactor; use 'one-shot' or "
            "'single-branch-statistics'"
        )
    if method is None and shots <= 0:
        return "single-branch-statistics"
    return method


__all__ = [
    "MCMConfigError",
    "MCMStat",
    "emit_per_shot",
    "emit_statistic",
    "is_mcm_statistic",
    "patched_statistics",
    "resolve_method",
]
