"""The process's private folder of compiled libraries that are not in the disk cache.

A library compiled without the disk cache (COFACTOR_DISABLE_CACHE=1, `cache=False`, or a
store that failed) is written into a 0700 folder of this process, removed at exit; each
gets a new name, never used twice: dlopen treats a path it has loaded before as the same
library. The folder is made where `tempfile` would make it ($TMPDIR, $TEMP, $TMP, else
/tmp) without `tempfile.gettempdir`'s probe; with the disk cache off, the preload thread
makes it while the program imports (`native_compiler.preload`).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
_folder: Path | None = None
_numbers = itertools.count()

#: Where `tempfile.gettempdir` looks first, in its order (then /tmp, /var/tmp, ...).
_TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")


def new_path(name: str) -> Path:
    """A new path for library `name` in the private folder (made on first use)."""
    return folder() / f"lib{name}-{next(_numbers)}.so"


def folder() -> Path:
    """The private folder, made now if it is not there (the preload thread calls this when
    every library of the process will go there)."""
    global _folder
    with _lock:
        if _folder is None or not _folder.is_dir():
            _folder = Path(make_dir())
            atexit.register(_remove, _folder, os.getpid())
        return _folder


def make_dir() -> str:
    """A new 0700 folder (`tempfile.mkdtemp`) where tempfile would make it. The first
    `tempfile.gettempdir()` of a process proves its folder writable by creating, writing and
    removing a file in it: 0.2-0.4 ms of the first compile of a process without the disk
    cache. Making the folder in the first candidate proves the same; only when that fails
    (or the candidate is not a folder) does tempfile's own search run."""
    base = tempfile.tempdir
    if base is None:
        base = next((v for k in _TEMP_VARIABLES if (v := os.environ.get(k))), "/tmp")
    try:
        return os.path.abspath(tempfile.mkdtemp(prefix="cofactor-libs-", dir=base))
    except OSError:
        return tempfile.mkdtemp(prefix="cofactor-libs-")


def keep(built: Path, name: str) -> Path:
    """Move a library that is not cached into the private folder."""
    dest = new_path(name)
    try:
        os.rename(built, dest)
    except OSError:  # TMPDIR changed to another file system since the folder was made
        shutil.copyfile(built, dest)
    return dest


def _remove(folder: Path, owner_pid: int) -> None:
    if os.getpid() == owner_pid:  # not in a forked child that exits normally
        shutil.rmtree(folder, ignore_errors=True)
