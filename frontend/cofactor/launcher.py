"""Calling a compiled entry point through ctypes.

Everything that depends only on the signature is prepared once, when the library is loaded:
the ctypes function, one memref descriptor struct per argument, persistent scalar buffers
(their addresses are fixed in the descriptors), and the plan for output buffers. A call then
only writes scalar values / array pointers into the descriptors, calls
`_mlir_ciface_<name>`, checks the runtime's error slot and wraps the outputs. Calls that
overlap (threads, callbacks) each get their own descriptors.
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from _ctypes import dlclose as _dlclose
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cofactor.errors import RuntimeExecutionError
from cofactor.runtime_lib import Library

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


def _descriptor_words(shape: tuple[int, ...]) -> int:
    """How many 8-byte words the descriptor of a memref of `shape` takes (`descriptor_type`:
    two pointers, the offset, the sizes and the strides)."""
    return 3 + 2 * len(shape)


def _fill_descriptor(words: ctypes.Array, at: int, shape: tuple[int, ...]) -> None:
    """Write the offset (0), sizes and row-major strides of a memref of `shape` into the
    descriptor at word `at` of `words`; its two pointers are set per call."""
    rank = len(shape)
    words[at + 2] = 0
    # row-major strides, innermost first (by hand: numpy's cumprod costs more, on the first
    # call of a process a tenth of a millisecond)
    stride = 1
    for i in reversed(range(rank)):
        words[at + 3 + i] = shape[i]
        words[at + 3 + rank + i] = stride
        stride *= shape[i]


#: A slot's descriptors of up to this many words (eight rank-1 memrefs, three of rank 3) lie
#: in an array of one ctypes type made at import: a new array type (`c_int64 * n`, made
#: once per length) cost ~50 us on the first call of a process.
_SLOT_WORDS = 32
_SlotWords = ctypes.c_int64 * _SLOT_WORDS


class _Slot:
    """One set of descriptors and scalar buffers: what one call in flight writes to.

    The descriptors hold the addresses of the scalar buffers, so they are built once and
    reused; a slot is taken by exactly one call at a time (see `Launcher.__call__`)."""

    __slots__ = ("ptrs", "argv", "in_setters", "array_outs", "scalar_outs", "_keep")

    def __init__(self, inputs: Sequence[BufferSpec], outputs: Sequence[BufferSpec]) -> None:
        # Every descriptor of the slot, one after another in one array of 8-byte words (the
        # layout of `descriptor_type`'s structs, which have no padding): one ctypes type for
        # the slot (ctypes keeps it) instead of a Structure class per rank, each a twentieth
        # of a millisecond to make on the first call of a process.
        shapes = [spec.memref_shape for spec in (*inputs, *outputs)]
        size = sum(map(_descriptor_words, shapes))
        words = (_SlotWords if size <= _SLOT_WORDS else ctypes.c_int64 * size)()
        base = ctypes.addressof(words)
        self._keep: list[Any] = [words]
        self.ptrs: list[int] = []
        at = 0
        offsets = []
        for shape in shapes:
            _fill_descriptor(words, at, shape)
            self.ptrs.append(base + 8 * at)
            offsets.append(at)
            at += _descriptor_words(shape)
        # the same addresses as one C array, for the runtime's cf_rt_call (a numpy array:
        # a ctypes array type of a new length costs ~50 us on the first call of a process)
        argv = np.array(self.ptrs or [0], dtype=np.uint64)
        self._keep.append(argv)
        self.argv = ctypes.c_void_p(argv.ctypes.data)
        self.in_setters: list[Callable[[Any], Any]] = [
            self._input_setter(spec, words, at, i)
            for i, (spec, at) in enumerate(zip(inputs, offsets, strict=False))
        ]
        self.array_outs: list[tuple[int, Callable[[], Any]]] = []
        self.scalar_outs: list[tuple[int, Callable[[], Any]]] = []
        for i, (spec, at) in enumerate(zip(outputs, offsets[len(inputs) :], strict=True)):
            getter = self._output_getter(spec, words, at)
            is_array = getter.__name__ == "get_array"
            (self.array_outs if is_array else self.scalar_outs).append((i, getter))

    def _input_setter(
        self, spec: BufferSpec, words: ctypes.Array, at: int, index: int
    ) -> Callable[[Any], Any]:
        if not spec.shape and spec.dtype in _SCALAR_CTYPES:
            buf = _SCALAR_CTYPES[spec.dtype]()
            self._keep.append(buf)
            words[at] = words[at + 1] = ctypes.addressof(buf)  # allocated, aligned
            if spec.dtype == np.int64:
                # ctypes would wrap an int outside int64 silently; numpy raises
                def set_int(value: Any, buf=buf, index=index) -> None:
                    value = int(value)
                    if not _INT64_MIN <= value <= _INT64_MAX:
                        raise OverflowError(
                            f"argument leaf {index}: Python int too large to convert to C "
                            f"long ({value} is outside the int64 range of compiled code)"
                        )
                    buf.value = value

                return set_int
            pytype = {np.float64: float, np.bool_: bool}[spec.dtype.type]

            def set_scalar(value: Any, buf=buf, pytype=pytype) -> None:
                buf.value = pytype(value)

            return set_scalar
        dtype = spec.dtype

        def set_array(value: Any, words=words, at=at, dtype=dtype) -> np.ndarray:
            arr = np.ascontiguousarray(value, dtype=dtype)
            words[at] = words[at + 1] = arr.ctypes.data
            return arr  # the caller keeps it alive during the call

        return set_array

    def _output_getter(self, spec: BufferSpec, words: ctypes.Array, at: int) -> Callable[[], Any]:
        if not spec.shape and spec.dtype in _SCALAR_CTYPES:
            buf = _SCALAR_CTYPES[spec.dtype]()
            self._keep.append(buf)
            words[at] = words[at + 1] = ctypes.addressof(buf)
            wrap = spec.dtype.type

            def get_scalar(buf=buf, wrap=wrap) -> Any:
                return wrap(buf.value)

            return get_scalar
        if not spec.shape and spec.dtype == np.complex128:
            # a complex scalar is a memref of its two doubles: read after the call into
            # numpy's complex128, as numpy returns it (a 0-d array was returned before)
            pair = np.empty(2, dtype=np.float64)
            self._keep.append(pair)
            words[at] = words[at + 1] = pair.ctypes.data

            def get_scalar(pair=pair) -> Any:
                return np.complex128(complex(pair[0], pair[1]))

            return get_scalar
        shape, dtype = spec.shape, spec.dtype

        # arrays: a fresh numpy buffer per call (it is handed to the user)
        def get_array(words=words, at=at, shape=shape, dtype=dtype) -> np.ndarray:
            arr = np.empty(shape, dtype=dtype)
            words[at] = words[at + 1] = arr.ctypes.data
            return arr

        return get_array


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class Launcher:
    """A loaded entry point, ready to be called with flattened numpy inputs.

    Calls may overlap: from several threads (ctypes releases the GIL during the call), or
    re-entrantly from a Python callback. Each call takes a `_Slot` (descriptors and scalar
    buffers) from a pool, and puts it back afterwards; the pool grows to the number of
    calls ever in flight at once, so an uncontended call costs a list pop and append.
    The runtime's device, error slot and tapes are per thread. The library is unloaded
    (dlclose) when the last reference to it goes.
    """

    def __init__(
        self,
        so_path: Path,
        name: str,
        inputs: Sequence[BufferSpec],
        outputs: Sequence[BufferSpec],
        check_runtime: bool,
        *,
        callbacks: bool = False,
        seeded: bool = False,
    ) -> None:
        # The runtime first (RTLD_GLOBAL): the library's dependency on it then resolves to
        # the loaded copy by its name, without searching the library's RUNPATH (tens of
        # file lookups on the first call of a process).
        self._runtime = _runtime() if check_runtime else None
        self.lib = _load(str(so_path))
        # not at interpreter exit: a daemon thread may still be running the code
        weakref.finalize(self.lib, _unload, self.lib._handle).atexit = False
        self._fn = self.lib[f"_mlir_ciface_{name}"]  # (not cached on self.lib)
        self._fn.restype = None
        self._fn.argtypes = [ctypes.c_void_p] * (len(inputs) + len(outputs))
        # A program that uses the runtime is called through it (cf_rt_call): its buffers
        # come from the runtime's checked allocator, which returns there when one cannot be
        # had, and counts the result arrays allocated below against the memory budget.
        self._run = None
        n_args = len(inputs) + len(outputs)
        if self._runtime is not None and n_args <= _MAX_RUNTIME_CALL_ARGS:
            call = self._runtime.cf_rt_call
            # ctypes objects made once: the call converts nothing but the slot's array
            address = ctypes.c_void_p(ctypes.cast(self._fn, ctypes.c_void_p).value)
            count = ctypes.c_int64(n_args)
            result_bytes = ctypes.c_int64(
                sum(int(np.prod(spec.shape)) * spec.dtype.itemsize for spec in outputs)
            )

            def run(slot: _Slot) -> None:
                call(address, slot.argv, count, result_bytes)

            self._run = run
        self._error_code = self._runtime.cf_rt_error_code if self._runtime else None
        self._callbacks = callbacks  # Python callbacks: their exceptions are re-raised
        # qjit(seed=...): the runtime counts a circuit's runs within each call, so that
        # they sample differently while every call repeats the last (runtime.h)
        self._seeded = seeded and self._runtime is not None
        self._inputs, self._outputs = tuple(inputs), tuple(outputs)
        self._n_out = len(outputs)
        self._pool: list[_Slot] = [_Slot(inputs, outputs)]

    def __call__(self, leaves: Sequence[Any]) -> list[Any]:
        """Run the compiled function on flattened inputs; returns the flattened outputs."""
        pool = self._pool
        try:
            slot = pool.pop()
        except IndexError:  # another call is in flight: this one gets its own slot
            slot = _Slot(self._inputs, self._outputs)
        try:
            keep = [setter(v) for setter, v in zip(slot.in_setters, leaves, strict=True)]
            outs: list[Any] = [None] * self._n_out
            for i, get_array in slot.array_outs:  # fresh result arrays, before the call
                outs[i] = get_array()
            seeded = self._seeded
            if seeded:
                previous = self._runtime.cf_rt_seeded_call_begin()
            try:
                if self._callbacks:
                    self._call_with_callbacks(slot)
                else:
                    try:
                        if self._run is not None:
                            self._run(slot)
                        else:
                            self._fn(*slot.ptrs)
                    except KeyboardInterrupt:  # Python's SIGINT handler, right after the call
                        self._forget_interrupt()
                        raise
            finally:
                if seeded:
                    self._runtime.cf_rt_seeded_call_end(previous)
            del keep
            if self._error_code is not None and self._error_code():
                self._raise_runtime_error()
            for i, get_scalar in slot.scalar_outs:  # scalars are read after it
                outs[i] = get_scalar()
        finally:
            pool.append(slot)
        return outs

    def _call_with_callbacks(self, slot: _Slot) -> None:
        from cofactor.api_extensions import callbacks

        callbacks.clear_pending()
        try:
            if self._run is not None:
                self._run(slot)
            else:
                self._fn(*slot.ptrs)
            callbacks.raise_pending()
        except BaseException:
            if self._runtime is not None:
                self._runtime.cf_rt_clear_error()
            callbacks.clear_pending()
            raise

    def _forget_interrupt(self) -> None:
        """Python raised KeyboardInterrupt itself: drop the runtime's matching report."""
        if self._runtime is not None and self._error_code() == _CF_ERR_INTERRUPTED:
            self._runtime.cf_rt_clear_error()

    def _raise_runtime_error(self) -> None:
        from cofactor import runtime_lib

        runtime_lib.check_error(self._runtime)  # raises RuntimeExecutionError and clears
        raise RuntimeExecutionError("the quantum runtime reported an error")


_CF_ERR_INTERRUPTED = 8  # runtime_lib.CF_ERR_INTERRUPTED (not imported on the call path)
_MAX_RUNTIME_CALL_ARGS = 64  # runtime.h's CF_RT_CALL_MAX_ARGS


def _unload(handle: int) -> None:
    """dlclose a compiled library once nothing refers to it (its CDLL object and every
    function pointer taken from it are gone)."""
    try:
        _dlclose(handle)
    except OSError:
        pass


def _load(path: str) -> Library:
    """Load a compiled library. One that does not depend on the runtime (a classical
    program: the driver links the runtime only when it is called) may still call a helper
    of the compiler's support library, libgcc_s (e.g. `__powidf2`), which the runtime's
    dependencies bring: a library that fails on an undefined symbol is loaded again once
    the runtime and its dependencies are loaded (RTLD_GLOBAL), where such a library always
    found them when it depended on the runtime."""
    try:
        return Library(path)
    except OSError as err:
        if "undefined symbol" not in str(err):
            raise
    _runtime()
    return Library(path)


@functools.cache
def _runtime() -> ctypes.CDLL:
    """The runtime library (the one compiled programs link against), loaded once."""
    from cofactor import distributed, runtime_lib, toolchain

    lib = runtime_lib.load_runtime(toolchain.TOOLS["runtime"].locate())  # (a str: no pathlib)
    if distributed.requested():  # COFACTOR_MPI=1: an error on one rank ends every rank
        distributed.install_excepthook(lib)
    return lib
