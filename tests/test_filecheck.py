"""Runs the lit-style FileCheck tests in tests/mlir/*.mlir, and one lowered circuit
(tests/mlir/e2e_runtime.mlir) for real against the runtime library.

Each test file carries `// RUN: <pipeline>` lines (a trailing backslash continues a RUN
line). `%s` is the test file; the tools `cofactor-opt`, `FileCheck`, `mlir-translate`,
`mlir-opt` and `not` are put first on PATH. cofactor-opt is $COFACTOR_OPT if set,
otherwise <repo>/build/bin/cofactor-opt; the LLVM tools come from $COFACTOR_LLVM_BIN
(default /usr/lib/llvm-15/bin). Every RUN line must exit 0 under `bash -o pipefail`.
The runtime library is $COFACTOR_RUNTIME_LIB, otherwise <repo>/build/lib/libcofactor_runtime.so.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_DIR = Path(__file__).resolve().parent / "mlir"
LLVM_BIN = Path(os.environ.get("COFACTOR_LLVM_BIN", "/usr/lib/llvm-15/bin"))
LLVM_TOOLS = ("FileCheck", "mlir-translate", "mlir-opt", "not")
RUN_PREFIX = re.compile(r"^\s*//\s*RUN:\s?(.*)$")


def cofactor_opt() -> Path:
    return Path(os.environ.get("COFACTOR_OPT", REPO / "build" / "bin" / "cofactor-opt"))


def run_lines(path: Path) -> list[str]:
    """The RUN commands of a test file, continuation lines joined."""
    commands: list[str] = []
    pending = ""
    for line in path.read_text().splitlines():
        match = RUN_PREFIX.match(line)
        if not match:
            continue
        text = match.group(1).rstrip()
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        commands.append((pending + text).strip())
        pending = ""
    if pending:
        commands.append(pending.strip())
    return commands


@pytest.fixture(scope="session")
def tool_path(tmp_path_factory) -> str:
    """A PATH whose first folder links the tools that RUN lines name."""
    opt = cofactor_opt()
    if not opt.is_file():
        pytest.fail(f"cofactor-opt not built at {opt}: run `make setup` (or set COFACTOR_OPT)")
    missing = [tool for tool in LLVM_TOOLS if not (LLVM_BIN / tool).is_file()]
    if missing:
        pytest.fail(
            f"LLVM 15 tools missing from {LLVM_BIN}: {', '.join(missing)}; run `make setup`"
        )
    bin_dir = tmp_path_factory.mktemp("filecheck-bin")
    (bin_dir / "cofactor-opt").symlink_to(opt.resolve())
    for tool in LLVM_TOOLS:
        (bin_dir / tool).symlink_to(LLVM_BIN / tool)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


TEST_FILES = sorted(TEST_DIR.glob("*.mlir"))


@pytest.mark.parametrize("path", TEST_FILES, ids=[p.name for p in TEST_FILES])
def test_filecheck(path: Path, tool_path: str) -> None:
    commands = run_lines(path)
    assert commands, f"{path.name} has no RUN lines"
    env = dict(os.environ, PATH=tool_path)
    for command in commands:
        command = command.replace("%s", shlex.quote(str(path)))
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (
            f"RUN line failed (exit {result.returncode}):\n  {command}\n"
            f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
        )


LOWERING = (
    "--lower-quantum-to-runtime --convert-scf-to-cf --convert-math-to-llvm "
    "--convert-arith-to-llvm --convert-memref-to-llvm --convert-func-to-llvm "
    "--convert-cf-to-llvm --reconcile-unrealized-casts"
).split()


class MemRef1D(ctypes.Structure):
    _fields_ = [
        ("allocated", ctypes.POINTER(ctypes.c_double)),
        ("aligned", ctypes.POINTER(ctypes.c_double)),
        ("offset", ctypes.c_int64),
        ("sizes", ctypes.c_int64 * 1),
        ("strides", ctypes.c_int64 * 1),
    ]


def test_lowered_circuit_runs_on_the_runtime(tool_path: str, tmp_path: Path) -> None:
    runtime = Path(
        os.environ.get("COFACTOR_RUNTIME_LIB", REPO / "build" / "lib" / "libcofactor_runtime.so")
    ).resolve()
    if not runtime.is_file():
        pytest.fail(f"runtime library not built at {runtime}: run `make setup`")
    env = dict(os.environ, PATH=tool_path)
    llvm_ir = tmp_path / "circuit.ll"
    obj = tmp_path / "circuit.o"
    lib = tmp_path / "libcircuit.so"
    steps = [
        f"cofactor-opt {TEST_DIR / 'e2e_runtime.mlir'} {' '.join(LOWERING)}"
        f" | mlir-translate --mlir-to-llvmir > {llvm_ir}",
        f"{LLVM_BIN / 'llc'} -O2 -filetype=obj -relocation-model=pic {llvm_ir} -o {obj}",
        f"cc -shared {obj} -o {lib} -L{runtime.parent} -l:{runtime.name}"
        f" -Wl,-rpath,{runtime.parent}",
    ]
    for step in steps:
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", step], env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{step}\n{result.stdout}\n{result.stderr}"

    rt = ctypes.CDLL(str(runtime))
    rt.cf_rt_error_code.restype = ctypes.c_int64
    rt.cf_rt_error_message.restype = ctypes.c_char_p
    circuit = ctypes.CDLL(str(lib))
    run = circuit._mlir_ciface_run
    run.restype = ctypes.c_double
    run.argtypes = [ctypes.c_double, ctypes.POINTER(MemRef1D)]

    theta = 0.7
    probs = (ctypes.c_double * 4)()
    out = MemRef1D(probs, probs, 0, (ctypes.c_int64 * 1)(4), (ctypes.c_int64 * 1)(1))
    expval = run(theta, ctypes.byref(out))
    assert rt.cf_rt_error_code() == 0, rt.cf_rt_error_message()
    assert expval == pytest.approx(0.5 * math.cos(theta) + 0.5, abs=1e-12)
    expected = [math.cos(theta / 2) ** 2, 0.0, 0.0, math.sin(theta / 2) ** 2]
    assert list(probs) == pytest.approx(expected, abs=1e-12)
