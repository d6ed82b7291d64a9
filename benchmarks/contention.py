"""Section `contention`: the runtime's threads on a machine whose cores are busy (issue 14).

Each program runs with cofactor's default thread count and with one thread, first beside no
extra load ("idle": whatever else the machine runs), then beside one busy process, then
beside as many busy processes as the process's affinity mask has CPUs. Catalyst (on
lightning.qubit, default threads) runs under the same load. The busy processes are plain
Python spin loops started and killed by this module (each also ends by itself after the
section's timeout, so none outlives a crashed run).

cofactor's two thread counts are measured in one worker process, interleaved batch by batch
(`cf_rt_set_num_threads`): the load on a shared machine drifts, and interleaving puts the
same drift into both figures. A round is one batch per mode, back to back, the order
alternating from round to round, and the figure compared is the median over blocks of two
rounds (default, one, one, default) of the block's default time over its one-thread time:
such a block cancels both a linear drift and any bias of the position in a round (the
median of per-round ratios does not -- with a position effect and an odd number of rounds
it picks from the larger of the two halves). Under full load a batch's wall time swings by
tens of percent (which time slices the scheduler happens to give it): with 9 pairs of
50 ms, two modes that ran the very same serial code (n = 12) came out 1.29x apart; with
25 per-round ratios of 0.1 s batches, n = 14 (the same serial code in both modes again)
read 1.34x in one full run and 1.16x in the next. So the batches are short (about 25 ms, a
few time slices) and the rounds many (up to 240, within a time budget per case; at least
25 for the large states, whose single call lasts longer than a batch). The worker also
counts the loops the runtime's pool ran on more than one thread (`cf_rt_parallel_loops`)
in each mode: below the pool's threshold (2^16 amplitudes, n <= 15) the default mode runs
no parallel loop at all, the two modes execute the same code, and their ratio only shows
the measurement's noise.

Programs: StronglyEntanglingLayers forward (section 3's program) at each n, and a long
circuit at 16 wires (2,050 gates: layers of RY on every wire and a CNOT chain), the case
that issue 14 measured at 11x to 135x its one-thread time under full load.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from benchmarks import programs, report

LOADS = ("idle", "one", "all")
LONG_GATES = 2050
LONG_N = 16
#: cofactor's figures: default threads, one thread
MODES = ("default", "one")

# A busy process spins until its time is up, or until the benchmark that started it is gone
# (an interrupted run must not leave the machine loaded for the next measurement).
SPIN = (
    "import os, sys, time\n"
    "end, parent, n = time.time() + float(sys.argv[1]), int(sys.argv[2]), 0\n"
    "while time.time() < end and (n % 100000 or os.getppid() == parent): n += 1"
)


def cpu_count() -> int:
    """CPUs this process may run on (what cofactor's default thread count follows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def busy_count(load: str) -> int:
    return {"idle": 0, "one": 1, "all": cpu_count()}[load]


@contextmanager
def busy_processes(count: int, limit_s: float) -> Iterator[None]:
    """`count` spinning processes for the duration of the block (each ends by itself after
    limit_s at the latest)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SPIN, str(limit_s), str(os.getpid())],
            stdin=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        time.sleep(0.2 if procs else 0)  # let them start spinning
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


# -- programs ------------------------------------------------------------------------------


def long_circuit(b: programs.Backend, n: int = LONG_N, gates: int = LONG_GATES) -> Callable:
    """Layers of RY on every wire and a CNOT chain, about `gates` gates; expval(Z0)."""
    import pennylane as qml

    layers = long_layers(n, gates)

    @qml.qnode(b.device(n), **b.qnode_kwargs)
    def circuit(x):
        for layer in range(layers):
            for w in range(n):
                qml.RY(x[layer, w], wires=w)
            for w in range(n - 1):
                qml.CNOT(wires=[w, w + 1])
        return qml.expval(qml.PauliZ(0))

    return circuit


def long_layers(n: int, gates: int) -> int:
    return max(1, round(gates / (2 * n - 1)))


def build(b: programs.Backend, program: str, n: int) -> tuple[Callable, Any]:
    if program == "sel":
        return b.compile(programs.sel_circuit(b, n)), b.arg(programs.sel_weights(n))
    if program == "long":
        x = np.random.default_rng(2).uniform(0, np.pi, size=(long_layers(n, LONG_GATES), n))
        return b.compile(long_circuit(b, n)), b.arg(x)
    raise ValueError(f"unknown contention program {program!r}")


# -- worker side ---------------------------------------------------------------------------


def _batch(fn: Callable[[], Any], inner: int) -> float:
    t = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t) / inner


def task_contention(spec: dict) -> dict:
    """One program at one n: per-call samples, for cofactor per thread mode (interleaved)."""
    b = programs.make_backend(spec["system"])
    fn, arg = build(b, spec["program"], spec["n"])
    call = lambda: b.block(fn(arg))  # noqa: E731
    t = time.perf_counter()
    value = call()
    first = time.perf_counter() - t
    t = time.perf_counter()
    call()
    single = max(time.perf_counter() - t, 1e-7)
    inner = max(1, int(spec.get("min_batch_s", 0.025) / single))
    # as many rounds (two batches each) as the time budget holds, within [min_rounds, rounds]
    budget_rounds = int(spec.get("max_total_s", 12.0) / (2 * single * inner))
    rounds = max(spec.get("min_rounds", 3), min(spec.get("rounds", 5), budget_rounds))
    out: dict[str, Any] = {"compile_s": first, "value": _value(value)}
    if spec["system"] != "cofactor":
        out["call_s"] = [_batch(call, inner) for _ in range(rounds)]
        return out
    from cofactor import runtime_lib

    lib = runtime_lib.load_runtime()
    lib.cf_rt_num_threads.restype = __import__("ctypes").c_int64
    lib.cf_rt_set_num_threads.argtypes = [__import__("ctypes").c_int64]
    set_threads = {"default": 0, "one": 1}
    lib.cf_rt_set_num_threads(0)
    out["default_threads"] = int(lib.cf_rt_num_threads())
    lib.cf_rt_parallel_loops.restype = __import__("ctypes").c_int64
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    parallel_loops = dict.fromkeys(MODES, 0)
    rounds += rounds % 2  # whole blocks of two rounds (see _block_ratios)
    for r in range(rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        for mode in order:
            lib.cf_rt_set_num_threads(set_threads[mode])
            before = lib.cf_rt_parallel_loops()
            samples[mode].append(_batch(call, inner))
            parallel_loops[mode] += lib.cf_rt_parallel_loops() - before
    out["parallel_loops_per_call"] = {m: c / (rounds * inner) for m, c in parallel_loops.items()}
    lib.cf_rt_set_num_threads(0)
    out.update({f"{m}_s": s for m, s in samples.items()})
    return out


def _value(result: Any) -> float | None:
    try:
        return float(np.sum(np.asarray(result, dtype=np.float64)))
    except (TypeError, ValueError):
        return None


# -- orchestrator side ---------------------------------------------------------------------


def run_section(runner: Any) -> dict:
    """All loads x programs x systems; `runner` is benchmarks.__main__.Runner."""
    from benchmarks import env

    cfg = runner.cfg
    systems = [s for s in ("cofactor", "catalyst") if s in runner.args.contention_systems]
    cases = [("sel", n) for n in cfg["contention_n"]] + [("long", LONG_N)]
    out: dict = {"cpus": cpu_count(), "loads": {}}
    for load in LOADS:
        count = busy_count(load)
        env.log(f"contention: {load} ({count} busy processes)")
        per: dict = {}
        with busy_processes(count, cfg["timeout_s"] * len(cases) * len(systems)):
            for program, n in cases:
                key = f"{program} {n}"
                per[key] = {}
                for system in systems:
                    spec = {
                        "task": "contention",
                        "program": program,
                        "n": n,
                        "rounds": cfg["contention_rounds"],
                        "min_rounds": cfg["contention_min_rounds"],
                        "min_batch_s": cfg["contention_batch_s"],
                        "max_total_s": cfg["contention_max_total_s"],
                    }
                    r = runner.run(system, spec, threads=0)
                    per[key].update(_summarise(system, r))
        out["loads"][load] = per
    return out


def _summarise(system: str, r: dict) -> dict:
    if "error" in r:
        if system == "cofactor":
            return {f"cofactor {m}": {"error": r["error"]} for m in MODES}
        return {system: {"error": r["error"]}}
    if system != "cofactor":
        return {system: {**report.stats(r["call_s"]), "value": r.get("value")}}
    res = {}
    for m in MODES:
        res[f"cofactor {m}"] = {**report.stats(r[f"{m}_s"]), "value": r.get("value")}
    res["cofactor default"]["threads"] = r.get("default_threads")
    res["parallel_loops_per_call"] = r.get("parallel_loops_per_call")
    res["paired"] = report.stats(_block_ratios(r["default_s"], r["one_s"]))
    return res


def _block_ratios(default_s: list[float], one_s: list[float]) -> list[float]:
    """default / one thread per block of two rounds (default, one, one, default): back to
    back, so the load's drift (minutes-long on a shared machine) cancels, and so does any
    bias of going first or second in a round."""
    out = []
    for i in range(0, min(len(default_s), len(one_s)) - 1, 2):
        one = one_s[i] + one_s[i + 1]
        if one > 0:
            out.append((default_s[i] + default_s[i + 1]) / one)
    return out


# -- report ----------------------------------------------------------------------------------


def render(c: dict) -> str:
    header = [
        "",
        "cf default",
        "cf 1 thread",
        "default/1t",
        "par/call",
        "Catalyst",
        "cf default/Cat",
    ]
    rows, notes = [], []
    threads = None
    parallel_somewhere: set[str] = set()  # cases whose default mode ran a parallel loop
    counted: list[str] = []
    for load, per in c.get("loads", {}).items():
        for key, e in per.items():
            d, one, cat = e.get("cofactor default"), e.get("cofactor one"), e.get("catalyst")
            threads = threads or (d or {}).get("threads")
            par = (e.get("parallel_loops_per_call") or {}).get("default")
            if par is not None and key not in counted:
                counted.append(key)
            if par:
                parallel_somewhere.add(key)
            rows.append(
                [
                    f"{load:<4} {key}",
                    report.fmt_entry(d),
                    report.fmt_entry(one),
                    report.fmt_ratio(_default_over_one(e)),
                    "-" if par is None else f"{par:.3g}",
                    report.fmt_entry(cat),
                    report.fmt_ratio(report.ratio(d, cat)),
                ]
            )
            for name, x in (("cofactor", d), ("Catalyst", cat)):
                if isinstance(x, dict) and "error" in x:
                    notes.append(f"{name}, {load} {key}: n/a ({x['error']})")
    notes.append(
        "default/1t: the median over blocks of two rounds (default, one, one, default; batches "
        "of ~25 ms, up to 240 rounds) of the block's default time / its one-thread time; par/call: "
        "the loops per call the default mode ran on more than one thread (the pool's own count)"
    )
    serial_everywhere = [key for key in counted if key not in parallel_somewhere]
    if serial_everywhere:
        notes.append(
            f"{', '.join(serial_everywhere)}: no parallel loop in the default mode under any load "
            "(below 2^16 amplitudes, n <= 15, the pool runs every loop on the calling thread): "
            "both modes ran the same serial code, so default/1t there is the measurement's noise"
        )
    title = (
        f"6. contention: time per call beside 0 (idle), 1 (one) and {c.get('cpus', '?')} (all) "
        f"busy processes; cofactor default = {threads or '?'} threads; default/1t = median "
        "over blocks of back-to-back batches (ABBA) of default / one thread"
    )
    return report.render_rows(title, header, rows, notes)


def goals(c: dict | None) -> list[dict]:
    """Issue 14's threading goals: default <= 1.2x one thread under full load at every n;
    on an idle machine default (two threads on 2 cores) >= 1.6x faster at n >= 22."""
    if not c:
        return []
    out = []
    full = c.get("loads", {}).get("all", {})
    rs = {k: _default_over_one(e) for k, e in full.items()}
    known = {k: r for k, r in rs.items() if r is not None}
    if known:
        worst = max(known, key=known.get)
        out.append(
            _goal(
                "contention: all cores busy, default threads <= 1.2x one thread at every n",
                f"worst {known[worst]:.2f}x ({worst}); "
                + ", ".join(f"{k} {r:.2f}x" for k, r in known.items()),
                known[worst],
                1.2,
            )
        )
    idle = c.get("loads", {}).get("idle", {})
    big = {
        k: _default_over_one(e)
        for k, e in idle.items()
        if k.startswith("sel ") and int(k.split()[1]) >= 22
    }
    big = {k: r for k, r in big.items() if r is not None}
    if big:
        worst = max(big, key=big.get)
        out.append(
            _goal(
                "contention: idle machine, default threads >= 1.6x faster than one at n >= 22",
                ", ".join(f"{k}: {1 / r:.2f}x faster" for k, r in big.items())
                + " (the 'idle' load is the machine as other users left it)",
                big[worst],
                round(1 / 1.6, 3),
            )
        )
    return out


def _default_over_one(e: dict) -> float | None:
    """The median over rounds of default / one thread (paired), else the ratio of medians
    (results from before the pairing)."""
    paired = report.median(e.get("paired"))
    if paired is not None:
        return paired
    return report.ratio(e.get("cofactor default"), e.get("cofactor one"))


def _goal(goal: str, measured: str, value: float | None, target: float) -> dict:
    met = None if value is None else value <= target
    return {
        "goal": goal,
        "measured": measured,
        "ratio": value,
        "target": target,
        "met": met,
        "note": "",
    }
