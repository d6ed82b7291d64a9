"""The cycle collector around a trace (`cofactor.ir.traced.gc_paused`).

A trace runs with the collector off; its objects are then moved to the oldest generation
instead of being walked by a young collection right after the trace (~1 ms of the first
call of a gradient of tanh(W x)), within a bound, never releasing objects the program froze
itself, and the garbage it left is still freed by a full collection.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from cofactor import qjit
from cofactor.ir import traced


class _Node:
    """A tracked object that can be weakly referenced (to see when it is freed)."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def _collections_during(fn) -> list[int]:
    """The generations of the collections Python runs while `fn` runs."""
    seen: list[int] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(callback)
    try:
        fn()
    finally:
        gc.callbacks.remove(callback)
    return seen


@pytest.fixture
def fresh_tally(monkeypatch):
    """Each test starts with nothing promoted, the collector on and nothing frozen."""
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.collect()
    monkeypatch.setattr(traced, "_promoted", 0)
    monkeypatch.setattr(traced, "_full_collections_seen", -1)


def _paused_allocation(n: int) -> list:
    with traced.gc_paused():
        return [_Node() for _ in range(n)]


def test_objects_made_while_paused_are_not_walked_by_a_young_collection(fresh_tally):
    def run():
        kept = _paused_allocation(20 * gc.get_threshold()[0])
        after = [[] for _ in range(50)]  # would trigger the young collection
        return kept, after

    # Before: the first allocations after the trace ran a generation-0 collection.
    assert _collections_during(run) == []
    kept = _paused_allocation(20 * gc.get_threshold()[0])
    assert gc.is_tracked(kept[0])
    assert any(obj is kept[-1] for obj in gc.get_objects(generation=2))


def test_garbage_left_by_a_trace_is_freed_by_a_full_collection(fresh_tally):
    def trace_with_garbage():
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle nobody refers to once the trace ends
        _ = [_Node() for _ in range(20 * gc.get_threshold()[0])]
        return weakref.ref(a)

    with traced.gc_paused():
        ref = trace_with_garbage()
    assert ref() is not None  # promoted, not yet collected
    gc.collect()
    assert ref() is None


def test_promotion_stops_at_the_limit_until_a_full_collection(fresh_tally, monkeypatch):
    step = 20 * gc.get_threshold()[0]
    monkeypatch.setattr(traced, "PROMOTE_LIMIT", int(step * 1.5))
    _paused_allocation(step)  # promoted
    assert traced._promoted >= step

    def second():
        _paused_allocation(step)  # over the limit: left young, collected as before
        _ = [[] for _ in range(50)]

    assert 0 in _collections_during(second)
    gc.collect()  # a full collection frees what was promoted: promotion starts again
    _paused_allocation(step)
    assert step <= traced._promoted < 1.5 * step


def test_objects_the_program_froze_stay_frozen(fresh_tally):
    frozen = [_Node() for _ in range(10)]
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        _paused_allocation(20 * gc.get_threshold()[0])
        assert gc.get_freeze_count() == count
        assert not any(obj is frozen[0] for obj in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()


def test_a_compiled_function_still_computes_after_its_objects_are_promoted(fresh_tally):
    x = np.linspace(-1.0, 1.0, 5)

    @qjit
    def f(w):
        return np.sum(np.tanh(w * x) ** 2)

    assert np.isclose(f(0.7), np.sum(np.tanh(0.7 * x) ** 2))
    gc.collect()
    assert np.isclose(f(0.3), np.sum(np.tanh(0.3 * x) ** 2))
