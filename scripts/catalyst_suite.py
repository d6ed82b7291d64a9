"""Run Catalyst's own frontend tests against cofactor and summarise pass/fail per file.

Not part of `make test`: Catalyst's tests are read from a local git mirror, copied to /tmp, and
never enter this repository. Usage (from the repository root):

    .venv/bin/python scripts/catalyst_suite.py                     # the default file list
    .venv/bin/python scripts/catalyst_suite.py test_loops test_switch -k cond
    .venv/bin/python scripts/catalyst_suite.py --baseline /tmp/catsuite-before

What it does:

1. `git archive <ref> frontend/test` of the Catalyst mirror into <out>/src (default ref
   v0.15.0), with each test file's `import jax...`/`import catalyst...` lines rewritten to the
   shim modules `catsuite_jax`/`catsuite_catalyst` (scripts/catalyst_suite_shim.py), so that
   PennyLane itself still sees an install without JAX or Catalyst.
2. Each file runs in its own `python -m pytest` child with the shim as a plugin: `catalyst.X`
   is `cofactor.X`, `qml.qjit` defaults to cofactor, `jax.numpy` is numpy (Catalyst runs JAX in
   64-bit mode, so the numbers are those of numpy); JAX proper (`jax.jit`, `jax.grad`,
   `jax.Array`, ...) and Catalyst internals are placeholders: a test that touches one is
   "not applicable" (n/a), as are the program-capture variants (plxpr needs JAX).
3. <out>/summary.json and <out>/summary.md: per file passed / failed / n/a / skipped, the raw
   rate (passed / all that ran) and the applicable rate (passed / (passed + failed)), and the
   failure classes (exception type + first line, with counts and test ids).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MIRROR = Path("/work/.mirror/PennyLaneAI+catalyst/repo")

DEFAULT_FILES = [
    "test_loops",
    "test_conditionals",
    "test_switch",
    "test_vmap",
    "test_static_arguments",
    "test_adjoint",
    "test_quantum_control",
    "test_measurements_results",
    "test_measurements_shots_results",
    "test_mid_circuit_measurement",
    "test_gradient",
    "test_callback",
    "test_autograph",
    "test_pytree_args",
    "test_keyword_arguments",
    "test_jvpvjp",
    "test_qnode",
    "test_variable_wires",
    "test_global_phase",
    "test_state_prep",
    "test_assertion",
    "test_shotvector",
]

MARK = "[catsuite:n/a]"

# Failures that are about JAX or Catalyst themselves, not about what a program computes.
NOT_APPLICABLE = [
    (r"'numpy\.ndarray' object has no attribute 'at'", "jnp's .at[] on an array outside qjit"),
    (r"assert '(cofactor|numpy)' == '(catalyst|jax)'", "asserts the JAX interface / compiler"),
    (r"\.mlir\b.*(quantum\.|func\.func|catalyst)", "asserts Catalyst's MLIR text"),
    (r"has no attribute 'jaxpr'", "asserts Catalyst's jaxpr"),
    (
        r"has no attribute '(compile_options|compiled_function|_get_batch_size|"
        r"_make_execution_config)'",
        "Catalyst's QJIT/vmap internals",
    ),
    (r"program capture|plxpr|qml\.capture", "program capture (plxpr) needs JAX"),
    (r"qjit target='jaxpr' is not supported", "asserts Catalyst's jaxpr"),
    (r"in 'builtin\.module", "asserts Catalyst's MLIR text"),
    (r"has no attribute 'operation'", "Catalyst's HybridOp (a control-flow callable's .operation)"),
    (r"^\[XPASS\(strict\)\]", "Catalyst marks it xfail(strict); it runs under cofactor"),
    (r"device 'CustomDevice' is not supported", "Catalyst's device plugin API (TOML devices)"),
    (r"fixture 'mocker' not found", "pytest-mock spies on Catalyst internals"),
    (r"cofactor\.accelerate\(.*JAX", "accelerate runs JAX functions on an accelerator"),
    (
        r"DID NOT RAISE NotImplementedError",
        "Catalyst refuses (NotImplementedError) what cofactor runs",
    ),
]

# Tests of Catalyst's own objects (the HybridOp behind a control-flow callable, a vmap's
# private helpers), by test id.
NOT_APPLICABLE_IDS = [
    (r"OperatorAccess|test_operation_access|test_missing_operation", "Catalyst's HybridOp"),
    (r"TestControlled::test_native_controlled_custom", "asserts Catalyst's MLIR text"),
    # Catalyst compiles only for devices with its TOML capabilities (not default.qubit)
    (r"test_qnode.py::test_unsupported_device", "Catalyst refuses default.qubit; cofactor runs it"),
    # Catalyst's ZNE op cannot be differentiated (its compilation fails); cofactor's
    # mitigate_with_zne differentiates the extrapolated value (test_demo_programs3.py)
    (r"TestGradientErrors::test_with_zne", "Catalyst cannot differentiate mitigate_with_zne"),
    (r"test_vmap_with_shapeless_args|test_vmap_axis_out_of_bounds", "Catalyst's vmap internals"),
    # x[i] = v / x[i] *= v on a *caller's* array: JAX arrays are immutable (autograph makes it
    # x = x.at[i].set(v)), numpy's are updated in place, so the tests' expected values differ
    (r"TestJaxIndexOperatorUpdate::test_single", "JAX's immutable arrays (.at[])"),
    # Catalyst's autograph first compiles every `for` loop (also over a static range or a
    # list) and, when tracing the body fails, warns (quoting JAX's tracer error or the source
    # line) and reruns it in Python; the tests expect that warning. cofactor runs such loops
    # in Python from the start (same values, nothing to fall back from).
    (
        r"TestSourceCodeInfo::test_(qjit|qnode|func)|TestFallback::|"
        r"TestMixed::test_force_python_fallbacks|"
        r"TestForLoops::test_for_in_(static|dynamic)_range_indexing_(numeric|object)_list",
        "Catalyst's autograph fallback warning (cofactor runs static loops in Python)",
    ),
    # `traced and True` / `traced or False`: Catalyst's autograph converts a tracer to a bool
    # there and fails (the test pins that limitation); cofactor's gives numpy's logical op,
    # Python's truth value (test_autograph_calls.py checks it)
    (
        r"TestLogicalOps::test_logical_mixture_static_dynamic_default",
        "Catalyst refuses a traced `and`/`or` a Python bool; cofactor computes it",
    ),
    # `m0 + m1` of two mid-circuit measurements: JAX adds bools as a logical or (True), as
    # PennyLane's MeasurementValue arithmetic does not (2, cofactor's); the test compares it
    # with the sum of the returned bools, so it fails when both measure 1 (random)
    (
        r"TestPyTreesReturnValues::test_return_value_tuples",
        "JAX's bool + bool of measurement results (PennyLane's m0 + m1 counts)",
    ),
]

_IMPORT_RULES = [
    (r"^(\s*)import (jax|catalyst)(\.[\w.]+)? as (\w+)", r"\1import catsuite_\2\3 as \4"),
    (r"^(\s*)from (jax|catalyst)(\.[\w.]+)? import", r"\1from catsuite_\2\3 import"),
    (r"^(\s*)import (jax|catalyst)\s*$", r"\1import catsuite_\2 as \2"),
    (
        r"^(\s*)import (jax|catalyst)(\.[\w.]+)\s*$",
        r"\1import catsuite_\2 as \2; import catsuite_\2\3",
    ),
]


def rewrite_imports(text: str) -> str:
    """Point a test file's jax/catalyst imports at the shim modules (line by line)."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        for pattern, repl in _IMPORT_RULES:
            new = re.sub(pattern, repl, body)
            if new != body:
                line = new + line[len(body) :]
                break
        # monkeypatch.setattr("catalyst.flag", ...) / mocker.patch("catalyst.x.y", ...)
        line = re.sub(r"""(["'])catalyst\.""", r"\1catsuite_catalyst.", line)
        out.append(line)
    return "".join(out)


def extract(ref: str, dest: Path) -> Path:
    """Catalyst's frontend/test at `ref` under dest/src; returns the pytest folder."""
    src = dest / "src"
    tests = src / "frontend" / "test" / "pytest"
    stamp = src / ".ref"
    if stamp.exists() and stamp.read_text() == ref:
        return tests
    subprocess.run(["rm", "-rf", str(src)], check=True)
    src.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(MIRROR), "archive", ref, "frontend/test"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    for path in (src / "frontend" / "test").rglob("*.py"):
        text = path.read_text()
        new = rewrite_imports(text)
        if new != text:
            path.write_text(new)
    stamp.write_text(ref)
    return tests


def run_file(tests: Path, name: str, out: Path, args) -> list[dict]:
    """One Catalyst test file in a child pytest; returns its records."""
    result = out / "results" / f"{name}.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    env = dict(os.environ)
    frontend = args.frontend or str(REPO / "frontend")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), frontend, env.get("PYTHONPATH", "")])
    env["CATSUITE_OUT"] = str(result)
    env["CATSUITE_TEST_TIMEOUT"] = str(args.test_timeout)
    env.setdefault("COFACTOR_CACHE_DIR", str(out / "cache"))
    cmd = [sys.executable, "-m", "pytest", f"{name}.py", "-p", "catalyst_suite_shim"]
    cmd += ["-p", "no:cacheprovider", "-q", "--no-header", "-rN", "--tb=short"]
    if args.k:
        cmd += ["-k", args.k]
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with open(log, "w") as f:
        try:
            subprocess.run(
                cmd,
                cwd=tests,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
                timeout=args.file_timeout,
            )
        except subprocess.TimeoutExpired:
            f.write(f"\n[catsuite] file ran past {args.file_timeout} s\n")
    records = json.loads(result.read_text()) if result.exists() else []
    if not records:
        tail = log.read_text()[-1500:]
        records = [{"id": f"{name}.py", "outcome": "error", "msg": f"no results: {tail}"}]
    print(f"{name}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return records


def classify(record: dict) -> str:
    """passed / failed / n/a / skipped (xfailed counts as skipped, xpassed as passed)."""
    outcome = record["outcome"]
    if outcome in ("passed", "xpassed"):
        return "passed"
    if outcome in ("skipped", "xfailed"):
        return "skipped"
    msg = record.get("msg", "")
    if MARK in msg or outcome == "n/a":
        return "n/a"
    if any(re.search(p, msg) for p, _ in NOT_APPLICABLE):
        return "n/a"
    if any(re.search(p, record["id"]) for p, _ in NOT_APPLICABLE_IDS):
        return "n/a"
    return "failed"


def failure_class(msg: str) -> str:
    """Exception type + first line, with addresses and long numbers blurred."""
    line = msg.strip().splitlines()[0] if msg.strip() else "(no message)"
    line = re.sub(r"0x[0-9a-f]+", "0x…", line)
    line = re.sub(r"\d+\.\d{3,}(e[-+]?\d+)?", "<num>", line)
    return line[:160]


def na_reason(record: dict) -> str:
    msg = record.get("msg", "")
    if MARK in msg:
        return msg[msg.index(MARK) + len(MARK) :].strip().splitlines()[0][:100]
    for p, why in NOT_APPLICABLE:
        if re.search(p, msg):
            return why
    for p, why in NOT_APPLICABLE_IDS:
        if re.search(p, record["id"]):
            return why
    return "?"


def summarise(all_records: dict[str, list[dict]]) -> dict:
    files = {}
    classes: dict[str, list[str]] = collections.defaultdict(list)
    na: collections.Counter = collections.Counter()
    for name, records in all_records.items():
        c = collections.Counter(classify(r) for r in records)
        ran = c["passed"] + c["failed"] + c["n/a"]
        app = c["passed"] + c["failed"]
        files[name] = {
            "passed": c["passed"],
            "failed": c["failed"],
            "n/a": c["n/a"],
            "skipped": c["skipped"],
            "raw_rate": round(c["passed"] / ran, 3) if ran else None,
            "applicable_rate": round(c["passed"] / app, 3) if app else None,
        }
        for r in records:
            kind = classify(r)
            if kind == "failed":
                classes[failure_class(r["msg"])].append(r["id"])
            elif kind == "n/a":
                na[na_reason(r)] += 1
    tot = collections.Counter()
    for v in files.values():
        tot.update({k: v[k] for k in ("passed", "failed", "n/a", "skipped")})
    ran, app = tot["passed"] + tot["failed"] + tot["n/a"], tot["passed"] + tot["failed"]
    total = dict(tot)
    total["raw_rate"] = round(tot["passed"] / ran, 3) if ran else None
    total["applicable_rate"] = round(tot["passed"] / app, 3) if app else None
    ordered = sorted(classes.items(), key=lambda kv: -len(kv[1]))
    return {
        "files": files,
        "total": total,
        "failure_classes": [{"class": k, "count": len(v), "tests": v} for k, v in ordered],
        "not_applicable": dict(na.most_common()),
    }


def _pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown(summary: dict, baseline: dict | None) -> str:
    head = "| file | passed | failed | n/a | skipped | raw | applicable |"
    if baseline:
        head += " applicable before |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    rows = list(summary["files"].items()) + [("**total**", summary["total"])]
    for name, v in rows:
        row = (
            f"| {name} | {v['passed']} | {v['failed']} | {v['n/a']} | {v['skipped']} "
            f"| {_pct(v['raw_rate'])} | {_pct(v['applicable_rate'])} |"
        )
        if baseline:
            b = baseline["total"] if name == "**total**" else baseline["files"].get(name)
            row += f" {_pct(b['applicable_rate']) if b else '-'} |"
        lines.append(row)
    lines += ["", "## Failure classes", ""]
    for fc in summary["failure_classes"]:
        lines.append(f"- {fc['count']} × `{fc['class']}` (e.g. {fc['tests'][0]})")
    lines += ["", "## Not applicable", ""]
    lines += [f"- {n} × {why}" for why, n in summary["not_applicable"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="test file names (default: the frontend list)")
    ap.add_argument("--ref", default="v0.15.0", help="Catalyst git ref (default v0.15.0)")
    ap.add_argument("--out", default="/tmp/catsuite", help="results folder")
    ap.add_argument("-k", default=None, help="pytest -k expression")
    ap.add_argument("--test-timeout", type=int, default=120)
    ap.add_argument("--file-timeout", type=int, default=3600)
    ap.add_argument("--baseline", default=None, help="an earlier --out folder to compare")
    ap.add_argument(
        "--frontend", default=None, help="the cofactor package folder to test (default ours)"
    )
    ap.add_argument("--resummarise", action="store_true", help="only rebuild the summary")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [f.removesuffix(".py") for f in (args.files or DEFAULT_FILES)]
    tests = extract(args.ref, out)
    records = {}
    for name in names:
        if args.resummarise:
            p = out / "results" / f"{name}.json"
            records[name] = json.loads(p.read_text()) if p.exists() else []
        else:
            records[name] = run_file(tests, name, out, args)
    summary = summarise(records)
    baseline = None
    if args.baseline:
        p = Path(args.baseline) / "summary.json"
        baseline = json.loads(p.read_text()) if p.exists() else None
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    md = markdown(summary, baseline)
    (out / "summary.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
