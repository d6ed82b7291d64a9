"""Dead-code removal before Enzyme narrows nested loops and branches whose dropped slot
flows through the parent: an `else_if` (an scf.if in the outer scf.if's else block) whose
unused result the outer branch yields raised xDSL's "Attempting to delete SSA value that
still has uses" (jacobian of the array result of a cond/else_if returning (array, scalar));
a nested loop whose dropped slot starts from the outer loop's dropped carried value."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest
from pennylane import numpy as pnp

import cofactor

pytestmark = pytest.mark.needs_toolchain


def _branches(x, s, np=np, compiled=True):
    if not compiled:
        if s > 0.2:
            return x * 2.0, s * s
        if s > 0.1:
            return x * 3.0 * s, s
        return x * 4.0, s + 1

    @cofactor.cond(s > 0.2)
    def br():
        return x * 2.0, s * s

    @br.else_if(s > 0.1)
    def br():
        return x * 3.0 * s, s

    @br.otherwise
    def br():
        return x * 4.0, s + 1

    return br()


@pytest.mark.parametrize("s", [0.3, 0.15, 0.05])
def test_jacobian_of_one_result_of_else_if_branches(s):
    x = np.array([1.0, 2.0])
    got = cofactor.qjit(cofactor.jacobian(lambda x, s: _branches(x, s)[0], argnums=(0, 1)))(x, s)
    want = qml.jacobian(lambda x, s: _branches(x, s, pnp, False)[0], argnums=[0, 1])(
        pnp.array(x, requires_grad=True), pnp.array(s, requires_grad=True)
    )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_grad_through_nested_loops_with_an_unused_carried_value():
    def f(x):
        @cofactor.for_loop(0, 3, 1)
        def outer(i, a, unused):
            @cofactor.for_loop(0, 2, 1)
            def inner(j, b, u):
                return np.sin(b) + x * j, u * 2.0 + b[0]

            a, unused = inner(a, unused)
            return a * 0.5 + i, unused

        a, _ = outer(x, 1.0)
        return np.sum(a**2)

    def plain(x):
        a, unused = x, 1.0
        for i in range(3):
            for j in range(2):
                a, unused = pnp.sin(a) + x * j, unused * 2.0 + a[0]
            a = a * 0.5 + i
        return pnp.sum(a**2)

    x = np.array([0.3, -0.8, 1.1])
    got = cofactor.qjit(cofactor.grad(f))(x)
    want = qml.grad(plain)(pnp.array(x, requires_grad=True))
    np.testing.assert_allclose(got, want, rtol=1e-12)
