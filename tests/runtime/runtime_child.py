"""Reading a setting the runtime fixes once per process (thread count, prefetch mode): run a
short script against the runtime library in a child process with a chosen environment."""

from __future__ import annotations

import os
import subprocess
import sys

from cofactor.runtime_lib import library_path


def run_against_runtime(script: str, unset: tuple[str, ...], **env_vars: str) -> tuple[str, str]:
    """(stdout, stderr) of `python -c script <runtime library>`, with the variables in `unset`
    removed from this process's environment and `env_vars` set."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_vars)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(library_path())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


# The start of a script that drives the runtime through tests/runtime/conftest.py's Runtime on
# a 12-qubit device (`rt`); run it with `run_traced`.
RUNTIME_SCRIPT_PRELUDE = (
    "import sys\n"
    "import numpy as np\n"
    "sys.path.insert(0, {here!r})\n"
    "from conftest import Runtime\n"
    "from cofactor.runtime_lib import load_runtime\n"
    "rt = Runtime(load_runtime())\n"
    "rt.acquire(12)\n"
)


def run_traced(script: str, **env_vars: str) -> subprocess.CompletedProcess:
    """Run `script` (which starts with RUNTIME_SCRIPT_PRELUDE) in a child process with the
    fuser's trace on and `env_vars` set; the trace is on the result's stderr."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, COFACTOR_FUSION_TRACE="1", **env_vars)
    return subprocess.run(
        [sys.executable, "-c", script.format(here=here)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
