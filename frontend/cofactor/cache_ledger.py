"""The disk cache's usage ledger, `<cache>/kernels/usage`: the total size of the entries and
the time they were last counted, so that a store need not count every entry.

Counting the entries stats every file of every entry (~50 us an entry; a full cache holds
thousands). A store adds the size of its new entry to the ledger instead, and the entries are
counted again (`cache._scan`) only when the ledger says the cache passed its limit, when it
was last counted more than RECOUNT_SECONDS ago, or when the ledger is missing, unreadable or
not trusted. The ledger is a hint for when to count, never for what to load: it decides no
more than when eviction runs.

Every reader and writer holds an exclusive `flock` on the ledger while it reads, changes and
writes it, and a store holds it across the rename that makes its entry visible, so that a
count made under the lock and a store's addition never both include the same entry. The file
is created 0600 in the checked `kernels` folder; one that is not a regular file of ours,
writable by nobody else, is removed and the entries are counted again.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from cofactor import safefs
from cofactor.safefs import UntrustedPathError

LEDGER = "usage"
#: The entries are counted again at least this often, so that what the ledger cannot see
#: (entries removed by hand, discarded as damaged, stored by an older cofactor) is corrected.
RECOUNT_SECONDS = 24 * 3600.0
_MAGIC = "cofactor-cache-usage-1"
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Usage:
    total_bytes: int
    counted_at: float  # time.time() of the last full count


class Ledger:
    """The ledger file, open and locked by this process."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def read(self) -> Usage | None:
        """What the file says, or None when it is empty, unreadable or not a ledger."""
        try:
            return parse(os.pread(self._fd, 256, 0))
        except OSError:
            return None

    def write(self, usage: Usage) -> None:
        data = f"{_MAGIC} {usage.total_bytes} {usage.counted_at!r}\n".encode()
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))

    def is_current(self, usage: Usage, limit: int, now: float) -> bool:
        """Whether `usage` may stand in for a count: under `limit`, counted recently."""
        return usage.total_bytes <= limit and 0 <= now - usage.counted_at < RECOUNT_SECONDS


def parse(data: bytes) -> Usage | None:
    try:
        magic, total, counted_at = data.decode("ascii").split()
        usage = Usage(int(total), float(counted_at))
    except (UnicodeDecodeError, ValueError):
        return None
    if magic != _MAGIC or usage.total_bytes < 0 or not math.isfinite(usage.counted_at):
        return None
    return usage


@contextlib.contextmanager
def locked(kernels_fd: int) -> Iterator[Ledger | None]:
    """The ledger in the (checked) folder `kernels_fd`, locked for the `with` block; None
    when it cannot be had (the caller then counts the entries, as without a ledger)."""
    fd = _open_locked(kernels_fd)
    try:
        yield None if fd is None else Ledger(fd)
    finally:
        if fd is not None:
            os.close(fd)  # (releases the lock)


def _open_locked(kernels_fd: int) -> int | None:
    for _ in range(3):
        try:
            fd = os.open(LEDGER, _OPEN_FLAGS, 0o600, dir_fd=kernels_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UntrustedPathError(f"cache ledger {LEDGER} is not a regular file")
            safefs.check_owned(st, "cache ledger", LEDGER)
            if stat.S_IMODE(st.st_mode) != 0o600:
                os.fchmod(fd, 0o600)  # as every file of the cache, whatever the umask
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Removed or replaced while we waited for the lock (`cache clear`, or another
            # process replacing an untrusted one): lock the file that is there now.
            now = os.stat(LEDGER, dir_fd=kernels_fd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                return fd
        except UntrustedPathError:
            # Not ours, or writable by others: its numbers are not used. The folder is ours
            # and only we can write in it, so the name can be removed and made again.
            with contextlib.suppress(OSError):
                os.unlink(LEDGER, dir_fd=kernels_fd)
        except OSError:
            pass  # no lock on this file system, or gone meanwhile
        os.close(fd)
    return None
