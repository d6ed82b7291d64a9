"""Property test: classical control flow carrying arrays and tuples, compiled by cofactor,
against the same program in plain Python (pennylane.numpy / autograd).

test_fuzz.py carries scalars through its loops and test_fuzz_arrays.py loops over one array;
this one draws programs that carry a tuple (an array of 3 or 20 elements, in registers or in
memory, and a scalar) through `for_loop` (static or traced bounds, negative steps) and
`while_loop` (a data-dependent condition), branch with `cond` / `else_if` / `otherwise`
returning an array and a scalar, and index, reduce and write into the carried array. The
compiled value, gradient (`cofactor.grad` wrt x and y) and jacobian of the final array must
equal the plain program's value and autograd's `qml.grad` / `qml.jacobian` (1e-9 / 1e-7).

`make test` runs a fixed, derandomized set of COFACTOR_FUZZ_EXAMPLES examples (default 20);
run longer with e.g. COFACTOR_FUZZ_EXAMPLES=300 COFACTOR_FUZZ_SEED=3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pennylane as qml
import pytest
from fuzz_settings import fuzz_settings
from hypothesis import assume, given, note
from hypothesis import strategies as st

import cofactor

pytestmark = [
    pytest.mark.needs_toolchain,
    pytest.mark.filterwarnings("ignore:Output seems independent of input"),
]

pnp = qml.numpy
VALUE_TOL = 1e-9
GRAD_TOL = 1e-7
#: arrays up to this size are element values; larger ones live in memory (loop nests)
IN_REGISTERS = 16

#: new carried array from (a, s, i, x): smooth, bounded
ARRAY_UPDATES = [
    "np.sin(a) * s + x * 0.3",
    "a * 0.5 + np.cos(x * i)",
    "np.tanh(a + s) - x[::-1] * 0.2",
    "np.roll(a, 1) * 0.7 + x * s",
    "a - np.mean(a) + 0.1 * i",
    "np.where(a > s, a * 0.9, x - a)",
    "np.maximum(a, x) * 0.5 + np.sin(s)",
    "a * x + np.cumsum(a) * 0.1",
]
#: new carried scalar from (a, s, i, x)
SCALAR_UPDATES = [
    "s * 0.8 + np.sum(a) * 0.1",
    "np.sin(s) + a[0] * 0.5",
    "s + np.max(a) * 0.3 - i * 0.1",
    "np.cos(a[-1]) + s * 0.5",
    "s * 0.9 + np.dot(a, x) * 0.05",
]
PREDICATES = ["s > 0.2", "a[0] < a[-1]", "np.sum(a) > s", "y > 0.0", "np.max(a) > 1.0"]
BRANCHES = [
    ("a * 2.0 + s", "s * s"),
    ("np.sin(a) * y", "np.sum(a) * 0.5"),
    ("a[::-1] - x", "-s + y"),
    ("np.exp(-a * a)", "np.prod(np.cos(a[:3]))"),
]
#: a write into the carried array (compiled, in place) and the same as an expression
#: (plain: autograd cannot differentiate item assignment)
WRITES = [
    ("a[0] = s * 0.5", "np.where(np.arange(len(a)) == 0, s * 0.5, a)"),
    ("a[-1] = a[1] + y", "np.where(np.arange(len(a)) == len(a) - 1, a[1] + y, a)"),
    ("a[1:3] = x[:2] * s", "np.concatenate([a[:1], x[:2] * s, a[3:]])"),
    ("a[np.argmax(a)] = 0.0", "np.where(np.arange(len(a)) == np.argmax(a), 0.0, a)"),
]


@dataclass
class FlowProgram:
    n: int
    loop: str  # "for", "for_traced", "for_neg", "while"
    trips: int
    array_update: str
    scalar_update: str
    write: tuple[str, str] | None
    branches: list[tuple[str, str, str]]  # (predicate, array result, scalar result)
    otherwise: tuple[str, str]
    x: list[float]
    y: float

    def render(self, compiled: bool) -> str:
        lines = ["def f(x, y, k):", "    a = x * 1.0", "    s = y * 1.0"]
        body = [f"a = {self.array_update}", f"s = {self.scalar_update}"]
        if self.write:
            write = ["a = a * 1.0", self.write[0]] if compiled else [f"a = {self.write[1]}"]
            body = [body[0], *write, body[1]]
        if self.loop == "while":
            cond = "(j < k) & (s < 50.0)"
            if compiled:
                lines += [
                    f"    @cofactor.while_loop(lambda j, a, s: {cond})",
                    "    def loop(j, a, s):",
                ]
                lines += ["        i = j"] + [f"        {b}" for b in body]
                lines += ["        return j + 1, a, s", "    _, a, s = loop(0, a, s)"]
            else:
                lines += ["    j = 0", f"    while {cond}:", "        i = j"]
                lines += [f"        {b}" for b in body] + ["        j = j + 1"]
        else:
            bounds = {
                "for": f"0, {self.trips}, 1",
                "for_traced": "1, k + 1, 1",
                "for_neg": f"{self.trips}, 0, -2",
            }[self.loop]
            if compiled:
                lines += [f"    @cofactor.for_loop({bounds})", "    def loop(i, a, s):"]
                lines += [f"        {b}" for b in body] + [
                    "        return a, s",
                    "    a, s = loop(a, s)",
                ]
            else:
                lines += [f"    for i in range({bounds}):"] + [f"        {b}" for b in body]
        if compiled:
            (p0, a0, s0), *rest = self.branches
            lines += [f"    @cofactor.cond({p0})", "    def br():", f"        return {a0}, {s0}"]
            for p, ar, sr in rest:
                lines += [f"    @br.else_if({p})", "    def br():", f"        return {ar}, {sr}"]
            lines += ["    @br.otherwise", "    def br():"]
            lines += [f"        return {self.otherwise[0]}, {self.otherwise[1]}", "    b, t = br()"]
        else:
            for k, (p, ar, sr) in enumerate(self.branches):
                lines += [f"    {'if' if k == 0 else 'elif'} {p}:", f"        b, t = {ar}, {sr}"]
            lines += ["    else:", f"        b, t = {self.otherwise[0]}, {self.otherwise[1]}"]
        lines += ["    return np.sum(b * np.arange(1.0, len(b) + 1.0)) * 0.1 + t, b"]
        return "\n".join(lines) + "\n"

    def reproducer(self) -> str:
        return (
            "import numpy as np\nimport cofactor\n\n"
            + self.render(True)
            + f"\nprint(cofactor.qjit(f)(np.array({self.x!r}), {self.y!r}, {self.trips}))\n"
        )


@st.composite
def flow_programs(draw) -> FlowProgram:
    n = draw(st.sampled_from([3, 3, 20]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = np.round(rng.uniform(-1.0, 1.0, n), 3) + np.arange(n) * 1e-4  # distinct: no ties
    k = draw(st.integers(1, 3))
    branches = [
        (draw(st.sampled_from(PREDICATES)), *draw(st.sampled_from(BRANCHES)))
        for _ in range(draw(st.integers(1, 2)))
    ]
    return FlowProgram(
        n=n,
        loop=draw(st.sampled_from(["for", "for_traced", "for_neg", "while"])),
        trips=k,
        array_update=draw(st.sampled_from(ARRAY_UPDATES)),
        scalar_update=draw(st.sampled_from(SCALAR_UPDATES)),
        write=draw(st.none() | st.sampled_from(WRITES)),
        branches=branches,
        otherwise=draw(st.sampled_from(BRANCHES)),
        x=[float(v) for v in x],
        y=float(np.round(rng.uniform(-1.0, 1.0), 3)),
    )


def _function(p: FlowProgram, compiled: bool):
    ns = {"np": np if compiled else pnp, "cofactor": cofactor}
    exec(compile(p.render(compiled), "<fuzz control flow>", "exec"), ns)  # noqa: S102
    return ns["f"]


def check(p: FlowProgram) -> None:
    plain = _function(p, compiled=False)
    x, y, k = np.array(p.x), p.y, p.trips
    want_cost, want_b = plain(pnp.array(x, requires_grad=False), y, k)
    assume(np.all(np.abs(want_b) < 1e6) and abs(want_cost) < 1e6)
    scalar = lambda x, y: plain(x, y, k)[0]  # noqa: E731
    vector = lambda x: plain(x, y, k)[1]  # noqa: E731
    xa, ya = pnp.array(x, requires_grad=True), pnp.array(y, requires_grad=True)
    want_grad = qml.grad(scalar, argnums=[0, 1])(xa, ya)
    want_jac = qml.jacobian(vector)(xa)

    f = _function(p, compiled=True)

    @cofactor.qjit
    def workflow(x, y, k):
        cost, b = f(x, y, k)
        grads = cofactor.grad(lambda x, y: f(x, y, k)[0], argnums=(0, 1))(x, y)
        jac = cofactor.jacobian(lambda x: f(x, y, k)[1])(x)
        return cost, b, grads, jac

    cost, b, (gx, gy), jac = workflow(x, y, k)
    np.testing.assert_allclose(cost, want_cost, rtol=VALUE_TOL, atol=VALUE_TOL, err_msg="value")
    np.testing.assert_allclose(b, want_b, rtol=VALUE_TOL, atol=VALUE_TOL, err_msg="array")
    np.testing.assert_allclose(gx, want_grad[0], rtol=GRAD_TOL, atol=GRAD_TOL, err_msg="d/dx")
    np.testing.assert_allclose(gy, want_grad[1], rtol=GRAD_TOL, atol=GRAD_TOL, err_msg="d/dy")
    np.testing.assert_allclose(jac, want_jac, rtol=GRAD_TOL, atol=GRAD_TOL, err_msg="jacobian")


_settings = fuzz_settings(default_examples=20)


@_settings
@given(flow_programs())
def test_control_flow_programs_match_autograd(p: FlowProgram) -> None:
    note(p.reproducer())
    check(p)


# Enzyme stopped with "Cannot deduce type of phi" on these programs (arrays over 16 elements,
# in memory, carried by a loop or returned by cond) under the in-process compile's narrow type
# offsets (`enzyme-max-int-offset` 2, compiler/Optimize.cpp); the compile now retries such a
# module with Enzyme's default (Compiler.cpp).


def test_jacobian_of_a_cond_returning_an_array_in_memory() -> None:
    def f(x, y):
        @cofactor.cond(y > 0.2)
        def branch():
            return np.sin(x)

        @branch.otherwise
        def branch():
            return x * x

        return branch()

    x = np.linspace(-1.0, 1.0, IN_REGISTERS + 1)
    jac = cofactor.qjit(cofactor.jacobian(f))(x, -0.9)
    np.testing.assert_allclose(jac, np.diag(2 * x), rtol=1e-12)


def test_grad_through_a_loop_carrying_a_maximum_in_memory() -> None:
    def f(x, y):
        @cofactor.for_loop(0, 1, 1)
        def loop(i, a):
            return np.maximum(a, x) * 0.5 + np.sin(y)

        a = loop(x * 1.0)
        return np.sum((a[::-1] - x) * np.arange(20.0))

    x = np.linspace(-1.0, 1.0, 20) + 0.01
    j = np.arange(20.0)  # (maximum(x, x): a tie, each side half the derivative)
    got = cofactor.qjit(cofactor.grad(f))(x, -0.9)
    np.testing.assert_allclose(got, 0.5 * (19.0 - j) - j, rtol=1e-12)
