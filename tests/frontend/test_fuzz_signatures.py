"""Property test: one qjit function called in sequence with argument pytrees of changing
structure, dtypes and shapes (tuples, namedtuples, lists, dicts in any key order, None
leaves, Python and numpy scalars, 0-d/empty/strided arrays, a static argument), so that every
call either reuses a compiled signature or compiles a new one. Each call's result must have
the structure, values and dtype kind that numpy gives for the same program; a stale
compilation (a signature key that misses a difference) returns a wrong structure or value.

Integer arguments may reuse a float compilation of the same structure (Catalyst's promotion,
docs/frontend.md), so an int result may come back as float or complex, never the reverse,
and bool never promotes. Integers are small: compiled code computes in 64 bits.

`make test` runs a fixed, derandomized set of COFACTOR_FUZZ_EXAMPLES examples (default 10);
run longer with e.g. COFACTOR_FUZZ_EXAMPLES=200 COFACTOR_FUZZ_SEED=3.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
from fuzz_settings import fuzz_settings
from hypothesis import given, note
from hypothesis import strategies as st

import cofactor

pytestmark = [pytest.mark.needs_toolchain]

Pair = namedtuple("Pair", ["left", "right"])
Triple = namedtuple("Triple", ["a", "b", "c"])
DTYPES = [np.bool_, np.uint8, np.int32, np.int64, np.float32, np.float64, np.complex128]
#: a result's dtype kind for an argument's kind (int may reuse a float / complex compilation)
ALLOWED_KINDS = {"b": "b", "i": "ifc", "u": "ifc", "f": "fc", "c": "c"}


def _map(fn, tree):
    """The same structure with `fn` applied to each leaf (None stays None)."""
    if tree is None:
        return None
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_map(fn, v) for v in tree))
    if isinstance(tree, tuple | list):
        return type(tree)(_map(fn, v) for v in tree)
    if isinstance(tree, dict):
        return {k: _map(fn, v) for k, v in tree.items()}
    return fn(tree)


def _leaf_program(scale):
    def leaf(x):
        if isinstance(x, bool) or getattr(x, "dtype", None) == np.bool_:
            return np.logical_not(x)
        return x * scale + 1

    return leaf


@st.composite
def _array(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from([(), (0,), (1,), (3,), (2, 3), (3, 1)]))
    values = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 5
    a = values.astype(dtype)
    if dtype is np.complex128:
        a = a + 1j * (values + 1)
    if len(shape) == 2 and draw(st.booleans()):
        a = a.T  # a non-contiguous view
    elif shape == (3,) and draw(st.booleans()):
        a = np.arange(6, dtype=np.int64).astype(dtype)[::-2]  # negative stride
    return a


_scalars = st.one_of(
    st.sampled_from([0.5, -2.0, 3, -1, True, False, 1 + 2j]),
    st.builds(
        lambda t, v: t(v), st.sampled_from([np.float32, np.int32, np.float64]), st.integers(-3, 3)
    ),
)


def _trees(depth: int = 2):
    leaves = st.one_of(_scalars, _array(), st.none())
    if depth == 0:
        return leaves
    sub = _trees(depth - 1)
    return st.one_of(
        leaves,
        st.lists(sub, min_size=0, max_size=3).map(tuple),
        st.lists(sub, min_size=1, max_size=3),
        st.builds(Pair, sub, sub),
        st.builds(Triple, sub, sub, sub),
        st.dictionaries(st.sampled_from(["x", "b", "a"]), sub, max_size=3),
    )


def _check_leaf(got, expected, where):
    expected = np.asarray(expected)
    got = np.asarray(got)
    assert got.shape == expected.shape, where
    assert got.dtype.kind in ALLOWED_KINDS[expected.dtype.kind], (where, got.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=where)


def _check_same(got, expected, where="result"):
    if expected is None:
        assert got is None, where
        return
    if isinstance(expected, tuple | list | dict):
        assert type(got) is type(expected), (where, type(got), type(expected))
        if isinstance(expected, dict):
            assert list(got) == list(expected), where
            for k in expected:
                _check_same(got[k], expected[k], f"{where}[{k!r}]")
            return
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            _check_same(g, e, f"{where}[{i}]")
        return
    _check_leaf(got, expected, where)


@fuzz_settings(10)
@given(st.lists(st.tuples(st.sampled_from([2, 3]), _trees()), min_size=2, max_size=5))
def test_calls_with_changing_signatures_match_numpy(calls) -> None:
    note(repr(calls))

    @cofactor.qjit(static_argnums=0)
    def program(scale, tree):
        return _map(_leaf_program(scale), tree)

    for scale, tree in calls:
        with np.errstate(all="ignore"):
            expected = _map(_leaf_program(scale), tree)
        _check_same(program(scale, tree), expected)
