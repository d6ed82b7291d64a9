"""Gate kernel benchmark: cofactor's runtime vs PennyLane-Lightning vs the memory bound.

For each gate and register size, prints the time per gate application of
  - cofactor  (cf_rt_gate_repeat: the C kernel without per-call overhead), on 1 thread
              and on all OpenMP threads (the "cf Nthr" column; same as 1 thread below the
              runtime's 2^16-amplitude OpenMP threshold),
  - lightning (pennylane_lightning's StateVectorC128 bound method, called from a Python
               loop; its ~1 us call overhead is negligible at n >= 14; Lightning applies
               gates on one thread),
  - the memory bound (bytes the gate must read + write -- whole 64-byte cache lines, see
               touched_fraction -- / copy bandwidth measured with numpy on this machine,
               single-threaded),
averaged over target wires at the top, middle and bottom of the register, and the ratios.
Then the adjoint Jacobian of one expval against one forward pass + expval.

    python benchmarks/bench_gates.py [--quick] [--lib PATH] [--repeats N]

On a machine shared with other work, multi-threaded timings suffer most (a descheduled
OpenMP worker stalls a whole parallel region); compare the 1-thread columns then. Not a test.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from ctypes import c_double, c_int64
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
from cofactor.runtime_lib import as_pointer, check_error, gate_ids, load_runtime  # noqa: E402

# gate -> (params, which amplitudes it changes: a predicate on the bits of its wires, first
# wire first; None: all of them)
GATES = {
    "Hadamard": ([], None),
    "RX": ([0.3], None),
    "RZ": ([0.3], None),
    "PhaseShift": ([0.3], lambda b: b[0] == 1),  # only the |1> half changes
    "CNOT": ([], lambda b: b[0] == 1),  # swaps the control = 1 half
    "CZ": ([], lambda b: (b[0] & b[1]) == 1),  # negates the |11> quarter
    "SWAP": ([], lambda b: b[0] != b[1]),  # exchanges |01> and |10>
    "IsingXX": ([0.3], None),
    "IsingZZ": ([0.3], None),
    "DoubleExcitation": ([0.3], None),
}

CACHE_LINE_AMPS = 4  # 64 bytes of complex128


def touched_fraction(name: str, wires: list[int], n: int) -> float:
    """The fraction of the state's cache lines that gate `name` on `wires` must read and
    write: a line moves whole, so PhaseShift on the last wire, which changes every other
    amplitude, moves all of the state, and on the first wire half of it."""
    changes = GATES[name][1]
    if changes is None:
        return 1.0
    bits = [n - 1 - w for w in wires]
    # the pattern repeats with the period of the highest bit; a line spans the lowest two
    idx = np.arange(2 ** max(max(bits) + 1, 2))
    changed = changes([(idx >> b) & 1 for b in bits])
    return float(changed.reshape(-1, CACHE_LINE_AMPS).any(axis=1).mean())


def bytes_moved(name: str, n: int, num_wires: int) -> float:
    """Bytes read + written by one application of `name`, averaged over wire_sets."""
    sets = wire_sets(n, num_wires)
    return sum(2 * 16 * 2**n * touched_fraction(name, w, n) for w in sets) / len(sets)


def copy_bandwidth(n: int) -> float:
    """Bytes per second (read + write) of a numpy copy of a 2^n complex128 array."""
    src = np.ones(2**n, dtype=np.complex128)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2 * src.nbytes / best


def best_time(fn, repeats: int, rounds: int = 3) -> float:
    """Best-of-rounds time of one call of fn (fn applies the gate `repeats` times)."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t) / repeats)
    return best


def wire_sets(n: int, k: int) -> list[list[int]]:
    """k adjacent wires at the top, middle and bottom of the register."""
    return [list(range(s, s + k)) for s in (0, n // 2 - k // 2, n - k)]


def _omp_set_num_threads():
    """libgomp's omp_set_num_threads for the calling thread (the runtime's loops run in it)."""
    try:
        return ctypes.CDLL("libgomp.so.1").omp_set_num_threads
    except OSError:
        return None


def time_cofactor(lib, ids, n, name, reps):
    """Seconds per application of gate `name`, averaged over wire_sets."""
    gate_id, _, num_wires = ids[name]
    p = np.array(GATES[name][0], dtype=np.float64)
    total = 0.0
    for wires in wire_sets(n, num_wires):
        w = np.array(wires, dtype=np.int64)
        p_ptr = as_pointer(p, c_double) if len(p) else None
        args = (reps, gate_id, p_ptr, len(p), as_pointer(w, c_int64), len(w))
        total += best_time(lambda args=args: lib.cf_rt_gate_repeat(*args), reps)
        check_error(lib)
    return total / 3


def time_lightning(sv, ids, n, name, reps):
    method, params = getattr(sv, name), GATES[name][0]
    total = 0.0
    for wires in wire_sets(n, ids[name][2]):

        def light(wires=wires):
            for _ in range(reps):
                method(wires, False, params)

        total += best_time(light, reps)
    return total / 3


def bench_gates(lib, ids, sizes, repeats):
    import pennylane_lightning.lightning_qubit_ops as lq

    set_threads = _omp_set_num_threads()
    max_threads = ctypes.CDLL("libgomp.so.1").omp_get_max_threads() if set_threads else 1
    print(
        f"\n{'gate':<17}{'n':>3}{'cf 1thr us':>12}{f'cf {max_threads}thr us':>12}{'light us':>10}"
        f"{'bound us':>10}{'cf1/light':>10}{'cfN/light':>10}{'cf1/bound':>10}"
    )
    for n in sizes:
        bandwidth = copy_bandwidth(n)
        lib.cf_rt_device_acquire(n, 0, 0)
        check_error(lib)
        sv = lq.StateVectorC128(n)
        reps = max(3, repeats >> max(0, n - 16))

        # one pass per thread count: switching the OpenMP team size per gate would time the
        # wake-up of parked worker threads instead of the kernels
        times = {}
        for threads in sorted({1, max_threads}):
            if set_threads:
                set_threads(threads)
            time_cofactor(lib, ids, n, "Hadamard", reps)  # warm-up: start the team
            times[threads] = {name: time_cofactor(lib, ids, n, name, reps) for name in GATES}
        light = {name: time_lightning(sv, ids, n, name, reps) for name in GATES}
        for name in GATES:
            ours, ours_n, theirs = times[1][name], times[max_threads][name], light[name]
            bound = bytes_moved(name, n, ids[name][2]) / bandwidth
            print(
                f"{name:<17}{n:>3}{ours * 1e6:>12.1f}{ours_n * 1e6:>12.1f}{theirs * 1e6:>10.1f}"
                f"{bound * 1e6:>10.1f}{ours / theirs:>10.2f}{ours_n / theirs:>10.2f}"
                f"{ours / bound:>10.2f}"
            )
        print(f"  (copy bandwidth at n={n}: {bandwidth / 1e9:.1f} GB/s read+write)")
        del sv
    lib.cf_rt_device_release()


def adjoint_workload(lib, ids, n, layers=3):
    """Layers of RX, RY and a CNOT ring on n wires, prepared for the ctypes calls; returns
    (run_forward, run_adjoint, number of gates, number of parameters): one forward pass +
    expval, and a recorded forward pass + the adjoint Jacobian of that expval."""
    rng = np.random.default_rng(0)
    gates = []
    for _ in range(layers):
        for w in range(n):
            gates.append(("RX", [rng.uniform()], [w]))
            gates.append(("RY", [rng.uniform()], [w]))
        for w in range(n):
            gates.append(("CNOT", [], [w, (w + 1) % n]))
    prepared = []
    for name, params, wires in gates:
        p = np.array(params, dtype=np.float64)
        w = np.array(wires, dtype=np.int64)
        p_ptr = as_pointer(p, c_double) if len(p) else None
        prepared.append((ids[name][0], p, p_ptr, len(p), w, as_pointer(w, c_int64), len(w)))

    def forward(record):
        lib.cf_rt_device_acquire(n, 0, 0)
        if record:
            lib.cf_rt_tape_start()
        for gid, _p, pp, np_, _w, wp, nw in prepared:
            lib.cf_rt_gate(gid, pp, np_, wp, nw, 0, None, None, 0)
        if record:
            lib.cf_rt_tape_stop()
        return lib.cf_rt_obs_named(3, 0)

    def run_forward():
        lib.cf_rt_expval(forward(False))

    num_params = 2 * n * layers
    jac = np.zeros(num_params)

    def run_adjoint():
        h = ctypes.c_int64(forward(True))
        lib.cf_rt_adjoint_jacobian(ctypes.byref(h), 1, as_pointer(jac, c_double))

    return run_forward, run_adjoint, len(gates), num_params


def bench_adjoint(lib, ids, n, layers=3):
    """One forward pass + expval vs forward + adjoint Jacobian of that expval."""
    run_forward, run_adjoint, num_gates, num_params = adjoint_workload(lib, ids, n, layers)
    print(f"\nadjoint Jacobian, n={n}, {num_gates} gates, {num_params} parameters:")
    set_threads = _omp_set_num_threads()
    max_threads = ctypes.CDLL("libgomp.so.1").omp_get_max_threads() if set_threads else 1
    for threads in sorted({1, max_threads}):
        if set_threads:
            set_threads(threads)
        t_fwd = best_time(run_forward, 1, rounds=5)
        t_adj = best_time(run_adjoint, 1, rounds=5)
        check_error(lib)
        print(
            f"  {threads} thread(s): forward + expval {t_fwd * 1e3:8.2f} ms, forward + adjoint "
            f"Jacobian {t_adj * 1e3:8.2f} ms ({t_adj / t_fwd:.2f}x)"
        )
    lib.cf_rt_device_release()


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="n = 14, 16, 18, 20 instead of 16..24")
    parser.add_argument("--lib", default=None, help="path of libcofactor_runtime.so")
    parser.add_argument(
        "--repeats", type=int, default=40, help="gate applications per timing at n=16"
    )
    args = parser.parse_args()
    lib = load_runtime(args.lib)
    ids = gate_ids(lib)
    sizes = [14, 16, 18, 20] if args.quick else [16, 20, 22, 24]
    bench_gates(lib, ids, sizes, args.repeats)
    bench_adjoint(lib, ids, 16 if args.quick else 20)


if __name__ == "__main__":
    main()
