"""The private folder of the libraries compiled without the disk cache
(`cofactor.private_libraries`).

It is made where `tempfile` would make it ($TMPDIR, $TEMP, $TMP, else /tmp), 0700, without
`tempfile.gettempdir`'s probe (a file created, written and removed in each candidate: a few
tenths of a millisecond of the first compile of a process); tempfile's own search runs only
when the first candidate cannot take the folder.
"""

from __future__ import annotations

import os
import stat
import tempfile

import pytest

from cofactor import private_libraries


@pytest.fixture
def no_tempdir_yet(monkeypatch):
    """As in a new process: tempfile has not chosen its folder; record its probes."""
    monkeypatch.setattr(tempfile, "tempdir", None)
    probes: list[str] = []
    search = tempfile._get_default_tempdir

    def probing() -> str:
        probes.append("searched")
        return search()

    monkeypatch.setattr(tempfile, "_get_default_tempdir", probing)
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    return probes


def _is_private_folder(path: str) -> bool:
    st = os.lstat(path)
    return (
        stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    )


def test_made_in_tmpdir_without_probing(no_tempdir_yet, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    folder = private_libraries.make_dir()
    assert os.path.dirname(folder) == str(tmp_path)
    assert os.path.basename(folder).startswith("cofactor-libs-")
    assert _is_private_folder(folder)
    assert no_tempdir_yet == []  # before: tempfile.mkdtemp() probed $TMPDIR first


def test_temp_and_tmp_in_tempfiles_order(no_tempdir_yet, tmp_path, monkeypatch):
    (tmp_path / "temp").mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMP", str(tmp_path / "tmp"))
    monkeypatch.setenv("TEMP", str(tmp_path / "temp"))
    assert os.path.dirname(private_libraries.make_dir()) == str(tmp_path / "temp")


def test_a_relative_tmpdir_gives_an_absolute_folder(no_tempdir_yet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    monkeypatch.setenv("TMPDIR", "rel")
    folder = private_libraries.make_dir()
    assert os.path.isabs(folder) and os.path.dirname(folder) == str(tmp_path / "rel")


def test_a_missing_tmpdir_falls_back_to_tempfiles_search(no_tempdir_yet, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    folder = private_libraries.make_dir()
    assert no_tempdir_yet == ["searched"]
    assert os.path.dirname(folder) == tempfile.gettempdir() and _is_private_folder(folder)
    os.rmdir(folder)


def test_a_tempdir_chosen_by_the_program_wins(no_tempdir_yet, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", "/nonexistent")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert os.path.dirname(private_libraries.make_dir()) == str(tmp_path)
    assert no_tempdir_yet == []


def test_made_by_the_preload_thread_when_the_cache_is_off():
    # Every library of such a process goes there: the folder is made beside the import, not
    # by the first compile (and a process with the cache on makes none ahead).
    from fresh_process import run_json_program

    program = r"""
import json
import cofactor
from cofactor import native_compiler, private_libraries
native_compiler._preload_thread.join()
print(json.dumps({"folder": None if private_libraries._folder is None
                  else str(private_libraries._folder)}))
"""
    off = run_json_program(program, COFACTOR_DISABLE_CACHE="1")
    assert off["folder"] and os.path.basename(off["folder"]).startswith("cofactor-libs-")
    assert not os.path.exists(off["folder"])  # removed when that process ended
    assert run_json_program(program, COFACTOR_DISABLE_CACHE="0")["folder"] is None
