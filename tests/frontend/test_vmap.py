"""`cofactor.vmap` (Catalyst's vectorising map) against per-element calls of uncompiled
PennyLane / numpy, and Catalyst's argument checks (catalyst/api_extensions/function_maps.py)."""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

from cofactor import cond, for_loop, grad, qjit, vmap

pytestmark = pytest.mark.needs_toolchain


def _circuit_fn(x, y):
    qml.RX(np.pi * x[0] + y, wires=0)
    qml.RY(x[1] ** 2, wires=0)
    qml.RX(x[1] * x[2], wires=0)
    return qml.expval(qml.PauliZ(0)), qml.probs(wires=0)


X = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9], [1.0, -0.3, 0.2]])
Y = np.array([np.pi, np.pi / 2, np.pi / 4, 0.3])


def test_qnode_batched_matches_pennylane_per_element():
    compiled_qnode = qml.qnode(qml.device("lightning.qubit", wires=1))(_circuit_fn)
    reference = qml.qnode(qml.device("default.qubit", wires=1))(_circuit_fn)
    ev, probs = qjit(vmap(compiled_qnode))(X, Y)
    assert ev.shape == (4,) and probs.shape == (4, 2)
    for k in range(4):
        want_ev, want_probs = reference(X[k], Y[k])
        assert ev[k] == pytest.approx(want_ev)
        np.testing.assert_allclose(probs[k], want_probs, atol=1e-10)
    # Catalyst's docstring values for the first three rows
    np.testing.assert_allclose(ev[:3], [-0.93005586, -0.97165424, -0.6987465], atol=1e-7)


def test_traced_once_ir_does_not_grow_with_batch():
    """The body is traced once into a loop: the circuit is called once in the IR, whose
    size does not depend on the batch size."""
    qnode = qml.qnode(qml.device("lightning.qubit", wires=1))(_circuit_fn)
    sizes = {}
    for n in (2, 8):
        f = qjit(vmap(qnode, in_axes=(0, None)))
        ev, _ = f(np.tile(X[:1], (n, 1)), 0.5)
        assert ev.shape == (n,)
        assert f.mlir.count("call @") == 1
        sizes[n] = len(f.mlir)
    # inputs are read and outputs written in memory at the loop index: nothing grows
    assert abs(sizes[8] - sizes[2]) < 16


def test_in_axes_none_pytrees_and_out_axes():
    def fn(a, b, c):
        return a * b + c["k"][0], {"s": a.sum(), "b": b}

    a = np.arange(6.0).reshape(2, 3)
    b = np.array([1.0, 2.0])
    c = {"k": (np.array([10.0, 20.0, 30.0]),)}
    spec = dict(in_axes=(1, None, {"k": (0,)}), out_axes=(1, {"s": 0, "b": None}))
    got = qjit(vmap(fn, **spec))(a, b, c)
    want_rows = [fn(a[:, i], b, {"k": (c["k"][0][i],)}) for i in range(3)]
    np.testing.assert_allclose(got[0], np.stack([w[0] for w in want_rows], axis=1))
    np.testing.assert_allclose(got[1]["s"], [w[1]["s"] for w in want_rows])
    np.testing.assert_allclose(got[1]["b"], b)  # out_axes None: not batched
    # the same outside qjit (a Python loop)
    py = vmap(fn, **spec)(a, b, c)
    np.testing.assert_allclose(py[0], got[0])
    np.testing.assert_allclose(py[1]["s"], got[1]["s"])


def test_negative_axes_axis_size_and_decorator_form():
    @qjit
    def f(m):
        @vmap(in_axes=-1, out_axes=-1, axis_size=2)
        def g(col):
            return np.outer(col, np.array([1.0, -1.0]))

        return g(m)

    m = np.arange(12.0).reshape(4, 3)
    got = f(m)
    # Catalyst's axis_size: only the first `axis_size` elements are mapped
    want = np.stack([np.outer(m[:, i], [1.0, -1.0]) for i in range(2)], axis=-1)
    assert got.shape == (4, 2, 2)
    np.testing.assert_allclose(got, want)


def test_vmap_inside_qnode_of_classical_preprocessing_and_in_grad_free_loop():
    dev = qml.device("lightning.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(w):
        angles = vmap(lambda r: np.sin(r[0]) * r[1])(w)
        qml.RX(angles[0], wires=0)
        qml.RY(angles[1], wires=1)
        return qml.expval(qml.Z(0) @ qml.Z(1))

    w = np.array([[0.3, 2.0], [1.1, -0.5]])
    ref = qml.qnode(qml.device("default.qubit", wires=2))(
        lambda w: (
            qml.RX(np.sin(w[0, 0]) * w[0, 1], wires=0),
            qml.RY(np.sin(w[1, 0]) * w[1, 1], wires=1),
            qml.expval(qml.Z(0) @ qml.Z(1)),
        )[-1]
    )
    assert qjit(circuit)(w) == pytest.approx(ref(w))


def test_integer_and_bool_results_keep_dtype():
    got = qjit(vmap(lambda v: (v > 1.0, (v * 2).astype(int))))(np.array([0.5, 1.5, 3.0]))
    assert got[0].dtype == np.bool_ and list(got[0]) == [False, True, True]
    assert list(got[1]) == [1, 3, 6]


def test_bad_axes_raise_value_error_like_catalyst():
    with pytest.raises(ValueError, match="Invalid 'in_axes'"):
        vmap(lambda x: x, in_axes=(0.5,))
    with pytest.raises(ValueError, match="Invalid 'out_axes'"):
        vmap(lambda x: x, out_axes="a")
    x2, x3 = np.zeros(2), np.zeros(3)
    with pytest.raises(ValueError, match="Invalid batch sizes"):
        qjit(vmap(lambda a, b: a + b[0]))(x2, x3)
    with pytest.raises(ValueError, match="Invalid batch sizes"):
        vmap(lambda a, b: a + b[0])(x2, x3)
    with pytest.raises(ValueError, match="out of bounds"):
        qjit(vmap(lambda a: a, in_axes=1))(x2)
    with pytest.raises(ValueError, match="Invalid 'in_axes'"):
        qjit(vmap(lambda a, b: a, in_axes=(0, None, 0)))(x2, x2)
    with pytest.raises(ValueError, match="Invalid 'axis_size'"):
        qjit(vmap(lambda a: a, axis_size=5))(x2)
    with pytest.raises(ValueError, match="non-zero"):
        qjit(vmap(lambda a: a, in_axes=None))(x2)
    with pytest.raises(ValueError, match="Invalid 'out_axes'"):
        qjit(vmap(lambda a: (a, a), out_axes=(0,)))(x2)


def test_vmap_of_gates_inside_a_qnode_matches_pennylane():
    """A vmapped quantum function applies its gates once per batch element, in order."""

    def layer(w):
        qml.RX(w[0], wires=0)
        qml.CRY(w[1], wires=[0, 1])
        qml.RZ(w[0] * w[1], wires=2)
        return w[0] * 2

    def body(ws):
        doubled = vmap(layer)(ws)
        qml.RY(doubled[1], wires=1)
        return qml.state()

    ws = np.array([[0.1, 0.5], [0.7, -0.2], [0.3, 0.9]])
    compiled = qjit(qml.qnode(qml.device("lightning.qubit", wires=3))(body))
    # uncompiled: cofactor.vmap is a Python loop inside PennyLane's own QNode
    reference = qml.qnode(qml.device("default.qubit", wires=3))(body)
    np.testing.assert_allclose(compiled(ws), reference(ws), atol=1e-10)


def test_grad_through_vmap_of_a_qnode():
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def c(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.Z(0))

    def loss(xs):
        return np.sum(vmap(c)(xs))

    xs = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(qjit(grad(loss))(xs), -np.sin(xs), atol=1e-10)


def test_vmap_in_loops_and_branches_with_complex_results_and_computed_inputs():
    """Output buffers reused by every outer iteration; inputs computed in the trace."""

    def states(x):
        qml.RX(x[0], wires=0)
        qml.RY(x[1], wires=1)
        return qml.state()

    st = qml.qnode(qml.device("lightning.qubit", wires=2))(states)
    reference = qml.qnode(qml.device("default.qubit", wires=2))(states)

    @qjit
    def f(xs, n, flag):
        @for_loop(0, n, 1)
        def body(k, acc):
            return acc + vmap(st)(np.sin(xs) * (k + 1))

        total = body(np.zeros((xs.shape[0], 4), dtype=complex))

        @cond(flag > 0)
        def sums():
            return vmap(lambda r: r.sum())(xs * 2)

        @sums.otherwise
        def _():
            return np.zeros(xs.shape[0])

        return total, sums()

    xs = np.array([[0.1, 0.2], [0.3, -0.4], [1.0, 2.0]])
    total, sums = f(xs, 3, 1)
    want = sum(np.array([reference(np.sin(x) * (k + 1)) for x in xs]) for k in range(3))
    np.testing.assert_allclose(total, want, atol=1e-10)
    np.testing.assert_allclose(sums, (xs * 2).sum(axis=1))
    np.testing.assert_allclose(f(xs, 3, 0)[1], np.zeros(3))


def test_catalyst_error_messages():
    """The cases and messages of Catalyst's own test_vmap.py (incompatible pytrees)."""
    x = np.array([0, 1, 2, 3])
    xx = np.stack([x, x])

    def f(a, b):
        return a, b

    def g(a, b):
        return {"x": a, "y": b}

    cases = [
        (lambda: vmap(f, in_axes=0)(xx, x), "Invalid batch sizes; expected the batch size"),
        (
            lambda: vmap(f, in_axes=[0, {"hi": 0}])(xx, xx),
            "Invalid 'in_axes'; it must be an int or match the length of positional",
        ),
        (
            lambda: vmap(f, in_axes=[0, {"bi": 0}])(xx, {"hi": xx}),
            "Invalid 'in_axes'; it must be an int or match the length of positional",
        ),
        (
            lambda: vmap(g, out_axes=[0, {"hi": 0}])(xx, xx),
            "Invalid 'out_axes'; it must be an int or match the number of function results",
        ),
        (
            lambda: vmap(lambda a: a, axis_size=0)(xx),
            "Invalid batch size; it must be a non-zero integer, but got 0.",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            qjit(call)()
    with pytest.raises(ValueError, match="2 is out of bounds for argument 1"):
        vmap(lambda a, b: a * b, in_axes=(0, 2))(np.zeros(5), np.zeros((2, 5)))
    # unbatched arguments need no shape (Catalyst's test_vmap_with_shapeless_args)
    out = qjit(lambda v: vmap(lambda n, a: n * a, in_axes=(None, 0))(10, v))(xx)
    np.testing.assert_array_equal(out, 10 * xx)


def test_vmap_annotations_do_not_compile_ahead_of_time():
    """A vmapped function's annotations describe one element of the batch, so qjit does not
    compile it from them when decorated (Catalyst: vmap does not allow AOT compilation)."""

    @qjit
    @vmap
    def f(x: float):
        return x**2

    assert f.compile_count == 0
    np.testing.assert_allclose(f(np.array([1.0, 2.0, 3.0])), [1.0, 4.0, 9.0])
    assert f.compile_count == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"in_axes": (0.1, None)}, "Invalid 'in_axes'; it must be an int or a tuple of PyTrees "),
        ({"out_axes": (0.1, None)}, "Invalid 'out_axes'; it must be an int or a tuple of PyTree "),
    ],
)
def test_vmap_invalid_axes_use_catalysts_words(kwargs, match):
    with pytest.raises(ValueError, match=match + "with integer leaves"):
        vmap(lambda x: x, **kwargs)
