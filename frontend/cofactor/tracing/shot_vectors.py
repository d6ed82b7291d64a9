"""Shot vectors (`shots=[20, (5, 3), 100]`) for `qml.sample`, as Catalyst supports them.

The circuit runs once with the total number of shots and each sample measurement is cut
into one array per partition, in order: the result holds, in place of every `qml.sample`,
a tuple of its partitions (Catalyst's layout; PennyLane's own puts the partitions
outermost, which is the same for a circuit with one measurement). Every other measurement
is refused, as Catalyst refuses it: an expectation or a probability per partition would
need the statistics of each partition's samples, which the compiled circuit does not keep.
"""

from __future__ import annotations

from typing import Any

from cofactor.errors import CompileNotImplementedError
from cofactor.tracing import pytree
from cofactor.tracing.tracer import Tracer

_KINDS_KEPT = ("sample", "classical")
_MCM_STATISTIC = "a statistic of mid-circuit measurement values (qml.sample(m), ...)"


def partition_bounds(qnode: Any) -> list[tuple[int, int]] | None:
    """[(start, stop)] of each partition of the QNode's shot vector; None without one."""
    shots = getattr(qnode, "shots", None) or qnode.device.shots
    if shots is None or not shots.has_partitioned_shots:
        return None
    bounds, start = [], 0
    for count in shots:  # (a Shots iterates over its partitions, copies expanded)
        bounds.append((start, start + int(count)))
        start += int(count)
    return bounds


def split_samples(result: Any, kinds: list[str], bounds: list[tuple[int, int]], name: str) -> Any:
    """`result` of a circuit run with the total shots, each sample cut into partitions.

    `kinds[i]` is what the circuit computed for the i-th leaf of `result` (as flattened)."""
    refused = sorted({k for k in kinds if k not in _KINDS_KEPT})
    if refused:
        what = _MCM_STATISTIC if refused[0] == "MCMStat" else f"qml.{refused[0]}"
        raise CompileNotImplementedError(
            f"QNode {name}: {what}: this measurement process does not support shot-vectors "
            "under qjit (nor in Catalyst); only qml.sample of wires or observables does. Give "
            "one number of shots, or return qml.sample and compute the statistics of each "
            "partition from its samples"
        )
    leaves, tree = pytree.flatten(result, is_leaf=lambda x: isinstance(x, Tracer))
    for i, kind in enumerate(kinds):
        if kind == "sample":
            leaves[i] = tuple(leaves[i][start:stop] for start, stop in bounds)
    return pytree.unflatten(tree, leaves)
