"""What a compile that stores its library into the disk cache costs when the cache already
holds many entries (a user's cache may hold thousands; the other benchmarks turn the cache
off). Each count gets a new cache folder filled with that many valid entries (`fill`), then
compiles small modules that are not in it.

    .venv/bin/python -m benchmarks.cache_store [--entries 0,1000,10000] [--repeat 15]

Prints, per count, the median [min] in ms of the whole compile and of the store's own work
(`cofactor.cache.store_built` but the compiler it runs: staging, hashing, rename, and the
cache's size bookkeeping). The in-process compiler links into the new entry's folder; with
COFACTOR_PIPELINE=subprocess the store copies the library built elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

MODULE = """
func.func @{name}(%x: f64) -> f64 attributes {{llvm.emit_c_interface}} {{
  %c = arith.constant {const} : f64
  %y = arith.mulf %x, %c : f64
  return %y : f64
}}
"""


def fill(cache_dir: Path, count: int, *, size: int = 1000, age: float = 3600.0) -> None:
    """`count` entries with valid records (key, size, SHA-256 of their library), as a store
    would leave them (folders 0700, files 0600), last used `age` seconds ago or earlier
    (entry i is i seconds older). Their libraries are not loadable code: nothing loads them."""
    from cofactor import cache

    kernels = cache_dir / "kernels"
    kernels.mkdir(parents=True, mode=0o700, exist_ok=True)
    now = time.time()
    for i in range(count):
        key = hashlib.sha256(f"fake entry {i}".encode()).hexdigest()
        entry = kernels / key[:2] / key
        entry.parent.mkdir(mode=0o700, exist_ok=True)
        entry.mkdir(mode=0o700)
        data = i.to_bytes(4, "little") * (size // 4)
        record = {"key": key, "name": f"f{i}", "size": len(data)}
        record["sha256"] = hashlib.sha256(data).hexdigest()
        for name, content in ((cache.LIBRARY, data), (cache.RECORD, json.dumps(record).encode())):
            fd = os.open(entry / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(content)
        past = now - age - i
        os.utime(entry / cache.RECORD, (past, past))


def measure(count: int, repeat: int) -> tuple[list[float], list[float]]:
    """Seconds of `repeat` compiles that store, and of their stores' own work (everything
    `cofactor.cache.store_built` does but run the compiler it is given), with `count`
    entries already in the cache."""
    from cofactor import cache, compiler

    folder = tempfile.mkdtemp(prefix="cofactor-bench-store-")
    os.environ["COFACTOR_CACHE_DIR"] = folder
    fill(Path(folder), count)
    os.sync()  # written back first, as in a user's cache, not during the timed compiles
    store_built = cache.store_built
    stores: list[float] = []

    def timed(key, name, build):
        built = [0.0]

        def timed_build(fd: int) -> None:
            t = time.perf_counter()
            try:
                build(fd)
            finally:
                built[0] += time.perf_counter() - t

        t = time.perf_counter()
        try:
            return store_built(key, name, timed_build)
        finally:
            stores.append(time.perf_counter() - t - built[0])

    cache.store_built = timed
    compiles = []
    try:
        seed = time.time_ns()
        for i in range(repeat + 1):  # the first one makes the ledger (a count): not timed
            text = MODULE.format(name=f"f{i}", const=f"{seed % 1000 + i}.5")
            t = time.perf_counter()
            assert not compiler.compile_module(text, name=f"f{i}").from_cache
            compiles.append(time.perf_counter() - t)
    finally:
        cache.store_built = store_built
        shutil.rmtree(folder, ignore_errors=True)
    return compiles[1:], stores[1:]


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.2f} [{min(samples) * 1e3:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", default="0,1000,10000")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    for count in map(int, args.entries.split(",")):
        compiles, stores = measure(count, args.repeat)
        print(f"{count} entries: compile {_ms(compiles)} ms, store {_ms(stores)} ms")


if __name__ == "__main__":
    main()
