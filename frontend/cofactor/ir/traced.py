"""A traced module: its disk-cache fingerprint at once, its text only when needed.

The first call of a function whose library is in the disk cache needs the module's key,
not its text; printing it was a third of that call. `TracedModule` keeps the module and the
text the frontend splices into it (helpers written as MLIR text), gives the fingerprint
(`cofactor.ir.fingerprint`) and prints the text on first use: when the library is
compiled, or when `QJIT.mlir` (or a stage of the library) is asked for.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

from xdsl.dialects.builtin import ModuleOp

from cofactor.ir.fingerprint import module_fingerprint
from cofactor.ir.printer import module_text


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector off while a trace runs: a trace allocates hundreds of thousands
    of long-lived objects (IR, operators), and the collections they trigger cost a quarter of
    the trace of a long circuit. Garbage made meanwhile is collected once the collector is
    back on (see `_promote_young`). (Another thread's trace may turn it back on early; that
    only costs time.)"""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _promote_young()
            gc.enable()


#: Objects `_promote_young` moved to the oldest generation since the last full collection.
_promoted = 0
_full_collections_seen = -1
#: Beyond this many, traces leave their objects to the young generation again until Python
#: runs a full collection (which frees the garbage of the traces promoted before it).
PROMOTE_LIMIT = 200_000


def _promote_young() -> None:
    """Move the objects made while the collector was paused to the oldest generation.

    Re-enabled with thousands of new objects in the young generation, the collector runs at
    the next allocation and walks every one of them: on the first call of a gradient of
    tanh(W x) that was ~1 ms, more than the trace's printing, for objects that are nearly
    all the module and live on. `gc.freeze()` + `gc.unfreeze()` moves every tracked object
    to the oldest generation without walking it (two list splices). What the trace left as
    cyclic garbage is freed by the next full collection instead of the next young one; so
    that it cannot pile up, at most PROMOTE_LIMIT objects are promoted between two full
    collections (Python runs those when the old generation has grown by a quarter; after
    the limit, traces leave their objects to the young generation as before, whose
    survivors count towards that growth). Not done when the program froze objects itself
    (`gc.unfreeze()` would release them)."""
    global _promoted, _full_collections_seen
    young = gc.get_count()[0]
    if young <= gc.get_threshold()[0] or gc.get_freeze_count():
        return  # no collection due, or frozen objects of the program's own
    full = gc.get_stats()[-1]["collections"]
    if full != _full_collections_seen:  # the garbage promoted before has been collected
        _full_collections_seen, _promoted = full, 0
    if _promoted + young > PROMOTE_LIMIT:
        return
    _promoted += young
    gc.freeze()
    gc.unfreeze()


class TracedModule:
    """The module of one trace, and the MLIR text (`helpers`) spliced in before its end."""

    def __init__(self, module: ModuleOp, helpers: list[str]) -> None:
        self._module: ModuleOp | None = module
        self._helpers = helpers
        self._fingerprint: str | None = None
        self._text: str | None = None
        self._lock = threading.Lock()  # (a library's text may be asked for from threads)

    @property
    def fingerprint(self) -> str:
        """The module's fingerprint (with the helpers' text): the disk cache's key."""
        if self._fingerprint is None:
            with self._lock:
                if self._fingerprint is None:
                    if self._module is None:  # printed and dropped: hash the text instead
                        raise RuntimeError("the module was dropped before its fingerprint")
                    self._fingerprint = module_fingerprint(self._module, self._helpers)
        return self._fingerprint

    def text(self) -> str:
        """The module's MLIR text (printed once). The module itself is dropped afterwards
        when its fingerprint is known: the text is all that is needed from then on."""
        if self._text is None:
            with self._lock:
                if self._text is None:
                    assert self._module is not None
                    with gc_paused():
                        text = module_text(self._module)
                    if self._helpers:  # splice them in before the module's closing brace
                        text = text[: text.rindex("}")] + "".join(self._helpers) + "}\n"
                    self._text = text
                    if self._fingerprint is not None:
                        self._module = None
        return self._text
