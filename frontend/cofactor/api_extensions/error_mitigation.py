"""`mitigate_with_zne`: Catalyst's qjit-compatible zero-noise extrapolation
(catalyst.mitigate_with_zne(fn, *, scale_factors, extrapolate=None, extrapolate_kwargs=None,
folding="global")).

The QNode runs once per scale factor s with its gates folded (s odd: `global` appends
(U^dagger U)^((s-1)/2) to the whole circuit U, `local-all` follows each gate G with
(G^dagger G)^((s-1)/2)); the results, stacked by scale factor, go to `extrapolate(scale_factors,
results)`, by default a polynomial through all points evaluated at zero (PennyLane's
`richardson_extrapolate`, Catalyst's default). The folding is a PennyLane tape transform, so
the circuit must be a flat list of gates (Python loops and conditions on static values): a
circuit with for_loop/while_loop/cond is refused by name. On a noiseless simulator every
folded circuit gives the unfolded result, so the estimate is the circuit's own value."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pennylane as qml

from cofactor.api_extensions.hybrid import is_traced
from cofactor.errors import CompileError

_FOLDINGS = ("global", "local-all")


def _check_scale_factors(scale_factors: Sequence[Any]) -> list[int]:
    if is_traced(scale_factors) or any(is_traced(s) for s in scale_factors):
        raise CompileError(
            "mitigate_with_zne: scale_factors are traced values; cofactor folds the circuit "
            "when compiling, so they must be known then: pass a constant list (e.g. [1, 3, 5]) "
            "or mark the argument static (qjit(static_argnums=...))"
        )
    values = list(np.asarray(scale_factors).reshape(-1).tolist())
    for n in values:
        if not isinstance(n, int) or n < 1 or n % 2 == 0:
            raise ValueError(
                f"mitigate_with_zne: found {n!r} in scale_factors {values}. Only odd positive "
                "integers are allowed in scale_factors (a circuit is folded (s-1)/2 times)"
            )
    if not values:
        raise ValueError("mitigate_with_zne: scale_factors is empty")
    return values


def _folds(scale_factor: int) -> int:
    return (scale_factor - 1) // 2


@qml.transform
def mitigate_with_zne_global_folding(tape: Any, scale_factor: int) -> tuple[list, Callable]:
    """The circuit U followed by (U^dagger U)^((s-1)/2)."""
    ops = list(tape.operations)
    inverse = [qml.adjoint(op, lazy=False) for op in reversed(ops)]
    folded = ops + (inverse + ops) * _folds(scale_factor)
    return [tape.copy(operations=folded)], lambda results: results[0]


@qml.transform
def mitigate_with_zne_local_folding(tape: Any, scale_factor: int) -> tuple[list, Callable]:
    """Each gate G followed by (G^dagger G)^((s-1)/2)."""
    folded = []
    for op in tape.operations:
        folded += [op] + [qml.adjoint(op, lazy=False), op] * _folds(scale_factor)
    return [tape.copy(operations=folded)], lambda results: results[0]


_FOLDING_TRANSFORMS = {
    "global": mitigate_with_zne_global_folding,
    "local-all": mitigate_with_zne_local_folding,
}


def _stacked(result: Any) -> Any:
    """One scale factor's result as one array (several expectation values: a vector)."""
    return np.stack(list(result)) if isinstance(result, (tuple, list)) else result


class ZNECallable:
    """The mitigated QNode: called with the QNode's arguments."""

    def __init__(
        self, qnode: Any, scale_factors: list[int], extrapolate: Callable, folding: str
    ) -> None:
        self.qnode = qnode
        self.scale_factors = scale_factors
        self.extrapolate = extrapolate
        self.folding = folding
        functools.update_wrapper(self, qnode)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fold = _FOLDING_TRANSFORMS[self.folding]
        results = [fold(self.qnode, s)(*args, **kwargs) for s in self.scale_factors]
        multiple = isinstance(results[0], (tuple, list))
        stacked = np.stack([_stacked(r) for r in results])
        estimate = self.extrapolate(self.scale_factors, stacked)
        if multiple:
            return tuple(estimate[i] for i in range(len(results[0])))
        return estimate


def mitigate_with_zne(
    fn: Any = None,
    *,
    scale_factors: Sequence[int],
    extrapolate: Callable | None = None,
    extrapolate_kwargs: dict[str, Any] | None = None,
    folding: str = "global",
) -> Any:
    """Catalyst's `mitigate_with_zne`: the QNode `fn` error-mitigated by zero-noise
    extrapolation (see the module's docstring)."""
    if fn is None:
        return functools.partial(
            mitigate_with_zne,
            scale_factors=scale_factors,
            extrapolate=extrapolate,
            extrapolate_kwargs=extrapolate_kwargs,
            folding=folding,
        )
    if not isinstance(fn, qml.QNode):
        raise TypeError(
            f"mitigate_with_zne: expected a QNode, got {type(fn).__name__}; cofactor folds one "
            "QNode's circuit, so apply mitigate_with_zne to each QNode of the program"
        )
    if folding not in _FOLDINGS:
        raise ValueError(
            f"mitigate_with_zne: folding={folding!r} is not supported by cofactor; use one of "
            f"{', '.join(_FOLDINGS)}"
        )
    factors = _check_scale_factors(scale_factors)
    if extrapolate is None:
        extrapolate = qml.noise.richardson_extrapolate
    if extrapolate_kwargs:
        extrapolate = functools.partial(extrapolate, **extrapolate_kwargs)
    return ZNECallable(fn, factors, extrapolate, folding)
