"""Property test: random classical numpy array programs, compiled by cofactor, against numpy.

Each example is a program drawn by `fuzz_arrays.array_programs()` (one to three array
arguments of random small shapes, a few numpy statements over them). The compiled values
must equal numpy's (same shape, same dtype, to 1e-10); the gradient of a scalar loss of
the results (`cofactor.grad` or `value_and_grad`, every float argument) must equal
autograd's (`qml.grad` on pennylane.numpy; central differences where autograd cannot
differentiate the program), and the jacobian of a small vector result
(`cofactor.jacobian`) autograd's jacobian. Anything cofactor refuses must be a
CompileError / TypeError / ValueError whose message names what it refuses: never a crash,
a wrong number or a silent zero.

`make test` runs a fixed, derandomized set of COFACTOR_FUZZ_EXAMPLES examples (default 50,
each one to three compiles); run longer on demand, e.g.
    COFACTOR_FUZZ_EXAMPLES=1000 COFACTOR_FUZZ_SEED=3 pytest tests/frontend/test_fuzz_arrays.py
(COFACTOR_FUZZ_INPLACE=1: mostly writes in place, through views, aliases and out=).
A failure is shrunk to a small program and printed as a runnable script.
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pennylane as qml
import pytest
from fuzz_arrays import ArrayProgram, array_programs, values
from fuzz_settings import fuzz_settings
from hypothesis import given, note

import cofactor
from cofactor.errors import CompileError

pytestmark = [
    pytest.mark.needs_toolchain,
    pytest.mark.filterwarnings("ignore:Output seems independent of input"),
]

pnp = qml.numpy
VALUE_RTOL = 1e-10
GRAD_TOL = 1e-7
FD_TOL = 1e-5
#: refusals seen in this process (message -> count): the long runs report them
REFUSALS: dict[str, int] = {}
LAST_REFUSAL: list = []
#: what the examples in this process compared (the long runs report it)
STATS: dict[str, int] = {}


def _count(what: str) -> None:
    STATS[what] = STATS.get(what, 0) + 1


def _refused(exc: Exception) -> None:
    if os.environ.get("COFACTOR_FUZZ_LOG_REFUSALS"):
        LAST_REFUSAL.append(exc)
    """A refusal must be a cofactor exception with a message, not a crash inside the tracer."""
    assert isinstance(exc, CompileError | TypeError | ValueError | NotImplementedError), repr(exc)
    assert not isinstance(exc, AttributeError | KeyError | IndexError | AssertionError), repr(exc)
    msg = str(exc)
    assert len(msg) > 10, f"refusal without an explanation: {exc!r}"
    # a toolchain stage failing on a program cofactor traced is a bug, not a refusal
    assert not re.match(r"\[[\w-]+\] .*failed", msg), f"toolchain failure: {msg[:300]}"
    key = msg.splitlines()[0][:160]
    REFUSALS[key] = REFUSALS.get(key, 0) + 1


def _compile(source: str, name: str):
    ns = {"np": np, "qml": qml, "cofactor": cofactor, "COMPILED": True}
    exec(compile(source, "<fuzz array program>", "exec"), ns)  # noqa: S102
    return ns[name]


def _assert_same(got, want, what: str, rtol: float, atol: float) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def _loss_source(p: ArrayProgram) -> str:
    names = ", ".join(p.names)
    outs = ", ".join(f"r{k}" for k in range(len(p.returns)))
    terms = " + ".join(f"np.sum(np.sin(r{k}))" for k in range(len(p.returns)))
    return p.source() + f"\ndef loss({names}):\n    {outs} = f({names})\n    return {terms}\n"


def _reference_grad(p: ArrayProgram, source: str, fn: str, argnums: tuple[int, ...], jac: bool):
    """autograd's gradient / jacobian, or None if autograd cannot differentiate it."""
    if ".astype(int" in source or ".astype(np.int" in source:
        return None  # autograd differentiates through a cast to int as if it were the identity
    if any(name is None for name, _ in p.body):
        return None  # autograd's `v += w` rebinds: views of the array keep the old values
    ns = {"np": pnp, "qml": qml}
    exec(compile(source, "<fuzz reference>", "exec"), ns)  # noqa: S102
    args = [pnp.array(a, requires_grad=k in argnums) for k, a in enumerate(p.args)]
    transform = qml.jacobian if jac else qml.grad
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = transform(ns[fn], argnums=list(argnums) if len(argnums) > 1 else argnums[0])(*args)
    except Exception:  # noqa: BLE001 (autograd has no rule: use differences)
        return None
    g = list(g) if isinstance(g, tuple | list) and len(argnums) > 1 else [g]
    g = [np.asarray(x, dtype=float) for x in g]
    out_shape = np.shape(values(p, {"np": np})[0]) if jac else ()
    if any(x.shape != out_shape + p.args[k].shape for x, k in zip(g, argnums, strict=True)):
        return None  # autograd's where() does not unbroadcast its gradient
    return g


def _differences(
    p: ArrayProgram, source: str, fn: str, argnums: tuple[int, ...], h: float = 1e-6
) -> list:
    """Central differences: d fn / d a_k of shape fn's shape + a_k's shape, per k."""
    ns = {"np": np, "qml": qml}
    exec(compile(source, "<fuzz fd>", "exec"), ns)  # noqa: S102
    f, out = ns[fn], []
    for k in argnums:
        columns = []
        for i in np.ndindex(p.args[k].shape):
            args = [a.copy() for a in p.args]
            args[k][i] += h
            up = np.array(f(*args), dtype=float)  # a copy: f may return a view of args[k]
            args[k][i] -= 2 * h
            columns.append((up - np.asarray(f(*args))) / (2 * h))
        shape = np.shape(columns[0]) + p.args[k].shape if columns else p.args[k].shape
        out.append(np.stack(columns, axis=-1).reshape(shape) if columns else np.zeros(shape))
    return out


def check(p: ArrayProgram) -> None:
    if p.rejected:
        check_rejected(p)
        return
    want = values(p, {"np": np})
    try:
        got = cofactor.qjit(_compile(p.source(), "f"))(*p.args)
    except Exception as exc:  # noqa: BLE001 (a refusal is checked, not a failure)
        _refused(exc)
        return
    got = list(got) if isinstance(got, tuple) else [got]
    _count("values")
    if any(np.size(w) > 16 for w in want) or any(a.size > 16 for a in p.args):
        _count("values with an array over 16 elements")
    assert len(got) == len(want), f"{len(got)} results, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _assert_same(g, w, f"result {k}", VALUE_RTOL, 1e-12)

    argnums = p.float_args()
    if not argnums or any(np.asarray(w).dtype.kind != "f" for w in want):
        return
    source = _loss_source(p)
    nums = ", ".join(map(str, argnums))
    names = ", ".join(p.names)
    transform = "value_and_grad" if p.value_and_grad else "grad"
    call = f"cofactor.{transform}(loss, argnums=({nums},))({names})"
    check_grad(p, source + f"\ndef g({names}):\n    return {call}\n", "g", source, "loss", argnums)

    w = np.asarray(want[0])
    if len(want) == 1 and w.ndim == 1 and 0 < w.size <= 8:
        jsrc = (
            p.source()
            + f"\ndef j({names}):\n    return cofactor.jacobian(f, argnums=({nums},))({names})\n"
        )
        check_grad(p, jsrc, "j", p.source(), "f", argnums, jac=True)


def check_rejected(p: ArrayProgram) -> None:
    """numpy raises on the program's last statement: cofactor must raise, not return values."""
    with pytest.raises(Exception) as numpy_error:  # noqa: PT011 (numpy's own error)
        values(p, {"np": np})
    try:
        got = cofactor.qjit(_compile(p.source(), "f"))(*p.args)
    except (CompileError, ValueError, TypeError, IndexError) as exc:
        _count("rejected like numpy")
        assert not isinstance(exc, AttributeError | KeyError | AssertionError), repr(exc)
        return
    raise AssertionError(f"numpy raises {numpy_error.value!r}; cofactor returned {got!r}")


def check_grad(p, src, name, ref_src, ref_fn, argnums, jac: bool = False) -> None:
    try:
        got = cofactor.qjit(_compile(src, name))(*p.args)
    except Exception as exc:  # noqa: BLE001
        _refused(exc)
        return
    if p.value_and_grad and not jac:
        value, got = got
        ns = {"np": np, "qml": qml}
        exec(compile(ref_src, "<fuzz loss>", "exec"), ns)  # noqa: S102
        _assert_same(value, ns[ref_fn](*p.args), "value_and_grad value", VALUE_RTOL, 1e-12)
    got = list(got) if isinstance(got, tuple | list) else [got]
    want = _reference_grad(p, ref_src, ref_fn, argnums, jac)
    what = "jacobian" if jac else "gradient"
    if want is not None:
        _count(what + " vs autograd")
        _assert_all(got, want, what, argnums, GRAD_TOL)
        return
    _count(what + " vs differences")
    # a step of 1e-6 is too large for a program with a steep factor (a gate angle of 1e4):
    # smaller steps are tried before a mismatch counts
    for h in (1e-6, 1e-7, 1e-8):
        try:
            _assert_all(got, _differences(p, ref_src, ref_fn, argnums, h), what, argnums, FD_TOL)
            return
        except AssertionError:
            if h == 1e-8:
                raise


def _assert_all(got: list, want: list, what: str, argnums: tuple[int, ...], tol: float) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} results, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _assert_same(g, w, f"{what} wrt a{argnums[k]}", tol, tol)


_settings = fuzz_settings(default_examples=50)


@_settings
@given(array_programs())
def test_compiled_array_programs_match_numpy(p: ArrayProgram) -> None:
    note(p.reproducer())
    check(p)


# ---------------------------------------------------------------------------------------
# Bugs this test found (/work/wt/notes/fuzz3-findings.md), reduced; fixed.

RNG = np.random.default_rng(11)


def _same_as_numpy(fn, *args) -> None:
    got = cofactor.qjit(fn)(*args)
    want = fn(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        _assert_same(g, w, f"result {k}", VALUE_RTOL, 1e-12)


@pytest.mark.parametrize("shape", [(), (4, 1, 1), (2, 3, 2)])
def test_fixed_bug_max_min_keepdims_and_axis_tuples(shape) -> None:
    """A1: np.amin(a, axis=None, keepdims=True) had shape (1,) (numpy: (1,) * a.ndim, () for
    a 0-d array); A2: np.max / np.min over a tuple of axes was refused ("reduction operation
    '<lambda> (vectorized)' is not reorderable")."""
    a = RNG.normal(size=shape)
    nd = len(shape)

    def f(a):
        out = [np.amin(a, axis=None, keepdims=True), np.max(a, keepdims=True), a.min()]
        if nd:
            out += [np.max(a, axis=tuple(range(nd))), np.min(a, axis=(-1,), keepdims=True)]
            out += [np.max(a, axis=()), a.max(axis=(0, -1)), np.amin(a, axis=(-1, 0))]
        return tuple(out)

    _same_as_numpy(f, a)


def test_fixed_bug_transpose_method_with_an_axes_tuple() -> None:
    """A3: a.transpose((1, 0)) raised "'tuple' object cannot be interpreted as an integer"."""
    for a in (RNG.normal(size=(2, 3)), RNG.normal(size=(5, 6)), RNG.normal(size=(2, 3, 4))):
        axes = tuple(range(a.ndim))[::-1]
        _same_as_numpy(lambda a, axes=axes: (a.transpose(axes), a.transpose(*axes)), a)
    _same_as_numpy(lambda a: a.transpose(()), np.array(1.5))


def test_fixed_bug_inner() -> None:
    """A4: np.inner was refused ("numpy.inner is not supported on traced values")."""
    a, b, c = RNG.normal(size=(2, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=3)
    _same_as_numpy(lambda a, b, c: (np.inner(a, b), np.inner(c, c), np.inner(a, 2.0)), a, b, c)


@pytest.mark.parametrize("shape", [(2, 3), (6, 5)])
def test_fixed_bug_item_ptp_append_column_stack_average(shape) -> None:
    """A5: x.item(k) raised "Tracer.item() takes 1 positional argument"; np.ptp, np.append,
    np.column_stack and np.average were refused."""
    a = RNG.normal(size=shape)
    c = np.arange(shape[0]) * 0.5

    def f(a, c):
        return (
            np.ptp(a),
            np.ptp(a, axis=0),
            np.append(a, 1.0),
            np.append(a, a[:1], axis=0),
            np.column_stack([c, c]),
            np.column_stack([a, c]),
            a.item(0) * a,
            a.item(-1),
            a.item(1, 2),
            a.item((0, 1)),
            np.average(a),
            np.average(a, axis=(0, 1), keepdims=True),
            np.average(a, axis=0, weights=c + 1.0),
            np.average(a, weights=a * a),
            np.average(a, axis=-1, returned=True)[1],
        )

    _same_as_numpy(f, a, c)


@pytest.mark.parametrize("shape", [(3, 2), (6, 5)])
def test_fixed_bug_sort_and_median(shape) -> None:
    """A6: np.sort and np.median were refused (they are a network of minimum/maximum pairs:
    values and gradients as numpy's, also for integers and along any axis)."""
    a = RNG.normal(size=shape)
    n = RNG.integers(-5, 5, size=shape)

    def f(a, n):
        return (
            np.sort(a),
            np.sort(a, axis=0),
            np.sort(a, axis=None),
            np.sort(n),
            np.median(a),
            np.median(a, axis=0),
            np.median(a, axis=-1, keepdims=True),
            np.median(n, axis=(0, 1)),
        )

    _same_as_numpy(f, a, n)

    def loss(a):
        weights = np.arange(a.size).reshape(a.shape)
        return np.sum(np.sin(np.sort(a, axis=0)) * weights) + np.median(a) ** 2

    got = cofactor.qjit(cofactor.grad(loss))(a)
    steps = np.eye(a.size).reshape(a.shape + a.shape) * 1e-6
    want = [(loss(a + h) - loss(a - h)) / 2e-6 for h in steps.reshape(-1, *a.shape)]
    np.testing.assert_allclose(got, np.reshape(want, a.shape), rtol=FD_TOL, atol=FD_TOL)


def test_sort_puts_nan_last_and_median_of_nan_is_nan() -> None:
    """numpy sorts NaN last; a minimum/maximum network spread the NaN over the row instead
    (found reading A6's note). numpy.median of a row with a NaN is NaN."""
    a = np.array([[3.0, np.nan, 1.0, 2.0, np.nan, -1.0], [0.5, 2.0, -3.0, 1.0, 4.0, 0.0]])

    def f(a):
        return np.sort(a), np.sort(a, axis=None), np.median(a, axis=1)

    got, want = cofactor.qjit(f)(a), f(a)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)  # NaN positions included


_EXTRAS = [
    lambda x, v, m: np.split(v, 2)[1] + np.array_split(v, 3)[2].sum(),
    lambda x, v, m: (np.hsplit(x, 2)[0], np.vsplit(m, [1])[1], np.dstack([x, x])),
    lambda x, v, m: (np.block([[m, m], [m, m]]), np.block([v, v]), np.block([[x], [x]])),
    lambda x, v, m: (np.rot90(m), np.rot90(x, 2), np.fliplr(x), np.flipud(x)),
    lambda x, v, m: np.meshgrid(v, v[:3]) + np.meshgrid(v[:2], v[:3], indexing="ij"),
    lambda x, v, m: (np.select([x > 0, x < -1], [x, -x], 0.5), np.broadcast_arrays(x, v)[1]),
    lambda x, v, m: (np.cross(v[:3], v[1:]), np.cross(x[:, :3], v[:3])),
    lambda x, v, m: (np.polyval(v, 0.5), np.polyval(v[:3], x), np.polyval([1.0, 2.0], v)),
    lambda x, v, m: (np.ediff1d(x), np.ediff1d(v, to_begin=0.0, to_end=[1.0, 2.0])),
    lambda x, v, m: (np.cov(x), np.cov(x, rowvar=False), np.cov(v), np.cov(v, v * v)),
    lambda x, v, m: (np.corrcoef(x), np.corrcoef(v), np.cov(x, bias=True)),
    lambda x, v, m: (np.linalg.matrix_power(m, 3), np.linalg.matrix_power(m, 0)),
    lambda x, v, m: (np.linalg.multi_dot([v[:3], m, m]), getattr(np.linalg, "trace", np.trace)(m)),
]


@pytest.mark.parametrize("k", range(len(_EXTRAS)))
@pytest.mark.parametrize("large", [False, True])
def test_fixed_bug_more_numpy_functions(k: int, large: bool) -> None:
    """A7: split/array_split/hsplit/vsplit, dstack, block, rot90, fliplr/flipud, meshgrid,
    broadcast_arrays, select, cross, polyval, ediff1d, cov, corrcoef, linalg.matrix_power,
    multi_dot and trace were refused; values as numpy's, for small arrays (elements) and
    large ones (in memory)."""
    x = RNG.normal(size=(6, 4) if large else (3, 4))
    v = RNG.normal(size=4)
    m = RNG.normal(size=(5, 5) if large else (3, 3))
    if k == len(_EXTRAS) - 1:
        m = m[:3, :3]
    _same_as_numpy(_EXTRAS[k], x, v, m)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
def test_fixed_bug_argmax_argmin_with_an_axis(shape) -> None:
    """A8: argmax/argmin with an axis (or keepdims) were refused; ties: the first wins."""
    a = RNG.normal(size=shape)

    def f(a):
        return (
            np.argmax(a, axis=1),
            np.argmin(a, axis=-1, keepdims=True),
            a.argmax(axis=0),
            np.argmax(a, keepdims=True),
            np.argmax(np.round(a), axis=0),
            np.argmin(a > 0, axis=-1),
        )

    _same_as_numpy(f, a)
    # a 0-d array is its own row (numpy: index 0 for axis None, 0 or -1)
    _same_as_numpy(lambda s: (np.argmin(s, axis=0), np.argmax(s, axis=-1, keepdims=True)), a[0, 0])


def test_fixed_bug_median_axis_out_of_range_is_refused() -> None:
    """A10: np.median(a, axis=2) of a 2-d array returned numbers (numpy: AxisError), from
    the first version of the median rule; max over a repeated axis is refused like numpy."""
    a = RNG.normal(size=(2, 3))
    for fn in (lambda a: np.median(a, axis=2), lambda a: np.max(a, axis=(0, 0))):
        with pytest.raises(ValueError, match="axis"):
            cofactor.qjit(fn)(a)


def test_writing_traced_values_into_a_numpy_array() -> None:
    """A9: y = np.zeros(n); y[:2] = x[:2] works (tracing/host_arrays.py, more in
    test_host_arrays.py); an array numpy's constructors cannot hand over (np.array of
    constants) is refused with a CompileError that says how to write it."""

    def f(x):
        y = np.zeros(3)
        y[:2] = x[:2]
        return y

    _same_as_numpy(f, np.arange(1.0, 4.0))

    def g(x):
        y = np.array([0.0, 0.0, 0.0])
        y[:2] = x[:2]
        return y

    with pytest.raises(CompileError, match="start y from a traced array"):
        cofactor.qjit(g)(np.arange(3.0))

    def h(x):  # the spelling the message suggests
        y = 0.0 * x
        y[:2] = x[:2]
        return y

    _same_as_numpy(h, np.arange(1.0, 4.0))


def test_more_numpy_functions_refuse_what_numpy_refuses() -> None:
    """numpy.block with mismatched list depths, numpy.select with a non-boolean condition,
    numpy.cov of a 3-d array and multi_dot of a 3-d array raise (numpy raises), rather than
    return numbers."""
    m = RNG.normal(size=(2, 2))
    for fn in (lambda m: np.block([[m, m], m]), lambda m: np.select([m], [m])):
        with pytest.raises(CompileError, match="numpy.block|numpy.select"):
            cofactor.qjit(fn)(m)
    t = RNG.normal(size=(2, 3, 4))
    for fn in (lambda t: np.cov(t), lambda t: np.linalg.multi_dot([t, t[0]])):
        with pytest.raises(CompileError, match="numpy.cov|numpy.linalg.multi_dot"):
            cofactor.qjit(fn)(t)


def test_fixed_bug_gradient_with_an_unused_loop_over_an_updated_copy() -> None:
    """A11 (fuzz3-findings.md): the gradient of a program with a for_loop whose result is
    unused, carrying a copy of an array updated in place, its body calling tanh, failed to
    compile ("[opt] opt failed: Enzyme: Illegal replace ficticious phi"): Enzyme fails on
    unused C math library calls on a differentiated array that a loop also reads. The
    differentiated function's dead code is now removed first (ir/dead_code.py; more shapes
    in test_dead_code.py)."""
    a0, a1, a2 = RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=(5, 6, 4))

    def f(a0, a1, a2):
        t0 = a2.copy()
        t0[-1] -= a1
        cofactor.for_loop(0, 1, 1)(lambda i, acc: np.tanh(acc))(t0)
        return np.sum(np.sin(a2 * a0))

    got = cofactor.qjit(cofactor.grad(f, argnums=(0, 2)))(a0, a1, a2)
    np.testing.assert_allclose(got[0], np.sum(np.cos(a2 * a0) * a2, axis=(0, 1)), rtol=1e-10)
