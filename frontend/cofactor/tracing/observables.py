"""Observables of terminal measurements -> `quantum.obs_*` ops.

PennyLane's operator arithmetic reaches a measurement in many shapes: named Pauli
observables, `Identity` on any number of wires (or none: `Z(0) @ Z(0)` simplifies to
`I()`), products (`@`, `qml.prod`) on disjoint or shared wires, scalar products, sums,
`LinearCombination`s (`qml.Hamiltonian`, every `qml.qchem` Hamiltonian), `qml.Hermitian`
inside sums, and traced coefficients (`qml.dot(c, ops)` with `c` an argument).

- A product on disjoint wires is a `quantum.obs_tensor` of its factors (a wireless `I()`
  factor dropped); a product on shared wires is expanded by PennyLane (`terms()`) into a
  phase times a Pauli word.
- Sums and scalar products are a `quantum.obs_hamiltonian` over `terms()`. A coefficient
  with a zero imaginary part (`X(0) @ Y(0) + Y(0) @ X(0)` has `0j`) counts as real.
- A non-Hermitian combination (complex coefficients, e.g. `X(0) @ Y(0)` = `iZ(0)`) has a
  complex expectation value in PennyLane: it is measured as two Hamiltonians, the real and
  the imaginary parts of the coefficients, `<H> = <H_re> + i <H_im>`. Its variance is
  refused.
- Any other observable with a constant matrix (e.g. `Projector`) is a `quantum.obs_hermitian`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pennylane as qml
from xdsl.dialects.builtin import f64
from xdsl.ir import SSAValue

from cofactor.errors import CompileError, CompileValueError
from cofactor.ir.builder import memref_type, quantum_attrs
from cofactor.ir.mlir15 import ObsType, generic_op
from cofactor.tracing import context
from cofactor.tracing.numpy_rules import as_scalar, as_tracer, cast_tracer, store_tracer
from cofactor.tracing.tracer import COMPLEX, FLOAT, Scalar, Tracer

if TYPE_CHECKING:
    from cofactor.tracing.qnode import QuantumScope

NAMED_OBSERVABLES = ("Identity", "PauliX", "PauliY", "PauliZ", "Hadamard")
_ARITHMETIC = (qml.ops.Sum, qml.ops.SProd, qml.ops.LinearCombination, qml.ops.Prod)


# ----------------------------------------------------------------------------------------
# helpers shared with the emission of operations
# ----------------------------------------------------------------------------------------
def depends_on_arguments(x: Any) -> bool:
    """Whether a traced value is not a compile-time constant."""
    if isinstance(x, Scalar):
        return x.const is None
    if isinstance(x, Tracer):
        return x._elems is None or any(depends_on_arguments(e) for e in x._elems.flat)
    if isinstance(x, np.ndarray) and x.dtype == object:
        return any(depends_on_arguments(e) for e in x.flat)
    return False


def is_dynamic(x: Any) -> bool:
    return isinstance(x, Tracer | Scalar) or (isinstance(x, np.ndarray) and x.dtype == object)


def f64_value(p: Any) -> SSAValue:
    """A scalar gate parameter / coefficient as an f64 SSA value."""
    if type(p) is Tracer and not p._shape and p.dtype == FLOAT:
        # (a traced float, as below without the conversions it needs none of: every
        # angle of a circuit)
        s = p.elems[()]
        if type(s) is Scalar and s.dtype == FLOAT:
            return s.value
    t = as_tracer(p)
    if t.shape != ():
        # (a one-shot circuit says so first, in Catalyst's words)
        one_shot = getattr(context.current().quantum, "one_shot", False)
        lead = "mcm_method='one-shot' is not compatible with broadcasting: " if one_shot else ""
        raise CompileValueError(
            f"{lead}expected a scalar gate parameter, got an array of shape {t.shape}: "
            "parameter broadcasting (a batch of values as one gate parameter) is not "
            "supported under qjit, with any mcm_method; map the circuit over the batch with "
            "cofactor.vmap"
        )
    if t.dtype == COMPLEX:
        raise CompileError("complex gate parameters are not supported")
    return as_scalar(t.elems[()], FLOAT).value


def complex_matrix_memref(m: Any) -> SSAValue:
    """A (traced or constant) complex matrix as a memref<DxDx2xf64>: a constant one is a
    read-only global of its data (one dense attribute: a 64x64 unitary stored element by
    element was 8192 stores, and templates such as QuantumMonteCarlo apply several, which
    took a minute to compile), a traced one is stored into a stack buffer."""
    ctx = context.current()
    if not is_dynamic(m) and np.ndim(m) == 2:
        constant = np.ascontiguousarray(m, dtype=np.complex128)
        return ctx.builder.constant_array(ctx.fresh_name("__cf_matrix"), constant)
    t = cast_tracer(as_tracer(m), COMPLEX)
    buf = ctx.hoisted_alloc(memref_type(t.shape, COMPLEX), heap=False)
    store_tracer(t, buf)
    return buf


def disjoint(ops: list[Any]) -> bool:
    seen: set[Any] = set()
    for o in ops:
        if seen & set(o.wires):
            return False
        seen |= set(o.wires)
    return True


# ----------------------------------------------------------------------------------------
# coefficients
# ----------------------------------------------------------------------------------------
def _is_complex(c: Any) -> bool:
    """Whether a coefficient has an imaginary part (traced complex counts as having one)."""
    if is_dynamic(c):
        return as_tracer(c).dtype == COMPLEX
    return bool(np.iscomplexobj(c) and np.imag(c) != 0)


def _part(c: Any, part: str) -> Any:
    """The real or imaginary part of a coefficient (a constant stays a Python float)."""
    if is_dynamic(c):
        t = as_tracer(c)
        if t.dtype != COMPLEX:
            return t if part == "real" else 0.0
        return np.real(t) if part == "real" else np.imag(t)
    return float(np.real(c) if part == "real" else np.imag(c))


def _flat_terms(obs: qml.operation.Operator) -> tuple[list[Any], list[qml.operation.Operator]]:
    """Sums, scalar products and linear combinations flattened as they are written (no
    merging of repeated terms, which <H> does not need); anything else is one term."""
    if isinstance(obs, qml.ops.SProd):
        coeffs, ops = _flat_terms(obs.base)
        return [obs.scalar * c for c in coeffs], ops
    if isinstance(obs, qml.ops.Sum | qml.ops.LinearCombination):
        if isinstance(obs, qml.ops.LinearCombination):
            parts = [qml.s_prod(c, o) for c, o in zip(obs.coeffs, obs.ops, strict=True)]
        else:
            parts = list(obs.operands)
        coeffs, ops = [], []
        for part in parts:
            c, o = _flat_terms(part)
            coeffs += c
            ops += o
        return coeffs, ops
    return [1.0], [obs]


def _terms(obs: qml.operation.Operator) -> tuple[list[Any], list[qml.operation.Operator]]:
    """obs.terms(), or, when PennyLane cannot multiply traced coefficients into its Pauli
    representation, cofactor's expansion into Pauli words; when PennyLane's simplification
    compares a traced coefficient (`SProd.simplify`: `scalar == 1`, for a term without a
    Pauli representation such as a Hermitian), the sum flattened as written."""
    try:
        coeffs, ops = obs.terms()
        return list(coeffs), list(ops)
    except CompileError:
        if isinstance(obs, qml.ops.Prod):
            raise
        return _flat_terms(obs)
    except TypeError:
        from cofactor.tracing.decompositions import pauli_terms

        found = pauli_terms(obs)
        if found is None:
            raise
        return [c for c, _ in found], [w.operation(wire_order=list(w)) for _, w in found]


def is_hermitian_combination(obs: qml.operation.Operator) -> bool:
    """False when the observable's coefficients have imaginary parts (not Hermitian)."""
    if not isinstance(obs, _ARITHMETIC):
        return True
    if isinstance(obs, qml.ops.Prod) and disjoint(obs.operands):
        return all(is_hermitian_combination(o) for o in obs.operands)
    coeffs, _ = _terms(obs)
    return not any(_is_complex(c) for c in coeffs)


# ----------------------------------------------------------------------------------------
# emission
# ----------------------------------------------------------------------------------------
def _has_traced_coeffs(obs: qml.operation.Operator) -> bool:
    """Whether `obs` is operator arithmetic with a coefficient computed from arguments."""
    if not isinstance(obs, _ARITHMETIC):
        return False
    try:
        coeffs, _ = _terms(obs)
    except TypeError:
        return False
    return any(depends_on_arguments(c) for c in coeffs)


def emit_observable(
    scope: QuantumScope, obs: qml.operation.Operator, part: str = "real", expval: bool = False
) -> SSAValue:
    """The handle of `obs`; `part="imag"`: the Hamiltonian of its coefficients' imaginary
    parts (the coefficients of a Hermitian observable are taken as real).

    `expval`: `obs` is the observable of an expectation value itself (not a factor or a
    term of another). Then traced coefficients are differentiable: the Hamiltonian is
    marked `cofactor.diff_coeffs` and a differentiated QNode gets d<H>/dc_k = <term_k>
    from the runtime (docs/gradients.md). Anywhere else they are recorded as constants
    that cofactor's gradients refuse."""
    b = context.current().builder
    obs_type = ObsType()
    if obs.name in NAMED_OBSERVABLES and len(obs.wires) == 1:
        attrs = quantum_attrs(kind=obs.name)
        return b.res(generic_op("quantum.obs_named", [scope.wire(obs.wires[0])], [obs_type], attrs))
    if obs.name == "Identity":
        # Identity on any number of wires (and the wireless `I()` that operator arithmetic
        # makes of `Z(0) @ Z(0)` or of an Identity term) has eigenvalue 1: the runtime's
        # one-wire Identity on any wire of the device measures the same.
        wire = scope.wire(obs.wires[0]) if len(obs.wires) else scope._some_wire(obs)
        attrs = quantum_attrs(kind="Identity")
        return b.res(generic_op("quantum.obs_named", [wire], [obs_type], attrs))
    if obs.name == "Hermitian":
        if depends_on_arguments(obs.parameters[0]):
            scope.traced_constants.append(f"the matrix of the Hermitian observable {obs}")
        matrix = complex_matrix_memref(obs.parameters[0])
        wires = [scope.wire(w) for w in obs.wires]
        return b.res(generic_op("quantum.obs_hermitian", [matrix, *wires], [obs_type]))
    if obs.name == "Projector" and depends_on_arguments(obs.parameters[0]):
        # traced bits or state vector (api_extensions/operator_checks.py): the Hermitian
        # |phi><phi| computed from them (PennyLane's matrix needs concrete values)
        scope.traced_constants.append(f"the state of the projector observable {obs}")
        return emit_observable(scope, qml.Hermitian(_projector_matrix(obs), wires=obs.wires))
    # A product of factors with traced coefficients is measured expanded (one Hamiltonian
    # over the products of their terms), so that the coefficients stay differentiable.
    expand = expval and any(_has_traced_coeffs(o) for o in getattr(obs, "operands", ()))
    if part == "real" and isinstance(obs, qml.ops.Prod) and disjoint(obs.operands) and not expand:
        # a wireless I() factor changes nothing (and would take a wire another has)
        operands = [o for o in obs.operands if o.name != "Identity" or len(o.wires)]
        if all(is_hermitian_combination(o) for o in operands):
            if len(operands) == 1:
                return emit_observable(scope, operands[0], expval=expval)
            if not operands:
                return emit_observable(scope, qml.Identity())
            factors = [emit_observable(scope, o) for o in operands]
            return b.res(generic_op("quantum.obs_tensor", factors, [obs_type]))
    shared_wires_without_paulis = (
        isinstance(obs, qml.ops.Prod) and not disjoint(obs.operands) and obs.pauli_rep is None
    )
    if isinstance(obs, _ARITHMETIC) and not shared_wires_without_paulis:
        coeffs, terms = _terms(obs)
        attrs = {}
        if any(depends_on_arguments(c) for c in coeffs):
            if expval and part == "real":
                attrs = quantum_attrs(**{"cofactor.diff_coeffs": None})
            else:
                scope.traced_constants.append(f"the coefficients of the observable {obs}")
        ctx = context.current()
        buf = ctx.hoisted_alloc(memref_type((len(coeffs),), FLOAT), heap=False)
        for i, c in enumerate(coeffs):
            b.store(f64_value(_part(c, part)), buf, [b.index(i)])
        handles = [emit_observable(scope, t) for t in terms]
        return b.res(generic_op("quantum.obs_hamiltonian", [buf, *handles], [obs_type], attrs))
    # any other observable with a constant matrix (e.g. Projector, or Hermitian(M, 0) @ Z(0),
    # a product on shared wires that is no Pauli word): as a Hermitian
    try:
        constant = qml.matrix(obs, wire_order=obs.wires)
        constant = np.asarray(constant, dtype=np.complex128)
    except Exception:
        constant = None
    if constant is not None:
        if not np.allclose(constant, constant.conj().T, atol=1e-10):
            raise CompileError(
                f"observable {obs} is not Hermitian: cofactor measures Hermitian observables "
                "(and Pauli sums with complex coefficients)"
            )
        matrix = complex_matrix_memref(constant)
        wires = [scope.wire(w) for w in obs.wires]
        return b.res(generic_op("quantum.obs_hermitian", [matrix, *wires], [obs_type]))
    raise CompileError(f"observable {obs.name} is not supported by cofactor")


def _projector_matrix(obs: qml.operation.Operator) -> Any:
    """|phi><phi| of a Projector's traced parameter: a basis state's bits (one per wire)
    or a state vector (2**wires entries, not normalized, as PennyLane's matrix)."""
    state = obs.parameters[0]
    dim = 2 ** len(obs.wires)
    if np.shape(state)[0] == len(obs.wires):
        index = np.sum(state * (2 ** np.arange(len(obs.wires) - 1, -1, -1)))
        return np.diag((np.arange(dim) == index).astype(np.complex128))
    return np.outer(state, np.conj(state))


def emit_expval_or_var(scope: QuantumScope, obs: qml.operation.Operator, var: bool) -> Tracer:
    """`quantum.expval` / `quantum.var` of `obs` as a traced scalar (complex for an
    expectation value of a non-Hermitian combination, as PennyLane returns it)."""
    b = context.current().builder
    op = "quantum.var" if var else "quantum.expval"
    if is_hermitian_combination(obs):
        handle = emit_observable(scope, obs, expval=not var)
        return Tracer.scalar(b.res(generic_op(op, [handle], [f64])), FLOAT)
    if var:
        raise CompileError(
            f"qml.var({obs}): the observable has complex coefficients (it is not Hermitian), "
            "so its variance is not defined"
        )
    scope.traced_constants.append(
        f"the complex expectation value of the non-Hermitian observable {obs}"
    )
    real = Tracer.scalar(b.res(generic_op(op, [emit_observable(scope, obs)], [f64])), FLOAT)
    imag_handle = emit_observable(scope, obs, part="imag")
    imag = Tracer.scalar(b.res(generic_op(op, [imag_handle], [f64])), FLOAT)
    return real + 1j * imag


__all__ = [
    "complex_matrix_memref",
    "depends_on_arguments",
    "emit_expval_or_var",
    "emit_observable",
    "f64_value",
    "is_dynamic",
]
