"""numpy's argument forms on traced values, found by the session-13 sweep: numpy >= 2.1's
`np.clip(x, min=..., max=...)` (a TypeError crash before) and the error of a reduction
without identity over an empty axis, named as numpy names it."""

from __future__ import annotations

import numpy as np
import pytest

import cofactor

pytestmark = pytest.mark.needs_toolchain


def test_clip_takes_numpys_min_and_max_keywords():
    x = np.array([-2.0, 0.25, 3.0])
    got = cofactor.qjit(lambda v: np.clip(v, min=-0.5, max=0.5))(x)
    np.testing.assert_array_equal(got, np.clip(x, min=-0.5, max=0.5))
    got = cofactor.qjit(lambda v: np.clip(v, max=0.0))(x)
    np.testing.assert_array_equal(got, np.clip(x, max=0.0))
    with pytest.raises(ValueError, match="forbidden"):
        cofactor.qjit(lambda v: np.clip(v, 0.0, 1.0, min=0.0))(x)


@pytest.mark.parametrize("reduction", [np.max, np.min, np.amax])
def test_reduction_without_identity_of_an_empty_axis_names_numpys_operation(reduction):
    name = "maximum" if reduction in (np.max, np.amax) else "minimum"
    with pytest.raises(ValueError, match=f"zero-size array to reduction operation {name} "):
        cofactor.qjit(lambda v: reduction(v))(np.zeros(0))
    with pytest.raises(ValueError, match=f"reduction operation {name} which has no identity"):
        cofactor.qjit(lambda v: reduction(v, axis=1))(np.zeros((2, 0)))
    got = cofactor.qjit(lambda v: reduction(v, axis=0))(np.zeros((2, 0)))
    assert got.shape == (0,)
