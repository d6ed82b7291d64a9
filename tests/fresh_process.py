"""Running a program in a new interpreter and reading the JSON it prints last: for tests of
what happens once per process (the compiler's first compile, libraries loaded ahead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_json_program(program: str, *argv: str, **env: str) -> dict:
    """Run `program` with `argv` in a new interpreter without cofactor's disk cache (so the
    compile happens there) and `env` added; return the JSON object of its last output line."""
    environ = {**os.environ, "COFACTOR_DISABLE_CACHE": "1", **env}
    proc = subprocess.run(
        [sys.executable, "-c", program, *argv],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
