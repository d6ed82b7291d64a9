"""A list or tuple of numbers passed to qjit is one array in the compiled code but a list /
tuple in the program (tracing/packed.py). Code that rebuilds a sequence through its type,
as generic tree-mapping code does (`type(t)(f(v) for v in t)`), or copies it
(`copy.copy(t)`), got cofactor's internal classes and failed with
"PackedTuple.__new__() missing 3 required positional arguments". They give a plain
list / tuple now, as a sequence built from a packed one is.
"""

from __future__ import annotations

import copy

import numpy as np

from cofactor import qjit


def test_type_of_a_packed_sequence_rebuilds_it():
    @qjit
    def rebuild(t, values):
        return type(t)(v * 2 for v in t), type(values)(v + 1 for v in values)

    doubled, shifted = rebuild((0.5, 1.5), [1.0, 2.0, 3.0])
    assert type(doubled) is tuple and type(shifted) is list
    np.testing.assert_allclose(doubled, (1.0, 3.0))
    np.testing.assert_allclose(shifted, [2.0, 3.0, 4.0])


def test_copies_of_packed_sequences():
    @qjit
    def copies(t, values):
        return copy.copy(t), copy.deepcopy(t), copy.copy(values), copy.deepcopy(values)

    t, t_deep, values, values_deep = copies((0.5, 1.5), [1.0, 2.0, 3.0])
    assert type(t) is tuple and type(t_deep) is tuple
    assert type(values) is list and type(values_deep) is list
    np.testing.assert_allclose(t, (0.5, 1.5))
    np.testing.assert_allclose(values_deep, [1.0, 2.0, 3.0])


def test_numpy_still_sees_the_packed_array():
    @qjit
    def reduce(t):
        copied = type(t)(t)
        return np.sum(t), np.sum(copied), 2 * t

    total, total_copy, repeated = reduce((0.5, 1.5))
    assert total == total_copy == 2.0
    np.testing.assert_allclose(repeated, (0.5, 1.5, 0.5, 1.5))  # (Python's tuple repetition)
