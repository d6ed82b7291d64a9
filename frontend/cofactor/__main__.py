"""Command line: `python -m cofactor doctor`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cofactor", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("doctor", help="show the toolchain and run the end-to-end self-test")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        from cofactor.doctor import main as doctor_main

        return doctor_main()
    return 2


if __name__ == "__main__":
    sys.exit(main())
