"""Running runtime tests again at another instruction-set level: COFACTOR_ISA is read once
per process, so the tests it should change run in a child pytest."""

from __future__ import annotations

import os
import subprocess
import sys


def assert_passes_at_isa(test_file: str, selector: str, isa: str) -> None:
    """Run the tests of `test_file` that `-k selector` picks with COFACTOR_ISA=`isa`."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", test_file]
        + ["-k", selector],
        env=dict(os.environ, COFACTOR_ISA=isa),
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout.decode()[-3000:] + run.stderr.decode()[-2000:]
