"""The Enzyme plugin's load ahead (`native_compiler.prepare_enzyme`, in a thread while a
classical gradient is traced) no longer holds the compile lock: a compile that starts while
the plugin is still loading lowers its module meanwhile and waits for the load only before
its optimization (compiler/Compiler.cpp, enzymeLock; issue 13, session 19: the wait was
~1.5 ms of tanh(W x)'s 12.5 ms driver). COFACTOR_COMPILER_SERIAL_ENZYME_LOAD=1 brings back
the serial load. Since session 20 the load runs in a thread of the library's own
(`cofactor_compiler_load_enzyme_async`), not in a Python thread that the tracing waited for.
Each case runs in a new process: the plugin is loaded once per process."""

from __future__ import annotations

import numpy as np
import pytest
from fresh_process import run_json_program

from cofactor import native_compiler

PROGRAM = r"""
import json, sys, threading
import numpy as np
import cofactor
from cofactor import native_compiler

# Which threads took the Python-side compile lock (the load thread did, before session 19),
# and which Python threads were alive meanwhile (a Python load thread, before session 20).
takers, alive = set(), set()
real = native_compiler._compile_lock

class Recording:
    def __enter__(self):
        real.acquire()
        takers.add(threading.current_thread().name)
        alive.update(t.name for t in threading.enumerate())
    def __exit__(self, *exc):
        real.release()
    def acquire(self, *a):
        return real.acquire(*a)
    def release(self):
        real.release()

native_compiler._compile_lock = Recording()

rng = np.random.default_rng(11)
x = rng.uniform(-1, 1, 24)
w = rng.uniform(-1, 1, (24, 24)) / 5

def loss(w):
    return np.sum(np.tanh(w @ x) ** 2)

f = cofactor.qjit(cofactor.grad(loss))
out = {"grad": np.asarray(f(w)).tolist(), "again": np.asarray(f(w * 0.5)).tolist()}
out["llvmir_opt"] = f._last.library.stage("llvmir_opt")
out["enzyme_thread"] = native_compiler._enzyme_load_started
out["takers"] = sorted(takers)
out["alive"] = sorted(alive)
out["load_status"] = native_compiler._library().cofactor_compiler_enzyme_load_status(0)
print(json.dumps(out))
"""


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")


def _expected(scale: float) -> np.ndarray:
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, 24)
    w = scale * rng.uniform(-1, 1, (24, 24)) / 5
    t = np.tanh(w @ x)
    return np.outer(2 * t * (1 - t**2), x)


def test_the_plugin_loads_without_the_compile_lock_and_the_result_is_unchanged():
    overlapped = run_json_program(PROGRAM)
    assert overlapped["enzyme_thread"] and overlapped["load_status"] == 0  # loaded
    # only the compile took the lock (before session 19, the load thread "cofactor-enzyme"
    # too), and no Python thread loaded the plugin (before session 20: "cofactor-enzyme")
    assert overlapped["takers"] == ["MainThread"]
    assert "cofactor-enzyme" not in overlapped["alive"]
    np.testing.assert_allclose(overlapped["grad"], _expected(1.0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(overlapped["again"], _expected(0.5), rtol=1e-12, atol=1e-14)
    serial = run_json_program(PROGRAM, COFACTOR_COMPILER_SERIAL_ENZYME_LOAD="1")
    # serial: the library's load takes its own compile lock instead (Compiler.cpp)
    assert serial["enzyme_thread"] and serial["load_status"] == 0
    # the same gradient and the same optimized IR, bit for bit
    assert overlapped["grad"] == serial["grad"] and overlapped["again"] == serial["again"]
    assert overlapped["llvmir_opt"] == serial["llvmir_opt"]


@pytest.mark.parametrize("stage", ["cofactor-opt", "opt", "llc"])
def test_a_crash_beside_the_load_is_an_error_and_the_process_goes_on(stage):
    # The compile may crash while the load thread runs (or just ran) its own recovery
    # context: the signal handlers stay installed until both are done.
    program = PROGRAM.replace(
        "f = cofactor.qjit(cofactor.grad(loss))",
        "import warnings\nwarnings.simplefilter('ignore')\nf = cofactor.qjit(cofactor.grad(loss))",
    )
    out = run_json_program(program, COFACTOR_COMPILER_DEBUG_CRASH=stage)
    np.testing.assert_allclose(out["grad"], _expected(1.0), rtol=1e-12, atol=1e-14)
