"""Lists and tuples of numbers given to a compiled function are lists and tuples in the
program (tracing/packed.py), as in Python, PennyLane and Catalyst, while numpy functions
see one array. Before, they were arrays: `a + b` added where Python joins."""

import copy

import numpy as np
import pennylane as qml
import pytest

import cofactor


def _both(fn, *args):
    fresh = copy.deepcopy(args)  # (a program may change its list)
    return fn(*args), cofactor.qjit(fn)(*fresh)


def test_list_operators_follow_python():
    want, got = _both(lambda a, b: a + b, [1.0, 2.0], [3.0, 4.0])
    assert isinstance(got, list) and np.allclose(got, want) and len(got) == 4
    want, got = _both(lambda a: (len(a * 2), 2 * a), [0.5, 1.5])
    assert got[0] == 4 and np.allclose(got[1], want[1])
    want, got = _both(lambda t: t + (1.0,), (3.0, 4.0))
    assert isinstance(got, tuple) and np.allclose(got, want)
    want, got = _both(lambda a: a[1:] + a[:1], [1.0, 2.0, 3.0])
    assert np.allclose(got, want)


def test_numpy_sees_one_array():
    def f(a, b):
        return (
            np.sin(a) * 2,
            np.sum(a),
            np.dot(a, a),
            np.stack([a, b]),
            np.array(a) @ np.ones(2),
            np.mean(np.asarray(b)),
        )

    want, got = _both(f, [0.1, 0.2], [0.3, 0.4])
    for w, g in zip(want, got, strict=True):
        assert np.allclose(g, w)


def test_nested_lists():
    def f(m):
        return np.sum(m, axis=0), m[0] + m[1], np.cos(m) @ np.ones((2, 2))

    want, got = _both(f, [[1.0, 2.0], [3.0, 4.0]])
    for w, g in zip(want, got, strict=True):
        assert np.allclose(g, w)
    assert isinstance(got[1], list) and len(got[1]) == 4


def test_a_changed_list_is_what_numpy_sees():
    def f(a, x):
        a[0] = x
        a.append(x * 2)
        return np.sum(a), np.sin(a)

    want, got = _both(f, [1.0, 2.0], 5.0)
    assert np.allclose(got[0], want[0]) and np.allclose(got[1], want[1])


@pytest.mark.parametrize(
    "view",
    [np.ravel, np.asarray, np.array, lambda a: np.reshape(a, (2, 1)), lambda a: np.sin(a)],
)
def test_writing_an_array_made_from_a_list_leaves_the_list(view):
    def f(a):
        v = view(a)
        v[(0,) * v.ndim] = 7.0
        return np.sum(a), v

    want, got = _both(f, [1.0, 2.0])
    assert np.allclose(got[0], want[0]) and np.allclose(got[1], want[1])


def test_a_list_is_no_ufunc_output():
    f = cofactor.qjit(lambda a: np.add(a, 1.0, out=a))
    with pytest.raises(TypeError, match="ArrayType"):
        f([1.0, 2.0])


def test_list_and_tuple_compile_apart():
    f = cofactor.qjit(lambda a: a + a)
    assert isinstance(f([1.0, 2.0]), list)
    assert isinstance(f((1.0, 2.0)), tuple)


dev = qml.device("default.qubit", wires=2)


@qml.qnode(dev)
def circuit(p):
    qml.RX(p[0], 0)
    qml.RY(qml.math.sin(p)[1], 1)  # (numpy sees one array)
    qml.CNOT([0, 1])
    return qml.expval(qml.Z(1))


def test_list_through_a_qnode_and_its_gradient():
    def f(p):
        return circuit(p) + np.sum(np.cos(p))

    p = [0.3, 0.4]
    assert np.isclose(cofactor.qjit(f)(p), f(p))
    g = cofactor.qjit(cofactor.grad(circuit))(p)
    assert isinstance(g, list)  # the argument's structure, as in Catalyst
    want = qml.grad(circuit)(qml.numpy.array(p))
    assert np.allclose(g, want)


def _plain(x):
    if isinstance(x, list | tuple):
        return type(x)(_plain(v) for v in x)
    return float(x)


@pytest.mark.parametrize("ragged", [[1.0, [2.0]], [[1.0], [2.0, 3.0]]])
def test_ragged_lists_stay_pytrees(ragged):
    # ragged nesting is no array: its numbers are separate arguments, as before
    want, got = _both(lambda a: a + a, ragged)
    assert _plain(got) == _plain(want)


_ASARRAY_BOUND_BEFORE = np.asarray  # (bound at import: numpy's own, not the trace's)


def test_numpy_writing_into_a_tracers_array_leaves_the_tracer():
    def f(x):
        v = _ASARRAY_BOUND_BEFORE(x)  # an object array of x's elements
        v[0] = 7.0
        return x * 1.0

    assert np.allclose(cofactor.qjit(f)(np.array([1.0, 2.0])), [1.0, 2.0])


def test_an_argument_of_no_array_type_is_a_type_error():
    # Catalyst (JAX) raises TypeError for a set; CompileTypeError is both
    f = cofactor.qjit(lambda s: len(s))
    with pytest.raises(TypeError, match="argument of type set"):
        f({1.0, 2.0})
    with pytest.raises(cofactor.CompileError):
        f({1.0, 2.0})
