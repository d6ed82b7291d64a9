"""Memory the simulator cannot have is an error, never a SIGKILL from the kernel.

- A state vector that fits the machine but not the process's memory cgroup (a container's
  `--memory`, systemd's MemoryMax, a batch job's limit). Before, the check read only
  /proc/meminfo, which shows the whole machine inside a cgroup: 27 qubits (2 GiB) in a
  1.2 GiB cgroup got the process killed.
- State-sized copies that measurements make (the variance of a non-Pauli sum: two; an
  observable sampled with shots: one) and the per-shot outcome buffer of counts: unchecked
  before, so a state that fit once was killed at its measurement.

Each case runs in a child process that joins a cgroup of its own, limited to LIMIT (root and
a writable memory hierarchy, v1 or v2; skipped elsewhere)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cofactor.runtime_lib import library_path

LIMIT = 600 << 20  # bytes: the child's interpreter fits, the requests below do not
HERE = Path(__file__).resolve().parent

PRELUDE = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import numpy as np
from conftest import Runtime
from cofactor.errors import RuntimeExecutionError
from cofactor.runtime_lib import load_runtime
rt = Runtime(load_runtime(sys.argv[1]))
try:
    BODY
    print("none")
except RuntimeExecutionError as err:
    print("error", err)
"""

CASES = {
    # 2 GiB of state in a 600 MiB cgroup
    "state": ("rt.acquire(27)", "the state vector needs 2048 MiB"),
    # a 256 MiB state fits; the variance of Hermitian + X needs two more copies
    "var copies": (
        "rt.acquire(24); rt.var(rt.hamiltonian([1.0, 1.0], "
        "[rt.hermitian(np.diag([1.0, 2.0]), [0]), rt.named('PauliX', 1)]))",
        "the copies of the state a variance needs",
    ),
    # a 256 MiB state fits; sampling a Hermitian with shots rotates a copy of it
    "sampled copy": (
        "rt.acquire(24, shots=10)\n"
        "    rt.expval(rt.hermitian(np.array([[0.0, 1.0], [1.0, 0.0]]), [0]))",
        "the copy of the state sampling an observable needs",
    ),
    # 10**9 shots of counts: 4 GB of outcomes
    "shot outcomes": ("rt.acquire(2, shots=10**9); rt.counts([0, 1])", "the outcomes of the shots"),
}


def make_cgroup() -> Path | None:
    """A fresh memory cgroup limited to LIMIT, or None where that is not possible."""
    if os.geteuid() != 0:
        return None
    name = f"cofactor-test-{uuid.uuid4().hex[:8]}"
    for parent, limit_file in (
        (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
        (Path("/sys/fs/cgroup"), "memory.max"),
    ):
        if not (parent / limit_file).exists() and not (parent / "cgroup.controllers").exists():
            continue
        folder = parent / name
        try:
            folder.mkdir()
            (folder / limit_file).write_text(str(LIMIT))
        except OSError:
            if folder.exists():
                folder.rmdir()
            continue
        return folder
    return None


@pytest.fixture
def limited_cgroup():
    folder = make_cgroup()
    if folder is None:
        pytest.skip("needs root and a writable memory cgroup hierarchy")
    yield folder
    try:
        folder.rmdir()
    except OSError:
        pass


@pytest.mark.parametrize("case", list(CASES))
def test_memory_beyond_the_cgroup_limit_is_an_error_not_a_kill(limited_cgroup, case):
    body, expected = CASES[case]

    def join() -> None:
        (limited_cgroup / "cgroup.procs").write_text(str(os.getpid()))

    script = PRELUDE.replace("BODY", body)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(library_path())],
        preexec_fn=join,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"child killed or failed ({proc.returncode}): {proc.stderr[-800:]}"
    outcome, message = (proc.stdout.strip().splitlines()[-1] + " ").split(" ", 1)
    assert outcome == "error" and expected in message and "cgroup" in message, proc.stdout
