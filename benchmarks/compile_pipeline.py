"""Where cofactor's compile time goes: the in-process pipeline (libcofactor-compiler.so)
against the five subprocesses, stage by stage, for the programs of section 1 (a: the 4-qubit
circuit, b: its gradient, c: 50 descent steps over it), and the load of a cached library in
a new process.

    .venv/bin/python -m benchmarks.compile_pipeline [--repeat 5]

Diagnostic only (it wraps private functions of cofactor); the ratios against Catalyst come
from `python -m benchmarks --only compile`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks import programs

CACHED_LOAD = """
import sys, time
t0 = time.perf_counter()
import numpy as np, pennylane as qml, cofactor
from benchmarks import programs
t1 = time.perf_counter()
fn, arg = programs.compile_program(programs.make_backend("cofactor"), sys.argv[1])
fn(arg)
t2 = time.perf_counter()
print(f"{(t1 - t0) * 1e3:.1f} {(t2 - t1) * 1e3:.1f}")
"""


def _new_process(program: str, env: dict[str, str], repeat: int) -> list[tuple[float, float]]:
    """(import ms, first call ms) of `program` in `repeat` new processes."""
    out = []
    for _ in range(repeat):
        proc = subprocess.run(
            [sys.executable, "-c", CACHED_LOAD, program],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(tuple(map(float, proc.stdout.split())))
    return out


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children: on a loaded machine, a
    better estimate of a quiet machine's wall time than the wall time itself."""
    me, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _median_ms(samples: list[float]) -> str:
    """The median and, in brackets, the minimum (the least disturbed by other load)."""
    return f"{statistics.median(samples) * 1e3:.1f} [{min(samples) * 1e3:.1f}]"


def _module_text(program: str) -> str:
    os.environ["COFACTOR_DISABLE_CACHE"] = "1"
    fn, arg = programs.compile_program(programs.make_backend("cofactor"), program)
    fn(arg)
    return fn.mlir


def _time_subprocess(text: str, repeat: int) -> dict[str, str]:
    from cofactor import compiler

    os.environ[compiler.PIPELINE_ENV] = "subprocess"
    run = compiler._run
    stages: dict[str, list[float]] = {}
    current: dict[str, float] = {}

    def timed(stage: str, *args: Any, **kwargs: Any) -> str:
        t = time.perf_counter()
        try:
            return run(stage, *args, **kwargs)
        finally:
            current[stage] = current.get(stage, 0.0) + time.perf_counter() - t

    compiler._run = timed
    try:
        for _ in range(repeat):
            current.clear()
            t, cpu = time.perf_counter(), _cpu_s()
            compiler.compile_module(text, name="bench", cache=False)
            current["total"] = time.perf_counter() - t
            current["total_cpu"] = _cpu_s() - cpu
            for stage, s in current.items():
                stages.setdefault(stage, []).append(s)
    finally:
        compiler._run = run
    return {stage: _median_ms(s) for stage, s in stages.items()}


def _time_in_process(text: str, repeat: int) -> tuple[float, dict[str, str]]:
    """The first compile in this process (it loads the library) and the medians after."""
    from cofactor import compiler, native_compiler

    os.environ[compiler.PIPELINE_ENV] = "inprocess"
    compile_native = native_compiler.compile_native
    last: dict[str, float] = {}

    def timed(*args: Any, **kwargs: Any) -> Any:
        result = compile_native(*args, **kwargs)
        last.update({k: v / 1e3 for k, v in result.ms.items()})
        return result

    native_compiler.compile_native = timed
    stages: dict[str, list[float]] = {}
    try:
        t = time.perf_counter()
        compiler.compile_module(text, name="bench", cache=False)
        first = (time.perf_counter() - t) * 1e3
        for _ in range(repeat):
            t, cpu = time.perf_counter(), _cpu_s()
            compiler.compile_module(text, name="bench", cache=False)
            last["total"] = time.perf_counter() - t
            last["total_cpu"] = _cpu_s() - cpu
            for stage, s in last.items():
                stages.setdefault(stage, []).append(s)
    finally:
        native_compiler.compile_native = compile_native
    return first, {stage: _median_ms(s) for stage, s in stages.items()}


def _cached_load(program: str, repeat: int) -> list[tuple[float, float]]:
    """(import ms, first call of a cached function ms) in new processes."""
    env = {"COFACTOR_DISABLE_CACHE": "0", "COFACTOR_PIPELINE": "auto"}
    _new_process(program, env, 1)  # fills the cache
    return _new_process(program, env, repeat)


def _summary(runs: list[tuple[float, float]]) -> str:
    imports = statistics.median(i for i, _ in runs)
    calls = ", ".join(f"{c:.1f}" for _, c in runs)
    return f"import {imports:.0f} (median), first call {calls}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--programs", default="a,b,c")
    parser.add_argument(
        "--no-new-process", action="store_true", help="skip the runs in new processes"
    )
    args = parser.parse_args()
    os.environ.setdefault("COFACTOR_CACHE_DIR", tempfile.mkdtemp(prefix="cofactor-bench-"))
    for program in args.programs.split(","):
        text = _module_text(program)
        first, native = _time_in_process(text, args.repeat)
        tools = _time_subprocess(text, args.repeat)
        print(f"program {program} ({len(text)} chars of MLIR), ms: median [min] of {args.repeat}")
        print("  subprocess: " + ", ".join(f"{k} {v}" for k, v in tools.items()))
        stages = ", ".join(f"{k} {v}" for k, v in native.items())
        print(f"  in process: first {first:.1f}; {stages}")
        if args.no_new_process:
            continue
        print("  new process, cached: " + _summary(_cached_load(program, 3)))
        for label, env in (
            ("preload", {}),
            ("no preload", {"COFACTOR_PRELOAD": "0"}),
            ("subprocess", {"COFACTOR_PIPELINE": "subprocess"}),
        ):
            runs = _new_process(program, {"COFACTOR_DISABLE_CACHE": "1", **env}, 3)
            print(f"  new process, not cached, {label}: " + _summary(runs))


if __name__ == "__main__":
    main()
