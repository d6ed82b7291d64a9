"""cofactor's own decomposition rules, applied before PennyLane's.

PennyLane's rules for a few operators do not work on traced parameters or take a JAX path
because "a compiler is active" (`qml.compiler.active()` is true while cofactor traces):

- `Exp` / `Evolution` (`qml.exp`, `qml.evolve`, the terms of `TrotterProduct`): PennyLane
  calls `real_if_close` and multiplies in place (`coeff *= base.scalar`) on the
  coefficient; here an exponential of a sum of *commuting* Pauli words (traced coefficients
  allowed) becomes one `PauliRot` per word (a `GlobalPhase` for the identity word), which
  is exact. A non-commuting sum with constant data becomes a `QubitUnitary` of its matrix;
  with traced data it is refused (use `qml.TrotterProduct`).
- `Controlled`, `Adjoint` and integer `Pow` of those: the rule of the base, each operator
  controlled / adjointed (in reverse order) / repeated. So `QuantumPhaseEstimation` of a
  Trotterised Hamiltonian with run-time coefficients becomes controlled `PauliRot`s and
  controlled `GlobalPhase`s, never a matrix of traced values.
- `TrotterProduct`: PennyLane's own product formula (pure Python, it builds `Evolution`s),
  whose terms then take the `Exp` rule above.
- `BasisState`: PennyLane's rule imports `jax.numpy` when a compiler is active; here a
  constant state is `X` flips and a traced one is `GlobalPhase(-pi b/2) RX(pi b)` per bit
  (exactly `X**b` for b in {0, 1}).
- `MottonenStatePreparation` (what `StatePrep` and `AmplitudeEmbedding` become) of a traced
  state: PennyLane's rule after a run-time check that the state has norm 1 (PennyLane checks
  a concrete one; the rule's angles would normalize it silently).
- `BasisRotation` of a traced *real* matrix: PennyLane's real-valued rule moves signs
  around depending on the values (`_absorb_phases_so`); refused with an error that names
  the operation (a static `unitary_matrix` works). Its complex rule has no such branch, but
  a complex matrix with zero imaginary parts takes the real rule in uncompiled PennyLane,
  so taking the complex rule here would not give PennyLane's numbers.


Everything else takes PennyLane's legacy rules first, also when the graph system is enabled
(`pennylane_decompose`: its rules are written for program capture).

`MultiRZ` is a runtime gate (gates.def), so its JAX-only rule is never used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pennylane as qml
from pennylane.pauli import PauliWord

from cofactor.errors import CompileError
from cofactor.tracing.tracer import FLOAT, INT, Scalar, Tracer

Term = tuple[Any, PauliWord]  # (coefficient, possibly traced; Pauli word)


def _traced(x: Any) -> bool:
    return isinstance(x, Tracer | Scalar) or (isinstance(x, np.ndarray) and x.dtype == object)


def _has_traced_data(op: qml.operation.Operator) -> bool:
    return any(_traced(d) for d in op.data)


def has_rule(op: qml.operation.Operator) -> bool:
    """Whether `expand` has a rule for `op` (PennyLane's decomposition then stops there)."""
    if isinstance(op, qml.ops.Exp | qml.TrotterProduct | qml.BasisState):
        return True
    if isinstance(op, qml.DiagonalQubitUnitary | qml.MottonenStatePreparation):
        return _has_traced_data(op)
    if isinstance(op, qml.BasisRotation):  # a traced real matrix: refused in expand
        u = op.parameters[0]
        return _traced(u) and not np.iscomplexobj(_dtype_probe(u))
    if isinstance(op, qml.ops.Controlled | qml.ops.Adjoint):
        return has_rule(op.base)
    if isinstance(op, qml.ops.Pow):
        if isinstance(op.base, qml.ops.Exp) and not _traced(op.z):
            return True  # exp(k G) ** z = exp(z k G) for any real z
        return _int_power(op.z) is not None and has_rule(op.base)
    return False


def _int_power(z: Any) -> int | None:
    if isinstance(z, int | np.integer) and not isinstance(z, bool):
        return int(z)
    if isinstance(z, float | np.floating) and float(z).is_integer():
        return int(z)
    return None


def expand(op: qml.operation.Operator) -> list[qml.operation.Operator]:
    """One step of cofactor's rule for `op` (one for which `has_rule` is true)."""
    with qml.QueuingManager.stop_recording():
        if isinstance(op, qml.ops.Controlled):
            return [
                qml.ctrl(
                    o,
                    control=op.control_wires,
                    control_values=op.control_values,
                    work_wires=op.work_wires,
                )
                for o in expand(op.base)
            ]
        if isinstance(op, qml.ops.Adjoint):
            return [qml.adjoint(o) for o in reversed(expand(op.base))]
        if isinstance(op, qml.ops.Pow) and isinstance(op.base, qml.ops.Exp):
            # (PennyLane's Exp.pow returns an operator where Pow.decomposition wants a list)
            base = op.base
            if isinstance(base, qml.ops.Evolution):
                return [qml.ops.Evolution(base.base, base.param * op.z)]
            return [qml.exp(base.base, base.coeff * op.z)]
        if isinstance(op, qml.ops.Pow):
            z = _int_power(op.z)
            assert z is not None
            base = op.base if z >= 0 else qml.adjoint(op.base)
            return [base] * abs(z)
        if isinstance(op, qml.ops.Exp):
            return _exp_rule(op)
        if isinstance(op, qml.TrotterProduct):
            steps = op.hyperparameters.get("n")
            if _traced(steps):
                raise CompileError(
                    "qml.TrotterProduct with a traced number of steps n: the product formula "
                    "is built in Python, one Evolution per term and step, so n must be a "
                    "Python int; pass it as a static argument (qjit(static_argnums=...)) or "
                    "repeat a one-step TrotterProduct (with time t/n) in a cofactor.for_loop"
                )
            # PennyLane's product formula: Evolution(term, -t/n ...) in PennyLane's order
            return list(op.decomposition())
        if isinstance(op, qml.BasisState):
            return _basis_state_rule(op)
        if isinstance(op, qml.DiagonalQubitUnitary):
            return _traced_diagonal_rule(op)
        if isinstance(op, qml.MottonenStatePreparation):
            return _traced_state_rule(op)
        if isinstance(op, qml.BasisRotation):
            raise CompileError(
                f"qml.BasisRotation on wires {list(op.wires)} with a traced real "
                "unitary_matrix: PennyLane's decomposition of a real (orthogonal) matrix "
                "branches on its values, which are only known when the compiled program "
                "runs. Pass it as a static argument (a tuple of tuples, "
                "qjit(static_argnums=...)) or build it from constants."
            )
    raise AssertionError(f"no cofactor rule for {op}")


# ----------------------------------------------------------------------------------------
# exponentials of Pauli sums
# ----------------------------------------------------------------------------------------
def pauli_terms(op: qml.operation.Operator) -> list[Term] | None:
    """`op` as a list of (coefficient, PauliWord) with traced coefficients kept as they are,
    or None when `op` is not a combination of Pauli words. Repeated words are not merged."""
    if not _has_traced_data(op):
        rep = op.pauli_rep
        return None if rep is None else [(c, w) for w, c in rep.items()]
    if isinstance(op, qml.ops.SProd):
        inner = pauli_terms(op.base)
        return None if inner is None else [(op.scalar * c, w) for c, w in inner]
    if isinstance(op, qml.ops.LinearCombination):
        coeffs, ops = op.terms()
        out: list[Term] = []
        for c, o in zip(coeffs, ops, strict=True):
            inner = pauli_terms(o)
            if inner is None:
                return None
            out += [(c * ci, w) for ci, w in inner]
        return out
    if isinstance(op, qml.ops.Sum):
        out = []
        for o in op.operands:
            inner = pauli_terms(o)
            if inner is None:
                return None
            out += inner
        return out
    if isinstance(op, qml.ops.Prod):
        acc: list[Term] = [(1.0, PauliWord({}))]
        for factor in op.operands:
            terms = pauli_terms(factor)
            if terms is None:
                return None
            new: list[Term] = []
            for c1, w1 in acc:
                for c2, w2 in terms:
                    word, phase = w1._matmul(w2)
                    new.append((c1 * c2 * phase if phase != 1 else c1 * c2, word))
            acc = new
        return acc
    return None


def words_commute(a: PauliWord, b: PauliWord) -> bool:
    """Two Pauli words commute iff they differ (both non-identity) on an even number of wires."""
    clashes = sum(1 for w, p in a.items() if w in b and b[w] != p)
    return clashes % 2 == 0


def _real_part(x: Any) -> Any:
    """The real part of a (traced or constant) number; a constant's imaginary part is
    checked by the caller."""
    if _traced(x):
        return np.real(x) if np.iscomplexobj(_dtype_probe(x)) else x
    return float(np.real(x))


def _dtype_probe(x: Any) -> np.ndarray:
    """An empty array of x's dtype (for a traced x)."""
    from cofactor.tracing.numpy_rules import as_tracer

    return np.zeros((), dtype=as_tracer(x).dtype)


def _exp_rule(op: qml.ops.Exp) -> list[qml.operation.Operator]:
    """exp(k * sum_j a_j P_j), all P_j commuting = prod_j PauliRot(2i k a_j, P_j)."""
    evolution = isinstance(op, qml.ops.Evolution)
    # Evolution(G, t) = exp(-i t G): work with the real "time" so that nothing traced is
    # complex; for Exp(G, k) the rotation angle is Re(2i k a_j).
    k = op.param if evolution else op.coeff
    terms = pauli_terms(op.base)
    if terms is None:
        return _constant_matrix(op, "its exponent is not a combination of Pauli words")
    words = [w for _, w in terms]
    if not all(words_commute(a, b) for i, a in enumerate(words) for b in words[i + 1 :]):
        return _constant_matrix(
            op,
            "its Pauli words do not all commute, so it is not a product of Pauli rotations "
            "(approximate it with qml.TrotterProduct)",
        )
    if not evolution and _traced(k) and _dtype_probe(k).dtype in (FLOAT, INT):
        raise CompileError(
            f"qml.exp of {op.base} with a real traced coefficient is not unitary: use an "
            "imaginary coefficient, e.g. qml.exp(op, 1j * t), or qml.evolve(op, t)"
        )
    out: list[qml.operation.Operator] = []
    for a, word in terms:
        if not _traced(a) and np.imag(a) != 0 and evolution:
            raise CompileError(
                f"qml.evolve of {op.base}: the generator has a complex coefficient {a} "
                "(it is not Hermitian), so the evolution is not unitary"
            )
        if not evolution and not _traced(k) and not _traced(a) and abs(np.real(k * a)) > 1e-12:
            raise CompileError(
                f"qml.exp({op.base}, {k}) is not unitary (its exponent has a Hermitian part): "
                "cofactor runs unitary operations only; use an imaginary coefficient, e.g. "
                "qml.exp(op, 1j * t), or qml.evolve"
            )
        if evolution:
            # exp(-i t a P) = PauliRot(2 t a, P)
            theta = 2 * k * _real_part(a)
        else:
            theta = _real_part(2j * k * a)
        if len(word) == 0:
            # exp(-i theta/2) times the identity; GlobalPhase(phi) = exp(-i phi)
            out.append(qml.GlobalPhase(theta / 2, wires=op.wires))
            continue
        wires = list(word.keys())
        string = "".join(word[w] for w in wires)
        out.append(qml.PauliRot(theta, string, wires=wires))
    return out


def _constant_matrix(op: qml.operation.Operator, why: str) -> list[qml.operation.Operator]:
    if isinstance(op, qml.ops.Exp) and not _any_traced_in(op.base):
        # only the coefficient is traced
        base = np.asarray(qml.matrix(op.base, wire_order=op.wires), dtype=np.complex128)
        if np.allclose(base, base.conj().T, atol=1e-12):
            # a Hermitian exponent B = V diag(w) V^dagger (eigendecomposed at trace time):
            # exp(c B) = V diag(exp(c w)) V^dagger, two constant unitaries around a diagonal
            # of run-time phases (a Taylor series of the traced matrix, below, is thousands
            # of IR lines even for two qubits)
            eigenvalues, vectors = np.linalg.eigh(base)
            phases = np.exp(op.coeff * eigenvalues)
            return [
                qml.QubitUnitary(vectors.conj().T, wires=op.wires),
                qml.DiagonalQubitUnitary(phases, wires=op.wires),
                qml.QubitUnitary(vectors, wires=op.wires),
            ]
        # the exponential of a traced matrix (tracing/matrix_exp.py), a QubitUnitary whose
        # gradient is refused with a message
        from cofactor.tracing.matrix_exp import traced_expm

        return [qml.QubitUnitary(traced_expm(op.coeff * base), wires=op.wires)]
    if _has_traced_data(op) or _has_traced_data(op.base) or _any_traced_in(op.base):
        raise CompileError(
            f"cofactor cannot apply {op} with traced parameters: {why}. Its matrix would be "
            "an exponential of traced values."
        )
    matrix = np.asarray(qml.matrix(op, wire_order=op.wires), dtype=np.complex128)
    return [qml.QubitUnitary(matrix, wires=op.wires)]


def _any_traced_in(op: qml.operation.Operator) -> bool:
    if _has_traced_data(op):
        return True
    return any(_any_traced_in(o) for o in getattr(op, "operands", ()) or ()) or (
        hasattr(op, "base") and _any_traced_in(op.base)
    )


# ----------------------------------------------------------------------------------------
# DiagonalQubitUnitary of traced entries
# ----------------------------------------------------------------------------------------
def _traced_diagonal_rule(op: qml.DiagonalQubitUnitary) -> list[qml.operation.Operator]:
    """PennyLane's decomposition (phases from the entries' angles), after a run-time check
    that the entries have modulus 1: PennyLane checks concrete entries, and the angles
    alone would silently drop the moduli of a non-unitary diagonal."""
    from cofactor.tracing.numpy_rules import as_scalar, as_tracer
    from cofactor.tracing.runtime_errors import report_if

    entries = as_tracer(op.parameters[0])
    squared = np.real(entries * np.conj(entries))
    # numpy's allclose(|d|^2, 1) with its default tolerances, as PennyLane's check
    report_if(as_scalar(np.any(np.abs(squared - 1.0) > 1e-8 + 1e-5)).value, "diagonal_unitary")
    return list(op.decomposition())


# ----------------------------------------------------------------------------------------
# MottonenStatePreparation (StatePrep, AmplitudeEmbedding) of a traced state
# ----------------------------------------------------------------------------------------
def _traced_state_rule(op: qml.MottonenStatePreparation) -> list[qml.operation.Operator]:
    """PennyLane's decomposition, after a run-time check that the state has norm 1: every
    StatePrep / AmplitudeEmbedding becomes this operator, and PennyLane checks the norm of
    a concrete state (StatePrep(normalize=True) or pad_with has divided a traced one by its
    norm already), while the rotation angles alone would silently normalize it."""
    from cofactor.tracing.numpy_rules import as_scalar, as_tracer
    from cofactor.tracing.runtime_errors import report_if

    state = as_tracer(op.parameters[0])
    norms = np.sqrt(np.sum(np.real(state * np.conj(state)), axis=-1))
    # numpy's allclose(norm, 1) with PennyLane's tolerance for StatePrep (atol 1e-10)
    report_if(as_scalar(np.any(np.abs(norms - 1.0) > 1e-10 + 1e-5)).value, "state_norm")
    return list(op.decomposition())


# ----------------------------------------------------------------------------------------
# BasisState
# ----------------------------------------------------------------------------------------
def _basis_state_rule(op: qml.BasisState) -> list[qml.operation.Operator]:
    state = op.parameters[0]
    wires = list(op.wires)
    if not _traced(state):
        bits = np.asarray(state).reshape(-1)
        return [qml.X(w) for w, bit in zip(wires, bits, strict=True) if bit]
    # PennyLane checks the bits of a concrete state; traced ones are checked at run time
    from cofactor.tracing.numpy_rules import as_scalar, as_tracer
    from cofactor.tracing.runtime_errors import report_if

    bits = as_tracer(state)
    report_if(as_scalar(np.any((bits < 0) | (bits > 1))).value, "basis_state_bits")
    out: list[qml.operation.Operator] = []
    for i, w in enumerate(wires):
        angle = state[i] * np.pi
        # X**b = exp(i pi b / 2) RX(pi b) for b in {0, 1}; GlobalPhase(phi) = exp(-i phi)
        out += [qml.RX(angle, wires=w), qml.GlobalPhase(-angle / 2, wires=w)]
    return out


# ----------------------------------------------------------------------------------------
# PennyLane's decompositions
# ----------------------------------------------------------------------------------------
def pennylane_decompose(
    ops: list[Any], gate_set: set[str], stop: Callable[[Any], bool]
) -> list[qml.operation.Operator]:
    """PennyLane's decompositions of `ops` down to operators satisfying `stop`.

    PennyLane's own (legacy) rules run first, even when the user enabled the graph system:
    the graph system's rules are written for program capture (they loop with `qml.for_loop`
    and index `Wires` or `jax.numpy` arrays with the traced loop index, or import JAX when
    a compiler is active), which cofactor's traced loops cannot serve. Operators without a
    legacy rule (e.g. a user's operator registered with `qml.add_decomps` only) then get the
    graph system's rules when it is enabled. Both give the same operator, so the numbers do
    not depend on the choice."""
    graph = qml.decomposition.enabled_graph()
    out = _run_decompose(ops, gate_set, stop, graph=False)
    if not graph or all(stop(op) for op in out):
        return out
    result: list[qml.operation.Operator] = []
    for op in out:
        result += [op] if stop(op) else _run_decompose([op], gate_set, stop, graph=True)
    return result


def _run_decompose(
    ops: list[Any], gate_set: set[str], stop: Callable[[Any], bool], graph: bool
) -> list[qml.operation.Operator]:
    tape = qml.tape.QuantumScript(ops)
    was_graph = qml.decomposition.enabled_graph()
    try:
        if was_graph and not graph:
            qml.decomposition.disable_graph()
        elif graph and not was_graph:
            qml.decomposition.enable_graph()
        [out], _ = qml.transforms.decompose(tape, gate_set=gate_set, stopping_condition=stop)
    except CompileError:  # e.g. a traced value used as a Python bool by a decomposition
        raise
    except Exception as err:
        names = sorted({op.name for op in ops if not stop(op)})
        hint = ""
        if "'Tracer'" in str(err) or "'Scalar'" in str(err):
            # e.g. SpecialUnitary's matrix is scipy.linalg.expm of its parameters
            hint = (
                " (its decomposition computes with the traced parameters through a library "
                "that needs concrete numbers, such as scipy.linalg.expm; pass those parameters "
                "as constants, not as arguments of the qjit-compiled function)"
            )
        raise CompileError(
            f"could not decompose {', '.join(names)} for cofactor: {err}{hint}"
        ) from err
    finally:
        if was_graph != qml.decomposition.enabled_graph():
            (qml.decomposition.enable_graph if was_graph else qml.decomposition.disable_graph)()
    return list(out.operations)


__all__ = ["expand", "has_rule", "pauli_terms", "pennylane_decompose", "words_commute"]
