"""`qjit`: the user-facing decorator, and the `QJIT` object it returns.

Follow one call from the top:

1. `QJIT.__call__` computes the call's *signature*: the shape and dtype of every dynamic
   argument leaf, the argument tree, and the values of static arguments.
2. The signature is looked up in the compilation cache; a miss may still reuse a binary whose
   signature the arguments promote to (int -> float64, int32 -> int64, ...; bool never:
   bool arithmetic differs from int arithmetic).
3. Otherwise `_compile` traces the function (`_trace`: tracers in, MLIR module out), hands
   the text to the compiler driver (`cofactor.compiler.compile_module`), and loads the
   library into a `Launcher`.
4. The launcher runs the entry point on the flattened arguments; results are rebuilt into the
   structure the Python function returned.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cofactor.errors import CompileError
from cofactor.ir.traced import TracedModule
from cofactor.launcher import BufferSpec, Launcher
from cofactor.options import CATALYST_DEFAULTS, check_options
from cofactor.signature import (
    _PY_SCALARS,
    AutogradArgumentError,
    CallBinder,
    Layout,
    ShapeDtype,
    StaticValues,
    _is_uint64,
    _promotes,
    annotation_specs,
    split_slots,
)
from cofactor.tracing import context, pytree
from cofactor.tracing.entry_function import trace_entry_function

__all__ = ["QJIT", "ShapeDtype", "qjit"]


@dataclass
class CompiledFunction:
    """One compiled signature: its library, launcher and how to rebuild the outputs."""

    in_specs: tuple[BufferSpec, ...]
    out_tree: Any
    out_leaves: list[Any]  # BufferSpec for computed leaves, or a static Python value
    launcher: Launcher
    library: Any  # cofactor.compiler.CompiledLibrary
    compile_seconds: float

    @property
    def mlir(self) -> str:
        """The module compiled (printed on first use when the library came from the cache)."""
        return self.library.mlir_text

    def run(self, leaves: list[Any]) -> Any:
        outs = iter(self.launcher(leaves))
        values = [next(outs) if isinstance(o, BufferSpec) else o for o in self.out_leaves]
        if self.out_tree[0] == "pennylane":
            import pennylane as qml

            return qml.pytrees.unflatten(values, self.out_tree[1])
        return pytree.unflatten(self.out_tree, values)


class QJIT:
    """A function compiled by cofactor. Call it like the original function.

    As in Catalyst, `original_function` and `user_function` are the object given to qjit (a
    QNode stays a QNode, so `qml.draw`, `qml.matrix` and
    `qml.workflow.get_compile_pipeline` accept the compiled object); `user_function` is the
    AutoGraph-converted function when `autograph=True`.
    """

    def __init__(
        self,
        fn: Callable,
        *,
        static_argnums: int | tuple[int, ...] | None = None,
        static_argnames: str | tuple[str, ...] | None = None,
        keep_intermediate: bool | str | Path = False,
        seed: int | None = None,
        target: str = "binary",
        autograph: bool = False,
        autograph_include: tuple = (),
        verbose: bool = False,
        logfile: Any = None,
        disable_assertions: bool = False,
    ) -> None:
        self.original_function = fn
        self.user_function = fn
        if autograph:
            from cofactor.autograph import run_autograph

            self.user_function = run_autograph(fn, autograph_include)
        # the Python function under a QNode: its signature, name and annotations
        py_function = getattr(fn, "func", fn)
        functools.update_wrapper(self, py_function)
        self.__name__ = getattr(py_function, "__name__", "qjit_fn")
        #: the entry point's symbol (and library name): the name as a C identifier
        self.symbol = re.sub(r"\W", "_", self.__name__).strip("_") or "qjit_fn"
        if context.is_reserved_symbol(self.symbol):  # e.g. a function named `exp`
            self.symbol = f"{self.symbol}_qjit"
        self._signature = inspect.signature(py_function)
        self._binder = _binder(self._signature, self.__name__, static_argnums, static_argnames)
        self.static_argnums = self._binder.argnums
        self.static_argnames = tuple(sorted(self._binder.argnames))
        self._quick_ok = not self._binder.has_static  # calls may take `_split`'s fast path
        self._lock = threading.RLock()  # one compilation of this function at a time
        self.keep_intermediate = keep_intermediate
        self.seed = _checked_seed(seed)
        self.disable_assertions = bool(disable_assertions)
        self.target = target
        self.verbose = verbose
        self.logfile = logfile
        self._cache: dict[Hashable, CompiledFunction] = {}
        self._quick_keys: dict[tuple, Hashable] = {}
        self._promoted: dict[Hashable, CompiledFunction] = {}  # call key -> binary it promotes to
        self._last: CompiledFunction | None = None
        self._aot_mlir: str | None = None  # target="mlir": the module traced ahead of time
        self.compile_count = 0
        annotations = (
            None if self._binder.has_static else annotation_specs(py_function, self._signature)
        )
        self._aot = False  # compiled ahead of time from annotations
        if annotations is not None:
            try:
                if target == "mlir":
                    tree = ("tuple", tuple(pytree.LEAF for _ in annotations))
                    self._aot_mlir = self._trace(tree, annotations, ())[0]
                else:
                    self._compile_for(annotations)
                    self._aot = True
            except CompileError as err:
                # as Catalyst: a program that does not compile for its declared signature
                # (or, without parameters, its only one) is an error where it is decorated
                err.add_note(
                    f"(raised while compiling {self.__name__} ahead of time for the signature "
                    "its annotations declare, as Catalyst does)"
                )
                raise

    # -- calling ---------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if context.is_tracing():  # nested qjit: inline the Python function
            return self.user_function(*args, **kwargs)
        try:
            leaves, key = self._split(args, kwargs)
        except AutogradArgumentError:  # qml.grad / a PennyLane optimizer outside qjit
            from cofactor.api_extensions.autograd_bridge import call_under_autograd

            return call_under_autograd(self, args, kwargs)
        compiled = self._cache.get(key) or self._promoted.get(key)
        if compiled is None:
            compiled = self._lookup_or_compile(key)
        return compiled.run(leaves)

    def _lookup_or_compile(self, key: Hashable) -> CompiledFunction:
        # Threads that call a new signature at once compile it once; the others wait.
        with self._lock:
            compiled = self._cache.get(key) or self._promoted.get(key)
            if compiled is not None:
                return compiled
            compiled = self._find_promotable(key)
            if compiled is not None:
                self._promoted[key] = compiled
                return compiled
            if self._aot:
                warnings.warn(
                    f"Provided arguments did not match the declared signature of "
                    f"{self.__name__}, recompiling...",
                    UserWarning,
                    stacklevel=3,
                )
            return self._compile_for_key(key)

    def _split(self, args: tuple, kwargs: dict) -> tuple[list[Any], Hashable]:
        """Dynamic leaves of the call, and its cache key (layout, tree, leaf specs, static
        values)."""
        # Fast path: only Python scalars and numpy arrays, by position, nothing static -> the
        # key depends only on their types / shapes / dtypes, remembered from an earlier call.
        quick = None
        if not kwargs and self._quick_ok:
            quick = tuple(
                a.__class__ if a.__class__ in _PY_SCALARS
                else (a.shape, a.dtype) if a.__class__ is np.ndarray
                else None
                for a in args
            )  # fmt: skip
            key = self._quick_keys.get(quick)
            if key is not None:
                return list(args), key
        try:
            layout, values = self._binder.bind(args, kwargs)
        except TypeError as err:
            if "shots" in kwargs and "shots" not in self._signature.parameters:
                # PennyLane's deprecated call-time shots (`circuit(x, shots=100)`)
                raise TypeError(
                    f"{err} (a compiled QNode takes no shots at call time: set them with "
                    "qml.set_shots(circuit, shots=...) or on the device)"
                ) from None
            raise
        leaves, tree, specs, static = split_slots(
            layout, values, self.__name__, self._binder.pos_names
        )
        key = (layout, tree, specs, static)
        # (uint64 arrays keep taking the slow path: their values are checked there)
        if quick is not None and None not in quick and not any(_is_uint64(a) for a in args):
            self._quick_keys[quick] = key
        return leaves, key

    def _find_promotable(self, key: Any) -> CompiledFunction | None:
        layout, tree, specs, static = key
        for (layout2, t2, specs2, static2), compiled in self._cache.items():
            if layout2 != layout or t2 != tree or len(specs2) != len(specs) or static2 != static:
                continue
            if all(_promotes(a, b) for a, b in zip(specs, specs2, strict=True)):
                return compiled
        return None

    def _compile_for(self, specs: tuple[BufferSpec, ...]) -> CompiledFunction:
        tree = ("tuple", tuple(pytree.LEAF for _ in specs))
        return self._compile_for_key((Layout.positional(len(specs)), tree, specs, StaticValues(())))

    def _compile_for_key(self, key: Any) -> CompiledFunction:
        compiled = self._compile(*key)
        self._cache[key] = compiled
        self._last = compiled
        return compiled

    # -- compiling -------------------------------------------------------------------
    def _compile(
        self, layout: Layout, tree: Any, specs: tuple[BufferSpec, ...], static: StaticValues
    ) -> CompiledFunction:
        start = time.perf_counter()
        module, out_tree, out_leaves, checks_runtime, has_callbacks = self._trace_module(
            tree, specs, static, layout
        )
        traced = time.perf_counter()
        library = _compile_module(module, self.symbol, self.keep_intermediate)
        if has_callbacks:
            from cofactor.api_extensions.callbacks import install_trampoline

            install_trampoline()
        if self.keep_intermediate:
            folder = (
                Path.cwd() / "cofactor_intermediate" / self.symbol
                if self.keep_intermediate is True
                else Path(self.keep_intermediate)
            )
            print(f"cofactor: intermediate stages of {self.__name__} written to {folder}")
        out_specs = [o for o in out_leaves if isinstance(o, BufferSpec)]
        launcher = Launcher(
            library.so_path,
            self.symbol,
            specs,
            out_specs,
            checks_runtime or has_callbacks,
            callbacks=has_callbacks,
            seeded=self.seed is not None and checks_runtime,
        )
        self.compile_count += 1
        if self.verbose:
            end = time.perf_counter()
            print(
                f"cofactor: compiled {self.__name__} for {_describe(layout, specs, static)}: "
                f"traced in {traced - start:.3f} s, compiled to {library.so_path} in "
                f"{end - traced:.3f} s",
                file=self.logfile or sys.stderr,
            )
        return CompiledFunction(
            specs, out_tree, out_leaves, launcher, library, time.perf_counter() - start
        )

    def _trace(
        self,
        tree: Any,
        specs: tuple[BufferSpec, ...],
        static: StaticValues | tuple,
        layout: Layout | None = None,
    ) -> tuple[str, Any, list[Any], bool]:
        """Trace the Python function on abstract arguments; returns the MLIR module text,
        the output tree, the output leaves and whether the compiled code reports errors
        through the runtime's error slot (quantum ops, runtime checks). Without a layout,
        the arguments are all positional, static at `static_argnums`."""
        module, *rest = self._trace_module(tree, specs, static, layout)[:4]
        return (module.text(), *rest)

    def _trace_module(
        self,
        tree: Any,
        specs: tuple[BufferSpec, ...],
        static: StaticValues | tuple,
        layout: Layout | None = None,
    ) -> tuple[TracedModule, Any, list[Any], bool, bool]:
        """`_trace`, with the module not printed yet (`TracedModule`), and whether the
        compiled code calls Python callbacks. (Returned rather than kept on the object: two
        threads may trace new signatures at once.)"""
        if isinstance(static, StaticValues):
            static = static.values
        if layout is None:
            layout = Layout.positional(len(static) + len(tree[1]), self.static_argnums)
        return trace_entry_function(
            self.user_function,
            self.symbol,
            seed=self.seed,
            disable_assertions=self.disable_assertions,
            tree=tree,
            specs=specs,
            static=static,
            layout=layout,
        )

    # -- inspection ------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # Attributes of the object given to qjit (a QNode's device, diff_method,
        # execute_kwargs), which Catalyst's QJIT also exposes.
        fn = self.__dict__.get("original_function")
        if fn is None or name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(fn, name)
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__!r} object (and the {type(fn).__name__} it compiles) "
                f"has no attribute {name!r}"
            ) from None

    @property
    def mlir(self) -> str | None:
        """The MLIR module the frontend emitted (for the most recent compilation, or traced
        ahead of time with `target="mlir"`)."""
        return self._last.mlir if self._last else self._aot_mlir

    @property
    def mlir_opt(self) -> str | None:
        """The module after cofactor-opt: LLVM dialect with runtime calls."""
        return self._last.library.stage("mlir_opt") if self._last else None

    @property
    def llvmir(self) -> str | None:
        """The LLVM IR given to opt/llc."""
        return self._last.library.stage("llvmir") if self._last else None

    def __repr__(self) -> str:
        return f"<cofactor.QJIT {self.__name__}, {len(self._cache)} compiled signature(s)>"


def _checked_seed(seed: Any) -> int | None:
    """Catalyst's check: a seed is an unsigned 32-bit integer (before, 1.5 was truncated to 1
    and a bool or out-of-range value accepted without a word)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**32:
        raise ValueError(
            f"Seed must be an unsigned 32-bit integer! Got {seed!r}: give qjit(seed=...) an "
            "int from 0 to 2**32 - 1"
        )
    return int(seed)


def _binder(signature: inspect.Signature, name: str, argnums: Any, argnames: Any) -> CallBinder:
    """The call binder; invalid `static_argnums` (a float, a position beyond the parameters)
    are an error when the function is called, as in Catalyst, so that a module defining
    such a function still imports (`static_argnames` errors stay errors here)."""
    try:
        return CallBinder(signature, name, argnums, argnames)
    except (TypeError, CompileError) as err:
        error = err  # (`err` is unbound when the except block ends)
        binder = CallBinder(signature, name, None, argnames)  # (raises a bad argnames here)
        binder.has_static = True  # no fast path: every call goes through `bind`

        def refuse(args: tuple, kwargs: dict[str, Any]) -> Any:
            raise error.with_traceback(None)

        binder.bind = refuse  # type: ignore[method-assign]
        return binder


def _compile_module(module: TracedModule, name: str, keep_intermediate: Any) -> Any:
    """The driver (keyed by the module's fingerprint: printed only when not in the cache),
    with the gradient passes' refusals (a differentiated function without a gradient rule)
    raised as DifferentiableCompileError."""
    from cofactor.compiler import cache_enabled, compile_module
    from cofactor.errors import DifferentiableCompileError

    try:
        return compile_module(
            module.text,
            name=name,
            keep_intermediate=keep_intermediate,
            fingerprint=module.fingerprint if cache_enabled() else None,
        )
    except DifferentiableCompileError:
        raise
    except CompileError as err:
        if err.stage == "cofactor-opt" and "differentiated" in (err.tool_message or ""):
            raise DifferentiableCompileError(
                "the gradient passes rejected the program",
                stage=err.stage,
                tool_message=err.tool_message,
            ) from None
        raise


def _describe(layout: Layout, specs: tuple[BufferSpec, ...], static: StaticValues) -> str:
    """A short text of one compiled signature (for `verbose=True`)."""
    leaves = ", ".join(f"{s.dtype}{list(s.shape)}" for s in specs)
    text = f"({leaves})"
    if layout.kw_names:
        text += f" keywords {list(layout.kw_names)}"
    if static.values:
        text += f" static {static.values!r}"
    return text


_TARGETS = ("binary", "mlir", "llvmir")


def qjit(
    fn: Callable | None = None,
    *,
    autograph: bool = False,
    autograph_include: tuple = (),
    target: str = "binary",
    keep_intermediate: bool | str | Path = False,
    verbose: bool = False,
    logfile: Any = None,
    static_argnums: int | tuple[int, ...] | None = None,
    static_argnames: str | tuple[str, ...] | None = None,
    seed: int | None = None,
    capture: bool | str = "global",
    **catalyst_options: Any,
) -> QJIT | Callable[[Callable], QJIT]:
    """Compile a hybrid quantum-classical function just in time (Catalyst-compatible).

    Args:
        fn: the function (or QNode) to compile; omit it to use `@qjit(...)` with options.
        autograph: convert Python `if`/`for`/`while` on traced values into cofactor's
            control flow (`cond`, `for_loop`, `while_loop`), as Catalyst does.
        autograph_include: modules whose functions AutoGraph converts too.
        target: "binary" (the default); "mlir" traces an annotated function ahead of time
            without compiling it (see `.mlir`); "llvmir" compiles it ahead of time like
            "binary". A call always compiles and runs.
        keep_intermediate: write the text of every compilation stage to a folder
            (True: ./cofactor_intermediate/<name>/, or a path).
        verbose: print each compilation (signature, times, library) to `logfile`
            (default: stderr).
        static_argnums: positions (in the call; a `*args` tuple counts position by position)
            of arguments whose (hashable) values are baked into the compiled code; a new value
            compiles a new version.
        static_argnames: names of parameters that are static, whether passed by position or
            by keyword.
        seed: seed of the runtime's random number generator (sampling, mid-circuit
            measurements), making shot-based results reproducible.
        capture: False or "global" (the default; cofactor traces without PennyLane's program
            capture); True is refused.

    `disable_assertions=True` compiles no `debug_assert` check. Other Catalyst options
    (`async_qnodes`, `use_nameloc`, `pipelines`,
    `circuit_transform_pipeline`, `pass_plugins`, `dialect_plugins`, `skip_preprocess`,
    `collect_decomp_rules`) are accepted at their default values; where cofactor cannot
    honour another value, a NotImplementedError names the option. `abstracted_axes` is
    accepted; each new shape compiles a new version (the axes are static in compiled code).
    Parameters a call leaves out keep their Python default values (they are not traced).
    """
    unknown = sorted(set(catalyst_options) - set(CATALYST_DEFAULTS))
    if unknown:
        raise TypeError(
            f"qjit() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
            f"cofactor's qjit takes Catalyst's options: {', '.join(_ALL_OPTIONS)}"
        )
    check_options(catalyst_options)
    if target not in _TARGETS:
        raise ValueError(
            f"qjit target={target!r} is not supported by cofactor; use one of "
            f"{', '.join(map(repr, _TARGETS))}"
        )
    if capture is True:
        raise NotImplementedError(
            "qjit(capture=True): PennyLane's program capture is not supported by cofactor, "
            "which traces the Python function itself; use capture=False or the default "
            '"global" (with qml.capture disabled)'
        )
    if capture not in (False, "global"):
        raise ValueError(f'qjit capture={capture!r}: expected True, False or "global"')
    if capture == "global":
        import pennylane as qml

        if qml.capture.enabled():
            raise NotImplementedError(
                "PennyLane's program capture is enabled (qml.capture.enable()), which cofactor "
                "does not support; call qml.capture.disable() or pass qjit(capture=False)"
            )
    if autograph_include and not autograph:
        raise CompileError(
            "In order for 'autograph_include' to work, 'autograph' must be set to True"
        )
    options = {
        "autograph": autograph,
        "autograph_include": tuple(autograph_include),
        "target": target,
        "keep_intermediate": keep_intermediate,
        "verbose": verbose,
        "logfile": logfile,
        "static_argnums": static_argnums,
        "static_argnames": static_argnames,
        "seed": seed,
        "disable_assertions": catalyst_options.get("disable_assertions", False),
    }
    if fn is None:
        return functools.partial(_make_qjit, **options)
    return _make_qjit(fn, **options)


def _make_qjit(fn: Callable, **options: Any) -> QJIT:
    return QJIT(fn, **options)


_ALL_OPTIONS = (
    "autograph",
    "autograph_include",
    "target",
    "keep_intermediate",
    "verbose",
    "logfile",
    "static_argnums",
    "static_argnames",
    "seed",
    "capture",
    *CATALYST_DEFAULTS,
)
