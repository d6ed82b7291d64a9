"""In-process A/B of the kernels' software-prefetch modes (runtime/README.md, "Which
software prefetch, per CPU") on the kernels section's rows, one thread.

    PYTHONPATH=frontend .venv/bin/python -m benchmarks.prefetch_ab --n 24 --modes l1,off,l1own

Each round goes over every row and, per row, every mode (`cf_rt_kernel_prefetch` switched
in the running process; the order of rows and modes reversed every other round); a sample
is the kernel's CPU time per application over the best of two in-place numpy negations of
a state-sized buffer timed just before it (a FULL pass for every row, so half patterns are
bounded by 0.5 and quarter patterns by 0.25); the median over rounds is printed. Gate
fusion is off, as in the kernels section. Session 19 used it to pick Intel's mode.
"""

from __future__ import annotations

import argparse
import os
import time
from ctypes import c_double, c_int, c_int64

import numpy as np

from benchmarks.kernels import KERNELS, PREFETCH_MODES

MODE_IDS = {name: mode for mode, name in PREFETCH_MODES.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--modes", default="l1,l2,off,l1own", help="comma-separated")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3, help="applications per sample")
    ap.add_argument("--rows", default="", help="comma-separated label substrings")
    args = ap.parse_args(argv)
    os.environ["COFACTOR_FUSION"] = "0"  # read when the device is acquired
    from cofactor import toolchain
    from cofactor.runtime_lib import as_pointer, check_error, gate_ids, load_runtime

    n, modes = args.n, [MODE_IDS[m] for m in args.modes.split(",")]
    words = [w for w in args.rows.split(",") if w]
    rows = {
        label: (gate, params, wires(n))
        for label, (gate, params, wires) in KERNELS.items()
        if not words or any(w.lower() in label.lower() for w in words)
    }
    lib = load_runtime(os.environ.get("COFACTOR_RUNTIME_LIB") or toolchain.find("runtime"))
    lib.cf_rt_kernel_prefetch.restype = c_int
    lib.cf_rt_kernel_prefetch.argtypes = [c_int]
    ids = gate_ids(lib)
    lib.cf_rt_device_acquire(n, 0, 0)
    check_error(lib)
    lib.cf_rt_set_num_threads(1)
    buf = np.full(2**n, 1.0 + 0.5j).view(np.float64)

    def one_pass() -> float:
        t = time.thread_time()
        np.negative(buf, out=buf)
        return time.thread_time() - t

    keep, calls = [], {}  # keep: the arrays the pointers point into
    for label, (gate, params, wires) in rows.items():
        p, w = np.array(params, dtype=np.float64), np.array(wires, dtype=np.int64)
        keep += [p, w]
        ptrs = (as_pointer(p, c_double) if len(p) else None, len(p))
        ptrs += (as_pointer(w, c_int64) if len(w) else None, len(w))
        calls[label] = (ids[gate][0], ptrs)
    ratios: dict[tuple[str, int], list[float]] = {(r, m): [] for r in rows for m in modes}
    for r in range(args.rounds):
        for label in list(rows) if r % 2 == 0 else list(rows)[::-1]:
            gid, ptrs = calls[label]
            for mode in modes if r % 2 == 0 else modes[::-1]:
                lib.cf_rt_kernel_prefetch(mode)
                lib.cf_rt_gate_repeat(1, gid, *ptrs)  # warm-up: its code and the TLB
                bound = min(one_pass(), one_pass())
                t = time.thread_time()
                lib.cf_rt_gate_repeat(args.reps, gid, *ptrs)
                ratios[(label, mode)].append((time.thread_time() - t) / args.reps / bound)
    check_error(lib)
    lib.cf_rt_device_release()
    width = max(len(label) for label in rows)
    print(f"n={n}, one thread, median kernel time / paired full pass over {args.rounds} rounds")
    for label in rows:
        cells = (f"{PREFETCH_MODES[m]}: {np.median(ratios[(label, m)]):.2f}x" for m in modes)
        print(f"{label:{width}s}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
