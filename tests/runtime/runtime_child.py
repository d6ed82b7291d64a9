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
