"""The private folder of the libraries compiled without the disk cache (`compiler._private_path`).

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

from cofactor import compiler


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
    folder = compiler._make_private_dir()
    assert os.path.dirname(folder) == str(tmp_path)
    assert os.path.basename(folder).startswith("cofactor-libs-")
    assert _is_private_folder(folder)
    assert no_tempdir_yet == []  # before: tempfile.mkdtemp() probed $TMPDIR first


def test_temp_and_tmp_in_tempfiles_order(no_tempdir_yet, tmp_path, monkeypatch):
    (tmp_path / "temp").mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMP", str(tmp_path / "tmp"))
    monkeypatch.setenv("TEMP", str(tmp_path / "temp"))
    assert os.path.dirname(compiler._make_private_dir()) == str(tmp_path / "temp")


def test_a_relative_tmpdir_gives_an_absolute_folder(no_tempdir_yet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    monkeypatch.setenv("TMPDIR", "rel")
    folder = compiler._make_private_dir()
    assert os.path.isabs(folder) and os.path.dirname(folder) == str(tmp_path / "rel")


def test_a_missing_tmpdir_falls_back_to_tempfiles_search(no_tempdir_yet, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    folder = compiler._make_private_dir()
    assert no_tempdir_yet == ["searched"]
    assert os.path.dirname(folder) == tempfile.gettempdir() and _is_private_folder(folder)
    os.rmdir(folder)


def test_a_tempdir_chosen_by_the_program_wins(no_tempdir_yet, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", "/nonexistent")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert os.path.dirname(compiler._make_private_dir()) == str(tmp_path)
    assert no_tempdir_yet == []
