"""The Enzyme plugin is opened with every PLT slot bound at load (compiler/Optimize.cpp,
bindPluginNow): when it is loaded ahead of a classical gradient's compile, the symbol
lookups of its calls into LLVM are done by the loading thread, not by the first compile.
Each case runs in a new process (the plugin loads once per process)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from fresh_process import run_json_program

from cofactor import native_compiler

PROGRAM = r"""
import ctypes, json, struct
import numpy as np
import cofactor
from cofactor import native_compiler

def plugin_slots():
    # (bound, unbound) JUMP_SLOT entries of the loaded plugin's GOT: an unbound slot still
    # points into the plugin's own .plt (the lazy-binding stub)
    path = base = None
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and "Enzyme" in fields[5] and int(fields[2], 16) == 0:
                path, base = fields[5], int(fields[0].split("-")[0], 16)
                break
    if path is None:
        return None
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    strtab = sections[shstrndx][4]
    def name(s):
        start = strtab + s[0]
        return data[start:data.index(b"\0", start)].decode()
    by_name = {name(s): s for s in sections}
    plt = [(by_name[n][3], by_name[n][3] + by_name[n][5])
           for n in (".plt", ".plt.sec") if n in by_name]
    rela = by_name[".rela.plt"]
    bound = unbound = 0
    for off in range(rela[4], rela[4] + rela[5], 24):
        r_offset, r_info = struct.unpack_from("<QQ", data, off)
        if r_info & 0xFFFFFFFF != 7:  # R_X86_64_JUMP_SLOT
            continue
        target = ctypes.c_uint64.from_address(base + r_offset).value - base
        if any(lo <= target < hi for lo, hi in plt):
            unbound += 1
        else:
            bound += 1
    return bound, unbound

native_compiler.preload()
native_compiler._preload_thread.join()
native_compiler.prepare_enzyme()
native_compiler.wait_for_enzyme_load()
slots = plugin_slots()
rng = np.random.default_rng(5)
x = rng.uniform(-1, 1, 10)
w = rng.uniform(-1, 1, (10, 10)) / 3
f = cofactor.qjit(cofactor.grad(lambda w: np.sum(np.tanh(w @ x) ** 2)))
print(json.dumps({"slots": slots, "grad": np.asarray(f(w)).tolist()}))
"""


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        pytest.skip("reads an x86-64 ELF plugin's GOT through /proc/self/maps")


def _run(**env: str) -> dict:
    return run_json_program(PROGRAM, **env)


def test_the_plugin_loaded_ahead_has_every_call_bound_and_the_same_gradient():
    lazy = _run(COFACTOR_COMPILER_PLUGIN_BIND_NOW="0")
    if lazy["slots"] is None:
        pytest.skip("the Enzyme plugin could not be loaded ahead")
    if lazy["slots"][1] == 0:
        pytest.skip("this Enzyme plugin binds its symbols at load itself (linked -z now)")
    # loaded lazily (as PassPlugin::Load does), most slots still wait for their first call
    assert lazy["slots"][1] > 100, lazy["slots"]
    now = _run()
    bound, unbound = now["slots"]
    assert unbound == 0 and bound > 100, now["slots"]
    assert now["grad"] == lazy["grad"]
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, 10)
    w = rng.uniform(-1, 1, (10, 10)) / 3
    t = np.tanh(w @ x)
    np.testing.assert_allclose(now["grad"], np.outer(2 * t * (1 - t**2), x), rtol=1e-12)
