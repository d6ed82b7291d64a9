"""Random small hybrid programs for the property test in test_fuzz.py: the program tree
and its rendering (the hypothesis strategies that draw trees are in fuzz_strategies.py).

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

from dataclasses import dataclass, field

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
class ZFill:
    """`w = np.zeros(size)`, element and slice writes into it (`w[i] = s`, `w[i] += s`,
    `w[a:b] = v[a:b]`), then `z = w + 0.5 * z`. The plain version stacks each element's
    final expression (autograd cannot differentiate writes into arrays)."""

    writes: list  # the compiled statements, `w[...] ...`
    elements: list  # per element of w: its final value, an expression


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
    #: a second QNode (its wires, body and one expectation value), a term of cost
    circuit2: tuple[int, list, str] | None = None
    vmap: bool = False  # also cost vmapped over two inputs (cofactor.vmap)

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
        elif isinstance(ins, ZFill):
            if not c:
                self.emit(ind, f"z = np.stack([{', '.join(ins.elements)}]) + 0.5 * z")
                return
            self.emit(ind, f"w = np.zeros({len(ins.elements)})")
            for write in ins.writes:
                self.emit(ind, write)
            self.emit(ind, "z = w + 0.5 * z")
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


#: the inputs of the vmapped cost: x and a shifted copy
VMAP_BATCH = "np.stack([x, x * 0.5 + 0.1])"


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
    if p.circuit2 is not None:
        wires2, body2, measurement2 = p.circuit2
        w.emit(0, "")
        w.emit(0, f'dev2 = qml.device("default.qubit", wires={wires2})')
        w.emit(0, "")
        w.emit(0, f'@qml.qnode(dev2, diff_method="{method}")')
        w.emit(0, "def circuit2(z, x):")
        w.body(1, body2)
        w.emit(1, f"return {measurement2}")
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
        if p.circuit2 is not None:
            expr = f"{expr} + 0.3 * circuit2(np.cos(pre(x, y)), x)"
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
        if p.vmap:  # last: test_fuzz.compiled reads it from the end
            grads.append(f"cofactor.vmap(cost, in_axes=(0, None))({VMAP_BATCH}, y)")
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
