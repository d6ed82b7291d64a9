"""Running a program in a fresh interpreter, for tests whose failure would be a crash
(a signal, a hang) that must not take the test session down with it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import cofactor

FRONTEND = str(Path(cofactor.__file__).resolve().parents[1])


def run_isolated(source: str, timeout: float = 120) -> str:
    """Run `source` in a fresh interpreter; fails on a crash or an exception, returns stdout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([FRONTEND, env.get("PYTHONPATH", "")])
    prelude = "import numpy as np, pennylane as qml, cofactor\n"
    run = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert run.returncode == 0, f"exit status {run.returncode}\n{run.stdout}\n{run.stderr}"
    return run.stdout
