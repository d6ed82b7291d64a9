"""Ctrl-C (D10): SIGINT during a long compiled loop raises KeyboardInterrupt within a
fraction of a second, and the next call works.

The signal tests run in a subprocess (a SIGINT must never reach the pytest process); the
script sends SIGINT to itself about a second into each loop and reports how long the
KeyboardInterrupt took to arrive. Compiled loops check the runtime's interrupt counter at
every iteration, so the gradient tests at the end make sure Enzyme still differentiates
loops that carry that check."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import for_loop, grad, while_loop

pytestmark = pytest.mark.needs_toolchain

#: generous for a loaded machine; measured: a few milliseconds
MAX_LATENCY_S = 1.0

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, threading, time
    import pennylane as qml
    import cofactor
    from cofactor import for_loop, while_loop

    @cofactor.qjit
    def classical(n, x):
        @for_loop(0, n, 1)
        def body(i, acc):
            return acc * 0.999999 + 1e-6 * i
        return body(x)

    endless = cofactor.qjit(
        lambda x: while_loop(lambda v: v > -1.0)(lambda v: v * 0.5 + 1.0)(x))

    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=2))
    def quantum(n, x):
        @for_loop(0, n, 1)
        def body(i):
            qml.RX(x, wires=0)
            qml.CNOT(wires=[0, 1])
        body()
        return qml.expval(qml.PauliZ(0))

    report = {"small": [classical(3, 2.0), quantum(3, 0.3)]}
    endless(-5.0)  # compiled (and returns at once: the condition is false)
    sent = {}

    def fire():
        sent["t"] = time.perf_counter()
        os.kill(os.getpid(), signal.SIGINT)

    for name, call in (
        ("for_loop", lambda: classical(10**13, 2.0)),
        ("while_loop", lambda: endless(1.0)),
        ("quantum", lambda: quantum(10**12, 0.3)),
    ):
        threading.Timer(1.0, fire).start()
        try:
            call()
            report[name] = "returned"
        except KeyboardInterrupt:
            report[name] = time.perf_counter() - sent["t"]
        report[name + " next"] = [classical(3, 2.0), quantum(3, 0.3)]

    # a loop in another thread runs on (Python interrupts the main thread only)
    worker = {}
    th = threading.Thread(target=lambda: worker.update(r=classical(4 * 10**7, 2.0)))
    th.start()
    time.sleep(0.2)
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        report["main"] = "not interrupted"
    except KeyboardInterrupt:
        report["main"] = "interrupted"
    th.join()
    report["worker"] = worker.get("r")
    report["worker expected"] = classical(4 * 10**7, 2.0)
    print(json.dumps(report))
    """
)


def test_sigint_stops_compiled_loops_and_the_next_call_works():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    small = report["small"]
    acc = 2.0
    for i in range(3):
        acc = acc * 0.999999 + 1e-6 * i
    assert small[0] == pytest.approx(acc, rel=1e-14)
    assert small[1] == pytest.approx(_quantum_reference(3, 0.3), abs=1e-12)
    for name in ("for_loop", "while_loop", "quantum"):
        latency = report[name]
        assert isinstance(latency, float), f"{name}: {latency}"
        assert 0 <= latency < MAX_LATENCY_S, f"{name}: KeyboardInterrupt after {latency:.3f} s"
        assert report[name + " next"] == small, name
    assert report["main"] == "interrupted"
    assert report["worker"] == report["worker expected"]


def _quantum_reference(n: int, x: float) -> float:
    @qml.qnode(qml.device("default.qubit", wires=2))
    def quantum(x):
        for _ in range(n):
            qml.RX(x, wires=0)
            qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(0))

    return float(quantum(x))


# ---- Enzyme differentiates loops that carry the interrupt check -------------------------------
def test_grad_through_a_while_loop():
    @cofactor.qjit
    def dg(x):
        def f(x):
            def body(v):
                return (v[0] * 1.5 + np.sin(v[0]), v[1] + 1)

            return while_loop(lambda v: v[1] < 4)(body)((x, 0))[0]

        return grad(f)(x)

    def ref(x):
        d = 1.0
        for _ in range(4):
            d *= 1.5 + np.cos(x)
            x = x * 1.5 + np.sin(x)
        return d

    assert dg(0.3) == pytest.approx(ref(0.3), rel=1e-12)


def test_grad_of_a_circuit_with_a_for_loop():
    @qml.qnode(qml.device("lightning.qubit", wires=1))
    def circuit(x):
        @for_loop(0, 3, 1)
        def body(i):
            qml.RX(x * (i + 1), wires=0)

        body()
        return qml.expval(qml.PauliZ(0))

    assert cofactor.qjit(grad(circuit))(0.4) == pytest.approx(-6 * np.sin(2.4), abs=1e-12)
