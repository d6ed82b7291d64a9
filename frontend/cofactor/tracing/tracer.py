"""The tracer: a stand-in for a numpy array while a function is traced.

A `Tracer` has a static shape and one of the supported dtypes (float64, int64, bool,
complex128). Its data is either a memref (arrays in memory: entry arguments, QNode results,
results of loop nests), from which elements are loaded only on first use
(`memref_elements`), or an object array of `Scalar`s, one SSA value per element (complex:
an (re, im) pair). Numpy functions
reach the tracer through `__array_ufunc__` / `__array_function__` and are turned into IR by
`numpy_rules`.

Arrays in memory with more than `array_loops.ELEMENTWISE_MAX` elements stay in memory:
numpy operations on them are loop nests over memrefs (`array_rules`, `array_views`), so the
IR does not grow with the array. Small arrays and anything the loops do not cover use the
elements: numpy itself does the structural work (reshape, stack, slicing) on the object
array and calls the `Scalar` operators, which emit one `arith`/`math` op each, suiting the
small classical pre/post-processing of hybrid programs.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin
from xdsl.ir import Block, Operation, SSAValue

from cofactor.errors import CompileError
from cofactor.tracing import context
from cofactor.tracing.aliasing import REGION as _REGION
from cofactor.tracing.concrete import _NoConcreteValue
from cofactor.tracing.host_arrays import HostArray
from cofactor.tracing.memref_elements import LazyMemref, load_all, load_element
from cofactor.tracing.scalar import (  # noqa: F401  (re-exported: the tracer's public names)
    BOOL,
    COMPLEX,
    FLOAT,
    INT,
    Scalar,
    normalize_dtype,
)


class Tracer(_NoConcreteValue, NDArrayOperatorsMixin):
    """A traced numpy array (or scalar, shape ())."""

    __array_priority__ = 1000
    # (_group: the arrays sharing memory with this one in numpy, _where: this array's
    # positions in that memory, _region: the loop/branch body it was made in;
    # tracing/aliasing.py)
    __slots__ = (
        "_elems", "_memref", "_shape", "dtype", "_group", "_where", "_region", "__weakref__"
    )  # fmt: skip

    def __init__(
        self,
        elems: np.ndarray | None,
        dtype: np.dtype,
        *,
        memref: LazyMemref | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> None:
        self.dtype = np.dtype(dtype)
        self._elems = elems
        self._memref = memref
        self._shape = tuple(elems.shape) if elems is not None else tuple(shape or ())
        self._group: Any = None
        self._where: Any = None
        self._region = _REGION[-1]

    # -- constructors ------------------------------------------------------------------
    @classmethod
    def from_memref(
        cls, ref: SSAValue, shape: tuple[int, ...], dtype: np.dtype, anchor: Operation | Block
    ) -> Tracer:
        return cls(None, dtype, memref=LazyMemref(ref, anchor), shape=shape)

    @classmethod
    def scalar(cls, value: Any, dtype: np.dtype) -> Tracer:
        elems = np.empty((), dtype=object)
        elems[()] = Scalar(value, np.dtype(dtype))
        return cls(elems, dtype)

    # -- data ----------------------------------------------------------------------------
    @property
    def elems(self) -> np.ndarray:
        """The object array of `Scalar`s (loading from the memref if needed)."""
        if self._elems is None:
            self._elems = load_all(self._memref, self._shape, self.dtype)
        return self._elems

    @property
    def memref(self) -> SSAValue | None:
        """The memref holding this array, if it is stored in one."""
        return self._memref.ref if self._memref is not None else None

    # -- array attributes ----------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def T(self) -> Tracer:
        return np.transpose(self)

    @property
    def real(self) -> Tracer:
        return np.real(self)

    @property
    def imag(self) -> Tracer:
        return np.imag(self)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d traced value")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d traced value")
        for i in range(self._shape[0]):
            yield self[i]

    def __repr__(self) -> str:
        return f"Tracer(shape={self._shape}, dtype={self.dtype})"

    # -- numpy protocols -----------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from cofactor.tracing.numpy_api import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from cofactor.tracing.numpy_api import array_function

        return array_function(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # np.array([tracer, ...]) and np.asarray(tracer) land here: hand numpy the elements
        # as an object array; numpy's object loops then call the Scalar operators. numpy
        # always makes an ndarray here, so a numeric dtype cannot be had without values.
        if dtype is not None and np.dtype(dtype) != np.dtype(object):
            raise CompileError(
                f"numpy.asarray/array(traced value, dtype={np.dtype(dtype)}) would need the "
                "values, which are only known when the compiled program runs; use "
                "x.astype(dtype) or qml.math.asarray(x, dtype=dtype), which keep the tracer. "
                "Writing a traced value into a numpy array (y[i:j] = x) lands here too: "
                "arrays made in the program by np.zeros/ones/empty/full (and *_like, eye) "
                "take traced values; for others (np.array, np.arange, arrays made outside "
                "the program) start y from a traced array (y = 0.0 * x, y = x.copy()) or "
                "build it with np.concatenate/np.stack/np.where"
            )
        # a copy: numpy may write into the array it is given, which must not change `self`
        return self.elems.copy()

    # -- indexing ----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Tracer:
        lazy = self._memref
        if lazy is not None and self._elems is None and type(key) is tuple:
            # `x[i, j, k]` of a small array in memory with Python ints in range (a gate
            # angle): its element, loaded once, as indexing's own fast path gives it
            shape = self._shape
            if len(key) == len(shape) and shape:
                flat, size = 0, 1
                for k, n in zip(key, shape, strict=True):
                    if type(k) is not int or not -n <= k < n:
                        break
                    flat = flat * n + k % n
                    size *= n
                else:
                    if size <= _SMALL_ARRAY_MAX:
                        scalar = lazy.loaded.get(flat)
                        if scalar is None:
                            scalar = load_element(lazy, shape, self.dtype, flat)
                        return _scalar_tracer(scalar, self.dtype)
        return _getitem_function()(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        from cofactor.tracing.indexing import setitem

        setitem(self, key, value)

    __hash__ = object.__hash__

    # -- copies ----------------------------------------------------------------------------
    def copy(self, order: str = "C") -> Tracer:
        """A new traced array with the same elements (Scalars are immutable SSA values, so
        sharing them is a copy); assigning into the copy leaves `self` unchanged."""
        if self._elems is None:
            return Tracer(None, self.dtype, memref=self._memref, shape=self._shape)
        return Tracer(self._elems.copy(), self.dtype)

    def __copy__(self) -> Tracer:
        return self.copy()

    @property
    def at(self) -> Any:
        """JAX's functional updates, `x.at[i].set(v)` (tracing/functional_update.py)."""
        from cofactor.tracing.functional_update import AtIndexer

        return AtIndexer(self)

    def __deepcopy__(self, memo: dict) -> Tracer:
        return self.copy()

    # -- ndarray-like methods ------------------------------------------------------------
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", **kw: Any) -> Tracer:
        from cofactor.tracing.numpy_api import cast_tracer

        return cast_tracer(self, normalize_dtype(dtype)).copy()

    @property
    def itemsize(self) -> int:
        return 16 if self.dtype == COMPLEX else self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.itemsize * self.size

    def __round__(self, ndigits: int | None = None) -> Tracer:
        # Python's round(): an int without ndigits (as for numpy scalars), else np.round
        if ndigits is None:
            return np.round(self).astype(INT) if self.dtype != COMPLEX else np.round(self)
        return np.round(self, ndigits)

    def round(self, decimals: int = 0, out: Any = None) -> Tracer:
        return np.round(self, decimals, out=out)

    def any(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.any(self, axis=axis, **kw)

    def all(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.all(self, axis=axis, **kw)

    def clip(self, min: Any = None, max: Any = None, **kw: Any) -> Tracer:
        return np.clip(self, min, max, **kw)

    def cumsum(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.cumsum(self, axis=axis, **kw)

    def cumprod(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.cumprod(self, axis=axis, **kw)

    def argmax(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.argmax(self, axis=axis, **kw)

    def argmin(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.argmin(self, axis=axis, **kw)

    def var(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.var(self, axis=axis, **kw)

    def std(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.std(self, axis=axis, **kw)

    def swapaxes(self, axis1: int, axis2: int) -> Tracer:
        return np.swapaxes(self, axis1, axis2)

    def repeat(self, repeats: Any, axis: Any = None) -> Tracer:
        return np.repeat(self, repeats, axis=axis)

    def take(self, indices: Any, axis: Any = None, **kw: Any) -> Tracer:
        return np.take(self, indices, axis=axis, **kw)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1, **kw: Any) -> Tracer:
        return np.trace(self, offset, axis1, axis2, **kw)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tracer:
        return np.diagonal(self, offset, axis1, axis2)

    def nonzero(self) -> Any:
        return np.nonzero(self)

    def fill(self, value: Any) -> None:
        self[...] = value

    def sort(self, axis: int = -1, kind: Any = None, order: Any = None) -> None:
        from cofactor.tracing.inplace_functions import sort_in_place

        sort_in_place(self, axis, kind, order)

    def reshape(self, *shape: Any, **kw: Any) -> Tracer:
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        return np.reshape(self, shape, **kw)

    def flatten(self, order: str = "C") -> Tracer:
        return np.ravel(self, order).copy()  # (numpy: always a copy)

    def ravel(self, order: str = "C") -> Tracer:
        return np.ravel(self, order)  # (numpy: a view when it can be one)

    def transpose(self, *axes: Any) -> Tracer:
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], tuple | list)):
            axes = axes[0]  # numpy: a.transpose((1, 0)) is a.transpose(1, 0)
        return np.transpose(self, tuple(axes) if axes else None)

    def sum(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.sum(self, axis=axis, **kw)

    def prod(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.prod(self, axis=axis, **kw)

    def mean(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.mean(self, axis=axis, **kw)

    def max(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.max(self, axis=axis, **kw)

    def min(self, axis: Any = None, **kw: Any) -> Tracer:
        return np.min(self, axis=axis, **kw)

    def conj(self) -> Tracer:
        return np.conjugate(self)

    conjugate = conj

    def dot(self, other: Any) -> Tracer:
        return np.dot(self, other)

    def squeeze(self, axis: Any = None) -> Tracer:
        return np.squeeze(self, axis=axis)

    def item(self, *args: Any) -> Tracer:
        if args:  # numpy: item(k) is the k-th element in row-major order, item(i, j) x[i, j]
            index = args[0] if len(args) == 1 else args
            return np.reshape(self, (-1,))[index] if isinstance(index, int) else self[index]
        if self.size != 1:
            raise CompileError("item() of a traced array with more than one element")
        return np.reshape(self, ())

    def tolist(self) -> Any:
        return [self[i] for i in range(len(self))] if self.ndim else self


def _scalar_tracer(scalar: Scalar, dtype: np.dtype) -> Tracer:
    """`Tracer(<0-d object array of scalar>, dtype)` for a `dtype` that is already a numpy
    dtype (an element read: once per gate angle)."""
    elems = np.empty((), dtype=object)
    elems[()] = scalar
    t = _new_tracer(Tracer)
    t.dtype, t._elems, t._memref, t._shape = dtype, elems, None, ()
    t._group = t._where = None
    t._region = _REGION[-1]
    return t


_new_tracer = Tracer.__new__


#: the largest array whose elements `Tracer.__getitem__` loads one by one itself
#: (array_loops.ELEMENTWISE_MAX, which imports this module; a test checks they agree)
_SMALL_ARRAY_MAX = 16


@functools.cache
def _getitem_function() -> Any:
    from cofactor.tracing.indexing import getitem  # (imports this module)

    return getitem


def _is_foreign(other: Any) -> bool:
    """Whether `other` is no number or array: a PennyLane operator, say."""
    return not isinstance(
        other, Tracer | Scalar | HostArray | numbers.Number | np.ndarray | np.generic | list | tuple
    )


def _deferring(method: Any) -> Any:
    """An arithmetic operator that returns NotImplemented for foreign operands, so that
    Python asks the other side: `a * qml.PauliZ(0)` with a traced `a` is the operator's
    `__rmul__`, building an observable with a traced coefficient."""

    @functools.wraps(method)
    def operator(self: Any, other: Any) -> Any:
        if _is_foreign(other):
            return _with_pennylane_operator(method.__name__, self, other)
        return method(self, other)

    return operator


def is_operator(value: Any) -> bool:
    """Whether `value` is a PennyLane operator: an instance of a subclass of
    `qml.operation.Operator` (PennyLane's operators all are). Asked of the class's MRO rather
    than through `isinstance`: Operator is an ABC, and for a class that is not one (a float,
    a tracer, a measurement) ABCMeta's first answer walks every one of Operator's hundreds
    of subclasses, about half a millisecond per class in the first call of a process."""
    import pennylane as qml

    return qml.operation.Operator in type(value).__mro__


def _with_pennylane_operator(name: str, scalar: Any, other: Any) -> Any:
    """`traced * op` (and `op * traced`, `op / traced`): PennyLane's operator arithmetic
    only accepts the tensor types it knows, so build the scaled operator here."""
    import pennylane as qml

    if not is_operator(other):
        return NotImplemented
    if name in ("__mul__", "__rmul__"):
        return qml.s_prod(scalar, other, lazy=False)
    return NotImplemented


_ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul")
for _name in (f"__{p}{op}__" for op in _ARITHMETIC for p in ("", "r")):
    setattr(Tracer, _name, _deferring(getattr(NDArrayOperatorsMixin, _name)))
    if hasattr(Scalar, _name):
        setattr(Scalar, _name, _deferring(getattr(Scalar, _name)))


# In-place operators write into the array, as numpy's do: the same Python object takes the
# new values (`z = y; z += 1` changes `y`), under numpy's rules for writing into an existing
# array (shape kept, same_kind casting: `int_array += 0.5` raises), and the arrays numpy
# would let share its memory see the write (tracing/aliasing.py: `t = y[1:]; t += 1`
# changes `y`). A 0-d traced value that is no view stands for a Python/numpy scalar, which
# is immutable: it is rebound to the promoted result (`n += 0.5` makes a float).
# `x[k] += v` is getitem, this, setitem, as in numpy: a basic `k` writes through the view
# and the setitem writes the same values again; an advanced `k` (`x[[0, 0]] += 1`) adds
# into a copy, and the setitem stores each distinct element once, as numpy's does.
def _inplace(ufunc: np.ufunc, name: str) -> Any:
    def operator(self: Tracer, other: Any) -> Any:
        if _is_foreign(other):
            return NotImplemented
        result = ufunc(self, other)
        if self.ndim == 0 and self._group is None and np.ndim(result) == 0:
            return result
        from cofactor.tracing.aliasing import assign, outside_copy
        from cofactor.tracing.numpy_api import inplace_result

        target = outside_copy(self)  # (autograph's converted bodies rebind: aliasing.py)
        assign(target, inplace_result(self, result, ufunc.__name__).elems, "output array")
        return target

    operator.__name__ = name
    return operator


for _op, _uf in (
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
    ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power),
    ("matmul", np.matmul), ("and", np.bitwise_and), ("or", np.bitwise_or),
    ("xor", np.bitwise_xor), ("lshift", np.left_shift), ("rshift", np.right_shift),
):  # fmt: skip
    setattr(Tracer, f"__i{_op}__", _inplace(_uf, f"__i{_op}__"))


def _contains_traced(x: Any) -> bool:
    if isinstance(x, Tracer | Scalar):
        return True
    if isinstance(x, list | tuple):
        return any(_contains_traced(v) for v in x)
    return (
        isinstance(x, np.ndarray)
        and x.dtype == object
        and any(isinstance(v, Tracer | Scalar) for v in x.flat)
    )


def _keep_tracers(old: Any) -> Any:
    """qml.math.asarray / array on traced values return a Tracer (float/complex dtype kept,
    so `qml.math.finfo(qml.math.asarray(x).dtype)` works), not numpy's object array."""

    def asarray(x: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        # outside a trace (uncompiled PennyLane) this costs one list lookup
        if not context.is_tracing() or not _contains_traced(x):
            return old(x, dtype, *args, **kwargs)
        from cofactor.tracing.numpy_api import as_tracer, cast_tracer

        t = as_tracer(x)
        return t if dtype is None else cast_tracer(t, normalize_dtype(dtype))

    return asarray


def _register_with_autoray() -> None:
    """PennyLane computes on operator parameters through `qml.math` (autoray): dispatch
    tracers to numpy, whose functions come back to the tracer through the protocols."""
    import autoray

    autoray.register_backend(Tracer, "numpy")
    autoray.register_backend(Scalar, "numpy")
    for backend in ("numpy", "builtins"):
        for name in ("asarray", "array"):
            autoray.register_function(backend, name, _keep_tracers, wrap=True)


_register_with_autoray()
