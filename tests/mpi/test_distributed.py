"""The device sharded over MPI ranks (docs/distributed.md), run for real under `mpirun`.

mpirun starts slowly and the ranks share this machine's few cores, so each launch batches
many checks: runtime_checks.py compares every gate (local and global wires, with and
without controls), every measurement type with and without shots, mid-circuit measurements
and the adjoint Jacobian against the single-process device inside each rank;
spmd_program.py is an ordinary qjit program whose results on every rank are compared with a
run without MPI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cofactor import toolchain
from cofactor.errors import ToolchainNotFoundError

HERE = Path(__file__).parent


def _mpi_library() -> Path | None:
    try:
        runtime = toolchain.find("runtime")
    except ToolchainNotFoundError:
        return None
    path = runtime.parent / "libcofactor_runtime_mpi.so"
    return path if path.is_file() else None


pytestmark = [
    pytest.mark.skipif(
        shutil.which("mpirun") is None, reason="mpirun not found (make setup installs openmpi-bin)"
    ),
    pytest.mark.skipif(
        _mpi_library() is None,
        reason="libcofactor_runtime_mpi.so not built (configure the runtime with libopenmpi-dev)",
    ),
]


def mpirun(ranks: int, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    """`mpirun -n ranks python args...`: oversubscribed (more ranks than cores), idle ranks
    yielding the CPU instead of spinning, allowed as root (containers)."""
    command = ["mpirun", "-n", str(ranks), "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("OMP_NUM_THREADS", "1")  # ranks already share the cores
    return subprocess.run(
        [*command, sys.executable, *args],
        capture_output=True, text=True, timeout=timeout, env=full_env,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("ranks", "args", "chunk"),
    [(1, [], None), (2, [], None), (4, [], "3"), (8, ["7", "quick"], None)],
)
def test_sharded_device_matches_single_process(ranks, args, chunk):
    # chunk: exchanges in messages of 3 amplitudes, so that runs straddle chunk boundaries
    env = {"COFACTOR_MPI_CHUNK": chunk} if chunk else {}
    result = mpirun(ranks, str(HERE / "runtime_checks.py"), *args, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"on {ranks} ranks" in result.stdout


@pytest.fixture(scope="module")
def single_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    env = {**os.environ, "SPMD_OUT": str(out)}
    env.pop("COFACTOR_MPI", None)
    result = subprocess.run(
        [sys.executable, str(HERE / "spmd_program.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return np.load(out / "rank0.npz")


@pytest.mark.parametrize("ranks", [2])
def test_spmd_program_identical_on_every_rank(ranks, single_process, tmp_path):
    result = mpirun(
        ranks, str(HERE / "spmd_program.py"), env={"COFACTOR_MPI": "1", "SPMD_OUT": str(tmp_path)}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(ranks):
        got = np.load(tmp_path / f"rank{rank}.npz")
        for key in single_process.files:
            want = single_process[key]
            if want.dtype.kind in "iub":  # samples, counts: the same draws
                np.testing.assert_array_equal(got[key], want, err_msg=f"rank {rank}: {key}")
            else:
                np.testing.assert_allclose(
                    got[key], want, rtol=0, atol=1e-12, err_msg=f"rank {rank}: {key}"
                )


def test_a_failing_rank_ends_every_rank_with_its_message(tmp_path):
    result = mpirun(
        2, str(HERE / "spmd_program.py"), "fail",
        env={"COFACTOR_MPI": "1", "SPMD_OUT": str(tmp_path)}, timeout=240,
    )  # fmt: skip
    assert result.returncode != 0
    # printed by the abort hook (OpenMPI's own MPI_ABORT banner is not always printed)
    assert "[cofactor rank 1] Traceback" in result.stderr
    assert "rank 1 fails on purpose" in result.stderr
    assert not (tmp_path / "rank0.npz").exists()  # rank 0 never finished its second call
