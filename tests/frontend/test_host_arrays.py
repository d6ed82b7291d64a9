"""A9: numpy arrays made in a traced program take traced values (tracing/host_arrays.py).

`y = np.zeros(n); y[i:j] = x` with a traced `x`, and the other constructors (ones, empty,
full, *_like, eye, identity): values as numpy's (dtype rules of assignment included),
gradients as autograd's, and numpy's behaviour kept where no traced value is written
(Python control flow on the values, PennyLane operators built from them).
"""

from __future__ import annotations

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor.errors import CompileError

pytestmark = [
    pytest.mark.needs_toolchain,
    pytest.mark.filterwarnings("ignore:Output seems independent of input"),
]

X = np.array([0.3, -1.2, 2.5, 0.7])


def slices(x):
    y = np.zeros(6)
    y[1:5] = x
    y[0] = x[0] * 2
    return y


def float_into_int_truncates(x):
    y = np.zeros(4, dtype=int)
    y[:] = x * 3
    z = np.ones(4, dtype=bool)
    z[1:] = x[1:] > 0
    return y, z


def matrix_rows_and_elements(x):
    m = np.zeros((4, 4))
    for i in range(4):
        m[i, i] = x[i]
        m[i, (i + 1) % 4] = np.sin(x[i])
    m[3] = x[::-1]
    return m @ x


def in_place_operators(x):
    y = np.ones(4)
    y += x
    y *= 2
    return y


def full_and_like(x):
    a = np.full(3, x[0])
    b = np.full_like(x, x[1])
    c = np.full((2, 2), x[2], dtype=int)
    d = np.zeros_like(np.arange(4.0))
    d[2] = x[3]
    e = np.eye(3)
    e[0, 1] = x[0]
    return a, b, c, d, e


def concrete_values_stay_numpy(x):
    y = np.zeros(3)
    y[1] = 2.0
    scale = float(y.sum()) if y[1] > 1 else 0.0  # Python control flow on the values
    z = y.copy()
    z[0] = x[0]  # a copy takes traced values too
    w = y * 2 + 1
    w[1] = x[1]
    return x * scale + y.mean(), y, z, w


def traced_index_and_fancy_keys(x):
    y = np.zeros(5)
    y[np.argmax(x)] = 1.0
    y[[0, 2]] += x[1:3]
    y[-1] = x[0]
    return y


def inside_a_loop(x):
    def body(i, acc):
        y = np.zeros(4)
        y[0] = acc[0]
        y[1:] = acc[1:] * 2
        return y

    return cofactor.for_loop(0, 3, 1)(body)(x)


def untouched(x):
    return np.zeros((2, 3)), np.ones(2, dtype=int) + 1, np.empty(0)


@pytest.mark.parametrize(
    "f",
    [
        slices,
        float_into_int_truncates,
        matrix_rows_and_elements,
        in_place_operators,
        full_and_like,
        concrete_values_stay_numpy,
        traced_index_and_fancy_keys,
        inside_a_loop,
        untouched,
    ],
)
def test_values_match_numpy(f) -> None:
    got, want = cofactor.qjit(f)(X), f(X.copy())
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-14)


def test_gradient_matches_autograd() -> None:
    def f(x):
        y = np.zeros(6)
        y[1:5] = np.sin(x)
        y[0] = x[0] * x[1]
        m = np.zeros((2, 2))
        m[0] = y[:2]
        m[1, 1] = y[3]
        return np.sum(y**2) + np.sum(m @ y[2:4])

    def reference(x):  # the same function, built without in-place writes for autograd
        pnp = qml.numpy
        y = pnp.concatenate([pnp.stack([x[0] * x[1]]), pnp.sin(x), pnp.zeros(1)])
        m = pnp.stack([y[:2], pnp.stack([0.0 * x[0], y[3]])])
        return pnp.sum(y**2) + pnp.sum(m @ y[2:4])

    got = cofactor.qjit(cofactor.grad(f))(X)
    want = qml.grad(reference)(qml.numpy.array(X, requires_grad=True))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_pennylane_operators_from_numpy_arrays_and_traced_parameters() -> None:
    def make(np_, device, traced_writes):
        @qml.qnode(qml.device(device, wires=2))
        def circuit(x):
            h = np_.zeros((2, 2))
            h[0, 1] = h[1, 0] = 1.0
            state = np_.zeros(4)
            state[0] = 1.0
            qml.StatePrep(state, wires=[0, 1])
            qml.BasisState(np_.zeros(2, dtype=int), wires=[0, 1])
            qml.QubitUnitary(np_.eye(2), wires=0)
            if traced_writes:
                p = np_.zeros(3)
                p[0] = x[0]
                p[1:] = x[1:3] * 2
            else:
                p = np_.stack([x[0], 2 * x[1], 2 * x[2]])
            qml.Rot(*p, wires=0)
            qml.RY(p[1], wires=1)
            coeffs = np_.ones(2) * 0.5
            ham = qml.Hamiltonian(coeffs, [qml.PauliZ(0), qml.PauliX(1)])
            return qml.expval(qml.Hermitian(h, wires=0)), qml.expval(ham)

        return circuit

    circuit = make(np, "lightning.qubit", True)
    reference_circuit = make(qml.numpy, "default.qubit", False)

    def compiled(x):
        a, b = circuit(x)
        return a + 2 * b

    def reference(x):
        a, b = reference_circuit(x)
        return a + 2 * b

    x = qml.numpy.array(X, requires_grad=True)
    np.testing.assert_allclose(cofactor.qjit(compiled)(X), reference(x), rtol=1e-12)
    np.testing.assert_allclose(
        cofactor.qjit(cofactor.grad(compiled))(X), qml.grad(reference)(x), atol=1e-12
    )


def test_refusals_say_what_to_do() -> None:
    def complex_into_float(x):
        y = np.zeros(4)
        y[0] = x[0] * 1j  # numpy: TypeError
        return y

    with pytest.raises(TypeError, match="cannot write complex values"):
        cofactor.qjit(complex_into_float)(X)

    def complex_added_to_float(x):
        y = np.zeros(4)
        y += x * 1j  # numpy: UFuncTypeError (same_kind casting)
        return y

    with pytest.raises(TypeError, match="same_kind"):
        cofactor.qjit(complex_added_to_float)(X)

    def live_view(x):
        y = np.zeros(4)
        v = y[:2]  # numpy's view would show the traced value written next
        y[0] = x[0]
        return v

    def live_asarray(x):
        y = np.zeros(4)
        v = np.asarray(y)  # numpy: the same array
        y[0] = x[0]
        return v

    for f in (live_view, live_asarray):
        with pytest.raises(CompileError, match="a view of it"):
            cofactor.qjit(f)(X)

    def to_a_plain_array(x):
        y = np.zeros(4)
        y[0] = x[0]
        z = np.arange(4.0)  # not a constructor that hands over its array
        z[:] = y  # numpy would need the numbers: refused, never the stale zeros
        return z

    with pytest.raises(CompileError):
        cofactor.qjit(to_a_plain_array)(X)

    def augmented_slice(x):
        y = np.zeros(4)
        y[1:] += x[1:]  # numpy's y[1:] is a view written in place: not followed
        return y

    with pytest.raises(CompileError, match=r"y\[k\] = y\[k\] \+ x"):
        cofactor.qjit(augmented_slice)(X)


# -- across boundaries: into a QNode (it used to close over the caller's values: invalid
# IR), through a loop carry, returned

A = np.array([0.3, -0.8, 1.1])


def _circuit(device_name: str):
    @qml.qnode(qml.device(device_name, wires=3))
    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        qml.CNOT([0, 1])
        qml.RZ(x[2], 2)
        qml.CNOT([1, 2])
        qml.RY(x[2], 2)
        return qml.expval(qml.PauliZ(2))

    return circuit


OURS, REFERENCE = _circuit("lightning.qubit"), _circuit("default.qubit")


def hybrid(a, circuit=OURS, np=np):
    y = np.zeros(3)
    y[0] = np.sin(a[0])
    y[1:] = a[1:] ** 2
    return circuit(y) * np.sum(a)


def reference(a):
    pnp = qml.numpy
    y = pnp.stack([pnp.sin(a[0]), a[1] ** 2, a[2] ** 2])
    return REFERENCE(y) * pnp.sum(a)


def test_an_array_filled_with_traced_values_goes_into_a_qnode() -> None:
    a = qml.numpy.array(A)
    np.testing.assert_allclose(cofactor.qjit(hybrid)(A), reference(a), rtol=1e-12)
    np.testing.assert_allclose(
        cofactor.qjit(cofactor.grad(hybrid))(A), qml.grad(reference)(a), rtol=1e-10
    )


def test_an_array_filled_with_traced_values_through_a_loop_and_returned() -> None:
    def f(a):
        y = np.zeros(3)
        y[1] = a[0]

        @cofactor.for_loop(0, 3, 1)
        def body(i, acc):
            return acc * 2.0 + a

        return body(y), y

    def plain(a):
        y = np.zeros(3)
        y[1] = a[0]
        acc = y
        for _ in range(3):
            acc = acc * 2.0 + a
        return acc, y

    for got, want in zip(cofactor.qjit(f)(A), plain(A), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_outside_qjit_numpy_is_untouched() -> None:
    cofactor.qjit(slices)(X)
    assert type(np.zeros(3)) is np.ndarray
    assert type(np.full(2, 1.0)) is np.ndarray
