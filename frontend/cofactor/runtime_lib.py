"""ctypes binding of the runtime library (runtime/include/cofactor/runtime.h).

The launcher loads the library with RTLD_GLOBAL before loading compiled programs, so that
their `cf_rt_*` references resolve to it; tests and benchmarks call it directly. Only the
standard library is imported here (no numpy, no pennylane).
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_char_p, c_double, c_int8, c_int64, c_void_p
from pathlib import Path
from typing import Any

from cofactor.errors import RuntimeExecutionError, ToolchainNotFoundError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIBRARY = REPO_ROOT / "build" / "lib" / "libcofactor_runtime.so"

# Status codes (enum cf_status) and named observables (enum cf_named_obs).
CF_OK = 0
CF_ERR_INVALID_ARGUMENT = 1
CF_ERR_OUT_OF_MEMORY = 2
CF_ERR_NO_DEVICE = 3
CF_ERR_POSTSELECTION = 4
CF_ERR_NOT_SUPPORTED = 5
CF_ERR_INTERNAL = 6
CF_ERR_INDEX = 7
CF_ERR_INTERRUPTED = 8
CF_ERR_NOT_FINITE = 9
OBS_KINDS = {"Identity": 0, "PauliX": 1, "PauliY": 2, "PauliZ": 3, "Hadamard": 4}

_dp, _ip, _bp = POINTER(c_double), POINTER(c_int64), POINTER(c_int8)

# name -> (restype, argtypes), in the order of runtime.h
SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "cf_rt_error_code": (c_int64, []),
    "cf_rt_error_message": (c_char_p, []),
    "cf_rt_clear_error": (None, []),
    "cf_rt_report_error": (None, [c_int64, c_char_p]),
    "cf_rt_index_error": (None, [c_int64, c_int64, c_int64]),
    # (the status is read from the error slot afterwards, as after a direct call)
    "cf_rt_call": (None, [c_void_p, c_void_p, c_int64, c_int64]),
    "cf_rt_device_acquire": (c_int64, [c_int64, c_int64, c_int64]),
    "cf_rt_device_release": (None, []),
    "cf_rt_seeded_call_begin": (c_int64, []),
    "cf_rt_seeded_call_end": (None, [c_int64]),
    "cf_rt_num_qubits": (c_int64, []),
    "cf_rt_shots": (c_int64, []),
    "cf_rt_set_distributed": (c_int64, [c_int64]),
    "cf_rt_distributed_info": (c_int64, [_ip, _ip]),
    "cf_rt_distributed_abort": (None, [c_char_p]),
    "cf_rt_gate": (None, [c_int64, _dp, c_int64, _ip, c_int64, c_int8, _ip, _bp, c_int64]),
    "cf_rt_pauli_rot": (None, [c_double, c_char_p, _ip, c_int64, c_int8, _ip, _bp, c_int64]),
    "cf_rt_unitary": (None, [_dp, _ip, c_int64, c_int8, _ip, _bp, c_int64]),
    "cf_rt_gate_table": (None, [_ip, c_int64, _dp, _ip]),
    "cf_rt_obs_named": (c_int64, [c_int64, c_int64]),
    "cf_rt_obs_hermitian": (c_int64, [_dp, _ip, c_int64]),
    "cf_rt_obs_tensor": (c_int64, [_ip, c_int64]),
    "cf_rt_obs_hamiltonian": (c_int64, [_dp, _ip, c_int64]),
    "cf_rt_obs_hamiltonian_diff": (c_int64, [_dp, _ip, c_int64]),
    "cf_rt_expval": (c_double, [c_int64]),
    "cf_rt_var": (c_double, [c_int64]),
    "cf_rt_probs": (None, [_dp, _ip, c_int64]),
    "cf_rt_state": (None, [_dp]),
    "cf_rt_sample": (None, [_ip, _ip, c_int64]),
    "cf_rt_counts": (None, [_ip, _ip, c_int64]),
    "cf_rt_measure": (c_int8, [c_int64, c_int8, c_int64]),
    "cf_rt_tape_start": (None, []),
    "cf_rt_tape_stop": (None, []),
    "cf_rt_tape_num_params": (c_int64, []),
    "cf_rt_adjoint_jacobian": (None, [_ip, c_int64, _dp]),
    "cf_rt_tape_replay_shifted": (None, [c_int64, c_double]),
    "cf_rt_jacobian_recorded": (None, [_dp, c_int64, c_int64]),
    "cf_rt_jacobian_recorded_shift": (None, [_dp, c_int64, c_int64]),
    "cf_rt_set_state": (None, [_dp]),
    "cf_rt_gate_info": (c_char_p, [c_int64, _ip, _ip]),
    "cf_rt_gate_repeat": (None, [c_int64, c_int64, _dp, c_int64, _ip, c_int64]),
    "cf_rt_num_threads": (c_int64, []),
    "cf_rt_set_num_threads": (None, [c_int64]),
    "cf_rt_parallel_loops": (c_int64, []),
}

THREADS_ENV = "COFACTOR_NUM_THREADS"


def check_threads_env() -> None:
    """Warns (RuntimeWarning) when COFACTOR_NUM_THREADS is set to something the runtime
    ignores: it wants a positive integer or "auto" (runtime/README.md, "Threads")."""
    value = os.environ.get(THREADS_ENV)
    if value is None or value.strip() in ("", "auto"):
        return
    text = value.strip()
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        import warnings

        warnings.warn(
            f"{THREADS_ENV}={value!r} is not a positive integer or 'auto'; the runtime ignores "
            "it and uses its default thread count (OMP_NUM_THREADS, else the CPUs this "
            "process may run on)",
            RuntimeWarning,
            stacklevel=3,
        )


def library_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Where the runtime is: `path`, else $COFACTOR_RUNTIME_LIB, else <repo>/build/lib."""
    if path is not None:
        return Path(path)
    env = os.environ.get("COFACTOR_RUNTIME_LIB")
    return Path(env) if env else DEFAULT_LIBRARY


def load_runtime(path: str | os.PathLike[str] | None = None) -> RuntimeLibrary:
    """Loads the runtime (RTLD_GLOBAL); each cf_rt_* function gets its argtypes/restype
    (SIGNATURES) when it is first looked up."""
    # (strings, not library_path's Path: the launcher loads the runtime on the first call
    # of a process)
    lib_path = (
        os.fspath(path)
        if path is not None
        else os.environ.get("COFACTOR_RUNTIME_LIB") or _DEFAULT_LIBRARY_STR
    )
    if not os.path.isfile(lib_path):
        raise ToolchainNotFoundError(
            f"cofactor runtime library not found at {lib_path}; build it with `make setup` "
            "(or set COFACTOR_RUNTIME_LIB)"
        )
    check_threads_env()
    return RuntimeLibrary(lib_path, mode=ctypes.RTLD_GLOBAL)


_DEFAULT_LIBRARY_STR = str(DEFAULT_LIBRARY)


class Library(ctypes.CDLL):
    """`ctypes.CDLL(name, mode)`, with one function-pointer class for every library: CDLL
    makes a class per library it loads (20-50 us each on the first call of a process, which
    loads the runtime and a compiled library). Function pointers are the same: C calling
    convention, `int` result until told otherwise, no errno capture."""

    class _FuncPtr(ctypes._CFuncPtr):  # type: ignore[name-defined]
        _flags_ = ctypes._FUNCFLAG_CDECL  # type: ignore[attr-defined]
        _restype_ = ctypes.c_int

    def __init__(self, name: str, mode: int = ctypes.DEFAULT_MODE) -> None:
        self._name = name
        self._handle = ctypes._dlopen(name, mode)  # type: ignore[attr-defined]


class RuntimeLibrary(Library):
    """The runtime, each `cf_rt_*` function declared (restype/argtypes from SIGNATURES) on
    its first use: declaring all 40 when the library is loaded was a fifth of a millisecond
    of the first call of every process, which uses two or three of them."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        fn = self[name]
        signature = SIGNATURES.get(name)
        if signature is not None:
            fn.restype, fn.argtypes = signature
        # kept as an attribute only once declared (another thread may look it up meanwhile)
        setattr(self, name, fn)
        return fn


def error_message(lib: ctypes.CDLL) -> str:
    raw = lib.cf_rt_error_message()
    return raw.decode("utf-8", "replace") if raw else ""


#: Status codes that surface as a Python exception other than RuntimeExecutionError.
_PYTHON_EXCEPTIONS: dict[int, type[BaseException]] = {
    CF_ERR_INDEX: IndexError,
    CF_ERR_INTERRUPTED: KeyboardInterrupt,
    CF_ERR_NOT_FINITE: ValueError,
}


#: Errors that compiled code detects and reports with `cf_rt_report_error(code, NULL)`
#: (tracing/runtime_errors.py): codes from FIRST_COMPILED_CODE on, in the order of this
#: table (never reorder: the codes are compiled into cached programs), mapped to numpy's
#: exception and message.
FIRST_COMPILED_CODE = 100
COMPILED_CODE_ERRORS: dict[str, tuple[type[Exception], str]] = {
    "negative_int_power": (ValueError, "Integers to negative integer powers are not allowed."),
    "basis_state_bits": (ValueError, "Basis state must only consist of 0s and 1s"),
    "range_step_zero": (ValueError, "for_loop step must not be zero (range() arg 3)"),
    "diagonal_unitary": (
        ValueError,
        "Operator must be unitary: a DiagonalQubitUnitary's entries (computed at run time) "
        "must have modulus 1 (e.g. qml.exp(H, c) needs an imaginary coefficient c)",
    ),
    "state_norm": (
        ValueError,
        "The state must be a vector of norm 1.0: the state given to qml.StatePrep / "
        "qml.AmplitudeEmbedding / qml.MottonenStatePreparation (computed at run time) is not "
        "normalized. Use 'normalize=True' to automatically normalize.",
    ),
    "basis_state_integer": (
        ValueError,
        "Integer state must be < 2**len(wires) to have a feasible binary representation: "
        "the integer given to qml.BasisState / qml.BasisEmbedding (computed at run time) has "
        "more bits than there are wires",
    ),
}


def compiled_code_error(code: int) -> tuple[type[Exception], str] | None:
    """The exception type and message of a code of COMPILED_CODE_ERRORS (None for others)."""
    index = code - FIRST_COMPILED_CODE
    if 0 <= index < len(COMPILED_CODE_ERRORS):
        return list(COMPILED_CODE_ERRORS.values())[index]
    return None


def check_error(lib: ctypes.CDLL) -> None:
    """Raises the exception of a pending runtime error, clearing the slot first:
    IndexError (CF_ERR_INDEX), KeyboardInterrupt (CF_ERR_INTERRUPTED), ValueError
    (CF_ERR_NOT_FINITE: NaN/inf where a finite number is needed), otherwise
    RuntimeExecutionError with the status in `.code`."""
    code = lib.cf_rt_error_code()
    if code == CF_OK:
        return
    message = error_message(lib)
    lib.cf_rt_clear_error()
    raised = compiled_code_error(code)  # what numpy raises, detected by compiled code
    if raised is not None:
        kind, message = raised
    else:
        kind = _PYTHON_EXCEPTIONS.get(code, RuntimeExecutionError)
    error = kind(message)
    error.code = code  # type: ignore[attr-defined]
    raise error


def gate_ids(lib: ctypes.CDLL) -> dict[str, tuple[int, int, int]]:
    """name -> (gate id, number of parameters, number of wires (-1: any)) from the library."""
    table: dict[str, tuple[int, int, int]] = {}
    np_, nw = c_int64(), c_int64()
    gate_id = 0
    while (name := lib.cf_rt_gate_info(gate_id, ctypes.byref(np_), ctypes.byref(nw))) is not None:
        table[name.decode()] = (gate_id, np_.value, nw.value)
        gate_id += 1
    return table


def as_pointer(array: object, ctype: type) -> object:
    """A ctypes pointer to the data of a numpy array (or None for None / empty arrays)."""
    if array is None:
        return None
    return ctypes.cast(c_void_p(array.ctypes.data), POINTER(ctype))  # type: ignore[attr-defined]
