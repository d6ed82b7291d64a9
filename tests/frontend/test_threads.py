"""Threads (D4, D6): a compile in one thread never changes what another thread computes, and
one compiled function called from several threads at once is right in every thread.

Every test bounds its work by iteration counts (seconds, not minutes); the threads are
started together behind a barrier so that their calls really overlap (ctypes releases the
GIL while compiled code runs)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import for_loop, pure_callback
from cofactor.tracing import context

pytestmark = pytest.mark.needs_toolchain


def run_threads(work: Callable[[int], None], n: int) -> None:
    """Run work(0..n-1) in n threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def target(t: int) -> None:
        try:
            barrier.wait()
            work(t)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=target, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
        assert not th.is_alive(), "a thread did not finish"
    if errors:
        raise errors[0]


def rx_qnode(wires: int = 1, **kwargs) -> qml.QNode:
    @qml.qnode(qml.device("lightning.qubit", wires=wires, **kwargs))
    def plain(x):
        qml.RX(x, wires=0)
        return qml.expval(qml.PauliZ(0))

    return plain


# ---- D4: tracing state is per thread --------------------------------------------------------
def test_other_threads_see_no_trace_while_one_thread_traces():
    """While the main thread traces, another thread is not tracing: PennyLane's compiler
    hook says so, its compiled functions run, and its plain QNodes execute."""
    plain = rx_qnode()
    done = cofactor.qjit(lambda x: x * 3.0)
    done(1.0)
    seen = {}

    def other():
        seen["is_tracing"] = context.is_tracing()
        seen["active"] = qml.compiler.active()
        seen["active_compiler"] = qml.compiler.active_compiler()
        seen["compiled"] = done(2.0)
        seen["plain"] = plain(0.4)

    def traced(x):
        seen["inside"] = (context.is_tracing(), qml.compiler.active())
        th = threading.Thread(target=other)  # during the trace, outside any QNode body
        th.start()
        th.join()
        return plain(x) * 2.0

    f = cofactor.qjit(traced)
    assert f(0.4) == pytest.approx(2 * np.cos(0.4))
    assert seen["inside"] == (True, True)
    assert seen["is_tracing"] is False
    assert seen["active"] is False
    assert seen["active_compiler"] is None
    assert type(seen["compiled"]) is np.float64 and seen["compiled"] == 6.0
    assert isinstance(seen["plain"], float | np.floating)
    assert seen["plain"] == pytest.approx(np.cos(0.4))
    # and nothing is left patched once the trace is over
    assert qml.QNode.__call__.__name__ == "__call__"


def _sum_of_circuits(circuit: qml.QNode, terms: int) -> Callable:
    return lambda x: sum(circuit(x * j) for j in range(terms))


def test_compiles_in_one_thread_do_not_disturb_another():
    """The D4 reproducer: a thread calls a compiled function and a plain QNode in a loop
    while the main thread compiles QNode programs."""
    plain = rx_qnode()
    f = cofactor.qjit(lambda x: plain(x) * 2.0)
    expected_f, expected_plain = f(0.3), plain(0.3)
    stop = threading.Event()
    bad: list[str] = []
    calls = [0]

    def other():
        while not stop.is_set():
            for g, want in ((f, expected_f), (plain, expected_plain)):
                try:
                    r = g(0.3)
                    if not isinstance(r, float | np.floating) or r != pytest.approx(want):
                        bad.append(repr(r))
                except Exception as err:  # noqa: BLE001 - collected and asserted
                    bad.append(f"{type(err).__name__}: {err}")
                calls[0] += 1

    th = threading.Thread(target=other)
    th.start()
    try:
        for k in range(3):
            terms = 10 + k  # a new program each time (the count is baked in)
            g = cofactor.qjit(_sum_of_circuits(plain, terms))
            want = sum(np.cos(0.1 * j) for j in range(terms))
            assert g(0.1) == pytest.approx(want)
    finally:
        stop.set()
        th.join()
    assert calls[0] > 0
    assert bad == []


def test_four_functions_compiled_at_once_in_four_threads():
    plain = rx_qnode()

    def make(t: int) -> cofactor.QJIT:
        @cofactor.qjit
        def fn(x):
            @for_loop(0, t + 2, 1)
            def body(i, acc):
                return acc + plain(x * i)

            return body(0.0) + t

        return fn

    for _ in range(2):
        fns = [make(t) for t in range(4)]
        results: dict[int, float] = {}

        def work(t: int, fns=fns, results=results) -> None:
            results[t] = fns[t](0.2)

        run_threads(work, 4)
        for t in range(4):
            want = sum(np.cos(0.2 * i) for i in range(t + 2)) + t
            assert results[t] == pytest.approx(want)


# ---- D6: one compiled function, several threads ---------------------------------------------
def test_one_classical_function_in_eight_threads():
    g = cofactor.qjit(lambda a, b: a * 1000.0 + b)
    g(0.0, 0.0)
    wrong = [0] * 8

    def work(t: int) -> None:
        for i in range(3000):
            wrong[t] += g(float(t), i * 0.5) != t * 1000.0 + i * 0.5

    run_threads(work, 8)
    assert wrong == [0] * 8


def test_one_function_with_array_results_in_threads():
    h = cofactor.qjit(lambda v, s: (v * s, np.sum(v) + s))
    h(np.zeros(3), 1.0)

    def work(t: int) -> None:
        v = np.arange(3.0) + t
        for i in range(1000):
            arr, total = h(v, float(i))
            np.testing.assert_array_equal(arr, v * i)
            assert total == v.sum() + i

    run_threads(work, 6)


def test_one_qnode_function_in_threads():
    circuit = cofactor.qjit(rx_qnode(wires=2))
    circuit(0.1)

    def work(t: int) -> None:
        for i in range(300):
            x = 0.01 * t + 0.001 * i
            assert circuit(x) == pytest.approx(np.cos(x), abs=1e-12)

    run_threads(work, 4)


def test_shots_with_a_seed_are_reproducible_in_every_thread():
    @cofactor.qjit(seed=11)
    @qml.set_shots(200)
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def sampled(x):
        qml.RX(x, wires=0)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1)), qml.sample(wires=[0, 1])

    ref_value, ref_samples = sampled(1.1)
    assert sampled(1.1)[0] == ref_value  # each call starts from the seed
    assert 0 < np.count_nonzero(ref_samples[:, 0]) < 200

    def work(t: int) -> None:
        for _ in range(40):
            value, samples = sampled(1.1)
            assert value == ref_value
            np.testing.assert_array_equal(samples, ref_samples)

    run_threads(work, 4)


def test_callbacks_in_threads_keep_their_own_results_and_errors():
    @pure_callback
    def checked(x) -> float:
        if x < 0:
            raise ValueError(f"negative input {float(x)}")
        return float(x) ** 0.5

    f = cofactor.qjit(lambda x: checked(x) * 2.0 + 1.0)
    f(1.0)

    def work(t: int) -> None:
        for i in range(150):
            if t % 2:  # odd threads always fail, even ones never
                with pytest.raises(ValueError, match="negative input"):
                    f(-1.0 - i)
            else:
                x = float(t + i)
                assert f(x) == pytest.approx(2 * x**0.5 + 1)

    run_threads(work, 4)
    assert f(4.0) == 5.0


def test_a_callback_may_call_the_compiled_function_it_runs_in():
    """Re-entrant calls of one compiled function (from its own callback) get their own
    buffers: the outer call's inputs and outputs are not overwritten."""
    inner_results = []

    @pure_callback
    def again(x) -> float:
        if x < 100:
            inner_results.append(f(x + 100.0, 5.0))
        return float(x)

    f = cofactor.qjit(lambda x, y: again(x) * 10.0 + y)
    assert f(3.0, 1.0) == 31.0
    assert inner_results == [1035.0]


def test_gradients_in_threads():
    """The runtime's tape (adjoint Jacobian) and Enzyme's residual tapes are per call."""
    circuit = rx_qnode(wires=2)
    dcircuit = cofactor.qjit(cofactor.grad(lambda x: circuit(x) * circuit(2 * x)))
    dcircuit(0.1)

    def ref(x: float) -> float:
        return -np.sin(x) * np.cos(2 * x) - 2 * np.cos(x) * np.sin(2 * x)

    def work(t: int) -> None:
        for i in range(200):
            x = 0.1 * t + 0.003 * i
            assert dcircuit(x) == pytest.approx(ref(x), abs=1e-10)

    run_threads(work, 4)
