"""pytest plugin for scripts/catalyst_suite.py: Catalyst's frontend tests served by cofactor.

Loaded with `-p catalyst_suite_shim` in the child pytest process. It

- provides the modules `catsuite_catalyst` and `catsuite_jax`: the harness rewrote the test
  files' `import catalyst...` / `import jax...` lines to these names, so PennyLane itself never
  sees a `jax` or `catalyst` package (its code paths stay those of a JAX-less install);
- `catsuite_catalyst.X` is `cofactor.X` (and `catalyst.A.B` is `cofactor.A.B` where that module
  exists); Catalyst names cofactor lacks are *placeholders*;
- `catsuite_jax.numpy` is numpy (Catalyst enables 64-bit JAX, so dtypes agree),
  `jax.tree_util` is PennyLane's pytree functions, `jax.config.update` a no-op; any other JAX
  name (`jax.jit`, `jax.grad`, `jax.Array`, `jnp.<name numpy lacks>`) is a placeholder;
- a placeholder raises `CatsuiteNotApplicable` (a BaseException, so no `except Exception` and
  no `pytest.raises(Exception)` swallows it) when the test uses it: the test is "not
  applicable" (it needs real JAX or a Catalyst internal), not a cofactor failure;
- redirects `qml.qjit(compiler="catalyst")` (PennyLane's default) to cofactor;
- deselects the program-capture variants (`capture_mode=True`, `use_capture*` fixtures,
  `use_both_frontend[capture]`): PennyLane's program capture needs JAX;
- records every test's outcome in $CATSUITE_OUT (JSON) with a per-test alarm
  ($CATSUITE_TEST_TIMEOUT seconds).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
import types

import numpy as np

MARK = "[catsuite:n/a]"


class CatsuiteNotApplicable(BaseException):
    """The test used JAX or a Catalyst internal that has no cofactor counterpart."""


class CatsuiteTimeout(BaseException):
    """The test ran past the harness's per-test limit."""


def _na(what: str) -> CatsuiteNotApplicable:
    return CatsuiteNotApplicable(f"{MARK} {what}")


_collecting = {"on": True}  # while pytest imports the test files


class _PlaceholderValue:
    """What a placeholder returns when called while the test files are imported (e.g. in a
    `parametrize` list): the tests that use it are then the ones marked not applicable."""

    def __init__(self, what: str):
        object.__setattr__(self, "_what", what)

    def __repr__(self):
        if not _collecting["on"]:  # a test compares it or prints it
            raise _na(object.__getattribute__(self, "_what") + "()")
        return object.__getattribute__(self, "_what").rsplit(".", 1)[-1]

    def __getattr__(self, name):
        if name.startswith("_") or name.startswith("pytest"):
            raise AttributeError(name)
        raise _na(f"{object.__getattribute__(self, '_what')}().{name}")

    def __call__(self, *a, **k):
        raise _na(object.__getattribute__(self, "_what") + "()")

    def __eq__(self, other):
        raise _na(object.__getattribute__(self, "_what") + "()")

    __hash__ = object.__hash__


class _PlaceholderMeta(type):
    def __call__(cls, *a, **k):
        if _collecting["on"]:
            return _PlaceholderValue(cls._what)
        raise _na(cls._what)

    def __getattr__(cls, name):
        # pytest and mock probe private names while collecting (and dunders at any time):
        # those are plain misses. A test calling a private helper of Catalyst's is n/a.
        private = name.startswith("_") and (_collecting["on"] or name.startswith("__"))
        if private or name.startswith("pytest"):
            raise AttributeError(name)
        raise _na(f"{cls._what}.{name}")

    def __instancecheck__(cls, obj):
        raise _na(cls._what)

    def __subclasscheck__(cls, sub):
        raise _na(cls._what)

    def __getitem__(cls, key):
        raise _na(cls._what)

    def __enter__(cls):  # `with catalyst.disable_autograph:`
        raise _na(cls._what)

    def __exit__(cls, *exc):
        return False


def placeholder(what: str) -> type:
    """A stand-in for a name cofactor lacks; any use of it marks the test not applicable."""
    return _PlaceholderMeta(what.rsplit(".", 1)[-1], (), {"_what": what})


# Catalyst flags a test may set that change no value cofactor computes: with
# `autograph_strict_conversion`, Catalyst's autograph raises where it would otherwise fall back
# to running a loop in Python, which cofactor always does for static loops. A test that only
# checks values runs; one that expects the strict refusal is reported n/a (see
# pytest_runtest_logreport).
_NEUTRAL_FLAGS = ("autograph_strict_conversion",)


class _ProxyModule(types.ModuleType):
    """A module whose missing attributes are placeholders (so `from m import X` collects)."""

    def __init__(self, name: str, real: types.ModuleType | None, what: str):
        super().__init__(name)
        self.__path__ = []  # a package: submodules go through the finder
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_what", what)

    def __setattr__(self, name, value):
        # a test setting a Catalyst flag (monkeypatch.setattr("catalyst.autograph_...", ..))
        real = self.__dict__.get("_real")
        if self.__name__ == "catsuite_catalyst" and name in _NEUTRAL_FLAGS:
            super().__setattr__(name, value)  # (see _NEUTRAL_FLAGS)
            return
        if self.__name__.startswith("catsuite_catalyst") and not hasattr(real, name):
            if not name.startswith("__") and not isinstance(value, types.ModuleType):
                raise _na(f"sets {self.__dict__.get('_what')}.{name}")
        super().__setattr__(name, value)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        real = object.__getattribute__(self, "_real")
        if real is not None and hasattr(real, name):
            return getattr(real, name)
        if self.__name__.startswith("catsuite_catalyst."):
            # Catalyst re-exports its public API from submodules
            # (catalyst.api_extensions.control_flow.switch is catalyst.switch).
            import cofactor

            if name in cofactor.__all__:
                return getattr(cofactor, name)
        full = f"{self.__name__}.{name}"
        sub = sys.modules.get(full)
        if sub is not None:
            return sub
        return placeholder(f"{object.__getattribute__(self, '_what')}.{name}")


# --------------------------------------------------------------------------------- jax
def _jax_modules() -> dict[str, types.ModuleType]:
    import pennylane as qml

    jnp = _ProxyModule("catsuite_jax.numpy", np, "needs JAX: jax.numpy")
    jnp.linalg = _ProxyModule("catsuite_jax.numpy.linalg", np.linalg, "needs JAX: jnp.linalg")
    # JAX documents that jnp.empty/empty_like return zeros (XLA has no uninitialised arrays)
    jnp.empty = lambda shape, dtype=None, **k: np.zeros(shape, dtype=dtype)
    jnp.empty_like = lambda a, dtype=None, **k: np.zeros_like(a, dtype=dtype)

    tu = _ProxyModule("catsuite_jax.tree_util", None, "needs JAX: jax.tree_util")

    def tree_flatten(tree, is_leaf=None):
        if is_leaf is not None:
            raise _na("jax.tree_util.tree_flatten(is_leaf=...)")
        return qml.pytrees.flatten(tree)

    def tree_unflatten(treedef, leaves):
        return qml.pytrees.unflatten(list(leaves), treedef)

    def tree_map(f, tree, *rest):
        leaves, treedef = qml.pytrees.flatten(tree)
        others = [qml.pytrees.flatten(r)[0] for r in rest]
        return qml.pytrees.unflatten([f(*xs) for xs in zip(leaves, *others, strict=True)], treedef)

    tu.tree_flatten = tree_flatten
    tu.tree_unflatten = tree_unflatten
    tu.tree_map = tree_map
    tu.tree_leaves = lambda tree: qml.pytrees.flatten(tree)[0]
    tu.tree_structure = lambda tree: qml.pytrees.flatten(tree)[1]
    tu.tree_all = lambda tree: all(qml.pytrees.flatten(tree)[0])

    jax = _ProxyModule("catsuite_jax", None, "needs JAX: jax")
    jax.numpy = jnp
    jax.tree_util = tu
    jax.__version__ = "0.0.0+catsuite-shim"
    jax.config = types.SimpleNamespace(
        update=lambda *a, **k: None,
        x64_enabled=True,
        jax_enable_x64=True,
        values={"jax_enable_x64": True},
    )
    # JAX's errors for a traced value where Python needs a concrete one: cofactor raises
    # CompileError (naming the value and what to use instead) in those places
    import cofactor

    errors = _ProxyModule("catsuite_jax.errors", None, "needs JAX: jax.errors")
    errors.TracerBoolConversionError = cofactor.CompileError
    errors.TracerIntegerConversionError = cofactor.CompileError
    errors.ConcretizationTypeError = cofactor.CompileError
    jax.errors = errors
    src = _ProxyModule("catsuite_jax._src", None, "needs JAX: jax._src")
    src.tree_util = tu
    return {
        "catsuite_jax": jax,
        "catsuite_jax.numpy": jnp,
        "catsuite_jax.numpy.linalg": jnp.linalg,
        "catsuite_jax.tree_util": tu,
        "catsuite_jax.errors": errors,
        "catsuite_jax._src": src,
        "catsuite_jax._src.tree_util": tu,
    }


# ---------------------------------------------------------------------------- catalyst
def _converted(fn) -> bool:
    import cofactor

    try:
        cofactor.autograph_source(fn)
    except cofactor.AutoGraphError:
        return False
    return True


def _catalyst_module(name: str) -> types.ModuleType:
    """`catsuite_catalyst.a.b` -> a proxy of `cofactor.a.b` (or of nothing)."""
    import cofactor

    rest = name[len("catsuite_catalyst") :]
    catalyst_name = "catalyst" + rest
    if rest == ".utils.exceptions":
        real = types.SimpleNamespace(
            CompileError=cofactor.CompileError,
            DifferentiableCompileError=cofactor.DifferentiableCompileError,
        )
    elif rest == ".autograph.transformer":
        # Catalyst's tests ask its transformer whether a function was converted
        # (`TRANSFORMER.has_cache(fn)`); cofactor's `autograph_source` answers the same question
        real = types.SimpleNamespace(TRANSFORMER=types.SimpleNamespace(has_cache=_converted))
    else:
        real = None
        target = "cofactor" + rest
        try:
            if importlib.util.find_spec(target) is not None:
                real = importlib.import_module(target)
        except (ImportError, ValueError):
            real = None
        attribute = getattr(cofactor, rest[1:], None) if rest.count(".") == 1 else None
        if real is None and isinstance(attribute, types.ModuleType):  # cofactor.passes
            real = attribute
    return _ProxyModule(name, real, f"Catalyst internal: {catalyst_name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self):
        self._jax = None

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("catsuite_jax", "catsuite_catalyst"):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        name = spec.name
        if name.startswith("catsuite_jax"):
            if self._jax is None:
                self._jax = _jax_modules()
            if name in self._jax:
                return self._jax[name]
            return _ProxyModule(name, None, "needs JAX: " + name.replace("catsuite_", "", 1))
        return _catalyst_module(name)

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())


# ------------------------------------------------------------------ qml.qjit redirection
def _redirect_qjit():
    import pennylane as qml
    import pennylane.compiler as plc
    import pennylane.compiler.qjit_api as qapi

    orig = qapi.qjit

    def qjit(fn=None, *args, compiler="catalyst", **kwargs):
        if compiler == "catalyst":
            compiler = "cofactor"
        return orig(fn, *args, compiler=compiler, **kwargs)

    qapi.qjit = qjit
    plc.qjit = qjit
    qml.qjit = qjit


_redirect_qjit()


# ------------------------------------------------------------------------- pytest hooks
_CAPTURE_FIXTURES = {"use_capture", "use_capture_dgraph"}
_records: list[dict] = []
_na_deselected: list[str] = []


def _needs_capture(item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    if names & _CAPTURE_FIXTURES:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("capture_mode") is True or params.get("use_both_frontend") == "capture":
        return True
    return False


def pytest_collection_finish(session):
    _collecting["on"] = False


def pytest_collection_modifyitems(session, config, items):
    keep = []
    for it in items:
        if _needs_capture(it):
            _na_deselected.append(it.nodeid)
        else:
            keep.append(it)
    dropped = [it for it in items if it.nodeid in set(_na_deselected)]
    items[:] = keep
    if dropped:
        config.hook.pytest_deselected(items=dropped)


def _alarm(signum, frame):
    raise CatsuiteTimeout(f"test ran past {os.environ.get('CATSUITE_TEST_TIMEOUT')} s")


def pytest_runtest_setup(item):
    limit = int(os.environ.get("CATSUITE_TEST_TIMEOUT", "0"))
    if limit > 0:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(limit)
    item._catsuite_t0 = time.perf_counter()


def pytest_runtest_teardown(item, nextitem):
    signal.alarm(0)


def _message(report) -> str:
    lr = report.longrepr
    crash = getattr(lr, "reprcrash", None)
    if crash is not None:
        return crash.message
    if isinstance(lr, tuple) and len(lr) == 3:  # skip: (file, line, reason)
        return str(lr[2])
    errors = [ln[1:].strip() for ln in str(lr).splitlines() if ln.startswith("E ")]
    return errors[0] if errors else str(lr)[-2000:]


def pytest_runtest_logreport(report):
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    outcome = report.outcome
    if hasattr(report, "wasxfail"):
        outcome = "xpassed" if report.outcome in ("passed", "failed") else "xfailed"
        if report.outcome == "skipped":
            outcome = "xfailed"
    msg = "" if outcome in ("passed", "xpassed") else _message(report)
    if outcome == "failed" and report.when == "setup":
        msg = "[setup] " + msg
    strict = getattr(sys.modules.get("catsuite_catalyst"), "autograph_strict_conversion", False)
    if outcome == "failed" and strict is True and msg.startswith("Failed: DID NOT RAISE"):
        msg = f"{MARK} Catalyst's strict autograph conversion refuses what cofactor runs"
    _records.append(
        {
            "id": report.nodeid,
            "outcome": outcome,
            "msg": msg[:2000],
            "seconds": round(report.duration, 2),
        }
    )


def pytest_collectreport(report):
    if report.failed:
        text = str(report.longrepr)
        errors = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
        msg = "[collection] " + (errors[-1] if errors else text[-300:])
        _records.append({"id": report.nodeid, "outcome": "error", "msg": msg, "seconds": 0})


def pytest_sessionfinish(session):
    for nodeid in _na_deselected:
        _records.append(
            {
                "id": nodeid,
                "outcome": "n/a",
                "msg": f"{MARK} program capture (plxpr) needs JAX",
                "seconds": 0,
            }
        )
    out = os.environ.get("CATSUITE_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(_records, f, indent=1)
