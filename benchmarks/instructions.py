"""Instructions executed by the cached first call of program (a), by phase (callgrind).

The cached first call in a new process (issue 13: <= 5 ms beyond import) is a few
milliseconds of cold Python, and on a machine that other work shares its time moves by more
than the changes worth making to it. The number of instructions it executes does not: run
under valgrind's callgrind, with instrumentation on for the call only, it repeats to a few
thousandths from process to process. Each function named with `--mark` is wrapped so that
callgrind dumps its counts where the function starts and returns; the report gives every
mark's instructions (inclusive: its nested marks counted in) and the total of the call.

    python -m benchmarks.instructions                 # the default marks (the call's phases)
    python -m benchmarks.instructions --mark cofactor.tracing.qnode:QuantumScope.flush

Needs valgrind (with valgrind/callgrind.h) and a C compiler; the library comes from a disk
cache of its own, filled by a first process. Instructions are not time: the first call's
cost per instruction is high (cold caches, unspecialised bytecode), what the kernel and the
hypervisor do (page faults, the dynamic loader's mmaps, CPUID, which traps on a virtual
machine) is not counted, and OpenSSL's SHA-256 runs without the CPU's SHA instructions
under valgrind (hashlib's ~22 KB of a cached first call count ~0.6 M instructions, ~40 us
natively); compare counts A/B, and confirm a change with timings (`--only compile` of
`python -m benchmarks`) on a quiet machine.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The phases of a cached first call (`module:qualified.name`).
DEFAULT_MARKS = (
    "cofactor.jit:QJIT._split",
    "cofactor.jit:QJIT._trace_module",
    "cofactor.tracing.circuit_call:call_qnode",
    "cofactor.ir.traced:TracedModule.fingerprint",
    "cofactor.compiler:cache_key",
    "cofactor.cache:lookup",
    "cofactor.jit:Launcher",
    "cofactor.launcher:_runtime",
    "cofactor.jit:CompiledFunction.run",
)

_MARKER_C = r"""
#include <valgrind/callgrind.h>
void cf_mark_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cf_mark(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
void cf_mark_stop(void) { CALLGRIND_DUMP_STATS_AT("end"); CALLGRIND_STOP_INSTRUMENTATION; }
"""


def read_dumps(prefix: str) -> list[tuple[str, int]]:
    """(label of the dump, instructions since the previous dump) of callgrind's files
    `prefix.1`, `prefix.2`, ... in order."""
    files = sorted(glob.glob(glob.escape(prefix) + ".*"), key=_dump_number)
    out = []
    for name in files:
        label, total = None, 0
        for line in Path(name).read_text().splitlines():
            if line.startswith("desc: Trigger: Client Request:"):
                label = line.split("Client Request:", 1)[1].strip()
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
        if label is not None:
            out.append((label, total))
    return out


def _dump_number(name: str) -> int:
    suffix = name.rsplit(".", 1)[1]
    return int(suffix) if suffix.isdigit() else -1


def by_mark(dumps: list[tuple[str, int]]) -> tuple[dict[str, int], dict[str, int], int]:
    """From dumps labelled `<name` (entered) and `>name` (returned): the instructions of
    each mark (inclusive, as a profiler's cumulative time: nested marks counted in, a
    recursive call once), how often it was called, and the total."""
    inclusive: dict[str, int] = {}
    calls: dict[str, int] = {}
    open_marks: list[str] = []
    total = 0
    for label, count in dumps:
        total += count
        # (the segment this dump closes ran inside every open mark: once per name, so that
        # a recursive call's instructions are not counted twice)
        for name in set(open_marks):
            inclusive[name] += count
        if label.startswith("<"):
            name = label[1:]
            inclusive.setdefault(name, 0)
            calls[name] = calls.get(name, 0) + 1
            open_marks.append(name)
        elif label.startswith(">") and label[1:] in open_marks:
            # (the innermost open mark of that name: a recursive call returns first)
            del open_marks[len(open_marks) - 1 - open_marks[::-1].index(label[1:])]
    return inclusive, calls, total


def _child(program: str, marks: list[str], marker_lib: str, fill: bool) -> None:
    """In the process under callgrind: build the program, wrap the marks, run the call
    (`fill`: the process before it, outside valgrind, which compiles and stores it)."""
    import ctypes
    import importlib

    import pennylane  # noqa: F401

    from benchmarks import programs

    lib = ctypes.CDLL(marker_lib)
    lib.cf_mark.argtypes = [ctypes.c_char_p]
    backend = programs.make_backend("cofactor")
    fn, arg = programs.compile_program(backend, program)
    if fill:
        fn(arg)
        return
    for spec in marks:
        module_name, path = spec.split(":")
        *owners, attr = path.split(".")
        owner = importlib.import_module(module_name)
        for part in owners:
            owner = getattr(owner, part)
        _wrap(owner, attr, path, lib.cf_mark)
    lib.cf_mark_start()
    fn(arg)
    lib.cf_mark_stop()
    if not fn._last.library.from_cache:
        raise SystemExit("the library was not loaded from the cache")


def _wrap(owner: object, attr: str, label: str, mark: object) -> None:
    original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
    is_property = isinstance(original, property)
    function = original.fget if is_property else original
    enter, leave = f"<{label}".encode(), f">{label}".encode()

    def wrapper(*args: object, **kwargs: object) -> object:
        mark(enter)
        try:
            return function(*args, **kwargs)
        finally:
            mark(leave)

    setattr(owner, attr, property(wrapper) if is_property else wrapper)


def measure(program: str, marks: list[str], workdir: Path) -> tuple[dict, dict, int]:
    """Fill a fresh cache with `program`'s library, then run its cached first call under
    callgrind; returns `by_mark` of the dumps."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    marker_lib = workdir / "marker.so"
    source = workdir / "marker.c"
    source.write_text(_MARKER_C)
    built = subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", "-o", str(marker_lib), str(source)],
        capture_output=True,
        text=True,
    )
    if built.returncode:
        raise SystemExit(f"could not build the marker library: {built.stderr.strip()}")
    env = dict(os.environ, COFACTOR_CACHE_DIR=str(workdir / "cache"), PYTHONHASHSEED="0")
    env.pop("COFACTOR_DISABLE_CACHE", None)
    child = [sys.executable, "-m", "benchmarks.instructions", "--child", "--program", program]
    for spec in marks:
        child += ["--mark", spec]
    child += ["--marker-lib", str(marker_lib)]
    subprocess.run([*child, "--fill"], env=env, check=True)
    out = str(workdir / "callgrind.out")
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    run = subprocess.run([*valgrind, *child], env=env, capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"the run under callgrind failed:\n{run.stderr[-3000:]}")
    return by_mark(read_dumps(out))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default="a", choices=("a", "b", "c"))
    parser.add_argument("--mark", action="append", help="module:qualified.name to count")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--marker-lib", help=argparse.SUPPRESS)
    parser.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    marks = args.mark or list(DEFAULT_MARKS)
    if args.child:
        _child(args.program, marks, args.marker_lib, args.fill)
        return
    with tempfile.TemporaryDirectory(prefix="cofactor-instructions-") as tmp:
        inclusive, calls, total = measure(args.program, marks, Path(tmp))
    print(f"cached first call of ({args.program}): {total / 1e6:.3f} M instructions")
    for name in marks:
        label = name.split(":", 1)[1]
        if label in inclusive:
            share = inclusive[label] / total if total else 0.0
            print(f"  {label:45} {inclusive[label] / 1e6:8.3f} M  {share:6.1%}  x{calls[label]}")
        else:
            print(f"  {label:45} not called")


if __name__ == "__main__":
    main()
