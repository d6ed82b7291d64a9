"""Run under `mpirun -n P`: the sharded device against the single-process one, on every rank.

Arguments: the number of qubits (6), and "quick" to skip the loop over every gate.
Each check runs the same operations twice in this process, once on the distributed device
(cf_rt_set_distributed(1)) and once on the single-process simulator, and compares: amplitudes,
probabilities, expectation values, variances and Jacobians to 1e-12, samples, counts and
mid-circuit outcomes exactly (same seed). A mismatch raises, and the excepthook installed by
cofactor.distributed ends every rank with the message. Rank 0 prints "checks passed: N".
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import types

import numpy as np

# Only the runtime's ctypes binding is needed: load cofactor's modules without running the
# package's __init__, which imports PennyLane (seconds per rank, and every rank pays it).
_spec = importlib.util.find_spec("cofactor")
_package = types.ModuleType("cofactor")
_package.__path__ = list(_spec.submodule_search_locations)
sys.modules.setdefault("cofactor", _package)

from cofactor import distributed, runtime_lib  # noqa: E402
from cofactor.runtime_lib import as_pointer  # noqa: E402

c_int64, c_double, c_int8 = ctypes.c_int64, ctypes.c_double, ctypes.c_int8

lib = runtime_lib.load_runtime()
rank, size = distributed.rank_and_size(lib)
distributed.install_excepthook(lib)
GATES = runtime_lib.gate_ids(lib)
TOL = 1e-12
checks = 0


def ok() -> None:
    runtime_lib.check_error(lib)


def i64(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


def random_unitary(rng: np.random.Generator, dim: int) -> np.ndarray:
    z = rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim))
    q, r = np.linalg.qr(z)
    return q * (np.diag(r) / np.abs(np.diag(r)))


def apply(op: tuple) -> None:
    kind = op[0]
    if kind == "gate":
        _, name, params, wires, adj, cw, cv = op
        p = np.ascontiguousarray(params, dtype=np.float64)
        w, c = i64(wires), i64(cw)
        v = np.ascontiguousarray(cv, dtype=np.int8)
        lib.cf_rt_gate(
            GATES[name][0], as_pointer(p, c_double), len(p), as_pointer(w, c_int64), len(w),
            adj, as_pointer(c, c_int64), as_pointer(v, c_int8), len(c),
        )  # fmt: skip
    elif kind == "rot":
        _, theta, word, wires, adj, cw, cv = op
        w, c = i64(wires), i64(cw)
        v = np.ascontiguousarray(cv, dtype=np.int8)
        lib.cf_rt_pauli_rot(
            theta, word.encode(), as_pointer(w, c_int64), len(w), adj,
            as_pointer(c, c_int64), as_pointer(v, c_int8), len(c),
        )  # fmt: skip
    elif kind == "unitary":
        _, u, wires, adj, cw, cv = op
        m = np.ascontiguousarray(u, dtype=np.complex128).view(np.float64)
        w, c = i64(wires), i64(cw)
        v = np.ascontiguousarray(cv, dtype=np.int8)
        lib.cf_rt_unitary(
            as_pointer(m, c_double), as_pointer(w, c_int64), len(w), adj,
            as_pointer(c, c_int64), as_pointer(v, c_int8), len(c),
        )  # fmt: skip
    elif kind == "set_state":
        v = np.ascontiguousarray(op[1], dtype=np.complex128).view(np.float64)
        lib.cf_rt_set_state(as_pointer(v, c_double))
    elif kind == "measure":
        _, wire, reset, post = op
        return int(lib.cf_rt_measure(wire, reset, post))
    else:
        raise ValueError(kind)
    return None


def observable(spec: tuple) -> int:
    kind = spec[0]
    if kind == "named":
        return lib.cf_rt_obs_named(runtime_lib.OBS_KINDS[spec[1]], spec[2])
    if kind == "herm":
        m = np.ascontiguousarray(spec[1], dtype=np.complex128).view(np.float64)
        w = i64(spec[2])
        return lib.cf_rt_obs_hermitian(as_pointer(m, c_double), as_pointer(w, c_int64), len(w))
    if kind == "tensor":
        h = i64([observable(s) for s in spec[1]])
        return lib.cf_rt_obs_tensor(as_pointer(h, c_int64), len(h))
    if kind == "ham":
        c = np.ascontiguousarray(spec[1], dtype=np.float64)
        h = i64([observable(s) for s in spec[2]])
        return lib.cf_rt_obs_hamiltonian(as_pointer(c, c_double), as_pointer(h, c_int64), len(h))
    raise ValueError(kind)


def measure(spec: tuple, n: int):
    kind = spec[0]
    if kind == "state":
        out = np.zeros(2**n, dtype=np.complex128)
        lib.cf_rt_state(as_pointer(out.view(np.float64), c_double))
        return out
    if kind in ("probs", "sample", "counts"):
        w = i64(spec[1])
        if kind == "probs":
            out = np.zeros(2 ** len(w))
            lib.cf_rt_probs(as_pointer(out, c_double), as_pointer(w, c_int64), len(w))
        elif kind == "sample":
            out = np.zeros((lib.cf_rt_shots(), len(w)), dtype=np.int64)
            lib.cf_rt_sample(as_pointer(out, c_int64), as_pointer(w, c_int64), len(w))
        else:
            out = np.zeros(2 ** len(w), dtype=np.int64)
            lib.cf_rt_counts(as_pointer(out, c_int64), as_pointer(w, c_int64), len(w))
        return out
    if kind == "expval":
        return lib.cf_rt_expval(observable(spec[1]))
    if kind == "var":
        return lib.cf_rt_var(observable(spec[1]))
    if kind == "jac":  # adjoint Jacobian of the recorded tape for these observables
        h = i64([observable(s) for s in spec[1]])
        jac = np.zeros((len(h), lib.cf_rt_tape_num_params()))
        lib.cf_rt_adjoint_jacobian(as_pointer(h, c_int64), len(h), as_pointer(jac, c_double))
        return jac
    raise ValueError(kind)


def run(dist: bool, n: int, ops: list, meas: list, shots: int = 0, seed: int = 7, tape=False):
    assert lib.cf_rt_set_distributed(1 if dist else 0) == 0
    lib.cf_rt_device_acquire(n, shots, seed)
    ok()
    if tape:
        lib.cf_rt_tape_start()
    outcomes = [apply(op) for op in ops]
    if tape:
        lib.cf_rt_tape_stop()
    ok()
    results = [measure(m, n) for m in meas]
    ok()
    lib.cf_rt_device_release()
    return [o for o in outcomes if o is not None], results


def compare(what: str, n: int, ops: list, meas: list, **kw) -> None:
    global checks
    got_mcm, got = run(True, n, ops, meas, **kw)
    want_mcm, want = run(False, n, ops, meas, **kw)
    if got_mcm != want_mcm:
        raise AssertionError(f"{what}: mid-circuit outcomes {got_mcm} != {want_mcm}")
    for spec, g, w in zip(meas, got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype.kind == "i":
            same = np.array_equal(g, w)
        else:
            same = g.shape == w.shape and np.allclose(g, w, rtol=0, atol=TOL)
        if not same:
            err = np.max(np.abs(g - w)) if g.shape == w.shape else "shape"
            raise AssertionError(f"{what}: {spec[0]} differs (max error {err})")
        checks += 1


def random_gate(rng: np.random.Generator, n: int, name: str, controls: int) -> tuple:
    gid, num_params, num_wires = GATES[name]
    k = 3 if num_wires < 0 else num_wires
    wires = [int(x) for x in rng.permutation(n)[: k + controls]]
    params = list(rng.uniform(-np.pi, np.pi, size=num_params))
    cvals = [int(x) for x in rng.integers(0, 2, size=controls)]
    return ("gate", name, params, wires[:k], int(rng.integers(0, 2)), wires[k:], cvals)


def circuit(rng: np.random.Generator, n: int, depth: int) -> list:
    names = [g for g in GATES if GATES[g][2] != 0]
    ops = [("gate", "Hadamard", [], [w], 0, [], []) for w in range(n)]
    for _ in range(depth):
        ops.append(random_gate(rng, n, str(rng.choice(names)), int(rng.integers(0, 2))))
    return ops


def all_measurements(n: int) -> list:
    herm = random_unitary(np.random.default_rng(3), 4)
    herm = herm + herm.conj().T
    z0 = ("named", "PauliZ", 0)
    x_last = ("named", "PauliX", n - 1)
    return [
        ("probs", list(range(n))),
        ("probs", [n - 1, 0]),
        ("probs", [1]),
        ("expval", z0),
        ("expval", ("named", "PauliY", 1)),
        ("expval", ("named", "Hadamard", n - 2)),
        ("expval", ("tensor", [("named", "PauliX", 0), ("named", "PauliY", n - 1)])),
        ("expval", ("herm", herm, [1, n - 1])),
        ("expval", ("ham", [0.5, -1.25, 0.3], [z0, x_last, ("herm", herm, [0, 2])])),
        ("var", x_last),
        ("var", ("herm", herm, [0, n - 2])),
        ("var", ("ham", [0.5, 2.0], [z0, ("tensor", [("named", "PauliZ", 1), x_last])])),
        ("state",),
    ]


def check_errors(n: int) -> None:
    """Errors of the sharded device reach the error slot (thrown in the MPI library, caught
    by the runtime's C ABI) with their code and message, on every rank alike."""
    global checks
    assert lib.cf_rt_set_distributed(1) == 0
    lib.cf_rt_device_acquire(n, 0, 3)
    apply(("gate", "PauliX", [], [0], 0, [], []))
    apply(("measure", 0, 0, 0))  # postselecting an impossible outcome
    code, message = lib.cf_rt_error_code(), runtime_lib.error_message(lib)
    lib.cf_rt_clear_error()
    lib.cf_rt_device_release()
    if code != runtime_lib.CF_ERR_POSTSELECTION or "probability 0" not in message:
        raise AssertionError(f"postselection error: code {code}, message {message!r}")
    checks += 1


def main(argv: list[str]) -> None:
    rng = np.random.default_rng(1234)
    n = int(argv[0]) if argv else 6
    quick = "quick" in argv  # many ranks on few cores: skip the per-gate loop
    # every gate of the table, with and without controls, on random (local and global) wires
    for name in [] if quick else GATES:
        for controls in (0, 1, 2):
            ops = [("gate", "Hadamard", [], [w], 0, [], []) for w in range(n)]
            ops += [("gate", "RY", [0.1 * (w + 1)], [w], 0, [], []) for w in range(n)]
            for _ in range(3):
                if GATES[name][2] != 0 or controls == 0:
                    ops.append(random_gate(rng, n, name, controls))
            compare(f"{name} ctrl={controls}", n, ops, [("state",), ("probs", list(range(n)))])
    # Pauli rotations and unitaries on global wires, then every measurement type
    ops = circuit(rng, n, 30)
    ops.append(("rot", 0.7, "XYZ", [0, 3, 5], 0, [1], [1]))
    ops.append(("unitary", random_unitary(rng, 4), [0, 4], 1, [2], [0]))
    compare("measurements", n, ops, all_measurements(n))
    # a prepared state (StatePrep / BasisState), after the map has moved
    psi = rng.normal(size=2**n) + 1j * rng.normal(size=2**n)
    ops = [*circuit(rng, n, 10), ("set_state", psi / np.linalg.norm(psi)), *circuit(rng, n, 10)]
    compare("set_state", n, ops, [("state",), ("expval", ("named", "PauliX", 0))])
    # shots: the same samples with the same seed
    shot_meas = [
        ("sample", list(range(n))),
        ("counts", [0, 3]),
        ("probs", [1, n - 1]),
        ("expval", ("named", "PauliX", 0)),
        ("expval", ("ham", [0.5, -1.0], [("named", "PauliZ", 0), ("named", "PauliY", n - 1)])),
        ("var", ("tensor", [("named", "PauliX", 0), ("named", "PauliZ", 2)])),
        # a sum: sampled in its eigenbasis (TermSampling.cpp combinedTerm)
        ("var", ("ham", [0.5, -1.0], [("named", "PauliZ", 0), ("named", "PauliY", n - 1)])),
    ]
    compare("shots", n, circuit(rng, n, 30), shot_meas, shots=200, seed=11)
    # mid-circuit measurements with reset and postselection, on global and local wires
    for post in (-1, 0, 1):
        ops = circuit(rng, n, 15)
        ops += [("measure", 0, 1, post), ("measure", n - 1, 0, -1), ("measure", 1, 1, -1)]
        ops += circuit(rng, n, 10)[n:]
        ops += [("measure", 0, 0, -1)]
        compare(f"mcm post={post}", n, ops, [("state",), ("sample", [0, 1, 2])], shots=50, seed=5)
    # adjoint Jacobian of parametrised gates, controlled ones and Pauli rotations
    ops = circuit(rng, n, 25)
    ops.append(("rot", 0.4, "XZ", [0, 5], 0, [], []))
    ops.append(("rot", -0.9, "YY", [1, 4], 0, [2], [1]))
    obs = [
        ("named", "PauliZ", 0),
        ("ham", [0.7, -0.2], [("named", "PauliX", 1), ("named", "PauliZ", n - 1)]),
    ]
    compare("adjoint", n, ops, [("jac", obs)], tape=True)
    check_errors(n)
    if rank == 0:
        print(f"checks passed: {checks} on {size} ranks", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
