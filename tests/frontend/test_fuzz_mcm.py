"""Property test: circuits with postselected mid-circuit measurements (with `reset`), `qml.cond`
on measurement values (`~`, `&`, `|`, `==`, `!=`, an else branch) and `for_loop`s around
them, compiled by cofactor, against uncompiled PennyLane on `default.qubit` (deferred
measurements, analytic).

Every measurement is postselected, so cofactor's single run takes the branch PennyLane
conditions on, and both give the normalized post-measurement statistics: `expval` of Pauli
words, `var`, `probs` of a reordered wire subset, `expval` of a measurement value. The
gradient (`grad(method="fd")`, the only method for such circuits) must match PennyLane's
backpropagated gradient. A postselected outcome of probability 0 is NaN in PennyLane and a
RuntimeExecutionError in cofactor; such examples (and near-zero branches, whose normalization
amplifies rounding) are rejected.

`make test` runs a fixed, derandomized set of COFACTOR_FUZZ_EXAMPLES examples (default 15);
run longer with e.g. COFACTOR_FUZZ_EXAMPLES=200 COFACTOR_FUZZ_SEED=3.
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
from cofactor.errors import RuntimeExecutionError

pytestmark = [pytest.mark.needs_toolchain]

WIRES = 3
MAX_MEASUREMENTS = 8
VALUE_TOL = 1e-8
GRAD_TOL = 2e-4  # forward differences with h = 1e-7
ONE_WIRE = ["qml.RX({p}, {w})", "qml.RY({p}, {w})", "qml.RZ({p}, {w})", "qml.Hadamard({w})"]
TWO_WIRE = ["qml.CNOT([{w}, {v}])", "qml.CRY({p}, [{w}, {v}])", "qml.IsingXX({p}, [{w}, {v}])"]
COND_GATES = ["qml.RX", "qml.RY", "qml.RZ"]
PREDICATES = ["{a}", "~{a}", "{a} & {b}", "{a} | ~{b}", "{a} != {b}", "{a} == 0"]
PAULIS = ["qml.X({w})", "qml.Y({w})", "qml.Z({w})"]


@dataclass
class McmProgram:
    body: list[str]  # the circuit, with the `for_loop` markers described in _render
    returns: list[str]
    x: list[float]

    def render(self, compiled: bool) -> str:
        """The circuit function; a `LOOP n var` line opens a loop of n iterations (a
        cofactor.for_loop, or a Python for), `END` closes it."""
        lines = ["def circuit(x):"]
        depth, loops = 1, []
        for line in self.body:
            pad = "    " * depth
            if line.startswith("LOOP "):
                _, count, var = line.split()
                name = f"loop_{var}"
                loops.append((name, pad))
                if compiled:
                    lines += [f"{pad}@cofactor.for_loop(0, {count}, 1)", f"{pad}def {name}({var}):"]
                else:
                    lines.append(f"{pad}for {var} in range({count}):")
                lines.append(f"{pad}    pass")
                depth += 1
            elif line == "END":
                name, outer = loops.pop()
                depth -= 1
                if compiled:
                    lines.append(f"{outer}{name}()")
            else:
                lines.append(pad + line)
        lines.append(f"    return {', '.join(self.returns)},")
        return "\n".join(lines)

    def reproducer(self) -> str:
        return f"{self.render(True)}\n# x = np.array({self.x!r})"


def _param(draw, loop_vars: list[str]) -> str:
    k = draw(st.integers(0, 2))
    c = draw(st.sampled_from([0.3, -0.7, 1.1, 0.45]))
    if loop_vars and draw(st.booleans()):
        return f"x[{k}] * ({loop_vars[-1]} + {c})"
    return f"x[{k}] * {c}" if draw(st.booleans()) else f"{c}"


@st.composite
def _block(draw, depth: int, loop_vars: list[str], values: list[str], counter: list[int]):
    """Statements of one scope. `values` are the measurement values visible here (a loop
    body's own measurements stay in it: they are local to the compiled body function)."""
    values = list(values)
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["gate", "gate", "measure", "cond", "loop"]))
        w = draw(st.integers(0, WIRES - 1))
        v = (w + draw(st.integers(1, WIRES - 1))) % WIRES
        if kind == "measure" or (kind == "cond" and not values):
            counter[0] += 1
            name = f"m{counter[0]}"
            post = draw(st.integers(0, 1))
            reset = draw(st.booleans())
            lines.append(f"{name} = qml.measure({w}, reset={reset}, postselect={post})")
            values.append(name)
        elif kind == "cond":
            a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
            pred = draw(st.sampled_from(PREDICATES)).format(a=a, b=b)
            gate, other = draw(st.sampled_from(COND_GATES)), draw(st.sampled_from(COND_GATES))
            p = _param(draw, loop_vars)
            if draw(st.booleans()):
                lines.append(f"qml.cond({pred}, {gate}, {other})({p}, {w})")
            else:
                lines.append(f"qml.cond({pred}, {gate})({p}, wires={w})")
        elif kind == "loop" and depth < 2:
            var = f"i{depth}"
            inner = draw(_block(depth + 1, [*loop_vars, var], values, counter))
            lines += [f"LOOP {draw(st.integers(1, 3))} {var}", *inner, "END"]
        elif draw(st.booleans()):
            lines.append(draw(st.sampled_from(ONE_WIRE)).format(p=_param(draw, loop_vars), w=w))
        else:
            gate = draw(st.sampled_from(TWO_WIRE))
            lines.append(gate.format(p=_param(draw, loop_vars), w=w, v=v))
    return lines


@st.composite
def mcm_programs(draw) -> McmProgram:
    counter = [0]
    body = ["qml.RY(x[0], 0)", "qml.RX(x[1], 1)", "qml.RY(x[2], 2)"]
    counter[0] = 1
    w, post, reset = draw(st.integers(0, WIRES - 1)), draw(st.integers(0, 1)), draw(st.booleans())
    body.append(f"m1 = qml.measure({w}, reset={reset}, postselect={post})")
    body += draw(_block(0, [], ["m1"], counter))
    # the measurement values visible at the end: those outside loops
    top = [line.split(" = ")[0] for line in body if line.startswith("m") and " = " in line]
    nested, depth = set(), 0
    for line in body:
        depth += line.startswith("LOOP ") - (line == "END")
        if depth and line.startswith("m") and " = " in line:
            nested.add(line.split(" = ")[0])
    top = [m for m in top if m not in nested]
    returns = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["expval", "probs", "var", "mcm"]))
        if kind == "mcm" and top:
            returns.append(f"qml.expval({draw(st.sampled_from(top))})")
        elif kind == "probs":
            wires = draw(st.permutations(list(range(WIRES))))[: draw(st.integers(1, WIRES))]
            returns.append(f"qml.probs(wires={list(wires)})")
        else:
            ws = draw(st.lists(st.integers(0, WIRES - 1), min_size=1, max_size=2, unique=True))
            word = " @ ".join(draw(st.sampled_from(PAULIS)).format(w=w) for w in ws)
            returns.append(f"qml.{'var' if kind == 'var' else 'expval'}({word})")
    x = draw(st.lists(st.sampled_from([0.3, -1.2, 0.8, 2.1, -0.4]), min_size=3, max_size=3))
    # PennyLane defers each executed measurement to a new wire: keep its state small
    assume(_executed_measurements(body) <= MAX_MEASUREMENTS)
    return McmProgram(body, returns, x)


def _executed_measurements(body: list[str]) -> int:
    total, repeats = 0, [1]
    for line in body:
        if line.startswith("LOOP "):
            repeats.append(repeats[-1] * int(line.split()[1]))
        elif line == "END":
            repeats.pop()
        elif "qml.measure(" in line:
            total += repeats[-1]
    return total


def _circuit(p: McmProgram, compiled: bool):
    ns = {"qml": qml, "cofactor": cofactor}
    exec(compile(p.render(compiled), "<fuzz mcm>", "exec"), ns)  # noqa: S102
    return ns["circuit"]


def check(p: McmProgram) -> None:
    x = np.array(p.x)
    reference = qml.QNode(_circuit(p, False), qml.device("default.qubit"))
    with np.errstate(all="ignore"):
        expected = reference(qml.numpy.array(x, requires_grad=False))
    flat = np.concatenate([np.ravel(np.asarray(e, dtype=float)) for e in expected])
    compiled = qml.QNode(_circuit(p, True), qml.device("lightning.qubit", wires=WIRES))
    if not np.all(np.isfinite(flat)):  # a postselected outcome of probability 0
        with pytest.raises(RuntimeExecutionError, match="probability 0"):
            cofactor.qjit(compiled)(x)
        assume(False)
    got = cofactor.qjit(compiled)(x)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e, dtype=float), atol=VALUE_TOL)

    # the gradient of the first result, weighted (a probs vector sums to 1)
    weights = np.arange(1.0, np.size(expected[0]) + 1.0)

    def first(v):
        return qml.math.sum(qml.math.ravel(reference(v)[0]) * weights)

    expected_grad = qml.grad(first)(qml.numpy.array(x, requires_grad=True))
    # a branch of tiny probability: the normalization amplifies the forward difference's error
    assume(np.max(np.abs(expected_grad)) < 50)

    @cofactor.qjit
    def gradient(x):
        return cofactor.grad(
            lambda v: np.sum(np.ravel(compiled(v)[0]) * weights), method="fd", h=1e-7
        )(x)

    np.testing.assert_allclose(gradient(x), expected_grad, atol=GRAD_TOL, rtol=GRAD_TOL)


@fuzz_settings(15)
@given(mcm_programs())
def test_postselected_mcm_programs_match_pennylane(p: McmProgram) -> None:
    note(p.reproducer())
    check(p)
