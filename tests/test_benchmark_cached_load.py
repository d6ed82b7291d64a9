"""Section 1's cached-load goal (issue 13): the first call of program (a) in a new process,
its library in the disk cache. The worker task runs for real in new processes; the report
is checked on a made-up result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import report

REPO = Path(__file__).resolve().parents[1]


def _worker(spec: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'frontend'}"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.worker", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT "))
    return json.loads(line.removeprefix("@@RESULT "))


def test_cached_load_task_measures_a_load_from_the_cache(tmp_path):
    cache_env = {"COFACTOR_DISABLE_CACHE": "0", "COFACTOR_CACHE_DIR": str(tmp_path)}
    spec = {"system": "cofactor", "task": "cached_load", "program": "a", "env": cache_env}
    first = _worker(spec)  # compiles and fills the cache
    assert "error" not in first, first
    assert first["from_cache"] is False
    again = _worker(spec)
    assert again["from_cache"] is True
    assert 0 < again["first_call_cpu_s"] < first["first_call_cpu_s"]
    assert again["value"] == first["value"]


def _res(cpu_ms: float) -> dict:
    stats = report.stats([cpu_ms / 1e3, cpu_ms / 1e3 + 0.001])
    cached = {"cpu": stats, "wall": stats, "loadavg": 1.5}
    return {"compile": {"a": {"cofactor": {"cached_load": cached}}}}


def test_cached_load_goal_line_and_table_rows():
    goal = next(g for g in report.goals(_res(4.0)) if "cached, new process" in g["goal"])
    assert goal["met"] is True and goal["target"] == 5.0 and goal["unit"] == " ms"
    assert "PennyLane" in goal["note"] and "load average 1.5" in goal["note"]
    assert "(target <= 5.0 ms)" in report.render_goals([goal])
    missed = next(g for g in report.goals(_res(9.0)) if "cached, new process" in g["goal"])
    assert missed["met"] is False and missed["ratio"] > 9.0
    table = report.build_tables(_res(4.0))[0].render()
    assert "(a) cached, new process, CPU" in table


def test_cached_load_error_is_reported_not_hidden():
    res = {"compile": {"a": {"cofactor": {"cached_load": {"error": "boom"}}}}}
    goal = next(g for g in report.goals(res) if "cached, new process" in g["goal"])
    assert goal["met"] is None and "boom" in goal["measured"]
