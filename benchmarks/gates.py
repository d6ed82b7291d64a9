"""Section 5: time per gate at large n against the memory bound (runs in cofactor's venv).

Reuses benchmarks/bench_gates.py (the runtime team's kernel benchmark): its gate list with
the cache lines each gate reads and writes (bytes_moved), its numpy copy-bandwidth probe, its
wire choice (top, middle, bottom of the register), and `cf_rt_gate_repeat` (the kernel
without per-call overhead). Unlike bench_gates it keeps every round as a sample so that the
report has median/min/max, and it returns JSON instead of printing. The bandwidth is the
best of bench_gates' copy probe and an in-place scaling probe (a gate's access pattern: a
copy also reads the destination before writing it), each taken before and after the gates,
so the bound is the tightest one seen.

Also measures, as an indication only, the runtime's adjoint Jacobian against one forward
pass through the ctypes binding (bench_gates.adjoint_workload), since the
goal is about `cofactor.grad`, measured in section 3.
"""

from __future__ import annotations

import os
import time

import numpy as np


def inplace_bandwidth(n: int, rounds: int = 7) -> float:
    """Bytes per second (read + write) of an in-place numpy scaling of a 2^n complex128
    array: the access pattern of a gate (no write-allocate reads, unlike a copy)."""
    a = np.ones(2**n, dtype=np.complex128)
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        np.multiply(a, -1.0, out=a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def _runtime():
    from benchmarks import bench_gates
    from cofactor import toolchain
    from cofactor.runtime_lib import gate_ids, load_runtime

    lib = load_runtime(toolchain.find("runtime"))
    return bench_gates, lib, gate_ids(lib)


def task_gates(spec: dict) -> dict:
    bg, lib, ids = _runtime()
    try:
        import pennylane_lightning.lightning_qubit_ops as lq
    except ImportError:
        lq = None
    rounds = spec.get("rounds", 3)
    repeats = spec.get("repeats", 40)
    out: dict = {"sizes": {}}
    # Gate fusion would merge the repeated applications of one gate (and, with nothing that
    # reads the state after them, apply none: since fusion these timings were of the queue,
    # ~0.5 us a "gate" at n = 24). Off for the gates, as in the kernels section; the runtime
    # reads it when a device is acquired, so the adjoint indication below keeps fusion.
    fusion = os.environ.get("COFACTOR_FUSION")
    os.environ["COFACTOR_FUSION"] = "0"
    try:
        _time_gates(bg, lib, ids, lq, spec["sizes"], rounds, repeats, out)
    finally:
        if fusion is None:
            del os.environ["COFACTOR_FUSION"]
        else:
            os.environ["COFACTOR_FUSION"] = fusion
    if spec.get("adjoint_n"):
        out["adjoint"] = _adjoint(bg, lib, ids, spec["adjoint_n"], rounds=rounds)
    return out


def _time_gates(bg, lib, ids, lq, sizes, rounds: int, repeats: int, out: dict) -> None:
    from ctypes import c_double, c_int64

    from cofactor.runtime_lib import as_pointer, check_error

    for n in sizes:
        probes = {"copy": [bg.copy_bandwidth(n)], "inplace": [inplace_bandwidth(n)]}
        reps = max(3, repeats >> max(0, n - 16))
        lib.cf_rt_device_acquire(n, 0, 0)
        check_error(lib)
        sv = lq.StateVectorC128(n) if lq is not None else None
        per_gate = {}
        for name, (params, _) in bg.GATES.items():
            if name not in ids:
                per_gate[name] = {"error": "gate not in the runtime"}
                continue
            gate_id, _, num_wires = ids[name]
            p = np.array(params, dtype=np.float64)
            ours = np.zeros(rounds)
            theirs = np.zeros(rounds)
            for wires in bg.wire_sets(n, num_wires):
                w = np.array(wires, dtype=np.int64)
                p_ptr = as_pointer(p, c_double) if len(p) else None
                w_ptr = as_pointer(w, c_int64)
                for r in range(rounds):
                    t = time.perf_counter()
                    lib.cf_rt_gate_repeat(reps, gate_id, p_ptr, len(p), w_ptr, len(w))
                    ours[r] += (time.perf_counter() - t) / reps / 3
                check_error(lib)
                if sv is not None:
                    method = getattr(sv, name)
                    for r in range(rounds):
                        t = time.perf_counter()
                        for _ in range(reps):
                            method(wires, False, params)
                        theirs[r] += (time.perf_counter() - t) / reps / 3
            per_gate[name] = {
                "cofactor_s": ours.tolist(),
                "lightning_s": theirs.tolist() if sv is not None else None,
                "bytes": bg.bytes_moved(name, n, num_wires),
            }
        lib.cf_rt_device_release()
        del sv
        # probed before and after the gates (the machine may be shared): the best of all
        probes["copy"].append(bg.copy_bandwidth(n))
        probes["inplace"].append(inplace_bandwidth(n))
        bandwidth = max(max(v) for v in probes.values())
        for e in per_gate.values():
            if "bytes" in e:
                e["bound_s"] = e.pop("bytes") / bandwidth
        out["sizes"][str(n)] = {
            "bandwidth_Bps": bandwidth,
            "probes_Bps": {k: max(v) for k, v in probes.items()},
            "gates": per_gate,
        }


def _adjoint(bg, lib, ids, n: int, layers: int = 3, rounds: int = 3) -> dict:
    """bench_gates' adjoint workload (layers of RX, RY and a CNOT ring): one forward pass +
    expval against forward + adjoint Jacobian, through the ctypes binding."""
    from cofactor.runtime_lib import check_error

    run_forward, run_adjoint, num_gates, num_params = bg.adjoint_workload(lib, ids, n, layers)
    try:
        fwd = [bg.best_time(run_forward, 1, rounds=1) for _ in range(rounds)]
        adj = [bg.best_time(run_adjoint, 1, rounds=1) for _ in range(rounds)]
        check_error(lib)
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    finally:
        lib.cf_rt_device_release()
    return {
        "n": n,
        "forward_s": float(np.median(fwd)),
        "adjoint_s": float(np.median(adj)),
        "circuit": f"{num_gates} gates, {num_params} parameters",
    }
