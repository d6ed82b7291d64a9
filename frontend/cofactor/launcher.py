"""Calling a compiled entry point through ctypes.

Everything that depends only on the signature is prepared once, when the library is loaded:
the ctypes function, one memref descriptor struct per argument, persistent scalar buffers
(their addresses are fixed in the descriptors), and the plan for output buffers. A call then
only writes scalar values / array pointers into the descriptors, calls
`_mlir_ciface_<name>`, checks the runtime's error slot and wraps the outputs.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cofactor.errors import RuntimeExecutionError

_DESCRIPTOR_TYPES: dict[int, type[ctypes.Structure]] = {}


def descriptor_type(rank: int) -> type[ctypes.Structure]:
    """`struct { T* allocated; T* aligned; i64 offset; i64 sizes[rank]; i64 strides[rank]; }`"""
    if rank not in _DESCRIPTOR_TYPES:
        fields = [
            ("allocated", ctypes.c_void_p),
            ("aligned", ctypes.c_void_p),
            ("offset", ctypes.c_int64),
        ]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
        _DESCRIPTOR_TYPES[rank] = type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})
    return _DESCRIPTOR_TYPES[rank]


@dataclass(frozen=True)
class BufferSpec:
    """One argument or result as the compiled code sees it: a numpy shape and dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def memref_shape(self) -> tuple[int, ...]:
        return (*self.shape, 2) if self.dtype == np.complex128 else self.shape


_SCALAR_CTYPES = {
    np.dtype(np.float64): ctypes.c_double,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.bool_): ctypes.c_bool,
}


def _make_descriptor(spec: BufferSpec) -> ctypes.Structure:
    shape = spec.memref_shape
    desc = descriptor_type(len(shape))()
    strides = np.cumprod((1, *shape[::-1]))[:-1][::-1] if shape else ()
    for i, (n, s) in enumerate(zip(shape, strides, strict=True)):
        desc.sizes[i] = n
        desc.strides[i] = int(s)
    return desc


class Launcher:
    """A loaded entry point, ready to be called with flattened numpy inputs."""

    def __init__(
        self,
        so_path: Path,
        name: str,
        inputs: Sequence[BufferSpec],
        outputs: Sequence[BufferSpec],
        check_runtime: bool,
        *,
        callbacks: bool = False,
    ) -> None:
        self.lib = ctypes.CDLL(str(so_path))
        self._fn = getattr(self.lib, f"_mlir_ciface_{name}")
        self._fn.restype = None
        self._fn.argtypes = [ctypes.c_void_p] * (len(inputs) + len(outputs))
        self._runtime = _runtime() if check_runtime else None
        self._error_code = self._runtime.cf_rt_error_code if self._runtime else None
        self._callbacks = callbacks  # Python callbacks: their exceptions are re-raised
        # one descriptor per argument; scalars point at a persistent buffer
        self._in_setters: list[Callable[[Any], Any]] = []
        self._keep: list[Any] = []
        ptrs: list[int] = []
        for spec in inputs:
            desc = _make_descriptor(spec)
            self._keep.append(desc)
            ptrs.append(ctypes.addressof(desc))
            self._in_setters.append(self._input_setter(spec, desc))
        self._out_getters: list[Callable[[], Any]] = []
        self._out_preparers: list[Callable[[], Any]] = []
        for spec in outputs:
            desc = _make_descriptor(spec)
            self._keep.append(desc)
            ptrs.append(ctypes.addressof(desc))
            self._out_getters.append(self._output_getter(spec, desc))
        self._ptrs = ptrs
        self._n_out = len(outputs)
        self._array_outs = [
            (i, g) for i, g in enumerate(self._out_getters) if g.__name__ == "get_array"
        ]
        self._scalar_outs = [
            (i, g) for i, g in enumerate(self._out_getters) if g.__name__ != "get_array"
        ]

    def _input_setter(self, spec: BufferSpec, desc: ctypes.Structure) -> Callable[[Any], Any]:
        if not spec.shape and spec.dtype in _SCALAR_CTYPES:
            buf = _SCALAR_CTYPES[spec.dtype]()
            self._keep.append(buf)
            desc.allocated = desc.aligned = ctypes.addressof(buf)
            pytype = {np.float64: float, np.int64: int, np.bool_: bool}[spec.dtype.type]

            def set_scalar(value: Any, buf=buf, pytype=pytype) -> None:
                buf.value = pytype(value)

            return set_scalar
        dtype = spec.dtype

        def set_array(value: Any, desc=desc, dtype=dtype) -> np.ndarray:
            arr = np.ascontiguousarray(value, dtype=dtype)
            desc.allocated = desc.aligned = arr.ctypes.data
            return arr  # the caller keeps it alive during the call

        return set_array

    def _output_getter(self, spec: BufferSpec, desc: ctypes.Structure) -> Callable[[], Any]:
        if not spec.shape and spec.dtype in _SCALAR_CTYPES:
            buf = _SCALAR_CTYPES[spec.dtype]()
            self._keep.append(buf)
            desc.allocated = desc.aligned = ctypes.addressof(buf)
            wrap = spec.dtype.type

            def get_scalar(buf=buf, wrap=wrap) -> Any:
                return wrap(buf.value)

            return get_scalar
        shape, dtype = spec.shape, spec.dtype

        # arrays: a fresh numpy buffer per call (it is handed to the user)
        def get_array(desc=desc, shape=shape, dtype=dtype) -> np.ndarray:
            arr = np.empty(shape, dtype=dtype)
            desc.allocated = desc.aligned = arr.ctypes.data
            return arr

        return get_array

    def __call__(self, leaves: Sequence[Any]) -> list[Any]:
        """Run the compiled function on flattened inputs; returns the flattened outputs."""
        keep = [setter(v) for setter, v in zip(self._in_setters, leaves, strict=True)]
        outs: list[Any] = [None] * self._n_out
        for i, get_array in self._array_outs:  # fresh result arrays, before the call
            outs[i] = get_array()
        if self._callbacks:
            self._call_with_callbacks()
        else:
            self._fn(*self._ptrs)
        del keep
        if self._error_code is not None and self._error_code():
            self._raise_runtime_error()
        for i, get_scalar in self._scalar_outs:  # scalars are read after it
            outs[i] = get_scalar()
        return outs

    def _call_with_callbacks(self) -> None:
        from cofactor.api_extensions import callbacks

        callbacks.clear_pending()
        self._fn(*self._ptrs)
        try:
            callbacks.raise_pending()
        except BaseException:
            if self._runtime is not None:
                self._runtime.cf_rt_clear_error()
            raise

    def _raise_runtime_error(self) -> None:
        from cofactor import runtime_lib

        runtime_lib.check_error(self._runtime)  # raises RuntimeExecutionError and clears
        raise RuntimeExecutionError("the quantum runtime reported an error")


@functools.cache
def _runtime() -> ctypes.CDLL:
    """The runtime library (the one compiled programs link against), loaded once."""
    from cofactor import runtime_lib, toolchain

    return runtime_lib.load_runtime(toolchain.find("runtime"))
