"""The disk cache of compiled libraries: `<cache_dir>/kernels/<key[:2]>/<key>/`.

An entry holds two files: `library.so` and `entry.json`, the record of the key, the
library's size and SHA-256 and the function's name. A library is used only when the entry
passes the checks of `cofactor.safefs` (every folder from the cache root down and both
files owned by the user and writable by nobody else) and its bytes hash to the recorded
SHA-256; an entry that fails the hash or record check is discarded with a warning and the
caller rebuilds it. Folders are created 0700 whatever the umask. A new entry is written into
a temporary folder inside the cache and renamed into place, so readers never see half an
entry and the build folder may live on another file system. The record's modification time
is the entry's last use: the least recently used entries are evicted when the cache grows
past COFACTOR_CACHE_MAX_MB (default 500), except those used in the last 30 s, which another
process may be about to load. A store does not count the entries to know the cache's size:
it adds its entry's size to the ledger (`cofactor.cache_ledger`), and the entries are counted
only when the ledger passes the limit (a store then evicts down to 90% of it), is a day old,
or cannot be trusted; so a store costs the same whatever the number of entries.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cofactor import cache_ledger, safefs, toolchain
from cofactor.safefs import UntrustedPathError


def enabled() -> bool:
    """Whether compiled libraries go through the disk cache (not COFACTOR_DISABLE_CACHE=1)."""
    return os.environ.get("COFACTOR_DISABLE_CACHE", "") in ("", "0")


LIBRARY = "library.so"
RECORD = "entry.json"
DEFAULT_MAX_MB = 500.0
#: Leftovers of a process killed while storing or discarding are removed after this long.
STALE_SECONDS = 3600.0
#: An entry used this recently is not evicted: another process may be about to load it.
EVICT_GRACE_SECONDS = 30.0
#: A store that finds the cache past its limit evicts down to this fraction of it, so that
#: the next full count is a tenth of the limit's worth of stores away, not the next store.
EVICT_DOWN_TO = 0.9


class CacheWarning(UserWarning):
    """The disk cache was not used, or an entry was discarded; compilation goes on without it."""


class _BadEntry(Exception):
    """An entry whose record or library does not match: discard it and rebuild."""


@dataclass(frozen=True)
class Entry:
    key: str
    name: str
    path: Path
    size: int
    last_used: float


def _warn(message: str) -> None:
    warnings.warn(f"cofactor cache: {message}", CacheWarning, stacklevel=4)


def root(*, create: bool = False) -> Path:
    """The cache folder, symbolic links resolved; raises UntrustedPathError when a folder
    above it could let another user swap it."""
    return Path(_root(create=create))


def _root(*, create: bool = False) -> str:
    """`root` as a string (`lookup`, on the cached first call of a process: no pathlib)."""
    base = os.path.realpath(toolchain.cache_dir_str())
    if create:
        safefs.mkdir_private(Path(base))
    safefs.check_ancestors(base)
    return base


def max_bytes() -> int:
    raw = os.environ.get("COFACTOR_CACHE_MAX_MB", "")
    megabytes = DEFAULT_MAX_MB
    if raw:
        try:
            megabytes = float(raw)
            if not megabytes >= 0:
                raise ValueError
        except ValueError:
            _warn(f"COFACTOR_CACHE_MAX_MB={raw!r} is not a size in MB; using {DEFAULT_MAX_MB:g}")
            megabytes = DEFAULT_MAX_MB
    return int(megabytes * 1024 * 1024)


def _verify(entry_fd: int, key: str) -> None:
    """Raise _BadEntry unless the record names `key` and the library matches its hash."""
    try:
        fd, st = safefs.open_file_stat(RECORD, dir_fd=entry_fd, what="cache record")
        try:
            record = json.loads(safefs.read_fd(fd, st.st_size))
        finally:
            os.close(fd)
        if not isinstance(record, dict) or record.get("key") != key:
            raise _BadEntry("its record does not name this key")
        fd, st = safefs.open_file_stat(LIBRARY, dir_fd=entry_fd, what="cached library")
        try:
            size = st.st_size  # (of the descriptor checked and then hashed)
            if size != record.get("size") or safefs.sha256_fd(fd, size) != record.get("sha256"):
                raise _BadEntry("its library does not match the SHA-256 recorded when stored")
        finally:
            os.close(fd)
    except (FileNotFoundError, ValueError, UntrustedPathError) as err:
        raise _BadEntry(str(err)) from err


def _discard(kk_fd: int, key: str) -> None:
    """Remove entry `key` from its folder: renamed aside first, so that it disappears at once."""
    trash = f".trash-{key[:16]}-{secrets.token_hex(4)}"
    try:
        os.rename(key, trash, src_dir_fd=kk_fd, dst_dir_fd=kk_fd)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, dir_fd=kk_fd, ignore_errors=True)


def lookup(key: str) -> Path | None:
    """The verified library of entry `key`, or None (missing, refused or discarded)."""
    try:
        base = _root()
        kk_fd = safefs.open_dirs(base, ("kernels", key[:2]))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        _warn(f"not loading from the cache: {err}; compiling without it")
        return None
    try:
        try:
            entry_fd = safefs.open_dir(key, dir_fd=kk_fd)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            _verify(entry_fd, key)
            os.utime(RECORD, dir_fd=entry_fd, follow_symlinks=False)  # last use, for eviction
        finally:
            os.close(entry_fd)
    except (_BadEntry, UntrustedPathError) as err:
        _warn(f"discarded entry {key[:16]}... ({err}); rebuilding it")
        _discard(kk_fd, key)
        return None
    finally:
        os.close(kk_fd)
    return Path(os.path.join(base, "kernels", key[:2], key, LIBRARY))


def store(key: str, library: Path, name: str) -> Path | None:
    """Copy `library` into entry `key` and return the cached library's path, or None when
    the cache cannot be used (a warning says why). Another process's valid entry wins."""
    data = library.read_bytes()

    def copy(entry_fd: int) -> None:
        safefs.write_file(LIBRARY, data, dir_fd=entry_fd)

    return store_built(key, name, copy)


def store_built(key: str, name: str, build: Callable[[int], None]) -> Path | None:
    """Make entry `key` with `build(fd)`, which writes LIBRARY into the new entry's folder
    (open as `fd`; `/proc/self/fd/<fd>/library.so` names the file through the checked
    folder), and return the cached library's path; None when the cache cannot be used (a
    warning says why; the caller then builds the library elsewhere). Another process's
    valid entry wins. Errors of `build` other than OSError propagate; nothing is stored."""
    kernels_fd = kk_fd = None
    try:
        base = root(create=True)
        kernels_fd = safefs.open_dirs(base, ("kernels",), create=True)
        kk_fd = safefs.open_dir(key[:2], dir_fd=kernels_fd, create=True)
    except OSError as err:
        for fd in (kernels_fd, kk_fd):
            if fd is not None:
                os.close(fd)
        _warn(f"not storing in the cache: {err}; compiling without it")
        return None
    staging = f".tmp-{key[:16]}-{secrets.token_hex(4)}"
    try:
        size = _stage(kk_fd, staging, key, name, build)
        # Locked from before the rename to after the ledger is written: a count made by
        # another process under the lock either sees this entry or runs after the addition.
        with cache_ledger.locked(kernels_fd) as ledger:
            placed = _place(kk_fd, staging, key)
            try:
                _account(base, ledger, size if placed else 0, keep=key)
            except OSError as err:  # the entry is stored: only the size was not checked
                _warn(f"the cache's size was not checked: {err}")
    except OSError as err:
        _warn(f"not storing in the cache: {err}; compiling without it")
        return None
    finally:
        shutil.rmtree(staging, dir_fd=kk_fd, ignore_errors=True)
        os.close(kk_fd)
        os.close(kernels_fd)
    return base / "kernels" / key[:2] / key / LIBRARY


def _stage(kk_fd: int, staging: str, key: str, name: str, build: Callable[[int], None]) -> int:
    """Build the entry in the folder `staging`; returns its size (library and record)."""
    fd = safefs.open_dir(staging, dir_fd=kk_fd, create=True)
    try:
        build(fd)
        lib_fd = os.open(LIBRARY, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            os.fchmod(lib_fd, 0o600)  # whatever the umask gave the linker's output
            data = safefs.read_fd(lib_fd)
        finally:
            os.close(lib_fd)
        record = {
            "key": key,
            "name": name,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        text = json.dumps(record).encode()
        safefs.write_file(RECORD, text, dir_fd=fd)
    finally:
        os.close(fd)
    return len(data) + len(text)


def _place(kk_fd: int, staging: str, key: str) -> bool:
    """Rename `staging` to entry `key`; False when another process's valid entry is there."""
    for _ in range(3):
        try:
            os.rename(staging, key, src_dir_fd=kk_fd, dst_dir_fd=kk_fd)
            return True
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        if _is_valid(kk_fd, key):  # stored by another process meanwhile
            return False
        _discard(kk_fd, key)
    raise OSError(f"entry {key[:16]}... keeps being replaced")


def _account(base: Path, ledger: cache_ledger.Ledger | None, added: int, keep: str) -> None:
    """Add a new entry's `added` bytes to the ledger; count the entries (and evict) only
    when the ledger cannot answer: missing or untrusted, past the limit, or too old."""
    limit = max_bytes()
    usage = ledger.read() if ledger is not None else None
    if usage is not None:
        usage = cache_ledger.Usage(usage.total_bytes + added, usage.counted_at)
        if ledger.is_current(usage, limit, time.time()):
            with contextlib.suppress(OSError):
                ledger.write(usage)
            return
    _count_and_evict(base, ledger, keep=keep, limit=limit, down_to=int(limit * EVICT_DOWN_TO))


def _is_valid(kk_fd: int, key: str) -> bool:
    try:
        entry_fd = safefs.open_dir(key, dir_fd=kk_fd)
    except OSError:
        return False
    try:
        _verify(entry_fd, key)
        return True
    except _BadEntry:
        return False
    finally:
        os.close(entry_fd)


def _scan(base: Path, *, names: bool = False) -> tuple[list[Entry], list[Path]]:
    """The entries under `base` (with the function names read from their records if asked),
    and leftovers of interrupted stores older than STALE_SECONDS."""
    found: list[Entry] = []
    stale: list[Path] = []
    now = time.time()
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for kk in os.scandir(base / "kernels"):
            if not kk.is_dir(follow_symlinks=False):
                continue
            for item in os.scandir(kk.path):
                path = Path(item.path)
                if item.name.startswith("."):
                    with contextlib.suppress(OSError):
                        if now - item.stat(follow_symlinks=False).st_mtime > STALE_SECONDS:
                            stale.append(path)
                    continue
                try:
                    size = sum(f.stat(follow_symlinks=False).st_size for f in os.scandir(path))
                    record_stat = (path / RECORD).lstat()
                    name = json.loads((path / RECORD).read_text())["name"] if names else ""
                except (OSError, ValueError, KeyError, TypeError):
                    size, name, record_stat = 0, "?", item.stat(follow_symlinks=False)
                found.append(Entry(item.name, str(name), path, size, record_stat.st_mtime))
    return found, stale


def entries() -> list[Entry]:
    """Every entry, the most recently used first."""
    found, _ = _scan(root(), names=True)
    return sorted(found, key=lambda e: e.last_used, reverse=True)


def evict(*, keep: str | None = None) -> list[Entry]:
    """Remove the least recently used entries until the cache fits COFACTOR_CACHE_MAX_MB
    (never `keep`, the entry just stored, nor one used in the last EVICT_GRACE_SECONDS);
    returns what was removed. The entries are counted afresh, and the ledger updated."""
    base = root()
    try:
        kernels_fd = safefs.open_dirs(base, ("kernels",))
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        with cache_ledger.locked(kernels_fd) as ledger:
            limit = max_bytes()
            return _count_and_evict(base, ledger, keep=keep, limit=limit, down_to=limit)
    finally:
        os.close(kernels_fd)


def _count_and_evict(
    base: Path, ledger: cache_ledger.Ledger | None, *, keep: str | None, limit: int, down_to: int
) -> list[Entry]:
    """Count every entry; past `limit`, remove the least recently used (as `evict` says)
    until `down_to` bytes are left; write the total left into the ledger."""
    counted_at = time.time()
    found, stale = _scan(base)
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    total = sum(e.size for e in found)
    removed = []
    if total > limit:
        recent = counted_at - EVICT_GRACE_SECONDS
        for entry in sorted(found, key=lambda e: e.last_used):
            if total <= down_to or entry.last_used > recent:
                break
            if entry.key == keep:
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            total -= entry.size
            removed.append(entry)
    if ledger is not None:
        with contextlib.suppress(OSError):
            ledger.write(cache_ledger.Usage(total, counted_at))
    return removed


def clear() -> int:
    """Remove every compiled library; returns how many entries there were."""
    base = root()
    found, _ = _scan(base)
    shutil.rmtree(base / "kernels", ignore_errors=True)
    return len(found)
