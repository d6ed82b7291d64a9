"""Session-wide test set-up: every compiled library goes to one fresh cache folder per
test session, so each program is compiled once per session (and really compiled: nothing
from an earlier session's cache is reused)."""

from __future__ import annotations

import os

import pytest

from cofactor import toolchain


@pytest.fixture(scope="session", autouse=True)
def session_kernel_cache(tmp_path_factory):
    # The Enzyme plugin lives in the user's cache folder; pin its path before moving the
    # cache so that discovery still finds it.
    saved = {
        name: os.environ.get(name) for name in ("COFACTOR_CACHE_DIR", "COFACTOR_ENZYME_PLUGIN")
    }
    os.environ["COFACTOR_ENZYME_PLUGIN"] = str(toolchain.find("enzyme"))
    os.environ["COFACTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("cofactor-cache"))
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
