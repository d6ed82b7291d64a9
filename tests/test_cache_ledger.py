"""A store into the disk cache costs the same whatever the number of entries: the usage
ledger (`cofactor.cache_ledger`) answers "is the cache past its limit" without counting the
entries, which happens only when the ledger says so, is too old, or cannot be trusted."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from benchmarks.cache_store import fill
from cofactor import cache, cache_ledger


def store_one(tmp_path: Path, index: int, size: int = 1000) -> Path | None:
    library = tmp_path / f"new{index}.so"
    library.write_bytes(os.urandom(size))
    return cache.store(hashlib.sha256(f"new {index}".encode()).hexdigest(), library, f"g{index}")


def ledger_usage(cache_dir: Path) -> cache_ledger.Usage | None:
    return cache_ledger.parse((cache_dir / "kernels" / cache_ledger.LEDGER).read_bytes())


def true_total() -> int:
    return sum(e.size for e in cache.entries())


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("COFACTOR_CACHE_DIR", str(folder))
    monkeypatch.delenv("COFACTOR_CACHE_MAX_MB", raising=False)
    return folder


@pytest.fixture
def scandirs(monkeypatch) -> list[str | int]:
    """The folders os.scandir lists from now on (counting the entries lists each one)."""
    listed: list[str | int] = []
    real = os.scandir

    def counting(path="."):
        listed.append(path if isinstance(path, int) else os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    return listed


def test_a_store_into_a_large_cache_does_not_count_the_entries(tmp_path, cache_dir, scandirs):
    fill(cache_dir, 2000)
    assert store_one(tmp_path, 0) is not None  # no ledger yet: counted once
    assert len(scandirs) > 2000
    assert ledger_usage(cache_dir).total_bytes == true_total()
    scandirs.clear()
    for i in range(1, 4):
        assert store_one(tmp_path, i) is not None
    assert scandirs == []
    assert ledger_usage(cache_dir).total_bytes == true_total()
    assert len(cache.entries()) == 2004
    # a ledger counted more than RECOUNT_SECONDS ago is counted again
    usage = ledger_usage(cache_dir)
    old = cache_ledger.Usage(usage.total_bytes, time.time() - cache_ledger.RECOUNT_SECONDS - 1)
    (cache_dir / "kernels" / cache_ledger.LEDGER).write_text(
        f"cofactor-cache-usage-1 {old.total_bytes} {old.counted_at!r}\n"
    )
    scandirs.clear()
    store_one(tmp_path, 4)
    assert len(scandirs) > 2000
    assert time.time() - ledger_usage(cache_dir).counted_at < 60


def test_a_store_past_the_limit_evicts_the_least_recently_used(
    tmp_path, cache_dir, scandirs, monkeypatch
):
    fill(cache_dir, 2000)
    store_one(tmp_path, 0)  # makes the ledger
    total = true_total()
    limit = total + 2500  # room for two more stores of ~1 kB, not three
    monkeypatch.setenv("COFACTOR_CACHE_MAX_MB", repr(limit / (1024 * 1024)))
    limit = cache.max_bytes()
    scandirs.clear()
    store_one(tmp_path, 1)
    store_one(tmp_path, 2)
    assert scandirs == [] and len(cache.entries()) == 2003
    before = sorted(cache.entries(), key=lambda e: e.last_used)
    scandirs.clear()
    path = store_one(tmp_path, 3)
    assert len(scandirs) > 2000  # the ledger passed the limit: counted and evicted
    after = cache.entries()
    left = true_total()
    assert left <= limit * cache.EVICT_DOWN_TO < left + 1300  # down to 90%, not further
    gone = {e.key for e in before} - {e.key for e in after}
    assert gone == {e.key for e in before[: len(gone)]}  # the least recently used
    assert path.is_file() and {"g1", "g2", "g3"} <= {e.name for e in after}
    assert ledger_usage(cache_dir).total_bytes == left
    scandirs.clear()
    store_one(tmp_path, 4)  # back under the limit: no count
    assert scandirs == []


def test_public_evict_counts_and_updates_the_ledger(tmp_path, cache_dir, monkeypatch):
    fill(cache_dir, 50)
    store_one(tmp_path, 0)
    (cache_dir / "kernels" / cache_ledger.LEDGER).write_text("cofactor-cache-usage-1 5 1.0\n")
    monkeypatch.setenv("COFACTOR_CACHE_MAX_MB", repr(30_000 / (1024 * 1024)))
    removed = cache.evict()
    assert len(removed) > 0 and true_total() <= cache.max_bytes() < true_total() + 1300
    assert ledger_usage(cache_dir).total_bytes == true_total()


def store_many(tag: str, folder: Path, start) -> None:
    """In a forked child: 40 stores, once both children are ready. Each read of the ledger
    is followed by a sleep of 5 ms, so that the stores would lose each other's
    additions if they did not hold the lock until they write it."""
    read = cache_ledger.Ledger.read

    def slow_read(ledger: cache_ledger.Ledger) -> cache_ledger.Usage | None:
        usage = read(ledger)
        time.sleep(0.005)
        return usage

    cache_ledger.Ledger.read = slow_read  # (this child's own copy of the class)
    start.wait()
    for i in range(40):
        library = folder / f"{tag}{i}.so"
        library.write_bytes(os.urandom(500 + 37 * i))
        assert cache.store(hashlib.sha256(f"{tag} {i}".encode()).hexdigest(), library, tag)


def test_concurrent_stores_from_two_processes_keep_the_ledger_exact(
    tmp_path, cache_dir, monkeypatch
):
    fill(cache_dir, 300)  # old entries, evictable, ~350 kB
    # the 80 new entries (~100 kB) keep passing the limit: counts and evictions happen
    monkeypatch.setenv("COFACTOR_CACHE_MAX_MB", "0.3")
    fork = multiprocessing.get_context("fork")  # (a new interpreter would import PennyLane)
    start = fork.Barrier(2)
    children = [fork.Process(target=store_many, args=(tag, tmp_path, start)) for tag in "ab"]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    names = [e.name for e in cache.entries()]
    assert names.count("a") == names.count("b") == 40  # new entries are never evicted
    assert len(names) < 380  # old ones were
    assert ledger_usage(cache_dir).total_bytes == true_total() <= cache.max_bytes()


def ledger_of_another_user(ledger: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    ledger.write_text(f"cofactor-cache-usage-1 0 {time.time()!r}\n")
    os.chown(ledger, 65534, 65534)


def ledger_writable_by_others(ledger: Path) -> None:
    ledger.write_text(f"cofactor-cache-usage-1 0 {time.time()!r}\n")
    ledger.chmod(0o666)


def ledger_garbled(ledger: Path) -> None:
    ledger.write_bytes(b"cofactor-cache-usage-1 12x \xff\n")


def ledger_negative(ledger: Path) -> None:
    ledger.write_text(f"cofactor-cache-usage-1 -999999999 {time.time()!r}\n")


@pytest.mark.parametrize(
    "damage", [ledger_of_another_user, ledger_writable_by_others, ledger_garbled, ledger_negative]
)
def test_an_untrusted_or_damaged_ledger_is_ignored_and_rebuilt(
    tmp_path, cache_dir, scandirs, damage
):
    fill(cache_dir, 100)
    store_one(tmp_path, 0)
    ledger = cache_dir / "kernels" / cache_ledger.LEDGER
    ledger.unlink()
    damage(ledger)  # each says the cache is empty, or says nothing
    scandirs.clear()
    store_one(tmp_path, 1)
    assert len(scandirs) > 100  # its number was not used: counted
    st = ledger.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (os.geteuid(), 0o600)
    assert ledger_usage(cache_dir).total_bytes == true_total()


def test_a_link_in_place_of_the_ledger_is_not_followed(tmp_path, cache_dir, scandirs):
    fill(cache_dir, 100)
    target = tmp_path / "elsewhere"
    target.write_text("not the cache's\n")
    (cache_dir / "kernels" / cache_ledger.LEDGER).symlink_to(target)
    for i in range(2):  # no ledger to be had: every store counts, as before the ledger
        scandirs.clear()
        assert store_one(tmp_path, i) is not None
        assert len(scandirs) > 100
    assert target.read_text() == "not the cache's\n"


def test_clear_removes_the_ledger_with_the_entries(tmp_path, cache_dir):
    fill(cache_dir, 10)
    store_one(tmp_path, 0)
    assert cache.clear() == 11
    assert not (cache_dir / "kernels").exists()
    store_one(tmp_path, 1)
    assert ledger_usage(cache_dir).total_bytes == true_total() > 0
