"""Frontend tests compile real programs with the real toolchain (`make test` builds it
first); a missing tool fails the test with the toolchain's message rather than skipping."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_toolchain: compiles and runs a program")
