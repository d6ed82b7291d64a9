"""Run PennyLane's own `qml.qjit` tests with cofactor standing in for Catalyst.

PennyLane's wheel installs its test suite next to the package (`site-packages/tests`). This
script selects the tests that exercise a compiler (files that mention `qjit`; in them, tests
marked `catalyst` or whose source mentions `qjit`/`catalyst`), runs them with pytest in child
processes (one per file, so a crash costs one file, and the file is resumed after the crashing
test) and writes a summary: pass/fail/skip per file and the failure classes (exception type +
first line of its message).

How the tests reach cofactor (only inside the child pytest processes, through this module used
as a pytest plugin, `-p pennylane_qjit_tests`):

- `qml.qjit(...)` defaults to `compiler="catalyst"`; the plugin wraps `pennylane.qjit` so that
  the default (and an explicit "catalyst") becomes "cofactor".
- `pytest.importorskip("catalyst")`, `import catalyst` and `catalyst.qjit/for_loop/measure/...`
  find a `catalyst` module that is an alias of cofactor's Catalyst-compatible API.
- JAX is not installed in the project's environment: tests that need it skip themselves
  (`importorskip("jax")`) and are counted as "not applicable", as are other skipped tests.

Usage:
    python scripts/pennylane_qjit_tests.py [--out /tmp/pennylane-qjit-summary.txt]
        [--tests-dir DIR] [--timeout SECONDS] [FILE_OR_SUBSTRING ...]

The pass rates in the summary: raw = passed / selected, applicable = passed / (selected -
skipped). Not part of `make test`: PennyLane's tests stay in PennyLane's wheel and are never
copied into this project.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import types

import pytest

_RESULTS_ENV = "COFACTOR_PLQJIT_RESULTS"


# --------------------------------------------------------------------------------------------
# The pytest plugin (runs in the child processes).
# --------------------------------------------------------------------------------------------


def _catalyst_alias() -> types.ModuleType:
    """A `catalyst` module whose public names are cofactor's Catalyst-compatible API."""
    import importlib.machinery

    import cofactor

    alias = types.ModuleType("catalyst")
    alias.__spec__ = importlib.machinery.ModuleSpec("catalyst", None)
    alias.__version__ = "0.15.0"
    for name in cofactor.__all__:
        setattr(alias, name, getattr(cofactor, name))
    alias.__all__ = list(cofactor.__all__)
    alias.jit = types.SimpleNamespace(QJIT=cofactor.QJIT, qjit=cofactor.qjit)
    return alias


def _install_cofactor_as_default() -> None:
    import pennylane
    import pennylane.compiler

    original = pennylane.compiler.qjit

    def qjit(fn=None, *args, compiler="cofactor", **kwargs):
        if compiler == "catalyst":
            compiler = "cofactor"
        return original(fn, *args, compiler=compiler, **kwargs)

    qjit.__doc__ = original.__doc__
    pennylane.qjit = qjit
    pennylane.compiler.qjit = qjit
    sys.modules.setdefault("catalyst", _catalyst_alias())
    if importlib.util.find_spec("flaky") is None:  # a test dependency, not installed here
        sys.modules["flaky"] = _flaky_stand_in()


def _flaky_stand_in() -> types.ModuleType:
    """`@flaky` / `@flaky(max_runs=...)` run the test once."""
    module = types.ModuleType("flaky")

    def flaky(fn=None, **kwargs):
        return fn if callable(fn) else (lambda f: f)

    module.flaky = flaky
    return module


def pytest_configure(config) -> None:
    _install_cofactor_as_default()
    pytest.importorskip = _importorskip_without_jax(pytest.importorskip)


def _mentions_compiler(item) -> bool:
    if item.get_closest_marker("catalyst") is not None:
        return True
    source = _source(item)
    return "qjit" in source or "catalyst" in source


def _source(item) -> str:
    try:
        return inspect.getsource(getattr(item, "function", None))
    except (OSError, TypeError):
        return ""


def pytest_collection_modifyitems(config, items) -> None:
    keep, drop = [], []
    for item in items:
        (keep if _mentions_compiler(item) else drop).append(item)
    for item in keep:
        # Tests are marked `jax` (and call a bare `pytest.importorskip("jax")`) because Catalyst
        # needs JAX; PennyLane's conftest skips them when JAX is missing. A test whose own code
        # does not otherwise use JAX runs here (cofactor needs no JAX); one that does
        # (jax.numpy, `jax = pytest.importorskip("jax")`) skips itself: not applicable.
        no_jax = importlib.util.find_spec("jax") is None
        if not _uses_jax(item) and "capture" not in {m.name for m in item.iter_markers()}:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "jax"]
            item.stash[_JAX_FREE] = True
        elif no_jax:
            item.add_marker(pytest.mark.skip(reason="the test uses JAX (not installed)"))
        if _CAPTURE.search(_code(item)) and no_jax:
            item.add_marker(pytest.mark.skip(reason="PennyLane's program capture needs JAX"))
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


_JAX_FREE = pytest.StashKey[bool]()
_NO_JAX = re.compile(r"(ModuleNotFoundError|ImportError): No module named '(jax|jaxlib)[.']")
_CAPTURE = re.compile(r"capture=True|\.capture\.enable|\.capture\.pause")
_BARE_JAX_SKIP = re.compile(r"^\s*pytest\.importorskip\([\"']jax[\"']\)\s*$")


def _code(item) -> str:
    """The test function's code without decorators, docstring and comments."""
    import ast
    import textwrap

    try:
        fn = ast.parse(textwrap.dedent(_source(item))).body[0]
    except (SyntaxError, IndexError):
        return _source(item)
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return "\n".join(ast.unparse(stmt) for stmt in body)


def _uses_jax(item) -> bool:
    lines = [ln for ln in _code(item).splitlines() if not _BARE_JAX_SKIP.match(ln)]
    return any("jax" in ln or "jnp" in ln for ln in lines)


def _importorskip_without_jax(original):
    def importorskip(modname, *args, **kwargs):
        if modname == "jax" and _CURRENT.get("jax_free"):
            return None  # the test only asked for JAX because Catalyst needs it
        return original(modname, *args, **kwargs)

    return importorskip


_CURRENT: dict = {}


def pytest_runtest_call(item) -> None:
    _CURRENT["jax_free"] = item.stash.get(_JAX_FREE, False)


def _record(entry: dict) -> None:
    path = os.environ.get(_RESULTS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()


def pytest_runtest_logstart(nodeid, location) -> None:
    _record({"event": "start", "nodeid": nodeid})


def pytest_collectreport(report) -> None:
    """A module skipped as a whole (`importorskip` at module level) or failing to import."""
    if report.outcome == "passed" or not report.nodeid.endswith(".py"):
        return
    entry = {"event": "report", "nodeid": f"{report.nodeid}::<module>", "when": "collect"}
    if report.outcome == "skipped":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "?"
        entry.update(outcome="skipped", reason=_skip_reason(str(reason)))
    else:
        entry.update(outcome="failed", reason=f"collection error: {_failure_class(report)}")
    _record(entry)


def _skip_reason(reason: str) -> str:
    """One line per kind of skip (PennyLane's conftest names the test in its message)."""
    reason = re.sub(r"^Skipped: ", "", reason.strip())
    reason = re.sub(r"Test \S+ only runs", "only runs", reason)
    return " ".join(reason.split())[:200]


def _failure_class(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    first = text.strip().splitlines()[0] if text.strip() else "?"
    return first[:200]


def pytest_runtest_logreport(report) -> None:
    if report.when == "call" or report.outcome != "passed":
        entry = {"event": "report", "nodeid": report.nodeid, "when": report.when}
        if report.outcome == "skipped":
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "?"
            entry.update(outcome="xfail" if hasattr(report, "wasxfail") else "skipped")
            entry["reason"] = _skip_reason(str(reason))
        elif report.outcome == "failed" and _NO_JAX.match(_failure_class(report)):
            entry.update(outcome="skipped", reason="the test imports jax (not installed)")
        elif report.outcome == "failed":
            entry.update(outcome="failed", reason=_failure_class(report))
        else:
            entry.update(outcome="xpass" if hasattr(report, "wasxfail") else "passed")
        _record(entry)


@pytest.fixture
def seed(request) -> int:
    """A stand-in for pytest-rng's `seed` fixture (that plugin is not installed here)."""
    return abs(hash(request.node.nodeid)) % (2**31)


# --------------------------------------------------------------------------------------------
# The driver (parent process).
# --------------------------------------------------------------------------------------------


def _default_tests_dir() -> pathlib.Path:
    spec = importlib.util.find_spec("pennylane")
    if spec is None or spec.origin is None:
        raise SystemExit("pennylane is not installed in this interpreter")
    return pathlib.Path(spec.origin).parent.parent / "tests"


def _select_files(tests_dir: pathlib.Path, filters: list[str]) -> list[pathlib.Path]:
    files = []
    for path in sorted(tests_dir.rglob("test_*.py")):
        if "qjit" not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        rel = str(path.relative_to(tests_dir))
        if filters and not any(f in rel for f in filters):
            continue
        files.append(path)
    return files


def _run_file(path, tests_dir, timeout, extra) -> tuple[dict, list[str]]:
    """All outcomes of one file: nodeid -> (outcome, reason). Resumes after a crash."""
    results: dict[str, tuple[str, str]] = {}
    notes: list[str] = []
    deselect: list[str] = []
    env = dict(os.environ)
    here = str(pathlib.Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    for _attempt in range(20):
        log = pathlib.Path(f"/tmp/plqjit-{os.getpid()}-{path.stem}.jsonl")
        log.unlink(missing_ok=True)
        env[_RESULTS_ENV] = str(log)
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "pennylane_qjit_tests",
            "-p",
            "no:cacheprovider",
            "-q",
            "--no-header",
            "-rN",
            "-c",
            str(tests_dir / "pytest.ini"),
            "--rootdir",
            str(tests_dir),
            str(path),
        ]
        cmd += [a for d in deselect for a in ("--deselect", d)] + extra
        try:
            proc = subprocess.run(
                cmd, cwd=tests_dir, env=env, timeout=timeout, capture_output=True, text=True
            )
            code, tail = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
        except subprocess.TimeoutExpired:
            code, tail = "timeout", ""
        started = None
        if log.exists():
            for line in log.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                if entry["event"] == "start":
                    started = entry["nodeid"]
                    continue
                previous = results.get(entry["nodeid"])
                if previous is None or previous[0] in ("passed", "xpass"):
                    results[entry["nodeid"]] = (entry["outcome"], entry.get("reason", ""))
                if entry["nodeid"] == started and entry["when"] == "teardown":
                    started = None
                elif entry["nodeid"] == started and entry["when"] == "call":
                    started = None
            log.unlink()
        if code in (0, 1, 5):  # all passed / some failed / nothing selected
            break
        if started is None or started in deselect:
            if code in (2, 4) and not any(n.endswith("::<module>") for n in results):
                reason = re.findall(r"^E\s+(.*)$", tail, re.M)
                results[f"{path.name}::<collection>"] = (
                    "failed",
                    f"collection error: {reason[-1] if reason else tail[-200:]}",
                )
            else:
                notes.append(f"{path.name}: child exit {code}; {tail[-300:]!r}")
            break
        why = "timeout" if code == "timeout" else f"process died (exit {code})"
        results[started] = ("failed", f"Crash: {why}")
        deselect.extend(n for n in results if n not in deselect)
    return results, notes


def _summary(per_file: dict, notes: list[str], seconds: float) -> str:
    counts = collections.Counter()
    classes: collections.Counter = collections.Counter()
    examples: dict[str, str] = {}
    skips: collections.Counter = collections.Counter()
    lines = []
    for rel, results in per_file.items():
        c = collections.Counter(o for o, _ in results.values())
        counts.update(c)
        lines.append(
            f"{rel:60s} passed {c['passed'] + c['xpass']:4d}  failed {c['failed']:4d}  "
            f"skipped {c['skipped'] + c['xfail']:4d}"
        )
        for nodeid, (outcome, reason) in results.items():
            if outcome == "failed":
                key = re.sub(r"0x[0-9a-f]+", "0x..", reason)
                classes[key] += 1
                examples.setdefault(key, f"{rel}::{nodeid.split('::', 1)[-1]}")
            elif outcome in ("skipped", "xfail"):
                skips[reason[:120]] += 1
    passed = counts["passed"] + counts["xpass"]
    failed = counts["failed"]
    skipped = counts["skipped"] + counts["xfail"]
    total = passed + failed + skipped
    applicable = passed + failed
    head = [
        f"PennyLane qjit tests with cofactor as the compiler ({time.strftime('%Y-%m-%d %H:%M')},"
        f" {seconds:.0f} s)",
        f"selected {total}: passed {passed}, failed {failed}, skipped/not applicable {skipped}",
        f"raw pass rate {100 * passed / max(total, 1):.1f}%  "
        f"applicable pass rate {100 * passed / max(applicable, 1):.1f}%",
        "",
        "Per file:",
    ]
    out = head + lines + ["", "Failure classes (count, exception: first line, example):"]
    for key, n in classes.most_common():
        out.append(f"{n:4d}  {key}\n        e.g. {examples[key]}")
    out += ["", "Skip reasons (not applicable):"]
    out += [f"{n:4d}  {reason}" for reason, n in skips.most_common()]
    if notes:
        out += ["", "Notes:"] + notes
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("filters", nargs="*", help="substrings of test file paths to run")
    parser.add_argument("--tests-dir", type=pathlib.Path, default=None)
    parser.add_argument("--out", default="/tmp/pennylane-qjit-summary.txt")
    parser.add_argument("--json", default=None, help="also write every outcome as JSON here")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per child run")
    parser.add_argument("--pytest-args", default="", help="extra pytest arguments")
    args = parser.parse_args(argv)
    tests_dir = (args.tests_dir or _default_tests_dir()).resolve()
    files = _select_files(tests_dir, args.filters)
    start = time.monotonic()
    per_file, notes = {}, []
    for path in files:
        rel = str(path.relative_to(tests_dir))
        t0 = time.monotonic()
        results, file_notes = _run_file(path, tests_dir, args.timeout, args.pytest_args.split())
        per_file[rel] = results
        notes += file_notes
        c = collections.Counter(o for o, _ in results.values())
        print(f"{rel}: {dict(c)} ({time.monotonic() - t0:.0f} s)", flush=True)
    text = _summary(per_file, notes, time.monotonic() - start)
    pathlib.Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        data = {rel: {n: list(v) for n, v in res.items()} for rel, res in per_file.items()}
        pathlib.Path(args.json).write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(text.split("\n\n")[0])
    print(f"summary: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
