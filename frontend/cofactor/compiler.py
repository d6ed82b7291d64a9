"""The compiler driver: MLIR text in, a loadable shared library out.

    module.mlir --cofactor-opt--> module.llvm.mlir --mlir-translate--> module.ll
      --opt (with Enzyme when the module asks for gradients)--> module.opt.ll
      --llc--> module.o --cc--> lib<name>.so (linked against the runtime)

Each stage is a subprocess of a real toolchain binary; a failure raises `CompileError`
naming the stage and carrying the tool's message. Compiled libraries are kept in a disk
cache keyed by the IR and the toolchain's fingerprint, so a new Python process reuses them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cofactor import toolchain
from cofactor.errors import CompileError

#: cofactor-opt passes from the frontend's dialects down to the LLVM dialect
#: (docs/gradients.md explains the gradient passes around the standard lowering).
LOWERING_PASSES: tuple[str, ...] = (
    "--cofactor-split-qnodes",
    "--cofactor-custom-gradients",
    "--lower-gradient-ops",
    "--lower-quantum-to-runtime",
    "--convert-scf-to-cf",
    "--convert-math-to-llvm",
    "--convert-math-to-libm",
    "--convert-arith-to-llvm",
    "--convert-memref-to-llvm",
    "--convert-func-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
    # Needs llvm.func symbols, so it runs on the LLVM dialect.
    "--cofactor-emit-enzyme-glue",
)

#: Enzyme's PreserveNVVM step turns `__enzyme_register_gradient_*` globals into the
#: metadata the enzyme pass reads; without it custom gradients are ignored.
ENZYME_PIPELINE = "preserve-nvvm,enzyme,default<O2>"
PLAIN_PIPELINE = "default<O2>"

#: Bumped whenever the driver changes what it produces from the same IR.
DRIVER_VERSION = "1"

STAGE_FILES = {
    "mlir": "module.mlir",
    "mlir_opt": "module.llvm.mlir",
    "llvmir": "module.ll",
    "llvmir_opt": "module.opt.ll",
}


@dataclass
class CompiledLibrary:
    """A compiled module: the shared library and the text of every stage."""

    name: str
    so_path: Path
    stage_dir: Path
    from_cache: bool = False
    _stages: dict[str, str] = field(default_factory=dict, repr=False)

    def stage(self, stage: str) -> str:
        """The text of `stage` ("mlir", "mlir_opt", "llvmir" or "llvmir_opt")."""
        if stage not in STAGE_FILES:
            raise KeyError(f"unknown stage {stage!r}; choose one of {sorted(STAGE_FILES)}")
        if stage not in self._stages:
            self._stages[stage] = (self.stage_dir / STAGE_FILES[stage]).read_text()
        return self._stages[stage]


def _run(stage: str, cmd: list[str], input_text: str | None = None) -> str:
    try:
        proc = subprocess.run(cmd, input=input_text, capture_output=True, text=True)
    except OSError as err:
        raise CompileError(f"could not run {cmd[0]}: {err}", stage=stage) from err
    if proc.returncode != 0:
        raise CompileError(
            f"{Path(cmd[0]).name} failed (exit {proc.returncode})",
            stage=stage,
            tool_message=proc.stderr or proc.stdout,
        )
    return proc.stdout


def run_pipeline(
    mlir_text: str, workdir: Path, name: str, link_with: tuple[Path, ...] = ()
) -> Path:
    """Run every stage in `workdir`, leaving each stage's file there; returns the .so path.

    `link_with` names extra objects or C sources linked into the library."""
    find = toolchain.find
    mlir = workdir / STAGE_FILES["mlir"]
    mlir.write_text(mlir_text)
    llvm_mlir = workdir / STAGE_FILES["mlir_opt"]
    _run(
        "cofactor-opt",
        [str(find("cofactor-opt")), str(mlir), *LOWERING_PASSES, "-o", str(llvm_mlir)],
    )

    llvm_ir = workdir / STAGE_FILES["llvmir"]
    _run(
        "mlir-translate",
        [str(find("mlir-translate")), "--mlir-to-llvmir", str(llvm_mlir), "-o", str(llvm_ir)],
    )

    opt_ir = workdir / STAGE_FILES["llvmir_opt"]
    opt_cmd = [str(find("opt"))]
    if "__enzyme_autodiff" in llvm_ir.read_text():
        opt_cmd += [f"-load-pass-plugin={find('enzyme')}", f"-passes={ENZYME_PIPELINE}"]
    else:
        opt_cmd += [f"-passes={PLAIN_PIPELINE}"]
    _run("opt", [*opt_cmd, "-S", str(llvm_ir), "-o", str(opt_ir)])

    obj = workdir / "module.o"
    _run(
        "llc",
        [
            str(find("llc")),
            "-O2",
            "-filetype=obj",
            "-relocation-model=pic",
            str(opt_ir),
            "-o",
            str(obj),
        ],
    )

    runtime = find("runtime")
    so_path = workdir / f"lib{name}.so"
    _run(
        "link",
        [
            str(find("cc")),
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
            "-lm",
        ],
    )
    return so_path


def cache_key(mlir_text: str) -> str:
    digest = hashlib.sha256()
    for part in (DRIVER_VERSION, toolchain.fingerprint(), " ".join(LOWERING_PASSES), mlir_text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def cache_enabled() -> bool:
    return os.environ.get("COFACTOR_DISABLE_CACHE", "") in ("", "0")


def compile_module(
    mlir_text: str,
    *,
    name: str,
    keep_intermediate: bool | str | os.PathLike = False,
    cache: bool = True,
    link_with: tuple[Path, ...] = (),
) -> CompiledLibrary:
    """Compile `mlir_text` into a shared library.

    With `cache` (and unless COFACTOR_DISABLE_CACHE=1), the library is looked up in, and
    stored to, `<cache_dir>/kernels/<key>/`, where the key hashes the IR and the toolchain.
    An entry whose recorded key does not match is never loaded. `keep_intermediate` copies
    every stage's file to a folder (True: `./cofactor_intermediate/<name>/`).
    """
    use_cache = cache and cache_enabled() and not link_with
    key = cache_key(mlir_text) if use_cache else None
    result: CompiledLibrary | None = None
    if key is not None:
        result = _load_cached(key, name)
    if result is None:
        workdir = Path(tempfile.mkdtemp(prefix=f"cofactor-{name}-"))
        try:
            so_path = run_pipeline(mlir_text, workdir, name, link_with)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        result = CompiledLibrary(name, so_path, workdir)
        if key is not None:
            result = _store_cached(key, result)
    if keep_intermediate:
        folder = (
            Path.cwd() / "cofactor_intermediate" / name
            if keep_intermediate is True
            else Path(keep_intermediate)
        )
        folder.mkdir(parents=True, exist_ok=True)
        for filename in STAGE_FILES.values():
            shutil.copy(result.stage_dir / filename, folder / filename)
    return result


def _entry_dir(key: str) -> Path:
    return toolchain.cache_dir() / "kernels" / key[:2] / key


def _load_cached(key: str, name: str) -> CompiledLibrary | None:
    entry = _entry_dir(key)
    try:
        if (entry / "key").read_text() != key:
            return None
    except OSError:
        return None
    libs = list(entry.glob("lib*.so"))
    if len(libs) != 1:
        return None
    return CompiledLibrary(name, libs[0], entry, from_cache=True)


def _store_cached(key: str, compiled: CompiledLibrary) -> CompiledLibrary:
    """Move the freshly built stage folder into the cache (atomically, by rename)."""
    entry = _entry_dir(key)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        (compiled.stage_dir / "key").write_text(key)
        if entry.exists() and _load_cached(key, compiled.name) is None:
            shutil.rmtree(entry)  # a corrupt or mismatching entry: replace it
        os.rename(compiled.stage_dir, entry)
    except OSError:
        # Another process stored it first, or the cache is not writable: keep our copy.
        if (cached := _load_cached(key, compiled.name)) is not None:
            shutil.rmtree(compiled.stage_dir, ignore_errors=True)
            return cached
        return compiled
    return CompiledLibrary(compiled.name, entry / compiled.so_path.name, entry)
