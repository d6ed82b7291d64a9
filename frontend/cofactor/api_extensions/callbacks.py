"""Python callbacks from compiled code: `pure_callback` (with optional custom VJP) and the
side-effect callbacks behind `cofactor.debug.callback`.

While tracing, a call of a callback emits a body-less declaration (docs/gradients.md)

    func.func private @cb_<name>(ins..., outs...) attributes {cofactor.callback_id = K : i64,
        cofactor.num_inputs = N : i64 [, cofactor.callback_has_vjp]}

and a `func.call` to it; `cofactor-opt --cofactor-custom-gradients` gives it a body that
calls the runtime's trampoline `cf_rt_callback(K, kind, n, args)`. `K` indexes the
process-wide registry below (one entry per callback and argument signature), which knows
the shapes and dtypes of the arguments. The trampoline (one ctypes `CFUNCTYPE`, installed
once in the runtime) views the data pointers as numpy arrays, calls the Python function and
writes its results back after checking their shape and dtype.

Errors in Python (an exception in the callback, a result of the wrong shape) never cross
into C: the trampoline returns a failure status, keeps the exception, writes NaN/0 into the
outputs and refuses every later callback of the same run; the launcher raises the exception
when the compiled call returns (`raise_pending`).

A custom VJP (`@cb.fwd`, `@cb.bwd`, as in Catalyst): `fwd(*args) -> (outputs, residuals)`,
`bwd(residuals, cotangents) -> tuple of input cotangents`. The compiled reverse pass calls
the trampoline with the inputs (the runtime keeps a copy of them on its tape from the
forward pass) and the output cotangents; the residuals are recomputed there by running
`fwd` on those inputs, so nothing is kept in Python between the two passes.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, StringAttr, UnitAttr, i64

from cofactor.errors import (
    CompileError,
    CompileTypeError,
    DifferentiableCompileError,
    RuntimeExecutionError,
)
from cofactor.ir.builder import memref_type
from cofactor.launcher import BufferSpec
from cofactor.tracing import context, pytree
from cofactor.tracing.numpy_rules import as_tracer, in_memory
from cofactor.tracing.tracer import COMPLEX, Tracer, normalize_dtype

_PY_TYPES = {float: np.float64, int: np.int64, bool: np.bool_, complex: np.complex128}


# ----------------------------------------------------------------------------------------
# result types
# ----------------------------------------------------------------------------------------
def _spec_of(t: Any, what: str) -> BufferSpec:
    """A BufferSpec from a result-type description: float/int/bool/complex, a numpy
    dtype, a ShapeDtype (or anything with .shape and .dtype), or an example array."""
    if isinstance(t, type) and t in _PY_TYPES:
        return BufferSpec((), np.dtype(_PY_TYPES[t]))
    if isinstance(t, type) and issubclass(t, np.generic):
        return BufferSpec((), normalize_dtype(t))
    if isinstance(t, np.dtype):
        return BufferSpec((), normalize_dtype(t))
    if isinstance(t, bool | int | float | complex):
        return BufferSpec((), normalize_dtype(np.asarray(t).dtype))
    if hasattr(t, "shape") and hasattr(t, "dtype"):
        return BufferSpec(tuple(int(n) for n in t.shape), normalize_dtype(t.dtype))
    raise CompileError(
        f"{what}: cannot use {t!r} as a result type; give float, int, bool, complex, a "
        "cofactor.ShapeDtype(shape, dtype), an example numpy array, or a tuple of them"
    )


def _result_specs(result_type: Any, what: str) -> tuple[Any, list[BufferSpec]]:
    """(output tree, leaf specs) of a result type (a tuple/list means several results)."""
    leaves, tree = pytree.flatten(
        result_type, is_leaf=lambda x: not isinstance(x, tuple | list | dict)
    )
    return tree, [_spec_of(leaf, what) for leaf in leaves]


# ----------------------------------------------------------------------------------------
# the registry and the trampoline
# ----------------------------------------------------------------------------------------
@dataclass
class _Entry:
    """One callback function as compiled code sees it."""

    callback: Any  # PureCallback or DebugCallback
    in_specs: tuple[BufferSpec, ...]
    in_tree: Any
    out_specs: tuple[BufferSpec, ...]
    out_tree: Any
    in_circuit: bool = False  # called from inside a circuit function (see _device_active)


_REGISTRY: dict[int, _Entry] = {}
_IDS: dict[Any, int] = {}
_LOCK = threading.Lock()
_STATE = threading.local()  # .pending: the exception of the current run, if any

TRAMPOLINE_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)
)


def _register(key: Any, entry: _Entry) -> int:
    with _LOCK:
        if key in _IDS:
            entry.in_circuit |= _REGISTRY[_IDS[key]].in_circuit
            _REGISTRY[_IDS[key]] = entry
            return _IDS[key]
        cid = len(_REGISTRY) + 1
        _REGISTRY[cid] = entry
        _IDS[key] = cid
        return cid


def _view(address: int, spec: BufferSpec) -> np.ndarray:
    """A numpy array over the compiled code's buffer (no copy)."""
    shape = spec.memref_shape
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    ctype = {
        np.dtype(np.float64): ctypes.c_double,
        np.dtype(np.complex128): ctypes.c_double,
        np.dtype(np.int64): ctypes.c_int64,
        np.dtype(np.bool_): ctypes.c_bool,
    }[spec.dtype]
    flat = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctype)), (n,))
    if spec.dtype == COMPLEX:
        return flat.view(np.complex128).reshape(spec.shape)
    return flat.reshape(spec.shape)


def _write(dst: np.ndarray, value: Any, spec: BufferSpec, what: str) -> None:
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind not in "biufc":
        raise TypeError(f"{what} is {value!r}, not a number or an array of numbers")
    if arr.shape != spec.shape:
        raise TypeError(
            f"{what} has shape {arr.shape}, but the declared result type has shape {spec.shape}"
        )
    if not np.can_cast(arr.dtype, spec.dtype, "same_kind"):
        raise TypeError(
            f"{what} has dtype {arr.dtype}, which cannot be converted to the declared "
            f"result dtype {spec.dtype}"
        )
    dst[...] = arr


def _poison(views: list[np.ndarray]) -> None:
    for v in views:
        v[...] = np.nan if v.dtype.kind in "fc" else 0


# (semantics, D19) a compiled circuit run by a callback that a running circuit called takes
# over the thread's runtime device (one per thread) and releases it: the calling circuit
# would fail later with "no current device". Detected after the callback returns.
_NESTED_CIRCUIT = (
    "callback {name} ran a compiled quantum circuit while it was called from a running "
    "circuit: a thread has one quantum device, and the inner circuit took it over. Call "
    "compiled circuits from the classical part of the program (outside the QNode), or "
    "compute the callback's value without a compiled circuit."
)


_device_query: Any = None  # (error_code, num_qubits, clear_error) of the runtime, once loaded


def _device_active() -> bool | None:
    """Whether this thread's runtime has a device; None when an error is already pending
    (then nothing is queried, and the error slot is left as it is)."""
    global _device_query
    if _device_query is None:
        from cofactor.launcher import _runtime

        rt = _runtime()
        _device_query = (rt.cf_rt_error_code, rt.cf_rt_num_qubits, rt.cf_rt_clear_error)
    error_code, num_qubits, clear_error = _device_query
    if error_code() != 0:
        return None
    if num_qubits() >= 0:
        return True
    clear_error()  # the "no current device" error the query itself set
    return False


def _trampoline(callback_id: int, kind: int, num_args: int, args: Any) -> int:
    """Called by compiled code through `cf_rt_callback`; never raises."""
    try:
        entry = _REGISTRY[callback_id]
        n_in, n_out = len(entry.in_specs), len(entry.out_specs)
        if kind == 0:
            specs = [*entry.in_specs, *entry.out_specs]
        else:
            specs = [*entry.in_specs, *entry.out_specs, *entry.in_specs]
        if num_args != len(specs):
            raise RuntimeExecutionError(
                f"callback {entry.callback.name}: the compiled code passed {num_args} "
                f"arguments, expected {len(specs)}"
            )
        views = [_view(args[i], s) for i, s in enumerate(specs)]
        written = views[n_in:] if kind == 0 else views[n_in + n_out :]
        if getattr(_STATE, "pending", None) is not None:
            _poison(written)
            return 1
        try:
            had_device = entry.in_circuit and _device_active()
            ins = pytree.unflatten(entry.in_tree, [v.copy() for v in views[:n_in]])
            if kind == 0:
                entry.callback._run_primal(entry, ins, views[n_in:])
            else:
                cts = [v.copy() for v in views[n_in : n_in + n_out]]
                entry.callback._run_vjp(entry, ins, cts, views[n_in + n_out :])
            if had_device and _device_active() is False:
                raise RuntimeExecutionError(_NESTED_CIRCUIT.format(name=entry.callback.name))
        except BaseException as err:  # noqa: BLE001 - kept and re-raised by the launcher
            _STATE.pending = err
            _poison(written)
            return 1
        return 0
    except BaseException as err:  # noqa: BLE001
        _STATE.pending = err
        return 1


_TRAMPOLINE = TRAMPOLINE_TYPE(_trampoline)
_setter: Any = None


def install_trampoline() -> None:
    """Install the trampoline in the runtime. The launcher does it before every call of a
    program with callbacks (one cheap C call), so that whoever installed another trampoline
    in between (a test, another frontend) cannot leave compiled callbacks unanswered."""
    global _setter
    if _setter is None:
        from cofactor.launcher import _runtime

        fn = _runtime().cf_rt_set_callback_trampoline
        fn.argtypes = [TRAMPOLINE_TYPE]
        fn.restype = None
        _setter = fn
    _setter(_TRAMPOLINE)


def clear_pending() -> None:
    """Forget any callback failure and (re)install the trampoline: before a compiled call."""
    _STATE.pending = None
    install_trampoline()


def raise_pending() -> None:
    """Re-raise the exception a callback raised during the compiled call just finished."""
    err = getattr(_STATE, "pending", None)
    if err is None:
        return
    _STATE.pending = None
    raise err


# ----------------------------------------------------------------------------------------
# emitting a callback call
# ----------------------------------------------------------------------------------------
def _flatten_args(args: tuple, what: str) -> tuple[list[Tracer], Any]:
    leaves, tree = pytree.flatten(args, is_leaf=lambda x: isinstance(x, Tracer))
    tracers = []
    for i, leaf in enumerate(leaves):
        try:
            tracers.append(as_tracer(leaf))
        except CompileError as err:
            raise CompileError(f"{what}: argument leaf {i}: {err}") from None
    return tracers, tree


def emit_callback_call(
    callback: Any, args: tuple, out_tree: Any, out_specs: list[BufferSpec], *, inactive: bool
) -> Any:
    """Emit the declaration (once per signature) and a call; returns the traced results."""
    ctx = context.current()
    b = ctx.builder
    tracers, in_tree = _flatten_args(args, callback.name)
    in_specs = tuple(BufferSpec(t.shape, t.dtype) for t in tracers)
    has_vjp = bool(getattr(callback, "_fwd", None) and getattr(callback, "_bwd", None))
    diff = context.differentiation_method(ctx)
    if diff == "auto" and not inactive:
        _check_differentiable(callback, in_specs, out_specs)
    from cofactor.api_extensions.hybrid import in_qnode_trace

    entry = _Entry(callback, in_specs, in_tree, tuple(out_specs), out_tree, in_qnode_trace())
    cid = _register((id(callback), in_tree, in_specs), entry)
    key = ("callback", cid)
    name = ctx.functions.get(key)
    if name is None:
        name = ctx.fresh_name(f"cb_{callback.name}")
        in_types = [memref_type(s.shape, s.dtype) for s in in_specs]
        out_types = [memref_type(s.shape, s.dtype) for s in out_specs]
        decl = func.FuncOp.external(name, [*in_types, *out_types], [])
        decl.attributes["cofactor.callback_id"] = IntegerAttr(cid, i64)
        decl.attributes["cofactor.num_inputs"] = IntegerAttr(len(in_specs), i64)
        # A side-effect callback is inactive under differentiation. Marking it
        # `cofactor.inactive` is what docs/gradients.md describes, but Enzyme then stops
        # with "No create nofree of empty function (cf_rt_callback)" (see the gradients
        # section of docs/frontend.md); a VJP that writes zeros does the same job.
        if has_vjp or inactive:
            decl.attributes["cofactor.callback_has_vjp"] = UnitAttr()
        decl.sym_visibility = StringAttr("private")
        b.module_ops.append(decl)
        ctx.functions[key] = name
    ctx.has_callbacks = True
    refs = [in_memory(t) for t in tracers]
    outs = [ctx.hoisted_alloc(memref_type(s.shape, s.dtype)) for s in out_specs]
    call = b.insert(func.CallOp(name, [*refs, *outs], []))
    results = [
        Tracer.from_memref(ref, s.shape, s.dtype, anchor=call)
        for ref, s in zip(outs, out_specs, strict=True)
    ]
    return pytree.unflatten(out_tree, results)


def _check_differentiable(callback: Any, in_specs: Any, out_specs: Any) -> None:
    fwd, bwd = getattr(callback, "_fwd", None), getattr(callback, "_bwd", None)
    if fwd is None and bwd is None:
        reason = getattr(callback, "no_gradient_reason", None)  # set by cofactor's own callbacks
        if reason:
            raise DifferentiableCompileError(f"cannot differentiate {callback.name}: {reason}")
        raise DifferentiableCompileError(
            f"Differentiating through the callback {callback.name!r}, which has no gradient "
            f"rule: attach a custom VJP with @{callback.name}.fwd and @{callback.name}.bwd, "
            'or differentiate with method="fd" (finite differences).'
        )
    if bwd is None:
        raise DifferentiableCompileError(
            f"The callback {callback.name!r} has a forward pass (.fwd) but is missing reverse "
            f"pass: define it with @{callback.name}.bwd"
        )
    if fwd is None:
        raise DifferentiableCompileError(
            f"The callback {callback.name!r} has a reverse pass (.bwd) but is missing forward "
            f"pass: define it with @{callback.name}.fwd"
        )


# ----------------------------------------------------------------------------------------
# the user-facing objects
# ----------------------------------------------------------------------------------------
class PureCallback:
    """A Python function called from compiled code (`cofactor.pure_callback`)."""

    def __init__(self, fn: Callable, result_type: Any = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__name__", "callback")
        if result_type is None:
            try:
                hints = inspect.get_annotations(fn, eval_str=True)
            except Exception:  # noqa: BLE001
                hints = {}
            result_type = hints.get("return")
        if result_type is None:
            raise CompileTypeError(  # (Catalyst's words and type, then ours)
                "A function using pure_callback requires return types to be passed in as a "
                f"parameter or type annotation: give {self.name}'s result type, either as "
                "pure_callback(fn, result_type) or as a return annotation (-> float, "
                "-> cofactor.ShapeDtype((3,), float), ...)"
            )
        self.out_tree, self.out_specs = _result_specs(result_type, f"pure_callback {self.name}")
        self._fwd: Callable | None = None
        self._bwd: Callable | None = None

    def fwd(self, fn: Callable) -> Callable:
        """Attach the forward pass of a custom VJP: `fwd(*args) -> (outputs, residuals)`."""
        self._fwd = fn
        return fn

    def bwd(self, fn: Callable) -> Callable:
        """Attach the reverse pass: `bwd(residuals, cotangents) -> tuple of input cotangents`."""
        self._bwd = fn
        return fn

    def __call__(self, *args: Any) -> Any:
        if not context.is_tracing():
            return self.fn(*args)
        return emit_callback_call(self, args, self.out_tree, self.out_specs, inactive=False)

    # -- run time (through the trampoline) ------------------------------------------------
    def _run_primal(self, entry: _Entry, ins: tuple, outs: list[np.ndarray]) -> None:
        result = self.fn(*ins)
        self._write_outputs(entry, result, outs, "result")

    def _write_outputs(self, entry: _Entry, result: Any, outs: list[np.ndarray], what: str) -> None:
        if _has_dict(entry.out_tree):
            # dict results are matched by key (in any order), as JAX's pytrees
            leaves = _leaves_like(entry.out_tree, result, f"callback {self.name} {what}")
        else:
            leaves, _ = pytree.flatten(result, is_leaf=lambda x: not isinstance(x, tuple | list))
        if len(leaves) != len(outs):
            if len(outs) == 1:  # a list returned for one array result
                leaves = [result]
            else:
                raise TypeError(
                    f"callback {self.name} returned {len(leaves)} value(s) as its {what}, "
                    f"but {len(outs)} were declared"
                )
        for i, (dst, value, spec) in enumerate(zip(outs, leaves, entry.out_specs, strict=True)):
            _write(dst, value, spec, f"{what} {i} of callback {self.name}")

    def _run_vjp(
        self, entry: _Entry, ins: tuple, cts: list[np.ndarray], vjps: list[np.ndarray]
    ) -> None:
        assert self._fwd is not None and self._bwd is not None
        fwd_out = self._fwd(*ins)
        if not (isinstance(fwd_out, tuple) and len(fwd_out) == 2):
            raise TypeError(
                f"{self.name}.fwd must return (outputs, residuals), got {type(fwd_out).__name__}"
            )
        residuals = fwd_out[1]
        cotangents = pytree.unflatten(entry.out_tree, cts)
        result = self._bwd(residuals, cotangents)
        if not isinstance(result, tuple | list):
            result = (result,)
        if len(result) != len(ins):
            raise TypeError(
                f"{self.name}.bwd returned {len(result)} cotangent(s); expected one per "
                f"argument ({len(ins)})"
            )
        flat, _ = pytree.flatten(tuple(result), is_leaf=lambda x: not isinstance(x, tuple | list))
        if len(flat) != len(vjps):
            raise TypeError(f"{self.name}.bwd returned cotangents that do not match the arguments")
        for i, (dst, value, spec) in enumerate(zip(vjps, flat, entry.in_specs, strict=True)):
            if value is None:
                dst[...] = 0
                continue
            _write(dst, value, spec, f"cotangent {i} returned by {self.name}.bwd")


def _has_dict(tree: Any) -> bool:
    if tree == pytree.LEAF or tree[0] == "none":
        return False
    if tree[0] == "dict":
        return True
    return any(_has_dict(t) for t in tree[1])


def _leaves_like(tree: Any, value: Any, what: str) -> list[Any]:
    """The leaves of a callback's result, read in the order of its declared tree."""
    if tree == pytree.LEAF:
        return [value]
    kind = tree[0]
    if kind == "none":
        return []
    if kind == "dict":
        if not isinstance(value, dict) or set(value) != set(tree[1]):
            got = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
            raise TypeError(
                f"{what}: expected a dict with keys {sorted(map(str, tree[1]))} as declared, "
                f"got {got}"
            )
        return [
            leaf
            for k, t in zip(tree[1], tree[2], strict=True)
            for leaf in _leaves_like(t, value[k], what)
        ]
    if not isinstance(value, tuple | list) or len(value) != len(tree[1]):
        raise TypeError(
            f"{what}: expected a {kind} of {len(tree[1])} value(s) as declared, got "
            f"{type(value).__name__}"
        )
    return [leaf for t, v in zip(tree[1], value, strict=True) for leaf in _leaves_like(t, v, what)]


class DebugCallback:
    """A side-effect-only callback (`cofactor.debug.callback`): no results (the function
    must return None), inactive under differentiation."""

    def __init__(self, fn: Callable) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__name__", "callback")

    def __call__(self, *args: Any) -> None:
        if not context.is_tracing():
            self.fn(*args)
            return None
        emit_callback_call(self, args, pytree.flatten(None)[1], [], inactive=True)
        return None

    def _run_primal(self, entry: _Entry, ins: tuple, outs: list[np.ndarray]) -> None:
        result = self.fn(*ins)
        if result is not None:  # (Catalyst's check: a value returned here would be lost)
            raise ValueError(
                f"debug.callback is expected to return None, but {self.name} returned a "
                f"{type(result).__name__}; use pure_callback for a function whose result "
                "the program uses"
            )

    def _run_vjp(self, entry: _Entry, ins: tuple, cts: Any, vjps: list[np.ndarray]) -> None:
        for v in vjps:
            v[...] = 0


def pure_callback(fn: Callable | None = None, result_type: Any = None) -> Any:
    """Call a Python function from compiled code (Catalyst's `pure_callback`).

    The result type comes from `result_type` (float, int, bool, complex, a
    `cofactor.ShapeDtype`, an example array, or a tuple of them) or from the function's
    return annotation. The function receives numpy arrays (0-d arrays for scalars) and must
    return values of the declared shapes. Attach a custom gradient with `@f.fwd` / `@f.bwd`.
    """
    if fn is None:
        return functools.partial(pure_callback, result_type=result_type)
    return PureCallback(fn, result_type)


__all__ = ["DebugCallback", "PureCallback", "pure_callback"]
