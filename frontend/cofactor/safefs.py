"""File-system checks for the files cofactor loads as code: the cached libraries and the
Enzyme plugin.

A file is trusted when it, and every folder from a trusted root down to it, is owned by the
current user and writable by nobody else; an ancestor of the root may also belong to root or
be a sticky folder such as /tmp. Folders are walked with file descriptors (`openat` with
O_NOFOLLOW) and every check is an `fstat` of the descriptor that is then read, so a check
and the bytes hashed after it always describe the same file. Only the user (or root) can
change a folder that passed, so loading the same path afterwards loads those bytes.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

#: Opening flags for folders and files: never follow a symbolic link planted in the tree.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class UntrustedPathError(OSError):
    """A folder or file that cofactor would load code from fails an ownership check."""


def _is_link(name: str | os.PathLike, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_no_follow(name: str | os.PathLike, flags: int, dir_fd: int | None, what: str) -> int:
    """`os.open` with O_NOFOLLOW; a symbolic link in the name's place is an untrusted path
    (ELOOP, or ENOTDIR for a folder), so that callers discard it like any other refused
    entry instead of failing with a bare OSError."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, dir_fd):
            raise UntrustedPathError(f"{what} {name} is a symbolic link") from err
        raise


def _describe(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}"


def check_owned(
    st: os.stat_result, what: str, path: os.PathLike | str, *, allow_root: bool = False
) -> None:
    """Raise UntrustedPathError unless `st` is owned by us (or by root, with `allow_root`)
    and not writable by group or others."""
    if st.st_uid != os.geteuid() and not (allow_root and st.st_uid == 0):
        raise UntrustedPathError(
            f"{what} {path} belongs to another user ({_describe(st)}; you are uid {os.geteuid()})"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedPathError(
            f"{what} {path} is writable by group or others ({_describe(st)}); "
            f"run `chmod go-w {path}` if you trust its content, or remove it"
        )


def check_ancestors(path: Path | str) -> None:
    """Every folder above `path` (an absolute path) must belong to us or root, and be
    writable by others only when sticky (like /tmp): otherwise someone else could swap
    `path` for another folder."""
    for parent in _parents(os.fspath(path)):
        st = os.lstat(parent)
        if st.st_uid not in (0, os.geteuid()):
            raise UntrustedPathError(
                f"folder {parent} (above {path}) belongs to another user ({_describe(st)})"
            )
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise UntrustedPathError(
                f"folder {parent} (above {path}) is writable by everyone and not sticky "
                f"({_describe(st)})"
            )


def _parents(path: str) -> list[str]:
    """`Path(path).parents` as strings (pathlib's objects cost more than the checks: the
    cache folder is checked on every first call of a process). A path pathlib would
    normalise or read otherwise (relative, `//`, a part starting with a dot, a trailing
    slash) goes through pathlib."""
    if not path.startswith("/") or "//" in path or "/." in path or path.endswith("/"):
        return [str(p) for p in Path(path).parents]
    out = []
    parent = os.path.dirname(path)
    while parent != "/":
        out.append(parent)
        parent = os.path.dirname(parent)
    out.append("/")
    return out


def mkdir_private(path: Path) -> None:
    """Create `path` and its missing parents as 0700 whatever the umask (existing ones are
    left as they are: check_ancestors and open_dir judge them)."""
    missing = []
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            break
        missing.append(candidate)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue  # created concurrently: judged when opened
        os.chmod(folder, 0o700, follow_symlinks=False)


def open_dir(name: str | os.PathLike, *, dir_fd: int | None = None, create: bool = False) -> int:
    """Open the folder `name` (relative to `dir_fd`), creating it 0700 if asked, and check it.
    Returns the descriptor; raises FileNotFoundError, or UntrustedPathError."""
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
            created = True
        except FileExistsError:
            created = False
    else:
        created = False
    fd = _open_no_follow(name, _DIR_FLAGS, dir_fd, "cache folder")
    try:
        if created:
            os.fchmod(fd, 0o700)  # the umask may have removed bits from the 0700 asked
        check_owned(os.fstat(fd), "cache folder", name)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dirs(root: Path, parts: tuple[str, ...], *, create: bool = False) -> int:
    """Open `root/parts[0]/parts[1]/...`, checking every folder from `root` down."""
    fd = open_dir(root, create=False)
    try:
        for part in parts:
            child = open_dir(part, dir_fd=fd, create=create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(
    name: str | os.PathLike,
    *,
    dir_fd: int | None = None,
    what: str = "file",
    allow_root: bool = False,
) -> int:
    """Open a regular file for reading without following a link, and check its owner and mode."""
    return open_file_stat(name, dir_fd=dir_fd, what=what, allow_root=allow_root)[0]


def open_file_stat(
    name: str | os.PathLike,
    *,
    dir_fd: int | None = None,
    what: str = "file",
    allow_root: bool = False,
) -> tuple[int, os.stat_result]:
    """`open_file`, with the `fstat` of the descriptor that was checked (its size: the
    expected length for `read_fd` and `sha256_fd`)."""
    fd = _open_no_follow(name, _FILE_FLAGS, dir_fd, what)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedPathError(f"{what} {name} is not a regular file")
        check_owned(st, what, name, allow_root=allow_root)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


_CHUNK = 1 << 20


def _chunks(fd: int, size: int | None) -> Iterator[bytes]:
    """The bytes of an open file from its start to its end, in chunks of at most 1 MiB.
    `size` (the length `fstat` gave) sizes the reads: a file of that length takes one read
    of it and one of a byte, which finds the end (a read of 1 MiB allocates that much
    first: four memory-map system calls for every small file)."""
    offset = 0
    while chunk := os.pread(
        fd, _CHUNK if size is None else min(max(size - offset, 0) + 1, _CHUNK), offset
    ):
        yield chunk
        offset += len(chunk)


def read_fd(fd: int, size: int | None = None) -> bytes:
    """All bytes of an open file, from its start (`size`: its expected length, see `_chunks`;
    the bytes are read to the end whatever it says)."""
    return b"".join(_chunks(fd, size))


def sha256_fd(fd: int, size: int | None = None) -> str:
    """The SHA-256 (hex) of all bytes of an open file (`size`: as for `read_fd`)."""
    digest = hashlib.sha256()
    for chunk in _chunks(fd, size):
        digest.update(chunk)
    return digest.hexdigest()


def write_file(name: str, data: bytes, *, dir_fd: int, mode: int = 0o600) -> None:
    """Create `name` (it must not exist) with exactly `mode` and write `data` to it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, mode, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
