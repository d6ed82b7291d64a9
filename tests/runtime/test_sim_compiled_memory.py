"""Compiled code's own buffers are checked like the runtime's: an error, never a crash.

- Address space exhausted (`ulimit -v`, RLIMIT_AS): compiled `qml.state()` copies the state
  into a buffer of its own, whose malloc returned NULL and was written to: a segfault inside
  the compiled function (session 16, sim11's report). Now the runtime's allocator reports
  CF_ERR_OUT_OF_MEMORY and the call returns through cf_rt_call.
- A memory cgroup that fits the state once but not three times: compiled `qml.state()`
  holds the device's state, the compiled buffer cf_rt_state fills and the result array; the
  checks saw one, and the process was OOM-killed. Now the result arrays of the call count
  in every check.

Each case runs in a child process (the limits cannot be undone)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_sim_memory_budget import make_cgroup

REPO = Path(__file__).resolve().parents[2]

CHILD_PRELUDE = """
import os, resource, sys, warnings
import numpy as np, pennylane as qml
import cofactor
warnings.filterwarnings("ignore")

def circuit_of(n, measure):
    @cofactor.qjit
    @qml.qnode(qml.device("lightning.qubit", wires=n))
    def circuit(x):
        for i in range(n):
            qml.RX(x, wires=i)
        return measure(n)
    return circuit

def vm_size():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize"):
            return int(line.split()[1]) * 1024

def outcome(call):
    try:
        result = call()
        print("ok", np.asarray(result).shape, flush=True)
    except cofactor.RuntimeExecutionError as err:
        print("error", err, flush=True)
"""


def run_child(body: str, preexec=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "frontend"))
    script = CHILD_PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        preexec_fn=preexec,
    )


def last_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"child crashed ({proc.returncode}): {proc.stderr[-1500:]}"
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "measure", ["qml.state()", "qml.probs(wires=range(n))"], ids=["state", "probs"]
)
def test_a_failed_allocation_of_compiled_code_is_an_error_not_a_segfault(measure):
    """20 qubits: a 16 MiB state (8 MiB of probabilities). After one call (the device is
    kept), the address space is limited to what the process has plus 1.5 result arrays:
    the result array fits, the compiled buffer that is copied into it does not. Before:
    SIGSEGV in _mlir_ciface_circuit. After: an error naming the size; the next call, with
    the limit lifted, works."""
    proc = run_child(
        f"""
        n = 20
        circuit = circuit_of(n, lambda n: {measure})
        size = np.asarray(circuit(0.1)).nbytes
        limit = vm_size() + int(1.5 * size)
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
        outcome(lambda: circuit(0.2))
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)
        outcome(lambda: circuit(0.3))
        """
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, f"child crashed ({proc.returncode}): {proc.stderr[-1500:]}"
    assert lines[-2].startswith("error") and "could not allocate a buffer of" in lines[-2], lines
    assert lines[-1].startswith("ok"), lines


def test_compiled_state_counts_its_result_array_against_the_cgroup():
    """A 24-qubit state (256 MiB), kept by the runtime after a first call, in a cgroup with
    room for 1.5 more: compiled qml.state() needs two more state-sized buffers (the one
    cf_rt_state fills, the result array). Before: SIGKILL. After: an error that counts the
    call's result array."""
    folder = make_cgroup()
    if folder is None:
        pytest.skip("needs root and a writable memory cgroup hierarchy")
    limit_file = folder / (
        "memory.limit_in_bytes" if (folder / "memory.limit_in_bytes").exists() else "memory.max"
    )
    usage_file = folder / (
        "memory.usage_in_bytes" if (folder / "memory.usage_in_bytes").exists() else "memory.current"
    )
    limit_file.write_text(str(16 << 30))  # the first call runs unlimited (almost)
    try:
        proc = run_child(
            f"""
            n = 24
            circuit = circuit_of(n, lambda n: qml.state())
            circuit(0.1)  # compiled before the limit; the device (and its state) is kept
            usage = int(open({str(usage_file)!r}).read())
            open({str(limit_file)!r}, "w").write(str(usage + 384 * 2**20))
            outcome(lambda: circuit(0.2))
            """,
            preexec=lambda: (folder / "cgroup.procs").write_text(str(os.getpid())),
        )
        line = last_line(proc)
        assert line.startswith("error"), proc.stdout
        assert "a buffer of compiled code needs 256 MiB" in line, line
        assert "the call's results 256 MiB" in line, line
    finally:
        try:
            folder.rmdir()
        except OSError:
            pass
