"""Random classical numpy array programs for the property test in test_fuzz_arrays.py.

A program takes one to three array arguments of small random shapes (0-d to 3-d, size-1
dimensions included, some over the 16 elements above which cofactor keeps an array in
memory and emits loop nests) and is a list of assignments `tK = <expr>` over the
arguments and earlier results, ending in `return`. Each expression applies one numpy
operation: an elementwise ufunc, arithmetic with broadcasting, a reduction, a contraction
(dot, matmul, outer, einsum), a rearrangement (reshape, transpose, swapaxes, squeeze),
slicing and indexing, where, concatenate/stack, a constructor or a cast.

Every statement is evaluated by numpy on the concrete arguments while it is drawn: a
statement numpy rejects (shapes that do not broadcast, an axis out of range), warns about,
or whose values are not finite or exceed `MAGNITUDE` is not kept, so every program is
valid numpy with tame values, and the operations can be drawn blindly (any axis, any
operand pair) and left for numpy to judge. The same source text runs under cofactor
(`np` is numpy, the arguments are traced) and under autograd (`np` is pennylane.numpy)
for the reference gradients.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pennylane as qml
from hypothesis import strategies as st

#: values above this are not kept (exp of a product, prod of many numbers)
MAGNITUDE = 1e3
#: the dimension lengths an argument's shape is drawn from (with 1 for broadcasting)
DIMS = (1, 2, 3, 4, 5)


@dataclass
class ArrayProgram:
    args: list[np.ndarray]
    #: (name, expression) for `name = expression`; (None, statement) for an update in place
    body: list[tuple[str | None, str]] = field(default_factory=list)
    returns: list[str] = field(default_factory=list)
    circuit: bool = False  # the last result is fed to a QNode: `return circuit(...)`
    value_and_grad: bool = False  # the gradient check uses cofactor.value_and_grad
    rejected: bool = False  # numpy raises on the last statement: so must the compiled one

    @property
    def names(self) -> list[str]:
        return [f"a{k}" for k in range(len(self.args))]

    def source(self) -> str:
        lines = [CIRCUIT] if self.circuit else []
        if any("fori(" in expr for _, expr in self.body):
            lines.append(FORI)
        lines.append(f"def f({', '.join(self.names)}):")
        lines += [
            f"    {expr}" if name is None else f"    {name} = {expr}" for name, expr in self.body
        ]
        lines.append(f"    return {', '.join(self.returns)}")
        return "\n".join(lines) + "\n"

    def float_args(self) -> tuple[int, ...]:
        return tuple(k for k, a in enumerate(self.args) if a.dtype.kind == "f")

    def arg_literals(self) -> str:
        parts = []
        for a in self.args:
            if a.ndim == 0:
                parts.append(f"np.array({a.item()!r})")
            else:
                parts.append(f"np.array({a.tolist()!r}, dtype=np.{a.dtype.name})")
        return ", ".join(parts)

    def reproducer(self) -> str:
        return (
            "import numpy as np\nimport pennylane as qml\nimport cofactor\n\nCOMPILED = True\n\n"
            + self.source()
            + f"\nargs = ({self.arg_literals()},)\n"
            + "print(cofactor.qjit(f)(*args))\nprint(f(*args))\n"
        )


#: the QNode a program's last result may be fed to (its first and last elements as angles)
CIRCUIT = """dev = qml.device("default.qubit", wires=2)


@qml.qnode(dev)
def circuit(w):
    qml.RX(w[0], wires=0)
    qml.RY(w[-1], wires=1)
    qml.CNOT(wires=[0, 1])
    qml.RZ(w[0] * w[-1], wires=1)
    qml.RX(0.3, wires=1)
    return qml.expval(qml.PauliZ(0) @ qml.PauliY(1))

"""


#: a loop over an array carry: cofactor.for_loop when compiled, a Python loop otherwise
FORI = """def fori(lo, hi, body, init):
    if globals().get("COMPILED", False):
        return cofactor.for_loop(lo, hi, 1)(body)(init)
    for i in range(lo, hi):
        init = body(i, init)
    return init

"""
_NUMPY = {"np": np}
exec(FORI, _NUMPY)  # noqa: S102


def numpy_rejects(env: dict, expr: str) -> bool:
    """Whether numpy raises an error (a bad axis, shapes that do not broadcast, an index out
    of range, ...) on `expr`, warnings aside."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            eval(expr, {**_NUMPY, **env})  # noqa: S307
        except (ValueError, TypeError, IndexError):
            return True
        except Exception:  # noqa: BLE001 (another kind of failure: not drawn)
            return False
    return False


def evaluate(env: dict, expr: str, statement: str | None = None):
    """numpy's value of `expr` in `env` (after running `statement`, an update in place of an
    array in `env`), or None if numpy raises or warns."""
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        try:
            scope = {**_NUMPY, **env}  # globals: a lambda in expr sees the names too
            if statement is not None:
                exec(statement, scope)  # noqa: S102
            value = eval(expr, scope)  # noqa: S307 (our own generated text)
        except Exception:
            return None
    if not isinstance(value, np.ndarray | np.generic):
        return None  # a tuple, or a Python number (`x.item()`: a traced value is an array)
    value = np.asarray(value)
    if value.dtype.kind not in "biuf" or value.ndim > 4 or value.size > 400:
        return None
    if value.dtype.kind == "f" and not (
        np.all(np.isfinite(value)) and np.all(np.abs(value) <= MAGNITUDE)
    ):
        return None
    if value.dtype.kind in "iu" and np.any(np.abs(value) > 10**6):
        return None
    return value


# ----------------------------------------------------------------------------------------
# expression templates
# ----------------------------------------------------------------------------------------

_CONST = st.sampled_from(["0.5", "2.0", "-1.5", "3", "0.25", "-2", "1.0", "np.pi"])
_UNARY = [
    "np.sin({0})",
    "np.cos({0})",
    "np.tanh({0})",
    "np.exp({0})",
    "np.exp(-{0})",
    "np.sqrt({0})",
    "np.sqrt({0} * {0} + 0.5)",
    "np.log({0})",
    "np.log(np.abs({0}) + 1.0)",
    "np.abs({0})",
    "-{0}",
    "{0} ** 2",
    "{0} ** 3",
    "np.power({0}, 2)",
    "np.power(np.abs({0}) + 0.5, 1.5)",
    "np.square({0})",
    "np.arctan({0})",
    "np.sinh({0})",
    "np.negative({0})",
    "+{0}",
    "np.positive({0})",
    "np.sign({0}) * {0}",
    "np.floor({0})",
    "np.clip({0}, -0.5, 0.7)",
    "np.cumsum({0})",
]
_BINARY = [
    "{0} + {1}",
    "{0} - {1}",
    "{0} * {1}",
    "{0} / {1}",
    "{0} / ({1} * {1} + 1.0)",
    "np.maximum({0}, {1})",
    "np.minimum({0}, {1})",
    "np.add({0}, {1})",
    "np.multiply({0}, {1})",
    "np.subtract({0}, {1})",
    "np.power(np.abs({0}) + 0.5, {1})",
    "({0} > {1}) * {0}",
    "np.where({0} > {1}, {0}, {1})",
    "np.where({0} > 0.1, {1}, 0.5)",
    "np.where({0} < {1}, {0} * {1}, -{1})",
    "np.arctan2({0}, {1} * {1} + 1.0)",
    "np.hypot({0}, {1})",
]
_REDUCE = ["np.sum", "np.mean", "np.prod", "np.max", "np.min", "np.amax", "np.amin"]
_METHOD_REDUCE = ["sum", "mean", "prod", "max", "min"]
_MORE = [
    "np.std({0}, axis={2})",
    "np.var({0}, axis={2})",
    "{0}.std()",
    "{0}.var()",
    "np.cumprod({0})",
    "np.cumsum({0}, axis={3})",
    "np.diff({0})",
    "np.diff({0}, axis={3})",
    "np.linalg.norm({0})",
    "np.linalg.norm({0}, axis={3})",
    "np.tril({0})",
    "np.triu({0}, 1)",
    "np.diag({0})",
    "np.diagonal({0})",
    "np.any({0} > 0.5) * {0}",
    "np.all({0} > -1.9, axis={2}) * 1.0",
    "np.count_nonzero({0} > 0)",
    "np.argmax({0})",
    "np.argmin({0}, axis={3})",
    "{0}[np.argmax({0})] if {0}.ndim == 1 else {0}",
    "np.average({0}, axis={2})",
    "np.ptp({0})",
    "np.sort({0})",
    "np.median({0})",
    "np.roll({0}, 1, axis={3})",
    "np.tile({0}, 2)",
    "np.repeat({0}, 2, axis={3})",
    "np.flip({0}, axis={3})",
    "np.broadcast_to({0}, {1}.shape)",
    "{0} * np.ones_like({1})",
    "np.dot({0}.ravel(), {0}.ravel())",
    "np.abs({0}).sum(axis={2}, keepdims=True)",
    "np.sum({0}, axis={2}, dtype=float)",
    "np.mean({0} > 0)",
    "np.logaddexp({0}, {1})",
    "np.expm1({0})",
    "np.log1p(np.abs({0}))",
    "np.reciprocal({0} * {0} + 1.0)",
    "np.cbrt({0})",
    "np.heaviside({0}, 0.5)",
    "np.fmax({0}, {1})",
    "np.nan_to_num({0})",
    "np.round({0}, 2)",
    "np.true_divide({0}, 2)",
    "np.floor_divide({0}, 0.7)",
    "np.mod({0}, 0.7)",
    "{0} % 0.7",
    "{0} // 0.3",
    "np.isclose({0}, {1}) * 1.0",
    "np.sign({0})",
    "np.trace({0}) * {1}",
    "np.cos({0}).T @ np.sin({0})",
    "np.einsum('...i,...i->...', {0}, {0})",
    "np.tensordot({0}, {1}, axes=0)",
    "np.squeeze({0}, axis={3})",
    "{0}.reshape(-1)[::2]",
    "{0}.ravel()[[0, -1]]",
    "{0}[{0} > 0]",
    "np.append({0}, 1.0)",
    "np.column_stack([{0}, {1}])",
    "np.atleast_1d({0})",
    "{0}.sum(0)",
    "{0}.prod(-1)",
    "{0}.mean(axis=(0,))",
    "{0}.cumsum()",
    "{0}.clip(-0.5, 0.5)",
    "{0}.round(1)",
    "{0}.dot({1})",
    "{0}.flatten()[0]",
    "{0}.item(0) * {1}",
    "{0}.item(-1) + 1.0",
    "{0}.any() * 2.0",
    "{0}.argmax()",
    "np.array_split({0}, 2)[0]",
    "np.split({0}, 1, axis={3})[0]",
    "np.rot90({0})",
    "np.fliplr({0})",
    "np.cov({0})",
    "np.corrcoef({0}) if {0}.ndim < 2 or {0}.shape[-1] > 1 else {0}",
    "np.select([{0} > 0, {0} < -1], [{1}, -{0}], 0.5)",
    "np.meshgrid({0}, {1})[1]",
    "np.polyval([1.0, -2.0, 0.5], {0})",
    "np.polyval({0}.ravel(), 0.7)",
    "np.block([{0}, {1}])",
    "np.ediff1d({0})",
    "np.linalg.matrix_power({0}, 2)",
    "np.median({0}, axis={2})",
    "np.sort({0}, axis={3})",
    "np.broadcast_arrays({0}, {1})[0]",
]
_CONSTRUCT = [
    "np.zeros({s})",
    "np.ones({s})",
    "np.full({s}, 2.5)",
    "np.eye({n})",
    "np.eye({n}, {m})",
    "np.eye({n}, {m}, k=1)",
    "np.arange({n})",
    "np.arange(0.5, {n})",
    "np.arange(1, 2 * {n} + 1, 2)",
    "np.linspace(0.0, 1.0, {n})",
    "np.linspace(-1.0, 2.0, {n}, endpoint=False)",
    "np.zeros_like({v})",
    "np.ones_like({v})",
    "np.full_like({v}, 0.5)",
    "np.identity({n})",
]


def _shape_text(shape: tuple[int, ...]) -> str:
    return (
        "(" + "".join(f"{d}, " for d in shape).rstrip(" ") + ")"
        if len(shape) != 1
        else f"({shape[0]},)"
    )


def _axis(draw, ndim: int) -> str:
    """An axis argument: None, an int (negative too), a tuple; sometimes out of range (numpy
    then rejects the statement, and another is drawn)."""
    kind = draw(st.sampled_from(["none", "int", "neg", "tuple"]))
    if kind == "none" or ndim == 0:
        return "None"
    if kind == "int":
        return str(draw(st.integers(0, ndim - 1)))
    if kind == "neg":
        return str(draw(st.integers(-ndim, -1)))
    axes = draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return "(" + ", ".join(map(str, axes)) + ("," if len(axes) == 1 else "") + ")"


def _factorizations(size: int) -> list[tuple[int, ...]]:
    out = [(size,), (1, size), (size, 1), ()] if size == 1 else [(size,), (1, size), (size, 1)]
    for a in range(2, size):
        if size % a == 0:
            out += [(a, size // a), (a, -1), (-1, a), (1, a, size // a), (a, 1, size // a)]
            for b in range(2, size // a):
                if (size // a) % b == 0:
                    out.append((a, b, size // a // b))
    return out


def _index(draw, shape: tuple[int, ...]) -> str:
    """A basic index: ints (negative too), slices with steps, Ellipsis, None."""
    parts = []
    for d in shape[: draw(st.integers(1, max(1, len(shape))))]:
        kind = draw(st.sampled_from(["int", "neg", "slice", "step", "rev", "all", "none"]))
        if d == 0:  # an empty dimension (from an empty slice)
            kind = "all"
        if kind == "int":
            parts.append(str(draw(st.integers(0, d - 1))))
        elif kind == "neg":
            parts.append(str(draw(st.integers(-d, -1))))
        elif kind == "slice":
            lo = draw(st.integers(-d, d - 1))
            hi = draw(st.one_of(st.none(), st.integers(-d, d)))
            parts.append(f"{lo}:{'' if hi is None else hi}")
        elif kind == "step":
            parts.append(f"::{draw(st.integers(2, 3))}")
        elif kind == "rev":
            parts.append(draw(st.sampled_from(["::-1", "-1::-2", "1::-1"])))
        elif kind == "all":
            parts.append(":")
        else:
            parts.append("None")
    if draw(st.booleans()) and len(parts) < len(shape):
        parts.insert(draw(st.integers(0, len(parts))), "...")
    return ", ".join(parts)


def _einsum(draw, shapes: list[tuple[int, ...]]) -> str:
    """Subscripts for `shapes`: equal lengths may share a letter, the output is a subset of
    the letters in any order, or implicit."""
    letters: dict[int, list[str]] = {}
    pool = iter("ijklmnop")
    terms = []
    for shape in shapes:
        term = ""
        for d in shape:
            same = [c for c in letters.get(d, []) if c not in term or draw(st.booleans())]
            if same and draw(st.booleans()):
                c = draw(st.sampled_from(same))
            else:
                c = next(pool)
                letters.setdefault(d, []).append(c)
            term += c
        terms.append(term)
    used = sorted(set("".join(terms)))
    if draw(st.booleans()):
        return ",".join(terms)
    out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
    return ",".join(terms) + "->" + "".join(out)


@st.composite
def _expression(draw, env: dict) -> str:
    names = list(env)
    floats = [n for n in names if env[n].dtype.kind == "f"] or names
    v = draw(st.sampled_from(floats))
    w = draw(st.sampled_from(names))
    sv = env[v].shape
    kind = draw(
        st.sampled_from(
            [
                "unary",
                "unary",
                "binary",
                "binary",
                "const",
                "reduce",
                "method",
                "contract",
                "einsum",
                "reshape",
                "transpose",
                "index",
                "concat",
                "construct",
                "cast",
                "more",
                "more",
            ]
        )
    )
    if kind == "unary":
        return draw(st.sampled_from(_UNARY)).format(v)
    if kind == "binary":
        return draw(st.sampled_from(_BINARY)).format(v, w)
    if kind == "const":
        c = draw(_CONST)
        return draw(
            st.sampled_from(
                [
                    "{0} * {1}",
                    "{1} - {0}",
                    "{0} + {1}",
                    "{1} / ({0} * {0} + 1.0)",
                    "np.maximum({0}, {1})",
                ]
            )
        ).format(v, c)
    if kind == "reduce":
        fn = draw(st.sampled_from(_REDUCE))
        keep = ", keepdims=True" if draw(st.booleans()) else ""
        return f"{fn}({v}, axis={_axis(draw, len(sv))}{keep})"
    if kind == "method":
        fn = draw(st.sampled_from(_METHOD_REDUCE))
        if draw(st.booleans()):
            return f"{v}.{fn}()"
        keep = ", keepdims=True" if draw(st.booleans()) else ""
        return f"{v}.{fn}(axis={_axis(draw, len(sv))}{keep})"
    if kind == "contract":
        form = draw(
            st.sampled_from(
                [
                    "np.dot({0}, {1})",
                    "{0} @ {1}",
                    "np.matmul({0}, {1})",
                    "np.outer({0}, {1})",
                    "np.dot({0}, {1}.T)",
                    "{0}.T @ {1}",
                    "np.tensordot({0}, {1}, axes=1)",
                    "np.vdot({0}, {1})",
                    "np.inner({0}, {1})",
                    "np.trace({0})",
                    "np.kron({0}, {1})",
                ]
            )
        )
        return form.format(v, w)
    if kind == "einsum":
        ops = [v] if draw(st.booleans()) else [v, w]
        sub = _einsum(draw, [env[o].shape for o in ops])
        return f"np.einsum('{sub}', {', '.join(ops)})"
    if kind == "reshape":
        target = draw(st.sampled_from(_factorizations(int(np.prod(sv, dtype=int)))))
        form = draw(
            st.sampled_from(
                [
                    "{0}.reshape({1})",
                    "np.reshape({0}, {1})",
                    "{0}.ravel()",
                    "{0}.flatten()",
                    "np.squeeze({0})",
                    "np.expand_dims({0}, {2})",
                    "{0}[None]",
                    "{0}[..., None]",
                    "np.atleast_2d({0})",
                ]
            )
        )
        return form.format(v, _shape_text(target), draw(st.integers(-len(sv) - 1, len(sv))))
    if kind == "transpose":
        nd = len(sv)
        form = draw(
            st.sampled_from(
                [
                    "{0}.T",
                    "np.transpose({0})",
                    "np.transpose({0}, {1})",
                    "{0}.transpose({1})",
                    "np.swapaxes({0}, {2}, {3})",
                    "np.moveaxis({0}, {2}, {3})",
                    "np.flip({0}, {2})",
                    "np.flip({0})",
                ]
            )
        )
        perm = tuple(draw(st.permutations(range(nd)))) if nd else ()
        i, j = (draw(st.integers(-nd, nd - 1)) for _ in range(2)) if nd else (0, 0)
        return form.format(v, _shape_text(perm), i, j)
    if kind == "index":
        if not sv:
            return f"{v}[()]"
        return f"{v}[{_index(draw, sv)}]"
    if kind == "concat":
        form = draw(
            st.sampled_from(
                [
                    "np.concatenate([{0}, {1}], axis={2})",
                    "np.concatenate(({0}, {1}))",
                    "np.stack([{0}, {1}], axis={2})",
                    "np.stack([{0}, {0}])",
                    "np.hstack([{0}, {1}])",
                    "np.vstack([{0}, {1}])",
                    "np.concatenate([{0}, {1}], axis=None)",
                ]
            )
        )
        return form.format(v, w, draw(st.integers(-3, 2)))
    if kind == "construct":
        shape = tuple(draw(st.sampled_from(DIMS)) for _ in range(draw(st.integers(0, 3))))
        n, m = draw(st.sampled_from(DIMS)), draw(st.sampled_from(DIMS))
        if draw(st.booleans()) and sv:  # shaped like an operand: broadcasts with it
            shape, n = sv, sv[-1]
        made = draw(st.sampled_from(_CONSTRUCT)).format(s=_shape_text(shape), n=n, m=m, v=v)
        op = draw(st.sampled_from(["{0} * {1}", "{0} + {1}", "{1} - {0}", "{1}"]))
        return op.format(v, made)
    if kind == "more":  # further functions users write; refusals are breadth bugs
        form = draw(st.sampled_from(_MORE))
        return form.format(
            v, w, _axis(draw, len(sv)), draw(st.integers(-len(sv), max(len(sv) - 1, 0)))
        )
    # casts numpy allows
    form = draw(
        st.sampled_from(
            [
                "({0} > 0.2).astype(float)",
                "{0}.astype(int)",
                "{0}.astype(np.float64) * 2.0",
                "({0} > {1}) * 1.0",
                "np.float64(2.0) * {0}",
                "({0} * 3).astype(np.int64) + 1",
                "{0}.astype(int) * {1}",
                "np.floor({0} * 2.0)",
            ]
        )
    )
    return form.format(v, w)


@st.composite
def _arguments(draw, large: bool = False) -> list[np.ndarray]:
    """`large`: mostly arrays over 16 elements (in memory: cofactor's loop nests)."""
    base = draw(
        st.lists(
            st.sampled_from((3, 4, 5, 6) if large else (2, 3, 4, 5, 6)), min_size=3, max_size=3
        )
    )
    args = []
    for _ in range(draw(st.integers(1, 3))):
        nd = draw(st.sampled_from([1, 2, 3, 3] if large else [0, 1, 2, 2, 3, 3]))
        # trailing dims of a common base, each possibly 1: they broadcast with each other
        shape = tuple(1 if draw(st.integers(0, 4)) == 0 else d for d in base[3 - nd :])
        if draw(st.integers(0, 5)) == 0:  # another arbitrary shape
            shape = tuple(draw(st.sampled_from(DIMS)) for _ in range(nd))
        if nd == 1 and (large or draw(st.integers(0, 3)) == 0):  # a long vector (in memory: loops)
            shape = (draw(st.sampled_from([17, 24])),)
        # distinct values (no ties in max, where, maximum: their derivatives are one-sided),
        # on a grid of 1e-3 offset by 1e-4 * k for the k-th argument
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        size = int(np.prod(shape, dtype=int))
        grid = rng.choice(np.arange(1, 2000), size=size, replace=False) * rng.choice([-1, 1], size)
        values = np.round(grid * 1e-3 + len(args) * 1e-4, 4).reshape(shape)
        if draw(st.integers(0, 7)) == 0:
            values = np.asarray(np.round(values * 3), dtype=np.int64)
        args.append(np.asarray(values))
    return args


@st.composite
def _loop(draw, env: dict) -> str | None:
    """`fori(0, n, lambda i, acc: body, init)`: a loop carrying an array (a memref when it
    is large), its body an expression over the carry, the loop index and the scope."""
    floats = [n for n in env if env[n].dtype.kind == "f"]
    if not floats:
        return None
    init = draw(st.sampled_from(floats))
    expr = draw(_expression({**env, "acc": env[init]}))
    body = f"np.tanh({expr}) * 0.9 + acc * 0.1 + 0.05 * i"
    return f"fori(0, {draw(st.integers(1, 4))}, lambda i, acc: {body}, {init})"


@st.composite
def _update(draw, env: dict, name: str) -> tuple[str, str] | None:
    """An update in place of a copy of an array: `name[index] = / += / *= value`, or
    `name += value` (numpy's broadcasting and casting rules for writes)."""
    arrays = [n for n in env if env[n].dtype.kind == "f" and env[n].ndim]
    if not arrays:
        return None
    v = draw(st.sampled_from(arrays))
    w = draw(st.sampled_from(list(env)))
    value = draw(st.sampled_from([w, f"np.sin({w})", f"{w}.sum()", "0.5", "-2"]))
    op = draw(st.sampled_from(["=", "+=", "*=", "-="]))
    if draw(st.integers(0, 3)) == 0:
        target = name if op != "=" else f"{name}[...]"  # `name = value` would rebind name
    else:
        target = f"{name}[{_index(draw, env[v].shape)}]"
    return v, f"{target} {op} {value}"


@st.composite
def array_programs(draw, max_statements: int = 6, large: bool = False) -> ArrayProgram:
    p = ArrayProgram(draw(_arguments(large)), value_and_grad=draw(st.booleans()))
    env = dict(zip(p.names, p.args, strict=True))
    target = draw(st.integers(1, max_statements))
    attempts, count = 0, 0
    while count < target and attempts < 6 * max_statements:
        attempts += 1
        name = f"t{len(env) - len(p.args)}"
        if draw(st.integers(0, 7)) == 0:
            loop = draw(_loop(env))
            if loop is None or (value := evaluate(env, loop)) is None:
                continue
            if value.shape != env[loop.rsplit(", ", 1)[1][:-1]].shape or value.dtype.kind != "f":
                continue  # cofactor.for_loop keeps the carry's shape and dtype
            p.body.append((name, loop))
        elif draw(st.integers(0, 9)) == 0:
            update = draw(_update(env, name))
            if update is None:
                continue
            source, statement = update
            scope = {**env, name: env[source].copy()}
            value = evaluate(scope, name, statement)
            if value is None:
                continue
            p.body += [(name, f"{source}.copy()"), (None, statement)]
        else:
            expr = draw(_expression(env))
            value = evaluate(env, expr)
            if value is None:
                if numpy_rejects(env, expr) and draw(st.integers(0, 3)) == 0:
                    # numpy raises here: the compiled program must raise too
                    p.body.append((name, expr))
                    p.returns, p.rejected = [name], True
                    return p
                continue
            p.body.append((name, expr))
        env[name] = value
        count += 1
    last = p.body[-1][0] if p.body else p.names[0]
    last = last or p.body[-2][0]
    p.returns = [last]
    if env[last].dtype.kind == "f" and env[last].size and draw(st.integers(0, 5)) == 0:
        p.circuit = True
        p.returns = [f"circuit({last}.ravel())"]
    elif draw(st.integers(0, 3)) == 0:
        other = draw(st.sampled_from(list(env)))
        if other != last:
            p.returns.append(other)
    return p


def values(p: ArrayProgram, namespace: dict) -> list:
    """The program's results in `namespace` (np bound to numpy or pennylane.numpy)."""
    ns = {"qml": qml, **namespace}
    exec(compile(p.source(), "<fuzz array program>", "exec"), ns)  # noqa: S102
    out = ns["f"](*p.args)
    return list(out) if isinstance(out, tuple) else [out]
