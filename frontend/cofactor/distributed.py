"""Running compiled programs SPMD over MPI ranks (docs/distributed.md).

Distribution is switched on in one place: the environment variable ``COFACTOR_MPI=1`` of
the job (``mpirun -n 4 -x COFACTOR_MPI=1 python program.py``). Every rank then runs the
same program; the runtime (libcofactor_runtime.so) creates its devices sharded over the
ranks (libcofactor_runtime_mpi.so, loaded only then), and every result is identical on every
rank. The program text is the same with or without MPI.

An exception that reaches the top level on any rank must end the whole job: the other ranks
would otherwise wait forever in their next exchange. `install_excepthook` makes the runtime
print the traceback and call MPI_Abort; the launcher installs it when it first loads the
runtime with COFACTOR_MPI=1.
"""

from __future__ import annotations

import ctypes
import os
import sys
import traceback
from typing import Any


def requested() -> bool:
    """Whether this process runs with COFACTOR_MPI set (to anything but '' or '0')."""
    return os.environ.get("COFACTOR_MPI", "") not in ("", "0")


def rank_and_size(lib: ctypes.CDLL) -> tuple[int, int]:
    """This process's MPI rank and the number of ranks (initialises MPI if needed)."""
    from cofactor import runtime_lib

    rank, size = ctypes.c_int64(), ctypes.c_int64()
    lib.cf_rt_distributed_info(ctypes.byref(rank), ctypes.byref(size))
    runtime_lib.check_error(lib)
    return rank.value, size.value


_installed = False


def install_excepthook(lib: ctypes.CDLL) -> None:
    """An uncaught exception on this rank prints its traceback and ends every rank."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        text = "".join(traceback.format_exception(kind, value, tb))
        try:
            lib.cf_rt_distributed_abort(text.encode("utf-8", "replace"))
        finally:  # MPI was not initialised: nothing to abort, report as usual
            previous(kind, value, tb)

    sys.excepthook = hook
