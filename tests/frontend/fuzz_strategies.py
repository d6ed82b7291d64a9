"""Hypothesis strategies that draw the program trees of fuzz_programs.py."""

from __future__ import annotations

import re

from fuzz_programs import (
    Block,
    Cond,
    For,
    Gate,
    Program,
    While,
    ZAssign,
    ZCond,
    ZFill,
    ZFor,
    ZWhile,
)
from hypothesis import strategies as st

# x is drawn on a grid of odd multiples of 0.005, predicate constants on multiples of 0.01,
# so `x[j] > c` never ties; `x[j] * i > c` (i a loop index) is one correctly rounded product
# and one comparison, computed identically by both versions.
_X = st.integers(-300, 300).map(lambda k: round(k * 0.01 + 0.005, 3))
_C = st.integers(-150, 150).map(lambda k: round(k * 0.01, 2))
_COEF = st.integers(-20, 20).map(lambda k: round(k * 0.1 + 0.05, 2))

_UNARY = [
    "np.sin({})",
    "np.cos({})",
    "np.tanh({})",
    "np.exp(0.3 * {})",
    "np.sqrt({0} * {0} + 0.5)",
    "-({})",
    "({}) ** 2",
    "np.arctan({})",
    "np.log({0} * {0} + 1.0)",
    "np.cosh(0.5 * {})",
]
_BINARY = ["({} + {})", "({} - {})", "({} * {})"]


@st.composite
def scalar_expr(draw, size: int, scope: tuple[str, ...], carries: tuple[str, ...], depth: int = 2):
    """A real scalar expression over z, x, loop indices (`scope`) and loop carries."""
    leaves = [
        st.integers(0, size - 1).map(lambda k: f"z[{k}]"),
        st.integers(0, size - 1).map(lambda k: f"x[{k}]"),
        st.integers(-size, -1).map(lambda k: f"z[{k}]"),
        _COEF.map(str),
        st.just("np.dot(z, x)"),
        st.just("np.sum(z)"),
        st.just("np.prod(z)"),
        st.just("np.mean(z * x)"),
    ]
    for v in scope:
        leaves.append(_COEF.map(lambda c, v=v: f"({v} * {c})"))
        # traced integer index: positive (mod) and negative (wraps as in numpy)
        leaves.append(st.integers(0, size - 1).map(lambda k, v=v: f"z[({v} + {k}) % {size}]"))
        leaves.append(st.just(f"z[{v} % {size} - {size}]"))
    for a in carries:
        leaves.append(st.just(a))
    if depth == 0:
        return draw(st.one_of(leaves))
    kind = draw(st.integers(0, 4))
    if kind <= 1:
        return draw(st.one_of(leaves))
    if kind <= 3:
        inner = draw(scalar_expr(size, scope, carries, depth - 1))
        return draw(st.sampled_from(_UNARY)).format(inner)
    a = draw(scalar_expr(size, scope, carries, depth - 1))
    b = draw(scalar_expr(size, scope, carries, depth - 1))
    return draw(st.sampled_from(_BINARY)).format(a, b)


@st.composite
def vector_expr(draw, size: int, var: str | None = None):
    """An expression of the same shape as z (over z, x and the loop index `var`)."""
    coefs = st.lists(_COEF, min_size=size, max_size=size).map(lambda c: f"np.array({c})")
    matrix = st.lists(
        st.lists(_COEF, min_size=size, max_size=size), min_size=size, max_size=size
    ).map(lambda m: f"np.dot(np.array({m}), z) * 0.3")
    options = [
        st.just("np.sin(z)"),
        st.just("np.cos(z) * x"),
        st.just("np.tanh(z) * 1.3 + x"),
        st.just("np.exp(0.2 * z)"),
        st.just("np.sqrt(z * z + 1.0)"),
        st.just("z[::-1] - 0.5 * z"),
        st.just("z + 0.1 * np.sum(z * x)"),
        coefs.map(lambda c: f"z * {c}"),
        matrix,
        st.just("z * y"),
        st.just("z + np.sin(y) * x"),
    ]
    if var is not None:
        options.append(st.just(f"z * 0.8 + np.sin(x * {var})"))
        options.append(st.just(f"z + 0.2 * z[{var} % {size}]"))
    return draw(st.one_of(options))


def predicate(size: int, scope: tuple[str, ...]):
    ops = st.sampled_from([">", "<"])
    plain = st.tuples(st.integers(0, size - 1), ops, _C).map(lambda t: f"x[{t[0]}] {t[1]} {t[2]}")
    if not scope:
        return plain
    looped = st.tuples(st.integers(0, size - 1), st.sampled_from(scope), ops, _C).map(
        lambda t: f"x[{t[0]}] * {t[1]} {t[2]} {t[3]}"
    )
    return st.one_of(plain, looped)


# (name, number of parameters, number of wires)
GATES = [
    ("Hadamard", 0, 1),
    ("PauliX", 0, 1),
    ("PauliY", 0, 1),
    ("S", 0, 1),
    ("T", 0, 1),
    ("SX", 0, 1),
    ("RX", 1, 1),
    ("RY", 1, 1),
    ("RZ", 1, 1),
    ("PhaseShift", 1, 1),
    ("Rot", 3, 1),
    ("U2", 2, 1),
    ("U3", 3, 1),
    ("CNOT", 0, 2),
    ("CZ", 0, 2),
    ("CY", 0, 2),
    ("SWAP", 0, 2),
    ("ISWAP", 0, 2),
    ("CRX", 1, 2),
    ("CRY", 1, 2),
    ("CRZ", 1, 2),
    ("CRot", 3, 2),
    ("ControlledPhaseShift", 1, 2),
    ("IsingXX", 1, 2),
    ("IsingYY", 1, 2),
    ("IsingZZ", 1, 2),
    ("IsingXY", 1, 2),
    ("SingleExcitation", 1, 2),
    ("MultiRZ", 1, 2),
    ("Toffoli", 0, 3),
    ("CSWAP", 0, 3),
    ("PSWAP", 1, 2),  # not native: decomposed
    ("CCZ", 0, 3),  # not native: decomposed
    ("MultiRZ", 1, 3),
    ("DoubleExcitation", 1, 4),
    ("GlobalPhase", 1, 1),
    ("PauliRot", 1, 2),  # with a Pauli word argument
    ("QubitUnitary", 0, 1),  # with a constant matrix
    ("QubitUnitary", 0, 2),
]


# constant unitaries for QubitUnitary, written out with full precision
def _unitary_literal(nwires: int) -> str:
    import numpy as np
    import pennylane as qml

    if nwires == 1:
        m = qml.matrix(qml.Rot(0.3, -1.1, 0.7, wires=0))
    else:
        m = qml.matrix(qml.CRot(0.3, -1.1, 0.7, wires=[0, 1]) @ qml.IsingXY(0.4, wires=[0, 1]))
    rows = ", ".join("[" + ", ".join(repr(complex(v)) for v in row) + "]" for row in np.asarray(m))
    return f"np.array([{rows}])"


@st.composite
def gate(draw, size: int, wires: tuple[int, ...], scope, carries):
    choices = [g for g in GATES if g[2] <= len(wires)]
    name, nparams, nwires = draw(st.sampled_from(choices))
    ws = draw(st.permutations(wires))[:nwires]
    params = [draw(scalar_expr(size, scope, carries)) for _ in range(nparams)]
    if name == "PauliRot":
        params.append(repr(draw(st.sampled_from(["XY", "ZZ", "YX", "XZ"]))))
    if name == "QubitUnitary":
        params.append(_unitary_literal(nwires))
    free = [w for w in wires if w not in ws]
    if draw(st.integers(0, 7)) == 0 and nparams and free and name != "GlobalPhase":
        # a controlled parametrised gate through qml.ctrl, with control values
        ctl = free[: draw(st.integers(1, len(free)))]
        values = [draw(st.integers(0, 1)) for _ in ctl]
        if len(ctl) == 1:
            ctl, values = ctl[0], values[0]
        wire_arg = ws[0] if nwires == 1 else list(ws)
        return Gate(
            f"qml.ctrl(qml.{name}, control={ctl}, control_values={values})"
            f"({', '.join(params)}, wires={wire_arg})"
        )
    if draw(st.integers(0, 7)) == 0 and nparams:
        # the adjoint of one gate, as a function or as an instance
        wire_arg = ws[0] if nwires == 1 else list(ws)
        args = ", ".join([*params, f"wires={wire_arg}"])
        if draw(st.booleans()):
            return Gate(f"qml.adjoint(qml.{name})({args})")
        return Gate(f"qml.adjoint(qml.{name}({args}))")
    wire_arg = ws[0] if nwires == 1 else list(ws)
    n = len(wires)
    if scope and nwires <= 2 and wires == tuple(range(n)) and draw(st.integers(0, 3)) == 0:
        # traced wires from a loop index: (i + k) % n, (i + k + 1) % n are distinct
        v, k = draw(st.sampled_from(scope)), draw(st.integers(0, n - 1))
        traced = [f"({v} + {k + d}) % {n}" for d in range(nwires)]
        wire_arg = traced[0] if nwires == 1 else f"[{', '.join(traced)}]"
    args = ", ".join([*params, f"wires={wire_arg}"])
    return Gate(f"qml.{name}({args})")


@st.composite
def instructions(
    draw, size, wires, scope=(), carries=(), depth=0, max_len=4, block_cf=True, cf=True
):
    """A circuit body. `cf=False`: gates only; `block_cf=False`: no control flow inside
    adjoint/ctrl blocks."""
    n = draw(st.integers(1 if depth else 2, max_len))
    out = []
    for _ in range(n):
        kind = draw(st.integers(0, 11)) if depth < 2 and cf else 0
        if kind <= 5:
            out.append(draw(gate(size, wires, scope, carries)))
            continue
        var = f"i{depth + 1}"
        inner = dict(size=size, depth=depth + 1, max_len=2, block_cf=block_cf)
        if kind in (6, 7):
            start = draw(st.integers(0, 2))
            stop = start + draw(st.integers(0, 3))
            step = 1
            if draw(st.booleans()):
                start, stop, step = stop, start, -1
            carry = None
            body_carries = carries
            if draw(st.booleans()):
                name = f"a{depth + 1}"
                init = draw(scalar_expr(size, scope, carries, depth=1))
                upd = f"{name} * 0.7 + " + draw(scalar_expr(size, (*scope, var), carries, 1))
                carry = (name, init, upd)
                body_carries = (*carries, name)
            body = draw(
                instructions(wires=wires, scope=(*scope, var), carries=body_carries, **inner)
            )
            api = draw(st.sampled_from(["cofactor", "qml"]))
            out.append(For(var, start, stop, step, body, api, carry))
        elif kind == 8:
            bound = draw(st.integers(0, 3))
            body = draw(instructions(wires=wires, scope=(*scope, var), carries=carries, **inner))
            extra = None
            if draw(st.booleans()):  # a trip count that depends on x
                j, op, c = draw(st.integers(0, size - 1)), draw(st.sampled_from("<>")), draw(_C)
                extra = f"x[{j}] * {var} {op} {c}"
            out.append(While(var, bound + 2 * (extra is not None), body, extra))
        elif kind in (9, 10):
            nb = draw(st.integers(1, 2))
            branches = [
                (
                    draw(predicate(size, scope)),
                    draw(instructions(wires=wires, scope=scope, carries=carries, **inner)),
                )
                for _ in range(nb)
            ]
            other = None
            if draw(st.booleans()):
                other = draw(instructions(wires=wires, scope=scope, carries=carries, **inner))
            api = draw(st.sampled_from(["cofactor", "qml"]))
            out.append(Cond(branches, other, api))
        else:
            api = draw(st.sampled_from(["cofactor", "qml"]))
            inner["cf"] = block_cf
            if len(wires) > 1 and draw(st.booleans()):
                ctl = draw(st.sampled_from(wires))
                rest = tuple(w for w in wires if w != ctl)
                body = draw(instructions(wires=rest, scope=scope, carries=carries, **inner))
                value = draw(st.integers(0, 1))
                out.append(Block("ctrl", api, body, ctl, value))
            else:
                body = draw(instructions(wires=wires, scope=scope, carries=carries, **inner))
                out.append(Block("adjoint", api, body))
    return out


_PAULI = ["qml.PauliX({})", "qml.PauliY({})", "qml.PauliZ({})"]


_HERMITIAN = st.tuples(_COEF, _COEF, _COEF, _COEF).map(
    lambda m: (
        f"qml.Hermitian(np.array([[{m[0]}, {m[1]} + {m[2]}j], [{m[1]} - {m[2]}j, {m[3]}]]), "
        "wires={})"
    )
)


@st.composite
def pauli_word(draw, wires: int):
    """A product of Paulis on distinct wires; now and then a Hadamard or Hermitian factor."""
    ws = draw(st.permutations(range(wires)))[: draw(st.integers(1, min(wires, 2)))]
    factors = []
    for w in sorted(ws):
        k = draw(st.integers(0, 9))
        fmt = draw(st.sampled_from(_PAULI)) if k < 8 else "qml.Hadamard({})"
        factors.append((draw(_HERMITIAN) if k == 9 else fmt).format(w))
    return " @ ".join(factors)


@st.composite
def measurement(draw, wires: int, kinds: list[str], identity_terms: bool = True, size: int = 2):
    kind = draw(st.sampled_from(kinds))
    if kind == "expval":
        return kind, f"qml.expval({draw(pauli_word(wires))})"
    if kind == "hamiltonian_traced":  # coefficients computed from the QNode's inputs
        n = draw(st.integers(1, 3))
        coeffs = [draw(scalar_expr(size, (), (), depth=1)) for _ in range(n)]
        ops = [draw(pauli_word(wires)) for _ in range(n)]
        return "expval", f"qml.expval(qml.Hamiltonian([{', '.join(coeffs)}], [{', '.join(ops)}]))"
    if kind in ("hamiltonian", "var_hamiltonian"):
        terms = [
            f"{draw(_COEF)} * ({draw(pauli_word(wires))})" for _ in range(draw(st.integers(1, 3)))
        ]
        if identity_terms and draw(st.integers(0, 3)) == 0:
            terms.append(f"{draw(_COEF)} * qml.Identity({draw(st.integers(0, wires - 1))})")
        if kind == "var_hamiltonian":
            return "var", f"qml.var({' + '.join(terms)})"
        return "expval", f"qml.expval({' + '.join(terms)})"
    if kind == "probs":  # wires in any order (the result's axes follow it)
        ws = draw(st.permutations(range(wires)))[: draw(st.integers(1, wires))]
        return kind, f"qml.probs(wires={ws})"
    if kind == "probs_op":  # in the observable's eigenbasis, next to the other measurements
        return "probs", f"qml.probs(op={draw(pauli_word(wires))})"
    if kind == "density":
        ws = draw(st.permutations(range(wires)))[: draw(st.integers(1, wires))]
        return "state", f"qml.density_matrix(wires={ws})"
    if kind == "var":
        return kind, f"qml.var({draw(pauli_word(wires))})"
    return kind, "qml.state()"


def _post_term(draw, k: int, kind: str, size: int) -> str:
    r = f"r{k}"
    if kind == "expval":
        return draw(
            st.sampled_from(
                [
                    r,
                    f"np.sin({r})",
                    f"{r} * x[0]",
                    f"np.exp({r})",
                    f"{r} * {r}",
                    f"np.tanh({r})",
                    f"{r} * y",
                ]
            )
        )
    if kind == "probs":
        return draw(
            st.sampled_from(
                [f"{r}[0]", f"np.sum({r} * np.arange({r}.shape[0]))", f"np.sqrt({r}[-1] + 0.1)"]
            )
        )
    if kind == "var":
        return draw(st.sampled_from([r, f"np.sqrt({r} + 0.5)"]))
    return f"np.sum(np.abs({r}) ** 2 * np.arange({r}.shape[0]))"


@st.composite
def programs(
    draw,
    block_control_flow: bool = True,
    unsorted_argnums: bool = True,
    identity_terms: bool = True,
) -> Program:
    """A random program; `block_control_flow=False` keeps loops and branches out of
    adjoint/ctrl blocks (fuzz-findings F2), `unsorted_argnums=False` draws no
    `argnums=(1, 0)` (F3), `identity_terms=False` no Identity term in Hamiltonians (F4)."""
    wires = draw(st.integers(1, 4))
    size = draw(st.integers(2, 4))
    diff_method = draw(st.sampled_from(["adjoint", "parameter-shift", "best"]))
    grad_only = draw(st.integers(0, 2)) > 0  # mostly differentiable programs
    if grad_only and diff_method == "adjoint":
        kinds = ["expval", "hamiltonian", "hamiltonian_traced"]
    elif grad_only:
        kinds = ["expval", "hamiltonian", "hamiltonian_traced", "probs", "probs_op"]
    else:
        kinds = ["expval", "hamiltonian", "hamiltonian_traced", "probs", "probs_op", "var"]
        kinds += ["var_hamiltonian", "state", "density"]
    pre = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.integers(0, 6))
        if kind <= 2:
            pre.append(ZAssign(draw(vector_expr(size))))
        elif kind == 3:
            pre.append(ZFor("j", draw(st.integers(0, 3)), draw(vector_expr(size, "j"))))
        elif kind == 4:
            extra = None
            if draw(st.booleans()):  # stops when z crosses a threshold (z is rarely near it)
                extra = (
                    f"z[{draw(st.integers(0, size - 1))}] {draw(st.sampled_from('<>'))} {draw(_C)}"
                )
            count = draw(st.integers(0, 3)) + 3 * (extra is not None)
            pre.append(ZWhile("j", count, draw(vector_expr(size, "j")), extra))
        elif kind == 5:
            pre.append(
                ZCond(draw(predicate(size, ())), draw(vector_expr(size)), draw(vector_expr(size)))
            )
        else:
            pre.append(draw(fill(size)))
    body = draw(instructions(size, tuple(range(wires)), block_cf=block_control_flow))
    ms = [
        draw(measurement(wires, kinds, identity_terms, size))
        for _ in range(draw(st.integers(1, 3)))
    ]
    post = [_post_term(draw, k, kind, size) for k, (kind, _) in enumerate(ms)]
    vector = None
    probs = [k for k, (kind, _) in enumerate(ms) if kind == "probs"]
    want_vector = draw(st.integers(0, 2)) > 0
    if probs and want_vector:
        vector = f"np.sin(r{probs[0]}) * x[-1] + np.cos(x[0])"
    elif len(post) > 1 and want_vector:
        vector = f"np.array([{', '.join(post)}])"
    x = draw(st.lists(_X, min_size=size, max_size=size))
    split = draw(st.booleans())
    second = re.sub(r"\br(\d)", r"s\1", post[0]) if draw(st.integers(0, 3)) == 3 else None
    y = draw(_X)
    argnums = draw(st.sampled_from([0, 0, 1, (0, 1), (1, 0)][: 5 if unsorted_argnums else 4]))
    vag = draw(st.booleans())
    circuit2 = None
    if draw(st.integers(0, 3)) == 0:  # a second QNode, on its own device
        wires2 = draw(st.integers(1, 3))
        body2 = draw(
            instructions(size, tuple(range(wires2)), max_len=3, block_cf=block_control_flow)
        )
        m2 = draw(measurement(wires2, ["expval", "hamiltonian_traced"], identity_terms, size))[1]
        circuit2 = (wires2, body2, m2)
    vmap = draw(st.integers(0, 3)) == 0
    return Program(
        wires, size, diff_method, pre, body, ms, post, vector, x, split, second, y, argnums, vag,
        circuit2, vmap,
    )  # fmt: skip


@st.composite
def fill(draw, size: int) -> ZFill:
    """Writes into `w = np.zeros(size)` (numpy arrays made in the program, A9)."""
    writes: list[str] = []
    elements = ["(0.0 * x[0])"] * size
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 2))
        if kind == 2 and size > 1:
            a = draw(st.integers(0, size - 2))
            b = draw(st.integers(a + 1, size))
            v = draw(vector_expr(size))
            writes.append(f"w[{a}:{b}] = ({v})[{a}:{b}]")
            for i in range(a, b):
                elements[i] = f"({v})[{i}]"
            continue
        i = draw(st.integers(-size, size - 1))
        expr = draw(scalar_expr(size, (), (), depth=1))
        if kind == 0:
            writes.append(f"w[{i}] = {expr}")
            elements[i] = f"({expr})"
        else:
            writes.append(f"w[{i}] += {expr}")
            elements[i] = f"({elements[i]} + {expr})"
    return ZFill(writes, elements)
