"""The runtime's thread pool (runtime/src/ThreadPool.cpp): results do not depend on the
thread count, and COFACTOR_NUM_THREADS / OMP_NUM_THREADS set it.

Loops over 2^16 amplitudes and more are cut into chunks whose boundaries depend on the sizes
only, and sums add per-chunk partials in chunk order, so every figure must be bitwise the
same with 1, 2 or 3 threads (17 qubits: 2^17 amplitudes, the chunked path).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from runtime_child import run_against_runtime

from cofactor.runtime_lib import check_threads_env

N = 17
ONE_QUBIT = ["Hadamard", "SX", "T", "RX", "RY", "RZ", "PhaseShift", "Rot", "U2", "U3"]
TWO_QUBIT = ["CNOT", "CZ", "SWAP", "ISWAP", "CRX", "CRot", "IsingXX", "IsingXY", "IsingZZ"]
TWO_QUBIT += ["SingleExcitation", "ControlledPhaseShift"]
MULTI = [("Toffoli", 3), ("CSWAP", 3), ("DoubleExcitation", 4), ("MultiRZ", 3)]


def _random_ops(rng, count):
    """(name, params, targets, controls, control values, adjoint) of a random circuit: gates
    of 1 to 4 targets, some with controls of either value, some adjoint, on random wires."""
    ops = [("Hadamard", [], [w], [], [], False) for w in range(N)]
    for _ in range(count):
        kind = rng.integers(3)
        if kind == 0:
            name, k = ONE_QUBIT[rng.integers(len(ONE_QUBIT))], 1
        elif kind == 1:
            name, k = TWO_QUBIT[rng.integers(len(TWO_QUBIT))], 2
        else:
            name, k = MULTI[rng.integers(len(MULTI))]
        wires = [int(w) for w in rng.permutation(N)]
        nctrl = int(rng.integers(3)) if k < 4 else 0
        ctrls, vals = wires[k : k + nctrl], [int(v) for v in rng.integers(2, size=nctrl)]
        ops.append((name, None, wires[:k], ctrls, vals, bool(rng.integers(2))))
    return ops


def _run(rt, ops, params, h):
    """Everything the simulator reduces over the state, with the current thread count."""
    rt.acquire(N)
    rt.tape_start()
    i = 0
    for name, _, targets, ctrls, vals, adjoint in ops:
        n = rt.gates[name][1]
        rt.gate(name, params[i : i + n], targets, adjoint=adjoint, ctrls=ctrls, cvals=vals)
        i += n
    rt.tape_stop()
    obs = [
        rt.named("PauliZ", N - 1),
        rt.tensor([rt.named("PauliX", 0), rt.named("PauliY", 5), rt.named("PauliZ", N - 2)]),
        rt.hermitian(h, [3, 11]),
        rt.hamiltonian([0.5, -1.25], [rt.named("PauliX", 2), rt.named("Hadamard", 9)]),
    ]
    out = {
        "state": rt.state(),
        "expval": np.array([rt.expval(o) for o in obs]),
        "var": np.array([rt.var(o) for o in obs]),
        "probs": rt.probs([4, 0, 13]),
        "probs_all": rt.probs(list(range(N))),
        "jacobian": rt.adjoint_jacobian(obs),
    }
    rt.release()
    return out


def _results_for_thread_counts(rt, lib, rng, out_path=None):
    ops = _random_ops(rng, 60)
    params = rng.uniform(-np.pi, np.pi, sum(rt.gates[op[0]][1] for op in ops))
    h = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    h = h + h.conj().T
    results = {}
    try:
        for threads in (1, 2, 3):
            lib.cf_rt_set_num_threads(threads)
            assert lib.cf_rt_num_threads() == threads
            results[threads] = _run(rt, ops, params, h)
    finally:
        lib.cf_rt_set_num_threads(0)
    one = results[1]
    if out_path:
        np.savez(out_path, **one)
    assert abs(np.linalg.norm(one["state"]) - 1) < 1e-12
    assert np.max(np.abs(one["jacobian"])) > 1e-3  # not trivially zero
    for threads in (2, 3):
        for key, value in one.items():
            assert np.array_equal(results[threads][key], value), (threads, key)


DETERMINISM = (
    "import sys\n"
    "import numpy as np\n"
    "sys.path.insert(0, {here!r})\n"
    "from conftest import Runtime\n"
    "from cofactor.runtime_lib import load_runtime\n"
    "import test_thread_pool\n"
    "lib = load_runtime()\n"
    "rng = np.random.default_rng({seed})\n"
    "test_thread_pool._results_for_thread_counts(Runtime(lib), lib, rng, {out!r})\n"
    "print('ok')\n"
)


@pytest.mark.parametrize("seed", [1])
def test_results_bitwise_equal_for_1_2_3_threads(seed, tmp_path):
    """In a new process whose pool always runs loops in parallel (COFACTOR_POOL_POLICY:
    the adaptive policy may choose serial on a busy machine); its statistics must show
    chunks that ran on worker threads, or the comparison would prove nothing. The same in
    a process whose loops all walk their chunks first to last (COFACTOR_POOL_ORDER): the
    default's alternating order gives the very same bits."""
    here = os.path.dirname(os.path.abspath(__file__))
    results = {}
    for order in ("alternating", "ascending"):
        out = str(tmp_path / f"{order}.npz")
        env = dict(
            os.environ,
            COFACTOR_POOL_POLICY="parallel",
            COFACTOR_POOL_STATS="1",
            COFACTOR_POOL_ORDER=order,
            # fused blocks on the low wires in tile passes (GateFuser::drain) run in parallel too
            COFACTOR_FUSION_TILE_QUBITS="8",
            COFACTOR_FUSION_TILE_MIN_QUBITS=str(N),
            # and so do the adjoint walk's chunked groups (the same tile pass, TileSweep.hpp)
            COFACTOR_ADJOINT_CHUNK_QUBITS="8",
        )
        proc = subprocess.run(
            [sys.executable, "-c", DETERMINISM.format(here=here, seed=seed, out=out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]
        stats = re.search(r"\((\d+) of (\d+) chunks on workers\)", proc.stderr)
        assert stats, proc.stderr[-3000:]
        assert int(stats.group(1)) > 0, stats.group(0)
        with np.load(out) as data:
            results[order] = {k: data[k] for k in data.files}
    for key, value in results["ascending"].items():
        assert np.array_equal(results["alternating"][key], value), key


def test_default_restored_and_clamped(lib):
    default = lib.cf_rt_num_threads()
    assert default >= 1
    try:
        lib.cf_rt_set_num_threads(5)
        assert lib.cf_rt_num_threads() == 5
    finally:
        lib.cf_rt_set_num_threads(0)
    assert lib.cf_rt_num_threads() == default


# plain ctypes, no cofactor import: a new process per case stays cheap
SCRIPT = (
    "import ctypes, sys\n"
    "lib = ctypes.CDLL(sys.argv[1])\n"
    "lib.cf_rt_num_threads.restype = ctypes.c_int64\n"
    "print('threads', lib.cf_rt_num_threads())\n"
)


def _threads_in_new_process(**env_vars):
    unset = ("COFACTOR_NUM_THREADS", "OMP_NUM_THREADS")
    stdout, stderr = run_against_runtime(SCRIPT, unset, **env_vars)
    line = [x for x in stdout.splitlines() if x.startswith("threads ")][-1]
    return int(line.split()[1]), stderr


def test_thread_count_from_the_environment():
    cpus = len(os.sched_getaffinity(0))
    assert _threads_in_new_process()[0] == cpus
    assert _threads_in_new_process(COFACTOR_NUM_THREADS="3")[0] == 3
    assert _threads_in_new_process(COFACTOR_NUM_THREADS="auto")[0] == cpus
    assert _threads_in_new_process(OMP_NUM_THREADS="4,2")[0] == 4  # OpenMP's list syntax
    # COFACTOR_NUM_THREADS wins over OMP_NUM_THREADS
    assert _threads_in_new_process(COFACTOR_NUM_THREADS="2", OMP_NUM_THREADS="5")[0] == 2


def test_bad_thread_count_is_reported_and_ignored():
    for value in ("two", "0", "-1", "1.5", "3x"):
        threads, stderr = _threads_in_new_process(COFACTOR_NUM_THREADS=value, OMP_NUM_THREADS="3")
        assert threads == 3, value  # falls back to OMP_NUM_THREADS
        assert f"COFACTOR_NUM_THREADS='{value}'" in stderr and "positive integer" in stderr


def test_check_threads_env_warns(monkeypatch):
    monkeypatch.setenv("COFACTOR_NUM_THREADS", "many")
    with pytest.warns(RuntimeWarning, match="COFACTOR_NUM_THREADS='many'"):
        check_threads_env()
    monkeypatch.setenv("COFACTOR_NUM_THREADS", " 8 ")
    check_threads_env()  # no warning


# the pool's count of loops run on more than one thread, after Hadamards on 2^n amplitudes
PARALLEL_LOOPS = (
    "import ctypes, sys\n"
    "import numpy as np\n"
    "sys.path.insert(0, {here!r})\n"
    "from conftest import Runtime\n"
    "from cofactor.runtime_lib import load_runtime\n"
    "lib = load_runtime()\n"
    "rt = Runtime(lib)\n"
    "for n, threads in (({small}, 2), ({large}, 1), ({large}, 2)):\n"
    "    lib.cf_rt_set_num_threads(threads)\n"
    "    rt.acquire(n)\n"
    "    before = lib.cf_rt_parallel_loops()\n"
    "    for w in range(n):\n"
    "        rt.gate('Hadamard', [], [w])\n"
    "    print('loops', n, threads, lib.cf_rt_parallel_loops() - before)\n"
    "    rt.release()\n"
)


def test_parallel_loop_count_only_counts_loops_on_several_threads():
    """cf_rt_parallel_loops (the contention benchmark's evidence of whether its default mode
    ran any parallel code): none below the pool's 2^16-amplitude threshold or with one
    thread, one per gate above it with two threads (the policy forced to parallel)."""
    here = os.path.dirname(os.path.abspath(__file__))
    small, large = 14, 17
    stdout, stderr = run_against_runtime(
        PARALLEL_LOOPS.format(here=here, small=small, large=large),
        ("COFACTOR_NUM_THREADS", "OMP_NUM_THREADS"),
        COFACTOR_POOL_POLICY="parallel",
        COFACTOR_FUSION="0",
    )
    rows = [line.split()[1:] for line in stdout.splitlines() if line.startswith("loops")]
    counts = {(int(n), int(t)): int(c) for n, t, c in rows}
    assert counts == {(small, 2): 0, (large, 1): 0, (large, 2): large}, (counts, stderr[-2000:])
