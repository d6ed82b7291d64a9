"""The distributed device (docs/distributed.md): memory per rank, exchanges, time per gate.

    python benchmarks/bench_distributed.py [--qubits 26] [--ranks 1,2,4] [--repeats 5]

For each P in --ranks it launches `mpirun -n P` (oversubscribed, as root if needed) on this
script with --worker; every rank writes a JSON file with
  - rss_state_mib: the growth of its resident memory (VmHWM, the peak) from before the device
    existed to after a gate with an exchange ran, i.e. the shard plus the exchange buffers,
    against the ideal 16 * 2^n / P;
  - local_ms / single_ms: time per Hadamard on the last wire (local on every rank: no
    communication) on the sharded device of min(n, 22) qubits, and on the single-process
    device of the same local size in the same rank, alternated, best of --repeats rounds;
  - exchange_ms: time per Hadamard when every gate needs an exchange (the wires taken round
    robin, so the least recently used wire is always the next one needed: the worst case);
  - exchanged_mib: bytes one rank sends per exchange (half its shard; it receives as much).
and the bytes one rank sends for each kind of operation (measured by the MPI library's
counter, in units of its shard). Not a test.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from ctypes import c_double, c_int64
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _vm(key: str) -> float:
    """VmRSS / VmHWM of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _time_per_gate(lib, gid: int, wires: list[int], repeats: int) -> float:
    w = np.ascontiguousarray(wires, dtype=np.int64)
    p = np.zeros(1)
    pp, wp = p.ctypes.data_as(ctypes.POINTER(c_double)), w.ctypes.data_as(ctypes.POINTER(c_int64))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        lib.cf_rt_gate_repeat(1, gid, pp, 0, wp, 1)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def _ptr(array: np.ndarray, ctype: type) -> object:
    return array.ctypes.data_as(ctypes.POINTER(ctype))


def _bytes_per_operation(lib, P: int, n: int = 14) -> dict[str, float]:
    """Bytes one rank sends for each operation on a fresh device (identity map: wire 0 is
    global, wire n-1 local), in units of its shard S = 16 * 2^(n-k): measured with the MPI
    library's counter (cf_mpi_bytes_sent)."""
    from cofactor.runtime_lib import OBS_KINDS, check_error, gate_ids, library_path

    mpi = ctypes.CDLL(str(library_path().parent / "libcofactor_runtime_mpi.so"))
    mpi.cf_mpi_bytes_sent.restype = ctypes.c_uint64
    ids = gate_ids(lib)
    shard = 16 * 2 ** (n - (P.bit_length() - 1))
    last = n - 1

    def gate(name: str, wires: list[int], ctrl: list[int] | None = None) -> None:
        w = np.ascontiguousarray(wires, dtype=np.int64)
        c = np.ascontiguousarray(ctrl or [], dtype=np.int64)
        v = np.ones(len(c), dtype=np.int8)
        p = np.full(max(1, ids[name][1]), 0.3)
        i8 = ctypes.c_int8
        lib.cf_rt_gate(
            ids[name][0], _ptr(p, c_double), ids[name][1], _ptr(w, c_int64), len(w), 0,
            _ptr(c, c_int64), _ptr(v, i8), len(c),
        )  # fmt: skip

    def expval_z0() -> None:
        lib.cf_rt_expval(lib.cf_rt_obs_named(OBS_KINDS["PauliZ"], 0))

    def probs_0() -> None:
        out, w = np.zeros(2), np.zeros(1, dtype=np.int64)
        lib.cf_rt_probs(
            out.ctypes.data_as(ctypes.POINTER(c_double)),
            w.ctypes.data_as(ctypes.POINTER(c_int64)),
            1,
        )

    cases = {
        "Hadamard(local)": lambda: gate("Hadamard", [last]),
        "Hadamard(global)": lambda: gate("Hadamard", [0]),
        "Hadamard(global) twice": lambda: (gate("Hadamard", [0]), gate("Hadamard", [0])),
        "RZ(global)": lambda: gate("RZ", [0]),
        "CNOT(ctrl global, target local)": lambda: gate("CNOT", [0, last]),
        "CNOT(ctrl local, target global)": lambda: gate("CNOT", [last, 0]),
        "RX(local) ctrl=global": lambda: gate("RX", [last], [0]),
        "CZ(global, local)": lambda: gate("CZ", [0, last]),
        "expval(Z global)": expval_z0,
        "probs(global wire)": probs_0,
    }
    if P >= 4:
        cases["SWAP(global, global)"] = lambda: gate("SWAP", [0, 1])
    out = {}
    for name, case in cases.items():
        lib.cf_rt_set_distributed(1)
        lib.cf_rt_device_acquire(n, 0, 1)
        before = mpi.cf_mpi_bytes_sent()
        case()
        check_error(lib)
        out[name] = (mpi.cf_mpi_bytes_sent() - before) / shard
        lib.cf_rt_device_release()
    return out


def worker(n: int, repeats: int, out_dir: str) -> None:
    sys.path.insert(0, str(ROOT / "frontend"))
    from cofactor.runtime_lib import check_error, gate_ids, load_runtime

    lib = load_runtime()
    rank, size = c_int64(), c_int64()
    lib.cf_rt_distributed_info(ctypes.byref(rank), ctypes.byref(size))
    check_error(lib)
    P, k = size.value, size.value.bit_length() - 1
    H = gate_ids(lib)["Hadamard"][0]
    hwm0 = _vm("VmHWM")
    lib.cf_rt_set_distributed(1)
    lib.cf_rt_device_acquire(n, 0, 1)
    check_error(lib)
    # touch the whole shard, then one exchange (wire 0 is global when P > 1)
    _time_per_gate(lib, H, [n - 1], 1)
    _time_per_gate(lib, H, [0], 1)
    rss_state = _vm("VmHWM") - hwm0
    # round robin over the wires: with P > 1 every gate exchanges
    times = []
    for w in range(n) if P > 1 else []:
        times.append(_time_per_gate(lib, H, [w], 1))
    exchange_ms = float(np.median(times)) if times else float("nan")
    lib.cf_rt_device_release()
    check_error(lib)
    # The 1.1x goal: a local gate on the sharded device against the single-process device of
    # the same local size, in this rank, at m <= 22 qubits, alternating the two devices
    # round by round and keeping each one's best (a loaded machine only ever adds time).
    m = min(n, 22)
    best = {1: float("inf"), 0: float("inf")}
    for _ in range(repeats):
        for distributed in (1, 0):
            qubits = m if distributed else m - k
            lib.cf_rt_set_distributed(distributed)
            lib.cf_rt_device_acquire(qubits, 0, 1)
            _time_per_gate(lib, H, [qubits - 1], 1)
            t = _time_per_gate(lib, H, [qubits - 1], 10)
            best[distributed] = min(best[distributed], t)
            lib.cf_rt_device_release()
            check_error(lib)
    local_ms, single_ms = best[1], best[0]
    bytes_per_op = _bytes_per_operation(lib, P) if P > 1 else {}
    report = {
        "bytes_per_op": bytes_per_op,
        "P": P,
        "rank": rank.value,
        "n": n,
        "ratio_qubits": m,
        "rss_state_mib": rss_state,
        "ideal_mib": 16 * 2**n / P / 2**20,
        "local_ms": local_ms,
        "single_same_local_ms": single_ms,
        "exchange_ms": exchange_ms,
        "exchanged_mib": (8 * 2 ** (n - k) / 2**20) if P > 1 else 0.0,
    }
    Path(out_dir, f"rank{rank.value}.json").write_text(json.dumps(report))


def launch(P: int, n: int, repeats: int) -> list[dict]:
    command = ["mpirun", "-n", str(P), "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    # The sharded device applies each gate as it comes; the single-process one would queue
    # gates for fusion (runtime/src/GateFusion.hpp) and time only the queueing: compare
    # gate for gate.
    env.setdefault("COFACTOR_FUSION", "0")
    with tempfile.TemporaryDirectory() as tmp:  # a file per rank: stdout lines interleave
        command += [sys.executable, __file__, "--worker", "--qubits", str(n)]
        command += ["--repeats", str(repeats), "--out-dir", tmp]
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
        if out.returncode != 0:
            raise SystemExit(f"mpirun -n {P} failed:\n{out.stdout}\n{out.stderr}")
        return [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(P)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qubits", type=int, default=26)
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()
    if args.worker:
        worker(args.qubits, args.repeats, args.out_dir)
        return
    threads = os.environ.get("OMP_NUM_THREADS", "1")
    print(f"n = {args.qubits} (local/single ms at min(n, 22) qubits); OMP_NUM_THREADS={threads}")
    header = (
        f"{'P':>2} {'rank':>4} {'state MiB':>10} {'ideal':>8} {'ratio':>6} {'local ms':>9} "
        f"{'single ms':>9} {'loc/sgl':>7} {'exch ms':>8} {'sent MiB':>9}"
    )
    print(header)
    for P in (int(p) for p in args.ranks.split(",")):
        for r in launch(P, args.qubits, args.repeats):
            print(
                f"{r['P']:>2} {r['rank']:>4} {r['rss_state_mib']:>10.1f} {r['ideal_mib']:>8.1f} "
                f"{r['rss_state_mib'] / r['ideal_mib']:>6.3f} {r['local_ms']:>9.2f} "
                f"{r['single_same_local_ms']:>9.2f} "
                f"{r['local_ms'] / r['single_same_local_ms']:>7.3f} {r['exchange_ms']:>8.2f} "
                f"{r['exchanged_mib']:>9.1f}",
                flush=True,
            )
            if r["rank"] == 0 and r["bytes_per_op"]:
                ops = ", ".join(f"{k}: {v:g} S" for k, v in r["bytes_per_op"].items())
                print(f"   sent per operation (S = this rank's shard): {ops}", flush=True)


if __name__ == "__main__":
    main()
