"""cofactor against Catalyst, PennyLane-Lightning and jax.jit, in one run.

    python -m benchmarks [--quick] [--only SECTION[,SECTION...]] [--threads N]

Sections: compile, percall, sel, loop, gates, kernels, contention, scale, fusion (see
benchmarks/README.md). Prints a table, writes benchmarks/results/latest.json and
benchmarks/results/latest.png. Run it with the cofactor venv's interpreter; the peers run in
<repo>/.venv-peers, created on demand.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import contention, env, kernels, report, scale
from benchmarks.programs import SEL_LAYERS, SYSTEM_LABELS, SYSTEM_VENV, SYSTEMS

SECTIONS = (
    "compile",
    "percall",
    "sel",
    "loop",
    "gates",
    "kernels",
    "contention",
    "scale",
    "fusion",
)
RESULTS = Path(__file__).resolve().parent / "results"

# Sizes and repetitions. Every measurement process also has a timeout; a timeout is
# reported as n/a, like a program a system cannot compile.
CONFIG = {
    "quick": {
        "cold_processes": 2,
        "warm": 2,
        "percall_batches": 7,
        "sel_n": [4, 8, 12],
        "sel_batches": 5,
        "sel_max_total_s": 3.0,
        "loop_n": [4, 12],
        "loop_batches": 3,
        "gate_n": [22],
        "gate_rounds": 3,
        "kernel_n": [22],
        "kernel_rounds": 7,
        "adjoint_n": 20,
        "contention_n": [12, 16, 20],
        "contention_rounds": 240,
        "contention_min_rounds": 25,
        "contention_batch_s": 0.025,
        "contention_max_total_s": 6.0,
        "scale_sizes": scale.SIZES["quick"],
        "scale_cap_s": 60.0,
        "fusion_sel_n": 16,
        "fusion_sel_extra_n": [],
        "fusion_qubits": [2, 3, 4],
        "timeout_s": 300,
    },
    "full": {
        "cold_processes": 5,
        "warm": 5,
        "percall_batches": 21,
        "sel_n": [4, 8, 12, 16, 20],
        "sel_batches": 7,
        "sel_max_total_s": 20.0,
        "loop_n": [4, 12, 16],
        "loop_batches": 3,
        "gate_n": [20, 22, 24],
        "gate_rounds": 5,
        "kernel_n": [22, 24],
        "kernel_rounds": 11,
        "adjoint_n": 20,
        "contention_n": [10, 12, 14, 16, 18, 20, 22, 24],
        "contention_rounds": 240,
        "contention_min_rounds": 25,
        "contention_batch_s": 0.025,
        "contention_max_total_s": 12.0,
        "scale_sizes": scale.SIZES["full"],
        "scale_cap_s": 600.0,
        # issue 14's size; n = 16 (the quick run's size) is checked against the goal as well
        "fusion_sel_n": 20,
        "fusion_sel_extra_n": [16],
        "fusion_qubits": [2, 3, 4, 5],
        "timeout_s": 1500,
    },
}

#: default.qubit's backprop keeps every intermediate state: ~700 states of 2^n complex128
#: at n = 20 is ~12 GB, beyond a small shared machine. Larger n are skipped, with this reason.
JAX_GRADIENT_MAX_N = 16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats (minutes)")
    p.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    p.add_argument(
        "--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + str(SYSTEMS)
    )
    p.add_argument(
        "--contention-systems",
        default=None,
        help="systems of the contention section only (default: --systems); its goals compare "
        "cofactor with itself, so 'cofactor' alone halves the section's time",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="OMP/XLA threads per measured process (0: leave the defaults); default 1, so "
        "that a loaded 2-core machine gives comparable figures",
    )
    p.add_argument(
        "--scale-sizes",
        default="",
        help="sizes of the scale section's families, e.g. 'sel=5,10,20;tanh=32,64' (a family "
        "left out keeps the mode's sizes; 'sel=' drops it)",
    )
    p.add_argument(
        "--scale-cap",
        type=float,
        default=None,
        help="seconds: a scale family stops growing once one size compiles slower (quick: "
        "60, full: 600)",
    )
    p.add_argument(
        "--kernel-n",
        default="",
        help="sizes of the kernels section, e.g. '24' (default: the mode's, quick 22, full 22,24)",
    )
    p.add_argument(
        "--kernel-gates",
        default="",
        help="kernels section: only the rows whose label contains one of these comma-separated "
        "words (case-insensitive), e.g. 'CZ,ECR,PhaseShift'",
    )
    p.add_argument(
        "--contention-n",
        default="",
        help="sizes of the contention section's SEL program, e.g. '14,16' (default: the mode's)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for latest.json/.png")
    p.add_argument(
        "--update-readme",
        action="store_true",
        help="also put the table into benchmarks/README.md (between its results markers)",
    )
    args = p.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in args.only:
        if s not in SECTIONS:
            p.error(f"unknown section {s!r}; choose from {', '.join(SECTIONS)}")
    args.scale_sizes = _parse_scale_sizes(p, args.scale_sizes)
    args.kernel_n = _parse_sizes(p, "--kernel-n", args.kernel_n)
    args.contention_n = _parse_sizes(p, "--contention-n", args.contention_n)
    args.kernel_gates = [g.strip() for g in args.kernel_gates.split(",") if g.strip()]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    contention_systems = args.contention_systems
    args.contention_systems = (
        args.systems
        if contention_systems is None
        else [s.strip() for s in contention_systems.split(",") if s.strip()]
    )
    for s in [*args.systems, *args.contention_systems]:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    return args


def _parse_sizes(p: argparse.ArgumentParser, option: str, text: str) -> list[int]:
    """'22,24' -> [22, 24] (empty: the mode's sizes)."""
    try:
        return sorted(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        p.error(f"{option} {text!r}: sizes must be comma-separated integers")


def _parse_scale_sizes(p: argparse.ArgumentParser, text: str) -> dict[str, list[int]]:
    sizes: dict[str, list[int]] = {}
    for part in filter(None, (x.strip() for x in text.split(";"))):
        family, _, values = part.partition("=")
        if family.strip() not in scale.FAMILIES:
            p.error(f"unknown scale family {family!r}; choose from {', '.join(scale.FAMILIES)}")
        try:
            sizes[family.strip()] = sorted(int(v) for v in values.split(",") if v.strip())
        except ValueError:
            p.error(f"--scale-sizes {part!r}: sizes must be integers")
    return sizes


class Runner:
    def __init__(self, args: argparse.Namespace, cfg: dict, pythons: dict[str, str]):
        self.args = args
        self.cfg = cfg
        self.pythons = pythons

    def run(self, system: str, spec: dict, threads: int | None = None) -> dict:
        """One worker; `threads` overrides --threads (0: the libraries' defaults)."""
        python = self.pythons.get(SYSTEM_VENV[system])
        if python is None:
            return {"error": "peers venv unavailable"}
        spec = {"system": system, **spec}
        t = time.perf_counter()
        threads = self.args.threads if threads is None else threads
        out = env.run_worker(python, spec, self.cfg["timeout_s"], threads)
        what = ", ".join(
            f"{k}={v}" for k, v in spec.items() if k in ("task", "program", "family", "n")
        )
        errors = [out["error"]] if "error" in out else []
        errors += [
            f"{k}: {v['error']}" for k, v in out.items() if isinstance(v, dict) and "error" in v
        ]
        status = "n/a: " + "; ".join(errors) if errors else "ok"
        env.log(f"{system:<9} {what:<28} {time.perf_counter() - t:6.1f} s  {status[:100]}")
        return out

    def systems(self, wanted: tuple[str, ...]) -> list[str]:
        return [s for s in wanted if s in self.args.systems]

    # -- sections ------------------------------------------------------------------------
    def compile(self) -> dict:
        out: dict = {}
        for prog in ("a", "b", "c"):
            out[prog] = {}
            for system in self.systems(("cofactor", "catalyst", "jax")):
                runs = []
                for _ in range(self.cfg["cold_processes"]):
                    spec = {"task": "compile", "program": prog, "warm": self.cfg["warm"]}
                    runs.append(self.run(system, spec))
                    if "error" in runs[-1]:
                        break  # the same error again in each new process: not worth the time
                ok = [r for r in runs if "error" not in r]
                if not ok:
                    imports = [r["import_s"] for r in runs if "import_s" in r]
                    out[prog][system] = {"error": runs[0]["error"]}
                    if imports:
                        out[prog][system]["import"] = report.stats(imports)
                    continue
                out[prog][system] = {
                    "cold": report.stats([r["cold_compile_s"] for r in ok]),
                    "warm": report.stats([w for r in ok for w in r["warm_compile_s"]]),
                    "import": report.stats([r["import_s"] for r in ok]),
                    "call": report.stats([r["call_s"] for r in ok]),
                    "value": ok[0].get("value"),
                }
                stages = [r["stages_s"] for r in ok if r.get("stages_s")]
                if stages:
                    out[prog][system]["stages_s"] = {
                        k: report.stats([st[k] for st in stages if k in st])["median"]
                        for k in stages[0]
                    }
                if len(ok) < len(runs):
                    out[prog][system]["failed_processes"] = len(runs) - len(ok)
        if "cofactor" in self.args.systems and isinstance(out["a"].get("cofactor"), dict):
            out["a"]["cofactor"]["cached_load"] = self.cached_load("a")
        return out

    def cached_load(self, program: str) -> dict:
        """The first call of `program` in new processes, its library in a fresh disk cache
        (filled by one process first, not counted): issue 13's goal of <= 5 ms."""
        with tempfile.TemporaryDirectory(prefix="cofactor-bench-cache-") as folder:
            cache_env = {"COFACTOR_DISABLE_CACHE": "0", "COFACTOR_CACHE_DIR": folder}
            spec = {"task": "cached_load", "program": program, "env": cache_env}
            self.run("cofactor", spec)  # fills the cache
            runs = [self.run("cofactor", spec) for _ in range(max(self.cfg["cold_processes"], 3))]
        ok = [r for r in runs if "error" not in r and r.get("from_cache")]
        if not ok:
            why = next((r["error"] for r in runs if "error" in r), "not loaded from the cache")
            return {"error": why}
        return {
            "wall": report.stats([r["first_call_s"] for r in ok]),
            "cpu": report.stats([r["first_call_cpu_s"] for r in ok]),
            "loadavg": os.getloadavg()[0],
        }

    def _timing(self, batches: int, max_total_s: float, min_batch_s: float = 0.02) -> dict:
        return {"batches": batches, "max_total_s": max_total_s, "min_batch_s": min_batch_s}

    def percall(self) -> dict:
        out: dict = {"rx": {}, "nocircuit": {}}
        for system in self.systems(SYSTEMS):
            r = self.run(
                system, {"task": "percall", **self._timing(self.cfg["percall_batches"], 10.0)}
            )
            for key in out:
                out[key][system] = _summ(r.get(key, r))
        return out

    def sel(self) -> dict:
        out: dict = {"forward": {}, "gradient": {}}
        timing = self._timing(self.cfg["sel_batches"], self.cfg["sel_max_total_s"])
        for system in self.systems(SYSTEMS):
            out["forward"][system], out["gradient"][system] = {}, {}
            timed_out: dict[str, int] = {}
            for n in self.cfg["sel_n"]:
                parts = []
                for part in ("forward", "gradient"):
                    if part in timed_out:
                        out[part][system][str(n)] = {
                            "error": f"skipped: n={timed_out[part]} timed out"
                        }
                    else:
                        parts.append(part)
                if system == "jax" and n > JAX_GRADIENT_MAX_N and "gradient" in parts:
                    parts.remove("gradient")
                    out["gradient"][system][str(n)] = {
                        "error": f"skipped above n={JAX_GRADIENT_MAX_N}: backprop memory"
                    }
                if not parts:
                    continue
                r = self.run(system, {"task": "sel", "n": n, "parts": parts, **timing})
                for part in parts:
                    out[part][system][str(n)] = _summ(r.get(part, r))
                    if "timed out" in out[part][system][str(n)].get("error", ""):
                        timed_out[part] = n
        return out

    def loop(self) -> dict:
        out: dict = {}
        timing = self._timing(self.cfg["loop_batches"], 1.0)
        for system in self.systems(SYSTEMS):
            out[system] = {}
            timed_out = None
            for n in self.cfg["loop_n"]:
                if timed_out is not None:
                    out[system][str(n)] = {"error": f"skipped: n={timed_out} timed out"}
                    continue
                r = self.run(system, {"task": "loop", "n": n, **timing})
                out[system][str(n)] = _summ(r.get("loop", r))
                if "timed out" in out[system][str(n)].get("error", ""):
                    timed_out = n
        return out

    def scale(self) -> dict:
        return scale.run_section(self.run, self.systems(scale.SYSTEMS), self.cfg)

    def gates(self) -> dict:
        if "cofactor" not in self.args.systems:
            return {"error": "cofactor not selected"}
        r = self.run(
            "cofactor",
            {
                "task": "gates",
                "sizes": self.cfg["gate_n"],
                "rounds": self.cfg["gate_rounds"],
                "adjoint_n": self.cfg["adjoint_n"],
            },
        )
        if "error" in r:
            return {"error": r["error"]}
        sizes = {}
        for n, per_n in r["sizes"].items():
            gates = {}
            for name, e in per_n["gates"].items():
                if "error" in e:
                    gates[name] = e
                    continue
                gates[name] = {
                    "cofactor": report.stats(e["cofactor_s"]),
                    "lightning": report.stats(e["lightning_s"]),
                    "bound_s": e["bound_s"],
                }
            sizes[n] = {
                "bandwidth_Bps": per_n["bandwidth_Bps"],
                "probes_Bps": per_n.get("probes_Bps"),
                "gates": gates,
            }
        return {"sizes": sizes, "adjoint": r.get("adjoint")}

    def kernels(self) -> dict:
        return kernels.run_section(self)

    def contention(self) -> dict:
        return contention.run_section(self)

    def fusion(self) -> dict:
        """Gate fusion's effect (runtime/src/GateFusion.hpp): SEL forward (and gradient) at
        one n and the long 16-wire circuit, cofactor with fusion off and at each width k,
        against Catalyst; the variants differ only in COFACTOR_FUSION* of the worker."""
        timing = self._timing(self.cfg["sel_batches"], self.cfg["sel_max_total_s"])
        n = self.cfg["fusion_sel_n"]
        variants = {"off": {"COFACTOR_FUSION": "0"}}
        for k in self.cfg["fusion_qubits"]:
            variants[f"k={k}"] = {"COFACTOR_FUSION": "1", "COFACTOR_FUSION_QUBITS": str(k)}
        variants["default"] = {"COFACTOR_FUSION": "1"}
        out: dict = {"sel_n": n, "sel": {}, "sel_gradient": {}, "long": {}}
        runs = [("cofactor", name, knobs) for name, knobs in variants.items()]
        runs += [(s, s, {}) for s in self.systems(("catalyst",))]
        for system, name, knobs in runs:
            if system != "cofactor" or "cofactor" in self.args.systems:
                with_grad = name in ("off", "default", "catalyst")
                parts = ["forward", "gradient"] if with_grad else ["forward"]
                r = self.run(
                    system, {"task": "sel", "n": n, "parts": parts, "env": knobs, **timing}
                )
                out["sel"][name] = _summ(r.get("forward", r))
                if "gradient" in parts:
                    out["sel_gradient"][name] = _summ(r.get("gradient", r))
                r = self.run(system, {"task": "long", "env": knobs, **timing})
                out["long"][name] = _summ(r.get("forward", r))
        # the SEL forward goal at the other sizes checked: default fusion against Catalyst
        out["sel_extra"] = {}
        for extra_n in self.cfg.get("fusion_sel_extra_n", []):
            per: dict = {}
            for system, name, knobs in runs:
                if name not in ("default", "catalyst"):
                    continue
                if system != "cofactor" or "cofactor" in self.args.systems:
                    spec = {"task": "sel", "n": extra_n, "parts": ["forward"], "env": knobs}
                    r = self.run(system, {**spec, **timing})
                    per[name] = _summ(r.get("forward", r))
            out["sel_extra"][str(extra_n)] = per
        return out


def _summ(r: dict) -> dict:
    """A worker's {compile_s, call_s: [...]} as stats, or its error."""
    if not isinstance(r, dict) or "error" in r:
        return {"error": r.get("error", "no result") if isinstance(r, dict) else "no result"}
    s = report.stats(r["call_s"])
    s["compile_s"] = r.get("compile_s")
    s["value"] = r.get("value")
    return s


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mode = "quick" if args.quick else "full"
    cfg = dict(CONFIG[mode])
    sizes = {**cfg["scale_sizes"], **args.scale_sizes}
    cfg["scale_sizes"] = {family: ns for family, ns in sizes.items() if ns}
    if args.scale_cap is not None:
        cfg["scale_cap_s"] = args.scale_cap
    if args.kernel_n:
        cfg["kernel_n"] = args.kernel_n
    if args.contention_n:
        cfg["contention_n"] = args.contention_n
    cfg["kernel_gates"] = args.kernel_gates
    started = time.time()
    pythons = {"cofactor": sys.executable}
    needs_peers = any(s != "cofactor" for s in [*args.systems, *args.contention_systems])
    peers_error = None
    if needs_peers:
        try:
            pythons["peers"] = str(env.ensure_peers_venv())
        except Exception as err:  # no network, pip failure: run cofactor alone
            peers_error = f"{type(err).__name__}: {err}"
            env.log(f"peers venv unavailable, measuring cofactor only: {peers_error}")
    versions = {
        "cofactor": env.dist_versions(sys.executable, env.COFACTOR_DISTS),
        "cofactor toolchain": env.toolchain_versions(sys.executable),
    }
    if "peers" in pythons:
        versions["peers"] = env.dist_versions(pythons["peers"], env.PEER_DISTS)
    res: dict = {
        "meta": {
            "mode": mode,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "git": env.git_revision(),
            "machine": env.machine(),
            "threads": args.threads,
            "versions": versions,
            "systems": {s: SYSTEM_LABELS[s] for s in args.systems},
            "sections": args.only,
            "config": cfg,
            "sel_layers": SEL_LAYERS,
            "peers_error": peers_error,
            "toolchain_env": {k: v for k, v in os.environ.items() if k.startswith("COFACTOR_")},
        }
    }
    runner = Runner(args, cfg, pythons)
    for section in SECTIONS:
        if section in args.only:
            env.log(f"section {section}")
            res[section] = getattr(runner, section)()
    res["meta"]["loadavg_end"] = os.getloadavg()
    res["meta"]["wall_s"] = round(time.time() - started, 1)
    res["goals"] = report.goals(res)
    res["agreement"] = report.agreement(res)
    text = report.render(res)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / "latest.json"
    json_path.write_text(json.dumps(_rounded(res), indent=1) + "\n")
    (args.out / "latest.txt").write_text(text + "\n")
    env.log(f"wrote {json_path} and latest.txt ({res['meta']['wall_s']} s)")
    if args.update_readme:
        update_readme(text)
    if "peers" in pythons:
        png = args.out / "latest.png"
        proc = env.subprocess.run(
            [pythons["peers"], "-m", "benchmarks.plot", str(json_path), str(png)],
            cwd=env.REPO_ROOT,
            env=env.worker_env(0),
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            env.log(f"wrote {png}")
        else:
            env.log(f"plot failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return 0


README = Path(__file__).resolve().parent / "README.md"
MARKERS = ("<!-- results:start -->", "<!-- results:end -->")


def update_readme(text: str) -> None:
    body = README.read_text()
    start, end = (body.index(m) for m in MARKERS)
    body = body[: start + len(MARKERS[0])] + "\n```text\n" + text + "\n```\n" + body[end:]
    README.write_text(body)
    env.log(f"updated the table in {README}")


def _rounded(x):
    """Fewer digits in the JSON (4 significant digits are plenty for noisy timings)."""
    if isinstance(x, float):
        return float(f"{x:.4g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_rounded(v) for v in x]
    return x


if __name__ == "__main__":
    sys.exit(main())
