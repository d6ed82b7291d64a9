"""The kernels' software prefetch (runtime/src/StateVector.cpp, `Prefetch`): which prefetch
instructions a kernel issues, and where, must change no result. Every mode gives the same
bits, and COFACTOR_PREFETCH selects the mode at load (a bad value is reported and ignored).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from runtime_child import run_against_runtime

# 17 qubits: gates on every bit reach every path of forEachRunAhead -- lane bits 0-1
# (chunked kernels), runs shorter than a piece (bits 2-5), the tile ahead (bits 6-12) and
# runs of 2^13 amplitudes and more (bits 13-16), with one, two and four streams
N = 17
MODES = {"l1": 0, "l2": 1, "off": 2, "l1own": 3}


def _ops(rng):
    """(name, targets, controls, control values) over every wire and pairs near and far."""
    ops = []
    for w in range(N):
        ops += [("Hadamard", [w], [], []), ("Rot", [w], [], []), ("PhaseShift", [w], [], [])]
        ops += [("RZ", [w], [], []), ("PauliX", [w], [(w + 3) % N], [0])]
    for w in range(N - 1):
        far = N - 1 - w if N - 1 - w != w else 0
        ops += [
            ("CNOT", [w, w + 1], [], []),
            ("SWAP", [w, far], [], []),
            ("CZ", [w, w + 1], [], []),
        ]
        ops += [
            ("ECR", [w, w + 1], [], []),
            ("IsingXX", [w, far], [], []),
            ("IsingZZ", [w, w + 1], [], []),
        ]
        ops += [("CRX", [w, far], [], []), ("Toffoli", [w, w + 1, far], [], [])]
        ops += [("RY", [w], [w + 1], [int(rng.integers(2))])]
    ops += [("MultiRZ", [0, 5, 9, N - 1], [], [])]
    return [op for op in ops if len(set(op[1] + op[2])) == len(op[1]) + len(op[2])]


def _state(rt, ops, params):
    rt.acquire(N)
    i = 0
    for name, targets, ctrls, vals in ops:
        k = rt.gates[name][1]
        rt.gate(name, params[i : i + k], targets, ctrls=ctrls, cvals=vals)
        i += k
    out = rt.state()
    rt.release()
    return out


def test_every_prefetch_mode_gives_the_same_bits(rt, lib, rng, monkeypatch):
    # each gate its own kernel: fusion would run most of them as fused blocks instead
    monkeypatch.setenv("COFACTOR_FUSION", "0")
    setter = lib.cf_rt_kernel_prefetch
    setter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
    ops = _ops(rng)
    params = rng.uniform(-np.pi, np.pi, sum(rt.gates[op[0]][1] for op in ops))
    before = setter(-1)
    states = {}
    try:
        for mode in MODES.values():
            assert setter(mode) == mode
            states[mode] = _state(rt, ops, params)
    finally:
        setter(before)
    assert setter(-1) == before
    first = states[0]
    assert abs(np.linalg.norm(first) - 1) < 1e-12
    for mode, state in states.items():
        assert np.array_equal(state, first), mode


SCRIPT = (
    "import ctypes, sys\n"
    "lib = ctypes.CDLL(sys.argv[1])\n"
    "print('mode', lib.cf_rt_kernel_prefetch(-1))\n"
)


def _mode_in_new_process(value):
    env = {} if value is None else {"COFACTOR_PREFETCH": value}
    stdout, stderr = run_against_runtime(SCRIPT, ("COFACTOR_PREFETCH",), **env)
    return int(stdout.split()[-1]), stderr


@pytest.mark.parametrize("value", list(MODES))
def test_prefetch_mode_from_the_environment(value):
    assert _mode_in_new_process(value) == (MODES[value], "")


def test_bad_prefetch_mode_is_reported_and_ignored():
    default, _ = _mode_in_new_process(None)
    assert default in MODES.values()
    mode, stderr = _mode_in_new_process("L3")
    assert mode == default
    assert "COFACTOR_PREFETCH='L3'" in stderr and "l1, l2, off or l1own" in stderr


def _x86_vendor_and_family() -> tuple[str, int] | None:
    """(vendor_id, family as cpuid reports it) of this machine's first CPU, from Linux's
    /proc/cpuinfo; None elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = dict(
                (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in f) if v
            )
    except OSError:
        return None
    if "vendor_id" not in fields or "cpu family" not in fields:
        return None
    return fields["vendor_id"], int(fields["cpu family"])


def test_default_prefetch_follows_the_cpu():
    # the per-CPU choice of StateVector.cpp (kernelPrefetchDefault): l2 on AMD family 0x19,
    # l1own on Intel (session 19), l1 elsewhere
    cpu = _x86_vendor_and_family()
    if cpu is None:
        pytest.skip("not an x86 Linux machine")
    vendor, family = cpu
    expected = {"GenuineIntel": MODES["l1own"]}.get(vendor, MODES["l1"])
    if vendor == "AuthenticAMD" and family == 0x19:
        expected = MODES["l2"]
    assert _mode_in_new_process(None) == (expected, "")
