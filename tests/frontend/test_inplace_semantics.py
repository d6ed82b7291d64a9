"""numpy's in-place semantics on traced arrays (tracer.py `_inplace`, tracing/aliasing.py).

`y += v`, `out=y`, `y[k] op= v`, `np.copyto`/`put`/`place`/`fill_diagonal`, `a.fill`,
`a.sort()` write into the array: the same Python object changes (`z = y; z += 1` changes
`y`), and so does every numpy view of its memory (`t = y[1:]; t += 1` changes `y`). Each
program is run compiled and as plain numpy on copies of the same inputs; both must agree
(or both raise). Where cofactor cannot follow a write (a loop body writing into an array
from outside it, a QNode writing into its argument that the caller reads later), it
raises a CompileError instead of returning the old numbers.
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor.errors import CompileError

pytestmark = pytest.mark.needs_toolchain

X = np.array([0.3, -1.2, 2.5, 0.7])
M = np.arange(1.0, 26.0).reshape(5, 5) / 7.0  # 25 elements: in memory, loop-nest paths


def _same(f, *args) -> None:
    """f compiled and f on numpy copies of the arguments agree, or both raise."""
    try:
        want = f(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
    except Exception as err:  # noqa: BLE001 (numpy's error: cofactor must raise its kind)
        kind = next((k for k in (TypeError, ValueError, IndexError) if isinstance(err, k)), None)
        with pytest.raises(kind or type(err)):
            cofactor.qjit(f)(*args)
        return
    got = cofactor.qjit(f)(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)


# -- the two programs of the issue ------------------------------------------------------
def write_through_a_slice(x):
    y = x * 2
    t = y[1:]
    t += 1
    return y


def write_through_a_second_name(x):
    y = x * 2
    z = y
    z += 1
    return y


def write_through_views_of_views(m):
    y = m * 1.0
    v = y[1:, ::2]
    w = v.T[::-1]
    w *= -1.0
    r = y.reshape(-1)[3:9]
    r -= 0.5
    return y, v, w, r


def copies_are_not_views(m):
    y = m * 1.0
    a, b, c = y.flatten(), y.T.reshape(-1), y[[0, 2]]
    a += 1.0
    b += 2.0
    c += 3.0
    d = y.copy()
    d[0] = 9.0
    return y, a, b, c, d


def read_only_broadcast(x):
    y = x * 2
    b = np.broadcast_to(y, (3, 4))
    b += 1
    return y


def read_only_diagonal(m):
    y = m * 2
    np.diagonal(y)[...] = 0.0
    return y


@pytest.mark.parametrize(
    "f, arg",
    [
        (write_through_a_slice, X),
        (write_through_a_second_name, X),
        (write_through_views_of_views, M),
        (copies_are_not_views, M),
        (read_only_broadcast, X),
        (read_only_diagonal, M),
    ],
)
def test_views_and_names_see_the_write(f, arg) -> None:
    _same(f, arg)


# -- every augmented operator, float and int arrays ---------------------------------------
FLOAT_OPS = ["+=", "-=", "*=", "/=", "//=", "%=", "**="]
INT_OPS = ["+=", "-=", "*=", "//=", "%=", "**=", "&=", "|=", "^=", "/="]


def _program(op: str, dtype: str, operand: str):
    src = (
        "def f(x):\n"
        f"    y = (x * 3).astype({dtype})\n"
        "    v = y[1:]\n"
        f"    v {op} {operand}\n"
        "    w = y\n"
        f"    w {op} {operand}\n"
        "    return y, v\n"
    )
    scope: dict = {"np": np}
    exec(src, scope)  # noqa: S102 (one small program per operator)
    return scope["f"]


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_float_augmented_operators(op) -> None:
    _same(_program(op, "float", "1.5"), X)
    _same(_program(op, "float", "np.array([2.0, -1.0, 0.5])"), X)


@pytest.mark.parametrize("op", INT_OPS)
def test_int_augmented_operators(op) -> None:
    """`int_array /= 2` and `int_array += 1.5` raise numpy's casting TypeError."""
    xi = np.array([1.0, -2.0, 3.0, 4.0])
    _same(_program(op, "int", "2"), xi)
    _same(_program(op, "int", "1.5"), xi)


def test_int_array_plus_float_names_the_casting_rule() -> None:
    def f(x):
        n = x.astype(int)
        n += 1.5
        return n

    with pytest.raises(TypeError, match="same_kind"):
        cofactor.qjit(f)(X)


def test_matmul_in_place() -> None:
    def f(m):
        y = m * 1.0
        y @= m.T
        v = y[1:3]
        v @= np.eye(5) * 2.0
        return y

    _same(f, M)


def test_scalars_are_rebound_zero_d_views_are_written() -> None:
    def f(x):
        y = x * 1.0
        s = y[0]  # a numpy scalar: a copy
        r = s.reshape(1)  # (a new array: a scalar has no memory to share)
        s += 10.0
        a = y[1, ...]  # a 0-d view
        b = a.reshape(1)  # a view of the view
        a += 100.0
        n = 3
        n += 0.5  # a Python scalar becomes a float
        return y, s, r, a, b, n

    _same(f, X)


# -- x[k] op= v ---------------------------------------------------------------------------
def indexed_updates(x):
    y = x * 1.0
    y[1:3] += 1.0
    y[0] *= 3.0
    y[[0, 0, 2]] += 5.0  # numpy adds once per distinct index
    y[np.array([True, False, True, False])] -= 1.0
    y[::-1][:2] /= 2.0
    return y


def indexed_updates_2d(m):
    y = m * 1.0
    y[1] += y[0]
    y[:, 2] -= 1.0
    y[1:3, ::2] *= -1.0
    y[[0, 4], [1, 3]] += 10.0
    y[2][3] += 7.0
    return y


def test_indexed_updates_match_numpy() -> None:
    _same(indexed_updates, X)
    _same(indexed_updates_2d, M)


def test_updates_at_traced_indices() -> None:
    def f(m, i):
        y = m * 1.0
        y[i] += 1.0  # a row at a traced index
        row = y[i + 1]
        row *= 2.0  # written through to y
        y[i, i] -= 3.0
        return y

    for i in (0, 2):
        np.testing.assert_allclose(cofactor.qjit(f)(M, i), f(M.copy(), i), rtol=1e-13)


def test_a_view_at_a_traced_index_read_after_a_write_is_refused() -> None:
    def f(m, i):
        y = m * 1.0
        row = y[i]
        y[0, 0] = 5.0
        return row

    with pytest.raises(CompileError, match="traced index"):
        cofactor.qjit(f)(M, 0)


def test_real_part_view_of_a_complex_array_written_is_refused() -> None:
    def f(x):
        c = x * (1.0 + 1.0j)
        r = np.real(c)
        r += 1.0
        return c

    with pytest.raises(CompileError, match="shares memory"):
        cofactor.qjit(f)(X)


# -- out=, copyto, put, place, fill, sort ---------------------------------------------------
def out_arguments(m):
    y = m * 1.0
    np.add(y, 1.0, out=y)
    v = y[::2]
    np.multiply(v, 2.0, out=v)
    np.negative(y[1], out=y[1])
    r = np.sin(y[0], out=y[4])
    return y, r


def copy_put_place_fill(m):
    y = m * 1.0
    np.copyto(y[0], m[1])
    np.copyto(y[1], 0.0, where=m[1] > 1.0)
    np.put(y, [0, 7, 24], [-1.0, -2.0])
    np.place(y, np.arange(25).reshape(5, 5) % 3 == 0, [5.0, 6.0])
    y[2].fill(0.25)
    np.fill_diagonal(y, 8.0)
    return y


def sort_in_place(m):
    y = m[::-1] * 1.0
    y[1].sort()
    v = y[:, 2]
    v.sort()
    return y


@pytest.mark.parametrize("f", [out_arguments, copy_put_place_fill, sort_in_place])
def test_numpy_functions_that_write(f) -> None:
    _same(f, M)


def test_copyto_casting_is_numpys() -> None:
    def f(x):
        n = x.astype(int)
        np.copyto(n, x)  # float -> int: same_kind refuses
        return n

    with pytest.raises(TypeError):
        cofactor.qjit(f)(X)


# -- loops ------------------------------------------------------------------------------------
def python_loop(m):
    y = m * 1.0
    row = y[1]
    for k in range(3):
        row += k
        y[0] -= row
        y *= 0.5
    return y, row


def test_python_loops() -> None:
    _same(python_loop, M)


def test_for_loop_and_while_loop_carried_values_written_in_place() -> None:
    def f(x):
        @cofactor.for_loop(0, 3, 1)
        def body(i, acc):
            acc += x
            acc[0] *= 2.0
            v = acc[1:]
            v -= 0.5
            return acc

        @cofactor.while_loop(lambda a, n: n < 2)
        def grow(a, n):
            a *= 1.5
            return a, n + 1

        return grow(body(x * 1.0), 0)[0]

    acc = X * 1.0
    for _ in range(3):
        acc += X
        acc[0] *= 2.0
        acc[1:] -= 0.5
    np.testing.assert_allclose(cofactor.qjit(f)(X), acc * 1.5 * 1.5, rtol=1e-13)


def test_a_loop_body_writing_into_an_array_from_outside_is_refused() -> None:
    def f(x):
        y = x * 2.0

        @cofactor.for_loop(0, 3, 1)
        def body(i, s):
            y[0] += s
            return s + 1.0

        body(0.0)
        return y

    with pytest.raises(CompileError, match="made outside the cofactor.for_loop"):
        cofactor.qjit(f)(X)


def test_a_loops_initial_value_written_by_the_body_and_read_later_is_refused() -> None:
    def f(x):
        a = x * 1.0

        @cofactor.for_loop(0, 3, 1)
        def body(i, acc):
            acc += 1.0
            return acc

        r = body(a)
        return r, a  # numpy: `a` is `r`, changed; cofactor passed a copy

    with pytest.raises(CompileError, match="written in place inside the cofactor.for_loop"):
        cofactor.qjit(f)(X)


# -- QNodes -------------------------------------------------------------------------------------
dev = qml.device("default.qubit", wires=2)


@qml.qnode(dev)
def circuit_writing_its_argument(w):
    w[0] += 0.5
    w *= 2.0
    v = w[1:]
    v -= 0.25
    qml.RX(w[0], 0)
    qml.RY(w[1], 1)
    qml.CNOT([0, 1])
    qml.RZ(w[2], 1)
    return qml.expval(qml.PauliZ(0) @ qml.PauliY(1))


@qml.qnode(dev)
def circuit_functional(w):
    w = w * 1.0
    w = np.array([w[0] + 0.5, w[1], w[2]]) * 2.0
    w = np.array([w[0], w[1] - 0.25, w[2] - 0.25])
    qml.RX(w[0], 0)
    qml.RY(w[1], 1)
    qml.CNOT([0, 1])
    qml.RZ(w[2], 1)
    return qml.expval(qml.PauliZ(0) @ qml.PauliY(1))


W = np.array([0.4, -0.9, 1.3])


def test_qnode_writing_its_argument_matches_default_qubit_and_its_gradient() -> None:
    def f(w):
        return circuit_writing_its_argument(w * 1.0)

    want = circuit_writing_its_argument(W.copy())
    np.testing.assert_allclose(cofactor.qjit(f)(W), want, atol=1e-12)
    grad = cofactor.qjit(cofactor.grad(f))(W)
    want_grad = qml.grad(circuit_functional)(qml.numpy.array(W, requires_grad=True))
    np.testing.assert_allclose(grad, want_grad, atol=1e-10)


def test_caller_reading_an_array_its_qnode_wrote_is_refused() -> None:
    def f(w):
        y = w * 1.0
        e = circuit_writing_its_argument(y)
        return e, y  # default.qubit: y changed by the circuit

    with pytest.raises(CompileError, match="written in place inside the QNode"):
        cofactor.qjit(f)(W)


# -- gradients ---------------------------------------------------------------------------------
def test_gradients_through_in_place_updates_match_the_functional_program() -> None:
    def inplace(x):
        y = x * x
        t = y[1:]
        t *= x[0]
        y[0] += np.sin(x[2])
        z = y
        z /= 1.0 + x[3] ** 2
        np.add(y, y[::-1], out=y)
        return np.sum(y * np.arange(1.0, 5.0))

    def functional(x):
        y = x * x
        y = np.concatenate([y[:1], y[1:] * x[0]])
        y = np.concatenate([y[:1] + np.sin(x[2]), y[1:]])
        y = y / (1.0 + x[3] ** 2)
        y = y + y[::-1]
        return np.sum(y * np.arange(1.0, 5.0))

    np.testing.assert_allclose(cofactor.qjit(inplace)(X), functional(X), rtol=1e-13)
    g = cofactor.qjit(cofactor.grad(inplace))(X)
    want = cofactor.qjit(cofactor.grad(functional))(X)
    np.testing.assert_allclose(g, want, rtol=1e-12)
    h = 1e-6
    fd = [(functional(X + h * e) - functional(X - h * e)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_the_compiled_programs_arguments_are_copies() -> None:
    """As in Catalyst: writing into an argument inside the program leaves the caller's numpy
    array unchanged (plain numpy would change it)."""

    def f(x):
        x += 1.0
        x[0] = 7.0
        return x

    x = X.copy()
    np.testing.assert_allclose(cofactor.qjit(f)(x), [7.0, *(X[1:] + 1.0)])
    np.testing.assert_array_equal(x, X)


# -- autograph ---------------------------------------------------------------------------------
def branches_and_loops(x, n):
    y = x * 1.0
    for i in range(n):
        y[i] += 1.0
        y *= 1.5
    if x[0] > 0:
        y[0] = 100.0
    else:
        y += 1
    i = 0
    while i < n:
        y[i] *= 2
        i += 1
    return y


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_autograph_branches_and_loops_writing_in_place(sign) -> None:
    """The `else` branch used to see the `if` branch's write (101 instead of 1 in y[0]):
    both branches wrote into the same traced object."""
    compiled = cofactor.qjit(branches_and_loops, autograph=True)
    np.testing.assert_allclose(compiled(sign * X, 3), branches_and_loops(sign * X, 3))


def test_autograph_alias_of_an_array_a_branch_wrote_is_refused() -> None:
    def f(x):
        y = x * 1.0
        z = y
        if x[0] > 0:
            y[0] = 100.0
        return z  # numpy: z is y, changed

    with pytest.raises(CompileError, match="autograph compiled"):
        cofactor.qjit(f, autograph=True)(X)


def test_functions_that_copy_in_numpy_give_arrays_that_writes_do_not_reach_back() -> None:
    """np.round / np.nan_to_num of an int array returned the traced array itself: `r += 1`
    then changed the argument too."""

    def f(x):
        y = (x * 3).astype(int)
        r = np.round(y)
        r += 1
        n = np.nan_to_num(y)
        n *= 2
        b = np.round(y > 0)  # (numpy: float16; cofactor computes it in float64)
        b += 0.5
        return y, r, n, b

    got, want = cofactor.qjit(f)(X), f(X)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_traced_boolean_index_is_a_mask_not_an_integer() -> None:
    """`x[x[0] > 0]` is a mask in numpy (shape (1, 3) or (0, 3)); it used to be read as the
    integer 1 and returned x[1]."""

    def f(x):
        return x[x[0] > 0]

    with pytest.raises(CompileError, match="traced boolean"):
        cofactor.qjit(f)(X)


def test_a_loop_body_writing_into_an_np_zeros_array_from_outside_is_refused() -> None:
    """It used to fail in cofactor-opt with 'use of undeclared SSA value name'."""

    def f(x):
        y = np.zeros(3)

        @cofactor.for_loop(0, 3, 1)
        def body(i, acc):
            y[0] = acc
            return acc + x[0]

        return y, body(0.0)

    with pytest.raises(CompileError, match="made outside the cofactor.for_loop"):
        cofactor.qjit(f)(X)


def test_gradient_through_in_place_writes_in_a_for_loop_body() -> None:
    def inplace(x):
        @cofactor.for_loop(0, 3, 1)
        def body(i, acc):
            acc *= np.cos(x)
            head = acc[:2]
            head += x[2] * x[3]
            return acc

        return np.sum(body(x * 1.0) ** 2)

    def functional(x):
        acc = x * 1.0
        for _ in range(3):
            acc = acc * np.cos(x)
            acc = np.concatenate([acc[:2] + x[2] * x[3], acc[2:]])
        return np.sum(acc**2)

    np.testing.assert_allclose(cofactor.qjit(inplace)(X), functional(X), rtol=1e-13)
    g = cofactor.qjit(cofactor.grad(inplace))(X)
    h = 1e-6
    fd = [(functional(X + h * e) - functional(X - h * e)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_an_np_zeros_loop_initial_value_written_by_the_body() -> None:
    def f(x, read_init):
        y = np.zeros(4)

        @cofactor.for_loop(0, 2, 1)
        def body(i, acc):
            acc[i] = x[i]
            return acc

        r = body(y)
        return (r, y) if read_init else r

    np.testing.assert_allclose(cofactor.qjit(f, static_argnums=1)(X, False), [*X[:2], 0, 0])
    with pytest.raises(CompileError, match="written in place inside the cofactor.for_loop"):
        cofactor.qjit(f, static_argnums=1)(X, True)
