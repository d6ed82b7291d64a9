"""A list/tuple argument of numbers of different types (`(0.5, True)`, `[2**60 + 1, 0.5]`)
keeps each element's type, as Catalyst and JAX do (each element is its own leaf). It used to
travel as one numpy array, which converted every element to float: the bool became 1.0
(`np.logical_not` of it gave a float 0.0) and 2**60 + 1 was rounded to 2**60.
Lists of one number type still travel as one array (tests/frontend/test_list_arguments.py).
"""

from __future__ import annotations

import numpy as np

from cofactor import qjit
from cofactor.signature import _is_array_list


@qjit
def _mixed(t):
    return t[0] - 2**60, t[1] * 2, np.logical_not(t[2])


def test_each_element_keeps_its_type():
    big, doubled, negated = _mixed([2**60 + 1, 0.5, True])
    assert big == 1 and np.asarray(big).dtype == np.int64
    assert doubled == 1.0
    assert np.asarray(negated).dtype == np.bool_ and not negated


def test_only_lists_of_one_number_type_are_packed():
    assert _is_array_list([0.5, 1.5])
    assert _is_array_list(((1, 2), (3, 4)))
    assert _is_array_list([np.float32(1.0), np.float32(2.0)])
    assert not _is_array_list([1, 2.5])
    assert not _is_array_list((0.5, True))
    assert not _is_array_list([[1.0, 2.0], [3, 4]])
    assert not _is_array_list([np.float32(1.0), 2.0])
