"""The two interpreters, the peers' virtual environment, versions, and worker processes.

cofactor runs in the interpreter that runs the orchestrator (the repository's .venv). The
peers (Catalyst, PennyLane-Lightning, JAX) are never cofactor dependencies: they live in
<repo>/.venv-peers, created on demand with `pip install pennylane-catalyst==<pin>` (Catalyst
pins the jax/jaxlib and PennyLane versions it needs) plus matplotlib for the plot.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PEERS_VENV = REPO_ROOT / ".venv-peers"
CATALYST_PIN = "pennylane-catalyst==0.15.0"
PEER_PACKAGES = (CATALYST_PIN, "matplotlib")

COFACTOR_DISTS = ("cofactor", "pennylane", "pennylane-lightning", "numpy", "xdsl")
PEER_DISTS = (
    "pennylane-catalyst",
    "pennylane",
    "pennylane-lightning",
    "jax",
    "jaxlib",
    "numpy",
    "scipy",
    "matplotlib",
)


def peers_python() -> Path:
    return PEERS_VENV / "bin" / "python"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _has_modules(python: Path, modules: tuple[str, ...]) -> bool:
    code = (
        "import importlib.util as u, sys; sys.exit(any(not u.find_spec(m) for m in sys.argv[1:]))"
    )
    proc = subprocess.run([str(python), "-c", code, *modules], capture_output=True)
    return proc.returncode == 0


def ensure_peers_venv() -> Path:
    """Create .venv-peers and install the peers unless they are already there."""
    python = peers_python()
    if not python.exists():
        log(f"creating {PEERS_VENV} (peers are never cofactor dependencies)")
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    if not _has_modules(python, ("catalyst", "jax", "pennylane_lightning")):
        log(f"installing {' '.join(PEER_PACKAGES)} into {PEERS_VENV}")
        subprocess.run([str(python), "-m", "pip", "install", *PEER_PACKAGES], check=True)
    elif not _has_modules(python, ("matplotlib",)):
        log(f"installing matplotlib into {PEERS_VENV} (for the plot)")
        subprocess.run([str(python), "-m", "pip", "install", "matplotlib"], check=True)
    return python


def dist_versions(python: Path | str, dists: tuple[str, ...]) -> dict[str, str | None]:
    code = (
        "import json, sys, importlib.metadata as m\n"
        "out = {'python': sys.version.split()[0]}\n"
        "for d in sys.argv[1:]:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: out[d] = None\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([str(python), "-c", code, *dists], capture_output=True, text=True)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": (proc.stderr or proc.stdout)[-300:]}


def toolchain_versions(python: Path | str) -> dict[str, str]:
    """cofactor's toolchain (LLVM tools, cofactor-opt, runtime) as cofactor reports it."""
    code = (
        "import json\n"
        "from cofactor import toolchain\n"
        "out = {}\n"
        "for name in ('opt', 'cofactor-opt', 'runtime'):\n"
        "    try: out[name] = toolchain.TOOLS[name].version()\n"
        "    except Exception as err: out[name] = f'n/a ({type(err).__name__})'\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": (proc.stderr or proc.stdout).strip()[-200:]}


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        mem = None
    try:
        l3 = Path("/sys/devices/system/cpu/cpu0/cache/index3/size").read_text().strip()
        l3_bytes = int(l3[:-1]) * 1024 if l3.endswith("K") else int(l3)
    except (OSError, ValueError):
        l3_bytes = None
    return {
        "cpu": cpu,
        "l3_bytes": l3_bytes,
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
    }


def worker_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_ENABLE_X64"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    # Compile times are measured without cofactor's disk cache (Catalyst has none).
    env["COFACTOR_DISABLE_CACHE"] = "1"
    if threads > 0:
        env["OMP_NUM_THREADS"] = str(threads)
        env["OPENBLAS_NUM_THREADS"] = str(threads)
        env["XLA_FLAGS"] = (
            env.get("XLA_FLAGS", "")
            + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        ).strip()
    return env


def run_worker(python: Path | str, spec: dict, timeout: float, threads: int) -> dict:
    """Run one measurement in a new process; never raises (errors come back as {"error"})."""
    from benchmarks.worker import RESULT_TAG

    cmd = [str(python), "-m", "benchmarks.worker", json.dumps(spec)]
    try:
        proc = subprocess.run(
            cmd,
            cwd=REPO_ROOT,
            env=worker_env(threads),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    except OSError as err:
        return {"error": f"could not start {python}: {err}"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    tail = (proc.stderr or proc.stdout).strip().splitlines()
    return {"error": f"worker exited {proc.returncode}: {tail[-1] if tail else 'no output'}"[:300]}
