"""The expressions of the random array programs (fuzz_arrays.py): one numpy operation over
names in scope, as source text. Operands, axes, indices, reshape targets and einsum
subscripts are drawn blindly; fuzz_arrays evaluates each expression with numpy and keeps
only those numpy accepts (or, now and then, one numpy rejects: cofactor must reject it too).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

#: the dimension lengths a constructor's shape is drawn from
DIMS = (1, 2, 3, 4, 5)

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
    # session 12's findings: NaN in argmax/argmin, complex vdot, traced index arrays, ints
    "np.argmax(np.where({0} > 0.5, np.nan, {0}))",
    "np.argmin(np.where({0} < -0.5, np.nan, {0}), axis={3})",
    "np.real(np.vdot({0} * (1 + 1j), {0} * (1 - 2j) + 0.5j))",
    "{0}.ravel()[(np.argmax({1}) + np.arange(3)) % {0}.size]",
    "{0}[np.argmin({1}) % len({0}) * np.ones(2, dtype=int)] if {0}.ndim else {0}",
    "np.round({0} * 3).astype(int) // np.round({1} * 2 + 7).astype(int)",
    "np.round({0} * 5).astype(int) % np.round({1} * 2 - 5).astype(int)",
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


def index(draw, shape: tuple[int, ...]) -> str:
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
def expression(draw, env: dict) -> str:
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
        return f"{v}[{index(draw, sv)}]"
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
