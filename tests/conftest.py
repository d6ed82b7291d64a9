"""Session-wide test set-up: every compiled library goes to one fresh cache folder per
test session, so each program is compiled once per session (and really compiled: nothing
from an earlier session's cache is reused). The Enzyme plugin is not in that folder, so
moving the cache does not move it."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def session_kernel_cache(tmp_path_factory):
    saved = os.environ.get("COFACTOR_CACHE_DIR")
    os.environ["COFACTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("cofactor-cache"))
    yield
    if saved is None:
        os.environ.pop("COFACTOR_CACHE_DIR", None)
    else:
        os.environ["COFACTOR_CACHE_DIR"] = saved
