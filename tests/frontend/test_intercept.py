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
