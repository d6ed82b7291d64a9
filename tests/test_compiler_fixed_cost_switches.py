"""Session 18's cuts of the in-process driver's fixed cost give the same libraries as the
paths they replace (compiler/README.md, session 18), each of which its switch restores:

- COFACTOR_COMPILER_ALWAYS_INLINER=1: Enzyme's gradients marked `alwaysinline` and inlined
  by LLVM's `always-inline` pass, instead of by `InlineFunction` directly (Optimize.cpp);
- COFACTOR_COMPILER_VERIFY_INPUT=1: the translated module verified again before `opt`;
- COFACTOR_LOWER_QUANTUM_ALWAYS=1: `--lower-quantum-to-runtime` run on a module with
  nothing of the quantum dialect (mlir_passes/lib/Transforms/LowerQuantumToRuntime.cpp);
- COFACTOR_COMPILER_MATH_ALWAYS=1: `convert-math-to-llvm,convert-math-to-libm` run on a
  module with no math op (compiler/Lowering.cpp, `--cofactor-convert-math-if-any`).

Each side compiles in a new process (the switches are read there), with the cache off: the
optimized LLVM IR and the shared library must be byte for byte the same, and the values
right (numpy's analytic gradients; PennyLane's default.qubit for the circuit)."""

from __future__ import annotations

import numpy as np
import pytest
from fresh_process import run_json_program

from cofactor import native_compiler

PROGRAM = r"""
import hashlib, json
import numpy as np
import pennylane as qml
import cofactor

x = np.linspace(-1, 1, 6)
w = np.arange(36.0).reshape(6, 6) / 40

def tanh_loss(w):
    return np.sum(np.tanh(w @ x) ** 2)

def sin_loss(w):
    return np.sum(np.sin(w @ x))

# one gradient; two gradients in one module (two Enzyme calls, two inlinings)
one = cofactor.qjit(cofactor.grad(tanh_loss))

@cofactor.qjit
def two(w):
    return cofactor.grad(tanh_loss)(w) + 2 * cofactor.grad(sin_loss)(w)

# a module with quantum ops: the circuit's gradient with classical code around it
dev = qml.device("default.qubit", wires=2)

@qml.qnode(dev)
def circuit(p):
    qml.RX(p[0], wires=0)
    qml.RY(p[1], wires=1)
    qml.CNOT(wires=[0, 1])
    return qml.expval(qml.PauliZ(1))

def quantum_loss(p):
    return np.sin(circuit(p)) * p[0]

quantum = cofactor.qjit(cofactor.grad(quantum_loss))
# no classical code, no math op: the circuit's gradient alone
circuit_grad = cofactor.qjit(cofactor.grad(circuit))
p = np.array([0.3, -0.7])

out = {}
programs = (("one", one, w), ("two", two, w), ("quantum", quantum, p),
            ("circuit", circuit_grad, p))
for name, fn, arg in programs:
    value = np.asarray(fn(arg))
    lib = fn._last.library
    out[name] = {
        "value": value.tolist(),
        "opt_ir": hashlib.sha256(lib.stage("llvmir_opt").encode()).hexdigest(),
        "so": hashlib.sha256(lib.so_path.read_bytes()).hexdigest(),
    }
print(json.dumps(out))
"""

OLD_PATHS = {
    "COFACTOR_COMPILER_ALWAYS_INLINER": "1",
    "COFACTOR_COMPILER_VERIFY_INPUT": "1",
    "COFACTOR_LOWER_QUANTUM_ALWAYS": "1",
    "COFACTOR_COMPILER_MATH_ALWAYS": "1",
}


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")


def test_the_cheaper_paths_compile_the_same_libraries_as_the_paths_they_replace():
    new = run_json_program(PROGRAM)
    old = run_json_program(PROGRAM, **OLD_PATHS)
    for name in ("one", "two", "quantum", "circuit"):
        # (the QNode's optimized IR carries a metadata node holding an address, which
        # differs from process to process; its library does not)
        if name in ("one", "two"):
            assert new[name]["opt_ir"] == old[name]["opt_ir"], name
        assert new[name]["so"] == old[name]["so"], name
        assert new[name]["value"] == old[name]["value"], name


def test_their_values_are_right():
    new = run_json_program(PROGRAM)
    x = np.linspace(-1, 1, 6)
    w = np.arange(36.0).reshape(6, 6) / 40
    t = np.tanh(w @ x)
    d_tanh = np.outer(2 * t * (1 - t**2), x)
    d_sin = np.outer(np.cos(w @ x), x)
    np.testing.assert_allclose(new["one"]["value"], d_tanh, rtol=1e-12)
    np.testing.assert_allclose(new["two"]["value"], d_tanh + 2 * d_sin, rtol=1e-12)

    import pennylane as qml

    dev = qml.device("default.qubit", wires=2)

    @qml.qnode(dev)
    def circuit(p):
        qml.RX(p[0], wires=0)
        qml.RY(p[1], wires=1)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1))

    p = qml.numpy.array([0.3, -0.7], requires_grad=True)
    expected = qml.grad(lambda p: qml.math.sin(circuit(p)) * p[0])(p)
    np.testing.assert_allclose(new["quantum"]["value"], expected, rtol=1e-9, atol=1e-12)
    expected = qml.grad(circuit)(p)
    np.testing.assert_allclose(new["circuit"]["value"], expected, rtol=1e-9, atol=1e-12)
