"""The toolchain end to end: discovery, the doctor's Enzyme self-test, CompileError and the
disk cache of compiled libraries."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from cofactor import compiler, toolchain
from cofactor.errors import CompileError, ToolchainNotFoundError

TINY_MODULE = """
func.func @twice(%x: f64) -> f64 attributes {llvm.emit_c_interface} {
  %two = arith.constant 2.0 : f64
  %y = arith.mulf %x, %two : f64
  return %y : f64
}
"""


def test_every_tool_is_found():
    for name, tool in toolchain.TOOLS.items():
        assert tool.find().exists(), name


def test_override_pointing_nowhere_names_the_variable(monkeypatch):
    monkeypatch.setenv("COFACTOR_LLC", "/nonexistent/llc")
    with pytest.raises(ToolchainNotFoundError, match="COFACTOR_LLC"):
        toolchain.find("llc")


def test_enzyme_custom_gradient_selftest():
    from cofactor.doctor import selftest

    got, want, _ = selftest(x=1.3)
    assert want == pytest.approx(math.cos(1.3) * 1.3 + math.sin(1.3), abs=0)
    assert got == pytest.approx(want, abs=1e-14)


def test_doctor_command_succeeds():
    proc = subprocess.run(
        [sys.executable, "-m", "cofactor", "doctor"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "doctor: all good" in proc.stdout
    for name in toolchain.TOOLS:
        assert name in proc.stdout


def test_bad_ir_is_a_compile_error_with_stage_and_tool_message():
    with pytest.raises(CompileError) as info:
        compiler.compile_module("func.func @f() { bogus.op }", name="bad", cache=False)
    assert info.value.stage == "cofactor-opt"
    assert "bogus.op" in str(info.value)


def test_disk_cache_reuses_and_verifies_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(tmp_path))
    first = compiler.compile_module(TINY_MODULE, name="twice")
    assert not first.from_cache
    second = compiler.compile_module(TINY_MODULE, name="twice")
    assert second.from_cache and second.so_path == first.so_path
    assert "llvm.func @twice" in second.stage("mlir_opt")

    # An entry whose recorded key does not match is never loaded: discarded and rebuilt.
    record = first.so_path.parent / "entry.json"
    record.write_text(record.read_text().replace(first.so_path.parent.name, "0" * 64))
    with pytest.warns(UserWarning, match="discarded entry"):
        third = compiler.compile_module(TINY_MODULE, name="twice")
    assert not third.from_cache
    assert compiler.compile_module(TINY_MODULE, name="twice").from_cache


def test_keep_intermediate_writes_every_stage(tmp_path):
    compiler.compile_module(TINY_MODULE, name="twice", keep_intermediate=tmp_path / "stages")
    for filename in compiler.STAGE_FILES.values():
        assert (tmp_path / "stages" / filename).stat().st_size > 0


def test_enzyme_patch_renames_llvm_and_drops_the_rpath(tmp_path):
    """`enzyme_plugin.patch` on a library built like the wheel's plugin: it needs
    libLLVM-15-a95c9aa1.so.1 through an RPATH; afterwards it needs Debian's libLLVM-15.so.1,
    has no RPATH, and patching is byte-for-byte reproducible."""
    import shutil

    from cofactor import enzyme_plugin

    if shutil.which("readelf") is None:
        pytest.skip("needs readelf")
    (tmp_path / "stub.c").write_text("int llvm_stub(void) { return 1; }\n")
    (tmp_path / "plugin.c").write_text(
        "int llvm_stub(void);\nint f(void) { return llvm_stub(); }\n"
    )
    stub = tmp_path / enzyme_plugin.OLD_NEEDED.decode()
    cc = str(toolchain.find("cc"))
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            f"-Wl,-soname,{stub.name}",
            "-o",
            str(stub),
            str(tmp_path / "stub.c"),
        ],
        check=True,
    )
    plugin = tmp_path / "plugin.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-o",
            str(plugin),
            str(tmp_path / "plugin.c"),
            str(stub),
            "-Wl,-rpath,$ORIGIN/../lib",
            "-Wl,--disable-new-dtags",
        ],
        check=True,
    )

    def dynamic(path):
        return subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout

    assert "libLLVM-15-a95c9aa1.so.1" in dynamic(plugin) and "RPATH" in dynamic(plugin)
    patched = enzyme_plugin.patch(plugin.read_bytes())
    assert patched == enzyme_plugin.patch(plugin.read_bytes())
    assert len(patched) == plugin.stat().st_size
    out = tmp_path / "patched.so"
    out.write_bytes(patched)
    shown = dynamic(out)
    assert "[libLLVM-15.so.1]" in shown and "a95c9aa1" not in shown
    assert "RPATH" not in shown and "RUNPATH" not in shown
    with pytest.raises(enzyme_plugin.PluginError, match="expected one DT_NEEDED"):
        enzyme_plugin.patch(patched)


def test_which_is_remembered_per_path_and_searched_again_when_gone(tmp_path, monkeypatch):
    """`toolchain._which` remembers a PATH search for each value of PATH; a remembered tool
    that was removed is searched for again when the tool is located (the key then names the
    one found now, with its own size and time)."""
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        tool = folder / "cofactor-test-tool"
        tool.write_text("#!/bin/sh\n" + "#" * len(folder.name))
        tool.chmod(0o755)
    tool = toolchain.Tool("test-tool", "COFACTOR_TEST_TOOL_UNSET", ("cofactor-test-tool",))
    monkeypatch.delenv("COFACTOR_TEST_TOOL_UNSET", raising=False)
    monkeypatch.setenv("PATH", f"{first}:{second}")
    assert toolchain._which("cofactor-test-tool") == str(first / "cofactor-test-tool")
    path, st = tool.locate_stat()
    assert path == str(first / "cofactor-test-tool")
    assert (st.st_size, st.st_mtime_ns) == (os.stat(path).st_size, os.stat(path).st_mtime_ns)
    (first / "cofactor-test-tool").unlink()
    assert toolchain._which("cofactor-test-tool") == str(first / "cofactor-test-tool")  # (kept)
    path, st = tool.locate_stat()
    assert path == str(second / "cofactor-test-tool") == tool.locate()
    assert st.st_size == (second / "cofactor-test-tool").stat().st_size
    assert toolchain._which("cofactor-test-tool") == str(second / "cofactor-test-tool")
    monkeypatch.setenv("PATH", str(tmp_path))  # another PATH: searched, not remembered
    assert toolchain._which("cofactor-test-tool") is None
    with pytest.raises(ToolchainNotFoundError, match="test-tool not found"):
        tool.locate()
    monkeypatch.setenv("PATH", f"{first}:{second}")
    assert toolchain._which("cofactor-test-tool") == str(second / "cofactor-test-tool")
