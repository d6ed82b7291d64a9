"""A compiled library depends on the runtime only when it calls it (since session 20 the
in-process driver links the runtime only then; `--as-needed` too).

A classical program's library then loads without the runtime (a 5 MB C++ library: 0.4-0.5
ms of the first call of a process); a quantum program's still depends on it; a library that
calls a helper only the runtime's dependencies provide (libgcc_s's `__powidf2`) still loads:
the launcher loads the runtime and tries again. Each case runs in a new process, where
nothing has loaded the runtime yet.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FRONTEND = Path(__file__).resolve().parents[1] / "frontend"

#: Prints one JSON line: the result, whether the runtime is loaded, the library's
#: DT_NEEDED entries (read from its dynamic section by the program below).
CHILD = r"""
import json, sys
import numpy as np

def dynamic(path, tag):
    import subprocess
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
    return [line.split("[")[-1].rstrip("]") for line in out.splitlines() if f"({tag})" in line]

def runtime_loaded():
    # (loaded: its code mapped executable; the in-process linker maps the file read-only)
    with open("/proc/self/maps") as maps:
        return any("libcofactor_runtime" in m and " r-xp " in m for m in maps)

kind = sys.argv[1]
if kind == "powi":
    from cofactor import compiler
    from cofactor.launcher import BufferSpec, Launcher
    text = '''
func.func private @__powidf2(f64, i32) -> f64
func.func @powi(%x: memref<f64>, %out: memref<f64>) attributes {llvm.emit_c_interface} {
  %v = memref.load %x[] : memref<f64>
  %n = arith.constant 3 : i32
  %y = func.call @__powidf2(%v, %n) : (f64, i32) -> f64
  memref.store %y, %out[] : memref<f64>
  return
}
'''
    library = compiler.compile_module(text, name="powi", cache=False)
    spec = BufferSpec((), np.dtype(np.float64))
    launcher = Launcher(library.so_path, "powi", [spec], [spec], False)
    value = float(launcher([1.5])[0])
else:
    import pennylane as qml
    from cofactor import qjit
    x = np.linspace(-1.0, 1.0, 7)
    if kind == "classical":
        @qjit
        def f(w):
            return np.sum(np.tanh(w * x) ** 2)
    else:
        @qjit
        @qml.qnode(qml.device("lightning.qubit", wires=1))
        def f(w):
            qml.RX(w, wires=0)
            return qml.expval(qml.PauliZ(0))
    value = float(f(0.7))
    library = f._last.library
print(json.dumps({"value": value, "runtime_loaded": runtime_loaded(),
                  "needed": dynamic(library.so_path, "NEEDED"),
                  "runpath": dynamic(library.so_path, "RUNPATH")}))
"""


pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf")


def run_child(kind: str) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FRONTEND), os.environ.get("PYTHONPATH", "")]),
        "COFACTOR_DISABLE_CACHE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kind], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_classical_library_loads_without_the_runtime():
    out = run_child("classical")
    x = [-1.0 + i / 3 for i in range(7)]
    assert abs(out["value"] - sum(math.tanh(0.7 * v) ** 2 for v in x)) < 1e-12
    assert not any("cofactor_runtime" in n for n in out["needed"])  # before: it was needed
    # nor linked at all (session 20): no search path for it either
    assert out["runpath"] == []
    assert not out["runtime_loaded"]


def test_a_quantum_library_still_depends_on_the_runtime():
    out = run_child("quantum")
    assert abs(out["value"] - math.cos(0.7)) < 1e-12
    assert any("cofactor_runtime" in n for n in out["needed"])
    assert out["runpath"]
    assert out["runtime_loaded"]


def test_a_helper_of_libgcc_s_is_found_through_the_runtime():
    out = run_child("powi")
    assert out["value"] == 1.5**3
    assert out["runtime_loaded"]  # loaded by the launcher's second try
