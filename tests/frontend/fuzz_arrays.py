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
operand pair) and left for numpy to judge (the expressions: fuzz_arrays_ops.py). The
same source text runs under cofactor (`np` is numpy, the arguments are traced) and under
autograd (`np` is pennylane.numpy) for the reference gradients.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pennylane as qml
from fuzz_arrays_ops import DIMS, _shape_text, expression, index
from hypothesis import strategies as st

#: COFACTOR_FUZZ_INPLACE=1: mostly writes in place (through views, aliases, out=)
INPLACE = bool(os.environ.get("COFACTOR_FUZZ_INPLACE"))
#: values above this are not kept (exp of a product, prod of many numbers)
MAGNITUDE = 1e3


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
    expr = draw(expression({**env, "acc": env[init]}))
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
        target = f"{name}[{index(draw, env[v].shape)}]"
    return v, f"{target} {op} {value}"


@st.composite
def _view_update(draw, env: dict, name: str) -> tuple[str, str] | None:
    """A write into a view of (or a second name for) a copy of an array, which numpy's
    memory shows in the copy `name`: `v = name[index]; v op= value` (also through reshape,
    .T, ravel, swapaxes, views of views, `out=v`, copyto, fill, `name[index] op= value`
    with a repeated fancy index), the view `v` staying alive for later statements."""
    arrays = [n for n in env if env[n].dtype.kind in "fi" and env[n].ndim]
    if not arrays:
        return None
    src = draw(st.sampled_from(arrays))
    shape = env[src].shape
    views = [
        f"{name}[{index(draw, shape)}]",
        f"{name}[{index(draw, shape)}][{index(draw, shape[1:] or (1,))}]",
        name,  # a second name: `z = y; z += 1`
        f"{name}.reshape({_shape_text((-1,))})",
        f"{name}.ravel()[::2]",
        f"{name}.T",
        f"np.swapaxes({name}, 0, -1)[::-1]",
        f"{name}.flatten()",  # (a copy in numpy: `name` keeps its values)
        f"{name}.T.reshape(-1)",  # (a copy in numpy for ndim >= 2)
    ]
    view = draw(st.sampled_from(views))
    w = draw(st.sampled_from(list(env)))
    value = draw(st.sampled_from([w, f"np.cos({w})", f"{w}.sum()", "0.5", "2", "-3"]))
    integer = env[src].dtype.kind == "i"
    ops = ["+=", "-=", "*=", "/=", "**="] + (["//=", "%=", "&=", "|="] if integer else [])
    k = len(name)
    v = f"v{k}_{draw(st.integers(0, 99))}"
    kind = draw(st.integers(0, 9))
    if kind == 0:
        ufunc = draw(st.sampled_from(["add", "multiply", "subtract"]))
        write = f"np.{ufunc}({v}, {value}, out={v})"
    elif kind == 1:
        write = f"np.copyto({v}, {value})"
    elif kind == 2:
        write = f"{v}.fill({value if value in ('0.5', '2', '-3') else '1'})"
    elif kind == 3:  # a repeated fancy index: numpy applies the update once
        n = shape[0]
        idx = [draw(st.integers(-n, n - 1)) for _ in range(3)]
        return src, f"{name}[{idx}] {draw(st.sampled_from(ops[:3]))} {value}"
    else:
        write = f"{v} {draw(st.sampled_from(ops))} {value}"
    return src, f"{v} = {view}; {write}"


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
        elif (which := draw(st.integers(0, 2 if INPLACE else 9))) <= 1:
            update = draw((_update if which == 0 else _view_update)(env, name))
            if update is None:
                continue
            source, statement = update
            # the array written into: a copy, or one of numpy's constructors (A9)
            shape = _shape_text(env[source].shape)
            starts = [f"{source}.copy()", f"{source} * 1"]
            if which == 0:  # (views of np.zeros arrays before a traced write are refused)
                starts += [
                    f"{source}.copy()",
                    f"np.zeros({shape})",
                    f"np.ones_like({source})",
                    f"np.full({shape}, 0.25)",
                ]
            start = draw(st.sampled_from(starts))
            scope = {**env, name: evaluate(env, start)}
            value = evaluate(scope, name, statement)
            if value is None:
                continue
            p.body += [(name, start), (None, statement)]
        else:
            expr = draw(expression(env))
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
