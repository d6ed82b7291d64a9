"""Work tracing did for nothing (issue 13's tanh program: 12.2 M instructions to trace at
W 512, 8.3 M now; callgrind, the first trace of a process).

- `a @ b` and `np.dot(a, b)` asked numpy whether the shapes fit by multiplying zero arrays
  of those shapes: a third of that trace, growing with the cube of the size. The checks
  must accept and refuse exactly what numpy does.
- A full reduction (`np.sum(v)`) emitted an index constant nobody used, which made the
  differentiated function's dead-code analysis run (ir/dead_code.py), another 2 M.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from cofactor import grad
from cofactor.ir import dead_code
from cofactor.jit import QJIT
from cofactor.launcher import BufferSpec
from cofactor.tracing.array_rules import _contracted_axes_agree

F64 = np.dtype(np.float64)


def _trace(fn, shapes):
    specs = tuple(BufferSpec(s, F64) for s in shapes)
    tree = ("tuple", tuple("*" for _ in specs))
    return QJIT(fn)._trace(tree, specs, ())[0]


def test_the_shape_check_agrees_with_numpy():
    shapes = [s for n in range(1, 4) for s in itertools.product((1, 2, 3), repeat=n)]
    for sa, sb in itertools.product(shapes, repeat=2):
        for batch, product in ((True, np.matmul), (False, np.dot)):
            try:
                product(np.zeros(sa, np.int8), np.zeros(sb, np.int8))
                fits = True
            except ValueError:
                fits = False
            assert _contracted_axes_agree(sa, sb, batch) == fits, (sa, sb, product)


@pytest.mark.parametrize("product", [np.matmul, np.dot])
def test_a_large_product_traces_without_multiplying(product):
    # 2000x2000 @ 2000x2000: numpy's int8 product of zero arrays took seconds
    start = time.perf_counter()
    text = _trace(lambda a, b: product(a, b), [(2000, 2000), (2000, 2000)])
    assert time.perf_counter() - start < 2.0
    assert "scf.for" in text


@pytest.mark.parametrize("product", [np.matmul, np.dot])
def test_shapes_that_do_not_fit_raise_numpys_error(product):
    with pytest.raises(ValueError):
        _trace(lambda a, b: product(a, b), [(3, 4), (3,)])


def test_a_gradient_of_a_sum_leaves_no_dead_code_to_analyse(monkeypatch):
    runs = []
    original = dead_code._Liveness.run
    monkeypatch.setattr(dead_code._Liveness, "run", lambda self: runs.append(1) or original(self))
    x = np.linspace(-1, 1, 64)

    def loss(w):
        return np.sum(np.tanh(w @ x) ** 2)

    text = _trace(grad(loss), [(64, 64)])
    assert "gradient.vjp" in text and "scf.for" in text
    assert runs == []
