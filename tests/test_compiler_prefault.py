"""When the Enzyme plugin is loaded ahead of a classical gradient's compile, a thread of the
compiler library maps the code pages of the plugin, libMLIR and the library itself
(compiler/Prefault.cpp), so that the compile does not fault them in one at a time; the
compiled gradient is the same. Each case runs in a new process (once per process)."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
from fresh_process import run_json_program

from cofactor import native_compiler

PROGRAM = r"""
import json, sys, time
import numpy as np
import cofactor
from cofactor import native_compiler

def text_pages():
    # resident and total pages of the executable mappings of the plugin and of libMLIR
    out, current = {}, None
    with open("/proc/self/smaps") as maps:
        for line in maps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 6 and not fields[0].endswith(":"):
                path = fields[5]
                wanted = fields[1][2] == "x" and ("Enzyme" in path or "libMLIR" in path)
                current = path.rsplit("/", 1)[-1] if wanted else None
            elif current and fields[0] in ("Size:", "Rss:"):
                entry = out.setdefault(current, {"Size:": 0, "Rss:": 0})
                entry[fields[0]] += int(fields[1])
    return out

native_compiler.preload()
native_compiler._preload_thread.join()
native_compiler.prepare_enzyme()
native_compiler.wait_for_enzyme_load()
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    pages = text_pages()
    if pages and all(p["Rss:"] >= p["Size:"] for p in pages.values()):
        break
    time.sleep(0.05)
rng = np.random.default_rng(3)
x = rng.uniform(-1, 1, 12)
w = rng.uniform(-1, 1, (12, 12)) / 3
f = cofactor.qjit(cofactor.grad(lambda w: np.sum(np.tanh(w @ x) ** 2)))
print(json.dumps({"pages": pages, "grad": np.asarray(f(w)).tolist()}))
"""


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")
    release = tuple(int(part) for part in re.findall(r"\d+", os.uname().release)[:2])
    if not sys.platform.startswith("linux") or release < (5, 14):
        pytest.skip("needs Linux 5.14 (MADV_POPULATE_READ) and /proc/self/smaps")


def _run(wait_s: float, **env: str) -> dict:
    return run_json_program(PROGRAM, str(wait_s), **env)


def _fully_mapped(pages: dict) -> bool:
    return bool(pages) and all(p["Rss:"] >= p["Size:"] for p in pages.values())


def test_loading_the_plugin_ahead_maps_the_compilers_code_and_changes_no_result():
    on = _run(20)
    if not any("Enzyme" in name for name in on["pages"]):
        pytest.skip("the Enzyme plugin could not be loaded ahead")
    assert _fully_mapped(on["pages"]), on["pages"]
    off = _run(0.5, COFACTOR_COMPILER_PREFAULT="0")
    # without the thread, the plugin's and libMLIR's code is mapped only where it has run
    assert not _fully_mapped(off["pages"]), off["pages"]
    assert on["grad"] == off["grad"]
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, 12)
    w = rng.uniform(-1, 1, (12, 12)) / 3
    t = np.tanh(w @ x)
    np.testing.assert_allclose(on["grad"], np.outer(2 * t * (1 - t**2), x), rtol=1e-12)
