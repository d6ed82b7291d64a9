"""The in-process compiler frees each compile's objects on a background thread after the
compile returns, and prepares the next compile's MLIR context and code-generation pipeline
there (compiler/Disposal.cpp): the libraries are the same bytes as with everything freed
inline, and a fork or the interpreter's exit right after a compile neither hangs nor
crashes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cofactor import native_compiler

PROGRAM = """
import hashlib, os, sys
import numpy as np
import cofactor

rng = np.random.default_rng(3)
x = rng.uniform(-1, 1, 24)
w = rng.uniform(-1, 1, (24, 24))

def loss(w):
    return np.sum(np.tanh(w @ x) ** 2)

t = np.tanh(w @ x)
expected = np.outer(2 * t * (1 - t**2), x)
digests = []
for _ in range(3):  # the 2nd and 3rd compiles use what the thread prepared
    g = cofactor.qjit(cofactor.grad(loss))
    assert np.abs(g(w) - expected).max() < 1e-12
    digests.append(hashlib.sha256(g._last.library.so_path.read_bytes()).hexdigest())
print("digests", " ".join(digests))
if sys.argv[1] == "fork":
    pid = os.fork()  # right after a compile: the thread may still be freeing it
    if pid == 0:
        g = cofactor.qjit(cofactor.grad(loss))
        ok = np.abs(g(w) - expected).max() < 1e-12
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
g = cofactor.qjit(cofactor.grad(loss))
g(w)  # exit at once: the interpreter's exit waits for the thread
"""


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")


def _run(tmp_path, mode: str, **env: str) -> dict[str, str]:
    script = tmp_path / "disposal.py"
    script.write_text(PROGRAM)
    proc = subprocess.run(
        [sys.executable, str(script), mode],
        capture_output=True,
        text=True,
        env={**os.environ, "COFACTOR_DISABLE_CACHE": "1", **env},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines())


def test_libraries_are_the_same_bytes_as_with_inline_freeing(tmp_path):
    background = _run(tmp_path, "plain")["digests"].split()
    inline = _run(tmp_path, "plain", COFACTOR_COMPILER_DISPOSE_INLINE="1")["digests"].split()
    assert len(set(background)) == 1, background  # first, and prepared by the thread
    assert background == inline


def test_fork_and_exit_right_after_a_compile(tmp_path):
    lines = _run(tmp_path, "fork")
    assert lines["child"] == "0"
