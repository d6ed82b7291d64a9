"""Random small hybrid programs for the property test in test_fuzz.py.

A program is a small tree (classical pre-processing, a circuit body, measurements, classical
post-processing) whose leaves are source-text expressions. `render` turns one tree into
Python source twice: once for cofactor (`cofactor.for_loop` / `while_loop` / `cond`, the
circuit's `diff_method` as drawn) and once for plain PennyLane (Python `for` / `while` /
`if` on concrete values, `diff_method="backprop"`). Expressions are the same text in both;
the plain version is executed with `np` bound to `pennylane.numpy` so that `qml.grad` can
differentiate it. A failing example is printed as the cofactor source: a runnable
reproducer.

Predicates compare the raw input `x` (or `x[j] * i` with an integer loop index, exactly
rounded) with constants drawn from a different grid, so both versions take the same branch
without ties.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hypothesis import strategies as st

# ----------------------------------------------------------------------------------------
# the program tree
# ----------------------------------------------------------------------------------------


@dataclass
class Gate:
    text: str  # one statement, the same in both versions


@dataclass
class For:
    var: str
    start: int
    stop: int
    step: int
    body: list
    api: str = "cofactor"  # or "qml": qml.for_loop in the compiled version
    carry: tuple[str, str, str] | None = None  # (name, initial value, update expression)


@dataclass
class While:
    var: str
    bound: int
    body: list
    extra: str | None = None  # a data-dependent condition, and-ed with `var < bound`


@dataclass
class Cond:
    branches: list  # [(predicate, body)], the first is the `if`, the others `elif`
    otherwise: list | None
    api: str = "cofactor"  # or "qml": qml.cond(pred, true_fn, false_fn, elifs)


@dataclass
class Block:
    kind: str  # "adjoint" or "ctrl"
    api: str  # "cofactor" or "qml"
    body: list
    control: int | None = None
    control_value: int | None = None


# classical statements on the vector `z` (before the circuit)
@dataclass
class ZAssign:
    expr: str


@dataclass
class ZFor:
    var: str
    count: int
    expr: str


@dataclass
class ZWhile:
    var: str
    count: int
    expr: str
    extra: str | None = None  # a condition on z, and-ed with `var < count`


@dataclass
class ZCond:
    pred: str
    then: str
    other: str


@dataclass
class Program:
    wires: int
    size: int  # length of the input vector x
    diff_method: str
    pre: list
    body: list
    measurements: list  # [(kind, text)]
    post: list  # scalar terms over r0, r1, ... and x
    vector: str | None  # an array-valued function of the results, for jacobian
    x: list = field(default_factory=list)
    split: bool = False  # values and gradients in two qjit functions instead of one
    second: str | None = None  # a term over a second call's results s0, s1, ... in cost
    y: float = 0.5  # a scalar second argument, used by the pre-processing
    argnums: int | tuple[int, ...] = 0  # what grad/jacobian differentiate: x (0), y (1)
    value_and_grad: bool = False  # cofactor.value_and_grad instead of grad

    @property
    def differentiable(self) -> bool:
        kinds = {k for k, _ in self.measurements}
        if kinds & {"var", "state"}:
            return False
        return not (self.diff_method == "adjoint" and kinds != {"expval"})


# ----------------------------------------------------------------------------------------
# rendering
# ----------------------------------------------------------------------------------------


class _Writer:
    def __init__(self, compiled: bool) -> None:
        self.compiled = compiled
        self.lines: list[str] = []
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def body(self, indent: int, instrs: list) -> None:
        if not instrs:
            self.emit(indent, "pass")
        for ins in instrs:
            self.instr(indent, ins)

    def instr(self, ind: int, ins) -> None:  # noqa: C901 (one branch per node type)
        c = self.compiled
        if isinstance(ins, Gate):
            self.emit(ind, ins.text)
        elif isinstance(ins, For):
            carry = ins.carry
            if not c:
                if carry:
                    self.emit(ind, f"{carry[0]} = {carry[1]}")
                self.emit(ind, f"for {ins.var} in range({ins.start}, {ins.stop}, {ins.step}):")
                self.body(ind + 1, ins.body)
                if carry:
                    self.emit(ind + 1, f"{carry[0]} = {carry[2]}")
                return
            fn = self.name("loop")
            api = "cofactor" if ins.api == "cofactor" else "qml"
            self.emit(ind, f"@{api}.for_loop({ins.start}, {ins.stop}, {ins.step})")
            args = f"{ins.var}, {carry[0]}" if carry else ins.var
            self.emit(ind, f"def {fn}({args}):")
            self.body(ind + 1, ins.body)
            if carry:
                self.emit(ind + 1, f"return {carry[2]}")
                self.emit(ind, f"{carry[0]} = {fn}({carry[1]})")
            else:
                self.emit(ind, f"{fn}()")
        elif isinstance(ins, While):
            test = f"{ins.var} < {ins.bound}"
            if not c:
                self.emit(ind, f"{ins.var} = 0")
                self.emit(ind, f"while {test}{f' and {ins.extra}' if ins.extra else ''}:")
                self.body(ind + 1, ins.body)
                self.emit(ind + 1, f"{ins.var} = {ins.var} + 1")
                return
            fn = self.name("wloop")
            if ins.extra:
                test = f"np.logical_and({test}, {ins.extra})"
            self.emit(ind, f"@cofactor.while_loop(lambda {ins.var}: {test})")
            self.emit(ind, f"def {fn}({ins.var}):")
            self.body(ind + 1, ins.body)
            self.emit(ind + 1, f"return {ins.var} + 1")
            self.emit(ind, f"{fn}(0)")
        elif isinstance(ins, Cond):
            if not c:
                for k, (pred, body) in enumerate(ins.branches):
                    self.emit(ind, f"{'if' if k == 0 else 'elif'} {pred}:")
                    self.body(ind + 1, body)
                if ins.otherwise is not None:
                    self.emit(ind, "else:")
                    self.body(ind + 1, ins.otherwise)
                return
            fn = self.name("branch")
            if ins.api == "qml":
                fns = []
                for k, (_, body) in enumerate(ins.branches):
                    fns.append(f"{fn}_{k}")
                    self.emit(ind, f"def {fn}_{k}():")
                    self.body(ind + 1, body)
                other = "None"
                if ins.otherwise is not None:
                    other = f"{fn}_else"
                    self.emit(ind, f"def {other}():")
                    self.body(ind + 1, ins.otherwise)
                elifs = "".join(
                    f"({pred}, {f}), "
                    for (pred, _), f in zip(ins.branches[1:], fns[1:], strict=True)
                )
                tail = f", elifs=({elifs})" if elifs else ""
                self.emit(ind, f"qml.cond({ins.branches[0][0]}, {fns[0]}, {other}{tail})()")
                return
            for k, (pred, body) in enumerate(ins.branches):
                deco = f"cofactor.cond({pred})" if k == 0 else f"{fn}.else_if({pred})"
                self.emit(ind, f"@{deco}")
                self.emit(ind, f"def {fn if k == 0 else '_'}():")
                self.body(ind + 1, body)
            if ins.otherwise is not None:
                self.emit(ind, f"@{fn}.otherwise")
                self.emit(ind, "def _():")
                self.body(ind + 1, ins.otherwise)
            self.emit(ind, f"{fn}()")
        elif isinstance(ins, Block):
            fn = self.name("block")
            self.emit(ind, f"def {fn}():")
            self.body(ind + 1, ins.body)
            api = "cofactor" if (c and ins.api == "cofactor") else "qml"
            if ins.kind == "adjoint":
                self.emit(ind, f"{api}.adjoint({fn})()")
            else:
                self.emit(
                    ind,
                    f"{api}.ctrl({fn}, control={ins.control}, "
                    f"control_values={ins.control_value})()",
                )
        elif isinstance(ins, ZAssign):
            self.emit(ind, f"z = {ins.expr}")
        elif isinstance(ins, ZFor):
            if not c:
                self.emit(ind, f"for {ins.var} in range({ins.count}):")
                self.emit(ind + 1, f"z = {ins.expr}")
                return
            fn = self.name("zloop")
            self.emit(ind, f"@cofactor.for_loop(0, {ins.count}, 1)")
            self.emit(ind, f"def {fn}({ins.var}, z):")
            self.emit(ind + 1, f"return {ins.expr}")
            self.emit(ind, f"z = {fn}(z)")
        elif isinstance(ins, ZWhile):
            v = ins.var
            test = f"{v} < {ins.count}"
            if not c:
                self.emit(ind, f"{v} = 0")
                self.emit(ind, f"while {test}{f' and {ins.extra}' if ins.extra else ''}:")
                self.emit(ind + 1, f"z = {ins.expr}")
                self.emit(ind + 1, f"{v} = {v} + 1")
                return
            fn = self.name("zwhile")
            if ins.extra:
                test = f"np.logical_and({test}, {ins.extra})"
            self.emit(ind, f"@cofactor.while_loop(lambda {v}, z: {test})")
            self.emit(ind, f"def {fn}({v}, z):")
            self.emit(ind + 1, f"return {v} + 1, {ins.expr}")
            self.emit(ind, f"_, z = {fn}(0, z)")
        elif isinstance(ins, ZCond):
            if not c:
                self.emit(ind, f"z = ({ins.then}) if {ins.pred} else ({ins.other})")
                return
            fn = self.name("zbranch")
            self.emit(ind, f"@cofactor.cond({ins.pred})")
            self.emit(ind, f"def {fn}():")
            self.emit(ind + 1, f"return {ins.then}")
            self.emit(ind, f"@{fn}.otherwise")
            self.emit(ind, "def _():")
            self.emit(ind + 1, f"return {ins.other}")
            self.emit(ind, f"z = {fn}()")
        else:  # pragma: no cover
            raise TypeError(ins)


def render(p: Program, compiled: bool) -> str:
    """Python source defining pre(x, y), circuit(z, x), cost(x, y), [vector(x, y)] and
    workflow(x, y)."""
    w = _Writer(compiled)
    w.emit(0, "def pre(x, y):")
    w.emit(1, "z = x")
    w.body(1, p.pre)
    w.emit(1, "return z")
    w.emit(0, "")
    w.emit(0, f'dev = qml.device("default.qubit", wires={p.wires})')
    method = p.diff_method if compiled else "backprop"
    w.emit(0, "")
    w.emit(0, f'@qml.qnode(dev, diff_method="{method}")')
    w.emit(0, "def circuit(z, x):")
    w.body(1, p.body)
    w.emit(1, f"return {', '.join(text for _, text in p.measurements)}")
    names = ", ".join(f"r{k}" for k in range(len(p.measurements)))
    for fn, expr in (("cost", " + ".join(p.post)), ("vector", p.vector)):
        if expr is None:
            continue
        w.emit(0, "")
        w.emit(0, f"def {fn}(x, y):")
        w.emit(1, f"{names} = circuit(pre(x, y), x)")
        if fn == "cost" and p.second is not None:
            # the same QNode called twice, with other arguments
            w.emit(1, f"{names.replace('r', 's')} = circuit(np.sin(pre(x, y)), x * 0.5)")
            expr = f"{expr} + 0.5 * ({p.second})"
        w.emit(1, f"return {expr}")
    if compiled:
        values = ["cost(x, y)", "circuit(pre(x, y), x)"]
        grads = []
        argnums = "" if p.argnums == 0 else f", argnums={p.argnums}"
        if p.differentiable:
            transform = "value_and_grad" if p.value_and_grad else "grad"
            grads.append(f"cofactor.{transform}(cost{argnums})(x, y)")
            if p.vector is not None:
                grads.append(f"cofactor.jacobian(vector{argnums})(x, y)")
        groups = [("workflow", values + grads)]
        if p.split and grads:
            groups = [("values", values), ("gradients", grads)]
        for name, outs in groups:
            w.emit(0, "")
            w.emit(0, "@cofactor.qjit")
            w.emit(0, f"def {name}(x, y):")
            w.emit(1, f"return {', '.join(outs)}{',' * (len(outs) == 1)}")
        if len(groups) > 1:
            w.emit(0, "")
            w.emit(0, "def workflow(x, y):")
            w.emit(1, "return values(x, y) + gradients(x, y)")
    return "\n".join(w.lines) + "\n"


def reproducer(p: Program) -> str:
    """The cofactor version as a runnable script, with the input it failed on."""
    return (
        "import numpy as np\nimport pennylane as qml\nimport cofactor\n\n"
        + render(p, compiled=True)
        + f"\nprint(workflow(np.array({p.x!r}), {p.y!r}))\n"
    )


# ----------------------------------------------------------------------------------------
# strategies
# ----------------------------------------------------------------------------------------

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
def measurement(draw, wires: int, kinds: list[str], identity_terms: bool = True):
    kind = draw(st.sampled_from(kinds))
    if kind == "expval":
        return kind, f"qml.expval({draw(pauli_word(wires))})"
    if kind in ("hamiltonian", "var_hamiltonian"):
        terms = [
            f"{draw(_COEF)} * ({draw(pauli_word(wires))})" for _ in range(draw(st.integers(1, 3)))
        ]
        if identity_terms and draw(st.integers(0, 3)) == 0:
            terms.append(f"{draw(_COEF)} * qml.Identity({draw(st.integers(0, wires - 1))})")
        if kind == "var_hamiltonian":
            return "var", f"qml.var({' + '.join(terms)})"
        return "expval", f"qml.expval({' + '.join(terms)})"
    if kind == "probs":
        ws = sorted(draw(st.permutations(range(wires)))[: draw(st.integers(1, wires))])
        return kind, f"qml.probs(wires={ws})"
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
        kinds = ["expval", "hamiltonian"]
    elif grad_only:
        kinds = ["expval", "hamiltonian", "probs"]
    else:
        kinds = ["expval", "hamiltonian", "probs", "var", "var_hamiltonian", "state"]
    pre = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.integers(0, 5))
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
        else:
            pre.append(
                ZCond(draw(predicate(size, ())), draw(vector_expr(size)), draw(vector_expr(size)))
            )
    body = draw(instructions(size, tuple(range(wires)), block_cf=block_control_flow))
    ms = [draw(measurement(wires, kinds, identity_terms)) for _ in range(draw(st.integers(1, 3)))]
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
    return Program(
        wires, size, diff_method, pre, body, ms, post, vector, x, split, second, y, argnums, vag
    )
