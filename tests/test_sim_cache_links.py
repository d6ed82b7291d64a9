"""A symbolic link planted in the cache (in place of the library, its record, an entry or
one of the folders above it) is refused like any other untrusted path: the entry is
discarded and rebuilt, or the program compiles without the cache, with a CacheWarning.
Before, `open(..., O_NOFOLLOW)` failed with ELOOP/ENOTDIR and the bare OSError escaped from
the compile (the user's program failed)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from cofactor import cache, compiler

MODULE = """
func.func @thrice(%x: f64) -> f64 attributes {llvm.emit_c_interface} {
  %c = arith.constant 3.0 : f64
  %y = arith.mulf %x, %c : f64
  return %y : f64
}
"""


def compile_into(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> compiler.CompiledLibrary:
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(cache_dir))
    return compiler.compile_module(MODULE, name="thrice")


def swap_for_link(path: Path) -> None:
    """Move `path` aside and put a symbolic link to the moved copy in its place."""
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    path.symlink_to(aside)


@pytest.mark.parametrize("part", ["library", "record", "entry", "kk", "kernels"])
def test_symlink_in_the_cache_is_refused_not_raised(tmp_path, monkeypatch, part):
    first = compile_into(monkeypatch, tmp_path / "c")
    library = first.so_path
    target = {
        "library": library,
        "record": library.parent / "entry.json",
        "entry": library.parent,
        "kk": library.parent.parent,
        "kernels": library.parent.parent.parent,
    }[part]
    swap_for_link(target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = compile_into(monkeypatch, tmp_path / "c")
    assert not again.from_cache
    messages = [str(w.message) for w in caught if issubclass(w.category, cache.CacheWarning)]
    assert any("symbolic link" in m for m in messages), messages
    assert not os.path.islink(again.so_path)
    if part in ("library", "record"):  # inside a sound entry folder: rebuilt in place
        assert again.so_path == library and compile_into(monkeypatch, tmp_path / "c").from_cache
