"""The compiler driver: MLIR text in, a loadable shared library out.

    module.mlir --cofactor-opt--> module.llvm.mlir --mlir-translate--> module.ll
      --opt (with Enzyme when the module asks for gradients)--> module.opt.ll
      --llc--> module.o --cc--> lib<name>.so (linked against the runtime)

By default every stage runs inside this process, in libcofactor-compiler.so
(`native_compiler`, compiler/ in the repository): no subprocess, and no file written but the
library itself (the object file stays in memory, lld links it). The same stages also run as
subprocesses of the real tools, each in a temporary build folder: with
COFACTOR_PIPELINE=subprocess (for debugging a stage with its tool), when the library is not
built, and for `link_with` (C sources need `cc`). Either way a failure raises `CompileError`
naming the stage ("cofactor-opt", "mlir-translate", "opt", "llc", "link") with the
diagnostics. Compiled libraries are kept in a disk cache (`cofactor.cache`) keyed by the IR
and the toolchain's fingerprint, so a new Python process reuses them; a library that is not
cached lives in a private per-process folder until its CompiledLibrary is dropped.

Compile time (`python -m benchmarks.compile_pipeline`; CPU ms, the least disturbed figure
on the shared 2-core machine where it was measured under a load of ~15): the 4-qubit circuit
(program a) 150-170 with the subprocesses, 26-33 in process; its gradient (b, Enzyme and O2
dominate) 430-450 and 270-280; 50 descent steps over it (c) 430-520 and 250-280. Since
then (b) and (c) need no Enzyme (--cofactor-direct-qnode-gradients). compiler/README.md has
the stage by stage figures.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cofactor import cache as disk_cache
from cofactor import native_compiler, private_libraries, toolchain
from cofactor.errors import CompileError

#: cofactor-opt passes from the frontend's dialects down to the LLVM dialect
#: (docs/gradients.md explains the gradient passes around the standard lowering).
LOWERING_PASSES: tuple[str, ...] = (
    # First: the frontend's one loop per numpy operation, with a buffer between two, becomes
    # one loop where the iterations line up (mlir_passes/lib/Transforms/FuseLoops.cpp); each
    # loop costs every later stage (Enzyme reverses it, O2 and code generation compile it).
    "--cofactor-fuse-loops",
    # A QNode's gradient with no classical code to differentiate needs no Enzyme.
    "--cofactor-direct-qnode-gradients",
    "--cofactor-split-qnodes",
    "--cofactor-custom-gradients",
    "--lower-gradient-ops",
    "--lower-quantum-to-runtime",
    # Before the conversion to LLVM: convert-math-to-libm makes func.call/func.func.
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    # convert-scf-to-cf, -arith-, -memref-, -func- and -cf-to-llvm as one dialect conversion
    # (mlir_passes/lib/Transforms/ConvertToLLVM.cpp): one walk of the module, not five.
    "--cofactor-convert-to-llvm",
    "--reconcile-unrealized-casts",
    # Needs llvm.func symbols, so it runs on the LLVM dialect.
    "--cofactor-emit-enzyme-glue",
    # Last, so that every pass above still reports errors at their place in module.mlir: the
    # locations would become LLVM debug information (a DISubprogram per function, a
    # DILocation per instruction, naming lines of the traced module that nobody debugs),
    # which the optimizer carries and code generation emits as DWARF: 4-8% of the driver's
    # instructions (callgrind; the 4-qubit circuit, its gradient, tanh(W x) at W 512).
    "--strip-debuginfo",
)

#: The LLVM optimization after lowering (and after Enzyme), one element (`module(...)`: the
#: in-process driver times and prepares each top-level element of a pipeline apart). Not
#: `default<O2>`: most of O2's ~80 passes find nothing to do in these modules, and its
#: vectorizers can do nothing at all (the module has no target triple when `opt` runs, so
#: the cost model sees no vector registers). This is what changed the code in O2's output
#: on the benchmark programs (the 4-qubit circuit, its gradient, 50 descent steps, the
#: gradients of tanh(W x), of StronglyEntanglingLayers and QPE), in O2's order:
#: promote Enzyme's and MLIR's stack slots (sroa), simplify, inline the callees (the
#: `_mlir_ciface_` wrappers, Enzyme's differentiated function into its caller), hoist loop
#: invariants, turn zeroing loops into memset (loop-idiom) and stores into memset
#: (memcpyopt), merge redundant loads (gvn), and correlated-propagation: Enzyme's reverse
#: loops carry an adjoint through a `select` on the loop's exit condition, a loop-carried
#: chain until it folds on the back edge. inferattrs marks malloc/free as allocation
#: functions, which lets dse fold malloc + memset into calloc. Compile-time (callgrind,
#: whole driver): -15 to -20% on those programs, O2's stage 2-3x cheaper; their results are
#: bitwise the same and a call as fast (compiler/README.md, session 8).
_OPTIMIZE_PASSES = (
    "inferattrs,cgscc(inline,function("
    "sroa,early-cse<memssa>,simplifycfg,instcombine,"
    "loop-mssa(loop-rotate,licm<allowspeculation>),loop(loop-idiom,loop-deletion),"
    "gvn,correlated-propagation,instcombine,memcpyopt,dse,adce,simplifycfg"
    ")),globaldce"
)
OPTIMIZE_PIPELINE = f"module({_OPTIMIZE_PASSES})"
#: Enzyme's PreserveNVVM step turns `__enzyme_register_gradient_*` globals into the
#: metadata the enzyme pass reads; without it custom gradients are ignored. `always-inline`
#: first: the in-process driver marks the gradients Enzyme generated `alwaysinline` (at
#: their one call site), so that they are optimized once, in their caller, rather than on
#: their own and again once inlined (compiler/Optimize.cpp, inlineGradientsFirst; the
#: subprocess pipeline's `opt` marks nothing, and there the pass does nothing).
ENZYME_PIPELINE = f"preserve-nvvm,enzyme,module(always-inline,{_OPTIMIZE_PASSES})"
PLAIN_PIPELINE = OPTIMIZE_PIPELINE

#: Code generation options. SelectionDAG's store merging is quadratic in the stores of one
#: basic block, and a traced program (unrolled gates, elementwise arrays) and its Enzyme
#: reverse pass are few blocks with thousands of stores: it was 90% of llc's time for the
#: gradient of 10 StronglyEntanglingLayers (4.4 s -> 0.4 s without it). Merging adjacent
#: narrow stores into wide ones buys nothing measurable in this code. Fast instruction
#: selection and no loop strength reduction, the rest of -O2 kept: a third of code
#: generation's instructions on the gradient of tanh(W x), the same run time
#: (compiler/CodeGen.cpp, setCodeGenOptions; compiler/README.md, session 12).
LLC_FLAGS: tuple[str, ...] = (
    "-O2",
    "-combiner-store-merging=false",
    "-fast-isel",
    "-disable-lsr",
)

#: Bumped whenever the driver changes what it produces from the same IR.
DRIVER_VERSION = "10"

STAGE_FILES = {
    "mlir": "module.mlir",
    "mlir_opt": "module.llvm.mlir",
    "llvmir": "module.ll",
    "llvmir_opt": "module.opt.ll",
}


#: Stage texts of a fresh compile are kept in memory up to this size in all; beyond it (or
#: for a library from the cache) they are regenerated on demand by re-running the stages.
#: The in-process pipeline prints them only when asked (keep_intermediate, `stage`).
STAGE_MEMORY_LIMIT = 16 * 1024 * 1024

#: COFACTOR_PIPELINE: "subprocess" runs the tools; "inprocess" insists on the library;
#: unset or "auto": the library when it is built.
PIPELINE_ENV = "COFACTOR_PIPELINE"


def mlir_pipeline() -> str:
    """LOWERING_PASSES as one textual MLIR pipeline, for the in-process pipeline."""
    return ",".join(flag.removeprefix("--") for flag in LOWERING_PASSES)


def use_in_process() -> bool:
    """Whether to run the pipeline in this process (see PIPELINE_ENV)."""
    choice = os.environ.get(PIPELINE_ENV, "auto").strip().lower() or "auto"
    if choice not in ("auto", "inprocess", "subprocess"):
        raise CompileError(f"{PIPELINE_ENV}={choice!r}: use auto, inprocess or subprocess")
    if choice == "subprocess":
        return False
    reason = native_compiler.unavailable_reason()
    if reason is None:
        return True
    if choice == "inprocess":
        raise CompileError(f"{PIPELINE_ENV}=inprocess, but the compiler library: {reason}")
    _warn_fallback(reason)
    return False


@functools.cache
def _warn_fallback(reason: str) -> None:
    warnings.warn(
        f"cofactor compiles with subprocesses (slower): {reason}", RuntimeWarning, stacklevel=3
    )


def _warn_crash(crash: CompileError) -> None:
    warnings.warn(
        f"cofactor's in-process compiler crashed ({crash.stage}); compiling with subprocesses "
        "from now on in this process. Please report the program that caused it.",
        RuntimeWarning,
        stacklevel=4,
    )


def _native(mlir_text: str, output: Path | None, keep_stages: bool) -> native_compiler.NativeResult:
    runtime = toolchain.find("runtime")
    # -Bsymbolic: calls inside the library go to its own functions even when one is named
    # like a symbol of a library loaded earlier (a qjit function `step` would otherwise call
    # glibc's `step` and crash). The runtime is linked only into a library that calls a
    # `cf_rt_*` function (the library decides, after optimization; and --as-needed): a
    # classical program does not depend on it, whose load (a 5 MB C++ library) was 0.4-0.5
    # ms of the first call of such a program; its calls into the C library and libm resolve
    # in the process as before, and the launcher loads the runtime (whose dependencies,
    # libgcc_s among them, then resolve the rest) if one does not.
    return native_compiler.compile_native(
        mlir_text,
        mlir_pipeline=mlir_pipeline(),
        plain_pipeline=PLAIN_PIPELINE,
        enzyme_pipeline=ENZYME_PIPELINE,
        output=output,
        link_args=("-Bsymbolic",),
        runtime_link_args=(
            "--as-needed",
            f"-L{runtime.parent}",
            f"-l:{runtime.name}",
            "-rpath",
            str(runtime.parent),
        ),
        keep_stages=keep_stages,
    )


@dataclass
class CompiledLibrary:
    """A compiled module: the shared library, and the text of every stage on demand."""

    name: str
    so_path: Path
    from_cache: bool = False
    #: the module's text, or a function that prints it (a library loaded from the cache by
    #: the module's fingerprint: printed only if asked for)
    mlir_source: str | Callable[[], str] = field(default="", repr=False)
    _stages: dict[str, str] = field(default_factory=dict, repr=False)
    #: Seconds spent in each stage of a fresh compile (empty for a library from the cache),
    #: by stage name ("cofactor-opt", "mlir-translate", "opt", "llc", "link"); benchmarks
    #: read it for the per-stage breakdown.
    stage_s: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def mlir_text(self) -> str:
        """The MLIR module compiled (printed on first use)."""
        if not isinstance(self.mlir_source, str):
            self.mlir_source = self.mlir_source()
        return self.mlir_source

    def stage(self, stage: str) -> str:
        """The text of `stage` ("mlir", "mlir_opt", "llvmir" or "llvmir_opt")."""
        if stage not in STAGE_FILES:
            raise KeyError(f"unknown stage {stage!r}; choose one of {sorted(STAGE_FILES)}")
        if stage == "mlir":
            return self.mlir_text
        if stage not in self._stages:
            self._stages.update(regenerate_stages(self.mlir_text, stage))
        return self._stages[stage]


def _run(
    stage: str,
    cmd: list[str],
    input_text: str | None = None,
    pass_fds: tuple[int, ...] = (),
    cwd: Path | None = None,
) -> str:
    if cwd is not None and os.sep in cmd[0]:
        cmd = [os.path.abspath(cmd[0]), *cmd[1:]]  # a relative override still works
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, input=input_text, capture_output=True, text=True, pass_fds=pass_fds, cwd=cwd
        )
    except OSError as err:
        raise CompileError(f"could not run {cmd[0]}: {err}", stage=stage) from err
    timings = getattr(_stage_timings, "current", None)
    if timings is not None:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - started
    if proc.returncode != 0:
        raise CompileError(
            f"{Path(cmd[0]).name} failed (exit {proc.returncode})",
            stage=stage,
            tool_message=proc.stderr or proc.stdout,
        )
    return proc.stdout


def _run_text_stages(mlir_text: str, workdir: Path, last: str = "llvmir_opt") -> None:
    """cofactor-opt, mlir-translate and opt (each up to `last`), leaving files in `workdir`.
    The tools run in `workdir` on bare file names, so the texts (whose debug information
    names the input file) do not depend on the folder's name."""
    find = toolchain.find
    mlir = workdir / STAGE_FILES["mlir"]
    mlir.write_text(mlir_text)
    llvm_mlir = workdir / STAGE_FILES["mlir_opt"]
    _run(
        "cofactor-opt",
        [str(find("cofactor-opt")), mlir.name, *LOWERING_PASSES, "-o", llvm_mlir.name],
        cwd=workdir,
    )
    if last == "mlir_opt":
        return
    llvm_ir = workdir / STAGE_FILES["llvmir"]
    _run(
        "mlir-translate",
        [str(find("mlir-translate")), "--mlir-to-llvmir", llvm_mlir.name, "-o", llvm_ir.name],
        cwd=workdir,
    )
    if last == "llvmir":
        return
    opt_ir = workdir / STAGE_FILES["llvmir_opt"]
    opt_io = ["-S", llvm_ir.name, "-o", opt_ir.name]
    if "__enzyme_autodiff" not in llvm_ir.read_text():
        _run("opt", [str(find("opt")), f"-passes={PLAIN_PIPELINE}", *opt_io], cwd=workdir)
        return
    # opt loads the plugin through the descriptor that was checked (owner, mode, hash), so
    # the file cannot be swapped between the check and the load.
    with toolchain.open_enzyme() as plugin_fd:
        _run(
            "opt",
            [
                str(find("opt")),
                f"-load-pass-plugin=/proc/self/fd/{plugin_fd}",
                f"-passes={ENZYME_PIPELINE}",
                *opt_io,
            ],
            pass_fds=(plugin_fd,),
            cwd=workdir,
        )


def run_pipeline(
    mlir_text: str, workdir: Path, name: str, link_with: tuple[Path, ...] = ()
) -> Path:
    """Run every stage in `workdir`, leaving each stage's file there; returns the .so path.

    `link_with` names extra objects or C sources linked into the library."""
    _run_text_stages(mlir_text, workdir)
    codegen_input = _allocate_through_runtime(workdir / STAGE_FILES["llvmir_opt"])
    obj = workdir / "module.o"
    _run(
        "llc",
        [
            str(toolchain.find("llc")),
            *LLC_FLAGS,
            "-filetype=obj",
            "-relocation-model=pic",
            str(codegen_input),
            "-o",
            str(obj),
        ],
    )
    runtime = toolchain.find("runtime")
    so_path = workdir / f"lib{name}.so"
    _run(
        "link",
        [
            str(toolchain.find("cc")),
            "-shared",
            "-fPIC",
            "-O2",
            "-o",
            str(so_path),
            str(obj),
            *map(str, link_with),
            f"-L{runtime.parent}",
            f"-l:{runtime.name}",
            f"-Wl,-rpath,{runtime.parent}",
            "-Wl,-Bsymbolic",  # as in _native: a function `step` is ours, not glibc's
            "-lm",
        ],
    )
    return so_path


def _allocate_through_runtime(optimized: Path) -> Path:
    """What the in-process driver does before code generation (compiler/Compiler.cpp,
    allocateThroughRuntime): a program that calls the runtime allocates through it
    (`cf_rt_alloc`/`cf_rt_calloc`: checked, a failure an error instead of a NULL pointer).
    Returns the file llc reads (the optimized stage's file stays as `opt` wrote it)."""
    text = optimized.read_text()
    if "@cf_rt_" not in text or "@cf_rt_alloc(" in text or "@cf_rt_calloc(" in text:
        return optimized
    renamed = text.replace("@malloc(", "@cf_rt_alloc(").replace("@calloc(", "@cf_rt_calloc(")
    if renamed == text:
        return optimized
    target = optimized.with_name("module.codegen.ll")
    target.write_text(renamed)
    return target


def _read_stages(workdir: Path) -> dict[str, str]:
    paths = {stage: workdir / filename for stage, filename in STAGE_FILES.items()}
    if sum(p.stat().st_size for p in paths.values()) > STAGE_MEMORY_LIMIT:
        return {}
    return {stage: path.read_text() for stage, path in paths.items() if stage != "mlir"}


def regenerate_stages(mlir_text: str, last: str) -> dict[str, str]:
    """Re-run the text stages up to `last` (in process, or in a temporary folder); returns
    their texts."""
    order = ["mlir_opt", "llvmir", "llvmir_opt"]
    wanted = order[: order.index(last) + 1]
    if use_in_process():
        try:
            stages = _native(mlir_text, None, keep_stages=True).stages
            return {stage: stages[stage] for stage in wanted}
        except native_compiler.InProcessCrash as crash:
            _warn_crash(crash)
    with tempfile.TemporaryDirectory(prefix="cofactor-stages-") as tmp:
        _run_text_stages(mlir_text, Path(tmp), last)
        return {stage: (Path(tmp) / STAGE_FILES[stage]).read_text() for stage in wanted}


def cache_key(mlir_text: str | None = None, *, fingerprint: str | None = None) -> str:
    """The disk cache's key of a module: the driver, the toolchain, the passes and either
    the module's text or its fingerprint (`cofactor.ir.fingerprint`, which is as complete
    as the text; the two kinds of key are told apart, so they never collide)."""
    if fingerprint is not None:
        program = ("ir-fingerprint", fingerprint)
    elif mlir_text is not None:
        program = ("ir-text", mlir_text)
    else:
        raise TypeError("cache_key needs the module's text or its fingerprint")
    digest = hashlib.sha256()
    parts = (DRIVER_VERSION, toolchain.fingerprint(), " ".join(LOWERING_PASSES), *program)
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def cache_enabled() -> bool:
    return disk_cache.enabled()


def compile_module(
    mlir_text: str | Callable[[], str],
    *,
    name: str,
    keep_intermediate: bool | str | os.PathLike = False,
    cache: bool = True,
    link_with: tuple[Path, ...] = (),
    fingerprint: str | None = None,
) -> CompiledLibrary:
    """Compile `mlir_text` into a shared library.

    With `cache` (and unless COFACTOR_DISABLE_CACHE=1), the library is looked up in, and
    stored to, the disk cache (`cofactor.cache`), keyed by the IR and the toolchain; only a
    verified entry is loaded. `keep_intermediate` writes every stage's text to a folder
    (True: `./cofactor_intermediate/<name>/`). With the module's `fingerprint`
    (`cofactor.ir.fingerprint.module_fingerprint`), the key is made of it rather than of
    the text, and `mlir_text` may be a function that prints the module: it is called only
    when the library is not in the cache (or its text is asked for).
    """
    folder = None
    if keep_intermediate:
        folder = (
            Path.cwd() / "cofactor_intermediate" / name
            if keep_intermediate is True
            else Path(keep_intermediate)
        )
        folder.mkdir(parents=True, exist_ok=True)
    use_cache = cache and cache_enabled() and not link_with
    key = None
    if use_cache:
        key = (
            cache_key(fingerprint=fingerprint)
            if fingerprint is not None
            else cache_key(_text(mlir_text))
        )
    cached = disk_cache.lookup(key) if key is not None else None
    if cached is not None:
        result = CompiledLibrary(name, cached, from_cache=True, mlir_source=mlir_text)
        if folder is not None:  # regenerated: the cache keeps no stage texts
            for stage, filename in STAGE_FILES.items():
                (folder / filename).write_text(result.stage(stage))
        return result
    mlir_text = _text(mlir_text)
    if not link_with and use_in_process():
        try:
            return _compile_in_process(mlir_text, name, key, folder)
        except native_compiler.InProcessCrash as crash:
            # The subprocess tools either succeed or turn the crash into a CompileError of
            # their own; later compiles of this process use them too (use_in_process).
            _warn_crash(crash)
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix=f"cofactor-{name}-") as tmp:
        _stage_timings.current = timings
        try:
            built = run_pipeline(mlir_text, Path(tmp), name, link_with)
        finally:
            _stage_timings.current = None
        stages = _read_stages(Path(tmp))
        if folder is not None:
            for filename in STAGE_FILES.values():
                shutil.copyfile(Path(tmp) / filename, folder / filename)
        so_path = disk_cache.store(key, built, name) if key is not None else None
        private = so_path is None
        if private:
            so_path = private_libraries.keep(built, name)
    result = CompiledLibrary(name, so_path, mlir_source=mlir_text, _stages=stages, stage_s=timings)
    if private:
        # dlopen maps the file, so it may go as soon as the library object is dropped
        weakref.finalize(result, _unlink_quietly, so_path)
    return result


def _text(mlir: str | Callable[[], str]) -> str:
    return mlir if isinstance(mlir, str) else mlir()


#: Where `_run` adds up the seconds of each stage while compile_module runs (per thread).
_stage_timings = threading.local()


def _compile_in_process(
    mlir_text: str, name: str, key: str | None, folder: Path | None
) -> CompiledLibrary:
    """The library linked by the in-process pipeline straight into its new cache entry
    (through the entry's checked folder), or into the private folder when not cached."""
    keep = folder is not None
    built: list[native_compiler.NativeResult] = []

    def build(entry_fd: int) -> None:
        output = Path(f"/proc/self/fd/{entry_fd}/{disk_cache.LIBRARY}")
        built.append(_native(mlir_text, output, keep))

    so_path = disk_cache.store_built(key, name, build) if key is not None else None
    private = so_path is None
    if private:
        so_path = private_libraries.new_path(name)
        try:
            built = [_native(mlir_text, so_path, keep)]
        except BaseException:
            _unlink_quietly(so_path)
            raise
    stages, ms = built[-1].stages, built[-1].ms
    if folder is not None:
        (folder / STAGE_FILES["mlir"]).write_text(mlir_text)
        for stage, text in stages.items():
            (folder / STAGE_FILES[stage]).write_text(text)
    if sum(map(len, stages.values())) > STAGE_MEMORY_LIMIT:
        stages = {}
    stage_s = {stage: t / 1e3 for stage, t in ms.items()}
    result = CompiledLibrary(name, so_path, mlir_source=mlir_text, _stages=stages, stage_s=stage_s)
    if private:
        # dlopen maps the file, so it may go as soon as the library object is dropped
        weakref.finalize(result, _unlink_quietly, so_path)
    return result


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
