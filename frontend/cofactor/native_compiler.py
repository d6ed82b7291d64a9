"""The in-process pipeline: libcofactor-compiler.so (compiler/ in the repository) through
ctypes.

One call runs what the subprocess pipeline runs as five tools: cofactor's MLIR passes,
translation to LLVM IR, O2 with Enzyme when the module asks for gradients, code generation
into memory and linking with lld into the output file. Nothing else is written to disk. The
library is loaded once per process (in the background from `import cofactor`, `preload`);
calls are serialized (ctypes releases the GIL meanwhile).

The Enzyme plugin is checked (`toolchain.open_enzyme`) every time a module needs it, as for
the subprocess pipeline; the library loads it from the checked descriptor once per process,
ahead of the compile when a classical function's gradient is traced (`prepare_enzyme`). A
plugin other than the one loaded cannot replace it in the same process.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cofactor import cache as disk_cache
from cofactor import enzyme_plugin, private_libraries, toolchain
from cofactor.errors import CompileError, ToolchainNotFoundError

ABI_VERSION = 7
#: The stages the library times, in order (cofactor_compile_result.ms): "lower" is the MLIR
#: passes and the translation, "stage_texts" the printing of the texts when asked for; then
#: the parts of "opt": "opt.plugin" opening (checking) and loading the Enzyme plugin,
#: "opt.enzyme" the pipeline before its O2 (preserve-nvvm and Enzyme), "opt.o2" the O2.
TIMED_STAGES = (
    "lower",
    "stage_texts",
    "opt",
    "codegen",
    "link",
    "opt.plugin",
    "opt.enzyme",
    "opt.o2",
)

_OPEN_PLUGIN = ctypes.CFUNCTYPE(ctypes.c_int)


class _Request(ctypes.Structure):
    _fields_ = [
        ("mlir", ctypes.c_char_p),
        ("mlir_pipeline", ctypes.c_char_p),
        ("plain_pipeline", ctypes.c_char_p),
        ("enzyme_pipeline", ctypes.c_char_p),
        ("open_plugin", _OPEN_PLUGIN),
        ("output", ctypes.c_char_p),
        ("link_args", ctypes.POINTER(ctypes.c_char_p)),
        ("num_link_args", ctypes.c_int),
        ("keep_stages", ctypes.c_int),
        ("num_runtime_link_args", ctypes.c_int),
    ]


class _Result(ctypes.Structure):
    _fields_ = [
        ("stage", ctypes.c_void_p),
        ("message", ctypes.c_void_p),
        ("mlir_opt", ctypes.c_void_p),
        ("llvmir", ctypes.c_void_p),
        ("llvmir_opt", ctypes.c_void_p),
        ("ms", ctypes.c_double * len(TIMED_STAGES)),
        ("crashed", ctypes.c_int),
    ]


class InProcessCrash(CompileError):
    """LLVM or Enzyme crashed inside this process (the library caught the signal). The
    library is not used again in this process: its global state may be damaged."""


#: Why the library must not be used any more in this process (after a crash), else None.
_crashed: str | None = None


@dataclass
class NativeResult:
    """Stage texts (when asked for) and the milliseconds of each timed stage."""

    stages: dict[str, str] = field(default_factory=dict)
    ms: dict[str, float] = field(default_factory=dict)


_load_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL:
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = _open_library()
        return _loaded


def _open_library() -> ctypes.CDLL:
    path = toolchain.find("compiler")
    lib = ctypes.CDLL(str(path))
    lib.cofactor_compiler_abi_version.restype = ctypes.c_int
    entries = (
        "cofactor_compiler_warm_up",
        "cofactor_compiler_load_enzyme",
        "cofactor_compiler_load_enzyme_async",
        "cofactor_compiler_enzyme_load_status",
    )
    got = lib.cofactor_compiler_abi_version()
    if got != ABI_VERSION or not all(hasattr(lib, name) for name in entries):
        raise ToolchainNotFoundError(
            f"{path} has ABI version {got}, not {ABI_VERSION}: rebuild it (`make setup`)"
        )
    lib.cofactor_compile.argtypes = [ctypes.POINTER(_Request), ctypes.POINTER(_Result)]
    lib.cofactor_compile.restype = ctypes.c_int
    lib.cofactor_free_result.argtypes = [ctypes.POINTER(_Result)]
    lib.cofactor_free_result.restype = None
    lib.cofactor_compiler_warm_up.argtypes = []
    lib.cofactor_compiler_warm_up.restype = None
    lib.cofactor_compiler_load_enzyme.argtypes = [ctypes.c_int]
    lib.cofactor_compiler_load_enzyme.restype = ctypes.c_int
    lib.cofactor_compiler_load_enzyme_async.argtypes = [ctypes.c_int]
    lib.cofactor_compiler_load_enzyme_async.restype = ctypes.c_int
    lib.cofactor_compiler_enzyme_load_status.argtypes = [ctypes.c_int]
    lib.cofactor_compiler_enzyme_load_status.restype = ctypes.c_int
    return lib


#: COFACTOR_PRELOAD=0 turns the preload off.
PRELOAD_ENV = "COFACTOR_PRELOAD"
_preload_thread: threading.Thread | None = None


def preload() -> None:
    """Load the library (LLVM and MLIR with it: tens of milliseconds) and set up its
    registries in a thread, while the program imports and traces: dlopen releases the GIL.
    Without it the first compile of a process pays the load. A failure is left for the
    first compile to report. Forks and interpreter exit wait for the thread (a process must
    not fork or exit in the middle of dlopen)."""
    global _preload_thread
    if os.environ.get(PRELOAD_ENV, "1") == "0" or _loaded is not None:
        return
    if os.environ.get("COFACTOR_PIPELINE", "").strip().lower() == "subprocess":
        return
    if _preload_thread is None:
        _preload_thread = threading.Thread(target=_warm_up, name="cofactor-preload")
        _preload_thread.start()


def _warm_up() -> None:
    try:
        _library().cofactor_compiler_warm_up()
    except (ToolchainNotFoundError, OSError):
        pass  # the first compile reports it, or falls back to the tools
    if not disk_cache.enabled():
        # Every library of this process will go to the private folder: made now, beside the
        # import, rather than by the first compile (0.2-0.8 ms of it).
        with contextlib.suppress(OSError):
            private_libraries.folder()


#: The thread that checks the Enzyme plugin ahead of the compile that needs it.
_ahead_lock = threading.Lock()
_ahead_thread: threading.Thread | None = None


def check_plugin_ahead() -> None:
    """Check the Enzyme plugin (its SHA-256: 20-40 ms for its 9 MB) in a thread, once per
    process, while the module that may need it is lowered: a module with a gradient.vjp
    needs Enzyme unless --cofactor-direct-qnode-gradients computes all its gradients, and
    only the lowering tells. The check is the one every compile makes
    (`toolchain.open_enzyme`), which remembers a file it hashed by its identity (device,
    inode, size, mtime, ctime): the compile that needs the plugin waits for this thread,
    then opens and checks the plugin again without hashing it again. hashlib releases the
    GIL while it hashes. A missing or failing plugin is left for that compile to report."""
    global _ahead_thread
    with _ahead_lock:
        if _ahead_thread is None:
            # Published once started: another thread (the plugin's opener, a fork) may
            # join it without this lock, and joining a thread not yet started raises.
            thread = threading.Thread(target=_check_plugin, name="cofactor-plugin-check")
            thread.start()
            _ahead_thread = thread


def _check_plugin() -> None:
    try:
        with toolchain.open_enzyme():
            pass
    except Exception:  # noqa: BLE001 - reported by the compile that needs the plugin
        pass


#: Whether this process has started loading the Enzyme plugin ahead (prepare_enzyme).
_enzyme_load_started = False

#: cofactor_compiler_enzyme_load_status of a load that crashed.
_LOAD_CRASHED = 2


def prepare_enzyme() -> None:
    """Start loading the Enzyme plugin into the library, once per process, while the
    program that will need it is traced (the differentiation of a function that is not a
    QNode: Enzyme differentiates its classical code): checking and loading its 9 MB (its
    relocations, its options, the first touch of its pages: 1.8 M instructions, 2-9 ms of
    a first compile under load; and the binding of every call it makes into LLVM, which a
    lazy load left to the compile: compiler/README.md, session 17) then overlaps the
    tracing instead of delaying the compile.
    The plugin is checked and opened here; the library loads it in a thread of its own
    (`cofactor_compiler_load_enzyme_async`): a Python thread made the tracing wait until it
    had started and run its Python part (0.3-1 ms, and its GIL requests interrupted the
    tracing meanwhile; session 20). The load runs beside a compile's lowering at most (the
    library waits for it before the compile's optimization, see compiler/Compiler.cpp's
    enzymeLock; COFACTOR_COMPILER_SERIAL_ENZYME_LOAD=1: the load waits for a compile under
    way and a compile for the load, as before session 19). A failure is left for the
    compile that needs the plugin to report; with COFACTOR_PRELOAD=0, or when the library
    is not used, nothing is done ahead."""
    global _enzyme_load_started
    if os.environ.get(PRELOAD_ENV, "1") == "0" or _crashed is not None:
        return
    if os.environ.get("COFACTOR_PIPELINE", "").strip().lower() == "subprocess":
        return
    with _ahead_lock:
        if _enzyme_load_started:
            return
        _enzyme_load_started = True
    try:
        lib = _library()
    except (ToolchainNotFoundError, OSError):
        return
    opener = _PluginOpener()
    try:
        fd = opener.open()
        # (else the compile that needs the plugin reports why; the library keeps a copy)
        if fd >= 0 and lib.cofactor_compiler_load_enzyme_async(fd) == 0:
            atexit.register(wait_for_enzyme_load)
    finally:
        opener.close()


def wait_for_enzyme_load() -> None:
    """Wait for the load prepare_enzyme started, if any (a fork or the interpreter's exit
    must not happen in the middle of it); note a crash of it."""
    if _enzyme_load_started and _loaded is not None:
        _note_enzyme_load(_loaded.cofactor_compiler_enzyme_load_status(1))


def _note_enzyme_load(status: int) -> None:
    global _crashed
    if status == _LOAD_CRASHED and _crashed is None:
        _crashed = "loading the Enzyme plugin crashed"


def _wait_for_plugin_check() -> None:
    thread = _ahead_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


#: Held around each call into the library. A fork waits for it, so that a child never
#: starts with the library's own lock held by a thread that does not exist there.
_compile_lock = threading.Lock()


def _before_fork() -> None:
    thread = _preload_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()
    wait_for_enzyme_load()
    _wait_for_plugin_check()
    _compile_lock.acquire()


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_compile_lock.release,
    after_in_child=_compile_lock.release,
)


def unavailable_reason() -> str | None:
    """None when the in-process library can be used, else why not (for the fallback)."""
    if _crashed is not None:
        return f"the in-process compiler crashed earlier in this process ({_crashed})"
    try:
        _library()
    except (ToolchainNotFoundError, OSError) as err:
        return str(err)
    return None


#: The identity of the Enzyme plugin the library has loaded (the pinned hash, or the
#: override's file identity), and a guard for the first load.
_plugin_lock = threading.Lock()
_loaded_plugin: str | None = None


def _plugin_identity(fd: int) -> str:
    if not os.environ.get(toolchain.TOOLS["enzyme"].env_var):
        return f"sha256:{enzyme_plugin.PATCHED_SHA256}"  # open_enzyme checked the hash
    st = os.fstat(fd)
    return f"file:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


class _PluginOpener:
    """The callback the library calls when a module needs Enzyme: the checked descriptor,
    kept open until the compile returns. An error is kept and raised after the call."""

    def __init__(self) -> None:
        self.fds: list[int] = []
        self.error: BaseException | None = None
        self.callback = _OPEN_PLUGIN(self.open)

    def open(self) -> int:
        global _loaded_plugin
        try:
            _wait_for_plugin_check()  # not hashed twice at once
            with toolchain.open_enzyme() as checked:
                fd = os.dup(checked)
            self.fds.append(fd)
            identity = _plugin_identity(fd)
            with _plugin_lock:
                if _loaded_plugin is None:
                    _loaded_plugin = identity
                elif _loaded_plugin != identity:
                    raise CompileError(
                        "another Enzyme plugin is already loaded in this process "
                        f"({_loaded_plugin}); a plugin cannot be replaced in a running "
                        "process: restart Python, or set COFACTOR_PIPELINE=subprocess",
                        stage="opt",
                    )
            return fd
        except BaseException as err:  # noqa: BLE001 - raised again after the C call
            self.error = err
            return -1

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


def _text(pointer: int | None) -> str | None:
    return None if not pointer else ctypes.string_at(pointer).decode()


def compile_native(
    mlir_text: str,
    *,
    mlir_pipeline: str,
    plain_pipeline: str,
    enzyme_pipeline: str,
    output: Path | None,
    link_args: tuple[str, ...] = (),
    runtime_link_args: tuple[str, ...] = (),
    keep_stages: bool = False,
) -> NativeResult:
    """Run the pipeline in this process; write the shared library to `output` (None: stop
    after the LLVM optimization, e.g. to get the stage texts), linked with `link_args`, and
    with `runtime_link_args` when the module calls the runtime. Raises CompileError with the
    failing stage and its diagnostics."""
    lib = _library()
    if "gradient.vjp" in mlir_text and not _enzyme_load_started:
        # (when the plugin was loaded ahead, prepare_enzyme checked it already: a second
        # thread here would only take the GIL from this one as it enters the compile)
        check_plugin_ahead()
    opener = _PluginOpener()
    all_args = (*link_args, *runtime_link_args)
    args = (ctypes.c_char_p * max(len(all_args), 1))(*(a.encode() for a in all_args))
    request = _Request(
        mlir_text.encode(),
        mlir_pipeline.encode(),
        plain_pipeline.encode(),
        enzyme_pipeline.encode(),
        opener.callback,
        None if output is None else os.fsencode(output),
        args,
        len(all_args),
        int(keep_stages),
        len(runtime_link_args),
    )
    result = _Result()
    try:
        with _compile_lock:
            status = lib.cofactor_compile(ctypes.byref(request), ctypes.byref(result))
    finally:
        opener.close()
    if _enzyme_load_started:  # (a crash of that load sends later compiles to the tools)
        _note_enzyme_load(lib.cofactor_compiler_enzyme_load_status(0))
    try:
        if status != 0:
            if opener.error is not None:
                raise opener.error
            stage = _text(result.stage) or "compile"
            if result.crashed:
                global _crashed
                _crashed = f"{stage} crashed"
                raise InProcessCrash(
                    f"{stage} crashed (in process)",
                    stage=stage,
                    tool_message=_text(result.message),
                )
            raise CompileError(
                f"{stage} failed (in process)", stage=stage, tool_message=_text(result.message)
            )
        stages = {
            name: text
            for name in ("mlir_opt", "llvmir", "llvmir_opt")
            if (text := _text(getattr(result, name))) is not None
        }
        return NativeResult(stages, dict(zip(TIMED_STAGES, result.ms, strict=True)))
    finally:
        lib.cofactor_free_result(ctypes.byref(result))
