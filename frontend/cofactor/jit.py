"""`qjit`: the user-facing decorator, and the `QJIT` object it returns.

Follow one call from the top:

1. `QJIT.__call__` computes the call's *signature*: the shape and dtype of every dynamic
   argument leaf, the argument tree, and the values of static arguments.
2. The signature is looked up in the compilation cache; a miss may still reuse a binary whose
   signature the arguments promote to (int -> float64, bool -> int64, ...).
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
import threading
import time
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Block, Region

from cofactor.errors import CompileError
from cofactor.ir.builder import memref_type
from cofactor.launcher import BufferSpec, Launcher
from cofactor.tracing import context, interrupts, pytree
from cofactor.tracing.numpy_rules import as_tracer, store_tracer
from cofactor.tracing.tracer import Tracer, normalize_dtype

_PY_SCALARS = {
    float: np.dtype(np.float64),
    int: np.dtype(np.int64),
    bool: np.dtype(np.bool_),
    complex: np.dtype(np.complex128),
}


@dataclass(frozen=True)
class ShapeDtype:
    """An abstract array argument for ahead-of-time compilation: `x: ShapeDtype((3,), float)`.

    Any object with `.shape` and `.dtype` (e.g. `jax.ShapeDtypeStruct`) works the same way.
    """

    shape: tuple[int, ...]
    dtype: Any = np.float64


def _leaf_spec(x: Any, where: str) -> BufferSpec:
    """The BufferSpec of one dynamic argument leaf (raises a CompileError for bad input)."""
    dtype = _PY_SCALARS.get(type(x))
    if dtype is not None:
        if dtype is _INT:
            _check_int64(x, where)
        return BufferSpec((), dtype)
    if isinstance(x, np.ndarray | np.generic):
        if x.dtype.kind not in "biufc":
            raise CompileError(
                f"{where}: arrays of dtype {x.dtype} cannot be compiled; expected numbers "
                "(bool, int, float or complex)"
            )
        if x.dtype == np.uint64 and x.size and np.max(x) > _INT64_MAX:
            raise OverflowError(
                f"{where}: uint64 value {np.max(x)} does not fit in int64, the integer type "
                "of compiled code (convert it to float, or keep it below 2**63)"
            )
        return BufferSpec(tuple(x.shape), normalize_dtype(x.dtype))
    if isinstance(x, list | tuple):
        arr = np.asarray(x)
        if arr.dtype == object and all(type(v) is int for v in arr.flat):
            _check_int64(max(arr.flat, key=abs), where)
        return _leaf_spec(arr, where)
    raise CompileError(
        f"{where}: cannot compile with an argument of type {type(x).__name__}; expected a "
        "number, a numpy array, or a tuple/list/dict of them (or mark it static with "
        "static_argnums)"
    )


_INT = _PY_SCALARS[int]
_INT64_MAX = 2**63 - 1


def _check_int64(value: int, where: str) -> None:
    """OverflowError for a Python int outside int64, as `np.int64(value)` raises."""
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise OverflowError(
            f"{where}: Python int too large to convert to C long ({value} is outside the "
            "int64 range of compiled code)"
        )


def _is_uint64(x: Any) -> bool:
    return getattr(x, "dtype", None) == np.uint64


class StaticValues:
    """The static arguments of a call, as part of a cache key.

    Python's `==` would make a NaN argument miss the cache on every call (NaN != NaN) and
    would let -0.0 reuse code compiled for 0.0 (they are equal, but `1 / x` differs):
    the key compares a normalised form instead, in which NaNs are equal and the sign of a
    zero counts."""

    __slots__ = ("values", "_norm", "_hash")

    def __init__(self, values: tuple) -> None:
        self.values = values
        self._norm = _normalise_static(values)
        self._hash = hash(self._norm)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StaticValues) and self._norm == other._norm

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"StaticValues({self.values!r})"


_NAN_KEY = object()
_ZERO_KEY = object()


def _normalise_static(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        if value != value:
            return (_NAN_KEY, type(value))
        if value == 0:
            return (_ZERO_KEY, type(value), bool(np.signbit(value)))
        return value
    if isinstance(value, complex | np.complexfloating):
        return (type(value), _normalise_static(value.real), _normalise_static(value.imag))
    if type(value) is tuple:
        return tuple(_normalise_static(v) for v in value)
    return value


def _is_array_list(x: Any) -> bool:
    """Lists/tuples of plain numbers are arrays (as in `f([0.2, 0.3])`), not pytrees."""
    if not isinstance(x, list | tuple) or not x:
        return False
    return all(type(v) in _PY_SCALARS or isinstance(v, np.generic) for v in x) or all(
        _is_array_list(v) for v in x
    )


def _promotes(src: BufferSpec, dst: BufferSpec) -> bool:
    return src.shape == dst.shape and np.can_cast(src.dtype, dst.dtype, "safe")


@dataclass
class CompiledFunction:
    """One compiled signature: its library, launcher and how to rebuild the outputs."""

    in_specs: tuple[BufferSpec, ...]
    out_tree: Any
    out_leaves: list[Any]  # BufferSpec for computed leaves, or a static Python value
    launcher: Launcher
    library: Any
    mlir: str
    compile_seconds: float

    def run(self, leaves: list[Any]) -> Any:
        outs = iter(self.launcher(leaves))
        values = [next(outs) if isinstance(o, BufferSpec) else o for o in self.out_leaves]
        return pytree.unflatten(self.out_tree, values)


class QJIT:
    """A function compiled by cofactor. Call it like the original function."""

    def __init__(
        self,
        fn: Callable,
        *,
        static_argnums: int | tuple[int, ...] | None = None,
        keep_intermediate: bool | str | Path = False,
        seed: int | None = None,
    ) -> None:
        self.original_function = fn
        self.user_function = getattr(fn, "func", fn)  # a QNode's quantum function
        functools.update_wrapper(self, self.user_function)
        self.__name__ = getattr(self.user_function, "__name__", "qjit_fn")
        #: the entry point's symbol (and library name): the name as a C identifier
        self.symbol = re.sub(r"\W", "_", self.__name__).strip("_") or "qjit_fn"
        self._signature = inspect.signature(self.user_function)
        params = list(self._signature.parameters.values())
        self._num_params = len(params)
        # Keyword-only parameters (and a **kwargs dict) are passed after the positional
        # ones, in signature order, and traced like them; calls with any of them go
        # through `_bind`.
        self._kw_names = tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY)
        self._var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
        self._n_tail = len(self._kw_names) + self._var_kw
        self._fast_arity = -1 if self._n_tail else self._num_params
        self._lock = threading.RLock()  # one compilation of this function at a time
        self.static_argnums = self._check_static_argnums(static_argnums)
        self.keep_intermediate = keep_intermediate
        self.seed = seed
        self._cache: dict[Hashable, CompiledFunction] = {}
        self._quick_keys: dict[tuple, Hashable] = {}
        self._promoted: dict[Hashable, CompiledFunction] = {}  # call key -> binary it promotes to
        self._last: CompiledFunction | None = None
        self.compile_count = 0
        annotations = self._abstract_arguments()
        self._aot = False  # compiled ahead of time from annotations
        if annotations is not None:
            try:
                self._compile_for(annotations)
                self._aot = True
            except CompileError as err:
                warnings.warn(
                    f"AOT compilation of {self.__name__} failed; it will be compiled at the "
                    f"first call instead: {err}",
                    UserWarning,
                    stacklevel=2,
                )

    # -- configuration ---------------------------------------------------------------
    def _check_static_argnums(self, static_argnums: Any) -> tuple[int, ...]:
        if static_argnums is None:
            return ()
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        for n in nums:
            if not isinstance(n, int) or isinstance(n, bool):
                raise TypeError(
                    f"The `static_argnums` argument to qjit must be an int or a sequence of "
                    f"ints, got {static_argnums!r}"
                )
            if not -self._num_params <= n < self._num_params:
                raise CompileError(
                    f"static_argnums={n} is beyond the valid range: {self.__name__} takes "
                    f"{self._num_params} argument(s)"
                )
        return tuple(sorted(n % self._num_params for n in nums))

    def _abstract_arguments(self) -> tuple | None:
        """Abstract arguments from type annotations (`x: float`, `y: ShapeDtype(...)`), if
        every parameter has one and nothing is static; None otherwise (JIT mode)."""
        if self.static_argnums or not self._num_params:
            return None
        kinds = {p.kind for p in self._signature.parameters.values()}
        if inspect.Parameter.VAR_POSITIONAL in kinds or inspect.Parameter.VAR_KEYWORD in kinds:
            return None
        try:
            hints = inspect.get_annotations(self.user_function, eval_str=True)
        except Exception:
            return None
        specs = []
        for name in self._signature.parameters:
            ann = hints.get(name)
            if ann in _PY_SCALARS:
                specs.append(BufferSpec((), _PY_SCALARS[ann]))
            elif hasattr(ann, "shape") and hasattr(ann, "dtype"):
                specs.append(BufferSpec(tuple(ann.shape), normalize_dtype(ann.dtype)))
            else:
                return None
        return tuple(specs)

    # -- calling ---------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if context.is_tracing():  # nested qjit: inline the Python function
            return self.original_function(*args, **kwargs)
        if kwargs or len(args) != self._fast_arity:
            args = self._bind(args, kwargs)
        leaves, key = self._split(args)
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

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        """All arguments in signature order: the positional ones (with *args expanded),
        then the keyword-only ones, then the **kwargs dict (defaults applied)."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{self.__name__}: {err}") from None
        bound.apply_defaults()
        if not self._n_tail:
            return bound.args
        tail = [bound.arguments[name] for name in self._kw_names]
        if self._var_kw:
            var_kw = next(
                p.name for p in self._signature.parameters.values() if p.kind is p.VAR_KEYWORD
            )
            tail.append(dict(bound.arguments.get(var_kw, {})))
        return (*bound.args, *tail)

    def _call_traced(self, args: list[Any]) -> Any:
        """Call the Python function on the (traced) arguments in `_bind`'s order."""
        if not self._n_tail:
            return self.original_function(*args)
        split = len(args) - self._n_tail
        kw = dict(zip(self._kw_names, args[split:], strict=False))
        if self._var_kw:
            kw.update(args[-1])
        return self.original_function(*args[:split], **kw)

    def _split(self, args: tuple) -> tuple[list[Any], Hashable]:
        """Dynamic leaves of the call, and its cache key (tree, leaf specs, static values)."""
        # Fast path: only Python scalars and numpy arrays, nothing static -> the key depends
        # only on their types / shapes / dtypes, remembered from an earlier call.
        quick = None
        if not self.static_argnums:
            quick = tuple(
                a.__class__ if a.__class__ in _PY_SCALARS
                else (a.shape, a.dtype) if a.__class__ is np.ndarray
                else None
                for a in args
            )  # fmt: skip
            key = self._quick_keys.get(quick)
            if key is not None:
                return list(args), key
        leaves, key = self._split_slow(args)
        # (uint64 arrays keep taking the slow path: their values are checked there)
        if quick is not None and None not in quick and not any(_is_uint64(a) for a in args):
            self._quick_keys[quick] = key
        return leaves, key

    def _split_slow(self, args: tuple) -> tuple[list[Any], Hashable]:
        static = []
        dynamic = []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                try:
                    hash(a)
                except TypeError:
                    raise CompileError(
                        f"static argument {i} of {self.__name__} must be hashable, got "
                        f"{type(a).__name__}"
                    ) from None
                static.append(a)
            else:
                dynamic.append(a)
        leaves: list[Any] = []
        subtrees = []
        for a in dynamic:
            sub_leaves, sub_tree = pytree.flatten(a, is_leaf=_is_array_list)
            leaves += sub_leaves
            subtrees.append(sub_tree)
        tree = ("tuple", tuple(subtrees))
        specs = tuple(
            _leaf_spec(x, f"{self.__name__}: argument leaf {i}") for i, x in enumerate(leaves)
        )
        return leaves, (tree, specs, StaticValues(tuple(static)))

    def _find_promotable(self, key: Any) -> CompiledFunction | None:
        tree, specs, static = key
        for (t2, specs2, static2), compiled in self._cache.items():
            if t2 != tree or len(specs2) != len(specs) or static2 != static:
                continue
            if all(_promotes(a, b) for a, b in zip(specs, specs2, strict=True)):
                return compiled
        return None

    def _compile_for(self, specs: tuple[BufferSpec, ...]) -> CompiledFunction:
        tree = ("tuple", tuple(pytree.LEAF for _ in specs))
        return self._compile_for_key((tree, specs, StaticValues(())))

    def _compile_for_key(self, key: Any) -> CompiledFunction:
        compiled = self._compile(*key)
        self._cache[key] = compiled
        self._last = compiled
        return compiled

    # -- compiling -------------------------------------------------------------------
    def _compile(
        self, tree: Any, specs: tuple[BufferSpec, ...], static: StaticValues
    ) -> CompiledFunction:
        start = time.perf_counter()
        mlir, out_tree, out_leaves, checks_runtime, has_callbacks = self._trace_module(
            tree, specs, static
        )
        library = _compile_module(mlir, self.symbol, self.keep_intermediate)
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
        )
        self.compile_count += 1
        return CompiledFunction(
            specs, out_tree, out_leaves, launcher, library, mlir, time.perf_counter() - start
        )

    def _trace(
        self, tree: Any, specs: tuple[BufferSpec, ...], static: StaticValues | tuple
    ) -> tuple[str, Any, list[Any], bool]:
        """Trace the Python function on abstract arguments; returns the MLIR module text,
        the output tree, the output leaves and whether the compiled code reports errors
        through the runtime's error slot (quantum ops, runtime checks)."""
        return self._trace_module(tree, specs, static)[:4]

    def _trace_module(
        self, tree: Any, specs: tuple[BufferSpec, ...], static: StaticValues | tuple
    ) -> tuple[str, Any, list[Any], bool, bool]:
        """`_trace`, and whether the compiled code calls Python callbacks. (Returned rather
        than kept on the object: two threads may trace new signatures at once.)"""
        from cofactor.tracing.qnode import capture_qnode_calls

        if isinstance(static, StaticValues):
            static = static.values
        ctx = context.TraceContext(self.symbol, seed=self.seed)
        b = ctx.builder
        in_types = [memref_type(s.shape, s.dtype) for s in specs]
        block = Block(arg_types=in_types)
        with context.tracing(ctx), capture_qnode_calls():
            b.push(block)
            ctx.function_entries.append(block)
            tracers = [
                Tracer.from_memref(arg, s.shape, s.dtype, anchor=block)
                for arg, s in zip(block.args, specs, strict=True)
            ]
            dynamic = iter(pytree.unflatten(tree, tracers))
            static_iter = iter(static)
            args = [
                next(static_iter) if i in self.static_argnums else next(dynamic)
                for i in range(len(static) + len(tree[1]))
            ]
            result = self._call_traced(args)
            # every result leaf (traced or constant) is written to an out-parameter memref
            out_values, out_tree = pytree.flatten(result)
            out_tracers = [as_tracer(v) for v in out_values]
            out_leaves: list[Any] = [BufferSpec(t.shape, t.dtype) for t in out_tracers]
            out_args = [
                block.insert_arg(memref_type(t.shape, t.dtype), len(block.args))
                for t in out_tracers
            ]
            for t, ref in zip(out_tracers, out_args, strict=True):
                store_tracer(t, ref)
            ctx.finish_function(block)
            b.pop()
            if ctx.interrupt_checks:
                interrupts.arm_on_entry(ctx, block)
        out_types = [memref_type(s.shape, s.dtype) for s in out_leaves]
        entry = func.FuncOp(self.symbol, ([*in_types, *out_types], []), Region(block))
        entry.attributes["llvm.emit_c_interface"] = UnitAttr()
        module = ModuleOp([*b.module_ops, entry])
        text = str(module)
        helpers = [*ctx.text_helpers, *([interrupts.HELPERS] if ctx.interrupt_checks else [])]
        if helpers:  # splice them in before the module's closing brace
            text = text[: text.rindex("}")] + "".join(helpers) + "}\n"
        checks = ctx.has_quantum or ctx.runtime_checks
        return text, out_tree, out_leaves, checks, ctx.has_callbacks

    # -- inspection ------------------------------------------------------------------
    @property
    def mlir(self) -> str | None:
        """The MLIR module the frontend emitted (for the most recent compilation)."""
        return self._last.mlir if self._last else None

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


def _compile_module(mlir: str, name: str, keep_intermediate: Any) -> Any:
    """The driver, with the gradient passes' refusals (a differentiated function without a
    gradient rule) raised as DifferentiableCompileError."""
    from cofactor.compiler import compile_module
    from cofactor.errors import DifferentiableCompileError

    try:
        return compile_module(mlir, name=name, keep_intermediate=keep_intermediate)
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


def qjit(
    fn: Callable | None = None,
    *,
    static_argnums: int | tuple[int, ...] | None = None,
    keep_intermediate: bool | str | Path = False,
    seed: int | None = None,
) -> QJIT | Callable[[Callable], QJIT]:
    """Compile a hybrid quantum-classical function just in time (Catalyst-compatible).

    Args:
        fn: the function (or QNode) to compile; omit it to use `@qjit(...)` with options.
        static_argnums: positions of arguments whose (hashable) values are baked into the
            compiled code; a new value compiles a new version.
        keep_intermediate: write the text of every compilation stage to a folder
            (True: ./cofactor_intermediate/<name>/, or a path).
        seed: seed of the runtime's random number generator (sampling, mid-circuit
            measurements), making shot-based results reproducible.
    """
    if fn is None:
        return functools.partial(
            qjit, static_argnums=static_argnums, keep_intermediate=keep_intermediate, seed=seed
        )
    return QJIT(fn, static_argnums=static_argnums, keep_intermediate=keep_intermediate, seed=seed)
