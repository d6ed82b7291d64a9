"""Bad input gives an error code and message in the slot, never a crash, and the slot's
semantics (first error kept, later calls no-ops until cleared, per thread)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cofactor.errors import RuntimeExecutionError

INVALID, OOM, NO_DEVICE, POSTSELECTION, NOT_SUPPORTED = 1, 2, 3, 4, 5


def _no_device_cases(rt):
    return [
        lambda: rt.gate("Hadamard", wires=[0]),
        lambda: rt.expval(0),
        lambda: rt.state(),
        lambda: rt.lib.cf_rt_num_qubits(),
        lambda: rt.tape_start(),
        lambda: rt.named("PauliZ", 0),
        lambda: rt.measure(0),
        lambda: rt.pauli_rot(0.1, "X", [0]),
    ]


def test_no_device(rt):
    for call in _no_device_cases(rt):
        with pytest.raises(RuntimeExecutionError, match="cf_rt_device_acquire") as info:
            call()
            rt.check()  # for the raw library calls
        assert info.value.code == NO_DEVICE


# (setup on a 3-qubit device, call, code, message fragment)
CASES = [
    (lambda rt: rt.gate(99, wires=[0]), INVALID, "unknown gate id 99"),
    (lambda rt: rt.gate(-1, wires=[0]), INVALID, "unknown gate id -1"),
    (lambda rt: rt.gate("RX", [], [0]), INVALID, "RX takes 1 parameter(s), got 0"),
    (lambda rt: rt.gate("Rot", [0.1, 0.2], [0]), INVALID, "Rot takes 3 parameter(s), got 2"),
    (lambda rt: rt.gate("CNOT", wires=[0]), INVALID, "CNOT acts on 2 wire(s), got 1"),
    (lambda rt: rt.gate("MultiRZ", [0.1], []), INVALID, "MultiRZ acts on at least 1 wire(s)"),
    (lambda rt: rt.gate("GlobalPhase", [0.1], [0]), INVALID, "GlobalPhase acts on 0 wire(s)"),
    (
        lambda rt: rt.gate("Hadamard", wires=[3]),
        INVALID,
        "target wire 3 out of range for a device of 3 qubits",
    ),
    (lambda rt: rt.gate("Hadamard", wires=[-1]), INVALID, "target wire -1 out of range"),
    (lambda rt: rt.gate("CNOT", wires=[1, 1]), INVALID, "wire 1 used more than once"),
    (lambda rt: rt.gate("RX", [0.1], [0], ctrls=[0]), INVALID, "wire 0 used more than once"),
    (lambda rt: rt.gate("RX", [0.1], [0], ctrls=[5]), INVALID, "control wire 5 out of range"),
    (lambda rt: rt.gate("RX", [0.1], [0], ctrls=[1], cvals=[2]), INVALID, "control value 2"),
    (lambda rt: rt.unitary(np.diag([1, 2]), [0]), INVALID, "QubitUnitary: matrix is not unitary"),
    (lambda rt: rt.unitary(np.eye(2), [0, 0]), INVALID, "used more than once"),
    (
        lambda rt: (rt.lib.cf_rt_unitary(None, None, 0, 0, None, None, 0), rt.check()),
        INVALID,
        "QubitUnitary: acts on 1..10 wires",
    ),
    (lambda rt: rt.pauli_rot(0.1, "XQ", [0, 1]), INVALID, "may only contain I, X, Y, Z"),
    (lambda rt: rt.pauli_rot(0.1, "XY", [0]), INVALID, "has 2 letter(s) but 1 wire(s)"),
    (lambda rt: rt.hermitian([[1, 1], [0, 1]], [0]), INVALID, "not Hermitian"),
    (lambda rt: rt.hermitian(np.eye(2), [4]), INVALID, "wire 4 out of range"),
    (lambda rt: rt.named("PauliZ", 7), INVALID, "PauliZ: wire 7 out of range"),
    (lambda rt: (rt.lib.cf_rt_obs_named(9, 0), rt.check()), INVALID, "unknown kind 9"),
    (lambda rt: rt.expval(12345), INVALID, "invalid observable handle 12345"),
    (lambda rt: rt.var(-1), INVALID, "invalid observable handle -1"),
    (
        lambda rt: rt.tensor([rt.named("PauliX", 0), rt.named("PauliZ", 0)]),
        INVALID,
        "overlap on wire 0",
    ),
    (lambda rt: rt.probs([0, 0]), INVALID, "used more than once"),
    (lambda rt: rt.probs([3]), INVALID, "out of range"),
    (lambda rt: rt.sample(), INVALID, "sample needs shots > 0"),
    (lambda rt: rt.counts(), INVALID, "counts needs shots > 0"),
    (lambda rt: rt.measure(3), INVALID, "out of range"),
    (lambda rt: rt.measure(0, postselect=2), INVALID, "postselect must be -1, 0 or 1"),
    (lambda rt: rt.measure(0, postselect=1), POSTSELECTION, "has probability 0"),
    (lambda rt: rt.set_state(np.ones(8)), INVALID, "not normalised"),
    (lambda rt: rt.tape_stop(), INVALID, "not recording"),
    (lambda rt: rt.adjoint_jacobian([rt.named("PauliZ", 0)]), INVALID, "no tape recorded"),
    (lambda rt: rt.replay_shifted(0, 0.1), INVALID, "no tape recorded"),
    (
        lambda rt: (rt.tape_start(), rt.gate("RX", [1.0], [0]), rt.replay_shifted(0, 0.1)),
        INVALID,
        "stop the tape",
    ),
    (
        lambda rt: (rt.tape_start(), rt.tape_stop(), rt.replay_shifted(0, 0.1)),
        INVALID,
        "parameter index 0 out of range",
    ),
    (
        lambda rt: (rt.tape_start(), rt.set_state(np.eye(8)[0])),
        NOT_SUPPORTED,
        "while the tape records",
    ),
]


@pytest.mark.parametrize("call,code,fragment", CASES, ids=[c[2] for c in CASES])
def test_bad_input(rt, call, code, fragment):
    rt.acquire(3)
    with pytest.raises(RuntimeExecutionError) as info:
        call(rt)
    assert info.value.code == code
    assert fragment in str(info.value)
    # the process and the device survive: the slot was cleared by check_error
    assert rt.error() == (0, "")
    rt.acquire(3)
    rt.gate("PauliX", wires=[2])
    assert rt.state()[1] == 1


@pytest.mark.parametrize(
    "n,code,fragment",
    [
        (-1, INVALID, "negative number of qubits"),
        (60, OOM, "at most 50 qubits"),
        (45, OOM, "MiB of memory are available"),
    ],
)
def test_acquire_errors(rt, n, code, fragment):
    status = rt.acquire(n, check=False)
    assert status == code
    got, message = rt.error()
    assert got == code and fragment in message
    rt.clear()
    assert rt.acquire(2) == 0


def test_negative_shots(rt):
    assert rt.acquire(2, shots=-5, check=False) == INVALID
    assert "negative number of shots" in rt.error()[1]


def test_stale_handle_after_reacquire(rt):
    rt.acquire(2)
    h = rt.named("PauliZ", 0)
    rt.acquire(2)
    with pytest.raises(RuntimeExecutionError, match="invalid observable handle"):
        rt.expval(h)


def test_first_error_kept_and_later_calls_are_noops(rt):
    rt.acquire(2)
    rt.gate("Hadamard", wires=[5], check=False)
    rt.gate("RX", [], [0], check=False)  # a second error: not recorded
    rt.gate("PauliX", wires=[0], check=False)  # valid, but a no-op while an error is pending
    assert np.isnan(rt.lib.cf_rt_expval(0))
    assert rt.lib.cf_rt_device_acquire(2, 0, 0) == INVALID  # returns the pending code
    code, message = rt.error()
    assert code == INVALID and "target wire 5" in message
    rt.clear()
    assert rt.state()[0] == 1  # PauliX was not applied


def test_error_slot_and_device_are_per_thread(rt):
    rt.acquire(2)
    result = {}

    def other():
        result["qubits"] = rt.lib.cf_rt_num_qubits()
        result["error"] = rt.error()
        rt.clear()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert result["qubits"] == -1 and result["error"][0] == NO_DEVICE
    assert rt.error() == (0, "") and rt.n() == 2


def test_release_is_idempotent_and_works_with_pending_error(rt):
    rt.release()
    rt.acquire(1)
    rt.gate("Hadamard", wires=[3], check=False)
    rt.release()
    assert rt.error()[0] == INVALID
    rt.clear()
    rt.gate("Hadamard", wires=[0], check=False)
    assert rt.error()[0] == NO_DEVICE
