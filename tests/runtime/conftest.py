"""Fixtures for the runtime tests: the loaded library and a numpy-friendly wrapper of it."""

from __future__ import annotations

import ctypes
from ctypes import c_double, c_int8, c_int64

import numpy as np
import pytest

from cofactor.errors import RuntimeExecutionError
from cofactor.runtime_lib import (
    OBS_KINDS,
    as_pointer,
    check_error,
    gate_ids,
    library_path,
    load_runtime,
)


def _i64(values) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=np.int64).reshape(-1))


class Runtime:
    """Thin numpy wrapper over the C ABI; every call checks the error slot (unless told not
    to), so a runtime error surfaces as RuntimeExecutionError at the call that caused it."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.gates = gate_ids(lib)
        self._keep: list[np.ndarray] = []

    # -- helpers
    def check(self) -> None:
        check_error(self.lib)

    def error(self) -> tuple[int, str]:
        return self.lib.cf_rt_error_code(), self.lib.cf_rt_error_message().decode()

    def clear(self) -> None:
        self.lib.cf_rt_clear_error()

    @staticmethod
    def _p(array, ctype):
        return None if array is None or len(array) == 0 else as_pointer(array, ctype)

    # -- device
    def acquire(self, n: int, shots: int = 0, seed: int = 1234, check: bool = True) -> int:
        status = self.lib.cf_rt_device_acquire(n, shots, seed)
        if check:
            self.check()
        return status

    def release(self) -> None:
        self.lib.cf_rt_device_release()

    # -- gates
    def gate(self, name, params=(), wires=(), adjoint=False, ctrls=(), cvals=None, check=True):
        gate_id = self.gates[name][0] if isinstance(name, str) else name
        p = np.ascontiguousarray(np.asarray(params, dtype=np.float64).reshape(-1))
        w, c = _i64(wires), _i64(ctrls)
        v = np.ascontiguousarray(
            np.asarray(cvals if cvals is not None else [1] * len(c), dtype=np.int8)
        )
        self.lib.cf_rt_gate(
            gate_id,
            self._p(p, c_double),
            len(p),
            self._p(w, c_int64),
            len(w),
            int(adjoint),
            self._p(c, c_int64),
            self._p(v, c_int8),
            len(c),
        )
        if check:
            self.check()

    def pauli_rot(self, theta, word, wires, adjoint=False, ctrls=(), cvals=None, check=True):
        w, c = _i64(wires), _i64(ctrls)
        v = np.asarray(cvals if cvals is not None else [1] * len(c), dtype=np.int8)
        self.lib.cf_rt_pauli_rot(
            theta,
            word.encode(),
            self._p(w, c_int64),
            len(w),
            int(adjoint),
            self._p(c, c_int64),
            self._p(v, c_int8),
            len(c),
        )
        if check:
            self.check()

    def unitary(self, matrix, wires, adjoint=False, ctrls=(), cvals=None, check=True):
        m = np.ascontiguousarray(np.asarray(matrix, dtype=np.complex128))
        w, c = _i64(wires), _i64(ctrls)
        v = np.asarray(cvals if cvals is not None else [1] * len(c), dtype=np.int8)
        self.lib.cf_rt_unitary(
            as_pointer(m, c_double),
            self._p(w, c_int64),
            len(w),
            int(adjoint),
            self._p(c, c_int64),
            self._p(v, c_int8),
            len(c),
        )
        if check:
            self.check()

    # -- observables
    def named(self, kind: str, wire: int) -> int:
        h = self.lib.cf_rt_obs_named(OBS_KINDS[kind], wire)
        self.check()
        return h

    def hermitian(self, matrix, wires) -> int:
        m = np.ascontiguousarray(np.asarray(matrix, dtype=np.complex128))
        w = _i64(wires)
        h = self.lib.cf_rt_obs_hermitian(as_pointer(m, c_double), self._p(w, c_int64), len(w))
        self.check()
        return h

    def tensor(self, handles) -> int:
        h_ = _i64(handles)
        h = self.lib.cf_rt_obs_tensor(self._p(h_, c_int64), len(h_))
        self.check()
        return h

    def hamiltonian(self, coeffs, handles, diff: bool = False) -> int:
        """`diff`: cf_rt_obs_hamiltonian_diff (the coefficients are tape parameters)."""
        c = np.ascontiguousarray(np.asarray(coeffs, dtype=np.float64))
        h_ = _i64(handles)
        fn = self.lib.cf_rt_obs_hamiltonian_diff if diff else self.lib.cf_rt_obs_hamiltonian
        h = fn(self._p(c, c_double), self._p(h_, c_int64), len(h_))
        self.check()
        return h

    # -- measurements
    def n(self) -> int:
        n = self.lib.cf_rt_num_qubits()
        self.check()
        return n

    def state(self) -> np.ndarray:
        out = np.zeros(2 ** self.n(), dtype=np.complex128)
        self.lib.cf_rt_state(as_pointer(out, c_double))
        self.check()
        return out

    def set_state(self, amplitudes) -> None:
        a = np.ascontiguousarray(np.asarray(amplitudes, dtype=np.complex128))
        self.lib.cf_rt_set_state(as_pointer(a, c_double))
        self.check()

    def probs(self, wires=()) -> np.ndarray:
        w = _i64(wires)
        out = np.zeros(2 ** (len(w) or self.n()))
        self.lib.cf_rt_probs(as_pointer(out, c_double), self._p(w, c_int64), len(w))
        self.check()
        return out

    def expval(self, h: int) -> float:
        value = self.lib.cf_rt_expval(h)
        self.check()
        return value

    def var(self, h: int) -> float:
        value = self.lib.cf_rt_var(h)
        self.check()
        return value

    def sample(self, wires=()) -> np.ndarray:
        w = _i64(wires)
        k = len(w) or self.n()
        out = np.zeros((self.lib.cf_rt_shots(), k), dtype=np.int64)
        self.lib.cf_rt_sample(as_pointer(out, c_int64), self._p(w, c_int64), len(w))
        self.check()
        return out

    def counts(self, wires=()) -> np.ndarray:
        w = _i64(wires)
        out = np.zeros(2 ** (len(w) or self.n()), dtype=np.int64)
        self.lib.cf_rt_counts(as_pointer(out, c_int64), self._p(w, c_int64), len(w))
        self.check()
        return out

    def measure(self, wire, reset=False, postselect=-1) -> int:
        outcome = self.lib.cf_rt_measure(wire, int(reset), postselect)
        self.check()
        return outcome

    # -- differentiation
    def tape_start(self):
        self.lib.cf_rt_tape_start()
        self.check()

    def tape_stop(self):
        self.lib.cf_rt_tape_stop()
        self.check()

    def num_params(self) -> int:
        return self.lib.cf_rt_tape_num_params()

    def adjoint_jacobian(self, handles) -> np.ndarray:
        h = _i64(handles)
        jac = np.zeros((len(h), self.num_params()))
        self.lib.cf_rt_adjoint_jacobian(self._p(h, c_int64), len(h), as_pointer(jac, c_double))
        self.check()
        return jac

    def replay_shifted(self, index: int, shift: float) -> None:
        self.lib.cf_rt_tape_replay_shifted(index, shift)
        self.check()


@pytest.fixture(scope="session")
def lib() -> ctypes.CDLL:
    path = library_path()
    if not path.is_file():
        pytest.fail(
            f"the runtime library {path} is missing: run `make setup` (or build it with "
            "cmake/ninja and point COFACTOR_RUNTIME_LIB at libcofactor_runtime.so)",
            pytrace=False,
        )
    return load_runtime(path)


@pytest.fixture(scope="session")
def runtime(lib) -> Runtime:
    return Runtime(lib)


@pytest.fixture
def rt(runtime):
    """The wrapper, with a clean error slot and no device before and after each test."""
    runtime.clear()
    runtime.release()
    yield runtime
    runtime.clear()
    runtime.release()


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


__all__ = ["Runtime", "RuntimeExecutionError"]


# ---- PennyLane references --------------------------------------------------------------
def pl_op(name, params, wires, adjoint=False, ctrls=(), cvals=None):
    """The PennyLane operation matching a runtime gate call."""
    import pennylane as qml

    op = getattr(qml, name)(*params, wires=list(wires))
    if adjoint:
        op = qml.adjoint(op)
    if len(ctrls):
        op = qml.ctrl(
            op, control=list(ctrls), control_values=None if cvals is None else list(cvals)
        )
    return op


def runtime_matrix(rt: Runtime, n: int, apply, *args, **kwargs) -> np.ndarray:
    """The matrix of `apply(*args, **kwargs)` on n qubits, column j being its action on basis
    state j."""
    dim = 2**n
    columns = []
    for j in range(dim):
        basis = np.zeros(dim, dtype=np.complex128)
        basis[j] = 1
        rt.set_state(basis)
        apply(*args, **kwargs)
        columns.append(rt.state())
    return np.array(columns).T


@pytest.fixture(scope="session")
def reference():
    """Helpers shared by the test files (pytest's import mode may keep them from importing
    each other)."""

    class Reference:
        op = staticmethod(pl_op)
        matrix = staticmethod(runtime_matrix)

    return Reference
