"""`mitigate_with_zne`: Catalyst's qjit-compatible zero-noise extrapolation
(catalyst.mitigate_with_zne(fn, *, scale_factors, extrapolate=None, extrapolate_kwargs=None,
folding="global")).

Each QNode runs once per odd scale factor s with its gates folded k = (s-1)/2 times, and its
results, stacked by scale factor, go to `extrapolate(scale_factors, results)`, by default a
polynomial through all points evaluated at zero (PennyLane's `richardson_extrapolate`,
Catalyst's default). `fn` may also be a function that calls QNodes: each QNode call in it is
mitigated, as in Catalyst.

- `global`: the circuit U, then (U^dagger U)^k, built from the QNode's quantum function (U^dagger
  is `cofactor.adjoint` of it), so for_loop/while_loop/cond in the circuit are folded too;
- `local-all`: each gate G followed by (G^dagger G)^k, folded by the circuit's scope as it
  emits the gates (`QuantumScope.local_folds`), so gates in for_loop/while_loop/cond regions
  are folded too (as Catalyst folds them in its IR); mid-circuit measurements, snapshots and
  barriers are not folded.

On a noiseless simulator every folded circuit gives the unfolded result up to rounding, so
the estimate is the circuit's own value (PennyLane's `exponential_extrapolate` is
ill-conditioned on such flat data, as in PennyLane)."""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.measurements import MeasurementProcess

from cofactor.api_extensions.hybrid import is_traced
from cofactor.errors import CompileError
from cofactor.tracing import context

_FOLDINGS = ("global", "local-all")
_ODD_POSITIVE = "Only odd positive integers are allowed in scale_factors"


def _check_scale_factors(scale_factors: Sequence[Any]) -> list[int]:
    if is_traced(scale_factors) or any(is_traced(s) for s in scale_factors):
        raise CompileError(
            "mitigate_with_zne: scale_factors are traced values; cofactor folds the circuit "
            "when compiling, so they must be known then: pass a constant list (e.g. [1, 3, 5]) "
            "or mark the argument static (qjit(static_argnums=...))"
        )
    values = list(scale_factors)
    for n in values:
        if not isinstance(n, int | np.integer) or isinstance(n, bool):
            raise TypeError(f"mitigate_with_zne: found {n!r} in scale_factors. {_ODD_POSITIVE}")
        if n < 1 or n % 2 == 0:
            raise ValueError(f"mitigate_with_zne: found {n} in scale_factors. {_ODD_POSITIVE}")
    return [int(n) for n in values]


def _folds(scale_factor: int) -> int:
    return (scale_factor - 1) // 2


def _without_measurements(func: Callable, args: tuple, kwargs: dict) -> Callable[[], None]:
    """`func`'s gates only: the measurement processes it queues are dropped."""

    def gates() -> None:
        func(*args, **kwargs)
        queue = qml.QueuingManager.active_context()
        if queue is not None:
            for item in [i for i in queue.queue if isinstance(i, MeasurementProcess)]:
                queue.remove(item)

    return gates


def _globally_folded(qnode: Any, scale_factor: int) -> Any:
    """A copy of the QNode whose circuit is U (U^dagger U)^k."""
    from cofactor.api_extensions.quantum_operators import adjoint

    func = qnode.func

    def folded(*args: Any, **kwargs: Any) -> Any:
        result = func(*args, **kwargs)  # U, and the measurements (emitted at the end)
        gates = _without_measurements(func, args, kwargs)
        for _ in range(_folds(scale_factor)):
            adjoint(gates)()
            gates()
        return result

    functools.update_wrapper(folded, func)
    new = copy.copy(qnode)
    new.func = folded
    return new


def _locally_folded(qnode: Any, scale_factor: int) -> Any:
    """A copy of the QNode whose gates G are each emitted as G (G^dagger G)^k (the circuit's
    scope folds them as it emits them, so gates in for_loop/while_loop/cond regions too)."""
    func = qnode.func

    def folded(*args: Any, **kwargs: Any) -> Any:
        context.current().quantum.local_folds = _folds(scale_factor)
        return func(*args, **kwargs)

    functools.update_wrapper(folded, func)
    new = copy.copy(qnode)
    new.func = folded
    return new


#: operators that are not gates: never folded
_NOT_FOLDED = ("MidMeasure", "MidMeasureMP", "Snapshot", "Barrier", "WireCut")


def folded_locally(ops: list[Any], folds: int) -> list[Any]:
    """`ops` with each gate G followed by (G^dagger G)^folds."""
    out: list[Any] = []
    with qml.QueuingManager.stop_recording():  # (called while the circuit's queue is active)
        for op in ops:
            out.append(op)
            if op.name not in _NOT_FOLDED:
                out += [qml.adjoint(op, lazy=False), op] * folds
    return out


def _checked_leaves(result: Any) -> list[Any]:
    """The QNode's results: scalar floats only (expectation values, classical scalars)."""
    leaves = list(result) if isinstance(result, tuple | list) else [result]
    for leaf in leaves:
        shape = np.shape(leaf)
        if shape != ():
            raise TypeError(
                "mitigate_with_zne: Only expectations values and classical scalar values can be "
                f"returned by the mitigated QNode (got a result of shape {shape})"
            )
        dtype = getattr(leaf, "dtype", None) or np.asarray(leaf).dtype
        if np.dtype(dtype).kind != "f":
            raise TypeError(
                "mitigate_with_zne: All expectation and classical values dtypes must match and "
                f"be float (got {np.dtype(dtype)})"
            )
    return leaves


_local = threading.local()


class ZNECallable:
    """The mitigated QNode (or function calling QNodes): called with its arguments."""

    def __init__(
        self, fn: Any, scale_factors: list[int], extrapolate: Callable, folding: str
    ) -> None:
        self.fn = fn
        self.scale_factors = scale_factors
        self.extrapolate = extrapolate
        self.folding = folding
        functools.update_wrapper(self, fn)

    def _folded(self, qnode: Any, scale_factor: int) -> Any:
        if self.folding == "global":
            return _globally_folded(qnode, scale_factor)
        return _locally_folded(qnode, scale_factor)

    def _mitigated(self, call: Callable, qnode: Any, args: tuple, kwargs: dict) -> Any:
        results = []
        _local.active = True  # the folded QNodes' own calls are plain calls
        try:
            for s in self.scale_factors:
                results.append(call(self._folded(qnode, s), *args, **kwargs))
        finally:
            _local.active = False
        leaves = [_checked_leaves(r) for r in results]
        multiple = isinstance(results[0], tuple | list)
        stacked = np.stack([np.stack(v) if multiple else v[0] for v in leaves])
        estimate = self.extrapolate(self.scale_factors, stacked)
        if multiple:
            return tuple(estimate[i] for i in range(len(leaves[0])))
        return estimate

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        original_call = qml.QNode.__call__
        if isinstance(self.fn, qml.QNode):
            return self._mitigated(original_call, self.fn, args, kwargs)

        # a function calling QNodes: each of its calls (in this thread) is mitigated
        def make(original: Any) -> Any:
            def call(qnode: Any, *a: Any, **k: Any) -> Any:
                zne = getattr(_local, "function", None)
                if zne is None or getattr(_local, "active", False):
                    return original(qnode, *a, **k)
                return zne._mitigated(original, qnode, a, k)

            return call

        outer = getattr(_local, "function", None)
        _local.function = self
        try:
            with context.intercepts([(qml.QNode, "__call__", make)]):
                return self.fn(*args, **kwargs)
        finally:
            _local.function = outer


def mitigate_with_zne(
    fn: Any = None,
    *,
    scale_factors: Sequence[int],
    extrapolate: Callable | None = None,
    extrapolate_kwargs: dict[str, Any] | None = None,
    folding: str = "global",
) -> Any:
    """Catalyst's `mitigate_with_zne`: `fn` (a QNode, or a function calling QNodes)
    error-mitigated by zero-noise extrapolation (see the module's docstring)."""
    if fn is None:
        return functools.partial(
            mitigate_with_zne,
            scale_factors=scale_factors,
            extrapolate=extrapolate,
            extrapolate_kwargs=extrapolate_kwargs,
            folding=folding,
        )
    if folding == "local-random":
        raise NotImplementedError(
            "mitigate_with_zne: folding='local-random' is not supported by cofactor; use "
            "'global' or 'local-all'"
        )
    if folding not in _FOLDINGS:
        raise ValueError(
            f"mitigate_with_zne: Folding type must be one of {', '.join(_FOLDINGS)}, "
            f"got {folding!r}"
        )
    factors = _check_scale_factors(scale_factors)
    if extrapolate is None:
        extrapolate = qml.noise.richardson_extrapolate
    if extrapolate_kwargs:
        extrapolate = functools.partial(extrapolate, **extrapolate_kwargs)
    return ZNECallable(fn, factors, extrapolate, folding)
