"""The warm-up compiles that `import cofactor` starts in the background (cofactor.warm_up):
the modules still compile with today's passes (a stale text would only make the warm-up
fail quietly), the classical one through Enzyme to a right gradient, and the thread ends
without a trace: no crash, no file left, Enzyme loaded only for the pinned plugin."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from cofactor import compiler, native_compiler, warm_up


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")


class _MemRef2D(ctypes.Structure):
    _fields_ = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
        ("sizes", ctypes.c_int64 * 2),
        ("strides", ctypes.c_int64 * 2),
    ]


def _memref(array: np.ndarray) -> _MemRef2D:
    pointer = array.ctypes.data
    return _MemRef2D(pointer, pointer, 0, (8, 8), (8, 1))


def test_classical_module_is_an_enzyme_gradient(tmp_path):
    result = compiler._native(warm_up.CLASSICAL, tmp_path / "libclassical.so", False)
    assert result.ms["opt.enzyme"] > 0  # it warms Enzyme up, as meant
    w = np.random.default_rng(7).uniform(-0.5, 0.5, (8, 8))
    grad = np.zeros((8, 8))
    handle = ctypes.CDLL(str(tmp_path / "libclassical.so"))
    w_ref, grad_ref = _memref(w), _memref(grad)
    handle._mlir_ciface_warm_up_loss_grad(ctypes.byref(w_ref), ctypes.byref(grad_ref))
    # loss = sum_i tanh(sum_j w_ij^2): d/dw_ij = (1 - tanh(s_i)^2) * 2 w_ij
    s = np.sum(w**2, axis=1, keepdims=True)
    np.testing.assert_allclose(grad, (1 - np.tanh(s) ** 2) * 2 * w, rtol=1e-13, atol=0)


def test_circuit_module_compiles_without_enzyme(tmp_path):
    result = compiler._native(warm_up.CIRCUIT, tmp_path / "libcircuit.so", False)
    assert result.ms["opt.enzyme"] == 0  # its gradient is the direct QNode gradient
    handle = ctypes.CDLL(str(tmp_path / "libcircuit.so"))
    assert hasattr(handle, "_mlir_ciface_warm_up_circuit_grad")


_PROBE = """
import json, os
import cofactor
from cofactor import native_compiler as n
thread = n._warm_up_thread
if thread is not None:
    thread.join()
print(json.dumps({"thread": thread is not None, "plugin": n._loaded_plugin,
                  "crashed": n._crashed, "left": os.listdir(os.environ["TMPDIR"])}))
"""


def _probe(tmp_path, **env: str) -> dict:
    folder = tmp_path / "tmp"
    folder.mkdir()
    environment = {**os.environ, "TMPDIR": str(folder), **env}
    for name in ("COFACTOR_WARM_UP", "COFACTOR_PRELOAD", native_compiler.DEBUG_CRASH_ENV):
        if name not in env:
            environment.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=environment, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_import_warms_up_and_leaves_nothing(tmp_path):
    if os.environ.get("COFACTOR_ENZYME_PLUGIN"):
        pytest.skip("the warm-up loads only the pinned Enzyme plugin")
    probe = _probe(tmp_path)
    assert probe["thread"] and probe["crashed"] is None and probe["left"] == []
    assert probe["plugin"] is not None and probe["plugin"].startswith("sha256:")


_OFF = [{"COFACTOR_WARM_UP": "0"}, {"COFACTOR_PRELOAD": "0"}, {"COFACTOR_PIPELINE": "subprocess"}]


@pytest.mark.parametrize("env", _OFF)
def test_warm_up_can_be_turned_off(tmp_path, env):
    probe = _probe(tmp_path, **env)
    assert not probe["thread"] and probe["plugin"] is None


def test_own_enzyme_plugin_is_not_loaded_by_the_warm_up(tmp_path):
    plugin = compiler.toolchain.find("enzyme")
    probe = _probe(tmp_path, COFACTOR_ENZYME_PLUGIN=str(plugin))
    assert probe["thread"] and probe["crashed"] is None
    assert probe["plugin"] is None  # the circuit only: a plugin of one's own loads later
