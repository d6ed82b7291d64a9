"""One measurement in a fresh process: `python -m benchmarks.worker '<json spec>'`.

The orchestrator (`python -m benchmarks`) starts this with the interpreter of the system's
virtual environment (cofactor's .venv or .venv-peers). It prints one line
`@@RESULT <json>` at the end; a program a system cannot run is reported in that JSON as
{"error": "..."} instead of failing the process.

Time definitions (every figure is a list of samples; the orchestrator takes median/min/max):
  import_s     importing pennylane and the system (cold processes only),
  compile_s    first call of a new compiled function minus the median later call, i.e.
               tracing + compiling + loading, without the execution itself,
  call_s       one call of the compiled function, result ready (jax: block_until_ready).
  cached_load  (cofactor) the first call, in a new process, of a function whose library
               is in the disk cache: tracing, the cache's key and lookup, loading the library
               and the call itself; the QNode and its device are built before (PennyLane's).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import programs
from benchmarks.programs import Backend, NotAvailable

RESULT_TAG = "@@RESULT "


def _short(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    first = text.splitlines()[0] if text else type(err).__name__
    return first[:300]


def sample_calls(
    fn: Callable[[], Any], batches: int, min_batch_s: float, max_total_s: float
) -> list[float]:
    """Per-call times: `batches` batches of k calls (k so that a batch lasts >= min_batch_s),
    fewer batches (at least 3) when that would exceed max_total_s."""
    t = time.perf_counter()
    fn()
    single = max(time.perf_counter() - t, 1e-7)
    inner = max(1, int(min_batch_s / single))
    batches = max(3, min(batches, int(max_total_s / (single * inner)) or 1))
    samples = []
    if inner == 1:  # a slow call: the calibration call is a sample too
        samples.append(single)
    while len(samples) < batches:
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t) / inner)
    return samples


def value_summary(result: Any) -> float | None:
    """One number per result, compared across systems: the value, or the sum of an array."""
    try:
        return float(np.sum(np.asarray(result, dtype=np.float64)))
    except (TypeError, ValueError):
        return None


def first_call(b: Backend, fn: Callable, arg: Any, settle: int = 3) -> dict:
    """Time the first call (compiles) and a few later ones; compile_s = first - median."""
    t = time.perf_counter()
    result = b.block(fn(arg))
    first = time.perf_counter() - t
    later = []
    for _ in range(settle):
        t = time.perf_counter()
        b.block(fn(arg))
        later.append(time.perf_counter() - t)
    run = float(np.median(later))
    return {
        "first_s": first,
        "call_s": run,
        "compile_s": max(first - run, 0.0),
        "value": value_summary(result),
    }


def task_compile(spec: dict) -> dict:
    """Section 1: cold compile (first in this new process) and warm compiles (new functions)."""
    t = time.perf_counter()
    import pennylane  # noqa: F401

    b = programs.make_backend(spec["system"])
    import_s = time.perf_counter() - t
    out: dict[str, Any] = {"import_s": import_s}
    try:
        fn, arg = programs.compile_program(b, spec["program"])
        cold = first_call(b, fn, arg)
    except NotAvailable as err:
        return {**out, "error": str(err)}
    except Exception as err:  # a program the system cannot compile: reported, not fatal
        return {**out, "error": _short(err), "traceback": traceback.format_exc()[-2000:]}
    out["cold_compile_s"] = cold["compile_s"]
    out["cold_first_call_s"] = cold["first_s"]
    out["call_s"] = cold["call_s"]
    out["value"] = cold["value"]
    warm = []
    for _ in range(spec.get("warm", 3)):
        fn, arg = programs.compile_program(b, spec["program"])
        warm.append(first_call(b, fn, arg, settle=1)["compile_s"])
    out["warm_compile_s"] = warm
    if spec["system"] == "cofactor":
        out["stages_s"] = _cofactor_stages(b, spec["program"])
    return out


def task_cached_load(spec: dict) -> dict:
    """The first call of program `spec["program"]` in this new process, its library in the
    disk cache (`spec["env"]` names the cache folder): wall and CPU seconds of the call alone.
    The function and its QNode/device are built first: they are PennyLane's, not the load."""
    if spec["system"] != "cofactor":
        raise NotAvailable("the disk cache is cofactor's")
    t = time.perf_counter()
    import pennylane  # noqa: F401

    b = programs.make_backend("cofactor")
    import_s = time.perf_counter() - t
    fn, arg = programs.compile_program(b, spec["program"])
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(arg)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "import_s": import_s,
        "first_call_s": wall,
        "first_call_cpu_s": cpu,
        "from_cache": bool(fn._last.library.from_cache),
        "value": value_summary(result),
    }


def _cofactor_stages(b: Backend, program: str) -> dict | None:
    """Where a warm cofactor compilation spends its time: tracing, the driver and each of
    its stages (`CompiledLibrary.stage_s`), recorded as the scale section records them."""
    from benchmarks.scale import CofactorStages

    recorder = CofactorStages()
    try:
        with recorder:
            fn, arg = programs.compile_program(b, program)
            t = time.perf_counter()
            fn(arg)
            total = time.perf_counter() - t
    except Exception:
        return None
    return {**recorder.stages, "total": total}


def _measure(b: Backend, build: Callable[[], tuple[Callable, Any]], spec: dict) -> dict:
    try:
        fn, arg = build()
        t = time.perf_counter()
        result = b.block(fn(arg))
        first = time.perf_counter() - t
        samples = sample_calls(
            lambda: b.block(fn(arg)),
            spec.get("batches", 7),
            spec.get("min_batch_s", 0.02),
            spec.get("max_total_s", 10.0),
        )
    except NotAvailable as err:
        return {"error": str(err)}
    except Exception as err:
        return {"error": _short(err), "traceback": traceback.format_exc()[-2000:]}
    compile_s = max(first - float(np.median(samples)), 0.0)
    return {"compile_s": compile_s, "call_s": samples, "value": value_summary(result)}


def task_percall(spec: dict) -> dict:
    """Section 2: per-call time of a 1-qubit RX circuit and of a function with no circuit."""
    b = programs.make_backend(spec["system"])
    out = {}
    out["rx"] = _measure(b, lambda: (b.compile(programs.rx_circuit(b)), 0.3), spec)
    if b.jit is None:
        out["nocircuit"] = {"error": "no JIT: a plain Python function"}
    else:
        out["nocircuit"] = _measure(b, lambda: (b.compile(programs.no_circuit), 0.3), spec)
    return out


def task_sel(spec: dict) -> dict:
    """Section 3: forward and gradient of StronglyEntanglingLayers at n qubits."""
    b = programs.make_backend(spec["system"])
    n = spec["n"]
    w = b.arg(programs.sel_weights(n))
    out = {}
    if "forward" in spec.get("parts", ("forward", "gradient")):
        out["forward"] = _measure(b, lambda: (b.compile(programs.sel_circuit(b, n)), w), spec)
    if "gradient" in spec.get("parts", ("forward", "gradient")):
        out["gradient"] = _measure(
            b, lambda: (b.compile(b.gradient(programs.sel_circuit(b, n))), w), spec
        )
    return out


def task_loop(spec: dict) -> dict:
    """Section 4: 50 gradient-descent steps over StronglyEntanglingLayers, one compiled call."""
    b = programs.make_backend(spec["system"])
    n = spec["n"]
    w = b.arg(programs.sel_weights(n))
    return {
        "loop": _measure(
            b, lambda: (b.compile(programs.descent(b, programs.sel_circuit(b, n))), w), spec
        )
    }


def task_long(spec: dict) -> dict:
    """Fusion section: the long 16-wire circuit (programs.long_circuit), forward."""
    b = programs.make_backend(spec["system"])
    x = b.arg(programs.long_args())
    return {"forward": _measure(b, lambda: (b.compile(programs.long_circuit(b)), x), spec)}


TASKS = {
    "compile": task_compile,
    "cached_load": task_cached_load,
    "percall": task_percall,
    "sel": task_sel,
    "loop": task_loop,
    "long": task_long,
}


def main() -> None:
    spec = json.loads(sys.argv[1])
    # runtime knobs of one measurement (the fusion section's COFACTOR_FUSION...): the
    # runtime reads them when a device is acquired, after this
    os.environ.update({str(k): str(v) for k, v in spec.get("env", {}).items()})
    try:
        if spec["task"] == "gates":
            from benchmarks import gates

            result = gates.task_gates(spec)
        elif spec["task"] == "contention":
            from benchmarks import contention

            result = contention.task_contention(spec)
        elif spec["task"] == "kernels":
            from benchmarks import kernels

            result = kernels.task_kernels(spec)
        elif spec["task"] == "scale":
            from benchmarks import scale

            result = scale.task_scale(spec)
        else:
            result = TASKS[spec["task"]](spec)
    except NotAvailable as err:
        result = {"error": str(err)}
    except Exception as err:
        result = {"error": _short(err), "traceback": traceback.format_exc()[-2000:]}
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
