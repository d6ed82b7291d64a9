"""`y = np.zeros(n); y[i:j] = x` with a traced `x`: numpy arrays made in a traced program.

numpy's `ndarray.__setitem__` cannot take a traced value (it needs numbers), and numpy
users fill arrays in place all the time. So while a program is traced, `np.zeros`,
`np.ones`, `np.empty` and `np.full` called from the program's own code (not from numpy,
PennyLane or cofactor) return a `HostArray`: a stand-in that holds the numpy array and
behaves as it (indexing, methods, operators and numpy functions all act on the array, and
`np.asarray` gives it) until a traced value is written into it. Then it holds a traced
array with the same values, updated as numpy would (`tracing/indexing.setitem`: a float
written into an int array is truncated, a complex one into a real array raises), and
from then on behaves as that traced array; numpy code that needs numbers from it (a plain
ndarray receiving it, `float()`) gets the usual CompileError rather than stale values.
`y += x` with a traced `x` updates `y` in place, as numpy does.

A view of the numpy array (`y[0]`, `y.reshape(...)`, `np.asarray(y)`) that is still alive
when the first traced value is written would not see it (numpy's would): that write raises a
CompileError instead (write the traced values before taking views, or copy the view).
Arrays of other dtypes than float64, int64, bool and complex128 stay numpy's. Indexed by a
traced integer (`table[i]` in a loop body), a HostArray reads a traced copy of its values.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from cofactor.errors import CompileError, CompileTypeError
from cofactor.tracing import context
from cofactor.tracing.aliasing import REGION

#: the numpy constructors that make a HostArray while a program is traced
CONSTRUCTORS = (
    "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
    "eye", "identity",
)  # fmt: skip
_SUPPORTED = frozenset(np.dtype(d) for d in (np.float64, np.int64, np.bool_, np.complex128))
#: top-level packages whose calls keep numpy's constructors
_LIBRARIES = frozenset(
    {"numpy", "pennylane", "cofactor", "autoray", "scipy", "catalyst", "xdsl", "jax"}
)


class HostArray(NDArrayOperatorsMixin):
    """A numpy array made by a traced program, until a traced value is written into it."""

    __slots__ = ("_array", "_tracer", "_region")
    __array_priority__ = 1000  # above ndarray's: `ndarray + HostArray` asks this class
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, array: np.ndarray) -> None:
        self._array: np.ndarray | None = array
        self._tracer: Any = None
        self._region = REGION[-1]  # (a loop body cannot write into it: tracing/aliasing.py)

    @property
    def value(self) -> Any:
        """The numpy array, or the traced array once a traced value was written."""
        return self._array if self._tracer is None else self._tracer

    # -- writes ------------------------------------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        if self._tracer is None and not _is_traced(key) and not _is_traced(value):
            self._array[_unwrap(key)] = _unwrap(value)  # type: ignore[index]
            return
        target = self._traced("writing a traced value into it")
        _check_complex(value, target.dtype)
        target[_unwrap(key)] = _unwrap(value)

    def _traced(self, what: str) -> Any:
        """The traced array (made from the numpy array on first use)."""
        if self._tracer is None:
            from cofactor.tracing.numpy_rules import as_tracer

            # the array's references: this object's and getrefcount's argument; any other
            # is a view or a name that would keep the numpy values
            if sys.getrefcount(self._array) > 2:
                raise CompileError(
                    f"numpy array made in the traced program ({what}): a view of it "
                    "(y[...], y.reshape(...), np.asarray(y), ...) made before is still in "
                    "use and would not show the traced values, as numpy's would. Write the "
                    "traced values before taking views, or copy the view (.copy())"
                )
            self._tracer = as_tracer(self._array)
            self._tracer._region = self._region  # (made where the numpy array was)
            self._array = None
        return self._tracer

    # -- numpy protocols -----------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self._tracer is not None:
            return self._tracer.__array__(dtype)  # (numbers: the tracer's CompileError)
        return self._array if dtype is None else self._array.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        outs = out if isinstance(out, tuple) else (out,) if out is not None else ()
        mine = [o for o in outs if isinstance(o, HostArray)]
        if any(_is_traced(x) for x in inputs) or any(o._tracer is not None for o in mine):
            for o in mine:  # `y += x` with a traced x: y becomes traced, updated in place
                o._traced(f"numpy.{ufunc.__name__} with out=")  # (casts: numpy's same_kind)
        if outs:
            kwargs["out"] = tuple(_unwrap(o) for o in outs)
        result = getattr(ufunc, method)(*map(_unwrap, inputs), **kwargs)
        if mine and len(outs) == 1 and result is kwargs["out"][0]:
            return outs[0]  # numpy returns `out` itself
        return _fresh(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _fresh(func(*_unwrap(list(args)), **_unwrap(dict(kwargs))))

    # -- the array's own behaviour ---------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            # not __array_interface__ / __array_struct__: numpy would view the buffer
            # without a reference to it, which `_traced` counts (and then frees)
            raise AttributeError(name)
        attr = getattr(self.value, name)
        if self._tracer is None and callable(attr):
            return _fresh_results(attr)  # (y.copy(), y.astype(int): writable in turn)
        return attr

    def __getitem__(self, key: Any) -> Any:
        if self._tracer is None and _is_traced(key):
            # `angles[i]` with a traced index (a loop's): numpy's indexing needs an integer,
            # so read a traced copy of the values (the array itself stays numpy's)
            from cofactor.tracing.numpy_rules import as_tracer

            return as_tracer(self._array)[_unwrap(key)]
        return self.value[_unwrap(key)]

    def __len__(self) -> int:
        return len(self.value)

    def __iter__(self) -> Any:
        return iter(self.value)

    def __repr__(self) -> str:
        return repr(self.value)

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return self.value.__index__()

    def __complex__(self) -> complex:
        return complex(self.value)

    def __contains__(self, item: Any) -> bool:
        return item in self.value

    def __copy__(self) -> Any:
        return self.value.copy()

    def __deepcopy__(self, memo: dict) -> Any:
        return self.value.copy()


def _is_traced(x: Any) -> bool:
    from cofactor.tracing.tracer import Scalar, Tracer

    if isinstance(x, Tracer | Scalar):
        return True
    if isinstance(x, HostArray):
        return x._tracer is not None
    if isinstance(x, list | tuple):
        return any(_is_traced(v) for v in x)
    if isinstance(x, slice):
        return any(_is_traced(v) for v in (x.start, x.stop, x.step))
    return False


def _unwrap(x: Any) -> Any:
    """`x` with every HostArray replaced by what it holds (containers rebuilt)."""
    if isinstance(x, HostArray):
        return x.value
    if type(x) in (list, tuple):
        return type(x)(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _fresh(result: Any) -> Any:
    """A new numpy array computed from a HostArray (not a view of one) as a HostArray, so
    that traced values can be written into it too (`z = y * 2; z[0] = x`)."""
    if (
        type(result) is np.ndarray
        and result.base is None
        and result.dtype in _SUPPORTED
        and context.is_tracing()
    ):
        return HostArray(result)
    if type(result) is tuple:
        return tuple(_fresh(r) for r in result)
    return result


def _fresh_results(method: Callable) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        return _fresh(method(*_unwrap(list(args)), **_unwrap(dict(kwargs))))

    return call


def _check_complex(value: Any, dtype: np.dtype) -> None:
    """numpy refuses to write a complex number into a real array (`TypeError: float()
    argument must be ... not 'complex'`); cofactor refuses complex arrays there too (numpy
    drops their imaginary parts with a ComplexWarning)."""
    if dtype.kind == "c":
        return
    from cofactor.tracing.numpy_rules import as_tracer

    v = _unwrap(value)
    kind = as_tracer(v).dtype.kind if _is_traced(v) else np.asarray(v).dtype.kind
    if kind == "c":
        raise CompileTypeError(
            f"cannot write complex values into a numpy array of dtype {dtype} (numpy raises "
            "TypeError for a complex number); make the array complex (dtype=complex) or "
            "write np.real(...) of the value"
        )


# ----------------------------------------------------------------------------------------
# the constructors
# ----------------------------------------------------------------------------------------
def make_constructor(original: Callable, plain: bool = False) -> Callable:
    """`original` (numpy's constructor, or with `plain` PennyLane's autograd one, whose
    `tensor` result is taken as the ndarray it wraps) making a HostArray when the program
    calls it while it is traced."""
    name = getattr(original, "__name__", "")
    fill_position = 1 if name in ("full", "full_like") else None

    def constructor(*args: Any, **kwargs: Any) -> Any:
        # (inline, not `_from_program`: PennyLane's and cofactor's own calls pass here too)
        caller = sys._getframe(1).f_globals.get("__name__") or ""
        if caller.partition(".")[0] in _LIBRARIES or not context.is_tracing() or "like" in kwargs:
            return original(*args, **kwargs)
        if fill_position is not None:
            fill = args[fill_position] if len(args) > fill_position else kwargs.get("fill_value")
            dtype = args[2] if len(args) > 2 else kwargs.get("dtype")
            if _is_traced(fill) and (dtype is None or np.dtype(dtype) in _SUPPORTED):
                kwargs.pop("requires_grad", None)  # (PennyLane's numpy)
                return _traced_full(name, *args, **kwargs)  # a traced array
        out = original(*map(_unwrap, args), **kwargs)
        if plain and isinstance(out, np.ndarray):
            out = out.view(np.ndarray)
        return HostArray(out) if type(out) is np.ndarray and out.dtype in _SUPPORTED else out

    constructor.__name__ = getattr(original, "__name__", "constructor")
    constructor.__doc__ = getattr(original, "__doc__", None)
    return constructor


def _traced_full(
    name: str, first: Any = None, fill_value: Any = None, dtype: Any = None, *args: Any,
    shape: Any = None, **kwargs: Any,
) -> Any:  # fmt: skip
    """`np.full(shape, x)` / `np.full_like(a, x, shape=None)` with a traced `x` (the dtype:
    numpy's; `first` is full's shape or full_like's prototype, `a` or `prototype=` also by
    keyword)."""
    from cofactor.tracing.numpy_rules import as_tracer, cast_tracer
    from cofactor.tracing.tracer import Tracer, normalize_dtype

    t = as_tracer(_unwrap(fill_value))
    if name == "full_like":
        prototype = _unwrap(first if first is not None else kwargs.get("a"))
        shape = np.shape(prototype) if shape is None else shape
        dtype = dtype if dtype is not None else as_tracer(prototype).dtype
    elif first is not None:
        shape = first
    if dtype is not None:
        if np.dtype(dtype).kind != "c" and t.dtype.kind == "c":
            _check_complex(t, np.dtype(dtype))
        t = cast_tracer(t, normalize_dtype(dtype))
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    return Tracer(np.broadcast_to(t.elems, shape).copy(), t.dtype)


def _register_with_autoray() -> None:
    """PennyLane computes on operator parameters through autoray: as numpy arrays."""
    import autoray

    autoray.register_backend(HostArray, "numpy")


_register_with_autoray()


def holds_traced(x: Any) -> bool:
    """A traced value: a Tracer, a traced scalar, a host array that became traced, or a
    list/tuple holding one."""
    from cofactor.tracing.tracer import Scalar, Tracer

    if isinstance(x, Tracer | Scalar):
        return True
    if isinstance(x, HostArray):
        return x._tracer is not None
    return isinstance(x, list | tuple) and any(holds_traced(v) for v in x)
