"""`np.asarray`, `np.asanyarray` and `np.array` on traced values return a traced array.

numpy's constructors do not dispatch through `__array_function__` (only with `like=`): on a
Tracer they would call `__array__` and build an ndarray, which can only be an object array
of traced scalars (dtype object: `np.finfo(np.asarray(x).dtype)` and `.astype(float)` fail).
Catalyst's users write `jnp.asarray(x)`; with numpy in its place the result must stay a
traced array with the tracer's float/complex/int dtype. So while a program is traced these
three module attributes are replaced (`context.intercept`, as for `QNode.__call__`): on a
traced value (or a list/tuple holding one) they return a Tracer (`np.array` a copy, as
numpy copies); on anything else, or in a thread that is not tracing, numpy's own function
runs. Code that bound the function before (`from numpy import asarray`) keeps numpy's.

PennyLane's own code asks for JAX arrays when "a compiler is active"
(`qml.math.array(wires, like="jax")` in MultiRZ's, the multi-controlled X's and other
decompositions): under cofactor the compiler's arrays are numpy arrays and tracers, so while
this thread traces autoray's "jax" backend resolves to numpy (JAX is never imported).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from cofactor.tracing import context, pennylane_numpy
from cofactor.tracing.host_arrays import holds_traced

_LOCAL = threading.local()


def _traced_input(x: Any, dtype: Any, kwargs: dict) -> bool:
    """A user's traced value (a Tracer, a traced scalar, or a list/tuple holding one).
    Object ndarrays are left to numpy: they are how the tracer itself holds elements, and
    numpy's own Python code (`np.broadcast_arrays`, ...) calls `np.array` on them. So are
    the calls cofactor's tracer makes itself (it builds its element arrays with numpy)."""
    return (
        context.is_tracing()
        and not getattr(_LOCAL, "busy", False)
        and kwargs.get("like") is None
        and (dtype is None or np.dtype(dtype) != np.dtype(object))
        and holds_traced(x)
        and not sys._getframe(2).f_globals.get("__name__", "").startswith("cofactor.")
    )


def _as_traced_array(x: Any, dtype: Any, copy: bool, ndmin: int = 0) -> Any:
    from cofactor.tracing.numpy_rules import as_tracer, cast_tracer
    from cofactor.tracing.tracer import normalize_dtype

    _LOCAL.busy = True  # as_tracer builds lists through numpy: those calls are numpy's
    try:
        t = as_tracer(x)
    finally:
        _LOCAL.busy = False
    if dtype is not None:
        cast = cast_tracer(t, normalize_dtype(dtype))
        copy = copy and cast is t
        t = cast
    if ndmin > len(t.shape):
        t = t.reshape((1,) * (ndmin - len(t.shape)) + tuple(t.shape))
    return t.copy() if copy else t


def _make_asarray(original: Any) -> Any:
    def asarray(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not args and _traced_input(a, dtype, kwargs):
            return _as_traced_array(a, dtype, copy=bool(kwargs.get("copy")))
        return original(a, dtype, *args, **kwargs)

    return asarray


def _make_array(original: Any) -> Any:
    def array(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not args and _traced_input(a, dtype, kwargs):
            copy = kwargs.get("copy", True)
            return _as_traced_array(a, dtype, copy=copy is not False, ndmin=kwargs.get("ndmin", 0))
        return original(a, dtype, *args, **kwargs)

    return array


def _as_jax_would(numpy_fn: Any) -> Any:
    """numpy's function, its numeric array result as a traced array (a JAX array can be
    indexed with a traced index, e.g. `wires[i]` in a `for_loop`; a numpy array cannot)."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        from cofactor.tracing.numpy_rules import as_tracer

        out = numpy_fn(*args, **kwargs)
        if isinstance(out, np.ndarray) and out.dtype.kind in "biufc":
            return as_tracer(out)
        return out

    return fn


def _make_get_lib_fn(original: Any) -> Any:
    def get_lib_fn(backend: str, fn: str) -> Any:
        if backend == "jax" and context.is_tracing():
            return _as_jax_would(original("numpy", fn))
        return original(backend, fn)

    return get_lib_fn


@contextlib.contextmanager
def capture_numpy_constructors() -> Iterator[None]:
    """For the duration of a trace: numpy's array constructors keep traced values traced,
    and PennyLane's `like="jax"` arrays are numpy's."""
    from cofactor.tracing import matrix_exp

    with (
        context.intercepts(_stable_intercepts(), reusable=True),
        # scipy.linalg.expm of a traced matrix (scipy reads numpy internals; only once
        # the program's process imported scipy.linalg, so looked at on every trace)
        context.intercepts(matrix_exp.intercepted()),
    ):
        yield


_STABLE: list[tuple[Any, str, Any]] = []


def _stable_intercepts() -> list[tuple[Any, str, Any]]:
    """The `(owner, attribute, make)` triples of every trace whose owners are there from
    import on: listed once per process, so that each `make` is the same object on every
    trace and its replacement is made once (`context.prepare`, at import)."""
    if _STABLE:
        return _STABLE
    import autoray.autoray

    from cofactor.api_extensions import (
        operator_checks,
        operator_refusals,
        optimizers,
        phase_estimation,
    )
    from cofactor.tracing.host_arrays import CONSTRUCTORS, make_constructor

    items = [
        (np, "asarray", _make_asarray),
        (np, "asanyarray", _make_asarray),
        (np, "array", _make_array),
        (autoray.autoray, "get_lib_fn", _make_get_lib_fn),
        # np.zeros(n) & co. in the program: arrays that take traced values (host_arrays.py)
        *[(np, name, make_constructor) for name in CONSTRUCTORS],
        # `from pennylane import numpy as np` (its tensors and autograd's concatenate)
        *pennylane_numpy.intercepted(),
        # opt.step(cost, traced_params) would silently not move: refused by name
        *optimizers.intercepted(),
        *operator_refusals.intercepted(),
        # BasisState(n) of a traced integer n >= 2**len(wires) raises when it runs
        *operator_checks.intercepted(),
        # PennyLane's qml.for_loop version carries an operator: unrolled while tracing
        *phase_estimation.intercepted(),
    ]
    with _STABLE_LOCK:
        if not _STABLE:
            _STABLE.extend(items)
    return _STABLE


_STABLE_LOCK = threading.Lock()
# (the replacements made at import: on the cached first call of a process they were a
# tenth of a millisecond)
context.prepare(_stable_intercepts())
