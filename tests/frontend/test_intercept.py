"""`context.intercept(s)`: replacements installed while a trace runs, put back after."""

from __future__ import annotations

import types

import pytest

from cofactor.tracing import context


def test_intercepts_install_in_order_and_restore_everything():
    owner = types.SimpleNamespace(a=1, b=2)
    with context.intercepts([(owner, "a", lambda v: v + 10), (owner, "b", lambda v: v + 20)]):
        assert (owner.a, owner.b) == (11, 22)
        with context.intercept(owner, "a", lambda v: v + 100):  # nested: installed once
            assert owner.a == 11
        assert owner.a == 11
    assert (owner.a, owner.b) == (1, 2)


def test_a_failing_replacement_restores_the_ones_already_installed():
    owner = types.SimpleNamespace(a=1, b=2)

    def boom(value):
        raise RuntimeError("no replacement")

    with pytest.raises(RuntimeError, match="no replacement"):
        with context.intercepts([(owner, "a", lambda v: v + 10), (owner, "b", boom)]):
            pass
    assert (owner.a, owner.b) == (1, 2)
    assert not any(key[0] == id(owner) for key in context._INTERCEPTED)


def test_a_prepared_replacement_is_made_once_and_follows_a_new_original():
    # (the intercepts of every trace are made at import, `context.prepare`; a trace reuses
    # them only while the attribute still holds the original they were made from)
    owner = types.SimpleNamespace(f="first")
    made = []

    def make(original):
        made.append(original)
        return f"wrapped {original}"

    items = [(owner, "f", make)]
    context.prepare(items)
    assert made == ["first"]
    for _ in range(2):
        with context.intercepts(items, reusable=True):
            assert owner.f == "wrapped first"
        assert owner.f == "first"
    assert made == ["first"]  # made once, installed twice
    owner.f = "second"  # (the program replaced the attribute after import)
    with context.intercepts(items, reusable=True):
        assert owner.f == "wrapped second"
    assert owner.f == "second"
    assert made == ["first", "second"]
    with context.intercepts(items):  # not reusable: made on every trace, as before
        assert owner.f == "wrapped second"
    assert made == ["first", "second", "second"]


def test_the_intercepts_of_a_trace_are_prepared_at_import():
    # the QNode call, numpy's constructors and the mid-circuit statistics: their
    # replacements exist before the first trace of a process, and a trace installs them
    import numpy as np

    from cofactor.tracing import circuit_call, mcm, numpy_entry

    for items in (
        circuit_call._QNODE_INTERCEPTS,
        mcm._STAT_INTERCEPTS,
        numpy_entry._stable_intercepts(),
    ):
        for owner, attr, make in items:
            prepared = context._PREPARED.get((id(owner), attr, make))
            assert prepared is not None and prepared[0] is owner, (owner, attr)
            assert prepared[1] is getattr(owner, attr), (owner, attr)
    make_zeros = next(m for o, a, m in numpy_entry._stable_intercepts() if a == "zeros")
    with numpy_entry.capture_numpy_constructors():
        assert np.zeros is context._PREPARED[(id(np), "zeros", make_zeros)][2]
    assert np.zeros is context._PREPARED[(id(np), "zeros", make_zeros)][1]
