"""Every op the frontend can emit goes through cofactor-opt's lowering and mlir-translate.

The module is built from the rule tables themselves (every ufunc on every dtype numpy
accepts for it, every array function, every quantum op), so a rule that emits an op
spelling MLIR 15 does not know fails here, named.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pennylane as qml
import pytest

from cofactor import compiler, toolchain
from cofactor.errors import CompileError
from cofactor.jit import QJIT
from cofactor.launcher import BufferSpec
from cofactor.tracing.numpy_rules import FUNCTION_RULES, UFUNC_RULES

pytestmark = pytest.mark.needs_toolchain

DTYPES = [np.dtype(d) for d in (np.float64, np.int64, np.bool_, np.complex128)]


def _ufunc_program(*args):
    out = {}
    for ufunc in UFUNC_RULES:
        for i, a in enumerate(args):
            operands = (a,) * ufunc.nin if ufunc.nin == 1 else (a, args[(i + 1) % len(args)])
            try:
                out[f"{ufunc.__name__}_{i}"] = ufunc(*operands)
            except CompileError:
                pass  # a combination cofactor rejects with a message (checked elsewhere)
            except TypeError:
                pass  # a combination numpy itself rejects
    return out


def _lower(mlir: str) -> None:
    opt = subprocess.run(
        [str(toolchain.find("cofactor-opt")), "-", *compiler.LOWERING_PASSES],
        input=mlir,
        capture_output=True,
        text=True,
    )
    assert opt.returncode == 0, opt.stderr
    tr = subprocess.run(
        [str(toolchain.find("mlir-translate")), "--mlir-to-llvmir"],
        input=opt.stdout,
        capture_output=True,
        text=True,
    )
    assert tr.returncode == 0, tr.stderr


def _trace(fn, specs):
    tree = ("tuple", tuple("*" for _ in specs))
    return QJIT(fn)._trace(tree, tuple(specs), ())[0]


def test_every_ufunc_rule_lowers():
    specs = [BufferSpec((2,), d) for d in DTYPES]
    mlir = _trace(_ufunc_program, specs)
    _lower(mlir)
    for name in ("math.abs", "arith.remf", "func.call @atan2", "math.powf", "arith.select"):
        assert name in mlir


def test_every_function_rule_lowers():
    def program(m, v, i):
        w = m.copy()  # (the functions that write into an array: tracing/inplace_functions.py)
        np.copyto(w[0], v)
        np.put(w, [0, 5], [1.0, 2.0])
        np.place(w, np.eye(2, 3) > 0, [3.0])
        np.fill_diagonal(w, 0.5)
        return {
            "written_in_place": w,
            "sum": np.sum(m, axis=0),
            "prod": np.prod(m),
            "mean": np.mean(m, axis=1),
            "max": np.max(m),
            "amax": np.amax(m, axis=0),
            "min": np.min(m),
            "amin": np.amin(m, axis=1),
            "argmax": np.argmax(v),
            "argmin": np.argmin(v),
            "dot": np.dot(m, m.T),
            "vdot": np.vdot(v, v),
            "outer": np.outer(v, v),
            "kron": np.kron(v, v),
            "trace": np.trace(m[:, :2]),
            "cumsum": np.cumsum(v),
            "where": np.where(v > 0, v, -v),
            "clip": np.clip(v, -0.5, 0.5),
            "reshape": np.reshape(m, (3, 2)),
            "transpose": np.transpose(m),
            "swapaxes": np.swapaxes(m, 0, 1),
            "moveaxis": np.moveaxis(m, 0, 1),
            "squeeze": np.squeeze(m[None]),
            "expand_dims": np.expand_dims(v, 0),
            "ravel": np.ravel(m),
            "flip": np.flip(v),
            "roll": np.roll(v, 1),
            "diag": np.diag(v),
            "diagonal": np.diagonal(m),
            "tile": np.tile(v, 2),
            "repeat": np.repeat(v, 2),
            "broadcast_to": np.broadcast_to(v, (2, 3)),
            "atleast_1d": np.atleast_1d(i),
            "atleast_2d": np.atleast_2d(v),
            "copy": np.copy(v),
            "stack": np.stack([v, v]),
            "concatenate": np.concatenate([v, v]),
            "hstack": np.hstack([v, v]),
            "vstack": np.vstack([v, v]),
            "zeros_like": np.zeros_like(v),
            "ones_like": np.ones_like(v),
            "shape": np.shape(m)[0] * v,
            "ndim": np.ndim(m) * v,
            "size": np.size(m) * v,
            "real": np.real(v * 1j),
            "imag": np.imag(v * 1j),
            "linspace": np.linspace(v[0], v[1], 4),
            "result_type": np.zeros(1, dtype=np.result_type(v, 1)),
            "dynamic_index": m[i, i],
            "take": np.take(v, [2, 0]),
            "tensordot": np.tensordot(m, v, axes=1),
            "einsum": np.einsum("ij,j->i", m, v),
            "norm": np.linalg.norm(v),
            "det": np.linalg.det(m[:, :2]),
            "angle": np.angle(v * 1j + 1),
            "round": np.round(v, 1),
            "around": np.around(v),
            "fix": np.fix(v),
            "isclose": np.isclose(v, 0.5),
            "allclose": np.allclose(v, 0.5),
            "array_equal": np.array_equal(v, v),
            "array_equiv": np.array_equiv(v, v[0]),
            "any": np.any(v > 0),
            "all": np.all(m > 0, axis=0),
            "count_nonzero": np.count_nonzero(v),
            "iscomplex": np.iscomplex(v * 1j),
            "isreal": np.isreal(v),
            "iscomplexobj": np.iscomplexobj(v) * v,
            "isrealobj": np.isrealobj(v) * v,
            "var": np.var(m, axis=0),
            "std": np.std(v),
            "cumprod": np.cumprod(v),
            "diff": np.diff(v),
            "triu": np.triu(m),
            "tril": np.tril(m),
            "full_like": np.full_like(v, 2.0),
            "empty_like": np.empty_like(v),
            "real_if_close": np.real_if_close(v + 0j),
            "nan_to_num": np.nan_to_num(v),
            # added with test_fuzz_arrays (tracing/arrays.py, array_extras.py, linalg.py)
            "inner": np.inner(m, v),
            "ptp": np.ptp(m, axis=0),
            "average": np.average(m, axis=1, weights=v),
            "sort": np.sort(m, axis=0),
            "median": np.median(v),
            "append": np.append(v, 1.0),
            "column_stack": np.column_stack([v, v]),
            "split": np.split(v, 3)[1],
            "array_split": np.array_split(v, 2)[0],
            "hsplit": np.hsplit(m, 3)[2],
            "vsplit": np.vsplit(m, 2)[0],
            "dsplit": np.dsplit(m[None], 3)[0],
            "dstack": np.dstack([v, v]),
            "block": np.block([[m], [m]]),
            "rot90": np.rot90(m),
            "fliplr": np.fliplr(m),
            "flipud": np.flipud(m),
            "meshgrid": np.meshgrid(v, v)[0],
            "broadcast_arrays": np.broadcast_arrays(m, v)[1],
            "select": np.select([v > 0], [v], 0.5),
            "cross": np.cross(v, m),
            "polyval": np.polyval(v, m),
            "ediff1d": np.ediff1d(m),
            "cov": np.cov(m),
            "corrcoef": np.corrcoef(m),
            "matrix_power": np.linalg.matrix_power(m[:, :2], 2),
            "multi_dot": np.linalg.multi_dot([v, m.T, m]),
            "linalg_trace": getattr(np.linalg, "trace", np.trace)(m[:, :2]),  # numpy >= 2
            "solve": np.linalg.solve(m[:, :2] + 3 * np.eye(2), v[:2]),  # (host callbacks)
            "inv": np.linalg.inv(m[:, :2] + 3 * np.eye(2)),
            "pinv": np.linalg.pinv(m),
            "eigvalsh": np.linalg.eigvalsh(m[:, :2] + m[:, :2].T),
            "eigh": np.linalg.eigh(m[:, :2] + m[:, :2].T)[1],
            "svd": np.linalg.svd(m)[1],
            "eigvals": np.linalg.eig(m[:, :2])[0] + np.linalg.eigvals(m[:, :2]),
            "polyfit": np.polyfit([1.0, 2.0, 3.0], v, 1),
        }

    covered = {
        np.sum, np.prod, np.mean, np.max, np.amax, np.min, np.amin, np.argmax, np.argmin,
        np.dot, np.vdot, np.outer, np.kron, np.trace, np.cumsum, np.where, np.clip,
        np.reshape, np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims,
        np.ravel, np.flip, np.roll, np.diag, np.diagonal, np.tile, np.repeat,
        np.broadcast_to, np.atleast_1d, np.atleast_2d, np.copy, np.stack, np.concatenate,
        np.hstack, np.vstack, np.zeros_like, np.ones_like, np.shape, np.ndim, np.size,
        np.real, np.imag, np.linspace, np.result_type, np.isclose, np.allclose,
        np.take, np.tensordot, np.einsum, np.linalg.norm, np.angle, np.round, np.around,
        np.fix, np.array_equal, np.array_equiv, np.any, np.all, np.count_nonzero,
        np.iscomplex, np.isreal, np.iscomplexobj, np.isrealobj, np.var, np.std, np.cumprod,
        np.diff, np.triu, np.tril, np.full_like, np.empty_like, np.real_if_close,
        np.nan_to_num, np.linalg.det, np.inner, np.ptp, np.average, np.sort, np.median,
        np.append, np.column_stack, np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit,
        np.dstack, np.block, np.rot90, np.fliplr, np.flipud, np.meshgrid, np.broadcast_arrays,
        np.select, np.cross, np.polyval, np.ediff1d, np.cov, np.corrcoef,
        np.linalg.matrix_power, np.linalg.multi_dot, getattr(np.linalg, "trace", np.trace),
        np.copyto, np.put, np.place, np.fill_diagonal, np.linalg.solve, np.linalg.inv,
        np.linalg.pinv, np.linalg.eigvalsh, np.linalg.eigh, np.polyfit, np.linalg.svd,
        np.linalg.eig, np.linalg.eigvals,
    }  # fmt: skip
    assert set(FUNCTION_RULES) <= covered, set(FUNCTION_RULES) - covered
    specs = [BufferSpec((2, 3), DTYPES[0]), BufferSpec((3,), DTYPES[0]), BufferSpec((), DTYPES[1])]
    _lower(_trace(program, specs))


def test_every_quantum_op_lowers():
    dev = qml.device("default.qubit", wires=3)

    @qml.set_shots(shots=10)
    @qml.qnode(dev)
    def circuit(x, u):
        qml.RX(x, 0)
        qml.adjoint(qml.RY(x, 1))
        qml.ctrl(qml.RZ(x, 2), control=0, control_values=0)
        qml.PauliRot(x, "XZ", wires=[0, 1])
        qml.QubitUnitary(u, wires=2)
        qml.GlobalPhase(x)
        m = qml.measure(0, reset=True, postselect=None)
        qml.cond(m, qml.PauliX)(1)
        h = qml.Hamiltonian([x, 0.5], [qml.Z(0) @ qml.X(1), qml.Hermitian(u @ u.conj().T, 2)])
        return (
            qml.expval(h),
            qml.var(qml.Y(1)),
            qml.probs(wires=[0, 2]),
            qml.probs(),
            qml.state(),
            qml.sample(wires=[1]),
            qml.sample(),
            qml.counts(wires=[0, 1], all_outcomes=True),
        )

    specs = [BufferSpec((), DTYPES[0]), BufferSpec((2, 2), DTYPES[3])]
    mlir = _trace(lambda x, u: circuit(x, u), specs)
    for op in (
        "device_acquire", "device_release", "gate", "pauli_rot", "unitary", "obs_named",
        "obs_hermitian", "obs_tensor", "obs_hamiltonian", "expval", "var", "probs", "state",
        "sample", "counts", "measure",
    ):  # fmt: skip
        assert f'"quantum.{op}"' in mlir, op
    _lower(mlir)
