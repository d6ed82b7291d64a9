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
    back on. (Another thread's trace may turn it back on early; that only costs time.)"""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
