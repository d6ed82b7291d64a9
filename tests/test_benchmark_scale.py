"""The scale section of benchmarks/ (issue 13): the growth exponent, when a family stops
growing, the table, and the driver's per-stage timings it reads."""

from __future__ import annotations

import math

import pytest

from benchmarks import report, scale
from cofactor import compiler, native_compiler


def test_fit_exponent_recovers_a_power_law():
    points = {n: 0.01 * n**1.5 for n in (5, 10, 20, 40)}
    assert scale.fit_exponent(points) == pytest.approx(1.5)
    assert scale.fit_exponent({5: 1.0}) is None
    # noisy: the least-squares slope, not the last ratio
    noisy = {1: 1.0, 2: 2.2, 4: 3.9, 8: 8.3}
    assert 0.9 < scale.fit_exponent(noisy) < 1.1


def test_family_stops_growing_after_the_cap_or_a_failure():
    calls = []

    def run(system, spec):
        calls.append((system, spec["family"], spec["n"]))
        if system == "catalyst" and spec["n"] == 10:
            return {"error": "timed out after 300 s"}
        return {"compile_s": spec["n"] * 1.0, "value": 1.0}

    cfg = {"scale_cap_s": 15.0, "scale_sizes": {"sel": [5, 10, 20, 40]}}
    out = scale.run_section(run, ["cofactor", "catalyst"], cfg)
    cf, cat = out["sel"]["cofactor"], out["sel"]["catalyst"]
    # 20 exceeds the cap: measured, then 40 skipped
    assert ("cofactor", "sel", 20) in calls and ("cofactor", "sel", 40) not in calls
    assert "20 s > cap 15 s" in cf["sizes"]["40"]["error"]
    assert cf["exponent"] == pytest.approx(1.0)
    assert "size 10 failed" in cat["sizes"]["20"]["error"]
    assert cat["exponent"] is None


def test_fast_sizes_take_the_median_of_new_processes_for_every_system():
    samples = {"cofactor": iter([0.05, 0.03, 0.04]), "catalyst": iter([0.2, 0.3, 0.25])}
    calls = []

    def run(system, spec):
        calls.append((system, spec["n"]))
        if spec["n"] == 40:  # slow: one process
            return {"compile_s": 2.0, "value": 1.0}
        t = next(samples[system])
        return {"compile_s": t, "value": 1.0, "stages_s": {"trace": t / 10}}

    cfg = {"scale_cap_s": 60.0, "scale_sizes": {"tanh": [32, 40]}}
    out = scale.run_section(run, ["cofactor", "catalyst"], cfg)
    assert calls.count(("cofactor", 32)) == calls.count(("catalyst", 32)) == scale.REPEATS
    assert calls.count(("cofactor", 40)) == calls.count(("catalyst", 40)) == 1
    cf = out["tanh"]["cofactor"]["sizes"]["32"]
    # the median process, its own stages with it, and every sample
    assert cf["compile_s"] == 0.04 and cf["stages_s"]["trace"] == pytest.approx(0.004)
    assert cf["compile_samples_s"] == [0.03, 0.04, 0.05]
    assert out["tanh"]["catalyst"]["sizes"]["32"]["compile_s"] == 0.25
    text = scale.table(out, report.Table, report.stats).render()
    assert "median" in text and "3 new processes" in text


def test_a_failing_repeat_is_the_result():
    results = iter([{"compile_s": 0.03, "value": 1.0}, {"error": "crashed"}])

    def run(system, spec):
        return next(results)

    out = scale.run_section(run, ["cofactor"], {"scale_cap_s": 60.0, "scale_sizes": {"tanh": [32]}})
    assert out["tanh"]["cofactor"]["sizes"]["32"] == {"error": "crashed"}


def _result() -> dict:
    sizes = {
        "cofactor": {
            "sizes": {
                "5": {"compile_s": 0.5, "value": 1.0, "stages_s": {"trace": 0.1, "llc": 0.2}},
                "10": {"compile_s": 1.0, "value": 2.0, "peak_rss_mb": 301.4},
            },
            "exponent": 1.0,
        },
        "catalyst": {
            "sizes": {
                "5": {"compile_s": 2.0, "value": 1.0, "peak_rss_mb": 512.0},
                "10": {"error": "boom"},
            },
            "exponent": None,
        },
    }
    return {"cap_s": 60.0, "sel": sizes}


def test_table_goals_and_agreement():
    res = {"scale": _result()}
    text = scale.table(res["scale"], report.Table, report.stats).render()
    assert "sel: 5 layers" in text and "0.25x" in text  # 0.5 s vs 2 s
    assert "growth exponent cofactor 1.00, catalyst n/a" in text
    # milliseconds, to 0.1 ms (seconds to 0.01 hid a 10 ms difference between sizes)
    assert "sel: 5 layers, ms by stage: trace 100.0, llc 200.0" in text
    assert "n/a (boom)" in text
    # each system's peak memory at the largest size it compiled
    assert "cofactor 301 MB (10), catalyst 512 MB (5)" in text
    goals = report.goals(res)
    by_goal = {g["goal"]: g for g in goals}
    largest = by_goal["scale sel: 5 layers (largest size both compiled): <= 0.1x Catalyst"]
    assert largest["ratio"] == pytest.approx(0.25) and largest["met"] is False
    assert by_goal["scale sel: growth exponent of cofactor's compile time <= 1.2"]["met"]
    assert report.agreement(res) == []
    res["scale"]["sel"]["catalyst"]["sizes"]["5"]["value"] = 1.5
    assert report.agreement(res) == ["scale sel: 5 layers: cofactor 1 vs Catalyst 1.5"]


@pytest.mark.parametrize(
    "pipeline, stages",
    [
        ("subprocess", {"cofactor-opt", "mlir-translate", "opt", "llc", "link"}),
        (
            "inprocess",
            {
                "lower",
                "stage_texts",
                "opt",
                "codegen",
                "link",
                "opt.plugin",
                "opt.enzyme",
                "opt.o2",
            },
        ),
    ],
)
def test_compiled_library_records_stage_seconds(tmp_path, monkeypatch, pipeline, stages):
    if pipeline == "inprocess" and native_compiler.unavailable_reason() is not None:
        pytest.skip("libcofactor-compiler.so not built")
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("COFACTOR_PIPELINE", pipeline)
    text = """
func.func @scaled(%x: f64) -> f64 attributes {llvm.emit_c_interface} {
  %c = arith.constant 3.0 : f64
  %y = arith.mulf %x, %c : f64
  return %y : f64
}
"""
    lib = compiler.compile_module(text, name="scaled", cache=False)
    assert set(lib.stage_s) == stages
    assert all(s >= 0 and math.isfinite(s) for s in lib.stage_s.values())
    assert lib.stage_s["opt"] > 0 and lib.stage_s["link"] > 0


def test_stage_note_gives_milliseconds_and_the_runs():
    result = {
        "stages_s": {"trace": 0.0031, "driver": 0.0204, "run_excess": 0.0005, "other": 0.0012},
        "runs": {
            "first": {"wall_s": 0.0026, "cpu_s": 0.0025, "faults": 1539},
            "later": {"wall_s": 0.0021, "cpu_s": 0.0021, "faults": 1492},
        },
    }
    assert scale.stage_note(result) == (
        "ms by stage: trace 3.1, driver 20.4, run_excess 0.5, other 1.2; runs: first 2.6 ms "
        "(CPU 2.5, 1539 faults), later 2.1 ms (CPU 2.1, 1492 faults)"
    )
    assert scale.stage_note({"compile_s": 1.0}) == ""


def test_recorder_splits_a_real_first_call(monkeypatch):
    """The worker's recorder on a real compile: the library's load and the first and later
    runs are recorded, and the stages add up to the compile time."""
    if native_compiler.unavailable_reason() is not None:
        pytest.skip("libcofactor-compiler.so not built")
    import numpy as np

    import cofactor
    from cofactor import launcher

    monkeypatch.setenv("COFACTOR_DISABLE_CACHE", "1")
    original_call = launcher.Launcher.__dict__["__call__"]

    @cofactor.qjit
    def double(x):
        return x * 2.0

    x = np.arange(4.0)
    recorder = scale.CofactorStages()
    with recorder:
        first = double(x)
        later = double(x)
    # unwrapped again afterwards
    assert launcher.Launcher.__dict__["__call__"] is original_call
    np.testing.assert_array_equal(first, x * 2.0)
    np.testing.assert_array_equal(later, x * 2.0)
    assert len(recorder.runs) == 2
    out = recorder.summary(compile_s=0.05)
    st = out["stages_s"]
    assert {"trace", "driver", "load", "run_excess", "other"} <= set(st)
    assert st["load"] > 0 and st["trace"] > 0 and st["driver"] > 0
    covered = st["trace"] + st["driver"] + st["load"] + st["run_excess"] + st["other"]
    assert covered == pytest.approx(0.05)
    assert set(out["runs"]) == {"first", "later"}
    assert all(r["faults"] >= 0 and r["cpu_s"] >= 0 for r in out["runs"].values())
