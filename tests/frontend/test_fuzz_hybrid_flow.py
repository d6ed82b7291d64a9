"""Property test: QNode results inside classical control flow, differentiated.

test_fuzz.py calls its circuit between classical pre- and post-processing, and
test_fuzz_control_flow.py differentiates loops and branches without circuits. Here QNode
results are what the control flow carries: the value of a `cond` branch (alone or after
arithmetic), the carry of a `for_loop` (static or traced bounds) or of a `while_loop`, a
probability vector carried as an array, a QNode whose arguments are the carried values.
Each program runs 1-3 such stages on (s, v) from the inputs (x of shape (2,), y), and
returns one scalar: the last value as it is, or after arithmetic. The compiled value and
`cofactor.grad(..., argnums=(0, 1))` (the expval circuit by its drawn diff_method, adjoint
or parameter-shift) must equal plain Python on PennyLane (default.qubit, backprop,
`qml.grad(..., argnums=[0, 1])`) to 1e-9 / 1e-7.

Found: a QNode result that reached a branch's or a loop's value without arithmetic stopped
Enzyme ("Cannot deduce type of phi"; the gradient passes now type those buffers). The
update `qe(s, 0.4) - 0.5 * qe(0.4, s)` covers the same QNode with a static value in two
places (test_qnode_static_argument_keys.py).

`make test` runs COFACTOR_FUZZ_EXAMPLES examples (default 12, derandomized); run longer with
e.g. COFACTOR_FUZZ_EXAMPLES=200 COFACTOR_FUZZ_SEED=3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pennylane as qml
import pytest
from fuzz_settings import fuzz_settings
from hypothesis import given, note
from hypothesis import strategies as st

import cofactor

pytestmark = [
    pytest.mark.needs_toolchain,
    pytest.mark.filterwarnings("ignore:Output seems independent of input"),
]

pnp = qml.numpy
VALUE_TOL = 1e-9
GRAD_TOL = 1e-7

#: a new scalar s from (s, v, x, y, i); the QNode calls are `qe` (expval) and `qp` (probs)
SCALAR_UPDATES = [
    "qe(s, y)",
    "qe(x[0] * s, x[1]) * 0.5 + s",
    "np.sin(s) * y + 0.1",
    "qp(x * s)[1]",
    "qp(x + i * 0.1)[3] + s * 0.5",
    "s * 0.7 + np.sum(v * x[0])",
    "qe(v[0] + s, y * i)",
    "qe(s, 0.4) - 0.5 * qe(0.4, s)",
]
#: a new probability-like vector v (4,) from (s, v, x, y, i)
VECTOR_UPDATES = [
    "qp(x + s)",
    "v * 0.5 + qp(x * y)",
    "np.cos(v) * s",
    "qp(v[:2] + y)",
]
PREDICATES = ["s > 0.3", "x[0] > 0.0", "np.sum(v) > 0.9", "y < 0.5"]
TRIPS = [1, 2, 3]


@dataclass
class Stage:
    kind: str  # "cond", "for", "for_traced", "while"
    scalar: str
    vector: str
    other_scalar: str  # the else branch of a cond
    predicate: str
    trips: int


def stages():
    return st.builds(
        Stage,
        kind=st.sampled_from(["cond", "for", "for_traced", "while"]),
        scalar=st.sampled_from(SCALAR_UPDATES),
        vector=st.sampled_from(VECTOR_UPDATES),
        other_scalar=st.sampled_from(SCALAR_UPDATES),
        predicate=st.sampled_from(PREDICATES),
        trips=st.sampled_from(TRIPS),
    )


def _indent(lines: list[str], n: int = 1) -> list[str]:
    return ["    " * n + line for line in lines]


#: the first s: a raw input (only loaded: typed by nothing else) or arithmetic
INITIALS = ["x[0] * y", "y", "x[1]"]
#: the program's result: the last stage's value as it is, or after arithmetic
FINALS = ["s", "s + np.sum(v * np.array([0.3, -0.2, 0.5, 0.1])) * y", "v[2]"]


def render(program: list[Stage], compiled: bool, diff_method: str, final: str, initial: str) -> str:
    method = diff_method if compiled else "backprop"
    # (the adjoint method differentiates expectation values only, in Catalyst too)
    probs_method = "parameter-shift" if compiled else "backprop"
    lines = [
        f"@qml.qnode(dev, diff_method={method!r})",
        "def qe(a, b):",
        "    qml.RX(a, 0)",
        "    qml.RY(b, 1)",
        "    qml.CNOT([0, 1])",
        "    qml.RZ(a * b, 1)",
        "    return qml.expval(qml.Z(0) @ qml.X(1) + 0.5 * qml.Z(1))",
        f"@qml.qnode(dev, diff_method={probs_method!r})",
        "def qp(w):",
        "    qml.RY(w[0], 0)",
        "    qml.RX(w[1], 1)",
        "    qml.CNOT([1, 0])",
        "    return qml.probs(wires=[0, 1])",
        "def program(x, y, n):",
        f"    s = {initial}",
        "    v = qp(x)",
        "    i = 0",
    ]
    for k, stage in enumerate(program):
        body = [f"s = {stage.scalar}", f"v = {stage.vector}"]
        if stage.kind == "cond":
            if compiled:
                lines += _indent(
                    [
                        f"@cofactor.cond({stage.predicate})",
                        f"def branch{k}():",
                        f"    return {stage.scalar}, {stage.vector}",
                        f"@branch{k}.otherwise",
                        f"def branch{k}():",
                        f"    return {stage.other_scalar}, v",
                        f"s, v = branch{k}()",
                    ]
                )
            else:
                lines += _indent(
                    [
                        f"if {stage.predicate}:",
                        f"    s, v = {stage.scalar}, {stage.vector}",
                        "else:",
                        f"    s, v = {stage.other_scalar}, v",
                    ]
                )
        elif stage.kind in ("for", "for_traced"):
            bound = "n" if stage.kind == "for_traced" else str(stage.trips)
            if compiled:
                lines += _indent(
                    [
                        f"@cofactor.for_loop(0, {bound}, 1)",
                        f"def loop{k}(i, s, v):",
                        *_indent(body),
                        "    return s, v",
                        f"s, v = loop{k}(s, v)",
                    ]
                )
            else:
                # (the compiled loop's index is its body's own: Python's leaks out)
                lines += _indent(
                    ["outer_i = i", f"for i in range({bound}):", *_indent(body), "i = outer_i"]
                )
        else:  # while: a counter bounds it, as a data-dependent condition would
            if compiled:
                lines += _indent(
                    [
                        f"@cofactor.while_loop(lambda s, v, i: i < {stage.trips})",
                        f"def loop{k}(s, v, i):",
                        *_indent(body),
                        "    return s, v, i + 1",
                        f"s, v, i = loop{k}(s, v, 0)",
                    ]
                )
            else:
                lines += _indent(
                    ["i = 0", f"while i < {stage.trips}:", *_indent(body), "    i = i + 1"]
                )
    lines.append(f"    return {final}")
    return "\n".join(lines) + "\n"


_DEVICE = qml.device("default.qubit", wires=2)


def _load(source: str, numpy_module) -> dict:
    namespace = {"qml": qml, "np": numpy_module, "cofactor": cofactor, "dev": _DEVICE}
    exec(compile(source, "<fuzz-hybrid-flow>", "exec"), namespace)
    return namespace


@fuzz_settings(12)
@given(
    program=st.lists(stages(), min_size=1, max_size=3),
    diff_method=st.sampled_from(["adjoint", "parameter-shift"]),
    final=st.sampled_from(FINALS),
    initial=st.sampled_from(INITIALS),
    x=st.tuples(st.sampled_from([-0.7, 0.2, 0.45, 1.1]), st.sampled_from([-0.35, 0.6, 1.3])),
    y=st.sampled_from([-0.4, 0.25, 0.8]),
)
def test_qnode_results_through_control_flow(program, diff_method, final, initial, x, y):
    source = render(program, True, diff_method, final, initial)
    note(source)
    n = max((s.trips for s in program if s.kind == "for_traced"), default=2)
    xs = np.array(x)

    plain = _load(render(program, False, diff_method, final, initial), pnp)["program"]
    expected = plain(pnp.array(xs), y, n)
    expected_grad = qml.grad(lambda a, b: plain(a, b, n), argnums=[0, 1])(
        pnp.array(xs, requires_grad=True), pnp.array(y, requires_grad=True)
    )

    program_fn = _load(source, np)["program"]
    value = cofactor.qjit(program_fn)(xs, y, n)
    gx, gy = cofactor.qjit(cofactor.grad(program_fn, argnums=(0, 1)))(xs, y, n)
    assert np.isclose(value, expected, atol=VALUE_TOL, rtol=VALUE_TOL)
    assert np.allclose(gx, expected_grad[0], atol=GRAD_TOL, rtol=GRAD_TOL)
    assert np.isclose(gy, expected_grad[1], atol=GRAD_TOL, rtol=GRAD_TOL)
