"""Clifford+T words (Ross-Selinger, "gridsynth") of traced angles, without JAX.

PennyLane approximates an `RZ`/`PhaseShift` by a Clifford+T word with its pure-Python
Ross-Selinger search (`qml.ops.rs_decomposition`). That search needs the numeric angle; under
a compiler PennyLane switches to a JAX path (`is_qjit=True`: a `pure_callback` returning the
word as padded integer arrays, replayed with the compiler's `for_loop`/`cond`), which needs
JAX, and `clifford_t_decomposition` only takes it when the active compiler is named "catalyst".

cofactor's own path, installed while a circuit is traced (`traced_angles()`):

- `clifford_t_decomposition(method="gridsynth")` on a traced angle: PennyLane's decomposition
  cache is replaced for the duration by one that answers a traced angle with a
  `CliffordTWord` (a concrete angle still takes PennyLane's own cached, uncompiled search).
- `clifford_t_decomposition` passes mid-circuit measurements (PennyLane `MidMeasure`s on
  the tape while cofactor traces) through, as it does Catalyst's `MidCircuitMeasure`.
- `rs_decomposition(op, epsilon, is_qjit=True)`: the names PennyLane's JAX path reads
  (`is_jax`, `jnp`, `ShapedArray`, `jax`, the "catalyst" entry point, `_jit_rs_decomposition`)
  are numpy/cofactor stand-ins, so that path runs with cofactor's `pure_callback`.

A `CliffordTWord` runs the search at run time in a callback (the same PennyLane function as
uncompiled, so the same gates) and applies its gates with a loop over their codes and an
index switch; the word's global phase is a `GlobalPhase`. Method "sk" (Solovay-Kitaev) on a
traced angle is refused with PennyLane's RuntimeError.
"""

from __future__ import annotations

import contextlib
import math
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pennylane as qml

from cofactor.tracing.tracer import Scalar, Tracer

# gate name -> code of the word; Identity is dropped, GlobalPhase goes to the phase
_GATES: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("T", lambda w: qml.T(w)),
    ("Adjoint(T)", lambda w: qml.ops.Adjoint(qml.T(w))),
    ("Hadamard", lambda w: qml.H(w)),
    ("S", lambda w: qml.S(w)),
    ("Adjoint(S)", lambda w: qml.ops.Adjoint(qml.S(w))),
    ("PauliX", lambda w: qml.X(w)),
    ("PauliY", lambda w: qml.Y(w)),
    ("PauliZ", lambda w: qml.Z(w)),
    ("SX", lambda w: qml.SX(w)),
    ("Adjoint(SX)", lambda w: qml.ops.Adjoint(qml.SX(w))),
)
_CODES = {name: i for i, (name, _) in enumerate(_GATES)}


def _traced(x: Any) -> bool:
    return isinstance(x, Tracer | Scalar)


def word_size(epsilon: float) -> int:
    """An upper bound on the gates of a word: PennyLane's bound on the syllables of its
    compressed normal form (10 log2(1/eps), up to three gates each), a leading T and a
    trailing Clifford of up to three gates."""
    return 3 * int(10 * math.log2(1 / epsilon)) + 4


def encode(ops: list[Any], size: int) -> tuple[np.ndarray, int, float]:
    """(codes padded to `size`, number of gates, global phase) of a decomposition."""
    codes, phase = [], 0.0
    for op in ops:
        if op.name == "GlobalPhase":
            phase += float(op.data[0])
        elif op.name != "Identity":
            if op.name not in _CODES:
                raise ValueError(f"gridsynth word: unexpected gate {op.name}")
            codes.append(_CODES[op.name])
    if len(codes) > size:
        raise ValueError(
            f"gridsynth word of {len(codes)} gates is longer than its bound {size}; "
            "use a larger epsilon"
        )
    return np.array(codes + [0] * (size - len(codes)), dtype=np.int64), len(codes), phase


@contextlib.contextmanager
def outside_every_tape() -> Iterator[None]:
    """Where PennyLane's search may build its operators at run time. PennyLane's queuing is
    process-wide: an operator built while another thread builds a circuit lands on that
    thread's tape (a wrong circuit there: gates of this word in another thread's trace), and
    `stop_recording` alone would hide that thread's own gates for the moment it lasts.
    PennyLane's queue lock (a re-entrant lock every thread holds while it builds a circuit,
    cofactor's traces too) waits until no other thread builds one."""
    with qml.queuing.AnnotatedQueue._lock, qml.QueuingManager.stop_recording():
        yield


def run_time_word(angle: Any, size: int, decompose: Callable[[float], list[Any]]) -> tuple:
    """(codes, count, phase) as traced values: `decompose` runs at run time on the angle."""
    from cofactor.api_extensions.callbacks import pure_callback
    from cofactor.jit import ShapeDtype

    def search(a: Any) -> tuple[np.ndarray, int, float]:
        with outside_every_tape():
            return encode(decompose(float(np.asarray(a))), size)

    result_type = (ShapeDtype((size,), np.int64), int, float)
    return pure_callback(search, result_type=result_type)(angle)


class CliffordTWord(qml.operation.Operation):
    """The Clifford+T word given by traced `codes` (the first `count` of them) and a global
    `phase`, on one wire; emitted by cofactor as a loop over the codes (`emit`)."""

    num_wires = 1
    num_params = 3
    grad_method = None

    def __init__(self, codes: Any, count: Any, phase: Any, wires: Any, id: Any = None) -> None:
        super().__init__(codes, count, phase, wires=wires, id=id)

    def cofactor_emit(self, scope: Any, adjoint: bool, ctrl: tuple) -> None:
        from cofactor.api_extensions.control_flow import for_loop
        from cofactor.api_extensions.switch import switch
        from cofactor.errors import CompileError

        if adjoint or ctrl[0]:
            raise CompileError(
                "the adjoint or a controlled version of a gridsynth Clifford+T word of a "
                "traced angle is not supported; decompose the uncontrolled rotation"
            )
        codes, count, phase = self.data
        wire = self.wires[0]

        @for_loop(0, count, 1)
        def gates(i: Any) -> None:
            def make(code: int) -> Callable[[], None]:
                def branch() -> None:
                    _GATES[code][1](wire)

                return branch

            s = switch(codes[i])(make(0))
            for code in range(1, len(_GATES)):
                s.branch(code)(make(code))
            s()

        gates()
        if _traced(phase) or phase != 0.0:
            # emitted directly: when a transformed tape is emitted there is no queue to flush
            with qml.QueuingManager.stop_recording():
                scope.emit_operation(qml.GlobalPhase(phase))


class _TracedAngleCache:
    """Stands in for PennyLane's `_CLIFFORD_T_CACHE` while a circuit is traced: a traced angle
    gets a `CliffordTWord`, a concrete one PennyLane's own (uncompiled) cached search."""

    def __init__(self, module: Any, previous: Any) -> None:
        self.module, self.inner, self.args = module, previous, None

    def compatible(self, method, epsilon, cache_size, cache_eps_rtol, is_qjit, **kwargs) -> bool:
        if self.inner is None or not self.inner.compatible(
            method, epsilon, cache_size, cache_eps_rtol, False, **kwargs
        ):
            self.inner = self.module._CachedCallable(method, epsilon, cache_size, False, **kwargs)
        self.args = (method, epsilon, cache_size, kwargs)
        return True

    def query(self, op: Any) -> list[Any]:
        if not _traced(op.data[0]):
            return self.inner.query(op)
        method, epsilon, cache_size, kwargs = self.args
        if method != "gridsynth":
            raise RuntimeError(
                "Solovay-Kitaev decomposition (method='sk') is not supported for an angle "
                "known only at run time. Use Ross-Selinger decomposition (method='gridsynth') "
                "instead."
            )
        inner, kind = self.inner, type(op)

        def decompose(angle: float) -> list[Any]:
            with qml.QueuingManager.stop_recording():
                return inner.query(kind(angle, wires=0))

        size = word_size(epsilon)
        with qml.QueuingManager.stop_recording():
            codes, count, phase = run_time_word(op.data[0], size, decompose)
            return [CliffordTWord(codes, count, phase, wires=op.wires), qml.GlobalPhase(0.0)]


def _jit_rs_decomposition(wire: Any, info: Any) -> list[Any]:
    """PennyLane's `_jit_rs_decomposition` for cofactor: `info` is what `_jax_free_ops`'s
    `pure_callback` gave, (codes, count): the gates themselves when they are known at trace
    time, else one `CliffordTWord`."""
    codes, count = info
    if _traced(count):
        return [CliffordTWord(codes, count, 0.0, wires=[wire])]
    return [_GATES[int(c)][1](wire) for c in codes[: int(count)]]


def _compressed_to_ops(info: Any) -> list[Any]:
    """The gates (on wire 0, circuit order) of PennyLane's compressed Matsumoto-Amano normal
    form (leading T?, HT/SHT syllables with -1 padding, index of the trailing Clifford), as
    PennyLane's `_jit_rs_decomposition` applies them."""
    from pennylane.ops.op_math.decompositions.normal_forms import _clifford_keys_unwired

    has_leading_t, syllables, clifford = info
    with qml.QueuingManager.stop_recording():
        ops = [qml.T(0)] if int(has_leading_t) == 1 else []
        for s in np.asarray(syllables).tolist():
            if s == 0:
                ops += [qml.H(0), qml.T(0)]
            elif s == 1:
                ops += [qml.S(0), qml.H(0), qml.T(0)]
        for gate in _clifford_keys_unwired()[int(clifford)]:
            ops.append(gate(0))
    return ops


def _jax_free_ops() -> Any:
    """The compiler `ops` that PennyLane's JAX path of `rs_decomposition` asks for. Its
    `pure_callback(eval_ross_algorithm_jitted, result_type)(angle, size)` runs PennyLane's
    search (now, for a concrete angle; at run time in a callback for a traced one) and
    returns ((codes, count), global phase / pi, phase) for `_jit_rs_decomposition` above."""

    def pure_callback(fn: Callable, result_type: Any = None) -> Callable:
        def call(angle: Any, upper_bounded_size: int) -> Any:
            size = 3 * int(upper_bounded_size) + 4

            def search(a: Any) -> tuple[np.ndarray, int, float, float]:
                with outside_every_tape():
                    with traced_angles():  # at run time, outside the trace
                        info, g_phase, phase = fn(float(np.asarray(a)), upper_bounded_size)
                    codes, count, _ = encode(_compressed_to_ops(info), size)
                return codes, count, float(g_phase), float(phase)

            if not _traced(angle):
                codes, count, g_phase, phase = search(angle)
                return (codes, count), g_phase, phase
            from cofactor.api_extensions.callbacks import pure_callback as cf_callback
            from cofactor.jit import ShapeDtype

            types_ = (ShapeDtype((size,), np.int64), int, float, float)
            codes, count, g_phase, phase = cf_callback(search, result_type=types_)(angle)
            return (codes, count), g_phase, phase

        return call

    return types.SimpleNamespace(pure_callback=pure_callback)


class _EntryPoints(dict):
    """PennyLane's compiler entry points, with "catalyst" -> {"ops": the stand-in above}
    (PennyLane's JAX path of `rs_decomposition` loads Catalyst's ops by name)."""

    def __init__(self, real: Any, ops: Any) -> None:
        super().__init__(real.names_entrypoints if real is not None else {})
        loader = types.SimpleNamespace(load=lambda: ops)
        self["catalyst"] = {"ops": loader}


_LOCK = threading.Lock()
_ACTIVE: list[Any] = []  # [number of users, saved globals, the patches] while installed


@contextlib.contextmanager
def traced_angles() -> Iterator[None]:
    """Install cofactor's gridsynth path while a circuit is traced (see the module doc); also
    used by the run-time search. Reference-counted, so that traces in several threads (and
    nested ones) install it once and the last one out restores PennyLane's globals."""
    with _LOCK:
        if not _ACTIVE:
            patches = _patches()
            saved = {
                m: {n: m.__dict__[n] for n in p if n in m.__dict__} for m, p in patches.items()
            }
            for module, values in patches.items():
                for n, v in values.items():
                    setattr(module, n, v)
            _ACTIVE[:] = [0, saved, patches]
        _ACTIVE[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[0] -= 1
            if _ACTIVE[0] == 0:
                _, saved, patches = _ACTIVE
                _ACTIVE.clear()
                _restore(saved, patches)


def _restore(saved: dict, patches: dict) -> None:
    from pennylane.transforms.decompositions import clifford_t_transform as ct

    cache = ct._CLIFFORD_T_CACHE
    for module, values in patches.items():
        for n in values:
            if n in saved[module]:
                setattr(module, n, saved[module][n])
            else:
                module.__dict__.pop(n, None)
    if isinstance(cache, _TracedAngleCache):  # keep what PennyLane's own cache learnt
        ct._CLIFFORD_T_CACHE = cache.inner


def _patches() -> dict[Any, dict[str, Any]]:
    from pennylane.ops.op_math.decompositions import normal_forms as nf
    from pennylane.ops.op_math.decompositions import ross_selinger as rs
    from pennylane.transforms.decompositions import clifford_t_transform as ct

    return {
        # PennyLane's search for its JAX path builds its arrays with `jnp`: numpy does as well
        nf: {"is_jax": True, "jnp": np},
        ct: {
            "_CLIFFORD_T_CACHE": _TracedAngleCache(ct, ct._CLIFFORD_T_CACHE),
            # cofactor's mid-circuit measurements are PennyLane MidMeasures on the tape: the
            # transform passes them through, as it does Catalyst's MidCircuitMeasure
            "_CATALYST_SKIP_OP_TYPES": (*ct._CATALYST_SKIP_OP_TYPES, qml.ops.MidMeasure),
        },
        rs: {
            "jnp": np,
            "is_jax": True,
            "ShapedArray": lambda shape, dtype: None,
            "jax": types.SimpleNamespace(ensure_compile_time_eval=contextlib.nullcontext),
            "AvailableCompilers": types.SimpleNamespace(
                names_entrypoints=_EntryPoints(
                    rs.__dict__.get("AvailableCompilers"), _jax_free_ops()
                )
            ),
            "_jit_rs_decomposition": _jit_rs_decomposition,
        },
    }


def gridsynth_tape(tape: Any, epsilon: float = 1e-4, ppr_basis: bool = False) -> tuple:
    """Catalyst's `gridsynth` pass (`qml.transforms.gridsynth`, a pass without a tape
    implementation in PennyLane) as a tape transform: every RZ/PhaseShift becomes PennyLane's
    Ross-Selinger word of its angle (found now, or at run time for a traced angle)."""
    from cofactor.errors import CompileError

    if ppr_basis:
        raise CompileError(
            "qml.transforms.gridsynth(ppr_basis=True) (the Pauli-product-rotation basis) is not "
            "supported by cofactor; use ppr_basis=False (Clifford+T)"
        )
    ops: list[Any] = []
    with qml.QueuingManager.stop_recording():
        for op in tape.operations:
            if not isinstance(op, qml.RZ | qml.PhaseShift):
                ops.append(op)
            elif not _traced(op.data[0]):
                ops += qml.ops.rs_decomposition(op, epsilon)
            else:
                kind = type(op)

                def decompose(angle: float, kind: Any = kind) -> list[Any]:
                    with qml.QueuingManager.stop_recording():
                        return qml.ops.rs_decomposition(kind(angle, wires=0), epsilon)

                word = run_time_word(op.data[0], word_size(epsilon), decompose)
                ops.append(CliffordTWord(*word, wires=op.wires))
    return [tape.copy(operations=ops)], lambda results: results[0]
