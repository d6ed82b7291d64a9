"""The in-process pipeline (libcofactor-compiler.so) against the subprocess tools: the same
working libraries, the same stage texts where the tools agree, CompileError with the stage
that failed, and the fallback switch COFACTOR_PIPELINE."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import numpy as np
import pennylane as qml
import pytest

import cofactor
from cofactor import compiler, native_compiler
from cofactor.errors import CompileError

TWICE = """
func.func @twice(%x: f64) -> f64 attributes {llvm.emit_c_interface} {
  %two = arith.constant 2.0 : f64
  %y = arith.mulf %x, %two : f64
  %s = math.sin %y : f64
  return %s : f64
}
"""


@pytest.fixture(autouse=True)
def _needs_library():
    if (reason := native_compiler.unavailable_reason()) is not None:
        pytest.skip(f"libcofactor-compiler.so not built: {reason}")


def _call_twice(lib: compiler.CompiledLibrary, x: float) -> float:
    handle = ctypes.CDLL(str(lib.so_path))
    handle.twice.restype = ctypes.c_double
    handle.twice.argtypes = [ctypes.c_double]
    return handle.twice(x)


def _compile(monkeypatch, pipeline: str, text: str = TWICE) -> compiler.CompiledLibrary:
    monkeypatch.setenv(compiler.PIPELINE_ENV, pipeline)
    return compiler.compile_module(text, name="twice", cache=False)


def test_both_pipelines_build_libraries_that_agree(monkeypatch):
    native = _compile(monkeypatch, "inprocess")
    tools = _compile(monkeypatch, "subprocess")
    for x in (0.0, 0.3, -1.7):
        assert _call_twice(native, x) == _call_twice(tools, x) == pytest.approx(np.sin(2 * x))
    # cofactor-opt and the library run the same passes on the same input
    assert native.stage("mlir_opt") == tools.stage("mlir_opt")
    assert "llvm.func @twice" in native.stage("mlir_opt")
    assert "define double @twice" in native.stage("llvmir_opt")


@pytest.mark.parametrize(
    ("text", "stage", "needle"),
    [
        ("func.func @f() { bogus.op }", "cofactor-opt", "bogus.op"),
        # parses, but does not verify
        ("func.func @f(%x: f64) -> i32 { return %x : f64 }", "cofactor-opt", "return"),
    ],
)
def test_bad_module_is_a_compile_error_with_its_stage(monkeypatch, text, stage, needle):
    monkeypatch.setenv(compiler.PIPELINE_ENV, "inprocess")
    with pytest.raises(CompileError) as info:
        compiler.compile_module(text, name="bad", cache=False)
    assert info.value.stage == stage
    assert needle in (info.value.tool_message or "")
    assert "module.mlir:" in info.value.tool_message  # located as cofactor-opt locates it


def test_unknown_pipeline_choice_is_refused(monkeypatch):
    monkeypatch.setenv(compiler.PIPELINE_ENV, "turbo")
    with pytest.raises(CompileError, match="COFACTOR_PIPELINE"):
        compiler.compile_module(TWICE, name="twice", cache=False)


def test_circuit_and_gradient_agree_across_pipelines(monkeypatch):
    dev = qml.device("default.qubit", wires=2)

    def circuit(x):
        qml.RX(x[0], wires=0)
        qml.RY(x[1], wires=1)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1))

    def scaled(x):  # classical code before the gates: Enzyme differentiates it
        qml.RX(2.0 * x[0], wires=0)
        qml.RY(x[1], wires=1)
        qml.CNOT(wires=[0, 1])
        return qml.expval(qml.PauliZ(1))

    x = np.array([0.4, 1.1])
    want = qml.QNode(circuit, dev)(x)
    monkeypatch.setenv("COFACTOR_DISABLE_CACHE", "1")
    for pipeline in ("inprocess", "subprocess"):
        monkeypatch.setenv(compiler.PIPELINE_ENV, pipeline)
        f = cofactor.qjit(qml.QNode(circuit, qml.device("lightning.qubit", wires=2)))
        assert f(x) == pytest.approx(want, abs=1e-12), pipeline
        # the plain circuit's gradient without Enzyme, the scaled one's with it
        for fn, enzyme in ((circuit, False), (scaled, True)):
            want_grad = qml.grad(qml.QNode(fn, dev))(qml.numpy.array(x, requires_grad=True))
            g = cofactor.qjit(cofactor.grad(qml.QNode(fn, qml.device("lightning.qubit", wires=2))))
            np.testing.assert_allclose(g(x), want_grad, atol=1e-12, err_msg=pipeline)
            assert ("__enzyme_autodiff" in g.llvmir) is enzyme, (pipeline, fn.__name__)
            assert "define" in g.mlir_opt + g.llvmir


def test_keep_intermediate_in_process_writes_every_stage(monkeypatch, tmp_path):
    monkeypatch.setenv(compiler.PIPELINE_ENV, "inprocess")
    compiler.compile_module(TWICE, name="twice", cache=False, keep_intermediate=tmp_path)
    for filename in compiler.STAGE_FILES.values():
        assert (tmp_path / filename).stat().st_size > 0, filename
    assert "define double @twice" in (tmp_path / "module.opt.ll").read_text()


@pytest.mark.parametrize(
    ("change", "stage", "needle"),
    [
        # no lowering: func.func has no translation to LLVM IR
        ({"mlir_pipeline": ""}, "mlir-translate", "func.func"),
        ({"plain_pipeline": "no-such-pass"}, "opt", "no-such-pass"),
        ({"link_args": ("-l:libcofactor-no-such-library.so",)}, "link", "no-such-library"),
    ],
)
def test_each_later_stage_reports_its_failure(tmp_path, change, stage, needle):
    request = {
        "mlir_pipeline": compiler.mlir_pipeline(),
        "plain_pipeline": compiler.PLAIN_PIPELINE,
        "enzyme_pipeline": compiler.ENZYME_PIPELINE,
        "output": tmp_path / "libtwice.so",
        **change,
    }
    with pytest.raises(CompileError) as info:
        native_compiler.compile_native(TWICE, **request)
    assert info.value.stage == stage
    assert needle in (info.value.tool_message or "")
    assert not (tmp_path / "libtwice.so").exists()


# A crash inside LLVM or Enzyme (a signal such as SIGSEGV) must not end Python: the library
# catches it, the compile is redone with the subprocess tools, and the library is not used
# again in the process. COFACTOR_COMPILER_DEBUG_CRASH makes the library crash on purpose as
# the named stage starts.
CRASH_PROGRAM = """
import warnings
import numpy as np
import cofactor
from cofactor import native_compiler

def f(a):
    return np.sum(np.sin(a) * a)

a = np.linspace(0.1, 1.0, 40).reshape(5, 8)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    g = cofactor.qjit(cofactor.grad(f))(a)
print("error", float(np.abs(g - (np.cos(a) * a + np.sin(a))).max()))
print("warned", any("crashed" in str(w.message) for w in caught))
print("library_used", native_compiler.unavailable_reason() is None)
print("after", float(cofactor.qjit(lambda x: x * 2.0)(1.5)))
"""


@pytest.mark.parametrize("stage", ["cofactor-opt", "opt", "llc"])
def test_a_crash_inside_llvm_does_not_end_python(tmp_path, stage):
    script = tmp_path / "crash.py"
    script.write_text(CRASH_PROGRAM)
    env = {
        **os.environ,
        "COFACTOR_CACHE_DIR": str(tmp_path / "cache"),
        "COFACTOR_COMPILER_DEBUG_CRASH": stage,
    }
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert float(lines["error"]) < 1e-12
    assert lines["warned"] == "True"
    assert lines["library_used"] == "False"  # the rest of the process uses the tools
    assert float(lines["after"]) == 3.0


def _defined(llvm_ir: str) -> set[str]:
    return {
        line.split("@", 1)[1].split("(", 1)[0]
        for line in llvm_ir.splitlines()
        if line.startswith("define")
    }


def test_primal_differentiated_by_enzyme_is_dropped_before_o2(monkeypatch):
    """After Enzyme the primal is no longer called: the driver deletes it before O2 (it was
    optimized and compiled for nothing); the C interface stays, and the gradient is right.
    The traced entry function itself is internal and moved into its C wrapper (session 20),
    so the wrapper is the one function left."""
    monkeypatch.setenv(compiler.PIPELINE_ENV, "inprocess")
    monkeypatch.setenv("COFACTOR_DISABLE_CACHE", "1")
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, 6)
    w = rng.uniform(-1, 1, (6, 6))

    def loss(w):
        return np.sum(np.tanh(w @ x) ** 2)

    g = cofactor.qjit(cofactor.grad(loss))
    t = np.tanh(w @ x)
    np.testing.assert_allclose(g(w), np.outer(2 * t * (1 - t**2), x), rtol=1e-12, atol=1e-14)
    lib = g._last.library
    before, after = _defined(lib.stage("llvmir")), _defined(lib.stage("llvmir_opt"))
    entries = {name for name in before if name.startswith("_mlir_ciface_")}
    assert entries and entries <= after
    assert not {name.removeprefix("_mlir_ciface_") for name in entries} & after
    assert after == entries
    # the primal (called only by __enzyme_autodiff before Enzyme) is gone
    primals = {name for name in before if "loss" in name} - after
    assert primals, (sorted(before), sorted(after))
