"""What the in-process pipeline does to the Enzyme plugin besides running it: the plugin is
loaded while a classical function's gradient is traced (`native_compiler.prepare_enzyme`),
not for a QNode's gradient, and its BLAS name matching is skipped (compiler/EnzymeBlas.cpp)
without changing what Enzyme produces. Each case runs in a new process: the plugin is loaded
(and its GOT slot changed) once per process."""

from __future__ import annotations

import numpy as np
import pytest
from fresh_process import run_json_program

from cofactor import native_compiler

PROGRAM = r"""
import json, sys
import numpy as np
import pennylane as qml
import cofactor
from cofactor import native_compiler

rng = np.random.default_rng(7)
x = rng.uniform(-1, 1, 16)
w = rng.uniform(-1, 1, (16, 16)) / 4

def ddot(w):  # named like a BLAS routine: differentiated as the function it is
    return np.sum(np.tanh(w @ x) ** 2)

dev = qml.device("lightning.qubit", wires=1)

@qml.qnode(dev)
def circuit(a):
    qml.RX(a, wires=0)
    return qml.expval(qml.PauliZ(0))

out = {}
if sys.argv[1] == "classical":
    f = cofactor.qjit(cofactor.grad(ddot))
    out["grad"] = np.asarray(f(w)).tolist()
    out["llvmir_opt"] = f._last.library.stage("llvmir_opt")
else:
    f = cofactor.qjit(cofactor.grad(circuit))
    out["grad"] = float(f(0.4))
out["enzyme_thread"] = native_compiler._enzyme_load_started
out["check_thread"] = native_compiler._ahead_thread is not None
print(json.dumps(out))
"""


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")


def _run(kind: str, **env: str) -> dict:
    return run_json_program(PROGRAM, kind, **env)


def _expected() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, 16)
    w = rng.uniform(-1, 1, (16, 16)) / 4
    t = np.tanh(w @ x)
    return np.outer(2 * t * (1 - t**2), x)


def test_classical_gradient_loads_the_plugin_ahead_and_skipping_blas_names_changes_nothing():
    fast = _run("classical")
    assert fast["enzyme_thread"]
    # the thread that loaded the plugin checked it: the compile starts no second check
    # (that thread only took the GIL from the compile as it began)
    assert not fast["check_thread"]
    np.testing.assert_allclose(fast["grad"], _expected(), rtol=1e-12, atol=1e-14)
    # Enzyme's own extractBLAS, and no loading ahead: the same gradient, bit for bit
    plain = _run("classical", COFACTOR_COMPILER_KEEP_BLAS="1", COFACTOR_PRELOAD="0")
    assert not plain["enzyme_thread"] and plain["check_thread"]
    assert fast["grad"] == plain["grad"]
    assert fast["llvmir_opt"] == plain["llvmir_opt"]


def test_qnode_gradient_does_not_load_the_plugin_ahead():
    out = _run("qnode")
    assert not out["enzyme_thread"]
    assert out["grad"] == pytest.approx(-np.sin(0.4), abs=1e-12)
